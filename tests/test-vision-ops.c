/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The vision encoders' data movement: frame normalisation as mtmd rounds
 * it, and the pixel shuffle against a literal replay of the reshapes and
 * permutes llama.cpp's graph makes of it (Idefics3's pixel_shuffle); and
 * their layer norm and GELUs (ops.h), the vector kernels bit for bit the
 * reference's. */
#include <string.h>

#include "llm-check.h"
#include "cpu/matmul.h"
#include "cpu/exp.h"
#include "cpu/ops.h"
#include "cpu/vision.h"

START_TEST (test_normalize_is_mtmds_arithmetic_in_planes)
{
  enum { W = 7, H = 3, STRIDE = 3 * W + 5 };
  uint8_t rgb[H * STRIDE];
  for (guint i = 0; i < sizeof rgb; i++)
    rgb[i] = (uint8_t) (i * 37 + 11);
  const float mean[3] = { 0.48145466f, 0.4578275f, 0.40821073f };
  const float std[3] = { 0.26862954f, 0.26130258f, 0.27577711f };
  float planes[3 * W * H];
  llm_cpu_image_normalize (rgb, W, H, STRIDE, mean, std, planes);
  for (guint y = 0; y < H; y++)
    for (guint x = 0; x < W; x++)
      for (guint c = 0; c < 3; c++) {
        const float u = (float) rgb[y * STRIDE + 3 * x + c] / 255.0f;
        const float want = (u - mean[c]) / std[c];
        ck_assert_msg (planes[c * W * H + y * W + x] == want, "(%u, %u) channel %u", x, y, c);
      }
}
END_TEST

/* A ggml-like view: sizes and element strides of up to 3 dimensions. */
typedef struct {
  float *data;
  gsize ne[3], nb[3];
} View;

static View
contiguous (float *data, gsize ne0, gsize ne1, gsize ne2)
{
  return (View) { data, { ne0, ne1, ne2 }, { 1, ne0, ne0 * ne1 } };
}

/* ggml_cont: the view's elements in its logical order. */
static float *
cont (const View *v)
{
  float *out = g_new (float, v->ne[0] * v->ne[1] * v->ne[2]);
  gsize i = 0;
  for (gsize c = 0; c < v->ne[2]; c++)
    for (gsize b = 0; b < v->ne[1]; b++)
      for (gsize a = 0; a < v->ne[0]; a++)
        out[i++] = v->data[a * v->nb[0] + b * v->nb[1] + c * v->nb[2]];
  return out;
}

/* ggml_permute (v, 0, 2, 1, 3): dims 1 and 2 change places. */
static View
swap12 (View v)
{
  View p = v;
  p.ne[1] = v.ne[2];
  p.ne[2] = v.ne[1];
  p.nb[1] = v.nb[2];
  p.nb[2] = v.nb[1];
  return p;
}

/* build_patch_merge_permute's steps, one by one. */
static float *
replay (const float *in, gsize e, gsize w, gsize h, gsize s, gsize *n_tokens)
{
  const gsize pw = (w + s - 1) / s * s, ph = (h + s - 1) / s * s;
  /* ggml_pad: zeros after the last column and row. */
  float *padded = g_new0 (float, e * pw * ph);
  for (gsize y = 0; y < h; y++)
    memcpy (padded + (y * pw) * e, in + (y * w) * e, w * e * sizeof (float));
  /* unshuffle h: reshape [e*s, pw/s, ph], permute */
  View v = swap12 (contiguous (padded, e * s, pw / s, ph));
  float *c1 = cont (&v);
  /* unshuffle w: cont_3d [e*s*s, ph/s, pw/s], permute */
  View v2 = swap12 (contiguous (c1, e * s * s, ph / s, pw / s));
  float *out = cont (&v2);
  g_free (padded);
  g_free (c1);
  *n_tokens = (pw / s) * (ph / s);
  return out;
}

START_TEST (test_pixel_shuffle_replays_the_graphs_reshapes)
{
  static const gsize cases[][4] = {
    /* n_embd, width, height, scale */
    { 3, 4, 4, 2 }, { 5, 8, 8, 4 }, { 2, 6, 4, 2 }, { 4, 5, 7, 2 }, { 1, 9, 9, 3 },
    { 8, 32, 32, 4 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    const gsize e = cases[i][0], w = cases[i][1], h = cases[i][2], s = cases[i][3];
    g_autofree float *in = g_new (float, e * w * h);
    for (gsize k = 0; k < e * w * h; k++)
      in[k] = (float) k + 1.0f;
    gsize n_tokens;
    g_autofree float *want = replay (in, e, w, h, s, &n_tokens);
    ck_assert_uint_eq (llm_cpu_pixel_shuffle_tokens (w, h, s), n_tokens);
    g_autofree float *got = g_new (float, n_tokens * e * s * s);
    llm_cpu_pixel_shuffle (in, e, w, h, s, got);
    ck_assert_msg (memcmp (got, want, n_tokens * e * s * s * sizeof (float)) == 0,
        "case %u (%zu wide, %zux%zu, scale %zu) differs", i, e, w, h, s);
  }
}
END_TEST

#include <math.h>

/* Patch rows times the kernel's rows are the convolution: checked against
 * a direct stride-patch convolution of the planes. */
START_TEST (test_patch_rows_times_the_kernel_are_the_convolution)
{
  enum { W = 12, H = 8, P = 4, E = 5, K = 3 * P * P };
  float planes[3 * W * H], kernel[E * K], rows[(W / P) * (H / P) * K];
  llm_test_rng_seed (9);
  for (guint i = 0; i < G_N_ELEMENTS (planes); i++)
    planes[i] = llm_test_rng_float ();
  for (guint i = 0; i < G_N_ELEMENTS (kernel); i++)
    kernel[i] = llm_test_rng_float ();
  llm_cpu_image_patches (planes, W, H, P, rows);
  for (guint py = 0; py < H / P; py++)
    for (guint px = 0; px < W / P; px++)
      for (guint o = 0; o < E; o++) {
        double conv = 0, product = 0;
        /* ggml's conv kernel [P, P, 3, E]: element (kx, ky, c, o). */
        for (guint c = 0; c < 3; c++)
          for (guint ky = 0; ky < P; ky++)
            for (guint kx = 0; kx < P; kx++)
              conv += (double) kernel[((o * 3 + c) * P + ky) * P + kx]
                  * planes[c * W * H + (py * P + ky) * W + px * P + kx];
        const float *row = rows + (py * (W / P) + px) * K;
        for (guint k = 0; k < K; k++)
          product += (double) kernel[o * K + k] * row[k];
        ck_assert_msg (fabs (conv - product) < 1e-9, "patch (%u, %u), channel %u", px, py, o);
      }
}
END_TEST

START_TEST (test_layernorm_sums_every_element_at_every_length)
{
  /* Halves and their float deviations from the mean sum exactly in double
   * in any order, so every output is known to the bit: an element dropped
   * or counted twice (the sixteen running sums, the tail after them), or
   * the four-wide weighting gone wrong, changes it. */
  static const guint lengths[] = { 1, 3, 15, 16, 17, 31, 32, 33, 100, 768, 775 };
  float x[775], w[775], b[775], y[775];
  for (guint k = 0; k < G_N_ELEMENTS (lengths); k++) {
    const guint n = lengths[k];
    for (guint i = 0; i < n; i++) {
      x[i] = 0.5f * (float) ((int) ((i * 7 + k) % 13) - 6);
      w[i] = 0.25f * (float) ((int) (i % 5) + 1);
      b[i] = 0.125f * (float) ((int) (i % 3) - 1);
    }
    x[n - 1] = 3.0f;  /* never all equal */
    double sum = 0.0;
    for (guint i = 0; i < n; i++)
      sum += x[i];
    const float mean = (float) (sum / (double) n);
    double sum2 = 0.0;
    for (guint i = 0; i < n; i++) {
      const float d = x[i] - mean;
      sum2 += (double) (d * d);
    }
    const float scale = 1.0f / sqrtf ((float) (sum2 / (double) n) + 1e-6f);
    for (int with = 0; with < 2; with++) {
      llm_layernorm (y, x, with ? w : NULL, with ? b : NULL, n, 1e-6f);
      for (guint i = 0; i < n; i++) {
        float want = (x[i] - mean) * scale;
        if (with)
          want = want * w[i] + b[i];
        ck_assert_msg (y[i] == want, "length %u, element %u, weight and bias %d: %.9g, want %.9g",
            n, i, with, y[i], want);
      }
    }
  }
}
END_TEST

START_TEST (test_layernorm_matches_a_double_reference)
{
  enum { N = 768 };
  float x[N], w[N], b[N], y[N];
  llm_test_rng_seed (3);
  for (guint i = 0; i < N; i++) {
    x[i] = 3.0f + 2.0f * llm_test_rng_float ();
    w[i] = 1.0f + 0.5f * llm_test_rng_float ();
    b[i] = 0.1f * llm_test_rng_float ();
  }
  llm_layernorm (y, x, w, b, N, 1e-6f);
  double mean = 0, var = 0;
  for (guint i = 0; i < N; i++)
    mean += x[i];
  mean /= N;
  for (guint i = 0; i < N; i++)
    var += (x[i] - mean) * (x[i] - mean);
  var /= N;
  for (guint i = 0; i < N; i++) {
    const double want = (x[i] - mean) / sqrt (var + 1e-6) * w[i] + b[i];
    ck_assert_msg (fabs (y[i] - want) <= 1e-5 * (1 + fabs (want)), "%u: %g against %g", i,
        y[i], want);
  }
  /* In place, and without weight and bias: mean 0, variance 1. */
  llm_layernorm (x, x, NULL, NULL, N, 0.0f);
  double m = 0, v = 0;
  for (guint i = 0; i < N; i++)
    m += x[i];
  m /= N;
  for (guint i = 0; i < N; i++)
    v += (x[i] - m) * (x[i] - m);
  ck_assert_double_eq_tol (m, 0.0, 1e-6);
  ck_assert_double_eq_tol (v / N, 1.0, 1e-5);
}
END_TEST

START_TEST (test_gelus_match_their_formulas)
{
  enum { N = 2001 };
  float a[N], q[N];
  for (guint i = 0; i < N; i++)
    a[i] = q[i] = -10.0f + 0.01f * (float) i;
  llm_gelu (a, a, N);
  llm_gelu_quick (q, q, N);
  for (guint i = 0; i < N; i++) {
    const double x = -10.0 + 0.01 * i;
    const double t = 0.5 * x * (1 + tanh (sqrt (2 / G_PI) * (x + 0.044715 * x * x * x)));
    const double s = x / (1 + exp (-1.702 * x));
    ck_assert_msg (fabs (a[i] - t) <= 2e-6 * (1 + fabs (t)), "tanh GELU at %g: %g", x, a[i]);
    ck_assert_msg (fabs (q[i] - s) <= 2e-6 * (1 + fabs (s)), "quick GELU at %g: %g", x, q[i]);
  }
  /* The erf GELU differs from the tanh one by under 1e-3 (a check that
   * the formula is GELU at all). */
  ck_assert (fabs (a[1100] - 0.5 * 1.0 * (1 + erf (1.0 / G_SQRT2))) < 1e-3);
}
END_TEST

/* Every kernel set's GELUs give the reference's bits, over the whole
 * range (both tails, where exp leaves the floats, and around 0) and at
 * every alignment and tail length. */
START_TEST (test_gelu_kernels_equal_the_reference)
{
  enum { N = 4099 };
  g_autofree float *x = g_new (float, N), *want = g_new (float, N), *got = g_new (float, N);
  llm_test_rng_seed (11);
  for (guint i = 0; i < N; i++)
    x[i] = i < 64 ? -60.0f + 2.0f * (float) i : 8.0f * llm_test_rng_float ();
  x[100] = 0.0f;
  x[101] = -0.0f;
  x[102] = 1e-30f;
  x[103] = INFINITY;
  x[104] = -INFINITY;
  x[105] = NAN;
  const LlmCpuIsa isas[] = { LLM_CPU_ISA_SCALAR, LLM_CPU_ISA_AVX2, LLM_CPU_ISA_AVX512 };
  static void (*const refs[]) (float *, const float *, size_t) = {
    llm_gelu, llm_gelu_quick, llm_gelu_erf,
  };
  static void (*const kernels[]) (const LlmCpuKernels *, float *, const float *, size_t) = {
    llm_cpu_gelu, llm_cpu_gelu_quick, llm_cpu_gelu_erf,
  };
  static const char *const names[] = { "tanh", "quick", "erf" };
  for (guint g = 0; g < G_N_ELEMENTS (refs); g++) {
    refs[g] (want, x, N);
    for (guint k = 0; k < G_N_ELEMENTS (isas); k++) {
      const LlmCpuKernels *kern = llm_cpu_kernels (isas[k]);
      if (kern == NULL)
        continue;
      for (guint off = 0; off < 9; off++) {
        memset (got, 0, N * sizeof *got);
        kernels[g] (kern, got + off, x + off, N - off);
        for (guint i = off; i < N; i++)
          ck_assert_msg (memcmp (&got[i], &want[i], sizeof (float)) == 0,
              "%s %s GELU at %g: %a, the reference %a", llm_cpu_isa_name (isas[k]),
              names[g], x[i], got[i], want[i]);
      }
    }
  }
  /* In place too. */
  memcpy (got, x, N * sizeof *got);
  llm_cpu_gelu (llm_cpu_kernels_best (), got, got, N);
  llm_gelu (want, x, N);
  ck_assert (memcmp (got, want, N * sizeof *got) == 0);
}
END_TEST

START_TEST (test_erf_is_within_6e_7_of_erf)
{
  /* Every 1e-3 over [-10, 10], where erf leaves 1 behind, and the ends:
   * the reference against libm's double erf, and Whisper's GELU built on
   * it within 3e-7 of its exact value relative to 1 + |GELU|. */
  for (int i = -10000; i <= 10000; i++) {
    const float x = (float) i / 1000.0f;
    ck_assert_msg (fabs ((double) llm_erf_ref (x) - erf ((double) x)) <= 6e-7,
        "erf (%g): %.9g against %.9g", x, llm_erf_ref (x), erf ((double) x));
    const float v = 2.0f * x;
    float y;
    llm_gelu_erf (&y, &v, 1);
    const double want = 0.5 * v * (1 + erf (v / sqrt (2.0)));
    ck_assert_msg (fabs (y - want) <= 3e-7 * (1 + fabs (want)), "GELU (%g): %.9g against %.9g",
        v, y, want);
  }
  ck_assert (llm_erf_ref (0.0f) == 0.0f && !signbit (llm_erf_ref (0.0f)));
  ck_assert (llm_erf_ref (-0.0f) == 0.0f && signbit (llm_erf_ref (-0.0f)));
  ck_assert (llm_erf_ref (INFINITY) == 1.0f && llm_erf_ref (-INFINITY) == -1.0f);
  ck_assert (isnan (llm_erf_ref (NAN)));
  ck_assert (llm_erf_ref (1e-30f) >= 0.0f && llm_erf_ref (1e-30f) < 1e-6f);
}
END_TEST

START_TEST (test_add_kernels_equal_the_reference)
{
  enum { N = 1037 };
  float a[N], b[N], want[N], got[N];
  llm_test_rng_seed (12);
  for (guint i = 0; i < N; i++) {
    a[i] = 100.0f * llm_test_rng_float ();
    b[i] = llm_test_rng_float ();
  }
  llm_add (want, a, b, N);
  const LlmCpuIsa isas[] = { LLM_CPU_ISA_SCALAR, LLM_CPU_ISA_AVX2, LLM_CPU_ISA_AVX512 };
  for (guint k = 0; k < G_N_ELEMENTS (isas); k++) {
    const LlmCpuKernels *kern = llm_cpu_kernels (isas[k]);
    if (kern == NULL)
      continue;
    for (guint off = 0; off < 9; off++) {
      llm_cpu_add (kern, got + off, a + off, b + off, N - off);
      ck_assert (memcmp (got + off, want + off, (N - off) * sizeof *got) == 0);
    }
  }
}
END_TEST

static Suite *
vision_ops_suite (void)
{
  Suite *s = suite_create ("vision-ops");
  TCase *tc = tcase_create ("ops");
  tcase_add_test (tc, test_normalize_is_mtmds_arithmetic_in_planes);
  tcase_add_test (tc, test_pixel_shuffle_replays_the_graphs_reshapes);
  tcase_add_test (tc, test_patch_rows_times_the_kernel_are_the_convolution);
  tcase_add_test (tc, test_layernorm_matches_a_double_reference);
  tcase_add_test (tc, test_layernorm_sums_every_element_at_every_length);
  tcase_add_test (tc, test_gelus_match_their_formulas);
  tcase_add_test (tc, test_gelu_kernels_equal_the_reference);
  tcase_add_test (tc, test_erf_is_within_6e_7_of_erf);
  tcase_add_test (tc, test_add_kernels_equal_the_reference);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (vision_ops_suite)
