/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to q4_0x16-avx2.c and q8_0x16-avx2.c (built with -mavx2 -mfma
 * -mf16c): the AVX2 tile functions of both layouts, around the lines that
 * read a block's weights, which each file supplies. A 32-byte load of half
 * a block's vector holds 4 code bytes of each of 8 rows (rows 8 h .. 8 h +
 * 7), one row per 32-bit lane, so a tile is computed as two halves of 8
 * rows, each an __m256 of sums per token. */
#pragma once

#include <immintrin.h>
#include <stdint.h>

#include "x16-simd.h"

/* The activations for a vector pair: 8 bytes (groups 2 p and 2 p + 1) in
 * every 64-bit lane, and (X16_SWAP_PAIRS) with each lane's two groups
 * swapped. */
#define X16_BCAST8(p) _mm256_broadcastq_epi64 (_mm_loadl_epi64 ((const __m128i *) (p)))
#define X16_SWAP_PAIRS(v) _mm256_shuffle_epi32 ((v), 0xb1)

/* @acc plus each 32-bit lane's 4 products u * s (unsigned by signed
 * bytes): AVX-VNNI's vpdpbusd. asm, so the AVX2 files need no -mavxvnni;
 * only reached where the CPU has AVX-VNNI. */
INLINE __m256i
x16_vnni_dot4 (__m256i acc, __m256i u, __m256i s)
{
  __asm__ ("%{vex%} vpdpbusd %2, %1, %0" : "+x" (acc) : "x" (u), "x" (s));
  return acc;
}

/* Rows 8 h + lane < @rm of @v to y[lane]. */
INLINE void
x16_store_half (__m256 v, int h, int rm, float *y)
{
  if (rm >= 8 * (h + 1)) {
    _mm256_storeu_ps (y, v);
    return;
  }
  const __m256i keep = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (rm - 8 * h),
      _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps (y, keep, v);
}

/* The tile functions (X16TileFn) for RN tokens over a layout of
 * @BLOCK-byte blocks, with or without (@VNNI) AVX-VNNI, from the layout's
 * pieces: START (VNNI, bias) is a half's block sum before any product,
 * from the token's bias; SUMS (RN, VNNI) adds the products of the block at
 * pb (the block loop's b, pb, s in scope; X16_QS (t, b) the token codes):
 * to s[h][t] for both halves, to s[t] for half h; ADD (VNNI, acc, s, bias,
 * pb, h, dx) is @acc plus the half's block term, the reference's rounding.
 *
 * X16_TILE_BOTH computes both halves of each block at once, so the tile is
 * read once, as it streams in; X16_TILE_HALVES one half after the other,
 * each over all the blocks, so more tokens' sums and accumulators fit the
 * 16 registers, and the second half reads the tile again, from cache. */
#define X16_TILE_BOTH(name, RN, VNNI, BLOCK, START, SUMS, ADD) \
  static void \
  name (X16_TILE_ARGS) \
  { \
    __m256 acc[2][RN]; \
    UNROLL for (int h = 0; h < 2; h++) \
      UNROLL for (int t = 0; t < (RN); t++) \
        acc[h][t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * (BLOCK); \
      x16_ahead (ahead, pb, ((BLOCK) + 63) / 64); \
      __m256i s[2][RN]; \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int t = 0; t < (RN); t++) \
          s[h][t] = START (VNNI, bias[t * nb + b]); \
      SUMS (RN, VNNI) \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int t = 0; t < (RN); t++) \
          acc[h][t] = ADD (VNNI, acc[h][t], s[h][t], bias[t * nb + b], pb, h, \
              dx[t * nb + b]); \
    } \
    UNROLL for (int t = 0; t < (RN); t++) \
      UNROLL for (int h = 0; h < 2; h++) \
        if (8 * h < rm) \
          x16_store_half (acc[h][t], h, rm, y + t * ldy + 8 * h); \
  }

#define X16_TILE_HALVES(name, RN, VNNI, BLOCK, START, SUMS, ADD) \
  static void \
  name (X16_TILE_ARGS) \
  { \
    for (int h = 0; h < 2 && 8 * h < rm; h++) { \
      __m256 acc[RN]; \
      UNROLL for (int t = 0; t < (RN); t++) \
        acc[t] = _mm256_setzero_ps (); \
      for (size_t b = 0; b < nb; b++) { \
        const uint8_t *pb = P + b * (BLOCK); \
        if (h == 0 || !ahead->stream) \
          x16_ahead (ahead, pb, ((BLOCK) + 63) / 64); \
        __m256i s[RN]; \
        UNROLL for (int t = 0; t < (RN); t++) \
          s[t] = START (VNNI, bias[t * nb + b]); \
        SUMS (RN, VNNI) \
        UNROLL for (int t = 0; t < (RN); t++) \
          acc[t] = ADD (VNNI, acc[t], s[t], bias[t * nb + b], pb, h, dx[t * nb + b]); \
      } \
      UNROLL for (int t = 0; t < (RN); t++) \
        x16_store_half (acc[t], h, rm, y + t * ldy + 8 * h); \
    } \
  }
