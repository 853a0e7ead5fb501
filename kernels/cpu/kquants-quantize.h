/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scalar reference quantizers for ggml's Q4_K, Q5_K and Q6_K super-blocks
 * (layouts in kquants.h). They search per sub-block scales (and minimums)
 * the way ggml's quantize_row_qN_K_ref does without an importance matrix,
 * in the same float order, so the bytes equal what llama-quantize writes
 * for the same floats. Pure C, no GLib. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kquants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Quantize @n floats (a multiple of 256) into @n / 256 blocks at @dst. */
void llm_quantize_row_q4_K (const float *src, LlmBlockQ4_K *dst, size_t n);
void llm_quantize_row_q5_K (const float *src, LlmBlockQ5_K *dst, size_t n);
void llm_quantize_row_q6_K (const float *src, LlmBlockQ6_K *dst, size_t n);
/* The one of the three for @wtype (Q4_K, Q5_K or Q6_K); false for others. */
bool llm_quantize_row_kquant (uint32_t wtype, const float *src, void *dst, size_t n);

#ifdef __cplusplus
}
#endif
