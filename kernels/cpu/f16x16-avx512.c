/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512F kernels over the packed F16/BF16 layout of f16x16.h, for every
 * token count. Built with AVX-512 (F, BW, VL, DQ, VNNI: the library's
 * AVX-512 level) and reached only after the caller's CPU check.
 *
 * A tile's column is 32 bytes: one vcvtph2ps (BF16: vpmovzxwd and a
 * shift) makes it 16 floats, one row per lane, and each token's activation
 * for that column (a float, widened once per call) comes in as the
 * embedded {1to16} broadcast operand of one vfmadd231ps into that token's
 * accumulator: one FMA per 16 rows, token and column, in column order, so
 * every row is summed as f16x16.h says whatever the token count.
 *
 * What bounds it (Zen 5: two 512-bit FMA pipes, 4-cycle latency). Each
 * accumulator is a chain of dependent FMAs, so a tile function keeps
 * RT x RN >= 16 of them where it can (several row tiles for few tokens)
 * to run near 2 FMAs a cycle: 0.5 cycles per 16 rows x token x column at
 * best, 0.54 measured in L2 from 3 tokens on; the weight conversion (one
 * per row tile and column) runs beside the FMAs. A few tokens are bound by
 * memory instead: 32 bytes a tile column, 3.4 cycles of one thread's 40
 * GB/s at 4.2 GHz, 6 of its share when two threads share 45, which 8
 * tokens' FMAs (4.3 cycles) nearly fit under. */
#include "f16x16.h"
#include "f16x16-simd.h"

#include <immintrin.h>

INLINE __m512
load_f16 (const uint8_t *p)
{
  return _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) p));
}

INLINE __m512
load_bf16 (const uint8_t *p)
{
  const __m512i u = _mm512_cvtepu16_epi32 (_mm256_loadu_si256 ((const __m256i *) p));
  return _mm512_castsi512_ps (_mm512_slli_epi32 (u, 16));
}

/* Column @kk of RT row tiles: one FMA per row tile and token, the
 * activation an embedded broadcast. */
#define COLUMN(RT, RN, LOADW, kk) \
  UNROLL for (int i = 0; i < (RT); i++) { \
    const __m512 w = LOADW (P + i * tb + LLM_F16X16_COL_BYTES * (kk)); \
    UNROLL for (int j = 0; j < (RN); j++) \
      acc[i][j] = _mm512_fmadd_ps (w, _mm512_set1_ps (x[j][kk]), acc[i][j]); \
  }

#define TILE(name, RT, RN, LOADW) \
  static void \
  name (size_t n, const uint8_t *P, size_t tb, const float *xa, size_t xas, float *y, \
      size_t ldy, int rm, size_t pf) \
  { \
    __m512 acc[RT][RN]; \
    UNROLL for (int i = 0; i < (RT); i++) \
      UNROLL for (int j = 0; j < (RN); j++) \
        acc[i][j] = _mm512_setzero_ps (); \
    F16X16_COLUMNS (RT, RN, LOADW, COLUMN) \
    UNROLL for (int i = 0; i < (RT); i++) { \
      const __mmask16 m = i < (RT) - 1 ? (__mmask16) 0xffff : (__mmask16) ((1u << rm) - 1); \
      UNROLL for (int j = 0; j < (RN); j++) \
        _mm512_mask_storeu_ps (y + j * ldy + 16 * i, m, acc[i][j]); \
    } \
  }

/* Row tiles per call by token count: RT x RN >= 16 accumulator chains
 * where 32 registers allow. With 8 chains (one row tile of 8 tokens) the
 * FMAs ran at 1.7 a cycle, not 2 (measured in L1); with 16 or more at
 * 1.9 (0.54 cycles per 16 rows x token x column). 16 tokens of one row
 * tile were slower (0.63): more token streams and pointers than
 * registers. One or two tokens are bound by memory. Two take two row
 * tiles (4 chains: in L2 16 bytes of weights a cycle, 1.7 times what DRAM
 * gives one thread): from DRAM 3-9% faster than four on Zen 5 (fewer
 * streams to follow), though four run 1.15 cycles a tile column in L2,
 * not 2. A product of one token takes one or two, as the CPU reads best
 * (llm_cpu_f16_one_token_tiles: its one FMA chain reads 8 bytes of
 * weights a cycle, about what DRAM gives one Zen 4 thread but less than
 * one Zen 5 thread gets). 246M F16 decode, the two taking turns: on Zen
 * 4 one 1.14-1.18x faster on one thread and 1.01-1.15x on two (4 of 4
 * pairs each), and 1.13-1.35x against two with 16 KiB fetched ahead; on
 * Zen 5 two 1.08-1.19x faster on one thread and 1.09-1.18x on two (4 of
 * 4 pairs each). Nor is one token bound by its chains: two per row tile
 * (even and odd columns, added at the end) took a tile column in L2 from
 * 2.0 cycles to 1.14, yet 246M F16 decode on Zen 5, old and new taking
 * turns, ran the same (within 3%, one row tile or two): from DRAM it is
 * bound by the memory system, 80% of the read test in bench-f16x16 and
 * in the engine alike. Nor by reading two streams: one row tile with two
 * chains and no prefetching, one stream that the hardware follows (as
 * the Q8_0 decode that reads at 90-94% of the read test does), gave
 * 246M F16 decode 72-74% of the paired ceiling against 74-78% (a speed
 * test only: two chains change the sums' order). The entry for one
 * token here is a token tile of one among several. Nine tokens (two row
 * tiles) serve only a product with exactly 9 left (tile_tokens_wide: a
 * check of 8 proposals) in one pass instead of 7 + 2: 246M F16 on Zen 5,
 * two threads, both ways taking turns in one process, 9 rows 2.01 ->
 * 1.61 decode steps and 17 rows 3.14 -> 2.81, the rest within 1%. */
#define RN_MAX 8
#define GROUP 4
static const int rt_max[RN_MAX + 1] = { 1, 2, 4, 4, 4, 3, 3, 2, 2 };

#define ROW2(pre, rn, LOADW) TILE (pre##_1x##rn, 1, rn, LOADW) TILE (pre##_2x##rn, 2, rn, LOADW)
#define ROW3(pre, rn, LOADW) ROW2 (pre, rn, LOADW) TILE (pre##_3x##rn, 3, rn, LOADW)
#define ROW4(pre, rn, LOADW) ROW3 (pre, rn, LOADW) TILE (pre##_4x##rn, 4, rn, LOADW)
#define ENT2(pre, rn) pre##_1x##rn, pre##_2x##rn, NULL, NULL,
#define ENT3(pre, rn) pre##_1x##rn, pre##_2x##rn, pre##_3x##rn, NULL,
#define ENT4(pre, rn) pre##_1x##rn, pre##_2x##rn, pre##_3x##rn, pre##_4x##rn,

#define TILES(pre, LOADW) \
  ROW2 (pre, 1, LOADW) ROW2 (pre, 2, LOADW) ROW4 (pre, 3, LOADW) ROW4 (pre, 4, LOADW) \
  ROW4 (pre, 5, LOADW) ROW3 (pre, 6, LOADW) ROW3 (pre, 7, LOADW) ROW2 (pre, 8, LOADW) \
  ROW2 (pre, 9, LOADW) \
  static const F16x16TileFn pre##_fn[(RN_MAX + 1) * GROUP] = { \
    ENT2 (pre, 1) ENT2 (pre, 2) ENT4 (pre, 3) ENT4 (pre, 4) \
    ENT4 (pre, 5) ENT3 (pre, 6) ENT3 (pre, 7) ENT2 (pre, 8) ENT2 (pre, 9) \
  }; \
  static const F16x16Tiles pre = { RN_MAX, GROUP, rt_max, pre##_fn, true };

TILES (tiles_f16, load_f16)
TILES (tiles_bf16, load_bf16)

F16X16_PRODUCTS (llm_avx512_f16x16_fn, tiles_f16, tiles_bf16)
