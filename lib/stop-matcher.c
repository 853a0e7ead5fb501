/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Positions are bytes of the whole response's text; the kept text starts
 * at @base. Between calls it is at most the longest stop string less one
 * byte: only that tail can begin a stop string later text completes. */
#include "stop-matcher.h"

#include <string.h>

struct _LlmStopMatcher {
  char **stops;       /* non-empty */
  gsize longest;      /* 0: no stop strings */
  GString *text;      /* the response's text from @base on */
  guint64 base;
  GArray *ends;       /* guint64: where the text of each held token ends */
};

LlmStopMatcher *
llm_stop_matcher_new (const char *const *stops)
{
  LlmStopMatcher *m = g_new0 (LlmStopMatcher, 1);
  GPtrArray *kept = g_ptr_array_new ();

  for (guint i = 0; stops && stops[i]; i++) {
    if (stops[i][0] == '\0')
      continue;
    g_ptr_array_add (kept, g_strdup (stops[i]));
    m->longest = MAX (m->longest, strlen (stops[i]));
  }
  g_ptr_array_add (kept, NULL);
  m->stops = (char **) g_ptr_array_free (kept, FALSE);
  m->text = g_string_new (NULL);
  m->ends = g_array_new (FALSE, FALSE, sizeof (guint64));
  return m;
}

void
llm_stop_matcher_free (LlmStopMatcher *m)
{
  if (m == NULL)
    return;
  g_strfreev (m->stops);
  g_string_free (m->text, TRUE);
  g_array_unref (m->ends);
  g_free (m);
}

void
llm_stop_matcher_reset (LlmStopMatcher *m)
{
  g_string_truncate (m->text, 0);
  m->base = 0;
  g_array_set_size (m->ends, 0);
}

/* How many held tokens end at or before @pos. */
static guint
ending_by (const LlmStopMatcher *m, guint64 pos)
{
  guint n = 0;

  while (n < m->ends->len && g_array_index (m->ends, guint64, n) <= pos)
    n++;
  return n;
}

/* Earliest start of a stop string in the kept text, or -1. What precedes
 * the newest piece is shorter than the longest stop string and held no
 * shorter one (that would have stopped), so any match is a new one. */
static gssize
find_stop (const LlmStopMatcher *m)
{
  gssize best = -1;

  for (guint i = 0; m->stops[i]; i++) {
    gsize len = strlen (m->stops[i]);
    if (len > m->text->len)
      continue;
    const char *at = memmem (m->text->str, m->text->len, m->stops[i], len);
    if (at && (best < 0 || at - m->text->str < best))
      best = at - m->text->str;
  }
  return best;
}

/* Where the longest tail of the kept text that some stop string begins
 * with starts (the text's length when there is none). */
static gsize
partial_stop (const LlmStopMatcher *m)
{
  const GString *text = m->text;
  gsize best = text->len;

  for (guint i = 0; m->stops[i]; i++) {
    gsize len = strlen (m->stops[i]);
    for (gsize k = MIN (len - 1, text->len); k > 0; k--) {
      if (text->len - k < best && memcmp (text->str + text->len - k, m->stops[i], k) == 0) {
        best = text->len - k;
        break;
      }
    }
  }
  return best;
}

gboolean
llm_stop_matcher_add (LlmStopMatcher *m, const char *piece, gsize len, guint *n_release)
{
  if (m->longest == 0) {
    *n_release = 1;
    return FALSE;
  }

  g_string_append_len (m->text, piece, len);
  guint64 end = m->base + m->text->len;
  g_array_append_val (m->ends, end);

  gssize match = find_stop (m);
  if (match >= 0) {
    *n_release = ending_by (m, m->base + match);
    g_array_set_size (m->ends, 0);
    m->base += m->text->len;
    g_string_truncate (m->text, 0);
    return TRUE;
  }

  guint n = ending_by (m, m->base + partial_stop (m));
  /* Held tokens end at distinct bytes of a partial stop string, except
   * tokens without text (control tokens): only a run of those holds more
   * than the longest stop string has bytes, and then the oldest leave. */
  if (m->ends->len - n > m->longest)
    n = m->ends->len - m->longest;
  g_array_remove_range (m->ends, 0, n);
  *n_release = n;

  if (m->text->len >= m->longest) {
    gsize drop = m->text->len - (m->longest - 1);
    g_string_erase (m->text, 0, drop);
    m->base += drop;
  }
  return FALSE;
}

guint
llm_stop_matcher_n_held (const LlmStopMatcher *m)
{
  return m->ends->len;
}

gsize
llm_stop_matcher_text_len (const LlmStopMatcher *m)
{
  return m->text->len;
}
