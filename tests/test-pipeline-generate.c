/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole pipelines from a launch line: text in, generated text out, with
 * the bundled stories260K model; and broken models end in an error
 * message, not a crash. */
#include <string.h>

#include <glib/gstdio.h>
#include <gst/gst.h>

#include "llm-check.h"
#include "tokenizer.h"

/* llama.cpp's greedy 64 tokens after "Once upon a time", as text. */
#define STORY ", there was a little girl named Lily. She loved to play outside in the " \
  "park. One day, she saw a big, red ball. She wanted to play with it, but it was too " \
  "high.\nLily's mom said"

static char *model_path;
static char *tmpdir;

static void
setup (void)
{
  model_path = llm_test_data_path ("models/stories260K.gguf");
  GError *error = NULL;
  tmpdir = g_dir_make_tmp ("gst-llm-pipeline-XXXXXX", &error);
  ck_assert_msg (tmpdir != NULL, "%s", error ? error->message : "");
}

static void
remove_tree (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name (d))) {
    char *p = g_build_filename (dir, name, NULL);
    g_unlink (p);
    g_free (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (dir);
}

static void
teardown (void)
{
  remove_tree (tmpdir);
  g_clear_pointer (&tmpdir, g_free);
  g_clear_pointer (&model_path, g_free);
}

static char *
write_file (const char *name, const char *contents, gssize len)
{
  char *path = g_build_filename (tmpdir, name, NULL);
  GError *error = NULL;
  ck_assert_msg (g_file_set_contents (path, contents, len, &error), "%s",
      error ? error->message : "");
  return path;
}

typedef struct {
  GError *error;          /* the first error, if any */
  char *error_source;     /* the element that posted it */
  GstStructure *stats;    /* the last llm-stats */
} RunResult;

static void
run_result_clear (RunResult *r)
{
  g_clear_error (&r->error);
  g_clear_pointer (&r->error_source, g_free);
  g_clear_pointer (&r->stats, gst_structure_free);
}

/* Runs @desc until EOS or an error. */
static void
run_pipeline (const char *desc, RunResult *r)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  ck_assert_msg (pipeline != NULL, "%s: %s", desc, error ? error->message : "");
  ck_assert_msg (error == NULL, "%s", error->message);
  GstBus *bus = gst_element_get_bus (pipeline);

  memset (r, 0, sizeof *r);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (gboolean done = FALSE; !done;) {
    GstMessage *m = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_ELEMENT);
    ck_assert_msg (m != NULL, "the pipeline neither finished nor failed: %s", desc);
    switch (GST_MESSAGE_TYPE (m)) {
      case GST_MESSAGE_ERROR:
        if (r->error == NULL) {
          gst_message_parse_error (m, &r->error, NULL);
          r->error_source = gst_object_get_name (GST_MESSAGE_SRC (m));
        }
        done = TRUE;
        break;
      case GST_MESSAGE_EOS:
        done = TRUE;
        break;
      default:{
        const GstStructure *s = gst_message_get_structure (m);
        if (gst_structure_has_name (s, "llm-stats")) {
          g_clear_pointer (&r->stats, gst_structure_free);
          r->stats = gst_structure_copy (s);
        }
        break;
      }
    }
    gst_message_unref (m);
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
}

static char *
story_pipeline (const char *prompt, const char *prefill_model, const char *out)
{
  return g_strdup_printf ("filesrc location=\"%s\" ! llmtokenize model=\"%s\" "
      "! llmprefill name=prefill model=\"%s\" temperature=0 n-threads=1 "
      "! llmdecode max-tokens=64 ! llmdetokenize model=\"%s\" ! filesink location=\"%s\"",
      prompt, model_path, prefill_model, model_path, out);
}

START_TEST (test_pipeline_tells_the_story)
{
  /* no trailing newline: "Once upon a time\n" ends with a newline token */
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  char *out = g_build_filename (tmpdir, "out.txt", NULL);
  char *desc = story_pipeline (prompt, model_path, out);
  RunResult r;

  run_pipeline (desc, &r);
  ck_assert_msg (r.error == NULL, "%s", r.error ? r.error->message : "");

  char *text = NULL;
  ck_assert (g_file_get_contents (out, &text, NULL, NULL));
  ck_assert_str_eq (text, STORY);
  ck_assert (r.stats != NULL);
  ck_assert_str_eq (gst_structure_get_string (r.stats, "stop-reason"), "max-tokens");
  guint prompt_tokens = 0;
  gst_structure_get_uint (r.stats, "prompt-tokens", &prompt_tokens);
  ck_assert_uint_eq (prompt_tokens, 5);

  g_free (text);
  run_result_clear (&r);
  g_free (desc);
  g_free (out);
  g_free (prompt);
}
END_TEST

/* The same story through speculative decoding, with a queue between the
 * drafter and the verifier and without. */
START_TEST (test_pipeline_speculation_tells_the_same_story)
{
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  static const char *const decoders[] = {
    "llmdraft ! llmspecverify", "llmdraft ! queue ! llmspecverify budget=fixed draft-max=3",
  };
  for (guint i = 0; i < G_N_ELEMENTS (decoders); i++) {
    char *out = g_build_filename (tmpdir, "out.txt", NULL);
    char *desc = g_strdup_printf ("filesrc location=\"%s\" ! llmtokenize model=\"%s\" "
        "! llmprefill model=\"%s\" n-threads=1 ! %s max-tokens=64 "
        "! llmdetokenize model=\"%s\" ! filesink location=\"%s\"", prompt, model_path,
        model_path, decoders[i], model_path, out);
    RunResult r;
    run_pipeline (desc, &r);
    ck_assert_msg (r.error == NULL, "%s: %s", decoders[i], r.error ? r.error->message : "");
    char *text = NULL;
    ck_assert (g_file_get_contents (out, &text, NULL, NULL));
    ck_assert_msg (strcmp (text, STORY) == 0, "%s: %s", decoders[i], text);
    ck_assert (r.stats != NULL && gst_structure_has_field (r.stats, "draft-tokens"));
    g_free (text);
    run_result_clear (&r);
    g_free (desc);
    g_free (out);
  }
  g_free (prompt);
}
END_TEST

/* A copy of the test model under @name in the test's directory: a file of
 * its own, which no other element of this process maps. */
static char *
model_copy (const char *name)
{
  g_autoptr (GBytes) bytes = llm_test_read_file (model_path);
  gsize len;
  const char *data = g_bytes_get_data (bytes, &len);
  return write_file (name, data, (gssize) len);
}

/* A pipeline in NULL (not yet freed) holds no model: neither the model
 * it decodes with, nor one it drafts with. (The pipeline kept the
 * gst.llm.engine context its llmprefill posted, and with it the engine
 * and its weights, until it was freed; llmspecverify kept its last
 * drafter, and with it the session layerskip drafted for or the draft
 * model's engine, until its next response or its finalization.) */
START_TEST (test_pipeline_in_null_holds_no_model)
{
  g_autofree char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  g_autofree char *target = model_copy ("target.gguf");
  g_autofree char *draft = model_copy ("draft.gguf");
  g_autofree char *out = g_build_filename (tmpdir, "out.txt", NULL);
  g_autofree char *model_drafter = g_strdup_printf ("llmdraft method=model draft-model=\"%s\" "
      "! queue ! llmspecverify", draft);
  const char *const decoders[] = {
    "llmdecode", "llmdraft method=layerskip ! queue ! llmspecverify", model_drafter,
  };
  for (guint i = 0; i < G_N_ELEMENTS (decoders); i++) {
    g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" ! llmtokenize "
        "model=\"%s\" ! llmprefill model=\"%s\" n-threads=1 ! %s max-tokens=16 "
        "! llmdetokenize model=\"%s\" ! filesink location=\"%s\"", prompt, target, target,
        decoders[i], target, out);
    GError *error = NULL;
    GstElement *pipeline = gst_parse_launch (desc, &error);
    ck_assert_msg (pipeline != NULL && error == NULL, "%s", error ? error->message : desc);
    ck_assert_int_ne (gst_element_set_state (pipeline, GST_STATE_PLAYING),
        GST_STATE_CHANGE_FAILURE);
    GstBus *bus = gst_element_get_bus (pipeline);
    GstMessage *m = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    ck_assert_msg (m != NULL && GST_MESSAGE_TYPE (m) == GST_MESSAGE_EOS, "%s did not finish",
        decoders[i]);
    gst_message_unref (m);
    ck_assert (llm_test_file_is_mapped (target));
    ck_assert_int_eq (gst_element_set_state (pipeline, GST_STATE_NULL),
        GST_STATE_CHANGE_SUCCESS);
    ck_assert_msg (!llm_test_file_is_mapped (target), "%s: the model is still mapped in NULL",
        decoders[i]);
    ck_assert_msg (!llm_test_file_is_mapped (draft), "%s: the draft model is still mapped in "
        "NULL", decoders[i]);
    gst_object_unref (bus);
    gst_object_unref (pipeline);
  }
}
END_TEST

/* @desc's output file after a run that must succeed (freed by the caller). */
static char *
run_for_output (const char *desc, const char *out, gsize *len)
{
  RunResult r;
  run_pipeline (desc, &r);
  ck_assert_msg (r.error == NULL, "%s: %s", desc, r.error ? r.error->message : "");
  run_result_clear (&r);
  char *data = NULL;
  ck_assert (g_file_get_contents (out, &data, len, NULL));
  return data;
}

/* Two prompt files one after the other through concat: two streams, two
 * prompts, two responses, and a file holding each element's output in
 * order. The second file's bytes segment starts at its offset in the
 * input (16), which placed filesink's writes there, over the first
 * response's ids or after a gap of zeros; and its stream-start did not
 * end the first prompt, so both went into one prompt. */
START_TEST (test_pipeline_concatenated_prompts_each_get_their_response_in_order)
{
  static const char *const texts[] = { "Once upon a time", "Tom had a big red ball" };
  char *prompts[2];
  char *out = g_build_filename (tmpdir, "out.bin", NULL);
  static const char *const tails[] = {
    "filesink",
    "llmprefill model=\"%s\" temperature=0 ! llmdecode max-tokens=24 ! filesink",
    "llmprefill model=\"%s\" temperature=0 ! llmdecode max-tokens=24 "
        "! llmdetokenize model=\"%s\" ! filesink",
  };
  for (guint i = 0; i < 2; i++) {
    g_autofree char *name = g_strdup_printf ("prompt%u.txt", i);
    prompts[i] = write_file (name, texts[i], -1);
  }
  for (guint k = 0; k < G_N_ELEMENTS (tails); k++) {
    g_autofree char *tail = g_strdup_printf (tails[k], model_path, model_path);
    GString *alone = g_string_new (NULL);
    for (guint i = 0; i < 2; i++) {
      g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" "
          "! llmtokenize model=\"%s\" ! %s location=\"%s\"", prompts[i], model_path, tail, out);
      gsize len;
      g_autofree char *data = run_for_output (desc, out, &len);
      ck_assert_uint_gt (len, 0);
      g_string_append_len (alone, data, (gssize) len);
    }
    g_autofree char *desc = g_strdup_printf ("concat name=c ! llmtokenize model=\"%s\" "
        "! %s location=\"%s\" filesrc location=\"%s\" ! c. filesrc location=\"%s\" ! c.",
        model_path, tail, out, prompts[0], prompts[1]);
    gsize len;
    g_autofree char *data = run_for_output (desc, out, &len);
    ck_assert_msg (len == alone->len && memcmp (data, alone->str, len) == 0,
        "%s: %" G_GSIZE_FORMAT " bytes, each prompt alone %" G_GSIZE_FORMAT, tail, len,
        alone->len);
    g_string_free (alone, TRUE);
  }
  g_free (prompts[0]);
  g_free (prompts[1]);
  g_free (out);
}
END_TEST

/* One prompt's session handed to two decoders by a tee (after llmprefill,
 * or after llmdraft, whose copy of the buffer keeps the session): both
 * stepped it, each taking the other's tokens for its context, and the
 * texts came out mixed. The second is refused, saying where a tee goes. */
START_TEST (test_pipeline_a_tee_after_prefill_is_refused_with_where_it_goes)
{
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  static const char *const branches[] = {
    "queue ! llmdecode max-tokens=64",
    "queue ! llmdraft ! llmspecverify max-tokens=64",
  };
  for (guint i = 0; i < G_N_ELEMENTS (branches); i++) {
    g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" "
        "! llmtokenize model=\"%s\" ! llmprefill model=\"%s\" temperature=0 ! tee name=t "
        "t. ! %s ! fakesink t. ! %s ! fakesink", prompt, model_path, model_path, branches[i],
        branches[i]);
    RunResult r;
    run_pipeline (desc, &r);
    ck_assert_msg (r.error != NULL, "%s: two decoders stepped one session", branches[i]);
    ck_assert_msg (strstr (r.error->message, "tee before llmprefill") != NULL, "%s",
        r.error->message);
    run_result_clear (&r);
  }
  g_free (prompt);
}
END_TEST

/* A segment seek ends its segment with SEGMENT_DONE instead of EOS (an
 * application looping a file does so): that ends the prompt too. The
 * prompt waited for an EOS that never came, and nothing was answered. */
START_TEST (test_pipeline_segment_seek_ends_the_prompt_at_segment_done)
{
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  char *out = g_build_filename (tmpdir, "out.txt", NULL);
  char *desc = story_pipeline (prompt, model_path, out);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  ck_assert_msg (pipeline != NULL && error == NULL, "%s", error ? error->message : "");
  GstBus *bus = gst_element_get_bus (pipeline);
  ck_assert_int_eq (gst_element_set_state (pipeline, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  GstIterator *it = gst_bin_iterate_sources (GST_BIN (pipeline));
  GValue item = G_VALUE_INIT;
  ck_assert_int_eq (gst_iterator_next (it, &item), GST_ITERATOR_OK);
  GstElement *src = g_value_dup_object (&item);
  g_value_unset (&item);
  gst_iterator_free (it);
  /* a source takes a seek in READY as its first segment */
  ck_assert (gst_element_seek (src, 1.0, GST_FORMAT_BYTES, GST_SEEK_FLAG_SEGMENT,
          GST_SEEK_TYPE_SET, 0, GST_SEEK_TYPE_NONE, -1));
  gst_object_unref (src);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  gboolean answered = FALSE;
  for (;;) {
    GstMessage *m = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND,
        GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_ELEMENT);
    ck_assert_msg (m != NULL, "no response 30 s after the segment's end");
    ck_assert_msg (GST_MESSAGE_TYPE (m) == GST_MESSAGE_ELEMENT, "%s",
        GST_MESSAGE_TYPE_NAME (m));
    answered = gst_structure_has_name (gst_message_get_structure (m), "llm-stats");
    gst_message_unref (m);
    if (answered)
      break;
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);

  char *text = NULL;
  ck_assert (g_file_get_contents (out, &text, NULL, NULL));
  ck_assert_str_eq (text, STORY);
  g_free (text);
  g_free (desc);
  g_free (out);
  g_free (prompt);
}
END_TEST

START_TEST (test_pipeline_prompt_keeps_its_trailing_newline)
{
  /* llmtokenize keeps every byte: the newline is a sixth prompt token, so
   * the story goes another way */
  char *prompt = write_file ("prompt.txt", "Once upon a time\n", -1);
  char *out = g_build_filename (tmpdir, "out.txt", NULL);
  char *desc = story_pipeline (prompt, model_path, out);
  RunResult r;

  run_pipeline (desc, &r);
  ck_assert_msg (r.error == NULL, "%s", r.error ? r.error->message : "");
  guint prompt_tokens = 0;
  ck_assert (r.stats && gst_structure_get_uint (r.stats, "prompt-tokens", &prompt_tokens));
  ck_assert_uint_eq (prompt_tokens, 6);
  char *text = NULL;
  ck_assert (g_file_get_contents (out, &text, NULL, NULL));
  ck_assert_str_ne (text, STORY);

  g_free (text);
  run_result_clear (&r);
  g_free (desc);
  g_free (out);
  g_free (prompt);
}
END_TEST

START_TEST (test_pipeline_malformed_model_posts_an_error)
{
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  char *out = g_build_filename (tmpdir, "out.txt", NULL);

  /* half of a real file: the header promises tensors that are not there */
  char *contents = NULL;
  gsize len = 0;
  ck_assert (g_file_get_contents (model_path, &contents, &len, NULL));
  char *truncated = write_file ("truncated.gguf", contents, len / 2);
  g_free (contents);
  char *garbage = write_file ("garbage.gguf", "GGUF\x03\0\0\0not a model at all", 24);

  const char *bad[] = { truncated, garbage };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    char *desc = story_pipeline (prompt, bad[i], out);
    RunResult r;
    run_pipeline (desc, &r);
    ck_assert_msg (r.error != NULL, "no error for %s", bad[i]);
    ck_assert_str_eq (r.error_source, "prefill");
    ck_assert_msg (g_error_matches (r.error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED),
        "%s", r.error->message);
    ck_assert_msg (strstr (r.error->message, bad[i]) != NULL, "%s", r.error->message);
    run_result_clear (&r);
    g_free (desc);
  }

  g_free (truncated);
  g_free (garbage);
  g_free (out);
  g_free (prompt);
}
END_TEST

START_TEST (test_pipeline_other_vocabulary_fails_to_link)
{
  char *other = llm_test_data_path ("models/TinyStories-656K-Q8_0.gguf");
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  char *out = g_build_filename (tmpdir, "out.txt", NULL);
  char *desc = story_pipeline (prompt, other, out);
  RunResult r;

  run_pipeline (desc, &r);
  ck_assert (r.error != NULL);
  ck_assert_msg (strstr (r.error->message, "vocab") != NULL, "%s", r.error->message);

  run_result_clear (&r);
  g_free (desc);
  g_free (out);
  g_free (prompt);
  g_free (other);
}
END_TEST

/* The vocabulary of llmdetokenize after llmdecode differs from the one
 * llmprefill generates in: the pipeline ends with the same kind of error
 * as a mismatch before llmprefill (CORE NEGOTIATION, both vocabularies
 * named), from llmprefill, in either prompt mode; it used to end with EOS
 * and no output. */
START_TEST (test_pipeline_other_vocabulary_after_decode_is_a_negotiation_error)
{
  char *other = llm_test_data_path ("models/TinyStories-656K-Q8_0.gguf");
  char *prompt = write_file ("prompt.txt", "Once upon a time", -1);
  const char *modes[] = { "event", "buffer" };
  GError *error = NULL;
  LlmTokenizer *ours = llm_tokenizer_new_from_file (model_path, &error);
  LlmTokenizer *theirs = llm_tokenizer_new_from_file (other, &error);
  ck_assert (ours && theirs);

  for (guint i = 0; i < G_N_ELEMENTS (modes); i++) {
    char *desc = g_strdup_printf ("filesrc location=\"%s\" ! llmtokenize model=\"%s\" "
        "! llmprefill name=prefill model=\"%s\" prompt-mode=%s ! llmdecode max-tokens=8 "
        "! llmdetokenize model=\"%s\" ! fakesink", prompt, model_path, model_path, modes[i],
        other);
    RunResult r;
    run_pipeline (desc, &r);
    ck_assert_msg (r.error != NULL, "prompt-mode=%s: the pipeline ended without an error",
        modes[i]);
    ck_assert_str_eq (r.error_source, "prefill");
    ck_assert_msg (g_error_matches (r.error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION),
        "%s", r.error->message);
    g_autofree char *expected = g_strdup_printf ("The token ids of \"%s\" (vocab=%s) are not "
        "of the vocabulary the elements downstream expect (vocab=%s).", model_path,
        llm_tokenizer_vocab (ours)->hash, llm_tokenizer_vocab (theirs)->hash);
    ck_assert_msg (g_str_has_prefix (r.error->message, expected), "%s", r.error->message);
    run_result_clear (&r);
    g_free (desc);
  }

  llm_tokenizer_free (ours);
  llm_tokenizer_free (theirs);
  g_free (prompt);
  g_free (other);
}
END_TEST

static Suite *
pipeline_generate_suite (void)
{
  Suite *s = suite_create ("pipeline-generate");
  TCase *tc = tcase_create ("pipeline-generate");

  gst_init (NULL, NULL);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_pipeline_tells_the_story);
  tcase_add_test (tc, test_pipeline_concatenated_prompts_each_get_their_response_in_order);
  tcase_add_test (tc, test_pipeline_a_tee_after_prefill_is_refused_with_where_it_goes);
  tcase_add_test (tc, test_pipeline_segment_seek_ends_the_prompt_at_segment_done);
  tcase_add_test (tc, test_pipeline_prompt_keeps_its_trailing_newline);
  tcase_add_test (tc, test_pipeline_speculation_tells_the_same_story);
  tcase_add_test (tc, test_pipeline_in_null_holds_no_model);
  tcase_add_test (tc, test_pipeline_malformed_model_posts_an_error);
  tcase_add_test (tc, test_pipeline_other_vocabulary_fails_to_link);
  tcase_add_test (tc, test_pipeline_other_vocabulary_after_decode_is_a_negotiation_error);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (pipeline_generate_suite)
