/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 (F, BW, VL, DQ) with VNNI batched products (prefill) for the
 * 8-bit-activation types. Built with those instruction sets and reached
 * only through llm_avx512_gemm_fn() after matmul.c's CPU check.
 *
 * vpdpbusd multiplies unsigned by signed bytes and adds each group of 4
 * products into an int32 lane: one instruction for what AVX2 needs
 * vpmaddubsw, vpmaddwd and vpaddd for, over 64 bytes at once. The results
 * are bit-identical to gemm-avx2.c's (the same exact integer sums, the
 * same float operations in the same order):
 *
 * - Q8_0 keeps matvec's 8 partial lanes per output (lane j of a block sums
 *   values 4j..4j+3), two rows' lanes per vector. Signed weights are made
 *   unsigned by adding 128 (w ^ 0x80) and the accumulator starts at
 *   -128 * (that lane's sum of x), computed once per token. Q5_0, whose
 *   matvec (like llama.cpp's) has the same lanes and float steps, runs the
 *   same tiles on its rows unpacked to Q8_0 (q - 16) a tile at a time.
 *   AVX2 has no batched Q5_0 kernel (its four-token one is used).
 * - K-quants: see below.
 * - Q4_0 keeps the rows-in-lanes layout of gemm-avx2.c (16 rows a vector),
 *   each row's whole-block sum formed in its lane, starting from -8 * (sum
 *   of x) for the nibbles' offset. */
#include "gemm-avx512.h"

#include <immintrin.h>
#include <string.h>

#include "gemm-avx2.h"
#include "gemm-common.h"
#include "ggml-type.h"
#include "kquants.h"
#include "quantize.h"

#define UNROLL _Pragma ("GCC unroll 8")

INLINE __m512i
bcast4 (const int8_t *p)
{
  int32_t v;
  memcpy (&v, p, sizeof v);
  return _mm512_set1_epi32 (v);
}

/* --- Q4_0 -------------------------------------------------------------- */

/* Per block ((float) sumi * d_w) * d_x is added, as the scalar reference
 * dot_q4_0 does. */
#define Q4_0_Z_TILE(name, RN) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx, \
      const int32_t *corr, float *y, size_t ldy, int rm) \
  { \
    __m512 acc[RN]; \
    UNROLL for (int t = 0; t < RN; t++) \
      acc[t] = _mm512_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * Q4_0_PB; \
      __m512i s[RN]; \
      UNROLL for (int t = 0; t < RN; t++) \
        s[t] = _mm512_set1_epi32 (-corr[t * nb + b]); \
      UNROLL for (int i = 0; i < 8; i++) { \
        const __m512i wv = _mm512_loadu_si512 (pb + 64 * i); \
        UNROLL for (int t = 0; t < RN; t++) { \
          const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xb + t * xs) + b; \
          s[t] = _mm512_dpbusd_epi32 (s[t], wv, bcast4 (x->qs + 4 * i)); \
        } \
      } \
      const __m512 dw = _mm512_loadu_ps (pb + 512); \
      UNROLL for (int t = 0; t < RN; t++) \
        acc[t] = _mm512_add_ps (acc[t], _mm512_mul_ps (_mm512_mul_ps ( \
                _mm512_cvtepi32_ps (s[t]), dw), _mm512_set1_ps (dx[t * nb + b]))); \
    } \
    const __mmask16 m = (__mmask16) ((1u << rm) - 1); \
    UNROLL for (int t = 0; t < RN; t++) \
      _mm512_mask_storeu_ps (y + t * ldy, m, acc[t]); \
  }

#define Q4_0_Z_RN 8
Q4_0_Z_TILE (zq4_0_1, 1)
Q4_0_Z_TILE (zq4_0_2, 2)
Q4_0_Z_TILE (zq4_0_3, 3)
Q4_0_Z_TILE (zq4_0_4, 4)
Q4_0_Z_TILE (zq4_0_5, 5)
Q4_0_Z_TILE (zq4_0_6, 6)
Q4_0_Z_TILE (zq4_0_7, 7)
Q4_0_Z_TILE (zq4_0_8, 8)
static const LlmRlTileFn tiles_q4_0[Q4_0_Z_RN] = {
  zq4_0_1, zq4_0_2, zq4_0_3, zq4_0_4, zq4_0_5, zq4_0_6, zq4_0_7, zq4_0_8,
};

static bool
gemm_q4_0 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return llm_gemm_rl (tiles_q4_0, Q4_0_Z_RN, Q4_0_ROWS, llm_avx2_pack_q4_0, LLM_QK4_0, Q4_0_PB,
      true, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

/* --- K-quants ----------------------------------------------------------
 * gemm-avx2.c's 8-row packing (see K_PB in gemm-avx2.h) done for rows 0-7
 * and 8-15 of a 16-row tile, and every 32-byte vector of the two packs
 * laid side by side: the same layout at twice the offsets, one 64-byte
 * vector per part. Per run of one scale, vpdpbusd adds the run's groups
 * into int32 lanes, and one vpmulld applies the run's scale: the exact
 * integer sums of gemm-avx2.c's K-quant tiles, with the same float
 * operations after them, so the results are those tiles' bit for bit. */

#define KZ_ROWS 16

static void
zpack_k (LlmPackFn pack8, size_t kpb, size_t block_bytes, const uint8_t *w, size_t rb, int rm,
    size_t nb, uint8_t *out)
{
  uint8_t half[2][K_PB (16)] __attribute__ ((aligned (32)));
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *wb = w + b * block_bytes;
    pack8 (wb, rb, rm < 8 ? rm : 8, 1, half[0]);
    /* Rows past @rm are packed as zeros, so no row past it is read. */
    pack8 (rm > 8 ? wb + 8 * rb : wb, rb, rm - 8, 1, half[1]);
    uint8_t *o = out + b * 2 * kpb;
    for (size_t u = 0; u < kpb; u += 32) {
      memcpy (o + 2 * u, half[0] + u, 32);
      memcpy (o + 2 * u + 32, half[1] + u, 32);
    }
  }
}

#define ZPACK(type, S, BLOCK) \
  static void \
  zpack_##type (const uint8_t *w, size_t rb, int rm, size_t nb, uint8_t *out) \
  { \
    zpack_k (llm_avx2_k_pack_fn (LLM_TYPE_##type), K_PB (S), sizeof (BLOCK), w, rb, rm, nb, \
        out); \
  }

ZPACK (Q4_K, 8, LlmBlockQ4_K)
ZPACK (Q5_K, 8, LlmBlockQ5_K)
ZPACK (Q6_K, 16, LlmBlockQ6_K)

INLINE __m512i
zload (const uint8_t *p)
{
  return _mm512_load_si512 ((const void *) p);
}

/* S runs of one scale per super-block; Q4_K/Q5_K subtract dmin times the
 * mins' products with the bsums, Q6_K 32 times the scales' (its bias). */
#define K_Z_TILE(name, RN, S, HAS_MIN) \
  static void \
  name (size_t nb, const uint8_t *P, const uint8_t *xb, size_t xs, const float *dx_unused, \
      const int32_t *corr_unused, float *y, size_t ldy, int rm) \
  { \
    enum { G = 64 / (S) }; \
    (void) dx_unused; \
    (void) corr_unused; \
    __m512 acc[RN]; \
    UNROLL for (int t = 0; t < RN; t++) \
      acc[t] = _mm512_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * 2 * K_PB (S); \
      __m512i isum[RN]; \
      UNROLL for (int t = 0; t < RN; t++) \
        isum[t] = _mm512_setzero_si512 (); \
      for (int s = 0; s < (S); s++) { \
        /* Run s's scales: the low int16 of each row's dword, signed. */ \
        const __m512i sc = _mm512_srai_epi32 (_mm512_slli_epi32 ( \
                zload (pb + 2 * (K_SV + 32 * s)), 16), 16); \
        __m512i p[RN][2]; \
        UNROLL for (int t = 0; t < RN; t++) \
          p[t][0] = p[t][1] = _mm512_setzero_si512 (); \
        UNROLL for (int i = 0; i < G; i++) { \
          const int g = s * G + i; \
          const __m512i wv = zload (pb + 2 * (K_W + 32 * g)); \
          UNROLL for (int t = 0; t < RN; t++) { \
            const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xb + t * xs) + b; \
            p[t][i & 1] = _mm512_dpbusd_epi32 (p[t][i & 1], wv, bcast4 (x->qs + 4 * g)); \
          } \
        } \
        UNROLL for (int t = 0; t < RN; t++) \
          isum[t] = _mm512_add_epi32 (isum[t], _mm512_mullo_epi32 ( \
                  _mm512_add_epi32 (p[t][0], p[t][1]), sc)); \
      } \
      const __m512 dv = _mm512_load_ps (pb + 2 * K_D (S)); \
      const __m512 dminv = _mm512_load_ps (pb + 2 * (K_D (S) + 32)); \
      UNROLL for (int t = 0; t < RN; t++) { \
        const LlmBlockQ8_K *x = (const LlmBlockQ8_K *) (xb + t * xs) + b; \
        __m512i cs = _mm512_madd_epi16 (zload (pb + 2 * K_CV (S)), \
            bcast4 ((const int8_t *) x->bsums)); \
        UNROLL for (int k = 1; k < 8; k++) \
          cs = _mm512_add_epi32 (cs, _mm512_madd_epi16 (zload (pb + 2 * (K_CV (S) + 32 * k)), \
              bcast4 ((const int8_t *) (x->bsums + 2 * k)))); \
        const __m512 dx = _mm512_set1_ps (x->d); \
        if (HAS_MIN) { \
          acc[t] = _mm512_fmadd_ps (_mm512_mul_ps (dv, dx), _mm512_cvtepi32_ps (isum[t]), acc[t]); \
          acc[t] = _mm512_fnmadd_ps (_mm512_mul_ps (dminv, dx), _mm512_cvtepi32_ps (cs), acc[t]); \
        } else { \
          const __m512i total = _mm512_sub_epi32 (isum[t], _mm512_slli_epi32 (cs, 5)); \
          acc[t] = _mm512_fmadd_ps (_mm512_mul_ps (dv, dx), _mm512_cvtepi32_ps (total), acc[t]); \
        } \
      } \
    } \
    const __mmask16 m = (__mmask16) ((1u << rm) - 1); \
    UNROLL for (int t = 0; t < RN; t++) \
      _mm512_mask_storeu_ps (y + t * ldy, m, acc[t]); \
  }

#define KZ_RN 4
#define K_Z_TILES(pre, S, HAS_MIN) \
  K_Z_TILE (pre##_1, 1, S, HAS_MIN) K_Z_TILE (pre##_2, 2, S, HAS_MIN) \
  K_Z_TILE (pre##_3, 3, S, HAS_MIN) K_Z_TILE (pre##_4, 4, S, HAS_MIN) \
  static const LlmRlTileFn pre[KZ_RN] = { pre##_1, pre##_2, pre##_3, pre##_4 };

K_Z_TILES (tiles_q4_K, 8, 1)
K_Z_TILES (tiles_q5_K, 8, 1)
K_Z_TILES (tiles_q6_K, 16, 0)

#define GEMM_KZ(type, TYPE, S) \
  static bool \
  gemm_##type (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, \
      size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step) \
  { \
    return llm_gemm_rl (tiles_##type, KZ_RN, KZ_ROWS, zpack_##TYPE, LLM_QK_K, 2 * K_PB (S), \
        false, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step); \
  }

GEMM_KZ (q4_K, Q4_K, 8)
GEMM_KZ (q5_K, Q5_K, 8)
GEMM_KZ (q6_K, Q6_K, 16)

/* --- Q8_0 -------------------------------------------------------------- */

/* A token's activations as the tiles read them: the values of all blocks
 * back to back (@qs, n bytes), per 4 values -128 * their sum (@corr, n / 4
 * int32), and each block's d (@d). */
typedef struct {
  const int8_t *qs;
  const int32_t *corr;
  const float *d;
} Q8Acts;

static void
q8_0_act_side (const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, int8_t *qs, int32_t *corr,
    float *d)
{
  const __m256i k128 = _mm256_set1_epi8 ((char) 0x80);
  for (size_t t = 0; t < n_tok; t++) {
    const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xq + t * xs);
    int8_t *oq = qs + t * nb * LLM_QK8_0;
    int32_t *oc = corr + t * nb * (LLM_QK8_0 / 4);
    for (size_t b = 0; b < nb; b++) {
      const __m256i v = _mm256_loadu_si256 ((const __m256i *) x[b].qs);
      _mm256_storeu_si256 ((__m256i *) (oq + b * LLM_QK8_0), v);
      const __m256i s = _mm256_dpbusd_epi32 (_mm256_setzero_si256 (), k128, v);
      _mm256_storeu_si256 ((__m256i *) (oc + b * 8), _mm256_sub_epi32 (_mm256_setzero_si256 (), s));
      d[t * nb + b] = _cvtsh_ss (x[b].d);
    }
  }
}

typedef void (*Q8ZTileFn) (size_t nb, const uint8_t *w, size_t rb, int rm, const int8_t *qs,
    const int32_t *corr, const float *dx, float *y, size_t ldy);

/* NP pairs of rows x RN tokens. A vector holds one block of two rows: its
 * low half row 2k's 8 lanes, its high half row 2k + 1's, each half going
 * through exactly matvec's operations (d_w d_x rounded, then one FMA per
 * block). @rm (<= 2 NP) rows are valid; a missing last row repeats the
 * one before it and is not stored. */
/* Block @b of a row as 32 unsigned bytes (the signed values + 128), and
 * its d. */
INLINE __m256i
wbytes_q8_0 (const uint8_t *row, size_t b, uint16_t *d)
{
  const LlmBlockQ8_0 *blk = (const LlmBlockQ8_0 *) row + b;
  *d = blk->d;
  return _mm256_xor_si256 (_mm256_loadu_si256 ((const __m256i *) blk->qs),
      _mm256_set1_epi8 ((char) 0x80));
}

#define Q8_0_Z_TILE(name, NP, RN, WBYTES) \
  static void \
  name (size_t nb, const uint8_t *w, size_t rb, int rm, const int8_t *qs, const int32_t *corr, \
      const float *dx, float *y, size_t ldy) \
  { \
    const uint8_t *row[2 * (NP)]; \
    UNROLL for (int r = 0; r < 2 * (NP); r++) \
      row[r] = w + (r < rm ? r : rm - 1) * rb; \
    __m512 acc[NP][RN]; \
    UNROLL for (int k = 0; k < (NP); k++) \
      UNROLL for (int t = 0; t < RN; t++) \
        acc[k][t] = _mm512_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      __m512i wv[NP]; \
      __m512 dw[NP]; \
      UNROLL for (int k = 0; k < (NP); k++) { \
        uint16_t dlo, dhi; \
        const __m256i lo = WBYTES (row[2 * k], b, &dlo); \
        const __m256i hi = WBYTES (row[2 * k + 1], b, &dhi); \
        wv[k] = _mm512_inserti64x4 (_mm512_castsi256_si512 (lo), hi, 1); \
        dw[k] = _mm512_insertf32x8 (_mm512_set1_ps (_cvtsh_ss (dlo)), \
            _mm256_set1_ps (_cvtsh_ss (dhi)), 1); \
      } \
      UNROLL for (int t = 0; t < RN; t++) { \
        const size_t at = t * nb + b; \
        const __m512i xv = _mm512_broadcast_i64x4 (_mm256_loadu_si256 ((const __m256i *) \
                (qs + at * LLM_QK8_0))); \
        const __m512i cv = _mm512_broadcast_i64x4 (_mm256_loadu_si256 ((const __m256i *) \
                (corr + at * 8))); \
        const __m512 d = _mm512_set1_ps (dx[at]); \
        UNROLL for (int k = 0; k < (NP); k++) \
          acc[k][t] = _mm512_fmadd_ps (_mm512_mul_ps (dw[k], d), \
              _mm512_cvtepi32_ps (_mm512_dpbusd_epi32 (cv, wv[k], xv)), acc[k][t]); \
      } \
    } \
    UNROLL for (int k = 0; k < (NP); k++) \
      UNROLL for (int t = 0; t < RN; t++) { \
        y[t * ldy + 2 * k] = hsum_ps (_mm512_castps512_ps256 (acc[k][t])); \
        if (2 * k + 1 < rm) \
          y[t * ldy + 2 * k + 1] = hsum_ps (_mm512_extractf32x8_ps (acc[k][t], 1)); \
      } \
  }

#define Q8_NP 4
#define Q8_RM (2 * Q8_NP)
#define Q8_RN 4
#define Q8_PAIR_TILES(p, np, W) \
  Q8_0_Z_TILE (p##_##np##x1, np, 1, W) Q8_0_Z_TILE (p##_##np##x2, np, 2, W) \
  Q8_0_Z_TILE (p##_##np##x3, np, 3, W) Q8_0_Z_TILE (p##_##np##x4, np, 4, W)
/* [(pairs - 1) * Q8_RN + rn - 1] */
#define Q8_TILES(p, W) \
  Q8_PAIR_TILES (p, 1, W) Q8_PAIR_TILES (p, 2, W) Q8_PAIR_TILES (p, 3, W) \
  Q8_PAIR_TILES (p, 4, W) \
  static const Q8ZTileFn p[Q8_NP * Q8_RN] = { \
    p##_1x1, p##_1x2, p##_1x3, p##_1x4, p##_2x1, p##_2x2, p##_2x3, p##_2x4, \
    p##_3x1, p##_3x2, p##_3x3, p##_3x4, p##_4x1, p##_4x2, p##_4x3, p##_4x4, \
  };
Q8_TILES (tiles_q8_0, wbytes_q8_0)

/* @rm rows of Q5_0 blocks at @w (@rb bytes apart) as Q8_0 rows (values
 * q - 16, the same d) at @out, @nb blocks each: the Q8_0 tile then gives
 * Q5_0's matvec results, and unpacks each block once, not per token tile. */
static void
q5_0_to_q8_0 (const uint8_t *w, size_t rb, size_t rm, size_t nb, uint8_t *out)
{
  const __m256i off = _mm256_set1_epi8 (16);
  LlmBlockQ8_0 *o = (LlmBlockQ8_0 *) out;
  for (size_t r = 0; r < rm; r++) {
    const LlmBlockQ5_0 *blk = (const LlmBlockQ5_0 *) (w + r * rb);
    for (size_t b = 0; b < nb; b++, o++) {
      o->d = blk[b].d;
      _mm256_storeu_si256 ((__m256i *) o->qs,
          _mm256_sub_epi8 (vals_q5_0 ((const uint8_t *) &blk[b]), off));
    }
  }
}

typedef void (*ToQ8Fn) (const uint8_t *w, size_t rb, size_t rm, size_t nb, uint8_t *out);

/* Q8_0 tiles over the rows; with @to_q8, each tile's rows are unpacked to
 * Q8_0 first. */
static bool
gemm_lanes (ToQ8Fn to_q8, size_t n, const void *w, size_t rb, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step)
{
  const size_t nb = n / LLM_QK8_0;
  /* Per token: n value bytes, n correction bytes, 4 nb scale bytes. */
  const size_t per_tok = 2 * n + nb * sizeof (float);
  const size_t q8_rb = nb * sizeof (LlmBlockQ8_0);
  const size_t act_bytes = (n_tok * per_tok + 63) / 64 * 64;
  uint8_t *buf = llm_gemm_scratch (act_bytes + (to_q8 != NULL ? Q8_RM * q8_rb : 0));
  if (buf == NULL)
    return false;
  int8_t *qs = (int8_t *) buf;
  int32_t *corr = (int32_t *) (buf + n_tok * n);
  float *dx = (float *) (buf + 2 * n_tok * n);
  uint8_t *unpacked = buf + act_bytes;
  q8_0_act_side (xq, xs, n_tok, nb, qs, corr, dx);

  /* Tokens per pass over a row tile: their activations stay in L2. */
  size_t tb = ACT_BUDGET / per_tok / Q8_RN * Q8_RN;
  if (tb < Q8_RN)
    tb = Q8_RN;
  size_t ra = r0, rb_ = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb_, &first)) {
    for (size_t t0 = 0; t0 < n_tok; t0 += tb) {
      const size_t t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
      for (size_t r = ra; r < rb_; r += Q8_RM) {
        const size_t rm = rb_ - r < Q8_RM ? rb_ - r : Q8_RM;
        Prefetch pf = prefetch_span ((const uint8_t *) w + (r + Q8_RM) * rb,
            next_tile_rows (r, rb_, Q8_RM) * rb, (t1 - t0 + Q8_RN - 1) / Q8_RN);
        const uint8_t *rows = (const uint8_t *) w + r * rb;
        size_t row_bytes = rb;
        if (to_q8 != NULL) {
          to_q8 (rows, rb, rm, nb, unpacked);
          rows = unpacked;
          row_bytes = q8_rb;
        }
        for (size_t t = t0, rn; t < t1; t += rn) {
          rn = tile_tokens (t1 - t, Q8_RN);
          prefetch_step (&pf);
          tiles_q8_0[(rm + 1) / 2 * Q8_RN - Q8_RN + rn - 1] (nb, rows, row_bytes, (int) rm,
              qs + t * n, corr + t * (n / 4), dx + t * nb, y + t * ldy + r, ldy);
        }
      }
    }
  }
  return true;
}

static bool
gemm_q8_0 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return gemm_lanes (NULL, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

static bool
gemm_q5_0 (size_t n, const void *w, size_t rb, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step)
{
  return gemm_lanes (q5_0_to_q8_0, n, w, rb, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

LlmGemmFn
llm_avx512_gemm_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_Q8_0:
      return gemm_q8_0;
    case LLM_TYPE_Q4_0:
      return gemm_q4_0;
    case LLM_TYPE_Q5_0:
      return gemm_q5_0;
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
