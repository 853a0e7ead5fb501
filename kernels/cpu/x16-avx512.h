/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to q4_0x16-avx512.c, q5_0x16-avx512.c and q8_0x16-avx512.c
 * (built with AVX-512 F/BW/VL/DQ + VNNI): the AVX-512 tile functions of
 * the layouts, around the lines that read a block's weights, which each
 * file supplies (the nibble layouts' shared reading is here too). A
 * 64-byte load of a block's vector holds 4 code bytes of each of the
 * tile's 16 rows, one row per 32-bit lane, so a tile is one __m512 of sums
 * per token, and vpdpbusd adds each lane's 4 products (weights unsigned,
 * activations signed) into its row's int32 sum. */
#pragma once

#include <immintrin.h>
#include <stdint.h>

#include "x16-simd.h"

/* x16-avx2.h's X16_BCAST8 and X16_SWAP_PAIRS, 16 lanes wide. A
 * broadcast and a vpshufd a vector pair is the cheapest way found on Zen
 * 5 to lay a token's groups over the rows (Q4_0, in cache, bench-q4_0x16
 * --in-cache, 8 to 16 tokens: 6.2 cycles a token-block): with the
 * swapped copy written once beside the codes (x16_act_tile) and
 * broadcast from memory too, 6.8 (the loads' limit); with one 32-byte
 * load and a vpermd for each of the four, 8.9. */
#define X16_BCAST8_512(p) _mm512_broadcastq_epi64 (_mm_loadl_epi64 ((const __m128i *) (p)))
#define X16_SWAP_PAIRS_512(v) _mm512_shuffle_epi32 ((v), _MM_PERM_CDAB)

/* (float) sumi * (d_w * d_x): the order of dot_q8_0 and dot_q5_0 (whose
 * (d_w * d_x) * sumi is the same product), a TERM for X16_TILE_512. */
INLINE __m512
x16_term_dwdx_512 (__m512 sumi, __m512 dw, __m512 dx)
{
  return _mm512_mul_ps (sumi, _mm512_mul_ps (dw, dx));
}

/* A nibble block's products (q4_0x16.h, q5_0x16.h; the SUMS of
 * X16_TILE_512): UNPACK (pb, p, w[4]) gives vectors 2 p and 2 p + 1 of
 * the block at pb, low nibbles in [0], [1], high ones in [2], [3]; the low
 * nibbles' products go into s[t][0], the high ones' into s[t][CH - 1] (5%
 * faster at 4 tokens in cache than one chain, for Q4_0). */
#define X16_NIBBLE_SUMS_512(RN, CH, UNPACK) \
  UNROLL for (int p = 0; p < 2; p++) { \
    __m512i w[4]; \
    UNPACK (pb, p, w); \
    UNROLL for (int t = 0; t < (RN); t++) { \
      const int8_t *qt = X16_QS (t, b); \
      const __m512i xl = X16_BCAST8_512 (qt + 8 * p), xh = X16_BCAST8_512 (qt + 16 + 8 * p); \
      s[t][0] = _mm512_dpbusd_epi32 (s[t][0], w[0], xl); \
      s[t][CH - 1] = _mm512_dpbusd_epi32 (s[t][CH - 1], w[2], xh); \
      s[t][0] = _mm512_dpbusd_epi32 (s[t][0], w[1], X16_SWAP_PAIRS_512 (xl)); \
      s[t][CH - 1] = _mm512_dpbusd_epi32 (s[t][CH - 1], w[3], X16_SWAP_PAIRS_512 (xh)); \
    } \
  }

/* x16_nibble_pair() of x16-avx2.h, 16 rows wide: vectors 2 p, 2 p + 1 of
 * the block at @pb split into low nibbles ([0], [1]) and high ([2], [3]). */
INLINE void
x16_nibble_pair_512 (const uint8_t *pb, int p, __m512i w[4])
{
  const __m512i low4 = _mm512_set1_epi8 (0x0f);
  UNROLL for (int c = 0; c < 2; c++) {
    const __m512i v = _mm512_loadu_si512 (pb + 128 * p + 64 * c);
    w[c] = _mm512_and_si512 (v, low4);
    w[2 + c] = _mm512_and_si512 (_mm512_srli_epi16 (v, 4), low4);
  }
}

/* The tile function (X16TileFn) for RN tokens over a layout of @BLOCK-byte
 * blocks whose 16 d (fp16) start at @D_OFF. Each token's block sum is
 * s[t][0], from its bias, and up to 6 tokens a second chain s[t][CH - 1]
 * from 0, so fewer vpdpbusd wait on the one before (with more tokens they
 * overlap anyway); SUMS (RN, CH) adds the block's products to them (the
 * block loop's b, pb, s in scope; X16_QS (t, b) the token codes). Then per
 * row acc += TERM (sumi as floats, d_w, d_x), TERM in the reference's
 * order of operations, never fused. */
#define X16_TILE_512(name, RN, BLOCK, D_OFF, SUMS, TERM) \
  static void \
  name (X16_TILE_ARGS) \
  { \
    enum { X16_RN = (RN) }; \
    enum { CH = (RN) <= 6 ? 2 : 1 }; \
    __m512 acc[RN]; \
    UNROLL for (int t = 0; t < (RN); t++) \
      acc[t] = _mm512_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * (BLOCK); \
      x16_ahead (ahead, pb, ((BLOCK) + 63) / 64); \
      __m512i s[RN][CH]; \
      UNROLL for (int t = 0; t < (RN); t++) { \
        s[t][0] = _mm512_set1_epi32 (bias[X16_AT (t, b)]); \
        if (CH > 1) \
          s[t][CH - 1] = _mm512_setzero_si512 (); \
      } \
      SUMS (RN, CH) \
      const __m512 dw = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) \
              (pb + (D_OFF)))); \
      UNROLL for (int t = 0; t < (RN); t++) { \
        const __m512i si = CH > 1 ? _mm512_add_epi32 (s[t][0], s[t][CH - 1]) : s[t][0]; \
        acc[t] = _mm512_add_ps (acc[t], TERM (_mm512_cvtepi32_ps (si), dw, \
                _mm512_set1_ps (dx[X16_AT (t, b)]))); \
      } \
    } \
    const __mmask16 m = (__mmask16) ((1u << rm) - 1); \
    UNROLL for (int t = 0; t < (RN); t++) \
      _mm512_mask_storeu_ps (y + t * ldy, m, acc[t]); \
  }

/* The tiles for 1 to X16_RN_512 tokens and their table @pre
 * (X16Kernel.tiles): the weights are loaded once per block and token tile
 * and used by up to 9 tokens. Nine, not eight: a speculative step that
 * checks 8 proposals (llmspecverify's default draft-max) is 9 rows, which
 * as two token tiles (5 + 4) read every row tile twice and left memory
 * idle through the second pass. With the 9-token tile, 246M (AVX-512,
 * Zen 5, two threads, both tilings taking turns in one process, 16
 * rounds) ran 9 rows at 1.39 decode steps in Q8_0 (1.58 before) and 1.82
 * in Q4_0 (1.97); 1, 8, 16 and 17 rows within 2%. Ten tokens a tile (20
 * of the 32 vector registers in sums alone) ran 10 rows slower than two
 * tiles of 5. */
#define X16_RN_512 9
#define X16_TILES_512(pre, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_1, 1, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_2, 2, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_3, 3, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_4, 4, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_5, 5, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_6, 6, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_7, 7, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_8, 8, BLOCK, D_OFF, SUMS, TERM) \
  X16_TILE_512 (pre##_9, 9, BLOCK, D_OFF, SUMS, TERM) \
  static const X16TileFn pre[X16_RN_512] = { \
    pre##_1, pre##_2, pre##_3, pre##_4, pre##_5, pre##_6, pre##_7, pre##_8, pre##_9, \
  };

/* The product @name (X16_PRODUCT, fetching 8 KiB ahead for one token)
 * and @name_hw, fetching nothing ahead for up to @hw tokens
 * (X16Kernel.hw_tokens), over the X16Kernel the remaining arguments
 * initialise. */
#define X16_AVX512_PRODUCTS(name, hw, ...) \
  X16_PRODUCT (name, __VA_ARGS__) \
  X16_PRODUCT (name##_hw, __VA_ARGS__, .hw_tokens = (hw))

#include "isa.h"

#if defined(LLM_HAVE_AMX)
#include "x16-amx.h"

/* x16-amx.h's unpacking of a nibble layout whose UNPACK (pb, p, w[4])
 * gives X16_NIBBLE_SUMS_512's vectors (values @OFFSET above their own):
 * vector 2 p holds group 2 p in its even lanes (rows) and 2 p + 1 in its
 * odd ones, vector 2 p + 1 the other way round, so a blend of the pair on
 * the odd lanes puts each group in one vector. */
#define X16_AMX_NIBBLE_UNPACK(name, UNPACK, BLOCK, D_OFF, OFFSET) \
  static void \
  name (size_t nb, const uint8_t *tile, int8_t *codes, float *dw, size_t dist) \
  { \
    const __m512i offset = _mm512_set1_epi8 (OFFSET); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = tile + b * (BLOCK); \
      x16_prefetch (pb, ((BLOCK) + 63) / 64, dist); \
      int8_t *out = codes + 512 * b; \
      UNROLL for (int p = 0; p < 2; p++) { \
        __m512i w[4]; \
        UNPACK (pb, p, w); \
        UNROLL for (int h = 0; h < 2; h++) { \
          const __m512i e = w[2 * h], o = w[2 * h + 1]; \
          _mm512_storeu_si512 (out + 64 * (4 * h + 2 * p), \
              _mm512_sub_epi8 (_mm512_mask_blend_epi32 (0xaaaa, e, o), offset)); \
          _mm512_storeu_si512 (out + 64 * (4 * h + 2 * p + 1), \
              _mm512_sub_epi8 (_mm512_mask_blend_epi32 (0xaaaa, o, e), offset)); \
        } \
      } \
      _mm512_storeu_ps (dw + 16 * b, \
          _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (pb + (D_OFF))))); \
    } \
  }

/* @name: the product @avx512 (X16_PRODUCT's) for fewer than
 * X16_AMX_MIN_TOKENS tokens, llm_x16_amx_run over @format from there;
 * X16_AMX_PRODUCTS makes @layout_amx and @layout_amx_hw so over
 * X16_AVX512_PRODUCTS' @layout and @layout_hw. */
#define X16_AMX_PRODUCTS(layout, format) \
  X16_AMX_PRODUCT (layout##_amx, layout, format) \
  X16_AMX_PRODUCT (layout##_amx_hw, layout##_hw, format)
#define X16_AMX_PRODUCT(name, avx512, format) \
  static bool \
  name (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, \
      size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step) \
  { \
    if (n_tok < X16_AMX_MIN_TOKENS) \
      return avx512 (n, packed, rows, r0, r1, xq, xs, n_tok, y, ldy, next, step); \
    return llm_x16_amx_run (format, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step); \
  }
#endif

/* The lookups llm_avx512_LAYOUT_fn and llm_avx512_LAYOUT_hw_fn over
 * X16_AVX512_PRODUCTS' @layout and @layout_hw (X16_AMX_PRODUCTS' where
 * the build and CPU have AMX). */
#if defined(LLM_HAVE_AMX)
#define X16_AMX_PICK(layout, suffix) \
  if (llm_cpu_has_amx ()) \
    return layout##_amx##suffix;
#else
#define X16_AMX_PICK(layout, suffix)
#endif
#define X16_AVX512_LOOKUPS(layout) \
  LlmQ4x16Fn \
  llm_avx512_##layout##_hw_fn (void) \
  { \
    X16_AMX_PICK (layout, _hw) \
    return layout##_hw; \
  } \
  LlmQ4x16Fn \
  llm_avx512_##layout##_fn (void) \
  { \
    if (llm_cpu_x16_one_token_ahead () == LLM_X16_AHEAD_NONE) \
      return llm_avx512_##layout##_hw_fn (); \
    X16_AMX_PICK (layout, ) \
    return layout; \
  }
