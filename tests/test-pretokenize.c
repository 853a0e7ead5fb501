/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Byte-level BPE below the vocabulary files: UTF-8 decoding and codepoint
 * flags, the five pre-tokenizers' exact splits, and the merge rules on a
 * small vocabulary built here. Expected splits are what llama.cpp gives. */
#include <string.h>

#include "llm-check.h"
#include "gguf-writer.h"
#include "pretokenize.h"
#include "tokenizer.h"
#include "tokenizer-impl.h"
#include "unicode.h"

/* ---- UTF-8 and flags ---------------------------------------------------- */

/* Decodes @len bytes copied to a buffer of exactly that size, so valgrind
 * sees any read past the end. */
static GArray *
decode_all (const char *bytes, gsize len)
{
  g_autofree char *copy = g_memdup2 (bytes, len);
  gsize n;
  g_autofree guint32 *cpts = llm_utf8_to_cpts (copy, len, &n);
  GArray *out = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_array_append_vals (out, cpts, n);
  return out;
}

static void
assert_cpts (const char *bytes, gsize len, const guint32 *expected, gsize n)
{
  g_autoptr (GArray) got = decode_all (bytes, len);
  ck_assert_uint_eq (got->len, n);
  for (gsize i = 0; i < n; i++)
    ck_assert_msg (g_array_index (got, guint32, i) == expected[i],
        "codepoint %" G_GSIZE_FORMAT ": got U+%04X, expected U+%04X", i,
        g_array_index (got, guint32, i), expected[i]);
}

#define ASSERT_CPTS(bytes, ...) \
  do { \
    const guint32 e_[] = { __VA_ARGS__ }; \
    assert_cpts (bytes, sizeof (bytes) - 1, e_, G_N_ELEMENTS (e_)); \
  } while (0)

#define FFFD LLM_CPT_REPLACEMENT

START_TEST (test_utf8_decodes_valid_sequences)
{
  ASSERT_CPTS ("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\xa6\x99", 'a', 0xe9, 0x4e2d, 0x1f999);
  ASSERT_CPTS ("\x00x\x00", 0, 'x', 0);
}
END_TEST

START_TEST (test_utf8_invalid_bytes_become_replacement_one_byte_each)
{
  /* lone continuation bytes, bytes that never start a sequence */
  ASSERT_CPTS ("\x80\xbf", FFFD, FFFD);
  ASSERT_CPTS ("\xf8\xff" "a", FFFD, FFFD, 'a');
  /* a lead byte followed by a non-continuation: only the lead is invalid */
  ASSERT_CPTS ("\xc3" "a", FFFD, 'a');
  ASSERT_CPTS ("\xe4\xb8" "a", FFFD, FFFD, 'a');
  /* truncated at the end of the text */
  ASSERT_CPTS ("\xc3", FFFD);
  ASSERT_CPTS ("\xe4\xb8", FFFD, FFFD);
  ASSERT_CPTS ("\xf0\x9f\xa6", FFFD, FFFD, FFFD);
  /* above U+10FFFF: every byte invalid */
  ASSERT_CPTS ("\xf4\x90\x80\x80", FFFD, FFFD, FFFD, FFFD);
}
END_TEST

START_TEST (test_utf8_overlong_and_surrogates_decode_like_llama_cpp)
{
  ASSERT_CPTS ("\xc0\x80", 0);
  ASSERT_CPTS ("\xe0\x81\x81", 'A');
  ASSERT_CPTS ("\xed\xa0\x80", 0xd800);
}
END_TEST

START_TEST (test_utf8_encode_lengths)
{
  static const struct { guint32 cpt; guint len; const char *bytes; } cases[] = {
    { 0x00, 1, "\x00" }, { 0x7f, 1, "\x7f" }, { 0x80, 2, "\xc2\x80" },
    { 0x7ff, 2, "\xdf\xbf" }, { 0x800, 3, "\xe0\xa0\x80" }, { 0xffff, 3, "\xef\xbf\xbf" },
    { 0x10000, 4, "\xf0\x90\x80\x80" }, { 0x10ffff, 4, "\xf4\x8f\xbf\xbf" },
    { 0x110000, 3, "\xef\xbf\xbd" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    char buf[4];
    ck_assert_uint_eq (llm_utf8_encode (cases[i].cpt, buf), cases[i].len);
    ck_assert (memcmp (buf, cases[i].bytes, cases[i].len) == 0);
  }
}
END_TEST

START_TEST (test_unicode_flags_categories_and_whitespace)
{
  static const struct { guint32 cpt; guint16 flags; } cases[] = {
    { 'a', LLM_CPT_LETTER }, { 'Z', LLM_CPT_LETTER }, { '7', LLM_CPT_NUMBER },
    { '!', LLM_CPT_PUNCTUATION }, { '_', LLM_CPT_PUNCTUATION }, { '$', LLM_CPT_SYMBOL },
    { '`', LLM_CPT_SYMBOL }, { '~', LLM_CPT_SYMBOL },
    { ' ', LLM_CPT_SEPARATOR | LLM_CPT_WHITESPACE }, { '\t', LLM_CPT_CONTROL | LLM_CPT_WHITESPACE },
    { '\n', LLM_CPT_CONTROL | LLM_CPT_WHITESPACE }, { 0x0b, LLM_CPT_CONTROL | LLM_CPT_WHITESPACE },
    /* information separators: Python calls them spaces, White_Space does not */
    { 0x1c, LLM_CPT_CONTROL }, { 0x1f, LLM_CPT_CONTROL }, { 0x00, LLM_CPT_CONTROL },
    { 0x85, LLM_CPT_CONTROL | LLM_CPT_WHITESPACE }, { 0xa0, LLM_CPT_SEPARATOR | LLM_CPT_WHITESPACE },
    { 0x3000, LLM_CPT_SEPARATOR | LLM_CPT_WHITESPACE }, { 0x2028, LLM_CPT_SEPARATOR | LLM_CPT_WHITESPACE },
    { 0x200b, LLM_CPT_CONTROL }, { 0x4e2d, LLM_CPT_LETTER }, { 0xbd, LLM_CPT_NUMBER },
    { 0x2167, LLM_CPT_NUMBER }, { 0x301, LLM_CPT_MARK }, { 0x3002, LLM_CPT_PUNCTUATION },
    { 0x1f999, LLM_CPT_SYMBOL }, { 0xfffd, LLM_CPT_SYMBOL }, { 0x378, LLM_CPT_UNDEFINED },
    { 0xe000, LLM_CPT_CONTROL }, { 0xd800, LLM_CPT_CONTROL }, { 0x10ffff, LLM_CPT_UNDEFINED },
    { 0x110000, 0 }, { G_MAXUINT32, 0 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    ck_assert_msg (llm_unicode_flags (cases[i].cpt) == cases[i].flags,
        "U+%04X: flags 0x%x, expected 0x%x", cases[i].cpt, llm_unicode_flags (cases[i].cpt),
        cases[i].flags);
}
END_TEST

START_TEST (test_unicode_table_is_sorted_and_closed)
{
  ck_assert_uint_eq (llm_unicode_ranges[0].start, 0);
  for (guint i = 1; i < llm_unicode_n_ranges; i++)
    ck_assert (llm_unicode_ranges[i].start > llm_unicode_ranges[i - 1].start);
  ck_assert_uint_eq (llm_unicode_ranges[llm_unicode_n_ranges - 1].start, LLM_CPT_MAX + 1);
}
END_TEST

/* ---- pre-tokenizer splits ---------------------------------------------- */

typedef struct {
  LlmPreType pre;
  const char *text;
  gsize len;                   /* 0: strlen (text) */
  const char *const *words;    /* NULL-terminated */
} SplitCase;

#define W(...) ((const char *const[]) { __VA_ARGS__, NULL })
#define NONE ((const char *const[]) { NULL })

static char *
describe_words (char **words)
{
  GString *s = g_string_new ("[");
  for (gsize i = 0; words[i]; i++) {
    g_autofree char *e = g_strescape (words[i], NULL);
    g_string_append_printf (s, "%s\"%s\"", i ? ", " : "", e);
  }
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static void
check_splits (const SplitCase *cases, gsize n)
{
  for (gsize c = 0; c < n; c++) {
    gsize len = cases[c].len ? cases[c].len : strlen (cases[c].text);
    g_autofree char *copy = g_memdup2 (cases[c].text, len);
    g_auto (GStrv) got = llm_pretokenize_text (cases[c].pre, copy, len);
    gboolean same = g_strv_length (got) == g_strv_length ((GStrv) cases[c].words);
    for (gsize i = 0; same && got[i]; i++)
      same = strcmp (got[i], cases[c].words[i]) == 0;
    if (!same) {
      g_autofree char *e = describe_words ((GStrv) cases[c].words);
      g_autofree char *g = describe_words (got);
      g_autofree char *t = g_strescape (cases[c].text, NULL);
      ck_abort_msg ("pre %d, \"%s\":\n  expected %s\n  got      %s", cases[c].pre, t, e, g);
    }
  }
}

START_TEST (test_gpt2_splits)
{
  const SplitCase cases[] = {
    { LLM_PRE_GPT2, "Hello world", 0, W ("Hello", " world") },
    { LLM_PRE_GPT2, "I'm don't we'll they've she'd it's you're", 0,
      W ("I", "'m", " don", "'t", " we", "'ll", " they", "'ve", " she", "'d", " it", "'s", " you", "'re") },
    /* GPT-2's contractions are lower case only */
    { LLM_PRE_GPT2, "'S 'RE 'Ll", 0, W ("'", "S", " '", "RE", " '", "Ll") },
    { LLM_PRE_GPT2, "1 22 333 4444 55555", 0, W ("1", " 22", " 333", " 4444", " 55555") },
    { LLM_PRE_GPT2, "\n\n\n", 0, W ("\n\n\n") },
    { LLM_PRE_GPT2, "a   ", 0, W ("a", "   ") },
    /* \s+(?!\S): the last space goes with the next word */
    { LLM_PRE_GPT2, "a   b", 0, W ("a", "  ", " b") },
    { LLM_PRE_GPT2, "x\t\ty", 0, W ("x", "\t", "\t", "y") },
    { LLM_PRE_GPT2, "\t \xe3\x80\x80x", 0, W ("\t ", "\xe3\x80\x80", "x") },
    { LLM_PRE_GPT2, "\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99 ok", 0, W ("\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99", " ok") },
    { LLM_PRE_GPT2, "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 \xe6\x97\xa5\xe6\x9c\xac", 0,
      W ("\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", " \xe6\x97\xa5\xe6\x9c\xac") },
    { LLM_PRE_GPT2, "", 0, NONE },
  };
  check_splits (cases, G_N_ELEMENTS (cases));
}
END_TEST

START_TEST (test_llama3_splits)
{
  const SplitCase cases[] = {
    /* contractions ignore case; a space before the apostrophe goes with it */
    { LLM_PRE_LLAMA3, "'S 'RE 'll I'M", 0, W ("'S", " '", "RE", " '", "ll", " I", "'M") },
    { LLM_PRE_LLAMA3, "1 22 333 4444 55555", 0,
      W ("1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55") },
    { LLM_PRE_LLAMA3, "\n\n\n", 0, W ("\n\n\n") },
    { LLM_PRE_LLAMA3, "a \n\n b", 0, W ("a", " \n\n", " b") },
    { LLM_PRE_LLAMA3, " \r\n\t x", 0, W (" \r\n", "\t", " x") },
    { LLM_PRE_LLAMA3, "Hello, world!\n", 0, W ("Hello", ",", " world", "!\n") },
    { LLM_PRE_LLAMA3, "x   ", 0, W ("x", "   ") },
    { LLM_PRE_LLAMA3, "x   y", 0, W ("x", "  ", " y") },
    /* no-break spaces are \s, and may lead a word like any non-letter */
    { LLM_PRE_LLAMA3, "x\xc2\xa0\xc2\xa0y", 0, W ("x", "\xc2\xa0", "\xc2\xa0y") },
    { LLM_PRE_LLAMA3, "\xe4\xbd\xa0\xe5\xa5\xbd\xf0\x9f\xa6\x99!", 0,
      W ("\xe4\xbd\xa0\xe5\xa5\xbd", "\xf0\x9f\xa6\x99!") },
    /* invalid bytes are U+FFFD, a symbol, so one can lead a word */
    { LLM_PRE_LLAMA3, "\xff" "ab\xc3", 0, W ("\xef\xbf\xbd" "ab", "\xef\xbf\xbd") },
    { LLM_PRE_LLAMA3, "\x80\x80\x80", 0, W ("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") },
    { LLM_PRE_LLAMA3, " ", 0, W (" ") },
  };
  check_splits (cases, G_N_ELEMENTS (cases));

  /* NUL is a control character like any other: it may lead a word */
  g_auto (GStrv) got = llm_pretokenize_text (LLM_PRE_LLAMA3, "a\0b\0", 4);
  ck_assert_uint_eq (g_strv_length (got), 3);
  ck_assert_str_eq (got[0], "a");
  guint32 cpts[] = { 'a', 0, 'b', 0 };
  g_autoptr (GArray) lens = g_array_new (FALSE, FALSE, sizeof (gsize));
  llm_pretokenize (LLM_PRE_LLAMA3, cpts, 4, lens);
  ck_assert_uint_eq (lens->len, 3);
  ck_assert_uint_eq (g_array_index (lens, gsize, 0), 1);
  ck_assert_uint_eq (g_array_index (lens, gsize, 1), 2);
  ck_assert_uint_eq (g_array_index (lens, gsize, 2), 1);
}
END_TEST

START_TEST (test_qwen2_splits)
{
  const SplitCase cases[] = {
    /* like Llama 3, but one digit at a time */
    { LLM_PRE_QWEN2, "12345", 0, W ("1", "2", "3", "4", "5") },
    { LLM_PRE_QWEN2, "x 12", 0, W ("x", " ", "1", "2") },
    { LLM_PRE_QWEN2, "I'M 'll", 0, W ("I", "'M", " '", "ll") },
    { LLM_PRE_QWEN2, "\n\n\n", 0, W ("\n\n\n") },
    { LLM_PRE_QWEN2, "a  \n", 0, W ("a", "  \n") },
  };
  check_splits (cases, G_N_ELEMENTS (cases));
}
END_TEST

START_TEST (test_deepseek_llm_splits)
{
  const SplitCase cases[] = {
    { LLM_PRE_DEEPSEEK_LLM, "Hello world", 0, W ("Hello", " world") },
    { LLM_PRE_DEEPSEEK_LLM, "a\r\nb", 0, W ("a", "\r", "\n", "b") },
    { LLM_PRE_DEEPSEEK_LLM, "\n\n\n", 0, W ("\n", "\n", "\n") },
    { LLM_PRE_DEEPSEEK_LLM, "3333 ok", 0, W ("3333", " ok") },
    { LLM_PRE_DEEPSEEK_LLM, "Hello!! world...", 0, W ("Hello", "!!", " world", "...") },
    { LLM_PRE_DEEPSEEK_LLM, "abc  ", 0, W ("abc", "  ") },
    { LLM_PRE_DEEPSEEK_LLM, "\xe4\xb8\xad\xe6\x96\x87 abc", 0, W ("\xe4\xb8\xad\xe6\x96\x87", " abc") },
    /* U+3000 is in the punctuation class's range, but as whitespace it only
     * ever matches \s; then the CJK class takes the full stop back out */
    { LLM_PRE_DEEPSEEK_LLM, "x\xe3\x80\x80\xe3\x80\x82y", 0, W ("x", "\xe3\x80\x80", "\xe3\x80\x82", "y") },
    { LLM_PRE_DEEPSEEK_LLM, "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 12 \xd9\xa3", 0,
      W ("\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", " ", "12", " ", "\xd9\xa3") },
  };
  check_splits (cases, G_N_ELEMENTS (cases));
}
END_TEST

START_TEST (test_default_splits)
{
  const SplitCase cases[] = {
    { LLM_PRE_DEFAULT, "Hello, world!!", 0, W ("Hello", ",", " world", "!!") },
    /* numbers split out, then into runs of three ASCII digits */
    { LLM_PRE_DEFAULT, "12345 678", 0, W ("123", "45", " ", "678") },
    /* the backquote is the one ASCII punctuation left out of the first pass */
    { LLM_PRE_DEFAULT, "a`b", 0, W ("a", "`", "b") },
    { LLM_PRE_DEFAULT, "x\xc2\xbd\xc2\xb2" "3", 0, W ("x", "\xc2\xbd\xc2\xb2" "3") },
  };
  check_splits (cases, G_N_ELEMENTS (cases));
}
END_TEST

START_TEST (test_long_runs_split_in_linear_time)
{
  static const LlmPreType types[] = {
    LLM_PRE_DEFAULT, LLM_PRE_LLAMA3, LLM_PRE_QWEN2, LLM_PRE_GPT2, LLM_PRE_DEEPSEEK_LLM,
  };
  const gsize n = 1000000;
  g_autofree guint32 *letters = g_new (guint32, n);
  g_autofree guint32 *spaces = g_new (guint32, n);
  for (gsize i = 0; i < n; i++) {
    letters[i] = 'a';
    spaces[i] = (i % 3 == 2) ? '\n' : ' ';
  }
  gint64 t0 = g_get_monotonic_time ();
  for (gsize t = 0; t < G_N_ELEMENTS (types); t++) {
    g_autoptr (GArray) a = g_array_new (FALSE, FALSE, sizeof (gsize));
    llm_pretokenize (types[t], letters, n, a);
    ck_assert_uint_eq (a->len, 1);
    ck_assert_uint_eq (g_array_index (a, gsize, 0), n);

    g_autoptr (GArray) s = g_array_new (FALSE, FALSE, sizeof (gsize));
    llm_pretokenize (types[t], spaces, n, s);
    gsize sum = 0;
    for (guint i = 0; i < s->len; i++)
      sum += g_array_index (s, gsize, i);
    ck_assert_uint_eq (sum, n);
  }
  /* a quadratic pass would take hours here, even under valgrind not a minute */
  ck_assert_int_lt (g_get_monotonic_time () - t0, 60 * G_USEC_PER_SEC);
}
END_TEST

/* ---- BPE on a small vocabulary ----------------------------------------- */

/* GPT-2's byte alphabet, written out independently of the encoder. */
static guint32
gpt2_char (guint8 b)
{
  guint n = 0;
  for (guint c = 0; c < 256; c++) {
    gboolean printable = (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
    if (c == b)
      return printable ? c : 256 + n;
    if (!printable)
      n++;
  }
  g_assert_not_reached ();
}

static LlmTokenizer *
small_bpe (const char *pre, const char *const *tokens, const char *const *merges)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  llm_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2");
  llm_gguf_writer_add_string (w, "tokenizer.ggml.pre", pre);
  llm_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", tokens, g_strv_length ((GStrv) tokens));
  llm_gguf_writer_add_string_array (w, "tokenizer.ggml.merges", merges, g_strv_length ((GStrv) merges));
  GError *error = NULL;
  g_autoptr (GBytes) bytes = llm_gguf_writer_to_bytes (w, &error);
  ck_assert_msg (bytes != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmGguf) gguf = llm_gguf_new_from_bytes (bytes, &error);
  ck_assert_msg (gguf != NULL, "%s", error ? error->message : "");
  LlmTokenizer *tok = llm_tokenizer_new_from_gguf (gguf, &error);
  ck_assert_msg (tok != NULL, "%s", error ? error->message : "");
  return tok;
}

static void
assert_encodes (const LlmTokenizer *tok, const char *text, gsize len, const gint32 *expected,
    gsize n)
{
  g_autofree char *copy = g_memdup2 (text, len);
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_bpe_encode (llm_tokenizer_vocab (tok), copy, len, ids);
  gboolean same = ids->len == n;
  for (gsize i = 0; same && i < n; i++)
    same = g_array_index (ids, gint32, i) == expected[i];
  if (!same) {
    GString *g = g_string_new (NULL);
    for (guint i = 0; i < ids->len; i++)
      g_string_append_printf (g, " %d", g_array_index (ids, gint32, i));
    g_autofree char *t = g_strescape (text, NULL);
    ck_abort_msg ("\"%s\" gave%s", t, g->str);
  }
}

#define ASSERT_ENCODES(tok, text, ...) \
  do { \
    const gint32 e_[] = { __VA_ARGS__ }; \
    assert_encodes (tok, text, sizeof (text) - 1, e_, G_N_ELEMENTS (e_)); \
  } while (0)

/* ids:                      0    1    2    3    4     5     6      7       8 */
static const char *const small_tokens[] = { "a", "b", "c", "d", "aa", "bc", "ab", "aaaa", "cd",
  /*  9         10        11        12       13       14     15  */
  "\xc4\xa0", "\xc4\xa0" "a", "\xc3\xaf", "\xc2\xbf", "\xc2\xbd", "abcd", "\xc3\x83", NULL };
static const char *const small_merges[] = {
  "b c",             /* 0 */
  "a b",             /* 1 */
  "a a",             /* 2 */
  "aa aa",           /* 3 */
  "c d",             /* 4: gives "cd", id 8 */
  "\xc4\xa0 a",      /* 5: " a" */
  NULL };

START_TEST (test_bpe_lowest_rank_merges_first)
{
  g_autoptr (LlmTokenizer) tok = small_bpe ("gpt-2", small_tokens, small_merges);
  /* "b c" outranks "a b": a|bc, not ab|c */
  ASSERT_ENCODES (tok, "abc", 0, 5);
  ASSERT_ENCODES (tok, "ab", 6);
}
END_TEST

START_TEST (test_bpe_equal_ranks_merge_leftmost_first)
{
  g_autoptr (LlmTokenizer) tok = small_bpe ("gpt-2", small_tokens, small_merges);
  ASSERT_ENCODES (tok, "aaa", 4, 0);
  ASSERT_ENCODES (tok, "aaaaa", 7, 0);
  ASSERT_ENCODES (tok, "aaaaaa", 7, 4);
  ASSERT_ENCODES (tok, " a", 10);
  /* with nothing to merge, symbols come out one byte each */
  ASSERT_ENCODES (tok, "dcba", 3, 2, 1, 0);
}
END_TEST

START_TEST (test_bpe_unknown_symbols_fall_back_to_bytes)
{
  g_autoptr (LlmTokenizer) tok = small_bpe ("gpt-2", small_tokens, small_merges);
  /* U+00E9 is bytes C3 A9, i.e. "Ã" (a token) and "©" (not one, and its
   * two UTF-8 bytes are not tokens either: dropped, as llama.cpp does) */
  ASSERT_ENCODES (tok, "\xc3\xa9", 15);
  /* an invalid byte is U+FFFD, bytes EF BF BD, i.e. "ï¿½" */
  ASSERT_ENCODES (tok, "\xff", 11, 12, 13);
  ASSERT_ENCODES (tok, "a\xe4\xb8", 0, 11, 12, 13, 11, 12, 13);
}
END_TEST

START_TEST (test_bpe_ignore_merges_takes_whole_words)
{
  g_autoptr (LlmTokenizer) gpt2 = small_bpe ("gpt-2", small_tokens, small_merges);
  g_autoptr (LlmTokenizer) llama3 = small_bpe ("llama-bpe", small_tokens, small_merges);
  /* merges alone give a|bc|d ... */
  ASSERT_ENCODES (gpt2, "abcd", 0, 5, 3);
  /* ... but Llama 3 emits a word that is a token as that token */
  ASSERT_ENCODES (llama3, "abcd", 14);
}
END_TEST

START_TEST (test_bpe_long_word_is_fast)
{
  g_autoptr (LlmTokenizer) tok = small_bpe ("gpt-2", small_tokens, small_merges);
  const gsize n = 200000;
  g_autofree char *text = g_malloc (n);
  memset (text, 'a', n);
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_bpe_encode (llm_tokenizer_vocab (tok), text, n, ids);
  ck_assert_uint_eq (ids->len, n / 4);
  for (guint i = 0; i < ids->len; i++)
    ck_assert_int_eq (g_array_index (ids, gint32, i), 7);
  ck_assert_int_lt (g_get_monotonic_time () - t0, 60 * G_USEC_PER_SEC);
}
END_TEST

START_TEST (test_bpe_token_bytes_inverts_the_byte_alphabet)
{
  for (guint b = 0; b < 256; b++) {
    char enc[4];
    guint k = llm_utf8_encode (gpt2_char (b), enc);
    g_autoptr (GString) out = g_string_new (NULL);
    llm_bpe_token_bytes (enc, k, out);
    ck_assert_uint_eq (out->len, 1);
    ck_assert_uint_eq ((guint8) out->str[0], b);
  }

  g_autoptr (GString) out = g_string_new (NULL);
  llm_bpe_token_bytes ("\xc4\xa0hi\xc4\x8a", 6, out);
  ck_assert_str_eq (out->str, " hi\n");

  /* a character outside the alphabet is marked as llama.cpp marks it */
  g_string_truncate (out, 0);
  llm_bpe_token_bytes ("x\xe4\xb8\xad", 4, out);
  ck_assert_str_eq (out->str, "x[UNK_BYTE_0xe4b8adx\xe4\xb8\xad]");
}
END_TEST

static Suite *
pretokenize_suite (void)
{
  Suite *s = suite_create ("pretokenize");

  TCase *tc = tcase_create ("unicode");
  tcase_add_test (tc, test_utf8_decodes_valid_sequences);
  tcase_add_test (tc, test_utf8_invalid_bytes_become_replacement_one_byte_each);
  tcase_add_test (tc, test_utf8_overlong_and_surrogates_decode_like_llama_cpp);
  tcase_add_test (tc, test_utf8_encode_lengths);
  tcase_add_test (tc, test_unicode_flags_categories_and_whitespace);
  tcase_add_test (tc, test_unicode_table_is_sorted_and_closed);
  suite_add_tcase (s, tc);

  tc = tcase_create ("split");
  tcase_add_test (tc, test_gpt2_splits);
  tcase_add_test (tc, test_llama3_splits);
  tcase_add_test (tc, test_qwen2_splits);
  tcase_add_test (tc, test_deepseek_llm_splits);
  tcase_add_test (tc, test_default_splits);
  tcase_add_test (tc, test_long_runs_split_in_linear_time);
  suite_add_tcase (s, tc);

  tc = tcase_create ("bpe");
  tcase_add_test (tc, test_bpe_lowest_rank_merges_first);
  tcase_add_test (tc, test_bpe_equal_ranks_merge_leftmost_first);
  tcase_add_test (tc, test_bpe_unknown_symbols_fall_back_to_bytes);
  tcase_add_test (tc, test_bpe_ignore_merges_takes_whole_words);
  tcase_add_test (tc, test_bpe_long_word_is_fast);
  tcase_add_test (tc, test_bpe_token_bytes_inverts_the_byte_alphabet);
  suite_add_tcase (s, tc);

  return s;
}

LLM_TEST_MAIN (pretokenize_suite)
