/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q5_0 weights packed 16 rows to a tile (kernels/cpu/q5_0x16.h): the
 * layout's size, packing in pieces, unpacking rows back, and every kernel
 * over it (scalar, AVX2 with and without AVX-VNNI, AVX-512) equal bit for
 * bit to the scalar reference dot_q5_0 (llm_matvec / llm_matmul of the
 * scalar table) for every token count, row range and way of sharing rows
 * among threads. Random inputs come from fixed seeds. What every layout's
 * suite checks is llm-check.c's llm_test_layout_suite, over Q5_0X16 below;
 * this file adds what only this layout has: the plane of fifth bits. */
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/q5_0x16.h"
#include "cpu/quantize.h"

static const guint32 TYPES[] = { LLM_TYPE_Q5_0 };

/* The layout, with random nibble and fifth-bit bytes (so every code 0..31)
 * and scales of both signs and several magnitudes, and every tenth token's
 * activation codes at the extremes (+-127), so the largest integer sums
 * (31 * 127 a product, the int16 pair sums of plain AVX2 near their limit)
 * are exercised; widths of one block to 88, 1..20, 33, 64 and 130 tokens. */
static const LlmTestLayout Q5_0X16 = {
  .types = TYPES, .n_types = 1, .bytes = llm_q5_0x16_bytes, .pack = llm_q5_0x16_pack,
  .unpack_row = llm_q5_0x16_unpack_row, .ref = llm_q5_0x16_ref, .avx2 = llm_avx2_q5_0x16_fn,
  .avx512 = llm_avx512_q5_0x16_fn, .avx2_apart = TRUE,
  .random_weights = llm_test_random_blocks, .extreme_every = 10,
  .want = llm_test_scalar_products,
  LLM_TEST_X16_SHAPES, .prepared_rows = TRUE,
};

/* --- layout --- */

START_TEST (test_packed_block_holds_q4_0s_nibbles_then_fifth_bits_by_vector_then_scales)
{
  /* Row r has only value j = r + 9 (mod 32) with its fifth bit set, nibble
   * byte qs[i] = r * 16 + i (wrapping), d 0x3c00 + r. */
  const size_t rows = 16, n = 32;
  LlmBlockQ5_0 w[16];
  for (size_t r = 0; r < rows; r++) {
    w[r].d = (uint16_t) (0x3c00 + r);
    const uint32_t bit = 1u << ((r + 9) % 32);
    for (size_t i = 0; i < 4; i++)
      w[r].qh[i] = (uint8_t) (bit >> 8 * i);
    for (size_t i = 0; i < 16; i++)
      w[r].qs[i] = (uint8_t) (r * 16 + i);
  }
  uint8_t *p = llm_test_pack (&Q5_0X16, w, sizeof w[0], rows, n);
  llm_test_assert_x16_scales (p + LLM_Q5_0X16_D_OFFSET, 0x3c00);
  /* The nibbles as q4_0x16.h has them: vector 0 holds row 0's qs[0..3],
   * row 1's qs[4..7]; vector 1 row 0's qs[4..7]. */
  ck_assert_uint_eq (p[0], 0);
  ck_assert_uint_eq (p[4 * 1], 16 + 4);
  ck_assert_uint_eq (p[64], 4);
  /* Each row's one fifth bit: value j = r + 9 is in nibble byte jj = j % 16
   * (high nibble for j >= 16), byte i = jj % 4 of its lane in vector k =
   * 2 (g / 2) + ((r & 1) ^ (g & 1)), g = jj / 4; stored at bit 2 k (+1 for
   * a high nibble) of byte i of the row's word. */
  for (size_t r = 0; r < rows; r++) {
    const size_t j = (r + 9) % 32, jj = j % 16, g = jj / 4;
    const size_t k = 2 * (g / 2) + ((r & 1) ^ (g & 1));
    uint8_t want[4] = { 0 };
    want[jj % 4] = (uint8_t) (1u << (2 * k + j / 16));
    ck_assert (memcmp (p + LLM_Q5_0X16_HIGH_OFFSET + 4 * r, want, 4) == 0);
  }
  g_free (p);
}
END_TEST

static Suite *
q5_0x16_suite (void)
{
  const TTest *const layout_tests[] = {
    test_packed_block_holds_q4_0s_nibbles_then_fifth_bits_by_vector_then_scales,
    NULL,
  };
  return llm_test_layout_suite ("q5_0x16", &Q5_0X16, layout_tests, NULL);
}

LLM_TEST_MAIN (q5_0x16_suite)
