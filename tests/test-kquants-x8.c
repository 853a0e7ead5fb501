/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed K-quant layout (kernels/cpu/kquants-x8.h): the pack and its
 * inverse, the scalar reference over the layout against the scalar dot
 * products of kquants.c within a bound derived from the two float orders,
 * and every SIMD kernel against that reference bit for bit, for every
 * batch size, row range and thread split. Weights are real K-quant data,
 * quantized from seeded random floats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/fp16.h"
#include "cpu/kquants.h"
#include "cpu/kquants-quantize.h"
#include "cpu/kquants-x8.h"
#include "cpu/matmul.h"
#include "cpu/threadpool.h"

/* --- helpers --- */

static const uint32_t k_types[] = { LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K };
static const size_t k_rows[] = { 1, 7, 9, 100 };
static const size_t k_widths[] = { 256, 512, 2816 };
#define N_OF(a) (sizeof (a) / sizeof (a)[0])

static size_t
block_bytes_of (uint32_t wtype)
{
  uint32_t bytes = 0;
  ck_assert (llm_type_info (wtype, NULL, &bytes));
  return bytes;
}

/* @rows x @n weights of @wtype quantized from random floats of a few
 * magnitudes (so d and dmin vary from row to row), row_bytes apart. */
static uint8_t *
random_weights (uint32_t wtype, size_t rows, size_t n, size_t *row_bytes)
{
  *row_bytes = n / LLM_QK_K * block_bytes_of (wtype);
  uint8_t *w = g_malloc (rows * *row_bytes);
  float *f = g_new (float, n);
  for (size_t r = 0; r < rows; r++) {
    const float scale = 0.01f * (float) (1 + r % 5);
    for (size_t i = 0; i < n; i++)
      f[i] = llm_test_rng_float () * scale + (r % 3 == 0 ? 0.3f * scale : 0.0f);
    void *row = w + r * *row_bytes;
    llm_quantize_row_kquant (wtype, f, row, n);
  }
  g_free (f);
  return w;
}

/* @n_tok rows of random activations converted for @wtype; stride in *@xs. */
static uint8_t *
random_acts (uint32_t wtype, size_t n, size_t n_tok, size_t *xs)
{
  const LlmCpuKernels *ref = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  *xs = llm_matmul_act_bytes (wtype, n);
  uint8_t *xq = g_malloc (n_tok * *xs);
  float *x = g_new (float, n);
  for (size_t t = 0; t < n_tok; t++) {
    for (size_t i = 0; i < n; i++)
      x[i] = llm_test_rng_float () * (float) (1 + t % 4);
    llm_matmul_convert (ref, wtype, x, n, xq + t * *xs);
  }
  g_free (x);
  return xq;
}

/* The whole matrix packed, 64-byte aligned (free with free ()). */
static uint8_t *
pack_all (uint32_t wtype, const uint8_t *w, size_t row_bytes, size_t rows, size_t n)
{
  const size_t bytes = llm_kx8_bytes (wtype, rows, n);
  void *p = NULL;
  ck_assert (posix_memalign (&p, 64, bytes) == 0);
  memset (p, 0xa5, bytes);
  llm_kx8_pack (wtype, w, row_bytes, rows, n, 0, (rows + LLM_KX8_ROWS - 1) / LLM_KX8_ROWS, p);
  return p;
}

/* The kernels a test runs against the packed reference: AVX2 (with and
 * without AVX-VNNI) and AVX-512, those this CPU and build have. */
typedef struct {
  const char *name;
  LlmKx8Fn fn;
} Kernel;

static size_t
simd_kernels (uint32_t wtype, Kernel out[3])
{
  size_t k = 0;
  if (llm_cpu_kernels (LLM_CPU_ISA_AVX2) != NULL && llm_avx2_kx8_fn (wtype) != NULL) {
    const char *saved = g_getenv ("LLM_NO_AVX_VNNI");
    char *keep = g_strdup (saved);
    g_setenv ("LLM_NO_AVX_VNNI", "1", TRUE);
    out[k++] = (Kernel) { "avx2", llm_avx2_kx8_fn (wtype) };
    if (keep != NULL)
      g_setenv ("LLM_NO_AVX_VNNI", keep, TRUE);
    else
      g_unsetenv ("LLM_NO_AVX_VNNI");
    g_free (keep);
    if (llm_avx2_kx8_fn (wtype) != out[0].fn)
      out[k++] = (Kernel) { "avx2-vnni", llm_avx2_kx8_fn (wtype) };
  }
  if (llm_cpu_kernels (LLM_CPU_ISA_AVX512) != NULL && llm_avx512_kx8_fn (wtype) != NULL)
    out[k++] = (Kernel) { "avx512", llm_avx512_kx8_fn (wtype) };
  return k;
}

/* --- the integers of a block, read from the GGUF layout ---------------
 * Independent of both the packed layout and kquants.c, for the error
 * bound: value k (unsigned), the scale and min of its run. */

static int
k_value (uint32_t wtype, const uint8_t *blk, int k)
{
  if (wtype == LLM_TYPE_Q6_K) {
    const LlmBlockQ6_K *b = (const LlmBlockQ6_K *) blk;
    const int h = k / 128, q = k % 128 / 32, l = k % 32;
    const int ql = b->ql[64 * h + 32 * (q & 1) + l];
    return (q < 2 ? ql & 15 : ql >> 4) | ((b->qh[32 * h + l] >> (2 * q)) & 3) << 4;
  }
  const uint8_t *qs = wtype == LLM_TYPE_Q4_K ? ((const LlmBlockQ4_K *) blk)->qs
      : ((const LlmBlockQ5_K *) blk)->qs;
  const int g = k / 64, hi = k % 64 / 32, l = k % 32;
  int u = hi ? qs[32 * g + l] >> 4 : qs[32 * g + l] & 15;
  if (wtype == LLM_TYPE_Q5_K)
    u += ((((const LlmBlockQ5_K *) blk)->qh[l] >> (2 * g + hi)) & 1) << 4;
  return u;
}

/* The exact value S of a row's dot product as both float orders see it
 * (sum over super-blocks of D_b I_b - E_b M_b, with D_b = d_w d_x and E_b
 * = dmin_w d_x rounded to float, I_b and M_b exact integers), and A, the
 * sum of the magnitudes of every term either order adds: |D_b L_bl| for
 * the 8 lanes l of the scalar reference (I_b = sum_l L_bl) and |E_b M_b|. */
static void
exact_dot (uint32_t wtype, size_t n, const uint8_t *row, const LlmBlockQ8_K *x, double *s,
    double *a)
{
  const size_t bb = block_bytes_of (wtype);
  *s = *a = 0.0;
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const uint8_t *blk = row + b * bb;
    int64_t lanes[8] = { 0 }, mins = 0;
    float d, e = 0.0f;
    if (wtype == LLM_TYPE_Q6_K) {
      const LlmBlockQ6_K *q6 = (const LlmBlockQ6_K *) blk;
      for (int k = 0; k < LLM_QK_K; k++)
        lanes[k % 8] += q6->scales[k / 16] * (k_value (wtype, blk, k) - 32) * x[b].qs[k];
      d = llm_fp16_to_f32 (q6->d) * x[b].d;
    } else {
      /* Q4_K and Q5_K start alike: d, dmin, scales. */
      const LlmBlockQ4_K *q4 = (const LlmBlockQ4_K *) blk;
      for (int k = 0; k < LLM_QK_K; k++) {
        uint8_t sc, m;
        llm_k4_scale_min (k / 32, q4->scales, &sc, &m);
        lanes[k % 8] += sc * k_value (wtype, blk, k) * x[b].qs[k];
        if (k % 16 == 0)
          mins += m * x[b].bsums[k / 16];
      }
      d = llm_fp16_to_f32 (q4->d) * x[b].d;
      e = llm_fp16_to_f32 (q4->dmin) * x[b].d;
    }
    for (int l = 0; l < 8; l++) {
      *s += (double) d * (double) lanes[l];
      *a += fabs ((double) d * (double) lanes[l]);
    }
    *s -= (double) e * (double) mins;
    *a += fabs ((double) e * (double) mins);
  }
}

/* gamma_k = k u / (1 - k u), u = 2^-24: the relative error bound of k
 * float roundings in a row. */
static double
gamma_k (double k)
{
  const double u = 1.0 / 16777216.0;
  return k * u / (1.0 - k * u);
}

/* --- tests --- */

START_TEST (test_packed_sizes_stay_within_three_percent_of_the_blocks)
{
  /* 16 rows x 1 super-block, against 16 GGUF blocks. */
  ck_assert_uint_eq (llm_kx8_bytes (LLM_TYPE_Q4_K, 16, 256), 2368);
  ck_assert_uint_eq (llm_kx8_bytes (LLM_TYPE_Q5_K, 16, 256), 2880);
  ck_assert_uint_eq (llm_kx8_bytes (LLM_TYPE_Q6_K, 16, 256), 3392);
  for (size_t i = 0; i < N_OF (k_types); i++) {
    const size_t gguf = 1024 * 11 * block_bytes_of (k_types[i]);
    const size_t packed = llm_kx8_bytes (k_types[i], 1024, 2816);
    ck_assert_msg (packed >= gguf && packed <= gguf * 1.03, "%s: %zu packed, %zu in GGUF",
        llm_type_name (k_types[i]), packed, gguf);
    ck_assert_uint_eq (llm_kx8_bytes (k_types[i], 17, 512), 2 * 2 * llm_kx8_block_bytes (k_types[i]));
  }
  ck_assert_uint_eq (llm_kx8_bytes (LLM_TYPE_Q4_0, 16, 256), 0);
  ck_assert_uint_eq (llm_kx8_bytes (LLM_TYPE_Q8_K, 16, 256), 0);
  ck_assert_ptr_null (llm_kx8_ref_fn (LLM_TYPE_Q8_0));
  ck_assert_ptr_null (llm_avx2_kx8_fn (LLM_TYPE_Q4_0));
  ck_assert_ptr_null (llm_avx512_kx8_fn (LLM_TYPE_F32));
}
END_TEST

/* Packs @w (@rows x @n of @wtype, @rb bytes a row) and asserts that every
 * row unpacks to its bytes exactly. Frees @w. */
static void
check_round_trip (uint32_t wtype, uint8_t *w, size_t rb, size_t rows, size_t n)
{
  uint8_t *p = pack_all (wtype, w, rb, rows, n);
  uint8_t *back = g_malloc (rb);
  for (size_t r = 0; r < rows; r++) {
    llm_kx8_unpack_row (wtype, p, n, r, back);
    ck_assert_msg (memcmp (back, w + r * rb, rb) == 0, "%s %zux%zu: row %zu differs",
        llm_type_name (wtype), rows, n, r);
  }
  g_free (back);
  free (p);
  g_free (w);
}

START_TEST (test_unpack_row_gives_back_the_original_bytes)
{
  llm_test_rng_seed (1);
  for (size_t ti = 0; ti < N_OF (k_types); ti++)
    for (size_t ri = 0; ri < N_OF (k_rows); ri++)
      for (size_t wi = 0; wi < N_OF (k_widths); wi++) {
        size_t rb;
        uint8_t *w = random_weights (k_types[ti], k_rows[ri], k_widths[wi], &rb);
        check_round_trip (k_types[ti], w, rb, k_rows[ri], k_widths[wi]);
      }
}
END_TEST

/* Random bytes reach every bit pattern, which quantized data does not
 * (Q6_K scales of -128, Q4_K mins of 63 with scales of 63, ...). */
START_TEST (test_unpack_row_gives_back_random_bytes)
{
  llm_test_rng_seed (2);
  for (size_t ti = 0; ti < N_OF (k_types); ti++) {
    const size_t rows = 23, n = 768, rb = 3 * block_bytes_of (k_types[ti]);
    uint8_t *w = g_malloc (rows * rb);
    for (size_t i = 0; i < rows * rb; i++)
      w[i] = (uint8_t) llm_test_rng_next ();
    check_round_trip (k_types[ti], w, rb, rows, n);
  }
}
END_TEST

START_TEST (test_packing_tile_ranges_separately_gives_the_same_bytes)
{
  llm_test_rng_seed (3);
  for (size_t ti = 0; ti < N_OF (k_types); ti++) {
    const uint32_t wtype = k_types[ti];
    const size_t rows = 100, n = 512, tiles = 7;
    size_t rb;
    uint8_t *w = random_weights (wtype, rows, n, &rb);
    uint8_t *whole = pack_all (wtype, w, rb, rows, n);
    const size_t bytes = llm_kx8_bytes (wtype, rows, n);
    uint8_t *parts = g_malloc (bytes);
    memset (parts, 0x5a, bytes);
    /* Out of order, as threads might finish. */
    llm_kx8_pack (wtype, w, rb, rows, n, 5, tiles, parts);
    llm_kx8_pack (wtype, w, rb, rows, n, 0, 2, parts);
    llm_kx8_pack (wtype, w, rb, rows, n, 2, 3, parts);
    llm_kx8_pack (wtype, w, rb, rows, n, 3, 5, parts);
    ck_assert (memcmp (whole, parts, bytes) == 0);
    /* Rows past the matrix, in the last tile, are zero. */
    const size_t tb = llm_kx8_block_bytes (wtype);
    uint8_t zero[4] = { 0 };
    ck_assert (memcmp (whole + 6 * 2 * tb + 4 * 15, zero, 4) == 0);
    g_free (parts);
    free (whole);
    g_free (w);
  }
}
END_TEST

/* The scalar reference over the layout adds, per row and super-block,
 * fl(I_b) into one chain of fmas (2 nb of them with the mins): each term
 * sees at most 2 nb + 1 roundings, so it is within gamma(2 nb + 1) A of
 * the exact S. kquants.c's reference rounds each of its 8 lane terms once
 * as a product, then adds it in a chain of nb, then in the 8-term sum of
 * the lanes: gamma(nb + 9) A. The two are within the sum of those. */
START_TEST (test_packed_reference_is_within_the_rounding_bound_of_the_scalar_dot)
{
  llm_test_rng_seed (4);
  const LlmCpuKernels *scalar = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  const size_t n_tok = 5;
  for (size_t ti = 0; ti < N_OF (k_types); ti++)
    for (size_t wi = 0; wi < N_OF (k_widths); wi++) {
      const uint32_t wtype = k_types[ti];
      const size_t rows = 100, n = k_widths[wi], nb = n / LLM_QK_K;
      size_t rb, xs;
      uint8_t *w = random_weights (wtype, rows, n, &rb);
      uint8_t *xq = random_acts (wtype, n, n_tok, &xs);
      uint8_t *p = pack_all (wtype, w, rb, rows, n);
      float *y = g_new (float, n_tok * rows), *yr = g_new (float, rows);
      ck_assert (llm_kx8_ref_fn (wtype) (n, p, rows, 0, rows, xq, xs, n_tok, y, rows, NULL, 0));
      for (size_t t = 0; t < n_tok; t++) {
        llm_matvec (scalar, wtype, w, rb, n, 0, rows, xq + t * xs, yr);
        for (size_t r = 0; r < rows; r++) {
          double s, a;
          exact_dot (wtype, n, w + r * rb, (const LlmBlockQ8_K *) (xq + t * xs), &s, &a);
          const double got = y[t * rows + r];
          /* The float result itself is rounded once more for the store
           * (nothing here: the chain is float); 1e-37 covers a = 0. */
          ck_assert_msg (fabs (got - s) <= gamma_k (2 * nb + 1) * a + 1e-37,
              "%s n=%zu t=%zu r=%zu: packed %.9g, exact %.9g (bound %.3g)",
              llm_type_name (wtype), n, t, r, got, s, gamma_k (2 * nb + 1) * a);
          ck_assert_msg (fabs ((double) yr[r] - s) <= gamma_k (nb + 9) * a + 1e-37,
              "%s n=%zu t=%zu r=%zu: scalar %.9g, exact %.9g", llm_type_name (wtype), n, t, r,
              yr[r], s);
          const double tol = (gamma_k (2 * nb + 1) + gamma_k (nb + 9)) * a + 1e-37;
          ck_assert_msg (fabs (got - yr[r]) <= tol,
              "%s n=%zu t=%zu r=%zu: packed %.9g, scalar %.9g (tolerance %.3g)",
              llm_type_name (wtype), n, t, r, got, yr[r], tol);
        }
      }
      g_free (y);
      g_free (yr);
      free (p);
      g_free (xq);
      g_free (w);
    }
}
END_TEST

/* Every output of kernel @k for rows [r0, r1) and the first @n_tok tokens
 * equals the reference's @want (all 128 tokens, @ldy apart) bit for bit,
 * and nothing else of y is written. */
static void
check_kernel_run (const Kernel *k, uint32_t wtype, size_t n, const uint8_t *p, size_t rows,
    size_t r0, size_t r1, const uint8_t *xq, size_t xs, size_t n_tok, const float *want,
    size_t ldy)
{
  float *y = g_new (float, n_tok * ldy);
  for (size_t i = 0; i < n_tok * ldy; i++)
    y[i] = -12345.0f;
  ck_assert (k->fn (n, p, rows, r0, r1, xq, xs, n_tok, y, ldy, NULL, 0));
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < ldy; r++) {
      const float got = y[t * ldy + r];
      if (r < r0 || r >= r1) {
        ck_assert_msg (got == -12345.0f, "%s %s: row %zu outside [%zu, %zu) written", k->name,
            llm_type_name (wtype), r, r0, r1);
        continue;
      }
      /* memcmp, so -0.0 and 0.0 (or NaNs) are told apart too. */
      ck_assert_msg (memcmp (&got, &want[t * ldy + r], sizeof got) == 0,
          "%s %s n=%zu rows=%zu n_tok=%zu: token %zu row %zu = %.9g, reference %.9g", k->name,
          llm_type_name (wtype), n, rows, n_tok, t, r, got, want[t * ldy + r]);
    }
  g_free (y);
}

START_TEST (test_simd_kernels_equal_the_packed_reference_for_every_batch)
{
  llm_test_rng_seed (5);
  const size_t max_tok = 128;
  size_t n_run = 0;
  for (size_t ti = 0; ti < N_OF (k_types); ti++) {
    const uint32_t wtype = k_types[ti];
    Kernel ks[3];
    const size_t nk = simd_kernels (wtype, ks);
    if (nk == 0)
      continue;
    for (size_t ri = 0; ri < N_OF (k_rows); ri++)
      for (size_t wi = 0; wi < N_OF (k_widths); wi++) {
        const size_t rows = k_rows[ri], n = k_widths[wi], ldy = rows + 3;
        size_t rb, xs;
        uint8_t *w = random_weights (wtype, rows, n, &rb);
        uint8_t *xq = random_acts (wtype, n, max_tok, &xs);
        uint8_t *p = pack_all (wtype, w, rb, rows, n);
        float *want = g_new (float, max_tok * ldy);
        ck_assert (llm_kx8_ref_fn (wtype) (n, p, rows, 0, rows, xq, xs, max_tok, want, ldy,
                NULL, 0));
        for (size_t i = 0; i < nk; i++) {
          for (size_t n_tok = 1; n_tok <= 20; n_tok++)
            check_kernel_run (&ks[i], wtype, n, p, rows, 0, rows, xq, xs, n_tok, want, ldy);
          check_kernel_run (&ks[i], wtype, n, p, rows, 0, rows, xq, xs, max_tok, want, ldy);
          /* Activation slices (ACT_BUDGET) whose last is too short to
           * unpack a row tile for, after one that unpacks it (n = 2816:
           * Q6_K 100 + 2 tokens, Q5_K 116 + 2). */
          check_kernel_run (&ks[i], wtype, n, p, rows, 0, rows, xq, xs, 102, want, ldy);
          check_kernel_run (&ks[i], wtype, n, p, rows, 0, rows, xq, xs, 118, want, ldy);
          /* A range from a later tile, ending inside one. */
          if (rows > 32)
            check_kernel_run (&ks[i], wtype, n, p, rows, 16, rows - 10, xq, xs, 7, want, ldy);
          n_run++;
        }
        g_free (want);
        free (p);
        g_free (xq);
        g_free (w);
      }
  }
  if (n_run == 0)
    LLM_TEST_SKIP ("no AVX2 or AVX-512 on this CPU");
}
END_TEST

/* The point of the layout: a row's result is the same whether its token
 * came alone (decode) or in a batch (batched decode, speculative verify,
 * prefill). */
START_TEST (test_batched_results_equal_single_token_results_bit_for_bit)
{
  llm_test_rng_seed (6);
  size_t n_run = 0;
  for (size_t ti = 0; ti < N_OF (k_types); ti++) {
    const uint32_t wtype = k_types[ti];
    Kernel ks[3];
    const size_t nk = simd_kernels (wtype, ks);
    const size_t rows = 100, n = 2816, n_tok = 37;
    size_t rb, xs;
    uint8_t *w = random_weights (wtype, rows, n, &rb);
    uint8_t *xq = random_acts (wtype, n, n_tok, &xs);
    uint8_t *p = pack_all (wtype, w, rb, rows, n);
    float *batch = g_new (float, n_tok * rows), *one = g_new (float, rows);
    for (size_t i = 0; i < nk; i++) {
      ck_assert (ks[i].fn (n, p, rows, 0, rows, xq, xs, n_tok, batch, rows, NULL, 0));
      for (size_t t = 0; t < n_tok; t++) {
        ck_assert (ks[i].fn (n, p, rows, 0, rows, xq + t * xs, xs, 1, one, rows, NULL, 0));
        ck_assert_msg (memcmp (one, batch + t * rows, rows * sizeof (float)) == 0,
            "%s %s: token %zu of %zu differs from the same token alone", ks[i].name,
            llm_type_name (wtype), t, n_tok);
      }
      n_run++;
    }
    g_free (batch);
    g_free (one);
    free (p);
    g_free (xq);
    g_free (w);
  }
  if (n_run == 0)
    LLM_TEST_SKIP ("no AVX2 or AVX-512 on this CPU");
}
END_TEST

/* All weight values and scales at their extremes against activations of
 * +-127: the int16 sums of the plain AVX2 kernels are at their limit
 * there, and any overflow or saturation would show against the
 * reference. */
START_TEST (test_extreme_codes_give_the_reference_bits)
{
  const size_t rows = 16, n = 512;
  size_t n_run = 0;
  for (size_t ti = 0; ti < N_OF (k_types); ti++) {
    const uint32_t wtype = k_types[ti];
    const size_t bb = block_bytes_of (wtype), rb = n / LLM_QK_K * bb;
    uint8_t *w = g_malloc (rows * rb);
    memset (w, 0xff, rows * rb);
    for (size_t r = 0; r < rows; r++)
      for (size_t b = 0; b < n / LLM_QK_K; b++) {
        uint8_t *blk = w + r * rb + b * bb;
        const uint16_t d = llm_fp16_from_f32 (0.001f * (float) (r + 1));
        if (wtype == LLM_TYPE_Q6_K) {
          LlmBlockQ6_K *q6 = (LlmBlockQ6_K *) blk;
          /* Half the rows at the most negative scale, half the most positive. */
          memset (q6->scales, r % 2 ? 0x80 : 0x7f, sizeof q6->scales);
          q6->d = d;
        } else {
          memcpy (blk, &d, 2);
          memcpy (blk + 2, &d, 2);
        }
      }
    /* Token 0: every code -127 (a constant block); token 1: one -127, the
     * rest +127. */
    const LlmCpuKernels *scalar = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
    const size_t xs = llm_matmul_act_bytes (wtype, n);
    uint8_t *xq = g_malloc (2 * xs);
    float *x = g_new (float, n);
    for (size_t i = 0; i < n; i++)
      x[i] = 1.0f;
    llm_matmul_convert (scalar, wtype, x, n, xq);
    for (size_t i = 0; i < n; i++)
      x[i] = i % LLM_QK_K == 0 ? 1.0f : -1.0f;
    llm_matmul_convert (scalar, wtype, x, n, xq + xs);
    ck_assert_int_eq (((LlmBlockQ8_K *) (xq + xs))->qs[1], 127);

    uint8_t *p = pack_all (wtype, w, rb, rows, n);
    float want[2 * 16];
    ck_assert (llm_kx8_ref_fn (wtype) (n, p, rows, 0, rows, xq, xs, 2, want, rows, NULL, 0));
    Kernel ks[3];
    const size_t nk = simd_kernels (wtype, ks);
    for (size_t i = 0; i < nk; i++, n_run++)
      check_kernel_run (&ks[i], wtype, n, p, rows, 0, rows, xq, xs, 2, want, rows);
    free (p);
    g_free (x);
    g_free (xq);
    g_free (w);
  }
  if (n_run == 0)
    LLM_TEST_SKIP ("no AVX2 or AVX-512 on this CPU");
}
END_TEST

START_TEST (test_threads_claiming_rows_give_the_same_bits_as_one)
{
  llm_test_rng_seed (7);
  LlmThreadPool *pool = llm_threadpool_new (3);
  ck_assert_ptr_nonnull (pool);
  /* 64 rows a step shrink to 32 and 16 near the end (claim.h). */
  const size_t steps[] = { 16, 48, 64 }, toks[] = { 1, 3, 20 };
  for (size_t ti = 0; ti < N_OF (k_types); ti++) {
    const uint32_t wtype = k_types[ti];
    Kernel ks[4];
    size_t nk = simd_kernels (wtype, ks);
    ks[nk++] = (Kernel) { "reference", llm_kx8_ref_fn (wtype) };
    const size_t rows = 100, n = 512, max_tok = 20;
    size_t rb, xs;
    uint8_t *w = random_weights (wtype, rows, n, &rb);
    uint8_t *xq = random_acts (wtype, n, max_tok, &xs);
    uint8_t *p = pack_all (wtype, w, rb, rows, n);
    float *want = g_new (float, max_tok * rows);
    ck_assert (llm_kx8_ref_fn (wtype) (n, p, rows, 0, rows, xq, xs, max_tok, want, rows, NULL,
            0));
    for (size_t i = 0; i < nk; i++)
      for (size_t si = 0; si < N_OF (steps); si++)
        for (size_t ni = 0; ni < N_OF (toks); ni++) {
          const size_t r0 = 16, n_tok = toks[ni], step = steps[si];
          float *y = g_new0 (float, n_tok * rows);
          ck_assert (llm_test_packed_shared (pool, ks[i].fn, n, p, rows, r0, rows, xq, xs,
                  n_tok, y, rows, step));
          for (size_t t = 0; t < n_tok; t++)
            ck_assert_msg (memcmp (y + t * rows + r0, want + t * rows + r0,
                    (rows - r0) * sizeof (float)) == 0, "%s %s step %zu, %zu tokens: token %zu",
                ks[i].name, llm_type_name (wtype), step, n_tok, t);
          g_free (y);
        }
    g_free (want);
    free (p);
    g_free (xq);
    g_free (w);
  }
  llm_threadpool_free (pool);
}
END_TEST

static Suite *
kquants_x8_suite (void)
{
  Suite *s = suite_create ("kquants-x8");
  TCase *tc = tcase_create ("layout");
  tcase_add_test (tc, test_packed_sizes_stay_within_three_percent_of_the_blocks);
  tcase_add_test (tc, test_unpack_row_gives_back_the_original_bytes);
  tcase_add_test (tc, test_unpack_row_gives_back_random_bytes);
  tcase_add_test (tc, test_packing_tile_ranges_separately_gives_the_same_bytes);
  suite_add_tcase (s, tc);
  tc = tcase_create ("kernels");
  tcase_set_timeout (tc, 600);
  tcase_add_test (tc, test_packed_reference_is_within_the_rounding_bound_of_the_scalar_dot);
  tcase_add_test (tc, test_simd_kernels_equal_the_packed_reference_for_every_batch);
  tcase_add_test (tc, test_batched_results_equal_single_token_results_bit_for_bit);
  tcase_add_test (tc, test_extreme_codes_give_the_reference_bits);
  tcase_add_test (tc, test_threads_claiming_rows_give_the_same_bits_as_one);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (kquants_x8_suite)
