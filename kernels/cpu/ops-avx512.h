/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: AVX-512 versions of ops.h's element-wise
 * operations where they pay, bit for bit the reference's. Reached through
 * the LlmCpuKernels entry points of ops.h after the CPU check. */
#pragma once

#include <stddef.h>

void llm_avx512_swiglu (float *out, const float *gate, const float *up, size_t n);
