/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SentencePiece-style encoding (tokenizer.ggml.model = "llama"), reproducing
 * llama.cpp's llm_tokenizer_spm_session token for token: the ids a model was
 * trained and evaluated with are the ones llama.cpp produces, so every quirk
 * below (tie-breaking, how invalid UTF-8 is cut into symbols) is deliberate. */
#include <string.h>

#include "tokenizer-impl.h"

/* A run of bytes that may merge with its neighbours. Symbols stay contiguous
 * in the text (a merge only ever joins a symbol with its successor), so the
 * text of a pair is the left symbol's bytes extended by the right's length. */
typedef struct {
  gint32 prev, next;    /* -1 at the ends */
  guint32 off;
  guint32 n;            /* 0 once merged into its left neighbour */
} Symbol;

/* A candidate merge of two adjacent symbols. @size is the pair's length when
 * it was proposed: a later merge of either side changes that length, which
 * is how a stale entry is recognised without removing it from the heap. */
typedef struct {
  float score;
  gint32 left, right;
  guint32 size;
} Bigram;

typedef struct {
  const LlmVocab *vocab;
  const char *text;
  Symbol *syms;
  Bigram *heap;
  gsize heap_len, heap_cap;
} Session;

/* llama.cpp's unicode_len_utf8: the length is read from the lead byte alone
 * and continuation bytes count as one, so an invalid sequence still cuts the
 * text exactly where llama.cpp cuts it. */
static const guint8 utf8_len_by_high_nibble[16] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4
};

/* llama.cpp's std::priority_queue pops the highest score; among equal scores
 * the leftmost pair, which decides vocabularies whose scores all tie. */
static inline gboolean
bigram_before (const Bigram *a, const Bigram *b)
{
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void
heap_push (Session *s, const Bigram *b)
{
  if (s->heap_len == s->heap_cap) {
    s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 64;
    s->heap = g_renew (Bigram, s->heap, s->heap_cap);
  }
  gsize i = s->heap_len++;
  while (i > 0) {
    gsize parent = (i - 1) / 2;
    if (!bigram_before (b, &s->heap[parent]))
      break;
    s->heap[i] = s->heap[parent];
    i = parent;
  }
  s->heap[i] = *b;
}

static Bigram
heap_pop (Session *s)
{
  Bigram top = s->heap[0];
  Bigram last = s->heap[--s->heap_len];
  gsize n = s->heap_len, i = 0;
  for (;;) {
    gsize child = 2 * i + 1;
    if (child >= n)
      break;
    if (child + 1 < n && bigram_before (&s->heap[child + 1], &s->heap[child]))
      child++;
    if (!bigram_before (&s->heap[child], &last))
      break;
    s->heap[i] = s->heap[child];
    i = child;
  }
  if (n > 0)
    s->heap[i] = last;
  return top;
}

/* No token contains a NUL byte, and a lookup of text with an embedded NUL
 * could otherwise match the token spelled by the bytes before it. */
static gint32
lookup_token (const LlmVocab *vocab, const char *text, gsize len)
{
  if (len == 0 || memchr (text, '\0', len) != NULL)
    return -1;
  return llm_vocab_lookup (vocab, text, len);
}

static void
try_add_bigram (Session *s, gint32 left, gint32 right)
{
  if (left < 0 || right < 0)
    return;

  const Symbol *l = &s->syms[left];
  guint32 size = l->n + s->syms[right].n;
  gint32 id = lookup_token (s->vocab, s->text + l->off, size);
  if (id < 0 || (guint32) id >= s->vocab->n_tokens)
    return;

  Bigram b = { s->vocab->tokens[id].score, left, right, size };
  heap_push (s, &b);
}

static void
append_byte_tokens (const LlmVocab *vocab, const char *text, guint32 n, GArray *ids)
{
  for (guint32 i = 0; i < n; i++) {
    guint8 byte = (guint8) text[i];
    gint32 id = vocab->byte_token[byte];
    /* llama.cpp's byte_to_token falls back from <0xXX> to the byte itself
     * as a one-character token. */
    if (id < 0) {
      char c = (char) byte;
      id = lookup_token (vocab, &c, 1);
    }
    if (id < 0)
      id = vocab->unk;
    /* A vocabulary without the byte, its character or an unknown token has
     * no id for it at all; llama.cpp aborts here, we drop the byte. */
    if (id >= 0)
      g_array_append_val (ids, id);
  }
}

/* Spaces become U+2581, SentencePiece's visible word boundary, and a
 * leading one marks the first word as word-initial like every other. */
static char *
escape_whitespace (const char *text, gsize len, gboolean add_prefix, gsize *out_len)
{
  static const char marker[] = "\xe2\x96\x81";
  gsize spaces = 0;
  for (gsize i = 0; i < len; i++)
    spaces += text[i] == ' ';

  gsize n = (add_prefix ? 3 : 0) + len + spaces * 2;
  char *out = g_malloc (n + 1);
  char *p = out;
  if (add_prefix) {
    memcpy (p, marker, 3);
    p += 3;
  }
  for (gsize i = 0; i < len; i++) {
    if (text[i] == ' ') {
      memcpy (p, marker, 3);
      p += 3;
    } else {
      *p++ = text[i];
    }
  }
  *p = '\0';
  *out_len = n;
  return out;
}

void
llm_spm_encode (const LlmVocab *vocab, const char *text, gsize len,
    gboolean add_prefix, GArray *ids)
{
  g_return_if_fail (vocab != NULL && ids != NULL);
  g_return_if_fail (text != NULL || len == 0);

  gsize n;
  char *buf = escape_whitespace (text, len, add_prefix, &n);
  /* Symbol indices and offsets are 32-bit, as in llama.cpp. */
  if (n == 0 || n > G_MAXINT32) {
    g_free (buf);
    return;
  }

  Session s = { .vocab = vocab, .text = buf };
  s.syms = g_new (Symbol, n);
  gint32 n_syms = 0;
  for (gsize off = 0; off < n;) {
    gsize cl = MIN ((gsize) utf8_len_by_high_nibble[(guint8) buf[off] >> 4], n - off);
    Symbol *sym = &s.syms[n_syms];
    sym->off = (guint32) off;
    sym->n = (guint32) cl;
    sym->prev = n_syms - 1;
    off += cl;
    sym->next = off == n ? -1 : n_syms + 1;
    n_syms++;
  }

  for (gint32 i = 1; i < n_syms; i++)
    try_add_bigram (&s, i - 1, i);

  while (s.heap_len > 0) {
    Bigram b = heap_pop (&s);
    Symbol *left = &s.syms[b.left];
    Symbol *right = &s.syms[b.right];

    if (left->n == 0 || right->n == 0 || left->n + right->n != b.size)
      continue;

    left->n += right->n;
    right->n = 0;
    left->next = right->next;
    if (right->next >= 0)
      s.syms[right->next].prev = b.left;

    try_add_bigram (&s, left->prev, b.left);
    try_add_bigram (&s, b.left, left->next);
  }

  /* Every symbol left is either a token (it only grew by merging into one)
   * or a single, unmerged character. llama.cpp also keeps a map to split
   * non-token symbols back into their merge halves, but only tokens are
   * ever merged, so that path is never taken and the rest is bytes. */
  for (gint32 i = 0; i != -1; i = s.syms[i].next) {
    const Symbol *sym = &s.syms[i];
    gint32 id = lookup_token (vocab, buf + sym->off, sym->n);
    if (id >= 0)
      g_array_append_val (ids, id);
    else
      append_byte_tokens (vocab, buf + sym->off, sym->n, ids);
  }

  g_free (s.heap);
  g_free (s.syms);
  g_free (buf);
}
