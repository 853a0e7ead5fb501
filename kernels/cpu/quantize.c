/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The rounding below (scale from the unrounded d, roundf for Q8_0,
 * truncation after +8.5 for Q4_0) is what makes our bytes equal ggml's;
 * do not "improve" it here, add a separate quantizer instead. */
#include "quantize.h"

#include <math.h>

#include "fp16.h"

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

void
llm_quantize_row_q8_0_act (const float *src, LlmBlockQ8_0 *dst, size_t n)
{
  assert (n % LLM_QK8_0 == 0);
  for (size_t b = 0; b < n / LLM_QK8_0; b++) {
    const float *x = src + b * LLM_QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < LLM_QK8_0; j++) {
      const float v = fabsf (x[j]);
      amax = amax > v ? amax : v;
    }
    /* ggml's x86 quantizer: 127/amax rather than 1/(amax/127), and ties to
     * even; a different last bit moves a code by one. */
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    dst[b].d = llm_fp16_from_f32 (d);
    for (int j = 0; j < LLM_QK8_0; j++)
      dst[b].qs[j] = (int8_t) nearbyintf (x[j] * id);
  }
}

void
llm_quantize_row_q4_0 (const float *src, LlmBlockQ4_0 *dst, size_t n)
{
  assert (n % LLM_QK4_0 == 0);
  for (size_t b = 0; b < n / LLM_QK4_0; b++) {
    const float *x = src + b * LLM_QK4_0;
    /* The signed value of largest magnitude maps to -8, the one code with
     * no positive twin, so the full 16 levels are used. The first of equal
     * magnitudes wins, as in ggml. */
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < LLM_QK4_0; j++) {
      if (amax < fabsf (x[j])) {
        amax = fabsf (x[j]);
        max = x[j];
      }
    }

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
llm_dequantize_row_f16 (const uint16_t *src, float *dst, size_t n)
{
  llm_fp16_to_f32_row (src, dst, n);
}

void
llm_dequantize_row_bf16 (const uint16_t *src, float *dst, size_t n)
{
  llm_bf16_to_f32_row (src, dst, n);
}
