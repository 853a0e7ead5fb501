/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scalar reference K-quant kernels. Each dot product first expands a
 * super-block to 256 small signed integers, then forms exact integer sums
 * in eight lanes (lane l takes elements l, l + 8, ...), scales each lane by
 * d_w * d_x in float and adds the lanes at the very end: the same
 * operations, in the same order, as ggml's scalar vec_dot_qN_K_q8_K. */
#include "kquants.h"

#include <math.h>
#include <string.h>

#include "fp16.h"

/* Round to nearest, ties to even, for |f| < 2^22: adding 1.5 * 2^23 puts
 * the integer in the low mantissa bits. ggml rounds the same way. */
static inline int
nearest_int (float f)
{
  const float v = f + 12582912.0f;
  int32_t i;
  memcpy (&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

void
llm_quantize_row_q8_K (const float *src, LlmBlockQ8_K *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const float *x = src + b * LLM_QK_K;
    LlmBlockQ8_K *y = &dst[b];

    /* The signed value of largest magnitude (first one wins). */
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < LLM_QK_K; j++) {
      const float ax = fabsf (x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      memset (y, 0, sizeof *y);
      continue;
    }

    /* -127/max, not 127/amax: the extreme value lands on -127 whatever its
     * sign (d comes out negative when it is positive). The clamp only
     * guards against rounding above 127. */
    const float iscale = -127.0f / max;
    for (int j = 0; j < LLM_QK_K; j++) {
      const int v = nearest_int (iscale * x[j]);
      y->qs[j] = (int8_t) (v < 127 ? v : 127);
    }
    for (int j = 0; j < LLM_QK_K / 16; j++) {
      int sum = 0;
      for (int i = 0; i < 16; i++)
        sum += y->qs[16 * j + i];
      y->bsums[j] = (int16_t) sum;
    }
    y->d = 1.0f / iscale;
  }
}

void
llm_dequantize_row_q8_K (const LlmBlockQ8_K *src, float *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  for (size_t b = 0; b < n / LLM_QK_K; b++)
    for (int j = 0; j < LLM_QK_K; j++)
      dst[b * LLM_QK_K + j] = src[b].d * (float) src[b].qs[j];
}

/* --- expansion of one super-block to integers --- */

static void
unpack_q4_K (const LlmBlockQ4_K *x, int8_t *a)
{
  const uint8_t *q = x->qs;
  for (int g = 0; g < LLM_QK_K / 64; g++, q += 32, a += 64) {
    for (int l = 0; l < 32; l++) {
      a[l] = (int8_t) (q[l] & 0x0f);
      a[l + 32] = (int8_t) (q[l] >> 4);
    }
  }
}

static void
unpack_q5_K (const LlmBlockQ5_K *x, int8_t *a)
{
  const uint8_t *q = x->qs;
  for (int g = 0; g < LLM_QK_K / 64; g++, q += 32, a += 64) {
    const uint8_t lo_bit = (uint8_t) (1u << (2 * g));
    const uint8_t hi_bit = (uint8_t) (1u << (2 * g + 1));
    for (int l = 0; l < 32; l++) {
      a[l] = (int8_t) ((q[l] & 0x0f) + (x->qh[l] & lo_bit ? 16 : 0));
      a[l + 32] = (int8_t) ((q[l] >> 4) + (x->qh[l] & hi_bit ? 16 : 0));
    }
  }
}

/* Q6_K: each 128-value half uses 64 bytes of ql and 32 of qh. Byte l of
 * the half's ql gives values l (low nibble) and l + 64 (high); byte l + 32
 * gives l + 32 and l + 96; qh[l] holds the two high bits of l, l + 32,
 * l + 64, l + 96 in bits 0-1, 2-3, 4-5, 6-7. */
static void
unpack_q6_K (const LlmBlockQ6_K *x, int8_t *a)
{
  const uint8_t *ql = x->ql;
  const uint8_t *qh = x->qh;
  for (int h = 0; h < 2; h++, ql += 64, qh += 32, a += 128) {
    for (int l = 0; l < 32; l++) {
      a[l] = (int8_t) (((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
      a[l + 32] = (int8_t) (((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      a[l + 64] = (int8_t) (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      a[l + 96] = (int8_t) (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

static void
k4_scales_mins (const uint8_t *packed, uint8_t sc[8], uint8_t m[8])
{
  for (int j = 0; j < 8; j++)
    llm_k4_scale_min (j, packed, &sc[j], &m[j]);
}

/* --- dequantization --- */

/* One Q4_K or Q5_K super-block to @y, from its values @a (unpacked), the
 * packed 6-bit scales and mins and its two fp16 factors. */
static void
dequantize_k4_block (uint16_t d16, uint16_t dmin16, const uint8_t *scales, const int8_t *a,
    float *y)
{
  const float d = llm_fp16_to_f32 (d16);
  const float dmin = llm_fp16_to_f32 (dmin16);
  uint8_t sc[8], m[8];
  k4_scales_mins (scales, sc, m);
  for (int j = 0; j < 8; j++) {
    const float dl = d * sc[j];
    const float ml = dmin * m[j];
    for (int l = 0; l < 32; l++)
      y[32 * j + l] = dl * a[32 * j + l] - ml;
  }
}

void
llm_dequantize_row_q4_K (const LlmBlockQ4_K *src, float *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    int8_t a[LLM_QK_K];
    unpack_q4_K (&src[b], a);
    dequantize_k4_block (src[b].d, src[b].dmin, src[b].scales, a, dst + b * LLM_QK_K);
  }
}

void
llm_dequantize_row_q5_K (const LlmBlockQ5_K *src, float *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    int8_t a[LLM_QK_K];
    unpack_q5_K (&src[b], a);
    dequantize_k4_block (src[b].d, src[b].dmin, src[b].scales, a, dst + b * LLM_QK_K);
  }
}

void
llm_dequantize_row_q6_K (const LlmBlockQ6_K *src, float *dst, size_t n)
{
  assert (n % LLM_QK_K == 0);
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    int8_t a[LLM_QK_K];
    unpack_q6_K (&src[b], a);
    float *y = dst + b * LLM_QK_K;
    for (int k = 0; k < LLM_QK_K; k++)
      y[k] = d * src[b].scales[k / 16] * a[k];
  }
}

/* --- dot products with Q8_K --- */

/* lanes[l] += sum over k = l, l + 8, ... of scale(k) * a[k] * q[k], with
 * one scale per @group values. Integer throughout, so exact. */
static void
lane_sums (const int8_t *a, const int8_t *q, const int *scale, int group, int32_t lanes[8])
{
  for (int l = 0; l < 8; l++)
    lanes[l] = 0;
  for (int k = 0; k < LLM_QK_K; k++)
    lanes[k % 8] += scale[k / group] * (a[k] * q[k]);
}

/* Shared by Q4_K and Q5_K, which differ only in how values unpack. */
static float
dot_k4_block (const int8_t *a, const uint8_t *packed, uint16_t d16, uint16_t dmin16,
    const LlmBlockQ8_K *y, float sums[8])
{
  uint8_t sc[8], m[8];
  k4_scales_mins (packed, sc, m);

  /* The minimums multiply whole sub-blocks, so Q8_K's per-16 sums give
   * their contribution without touching the values. */
  int sum_mins = 0;
  for (int j = 0; j < LLM_QK_K / 16; j++)
    sum_mins += y->bsums[j] * m[j / 2];

  int scale[8];
  for (int j = 0; j < 8; j++)
    scale[j] = sc[j];
  int32_t lanes[8];
  lane_sums (a, y->qs, scale, 32, lanes);

  const float d = llm_fp16_to_f32 (d16) * y->d;
  for (int l = 0; l < 8; l++)
    sums[l] += d * (float) lanes[l];
  const float dmin = llm_fp16_to_f32 (dmin16) * y->d;
  return dmin * (float) sum_mins;
}

float
llm_vec_dot_q4_K_q8_K (size_t n, const LlmBlockQ4_K *w, const LlmBlockQ8_K *x)
{
  assert (n % LLM_QK_K == 0);
  float sums[8] = { 0 };
  float sumf = 0.0f;
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    int8_t a[LLM_QK_K];
    unpack_q4_K (&w[b], a);
    sumf -= dot_k4_block (a, w[b].scales, w[b].d, w[b].dmin, &x[b], sums);
  }
  for (int l = 0; l < 8; l++)
    sumf += sums[l];
  return sumf;
}

float
llm_vec_dot_q5_K_q8_K (size_t n, const LlmBlockQ5_K *w, const LlmBlockQ8_K *x)
{
  assert (n % LLM_QK_K == 0);
  float sums[8] = { 0 };
  float sumf = 0.0f;
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    int8_t a[LLM_QK_K];
    unpack_q5_K (&w[b], a);
    sumf -= dot_k4_block (a, w[b].scales, w[b].d, w[b].dmin, &x[b], sums);
  }
  for (int l = 0; l < 8; l++)
    sumf += sums[l];
  return sumf;
}

float
llm_vec_dot_q6_K_q8_K (size_t n, const LlmBlockQ6_K *w, const LlmBlockQ8_K *x)
{
  assert (n % LLM_QK_K == 0);
  float sums[8] = { 0 };
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    int8_t a[LLM_QK_K];
    unpack_q6_K (&w[b], a);
    int scale[LLM_QK_K / 16];
    for (int j = 0; j < LLM_QK_K / 16; j++)
      scale[j] = w[b].scales[j];
    int32_t lanes[8];
    lane_sums (a, x[b].qs, scale, 16, lanes);
    const float d = llm_fp16_to_f32 (w[b].d) * x[b].d;
    for (int l = 0; l < 8; l++)
      sums[l] += d * (float) lanes[l];
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; l++)
    sumf += sums[l];
  return sumf;
}
