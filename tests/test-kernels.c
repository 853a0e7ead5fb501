/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU kernels: element-wise ops against hand-computed values, the
 * quantizers' error bounds, K-quant block layouts built by hand, every
 * AVX2 kernel against the scalar reference, matmul against matvec, and the
 * thread pool. Random inputs come from a fixed seed. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm-check.h"
#include "backend.h"
#include "ggml-type.h"
#include "cpu/exp.h"
#include "cpu/fp16.h"
#include "cpu/isa.h"
#include "cpu/kquants.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/quantize.h"
#include "cpu/threadpool.h"
#include "cpu/claim.h"

/* --- helpers --- */

static int
rng_int (int lo, int hi)
{
  return lo + (int) (llm_test_rng_next () % (guint64) (hi - lo + 1));
}

static void
fill_random (float *x, size_t n, float scale)
{
  for (size_t i = 0; i < n; i++)
    x[i] = llm_test_rng_float () * scale;
}

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* The kernels the calls below run: the fastest this CPU has, or the
 * scalar reference that every fast one must agree with. */
static const LlmCpuKernels *kern;

static void
use_reference (bool reference)
{
  kern = reference ? llm_cpu_kernels (LLM_CPU_ISA_SCALAR) : llm_cpu_kernels_best ();
}

static bool
have_avx2 (void)
{
  use_reference (false);
  /* "avx2" or "avx512" (which has AVX2 too). */
  return llm_cpu_kernels_isa (kern) != LLM_CPU_ISA_SCALAR;
}

#define assert_close(got, want, tol) \
  ck_assert_msg (fabs ((double) (got) - (double) (want)) <= (tol), \
      "%s = %.9g, want %.9g (tolerance %.3g)", #got, (double) (got), (double) (want), \
      (double) (tol))

static size_t
row_bytes_of (uint32_t type, size_t n)
{
  uint64_t bytes = 0;
  ck_assert (llm_type_row_bytes (type, n, &bytes));
  return (size_t) bytes;
}

/* Random weight matrices of every supported type, built so that their
 * values are in the ranges real files hold. */

static uint16_t
random_half (float lo, float hi)
{
  return llm_fp16_from_f32 (lo + (hi - lo) * (llm_test_rng_float () * 0.5f + 0.5f));
}

static void
random_k_block (uint32_t type, void *block)
{
  uint8_t *bytes = block;
  uint32_t block_bytes = 0;
  ck_assert (llm_type_info (type, NULL, &block_bytes));
  for (uint32_t i = 0; i < block_bytes; i++)
    bytes[i] = (uint8_t) llm_test_rng_next ();
  switch (type) {
    case LLM_TYPE_Q4_K: {
      LlmBlockQ4_K *b = block;
      b->d = random_half (1e-3f, 1e-2f);
      b->dmin = random_half (1e-3f, 1e-2f);
      break;
    }
    case LLM_TYPE_Q5_K: {
      LlmBlockQ5_K *b = block;
      b->d = random_half (1e-3f, 1e-2f);
      b->dmin = random_half (1e-3f, 1e-2f);
      break;
    }
    case LLM_TYPE_Q6_K: {
      LlmBlockQ6_K *b = block;
      b->d = random_half (1e-3f, 1e-2f);
      break;
    }
    default:
      ck_abort_msg ("not a K-quant");
  }
}

/* @rows x @n weights of @type, row_bytes apart (returned, g_free). */
static uint8_t *
random_weights (uint32_t type, size_t rows, size_t n, size_t *row_bytes)
{
  *row_bytes = row_bytes_of (type, n);
  uint8_t *w = g_malloc0 (rows * *row_bytes);
  float *f = g_new (float, n);
  for (size_t r = 0; r < rows; r++) {
    uint8_t *row = w + r * *row_bytes;
    fill_random (f, n, 1.0f);
    switch (type) {
      case LLM_TYPE_F32:
        memcpy (row, f, n * sizeof (float));
        break;
      case LLM_TYPE_F16:
        llm_fp16_from_f32_row (f, (uint16_t *) row, n);
        break;
      case LLM_TYPE_BF16:
        llm_bf16_from_f32_row (f, (uint16_t *) row, n);
        break;
      case LLM_TYPE_Q8_0:
        llm_quantize_row_q8_0 (f, (LlmBlockQ8_0 *) row, n);
        break;
      case LLM_TYPE_Q4_0:
        llm_quantize_row_q4_0 (f, (LlmBlockQ4_0 *) row, n);
        break;
      case LLM_TYPE_Q4_1:
        llm_quantize_row_q4_1 (f, (LlmBlockQ4_1 *) row, n);
        break;
      case LLM_TYPE_Q5_0:
        llm_quantize_row_q5_0 (f, (LlmBlockQ5_0 *) row, n);
        break;
      case LLM_TYPE_Q5_1:
        llm_quantize_row_q5_1 (f, (LlmBlockQ5_1 *) row, n);
        break;
      default: {
        uint32_t block_bytes = 0;
        ck_assert (llm_type_info (type, NULL, &block_bytes));
        for (size_t b = 0; b < n / LLM_QK_K; b++)
          random_k_block (type, row + b * block_bytes);
      }
    }
  }
  g_free (f);
  return w;
}

/* Converted activations expanded back to floats: what the kernels really
 * multiply the weights by. */
static void
expand_activations (uint32_t wtype, const void *xq, size_t n, float *out)
{
  switch (llm_matmul_dot_type (wtype)) {
    case LLM_TYPE_F32:
      memcpy (out, xq, n * sizeof (float));
      break;
    case LLM_TYPE_F16:
      llm_fp16_to_f32_row (xq, out, n);
      break;
    case LLM_TYPE_BF16:
      llm_bf16_to_f32_row (xq, out, n);
      break;
    case LLM_TYPE_Q8_0:
      llm_dequantize_row_q8_0 (xq, out, n);
      break;
    case LLM_TYPE_Q8_1:
      llm_dequantize_row_q8_1 (xq, out, n);
      break;
    case LLM_TYPE_Q8_K:
      llm_dequantize_row_q8_K (xq, out, n);
      break;
    default:
      ck_abort_msg ("unexpected dot type");
  }
}

/* What the offset types' kernels add beyond the dequantized dot: they
 * take each block's sum of x as s = d_x * sum(qs) rounded to a half, where
 * a dot of the expanded operands has the unrounded d_half * sum(qs). So
 * sum over blocks of m_w * (s - d_x * sum(qs)); 0 for other types. */
static double
offset_rounding (uint32_t wtype, const uint8_t *row, const void *xq, size_t n)
{
  if (llm_matmul_dot_type (wtype) != LLM_TYPE_Q8_1)
    return 0.0;
  const size_t block = wtype == LLM_TYPE_Q4_1 ? sizeof (LlmBlockQ4_1) : sizeof (LlmBlockQ5_1);
  const LlmBlockQ8_1 *x = xq;
  double extra = 0.0;
  for (size_t b = 0; b < n / 32; b++) {
    /* Both offset blocks start with the halves d and m. */
    uint16_t m;
    memcpy (&m, row + b * block + 2, sizeof m);
    int sum = 0;
    for (int j = 0; j < 32; j++)
      sum += x[b].qs[j];
    extra += (double) llm_fp16_to_f32 (m) *
        ((double) llm_fp16_to_f32 (x[b].s) - (double) llm_fp16_to_f32 (x[b].d) * sum);
  }
  return extra;
}

/* --- element-wise ops --- */

START_TEST (test_rmsnorm_of_1_2_3_4_divides_by_root_mean_square)
{
  const float x[4] = { 1, 2, 3, 4 };
  float y[4];
  /* mean(x^2) = 30 / 4 = 7.5; 1 / sqrt(7.5) = 0.36514837167 */
  llm_rmsnorm (y, x, NULL, 4, 0.0f);
  assert_close (y[0], 0.3651483717, 1e-6);
  assert_close (y[1], 0.7302967433, 1e-6);
  assert_close (y[2], 1.0954451150, 1e-6);
  assert_close (y[3], 1.4605934867, 1e-6);

  const float w[4] = { 1.0f, 0.5f, -2.0f, 0.0f };
  llm_rmsnorm (y, x, w, 4, 0.0f);
  assert_close (y[0], 0.3651483717, 1e-6);
  assert_close (y[1], 0.3651483717, 1e-6);
  assert_close (y[2], -2.1908902300, 1e-6);
  ck_assert (y[3] == 0.0f);

  /* eps joins the mean before the root: 1 / sqrt(7.5 + 0.5) = 0.35355339 */
  llm_rmsnorm (y, x, NULL, 4, 0.5f);
  assert_close (y[0], 0.3535533906, 1e-6);
}
END_TEST

START_TEST (test_rmsnorm_may_write_over_its_input)
{
  float x[4] = { 1, 2, 3, 4 };
  llm_rmsnorm (x, x, NULL, 4, 0.0f);
  assert_close (x[3], 1.4605934867, 1e-6);
}
END_TEST

START_TEST (test_rmsnorm_sums_every_element_at_every_length)
{
  /* Squares of halves sum exactly in double in any order, so the scale is
   * known to the bit: a length's elements dropped or counted twice (the
   * sixteen running sums, the tail after them) change it. */
  static const guint lengths[] = { 1, 3, 15, 16, 17, 31, 32, 33, 100, 1024, 1031 };
  float x[1031], y[1031];
  for (guint k = 0; k < G_N_ELEMENTS (lengths); k++) {
    const guint n = lengths[k];
    for (guint i = 0; i < n; i++)
      x[i] = 0.5f * (float) ((int) ((i * 7 + k) % 13) - 6);
    x[n - 1] = 3.0f;  /* never all zero */
    double sum = 0.0;
    for (guint i = 0; i < n; i++)
      sum += (double) x[i] * x[i];
    const float scale = 1.0f / sqrtf ((float) (sum / (double) n) + 1e-5f);
    llm_rmsnorm (y, x, NULL, n, 1e-5f);
    for (guint i = 0; i < n; i++)
      ck_assert_msg (y[i] == x[i] * scale, "length %u, element %u: %.9g, want %.9g", n, i,
          y[i], x[i] * scale);
  }
}
END_TEST

START_TEST (test_rmsnorm_rows_give_each_row_its_own_bits)
{
  /* Every group size and the rows left over, values over 30 binary
   * orders of magnitude: each row as llm_rmsnorm gives it alone (a row
   * read from the wrong place, or a scale from another row's sum, shows). */
  enum { N = 300, ROWS = 9 };
  g_autoptr (GRand) rand = g_rand_new_with_seed (7);
  g_autofree float *x = g_new (float, N * ROWS);
  g_autofree float *w = g_new (float, N);
  for (guint i = 0; i < N * ROWS; i++)
    x[i] = (float) (g_rand_double_range (rand, -1.0, 1.0)
        * pow (2.0, g_rand_int_range (rand, -15, 15)));
  for (guint i = 0; i < N; i++)
    w[i] = (float) g_rand_double_range (rand, -2.0, 2.0);
  g_autofree float *want = g_new (float, N * ROWS);
  g_autofree float *got = g_new (float, N * ROWS);
  for (guint rows = 1; rows <= ROWS; rows++)
    for (int with_w = 0; with_w < 2; with_w++) {
      for (guint r = 0; r < rows; r++)
        llm_rmsnorm (want + r * N, x + r * N, with_w ? w : NULL, N, 1e-5f);
      llm_rmsnorm_rows (got, x, with_w ? w : NULL, N, rows, 1e-5f);
      ck_assert_msg (memcmp (got, want, rows * N * sizeof (float)) == 0,
          "%u rows, weight %d: not llm_rmsnorm's bits", rows, with_w);
      /* In place too. */
      memcpy (got, x, rows * N * sizeof (float));
      llm_rmsnorm_rows (got, got, with_w ? w : NULL, N, rows, 1e-5f);
      ck_assert (memcmp (got, want, rows * N * sizeof (float)) == 0);
    }
}
END_TEST

START_TEST (test_softmax_of_1_2_3_matches_hand_values)
{
  float x[3] = { 1, 2, 3 };
  llm_softmax (x, 3);
  assert_close (x[0], 0.0900305732, 1e-7);
  assert_close (x[1], 0.2447284711, 1e-7);
  assert_close (x[2], 0.6652409558, 1e-7);
}
END_TEST

START_TEST (test_softmax_of_huge_logits_does_not_overflow)
{
  float x[4] = { 1000.0f, 1000.0f, -1000.0f, -INFINITY };
  llm_softmax (x, 4);
  ck_assert (x[0] == 0.5f && x[1] == 0.5f);
  ck_assert (x[2] == 0.0f && x[3] == 0.0f);
}
END_TEST

START_TEST (test_swiglu_is_silu_of_gate_times_up)
{
  const float gate[3] = { 0.0f, 1.0f, -3.0f };
  const float up[3] = { 5.0f, 2.0f, 0.5f };
  float y[3];
  llm_swiglu (y, gate, up, 3);
  ck_assert (y[0] == 0.0f);
  assert_close (y[1], 1.4621171573, 1e-6); /* 2 / (1 + e^-1) */
  assert_close (y[2], -0.0711388098, 1e-7); /* 0.5 * -3 / (1 + e^3) */
}
END_TEST

/* The softmax's and SiLU's exp: within 2 ulp of exp over the whole range
 * where it is a normal float, every float tried in steps of 61 bits. */
START_TEST (test_exp_is_within_two_ulp_of_exp)
{
  double worst = 0;
  guint64 tried = 0;
  for (guint32 sign = 0; sign < 2; sign++)
    for (guint32 b = 0; b < 0x42b00000u; b += 61) {
      const guint32 bits = b | sign << 31;
      float x;
      memcpy (&x, &bits, sizeof x);
      if (x <= LLM_EXP_MIN || x > LLM_EXP_MAX)
        continue;
      const double want = exp ((double) x);
      /* One ulp of the result: 2^(exponent - 23). */
      int e;
      frexp (want, &e);
      const double ulp = ldexp (1.0, e - 24);
      worst = MAX (worst, fabs (llm_exp_ref (x) - want) / ulp);
      tried++;
    }
  ck_assert_uint_gt (tried, 10000000);
  ck_assert_msg (worst <= 2.0, "%.2f ulp", worst);
}
END_TEST

START_TEST (test_exp_limits_are_zero_inf_and_nan)
{
  ck_assert (llm_exp_ref (0.0f) == 1.0f && llm_exp_ref (-0.0f) == 1.0f);
  ck_assert (llm_exp_ref (-INFINITY) == 0.0f && llm_exp_ref (-88.0f) == 0.0f);
  ck_assert (llm_exp_ref (INFINITY) == INFINITY && llm_exp_ref (88.5f) == INFINITY);
  ck_assert (isnan (llm_exp_ref (NAN)));
  /* Just inside either end: normal floats, close to exp. */
  const float lo = nextafterf (LLM_EXP_MIN, 0.0f);
  ck_assert (isnormal (llm_exp_ref (lo)));
  ck_assert_float_eq_tol (llm_exp_ref (LLM_EXP_MAX) / expf (LLM_EXP_MAX), 1.0f, 3e-7f);
}
END_TEST

/* The vector SwiGLU (and so its exp) is the reference's bit for bit, over
 * lengths that leave every tail and values that reach both of exp's
 * limits. */
START_TEST (test_vector_swiglu_matches_reference)
{
  for (LlmCpuIsa isa = LLM_CPU_ISA_AVX2; isa < LLM_CPU_N_ISA; isa++) {
    const LlmCpuKernels *kern = llm_cpu_kernels (isa);
    if (kern == NULL)
      continue;
    for (size_t n = 1; n <= 67; n += 3) {
      float gate[67], up[67], want[67], got[67];
      fill_random (gate, n, 24.0f);
      fill_random (up, n, 3.0f);
      gate[0] = n % 2 ? 95.0f : -95.0f;
      gate[n - 1] = n % 3 ? -0.0f : 1e-30f;
      llm_swiglu (want, gate, up, n);
      llm_cpu_swiglu (kern, got, gate, up, n);
      ck_assert_msg (memcmp (want, got, n * sizeof (float)) == 0, "%s, n = %zu",
          llm_cpu_isa_name (isa), n);
    }
  }
}
END_TEST

START_TEST (test_add_adds_elementwise)
{
  const float a[3] = { 1.0f, -2.0f, 0.25f };
  const float b[3] = { 0.5f, 2.0f, 0.25f };
  float y[3];
  llm_add (y, a, b, 3);
  ck_assert (y[0] == 1.5f && y[1] == 0.0f && y[2] == 0.5f);
}
END_TEST

/* head_dim 4, base 10000: pair 0 turns by pos * 1, pair 1 by pos * 0.01. */
START_TEST (test_rope_at_pos_1_rotates_adjacent_pairs)
{
  float x[8] = { 1, 2, 3, 4, 1, 2, 3, 4 };
  llm_rope (x, 2, 4, 4, 1, 10000.0f, 1.0f, 0);
  /* (1, 2) by 1 rad and (3, 4) by 0.01 rad, in both heads. */
  const double want[4] = { -1.1426396637, 1.9220755965, 2.9598506679, 4.0297995017 };
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 4; i++)
      assert_close (x[4 * h + i], want[i], 2e-6);
}
END_TEST

START_TEST (test_rope_neox_rotates_halves)
{
  float x[4] = { 1, 2, 3, 4 };
  llm_rope (x, 1, 4, 4, 1, 10000.0f, 1.0f, 1);
  /* (1, 3) by 1 rad, (2, 4) by 0.01 rad. */
  assert_close (x[0], -1.9841106486, 2e-6);
  assert_close (x[1], 1.9599006675, 2e-6);
  assert_close (x[2], 2.4623779024, 2e-6);
  assert_close (x[3], 4.0197996683, 2e-6);
}
END_TEST

START_TEST (test_rope_at_pos_0_is_identity_and_leaves_unrotated_dims)
{
  float x[6] = { 1, 2, 3, 4, 5, 6 };
  llm_rope (x, 1, 6, 6, 0, 10000.0f, 1.0f, 0);
  for (int i = 0; i < 6; i++)
    ck_assert (x[i] == (float) (i + 1));

  /* n_rot 2 of head_dim 6: only (x0, x1) turns, by pos * freq_scale. */
  llm_rope (x, 1, 6, 2, 4, 10000.0f, 0.25f, 0);
  assert_close (x[0], cos (1.0) - 2 * sin (1.0), 2e-6);
  assert_close (x[1], sin (1.0) + 2 * cos (1.0), 2e-6);
  for (int i = 2; i < 6; i++)
    ck_assert (x[i] == (float) (i + 1));
}
END_TEST

START_TEST (test_rope_angle_is_ggml_running_float_product)
{
  /* Pair i of head_dim 128 at position 1000 turns by the float product
   * 1000 * s * s * ..., s = powf (base, -2/128), not by 1000 * base^(-2i/d)
   * in double: the two differ in the last bits. */
  float x[128];
  for (int i = 0; i < 128; i++)
    x[i] = (i % 2) ? 0.0f : 1.0f;
  llm_rope (x, 1, 128, 128, 1000, 10000.0f, 1.0f, 0);
  const float s = powf (10000.0f, -2.0f / 128.0f);
  float theta = 1000.0f;
  for (int i = 0; i < 64; i++) {
    ck_assert_msg (x[2 * i] == cosf (theta) && x[2 * i + 1] == sinf (theta), "pair %d", i);
    theta *= s;
  }
}
END_TEST

/* Random head values, the same for every call of a test. */
static void
rope_input (float *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    x[i] = sinf (0.37f * (float) i + 0.11f) * 3.0f;
}

/* Angles computed once and then applied give llm_rope's bits, in both
 * pairings, for every n_rot (odd, under and over head_dim) and at
 * positions where the running product has drifted from pos * base^-k. */
START_TEST (test_rope_angles_then_turn_equal_rope_bit_for_bit)
{
  enum { HEADS = 3, HD = 64 };
  const size_t n_rots[] = { 64, 32, 33, 2, 80, 0, 1 };
  const int64_t positions[] = { 0, 1, 17, 1000, 70000 };
  float want[HEADS * HD], got[HEADS * HD], cs[HD];
  for (int neox = 0; neox < 2; neox++)
    for (size_t r = 0; r < G_N_ELEMENTS (n_rots); r++)
      for (size_t p = 0; p < G_N_ELEMENTS (positions); p++) {
        const size_t per = llm_rope_angles_floats (HD, n_rots[r]);
        ck_assert (per <= HD && per % 2 == 0);
        rope_input (want, HEADS * HD);
        memcpy (got, want, sizeof got);
        llm_rope (want, HEADS, HD, n_rots[r], positions[p], 500000.0f, 0.5f, neox);
        llm_rope_angles (HD, n_rots[r], positions[p], 500000.0f, 0.5f, cs);
        llm_rope_turn (got, HEADS, HD, n_rots[r], cs, neox);
        ck_assert_msg (memcmp (got, want, sizeof got) == 0, "neox %d n_rot %zu pos %" G_GINT64_FORMAT,
            neox, n_rots[r], positions[p]);
      }
  /* Wide heads: llm_rope takes its angles in chunks of 64 pairs, the
   * running product carried across. */
  enum { WIDE = 320 };
  float wide_want[2 * WIDE], wide_got[2 * WIDE], wide_cs[WIDE];
  const size_t wide_rots[] = { 320, 258, 130 };
  for (int neox = 0; neox < 2; neox++)
    for (size_t r = 0; r < G_N_ELEMENTS (wide_rots); r++) {
      rope_input (wide_want, 2 * WIDE);
      memcpy (wide_got, wide_want, sizeof wide_got);
      llm_rope (wide_want, 2, WIDE, wide_rots[r], 4321, 10000.0f, 1.0f, neox);
      llm_rope_angles (WIDE, wide_rots[r], 4321, 10000.0f, 1.0f, wide_cs);
      llm_rope_turn (wide_got, 2, WIDE, wide_rots[r], wide_cs, neox);
      ck_assert_msg (memcmp (wide_got, wide_want, sizeof wide_got) == 0, "neox %d n_rot %zu",
          neox, wide_rots[r]);
    }
}
END_TEST

/* The CPU backend keeps the angles of the last positions it turned, for
 * the next layers: calls whose positions, row count or frequencies
 * change must not reuse them. Each call equals llm_rope row by row. */
START_TEST (test_backend_rope_reuses_angles_only_for_the_same_positions)
{
  enum { HEADS = 2, HD = 16, ROWS = 6 };
  g_autoptr (GError) error = NULL;
  LlmBackend *be = llm_backend_cpu_new (LLM_CPU_KERNELS_BEST, 2, &error);
  ck_assert_msg (be != NULL, "%s", error ? error->message : "");
  LlmThreadPool *pool = llm_threadpool_new (2);
  LlmBackendQueue *q = llm_backend_cpu_queue (pool);
  const LlmRopeParams base = { HD, 10000.0f, 1.0f, FALSE };
  const LlmRopeParams scaled = { HD, 10000.0f, 0.25f, FALSE };
  const LlmRopeParams other_base = { HD, 1000000.0f, 0.25f, TRUE };
  const LlmRopeParams fewer = { HD / 2, 1000000.0f, 0.25f, TRUE };
  const struct {
    guint n;
    guint32 pos[ROWS];
    const LlmRopeParams *rope;
  } calls[] = {
    { ROWS, { 5, 6, 7, 8, 9, 10 }, &base },
    { ROWS, { 5, 6, 7, 8, 9, 10 }, &base },     /* reused */
    { ROWS, { 5, 6, 7, 8, 9, 11 }, &base },     /* the last row moved */
    { 4, { 5, 6, 7, 8 }, &base },               /* fewer rows (a prefix) */
    { 1, { 5 }, &base },                        /* a decode step (inline) */
    { 1, { 5 }, &scaled },
    { 1, { 5 }, &other_base },
    { 1, { 5 }, &fewer },
    { ROWS, { 0, 1, 2, 3, 4, 5 }, &base },
  };
  float x[ROWS * HEADS * HD], want[ROWS * HEADS * HD];
  for (gsize c = 0; c < G_N_ELEMENTS (calls); c++) {
    const guint n = calls[c].n;
    rope_input (x, n * HEADS * HD);
    memcpy (want, x, sizeof x);
    be->ops->rope (be, q, x, n, HEADS, HD, calls[c].pos, calls[c].rope);
    for (guint t = 0; t < n; t++)
      llm_rope (want + t * HEADS * HD, HEADS, HD, calls[c].rope->n_rot, calls[c].pos[t],
          calls[c].rope->freq_base, calls[c].rope->freq_scale, calls[c].rope->neox);
    ck_assert_msg (memcmp (x, want, n * HEADS * HD * sizeof (float)) == 0, "call %zu", c);
  }
  llm_threadpool_free (pool);
  llm_backend_unref (be);
}
END_TEST

/* --- quantizers --- */

START_TEST (test_q8_0_roundtrip_error_is_within_half_a_step)
{
  llm_test_rng_seed (1);
  float x[288], y[288];
  LlmBlockQ8_0 q[288 / 32];
  fill_random (x, 288, 3.0f);
  llm_quantize_row_q8_0 (x, q, 288);
  llm_dequantize_row_q8_0 (q, y, 288);
  for (int b = 0; b < 288 / 32; b++) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
      amax = fmaxf (amax, fabsf (x[32 * b + j]));
    const double d = amax / 127.0;
    /* Half a step, plus d rounded to half precision (2^-11 relative) times
     * at most 127 steps. */
    for (int j = 0; j < 32; j++)
      assert_close (y[32 * b + j], x[32 * b + j], 0.5 * d + 127 * d / 2048.0 + 1e-7);
  }
}
END_TEST

START_TEST (test_q4_0_roundtrip_error_is_within_one_step)
{
  llm_test_rng_seed (2);
  float x[288], y[288];
  LlmBlockQ4_0 q[288 / 32];
  fill_random (x, 288, 3.0f);
  llm_quantize_row_q4_0 (x, q, 288);
  llm_dequantize_row_q4_0 (q, y, 288);
  for (int b = 0; b < 288 / 32; b++) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
      amax = fmaxf (amax, fabsf (x[32 * b + j]));
    /* The step is amax / 8; only the clamped +8 end is a whole step off. */
    const double d = amax / 8.0;
    for (int j = 0; j < 32; j++)
      assert_close (y[32 * b + j], x[32 * b + j], d * (1.0 + 8.0 / 2048.0) + 1e-7);
  }
}
END_TEST

/* Q4_1, Q5_1: an offset grid from the block's minimum, step (max - min) /
 * 15 or 31; half a step off at most, plus the rounding of d (times up to
 * 31 steps) and of m to halves. Blocks get offsets so m is far from 0. */
static void
check_offset_roundtrip (uint32_t type, int levels)
{
  float x[288], y[288];
  fill_random (x, 288, 3.0f);
  for (int i = 0; i < 288; i++)
    x[i] += (float) (i / 32 % 3) * 4.0f - 4.0f;
  uint8_t q[288 / 32 * sizeof (LlmBlockQ5_1)];
  if (type == LLM_TYPE_Q4_1) {
    llm_quantize_row_q4_1 (x, (LlmBlockQ4_1 *) q, 288);
    llm_dequantize_row_q4_1 ((const LlmBlockQ4_1 *) q, y, 288);
  } else {
    llm_quantize_row_q5_1 (x, (LlmBlockQ5_1 *) q, 288);
    llm_dequantize_row_q5_1 ((const LlmBlockQ5_1 *) q, y, 288);
  }
  for (int b = 0; b < 288 / 32; b++) {
    float min = x[32 * b], max = x[32 * b];
    for (int j = 0; j < 32; j++) {
      min = fminf (min, x[32 * b + j]);
      max = fmaxf (max, x[32 * b + j]);
    }
    const double d = (max - min) / levels;
    for (int j = 0; j < 32; j++)
      assert_close (y[32 * b + j], x[32 * b + j],
          0.5 * d + levels * d / 2048.0 + fabs (min) / 2048.0 + 1e-6);
  }
}

START_TEST (test_q4_1_and_q5_1_roundtrip_error_is_within_half_a_step)
{
  llm_test_rng_seed (4);
  check_offset_roundtrip (LLM_TYPE_Q4_1, 15);
  check_offset_roundtrip (LLM_TYPE_Q5_1, 31);
}
END_TEST

START_TEST (test_q5_0_roundtrip_error_is_within_one_step)
{
  llm_test_rng_seed (5);
  float x[288], y[288];
  LlmBlockQ5_0 q[288 / 32];
  fill_random (x, 288, 3.0f);
  llm_quantize_row_q5_0 (x, q, 288);
  llm_dequantize_row_q5_0 (q, y, 288);
  for (int b = 0; b < 288 / 32; b++) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
      amax = fmaxf (amax, fabsf (x[32 * b + j]));
    /* As Q4_0 with 32 levels: the step is amax / 16, and only the clamped
     * +16 end is a whole step off. */
    const double d = amax / 16.0;
    for (int j = 0; j < 32; j++)
      assert_close (y[32 * b + j], x[32 * b + j], d * (1.0 + 16.0 / 2048.0) + 1e-7);
  }
}
END_TEST

START_TEST (test_q8_1_sum_is_taken_from_the_rounded_codes_and_unrounded_scale)
{
  /* amax 127 gives d = 1 (exact), so the codes are the values, ties going
   * to even: 2.5 -> 2, -3.5 -> -4, 0.5 -> 0. */
  float x[32] = { 127.0f, 2.5f, -3.5f, 0.5f, 1.0f };
  LlmBlockQ8_1 q;
  llm_quantize_row_q8_1_act (x, &q, 32);
  ck_assert_int_eq (q.qs[1], 2);
  ck_assert_int_eq (q.qs[2], -4);
  ck_assert_int_eq (q.qs[3], 0);
  ck_assert (llm_fp16_to_f32 (q.d) == 1.0f);
  ck_assert (llm_fp16_to_f32 (q.s) == 127.0f + 2.0f - 4.0f + 0.0f + 1.0f);
  /* d = 2.9 / 127 is not a half; s is d * sum, rounded once, not
   * half(d) * sum (the two differ here: 67.25 and 67.1875). */
  for (int j = 0; j < 32; j++)
    x[j] = j % 2 ? 2.9f : 1.3f;
  llm_quantize_row_q8_1_act (x, &q, 32);
  int sum = 0;
  for (int j = 0; j < 32; j++)
    sum += q.qs[j];
  ck_assert_uint_eq (q.s, llm_fp16_from_f32 ((float) sum * (2.9f / 127.0f)));
  ck_assert_uint_ne (q.s, llm_fp16_from_f32 ((float) sum * llm_fp16_to_f32 (q.d)));
}
END_TEST

START_TEST (test_q8_K_roundtrip_error_is_within_half_a_step_and_bsums_add_up)
{
  llm_test_rng_seed (3);
  float x[768], y[768];
  LlmBlockQ8_K q[3];
  fill_random (x, 768, 5.0f);
  x[300] = 9.0f; /* the extreme of block 1 is positive... */
  x[600] = -9.0f; /* ...and of block 2 negative */
  llm_quantize_row_q8_K (x, q, 768);
  llm_dequantize_row_q8_K (q, y, 768);
  ck_assert_int_eq (q[1].qs[300 - 256], -127);
  ck_assert_int_eq (q[2].qs[600 - 512], -127);
  ck_assert (q[1].d < 0.0f && q[2].d > 0.0f);
  for (int b = 0; b < 3; b++) {
    for (int j = 0; j < 256; j++)
      assert_close (y[256 * b + j], x[256 * b + j],
          0.5 * fabs (q[b].d) + 2e-7 * fabs (x[256 * b + j]) + 1e-9);
    for (int g = 0; g < 16; g++) {
      int sum = 0;
      for (int i = 0; i < 16; i++)
        sum += q[b].qs[16 * g + i];
      ck_assert_int_eq (q[b].bsums[g], sum);
    }
  }
}
END_TEST

START_TEST (test_q8_K_of_zeros_is_all_zero)
{
  float x[256] = { 0 };
  LlmBlockQ8_K q;
  memset (&q, 0x55, sizeof q);
  llm_quantize_row_q8_K (x, &q, 256);
  ck_assert (q.d == 0.0f);
  for (int i = 0; i < 256; i++)
    ck_assert_int_eq (q.qs[i], 0);
  for (int i = 0; i < 16; i++)
    ck_assert_int_eq (q.bsums[i], 0);
}
END_TEST

START_TEST (test_q8_K_rounds_ties_to_even)
{
  /* iscale = -127 / -127 = 1, so values land exactly on x. */
  float x[256] = { 0 };
  x[0] = -127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -0.5f;
  LlmBlockQ8_K q;
  llm_quantize_row_q8_K (x, &q, 256);
  ck_assert (q.d == 1.0f);
  ck_assert_int_eq (q.qs[1], 2);
  ck_assert_int_eq (q.qs[2], 4);
  ck_assert_int_eq (q.qs[3], 0);
}
END_TEST

/* --- K-quant layouts, built by hand --- */

/* The inverse of llm_k4_scale_min: 6-bit scales and mins into 12 bytes. */
static void
pack_k4_scales (const uint8_t sc[8], const uint8_t m[8], uint8_t packed[12])
{
  memset (packed, 0, 12);
  for (int j = 0; j < 8; j++) {
    if (j < 4) {
      packed[j] = sc[j];
      packed[j + 4] = m[j];
    } else {
      packed[j + 4] = (uint8_t) ((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
      packed[j - 4] |= (uint8_t) ((sc[j] >> 4) << 6);
      packed[j] |= (uint8_t) ((m[j] >> 4) << 6);
    }
  }
}

START_TEST (test_k4_scales_unpack_all_eight_sub_blocks)
{
  const uint8_t sc[8] = { 0, 63, 17, 32, 5, 48, 63, 21 };
  const uint8_t m[8] = { 63, 1, 40, 16, 59, 2, 0, 33 };
  uint8_t packed[12];
  pack_k4_scales (sc, m, packed);
  for (int j = 0; j < 8; j++) {
    uint8_t s, mm;
    llm_k4_scale_min (j, packed, &s, &mm);
    ck_assert_int_eq (s, sc[j]);
    ck_assert_int_eq (mm, m[j]);
  }
}
END_TEST

START_TEST (test_q4_K_dequantizes_a_hand_built_block)
{
  LlmBlockQ4_K b;
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; j++) {
    sc[j] = (uint8_t) (10 + 7 * j);
    m[j] = (uint8_t) (63 - 5 * j);
  }
  pack_k4_scales (sc, m, b.scales);
  b.d = llm_fp16_from_f32 (0.5f);
  b.dmin = llm_fp16_from_f32 (0.25f);
  /* Value k gets nibble (k * 7) % 16; it lives in byte 32 (k / 64) + k % 32,
   * low nibble for k % 64 < 32. */
  memset (b.qs, 0, sizeof b.qs);
  for (int k = 0; k < 256; k++) {
    const int byte = 32 * (k / 64) + k % 32;
    b.qs[byte] |= (uint8_t) (((k * 7) % 16) << ((k % 64) < 32 ? 0 : 4));
  }
  float y[256];
  llm_dequantize_row_q4_K (&b, y, 256);
  for (int k = 0; k < 256; k++) {
    const float want = 0.5f * sc[k / 32] * ((k * 7) % 16) - 0.25f * m[k / 32];
    ck_assert_msg (y[k] == want, "value %d: %g, want %g", k, y[k], want);
  }
}
END_TEST

START_TEST (test_q5_K_dequantizes_a_hand_built_block)
{
  LlmBlockQ5_K b;
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; j++) {
    sc[j] = (uint8_t) (60 - 3 * j);
    m[j] = (uint8_t) (8 * j);
  }
  pack_k4_scales (sc, m, b.scales);
  b.d = llm_fp16_from_f32 (0.125f);
  b.dmin = llm_fp16_from_f32 (1.0f);
  /* Value k gets q = (k * 11) % 32: low nibble as in Q4_K, fifth bit in
   * bit 2 (k / 64) (+1 for the upper 32 of the 64) of qh[k % 32]. */
  memset (b.qs, 0, sizeof b.qs);
  memset (b.qh, 0, sizeof b.qh);
  for (int k = 0; k < 256; k++) {
    const int q = (k * 11) % 32;
    const int upper = (k % 64) >= 32;
    b.qs[32 * (k / 64) + k % 32] |= (uint8_t) ((q & 15) << (upper ? 4 : 0));
    if (q & 16)
      b.qh[k % 32] |= (uint8_t) (1u << (2 * (k / 64) + upper));
  }
  float y[256];
  llm_dequantize_row_q5_K (&b, y, 256);
  for (int k = 0; k < 256; k++) {
    const float want = 0.125f * sc[k / 32] * ((k * 11) % 32) - 1.0f * m[k / 32];
    ck_assert_msg (y[k] == want, "value %d: %g, want %g", k, y[k], want);
  }
}
END_TEST

/* Q6_K: value k = 128 h + 32 g + l (g 0..3, l 0..31) keeps its low nibble
 * in ql[64 h + 32 (g & 1) + l] (high nibble when g >= 2) and its top two
 * bits in bits 2g..2g+1 of qh[32 h + l]. */
static void
pack_q6_K (const int q[256], LlmBlockQ6_K *b)
{
  memset (b->ql, 0, sizeof b->ql);
  memset (b->qh, 0, sizeof b->qh);
  for (int k = 0; k < 256; k++) {
    const int h = k / 128, g = (k % 128) / 32, l = k % 32;
    const int u = q[k] + 32;
    b->ql[64 * h + 32 * (g & 1) + l] |= (uint8_t) ((u & 15) << (g >= 2 ? 4 : 0));
    b->qh[32 * h + l] |= (uint8_t) ((u >> 4) << (2 * g));
  }
}

START_TEST (test_q6_K_dequantizes_a_hand_built_block)
{
  LlmBlockQ6_K b;
  int q[256];
  for (int k = 0; k < 256; k++)
    q[k] = (k * 13) % 64 - 32;
  pack_q6_K (q, &b);
  for (int j = 0; j < 16; j++)
    b.scales[j] = (int8_t) (j * 17 - 128);
  b.d = llm_fp16_from_f32 (0.25f);
  float y[256];
  llm_dequantize_row_q6_K (&b, y, 256);
  for (int k = 0; k < 256; k++) {
    const float want = 0.25f * b.scales[k / 16] * q[k];
    ck_assert_msg (y[k] == want, "value %d: %g, want %g", k, y[k], want);
  }
}
END_TEST

/* --- dot products with known values --- */

START_TEST (test_q8_0_dot_of_two_known_blocks)
{
  /* w = 0.5 * (j - 16), x = 0.25 * 2: sum (j - 16) * 2 = -32, times
   * 0.5 * 0.25 gives -4 exactly, in both kernels. */
  LlmBlockQ8_0 w, x;
  w.d = llm_fp16_from_f32 (0.5f);
  x.d = llm_fp16_from_f32 (0.25f);
  for (int j = 0; j < 32; j++) {
    w.qs[j] = (int8_t) (j - 16);
    x.qs[j] = 2;
  }
  for (int pass = 0; pass < 2; pass++) {
    use_reference (pass == 0);
    float y = 0.0f;
    llm_matvec (kern, LLM_TYPE_Q8_0, &w, sizeof w, 32, 0, 1, &x, &y);
    ck_assert_msg (y == -4.0f, "%s: %g", llm_cpu_kernels_name (kern), y);
  }
  use_reference (false);
}
END_TEST

START_TEST (test_q4_0_dot_of_two_known_blocks)
{
  /* Nibble j of the low half is j (value j - 8), of the high half 15 - j
   * (value 7 - j); x is 1 on the low half, 3 on the high half:
   * sum (j - 8) + 3 sum (7 - j) = -8 + 3 * -8 = -32, times 2 * 0.5. */
  LlmBlockQ4_0 w;
  LlmBlockQ8_0 x;
  w.d = llm_fp16_from_f32 (2.0f);
  x.d = llm_fp16_from_f32 (0.5f);
  for (int j = 0; j < 16; j++) {
    w.qs[j] = (uint8_t) (j | ((15 - j) << 4));
    x.qs[j] = 1;
    x.qs[j + 16] = 3;
  }
  for (int pass = 0; pass < 2; pass++) {
    use_reference (pass == 0);
    float y = 0.0f;
    llm_matvec (kern, LLM_TYPE_Q4_0, &w, sizeof w, 32, 0, 1, &x, &y);
    ck_assert_msg (y == -32.0f, "%s: %g", llm_cpu_kernels_name (kern), y);
  }
  use_reference (false);
}
END_TEST

START_TEST (test_f16_activations_are_rounded_to_half_first)
{
  /* 1 + 2^-12 is not a half: it rounds to 1, so the dot with a weight of
   * 1 is exactly 1 in every kernel. */
  const uint16_t w = llm_fp16_from_f32 (1.0f);
  const float x = 1.0f + 1.0f / 4096.0f;
  uint16_t xq;
  ck_assert_uint_eq (llm_matmul_act_bytes (LLM_TYPE_F16, 1), 2);
  llm_matmul_convert (kern, LLM_TYPE_F16, &x, 1, &xq);
  for (int pass = 0; pass < 2; pass++) {
    use_reference (pass == 0);
    float y = 0.0f;
    llm_matvec (kern, LLM_TYPE_F16, &w, 2, 1, 0, 1, &xq, &y);
    ck_assert (y == 1.0f);
  }
  use_reference (false);
}
END_TEST

START_TEST (test_dot_types_and_activation_sizes_follow_ggml)
{
  const struct {
    uint32_t wtype, dot_type;
    size_t n, bytes;
  } cases[] = {
    { LLM_TYPE_F32, LLM_TYPE_F32, 7, 28 },
    { LLM_TYPE_F16, LLM_TYPE_F16, 7, 14 },
    { LLM_TYPE_BF16, LLM_TYPE_BF16, 7, 14 },
    { LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 64, 68 },
    { LLM_TYPE_Q4_0, LLM_TYPE_Q8_0, 96, 102 },
    { LLM_TYPE_Q5_0, LLM_TYPE_Q8_0, 64, 68 },
    { LLM_TYPE_Q4_1, LLM_TYPE_Q8_1, 64, 72 },
    { LLM_TYPE_Q5_1, LLM_TYPE_Q8_1, 96, 108 },
    { LLM_TYPE_Q4_K, LLM_TYPE_Q8_K, 512, 584 },
    { LLM_TYPE_Q5_K, LLM_TYPE_Q8_K, 256, 292 },
    { LLM_TYPE_Q6_K, LLM_TYPE_Q8_K, 768, 876 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++) {
    ck_assert (llm_matmul_supports (cases[i].wtype));
    ck_assert_uint_eq (llm_matmul_dot_type (cases[i].wtype), cases[i].dot_type);
    ck_assert_uint_eq (llm_matmul_act_bytes (cases[i].wtype, cases[i].n), cases[i].bytes);
  }
  /* Activation-only types are not weight types. */
  ck_assert (!llm_matmul_supports (LLM_TYPE_Q8_1));
  ck_assert (!llm_matmul_supports (LLM_TYPE_IQ4_NL));
  ck_assert (!llm_matmul_supports (LLM_TYPE_Q2_K));
  ck_assert (!llm_matmul_supports (LLM_TYPE_I32));
}
END_TEST

/* --- every kernel against a plain dot of the dequantized operands --- */

/* With every scale 1 the products are integers and all sums stay under
 * 2^24, so float addition is exact in any order: the scalar reference,
 * the AVX2 kernel and a naive sum of dequantized weights times activation
 * integers must all agree exactly. This checks the integer parts, and the
 * block layouts the dot products read against the ones dequantization
 * reads. */
static void
check_integer_dot (uint32_t wtype, size_t n, const void *w, size_t row_bytes, size_t rows,
    const void *xq, const int8_t *xi)
{
  float *wf = g_new (float, n);
  float *y = g_new (float, rows);
  for (size_t r = 0; r < rows; r++) {
    llm_dequantize_row (wtype, w, row_bytes, n, r, wf);
    double want = 0.0;
    for (size_t i = 0; i < n; i++) {
      ck_assert (wf[i] == rint (wf[i]));
      want += (double) wf[i] * xi[i];
    }
    ck_assert (fabs (want) < (double) (1 << 24));
    for (int pass = 0; pass < 2; pass++) {
      if (pass == 1 && !have_avx2 ())
        break;
      use_reference (pass == 0);
      llm_matvec (kern, wtype, w, row_bytes, n, r, r + 1, xq, y);
      ck_assert_msg (y[0] == (float) want, "%s %s n=%zu row %zu: %.1f, want %.1f",
          llm_type_name (wtype), llm_cpu_kernels_name (kern), n, r, y[0], want);
    }
  }
  use_reference (false);
  g_free (wf);
  g_free (y);
}

START_TEST (test_q8_0_and_q4_0_integer_parts_are_exact)
{
  llm_test_rng_seed (10);
  const size_t sizes[] = { 32, 64, 96, 288 };
  for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++) {
    const size_t n = sizes[s], nb = n / 32, rows = 5;
    LlmBlockQ8_0 *x = g_new (LlmBlockQ8_0, nb);
    int8_t *xi = g_new (int8_t, n);
    for (size_t b = 0; b < nb; b++) {
      x[b].d = llm_fp16_from_f32 (1.0f);
      for (int j = 0; j < 32; j++)
        x[b].qs[j] = xi[32 * b + j] = (int8_t) rng_int (-127, 127);
    }

    LlmBlockQ8_0 *w8 = g_new (LlmBlockQ8_0, nb * rows);
    LlmBlockQ4_0 *w4 = g_new (LlmBlockQ4_0, nb * rows);
    for (size_t b = 0; b < nb * rows; b++) {
      w8[b].d = w4[b].d = llm_fp16_from_f32 (1.0f);
      for (int j = 0; j < 32; j++)
        w8[b].qs[j] = (int8_t) rng_int (-128, 127);
      for (int j = 0; j < 16; j++)
        w4[b].qs[j] = (uint8_t) llm_test_rng_next ();
    }
    /* Extremes, where vpmaddubsw could saturate if ranges were wrong. */
    memset (w8[0].qs, 0x80, 32);
    memset (x[0].qs, 127, 32);
    memset (xi, 127, 32);

    check_integer_dot (LLM_TYPE_Q8_0, n, w8, nb * sizeof *w8, rows, x, xi);
    check_integer_dot (LLM_TYPE_Q4_0, n, w4, nb * sizeof *w4, rows, x, xi);
    g_free (x);
    g_free (xi);
    g_free (w8);
    g_free (w4);
  }
}
END_TEST

/* Q5_0, Q4_1, Q5_1 with d = 1, and m = 1 for the offset types: the m * s
 * term is then the exact integer sum of x (|sum| <= 32 * 63 = 2016 is a
 * half; the all-127 block's 4064 too), so the whole dot is an integer. */
START_TEST (test_q5_0_q4_1_q5_1_integer_parts_are_exact)
{
  llm_test_rng_seed (12);
  const uint16_t one = llm_fp16_from_f32 (1.0f);
  const size_t sizes[] = { 32, 64, 96, 288 };
  for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++) {
    const size_t n = sizes[s], nb = n / 32, rows = 5;
    LlmBlockQ8_0 *x0 = g_new (LlmBlockQ8_0, nb);
    LlmBlockQ8_1 *x1 = g_new (LlmBlockQ8_1, nb);
    int8_t *xi = g_new (int8_t, n);
    for (size_t b = 0; b < nb; b++) {
      int sum = 0;
      for (int j = 0; j < 32; j++) {
        /* The first block at the extreme, where vpmaddubsw could saturate
         * if the ranges were wrong. */
        xi[32 * b + j] = b == 0 ? 127 : (int8_t) rng_int (-63, 63);
        x0[b].qs[j] = x1[b].qs[j] = xi[32 * b + j];
        sum += xi[32 * b + j];
      }
      x0[b].d = x1[b].d = one;
      x1[b].s = llm_fp16_from_f32 ((float) sum);
      ck_assert (llm_fp16_to_f32 (x1[b].s) == (float) sum);
    }

    LlmBlockQ5_0 *w50 = g_new (LlmBlockQ5_0, nb * rows);
    LlmBlockQ4_1 *w41 = g_new (LlmBlockQ4_1, nb * rows);
    LlmBlockQ5_1 *w51 = g_new (LlmBlockQ5_1, nb * rows);
    for (size_t b = 0; b < nb * rows; b++) {
      w50[b].d = w41[b].d = w51[b].d = w41[b].m = w51[b].m = one;
      for (int j = 0; j < 16; j++)
        w50[b].qs[j] = w41[b].qs[j] = w51[b].qs[j] = (uint8_t) llm_test_rng_next ();
      for (int j = 0; j < 4; j++)
        w50[b].qh[j] = w51[b].qh[j] = (uint8_t) llm_test_rng_next ();
    }
    /* Largest codes (31) against the all-127 block. */
    memset (w50[0].qs, 0xff, 16);
    memset (w50[0].qh, 0xff, 4);
    memset (w51[0].qs, 0xff, 16);
    memset (w51[0].qh, 0xff, 4);

    check_integer_dot (LLM_TYPE_Q5_0, n, w50, nb * sizeof *w50, rows, x0, xi);
    check_integer_dot (LLM_TYPE_Q4_1, n, w41, nb * sizeof *w41, rows, x1, xi);
    check_integer_dot (LLM_TYPE_Q5_1, n, w51, nb * sizeof *w51, rows, x1, xi);
    g_free (x0);
    g_free (x1);
    g_free (xi);
    g_free (w50);
    g_free (w41);
    g_free (w51);
  }
}
END_TEST

static void
check_k_integer_dot (uint32_t wtype, int max_scale)
{
  const size_t sizes[] = { 256, 768 };
  for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++) {
    const size_t n = sizes[s], nb = n / 256, rows = 3;
    LlmBlockQ8_K *x = g_new0 (LlmBlockQ8_K, nb);
    int8_t *xi = g_new (int8_t, n);
    for (size_t b = 0; b < nb; b++) {
      x[b].d = 1.0f;
      for (int j = 0; j < 256; j++)
        x[b].qs[j] = xi[256 * b + j] = (int8_t) rng_int (-127, 127);
      for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int i = 0; i < 16; i++)
          sum += x[b].qs[16 * g + i];
        x[b].bsums[g] = (int16_t) sum;
      }
    }

    size_t row_bytes;
    uint8_t *w = random_weights (wtype, rows, n, &row_bytes);
    const uint16_t one = llm_fp16_from_f32 (1.0f);
    for (size_t b = 0; b < nb * rows; b++) {
      if (wtype == LLM_TYPE_Q6_K) {
        LlmBlockQ6_K *blk = (LlmBlockQ6_K *) w + b;
        blk->d = one;
        for (int j = 0; j < 16; j++)
          blk->scales[j] = (int8_t) rng_int (-max_scale, max_scale);
      } else {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
          sc[j] = (uint8_t) rng_int (0, max_scale);
          m[j] = (uint8_t) rng_int (0, max_scale);
        }
        if (wtype == LLM_TYPE_Q4_K) {
          LlmBlockQ4_K *blk = (LlmBlockQ4_K *) w + b;
          blk->d = blk->dmin = one;
          pack_k4_scales (sc, m, blk->scales);
        } else {
          LlmBlockQ5_K *blk = (LlmBlockQ5_K *) w + b;
          blk->d = blk->dmin = one;
          pack_k4_scales (sc, m, blk->scales);
        }
      }
    }
    check_integer_dot (wtype, n, w, row_bytes, rows, x, xi);
    g_free (w);
    g_free (x);
    g_free (xi);
  }
}

START_TEST (test_k_quant_integer_parts_are_exact)
{
  llm_test_rng_seed (11);
  /* Scales small enough that |sum| < 2^24 over 768 values. */
  check_k_integer_dot (LLM_TYPE_Q4_K, 7);
  check_k_integer_dot (LLM_TYPE_Q5_K, 3);
  check_k_integer_dot (LLM_TYPE_Q6_K, 4);
}
END_TEST

/* --- AVX2 against the scalar reference on random data --- */

/* The kernels differ only in the order of float additions, so the gap is
 * bounded by a few float roundings of the sum of |products|: we allow
 * 1e-5 of it (8 lanes x up to 1000 / 32 terms each, plus the lane sum,
 * stays under 1e-5 even in the worst case; typical gaps are ~1e-7). */
#define AVX2_REL_TOL 1e-5

static void
compare_with_reference (uint32_t wtype, size_t n, size_t rows, guint64 seed)
{
  llm_test_rng_seed (seed);
  size_t row_bytes;
  uint8_t *w = random_weights (wtype, rows, n, &row_bytes);
  float *x = g_new (float, n);
  fill_random (x, n, 2.0f);
  void *xq = g_malloc (llm_matmul_act_bytes (wtype, n));
  llm_matmul_convert (kern, wtype, x, n, xq);

  float *xf = g_new (float, n), *wf = g_new (float, n);
  expand_activations (wtype, xq, n, xf);
  float *y_ref = g_new (float, rows), *y_fast = g_new (float, rows);

  use_reference (true);
  llm_matvec (kern, wtype, w, row_bytes, n, 0, rows, xq, y_ref);
  use_reference (false);
  llm_matvec (kern, wtype, w, row_bytes, n, 0, rows, xq, y_fast);

  for (size_t r = 0; r < rows; r++) {
    llm_dequantize_row (wtype, w, row_bytes, n, r, wf);
    double dot = offset_rounding (wtype, w + r * row_bytes, xq, n), abs_sum = 0.0;
    for (size_t i = 0; i < n; i++) {
      dot += (double) wf[i] * xf[i];
      abs_sum += fabs ((double) wf[i] * xf[i]);
    }
    const double tol = AVX2_REL_TOL * abs_sum + 1e-30;
    ck_assert_msg (fabs ((double) y_fast[r] - y_ref[r]) <= tol,
        "%s n=%zu row %zu: avx2 %.9g, reference %.9g (tolerance %.3g)",
        llm_type_name (wtype), n, r, y_fast[r], y_ref[r], tol);
    /* And the reference is the plain dot of what it multiplies; this
     * bound is looser only because dequantization rounds each product. */
    ck_assert_msg (fabs (y_ref[r] - dot) <= 1e-5 * abs_sum + 1e-30,
        "%s n=%zu row %zu: reference %.9g, dequantized dot %.9g",
        llm_type_name (wtype), n, r, y_ref[r], dot);
  }
  g_free (w);
  g_free (x);
  g_free (xq);
  g_free (xf);
  g_free (wf);
  g_free (y_ref);
  g_free (y_fast);
}

START_TEST (test_avx2_float_kernels_match_reference)
{
  if (!have_avx2 ())
    LLM_TEST_SKIP ("this CPU or build has no AVX2/FMA/F16C kernels");
  const uint32_t types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16 };
  const size_t sizes[] = { 1, 7, 33, 1000 };
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++)
    for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++)
      compare_with_reference (types[t], sizes[s], 13, 100 + 10 * t + s);
}
END_TEST

START_TEST (test_avx2_block_kernels_match_reference)
{
  if (!have_avx2 ())
    LLM_TEST_SKIP ("this CPU or build has no AVX2/FMA/F16C kernels");
  const uint32_t types[] = { LLM_TYPE_Q8_0, LLM_TYPE_Q4_0 };
  const size_t sizes[] = { 32, 64, 96, 288 };
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++)
    for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++)
      compare_with_reference (types[t], sizes[s], 13, 200 + 10 * t + s);
}
END_TEST

START_TEST (test_avx2_legacy_block_kernels_match_reference)
{
  if (!have_avx2 ())
    LLM_TEST_SKIP ("this CPU or build has no AVX2/FMA/F16C kernels");
  const uint32_t types[] = { LLM_TYPE_Q5_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_1 };
  const size_t sizes[] = { 32, 64, 96, 288 };
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++)
    for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++)
      compare_with_reference (types[t], sizes[s], 13, 250 + 10 * t + s);
}
END_TEST

START_TEST (test_avx2_k_quant_kernels_match_reference)
{
  if (!have_avx2 ())
    LLM_TEST_SKIP ("this CPU or build has no AVX2/FMA/F16C kernels");
  const uint32_t types[] = { LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K };
  const size_t sizes[] = { 256, 768 };
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++)
    for (size_t s = 0; s < G_N_ELEMENTS (sizes); s++)
      compare_with_reference (types[t], sizes[s], 13, 300 + 10 * t + s);
}
END_TEST

START_TEST (test_scalar_reference_matches_dequantized_dot_without_avx2)
{
  /* The same comparison as above, run even where there is no AVX2 (both
   * passes are then the reference): the reference kernels still face the
   * plain dot of their dequantized operands. */
  const uint32_t types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0,
    LLM_TYPE_Q4_0, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K, LLM_TYPE_Q5_0, LLM_TYPE_Q4_1,
    LLM_TYPE_Q5_1 };
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++)
    compare_with_reference (types[t], 768, 3, 400 + t);
}
END_TEST

/* --- matmul --- */

/* What a batched product (prefill) promises against one token at a time
 * (decode), per weight type, with the AVX2 kernels:
 * - F32, F16, BF16, Q8_0: bit for bit the matvec result (same operations
 *   in the same order; Q8_0 then also matches llama.cpp's prefill);
 * - Q4_0: bit for bit the scalar reference's result (the batched kernel
 *   keeps whole-block integer sums per row, and adds them in the
 *   reference's order, not in matvec's 8 partial lanes);
 * - Q4_K, Q5_K, Q6_K: the same exact integer super-block sums as matvec,
 *   added in another float order, so within AVX2_REL_TOL (1e-5) of the sum
 *   of |w x|, the bound the AVX2 kernels have against the reference;
 * - Q5_0, Q4_1, Q5_1: no batched kernel, so matmul runs matvec's dot
 *   kernels and gives its results bit for bit.
 * With the reference kernels, both are the same scalar dot products. */
static void
check_matmul_against_matvec (uint32_t wtype, size_t n, size_t rows, size_t r0, size_t n_tok,
    guint64 seed)
{
  const size_t ldy = rows + 2;
  llm_test_rng_seed (seed);
  size_t row_bytes;
  uint8_t *w = random_weights (wtype, rows, n, &row_bytes);
  const size_t stride = llm_matmul_act_bytes (wtype, n);
  uint8_t *xq = g_malloc (stride * n_tok);
  float *x = g_new (float, n);
  for (size_t k = 0; k < n_tok; k++) {
    fill_random (x, n, 1.0f);
    llm_matmul_convert (kern, wtype, x, n, xq + k * stride);
  }
  float *y = g_new (float, n_tok * ldy);
  float *yv = g_new (float, rows), *yr = g_new (float, rows);
  float *wf = g_new (float, n), *xf = g_new (float, n);
  for (int pass = 0; pass < 2; pass++) {
    const gboolean reference = pass == 0;
    use_reference (reference);
    for (size_t i = 0; i < n_tok * ldy; i++)
      y[i] = -12345.0f;
    llm_matmul (kern, wtype, w, row_bytes, n, r0, rows, xq, stride, n_tok, y, ldy);
    for (size_t k = 0; k < n_tok; k++) {
      llm_matvec (kern, wtype, w, row_bytes, n, r0, rows, xq + k * stride, yv);
      use_reference (true);
      llm_matvec (kern, wtype, w, row_bytes, n, r0, rows, xq + k * stride, yr);
      use_reference (reference);
      expand_activations (wtype, xq + k * stride, n, xf);
      for (size_t r = 0; r < ldy; r++) {
        const float got = y[k * ldy + r];
        if (r < r0 || r >= rows) {
          ck_assert (got == -12345.0f); /* untouched */
          continue;
        }
        if (reference || wtype == LLM_TYPE_F32 || wtype == LLM_TYPE_F16 ||
            wtype == LLM_TYPE_BF16 || wtype == LLM_TYPE_Q8_0 || wtype == LLM_TYPE_Q5_0 ||
            wtype == LLM_TYPE_Q4_1 || wtype == LLM_TYPE_Q5_1) {
          ck_assert_msg (got == yv[r - r0], "%s n=%zu token %zu row %zu: %.9g, matvec %.9g",
              llm_type_name (wtype), n, k, r, got, yv[r - r0]);
        } else if (wtype == LLM_TYPE_Q4_0) {
          ck_assert_msg (got == yr[r - r0], "%s n=%zu token %zu row %zu: %.9g, reference %.9g",
              llm_type_name (wtype), n, k, r, got, yr[r - r0]);
        } else {
          llm_dequantize_row (wtype, w, row_bytes, n, r, wf);
          double abs_sum = 0.0;
          for (size_t i = 0; i < n; i++)
            abs_sum += fabs ((double) wf[i] * xf[i]);
          ck_assert_msg (fabs ((double) got - yv[r - r0]) <= AVX2_REL_TOL * abs_sum + 1e-30,
              "%s n=%zu token %zu row %zu: %.9g, matvec %.9g", llm_type_name (wtype), n, k, r,
              got, yv[r - r0]);
        }
      }
    }
  }
  use_reference (false);
  g_free (w);
  g_free (xq);
  g_free (x);
  g_free (y);
  g_free (yv);
  g_free (yr);
  g_free (wf);
  g_free (xf);
}

START_TEST (test_matmul_equals_matvec_per_token)
{
  const uint32_t types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0,
    LLM_TYPE_Q4_0, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K, LLM_TYPE_Q5_0, LLM_TYPE_Q4_1,
    LLM_TYPE_Q5_1 };
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++) {
    /* Every edge of the kernels' tiles: rows not a multiple of 4 or 8,
     * tokens not a multiple of 3, 4 or 6. */
    check_matmul_against_matvec (types[t], 512, 11, 3, 5, 500 + t);
    check_matmul_against_matvec (types[t], 768, 29, 0, 13, 520 + t);
    /* A width with a scalar tail, where the type allows one. */
    if (types[t] == LLM_TYPE_F32 || types[t] == LLM_TYPE_F16 || types[t] == LLM_TYPE_BF16)
      check_matmul_against_matvec (types[t], 531, 9, 1, 4, 540 + t);
    /* An odd number of 32-value blocks (the AVX-512 Q8_0 tile takes two
     * at a time), and token counts past the 8-token Q4_0 tile. */
    if (types[t] == LLM_TYPE_Q8_0 || types[t] == LLM_TYPE_Q4_0) {
      check_matmul_against_matvec (types[t], 544, 7, 0, 9, 560 + t);
      check_matmul_against_matvec (types[t], 96, 37, 5, 23, 580 + t);
    }
  }
}
END_TEST

/* The AVX2 activation conversions must give the scalar ones' bytes:
 * they decide which integers the dot products see. Random values, plus the
 * cases with their own branches: an all-zero block, halves' and bfloat16s'
 * ties, subnormals, overflow and NaN, two largest magnitudes of opposite
 * sign (Q8_K takes the first). */
START_TEST (test_avx2_conversions_match_scalar_bytes)
{
  if (!have_avx2 ())
    LLM_TEST_SKIP ("no AVX2 on this CPU");
  const uint32_t types[] = { LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_K,
    LLM_TYPE_Q5_0, LLM_TYPE_Q4_1 };
  const size_t n = 1024 + 256;
  float *x = g_new (float, n);
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++) {
    llm_test_rng_seed (800 + t);
    fill_random (x, n, 3.0f);
    for (size_t i = 256; i < 512; i++)
      x[i] = 0.0f;
    x[600] = 1.0f + 0x1p-11f;          /* half tie, rounds to even */
    x[601] = 1.0f + 3 * 0x1p-11f;      /* half tie, rounds up */
    x[602] = 0x1.0081p0f;              /* bfloat16 above the tie */
    x[603] = 0x1.0080p0f;              /* bfloat16 tie, to even */
    x[604] = 0x1p-20f;                 /* half subnormal */
    x[605] = -0x1p-26f;                /* below half's range: -0 */
    x[606] = 70000.0f;                 /* above half's range: inf */
    x[768] = 5.0f;                     /* Q8_K: first of equal magnitudes */
    x[900] = -5.0f;
    if (types[t] == LLM_TYPE_F16 || types[t] == LLM_TYPE_BF16)
      x[607] = NAN;
    /* Widths with a tail past the vector loops for the float types. */
    const size_t widths[] = { n, types[t] == LLM_TYPE_F16 || types[t] == LLM_TYPE_BF16 ? n - 13 : n };
    for (size_t k = 0; k < G_N_ELEMENTS (widths); k++) {
      const size_t bytes = llm_matmul_act_bytes (types[t], widths[k]);
      uint8_t *ref = g_malloc0 (bytes), *fast = g_malloc0 (bytes);
      use_reference (true);
      llm_matmul_convert (kern, types[t], x, widths[k], ref);
      use_reference (false);
      llm_matmul_convert (kern, types[t], x, widths[k], fast);
      for (size_t i = 0; i < bytes; i++)
        ck_assert_msg (ref[i] == fast[i], "%s n=%zu: byte %zu is %u, scalar %u",
            llm_type_name (types[t]), widths[k], i, fast[i], ref[i]);
      g_free (ref);
      g_free (fast);
    }
  }
  g_free (x);
}
END_TEST

/* --- against llama.cpp's own ggml ---
 * tests/data/golden/ggml-legacy-quants.*: what node-llama-cpp 3.21.1's
 * prebuilt ggml computes (tools/make-quant-golden.py; see the golden
 * README): its reference quantizers' bytes for 16 rows of 128 weights, its
 * x86 activation blocks for 4 tokens, and its x86 dot products of each row
 * with each token. */

#define GG_N 128
#define GG_ROWS 16
#define GG_TOKENS 4

static const uint32_t gg_types[] = { LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1 };

static GBytes *
ggml_golden (const char *ext, size_t want_size)
{
  g_autofree char *rel = g_strdup_printf ("golden/ggml-legacy-quants.%s", ext);
  g_autofree char *path = llm_test_data_path (rel);
  GBytes *b = llm_test_read_file (path);
  ck_assert_uint_eq (g_bytes_get_size (b), want_size);
  return b;
}

static GBytes *
ggml_golden_weights (uint32_t type)
{
  return ggml_golden (type == LLM_TYPE_Q4_1 ? "q4_1" : type == LLM_TYPE_Q5_0 ? "q5_0" : "q5_1",
      row_bytes_of (type, GG_N) * GG_ROWS);
}

static GBytes *
ggml_golden_activations (uint32_t wtype)
{
  const gboolean q8_1 = llm_matmul_dot_type (wtype) == LLM_TYPE_Q8_1;
  return ggml_golden (q8_1 ? "q8_1" : "q8_0", llm_matmul_act_bytes (wtype, GG_N) * GG_TOKENS);
}

static void
assert_same_bytes (const void *got, GBytes *want, const char *what)
{
  gsize n;
  const uint8_t *w = g_bytes_get_data (want, &n), *g = got;
  for (gsize i = 0; i < n; i++)
    ck_assert_msg (g[i] == w[i], "%s: byte %zu is 0x%02x, ggml's 0x%02x", what, i, g[i], w[i]);
}

START_TEST (test_q4_1_q5_0_q5_1_quantizers_give_ggml_reference_bytes)
{
  g_autoptr (GBytes) wf = ggml_golden ("weights.f32", GG_ROWS * GG_N * sizeof (float));
  const float *x = g_bytes_get_data (wf, NULL);
  for (size_t t = 0; t < G_N_ELEMENTS (gg_types); t++) {
    g_autoptr (GBytes) want = ggml_golden_weights (gg_types[t]);
    g_autofree uint8_t *got = g_malloc (g_bytes_get_size (want));
    switch (gg_types[t]) {
      case LLM_TYPE_Q4_1: llm_quantize_row_q4_1 (x, (LlmBlockQ4_1 *) got, GG_ROWS * GG_N); break;
      case LLM_TYPE_Q5_0: llm_quantize_row_q5_0 (x, (LlmBlockQ5_0 *) got, GG_ROWS * GG_N); break;
      default: llm_quantize_row_q5_1 (x, (LlmBlockQ5_1 *) got, GG_ROWS * GG_N); break;
    }
    assert_same_bytes (got, want, llm_type_name (gg_types[t]));
  }
}
END_TEST

/* Q8_0 for Q5_0, Q8_1 for Q4_1 and Q5_1, as ggml's x86 quantize_row_q8_0
 * / _q8_1 make them (ties to even, s from the codes), in either kernel
 * set. */
START_TEST (test_activation_blocks_give_ggml_x86_bytes)
{
  g_autoptr (GBytes) xf = ggml_golden ("acts.f32", GG_TOKENS * GG_N * sizeof (float));
  const float *x = g_bytes_get_data (xf, NULL);
  for (size_t t = 0; t < G_N_ELEMENTS (gg_types); t++) {
    g_autoptr (GBytes) want = ggml_golden_activations (gg_types[t]);
    const size_t stride = llm_matmul_act_bytes (gg_types[t], GG_N);
    g_autofree uint8_t *got = g_malloc (stride * GG_TOKENS);
    for (int pass = 0; pass < 2; pass++) {
      use_reference (pass == 0);
      for (size_t k = 0; k < GG_TOKENS; k++)
        llm_matmul_convert (kern, gg_types[t], x + k * GG_N, GG_N, got + k * stride);
      g_autofree char *what = g_strdup_printf ("%s activations (%s)",
          llm_type_name (gg_types[t]), llm_cpu_kernels_name (kern));
      assert_same_bytes (got, want, what);
    }
  }
  use_reference (false);
}
END_TEST

/* From ggml's own blocks: our optimised kernels (decode's matvec and
 * prefill's matmul) give llama.cpp's x86 dot products bit for bit; the
 * scalar reference, ggml's generic C order, is within AVX2_REL_TOL. */
START_TEST (test_q4_1_q5_0_q5_1_dots_equal_llama_cpp)
{
  g_autoptr (GBytes) dots = ggml_golden ("dots.f32",
      G_N_ELEMENTS (gg_types) * GG_ROWS * GG_TOKENS * sizeof (float));
  const float *want_all = g_bytes_get_data (dots, NULL);
  for (size_t t = 0; t < G_N_ELEMENTS (gg_types); t++) {
    const uint32_t type = gg_types[t];
    g_autoptr (GBytes) wb = ggml_golden_weights (type);
    g_autoptr (GBytes) xb = ggml_golden_activations (type);
    const uint8_t *w = g_bytes_get_data (wb, NULL), *xq = g_bytes_get_data (xb, NULL);
    const size_t row_bytes = row_bytes_of (type, GG_N);
    const size_t stride = llm_matmul_act_bytes (type, GG_N);
    const float *want = want_all + t * GG_ROWS * GG_TOKENS;   /* [row][token] */
    float y[GG_TOKENS * GG_ROWS], yv[GG_ROWS], wf[GG_N], xf[GG_N];

    for (int pass = 0; pass < 2; pass++) {
      const gboolean reference = pass == 0;
      if (!reference && !have_avx2 ())
        break;
      use_reference (reference);
      llm_matmul (kern, type, w, row_bytes, GG_N, 0, GG_ROWS, xq, stride, GG_TOKENS, y, GG_ROWS);
      for (size_t k = 0; k < GG_TOKENS; k++) {
        llm_matvec (kern, type, w, row_bytes, GG_N, 0, GG_ROWS, xq + k * stride, yv);
        expand_activations (type, xq + k * stride, GG_N, xf);
        for (size_t r = 0; r < GG_ROWS; r++) {
          const float ref = want[r * GG_TOKENS + k];
          if (!reference) {
            ck_assert_msg (yv[r] == ref && y[k * GG_ROWS + r] == ref,
                "%s row %zu token %zu [%s]: matvec %.9g, matmul %.9g, llama.cpp %.9g",
                llm_type_name (type), r, k, llm_cpu_kernels_name (kern), yv[r], y[k * GG_ROWS + r],
                ref);
            continue;
          }
          llm_dequantize_row (type, w, row_bytes, GG_N, r, wf);
          double abs_sum = 0.0;
          for (size_t i = 0; i < GG_N; i++)
            abs_sum += fabs ((double) wf[i] * xf[i]);
          ck_assert_msg (fabs ((double) yv[r] - ref) <= AVX2_REL_TOL * abs_sum + 1e-30,
              "%s row %zu token %zu [scalar]: %.9g, llama.cpp %.9g", llm_type_name (type), r, k,
              yv[r], ref);
        }
      }
    }
  }
  use_reference (false);
}
END_TEST

/* Claims cover [r0, r1) once, in order, each starting on a 16-row tile
 * and at most a step long; a step of a multiple of 32 rows shrinks to 16
 * near the end, and no other does. */
START_TEST (test_claims_cover_every_row_once_and_shrink_at_the_end)
{
  const size_t steps[] = { 16, 48, 64, 128, 256 };
  const size_t ends[] = { 16, 17, 100, 1000, 1024, 2816 };
  for (size_t si = 0; si < G_N_ELEMENTS (steps); si++)
    for (size_t ei = 0; ei < G_N_ELEMENTS (ends); ei++)
      for (size_t r0 = 0; r0 <= 16 && r0 < ends[ei]; r0 += 16) {
        const size_t step = steps[si], r1 = ends[ei];
        atomic_size_t next;
        atomic_init (&next, r0);
        size_t ra = r0, rb = r1, at = r0, last = 0;
        bool first = true;
        while (claim (&next, step, r1, &ra, &rb, &first)) {
          ck_assert_msg (ra == at && rb > ra && rb - ra <= step && ra % 16 == 0,
              "step %zu, rows %zu..%zu: claim %zu..%zu after %zu", step, r0, r1, ra, rb, at);
          ck_assert (rb == r1 || (rb - ra) % 16 == 0);
          last = rb - ra;
          at = rb;
        }
        ck_assert_msg (at == r1, "step %zu: rows to %zu of %zu", step, at, r1);
        if (step % 32 == 0 && r1 - r0 >= 4 * step)
          ck_assert_msg (last <= 16, "step %zu, %zu rows: the last claim took %zu", step,
              r1 - r0, last);
        if (step % 32 != 0 && r1 - r0 >= 2 * step)
          ck_assert (last == step || at - last + step > r1);
      }
}
END_TEST

typedef struct {
  uint32_t wtype;
  const uint8_t *w;
  size_t row_bytes, n, rows;
  const uint8_t *xq;
  size_t stride, n_tok;
  float *y;
  atomic_size_t next;
} SharedMatmul;

static void
shared_matmul_task (void *data, int ith, int nth)
{
  SharedMatmul *m = data;
  (void) ith;
  (void) nth;
  llm_matmul_shared (kern, m->wtype, m->w, m->row_bytes, m->n, 0, m->rows, m->xq, m->stride, m->n_tok,
      m->y, m->rows, &m->next, 8);
}

/* Threads claiming rows from a shared counter compute what one thread
 * computes, bit for bit, and every row exactly once. */
START_TEST (test_matmul_shared_by_threads_equals_one_thread)
{
  const uint32_t types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0,
    LLM_TYPE_Q4_0, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K, LLM_TYPE_Q5_0, LLM_TYPE_Q4_1,
    LLM_TYPE_Q5_1 };
  const size_t n = 512, rows = 61, n_tok = 7;
  LlmThreadPool *pool = llm_threadpool_new (3);
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++) {
    llm_test_rng_seed (900 + t);
    SharedMatmul m = { .wtype = types[t], .n = n, .rows = rows, .n_tok = n_tok };
    size_t row_bytes;
    uint8_t *w = random_weights (types[t], rows, n, &row_bytes);
    m.w = w;
    m.row_bytes = row_bytes;
    m.stride = llm_matmul_act_bytes (types[t], n);
    uint8_t *xq = g_malloc (m.stride * n_tok);
    float *x = g_new (float, n);
    for (size_t k = 0; k < n_tok; k++) {
      fill_random (x, n, 1.0f);
      llm_matmul_convert (kern, types[t], x, n, xq + k * m.stride);
    }
    m.xq = xq;
    float *want = g_new (float, rows * n_tok);
    m.y = g_new (float, rows * n_tok);
    for (size_t i = 0; i < rows * n_tok; i++)
      m.y[i] = -12345.0f;
    llm_matmul (kern, types[t], w, row_bytes, n, 0, rows, xq, m.stride, n_tok, want, rows);
    atomic_init (&m.next, 0);
    llm_threadpool_run (pool, shared_matmul_task, &m);
    ck_assert_msg (memcmp (want, m.y, rows * n_tok * sizeof (float)) == 0, "%s",
        llm_type_name (types[t]));
    g_free (w);
    g_free (xq);
    g_free (x);
    g_free (want);
    g_free (m.y);
  }
  llm_threadpool_free (pool);
}
END_TEST

START_TEST (test_dequantize_row_picks_the_row)
{
  llm_test_rng_seed (600);
  size_t row_bytes;
  uint8_t *w = random_weights (LLM_TYPE_Q6_K, 4, 512, &row_bytes);
  float a[512], b[512];
  llm_dequantize_row (LLM_TYPE_Q6_K, w, row_bytes, 512, 2, a);
  llm_dequantize_row_q6_K ((const LlmBlockQ6_K *) (w + 2 * row_bytes), b, 512);
  ck_assert (memcmp (a, b, sizeof a) == 0);
  g_free (w);
}
END_TEST

/* --- thread pool --- */

typedef struct {
  atomic_int counts[64];
  int nth;
  atomic_int bad_nth;
} CountCtx;

static void
count_task (void *data, int ith, int nth)
{
  CountCtx *c = data;
  if (nth != c->nth || ith < 0 || ith >= nth)
    atomic_fetch_add (&c->bad_nth, 1);
  else
    atomic_fetch_add_explicit (&c->counts[ith], 1, memory_order_relaxed);
}

static void
empty_task (void *data, int ith, int nth)
{
  (void) data;
  (void) ith;
  (void) nth;
}

static void
run_counted (int n_threads, int runs)
{
  LlmThreadPool *pool = llm_threadpool_new (n_threads);
  ck_assert (pool != NULL);
  ck_assert_int_eq (llm_threadpool_n_threads (pool), n_threads);
  CountCtx *c = g_new0 (CountCtx, 1);
  c->nth = n_threads;
  for (int i = 0; i < runs; i++)
    llm_threadpool_run (pool, count_task, c);
  /* Every run had finished when run() returned, so the counts are final. */
  ck_assert_int_eq (atomic_load (&c->bad_nth), 0);
  for (int i = 0; i < n_threads; i++)
    ck_assert_int_eq (atomic_load (&c->counts[i]), runs);
  llm_threadpool_free (pool);
  g_free (c);
}

START_TEST (test_threadpool_runs_every_ith_exactly_once_per_run)
{
  run_counted (2, 100000);
  run_counted (1, 1000);
  run_counted (5, 2000); /* more threads than this machine may have cores */
}
END_TEST

START_TEST (test_threadpool_wakes_sleeping_workers)
{
  LlmThreadPool *pool = llm_threadpool_new (3);
  CountCtx *c = g_new0 (CountCtx, 1);
  c->nth = 3;
  for (int i = 0; i < 5; i++) {
    g_usleep (2000); /* long past the spin: the workers are asleep */
    llm_threadpool_run (pool, count_task, c);
  }
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq (atomic_load (&c->counts[i]), 5);
  llm_threadpool_free (pool);
  g_free (c);
}
END_TEST

START_TEST (test_threadpool_defaults_to_one_thread_per_cpu)
{
  LlmThreadPool *pool = llm_threadpool_new (0);
  ck_assert (pool != NULL);
  ck_assert_int_eq (llm_threadpool_n_threads (pool), (int) g_get_num_processors ());
  llm_threadpool_free (pool);
  llm_threadpool_free (NULL);
}
END_TEST

START_TEST (test_threadpool_overhead_is_reported)
{
  /* Not asserted (shared CI machines vary); printed for the record. */
  LlmThreadPool *pool = llm_threadpool_new (2);
  const int runs = 100000;
  for (int i = 0; i < 1000; i++)
    llm_threadpool_run (pool, empty_task, NULL);
  const double t0 = now_s ();
  for (int i = 0; i < runs; i++)
    llm_threadpool_run (pool, empty_task, NULL);
  const double us = (now_s () - t0) / runs * 1e6;
  g_print ("threadpool: %.2f us per run of an empty task, 2 threads\n", us);
  llm_threadpool_free (pool);
}
END_TEST

START_TEST (test_split_range_covers_n_in_near_equal_pieces)
{
  const size_t ns[] = { 0, 1, 7, 100, 4096 };
  for (size_t i = 0; i < G_N_ELEMENTS (ns); i++) {
    for (int nth = 1; nth <= 9; nth++) {
      size_t next = 0;
      for (int ith = 0; ith < nth; ith++) {
        size_t b, e;
        llm_split_range (ns[i], ith, nth, &b, &e);
        ck_assert_uint_eq (b, next);
        ck_assert (e - b == ns[i] / nth || e - b == ns[i] / nth + 1);
        next = e;
      }
      ck_assert_uint_eq (next, ns[i]);
    }
  }
}
END_TEST

/* --- throughput (LLM_BENCH=1) --- */

START_TEST (test_matvec_throughput_report)
{
  if (g_getenv ("LLM_BENCH") == NULL)
    LLM_TEST_SKIP ("set LLM_BENCH=1 to measure matvec throughput");
  const uint32_t types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0,
    LLM_TYPE_Q4_0, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K, LLM_TYPE_Q5_0, LLM_TYPE_Q4_1,
    LLM_TYPE_Q5_1 };
  const size_t rows = 1024, n = 2816;
  for (size_t t = 0; t < G_N_ELEMENTS (types); t++) {
    llm_test_rng_seed (700 + t);
    size_t row_bytes;
    uint8_t *w = random_weights (types[t], rows, n, &row_bytes);
    float *x = g_new (float, n), *y = g_new (float, rows);
    fill_random (x, n, 1.0f);
    void *xq = g_malloc (llm_matmul_act_bytes (types[t], n));
    llm_matmul_convert (kern, types[t], x, n, xq);
    for (int pass = 0; pass < 2; pass++) {
      use_reference (pass == 0);
      int iters = 0;
      const double t0 = now_s ();
      double el;
      do {
        llm_matvec (kern, types[t], w, row_bytes, n, 0, rows, xq, y);
        iters++;
        el = now_s () - t0;
      } while (el < 0.3);
      g_print ("matvec %4s %-6s 1024x2816: %7.3f ms, %6.2f GB/s of weights\n",
          llm_type_name (types[t]), llm_cpu_kernels_name (kern), el / iters * 1e3,
          (double) (rows * row_bytes) * iters / el / 1e9);
    }

    /* A 64-token batch, as in prefill. */
    const size_t n_tok = 64, stride = llm_matmul_act_bytes (types[t], n);
    uint8_t *xs = g_malloc (stride * n_tok);
    float *ys = g_new (float, rows * n_tok);
    for (size_t k = 0; k < n_tok; k++)
      memcpy (xs + k * stride, xq, stride);
    int iters = 0;
    const double t0 = now_s ();
    double el;
    do {
      llm_matmul (kern, types[t], w, row_bytes, n, 0, rows, xs, stride, n_tok, ys, rows);
      iters++;
      el = now_s () - t0;
    } while (el < 0.3);
    g_print ("matmul %4s %-6s 1024x2816 x 64 tokens: %7.3f ms, %6.2f GMAC/s\n",
        llm_type_name (types[t]), llm_cpu_kernels_name (kern), el / iters * 1e3,
        (double) rows * n * n_tok * iters / el / 1e9);
    g_free (xs);
    g_free (ys);
    use_reference (false);
    g_free (w);
    g_free (x);
    g_free (y);
    g_free (xq);
  }
}
END_TEST

static Suite *
kernels_suite (void)
{
  use_reference (false);
  Suite *s = suite_create ("kernels");

  TCase *ops = tcase_create ("ops");
  tcase_add_test (ops, test_rmsnorm_of_1_2_3_4_divides_by_root_mean_square);
  tcase_add_test (ops, test_rmsnorm_may_write_over_its_input);
  tcase_add_test (ops, test_rmsnorm_sums_every_element_at_every_length);
  tcase_add_test (ops, test_rmsnorm_rows_give_each_row_its_own_bits);
  tcase_add_test (ops, test_softmax_of_1_2_3_matches_hand_values);
  tcase_add_test (ops, test_softmax_of_huge_logits_does_not_overflow);
  tcase_add_test (ops, test_swiglu_is_silu_of_gate_times_up);
  tcase_add_test (ops, test_exp_is_within_two_ulp_of_exp);
  tcase_add_test (ops, test_exp_limits_are_zero_inf_and_nan);
  tcase_add_test (ops, test_vector_swiglu_matches_reference);
  tcase_add_test (ops, test_add_adds_elementwise);
  tcase_add_test (ops, test_rope_at_pos_1_rotates_adjacent_pairs);
  tcase_add_test (ops, test_rope_neox_rotates_halves);
  tcase_add_test (ops, test_rope_at_pos_0_is_identity_and_leaves_unrotated_dims);
  tcase_add_test (ops, test_rope_angle_is_ggml_running_float_product);
  tcase_add_test (ops, test_rope_angles_then_turn_equal_rope_bit_for_bit);
  tcase_add_test (ops, test_backend_rope_reuses_angles_only_for_the_same_positions);
  suite_add_tcase (s, ops);

  TCase *quant = tcase_create ("quantization");
  tcase_add_test (quant, test_q8_0_roundtrip_error_is_within_half_a_step);
  tcase_add_test (quant, test_q4_0_roundtrip_error_is_within_one_step);
  tcase_add_test (quant, test_q4_1_and_q5_1_roundtrip_error_is_within_half_a_step);
  tcase_add_test (quant, test_q5_0_roundtrip_error_is_within_one_step);
  tcase_add_test (quant, test_q8_1_sum_is_taken_from_the_rounded_codes_and_unrounded_scale);
  tcase_add_test (quant, test_q8_K_roundtrip_error_is_within_half_a_step_and_bsums_add_up);
  tcase_add_test (quant, test_q8_K_of_zeros_is_all_zero);
  tcase_add_test (quant, test_q8_K_rounds_ties_to_even);
  tcase_add_test (quant, test_k4_scales_unpack_all_eight_sub_blocks);
  tcase_add_test (quant, test_q4_K_dequantizes_a_hand_built_block);
  tcase_add_test (quant, test_q5_K_dequantizes_a_hand_built_block);
  tcase_add_test (quant, test_q6_K_dequantizes_a_hand_built_block);
  suite_add_tcase (s, quant);

  TCase *dot = tcase_create ("matmul");
  tcase_add_test (dot, test_q8_0_dot_of_two_known_blocks);
  tcase_add_test (dot, test_q4_0_dot_of_two_known_blocks);
  tcase_add_test (dot, test_f16_activations_are_rounded_to_half_first);
  tcase_add_test (dot, test_dot_types_and_activation_sizes_follow_ggml);
  tcase_add_test (dot, test_q8_0_and_q4_0_integer_parts_are_exact);
  tcase_add_test (dot, test_q5_0_q4_1_q5_1_integer_parts_are_exact);
  tcase_add_test (dot, test_k_quant_integer_parts_are_exact);
  tcase_add_test (dot, test_avx2_float_kernels_match_reference);
  tcase_add_test (dot, test_avx2_block_kernels_match_reference);
  tcase_add_test (dot, test_avx2_legacy_block_kernels_match_reference);
  tcase_add_test (dot, test_avx2_k_quant_kernels_match_reference);
  tcase_add_test (dot, test_scalar_reference_matches_dequantized_dot_without_avx2);
  tcase_add_test (dot, test_matmul_equals_matvec_per_token);
  tcase_add_test (dot, test_avx2_conversions_match_scalar_bytes);
  tcase_add_test (dot, test_q4_1_q5_0_q5_1_quantizers_give_ggml_reference_bytes);
  tcase_add_test (dot, test_activation_blocks_give_ggml_x86_bytes);
  tcase_add_test (dot, test_q4_1_q5_0_q5_1_dots_equal_llama_cpp);
  tcase_add_test (dot, test_matmul_shared_by_threads_equals_one_thread);
  tcase_add_test (dot, test_claims_cover_every_row_once_and_shrink_at_the_end);
  tcase_add_test (dot, test_dequantize_row_picks_the_row);
  tcase_add_test (dot, test_matvec_throughput_report);
  suite_add_tcase (s, dot);

  TCase *pool = tcase_create ("threadpool");
  tcase_set_timeout (pool, 300);
  tcase_add_test (pool, test_threadpool_runs_every_ith_exactly_once_per_run);
  tcase_add_test (pool, test_threadpool_wakes_sleeping_workers);
  tcase_add_test (pool, test_threadpool_defaults_to_one_thread_per_cpu);
  tcase_add_test (pool, test_threadpool_overhead_is_reported);
  tcase_add_test (pool, test_split_range_covers_n_in_near_equal_pieces);
  suite_add_tcase (s, pool);

  return s;
}

LLM_TEST_MAIN (kernels_suite)
