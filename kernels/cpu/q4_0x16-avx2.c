/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/FMA/F16C kernels over the packed Q4_0 layout of q4_0x16.h, for
 * every token count, with an AVX-VNNI variant. Built with -mavx2 -mfma
 * -mf16c and reached only after the caller's CPU check.
 *
 * A 32-byte load of half a block's vector holds 4 nibble bytes of each of
 * 8 rows, one row per 32-bit lane: ANDed with 0x0f, 4 values of each row,
 * shifted right by 4 the 4 values 16 further on. Against the token's 4
 * matching activation bytes in each lane (one 8-byte broadcast serves a
 * vector pair, as is and with lane pairs swapped), each lane gathers its
 * row's products:
 *
 * - plain AVX2: vpmaddubsw gives pair sums in int16; the block's 8 of them
 *   are added in int16 (at most 8 * 2 * 15 * 127 = 30480, no overflow)
 *   and one vpmaddwd widens them: 1 + 1/8 multiplies per 32 products;
 * - AVX-VNNI: vpdpbusd adds each lane's 4 products into its int32 sum, one
 *   instruction per 32 products and no int16 step.
 *
 * Each sum starts from the token's bias (-8 * its sum of codes), so it
 * ends at dot_q4_0's sumi; then per block, as dot_q4_0:
 * acc += ((float) sumi * d_w) * d_x, one rounding per operation.
 *
 * Per token and 16-row block that is 16 multiplies (VNNI; plain 18) and 4
 * vmulps on Zen 5's two multiply pipes: 10 cycles at best, twice the
 * AVX-512 kernel's 5. Measured in cache: about 13 (VNNI) and 17 (plain;
 * 21 before its int16 sums were kept in order, see X16_KEEP).
 *
 * Zen 3 (plain only) is bound by issue, not by its multipliers. Measured
 * there: vpmaddubsw and vmulps share two pipes (8 of each take as long as
 * 16 vpmaddubsw), vpshufd runs beside them, and the 4-token tile issues
 * about 70 vector instructions a token-block, 22 on those pipes: 11
 * cycles of multiplies, 17.5 of issue at 4 a cycle. A loop of the same
 * instructions over blocks in L1 or L2 ran at 18-19 cycles (6.0-6.3 ns at
 * the 3.0 GHz a chain of dependent adds shows), the tile itself at 20-23
 * without its prefetches, which cost 10-13% more in cache. Not faster
 * there: activations broadcast once per token tile and read by
 * vpmaddubsw from memory (8-14% slower: 256 bytes a token-block of
 * loads), nor both halves of a block at once for 2 to 4 tokens (so one
 * broadcast serves two vectors: 4.8-4.9 ns a token-block for the integer
 * part against 4.6). */
#include "q4_0x16.h"
#include "x16-avx2.h"

#include <immintrin.h>
#include <string.h>

#include "isa.h"
#include "quantize.h"

/* @s plus the pair's products. VNNI: int32 sums (started from the bias);
 * plain: int16 pair sums (@s unused for pair 0). */
INLINE __m256i
dot_pair (int vnni, int p, const __m256i w[4], const __m256i x[4], __m256i s)
{
  if (vnni)
    return x16_nibble_dot_vnni (s, w, x);
  __m256i p16 = x16_nibble_dot16 (w, x);
  p16 = p == 0 ? p16 : _mm256_add_epi16 (s, p16);
  X16_KEEP (p16);
  return p16;
}

INLINE __m256i
start_sum (int vnni, int32_t bias)
{
  return vnni ? _mm256_set1_epi32 (bias) : _mm256_setzero_si256 ();
}

/* A half's block: dot_q4_0's acc + ((float) sumi * d_w) * d_x per row. */
INLINE __m256
add_block (int vnni, __m256 acc, __m256i s, int32_t bias, const uint8_t *pb, int h, float dx)
{
  const __m256i sumi = vnni ? s : _mm256_add_epi32 (_mm256_madd_epi16 (s, _mm256_set1_epi16 (1)),
      _mm256_set1_epi32 (bias));
  const __m256 dw = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *)
          (pb + LLM_Q4_0X16_D_OFFSET + 16 * h)));
  return _mm256_add_ps (acc, _mm256_mul_ps (_mm256_mul_ps (_mm256_cvtepi32_ps (sumi), dw),
          _mm256_set1_ps (dx)));
}

/* A block's products for both halves (s[h][t]), or for half h (s[t]). */
#define SUMS_BOTH(RN, VNNI) X16_NIBBLE_SUMS_BOTH (RN, VNNI, x16_nibble_pair, dot_pair)
#define SUMS_HALF(RN, VNNI) X16_NIBBLE_SUMS_HALF (RN, VNNI, x16_nibble_pair, dot_pair)

/* Plain: more than 4 tokens go 3 to a token tile (the 2-token tiles
 * ending a product), not 4 in halves. Zen 3, taking turns in one process
 * over 100 MB of 246M's feed-forward shapes, two threads, in runs of 8
 * to 12 rounds: 7 to 16 tokens 0.91-0.99x the time, 32 to 128 tokens
 * 0.95-0.97x; 4 tokens alone stay one tile (2 + 2 took 1.05x). */
X16_NIBBLE_KERNELS (q4_0x16, LLM_Q4_0X16_BLOCK_BYTES, 8, start_sum,
    SUMS_BOTH, SUMS_HALF, add_block, NULL, NULL, 3)
