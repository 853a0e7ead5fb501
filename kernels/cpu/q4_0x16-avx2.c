/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C kernels over the packed Q4_0 layout of q4_0x16.h, for
 * every token count, with an AVX-VNNI variant. Built with -mavx2 -mfma
 * -mf16c and reached only after the caller's CPU check.
 *
 * A 32-byte load at 64 i + 32 h of a block holds 4 nibble bytes of each of
 * rows 8 h .. 8 h + 7, one row per 32-bit lane: ANDed with 0x0f it is
 * values 4 i .. 4 i + 3 of each, shifted right by 4 values 16 + 4 i ...
 * Against a token's 4 matching activation bytes broadcast to every lane,
 * each lane gathers its row's products:
 *
 * - plain AVX2: vpmaddubsw gives pair sums in int16; the block's 8 of them
 *   are added in int16 (at most 8 * 2 * 15 * 127 = 30480, no overflow)
 *   and one vpmaddwd widens them: 2 + 1/8 multiplies per 32 products;
 * - AVX-VNNI: vpdpbusd adds each lane's 4 products into its int32 sum, one
 *   instruction per 32 products and no int16 step.
 *
 * Each sum starts from the token's bias (-8 * its sum of codes), so it
 * ends at dot_q4_0's sumi; then per block, as dot_q4_0:
 * acc += ((float) sumi * d_w) * d_x, one rounding per operation. */
#include "q4_0x16.h"
#include "q4_0x16-simd.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "quantize.h"

#define UNROLL _Pragma ("GCC unroll 8")

INLINE __m256i
bcast4 (const int8_t *p)
{
  int32_t v;
  memcpy (&v, p, sizeof v);
  return _mm256_set1_epi32 (v);
}

/* @acc plus each lane's 4 products u * s (unsigned by signed bytes). asm,
 * so this file needs no -mavxvnni; only reached where the CPU has
 * AVX-VNNI. */
INLINE __m256i
vnni_dot4 (__m256i acc, __m256i u, __m256i s)
{
  __asm__ ("%{vex%} vpdpbusd %2, %1, %0" : "+x" (acc) : "x" (u), "xm" (s));
  return acc;
}

/* Rows 8 h + lane < @rm of @v to y[lane]. */
INLINE void
store_half (__m256 v, int h, int rm, float *y)
{
  if (rm >= 8 * (h + 1)) {
    _mm256_storeu_ps (y, v);
    return;
  }
  const __m256i keep = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (rm - 8 * h),
      _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps (y, keep, v);
}

/* RN tokens x both halves of the tile: 4 RN accumulators, within the 16
 * registers up to RN = 3 (4 spills the float ones, touched once a block). */
#define TILE(name, RN, VNNI) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx, \
      const int32_t *bias, float *y, size_t ldy, int rm, bool ahead) \
  { \
    const __m256i low4 = _mm256_set1_epi8 (0x0f); \
    __m256 acc[2][RN]; \
    UNROLL for (int h = 0; h < 2; h++) \
      UNROLL for (int t = 0; t < (RN); t++) \
        acc[h][t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * LLM_Q4_0X16_BLOCK_BYTES; \
      if (ahead) \
        q4x16_prefetch (pb); \
      __m256i s[2][RN]; \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int t = 0; t < (RN); t++) \
          s[h][t] = VNNI ? _mm256_set1_epi32 (bias[t * nb + b]) : _mm256_setzero_si256 (); \
      UNROLL for (int i = 0; i < 4; i++) \
        UNROLL for (int h = 0; h < 2; h++) { \
          const __m256i v = _mm256_loadu_si256 ((const __m256i *) (pb + 64 * i + 32 * h)); \
          const __m256i lo = _mm256_and_si256 (v, low4); \
          const __m256i hi = _mm256_and_si256 (_mm256_srli_epi16 (v, 4), low4); \
          UNROLL for (int t = 0; t < (RN); t++) { \
            const int8_t *q = ((const LlmBlockQ8_0 *) (xb + t * xs) + b)->qs; \
            if (VNNI) { \
              s[h][t] = vnni_dot4 (s[h][t], lo, bcast4 (q + 4 * i)); \
              s[h][t] = vnni_dot4 (s[h][t], hi, bcast4 (q + 16 + 4 * i)); \
            } else { \
              const __m256i p = _mm256_add_epi16 (_mm256_maddubs_epi16 (lo, bcast4 (q + 4 * i)), \
                  _mm256_maddubs_epi16 (hi, bcast4 (q + 16 + 4 * i))); \
              s[h][t] = i == 0 ? p : _mm256_add_epi16 (s[h][t], p); \
            } \
          } \
        } \
      UNROLL for (int h = 0; h < 2; h++) { \
        const __m256 dw = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) \
                (pb + LLM_Q4_0X16_D_OFFSET + 16 * h))); \
        UNROLL for (int t = 0; t < (RN); t++) { \
          const __m256i si = VNNI ? s[h][t] : _mm256_add_epi32 (_mm256_madd_epi16 (s[h][t], \
                  _mm256_set1_epi16 (1)), _mm256_set1_epi32 (bias[t * nb + b])); \
          acc[h][t] = _mm256_add_ps (acc[h][t], _mm256_mul_ps (_mm256_mul_ps ( \
                  _mm256_cvtepi32_ps (si), dw), _mm256_set1_ps (dx[t * nb + b]))); \
        } \
      } \
    } \
    UNROLL for (int t = 0; t < (RN); t++) \
      UNROLL for (int h = 0; h < 2; h++) \
        if (8 * h < rm) \
          store_half (acc[h][t], h, rm, y + t * ldy + 8 * h); \
  }

#define RN_MAX 3
#define TILES(pre, VNNI) \
  TILE (pre##_1, 1, VNNI) TILE (pre##_2, 2, VNNI) TILE (pre##_3, 3, VNNI) \
  static const Q4x16TileFn pre[RN_MAX] = { pre##_1, pre##_2, pre##_3 };

TILES (tiles_plain, 0)
TILES (tiles_vnni, 1)

static bool
q4_0x16_plain (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq,
    size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  (void) rows;
  return q4x16_run (tiles_plain, RN_MAX, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

static bool
q4_0x16_vnni (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq,
    size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  (void) rows;
  return q4x16_run (tiles_vnni, RN_MAX, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

/* AVX-VNNI is CPUID leaf 7, subleaf 1, EAX bit 4 (the OS's saving of YMM
 * state was checked with AVX2). LLM_NO_AVX_VNNI keeps the plain kernel, as
 * it does for matmul-avx2.c's. */
static bool
want_avx_vnni (void)
{
  unsigned a = 0, b, c, d;
  if (__get_cpuid_max (0, NULL) < 7)
    return false;
  __cpuid_count (7, 1, a, b, c, d);
  return (a & (1u << 4)) != 0 && getenv ("LLM_NO_AVX_VNNI") == NULL;
}

LlmQ4x16Fn
llm_avx2_q4_0x16_fn (void)
{
  return want_avx_vnni () ? q4_0x16_vnni : q4_0x16_plain;
}
