/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA kernels of attention-full.h. Built with -mavx2 -mfma and
 * reached only after the caller's CPU check.
 *
 * The AVX-512 file's plan in 16 registers of 8 lanes: six queries at a
 * time; scores six queries times one panel (two vectors), 12
 * accumulators; values six queries times 16 dimensions (two vectors), 12
 * accumulators, one pass per 16 dimensions of the head. A panel's 16
 * partial sums are two vectors, lanes 0-7 and 8-15. Every lane's chain is
 * the reference's. */
#include "attention-full.h"
#include "attention-full-impl.h"

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "exp-simd.h"

#define INLINE static inline __attribute__ ((always_inline))
#define UNROLL _Pragma ("GCC unroll 16")
#define R LLM_ATTN_FULL_ROWS
#define P LLM_ATTN_FULL_PANEL

/* Lanes [0, n) of 8 set (n in 0..8). */
INLINE __m256i
lanes (size_t n)
{
  const __m256i idx = _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32 (_mm256_set1_epi32 ((int) n), idx);
}

static void
scores (const float *kp, size_t n_kv, size_t hd, const float *const *qr, float scale,
    float *s, size_t lds)
{
  const size_t panels = (n_kv + P - 1) / P;
  const __m256 sc = _mm256_set1_ps (scale);
  for (size_t c = 0; c < panels; c++) {
    const float *panel = kp + c * hd * P;
    __m256 lo[R], hi[R];
    UNROLL for (int i = 0; i < R; i++)
      lo[i] = hi[i] = _mm256_setzero_ps ();
    for (size_t d = 0; d < hd; d++) {
      const __m256 k0 = _mm256_loadu_ps (panel + d * P);
      const __m256 k1 = _mm256_loadu_ps (panel + d * P + 8);
      UNROLL for (int i = 0; i < R; i++) {
        const __m256 b = _mm256_broadcast_ss (qr[i] + d);
        lo[i] = _mm256_fmadd_ps (b, k0, lo[i]);
        hi[i] = _mm256_fmadd_ps (b, k1, hi[i]);
      }
    }
    UNROLL for (int i = 0; i < R; i++) {
      _mm256_storeu_ps (s + i * lds + c * P, _mm256_mul_ps (lo[i], sc));
      _mm256_storeu_ps (s + i * lds + c * P + 8, _mm256_mul_ps (hi[i], sc));
    }
  }
}

static float
softmax_row (float *s, size_t n_kv)
{
  const size_t panels = (n_kv + P - 1) / P;
  __m256 m = _mm256_set1_ps (-INFINITY);
  for (size_t c = 0; c < panels; c++) {
    const size_t left = n_kv - c * P;
    for (int h = 0; h < 2; h++) {
      const size_t valid = left > (size_t) h * 8 ? left - (size_t) h * 8 : 0;
      const __m256 x = _mm256_loadu_ps (s + c * P + h * 8);
      const __m256 keep = _mm256_castsi256_ps (lanes (valid < 8 ? valid : 8));
      m = _mm256_max_ps (m, _mm256_blendv_ps (_mm256_set1_ps (-INFINITY), x, keep));
    }
  }
  float mv[8], max = -INFINITY;
  _mm256_storeu_ps (mv, m);
  for (int l = 0; l < 8; l++)
    max = mv[l] > max ? mv[l] : max;
  const __m256 vmax = _mm256_set1_ps (max);
  __m256 sum[2] = { _mm256_setzero_ps (), _mm256_setzero_ps () };
  for (size_t c = 0; c < panels; c++) {
    const size_t left = n_kv - c * P;
    for (int h = 0; h < 2; h++) {
      const size_t valid = left > (size_t) h * 8 ? left - (size_t) h * 8 : 0;
      __m256 e = llm_exp8 (_mm256_sub_ps (_mm256_loadu_ps (s + c * P + h * 8), vmax));
      if (valid < 8)
        e = _mm256_and_ps (e, _mm256_castsi256_ps (lanes (valid)));
      _mm256_storeu_ps (s + c * P + h * 8, e);
      sum[h] = _mm256_add_ps (sum[h], e);
    }
  }
  float part[16];
  _mm256_storeu_ps (part, sum[0]);
  _mm256_storeu_ps (part + 8, sum[1]);
  return 1.0f / llm_attn_full_fold (part);
}

/* Dimensions [d0, d0 + n) (n <= 16) of the R queries' outputs; @full
 * (n == 16, a constant where it is inlined) loads without masks, which
 * are slower on AMD's cores. */
INLINE void
values_tile (bool full, size_t n, const float *s, size_t lds, const float *v, size_t ldv, size_t n_kv,
    size_t d0, const float *inv, float *out, size_t ldo, size_t rows)
{
  const __m256i m0 = lanes (n < 8 ? n : 8), m1 = lanes (n > 8 ? n - 8 : 0);
  __m256 lo[R], hi[R];
  UNROLL for (int i = 0; i < R; i++)
    lo[i] = hi[i] = _mm256_setzero_ps ();
  for (size_t j = 0; j < n_kv; j++) {
    const float *vj = v + j * ldv + d0;
    const __m256 x0 = full ? _mm256_loadu_ps (vj) : _mm256_maskload_ps (vj, m0);
    const __m256 x1 = full ? _mm256_loadu_ps (vj + 8) : _mm256_maskload_ps (vj + 8, m1);
    UNROLL for (int i = 0; i < R; i++) {
      const __m256 b = _mm256_broadcast_ss (s + i * lds + j);
      lo[i] = _mm256_fmadd_ps (b, x0, lo[i]);
      hi[i] = _mm256_fmadd_ps (b, x1, hi[i]);
    }
  }
  /* A constant trip count, so the accumulators stay in registers. */
  UNROLL for (int i = 0; i < R; i++) {
    if ((size_t) i >= rows)
      break;
    const __m256 sc = _mm256_set1_ps (inv[i]);
    _mm256_maskstore_ps (out + i * ldo + d0, m0, _mm256_mul_ps (lo[i], sc));
    _mm256_maskstore_ps (out + i * ldo + d0 + 8, m1, _mm256_mul_ps (hi[i], sc));
  }
}

void
llm_avx2_attention_full (const float *kp, const float *v, size_t ldv, size_t n_kv,
    size_t head_dim, const float *q, size_t ldq, size_t n_q, float scale, float *out,
    size_t ldo, float *scratch)
{
  const size_t lds = llm_attn_full_lds (n_kv);
  for (size_t i0 = 0; i0 < n_q; i0 += R) {
    const size_t rows = n_q - i0 < R ? n_q - i0 : R;
    const float *qr[R];
    float inv[R];
    for (size_t i = 0; i < R; i++)
      qr[i] = q + (i0 + (i < rows ? i : rows - 1)) * ldq;
    scores (kp, n_kv, head_dim, qr, scale, scratch, lds);
    for (size_t i = 0; i < R; i++)
      inv[i] = softmax_row (scratch + i * lds, n_kv);
    size_t d0 = 0;
    for (; d0 + 16 <= head_dim; d0 += 16)
      values_tile (true, 16, scratch, lds, v, ldv, n_kv, d0, inv, out + i0 * ldo, ldo, rows);
    if (d0 < head_dim)
      values_tile (false, head_dim - d0, scratch, lds, v, ldv, n_kv, d0, inv, out + i0 * ldo,
          ldo, rows);
  }
}
