/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q5_0 weights prepared once, at load, for every batch size: 16 rows
 * interleaved per block, in as many bytes as Q5_0 (22 per 32 values per
 * row), so a model is held once and the GGUF layout is not read after the
 * pack. One kernel family over that layout serves decode (one token)
 * through prefill, and every result equals the scalar reference dot_q5_0
 * in matmul.c bit for bit. Pure C, no GLib.
 *
 * The layout is q4_0x16.h's with a plane of fifth bits between the nibbles
 * and the scales. Tile T's block b is 352 bytes at (T * nb + b) * 352:
 *
 *   bytes 0 .. 255: the 16 rows' nibble bytes qs[16], exactly as
 *       q4_0x16.h arranges Q4_0's (vector k < 4, row r in lane r);
 *   bytes 256 + 4 r .. 256 + 4 r + 3: row r's 32 fifth bits, reordered so
 *       bit 2 k of byte i is the fifth bit of the low nibble in byte i of
 *       row r's lane of vector k, bit 2 k + 1 that of its high nibble
 *       (x16-layout.h's x16_high_bit);
 *   bytes 320 + 2 r: row r's d, the Q5_0 block's fp16 as it is.
 *
 * So a 32-byte load of the plane has one row per 32-bit lane, like the
 * nibble vectors, and for vector k one constant shift and a mask with 0x10
 * give each nibble byte its 16s: the kernels multiply whole 5-bit codes
 * u = value + 16 (0..31) as unsigned bytes, and start each sum from
 * -16 * (the token block's sum of codes) to take the offset back off. The
 * rest (sums per 16 rows in int32 lanes, one term per block in
 * dot_q5_0's order, (d_w * d_x) * sumi) is Q8_0's arithmetic. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "q4_0x16.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_Q5_0X16_ROWS 16
/* One tile's block: 16 rows x (16 nibble bytes + 4 of fifth bits + 2 of d). */
#define LLM_Q5_0X16_BLOCK_BYTES 352
#define LLM_Q5_0X16_HIGH_OFFSET 256
#define LLM_Q5_0X16_D_OFFSET 320

/* Bytes of a packed @rows x @n matrix (@n a multiple of 32): 22 per row
 * and block, rows rounded up to a multiple of 16. */
size_t llm_q5_0x16_bytes (size_t rows, size_t n);

/* Packs row tiles [@tile0, @tile1) of the Q5_0 matrix @w (@rows rows of
 * @n values, @row_bytes apart) into their place in @out, which holds the
 * whole packed matrix (llm_q5_0x16_bytes). Tiles are independent, so
 * threads may pack disjoint ranges of one matrix at once. */
void llm_q5_0x16_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
    size_t tile1, void *out);

/* Row @r of the packed matrix @packed (@n wide) as ordinary Q5_0 blocks
 * (n / 32 of them, 22 bytes each) at @out: the row's original bytes. */
void llm_q5_0x16_unpack_row (const void *packed, size_t n, size_t r, void *out);

/* The products have q4_0x16.h's contract (LlmQ4x16Fn) over this layout,
 * each result dot_q5_0's bit for bit. */
typedef LlmQ4x16Fn LlmQ5x16Fn;

/* The scalar reference over the packed layout: plain C, any CPU. */
bool llm_q5_0x16_ref (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);

/* The AVX2/FMA/F16C kernel (with AVX-VNNI where the CPU has it and
 * LLM_NO_AVX_VNNI is unset) and the AVX-512 F/BW/VL/DQ + VNNI kernel, or
 * NULL where this build has none. They do not check the CPU: the caller
 * must (llm_cpu_isa_supported ()). One token fetches its weights ahead as
 * the CPU and environment say (llm_cpu_x16_one_token_ahead); the _hw_fn
 * kernels leave that to the hardware prefetchers (LLM_X16_AHEAD_NONE's),
 * whatever the environment says, for the engine to take turns with. */
LlmQ5x16Fn llm_avx2_q5_0x16_fn (void);
LlmQ5x16Fn llm_avx512_q5_0x16_fn (void);
LlmQ5x16Fn llm_avx2_q5_0x16_hw_fn (void);
LlmQ5x16Fn llm_avx512_q5_0x16_hw_fn (void);

#ifdef __cplusplus
}
#endif
