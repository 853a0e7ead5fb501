/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C kernels over the packed F16/BF16 layout of f16x16.h, for
 * every token count. Built with -mavx2 -mfma -mf16c and reached only after
 * the caller's CPU check.
 *
 * A tile's column is 32 bytes: its two halves (rows 0-7, rows 8-15) are
 * one vcvtph2ps each (BF16: vpmovzxwd and a shift), 8 floats, one row per
 * lane. Each token's activation for the column (a float, widened once per
 * call) is broadcast once and taken by one vfmadd231ps per half into that
 * token's two accumulators: one FMA per 8 rows, token and column, in
 * column order, so every row is summed as f16x16.h says whatever the
 * token count.
 *
 * What bounds it (Zen 5: two FMA pipes, 4-cycle latency, 16 vector
 * registers). A tile function keeps RT x 2 x RN >= 8 accumulator chains
 * (several row tiles for few tokens): at 2 FMAs a cycle, 1 cycle per 16
 * rows x token x column in cache (measured: 1.1), twice the AVX-512
 * kernel's. A few tokens are bound by memory instead: 32 bytes a tile
 * column, 3.4 cycles of one thread's 40 GB/s at 4.2 GHz, 6 of its share
 * when two threads share 45. */
#include "f16x16.h"
#include "f16x16-simd.h"

#include <immintrin.h>

/* Half a tile column, as the activations are widened. */
INLINE __m256
load_f16 (const uint8_t *p)
{
  return f16x16_widen8 (false, p);
}

INLINE __m256
load_bf16 (const uint8_t *p)
{
  return f16x16_widen8 (true, p);
}

/* Rows 8 h + lane < @rm of @v to y[lane]. */
INLINE void
store_half (__m256 v, int h, int rm, float *y)
{
  if (rm >= 8 * (h + 1)) {
    _mm256_storeu_ps (y, v);
    return;
  }
  if (rm <= 8 * h)
    return;
  const __m256i keep = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (rm - 8 * h),
      _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps (y, keep, v);
}

/* Column @kk of RT row tiles: two FMAs (halves) per row tile and token,
 * the activation broadcast once for both. */
#define COLUMN(RT, RN, LOADW, kk) \
  UNROLL for (int i = 0; i < (RT); i++) { \
    const uint8_t *c = P + i * tb + LLM_F16X16_COL_BYTES * (kk); \
    const __m256 w0 = LOADW (c), w1 = LOADW (c + 16); \
    UNROLL for (int j = 0; j < (RN); j++) { \
      const __m256 xv = _mm256_broadcast_ss (x[j] + (kk)); \
      acc[i][0][j] = _mm256_fmadd_ps (w0, xv, acc[i][0][j]); \
      acc[i][1][j] = _mm256_fmadd_ps (w1, xv, acc[i][1][j]); \
    } \
  }

#define TILE(name, RT, RN, LOADW) \
  static void \
  name (size_t n, const uint8_t *P, size_t tb, const float *xa, size_t xas, float *y, \
      size_t ldy, int rm, size_t pf) \
  { \
    __m256 acc[RT][2][RN]; \
    UNROLL for (int i = 0; i < (RT); i++) \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int j = 0; j < (RN); j++) \
          acc[i][h][j] = _mm256_setzero_ps (); \
    F16X16_COLUMNS (RT, RN, LOADW, COLUMN) \
    UNROLL for (int i = 0; i < (RT); i++) { \
      const int rows = i < (RT) - 1 ? 16 : rm; \
      UNROLL for (int j = 0; j < (RN); j++) \
        UNROLL for (int h = 0; h < 2; h++) \
          store_half (acc[i][h][j], h, rows, y + j * ldy + 16 * i + 8 * h); \
    } \
  }

/* Row tiles per call by token count: at least 8 chains where the 16
 * registers allow. Three tokens of two row tiles (12 accumulators, 4
 * weight halves, 3 broadcasts) spilled and ran at 1.9 cycles per 16 rows x
 * token x column; one row tile's 6 chains run at 1.15. Measured in L2 on
 * Zen 5: 1.1 cycles from 6 tokens on, 1.2 at 4. A product of one token,
 * bound by memory, takes one row tile or two as the CPU reads best
 * (llm_cpu_f16_one_token_tiles). 246M F16 decode, the two taking turns:
 * on Zen 4 one 1.04-1.14x faster on one thread (4 of 4 pairs) and
 * 0.96-1.29x on two (3 of 4); on Zen 5 two 1.06-1.18x faster on one
 * thread and 1.04-1.27x on two (3 of 3 each), as they had been 10% faster
 * there before (and 3-8% faster than four). The entry for one token here
 * is a token tile of one among several. */
#define RN_MAX 6
#define GROUP 4
static const int rt_max[RN_MAX] = { 1, 2, 1, 1, 1, 1 };

#define TILES(pre, LOADW) \
  TILE (pre##_1x1, 1, 1, LOADW) TILE (pre##_2x1, 2, 1, LOADW) \
  TILE (pre##_1x2, 1, 2, LOADW) TILE (pre##_2x2, 2, 2, LOADW) \
  TILE (pre##_1x3, 1, 3, LOADW) \
  TILE (pre##_1x4, 1, 4, LOADW) TILE (pre##_1x5, 1, 5, LOADW) \
  TILE (pre##_1x6, 1, 6, LOADW) \
  static const F16x16TileFn pre##_fn[RN_MAX * GROUP] = { \
    pre##_1x1, pre##_2x1, NULL, NULL, \
    pre##_1x2, pre##_2x2, NULL, NULL, \
    pre##_1x3, NULL, NULL, NULL, \
    pre##_1x4, NULL, NULL, NULL, \
    pre##_1x5, NULL, NULL, NULL, \
    pre##_1x6, NULL, NULL, NULL, \
  }; \
  static const F16x16Tiles pre = { RN_MAX, GROUP, rt_max, pre##_fn };

TILES (tiles_f16, load_f16)
TILES (tiles_bf16, load_bf16)

F16X16_PRODUCTS (llm_avx2_f16x16_fn, tiles_f16, tiles_bf16)
