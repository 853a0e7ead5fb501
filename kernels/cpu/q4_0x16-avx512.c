/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 (F, BW, VL, DQ) + VNNI kernels over the packed Q4_0 layout of
 * q4_0x16.h, for every token count. Built with those instruction sets and
 * reached only after the caller's CPU check.
 *
 * A 64-byte load of a block's vector holds 4 nibble bytes of each of the
 * tile's 16 rows, one row per 32-bit lane: ANDed with 0x0f, 4 values of
 * every row, shifted right by 4 the 4 values 16 further on. vpdpbusd
 * multiplies those (unsigned) by the token's 4 matching activation bytes
 * in each lane (one 8-byte broadcast serves a vector pair, as is and with
 * lane pairs swapped) and adds each lane's 4 products into its int32 sum,
 * so 8 of them give each of the 16 rows its whole block sum, starting from
 * the token's bias (-8 * its sum of codes): dot_q4_0's sumi. Then per
 * block, as dot_q4_0: acc += ((float) sumi * d_w) * d_x, one rounding per
 * operation, never fused. The weights are unpacked once per block and
 * token tile and used by up to 9 tokens.
 *
 * What bounds it (Zen 5, which runs vpdpbusd and vmulps on the same two
 * pipes and issues 2 vector loads a cycle): per token and 16-row block, 8
 * vpdpbusd + 2 vmulps are 5 cycles of multiplies, and 4 activation
 * broadcasts + the bias + d_x 3 cycles of loads. Measured in cache (4.5
 * GHz): 5.7 cycles a token-block from 8 tokens on; a broadcast per 4-byte
 * group instead of per pair made it 6.2-6.9 (10 loads, the limit). One
 * token is bound by memory instead: 288 bytes a block at 43 GB/s is 30
 * cycles. */
#include "q4_0x16.h"
#include "x16-avx512.h"

#include <immintrin.h>
#include <string.h>

#include "quantize.h"

/* A block's products, the low nibbles' and the high ones' in two chains. */
#define SUMS(RN, CH) X16_NIBBLE_SUMS_512 (RN, CH, x16_nibble_pair_512)

/* dot_q4_0's order: ((float) sumi * d_w) * d_x. */
INLINE __m512
block_term (__m512 sumi, __m512 dw, __m512 dx)
{
  return _mm512_mul_ps (_mm512_mul_ps (sumi, dw), dx);
}

X16_TILES_512 (tiles, LLM_Q4_0X16_BLOCK_BYTES, LLM_Q4_0X16_D_OFFSET, SUMS, block_term)

X16_AVX512_PRODUCTS (q4_0x16, 1, .tiles = tiles, .rn = X16_RN_512,
    .block_bytes = LLM_Q4_0X16_BLOCK_BYTES, .offset = 8)

#if defined(LLM_HAVE_AMX)
X16_AMX_NIBBLE_UNPACK (amx_unpack, x16_nibble_pair_512, LLM_Q4_0X16_BLOCK_BYTES,
    LLM_Q4_0X16_D_OFFSET, 8)
static const X16AmxFormat amx = { amx_unpack, LLM_Q4_0X16_BLOCK_BYTES, false };
X16_AMX_PRODUCTS (q4_0x16, &amx)
#endif

X16_AVX512_LOOKUPS (q4_0x16)
