/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine core: many sequences in one forward give each exactly what
 * it gets alone; truncate and fork leave a sequence as a fresh one fed
 * the same tokens; the scheduler batches concurrent streams; the KV pool
 * limit refuses or preempts; sessions roll back and stay bounded. */
#include <string.h>

#include "llm-check.h"
#include "engine.h"
#include "session.h"
#include "model-private.h"
#include "ggml-type.h"

#define N_STREAMS 17
#define N_STEPS 6

/* A private engine of @m with @o's options on two threads. */
static LlmEngine *
engine_with (LlmModel *m, LlmEngineOptions *o)
{
  o->n_threads = 2;
  GError *error = NULL;
  LlmEngine *e = llm_engine_new (m, o, &error);
  ck_assert_msg (e != NULL, "%s", error ? error->message : "");
  return e;
}

/* The default options with a KV pool of @pool_bytes (0: no limit). */
static LlmEngineOptions
pool_options (gsize pool_bytes, LlmKvFullPolicy full)
{
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.kv_pool_bytes = pool_bytes;
  o.kv_full = full;
  return o;
}

static LlmEngine *
new_engine (LlmModel *m, gsize pool_bytes, LlmKvFullPolicy full, guint wait_us)
{
  LlmEngineOptions o = pool_options (pool_bytes, full);
  o.max_batch_wait_us = wait_us;
  return engine_with (m, &o);
}

static const LlmKvConfig kv_f16 = {
  .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL, .context_length = 256,
};

/* Stream @i's prompt: its own length (3..13) and ids. */
static guint
make_prompt (guint i, guint n_vocab, gint32 *ids)
{
  const guint n = 3 + (i * 5) % 11;
  guint32 state = 977 * (i + 1);
  for (guint k = 0; k < n; k++) {
    state = state * 1664525u + 1013904223u;
    ids[k] = (gint32) ((state >> 8) % n_vocab);
  }
  return n;
}

/* What one stream gives alone: greedy ids and every step's logits. */
typedef struct {
  gint32 ids[N_STEPS];
  float *logits;              /* N_STEPS x n_vocab */
} Alone;

static void
run_alone (LlmEngine *e, guint i, Alone *out)
{
  const guint n_vocab = llm_engine_model (e)->hp.n_vocab;
  gint32 prompt[16];
  const guint n = make_prompt (i, n_vocab, prompt);
  g_autoptr (LlmSeq) seq = llm_test_new_seq (e, &kv_f16);
  GError *error = NULL;
  out->logits = g_new (float, (gsize) N_STEPS * n_vocab);
  ck_assert_msg (llm_seq_eval_tokens (seq, prompt, n, out->logits, FALSE, &error), "%s",
      error ? error->message : "");
  out->ids[0] = (gint32) llm_test_argmax (out->logits, n_vocab);
  for (guint s = 1; s < N_STEPS; s++) {
    float *l = out->logits + (gsize) s * n_vocab;
    ck_assert (llm_seq_eval_tokens (seq, &out->ids[s - 1], 1, l, FALSE, &error));
    out->ids[s] = (gint32) llm_test_argmax (l, n_vocab);
  }
}

/* N streams: every prompt in one batch (a prefill across sequences), then
 * N_STEPS - 1 steps of N rows; ids equal, logits bit for bit. */
static void
check_model_batched_equals_alone (LlmModel *m, const char *name)
{
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  Alone alone[N_STREAMS];
  for (guint i = 0; i < N_STREAMS; i++)
    run_alone (e, i, &alone[i]);

  g_autofree float *logits = g_new (float, (gsize) N_STREAMS * n_vocab);
  for (guint n_seq = 1; n_seq <= N_STREAMS; n_seq++) {
    LlmSeq *seqs[N_STREAMS];
    LlmBatchRow rows[N_STREAMS * 16];
    gint32 next[N_STREAMS];
    guint n_rows = 0;
    for (guint i = 0; i < n_seq; i++) {
      seqs[i] = llm_test_new_seq (e, &kv_f16);
      gint32 prompt[16];
      const guint n = make_prompt (i, n_vocab, prompt);
      for (guint k = 0; k < n; k++)
        rows[n_rows++] = (LlmBatchRow) { seqs[i], prompt[k], NULL, k, k == n - 1 };
    }
    GError *error = NULL;
    for (guint s = 0; s < N_STEPS; s++) {
      ck_assert_msg (llm_engine_eval (e, rows, n_rows, logits, &error), "%s",
          error ? error->message : "");
      n_rows = 0;
      for (guint i = 0; i < n_seq; i++) {
        const float *got = logits + (gsize) i * n_vocab;
        const float *want = alone[i].logits + (gsize) s * n_vocab;
        next[i] = (gint32) llm_test_argmax (got, n_vocab);
        ck_assert_msg (next[i] == alone[i].ids[s], "%s, %u streams: stream %u step %u: id %d, "
            "alone %d", name, n_seq, i, s, next[i], alone[i].ids[s]);
        for (guint v = 0; v < n_vocab; v++)
          ck_assert_msg (got[v] == want[v], "%s, %u streams: stream %u step %u logit %u: "
              "%.9g batched, %.9g alone", name, n_seq, i, s, v, got[v], want[v]);
        rows[n_rows++] = (LlmBatchRow) { seqs[i], next[i], NULL, llm_seq_pos_next (seqs[i]),
          TRUE };
      }
    }
    for (guint i = 0; i < n_seq; i++)
      llm_seq_free (seqs[i]);
  }
  for (guint i = 0; i < N_STREAMS; i++)
    g_free (alone[i].logits);
}

static void
check_batched_equals_alone (const char *name)
{
  g_autoptr (LlmModel) m = llm_test_load_model (name);
  check_model_batched_equals_alone (m, name);
}

/* A weight type whose kernels read a layout prepared at load: decode
 * steps and batches run the same kernel, so bits agree too. */
static void
check_requantized_batched_equals_alone (const char *name, guint32 type)
{
  g_autoptr (LlmModel) m = llm_test_requantized_model (name, type);
  ck_assert_uint_eq (m->layers[0].wq->type, type);
  g_autofree char *what = g_strdup_printf ("%s as %s", name, llm_type_name (type));
  check_model_batched_equals_alone (m, what);
}

/* K-quant rows are 256 values wide, wider than any bundled model's: a
 * random llama of that width in each type. */
START_TEST (test_batched_streams_equal_alone_random_llama_k_quants)
{
  static const guint32 types[] = { LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K };
  const LlmTestShape shape = { 256, 512, 2, 4, 2 };
  for (guint i = 0; i < G_N_ELEMENTS (types); i++) {
    g_autoptr (LlmModel) m = llm_test_random_llama (&shape, types[i]);
    ck_assert_uint_eq (m->layers[0].w_down->type, types[i]);
    check_model_batched_equals_alone (m, llm_type_name (types[i]));
  }
}
END_TEST

START_TEST (test_batched_streams_equal_alone_stories260k_q4_0)
{
  check_requantized_batched_equals_alone ("stories260K.gguf", LLM_TYPE_Q4_0);
}
END_TEST

START_TEST (test_batched_streams_equal_alone_random_qwen2_q4_0)
{
  check_requantized_batched_equals_alone ("random-qwen2-f32.gguf", LLM_TYPE_Q4_0);
}
END_TEST

/* Q5_0 weights are packed at load (kernels/cpu/q5_0x16.h): a row's bits
 * must not depend on how many rows share its forward. */
START_TEST (test_batched_streams_equal_alone_stories260k_q5_0)
{
  check_requantized_batched_equals_alone ("stories260K.gguf", LLM_TYPE_Q5_0);
}
END_TEST

START_TEST (test_batched_streams_equal_alone_random_qwen2_q5_0)
{
  check_requantized_batched_equals_alone ("random-qwen2-f32.gguf", LLM_TYPE_Q5_0);
}
END_TEST

/* F16 weights are packed at load too (kernels/cpu/f16x16.h): rows of 64,
 * 172 (not a multiple of 16) and 512 values. */
START_TEST (test_batched_streams_equal_alone_stories260k_f16)
{
  check_requantized_batched_equals_alone ("stories260K.gguf", LLM_TYPE_F16);
}
END_TEST

START_TEST (test_batched_streams_equal_alone_random_qwen2_f16)
{
  check_requantized_batched_equals_alone ("random-qwen2-f32.gguf", LLM_TYPE_F16);
}
END_TEST

START_TEST (test_batched_streams_equal_alone_stories260k_f32)
{
  check_batched_equals_alone ("stories260K.gguf");
}
END_TEST

START_TEST (test_batched_streams_equal_alone_tinystories_q8_0)
{
  check_batched_equals_alone ("TinyStories-656K-Q8_0.gguf");
}
END_TEST

START_TEST (test_batched_streams_equal_alone_random_qwen2)
{
  check_batched_equals_alone ("random-qwen2-f32.gguf");
}
END_TEST

START_TEST (test_batched_streams_equal_alone_random_qwen3)
{
  check_batched_equals_alone ("random-qwen3-f32.gguf");
}
END_TEST

START_TEST (test_batched_streams_equal_alone_random_llama_bf16)
{
  check_batched_equals_alone ("random-llama-bf16.gguf");
}
END_TEST

/* Feeds @ids one call and returns the last logits' argmax; @logits gets
 * them. */
static gint32
feed (LlmSeq *seq, const gint32 *ids, guint n, float *logits)
{
  GError *error = NULL;
  ck_assert_msg (llm_seq_eval_tokens (seq, ids, n, logits, FALSE, &error), "%s",
      error ? error->message : "");
  return (gint32) llm_test_argmax (logits, llm_engine_model (llm_seq_engine (seq))->hp.n_vocab);
}

/* @n greedy steps after @first; the ids into @out, the last logits into
 * @logits. */
static void
greedy (LlmSeq *seq, gint32 first, guint n, gint32 *out, float *logits)
{
  gint32 next = first;
  for (guint s = 0; s < n; s++) {
    out[s] = next;
    next = feed (seq, &next, 1, logits);
  }
}

/* A prompt that crosses a 64-position block, so truncate and fork meet a
 * partly filled, shared block. */
#define LONG_PROMPT 70

static void
long_prompt (guint n_vocab, gint32 *ids)
{
  for (guint k = 0; k < LONG_PROMPT; k++)
    ids[k] = (gint32) ((k * 37 + 11) % n_vocab);
}

START_TEST (test_truncate_then_decode_equals_a_fresh_sequence)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  g_autofree float *la = g_new (float, n_vocab), *lb = g_new (float, n_vocab);
  gint32 prompt[LONG_PROMPT], a[24], b[16];
  long_prompt (n_vocab, prompt);

  /* a: prompt, 24 steps, cut back to prompt + 2 (inside the second block), 16 steps */
  g_autoptr (LlmSeq) sa = llm_test_new_seq (e, &kv_f16);
  greedy (sa, feed (sa, prompt, LONG_PROMPT, la), 24, a, la);
  llm_seq_truncate (sa, LONG_PROMPT + 2);
  ck_assert_uint_eq (llm_seq_n (sa), LONG_PROMPT + 2);
  ck_assert_uint_eq (llm_seq_pos_next (sa), LONG_PROMPT + 2);
  gint32 after_a[16];
  greedy (sa, feed (sa, &a[2], 1, la), 16, after_a, la);

  /* b: a fresh sequence fed prompt + a[0..2] */
  g_autoptr (LlmSeq) sb = llm_test_new_seq (e, &kv_f16);
  feed (sb, prompt, LONG_PROMPT, lb);
  feed (sb, a, 2, lb);
  greedy (sb, feed (sb, &a[2], 1, lb), 16, b, lb);
  ck_assert_mem_eq (after_a, b, sizeof b);
  ck_assert_mem_eq (la, lb, n_vocab * sizeof (float));
}
END_TEST

/* A sequence that skips layers (layer skipping's drafts) writes zeros
 * into those layers' cache rows at the positions it evaluates: a
 * window's shift re-rotates every row it keeps, and rows left as they
 * were (an earlier, truncated evaluation's, or memory no one wrote) were
 * read as they were (valgrind: uninitialised, in the spec suite's
 * evicting window). The other layers' rows are the forward's as ever. */
START_TEST (test_skipped_layers_cache_zeros_at_the_positions_evaluated)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 1);
  g_autoptr (LlmSeq) seq = llm_test_new_seq (e, &kv_f16);
  const guint n_layer = m->hp.n_layer, row = m->hp.n_head_kv * m->hp.head_dim;
  ck_assert_uint_ge (n_layer, 2);
  gint32 ids[8];
  for (guint i = 0; i < 8; i++)
    ids[i] = (gint32) ((37 * i + 5) % m->hp.n_vocab);
  g_autofree float *logits = g_new (float, m->hp.n_vocab);
  GError *error = NULL;
  ck_assert_msg (llm_seq_eval_tokens (seq, ids, 8, logits, FALSE, &error), "%s",
      error ? error->message : "");
  /* Positions 4..7 again, layer 1 skipped: its rows there held the first
   * evaluation's values. */
  llm_seq_truncate (seq, 4);
  g_autofree guint8 *skip = g_new0 (guint8, n_layer);
  skip[1] = 1;
  ck_assert (llm_seq_set_skip_layers (seq, skip));
  ck_assert_msg (llm_seq_eval_tokens (seq, ids + 4, 4, logits, FALSE, &error), "%s",
      error ? error->message : "");
  g_autofree float *k = g_new (float, row), *v = g_new (float, row);
  for (guint32 pos = 0; pos < 8; pos++) {
    llm_kv_cache_read (llm_seq_kv (seq), 1, pos, k, v);
    gboolean zero = TRUE;
    for (guint i = 0; i < row; i++)
      zero &= k[i] == 0.0f && v[i] == 0.0f;
    ck_assert_msg (zero == (pos >= 4), "layer 1, position %u: %s", pos,
        zero ? "zeros where the first evaluation wrote" : "not zeros where it was skipped");
    llm_kv_cache_read (llm_seq_kv (seq), 0, pos, k, v);
    gboolean any = FALSE;
    for (guint i = 0; i < row; i++)
      any |= k[i] != 0.0f;
    ck_assert_msg (any, "layer 0, position %u: no keys", pos);
  }
}
END_TEST

START_TEST (test_fork_shares_the_prefix_and_each_branch_equals_a_fresh_sequence)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  g_autofree float *l = g_new (float, n_vocab), *lf = g_new (float, n_vocab);
  gint32 prompt[LONG_PROMPT];
  long_prompt (n_vocab, prompt);

  g_autoptr (LlmSeq) parent = llm_test_new_seq (e, &kv_f16);
  feed (parent, prompt, LONG_PROMPT, l);
  const gsize before = llm_engine_kv_bytes (e);
  g_autoptr (LlmSeq) child = llm_seq_fork (parent);
  /* Sharing costs nothing until a write. */
  ck_assert_uint_eq (llm_engine_kv_bytes (e), before);
  ck_assert_uint_eq (llm_seq_n (child), LONG_PROMPT);

  /* Two different continuations, interleaved, each writing into the
   * shared second block. */
  const gint32 x = 5, y = 9;
  gint32 gp[12], gc[12];
  gint32 np = feed (parent, &x, 1, l), nc = feed (child, &y, 1, lf);
  /* The first block stays shared; the partly filled second was copied. */
  ck_assert_uint_lt (llm_engine_kv_bytes (e), 2 * before);
  ck_assert_uint_gt (llm_engine_kv_bytes (e), before);
  for (guint s = 0; s < G_N_ELEMENTS (gp); s++) {
    gp[s] = np;
    gc[s] = nc;
    np = feed (parent, &np, 1, l);
    nc = feed (child, &nc, 1, lf);
  }

  gint32 fresh[12];
  g_autofree float *lr = g_new (float, n_vocab);
  const gint32 firsts[2] = { x, y };
  const gint32 *want[2] = { gp, gc };
  const float *want_logits[2] = { l, lf };
  for (int b = 0; b < 2; b++) {
    g_autoptr (LlmSeq) r = llm_test_new_seq (e, &kv_f16);
    feed (r, prompt, LONG_PROMPT, lr);
    greedy (r, feed (r, &firsts[b], 1, lr), G_N_ELEMENTS (fresh), fresh, lr);
    ck_assert_mem_eq (fresh, want[b], sizeof fresh);
    ck_assert_mem_eq (lr, want_logits[b], n_vocab * sizeof (float));
  }
}
END_TEST

START_TEST (test_rows_of_a_sequence_must_be_adjacent_and_consecutive)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  g_autoptr (LlmSeq) a = llm_test_new_seq (e, &kv_f16);
  g_autoptr (LlmSeq) b = llm_test_new_seq (e, &kv_f16);
  GError *error = NULL;
  LlmBatchRow split[3] = { { a, 1, NULL, 0, FALSE }, { b, 1, NULL, 0, FALSE },
    { a, 2, NULL, 1, FALSE } };
  ck_assert (!llm_engine_eval (e, split, 3, NULL, &error));
  ck_assert (g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH));
  ck_assert_msg (strstr (error->message, "not adjacent"), "%s", error->message);
  g_clear_error (&error);
  ck_assert_uint_eq (llm_seq_n (a), 0);

  LlmBatchRow gap[2] = { { a, 1, NULL, 0, FALSE }, { a, 2, NULL, 2, FALSE } };
  ck_assert (!llm_engine_eval (e, gap, 2, NULL, &error));
  ck_assert (g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH));
  g_clear_error (&error);

  /* A bad token fails its own sequence only. */
  LlmBatchRow mixed[2] = { { a, 1, NULL, 0, FALSE }, { b, 1 << 30, NULL, 0, FALSE } };
  ck_assert (!llm_engine_eval (e, mixed, 2, NULL, &error));
  ck_assert (g_error_matches (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_TOKEN));
  g_clear_error (&error);
  ck_assert_uint_eq (llm_seq_n (a), 1);
  ck_assert_uint_eq (llm_seq_n (b), 0);
}
END_TEST

/* --- scheduler ------------------------------------------------------- */

/* A session of @e that samples greedily; NULL with @error set. */
static LlmSession *
greedy_session (LlmEngine *e, const LlmKvConfig *kv, GError **error)
{
  LlmSessionConfig cfg = { .kv = *kv };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  return llm_session_new (e, &cfg, error);
}

typedef struct {
  LlmEngine *engine;
  guint index;
  gint32 ids[N_STEPS];
  GError *error;
} Stream;

static gpointer
stream_main (gpointer data)
{
  Stream *st = data;
  LlmSession *s = greedy_session (st->engine, &kv_f16, &st->error);
  if (s == NULL)
    return NULL;
  gint32 prompt[16];
  const guint n = make_prompt (st->index, llm_engine_model (st->engine)->hp.n_vocab, prompt);
  gint32 next;
  if (llm_session_prefill (s, prompt, n, &next, &st->error)) {
    for (guint k = 0; k < N_STEPS; k++) {
      st->ids[k] = next;
      if (k + 1 < N_STEPS && !llm_session_step (s, next, &next, &st->error))
        break;
    }
  }
  llm_session_unref (s);
  return NULL;
}

/* Streams 0..n-1 of @e, each on a thread of its own, to the end. */
static void
run_streams (LlmEngine *e, Stream *st, guint n)
{
  GThread *threads[N_STREAMS];
  g_assert (n <= N_STREAMS);
  for (guint i = 0; i < n; i++) {
    st[i] = (Stream) { e, i, { 0 }, NULL };
    threads[i] = g_thread_new ("stream", stream_main, &st[i]);
  }
  for (guint i = 0; i < n; i++)
    g_thread_join (threads[i]);
}

/* Streams on their own threads through the scheduler: each gets its own
 * ids, and their steps shared forwards. */
START_TEST (test_concurrent_streams_share_forwards_and_keep_their_ids)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  /* A short wait for company makes the batching certain on a loaded
   * machine; results may not depend on it. */
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 20000);
  g_autoptr (LlmEngine) solo = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  enum { N = 8 };
  Stream st[N];
  run_streams (e, st, N);

  guint64 forwards, rows;
  llm_engine_batch_stats (e, &forwards, &rows);
  for (guint i = 0; i < N; i++) {
    ck_assert_msg (st[i].error == NULL, "stream %u: %s", i, st[i].error->message);
    Alone alone;
    run_alone (solo, i, &alone);
    ck_assert_mem_eq (st[i].ids, alone.ids, sizeof alone.ids);
    g_free (alone.logits);
  }
  ck_assert_msg (rows > forwards, "%" G_GUINT64_FORMAT " rows in %" G_GUINT64_FORMAT
      " forwards: nothing was batched", rows, forwards);
}
END_TEST

/* With no wait for company configured, streams that stepped together
 * step together again: the scheduler waits for the streams of the last
 * forward, which are a sample away, instead of running whoever comes
 * first alone and the rest next (two streams would then decode no faster
 * than one). */
#define LONG_STEPS 512

static const LlmKvConfig kv_long = {
  .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL, .context_length = LONG_STEPS,
};

typedef struct {
  LlmEngine *engine;
  LlmSeq *seq;
  guint index;
  GError *error;
} Stepper;

static gpointer
stepper_main (gpointer data)
{
  Stepper *st = data;
  const guint n_vocab = llm_engine_model (st->engine)->hp.n_vocab;
  g_autofree float *logits = g_new (float, n_vocab);
  gint32 tok = (gint32) (1 + st->index);
  for (guint k = 0; k < LONG_STEPS && st->error == NULL; k++) {
    if (llm_engine_submit (st->engine, st->seq, &tok, 1, logits, FALSE, &st->error))
      tok = (gint32) llm_test_argmax (logits, n_vocab);
  }
  return NULL;
}

START_TEST (test_streams_without_batch_wait_still_step_together)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  enum { N = 2 };
  Stepper st[N];
  GThread *threads[N];
  for (guint i = 0; i < N; i++) {
    st[i] = (Stepper) { e, llm_test_new_seq (e, &kv_long), i, NULL };
    threads[i] = g_thread_new ("stepper", stepper_main, &st[i]);
  }
  for (guint i = 0; i < N; i++) {
    g_thread_join (threads[i]);
    ck_assert_msg (st[i].error == NULL, "stream %u: %s", i, st[i].error->message);
    llm_seq_free (st[i].seq);
  }
  guint64 forwards, rows;
  llm_engine_batch_stats (e, &forwards, &rows);
  g_print ("%u streams, no batch wait: %" G_GUINT64_FORMAT " rows in %" G_GUINT64_FORMAT
      " forwards\n", N, rows, forwards);
  /* Taking turns needs a forward per row; stepping together, one per
   * step (about 0.6 of the rows on a quiet machine; 0.75 was seen with
   * both cores busy with other work, so the line is drawn at 0.85, still
   * far from turns). */
  ck_assert_msg (forwards <= rows * 85 / 100, "%" G_GUINT64_FORMAT " forwards for %"
      G_GUINT64_FORMAT " rows of %u streams: they took turns", forwards, rows, N);
}
END_TEST

/* The leader of a forward waits a little for the streams the last
 * forwards served, so they step together; a stream freed after its step
 * never comes back and must not be waited for. It was, for a quarter of
 * the last forward: after a prompt, a step of the stream left waited
 * nine times its own time. */
START_TEST (test_a_freed_stream_is_not_waited_for)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  g_autoptr (GError) error = NULL;
  g_autofree float *logits = g_new (float, llm_model_hparams (m)->n_vocab);
  gint32 prompt[40];
  for (guint k = 0; k < G_N_ELEMENTS (prompt); k++)
    prompt[k] = (gint32) (3 + 5 * k);
  gint32 tok = 7;
  LlmSeq *a = llm_test_new_seq (e, &kv_long), *b = llm_test_new_seq (e, &kv_long);
  guint64 waits, waited_us;

  /* a's step, then a is freed: b's prompt and steps wait for nobody. */
  ck_assert (llm_engine_submit (e, a, &tok, 1, logits, FALSE, &error));
  llm_seq_free (a);
  ck_assert (llm_engine_submit (e, b, prompt, G_N_ELEMENTS (prompt), logits, FALSE, &error));
  for (guint k = 0; k < 3; k++)
    ck_assert (llm_engine_submit (e, b, &tok, 1, logits, FALSE, &error));
  llm_engine_wait_stats (e, &waits, &waited_us);
  ck_assert_msg (waits == 0, "waited %" G_GUINT64_FORMAT " times (%" G_GUINT64_FORMAT
      " us) for a freed stream", waits, waited_us);

  /* The control: a stream alive after its step is waited for (once, then
   * the leader no longer expects it). */
  LlmSeq *c = llm_test_new_seq (e, &kv_long);
  ck_assert (llm_engine_submit (e, c, &tok, 1, logits, FALSE, &error));
  ck_assert (llm_engine_submit (e, b, &tok, 1, logits, FALSE, &error));
  llm_engine_wait_stats (e, &waits, &waited_us);
  ck_assert_uint_ge (waits, 1);
  llm_seq_free (c);
  llm_seq_free (b);
}
END_TEST

/* Prompts that arrive together share max-prefill-chunk: a forward takes
 * that many prompt rows in all, not that many of each, so every stream's
 * step waits on at most one chunk however many prompts arrive. */
typedef struct {
  LlmEngine *engine;
  LlmSeq *seq;
  guint index;
  float *logits;
  GError *error;
} Prompter;

#define PROMPT_ROWS 20

static gpointer
prompter_main (gpointer data)
{
  Prompter *p = data;
  gint32 prompt[PROMPT_ROWS];
  for (guint k = 0; k < PROMPT_ROWS; k++)
    prompt[k] = (gint32) (2 + 7 * k + p->index);
  llm_engine_submit (p->engine, p->seq, prompt, PROMPT_ROWS, p->logits, FALSE, &p->error);
  return NULL;
}

START_TEST (test_prompts_arriving_together_share_the_prefill_chunk)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.max_prefill_chunk = 8;
  /* The first prompt waits (up to half a second) for the second, so
   * both are pending from the first forward on; the last two forwards,
   * the second prompt's alone, wait that long too. */
  o.max_batch_wait_us = 500000;
  g_autoptr (LlmEngine) e = engine_with (m, &o);
  g_autoptr (LlmEngine) solo = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  enum { N = 2 };
  const guint n_vocab = m->hp.n_vocab;
  Prompter p[N];
  GThread *threads[N];
  for (guint i = 0; i < N; i++) {
    p[i] = (Prompter) { e, llm_test_new_seq (e, &kv_f16), i, g_new (float, n_vocab), NULL };
    threads[i] = g_thread_new ("prompter", prompter_main, &p[i]);
  }
  for (guint i = 0; i < N; i++)
    g_thread_join (threads[i]);
  guint64 forwards, rows;
  llm_engine_batch_stats (e, &forwards, &rows);
  /* 40 rows 8 at a time: 5 forwards (a chunk each would take 3). */
  ck_assert_uint_eq (rows, N * PROMPT_ROWS);
  ck_assert_uint_eq (forwards, N * PROMPT_ROWS / 8);
  for (guint i = 0; i < N; i++) {
    ck_assert_msg (p[i].error == NULL, "prompt %u: %s", i, p[i].error->message);
    /* And the chunks change no logit. */
    gint32 prompt[PROMPT_ROWS];
    for (guint k = 0; k < PROMPT_ROWS; k++)
      prompt[k] = (gint32) (2 + 7 * k + i);
    g_autoptr (LlmSeq) seq = llm_test_new_seq (solo, &kv_f16);
    g_autofree float *alone = g_new (float, n_vocab);
    feed (seq, prompt, PROMPT_ROWS, alone);
    ck_assert_mem_eq (p[i].logits, alone, n_vocab * sizeof (float));
    g_free (p[i].logits);
    llm_seq_free (p[i].seq);
  }
}
END_TEST

/* --- KV pool limit --------------------------------------------------- */

/* Bytes of a kv_f16 sequence's first block of positions on @m (measured
 * by feeding one token), so a pool of that size holds one stream. */
static gsize
one_block_bytes (LlmModel *m)
{
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  g_autoptr (LlmSeq) seq = llm_test_new_seq (e, &kv_f16);
  g_autofree float *l = g_new (float, m->hp.n_vocab);
  const gint32 one = 1;
  feed (seq, &one, 1, l);
  return llm_seq_kv_bytes (seq);
}

/* A pool smaller than one block could never hold a token, whatever
 * kv-full says: the sequence is refused when it is made, with the size
 * to raise the limit to (it used to fail at the first token as a full
 * pool, advising kv-full=preempt). */
START_TEST (test_a_pool_smaller_than_one_block_refuses_the_sequence_naming_the_minimum)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const gsize block = one_block_bytes (m);
  g_autoptr (LlmEngine) e = new_engine (m, block - 1, LLM_KV_FULL_PREEMPT, 0);
  GError *error = NULL;
  LlmSeq *seq = llm_seq_new (e, &kv_f16, &error);
  ck_assert_ptr_null (seq);
  ck_assert (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG));
  g_autofree char *minimum = g_strdup_printf ("at least %" G_GSIZE_FORMAT, block);
  ck_assert_msg (strstr (error->message, "kv-pool-bytes") && strstr (error->message, minimum),
      "%s", error->message);
  g_clear_error (&error);
  g_autoptr (LlmEngine) fits = new_engine (m, block, LLM_KV_FULL_PREEMPT, 0);
  g_autoptr (LlmSeq) ok = llm_test_new_seq (fits, &kv_f16);
}
END_TEST

START_TEST (test_full_kv_pool_refuses_with_the_limit_named)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = new_engine (m, one_block_bytes (m), LLM_KV_FULL_REFUSE, 0);
  g_autofree float *l = g_new (float, m->hp.n_vocab);
  gint32 one = 1;
  g_autoptr (LlmSeq) a = llm_test_new_seq (e, &kv_f16);
  g_autoptr (LlmSeq) b = llm_test_new_seq (e, &kv_f16);
  feed (a, &one, 1, l);
  GError *error = NULL;
  ck_assert (!llm_seq_eval_tokens (b, &one, 1, l, FALSE, &error));
  ck_assert (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL));
  ck_assert_msg (strstr (error->message, "kv-pool-bytes"), "%s", error->message);
  g_clear_error (&error);
  ck_assert_uint_eq (llm_seq_n (b), 0);
  ck_assert_uint_eq (llm_seq_n (a), 1);
  /* Freeing a gives the block back. */
  g_clear_pointer (&a, llm_seq_free);
  feed (b, &one, 1, l);
}
END_TEST

/* Preemption: a new stream takes the idle one's KV; the idle session
 * recomputes its cache from its history on its next step and still gives
 * the ids it gives alone. */
START_TEST (test_full_kv_pool_preempts_the_idle_stream_which_recomputes)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) solo = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  Alone want0, want1;
  run_alone (solo, 0, &want0);
  run_alone (solo, 1, &want1);
  g_autoptr (LlmEngine) e = new_engine (m, one_block_bytes (m), LLM_KV_FULL_PREEMPT, 0);
  GError *error = NULL;
  g_autoptr (LlmSession) s0 = greedy_session (e, &kv_f16, &error);
  g_autoptr (LlmSession) s1 = greedy_session (e, &kv_f16, &error);
  gint32 prompt[16], next0, next1, got0[N_STEPS], got1[N_STEPS];
  guint n = make_prompt (0, m->hp.n_vocab, prompt);
  ck_assert (llm_session_prefill (s0, prompt, n, &next0, &error));
  n = make_prompt (1, m->hp.n_vocab, prompt);
  /* s0 is idle now: s1 takes its block */
  ck_assert_msg (llm_session_prefill (s1, prompt, n, &next1, &error), "%s",
      error ? error->message : "");
  ck_assert (llm_seq_was_preempted (llm_session_seq (s0)));
  for (guint k = 0; k < N_STEPS; k++) {
    got0[k] = next0;
    got1[k] = next1;
    if (k + 1 == N_STEPS)
      break;
    /* each step preempts the other, which is idle */
    ck_assert_msg (llm_session_step (s0, next0, &next0, &error), "%s",
        error ? error->message : "");
    ck_assert_msg (llm_session_step (s1, next1, &next1, &error), "%s",
        error ? error->message : "");
  }
  ck_assert_mem_eq (got0, want0.ids, sizeof got0);
  ck_assert_mem_eq (got1, want1.ids, sizeof got1);
  g_free (want0.logits);
  g_free (want1.logits);
}
END_TEST

/* Three prompts of 2 blocks in one evaluation, a pool of 5 blocks: the
 * third gets one block, then finds the pool held by the other two, which
 * this forward may not preempt. It fails with the pool-full error (it
 * used to preempt itself, take its block again and fail again, forever);
 * evaluated again, it preempts an idle one and gives the logits it gives
 * alone. */
START_TEST (test_a_stream_short_of_blocks_mid_evaluation_never_preempts_itself)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const guint n_vocab = m->hp.n_vocab;
  enum { N = 3, LEN = 100 };
  gint32 prompt[N][LEN];
  for (guint i = 0; i < N; i++)
    for (guint k = 0; k < LEN; k++)
      prompt[i][k] = (gint32) ((977 * (i + 1) + 131 * k) % n_vocab);
  g_autofree float *want = g_new (float, n_vocab);
  {
    g_autoptr (LlmEngine) solo = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
    g_autoptr (LlmSeq) seq = llm_test_new_seq (solo, &kv_f16);
    feed (seq, prompt[2], LEN, want);
  }

  g_autoptr (LlmEngine) e = new_engine (m, 5 * one_block_bytes (m), LLM_KV_FULL_PREEMPT, 0);
  LlmSeq *seqs[N];
  LlmBatchRow rows[N * LEN];
  for (guint i = 0; i < N; i++) {
    seqs[i] = llm_test_new_seq (e, &kv_f16);
    for (guint k = 0; k < LEN; k++)
      rows[i * LEN + k] = (LlmBatchRow) { seqs[i], prompt[i][k], NULL, k, FALSE };
  }
  GError *error = NULL;
  ck_assert (!llm_engine_eval (e, rows, N * LEN, NULL, &error));
  ck_assert_msg (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL), "%s",
      error ? error->message : "no error");
  g_clear_error (&error);
  ck_assert_uint_eq (llm_seq_n (seqs[0]), LEN);
  ck_assert_uint_eq (llm_seq_n (seqs[1]), LEN);
  ck_assert_uint_lt (llm_seq_n (seqs[2]), LEN);

  g_autofree float *got = g_new (float, n_vocab);
  llm_seq_clear (seqs[2]);
  feed (seqs[2], prompt[2], LEN, got);
  ck_assert (llm_seq_was_preempted (seqs[0]) || llm_seq_was_preempted (seqs[1]));
  ck_assert_mem_eq (got, want, n_vocab * sizeof (float));
  for (guint i = 0; i < N; i++)
    llm_seq_free (seqs[i]);
}
END_TEST

/* A prompt three times the window, fed in one call through prefill chunks
 * of 16 rows (so over many forwards, evicting in between), leaves the
 * session as its tokens fed one at a time do: the same positions and the
 * same logits, under both window policies. (The chunks after the first
 * eviction were refused for a position past the sequence's.) */
START_TEST (test_a_prompt_longer_than_the_window_slides_through_it_as_steps_do)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const guint n_vocab = m->hp.n_vocab;
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.max_prefill_chunk = 16;
  g_autoptr (LlmEngine) e = engine_with (m, &o);
  GError *error = NULL;
  enum { LEN = 150 };
  gint32 prompt[LEN];
  for (guint k = 0; k < LEN; k++)
    prompt[k] = (gint32) ((131 * k + 7) % n_vocab);
  const LlmKvConfig windows[] = {
    { .type = LLM_KV_F16, .policy = LLM_KV_POLICY_WINDOW, .window = 48 },
    { .type = LLM_KV_F16, .policy = LLM_KV_POLICY_SINK_WINDOW, .window = 48, .sink = 4 },
  };
  for (guint w = 0; w < G_N_ELEMENTS (windows); w++) {
    g_autoptr (LlmSession) at_once = greedy_session (e, &windows[w], &error);
    g_autoptr (LlmSession) steps = greedy_session (e, &windows[w], &error);
    ck_assert_msg (llm_session_feed (at_once, prompt, LEN, &error), "window %u: %s", w,
        error ? error->message : "");
    for (guint k = 0; k < LEN; k++)
      ck_assert (llm_session_feed (steps, &prompt[k], 1, &error));
    LlmSeq *a = llm_session_seq (at_once), *b = llm_session_seq (steps);
    ck_assert_uint_lt (llm_seq_n (a), LEN);
    ck_assert_uint_eq (llm_seq_n (a), llm_seq_n (b));
    ck_assert_uint_eq (llm_seq_pos_next (a), llm_seq_pos_next (b));
    ck_assert_mem_eq (llm_session_logits (at_once), llm_session_logits (steps),
        n_vocab * sizeof (float));
  }
}
END_TEST

/* Two streams on their own threads, a pool for one: they take the block
 * from each other all along and still give their ids. */
START_TEST (test_concurrent_streams_preempting_each_other_keep_their_ids)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) solo = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  const gsize block = one_block_bytes (m);
  for (int round = 0; round < 20; round++) {
    g_autoptr (LlmEngine) e = new_engine (m, block, LLM_KV_FULL_PREEMPT, 0);
    enum { N = 2 };
    Stream st[N];
    run_streams (e, st, N);
    for (guint i = 0; i < N; i++) {
      ck_assert_msg (st[i].error == NULL, "round %d stream %u: %s", round, i,
          st[i].error->message);
      Alone alone;
      run_alone (solo, i, &alone);
      ck_assert_msg (memcmp (st[i].ids, alone.ids, sizeof alone.ids) == 0,
          "round %d stream %u differs from alone", round, i);
      g_free (alone.logits);
    }
  }
}
END_TEST

/* A stream that decodes TURN_STEPS ids after its prompt, on its own
 * thread; done is set when it has all of them. */
enum { TURN_STEPS = 60 };

typedef struct {
  LlmEngine *engine;
  gint32 ids[TURN_STEPS];
  gint done;
  GError *error;
} TurnStream;

static gpointer
turn_stream_main (gpointer data)
{
  TurnStream *st = data;
  g_autoptr (LlmSession) s = greedy_session (st->engine, &kv_f16, &st->error);
  gint32 prompt[16], next;
  const guint n = make_prompt (1, llm_engine_model (st->engine)->hp.n_vocab, prompt);
  if (s == NULL || !llm_session_prefill (s, prompt, n, &next, &st->error))
    return NULL;
  for (guint k = 0; k < TURN_STEPS; k++) {
    st->ids[k] = next;
    if (k + 1 < TURN_STEPS && !llm_session_step (s, next, &next, &st->error))
      return NULL;
  }
  g_atomic_int_set (&st->done, TRUE);
  return NULL;
}

/* TURN_STEPS ids of turn_stream_main on an engine of @m's own. */
static void
turn_stream_alone (LlmModel *m, TurnStream *want)
{
  *want = (TurnStream) { new_engine (m, 0, LLM_KV_FULL_REFUSE, 0), { 0 }, FALSE, NULL };
  turn_stream_main (want);
  ck_assert_msg (want->done, "%s", want->error ? want->error->message : "");
  g_clear_pointer (&want->engine, llm_engine_unref);
}

/* An engine whose streams take turns of @slice_us on a pool of
 * @pool_bytes, with prompts fed @chunk rows a forward (0: the default). */
static LlmEngine *
turn_engine (LlmModel *m, gsize pool_bytes, guint64 slice_us, guint chunk)
{
  LlmEngineOptions o = pool_options (pool_bytes, LLM_KV_FULL_PREEMPT);
  o.kv_time_slice_us = slice_us;
  o.max_prefill_chunk = chunk;
  return engine_with (m, &o);
}

/* kv_time_slice_us: a live stream without end (a sink window of the
 * pool's 3 blocks of 64 positions) holds every block; a newer
 * stream, which without slices would wait for as long as the live one
 * runs, gets turns of 2 ms, finishes its response while the live one
 * is still decoding, and gives the ids it gives alone. */
START_TEST (test_time_slices_let_a_waiting_stream_in_beside_an_endless_one)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  TurnStream want;
  turn_stream_alone (m, &want);

  const gsize pool = 3 * one_block_bytes (m);
  g_autoptr (LlmEngine) e = turn_engine (m, pool, 2000, 0);
  GError *error = NULL;
  const LlmKvConfig live_kv = {
    .type = LLM_KV_F16, .policy = LLM_KV_POLICY_SINK_WINDOW, .window = 160, .sink = 4,
  };
  g_autoptr (LlmSession) live = greedy_session (e, &live_kv, &error);
  ck_assert_msg (live != NULL, "%s", error ? error->message : "");
  gint32 prompt[16], next;
  const guint n = make_prompt (0, m->hp.n_vocab, prompt);
  ck_assert (llm_session_prefill (live, prompt, n, &next, &error));
  guint steps = 0;
  for (; steps < 200; steps++)
    ck_assert_msg (llm_session_step (live, next, &next, &error), "step %u: %s", steps, error->message);
  /* no room for the newer stream's first block */
  ck_assert_uint_lt (pool - llm_engine_kv_bytes (e), one_block_bytes (m));

  TurnStream st = { e, { 0 }, FALSE, NULL };
  GThread *thread = g_thread_new ("stream", turn_stream_main, &st);
  /* Without turns this runs out first, and the stream's prompt is
   * answered only once the live stream has stopped for a while. */
  for (; steps < 20000 && !g_atomic_int_get (&st.done); steps++)
    ck_assert_msg (llm_session_step (live, next, &next, &error), "%s", error->message);
  const gboolean done_beside = g_atomic_int_get (&st.done);
  g_thread_join (thread);
  ck_assert_msg (st.error == NULL, "%s", st.error ? st.error->message : "");
  ck_assert_msg (done_beside, "the newer stream waited out %u steps of the live one", steps);
  ck_assert_msg (memcmp (st.ids, want.ids, sizeof want.ids) == 0,
      "the newer stream's ids differ from its ids alone");
}
END_TEST

/* Turns of a microsecond, prompts and recomputes fed 4 rows a forward:
 * a turn ends only after a step past the recompute it began with, so
 * three streams on a pool for one (2 blocks) all finish, with their ids
 * alone. (Turns that could end mid-recompute, which takes up to 20
 * forwards here, passed the memory round without a token for ever, in
 * about a third of the runs.) */
START_TEST (test_time_slices_shorter_than_a_recompute_still_make_progress)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  TurnStream want;
  turn_stream_alone (m, &want);

  g_autoptr (LlmEngine) e = turn_engine (m, 2 * one_block_bytes (m), 1, 4);
  enum { N = 3 };
  TurnStream st[N];
  GThread *threads[N];
  for (guint i = 0; i < N; i++) {
    st[i] = (TurnStream) { e, { 0 }, FALSE, NULL };
    threads[i] = g_thread_new ("stream", turn_stream_main, &st[i]);
  }
  for (guint i = 0; i < N; i++) {
    g_thread_join (threads[i]);
    ck_assert_msg (st[i].done, "stream %u: %s", i, st[i].error ? st[i].error->message : "");
    ck_assert_msg (memcmp (st[i].ids, want.ids, sizeof want.ids) == 0,
        "stream %u's ids differ from its ids alone", i);
  }
}
END_TEST

/* --- sessions -------------------------------------------------------- */

static LlmSession *
penalised_session (LlmEngine *e)
{
  LlmSessionConfig cfg = { .kv = kv_f16 };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  cfg.sampler.repeat_penalty = 1.5f;
  cfg.sampler.repeat_last_n = 8;
  GError *error = NULL;
  LlmSession *s = llm_session_new (e, &cfg, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  return s;
}

/* After a rollback the repetition penalty sees the kept history only, so
 * the session samples what a fresh one fed the kept ids samples. */
START_TEST (test_session_truncate_rolls_back_history_and_penalty)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  g_autoptr (LlmSession) a = penalised_session (e);
  gint32 prompt[16], next, gen[12];
  const guint n = make_prompt (3, m->hp.n_vocab, prompt);
  GError *error = NULL;
  ck_assert (llm_session_prefill (a, prompt, n, &next, &error));
  for (guint k = 0; k < G_N_ELEMENTS (gen); k++) {
    gen[k] = next;
    ck_assert (llm_session_step (a, next, &next, &error));
  }
  ck_assert_uint_eq (llm_session_n_ids (a), n + 12);
  llm_session_truncate (a, n + 3);
  ck_assert_uint_eq (llm_session_n_ids (a), n + 3);
  ck_assert_uint_eq (llm_seq_n (llm_session_seq (a)), n + 3);
  ck_assert_ptr_null (llm_session_logits (a));
  const gint32 forced = 42;
  gint32 got_a, got_b;
  ck_assert (llm_session_step (a, forced, &got_a, &error));

  g_autoptr (LlmSession) b = penalised_session (e);
  gint32 kept[32];
  memcpy (kept, prompt, n * sizeof (gint32));
  memcpy (kept + n, gen, 3 * sizeof (gint32));
  kept[n + 3] = forced;
  ck_assert (llm_session_prefill (b, kept, n + 4, &got_b, &error));
  ck_assert_int_eq (got_a, got_b);
  ck_assert_mem_eq (llm_session_logits (a), llm_session_logits (b),
      m->hp.n_vocab * sizeof (float));
}
END_TEST

/* A live stream over ten windows: the session keeps exactly the ids its
 * cache holds (sink, then the newest), never more. */
START_TEST (test_session_history_stays_within_the_window)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = new_engine (m, 0, LLM_KV_FULL_REFUSE, 0);
  const LlmKvConfig window = {
    .type = LLM_KV_F16, .policy = LLM_KV_POLICY_SINK_WINDOW, .window = 32, .sink = 4,
  };
  GError *error = NULL;
  g_autoptr (LlmSession) s = greedy_session (e, &window, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  gint32 fed[400];
  for (guint t = 0; t < G_N_ELEMENTS (fed); t++) {
    fed[t] = (gint32) (1 + t % 400);
    ck_assert (llm_session_feed (s, &fed[t], 1, &error));
    const guint n = llm_session_n_ids (s);
    ck_assert_uint_eq (n, llm_seq_n (llm_session_seq (s)));
    ck_assert_uint_le (n, 36);
    const gint32 *ids = llm_session_ids (s);
    for (guint c = 0; c < MIN (n, 4u); c++)
      ck_assert_int_eq (ids[c], fed[c]);
    for (guint c = 4; c < n; c++)
      ck_assert_int_eq (ids[c], fed[t + 1 - (n - c)]);
  }
}
END_TEST

static Suite *
engine_suite (void)
{
  Suite *s = suite_create ("engine");
  TCase *batch = tcase_create ("batch");
  tcase_set_timeout (batch, 300);
  tcase_add_test (batch, test_batched_streams_equal_alone_stories260k_f32);
  tcase_add_test (batch, test_batched_streams_equal_alone_stories260k_q4_0);
  tcase_add_test (batch, test_batched_streams_equal_alone_stories260k_f16);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_llama_k_quants);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_qwen2_q4_0);
  tcase_add_test (batch, test_batched_streams_equal_alone_stories260k_q5_0);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_qwen2_q5_0);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_qwen2_f16);
  tcase_add_test (batch, test_batched_streams_equal_alone_tinystories_q8_0);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_qwen2);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_qwen3);
  tcase_add_test (batch, test_batched_streams_equal_alone_random_llama_bf16);
  tcase_add_test (batch, test_rows_of_a_sequence_must_be_adjacent_and_consecutive);
  suite_add_tcase (s, batch);

  TCase *seq = tcase_create ("seq");
  tcase_add_test (seq, test_truncate_then_decode_equals_a_fresh_sequence);
  tcase_add_test (seq, test_fork_shares_the_prefix_and_each_branch_equals_a_fresh_sequence);
  tcase_add_test (seq, test_skipped_layers_cache_zeros_at_the_positions_evaluated);
  suite_add_tcase (s, seq);

  TCase *sched = tcase_create ("scheduler");
  tcase_set_timeout (sched, 120);
  tcase_add_test (sched, test_concurrent_streams_share_forwards_and_keep_their_ids);
  tcase_add_test (sched, test_a_freed_stream_is_not_waited_for);
  tcase_add_test (sched, test_prompts_arriving_together_share_the_prefill_chunk);
  tcase_add_test (sched, test_a_pool_smaller_than_one_block_refuses_the_sequence_naming_the_minimum);
  tcase_add_test (sched, test_full_kv_pool_refuses_with_the_limit_named);
  tcase_add_test (sched, test_full_kv_pool_preempts_the_idle_stream_which_recomputes);
  tcase_add_test (sched, test_a_stream_short_of_blocks_mid_evaluation_never_preempts_itself);
  tcase_add_test (sched, test_a_prompt_longer_than_the_window_slides_through_it_as_steps_do);
  tcase_add_test (sched, test_concurrent_streams_preempting_each_other_keep_their_ids);
  tcase_add_test (sched, test_time_slices_let_a_waiting_stream_in_beside_an_endless_one);
  tcase_add_test (sched, test_time_slices_shorter_than_a_recompute_still_make_progress);
  suite_add_tcase (s, sched);

  /* Bound by how soon a thread wakes: tests/meson.build runs this case
   * alone (engine-timing), out of the suites that share the cores. */
  TCase *timing = tcase_create ("timing");
  tcase_set_tags (timing, "timing");
  tcase_set_timeout (timing, 120);
  tcase_add_test (timing, test_streams_without_batch_wait_still_step_together);
  suite_add_tcase (s, timing);

  TCase *session = tcase_create ("session");
  tcase_add_test (session, test_session_truncate_rolls_back_history_and_penalty);
  tcase_add_test (session, test_session_history_stays_within_the_window);
  suite_add_tcase (s, session);
  return s;
}

LLM_TEST_MAIN (engine_suite)
