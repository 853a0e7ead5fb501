/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole pipelines from gst_parse_launch: text through llmtokenize and
 * llmdetokenize comes back byte for byte, in 7-byte reads that split
 * UTF-8 characters, for every bundled vocabulary and both real models;
 * the ids on the way are those of the whole text. */
#include <string.h>
#include <glib/gstdio.h>
#include <gst/gst.h>

#include "llm-caps.h"
#include "llm-check.h"
#include "tokenizer.h"

typedef struct {
  const char *model;
  /* The vocabulary can spell every character of multilingual.txt (byte
   * fallback or byte-level BPE). TinyStories-656K has neither: what it
   * cannot spell becomes <unk>. */
  gboolean lossless;
} Model;

static const Model models[] = {
  {"vocab/ggml-vocab-llama-spm.gguf", TRUE},
  {"vocab/ggml-vocab-phi-3.gguf", TRUE},
  {"vocab/ggml-vocab-llama-bpe.gguf", TRUE},
  {"vocab/ggml-vocab-qwen2.gguf", TRUE},
  {"vocab/ggml-vocab-gpt-2.gguf", TRUE},
  {"vocab/ggml-vocab-deepseek-llm.gguf", TRUE},
  {"models/stories260K.gguf", TRUE},
  {"models/TinyStories-656K-Q8_0.gguf", FALSE},
};

/* Runs @desc to EOS; fails the test on an error or after 60 s. */
static void
run_pipeline (const char *desc)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  ck_assert_msg (pipeline != NULL && error == NULL, "%s: %s", desc, error ? error->message : "");

  GstBus *bus = gst_element_get_bus (pipeline);
  ck_assert_int_ne (gst_element_set_state (pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  ck_assert_msg (msg != NULL, "%s: no EOS after 60 s", desc);
  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    char *debug = NULL;
    gst_message_parse_error (msg, &error, &debug);
    ck_abort_msg ("%s: %s (%s)", desc, error->message, debug);
  }
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
}

/* The library's answer for the whole text at once: ids with BOS as the
 * file asks, and the text those ids decode to. */
static void
reference (const char *model_path, GBytes *text, GArray **ids, GString **decoded)
{
  GError *error = NULL;
  g_autoptr (LlmTokenizer) tok = llm_tokenizer_new_from_file (model_path, &error);
  ck_assert_msg (tok != NULL, "%s: %s", model_path, error ? error->message : "");
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);

  *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  if (vocab->add_bos && vocab->bos >= 0)
    g_array_append_val (*ids, vocab->bos);
  llm_tokenizer_encode (tok, g_bytes_get_data (text, NULL), g_bytes_get_size (text), FALSE,
      TRUE, TRUE, *ids);

  *decoded = g_string_new (NULL);
  llm_tokenizer_decode (tok, (const gint32 *) (*ids)->data, (*ids)->len, TRUE, FALSE, TRUE,
      *decoded);
  /* llama_detokenize keeps the prefix space after a removed BOS; the
   * element does not (it strips it at every prompt start) */
  if (vocab->kind == LLM_VOCAB_SPM && vocab->add_space_prefix && (*decoded)->len > 0
      && (*decoded)->str[0] == ' ')
    g_string_erase (*decoded, 0, 1);
}

static void
assert_file_equals (const char *path, const char *expected, gsize len, const char *what)
{
  GBytes *got = llm_test_read_file (path);
  gsize got_len = g_bytes_get_size (got);
  const char *data = g_bytes_get_data (got, NULL);
  if (got_len != len || memcmp (data, expected, len) != 0) {
    gsize i = 0;
    while (i < got_len && i < len && data[i] == expected[i])
      i++;
    ck_abort_msg ("%s: %" G_GSIZE_FORMAT " bytes, expected %" G_GSIZE_FORMAT
        "; first difference at byte %" G_GSIZE_FORMAT, what, got_len, len, i);
  }
  g_bytes_unref (got);
}

START_TEST (test_pipeline_round_trip_is_byte_exact)
{
  const Model *m = &models[_i];
  g_autofree char *model = llm_test_data_path (m->model);
  g_autofree char *input = llm_test_data_path ("multilingual.txt");
  g_autofree char *dir = g_dir_make_tmp ("llm-pipeline-XXXXXX", NULL);
  g_autofree char *out_text = g_build_filename (dir, "text.txt", NULL);
  g_autofree char *out_ids = g_build_filename (dir, "ids.bin", NULL);

  /* the brief's pipeline as written */
  g_autofree char *plain = g_strdup_printf ("filesrc location=\"%s\" blocksize=7 "
      "! llmtokenize model=\"%s\" ! llmdetokenize model=\"%s\" ! filesink location=\"%s\"",
      input, model, model, out_text);
  run_pipeline (plain);

  GBytes *text = llm_test_read_file (input);
  g_autoptr (GArray) ids = NULL;
  g_autoptr (GString) decoded = NULL;
  reference (model, text, &ids, &decoded);

  if (m->lossless) {
    assert_file_equals (out_text, g_bytes_get_data (text, NULL), g_bytes_get_size (text),
        m->model);
  } else {
    /* what the vocabulary cannot spell is lost either way; the streamed
     * result equals the library's one-shot round trip */
    assert_file_equals (out_text, decoded->str, decoded->len, m->model);
  }

  /* the ids on the way are those of the whole text */
  g_autofree char *teed = g_strdup_printf ("filesrc location=\"%s\" blocksize=7 "
      "! llmtokenize model=\"%s\" ! tee name=t ! queue ! filesink location=\"%s\" "
      "t. ! queue ! llmdetokenize model=\"%s\" ! fakesink", input, model, out_ids, model);
  run_pipeline (teed);
  g_autofree char *what = g_strdup_printf ("%s ids", m->model);
  assert_file_equals (out_ids, ids->data, ids->len * sizeof (gint32), what);

  g_bytes_unref (text);
  g_unlink (out_text);
  g_unlink (out_ids);
  g_rmdir (dir);
}
END_TEST

/* @len bytes of @text, read 7 at a time, through llmtokenize !
 * llmdetokenize with model @model_file (under the test data) come out
 * as @expected. */
static void
assert_round_trip (const char *model_file, const char *text, gsize len, const char *expected,
    const char *what)
{
  g_autofree char *model = llm_test_data_path (model_file);
  g_autofree char *dir = g_dir_make_tmp ("llm-pipeline-XXXXXX", NULL);
  g_autofree char *input = g_build_filename (dir, "in.txt", NULL);
  g_autofree char *output = g_build_filename (dir, "out.txt", NULL);
  ck_assert (g_file_set_contents (input, text, (gssize) len, NULL));

  g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" blocksize=7 "
      "! llmtokenize model=\"%s\" ! llmdetokenize model=\"%s\" ! filesink location=\"%s\"",
      input, model, model, output);
  run_pipeline (desc);
  assert_file_equals (output, expected, strlen (expected), what);

  g_unlink (input);
  g_unlink (output);
  g_rmdir (dir);
}

/* Text out holds no NUL (the text caps' contract: textoverlay and
 * subtitle encoders take a buffer as a string): a NUL in, which the
 * byte-fallback vocabulary keeps as <0x00>, comes out as U+FFFD. */
START_TEST (test_pipeline_nul_comes_back_as_a_replacement_character)
{
  static const char text[] = "Once upon\0 a time";
  assert_round_trip ("models/stories260K.gguf", text, sizeof text - 1,
      "Once upon\xef\xbf\xbd a time", "NUL");
}
END_TEST

/* TinyStories-656K is exact on text it can spell. */
START_TEST (test_pipeline_round_trip_of_a_story_on_tinystories_656k)
{
  static const char story[] = "Once upon a time, there was a little girl named Lily. "
      "She loved to play outside in the park.\nOne day, she saw a big, red ball!\n";
  assert_round_trip ("models/TinyStories-656K-Q8_0.gguf", story, strlen (story), story,
      "TinyStories-656K story");
}
END_TEST

static Suite *
pipeline_suite (void)
{
  Suite *s = suite_create ("pipeline");

  gst_init (NULL, NULL);

  TCase *tc = tcase_create ("roundtrip");
  tcase_set_timeout (tc, 300);
  tcase_add_loop_test (tc, test_pipeline_round_trip_is_byte_exact, 0, G_N_ELEMENTS (models));
  tcase_add_test (tc, test_pipeline_round_trip_of_a_story_on_tinystories_656k);
  tcase_add_test (tc, test_pipeline_nul_comes_back_as_a_replacement_character);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (pipeline_suite)
