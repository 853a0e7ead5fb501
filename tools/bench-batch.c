/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a forward of k rows costs next to a decode step (gst-llm-bench
 * --batch): the figure that decides whether verifying a speculative draft
 * or decoding many streams together pays. Decode is bound by reading the
 * weights, so k rows that share one read should cost little more than
 * one; the ratio shows how far the kernels are from that.
 *
 * One sequence holds --depth random tokens. A forward of k rows appends k
 * random tokens to it, every row wanting its logits (as a verification or
 * a batched step does), and the sequence is cut back to the depth, which
 * costs nothing. The sizes take turns within each round (1, 2, 4, ..., 1,
 * 2, 4, ...), so a machine that slows down mid-run slows every size
 * alike; each size's figure is the median of all its forwards, and the
 * cost of k rows is that median over the median of k = 1 (a decode step,
 * measured the same way). */
#include "bench.h"

#include <string.h>

#include "model-private.h"

/* Forwards of each size per round. */
#define PER_ROUND 4

gboolean
bench_batch_run (LlmModel *model, const BenchBatchSetting *s, BenchBatchResult *result,
    GError **error)
{
  const guint n_vocab = model->hp.n_vocab;
  guint max_k = 1;
  for (guint i = 0; i < s->n_sizes; i++)
    max_k = MAX (max_k, s->sizes[i]);

  g_autoptr (LlmEngine) e = bench_engine_new (model, s->n_threads, error);
  if (e == NULL)
    return FALSE;
  const LlmKvConfig kvc = { .type = s->kv_type, .policy = LLM_KV_POLICY_FULL,
    .context_length = s->depth + max_k + 8 };
  g_autoptr (LlmSeq) seq = llm_seq_new (e, &kvc, error);
  if (seq == NULL)
    return FALSE;
  g_autoptr (GRand) rand = g_rand_new_with_seed (s->seed);
  g_autofree gint32 *ids = g_new (gint32, MAX (8, MAX (max_k, s->depth)));
  g_autofree float *logits = g_new (float, (gsize) MAX (8, max_k) * n_vocab);

  /* Touches every weight page and starts the workers. */
  if (s->warmup) {
    bench_fill_random (rand, ids, 8, n_vocab);
    if (!llm_seq_eval_tokens (seq, ids, 8, logits, TRUE, error))
      return FALSE;
    llm_seq_clear (seq);
  }
  if (s->depth > 0) {
    bench_fill_random (rand, ids, s->depth, n_vocab);
    if (!llm_seq_eval_tokens (seq, ids, s->depth, NULL, FALSE, error))
      return FALSE;
  }

  /* Size 1 first, the step every other size is compared with. */
  const guint n = s->n_sizes + 1;
  g_autofree guint *k_of = g_new (guint, n);
  k_of[0] = 1;
  memcpy (k_of + 1, s->sizes, s->n_sizes * sizeof (guint));
  const guint per_size = s->rounds * PER_ROUND;
  g_autofree double *ms = g_new (double, (gsize) n * per_size);
  for (guint r = 0; r < s->rounds; r++)
    for (guint i = 0; i < n; i++)
      for (guint j = 0; j < PER_ROUND; j++) {
        bench_fill_random (rand, ids, k_of[i], n_vocab);
        const double t0 = bench_now_ms ();
        if (!llm_seq_eval_tokens (seq, ids, k_of[i], logits, TRUE, error))
          return FALSE;
        ms[(gsize) i * per_size + r * PER_ROUND + j] = bench_now_ms () - t0;
        llm_seq_truncate (seq, s->depth);
      }

  const double step = bench_percentile (ms, per_size, 50);
  for (guint i = 0; i < s->n_sizes; i++) {
    const double m = bench_percentile (ms + (gsize) (i + 1) * per_size, per_size, 50);
    result[i] = (BenchBatchResult) {
      .n_rows = s->sizes[i],
      .forward_ms = m,
      .step_ms = step,
      .rows_per_s = s->sizes[i] / (m / 1e3),
      .cost_vs_step = m / step,
    };
  }
  return TRUE;
}
