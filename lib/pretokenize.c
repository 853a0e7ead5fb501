/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pre-tokenizers for byte-level BPE.
 *
 * llama.cpp describes each pre-tokenizer as a list of regexes. The first
 * splits the whole text; each later one splits every piece the previous one
 * made, and both what it matches and the gaps between matches become pieces.
 * Instead of a regex engine, every regex used by the supported types has a
 * hand-written matcher here. Two families:
 *
 * - "custom" matchers reproduce llama.cpp's own hand-coded splitters for
 *   the GPT-2 and Llama 3 patterns (unicode_regex_split_custom_*). Qwen2's
 *   pattern differs from Llama 3's only in matching one digit at a time;
 *   llama.cpp runs it through std::regex over its "collapsed" text, where
 *   every non-ASCII codepoint stands for its category, which gives the same
 *   splits as the Llama 3 splitter with single digits.
 * - "search" matchers follow std::regex_iterator: the leftmost position
 *   where the pattern matches starts the next match; unmatched text between
 *   matches is a piece of its own.
 *
 * Whitespace (\s) is Unicode's White_Space everywhere: llama.cpp's custom
 * code uses that flag, and its std::regex paths replace non-ASCII
 * whitespace by U+000B first, so that there too \s is ASCII \t\n\v\f\r and
 * space plus every non-ASCII White_Space codepoint. A side effect kept
 * here: such a codepoint never matches an explicit character class, even
 * one whose range includes it (U+3000 in deepseek-llm's punctuation class).
 */
#include "pretokenize.h"
#include "unicode.h"

typedef struct {
  const guint32 *cpts;
  const guint16 *flags;   /* llm_unicode_flags() of each codepoint */
} Text;

/* Everything is looked up within one piece [start, end); past its end a
 * codepoint reads as none and has no flags, as in llama.cpp's splitters. */
#define NO_CPT G_MAXUINT32

static inline guint32
cpt_at (const Text *t, gsize pos, gsize end)
{
  return pos < end ? t->cpts[pos] : NO_CPT;
}

static inline guint16
flags_at (const Text *t, gsize pos, gsize end)
{
  return pos < end ? t->flags[pos] : 0;
}

/* Returns the end of the match that starts at @pos, or @pos if none does. */
typedef gsize (*MatchFn) (const Text *t, gsize pos, gsize end);

typedef enum {
  SPLIT_CUSTOM,       /* every position matches; a miss is a 1-codepoint piece */
  SPLIT_SEARCH,       /* regex search: misses gather into gap pieces */
  SPLIT_TRAILING_WS,  /* \s+$ */
} SplitMode;

typedef struct {
  SplitMode mode;
  MatchFn match;
} Pass;

static inline void
emit (GArray *out, gsize n)
{
  if (n > 0)
    g_array_append_val (out, n);
}

static void
split_custom (const Text *t, gsize start, gsize end, MatchFn match, GArray *out)
{
  gsize pos = start;
  while (pos < end) {
    gsize m = match (t, pos, end);
    if (m <= pos)
      m = pos + 1;
    emit (out, m - pos);
    pos = m;
  }
}

static void
split_search (const Text *t, gsize start, gsize end, MatchFn match, GArray *out)
{
  gsize gap = start, pos = start;
  while (pos < end) {
    gsize m = match (t, pos, end);
    if (m > pos) {
      emit (out, pos - gap);
      emit (out, m - pos);
      pos = gap = m;
    } else {
      pos++;
    }
  }
  emit (out, end - gap);
}

static void
split_trailing_ws (const Text *t, gsize start, gsize end, GArray *out)
{
  /* The leftmost position from which \s+ reaches the end is the start of
   * the trailing whitespace run; finding it from the back keeps this linear. */
  gsize ws = end;
  while (ws > start && (t->flags[ws - 1] & LLM_CPT_WHITESPACE))
    ws--;
  emit (out, ws - start);
  emit (out, end - ws);
}

/* --- GPT-2 and Llama 3 families --- */

static inline gboolean
is_crlf (guint32 c)
{
  return c == '\r' || c == '\n';
}

static inline guint32
ascii_lower (guint32 c)
{
  return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

/* 's 't 're 've 'm 'll 'd at @pos; @fold: case-insensitive. Only ASCII
 * letters fold to those letters (tools/gen-unicode-data.py checks), so
 * ASCII folding equals llama.cpp's unicode_tolower() here. */
static gsize
match_contraction (const Text *t, gsize pos, gsize end, gboolean fold)
{
  if (t->cpts[pos] != '\'' || pos + 1 >= end)
    return pos;

  guint32 a = t->cpts[pos + 1];
  if (fold)
    a = ascii_lower (a);
  if (a == 's' || a == 't' || a == 'm' || a == 'd')
    return pos + 2;

  if (pos + 2 >= end)
    return pos;
  guint32 b = t->cpts[pos + 2];
  if (fold)
    b = ascii_lower (b);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
    return pos + 3;
  return pos;
}

#define WLN (LLM_CPT_WHITESPACE | LLM_CPT_LETTER | LLM_CPT_NUMBER)

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static gsize
match_gpt2 (const Text *t, gsize pos, gsize end)
{
  gsize m = match_contraction (t, pos, end, FALSE);
  if (m > pos)
    return m;

  guint32 c = t->cpts[pos];
  gsize word = pos + (c == ' ');
  guint16 f = flags_at (t, word, end);

  if (f & LLM_CPT_LETTER) {
    while (flags_at (t, word, end) & LLM_CPT_LETTER)
      word++;
    return word;
  }
  if (f & LLM_CPT_NUMBER) {
    while (flags_at (t, word, end) & LLM_CPT_NUMBER)
      word++;
    return word;
  }
  if (f != 0 && !(f & WLN)) {
    for (;;) {
      guint16 g = flags_at (t, word, end);
      if (g == 0 || (g & WLN))
        break;
      word++;
    }
    return word;
  }

  gsize ws = pos;
  while (flags_at (t, ws, end) & LLM_CPT_WHITESPACE)
    ws++;
  /* \s+(?!\S): before a non-space, leave the last space to the next word */
  if (ws - pos > 1 && ws < end)
    return ws - 1;
  return ws;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static inline gsize
match_llama3_family (const Text *t, gsize pos, gsize end, guint max_digits)
{
  gsize m = match_contraction (t, pos, end, TRUE);
  if (m > pos)
    return m;

  guint32 c = t->cpts[pos];
  guint16 f = t->flags[pos];

  if (!is_crlf (c) && !(f & LLM_CPT_NUMBER)) {
    if ((f & LLM_CPT_LETTER) || (flags_at (t, pos + 1, end) & LLM_CPT_LETTER)) {
      gsize q = pos + 1;
      while (flags_at (t, q, end) & LLM_CPT_LETTER)
        q++;
      return q;
    }
  }

  if (f & LLM_CPT_NUMBER) {
    gsize q = pos;
    while (q - pos < max_digits && (flags_at (t, q, end) & LLM_CPT_NUMBER))
      q++;
    return q;
  }

  guint16 f2 = (c == ' ') ? flags_at (t, pos + 1, end) : f;
  /* llama.cpp tests this codepoint's flags, not f2, for being defined: a
   * lone space at the end of a piece comes out here as a piece by itself,
   * which is what \s+ would have given it anyway. */
  if (!(f2 & WLN) && f != 0) {
    gsize q = pos + (c == ' ');
    for (;;) {
      guint16 g = flags_at (t, q, end);
      if (g == 0 || (g & WLN))
        break;
      q++;
    }
    while (is_crlf (cpt_at (t, q, end)))
      q++;
    return q;
  }

  gsize ws = pos, after_crlf = 0;
  while (flags_at (t, ws, end) & LLM_CPT_WHITESPACE) {
    if (is_crlf (t->cpts[ws]))
      after_crlf = ws + 1;
    ws++;
  }
  /* \s*[\r\n]+ backtracks to the last line break of the run */
  if (after_crlf > 0)
    return after_crlf;
  if (ws - pos > 1 && ws < end)
    return ws - 1;
  return ws;
}

static gsize
match_llama3 (const Text *t, gsize pos, gsize end)
{
  return match_llama3_family (t, pos, end, 3);
}

static gsize
match_qwen2 (const Text *t, gsize pos, gsize end)
{
  return match_llama3_family (t, pos, end, 1);
}

/* --- "default" --- */

/* [\p{P}\$\+<=>\^~\|]+ . llama.cpp matches \p{P} on ASCII as its own
 * explicit list, which together with the listed symbols is every ASCII
 * punctuation character except the backquote. */
static inline gboolean
is_default_punct (const Text *t, gsize pos)
{
  guint32 c = t->cpts[pos];
  if (c < 0x80)
    return g_ascii_ispunct (c) && c != '`';
  return (t->flags[pos] & LLM_CPT_PUNCTUATION) != 0;
}

static gsize
match_default_punct (const Text *t, gsize pos, gsize end)
{
  while (pos < end && is_default_punct (t, pos))
    pos++;
  return pos;
}

/* \p{N}+ */
static gsize
match_numbers (const Text *t, gsize pos, gsize end)
{
  while (flags_at (t, pos, end) & LLM_CPT_NUMBER)
    pos++;
  return pos;
}

static inline gboolean
is_ascii_digit (guint32 c)
{
  return c >= '0' && c <= '9';
}

/* [0-9][0-9][0-9] */
static gsize
match_ascii_digits3 (const Text *t, gsize pos, gsize end)
{
  if (end - pos >= 3 && is_ascii_digit (t->cpts[pos]) && is_ascii_digit (t->cpts[pos + 1])
      && is_ascii_digit (t->cpts[pos + 2]))
    return pos + 3;
  return pos;
}

/* --- deepseek-llm --- */

typedef struct {
  guint32 first, last;
} CptRange;

/* The letter class of deepseek-llm's tokenizer.json (its second split
 * regex), as codepoint ranges. */
static const CptRange deepseek_letters[] = {
  {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
  {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
  {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
  {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
  {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
  {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
  {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D},
  {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
  {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
  {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
  {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
  {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D},
  {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D},
  {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
  {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
  {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B},
  {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
  {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A},
  {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
  {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* [!-/:-~！-／：-～‘-‟　-。] (note that :-~ takes in ASCII letters) */
static const CptRange deepseek_punct[] = {
  {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F},
  {0xFF1A, 0xFF5E},
};

/* [一-龥ࠀ-一가-퟿], i.e. U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF */
static const CptRange deepseek_cjk[] = {
  {0x800, 0x9FA5}, {0xAC00, 0xD7FF},
};

static gboolean
in_ranges (const CptRange *r, gsize n, guint32 c)
{
  gsize lo = 0, hi = n;
  while (lo < hi) {
    gsize mid = lo + (hi - lo) / 2;
    if (c < r[mid].first)
      hi = mid;
    else if (c > r[mid].last)
      lo = mid + 1;
    else
      return TRUE;
  }
  return FALSE;
}

static inline gboolean
in_class (const Text *t, gsize pos, gsize end, const CptRange *r, gsize n)
{
  /* non-ASCII whitespace was U+000B to the regex, outside every class */
  return pos < end && !(t->flags[pos] & LLM_CPT_WHITESPACE) && in_ranges (r, n, t->cpts[pos]);
}

/* \s?[class]+ . Whitespace is never in the class, so the optional space
 * either starts a match followed by the class or no match starts there. */
static inline gsize
match_space_then_class (const Text *t, gsize pos, gsize end, const CptRange *r, gsize n)
{
  gsize q = pos;
  if ((t->flags[pos] & LLM_CPT_WHITESPACE) && in_class (t, pos + 1, end, r, n))
    q = pos + 1;
  else if (!in_class (t, pos, end, r, n))
    return pos;
  while (in_class (t, q, end, r, n))
    q++;
  return q;
}

/* [\r\n] */
static gsize
match_crlf (const Text *t, gsize pos, gsize end)
{
  return is_crlf (t->cpts[pos]) ? pos + 1 : pos;
}

static gsize
match_deepseek_letters (const Text *t, gsize pos, gsize end)
{
  return match_space_then_class (t, pos, end, deepseek_letters, G_N_ELEMENTS (deepseek_letters));
}

static gsize
match_deepseek_punct (const Text *t, gsize pos, gsize end)
{
  return match_space_then_class (t, pos, end, deepseek_punct, G_N_ELEMENTS (deepseek_punct));
}

static gsize
match_deepseek_cjk (const Text *t, gsize pos, gsize end)
{
  while (in_class (t, pos, end, deepseek_cjk, G_N_ELEMENTS (deepseek_cjk)))
    pos++;
  return pos;
}

/* --- the pre-tokenizers --- */

static const Pass passes_default[] = {
  {SPLIT_SEARCH, match_default_punct},
  {SPLIT_CUSTOM, match_gpt2},
  {SPLIT_SEARCH, match_numbers},
  {SPLIT_SEARCH, match_ascii_digits3},
};

static const Pass passes_llama3[] = {
  {SPLIT_CUSTOM, match_llama3},
};

static const Pass passes_qwen2[] = {
  {SPLIT_CUSTOM, match_qwen2},
};

static const Pass passes_gpt2[] = {
  {SPLIT_CUSTOM, match_gpt2},
};

static const Pass passes_deepseek_llm[] = {
  {SPLIT_SEARCH, match_crlf},
  {SPLIT_SEARCH, match_deepseek_letters},
  {SPLIT_SEARCH, match_deepseek_punct},
  {SPLIT_TRAILING_WS, NULL},
  {SPLIT_SEARCH, match_deepseek_cjk},
  {SPLIT_SEARCH, match_numbers},
};

void
llm_pretokenize (LlmPreType pre, const guint32 *cpts, gsize n_cpts, GArray *word_lens)
{
  const Pass *passes;
  gsize n_passes;

  g_return_if_fail (word_lens != NULL);
  g_return_if_fail (g_array_get_element_size (word_lens) == sizeof (gsize));

  if (n_cpts == 0)
    return;

  switch (pre) {
    case LLM_PRE_LLAMA3:
      passes = passes_llama3;
      n_passes = G_N_ELEMENTS (passes_llama3);
      break;
    case LLM_PRE_QWEN2:
      passes = passes_qwen2;
      n_passes = G_N_ELEMENTS (passes_qwen2);
      break;
    case LLM_PRE_GPT2:
      passes = passes_gpt2;
      n_passes = G_N_ELEMENTS (passes_gpt2);
      break;
    case LLM_PRE_DEEPSEEK_LLM:
      passes = passes_deepseek_llm;
      n_passes = G_N_ELEMENTS (passes_deepseek_llm);
      break;
    case LLM_PRE_DEFAULT:
    default:
      passes = passes_default;
      n_passes = G_N_ELEMENTS (passes_default);
      break;
  }

  guint16 *flags = g_new (guint16, n_cpts);
  for (gsize i = 0; i < n_cpts; i++)
    flags[i] = llm_unicode_flags (cpts[i]);
  Text t = { cpts, flags };

  GArray *pieces = g_array_new (FALSE, FALSE, sizeof (gsize));
  GArray *next = g_array_new (FALSE, FALSE, sizeof (gsize));
  g_array_append_val (pieces, n_cpts);

  for (gsize p = 0; p < n_passes; p++) {
    gsize start = 0;
    g_array_set_size (next, 0);
    for (guint i = 0; i < pieces->len; i++) {
      gsize end = start + g_array_index (pieces, gsize, i);
      switch (passes[p].mode) {
        case SPLIT_CUSTOM:
          split_custom (&t, start, end, passes[p].match, next);
          break;
        case SPLIT_SEARCH:
          split_search (&t, start, end, passes[p].match, next);
          break;
        case SPLIT_TRAILING_WS:
          split_trailing_ws (&t, start, end, next);
          break;
      }
      start = end;
    }
    GArray *tmp = pieces;
    pieces = next;
    next = tmp;
  }

  g_array_append_vals (word_lens, pieces->data, pieces->len);
  g_array_unref (pieces);
  g_array_unref (next);
  g_free (flags);
}

char **
llm_pretokenize_text (LlmPreType pre, const char *text, gsize len)
{
  gsize n_cpts;
  guint32 *cpts = llm_utf8_to_cpts (text, len, &n_cpts);
  GArray *lens = g_array_new (FALSE, FALSE, sizeof (gsize));
  GPtrArray *words = g_ptr_array_new ();

  llm_pretokenize (pre, cpts, n_cpts, lens);

  gsize at = 0;
  for (guint i = 0; i < lens->len; i++) {
    gsize n = g_array_index (lens, gsize, i);
    GString *word = g_string_sized_new (n);
    for (gsize k = at; k < at + n; k++) {
      char buf[4];
      g_string_append_len (word, buf, llm_utf8_encode (cpts[k], buf));
    }
    g_ptr_array_add (words, g_string_free (word, FALSE));
    at += n;
  }
  g_ptr_array_add (words, NULL);

  g_array_unref (lens);
  g_free (cpts);
  return (char **) g_ptr_array_free (words, FALSE);
}
