/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp's
 * llm_tokenizer_bpe_session: pre-tokenize, map each word's bytes to GPT-2's
 * printable alphabet, merge adjacent symbols by lowest merge rank (leftmost
 * first on ties), then look the symbols up. */
#include "tokenizer-impl.h"
#include "pretokenize.h"
#include "unicode.h"

#include <string.h>

/* GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves; the
 * other 68 (0x00-0x20, 0x7f-0xa0, 0xad), in byte order, become U+0100
 * onwards, so that no token text holds a space or a control character. */
static inline gboolean
byte_is_printable (guint b)
{
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

static guint32
byte_to_cpt (guint8 b)
{
  if (byte_is_printable (b))
    return b;
  if (b <= 0x20)
    return 0x100 + b;
  if (b <= 0xa0)
    return 0x100 + 33 + (b - 0x7f);
  return 0x100 + 67;   /* 0xad */
}

/* -1 for a codepoint outside the alphabet */
static gint
cpt_to_byte (guint32 c)
{
  if (c < 0x100)
    return byte_is_printable (c) ? (gint) c : -1;
  if (c < 0x100 + 33)
    return c - 0x100;
  if (c < 0x100 + 67)
    return 0x7f + (c - 0x100 - 33);
  if (c == 0x100 + 67)
    return 0xad;
  return -1;
}

typedef struct {
  guint32 start;   /* byte offset in the encoded word */
  guint32 len;     /* 0 once merged into its left neighbour */
  gint32 prev, next;
} Symbol;

typedef struct {
  gint32 rank;
  gint32 left, right;
  guint32 size;    /* left + right length when queued, to spot stale pairs */
} Bigram;

typedef struct {
  const LlmVocab *vocab;
  GString *raw;      /* the word's UTF-8 bytes */
  GString *enc;      /* the same bytes in GPT-2's alphabet */
  GArray *symbols;   /* Symbol */
  GArray *heap;      /* Bigram, a binary min-heap */
  GArray *ids;
} Session;

/* Lower rank first, then the leftmost pair, as llama.cpp's priority queue. */
static inline gboolean
bigram_before (const Bigram *a, const Bigram *b)
{
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void
heap_push (GArray *heap, const Bigram *b)
{
  g_array_append_val (heap, *b);
  Bigram *h = (Bigram *) heap->data;
  guint i = heap->len - 1;
  while (i > 0) {
    guint parent = (i - 1) / 2;
    if (!bigram_before (&h[i], &h[parent]))
      break;
    Bigram tmp = h[i];
    h[i] = h[parent];
    h[parent] = tmp;
    i = parent;
  }
}

static Bigram
heap_pop (GArray *heap)
{
  Bigram *h = (Bigram *) heap->data;
  Bigram top = h[0];
  guint n = heap->len - 1;
  h[0] = h[n];
  g_array_set_size (heap, n);
  guint i = 0;
  for (;;) {
    guint l = 2 * i + 1, r = l + 1, best = i;
    if (l < n && bigram_before (&h[l], &h[best]))
      best = l;
    if (r < n && bigram_before (&h[r], &h[best]))
      best = r;
    if (best == i)
      break;
    Bigram tmp = h[i];
    h[i] = h[best];
    h[best] = tmp;
    i = best;
  }
  return top;
}

static void
try_bigram (Session *s, gint32 left, gint32 right)
{
  if (left < 0 || right < 0)
    return;
  const Symbol *sym = (const Symbol *) s->symbols->data;
  const char *enc = s->enc->str;
  gint32 rank = llm_vocab_merge_rank (s->vocab, enc + sym[left].start, sym[left].len,
      enc + sym[right].start, sym[right].len);
  if (rank < 0)
    return;
  Bigram b = { rank, left, right, sym[left].len + sym[right].len };
  heap_push (s->heap, &b);
}

static void
emit_symbol (Session *s, const char *text, gsize len)
{
  gint32 id = llm_vocab_lookup (s->vocab, text, len);
  if (id >= 0) {
    g_array_append_val (s->ids, id);
    return;
  }
  /* llama.cpp falls back to single bytes of the encoded text; in a GPT-2
   * vocabulary those are only the ASCII ones, others are dropped. */
  for (gsize i = 0; i < len; i++) {
    id = llm_vocab_lookup (s->vocab, text + i, 1);
    if (id >= 0)
      g_array_append_val (s->ids, id);
  }
}

/* Encodes the word in s->raw (at most G_MAXINT32 / 2 bytes). */
static void
encode_word (Session *s)
{
  const guint8 *raw = (const guint8 *) s->raw->str;
  gsize n = s->raw->len;

  if (n == 0)
    return;
  g_string_truncate (s->enc, 0);
  g_array_set_size (s->symbols, n);
  g_array_set_size (s->heap, 0);

  Symbol *sym = (Symbol *) s->symbols->data;
  for (gsize i = 0; i < n; i++) {
    char buf[4];
    guint k = llm_utf8_encode (byte_to_cpt (raw[i]), buf);
    sym[i].start = s->enc->len;
    sym[i].len = k;
    sym[i].prev = (gint32) i - 1;
    sym[i].next = (i + 1 < n) ? (gint32) i + 1 : -1;
    g_string_append_len (s->enc, buf, k);
  }

  if (s->vocab->ignore_merges && llm_vocab_lookup (s->vocab, s->enc->str, s->enc->len) >= 0) {
    emit_symbol (s, s->enc->str, s->enc->len);
    return;
  }

  for (gsize i = 1; i < n; i++)
    try_bigram (s, i - 1, i);

  while (s->heap->len > 0) {
    Bigram b = heap_pop (s->heap);
    sym = (Symbol *) s->symbols->data;
    Symbol *l = &sym[b.left], *r = &sym[b.right];
    /* Both alive means still adjacent (a symbol only grows by taking in its
     * right neighbour); the same sizes mean neither has grown since. */
    if (l->len == 0 || r->len == 0 || l->len + r->len != b.size)
      continue;
    l->len += r->len;
    r->len = 0;
    l->next = r->next;
    if (r->next >= 0)
      sym[r->next].prev = b.left;
    try_bigram (s, l->prev, b.left);
    try_bigram (s, b.left, l->next);
  }

  /* symbol 0 never merges into a left neighbour, so the chain starts there */
  sym = (Symbol *) s->symbols->data;
  for (gint32 i = 0; i != -1; i = sym[i].next)
    emit_symbol (s, s->enc->str + sym[i].start, sym[i].len);
}

/* Words are never this long in practice; splitting a monster word keeps
 * symbol offsets within 32 bits (each byte takes up to 2 encoded bytes). */
#define MAX_WORD_BYTES (G_MAXINT32 / 4)

void
llm_bpe_encode (const LlmVocab *vocab, const char *text, gsize len, GArray *ids)
{
  g_return_if_fail (vocab != NULL && ids != NULL);
  if (len == 0)
    return;
  g_return_if_fail (text != NULL);

  gsize n_cpts;
  guint32 *cpts = llm_utf8_to_cpts (text, len, &n_cpts);
  GArray *word_lens = g_array_new (FALSE, FALSE, sizeof (gsize));
  llm_pretokenize (vocab->pre, cpts, n_cpts, word_lens);

  Session s = {
    .vocab = vocab,
    .raw = g_string_new (NULL),
    .enc = g_string_new (NULL),
    .symbols = g_array_new (FALSE, FALSE, sizeof (Symbol)),
    .heap = g_array_new (FALSE, FALSE, sizeof (Bigram)),
    .ids = ids,
  };

  gsize at = 0;
  for (guint w = 0; w < word_lens->len; w++) {
    gsize end = at + g_array_index (word_lens, gsize, w);
    g_string_truncate (s.raw, 0);
    for (; at < end; at++) {
      char buf[4];
      g_string_append_len (s.raw, buf, llm_utf8_encode (cpts[at], buf));
      if (s.raw->len >= MAX_WORD_BYTES && at + 1 < end) {
        encode_word (&s);
        g_string_truncate (s.raw, 0);
      }
    }
    encode_word (&s);
  }

  g_string_free (s.raw, TRUE);
  g_string_free (s.enc, TRUE);
  g_array_unref (s.symbols);
  g_array_unref (s.heap);
  g_array_unref (word_lens);
  g_free (cpts);
}

void
llm_bpe_token_bytes (const char *text, gsize len, GString *out)
{
  gsize pos = 0;
  while (pos < len) {
    guint32 c = llm_utf8_decode (text, len, &pos);
    gint b = cpt_to_byte (c);
    if (b >= 0) {
      g_string_append_c (out, (char) b);
      continue;
    }
    /* llama.cpp's llama_decode_text marks a character outside the alphabet
     * with its UTF-8 bytes in hex followed by the whole token text. */
    char buf[4];
    guint k = llm_utf8_encode (c, buf);
    g_string_append (out, "[UNK_BYTE_0x");
    for (guint i = 0; i < k; i++)
      g_string_append_printf (out, "%02x", (guint8) buf[i]);
    g_string_append_len (out, text, len);
    g_string_append_c (out, ']');
  }
}
