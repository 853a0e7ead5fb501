/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q4_K, Q5_K and Q6_K weights prepared once, at load, for every batch
 * size: rows interleaved so that one vector load and an AND or a shift
 * give 4 consecutive values of each of 8 rows (256 bits) or 16 rows (512
 * bits) in that row's 32-bit lane, which is what vpdpbusd / vpmaddubsw
 * want against 4 activation bytes broadcast to every lane. About the size
 * of the GGUF rows (Q4_K +2.8%, Q5_K +2.3%, Q6_K +1.0%), so a model is
 * held once, and the GGUF layout is not read after the pack. One kernel
 * family over it serves decode (one token) through prefill (128 and
 * more), and a row's result does not depend on how many tokens, which
 * tile of tokens or which thread computed it. Pure C, no GLib.
 *
 * Tiles. Rows are grouped 16 to a tile (rows 16 T .. 16 T + 15; the last
 * tile padded with zero rows): two 8-row halves, each a 256-bit vector,
 * hence the name; AVX-512 takes both halves in one vector. Tile T's
 * super-block b (values 256 b .. 256 b + 255 of its 16 rows) is
 * LLM_KX8_BLOCK_BYTES (type) bytes at (T * nb + b) * that, nb = n / 256,
 * so the matrix is one stream in (tile, super-block) order. Every part
 * below starts at a multiple of 64 bytes within the block. "Row r at 4 r"
 * means: bytes 4 r .. 4 r + 3 of a 64-byte unit belong to row r (rows
 * 0-7 in its first 32 bytes).
 *
 * Q4_K, 2368 bytes (16 x 148):
 *   [0, 2048)     unit 8 j + i (j < 4, i < 8), row r at 4 r: qs[32 j + 4 i
 *                 .. + 3] of the row's block, as they are: low nibbles are
 *                 values 64 j + 4 i .. + 3 (run 2 j), high nibbles values
 *                 64 j + 32 + 4 i .. + 3 (run 2 j + 1);
 *   [2048, 2176)  scales: run s at 16 s, byte r = row r's 6-bit scale;
 *   [2176, 2304)  mins: pair k (< 4) at 32 k, bytes 2 r, 2 r + 1 = row
 *                 r's mins of runs 2 k, 2 k + 1 (so a zero-extension to
 *                 16 bits pairs them for vpmaddwd with two run sums);
 *   [2304, 2336)  d, fp16 as in the block, row r at 2 r;
 *   [2336, 2368)  dmin, likewise.
 * Q5_K, 2880 bytes (16 x 180): qs as Q4_K in [0, 2048); [2048, 2560) unit
 *   i (< 8), row r at 4 r: qh[4 i .. + 3] (bit 2 j of a byte is the fifth
 *   bit of the low nibble of unit 8 j + i's byte at the same place, bit
 *   2 j + 1 that of its high nibble); scales [2560, 2688), mins
 *   [2688, 2816), d [2816, 2848), dmin [2848, 2880) as Q4_K's.
 * Q6_K, 3392 bytes (16 x 212): for h < 2, i < 8, the 192 bytes at
 *   192 (8 h + i) are three units, row r at 4 r: ql[64 h + 4 i ..] (A),
 *   ql[64 h + 32 + 4 i ..] (B), qh[32 h + 4 i ..]; A's low nibbles are
 *   the low 4 bits of values 128 h + 4 i .. + 3, B's of 128 h + 32 + 4 i,
 *   A's high nibbles of 128 h + 64 + 4 i, B's of 128 h + 96 + 4 i; the qh
 *   byte's bits 0-1, 2-3, 4-5, 6-7 are the top 2 bits of those four, in
 *   that order. [3072, 3328): scales, run s (16 values) at 16 s, byte r =
 *   row r's int8 scale; [3328, 3360) d; [3360, 3392) zero, so every block
 *   stays 64-byte aligned.
 *
 * Results. Every kernel, the scalar reference over this layout included,
 * forms per row and super-block the exact integer sums
 *   Q4_K, Q5_K:  I = sum_s sc_s * sum_{k in run s} u_k q_k,
 *                M = sum_s m_s * (sum of the activation codes of run s);
 *   Q6_K:        T = sum_s sc_s * sum_{k in run s} (u_k - 32) q_k,
 * and adds them in float, super-block by super-block, as
 *   acc = fma (d_w d_x, (float) I, acc); acc = fma (-(dmin_w d_x), (float) M, acc)
 *   (Q6_K: acc = fma (d_w d_x, (float) T, acc)), from acc = 0,
 * each product d_w d_x rounded to float first (as the reference's). So all
 * of them agree bit for bit, whatever the path, batch, tile or thread. The
 * scalar reference dot products (kquants.c) add the same integers split
 * into 8 lanes in another order; tests/test-kquants-x8.c bounds the
 * difference. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_KX8_ROWS 16

/* Bytes of one tile's super-block for @wtype (an LlmType id), or 0 if
 * @wtype is not Q4_K, Q5_K or Q6_K. */
size_t llm_kx8_block_bytes (uint32_t wtype);

/* Bytes of a packed @rows x @n matrix of @wtype (@n a multiple of 256),
 * rows rounded up to a multiple of 16; 0 for an unsupported type. */
size_t llm_kx8_bytes (uint32_t wtype, size_t rows, size_t n);

/* Packs row tiles [@tile0, @tile1) of the @wtype matrix @w (@rows rows of
 * @n values, @row_bytes apart) into their place in @out, which holds the
 * whole packed matrix (llm_kx8_bytes; 64-byte aligned for the fastest
 * loads, any alignment works). Tiles are independent, so threads may pack
 * disjoint ranges of one matrix at once. */
void llm_kx8_pack (uint32_t wtype, const void *w, size_t row_bytes, size_t rows, size_t n,
    size_t tile0, size_t tile1, void *out);

/* Row @r of the packed @wtype matrix @packed (@n wide) as ordinary blocks
 * (n / 256 of them) at @out: the row's original bytes, exactly. */
void llm_kx8_unpack_row (uint32_t wtype, const void *packed, size_t n, size_t r, void *out);

/* For rows r in [r0, r1) (r0 a multiple of 16, r1 <= @rows) and tokens
 * t < @n_tok: y[t * ldy + r] = dot(row r of the packed matrix @packed, @n
 * wide, @rows rows; Q8_K activations at @xq + t * @xs, as
 * llm_matmul_convert() makes them for the weight type). With @next NULL
 * the caller computes all of [r0, r1); otherwise it claims @step rows (a
 * multiple of 16) at a time from *@next (r0 before any thread starts)
 * until r1 is reached, so threads can share one product. false (nothing
 * claimed or written) only if scratch memory (llm_gemm_scratch) ran out. */
typedef bool (*LlmKx8Fn) (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The scalar reference over the packed layout for @wtype (plain C, any
 * CPU, never out of memory), or NULL for an unsupported type. */
LlmKx8Fn llm_kx8_ref_fn (uint32_t wtype);

/* The AVX2/FMA/F16C kernels (using AVX-VNNI where the CPU has it and
 * LLM_NO_AVX_VNNI is unset) and the AVX-512 F/BW/VL/DQ + VNNI kernels for
 * @wtype, or NULL where this build has none or the type is unsupported.
 * They do not check the CPU: the caller must (llm_cpu_kernels ()). */
LlmKx8Fn llm_avx2_kx8_fn (uint32_t wtype);
LlmKx8Fn llm_avx512_kx8_fn (uint32_t wtype);

#ifdef __cplusplus
}
#endif
