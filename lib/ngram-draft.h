/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Prompt-lookup drafting: proposes the tokens that followed the latest
 * earlier occurrence of the history's last n tokens, trying n from n_max
 * down to n_min. The history is the prompt and every token generated so
 * far (the one sampled last included); captions and transcripts repeat
 * themselves and their prompts, so their continuations are often there.
 *
 * The index is kept as tokens arrive: each new token files the n-grams
 * that end just before it under the position it sits at, so a proposal is
 * one lookup per n, never a scan of the history. A live stream's memory
 * stays bounded: only the last @window tokens are looked in (between
 * @window and 2 @window are held; the index is rebuilt from the last
 * @window each time 2 @window are reached, an amortised constant per
 * token). Pure GLib, no model. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LlmNgramDraft LlmNgramDraft;

/* 1 <= @n_min <= @n_max <= LLM_NGRAM_MAX_N; @window >= @n_max + 1. NULL
 * (and a critical warning) otherwise. */
#define LLM_NGRAM_MAX_N 16
LlmNgramDraft *llm_ngram_draft_new (guint n_min, guint n_max, guint window);
void llm_ngram_draft_free (LlmNgramDraft *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmNgramDraft, llm_ngram_draft_free)

/* Forgets the history (a new conversation). */
void llm_ngram_draft_reset (LlmNgramDraft *d);
/* Appends @n tokens to the history. */
void llm_ngram_draft_add (LlmNgramDraft *d, const gint32 *ids, guint n);
/* @max tokens to follow the history into @out: what followed the match,
 * and where that reaches the end of the history, the same again (the
 * text repeating with the period it shows). Returns @max, or 0 when no
 * suffix of n_min or more tokens occurred before. */
guint llm_ngram_draft_propose (LlmNgramDraft *d, guint max, gint32 *out);
/* How many tokens of the history's end the next proposal would follow
 * (n_min to n_max; 0: none): the longer, the likelier it is right. */
guint llm_ngram_draft_match (const LlmNgramDraft *d);

/* The tokens looked in now, oldest first (for tests). */
const gint32 *llm_ngram_draft_history (const LlmNgramDraft *d, guint *n);

G_END_DECLS
