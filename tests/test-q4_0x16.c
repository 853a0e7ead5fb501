/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q4_0 weights packed 16 rows to a tile (kernels/cpu/q4_0x16.h): the
 * layout's size, packing in pieces, unpacking rows back, and every kernel
 * over it (scalar, AVX2, AVX-512) equal bit for bit to the scalar
 * reference llm_matvec / llm_matmul for every token count, row range and
 * way of sharing rows among threads. Random inputs come from fixed seeds. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/fp16.h"
#include "cpu/matmul.h"
#include "cpu/q4_0x16.h"
#include "cpu/quantize.h"
#include "cpu/threadpool.h"

/* --- fixtures --- */

/* A Q4_0 matrix with every nibble value and scales of both signs and
 * several magnitudes. */
static uint8_t *
random_q4_0 (GRand *rand, size_t rows, size_t n, size_t *row_bytes)
{
  *row_bytes = n / LLM_QK4_0 * sizeof (LlmBlockQ4_0);
  uint8_t *w = g_malloc (rows * *row_bytes);
  LlmBlockQ4_0 *blk = (LlmBlockQ4_0 *) w;
  for (size_t i = 0; i < rows * (n / LLM_QK4_0); i++) {
    const double mag = pow (10.0, g_rand_double_range (rand, -4.0, 0.0));
    blk[i].d = llm_fp16_from_f32 ((float) (g_rand_boolean (rand) ? mag : -mag));
    for (size_t j = 0; j < sizeof blk[i].qs; j++)
      blk[i].qs[j] = (uint8_t) g_rand_int_range (rand, 0, 256);
  }
  return w;
}

/* @n_tok rows of activations converted for Q4_0 weights, @xs bytes apart. */
static uint8_t *
random_acts (GRand *rand, size_t n, size_t n_tok, size_t *xs)
{
  *xs = llm_matmul_act_bytes (LLM_TYPE_Q4_0, n);
  uint8_t *xq = g_malloc (n_tok * *xs);
  float *x = g_new (float, n);
  for (size_t t = 0; t < n_tok; t++) {
    const double scale = pow (10.0, g_rand_double_range (rand, -2.0, 2.0));
    for (size_t i = 0; i < n; i++)
      x[i] = (float) (g_rand_double_range (rand, -1.0, 1.0) * scale);
    llm_matmul_convert (llm_cpu_kernels_best (), LLM_TYPE_Q4_0, x, n, xq + t * *xs);
  }
  g_free (x);
  return xq;
}

static uint8_t *
packed_of (const uint8_t *w, size_t row_bytes, size_t rows, size_t n)
{
  uint8_t *p = g_malloc (llm_q4_0x16_bytes (rows, n));
  llm_q4_0x16_pack (w, row_bytes, rows, n, 0, (rows + 15) / 16, p);
  return p;
}

/* The scalar reference's y[t * ldy + r], rows [0, rows): llm_matvec for
 * one token, llm_matmul for more. The one place this suite chooses
 * kernels. */
static void
reference_products (const uint8_t *w, size_t row_bytes, size_t rows, size_t n,
    const uint8_t *xq, size_t xs, size_t n_tok, float *y, size_t ldy)
{
  const LlmCpuKernels *ref = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  if (n_tok == 1)
    llm_matvec (ref, LLM_TYPE_Q4_0, w, row_bytes, n, 0, rows, xq, y);
  else
    llm_matmul (ref, LLM_TYPE_Q4_0, w, row_bytes, n, 0, rows, xq, xs, n_tok, y, ldy);
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
      ck_assert_msg (memcmp (&got, &exp, sizeof got) == 0,
          "%s: token %zu row %zu: got %.9g, want %.9g", what, t, r, (double) got, (double) exp);
    }
}

/* --- layout --- */

START_TEST (test_packed_size_is_18_bytes_per_row_block_with_rows_padded_to_16)
{
  ck_assert_uint_eq (llm_q4_0x16_bytes (1, 32), 16 * 18);
  ck_assert_uint_eq (llm_q4_0x16_bytes (16, 32), 16 * 18);
  ck_assert_uint_eq (llm_q4_0x16_bytes (17, 64), 32 * 2 * 18);
  ck_assert_uint_eq (llm_q4_0x16_bytes (2048, 5632), 2048 * (5632 / 32) * sizeof (LlmBlockQ4_0));
}
END_TEST

START_TEST (test_packed_block_holds_each_rows_nibble_bytes_by_4_then_the_16_scales)
{
  /* Row r's byte j is r * 16 + j, its d is 0x3c00 + r. */
  const size_t rows = 16, n = 32;
  LlmBlockQ4_0 w[16];
  for (size_t r = 0; r < rows; r++) {
    w[r].d = (uint16_t) (0x3c00 + r);
    for (size_t j = 0; j < 16; j++)
      w[r].qs[j] = (uint8_t) (r * 16 + j);
  }
  uint8_t *p = packed_of ((const uint8_t *) w, sizeof w[0], rows, n);
  /* Vector 0: row 0's qs[0..3], row 1's qs[4..7], row 2's qs[0..3]. */
  const uint8_t v0[] = { 0, 1, 2, 3, 20, 21, 22, 23, 32, 33, 34, 35 };
  ck_assert (memcmp (p, v0, sizeof v0) == 0);
  /* Vector 1: the other group of each row: row 0's qs[4..7], row 1's
   * qs[0..3]. */
  const uint8_t v1[] = { 4, 5, 6, 7, 16, 17, 18, 19 };
  ck_assert (memcmp (p + 64, v1, sizeof v1) == 0);
  /* Vectors 2 and 3: groups 2 and 3 (qs[8..15]); row 15 (odd) has group 3
   * in vector 2. */
  ck_assert_uint_eq (p[128], 8);
  ck_assert_uint_eq (p[128 + 4 * 15], 15 * 16 + 12);
  ck_assert_uint_eq (p[192 + 4 * 15 + 3], 15 * 16 + 11);
  uint16_t d15;
  memcpy (&d15, p + LLM_Q4_0X16_D_OFFSET + 2 * 15, 2);
  ck_assert_uint_eq (d15, 0x3c00 + 15);
  g_free (p);
}
END_TEST

START_TEST (test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros)
{
  GRand *rand = g_rand_new_with_seed (11);
  const size_t rows = 100, n = 2048 + 32, tiles = 7;
  size_t rb;
  uint8_t *w = random_q4_0 (rand, rows, n, &rb);
  const size_t bytes = llm_q4_0x16_bytes (rows, n);
  uint8_t *whole = packed_of (w, rb, rows, n);
  uint8_t *parts = g_malloc (bytes);
  memset (parts, 0xa5, bytes);
  const size_t cuts[] = { 0, 1, 4, 6, 7 };
  for (size_t k = 0; k + 1 < G_N_ELEMENTS (cuts); k++)
    llm_q4_0x16_pack (w, rb, rows, n, cuts[k], cuts[k + 1], parts);
  ck_assert (memcmp (whole, parts, bytes) == 0);

  /* Rows 100..111 of the last tile: zero nibbles and zero d. */
  const size_t nb = n / 32;
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = whole + ((tiles - 1) * nb + b) * LLM_Q4_0X16_BLOCK_BYTES;
    for (size_t r = rows % 16; r < 16; r++) {
      for (size_t k = 0; k < 4; k++)
        for (size_t j = 0; j < 4; j++)
          ck_assert_uint_eq (pb[64 * k + 4 * r + j], 0);
      ck_assert_uint_eq (pb[LLM_Q4_0X16_D_OFFSET + 2 * r], 0);
      ck_assert_uint_eq (pb[LLM_Q4_0X16_D_OFFSET + 2 * r + 1], 0);
    }
  }
  g_free (w);
  g_free (whole);
  g_free (parts);
  g_rand_free (rand);
}
END_TEST

START_TEST (test_unpack_row_gives_back_every_original_row)
{
  GRand *rand = g_rand_new_with_seed (12);
  const size_t row_counts[] = { 1, 15, 17, 100 }, widths[] = { 32, 64, 2048 + 32 };
  for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
    for (size_t b = 0; b < G_N_ELEMENTS (widths); b++) {
      const size_t rows = row_counts[a], n = widths[b];
      size_t rb;
      uint8_t *w = random_q4_0 (rand, rows, n, &rb);
      uint8_t *p = packed_of (w, rb, rows, n);
      uint8_t *row = g_malloc (rb);
      for (size_t r = 0; r < rows; r++) {
        llm_q4_0x16_unpack_row (p, n, r, row);
        ck_assert_msg (memcmp (row, w + r * rb, rb) == 0, "%zu x %zu: row %zu", rows, n, r);
      }
      g_free (row);
      g_free (p);
      g_free (w);
    }
  g_rand_free (rand);
}
END_TEST

/* --- kernels against the scalar reference --- */

/* @fn over every shape: rows not a multiple of 16, widths of one block to
 * 65, 1..20 and 128 tokens, all rows and a sub-range, written to outputs
 * wider than the matrix (so stray writes show). */
static void
check_kernel (LlmQ4x16Fn fn, const char *name)
{
  GRand *rand = g_rand_new_with_seed (20);
  const size_t row_counts[] = { 1, 15, 17, 100 }, widths[] = { 32, 64, 2048 + 32 };
  const size_t max_tok = 128;
  const size_t token_counts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
    18, 19, 20, max_tok };
  for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
    for (size_t b = 0; b < G_N_ELEMENTS (widths); b++) {
      const size_t rows = row_counts[a], n = widths[b], ldy = rows + 5;
      size_t rb, xs;
      uint8_t *w = random_q4_0 (rand, rows, n, &rb);
      uint8_t *xq = random_acts (rand, n, max_tok, &xs);
      uint8_t *p = packed_of (w, rb, rows, n);
      float *want = g_new (float, max_tok * rows);
      reference_products (w, rb, rows, n, xq, xs, max_tok, want, rows);
      /* The one-token reference (llm_matvec) is the batched one's first row. */
      float *want1 = g_new (float, rows);
      reference_products (w, rb, rows, n, xq, xs, 1, want1, rows);
      ck_assert (memcmp (want1, want, rows * sizeof (float)) == 0);

      for (size_t k = 0; k < G_N_ELEMENTS (token_counts); k++) {
        const size_t nt = token_counts[k];
        char *what = g_strdup_printf ("%s %zu x %zu, %zu tokens", name, rows, n, nt);
        float *y = output_rows (nt, ldy);
        ck_assert (fn (n, p, rows, 0, rows, xq, xs, nt, y, ldy, NULL, 0));
        assert_rows_equal (what, y, ldy, want, rows, 0, rows, nt);
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
      g_free (want1);
      g_free (want);
      g_free (p);
      g_free (xq);
      g_free (w);
    }
  g_rand_free (rand);
}

START_TEST (test_scalar_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  check_kernel (llm_q4_0x16_ref, "scalar");
}
END_TEST

START_TEST (test_avx2_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  if (!(llm_cpu_isa_best () >= LLM_CPU_ISA_AVX2) || llm_avx2_q4_0x16_fn () == NULL)
    LLM_TEST_SKIP ("no AVX2/FMA/F16C on this CPU or in this build");
  check_kernel (llm_avx2_q4_0x16_fn (), "avx2");
}
END_TEST

START_TEST (test_avx512_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  if (!(llm_cpu_isa_best () >= LLM_CPU_ISA_AVX512) || llm_avx512_q4_0x16_fn () == NULL)
    LLM_TEST_SKIP ("no AVX-512 with VNNI on this CPU or in this build (or LLM_NO_AVX512 set)");
  check_kernel (llm_avx512_q4_0x16_fn (), "avx512");
}
END_TEST

/* --- rows shared by threads --- */

START_TEST (test_rows_claimed_by_threads_give_the_reference_bits)
{
  LlmQ4x16Fn fns[3] = { llm_q4_0x16_ref, NULL, NULL };
  const char *names[3] = { "scalar", "avx2", "avx512" };
  if ((llm_cpu_isa_best () >= LLM_CPU_ISA_AVX2))
    fns[1] = llm_avx2_q4_0x16_fn ();
  if ((llm_cpu_isa_best () >= LLM_CPU_ISA_AVX512))
    fns[2] = llm_avx512_q4_0x16_fn ();
  GRand *rand = g_rand_new_with_seed (30);
  const size_t rows = 100, n = 2048 + 32, ldy = 104;
  const size_t token_counts[] = { 1, 3, 9, 20 };
  size_t rb, xs;
  uint8_t *w = random_q4_0 (rand, rows, n, &rb);
  uint8_t *xq = random_acts (rand, n, 20, &xs);
  uint8_t *p = packed_of (w, rb, rows, n);
  float *want = g_new (float, 20 * rows);
  reference_products (w, rb, rows, n, xq, xs, 20, want, rows);
  LlmThreadPool *pool = llm_threadpool_new (3);
  ck_assert (pool != NULL);

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
          char *what = g_strdup_printf ("%s, %zu tokens, step %zu from row %zu", names[k],
              n_tok, step, r0);
          assert_rows_equal (what, y, ldy, want, rows, r0, rows, n_tok);
          g_free (what);
          g_free (y);
        }
  }
  llm_threadpool_free (pool);
  g_free (want);
  g_free (p);
  g_free (xq);
  g_free (w);
  g_rand_free (rand);
}
END_TEST

static Suite *
q4_0x16_suite (void)
{
  Suite *s = suite_create ("q4_0x16");

  TCase *layout = tcase_create ("layout");
  tcase_add_test (layout, test_packed_size_is_18_bytes_per_row_block_with_rows_padded_to_16);
  tcase_add_test (layout, test_packed_block_holds_each_rows_nibble_bytes_by_4_then_the_16_scales);
  tcase_add_test (layout, test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros);
  tcase_add_test (layout, test_unpack_row_gives_back_every_original_row);
  suite_add_tcase (s, layout);

  TCase *kernels = tcase_create ("kernels");
  tcase_set_timeout (kernels, 300);
  tcase_add_test (kernels, test_scalar_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_avx2_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_avx512_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_rows_claimed_by_threads_give_the_reference_bits);
  suite_add_tcase (s, kernels);

  return s;
}

LLM_TEST_MAIN (q4_0x16_suite)
