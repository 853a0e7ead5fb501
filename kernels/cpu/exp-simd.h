/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* exp.h's llm_exp_ref in AVX2/FMA vectors (and AVX-512 where the file is
 * built for it), lane for lane the same operations, so every lane equals
 * the scalar reference bit for bit. For files built with -mavx2 -mfma. */
#pragma once

#include <immintrin.h>

#include "exp.h"

static inline __attribute__ ((always_inline)) __m256
llm_exp8 (__m256 x)
{
  const __m256 n = _mm256_round_ps (_mm256_mul_ps (x, _mm256_set1_ps (LLM_EXP_LOG2E)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps (n, _mm256_set1_ps (LLM_EXP_LN2_HI), x);
  r = _mm256_fnmadd_ps (n, _mm256_set1_ps (LLM_EXP_LN2_LO), r);
  __m256 p = _mm256_set1_ps (LLM_EXP_P0);
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (LLM_EXP_P1));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (LLM_EXP_P2));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (LLM_EXP_P3));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (LLM_EXP_P4));
  p = _mm256_fmadd_ps (p, r, _mm256_set1_ps (LLM_EXP_P5));
  const __m256 y = _mm256_add_ps (_mm256_fmadd_ps (p, _mm256_mul_ps (r, r), r),
      _mm256_set1_ps (1.0f));
  /* Out of range, n is garbage; those lanes are replaced below. */
  const __m256i e = _mm256_slli_epi32 (_mm256_add_epi32 (_mm256_cvtps_epi32 (n),
          _mm256_set1_epi32 (127)), 23);
  __m256 v = _mm256_mul_ps (y, _mm256_castsi256_ps (e));
  const __m256 low = _mm256_cmp_ps (x, _mm256_set1_ps (LLM_EXP_MIN), _CMP_NGT_UQ);
  v = _mm256_andnot_ps (low, v);
  v = _mm256_blendv_ps (v, _mm256_set1_ps (INFINITY),
      _mm256_cmp_ps (x, _mm256_set1_ps (LLM_EXP_MAX), _CMP_GT_OQ));
  return _mm256_blendv_ps (v, x, _mm256_cmp_ps (x, x, _CMP_UNORD_Q));
}

/* exp.h's llm_erf_ref, lane for lane. */
static inline __attribute__ ((always_inline)) __m256
llm_erf8 (__m256 x)
{
  const __m256 sign = _mm256_set1_ps (-0.0f);
  const __m256 ax = _mm256_andnot_ps (sign, x);
  const __m256 t = _mm256_div_ps (_mm256_set1_ps (1.0f),
      _mm256_fmadd_ps (_mm256_set1_ps (LLM_ERF_P), ax, _mm256_set1_ps (1.0f)));
  __m256 p = _mm256_set1_ps (LLM_ERF_A5);
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (LLM_ERF_A4));
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (LLM_ERF_A3));
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (LLM_ERF_A2));
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (LLM_ERF_A1));
  const __m256 e = llm_exp8 (_mm256_xor_ps (sign, _mm256_mul_ps (ax, ax)));
  const __m256 y = _mm256_fmadd_ps (_mm256_xor_ps (sign, _mm256_mul_ps (p, t)), e,
      _mm256_set1_ps (1.0f));
  /* copysignf: y's magnitude, x's sign. */
  return _mm256_or_ps (_mm256_andnot_ps (sign, y), _mm256_and_ps (sign, x));
}

#ifdef __AVX512F__
static inline __attribute__ ((always_inline)) __m512
llm_exp16 (__m512 x)
{
  const __m512 n = _mm512_roundscale_ps (_mm512_mul_ps (x, _mm512_set1_ps (LLM_EXP_LOG2E)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps (n, _mm512_set1_ps (LLM_EXP_LN2_HI), x);
  r = _mm512_fnmadd_ps (n, _mm512_set1_ps (LLM_EXP_LN2_LO), r);
  __m512 p = _mm512_set1_ps (LLM_EXP_P0);
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (LLM_EXP_P1));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (LLM_EXP_P2));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (LLM_EXP_P3));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (LLM_EXP_P4));
  p = _mm512_fmadd_ps (p, r, _mm512_set1_ps (LLM_EXP_P5));
  const __m512 y = _mm512_add_ps (_mm512_fmadd_ps (p, _mm512_mul_ps (r, r), r),
      _mm512_set1_ps (1.0f));
  const __m512i e = _mm512_slli_epi32 (_mm512_add_epi32 (_mm512_cvtps_epi32 (n),
          _mm512_set1_epi32 (127)), 23);
  __m512 v = _mm512_mul_ps (y, _mm512_castsi512_ps (e));
  const __mmask16 low = _mm512_cmp_ps_mask (x, _mm512_set1_ps (LLM_EXP_MIN), _CMP_NGT_UQ);
  v = _mm512_maskz_mov_ps ((__mmask16) ~low, v);
  v = _mm512_mask_mov_ps (v, _mm512_cmp_ps_mask (x, _mm512_set1_ps (LLM_EXP_MAX),
          _CMP_GT_OQ), _mm512_set1_ps (INFINITY));
  return _mm512_mask_mov_ps (v, _mm512_cmp_ps_mask (x, x, _CMP_UNORD_Q), x);
}
#endif
