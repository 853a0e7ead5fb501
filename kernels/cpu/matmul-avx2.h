/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: the AVX2/FMA/F16C row dot products in
 * matmul-avx2.c. That file is compiled with those instruction sets, so
 * nothing in it may run before matmul.c has checked the CPU has them.
 * Where the CPU also has AVX-VNNI and GFNI, the lookups below return
 * kernels using them for the quantized types (same results, fewer
 * instructions); LLM_NO_AVX_VNNI in the environment turns that off. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* dot(weight row @w, converted activations @x), @n elements. */
typedef float (*LlmDotFn) (size_t n, const void *w, const void *x);

/* out[t] = dot(@w, activations at @x + t * @xs) for t = 0..3: one weight
 * row against four tokens, each result bit-identical to the LlmDotFn's. */
typedef void (*LlmDot4Fn) (size_t n, const void *w, const void *x, size_t xs, float *out);

/* y[r] = dot(weight row r at @w + r * @row_bytes, activations @x) for
 * r < @rows: several rows at a time, each result bit-identical to the
 * LlmDotFn's. */
typedef void (*LlmMatvecFn) (size_t n, const void *w, size_t row_bytes, size_t rows,
    const void *x, float *y);

/* The AVX2 kernels for weights of @wtype, or NULL if there are none (the
 * scalar reference is used then). All three agree bit for bit. */
LlmDotFn llm_avx2_dot_fn (uint32_t wtype);
LlmDot4Fn llm_avx2_dot4_fn (uint32_t wtype);
LlmMatvecFn llm_avx2_matvec_fn (uint32_t wtype);
