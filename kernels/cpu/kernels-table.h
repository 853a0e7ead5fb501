/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: what an LlmCpuKernels table holds. The
 * entry points in matmul.h and attention.h read it; nothing outside
 * kernels/cpu sees inside. */
#pragma once

#include "isa.h"
#include "matmul.h"
#include "matmul-avx2.h"
#include "gemm-avx2.h"

/* Weight type ids are below this (LlmType: BF16 is 30). */
#define LLM_CPU_N_WTYPES 32

typedef struct {
  LlmConvertFn convert;   /* always set for a supported type */
  LlmDotFn dot;           /* always set */
  LlmDot4Fn dot4;         /* or NULL */
  LlmMatvecFn matvec;     /* or NULL: dot per row */
  LlmGemmFn gemm;         /* or NULL: dot4/dot per row */
} LlmCpuWeightKernels;

struct _LlmCpuKernels {
  LlmCpuIsa isa;
  LlmCpuWeightKernels w[LLM_CPU_N_WTYPES];
};
