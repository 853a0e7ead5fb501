/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C dot products. Built with -mavx2 -mfma -mf16c and reached
 * only through llm_avx2_dot_fn() and llm_avx2_dot4_fn() after a CPU check
 * in matmul.c.
 *
 * Integer parts are exact, as in the scalar reference: int8 products are
 * formed with vpmaddubsw (unsigned x signed, pairs summed to int16; every
 * operand range below keeps those pair sums under 2^15, so nothing
 * saturates) and widened to int32 by vpmaddwd. Only the float
 * accumulation differs from the reference: it runs in 8 lanes and the
 * lanes are added at the end. */
#include "matmul-avx2.h"

#include <immintrin.h>
#include <string.h>

#include "ggml-type.h"
#include "fp16.h"
#include "kquants.h"
#include "quantize.h"

static inline float
hsum_ps (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

static inline float
half_to_f32 (uint16_t h)
{
  /* F16C's conversion; exact, like llm_fp16_to_f32. */
  return _cvtsh_ss (h);
}

/* Every kernel below takes @nt activation rows (@xs bytes apart) and
 * writes @nt results, sharing the weight loads and unpacking between
 * them. It is inlined with nt = 1 (matvec) and nt = 4 (matmul), and each
 * token's operations are the same in both, so matmul and matvec agree
 * bit for bit. */
#define KERNEL static inline __attribute__ ((always_inline)) void
#define NT_MAX 4
#define EACH_TOKEN _Pragma ("GCC unroll 4") for (int t = 0; t < nt; t++)

/* --- F32, F16, BF16 --- */

static inline __m256
load_f32 (const float *p)
{
  return _mm256_loadu_ps (p);
}

static inline float
f32_to_f32 (float v)
{
  return v;
}

static inline __m256
load_f16 (const uint16_t *p)
{
  return _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) p));
}

static inline __m256
load_bf16 (const uint16_t *p)
{
  const __m256i u = _mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) p));
  return _mm256_castsi256_ps (_mm256_slli_epi32 (u, 16));
}

/* Two accumulators per token; the tail past the last multiple of 8 is
 * scalar. */
#define FLOAT_KERNEL(name, T, LOAD, SCALAR) \
  KERNEL \
  name (size_t n, const void *vw, const uint8_t *xb, size_t xs, int nt, float *out) \
  { \
    const T *w = vw; \
    __m256 a0[NT_MAX], a1[NT_MAX]; \
    EACH_TOKEN { \
      a0[t] = _mm256_setzero_ps (); \
      a1[t] = _mm256_setzero_ps (); \
    } \
    size_t i = 0; \
    for (; i + 16 <= n; i += 16) { \
      const __m256 w0 = LOAD (w + i), w1 = LOAD (w + i + 8); \
      EACH_TOKEN { \
        const T *x = (const T *) (xb + t * xs); \
        a0[t] = _mm256_fmadd_ps (w0, LOAD (x + i), a0[t]); \
        a1[t] = _mm256_fmadd_ps (w1, LOAD (x + i + 8), a1[t]); \
      } \
    } \
    if (i + 8 <= n) { \
      const __m256 w0 = LOAD (w + i); \
      EACH_TOKEN { \
        const T *x = (const T *) (xb + t * xs); \
        a0[t] = _mm256_fmadd_ps (w0, LOAD (x + i), a0[t]); \
      } \
      i += 8; \
    } \
    EACH_TOKEN { \
      const T *x = (const T *) (xb + t * xs); \
      float sum = hsum_ps (_mm256_add_ps (a0[t], a1[t])); \
      for (size_t k = i; k < n; k++) \
        sum += SCALAR (w[k]) * SCALAR (x[k]); \
      out[t] = sum; \
    } \
  }

FLOAT_KERNEL (kern_f32, float, load_f32, f32_to_f32)
FLOAT_KERNEL (kern_f16, uint16_t, load_f16, half_to_f32)
FLOAT_KERNEL (kern_bf16, uint16_t, load_bf16, llm_bf16_to_f32)

/* --- Q8_0, Q4_0 --- */

/* Eight int32 partial sums of w[i] * x[i] over 32 int8 pairs, as floats,
 * given |w| (@abs_w) and w. |w| <= 128 and |x| <= 127 (activations never
 * reach -128), so pair sums stay within int16. */
static inline __m256
dot_i8_32 (__m256i abs_w, __m256i w, __m256i x)
{
  const __m256i p16 = _mm256_maddubs_epi16 (abs_w, _mm256_sign_epi8 (x, w));
  return _mm256_cvtepi32_ps (_mm256_madd_epi16 (p16, _mm256_set1_epi16 (1)));
}

static inline __m256i
load_q8_0 (const LlmBlockQ8_0 *b)
{
  return _mm256_loadu_si256 ((const __m256i *) b->qs);
}

static inline __m256i
load_q4_0 (const LlmBlockQ4_0 *b)
{
  /* Low nibbles are elements 0..15, high nibbles 16..31. */
  const __m128i raw = _mm_loadu_si128 ((const __m128i *) b->qs);
  const __m256i both = _mm256_set_m128i (_mm_srli_epi16 (raw, 4), raw);
  const __m256i q = _mm256_and_si256 (both, _mm256_set1_epi8 (0x0f));
  return _mm256_sub_epi8 (q, _mm256_set1_epi8 (8));
}

#define Q8_0_ACT_KERNEL(name, BLOCK, LOAD) \
  KERNEL \
  name (size_t n, const void *vw, const uint8_t *xb, size_t xs, int nt, float *out) \
  { \
    const BLOCK *w = vw; \
    __m256 acc[NT_MAX]; \
    EACH_TOKEN acc[t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < n / LLM_QK8_0; b++) { \
      const __m256i q = LOAD (&w[b]); \
      const __m256i abs_q = _mm256_sign_epi8 (q, q); \
      const float dw = half_to_f32 (w[b].d); \
      EACH_TOKEN { \
        const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xb + t * xs) + b; \
        const __m256 p = dot_i8_32 (abs_q, q, _mm256_loadu_si256 ((const __m256i *) x->qs)); \
        acc[t] = _mm256_fmadd_ps (_mm256_set1_ps (dw * half_to_f32 (x->d)), p, acc[t]); \
      } \
    } \
    EACH_TOKEN out[t] = hsum_ps (acc[t]); \
  }

Q8_0_ACT_KERNEL (kern_q8_0, LlmBlockQ8_0, load_q8_0)
Q8_0_ACT_KERNEL (kern_q4_0, LlmBlockQ4_0, load_q4_0)

/* --- K-quants --- */

/* int32 lanes of sum over 32 values of u[i] * q[i] * scale, where the
 * unsigned u <= 63 and |q| <= 127 (pair sums <= 16002), and @scale holds
 * int16 scales: one for the low 16 values, one for the high 16. */
static inline __m256i
dot_u8_i8_scaled (__m256i u, const int8_t *q, __m256i scale)
{
  const __m256i p16 = _mm256_maddubs_epi16 (u, _mm256_loadu_si256 ((const __m256i *) q));
  return _mm256_madd_epi16 (p16, scale);
}

static inline __m256i
scale_pair (int lo, int hi)
{
  return _mm256_set_m128i (_mm_set1_epi16 ((short) hi), _mm_set1_epi16 ((short) lo));
}

/* sum_j bsums[j] * m[j / 2] over the 16 groups of a Q8_K block, as int32
 * lanes: the Q4_K/Q5_K minimums term. */
static inline __m256i
mins_term (const uint8_t m[8], const LlmBlockQ8_K *y)
{
  const __m128i m8 = _mm_loadl_epi64 ((const __m128i *) m);
  const __m256i m16 = _mm256_cvtepu8_epi16 (_mm_unpacklo_epi8 (m8, m8));
  return _mm256_madd_epi16 (m16, _mm256_loadu_si256 ((const __m256i *) y->bsums));
}

static inline void
k4_scales (const uint8_t *packed, uint8_t sc[8], uint8_t m[8])
{
  for (int j = 0; j < 8; j++)
    llm_k4_scale_min (j, packed, &sc[j], &m[j]);
}

/* Q4_K and Q5_K: values u in 0..31 (0..15 for Q4_K), 64 per group g in two
 * halves with their own scales; w = d * sc * u - dmin * m. */
#define K4_KERNEL(name, BLOCK, HAS_QH) \
  KERNEL \
  name (size_t n, const void *vw, const uint8_t *xb, size_t xs, int nt, float *out) \
  { \
    const BLOCK *w = vw; \
    const __m256i low4 = _mm256_set1_epi8 (0x0f); \
    __m256 acc[NT_MAX]; \
    EACH_TOKEN acc[t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < n / LLM_QK_K; b++) { \
      uint8_t sc[8], m[8]; \
      k4_scales (w[b].scales, sc, m); \
      __m256i isum[NT_MAX]; \
      EACH_TOKEN isum[t] = _mm256_setzero_si256 (); \
      for (int g = 0; g < 4; g++) { \
        const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (w[b].qs + 32 * g)); \
        __m256i lo = _mm256_and_si256 (raw, low4); \
        __m256i hi = _mm256_and_si256 (_mm256_srli_epi16 (raw, 4), low4); \
        if (HAS_QH) { \
          /* 16 where the fifth bit is set: (qh & bit) == bit, masked. */ \
          const __m256i qh = _mm256_loadu_si256 ((const __m256i *) K4_QH (w[b])); \
          const __m256i bit_lo = _mm256_set1_epi8 ((char) (1 << (2 * g))); \
          const __m256i bit_hi = _mm256_set1_epi8 ((char) (1 << (2 * g + 1))); \
          const __m256i sixteen = _mm256_set1_epi8 (16); \
          lo = _mm256_or_si256 (lo, _mm256_and_si256 (_mm256_cmpeq_epi8 ( \
              _mm256_and_si256 (qh, bit_lo), bit_lo), sixteen)); \
          hi = _mm256_or_si256 (hi, _mm256_and_si256 (_mm256_cmpeq_epi8 ( \
              _mm256_and_si256 (qh, bit_hi), bit_hi), sixteen)); \
        } \
        const __m256i s_lo = _mm256_set1_epi16 ((short) sc[2 * g]); \
        const __m256i s_hi = _mm256_set1_epi16 ((short) sc[2 * g + 1]); \
        EACH_TOKEN { \
          const int8_t *q8 = ((const LlmBlockQ8_K *) (xb + t * xs))[b].qs + 64 * g; \
          isum[t] = _mm256_add_epi32 (isum[t], dot_u8_i8_scaled (lo, q8, s_lo)); \
          isum[t] = _mm256_add_epi32 (isum[t], dot_u8_i8_scaled (hi, q8 + 32, s_hi)); \
        } \
      } \
      const float dw = half_to_f32 (w[b].d), mw = half_to_f32 (w[b].dmin); \
      EACH_TOKEN { \
        const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xb + t * xs) + b; \
        acc[t] = _mm256_fmadd_ps (_mm256_set1_ps (dw * x->d), _mm256_cvtepi32_ps (isum[t]), acc[t]); \
        acc[t] = _mm256_fnmadd_ps (_mm256_set1_ps (mw * x->d), \
            _mm256_cvtepi32_ps (mins_term (m, x)), acc[t]); \
      } \
    } \
    EACH_TOKEN out[t] = hsum_ps (acc[t]); \
  }

#define K4_QH(blk) ((blk).qs) /* unused: Q4_K has no fifth bit */
K4_KERNEL (kern_q4_K, LlmBlockQ4_K, 0)
#undef K4_QH
#define K4_QH(blk) ((blk).qh)
K4_KERNEL (kern_q5_K, LlmBlockQ5_K, 1)
#undef K4_QH

KERNEL
kern_q6_K (size_t n, const void *vw, const uint8_t *xb, size_t xs, int nt, float *out)
{
  const LlmBlockQ6_K *w = vw;
  const __m256i low4 = _mm256_set1_epi8 (0x0f);
  const __m256i low2 = _mm256_set1_epi8 (0x03);
  __m256 acc[NT_MAX];
  EACH_TOKEN acc[t] = _mm256_setzero_ps ();

  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const int8_t *sc = w[b].scales;
    __m256i isum[NT_MAX];
    EACH_TOKEN isum[t] = _mm256_setzero_si256 ();

    /* Values are stored as u = q + 32 in 0..63: sum u * q8 * scale, then
     * take away 32 * sum_j scale[j] * bsums[j]. The 128 values of half h
     * come as four runs of 32 (ql low/high nibbles, qh bit pairs). */
    for (int h = 0; h < 2; h++) {
      const uint8_t *ql = w[b].ql + 64 * h;
      const __m256i qa = _mm256_loadu_si256 ((const __m256i *) ql);
      const __m256i qb = _mm256_loadu_si256 ((const __m256i *) (ql + 32));
      const __m256i qh = _mm256_loadu_si256 ((const __m256i *) (w[b].qh + 32 * h));
      _Pragma ("GCC unroll 4") for (int k = 0; k < 4; k++) {
        const __m256i nib = _mm256_and_si256 (k >= 2 ? _mm256_srli_epi16 (k & 1 ? qb : qa, 4)
            : (k & 1 ? qb : qa), low4);
        const __m256i top = _mm256_slli_epi16 (
            _mm256_and_si256 (_mm256_srli_epi16 (qh, 2 * k), low2), 4);
        const __m256i u = _mm256_or_si256 (nib, top);
        const __m256i s = scale_pair (sc[8 * h + 2 * k], sc[8 * h + 2 * k + 1]);
        EACH_TOKEN {
          const int8_t *q8 = ((const LlmBlockQ8_K *) (xb + t * xs))[b].qs + 128 * h + 32 * k;
          isum[t] = _mm256_add_epi32 (isum[t], dot_u8_i8_scaled (u, q8, s));
        }
      }
    }

    const __m256i sc16 = _mm256_cvtepi8_epi16 (_mm_loadu_si128 ((const __m128i *) sc));
    const float dw = half_to_f32 (w[b].d);
    EACH_TOKEN {
      const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xb + t * xs) + b;
      const __m256i bias = _mm256_madd_epi16 (sc16, _mm256_loadu_si256 ((const __m256i *) x->bsums));
      const __m256i total = _mm256_sub_epi32 (isum[t], _mm256_slli_epi32 (bias, 5));
      acc[t] = _mm256_fmadd_ps (_mm256_set1_ps (dw * x->d), _mm256_cvtepi32_ps (total), acc[t]);
    }
  }
  EACH_TOKEN out[t] = hsum_ps (acc[t]);
}

/* --- one token and four tokens --- */

#define ENTRY_POINTS(type) \
  static float \
  dot_##type (size_t n, const void *w, const void *x) \
  { \
    float r; \
    kern_##type (n, w, x, 0, 1, &r); \
    return r; \
  } \
  static void \
  dot4_##type (size_t n, const void *w, const void *x, size_t xs, float *out) \
  { \
    kern_##type (n, w, x, xs, 4, out); \
  }

ENTRY_POINTS (f32)
ENTRY_POINTS (f16)
ENTRY_POINTS (bf16)
ENTRY_POINTS (q8_0)
ENTRY_POINTS (q4_0)
ENTRY_POINTS (q4_K)
ENTRY_POINTS (q5_K)
ENTRY_POINTS (q6_K)

LlmDotFn
llm_avx2_dot_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_F32:
      return dot_f32;
    case LLM_TYPE_F16:
      return dot_f16;
    case LLM_TYPE_BF16:
      return dot_bf16;
    case LLM_TYPE_Q8_0:
      return dot_q8_0;
    case LLM_TYPE_Q4_0:
      return dot_q4_0;
    case LLM_TYPE_Q4_K:
      return dot_q4_K;
    case LLM_TYPE_Q5_K:
      return dot_q5_K;
    case LLM_TYPE_Q6_K:
      return dot_q6_K;
    default:
      return NULL;
  }
}

LlmDot4Fn
llm_avx2_dot4_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_F32:
      return dot4_f32;
    case LLM_TYPE_F16:
      return dot4_f16;
    case LLM_TYPE_BF16:
      return dot4_bf16;
    case LLM_TYPE_Q8_0:
      return dot4_q8_0;
    case LLM_TYPE_Q4_0:
      return dot4_q4_0;
    case LLM_TYPE_Q4_K:
      return dot4_q4_K;
    case LLM_TYPE_Q5_K:
      return dot4_q5_K;
    case LLM_TYPE_Q6_K:
      return dot4_q6_K;
    default:
      return NULL;
  }
}
