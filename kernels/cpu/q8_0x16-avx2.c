/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C kernels over the packed Q8_0 layout of q8_0x16.h, for
 * every token count, with an AVX-VNNI variant. Built with -mavx2 -mfma
 * -mf16c and reached only after the caller's CPU check.
 *
 * A 32-byte load of half a block's vector holds 4 code bytes (w + 128) of
 * each of 8 rows, one row per 32-bit lane. Against the token's 4 matching
 * activation codes in each lane (one 8-byte broadcast serves a vector
 * pair, as is and with lane pairs swapped), each lane gathers its row's
 * products:
 *
 * - AVX-VNNI: vpdpbusd adds each lane's 4 products (w + 128) * x into its
 *   int32 sum, which starts from the token's bias (-128 * its sum of
 *   codes): one instruction per 32 products.
 * - plain AVX2: vpmaddubsw cannot take w + 128 (255 * 127 * 2 overflows
 *   int16), so it multiplies |w| by x with w's sign (vpsignb), pair sums
 *   of at most 2 * 128 * 127, and vpmaddwd widens them to int32 at once:
 *   4 instructions per 32 products, 2 of them multiplies. The other way
 *   measured, 16-bit products (the weight bytes split into even and odd
 *   words by a mask and a shift once per token tile, two vpmaddwd + two
 *   vpaddd against activations widened once per token), has as many
 *   instructions and none cheaper: 27-28 cycles a token-block in cache
 *   against 25-26 for this one.
 *
 * Either way each sum ends at dot_q8_0's sumi; then per block, as
 * dot_q8_0: acc += (float) sumi * (d_w * d_x), one rounding per operation.
 *
 * What bounds it (Zen 5 runs the integer multiplies and vmulps on the same
 * two pipes, 1.9-2 a cycle, and 4 vector instructions a cycle in all):
 * per token and 16-row block, VNNI has 16 vpdpbusd + 4 vmulps, 10.4 cycles
 * of multiplies, measured in cache at 11.4-11.8 (tools/bench-q4_0x16
 * --type q8_0 --in-cache, cycles at the 4.2 GHz the core ran at), twice
 * the AVX-512 kernel's 6.2 for its half-width vectors. Plain has 64
 * instructions of products + 8 of floats + the pair swaps, about 21 cycles
 * of issue, measured at 25-26. Token tiles: VNNI does both halves of a
 * block at once for up to 3 tokens (12 sums and accumulators in the 16
 * registers; one half after the other for 4 to 8 tokens measured 7-10%
 * slower, both halves with the accumulators in memory for 4 to 6 no
 * faster); plain, with two registers per weight vector, both halves up to
 * 2 tokens and one half after the other up to 5. One token is bound by
 * memory (about 90 cycles a block a thread), as for AVX-512; over weights
 * in memory 8 VNNI tokens took 1.0-1.3x the time of one, 16 tokens
 * 1.6-2.4x. */
#include "q8_0x16.h"
#include "x16-avx2.h"

#include <immintrin.h>
#include <string.h>

#include "isa.h"
#include "quantize.h"

/* Vector @k's half @h (rows 8 h .. 8 h + 7) of the block at @pb. VNNI
 * multiplies its bytes (w + 128) as they are ([0]); plain keeps the signed
 * codes w ([0]) and |w| ([1], as unsigned bytes: 128 for -128). */
typedef struct {
  __m256i v[2];
} W8;

INLINE W8
load_w (int vnni, const uint8_t *pb, int k, int h)
{
  W8 w;
  const __m256i u = _mm256_loadu_si256 ((const __m256i *) (pb + 64 * k + 32 * h));
  if (vnni) {
    w.v[0] = w.v[1] = u;
    return w;
  }
  w.v[0] = _mm256_xor_si256 (u, _mm256_set1_epi8 ((char) 0x80));
  w.v[1] = _mm256_abs_epi8 (w.v[0]);
  return w;
}

/* Token row @q's activations for vector @k: groups 2 (k / 2) and 2 (k /
 * 2) + 1 in the even and odd lanes, for odd @k the other way round. */
INLINE __m256i
acts (const int8_t *q, int k)
{
  const __m256i x = X16_BCAST8 (q + 8 * (k / 2));
  return k & 1 ? X16_SWAP_PAIRS (x) : x;
}

/* @s plus each lane's 4 products of @w by @x. The empty asm keeps each
 * sum one chain: left alone, GCC reassociated the plain kernel's integer
 * additions into trees whose partial sums spilled. */
INLINE __m256i
dot4 (int vnni, __m256i s, W8 w, __m256i x)
{
  if (vnni)
    return x16_vnni_dot4 (s, w.v[0], x);
  const __m256i p16 = _mm256_maddubs_epi16 (w.v[1], _mm256_sign_epi8 (x, w.v[0]));
  s = _mm256_add_epi32 (s, _mm256_madd_epi16 (p16, _mm256_set1_epi16 (1)));
  __asm__ ("" : "+x" (s));
  return s;
}

/* A half's block: dot_q8_0's acc + (float) sumi * (d_w * d_x) per row. */
INLINE __m256
add_block (int vnni, __m256 acc, __m256i sumi, int32_t bias, const uint8_t *pb, int h, float dx)
{
  (void) vnni, (void) bias;
  return x16_add_term_dwdx (acc, sumi, pb + LLM_Q8_0X16_D_OFFSET + 16 * h, dx);
}

/* A block's products for both halves (s[h][t]), a token's activations
 * loaded once per block, or for half h (s[t]). */
#define SUMS_BOTH(RN, VNNI) \
  UNROLL for (int k = 0; k < 8; k++) { \
    const W8 w0 = load_w (VNNI, pb, k, 0), w1 = load_w (VNNI, pb, k, 1); \
    UNROLL for (int t = 0; t < (RN); t++) { \
      const __m256i x = acts (X16_QS (t, b), k); \
      s[0][t] = dot4 (VNNI, s[0][t], w0, x); \
      s[1][t] = dot4 (VNNI, s[1][t], w1, x); \
    } \
  }
#define SUMS_HALF(RN, VNNI) \
  UNROLL for (int k = 0; k < 8; k++) { \
    const W8 w = load_w (VNNI, pb, k, h); \
    UNROLL for (int t = 0; t < (RN); t++) \
      s[t] = dot4 (VNNI, s[t], w, acts (X16_QS (t, b), k)); \
  }

#define BOTH(name, RN, VNNI) \
  X16_TILE_BOTH (name, RN, VNNI, LLM_Q8_0X16_BLOCK_BYTES, x16_start_bias, SUMS_BOTH, add_block)
#define HALVES(name, RN, VNNI) \
  X16_TILE_HALVES (name, RN, VNNI, LLM_Q8_0X16_BLOCK_BYTES, x16_start_bias, SUMS_HALF, \
      add_block)

/* VNNI: 1..3 tokens, both halves. */
#define VNNI_RN 3
BOTH (vnni_1, 1, 1) BOTH (vnni_2, 2, 1) BOTH (vnni_3, 3, 1)
static const X16TileFn tiles_vnni[VNNI_RN] = { vnni_1, vnni_2, vnni_3 };

/* Plain: 1..2 tokens both halves, 3..5 in halves (two passes). */
#define PLAIN_RN 5
BOTH (plain_1, 1, 0) BOTH (plain_2, 2, 0)
HALVES (plain_3, 3, 0) HALVES (plain_4, 4, 0) HALVES (plain_5, 5, 0)
static const X16TileFn tiles_plain[PLAIN_RN] = { plain_1, plain_2, plain_3, plain_4, plain_5 };
static const uint8_t passes_plain[PLAIN_RN] = { 1, 1, 2, 2, 2 };

/* Signed products: no offset to take off. */
X16_AVX2_PRODUCTS (q8_0x16_plain, .tiles = tiles_plain, .rn = PLAIN_RN, .passes = passes_plain,
    .block_bytes = LLM_Q8_0X16_BLOCK_BYTES, .offset = 0, .spread = true)
X16_AVX2_PRODUCTS (q8_0x16_vnni, .tiles = tiles_vnni, .rn = VNNI_RN,
    .block_bytes = LLM_Q8_0X16_BLOCK_BYTES, .offset = 128, .spread = true)

LlmQ8x16Fn
llm_avx2_q8_0x16_fn (void)
{
  return llm_cpu_has_avx_vnni () ? X16_FOR_CPU (q8_0x16_vnni) : X16_FOR_CPU (q8_0x16_plain);
}

LlmQ8x16Fn
llm_avx2_q8_0x16_hw_fn (void)
{
  return llm_cpu_has_avx_vnni () ? X16_HW (q8_0x16_vnni) : X16_HW (q8_0x16_plain);
}
