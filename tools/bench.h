/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pieces of gst-llm-bench, one job per file: gst-llm-bench.c measures the
 * engine and prints results, bench-make-model.c writes random-weight
 * models, bench-bandwidth.c measures the memory read bandwidth that bounds
 * decoding, bench-pipeline.c measures through the GStreamer elements,
 * bench-streams.c measures many streams decoding on one engine,
 * bench-batch.c what a forward of k rows costs next to a decode step. */
#pragma once

#include <glib.h>

#include "engine.h"
#include "kvcache.h"
#include "model.h"
#include "sampler.h"
#include "session.h"

G_BEGIN_DECLS

/* --- gst-llm-bench.c: helpers the other files share --- */

/* CLOCK_MONOTONIC in milliseconds. */
double bench_now_ms (void);
/* Nearest-rank percentile @p (0..100) of @n values; sorts @v. NAN when
 * @n is 0. */
double bench_percentile (double *v, guint n, double p);
/* @n ids drawn uniformly from the vocabulary. */
void bench_fill_random (GRand *rand, gint32 *ids, guint n, guint n_vocab);
/* This process's resident memory now (VmRSS), in KiB; 0 where the
 * system does not say. */
guint64 bench_rss_kb (void);

/* --- bench-make-model.c --- */

/* "246m", "qwen2-0.5b", ... and "f32", "q4_k_m", ...: NULL-terminated,
 * static. */
const char *const *bench_model_shapes (void);
const char *const *bench_model_types (void);
/* One line per weight type of @type_name saying which tensors get it, for
 * --help. Static. */
const char *bench_model_mix_help (void);

/* Writes a random-weight GGUF of @shape with weights of @type_name to
 * @path, generating and converting rows in parallel on @n_threads (<= 0:
 * one per core) and streaming through a temporary file beside @path, so
 * memory stays well under the model's size. @seed fixes every weight.
 * Progress goes to stderr when @verbose. */
gboolean bench_make_model (const char *shape, const char *type_name, const char *path,
    guint64 seed, int n_threads, gboolean verbose, GError **error);

/* --- bench-bandwidth.c --- */

/* Read bandwidth in bytes/s: the best of at least @runs passes (and of
 * as many as fit in half a second) of a streaming read over @buffer_bytes
 * (several times the last-level cache) split over @n_threads threads. 0
 * with @error set when memory or threads fail. */
double bench_read_bandwidth (gsize buffer_bytes, int n_threads, int runs, GError **error);

/* --- bench-pipeline.c --- */

typedef struct {
  double pp_tokens_per_s;      /* prompt tokens / (time to the first token) */
  double tg_tokens_per_s;      /* generated tokens after the first / their time */
  double ttft_ms;              /* prompt pushed -> first token at the sink */
  double itl_ms_mean, itl_ms_p95;
  guint n_generated;
} BenchPipelineResult;

/* Runs `appsrc ! llmprefill ! llmdecode ! appsink` over @prompt (@n_prompt
 * ids) with greedy sampling and @n_gen tokens to generate, timing buffers
 * as they reach the sink. FALSE with @error when the plugin or the
 * elements are missing or the pipeline fails. */
gboolean bench_pipeline_run (const char *model_path, const gint32 *prompt, guint n_prompt,
    guint n_gen, int n_threads, LlmKvType kv_type, guint context_length,
    BenchPipelineResult *result, GError **error);

/* --- bench-streams.c --- */

typedef enum {
  BENCH_STREAMS_LOCKSTEP,     /* one llm_engine_eval of N rows per decode step */
  BENCH_STREAMS_SCHEDULER,    /* N threads through llm_engine_submit */
} BenchStreamsMode;

typedef struct {
  guint n_streams, n_prompt, n_gen;   /* n_prompt and n_gen at least 1 */
  int n_threads;
  LlmKvType kv_type;
  double duration_s;          /* scheduler window; 0: until N x n_gen x 3 decode
                               * tokens and at least a second */
  guint max_batch_wait_us;    /* the engine's option of that name */
  guint max_prefill_chunk;    /* the engine's option of that name; 0: its default */
  guint32 seed;
  gboolean warmup;            /* an untimed forward first */
} BenchStreamsSetting;

typedef struct {
  double tg_tokens_per_s;     /* decode tokens of all streams / their time */
  double itl_ms_p50, itl_ms_p95;      /* time between two tokens of one stream (scheduler:
                                       * from a histogram, within 1.6 %) */
  double ppN_tokens_per_s;    /* lock-step: N rows of prompt in one forward */
  /* Scheduler only (NAN or 0 in lock-step): */
  double ttft_ms_p50, ttft_ms_p95;    /* prompts that came while others decoded */
  guint n_ttft;
  double rate_min_frac, rate_max_frac; /* slowest, fastest stream's t/s / the mean's */
  double *stream_tokens_per_s;        /* [n_streams]: each stream's decode tokens / window */
  guint prompts;              /* prompts answered in the window */
  double window_s;
  /* RSS sampled during the window (KiB): at the end of warm-up, which
   * was warm_s into it (NAN and 0s if the window ended first), the
   * largest from then on, and at the window's end. */
  double warm_s;
  guint64 rss_warm_kb, rss_max_kb, rss_end_kb;
  /* Both: */
  guint64 decode_tokens;
  guint64 forwards, rows;     /* llm_engine_batch_stats over the run */
  double rows_per_s;          /* all rows evaluated (prompts too) per second */
  gsize kv_bytes;             /* llm_engine_kv_bytes at the end of the run */
} BenchStreamsResult;

/* Runs @s->n_streams streams on one new engine of @model in @mode (see
 * bench-streams.c) and fills @result. FALSE with @error when the engine,
 * a sequence or an evaluation fails. */
gboolean bench_streams_run (LlmModel *model, const BenchStreamsSetting *s,
    BenchStreamsMode mode, BenchStreamsResult *result, GError **error);
/* Frees what bench_streams_run allocated in @result (success or not). */
void bench_streams_result_clear (BenchStreamsResult *result);

/* --- bench-batch.c --- */

typedef struct {
  const guint *sizes;         /* rows per forward to measure, each >= 1 */
  guint n_sizes;
  guint depth;                /* tokens in the cache before each forward */
  guint rounds;               /* rounds of every size in turn */
  int n_threads;
  LlmKvType kv_type;
  guint32 seed;
  gboolean warmup;
} BenchBatchSetting;

typedef struct {
  guint n_rows;
  double forward_ms;          /* median time of one forward of n_rows rows */
  double step_ms;             /* the same for one row: a decode step */
  double rows_per_s;
  double cost_vs_step;        /* forward_ms / step_ms */
} BenchBatchResult;

/* Measures a forward of each of @s->sizes rows (every row wanting its
 * logits) against a decode step on a new engine of @model; @result has
 * room for @s->n_sizes. FALSE with @error when the engine or an
 * evaluation fails. */
gboolean bench_batch_run (LlmModel *model, const BenchBatchSetting *s,
    BenchBatchResult *result, GError **error);

/* --- bench-spec.c --- */

/* BenchSpecSetting.variants: plain decoding, or the dynamic budget, or
 * (>= 0) a fixed draft length. */
#define BENCH_SPEC_PLAIN (-2)
#define BENCH_SPEC_DYNAMIC (-1)

typedef struct {
  const gint *variants;
  guint n_variants;
  guint n_gen;                /* tokens of the response, the first included */
  guint rounds;
  guint draft_max;            /* the dynamic budget's */
  guint ngram_min, ngram_max, ngram_window;
  const char *method;         /* ngram, model or layerskip */
  LlmModel *draft_model;      /* method model */
  float draft_p_min;
  int n_threads;
  LlmKvType kv_type;
} BenchSpecSetting;

typedef struct {
  gint fixed_k;               /* the variant */
  double ms;                  /* median decode time after the first token */
  double tokens_per_s;
  guint64 steps, verifications, drafted, accepted;  /* of the last round */
} BenchSpecResult;

/* Decodes @s->n_gen greedy tokens after @prompt with each variant on a
 * new engine of @model; @results has room for @s->n_variants. FALSE with
 * @error when evaluation fails or a variant's tokens differ from plain
 * decoding's. */
gboolean bench_spec_run (LlmModel *model, const BenchSpecSetting *s, const gint32 *prompt,
    guint n_prompt, BenchSpecResult *results, GError **error);

G_END_DECLS
