/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "session.h"

struct _LlmSession {
  gint ref_count;
  GMutex lock;
  LlmContext *ctx;
  LlmSampler *sampler;
  GArray *ids;                /* gint32 */
  float *logits;
  gboolean have_logits;
};

LlmSession *
llm_session_new (LlmModel *model, const LlmSessionConfig *config, GError **error)
{
  LlmContext *ctx = llm_context_new (model, &config->kv, config->n_threads, error);
  if (ctx == NULL)
    return NULL;
  float *logits = g_try_new (float, model->hp.n_vocab);
  if (logits == NULL) {
    llm_context_free (ctx);
    g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
        "out of memory for %u logits", model->hp.n_vocab);
    return NULL;
  }
  LlmSession *s = g_new0 (LlmSession, 1);
  s->ref_count = 1;
  g_mutex_init (&s->lock);
  s->ctx = ctx;
  s->sampler = llm_sampler_new (&config->sampler);
  s->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  s->logits = logits;
  return s;
}

LlmSession *
llm_session_ref (LlmSession *s)
{
  g_atomic_int_inc (&s->ref_count);
  return s;
}

void
llm_session_unref (LlmSession *s)
{
  if (s == NULL || !g_atomic_int_dec_and_test (&s->ref_count))
    return;
  llm_context_free (s->ctx);
  llm_sampler_free (s->sampler);
  g_array_free (s->ids, TRUE);
  g_free (s->logits);
  g_mutex_clear (&s->lock);
  g_free (s);
}

LlmModel *
llm_session_model (LlmSession *s)
{
  return llm_context_model (s->ctx);
}

static gboolean
feed (LlmSession *s, const gint32 *ids, guint n, gint32 *next, GError **error)
{
  g_mutex_lock (&s->lock);
  gboolean ok = llm_context_eval (s->ctx, ids, n, s->logits, FALSE, error);
  if (ok) {
    g_array_append_vals (s->ids, ids, n);
    for (guint i = 0; i < n; i++)
      llm_sampler_accept (s->sampler, ids[i]);
    s->have_logits = TRUE;
    *next = llm_sampler_sample (s->sampler, s->logits, llm_session_model (s)->hp.n_vocab);
  }
  g_mutex_unlock (&s->lock);
  return ok;
}

gboolean
llm_session_prefill (LlmSession *s, const gint32 *ids, guint n, gint32 *next, GError **error)
{
  g_return_val_if_fail (n > 0, FALSE);
  return feed (s, ids, n, next, error);
}

gboolean
llm_session_step (LlmSession *s, gint32 id, gint32 *next, GError **error)
{
  return feed (s, &id, 1, next, error);
}

guint
llm_session_n_ids (LlmSession *s)
{
  return s->ids->len;
}

const float *
llm_session_logits (LlmSession *s)
{
  return s->have_logits ? s->logits : NULL;
}

void
llm_session_reset (LlmSession *s)
{
  g_mutex_lock (&s->lock);
  llm_kv_cache_clear (llm_context_kv (s->ctx));
  llm_sampler_reset (s->sampler);
  g_array_set_size (s->ids, 0);
  s->have_logits = FALSE;
  g_mutex_unlock (&s->lock);
}

gsize
llm_session_kv_bytes (LlmSession *s)
{
  return llm_kv_cache_bytes (llm_context_kv (s->ctx));
}
