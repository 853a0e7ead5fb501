/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ggml's "K-quant" super-blocks of 256 weights: Q4_K, Q5_K and Q6_K weight
 * blocks, and the Q8_K blocks activations are quantized to before a dot
 * product with them. Layouts are the on-disk ones; the scalar dot products
 * follow ggml's reference order of operations (exact integer sums per
 * super-block, scaled in float). Pure C, no GLib. */
#pragma once

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_QK_K 256
/* Bytes of the packed 6-bit scales and mins of Q4_K/Q5_K. */
#define LLM_K_SCALE_SIZE 12

/* Activations: x[i] ~= d * qs[i]; bsums[j] = sum of qs[16 j .. 16 j + 15]
 * (lets the weight-side minimums be applied once per 16 values). */
typedef struct {
  float d;
  int8_t qs[LLM_QK_K];
  int16_t bsums[LLM_QK_K / 16];
} LlmBlockQ8_K;

/* 8 sub-blocks of 32: w = d * sc[j] * q - dmin * m[j], q a nibble, sc and
 * m 6-bit (packed in scales[], see llm_k4_scale_min). Byte l of 32-byte
 * group g holds element 64 g + l (low nibble) and 64 g + 32 + l (high). */
typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[LLM_K_SCALE_SIZE];
  uint8_t qs[LLM_QK_K / 2];
} LlmBlockQ4_K;

/* As Q4_K with a fifth bit: bit 2 g of qh[l] is the high bit of element
 * 64 g + l, bit 2 g + 1 that of element 64 g + 32 + l. */
typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[LLM_K_SCALE_SIZE];
  uint8_t qh[LLM_QK_K / 8];
  uint8_t qs[LLM_QK_K / 2];
} LlmBlockQ5_K;

/* 16 sub-blocks of 16: w = d * scales[j] * (q - 32), q 6 bits: 4 low bits
 * in ql, 2 high bits in qh (layout in kquants.c). */
typedef struct {
  uint8_t ql[LLM_QK_K / 2];
  uint8_t qh[LLM_QK_K / 4];
  int8_t scales[LLM_QK_K / 16];
  uint16_t d;
} LlmBlockQ6_K;

static_assert (sizeof (LlmBlockQ8_K) == 292, "Q8_K block is 292 bytes");
static_assert (sizeof (LlmBlockQ4_K) == 144, "Q4_K block is 144 bytes on disk");
static_assert (sizeof (LlmBlockQ5_K) == 176, "Q5_K block is 176 bytes on disk");
static_assert (sizeof (LlmBlockQ6_K) == 210, "Q6_K block is 210 bytes on disk");

/* Scale and min of sub-block @j (0..7) from the 12 packed bytes of a Q4_K
 * or Q5_K block. Sub-blocks 0..3: 6 bits each in bytes 0..3 (scale) and
 * 4..7 (min). Sub-blocks 4..7: low 4 bits in the nibbles of bytes 8..11,
 * high 2 bits in the top bits of bytes 0..7. */
static inline void
llm_k4_scale_min (int j, const uint8_t *scales, uint8_t *sc, uint8_t *m)
{
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (uint8_t) ((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *m = (uint8_t) ((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

/* Quantize @n floats (a multiple of 256) like ggml's quantize_row_q8_K_ref:
 * the value of largest magnitude maps to -127, ties round to even. */
void llm_quantize_row_q8_K (const float *src, LlmBlockQ8_K *dst, size_t n);

/* Expand @n elements (a multiple of 256) into @dst, as ggml does. */
void llm_dequantize_row_q8_K (const LlmBlockQ8_K *src, float *dst, size_t n);
void llm_dequantize_row_q4_K (const LlmBlockQ4_K *src, float *dst, size_t n);
void llm_dequantize_row_q5_K (const LlmBlockQ5_K *src, float *dst, size_t n);
void llm_dequantize_row_q6_K (const LlmBlockQ6_K *src, float *dst, size_t n);

/* Scalar reference dot products of @n weights with @n Q8_K activations. */
float llm_vec_dot_q4_K_q8_K (size_t n, const LlmBlockQ4_K *w, const LlmBlockQ8_K *x);
float llm_vec_dot_q5_K_q8_K (size_t n, const LlmBlockQ5_K *w, const LlmBlockQ8_K *x);
float llm_vec_dot_q6_K_q8_K (size_t n, const LlmBlockQ6_K *w, const LlmBlockQ8_K *x);

#ifdef __cplusplus
}
#endif
