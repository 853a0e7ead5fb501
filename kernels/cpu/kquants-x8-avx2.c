/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C kernels over the packed K-quant layout (kquants-x8.h).
 * Built with -mavx2 -mfma -mf16c and reached only through
 * llm_avx2_kx8_fn() after the caller's CPU check.
 *
 * A 256-bit vector holds 4 values of each of 8 rows, one row per 32-bit
 * lane. One token takes both 8-row halves of a 16-row tile in one pass,
 * so the tile is read as one stream; batches take the halves one after
 * the other (the second half's bytes are then in L1), as the 16 registers
 * hold the accumulators of 2 to 4 tokens for 8 rows. Per run of one
 * scale:
 * - with AVX-VNNI (where the CPU has it), vpdpbusd adds value x activation
 *   over the run's groups of 4 into each row's lane and vpmulld applies
 *   the rows' scales: 8 (Q6_K 4) multiplies and one vpmulld per run;
 * - without, vpmaddubsw forms pair sums in int16, as many groups are added
 *   in int16 as cannot overflow (Q4_K 8, Q5_K 4, Q6_K 2: pair sums are at
 *   most 2 * vmax * 127), and one vpmaddwd per such chunk applies the
 *   scales.
 * Either way the integer sums are exact and the float steps are the
 * header's, so both give the AVX-512 kernels' and the scalar reference's
 * results bit for bit. Per 16-row super-block and token that is 128
 * multiplies of 32 bytes with VNNI (at 2 a cycle, 64 cycles; measured
 * about 100 for Q4_K batches, 125-130 for Q5_K and Q6_K).
 *
 * Batches that take a row tile in several token tiles first unpack it
 * once (KxUnpacked: Q5_K and Q6_K from 5 tokens, Q4_K from 64), so the
 * values are made once per row tile, not once per 2-4 tokens. */
#include "kquants-x8.h"
#include "kquants-x8-simd.h"
#include "isa.h"

#include <immintrin.h>
#include <string.h>

#define UNROLL _Pragma ("GCC unroll 16")

/* The AVX-VNNI instructions as asm (VEX-encoded), so this file needs no
 * -mavxvnni; they run only where avx_vnni () found them. */
INLINE __m256i
dpbusd (__m256i acc, __m256i u, __m256i s)
{
  __asm__ ("%{vex%} vpdpbusd %2, %1, %0" : "+x" (acc) : "x" (u), "x" (s));
  return acc;
}

INLINE __m256i
dpwssd (__m256i acc, __m256i a, __m256i b)
{
  __asm__ ("%{vex%} vpdpwssd %2, %1, %0" : "+x" (acc) : "x" (a), "x" (b));
  return acc;
}

INLINE __m256i
load (const uint8_t *p)
{
  return _mm256_loadu_si256 ((const __m256i *) p);
}

INLINE __m256i
bcast4 (const void *p)
{
  int32_t v;
  memcpy (&v, p, sizeof v);
  return _mm256_set1_epi32 (v);
}

/* 8 bytes at @p zero- (or sign-) extended, each to both int16 halves of
 * its dword: one row's scale against both pair sums of vpmaddubsw. */
INLINE __m256i
scale_pairs (const uint8_t *p, bool sign)
{
  const __m128i v = _mm_loadl_epi64 ((const __m128i *) p);
  const __m128i twice = _mm_unpacklo_epi8 (v, v);
  return sign ? _mm256_cvtepi8_epi16 (twice) : _mm256_cvtepu8_epi16 (twice);
}

/* The same 8 bytes, one to a dword, for vpmulld. */
INLINE __m256i
scale_dwords (const uint8_t *p, bool sign)
{
  const __m128i v = _mm_loadl_epi64 ((const __m128i *) p);
  return sign ? _mm256_cvtepi8_epi32 (v) : _mm256_cvtepu8_epi32 (v);
}

/* Bit @bit of every byte moved to bit 4 (see kquants-x8-avx512.c). */
INLINE __m256i
to_bit4 (__m256i v, int bit)
{
  if (bit < 4)
    return _mm256_slli_epi16 (v, 4 - bit);
  if (bit > 4)
    return _mm256_srli_epi16 (v, bit - 4);
  return v;
}

INLINE void
store_rows (__m256 v, int rm, float *y)
{
  if (rm >= 8) {
    _mm256_storeu_ps (y, v);
  } else {
    float tmp[8];
    _mm256_storeu_ps (tmp, v);
    for (int r = 0; r < rm; r++)
      y[r] = tmp[r];
  }
}

/* Makes @v exist here (see kquants-x8-avx512.c: without it GCC sinks
 * every run's scaling to the end of the super-block and spills). */
#define KEEP(v) __asm__ ("" : "+x" (v))

/* isum[t] += run[t] times the rows' scales: @sc as int32 lanes (VNNI's
 * run sums), or @sp as int16 pairs against int16 pair sums, which then
 * start again from zero. t < RN. */
#define ADD_RUN_SCALED(RN, isum, run, sc) \
  UNROLL for (int t = 0; t < (RN); t++) { \
    isum[t] = _mm256_add_epi32 (isum[t], _mm256_mullo_epi32 ((run)[t], (sc))); \
    KEEP (isum[t]); \
  }
#define ADD_PAIRS_SCALED(RN, isum, run, sp) \
  UNROLL for (int t = 0; t < (RN); t++) { \
    isum[t] = _mm256_add_epi32 (isum[t], _mm256_madd_epi16 ((run)[t], (sp))); \
    KEEP (isum[t]); \
    (run)[t] = _mm256_setzero_si256 (); \
  }

#define XQ(t) ((const LlmBlockQ8_K *) (xq + (t) * xs) + b)
#define SIDE(t) ((const KxSide *) (side + b * sstride + (t) * KX_SIDE_BYTES (Q6)))

/* One group's products added to int16 pair sums, kept in that order:
 * GCC otherwise hoists a pass's vpmaddubsw above the adds and spills the
 * products (the 4-token Q4_K tile had 834 stack references). */
INLINE __m256i
group_add16 (__m256i run, __m256i v, __m256i x)
{
  run = _mm256_add_epi16 (run, _mm256_maddubs_epi16 (v, x));
  KEEP (run);
  return run;
}

/* Adds one group's products to a run's sum: into int32 lanes with VNNI,
 * into int16 pair sums without. */
#define GROUP_ADD(VNNI, run, v, x) \
  ((VNNI) ? dpbusd ((run), (v), (x)) : group_add16 ((run), (v), (x)))

/* Value vector @h (0: low nibbles, 1: high) of chunk @j's unit whose
 * codes are @raw, with Q5_K's fifth bits from @qh. */
INLINE __m256i
k4_values (__m256i raw, __m256i qh, bool q5, int j, int h, __m256i m4, __m256i m10)
{
  const __m256i v = _mm256_and_si256 (h ? _mm256_srli_epi16 (raw, 4) : raw, m4);
  return q5 ? _mm256_or_si256 (v, _mm256_and_si256 (to_bit4 (qh, 2 * j + h), m10)) : v;
}

/* Q4_K / Q5_K, RN tokens, halves hf0 .. hf0 + NF - 1 of the tile (NF = 2
 * reads the tile as one stream, which decode wants). A pass takes NJ
 * chunks of 8 units and NH (1 or 2: the two nibbles of a unit) of their
 * runs, so a token has NF x NJ x NH independent chains of multiplies; C
 * groups go to an int16 sum without VNNI. One token takes NJ = 1: its
 * pass then reads the codes in address order, not as two streams 512
 * bytes apart. From DRAM that is faster: on Zen 3, taking turns in one
 * process over 104 MB, Q4_K 1.13-1.18x and Q5_K 1.09-1.13x on one thread
 * and two; 8 chains (NJ = 2) are faster only with the matrix in cache
 * (1.1-1.25x in L3), where a decode step's weights never are. */
#define K4_PASS(name, RN, NF, NJ, NH, Q5, VNNI, U) \
  INLINE void \
  name (KX_TILE_ARGS, int hf0) \
  { \
    enum { Q6 = 0, C = (Q5) ? 4 : 8, SC = (U) ? KXU_SC : KX_SC (Q5), \
      MN = (U) ? KXU_MN : KX_MN (Q5), D = (U) ? KXU_D : KX_D (Q5), \
      TB = (U) ? KXU_TB : KX_TB (Q5) }; \
    const __m256i m4 = _mm256_set1_epi8 (0x0f), m10 = _mm256_set1_epi8 (0x10); \
    __m256 acc[NF][RN]; \
    UNROLL for (int f = 0; f < (NF); f++) \
      UNROLL for (int t = 0; t < (RN); t++) \
        acc[f][t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * TB; \
      __m256i isum[NF][RN]; \
      UNROLL for (int f = 0; f < (NF); f++) \
        UNROLL for (int t = 0; t < (RN); t++) \
          isum[f][t] = _mm256_setzero_si256 (); \
      int step = 0; \
      UNROLL for (int j0 = 0; j0 < 4; j0 += (NJ)) { \
        UNROLL for (int h0 = 0; h0 < 2; h0 += (NH)) { \
          __m256i run[NF][NJ][NH][RN]; \
          UNROLL for (int f = 0; f < (NF); f++) \
            UNROLL for (int a = 0; a < (NJ); a++) \
              UNROLL for (int e = 0; e < (NH); e++) \
                UNROLL for (int t = 0; t < (RN); t++) \
                  run[f][a][e][t] = _mm256_setzero_si256 (); \
          UNROLL for (int i = 0; i < 8; i++) { \
            if (!(U) && pf) \
              prefetch_share (pb + pf, TB, step, KX4_STEPS (NJ, NH)); \
            step++; \
            UNROLL for (int f = 0; f < (NF); f++) { \
              const int hf = hf0 + f; \
              const uint8_t *sc_at = pb + SC + 8 * hf; \
              __m256i qh = m4; \
              if ((Q5) && !(U)) \
                qh = load (pb + KX_QH + 64 * i + 32 * hf); \
              UNROLL for (int a = 0; a < (NJ); a++) { \
                const int j = j0 + a; \
                const __m256i raw = (U) ? m4 : load (pb + KX_QS + 64 * (8 * j + i) + 32 * hf); \
                UNROLL for (int e = 0; e < (NH); e++) { \
                  const int h = h0 + e; \
                  const __m256i v = (U) ? load (pb + KXU_V (j, i, h) + 32 * hf) \
                      : k4_values (raw, qh, Q5, j, h, m4, m10); \
                  UNROLL for (int t = 0; t < (RN); t++) \
                    run[f][a][e][t] = GROUP_ADD (VNNI, run[f][a][e][t], v, \
                        bcast4 (XQ (t)->qs + 64 * j + 32 * h + 4 * i)); \
                  if (!(VNNI) && (i + 1) % C == 0) { \
                    const __m256i sp = scale_pairs (sc_at + 16 * (2 * j + h), false); \
                    ADD_PAIRS_SCALED (RN, isum[f], run[f][a][e], sp); \
                  } \
                } \
              } \
            } \
          } \
          if (VNNI) { \
            UNROLL for (int f = 0; f < (NF); f++) \
              UNROLL for (int a = 0; a < (NJ); a++) \
                UNROLL for (int e = 0; e < (NH); e++) { \
                  const __m256i sc = scale_dwords (pb + SC + 8 * (hf0 + f) \
                      + 16 * (2 * (j0 + a) + h0 + e), false); \
                  ADD_RUN_SCALED (RN, isum[f], run[f][a][e], sc); \
                } \
          } \
        } \
      } \
      UNROLL for (int f = 0; f < (NF); f++) { \
        const int hf = hf0 + f; \
        __m256i msum[RN]; \
        UNROLL for (int t = 0; t < (RN); t++) \
          msum[t] = _mm256_setzero_si256 (); \
        UNROLL for (int k = 0; k < 4; k++) { \
          const __m256i mk = _mm256_cvtepu8_epi16 (_mm_loadu_si128 ((const __m128i *) \
                  (pb + MN + 32 * k + 16 * hf))); \
          UNROLL for (int t = 0; t < (RN); t++) { \
            const __m256i xk = bcast4 (SIDE (t)->run32 + 2 * k); \
            msum[t] = (VNNI) ? dpwssd (msum[t], mk, xk) \
                : _mm256_add_epi32 (msum[t], _mm256_madd_epi16 (mk, xk)); \
          } \
        } \
        const __m256 dv = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) \
                (pb + D + 16 * hf))); \
        const __m256 dmv = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) \
                (pb + D + 32 + 16 * hf))); \
        UNROLL for (int t = 0; t < (RN); t++) { \
          const __m256 dx = _mm256_set1_ps (XQ (t)->d); \
          acc[f][t] = _mm256_fmadd_ps (_mm256_mul_ps (dv, dx), \
              _mm256_cvtepi32_ps (isum[f][t]), acc[f][t]); \
          acc[f][t] = _mm256_fnmadd_ps (_mm256_mul_ps (dmv, dx), \
              _mm256_cvtepi32_ps (msum[t]), acc[f][t]); \
        } \
      } \
    } \
    UNROLL for (int f = 0; f < (NF); f++) \
      UNROLL for (int t = 0; t < (RN); t++) \
        store_rows (acc[f][t], rm - 8 * (hf0 + f), y + t * ldy + 8 * (hf0 + f)); \
  }

/* Q6_K value vector @q (0..3: A low, B low, A high, B high nibbles) of a
 * unit, with its top 2 bits from @hb at bits 4-5. */
INLINE __m256i
q6_values (int q, __m256i a, __m256i bq, __m256i hb, __m256i m4, __m256i m30)
{
  const __m256i src = q % 2 == 0 ? a : bq;
  const __m256i low = _mm256_and_si256 (q < 2 ? src : _mm256_srli_epi16 (src, 4), m4);
  const __m256i top = q == 0 ? _mm256_slli_epi16 (hb, 4) : q == 1 ? _mm256_slli_epi16 (hb, 2)
      : q == 2 ? hb : _mm256_srli_epi16 (hb, 2);
  return _mm256_or_si256 (low, _mm256_and_si256 (top, m30));
}

/* Q6_K, RN tokens, halves hf0 .. hf0 + NF - 1: a pass takes NC columns
 * (units 8 h + 4 c .. + 3) and NQ of the four runs that share them. With
 * VNNI a run's sum starts at -32 times its activation sum (the side
 * table); without, the int16 pair sums cannot take that, so 32 * sum_s
 * sc_s * bsum_s is taken off at the end. With U it reads the tile as
 * q6_unpack() leaves it (KX6U_*), its values ready, and never prefetches
 * (kx_drive passes no distance to the unpacked tiles): the prefetch test
 * that the unrolling repeats at every step is left out of those passes
 * at compile time, 14-28% of their instructions (q6u_K_4: 3614 to 3119;
 * the same for the unpacked K4 passes). On Zen 3 their time did not move
 * measurably (hot 1024 x 2816, 16 tokens, 4 runs of each binary taking
 * turns, within the runs' spread of 0.7 to 1.2 ms). */
#define Q6_PASS(name, RN, NF, NC, NQ, VNNI, U) \
  INLINE void \
  name (KX_TILE_ARGS, int hf0) \
  { \
    enum { Q6 = 1, SC = (U) ? KX6U_SC : KX6_SC, D = (U) ? KX6U_D : KX6_D, \
      TB = (U) ? KX6U_TB : KX6_TB }; \
    const __m256i m4 = _mm256_set1_epi8 (0x0f), m30 = _mm256_set1_epi8 (0x30); \
    __m256 acc[NF][RN]; \
    UNROLL for (int f = 0; f < (NF); f++) \
      UNROLL for (int t = 0; t < (RN); t++) \
        acc[f][t] = _mm256_setzero_ps (); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * TB; \
      __m256i isum[NF][RN]; \
      UNROLL for (int f = 0; f < (NF); f++) \
        UNROLL for (int t = 0; t < (RN); t++) \
          isum[f][t] = _mm256_setzero_si256 (); \
      int step = 0; \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int c0 = 0; c0 < 2; c0 += (NC)) \
          UNROLL for (int q0 = 0; q0 < 4; q0 += (NQ)) { \
            __m256i run[NF][NC][NQ][RN]; \
            UNROLL for (int f = 0; f < (NF); f++) \
              UNROLL for (int a = 0; a < (NC); a++) \
                UNROLL for (int e = 0; e < (NQ); e++) \
                  UNROLL for (int t = 0; t < (RN); t++) \
                    run[f][a][e][t] = (VNNI) \
                        ? bcast4 (SIDE (t)->neg32 + 8 * h + 2 * (q0 + e) + c0 + a) \
                        : _mm256_setzero_si256 (); \
            UNROLL for (int i0 = 0; i0 < 4; i0++) { \
              if (!(U) && pf) \
                prefetch_share (pb + pf, TB, step, KX6_STEPS (NC, NQ)); \
              step++; \
              UNROLL for (int f = 0; f < (NF); f++) \
                UNROLL for (int a = 0; a < (NC); a++) { \
                  const int i = 4 * (c0 + a) + i0, hf = hf0 + f; \
                  const uint8_t *unit = pb + 192 * (8 * h + i) + 32 * hf; \
                  __m256i ua = m4, ub = m4, uh = m4; \
                  if (!(U)) { \
                    ua = load (unit); \
                    ub = load (unit + 64); \
                    uh = load (unit + 128); \
                  } \
                  UNROLL for (int e = 0; e < (NQ); e++) { \
                    const int q = q0 + e, s = 8 * h + 2 * q + c0 + a; \
                    const __m256i v = (U) ? load (pb + KX6U_V (h, i, q) + 32 * hf) \
                        : q6_values (q, ua, ub, uh, m4, m30); \
                    UNROLL for (int t = 0; t < (RN); t++) \
                      run[f][a][e][t] = GROUP_ADD (VNNI, run[f][a][e][t], v, \
                          bcast4 (XQ (t)->qs + 128 * h + 32 * q + 4 * i)); \
                    if (!(VNNI) && i0 % 2 == 1) { \
                      const __m256i sp = scale_pairs (pb + SC + 8 * hf + 16 * s, true); \
                      ADD_PAIRS_SCALED (RN, isum[f], run[f][a][e], sp); \
                    } \
                  } \
                } \
            } \
            if (VNNI) { \
              UNROLL for (int f = 0; f < (NF); f++) \
                UNROLL for (int a = 0; a < (NC); a++) \
                  UNROLL for (int e = 0; e < (NQ); e++) { \
                    const __m256i sc = scale_dwords (pb + SC + 8 * (hf0 + f) \
                        + 16 * (8 * h + 2 * (q0 + e) + c0 + a), true); \
                    ADD_RUN_SCALED (RN, isum[f], run[f][a][e], sc); \
                  } \
            } \
          } \
      UNROLL for (int f = 0; f < (NF); f++) { \
        const uint8_t *sc_at = pb + SC + 8 * (hf0 + f); \
        if (!(VNNI)) { \
          UNROLL for (int k = 0; k < 8; k++) { \
            const __m256i sp = _mm256_cvtepi8_epi16 (_mm_unpacklo_epi8 ( \
                    _mm_loadl_epi64 ((const __m128i *) (sc_at + 32 * k)), \
                    _mm_loadl_epi64 ((const __m128i *) (sc_at + 32 * k + 16)))); \
            UNROLL for (int t = 0; t < (RN); t++) { \
              isum[f][t] = _mm256_sub_epi32 (isum[f][t], _mm256_slli_epi32 ( \
                      _mm256_madd_epi16 (sp, bcast4 (XQ (t)->bsums + 2 * k)), 5)); \
              KEEP (isum[f][t]); \
            } \
          } \
        } \
        const __m256 dv = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) \
                (pb + D + 16 * (hf0 + f)))); \
        UNROLL for (int t = 0; t < (RN); t++) \
          acc[f][t] = _mm256_fmadd_ps (_mm256_mul_ps (dv, _mm256_set1_ps (XQ (t)->d)), \
              _mm256_cvtepi32_ps (isum[f][t]), acc[f][t]); \
      } \
    } \
    UNROLL for (int f = 0; f < (NF); f++) \
      UNROLL for (int t = 0; t < (RN); t++) \
        store_rows (acc[f][t], rm - 8 * (hf0 + f), y + t * ldy + 8 * (hf0 + f)); \
  }

/* The @nb super-blocks of a Q6_K row tile at @P as the U passes read them
 * (KX6U_*): each value vector made once, not once per token tile; the
 * lines @pf further on are fetched meanwhile. */
static void
q6_unpack (size_t nb, const uint8_t *P, uint8_t *out, size_t pf)
{
  const __m256i m4 = _mm256_set1_epi8 (0x0f), m30 = _mm256_set1_epi8 (0x30);
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = P + b * KX6_TB;
    uint8_t *ub = out + b * KX6U_TB;
    for (int u = 0; u < 16; u++) {
      prefetch_share (pb + pf, KX6_TB, u, 16);
      for (int hf = 0; hf < 2; hf++) {
        const uint8_t *unit = pb + 192 * u + 32 * hf;
        const __m256i ua = load (unit), ubq = load (unit + 64), uh = load (unit + 128);
        UNROLL for (int q = 0; q < 4; q++)
          _mm256_store_si256 ((__m256i *) (ub + KX6U_V (u / 8, u % 8, q) + 32 * hf),
              q6_values (q, ua, ubq, uh, m4, m30));
      }
    }
    memcpy (ub + KX6U_SC, pb + KX6_SC, KX6U_D + 32 - KX6U_SC);
  }
}

/* The same for Q4_K (@q5 false) and Q5_K (KXU_*). Q5_K's values are 5
 * bits, made from the codes and the fifth bits in 3-4 operations each,
 * and its packed tiles, 2 tokens at a time, remade them for every 2. */
INLINE void
k4_unpack (size_t nb, const uint8_t *P, uint8_t *out, size_t pf, bool q5)
{
  const __m256i m4 = _mm256_set1_epi8 (0x0f), m10 = _mm256_set1_epi8 (0x10);
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = P + b * KX_TB (q5);
    uint8_t *ub = out + b * KXU_TB;
    for (int i = 0; i < 8; i++) {
      prefetch_share (pb + pf, KX_TB (q5), i, 8);
      for (int hf = 0; hf < 2; hf++) {
        const __m256i qh = q5 ? load (pb + KX_QH + 64 * i + 32 * hf) : m4;
        UNROLL for (int j = 0; j < 4; j++) {
          const __m256i raw = load (pb + KX_QS + 64 * (8 * j + i) + 32 * hf);
          UNROLL for (int h = 0; h < 2; h++)
            _mm256_store_si256 ((__m256i *) (ub + KXU_V (j, i, h) + 32 * hf),
                k4_values (raw, qh, q5, j, h, m4, m10));
        }
      }
    }
    memcpy (ub + KXU_SC, pb + KX_SC (q5), KXU_TB - KXU_SC);
  }
}

static void
q4_unpack (size_t nb, const uint8_t *P, uint8_t *out, size_t pf)
{
  k4_unpack (nb, P, out, pf, false);
}

static void
q5_unpack (size_t nb, const uint8_t *P, uint8_t *out, size_t pf)
{
  k4_unpack (nb, P, out, pf, true);
}

/* A whole 16-row tile: one pass over both halves (NF = 2), or a pass per
 * half that holds rows. When the tile prefetches (its first token tile),
 * the second half's pass prefetches the next tile: it reads only what the
 * first pass brought in, and memory would otherwise stand idle. */
#define TILE(name, pass, NF, TB) \
  static void \
  name (KX_TILE_ARGS) \
  { \
    pass (nb, P, xq, xs, side, sstride, y, ldy, rm, pf, 0); \
    if ((NF) == 1 && rm > 8) \
      pass (nb, P, xq, xs, side, sstride, y, ldy, rm, pf ? NEXT_PF (nb * (TB)) : 0, 1); \
  }
#ifndef NEXT_PF
#define NEXT_PF(tile) (tile)
#endif

#define ARN 4
/* One variant (VNNI or not) of every type: tiles for 1..4 tokens. One
 * token takes both halves in one pass (a single stream through memory);
 * more take a half at a time. */
#define VARIANT(sfx, VNNI) \
  K4_PASS (q4_K_p1##sfx, 1, 2, 1, 2, 0, VNNI, 0) K4_PASS (q4_K_p2##sfx, 2, 1, 1, 2, 0, VNNI, 0) \
  K4_PASS (q4_K_p3##sfx, 3, 1, 1, 1, 0, VNNI, 0) K4_PASS (q4_K_p4##sfx, 4, 1, 1, 1, 0, VNNI, 0) \
  K4_PASS (q5_K_p1##sfx, 1, 2, 1, 2, 1, VNNI, 0) K4_PASS (q5_K_p2##sfx, 2, 1, 1, 2, 1, VNNI, 0) \
  K4_PASS (q5_K_p3##sfx, 3, 1, 1, 1, 1, VNNI, 0) K4_PASS (q5_K_p4##sfx, 4, 1, 1, 1, 1, VNNI, 0) \
  K4_PASS (q4u_K_p1##sfx, 1, 1, 1, 2, 0, VNNI, 1) K4_PASS (q4u_K_p2##sfx, 2, 1, 1, 2, 0, VNNI, 1) \
  K4_PASS (q4u_K_p3##sfx, 3, 1, 1, 1, 0, VNNI, 1) K4_PASS (q4u_K_p4##sfx, 4, 1, 1, 1, 0, VNNI, 1) \
  K4_PASS (q5u_K_p1##sfx, 1, 1, 1, 2, 1, VNNI, 1) K4_PASS (q5u_K_p2##sfx, 2, 1, 1, 2, 1, VNNI, 1) \
  K4_PASS (q5u_K_p3##sfx, 3, 1, 1, 1, 1, VNNI, 1) K4_PASS (q5u_K_p4##sfx, 4, 1, 1, 1, 1, VNNI, 1) \
  Q6_PASS (q6_K_p1##sfx, 1, 2, 1, 4, VNNI, 0) Q6_PASS (q6_K_p2##sfx, 2, 1, 1, 2, VNNI, 0) \
  Q6_PASS (q6_K_p3##sfx, 3, 1, 1, 1, VNNI, 0) Q6_PASS (q6_K_p4##sfx, 4, 1, 1, 1, VNNI, 0) \
  Q6_PASS (q6u_K_p1##sfx, 1, 1, 1, 2, VNNI, 1) Q6_PASS (q6u_K_p2##sfx, 2, 1, 1, 2, VNNI, 1) \
  Q6_PASS (q6u_K_p3##sfx, 3, 1, 1, 1, VNNI, 1) Q6_PASS (q6u_K_p4##sfx, 4, 1, 1, 1, VNNI, 1) \
  TILE (q4_K_1##sfx, q4_K_p1##sfx, 2, KX_TB (0)) TILE (q4_K_2##sfx, q4_K_p2##sfx, 1, KX_TB (0)) \
  TILE (q4_K_3##sfx, q4_K_p3##sfx, 1, KX_TB (0)) TILE (q4_K_4##sfx, q4_K_p4##sfx, 1, KX_TB (0)) \
  TILE (q5_K_1##sfx, q5_K_p1##sfx, 2, KX_TB (1)) TILE (q5_K_2##sfx, q5_K_p2##sfx, 1, KX_TB (1)) \
  TILE (q5_K_3##sfx, q5_K_p3##sfx, 1, KX_TB (1)) TILE (q5_K_4##sfx, q5_K_p4##sfx, 1, KX_TB (1)) \
  TILE (q4u_K_1##sfx, q4u_K_p1##sfx, 1, KXU_TB) TILE (q4u_K_2##sfx, q4u_K_p2##sfx, 1, KXU_TB) \
  TILE (q4u_K_3##sfx, q4u_K_p3##sfx, 1, KXU_TB) TILE (q4u_K_4##sfx, q4u_K_p4##sfx, 1, KXU_TB) \
  TILE (q5u_K_1##sfx, q5u_K_p1##sfx, 1, KXU_TB) TILE (q5u_K_2##sfx, q5u_K_p2##sfx, 1, KXU_TB) \
  TILE (q5u_K_3##sfx, q5u_K_p3##sfx, 1, KXU_TB) TILE (q5u_K_4##sfx, q5u_K_p4##sfx, 1, KXU_TB) \
  TILE (q6_K_1##sfx, q6_K_p1##sfx, 2, KX6_TB) TILE (q6_K_2##sfx, q6_K_p2##sfx, 1, KX6_TB) \
  TILE (q6_K_3##sfx, q6_K_p3##sfx, 1, KX6_TB) TILE (q6_K_4##sfx, q6_K_p4##sfx, 1, KX6_TB) \
  TILE (q6u_K_1##sfx, q6u_K_p1##sfx, 1, KX6U_TB) TILE (q6u_K_2##sfx, q6u_K_p2##sfx, 1, KX6U_TB) \
  TILE (q6u_K_3##sfx, q6u_K_p3##sfx, 1, KX6U_TB) TILE (q6u_K_4##sfx, q6u_K_p4##sfx, 1, KX6U_TB) \
  static const KxTileFn tiles_q4_K##sfx[ARN] = { q4_K_1##sfx, q4_K_2##sfx, q4_K_3##sfx, \
    q4_K_4##sfx }; \
  static const KxTileFn tiles_q5_K##sfx[ARN] = { q5_K_1##sfx, q5_K_2##sfx, q5_K_3##sfx, \
    q5_K_4##sfx }; \
  static const KxTileFn tiles_q6_K##sfx[ARN] = { q6_K_1##sfx, q6_K_2##sfx, q6_K_3##sfx, \
    q6_K_4##sfx }; \
  static const KxTileFn tiles_q6u_K##sfx[ARN] = { q6u_K_1##sfx, q6u_K_2##sfx, q6u_K_3##sfx, \
    q6u_K_4##sfx }; \
  static const KxTileFn tiles_q4u_K##sfx[ARN] = { q4u_K_1##sfx, q4u_K_2##sfx, q4u_K_3##sfx, \
    q4u_K_4##sfx }; \
  static const KxUnpacked unpacked_q4_K##sfx = { q4_unpack, tiles_q4u_K##sfx, RN_Q4##sfx, \
    KXU_TB, UNPACK_MIN_Q4 }; \
  static const KxTileFn tiles_q5u_K##sfx[ARN] = { q5u_K_1##sfx, q5u_K_2##sfx, q5u_K_3##sfx, \
    q5u_K_4##sfx }; \
  static const KxUnpacked unpacked_q5_K##sfx = { q5_unpack, tiles_q5u_K##sfx, RNU_Q5, \
    KXU_TB, 0 }; \
  static const KxUnpacked unpacked_q6_K##sfx = { q6_unpack, tiles_q6u_K##sfx, RN_Q6##sfx, \
    KX6U_TB, 0 }; \
  ENTRY (q4_K##sfx, &unpacked_q4_K##sfx, RN_Q4##sfx, false, KX_TB (0)) \
  ENTRY (q5_K##sfx, &unpacked_q5_K##sfx, RN_Q5##sfx, false, KX_TB (1)) \
  ENTRY (q6_K##sfx, &unpacked_q6_K##sfx, RN_Q6##sfx, true, KX6_TB)

#define ENTRY(type, UNPACKED, RN, Q6, TB) \
  static bool \
  kx8_##type (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, \
      const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, \
      size_t step) \
  { \
    return kx_drive (tiles_##type, UNPACKED, RN, false, Q6, TB, n, packed, rows, r0, r1, xq, xs, \
        n_tok, y, ldy, next, step); \
  }

/* Tokens a tile takes at most: as many as keep every accumulator in the
 * 16 registers with the operands (measured; one more spilled and ran 10
 * to 20% slower): Q5_K's fifth bits and the int16 sums without VNNI
 * take registers of their own. Once group_add16 kept the int16 sums in
 * order, plain Q4_K and Q6_K ran faster with 4 than with 3 (in one
 * process, taking turns, 1024 x 2816, two threads: Q4_K 4-32 tokens
 * 1.03-1.21x, Q6_K 1.06-1.19x); Q5_K with 3 was mixed (0.96x at 8
 * tokens, 1.08x at 32) and keeps 2. */
#define RN_Q4 4
#define RN_Q5 2
#define RN_Q6 4
#define RN_Q4_vnni 4
#define RN_Q5_vnni 3
#define RN_Q6_vnni 4
/* Q5_K read unpacked (KxUnpacked) has no fifth bits to hold, and takes
 * Q4_K's 4. */
#define RNU_Q5 4
/* Q4_K's nibbles cost one AND or shift, and unpacked the tile reads twice
 * the bytes: on Zen 3 (AVX2 only), taking turns in one process, two
 * threads, its batches read unpacked were 1.20-1.35x slower at 5-8 tokens
 * (they still read memory at 10-11 GB/s, which the unpacking does not
 * overlap), even at 16-32, and 1.02-1.12x faster at 64-128 (one thread
 * 1.09-1.10x). So only prefill chunks of 64 tokens or more unpack it. */
#define UNPACK_MIN_Q4 64
VARIANT (, 0)
VARIANT (_vnni, 1)

LlmKx8Fn
llm_avx2_kx8_fn (uint32_t wtype)
{
  const bool vnni = llm_cpu_has_avx_vnni ();
  switch (wtype) {
    case LLM_TYPE_Q4_K:
      return vnni ? kx8_q4_K_vnni : kx8_q4_K;
    case LLM_TYPE_Q5_K:
      return vnni ? kx8_q5_K_vnni : kx8_q5_K;
    case LLM_TYPE_Q6_K:
      return vnni ? kx8_q6_K_vnni : kx8_q6_K;
    default:
      return NULL;
  }
}
