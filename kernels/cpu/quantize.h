/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scalar reference quantizers for ggml's Q8_0 and Q4_0 blocks, and row
 * dequantizers for F16, BF16, Q8_0 and Q4_0. Output is bit-identical to
 * ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref, so files we write
 * match files llama.cpp writes. Pure C, no GLib. */
#pragma once

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_QK8_0 32
#define LLM_QK4_0 32

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

static_assert (sizeof (LlmBlockQ8_0) == 34, "Q8_0 block is 34 bytes on disk");
static_assert (sizeof (LlmBlockQ4_0) == 18, "Q4_0 block is 18 bytes on disk");

/* Quantize @n floats (a multiple of 32) into @n / 32 blocks at @dst. */
void llm_quantize_row_q8_0 (const float *src, LlmBlockQ8_0 *dst, size_t n);
void llm_quantize_row_q4_0 (const float *src, LlmBlockQ4_0 *dst, size_t n);

/* Q8_0 as ggml's x86 (AVX2) build quantizes activations before a dot
 * product: scale 127/amax, round half to even. Used for activations so
 * logits agree with llama.cpp on x86; weights use the reference above. */
void llm_quantize_row_q8_0_act (const float *src, LlmBlockQ8_0 *dst, size_t n);

/* Expand @n elements (a multiple of 32 for the block types) into @dst. */
void llm_dequantize_row_q8_0 (const LlmBlockQ8_0 *src, float *dst, size_t n);
void llm_dequantize_row_q4_0 (const LlmBlockQ4_0 *src, float *dst, size_t n);
void llm_dequantize_row_f16 (const uint16_t *src, float *dst, size_t n);
void llm_dequantize_row_bf16 (const uint16_t *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
