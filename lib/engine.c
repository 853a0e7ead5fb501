/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine: registry, batches of rows into forward chunks, KV
 * reservation per sequence (with the pool-full policy), and the
 * bookkeeping of positions. The layers themselves are in forward.c. */
#include "engine-private.h"
#include "model-private.h"

#include <string.h>

G_DEFINE_QUARK (llm-engine-error-quark, llm_engine_error)

#define DEFAULT_PREFILL_CHUNK LLM_FORWARD_CHUNK

static GMutex engines_lock;
static GHashTable *engines;   /* key -> LlmEngine* (not referenced) */

void
llm_engine_options_init (LlmEngineOptions *opts)
{
  *opts = (LlmEngineOptions) {
    .n_threads = 0,
    .kv_pool_bytes = 0,
    .kv_full = LLM_KV_FULL_REFUSE,
    .max_prefill_chunk = DEFAULT_PREFILL_CHUNK,
    .max_batch_wait_us = 0,
    .kv_time_slice_us = 0,
    .kernels = LLM_CPU_KERNELS_BEST,
  };
}

/* @opts (NULL: the defaults) with out-of-range values replaced. */
static void
resolve_options (const LlmEngineOptions *opts, LlmEngineOptions *o)
{
  if (opts)
    *o = *opts;
  else
    llm_engine_options_init (o);
  if (o->max_prefill_chunk == 0 || o->max_prefill_chunk > LLM_FORWARD_CHUNK)
    o->max_prefill_chunk = DEFAULT_PREFILL_CHUNK;
  /* "One per core" and that many are the same engine. */
  if (o->n_threads <= 0)
    o->n_threads = llm_threadpool_default_threads ();
}

LlmEngine *
llm_engine_new (LlmModel *model, const LlmEngineOptions *opts, GError **error)
{
  g_return_val_if_fail (model != NULL, NULL);
  LlmEngineOptions o;
  resolve_options (opts, &o);

  LlmWorkers *workers = llm_workers_get (o.n_threads, error);
  if (workers == NULL)
    return NULL;
  o.n_threads = llm_workers_n_threads (workers);
  const LlmEngineOptions asked = o;
  LlmBackend *be = llm_backend_cpu_new (o.kernels, o.n_threads, error);
  LlmWeights *weights = be ? llm_weights_get (model, be, error) : NULL;
  LlmForward *fwd = weights ? llm_forward_new (model, be, weights, error) : NULL;
  if (fwd == NULL) {
    llm_weights_unref (model, weights);
    llm_backend_unref (be);
    llm_workers_unref (workers);
    return NULL;
  }

  LlmEngine *e = g_new0 (LlmEngine, 1);
  e->ref_count = 1;
  e->model = llm_model_ref (model);
  e->opts = o;
  e->asked = asked;
  e->workers = workers;
  e->backend = be;
  e->weights = weights;
  e->fwd = fwd;
  e->kv_pool = llm_kv_pool_new (o.kv_pool_bytes);
  g_mutex_init (&e->eval_lock);
  g_mutex_init (&e->sched_lock);
  g_cond_init (&e->sched_cond);
  g_queue_init (&e->pending);
  return e;
}

/* What makes two engines interchangeable: the model (itself shared per
 * file and device) and every option. */
static char *
engine_key (LlmModel *model, const LlmEngineOptions *o)
{
  return g_strdup_printf ("%p/%d/%" G_GSIZE_FORMAT "/%d/%u/%u/%" G_GUINT64_FORMAT "/%d",
      (void *) model, o->n_threads, o->kv_pool_bytes, (int) o->kv_full, o->max_prefill_chunk,
      o->max_batch_wait_us, o->kv_time_slice_us, (int) o->kernels);
}

LlmEngine *
llm_engine_get (LlmModel *model, const LlmEngineOptions *opts, GError **error)
{
  LlmEngineOptions o;
  resolve_options (opts, &o);
  g_autofree char *key = engine_key (model, &o);

  g_mutex_lock (&engines_lock);
  if (engines == NULL)
    engines = g_hash_table_new (g_str_hash, g_str_equal);
  LlmEngine *e = g_hash_table_lookup (engines, key);
  if (e != NULL) {
    llm_engine_ref (e);
    g_mutex_unlock (&engines_lock);
    return e;
  }
  /* Made under the lock: the model is loaded already, so this is scratch
   * and (at most) starting threads, and a second element asking for the
   * same engine must get this one, not a twin. */
  e = llm_engine_new (model, &o, error);
  if (e != NULL) {
    e->key = g_steal_pointer (&key);
    g_hash_table_insert (engines, e->key, e);
  }
  g_mutex_unlock (&engines_lock);
  return e;
}

gboolean
llm_engine_runs_with (const LlmEngine *e, LlmModel *model, const LlmEngineOptions *opts)
{
  LlmEngineOptions o;
  resolve_options (opts, &o);
  const LlmEngineOptions *a = &e->asked;
  return e->model == model && a->n_threads == o.n_threads && a->kv_pool_bytes == o.kv_pool_bytes
      && a->kv_full == o.kv_full && a->max_prefill_chunk == o.max_prefill_chunk
      && a->max_batch_wait_us == o.max_batch_wait_us
      && a->kv_time_slice_us == o.kv_time_slice_us && a->kernels == o.kernels;
}

LlmEngine *
llm_engine_ref (LlmEngine *e)
{
  g_atomic_int_inc (&e->ref_count);
  return e;
}

void
llm_engine_unref (LlmEngine *e)
{
  if (e == NULL)
    return;
  if (e->key != NULL) {
    g_mutex_lock (&engines_lock);
    if (!g_atomic_int_dec_and_test (&e->ref_count)) {
      g_mutex_unlock (&engines_lock);
      return;
    }
    g_hash_table_remove (engines, e->key);
    g_mutex_unlock (&engines_lock);
  } else if (!g_atomic_int_dec_and_test (&e->ref_count)) {
    return;
  }
  g_warn_if_fail (e->seqs == NULL);
  llm_forward_free (e->fwd);
  llm_weights_unref (e->model, e->weights);
  llm_backend_unref (e->backend);
  llm_workers_unref (e->workers);
  llm_kv_pool_unref (e->kv_pool);
  llm_model_unref (e->model);
  g_mutex_clear (&e->eval_lock);
  g_mutex_clear (&e->sched_lock);
  g_cond_clear (&e->sched_cond);
  g_free (e->key);
  g_free (e);
}

LlmModel *
llm_engine_model (const LlmEngine *e)
{
  return e->model;
}

const LlmEngineOptions *
llm_engine_options (const LlmEngine *e)
{
  return &e->opts;
}

const char *
llm_engine_backend_name (const LlmEngine *e)
{
  return e->backend->ops->weights_key (e->backend);
}

int
llm_engine_n_threads (const LlmEngine *e)
{
  return e->opts.n_threads;
}

gsize
llm_engine_kv_bytes (const LlmEngine *e)
{
  return llm_kv_pool_bytes (e->kv_pool);
}

void
llm_engine_batch_stats (LlmEngine *e, guint64 *forwards, guint64 *rows)
{
  g_mutex_lock (&e->eval_lock);
  if (forwards)
    *forwards = e->n_forwards;
  if (rows)
    *rows = e->n_rows;
  g_mutex_unlock (&e->eval_lock);
}

/* --- batches --------------------------------------------------------- */

gboolean
llm_engine_segments (const LlmEvalRow *rows, guint n, GArray *segments, GError **error)
{
  g_array_set_size (segments, 0);
  for (guint i = 0; i < n; ) {
    LlmEvalSegment seg = { rows[i].seq, i, 0, NULL, 0 };
    while (i < n && rows[i].seq == seg.seq) {
      seg.n++;
      i++;
    }
    for (guint s = 0; s < segments->len; s++) {
      if (g_array_index (segments, LlmEvalSegment, s).seq == seg.seq) {
        g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH,
            "rows %u and %u of the batch belong to one sequence but are not adjacent",
            g_array_index (segments, LlmEvalSegment, s).first, seg.first);
        return FALSE;
      }
    }
    g_array_append_val (segments, seg);
  }
  return TRUE;
}

static void
set_preempted_error (GError **error)
{
  g_set_error_literal (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_PREEMPTED,
      "the sequence's KV cache was given to another stream (kv-pool-bytes is full); "
      "clear it and feed its tokens again");
}

/* A segment's rows before anything is reserved: tokens in the
 * vocabulary, positions consecutive from where the sequence is. */
static gboolean
check_segment (LlmEngine *e, const LlmEvalRow *rows, const LlmEvalSegment *seg,
    GError **error)
{
  const LlmHParams *hp = &e->model->hp;
  LlmSeq *seq = seg->seq;
  if (seq->engine != e) {
    g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH,
        "row %u's sequence belongs to another engine", seg->first);
    return FALSE;
  }
  if (seq->preempted) {
    set_preempted_error (error);
    return FALSE;
  }
  const guint32 next = llm_kv_cache_n (seq->kv) == 0 ? rows[seg->first].pos
      : llm_seq_pos_next (seq);
  for (guint i = 0; i < seg->n; i++) {
    const LlmEvalRow *r = &rows[seg->first + i];
    if (r->embd == NULL && (r->token < 0 || (guint32) r->token >= hp->n_vocab)) {
      g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_TOKEN,
          "token id %d is outside the model's vocabulary of %u", r->token, hp->n_vocab);
      return FALSE;
    }
    if (r->pos != next + i) {
      g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH,
          "row %u has position %u but its sequence is at %u: a sequence's rows take "
          "consecutive positions", seg->first + i, r->pos, next + i);
      return FALSE;
    }
  }
  return TRUE;
}

/* The longest-idle sequence holding KV that is not in this evaluation,
 * other than @asking; one waiting in the scheduler for its next chunk only
 * if no idle one is left. (@asking holds the blocks its failed attempt
 * got: taking those back from it would free nothing the next attempt does
 * not take again, forever.) */
static LlmSeq *
preempt_victim (LlmEngine *e, const LlmSeq *asking)
{
  LlmSeq *victim = NULL;
  gboolean victim_busy = FALSE;
  for (GList *l = e->seqs; l; l = l->next) {
    LlmSeq *s = l->data;
    if (s == asking || s->in_eval || llm_kv_cache_bytes (s->kv) == 0)
      continue;
    const gboolean busy = g_atomic_int_get (&s->pending);
    if (victim == NULL || (victim_busy && !busy)
        || (victim_busy == busy && s->last_used_us < victim->last_used_us)) {
      victim = s;
      victim_busy = busy;
    }
  }
  return victim;
}

guint64
llm_seq_rank (const LlmSeq *seq)
{
  return seq->admitted ? seq->admitted : G_MAXUINT64;
}

/* For a request that can wait (engine.h): an idle sequence, the longest
 * idle first, else the youngest sequence younger than @asking; NULL when
 * every other holder of KV is older than @asking and busy. */
static LlmSeq *
patient_victim (LlmEngine *e, const LlmSeq *asking, gint64 now)
{
  LlmSeq *idle = NULL, *younger = NULL;
  for (GList *l = e->seqs; l; l = l->next) {
    LlmSeq *s = l->data;
    if (s == asking || s->in_eval || llm_kv_cache_bytes (s->kv) == 0)
      continue;
    if (!g_atomic_int_get (&s->pending) && now - s->last_used_us >= e->idle_after_us) {
      if (idle == NULL || s->last_used_us < idle->last_used_us)
        idle = s;
    } else if (llm_seq_rank (s) > llm_seq_rank (asking)
        && (younger == NULL || llm_seq_rank (s) > llm_seq_rank (younger))) {
      younger = s;
    }
  }
  return idle ? idle : younger;
}

/* @victim gives its KV memory up (eval_lock held); its owner recomputes
 * it from its history when it next runs. */
static void
give_up_memory (LlmSeq *victim)
{
  llm_kv_cache_release (victim->kv);
  victim->preempted = TRUE;
}

/* @seq's turn with KV memory (kv_time_slice_us) starts @now: it got
 * memory while it held none, or ranks anew holding the blocks its owner
 * kept from its last response. */
static void
start_turn (LlmSeq *seq, gint64 now)
{
  seq->held_since_us = now;
  seq->steps_at_hold = g_atomic_int_get (&seq->steps_done);
}

/* Reserves @n slots in @seq, making room per the pool-full policy. A
 * full pool that other sequences hold sets *@may_wait for a @patient
 * caller. */
static gboolean
reserve (LlmEngine *e, LlmSeq *seq, guint n, gboolean patient, gint64 now,
    gboolean *may_wait, GError **error)
{
  const gboolean held = llm_kv_cache_bytes (seq->kv) > 0;
  for (;;) {
    GError *err = NULL;
    if (llm_kv_cache_reserve (seq->kv, n, &err)) {
      if (!held)
        start_turn (seq, now);
      return TRUE;
    }
    LlmSeq *victim = NULL;
    const gboolean preempt = g_error_matches (err, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL)
        && e->opts.kv_full == LLM_KV_FULL_PREEMPT;
    if (preempt)
      victim = patient ? patient_victim (e, seq, now) : preempt_victim (e, seq);
    if (victim == NULL) {
      *may_wait = preempt && patient
          && llm_kv_pool_bytes (e->kv_pool) > llm_kv_cache_bytes (seq->kv);
      g_propagate_error (error, err);
      return FALSE;
    }
    g_error_free (err);
    give_up_memory (victim);
  }
}

void
llm_engine_take_turn (LlmEngine *e, const LlmSeq *waiter, gint64 now)
{
  const gint64 slice = (gint64) MIN (e->opts.kv_time_slice_us, G_MAXINT64 / 2);
  g_mutex_lock (&e->eval_lock);
  LlmSeq *victim = NULL;
  for (GList *l = e->seqs; l; l = l->next) {
    LlmSeq *s = l->data;
    if (s == waiter || llm_kv_cache_bytes (s->kv) == 0 || now - s->held_since_us < slice)
      continue;
    /* A turn that has not yet made a step past the recompute it began
     * with (at max-prefill-chunk rows a forward that can take longer
     * than a slice) would end with nothing done, and streams would take
     * each other's memory for ever without a token. */
    if (g_atomic_int_get (&s->steps_done) == s->steps_at_hold)
      continue;
    if (victim == NULL || s->held_since_us < victim->held_since_us)
      victim = s;
  }
  if (victim != NULL) {
    give_up_memory (victim);
    victim->admitted = ++e->n_admitted;
  }
  g_mutex_unlock (&e->eval_lock);
}

gboolean
llm_engine_eval_segments (LlmEngine *e, const LlmEvalRow *rows, LlmEvalSegment *segs,
    guint n_segs, gboolean patient)
{
  g_mutex_lock (&e->eval_lock);
  const gint64 now = g_get_monotonic_time ();
  for (guint s = 0; s < n_segs; s++) {
    segs[s].done = 0;
    segs[s].may_wait = FALSE;
    segs[s].seq->evicted0 = llm_kv_cache_n_evicted (segs[s].seq->kv);
    if (!check_segment (e, rows, &segs[s], &segs[s].error))
      continue;
    if (segs[s].seq->admitted == 0) {
      segs[s].seq->admitted = ++e->n_admitted;
      start_turn (segs[s].seq, now);
    }
    if (llm_kv_cache_n (segs[s].seq->kv) == 0)
      segs[s].seq->pos0 = rows[segs[s].first].pos;
  }

  LlmFwdRow chunk[LLM_FORWARD_CHUNK];
  LlmFwdPiece pieces[LLM_FORWARD_CHUNK];
  guint s = 0, done_in_seg = 0;
  gboolean ok = TRUE;
  while (ok) {
    /* Fill one chunk with pieces of the segments still to run. */
    guint n_rows = 0, n_pieces = 0;
    guint piece_seg[LLM_FORWARD_CHUNK];
    const guint8 *pieces_skip = NULL;
    while (s < n_segs && n_rows < LLM_FORWARD_CHUNK) {
      LlmEvalSegment *seg = &segs[s];
      if (seg->error != NULL || done_in_seg == seg->n) {
        s++;
        done_in_seg = 0;
        continue;
      }
      /* A sequence that skips layers has a forward to itself. */
      if (n_pieces > 0 && (seg->seq->skip != NULL || pieces_skip != NULL))
        break;
      LlmSeq *seq = seg->seq;
      const guint take = llm_kv_cache_rows_per_reserve (seq->kv,
          MIN (seg->n - done_in_seg, LLM_FORWARD_CHUNK - n_rows));
      /* A sequence of this call whose rows have not started may have
       * been preempted for an earlier one's. */
      if (seq->preempted) {
        set_preempted_error (&seg->error);
        continue;
      }
      if (!reserve (e, seq, take, patient, now, &seg->may_wait, &seg->error))
        continue;
      seq->in_eval = TRUE;
      /* An eviction just now moved the sequence's positions down. */
      const guint32 shift = (guint32) (llm_kv_cache_n_evicted (seq->kv) - seq->evicted0);
      pieces[n_pieces] = (LlmFwdPiece) { seq->kv, llm_kv_cache_n (seq->kv), n_rows, take };
      piece_seg[n_pieces++] = s;
      pieces_skip = seq->skip;
      for (guint i = 0; i < take; i++) {
        const LlmEvalRow *r = &rows[seg->first + done_in_seg + i];
        chunk[n_rows++] = (LlmFwdRow) { r->token, r->embd, r->pos - shift, r->logits };
      }
      done_in_seg += take;
      /* The rest of the segment goes after these rows are in the cache. */
      if (done_in_seg < seg->n)
        break;
    }
    if (n_rows == 0)
      break;

    GError *err = NULL;
    LlmThreadPool *pool = llm_workers_lock (e->workers);
    ok = llm_forward_chunk (e->fwd, llm_backend_cpu_queue (pool), chunk, n_rows, pieces,
        n_pieces, pieces_skip, &err);
    /* Many streams: their threads need the cores now, not polling
     * workers. A lone stream's next step comes at once. */
    if (n_pieces > 1)
      llm_threadpool_rest (pool);
    llm_workers_unlock (e->workers);
    for (guint p = 0; p < n_pieces; p++) {
      LlmEvalSegment *seg = &segs[piece_seg[p]];
      if (ok) {
        llm_kv_cache_commit (seg->seq->kv, pieces[p].n);
        seg->done += pieces[p].n;
      } else if (seg->error == NULL) {
        seg->error = g_error_copy (err);
      }
    }
    g_clear_error (&err);
    e->n_forwards++;
    e->n_rows += n_rows;
  }
  for (guint i = 0; i < n_segs; i++) {
    segs[i].seq->in_eval = FALSE;
    segs[i].seq->last_used_us = now;
  }
  g_mutex_unlock (&e->eval_lock);
  return ok;
}

gboolean
llm_engine_eval (LlmEngine *e, const LlmBatchRow *rows, guint n, float *logits,
    GError **error)
{
  g_return_val_if_fail (e != NULL && (rows != NULL || n == 0), FALSE);
  const gsize n_vocab = e->model->hp.n_vocab;
  g_autofree LlmEvalRow *er = g_new (LlmEvalRow, MAX (n, 1));
  guint n_out = 0;
  for (guint i = 0; i < n; i++) {
    g_return_val_if_fail (rows[i].seq != NULL, FALSE);
    er[i] = (LlmEvalRow) { rows[i].seq, rows[i].token, rows[i].embd, rows[i].pos, NULL };
    if (rows[i].logits) {
      g_return_val_if_fail (logits != NULL, FALSE);
      er[i].logits = logits + n_out++ * n_vocab;
    }
  }
  g_autoptr (GArray) segs = g_array_new (FALSE, FALSE, sizeof (LlmEvalSegment));
  if (!llm_engine_segments (er, n, segs, error))
    return FALSE;
  llm_engine_eval_segments (e, er, (LlmEvalSegment *) segs->data, segs->len, FALSE);
  gboolean ok = TRUE;
  for (guint s = 0; s < segs->len; s++) {
    GError *err = g_array_index (segs, LlmEvalSegment, s).error;
    if (err == NULL)
      continue;
    if (ok)
      g_propagate_error (error, err);
    else
      g_error_free (err);
    ok = FALSE;
  }
  return ok;
}

void
llm_engine_token_rows (LlmSeq *seq, const gint32 *tokens, const float *embd,
    guint *embd_next, guint n, guint32 pos0, float *logits, gboolean all_logits, guint from,
    guint count, LlmEvalRow *out)
{
  const gsize n_vocab = seq->engine->model->hp.n_vocab;
  const gsize n_embd = seq->engine->model->hp.n_embd;
  for (guint i = 0; i < count; i++) {
    const guint k = from + i;
    float *dst = NULL;
    if (logits && all_logits)
      dst = logits + k * n_vocab;
    else if (logits && k == n - 1)
      dst = logits;
    const float *row = NULL;
    if (embd != NULL && tokens[k] == LLM_TOKEN_EMBD)
      row = embd + (gsize) (*embd_next)++ * n_embd;
    out[i] = (LlmEvalRow) { seq, tokens[k], row, pos0 + k, dst };
  }
}

gboolean
llm_seq_eval_tokens (LlmSeq *seq, const gint32 *tokens, guint n, float *logits,
    gboolean all_logits, GError **error)
{
  g_return_val_if_fail (seq != NULL && (tokens != NULL || n == 0), FALSE);
  if (n == 0)
    return TRUE;
  g_autofree LlmEvalRow *rows = g_new (LlmEvalRow, n);
  llm_engine_token_rows (seq, tokens, NULL, NULL, n, llm_seq_pos_next (seq), logits,
      all_logits, 0, n, rows);
  LlmEvalSegment seg = { seq, 0, n, NULL, 0 };
  llm_engine_eval_segments (seq->engine, rows, &seg, 1, FALSE);
  if (seg.error) {
    g_propagate_error (error, seg.error);
    return FALSE;
  }
  return TRUE;
}
