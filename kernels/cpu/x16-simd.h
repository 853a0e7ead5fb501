/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the kernels over the 16-row prepared layouts of the types
 * with Q8_0 activations (q4_0x16-avx2.c, q4_0x16-avx512.c, q5_0x16-avx2.c,
 * q5_0x16-avx512.c, q8_0x16-avx2.c, q8_0x16-avx512.c; all built with at
 * least AVX2): what they share around the tiles: the per-token
 * activation side, prefetching ahead of the tiles, the driver that claims
 * rows and walks token tiles, and the text every tile function and
 * product starts from (x16-avx2.h and x16-avx512.h build the tiles
 * themselves). A layout is one stream of
 * (tile, block) records of a fixed size, 16 rows each (x16-layout.h),
 * whose weights the kernels multiply as unsigned bytes a constant offset
 * above their values (taken back off through the activation side's
 * bias). */
#pragma once

#include <assert.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm-common.h"
#include "quantize.h"
#include "x16-layout.h"

/* --- prefetching ---------------------------------------------------- */

/* How far ahead of the block being computed a tile's only token tile asks
 * for weights when all the tokens fit one (x16_prefetch). Packed tiles
 * are one contiguous stream, yet the hardware prefetchers alone left a
 * kernel doing more than one token's work per block waiting on memory:
 * at 8 tokens a Q4_0 block took 3x its in-cache time, not the larger of
 * compute and memory time. Measured on Zen 5: 8 to 64 KiB ahead all close
 * that gap, 4 KiB only partly; into L1 (prefetcht0, which fills L2 too, so
 * later token tiles still find the tile there) one token ran 5% faster
 * than into L2 alone. Past the end of a claim it fetches rows the next
 * claim (usually this thread's or its neighbour's) reads anyway. 8 KiB
 * rather than 16, measured later with both in one process taking turns
 * (Q4_0, 246M's layer shapes, two threads): one token 1.01-1.06x and 16
 * tokens 1.02-1.04x on AVX-512, 16 tokens 1.03-1.05x on AVX2, one token
 * there within 2.5% either way; 32 KiB was 2-3% slower than 16. */
#define X16_PREFETCH_BYTES (8 * 1024)

/* The same for a product of one token (a decode step) where the CPU
 * wants it nearer (X16Kernel.one_near; llm_cpu_x16_one_token_near). On
 * Zen 3 (EPYC, AVX2 only) the hardware prefetchers follow a stream
 * through huge pages (lib/weight-arena.h), and fetching far ahead besides
 * only cost: Q4_0 over 104 MB of 246M's layer shapes in huge pages, two
 * threads, the two distances taking turns in one process, 1 KiB 1.08-1.11x
 * faster than 8 KiB (16 of 16 rounds), 2 KiB 1.03-1.07x, 768 bytes the
 * same as 1 KiB. With more tokens 1 KiB was 3-4% slower there. */
#define X16_PREFETCH_NEAR_BYTES 1024

/* One block's worth of the stream, @dist bytes past @pb: @lines cache
 * lines, at least the block's bytes, so consecutive blocks leave no line
 * out. */
INLINE void
x16_prefetch (const uint8_t *pb, int lines, size_t dist)
{
  for (int l = 0; l < lines; l++)
    _mm_prefetch ((const char *) pb + dist + 64 * l, _MM_HINT_T0);
}

/* What a tile fetches ahead while it computes, block by block. With
 * @stream (set for the first token tile when all the tokens fit one),
 * x16_prefetch()'s lines along the stream, @dist bytes ahead. Otherwise
 * @lines lines a block from @p on, up to @end: with X16Kernel.spread,
 * this token tile's share of the next row tile, so the memory reads of a
 * compute-bound product overlap all of its computing (see x16_run); else
 * nothing. */
typedef struct {
  const char *p, *end;
  size_t lines;
  bool stream;
  size_t dist;
} X16Ahead;

/* One block's prefetching (@stream_lines: the lines of a block). A tile
 * making several passes over its blocks prefetches in each (or, with
 * @ahead->stream, only in its first). */
INLINE void
x16_ahead (X16Ahead *ahead, const uint8_t *pb, int stream_lines)
{
  if (ahead->stream) {
    x16_prefetch (pb, stream_lines, ahead->dist);
    return;
  }
  for (size_t l = 0; l < ahead->lines && ahead->p < ahead->end; l++, ahead->p += 64)
    _mm_prefetch (ahead->p, _MM_HINT_T1);
}

/* --- activations ------------------------------------------------------ */

/* The sum of a Q8_0 block's 32 codes, by vpsadbw over code + 128. */
INLINE int
x16_code_sum (const int8_t *qs)
{
  const __m256i u = _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) qs),
      _mm256_set1_epi8 ((char) 0x80));
  const __m256i s = _mm256_sad_epu8 (u, _mm256_setzero_si256 ());
  const __m128i h = _mm_add_epi64 (_mm256_castsi256_si128 (s), _mm256_extracti128_si256 (s, 1));
  return _mm_cvtsi128_si32 (_mm_add_epi64 (h, _mm_unpackhi_epi64 (h, h))) - 128 * LLM_QK8_0;
}

/* The activation side of a token tile of @rn tokens at @xq, @xs bytes
 * apart, block by block: for block b and token t at [b * rn + t], the
 * token's 32 codes (@q, 32 bytes each), d_x as a float (@dx), and
 * -@offset * (the sum of the codes) (@bias): weights multiplied as
 * unsigned bytes @offset above their values start each row's integer sum
 * from it and end exactly at the reference's sumi. A tile function then
 * finds every token's values at fixed offsets from one pointer per array;
 * one pointer per token (into the tokens' own rows) left 8 tokens' pointers
 * spilled to the stack and reloaded every block (Q4_0 on AVX-512, in
 * cache: 6.8-7.2 cycles a token-block this way, 7.6-7.8 before). */
INLINE void
x16_act_tile (const uint8_t *xq, size_t xs, size_t rn, size_t nb, int offset, int8_t *q,
    float *dx, int32_t *bias)
{
  for (size_t t = 0; t < rn; t++) {
    const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xq + t * xs);
    for (size_t b = 0; b < nb; b++) {
      const size_t i = b * rn + t;
      memcpy (q + 32 * i, x[b].qs, 32);
      dx[i] = _cvtsh_ss (x[b].d);
      bias[i] = offset == 0 ? 0 : -offset * x16_code_sum (x[b].qs);
    }
  }
}

/* --- the driver ------------------------------------------------------- */

/* Computes y[t * ldy + r] for the tile's rows r < @rm (of 16) and the
 * function's RN tokens, from the tile's @nb blocks at @tile and those
 * tokens' activation side (@q, @dx, @bias: x16_act_tile's); each block
 * calls x16_ahead (@ahead). */
typedef void (*X16TileFn) (size_t nb, const uint8_t *tile, const int8_t *q, const float *dx,
    const int32_t *bias, float *y, size_t ldy, int rm, X16Ahead *ahead);

/* Tiles over a row tile unpacked once for all the token tiles of a
 * batch: @unpack (nb, tile, out, dist) writes the @nb blocks at @tile as
 * @tiles (each a kernel's X16Kernel.rn of them, each taking the tile in
 * halves, two passes) read them, @block_bytes each, fetching the stream
 * @dist bytes ahead as it reads; used for products of at least
 * @min_tokens tokens, which must be more than X16Kernel.rn. */
typedef struct {
  void (*unpack) (size_t nb, const uint8_t *tile, uint8_t *out, size_t dist);
  const X16TileFn *tiles;
  size_t block_bytes;
  size_t min_tokens;
} X16Unpacked;

/* A kernel family over one layout. */
typedef struct {
  const X16TileFn *tiles;     /* [k] takes k + 1 tokens, k < rn */
  const X16Unpacked *unpacked;  /* NULL: none */
  int rn;
  /* Passes tiles[k] makes over the blocks (a tile in halves makes 2);
   * NULL: one each. */
  const uint8_t *passes;
  size_t block_bytes;         /* of a (tile, block) record */
  int offset;                 /* weights are multiplied this far above their values */
  /* With more tokens than one token tile takes, or one token tile that
   * makes two passes, every pass fetches its share of the next row tile
   * (X16Ahead); else the first fetches, x16_prefetch() ahead. */
  bool spread;
  /* Tokens a token tile takes when there are more than @rn (0: @rn): for
   * a layout whose widest tile is slower per token than the next one and
   * faster only for exactly its own count of tokens. */
  int rn_many;
  /* One token fetches X16_PREFETCH_NEAR_BYTES ahead, not
   * X16_PREFETCH_BYTES. */
  bool one_near;
  /* Products of up to this many tokens (0: none) fetch nothing ahead:
   * the hardware prefetchers alone follow the stream (the _hw kernels,
   * LLM_X16_AHEAD_NONE's, which the engine takes turns with). More than
   * one token only where that was measured to pay too (x16-avx512.h). */
  size_t hw_tokens;
} X16Kernel;

/* The tokens of the token tile that starts @left tokens before the end
 * of a product of @n_tok (every loop over token tiles walks them so). */
INLINE size_t
x16_tile_tokens (const X16Kernel *k, size_t n_tok, size_t left)
{
  if (n_tok <= (size_t) k->rn)
    return left;
  return tile_tokens_even (left, k->rn_many > 0 ? k->rn_many : k->rn);
}

/* A prepared-layout product (q4_0x16.h's contract) with kernel @k.
 * Tokens are the inner loop: a row tile is read from memory once and then
 * from cache by the other token tiles.
 *
 * Where it is read from memory is the prefetching's choice. Without
 * @k->spread, the first token tile reads it, fetching X16_PREFETCH_BYTES
 * ahead along the stream: right for one token tile, bound by memory, but
 * with several the first then waits on memory and the others only
 * compute, so a product takes its memory time plus most of its compute
 * time. With @k->spread, all the passes over a tile (every token tile, each
 * half) fetch the next tile into L2 a few lines a block, so fetching
 * overlaps all the computing and the product takes nearer the larger of
 * the two (Q8_0 at 8 and 16 tokens on AVX2: 15% and 10% faster). So does
 * one token tile in halves: along the stream, memory stood idle while it
 * took its second half. Plain AVX2 Q8_0 on Zen 3, before and after taking
 * turns in one process over 188 MB of 246M's feed-forward shapes, median
 * of 16 rounds: 3 and 4 tokens 0.92-0.99x and 0.89-1.01x the time on two
 * threads, 0.78-0.82x and 0.83-0.93x on one; in the 246M Q8_0 model, 3
 * to 5 rows went from 1.25-1.46 decode steps to 1.07-1.31 (four runs of
 * each binary, taking turns; 4 rows 1.34-1.41 to 1.08-1.25). (Q4_0's tile
 * of 4 tokens in halves was no faster so, 1.04x the time: it stays on
 * the stream. Nor did Q4_0 gain clearly from spreading on Zen 5: with
 * AVX-VNNI and tile 4 in two passes, 8 and 16 rows of the 246M model,
 * old and new taking turns, ran 2-7% faster in one set of four rounds
 * and the same in the next (16 rows 19.2 ms each); on AVX-512 16 rows ran
 * 8.1-8.5 ms either way.) A lone token tile of a few tokens stays on the
 * stream on AVX-512 too: Q8_0 at 4 and 9 rows of the 246M model (Zen 5,
 * three rounds each way, in one process by an environment switch)
 * spreading took 1.3x the time, and along the stream 16 or 32 KiB ahead,
 * or into L2 only (prefetcht1), was no faster than 8 KiB into L1.
 *
 * With @k->unpacked and at least its min_tokens, each row tile is first
 * unpacked once (fetching along the stream as it reads), and its token
 * tiles read that copy, each half of each fetching its share of the next
 * row tile as with @k->spread. */
INLINE bool
x16_run (const X16Kernel *k, size_t n, const void *packed, size_t r0, size_t r1, const void *xq,
    size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  /* Tiles are addressed from their first row. */
  assert (r0 % X16_ROWS == 0 && (next == NULL || step % X16_ROWS == 0));
  const size_t nb = n / LLM_QK8_0;
  const X16Unpacked *u = k->unpacked != NULL && n_tok >= k->unpacked->min_tokens
      ? k->unpacked : NULL;
  /* Token tile by token tile, the one from token t at [t * nb]. */
  const size_t side_bytes = (n_tok * nb * (sizeof (float) + sizeof (int32_t) + 32) + 63) / 64 * 64;
  float *dx = llm_gemm_scratch (side_bytes + (u != NULL ? nb * u->block_bytes : 0));
  if (dx == NULL)
    return false;
  int32_t *bias = (int32_t *) (dx + n_tok * nb);
  int8_t *q = (int8_t *) (bias + n_tok * nb);
  uint8_t *tile_u = (uint8_t *) dx + side_bytes;
  for (size_t t = 0, rn; t < n_tok; t += rn) {
    rn = x16_tile_tokens (k, n_tok, n_tok - t);
    x16_act_tile ((const uint8_t *) xq + t * xs, xs, rn, nb, k->offset, q + 32 * t * nb,
        dx + t * nb, bias + t * nb);
  }

  const size_t tile_bytes = nb * k->block_bytes;
  const bool halves = k->passes != NULL && n_tok > 0
      && k->passes[x16_tile_tokens (k, n_tok, n_tok) - 1] > 1;
  const bool stream = u == NULL && !(k->spread && (n_tok > (size_t) k->rn || halves));
  size_t lines = 0;
  if (!stream) {
    /* The next tile's lines over every pass of every token tile's blocks
     * (an unpacked tile's token tiles take it in halves). */
    size_t passes = 0;
    for (size_t t = 0, rn; t < n_tok; t += rn) {
      rn = x16_tile_tokens (k, n_tok, n_tok - t);
      passes += u != NULL ? 2 : k->passes != NULL ? k->passes[rn - 1] : 1;
    }
    lines = (tile_bytes / 64 + passes * nb - 1) / (passes * nb);
  }
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r += X16_ROWS) {
      const int rm = rb - r < X16_ROWS ? (int) (rb - r) : X16_ROWS;
      const uint8_t *tile = (const uint8_t *) packed + r / X16_ROWS * tile_bytes;
      /* Past the claim the next tile is usually this thread's next claim
       * or the one its neighbour is on; past the matrix there is none. */
      X16Ahead ahead = { (const char *) tile + tile_bytes,
        (const char *) tile + (r + X16_ROWS < r1 ? 2 : 1) * tile_bytes, lines, false,
        n_tok == 1 && k->one_near ? X16_PREFETCH_NEAR_BYTES : X16_PREFETCH_BYTES };
      const uint8_t *T = tile;
      const X16TileFn *tt = k->tiles;
      if (u != NULL) {
        u->unpack (nb, tile, tile_u, X16_PREFETCH_BYTES);
        T = tile_u;
        tt = u->tiles;
      }
      for (size_t t = 0, rn; t < n_tok; t += rn) {
        rn = x16_tile_tokens (k, n_tok, n_tok - t);
        ahead.stream = stream && t == 0 && n_tok > k->hw_tokens;
        tt[rn - 1] (nb, T, q + 32 * t * nb, dx + t * nb, bias + t * nb, y + t * ldy + r, ldy,
            rm, &ahead);
      }
    }
  }
  return true;
}

/* --- what every tile function and product is made of ---------------- */

/* The tile macros' loops (tokens, halves, vectors) unroll whole. */
#define UNROLL _Pragma ("GCC unroll 8")

/* X16TileFn's parameters, by the names the tile macros use. */
#define X16_TILE_ARGS \
  size_t nb, const uint8_t *P, const int8_t *q, const float *dx, const int32_t *bias, \
  float *y, size_t ldy, int rm, X16Ahead *ahead

/* Where token @t's values of block @b are in the activation side, in a
 * tile function (which names its token count X16_RN). */
#define X16_AT(t, b) ((b) * (size_t) X16_RN + (size_t) (t))
/* Token @t's codes of block @b. */
#define X16_QS(t, b) (q + 32 * X16_AT (t, b))

/* A prepared-layout product named @name (q4_0x16.h's contract): x16_run
 * with the X16Kernel the remaining arguments initialise. */
#define X16_PRODUCT(name, ...) \
  static bool \
  name (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, \
      size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step) \
  { \
    (void) rows; \
    static const X16Kernel k = { __VA_ARGS__ }; \
    return x16_run (&k, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step); \
  }
