/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Media into the language model: llmvisionencode turns frames into the
 * rows the tower gives for the same pixels, llmprefill puts media rows
 * where the prompt's markers are and evaluates them as the tokens they
 * embed, llmdetokenize mode=caption gives one line per response timed as
 * its media, and the caption pipeline writes WebVTT that subparse reads.
 * The projector files are written here with random weights. */
#include <gst/check/gstharness.h>
#include <gst/video/video.h>
#include <gst/app/gstappsink.h>
#include <math.h>
#include <valgrind/memcheck.h>
#include <glib/gstdio.h>
#include <string.h>

#include "element-check.h"
#include "llm-check.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "media-prompt.h"
#include "mmproj.h"
#include "mmproj-writer.h"
#include "gguf-writer.h"
#include "ggml-type.h"
#include "vocab.h"
#include "model.h"
#include "engine.h"
#include "vision-encoder.h"
#include "cpu/matmul.h"

#define LM "models/stories260K.gguf"

static char *tmpdir;

static void
setup (void)
{
  tmpdir = g_dir_make_tmp ("gst-llm-media-XXXXXX", NULL);
  ck_assert (tmpdir != NULL);
}

static void
remove_tree (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  for (const char *name; d && (name = g_dir_read_name (d));) {
    g_autofree char *p = g_build_filename (dir, name, NULL);
    if (g_file_test (p, G_FILE_TEST_IS_DIR))
      remove_tree (p);
    else
      g_unlink (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (dir);
}

static void
teardown (void)
{
  remove_tree (tmpdir);
  ck_assert (!g_file_test (tmpdir, G_FILE_TEST_EXISTS));
  g_clear_pointer (&tmpdir, g_free);
}

/* A small SigLIP tower (idefics3) for stories260K's 64-wide embeddings:
 * 32-pixel images, 16 patches, 4 tokens. */
static char *
write_tower (const char *type, guint n_out)
{
  LlmMmprojShape s = { type, 32, 8, 64, 128, 2, 4, n_out, 2, FALSE, NULL, NULL };
  if (strcmp (type, "mlp") == 0) {
    s.scale = 0;
    s.class_embd = TRUE;
  }
  char *path = g_strdup_printf ("%s/%s-%u.gguf", tmpdir, type, n_out);
  GError *error = NULL;
  ck_assert_msg (llm_mmproj_write_random (&s, 7, path, &error), "%s",
      error ? error->message : "");
  return path;
}

static guint
lm_width (void)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  return llm_model_hparams (m)->n_embd;
}

/* FFmpeg's H.264 decoder leaves frames whose pixels memcheck takes as
 * undefined (they come from reference-frame padding the decoder never
 * wrote), so under valgrind every value computed from them would be
 * reported. The decoded frames are marked defined on their way into
 * llmvisionencode; everything after is checked as usual. */
static GstPadProbeReturn
define_frame (GstPad *pad, GstPadProbeInfo *info, gpointer data)
{
  GstBuffer *b = GST_PAD_PROBE_INFO_BUFFER (info);
  GstMapInfo map;
  if (b && gst_buffer_map (b, &map, GST_MAP_READ)) {
    VALGRIND_MAKE_MEM_DEFINED (map.data, map.size);
    gst_buffer_unmap (b, &map);
  }
  return GST_PAD_PROBE_OK;
}

static void
define_decoded_frames (GstElement *pipeline)
{
  if (!RUNNING_ON_VALGRIND)
    return;
  GstIterator *it = gst_bin_iterate_all_by_element_factory_name (GST_BIN (pipeline),
      "llmvisionencode");
  GValue v = G_VALUE_INIT;
  while (gst_iterator_next (it, &v) == GST_ITERATOR_OK) {
    GstPad *sink = gst_element_get_static_pad (g_value_get_object (&v), "sink");
    gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, define_frame, NULL, NULL);
    gst_object_unref (sink);
    g_value_reset (&v);
  }
  g_value_unset (&v);
  gst_iterator_free (it);
}

/* Runs @desc and returns the first error's text (NULL: reached EOS). */
static char *
run_for_error (const char *desc)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  ck_assert_msg (pipeline != NULL && error == NULL, "%s: %s", desc, error ? error->message : "");
  GstBus *bus = gst_element_get_bus (pipeline);
  define_decoded_frames (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  ck_assert_msg (msg != NULL, "%s: neither EOS nor an error after 60 s", desc);
  char *text = NULL;
  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gst_message_parse_error (msg, &err, NULL);
    text = g_strdup (err->message);
    g_error_free (err);
  }
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  return text;
}

static void
assert_error (const char *desc, const char *needle)
{
  g_autofree char *text = run_for_error (desc);
  ck_assert_msg (text != NULL, "%s: no error", desc);
  ck_assert_msg (strstr (text, needle) != NULL, "\"%s\" not in: %s", needle, text);
}

/* --- media prompts ---------------------------------------------------- */

static void
encode (const LlmTokenizer *tok, const char *text, gboolean starts, GArray *out)
{
  llm_tokenizer_encode (tok, text, -1, FALSE, TRUE, starts, out);
}

START_TEST (test_media_prompt_puts_rows_at_its_markers)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const LlmTokenizer *tok = llm_model_tokenizer (m);
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  const LlmMediaItem rows[] = { { 2, 0, 0 }, { 3, 0, 0 } };
  g_autoptr (GArray) got = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_media_prompt_build (tok, NULL, NULL, "The cat<__media__> and the dog<__media__>.", TRUE,
      rows, 2, "mlp", got);
  g_autoptr (GArray) want = g_array_new (FALSE, FALSE, sizeof (gint32));
  const gint32 media = LLM_TOKEN_EMBD;
  ck_assert (vocab->add_bos);
  g_array_append_val (want, vocab->bos);
  encode (tok, "The cat", TRUE, want);
  g_array_append_vals (want, (gint32[]) { media, media }, 2);
  encode (tok, " and the dog", FALSE, want);
  g_array_append_vals (want, (gint32[]) { media, media, media }, 3);
  encode (tok, ".", FALSE, want);
  ck_assert_uint_eq (got->len, want->len);
  ck_assert_mem_eq (got->data, want->data, want->len * sizeof (gint32));

  /* No marker: the item goes first; a later turn has no BOS; a marker
   * with no item is dropped. */
  g_array_set_size (got, 0);
  g_array_set_size (want, 0);
  llm_media_prompt_build (tok, NULL, "[{prompt}]", "Look", FALSE, rows, 1, NULL, got);
  encode (tok, "[", TRUE, want);
  g_array_append_vals (want, (gint32[]) { media, media }, 2);
  encode (tok, "Look]", FALSE, want);
  ck_assert_uint_eq (got->len, want->len);
  ck_assert_mem_eq (got->data, want->data, want->len * sizeof (gint32));
  g_array_set_size (got, 0);
  llm_media_prompt_build (tok, NULL, "[{prompt}]", "<__media__>Look<__media__>", FALSE, rows,
      1, NULL, got);
  ck_assert_uint_eq (got->len, want->len);
  ck_assert_mem_eq (got->data, want->data, want->len * sizeof (gint32));
  ck_assert_uint_eq (llm_media_prompt_count_markers ("a<__media__>b<__media__>"), 2);
}
END_TEST

/* A SentencePiece vocabulary of bytes and SmolVLM's image tokens. */
static LlmTokenizer *
smolvlm_tokenizer (void)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  GPtrArray *texts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) types = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_autoptr (GArray) scores = g_array_new (FALSE, TRUE, sizeof (float));
  const char *first[] = { "<unk>", "<s>", "</s>" };
  const gint32 first_types[] = { 2, 3, 3 };
  for (guint i = 0; i < 3; i++) {
    g_ptr_array_add (texts, g_strdup (first[i]));
    g_array_append_val (types, first_types[i]);
  }
  for (int b = 0; b < 256; b++) {
    g_ptr_array_add (texts, g_strdup_printf ("<0x%02X>", b));
    g_array_append_val (types, (gint32) { 6 });
  }
  const char *special[] = { "<fake_token_around_image>", "<global-img>", "<row_1_col_1>",
    "<row_1_col_2>", "<row_2_col_1>", "<row_2_col_2>" };
  for (guint i = 0; i < G_N_ELEMENTS (special); i++) {
    g_ptr_array_add (texts, g_strdup (special[i]));
    g_array_append_val (types, (gint32) { 4 });
  }
  g_array_set_size (scores, texts->len);
  llm_gguf_writer_add_string (w, "general.architecture", "llama");
  llm_gguf_writer_add_string (w, "tokenizer.ggml.model", "llama");
  llm_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens",
      (const char *const *) texts->pdata, texts->len);
  llm_gguf_writer_add_array (w, "tokenizer.ggml.scores", LLM_GGUF_FLOAT32, scores->data,
      scores->len);
  llm_gguf_writer_add_array (w, "tokenizer.ggml.token_type", LLM_GGUF_INT32, types->data,
      types->len);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.bos_token_id", 1);
  llm_gguf_writer_add_uint32 (w, "tokenizer.ggml.eos_token_id", 2);
  llm_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", TRUE);
  g_ptr_array_unref (texts);
  g_autofree char *path = g_build_filename (tmpdir, "vocab.gguf", NULL);
  GError *error = NULL;
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s",
      error ? error->message : "");
  LlmTokenizer *tok = llm_tokenizer_new_from_file (path, &error);
  ck_assert_msg (tok != NULL, "%s", error ? error->message : "");
  return tok;
}

static void
append_media (GArray *out, guint n)
{
  for (guint i = 0; i < n; i++)
    g_array_append_val (out, (gint32) { LLM_TOKEN_EMBD });
}

/* SmolVLM's layout, as mtmd builds it: tiles behind their row and column
 * tokens, a newline between rows of tiles, then the whole image behind
 * <global-img>; the delimiters are single tokens. */
START_TEST (test_media_prompt_lays_out_smolvlm_tiles)
{
  g_autoptr (LlmTokenizer) tok = smolvlm_tokenizer ();
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  const gint32 fake = llm_vocab_lookup (vocab, "<fake_token_around_image>", 25);
  const gint32 global = llm_vocab_lookup (vocab, "<global-img>", 12);
  const gint32 r1c1 = llm_vocab_lookup (vocab, "<row_1_col_1>", 13);
  const gint32 r2c2 = llm_vocab_lookup (vocab, "<row_2_col_2>", 13);
  ck_assert_int_ge (fake, 0);
  ck_assert_int_ge (r2c2, 0);
  const LlmMediaItem item = { 5 * 3, 2, 2 };
  g_autoptr (GArray) got = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_media_prompt_build (tok, NULL, NULL, "Hi", FALSE, &item, 1, "idefics3", got);
  g_autoptr (GArray) want = g_array_new (FALSE, FALSE, sizeof (gint32));
  const gint32 nl = vocab->byte_token['\n'];
  for (guint y = 0; y < 2; y++) {
    for (guint x = 0; x < 2; x++) {
      g_array_append_val (want, fake);
      g_array_append_val (want, (gint32) { r1c1 + (gint32) (y * 2 + x) });
      append_media (want, 3);
    }
    if (y == 0)
      g_array_append_val (want, nl);
  }
  g_array_append_vals (want, (gint32[]) { nl, nl, fake, global }, 4);
  append_media (want, 3);
  g_array_append_val (want, fake);
  llm_tokenizer_encode (tok, "Hi", -1, FALSE, TRUE, FALSE, want);
  ck_assert_uint_eq (got->len, want->len);
  ck_assert_mem_eq (got->data, want->data, want->len * sizeof (gint32));

  /* Rows that no longer fill the tiles (compressed): one image. */
  const LlmMediaItem merged = { 7, 2, 2 };
  g_array_set_size (got, 0);
  llm_media_prompt_build (tok, NULL, NULL, "", FALSE, &merged, 1, "idefics3", got);
  g_array_set_size (want, 0);
  g_array_append_vals (want, (gint32[]) { nl, nl, fake, global }, 4);
  append_media (want, 7);
  g_array_append_val (want, fake);
  ck_assert_uint_eq (got->len, want->len);
  ck_assert_mem_eq (got->data, want->data, want->len * sizeof (gint32));
}
END_TEST

/* --- llmprefill with media rows --------------------------------------- */

/* Ids out of llmprefill ! llmdecode for one input buffer. */
static GArray *
generate (GstCaps *caps, GstBuffer *in, const char *prompt)
{
  g_autofree char *lm = llm_test_data_path (LM);
  g_autofree char *desc = g_strdup_printf ("llmprefill model=%s prompt-mode=buffer ! "
      "llmdecode max-tokens=12", lm);
  GstHarness *h = gst_harness_new_parse (desc);
  if (prompt) {
    GstElement *prefill = gst_harness_find_element (h, "llmprefill");
    g_object_set (prefill, "prompt", prompt, NULL);
    gst_object_unref (prefill);
  }
  gst_harness_set_src_caps (h, caps);
  ck_assert_int_eq (gst_harness_push (h, in), GST_FLOW_OK);
  gst_harness_push_event (h, gst_event_new_eos ());
  /* llmdecode answers on a thread of its own: its EOS comes last. */
  for (GstEvent *ev; (ev = gst_harness_pull_event (h));) {
    const gboolean eos = GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
    gst_event_unref (ev);
    if (eos)
      break;
  }
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  for (GstBuffer *b; (b = gst_harness_try_pull (h));) {
    ck_assert (gst_llm_tokens_buffer_read (b, ids));
    gst_buffer_unref (b);
  }
  gst_harness_teardown (h);
  return ids;
}

/* Media rows that are the embeddings of a text's tokens make llmdecode
 * answer exactly as the text does. */
START_TEST (test_prefill_media_rows_answer_as_the_tokens_they_embed)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const LlmTokenizer *tok = llm_model_tokenizer (m);
  const guint n_embd = llm_model_hparams (m)->n_embd;
  /* "Once upon a time" after BOS, "upon a" given as media. */
  const gint32 text[] = { 1, 403, 407, 261, 378 };
  const LlmMediaItem rows[] = { { 2, 0, 0 } };
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_media_prompt_build (tok, NULL, NULL, "Once<__media__> time", TRUE, rows, 1, NULL, ids);
  /* The pieces tokenize as the whole text does around the marker. */
  ck_assert_uint_eq (ids->len, G_N_ELEMENTS (text));
  ck_assert_int_eq (g_array_index (ids, gint32, 0), text[0]);
  ck_assert_int_eq (g_array_index (ids, gint32, 1), text[1]);
  ck_assert_int_eq (g_array_index (ids, gint32, 2), LLM_TOKEN_EMBD);
  ck_assert_int_eq (g_array_index (ids, gint32, 3), LLM_TOKEN_EMBD);
  ck_assert_int_eq (g_array_index (ids, gint32, 4), text[4]);
  ck_assert_uint_eq (n_embd, 64);
  float embd[2 * 64];
  for (guint i = 0; i < 2; i++)
    llm_model_token_embedding (m, (guint32) text[2 + i], embd + i * n_embd);
  GstBuffer *media = gst_llm_embeddings_buffer_new (embd, 2, n_embd);
  g_autoptr (GArray) from_media = generate (gst_llm_caps_new_embeddings (n_embd, "image",
          NULL), media, "Once<__media__> time");
  g_autoptr (GArray) from_text = generate (gst_llm_caps_new_tokens (NULL),
      gst_llm_tokens_buffer_new (text, G_N_ELEMENTS (text)), NULL);
  ck_assert_uint_eq (from_media->len, 12);
  ck_assert_uint_eq (from_text->len, 12);
  ck_assert_mem_eq (from_media->data, from_text->data, 12 * sizeof (gint32));
}
END_TEST

/* A prompt of two markers waits for two items; EOS runs it with what
 * came, and a flush drops a half-gathered prompt. */
START_TEST (test_prefill_media_prompt_waits_for_its_items)
{
  g_autofree char *lm = llm_test_data_path (LM);
  GstElement *el = gst_element_factory_make ("llmprefill", NULL);
  g_object_set (el, "model", lm, "prompt", "<__media__> then <__media__>", NULL);
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  gst_harness_set_src_caps (h, gst_llm_caps_new_embeddings (64, "image", NULL));
  float rows[2 * 64] = { 0 };
  GstBuffer *b = gst_llm_embeddings_buffer_new (rows, 2, 64);
  GST_BUFFER_PTS (b) = GST_SECOND;
  GST_BUFFER_DURATION (b) = GST_SECOND;
  ck_assert_int_eq (gst_harness_push (h, b), GST_FLOW_OK);
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  b = gst_llm_embeddings_buffer_new (rows, 1, 64);
  GST_BUFFER_PTS (b) = 2 * GST_SECOND;
  GST_BUFFER_DURATION (b) = GST_SECOND;
  ck_assert_int_eq (gst_harness_push (h, b), GST_FLOW_OK);
  GstBuffer *state = gst_harness_pull (h);
  /* From the first item's start to the second's end. */
  ck_assert_uint_eq (GST_BUFFER_PTS (state), GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (state), 2 * GST_SECOND);
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  ck_assert (gst_llm_tokens_buffer_read (state, ids));
  guint media = 0;
  for (guint i = 0; i < ids->len; i++)
    media += g_array_index (ids, gint32, i) == LLM_TOKEN_EMBD;
  ck_assert_uint_eq (media, 3);
  gst_buffer_unref (state);

  /* One item, then a flush: nothing; one item, then EOS: a prompt. */
  ck_assert_int_eq (gst_harness_push (h, gst_llm_embeddings_buffer_new (rows, 2, 64)),
      GST_FLOW_OK);
  gst_harness_push_event (h, gst_event_new_flush_start ());
  gst_harness_push_event (h, gst_event_new_flush_stop (TRUE));
  GstSegment seg;
  gst_segment_init (&seg, GST_FORMAT_TIME);
  gst_harness_push_event (h, gst_event_new_segment (&seg));
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  ck_assert_int_eq (gst_harness_push (h, gst_llm_embeddings_buffer_new (rows, 1, 64)),
      GST_FLOW_OK);
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  gst_harness_push_event (h, gst_event_new_eos ());
  state = gst_harness_pull (h);
  g_array_set_size (ids, 0);
  ck_assert (gst_llm_tokens_buffer_read (state, ids));
  media = 0;
  for (guint i = 0; i < ids->len; i++)
    media += g_array_index (ids, gint32, i) == LLM_TOKEN_EMBD;
  ck_assert_uint_eq (media, 1);
  gst_buffer_unref (state);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_prefill_refuses_media_of_another_width)
{
  g_autofree char *lm = llm_test_data_path (LM);
  g_autofree char *tower = write_tower ("idefics3", 96);
  g_autofree char *desc = g_strdup_printf ("videotestsrc num-buffers=1 ! "
      "video/x-raw,width=32,height=32 ! llmvisionencode mmproj=%s ! llmprefill model=%s ! "
      "fakesink", tower, lm);
  assert_error (desc, "rows are 96 wide, but model");
  assert_error (desc, "takes embeddings of 64");
}
END_TEST

/* --- llmvisionencode --------------------------------------------------- */

START_TEST (test_visionencode_refuses_bad_projector_files)
{
  g_autofree char *lm = llm_test_data_path (LM);
  g_autofree char *desc = g_strdup_printf ("videotestsrc num-buffers=1 ! "
      "llmvisionencode mmproj=%s ! fakesink", lm);
  assert_error (desc, "is not a multimodal projector (architecture llama");
  g_free (desc);
  desc = g_strdup ("videotestsrc num-buffers=1 ! llmvisionencode mmproj=/nonexistent.gguf ! "
      "fakesink");
  assert_error (desc, "does not exist");
  g_free (desc);
  desc = g_strdup ("videotestsrc num-buffers=1 ! llmvisionencode ! fakesink");
  assert_error (desc, "No projector file set");

  LlmMmprojShape s = { "qwen2vl_merger", 32, 8, 64, 128, 2, 4, 64, 0, TRUE, NULL, NULL };
  g_autofree char *other = g_build_filename (tmpdir, "qwen.gguf", NULL);
  ck_assert (llm_mmproj_write_random (&s, 1, other, NULL));
  g_free (desc);
  desc = g_strdup_printf ("videotestsrc num-buffers=1 ! llmvisionencode mmproj=%s ! fakesink",
      other);
  assert_error (desc, "\"qwen2vl_merger\" is not supported");

  g_autofree char *tower = write_tower ("idefics3", 64);
  g_free (desc);
  desc = g_strdup_printf ("videotestsrc num-buffers=1 ! llmvisionencode mmproj=%s "
      "device=cuda:7 ! fakesink", tower);
  assert_error (desc, "Device \"cuda:7\" is not available");
}
END_TEST

static GstHarness *
vision_harness_tiled (const char *tower, const char *video_caps, gdouble interval,
    guint max_tiles)
{
  GstElement *el = gst_element_factory_make ("llmvisionencode", NULL);
  ck_assert (el != NULL);
  g_object_set (el, "mmproj", tower, "interval", interval, "max-tiles", max_tiles, NULL);
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  gst_harness_set_src_caps_str (h, video_caps);
  return h;
}

static GstHarness *
vision_harness (const char *tower, const char *video_caps, gdouble interval)
{
  return vision_harness_tiled (tower, video_caps, interval, 1);
}

static GstBuffer *
frame (const guint8 *rgb, gsize size, GstClockTime pts, GstClockTime duration)
{
  GstBuffer *b = gst_buffer_new_memdup (rgb, size);
  GST_BUFFER_PTS (b) = pts;
  GST_BUFFER_DURATION (b) = duration;
  return b;
}

/* The encoder is made at READY->PAUSED: a projector, device, thread or
 * merge setting changed while playing applies from the next start and
 * says so; interval and max-tiles (read per frame and per caps) and
 * reading any setting say nothing. */
START_TEST (test_visionencode_flags_settings_changed_after_start)
{
  g_autofree char *tower = write_tower ("idefics3", 64);
  GstHarness *h = vision_harness (tower, "video/x-raw,format=RGB,width=32,height=32,"
      "framerate=25/1", 0);
  llm_test_watch_warnings (h->element);
  g_object_set (h->element, "n-threads", 1, NULL);
  g_object_set (h->element, "interval", 1.0, "max-tiles", 2, NULL);
  g_autofree char *mmproj = NULL;
  g_object_get (h->element, "mmproj", &mmproj, NULL);
  g_autofree char *seen = llm_test_watched_warnings ();
  ck_assert_str_eq (seen, "n-threads changes take effect from the next READY->PAUSED\n");
  gst_harness_teardown (h);
}
END_TEST

/* An RGB frame at the tower's size gives the tower's rows for those
 * pixels, with caps and meta that say what they are. */
START_TEST (test_visionencode_rows_are_the_towers_for_the_same_pixels)
{
  g_autofree char *tower = write_tower ("idefics3", 64);
  guint8 rgb[32 * 32 * 3];
  for (gsize i = 0; i < sizeof rgb; i++)
    rgb[i] = (guint8) ((i * 37 + (i / 96) * 11) & 0xff);
  GstHarness *h = vision_harness (tower, "video/x-raw,format=RGB,width=32,height=32,"
      "framerate=25/1", 0);
  ck_assert_int_eq (gst_harness_push (h, frame (rgb, sizeof rgb, 40 * GST_MSECOND,
              40 * GST_MSECOND)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (h);
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  guint dim = 0;
  const char *modality, *projector;
  ck_assert (gst_llm_caps_parse_embeddings (caps, &dim, &modality, &projector));
  ck_assert_uint_eq (dim, 64);
  ck_assert_str_eq (modality, "image");
  ck_assert_str_eq (projector, "idefics3");
  gst_caps_unref (caps);

  GError *error = NULL;
  g_autoptr (LlmMmproj) p = llm_mmproj_load (tower, &error);
  ck_assert (p != NULL);
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  ck_assert_uint_eq (v->n_tokens, 4);
  float want[4 * 64];
  ck_assert (llm_vision_encode (p, llm_cpu_kernels_best (), rgb, 32 * 3, want, &error));
  ck_assert_uint_eq (gst_buffer_get_size (out), sizeof want);
  GstMapInfo map;
  gst_buffer_map (out, &map, GST_MAP_READ);
  const float *got = (const float *) map.data;
  double worst = 0;
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    worst = MAX (worst, fabs (got[i] - want[i]));
  gst_buffer_unmap (out, &map);
  /* swscale at the same size copies RGB pixels unchanged. */
  ck_assert_msg (worst == 0.0, "rows differ by %g", worst);
  ck_assert_uint_eq (GST_BUFFER_PTS (out), 40 * GST_MSECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (out), 40 * GST_MSECOND);
  GstLlmEmbeddingsMeta *meta = gst_buffer_get_llm_embeddings_meta (out);
  ck_assert (meta != NULL);
  ck_assert_uint_eq (meta->n_rows, 4);
  ck_assert_uint_eq (meta->grid_w, 2);
  ck_assert_uint_eq (meta->grid_h, 2);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}
END_TEST

/* A tower that tiles (preproc_image_size 64 over 32-pixel tiles): a 64 x 32
 * frame is two tiles and the whole; the tiles are the tower's rows for
 * the frame's halves, and max-tiles=1 keeps the whole image only. */
START_TEST (test_visionencode_cuts_tiles_as_mtmd_does)
{
  LlmMmprojShape shape = { "idefics3", 32, 8, 64, 128, 2, 4, 64, 2, FALSE, NULL, NULL, 64 };
  g_autofree char *tower = g_build_filename (tmpdir, "tiled.gguf", NULL);
  ck_assert (llm_mmproj_write_random (&shape, 3, tower, NULL));
  guint8 rgb[32 * 64 * 3];
  for (gsize i = 0; i < sizeof rgb; i++)
    rgb[i] = (guint8) ((i * 13 + (i / 192) * 5) & 0xff);
  const char *caps = "video/x-raw,format=RGB,width=64,height=32,framerate=1/1";
  GstHarness *h = vision_harness_tiled (tower, caps, 0, 0);
  ck_assert_int_eq (gst_harness_push (h, frame (rgb, sizeof rgb, 0, GST_SECOND)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (h);
  ck_assert_uint_eq (gst_buffer_get_size (out), 3 * 4 * 64 * sizeof (float));
  GstLlmEmbeddingsMeta *meta = gst_buffer_get_llm_embeddings_meta (out);
  ck_assert_uint_eq (meta->tiles_x, 2);
  ck_assert_uint_eq (meta->tiles_y, 1);
  ck_assert_uint_eq (meta->n_rows, 12);
  g_autoptr (LlmMmproj) p = llm_mmproj_load (tower, NULL);
  ck_assert_uint_eq (llm_mmproj_vision (p)->longest_edge, 64);
  float want[2 * 4 * 64];
  for (guint t = 0; t < 2; t++)
    ck_assert (llm_vision_encode (p, llm_cpu_kernels_best (), rgb + t * 32 * 3, 64 * 3,
            want + t * 4 * 64, NULL));
  GstMapInfo map;
  gst_buffer_map (out, &map, GST_MAP_READ);
  ck_assert_mem_eq (map.data, want, sizeof want);
  gst_buffer_unmap (out, &map);
  gst_buffer_unref (out);
  gst_harness_teardown (h);

  h = vision_harness (tower, caps, 0);
  ck_assert_int_eq (gst_harness_push (h, frame (rgb, sizeof rgb, 0, GST_SECOND)), GST_FLOW_OK);
  out = gst_harness_pull (h);
  ck_assert_uint_eq (gst_buffer_get_size (out), 4 * 64 * sizeof (float));
  ck_assert_uint_eq (gst_buffer_get_llm_embeddings_meta (out)->tiles_x, 0);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}
END_TEST

/* merge-ratio=0.5 on a CLIP tower: 8 of its 16 image rows a frame, on no
 * grid; a SigLIP tower with a pixel shuffle refuses it at start. */
START_TEST (test_visionencode_merges_tokens_in_the_tower)
{
  g_autofree char *tower = write_tower ("mlp", 64);
  GstElement *el = gst_element_factory_make ("llmvisionencode", NULL);
  g_object_set (el, "mmproj", tower, "merge-ratio", 0.5, NULL);
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=32,height=32,framerate=1/1");
  guint8 rgb[32 * 32 * 3];
  for (gsize i = 0; i < sizeof rgb; i++)
    rgb[i] = (guint8) (i * 29);
  ck_assert_int_eq (gst_harness_push (h, frame (rgb, sizeof rgb, 0, GST_SECOND)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull (h);
  ck_assert_uint_eq (gst_buffer_get_size (out), 8 * 64 * sizeof (float));
  GstLlmEmbeddingsMeta *meta = gst_buffer_get_llm_embeddings_meta (out);
  ck_assert_uint_eq (meta->n_rows, 8);
  ck_assert_uint_eq (meta->grid_w, 0);
  gst_buffer_unref (out);
  gst_harness_teardown (h);

  g_autofree char *siglip = write_tower ("idefics3", 64);
  g_autofree char *desc = g_strdup_printf ("videotestsrc num-buffers=1 ! llmvisionencode "
      "mmproj=%s merge-ratio=0.5 ! fakesink", siglip);
  assert_error (desc, "token merging needs a tower whose tokens are projected one by one");
}
END_TEST

/* One frame per interval of stream time, each lasting the interval; a
 * flush starts the count again. NV12 and other sizes are converted. */
/* llmvisionencode with @interval on @n NV12 frames of 64x48 at @fps a
 * second, pushed. */
static GstHarness *
push_nv12_frames (guint fps, gdouble interval, guint n)
{
  g_autofree char *tower = write_tower ("idefics3", 64);
  g_autofree char *caps = g_strdup_printf ("video/x-raw,format=NV12,width=64,height=48,"
      "framerate=%u/1", fps);
  GstHarness *h = vision_harness (tower, caps, interval);
  const gsize size = 64 * 48 * 3 / 2;
  g_autofree guint8 *nv12 = g_malloc (size);
  for (gsize i = 0; i < size; i++)
    nv12[i] = (guint8) (i * 7);
  for (guint i = 0; i < n; i++)
    ck_assert_int_eq (gst_harness_push (h, frame (nv12, size,
                gst_util_uint64_scale (i, GST_SECOND, fps), GST_SECOND / fps)), GST_FLOW_OK);
  return h;
}

START_TEST (test_visionencode_encodes_one_frame_per_interval)
{
  GstHarness *h = push_nv12_frames (4, 1.0, 10);
  const gsize size = 64 * 48 * 3 / 2;
  g_autofree guint8 *nv12 = g_malloc0 (size);
  /* frames at 0, 1 and 2 s of the ten at 0, 0.25 .. 2.25 s */
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 3);
  for (guint i = 0; i < 3; i++) {
    GstBuffer *b = gst_harness_pull (h);
    ck_assert_uint_eq (GST_BUFFER_PTS (b), i * GST_SECOND);
    ck_assert_uint_eq (GST_BUFFER_DURATION (b), GST_SECOND);
    ck_assert_uint_eq (gst_buffer_get_size (b), 4 * 64 * sizeof (float));
    gst_buffer_unref (b);
  }
  /* After a flush the next frame is encoded whatever its time. */
  gst_harness_push_event (h, gst_event_new_flush_start ());
  gst_harness_push_event (h, gst_event_new_flush_stop (TRUE));
  GstSegment seg;
  gst_segment_init (&seg, GST_FORMAT_TIME);
  gst_harness_push_event (h, gst_event_new_segment (&seg));
  ck_assert_int_eq (gst_harness_push (h, frame (nv12, size, GST_SECOND / 2, GST_SECOND / 4)),
      GST_FLOW_OK);
  GstBuffer *b = gst_harness_pull (h);
  ck_assert_uint_eq (GST_BUFFER_PTS (b), GST_SECOND / 2);
  gst_buffer_unref (b);
  guint64 encoded = 0;
  g_object_get (h->element, "encoded", &encoded, NULL);
  ck_assert_uint_eq (encoded, 4);
  gst_harness_push_event (h, gst_event_new_eos ());
  GstEvent *ev;
  gboolean eos = FALSE;
  while ((ev = gst_harness_try_pull_event (h))) {
    eos |= GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
    gst_event_unref (ev);
  }
  ck_assert (eos);
  gst_harness_teardown (h);
}
END_TEST

/* Frames off the interval's grid (3 a second, every half second): each
 * encoded frame lasts until the next one is due, so captions timed by
 * them never overlap. (Each lasted the whole interval: the frame at 2/3 s
 * ran to 7/6 s, past the frame at 1 s.) */
START_TEST (test_visionencode_frames_last_until_the_next_is_due)
{
  GstHarness *h = push_nv12_frames (3, 0.5, 12);
  /* encoded: 0, 2/3 (0.5 was due), 1, 5/3, 2, 8/3, 3, 11/3 s */
  static const guint thirds[] = { 0, 2, 3, 5, 6, 8, 9, 11 };
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), G_N_ELEMENTS (thirds));
  GstClockTime end = 0;
  for (guint i = 0; i < G_N_ELEMENTS (thirds); i++) {
    GstBuffer *b = gst_harness_pull (h);
    const GstClockTime pts = gst_util_uint64_scale (thirds[i], GST_SECOND, 3);
    ck_assert_uint_eq (GST_BUFFER_PTS (b), pts);
    ck_assert_msg (GST_BUFFER_PTS (b) >= end, "frame %u at %" GST_TIME_FORMAT " starts before "
        "the last one ends, %" GST_TIME_FORMAT, i, GST_TIME_ARGS (pts), GST_TIME_ARGS (end));
    /* due every half second from the first: 0.5, 1, 1.5 .. after each */
    const GstClockTime due = (pts / (GST_SECOND / 2) + 1) * (GST_SECOND / 2);
    ck_assert_uint_eq (GST_BUFFER_DURATION (b), due - pts);
    end = pts + GST_BUFFER_DURATION (b);
    gst_buffer_unref (b);
  }
  gst_harness_teardown (h);
}
END_TEST

/* --- llmdetokenize mode=caption ---------------------------------------- */

/* llmdetokenize mode=caption on the test vocabulary, taking tokens. */
static GstHarness *
caption_harness_new (void)
{
  g_autofree char *lm = llm_test_data_path (LM);
  GstElement *el = gst_element_factory_make ("llmdetokenize", NULL);
  g_object_set (el, "model", lm, NULL);
  gst_util_set_object_arg (G_OBJECT (el), "mode", "caption");
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  gst_harness_set_src_caps (h, gst_llm_caps_new_tokens (NULL));
  return h;
}

START_TEST (test_detokenize_caption_is_one_line_timed_as_its_media)
{
  GstHarness *h = caption_harness_new ();
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (llm_model_tokenizer (m), "Two cats\n\nplay  in the sun", -1, FALSE,
      FALSE, FALSE, ids);
  for (guint i = 0; i < ids->len; i++) {
    GstBuffer *b = gst_llm_tokens_buffer_new (&g_array_index (ids, gint32, i), 1);
    GST_BUFFER_PTS (b) = 5 * GST_SECOND + i * GST_MSECOND;
    GST_BUFFER_DURATION (b) = GST_MSECOND;
    ck_assert_int_eq (gst_harness_push (h, b), GST_FLOW_OK);
  }
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  gst_harness_push_event (h, gst_llm_event_new_end_of_response_timed ("max-tokens",
          4 * GST_SECOND, 2 * GST_SECOND));
  GstBuffer *out = gst_harness_pull (h);
  GstMapInfo map;
  gst_buffer_map (out, &map, GST_MAP_READ);
  g_autofree char *text = g_strndup ((const char *) map.data, map.size);
  gst_buffer_unmap (out, &map);
  ck_assert_str_eq (text, "Two cats play in the sun");
  ck_assert_uint_eq (GST_BUFFER_PTS (out), 4 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (out), 2 * GST_SECOND);
  gst_buffer_unref (out);
  /* A response with no text gives no caption. */
  gst_harness_push_event (h, gst_llm_event_new_end_of_response_timed ("eos", 6 * GST_SECOND,
          2 * GST_SECOND));
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  gst_harness_teardown (h);
}
END_TEST

/* The text of a response's ids, pushed one id a buffer into @h. */
static void
push_text_ids (GstHarness *h, LlmModel *m, const char *text)
{
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (llm_model_tokenizer (m), text, -1, FALSE, FALSE, FALSE, ids);
  for (guint i = 0; i < ids->len; i++)
    ck_assert_int_eq (gst_harness_push (h, gst_llm_tokens_buffer_new (&g_array_index (ids,
                    gint32, i), 1)), GST_FLOW_OK);
}

/* The mode set while a response is under way applies from the next
 * response: the one under way is neither cut into streamed text and a
 * caption (what happened before) nor held back as a caption. */
START_TEST (test_detokenize_mode_changes_from_the_next_response)
{
  GstHarness *h = caption_harness_new ();
  GstElement *el = h->element;
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");

  /* caption -> stream mid-response: still one caption, at its end. */
  push_text_ids (h, m, "Two cats");
  gst_util_set_object_arg (G_OBJECT (el), "mode", "stream");
  push_text_ids (h, m, " play in  the sun");
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_response ("max-tokens")));
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 1);
  g_autoptr (GString) caption = llm_test_pull_text (h);
  ck_assert_str_eq (caption->str, "Two cats play in the sun");

  /* The next response streams as it forms. */
  push_text_ids (h, m, "A dog");
  g_autoptr (GString) streamed = llm_test_pull_text (h);
  ck_assert_str_eq (streamed->str, "A dog");

  /* stream -> caption mid-response: the rest still streams. */
  gst_util_set_object_arg (G_OBJECT (el), "mode", "caption");
  push_text_ids (h, m, " runs  fast");
  g_autoptr (GString) rest = llm_test_pull_text (h);
  ck_assert_str_eq (rest->str, " runs  fast");
  ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_response ("max-tokens")));
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);

  /* And the response after it is a caption. */
  push_text_ids (h, m, "The  end");
  ck_assert_uint_eq (gst_harness_buffers_in_queue (h), 0);
  ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_response ("max-tokens")));
  g_autoptr (GString) last = llm_test_pull_text (h);
  ck_assert_str_eq (last->str, "The end");
  gst_harness_teardown (h);
}
END_TEST

/* Tokens of a text prompt read from a file: no timestamps, a segment in
 * bytes. The captions follow one another from 0, each as long as its
 * tokens' durations, in a time segment (webvttenc wrote a cue from a
 * garbage time and a GStreamer-CRITICAL before). */
START_TEST (test_detokenize_caption_of_untimed_tokens_follows_on_in_a_time_segment)
{
  GstHarness *h = caption_harness_new ();
  GstSegment bytes;
  gst_segment_init (&bytes, GST_FORMAT_BYTES);
  ck_assert (gst_harness_push_event (h, gst_event_new_segment (&bytes)));
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const char *const texts[] = { "Two cats", "play in the sun" };
  GstClockTime want_pts = 0;
  for (guint r = 0; r < G_N_ELEMENTS (texts); r++) {
    g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
    llm_tokenizer_encode (llm_model_tokenizer (m), texts[r], -1, FALSE, FALSE, FALSE, ids);
    for (guint i = 0; i < ids->len; i++) {
      GstBuffer *b = gst_llm_tokens_buffer_new (&g_array_index (ids, gint32, i), 1);
      GST_BUFFER_DURATION (b) = (3 + r) * GST_MSECOND;
      ck_assert_int_eq (gst_harness_push (h, b), GST_FLOW_OK);
    }
    ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_response ("max-tokens")));
    GstBuffer *out = gst_harness_pull (h);
    ck_assert_uint_eq (GST_BUFFER_PTS (out), want_pts);
    ck_assert_uint_eq (GST_BUFFER_DURATION (out), ids->len * (3 + r) * GST_MSECOND);
    want_pts += GST_BUFFER_DURATION (out);
    gst_buffer_unref (out);
  }
  GstEvent *ev, *segment = NULL;
  while ((ev = gst_harness_try_pull_event (h))) {
    if (GST_EVENT_TYPE (ev) == GST_EVENT_SEGMENT)
      gst_event_replace (&segment, ev);
    gst_event_unref (ev);
  }
  ck_assert (segment != NULL);
  const GstSegment *seg;
  gst_event_parse_segment (segment, &seg);
  ck_assert_int_eq (seg->format, GST_FORMAT_TIME);
  gst_event_unref (segment);
  gst_harness_teardown (h);
}
END_TEST

/* --- the caption pipeline ---------------------------------------------- */

typedef struct {
  GstClockTime pts, duration;
  char *text;
} Cue;

/* The cues of a WebVTT file, read here: their times and text. */
static GArray *
parse_vtt (const char *path)
{
  g_autofree char *text = NULL;
  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  ck_assert_msg (g_str_has_prefix (text, "WEBVTT"), "%s", text);
  GArray *cues = g_array_new (FALSE, FALSE, sizeof (Cue));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++) {
    guint h0, m0, s0, ms0, h1, m1, s1, ms1;
    if (sscanf (lines[i], "%u:%u:%u.%u --> %u:%u:%u.%u", &h0, &m0, &s0, &ms0, &h1, &m1, &s1,
            &ms1) != 8)
      continue;
    const GstClockTime a = (((h0 * 60 + m0) * 60 + s0) * 1000 + ms0) * GST_MSECOND;
    const GstClockTime b = (((h1 * 60 + m1) * 60 + s1) * 1000 + ms1) * GST_MSECOND;
    ck_assert (lines[i + 1] != NULL);
    Cue c = { a, b - a, g_strdup (lines[i + 1]) };
    g_array_append_val (cues, c);
  }
  return cues;
}

/* Through subparse, as a player reads it. Under valgrind, GRegex's JIT
 * (which subparse uses) gives reports valgrind cannot attribute; there
 * the file is read here instead. */
static GArray *
read_vtt (const char *path)
{
  if (RUNNING_ON_VALGRIND)
    return parse_vtt (path);
  g_autofree char *desc = g_strdup_printf ("filesrc location=%s ! subparse ! "
      "appsink name=out sync=false", path);
  GError *error = NULL;
  GstElement *p = gst_parse_launch (desc, &error);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (p), "out");
  gst_element_set_state (p, GST_STATE_PLAYING);
  GArray *cues = g_array_new (FALSE, FALSE, sizeof (Cue));
  for (GstSample *s; (s = gst_app_sink_try_pull_sample (GST_APP_SINK (sink), 10 * GST_SECOND));) {
    GstBuffer *b = gst_sample_get_buffer (s);
    GstMapInfo map;
    gst_buffer_map (b, &map, GST_MAP_READ);
    Cue c = { GST_BUFFER_PTS (b), GST_BUFFER_DURATION (b),
      g_strndup ((const char *) map.data, map.size) };
    gst_buffer_unmap (b, &map);
    g_array_append_val (cues, c);
    gst_sample_unref (s);
  }
  gst_element_set_state (p, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (p);
  return cues;
}

/* test-3.mp4 (10.03 s, 24 fps) captioned every 2 s: a cue for the
 * frames at 0.108, 2.132, 4.132, 6.132 and 8.132 s, each lasting until
 * the next frame is due (0.108 s + 2 k s; the frames come 25 ms after
 * that) and the last to the end of the video, in order, with text. */
START_TEST (test_caption_video_writes_webvtt_subparse_reads)
{
  g_autofree char *lm = llm_test_data_path (LM);
  g_autofree char *media = llm_test_data_path ("media/test-3.mp4");
  g_autofree char *tower = write_tower ("idefics3", lm_width ());
  g_autofree char *vtt = g_build_filename (tmpdir, "out.vtt", NULL);
  g_autofree char *desc = g_strdup_printf ("filesrc location=%s ! decodebin ! "
      "llmvisionencode mmproj=%s interval=2 ! llmprefill model=%s prompt=\"The picture\" ! "
      "llmdecode max-tokens=8 ! llmdetokenize model=%s mode=caption ! webvttenc ! "
      "filesink location=%s", media, tower, lm, lm, vtt);
  g_autofree char *error = run_for_error (desc);
  ck_assert_msg (error == NULL, "%s", error);

  g_autofree char *contents = NULL;
  ck_assert (g_file_get_contents (vtt, &contents, NULL, NULL));
  ck_assert_msg (g_str_has_prefix (contents, "WEBVTT"), "%s", contents);
  g_autoptr (GArray) cues = read_vtt (vtt);
  ck_assert_uint_eq (cues->len, 5);
  g_autoptr (GArray) plain = parse_vtt (vtt);
  ck_assert_uint_eq (plain->len, cues->len);
  for (guint i = 0; i < plain->len; i++) {
    ck_assert_uint_eq (g_array_index (plain, Cue, i).pts / GST_MSECOND,
        g_array_index (cues, Cue, i).pts / GST_MSECOND);
    g_free (g_array_index (plain, Cue, i).text);
  }
  const GstClockTime starts_ms[] = { 107, 2132, 4132, 6132, 8132 };
  for (guint i = 0; i < cues->len; i++) {
    Cue *c = &g_array_index (cues, Cue, i);
    ck_assert_uint_eq (c->pts / GST_MSECOND, starts_ms[i]);
    const GstClockTime end = c->pts + c->duration;
    if (i + 1 < cues->len)
      ck_assert_uint_eq (end / GST_MSECOND, starts_ms[0] + 2000 * (i + 1));
    else
      ck_assert_uint_le (end, 10090 * GST_MSECOND);
    ck_assert_msg (strlen (g_strstrip (c->text)) > 0, "cue %u has no text", i);
    g_free (c->text);
  }
}
END_TEST


/* The same with llmtokencompress between the encoder and the model: each
 * frame's 4 rows go in as 2, and the captions still come, one a frame. */
START_TEST (test_caption_video_with_compressed_rows)
{
  g_autofree char *lm = llm_test_data_path (LM);
  g_autofree char *media = llm_test_data_path ("media/test-3.mp4");
  g_autofree char *tower = write_tower ("idefics3", lm_width ());
  g_autofree char *vtt = g_build_filename (tmpdir, "merged.vtt", NULL);
  g_autofree char *desc = g_strdup_printf ("filesrc location=%s ! decodebin ! "
      "llmvisionencode mmproj=%s interval=2 ! llmtokencompress method=merge ratio=0.5 ! "
      "llmprefill model=%s prompt=\"The picture\" ! llmdecode max-tokens=8 ! "
      "llmdetokenize model=%s mode=caption ! webvttenc ! filesink location=%s", media, tower,
      lm, lm, vtt);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  ck_assert (pipeline != NULL);
  GstBus *bus = gst_element_get_bus (pipeline);
  define_decoded_frames (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  guint frames = 0;
  for (GstMessage *m; (m = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
              GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_ELEMENT));) {
    const GstMessageType type = GST_MESSAGE_TYPE (m);
    const GstStructure *st = gst_message_get_structure (m);
    if (type == GST_MESSAGE_ELEMENT && gst_structure_has_name (st, "llm-token-compress")) {
      guint in = 0, out = 0;
      ck_assert (gst_structure_get_uint (st, "rows-in", &in));
      ck_assert (gst_structure_get_uint (st, "rows-out", &out));
      ck_assert_uint_eq (in, 4);
      ck_assert_uint_eq (out, 2);
      frames++;
    }
    ck_assert_msg (type != GST_MESSAGE_ERROR, "error on the bus");
    gst_message_unref (m);
    if (type == GST_MESSAGE_EOS)
      break;
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  ck_assert_uint_eq (frames, 5);
  g_autoptr (GArray) cues = read_vtt (vtt);
  ck_assert_uint_eq (cues->len, 5);
  for (guint i = 0; i < cues->len; i++)
    g_free (g_array_index (cues, Cue, i).text);
}
END_TEST

/* Frames a video file decodes to. */
static guint
count_frames (const char *path)
{
  g_autofree char *desc = g_strdup_printf ("filesrc location=%s ! decodebin ! "
      "appsink name=out sync=false", path);
  GstElement *p = gst_parse_launch (desc, NULL);
  ck_assert (p != NULL);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (p), "out");
  gst_element_set_state (p, GST_STATE_PLAYING);
  guint n = 0;
  for (GstSample *s; (s = gst_app_sink_try_pull_sample (GST_APP_SINK (sink), 10 * GST_SECOND));
      n++)
    gst_sample_unref (s);
  gst_element_set_state (p, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (p);
  return n;
}

static void
run_script_on (const char *name, const char *media_file, const char *variant, const char *out)
{
  g_autofree char *script = g_build_filename (LLM_SOURCE_ROOT, "pipelines", name, NULL);
  g_autofree char *media = llm_test_data_path (media_file);
  char **env = g_get_environ ();
  env = g_environ_setenv (env, "VARIANT", variant, TRUE);
  env = g_environ_setenv (env, "XDG_CACHE_HOME", tmpdir, TRUE);
  env = g_environ_setenv (env, "BUILD_DIR", LLM_BUILD_ROOT, TRUE);
  env = g_environ_setenv (env, "GST_PLUGIN_PATH", g_getenv ("GST_PLUGIN_PATH_1_0"), TRUE);
  char *argv[] = { script, media, (char *) out, NULL };
  int status = 0;
  g_autofree char *err = NULL;
  GError *error = NULL;
  ck_assert_msg (g_spawn_sync (NULL, argv, env, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err,
          &status, &error), "%s", error ? error->message : "");
  g_strfreev (env);
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "%s %s: %s", script, variant, err);
}

static void
run_script (const char *variant, const char *out)
{
  run_script_on ("caption-video.sh", "media/test-3.mp4", variant, out);
}

/* The script as a user runs it, with no model arguments: WebVTT that
 * subparse reads, and the overlay variant's video, frame for frame. */
START_TEST (test_caption_video_script_runs_on_a_fresh_machine)
{
  g_autofree char *vtt = g_build_filename (tmpdir, "script.vtt", NULL);
  run_script ("vtt", vtt);
  g_autoptr (GArray) cues = read_vtt (vtt);
  ck_assert_uint_eq (cues->len, 5);
  for (guint i = 0; i < cues->len; i++) {
    Cue *c = &g_array_index (cues, Cue, i);
    if (i > 0)
      ck_assert_uint_gt (c->pts, g_array_index (cues, Cue, i - 1).pts);
    ck_assert_uint_le (c->pts + c->duration, 10090 * GST_MSECOND);
    g_free (c->text);
  }
  g_autofree char *webm = g_build_filename (tmpdir, "script.webm", NULL);
  run_script ("overlay", webm);
  g_autofree char *media = llm_test_data_path ("media/test-3.mp4");
  ck_assert_uint_eq (count_frames (webm), count_frames (media));
}
END_TEST

/* pipelines/caption-voice.sh with no model arguments: jfk.wav (11 s) in
 * 5 s chunks gives three cues, 0-5, 5-10 and 10-11 s, with text. */
START_TEST (test_caption_voice_script_writes_webvtt)
{
  g_autofree char *vtt = g_build_filename (tmpdir, "voice.vtt", NULL);
  run_script_on ("caption-voice.sh", "media/jfk.wav", "file", vtt);
  g_autoptr (GArray) cues = read_vtt (vtt);
  ck_assert_uint_eq (cues->len, 3);
  const guint starts[] = { 0, 5000, 10000 }, ends[] = { 5000, 10000, 11000 };
  for (guint i = 0; i < cues->len; i++) {
    Cue *c = &g_array_index (cues, Cue, i);
    ck_assert_uint_eq (c->pts / GST_MSECOND, starts[i]);
    ck_assert_uint_eq ((c->pts + c->duration) / GST_MSECOND, ends[i]);
    ck_assert_msg (strlen (g_strstrip (c->text)) > 0, "cue %u has no text", i);
    g_free (c->text);
  }
}
END_TEST

static Suite *
media_suite (void)
{
  gst_init (NULL, NULL);
  Suite *s = suite_create ("media");
  TCase *tc = tcase_create ("media");
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_media_prompt_puts_rows_at_its_markers);
  tcase_add_test (tc, test_media_prompt_lays_out_smolvlm_tiles);
  tcase_add_test (tc, test_prefill_media_rows_answer_as_the_tokens_they_embed);
  tcase_add_test (tc, test_prefill_media_prompt_waits_for_its_items);
  tcase_add_test (tc, test_prefill_refuses_media_of_another_width);
  tcase_add_test (tc, test_visionencode_refuses_bad_projector_files);
  tcase_add_test (tc, test_visionencode_rows_are_the_towers_for_the_same_pixels);
  tcase_add_test (tc, test_visionencode_flags_settings_changed_after_start);
  tcase_add_test (tc, test_visionencode_encodes_one_frame_per_interval);
  tcase_add_test (tc, test_visionencode_frames_last_until_the_next_is_due);
  tcase_add_test (tc, test_visionencode_cuts_tiles_as_mtmd_does);
  tcase_add_test (tc, test_visionencode_merges_tokens_in_the_tower);
  tcase_add_test (tc, test_detokenize_caption_is_one_line_timed_as_its_media);
  tcase_add_test (tc, test_detokenize_caption_of_untimed_tokens_follows_on_in_a_time_segment);
  tcase_add_test (tc, test_detokenize_mode_changes_from_the_next_response);
  tcase_add_test (tc, test_caption_video_writes_webvtt_subparse_reads);
  tcase_add_test (tc, test_caption_video_script_runs_on_a_fresh_machine);
  tcase_add_test (tc, test_caption_video_with_compressed_rows);
  tcase_add_test (tc, test_caption_voice_script_writes_webvtt);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (media_suite)
