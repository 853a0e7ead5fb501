/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Element-wise operations, written to round like ggml's CPU ops: where
 * ggml keeps an intermediate in float (the rmsnorm scale, the softmax
 * normaliser, the rope angle) we do too, so results agree bit for bit
 * wherever the compiler does not fuse multiply-adds (the norms' sums in
 * double: see sum16). */
#include "ops.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "exp.h"
#include "kernels-table.h"
#ifdef LLM_HAVE_AVX2
#include "ops-avx2.h"
#include "ops-avx512.h"
#endif

/* Four floats, for element-wise loops the compiler at -O2 leaves scalar
 * (it will not assume @out and @x do not overlap): the same products,
 * four at a time, on every target GCC builds for. */
typedef float LlmF4 __attribute__ ((vector_size (16)));

static void
rmsnorm_scale (float *out, const float *x, const float *w, size_t n, double sum, float eps)
{
  const float mean = (float) (sum / (double) n);
  const float scale = 1.0f / sqrtf (mean + eps);
  /* x * scale is rounded before the weight multiplies it, as in ggml
   * where the weight is a separate ggml_mul. Each element is read before
   * it is written, so @out may be @x. */
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    LlmF4 v, k = { 1.0f, 1.0f, 1.0f, 1.0f };
    memcpy (&v, x + i, sizeof v);
    v = v * scale;
    if (w != NULL)
      memcpy (&k, w + i, sizeof k);
    v = v * k;
    memcpy (out + i, &v, sizeof v);
  }
  for (; i < n; i++) {
    const float v = x[i] * scale;
    out[i] = w != NULL ? v * w[i] : v;
  }
}

typedef double LlmD2 __attribute__ ((vector_size (16)));

/* Floats 0, 1 and 2, 3 of @v in double: cvtps2pd on x86, where the
 * portable form of the second pair took five instructions. */
#ifdef __SSE2__
#define LLM_D2_LO(v) ((LlmD2) _mm_cvtps_pd ((__m128) (v)))
#define LLM_D2_HI(v) ((LlmD2) _mm_cvtps_pd (_mm_movehl_ps ((__m128) (v), (__m128) (v))))
#else
#define LLM_D2_LO(v) __builtin_convertvector (__builtin_shufflevector (v, v, 0, 1), LlmD2)
#define LLM_D2_HI(v) __builtin_convertvector (__builtin_shufflevector (v, v, 2, 3), LlmD2)
#endif

/* The sum in double of x[i] - @centre or, with @square, of its square
 * (each rounded in float, as ggml's), in sixteen running sums (element i
 * into sum i % 16) added pairwise at the end. ggml adds them in order, one
 * chain of @n additions, which waited on the adder's latency: a row of
 * rmsnorm over 1024 took 0.80 us against 0.31 so, of layernorm over 768
 * 1.43 against 0.39 (the library's SSE2 build, Zen 5), and rmsnorm runs
 * twice a layer in every decode step. The double sums differ from
 * ggml's in their last bits only, far below the floats they are rounded
 * to: over 2 million rmsnorm rows of 1024 (normal, scales e^-5 to e^5) 6%
 * of the double sums differed and not one float scale, and over a million
 * layernorm rows of 768 (a third of them centred on zero) not one output. */
static inline double
sum16 (const float *x, size_t n, float centre, bool square)
{
  const LlmF4 c = { centre, centre, centre, centre };
  /* Eight pairs of sums in registers of two doubles, named: as wider
   * vectors or an array indexed in a loop, the compiler kept them on the
   * stack (a store and a load a vector). */
  LlmD2 a0 = { 0 }, a1 = { 0 }, b0 = { 0 }, b1 = { 0 };
  LlmD2 c0 = { 0 }, c1 = { 0 }, d0 = { 0 }, d1 = { 0 };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    LlmF4 v0, v1, v2, v3;
    memcpy (&v0, x + i, sizeof v0);
    memcpy (&v1, x + i + 4, sizeof v1);
    memcpy (&v2, x + i + 8, sizeof v2);
    memcpy (&v3, x + i + 12, sizeof v3);
    v0 = v0 - c;
    v1 = v1 - c;
    v2 = v2 - c;
    v3 = v3 - c;
    if (square) {
      v0 = v0 * v0;
      v1 = v1 * v1;
      v2 = v2 * v2;
      v3 = v3 * v3;
    }
    a0 += LLM_D2_LO (v0);
    a1 += LLM_D2_HI (v0);
    b0 += LLM_D2_LO (v1);
    b1 += LLM_D2_HI (v1);
    c0 += LLM_D2_LO (v2);
    c1 += LLM_D2_HI (v2);
    d0 += LLM_D2_LO (v3);
    d1 += LLM_D2_HI (v3);
  }
  double tail = 0.0;
  for (; i < n; i++) {
    const float v = x[i] - centre;
    tail += (double) (square ? v * v : v);
  }
  const LlmD2 lo = (a0 + b0) + (c0 + d0), hi = (a1 + b1) + (c1 + d1);
  return ((lo[0] + lo[1]) + (hi[0] + hi[1])) + tail;
}

void
llm_rmsnorm (float *out, const float *x, const float *w, size_t n, float eps)
{
  rmsnorm_scale (out, x, w, n, sum16 (x, n, 0.0f, true), eps);
}

void
llm_rmsnorm_rows (float *out, const float *x, const float *w, size_t n, size_t n_rows,
    float eps)
{
  for (size_t r = 0; r < n_rows; r++)
    llm_rmsnorm (out + r * n, x + r * n, w, n, eps);
}

void
llm_softmax (float *x, size_t n)
{
  if (n == 0)
    return;
  float max = x[0];
  for (size_t i = 1; i < n; i++)
    max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) {
    x[i] = llm_exp_ref (x[i] - max);
    sum += (double) x[i];
  }
  /* One float reciprocal, then a multiply per value, like ggml. */
  const float inv = (float) (1.0 / sum);
  for (size_t i = 0; i < n; i++)
    x[i] *= inv;
}

void
llm_swiglu (float *out, const float *gate, const float *up, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    const float g = gate[i];
    const float silu = g / (1.0f + llm_exp_ref (-g));
    out[i] = silu * up[i];
  }
}

void
llm_cpu_swiglu (const LlmCpuKernels *kern, float *out, const float *gate, const float *up,
    size_t n)
{
#ifdef LLM_HAVE_AVX512
  if (kern->isa >= LLM_CPU_ISA_AVX512) {
    llm_avx512_swiglu (out, gate, up, n);
    return;
  }
#endif
#ifdef LLM_HAVE_AVX2
  if (kern->isa >= LLM_CPU_ISA_AVX2) {
    llm_avx2_swiglu (out, gate, up, n);
    return;
  }
#endif
  (void) kern;
  llm_swiglu (out, gate, up, n);
}

void
llm_add (float *out, const float *a, const float *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = a[i] + b[i];
}

void
llm_cpu_add (const LlmCpuKernels *kern, float *out, const float *a, const float *b, size_t n)
{
#ifdef LLM_HAVE_AVX2
  if (kern->isa >= LLM_CPU_ISA_AVX2) {
    llm_avx2_add (out, a, b, n);
    return;
  }
#endif
  (void) kern;
  llm_add (out, a, b, n);
}

void
llm_layernorm (float *out, const float *x, const float *w, const float *b, size_t n,
    float eps)
{
  const float mean = (float) (sum16 (x, n, 0.0f, false) / (double) n);
  const float scale = 1.0f / sqrtf ((float) (sum16 (x, n, mean, true) / (double) n) + eps);
  /* Four at a time as rmsnorm_scale, each element read before written. */
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    /* Without a weight or bias, * 1 and + -0 leave every value as it is. */
    LlmF4 v, k = { 1.0f, 1.0f, 1.0f, 1.0f }, c = { -0.0f, -0.0f, -0.0f, -0.0f };
    memcpy (&v, x + i, sizeof v);
    v = (v - mean) * scale;
    if (w != NULL)
      memcpy (&k, w + i, sizeof k);
    if (b != NULL)
      memcpy (&c, b + i, sizeof c);
    v = v * k + c;
    memcpy (out + i, &v, sizeof v);
  }
  for (; i < n; i++) {
    float v = (x[i] - mean) * scale;
    if (w != NULL)
      v *= w[i];
    if (b != NULL)
      v += b[i];
    out[i] = v;
  }
}

void
llm_gelu (float *out, const float *x, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    const float v = x[i];
    const float a = v * fmaf (LLM_GELU_COEF, v * v, 1.0f);
    out[i] = v / (1.0f + llm_exp_ref (a * LLM_GELU_M2K));
  }
}

void
llm_gelu_quick (float *out, const float *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = x[i] / (1.0f + llm_exp_ref (x[i] * LLM_GELU_QUICK_M));
}

void
llm_gelu_erf (float *out, const float *x, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + llm_erf_ref (v * LLM_GELU_ERF_K));
  }
}

typedef void (*LlmGeluFn) (float *out, const float *x, size_t n);

/* @avx2 where the kernels have AVX2 (NULL: this build has none), else the
 * reference @ref: the same bits either way. */
static void
gelu_by_isa (const LlmCpuKernels *kern, LlmGeluFn avx2, LlmGeluFn ref, float *out,
    const float *x, size_t n)
{
  if (avx2 != NULL && kern->isa >= LLM_CPU_ISA_AVX2)
    avx2 (out, x, n);
  else
    ref (out, x, n);
}

#ifdef LLM_HAVE_AVX2
#define AVX2_GELU(f) (f)
#else
#define AVX2_GELU(f) NULL
#endif

void
llm_cpu_gelu (const LlmCpuKernels *kern, float *out, const float *x, size_t n)
{
  gelu_by_isa (kern, AVX2_GELU (llm_avx2_gelu), llm_gelu, out, x, n);
}

void
llm_cpu_gelu_quick (const LlmCpuKernels *kern, float *out, const float *x, size_t n)
{
  gelu_by_isa (kern, AVX2_GELU (llm_avx2_gelu_quick), llm_gelu_quick, out, x, n);
}

void
llm_cpu_gelu_erf (const LlmCpuKernels *kern, float *out, const float *x, size_t n)
{
  gelu_by_isa (kern, AVX2_GELU (llm_avx2_gelu_erf), llm_gelu_erf, out, x, n);
}

/* The pairs llm_rope turns: @n_rot clamped to @head_dim, even. */
static size_t
rope_half (size_t head_dim, size_t n_rot)
{
  return (n_rot > head_dim ? head_dim : n_rot) / 2;
}

/* ggml's angle is a running float product: theta_0 = pos, theta_{i+1} =
 * theta_i * s with s = base^(-2/n_rot), and pair i turns by freq_scale *
 * theta_i. */
typedef struct {
  float theta, step, freq_scale;
} RopeAngle;

static RopeAngle
rope_angle_start (size_t half, int64_t pos, float freq_base, float freq_scale)
{
  return (RopeAngle) { (float) pos, powf (freq_base, -2.0f / (float) (2 * half)), freq_scale };
}

static void
rope_angle_next (RopeAngle *a, float *c, float *s)
{
  const float t = a->freq_scale * a->theta;
  *c = cosf (t);
  *s = sinf (t);
  a->theta *= a->step;
}

/* Pairs [@i0, @i1) of every head turned by the angles @cs (pair i's cos
 * and sin at cs[2 (i - i0)], cs[2 (i - i0) + 1]). Normal: pair (2i, 2i+1);
 * NeoX: pair (i, i + half). Heads outside, pairs inside: each head's
 * values and the angles are read in order (a 16-row step spent 0.7% of
 * its time turning pairs a head apart). */
static void
rope_turn_range (float *x, size_t n_heads, size_t head_dim, size_t half, size_t i0, size_t i1,
    const float *cs, int neox)
{
  const size_t step = neox ? 1 : 2, other = neox ? half : 1;
  for (size_t h = 0; h < n_heads; h++) {
    float *v = x + h * head_dim;
    for (size_t i = i0; i < i1; i++) {
      float *a = v + i * step, *b = a + other;
      const float x0 = *a, x1 = *b, c = cs[2 * (i - i0)], s = cs[2 * (i - i0) + 1];
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

/* Angles a chunk at a time, so any n_rot fits the stack. */
#define ROPE_CHUNK 64

void
llm_rope (float *x, size_t n_heads, size_t head_dim, size_t n_rot, int64_t pos,
    float freq_base, float freq_scale, int neox)
{
  const size_t half = rope_half (head_dim, n_rot);
  RopeAngle a = rope_angle_start (half, pos, freq_base, freq_scale);
  float cs[2 * ROPE_CHUNK];
  for (size_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
    const size_t i1 = i0 + ROPE_CHUNK < half ? i0 + ROPE_CHUNK : half;
    for (size_t i = i0; i < i1; i++)
      rope_angle_next (&a, &cs[2 * (i - i0)], &cs[2 * (i - i0) + 1]);
    rope_turn_range (x, n_heads, head_dim, half, i0, i1, cs, neox);
  }
}

size_t
llm_rope_angles_floats (size_t head_dim, size_t n_rot)
{
  return 2 * rope_half (head_dim, n_rot);
}

void
llm_rope_angles (size_t head_dim, size_t n_rot, int64_t pos, float freq_base, float freq_scale,
    float *cs)
{
  const size_t half = rope_half (head_dim, n_rot);
  RopeAngle a = rope_angle_start (half, pos, freq_base, freq_scale);
  for (size_t i = 0; i < half; i++)
    rope_angle_next (&a, &cs[2 * i], &cs[2 * i + 1]);
}

void
llm_rope_turn (float *x, size_t n_heads, size_t head_dim, size_t n_rot, const float *cs,
    int neox)
{
  const size_t half = rope_half (head_dim, n_rot);
  rope_turn_range (x, n_heads, head_dim, half, 0, half, cs, neox);
}
