/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ngram-draft.h"

#include <string.h>

/* One filed n-gram: the @n tokens at @start of the history, followed by
 * the token at start + n. Filing it again moves @start to the newer
 * place, so a lookup finds the latest occurrence. */
typedef struct {
  guint32 hash;
  guint32 start;
  guint8 n;                   /* 0: empty slot */
} Entry;

struct _LlmNgramDraft {
  guint n_min, n_max, window;
  gint32 *hist;               /* 2 window tokens */
  guint len;
  Entry *table;               /* open addressing, linear probing */
  guint mask;
};

static guint32
hash_ngram (const gint32 *ids, guint n)
{
  guint32 h = 0x9e3779b9u * n;
  for (guint i = 0; i < n; i++) {
    h ^= (guint32) ids[i];
    h *= 0x01000193u;
    h ^= h >> 15;
  }
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  return h;
}

/* The slot holding the n-gram @ids (@n tokens, hash @h), or the empty
 * slot where it belongs. The table is never more than half full. */
static Entry *
find_slot (const LlmNgramDraft *d, const gint32 *ids, guint n, guint32 h)
{
  for (guint32 i = h & d->mask;; i = (i + 1) & d->mask) {
    Entry *e = &d->table[i];
    if (e->n == 0 || (e->hash == h && e->n == n
            && memcmp (d->hist + e->start, ids, n * sizeof *ids) == 0))
      return e;
  }
}

/* Files the n-grams that end just before the token at @j. */
static void
file_before (LlmNgramDraft *d, guint j)
{
  for (guint n = d->n_min; n <= d->n_max && n <= j; n++) {
    const gint32 *ids = d->hist + j - n;
    const guint32 h = hash_ngram (ids, n);
    Entry *e = find_slot (d, ids, n, h);
    *e = (Entry) { h, j - n, (guint8) n };
  }
}

LlmNgramDraft *
llm_ngram_draft_new (guint n_min, guint n_max, guint window)
{
  g_return_val_if_fail (n_min >= 1 && n_min <= n_max && n_max <= LLM_NGRAM_MAX_N, NULL);
  g_return_val_if_fail (window > n_max && window <= G_MAXUINT32 / 4 / LLM_NGRAM_MAX_N, NULL);
  LlmNgramDraft *d = g_new0 (LlmNgramDraft, 1);
  d->n_min = n_min;
  d->n_max = n_max;
  d->window = window;
  d->hist = g_new (gint32, 2 * (gsize) window);
  /* At most one entry per held token and n: keep the load under half. */
  const guint64 entries = 2 * (guint64) window * (n_max - n_min + 1);
  guint64 slots = 64;
  while (slots < 2 * entries)
    slots *= 2;
  d->table = g_new0 (Entry, slots);
  d->mask = (guint) (slots - 1);
  return d;
}

void
llm_ngram_draft_free (LlmNgramDraft *d)
{
  if (d == NULL)
    return;
  g_free (d->hist);
  g_free (d->table);
  g_free (d);
}

void
llm_ngram_draft_reset (LlmNgramDraft *d)
{
  g_return_if_fail (d != NULL);
  d->len = 0;
  memset (d->table, 0, ((gsize) d->mask + 1) * sizeof *d->table);
}

/* Keeps the last window tokens and files them again. */
static void
rebuild (LlmNgramDraft *d)
{
  const guint keep = d->window;
  memmove (d->hist, d->hist + d->len - keep, keep * sizeof *d->hist);
  d->len = keep;
  memset (d->table, 0, ((gsize) d->mask + 1) * sizeof *d->table);
  for (guint j = 1; j < keep; j++)
    file_before (d, j);
}

void
llm_ngram_draft_add (LlmNgramDraft *d, const gint32 *ids, guint n)
{
  g_return_if_fail (d != NULL && (ids != NULL || n == 0));
  for (guint i = 0; i < n; i++) {
    if (d->len == 2 * d->window)
      rebuild (d);
    d->hist[d->len] = ids[i];
    file_before (d, d->len);
    d->len++;
  }
}

/* The longest suffix of n_min to n_max tokens that occurred before, as
 * its length (0: none) and its latest earlier occurrence (@e). */
static guint
lookup (const LlmNgramDraft *d, const Entry **e)
{
  for (guint n = d->n_max; n >= d->n_min; n--) {
    if (d->len <= n)
      continue;
    /* The suffix itself is filed only when the next token comes, so what
     * is found lies before it, with its continuation in the history. */
    const gint32 *suffix = d->hist + d->len - n;
    *e = find_slot (d, suffix, n, hash_ngram (suffix, n));
    if ((*e)->n != 0)
      return n;
  }
  return 0;
}

guint
llm_ngram_draft_propose (LlmNgramDraft *d, guint max, gint32 *out)
{
  g_return_val_if_fail (d != NULL && (out != NULL || max == 0), 0);
  const Entry *e = NULL;
  const guint n = max > 0 ? lookup (d, &e) : 0;
  if (n == 0)
    return 0;
  /* What followed, and past the end of the history the same again: the
   * match ends period = len - from tokens before the end, so the text
   * repeats with that period (greedy decoding of small models falls
   * into such loops, and a one-token continuation would cap every
   * draft at one token). */
  const guint from = e->start + n, period = d->len - from;
  for (guint i = 0; i < max; i++)
    out[i] = i < period ? d->hist[from + i] : out[i - period];
  return max;
}

guint
llm_ngram_draft_match (const LlmNgramDraft *d)
{
  g_return_val_if_fail (d != NULL, 0);
  const Entry *e;
  return lookup (d, &e);
}

const gint32 *
llm_ngram_draft_history (const LlmNgramDraft *d, guint *n)
{
  g_return_val_if_fail (d != NULL && n != NULL, NULL);
  *n = d->len;
  return d->hist;
}
