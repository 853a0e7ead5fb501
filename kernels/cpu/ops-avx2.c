/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA element-wise operations. Built with -mavx2 -mfma -mf16c and
 * reached only after the caller's CPU check. Each lane does the scalar
 * reference's operations in its order (exp-simd.h's exp, an IEEE add,
 * divide and multiply), so results equal ops.c's bit for bit. */
#include "ops-avx2.h"

#include <immintrin.h>

#include "exp-simd.h"

void
llm_avx2_swiglu (float *out, const float *gate, const float *up, size_t n)
{
  const __m256 one = _mm256_set1_ps (1.0f);
  const __m256 sign = _mm256_set1_ps (-0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps (gate + i);
    const __m256 e = llm_exp8 (_mm256_xor_ps (g, sign));
    const __m256 silu = _mm256_div_ps (g, _mm256_add_ps (one, e));
    _mm256_storeu_ps (out + i, _mm256_mul_ps (silu, _mm256_loadu_ps (up + i)));
  }
  for (; i < n; i++) {
    const float g = gate[i];
    out[i] = g / (1.0f + llm_exp_ref (-g)) * up[i];
  }
}

void
llm_avx2_gelu (float *out, const float *x, size_t n)
{
  const __m256 one = _mm256_set1_ps (1.0f);
  const __m256 coef = _mm256_set1_ps (LLM_GELU_COEF);
  const __m256 m2k = _mm256_set1_ps (LLM_GELU_M2K);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps (x + i);
    const __m256 a = _mm256_mul_ps (v, _mm256_fmadd_ps (coef, _mm256_mul_ps (v, v), one));
    const __m256 e = llm_exp8 (_mm256_mul_ps (a, m2k));
    _mm256_storeu_ps (out + i, _mm256_div_ps (v, _mm256_add_ps (one, e)));
  }
  for (; i < n; i++) {
    const float v = x[i];
    const float a = v * fmaf (LLM_GELU_COEF, v * v, 1.0f);
    out[i] = v / (1.0f + llm_exp_ref (a * LLM_GELU_M2K));
  }
}

void
llm_avx2_gelu_erf (float *out, const float *x, size_t n)
{
  const __m256 half = _mm256_set1_ps (0.5f), one = _mm256_set1_ps (1.0f);
  const __m256 k = _mm256_set1_ps (LLM_GELU_ERF_K);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps (x + i);
    const __m256 e = llm_erf8 (_mm256_mul_ps (v, k));
    _mm256_storeu_ps (out + i, _mm256_mul_ps (_mm256_mul_ps (half, v), _mm256_add_ps (one, e)));
  }
  for (; i < n; i++) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + llm_erf_ref (v * LLM_GELU_ERF_K));
  }
}

void
llm_avx2_gelu_quick (float *out, const float *x, size_t n)
{
  const __m256 one = _mm256_set1_ps (1.0f);
  const __m256 m = _mm256_set1_ps (LLM_GELU_QUICK_M);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps (x + i);
    const __m256 e = llm_exp8 (_mm256_mul_ps (v, m));
    _mm256_storeu_ps (out + i, _mm256_div_ps (v, _mm256_add_ps (one, e)));
  }
  for (; i < n; i++)
    out[i] = x[i] / (1.0f + llm_exp_ref (x[i] * LLM_GELU_QUICK_M));
}

void
llm_avx2_add (float *out, const float *a, const float *b, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (out + i, _mm256_add_ps (_mm256_loadu_ps (a + i), _mm256_loadu_ps (b + i)));
  for (; i < n; i++)
    out[i] = a[i] + b[i];
}
