/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512F kernels of attention-full.h. Built with the library's AVX-512
 * level and reached only after the caller's CPU check.
 *
 * Six queries at a time (the query pointers of a short last group repeat
 * the last query; its rows are not stored). Scores: six queries times four
 * key panels, 24 accumulators, one FMA each per dimension, the query value
 * an embedded broadcast, four panel loads per dimension. Softmax in place
 * on the six score rows. Values: six queries times four vectors of 16
 * dimensions (one pass for a head of 64; masked for the rest of a head
 * that is not a multiple of 16), one FMA each per key, the probability a
 * broadcast, four value loads per key. Every lane's chain is the
 * reference's. */
#include "attention-full.h"
#include "attention-full-impl.h"

#include <immintrin.h>
#include <math.h>

#include "exp-simd.h"

#define INLINE static inline __attribute__ ((always_inline))
#define UNROLL _Pragma ("GCC unroll 16")
#define R LLM_ATTN_FULL_ROWS
#define P LLM_ATTN_FULL_PANEL
/* Key panels a score tile takes; value vectors a value tile takes. */
#define NP 4
#define NV 4

/* Scores of the R queries @qr over @np panels from @kp into rows of @s. */
INLINE void
scores_tile (int np, const float *kp, size_t hd, const float *const *qr, float scale,
    float *s, size_t lds)
{
  __m512 acc[R][NP];
  UNROLL for (int i = 0; i < R; i++)
    UNROLL for (int c = 0; c < np; c++)
      acc[i][c] = _mm512_setzero_ps ();
  for (size_t d = 0; d < hd; d++) {
    __m512 k[NP];
    UNROLL for (int c = 0; c < np; c++)
      k[c] = _mm512_loadu_ps (kp + (size_t) c * hd * P + d * P);
    UNROLL for (int i = 0; i < R; i++) {
      const __m512 b = _mm512_set1_ps (qr[i][d]);
      UNROLL for (int c = 0; c < np; c++)
        acc[i][c] = _mm512_fmadd_ps (b, k[c], acc[i][c]);
    }
  }
  const __m512 sc = _mm512_set1_ps (scale);
  UNROLL for (int i = 0; i < R; i++)
    UNROLL for (int c = 0; c < np; c++)
      _mm512_storeu_ps (s + i * lds + (size_t) c * P, _mm512_mul_ps (acc[i][c], sc));
}

static void
scores (const float *kp, size_t n_kv, size_t hd, const float *const *qr, float scale,
    float *s, size_t lds)
{
  const size_t panels = (n_kv + P - 1) / P;
  size_t c = 0;
  for (; c + NP <= panels; c += NP)
    scores_tile (NP, kp + c * hd * P, hd, qr, scale, s + c * P, lds);
  switch (panels - c) {
    case 3: scores_tile (3, kp + c * hd * P, hd, qr, scale, s + c * P, lds); break;
    case 2: scores_tile (2, kp + c * hd * P, hd, qr, scale, s + c * P, lds); break;
    case 1: scores_tile (1, kp + c * hd * P, hd, qr, scale, s + c * P, lds); break;
    default: break;
  }
}

/* One row of scores to probabilities in place (zeros past n_kv);
 * returns 1 / their sum. */
static float
softmax_row (float *s, size_t n_kv)
{
  const size_t full = n_kv / P, rest = n_kv % P;
  const __mmask16 tail = (__mmask16) ((1u << rest) - 1);
  __m512 m = _mm512_set1_ps (-INFINITY);
  for (size_t c = 0; c < full; c++)
    m = _mm512_max_ps (m, _mm512_loadu_ps (s + c * P));
  if (rest)
    m = _mm512_mask_max_ps (m, tail, m, _mm512_loadu_ps (s + full * P));
  const __m512 max = _mm512_set1_ps (_mm512_reduce_max_ps (m));
  __m512 sum = _mm512_setzero_ps ();
  for (size_t c = 0; c < full; c++) {
    const __m512 e = llm_exp16 (_mm512_sub_ps (_mm512_loadu_ps (s + c * P), max));
    _mm512_storeu_ps (s + c * P, e);
    sum = _mm512_add_ps (sum, e);
  }
  if (rest) {
    const __m512 e = _mm512_maskz_mov_ps (tail,
        llm_exp16 (_mm512_sub_ps (_mm512_loadu_ps (s + full * P), max)));
    _mm512_storeu_ps (s + full * P, e);
    sum = _mm512_add_ps (sum, e);
  }
  float part[16];
  _mm512_storeu_ps (part, sum);
  return 1.0f / llm_attn_full_fold (part);
}

/* out rows += (probabilities x values) for @nv vectors of dimensions from
 * @d0, the last masked by @last; scaled by @inv and stored for the first
 * @rows of the R queries. */
INLINE void
values_tile (int nv, __mmask16 last, const float *s, size_t lds, const float *v, size_t ldv,
    size_t n_kv, size_t d0, const float *inv, float *out, size_t ldo, size_t rows)
{
  __m512 acc[R][NV];
  UNROLL for (int i = 0; i < R; i++)
    UNROLL for (int c = 0; c < nv; c++)
      acc[i][c] = _mm512_setzero_ps ();
  for (size_t j = 0; j < n_kv; j++) {
    const float *vj = v + j * ldv + d0;
    __m512 x[NV];
    UNROLL for (int c = 0; c < nv; c++)
      x[c] = c < nv - 1 ? _mm512_loadu_ps (vj + c * P) : _mm512_maskz_loadu_ps (last, vj + c * P);
    UNROLL for (int i = 0; i < R; i++) {
      const __m512 b = _mm512_set1_ps (s[i * lds + j]);
      UNROLL for (int c = 0; c < nv; c++)
        acc[i][c] = _mm512_fmadd_ps (b, x[c], acc[i][c]);
    }
  }
  UNROLL for (int i = 0; i < R; i++) {
    if ((size_t) i >= rows)
      break;
    const __m512 sc = _mm512_set1_ps (inv[i]);
    UNROLL for (int c = 0; c < nv; c++)
      _mm512_mask_storeu_ps (out + i * ldo + d0 + c * P, c < nv - 1 ? (__mmask16) 0xffff : last,
          _mm512_mul_ps (acc[i][c], sc));
  }
}

static void
values (const float *s, size_t lds, const float *v, size_t ldv, size_t n_kv, size_t hd,
    const float *inv, float *out, size_t ldo, size_t rows)
{
  for (size_t d0 = 0; d0 < hd; d0 += NV * P) {
    const size_t left = hd - d0 < NV * P ? hd - d0 : NV * P;
    const int nv = (int) ((left + P - 1) / P);
    const __mmask16 last = left % P ? (__mmask16) ((1u << (left % P)) - 1) : (__mmask16) 0xffff;
    switch (nv) {
      case 4: values_tile (4, last, s, lds, v, ldv, n_kv, d0, inv, out, ldo, rows); break;
      case 3: values_tile (3, last, s, lds, v, ldv, n_kv, d0, inv, out, ldo, rows); break;
      case 2: values_tile (2, last, s, lds, v, ldv, n_kv, d0, inv, out, ldo, rows); break;
      default: values_tile (1, last, s, lds, v, ldv, n_kv, d0, inv, out, ldo, rows); break;
    }
  }
}

void
llm_avx512_attention_full (const float *kp, const float *v, size_t ldv, size_t n_kv,
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
    values (scratch, lds, v, ldv, n_kv, head_dim, inv, out + i0 * ldo, ldo, rows);
  }
}
