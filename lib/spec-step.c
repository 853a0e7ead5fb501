/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "spec-step.h"

#include <math.h>

gboolean
llm_spec_step (LlmSession *session, LlmDrafter *drafter, LlmSpecBudget *budget, gint32 token,
    guint limit, gint32 *out, guint *n_out, LlmSpecStats *stats, GError **error)
{
  gint32 ids[1 + LLM_SPEC_BUDGET_MAX];
  ids[0] = token;
  guint64 used0 = 0, discarded0 = 0;
  if (drafter)
    llm_drafter_ahead_counts (drafter, &used0, &discarded0);
  /* The drafting is part of the step's cost, as the planner weighs it. */
  const gint64 t0 = g_get_monotonic_time ();
  if (drafter)
    llm_spec_budget_set_match (budget, llm_drafter_match (drafter));
  /* Proposals past what the response may still make would be checked
   * for nothing (and counted as accepted though never output). */
  const guint k = drafter ? MIN (llm_spec_budget_choose (budget),
      limit > 0 ? limit - 1 : G_MAXUINT) : 0;
  /* A dynamic budget lets a draft model stop where it is unsure, and
   * learns from how sure it was. */
  LlmSpecConfidence conf;
  float probs[LLM_SPEC_BUDGET_MAX];
  const gboolean dynamic = !budget->fixed;
  if (dynamic && k > 0)
    llm_spec_budget_confidence (budget, &conf);
  const guint m = k > 0 ? llm_drafter_propose_confident (drafter, k, dynamic ? &conf : NULL,
      ids + 1, probs) : 0;
  const gint64 drafted_at = g_get_monotonic_time ();
  /* A dynamic budget that chose no proposal still learns from the free
   * guess; one that may not draft (or is fixed) has nothing to learn. */
  gint32 guess;
  const gboolean guessed = k == 0 && drafter && !budget->fixed && budget->draft_max > 0
      && llm_drafter_guess (drafter, &guess);
  gboolean ok;
  if (m == 0) {
    *n_out = 1;
    ok = llm_session_step (session, token, out, error);
  } else {
    ok = llm_session_verify (session, ids, 1 + m, out, n_out, error);
  }
  if (!ok)
    return FALSE;
  llm_spec_budget_observe (budget, m, *n_out - 1, g_get_monotonic_time () - t0, drafted_at - t0);
  if (dynamic && m > 0 && !isnan (probs[0]))
    llm_spec_budget_observe_confidence (budget, probs, m, *n_out - 1);
  if (guessed)
    llm_spec_budget_observe_guess (budget, guess == out[0]);
  if (drafter)
    llm_drafter_accept (drafter, out, *n_out);
  if (stats) {
    stats->steps++;
    stats->lengths[MIN (m, LLM_SPEC_BUDGET_MAX)]++;
    if (m > 0) {
      stats->verifications++;
      stats->drafted += m;
      stats->accepted += *n_out - 1;
    }
    if (drafter) {
      guint64 used, discarded;
      llm_drafter_ahead_counts (drafter, &used, &discarded);
      stats->ahead_used += used - used0;
      stats->ahead_discarded += discarded - discarded0;
    }
  }
  return TRUE;
}

guint
llm_spec_stats_n_lengths (const guint64 *lengths)
{
  guint n = 1;
  for (guint k = 1; k <= LLM_SPEC_BUDGET_MAX; k++)
    if (lengths[k] > 0)
      n = k + 1;
  return n;
}
