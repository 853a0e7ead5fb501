/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "drafter.h"

#include "engine.h"
#include "ngram-draft.h"

typedef struct {
  const char *method;
  void (*begin) (LlmDrafter *d, const gint32 *history, guint n, gint32 first);
  guint (*propose) (LlmDrafter *d, guint max, gint32 *out);
  void (*accept) (LlmDrafter *d, const gint32 *ids, guint n);
  void (*finalize) (LlmDrafter *d);
} DrafterClass;

struct _LlmDrafter {
  const DrafterClass *klass;
  gint ref_count;
  LlmNgramDraft *ngram;
};

/* --- ngram ----------------------------------------------------------- */

static void
ngram_begin (LlmDrafter *d, const gint32 *history, guint n, gint32 first)
{
  llm_ngram_draft_reset (d->ngram);
  llm_ngram_draft_add (d->ngram, history, n);
  llm_ngram_draft_add (d->ngram, &first, 1);
}

static guint
ngram_propose (LlmDrafter *d, guint max, gint32 *out)
{
  return llm_ngram_draft_propose (d->ngram, max, out);
}

static void
ngram_accept (LlmDrafter *d, const gint32 *ids, guint n)
{
  llm_ngram_draft_add (d->ngram, ids, n);
}

static void
ngram_finalize (LlmDrafter *d)
{
  llm_ngram_draft_free (d->ngram);
}

static const DrafterClass ngram_class = {
  "ngram", ngram_begin, ngram_propose, ngram_accept, ngram_finalize,
};

LlmDrafter *
llm_drafter_new_ngram (guint n_min, guint n_max, guint window, GError **error)
{
  if (n_min < 1 || n_min > n_max || n_max > LLM_NGRAM_MAX_N || window <= n_max
      || window > G_MAXUINT32 / 4 / LLM_NGRAM_MAX_N) {
    g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CONFIG,
        "n-gram drafting needs 1 <= ngram-min (%u) <= ngram-max (%u) <= %u and a window "
        "(%u tokens) longer than ngram-max", n_min, n_max, LLM_NGRAM_MAX_N, window);
    return NULL;
  }
  LlmDrafter *d = g_new0 (LlmDrafter, 1);
  d->klass = &ngram_class;
  d->ref_count = 1;
  d->ngram = llm_ngram_draft_new (n_min, n_max, window);
  return d;
}

/* --- every method ------------------------------------------------------ */

LlmDrafter *
llm_drafter_ref (LlmDrafter *d)
{
  g_atomic_int_inc (&d->ref_count);
  return d;
}

void
llm_drafter_unref (LlmDrafter *d)
{
  if (d == NULL || !g_atomic_int_dec_and_test (&d->ref_count))
    return;
  d->klass->finalize (d);
  g_free (d);
}

const char *
llm_drafter_method (const LlmDrafter *d)
{
  return d->klass->method;
}

void
llm_drafter_begin (LlmDrafter *d, const gint32 *history, guint n, gint32 first)
{
  d->klass->begin (d, history, n, first);
}

guint
llm_drafter_propose (LlmDrafter *d, guint max, gint32 *out)
{
  return max > 0 ? d->klass->propose (d, max, out) : 0;
}

void
llm_drafter_accept (LlmDrafter *d, const gint32 *ids, guint n)
{
  d->klass->accept (d, ids, n);
}
