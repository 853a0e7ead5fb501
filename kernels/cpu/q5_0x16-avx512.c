/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 (F, BW, VL, DQ) + VNNI kernels over the packed Q5_0 layout of
 * q5_0x16.h, for every token count. Built with those instruction sets and
 * reached only after the caller's CPU check.
 *
 * q4_0x16-avx512.c's kernel over whole 5-bit codes: a block's nibble
 * vectors split as Q4_0's, each given its fifth bits from the plane (one
 * 64-byte load a block; per vector a constant shift and one vpternlogd
 * that ORs the masked bit in), then vpdpbusd from the token's bias (-16 *
 * its sum of codes) to dot_q5_0's sumi, and per block, as dot_q5_0:
 * acc += (d_w * d_x) * (float) sumi, one rounding per operation. */
#include "q5_0x16.h"
#include "x16-avx512.h"

#include <immintrin.h>
#include <string.h>

#include "quantize.h"

/* @w | (bit @bit of each byte of @plane as 16): x16_high_bit's place of a
 * vector's fifth bits. */
INLINE __m512i
with_sixteens (__m512i w, __m512i plane, int bit)
{
  const __m512i v = bit <= 4 ? _mm512_slli_epi16 (plane, 4 - bit)
      : _mm512_srli_epi16 (plane, bit - 4);
  /* a | (b & c) */
  return _mm512_ternarylogic_epi32 (w, v, _mm512_set1_epi8 (0x10), 0xf8);
}

INLINE void
unpack_pair (const uint8_t *pb, int p, __m512i w[4])
{
  x16_nibble_pair_512 (pb, p, w);
  const __m512i plane = _mm512_loadu_si512 (pb + LLM_Q5_0X16_HIGH_OFFSET);
  UNROLL for (int c = 0; c < 2; c++) {
    const int k = 2 * p + c;
    w[c] = with_sixteens (w[c], plane, 2 * k);
    w[2 + c] = with_sixteens (w[2 + c], plane, 2 * k + 1);
  }
}

#define SUMS(RN, CH) X16_NIBBLE_SUMS_512 (RN, CH, unpack_pair)

/* dot_q5_0's (d_w * d_x) * (float) sumi is this product. */
X16_TILES_512 (tiles, LLM_Q5_0X16_BLOCK_BYTES, LLM_Q5_0X16_D_OFFSET, SUMS, x16_term_dwdx_512)

X16_AVX512_PRODUCTS (q5_0x16, 1, .tiles = tiles, .rn = X16_RN_512,
    .block_bytes = LLM_Q5_0X16_BLOCK_BYTES, .offset = 16)

#if defined(LLM_HAVE_AMX)
X16_AMX_NIBBLE_UNPACK (amx_unpack, unpack_pair, LLM_Q5_0X16_BLOCK_BYTES, LLM_Q5_0X16_D_OFFSET,
    16)
static const X16AmxFormat amx = { amx_unpack, LLM_Q5_0X16_BLOCK_BYTES, true };
X16_AMX_PRODUCTS (q5_0x16, &amx)
#endif

X16_AVX512_LOOKUPS (q5_0x16)
