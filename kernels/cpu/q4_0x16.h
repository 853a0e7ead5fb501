/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q4_0 weights prepared once, at load, for every batch size: 16 rows
 * interleaved per block, in exactly the bytes of Q4_0 (18 per 32 values
 * per row), so a model is held once and the GGUF layout is not read after
 * the pack. One kernel family over that layout serves decode (one token)
 * through prefill (128 and more), and every result equals the scalar
 * reference dot_q4_0 in matmul.c bit for bit. Pure C, no GLib.
 *
 * The layout. Rows are grouped in tiles of 16 (rows 16 T .. 16 T + 15; the
 * last tile padded with zero rows). Tile T's block b (values 32 b ..
 * 32 b + 31 of each of its rows) is 288 bytes at (T * nb + b) * 288, nb =
 * n / 32, so a tile is one contiguous run and the whole matrix one stream
 * in (tile, block) order. A Q4_0 block's byte qs[j] holds value j in its
 * low nibble and value 16 + j in its high one; the packed block keeps
 * those bytes as they are, in groups of 4 (qs[4 g .. 4 g + 3], g < 4):
 *
 *   bytes 64 k + 4 r .. 64 k + 4 r + 3  (vector k < 4, row r < 16):
 *       group 2 (k / 2) + ((r & 1) ^ (k & 1)) of row r;
 *   bytes 256 + 2 r: row r's d, the Q4_0 block's fp16 as it is.
 *
 * So a 64-byte load of vector k has one row per 32-bit lane (rows 0..7 in
 * its first 32 bytes, for AVX2), and ANDed with 0x0f holds 4 consecutive
 * values of every row, shifted right by 4 the 4 values 16 further on:
 * what vpmaddubsw / vpdpbusd multiply against 4 activation bytes in the
 * same lane. Vectors 2 p and 2 p + 1 hold groups 2 p and 2 p + 1, even
 * rows and odd rows swapped: the matching activations for both are one
 * 8-byte broadcast (groups 2 p, 2 p + 1 in alternate lanes) and that
 * broadcast with its lane pairs swapped, which halves the activation
 * loads, the scarcer resource next to the multiplies. The pack only moves
 * 4-byte groups; nothing is widened or converted. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_Q4_0X16_ROWS 16
/* One tile's block: 16 rows x (16 nibble bytes + 2 bytes of d). */
#define LLM_Q4_0X16_BLOCK_BYTES 288
#define LLM_Q4_0X16_D_OFFSET 256

/* Bytes of a packed @rows x @n matrix (@n a multiple of 32): 18 per row
 * and block, rows rounded up to a multiple of 16. */
size_t llm_q4_0x16_bytes (size_t rows, size_t n);

/* Packs row tiles [@tile0, @tile1) of the Q4_0 matrix @w (@rows rows of
 * @n values, @row_bytes apart) into their place in @out, which holds the
 * whole packed matrix (llm_q4_0x16_bytes). Tiles are independent, so
 * threads may pack disjoint ranges of one matrix at once. */
void llm_q4_0x16_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
    size_t tile1, void *out);

/* Row @r of the packed matrix @packed (@n wide) as ordinary Q4_0 blocks
 * (n / 32 of them, 18 bytes each) at @out: the row's original bytes. */
void llm_q4_0x16_unpack_row (const void *packed, size_t n, size_t r, void *out);

/* For rows r in [r0, r1) (r0 a multiple of 16, r1 <= @rows) and tokens
 * t < @n_tok: y[t * ldy + r] = dot(row r of the packed matrix @packed,
 * @n wide, @rows rows; Q8_0 activations at @xq + t * @xs, as
 * llm_matmul_convert() makes them). With @next NULL the caller computes
 * all of [r0, r1); otherwise it claims @step rows (a multiple of 16) at a
 * time from *@next (r0 before any thread starts) until r1 is reached, so
 * threads can share one product. Each result is dot_q4_0's bit for bit,
 * whichever thread, claim or tile computed it. false (nothing claimed or
 * written) only if scratch memory (llm_gemm_scratch) ran out. */
typedef bool (*LlmQ4x16Fn) (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The scalar reference over the packed layout: plain C, any CPU. */
bool llm_q4_0x16_ref (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The AVX2/FMA/F16C kernel (with AVX-VNNI where the CPU has it and
 * LLM_NO_AVX_VNNI is unset) and the AVX-512 F/BW/VL/DQ + VNNI kernel, or
 * NULL where this build has none. They do not check the CPU: the caller
 * must (llm_cpu_isa_supported ()). One token fetches its weights ahead as
 * the CPU and environment say (llm_cpu_x16_one_token_ahead); the _hw_fn
 * kernels leave that to the hardware prefetchers (LLM_X16_AHEAD_NONE's),
 * whatever the environment says, for the engine to take turns with. */
LlmQ4x16Fn llm_avx2_q4_0x16_fn (void);
LlmQ4x16Fn llm_avx512_q4_0x16_fn (void);
LlmQ4x16Fn llm_avx2_q4_0x16_hw_fn (void);
LlmQ4x16Fn llm_avx512_q4_0x16_hw_fn (void);

#ifdef __cplusplus
}
#endif
