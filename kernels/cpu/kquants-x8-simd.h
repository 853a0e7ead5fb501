/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the packed K-quant kernels (kquants-x8-avx2.c,
 * kquants-x8-avx512.c): the tile offsets, the per-token activation side
 * tables and the driver that claims rows, walks tiles and hands them
 * tokens a few at a time. Plain C apart from gemm-common.h's SSE
 * prefetches, so either kernel file may include it. */
#pragma once

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm-common.h"
#include "ggml-type.h"
#include "kquants.h"
#include "kquants-x8.h"

/* Offsets within a tile's super-block (the layout in kquants-x8.h). */
#define KX_QS 0
#define KX_QH 2048                   /* Q5_K */
#define KX_SC(q5) ((q5) ? 2560 : 2048)
#define KX_MN(q5) ((q5) ? 2688 : 2176)
#define KX_D(q5) ((q5) ? 2816 : 2304)
#define KX_TB(q5) ((q5) ? 2880 : 2368)
#define KX6_SC 3072
#define KX6_D 3328
#define KX6_TB 3392

/* A Q6_K tile's super-block unpacked for the batches that compute one row
 * tile for many token tiles (KxUnpacked): the 6-bit values as bytes,
 * value vector q (q6_values' order) of unit i of half h, rows 8 hf ..
 * 8 hf + 7, at KX6U_V (h, i, q) + 32 hf; then the block's scales and d
 * as the packed block has them. */
#define KX6U_V(h, i, q) (64 * (4 * (8 * (h) + (i)) + (q)))
#define KX6U_SC 4096
#define KX6U_D (KX6U_SC + (KX6_D - KX6_SC))
#define KX6U_TB (KX6U_D + 64)

/* The same for Q4_K and Q5_K: value vector h (low or high nibbles, with
 * their fifth bits for Q5_K) of unit 8 j + i, rows 8 hf .. 8 hf + 7, at
 * KXU_V (j, i, h) + 32 hf; then the block's scales, mins, d and dmin as
 * the packed block has them from KX_SC on. */
#define KXU_V(j, i, h) (64 * (2 * (8 * (j) + (i)) + (h)))
#define KXU_SC 4096
#define KXU_MN (KXU_SC + (KX_MN (1) - KX_SC (1)))
#define KXU_D (KXU_SC + (KX_D (1) - KX_SC (1)))
#define KXU_TB (KXU_SC + (KX_TB (1) - KX_SC (1)))

/* What every row tile needs of a token's super-block besides its codes,
 * worked out once per product instead of once per tile:
 * Q4_K/Q5_K: the 8 sums of 32 codes as int16 (dword k pairs runs 2 k and
 * 2 k + 1, for vpmaddwd / vpdpwssd against two runs' mins);
 * Q6_K: -32 times each of the 16 bsums as int32, where a run's sum of
 * u * x starts, so it comes out as the sum of (u - 32) * x. */
typedef union {
  int16_t run32[8];
  int32_t neg32[16];
} KxSide;

#define KX_SIDE_BYTES(q6) ((q6) ? 64 : 16)

/* Entry (b, t) at (b * n_tok + t) * KX_SIDE_BYTES: a tile reaches its
 * tokens' entries at constant offsets from one pointer (with a pointer a
 * token, 8 tokens ran out of general registers). */
INLINE void
kx_act_side (bool q6, const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, uint8_t *side)
{
  const size_t sb = KX_SIDE_BYTES (q6);
  for (size_t t = 0; t < n_tok; t++) {
    const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xq + t * xs);
    for (size_t b = 0; b < nb; b++) {
      KxSide *s = (KxSide *) (side + (b * n_tok + t) * sb);
      if (q6) {
        for (int j = 0; j < 16; j++)
          s->neg32[j] = -32 * x[b].bsums[j];
      } else {
        for (int j = 0; j < 8; j++)
          s->run32[j] = (int16_t) (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
      }
    }
  }
}

/* A tile computes y[t * ldy + r] for r < @rm (<= 16) and t < its token
 * count: @P is the row tile's first super-block, @xq the first token's
 * activations (@xs apart), @side its first side entry (super-block b's
 * @sstride bytes further on, the next token's KX_SIDE_BYTES).
 * With @pf non-zero it also prefetches, while it works on a super-block,
 * the bytes @pf further on in the packed matrix. */
#define KX_TILE_ARGS \
  size_t nb, const uint8_t *P, const uint8_t *xq, size_t xs, const uint8_t *side, \
  size_t sstride, float *y, size_t ldy, int rm, size_t pf
typedef void (*KxTileFn) (KX_TILE_ARGS);

/* How far ahead the first pass over a row tile prefetches. The packed
 * matrix is one stream, but a tile block is read as several interleaved
 * ones that the hardware prefetchers do not run far enough ahead of to
 * cover DRAM latency: one-token products from DRAM reached about 60% of
 * the streaming-read bandwidth without this, 95% with it (Zen 5; 6 to
 * 8 KiB ahead measured best, 4 and 12 a few percent slower, in runs
 * apart). Into L1: L2 hints were no faster. With the weights in cache the
 * prefetches cost up to 15% (more instructions), which decode of a real
 * model, which reads its weights from DRAM, never sees. Measured later
 * with 4 and 8 KiB taking turns in one process (Q6_K 32000 x 1024, the
 * 246M model's output, two threads), 4 KiB was as fast or faster: one
 * token on AVX-512 ahead in 104 of 160 rounds, 16 tokens 1.03-1.09x on
 * AVX-512 and 1.04x on AVX2; 2 KiB lost at 16 tokens, 16 KiB everywhere
 * (0.91-0.94x). */
#define KX_PF_DIST 4096

/* Step @it of @steps of a prefetch of the @bytes at @p: its share of the
 * lines, so a pass that calls it at each of its @steps steps asks for a
 * block a few lines at a time. A block is 37-53 lines, and all asked for
 * at once they wait on each other. On Zen 4 (AVX-512), one token of Q4_K
 * and Q6_K from DRAM read at 10-13 GB/s on one thread against a 31-33
 * streaming read, and at 19-24 asked for a share a step (Zen 5 had read
 * whole blocks asked for at once at 95%; not measured there since). On
 * Zen 3 (AVX2), one token from DRAM read at 9-10 GB/s a thread, about
 * memory time plus compute time; asked for 2-4 lines a step, 11-15 GB/s
 * against a 15.7 streaming read. Taking turns in one process over 104 MB
 * (Q4_K at 246M's layer shapes, Q6_K as its 32000 x 1024 output), one
 * token ran 1.15-1.43x faster on one thread and 1.16-1.36x on two (every
 * round), 2 and 4 tokens 1.13-1.16x (but Q4_K at 2 tokens on one thread no
 * faster). With this, 1, 2, 3, 5 and 8 KiB ahead were no better than 4,
 * nor were L2 hints, nor asking for the lines in the first half or quarter
 * of the steps; 12 KiB was 2-6% faster on one thread and 6-15% slower on
 * two. What is left to gain there is small: in one process taking turns
 * over the same 104 MB, a loop that only loads each line and prefetches 4
 * KiB ahead, with 0 to 16 vector operations a line, read at 75-91% of a
 * plain read's rate (which needs no prefetch), and one token of Q4_K at
 * 85-90%, Q6_K at 74-84% (in runs without the loop, Q4_K 73-83%, Q6_K
 * 74-79%). */
INLINE void
prefetch_share (const uint8_t *p, size_t bytes, int it, int steps)
{
  const int lines = (int) (bytes / 64);
  for (int l = it * lines / steps; l < (it + 1) * lines / steps; l++)
    _mm_prefetch ((const char *) p + 64 * l, _MM_HINT_T0);
}

/* The steps of a super-block's pass on either instruction set, each of
 * which asks for its share of the next block: Q4_K/Q5_K take chunks of 8
 * units NJ at a time and nibbles NH at a time, 8 steps each; Q6_K takes
 * 2 halves, columns NC at a time and runs NQ at a time, 4 steps each. */
#define KX4_STEPS(NJ, NH) ((4 / (NJ)) * (2 / (NH)) * 8)
#define KX6_STEPS(NC, NQ) (2 * (2 / (NC)) * (4 / (NQ)) * 4)

/* Tiles over a type's row tiles unpacked once for all the token tiles
 * that follow: @unpack (nb, P, out, pf) writes the @nb super-blocks at
 * @P as @tiles read them, @tb bytes each, prefetching @pf bytes ahead of
 * what it reads. */
typedef struct {
  void (*unpack) (size_t nb, const uint8_t *P, uint8_t *out, size_t pf);
  const KxTileFn *tiles;
  int rn;                     /* tiles[k] takes k + 1 tokens, up to rn */
  size_t tb;
  size_t min_tokens;          /* a slice of fewer tokens reads the packed tile */
} KxUnpacked;

/* Whether a slice of @tokens tokens reads its row tiles through @u (may
 * be NULL): more than one of its token tiles, and at least its minimum. */
INLINE bool
kx_unpacks (const KxUnpacked *u, size_t tokens)
{
  return u != NULL && tokens > (size_t) u->rn && tokens >= u->min_tokens;
}

/* The LlmKx8Fn contract over @tiles (tiles[k] takes k + 1 tokens, up to
 * @RN). Row tiles are the outer loop, so a tile's weights come from memory
 * once and from L1/L2 for every further group of tokens; when the tokens'
 * activations outgrow ACT_BUDGET they are taken a slice at a time. With
 * @unpacked (may be NULL), a row tile that more than one of its token
 * tiles takes is unpacked first, once, and they read that instead; each
 * of them asks for its share of the next row tile's lines, so memory
 * works while they compute (Q5_K at 5-16 tokens on Zen 3 1.04-1.12x
 * faster than fetching the next tile during the unpacking; Q6_K the
 * same either way). */
INLINE bool
kx_drive (const KxTileFn *tiles, const KxUnpacked *unpacked, int RN, bool wide, bool q6, size_t tb,
    size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  assert (r0 % LLM_KX8_ROWS == 0 && r1 <= rows);
  assert (next == NULL || (step > 0 && step % LLM_KX8_ROWS == 0));
  (void) rows;
  const size_t nb = n / LLM_QK_K;
  const size_t sb = KX_SIDE_BYTES (q6), sstride = n_tok * sb;
  const bool unpack = kx_unpacks (unpacked, n_tok);
  const size_t side_bytes = (n_tok * nb * sb + 63) / 64 * 64;
  uint8_t *side = llm_gemm_scratch (side_bytes + (unpack ? nb * unpacked->tb : 0));
  if (side == NULL)
    return false;
  kx_act_side (q6, xq, xs, n_tok, nb, side);
  uint8_t *tile_u = side + side_bytes;

  size_t tok_block = ACT_BUDGET / (xs + nb * sb) / RN * RN;
  if (tok_block < (size_t) RN)
    tok_block = RN;
  const size_t tile_bytes = nb * tb;
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t t0 = 0; t0 < n_tok; t0 += tok_block) {
      const size_t t1 = t0 + tok_block < n_tok ? t0 + tok_block : n_tok;
      for (size_t r = ra; r < rb; r += LLM_KX8_ROWS) {
        const int rm = rb - r < LLM_KX8_ROWS ? (int) (rb - r) : LLM_KX8_ROWS;
        const uint8_t *P = (const uint8_t *) packed + r / LLM_KX8_ROWS * tile_bytes;
        const KxTileFn *tt = tiles;
        int trn = RN;
        size_t pf = KX_PF_DIST;
        const uint8_t *next_tile = P + tile_bytes;
        int k = 0, nk = 0;
        if (unpack && kx_unpacks (unpacked, t1 - t0)) {
          unpacked->unpack (nb, P, tile_u, KX_PF_DIST);
          for (size_t t = t0, rn; t < t1; t += rn, nk++)
            rn = tile_tokens (t1 - t, unpacked->rn);
          P = tile_u;
          tt = unpacked->tiles;
          trn = unpacked->rn;
          pf = 0;
        }
        for (size_t t = t0, rn; t < t1; t += rn, k++) {
          rn = tile_tokens_wide (t1 - t, trn, wide && trn == RN);
          if (nk > 0)
            prefetch_share (next_tile, tile_bytes, k, nk);
          tt[rn - 1] (nb, P, (const uint8_t *) xq + t * xs, xs, side + t * sb, sstride,
              y + t * ldy + r, ldy, rm, t == t0 ? pf : 0);
        }
      }
    }
  }
  return true;
}
