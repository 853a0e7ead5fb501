/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lib/latency-stats.h: the mean is exact and a percentile is within 1/64
 * of the exact nearest-rank value (exact below 64, and for the smallest
 * and largest value), in the same memory after ten values or a million. */
#include <math.h>
#include <stdlib.h>

#include "llm-check.h"
#include "latency-stats.h"

static int
compare_gint64 (gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;
  return x < y ? -1 : x > y;
}

/* The nearest-rank percentile of @n sorted values. */
static gint64
exact_percentile (const gint64 *sorted, guint n, guint percent)
{
  guint64 rank = ((guint64) percent * n + 99) / 100;
  return sorted[MAX (rank, 1) - 1];
}

/* Adds @values to fresh stats and checks count, sum, mean and the 0th,
 * 50th, 90th, 95th, 99th and 100th percentile against the exact ones. */
static void
check_against_exact (gint64 *values, guint n)
{
  LlmLatencyStats *s = g_new (LlmLatencyStats, 1);
  llm_latency_stats_clear (s);
  gint64 sum = 0;
  for (guint i = 0; i < n; i++) {
    llm_latency_stats_add (s, values[i]);
    sum += values[i];
  }
  ck_assert_uint_eq (llm_latency_stats_count (s), n);
  ck_assert_int_eq (llm_latency_stats_sum (s), sum);
  ck_assert (llm_latency_stats_mean (s) == (double) sum / n);

  qsort (values, n, sizeof *values, compare_gint64);
  const guint percents[] = { 0, 50, 90, 95, 99, 100 };
  for (guint i = 0; i < G_N_ELEMENTS (percents); i++) {
    double got = llm_latency_stats_percentile (s, percents[i]);
    gint64 want = exact_percentile (values, n, percents[i]);
    double tolerance = want < 64 || percents[i] == 0 || percents[i] == 100 ? 0 : want / 64.0;
    ck_assert_msg (fabs (got - want) <= tolerance, "p%u of %u values: %.3f, exact %" G_GINT64_FORMAT
        " (tolerance %.3f)", percents[i], n, got, want, tolerance);
  }
  g_free (s);
}

START_TEST (test_latency_empty_stats_are_zero)
{
  LlmLatencyStats s;
  llm_latency_stats_clear (&s);
  ck_assert_uint_eq (llm_latency_stats_count (&s), 0);
  ck_assert (llm_latency_stats_mean (&s) == 0.0);
  ck_assert (llm_latency_stats_percentile (&s, 95) == 0.0);
}
END_TEST

START_TEST (test_latency_one_to_a_hundred)
{
  LlmLatencyStats s;
  llm_latency_stats_clear (&s);
  for (gint64 v = 1; v <= 100; v++)
    llm_latency_stats_add (&s, v);
  ck_assert (llm_latency_stats_mean (&s) == 50.5);
  /* 95 shares the bin 94..95 and is reported as its middle */
  ck_assert (llm_latency_stats_percentile (&s, 95) == 94.5);
  ck_assert (llm_latency_stats_percentile (&s, 50) == 50.0);
  ck_assert (llm_latency_stats_percentile (&s, 100) == 100.0);
  ck_assert (llm_latency_stats_percentile (&s, 0) == 1.0);
}
END_TEST

/* Milliseconds to a second in microseconds: p95 is 950000 exactly, in
 * the bin 933888..950271 (2^14 wide), reported at its middle. */
START_TEST (test_latency_known_spread_is_within_one_64th)
{
  LlmLatencyStats s;
  llm_latency_stats_clear (&s);
  for (gint64 i = 1; i <= 1000; i++)
    llm_latency_stats_add (&s, i * 1000);
  ck_assert (llm_latency_stats_mean (&s) == 500500.0);
  double p95 = llm_latency_stats_percentile (&s, 95);
  ck_assert_msg (fabs (p95 - 950000) <= 950000 / 64.0, "p95 %.1f", p95);
  ck_assert (p95 == 942079.5);
}
END_TEST

/* Few values: p95 is the largest, exactly, as llmdecode reports it for a
 * short response. */
START_TEST (test_latency_few_values_give_the_largest_as_p95)
{
  gint64 v[] = { 12345, 9876, 23456, 11111, 10000 };
  LlmLatencyStats s;
  llm_latency_stats_clear (&s);
  for (guint i = 0; i < G_N_ELEMENTS (v); i++)
    llm_latency_stats_add (&s, v[i]);
  ck_assert (llm_latency_stats_percentile (&s, 95) == 23456.0);
  ck_assert (llm_latency_stats_mean (&s) == (12345 + 9876 + 23456 + 11111 + 10000) / 5.0);
}
END_TEST

START_TEST (test_latency_random_streams_match_exact_percentiles)
{
  GRand *rand = g_rand_new_with_seed (20240611);
  const guint sizes[] = { 2, 7, 63, 1000, 200000 };
  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++) {
    guint n = sizes[k];
    gint64 *v = g_new (gint64, n);
    /* log-uniform over 1 us .. 100 s, like step times of very different models */
    for (guint i = 0; i < n; i++)
      v[i] = (gint64) exp (g_rand_double_range (rand, 0, log (1e8)));
    check_against_exact (v, n);
    g_free (v);
  }
  g_rand_free (rand);
}
END_TEST

/* Out-of-range values are counted: negatives as 0, huge ones in the last
 * bin, with the largest still exact. */
START_TEST (test_latency_extreme_values_are_counted)
{
  LlmLatencyStats s;
  llm_latency_stats_clear (&s);
  llm_latency_stats_add (&s, -5);
  llm_latency_stats_add (&s, G_GINT64_CONSTANT (1) << 50);
  llm_latency_stats_add (&s, 10);
  ck_assert_uint_eq (llm_latency_stats_count (&s), 3);
  ck_assert (llm_latency_stats_percentile (&s, 0) == 0.0);
  ck_assert (llm_latency_stats_percentile (&s, 50) == 10.0);
  ck_assert (llm_latency_stats_percentile (&s, 100) == (double) (G_GINT64_CONSTANT (1) << 50));
}
END_TEST

static Suite *
latency_stats_suite (void)
{
  Suite *s = suite_create ("latency-stats");
  TCase *tc = tcase_create ("latency-stats");
  tcase_add_test (tc, test_latency_empty_stats_are_zero);
  tcase_add_test (tc, test_latency_one_to_a_hundred);
  tcase_add_test (tc, test_latency_known_spread_is_within_one_64th);
  tcase_add_test (tc, test_latency_few_values_give_the_largest_as_p95);
  tcase_add_test (tc, test_latency_random_streams_match_exact_percentiles);
  tcase_add_test (tc, test_latency_extreme_values_are_counted);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (latency_stats_suite)
