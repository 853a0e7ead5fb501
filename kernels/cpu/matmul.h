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

/* Weights in the layout a table's kernels prefer, made once at load (on
 * the AVX2 and AVX-512 tables the 16-row tiles of q4_0x16.h for Q4_0,
 * q5_0x16.h for Q5_0, q8_0x16.h for Q8_0, kquants-x8.h for
 * Q4_K/Q5_K/Q6_K and f16x16.h for F16/BF16): one
 * kernel then serves any number of tokens from it, with nothing repacked
 * per call. 0 bytes: @kern uses the file's layout for @wtype as it is. */
size_t llm_prepared_bytes (const LlmCpuKernels *kern, uint32_t wtype, size_t rows, size_t n);
/* Rows per tile of that layout; llm_prepare_tiles packs whole tiles. */
size_t llm_prepared_tile_rows (const LlmCpuKernels *kern, uint32_t wtype);
/* Packs row tiles [tile0, tile1) of the file's @rows x @n matrix @w into
 * their place in @out (llm_prepared_bytes); disjoint ranges may be packed
 * by several threads at once. */
void llm_prepare_tiles (const LlmCpuKernels *kern, uint32_t wtype, const void *w,
    size_t row_bytes, size_t rows, size_t n, size_t tile0, size_t tile1, void *out);
/* How a product of one token over a prepared layout gets its weights
 * from memory: by the kernel's own prefetches ahead of its stream, or by
 * the hardware prefetchers alone. Which is faster depends on the machine
 * and on what else uses its memory at the time (lib/fetch-choice.h); the
 * results are the same bits. Layouts without the choice
 * (llm_prepared_fetch_choice) always fetch their own way. */
typedef enum {
  LLM_FETCH_KERNEL,
  LLM_FETCH_HARDWARE,
} LlmFetch;

/* llm_matmul_shared over a prepared matrix, for any @n_tok including 1:
 * y[t * ldy + r] for r in [r0, r1) (r0 a multiple of the tile rows),
 * claiming @step rows (a multiple of 16) at a time from *@next, or all of
 * them when @next is NULL; one token (or a few, as the kernel says)
 * fetched as @fetch says. A row's result does not depend on @n_tok, the
 * claims or @fetch. false only if kernel scratch memory ran out. */
bool llm_matmul_prepared (const LlmCpuKernels *kern, uint32_t wtype, const void *prepared,
    size_t rows, size_t n, size_t r0, size_t r1, const void *xq, size_t xs, size_t n_tok,
    float *y, size_t ldy, atomic_size_t *next, size_t step, LlmFetch fetch);
/* Whether @kern's products of one token over @wtype's prepared layout
 * can fetch either way (LlmFetch): the packed Q4_0/Q5_0/Q8_0 layouts,
 * unless LLM_X16_ONE_TOKEN_AHEAD fixes it (llm_cpu_x16_one_token_ahead). */
bool llm_prepared_fetch_choice (const LlmCpuKernels *kern, uint32_t wtype);
/* Row @r of a prepared matrix as floats (embedding lookups of a packed
 * table); false if memory for a very wide row ran out. */
bool llm_dequantize_prepared_row (const LlmCpuKernels *kern, uint32_t wtype,
    const void *prepared, size_t n, size_t r, float *out);

/* Dequantizes weight row @r into @out (n floats): embedding lookups. */
void llm_dequantize_row (uint32_t wtype, const void *w, size_t row_bytes, size_t n,
    size_t r, float *out);

#ifdef __cplusplus
}
#endif
