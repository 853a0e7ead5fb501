/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: the AVX2/FMA/F16C batched products
 * (prefill) and activation conversions in gemm-avx2.c. That file is
 * compiled with those instruction sets, so nothing in it may run before
 * matmul.c has checked the CPU has them. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* For rows r in [r0, r1) and t in [0, n_tok):
 * y[t * ldy + r] = dot(weight row r of @w, activations at @xq + t * @xs),
 * the activations converted as llm_matmul_convert() does. With @next NULL
 * the caller computes all those rows; otherwise it claims @step rows at a
 * time from *@next (an absolute row index, r0 before any thread starts)
 * until r1 is reached, so threads can share one product.
 *
 * F32, F16, BF16 and Q8_0 results are bit-identical to the AVX2 matvec
 * kernel's (same integer sums, same float operations in the same order);
 * Q4_0 results are bit-identical to the scalar reference dot product;
 * K-quant results add the same exact integer sums in another float order.
 * false (nothing claimed or written) if scratch memory ran out. */
typedef bool (*LlmGemmFn) (size_t n, const void *w, size_t row_bytes, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The batched kernel for weights of @wtype, or NULL if there is none. */
LlmGemmFn llm_avx2_gemm_fn (uint32_t wtype);

/* Converts @n floats for a product with @wtype weights, bit-identical to
 * the scalar conversion in matmul.c; NULL if there is no AVX2 version. */
typedef void (*LlmConvertFn) (const float *x, size_t n, void *out);
LlmConvertFn llm_avx2_convert_fn (uint32_t wtype);
