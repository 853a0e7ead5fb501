/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "session.h"

#include <string.h>

#include "forward.h"
#include "model-private.h"

struct _LlmSession {
  gint ref_count;
  GMutex lock;
  LlmEngine *engine;
  LlmSeq *seq;
  LlmSampler *sampler;
  LlmSamplerParams sampler_params;  /* as set: repeat_last_n may be -1 */
  gint repeat_last_n;               /* as the sampler runs it: -1 resolved */
  guint32 sink;               /* positions a window never evicts */
  GArray *ids;                /* gint32: what the cache holds, slot by slot;
                               * LLM_TOKEN_EMBD for a media row */
  GArray *media;              /* float: the media rows of ids, n_embd each, in order,
                               * for feeding the history again after a preemption */
  float *logits;
  gboolean have_logits;
  float *draft_logits;        /* a verification's rows, grown as needed */
  guint draft_rows;
};

/* Replaces the sampler by a fresh one for @params: its random sequence
 * starts at the seed, its penalty window is empty. */
static void
install_sampler (LlmSession *s, const LlmSamplerParams *params)
{
  /* "The whole history" is the whole context: what the cache holds. */
  LlmSamplerParams sp = *params;
  if (sp.repeat_last_n < 0)
    sp.repeat_last_n = (gint) MIN (llm_kv_cache_capacity (llm_seq_kv (s->seq)), G_MAXINT);
  llm_sampler_free (s->sampler);
  s->sampler = llm_sampler_new (&sp);
  s->sampler_params = *params;
  s->repeat_last_n = sp.repeat_last_n;
}

LlmSession *
llm_session_new (LlmEngine *engine, const LlmSessionConfig *config, GError **error)
{
  LlmSeq *seq = llm_seq_new (engine, &config->kv, error);
  if (seq == NULL)
    return NULL;
  const guint32 n_vocab = llm_engine_model (engine)->hp.n_vocab;
  float *logits = g_try_new (float, n_vocab);
  if (logits == NULL) {
    llm_seq_free (seq);
    g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
        "out of memory for %u logits", n_vocab);
    return NULL;
  }
  LlmSession *s = g_new0 (LlmSession, 1);
  s->ref_count = 1;
  g_mutex_init (&s->lock);
  s->engine = llm_engine_ref (engine);
  s->seq = seq;
  install_sampler (s, &config->sampler);
  s->sink = config->kv.policy == LLM_KV_POLICY_SINK_WINDOW ? config->kv.sink : 0;
  s->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  s->media = g_array_new (FALSE, FALSE, sizeof (float));
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
  llm_seq_free (s->seq);
  llm_engine_unref (s->engine);
  llm_sampler_free (s->sampler);
  g_array_free (s->ids, TRUE);
  g_array_free (s->media, TRUE);
  g_free (s->logits);
  g_free (s->draft_logits);
  g_mutex_clear (&s->lock);
  g_free (s);
}

LlmModel *
llm_session_model (LlmSession *s)
{
  return llm_engine_model (s->engine);
}

LlmEngine *
llm_session_engine (LlmSession *s)
{
  return s->engine;
}

LlmSeq *
llm_session_seq (LlmSession *s)
{
  return s->seq;
}

void
llm_session_set_cancel_flag (LlmSession *s, const gint *flag)
{
  llm_seq_set_cancel_flag (s->seq, flag);
}

/* A window policy dropped @count positions during a feed: always the
 * oldest past the sink, so the history drops the same ids. (Counted from
 * the cache's evictions, not read off its length: another stream may
 * preempt the cache as soon as the feed returns.) */
static guint
count_media (const gint32 *ids, guint n)
{
  guint m = 0;
  for (guint i = 0; i < n; i++)
    m += ids[i] == LLM_TOKEN_EMBD;
  return m;
}

/* Keeps the media rows of the first @n ids. */
static void
media_keep (LlmSession *s, guint n)
{
  const gsize n_embd = llm_session_model (s)->hp.n_embd;
  g_array_set_size (s->media, count_media ((const gint32 *) s->ids->data, n) * n_embd);
}

static void
follow_evictions (LlmSession *s, guint64 count)
{
  const guint sink = MIN (s->sink, s->ids->len);
  count = MIN (count, (guint64) (s->ids->len - sink));
  if (count == 0)
    return;
  const gint32 *ids = (const gint32 *) s->ids->data;
  const guint before = count_media (ids, sink), gone = count_media (ids + sink, (guint) count);
  if (gone > 0) {
    const gsize n_embd = llm_session_model (s)->hp.n_embd;
    g_array_remove_range (s->media, before * n_embd, gone * n_embd);
  }
  g_array_remove_range (s->ids, sink, (guint) count);
}

/* The repetition penalty sees the last repeat_last_n ids of the history. */
static void
refill_sampler_history (LlmSession *s)
{
  llm_sampler_forget_history (s->sampler);
  const guint n = s->ids->len;
  const guint from = s->repeat_last_n > 0 ? n - MIN (n, (guint) s->repeat_last_n) : n;
  for (guint i = from; i < n; i++)
    if (g_array_index (s->ids, gint32, i) >= 0)
      llm_sampler_accept (s->sampler, g_array_index (s->ids, gint32, i));
}

/* Times a feed recomputes a preempted cache before it gives up: another
 * stream may take the cache again between two of our forwards. */
#define MAX_RECOMPUTES 8

/* Submits @ids after what the session holds, logits into @logits (every
 * row's with @all_rows, else the last row's). If another stream took the
 * cache meanwhile, it is recomputed from the history and the request made
 * again: in one request when only the last logits are wanted, so the
 * sequence is not idle in between; else the history first, wanting
 * none. */
static gboolean
submit_locked (LlmSession *s, const gint32 *ids, const float *embd, guint n, float *logits,
    gboolean all_rows, GError **error)
{
  GError *err = NULL;
  const float *history_embd = (const float *) s->media->data;
  gboolean ok = llm_engine_submit_embd (s->engine, s->seq, ids, embd, n, logits, all_rows,
      &err);
  for (guint tries = 0; !ok && tries < MAX_RECOMPUTES
      && g_error_matches (err, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_PREEMPTED); tries++) {
    g_clear_error (&err);
    llm_seq_clear (s->seq);
    if (all_rows) {
      ok = (s->ids->len == 0 || llm_engine_submit_embd (s->engine, s->seq,
              (const gint32 *) s->ids->data, history_embd, s->ids->len, s->logits, FALSE, &err))
          && llm_engine_submit_embd (s->engine, s->seq, ids, embd, n, logits, TRUE, &err);
      continue;
    }
    g_autoptr (GArray) both = g_array_sized_new (FALSE, FALSE, sizeof (gint32),
        s->ids->len + n);
    g_array_append_vals (both, s->ids->data, s->ids->len);
    g_array_append_vals (both, ids, n);
    g_autoptr (GArray) both_embd = NULL;
    const guint new_media = embd ? count_media (ids, n) : 0;
    if (new_media > 0) {
      const gsize n_embd = llm_session_model (s)->hp.n_embd;
      both_embd = g_array_sized_new (FALSE, FALSE, sizeof (float), s->media->len
          + new_media * n_embd);
      g_array_append_vals (both_embd, s->media->data, s->media->len);
      g_array_append_vals (both_embd, embd, new_media * n_embd);
    }
    ok = llm_engine_submit_embd (s->engine, s->seq, (const gint32 *) both->data,
        both_embd ? (const float *) both_embd->data : history_embd, both->len, logits,
        FALSE, &err);
  }
  if (!ok)
    g_propagate_error (error, err);
  return ok;
}

static gboolean
feed_locked (LlmSession *s, const gint32 *ids, const float *embd, guint n, GError **error)
{
  const guint64 evicted = llm_kv_cache_n_evicted (llm_seq_kv (s->seq));
  if (!submit_locked (s, ids, embd, n, s->logits, FALSE, error))
    return FALSE;
  g_array_append_vals (s->ids, ids, n);
  if (embd != NULL)
    g_array_append_vals (s->media, embd, count_media (ids, n)
        * llm_session_model (s)->hp.n_embd);
  follow_evictions (s, llm_kv_cache_n_evicted (llm_seq_kv (s->seq)) - evicted);
  /* Media rows are not tokens the repetition penalty could hold back. */
  for (guint i = 0; i < n; i++)
    if (ids[i] >= 0)
      llm_sampler_accept (s->sampler, ids[i]);
  s->have_logits = TRUE;
  return TRUE;
}

gboolean
llm_session_feed (LlmSession *s, const gint32 *ids, guint n, GError **error)
{
  g_return_val_if_fail (n > 0, FALSE);
  g_mutex_lock (&s->lock);
  gboolean ok = feed_locked (s, ids, NULL, n, error);
  g_mutex_unlock (&s->lock);
  return ok;
}

gboolean
llm_session_feed_embd (LlmSession *s, const gint32 *ids, const float *embd, guint n,
    GError **error)
{
  g_return_val_if_fail (n > 0, FALSE);
  g_mutex_lock (&s->lock);
  gboolean ok = feed_locked (s, ids, embd, n, error);
  g_mutex_unlock (&s->lock);
  return ok;
}

/* What llm_session_verify can check in one forward: a verification must
 * leave the cache as the steps it stands for would, and an eviction cannot
 * be rolled back, so it stops where a step would evict, or checks what the
 * eviction its first row makes leaves room for. */
static guint
verify_room (LlmSession *s, guint n)
{
  return llm_kv_cache_rows_as_steps (llm_seq_kv (s->seq), n);
}

static gboolean
submit_all_logits (LlmSession *s, const gint32 *ids, guint n, GError **error)
{
  const guint32 n_vocab = llm_session_model (s)->hp.n_vocab;
  if (n > s->draft_rows) {
    g_free (s->draft_logits);
    s->draft_logits = g_try_new (float, (gsize) n * n_vocab);
    s->draft_rows = s->draft_logits != NULL ? n : 0;
    if (s->draft_logits == NULL) {
      g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
          "out of memory for %u rows of %u logits", n, n_vocab);
      return FALSE;
    }
  }
  return submit_locked (s, ids, NULL, n, s->draft_logits, TRUE, error);
}

gboolean
llm_session_verify (LlmSession *s, const gint32 *ids, guint n, gint32 *out, guint *n_out,
    GError **error)
{
  g_return_val_if_fail (n > 0 && ids != NULL && out != NULL && n_out != NULL, FALSE);
  g_mutex_lock (&s->lock);
  const guint32 n_vocab = llm_session_model (s)->hp.n_vocab;
  n = verify_room (s, n);
  const guint64 evicted = llm_kv_cache_n_evicted (llm_seq_kv (s->seq));
  if (!submit_all_logits (s, ids, n, error)) {
    g_mutex_unlock (&s->lock);
    return FALSE;
  }
  /* Row i's pick sees the penalty window of the steps before it, as
   * plain decoding would; a rejected draft never enters it. */
  guint i = 0;
  for (;; i++) {
    llm_sampler_accept (s->sampler, ids[i]);
    const float *row = s->draft_logits + (gsize) i * n_vocab;
    gboolean accepted = FALSE;
    out[i] = i + 1 < n ? llm_sampler_sample_draft (s->sampler, row, n_vocab, ids[i + 1],
        &accepted) : llm_sampler_sample (s->sampler, row, n_vocab);
    if (!accepted)
      break;
  }
  g_array_append_vals (s->ids, ids, i + 1);
  follow_evictions (s, llm_kv_cache_n_evicted (llm_seq_kv (s->seq)) - evicted);
  if (i + 1 < n)
    llm_seq_truncate (s->seq, s->ids->len);
  memcpy (s->logits, s->draft_logits + (gsize) i * n_vocab, n_vocab * sizeof (float));
  s->have_logits = TRUE;
  *n_out = i + 1;
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gint32
llm_session_sample (LlmSession *s)
{
  g_mutex_lock (&s->lock);
  gint32 next = -1;
  if (s->have_logits)
    next = llm_sampler_sample (s->sampler, s->logits, llm_session_model (s)->hp.n_vocab);
  g_mutex_unlock (&s->lock);
  return next;
}

void
llm_session_get_sampler (LlmSession *s, LlmSamplerParams *params)
{
  g_mutex_lock (&s->lock);
  *params = s->sampler_params;
  g_mutex_unlock (&s->lock);
}

void
llm_session_set_sampler (LlmSession *s, const LlmSamplerParams *params)
{
  g_mutex_lock (&s->lock);
  /* The same parameters again (every response of a kept conversation)
   * must not restart the random sequence: a seed gives one conversation,
   * not the same draws each turn. */
  if (!llm_sampler_params_equal (params, &s->sampler_params)) {
    install_sampler (s, params);
    /* The prompt was fed before the sampling element said how it
     * samples: the new penalty window starts from what the cache holds. */
    refill_sampler_history (s);
  }
  g_mutex_unlock (&s->lock);
}

gboolean
llm_session_prefill (LlmSession *s, const gint32 *ids, guint n, gint32 *next, GError **error)
{
  if (!llm_session_feed (s, ids, n, error))
    return FALSE;
  *next = llm_session_sample (s);
  return TRUE;
}

gboolean
llm_session_step (LlmSession *s, gint32 id, gint32 *next, GError **error)
{
  return llm_session_prefill (s, &id, 1, next, error);
}

guint
llm_session_n_ids (LlmSession *s)
{
  return s->ids->len;
}

const gint32 *
llm_session_ids (LlmSession *s)
{
  return (const gint32 *) s->ids->data;
}

const float *
llm_session_logits (LlmSession *s)
{
  return s->have_logits ? s->logits : NULL;
}

void
llm_session_truncate (LlmSession *s, guint n)
{
  g_mutex_lock (&s->lock);
  if (n < s->ids->len) {
    /* The sampler takes its accepts back, the random draws since them
     * too, as if they had never been; refilled from the ids the cache
     * still holds only past what it keeps (a window may have evicted
     * older ids that its penalty still saw). */
    guint dropped = 0;
    for (guint i = n; i < s->ids->len; i++)
      dropped += g_array_index (s->ids, gint32, i) >= 0;
    llm_seq_truncate (s->seq, n);
    media_keep (s, n);
    g_array_set_size (s->ids, n);
    if (!llm_sampler_rollback (s->sampler, dropped))
      refill_sampler_history (s);
    s->have_logits = FALSE;
  }
  g_mutex_unlock (&s->lock);
}

static void
forget (LlmSession *s, void (*empty) (LlmSeq *seq))
{
  g_mutex_lock (&s->lock);
  empty (s->seq);
  llm_sampler_reset (s->sampler);
  g_array_set_size (s->ids, 0);
  g_array_set_size (s->media, 0);
  s->have_logits = FALSE;
  g_mutex_unlock (&s->lock);
}

void
llm_session_reset (LlmSession *s)
{
  forget (s, llm_seq_clear);
}

void
llm_session_release_kv (LlmSession *s)
{
  forget (s, llm_seq_release);
}

gsize
llm_session_kv_bytes (LlmSession *s)
{
  return llm_seq_kv_bytes (s->seq);
}
