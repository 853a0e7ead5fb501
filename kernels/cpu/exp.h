/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* exp(x) for the softmax and SiLU, the scalar reference of the vector
 * versions in exp-simd.h, which give the same bits for every input.
 *
 * libm's expf is exact to the last bit but one call per value: at a
 * context of 4096 it was half of a decode step. This is the classic
 * reduction and polynomial, cheap in vectors, within 2 ulp of exp:
 *   n = rint(x * log2 e), r = x - n ln2 (ln2 in two parts, each step one
 *   fused multiply-add, so r is all but exact), e^r = 1 + r + r^2 P(r)
 *   with Cephes' degree-5 minimax P on |r| <= ln2 / 2, times 2^n built
 *   in the exponent bits.
 * Every operation is one IEEE operation (fmaf, a multiply, an add, rint
 * to nearest even), so a vector lane doing the same sequence rounds the
 * same way. Below LLM_EXP_MIN (where exp leaves the normal floats) it
 * gives 0, above LLM_EXP_MAX (2^n would pass 2^127) +inf; NaN stays
 * NaN. The softmax's arguments are <= 0 and SiLU's results at either
 * end are 0 or the input, so neither limit shows in what they compute.
 * Pure C, no GLib. */
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#define LLM_EXP_MIN (-87.33654f)    /* ln 2^-126 */
#define LLM_EXP_MAX 88.37f          /* rint (x log2 e) <= 127 */
#define LLM_EXP_LOG2E 1.44269504088896341f
/* ln 2 = HI + LO, HI with 16 significant bits so n * HI is exact. */
#define LLM_EXP_LN2_HI 0.693359375f
#define LLM_EXP_LN2_LO (-2.12194440e-4f)
#define LLM_EXP_P0 1.9875691500e-4f
#define LLM_EXP_P1 1.3981999507e-3f
#define LLM_EXP_P2 8.3334519073e-3f
#define LLM_EXP_P3 4.1665795894e-2f
#define LLM_EXP_P4 1.6666665459e-1f
#define LLM_EXP_P5 5.0000001201e-1f

/* GELUs' constants (ops.h): -2 sqrt (2 / pi), the cubic's, CLIP's -1.702. */
#define LLM_GELU_M2K (-1.5957691216057308f)
#define LLM_GELU_COEF 0.044715f
#define LLM_GELU_QUICK_M (-1.702f)

static inline float
llm_exp_ref (float x)
{
  if (!(x > LLM_EXP_MIN))
    return x != x ? x : 0.0f;
  if (x > LLM_EXP_MAX)
    return INFINITY;
  const float n = rintf (x * LLM_EXP_LOG2E);
  float r = fmaf (n, -LLM_EXP_LN2_HI, x);
  r = fmaf (n, -LLM_EXP_LN2_LO, r);
  float p = LLM_EXP_P0;
  p = fmaf (p, r, LLM_EXP_P1);
  p = fmaf (p, r, LLM_EXP_P2);
  p = fmaf (p, r, LLM_EXP_P3);
  p = fmaf (p, r, LLM_EXP_P4);
  p = fmaf (p, r, LLM_EXP_P5);
  const float y = fmaf (p, r * r, r) + 1.0f;
  const uint32_t bits = (uint32_t) ((int32_t) n + 127) << 23;
  float scale;
  memcpy (&scale, &bits, sizeof scale);
  return y * scale;
}

/* erf(x) for Whisper's GELU, Abramowitz and Stegun 7.1.26 on |x| with
 * the sign put back: erf |x| = 1 - t P(t) e^(-x^2), t = 1 / (1 + p |x|),
 * within 1.5e-7 of erf. In float, over every float in [-10, 10], within
 * 5.7e-7 of erf (the worst near 0.04, where 1 - t P(t) e^(-x^2) cancels;
 * libm's erff is within 5.8e-8), and Whisper's GELU built on it within
 * 2.6e-7 of its exact value relative to 1 + |GELU|. libm's erff is a call
 * per value: in the audio tower's GELU it was 8.6% of the samples.
 * Every step is one IEEE operation (e^ as llm_exp_ref), so a vector lane
 * doing the same sequence gives the same bits; NaN stays NaN, +-inf give
 * +-1. */
#define LLM_ERF_P 0.3275911f
#define LLM_ERF_A1 0.254829592f
#define LLM_ERF_A2 (-0.284496736f)
#define LLM_ERF_A3 1.421413741f
#define LLM_ERF_A4 (-1.453152027f)
#define LLM_ERF_A5 1.061405429f
/* 1 / sqrt (2), Whisper's GELU's argument scale. */
#define LLM_GELU_ERF_K 0.70710678118654752440f

static inline float
llm_erf_ref (float x)
{
  const float ax = fabsf (x);
  const float t = 1.0f / fmaf (LLM_ERF_P, ax, 1.0f);
  float p = LLM_ERF_A5;
  p = fmaf (p, t, LLM_ERF_A4);
  p = fmaf (p, t, LLM_ERF_A3);
  p = fmaf (p, t, LLM_ERF_A2);
  p = fmaf (p, t, LLM_ERF_A1);
  const float y = fmaf (-(p * t), llm_exp_ref (-(ax * ax)), 1.0f);
  return copysignf (y, x);
}
