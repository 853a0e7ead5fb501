/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to f16x16-avx2.c and f16x16-avx512.c (both built with at least
 * AVX2/F16C): what their kernels share around the tiles: the activations
 * widened to floats once per call, a tile function's column loop, the
 * driver that claims rows, groups row tiles and walks token tiles, and the
 * products and lookup each file ends with. */
#pragma once

#include <assert.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "f16x16.h"
#include "gemm-common.h"
#include "ggml-type.h"
#include "isa.h"

/* The tiles' loops (row tiles, tokens, columns) unroll whole. */
#define UNROLL _Pragma ("GCC unroll 16")

/* Column steps: 4 columns, 128 bytes (two lines) of each row tile. */
#define F16X16_KSTEP 4

/* A tile function computes, for its RT row tiles (the first at @P, the
 * others @tb bytes apart; all full but the last, which has @rm rows) and
 * its RN tokens (floats at @xa, @xas bytes apart), y[t * ldy + 16 i + r].
 * With @pf non-zero it also asks for the weights @pf bytes ahead of each
 * tile's column; past a tile's end, in the tile RT further on, which the
 * next call reads at the same place. */
typedef void (*F16x16TileFn) (size_t n, const uint8_t *P, size_t tb, const float *xa,
    size_t xas, float *y, size_t ldy, int rm, size_t pf);

/* The tiles of one instruction set and weight type: fn[(rn - 1) * group +
 * rt - 1] takes rn tokens and rt row tiles, for rn <= rn_max and rt <=
 * rt_max[rn - 1] <= group; a product of one token alone takes its own
 * count (F16X16_PRODUCT's rt_one, 1 or 2: fn[0] and fn[1] exist). Rows
 * are walked in groups of @group tiles, each group read from memory once
 * by its first token tile, from cache by the others. */
typedef struct {
  int rn_max, group;
  const int *rt_max;
  const F16x16TileFn *fn;
  bool wide;                  /* fn and rt_max also hold rn_max + 1 tokens (tile_tokens_wide) */
} F16x16Tiles;

/* How far ahead of the columns being computed the first token tile asks
 * for weights, over all the row tiles it reads at once (each of their
 * streams runs this over their number ahead: 4 KiB each for 2 row tiles,
 * 2 KiB for 4). Measured on Zen 5, weights from DRAM, interleaved runs on
 * a shared machine: one token streamed 4-8% faster with 8 KiB in all than
 * with 4 or 16, and 4 tokens 15% faster than with 4; without prefetches 8
 * tokens (where the FMAs nearly keep up with memory) ran at half speed. */
#define F16X16_PF_BYTES 8192

/* The column loop of a tile function of RT row tiles and RN tokens
 * (F16x16TileFn's parameters in scope): the token rows' activations x[j],
 * then COLUMN (RT, RN, LOADW, kk) for every column kk in order,
 * F16X16_KSTEP at a time, and with pf non-zero the two lines pf bytes
 * ahead of each row tile's column asked for at each step (past a tile's
 * end, in the tile RT further on, which the next call reads there). */
#define F16X16_COLUMNS(RT, RN, LOADW, COLUMN) \
  const float *x[RN]; \
  UNROLL for (int j = 0; j < (RN); j++) \
    x[j] = (const float *) ((const uint8_t *) xa + (size_t) j * xas); \
  size_t k = 0; \
  for (; k + F16X16_KSTEP <= n; k += F16X16_KSTEP) { \
    if (pf) { \
      size_t o = LLM_F16X16_COL_BYTES * k + pf; \
      if (o >= tb) \
        o += ((RT) - 1) * tb; \
      UNROLL for (int i = 0; i < (RT); i++) { \
        _mm_prefetch ((const char *) P + i * tb + o, _MM_HINT_T0); \
        _mm_prefetch ((const char *) P + i * tb + o + 64, _MM_HINT_T0); \
      } \
    } \
    UNROLL for (int u = 0; u < F16X16_KSTEP; u++) \
      COLUMN (RT, RN, LOADW, k + u) \
  } \
  for (; k < n; k++) \
    COLUMN (RT, RN, LOADW, k)

/* Bytes between widened token rows: whole lines, and one more, so the
 * token rows of a tile (read at the same column) do not all fall in one
 * L1 set when n floats are a multiple of 4 KiB. */
INLINE size_t
f16x16_act_stride (size_t n)
{
  return (n * sizeof (float) + 63) / 64 * 64 + 64;
}

/* 8 values of F16 (@bf16 false) or BF16 at @h as floats: exact. */
INLINE __m256
f16x16_widen8 (bool bf16, const void *h)
{
  const __m128i v = _mm_loadu_si128 ((const __m128i *) h);
  if (bf16)
    return _mm256_castsi256_ps (_mm256_slli_epi32 (_mm256_cvtepu16_epi32 (v), 16));
  return _mm256_cvtph_ps (v);
}

/* Token rows of F16 (@bf16 false) or BF16 values at @xq, @xs bytes apart,
 * as floats at @xa, @xas bytes apart: exact. */
INLINE void
f16x16_widen (bool bf16, const uint8_t *xq, size_t xs, size_t n_tok, size_t n, float *xa,
    size_t xas)
{
  for (size_t t = 0; t < n_tok; t++) {
    const uint16_t *h = (const uint16_t *) (xq + t * xs);
    float *o = (float *) ((uint8_t *) xa + t * xas);
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
      _mm256_storeu_ps (o + k, f16x16_widen8 (bf16, h + k));
    for (; k < n; k++) {
      if (bf16) {
        const uint32_t b = (uint32_t) h[k] << 16;
        memcpy (o + k, &b, sizeof b);
      } else {
        o[k] = _cvtsh_ss (h[k]);
      }
    }
  }
}

/* The LlmF16x16Fn contract over @tiles. Claims are the outer loop; within
 * one, row tiles are taken a group at a time, and every token tile runs
 * over the group before the next group: the group's weights come from
 * memory once, the first token tile fetching them ahead, and from L2 for
 * the others. (Taking the tokens a slice at a time, so their activations
 * stay in L2 while the weights are read once per slice, was no faster at
 * 32 or 128 tokens: the activations stream from L3 well enough.) */
INLINE bool
f16x16_run (const F16x16Tiles *tiles, int rt_one, bool bf16, size_t n, const void *packed,
    size_t r0, size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step)
{
  /* Tiles are addressed from their first row. */
  assert (r0 % LLM_F16X16_ROWS == 0 && (next == NULL || step % LLM_F16X16_ROWS == 0));
  const size_t xas = f16x16_act_stride (n);
  float *xa = llm_gemm_scratch (n_tok * xas);
  if (xa == NULL)
    return false;
  f16x16_widen (bf16, xq, xs, n_tok, n, xa, xas);

  const int RN = tiles->rn_max, G = tiles->group;
  const size_t tb = n * LLM_F16X16_COL_BYTES;
  const size_t TR = LLM_F16X16_ROWS;
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r += (size_t) G * TR) {
      const size_t left = (rb - r + TR - 1) / TR;
      const int gt = left < (size_t) G ? (int) left : G;
      const uint8_t *P = (const uint8_t *) packed + r / TR * tb;
      for (size_t t = 0, rn; t < n_tok; t += rn) {
        rn = tile_tokens_wide (n_tok - t, RN, tiles->wide);
        const int rt_max = n_tok == 1 ? rt_one : tiles->rt_max[rn - 1];
        for (int i = 0, rt; i < gt; i += rt) {
          rt = gt - i < rt_max ? gt - i : rt_max;
          const size_t last = r + (size_t) (i + rt - 1) * TR;
          const int rm = rb - last < TR ? (int) (rb - last) : (int) TR;
          const size_t pf = t == 0 ? F16X16_PF_BYTES / (size_t) rt : 0;
          tiles->fn[(rn - 1) * (size_t) G + (size_t) rt - 1] (n, P + (size_t) i * tb, tb,
              (const float *) ((const uint8_t *) xa + t * xas), xas,
              y + t * ldy + r + (size_t) i * TR, ldy, rm, pf);
        }
      }
    }
  }
  return true;
}

/* A product (LlmF16x16Fn) named @name over the tiles @tiles, for BF16
 * (@bf16 true) or F16 weights, one token reading @rt_one row tiles at
 * once (llm_cpu_f16_one_token_tiles). */
#define F16X16_PRODUCT(name, tiles, rt_one, bf16) \
  static bool \
  name (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, \
      size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step) \
  { \
    (void) rows; \
    return f16x16_run (&(tiles), rt_one, bf16, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, \
        step); \
  }

/* The F16 and BF16 products over the tiles @f16 and @bf16, and @lookup
 * (uint32_t wtype), which returns the one for @wtype (one token reading
 * as many row tiles as llm_cpu_f16_one_token_tiles () says) or NULL. */
#define F16X16_PRODUCTS(lookup, f16, bf16) \
  F16X16_PRODUCT (f16x16, f16, 1, false) \
  F16X16_PRODUCT (bf16x16, bf16, 1, true) \
  F16X16_PRODUCT (f16x16_two, f16, 2, false) \
  F16X16_PRODUCT (bf16x16_two, bf16, 2, true) \
  LlmF16x16Fn \
  lookup (uint32_t wtype) \
  { \
    const bool two = llm_cpu_f16_one_token_tiles () == 2; \
    switch (wtype) { \
      case LLM_TYPE_F16: \
        return two ? f16x16_two : f16x16; \
      case LLM_TYPE_BF16: \
        return two ? bf16x16_two : bf16x16; \
      default: \
        return NULL; \
    } \
  }
