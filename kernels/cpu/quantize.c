/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The rounding below (scale from the unrounded d, roundf for Q8_0,
 * truncation after adding 8.5, 16.5 or 0.5 for the 4- and 5-bit types) is
 * what makes our bytes equal ggml's; do not "improve" it here, add a
 * separate quantizer instead. Products are stored before anything is added
 * to them, so that no compiler fuses the two into an FMA, which would
 * round differently from ggml's reference build (it has no FMA). */
#include "quantize.h"

#include <float.h>
#include <math.h>

#include "fp16.h"

/* The value of largest magnitude among @n at @x, sign kept; the first of
 * equal magnitudes wins, as in ggml. 0 for a block of zeros. */
static float
signed_absmax (const float *x, int n)
{
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++) {
    if (amax < fabsf (x[j])) {
      amax = fabsf (x[j]);
      max = x[j];
    }
  }
  return max;
}

/* Smallest and largest of @n values, for the offset types (Q4_1, Q5_1). */
static void
min_max (const float *x, int n, float *min, float *max)
{
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; j++) {
    if (x[j] < *min)
      *min = x[j];
    if (x[j] > *max)
      *max = x[j];
  }
}

/* Code of @x on the grid min + k / id: rounded half up by truncation, as
 * ggml's offset quantizers do (x - min >= 0, so truncation is floor). */
static int
offset_code (float x, float min, float id)
{
  const float scaled = (x - min) * id;
  return (int) (scaled + 0.5f);
}

/* Packs 32 5-bit codes: low nibbles as Q4_0 lays them out, fifth bits into
 * the little-endian word qh. Bits above the fifth are dropped, as in ggml. */
static void
pack_q5 (const int codes[32], uint8_t qs[16], uint8_t qh[4])
{
  uint32_t high = 0;
  for (int j = 0; j < 16; j++) {
    qs[j] = (uint8_t) ((codes[j] & 0x0f) | (codes[j + 16] & 0x0f) << 4);
    high |= (uint32_t) ((codes[j] >> 4) & 1) << j;
    high |= (uint32_t) ((codes[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int k = 0; k < 4; k++)
    qh[k] = (uint8_t) (high >> (8 * k));
}

void
llm_quantize_row_q8_0 (const float *src, LlmBlockQ8_0 *dst, size_t n)
{
  assert (n % LLM_QK8_0 == 0);
  for (size_t b = 0; b < n / LLM_QK8_0; b++) {
    const float *x = src + b * LLM_QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < LLM_QK8_0; j++) {
      const float v = fabsf (x[j]);
      amax = amax > v ? amax : v;
    }

    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = llm_fp16_from_f32 (d);
    for (int j = 0; j < LLM_QK8_0; j++)
      dst[b].qs[j] = (int8_t) roundf (x[j] * id);
  }
}

/* One block of 32 activations as ggml's x86 quantizer makes it; returns
 * the unrounded d. */
static float
quantize_block_q8_act (const float *x, uint16_t *d_half, int8_t *qs)
{
  float amax = 0.0f;
  for (int j = 0; j < 32; j++) {
    const float v = fabsf (x[j]);
    amax = amax > v ? amax : v;
  }
  /* ggml's x86 quantizer: 127/amax rather than 1/(amax/127), and ties to
   * even; a different last bit moves a code by one. */
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  *d_half = llm_fp16_from_f32 (d);
  for (int j = 0; j < 32; j++)
    qs[j] = (int8_t) nearbyintf (x[j] * id);
  return d;
}

void
llm_quantize_row_q8_0_act (const float *src, LlmBlockQ8_0 *dst, size_t n)
{
  assert (n % LLM_QK8_0 == 0);
  for (size_t b = 0; b < n / LLM_QK8_0; b++)
    quantize_block_q8_act (src + b * LLM_QK8_0, &dst[b].d, dst[b].qs);
}

void
llm_quantize_row_q8_1_act (const float *src, LlmBlockQ8_1 *dst, size_t n)
{
  assert (n % LLM_QK8_1 == 0);
  for (size_t b = 0; b < n / LLM_QK8_1; b++) {
    const float d = quantize_block_q8_act (src + b * LLM_QK8_1, &dst[b].d, dst[b].qs);
    int sum = 0;
    for (int j = 0; j < LLM_QK8_1; j++)
      sum += dst[b].qs[j];
    /* From the codes as rounded and d before its rounding to a half, as
     * ggml's x86 build does (not d_half * sum). */
    dst[b].s = llm_fp16_from_f32 ((float) sum * d);
  }
}

void
llm_quantize_row_q4_0 (const float *src, LlmBlockQ4_0 *dst, size_t n)
{
  assert (n % LLM_QK4_0 == 0);
  for (size_t b = 0; b < n / LLM_QK4_0; b++) {
    const float *x = src + b * LLM_QK4_0;
    /* The signed value of largest magnitude maps to -8, the one code with
     * no positive twin, so the full 16 levels are used. */
    const float max = signed_absmax (x, LLM_QK4_0);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = llm_fp16_from_f32 (d);
    for (int j = 0; j < LLM_QK4_0 / 2; j++) {
      /* Truncation toward zero after +8.5 rounds half up; the extreme
       * +8 lands on 16 and is clamped to 15. */
      /* Separate statements keep a compiler from fusing the multiply and
       * add into an FMA, which would round differently from ggml. */
      const float x0 = x[j] * id;
      const float x1 = x[j + LLM_QK4_0 / 2] * id;
      int lo = (int) (x0 + 8.5f);
      int hi = (int) (x1 + 8.5f);
      lo = lo < 15 ? lo : 15;
      hi = hi < 15 ? hi : 15;
      dst[b].qs[j] = (uint8_t) (lo | (hi << 4));
    }
  }
}

void
llm_quantize_row_q4_1 (const float *src, LlmBlockQ4_1 *dst, size_t n)
{
  assert (n % LLM_QK4_1 == 0);
  for (size_t b = 0; b < n / LLM_QK4_1; b++) {
    const float *x = src + b * LLM_QK4_1;
    float min, max;
    min_max (x, LLM_QK4_1, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = llm_fp16_from_f32 (d);
    dst[b].m = llm_fp16_from_f32 (min);
    for (int j = 0; j < LLM_QK4_1 / 2; j++) {
      /* Clamped to 15 as in ggml, against a scale rounded a hair low. */
      int lo = offset_code (x[j], min, id);
      int hi = offset_code (x[j + LLM_QK4_1 / 2], min, id);
      lo = lo < 15 ? lo : 15;
      hi = hi < 15 ? hi : 15;
      dst[b].qs[j] = (uint8_t) (lo | (hi << 4));
    }
  }
}

void
llm_quantize_row_q5_0 (const float *src, LlmBlockQ5_0 *dst, size_t n)
{
  assert (n % LLM_QK5_0 == 0);
  for (size_t b = 0; b < n / LLM_QK5_0; b++) {
    const float *x = src + b * LLM_QK5_0;
    /* As Q4_0 with 32 levels: the extreme maps to -16. */
    const float max = signed_absmax (x, LLM_QK5_0);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = llm_fp16_from_f32 (d);
    int codes[LLM_QK5_0];
    for (int j = 0; j < LLM_QK5_0; j++) {
      const float scaled = x[j] * id;
      const int code = (int) (scaled + 16.5f);
      codes[j] = code < 31 ? code : 31;
    }
    pack_q5 (codes, dst[b].qs, dst[b].qh);
  }
}

void
llm_quantize_row_q5_1 (const float *src, LlmBlockQ5_1 *dst, size_t n)
{
  assert (n % LLM_QK5_1 == 0);
  for (size_t b = 0; b < n / LLM_QK5_1; b++) {
    const float *x = src + b * LLM_QK5_1;
    float min, max;
    min_max (x, LLM_QK5_1, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = llm_fp16_from_f32 (d);
    dst[b].m = llm_fp16_from_f32 (min);
    /* Unlike Q4_1, ggml does not clamp here (a code of 32 would wrap to
     * 0); keep its behaviour, the bytes must match. */
    int codes[LLM_QK5_1];
    for (int j = 0; j < LLM_QK5_1; j++)
      codes[j] = offset_code (x[j], min, id);
    pack_q5 (codes, dst[b].qs, dst[b].qh);
  }
}

void
llm_dequantize_row_q8_0 (const LlmBlockQ8_0 *src, float *dst, size_t n)
{
  assert (n % LLM_QK8_0 == 0);
  for (size_t b = 0; b < n / LLM_QK8_0; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    for (int j = 0; j < LLM_QK8_0; j++)
      dst[b * LLM_QK8_0 + j] = (float) src[b].qs[j] * d;
  }
}

void
llm_dequantize_row_q4_0 (const LlmBlockQ4_0 *src, float *dst, size_t n)
{
  assert (n % LLM_QK4_0 == 0);
  for (size_t b = 0; b < n / LLM_QK4_0; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    float *y = dst + b * LLM_QK4_0;
    for (int j = 0; j < LLM_QK4_0 / 2; j++) {
      y[j] = (float) ((src[b].qs[j] & 0x0f) - 8) * d;
      y[j + LLM_QK4_0 / 2] = (float) ((src[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void
llm_dequantize_row_q4_1 (const LlmBlockQ4_1 *src, float *dst, size_t n)
{
  assert (n % LLM_QK4_1 == 0);
  for (size_t b = 0; b < n / LLM_QK4_1; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    const float m = llm_fp16_to_f32 (src[b].m);
    float *y = dst + b * LLM_QK4_1;
    for (int j = 0; j < LLM_QK4_1 / 2; j++) {
      /* Products stored first: ggml rounds d * u, then adds m. */
      const float lo = (float) (src[b].qs[j] & 0x0f) * d;
      const float hi = (float) (src[b].qs[j] >> 4) * d;
      y[j] = lo + m;
      y[j + LLM_QK4_1 / 2] = hi + m;
    }
  }
}

void
llm_dequantize_row_q5_0 (const LlmBlockQ5_0 *src, float *dst, size_t n)
{
  assert (n % LLM_QK5_0 == 0);
  for (size_t b = 0; b < n / LLM_QK5_0; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    const uint32_t high = llm_q5_high_bits (src[b].qh);
    for (int j = 0; j < LLM_QK5_0; j++)
      dst[b * LLM_QK5_0 + j] = (float) (llm_q5_code (src[b].qs, high, j) - 16) * d;
  }
}

void
llm_dequantize_row_q5_1 (const LlmBlockQ5_1 *src, float *dst, size_t n)
{
  assert (n % LLM_QK5_1 == 0);
  for (size_t b = 0; b < n / LLM_QK5_1; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    const float m = llm_fp16_to_f32 (src[b].m);
    const uint32_t high = llm_q5_high_bits (src[b].qh);
    for (int j = 0; j < LLM_QK5_1; j++) {
      const float scaled = (float) llm_q5_code (src[b].qs, high, j) * d;
      dst[b * LLM_QK5_1 + j] = scaled + m;
    }
  }
}

void
llm_dequantize_row_q8_1 (const LlmBlockQ8_1 *src, float *dst, size_t n)
{
  assert (n % LLM_QK8_1 == 0);
  for (size_t b = 0; b < n / LLM_QK8_1; b++) {
    const float d = llm_fp16_to_f32 (src[b].d);
    for (int j = 0; j < LLM_QK8_1; j++)
      dst[b * LLM_QK8_1 + j] = (float) src[b].qs[j] * d;
  }
}

void
llm_dequantize_row_f16 (const uint16_t *src, float *dst, size_t n)
{
  llm_fp16_to_f32_row (src, dst, n);
}

void
llm_dequantize_row_bf16 (const uint16_t *src, float *dst, size_t n)
{
  llm_bf16_to_f32_row (src, dst, n);
}
