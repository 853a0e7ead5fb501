/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tokenizer against llama.cpp: its own tokenizer test tables for six
 * vocabularies, the prompts of the golden runs on two real models, the
 * detokenizer facts the streaming elements rely on, and hostile input. */
#include <string.h>

#include "llm-check.h"
#include "tokenizer.h"

/* ---- helpers ------------------------------------------------------------ */

static LlmTokenizer *
open_tokenizer (const char *relative)
{
  g_autofree char *path = llm_test_data_path (relative);
  GError *error = NULL;
  LlmTokenizer *tok = llm_tokenizer_new_from_file (path, &error);
  ck_assert_msg (tok != NULL, "%s: %s", relative, error ? error->message : "no error set");
  return tok;
}

static GArray *
encode (const LlmTokenizer *tok, const char *text, gssize len, gboolean add_special)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (tok, text, len, add_special, TRUE, TRUE, ids);
  return ids;
}

/* As llama.cpp's common_detokenize(special = true) on ids from a text
 * tokenized without BOS: nothing removed, the SPM space prefix stripped. */
static GString *
decode (const LlmTokenizer *tok, const GArray *ids)
{
  GString *out = g_string_new (NULL);
  llm_tokenizer_decode (tok, (const gint32 *) (const void *) ids->data, ids->len, FALSE, TRUE,
      TRUE, out);
  return out;
}

static char *
ids_to_string (const gint32 *ids, gsize n)
{
  GString *s = g_string_new ("[");
  for (gsize i = 0; i < n; i++)
    g_string_append_printf (s, "%s%d", i ? ", " : "", ids[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static gboolean
ids_equal (const GArray *got, const gint32 *expected, gsize n)
{
  return got->len == n && (n == 0 || memcmp (got->data, expected, n * sizeof (gint32)) == 0);
}

static void
assert_ids (const GArray *got, const gint32 *expected, gsize n, const char *what)
{
  if (ids_equal (got, expected, n))
    return;
  g_autofree char *e = ids_to_string (expected, n);
  g_autofree char *g = ids_to_string ((const gint32 *) (const void *) got->data, got->len);
  ck_abort_msg ("%s:\n  expected %s\n  got      %s", what, e, g);
}

static gboolean
bytes_equal (const GString *got, const char *expected, gsize len)
{
  return got->len == len && memcmp (got->str, expected, len) == 0;
}

/* ---- llama.cpp's test-tokenizer-0 tables -------------------------------- */

#define N_VOCAB_CASES 46

typedef struct {
  GPtrArray *texts;     /* GBytes, one per case */
  GPtrArray *expected;  /* GArray of gint32, one per case */
} VocabCases;

/* Texts are separated by "\n__ggml_vocab_test__\n" exactly as
 * test-tokenizer-0 splits them: the first text starts at byte 0, and the
 * separator after the last text ends the file without adding an empty case.
 * (test-tokenizer-0 keys its cases by text in a std::map; the 46 texts are
 * distinct, so checking them in file order covers the same cases.) */
static GPtrArray *
split_inputs (GBytes *raw)
{
  static const char sep[] = "\n__ggml_vocab_test__\n";
  const gsize sep_len = sizeof sep - 1;
  gsize size;
  const char *data = g_bytes_get_data (raw, &size);
  GPtrArray *texts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);

  gsize pos = 0;
  while (pos < size) {
    const char *next = memmem (data + pos, size - pos, sep, sep_len);
    if (next == NULL) {
      g_ptr_array_add (texts, g_bytes_new_from_bytes (raw, pos, size - pos));
      break;
    }
    gsize end = (gsize) (next - data);
    g_ptr_array_add (texts, g_bytes_new_from_bytes (raw, pos, end - pos));
    pos = end + sep_len;
  }
  return texts;
}

/* One line of space-separated ids per case, read like std::getline (a final
 * newline does not start another line) and trimmed like string_strip. */
static GPtrArray *
split_outputs (GBytes *raw)
{
  gsize size;
  const char *data = g_bytes_get_data (raw, &size);
  g_autofree char *text = g_strndup (data, size);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  guint n_lines = g_strv_length (lines);
  if (n_lines > 0 && lines[n_lines - 1][0] == '\0')
    n_lines--;

  GPtrArray *all = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  for (guint i = 0; i < n_lines; i++) {
    GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
    g_auto (GStrv) fields = g_strsplit (g_strstrip (lines[i]), " ", -1);
    for (char **f = fields; *f != NULL; f++) {
      if (**f == '\0')
        continue;
      char *end;
      gint64 id = g_ascii_strtoll (*f, &end, 10);
      ck_assert_msg (*end == '\0', "bad id '%s' on line %u", *f, i + 1);
      gint32 id32 = (gint32) id;
      g_array_append_val (ids, id32);
    }
    g_ptr_array_add (all, ids);
  }
  return all;
}

static VocabCases
read_vocab_cases (const char *name)
{
  g_autofree char *inp_rel = g_strdup_printf ("vocab/ggml-vocab-%s.gguf.inp", name);
  g_autofree char *out_rel = g_strdup_printf ("vocab/ggml-vocab-%s.gguf.out", name);
  g_autofree char *inp_path = llm_test_data_path (inp_rel);
  g_autofree char *out_path = llm_test_data_path (out_rel);
  g_autoptr (GBytes) inp = llm_test_read_file (inp_path);
  g_autoptr (GBytes) out = llm_test_read_file (out_path);

  VocabCases c = { split_inputs (inp), split_outputs (out) };
  ck_assert_msg (c.texts->len == c.expected->len, "%s: %u texts but %u id lines", name,
      c.texts->len, c.expected->len);
  ck_assert_msg (c.texts->len == N_VOCAB_CASES, "%s: %u cases, expected %d", name,
      c.texts->len, N_VOCAB_CASES);
  return c;
}

/* gpt-2 and llama3 vocabularies have clean_up_tokenization_spaces, so
 * llama_detokenize drops the space in " ?" of these two cases and does not
 * give back the text it was given. */
static gboolean
llama_cpp_cleans_spaces (const char *name, guint index)
{
  return (g_str_equal (name, "gpt-2") || g_str_equal (name, "llama-bpe")) &&
      (index == 32 || index == 45);
}

/* The text with its one " ?" turned into "?", as llama.cpp returns it. */
static char *
clean_question_mark (const char *text, gsize len)
{
  GString *s = g_string_new_len (text, len);
  const char *at = strstr (s->str, " ?");
  if (at != NULL)
    g_string_erase (s, at - s->str, 1);
  return g_string_free (s, FALSE);
}

/* Check limits the size of a failure message, so the details of every
 * failing case go to stderr and the assertion names the cases. */
static void
check_vocab_matches_llama_cpp (const char *name)
{
  g_autofree char *rel = g_strdup_printf ("vocab/ggml-vocab-%s.gguf", name);
  g_autoptr (LlmTokenizer) tok = open_tokenizer (rel);
  VocabCases c = read_vocab_cases (name);
  g_autoptr (GString) failed = g_string_new (NULL);
  guint n_failed = 0;

  for (guint i = 0; i < c.texts->len; i++) {
    gsize len;
    const char *text = g_bytes_get_data (c.texts->pdata[i], &len);
    const GArray *expected = c.expected->pdata[i];
    g_autoptr (GArray) ids = encode (tok, text, (gssize) len, FALSE);
    g_autofree char *raw = g_strndup (text, len);
    g_autofree char *shown = g_strescape (raw, NULL);
    gboolean ok = ids_equal (ids, (const gint32 *) (const void *) expected->data, expected->len);

    if (!ok) {
      g_autofree char *e = ids_to_string ((const gint32 *) (const void *) expected->data,
          expected->len);
      g_autofree char *g = ids_to_string ((const gint32 *) (const void *) ids->data, ids->len);
      g_printerr ("%s case %u \"%s\"\n  expected %s\n  got      %s\n", name, i, shown, e, g);
    } else {
      g_autoptr (GString) back = decode (tok, ids);
      ok = bytes_equal (back, text, len);
      if (!ok && llama_cpp_cleans_spaces (name, i)) {
        g_autofree char *cleaned = clean_question_mark (text, len);
        ok = bytes_equal (back, cleaned, strlen (cleaned));
      }
      if (!ok) {
        g_autofree char *b = g_strescape (back->str, NULL);
        g_printerr ("%s case %u \"%s\"\n  decodes to \"%s\"\n", name, i, shown, b);
      }
    }
    if (!ok) {
      g_string_append_printf (failed, "%s%u", n_failed ? " " : "", i);
      n_failed++;
    }
  }

  g_ptr_array_unref (c.texts);
  g_ptr_array_unref (c.expected);
  ck_assert_msg (n_failed == 0, "%s: %u of %d cases differ from llama.cpp: %s", name, n_failed,
      N_VOCAB_CASES, failed->str);
}

START_TEST (test_llama_spm_vocab_matches_llama_cpp)
{
  check_vocab_matches_llama_cpp ("llama-spm");
}
END_TEST

START_TEST (test_phi3_vocab_matches_llama_cpp)
{
  check_vocab_matches_llama_cpp ("phi-3");
}
END_TEST

START_TEST (test_llama_bpe_vocab_matches_llama_cpp)
{
  check_vocab_matches_llama_cpp ("llama-bpe");
}
END_TEST

START_TEST (test_qwen2_vocab_matches_llama_cpp)
{
  check_vocab_matches_llama_cpp ("qwen2");
}
END_TEST

START_TEST (test_gpt2_vocab_matches_llama_cpp)
{
  check_vocab_matches_llama_cpp ("gpt-2");
}
END_TEST

START_TEST (test_deepseek_llm_vocab_matches_llama_cpp)
{
  check_vocab_matches_llama_cpp ("deepseek-llm");
}
END_TEST

/* ---- real models: the golden runs' prompts and continuations ------------ */

/* From shared/testdata/golden/stories260K__once_upon_a_time.json. */
static const gint32 stories260k_greedy[] = {
  432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
  410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394,
  261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432,
  398, 312, 286, 267, 414, 270, 333, 415, 426, 13, 438, 310, 439, 419, 357, 336,
};
static const char stories260k_greedy_text[] =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, "
    "she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said";

/* From shared/testdata/golden/TinyStories-656K-Q8_0__once_upon_a_time.json. */
static const gint32 tinystories_greedy[] = {
  313, 598, 303, 1049, 1468, 267, 628, 333, 921, 887, 628, 1423, 1416, 251, 1393, 822,
  615, 242, 489, 632, 673, 2036, 1051, 652, 759, 694, 262, 694, 77, 1380, 265, 711,
  311, 333, 108, 2036, 98, 1469, 1858, 204, 1748, 369, 266, 2012, 1611, 167, 284, 320,
  864, 71, 336, 303, 1152, 163, 1023, 2036, 628, 333, 228, 864, 301, 204, 1803, 94,
};
static const char tinystories_greedy_text[] =
    ", a little girl named Lily lived in a small house with her mom. Lily loved to play with "
    "her toys and read her favorite book. One day, she found a big, round book in her room. "
    "It was shiny and shiny.\nLily wanted to show her mom the book to her mom. Her mom said, "
    "\"Lily, can you help me clean it with my hands.\" Lily was very happy. She took the book "
    "with her mom's hands and said, \"Okay, ";

START_TEST (test_stories260k_prompt_matches_llama_cpp)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("models/stories260K.gguf");
  static const gint32 once[] = { 1, 403, 407, 261, 378 };
  static const gint32 cat[] = { 1, 291, 280, 294 };

  g_autoptr (GArray) a = encode (tok, "Once upon a time", -1, TRUE);
  assert_ids (a, once, G_N_ELEMENTS (once), "stories260K \"Once upon a time\"");
  g_autoptr (GArray) b = encode (tok, "The cat", -1, TRUE);
  assert_ids (b, cat, G_N_ELEMENTS (cat), "stories260K \"The cat\"");
}
END_TEST

/* Every score in this vocabulary is -1000, so each merge is a tie and only
 * llama.cpp's leftmost-first rule gives "▁", "On", "ce▁", "upon▁a▁tim", "e". */
START_TEST (test_tinystories_all_tie_prompt_matches_llama_cpp)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("models/TinyStories-656K-Q8_0.gguf");
  static const gint32 once[] = { 1, 80, 147, 201, 282, 57 };
  static const gint32 cat[] = { 1, 80, 247, 476 };

  g_autoptr (GArray) a = encode (tok, "Once upon a time", -1, TRUE);
  assert_ids (a, once, G_N_ELEMENTS (once), "TinyStories-656K \"Once upon a time\"");
  g_autoptr (GArray) b = encode (tok, "The cat", -1, TRUE);
  assert_ids (b, cat, G_N_ELEMENTS (cat), "TinyStories-656K \"The cat\"");
}
END_TEST

static void
check_golden_text (const char *model, const gint32 *prompt, gsize n_prompt,
    const gint32 *greedy, gsize n_greedy, const char *greedy_text)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer (model);

  /* greedy_text: the pieces of the continuation, concatenated. */
  g_autoptr (GString) pieces = g_string_new (NULL);
  for (gsize i = 0; i < n_greedy; i++)
    llm_tokenizer_token_to_piece (tok, greedy[i], FALSE, pieces);
  ck_assert_str_eq (pieces->str, greedy_text);

  /* full_text_detok: llama_detokenize (remove_special = false) of prompt and
   * continuation. The space prefix is only stripped from the first token,
   * which is BOS and renders as nothing, so " Once" keeps its space. */
  g_autoptr (GArray) all = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_array_append_vals (all, prompt, n_prompt);
  g_array_append_vals (all, greedy, n_greedy);
  g_autoptr (GString) full = g_string_new (NULL);
  llm_tokenizer_decode (tok, (const gint32 *) (const void *) all->data, all->len, FALSE, FALSE,
      TRUE, full);
  g_autofree char *expected = g_strconcat (" Once upon a time", greedy_text, NULL);
  ck_assert_str_eq (full->str, expected);

  /* With BOS removed llama.cpp keeps the space too. */
  g_string_truncate (full, 0);
  llm_tokenizer_decode (tok, (const gint32 *) (const void *) all->data, all->len, TRUE, FALSE,
      TRUE, full);
  ck_assert_str_eq (full->str, expected);
}

START_TEST (test_stories260k_golden_continuation_decodes)
{
  static const gint32 once[] = { 1, 403, 407, 261, 378 };
  check_golden_text ("models/stories260K.gguf", once, G_N_ELEMENTS (once), stories260k_greedy,
      G_N_ELEMENTS (stories260k_greedy), stories260k_greedy_text);
}
END_TEST

START_TEST (test_tinystories_golden_continuation_decodes)
{
  static const gint32 once[] = { 1, 80, 147, 201, 282, 57 };
  check_golden_text ("models/TinyStories-656K-Q8_0.gguf", once, G_N_ELEMENTS (once),
      tinystories_greedy, G_N_ELEMENTS (tinystories_greedy), tinystories_greedy_text);
}
END_TEST

/* ---- streaming detokenization ------------------------------------------- */

START_TEST (test_byte_token_piece_is_the_raw_byte)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("vocab/ggml-vocab-llama-spm.gguf");
  const LlmVocab *v = llm_tokenizer_vocab (tok);

  for (int b = 0; b < 256; b++) {
    gint32 id = v->byte_token[b];
    ck_assert_msg (id == b + 3, "<0x%02X> is id %d, expected %d", b, id, b + 3);
    g_autoptr (GString) piece = g_string_new (NULL);
    gsize n = llm_tokenizer_token_to_piece (tok, id, FALSE, piece);
    ck_assert_msg (n == 1 && piece->len == 1 && (guint8) piece->str[0] == b,
        "<0x%02X> renders as %zu bytes", b, n);
  }
}
END_TEST

/* The elements stream one piece per token: a character split over byte
 * tokens arrives in single invalid bytes that only concatenation repairs. */
START_TEST (test_emoji_byte_pieces_reassemble_exact_utf8)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("vocab/ggml-vocab-llama-spm.gguf");
  static const char llama[] = "\xf0\x9f\xa6\x99";  /* U+1F999 LLAMA, no token of its own */
  static const gint32 expected[] = { 29871, 243, 162, 169, 156 };

  g_autoptr (GArray) ids = encode (tok, llama, -1, FALSE);
  assert_ids (ids, expected, G_N_ELEMENTS (expected), "llama emoji");

  g_autoptr (GString) stream = g_string_new (NULL);
  for (guint i = 0; i < ids->len; i++) {
    gsize before = stream->len;
    gsize n = llm_tokenizer_token_to_piece (tok, g_array_index (ids, gint32, i), FALSE, stream);
    ck_assert_uint_eq (n, stream->len - before);
    if (i > 0) {
      ck_assert_uint_eq (n, 1);
      ck_assert_int_eq ((guint8) stream->str[before], (guint8) llama[i - 1]);
    }
  }
  ck_assert_str_eq (stream->str, " \xf0\x9f\xa6\x99");
  ck_assert (g_utf8_validate (stream->str, stream->len, NULL));
}
END_TEST

START_TEST (test_emoji_zwj_sequence_reassembles_in_every_vocab)
{
  static const char *const vocabs[] = {
    "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
    "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf",
    "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
  };
  /* Family (ZWJ sequence), rainbow flag (VS16 + ZWJ), two regional-indicator flags. */
  static const char text[] =
      "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7\xe2\x80\x8d"
      "\xf0\x9f\x91\xa6 \xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88 "
      "\xf0\x9f\x87\xaf\xf0\x9f\x87\xb5\xf0\x9f\x87\xab\xf0\x9f\x87\xb7";

  for (guint k = 0; k < G_N_ELEMENTS (vocabs); k++) {
    g_autoptr (LlmTokenizer) tok = open_tokenizer (vocabs[k]);
    gboolean spm = llm_tokenizer_vocab (tok)->add_space_prefix;
    g_autoptr (GArray) ids = encode (tok, text, -1, FALSE);
    g_autoptr (GString) stream = g_string_new (NULL);
    for (guint i = 0; i < ids->len; i++)
      llm_tokenizer_token_to_piece (tok, g_array_index (ids, gint32, i), FALSE, stream);
    g_autofree char *expected = g_strconcat (spm ? " " : "", text, NULL);
    ck_assert_msg (g_str_equal (stream->str, expected), "%s: pieces give \"%s\"", vocabs[k],
        stream->str);
  }
}
END_TEST

START_TEST (test_control_tokens_render_only_when_special)
{
  g_autoptr (LlmTokenizer) spm = open_tokenizer ("vocab/ggml-vocab-llama-spm.gguf");
  g_autoptr (GString) out = g_string_new (NULL);

  ck_assert_uint_eq (llm_tokenizer_token_to_piece (spm, 1, FALSE, out), 0);   /* <s> */
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (spm, 2, FALSE, out), 0);   /* </s> */
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (spm, 0, FALSE, out), 0);   /* <unk> */
  ck_assert_uint_eq (out->len, 0);
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (spm, 1, TRUE, out), 3);
  ck_assert_str_eq (out->str, "<s>");

  g_autoptr (LlmTokenizer) ts = open_tokenizer ("models/TinyStories-656K-Q8_0.gguf");
  g_string_truncate (out, 0);
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (ts, 1, FALSE, out), 0);
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (ts, 1, TRUE, out), 15);
  ck_assert_str_eq (out->str, "<|start_story|>");

  /* Out of range ids render as nothing rather than reading past the table. */
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (spm, -1, TRUE, out), 0);
  ck_assert_uint_eq (llm_tokenizer_token_to_piece (spm, 32000, TRUE, out), 0);
}
END_TEST

/* llama.cpp's parse_special: the literal text of a control token is that
 * token, and the text after it gets the SPM space prefix again. */
START_TEST (test_spm_special_token_text_becomes_its_id)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("vocab/ggml-vocab-llama-spm.gguf");
  static const gint32 parsed[] = { 15043, 29871, 1, 29871, 3186 };
  static const gint32 literal[] = { 15043, 529, 29879, 29958, 3186 };

  g_autoptr (GArray) a = encode (tok, "Hello <s> world", -1, FALSE);
  assert_ids (a, parsed, G_N_ELEMENTS (parsed), "\"Hello <s> world\" parse_special");

  g_autoptr (GArray) b = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (tok, "Hello <s> world", -1, FALSE, FALSE, TRUE, b);
  assert_ids (b, literal, G_N_ELEMENTS (literal), "\"Hello <s> world\" literal");
}
END_TEST

/* ---- hostile input ------------------------------------------------------- */

typedef struct {
  const char *text;
  gsize len;
} Raw;

#define RAW(s) { s, sizeof (s) - 1 }

static const Raw bad_inputs[] = {
  RAW ("\xf0"),                             /* lone lead byte, the whole text */
  RAW ("abc\xf0"),                          /* lone lead byte at the end */
  RAW ("\xf0" "abc"),                       /* lead byte swallowing ASCII */
  RAW ("\xf0\x9f\x98"),                     /* truncated emoji */
  RAW ("\xe2\x96"),                         /* truncated U+2581 */
  RAW ("a\0b\0\0c"),                        /* NUL bytes in the middle */
  RAW ("\0"),
  RAW ("\xff\xfe\xfd\xfc invalid \x80\x80\xbf"),
  RAW ("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80"),  /* overlong, surrogate, > U+10FFFF */
  RAW ("x\xc3"),
  RAW ("\xe6\x88\xe6"),
  RAW ("<s\0>"),
};

static void
check_bad_input (const char *model, gboolean round_trips)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer (model);
  const LlmVocab *v = llm_tokenizer_vocab (tok);

  for (guint i = 0; i < G_N_ELEMENTS (bad_inputs); i++) {
    const Raw *r = &bad_inputs[i];
    g_autoptr (GArray) ids = encode (tok, r->text, (gssize) r->len, FALSE);
    for (guint k = 0; k < ids->len; k++) {
      gint32 id = g_array_index (ids, gint32, k);
      ck_assert_msg (id >= 0 && (guint32) id < v->n_tokens, "%s: input %u gave id %d", model, i,
          id);
    }
    g_autoptr (GString) back = decode (tok, ids);
    if (round_trips)
      ck_assert_msg (bytes_equal (back, r->text, r->len),
          "%s: input %u does not survive encode and decode (%zu bytes back of %zu)", model, i,
          back->len, r->len);
  }
}

START_TEST (test_spm_bad_utf8_round_trips_through_bytes)
{
  check_bad_input ("vocab/ggml-vocab-llama-spm.gguf", TRUE);
  check_bad_input ("vocab/ggml-vocab-phi-3.gguf", TRUE);
  check_bad_input ("models/stories260K.gguf", TRUE);
}
END_TEST

START_TEST (test_bpe_bad_utf8_does_not_crash)
{
  check_bad_input ("vocab/ggml-vocab-llama-bpe.gguf", FALSE);
  check_bad_input ("vocab/ggml-vocab-qwen2.gguf", FALSE);
  check_bad_input ("vocab/ggml-vocab-gpt-2.gguf", FALSE);
  check_bad_input ("vocab/ggml-vocab-deepseek-llm.gguf", FALSE);
}
END_TEST

/* llama.cpp cuts symbols by the lead byte's length alone, so 0xF0 takes the
 * three ASCII letters after it and all four fall back to byte tokens. */
START_TEST (test_spm_invalid_utf8_is_cut_like_llama_cpp)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("vocab/ggml-vocab-llama-spm.gguf");
  static const gint32 swallow[] = { 29871, 243, 100, 101, 102 };
  static const gint32 at_end[] = { 25638, 243 };
  static const gint32 nul[] = { 263, 3, 29890 };
  static const gint32 half_marker[] = { 29871, 229, 153 };

  g_autoptr (GArray) a = encode (tok, "\xf0" "abc", 4, FALSE);
  assert_ids (a, swallow, G_N_ELEMENTS (swallow), "\\xf0abc");
  g_autoptr (GArray) b = encode (tok, "abc\xf0", 4, FALSE);
  assert_ids (b, at_end, G_N_ELEMENTS (at_end), "abc\\xf0");
  g_autoptr (GArray) c = encode (tok, "a\0b", 3, FALSE);
  assert_ids (c, nul, G_N_ELEMENTS (nul), "a\\0b");
  g_autoptr (GArray) d = encode (tok, "\xe2\x96", 2, FALSE);
  assert_ids (d, half_marker, G_N_ELEMENTS (half_marker), "\\xe2\\x96");
}
END_TEST

/* The one place llama.cpp's SPM path loses bytes: spaces are replaced by
 * U+2581 before the text is cut into symbols, so a truncated sequence
 * followed by a space swallows part or all of the marker, which then falls
 * back to byte tokens and decodes as U+2581 instead of a space. */
START_TEST (test_spm_truncated_sequence_swallows_following_space)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("vocab/ggml-vocab-llama-spm.gguf");
  static const gint32 whole[] = { 29871, 243, 229, 153, 132, 29874 };
  static const gint32 part[] = { 29871, 233, 139, 229, 153, 132, 233 };

  g_autoptr (GArray) a = encode (tok, "\xf0 a", -1, FALSE);
  assert_ids (a, whole, G_N_ELEMENTS (whole), "\\xf0 a");
  g_autoptr (GString) da = decode (tok, a);
  ck_assert_str_eq (da->str, "\xf0\xe2\x96\x81" "a");

  g_autoptr (GArray) b = encode (tok, "\xe6\x88 \xe6", -1, FALSE);
  assert_ids (b, part, G_N_ELEMENTS (part), "\\xe6\\x88 \\xe6");
  g_autoptr (GString) db = decode (tok, b);
  ck_assert_str_eq (db->str, "\xe6\x88\xe2\x96\x81\xe6");
}
END_TEST

/* A vocabulary without byte tokens has no way to spell "é": llama.cpp
 * aborts there, we give <unk> for each byte. */
START_TEST (test_spm_without_byte_tokens_uses_unk)
{
  g_autoptr (LlmTokenizer) tok = open_tokenizer ("models/TinyStories-656K-Q8_0.gguf");
  static const gint32 expected[] = { 80, 295, 58, 0, 0 };

  g_autoptr (GArray) ids = encode (tok, "caf\xc3\xa9", -1, FALSE);
  assert_ids (ids, expected, G_N_ELEMENTS (expected), "caf\\xc3\\xa9 in TinyStories-656K");
  check_bad_input ("models/TinyStories-656K-Q8_0.gguf", FALSE);
}
END_TEST

/* ---- multilingual text ---------------------------------------------------- */

START_TEST (test_multilingual_text_round_trips)
{
  static const char *const vocabs[] = {
    "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
    "models/stories260K.gguf", "vocab/ggml-vocab-llama-bpe.gguf",
    "vocab/ggml-vocab-qwen2.gguf", "vocab/ggml-vocab-gpt-2.gguf",
    "vocab/ggml-vocab-deepseek-llm.gguf",
  };
  g_autofree char *path = llm_test_data_path ("multilingual.txt");
  g_autoptr (GBytes) file = llm_test_read_file (path);
  gsize len;
  const char *text = g_bytes_get_data (file, &len);
  ck_assert (g_utf8_validate (text, (gssize) len, NULL));

  for (guint k = 0; k < G_N_ELEMENTS (vocabs); k++) {
    g_autoptr (LlmTokenizer) tok = open_tokenizer (vocabs[k]);
    g_autoptr (GArray) ids = encode (tok, text, (gssize) len, FALSE);
    ck_assert_msg (ids->len > 0 && ids->len < len, "%s: %u tokens for %zu bytes", vocabs[k],
        ids->len, len);
    g_autoptr (GString) back = decode (tok, ids);
    if (!bytes_equal (back, text, len))
      g_printerr ("%s: multilingual.txt decodes to\n%s\n", vocabs[k], back->str);
    ck_assert_msg (bytes_equal (back, text, len), "%s: multilingual.txt does not round-trip",
        vocabs[k]);
  }
}
END_TEST

/* ---- no quadratic blow-up ------------------------------------------------- */

#define VALGRIND_SLOWDOWN 50

static gboolean
under_valgrind (void)
{
  const char *preload = g_getenv ("LD_PRELOAD");
  return preload != NULL && strstr (preload, "vgpreload") != NULL;
}

static void
check_repeated_char_is_fast (const char *model, char c)
{
  const gsize n = 200 * 1024;
  g_autoptr (LlmTokenizer) tok = open_tokenizer (model);
  char *text = g_malloc (n);
  memset (text, c, n);

  gint64 start = g_get_monotonic_time ();
  g_autoptr (GArray) ids = encode (tok, text, (gssize) n, FALSE);
  gint64 us = g_get_monotonic_time () - start;
  g_free (text);

  /* n log n takes tens of milliseconds here; quadratic would take minutes. */
  gint64 limit = G_USEC_PER_SEC * (under_valgrind () ? VALGRIND_SLOWDOWN : 1);
  ck_assert_msg (us < limit, "%s: 200 KB of '%c' took %.1f ms", model, c, us / 1000.0);
  ck_assert_uint_gt (ids->len, 0);
}

START_TEST (test_spm_long_repeated_char_is_not_quadratic)
{
  check_repeated_char_is_fast ("vocab/ggml-vocab-llama-spm.gguf", 'a');
  check_repeated_char_is_fast ("vocab/ggml-vocab-llama-spm.gguf", ' ');
  /* All scores tie here, the case a careless tie-break makes slow. */
  check_repeated_char_is_fast ("models/TinyStories-656K-Q8_0.gguf", 'a');
}
END_TEST

START_TEST (test_bpe_long_repeated_char_is_not_quadratic)
{
  check_repeated_char_is_fast ("vocab/ggml-vocab-llama-bpe.gguf", 'a');
  check_repeated_char_is_fast ("vocab/ggml-vocab-gpt-2.gguf", ' ');
}
END_TEST

static Suite *
tokenizer_suite (void)
{
  Suite *s = suite_create ("tokenizer");

  TCase *tables = tcase_create ("llama.cpp tables");
  tcase_add_test (tables, test_llama_spm_vocab_matches_llama_cpp);
  tcase_add_test (tables, test_phi3_vocab_matches_llama_cpp);
  tcase_add_test (tables, test_llama_bpe_vocab_matches_llama_cpp);
  tcase_add_test (tables, test_qwen2_vocab_matches_llama_cpp);
  tcase_add_test (tables, test_gpt2_vocab_matches_llama_cpp);
  tcase_add_test (tables, test_deepseek_llm_vocab_matches_llama_cpp);
  suite_add_tcase (s, tables);

  TCase *models = tcase_create ("real models");
  tcase_add_test (models, test_stories260k_prompt_matches_llama_cpp);
  tcase_add_test (models, test_tinystories_all_tie_prompt_matches_llama_cpp);
  tcase_add_test (models, test_stories260k_golden_continuation_decodes);
  tcase_add_test (models, test_tinystories_golden_continuation_decodes);
  suite_add_tcase (s, models);

  TCase *stream = tcase_create ("streaming detokenization");
  tcase_add_test (stream, test_byte_token_piece_is_the_raw_byte);
  tcase_add_test (stream, test_emoji_byte_pieces_reassemble_exact_utf8);
  tcase_add_test (stream, test_emoji_zwj_sequence_reassembles_in_every_vocab);
  tcase_add_test (stream, test_control_tokens_render_only_when_special);
  tcase_add_test (stream, test_spm_special_token_text_becomes_its_id);
  suite_add_tcase (s, stream);

  TCase *bad = tcase_create ("bad input");
  tcase_add_test (bad, test_spm_bad_utf8_round_trips_through_bytes);
  tcase_add_test (bad, test_bpe_bad_utf8_does_not_crash);
  tcase_add_test (bad, test_spm_invalid_utf8_is_cut_like_llama_cpp);
  tcase_add_test (bad, test_spm_truncated_sequence_swallows_following_space);
  tcase_add_test (bad, test_spm_without_byte_tokens_uses_unk);
  tcase_add_test (bad, test_multilingual_text_round_trips);
  tcase_add_test (bad, test_spm_long_repeated_char_is_not_quadratic);
  tcase_add_test (bad, test_bpe_long_repeated_char_is_not_quadratic);
  suite_add_tcase (s, bad);

  return s;
}

LLM_TEST_MAIN (tokenizer_suite)
