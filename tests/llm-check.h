/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by the Check suites: data paths and a main() that prints a plain
 * "check: N passed, M failed" line next to Check's own summary. */
#pragma once

#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <glib.h>

#include "engine.h"
#include "cpu/threadpool.h"

/* Bundled test data (tests/data). */
char *llm_test_data_path (const char *relative);
/* ../shared/testdata, or NULL when this checkout has none beside it. */
char *llm_test_shared_path (const char *relative);
/* Reads a whole file or fails the test. */
GBytes *llm_test_read_file (const char *path);
/* Loads tests/data/models/@name (unshared) or fails the test. */
LlmModel *llm_test_load_model (const char *name);

/* tests/data/models/@name with every matrix whose rows are whole blocks
 * of @type requantised to @type (from the file's values, by the reference
 * quantisers, as llama-quantize does without an importance matrix), the
 * rest as they are: a real model in a weight type no bundled file has.
 * Loaded unshared from a temporary file that is gone on return. */
LlmModel *llm_test_requantized_model (const char *name, guint32 type);

/* A random-weight llama: stories260K's tokenizer (512 ids), every matrix
 * in @type (norms F32), entries of +-1/sqrt(fan-in) so activations stay
 * at unit scale. Written to @path or fails the test; returns the bytes of
 * weights a forward reads (all but the embedding table). */
typedef struct {
  guint n_embd, n_ff, n_layer, n_head, n_head_kv;
} LlmTestShape;
gsize llm_test_write_random_llama (const char *path, const LlmTestShape *shape, guint32 type);

/* A sequence on a private engine of @n_threads running the fastest
 * kernels, or with @reference the scalar ones, or fails the test. */
LlmSeq *llm_test_standalone_seq (LlmModel *m, const LlmKvConfig *kv, int n_threads,
    gboolean reference);

/* A new sequence of @e or fails the test. */
LlmSeq *llm_test_new_seq (LlmEngine *e, const LlmKvConfig *kv);

/* A splitmix64 stream for random test data, one per test process: the
 * same seed gives the same data in every suite. */
void llm_test_rng_seed (guint64 seed);
guint64 llm_test_rng_next (void);
/* Uniform in [-1, 1). */
float llm_test_rng_float (void);

/* The greedy pick: the first index of the largest of @n logits. */
guint llm_test_argmax (const float *x, guint n);

/* A packed-layout product (q4_0x16.h's contract, which every prepared
 * layout's kernels share). */
typedef bool (*LlmTestPackedFn) (size_t n, const void *packed, size_t rows, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step);

/* @fn over rows [@r0, @r1) on every thread of @pool at once, each
 * claiming @step rows at a time from one counter; FALSE if a call ran out
 * of scratch. */
gboolean llm_test_packed_shared (LlmThreadPool *pool, LlmTestPackedFn fn, size_t n,
    const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, size_t step);

/* Runs @suite and returns the process exit status (0, 1, or 77 if every
 * test skipped). */
int llm_test_run_suite (Suite *suite);

/* Marks the current test skipped (prints why); the test returns at once. */
#define LLM_TEST_SKIP(...) \
  do { g_print ("SKIP: " __VA_ARGS__); g_print ("\n"); llm_test_note_skip (); return; } while (0)
void llm_test_note_skip (void);

#define LLM_TEST_MAIN(suite_fn) \
  int main (void) { return llm_test_run_suite (suite_fn ()); }
