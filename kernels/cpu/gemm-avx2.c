/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C batched products (prefill) and activation conversions.
 * Built with -mavx2 -mfma -mf16c and reached only through
 * llm_avx2_gemm_fn() / llm_avx2_convert_fn() after a CPU check in
 * matmul.c.
 *
 * Prefill is bound by the multiply units (vpmaddubsw, vpmaddwd and vfmadd
 * share two pipes on the Zen 5 this was tuned on), so the kernels are
 * built to need as few multiplies per weight as each type's rounding
 * contract allows:
 *
 * - F32, F16, BF16, Q8_0: the result must be matvec's bit for bit (Q8_0's
 *   is also llama.cpp's, which the golden tests check), i.e. 8 partial
 *   lanes per output, one FMA per 8 (float) or 32 (Q8_0) weights. Tiles of
 *   up to 4 rows x 3 tokens keep their accumulators in registers, so a
 *   weight is loaded (and widened) once for 3 tokens and an activation
 *   once for 4 rows, and the per-block scale products d_w d_x are formed
 *   four at a time.
 * - Q4_0 and the K-quants: 8 weight rows are interleaved, one row per
 *   32-bit lane, and each row's whole-block integer sum is formed in its
 *   lane, so no partial lanes, no horizontal sums, and several groups of 4
 *   products are added in 16 bits before one widening multiply. About half
 *   the multiplies; a different float order (see "rows in lanes" below).
 *
 * Threads share a product by claiming blocks of rows from a counter. */
#include "gemm-avx2.h"
#include "gemm-common.h"
#include "threadpool.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-type.h"
#include "fp16.h"
#include "kquants.h"
#include "quantize.h"

#define INLINE static inline __attribute__ ((always_inline))
#define UNROLL _Pragma ("GCC unroll 8")

INLINE float
half_to_f32 (uint16_t h)
{
  return _cvtsh_ss (h);
}

/* Word @r of @v set to @h (r a constant after unrolling). */
INLINE __m128i
insert_u16 (__m128i v, uint16_t h, int r)
{
  switch (r) {
    case 0: return _mm_insert_epi16 (v, h, 0);
    case 1: return _mm_insert_epi16 (v, h, 1);
    case 2: return _mm_insert_epi16 (v, h, 2);
    case 3: return _mm_insert_epi16 (v, h, 3);
    case 4: return _mm_insert_epi16 (v, h, 4);
    case 5: return _mm_insert_epi16 (v, h, 5);
    case 6: return _mm_insert_epi16 (v, h, 6);
    default: return _mm_insert_epi16 (v, h, 7);
  }
}

/* --- activation conversions --------------------------------------------
 * Each gives the bytes the scalar conversion in matmul.c gives for finite
 * input: F16C rounds to nearest even like llm_fp16_from_f32, and
 * _mm256_cvtps_epi32 rounds like nearbyintf in the default rounding mode. */

static void
convert_f16 (const float *x, size_t n, void *out)
{
  uint16_t *o = out;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128 ((__m128i *) (o + i),
        _mm256_cvtps_ph (_mm256_loadu_ps (x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++)
    o[i] = llm_fp16_from_f32 (x[i]);
}

/* Round to nearest even on the top 16 bits; NaNs stay quiet NaNs. */
INLINE __m256i
bf16_round (__m256 v)
{
  const __m256i u = _mm256_castps_si256 (v);
  const __m256i lsb = _mm256_and_si256 (_mm256_srli_epi32 (u, 16), _mm256_set1_epi32 (1));
  const __m256i r = _mm256_srli_epi32 (_mm256_add_epi32 (_mm256_add_epi32 (u,
              _mm256_set1_epi32 (0x7fff)), lsb), 16);
  const __m256i nan = _mm256_cmpgt_epi32 (_mm256_and_si256 (u, _mm256_set1_epi32 (0x7fffffff)),
      _mm256_set1_epi32 (0x7f800000));
  const __m256i q = _mm256_or_si256 (_mm256_srli_epi32 (u, 16), _mm256_set1_epi32 (0x40));
  return _mm256_blendv_epi8 (r, q, nan);
}

static void
convert_bf16 (const float *x, size_t n, void *out)
{
  uint16_t *o = out;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16_round (_mm256_loadu_ps (x + i));
    const __m256i b = bf16_round (_mm256_loadu_ps (x + i + 8));
    /* packus interleaves 128-bit lanes; put them back in order. */
    _mm256_storeu_si256 ((__m256i *) (o + i),
        _mm256_permute4x64_epi64 (_mm256_packus_epi32 (a, b), 0xd8));
  }
  for (; i < n; i++)
    o[i] = llm_bf16_from_f32 (x[i]);
}

INLINE float
hmax_ps (__m256 v)
{
  __m128 m = _mm_max_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  m = _mm_max_ps (m, _mm_movehl_ps (m, m));
  m = _mm_max_ss (m, _mm_movehdup_ps (m));
  return _mm_cvtss_f32 (m);
}

/* Four vectors of eight int32 (each within int8) as 32 bytes in order. */
INLINE __m256i
pack_i32x32_to_i8 (__m256i a, __m256i b, __m256i c, __m256i d)
{
  const __m256i ab = _mm256_packs_epi32 (a, b);
  const __m256i cd = _mm256_packs_epi32 (c, d);
  return _mm256_permutevar8x32_epi32 (_mm256_packs_epi16 (ab, cd),
      _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7));
}

static void
convert_q8_0 (const float *x, size_t n, void *out)
{
  LlmBlockQ8_0 *dst = out;
  const __m256 sign = _mm256_set1_ps (-0.0f);
  for (size_t b = 0; b < n / LLM_QK8_0; b++) {
    const float *p = x + b * LLM_QK8_0;
    const __m256 v0 = _mm256_loadu_ps (p), v1 = _mm256_loadu_ps (p + 8);
    const __m256 v2 = _mm256_loadu_ps (p + 16), v3 = _mm256_loadu_ps (p + 24);
    const __m256 m = _mm256_max_ps (
        _mm256_max_ps (_mm256_andnot_ps (sign, v0), _mm256_andnot_ps (sign, v1)),
        _mm256_max_ps (_mm256_andnot_ps (sign, v2), _mm256_andnot_ps (sign, v3)));
    const float amax = hmax_ps (m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    dst[b].d = _cvtss_sh (d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 mul = _mm256_set1_ps (id);
    _mm256_storeu_si256 ((__m256i *) dst[b].qs, pack_i32x32_to_i8 (
        _mm256_cvtps_epi32 (_mm256_mul_ps (v0, mul)),
        _mm256_cvtps_epi32 (_mm256_mul_ps (v1, mul)),
        _mm256_cvtps_epi32 (_mm256_mul_ps (v2, mul)),
        _mm256_cvtps_epi32 (_mm256_mul_ps (v3, mul))));
  }
}

static void
convert_q8_K (const float *x, size_t n, void *out)
{
  LlmBlockQ8_K *dst = out;
  const __m256 sign = _mm256_set1_ps (-0.0f);
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    const float *p = x + b * LLM_QK_K;
    LlmBlockQ8_K *y = &dst[b];
    __m256 m = _mm256_setzero_ps ();
    for (int i = 0; i < LLM_QK_K; i += 8)
      m = _mm256_max_ps (m, _mm256_andnot_ps (sign, _mm256_loadu_ps (p + i)));
    const float amax = hmax_ps (m);
    if (amax == 0.0f) {
      memset (y, 0, sizeof *y);
      continue;
    }
    /* The first value of largest magnitude, as the scalar loop finds it. */
    const __m256 am = _mm256_set1_ps (amax);
    float max = 0.0f;
    for (int i = 0; i < LLM_QK_K; i += 8) {
      const int hit = _mm256_movemask_ps (_mm256_cmp_ps (
              _mm256_andnot_ps (sign, _mm256_loadu_ps (p + i)), am, _CMP_EQ_OQ));
      if (hit) {
        max = p[i + __builtin_ctz ((unsigned) hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 mul = _mm256_set1_ps (iscale);
    const __m256i cap = _mm256_set1_epi32 (127);
    for (int i = 0; i < LLM_QK_K; i += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; k++)
        q[k] = _mm256_min_epi32 (_mm256_cvtps_epi32 (_mm256_mul_ps (_mm256_loadu_ps (p + i + 8 * k),
                    mul)), cap);
      const __m256i qs = pack_i32x32_to_i8 (q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256 ((__m256i *) (y->qs + i), qs);
      /* Sums of 16: bytes to pairs to quads, then each 128-bit half. */
      const __m256i s32 = _mm256_madd_epi16 (_mm256_maddubs_epi16 (_mm256_set1_epi8 (1), qs),
          _mm256_set1_epi16 (1));
      const __m256i h = _mm256_hadd_epi32 (s32, s32);
      const __m256i hh = _mm256_hadd_epi32 (h, h);
      y->bsums[i / 16] = (int16_t) _mm256_extract_epi32 (hh, 0);
      y->bsums[i / 16 + 1] = (int16_t) _mm256_extract_epi32 (hh, 4);
    }
    y->d = 1.0f / iscale;
  }
}

LlmConvertFn
llm_avx2_convert_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_F16:
      return convert_f16;
    case LLM_TYPE_BF16:
      return convert_bf16;
    case LLM_TYPE_Q8_0:
    case LLM_TYPE_Q4_0:
    case LLM_TYPE_Q5_0:
      return convert_q8_0;
    case LLM_TYPE_Q4_K:
    case LLM_TYPE_Q5_K:
    case LLM_TYPE_Q6_K:
      return convert_q8_K;
    default:
      return NULL;
  }
}

/* --- tiles ------------------------------------------------------------
 * A tile function computes y[t * ldy + r] for r < RM, t < RN, from weight
 * rows @w (@rb bytes apart) and activation rows @x (@xs bytes apart). */

typedef void (*TileFn) (size_t n, const uint8_t *w, size_t rb, const uint8_t *x, size_t xs,
    float *y, size_t ldy);

/* F32, F16, BF16 weights against F32 activations (F16 and BF16 activation
 * rows are widened first, exactly). Per output, as matvec (ggml's
 * vec_dot_f32/f16/bf16): four 8-lane chains, chain j taking runs of 8 at
 * 32 i + 8 j, combined as (0 + 2) + (1 + 3), then the lanes (HSUM); the
 * tail past the last multiple of 32 is added in TAIL_T. The chains are
 * independent, so the tile runs them one after another and every pass
 * keeps RM x RN accumulators in registers. */

INLINE __m256
wload_f32 (const uint8_t *p, size_t i)
{
  return _mm256_loadu_ps ((const float *) p + i);
}

INLINE float
wscalar_f32 (const uint8_t *p, size_t i)
{
  return ((const float *) p)[i];
}

INLINE __m256
wload_f16 (const uint8_t *p, size_t i)
{
  return _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) p + i)));
}

INLINE float
wscalar_f16 (const uint8_t *p, size_t i)
{
  return half_to_f32 (((const uint16_t *) p)[i]);
}

INLINE __m256
wload_bf16 (const uint8_t *p, size_t i)
{
  const __m256i u = _mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) p + i)));
  return _mm256_castsi256_ps (_mm256_slli_epi32 (u, 16));
}

INLINE float
wscalar_bf16 (const uint8_t *p, size_t i)
{
  return llm_bf16_to_f32 (((const uint16_t *) p)[i]);
}

/* ggml's GGML_F32x8_REDUCE lane sum: halves, then two hadds. */
INLINE float
hsum_ps_hadd (__m256 v)
{
  const __m128 t0 = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  const __m128 t1 = _mm_hadd_ps (t0, t0);
  return _mm_cvtss_f32 (_mm_hadd_ps (t1, t1));
}

#define FLOAT_TILE(name, RM, RN, WLOAD, WSCALAR, TAIL_T, HSUM) \
  FLOAT_TILE_CH (name, RM, RN, 1, WLOAD, WSCALAR, TAIL_T, HSUM)

/* CH chains (1, 2 or 4) in registers per pass, 4 / CH passes. */
#define FLOAT_TILE_CH(name, RM, RN, CH, WLOAD, WSCALAR, TAIL_T, HSUM) \
  static void \
  name (size_t n, const uint8_t *w, size_t rb, const uint8_t *xb, size_t xs, float *y, \
      size_t ldy) \
  { \
    const size_t np = n & ~(size_t) 31; \
    __m256 chain[4][RM][RN]; \
    for (int j0 = 0; j0 < 4; j0 += (CH)) { \
      __m256 acc[CH][RM][RN]; \
      UNROLL for (int c = 0; c < (CH); c++) \
        UNROLL for (int r = 0; r < RM; r++) \
          UNROLL for (int t = 0; t < RN; t++) \
            acc[c][r][t] = _mm256_setzero_ps (); \
      for (size_t i = 8 * j0; i < np; i += 32) { \
        UNROLL for (int c = 0; c < (CH); c++) \
          UNROLL for (int r = 0; r < RM; r++) { \
            const __m256 wv = WLOAD (w + r * rb, i + 8 * c); \
            UNROLL for (int t = 0; t < RN; t++) \
              acc[c][r][t] = _mm256_fmadd_ps (wv, \
                  _mm256_loadu_ps ((const float *) (xb + t * xs) + i + 8 * c), acc[c][r][t]); \
          } \
      } \
      UNROLL for (int c = 0; c < (CH); c++) \
        UNROLL for (int r = 0; r < RM; r++) \
          UNROLL for (int t = 0; t < RN; t++) \
            chain[j0 + c][r][t] = acc[c][r][t]; \
    } \
    UNROLL for (int r = 0; r < RM; r++) \
      UNROLL for (int t = 0; t < RN; t++) { \
        const float *x = (const float *) (xb + t * xs); \
        const __m256 s = _mm256_add_ps (_mm256_add_ps (chain[0][r][t], chain[2][r][t]), \
            _mm256_add_ps (chain[1][r][t], chain[3][r][t])); \
        TAIL_T sum = HSUM (s); \
        for (size_t k = np; k < n; k++) { \
          /* A statement of its own, so no compiler fuses it into an FMA. */ \
          const float prod = WSCALAR (w + r * rb, k) * x[k]; \
          sum += (TAIL_T) prod; \
        } \
        y[t * ldy + r] = (float) sum; \
      } \
  }

/* Q8_0 against Q8_0 activations, the activation scales d_x converted once
 * per product (@dx[t * nb + b]), the scale products d_w d_x for a block
 * formed four rows at a time. |w| times x with w's sign, as matvec: the
 * same lanes, scales and float operations. (AVX-VNNI's vpdpbusd would fold
 * the two multiplies into one, but runs at half the rate of vpmaddubsw on
 * the Zen 5 this was tuned on, and came out slower.) */
typedef void (*Q8TileFn) (size_t nb, const uint8_t *w, size_t rb, const uint8_t *xb, size_t xs,
    const float *dx, float *y, size_t ldy);

#define Q8_0_TILE(name, RM, RN, unused) \
  static void \
  name (size_t nb, const uint8_t *w, size_t rb, const uint8_t *xb, size_t xs, const float *dx, \
      float *y, size_t ldy) \
  { \
    const __m256i ones = _mm256_set1_epi16 (1); \
    __m256 acc[RM][RN]; \
    UNROLL for (int r = 0; r < RM; r++) \
      UNROLL for (int t = 0; t < RN; t++) \
        acc[r][t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      __m128i dh = _mm_setzero_si128 (); \
      UNROLL for (int r = 0; r < RM; r++) \
        dh = insert_u16 (dh, ((const LlmBlockQ8_0 *) (w + r * rb) + b)->d, r); \
      const __m128 dw = _mm_cvtph_ps (dh); \
      float sc[RN][4] __attribute__ ((aligned (16))); \
      UNROLL for (int t = 0; t < RN; t++) \
        _mm_store_ps (sc[t], _mm_mul_ps (dw, _mm_set1_ps (dx[t * nb + b]))); \
      UNROLL for (int r = 0; r < RM; r++) { \
        const __m256i q = _mm256_loadu_si256 ((const __m256i *) ((const LlmBlockQ8_0 *) \
                (w + r * rb) + b)->qs); \
        const __m256i aq = _mm256_sign_epi8 (q, q); \
        UNROLL for (int t = 0; t < RN; t++) { \
          const __m256i xv = _mm256_loadu_si256 ((const __m256i *) \
              ((const LlmBlockQ8_0 *) (xb + t * xs) + b)->qs); \
          const __m256i p16 = _mm256_maddubs_epi16 (aq, _mm256_sign_epi8 (xv, q)); \
          acc[r][t] = _mm256_fmadd_ps (_mm256_broadcast_ss (&sc[t][r]), \
              _mm256_cvtepi32_ps (_mm256_madd_epi16 (p16, ones)), acc[r][t]); \
        } \
      } \
    } \
    UNROLL for (int r = 0; r < RM; r++) \
      UNROLL for (int t = 0; t < RN; t++) \
        y[t * ldy + r] = hsum_ps (acc[r][t]); \
  }

/* Every tile shape up to RM x RN, indexed [(rm - 1) * RN + rn - 1]: the
 * full shape for the bulk, smaller ones for the edges. */
#define TILES_4x3(M, T, pre, ...) \
  M (pre##_1x1, 1, 1, __VA_ARGS__) M (pre##_1x2, 1, 2, __VA_ARGS__) \
  M (pre##_1x3, 1, 3, __VA_ARGS__) \
  M (pre##_2x1, 2, 1, __VA_ARGS__) M (pre##_2x2, 2, 2, __VA_ARGS__) \
  M (pre##_2x3, 2, 3, __VA_ARGS__) \
  M (pre##_3x1, 3, 1, __VA_ARGS__) M (pre##_3x2, 3, 2, __VA_ARGS__) \
  M (pre##_3x3, 3, 3, __VA_ARGS__) \
  M (pre##_4x1, 4, 1, __VA_ARGS__) M (pre##_4x2, 4, 2, __VA_ARGS__) \
  M (pre##_4x3, 4, 3, __VA_ARGS__) \
  static const T pre[] = { pre##_1x1, pre##_1x2, pre##_1x3, pre##_2x1, pre##_2x2, \
    pre##_2x3, pre##_3x1, pre##_3x2, pre##_3x3, pre##_4x1, pre##_4x2, pre##_4x3 };

/* F32 weights are 4 bytes a product: a tile of one row and three tokens
 * with all four chains in registers reads each weight once, not 4 times. */
#define F32_TILE(name, RM, RN, unused) \
  FLOAT_TILE_CH (name, RM, RN, 4, wload_f32, wscalar_f32, float, hsum_ps_hadd)
#define TILES_1x3(M, T, pre, ...) \
  M (pre##_1x1, 1, 1, __VA_ARGS__) M (pre##_1x2, 1, 2, __VA_ARGS__) \
  M (pre##_1x3, 1, 3, __VA_ARGS__) \
  static const T pre[] = { pre##_1x1, pre##_1x2, pre##_1x3 };
TILES_1x3 (F32_TILE, TileFn, tiles_f32, 0)
TILES_4x3 (FLOAT_TILE, TileFn, tiles_f16, wload_f16, wscalar_f16, double, hsum_ps_hadd)
TILES_4x3 (FLOAT_TILE, TileFn, tiles_bf16, wload_bf16, wscalar_bf16, double, hsum_ps)
TILES_4x3 (Q8_0_TILE, Q8TileFn, tiles_q8_0, 0)

/* --- rows in lanes: Q4_0 and K-quants ----------------------------------
 * Eight weight rows are interleaved so that one vector holds 4 consecutive
 * values of each row (a "group"); a token's 4 activation bytes for that
 * group are broadcast, and vpmaddubsw gives each row's products in its own
 * pair of int16 lanes. Unsigned weight values are small enough that the
 * int16 lanes can add up several groups (up to a whole run of one scale)
 * before vpmaddwd widens them (times the row's scale), so there are far
 * fewer multiplies per product than with 8 lanes per output, and no
 * horizontal sums. The weights are interleaved per call, into a buffer the
 * size of one tile (8 rows; Q4_0 16), and reused by every token; the next
 * tile's rows are prefetched meanwhile. Up to 4 tokens (K-quants 3) share
 * each weight vector load; more would not fit in 16 registers.
 *
 * The float order per output is block by block: Q4_0 computes
 * ((float) sumi * d_w) * d_x and adds it, exactly as the scalar reference
 * dot_q4_0 does; K-quants add (d_w d_x) * sum - (dmin_w d_x) * mins (Q6_K:
 * d_w d_x * (sum - 32 bias)) per super-block. Integer sums are exact (a
 * whole super-block sum may exceed 2^24 and round once in the float
 * conversion). */

#define RL 8 /* rows per vector, and per K-quant tile */

/* out[i] dword r = in[r] dword i. */
INLINE void
transpose8_epi32 (__m256i v[8])
{
  __m256i t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_epi32 (v[k], v[k + 1]);
    t[k + 1] = _mm256_unpackhi_epi32 (v[k], v[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_unpacklo_epi64 (t[k], t[k + 2]);
    u[k + 1] = _mm256_unpackhi_epi64 (t[k], t[k + 2]);
    u[k + 2] = _mm256_unpacklo_epi64 (t[k + 1], t[k + 3]);
    u[k + 3] = _mm256_unpackhi_epi64 (t[k + 1], t[k + 3]);
  }
  for (int i = 0; i < 4; i++) {
    v[i] = _mm256_permute2x128_si256 (u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2x128_si256 (u[i], u[i + 4], 0x31);
  }
}

INLINE __m256i
bcast4 (const int8_t *p)
{
  int32_t v;
  memcpy (&v, p, sizeof v);
  return _mm256_set1_epi32 (v);
}

void
llm_avx2_q4_0_act_side (const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, float *dx, int32_t *corr)
{
  const __m256i eight = _mm256_set1_epi8 (8);
  for (size_t t = 0; t < n_tok; t++) {
    const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xq + t * xs);
    for (size_t b = 0; b < nb; b++) {
      dx[t * nb + b] = half_to_f32 (x[b].d);
      const __m256i s = _mm256_madd_epi16 (_mm256_maddubs_epi16 (eight,
              _mm256_loadu_si256 ((const __m256i *) x[b].qs)), _mm256_set1_epi16 (1));
      __m128i h = _mm_add_epi32 (_mm256_castsi256_si128 (s), _mm256_extracti128_si256 (s, 1));
      h = _mm_add_epi32 (h, _mm_unpackhi_epi64 (h, h));
      h = _mm_add_epi32 (h, _mm_shuffle_epi32 (h, 1));
      corr[t * nb + b] = _mm_cvtsi128_si32 (h);
    }
  }
}

INLINE void
store_rows (__m256 v, int rm, float *y)
{
  if (rm == RL) {
    _mm256_storeu_ps (y, v);
  } else {
    float tmp[RL];
    _mm256_storeu_ps (tmp, v);
    for (int r = 0; r < rm; r++)
      y[r] = tmp[r];
  }
}


/* The Q4_0_PB layout (gemm-avx2.h). */
#define PACK16(name, BLOCK, VALS) \
  void \
  name (const uint8_t *w, size_t rb, int rm, size_t nb, uint8_t *out) \
  { \
    for (size_t b = 0; b < nb; b++) { \
      uint8_t *o = out + b * Q4_0_PB; \
      for (int h = 0; h < 2; h++) { \
        __m256i u[8]; \
        __m128i dh = _mm_setzero_si128 (); \
        for (int r = 0; r < 8; r++) { \
          if (8 * h + r < rm) { \
            const BLOCK *blk = (const BLOCK *) (w + (8 * h + r) * rb) + b; \
            u[r] = VALS ((const uint8_t *) blk); \
            dh = insert_u16 (dh, blk->d, r); \
          } else { \
            u[r] = _mm256_setzero_si256 (); \
          } \
        } \
        transpose8_epi32 (u); \
        for (int i = 0; i < 8; i++) \
          _mm256_storeu_si256 ((__m256i *) (o + 64 * i + 32 * h), u[i]); \
        _mm256_storeu_ps ((float *) (o + 512 + 32 * h), _mm256_cvtph_ps (dh)); \
      } \
    } \
  }

PACK16 (llm_avx2_pack_q4_0, LlmBlockQ4_0, vals_q4_0)

#define Q4_0_RL_TILE(name, RN) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx, \
      const int32_t *corr, float *y, size_t ldy, int rm) \
  { \
    const __m256i ones = _mm256_set1_epi16 (1); \
    __m256 acc[2][RN]; \
    UNROLL for (int h = 0; h < 2; h++) \
      UNROLL for (int t = 0; t < RN; t++) \
        acc[h][t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * Q4_0_PB; \
      __m256i a16[2][RN]; \
      UNROLL for (int i = 0; i < 8; i++) { \
        const __m256i w0 = _mm256_loadu_si256 ((const __m256i *) (pb + 64 * i)); \
        const __m256i w1 = _mm256_loadu_si256 ((const __m256i *) (pb + 64 * i + 32)); \
        UNROLL for (int t = 0; t < RN; t++) { \
          const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xb + t * xs) + b; \
          const __m256i a = bcast4 (x->qs + 4 * i); \
          const __m256i p0 = _mm256_maddubs_epi16 (w0, a); \
          const __m256i p1 = _mm256_maddubs_epi16 (w1, a); \
          a16[0][t] = i == 0 ? p0 : _mm256_add_epi16 (a16[0][t], p0); \
          a16[1][t] = i == 0 ? p1 : _mm256_add_epi16 (a16[1][t], p1); \
        } \
      } \
      UNROLL for (int h = 0; h < 2; h++) { \
        const __m256 dw = _mm256_loadu_ps ((const float *) (pb + 512 + 32 * h)); \
        UNROLL for (int t = 0; t < RN; t++) { \
          const __m256i si = _mm256_sub_epi32 (_mm256_madd_epi16 (a16[h][t], ones), \
              _mm256_set1_epi32 (corr[t * nb + b])); \
          const __m256 f = _mm256_mul_ps (_mm256_mul_ps (_mm256_cvtepi32_ps (si), dw), \
              _mm256_set1_ps (dx[t * nb + b])); \
          acc[h][t] = _mm256_add_ps (acc[h][t], f); \
        } \
      } \
    } \
    UNROLL for (int t = 0; t < RN; t++) { \
      store_rows (acc[0][t], rm < 8 ? rm : 8, y + t * ldy); \
      if (rm > 8) \
        store_rows (acc[1][t], rm - 8, y + t * ldy + 8); \
    } \
  }

/* K-quant tile per super-block: 64 groups of 8 rows x 4 values (unsigned:
 * Q4_K 0..15, Q5_K 0..31, Q6_K 0..63 standing for q + 32), then per run of
 * one scale (8 of 32 values; Q6_K 16 of 16) the rows' scales as int16
 * pairs, then 8 vectors pairing the rows' factors for Q8_K's 16 bsums
 * (Q4_K/Q5_K: the run's min for both; Q6_K: the two scales), then d and
 * dmin as floats. */

/* Values 32 c .. 32 c + 31 of one row, unsigned, in order. */
INLINE __m256i
kvals_q4_K (const uint8_t *blkp, int c)
{
  const LlmBlockQ4_K *blk = (const LlmBlockQ4_K *) blkp;
  const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (blk->qs + 32 * (c / 2)));
  return _mm256_and_si256 (c & 1 ? _mm256_srli_epi16 (raw, 4) : raw, _mm256_set1_epi8 (0x0f));
}

INLINE __m256i
kvals_q5_K (const uint8_t *blkp, int c)
{
  const LlmBlockQ5_K *blk = (const LlmBlockQ5_K *) blkp;
  const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (blk->qs + 32 * (c / 2)));
  const __m256i lo = _mm256_and_si256 (c & 1 ? _mm256_srli_epi16 (raw, 4) : raw,
      _mm256_set1_epi8 (0x0f));
  /* Bit c of qh[l] is the fifth bit of value 32 c + l. */
  const __m256i qh = _mm256_loadu_si256 ((const __m256i *) blk->qh);
  const __m256i bit = _mm256_and_si256 (_mm256_srli_epi16 (qh, c), _mm256_set1_epi8 (1));
  return _mm256_or_si256 (lo, _mm256_slli_epi16 (bit, 4));
}

INLINE __m256i
kvals_q6_K (const uint8_t *blkp, int c)
{
  const LlmBlockQ6_K *blk = (const LlmBlockQ6_K *) blkp;
  const int h = c / 4, k = c % 4;
  const __m256i ql = _mm256_loadu_si256 ((const __m256i *) (blk->ql + 64 * h + 32 * (k & 1)));
  const __m256i nib = _mm256_and_si256 (k >= 2 ? _mm256_srli_epi16 (ql, 4) : ql,
      _mm256_set1_epi8 (0x0f));
  const __m256i qh = _mm256_loadu_si256 ((const __m256i *) (blk->qh + 32 * h));
  const __m256i top = _mm256_and_si256 (_mm256_srli_epi16 (qh, 2 * k), _mm256_set1_epi8 (3));
  return _mm256_or_si256 (nib, _mm256_slli_epi16 (top, 4));
}

/* A row's scale vector entries (dword j: scale of run j in both halves)
 * and correction entries (dword k: factors for bsums 2k, 2k + 1), for
 * runs 0..7 in @sv_lo (Q6_K: 0..3 and 8..11) and, for Q6_K, runs 4..7 and
 * 12..15 in @sv_hi. */
typedef struct {
  __m256i sv_lo, sv_hi, cv;
  uint16_t d, dmin;
} KRowScales;

/* The 6-bit scales and mins of Q4_K/Q5_K (llm_k4_scale_min) as
 * [sc0..sc7 | m0..m7], int16. */
INLINE __m256i
k4_scales_mins16 (const uint8_t *q)
{
  uint32_t w0, w1, w2;
  memcpy (&w0, q, 4);
  memcpy (&w1, q + 4, 4);
  memcpy (&w2, q + 8, 4);
  const uint32_t sc_lo = w0 & 0x3f3f3f3f;
  const uint32_t sc_hi = (w2 & 0x0f0f0f0f) | ((w0 >> 2) & 0x30303030);
  const uint32_t m_lo = w1 & 0x3f3f3f3f;
  const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0f) | ((w1 >> 2) & 0x30303030);
  return _mm256_cvtepu8_epi16 (_mm_setr_epi32 ((int) sc_lo, (int) sc_hi, (int) m_lo,
          (int) m_hi));
}

INLINE KRowScales
krow_k4 (const uint8_t *packed, uint16_t d, uint16_t dmin)
{
  const __m256i v = k4_scales_mins16 (packed);
  const __m256i lo = _mm256_unpacklo_epi16 (v, v), hi = _mm256_unpackhi_epi16 (v, v);
  KRowScales k = {
    .sv_lo = _mm256_permute2x128_si256 (lo, hi, 0x20),
    .sv_hi = _mm256_setzero_si256 (),
    .cv = _mm256_permute2x128_si256 (lo, hi, 0x31),
    .d = d, .dmin = dmin,
  };
  return k;
}

INLINE KRowScales
kscales_q4_K (const uint8_t *blkp)
{
  const LlmBlockQ4_K *blk = (const LlmBlockQ4_K *) blkp;
  return krow_k4 (blk->scales, blk->d, blk->dmin);
}

INLINE KRowScales
kscales_q5_K (const uint8_t *blkp)
{
  const LlmBlockQ5_K *blk = (const LlmBlockQ5_K *) blkp;
  return krow_k4 (blk->scales, blk->d, blk->dmin);
}

INLINE KRowScales
kscales_q6_K (const uint8_t *blkp)
{
  const LlmBlockQ6_K *blk = (const LlmBlockQ6_K *) blkp;
  const __m256i s16 = _mm256_cvtepi8_epi16 (_mm_loadu_si128 ((const __m128i *) blk->scales));
  KRowScales k = {
    .sv_lo = _mm256_unpacklo_epi16 (s16, s16),
    .sv_hi = _mm256_unpackhi_epi16 (s16, s16),
    .cv = s16,
    .d = blk->d, .dmin = 0,
  };
  return k;
}

/* Where run j's scale vector goes: Q6_K's unpacklo/unpackhi order. */
INLINE int
sv_slot (int S, int half, int i)
{
  if (S == 8)
    return i;
  return (i < 4 ? i : i + 4) + 4 * half;
}

#define K_PACK(name, VALS, SCALES, S, BLOCK) \
  static void \
  name (const uint8_t *w, size_t rb, int rm, size_t nb, uint8_t *out) \
  { \
    for (size_t b = 0; b < nb; b++) { \
      uint8_t *o = out + b * K_PB (S); \
      for (int c = 0; c < 8; c++) { \
        __m256i u[8]; \
        for (int r = 0; r < 8; r++) \
          u[r] = r < rm ? VALS ((const uint8_t *) ((const BLOCK *) (w + r * rb) + b), c) \
              : _mm256_setzero_si256 (); \
        transpose8_epi32 (u); \
        for (int i = 0; i < 8; i++) \
          _mm256_storeu_si256 ((__m256i *) (o + K_W + 32 * (8 * c + i)), u[i]); \
      } \
      __m256i lo[8], hi[8], cv[8]; \
      __m128i dh = _mm_setzero_si128 (), dmh = _mm_setzero_si128 (); \
      UNROLL for (int r = 0; r < 8; r++) { \
        if (r < rm) { \
          const KRowScales k = SCALES ((const uint8_t *) ((const BLOCK *) (w + r * rb) + b)); \
          lo[r] = k.sv_lo; \
          hi[r] = k.sv_hi; \
          cv[r] = k.cv; \
          dh = insert_u16 (dh, k.d, r); \
          dmh = insert_u16 (dmh, k.dmin, r); \
        } else { \
          lo[r] = hi[r] = cv[r] = _mm256_setzero_si256 (); \
        } \
      } \
      transpose8_epi32 (lo); \
      transpose8_epi32 (cv); \
      for (int i = 0; i < 8; i++) { \
        _mm256_storeu_si256 ((__m256i *) (o + K_SV + 32 * sv_slot (S, 0, i)), lo[i]); \
        _mm256_storeu_si256 ((__m256i *) (o + K_CV (S) + 32 * i), cv[i]); \
      } \
      if ((S) == 16) { \
        transpose8_epi32 (hi); \
        for (int i = 0; i < 8; i++) \
          _mm256_storeu_si256 ((__m256i *) (o + K_SV + 32 * sv_slot (S, 1, i)), hi[i]); \
      } \
      _mm256_storeu_ps ((float *) (o + K_D (S)), _mm256_cvtph_ps (dh)); \
      _mm256_storeu_ps ((float *) (o + K_D (S) + 32), _mm256_cvtph_ps (dmh)); \
    } \
  }

K_PACK (pack_q4_K, kvals_q4_K, kscales_q4_K, 8, LlmBlockQ4_K)
K_PACK (pack_q5_K, kvals_q5_K, kscales_q5_K, 8, LlmBlockQ5_K)
K_PACK (pack_q6_K, kvals_q6_K, kscales_q6_K, 16, LlmBlockQ6_K)

LlmPackFn
llm_avx2_k_pack_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_Q4_K:
      return pack_q4_K;
    case LLM_TYPE_Q5_K:
      return pack_q5_K;
    case LLM_TYPE_Q6_K:
      return pack_q6_K;
    default:
      return NULL;
  }
}

/* S runs of one scale per super-block, C groups added in int16 before
 * widening (the largest count that cannot overflow: 4-value pair sums are
 * at most 2 * vmax * 128). */
#define K_RL_TILE(name, RN, S, C, HAS_MIN) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx_unused, \
      const int32_t *corr_unused, float *y, size_t ldy, int rm) \
  { \
    enum { G = 64 / (S) }; \
    __m256 acc[RN]; \
    UNROLL for (int t = 0; t < RN; t++) \
      acc[t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * K_PB (S); \
      __m256i isum[RN]; \
      UNROLL for (int t = 0; t < RN; t++) \
        isum[t] = _mm256_setzero_si256 (); \
      for (int s = 0; s < (S); s++) { \
        const __m256i sv = _mm256_loadu_si256 ((const __m256i *) (pb + K_SV + 32 * s)); \
        UNROLL for (int c0 = 0; c0 < G; c0 += (C)) { \
          /* Products of group c0 + i in p[i]; summed pairwise (a tree, \
           * not a chain, so the additions overlap). */ \
          __m256i p[RN][C]; \
          UNROLL for (int i = 0; i < (C); i++) { \
            const int g = s * G + c0 + i; \
            const __m256i wv = _mm256_loadu_si256 ((const __m256i *) (pb + K_W + 32 * g)); \
            UNROLL for (int t = 0; t < RN; t++) { \
              const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xb + t * xs) + b; \
              p[t][i] = _mm256_maddubs_epi16 (wv, bcast4 (x->qs + 4 * g)); \
            } \
          } \
          UNROLL for (int t = 0; t < RN; t++) { \
            UNROLL for (int h = 1; h < (C); h *= 2) \
              UNROLL for (int i = 0; i + h < (C); i += 2 * h) \
                p[t][i] = _mm256_add_epi16 (p[t][i], p[t][i + h]); \
            isum[t] = _mm256_add_epi32 (isum[t], _mm256_madd_epi16 (p[t][0], sv)); \
          } \
        } \
      } \
      const __m256 dv = _mm256_loadu_ps ((const float *) (pb + K_D (S))); \
      const __m256 dminv = _mm256_loadu_ps ((const float *) (pb + K_D (S) + 32)); \
      UNROLL for (int t = 0; t < RN; t++) { \
        const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xb + t * xs) + b; \
        __m256i cs = _mm256_madd_epi16 ( \
            _mm256_loadu_si256 ((const __m256i *) (pb + K_CV (S))), \
            bcast4 ((const int8_t *) x->bsums)); \
        UNROLL for (int k = 1; k < 8; k++) \
          cs = _mm256_add_epi32 (cs, _mm256_madd_epi16 ( \
              _mm256_loadu_si256 ((const __m256i *) (pb + K_CV (S) + 32 * k)), \
              bcast4 ((const int8_t *) (x->bsums + 2 * k)))); \
        const __m256 dx = _mm256_set1_ps (x->d); \
        if (HAS_MIN) { \
          acc[t] = _mm256_fmadd_ps (_mm256_mul_ps (dv, dx), _mm256_cvtepi32_ps (isum[t]), acc[t]); \
          acc[t] = _mm256_fnmadd_ps (_mm256_mul_ps (dminv, dx), _mm256_cvtepi32_ps (cs), acc[t]); \
        } else { \
          const __m256i total = _mm256_sub_epi32 (isum[t], _mm256_slli_epi32 (cs, 5)); \
          acc[t] = _mm256_fmadd_ps (_mm256_mul_ps (dv, dx), _mm256_cvtepi32_ps (total), acc[t]); \
        } \
      } \
    } \
    UNROLL for (int t = 0; t < RN; t++) \
      store_rows (acc[t], rm, y + t * ldy); \
  }

#define RL_TILES_4(M, pre, ...) \
  M (pre##_1, 1, __VA_ARGS__) M (pre##_2, 2, __VA_ARGS__) M (pre##_3, 3, __VA_ARGS__) \
  M (pre##_4, 4, __VA_ARGS__) \
  static const LlmRlTileFn pre[] = { pre##_1, pre##_2, pre##_3, pre##_4 };

#define Q4_0_RL_M(name, RN, unused) Q4_0_RL_TILE (name, RN)
#define K_RL_M(name, RN, S, C, HAS_MIN) K_RL_TILE (name, RN, S, C, HAS_MIN)

RL_TILES_4 (Q4_0_RL_M, rl_q4_0, 0)
RL_TILES_4 (K_RL_M, rl_q4_K, 8, 4, 1)
RL_TILES_4 (K_RL_M, rl_q5_K, 8, 4, 1)
RL_TILES_4 (K_RL_M, rl_q6_K, 16, 2, 0)

/* --- scratch ------------------------------------------------------------ */

/* The pool slot's, so it is bounded by the pool (threadpool.h). */
void *
llm_gemm_scratch (size_t bytes)
{
  return llm_threadpool_scratch (bytes);
}

static void
run_tiles (const TileFn *tiles, int RM, int RN, size_t n, const uint8_t *w, size_t rb,
    size_t r0, size_t r1, const uint8_t *x, size_t xs, size_t n_tok, float *y, size_t ldy)
{
  size_t tb = xs > 0 ? ACT_BUDGET / xs : n_tok;
  tb = tb / RN * RN;
  if (tb < (size_t) RN)
    tb = RN;
  for (size_t t0 = 0; t0 < n_tok; t0 += tb) {
    const size_t t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
    for (size_t r = r0; r < r1; r += RM) {
      const size_t rm = r1 - r < (size_t) RM ? r1 - r : (size_t) RM;
      Prefetch pf = prefetch_span (w + (r + RM) * rb, next_tile_rows (r, r1, RM) * rb,
          (t1 - t0 + RN - 1) / RN);
      for (size_t t = t0, rn; t < t1; t += rn) {
        rn = tile_tokens (t1 - t, RN);
        prefetch_step (&pf);
        tiles[(rm - 1) * RN + rn - 1] (n, w + r * rb, rb, x + t * xs, xs, y + t * ldy + r, ldy);
      }
    }
  }
}

static bool
gemm_tiles (const TileFn *tiles, int RM, int RN, size_t n, const void *w, size_t rb, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step)
{
  size_t ra = r0, rb_ = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb_, &first))
    run_tiles (tiles, RM, RN, n, w, rb, ra, rb_, xq, xs, n_tok, y, ldy);
  return true;
}

/* F16/BF16 activations widened to floats (exactly) first. */
static bool
gemm_wide (const TileFn *tiles, bool bf16, size_t n, const void *w, size_t rb, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step)
{
  /* Rows of the widened copy, padded to a whole cache line. */
  const size_t wxs = (n * sizeof (float) + 63) / 64 * 64;
  float *wide = llm_gemm_scratch (n_tok * wxs);
  if (wide == NULL)
    return false;
  for (size_t t = 0; t < n_tok; t++) {
    const uint8_t *h = (const uint8_t *) xq + t * xs;
    float *o = (float *) ((uint8_t *) wide + t * wxs);
    size_t i = 0;
    if (bf16) {
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps (o + i, wload_bf16 (h, i));
      for (; i < n; i++)
        o[i] = wscalar_bf16 (h, i);
    } else {
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps (o + i, wload_f16 (h, i));
      for (; i < n; i++)
        o[i] = wscalar_f16 (h, i);
    }
  }
  return gemm_tiles (tiles, 4, 3, n, w, rb, r0, r1, wide, wxs, n_tok, y, ldy, next, step);
}

bool
llm_gemm_rl (const LlmRlTileFn *tiles, int RN, int TR, LlmPackFn pack, size_t block_elems, size_t pb, bool q4_0,
    size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  const size_t nb = n / block_elems;
  const size_t packed_bytes = (nb * pb + 63) / 64 * 64;
  const size_t side = q4_0 ? n_tok * nb : 0;
  uint8_t *buf = llm_gemm_scratch (packed_bytes + side * (sizeof (float) + sizeof (int32_t)));
  if (buf == NULL)
    return false;
  uint8_t *packed = buf;
  float *dx = (float *) (buf + packed_bytes);
  int32_t *corr = (int32_t *) (dx + side);
  if (q4_0)
    llm_avx2_q4_0_act_side (xq, xs, n_tok, nb, dx, corr);

  size_t ra = r0, rb_ = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb_, &first)) {
    for (size_t r = ra; r < rb_; r += TR) {
      const int rm = rb_ - r < (size_t) TR ? (int) (rb_ - r) : TR;
      pack ((const uint8_t *) w + r * rb, rb, rm, nb, packed);
      Prefetch pf = prefetch_span ((const uint8_t *) w + (r + TR) * rb,
          next_tile_rows (r, rb_, TR) * rb, (n_tok + RN - 1) / RN);
      for (size_t t = 0, rn; t < n_tok; t += rn) {
        rn = tile_tokens (n_tok - t, RN);
        prefetch_step (&pf);
        tiles[rn - 1] (nb, packed, (const uint8_t *) xq + t * xs, xs, dx + t * nb,
            corr + t * nb, y + t * ldy + r, ldy, rm);
      }
    }
  }
  return true;
}

static bool
gemm_f32 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return gemm_tiles (tiles_f32, 1, 3, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

static bool
gemm_f16 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return gemm_wide (tiles_f16, false, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

static bool
gemm_bf16 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return gemm_wide (tiles_bf16, true, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

/* Per token and block: d_x. */
static void
q8_0_act_side (const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, float *dx)
{
  for (size_t t = 0; t < n_tok; t++) {
    const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xq + t * xs);
    for (size_t b = 0; b < nb; b++)
      dx[t * nb + b] = half_to_f32 (x[b].d);
  }
}

static bool
gemm_q8_0 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  enum { RM = 4, RN = 3 };
  const size_t nb = n / LLM_QK8_0;
  float *dx = llm_gemm_scratch (n_tok * nb * sizeof (float));
  if (dx == NULL)
    return false;
  q8_0_act_side (xq, xs, n_tok, nb, dx);

  /* Tokens per pass over a row tile: their activations stay in L2. */
  size_t tb = ACT_BUDGET / (xs + nb * sizeof (float)) / RN * RN;
  if (tb < RN)
    tb = RN;
  size_t ra = r0, rb_ = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb_, &first)) {
    for (size_t t0 = 0; t0 < n_tok; t0 += tb) {
      const size_t t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
      for (size_t r = ra; r < rb_; r += RM) {
        const size_t rm = rb_ - r < RM ? rb_ - r : RM;
        Prefetch pf = prefetch_span ((const uint8_t *) w + (r + RM) * rb,
            next_tile_rows (r, rb_, RM) * rb, (t1 - t0 + RN - 1) / RN);
        for (size_t t = t0, rn; t < t1; t += rn) {
          rn = tile_tokens (t1 - t, RN);
          prefetch_step (&pf);
          tiles_q8_0[(rm - 1) * RN + rn - 1] (nb, (const uint8_t *) w + r * rb, rb,
              (const uint8_t *) xq + t * xs, xs, dx + t * nb, y + t * ldy + r, ldy);
        }
      }
    }
  }
  return true;
}

static bool
gemm_q4_0 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return llm_gemm_rl (rl_q4_0, 4, Q4_0_ROWS, llm_avx2_pack_q4_0, LLM_QK4_0, Q4_0_PB, true, n, w, rb, r0, r1,
      xq, xs, n_tok, y, ldy, next, step);
}

#define K_RN 3
#define GEMM_K(type, S) \
  static bool \
  gemm_##type (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, \
      size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step) \
  { \
    return llm_gemm_rl (rl_##type, K_RN, RL, pack_##type, LLM_QK_K, K_PB (S), false, n, w, rb, r0, r1, \
        xq, xs, n_tok, y, ldy, next, step); \
  }

GEMM_K (q4_K, 8)
GEMM_K (q5_K, 8)
GEMM_K (q6_K, 16)

LlmGemmFn
llm_avx2_gemm_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_F32:
      return gemm_f32;
    case LLM_TYPE_F16:
      return gemm_f16;
    case LLM_TYPE_BF16:
      return gemm_bf16;
    case LLM_TYPE_Q8_0:
      return gemm_q8_0;
    case LLM_TYPE_Q4_0:
      return gemm_q4_0;
    case LLM_TYPE_Q4_K:
      return gemm_q4_K;
    case LLM_TYPE_Q5_K:
      return gemm_q5_K;
    case LLM_TYPE_Q6_K:
      return gemm_q6_K;
    default:
      return NULL;
  }
}
