/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* F16 and BF16 weights prepared once, at load, for every batch size: 16
 * rows to a tile, each column's 16 values side by side, so one vcvtph2ps
 * (or, for BF16, a zero-extension and a shift) gives a column of the
 * tile's 16 rows in 16 float lanes (AVX-512; AVX2 takes two loads of 8).
 * The same bytes as the file's rows, so a model is held once and the GGUF
 * layout is not read after the pack. One kernel family over that layout
 * serves decode (one token) through prefill (128 and more). Pure C, no
 * GLib.
 *
 * The layout. Rows are grouped in tiles of 16 (rows 16 T .. 16 T + 15; the
 * last tile padded with zero rows). Tile T is 32 n bytes at T * 32 n; its
 * column k (value k of each of its rows) is the 32 bytes at 32 k: row r's
 * 16-bit value at 2 r, as the file holds it. So the matrix is one stream
 * in (tile, column) order, and a tile's column is one aligned half line.
 *
 * Results. Activations are converted as llm_matmul_convert() makes them
 * for the weight type (rounded to F16, or BF16), so each product of a
 * weight and an activation is exact in float (11-bit by 11-bit mantissas;
 * 8 by 8 for BF16, unless it underflows float's range, which two halves'
 * product never does). Every kernel, the scalar reference over this layout
 * included, sums a row in column order with one fused multiply-add per
 * column, from zero:
 *
 *   acc = 0; for k = 0 .. n - 1: acc = fma (w[k], x[k], acc); y = acc,
 *
 * one rounding per column, whatever the token count, tile of tokens,
 * claim or thread (rows sit in lanes, so each lane is one row's chain and
 * nothing is ever summed across lanes). So every kernel's result equals
 * the packed reference's bit for bit, and a row's result does not depend
 * on how many tokens are computed with it.
 *
 * Against the exact dot product s = sum_k p_k (p_k = w[k] x[k], exact):
 * n - 1 roundings of partial sums, each at most u = 2^-24 of that partial
 * sum, give the standard bound |y - s| <= gamma_(n-1) * sum_k |p_k|,
 * gamma_m = m u / (1 - m u). The scalar reference dot product (matmul.c's
 * dot_f16 / dot_bf16) sums the same products in double and rounds once,
 * |ref - s| <= u |s| + gamma'_(n-1) sum |p_k| (gamma' with u' = 2^-53),
 * so
 *
 *   |y - ref| <= (gamma_(n-1) + u + gamma'_(n-1)) * sum_k |p_k|,
 *
 * just above (n - 1) u sum |p_k| at a model's widths, which
 * tests/test-f16x16.c checks for every kernel. That is a worst case;
 * rounding errors of random sign grow like sqrt (n) u, and the test sees
 * 0.002 of the bound at n = 2816. ggml's AVX2 kernel keeps 32 partial sums
 * of every 32nd product instead, so its bound is about (n / 32 + 5) u
 * sum |p_k|; the golden tests that compare logits with llama.cpp's pass
 * unchanged (tiny-llama-f16: 5.8e-4 against 5.5e-4 before, tolerance
 * 1e-3; random-llama-bf16: 1.9e-5 against 1.5e-5, tolerance 1e-4). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_F16X16_ROWS 16
/* One tile's column: 16 rows x 2 bytes. */
#define LLM_F16X16_COL_BYTES 32

/* Bytes of a packed @rows x @n matrix of 16-bit values: 2 per value, rows
 * rounded up to a multiple of 16. */
size_t llm_f16x16_bytes (size_t rows, size_t n);

/* Packs row tiles [@tile0, @tile1) of the matrix @w of 16-bit values (F16
 * or BF16 alike: they are only moved; @rows rows of @n values, @row_bytes
 * apart) into their place in @out, which holds the whole packed matrix
 * (llm_f16x16_bytes; 64-byte aligned for the fastest loads, any alignment
 * works). Tiles are independent, so threads may pack disjoint ranges of
 * one matrix at once. */
void llm_f16x16_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
    size_t tile1, void *out);

/* Row @r of the packed matrix @packed (@n wide) as the file held it: @n
 * 16-bit values at @out. */
void llm_f16x16_unpack_row (const void *packed, size_t n, size_t r, void *out);

/* For rows r in [r0, r1) (r0 a multiple of 16, r1 <= @rows) and tokens
 * t < @n_tok: y[t * ldy + r] = dot(row r of the packed matrix @packed, @n
 * wide, @rows rows; activations at @xq + t * @xs, F16 or BF16 as the
 * weights, as llm_matmul_convert() makes them). With @next NULL the caller
 * computes all of [r0, r1); otherwise it claims @step rows (a multiple of
 * 16) at a time from *@next (r0 before any thread starts) until r1 is
 * reached, so threads can share one product. Each result is the packed
 * reference's bit for bit (the order above), whichever thread, claim or
 * tile computed it. false (nothing claimed or written) only if scratch
 * memory (llm_gemm_scratch) ran out. */
typedef bool (*LlmF16x16Fn) (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The scalar reference over the packed layout for @wtype (LLM_TYPE_F16 or
 * LLM_TYPE_BF16; plain C, any CPU, never out of memory), or NULL for
 * another type. */
LlmF16x16Fn llm_f16x16_ref_fn (uint32_t wtype);

/* The AVX2/FMA/F16C kernels and the AVX-512F kernels for @wtype, or NULL
 * where this build has none or the type is neither F16 nor BF16. They do
 * not check the instruction set: the caller must (llm_cpu_kernels ()).
 * A product of one token reads llm_cpu_f16_one_token_tiles () row tiles
 * at once, as asked when they are looked up. */
LlmF16x16Fn llm_avx2_f16x16_fn (uint32_t wtype);
LlmF16x16Fn llm_avx512_f16x16_fn (uint32_t wtype);

#ifdef __cplusplus
}
#endif
