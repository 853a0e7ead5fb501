/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q8_0 weights packed 16 rows to a tile (kernels/cpu/q8_0x16.h): the
 * layout's size, packing in pieces, unpacking rows back, and every kernel
 * over it (scalar, AVX2 with and without AVX-VNNI, AVX-512) equal bit for
 * bit to the scalar reference dot_q8_0 (llm_matvec / llm_matmul of the
 * scalar table) for every token count, row range and way of sharing rows
 * among threads. Random inputs come from fixed seeds. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/fp16.h"
#include "cpu/matmul.h"
#include "cpu/q8_0x16.h"
#include "cpu/quantize.h"
#include "cpu/threadpool.h"

/* --- fixtures --- */

/* A Q8_0 matrix with every code byte (-128 too, which no quantiser
 * writes but a file may hold) and scales of both signs and several
 * magnitudes. */
static uint8_t *
random_q8_0 (GRand *rand, size_t rows, size_t n, size_t *row_bytes)
{
  *row_bytes = n / LLM_QK8_0 * sizeof (LlmBlockQ8_0);
  uint8_t *w = g_malloc (rows * *row_bytes);
  LlmBlockQ8_0 *blk = (LlmBlockQ8_0 *) w;
  for (size_t i = 0; i < rows * (n / LLM_QK8_0); i++) {
    const double mag = pow (10.0, g_rand_double_range (rand, -4.0, 0.0));
    blk[i].d = llm_fp16_from_f32 ((float) (g_rand_boolean (rand) ? mag : -mag));
    for (size_t j = 0; j < sizeof blk[i].qs; j++)
      blk[i].qs[j] = (int8_t) g_rand_int_range (rand, -128, 128);
  }
  return w;
}

/* @n_tok rows of activations converted for Q8_0 weights, @xs bytes apart;
 * every tenth token has its codes at the extremes (+-127) so the largest
 * integer sums are exercised. */
static uint8_t *
random_acts (GRand *rand, size_t n, size_t n_tok, size_t *xs)
{
  *xs = llm_matmul_act_bytes (LLM_TYPE_Q8_0, n);
  uint8_t *xq = g_malloc (n_tok * *xs);
  float *x = g_new (float, n);
  for (size_t t = 0; t < n_tok; t++) {
    const double scale = pow (10.0, g_rand_double_range (rand, -2.0, 2.0));
    for (size_t i = 0; i < n; i++) {
      const double v = g_rand_double_range (rand, -1.0, 1.0);
      x[i] = (float) ((t % 10 == 9 ? (v < 0 ? -1.0 : 1.0) : v) * scale);
    }
    llm_matmul_convert (llm_cpu_kernels_best (), LLM_TYPE_Q8_0, x, n, xq + t * *xs);
  }
  g_free (x);
  return xq;
}

static uint8_t *
packed_of (const uint8_t *w, size_t row_bytes, size_t rows, size_t n)
{
  uint8_t *p = g_malloc (llm_q8_0x16_bytes (rows, n));
  llm_q8_0x16_pack (w, row_bytes, rows, n, 0, (rows + 15) / 16, p);
  return p;
}

/* The scalar reference's y[t * ldy + r], rows [0, rows): llm_matvec for
 * one token, llm_matmul for more, both dot_q8_0 per row and token. The
 * one place this suite chooses reference kernels. */
static void
reference_products (const uint8_t *w, size_t row_bytes, size_t rows, size_t n,
    const uint8_t *xq, size_t xs, size_t n_tok, float *y, size_t ldy)
{
  const LlmCpuKernels *ref = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  if (n_tok == 1)
    llm_matvec (ref, LLM_TYPE_Q8_0, w, row_bytes, n, 0, rows, xq, y);
  else
    llm_matmul (ref, LLM_TYPE_Q8_0, w, row_bytes, n, 0, rows, xq, xs, n_tok, y, ldy);
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

/* The AVX2 kernel with LLM_NO_AVX_VNNI set (@vnni FALSE) or unset, the
 * variable then put back as it was. */
static LlmQ8x16Fn
avx2_kernel (gboolean vnni)
{
  char *keep = g_strdup (g_getenv ("LLM_NO_AVX_VNNI"));
  if (vnni)
    g_unsetenv ("LLM_NO_AVX_VNNI");
  else
    g_setenv ("LLM_NO_AVX_VNNI", "1", TRUE);
  const LlmQ8x16Fn fn = llm_avx2_q8_0x16_fn ();
  if (keep != NULL)
    g_setenv ("LLM_NO_AVX_VNNI", keep, TRUE);
  else
    g_unsetenv ("LLM_NO_AVX_VNNI");
  g_free (keep);
  return fn;
}

/* The kernels over the layout, or NULL where this CPU or build lacks one
 * (then *@why says what is missing). */
typedef enum { K_SCALAR, K_AVX2, K_AVX2_VNNI, K_AVX512, N_KERNELS } KernelId;
static const char *const kernel_names[N_KERNELS] = { "scalar", "avx2", "avx2-vnni", "avx512" };

static LlmQ8x16Fn
kernel (KernelId id, const char **why)
{
  const gboolean avx2 = llm_cpu_kernels (LLM_CPU_ISA_AVX2) != NULL &&
      llm_avx2_q8_0x16_fn () != NULL;
  *why = "no AVX2/FMA/F16C on this CPU or in this build";
  switch (id) {
    case K_SCALAR:
      return llm_q8_0x16_ref;
    case K_AVX2:
      return avx2 ? avx2_kernel (FALSE) : NULL;
    case K_AVX2_VNNI:
      if (avx2 && avx2_kernel (TRUE) != avx2_kernel (FALSE))
        return avx2_kernel (TRUE);
      if (avx2)
        *why = "no AVX-VNNI on this CPU";
      return NULL;
    case K_AVX512:
      *why = "no AVX-512 with VNNI on this CPU or in this build (or LLM_NO_AVX512 set)";
      return llm_cpu_kernels (LLM_CPU_ISA_AVX512) != NULL ? llm_avx512_q8_0x16_fn () : NULL;
    default:
      return NULL;
  }
}

/* --- layout --- */

START_TEST (test_packed_size_is_34_bytes_per_row_block_with_rows_padded_to_16)
{
  ck_assert_uint_eq (llm_q8_0x16_bytes (1, 32), 16 * 34);
  ck_assert_uint_eq (llm_q8_0x16_bytes (16, 32), 16 * 34);
  ck_assert_uint_eq (llm_q8_0x16_bytes (17, 64), 32 * 2 * 34);
  ck_assert_uint_eq (llm_q8_0x16_bytes (2048, 5632), 2048 * (5632 / 32) * sizeof (LlmBlockQ8_0));
}
END_TEST

START_TEST (test_packed_block_holds_each_rows_codes_by_4_flipped_then_the_16_scales)
{
  /* Row r's code j is r * 8 + j - 128 (all 16 x 32 byte values, wrapping),
   * its d 0x3c00 + r. */
  const size_t rows = 16, n = 32;
  LlmBlockQ8_0 w[16];
  for (size_t r = 0; r < rows; r++) {
    w[r].d = (uint16_t) (0x3c00 + r);
    for (size_t j = 0; j < 32; j++)
      w[r].qs[j] = (int8_t) (uint8_t) (r * 8 + j - 128);
  }
  uint8_t *p = packed_of ((const uint8_t *) w, sizeof w[0], rows, n);
  /* A stored byte is the code ^ 0x80: code r * 8 + j - 128 reads r * 8 + j. */
#define CODE(r, j) ((uint8_t) ((r) * 8 + (j)))
  /* Vector 0: row 0's qs[0..3], row 1's qs[4..7], row 2's qs[0..3]. */
  const uint8_t v0[] = { CODE (0, 0), CODE (0, 1), CODE (0, 2), CODE (0, 3), CODE (1, 4),
    CODE (1, 5), CODE (1, 6), CODE (1, 7), CODE (2, 0), CODE (2, 1), CODE (2, 2), CODE (2, 3) };
  ck_assert (memcmp (p, v0, sizeof v0) == 0);
  /* Vector 1: the other group of each row: row 0's qs[4..7], row 1's
   * qs[0..3]. */
  const uint8_t v1[] = { CODE (0, 4), CODE (0, 5), CODE (0, 6), CODE (0, 7), CODE (1, 0),
    CODE (1, 1), CODE (1, 2), CODE (1, 3) };
  ck_assert (memcmp (p + 64, v1, sizeof v1) == 0);
  /* Vectors 6 and 7: groups 6 and 7 (qs[24..31]); row 15 (odd) has group
   * 7 in vector 6 and group 6 in vector 7. */
  ck_assert_uint_eq (p[384], CODE (0, 24));
  ck_assert_uint_eq (p[384 + 4 * 15], CODE (15, 28));
  ck_assert_uint_eq (p[448 + 4 * 15 + 3], CODE (15, 27));
#undef CODE
  uint16_t d15;
  memcpy (&d15, p + LLM_Q8_0X16_D_OFFSET + 2 * 15, 2);
  ck_assert_uint_eq (d15, 0x3c00 + 15);
  g_free (p);
}
END_TEST

START_TEST (test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros)
{
  GRand *rand = g_rand_new_with_seed (11);
  const size_t rows = 100, n = 2048 + 32, tiles = 7;
  size_t rb;
  uint8_t *w = random_q8_0 (rand, rows, n, &rb);
  const size_t bytes = llm_q8_0x16_bytes (rows, n);
  uint8_t *whole = packed_of (w, rb, rows, n);
  uint8_t *parts = g_malloc (bytes);
  memset (parts, 0xa5, bytes);
  const size_t cuts[] = { 0, 1, 4, 6, 7 };
  for (size_t k = 0; k + 1 < G_N_ELEMENTS (cuts); k++)
    llm_q8_0x16_pack (w, rb, rows, n, cuts[k], cuts[k + 1], parts);
  ck_assert (memcmp (whole, parts, bytes) == 0);

  /* Rows 100..111 of the last tile: codes 0 (stored 0x80) and zero d. */
  const size_t nb = n / 32;
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = whole + ((tiles - 1) * nb + b) * LLM_Q8_0X16_BLOCK_BYTES;
    for (size_t r = rows % 16; r < 16; r++) {
      for (size_t k = 0; k < 8; k++)
        for (size_t j = 0; j < 4; j++)
          ck_assert_uint_eq (pb[64 * k + 4 * r + j], 0x80);
      ck_assert_uint_eq (pb[LLM_Q8_0X16_D_OFFSET + 2 * r], 0);
      ck_assert_uint_eq (pb[LLM_Q8_0X16_D_OFFSET + 2 * r + 1], 0);
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
      uint8_t *w = random_q8_0 (rand, rows, n, &rb);
      uint8_t *p = packed_of (w, rb, rows, n);
      uint8_t *row = g_malloc (rb);
      for (size_t r = 0; r < rows; r++) {
        llm_q8_0x16_unpack_row (p, n, r, row);
        ck_assert_msg (memcmp (row, w + r * rb, rb) == 0, "%zu x %zu: row %zu", rows, n, r);
      }
      g_free (row);
      g_free (p);
      g_free (w);
    }
  g_rand_free (rand);
}
END_TEST

START_TEST (test_a_prepared_row_dequantizes_as_the_files_row)
{
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  if (llm_prepared_tile_rows (kern, LLM_TYPE_Q8_0) == 0)
    LLM_TEST_SKIP ("this CPU's kernels keep Q8_0 in the file's layout");
  ck_assert_uint_eq (llm_prepared_tile_rows (kern, LLM_TYPE_Q8_0), LLM_Q8_0X16_ROWS);
  GRand *rand = g_rand_new_with_seed (13);
  const size_t rows = 37, n = 1024;
  size_t rb;
  uint8_t *w = random_q8_0 (rand, rows, n, &rb);
  ck_assert_uint_eq (llm_prepared_bytes (kern, LLM_TYPE_Q8_0, rows, n),
      llm_q8_0x16_bytes (rows, n));
  uint8_t *p = g_malloc (llm_q8_0x16_bytes (rows, n));
  llm_prepare_tiles (kern, LLM_TYPE_Q8_0, w, rb, rows, n, 0, (rows + 15) / 16, p);
  float *got = g_new (float, n), *want = g_new (float, n);
  for (size_t r = 0; r < rows; r++) {
    ck_assert (llm_dequantize_prepared_row (kern, LLM_TYPE_Q8_0, p, n, r, got));
    llm_dequantize_row (LLM_TYPE_Q8_0, w, rb, n, r, want);
    ck_assert_msg (memcmp (got, want, n * sizeof (float)) == 0, "row %zu", r);
  }
  g_free (got);
  g_free (want);
  g_free (p);
  g_free (w);
  g_rand_free (rand);
}
END_TEST

/* --- kernels against the scalar reference --- */

/* @fn over every shape: rows not a multiple of 16, widths of one block to
 * 88, 1..20, 33, 64 and 130 tokens, all rows and a sub-range, written to
 * outputs wider than the matrix (so stray writes show). */
static void
check_kernel (LlmQ8x16Fn fn, const char *name)
{
  GRand *rand = g_rand_new_with_seed (20);
  const size_t row_counts[] = { 1, 15, 17, 100 }, widths[] = { 32, 1024, 2816 };
  const size_t max_tok = 130;
  const size_t token_counts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
    18, 19, 20, 33, 64, max_tok };
  for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
    for (size_t b = 0; b < G_N_ELEMENTS (widths); b++) {
      const size_t rows = row_counts[a], n = widths[b], ldy = rows + 5;
      size_t rb, xs;
      uint8_t *w = random_q8_0 (rand, rows, n, &rb);
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

static void
check_kernel_id (KernelId id)
{
  const char *why;
  const LlmQ8x16Fn fn = kernel (id, &why);
  if (fn == NULL)
    LLM_TEST_SKIP ("%s: %s", kernel_names[id], why);
  check_kernel (fn, kernel_names[id]);
}

START_TEST (test_scalar_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  check_kernel_id (K_SCALAR);
}
END_TEST

START_TEST (test_avx2_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  check_kernel_id (K_AVX2);
}
END_TEST

START_TEST (test_avx2_vnni_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  check_kernel_id (K_AVX2_VNNI);
}
END_TEST

START_TEST (test_avx512_packed_kernel_equals_scalar_reference_bit_for_bit)
{
  check_kernel_id (K_AVX512);
}
END_TEST

/* --- rows shared by threads --- */

START_TEST (test_rows_claimed_by_threads_give_the_reference_bits)
{
  GRand *rand = g_rand_new_with_seed (30);
  const size_t rows = 100, n = 2816, ldy = 104;
  const size_t token_counts[] = { 1, 3, 9, 20, 33 };
  size_t rb, xs;
  uint8_t *w = random_q8_0 (rand, rows, n, &rb);
  uint8_t *xq = random_acts (rand, n, 33, &xs);
  uint8_t *p = packed_of (w, rb, rows, n);
  float *want = g_new (float, 33 * rows);
  reference_products (w, rb, rows, n, xq, xs, 33, want, rows);
  LlmThreadPool *pool = llm_threadpool_new (3);
  ck_assert (pool != NULL);

  for (KernelId id = 0; id < N_KERNELS; id++) {
    const char *why;
    const LlmQ8x16Fn fn = kernel (id, &why);
    if (fn == NULL)
      continue;
    for (size_t a = 0; a < G_N_ELEMENTS (token_counts); a++)
      for (size_t step = 16; step <= 48; step += 32)
        for (size_t r0 = 0; r0 <= 16; r0 += 16) {
          const size_t n_tok = token_counts[a];
          float *y = output_rows (n_tok, ldy);
          ck_assert (llm_test_packed_shared (pool, fn, n, p, rows,
                  r0, rows, xq, xs, n_tok, y, ldy, step));
          char *what = g_strdup_printf ("%s, %zu tokens, step %zu from row %zu", kernel_names[id],
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
q8_0x16_suite (void)
{
  Suite *s = suite_create ("q8_0x16");

  TCase *layout = tcase_create ("layout");
  tcase_add_test (layout, test_packed_size_is_34_bytes_per_row_block_with_rows_padded_to_16);
  tcase_add_test (layout, test_packed_block_holds_each_rows_codes_by_4_flipped_then_the_16_scales);
  tcase_add_test (layout, test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros);
  tcase_add_test (layout, test_unpack_row_gives_back_every_original_row);
  tcase_add_test (layout, test_a_prepared_row_dequantizes_as_the_files_row);
  suite_add_tcase (s, layout);

  TCase *kernels = tcase_create ("kernels");
  tcase_set_timeout (kernels, 600);
  tcase_add_test (kernels, test_scalar_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_avx2_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_avx2_vnni_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_avx512_packed_kernel_equals_scalar_reference_bit_for_bit);
  tcase_add_test (kernels, test_rows_claimed_by_threads_give_the_reference_bits);
  suite_add_tcase (s, kernels);

  return s;
}

LLM_TEST_MAIN (q8_0x16_suite)
