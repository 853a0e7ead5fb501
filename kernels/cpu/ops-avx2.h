/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: AVX2/FMA versions of ops.h's element-wise
 * operations, bit for bit the reference's. Reached through the
 * LlmCpuKernels entry points of ops.h after the CPU check. */
#pragma once

#include <stddef.h>

void llm_avx2_swiglu (float *out, const float *gate, const float *up, size_t n);
void llm_avx2_gelu (float *out, const float *x, size_t n);
void llm_avx2_gelu_quick (float *out, const float *x, size_t n);
void llm_avx2_gelu_erf (float *out, const float *x, size_t n);
void llm_avx2_add (float *out, const float *a, const float *b, size_t n);
