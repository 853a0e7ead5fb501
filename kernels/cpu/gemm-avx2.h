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

/* Q4_0 weights interleaved 16 rows to a tile, so that every activation
 * broadcast serves 16 rows: per block, 8 groups of 64 bytes (4 nibble
 * values, 0..15, of each row; rows 0-7 in the first 32 bytes), then the 16
 * rows' d as floats. @rm rows of @nb blocks from @w, @rb bytes apart; rows
 * past @rm are zero. */
#define Q4_0_PB (8 * 64 + 64)
#define Q4_0_ROWS 16
void llm_avx2_pack_q4_0 (const uint8_t *w, size_t rb, int rm, size_t nb, uint8_t *out);

/* Per token and block of Q8_0 activations: d_x (@dx), and 8 * the sum of
 * the block's values (@corr: the nibbles' offset of 8, taken off after
 * multiplying unsigned nibbles), both at [t * nb + b]. */
void llm_avx2_q4_0_act_side (const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, float *dx,
    int32_t *corr);

/* Rows in lanes (Q4_0, K-quants): weight rows are packed @TR at a time by
 * an LlmPackFn into @pb bytes per block of @block_elems, then an
 * LlmRlTileFn computes those rows (@rm of them valid) for up to RN tokens:
 * y[t * ldy + r] for the tokens at @xb, @xs bytes apart. Q4_0 tiles also
 * get llm_avx2_q4_0_act_side()'s @dx and @corr for their tokens (K-quant
 * tiles get NULL). llm_gemm_rl() runs an LlmGemmFn's product with them;
 * @tiles[k] takes k + 1 tokens. */
typedef void (*LlmPackFn) (const uint8_t *w, size_t rb, int rm, size_t nb, uint8_t *out);
typedef void (*LlmRlTileFn) (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs,
    const float *dx, const int32_t *corr, float *y, size_t ldy, int rm);
bool llm_gemm_rl (const LlmRlTileFn *tiles, int RN, int TR, LlmPackFn pack, size_t block_elems,
    size_t pb, bool q4_0, size_t n, const void *w, size_t rb, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* K-quant weights (Q4_K, Q5_K with S = 8 runs of one scale per
 * super-block, Q6_K with S = 16) interleaved 8 rows to a tile, per
 * super-block: 64 groups of 32 bytes (4 unsigned values, Q6_K's standing
 * for q + 32, of each row), S vectors of the rows' run scales as int16
 * pairs (run s at K_SV + 32 s), 8 vectors pairing the rows' factors for
 * Q8_K's 16 bsums, then d and dmin as 8 floats each. Every part is whole
 * 32-byte vectors. The packer for @wtype, or NULL. */
#define K_W 0
#define K_SV 2048
#define K_CV(S) (K_SV + 32 * (S))
#define K_D(S) (K_CV (S) + 256)
#define K_PB(S) (K_D (S) + 64)
LlmPackFn llm_avx2_k_pack_fn (uint32_t wtype);
