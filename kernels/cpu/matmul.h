/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Weight-matrix times activations for every weight type the engine runs.
 *
 * As in ggml, activations are first converted to the weight type's "dot
 * type" (F32 -> F32, F16 -> F16, BF16 -> BF16, Q8_0/Q4_0 -> Q8_0 blocks,
 * K-quants -> Q8_K blocks), then each output is one dot product of a weight
 * row with the converted activations. Doing the same conversion as
 * llama.cpp is what makes logits agree with it closely.
 *
 * Weights are rows of @n elements, @row_bytes apart (from the GGUF mapping,
 * used in place). A scalar reference, AVX2/FMA/F16C and AVX-512 versions
 * exist; every entry point that computes takes an LlmCpuKernels table,
 * chosen once for an instruction set, so a caller (a backend, a test)
 * decides which kernels run and nothing is looked up per call. Pure C, no
 * GLib. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels of @isa, or NULL if the CPU (or this build) lacks them. The
 * tables are built once and never freed. */
typedef struct _LlmCpuKernels LlmCpuKernels;
const LlmCpuKernels *llm_cpu_kernels (LlmCpuIsa isa);
/* llm_cpu_kernels (llm_cpu_isa_best ()). */
const LlmCpuKernels *llm_cpu_kernels_best (void);
LlmCpuIsa llm_cpu_kernels_isa (const LlmCpuKernels *kern);
/* "scalar", "avx2" or "avx512" (AVX-512 prefill products, AVX2 elsewhere). */
const char *llm_cpu_kernels_name (const LlmCpuKernels *kern);

/* true if matmuls with weights of @wtype are implemented. */
bool llm_matmul_supports (uint32_t wtype);

/* Dot type of @wtype (an LlmType id). */
uint32_t llm_matmul_dot_type (uint32_t wtype);

/* Bytes needed to hold @n activations converted for @wtype. @n must be a
 * multiple of the dot type's block size. */
size_t llm_matmul_act_bytes (uint32_t wtype, size_t n);

/* Converts @n floats for multiplication with @wtype weights. */
void llm_matmul_convert (const LlmCpuKernels *kern, uint32_t wtype, const float *x, size_t n,
    void *out);

/* y[r - r0] = dot(weight row r, xq) for r in [r0, r1). */
void llm_matvec (const LlmCpuKernels *kern, uint32_t wtype, const void *w, size_t row_bytes,
    size_t n, size_t r0, size_t r1, const void *xq, float *y);

/* For n_tok activation rows (converted, @xq_stride bytes apart):
 * y[t * ldy + r] = dot(weight row r, xq_t) for r in [r0, r1). Loops so a
 * weight row is reused from cache across tokens. With the AVX2 kernels,
 * F32, F16, BF16 and Q8_0 results equal llm_matvec()'s bit for bit; Q4_0
 * results equal the scalar reference's; K-quant results add the same exact
 * integer sums as llm_matvec() in another float order. */
void llm_matmul (const LlmCpuKernels *kern, uint32_t wtype, const void *w, size_t row_bytes,
    size_t n, size_t r0, size_t r1, const void *xq, size_t xq_stride, size_t n_tok,
    float *y, size_t ldy);

/* llm_matmul() for rows [r0, r1) shared by threads: each caller claims
 * @step rows at a time from *@next (set to @r0 before any thread starts)
 * until none are left. A row's results do not depend on which thread or
 * claim computed it. */
void llm_matmul_shared (const LlmCpuKernels *kern, uint32_t wtype, const void *w,
    size_t row_bytes, size_t n, size_t r0, size_t r1, const void *xq, size_t xq_stride,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step);

/* Dequantizes weight row @r into @out (n floats): embedding lookups. */
void llm_dequantize_row (uint32_t wtype, const void *w, size_t row_bytes, size_t n,
    size_t r, float *out);

#ifdef __cplusplus
}
#endif
