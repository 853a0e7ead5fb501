/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed Q5_0 layout of q5_0x16.h: its size, the pack and its
 * inverse, and the scalar reference kernel over it, all x16-layout.h's
 * over Q5_0's block. Pure C, any CPU; the SIMD kernels are in
 * q5_0x16-avx2.c and q5_0x16-avx512.c. */
#include "q5_0x16.h"
#include "x16-layout.h"

#include "quantize.h"

/* Value j's 5-bit code u from the packed nibbles and fifth bits. */
static int
code (const uint8_t *pb, size_t r, size_t j)
{
  const uint8_t v = pb[x16_qs_offset (r, j % 16)];
  const uint8_t *h = pb + LLM_Q5_0X16_HIGH_OFFSET + 4 * r;
  const unsigned bit = x16_high_bit (r, j);
  return (j < 16 ? v & 0x0f : v >> 4) | ((h[bit / 8] >> bit % 8) & 1) << 4;
}

/* dot_q5_0's integer sum: codes u - 16. */
static int
block_sumi (const uint8_t *pb, size_t r, const int8_t *q)
{
  int sumi = 0;
  for (size_t j = 0; j < LLM_QK5_0; j++)
    sumi += (code (pb, r, j) - 16) * q[j];
  return sumi;
}

/* dot_q5_0's order: (d_w * d_x) * (float) sumi. */
static float
block_term (int sumi, float dw, float dx)
{
  return (dw * dx) * (float) sumi;
}

/* The nibble bytes are stored as they are, the fifth bits reordered. */
static const X16Format Q5_0 = { .qs_bytes = LLM_QK5_0 / 2, .flip = 0x00, .high_bytes = 4,
  .block_sumi = block_sumi, .block_term = block_term };

_Static_assert (LLM_Q5_0X16_ROWS == X16_ROWS, "x16-layout.h packs 16-row tiles");
_Static_assert (LLM_Q5_0X16_BLOCK_BYTES == X16_ROWS * sizeof (LlmBlockQ5_0)
    && LLM_Q5_0X16_HIGH_OFFSET == X16_ROWS * LLM_QK5_0 / 2
    && LLM_Q5_0X16_D_OFFSET == X16_ROWS * (LLM_QK5_0 / 2 + 4),
    "q5_0x16.h's block is x16-layout.h's");

X16_LAYOUT_FNS (q5_0x16, &Q5_0)
