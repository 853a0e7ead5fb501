/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which layers a self-speculative draft skips, chosen from measured
 * acceptance while it runs (SWIFT's idea, training-free), as a hill climb:
 * the current set drafts for a window of proposals, then a neighbour (one
 * layer more or less skipped) drafts for a window; the neighbour is kept
 * when it gave more tokens per unit of work. Work is the measured time of
 * the steps that drafted with the set (drafting and verifying), or, where
 * no time is given, target forwards: a verification is one, a draft step
 * the fraction of layers it runs. So a set that skips more and is
 * accepted as often wins, and one whose drafts are rejected loses however
 * cheap it is. The first and last
 * layers are never skipped. Deterministic for a seed. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LlmLayerSearch LlmLayerSearch;

/* Starts from @start (n_layer flags, 1 = skipped). @window proposals per
 * trial (0: 16). */
LlmLayerSearch *llm_layer_search_new (guint n_layer, const guint8 *start, guint window,
    guint64 seed);
void llm_layer_search_free (LlmLayerSearch *s);

/* The flags to draft with now. */
const guint8 *llm_layer_search_mask (const LlmLayerSearch *s);
/* The best set found so far and its tokens per unit of work (0 before
 * any window has been measured). */
const guint8 *llm_layer_search_best (const LlmLayerSearch *s, double *value);
/* Sets tried and kept so far. */
guint llm_layer_search_trials (const LlmLayerSearch *s, guint *kept);

/* A proposal of @proposed tokens drafted with the current mask, of which
 * the verifier accepted @accepted, in a step of @elapsed_us (drafting and
 * verifying; 0: not measured, count forwards). */
void llm_layer_search_observe (LlmLayerSearch *s, guint proposed, guint accepted,
    gint64 elapsed_us);

G_END_DECLS
