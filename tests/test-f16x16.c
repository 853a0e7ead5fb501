/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* F16 and BF16 weights packed 16 rows to a tile (kernels/cpu/f16x16.h):
 * the layout's size, packing in pieces, unpacking rows back, and every
 * kernel over it (scalar, AVX2, AVX-512): equal bit for bit to the packed
 * scalar reference (one FMA per column in column order, which this suite
 * also computes on its own from the file's rows) for every token count,
 * row range and way of sharing rows among threads, and within f16x16.h's
 * error bound of the scalar reference dot product (llm_matmul, summing in
 * double). Random inputs come from fixed seeds. What every layout's suite
 * checks is llm-check.c's llm_test_layout_suite, over F16X16 below; this
 * file adds what only this layout has. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/f16x16.h"
#include "cpu/fp16.h"
#include "cpu/matmul.h"

static const guint32 TYPES[] = { LLM_TYPE_F16, LLM_TYPE_BF16 };

/* --- fixtures --- */

static uint16_t
to_16 (guint32 type, float f)
{
  return type == LLM_TYPE_F16 ? llm_fp16_from_f32 (f) : llm_bf16_from_f32 (f);
}

static float
from_16 (guint32 type, uint16_t h)
{
  return type == LLM_TYPE_F16 ? llm_fp16_to_f32 (h) : llm_bf16_to_f32 (h);
}

/* A matrix of @type values, rows @pad values longer than @n (so row_bytes
 * is not 2 n), of magnitudes 1e-4 to 1 and both signs, with some zeros
 * and (F16) subnormals. */
static void *
random_weights (GRand *rand, guint32 type, size_t rows, size_t n, size_t *row_bytes)
{
  const size_t pad = 3;
  *row_bytes = (n + pad) * sizeof (uint16_t);
  uint16_t *w = g_new (uint16_t, rows * (n + pad));
  for (size_t i = 0; i < rows * (n + pad); i++) {
    const double mag = pow (10.0, g_rand_double_range (rand, -4.0, 0.0));
    const int kind = g_rand_int_range (rand, 0, 64);
    float f = (float) (g_rand_boolean (rand) ? mag : -mag);
    if (kind == 0)
      f = 0.0f;
    else if (kind == 1)
      f = (float) g_rand_double_range (rand, -6e-5, 6e-5);  /* F16 subnormals */
    w[i] = to_16 (type, f);
  }
  return w;
}

/* The values of @rows rows of @n 16-bit values, @row_bytes apart, as
 * floats, @n apart. */
static float *
widened (guint32 type, const void *v, size_t row_bytes, size_t rows, size_t n)
{
  float *f = g_new (float, rows * n);
  for (size_t r = 0; r < rows; r++) {
    const uint16_t *h = (const uint16_t *) ((const uint8_t *) v + r * row_bytes);
    for (size_t k = 0; k < n; k++)
      f[r * n + k] = from_16 (type, h[k]);
  }
  return f;
}

/* f16x16.h's order, from the file's rows and the tokens' activations,
 * widened: one fmaf per column. */
static void
fma_products (const LlmTestProblem *p, float *y)
{
  float *wf = widened (p->type, p->w, p->row_bytes, p->rows, p->n);
  float *xf = widened (p->type, p->xq, p->xs, p->n_tok, p->n);
  for (size_t t = 0; t < p->n_tok; t++)
    for (size_t r = 0; r < p->rows; r++) {
      float acc = 0.0f;
      for (size_t k = 0; k < p->n; k++)
        acc = fmaf (wf[r * p->n + k], xf[t * p->n + k], acc);
      y[t * p->rows + r] = acc;
    }
  g_free (wf);
  g_free (xf);
}

/* The scalar reference dot products (double sums) and, per output, the
 * bound f16x16.h states for the packed kernels' distance from them:
 * (gamma_(n-1) + u + gamma'_(n-1)) * sum |p_k|. */
static void
dot_products (const LlmTestProblem *p, float *ref, double *bound)
{
  const LlmCpuKernels *scalar = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  llm_matmul (scalar, p->type, p->w, p->row_bytes, p->n, 0, p->rows, p->xq, p->xs, p->n_tok,
      ref, p->rows);
  float *wf = widened (p->type, p->w, p->row_bytes, p->rows, p->n);
  float *xf = widened (p->type, p->xq, p->xs, p->n_tok, p->n);
  const double u = ldexp (1.0, -24), ud = ldexp (1.0, -53), m = (double) (p->n - 1);
  const double c = m * u / (1.0 - m * u) + u + m * ud / (1.0 - m * ud);
  for (size_t t = 0; t < p->n_tok; t++)
    for (size_t r = 0; r < p->rows; r++) {
      double abs_sum = 0;
      for (size_t k = 0; k < p->n; k++)
        abs_sum += fabs ((double) wf[r * p->n + k] * (double) xf[t * p->n + k]);
      bound[t * p->rows + r] = c * abs_sum;
    }
  g_free (wf);
  g_free (xf);
}

/* The layout, for both types; every kernel must give the packed
 * reference's bits (computed here from the file's rows, in the order
 * f16x16.h defines) and stay within the stated bound of the double-sum
 * reference; widths 37 (not a multiple of a column step), 64, 1024 and
 * 2816, 1..20, 33, 64 and 130 tokens. */
static const LlmTestLayout F16X16 = {
  .types = TYPES, .n_types = G_N_ELEMENTS (TYPES), .bytes = llm_f16x16_bytes,
  .pack = llm_f16x16_pack, .unpack_row = llm_f16x16_unpack_row, .ref_of = llm_f16x16_ref_fn,
  .avx2_of = llm_avx2_f16x16_fn, .avx512_of = llm_avx512_f16x16_fn,
  .random_weights = random_weights, .want = fma_products, .bound = dot_products,
  .widths = LLM_TEST_SIZES (37, 64, 1024, 2816),
  .token_counts = LLM_TEST_SIZES (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
      19, 20, 33, 64, 130),
  .shared_token_counts = LLM_TEST_SIZES (1, 3, 9, 20), .prepared_rows = TRUE,
};

/* --- layout --- */

START_TEST (test_packed_column_holds_the_16_rows_values_side_by_side)
{
  /* Row r's value k is 256 r + k; two tiles, the second with 3 rows. */
  const size_t rows = 19, n = 5;
  uint16_t w[19 * 5];
  for (size_t r = 0; r < rows; r++)
    for (size_t k = 0; k < n; k++)
      w[r * n + k] = (uint16_t) (256 * r + k);
  uint8_t *p = llm_test_pack (&F16X16, w, n * 2, rows, n);
  const uint16_t *h = (const uint16_t *) p;
  for (size_t k = 0; k < n; k++)
    for (size_t r = 0; r < 16; r++) {
      ck_assert_uint_eq (h[k * 16 + r], 256 * r + k);
      ck_assert_uint_eq (h[16 * n + k * 16 + r], r < 3 ? 256 * (16 + r) + k : 0);
    }
  g_free (p);
}
END_TEST

/* The bound is a worst case; on random data the kernels are far closer to
 * the double sum: at most a few units of u * sum |p_k| in the last place,
 * growing like sqrt (n). Prints what it sees, asserts a loose 1/4 of the
 * bound at n = 2816 so a summation that lost its order (say, float sums
 * of sums far apart in magnitude) would show. */
START_TEST (test_typical_error_is_well_inside_the_bound)
{
  GRand *rand = g_rand_new_with_seed (21);
  const size_t rows = 64, n = 2816, n_tok = 8;
  LlmTestProblem p;
  llm_test_problem_init (&p, &F16X16, rand, LLM_TYPE_F16, rows, n, n_tok);
  float *got = g_new (float, n_tok * rows), *ref = g_new (float, n_tok * rows);
  double *bound = g_new (double, n_tok * rows);
  fma_products (&p, got);
  dot_products (&p, ref, bound);
  double worst = 0;
  for (size_t i = 0; i < n_tok * rows; i++)
    worst = MAX (worst, fabs ((double) got[i] - (double) ref[i]) / bound[i]);
  g_print ("f16x16: n = %zu, worst |y - ref| over the bound: %.3g\n", n, worst);
  ck_assert (worst < 0.25);
  g_free (bound);
  g_free (ref);
  g_free (got);
  llm_test_problem_clear (&p);
  g_rand_free (rand);
}
END_TEST

static Suite *
f16x16_suite (void)
{
  const TTest *const layout_tests[] = {
    test_packed_column_holds_the_16_rows_values_side_by_side,
    NULL,
  };
  const TTest *const kernel_tests[] = { test_typical_error_is_well_inside_the_bound, NULL };
  return llm_test_layout_suite ("f16x16", &F16X16, layout_tests, kernel_tests);
}

LLM_TEST_MAIN (f16x16_suite)
