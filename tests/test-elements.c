/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* llmtokenize and llmdetokenize in GstHarness: exact ids, text split
 * anywhere, timing, prompt boundaries, flushes, vocabulary checks at
 * negotiation, and errors for bad model files; plus the caps contract
 * (lib/llm-caps.h) they are built on. */
#include <string.h>
#include <glib/gstdio.h>
#include <gst/check/gstharness.h>

#include "llm-caps.h"
#include "gguf-writer.h"
#include "element-check.h"
#include "llm-check.h"
#include "tokenizer.h"

#define STORIES "models/stories260K.gguf"
#define STORIES656 "models/TinyStories-656K-Q8_0.gguf"

static const char *const all_vocabs[] = {
  "vocab/ggml-vocab-llama-spm.gguf",
  "vocab/ggml-vocab-phi-3.gguf",
  "vocab/ggml-vocab-llama-bpe.gguf",
  "vocab/ggml-vocab-qwen2.gguf",
  "vocab/ggml-vocab-gpt-2.gguf",
  "vocab/ggml-vocab-deepseek-llm.gguf",
  STORIES,
  STORIES656,
};

/* ---- helpers ------------------------------------------------------------ */

static LlmTokenizer *
open_tokenizer (const char *relative)
{
  g_autofree char *path = llm_test_data_path (relative);
  GError *error = NULL;
  LlmTokenizer *tok = llm_tokenizer_new_from_file (path, &error);
  ck_assert_msg (tok != NULL, "%s: %s", relative, error ? error->message : "?");
  return tok;
}

/* A harness around a new @factory element whose model is @relative (under
 * tests/data), with extra properties as name/value pairs. */
static GstHarness *
harness_new (const char *factory, const char *relative, const char *first_prop, ...)
{
  GstElement *el = gst_element_factory_make (factory, NULL);
  ck_assert_msg (el != NULL, "no element %s: is GST_PLUGIN_PATH_1_0 set?", factory);
  g_autofree char *path = llm_test_data_path (relative);
  g_object_set (el, "model", path, NULL);
  if (first_prop) {
    va_list args;
    va_start (args, first_prop);
    g_object_set_valist (G_OBJECT (el), first_prop, args);
    va_end (args);
  }
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  return h;
}

/* With @prop NULL, or one integer, enum or boolean property set. */
static GstHarness *
tokenize_harness (const char *relative, const char *prop, int value)
{
  GstHarness *h = harness_new ("llmtokenize", relative, prop, value, NULL);
  gst_harness_set_src_caps_str (h, GST_LLM_CAPS_TEXT);
  return h;
}

static GstHarness *
detokenize_harness (const char *relative, gboolean skip_special)
{
  GstHarness *h = harness_new ("llmdetokenize", relative, "skip-special", skip_special, NULL);
  g_autoptr (LlmTokenizer) tok = open_tokenizer (relative);
  gst_harness_set_src_caps (h, gst_llm_caps_new_tokens (llm_tokenizer_vocab (tok)->hash));
  return h;
}

static GstBuffer *
text_buffer (const char *text, gsize len, GstClockTime pts, GstClockTime duration)
{
  GstBuffer *buf = gst_buffer_new_memdup (text, len);
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = duration;
  return buf;
}

static void
push_text (GstHarness *h, const char *text, gsize len)
{
  ck_assert_int_eq (gst_harness_push (h, text_buffer (text, len, GST_CLOCK_TIME_NONE,
              GST_CLOCK_TIME_NONE)), GST_FLOW_OK);
}

static void
push_ids (GstHarness *h, const gint32 *ids, gsize n, GstClockTime pts, GstClockTime duration)
{
  GstBuffer *buf = gst_llm_tokens_buffer_new (ids, n);
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = duration;
  ck_assert_int_eq (gst_harness_push (h, buf), GST_FLOW_OK);
}

/* All ids the element has pushed so far. */
static GArray *
pull_ids (GstHarness *h)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    ck_assert (gst_llm_tokens_buffer_read (buf, ids));
    gst_buffer_unref (buf);
  }
  return ids;
}

/* Whether the element forwarded a custom event named @name; drops the
 * events queued before it. */
static gboolean
pulled_event (GstHarness *h, const char *name)
{
  GstEvent *ev;
  while ((ev = gst_harness_try_pull_event (h)) != NULL) {
    gboolean hit = GST_EVENT_TYPE (ev) == GST_EVENT_CUSTOM_DOWNSTREAM && gst_event_has_name (ev, name);
    gst_event_unref (ev);
    if (hit)
      return TRUE;
  }
  return FALSE;
}

static char *
ids_to_string (const GArray *ids)
{
  GString *s = g_string_new ("[");
  for (guint i = 0; i < ids->len; i++)
    g_string_append_printf (s, "%s%d", i ? ", " : "", g_array_index (ids, gint32, i));
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static void
assert_ids (const GArray *got, const GArray *expected, const char *what)
{
  if (got->len == expected->len &&
      memcmp (got->data, expected->data, got->len * sizeof (gint32)) == 0)
    return;
  g_autofree char *e = ids_to_string (expected);
  g_autofree char *g = ids_to_string (got);
  ck_abort_msg ("%s:\n  expected %s\n  got      %s", what, e, g);
}

static GArray *
ids_of (const gint32 *ids, gsize n)
{
  GArray *a = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_array_append_vals (a, ids, n);
  return a;
}

/* The ids the library gives for the whole text at once: what the element
 * must give whatever the buffer boundaries. */
static GArray *
whole_text_ids (const LlmTokenizer *tok, const char *text, gsize len, gboolean bos)
{
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  if (bos)
    g_array_append_val (ids, vocab->bos);
  llm_tokenizer_encode (tok, text, len, FALSE, TRUE, TRUE, ids);
  return ids;
}

/* Sets @el (not in a pipeline) to READY with a bus; returns the state
 * change result and the ERROR message posted, if any. */
static GstStateChangeReturn
try_ready (GstElement *el, GError **error, char **debug)
{
  GstBus *bus = gst_bus_new ();
  gst_element_set_bus (el, bus);
  GstStateChangeReturn ret = gst_element_set_state (el, GST_STATE_READY);
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  *error = NULL;
  *debug = NULL;
  if (msg) {
    gst_message_parse_error (msg, error, debug);
    gst_message_unref (msg);
  }
  gst_element_set_state (el, GST_STATE_NULL);
  gst_element_set_bus (el, NULL);
  gst_object_unref (bus);
  return ret;
}

static void
assert_load_error (const char *factory, const char *path, GQuark domain, int code,
    const char *expected_words)
{
  GstElement *el = gst_element_factory_make (factory, NULL);
  GError *error;
  char *debug;

  ck_assert (el != NULL);
  if (path)
    g_object_set (el, "model", path, NULL);
  ck_assert_int_eq (try_ready (el, &error, &debug), GST_STATE_CHANGE_FAILURE);
  ck_assert_msg (error != NULL, "%s posted no error for %s", factory, path);
  ck_assert_msg (g_error_matches (error, domain, code), "%s: got %s %d: %s", path,
      g_quark_to_string (error->domain), error->code, error->message);
  if (path)
    ck_assert_msg (strstr (error->message, path) != NULL, "message does not name the file: %s",
        error->message);
  ck_assert_msg (strstr (error->message, expected_words) != NULL, "message \"%s\" lacks \"%s\"",
      error->message, expected_words);
  g_error_free (error);
  g_free (debug);
  gst_object_unref (el);
}

/* ---- caps contract ------------------------------------------------------ */

START_TEST (test_caps_tokens_carry_the_vocab_hash)
{
  GstCaps *caps = gst_llm_caps_new_tokens ("0123456789abcdef");
  GstCaps *parsed = gst_caps_from_string (GST_LLM_CAPS_TOKENS_VOCAB ("0123456789abcdef"));
  ck_assert (gst_caps_is_equal (caps, parsed));
  ck_assert (gst_caps_is_fixed (caps));
  ck_assert_str_eq (gst_llm_caps_get_vocab (caps), "0123456789abcdef");
  gst_caps_unref (parsed);
  gst_caps_unref (caps);

  GstCaps *templ = gst_llm_caps_new_tokens (NULL);
  GstCaps *templ_parsed = gst_caps_from_string (GST_LLM_CAPS_TOKENS);
  ck_assert_ptr_null (gst_llm_caps_get_vocab (templ));
  ck_assert (gst_caps_is_equal (templ, templ_parsed));
  gst_caps_unref (templ_parsed);
  gst_caps_unref (templ);

  GstCaps *text = gst_llm_caps_new_text ();
  GstCaps *text_parsed = gst_caps_from_string (GST_LLM_CAPS_TEXT);
  ck_assert (gst_caps_is_equal (text, text_parsed));
  ck_assert_ptr_null (gst_llm_caps_get_vocab (text));
  gst_caps_unref (text_parsed);
  gst_caps_unref (text);

  ck_assert (gst_llm_vocab_hash_is_valid ("0123456789abcdef"));
  ck_assert (!gst_llm_vocab_hash_is_valid ("0123456789ABCDEF"));
  ck_assert (!gst_llm_vocab_hash_is_valid ("0123456789abcde"));
  ck_assert (!gst_llm_vocab_hash_is_valid ("0123456789abcdef0"));
  ck_assert (!gst_llm_vocab_hash_is_valid (NULL));
}
END_TEST

START_TEST (test_caps_token_payload_is_little_endian_int32)
{
  const gint32 ids[] = { 1, 403, -7, 0x01020304 };
  GstBuffer *buf = gst_llm_tokens_buffer_new (ids, G_N_ELEMENTS (ids));
  const guint8 expected[] = { 1, 0, 0, 0, 0x93, 1, 0, 0, 0xf9, 0xff, 0xff, 0xff, 4, 3, 2, 1 };
  ck_assert_int_eq (gst_buffer_get_size (buf), sizeof expected);
  ck_assert_int_eq (gst_buffer_memcmp (buf, 0, expected, sizeof expected), 0);

  GArray *back = g_array_new (FALSE, FALSE, sizeof (gint32));
  ck_assert (gst_llm_tokens_buffer_read (buf, back));
  g_autoptr (GArray) want = ids_of (ids, G_N_ELEMENTS (ids));
  assert_ids (back, want, "read back");
  gst_buffer_unref (buf);

  /* a payload that is not whole ids is refused, leaving @ids alone */
  GstBuffer *odd = gst_buffer_new_memdup (expected, 5);
  ck_assert (!gst_llm_tokens_buffer_read (odd, back));
  ck_assert_int_eq (back->len, G_N_ELEMENTS (ids));
  gst_buffer_unref (odd);
  g_array_unref (back);
}
END_TEST

START_TEST (test_caps_prompt_and_response_events)
{
  GstEvent *eop = gst_llm_event_new_end_of_prompt ();
  ck_assert_int_eq (GST_EVENT_TYPE (eop), GST_EVENT_CUSTOM_DOWNSTREAM);
  ck_assert (GST_EVENT_IS_SERIALIZED (eop));
  ck_assert (gst_llm_event_is_end_of_prompt (eop));
  ck_assert (!gst_llm_event_is_end_of_response (eop));
  ck_assert (!gst_llm_event_parse_end_of_response (eop, NULL));

  GstEvent *eor = gst_llm_event_new_end_of_response (GST_LLM_STOP_REASON_MAX_TOKENS);
  const char *reason = NULL;
  ck_assert (GST_EVENT_IS_SERIALIZED (eor));
  ck_assert (gst_llm_event_is_end_of_response (eor));
  ck_assert (!gst_llm_event_is_end_of_prompt (eor));
  ck_assert (gst_llm_event_parse_end_of_response (eor, &reason));
  ck_assert_str_eq (reason, "max-tokens");

  GstEvent *eos = gst_event_new_eos ();
  ck_assert (!gst_llm_event_is_end_of_prompt (eos));
  ck_assert (!gst_llm_event_is_end_of_response (eos));
  gst_event_unref (eos);
  gst_event_unref (eor);
  gst_event_unref (eop);
}
END_TEST

/* ---- llmtokenize -------------------------------------------------------- */

START_TEST (test_tokenize_once_upon_a_time_gives_known_ids)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  push_text (h, "Once upon a time", 16);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));

  const gint32 expected[] = { 1, 403, 407, 261, 378 };
  g_autoptr (GArray) want = ids_of (expected, G_N_ELEMENTS (expected));
  g_autoptr (GArray) got = pull_ids (h);
  assert_ids (got, want, "\"Once upon a time\" with BOS");
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_tokenize_output_caps_name_the_vocabulary)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  push_text (h, "Once upon a time", 16);
  g_autoptr (LlmTokenizer) tok = open_tokenizer (STORIES);

  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  ck_assert (caps != NULL);
  ck_assert_str_eq (gst_llm_caps_get_vocab (caps), llm_tokenizer_vocab (tok)->hash);
  ck_assert (gst_llm_vocab_hash_is_valid (gst_llm_caps_get_vocab (caps)));
  gst_caps_unref (caps);
  gst_harness_teardown (h);
}
END_TEST

/* Text cut in two at every byte, inside words and inside UTF-8
 * characters, gives the ids of the whole text, for every vocabulary; so
 * does text that is not UTF-8 (SentencePiece reads a lead byte's length
 * whatever follows, so "\xff " is one character: cut before that space,
 * stories260K gave other ids). */
START_TEST (test_tokenize_split_at_every_byte_gives_whole_text_ids)
{
  const char *relative = all_vocabs[_i];
  static const char text[] = "Lily saw a caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve! "
      "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x99 ok,  two  spaces\n\tand 12345. "
      "Once upon \xff\xfe a time, x\xe0 y\xc3 z.";
  const gsize len = sizeof text - 1;
  g_autoptr (LlmTokenizer) tok = open_tokenizer (relative);
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  gboolean bos = vocab->add_bos && vocab->bos >= 0;
  g_autoptr (GArray) want = whole_text_ids (tok, text, len, bos);
  GstHarness *h = tokenize_harness (relative, NULL, 0);

  for (gsize cut = 1; cut < len; cut++) {
    push_text (h, text, cut);
    push_text (h, text + cut, len - cut);
    ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_prompt ()));
    g_autoptr (GArray) got = pull_ids (h);
    g_autofree char *what = g_strdup_printf ("%s, cut at byte %" G_GSIZE_FORMAT, relative, cut);
    assert_ids (got, want, what);
  }

  /* and one byte per buffer */
  for (gsize i = 0; i < len; i++)
    push_text (h, text + i, 1);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  g_autoptr (GArray) got = pull_ids (h);
  g_autofree char *what = g_strdup_printf ("%s, one byte per buffer", relative);
  assert_ids (got, want, what);
  gst_harness_teardown (h);
}
END_TEST

/* llama.cpp's own test texts (tests/data/vocab/NAME.inp), in 7-byte buffers,
 * give the ids of the whole text. */
START_TEST (test_tokenize_vocab_test_texts_in_small_buffers)
{
  const char *relative = all_vocabs[_i];
  g_autofree char *inp = g_strdup_printf ("%s.inp", relative);
  g_autofree char *inp_path = llm_test_data_path (inp);
  if (!g_file_test (inp_path, G_FILE_TEST_EXISTS))
    LLM_TEST_SKIP ("%s has no test texts", relative);

  GBytes *bytes = llm_test_read_file (inp_path);
  g_autofree char *all = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  g_bytes_unref (bytes);
  g_auto (GStrv) texts = g_strsplit (all, "\n__ggml_vocab_test__\n", -1);
  g_autoptr (LlmTokenizer) tok = open_tokenizer (relative);
  GstHarness *h = tokenize_harness (relative, "add-bos", 2 /* false */ );

  guint n = 0;
  for (char **t = texts; *t; t++) {
    gsize len = strlen (*t);
    if (len == 0)
      continue;
    for (gsize off = 0; off < len; off += 7)
      push_text (h, *t + off, MIN (7, len - off));
    ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_prompt ()));
    g_autoptr (GArray) got = pull_ids (h);
    g_autoptr (GArray) want = whole_text_ids (tok, *t, len, FALSE);
    g_autofree char *what = g_strdup_printf ("%s text %u \"%s\"", relative, n, *t);
    assert_ids (got, want, what);
    n++;
  }
  ck_assert_uint_ge (n, 40);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_tokenize_output_keeps_input_timing)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  GstBuffer *in = text_buffer ("Once upon a time ", 17, 1 * GST_SECOND, 2 * GST_SECOND);
  GST_BUFFER_OFFSET (in) = 100;
  GST_BUFFER_OFFSET_END (in) = 117;
  ck_assert_int_eq (gst_harness_push (h, in), GST_FLOW_OK);

  GstBuffer *out = gst_harness_try_pull (h);
  ck_assert (out != NULL);
  ck_assert_uint_eq (GST_BUFFER_PTS (out), 1 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (out), 2 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_OFFSET (out), 100);
  ck_assert_uint_eq (GST_BUFFER_OFFSET_END (out), 117);
  ck_assert_uint_eq (gst_buffer_get_size (out), 5 * GST_LLM_TOKEN_SIZE);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}
END_TEST

/* A word the next buffer may continue waits for it; its ids then carry
 * the PTS of the buffer the word began in, and last to the end of the
 * buffer that completed it. */
START_TEST (test_tokenize_held_word_keeps_the_pts_it_began_at)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  ck_assert_int_eq (gst_harness_push (h, text_buffer ("Once up", 7, 1 * GST_SECOND,
              GST_SECOND)), GST_FLOW_OK);
  GstBuffer *first = gst_harness_try_pull (h);
  ck_assert (first != NULL);
  ck_assert_uint_eq (GST_BUFFER_PTS (first), 1 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (first), 1 * GST_SECOND);
  ck_assert_uint_eq (gst_buffer_get_size (first), 2 * GST_LLM_TOKEN_SIZE);      /* BOS, Once */
  ck_assert_ptr_null (gst_harness_try_pull (h));

  ck_assert_int_eq (gst_harness_push (h, text_buffer ("on a", 4, 2 * GST_SECOND,
              GST_SECOND)), GST_FLOW_OK);
  GstBuffer *second = gst_harness_try_pull (h);
  ck_assert (second != NULL);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  ck_assert (gst_llm_tokens_buffer_read (second, ids));
  const gint32 upon[] = { 407 };
  g_autoptr (GArray) want = ids_of (upon, 1);
  assert_ids (ids, want, "\" upon\" once \" a\" followed it");
  ck_assert_uint_eq (GST_BUFFER_PTS (second), 1 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (second), 2 * GST_SECOND);

  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  GstBuffer *last = gst_harness_try_pull (h);
  ck_assert (last != NULL);
  ck_assert_uint_eq (GST_BUFFER_PTS (last), 2 * GST_SECOND);
  g_array_set_size (ids, 0);
  ck_assert (gst_llm_tokens_buffer_read (last, ids));
  const gint32 a[] = { 261 };
  g_autoptr (GArray) want_a = ids_of (a, 1);
  assert_ids (ids, want_a, "\" a\" at EOS");

  g_array_unref (ids);
  gst_buffer_unref (first);
  gst_buffer_unref (second);
  gst_buffer_unref (last);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_tokenize_bos_only_at_prompt_start)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  push_text (h, "Once upon", 9);
  push_text (h, " a time", 7);
  push_text (h, " there", 6);
  ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_prompt ()));
  ck_assert (pulled_event (h, GST_LLM_EVENT_END_OF_PROMPT));
  push_text (h, "Once upon", 9);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));

  g_autoptr (LlmTokenizer) tok = open_tokenizer (STORIES);
  g_autoptr (GArray) want = whole_text_ids (tok, "Once upon a time there", 22, TRUE);
  g_autoptr (GArray) second = whole_text_ids (tok, "Once upon", 9, TRUE);
  g_array_append_vals (want, second->data, second->len);
  g_autoptr (GArray) got = pull_ids (h);
  assert_ids (got, want, "two prompts");
  guint n_bos = 0;
  for (guint i = 0; i < got->len; i++)
    n_bos += g_array_index (got, gint32, i) == 1;
  ck_assert_uint_eq (n_bos, 2);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_tokenize_add_bos_overrides_the_file)
{
  /* stories260K asks for BOS; gpt-2 does not */
  GstHarness *never = tokenize_harness (STORIES, "add-bos", 2 /* false */ );
  push_text (never, "Once upon a time", 16);
  ck_assert (gst_harness_push_event (never, gst_event_new_eos ()));
  const gint32 no_bos[] = { 403, 407, 261, 378 };
  g_autoptr (GArray) want = ids_of (no_bos, G_N_ELEMENTS (no_bos));
  g_autoptr (GArray) got = pull_ids (never);
  assert_ids (got, want, "add-bos=false");
  gst_harness_teardown (never);

  const char *gpt2 = "vocab/ggml-vocab-gpt-2.gguf";
  g_autoptr (LlmTokenizer) tok = open_tokenizer (gpt2);
  ck_assert (!llm_tokenizer_vocab (tok)->add_bos);

  GstHarness *file = tokenize_harness (gpt2, NULL, 0);
  push_text (file, "Hello world", 11);
  ck_assert (gst_harness_push_event (file, gst_event_new_eos ()));
  g_autoptr (GArray) auto_ids = pull_ids (file);
  g_autoptr (GArray) want_auto = whole_text_ids (tok, "Hello world", 11, FALSE);
  assert_ids (auto_ids, want_auto, "gpt-2, add-bos=auto");
  gst_harness_teardown (file);

  GstHarness *always = tokenize_harness (gpt2, "add-bos", 1 /* true */ );
  push_text (always, "Hello world", 11);
  ck_assert (gst_harness_push_event (always, gst_event_new_eos ()));
  g_autoptr (GArray) bos_ids = pull_ids (always);
  g_autoptr (GArray) want_bos = whole_text_ids (tok, "Hello world", 11, TRUE);
  ck_assert_int_eq (g_array_index (want_bos, gint32, 0), 50256);
  assert_ids (bos_ids, want_bos, "gpt-2, add-bos=true");
  gst_harness_teardown (always);
}
END_TEST

START_TEST (test_tokenize_parse_special)
{
  GstHarness *parse = tokenize_harness (STORIES, "add-bos", 2 /* false */ );
  push_text (parse, "<s>Once", 7);
  ck_assert (gst_harness_push_event (parse, gst_event_new_eos ()));
  g_autoptr (GArray) got = pull_ids (parse);
  ck_assert_uint_ge (got->len, 2);
  ck_assert_int_eq (g_array_index (got, gint32, 0), 1);
  gst_harness_teardown (parse);

  GstHarness *plain = tokenize_harness (STORIES, "parse-special", FALSE);
  g_object_set (plain->element, "add-bos", 2 /* false */ , NULL);
  push_text (plain, "<s>Once", 7);
  ck_assert (gst_harness_push_event (plain, gst_event_new_eos ()));
  g_autoptr (GArray) literal = pull_ids (plain);
  ck_assert_uint_gt (literal->len, 2);
  for (guint i = 0; i < literal->len; i++)
    ck_assert_int_ne (g_array_index (literal, gint32, i), 1);
  gst_harness_teardown (plain);
}
END_TEST

START_TEST (test_tokenize_flush_drops_held_text_and_starts_a_prompt)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  push_text (h, "Once upon a ti", 14);
  g_autoptr (GArray) before = pull_ids (h);
  const gint32 upto_a[] = { 1, 403, 407, 261 };
  g_autoptr (GArray) want_before = ids_of (upto_a, G_N_ELEMENTS (upto_a));
  assert_ids (before, want_before, "before the flush (\" ti\" held)");

  ck_assert (gst_harness_push_event (h, gst_event_new_flush_start ()));
  ck_assert (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  GstSegment segment;
  gst_segment_init (&segment, GST_FORMAT_TIME);
  ck_assert (gst_harness_push_event (h, gst_event_new_segment (&segment)));
  push_text (h, "upon a time", 11);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));

  g_autoptr (LlmTokenizer) tok = open_tokenizer (STORIES);
  g_autoptr (GArray) want = whole_text_ids (tok, "upon a time", 11, TRUE);
  g_autoptr (GArray) got = pull_ids (h);
  assert_ids (got, want, "after the flush: a new prompt, nothing held");
  gst_harness_teardown (h);
}
END_TEST

/* A prompt that never ends (a live source without llm-end-of-prompt) with
 * no place to cut exactly is cut anyway once it is large, with a warning,
 * so memory stays bounded. */
START_TEST (test_tokenize_bounds_held_text)
{
  GstHarness *h = tokenize_harness (STORIES, NULL, 0);
  GstBus *bus = gst_bus_new ();
  gst_element_set_bus (h->element, bus);

  /* "日本" over and over: no spaces, so no exact cut */
  GString *chunk = g_string_new (NULL);
  while (chunk->len < 1000)
    g_string_append (chunk, "\xe6\x97\xa5\xe6\x9c\xac");
  gsize pushed = 0;
  GstBuffer *out = NULL;
  while (pushed < 200 * 1000 && out == NULL) {
    push_text (h, chunk->str, chunk->len);
    pushed += chunk->len;
    out = gst_harness_try_pull (h);
  }
  ck_assert_msg (out != NULL, "nothing out after %" G_GSIZE_FORMAT " bytes", pushed);
  ck_assert_uint_le (pushed, 64 * 1024 + chunk->len);
  gst_buffer_unref (out);

  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING);
  ck_assert (msg != NULL);
  gst_message_unref (msg);
  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
  g_string_free (chunk, TRUE);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_tokenize_missing_model_fails_with_not_found)
{
  g_autofree char *dir = g_dir_make_tmp ("llm-test-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "no-such-model.gguf", NULL);
  assert_load_error ("llmtokenize", path, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_NOT_FOUND,
      "does not exist");
  assert_load_error ("llmtokenize", NULL, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_NOT_FOUND,
      "model");
  g_rmdir (dir);
}
END_TEST

/* A file cut short, and one that is not a GGUF at all. */
START_TEST (test_tokenize_malformed_model_fails_naming_the_file)
{
  g_autofree char *src = llm_test_data_path (STORIES);
  GBytes *bytes = llm_test_read_file (src);
  g_autofree char *dir = g_dir_make_tmp ("llm-test-XXXXXX", NULL);
  g_autofree char *cut = g_build_filename (dir, "truncated.gguf", NULL);
  g_autofree char *junk = g_build_filename (dir, "junk.gguf", NULL);

  ck_assert (g_file_set_contents (cut, g_bytes_get_data (bytes, NULL), 4000, NULL));
  ck_assert (g_file_set_contents (junk, "this is not a model\n", -1, NULL));
  assert_load_error ("llmtokenize", cut, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "not a valid GGUF");
  assert_load_error ("llmtokenize", junk, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "not a valid GGUF");
  assert_load_error ("llmdetokenize", cut, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "not a valid GGUF");

  g_unlink (cut);
  g_unlink (junk);
  g_rmdir (dir);
  g_bytes_unref (bytes);
}
END_TEST

/* A valid GGUF that holds no tokenizer says so, rather than "malformed". */
START_TEST (test_tokenize_gguf_without_tokenizer_fails_saying_so)
{
  g_autofree char *dir = g_dir_make_tmp ("llm-test-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "no-tokenizer.gguf", NULL);
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  GError *error = NULL;

  ck_assert (llm_gguf_writer_add_string (w, "general.architecture", "llama"));
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s", error ? error->message : "");
  assert_load_error ("llmtokenize", path, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "no usable tokenizer");
  assert_load_error ("llmdetokenize", path, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "no usable tokenizer");
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* A string from the file that is not UTF-8 reaches the bus escaped, in
 * the message and in its debug text (GStreamer drops a debug string that
 * is not UTF-8). */
START_TEST (test_tokenize_non_utf8_in_a_model_reaches_the_bus_escaped)
{
  g_autofree char *dir = g_dir_make_tmp ("llm-test-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "hostile.gguf", NULL);
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  GError *error = NULL;
  char *debug = NULL;

  ck_assert (llm_gguf_writer_add_string (w, "general.architecture", "llama"));
  ck_assert (llm_gguf_writer_add_string (w, "tokenizer.ggml.model", "sp\xff\xfem"));
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s", error ? error->message : "");
  GstElement *el = gst_element_factory_make ("llmtokenize", NULL);
  g_object_set (el, "model", path, NULL);
  ck_assert_int_eq (try_ready (el, &error, &debug), GST_STATE_CHANGE_FAILURE);
  ck_assert (error != NULL);
  ck_assert_msg (g_error_matches (error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED), "%s",
      error->message);
  ck_assert (g_utf8_validate (error->message, -1, NULL));
  ck_assert_msg (strstr (error->message, "tokenizer model 'sp\\xff\\xfem'") != NULL, "%s",
      error->message);
  ck_assert_msg (debug != NULL, "the debug text was dropped");
  ck_assert_msg (strstr (debug, "'sp\\xff\\xfem'") != NULL, "%s", debug);
  g_error_free (error);
  g_free (debug);
  gst_object_unref (el);
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* ---- llmdetokenize ------------------------------------------------------ */

START_TEST (test_detokenize_once_upon_a_time)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 ids[] = { 1, 403, 407, 261, 378 };
  push_ids (h, ids, G_N_ELEMENTS (ids), GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) text = llm_test_pull_text (h);
  ck_assert_str_eq (text->str, "Once upon a time");
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_detokenize_output_keeps_input_timing)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 ids[] = { 403, 407 };
  GstBuffer *in = gst_llm_tokens_buffer_new (ids, 2);
  GST_BUFFER_PTS (in) = 3 * GST_SECOND;
  GST_BUFFER_DURATION (in) = 40 * GST_MSECOND;
  GST_BUFFER_OFFSET (in) = 7;
  ck_assert_int_eq (gst_harness_push (h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_try_pull (h);
  ck_assert (out != NULL);
  ck_assert_uint_eq (GST_BUFFER_PTS (out), 3 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (out), 40 * GST_MSECOND);
  ck_assert_uint_eq (GST_BUFFER_OFFSET (out), 7);
  /* no BOS: generated text, whose first space is its own */
  ck_assert_int_eq (gst_buffer_memcmp (out, 0, " Once upon", 10), 0);
  ck_assert_uint_eq (gst_buffer_get_size (out), 10);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
}
END_TEST

/* "€" is three byte tokens <0xE2><0x82><0xAC> in stories260K: nothing
 * leaves until the character is whole, and then with the PTS of the buffer
 * that began it. */
START_TEST (test_detokenize_holds_partial_utf8_until_complete)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 once = 403, e2 = 229, x82 = 133, xac = 175;

  push_ids (h, &once, 1, 0, GST_SECOND);
  g_autoptr (GString) first = llm_test_pull_text (h);
  ck_assert_str_eq (first->str, " Once");

  push_ids (h, &e2, 1, 1 * GST_SECOND, GST_SECOND);
  ck_assert_ptr_null (gst_harness_try_pull (h));
  push_ids (h, &x82, 1, 2 * GST_SECOND, GST_SECOND);
  ck_assert_ptr_null (gst_harness_try_pull (h));
  push_ids (h, &xac, 1, 3 * GST_SECOND, GST_SECOND);

  GstBuffer *euro = gst_harness_try_pull (h);
  ck_assert (euro != NULL);
  ck_assert_uint_eq (gst_buffer_get_size (euro), 3);
  ck_assert_int_eq (gst_buffer_memcmp (euro, 0, "\xe2\x82\xac", 3), 0);
  ck_assert_uint_eq (GST_BUFFER_PTS (euro), 1 * GST_SECOND);
  ck_assert_uint_eq (GST_BUFFER_DURATION (euro), 3 * GST_SECOND);
  gst_buffer_unref (euro);

  /* a character split inside one buffer is not split at all */
  const gint32 both[] = { e2, x82, xac, e2 };
  push_ids (h, both, G_N_ELEMENTS (both), 4 * GST_SECOND, GST_SECOND);
  g_autoptr (GString) whole = llm_test_pull_text (h);
  ck_assert_str_eq (whole->str, "\xe2\x82\xac");
  gst_harness_teardown (h);
}
END_TEST

/* What is held when the stream or the response ends is pushed, as U+FFFD
 * since it can no longer become a character, and the events go on. */
START_TEST (test_detokenize_flushes_partial_utf8_at_eos_and_end_of_response)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 partial[] = { 403, 229, 133 };   /* "Once" + first two bytes of "€" */

  push_ids (h, partial, G_N_ELEMENTS (partial), 5 * GST_SECOND, GST_SECOND);
  g_autoptr (GString) before = llm_test_pull_text (h);
  ck_assert_str_eq (before->str, " Once");
  ck_assert (gst_harness_push_event (h,
          gst_llm_event_new_end_of_response (GST_LLM_STOP_REASON_MAX_TOKENS)));
  GstBuffer *held = gst_harness_try_pull (h);
  ck_assert (held != NULL);
  ck_assert_uint_eq (GST_BUFFER_PTS (held), 5 * GST_SECOND);
  ck_assert_uint_eq (gst_buffer_get_size (held), 6);
  ck_assert_int_eq (gst_buffer_memcmp (held, 0, "\xef\xbf\xbd\xef\xbf\xbd", 6), 0);
  gst_buffer_unref (held);
  ck_assert (pulled_event (h, GST_LLM_EVENT_END_OF_RESPONSE));

  push_ids (h, &partial[1], 1, 6 * GST_SECOND, GST_SECOND);
  ck_assert_ptr_null (gst_harness_try_pull (h));
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  g_autoptr (GString) at_eos = llm_test_pull_text (h);
  ck_assert_str_eq (at_eos->str, "\xef\xbf\xbd");
  gst_harness_teardown (h);
}
END_TEST

/* The space an SPM vocabulary puts in front of a prompt's first word is
 * removed when the ids start with BOS (a tokenized prompt), so text round
 * trips; generated text, which has no BOS, keeps its first space. */
START_TEST (test_detokenize_strips_the_space_after_bos_only)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 once_upon[] = { 1, 403, 407 };
  const gint32 upon = 407;

  push_ids (h, once_upon, G_N_ELEMENTS (once_upon), GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  push_ids (h, &upon, 1, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) first = llm_test_pull_text (h);
  ck_assert_str_eq (first->str, "Once upon upon");

  ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_response ("eos")));
  push_ids (h, &upon, 1, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) second = llm_test_pull_text (h);
  ck_assert_str_eq (second->str, " upon");

  ck_assert (gst_harness_push_event (h, gst_llm_event_new_end_of_prompt ()));
  ck_assert (pulled_event (h, GST_LLM_EVENT_END_OF_PROMPT));
  const gint32 bos_upon[] = { 1, 407 };
  push_ids (h, bos_upon, G_N_ELEMENTS (bos_upon), GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) third = llm_test_pull_text (h);
  ck_assert_str_eq (third->str, "upon");
  gst_harness_teardown (h);

  /* byte-level BPE has no space prefix: a leading space is text */
  const char *gpt2 = "vocab/ggml-vocab-gpt-2.gguf";
  g_autoptr (LlmTokenizer) tok = open_tokenizer (gpt2);
  g_autoptr (GArray) ids = whole_text_ids (tok, " Hello", 6, FALSE);
  GstHarness *bpe = detokenize_harness (gpt2, TRUE);
  push_ids (bpe, (const gint32 *) ids->data, ids->len, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) hello = llm_test_pull_text (bpe);
  ck_assert_str_eq (hello->str, " Hello");
  gst_harness_teardown (bpe);
}
END_TEST

START_TEST (test_detokenize_skip_special)
{
  const gint32 ids[] = { 1, 403, 2 };

  GstHarness *skip = detokenize_harness (STORIES, TRUE);
  push_ids (skip, ids, G_N_ELEMENTS (ids), GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) plain = llm_test_pull_text (skip);
  ck_assert_str_eq (plain->str, "Once");
  gst_harness_teardown (skip);

  GstHarness *keep = detokenize_harness (STORIES, FALSE);
  push_ids (keep, ids, G_N_ELEMENTS (ids), GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) marked = llm_test_pull_text (keep);
  /* BOS rendered as text: the space after it stays, as in llama.cpp */
  ck_assert_str_eq (marked->str, "<s> Once</s>");
  gst_harness_teardown (keep);
}
END_TEST

START_TEST (test_detokenize_flush_drops_held_bytes)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 partial[] = { 403, 229 };
  const gint32 upon = 407;

  push_ids (h, partial, G_N_ELEMENTS (partial), GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  g_autoptr (GString) before = llm_test_pull_text (h);
  ck_assert_str_eq (before->str, " Once");
  ck_assert (gst_harness_push_event (h, gst_event_new_flush_start ()));
  ck_assert (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  GstSegment segment;
  gst_segment_init (&segment, GST_FORMAT_TIME);
  ck_assert (gst_harness_push_event (h, gst_event_new_segment (&segment)));
  push_ids (h, &upon, 1, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  g_autoptr (GString) after = llm_test_pull_text (h);
  ck_assert_str_eq (after->str, " upon");
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_detokenize_bad_input_is_an_error_not_a_crash)
{
  GstHarness *h = detokenize_harness (STORIES, TRUE);
  const gint32 out_of_range[] = { 403, 512, -1, 1 << 30, 407 };
  push_ids (h, out_of_range, G_N_ELEMENTS (out_of_range), GST_CLOCK_TIME_NONE,
      GST_CLOCK_TIME_NONE);
  g_autoptr (GString) text = llm_test_pull_text (h);
  ck_assert_str_eq (text->str, " Once upon");

  GstBuffer *odd = gst_buffer_new_memdup ("\x01\x00\x00\x00\x02", 5);
  ck_assert_int_eq (gst_harness_push (h, odd), GST_FLOW_ERROR);
  gst_harness_teardown (h);
}
END_TEST

/* Caps of another vocabulary are refused by accept-caps, and two
 * elements of different vocabularies do not link. */
START_TEST (test_detokenize_refuses_other_vocab_at_negotiation)
{
  g_autoptr (LlmTokenizer) ours = open_tokenizer (STORIES);
  g_autoptr (LlmTokenizer) theirs = open_tokenizer (STORIES656);
  ck_assert_str_ne (llm_tokenizer_vocab (ours)->hash, llm_tokenizer_vocab (theirs)->hash);

  GstHarness *h = harness_new ("llmdetokenize", STORIES, NULL);
  GstPad *sink = gst_element_get_static_pad (h->element, "sink");
  GstCaps *good = gst_llm_caps_new_tokens (llm_tokenizer_vocab (ours)->hash);
  GstCaps *bad = gst_llm_caps_new_tokens (llm_tokenizer_vocab (theirs)->hash);
  GstCaps *unnamed = gst_llm_caps_new_tokens (NULL);
  ck_assert (gst_pad_query_accept_caps (sink, good));
  ck_assert (!gst_pad_query_accept_caps (sink, bad));
  ck_assert (gst_pad_query_accept_caps (sink, unnamed));

  GstCaps *offered = gst_pad_query_caps (sink, NULL);
  ck_assert_str_eq (gst_llm_caps_get_vocab (offered), llm_tokenizer_vocab (ours)->hash);
  gst_caps_unref (offered);
  gst_caps_unref (good);
  gst_caps_unref (bad);
  gst_caps_unref (unnamed);
  gst_object_unref (sink);
  gst_harness_teardown (h);

  /* link time: both in READY (models loaded) */
  g_autofree char *a = llm_test_data_path (STORIES656);
  g_autofree char *b = llm_test_data_path (STORIES);
  GstElement *tokenize = gst_element_factory_make ("llmtokenize", NULL);
  GstElement *detok_other = gst_element_factory_make ("llmdetokenize", NULL);
  GstElement *detok_same = gst_element_factory_make ("llmdetokenize", NULL);
  g_object_set (tokenize, "model", a, NULL);
  g_object_set (detok_other, "model", b, NULL);
  g_object_set (detok_same, "model", a, NULL);
  ck_assert_int_eq (gst_element_set_state (tokenize, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  ck_assert_int_eq (gst_element_set_state (detok_other, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  ck_assert_int_eq (gst_element_set_state (detok_same, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  GstPad *src = gst_element_get_static_pad (tokenize, "src");
  GstPad *other_sink = gst_element_get_static_pad (detok_other, "sink");
  GstPad *same_sink = gst_element_get_static_pad (detok_same, "sink");
  ck_assert_int_eq (gst_pad_link (src, other_sink), GST_PAD_LINK_NOFORMAT);
  ck_assert_int_eq (gst_pad_link (src, same_sink), GST_PAD_LINK_OK);
  gst_pad_unlink (src, same_sink);
  gst_object_unref (src);
  gst_object_unref (other_sink);
  gst_object_unref (same_sink);
  gst_element_set_state (tokenize, GST_STATE_NULL);
  gst_element_set_state (detok_other, GST_STATE_NULL);
  gst_element_set_state (detok_same, GST_STATE_NULL);
  gst_object_unref (tokenize);
  gst_object_unref (detok_other);
  gst_object_unref (detok_same);
}
END_TEST

/* Linked before the models load (as gst-launch does), the pipeline fails
 * at negotiation with an error that names both vocabularies; with or
 * without caps from the source. */
START_TEST (test_vocab_mismatch_in_a_pipeline_is_a_negotiation_error)
{
  g_autofree char *a = llm_test_data_path (STORIES656);
  g_autofree char *b = llm_test_data_path (STORIES);
  g_autofree char *text = llm_test_data_path ("multilingual.txt");
  g_autoptr (LlmTokenizer) ta = open_tokenizer (STORIES656);
  g_autoptr (LlmTokenizer) tb = open_tokenizer (STORIES);
  const char *caps_variants[] = { "", "! text/x-raw,format=utf8 " };

  for (guint v = 0; v < G_N_ELEMENTS (caps_variants); v++) {
    g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" %s! llmtokenize model=\"%s\" "
        "! llmdetokenize model=\"%s\" ! fakesink", text, caps_variants[v], a, b);
    GError *error = NULL;
    GstElement *pipeline = gst_parse_launch (desc, &error);
    ck_assert_msg (pipeline != NULL, "%s", error ? error->message : "");
    GstBus *bus = gst_element_get_bus (pipeline);
    gst_element_set_state (pipeline, GST_STATE_PLAYING);
    GstMessage *msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND,
        GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
    ck_assert_msg (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR, "%s: no error", desc);
    gst_message_parse_error (msg, &error, NULL);
    ck_assert_msg (g_error_matches (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION),
        "%s: %s", desc, error->message);
    ck_assert (strstr (error->message, llm_tokenizer_vocab (ta)->hash) != NULL);
    ck_assert (strstr (error->message, llm_tokenizer_vocab (tb)->hash) != NULL);
    g_error_free (error);
    gst_message_unref (msg);
    gst_element_set_state (pipeline, GST_STATE_NULL);
    gst_object_unref (bus);
    gst_object_unref (pipeline);
  }
}
END_TEST

START_TEST (test_detokenize_missing_model_fails_with_not_found)
{
  assert_load_error ("llmdetokenize", "/nonexistent/dir/model.gguf", GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_NOT_FOUND, "does not exist");
}
END_TEST

static Suite *
elements_suite (void)
{
  Suite *s = suite_create ("elements");

  gst_init (NULL, NULL);

  TCase *caps = tcase_create ("caps");
  tcase_add_test (caps, test_caps_tokens_carry_the_vocab_hash);
  tcase_add_test (caps, test_caps_token_payload_is_little_endian_int32);
  tcase_add_test (caps, test_caps_prompt_and_response_events);
  suite_add_tcase (s, caps);

  TCase *tok = tcase_create ("llmtokenize");
  tcase_set_timeout (tok, 300);
  tcase_add_test (tok, test_tokenize_once_upon_a_time_gives_known_ids);
  tcase_add_test (tok, test_tokenize_output_caps_name_the_vocabulary);
  tcase_add_loop_test (tok, test_tokenize_split_at_every_byte_gives_whole_text_ids, 0,
      G_N_ELEMENTS (all_vocabs));
  tcase_add_loop_test (tok, test_tokenize_vocab_test_texts_in_small_buffers, 0,
      G_N_ELEMENTS (all_vocabs));
  tcase_add_test (tok, test_tokenize_output_keeps_input_timing);
  tcase_add_test (tok, test_tokenize_held_word_keeps_the_pts_it_began_at);
  tcase_add_test (tok, test_tokenize_bos_only_at_prompt_start);
  tcase_add_test (tok, test_tokenize_add_bos_overrides_the_file);
  tcase_add_test (tok, test_tokenize_parse_special);
  tcase_add_test (tok, test_tokenize_flush_drops_held_text_and_starts_a_prompt);
  tcase_add_test (tok, test_tokenize_bounds_held_text);
  tcase_add_test (tok, test_tokenize_missing_model_fails_with_not_found);
  tcase_add_test (tok, test_tokenize_malformed_model_fails_naming_the_file);
  tcase_add_test (tok, test_tokenize_gguf_without_tokenizer_fails_saying_so);
  tcase_add_test (tok, test_tokenize_non_utf8_in_a_model_reaches_the_bus_escaped);
  suite_add_tcase (s, tok);

  TCase *detok = tcase_create ("llmdetokenize");
  tcase_set_timeout (detok, 120);
  tcase_add_test (detok, test_detokenize_once_upon_a_time);
  tcase_add_test (detok, test_detokenize_output_keeps_input_timing);
  tcase_add_test (detok, test_detokenize_holds_partial_utf8_until_complete);
  tcase_add_test (detok, test_detokenize_flushes_partial_utf8_at_eos_and_end_of_response);
  tcase_add_test (detok, test_detokenize_strips_the_space_after_bos_only);
  tcase_add_test (detok, test_detokenize_skip_special);
  tcase_add_test (detok, test_detokenize_flush_drops_held_bytes);
  tcase_add_test (detok, test_detokenize_bad_input_is_an_error_not_a_crash);
  tcase_add_test (detok, test_detokenize_refuses_other_vocab_at_negotiation);
  tcase_add_test (detok, test_vocab_mismatch_in_a_pipeline_is_a_negotiation_error);
  tcase_add_test (detok, test_detokenize_missing_model_fails_with_not_found);
  suite_add_tcase (s, detok);

  return s;
}

LLM_TEST_MAIN (elements_suite)
