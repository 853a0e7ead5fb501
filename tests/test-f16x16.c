/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* F16 and BF16 weights packed 16 rows to a tile (kernels/cpu/f16x16.h):
 * the layout's size, packing in pieces, unpacking rows back, and every
 * kernel over it (scalar, AVX2, AVX-512): equal bit for bit to the packed
 * scalar reference (one FMA per column in column order, which this suite
 * also computes on its own from the file's rows) for every token count,
 * row range and way of sharing rows among threads, and within f16x16.h's
 * error bound of the scalar reference dot product (llm_matmul, summing in
 * double). Random inputs come from fixed seeds. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/f16x16.h"
#include "cpu/fp16.h"
#include "cpu/matmul.h"
#include "cpu/threadpool.h"

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
static uint16_t *
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

/* @n_tok rows of activations converted for @type weights, @xs bytes apart. */
static uint8_t *
random_acts (GRand *rand, guint32 type, size_t n, size_t n_tok, size_t *xs)
{
  *xs = llm_matmul_act_bytes (type, n);
  uint8_t *xq = g_malloc (n_tok * *xs);
  float *x = g_new (float, n);
  for (size_t t = 0; t < n_tok; t++) {
    const double scale = pow (10.0, g_rand_double_range (rand, -2.0, 2.0));
    for (size_t i = 0; i < n; i++)
      x[i] = (float) (g_rand_double_range (rand, -1.0, 1.0) * scale);
    llm_matmul_convert (llm_cpu_kernels_best (), type, x, n, xq + t * *xs);
  }
  g_free (x);
  return xq;
}

static uint8_t *
packed_of (const uint16_t *w, size_t row_bytes, size_t rows, size_t n)
{
  uint8_t *p = g_malloc (llm_f16x16_bytes (rows, n));
  llm_f16x16_pack (w, row_bytes, rows, n, 0, (rows + 15) / 16, p);
  return p;
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

/* f16x16.h's order, from the file's rows (@wf, widened) and the tokens'
 * activations (@xf, widened): one fmaf per column. */
static void
fma_products (const float *wf, size_t rows, size_t n, const float *xf, size_t n_tok, float *y)
{
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < rows; r++) {
      float acc = 0.0f;
      for (size_t k = 0; k < n; k++)
        acc = fmaf (wf[r * n + k], xf[t * n + k], acc);
      y[t * rows + r] = acc;
    }
}

/* The scalar reference dot products (double sums) and, per output, the
 * bound f16x16.h states for the packed kernels' distance from them:
 * (gamma_(n-1) + u + gamma'_(n-1)) * sum |p_k|. */
static void
dot_products (guint32 type, const uint16_t *w, size_t row_bytes, size_t rows, size_t n,
    const uint8_t *xq, size_t xs, size_t n_tok, const float *wf, const float *xf, float *ref,
    double *bound)
{
  const LlmCpuKernels *scalar = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  llm_matmul (scalar, type, w, row_bytes, n, 0, rows, xq, xs, n_tok, ref, rows);
  const double u = ldexp (1.0, -24), ud = ldexp (1.0, -53), m = (double) (n - 1);
  const double c = m * u / (1.0 - m * u) + u + m * ud / (1.0 - m * ud);
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < rows; r++) {
      double abs_sum = 0;
      for (size_t k = 0; k < n; k++)
        abs_sum += fabs ((double) wf[r * n + k] * (double) xf[t * n + k]);
      bound[t * rows + r] = c * abs_sum;
    }
}

/* Outputs no kernel may write. */
static const float UNTOUCHED = -12345.0f;

static float *
output_rows (size_t n_tok, size_t ldy)
{
  float *y = g_new (float, n_tok * ldy);
  for (size_t i = 0; i < n_tok * ldy; i++)
    y[i] = UNTOUCHED;
  return y;
}

/* Asserts y[t * ldy + r] is want[t * wld + r] bit for bit for r in
 * [r0, r1), and UNTOUCHED for the other r < ldy. */
static void
assert_rows_equal (const char *what, const float *y, size_t ldy, const float *want, size_t wld,
    size_t r0, size_t r1, size_t n_tok)
{
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < ldy; r++) {
      const float got = y[t * ldy + r];
      const float exp = r >= r0 && r < r1 ? want[t * wld + r] : UNTOUCHED;
      /* ck_assert per value would record millions of passing checks. */
      if (memcmp (&got, &exp, sizeof got) != 0)
        ck_abort_msg ("%s: token %zu row %zu: got %.9g, want %.9g", what, t, r, (double) got,
            (double) exp);
    }
}

/* Asserts |y - ref| <= bound for rows [0, rows) of @n_tok tokens. */
static void
assert_within_bound (const char *what, const float *y, size_t ldy, const float *ref,
    const double *bound, size_t rows, size_t n_tok)
{
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < rows; r++) {
      const double d = fabs ((double) y[t * ldy + r] - (double) ref[t * rows + r]);
      if (!(d <= bound[t * rows + r]))
        ck_abort_msg ("%s: token %zu row %zu: %.9g is %.3g from the reference %.9g, bound %.3g",
            what, t, r, (double) y[t * ldy + r], d, (double) ref[t * rows + r],
            bound[t * rows + r]);
    }
}

/* --- layout --- */

START_TEST (test_packed_size_is_2_bytes_per_value_with_rows_padded_to_16)
{
  ck_assert_uint_eq (llm_f16x16_bytes (1, 64), 16 * 64 * 2);
  ck_assert_uint_eq (llm_f16x16_bytes (16, 7), 16 * 7 * 2);
  ck_assert_uint_eq (llm_f16x16_bytes (17, 64), 32 * 64 * 2);
  ck_assert_uint_eq (llm_f16x16_bytes (2816, 1024), 2816 * 1024 * 2);
}
END_TEST

START_TEST (test_packed_column_holds_the_16_rows_values_side_by_side)
{
  /* Row r's value k is 256 r + k; two tiles, the second with 3 rows. */
  const size_t rows = 19, n = 5;
  uint16_t w[19 * 5];
  for (size_t r = 0; r < rows; r++)
    for (size_t k = 0; k < n; k++)
      w[r * n + k] = (uint16_t) (256 * r + k);
  uint8_t *p = packed_of (w, n * 2, rows, n);
  const uint16_t *h = (const uint16_t *) p;
  for (size_t k = 0; k < n; k++)
    for (size_t r = 0; r < 16; r++) {
      ck_assert_uint_eq (h[k * 16 + r], 256 * r + k);
      ck_assert_uint_eq (h[16 * n + k * 16 + r], r < 3 ? 256 * (16 + r) + k : 0);
    }
  g_free (p);
}
END_TEST

START_TEST (test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros)
{
  GRand *rand = g_rand_new_with_seed (11);
  const size_t rows = 100, n = 1024 + 5, tiles = 7;
  size_t rb;
  uint16_t *w = random_weights (rand, LLM_TYPE_F16, rows, n, &rb);
  const size_t bytes = llm_f16x16_bytes (rows, n);
  uint8_t *whole = packed_of (w, rb, rows, n);
  uint8_t *parts = g_malloc (bytes);
  memset (parts, 0xa5, bytes);
  const size_t cuts[] = { 0, 1, 4, 6, 7 };
  for (size_t k = 0; k + 1 < G_N_ELEMENTS (cuts); k++)
    llm_f16x16_pack (w, rb, rows, n, cuts[k], cuts[k + 1], parts);
  ck_assert (memcmp (whole, parts, bytes) == 0);

  /* Rows 100..111 of the last tile are zeros. */
  const uint16_t *last = (const uint16_t *) (whole + (tiles - 1) * n * 32);
  for (size_t k = 0; k < n; k++)
    for (size_t r = rows % 16; r < 16; r++)
      ck_assert_uint_eq (last[k * 16 + r], 0);
  g_free (w);
  g_free (whole);
  g_free (parts);
  g_rand_free (rand);
}
END_TEST

START_TEST (test_unpack_row_gives_back_every_original_row)
{
  GRand *rand = g_rand_new_with_seed (12);
  const size_t row_counts[] = { 1, 15, 17, 100 }, widths[] = { 1, 64, 1024 + 5 };
  for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
    for (size_t b = 0; b < G_N_ELEMENTS (widths); b++) {
      const size_t rows = row_counts[a], n = widths[b];
      size_t rb;
      uint16_t *w = random_weights (rand, LLM_TYPE_BF16, rows, n, &rb);
      uint8_t *p = packed_of (w, rb, rows, n);
      uint16_t *row = g_new (uint16_t, n);
      for (size_t r = 0; r < rows; r++) {
        llm_f16x16_unpack_row (p, n, r, row);
        ck_assert_msg (memcmp (row, (const uint8_t *) w + r * rb, 2 * n) == 0,
            "%zu x %zu: row %zu", rows, n, r);
      }
      g_free (row);
      g_free (p);
      g_free (w);
    }
  g_rand_free (rand);
}
END_TEST

/* The engine's path: a prepared matrix's rows back as floats, for
 * embedding lookups of a packed table. */
START_TEST (test_prepared_rows_dequantize_to_the_files_values)
{
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  GRand *rand = g_rand_new_with_seed (13);
  for (size_t i = 0; i < G_N_ELEMENTS (TYPES); i++) {
    const guint32 type = TYPES[i];
    if (llm_prepared_bytes (kern, type, 17, 64) == 0)
      LLM_TEST_SKIP ("%s kernels keep the file's layout", llm_cpu_kernels_name (kern));
    ck_assert_uint_eq (llm_prepared_tile_rows (kern, type), 16);
    ck_assert_uint_eq (llm_prepared_bytes (kern, type, 17, 64), llm_f16x16_bytes (17, 64));
    size_t rb;
    uint16_t *w = random_weights (rand, type, 17, 64, &rb);
    uint8_t *p = g_malloc (llm_prepared_bytes (kern, type, 17, 64));
    llm_prepare_tiles (kern, type, w, rb, 17, 64, 0, 2, p);
    float row[64];
    for (size_t r = 0; r < 17; r++) {
      ck_assert (llm_dequantize_prepared_row (kern, type, p, 64, r, row));
      for (size_t k = 0; k < 64; k++) {
        const float want = from_16 (type, ((const uint16_t *) ((const uint8_t *) w + r * rb))[k]);
        ck_assert (memcmp (&row[k], &want, sizeof want) == 0);
      }
    }
    g_free (p);
    g_free (w);
  }
  g_rand_free (rand);
}
END_TEST

/* --- kernels --- */

typedef LlmF16x16Fn (*Lookup) (uint32_t wtype);

/* @lookup's kernel for each type over every shape: rows not a multiple of
 * 16, widths 37 (not a multiple of a column step), 64, 1024 and 2816,
 * 1..20, 33, 64 and 130 tokens, all rows and a sub-range, written to
 * outputs wider than the matrix (so stray writes show). Every result must
 * be the packed reference's (computed here from the file's rows, in the
 * order f16x16.h defines) bit for bit, and within the stated bound of the
 * double-sum reference. */
static void
check_kernels (Lookup lookup, const char *name)
{
  GRand *rand = g_rand_new_with_seed (20);
  const size_t row_counts[] = { 1, 15, 17, 100 }, widths[] = { 37, 64, 1024, 2816 };
  const size_t max_tok = 130;
  const size_t token_counts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
    18, 19, 20, 33, 64, max_tok };
  for (size_t ty = 0; ty < G_N_ELEMENTS (TYPES); ty++) {
    const guint32 type = TYPES[ty];
    const LlmF16x16Fn fn = lookup (type);
    ck_assert (fn != NULL);
    for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
      for (size_t b = 0; b < G_N_ELEMENTS (widths); b++) {
        const size_t rows = row_counts[a], n = widths[b], ldy = rows + 5;
        size_t rb, xs;
        uint16_t *w = random_weights (rand, type, rows, n, &rb);
        uint8_t *xq = random_acts (rand, type, n, max_tok, &xs);
        uint8_t *p = packed_of (w, rb, rows, n);
        float *want = g_new (float, max_tok * rows), *ref = g_new (float, max_tok * rows);
        double *bound = g_new (double, max_tok * rows);
        float *wf = widened (type, w, rb, rows, n), *xf = widened (type, xq, xs, max_tok, n);
        fma_products (wf, rows, n, xf, max_tok, want);
        dot_products (type, w, rb, rows, n, xq, xs, max_tok, wf, xf, ref, bound);
        g_free (wf);
        g_free (xf);

        for (size_t k = 0; k < G_N_ELEMENTS (token_counts); k++) {
          const size_t nt = token_counts[k];
          char *what = g_strdup_printf ("%s %s %zu x %zu, %zu tokens", name,
              llm_type_name (type), rows, n, nt);
          float *y = output_rows (nt, ldy);
          ck_assert (fn (n, p, rows, 0, rows, xq, xs, nt, y, ldy, NULL, 0));
          assert_rows_equal (what, y, ldy, want, rows, 0, rows, nt);
          assert_within_bound (what, y, ldy, ref, bound, rows, nt);
          g_free (y);

          /* From the second tile to three rows short of the end. */
          if (rows > 19) {
            y = output_rows (nt, ldy);
            ck_assert (fn (n, p, rows, 16, rows - 3, xq, xs, nt, y, ldy, NULL, 0));
            assert_rows_equal (what, y, ldy, want, rows, 16, rows - 3, nt);
            g_free (y);
          }
          g_free (what);
        }
        g_free (bound);
        g_free (ref);
        g_free (want);
        g_free (p);
        g_free (xq);
        g_free (w);
      }
  }
  g_rand_free (rand);
}

START_TEST (test_scalar_packed_kernel_sums_in_the_stated_order_within_the_bound)
{
  check_kernels (llm_f16x16_ref_fn, "scalar");
}
END_TEST

START_TEST (test_avx2_packed_kernel_equals_packed_reference_bit_for_bit)
{
  if (!(llm_cpu_isa_best () >= LLM_CPU_ISA_AVX2) || llm_avx2_f16x16_fn (LLM_TYPE_F16) == NULL)
    LLM_TEST_SKIP ("no AVX2/FMA/F16C on this CPU or in this build");
  check_kernels (llm_avx2_f16x16_fn, "avx2");
}
END_TEST

START_TEST (test_avx512_packed_kernel_equals_packed_reference_bit_for_bit)
{
  if (!(llm_cpu_isa_best () >= LLM_CPU_ISA_AVX512) || llm_avx512_f16x16_fn (LLM_TYPE_F16) == NULL)
    LLM_TEST_SKIP ("no AVX-512 on this CPU or in this build (or LLM_NO_AVX512 set)");
  check_kernels (llm_avx512_f16x16_fn, "avx512");
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
  const guint32 type = LLM_TYPE_F16;
  size_t rb, xs;
  uint16_t *w = random_weights (rand, type, rows, n, &rb);
  uint8_t *xq = random_acts (rand, type, n, n_tok, &xs);
  float *got = g_new (float, n_tok * rows), *ref = g_new (float, n_tok * rows);
  double *bound = g_new (double, n_tok * rows);
  float *wf = widened (type, w, rb, rows, n), *xf = widened (type, xq, xs, n_tok, n);
  fma_products (wf, rows, n, xf, n_tok, got);
  dot_products (type, w, rb, rows, n, xq, xs, n_tok, wf, xf, ref, bound);
  g_free (wf);
  g_free (xf);
  double worst = 0;
  for (size_t i = 0; i < n_tok * rows; i++)
    worst = MAX (worst, fabs ((double) got[i] - (double) ref[i]) / bound[i]);
  g_print ("f16x16: n = %zu, worst |y - ref| over the bound: %.3g\n", n, worst);
  ck_assert (worst < 0.25);
  g_free (bound);
  g_free (ref);
  g_free (got);
  g_free (xq);
  g_free (w);
  g_rand_free (rand);
}
END_TEST

/* --- rows shared by threads --- */

START_TEST (test_rows_claimed_by_threads_give_the_reference_bits)
{
  GRand *rand = g_rand_new_with_seed (30);
  LlmThreadPool *pool = llm_threadpool_new (3);
  ck_assert (pool != NULL);
  for (size_t ty = 0; ty < G_N_ELEMENTS (TYPES); ty++) {
    const guint32 type = TYPES[ty];
    LlmF16x16Fn fns[3] = { llm_f16x16_ref_fn (type), NULL, NULL };
    const char *names[3] = { "scalar", "avx2", "avx512" };
    if ((llm_cpu_isa_best () >= LLM_CPU_ISA_AVX2))
      fns[1] = llm_avx2_f16x16_fn (type);
    if ((llm_cpu_isa_best () >= LLM_CPU_ISA_AVX512))
      fns[2] = llm_avx512_f16x16_fn (type);
    const size_t rows = 100, n = 1024 + 3, ldy = 104;
    const size_t token_counts[] = { 1, 3, 9, 20 };
    size_t rb, xs;
    uint16_t *w = random_weights (rand, type, rows, n, &rb);
    uint8_t *xq = random_acts (rand, type, n, 20, &xs);
    uint8_t *p = packed_of (w, rb, rows, n);
    float *want = g_new (float, 20 * rows);
    float *wf = widened (type, w, rb, rows, n), *xf = widened (type, xq, xs, 20, n);
    fma_products (wf, rows, n, xf, 20, want);
    g_free (wf);
    g_free (xf);

    for (size_t k = 0; k < G_N_ELEMENTS (fns); k++) {
      if (fns[k] == NULL)
        continue;
      for (size_t a = 0; a < G_N_ELEMENTS (token_counts); a++)
        for (size_t step = 16; step <= 48; step += 32)
          for (size_t r0 = 0; r0 <= 16; r0 += 16) {
            const size_t n_tok = token_counts[a];
            float *y = output_rows (n_tok, ldy);
            ck_assert (llm_test_packed_shared (pool, fns[k], n, p, rows,
                    r0, rows, xq, xs, n_tok, y, ldy, step));
            char *what = g_strdup_printf ("%s %s, %zu tokens, step %zu from row %zu", names[k],
                llm_type_name (type), n_tok, step, r0);
            assert_rows_equal (what, y, ldy, want, rows, r0, rows, n_tok);
            g_free (what);
            g_free (y);
          }
    }
    g_free (want);
    g_free (p);
    g_free (xq);
    g_free (w);
  }
  llm_threadpool_free (pool);
  g_rand_free (rand);
}
END_TEST

static Suite *
f16x16_suite (void)
{
  Suite *s = suite_create ("f16x16");

  TCase *layout = tcase_create ("layout");
  tcase_add_test (layout, test_packed_size_is_2_bytes_per_value_with_rows_padded_to_16);
  tcase_add_test (layout, test_packed_column_holds_the_16_rows_values_side_by_side);
  tcase_add_test (layout, test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros);
  tcase_add_test (layout, test_unpack_row_gives_back_every_original_row);
  tcase_add_test (layout, test_prepared_rows_dequantize_to_the_files_values);
  suite_add_tcase (s, layout);

  TCase *kernels = tcase_create ("kernels");
  tcase_set_timeout (kernels, 600);
  tcase_add_test (kernels, test_scalar_packed_kernel_sums_in_the_stated_order_within_the_bound);
  tcase_add_test (kernels, test_avx2_packed_kernel_equals_packed_reference_bit_for_bit);
  tcase_add_test (kernels, test_avx512_packed_kernel_equals_packed_reference_bit_for_bit);
  tcase_add_test (kernels, test_typical_error_is_well_inside_the_bound);
  tcase_add_test (kernels, test_rows_claimed_by_threads_give_the_reference_bits);
  suite_add_tcase (s, kernels);

  return s;
}

LLM_TEST_MAIN (f16x16_suite)
