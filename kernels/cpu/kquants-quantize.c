/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Every product and sum below is written in ggml's order and kept in
 * float: a different association changes the last bit of a scale, then a
 * code, then the file. Contracting a*b+c into an FMA would do the same;
 * GCC in ISO C mode (the build's c_std) does not, clang needs telling.
 * Do not "tidy" the arithmetic; add a separate quantizer for a better
 * search. */
#include "kquants-quantize.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include <math.h>
#include <string.h>

#include "fp16.h"
#include "ggml-type.h"

/* ggml's threshold for a group that is all (near) zero. */
#define GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even, for |f| < 2^22 (see kquants.c). */
static inline int
nearest_int (float f)
{
  const float v = f + 12582912.0f;
  int32_t i;
  memcpy (&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

static inline int
clamp_int (int v, int lo, int hi)
{
  return v < lo ? lo : v > hi ? hi : v;
}

/* --- Q4_K and Q5_K: 8 sub-blocks of 32 with a scale and a minimum --- */

/* Fits x[i] ~= scale * L[i] - min over @n values with L in [0, nmax],
 * minimising sum w[i] (error)^2. Starts from the range [min(x, 0), max(x)]
 * mapped onto the codes, then tries nstep + 1 slightly different code
 * spacings (rmin + rdelta * k extra codes across the range), each time
 * solving the weighted least-squares scale and minimum for the codes it
 * rounds to, and keeps the best. Returns the scale; *neg_min = min >= 0. */
static float
fit_scale_min (int n, int nmax, const float *x, const float *w, uint8_t *L,
    float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min)
      min = x[i];
    if (x[i] > max)
      max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  /* The minimum only ever lowers the codes' origin: a positive one would
   * waste codes below the smallest value. */
  if (min > 0)
    min = 0;
  if (max == min) {
    memset (L, 0, (size_t) n);
    *neg_min = -min;
    return 0.0f;
  }

  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; i++) {
    L[i] = (uint8_t) clamp_int (nearest_int (iscale * (x[i] - min)), 0, nmax);
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += w[i] * diff;
  }

  for (int is = 0; is <= nstep; is++) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
      const int l = clamp_int (nearest_int (iscale * (x[i] - min)), 0, nmax);
      Laux[i] = (uint8_t) l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    /* Normal equations of the 2-parameter fit; D is their determinant. */
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; i++) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = diff * diff;
        error += w[i] * diff;
      }
      if (error < best_error) {
        memcpy (L, Laux, (size_t) n);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

/* One Q4_K/Q5_K super-block's scales: fills @d, @dmin (halves), the 12
 * packed scale bytes and the 256 codes @L (0..nmax). */
static void
quantize_super_block_k4 (const float *x, int nmax, float rmin, float rdelta, int nstep,
    uint16_t *d_out, uint16_t *dmin_out, uint8_t *packed, uint8_t *L)
{
  float scales[LLM_QK_K / 32], mins[LLM_QK_K / 32];
  float weights[32];
  uint8_t Laux[32];

  /* Each sub-block is fitted on its own, weighting a value by its size
   * plus the sub-block's RMS so large weights are kept more exactly. */
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < LLM_QK_K / 32; j++) {
    const float *xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++)
      sum_x2 += xs[l] * xs[l];
    const float av_x = sqrtf (sum_x2 / 32);
    for (int l = 0; l < 32; l++)
      weights[l] = av_x + fabsf (xs[l]);
    scales[j] = fit_scale_min (32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin,
        rdelta, nstep);
    if (scales[j] > max_scale)
      max_scale = scales[j];
    if (mins[j] > max_min)
      max_min = mins[j];
  }

  /* Scales and minimums become 6-bit multiples of two half-precision
   * super-block factors. */
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < LLM_QK_K / 32; j++) {
    uint8_t ls = (uint8_t) nearest_int (inv_scale * scales[j]);
    uint8_t lm = (uint8_t) nearest_int (inv_min * mins[j]);
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    /* The layout llm_k4_scale_min() reads. */
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = (uint8_t) ((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= (uint8_t) ((ls >> 4) << 6);
      packed[j] |= (uint8_t) ((lm >> 4) << 6);
    }
  }
  *d_out = llm_fp16_from_f32 (max_scale / 63.f);
  *dmin_out = llm_fp16_from_f32 (max_min / 63.f);

  /* Codes again against the scales as stored, so rounding of the scales
   * does not add to the error. A sub-block whose scale rounded to 0 keeps
   * the codes of its own fit (they dequantize to -min either way). */
  const float d = llm_fp16_to_f32 (*d_out);
  const float dmin = llm_fp16_to_f32 (*dmin_out);
  for (int j = 0; j < LLM_QK_K / 32; j++) {
    uint8_t sc, m;
    llm_k4_scale_min (j, packed, &sc, &m);
    const float ds = d * sc;
    if (!ds)
      continue;
    const float dm = dmin * m;
    for (int i = 0; i < 32; i++)
      L[32 * j + i] = (uint8_t) clamp_int (nearest_int ((x[32 * j + i] + dm) / ds), 0, nmax);
  }
}

void
llm_quantize_row_q4_K (const float *src, LlmBlockQ4_K *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  uint8_t L[LLM_QK_K];
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const float *x = src + b * LLM_QK_K;
    LlmBlockQ4_K *y = &dst[b];
    quantize_super_block_k4 (x, 15, -1.0f, 0.1f, 20, &y->d, &y->dmin, y->scales, L);
    for (int g = 0; g < LLM_QK_K / 64; g++)
      for (int l = 0; l < 32; l++)
        y->qs[32 * g + l] = (uint8_t) (L[64 * g + l] | (L[64 * g + 32 + l] << 4));
  }
}

void
llm_quantize_row_q5_K (const float *src, LlmBlockQ5_K *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  uint8_t L[LLM_QK_K];
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const float *x = src + b * LLM_QK_K;
    LlmBlockQ5_K *y = &dst[b];
    quantize_super_block_k4 (x, 31, -0.5f, 0.1f, 15, &y->d, &y->dmin, y->scales, L);
    memset (y->qh, 0, sizeof y->qh);
    for (int g = 0; g < LLM_QK_K / 64; g++) {
      for (int l = 0; l < 32; l++) {
        const int lo = L[64 * g + l], hi = L[64 * g + 32 + l];
        y->qs[32 * g + l] = (uint8_t) ((lo & 0xF) | ((hi & 0xF) << 4));
        y->qh[l] |= (uint8_t) (((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      }
    }
  }
}

/* --- Q6_K: 16 sub-blocks of 16 with a signed scale --- */

/* Fits x[i] ~= scale * (L[i] - nmax) with L - nmax in [-nmax, nmax - 1],
 * weighting each value by x^2. The value of largest magnitude first maps
 * to -nmax (whatever its sign: the scale takes the sign); then 18 nearby
 * spacings are tried and the one with the best least-squares fit kept.
 * Returns the scale. */
static float
fit_scale_symmetric (int n, int nmax, const float *x, int8_t *L)
{
  float max = 0, amax = 0;
  for (int i = 0; i < n; i++) {
    const float ax = fabsf (x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    memset (L, 0, (size_t) n);
    return 0.f;
  }

  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; i++) {
    const int l = clamp_int (nearest_int (iscale * x[i]), -nmax, nmax - 1);
    L[i] = (int8_t) (l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  /* With the least-squares scale, the weighted error falls as sumlx^2 /
   * suml2 grows, so that ratio ranks the candidates. */
  float best = scale * sumlx;
  for (int is = -9; is <= 9; is++) {
    if (is == 0)
      continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; i++) {
      const int l = clamp_int (nearest_int (iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; i++)
        L[i] = (int8_t) (nmax + clamp_int (nearest_int (iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void
llm_quantize_row_q6_K (const float *src, LlmBlockQ6_K *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  int8_t L[LLM_QK_K];
  float scales[LLM_QK_K / 16];
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const float *x = src + b * LLM_QK_K;
    LlmBlockQ6_K *y = &dst[b];

    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < LLM_QK_K / 16; j++) {
      scales[j] = fit_scale_symmetric (16, 32, x + 16 * j, L + 16 * j);
      if (fabsf (scales[j]) > max_abs_scale) {
        max_abs_scale = fabsf (scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
      memset (y, 0, sizeof *y);
      continue;
    }

    /* Signed 8-bit sub-block scales: the largest maps to -128, as the
     * codes did, so the sign of d carries that of the largest scale. */
    const float iscale = -128.f / max_scale;
    y->d = llm_fp16_from_f32 (1 / iscale);
    for (int j = 0; j < LLM_QK_K / 16; j++) {
      const int v = nearest_int (iscale * scales[j]);
      y->scales[j] = (int8_t) (v < 127 ? v : 127);
    }

    const float d = llm_fp16_to_f32 (y->d);
    for (int j = 0; j < LLM_QK_K / 16; j++) {
      const float ds = d * y->scales[j];
      if (!ds)
        continue;
      for (int i = 0; i < 16; i++)
        L[16 * j + i] = (int8_t) (clamp_int (nearest_int (x[16 * j + i] / ds), -32, 31) + 32);
    }

    /* 128 values per half: ql byte l holds elements l (low nibble) and
     * l + 64 (high), byte l + 32 elements l + 32 and l + 96; qh byte l the
     * top two bits of l, l + 32, l + 64, l + 96. */
    for (int h = 0; h < LLM_QK_K / 128; h++) {
      const int8_t *Lh = L + 128 * h;
      uint8_t *ql = y->ql + 64 * h;
      uint8_t *qh = y->qh + 32 * h;
      for (int l = 0; l < 32; l++) {
        ql[l] = (uint8_t) ((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = (uint8_t) ((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = (uint8_t) ((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4)
            | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

bool
llm_quantize_row_kquant (uint32_t wtype, const float *src, void *dst, size_t n)
{
  switch (wtype) {
    case LLM_TYPE_Q4_K:
      llm_quantize_row_q4_K (src, dst, n);
      return true;
    case LLM_TYPE_Q5_K:
      llm_quantize_row_q5_K (src, dst, n);
      return true;
    case LLM_TYPE_Q6_K:
      llm_quantize_row_q6_K (src, dst, n);
      return true;
    default:
      return false;
  }
}
