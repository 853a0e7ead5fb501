/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the AVX-512 kernels of the 16-row layouts (q4_0x16.h,
 * q5_0x16.h, q8_0x16.h): their products of many tokens on Intel's AMX
 * tile unit (AMX-TILE + AMX-INT8: Sapphire Rapids, Emerald Rapids,
 * Granite Rapids), where the CPU has it and the OS lets this process use
 * it (llm_cpu_has_amx). Same contract and same results, bit for bit, as
 * the AVX-512 product each falls back to for fewer tokens.
 *
 * Why: an AVX-512 token-block (16 rows x 32 values x one token) is 8
 * vpdpbusd, 4 activation broadcasts and swaps, then the block's scaling;
 * one AMX tdpbssd does the integer part of 16 tokens' token-blocks at
 * once, leaving only the scaling (convert, two multiplies, an add) to the
 * vector units.
 *
 * How. A row tile's blocks are unpacked once (X16AmxUnpackFn) into AMX's
 * B layout: per block 8 rows of 64 bytes, row k holding the 4 values
 * 4 k .. 4 k + 3 of each of the 16 weight rows as signed bytes (the
 * layouts' swap of groups between even and odd rows undone, the offset
 * taken off), and the 16 d_w as floats. The activations are laid out per
 * 16 tokens and block as AMX's A: 16 rows of 32 signed codes. tdpbssd
 * then gives C[token][row] = the block's sumi, exactly the integer
 * dot_q*_0 computes, which is scaled in the reference's order, one
 * rounding per operation. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tokens from which a product runs on AMX; fewer take the AVX-512 tiles.
 * The per-block scaling bounds AMX (in cache, one thread, 128 tokens of a
 * Q8_0 matrix: 82 us for the tiles and stores alone, 90 us for the scaling
 * alone, 114-123 us together against 190 us on AVX-512), so it needs a few
 * token tiles to pay: 246M forwards on 2 threads of a Xeon with AMX, ms
 * with AMX / without, Q8_0 at 16 rows 15.7-16.4 / 13.8-13.9, 24 rows
 * 21.7-22.8 / 18.2-18.3, 32 rows 23.1-24.1 / 23.3-23.6, 64 rows
 * 37.6-39.7 / 44.9-45.4, 128 rows 71.6-74.0 / 90.1-91.4; Q4_0 even at
 * 16, ahead from 32. */
#define X16_AMX_MIN_TOKENS 32

/* Unpacks the @nb blocks of the row tile at @tile: block b's B rows (512
 * signed bytes) at @codes + 512 b and its 16 d_w at @dw + 16 b, fetching
 * the stream @dist bytes ahead as it reads. */
typedef void (*X16AmxUnpackFn) (size_t nb, const uint8_t *tile, int8_t *codes, float *dw,
    size_t dist);

typedef struct {
  X16AmxUnpackFn unpack;
  size_t block_bytes;   /* of a packed (tile, block) record */
  /* The block's term: (float) sumi * (d_w * d_x) (Q8_0, Q5_0) when set,
   * ((float) sumi * d_w) * d_x (Q4_0) when not. */
  bool dw_dx_first;
} X16AmxFormat;

/* The product of q4_0x16.h's contract over a layout of format @f, for
 * any token count (the caller sends fewer than X16_AMX_MIN_TOKENS to its
 * AVX-512 product instead). Only where llm_cpu_has_amx() said yes; false
 * when scratch memory runs out. */
bool llm_x16_amx_run (const X16AmxFormat *f, size_t n, const void *packed, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step);
