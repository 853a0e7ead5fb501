/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: what the batched (prefill) kernels of every
 * instruction set share: per-thread scratch memory, claiming rows, choosing
 * token tiles and prefetching the next row tile. Only SSE is used here, so
 * any of the kernel files may include it. */
#pragma once

#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quantize.h"
#include "claim.h"

#ifndef INLINE
#define INLINE static inline __attribute__ ((always_inline))
#endif

/* At least @bytes, 64-byte aligned, or NULL: the running pool slot's
 * scratch (llm_threadpool_scratch), kept for the next product. */
void *llm_gemm_scratch (size_t bytes);

/* --- drivers (rows are shared through claim.h) ------------------------ */

/* Tokens in the next tile with @left to go: RN, but never a lone token at
 * the end (3 + 1 becomes 2 + 2), which would run at a fraction of the
 * speed. */
INLINE size_t
tile_tokens (size_t left, int RN)
{
  if (left <= (size_t) RN)
    return left;
  return left == (size_t) RN + 1 && RN > 2 ? (size_t) RN - 1 : (size_t) RN;
}

/* tile_tokens for tiles that also come one token wider, RN + 1, used only
 * where exactly that many are left (@wide): a speculative check of 8
 * proposals is 9 rows, which took two passes over the weights (7 + 2)
 * and now takes one. Anything more keeps RN a tile, the wider tile being
 * slower per token (F16 and the K-quants on Zen 5: 16 rows as 9 + 7 took
 * 1.03x and 1.11x the time of 8 + 8). */
INLINE size_t
tile_tokens_wide (size_t left, int RN, bool wide)
{
  return wide && left == (size_t) RN + 1 ? left : tile_tokens (left, RN);
}

/* tile_tokens, but the last two tiles share what is left evenly: 9 tokens
 * of at most 8 a tile run as 5 + 4, not 7 + 2. The 16-row layouts' small
 * tiles are the slow ones (a 2-token tile does a 4- or 8-token tile's
 * unpacking for fewer products), so a short second pass cost more than
 * it saved. Measured with both in one process taking turns, 246M's layer
 * shapes, two threads, Zen 5: Q4_0 AVX-512 9-15 tokens 1.02-1.13x, Q8_0
 * 1.00-1.07x, plain AVX2 Q4_0 6, 10 and 14 tokens 1.23-1.31x, with
 * AVX-VNNI 0.98-1.05x. (The K-quant tiles lost at 13 tokens, 0.96x, and
 * keep tile_tokens.) */
INLINE size_t
tile_tokens_even (size_t left, int RN)
{
  if (left > (size_t) RN && left < 2 * (size_t) RN)
    return (left + 1) / 2;
  return tile_tokens (left, RN);
}

/* The next row tile's weights (one contiguous span) are fetched into L2 a
 * slice per token tile while this tile computes, so its first token tile
 * does not wait on memory: the hardware prefetchers lose track of the
 * several interleaved row streams a tile reads. */
typedef struct {
  const char *p, *end;
  size_t slice;
} Prefetch;

INLINE Prefetch
prefetch_span (const void *start, size_t bytes, size_t steps)
{
  Prefetch pf = { start, (const char *) start + bytes, 0 };
  pf.slice = (bytes / (steps > 0 ? steps : 1) + 63) / 64 * 64;
  return pf;
}

INLINE void
prefetch_step (Prefetch *pf)
{
  for (const char *e = pf->p + pf->slice; pf->p < pf->end && pf->p < e; pf->p += 64)
    _mm_prefetch (pf->p, _MM_HINT_T1);
}

/* Rows in the tile after [r, r + TR) within [r, r1). */
INLINE size_t
next_tile_rows (size_t r, size_t r1, size_t TR)
{
  if (r1 - r <= TR)
    return 0;
  return r1 - r - TR < TR ? r1 - r - TR : TR;
}

/* Activations per pass over the weight rows: they stay in L2 while a row
 * tile, read once per pass, stays in L1. */
#define ACT_BUDGET (384 * 1024)

/* 16 bytes of nibbles as 32 values: the low nibbles, then the high. */
INLINE __m256i
nibbles_lo_then_hi (const uint8_t *qs)
{
  const __m128i raw = _mm_loadu_si128 ((const __m128i *) qs);
  return _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (raw, 4), raw),
      _mm256_set1_epi8 (0x0f));
}

/* The 32 values of a Q4_0 / Q5_0 block as unsigned bytes in order
 * (Q4_0 0..15, Q5_0 0..31: value j's fifth bit is bit j of qh). */
INLINE __m256i
vals_q4_0 (const uint8_t *blkp)
{
  return nibbles_lo_then_hi (((const LlmBlockQ4_0 *) blkp)->qs);
}

INLINE __m256i
vals_q5_0 (const uint8_t *blkp)
{
  const LlmBlockQ5_0 *blk = (const LlmBlockQ5_0 *) blkp;
  int32_t qh;
  memcpy (&qh, blk->qh, sizeof qh);
  /* Byte j gets qh byte j / 8, then its own bit j % 8. */
  const __m256i spread = _mm256_shuffle_epi8 (_mm256_set1_epi32 (qh),
      _mm256_setr_epi64x (0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x ((long long) 0x8040201008040201ULL);
  const __m256i set = _mm256_cmpeq_epi8 (_mm256_and_si256 (spread, bit), bit);
  return _mm256_or_si256 (nibbles_lo_then_hi (blk->qs),
      _mm256_and_si256 (set, _mm256_set1_epi8 (0x10)));
}

/* The sum of the 8 lanes, with the same additions as matmul-avx2.c's
 * hsum_ps (the batched Q8_0 / F32 results must equal matvec's). */
INLINE float
hsum_ps (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}
