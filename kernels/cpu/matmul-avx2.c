/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C dot products. Built with -mavx2 -mfma -mf16c and reached
 * only through the llm_avx2_*_fn() lookups after a CPU check in matmul.c.
 *
 * Each weight row's result is computed in exactly the order of ggml's x86
 * (AVX2) kernel for its type: the same integer sum in each of 8 lanes per
 * block, scaled and accumulated in float in the same sequence, and reduced
 * across lanes the same way. Integer parts are exact: int8 products are
 * formed with vpmaddubsw (unsigned x signed, pairs summed to int16; every
 * operand range below keeps those pair sums under 2^15, so nothing
 * saturates) and widened to int32 by vpmaddwd, or by AVX-VNNI's vpdpbusd /
 * vpdpwssd where the CPU has them. Lane k of a 32-value run always holds
 * the products of values 4k..4k+3, however they were formed, so a
 * different way to the same integers never changes the floats.
 *
 * Speed comes from doing several dot products at once, not from changing
 * that order: a kernel takes up to NR_MAX weight rows and NT_MAX activation
 * rows and keeps one accumulator chain per (row, token) pair. Decode
 * (matvec) runs four weight rows (two for the float types) against one
 * token, so the activation loads and the work that depends only on them
 * are shared and independent float chains hide the FMA latency that bounds
 * a single row. Each chain's operations are the same in every shape, so
 * matvec, dot and dot4 agree bit for bit. */
#include "matmul-avx2.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "ggml-type.h"
#include "fp16.h"
#include "isa.h"
#include "kquants.h"
#include "quantize.h"

/* ggml's hsum_float_8: high half + low half, then pairs (0+2, 1+3), then
 * those two. */
static inline float
hsum_ps (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

/* The four-lane tail of the same reduction. */
static inline float
hsum_ps128 (__m128 s)
{
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

/* ggml's GGML_F32x8_REDUCE lane sum for F32/F16: halves, then two hadds,
 * i.e. (0+1)+(2+3) where hsum_ps does (0+2)+(1+3). */
static inline float
hsum_ps_hadd (__m256 v)
{
  const __m128 t0 = _mm_add_ps (_mm256_castps256_ps128 (v), _mm256_extractf128_ps (v, 1));
  const __m128 t1 = _mm_hadd_ps (t0, t0);
  return _mm_cvtss_f32 (_mm_hadd_ps (t1, t1));
}

/* a * b rounded to float, never fused with an add that follows (compilers
 * may contract a * b + c: clang by default, GCC outside ISO C mode, both
 * with -ffp-contract=fast; the empty asm hides the product from them).
 * Every float operation here is ggml's, one rounding each. */
static inline float
mul_rounded (float a, float b)
{
  __m128 p = _mm_mul_ss (_mm_set_ss (a), _mm_set_ss (b));
  __asm__ ("" : "+x" (p));
  return _mm_cvtss_f32 (p);
}

static inline float
half_to_f32 (uint16_t h)
{
  /* F16C's conversion; exact, like llm_fp16_to_f32. */
  return _cvtsh_ss (h);
}

/* A kernel below computes out[r * nt + t] = dot(weight row r at w + r * ws,
 * activations t at x + t * xs) for r < nr, t < nt. It is always inlined
 * with constant nr and nt, so the loops unroll and the accumulator arrays
 * live in registers. */
#define KERNEL static inline __attribute__ ((always_inline)) void
#define KERNEL_ARGS \
  size_t n, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, float *out, \
  int vnni
#define NR_MAX 4
#define NT_MAX 4
#define EACH_ROW _Pragma ("GCC unroll 4") for (int r = 0; r < nr; r++)
#define EACH_TOKEN _Pragma ("GCC unroll 4") for (int t = 0; t < nt; t++)

/* Rows are processed a few at a time, each row a separate stream through
 * memory, and the hardware prefetchers lose track of several interleaved
 * streams (measured: 4-row groups ran at half the speed of one row from
 * DRAM). So a kernel running nr > 1 rows prefetches the next group of
 * rows, which is one contiguous range, linearly. After step @i of @bytes
 * per row it touches lines [p, p + 64 k), p the step's position in the
 * next group and 64 k >= the nr * @bytes it advanced, so the steps cover
 * the group without gaps (some lines twice). Past the last group this
 * prefetches bytes after the matrix: prefetches never fault. */
#define PREFETCH_SETUP const char *const pf_base = (const char *) w + nr * ws
#define PREFETCH_STEP(i, bytes) \
  if (nr > 1) { \
    const char *const p = pf_base + (i) * nr * (bytes); \
    _Pragma ("GCC unroll 16") for (size_t l = 0; l < (nr * (bytes) + 63) / 64; l++) \
      prefetch (p + 64 * l); \
  }

static inline void
prefetch (const char *p)
{
  /* asm, not _mm_prefetch: GCC deletes loops of prefetch builtins. */
  __asm__ volatile ("prefetcht0 %0" : : "m" (*p));
}

/* Integer dot products, with or without AVX-VNNI (@vnni is a constant in
 * every instantiation). The VNNI instructions are written as asm so that
 * this file needs no -mavxvnni and the same kernel source serves both; the
 * asm is reached only where matmul-avx2.c's CPU check found AVX-VNNI. */

/* @acc plus, per int32 lane, the sum of 4 products u[i] * s[i] (u unsigned,
 * s signed bytes). Without VNNI: vpmaddubsw then vpmaddwd, exact for the
 * operand ranges used here (pair sums fit int16). */
static inline __m256i
dot4_acc (int vnni, __m256i acc, __m256i u, __m256i s)
{
  if (vnni) {
    __asm__ ("%{vex%} vpdpbusd %2, %1, %0" : "+x" (acc) : "x" (u), "xm" (s));
    return acc;
  }
  const __m256i p16 = _mm256_maddubs_epi16 (u, s);
  return _mm256_add_epi32 (acc, _mm256_madd_epi16 (p16, _mm256_set1_epi16 (1)));
}

/* @acc plus, per int32 lane, a[2i] * b[2i] + a[2i+1] * b[2i+1] (int16). */
static inline __m256i
dot2w_acc (int vnni, __m256i acc, __m256i a, __m256i b)
{
  if (vnni) {
    __asm__ ("%{vex%} vpdpwssd %2, %1, %0" : "+x" (acc) : "x" (a), "xm" (b));
    return acc;
  }
  return _mm256_add_epi32 (acc, _mm256_madd_epi16 (a, b));
}

/* GFNI's vgf2p8affineqb moves and masks bits within each byte in one
 * instruction: output bit i is the parity of the input byte ANDed with row
 * i of an 8x8 bit matrix, row i being byte 7 - i of the qword (one per 64
 * bits of the vector). Every AVX-VNNI CPU has GFNI, so the VNNI kernels
 * use it to unpack weights where AVX2 takes a shift and a mask. */
#define GF_ROW(out_bit, in_bit) ((uint64_t) 1 << (in_bit) << (8 * (7 - (out_bit))))
#define GF_NIB_LO (GF_ROW (0, 0) | GF_ROW (1, 1) | GF_ROW (2, 2) | GF_ROW (3, 3))
#define GF_NIB_HI (GF_ROW (0, 4) | GF_ROW (1, 5) | GF_ROW (2, 6) | GF_ROW (3, 7))

static inline __m256i
gf_affine (__m256i v, const uint64_t m[4])
{
  __asm__ ("vgf2p8affineqb $0, %1, %0, %0" : "+x" (v) : "m" (*(const uint64_t (*)[4]) m));
  return v;
}

/* The low nibbles of the low 128 bits of @v and the high nibbles of its
 * high 128 bits, as bytes 0..15. */
static inline __m256i
nibbles_lo_hi (int vnni, __m256i v)
{
  static const uint64_t m[4] __attribute__ ((aligned (32))) = {
    GF_NIB_LO, GF_NIB_LO, GF_NIB_HI, GF_NIB_HI,
  };
  if (vnni)
    return gf_affine (v, m);
  return _mm256_and_si256 (_mm256_srlv_epi64 (v, _mm256_set_epi64x (4, 4, 0, 0)),
      _mm256_set1_epi8 (0x0f));
}

/* The high nibble of each byte of @v. */
static inline __m256i
nibbles_hi (int vnni, __m256i v)
{
  static const uint64_t m[4] __attribute__ ((aligned (32))) = {
    GF_NIB_HI, GF_NIB_HI, GF_NIB_HI, GF_NIB_HI,
  };
  if (vnni)
    return gf_affine (v, m);
  return _mm256_and_si256 (_mm256_srli_epi16 (v, 4), _mm256_set1_epi8 (0x0f));
}

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

/* ggml's vec_dot_f32/f16/bf16: four accumulators, each taking every fourth
 * run of 8 values, combined as (0+2)+(1+3), then the lanes. Products of
 * two halves or two bfloat16s are exact in float, so an FMA here equals
 * ggml's bf16 multiply-then-add. The tail past the last multiple of 32
 * is scalar, in float for F32 and in double for F16/BF16, as in ggml. */
#define FLOAT_KERNEL(name, T, LOAD, SCALAR, TAIL_T, HSUM) \
  KERNEL \
  name (KERNEL_ARGS) \
  { \
    __m256 acc[NR_MAX][NT_MAX][4]; \
    EACH_ROW EACH_TOKEN for (int j = 0; j < 4; j++) \
      acc[r][t][j] = _mm256_setzero_ps (); \
    const size_t np = n & ~(size_t) 31; \
    PREFETCH_SETUP; \
    for (size_t i = 0; i < np; i += 32) { \
      PREFETCH_STEP (i / 32, 32 * sizeof (T)); \
      _Pragma ("GCC unroll 4") for (int j = 0; j < 4; j++) { \
        __m256 xv[NT_MAX]; \
        EACH_TOKEN xv[t] = LOAD ((const T *) (x + t * xs) + i + 8 * j); \
        EACH_ROW { \
          const __m256 wv = LOAD ((const T *) (w + r * ws) + i + 8 * j); \
          EACH_TOKEN acc[r][t][j] = _mm256_fmadd_ps (wv, xv[t], acc[r][t][j]); \
        } \
      } \
    } \
    EACH_ROW EACH_TOKEN { \
      const T *wr = (const T *) (w + r * ws), *xt = (const T *) (x + t * xs); \
      const __m256 s = _mm256_add_ps (_mm256_add_ps (acc[r][t][0], acc[r][t][2]), \
          _mm256_add_ps (acc[r][t][1], acc[r][t][3])); \
      TAIL_T sum = HSUM (s); \
      for (size_t k = np; k < n; k++) \
        sum += (TAIL_T) mul_rounded (SCALAR (wr[k]), SCALAR (xt[k])); \
      out[r * nt + t] = (float) sum; \
    } \
  }

FLOAT_KERNEL (kern_f32, float, load_f32, f32_to_f32, float, hsum_ps_hadd)
FLOAT_KERNEL (kern_f16, uint16_t, load_f16, half_to_f32, double, hsum_ps_hadd)
FLOAT_KERNEL (kern_bf16, uint16_t, load_bf16, llm_bf16_to_f32, double, hsum_ps)

/* --- Q8_0, Q4_0, Q5_0 --- */

/* ggml: acc += (d_w * d_x) * float(lanes) per block, then hsum_ps. The
 * lanes hold sums of 4 products w[i] * x[i]. */

/* The half at @p as a float in lane 0: one vcvtph2ps from memory (asm, as
 * compilers split it into a load and a convert; these kernels are bound by
 * the number of instructions, and converting 8 blocks' scales at once
 * measured no faster). It converts four halves from 8 bytes; the other
 * three come from the bytes after @p, which callers guarantee are inside
 * the same block. */
static inline __m128
half_lane0 (const void *p)
{
  __m128 r;
  __asm__ ("vcvtph2ps %1, %0" : "=x" (r) : "m" (*(const uint64_t *) p));
  return r;
}

/* Q8_0, Q4_0 and Q5_0 weights against Q8_0 activations: per block, lanes of
 * exact int sums, acc += (d_w * d_x) * float(lanes) with the scale product
 * formed in float as ggml does, then hsum_ps. Work on the activations is
 * shared by the rows. */
#define Q8_0_ACT_KERNEL(name, BLOCK, PREP_X, LANES) \
  KERNEL \
  name (KERNEL_ARGS) \
  { \
    __m256 acc[NR_MAX][NT_MAX]; \
    EACH_ROW EACH_TOKEN acc[r][t] = _mm256_setzero_ps (); \
    PREFETCH_SETUP; \
    for (size_t b = 0; b < n / LLM_QK8_0; b++) { \
      PREFETCH_STEP (b, sizeof (BLOCK)); \
      __m256i xq[NT_MAX], xp[NT_MAX]; \
      __m128 dx[NT_MAX]; \
      EACH_TOKEN { \
        const LlmBlockQ8_0 *xb = (const LlmBlockQ8_0 *) (x + t * xs) + b; \
        xq[t] = _mm256_loadu_si256 ((const __m256i *) xb->qs); \
        xp[t] = PREP_X (vnni, xq[t]); \
        dx[t] = half_lane0 (&xb->d); \
      } \
      EACH_ROW { \
        const BLOCK *wb = (const BLOCK *) (w + r * ws) + b; \
        const __m128 dw = half_lane0 (&wb->d); \
        EACH_TOKEN acc[r][t] = _mm256_fmadd_ps (_mm256_broadcastss_ps (_mm_mul_ss (dw, dx[t])), \
            _mm256_cvtepi32_ps (LANES (vnni, wb, xq[t], xp[t])), acc[r][t]); \
      } \
    } \
    EACH_ROW EACH_TOKEN out[r * nt + t] = hsum_ps (acc[r][t]); \
  }

/* -(@m * sum of x) over each lane's 4 values: a correction shared by every
 * row (m * 2 * 127 fits int16 for m <= 128). */
static inline __m256i
neg_sum4 (__m256i x, int m)
{
  const __m256i p16 = _mm256_maddubs_epi16 (_mm256_set1_epi8 ((char) m), x);
  return _mm256_madd_epi16 (p16, _mm256_set1_epi16 (-1));
}

/* Q8_0: signed weights. Without VNNI, |w| (<= 128) times x with w's sign
 * (|x| <= 127: activations never reach -128). With VNNI, whose sums do not
 * saturate, w + 128 (w ^ 0x80 as unsigned) times x, less 128 * sum x. */
static inline __m256i
prep_q8_0 (int vnni, __m256i x)
{
  return vnni ? neg_sum4 (x, 128) : _mm256_setzero_si256 ();
}

static inline __m256i
lanes_q8_0 (int vnni, const LlmBlockQ8_0 *b, __m256i x, __m256i corr)
{
  const __m256i q = _mm256_loadu_si256 ((const __m256i *) b->qs);
  if (vnni)
    return dot4_acc (1, corr, _mm256_xor_si256 (q, _mm256_set1_epi8 ((char) 0x80)), x);
  return dot4_acc (0, _mm256_setzero_si256 (), _mm256_sign_epi8 (q, q), _mm256_sign_epi8 (x, q));
}

/* Q4_0: nibbles u (0..15) stand for u - 8; low nibbles are values 0..15,
 * high nibbles 16..31. Sum u * x, less 8 * sum x. */
static inline __m256i
prep_q4_0 (int vnni, __m256i x)
{
  return neg_sum4 (x, 8);
}

static inline __m256i
lanes_q4_0 (int vnni, const LlmBlockQ4_0 *b, __m256i x, __m256i corr)
{
  const __m256i raw = _mm256_broadcastsi128_si256 (_mm_loadu_si128 ((const __m128i *) b->qs));
  return dot4_acc (vnni, corr, nibbles_lo_hi (vnni, raw), x);
}

/* The 32 fifth bits of a Q5_0/Q5_1 block as 0x10 in byte j (element j,
 * the order nibbles_lo_hi gives); byte j's bit comes from byte j / 8 of
 * qh, at bit j % 8, i.e. 64-bit word q of the result needs qh's byte q.
 * AVX2: that byte copied to all 8 bytes of word q, bit j % 8 tested.
 * GFNI, in two instructions: byte q put in row 4 (byte 3) of word q of a
 * bit matrix, which vgf2p8affineqb applies to bytes 1 << (j % 8): output
 * bit 4 of byte j is then bit j % 8 of byte q, every other bit 0. */
static inline __m256i
fifth_bits (int vnni, const uint8_t qh[4])
{
  uint32_t bits;
  memcpy (&bits, qh, sizeof bits);
  const __m256i all = _mm256_set1_epi32 ((int) bits);
  const __m256i bit = _mm256_set1_epi64x ((long long) 0x8040201008040201ull);
  if (vnni) {
    const char z = (char) 0x80; /* vpshufb: a zero byte */
    __m256i m = _mm256_shuffle_epi8 (all, _mm256_setr_epi8 (z, z, z, 0, z, z, z, z,
        z, z, z, 1, z, z, z, z, z, z, z, 2, z, z, z, z, z, z, z, 3, z, z, z, z));
    __asm__ ("vgf2p8affineqb $0, %1, %2, %0" : "=x" (m) : "x" (m), "x" (bit));
    return m;
  }
  const __m256i spread = _mm256_shuffle_epi8 (all,
      _mm256_setr_epi8 (0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i set = _mm256_cmpeq_epi8 (_mm256_and_si256 (spread, bit), bit);
  return _mm256_and_si256 (set, _mm256_set1_epi8 (0x10));
}

/* The 5-bit codes u (0..31) of a Q5_0/Q5_1 block, element j in byte j. */
static inline __m256i
q5_codes (int vnni, const uint8_t *qs, const uint8_t *qh)
{
  const __m256i raw = _mm256_broadcastsi128_si256 (_mm_loadu_si128 ((const __m128i *) qs));
  return _mm256_or_si256 (nibbles_lo_hi (vnni, raw), fifth_bits (vnni, qh));
}

/* Q5_0: u stands for u - 16 (ggml ORs 0xF0 into the nibble where the fifth
 * bit is clear and multiplies signed values; the lane sums are the same
 * integers). Sum u * x, less 16 * sum x; pair sums stay under 31 * 254. */
static inline __m256i
prep_q5_0 (int vnni, __m256i x)
{
  return neg_sum4 (x, 16);
}

static inline __m256i
lanes_q5_0 (int vnni, const LlmBlockQ5_0 *b, __m256i x, __m256i corr)
{
  return dot4_acc (vnni, corr, q5_codes (vnni, b->qs, b->qh), x);
}

Q8_0_ACT_KERNEL (kern_q8_0, LlmBlockQ8_0, prep_q8_0, lanes_q8_0)
Q8_0_ACT_KERNEL (kern_q4_0, LlmBlockQ4_0, prep_q4_0, lanes_q4_0)
Q8_0_ACT_KERNEL (kern_q5_0, LlmBlockQ5_0, prep_q5_0, lanes_q5_0)

/* --- Q4_1, Q5_1 against Q8_1 --- */

/* ggml: per block, acc += (d_w * d_x) * float(lanes of sum u * x) and,
 * apart, summs += m_w * s_x; the result is hsum_ps(acc) + summs. (ggml's
 * builds compile the summs update to one FMA, as here; m_w * s_x, a
 * product of two halves, is exact in float, so fused or not it rounds
 * once.) The weight blocks start with the halves d and m, the activation
 * blocks with d and s: one conversion gives both. */
#define Q8_1_ACT_KERNEL(name, BLOCK, LANES) \
  KERNEL \
  name (KERNEL_ARGS) \
  { \
    __m256 acc[NR_MAX][NT_MAX]; \
    __m128 summs[NR_MAX][NT_MAX]; \
    EACH_ROW EACH_TOKEN { \
      acc[r][t] = _mm256_setzero_ps (); \
      summs[r][t] = _mm_setzero_ps (); \
    } \
    PREFETCH_SETUP; \
    for (size_t b = 0; b < n / LLM_QK8_1; b++) { \
      PREFETCH_STEP (b, sizeof (BLOCK)); \
      __m256i xq[NT_MAX]; \
      __m128 dx[NT_MAX], sx[NT_MAX]; \
      EACH_TOKEN { \
        const LlmBlockQ8_1 *xb = (const LlmBlockQ8_1 *) (x + t * xs) + b; \
        xq[t] = _mm256_loadu_si256 ((const __m256i *) xb->qs); \
        dx[t] = half_lane0 (&xb->d); \
        sx[t] = _mm_movehdup_ps (dx[t]); \
      } \
      EACH_ROW { \
        const BLOCK *wb = (const BLOCK *) (w + r * ws) + b; \
        const __m128 dw = half_lane0 (&wb->d); \
        const __m128 mw = _mm_movehdup_ps (dw); \
        EACH_TOKEN { \
          summs[r][t] = _mm_fmadd_ss (mw, sx[t], summs[r][t]); \
          acc[r][t] = _mm256_fmadd_ps (_mm256_broadcastss_ps (_mm_mul_ss (dw, dx[t])), \
              _mm256_cvtepi32_ps (LANES (vnni, wb, xq[t])), acc[r][t]); \
        } \
      } \
    } \
    EACH_ROW EACH_TOKEN out[r * nt + t] = hsum_ps (acc[r][t]) + _mm_cvtss_f32 (summs[r][t]); \
  }

/* Unsigned codes times x, as ggml's mul_sum_us8_pairs_float. */
static inline __m256i
lanes_q4_1 (int vnni, const LlmBlockQ4_1 *b, __m256i x)
{
  const __m256i raw = _mm256_broadcastsi128_si256 (_mm_loadu_si128 ((const __m128i *) b->qs));
  return dot4_acc (vnni, _mm256_setzero_si256 (), nibbles_lo_hi (vnni, raw), x);
}

static inline __m256i
lanes_q5_1 (int vnni, const LlmBlockQ5_1 *b, __m256i x)
{
  return dot4_acc (vnni, _mm256_setzero_si256 (), q5_codes (vnni, b->qs, b->qh), x);
}

Q8_1_ACT_KERNEL (kern_q4_1, LlmBlockQ4_1, lanes_q4_1)
Q8_1_ACT_KERNEL (kern_q5_1, LlmBlockQ5_1, lanes_q5_1)

/* --- K-quants --- */

/* @acc plus the int32 lanes of sum over 32 values of u[i] * q[i] * scale,
 * for unsigned u <= 63 and |q| <= 127 (pair sums <= 16002); @scale holds
 * int16 scales. */
static inline __m256i
dot_u8_i8_scaled (int vnni, __m256i acc, __m256i u, const int8_t *q, __m256i scale)
{
  const __m256i p16 = _mm256_maddubs_epi16 (u, _mm256_loadu_si256 ((const __m256i *) q));
  return dot2w_acc (vnni, acc, p16, scale);
}

/* Dword @k of each 128-bit half in all four dwords of that half. (A
 * switch: clang wants the immediate constant before inlining.) */
static inline __m256i
dword_bcast (__m256i v, int k)
{
  switch (k) {
    case 0:
      return _mm256_shuffle_epi32 (v, 0x00);
    case 1:
      return _mm256_shuffle_epi32 (v, 0x55);
    case 2:
      return _mm256_shuffle_epi32 (v, 0xaa);
    default:
      return _mm256_shuffle_epi32 (v, 0xff);
  }
}

/* The 8 scales and 8 mins of a Q4_K/Q5_K block (llm_k4_scale_min): @sc
 * gets sc0..sc7 as its low 8 bytes, @mins m0..m7 as int16. Unpacked in
 * integer registers, as ggml does, which leaves the vector units (the
 * bottleneck here) to the dot products: measured 18% faster than doing it
 * with vector shuffles. Packed bytes as 32-bit words w0..w2: sc0-3 = w0 &
 * 63, m0-3 = w1 & 63, sc4-7 = (w2 & 15) | (w0 >> 6) << 4, m4-7 = (w2 >> 4
 * & 15) | (w1 >> 6) << 4, per byte. */
static inline void
k4_scales_mins (const uint8_t *packed, __m128i *sc, __m128i *mins)
{
  uint32_t u0, u1, u2;
  memcpy (&u0, packed, 4);
  memcpy (&u1, packed + 4, 4);
  memcpy (&u2, packed + 8, 4);
  const uint32_t sc_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
  const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
  *sc = _mm_cvtsi64_si128 ((long long) ((uint64_t) sc_hi << 32 | sc_lo));
  *mins = _mm_cvtepu8_epi16 (_mm_cvtsi64_si128 ((long long) ((uint64_t) m_hi << 32 | m_lo)));
}

/* Q4_K and Q5_K, as ggml: values u (0..15, or 0..31 with Q5_K's fifth bit)
 * in 8 runs of 32, run j scaled by sc[j]; lanes = sum of u * x * sc over
 * the block, acc += (d_x * d) * lanes. The minimums, - d_x * dmin * sum_j
 * m[j] * (sum of x over run j), are kept apart: Q4_K in a 4-lane float
 * accumulator (lane i: runs 2i, 2i+1), Q5_K in one float, block by block. */
#define K4_KERNEL(name, BLOCK, HAS_QH) \
  KERNEL \
  name (KERNEL_ARGS) \
  { \
    const __m256i low4 = _mm256_set1_epi8 (0x0f); \
    __m256 acc[NR_MAX][NT_MAX]; \
    __m128 acc_m[NR_MAX][NT_MAX]; \
    float summs[NR_MAX][NT_MAX]; \
    EACH_ROW EACH_TOKEN { \
      acc[r][t] = _mm256_setzero_ps (); \
      acc_m[r][t] = _mm_setzero_ps (); \
      summs[r][t] = 0.0f; \
    } \
    PREFETCH_SETUP; \
    for (size_t b = 0; b < n / LLM_QK_K; b++) { \
      PREFETCH_STEP (b, sizeof (BLOCK)); \
      /* Per token: sums of x over the 8 runs of 32. */ \
      __m128i xsum[NT_MAX]; \
      EACH_TOKEN { \
        const LlmBlockQ8_K *xb = (const LlmBlockQ8_K *) (x + t * xs) + b; \
        xsum[t] = _mm_hadd_epi16 (_mm_loadu_si128 ((const __m128i *) xb->bsums), \
            _mm_loadu_si128 ((const __m128i *) (xb->bsums + 8))); \
      } \
      EACH_ROW { \
        const BLOCK *wb = (const BLOCK *) (w + r * ws) + b; \
        __m128i sm, mins; \
        k4_scales_mins (wb->scales, &sm, &mins); \
        /* Each scale in both words of a dword: sc0-3 in each half of \
         * sc03, sc4-7 in sc47, picked out by vpshufd (no index vector). */ \
        __m256i sc03, sc47; \
        { \
          __m256i s32 = _mm256_cvtepu8_epi32 (sm); \
          s32 = _mm256_or_si256 (s32, _mm256_slli_epi32 (s32, 16)); \
          sc03 = _mm256_permute2x128_si256 (s32, s32, 0x00); \
          sc47 = _mm256_permute2x128_si256 (s32, s32, 0x11); \
        } \
        /* d and dmin, adjacent halves. */ \
        const __m128 dmw = _mm_cvtph_ps (_mm_loadu_si32 (&wb->d)); \
        __m256i isum[NT_MAX]; \
        EACH_TOKEN isum[t] = _mm256_setzero_si256 (); \
        __m256i qh = _mm256_setzero_si256 (); \
        if (HAS_QH) \
          qh = _mm256_loadu_si256 ((const __m256i *) K4_QH (wb)); \
        _Pragma ("GCC unroll 4") for (int j = 0; j < 4; j++) { \
          const __m256i raw = _mm256_loadu_si256 ((const __m256i *) (wb->qs + 32 * j)); \
          __m256i lo = _mm256_and_si256 (raw, low4); \
          __m256i hi = nibbles_hi (vnni, raw); \
          if (HAS_QH) { \
            lo = _mm256_or_si256 (lo, fifth_bit (vnni, qh, 2 * j)); \
            hi = _mm256_or_si256 (hi, fifth_bit (vnni, qh, 2 * j + 1)); \
          } \
          const __m256i s_lo = dword_bcast (j < 2 ? sc03 : sc47, (2 * j) & 3); \
          const __m256i s_hi = dword_bcast (j < 2 ? sc03 : sc47, (2 * j + 1) & 3); \
          EACH_TOKEN { \
            const int8_t *q8 = ((const LlmBlockQ8_K *) (x + t * xs))[b].qs + 64 * j; \
            isum[t] = dot_u8_i8_scaled (vnni, isum[t], lo, q8, s_lo); \
            isum[t] = dot_u8_i8_scaled (vnni, isum[t], hi, q8 + 32, s_hi); \
          } \
        } \
        EACH_TOKEN { \
          /* [d_x * d, d_x * dmin]: ggml's d and -dmin. */ \
          const __m128 dm = _mm_mul_ps (dmw, \
              _mm_set1_ps (((const LlmBlockQ8_K *) (x + t * xs))[b].d)); \
          const __m128i prod = _mm_madd_epi16 (mins, xsum[t]); \
          if (HAS_QH) { \
            const __m128i h = _mm_hadd_epi32 (_mm_hadd_epi32 (prod, prod), prod); \
            summs[r][t] -= mul_rounded (_mm_cvtss_f32 (_mm_movehdup_ps (dm)), \
                (float) _mm_cvtsi128_si32 (h)); \
          } else { \
            acc_m[r][t] = _mm_fnmadd_ps (_mm_permute_ps (dm, 0x55), _mm_cvtepi32_ps (prod), \
                acc_m[r][t]); \
          } \
          acc[r][t] = _mm256_fmadd_ps (_mm256_broadcastss_ps (dm), _mm256_cvtepi32_ps (isum[t]), \
              acc[r][t]); \
        } \
      } \
    } \
    EACH_ROW EACH_TOKEN { \
      if (HAS_QH) \
        out[r * nt + t] = hsum_ps (acc[r][t]) + summs[r][t]; \
      else \
        out[r * nt + t] = hsum_ps (acc[r][t]) + hsum_ps128 (acc_m[r][t]); \
    } \
  }

/* Q5_K's fifth bit of run @j (bit j of each qh byte) as 16 or 0. Without
 * GFNI: moved to bit 4, then masked, so no bit crosses into bit 4 of the
 * other byte of a 16-bit lane. */
static inline __m256i
fifth_bit (int vnni, __m256i qh, int j)
{
  static const uint64_t m[8][4] __attribute__ ((aligned (32))) = {
#define ROW4(j) { GF_ROW (4, j), GF_ROW (4, j), GF_ROW (4, j), GF_ROW (4, j) }
    ROW4 (0), ROW4 (1), ROW4 (2), ROW4 (3), ROW4 (4), ROW4 (5), ROW4 (6), ROW4 (7),
#undef ROW4
  };
  if (vnni)
    return gf_affine (qh, m[j]);
  const __m256i at4 = j < 4 ? _mm256_slli_epi16 (qh, 4 - j)
      : j > 4 ? _mm256_srli_epi16 (qh, j - 4) : qh;
  return _mm256_and_si256 (at4, _mm256_set1_epi8 (0x10));
}

#define K4_QH(blk) ((blk)->qs) /* unused: Q4_K has no fifth bit */
K4_KERNEL (kern_q4_K, LlmBlockQ4_K, 0)
#undef K4_QH
#define K4_QH(blk) ((blk)->qh)
K4_KERNEL (kern_q5_K, LlmBlockQ5_K, 1)
#undef K4_QH

/* Bits 2k, 2k+1 of each byte of @qh as bits 4, 5: shifted there, then
 * masked (nothing crosses bytes into bits 4, 5). (A vgf2p8affineqb does it
 * in one instruction but measured 12% slower in this kernel.) */
static inline __m256i
q6_top (__m256i qh, int k)
{
  const __m256i top = k == 0 ? _mm256_slli_epi16 (qh, 4) : k == 1 ? _mm256_slli_epi16 (qh, 2)
      : k == 2 ? qh : _mm256_srli_epi16 (qh, 2);
  return _mm256_and_si256 (top, _mm256_set1_epi8 (0x30));
}

/* Q6_K, as ggml: values q = u - 32 with u (0..63) from a nibble of ql and
 * two bits of qh; run c of 32 (c = 0..7) has scales s[2c] and s[2c + 1]
 * for its two halves. Per run, the int16 pair sums of u * x less those of
 * 32 * x (the latter shared by every row) are scaled into the lanes; then
 * acc += (d_x * d) * lanes. */
KERNEL
kern_q6_K (KERNEL_ARGS)
{
  const __m256i low4 = _mm256_set1_epi8 (0x0f);
  __m256 acc[NR_MAX][NT_MAX];
  EACH_ROW EACH_TOKEN acc[r][t] = _mm256_setzero_ps ();

  PREFETCH_SETUP;
  for (size_t b = 0; b < n / LLM_QK_K; b++) {
    PREFETCH_STEP (b, sizeof (LlmBlockQ6_K));
    /* Per token and run: the pair sums of 32 * x. */
    __m256i x32[NT_MAX][8];
    EACH_TOKEN {
      const int8_t *q8 = ((const LlmBlockQ8_K *) (x + t * xs))[b].qs;
      _Pragma ("GCC unroll 8") for (int c = 0; c < 8; c++)
        x32[t][c] = _mm256_maddubs_epi16 (_mm256_set1_epi8 (32),
            _mm256_loadu_si256 ((const __m256i *) (q8 + 32 * c)));
    }

    EACH_ROW {
      const LlmBlockQ6_K *wb = (const LlmBlockQ6_K *) (w + r * ws) + b;
      /* Scales as int16 in both words of a dword; for h = 0, 1: g[h] has
       * s[8h + 2k] at dword k of its low half and s[8h + 2k + 1] at dword
       * k of its high half, for vpshufd to spread. */
      __m256i g[2];
      {
        const __m128i s8 = _mm_shuffle_epi8 (_mm_loadu_si128 ((const __m128i *) wb->scales),
            _mm_setr_epi8 (0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        const __m256i s16 = _mm256_cvtepi8_epi16 (s8);
        g[0] = _mm256_unpacklo_epi16 (s16, s16);
        g[1] = _mm256_unpackhi_epi16 (s16, s16);
      }
      __m256i isum[NT_MAX];
      EACH_TOKEN isum[t] = _mm256_setzero_si256 ();
      for (int h = 0; h < 2; h++) {
        const __m256i qh = _mm256_loadu_si256 ((const __m256i *) (wb->qh + 32 * h));
        _Pragma ("GCC unroll 4") for (int k = 0; k < 4; k++) {
          /* Runs 0, 1: low nibbles of ql[0..31], ql[32..63]; runs 2, 3:
           * their high nibbles; bits 2k, 2k+1 of qh[0..31] on top (moved
           * to bits 4, 5 and masked: nothing crosses bytes there). */
          const __m256i ql = _mm256_loadu_si256 ((const __m256i *) (wb->ql + 64 * h + 32 * (k & 1)));
          const __m256i nib = k >= 2 ? nibbles_hi (vnni, ql) : _mm256_and_si256 (ql, low4);
          const __m256i u = _mm256_or_si256 (nib, q6_top (qh, k));
          const __m256i s = dword_bcast (g[h], k);
          EACH_TOKEN {
            const int8_t *q8 = ((const LlmBlockQ8_K *) (x + t * xs))[b].qs + 128 * h + 32 * k;
            const __m256i p16 = _mm256_sub_epi16 (
                _mm256_maddubs_epi16 (u, _mm256_loadu_si256 ((const __m256i *) q8)), x32[t][4 * h + k]);
            isum[t] = dot2w_acc (vnni, isum[t], s, p16);
          }
        }
      }
      const float dw = half_to_f32 (wb->d);
      EACH_TOKEN {
        const float dx = ((const LlmBlockQ8_K *) (x + t * xs))[b].d;
        acc[r][t] = _mm256_fmadd_ps (_mm256_set1_ps (dx * dw), _mm256_cvtepi32_ps (isum[t]),
            acc[r][t]);
      }
    }
  }
  EACH_ROW EACH_TOKEN out[r * nt + t] = hsum_ps (acc[r][t]);
}

/* --- entry points: one row, one row x four tokens, rows x one token --- */

/* @ROWS weight rows at a time in matvec: as many as keep every
 * accumulator in a register. @VNNI selects the integer instructions;
 * @sfx names the variant. */
#define ENTRY_POINTS(type, ROWS, sfx, VNNI) \
  static float \
  dot_##type##sfx (size_t n, const void *w, const void *x) \
  { \
    float r; \
    kern_##type (n, w, 0, 1, x, 0, 1, &r, VNNI); \
    return r; \
  } \
  static void \
  dot4_##type##sfx (size_t n, const void *w, const void *x, size_t xs, float *out) \
  { \
    kern_##type (n, w, 0, 1, x, xs, 2, out, VNNI); \
    kern_##type (n, w, 0, 1, (const uint8_t *) x + 2 * xs, xs, 2, out + 2, VNNI); \
  } \
  static void \
  matvec_##type##sfx (size_t n, const void *w, size_t row_bytes, size_t rows, const void *x, \
      float *y) \
  { \
    const uint8_t *wr = w; \
    size_t r = 0; \
    for (; r + ROWS <= rows; r += ROWS) \
      kern_##type (n, wr + r * row_bytes, row_bytes, ROWS, x, 0, 1, y + r, VNNI); \
    for (; r < rows; r++) \
      kern_##type (n, wr + r * row_bytes, row_bytes, 1, x, 0, 1, y + r, VNNI); \
  }

ENTRY_POINTS (f32, 2, , 0)
ENTRY_POINTS (f16, 2, , 0)
ENTRY_POINTS (bf16, 2, , 0)
ENTRY_POINTS (q8_0, 4, , 0)
ENTRY_POINTS (q4_0, 4, , 0)
ENTRY_POINTS (q5_0, 4, , 0)
ENTRY_POINTS (q4_1, 4, , 0)
ENTRY_POINTS (q5_1, 4, , 0)
ENTRY_POINTS (q4_K, 4, , 0)
ENTRY_POINTS (q5_K, 4, , 0)
ENTRY_POINTS (q6_K, 4, , 0)
/* The VNNI variants' asm needs binutils 2.36 or later; building with
 * -DLLM_AVX2_NO_VNNI leaves them out. */
#ifndef LLM_AVX2_NO_VNNI
ENTRY_POINTS (q8_0, 4, _vnni, 1)
ENTRY_POINTS (q4_0, 4, _vnni, 1)
ENTRY_POINTS (q5_0, 4, _vnni, 1)
ENTRY_POINTS (q4_1, 4, _vnni, 1)
ENTRY_POINTS (q5_1, 4, _vnni, 1)
ENTRY_POINTS (q4_K, 4, _vnni, 1)
ENTRY_POINTS (q5_K, 4, _vnni, 1)
ENTRY_POINTS (q6_K, 4, _vnni, 1)
#define VNNI_OR(vnni_fn, plain_fn) (vnni ? vnni_fn : plain_fn)
#else
#define VNNI_OR(vnni_fn, plain_fn) ((void) vnni, plain_fn)
#endif

/* The "vnni" kernels need AVX-VNNI and GFNI (vgf2p8affineqb); every CPU
 * with AVX-VNNI so far has GFNI too. */
static bool
have_avx_vnni (void)
{
  return llm_cpu_has_avx_vnni () && llm_cpu_has_gfni ();
}

#define LOOKUP(prefix) \
  const bool vnni = have_avx_vnni (); \
  switch (wtype) { \
    case LLM_TYPE_F32: \
      return prefix##_f32; \
    case LLM_TYPE_F16: \
      return prefix##_f16; \
    case LLM_TYPE_BF16: \
      return prefix##_bf16; \
    case LLM_TYPE_Q8_0: \
      return VNNI_OR (prefix##_q8_0_vnni, prefix##_q8_0); \
    case LLM_TYPE_Q4_0: \
      return VNNI_OR (prefix##_q4_0_vnni, prefix##_q4_0); \
    case LLM_TYPE_Q5_0: \
      return VNNI_OR (prefix##_q5_0_vnni, prefix##_q5_0); \
    case LLM_TYPE_Q4_1: \
      return VNNI_OR (prefix##_q4_1_vnni, prefix##_q4_1); \
    case LLM_TYPE_Q5_1: \
      return VNNI_OR (prefix##_q5_1_vnni, prefix##_q5_1); \
    case LLM_TYPE_Q4_K: \
      return VNNI_OR (prefix##_q4_K_vnni, prefix##_q4_K); \
    case LLM_TYPE_Q5_K: \
      return VNNI_OR (prefix##_q5_K_vnni, prefix##_q5_K); \
    case LLM_TYPE_Q6_K: \
      return VNNI_OR (prefix##_q6_K_vnni, prefix##_q6_K); \
    default: \
      return NULL; \
  }

LlmDotFn
llm_avx2_dot_fn (uint32_t wtype)
{
  LOOKUP (dot)
}

LlmDot4Fn
llm_avx2_dot4_fn (uint32_t wtype)
{
  LOOKUP (dot4)
}

LlmMatvecFn
llm_avx2_matvec_fn (uint32_t wtype)
{
  LOOKUP (matvec)
}
