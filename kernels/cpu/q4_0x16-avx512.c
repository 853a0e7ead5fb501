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
 * token tile and used by up to 8 tokens.
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
#include "x16-simd.h"

#include <immintrin.h>
#include <string.h>

#include "quantize.h"

#define UNROLL _Pragma ("GCC unroll 8")
#define PREFETCH_LINES ((LLM_Q4_0X16_BLOCK_BYTES + 63) / 64)
_Static_assert (LLM_Q4_0X16_ROWS == X16_ROWS, "x16-simd.h drives 16-row tiles");

/* As in q4_0x16-avx2.c, 16 lanes wide. */
#define BCAST8(p) _mm512_broadcastq_epi64 (_mm_loadl_epi64 ((const __m128i *) (p)))
#define SWAP_PAIRS(v) _mm512_shuffle_epi32 ((v), _MM_PERM_CDAB)

/* RN tokens. Up to 6 tokens, each token's block sum is two chains (low
 * and high nibbles), so fewer vpdpbusd wait on the one before: 5% faster
 * at 4 tokens in cache; with more tokens they overlap anyway. */
#define TILE(name, RN) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx, \
      const int32_t *bias, float *y, size_t ldy, int rm, X16Ahead *ahead) \
  { \
    enum { CH = (RN) <= 6 ? 2 : 1 }; \
    const __m512i low4 = _mm512_set1_epi8 (0x0f); \
    __m512 acc[RN]; \
    UNROLL for (int t = 0; t < (RN); t++) \
      acc[t] = _mm512_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * LLM_Q4_0X16_BLOCK_BYTES; \
      x16_ahead (ahead, pb, PREFETCH_LINES); \
      __m512i s[RN][CH]; \
      UNROLL for (int t = 0; t < (RN); t++) { \
        s[t][0] = _mm512_set1_epi32 (bias[t * nb + b]); \
        if (CH > 1) \
          s[t][CH - 1] = _mm512_setzero_si512 (); \
      } \
      UNROLL for (int p = 0; p < 2; p++) { \
        const __m512i va = _mm512_loadu_si512 (pb + 128 * p); \
        const __m512i vb = _mm512_loadu_si512 (pb + 128 * p + 64); \
        const __m512i lo_a = _mm512_and_si512 (va, low4), lo_b = _mm512_and_si512 (vb, low4); \
        const __m512i hi_a = _mm512_and_si512 (_mm512_srli_epi16 (va, 4), low4); \
        const __m512i hi_b = _mm512_and_si512 (_mm512_srli_epi16 (vb, 4), low4); \
        UNROLL for (int t = 0; t < (RN); t++) { \
          const int8_t *q = ((const LlmBlockQ8_0 *) (xb + t * xs) + b)->qs; \
          const __m512i xl = BCAST8 (q + 8 * p), xh = BCAST8 (q + 16 + 8 * p); \
          s[t][0] = _mm512_dpbusd_epi32 (s[t][0], lo_a, xl); \
          s[t][CH - 1] = _mm512_dpbusd_epi32 (s[t][CH - 1], hi_a, xh); \
          s[t][0] = _mm512_dpbusd_epi32 (s[t][0], lo_b, SWAP_PAIRS (xl)); \
          s[t][CH - 1] = _mm512_dpbusd_epi32 (s[t][CH - 1], hi_b, SWAP_PAIRS (xh)); \
        } \
      } \
      const __m512 dw = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) \
              (pb + LLM_Q4_0X16_D_OFFSET))); \
      UNROLL for (int t = 0; t < (RN); t++) { \
        const __m512i si = CH > 1 ? _mm512_add_epi32 (s[t][0], s[t][CH - 1]) : s[t][0]; \
        acc[t] = _mm512_add_ps (acc[t], _mm512_mul_ps (_mm512_mul_ps ( \
                _mm512_cvtepi32_ps (si), dw), _mm512_set1_ps (dx[t * nb + b]))); \
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
q4_0x16 (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq,
    size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  (void) rows;
  static const X16Kernel k = { tiles, RN_MAX, NULL, LLM_Q4_0X16_BLOCK_BYTES, 8, false };
  return x16_run (&k, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

LlmQ4x16Fn
llm_avx512_q4_0x16_fn (void)
{
  return q4_0x16;
}
