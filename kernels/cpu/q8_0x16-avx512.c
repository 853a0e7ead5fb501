/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 (F, BW, VL, DQ) + VNNI kernels over the packed Q8_0 layout of
 * q8_0x16.h, for every token count. Built with those instruction sets and
 * reached only after the caller's CPU check.
 *
 * A 64-byte load of a block's vector holds 4 code bytes (w + 128) of each
 * of the tile's 16 rows, one row per 32-bit lane. vpdpbusd multiplies
 * those (unsigned) by the token's 4 matching activation codes in each
 * lane (one 8-byte broadcast serves a vector pair, as is and with lane
 * pairs swapped) and adds each lane's 4 products into its int32 sum, so 8
 * of them give each of the 16 rows its whole block sum, starting from the
 * token's bias (-128 * its sum of codes): dot_q8_0's sumi. Then per
 * block, as dot_q8_0: acc += (float) sumi * (d_w * d_x), one rounding per
 * operation, never fused. The 8 weight vectors are loaded once per block
 * and token tile and used by up to 9 tokens.
 *
 * What bounds it (Zen 5, which runs vpdpbusd and vmulps on the same two
 * pipes, measured at 1.9 a cycle, and issues 2 vector loads a cycle): per
 * token and 16-row block, 8 vpdpbusd + 2 vmulps are 5.2 cycles of
 * multiplies; 4 activation broadcasts + the bias + d_x are 3 cycles of
 * loads. Measured in cache (tools/bench-q4_0x16 --type q8_0 --in-cache,
 * cycles at the 4.2 GHz the core ran at): 6.2-6.3 cycles a token-block
 * from 8 tokens on, 7.1 at 4, the rest dependency chains and loop overhead;
 * token tiles of 10 or 12 (5.9-6.0 at 12 and more) or a second chain of
 * sums at more than 6 tokens did not change that. (The activations are
 * now read block by block from one array, x16_act_tile, which took Q4_0's
 * spilled token pointers out; here it measured within noise.) One token is bound by memory instead: 544 bytes a
 * block at 25 GB/s a thread is about 90 cycles, next to 15 of computing;
 * at 16 tokens the two are about equal (16 x 6.3 cycles), and in
 * bench-q4_0x16's runs a product of 16 tokens over weights in memory took
 * 1.2x to 1.9x the time of one (the more bandwidth the machine had at the
 * time, the more), 8 tokens 1.1x. */
#include "q8_0x16.h"
#include "x16-avx512.h"

#include <immintrin.h>
#include <string.h>

#include "quantize.h"

/* A block's products: even vector pairs into s[t][0], odd ones into
 * s[t][CH - 1] (3% faster at 4 tokens in cache than one chain). */
#define SUMS(RN, CH) \
  UNROLL for (int p = 0; p < 4; p++) { \
    const __m512i wa = _mm512_loadu_si512 (pb + 128 * p); \
    const __m512i wb = _mm512_loadu_si512 (pb + 128 * p + 64); \
    UNROLL for (int t = 0; t < (RN); t++) { \
      const __m512i x = X16_BCAST8_512 (X16_QS (t, b) + 8 * p); \
      s[t][p % CH] = _mm512_dpbusd_epi32 (s[t][p % CH], wa, x); \
      s[t][p % CH] = _mm512_dpbusd_epi32 (s[t][p % CH], wb, X16_SWAP_PAIRS_512 (x)); \
    } \
  }

/* dot_q8_0's order: (float) sumi * (d_w * d_x). */
X16_TILES_512 (tiles, LLM_Q8_0X16_BLOCK_BYTES, LLM_Q8_0X16_D_OFFSET, SUMS, x16_term_dwdx_512)

/* Where the engine finds the hardware's fetching faster for a step, two
 * tokens (a verification of one proposal, two streams) read faster so
 * too: bench-q4_0x16 --fetch --type q8_0 on Zen 5 (8 layers of 246M's
 * feed-forward shapes, two threads, both ways taking turns), 2 tokens
 * 1.04x faster (median of seven runs, 0.99-1.09x; the same code both
 * ways gave 0.98-1.01x), one token 1.08-1.28x; but 3 tokens 0.92-1.01x
 * and 4 to 8 tokens 0.64-0.95x, where the kernel's own fetching overlaps
 * memory with the larger computing. */
X16_AVX512_PRODUCTS (q8_0x16, 2, .tiles = tiles, .rn = X16_RN_512,
    .block_bytes = LLM_Q8_0X16_BLOCK_BYTES, .offset = 128, .spread = true)

#if defined(LLM_HAVE_AMX)
/* x16-amx.h's unpacking: vector k holds group k in its even lanes (rows)
 * and group k ^ 1 in its odd ones, so a blend with vector k ^ 1 on the
 * odd lanes gives group k of every row; the XOR takes the codes back to
 * their signed values. */
static void
amx_unpack (size_t nb, const uint8_t *tile, int8_t *codes, float *dw, size_t dist)
{
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = tile + b * LLM_Q8_0X16_BLOCK_BYTES;
    x16_prefetch (pb, (LLM_Q8_0X16_BLOCK_BYTES + 63) / 64, dist);
    __m512i v[8];
    UNROLL for (int k = 0; k < 8; k++)
      v[k] = _mm512_loadu_si512 (pb + 64 * k);
    UNROLL for (int k = 0; k < 8; k++)
      _mm512_storeu_si512 (codes + 512 * b + 64 * k,
          _mm512_xor_si512 (_mm512_mask_blend_epi32 (0xaaaa, v[k], v[k ^ 1]), flip));
    _mm512_storeu_ps (dw + 16 * b, _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *)
                (pb + LLM_Q8_0X16_D_OFFSET))));
  }
}

static const X16AmxFormat amx = { amx_unpack, LLM_Q8_0X16_BLOCK_BYTES, true };
X16_AMX_PRODUCTS (q8_0x16, &amx)
#endif

X16_AVX512_LOOKUPS (q8_0x16)
