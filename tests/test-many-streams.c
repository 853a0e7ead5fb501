/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Many streams on one engine, as whole pipelines: eight branches share
 * one engine (and its forwards) and each writes the text it writes
 * alone; a branch whose sink blocks holds no other branch up; a full KV
 * pool refuses with an error naming the limit, or preempts. */
#include <string.h>

#include <glib/gstdio.h>
#include <gst/gst.h>

#include "llm-check.h"

#define N_BRANCHES 8

static char *model_path;
static char *tmpdir;
/* Each branch's llmdecode max-tokens (setup: 24). */
static guint max_tokens;
/* What samples in each branch (setup: llmdecode). */
static const char *decoder;

static const char *const prompts[N_BRANCHES] = {
  "Once upon a time", "The dog", "Lily and Tom went", "One day, a little bird",
  "The sun was", "Mom said", "A big red ball", "They played in the park and",
};

static void
setup (void)
{
  model_path = llm_test_data_path ("models/stories260K.gguf");
  max_tokens = 24;
  decoder = "llmdecode";
  GError *error = NULL;
  tmpdir = g_dir_make_tmp ("gst-llm-streams-XXXXXX", &error);
  ck_assert_msg (tmpdir != NULL, "%s", error ? error->message : "");
}

static void
teardown (void)
{
  GDir *d = g_dir_open (tmpdir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name (d))) {
    g_autofree char *p = g_build_filename (tmpdir, name, NULL);
    g_unlink (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (tmpdir);
  g_clear_pointer (&tmpdir, g_free);
  g_clear_pointer (&model_path, g_free);
}

static char *
path_in_tmp (const char *fmt, guint i)
{
  g_autofree char *name = g_strdup_printf (fmt, i);
  return g_build_filename (tmpdir, name, NULL);
}

static char *
write_prompt (guint i)
{
  char *path = path_in_tmp ("prompt%u.txt", i);
  ck_assert (g_file_set_contents (path, prompts[i], -1, NULL));
  return path;
}

/* One branch: prompt file @i through the four elements into out@i.txt.
 * @extra goes on llmprefill. */
static void
append_branch (GString *desc, guint i, const char *extra, const char *sink)
{
  g_autofree char *prompt = write_prompt (i);
  g_autofree char *out = path_in_tmp ("out%u.txt", i);
  g_string_append_printf (desc, "filesrc location=\"%s\" ! llmtokenize model=\"%s\" "
      "! llmprefill name=prefill%u model=\"%s\" temperature=0 %s ! %s name=decode%u "
      "max-tokens=%u ! llmdetokenize model=\"%s\" ! ", prompt, model_path, i, model_path,
      extra ? extra : "", decoder, i, max_tokens, model_path);
  if (sink)
    g_string_append_printf (desc, "%s ", sink);
  else
    g_string_append_printf (desc, "filesink location=\"%s\" ", out);
}

typedef struct {
  GError *error;
  char *error_source;
  GError *warning;            /* the first WARNING */
  GPtrArray *engines;         /* gpointer: the engine of each HAVE_CONTEXT */
  GstContext *context;        /* the first gst.llm.engine context posted */
} Run;

static void
run_clear (Run *r)
{
  g_clear_error (&r->error);
  g_clear_pointer (&r->error_source, g_free);
  g_clear_error (&r->warning);
  g_clear_pointer (&r->engines, g_ptr_array_unref);
  g_clear_pointer (&r->context, gst_context_unref);
}

static void
note_message (GstMessage *m, Run *r)
{
  if (GST_MESSAGE_TYPE (m) == GST_MESSAGE_ERROR && r->error == NULL) {
    gst_message_parse_error (m, &r->error, NULL);
    r->error_source = gst_object_get_name (GST_MESSAGE_SRC (m));
  } else if (GST_MESSAGE_TYPE (m) == GST_MESSAGE_WARNING && r->warning == NULL) {
    gst_message_parse_warning (m, &r->warning, NULL);
  } else if (GST_MESSAGE_TYPE (m) == GST_MESSAGE_HAVE_CONTEXT) {
    GstContext *c = NULL;
    gst_message_parse_have_context (m, &c);
    if (g_strcmp0 (gst_context_get_context_type (c), "gst.llm.engine") == 0) {
      const GValue *v = gst_structure_get_value (gst_context_get_structure (c), "engine");
      g_ptr_array_add (r->engines, v ? g_value_get_boxed (v) : NULL);
      if (r->context == NULL)
        r->context = gst_context_ref (c);
    }
    gst_context_unref (c);
  }
}

/* Runs @desc to EOS or its first error, handed @context (NULL: none) as
 * an application sharing an engine would. */
static void
run_pipeline_with (const char *desc, GstContext *context, Run *r)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  ck_assert_msg (pipeline != NULL && error == NULL, "%s: %s", desc,
      error ? error->message : "");
  if (context != NULL)
    gst_element_set_context (pipeline, context);
  memset (r, 0, sizeof *r);
  r->engines = g_ptr_array_new ();
  GstBus *bus = gst_element_get_bus (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (gboolean done = FALSE; !done;) {
    GstMessage *m = gst_bus_timed_pop_filtered (bus, 120 * GST_SECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_HAVE_CONTEXT | GST_MESSAGE_WARNING);
    ck_assert_msg (m != NULL, "the pipeline neither finished nor failed: %s", desc);
    note_message (m, r);
    done = GST_MESSAGE_TYPE (m) == GST_MESSAGE_EOS || GST_MESSAGE_TYPE (m) == GST_MESSAGE_ERROR;
    gst_message_unref (m);
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  /* messages posted while going down */
  GstMessage *m;
  while ((m = gst_bus_pop_filtered (bus, GST_MESSAGE_HAVE_CONTEXT))) {
    note_message (m, r);
    gst_message_unref (m);
  }
  gst_object_unref (bus);
  gst_object_unref (pipeline);
}

static void
run_pipeline (const char *desc, Run *r)
{
  run_pipeline_with (desc, NULL, r);
}

static char *
read_out (guint i)
{
  g_autofree char *out = path_in_tmp ("out%u.txt", i);
  char *text = NULL;
  ck_assert_msg (g_file_get_contents (out, &text, NULL, NULL), "no output from branch %u", i);
  return text;
}

/* The text of branches 0..n-1 when each runs alone in its own pipeline. */
static void
texts_alone (char **alone, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_autoptr (GString) desc = g_string_new (NULL);
    append_branch (desc, i, NULL, NULL);
    Run r;
    run_pipeline (desc->str, &r);
    ck_assert_msg (r.error == NULL, "branch %u alone: %s", i, r.error->message);
    run_clear (&r);
    alone[i] = read_out (i);
    ck_assert_uint_gt (strlen (alone[i]), 0);
  }
}

/* Each of the @n branches wrote what it writes alone (@alone, freed). */
static void
assert_texts_as_alone (char **alone, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *text = read_out (i);
    ck_assert_msg (g_strcmp0 (text, alone[i]) == 0, "branch %u: \"%s\", alone \"%s\"", i, text,
        alone[i]);
    g_free (alone[i]);
  }
}

/* @n branches with @props on llmprefill run in one pipeline, with no
 * error or warning, and each writes what it writes alone. */
static void
assert_branches_write_their_text (guint n, const char *props)
{
  char **alone = g_new0 (char *, n);
  texts_alone (alone, n);
  g_autoptr (GString) desc = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    append_branch (desc, i, props, NULL);
  Run r;
  run_pipeline (desc->str, &r);
  ck_assert_msg (r.error == NULL && r.warning == NULL, "%s",
      r.error ? r.error->message : r.warning ? r.warning->message : "");
  run_clear (&r);
  assert_texts_as_alone (alone, n);
  g_free (alone);
}

START_TEST (test_eight_branches_share_one_engine_and_write_their_own_text)
{
  char *alone[N_BRANCHES];
  texts_alone (alone, N_BRANCHES);
  /* every branch its own text: the check below could not tell otherwise */
  for (guint i = 1; i < N_BRANCHES; i++)
    ck_assert_str_ne (alone[i], alone[0]);

  g_autoptr (GString) desc = g_string_new (NULL);
  for (guint i = 0; i < N_BRANCHES; i++)
    append_branch (desc, i, NULL, NULL);
  Run r;
  run_pipeline (desc->str, &r);
  ck_assert_msg (r.error == NULL, "%s: %s", r.error_source, r.error ? r.error->message : "");
  /* One engine for all: whoever posted a context posted the same one. */
  ck_assert_uint_ge (r.engines->len, 1);
  for (guint i = 0; i < r.engines->len; i++)
    ck_assert_ptr_eq (g_ptr_array_index (r.engines, i), g_ptr_array_index (r.engines, 0));
  run_clear (&r);
  assert_texts_as_alone (alone, N_BRANCHES);
}
END_TEST

/* Branch 0 ends in an appsink nobody reads (it blocks after one buffer);
 * branch 1 still finishes its whole response. */
START_TEST (test_a_blocked_branch_does_not_stall_the_others)
{
  char *alone[2];
  texts_alone (alone, 2);
  g_autoptr (GString) desc = g_string_new (NULL);
  append_branch (desc, 0, NULL, "appsink name=stuck max-buffers=1 drop=false sync=false");
  append_branch (desc, 1, NULL, NULL);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc->str, &error);
  ck_assert_msg (pipeline != NULL, "%s", error ? error->message : "");
  GstBus *bus = gst_element_get_bus (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  /* decode1's llm-stats: branch 1's response is complete */
  gboolean finished = FALSE;
  while (!finished) {
    GstMessage *m = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
        GST_MESSAGE_ELEMENT | GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
    ck_assert_msg (m != NULL, "branch 1 stalled behind the blocked branch");
    ck_assert_int_eq (GST_MESSAGE_TYPE (m), GST_MESSAGE_ELEMENT);
    g_autofree char *src = gst_object_get_name (GST_MESSAGE_SRC (m));
    finished = gst_structure_has_name (gst_message_get_structure (m), "llm-stats")
        && strcmp (src, "decode1") == 0;
    gst_message_unref (m);
  }
  /* The file sink may still hold the tail: wait for branch 1's EOS to be
   * written by draining the stuck branch now. */
  GstElement *stuck = gst_bin_get_by_name (GST_BIN (pipeline), "stuck");
  g_autoptr (GString) text0 = g_string_new (NULL);
  GstSample *sample;
  g_signal_emit_by_name (stuck, "pull-sample", &sample);
  while (sample) {
    GstMapInfo map;
    GstBuffer *b = gst_sample_get_buffer (sample);
    gst_buffer_map (b, &map, GST_MAP_READ);
    g_string_append_len (text0, (const char *) map.data, map.size);
    gst_buffer_unmap (b, &map);
    gst_sample_unref (sample);
    g_signal_emit_by_name (stuck, "pull-sample", &sample);
  }
  gst_object_unref (stuck);
  GstMessage *m = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  ck_assert (m != NULL && GST_MESSAGE_TYPE (m) == GST_MESSAGE_EOS);
  gst_message_unref (m);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);

  ck_assert_str_eq (text0->str, alone[0]);
  g_autofree char *text1 = read_out (1);
  ck_assert_str_eq (text1, alone[1]);
  g_free (alone[0]);
  g_free (alone[1]);
}
END_TEST

/* Branches 0 and 1 on an engine whose KV pool holds one stream's first
 * block (stories260K: 5 layers x (K, V) x 64 positions x 4 KV heads x 8
 * values x 2 B of f16), with @extra on both llmprefills. */
static void
run_two_branches_on_one_block (const char *extra, Run *r)
{
  g_autofree char *props = g_strdup_printf ("kv-pool-bytes=40960 context-length=256 %s",
      extra);
  g_autoptr (GString) desc = g_string_new (NULL);
  append_branch (desc, 0, props, NULL);
  append_branch (desc, 1, props, NULL);
  run_pipeline (desc->str, r);
}

/* A pool that holds one stream's first block: the second stream's prompt
 * is refused, naming the property, and the advice is for streams that
 * share the memory (the other stream holds it). */
START_TEST (test_full_kv_pool_refuses_a_stream_with_an_error_naming_the_limit)
{
  Run r;
  run_two_branches_on_one_block ("", &r);
  ck_assert (r.error != NULL);
  ck_assert_msg (g_error_matches (r.error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_NO_SPACE_LEFT),
      "%s", r.error->message);
  ck_assert_msg (strstr (r.error->message, "kv-pool-bytes")
      && strstr (r.error->message, "kv-full=preempt")
      && !strstr (r.error->message, "alone"), "%s", r.error->message);
  ck_assert (g_str_has_prefix (r.error_source, "prefill"));
  run_clear (&r);
}
END_TEST

/* A response that outgrows the pool (one block, 64 positions; 100 tokens
 * asked for) ends where the memory does, with a warning: the stream is not
 * failed (a newcomer that took the last block would otherwise kill a
 * running stream) and its text so far is the text it has alone. */
START_TEST (test_a_response_outgrowing_the_kv_pool_ends_early_without_an_error)
{
  /* with nothing to preempt, both policies end the response; the advice
   * says the stream holds all the memory itself, so that preemption (or
   * fewer streams) would not help */
  const gboolean preempt = _i == 1;
  max_tokens = 100;
  char *alone[1];
  texts_alone (alone, 1);
  g_autoptr (GString) desc = g_string_new (NULL);
  append_branch (desc, 0, preempt ? "kv-pool-bytes=50000 kv-full=preempt"
      : "kv-pool-bytes=50000 kv-full=refuse", NULL);
  Run r;
  run_pipeline (desc->str, &r);
  ck_assert_msg (r.error == NULL, "%s", r.error ? r.error->message : "");
  ck_assert_msg (r.warning && g_error_matches (r.warning, GST_RESOURCE_ERROR,
          GST_RESOURCE_ERROR_NO_SPACE_LEFT), "no pool-full warning");
  ck_assert_msg (strstr (r.warning->message, "alone holds all")
      && strstr (r.warning->message, "raise kv-pool-bytes or lower max-tokens")
      && !strstr (r.warning->message, "kv-full=preempt")
      && !strstr (r.warning->message, "fewer streams"), "%s", r.warning->message);
  run_clear (&r);
  g_autofree char *got = read_out (0);
  ck_assert_msg (strlen (got) > 0 && strlen (got) < strlen (alone[0])
      && strncmp (got, alone[0], strlen (got)) == 0, "got \"%s\", alone \"%s\"", got,
      alone[0]);
  g_free (alone[0]);
}
END_TEST

/* A gst.llm.engine context (which a bin also hands every element added
 * to it later) serves only elements asking for that engine: one with its
 * own kv-pool-bytes runs on an engine with that limit, and is refused. */
START_TEST (test_an_engine_context_does_not_override_the_elements_engine_properties)
{
  g_autoptr (GString) shared = g_string_new (NULL);
  append_branch (shared, 0, NULL, NULL);
  Run a;
  run_pipeline (shared->str, &a);
  ck_assert_msg (a.error == NULL && a.context != NULL, "%s",
      a.error ? a.error->message : "no engine context posted");

  g_autoptr (GString) limited = g_string_new (NULL);
  append_branch (limited, 1, "kv-pool-bytes=1000 kv-full=refuse", NULL);
  Run b;
  run_pipeline_with (limited->str, a.context, &b);
  ck_assert_msg (b.error != NULL, "the context's engine (no pool limit) ran the stream");
  ck_assert_msg (strstr (b.error->message, "kv-pool-bytes"), "%s", b.error->message);
  run_clear (&b);

  /* The same properties as the context's engine: that engine, no new one. */
  g_autoptr (GString) same = g_string_new (NULL);
  append_branch (same, 1, NULL, NULL);
  run_pipeline_with (same->str, a.context, &b);
  ck_assert_msg (b.error == NULL, "%s", b.error ? b.error->message : "");
  ck_assert_uint_eq (b.engines->len, 0);
  run_clear (&b);
  run_clear (&a);
}
END_TEST

/* The same pool with kv-full=preempt: both branches finish with their
 * own text, each taking the block back from the other in turn. */
START_TEST (test_full_kv_pool_preempts_and_every_branch_still_writes_its_text)
{
  char *alone[2];
  texts_alone (alone, 2);
  Run r;
  run_two_branches_on_one_block ("kv-full=preempt", &r);
  ck_assert_msg (r.error == NULL, "%s", r.error ? r.error->message : "");
  run_clear (&r);
  assert_texts_as_alone (alone, 2);
}
END_TEST

/* The take-turns tests below run as they are (_i 0) and with turns of
 * 0.5 ms (_i 1, kv-time-slice), where streams give their memory up
 * mid-response many times over (6 to 8 turns in the three-branch run),
 * each recomputing its history when its turn comes back. */
static const char *const turns[] = { "", " kv-time-slice=500000" };

static void
assert_branches_taking_turns_write_their_text (guint n, const char *props, int turn)
{
  g_autofree char *all = g_strconcat (props, turns[turn], NULL);
  assert_branches_write_their_text (n, all);
}

/* Three branches of 140 tokens, a pool of 7 blocks (3 or 4 a stream):
 * streams preempted while the others run recompute histories of several
 * blocks, and one that gets some of them before the pool runs dry waits
 * for its turn (it used to preempt itself, forever, at full CPU). */
START_TEST (test_three_long_branches_on_a_small_pool_take_turns_to_the_end)
{
  max_tokens = 140;
  assert_branches_taking_turns_write_their_text (3, "kv-pool-bytes=300000 kv-full=preempt", _i);
}
END_TEST

/* Eight branches of 100 tokens (two blocks each) on a pool of nine
 * blocks: the oldest streams run and the youngest wait for their turn,
 * and every branch writes the text it writes alone. (Preempting the
 * longest-idle stream, streams took the memory from each other in a
 * circle, recomputing all along, until some gave up mid-response.) */
START_TEST (test_eight_branches_on_a_pool_for_four_take_turns_and_write_their_text)
{
  max_tokens = 100;
  assert_branches_taking_turns_write_their_text (N_BRANCHES,
      "kv-pool-bytes=370000 kv-full=preempt", _i);
}
END_TEST

/* Speculative verification on a pool of two blocks for three streams, a
 * prompt fed four rows a forward: every branch writes its text. (A
 * younger stream's prompt, waiting for memory, took the forward's whole
 * prompt budget every time, and the older streams' verifications, which
 * held the memory, never ran again.) */
START_TEST (test_verifying_branches_on_a_small_pool_take_turns_and_write_their_text)
{
  max_tokens = 100;
  decoder = "llmdraft ! llmspecverify";
  assert_branches_taking_turns_write_their_text (3,
      "kv-pool-bytes=81920 kv-full=preempt max-prefill-chunk=4", _i);
}
END_TEST

/* Eight kept conversations fed a long text 100 bytes a prompt, on a pool
 * of four blocks: a conversation that outgrows the whole pool fails with
 * the pool-full error, and the pipeline ends. (A conversation emptied by
 * its owner kept its blocks for reuse and, not ranked yet, could be taken
 * by nobody; its own next prompt never got a turn, the other streams
 * waited for its memory, and the pipeline hung, stop included.) */
START_TEST (test_conversations_outgrowing_a_small_pool_fail_without_a_hang)
{
  max_tokens = 20;
  g_autoptr (GString) long_text = g_string_new (NULL);
  for (guint k = 0; k < 4; k++)
    g_string_append (long_text, "Once upon a time there was a little girl named Lily who "
        "loved to play in the park with her dog and her ball and her friends every day "
        "after school. ");
  g_autofree char *path = path_in_tmp ("long%u.txt", 0);
  ck_assert (g_file_set_contents (path, long_text->str, -1, NULL));
  g_autoptr (GString) desc = g_string_new (NULL);
  for (guint i = 0; i < N_BRANCHES; i++) {
    g_autofree char *out = path_in_tmp ("out%u.txt", i);
    g_string_append_printf (desc, "filesrc location=\"%s\" blocksize=100 ! llmtokenize "
        "model=\"%s\" ! llmprefill model=\"%s\" temperature=0 kv-pool-bytes=163840 "
        "kv-full=preempt keep-context=true prompt-mode=buffer ! llmdecode max-tokens=%u ! "
        "llmdetokenize model=\"%s\" ! filesink location=\"%s\" ", path, model_path,
        model_path, max_tokens, model_path, out);
  }
  Run r;
  run_pipeline (desc->str, &r);
  ck_assert_msg (r.error && g_error_matches (r.error, GST_RESOURCE_ERROR,
          GST_RESOURCE_ERROR_NO_SPACE_LEFT), "%s", r.error ? r.error->message : "no error");
  /* it is that conversation's own length that the pool cannot hold */
  ck_assert_msg (strstr (r.error->message, "alone holds all")
      && strstr (r.error->message, "keep-context off"), "%s", r.error->message);
  run_clear (&r);
}
END_TEST

static gpointer
set_null (gpointer pipeline)
{
  return GINT_TO_POINTER (gst_element_set_state (pipeline, GST_STATE_NULL));
}

/* Two pipelines of one process on one engine (a pool of one block, a
 * window of one block): the first one's endless response holds the block
 * for ever and the second one's stream waits for it. Stopping the second
 * pipeline ends that wait at once, while the first runs on. */
START_TEST (test_a_stream_waiting_for_kv_memory_stops_with_its_pipeline)
{
  max_tokens = 0;
  const char *props = "kv-pool-bytes=40960 kv-full=preempt kv-policy=window kv-window=64";
  GstElement *pipelines[2];
  GStatBuf st;
  for (guint i = 0; i < 2; i++) {
    g_autoptr (GString) desc = g_string_new (NULL);
    append_branch (desc, i, props, NULL);
    pipelines[i] = gst_parse_launch (desc->str, NULL);
    ck_assert (pipelines[i] != NULL);
    gst_element_set_state (pipelines[i], GST_STATE_PLAYING);
    /* the first one's response is under way (it holds the block) */
    g_autofree char *out = path_in_tmp ("out%u.txt", i);
    for (int tries = 0; i == 0 && tries < 600 && (g_stat (out, &st) != 0 || st.st_size == 0);
        tries++)
      g_usleep (G_USEC_PER_SEC / 20);
  }
  g_usleep (G_USEC_PER_SEC / 2);
  g_autofree char *path1 = path_in_tmp ("out%u.txt", 1);
  ck_assert (g_stat (path1, &st) == 0);
  const goffset waited_out = st.st_size;

  GThread *t = g_thread_new ("set-null", set_null, pipelines[1]);
  const gint64 until = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  GstState state = GST_STATE_PLAYING;
  while (g_get_monotonic_time () < until
      && (gst_element_get_state (pipelines[1], &state, NULL, 0), state != GST_STATE_NULL))
    g_usleep (10000);
  /* (had it not stopped, the first pipeline's stop frees the block) */
  gst_element_set_state (pipelines[0], GST_STATE_NULL);
  ck_assert_int_eq (GPOINTER_TO_INT (g_thread_join (t)), GST_STATE_CHANGE_SUCCESS);
  ck_assert_msg (state == GST_STATE_NULL, "the second pipeline did not stop while its "
      "stream waited for KV memory");
  g_autofree char *out0 = read_out (0);
  ck_assert_msg (strlen (out0) > 0 && waited_out == 0, "%zu and %" G_GOFFSET_FORMAT
      " bytes out", strlen (out0), waited_out);
  for (guint i = 0; i < 2; i++)
    gst_object_unref (pipelines[i]);
}
END_TEST

static Suite *
many_streams_suite (void)
{
  Suite *s = suite_create ("many-streams");
  TCase *tc = tcase_create ("many-streams");
  gst_init (NULL, NULL);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_eight_branches_share_one_engine_and_write_their_own_text);
  tcase_add_test (tc, test_a_blocked_branch_does_not_stall_the_others);
  tcase_add_test (tc, test_full_kv_pool_refuses_a_stream_with_an_error_naming_the_limit);
  tcase_add_test (tc, test_full_kv_pool_preempts_and_every_branch_still_writes_its_text);
  tcase_add_loop_test (tc, test_a_response_outgrowing_the_kv_pool_ends_early_without_an_error, 0, 2);
  tcase_add_test (tc, test_an_engine_context_does_not_override_the_elements_engine_properties);
  tcase_add_loop_test (tc, test_three_long_branches_on_a_small_pool_take_turns_to_the_end, 0,
      G_N_ELEMENTS (turns));
  tcase_add_loop_test (tc, test_eight_branches_on_a_pool_for_four_take_turns_and_write_their_text,
      0, G_N_ELEMENTS (turns));
  tcase_add_loop_test (tc, test_verifying_branches_on_a_small_pool_take_turns_and_write_their_text,
      0, G_N_ELEMENTS (turns));
  tcase_add_test (tc, test_conversations_outgrowing_a_small_pool_fail_without_a_hang);
  tcase_add_test (tc, test_a_stream_waiting_for_kv_memory_stops_with_its_pipeline);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (many_streams_suite)
