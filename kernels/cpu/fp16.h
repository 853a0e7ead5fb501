/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* IEEE binary16 and bfloat16 <-> binary32 conversion. Pure C, no GLib. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* float -> IEEE half, rounding to nearest even. Overflow gives +-inf,
 * tiny values become half subnormals or +-0, NaN stays a quiet NaN of the
 * same sign (top mantissa bits kept, like F16C's vcvtps2ph). */
uint16_t llm_fp16_from_f32 (float f);
/* IEEE half -> float; exact for every input (subnormals, inf). A NaN keeps
 * its sign and payload and comes back quiet, as F16C does. */
float llm_fp16_to_f32 (uint16_t h);

/* float -> bfloat16, rounding to nearest even like ggml's
 * ggml_compute_fp32_to_bf16; NaN becomes a quiet NaN of the same sign. */
uint16_t llm_bf16_from_f32 (float f);
/* bfloat16 -> float; exact. */
float llm_bf16_to_f32 (uint16_t b);

/* Row versions: @n elements from @src to @dst; the buffers must not overlap. */
void llm_fp16_from_f32_row (const float *src, uint16_t *dst, size_t n);
void llm_fp16_to_f32_row (const uint16_t *src, float *dst, size_t n);
void llm_bf16_from_f32_row (const float *src, uint16_t *dst, size_t n);
void llm_bf16_to_f32_row (const uint16_t *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
