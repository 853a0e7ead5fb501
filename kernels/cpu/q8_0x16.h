/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q8_0 weights prepared once, at load, for every batch size: 16 rows
 * interleaved per block, in exactly the bytes of Q8_0 (34 per 32 values
 * per row), so a model is held once and the GGUF layout is not read after
 * the pack. One kernel family over that layout serves decode (one token)
 * through prefill (128 and more), and every result equals the scalar
 * reference dot_q8_0 in matmul.c bit for bit. Pure C, no GLib.
 *
 * The layout. Rows are grouped in tiles of 16 (rows 16 T .. 16 T + 15; the
 * last tile padded with zero rows). Tile T's block b (values 32 b ..
 * 32 b + 31 of each of its rows) is 544 bytes at (T * nb + b) * 544, nb =
 * n / 32, so a tile is one contiguous run and the whole matrix one stream
 * in (tile, block) order. A Q8_0 block's 32 signed codes qs[j] are kept in
 * groups of 4 (qs[4 g .. 4 g + 3], g < 8), each byte XORed with 0x80, so
 * it reads as the unsigned w + 128:
 *
 *   bytes 64 k + 4 r .. 64 k + 4 r + 3  (vector k < 8, row r < 16):
 *       group 2 (k / 2) + ((r & 1) ^ (k & 1)) of row r, each byte ^ 0x80;
 *   bytes 512 + 2 r: row r's d, the Q8_0 block's fp16 as it is.
 *
 * So a 64-byte load of vector k has one row per 32-bit lane (rows 0..7 in
 * its first 32 bytes, for AVX2): 4 consecutive codes of every row, as the
 * unsigned operand vpdpbusd multiplies by 4 signed activation bytes in the
 * same lane; a kernel starts each sum from -128 * (the token block's sum
 * of codes) to take the offset back off. Vectors 2 p and 2 p + 1 hold
 * groups 2 p and 2 p + 1, even rows and odd rows swapped: the matching
 * activations for both are one 8-byte broadcast (groups 2 p, 2 p + 1 in
 * alternate lanes) and that broadcast with its lane pairs swapped, which
 * halves the activation loads, the scarcer resource next to the
 * multiplies. This is q4_0x16.h's arrangement with 8 vectors of whole
 * bytes where Q4_0 has 4 of nibble pairs. The pack moves 4-byte groups
 * and flips one bit per byte; nothing is widened or converted. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "q4_0x16.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_Q8_0X16_ROWS 16
/* One tile's block: 16 rows x (32 code bytes + 2 bytes of d). */
#define LLM_Q8_0X16_BLOCK_BYTES 544
#define LLM_Q8_0X16_D_OFFSET 512

/* Bytes of a packed @rows x @n matrix (@n a multiple of 32): 34 per row
 * and block, rows rounded up to a multiple of 16. */
size_t llm_q8_0x16_bytes (size_t rows, size_t n);

/* Packs row tiles [@tile0, @tile1) of the Q8_0 matrix @w (@rows rows of
 * @n values, @row_bytes apart) into their place in @out, which holds the
 * whole packed matrix (llm_q8_0x16_bytes). Tiles are independent, so
 * threads may pack disjoint ranges of one matrix at once. */
void llm_q8_0x16_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
    size_t tile1, void *out);

/* Row @r of the packed matrix @packed (@n wide) as ordinary Q8_0 blocks
 * (n / 32 of them, 34 bytes each) at @out: the row's original bytes. */
void llm_q8_0x16_unpack_row (const void *packed, size_t n, size_t r, void *out);

/* The products have q4_0x16.h's contract (LlmQ4x16Fn) over this layout:
 * for rows r in [r0, r1) (r0 a multiple of 16) and tokens t < @n_tok,
 * y[t * ldy + r] = dot(row r, the Q8_0 activations at @xq + t * @xs), each
 * result dot_q8_0's bit for bit, whichever thread, claim or tile computed
 * it; rows shared through @next / @step as there. */
typedef LlmQ4x16Fn LlmQ8x16Fn;

/* The scalar reference over the packed layout: plain C, any CPU. */
bool llm_q8_0x16_ref (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The AVX2/FMA/F16C kernel (with AVX-VNNI where the CPU has it and
 * LLM_NO_AVX_VNNI is unset) and the AVX-512 F/BW/VL/DQ + VNNI kernel, or
 * NULL where this build has none. They do not check the CPU: the caller
 * must (llm_cpu_isa_supported ()). One token fetches its weights ahead as
 * the CPU and environment say (llm_cpu_x16_one_token_ahead); the _hw_fn
 * kernels leave that to the hardware prefetchers (LLM_X16_AHEAD_NONE's),
 * whatever the environment says, for the engine to take turns with. */
LlmQ8x16Fn llm_avx2_q8_0x16_fn (void);
LlmQ8x16Fn llm_avx512_q8_0x16_fn (void);
LlmQ8x16Fn llm_avx2_q8_0x16_hw_fn (void);
LlmQ8x16Fn llm_avx512_q8_0x16_hw_fn (void);

#ifdef __cplusplus
}
#endif
