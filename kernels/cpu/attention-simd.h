/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU attention kernels: inline pieces the AVX2 and the
 * AVX-512 files share (AVX/SSE only, so either may include it). */
#pragma once

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "quantize.h"

#ifndef INLINE
#define INLINE static inline __attribute__ ((always_inline))
#endif

/* On the loops over queries, tiles and value vectors, whose bounds are
 * constants in every instance: left rolled, GCC kept the accumulators in
 * memory, and each multiply-add waited on the store of the one before
 * (a 64-position F16 score pass took 2.4x its unrolled time). */
#define UNROLL _Pragma ("GCC unroll 8")

/* r[i] holds 8 values of row i; afterwards r[j] holds value j of rows 0-7. */
INLINE void
transpose8 (__m256 r[8])
{
  const __m256 t0 = _mm256_unpacklo_ps (r[0], r[1]);
  const __m256 t1 = _mm256_unpackhi_ps (r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps (r[2], r[3]);
  const __m256 t3 = _mm256_unpackhi_ps (r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps (r[4], r[5]);
  const __m256 t5 = _mm256_unpackhi_ps (r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps (r[6], r[7]);
  const __m256 t7 = _mm256_unpackhi_ps (r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps (t0, t2, _MM_SHUFFLE (1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps (t0, t2, _MM_SHUFFLE (3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps (t1, t3, _MM_SHUFFLE (1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps (t1, t3, _MM_SHUFFLE (3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps (t4, t6, _MM_SHUFFLE (1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps (t4, t6, _MM_SHUFFLE (3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps (t5, t7, _MM_SHUFFLE (1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps (t5, t7, _MM_SHUFFLE (3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps (s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps (s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps (s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps (s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps (s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps (s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps (s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps (s3, s7, 0x31);
}

/* @name: groups' scores over keys in panels (LlmAttnRows.panels), by
 * their type, through the including kernel file's scores_groups_panels. */
#define PANELS_BY_TYPE(name) \
  static void \
  name (const LlmAttnCall *g, int ng, const LlmAttnRows *k, size_t head_dim, float scale) \
  { \
    if (k->type == LLM_ATTN_F16) \
      scores_groups_panels (LLM_ATTN_F16, g, ng, k, head_dim, scale); \
    else \
      scores_groups_panels (LLM_ATTN_Q8_0, g, ng, k, head_dim, scale); \
  }

/* Asks for the cache lines of bytes [b0, b1) of @row: where one head's
 * rows end in a block and the next block's begin, the hardware
 * prefetchers start over. Into L1: 16 streams of 246M Q4_0 at depth 400
 * (attention a third of the step, and half its time waiting on these
 * prefetches) took 1.25-1.4x the time without them, and no less with
 * prefetcht1, with 128 or 256 rows ahead instead of 64, or with each line
 * asked for once (the last byte's line is mostly asked twice). Always
 * inlined: GCC 12 takes a function that only prefetches for one without
 * side effects and drops its calls. */
INLINE void
prefetch_slice (const uint8_t *row, size_t b0, size_t b1)
{
  for (size_t b = b0; b < b1; b += 64)
    _mm_prefetch ((const char *) row + b, _MM_HINT_T0);
  _mm_prefetch ((const char *) row + b1 - 1, _MM_HINT_T0);
}

/* Values [d, d + 8) of a row as floats, exactly as llm_attn_row_load gives
 * them (for the block types: (float) q * d with d converted exactly). @d
 * is a multiple of 8, so the 8 values never straddle a block. */
INLINE __m256
load8 (LlmAttnType type, const void *row, size_t d)
{
  switch (type) {
    case LLM_ATTN_F32:
      return _mm256_loadu_ps ((const float *) row + d);
    case LLM_ATTN_F16:
      return _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) row + d)));
    case LLM_ATTN_Q8_0: {
      const LlmBlockQ8_0 *b = (const LlmBlockQ8_0 *) row + d / LLM_QK8_0;
      const __m128i q = _mm_loadl_epi64 ((const __m128i *) (b->qs + d % LLM_QK8_0));
      const __m256 x = _mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (q));
      return _mm256_mul_ps (x, _mm256_set1_ps (_cvtsh_ss (b->d)));
    }
    case LLM_ATTN_Q4_0:
    default: {
      /* Elements 0-15 of a block are the low nibbles of qs[0..16), elements
       * 16-31 the high nibbles. */
      const LlmBlockQ4_0 *b = (const LlmBlockQ4_0 *) row + d / LLM_QK4_0;
      const size_t in = d % LLM_QK4_0;
      __m128i q = _mm_loadl_epi64 ((const __m128i *) (b->qs + in % 16));
      if (in >= 16)
        q = _mm_srli_epi16 (q, 4);
      q = _mm_and_si128 (q, _mm_set1_epi8 (0x0f));
      const __m256i w = _mm256_sub_epi32 (_mm256_cvtepu8_epi32 (q), _mm256_set1_epi32 (8));
      return _mm256_mul_ps (_mm256_cvtepi32_ps (w), _mm256_set1_ps (_cvtsh_ss (b->d)));
    }
  }
}

/* acc + b * x with the reference's roundings: the product rounded, then
 * the sum. For F16 rows both factors are halves (the query and the
 * probabilities are rounded to half first), whose product is exact in a
 * float, so one fused multiply-add gives those same bits. */
INLINE __m256
madd_exact (LlmAttnType type, __m256 b, __m256 x, __m256 acc)
{
  if (type == LLM_ATTN_F16)
    return _mm256_fmadd_ps (b, x, acc);
  return _mm256_add_ps (acc, _mm256_mul_ps (b, x));
}

/* Byte range [*b0, *b1) of a row that values [offset, offset + n) occupy. */
static inline void
slice_bytes (LlmAttnType type, size_t offset, size_t n, size_t *b0, size_t *b1)
{
  switch (type) {
    case LLM_ATTN_F32:
      *b0 = offset * sizeof (float);
      *b1 = (offset + n) * sizeof (float);
      break;
    case LLM_ATTN_F16:
      *b0 = offset * sizeof (uint16_t);
      *b1 = (offset + n) * sizeof (uint16_t);
      break;
    case LLM_ATTN_Q8_0:
      *b0 = offset / LLM_QK8_0 * sizeof (LlmBlockQ8_0);
      *b1 = (offset + n + LLM_QK8_0 - 1) / LLM_QK8_0 * sizeof (LlmBlockQ8_0);
      break;
    case LLM_ATTN_Q4_0:
    default:
      *b0 = offset / LLM_QK4_0 * sizeof (LlmBlockQ4_0);
      *b1 = (offset + n + LLM_QK4_0 - 1) / LLM_QK4_0 * sizeof (LlmBlockQ4_0);
      break;
  }
}

/* Bytes [s0, s1) of the key rows [p, p + count) below @n, 8 rows at a time
 * (@p and @count multiples of 8: 8 | block_rows, so such 8 rows are
 * consecutive in one block). */
INLINE void
prefetch_rows (const LlmAttnRows *k, size_t p, size_t n, size_t count, size_t s0, size_t s1)
{
  for (const size_t end = p + count < n ? p + count : n; p < end; p += 8) {
    const uint8_t *b = llm_attn_row (k, p);
    const size_t m = end - p < 8 ? end - p : 8;
    for (size_t r = 0; r < m; r++)
      prefetch_slice (b + r * k->row_bytes, s0, s1);
  }
}

/* A scores pass's start: the bytes [*s0, *s1) of a row that the head's
 * @head_dim values from @offset take, and the first @ahead rows (of @n)
 * asked for, the distance later rows are fetched ahead of their use. */
INLINE void
keys_begin (LlmAttnType type, const LlmAttnRows *k, size_t offset, size_t head_dim, size_t n,
    size_t ahead, size_t *s0, size_t *s1)
{
  slice_bytes (type, offset, head_dim, s0, s1);
  prefetch_rows (k, 0, n, ahead, *s0, *s1);
}
