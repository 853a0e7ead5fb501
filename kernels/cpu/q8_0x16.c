/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed Q8_0 layout of q8_0x16.h: its size, the pack and its
 * inverse, and the scalar reference kernel over it. Pure C, any CPU; the
 * SIMD kernels are in q8_0x16-avx2.c and q8_0x16-avx512.c. */
#include "q8_0x16.h"
#include "claim.h"

#include <stdatomic.h>
#include <string.h>

#include "fp16.h"
#include "quantize.h"

enum {
  ROWS = LLM_Q8_0X16_ROWS,
  PB = LLM_Q8_0X16_BLOCK_BYTES,
  D_OFF = LLM_Q8_0X16_D_OFFSET,
};

/* Where code qs[j] of row @r (of its tile) lies in a block of the tile:
 * group g = j / 4 goes to vector 2 (g / 2) + ((r & 1) ^ (g & 1)). */
static size_t
qs_offset (size_t r, size_t j)
{
  const size_t g = j / 4;
  return 64 * (2 * (g / 2) + ((r & 1) ^ (g & 1))) + 4 * r + j % 4;
}

/* 4 bytes from @src to @dst, each XORed with 0x80 (code <-> code + 128):
 * its own inverse. */
static void
flip4 (void *dst, const void *src)
{
  uint32_t v;
  memcpy (&v, src, 4);
  v ^= 0x80808080u;
  memcpy (dst, &v, 4);
}

size_t
llm_q8_0x16_bytes (size_t rows, size_t n)
{
  return (rows + ROWS - 1) / ROWS * (n / LLM_QK8_0) * PB;
}

void
llm_q8_0x16_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
    size_t tile1, void *out)
{
  const size_t nb = n / LLM_QK8_0;
  for (size_t tile = tile0; tile < tile1; tile++) {
    uint8_t *o = (uint8_t *) out + tile * nb * PB;
    for (size_t b = 0; b < nb; b++, o += PB) {
      for (size_t r = 0; r < ROWS; r++) {
        const size_t row = tile * ROWS + r;
        if (row >= rows) {
          /* Zero rows (codes 0, stored as 0x80; d = 0), never read from
           * @w. */
          for (size_t j = 0; j < LLM_QK8_0; j += 4)
            memset (o + qs_offset (r, j), 0x80, 4);
          memset (o + D_OFF + 2 * r, 0, 2);
          continue;
        }
        const LlmBlockQ8_0 *blk = (const LlmBlockQ8_0 *) ((const uint8_t *) w + row * row_bytes) + b;
        for (size_t j = 0; j < LLM_QK8_0; j += 4)
          flip4 (o + qs_offset (r, j), blk->qs + j);
        memcpy (o + D_OFF + 2 * r, &blk->d, 2);
      }
    }
  }
}

void
llm_q8_0x16_unpack_row (const void *packed, size_t n, size_t r, void *out)
{
  const size_t nb = n / LLM_QK8_0;
  const uint8_t *p = (const uint8_t *) packed + r / ROWS * nb * PB;
  LlmBlockQ8_0 *o = out;
  for (size_t b = 0; b < nb; b++, p += PB) {
    for (size_t j = 0; j < LLM_QK8_0; j += 4)
      flip4 (o[b].qs + j, p + qs_offset (r % ROWS, j));
    memcpy (&o[b].d, p + D_OFF + 2 * (r % ROWS), 2);
  }
}

/* dot_q8_0 of row @r of a tile (blocks at @tile) with @x, reading the
 * packed bytes: the same integer sum per block and the same float
 * expression, so the same result. */
static float
dot_packed (size_t nb, const uint8_t *tile, size_t r, const LlmBlockQ8_0 *x)
{
  float sum = 0.0f;
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = tile + b * PB;
    int sumi = 0;
    for (size_t j = 0; j < LLM_QK8_0; j++)
      sumi += (int8_t) (pb[qs_offset (r, j)] ^ 0x80) * x[b].qs[j];
    uint16_t d;
    memcpy (&d, pb + D_OFF + 2 * r, 2);
    sum += (float) sumi * (llm_fp16_to_f32 (d) * llm_fp16_to_f32 (x[b].d));
  }
  return sum;
}

bool
llm_q8_0x16_ref (size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step)
{
  (void) rows;
  const size_t nb = n / LLM_QK8_0;
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r++) {
      const uint8_t *tile = (const uint8_t *) packed + r / ROWS * nb * PB;
      for (size_t t = 0; t < n_tok; t++)
        y[t * ldy + r] = dot_packed (nb, tile, r % ROWS,
            (const LlmBlockQ8_0 *) ((const uint8_t *) xq + t * xs));
    }
  }
  return true;
}

/* Builds without the SIMD files still link every caller of the lookups. */
#ifndef LLM_HAVE_AVX2
LlmQ8x16Fn
llm_avx2_q8_0x16_fn (void)
{
  return NULL;
}
#endif

#ifndef LLM_HAVE_AVX512
LlmQ8x16Fn
llm_avx512_q8_0x16_fn (void)
{
  return NULL;
}
#endif
