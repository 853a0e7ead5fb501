/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pieces of gst-llm-bench, one job per file: gst-llm-bench.c measures the
 * engine and prints results, bench-make-model.c writes random-weight
 * models, bench-bandwidth.c measures the memory read bandwidth that bounds
 * decoding, bench-pipeline.c measures through the GStreamer elements,
 * bench-streams.c measures many streams decoding on one engine,
 * bench-batch.c what a forward of k rows costs next to a decode step,
 * bench-vision.c the vision encoder's images per second;
 * bench-packed.c is what the packed-kernel benchmarks (bench-q4_0x16,
 * bench-f16x16, and in part bench-kquants-x8) share. */
#pragma once

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "engine.h"
#include "gguf-writer.h"
#include "cpu/matmul.h"
#include "cpu/threadpool.h"
#include "kvcache.h"
#include "model.h"
#include "sampler.h"
#include "session.h"
#include "spec-budget.h"

G_BEGIN_DECLS

/* --- gst-llm-bench.c: helpers the other files share --- */

/* An engine of its own for @model with @n_threads workers and every other
 * option at its default (each measurement starts from a fresh one). */
LlmEngine *bench_engine_new (LlmModel *model, int n_threads, GError **error);
/* CLOCK_MONOTONIC in milliseconds. */
double bench_now_ms (void);
/* Sorts @v (@n >= 1 values) and returns their median. */
double bench_median_sort (double *v, guint n);
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

/* Writes a random-weight GGUF of @shape (with @n_layer layers; 0: the
 * shape's) with weights of @type_name to @path, generating and converting
 * rows in parallel on @n_threads (<= 0: one per core) and streaming
 * through a temporary file beside @path, so memory stays well under the
 * model's size. @seed fixes every weight. Progress goes to stderr when
 * @verbose. */
gboolean bench_make_model (const char *shape, guint n_layer, const char *type_name,
    const char *path, guint64 seed, int n_threads, gboolean verbose, GError **error);
/* The same shape and type mix, but holding the real llama model at
 * @source (bench-widen.c) instead of random weights: its tokenizer, and
 * weights that compute what @source computes. @n_layer at least the
 * source's; equal to it, no layer is an identity (for layer skipping). */
gboolean bench_make_widened_model (const char *shape, guint n_layer, const char *type_name,
    const char *source, const char *path, int n_threads, gboolean verbose, GError **error);

/* --- bench-widen.c --- */

/* The dimensions of the shape a model is widened to. */
typedef struct {
  guint32 n_embd, n_layer, n_ff, n_head, n_head_kv;
} BenchWidenShape;

typedef struct _BenchWiden BenchWiden;

/* The llama model at @path, checked to fit @to (no wider, no more heads,
 * kv heads, query heads per kv head, feed-forward units or layers, and
 * no biases), or NULL with @error saying what does not fit. */
BenchWiden *bench_widen_open (const char *path, const BenchWidenShape *to, GError **error);
void bench_widen_free (BenchWiden *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BenchWiden, bench_widen_free)
/* What the widened file must say: the source's vocabulary size and
 * context length, RoPE's base and the norms' epsilon as widened. */
void bench_widen_hparams (const BenchWiden *w, guint32 *n_vocab, guint32 *n_ctx,
    float *rope_base, float *rms_eps);
/* The source's tokenizer.* keys into @out; FALSE if one cannot be copied. */
gboolean bench_widen_copy_vocab (const BenchWiden *w, LlmGgufWriter *out);
/* The source's general.name (or file name), newly allocated. */
char *bench_widen_source_name (const BenchWiden *w);
/* Row @row (@n values) of the widened shape's tensor @name, as floats.
 * Safe to call from several threads at once. */
void bench_widen_row (const BenchWiden *w, const char *name, guint64 row, float *x, gsize n);

/* --- bench-bandwidth.c --- */

/* Read bandwidth in bytes/s: the best of at least @runs passes (and of
 * as many as fit in half a second) of a streaming read over @buffer_bytes
 * (several times the last-level cache) split over @n_threads threads. 0
 * with @error set when memory or threads fail. */
double bench_read_bandwidth (gsize buffer_bytes, int n_threads, int runs, GError **error);

/* The same test kept ready to run again (its buffer and threads held):
 * for comparing each repetition of a measurement with the memory speed of
 * its own minutes, on a host where that speed drifts. */
typedef struct _BenchReader BenchReader;
BenchReader *bench_reader_new (gsize buffer_bytes, int n_threads, GError **error);
/* The best of at least @runs passes and of those that fit in
 * @min_seconds, in bytes/s. */
double bench_reader_best (BenchReader *r, int runs, double min_seconds);
void bench_reader_free (BenchReader *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BenchReader, bench_reader_free)

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
  /* Lock-step: after every 8 N-row steps, 8 decode steps of a lone
   * sequence on the same engine, so both see the same moments of a
   * drifting machine. Leaving out each block's first step: the lone
   * steps' p50 and p95, N x their median over the N-row steps' median
   * (how many times one stream's t/s the N streams decode), and the
   * N-row steps' p95 over theirs. */
  double alone_ms_p50, alone_ms_p95, x_alone, p95_vs_alone;
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
  const char *method;         /* ngram, model, layerskip or layerskip-fixed */
  LlmModel *draft_model;      /* method model */
  float draft_p_min;
  gboolean draft_ahead;       /* method model: llm_drafter_set_ahead */
  /* Method model: where to write the draft table (bench_spec_draft_table)
   * of the workload, NULL: none. */
  const char *draft_table;
  int n_threads;
  LlmKvType kv_type;
} BenchSpecSetting;

typedef struct {
  gint fixed_k;               /* the variant */
  double ms;                  /* median decode time after the first token */
  double tokens_per_s;
  guint64 steps, verifications, drafted, accepted;  /* of the last round */
  guint64 ahead_used, ahead_discarded;
  guint64 lengths[LLM_SPEC_BUDGET_MAX + 1];  /* of the last round: steps by proposals checked */
} BenchSpecResult;

/* What prompt lookup could do at best on the response (spec-lookup-bound.c),
 * at the step costs measured in the same run. */
typedef struct {
  guint draft_max;
  double tokens_per_s;
  double x_plain;             /* against a plain step measured with the widths */
  guint64 steps, verifications, accepted;
  double width_us[LLM_SPEC_BUDGET_MAX + 1];  /* median step checking w proposals */
} BenchSpecBound;

/* Decodes @s->n_gen greedy tokens after @prompt with each variant on a
 * new engine of @model; @results has room for @s->n_variants. With
 * @bound (method ngram), also times a step checking 0 to @s->draft_max
 * proposals, the widths taking turns with the variants' rounds, and
 * fills in the lookup bound. FALSE with @error when evaluation fails or a
 * variant's tokens differ from plain decoding's. */
gboolean bench_spec_run (LlmModel *model, const BenchSpecSetting *s, const gint32 *prompt,
    guint n_prompt, BenchSpecResult *results, BenchSpecBound *bound, GError **error);

/* Writes to @path what the draft model @draft proposes at each point of
 * the greedy response @gen (@n_gen ids, the first sampled after
 * @prompt), for replaying a model drafter without its models
 * (tests/test-spec.c): a line of the prompt's ids, a line of the
 * response's, then for each response token p a line of the draft's
 * BENCH_SPEC_TABLE_K greedy tokens after prompt + gen[0..p], each as
 * id:probability (the probability the draft gave it). */
#define BENCH_SPEC_TABLE_K 8
gboolean bench_spec_draft_table (LlmEngine *draft, LlmKvType kv_type, const gint32 *prompt,
    guint n_prompt, const gint32 *gen, guint n_gen, const char *path, GError **error);

/* Replays the greedy response @gen (its first token the one sampled
 * after @prompt) as llm_spec_step does, each step checking as many
 * proposals as the best earlier occurrence of the last @n_min tokens
 * would have had accepted (at most @max): @lengths[a] (room for @max + 1)
 * counts the steps that accepted a. Returns the steps. */
guint64 bench_spec_lookup_best (const gint32 *prompt, guint n_prompt, const gint32 *gen,
    guint n_gen, guint n_min, guint max, guint64 *lengths);

/* --- bench-vision.c --- */

typedef struct {
  const char *mmproj;
  const guint *threads;       /* thread counts to measure, in turn each round */
  guint n_threads;
  guint rounds;               /* timed images per thread count, >= 1 */
  gboolean json;              /* one JSON object per thread count, no table */
} BenchVisionSetting;

/* Measures the encoder of @s->mmproj at each thread count and prints a
 * table (or JSON). FALSE with @error when the file or an encoder fails. */
gboolean bench_vision_run (const BenchVisionSetting *s, GError **error);
/* Writes the image bench_vision_run encodes, normalised for @mmproj and
 * interleaved as llama.cpp's mtmd reads it (tools/mtmd-time.cpp). */
gboolean bench_vision_write_image (const char *mmproj, const char *path, GError **error);
/* --- bench-audio.c --- */

typedef struct {
  const char *mmproj;
  const char *pcm;            /* 16 kHz mono F32 samples, or NULL: a test signal */
  const guint *threads;       /* thread counts to measure, in turn each round */
  guint n_threads;
  guint rounds;               /* timed windows per thread count, >= 1 */
  gboolean json;              /* one JSON object per thread count, no table */
} BenchAudioSetting;

/* Measures the audio encoder of @s->mmproj on the first 30 s window of
 * the samples at each thread count and prints a table (or JSON): ms per
 * window and seconds of window encoded per second. FALSE with @error when
 * the file, the samples or an encoder fails. */
gboolean bench_audio_run (const BenchAudioSetting *s, GError **error);


/* --- bench-packed.c: the packed-kernel benchmarks' common part --- */

/* CLOCK_MONOTONIC in seconds. */
double bench_seconds (void);
/* @bytes 2 MiB aligned and huge-page backed where the kernel allows, like
 * the bandwidth test's buffer, so neither path pays TLB misses the other
 * does not; free() it. Exits when out of memory. */
void *bench_alloc_big (size_t bytes);
/* The median of @n values; sorts @v. */
double bench_median (double *v, size_t n);
/* Core cycles per second: the best of 5 chains of dependent adds, which
 * run one a cycle (the TSC need not tick at the core's clock). */
double bench_core_hz (void);

/* The options bench-q4_0x16 and bench-f16x16 both take (--layers, --samples, --threads,
 * --bandwidth-mib, --sample-ms, --tokens, --in-cache, --shape), parsed with
 * the program's own @extra entries; bad values exit with a message. */
typedef struct {
  int layers, samples, max_threads, bandwidth_mib, sample_ms;
  gboolean in_cache;
  size_t token_counts[32], n_counts;
  size_t widths[2];           /* --shape: model and hidden width; 0: the program's */
} BenchPackedOptions;

void bench_packed_options (BenchPackedOptions *o, const GOptionEntry *extra,
    const char *summary, const char *layers_help, const char *in_cache_help, int *argc,
    char ***argv);

/* The most tokens --tokens takes: activations are made for this many. */
#define BENCH_PACKED_MAX_TOK 128

/* A product over a packed layout (q4_0x16.h's contract). */
typedef bool (*BenchPackedFn) (size_t n, const void *packed, size_t rows, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step);

/* lib/backend-cpu.c's STREAM_ROWS: up to this many tokens the engine
 * gives each thread a contiguous run of a prepared product's tiles
 * (BenchProduct.split_tokens). Claiming rows in turns from one counter
 * instead, as a batch of more tokens does, broke each thread's stream at
 * every claim: a multi-token tile could no longer overlap its computing
 * with the next rows' fetch, and the micro-benchmarks reported products
 * of a few tokens far dearer than the engine runs them (Q8_0, 5 tokens
 * over 1024 x 1024 matrices on Zen 5: 1.84-1.88x one token's time in
 * turns, 1.11-1.16x split as the engine splits). */
#define BENCH_STREAM_ROWS 16

/* One product y = W x, shared by a pool's threads as lib/backend-cpu.c
 * shares it. W in the file's layout (@fn NULL): for one token rows split
 * evenly (llm_matvec), for more claimed (llm_matmul_shared); packed for
 * @fn: up to @split_tokens tokens each thread a contiguous run of whole
 * tiles, more claimed. Claims take @step rows (bench_claim_step) from
 * @next, which starts at 0. */
typedef struct {
  const LlmCpuKernels *kern;
  guint32 type;
  BenchPackedFn fn;
  const void *w;
  size_t row_bytes, rows, n;
  const uint8_t *xq;
  size_t xs, n_tok, split_tokens, step;
  float *y;
  atomic_size_t next;
} BenchProduct;

/* llm_threadpool_run's task over the BenchProduct @data. */
void bench_product_task (void *data, int ith, int nth);
/* Rows a claim takes with @nth threads: about eight claims a thread,
 * whole 16-row tiles. */
size_t bench_claim_step (size_t rows, int nth);

typedef struct {
  size_t rows, n, row_bytes;
  void *w;           /* as a GGUF holds it */
  uint8_t *packed;   /* the same, packed once */
} BenchMatrix;

/* Products of @type over a feed-forward layer's two matrices, @widths[1] x
 * @widths[0] and @widths[0] x @widths[1], several layers so the set is far
 * larger than the last-level cache: the file layout's kernels of @kern
 * against the packed kernel @fn, shared by threads as BenchProduct says. */
typedef struct {
  const LlmCpuKernels *kern;
  guint32 type;
  BenchPackedFn fn;
  /* What @fn is timed against over the same packed bytes (another way of
   * fetching them); NULL: the file layout's kernels of @kern. */
  BenchPackedFn against;
  size_t split_tokens;
  size_t widths[2];
  BenchMatrix *mats;
  size_t n_mats;
  size_t weight_bytes;        /* of all the matrices, as the file holds them */
  /* Per width: BENCH_PACKED_MAX_TOK tokens' converted activations. */
  uint8_t *xq[2];
  size_t xs[2];
  float *y;
  LlmThreadPool *pool;
} BenchPacked;

/* Sets @b->fn to the fastest of @ref, @avx2 and @avx512 (NULL: missing)
 * this CPU runs and returns its instruction set's name. */
const char *bench_packed_pick (BenchPacked *b, BenchPackedFn ref, BenchPackedFn avx2,
    BenchPackedFn avx512);
/* Makes @b's matrices: @layers layers of two, or with @in_cache_rows one
 * @in_cache_rows x widths[0] matrix; @fill (@data) gives each its
 * row_bytes, weights and packed copy. Then the activations, from @rand. */
void bench_packed_setup (BenchPacked *b, int layers, size_t in_cache_rows, GRand *rand,
    void (*fill) (BenchPacked *b, BenchMatrix *m, void *data), void *data);
/* Frees what bench_packed_setup made. */
void bench_packed_clear (BenchPacked *b);

/* One product of every matrix; returns seconds. */
double bench_packed_pass (BenchPacked *b, bool packed, size_t n_tok);
/* Seconds per product, over passes filling at least @min_s. */
double bench_packed_sample (BenchPacked *b, bool packed, size_t n_tok, double min_s);
/* The file layout's products of the last matrix into @file_y, then the
 * packed kernel's into b->y. */
void bench_packed_last_products (BenchPacked *b, size_t n_tok, float *file_y);
/* "P/F": the weight bytes a product reads per second, packed and in the
 * file layout, GB/s, for products of @packed_s and @file_s seconds. */
void bench_packed_gbs (const BenchPacked *b, double packed_s, double file_s, char *out,
    size_t size);

/* Prints one table row: the medians at @n_tok tokens, and @packed_s over
 * the first row's. */
typedef void (*BenchPackedRowFn) (BenchPacked *b, size_t n_tok, double file_s,
    double packed_s, double x_first, void *data);
/* A table for each thread count up to o->max_threads, under a line with
 * the machine's read bandwidth (of a @bandwidth_mib MiB buffer; 0: not
 * measured): @header, then a row per token count, its times the medians
 * of o->samples samples of each path, the two interleaved (after a pass
 * of each) so drift on a shared machine hits both. */
void bench_packed_tables (BenchPacked *b, const BenchPackedOptions *o, int bandwidth_mib,
    const char *header, BenchPackedRowFn row, void *data);

G_END_DECLS
