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

/* y[t * ldy + r] for rows [r0, r1) of a prepared matrix (q4_0x16.h's
 * contract, which every prepared layout shares). */
typedef bool (*LlmPreparedFn) (size_t n, const void *prepared, size_t rows, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step);

/* A layout the kernels want weights in, made once at load. */
typedef struct {
  size_t tile_rows;
  size_t (*bytes) (uint32_t wtype, size_t rows, size_t n);
  void (*pack) (uint32_t wtype, const void *w, size_t row_bytes, size_t rows, size_t n,
      size_t tile0, size_t tile1, void *out);
  /* Row r back in the file's bytes. */
  void (*unpack_row) (uint32_t wtype, const void *prepared, size_t n, size_t r, void *out);
  LlmPreparedFn run;
  /* The same with no prefetches of its own for one token, or a few
   * (X16Kernel.hw_tokens: the hardware prefetchers alone), where the
   * engine may choose (LLM_FETCH_HARDWARE); NULL: @run only. */
  LlmPreparedFn run_hw;
} LlmCpuLayout;

typedef struct {
  LlmConvertFn convert;   /* always set for a supported type */
  LlmDotFn dot;           /* always set */
  LlmDot4Fn dot4;         /* or NULL */
  LlmMatvecFn matvec;     /* or NULL: dot per row */
  LlmGemmFn gemm;         /* or NULL: dot4/dot per row */
  LlmCpuLayout prepared;  /* .run NULL: the file's layout is used as it is */
} LlmCpuWeightKernels;

struct _LlmCpuKernels {
  LlmCpuIsa isa;
  LlmCpuWeightKernels w[LLM_CPU_N_WTYPES];
};
