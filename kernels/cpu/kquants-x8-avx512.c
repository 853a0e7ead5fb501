/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 (F, BW, VL, DQ) + VNNI kernels over the packed K-quant layout
 * (kquants-x8.h). Built with those instruction sets and reached only
 * through llm_avx512_kx8_fn() after the caller's CPU check.
 *
 * A 64-byte unit holds 4 values of each of a tile's 16 rows, one row per
 * 32-bit lane, so the tile needs no horizontal sums: per run of one scale,
 * vpdpbusd adds value x activation over the run's groups of 4 into each
 * row's lane, against the activation's 4 bytes broadcast to every lane,
 * and one vpmulld applies the rows' scales. Every unpacked weight vector
 * serves RN tokens from registers; the integer sums and the float steps
 * after them are the header's, so results do not depend on RN.
 *
 * What bounds it (Zen 5, measured): 2 multiplies a cycle (vpdpbusd,
 * vpmulld, vpdpwssd, float), 2 loads a cycle of any width (a broadcast
 * from memory is one), 4 vector operations a cycle in all. Per 16-row
 * super-block and token there are 64 vpdpbusd (4096 multiplies at 64 a
 * go), 8 (Q6_K 16) vpmulld, 4 vpdpwssd for the mins (Q4_K, Q5_K) and 6
 * (Q6_K 3) float operations: at least 41 cycles a token whatever the
 * batch, and as many activation broadcasts as vpdpbusd, so the loads are
 * at their limit too. Batches of 8 reach about 50 cycles (Q6_K 62: its
 * runs of 16 take twice the vpmulld and run starts); unpacking (an AND,
 * or a shift and an AND, a unit and pass) is shared by a pass's tokens. */
#include "kquants-x8.h"
#include "kquants-x8-simd.h"

#include <immintrin.h>
#include <string.h>

#define UNROLL _Pragma ("GCC unroll 16")

INLINE __m512i
load (const uint8_t *p)
{
  return _mm512_loadu_si512 ((const void *) p);
}

/* 4 bytes broadcast to every lane. (GCC loads it into a register with
 * vpbroadcastd rather than embedding it in the vpdpbusd ({1to16}); that
 * measured no slower, and faster with 5 or more tokens.) */
INLINE __m512i
bcast4 (const void *p)
{
  int32_t v;
  memcpy (&v, p, sizeof v);
  return _mm512_set1_epi32 (v);
}

/* Bit @bit of every byte moved to bit 4 (other bits are garbage; the
 * caller takes bit 4 only). 16-bit shifts by at most 4 never carry a bit
 * into bit 4 of the other byte. */
INLINE __m512i
to_bit4 (__m512i v, int bit)
{
  if (bit < 4)
    return _mm512_slli_epi16 (v, 4 - bit);
  if (bit > 4)
    return _mm512_srli_epi16 (v, bit - 4);
  return v;
}

/* Bits of @b where @c is set, of @a elsewhere. */
INLINE __m512i
blend_bits (__m512i a, __m512i b, __m512i c)
{
  return _mm512_ternarylogic_epi32 (a, b, c, 0xd8);
}

/* Makes @v exist here. GCC otherwise reassociates a token's sum over the
 * runs of a super-block and sinks every run's vpmulld to its end, so all
 * runs' sums stay live at once and spill (measured: Q6_K batches 17%
 * slower, Q4_K 6%). */
#define KEEP(v) __asm__ ("" : "+v" (v))

/* isum[t] += run[t] times the rows' scales @sc (int32 lanes), t < RN. */
#define ADD_RUN_SCALED(RN, isum, run, sc) \
  UNROLL for (int t = 0; t < (RN); t++) { \
    isum[t] = _mm512_add_epi32 (isum[t], _mm512_mullo_epi32 ((run)[t], (sc))); \
    KEEP (isum[t]); \
  }

#define ZERO_ALL(RN, v, zero) \
  UNROLL for (int t = 0; t < (RN); t++) \
    (v)[t] = (zero)

#define XQ(t) ((const LlmBlockQ8_K *) (xq + (t) * xs) + b)
#define SIDE(t) ((const KxSide *) (side + b * sstride + (t) * KX_SIDE_BYTES (Q6)))

/* Rows past @rm (the matrix's end, inside the last tile) are not stored. */
#define FINISH_STORE(RN) \
  { \
    const __mmask16 keep = (__mmask16) ((1u << rm) - 1); \
    UNROLL for (int t = 0; t < (RN); t++) \
      _mm512_mask_storeu_ps (y + t * ldy, keep, acc[t]); \
  }

/* Q4_K / Q5_K, RN tokens. A pass takes NJ chunks of 8 units and NH (1 or
 * 2: the two nibbles of a unit) of their runs, so a token has NJ x NH
 * independent vpdpbusd chains: with few tokens that many are needed to
 * cover the instruction's latency (4 cycles at 2 a cycle: 8 chains). */
#define K4_TILE(name, RN, NJ, NH, Q5) \
  static void \
  name (KX_TILE_ARGS) \
  { \
    enum { Q6 = 0 }; \
    const __m512i m4 = _mm512_set1_epi8 (0x0f), m10 = _mm512_set1_epi8 (0x10); \
    __m512 acc[RN]; \
    ZERO_ALL (RN, acc, _mm512_setzero_ps ()); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * KX_TB (Q5); \
      __m512i isum[RN]; \
      ZERO_ALL (RN, isum, _mm512_setzero_si512 ()); \
      int step = 0; \
      UNROLL for (int j0 = 0; j0 < 4; j0 += (NJ)) { \
        UNROLL for (int h0 = 0; h0 < 2; h0 += (NH)) { \
          __m512i run[NJ][NH][RN]; \
          UNROLL for (int a = 0; a < (NJ); a++) \
            UNROLL for (int e = 0; e < (NH); e++) \
              UNROLL for (int t = 0; t < (RN); t++) \
                run[a][e][t] = _mm512_setzero_si512 (); \
          UNROLL for (int i = 0; i < 8; i++) { \
            if (pf) \
              prefetch_share (pb + pf, KX_TB (Q5), step, KX4_STEPS (NJ, NH)); \
            step++; \
            __m512i qh = m4; \
            if (Q5) \
              qh = load (pb + KX_QH + 64 * i); \
            UNROLL for (int a = 0; a < (NJ); a++) { \
              const int j = j0 + a; \
              const __m512i raw = load (pb + KX_QS + 64 * (8 * j + i)); \
              UNROLL for (int e = 0; e < (NH); e++) { \
                const int h = h0 + e; \
                __m512i v = _mm512_and_si512 (h ? _mm512_srli_epi16 (raw, 4) : raw, m4); \
                if (Q5) \
                  v = blend_bits (v, to_bit4 (qh, 2 * j + h), m10); \
                UNROLL for (int t = 0; t < (RN); t++) \
                  run[a][e][t] = _mm512_dpbusd_epi32 (run[a][e][t], v, \
                      bcast4 (XQ (t)->qs + 64 * j + 32 * h + 4 * i)); \
              } \
            } \
          } \
          UNROLL for (int a = 0; a < (NJ); a++) \
            UNROLL for (int e = 0; e < (NH); e++) { \
              const __m512i sc = _mm512_cvtepu8_epi32 (_mm_loadu_si128 ((const __m128i *) \
                      (pb + KX_SC (Q5) + 16 * (2 * (j0 + a) + h0 + e)))); \
              ADD_RUN_SCALED (RN, isum, run[a][e], sc); \
            } \
        } \
      } \
      __m512i msum[RN]; \
      UNROLL for (int t = 0; t < (RN); t++) \
        msum[t] = _mm512_setzero_si512 (); \
      UNROLL for (int k = 0; k < 4; k++) { \
        const __m512i mk = _mm512_cvtepu8_epi16 (_mm256_loadu_si256 ((const __m256i *) \
                (pb + KX_MN (Q5) + 32 * k))); \
        UNROLL for (int t = 0; t < (RN); t++) \
          msum[t] = _mm512_dpwssd_epi32 (msum[t], mk, bcast4 (SIDE (t)->run32 + 2 * k)); \
      } \
      const __m512 dv = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) \
              (pb + KX_D (Q5)))); \
      const __m512 dmv = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) \
              (pb + KX_D (Q5) + 32))); \
      UNROLL for (int t = 0; t < (RN); t++) { \
        const __m512 dx = _mm512_set1_ps (XQ (t)->d); \
        acc[t] = _mm512_fmadd_ps (_mm512_mul_ps (dv, dx), _mm512_cvtepi32_ps (isum[t]), \
            acc[t]); \
        acc[t] = _mm512_fnmadd_ps (_mm512_mul_ps (dmv, dx), _mm512_cvtepi32_ps (msum[t]), \
            acc[t]); \
      } \
    } \
    FINISH_STORE (RN) \
  }

/* Q6_K value vector @q (0..3: A low, B low, A high, B high nibbles) of a
 * unit, with its top 2 bits from @hb at bits 4-5. */
INLINE __m512i
q6_values (int q, __m512i a, __m512i bq, __m512i hb, __m512i m4, __m512i m30)
{
  switch (q) {
    case 0:
      return blend_bits (_mm512_and_si512 (a, m4), _mm512_slli_epi16 (hb, 4), m30);
    case 1:
      return blend_bits (_mm512_and_si512 (bq, m4), _mm512_slli_epi16 (hb, 2), m30);
    case 2:
      return blend_bits (_mm512_and_si512 (_mm512_srli_epi16 (a, 4), m4), hb, m30);
    default:
      return blend_bits (_mm512_and_si512 (_mm512_srli_epi16 (bq, 4), m4),
          _mm512_srli_epi16 (hb, 2), m30);
  }
}

/* Q6_K, RN tokens: runs of 16 values. The four runs of a half h and
 * column c (units 8 h + 4 c .. + 3: A low, B low, A high, B high) share
 * their units; a pass takes NC columns and NQ of those runs, NC x NQ
 * chains a token. A run's sum starts at -32 times its activation sum (the
 * side table), which turns sum u * x into sum (u - 32) * x. */
#define Q6_TILE(name, RN, NC, NQ) \
  static void \
  name (KX_TILE_ARGS) \
  { \
    enum { Q6 = 1 }; \
    const __m512i m4 = _mm512_set1_epi8 (0x0f), m30 = _mm512_set1_epi8 (0x30); \
    __m512 acc[RN]; \
    ZERO_ALL (RN, acc, _mm512_setzero_ps ()); \
    for (size_t b = 0; b < nb; b++) { \
      const uint8_t *pb = P + b * KX6_TB; \
      __m512i isum[RN]; \
      ZERO_ALL (RN, isum, _mm512_setzero_si512 ()); \
      int step = 0; \
      UNROLL for (int h = 0; h < 2; h++) \
        UNROLL for (int c0 = 0; c0 < 2; c0 += (NC)) \
          UNROLL for (int q0 = 0; q0 < 4; q0 += (NQ)) { \
            __m512i run[NC][NQ][RN]; \
            UNROLL for (int a = 0; a < (NC); a++) \
              UNROLL for (int e = 0; e < (NQ); e++) \
                UNROLL for (int t = 0; t < (RN); t++) \
                  run[a][e][t] = bcast4 (SIDE (t)->neg32 + 8 * h + 2 * (q0 + e) + c0 + a); \
            UNROLL for (int i0 = 0; i0 < 4; i0++) { \
              if (pf) \
                prefetch_share (pb + pf, KX6_TB, step, KX6_STEPS (NC, NQ)); \
              step++; \
              UNROLL for (int a = 0; a < (NC); a++) { \
                const int i = 4 * (c0 + a) + i0; \
                const uint8_t *unit = pb + 192 * (8 * h + i); \
                const __m512i ua = load (unit), ub = load (unit + 64), uh = load (unit + 128); \
                UNROLL for (int e = 0; e < (NQ); e++) { \
                  const int q = q0 + e; \
                  const __m512i v = q6_values (q, ua, ub, uh, m4, m30); \
                  UNROLL for (int t = 0; t < (RN); t++) \
                    run[a][e][t] = _mm512_dpbusd_epi32 (run[a][e][t], v, \
                        bcast4 (XQ (t)->qs + 128 * h + 32 * q + 4 * i)); \
                } \
              } \
            } \
            UNROLL for (int a = 0; a < (NC); a++) \
              UNROLL for (int e = 0; e < (NQ); e++) { \
                const __m512i sc = _mm512_cvtepi8_epi32 (_mm_loadu_si128 ((const __m128i *) \
                        (pb + KX6_SC + 16 * (8 * h + 2 * (q0 + e) + c0 + a)))); \
                ADD_RUN_SCALED (RN, isum, run[a][e], sc); \
              } \
          } \
      const __m512 dv = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (pb + KX6_D))); \
      UNROLL for (int t = 0; t < (RN); t++) \
        acc[t] = _mm512_fmadd_ps (_mm512_mul_ps (dv, _mm512_set1_ps (XQ (t)->d)), \
            _mm512_cvtepi32_ps (isum[t]), acc[t]); \
    } \
    FINISH_STORE (RN) \
  }

/* Tokens per tile: 8 keeps 3 x 8 accumulators in the 32 registers; a
 * tile of 9, slower per token, serves only a product with exactly 9 left
 * (tile_tokens_wide: a check of 8 proposals), in one pass over the
 * weights instead of 7 + 2: 246M Q4_K_M (Q4_K and Q6_K) on Zen 5, two
 * threads, both ways taking turns in one process, 9 rows 2.18 -> 1.98
 * decode steps and 17 rows 4.00 -> 3.84, the rest within 2%. Small
 * batches take several runs per pass, so a token has more independent
 * vpdpbusd chains to hide their latency and units are loaded once. One
 * token, which streams from DRAM, takes one chunk (Q6_K one column) a
 * pass instead: it reads the codes in address order, not as 4 (2) streams
 * 512 (768) bytes apart, which the kernel's time follows more than its
 * chains. On Zen 4, from DRAM, that read Q4_K at 24-26 GB/s on one thread
 * against 15-20 (8 chains), Q5_K 13-22 against 17-19, Q6_K the same. */
#define ZRN 8
#define K4_TILES(pre, Q5) \
  K4_TILE (pre##_1, 1, 1, 2, Q5) K4_TILE (pre##_2, 2, 2, 2, Q5) K4_TILE (pre##_3, 3, 1, 2, Q5) \
  K4_TILE (pre##_4, 4, 1, 2, Q5) K4_TILE (pre##_5, 5, 1, 2, Q5) K4_TILE (pre##_6, 6, 1, 2, Q5) \
  K4_TILE (pre##_7, 7, 1, 1, Q5) K4_TILE (pre##_8, 8, 1, 1, Q5) K4_TILE (pre##_9, 9, 1, 1, Q5) \
  static const KxTileFn pre[ZRN + 1] = { pre##_1, pre##_2, pre##_3, pre##_4, pre##_5, pre##_6, \
    pre##_7, pre##_8, pre##_9 };

K4_TILES (tiles_q4_K, 0)
K4_TILES (tiles_q5_K, 1)

Q6_TILE (tiles_q6_K_1, 1, 1, 4)
Q6_TILE (tiles_q6_K_2, 2, 1, 4)
Q6_TILE (tiles_q6_K_3, 3, 1, 2)
Q6_TILE (tiles_q6_K_4, 4, 1, 2)
Q6_TILE (tiles_q6_K_5, 5, 1, 1)
Q6_TILE (tiles_q6_K_6, 6, 1, 1)
Q6_TILE (tiles_q6_K_7, 7, 1, 1)
Q6_TILE (tiles_q6_K_8, 8, 1, 1)
Q6_TILE (tiles_q6_K_9, 9, 1, 1)
static const KxTileFn tiles_q6_K[ZRN + 1] = { tiles_q6_K_1, tiles_q6_K_2, tiles_q6_K_3,
  tiles_q6_K_4, tiles_q6_K_5, tiles_q6_K_6, tiles_q6_K_7, tiles_q6_K_8, tiles_q6_K_9 };

#define ENTRY(type, Q6, TB) \
  static bool \
  kx8_##type (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, \
      const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, \
      size_t step) \
  { \
    return kx_drive (tiles_##type, NULL, ZRN, true, Q6, TB, n, packed, rows, r0, r1, xq, xs, n_tok, y, \
        ldy, next, step); \
  }

ENTRY (q4_K, false, KX_TB (0))
ENTRY (q5_K, false, KX_TB (1))
ENTRY (q6_K, true, KX6_TB)

LlmKx8Fn
llm_avx512_kx8_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_Q4_K:
      return kx8_q4_K;
    case LLM_TYPE_Q5_K:
      return kx8_q5_K;
    case LLM_TYPE_Q6_K:
      return kx8_q6_K;
    default:
      return NULL;
  }
}
