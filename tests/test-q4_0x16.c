/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Q4_0 weights packed 16 rows to a tile (kernels/cpu/q4_0x16.h): the
 * layout's size, packing in pieces, unpacking rows back, and every kernel
 * over it (scalar, AVX2, AVX-512) equal bit for bit to the scalar
 * reference llm_matvec / llm_matmul for every token count, row range and
 * way of sharing rows among threads. Random inputs come from fixed seeds.
 * What every layout's suite checks is llm-check.c's llm_test_layout_suite,
 * over Q4_0X16 below; this file adds what only this layout has. */
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "cpu/q4_0x16.h"
#include "cpu/isa.h"
#include "cpu/quantize.h"

static const guint32 TYPES[] = { LLM_TYPE_Q4_0 };

/* The layout, with weights of every nibble value and scales of both
 * signs and several magnitudes, its kernels equal to the scalar reference
 * bit for bit; widths of one block to 65, 1..20, 33, 47 and 128 tokens. */
static const LlmTestLayout Q4_0X16 = {
  .types = TYPES, .n_types = 1, .bytes = llm_q4_0x16_bytes, .pack = llm_q4_0x16_pack,
  .unpack_row = llm_q4_0x16_unpack_row, .ref = llm_q4_0x16_ref, .avx2 = llm_avx2_q4_0x16_fn,
  .avx512 = llm_avx512_q4_0x16_fn,
  .random_weights = llm_test_random_blocks, .want = llm_test_scalar_products,
  .widths = LLM_TEST_SIZES (32, 64, 2048 + 32),
  .token_counts = LLM_TEST_SIZES (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
      19, 20, 33, 47, 128),
  .shared_token_counts = LLM_TEST_SIZES (1, 3, 9, 20, 33),
};

/* --- layout --- */

START_TEST (test_packed_block_holds_each_rows_nibble_bytes_by_4_then_the_16_scales)
{
  /* Row r's byte j is r * 16 + j, its d is 0x3c00 + r. */
  const size_t rows = 16, n = 32;
  LlmBlockQ4_0 w[16];
  for (size_t r = 0; r < rows; r++) {
    w[r].d = (uint16_t) (0x3c00 + r);
    for (size_t j = 0; j < 16; j++)
      w[r].qs[j] = (uint8_t) (r * 16 + j);
  }
  uint8_t *p = llm_test_pack (&Q4_0X16, w, sizeof w[0], rows, n);
  /* The scales after the codes (256 bytes), as they are, in row order. */
  llm_test_assert_x16_scales (p + LLM_Q4_0X16_D_OFFSET, 0x3c00);
  /* Vector 0: row 0's qs[0..3], row 1's qs[4..7], row 2's qs[0..3]. */
  const uint8_t v0[] = { 0, 1, 2, 3, 20, 21, 22, 23, 32, 33, 34, 35 };
  ck_assert (memcmp (p, v0, sizeof v0) == 0);
  /* Vector 1: the other group of each row: row 0's qs[4..7], row 1's
   * qs[0..3]. */
  const uint8_t v1[] = { 4, 5, 6, 7, 16, 17, 18, 19 };
  ck_assert (memcmp (p + 64, v1, sizeof v1) == 0);
  /* Vectors 2 and 3: groups 2 and 3 (qs[8..15]); row 15 (odd) has group 3
   * in vector 2. */
  ck_assert_uint_eq (p[128], 8);
  ck_assert_uint_eq (p[128 + 4 * 15], 15 * 16 + 12);
  ck_assert_uint_eq (p[192 + 4 * 15 + 3], 15 * 16 + 11);
  g_free (p);
}
END_TEST

/* The runs with LLM_X16_ONE_TOKEN_AHEAD (tests/meson.build) check the
 * product it names: the choice must follow the variable. */
START_TEST (test_one_token_prefetch_follows_the_environment)
{
  const char *ahead = g_getenv ("LLM_X16_ONE_TOKEN_AHEAD");
  const LlmX16Ahead want = ahead == NULL ? LLM_X16_AHEAD_AUTO
      : strcmp (ahead, "near") == 0 ? LLM_X16_AHEAD_NEAR
      : strcmp (ahead, "far") == 0 ? LLM_X16_AHEAD_FAR
      : strcmp (ahead, "none") == 0 ? LLM_X16_AHEAD_NONE : LLM_X16_AHEAD_AUTO;
  ck_assert_int_eq (llm_cpu_x16_one_token_ahead (), want);
  if (want == LLM_X16_AHEAD_NEAR || want == LLM_X16_AHEAD_FAR)
    ck_assert_int_eq (llm_cpu_x16_one_token_near (), want == LLM_X16_AHEAD_NEAR);
  /* Set, the environment leaves the engine no choice of its own. */
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  if (want != LLM_X16_AHEAD_AUTO)
    ck_assert (!llm_prepared_fetch_choice (kern, LLM_TYPE_Q4_0));
  else if (llm_prepared_bytes (kern, LLM_TYPE_Q4_0, 16, 32) > 0)
    ck_assert (llm_prepared_fetch_choice (kern, LLM_TYPE_Q4_0));
}
END_TEST

static Suite *
q4_0x16_suite (void)
{
  const TTest *const layout_tests[] = {
    test_packed_block_holds_each_rows_nibble_bytes_by_4_then_the_16_scales,
    test_one_token_prefetch_follows_the_environment,
    NULL,
  };
  return llm_test_layout_suite ("q4_0x16", &Q4_0X16, layout_tests, NULL);
}

LLM_TEST_MAIN (q4_0x16_suite)
