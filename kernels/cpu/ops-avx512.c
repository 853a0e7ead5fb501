/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 element-wise operations. Built with the library's AVX-512 level
 * and reached only after the caller's CPU check. Each lane does the
 * scalar reference's operations in its order (exp-simd.h's exp, an IEEE
 * add, divide and multiply), so results equal ops.c's bit for bit.
 *
 * SwiGLU is the one that pays: its divide is the slowest operation of a
 * feed-forward's element-wise work, and 16 lanes a divide halve the
 * divides of the AVX2 version (a 16-row step spent 2% of its time here). */
#include "ops-avx512.h"

#include <immintrin.h>

#include "exp-simd.h"

/* silu (@g) * @u, lane by lane, in the reference's operations. */
static inline __attribute__ ((always_inline)) __m512
swiglu16 (__m512 g, __m512 u)
{
  const __m512 e = llm_exp16 (_mm512_xor_ps (g, _mm512_set1_ps (-0.0f)));
  return _mm512_mul_ps (_mm512_div_ps (g, _mm512_add_ps (_mm512_set1_ps (1.0f), e)), u);
}

void
llm_avx512_swiglu (float *out, const float *gate, const float *up, size_t n)
{
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps (out + i, swiglu16 (_mm512_loadu_ps (gate + i), _mm512_loadu_ps (up + i)));
  if (i < n) {
    const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps (out + i, m, swiglu16 (_mm512_maskz_loadu_ps (m, gate + i),
            _mm512_maskz_loadu_ps (m, up + i)));
  }
}
