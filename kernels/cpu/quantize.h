/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scalar reference quantizers for ggml's blocks of 32 (Q8_0, Q4_0, Q4_1,
 * Q5_0, Q5_1), the Q8_0/Q8_1 activation blocks ggml's x86 build makes
 * before a dot product, and row dequantizers for F16, BF16 and those
 * blocks. Weight output is bit-identical to ggml's quantize_row_*_ref, so
 * files we write match files llama.cpp writes. Pure C, no GLib. */
#pragma once

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_QK8_0 32
#define LLM_QK8_1 32
#define LLM_QK4_0 32
#define LLM_QK4_1 32
#define LLM_QK5_0 32
#define LLM_QK5_1 32

/* 32 weights = d * qs[i]; d is an IEEE half. */
typedef struct {
  uint16_t d;
  int8_t qs[LLM_QK8_0];
} LlmBlockQ8_0;

/* 32 weights = d * (nibble - 8). Byte j holds element j in its low nibble
 * and element j + 16 in its high nibble. */
typedef struct {
  uint16_t d;
  uint8_t qs[LLM_QK4_0 / 2];
} LlmBlockQ4_0;

/* 32 weights = d * nibble + m: an offset step for blocks not centred on
 * zero (m is the block's minimum). Nibbles laid out as in Q4_0. */
typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qs[LLM_QK4_1 / 2];
} LlmBlockQ4_1;

/* 32 weights = d * (u - 16), u = nibble | fifth bit << 4. Nibbles laid out
 * as in Q4_0; bit j of qh, read as a little-endian 32-bit word, is the
 * fifth bit of element j. */
typedef struct {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[LLM_QK5_0 / 2];
} LlmBlockQ5_0;

/* 32 weights = d * u + m, u 5 bits as in Q5_0. */
typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[LLM_QK5_1 / 2];
} LlmBlockQ5_1;

/* Activations for Q4_1/Q5_1 weights: Q8_0's d and qs, plus s = d * sum(qs)
 * as a half, so a weight block's offset m adds m * s: one multiply per
 * block instead of one per value. */
typedef struct {
  uint16_t d;
  uint16_t s;
  int8_t qs[LLM_QK8_1];
} LlmBlockQ8_1;

static_assert (sizeof (LlmBlockQ8_0) == 34, "Q8_0 block is 34 bytes on disk");
static_assert (sizeof (LlmBlockQ4_0) == 18, "Q4_0 block is 18 bytes on disk");
static_assert (sizeof (LlmBlockQ4_1) == 20, "Q4_1 block is 20 bytes on disk");
static_assert (sizeof (LlmBlockQ5_0) == 22, "Q5_0 block is 22 bytes on disk");
static_assert (sizeof (LlmBlockQ5_1) == 24, "Q5_1 block is 24 bytes on disk");
static_assert (sizeof (LlmBlockQ8_1) == 36, "Q8_1 block is 36 bytes");

/* The 32 fifth bits of a Q5_0/Q5_1 block, bit j for element j. */
static inline uint32_t
llm_q5_high_bits (const uint8_t qh[4])
{
  return (uint32_t) qh[0] | (uint32_t) qh[1] << 8 | (uint32_t) qh[2] << 16
      | (uint32_t) qh[3] << 24;
}

/* The 5-bit code u (0..31) of element @j (0..31) of a Q5_0/Q5_1 block. */
static inline int
llm_q5_code (const uint8_t qs[16], uint32_t high_bits, int j)
{
  const int nibble = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return nibble | (int) ((high_bits >> j) & 1) << 4;
}

/* Quantize @n floats (a multiple of 32) into @n / 32 blocks at @dst. */
void llm_quantize_row_q8_0 (const float *src, LlmBlockQ8_0 *dst, size_t n);
void llm_quantize_row_q4_0 (const float *src, LlmBlockQ4_0 *dst, size_t n);
void llm_quantize_row_q4_1 (const float *src, LlmBlockQ4_1 *dst, size_t n);
void llm_quantize_row_q5_0 (const float *src, LlmBlockQ5_0 *dst, size_t n);
void llm_quantize_row_q5_1 (const float *src, LlmBlockQ5_1 *dst, size_t n);

/* Q8_0 as ggml's x86 (AVX2) build quantizes activations before a dot
 * product: scale 127/amax, round half to even. Used for activations so
 * logits agree with llama.cpp on x86; weights use the reference above. */
void llm_quantize_row_q8_0_act (const float *src, LlmBlockQ8_0 *dst, size_t n);
/* The same d and qs in Q8_1 blocks, with s = half(d * sum(qs)) from the
 * rounded integers and the unrounded d, as ggml's x86 quantize_row_q8_1
 * (its reference version differs: 1/d, ties away from zero). */
void llm_quantize_row_q8_1_act (const float *src, LlmBlockQ8_1 *dst, size_t n);

/* Expand @n elements (a multiple of 32 for the block types) into @dst. */
void llm_dequantize_row_q8_0 (const LlmBlockQ8_0 *src, float *dst, size_t n);
void llm_dequantize_row_q4_0 (const LlmBlockQ4_0 *src, float *dst, size_t n);
void llm_dequantize_row_q4_1 (const LlmBlockQ4_1 *src, float *dst, size_t n);
void llm_dequantize_row_q5_0 (const LlmBlockQ5_0 *src, float *dst, size_t n);
void llm_dequantize_row_q5_1 (const LlmBlockQ5_1 *src, float *dst, size_t n);
/* d * qs; s is not needed to recover the values. */
void llm_dequantize_row_q8_1 (const LlmBlockQ8_1 *src, float *dst, size_t n);
void llm_dequantize_row_f16 (const uint16_t *src, float *dst, size_t n);
void llm_dequantize_row_bf16 (const uint16_t *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
