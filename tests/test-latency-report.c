/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* elements/gstllmlatency.c: what an element adds to a live pipeline's
 * latency follows its recent outputs, grows at once and falls back when a
 * slow spell is over, each time with a latency message so the pipeline
 * asks again; what the pipeline uses is the answer its LATENCY event
 * confirms, not what an application asked. Driven with made-up durations
 * through a real pad pair. */
#include <gst/check/gstharness.h>

#include "llm-check.h"
#include "gstllmlatency.h"

GST_DEBUG_CATEGORY (gst_llm_debug);

typedef struct {
  GstHarness *h;
  GstBus *bus;
  GstLlmLatency latency;
} Fixture;

/* `identity` stands in for an llm element: its src pad answers the query
 * through gst_llm_latency_answer, upstream says live with @upstream. */
static gboolean
answer_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  Fixture *f = g_object_get_data (G_OBJECT (parent), "fixture");
  if (GST_QUERY_TYPE (query) == GST_QUERY_LATENCY) {
    GstPad *sink = gst_element_get_static_pad (GST_ELEMENT (parent), "sink");
    gboolean answered = gst_llm_latency_answer (GST_ELEMENT (parent), &f->latency, sink, query);
    gst_object_unref (sink);
    return answered;
  }
  return gst_pad_query_default (pad, parent, query);
}

static void
fixture_init (Fixture *f, gboolean live)
{
  memset (f, 0, sizeof *f);
  f->h = gst_harness_new ("identity");
  g_object_set_data (G_OBJECT (f->h->element), "fixture", f);
  GstPad *src = gst_element_get_static_pad (f->h->element, "src");
  gst_pad_set_query_function (src, answer_query);
  gst_llm_latency_watch (f->h->element, &f->latency, src);
  gst_object_unref (src);
  if (live)
    gst_harness_set_upstream_latency (f->h, 10 * GST_MSECOND);
  else
    gst_harness_set_live (f->h, FALSE);
  f->bus = gst_bus_new ();
  gst_element_set_bus (f->h->element, f->bus);
}

static void
fixture_clear (Fixture *f)
{
  gst_element_set_bus (f->h->element, NULL);
  gst_object_unref (f->bus);
  gst_harness_teardown (f->h);
}

/* Latency messages posted since the last call. */
static guint
messages (Fixture *f)
{
  guint n = 0;
  GstMessage *m;
  while ((m = gst_bus_pop_filtered (f->bus, GST_MESSAGE_LATENCY))) {
    n++;
    gst_message_unref (m);
  }
  return n;
}

static void
note (Fixture *f, guint times, GstClockTime took)
{
  for (guint i = 0; i < times; i++)
    gst_llm_latency_note (f->h->element, &f->latency, took);
}

/* What a query is told: ours on top of upstream's 10 ms. */
static GstClockTime
added (Fixture *f)
{
  GstClockTime total = gst_harness_query_latency (f->h);
  ck_assert_uint_ge (total, 10 * GST_MSECOND);
  return total - 10 * GST_MSECOND;
}

/* What a pipeline does (gst_bin_recalculate_latency): asks, then sends
 * the total to its sinks, which send it upstream. */
static GstClockTime
pipeline_asks (Fixture *f)
{
  GstClockTime ours = added (f);
  ck_assert (gst_harness_push_upstream_event (f->h,
          gst_event_new_latency (ours + 10 * GST_MSECOND)));
  return ours;
}

START_TEST (test_nothing_is_added_before_a_measurement)
{
  Fixture f;
  fixture_init (&f, TRUE);
  ck_assert_uint_eq (pipeline_asks (&f), 0);
  note (&f, 1, 4 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 1);
  ck_assert_uint_eq (pipeline_asks (&f), 4 * GST_MSECOND);
  fixture_clear (&f);
}
END_TEST

START_TEST (test_a_slow_output_is_reported_at_once_and_forgotten_after_the_window)
{
  Fixture f;
  fixture_init (&f, TRUE);
  note (&f, 300, 2 * GST_MSECOND);
  ck_assert_uint_eq (pipeline_asks (&f), 2 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 0);

  /* growth beyond a tenth (and a millisecond) is posted at once */
  note (&f, 1, 200 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 1);
  ck_assert_uint_eq (pipeline_asks (&f), 200 * GST_MSECOND);

  /* within the window the slow output still counts, and nothing is
   * posted again */
  note (&f, GST_LLM_LATENCY_SPAN_OUTPUTS * (GST_LLM_LATENCY_SPANS - 1) - 1, 2 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 0);
  ck_assert_uint_eq (added (&f), 200 * GST_MSECOND);

  /* once the window has passed it, the figure falls back, and the
   * pipeline is told */
  note (&f, GST_LLM_LATENCY_SPAN_OUTPUTS * 2, 2 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 1);
  ck_assert_uint_eq (pipeline_asks (&f), 2 * GST_MSECOND);
  fixture_clear (&f);
}
END_TEST

START_TEST (test_an_ordinary_spread_posts_nothing)
{
  Fixture f;
  fixture_init (&f, TRUE);
  note (&f, 1, 10 * GST_MSECOND);
  ck_assert_uint_eq (pipeline_asks (&f), 10 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 0);
  /* steps between 6 and 11 ms for a long run: within a tenth above, and
   * never down to half */
  for (guint i = 0; i < 5000; i++)
    note (&f, 1, (6 + i % 6) * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 0);
  fixture_clear (&f);
}
END_TEST

/* An application asking for the latency does not change what the
 * pipeline uses: growth past that is still posted. (The answer to any
 * query used to count as what the pipeline used, so an application's
 * query could hide a growth from the pipeline for good.) */
START_TEST (test_an_applications_query_does_not_hide_growth_from_the_pipeline)
{
  Fixture f;
  fixture_init (&f, TRUE);
  note (&f, 1, 10 * GST_MSECOND);
  ck_assert_uint_eq (pipeline_asks (&f), 10 * GST_MSECOND);
  /* within a tenth and a millisecond: not worth a recalculation */
  note (&f, 1, 12 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 0);
  ck_assert_uint_eq (added (&f), 12 * GST_MSECOND);
  /* 14 ms is past what the pipeline uses (10), if not past what the
   * application was told (12) */
  note (&f, 1, 14 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 1);
  fixture_clear (&f);
}
END_TEST

START_TEST (test_a_pipeline_that_is_not_live_is_not_asked_to_recalculate)
{
  Fixture f;
  fixture_init (&f, FALSE);
  note (&f, 1, 10 * GST_MSECOND);
  GstQuery *q = gst_query_new_latency ();
  GstPad *src = gst_element_get_static_pad (f.h->element, "src");
  ck_assert (gst_pad_query (src, q));
  gboolean live;
  GstClockTime min;
  gst_query_parse_latency (q, &live, &min, NULL);
  ck_assert (!live);
  ck_assert_uint_eq (min, 0);
  note (&f, 1000, 500 * GST_MSECOND);
  ck_assert_uint_eq (messages (&f), 0);
  gst_object_unref (src);
  gst_query_unref (q);
  fixture_clear (&f);
}
END_TEST

static Suite *
latency_report_suite (void)
{
  gst_init (NULL, NULL);
  GST_DEBUG_CATEGORY_INIT (gst_llm_debug, "llm", 0, "llm elements");
  Suite *s = suite_create ("latency-report");
  TCase *tc = tcase_create ("latency-report");
  tcase_add_test (tc, test_nothing_is_added_before_a_measurement);
  tcase_add_test (tc, test_a_slow_output_is_reported_at_once_and_forgotten_after_the_window);
  tcase_add_test (tc, test_an_ordinary_spread_posts_nothing);
  tcase_add_test (tc, test_an_applications_query_does_not_hide_growth_from_the_pipeline);
  tcase_add_test (tc, test_a_pipeline_that_is_not_live_is_not_asked_to_recalculate);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (latency_report_suite)
