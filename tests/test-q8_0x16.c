/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q8_0 weights packed 16 rows to a tile (kernels/cpu/q8_0x16.h): the
 * layout's size, packing in pieces, unpacking rows back, and every kernel
 * over it (scalar, AVX2 with and without AVX-VNNI, AVX-512) equal bit for
 * bit to the scalar reference dot_q8_0 (llm_matvec / llm_matmul of the
 * scalar table) for every token count, row range and way of sharing rows
 * among threads. Random inputs come from fixed seeds. What every layout's
 * suite checks is llm-check.c's llm_test_layout_suite, over Q8_0X16 below;
 * this file adds what only this layout has. */
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/q8_0x16.h"
#include "cpu/quantize.h"

static const guint32 TYPES[] = { LLM_TYPE_Q8_0 };

/* The layout, with weights of every code byte (-128 too, which no
 * quantiser writes but a file may hold) and scales of both signs and
 * several magnitudes, and every tenth token's activation codes at the
 * extremes (+-127), so the largest integer sums are exercised; its kernels
 * (AVX2 with and without AVX-VNNI) equal to the scalar reference bit for
 * bit; widths of one block to 88, 1..20, 33, 64 and 130 tokens. */
static const LlmTestLayout Q8_0X16 = {
  .types = TYPES, .n_types = 1, .bytes = llm_q8_0x16_bytes, .pack = llm_q8_0x16_pack,
  .unpack_row = llm_q8_0x16_unpack_row, .ref = llm_q8_0x16_ref, .avx2 = llm_avx2_q8_0x16_fn,
  .avx512 = llm_avx512_q8_0x16_fn, .avx2_apart = TRUE,
  .random_weights = llm_test_random_blocks, .extreme_every = 10,
  .want = llm_test_scalar_products,
  LLM_TEST_X16_SHAPES, .prepared_rows = TRUE,
};

/* --- layout --- */

START_TEST (test_packed_block_holds_each_rows_codes_by_4_flipped_then_the_16_scales)
{
  /* Row r's code j is r * 8 + j - 128 (all 16 x 32 byte values, wrapping),
   * its d 0x3c00 + r. */
  const size_t rows = 16, n = 32;
  LlmBlockQ8_0 w[16];
  for (size_t r = 0; r < rows; r++) {
    w[r].d = (uint16_t) (0x3c00 + r);
    for (size_t j = 0; j < 32; j++)
      w[r].qs[j] = (int8_t) (uint8_t) (r * 8 + j - 128);
  }
  uint8_t *p = llm_test_pack (&Q8_0X16, w, sizeof w[0], rows, n);
  /* The scales after the codes (512 bytes), as they are, in row order. */
  llm_test_assert_x16_scales (p + LLM_Q8_0X16_D_OFFSET, 0x3c00);
  /* A stored byte is the code ^ 0x80: code r * 8 + j - 128 reads r * 8 + j. */
#define CODE(r, j) ((uint8_t) ((r) * 8 + (j)))
  /* Vector 0: row 0's qs[0..3], row 1's qs[4..7], row 2's qs[0..3]. */
  const uint8_t v0[] = { CODE (0, 0), CODE (0, 1), CODE (0, 2), CODE (0, 3), CODE (1, 4),
    CODE (1, 5), CODE (1, 6), CODE (1, 7), CODE (2, 0), CODE (2, 1), CODE (2, 2), CODE (2, 3) };
  ck_assert (memcmp (p, v0, sizeof v0) == 0);
  /* Vector 1: the other group of each row: row 0's qs[4..7], row 1's
   * qs[0..3]. */
  const uint8_t v1[] = { CODE (0, 4), CODE (0, 5), CODE (0, 6), CODE (0, 7), CODE (1, 0),
    CODE (1, 1), CODE (1, 2), CODE (1, 3) };
  ck_assert (memcmp (p + 64, v1, sizeof v1) == 0);
  /* Vectors 6 and 7: groups 6 and 7 (qs[24..31]); row 15 (odd) has group
   * 7 in vector 6 and group 6 in vector 7. */
  ck_assert_uint_eq (p[384], CODE (0, 24));
  ck_assert_uint_eq (p[384 + 4 * 15], CODE (15, 28));
  ck_assert_uint_eq (p[448 + 4 * 15 + 3], CODE (15, 27));
#undef CODE
  g_free (p);
}
END_TEST

static Suite *
q8_0x16_suite (void)
{
  const TTest *const layout_tests[] = {
    test_packed_block_holds_each_rows_codes_by_4_flipped_then_the_16_scales,
    NULL,
  };
  return llm_test_layout_suite ("q8_0x16", &Q8_0X16, layout_tests, NULL);
}

LLM_TEST_MAIN (q8_0x16_suite)
