/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* llmtokencompress in GstHarness: caps through and refused, row counts
 * and the meta for each method, temporal de-duplication over frames and
 * what starts it over, the stats message and counters, timing, EOS and
 * bad buffers. Which rows each method picks is lib/token-compress's
 * suite; this one checks the element around it. */
#include <math.h>
#include <string.h>
#include <gst/check/gstharness.h>

#include "llm-caps.h"
#include "llm-check.h"
#include "llm-meta.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct {
  GstHarness *h;
  GstBus *bus;
} Fixture;

/* A harness around a new llmtokencompress with properties set from
 * name/string pairs (as gst-launch parses them), a bus for its messages,
 * and embedding caps of @dim (0: no caps yet). */
static Fixture
fixture_new (guint dim, const char *first_prop, ...)
{
  Fixture f;
  GstElement *el = gst_element_factory_make ("llmtokencompress", NULL);
  ck_assert_msg (el != NULL, "no element llmtokencompress: is GST_PLUGIN_PATH_1_0 set?");
  va_list args;
  va_start (args, first_prop);
  for (const char *name = first_prop; name; name = va_arg (args, const char *))
    gst_util_set_object_arg (G_OBJECT (el), name, va_arg (args, const char *));
  va_end (args);
  f.h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  f.bus = gst_bus_new ();
  gst_element_set_bus (f.h->element, f.bus);
  if (dim > 0)
    gst_harness_set_src_caps (f.h, gst_llm_caps_new_embeddings (dim, GST_LLM_MODALITY_IMAGE,
            "mlp"));
  return f;
}

static void
fixture_free (Fixture *f)
{
  gst_element_set_bus (f->h->element, NULL);
  gst_harness_teardown (f->h);
  gst_bus_set_flushing (f->bus, TRUE);
  gst_object_unref (f->bus);
}

static GstBuffer *
rows_buffer (const float *rows, guint n, guint dim, GstClockTime pts)
{
  GstBuffer *buf = gst_llm_embeddings_buffer_new (rows, n, dim);
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = GST_SECOND / 30;
  return buf;
}

/* Pushes @n rows and returns how many came out (the buffer in @out when
 * not NULL, else dropped). */
static guint
push_rows (Fixture *f, const float *rows, guint n, guint dim, GstBuffer **out)
{
  ck_assert_int_eq (gst_harness_push (f->h, rows_buffer (rows, n, dim, 0)), GST_FLOW_OK);
  GstBuffer *buf = gst_harness_pull (f->h);
  ck_assert (buf != NULL);
  gsize size = gst_buffer_get_size (buf);
  ck_assert_uint_eq (size % (dim * sizeof (float)), 0);
  if (out)
    *out = buf;
  else
    gst_buffer_unref (buf);
  return (guint) (size / (dim * sizeof (float)));
}

/* @n rows of @dim floats, each along its own direction (no two similar),
 * the pattern shifted by @seed: a frame, and another for another seed. */
static float *
distinct_rows (guint n, guint dim, guint seed)
{
  float *rows = g_new0 (float, (gsize) n * dim);
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < dim; j++)
      rows[(gsize) i * dim + j] = sinf ((float) (i + 1) * (j + 1) + seed * 0.7f);
  return rows;
}

/* The next element message @name, skipping other messages; fails if
 * none is there. */
static GstStructure *
pop_element_message (GstBus *bus, const char *name)
{
  GstMessage *m;
  while ((m = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT)) != NULL) {
    const GstStructure *s = gst_message_get_structure (m);
    if (gst_structure_has_name (s, name)) {
      GstStructure *copy = gst_structure_copy (s);
      gst_message_unref (m);
      return copy;
    }
    gst_message_unref (m);
  }
  ck_abort_msg ("no %s message", name);
  return NULL;
}

/* The text and debug string of the next ERROR, which must be of
 * @domain / @code (caller frees both). */
static void
pop_error (GstBus *bus, GQuark domain, gint code, char **text, char **debug)
{
  GstMessage *m = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  ck_assert_msg (m != NULL, "no error message");
  GError *error = NULL;
  gst_message_parse_error (m, &error, debug);
  ck_assert_msg (g_error_matches (error, domain, code), "error %s %d: %s",
      g_quark_to_string (error->domain), error->code, error->message);
  *text = g_strdup (error->message);
  g_error_free (error);
  gst_message_unref (m);
}

/* ---- caps --------------------------------------------------------------- */

START_TEST (test_caps_pass_through)
{
  Fixture f = fixture_new (4, NULL);
  g_autofree float *rows = distinct_rows (8, 4, 0);

  push_rows (&f, rows, 8, 4, NULL);
  GstCaps *want = gst_llm_caps_new_embeddings (4, GST_LLM_MODALITY_IMAGE, "mlp");
  GstCaps *got = gst_pad_get_current_caps (f.h->sinkpad);
  ck_assert_msg (got && gst_caps_is_equal (got, want), "caps %" GST_PTR_FORMAT, got);
  gst_caps_unref (got);
  gst_caps_unref (want);
  fixture_free (&f);
}
END_TEST

START_TEST (test_caps_query_offers_f32_only)
{
  Fixture f = fixture_new (0, NULL);
  GstCaps *caps = gst_pad_peer_query_caps (f.h->srcpad, NULL);
  GstCaps *f16 = gst_caps_from_string (GST_LLM_EMBEDDINGS_MEDIA_TYPE ", format=(string)F16");

  ck_assert (!gst_caps_is_empty (caps));
  ck_assert_msg (!gst_caps_can_intersect (caps, f16), "offers %" GST_PTR_FORMAT, caps);
  gst_caps_unref (f16);
  gst_caps_unref (caps);
  fixture_free (&f);
}
END_TEST

static void
check_refused (const char *caps_str, const char *says)
{
  Fixture f = fixture_new (0, NULL);
  g_autofree char *text = NULL, *debug = NULL;
  const float row[4] = { 1, 2, 3, 4 };

  GstCaps *caps = gst_caps_from_string (caps_str);
  gst_harness_push_event (f.h, gst_event_new_caps (caps));
  gst_caps_unref (caps);
  pop_error (f.bus, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION, &text, &debug);
  ck_assert_msg (strstr (text, says) != NULL, "%s: \"%s\" does not say %s", caps_str, text, says);
  GstSegment segment;
  gst_segment_init (&segment, GST_FORMAT_TIME);
  gst_harness_push_event (f.h, gst_event_new_segment (&segment));
  ck_assert_int_eq (gst_harness_push (f.h, rows_buffer (row, 1, 4, 0)), GST_FLOW_NOT_NEGOTIATED);
  fixture_free (&f);
}

START_TEST (test_caps_refused_with_the_reason)
{
  check_refused (GST_LLM_EMBEDDINGS_MEDIA_TYPE ", dim=(int)4, format=(string)F16, "
      "modality=(string)image", "F32");
  check_refused (GST_LLM_EMBEDDINGS_MEDIA_TYPE ", format=(string)F32, modality=(string)image",
      "dim");
  check_refused (GST_LLM_EMBEDDINGS_MEDIA_TYPE ", dim=(int)0, format=(string)F32, "
      "modality=(string)image", "dim");
  check_refused (GST_LLM_EMBEDDINGS_MEDIA_TYPE ", dim=(int)4, format=(string)F32",
      "modality");
}
END_TEST

/* ---- merge and prune ---------------------------------------------------- */

START_TEST (test_merge_rows_and_meta)
{
  Fixture f = fixture_new (4, "ratio", "0.25", NULL);
  g_autofree float *rows = distinct_rows (16, 4, 0);
  GstBuffer *out;

  ck_assert_uint_eq (push_rows (&f, rows, 16, 4, &out), 4);
  const GstLlmEmbeddingsMeta *m = gst_buffer_get_llm_embeddings_meta (out);
  ck_assert (m != NULL);
  ck_assert_uint_eq (m->n_rows, 4);
  ck_assert_uint_eq (m->n_source_rows, 16);
  ck_assert (m->sizes != NULL);
  float total = 0;
  for (guint i = 0; i < 4; i++) {
    ck_assert (m->sizes[i] >= 1);
    total += m->sizes[i];
  }
  ck_assert_float_eq (total, 16);
  gst_buffer_unref (out);
  fixture_free (&f);
}
END_TEST

START_TEST (test_max_tokens_caps_the_ratio)
{
  Fixture f = fixture_new (4, "ratio", "0.5", "max-tokens", "3", NULL);
  g_autofree float *rows = distinct_rows (16, 4, 0);

  ck_assert_uint_eq (push_rows (&f, rows, 16, 4, NULL), 3);
  g_object_set (f.h->element, "max-tokens", 0, NULL);
  ck_assert_uint_eq (push_rows (&f, rows, 16, 4, NULL), 8);
  fixture_free (&f);
}
END_TEST

/* Row i is (i + 1, 0): the norm grows down the rows while the saliency
 * falls, so the two orders pick opposite halves. */
START_TEST (test_prune_keeps_salient_rows_and_their_meta)
{
  Fixture f = fixture_new (2, "method", "prune", "ratio", "0.5", NULL);
  float rows[16], saliency[8];
  for (guint i = 0; i < 8; i++) {
    rows[2 * i] = (float) (i + 1);
    rows[2 * i + 1] = 0;
    saliency[i] = (float) (8 - i);
  }
  GstBuffer *in = rows_buffer (rows, 8, 2, 0);
  GstLlmEmbeddingsMeta *im = gst_buffer_add_llm_embeddings_meta (in, 8, 4, 2);
  gst_llm_embeddings_meta_set_saliency (im, saliency);
  ck_assert_int_eq (gst_harness_push (f.h, in), GST_FLOW_OK);

  GstBuffer *out = gst_harness_pull (f.h);
  ck_assert_uint_eq (gst_buffer_get_size (out), 4 * 2 * sizeof (float));
  float got[8];
  gst_buffer_extract (out, 0, got, sizeof got);
  for (guint i = 0; i < 4; i++)
    ck_assert_float_eq (got[2 * i], i + 1);
  const GstLlmEmbeddingsMeta *m = gst_buffer_get_llm_embeddings_meta (out);
  ck_assert_uint_eq (m->n_rows, 4);
  ck_assert_uint_eq (m->n_source_rows, 8);
  ck_assert_uint_eq (m->grid_w, 4);
  ck_assert_uint_eq (m->grid_h, 2);
  ck_assert (m->saliency != NULL);
  for (guint i = 0; i < 4; i++)
    ck_assert_float_eq (m->saliency[i], 8 - i);
  gst_buffer_unref (out);

  /* without saliency, the larger norms */
  push_rows (&f, rows, 8, 2, &out);
  gst_buffer_extract (out, 0, got, sizeof got);
  for (guint i = 0; i < 4; i++)
    ck_assert_float_eq (got[2 * i], i + 5);
  gst_buffer_unref (out);
  fixture_free (&f);
}
END_TEST

/* method=none, as a gst-launch line writes it (the property's blurb names
 * it), and 0: every row passes as it came. */
START_TEST (test_no_method_passes_rows)
{
  Fixture f = fixture_new (4, "method", _i == 0 ? "none" : "0", NULL);
  g_autofree float *rows = distinct_rows (16, 4, 0);
  GstBuffer *out;

  GValue v = G_VALUE_INIT;
  g_value_init (&v, G_PARAM_SPEC_VALUE_TYPE (g_object_class_find_property (
              G_OBJECT_GET_CLASS (f.h->element), "method")));
  g_object_get_property (G_OBJECT (f.h->element), "method", &v);
  ck_assert_uint_eq (g_value_get_flags (&v), 0);
  g_value_unset (&v);
  ck_assert_uint_eq (push_rows (&f, rows, 16, 4, &out), 16);
  ck_assert (gst_buffer_memcmp (out, 0, rows, 16 * 4 * sizeof (float)) == 0);
  gst_buffer_unref (out);
  fixture_free (&f);
}
END_TEST

/* ---- temporal ----------------------------------------------------------- */

START_TEST (test_temporal_identical_frame_sends_one_row)
{
  Fixture f = fixture_new (8, "method", "temporal", NULL);
  g_autofree float *a = distinct_rows (64, 8, 0);
  g_autofree float *b = distinct_rows (64, 8, 1);

  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 64);
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  /* every row changed: a scene change sends them all */
  ck_assert_uint_eq (push_rows (&f, b, 64, 8, NULL), 64);
  ck_assert_uint_eq (push_rows (&f, b, 64, 8, NULL), 1);
  fixture_free (&f);
}
END_TEST

START_TEST (test_temporal_then_merge_budgets_the_frame)
{
  Fixture f = fixture_new (8, "method", "temporal+merge", "ratio", "0.25", NULL);
  g_autofree float *a = distinct_rows (64, 8, 0);

  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 16);
  /* one changed row is within the budget: it goes as it is */
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  fixture_free (&f);
}
END_TEST

START_TEST (test_flush_resets_temporal)
{
  Fixture f = fixture_new (8, "method", "temporal", NULL);
  g_autofree float *a = distinct_rows (64, 8, 0);
  GstSegment segment;

  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 64);
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  ck_assert (gst_harness_push_event (f.h, gst_event_new_flush_start ()));
  ck_assert (gst_harness_push_event (f.h, gst_event_new_flush_stop (TRUE)));
  /* the segment the harness sent before: only the flush starts over */
  gst_segment_init (&segment, GST_FORMAT_TIME);
  ck_assert (gst_harness_push_event (f.h, gst_event_new_segment (&segment)));
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 64);
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  fixture_free (&f);
}
END_TEST

START_TEST (test_new_segment_resets_temporal_and_discont_does_not)
{
  Fixture f = fixture_new (8, "method", "temporal", NULL);
  g_autofree float *a = distinct_rows (64, 8, 0);
  GstSegment segment;

  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 64);
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  /* the same segment again is no new timeline */
  gst_segment_init (&segment, GST_FORMAT_TIME);
  ck_assert (gst_harness_push_event (f.h, gst_event_new_segment (&segment)));
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  segment.base = GST_SECOND;
  ck_assert (gst_harness_push_event (f.h, gst_event_new_segment (&segment)));
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 64);

  /* The encoder's interval drops frames and marks the next one DISCONT:
   * the frames it sends are still one video. */
  GstBuffer *disc = rows_buffer (a, 64, 8, 0);
  GST_BUFFER_FLAG_SET (disc, GST_BUFFER_FLAG_DISCONT);
  ck_assert_int_eq (gst_harness_push (f.h, disc), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (f.h);
  ck_assert_uint_eq (gst_buffer_get_size (out), 1 * 8 * sizeof (float));
  gst_buffer_unref (out);
  fixture_free (&f);
}
END_TEST

START_TEST (test_caps_with_another_dim_reset_temporal)
{
  Fixture f = fixture_new (8, "method", "temporal", NULL);
  g_autofree float *a = distinct_rows (64, 8, 0);

  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 64);
  ck_assert_uint_eq (push_rows (&f, a, 64, 8, NULL), 1);
  gst_harness_set_src_caps (f.h, gst_llm_caps_new_embeddings (16, GST_LLM_MODALITY_IMAGE,
          "mlp"));
  ck_assert_uint_eq (push_rows (&f, a, 32, 16, NULL), 32);
  ck_assert_uint_eq (push_rows (&f, a, 32, 16, NULL), 1);
  fixture_free (&f);
}
END_TEST

/* ---- stats, timing, EOS, errors ----------------------------------------- */

START_TEST (test_stats_message_and_counters)
{
  Fixture f = fixture_new (4, "ratio", "0.25", NULL);
  g_autofree float *rows = distinct_rows (16, 4, 0);
  guint n_in = 0, n_out = 0;
  guint64 us = G_MAXUINT64, total_in = 0, total_out = 0;
  gboolean resent = TRUE;

  push_rows (&f, rows, 16, 4, NULL);
  GstStructure *s = pop_element_message (f.bus, "llm-token-compress");
  ck_assert (gst_structure_get_uint (s, "rows-in", &n_in));
  ck_assert (gst_structure_get_uint (s, "rows-out", &n_out));
  ck_assert (gst_structure_get_uint64 (s, "time-us", &us));
  ck_assert (gst_structure_get_boolean (s, "resent-all", &resent));
  ck_assert_uint_eq (n_in, 16);
  ck_assert_uint_eq (n_out, 4);
  ck_assert (us < 10 * G_USEC_PER_SEC);
  ck_assert (!resent);
  gst_structure_free (s);

  push_rows (&f, rows, 8, 4, NULL);
  s = pop_element_message (f.bus, "llm-token-compress");
  ck_assert (gst_structure_get_uint (s, "rows-in", &n_in));
  ck_assert (gst_structure_get_uint (s, "rows-out", &n_out));
  ck_assert_uint_eq (n_in, 8);
  ck_assert_uint_eq (n_out, 2);
  gst_structure_free (s);

  g_object_get (f.h->element, "rows-in", &total_in, "rows-out", &total_out, NULL);
  ck_assert_uint_eq (total_in, 24);
  ck_assert_uint_eq (total_out, 6);
  fixture_free (&f);
}
END_TEST

START_TEST (test_timing_and_flags_kept)
{
  Fixture f = fixture_new (4, NULL);
  g_autofree float *rows = distinct_rows (16, 4, 0);
  GstBuffer *in = rows_buffer (rows, 16, 4, 3 * GST_SECOND);
  GST_BUFFER_DURATION (in) = 40 * GST_MSECOND;
  GST_BUFFER_FLAG_SET (in, GST_BUFFER_FLAG_MARKER);

  ck_assert_int_eq (gst_harness_push (f.h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (f.h);
  ck_assert_uint_eq (GST_BUFFER_PTS (out), 3 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (out), 40 * GST_MSECOND);
  ck_assert (GST_BUFFER_FLAG_IS_SET (out, GST_BUFFER_FLAG_MARKER));
  gst_buffer_unref (out);
  fixture_free (&f);
}
END_TEST

START_TEST (test_eos_passes)
{
  Fixture f = fixture_new (4, NULL);
  g_autofree float *rows = distinct_rows (4, 4, 0);
  GstEvent *ev;
  gboolean eos = FALSE;

  push_rows (&f, rows, 4, 4, NULL);
  ck_assert (gst_harness_push_event (f.h, gst_event_new_eos ()));
  while ((ev = gst_harness_try_pull_event (f.h)) != NULL) {
    eos |= GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
    gst_event_unref (ev);
  }
  ck_assert (eos);
  fixture_free (&f);
}
END_TEST

START_TEST (test_partial_row_is_an_error_naming_the_sizes)
{
  Fixture f = fixture_new (4, NULL);
  g_autofree char *text = NULL, *debug = NULL;
  const float rows[6] = { 0 };

  GstBuffer *in = gst_buffer_new_memdup (rows, 6 * sizeof (float));
  ck_assert_int_eq (gst_harness_push (f.h, in), GST_FLOW_ERROR);
  pop_error (f.bus, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT, &text, &debug);
  ck_assert_msg (strstr (debug, "24 bytes") && strstr (debug, "16 bytes"), "%s", debug);
  fixture_free (&f);
}
END_TEST

START_TEST (test_bad_meta_sizes_are_an_error)
{
  Fixture f = fixture_new (4, NULL);
  g_autofree char *text = NULL, *debug = NULL;
  g_autofree float *rows = distinct_rows (4, 4, 0);
  const float sizes[4] = { 1, 0, 1, 1 };

  GstBuffer *in = rows_buffer (rows, 4, 4, 0);
  GstLlmEmbeddingsMeta *m = gst_buffer_add_llm_embeddings_meta (in, 4, 2, 2);
  gst_llm_embeddings_meta_set_sizes (m, sizes, 4);
  ck_assert_int_eq (gst_harness_push (f.h, in), GST_FLOW_ERROR);
  pop_error (f.bus, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT, &text, &debug);
  ck_assert_msg (strstr (debug, "row 1") != NULL, "%s", debug);
  fixture_free (&f);
}
END_TEST

START_TEST (test_meta_for_other_rows_is_ignored)
{
  Fixture f = fixture_new (4, "ratio", "0.5", NULL);
  g_autofree float *rows = distinct_rows (8, 4, 0);
  const float sizes[3] = { 0, 0, 0 };

  GstBuffer *in = rows_buffer (rows, 8, 4, 0);
  GstLlmEmbeddingsMeta *im = gst_buffer_add_llm_embeddings_meta (in, 3, 0, 0);
  gst_llm_embeddings_meta_set_sizes (im, sizes, 3);
  ck_assert_int_eq (gst_harness_push (f.h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (f.h);
  const GstLlmEmbeddingsMeta *m = gst_buffer_get_llm_embeddings_meta (out);
  ck_assert_uint_eq (m->n_rows, 4);
  float total = 0;
  for (guint i = 0; i < 4; i++)
    total += m->sizes[i];
  ck_assert_float_eq (total, 8);
  gst_buffer_unref (out);
  fixture_free (&f);
}
END_TEST

static Suite *
token_compress_element_suite (void)
{
  gst_init (NULL, NULL);
  Suite *s = suite_create ("token-compress-element");
  TCase *tc = tcase_create ("caps");
  tcase_add_test (tc, test_caps_pass_through);
  tcase_add_test (tc, test_caps_query_offers_f32_only);
  tcase_add_test (tc, test_caps_refused_with_the_reason);
  suite_add_tcase (s, tc);

  tc = tcase_create ("methods");
  tcase_add_test (tc, test_merge_rows_and_meta);
  tcase_add_test (tc, test_max_tokens_caps_the_ratio);
  tcase_add_test (tc, test_prune_keeps_salient_rows_and_their_meta);
  tcase_add_loop_test (tc, test_no_method_passes_rows, 0, 2);
  suite_add_tcase (s, tc);

  tc = tcase_create ("temporal");
  tcase_add_test (tc, test_temporal_identical_frame_sends_one_row);
  tcase_add_test (tc, test_temporal_then_merge_budgets_the_frame);
  tcase_add_test (tc, test_flush_resets_temporal);
  tcase_add_test (tc, test_new_segment_resets_temporal_and_discont_does_not);
  tcase_add_test (tc, test_caps_with_another_dim_reset_temporal);
  suite_add_tcase (s, tc);

  tc = tcase_create ("stream");
  tcase_add_test (tc, test_stats_message_and_counters);
  tcase_add_test (tc, test_timing_and_flags_kept);
  tcase_add_test (tc, test_eos_passes);
  tcase_add_test (tc, test_partial_row_is_an_error_naming_the_sizes);
  tcase_add_test (tc, test_bad_meta_sizes_are_an_error);
  tcase_add_test (tc, test_meta_for_other_rows_is_ignored);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (token_compress_element_suite)
