/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU attention kernels: inline pieces the AVX2 and the
 * AVX-512 files share (AVX/SSE only, so either may include it). */
#pragma once

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifndef INLINE
#define INLINE static inline __attribute__ ((always_inline))
#endif

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

/* Asks for the cache lines of bytes [b0, b1) of @row: where one head's
 * rows end in a block and the next block's begin, the hardware
 * prefetchers start over. Always inlined: GCC 12 takes a function that
 * only prefetches for one without side effects and drops its calls. */
INLINE void
prefetch_slice (const uint8_t *row, size_t b0, size_t b1)
{
  for (size_t b = b0; b < b1; b += 64)
    _mm_prefetch ((const char *) row + b, _MM_HINT_T0);
  _mm_prefetch ((const char *) row + b1 - 1, _MM_HINT_T0);
}
