/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The family-independent half of tokenization: special tokens are cut out of
 * the text first (longest first, as llama.cpp's tokenizer_st_partition), the
 * raw runs in between go to the SPM or BPE encoder. */
#include "tokenizer.h"
#include "tokenizer-impl.h"

#include <string.h>

G_DEFINE_QUARK (llm-tokenizer-error-quark, llm_tokenizer_error)

struct _LlmTokenizer {
  LlmVocab *vocab;
};

/* A piece of the input: a special token, or a run of raw text. */
typedef struct {
  gint32 token;     /* -1 for raw text */
  gsize offset;
  gsize len;
} Fragment;

LlmTokenizer *
llm_tokenizer_new_from_gguf (const LlmGguf *gguf, GError **error)
{
  LlmVocab *v = llm_vocab_new_from_gguf (gguf, error);
  if (v == NULL)
    return NULL;
  LlmTokenizer *tok = g_new0 (LlmTokenizer, 1);
  tok->vocab = v;
  return tok;
}

LlmTokenizer *
llm_tokenizer_new_from_file (const char *path, GError **error)
{
  g_autoptr (LlmGguf) g = llm_gguf_open (path, error);
  if (g == NULL)
    return NULL;
  LlmTokenizer *tok = llm_tokenizer_new_from_gguf (g, error);
  if (tok == NULL)
    g_prefix_error (error, "%s: ", path);
  return tok;
}

void
llm_tokenizer_free (LlmTokenizer *tok)
{
  if (tok == NULL)
    return;
  llm_vocab_free (tok->vocab);
  g_free (tok);
}

const LlmVocab *
llm_tokenizer_vocab (const LlmTokenizer *tok)
{
  return tok->vocab;
}

static gboolean
is_c_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static void
add_raw (GArray *frags, gsize offset, gsize len)
{
  if (len == 0)
    return;
  Fragment f = { -1, offset, len };
  g_array_append_val (frags, f);
}

/* Splits the raw fragments of @in around every occurrence of special token
 * @id, appending the result to @out. */
static void
split_on_special (const LlmVocab *v, gint32 id, const char *text, GArray *in, GArray *out)
{
  const LlmToken *t = &v->tokens[id];
  for (guint i = 0; i < in->len; i++) {
    Fragment f = g_array_index (in, Fragment, i);
    if (f.token >= 0) {
      g_array_append_val (out, f);
      continue;
    }
    gsize off = f.offset, rem = f.len;
    while (rem > 0) {
      const char *m = memmem (text + off, rem, t->text, t->len);
      if (m == NULL) {
        add_raw (out, off, rem);
        break;
      }
      gsize at = (gsize) (m - text);
      add_raw (out, off, at - off);
      Fragment tf = { id, at, t->len };
      g_array_append_val (out, tf);
      gsize roff = at + t->len, rlen = off + rem - roff;
      if (t->rstrip)
        while (rlen > 0 && is_c_space (text[roff])) {
          roff++;
          rlen--;
        }
      off = roff;
      rem = rlen;
    }
  }
}

static GArray *
partition (const LlmVocab *v, const char *text, gsize len, gboolean parse_special)
{
  GArray *frags = g_array_new (FALSE, FALSE, sizeof (Fragment));
  add_raw (frags, 0, len);
  GArray *next = g_array_new (FALSE, FALSE, sizeof (Fragment));
  for (guint32 s = 0; s < v->n_special && frags->len > 0; s++) {
    gint32 id = v->special[s];
    LlmTokenType type = v->tokens[id].type;
    /* Without special parsing, only user-defined tokens are matched. */
    if (!parse_special && (type == LLM_TOKEN_CONTROL || type == LLM_TOKEN_UNKNOWN))
      continue;
    g_array_set_size (next, 0);
    split_on_special (v, id, text, frags, next);
    GArray *tmp = frags;
    frags = next;
    next = tmp;
  }
  g_array_free (next, TRUE);
  return frags;
}

void
llm_tokenizer_encode (const LlmTokenizer *tok, const char *text, gssize len,
    gboolean add_special, gboolean parse_special, gboolean space_prefix, GArray *ids)
{
  const LlmVocab *v = tok->vocab;
  gsize n = len < 0 ? strlen (text) : (gsize) len;
  GArray *frags = partition (v, text, n, parse_special);

  if (add_special && v->add_bos)
    g_array_append_val (ids, v->bos);

  /* SPM puts a space before the first word and after every special token,
   * as SentencePiece does for each piece of text it sees. */
  gboolean prefix = space_prefix;
  for (guint i = 0; i < frags->len; i++) {
    const Fragment *f = &g_array_index (frags, Fragment, i);
    if (f->token >= 0) {
      g_array_append_val (ids, f->token);
      prefix = TRUE;
      continue;
    }
    if (v->kind == LLM_VOCAB_SPM)
      llm_spm_encode (v, text + f->offset, f->len, v->add_space_prefix && prefix, ids);
    else
      llm_bpe_encode (v, text + f->offset, f->len, ids);
    prefix = FALSE;
  }

  if (add_special && v->add_eos)
    g_array_append_val (ids, v->eos);
  g_array_free (frags, TRUE);
}

/* "<0xAB>" -> 0xAB; -1 if @t is not of that form. */
static int
byte_token_value (const LlmToken *t)
{
  if (t->len != 6 || memcmp (t->text, "<0x", 3) != 0 || t->text[5] != '>')
    return -1;
  int hi = g_ascii_xdigit_value (t->text[3]), lo = g_ascii_xdigit_value (t->text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static void
append_unescaped (const char *s, gsize len, GString *out)
{
  /* U+2581 LOWER ONE EIGHTH BLOCK stands for a space in SPM pieces. */
  for (gsize i = 0; i < len; i++) {
    if (i + 2 < len && (guint8) s[i] == 0xe2 && (guint8) s[i + 1] == 0x96 &&
        (guint8) s[i + 2] == 0x81) {
      g_string_append_c (out, ' ');
      i += 2;
    } else {
      g_string_append_c (out, s[i]);
    }
  }
}

gsize
llm_tokenizer_token_to_piece (const LlmTokenizer *tok, gint32 id, gboolean special,
    GString *out)
{
  const LlmVocab *v = tok->vocab;
  if (id < 0 || (guint32) id >= v->n_tokens)
    return 0;
  const LlmToken *t = &v->tokens[id];
  gsize before = out->len;

  switch (t->type) {
    case LLM_TOKEN_CONTROL:
    case LLM_TOKEN_UNKNOWN:
      if (special)
        g_string_append_len (out, t->text, t->len);
      break;
    case LLM_TOKEN_USER_DEFINED:
      g_string_append_len (out, t->text, t->len);
      break;
    case LLM_TOKEN_NORMAL:
      if (v->kind == LLM_VOCAB_SPM)
        append_unescaped (t->text, t->len, out);
      else
        llm_bpe_token_bytes (t->text, t->len, out);
      break;
    case LLM_TOKEN_BYTE: {
      int b = byte_token_value (t);
      if (b >= 0)
        g_string_append_c (out, (char) b);
      else
        g_string_append_len (out, t->text, t->len);
      break;
    }
    default:
      /* Unused and undefined tokens render as nothing, as in llama.cpp. */
      break;
  }
  return out->len - before;
}

void
llm_tokenizer_decode (const LlmTokenizer *tok, const gint32 *ids, gsize n,
    gboolean remove_special, gboolean unparse_special, gboolean strip_leading_space,
    GString *out)
{
  const LlmVocab *v = tok->vocab;
  gboolean strip = strip_leading_space && v->add_space_prefix;

  if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) {
    /* llama_detokenize keeps the space after a removed BOS. */
    strip = FALSE;
    ids++;
    n--;
  }
  if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos)
    n--;

  for (gsize i = 0; i < n; i++) {
    gsize start = out->len;
    gsize added = llm_tokenizer_token_to_piece (tok, ids[i], unparse_special, out);
    if (strip && added > 0 && out->str[start] == ' ')
      g_string_erase (out, start, 1);
    strip = FALSE;
  }
}
