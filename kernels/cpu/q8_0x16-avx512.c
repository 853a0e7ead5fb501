/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 (F, BW, VL, DQ) + VNNI kernels over the packed Q8_0 layout of
 * q8_0x16.h, for every token count. Built with those instruction sets and
 * reached only after the caller's CPU check.
 *
 * A 64-byte load of a block's vector holds 4 code bytes (w + 128) of each
 * of the tile's 16 rows, one row per 32-bit lane. vpdpbusd multiplies
 * those (unsigned) by the token's 4 matching activation codes in each
 * lane (one 8-byte broadcast serves a vector pair, as is and with lane
 * pairs swapped) and adds each lane's 4 products into its int32 sum, so 8
 * of them give each of the 16 rows its whole block sum, starting from the
 * token's bias (-128 * its sum of codes): dot_q8_0's sumi. Then per
 * block, as dot_q8_0: acc += (float) sumi * (d_w * d_x), one rounding per
 * operation, never fused. The 8 weight vectors are loaded once per block
 * and token tile and used by up to 8 tokens.
 *
 * What bounds it (Zen 5, which runs vpdpbusd and vmulps on the same two
 * pipes, measured at 1.9 a cycle, and issues 2 vector loads a cycle): per
 * token and 16-row block, 8 vpdpbusd + 2 vmulps are 5.2 cycles of
 * multiplies; 4 activation broadcasts + the bias + d_x are 3 cycles of
 * loads. Measured in cache (tools/bench-q4_0x16 --type q8_0 --in-cache,
 * cycles at the 4.2 GHz the core ran at): 6.2-6.3 cycles a token-block
 * from 8 tokens on, 7.1 at 4, the rest dependency chains and loop overhead;
 * keeping the activations per block and token in one record, so a tile
 * addresses them from one pointer, did not change that, nor did token
 * tiles of 10 or 12 (5.9-6.0 at 12 and more) or a second chain of sums at
 * more than 6 tokens. One token is bound by memory instead: 544 bytes a
 * block at 25 GB/s a thread is about 90 cycles, next to 15 of computing;
 * at 16 tokens the two are about equal (16 x 6.3 cycles), and in
 * bench-q4_0x16's runs a product of 16 tokens over weights in memory took
 * 1.2x to 1.9x the time of one (the more bandwidth the machine had at the
 * time, the more), 8 tokens 1.1x. */
#include "q8_0x16.h"
#include "x16-simd.h"

#include <immintrin.h>
#include <string.h>

#include "quantize.h"

#define UNROLL _Pragma ("GCC unroll 8")
#define PREFETCH_LINES ((LLM_Q8_0X16_BLOCK_BYTES + 63) / 64)
_Static_assert (LLM_Q8_0X16_ROWS == X16_ROWS, "x16-simd.h drives 16-row tiles");

/* As in q8_0x16-avx2.c, 16 lanes wide: the activations for a vector
 * pair, groups 2 p and 2 p + 1 in the even and odd lanes, and the other
 * way round. */
#define BCAST8(p) _mm512_broadcastq_epi64 (_mm_loadl_epi64 ((const __m128i *) (p)))
#define SWAP_PAIRS(v) _mm512_shuffle_epi32 ((v), _MM_PERM_CDAB)

/* RN tokens. Up to 6 tokens, each token's block sum is two chains (even
 * and odd vector pairs), so fewer vpdpbusd wait on the one before (3% at
 * 4 tokens in cache); with more tokens they overlap anyway. */
#define TILE(name, RN) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx, \
      const int32_t *bias, float *y, size_t ldy, int rm, X16Ahead *ahead) \
  { \
    enum { CH = (RN) <= 6 ? 2 : 1 }; \
    __m512 acc[RN]; \
    UNROLL for (int t = 0; t < (RN); t++) \
      acc[t] = _mm512_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * LLM_Q8_0X16_BLOCK_BYTES; \
      x16_ahead (ahead, pb, PREFETCH_LINES); \
      __m512i s[RN][CH]; \
      UNROLL for (int t = 0; t < (RN); t++) { \
        s[t][0] = _mm512_set1_epi32 (bias[t * nb + b]); \
        if (CH > 1) \
          s[t][CH - 1] = _mm512_setzero_si512 (); \
      } \
      UNROLL for (int p = 0; p < 4; p++) { \
        const __m512i wa = _mm512_loadu_si512 (pb + 128 * p); \
        const __m512i wb = _mm512_loadu_si512 (pb + 128 * p + 64); \
        UNROLL for (int t = 0; t < (RN); t++) { \
          const int8_t *q = ((const LlmBlockQ8_0 *) (xb + t * xs) + b)->qs; \
          const __m512i x = BCAST8 (q + 8 * p); \
          s[t][p % CH] = _mm512_dpbusd_epi32 (s[t][p % CH], wa, x); \
          s[t][p % CH] = _mm512_dpbusd_epi32 (s[t][p % CH], wb, SWAP_PAIRS (x)); \
        } \
      } \
      const __m512 dw = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) \
              (pb + LLM_Q8_0X16_D_OFFSET))); \
      UNROLL for (int t = 0; t < (RN); t++) { \
        const __m512i si = CH > 1 ? _mm512_add_epi32 (s[t][0], s[t][CH - 1]) : s[t][0]; \
        acc[t] = _mm512_add_ps (acc[t], _mm512_mul_ps (_mm512_cvtepi32_ps (si), \
                _mm512_mul_ps (dw, _mm512_set1_ps (dx[t * nb + b])))); \
      } \
    } \
    const __mmask16 m = (__mmask16) ((1u << rm) - 1); \
    UNROLL for (int t = 0; t < (RN); t++) \
      _mm512_mask_storeu_ps (y + t * ldy, m, acc[t]); \
  }

#define RN_MAX 8
TILE (tile_1, 1) TILE (tile_2, 2) TILE (tile_3, 3) TILE (tile_4, 4)
TILE (tile_5, 5) TILE (tile_6, 6) TILE (tile_7, 7) TILE (tile_8, 8)
static const X16TileFn tiles[RN_MAX] = {
  tile_1, tile_2, tile_3, tile_4, tile_5, tile_6, tile_7, tile_8,
};

static bool
q8_0x16 (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq,
    size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  (void) rows;
  static const X16Kernel k = { tiles, RN_MAX, NULL, LLM_Q8_0X16_BLOCK_BYTES, 128, true };
  return x16_run (&k, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

LlmQ8x16Fn
llm_avx512_q8_0x16_fn (void)
{
  return q8_0x16;
}
