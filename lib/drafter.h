/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A drafter proposes the tokens a verifier checks in one forward
 * (llm_session_verify). It sees the conversation as the verifier tells
 * it: where a response begins (what the session holds, and the first
 * token, sampled but not fed) and every token the verifier confirms. One
 * interface for every method, so llmspecverify does not care which:
 * prompt lookup (ngram), a small model (model), or the target with
 * layers skipped (layerskip). Refcounted; calls on one drafter come from one thread at
 * a time (the verifier's); a model drafter drafting ahead
 * (llm_drafter_set_ahead) runs a thread of its own besides, joined when
 * the drafter goes. */
#pragma once

#include <glib.h>

#include "spec-budget.h"

#include "engine.h"
#include "session.h"

G_BEGIN_DECLS

typedef struct _LlmDrafter LlmDrafter;

/* Prompt lookup over the last @window tokens (ngram-draft.h); NULL with
 * @error for sizes it cannot take. */
LlmDrafter *llm_drafter_new_ngram (guint n_min, guint n_max, guint window, GError **error);
/* A small model of the same vocabulary, decoding greedily on a sequence
 * of its own in @engine (a window of @window tokens of the
 * conversation), a proposal after each token it is sure enough of: it
 * stops at the first whose probability is under @p_min (0: never). NULL
 * with @error when it cannot make the sequence. */
LlmDrafter *llm_drafter_new_model (LlmEngine *engine, guint window, float p_min,
    GError **error);
/* Self-speculative: the target itself with layers skipped (SWIFT's idea,
 * training-free) drafts greedily on a fork of the session's own sequence
 * (llm_seq_fork: the prefix's blocks are shared, copied on write), which
 * is dropped after each proposal; no second model, no second cache. The
 * @n_skip layer indices in @skip are skipped; with none, every other
 * layer of the middle half. With @adaptive that set is where a search
 * starts (layer-search.h): it moves one layer at a time to the set that
 * gives the most tokens per forward, from the verifier's verdicts.
 * llm_drafter_check_model says whether a model can be drafted for so. */
LlmDrafter *llm_drafter_new_layerskip (const guint *skip, guint n_skip, gboolean adaptive);
/* A layerskip drafter's best set so far (n_layer flags, *@n_layer of
 * them) and the search's trials and kept moves; NULL for other drafters
 * and before the first response. */
const guint8 *llm_drafter_skip_mask (const LlmDrafter *d, guint *n_layer, guint *trials,
    guint *kept);
/* FALSE with @error when @d cannot draft for @model (a layerskip drafter
 * naming layers it lacks, or skipping all of them). */
gboolean llm_drafter_check_model (LlmDrafter *d, LlmModel *model, GError **error);
LlmDrafter *llm_drafter_ref (LlmDrafter *d);
void llm_drafter_unref (LlmDrafter *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmDrafter, llm_drafter_unref)

/* "ngram", ... */
const char *llm_drafter_method (const LlmDrafter *d);

/* A response of @session begins after what it holds with @first (sampled,
 * not fed): proposals are for @session until the next begin. */
void llm_drafter_begin (LlmDrafter *d, LlmSession *session, gint32 first);
/* Up to @max proposals for the tokens after what it has seen; returns
 * how many (0: nothing worth checking). */
guint llm_drafter_propose (LlmDrafter *d, guint max, gint32 *out);
/* The same, and a draft model stops where @conf says drafting one more
 * would not pay (llm_spec_confidence_draft_on; NULL: at @max or p-min
 * alone) and gives each
 * proposal's probability by its softmax at its index of @probs (when not
 * NULL; NaN from the drafters that have none: prompt lookup, skipped
 * layers). Drafting ahead (llm_drafter_set_ahead) follows the @conf of
 * the proposal it continues. @max is at most LLM_SPEC_BUDGET_MAX. */
guint llm_drafter_propose_confident (LlmDrafter *d, guint max,
    const LlmSpecConfidence *conf, gint32 *out, float *probs);
/* The verifier confirmed @n more tokens. */
void llm_drafter_accept (LlmDrafter *d, const gint32 *ids, guint n);
/* The first proposal into @out, where making one costs nothing and
 * changes nothing (prompt lookup; FALSE for the model drafters, and where
 * the lookup finds nothing): a step that checks no proposal can still
 * tell the budget whether the drafter would have been right. */
gboolean llm_drafter_guess (LlmDrafter *d, gint32 *out);
/* How many tokens of context the next proposal follows, where the
 * drafter can tell for free (prompt lookup's match, 1 to ngram-max); 0
 * where it cannot (the model drafters) or found nothing. For
 * llm_spec_budget_set_match. */
guint llm_drafter_match (LlmDrafter *d);

/* Pipelined drafting (PEARL), for a model drafter (others ignore it):
 * after each proposal a thread of the drafter's drafts on while the
 * verifier checks it, as if all of it will be kept, after a guess of the
 * target's next token (the draft's own pick). A verdict that keeps the
 * proposal and picks the guess finds the next proposal begun; any other
 * stops that drafting and takes it back. The proposals are the ones the
 * drafter makes without (but for the rounding of forwards of other
 * widths), so the output is too. Off until set; the thread is joined
 * when the drafter goes. */
void llm_drafter_set_ahead (LlmDrafter *d, gboolean ahead);
gboolean llm_drafter_get_ahead (const LlmDrafter *d);
/* Since the drafter was made: proposals begun ahead (a verdict confirmed
 * the guess, and they were asked for), and drafts ahead thrown away (a
 * verdict refuted them, no proposal asked for them, or a response
 * began). */
void llm_drafter_ahead_counts (const LlmDrafter *d, guint64 *used, guint64 *discarded);

G_END_DECLS
