/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lib/token-compress: which rows merge, prune and temporal keep, on rows
 * built so that the answer is known exactly: merged values are means of
 * small integers, similarities are 0 or 1 apart from the row under test. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "token-compress.h"

/* Asserts @n entries of @got equal the @n that follow. */
static void
assert_indices (const guint *got, guint n_got, guint n, ...)
{
  va_list args;
  ck_assert_uint_eq (n_got, n);
  va_start (args, n);
  for (guint i = 0; i < n; i++) {
    guint want = va_arg (args, guint);
    ck_assert_msg (got[i] == want, "index %u: got %u, want %u", i, got[i], want);
  }
  va_end (args);
}

static void
assert_row (const float *row, float x, float y)
{
  ck_assert_msg (row[0] == x && row[1] == y, "row (%g, %g), want (%g, %g)", row[0], row[1],
      x, y);
}

/* ---- target ------------------------------------------------------------- */

START_TEST (test_target_ratio_and_max_tokens_smaller_wins)
{
  ck_assert_uint_eq (llm_token_compress_target (576, 0.25, 0), 144);
  ck_assert_uint_eq (llm_token_compress_target (576, 0.25, 100), 100);
  ck_assert_uint_eq (llm_token_compress_target (576, 0.5, 400), 288);
  ck_assert_uint_eq (llm_token_compress_target (576, 1.0, 64), 64);
  ck_assert_uint_eq (llm_token_compress_target (7, 0.5, 0), 4);
  ck_assert_uint_eq (llm_token_compress_target (10, 1.0, 0), 10);
  ck_assert_uint_eq (llm_token_compress_target (10, 1.0, 20), 10);
}
END_TEST

START_TEST (test_target_keeps_at_least_one_row)
{
  ck_assert_uint_eq (llm_token_compress_target (10, 0.01, 0), 1);
  ck_assert_uint_eq (llm_token_compress_target (1, 0.25, 0), 1);
  ck_assert_uint_eq (llm_token_compress_target (0, 0.25, 0), 0);
  /* out-of-range ratios keep everything rather than nothing */
  ck_assert_uint_eq (llm_token_compress_target (10, 0.0, 0), 10);
  ck_assert_uint_eq (llm_token_compress_target (10, -1.0, 0), 10);
  ck_assert_uint_eq (llm_token_compress_target (10, NAN, 0), 10);
}
END_TEST

START_TEST (test_cosine_of_zero_rows)
{
  const float zero[2] = { 0, 0 }, x[2] = { 3, 0 }, y[2] = { 0, 2 }, mx[2] = { -1, 0 };
  ck_assert_float_eq (llm_token_cosine (zero, zero, 2), 1.0f);
  ck_assert_float_eq (llm_token_cosine (zero, x, 2), 0.0f);
  ck_assert_float_eq (llm_token_cosine (x, y, 2), 0.0f);
  ck_assert_float_eq (llm_token_cosine (x, mx, 2), -1.0f);
  ck_assert_float_eq (llm_token_cosine (x, x, 2), 1.0f);
}
END_TEST

/* ---- merge -------------------------------------------------------------- */

/* A = rows 0, 2; B = rows 1, 3. Row 2 is parallel to row 1 (cosine 1),
 * row 0 nearly parallel to row 3 (0.995), and every other pair is at
 * right angles. */
static const float four_rows[] = {
  1, 0,
  0, 1,
  0, 3,
  2, 0.2f,
};

/* Rows as many as an image tower's take their products from the matrix
 * kernels: 256 rows of 64 in twins (rows 2k and 2k+1 equal, the twins
 * otherwise random) fold each twin into the other, keeping 128 rows of
 * size 2 equal to the twins. */
START_TEST (test_merge_of_many_rows_pairs_their_twins)
{
  enum { N = 256, DIM = 64 };
  g_autofree float *rows = g_new (float, N * DIM), *out = g_new (float, N * DIM);
  g_autofree float *sizes = g_new (float, N);
  g_autoptr (GRand) rand = g_rand_new_with_seed (11);
  for (guint k = 0; k < N / 2; k++)
    for (guint j = 0; j < DIM; j++)
      rows[(2 * k) * DIM + j] = rows[(2 * k + 1) * DIM + j] = (float) g_rand_double_range (rand,
          -1, 1);
  guint n = 0;
  GError *error = NULL;
  ck_assert (llm_token_merge (rows, N, DIM, NULL, N / 2, out, sizes, NULL, &n, &error));
  ck_assert_uint_eq (n, N / 2);
  for (guint k = 0; k < N / 2; k++) {
    ck_assert_float_eq (sizes[k], 2.0f);
    ck_assert_mem_eq (out + k * DIM, rows + (2 * k + 1) * DIM, DIM * sizeof (float));
  }
}
END_TEST

START_TEST (test_merge_folds_the_most_similar_pair_first)
{
  float out[8], sizes[4];
  guint pos[4], n = 0;
  GError *error = NULL;

  ck_assert (llm_token_merge (four_rows, 4, 2, NULL, 3, out, sizes, pos, &n, &error));
  ck_assert_uint_eq (n, 3);
  assert_row (out + 0, 1, 0);
  assert_row (out + 2, 0, 2);          /* (0,1) and (0,3) averaged */
  assert_row (out + 4, 2, 0.2f);
  ck_assert_float_eq (sizes[0], 1);
  ck_assert_float_eq (sizes[1], 2);
  ck_assert_float_eq (sizes[2], 1);
  assert_indices (pos, n, 3, 0, 1, 3);
}
END_TEST

START_TEST (test_merge_keeps_merged_rows_at_their_b_place)
{
  float out[8], sizes[4];
  guint pos[4], n = 0;

  ck_assert (llm_token_merge (four_rows, 4, 2, NULL, 2, out, sizes, pos, &n, NULL));
  ck_assert_uint_eq (n, 2);
  /* row 0 went to row 3's place, after row 1's: input order, not A's */
  assert_row (out + 0, 0, 2);
  assert_row (out + 2, 1.5f, 0.2f / 2);
  ck_assert_float_eq (sizes[0], 2);
  ck_assert_float_eq (sizes[1], 2);
  assert_indices (pos, n, 2, 1, 3);
}
END_TEST

START_TEST (test_merge_averages_by_size)
{
  const float rows[] = { 2, 0, 7, 0 };
  const float in_sizes[] = { 3, 2 };
  float out[4], sizes[2];
  guint pos[2], n = 0;

  ck_assert (llm_token_merge (rows, 2, 2, in_sizes, 1, out, sizes, pos, &n, NULL));
  ck_assert_uint_eq (n, 1);
  assert_row (out, 4, 0);               /* (3 * 2 + 2 * 7) / 5 */
  ck_assert_float_eq (sizes[0], 5);
  assert_indices (pos, n, 1, 1);
}
END_TEST

/* Row 0 is as similar to row 1 as to row 3 (all along x); row 2 is
 * similar to neither, so row 0 is the one that goes, into row 1. */
START_TEST (test_merge_ties_go_to_the_first_partner)
{
  const float rows[] = { 1, 0, 2, 0, 0, 1, 3, 0 };
  float out[8], sizes[4];
  guint pos[4], n = 0;

  ck_assert (llm_token_merge (rows, 4, 2, NULL, 3, out, sizes, pos, &n, NULL));
  ck_assert_uint_eq (n, 3);
  assert_row (out + 0, 1.5f, 0);
  assert_row (out + 2, 0, 1);
  assert_row (out + 4, 3, 0);
  assert_indices (pos, n, 3, 1, 2, 3);
}
END_TEST

/* Eight rows in two clusters, x (magnitudes 1..4) and y (5..8), to a
 * quarter: one round can take only |A| = 4, so a second must run; each
 * cluster ends as one row, the mean of its four, of size 4. */
START_TEST (test_merge_runs_rounds_until_the_target)
{
  const float rows[] = { 1, 0, 2, 0, 3, 0, 4, 0, 0, 5, 0, 6, 0, 7, 0, 8 };
  float out[16], sizes[8];
  guint pos[8], n = 0;

  ck_assert (llm_token_merge (rows, 8, 2, NULL, llm_token_compress_target (8, 0.25, 0), out,
          sizes, pos, &n, NULL));
  ck_assert_uint_eq (n, 2);
  assert_row (out + 0, 2.5f, 0);
  assert_row (out + 2, 0, 6.5f);
  ck_assert_float_eq (sizes[0], 4);
  ck_assert_float_eq (sizes[1], 4);
  assert_indices (pos, n, 2, 3, 7);
}
END_TEST

START_TEST (test_merge_at_full_target_changes_nothing)
{
  const float in_sizes[] = { 2, 1, 5, 1 };
  float out[8], sizes[4];
  guint pos[4], n = 0;

  ck_assert (llm_token_merge (four_rows, 4, 2, in_sizes, 4, out, sizes, pos, &n, NULL));
  ck_assert_uint_eq (n, 4);
  for (guint i = 0; i < 8; i++)
    ck_assert_float_eq (out[i], four_rows[i]);
  for (guint i = 0; i < 4; i++)
    ck_assert_float_eq (sizes[i], in_sizes[i]);
  assert_indices (pos, n, 4, 0, 1, 2, 3);

  /* more than the rows is all of them */
  ck_assert (llm_token_merge (four_rows, 4, 2, NULL, 99, out, sizes, NULL, &n, NULL));
  ck_assert_uint_eq (n, 4);
}
END_TEST

START_TEST (test_merge_one_row_and_no_rows)
{
  const float row[] = { 7, 8 };
  float out[2] = { 0, 0 }, sizes[1] = { 0 };
  guint n = 99;

  ck_assert (llm_token_merge (row, 1, 2, NULL, 0, out, sizes, NULL, &n, NULL));
  ck_assert_uint_eq (n, 1);
  assert_row (out, 7, 8);
  ck_assert_float_eq (sizes[0], 1);

  n = 99;
  ck_assert (llm_token_merge (NULL, 0, 2, NULL, 0, NULL, NULL, NULL, &n, NULL));
  ck_assert_uint_eq (n, 0);
}
END_TEST

START_TEST (test_merge_refuses_bad_sizes_and_dim)
{
  const float bad_sizes[][4] = { { 1, 0, 1, 1 }, { 1, -2, 1, 1 }, { 1, NAN, 1, 1 },
    { INFINITY, 1, 1, 1 } };
  float out[8], sizes[4];
  guint n = 0;
  GError *error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (bad_sizes); i++) {
    ck_assert (!llm_token_merge (four_rows, 4, 2, bad_sizes[i], 2, out, sizes, NULL, &n,
            &error));
    ck_assert (g_error_matches (error, LLM_TOKEN_COMPRESS_ERROR,
            LLM_TOKEN_COMPRESS_ERROR_INVALID));
    g_clear_error (&error);
  }
  ck_assert (!llm_token_merge (four_rows, 4, 0, NULL, 2, out, sizes, NULL, &n, &error));
  ck_assert (g_error_matches (error, LLM_TOKEN_COMPRESS_ERROR,
          LLM_TOKEN_COMPRESS_ERROR_INVALID));
  g_clear_error (&error);
  /* a row count whose bytes overflow is refused before anything is read */
  ck_assert (!llm_token_merge (four_rows, G_MAXUINT, G_MAXUINT, NULL, 2, out, sizes, NULL, &n,
          &error));
  ck_assert (error != NULL);
  g_clear_error (&error);
}
END_TEST

/* ---- prune -------------------------------------------------------------- */

/* Norms 5, 1, 4, 2, 3: the opposite order to the saliency below. */
static const float five_rows[] = { 5, 0, 1, 0, 0, 4, 2, 0, 0, 3 };
static const float five_saliency[] = { 0.1f, 0.5f, 0.2f, 0.9f, 0.3f };

START_TEST (test_prune_by_saliency_keeps_order)
{
  guint keep[5], n = 0;
  ck_assert (llm_token_prune (five_rows, 5, 2, five_saliency, 3, keep, &n, NULL));
  /* the three most salient are 3, 1, 4; kept in input order */
  assert_indices (keep, n, 3, 1, 3, 4);
}
END_TEST

START_TEST (test_prune_by_norm_without_saliency)
{
  guint keep[5], n = 0;
  ck_assert (llm_token_prune (five_rows, 5, 2, NULL, 2, keep, &n, NULL));
  assert_indices (keep, n, 2, 0, 2);
}
END_TEST

START_TEST (test_prune_ties_go_to_the_first_and_nan_loses)
{
  const float flat[] = { 1, 1, 1, 1 };
  const float with_nan[] = { NAN, 0.1f, 0.2f };
  guint keep[4], n = 0;

  ck_assert (llm_token_prune (five_rows, 4, 2, flat, 2, keep, &n, NULL));
  assert_indices (keep, n, 2, 0, 1);
  ck_assert (llm_token_prune (five_rows, 3, 2, with_nan, 2, keep, &n, NULL));
  assert_indices (keep, n, 2, 1, 2);
}
END_TEST

START_TEST (test_prune_counts_are_clamped)
{
  guint keep[5], n = 0;
  GError *error = NULL;

  ck_assert (llm_token_prune (five_rows, 5, 2, NULL, 0, keep, &n, NULL));
  assert_indices (keep, n, 1, 0);
  ck_assert (llm_token_prune (five_rows, 5, 2, NULL, 50, keep, &n, NULL));
  assert_indices (keep, n, 5, 0, 1, 2, 3, 4);
  ck_assert (llm_token_prune (five_rows, 1, 2, five_saliency, 1, keep, &n, NULL));
  assert_indices (keep, n, 1, 0);
  ck_assert (!llm_token_prune (five_rows, 5, 0, NULL, 2, keep, &n, &error));
  ck_assert (g_error_matches (error, LLM_TOKEN_COMPRESS_ERROR,
          LLM_TOKEN_COMPRESS_ERROR_INVALID));
  g_clear_error (&error);
}
END_TEST

START_TEST (test_compact_moves_kept_rows_forward)
{
  float rows[] = { 0, 0, 1, 1, 2, 2, 3, 3 };
  const guint keep[] = { 1, 3 };
  const guint backwards[] = { 2, 1 };
  const guint outside[] = { 4 };
  GError *error = NULL;

  ck_assert (llm_token_rows_compact (rows, 4, 2, keep, 2, NULL));
  assert_row (rows + 0, 1, 1);
  assert_row (rows + 2, 3, 3);

  ck_assert (!llm_token_rows_compact (rows, 4, 2, backwards, 2, &error));
  ck_assert (g_error_matches (error, LLM_TOKEN_COMPRESS_ERROR,
          LLM_TOKEN_COMPRESS_ERROR_INVALID));
  g_clear_error (&error);
  ck_assert (!llm_token_rows_compact (rows, 4, 2, outside, 1, &error));
  ck_assert (error != NULL);
  g_clear_error (&error);
  /* a refused list moves nothing */
  assert_row (rows + 0, 1, 1);
  assert_row (rows + 4, 2, 2);
}
END_TEST

/* ---- temporal ----------------------------------------------------------- */

/* Eight rows of dim 2, each along its own direction k * 20 degrees (far
 * apart, so a changed row is clearly changed). */
static void
frame (float *rows)
{
  for (guint i = 0; i < 8; i++) {
    rows[2 * i] = cosf (G_PI / 9 * i);
    rows[2 * i + 1] = sinf (G_PI / 9 * i);
  }
}

/* Turns row @i a quarter turn: cosine 0 with what it was. */
static void
turn (float *rows, guint i)
{
  float x = rows[2 * i];
  rows[2 * i] = -rows[2 * i + 1];
  rows[2 * i + 1] = x;
}

START_TEST (test_temporal_first_frame_is_sent_whole)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = FALSE;

  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (all);
  assert_indices (keep, n, 8, 0, 1, 2, 3, 4, 5, 6, 7);
}
END_TEST

START_TEST (test_temporal_drops_unchanged_rows)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = TRUE;

  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, NULL, NULL));
  turn (rows, 1);
  turn (rows, 6);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  assert_indices (keep, n, 2, 1, 6);
}
END_TEST

START_TEST (test_temporal_identical_frame_sends_one_row)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = TRUE;

  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, NULL, NULL));
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  assert_indices (keep, n, 1, 0);
  /* nothing over the threshold, but row 5 moved most (5 degrees): it goes */
  rows[10] = cosf (G_PI / 9 * 5 + G_PI / 36);
  rows[11] = sinf (G_PI / 9 * 5 + G_PI / 36);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  assert_indices (keep, n, 1, 5);
}
END_TEST

START_TEST (test_temporal_scene_change_resends_all)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = FALSE;

  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, NULL, NULL));
  /* half changed is not over 0.5 */
  for (guint i = 0; i < 4; i++)
    turn (rows, i);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  assert_indices (keep, n, 4, 0, 1, 2, 3);
  /* five of eight against those is */
  for (guint i = 3; i < 8; i++)
    turn (rows, i);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (all);
  ck_assert_uint_eq (n, 8);
  /* and the new scene is the reference now */
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  ck_assert_uint_eq (n, 1);
}
END_TEST

/* "Above the threshold" is strict: at threshold 1 an identical row still
 * counts as changed, and with scene-threshold 1 that is no scene change. */
START_TEST (test_temporal_threshold_is_strict)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = TRUE;

  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 1.0, 1.0, keep, &n, NULL, NULL));
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 1.0, 1.0, keep, &n, &all, NULL));
  ck_assert (!all);
  assert_indices (keep, n, 8, 0, 1, 2, 3, 4, 5, 6, 7);
}
END_TEST

/* Row 0 turns 10 degrees a frame (cosine 0.985 with the frame before,
 * over 0.95); row 3 changes wholly every frame, so one row is always
 * sent. Compared with the frame before, row 0 would never go; compared
 * with what was last sent, it goes when it is 20 degrees off. */
START_TEST (test_temporal_slow_drift_is_sent_once_it_adds_up)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[8] = { 1, 0, 0, 1, -1, 0, 0, -1 };
  guint keep[4], n = 0;
  const float step = G_PI / 18;

  ck_assert (llm_token_temporal_select (t, rows, 4, 2, 0.95, 0.5, keep, &n, NULL, NULL));
  for (guint f = 1; f <= 3; f++) {
    rows[0] = cosf (step * f);
    rows[1] = sinf (step * f);
    turn (rows, 3);
    ck_assert (llm_token_temporal_select (t, rows, 4, 2, 0.95, 0.5, keep, &n, NULL, NULL));
    if (f == 2)
      assert_indices (keep, n, 2, 0, 3);
    else
      assert_indices (keep, n, 1, 3);
  }
}
END_TEST

START_TEST (test_temporal_new_shape_or_reset_resends_all)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = FALSE;

  float wide[32];
  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, NULL, NULL));
  /* as many rows, twice as wide, starting with the same floats: the
   * first four rows would match the reference's floats, but another dim
   * means another encoder */
  memcpy (wide, rows, sizeof rows);
  memcpy (wide + 16, rows, sizeof rows);
  ck_assert (llm_token_temporal_select (t, wide, 8, 4, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (all);
  ck_assert_uint_eq (n, 8);
  /* the same 16 floats as 4 rows of 4: another count too */
  ck_assert (llm_token_temporal_select (t, rows, 4, 4, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (all);
  ck_assert_uint_eq (n, 4);
  /* fewer rows */
  ck_assert (llm_token_temporal_select (t, rows, 3, 4, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (all);
  ck_assert_uint_eq (n, 3);
  ck_assert (llm_token_temporal_select (t, rows, 3, 4, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  ck_assert_uint_eq (n, 1);
  llm_token_temporal_reset (t);
  ck_assert (llm_token_temporal_select (t, rows, 3, 4, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (all);
  ck_assert_uint_eq (n, 3);
}
END_TEST

START_TEST (test_temporal_error_keeps_the_reference)
{
  g_autoptr (LlmTokenTemporal) t = llm_token_temporal_new ();
  float rows[16];
  guint keep[8], n = 0;
  gboolean all = TRUE;
  GError *error = NULL;

  frame (rows);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, NULL, NULL));
  ck_assert (!llm_token_temporal_select (t, rows, 8, 0, 0.95, 0.5, keep, &n, &all, &error));
  ck_assert (g_error_matches (error, LLM_TOKEN_COMPRESS_ERROR,
          LLM_TOKEN_COMPRESS_ERROR_INVALID));
  g_clear_error (&error);
  ck_assert (llm_token_temporal_select (t, rows, 8, 2, 0.95, 0.5, keep, &n, &all, NULL));
  ck_assert (!all);
  ck_assert_uint_eq (n, 1);
}
END_TEST

static Suite *
token_compress_suite (void)
{
  Suite *s = suite_create ("token-compress");
  TCase *tc = tcase_create ("target");
  tcase_add_test (tc, test_target_ratio_and_max_tokens_smaller_wins);
  tcase_add_test (tc, test_target_keeps_at_least_one_row);
  tcase_add_test (tc, test_cosine_of_zero_rows);
  tcase_add_test (tc, test_merge_of_many_rows_pairs_their_twins);
  suite_add_tcase (s, tc);

  tc = tcase_create ("merge");
  tcase_add_test (tc, test_merge_folds_the_most_similar_pair_first);
  tcase_add_test (tc, test_merge_keeps_merged_rows_at_their_b_place);
  tcase_add_test (tc, test_merge_averages_by_size);
  tcase_add_test (tc, test_merge_ties_go_to_the_first_partner);
  tcase_add_test (tc, test_merge_runs_rounds_until_the_target);
  tcase_add_test (tc, test_merge_at_full_target_changes_nothing);
  tcase_add_test (tc, test_merge_one_row_and_no_rows);
  tcase_add_test (tc, test_merge_refuses_bad_sizes_and_dim);
  suite_add_tcase (s, tc);

  tc = tcase_create ("prune");
  tcase_add_test (tc, test_prune_by_saliency_keeps_order);
  tcase_add_test (tc, test_prune_by_norm_without_saliency);
  tcase_add_test (tc, test_prune_ties_go_to_the_first_and_nan_loses);
  tcase_add_test (tc, test_prune_counts_are_clamped);
  tcase_add_test (tc, test_compact_moves_kept_rows_forward);
  suite_add_tcase (s, tc);

  tc = tcase_create ("temporal");
  tcase_add_test (tc, test_temporal_first_frame_is_sent_whole);
  tcase_add_test (tc, test_temporal_drops_unchanged_rows);
  tcase_add_test (tc, test_temporal_identical_frame_sends_one_row);
  tcase_add_test (tc, test_temporal_scene_change_resends_all);
  tcase_add_test (tc, test_temporal_threshold_is_strict);
  tcase_add_test (tc, test_temporal_slow_drift_is_sent_once_it_adds_up);
  tcase_add_test (tc, test_temporal_new_shape_or_reset_resends_all);
  tcase_add_test (tc, test_temporal_error_keeps_the_reference);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (token_compress_suite)
