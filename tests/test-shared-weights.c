/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Two `llmprefill ! llmdecode` branches with the same model and device,
 * in one pipeline or in two pipelines of one process (the second one
 * naming the file through a link, too), hold one copy of the weights:
 * with the first branch's response done (every weight page read) and its
 * pipeline still playing, a second branch's response grows the process's
 * resident memory by its KV cache and a few MiB, not by the model. The
 * control shows the measurement sees a copy when there is one: the same
 * bytes at another path are another model, and a branch on it grows RSS
 * by the weights it reads. */
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gst/app/gstappsrc.h>

#include "llm-caps.h"
#include "llm-check.h"
#include "gguf.h"
#include "gguf-writer.h"
#include "ggml-type.h"

/* A llama whose layers hold 6 x 16 MiB of F32 weights, so a second copy
 * (about 97 MiB) stands far above the slack below; decoding it takes
 * milliseconds per token. The vocabulary is stories260K's (512 ids), so
 * the embedding table, of which a step reads one row, is 1 MiB. */
#define N_EMBD 512
#define N_FF 2048
#define N_LAYER 6
#define N_HEAD 8
#define N_VOCAB 512
#define CONTEXT 64

/* What a second branch may add besides its KV cache: its elements, the
 * decode task's stack, buffers and GLib/GStreamer bookkeeping. Measured:
 * 0.2 MiB, or less than the KV itself where heap freed by an earlier test
 * is reused (the bound is an upper one); a copy of the weights is 97 MiB. */
#define SLACK (8 << 20)

static char *tmpdir, *model_path, *copy_path, *link_path;

/* Bytes a forward reads from the file (everything but the embedding
 * table), which a copy's branch makes resident. */
static gsize weights_read;

/* The model, written twice: at model_path and, byte for byte, at
 * copy_path. */
static void
write_models (void)
{
  const LlmTestShape shape = { N_EMBD, N_FF, N_LAYER, N_HEAD, N_HEAD };
  weights_read = llm_test_write_random_llama (model_path, &shape, LLM_TYPE_F32);
  GError *error = NULL;
  gchar *bytes;
  gsize len;
  ck_assert_msg (g_file_get_contents (model_path, &bytes, &len, &error), "%s",
      error ? error->message : "");
  ck_assert_msg (g_file_set_contents (copy_path, bytes, len, &error), "%s",
      error ? error->message : "");
  g_free (bytes);
}

static void
setup (void)
{
  gst_init (NULL, NULL);
  GError *error = NULL;
  tmpdir = g_dir_make_tmp ("gst-llm-weights-XXXXXX", &error);
  ck_assert_msg (tmpdir != NULL, "%s", error ? error->message : "");
  model_path = g_build_filename (tmpdir, "model.gguf", NULL);
  copy_path = g_build_filename (tmpdir, "copy.gguf", NULL);
  link_path = g_build_filename (tmpdir, "link.gguf", NULL);
  write_models ();
  ck_assert (symlink ("model.gguf", link_path) == 0);
}

static void
teardown (void)
{
  g_unlink (model_path);
  g_unlink (copy_path);
  g_unlink (link_path);
  g_rmdir (tmpdir);
  g_clear_pointer (&model_path, g_free);
  g_clear_pointer (&copy_path, g_free);
  g_clear_pointer (&link_path, g_free);
  g_clear_pointer (&tmpdir, g_free);
}

/* Resident bytes of this process now (file pages of every mapping
 * included, once per mapping). */
static gsize
rss_bytes (void)
{
  g_autofree char *statm = NULL;
  ck_assert (g_file_get_contents ("/proc/self/statm", &statm, NULL, NULL));
  g_auto (GStrv) f = g_strsplit (statm, " ", 3);
  ck_assert (f[0] != NULL && f[1] != NULL);
  return (gsize) g_ascii_strtoull (f[1], NULL, 10) * (gsize) sysconf (_SC_PAGESIZE);
}

typedef struct {
  GstElement *pipeline;
  GstBus *bus;
  guint n_branches;
  GPtrArray *engines;         /* the engine of each gst.llm.engine HAVE_CONTEXT */
} Pipeline;

/* A playing pipeline of @n branches `appsrc name=src<i> ! llmprefill !
 * llmdecode name=decode<i> ! fakesink` on @model; nothing pushed yet.
 * The sinks do not preroll (async=false): a branch not yet fed must not
 * hold the pipeline, and with it a fed branch's sink, in PAUSED. */
static Pipeline *
pipeline_start (const char *model, guint first, guint n)
{
  g_autoptr (GString) desc = g_string_new (NULL);
  for (guint i = first; i < first + n; i++)
    g_string_append_printf (desc, "appsrc name=src%u format=time caps=" GST_LLM_CAPS_TOKENS
        " ! llmprefill model=\"%s\" prompt-mode=buffer temperature=0 context-length=%u "
        "n-threads=2 ! llmdecode name=decode%u max-tokens=8 ! fakesink sync=false async=false ",
        i, model,
        CONTEXT, i);
  GError *error = NULL;
  Pipeline *p = g_new0 (Pipeline, 1);
  p->pipeline = gst_parse_launch (desc->str, &error);
  ck_assert_msg (p->pipeline != NULL && error == NULL, "%s: %s", desc->str,
      error ? error->message : "");
  p->bus = gst_element_get_bus (p->pipeline);
  p->engines = g_ptr_array_new ();
  ck_assert (gst_element_set_state (p->pipeline, GST_STATE_PLAYING)
      != GST_STATE_CHANGE_FAILURE);
  return p;
}

static void
note_context (Pipeline *p, GstMessage *m)
{
  GstContext *c = NULL;
  gst_message_parse_have_context (m, &c);
  if (g_strcmp0 (gst_context_get_context_type (c), "gst.llm.engine") == 0) {
    const GValue *v = gst_structure_get_value (gst_context_get_structure (c), "engine");
    g_ptr_array_add (p->engines, v ? g_value_get_boxed (v) : NULL);
  }
  gst_context_unref (c);
}

/* Pushes a prompt into branch @i and waits for its response's llm-stats;
 * returns the stream's kv-bytes. The pipeline keeps playing (no EOS), so
 * its engine and session stay alive. */
static guint64
respond (Pipeline *p, guint i)
{
  g_autofree char *src_name = g_strdup_printf ("src%u", i);
  g_autofree char *decode_name = g_strdup_printf ("decode%u", i);
  GstElement *src = gst_bin_get_by_name (GST_BIN (p->pipeline), src_name);
  ck_assert (src != NULL);
  gint32 prompt[8];
  for (guint k = 0; k < G_N_ELEMENTS (prompt); k++)
    prompt[k] = (gint32) (1 + (k * 37 + i * 11) % (N_VOCAB - 1));
  ck_assert_int_eq (gst_app_src_push_buffer (GST_APP_SRC (src),
      gst_llm_tokens_buffer_new (prompt, G_N_ELEMENTS (prompt))), GST_FLOW_OK);
  gst_object_unref (src);

  for (;;) {
    GstMessage *m = gst_bus_timed_pop_filtered (p->bus, 60 * GST_SECOND,
        GST_MESSAGE_ELEMENT | GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_HAVE_CONTEXT);
    ck_assert_msg (m != NULL, "branch %u gave no response", i);
    if (GST_MESSAGE_TYPE (m) == GST_MESSAGE_ERROR) {
      GError *error = NULL;
      gst_message_parse_error (m, &error, NULL);
      ck_abort_msg ("branch %u: %s", i, error->message);
    }
    ck_assert_int_ne (GST_MESSAGE_TYPE (m), GST_MESSAGE_EOS);
    if (GST_MESSAGE_TYPE (m) == GST_MESSAGE_HAVE_CONTEXT) {
      note_context (p, m);
      gst_message_unref (m);
      continue;
    }
    const GstStructure *s = gst_message_get_structure (m);
    g_autofree char *from = gst_object_get_name (GST_MESSAGE_SRC (m));
    if (gst_structure_has_name (s, "llm-stats") && strcmp (from, decode_name) == 0) {
      guint prompt_tokens = 0, generated = 0;
      guint64 kv = 0;
      ck_assert (gst_structure_get (s, "prompt-tokens", G_TYPE_UINT, &prompt_tokens,
          "generated-tokens", G_TYPE_UINT, &generated, "kv-bytes", G_TYPE_UINT64, &kv, NULL));
      /* the prompt ran through every layer, so every weight page was read */
      ck_assert_uint_eq (prompt_tokens, G_N_ELEMENTS (prompt));
      ck_assert_uint_ge (generated, 1);
      ck_assert_uint_gt (kv, 0);
      gst_message_unref (m);
      return kv;
    }
    gst_message_unref (m);
  }
}

static void
pipeline_stop (Pipeline *p)
{
  gst_element_set_state (p->pipeline, GST_STATE_NULL);
  GstMessage *m;
  while ((m = gst_bus_pop_filtered (p->bus, GST_MESSAGE_HAVE_CONTEXT))) {
    note_context (p, m);
    gst_message_unref (m);
  }
  gst_object_unref (p->bus);
  gst_object_unref (p->pipeline);
  g_ptr_array_unref (p->engines);
  g_free (p);
}

/* The engine the first llmprefill of @p posted. */
static gpointer
engine_of (Pipeline *p)
{
  ck_assert_uint_ge (p->engines->len, 1);
  return g_ptr_array_index (p->engines, 0);
}

static void
assert_grew_by_kv_only (gsize before, gsize after, guint64 kv, const char *what)
{
  const gint64 grew = (gint64) after - (gint64) before;
  g_print ("%s: RSS grew by %" G_GINT64_FORMAT " KiB, the stream's KV is %" G_GUINT64_FORMAT
      " KiB, the weights %" G_GSIZE_FORMAT " KiB\n", what, grew / 1024, kv / 1024,
      weights_read / 1024);
  ck_assert_msg (grew < (gint64) (kv + SLACK), "%s: RSS grew by %" G_GINT64_FORMAT " bytes, "
      "more than the %" G_GUINT64_FORMAT " of KV cache and %d of slack: a second copy of "
      "the weights (%" G_GSIZE_FORMAT " bytes)?", what, grew, kv, SLACK, weights_read);
}

/* A second pipeline on @second_path, once a first one on model_path has
 * answered. */
static void
check_second_pipeline_adds_only_its_kv (const char *second_path, const char *what)
{
  Pipeline *a = pipeline_start (model_path, 0, 1);
  respond (a, 0);
  const gsize before = rss_bytes ();
  Pipeline *b = pipeline_start (second_path, 1, 1);
  const guint64 kv = respond (b, 1);
  const gsize after = rss_bytes ();
  /* Both prefills found the one engine through the process registry. */
  ck_assert_ptr_eq (engine_of (a), engine_of (b));
  pipeline_stop (b);
  pipeline_stop (a);
  assert_grew_by_kv_only (before, after, kv, what);
}

START_TEST (test_a_second_pipeline_on_the_same_model_adds_only_its_kv_cache)
{
  check_second_pipeline_adds_only_its_kv (model_path, "second pipeline, same model");
}
END_TEST

/* The model is the file, not the path's spelling. */
START_TEST (test_a_second_pipeline_through_a_link_to_the_model_adds_only_its_kv_cache)
{
  check_second_pipeline_adds_only_its_kv (link_path, "second pipeline, link to the model");
}
END_TEST

/* Both branches go to PLAYING together, but the second is fed only once
 * the first has answered. */
START_TEST (test_a_second_branch_in_one_pipeline_adds_only_its_kv_cache)
{
  Pipeline *p = pipeline_start (model_path, 0, 2);
  respond (p, 0);
  const gsize before = rss_bytes ();
  const guint64 kv = respond (p, 1);
  const gsize after = rss_bytes ();
  pipeline_stop (p);
  assert_grew_by_kv_only (before, after, kv, "second branch, same model");
}
END_TEST

/* The control: the same bytes at another path are another model with
 * engines of its own, and its branch makes the weights resident again. */
START_TEST (test_a_copy_of_the_model_at_another_path_adds_a_copy_of_the_weights)
{
  Pipeline *a = pipeline_start (model_path, 0, 1);
  respond (a, 0);
  const gsize before = rss_bytes ();
  Pipeline *b = pipeline_start (copy_path, 1, 1);
  respond (b, 1);
  const gsize after = rss_bytes ();
  ck_assert_ptr_ne (engine_of (a), engine_of (b));
  pipeline_stop (b);
  pipeline_stop (a);
  const gint64 grew = (gint64) after - (gint64) before;
  g_print ("copy at another path: RSS grew by %" G_GINT64_FORMAT " KiB, the weights %"
      G_GSIZE_FORMAT " KiB\n", grew / 1024, weights_read / 1024);
  /* Every page of the copy's layers and output matrix, give or take a
   * page per tensor; above that, the copy's engine scratch and pages
   * faulted in around the embedding rows read (measured: weights + 7%),
   * but not two copies. */
  ck_assert_msg (grew >= (gint64) (weights_read - weights_read / 20), "RSS grew by %"
      G_GINT64_FORMAT " bytes, less than the copy's %" G_GSIZE_FORMAT " bytes of weights: "
      "the measurement does not see a copy", grew, weights_read);
  ck_assert_msg (grew < (gint64) (weights_read + weights_read / 2),
      "RSS grew by %" G_GINT64_FORMAT " bytes, more than one copy of the weights", grew);
}
END_TEST

static Suite *
shared_weights_suite (void)
{
  Suite *s = suite_create ("shared-weights");
  TCase *tc = tcase_create ("shared-weights");
  /* The models are written once for the three tests. */
  tcase_add_unchecked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_a_second_pipeline_on_the_same_model_adds_only_its_kv_cache);
  tcase_add_test (tc, test_a_second_pipeline_through_a_link_to_the_model_adds_only_its_kv_cache);
  tcase_add_test (tc, test_a_second_branch_in_one_pipeline_adds_only_its_kv_cache);
  tcase_add_test (tc, test_a_copy_of_the_model_at_another_path_adds_a_copy_of_the_weights);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (shared_weights_suite)
