/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed Q8_0 layout of q8_0x16.h: its size, the pack and its
 * inverse, and the scalar reference kernel over it, all x16-layout.h's
 * over Q8_0's block. Pure C, any CPU; the SIMD kernels are in
 * q8_0x16-avx2.c and q8_0x16-avx512.c. */
#include "q8_0x16.h"
#include "x16-layout.h"

#include "quantize.h"

/* dot_q8_0's integer sum, taking the stored w + 128 back to w. */
static int
block_sumi (const uint8_t *pb, size_t r, const int8_t *q)
{
  int sumi = 0;
  for (size_t j = 0; j < LLM_QK8_0; j++)
    sumi += (int8_t) (pb[x16_qs_offset (r, j)] ^ 0x80) * q[j];
  return sumi;
}

/* dot_q8_0's order: (float) sumi * (d_w * d_x). */
static float
block_term (int sumi, float dw, float dx)
{
  return (float) sumi * (dw * dx);
}

/* Each code byte XORed with 0x80, so the kernels read it as the unsigned
 * code + 128. */
static const X16Format Q8_0 = { .qs_bytes = LLM_QK8_0, .flip = 0x80,
  .block_sumi = block_sumi, .block_term = block_term };

_Static_assert (LLM_Q8_0X16_ROWS == X16_ROWS, "x16-layout.h packs 16-row tiles");
_Static_assert (LLM_Q8_0X16_BLOCK_BYTES == X16_ROWS * sizeof (LlmBlockQ8_0)
    && LLM_Q8_0X16_D_OFFSET == X16_ROWS * LLM_QK8_0, "q8_0x16.h's block is x16-layout.h's");

X16_LAYOUT_FNS (q8_0x16, &Q8_0)
