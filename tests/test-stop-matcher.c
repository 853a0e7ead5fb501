/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lib/stop-matcher.h: which tokens of a response leave when, which are
 * dropped with a stop string, and that the memory it takes stays bounded
 * by the longest stop string however long the response runs. */
#include <stdarg.h>
#include <string.h>

#include "llm-check.h"
#include "stop-matcher.h"

/* Adds @piece; returns how many tokens were released. */
static guint
add (LlmStopMatcher *m, const char *piece, gboolean expect_stop)
{
  guint n = G_MAXUINT;
  gboolean stopped = llm_stop_matcher_add (m, piece, strlen (piece), &n);
  ck_assert_msg (stopped == expect_stop, "\"%s\": stopped %d", piece, stopped);
  ck_assert_uint_ne (n, G_MAXUINT);
  return n;
}

static LlmStopMatcher *
matcher (const char *first, ...)
{
  GPtrArray *stops = g_ptr_array_new ();
  va_list ap;
  va_start (ap, first);
  for (const char *s = first; s; s = va_arg (ap, const char *))
    g_ptr_array_add (stops, (gpointer) s);
  va_end (ap);
  g_ptr_array_add (stops, NULL);
  LlmStopMatcher *m = llm_stop_matcher_new ((const char *const *) stops->pdata);
  g_ptr_array_free (stops, TRUE);
  return m;
}

START_TEST (test_stop_without_stop_strings_releases_every_token_at_once)
{
  g_autoptr (LlmStopMatcher) m = llm_stop_matcher_new (NULL);
  ck_assert_uint_eq (add (m, "The end", FALSE), 1);
  ck_assert_uint_eq (llm_stop_matcher_n_held (m), 0);
  ck_assert_uint_eq (llm_stop_matcher_text_len (m), 0);
  g_autoptr (LlmStopMatcher) empty = matcher ("", NULL);
  ck_assert_uint_eq (add (empty, "x", FALSE), 1);
}
END_TEST

/* The space token in front of "The" shares it with the stop string and
 * is dropped with it. */
START_TEST (test_stop_drops_the_tokens_that_overlap_the_stop_string)
{
  g_autoptr (LlmStopMatcher) m = matcher ("The end", NULL);
  ck_assert_uint_eq (add (m, "Once", FALSE), 1);
  ck_assert_uint_eq (add (m, " upon", FALSE), 1);
  ck_assert_uint_eq (add (m, " The", FALSE), 0);      /* may begin "The end" */
  ck_assert_uint_eq (llm_stop_matcher_n_held (m), 1);
  ck_assert_uint_eq (add (m, " e", FALSE), 0);
  ck_assert_uint_eq (add (m, "nd", TRUE), 0);          /* " The", " e", "nd" dropped */
  ck_assert_uint_eq (llm_stop_matcher_n_held (m), 0);
}
END_TEST

START_TEST (test_stop_held_tokens_leave_when_the_text_goes_another_way)
{
  g_autoptr (LlmStopMatcher) m = matcher ("The end", NULL);
  ck_assert_uint_eq (add (m, "Th", FALSE), 0);
  ck_assert_uint_eq (add (m, "e", FALSE), 0);
  ck_assert_uint_eq (add (m, "re", FALSE), 3);         /* "There": all three leave */
  ck_assert_uint_eq (llm_stop_matcher_n_held (m), 0);
}
END_TEST

/* Text before the stop string inside the same token goes with the token;
 * tokens that end before it leave. */
START_TEST (test_stop_inside_one_token_and_the_earliest_of_several)
{
  g_autoptr (LlmStopMatcher) m = matcher ("STOP", NULL);
  ck_assert_uint_eq (add (m, "go ", FALSE), 1);
  ck_assert_uint_eq (add (m, "on STOP now", TRUE), 0);

  g_autoptr (LlmStopMatcher) two = matcher ("end", "The end", NULL);
  ck_assert_uint_eq (add (two, "x", FALSE), 1);
  ck_assert_uint_eq (add (two, " The", FALSE), 0);
  ck_assert_uint_eq (add (two, " end", TRUE), 0);      /* "The end" begins first */
}
END_TEST

/* After a response of 100 000 tokens, the matcher keeps no more text than
 * the longest stop string less one byte (plus the newest piece while it
 * works) and still finds a stop string split over three tokens. */
START_TEST (test_stop_keeps_bounded_text_over_a_long_response)
{
  g_autoptr (LlmStopMatcher) m = matcher ("The end", "zzz", NULL);
  for (guint i = 0; i < 100000; i++) {
    ck_assert_uint_eq (add (m, i % 2 ? "ab " : "cd ", FALSE), 1);
    ck_assert_uint_le (llm_stop_matcher_text_len (m), strlen ("The end") - 1);
  }
  ck_assert_uint_eq (add (m, "Th", FALSE), 0);
  ck_assert_uint_eq (add (m, "e e", FALSE), 0);
  ck_assert_uint_eq (add (m, "nd", TRUE), 0);
}
END_TEST

/* Tokens without text (control tokens) after the start of a stop string
 * are held no more than the longest stop string has bytes: the oldest
 * leave, in order, so a run of them cannot grow the held list. */
START_TEST (test_stop_holds_a_bounded_number_of_tokens)
{
  g_autoptr (LlmStopMatcher) m = matcher ("The end", NULL);
  guint released = add (m, "Th", FALSE);
  for (guint i = 0; i < 1000; i++) {
    released += add (m, "", FALSE);
    ck_assert_uint_le (llm_stop_matcher_n_held (m), strlen ("The end"));
  }
  ck_assert_uint_eq (released + llm_stop_matcher_n_held (m), 1001);
  ck_assert_uint_eq (llm_stop_matcher_n_held (m), 7);
  /* the stop string still completes */
  ck_assert_uint_eq (add (m, "e end", TRUE), 0);
}
END_TEST

START_TEST (test_stop_reset_starts_a_new_response)
{
  g_autoptr (LlmStopMatcher) m = matcher ("The end", NULL);
  ck_assert_uint_eq (add (m, "The e", FALSE), 0);
  llm_stop_matcher_reset (m);
  ck_assert_uint_eq (llm_stop_matcher_n_held (m), 0);
  ck_assert_uint_eq (add (m, "nd", FALSE), 1);         /* not joined to the last response */
}
END_TEST

static Suite *
stop_matcher_suite (void)
{
  Suite *s = suite_create ("stop-matcher");
  TCase *tc = tcase_create ("stop-matcher");
  tcase_add_test (tc, test_stop_without_stop_strings_releases_every_token_at_once);
  tcase_add_test (tc, test_stop_drops_the_tokens_that_overlap_the_stop_string);
  tcase_add_test (tc, test_stop_held_tokens_leave_when_the_text_goes_another_way);
  tcase_add_test (tc, test_stop_inside_one_token_and_the_earliest_of_several);
  tcase_add_test (tc, test_stop_keeps_bounded_text_over_a_long_response);
  tcase_add_test (tc, test_stop_holds_a_bounded_number_of_tokens);
  tcase_add_test (tc, test_stop_reset_starts_a_new_response);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (stop_matcher_suite)
