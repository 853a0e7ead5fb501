/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "session-pool.h"

typedef struct {
  LlmSession *session;
  gboolean busy;
  gboolean kept;        /* acquired for a kept conversation */
} Slot;

struct _LlmSessionPool {
  gint ref_count;
  GMutex lock;
  GCond cond;
  LlmEngine *engine;
  LlmSessionConfig config;
  guint max_sessions;
  GPtrArray *slots;     /* Slot*; [0] is the kept conversation */
  gint flushing;               /* under lock; read atomically by the engine */
};

/* Lets go of every slot. A busy session's reference goes when it comes
 * back: llm_session_pool_release no longer finds it. */
static void
drop_slots (LlmSessionPool *pool)
{
  for (guint i = 0; i < pool->slots->len; i++) {
    Slot *slot = g_ptr_array_index (pool->slots, i);
    if (!slot->busy)
      llm_session_unref (slot->session);
    g_free (slot);
  }
  g_ptr_array_set_size (pool->slots, 0);
}

LlmSessionPool *
llm_session_pool_new (LlmEngine *engine, const LlmSessionConfig *config, guint max_sessions)
{
  g_return_val_if_fail (max_sessions > 0, NULL);

  LlmSessionPool *pool = g_new0 (LlmSessionPool, 1);
  pool->ref_count = 1;
  g_mutex_init (&pool->lock);
  g_cond_init (&pool->cond);
  pool->engine = llm_engine_ref (engine);
  pool->config = *config;
  pool->max_sessions = max_sessions;
  pool->slots = g_ptr_array_new ();
  return pool;
}

LlmSessionPool *
llm_session_pool_ref (LlmSessionPool *pool)
{
  g_atomic_int_inc (&pool->ref_count);
  return pool;
}

void
llm_session_pool_unref (LlmSessionPool *pool)
{
  if (pool == NULL || !g_atomic_int_dec_and_test (&pool->ref_count))
    return;
  drop_slots (pool);
  g_ptr_array_free (pool->slots, TRUE);
  llm_engine_unref (pool->engine);
  g_mutex_clear (&pool->lock);
  g_cond_clear (&pool->cond);
  g_free (pool);
}

static Slot *
find_idle (LlmSessionPool *pool, gboolean keep_context)
{
  guint n = keep_context ? MIN (pool->slots->len, 1) : pool->slots->len;
  for (guint i = 0; i < n; i++) {
    Slot *slot = g_ptr_array_index (pool->slots, i);
    if (!slot->busy)
      return slot;
  }
  return NULL;
}

LlmSession *
llm_session_pool_acquire (LlmSessionPool *pool, gboolean keep_context, GError **error)
{
  Slot *found = NULL;

  g_mutex_lock (&pool->lock);
  while (!pool->flushing) {
    found = find_idle (pool, keep_context);
    gboolean may_make = keep_context ? pool->slots->len == 0
        : pool->slots->len < pool->max_sessions;
    if (found == NULL && may_make) {
      /* A session allocates its cache's first blocks and logits; done
       * unlocked so that returning sessions are not held up. */
      g_mutex_unlock (&pool->lock);
      LlmSession *session = llm_session_new (pool->engine, &pool->config, error);
      g_mutex_lock (&pool->lock);
      if (session == NULL)
        break;
      found = g_new0 (Slot, 1);
      found->session = session;
      g_ptr_array_add (pool->slots, found);
    }
    if (found)
      break;
    g_cond_wait (&pool->cond, &pool->lock);
  }
  if (found) {
    found->busy = TRUE;
    found->kept = keep_context;
  }
  g_mutex_unlock (&pool->lock);
  return found ? found->session : NULL;
}

static Slot *
find_slot (LlmSessionPool *pool, LlmSession *session)
{
  for (guint i = 0; i < pool->slots->len; i++) {
    Slot *s = g_ptr_array_index (pool->slots, i);
    if (s->session == session)
      return s;
  }
  return NULL;
}

/* A session that no conversation continues gives its KV blocks back
 * while it waits: with kv-full=refuse, finished streams must not hold
 * memory a new stream is refused for. Done before the slot turns idle
 * (the session is still ours) and outside the pool's lock. */
void
llm_session_pool_release (LlmSessionPool *pool, LlmSession *session)
{
  g_mutex_lock (&pool->lock);
  Slot *slot = find_slot (pool, session);
  const gboolean kept = slot != NULL && slot->kept;
  g_mutex_unlock (&pool->lock);
  if (!kept)
    llm_session_release_kv (session);

  g_mutex_lock (&pool->lock);
  slot = find_slot (pool, session);
  if (slot) {
    slot->busy = FALSE;
    g_cond_broadcast (&pool->cond);
  } else {
    llm_session_unref (session);   /* dropped while busy: see drop_slots */
  }
  g_mutex_unlock (&pool->lock);
}

void
llm_session_pool_set_flushing (LlmSessionPool *pool, gboolean flushing)
{
  g_mutex_lock (&pool->lock);
  g_atomic_int_set (&pool->flushing, flushing);
  g_cond_broadcast (&pool->cond);
  g_mutex_unlock (&pool->lock);
}

const gint *
llm_session_pool_flushing_flag (LlmSessionPool *pool)
{
  return &pool->flushing;
}

void
llm_session_pool_clear (LlmSessionPool *pool)
{
  g_mutex_lock (&pool->lock);
  drop_slots (pool);
  g_mutex_unlock (&pool->lock);
}
