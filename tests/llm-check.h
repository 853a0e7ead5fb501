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
/* Whether this process maps the file @path (by inode, so any spelling). */
gboolean llm_test_file_is_mapped (const char *path);
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
/* That model loaded unshared from a temporary file that is gone on
 * return. */
LlmModel *llm_test_random_llama (const LlmTestShape *shape, guint32 type);

/* A sequence on a private engine of @n_threads running the fastest
 * kernels, or with @reference the scalar ones, or fails the test. */
LlmSeq *llm_test_standalone_seq (LlmModel *m, const LlmKvConfig *kv, int n_threads,
    gboolean reference);

/* A new sequence of @e or fails the test. */
LlmSeq *llm_test_new_seq (LlmEngine *e, const LlmKvConfig *kv);
/* An engine of @m with default options but @n_threads workers; fails the
 * test if it cannot be made. */
LlmEngine *llm_test_new_engine (LlmModel *m, int n_threads);

/* A splitmix64 stream for random test data, one per test process: the
 * same seed gives the same data in every suite. */
void llm_test_rng_seed (guint64 seed);
guint64 llm_test_rng_next (void);
/* Uniform in [-1, 1). */
float llm_test_rng_float (void);

/* The greedy pick: the first index of the largest of @n logits. */
guint llm_test_argmax (const float *x, guint n);

/* --- prepared layouts of 16-row tiles ---
 *
 * Their suites (q4_0x16.h, q5_0x16.h, q8_0x16.h, f16x16.h) check the
 * same things of each: packing in pieces, rows back, and every kernel
 * against what it must give for every shape, token count and way of
 * sharing rows among threads. Those tests are written once, over an
 * LlmTestLayout (llm_test_layout_suite); random inputs come from fixed
 * seeds. */

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

/* A list of sizes; LLM_TEST_SIZES (32, 64) initialises one. */
typedef struct {
  const size_t *v;
  size_t n;
} LlmTestSizes;
#define LLM_TEST_SIZES(...) \
  { (const size_t[]) { __VA_ARGS__ }, sizeof ((size_t[]) { __VA_ARGS__ }) / sizeof (size_t) }

/* The shapes (LlmTestLayout's widths, token_counts, shared_token_counts)
 * the Q8_0 and Q5_0 layouts are checked at: widths of one block, 32 and
 * 88 blocks; every token count up to 20 (each token tile and remainder of
 * every kernel), then 33, 64 and 130 (several tiles of each). */
#define LLM_TEST_X16_SHAPES \
  .widths = LLM_TEST_SIZES (32, 1024, 2816), \
  .token_counts = LLM_TEST_SIZES (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, \
      18, 19, 20, 33, 64, 130), \
  .shared_token_counts = LLM_TEST_SIZES (1, 3, 9, 20, 33)

typedef struct LlmTestProblem LlmTestProblem;

/* A layout as its suite tests it. Its kernel lookups take no weight type
 * (q4_0x16.h's) or one (f16x16.h's): one of each pair is set. */
typedef struct {
  const guint32 *types;       /* the weight types it packs */
  size_t n_types;
  size_t (*bytes) (size_t rows, size_t n);
  void (*pack) (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
      size_t tile1, void *out);
  void (*unpack_row) (const void *packed, size_t n, size_t r, void *out);
  LlmTestPackedFn ref;
  LlmTestPackedFn (*ref_of) (uint32_t wtype);
  LlmTestPackedFn (*avx2) (void);
  LlmTestPackedFn (*avx2_of) (uint32_t wtype);
  LlmTestPackedFn (*avx512) (void);
  LlmTestPackedFn (*avx512_of) (uint32_t wtype);
  /* TRUE: the AVX2 kernels without and with AVX-VNNI are checked apart;
   * FALSE: the one the environment (LLM_NO_AVX_VNNI) picks. */
  gboolean avx2_apart;

  /* @rows x @n random weights of @type, *@row_bytes apart (g_free). */
  void *(*random_weights) (GRand *rand, guint32 type, size_t rows, size_t n, size_t *row_bytes);
  /* Every extreme_every-th token's activations (0: none) at +-its scale,
   * so the largest integer sums are exercised. */
  guint extreme_every;
  /* What every kernel must write for @p: @want[t * rows + r] bit for bit
   * and, with @bound set, within bound[i] of ref[i] (the same indices). */
  void (*want) (const LlmTestProblem *p, float *want);
  void (*bound) (const LlmTestProblem *p, float *ref, double *bound);

  /* The kernels are checked for 1, 15, 17 and 100 rows of each of @widths
   * (so are the size and unpacking; the widest is also packed in pieces
   * and shared by threads) and each of @token_counts, and shared by
   * threads for each of @shared_token_counts (both ascending). */
  LlmTestSizes widths, token_counts, shared_token_counts;
  /* Whether the suite checks the rows llm_prepare_tiles makes. */
  gboolean prepared_rows;
} LlmTestLayout;

/* A random product over a layout: @rows x @n weights of @type at @w,
 * @row_bytes apart, and packed at @packed; @n_tok tokens' activations
 * converted for @type (llm_matmul_convert) at @xq, @xs bytes apart. */
struct LlmTestProblem {
  const LlmTestLayout *layout;
  guint32 type;
  size_t rows, n, n_tok, row_bytes, xs;
  void *w;
  uint8_t *packed, *xq;
};

void llm_test_problem_init (LlmTestProblem *p, const LlmTestLayout *layout, GRand *rand,
    guint32 type, size_t rows, size_t n, size_t n_tok);
void llm_test_problem_clear (LlmTestProblem *p);
/* @layout's packing of all of @w's @rows rows (g_free). */
uint8_t *llm_test_pack (const LlmTestLayout *layout, const void *w, size_t row_bytes,
    size_t rows, size_t n);

/* Random weights of a block type: per block d, an fp16 of both signs and
 * magnitudes 1e-4 to 1, then every code byte value. */
void *llm_test_random_blocks (GRand *rand, guint32 type, size_t rows, size_t n,
    size_t *row_bytes);
/* Asserts a packed block's 16 scales at @d are @first, @first + 1, ...:
 * the file's fp16 as they are, in row order. */
void llm_test_assert_x16_scales (const uint8_t *d, guint16 first);

/* The scalar reference's products (llm_matmul of the scalar table; its
 * llm_matvec for one token, asserted equal to the first token's). */
void llm_test_scalar_products (const LlmTestProblem *p, float *want);

/* The suite @name of @layout (one a process): its own tests
 * (NULL-terminated lists) and those every layout's suite shares, in the
 * test cases "layout" (size, @layout_tests, then pack in pieces, unpack
 * rows, prepared rows) and "kernels" (@kernel_tests, then every kernel,
 * one loop iteration each, and rows shared by threads). */
Suite *llm_test_layout_suite (const char *name, const LlmTestLayout *layout,
    const TTest *const *layout_tests, const TTest *const *kernel_tests);

/* Runs @suite and returns the process exit status (0, 1, or 77 if every
 * test skipped). */
int llm_test_run_suite (Suite *suite);

/* Marks the current test skipped (prints why); the test returns at once. */
#define LLM_TEST_SKIP(...) \
  do { g_print ("SKIP: " __VA_ARGS__); g_print ("\n"); llm_test_note_skip (); return; } while (0)
void llm_test_note_skip (void);

#define LLM_TEST_MAIN(suite_fn) \
  int main (void) { return llm_test_run_suite (suite_fn ()); }
