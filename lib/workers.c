/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "workers.h"
#include "engine.h"

struct _LlmWorkers {
  gint ref_count;      /* under registry_lock */
  int n_threads;
  LlmThreadPool *pool;
  GMutex run_lock;
};

static GMutex registry_lock;
static GHashTable *registry;  /* n_threads -> LlmWorkers* (not referenced) */

LlmWorkers *
llm_workers_get (int n_threads, GError **error)
{
  /* "One per core" and that many are one pool. */
  if (n_threads <= 0)
    n_threads = llm_threadpool_default_threads ();

  g_mutex_lock (&registry_lock);
  if (registry == NULL)
    registry = g_hash_table_new (g_direct_hash, g_direct_equal);
  LlmWorkers *w = g_hash_table_lookup (registry, GINT_TO_POINTER (n_threads));
  if (w != NULL) {
    w->ref_count++;
    g_mutex_unlock (&registry_lock);
    return w;
  }
  LlmThreadPool *pool = llm_threadpool_new (n_threads);
  if (pool == NULL) {
    g_mutex_unlock (&registry_lock);
    g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
        "cannot start %d worker threads", n_threads);
    return NULL;
  }
  w = g_new0 (LlmWorkers, 1);
  w->ref_count = 1;
  w->n_threads = n_threads;
  w->pool = pool;
  g_mutex_init (&w->run_lock);
  g_hash_table_insert (registry, GINT_TO_POINTER (n_threads), w);
  g_mutex_unlock (&registry_lock);
  return w;
}

void
llm_workers_unref (LlmWorkers *w)
{
  if (w == NULL)
    return;
  g_mutex_lock (&registry_lock);
  gboolean last = --w->ref_count == 0;
  if (last)
    g_hash_table_remove (registry, GINT_TO_POINTER (w->n_threads));
  g_mutex_unlock (&registry_lock);
  if (!last)
    return;
  llm_threadpool_free (w->pool);
  g_mutex_clear (&w->run_lock);
  g_free (w);
}

LlmThreadPool *
llm_workers_lock (LlmWorkers *w)
{
  g_mutex_lock (&w->run_lock);
  return w->pool;
}

void
llm_workers_unlock (LlmWorkers *w)
{
  g_mutex_unlock (&w->run_lock);
}

int
llm_workers_n_threads (const LlmWorkers *w)
{
  return w->n_threads;
}
