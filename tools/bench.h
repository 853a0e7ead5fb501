/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pieces of gst-llm-bench, one job per file: gst-llm-bench.c measures the
 * engine and prints results, bench-make-model.c writes random-weight
 * models, bench-bandwidth.c measures the memory read bandwidth that bounds
 * decoding, bench-pipeline.c measures through the GStreamer elements. */
#pragma once

#include <glib.h>

#include "kvcache.h"
#include "model.h"

G_BEGIN_DECLS

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

G_END_DECLS
