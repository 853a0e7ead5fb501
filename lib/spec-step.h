/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One step of speculative decoding, as llmspecverify and the benchmark
 * run it: the planner says how many proposals to ask for, the drafter
 * proposes, the session checks them in one forward (or, with none, takes
 * a plain step), and the planner and drafter learn what came of it. */
#pragma once

#include <glib.h>

#include "drafter.h"
#include "session.h"
#include "spec-budget.h"

G_BEGIN_DECLS

typedef struct {
  guint64 steps;              /* every step */
  guint64 verifications;      /* steps that checked proposals */
  guint64 drafted;            /* proposals checked */
  guint64 accepted;           /* of those, kept */
  guint64 ahead_used;         /* proposals begun ahead (llm_drafter_set_ahead) */
  guint64 ahead_discarded;    /* drafts ahead thrown away */
  guint64 lengths[LLM_SPEC_BUDGET_MAX + 1];  /* steps by proposals checked (0: plain) */
} LlmSpecStats;

/* How many entries of an LlmSpecStats.lengths are worth reporting: up to
 * the longest step counted (1 when none drafted). */
guint llm_spec_stats_n_lengths (const guint64 *lengths);

/* The tokens after @token (sampled last, not fed) into @out (at most
 * LLM_SPEC_BUDGET_MAX + 1, and at most @limit where it is not 0: what a
 * response may still make), *@n_out of them, every one but the last fed
 * to @session (llm_session_verify's contract). With @drafter NULL, a
 * plain step. @stats, if not NULL, counts it. */
gboolean llm_spec_step (LlmSession *session, LlmDrafter *drafter, LlmSpecBudget *budget,
    gint32 token, guint limit, gint32 *out, guint *n_out, LlmSpecStats *stats, GError **error);

G_END_DECLS
