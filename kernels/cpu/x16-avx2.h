/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to q4_0x16-avx2.c, q5_0x16-avx2.c and q8_0x16-avx2.c (built
 * with -mavx2 -mfma -mf16c): the AVX2 tile functions of the layouts,
 * around the lines that read a block's weights, which each file supplies
 * (the nibble layouts' shared reading is here too). A 32-byte load of half
 * a block's vector holds 4 code bytes of each of 8 rows (rows 8 h .. 8 h +
 * 7), one row per 32-bit lane, so a tile is computed as two halves of 8
 * rows, each an __m256 of sums per token. */
#pragma once

#include <immintrin.h>
#include <stdint.h>

#include "isa.h"

#include "x16-simd.h"

/* The product @name, @name_near, the same fetching one token's stream
 * X16_PREFETCH_NEAR_BYTES ahead (X16Kernel.one_near), and @name_hw,
 * fetching nothing ahead for one token (X16Kernel.hw_tokens), over the
 * X16Kernel the remaining arguments initialise. */
#define X16_AVX2_PRODUCTS(name, ...) \
  X16_PRODUCT (name, __VA_ARGS__) \
  X16_PRODUCT (name##_near, __VA_ARGS__, .one_near = true) \
  X16_PRODUCT (name##_hw, __VA_ARGS__, .hw_tokens = 1)

/* Of X16_AVX2_PRODUCTS' three, the one for this CPU and environment, and
 * (X16_HW) the one that leaves one token's fetching to the hardware. */
#define X16_FOR_CPU(name) \
  (llm_cpu_x16_one_token_ahead () == LLM_X16_AHEAD_NONE ? name##_hw \
      : llm_cpu_x16_one_token_near () ? name##_near : name)
#define X16_HW(name) name##_hw

/* The activations for a vector pair: 8 bytes (groups 2 p and 2 p + 1) in
 * every 64-bit lane, and (X16_SWAP_PAIRS) with each lane's two groups
 * swapped. */
#define X16_BCAST8(p) _mm256_broadcastq_epi64 (_mm_loadl_epi64 ((const __m128i *) (p)))
#define X16_SWAP_PAIRS(v) _mm256_shuffle_epi32 ((v), 0xb1)

/* Makes @v exist here: GCC otherwise hoists every vpmaddubsw of a block
 * above the int16 adds that consume them, and the products, all live at
 * once, spill to the stack (plain AVX2 Q4_0 at 4 tokens: 104 stack
 * references in the tile function, 48 with this). */
#define X16_KEEP(v) __asm__ ("" : "+x" (v))

/* @acc plus each 32-bit lane's 4 products u * s (unsigned by signed
 * bytes): AVX-VNNI's vpdpbusd. asm, so the AVX2 files need no -mavxvnni;
 * only reached where the CPU has AVX-VNNI. */
INLINE __m256i
x16_vnni_dot4 (__m256i acc, __m256i u, __m256i s)
{
  __asm__ ("%{vex%} vpdpbusd %2, %1, %0" : "+x" (acc) : "x" (u), "x" (s));
  return acc;
}

/* acc + (float) sumi * (d_w * d_x) per row, the 8 d_w (fp16) at @d: the
 * order of dot_q8_0 and dot_q5_0 (whose (d_w * d_x) * sumi is the same
 * product). */
INLINE __m256
x16_add_term_dwdx (__m256 acc, __m256i sumi, const uint8_t *d, float dx)
{
  const __m256 dw = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) d));
  return _mm256_add_ps (acc, _mm256_mul_ps (_mm256_cvtepi32_ps (sumi),
          _mm256_mul_ps (dw, _mm256_set1_ps (dx))));
}

/* START of the tile macros below for layouts whose sums are int32 from
 * the token's bias on, with or without AVX-VNNI. */
INLINE __m256i
x16_start_bias (int vnni, int32_t bias)
{
  (void) vnni;
  return _mm256_set1_epi32 (bias);
}

/* --- the nibble layouts (q4_0x16.h, q5_0x16.h) ---------------------- */

/* Half @h (rows 8 h .. 8 h + 7) of vector pair @p of the block at @pb:
 * [0], [1] the low nibbles of vectors 2 p, 2 p + 1, [2], [3] their high
 * nibbles, each row's 4 values in its lane. */
INLINE void
x16_nibble_pair (const uint8_t *pb, int p, int h, __m256i w[4])
{
  const __m256i low4 = _mm256_set1_epi8 (0x0f);
  UNROLL for (int c = 0; c < 2; c++) {
    const __m256i v = _mm256_loadu_si256 ((const __m256i *) (pb + 128 * p + 64 * c + 32 * h));
    w[c] = _mm256_and_si256 (v, low4);
    w[2 + c] = _mm256_and_si256 (_mm256_srli_epi16 (v, 4), low4);
  }
}

/* The activations matching x16_nibble_pair()'s @w for the token's codes
 * @q: groups @p and @p + 4 in the even and odd lanes, and the other way
 * round. */
INLINE void
x16_nibble_acts (const int8_t *q, int p, __m256i x[4])
{
  x[0] = X16_BCAST8 (q + 8 * p);
  x[1] = X16_SWAP_PAIRS (x[0]);
  x[2] = X16_BCAST8 (q + 16 + 8 * p);
  x[3] = X16_SWAP_PAIRS (x[2]);
}

/* @s plus each lane's products of a vector pair's @w by @x: AVX-VNNI's
 * int32 sums. */
INLINE __m256i
x16_nibble_dot_vnni (__m256i s, const __m256i w[4], const __m256i x[4])
{
  UNROLL for (int k = 0; k < 4; k++)
    s = x16_vnni_dot4 (s, w[k], x[k]);
  return s;
}

/* The same products by plain AVX2: vpmaddubsw's pair sums, the pair's 4
 * added in int16 (8 products a lane: at most 8 * 31 * 128 = 31744 for
 * codes up to 31). */
INLINE __m256i
x16_nibble_dot16 (const __m256i w[4], const __m256i x[4])
{
  return _mm256_add_epi16 (
      _mm256_add_epi16 (_mm256_maddubs_epi16 (w[0], x[0]), _mm256_maddubs_epi16 (w[1], x[1])),
      _mm256_add_epi16 (_mm256_maddubs_epi16 (w[2], x[2]), _mm256_maddubs_epi16 (w[3], x[3])));
}

/* A nibble block's products (the SUMS of the tile macros below), from
 * the file's UNPACK (pb, p, h, w[4]), x16_nibble_pair()'s shape, and DOT
 * (VNNI, p, w, x, s), @s plus the pair's products: for both halves
 * (s[h][t]), or for half h (s[t]). */
#define X16_NIBBLE_SUMS_BOTH(RN, VNNI, UNPACK, DOT) \
  UNROLL for (int p = 0; p < 2; p++) { \
    __m256i w[2][4]; \
    UNPACK (pb, p, 0, w[0]); \
    UNPACK (pb, p, 1, w[1]); \
    UNROLL for (int t = 0; t < (RN); t++) { \
      __m256i x[4]; \
      x16_nibble_acts (X16_QS (t, b), p, x); \
      UNROLL for (int h = 0; h < 2; h++) \
        s[h][t] = DOT (VNNI, p, w[h], x, s[h][t]); \
    } \
  }
#define X16_NIBBLE_SUMS_HALF(RN, VNNI, UNPACK, DOT) \
  UNROLL for (int p = 0; p < 2; p++) { \
    __m256i w[4]; \
    UNPACK (pb, p, h, w); \
    UNROLL for (int t = 0; t < (RN); t++) { \
      __m256i x[4]; \
      x16_nibble_acts (X16_QS (t, b), p, x); \
      s[t] = DOT (VNNI, p, w, x, s[t]); \
    } \
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
    enum { X16_RN = (RN) }; \
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
          s[h][t] = START (VNNI, bias[X16_AT (t, b)]); \
      SUMS (RN, VNNI) \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int t = 0; t < (RN); t++) \
          acc[h][t] = ADD (VNNI, acc[h][t], s[h][t], bias[X16_AT (t, b)], pb, h, \
              dx[X16_AT (t, b)]); \
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
    enum { X16_RN = (RN) }; \
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
          s[t] = START (VNNI, bias[X16_AT (t, b)]); \
        SUMS (RN, VNNI) \
        UNROLL for (int t = 0; t < (RN); t++) \
          acc[t] = ADD (VNNI, acc[t], s[t], bias[X16_AT (t, b)], pb, h, dx[X16_AT (t, b)]); \
      } \
      UNROLL for (int t = 0; t < (RN); t++) \
        x16_store_half (acc[t], h, rm, y + t * ldy + 8 * h); \
    } \
  }

/* The nibble layouts' token tiles @pre (X16Kernel.tiles, X16_NIBBLE_RN of
 * them) over @BLOCK-byte blocks, from the layout's START, SUMS_BOTH (its
 * X16_NIBBLE_SUMS_BOTH), SUMS_HALF and ADD. Up to 3 tokens: both halves of
 * each block at once, so the tile is read once, as it streams in (one
 * token is bound by memory: a second pass over the tile would not overlap
 * the next tile's fetch). 4 tokens: one half after the other, so 4 sums
 * and 4 accumulators fit the 16 registers (both halves at once spilled
 * them, for Q4_0). */
#define X16_NIBBLE_RN 4
#define X16_NIBBLE_TILES(pre, VNNI, BLOCK, START, SB, SH, ADD) \
  X16_TILE_BOTH (pre##_1, 1, VNNI, BLOCK, START, SB, ADD) \
  X16_TILE_BOTH (pre##_2, 2, VNNI, BLOCK, START, SB, ADD) \
  X16_TILE_BOTH (pre##_3, 3, VNNI, BLOCK, START, SB, ADD) \
  X16_TILE_HALVES (pre##_4, 4, VNNI, BLOCK, START, SH, ADD) \
  static const X16TileFn pre[X16_NIBBLE_RN] = { pre##_1, pre##_2, pre##_3, pre##_4 };

/* The nibble layout @layout's two products (X16_PRODUCT, weights
 * multiplied @OFFSET above their values), plain AVX2 and AVX-VNNI, over
 * X16_NIBBLE_TILES of the pieces named (and the X16Unpacked @UP, @UV, or
 * NULL), and its lookups llm_avx2_LAYOUT_fn and llm_avx2_LAYOUT_hw_fn
 * (X16_FOR_CPU's and X16_HW's), the VNNI one where the CPU has it and
 * LLM_NO_AVX_VNNI is unset. @PLAIN_MANY is the plain product's
 * X16Kernel.rn_many. */
#define X16_NIBBLE_KERNELS(layout, BLOCK, OFFSET, START, SB, SH, ADD, UP, UV, PLAIN_MANY) \
  X16_NIBBLE_TILES (layout##_tiles_plain, 0, BLOCK, START, SB, SH, ADD) \
  X16_NIBBLE_TILES (layout##_tiles_vnni, 1, BLOCK, START, SB, SH, ADD) \
  X16_AVX2_PRODUCTS (layout##_plain, .tiles = layout##_tiles_plain, .rn = X16_NIBBLE_RN, \
      .block_bytes = (BLOCK), .offset = (OFFSET), .unpacked = (UP), \
      .rn_many = (PLAIN_MANY)) \
  X16_AVX2_PRODUCTS (layout##_vnni, .tiles = layout##_tiles_vnni, .rn = X16_NIBBLE_RN, \
      .block_bytes = (BLOCK), .offset = (OFFSET), .unpacked = (UV)) \
  LlmQ4x16Fn \
  llm_avx2_##layout##_fn (void) \
  { \
    return llm_cpu_has_avx_vnni () ? X16_FOR_CPU (layout##_vnni) : X16_FOR_CPU (layout##_plain); \
  } \
  LlmQ4x16Fn \
  llm_avx2_##layout##_hw_fn (void) \
  { \
    return llm_cpu_has_avx_vnni () ? X16_HW (layout##_vnni) : X16_HW (layout##_plain); \
  }
