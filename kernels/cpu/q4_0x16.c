/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed Q4_0 layout of q4_0x16.h: its size, the pack and its
 * inverse, and the scalar reference kernel over it, all x16-layout.h's
 * over Q4_0's block. Pure C, any CPU; the SIMD kernels are in
 * q4_0x16-avx2.c and q4_0x16-avx512.c. */
#include "q4_0x16.h"
#include "x16-layout.h"

#include "quantize.h"

/* dot_q4_0's integer sum: each byte holds value j in its low nibble and
 * value 16 + j in its high one. */
static int
block_sumi (const uint8_t *pb, size_t r, const int8_t *q)
{
  int sumi = 0;
  for (size_t j = 0; j < LLM_QK4_0 / 2; j++) {
    const uint8_t v = pb[x16_qs_offset (r, j)];
    sumi += ((v & 0x0f) - 8) * q[j];
    sumi += ((v >> 4) - 8) * q[j + LLM_QK4_0 / 2];
  }
  return sumi;
}

/* dot_q4_0's order: ((float) sumi * d_w) * d_x. */
static float
block_term (int sumi, float dw, float dx)
{
  return (float) sumi * dw * dx;
}

/* The nibble bytes are stored as they are. */
static const X16Format Q4_0 = { .qs_bytes = LLM_QK4_0 / 2, .flip = 0x00,
  .block_sumi = block_sumi, .block_term = block_term };

_Static_assert (LLM_Q4_0X16_ROWS == X16_ROWS, "x16-layout.h packs 16-row tiles");
_Static_assert (LLM_Q4_0X16_BLOCK_BYTES == X16_ROWS * sizeof (LlmBlockQ4_0)
    && LLM_Q4_0X16_D_OFFSET == X16_ROWS * LLM_QK4_0 / 2, "q4_0x16.h's block is x16-layout.h's");

X16_LAYOUT_FNS (q4_0x16, &Q4_0)
