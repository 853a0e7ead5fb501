/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "layer-search.h"

#include <string.h>

struct _LlmLayerSearch {
  guint n_layer, window;
  guint8 *best, *trial;       /* the incumbent set and the one drafting now */
  gboolean trying;            /* trial is a neighbour, not the incumbent */
  double best_value;          /* tokens per forward of the incumbent; 0 unmeasured */
  /* the window being measured */
  guint seen;
  double tokens, work;
  guint trials, kept;
  guint64 rng;
};

static guint64
next (LlmLayerSearch *s)
{
  guint64 z = (s->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static guint
count_kept (const LlmLayerSearch *s, const guint8 *mask)
{
  guint kept = 0;
  for (guint l = 0; l < s->n_layer; l++)
    kept += !mask[l];
  return kept;
}

LlmLayerSearch *
llm_layer_search_new (guint n_layer, const guint8 *start, guint window, guint64 seed)
{
  g_return_val_if_fail (n_layer > 0 && start != NULL, NULL);
  LlmLayerSearch *s = g_new0 (LlmLayerSearch, 1);
  s->n_layer = n_layer;
  s->window = window > 0 ? window : 16;
  s->best = g_memdup2 (start, n_layer);
  s->trial = g_memdup2 (start, n_layer);
  s->rng = seed;
  return s;
}

void
llm_layer_search_free (LlmLayerSearch *s)
{
  if (s == NULL)
    return;
  g_free (s->best);
  g_free (s->trial);
  g_free (s);
}

const guint8 *
llm_layer_search_mask (const LlmLayerSearch *s)
{
  return s->trial;
}

const guint8 *
llm_layer_search_best (const LlmLayerSearch *s, double *value)
{
  if (value)
    *value = s->best_value;
  return s->best;
}

guint
llm_layer_search_trials (const LlmLayerSearch *s, guint *kept)
{
  if (kept)
    *kept = s->kept;
  return s->trials;
}

/* A neighbour of the incumbent: one inner layer flipped, keeping at least
 * one layer run and one skipped. FALSE when the model has none to flip. */
static gboolean
neighbour (LlmLayerSearch *s)
{
  if (s->n_layer < 3)
    return FALSE;
  const guint inner = s->n_layer - 2, kept = count_kept (s, s->best);
  for (guint tries = 0; tries < 4 * inner; tries++) {
    const guint l = 1 + (guint) (next (s) % inner);
    const gboolean skip = !s->best[l];
    if ((skip && kept == 1) || (!skip && s->n_layer - kept == 1))
      continue;
    memcpy (s->trial, s->best, s->n_layer);
    s->trial[l] = skip;
    return TRUE;
  }
  return FALSE;
}

void
llm_layer_search_observe (LlmLayerSearch *s, guint proposed, guint accepted,
    gint64 elapsed_us)
{
  if (proposed == 0)
    return;
  /* accepted + 1 tokens for one verification and @proposed draft steps. */
  s->tokens += MIN (accepted, proposed) + 1;
  s->work += elapsed_us > 0 ? (double) elapsed_us
      : 1.0 + proposed * (double) count_kept (s, s->trial) / s->n_layer;
  if (++s->seen < s->window)
    return;
  const double value = s->tokens / s->work;
  s->seen = 0;
  s->tokens = s->work = 0;
  if (!s->trying) {
    /* The incumbent again: what it gives now (acceptance moves with the
     * text), half from before. */
    s->best_value = s->best_value > 0 ? 0.5 * (s->best_value + value) : value;
  } else {
    s->trials++;
    if (value > s->best_value) {
      memcpy (s->best, s->trial, s->n_layer);
      s->best_value = value;
      s->kept++;
    }
  }
  /* Alternate: a neighbour after each window of the incumbent. */
  s->trying = !s->trying && neighbour (s);
  if (!s->trying)
    memcpy (s->trial, s->best, s->n_layer);
}
