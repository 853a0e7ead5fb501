/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Many streams decoding at once on one engine (gst-llm-bench --streams),
 * in two ways:
 *
 *   lock-step  the caller batches: N sequences, each prefilled with its
 *              own prompt, then -n steps of one llm_engine_eval over N
 *              rows (one per sequence, greedy on its own logits). Every
 *              stream's inter-token latency is the step time. Next to it,
 *              the compute limit from the same engine: one forward of N
 *              prompt rows into a scratch sequence (pp at batch N).
 *   scheduler  the engine batches: N threads, each with its own sequence,
 *              prefill and decode one llm_engine_submit call per token,
 *              and the scheduler gathers whatever is pending into shared
 *              forwards. When a stream has generated -n tokens it starts
 *              a new prompt, so prompts keep arriving while the others
 *              decode, as in a server under steady load. Each stream's
 *              rate is reported, and the process's RSS is sampled while
 *              the window runs, so a long run shows whether the rates stay
 *              fair and memory stays flat once every cache has filled.
 *
 * Timing is at the caller, as an application sees it; each stream's pick
 * (argmax over the vocabulary) is inside its step. */
#include "bench.h"

#include <math.h>

#include "latency-stats.h"
#include "model-private.h"

static LlmKvConfig
kv_config (const BenchStreamsSetting *s)
{
  return (LlmKvConfig) {
    .type = s->kv_type,
    .policy = LLM_KV_POLICY_FULL,
    .context_length = s->n_prompt + s->n_gen + 1,
  };
}

/* An engine of its own for one run, so its batch counts and KV bytes are
 * the run's alone, warmed up (weight pages touched, workers started). */
static LlmEngine *
new_engine (LlmModel *model, const BenchStreamsSetting *s, GRand *rand, GError **error)
{
  LlmEngineOptions opts;
  llm_engine_options_init (&opts);
  opts.n_threads = s->n_threads;
  opts.max_batch_wait_us = s->max_batch_wait_us;
  opts.max_prefill_chunk = s->max_prefill_chunk;
  g_autoptr (LlmEngine) e = llm_engine_new (model, &opts, error);
  if (e == NULL)
    return NULL;
  if (s->warmup) {
    const LlmKvConfig kvc = kv_config (s);
    g_autoptr (LlmSeq) seq = llm_seq_new (e, &kvc, error);
    gint32 w[8];
    bench_fill_random (rand, w, G_N_ELEMENTS (w), model->hp.n_vocab);
    if (seq == NULL || !llm_seq_eval_tokens (seq, w, G_N_ELEMENTS (w), NULL, FALSE, error))
      return NULL;
    /* The whole embedding table too: random prompts would otherwise
     * fault its pages in all through a run (18 MiB of a 246m Q4_0),
     * RSS growth that is the file being read, not memory being held. */
    g_autofree float *row = g_new (float, model->hp.n_embd);
    for (guint32 id = 0; id < model->hp.n_vocab; id++)
      llm_model_token_embedding (model, id, row);
  }
  return g_steal_pointer (&e);
}

static void
free_seqs (LlmSeq **seqs, guint n)
{
  for (guint i = 0; i < n; i++)
    g_clear_pointer (&seqs[i], llm_seq_free);
  g_free (seqs);
}

/* --- lock-step ------------------------------------------------------- */

/* Tokens/s of one forward over @n prompt rows on a scratch sequence, the
 * median of 5. Every row wants its logits, as each row of a decode step
 * does: with only the last one's, the limit would skip n - 1 rows of the
 * output product (an eighth of a 246m model's weights). */
static double
prefill_limit (LlmEngine *e, const BenchStreamsSetting *s, GRand *rand, GError **error)
{
  const guint n = s->n_streams, n_vocab = llm_engine_model (e)->hp.n_vocab;
  const LlmKvConfig kvc = { .type = s->kv_type, .policy = LLM_KV_POLICY_FULL,
    .context_length = n };
  g_autoptr (LlmSeq) scratch = llm_seq_new (e, &kvc, error);
  if (scratch == NULL)
    return NAN;
  g_autofree gint32 *ids = g_new (gint32, n);
  g_autofree float *logits = g_new (float, (gsize) n * n_vocab);
  double times[5];
  for (guint r = 0; r < G_N_ELEMENTS (times); r++) {
    llm_seq_clear (scratch);
    bench_fill_random (rand, ids, n, n_vocab);
    const double t0 = bench_now_ms ();
    if (!llm_seq_eval_tokens (scratch, ids, n, logits, TRUE, error))
      return NAN;
    times[r] = bench_now_ms () - t0;
  }
  return n / (bench_percentile (times, G_N_ELEMENTS (times), 50) / 1e3);
}

/* Decode steps of the N streams between the lone sequence's. */
#define ALONE_BLOCK 8

static gboolean
run_lockstep (LlmEngine *e, const BenchStreamsSetting *s, GRand *rand,
    BenchStreamsResult *res, GError **error)
{
  const guint n = s->n_streams, n_vocab = llm_engine_model (e)->hp.n_vocab;
  const LlmKvConfig kvc = kv_config (s);
  LlmSeq **seqs = g_new0 (LlmSeq *, n);
  g_autofree LlmBatchRow *rows = g_new (LlmBatchRow, (gsize) n * s->n_prompt);
  g_autofree gint32 *prompts = g_new (gint32, (gsize) n * s->n_prompt);
  g_autofree gint32 *next = g_new (gint32, n);
  g_autofree float *logits = g_new (float, (gsize) n * n_vocab);
  g_autofree double *step_ms = g_new (double, s->n_gen);
  g_autofree double *alone_ms = g_new (double, s->n_gen);
  g_autofree double *settled_ms = g_new (double, s->n_gen);
  g_autofree float *alone_logits = g_new (float, n_vocab);
  g_autofree gint32 *alone_prompt = g_new (gint32, s->n_prompt);
  LlmSeq *alone = NULL;
  gboolean ok = FALSE;

  /* Every prompt in one call (the engine cuts it into forwards); untimed. */
  bench_fill_random (rand, prompts, n * s->n_prompt, n_vocab);
  for (guint i = 0; i < n; i++) {
    if ((seqs[i] = llm_seq_new (e, &kvc, error)) == NULL)
      goto out;
    for (guint k = 0; k < s->n_prompt; k++)
      rows[i * s->n_prompt + k] = (LlmBatchRow) { seqs[i], prompts[i * s->n_prompt + k],
        NULL, k, k == s->n_prompt - 1 };
  }
  if (!llm_engine_eval (e, rows, n * s->n_prompt, logits, error))
    goto out;
  for (guint i = 0; i < n; i++)
    next[i] = llm_argmax (logits + (gsize) i * n_vocab, n_vocab);
  /* The lone sequence, with a prompt of its own. */
  bench_fill_random (rand, alone_prompt, s->n_prompt, n_vocab);
  if ((alone = llm_seq_new (e, &kvc, error)) == NULL
      || !llm_seq_eval_tokens (alone, alone_prompt, s->n_prompt, alone_logits, FALSE, error))
    goto out;
  gint32 alone_next = llm_argmax (alone_logits, n_vocab);

  /* The decode steps' forwards alone: rows per forward is N, a check. */
  guint64 f0, r0, f1, r1;
  llm_engine_batch_stats (e, &f0, &r0);

  double total = 0;
  for (guint step = 0; step < s->n_gen; step++) {
    const double t0 = bench_now_ms ();
    for (guint i = 0; i < n; i++)
      rows[i] = (LlmBatchRow) { seqs[i], next[i], NULL, llm_seq_pos_next (seqs[i]), TRUE };
    if (!llm_engine_eval (e, rows, n, logits, error))
      goto out;
    for (guint i = 0; i < n; i++)
      next[i] = llm_argmax (logits + (gsize) i * n_vocab, n_vocab);
    step_ms[step] = bench_now_ms () - t0;
    total += step_ms[step];
    /* After each block of N-row steps, as many steps of the lone
     * sequence, outside the batch counts and the N streams' time. */
    if ((step + 1) % ALONE_BLOCK != 0 && step + 1 != s->n_gen)
      continue;
    llm_engine_batch_stats (e, &f1, &r1);
    for (guint k = step / ALONE_BLOCK * ALONE_BLOCK; k <= step; k++) {
      const double a0 = bench_now_ms ();
      const LlmBatchRow lone = { alone, alone_next, NULL, llm_seq_pos_next (alone), TRUE };
      if (!llm_engine_eval (e, &lone, 1, alone_logits, error))
        goto out;
      alone_next = llm_argmax (alone_logits, n_vocab);
      alone_ms[k] = bench_now_ms () - a0;
    }
    guint64 f2, r2;
    llm_engine_batch_stats (e, &f2, &r2);
    f0 += f2 - f1;
    r0 += r2 - r1;
  }
  /* The comparison leaves out each block's first step, which pays for the
   * switch: a lone step right after 16-row ones took 10-40% longer than
   * after lone ones. */
  guint n_settled = 0;
  for (guint k = 0; k < s->n_gen; k++)
    if (k % ALONE_BLOCK != 0 || s->n_gen <= ALONE_BLOCK) {
      settled_ms[n_settled] = step_ms[k];
      alone_ms[n_settled++] = alone_ms[k];
    }
  res->alone_ms_p50 = bench_percentile (alone_ms, n_settled, 50);
  res->alone_ms_p95 = bench_percentile (alone_ms, n_settled, 95);
  res->x_alone = n * res->alone_ms_p50 / bench_percentile (settled_ms, n_settled, 50);
  res->p95_vs_alone = bench_percentile (settled_ms, n_settled, 95) / res->alone_ms_p95;
  llm_engine_batch_stats (e, &f1, &r1);
  res->forwards = f1 - f0;
  res->rows = r1 - r0;
  res->decode_tokens = (guint64) n * s->n_gen;
  res->tg_tokens_per_s = res->decode_tokens / (total / 1e3);
  res->rows_per_s = res->rows / (total / 1e3);
  res->itl_ms_p50 = bench_percentile (step_ms, s->n_gen, 50);
  res->itl_ms_p95 = bench_percentile (step_ms, s->n_gen, 95);
  res->window_s = total / 1e3;
  res->kv_bytes = llm_engine_kv_bytes (e);
  /* After the decode, so its sequences' KV is in the figure above but
   * the scratch sequence's is not. */
  res->ppN_tokens_per_s = prefill_limit (e, s, rand, error);
  ok = isfinite (res->ppN_tokens_per_s);
out:
  free_seqs (seqs, n);
  g_clear_pointer (&alone, llm_seq_free);
  return ok;
}

/* --- scheduler ------------------------------------------------------- */

/* Latencies go into histograms of fixed size (microseconds), not arrays,
 * so that a long run's own bookkeeping does not grow the RSS it reports. */
typedef struct {
  LlmEngine *engine;
  const BenchStreamsSetting *s;
  GMutex lock;
  GCond cond;                         /* go, and the window's end */
  gboolean go;
  double t_start, t_end, deadline;    /* ms */
  guint64 counted, budget;            /* decode tokens in the window */
  double min_end;                     /* ms: the budget does not end it before */
  gint stop;                          /* atomic: the window has ended */
  gint warm_streams;                  /* atomic: streams past a whole response */
  LlmLatencyStats itl, ttft;          /* us, under lock */
} Window;

typedef struct {
  Window *w;
  guint index;
  LlmSeq *seq;
  guint32 seed;
  guint64 tokens;                     /* decode tokens in the window */
  guint prompts;
  GError *error;
} Stream;

/* Under w->lock. */
static void
stop_window (Window *w, double t_end)
{
  w->t_end = t_end;
  g_atomic_int_set (&w->stop, TRUE);
  g_cond_broadcast (&w->cond);
}

/* Whether a token done at @t, @itl_ms after the stream's previous one,
 * falls in the window (its ITL is then counted); ends the window when
 * it is the last one the budget allows (and the window is long enough)
 * or @t is past the deadline. */
static gboolean
count_token (Window *w, double t, double itl_ms)
{
  gboolean in = FALSE;
  g_mutex_lock (&w->lock);
  if (!g_atomic_int_get (&w->stop)) {
    if (t > w->deadline) {
      stop_window (w, w->deadline);
    } else {
      in = TRUE;
      llm_latency_stats_add (&w->itl, (gint64) (itl_ms * 1e3));
      if (++w->counted >= w->budget && t >= w->min_end)
        stop_window (w, t);
    }
  }
  g_mutex_unlock (&w->lock);
  return in;
}

static void
count_ttft (Window *w, double ttft_ms)
{
  g_mutex_lock (&w->lock);
  llm_latency_stats_add (&w->ttft, (gint64) (ttft_ms * 1e3));
  g_mutex_unlock (&w->lock);
}

static void
end_window (Window *w)
{
  g_mutex_lock (&w->lock);
  if (!g_atomic_int_get (&w->stop))
    stop_window (w, bench_now_ms ());
  g_mutex_unlock (&w->lock);
}

static gpointer
stream_thread (gpointer data)
{
  Stream *st = data;
  Window *w = st->w;
  const BenchStreamsSetting *s = w->s;
  const guint n_vocab = llm_engine_model (w->engine)->hp.n_vocab;
  g_autoptr (GRand) rand = g_rand_new_with_seed (st->seed);
  g_autofree gint32 *prompt = g_new (gint32, s->n_prompt);
  g_autofree float *logits = g_new (float, n_vocab);

  g_mutex_lock (&w->lock);
  while (!w->go)
    g_cond_wait (&w->cond, &w->lock);
  g_mutex_unlock (&w->lock);

  for (gboolean first = TRUE; !g_atomic_int_get (&w->stop); first = FALSE) {
    const double t_arrive = bench_now_ms ();
    llm_seq_clear (st->seq);
    bench_fill_random (rand, prompt, s->n_prompt, n_vocab);
    if (!llm_engine_submit (w->engine, st->seq, prompt, s->n_prompt, logits, FALSE,
            &st->error))
      break;
    gint32 next = llm_argmax (logits, n_vocab);
    double t_prev = bench_now_ms ();
    if (g_atomic_int_get (&w->stop))
      break;
    st->prompts++;
    /* The first prompts all arrive at once; later ones arrive while the
     * other streams decode, which is the TTFT a server sees. A stream's
     * third prompt means its cache has held a whole -n response (the
     * first one is shortened, below). */
    if (!first)
      count_ttft (w, t_prev - t_arrive);
    if (st->prompts == 3)
      g_atomic_int_inc (&w->warm_streams);
    /* Stream i's first response is (i + 1) / N of -n long, so that the
     * streams' later prompts arrive spread over time, one every -n / N
     * steps, rather than all in the same step. */
    const guint n_gen = first
        ? MAX (1, (s->n_gen * (st->index + 1) + s->n_streams - 1) / s->n_streams)
        : s->n_gen;
    for (guint k = 0; k < n_gen && !g_atomic_int_get (&w->stop); k++) {
      if (!llm_engine_submit (w->engine, st->seq, &next, 1, logits, FALSE, &st->error))
        goto out;
      next = llm_argmax (logits, n_vocab);
      const double t = bench_now_ms ();
      if (count_token (w, t, t - t_prev))
        st->tokens++;
      t_prev = t;
    }
  }
out:
  /* One stream failing ends the run for all. */
  if (st->error != NULL)
    end_window (w);
  return NULL;
}

/* Percentile @p of @stats in ms; NAN when it is empty. */
static double
latency_ms (const LlmLatencyStats *stats, guint p)
{
  if (llm_latency_stats_count (stats) == 0)
    return NAN;
  return llm_latency_stats_percentile (stats, p) / 1e3;
}

#define RSS_PERIOD_US (100 * G_TIME_SPAN_MILLISECOND)

/* Samples the RSS every RSS_PERIOD_US until the window ends: at the end
 * of warm-up (the first sample at which every stream has answered a
 * whole -n response, so every cache has reached its full size, and at
 * least a tenth of --duration has passed), its largest value from then
 * on, and at the end of the window, before any sequence is freed. */
static void
watch_rss (Window *w, guint n_streams, BenchStreamsResult *res)
{
  const double warm_after = w->t_start + 0.1 * w->s->duration_s * 1e3;
  gboolean warm = FALSE, stop = FALSE;
  while (!stop) {
    g_mutex_lock (&w->lock);
    const gint64 until = g_get_monotonic_time () + RSS_PERIOD_US;
    while (!g_atomic_int_get (&w->stop) && g_cond_wait_until (&w->cond, &w->lock, until))
      ;
    stop = g_atomic_int_get (&w->stop);
    g_mutex_unlock (&w->lock);
    const guint64 rss = bench_rss_kb ();
    const double now = bench_now_ms ();
    if (!warm && (guint) g_atomic_int_get (&w->warm_streams) == n_streams && now >= warm_after) {
      warm = TRUE;
      res->warm_s = (now - w->t_start) / 1e3;
      res->rss_warm_kb = res->rss_max_kb = rss;
    }
    if (warm)
      res->rss_max_kb = MAX (res->rss_max_kb, rss);
  }
  res->rss_end_kb = bench_rss_kb ();
}

static gboolean
run_scheduler (LlmEngine *e, const BenchStreamsSetting *s, BenchStreamsResult *res,
    GError **error)
{
  const guint n = s->n_streams;
  const LlmKvConfig kvc = kv_config (s);
  Window w = {
    .engine = e, .s = s,
    .budget = s->duration_s > 0 ? G_MAXUINT64 : (guint64) n * s->n_gen * 3,
  };
  g_mutex_init (&w.lock);
  g_cond_init (&w.cond);
  llm_latency_stats_clear (&w.itl);
  llm_latency_stats_clear (&w.ttft);
  g_autofree Stream *streams = g_new0 (Stream, n);
  g_autofree GThread **threads = g_new0 (GThread *, n);
  for (guint i = 0; i < n; i++)
    streams[i] = (Stream) { .w = &w, .index = i, .seed = s->seed + 1 + i };
  gboolean ok = TRUE;
  for (guint i = 0; i < n && ok; i++)
    ok = (streams[i].seq = llm_seq_new (e, &kvc, error)) != NULL;
  for (guint i = 0; i < n && ok; i++) {
    g_autofree char *name = g_strdup_printf ("stream-%u", i);
    threads[i] = g_thread_try_new (name, stream_thread, &streams[i], error);
    ok = threads[i] != NULL;
  }

  guint64 f0, r0, f1, r1;
  llm_engine_batch_stats (e, &f0, &r0);
  g_mutex_lock (&w.lock);
  w.t_start = bench_now_ms ();
  w.deadline = s->duration_s > 0 ? w.t_start + s->duration_s * 1e3 : INFINITY;
  /* A second at least: on a small model the budget takes milliseconds,
   * less than some threads need to get going, and there would be one
   * prompt per stream to time. */
  w.min_end = w.t_start + 1e3;
  w.go = TRUE;
  if (!ok) {
    w.t_end = w.t_start;
    w.stop = TRUE;
  }
  g_cond_broadcast (&w.cond);
  g_mutex_unlock (&w.lock);
  watch_rss (&w, n, res);
  for (guint i = 0; i < n; i++)
    if (threads[i] != NULL)
      g_thread_join (threads[i]);
  llm_engine_batch_stats (e, &f1, &r1);
  /* The batch counts run to the last stream's end, a step or a prompt
   * after the window. */
  const double t_joined = bench_now_ms ();
  res->kv_bytes = llm_engine_kv_bytes (e);

  const double window_s = (w.t_end - w.t_start) / 1e3;
  guint64 tok_min = G_MAXUINT64, tok_max = 0;
  res->stream_tokens_per_s = g_new (double, n);
  for (guint i = 0; i < n; i++) {
    Stream *st = &streams[i];
    if (ok && st->error != NULL) {
      g_propagate_error (error, g_steal_pointer (&st->error));
      ok = FALSE;
    }
    g_clear_error (&st->error);
    res->decode_tokens += st->tokens;
    res->prompts += st->prompts;
    res->stream_tokens_per_s[i] = st->tokens / window_s;
    tok_min = MIN (tok_min, st->tokens);
    tok_max = MAX (tok_max, st->tokens);
    g_clear_pointer (&st->seq, llm_seq_free);
  }
  g_mutex_clear (&w.lock);
  g_cond_clear (&w.cond);
  if (!ok)
    return FALSE;

  res->forwards = f1 - f0;
  res->rows = r1 - r0;
  res->window_s = window_s;
  res->tg_tokens_per_s = res->decode_tokens / window_s;
  res->rows_per_s = res->rows / ((t_joined - w.t_start) / 1e3);
  res->itl_ms_p50 = latency_ms (&w.itl, 50);
  res->itl_ms_p95 = latency_ms (&w.itl, 95);
  res->n_ttft = llm_latency_stats_count (&w.ttft);
  res->ttft_ms_p50 = latency_ms (&w.ttft, 50);
  res->ttft_ms_p95 = latency_ms (&w.ttft, 95);
  /* Every stream had the same window, so token counts compare as rates. */
  const double mean = (double) res->decode_tokens / n;
  res->rate_min_frac = tok_min / mean;
  res->rate_max_frac = tok_max / mean;
  return TRUE;
}

void
bench_streams_result_clear (BenchStreamsResult *result)
{
  g_clear_pointer (&result->stream_tokens_per_s, g_free);
}

gboolean
bench_streams_run (LlmModel *model, const BenchStreamsSetting *s, BenchStreamsMode mode,
    BenchStreamsResult *result, GError **error)
{
  g_return_val_if_fail (s->n_streams > 0 && s->n_prompt > 0 && s->n_gen > 0, FALSE);
  *result = (BenchStreamsResult) {
    .ppN_tokens_per_s = NAN, .ttft_ms_p50 = NAN, .ttft_ms_p95 = NAN,
    .rate_min_frac = NAN, .rate_max_frac = NAN, .warm_s = NAN,
    .alone_ms_p50 = NAN, .alone_ms_p95 = NAN, .x_alone = NAN, .p95_vs_alone = NAN,
  };
  g_autoptr (GRand) rand = g_rand_new_with_seed (s->seed);
  g_autoptr (LlmEngine) e = new_engine (model, s, rand, error);
  if (e == NULL)
    return FALSE;
  if (mode == BENCH_STREAMS_LOCKSTEP)
    return run_lockstep (e, s, rand, result, error);
  return run_scheduler (e, s, result, error);
}
