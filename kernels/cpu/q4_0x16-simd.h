/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to q4_0x16-avx2.c and q4_0x16-avx512.c (both built with at
 * least AVX2): what their kernels share around the tiles: the per-token
 * activation side and the driver that claims rows and walks token tiles. */
#pragma once

#include <assert.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm-common.h"
#include "q4_0x16.h"
#include "quantize.h"

/* Computes y[t * ldy + r] for the tile's rows r < @rm (of 16) and up to
 * the table's RN tokens at @xq, @xs bytes apart, from the tile's @nb
 * blocks at @tile; @dx and @bias are those tokens' rows of the activation
 * side (below), @nb apart. With @ahead (the tile's first token tile),
 * each block prefetches the weights q4x16_prefetch() names. */
typedef void (*Q4x16TileFn) (size_t nb, const uint8_t *tile, const uint8_t *xq, size_t xs,
    const float *dx, const int32_t *bias, float *y, size_t ldy, int rm, bool ahead);

/* How far ahead of the block being computed its tile's first token tile
 * asks for weights. Packed tiles are one contiguous stream, yet the
 * hardware prefetchers alone left a kernel doing more than one token's
 * work per block waiting on memory: at 8 tokens a block took 3x its
 * in-cache time, not the larger of compute and memory time. Measured on
 * Zen 5: 8 to 64 KiB ahead all close that gap, 4 KiB only partly; into L1
 * (prefetcht0, which fills L2 too, so later token tiles still find the
 * tile there) one token ran 5% faster than into L2 alone. Past the end of
 * a claim it fetches rows the next claim (usually this thread's or its
 * neighbour's) reads anyway. */
#define Q4X16_PREFETCH_BYTES (16 * 1024)

/* One block's worth of the stream, Q4X16_PREFETCH_BYTES past @pb: 5
 * lines, 320 bytes, more than a block's 288, so consecutive blocks leave
 * no line out. */
INLINE void
q4x16_prefetch (const uint8_t *pb)
{
  for (int l = 0; l < 5; l++)
    _mm_prefetch ((const char *) pb + Q4X16_PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
}

/* Per token t and block b, at [t * nb + b]: d_x as a float (@dx), and
 * -8 * (the sum of the block's 32 codes) (@bias): the nibbles are
 * multiplied as unsigned 0..15, and this takes their offset of 8 back off,
 * so a row's integer sum starts from it and ends exactly at dot_q4_0's
 * sumi. */
INLINE void
q4x16_act_side (const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, float *dx,
    int32_t *bias)
{
  const __m256i flip = _mm256_set1_epi8 ((char) 0x80);
  for (size_t t = 0; t < n_tok; t++) {
    const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xq + t * xs);
    for (size_t b = 0; b < nb; b++) {
      dx[t * nb + b] = _cvtsh_ss (x[b].d);
      /* Sums of code + 128 (unsigned) over 8 bytes, by vpsadbw. */
      const __m256i u = _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) x[b].qs), flip);
      const __m256i s = _mm256_sad_epu8 (u, _mm256_setzero_si256 ());
      const __m128i h = _mm_add_epi64 (_mm256_castsi256_si128 (s), _mm256_extracti128_si256 (s, 1));
      const int sum = _mm_cvtsi128_si32 (_mm_add_epi64 (h, _mm_unpackhi_epi64 (h, h)))
          - 128 * LLM_QK8_0;
      bias[t * nb + b] = -8 * sum;
    }
  }
}

/* An LlmQ4x16Fn's product with @tiles ([k] takes k + 1 tokens, up to
 * @RN). Tokens are the inner loop: a row tile is read from memory once,
 * by its first token tile, which also fetches ahead along the stream of
 * row tiles, and then from cache by the others. */
INLINE bool
q4x16_run (const Q4x16TileFn *tiles, int RN, size_t n, const void *packed, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step)
{
  /* Tiles are addressed from their first row. */
  assert (r0 % LLM_Q4_0X16_ROWS == 0 && (next == NULL || step % LLM_Q4_0X16_ROWS == 0));
  const size_t nb = n / LLM_QK4_0;
  float *dx = llm_gemm_scratch (n_tok * nb * (sizeof (float) + sizeof (int32_t)));
  if (dx == NULL)
    return false;
  int32_t *bias = (int32_t *) (dx + n_tok * nb);
  q4x16_act_side (xq, xs, n_tok, nb, dx, bias);

  const size_t tile_bytes = nb * LLM_Q4_0X16_BLOCK_BYTES;
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r += LLM_Q4_0X16_ROWS) {
      const int rm = rb - r < LLM_Q4_0X16_ROWS ? (int) (rb - r) : LLM_Q4_0X16_ROWS;
      const uint8_t *tile = (const uint8_t *) packed + r / LLM_Q4_0X16_ROWS * tile_bytes;
      for (size_t t = 0, rn; t < n_tok; t += rn) {
        rn = tile_tokens (n_tok - t, RN);
        tiles[rn - 1] (nb, tile, (const uint8_t *) xq + t * xs, xs, dx + t * nb, bias + t * nb,
            y + t * ldy + r, ldy, rm, t == 0);
      }
    }
  }
  return true;
}
