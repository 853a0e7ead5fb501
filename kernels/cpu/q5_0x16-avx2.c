/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C kernels over the packed Q5_0 layout of q5_0x16.h, for
 * every token count, with an AVX-VNNI variant. Built with -mavx2 -mfma
 * -mf16c and reached only after the caller's CPU check.
 *
 * The weights are read as Q4_0's (x16-avx2.h's nibble pairs, 4 values of
 * each of 8 rows per 32-bit lane), each nibble byte then given its 16s
 * from the plane of fifth bits: one 32-byte load of the plane per half
 * block, and per weight vector a shift by a constant, a mask and an OR.
 * That is paid once per block and token tile; per token the products are
 * Q4_0's, over the whole codes u = value + 16 (0..31):
 *
 * - plain AVX2: vpmaddubsw gives pair sums in int16; a vector pair's 4 of
 *   them are added in int16 (at most 4 * 2 * 31 * 128 = 31744) and widened
 *   by one vpmaddwd, twice a block: Q4_0's 8 would overflow;
 * - AVX-VNNI: vpdpbusd, one instruction per 32 products.
 *
 * Each sum starts from the token's bias (-16 * its sum of codes), so it
 * ends at dot_q5_0's sumi; then per block, as dot_q5_0:
 * acc += (d_w * d_x) * (float) sumi, one rounding per operation. */
#include "q5_0x16.h"
#include "x16-avx2.h"

#include <immintrin.h>
#include <string.h>

#include "isa.h"
#include "quantize.h"

/* Bit @bit of each byte of @plane moved to bit 4, the rest cleared: a
 * weight vector's 16s (x16_high_bit). The shift stays within each byte
 * where the mask looks. */
INLINE __m256i
sixteens (__m256i plane, int bit)
{
  const __m256i v = bit <= 4 ? _mm256_slli_epi16 (plane, 4 - bit)
      : _mm256_srli_epi16 (plane, bit - 4);
  return _mm256_and_si256 (v, _mm256_set1_epi8 (0x10));
}

/* x16_nibble_pair()'s @w with each byte's fifth bit: vector k = 2 p + c
 * has its low nibbles' bits at bit 2 k of the plane, its high ones' at
 * 2 k + 1. */
INLINE void
unpack_pair (const uint8_t *pb, int p, int h, __m256i w[4])
{
  x16_nibble_pair (pb, p, h, w);
  const __m256i plane = _mm256_loadu_si256 ((const __m256i *)
      (pb + LLM_Q5_0X16_HIGH_OFFSET + 32 * h));
  UNROLL for (int c = 0; c < 2; c++) {
    const int k = 2 * p + c;
    w[c] = _mm256_or_si256 (w[c], sixteens (plane, 2 * k));
    w[2 + c] = _mm256_or_si256 (w[2 + c], sixteens (plane, 2 * k + 1));
  }
}

/* @s plus the pair's products, in int32 both ways: plain widens each
 * pair's int16 sums, as a block's 8 could overflow. */
INLINE __m256i
dot_pair (int vnni, int p, const __m256i w[4], const __m256i x[4], __m256i s)
{
  (void) p;
  if (vnni)
    return x16_nibble_dot_vnni (s, w, x);
  return _mm256_add_epi32 (s, _mm256_madd_epi16 (x16_nibble_dot16 (w, x),
          _mm256_set1_epi16 (1)));
}

/* A half's block: dot_q5_0's acc + (d_w * d_x) * (float) sumi per row. */
INLINE __m256
add_block (int vnni, __m256 acc, __m256i sumi, int32_t bias, const uint8_t *pb, int h, float dx)
{
  (void) vnni, (void) bias;
  return x16_add_term_dwdx (acc, sumi, pb + LLM_Q5_0X16_D_OFFSET + 16 * h, dx);
}

#define SUMS_BOTH(RN, VNNI) X16_NIBBLE_SUMS_BOTH (RN, VNNI, unpack_pair, dot_pair)
#define SUMS_HALF(RN, VNNI) X16_NIBBLE_SUMS_HALF (RN, VNNI, unpack_pair, dot_pair)

/* Q4_0's token tiles: the weights are read the same way and cost about
 * as much per token (bench-q4_0x16 --in-cache, plain AVX2: 20-21 cycles a
 * token-block for both). */
/* Batches read each row tile unpacked once (X16Unpacked): the 16s are 3
 * operations a weight vector, which the packed tiles pay again for every
 * 4 tokens. Block b at U_BLOCK b: for vector pair p and half h its 4
 * value vectors as unpack_pair() makes them at 256 p + 128 h, then the
 * 16 d at U_D. */
#define U_BLOCK 576
#define U_D 512

INLINE void
unpacked_pair (const uint8_t *pb, int p, int h, __m256i w[4])
{
  UNROLL for (int k = 0; k < 4; k++)
    w[k] = _mm256_load_si256 ((const __m256i *) (pb + 256 * p + 128 * h + 32 * k));
}

INLINE __m256
add_block_u (int vnni, __m256 acc, __m256i s, int32_t bias, const uint8_t *pb, int h, float dx)
{
  return add_block (vnni, acc, s, bias, pb + U_D - LLM_Q5_0X16_D_OFFSET, h, dx);
}

static void
unpack_tile (size_t nb, const uint8_t *tile, uint8_t *out, size_t dist)
{
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = tile + b * LLM_Q5_0X16_BLOCK_BYTES;
    uint8_t *ub = out + b * U_BLOCK;
    x16_prefetch (pb, (LLM_Q5_0X16_BLOCK_BYTES + 63) / 64, dist);
    UNROLL for (int p = 0; p < 2; p++)
      UNROLL for (int h = 0; h < 2; h++) {
        __m256i w[4];
        unpack_pair (pb, p, h, w);
        UNROLL for (int k = 0; k < 4; k++)
          _mm256_store_si256 ((__m256i *) (ub + 256 * p + 128 * h + 32 * k), w[k]);
      }
    memcpy (ub + U_D, pb + LLM_Q5_0X16_D_OFFSET, 32);
  }
}

#define SUMS_HALF_U(RN, VNNI) X16_NIBBLE_SUMS_HALF (RN, VNNI, unpacked_pair, dot_pair)
#define U_TILES(pre, VNNI) \
  X16_TILE_HALVES (pre##_1, 1, VNNI, U_BLOCK, x16_start_bias, SUMS_HALF_U, add_block_u) \
  X16_TILE_HALVES (pre##_2, 2, VNNI, U_BLOCK, x16_start_bias, SUMS_HALF_U, add_block_u) \
  X16_TILE_HALVES (pre##_3, 3, VNNI, U_BLOCK, x16_start_bias, SUMS_HALF_U, add_block_u) \
  X16_TILE_HALVES (pre##_4, 4, VNNI, U_BLOCK, x16_start_bias, SUMS_HALF_U, add_block_u) \
  static const X16TileFn pre[X16_NIBBLE_RN] = { pre##_1, pre##_2, pre##_3, pre##_4 }; \
  static const X16Unpacked pre##_unpacked = { unpack_tile, pre, U_BLOCK, U_MIN_TOKENS };
/* From 12 tokens: on Zen 3 (AVX2 only), taking turns in one process, two
 * threads, 246M's layer shapes in huge pages, unpacked was 1.15-1.20x
 * slower at 5-6 tokens (the unpacking's reads do not overlap the
 * compute), even at 8, and 1.03x, 1.07x, 1.10x and 1.13x faster at 12,
 * 16, 32 and 128 (every round). */
#define U_MIN_TOKENS 12
U_TILES (u_plain, 0)
U_TILES (u_vnni, 1)

/* Q5_0 keeps 4 tokens a tile: 3 took 1.02-1.11x the time at 7 to 64
 * tokens (measured as for Q4_0's). */
X16_NIBBLE_KERNELS (q5_0x16, LLM_Q5_0X16_BLOCK_BYTES, 16, x16_start_bias,
    SUMS_BOTH, SUMS_HALF, add_block, &u_plain_unpacked, &u_vnni_unpacked, 0)
