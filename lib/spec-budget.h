/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How many proposals a speculative step checks. Training-free: it keeps
 * a moving average of the chance that the proposal at each position is
 * accepted, given that those before it were (pooled, and apart for after
 * a draft taken whole and after a miss, as runs of repetition make them
 * differ, and within those apart for prompt lookups that matched one
 * token or more, as far likelier right), and of the measured time of
 * a step that checks each number of proposals, and each step takes the
 * number k (0 included) whose expected tokens, 1 + p1 + p1 p2 + ... +
 * p1...pk, over its time is largest (a wider step's time taken as at
 * least a narrower one's, whatever noise says). Widths not measured yet
 * are estimated from the nearest measured one below (a proposal more
 * adding its row of the verification and its drafting, timed apart), or
 * on the line to the nearest measured one above where there is one, so
 * it tries them; a width's
 * own measurements count only from the third on (before, the fastest of
 * them, if faster than the estimate), so one slow step (a page fault, a
 * preempted thread) cannot keep it from being tried again. Likewise a
 * later position's acceptance leans on the position before it until it
 * has been seen a few times, and every 32nd drafting step checks one
 * proposal more than the best, so no length is judged once for good. A
 * drafter with no free guess (a model, skipped layers) stops only where
 * one proposal would not pay even at a standard error above the first
 * position's average acceptance: idle, it learns only from probes. A
 * planner that settled on plain steps checks one proposal now and then,
 * to notice drafts that start to succeed: after 16 plain steps, twice as
 * many after each probe that fails (up to 256), and never so often that
 * probes, at what the last one cost, take over 2% of the plain steps' time
 * (a draft model's probe first catches up on everything said since its
 * last proposal), so drafts that never succeed cost little. Where a
 * drafter's first proposal is free (prompt lookup), a plain step also
 * tells it whether that would have been right
 * (llm_spec_budget_observe_guess), so it learns on while it drafts
 * nothing: replayed on TinyStories-656K's text of three workloads
 * at two types' step costs (8 timing sequences each), 0.978 of the best
 * fixed length with probes alone, 0.987 with the guesses (the worst
 * sequence 0.894 and 0.939). A drafter whose proposals cost forwards (a
 * draft model, skipped layers) is weighed against plain steps timed first:
 * its costs mean nothing before. A draft model also tells the
 * probability its softmax gave each proposal: the budget learns how
 * often proposals of each band of probability are kept, and from then on
 * asks such a drafter for draft_max as a ceiling, the drafter going on
 * while the chance that all it drafted is kept, times how often a
 * proposal not drafted yet is, pays for what one more adds to the step:
 * replayed on the three workloads' draft tables, 1.049 of the best fixed
 * length against 0.970 by the position's acceptance alone. Pure
 * arithmetic: no clock, no threads. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define LLM_SPEC_BUDGET_MAX 64
/* Bands of a draft's probability for its proposal: [0, 0.2), [0.2,
 * 0.4), ... [0.8, 1]. */
#define LLM_SPEC_CONFIDENCE_BANDS 5

typedef struct {
  guint draft_max;
  gboolean fixed;                             /* always draft_max */
  double accept[LLM_SPEC_BUDGET_MAX];         /* P(position i accepted | i - 1 was) */
  guint seen[LLM_SPEC_BUDGET_MAX];            /* observations of it, up to a cap */
  double cost_us[LLM_SPEC_BUDGET_MAX + 1];    /* a step checking w proposals, at pace 1 */
  double pace;                                /* the machine's speed now: times cost_us */
  guint cost_seen[LLM_SPEC_BUDGET_MAX + 1];   /* its observations, up to a cap */
  double draft_us;                            /* drafting one proposal */
  double draft_share;                         /* of a drafting step's time */
  guint draft_seen;                           /* drafting steps, up to a cap */
  guint idle;                                 /* steps in a row that chose 0 */
  guint drafting;                             /* steps that chose more */
  guint probe_every;                          /* steps of 0 before a probe */
  gboolean probing;                           /* the last choice was a probe */
  double probe_us;                            /* the last probe's step, 0: none */
  double accept_in[2][LLM_SPEC_BUDGET_MAX];   /* accept, after a miss / a full accept */
  guint seen_in[2][LLM_SPEC_BUDGET_MAX];      /* observations of it, up to a cap */
  guint state;                                /* 1: the last verdict took every proposal */
  guint match_kind;                           /* now: 0 untold, 1 short match, 2 long */
  double accept_m[2][2][LLM_SPEC_BUDGET_MAX]; /* accept, by state and short / long match */
  guint seen_m[2][2][LLM_SPEC_BUDGET_MAX];    /* observations of it, up to a cap */
  gboolean confident;                         /* the drafter tells its confidence */
  double accept_c[LLM_SPEC_CONFIDENCE_BANDS]; /* accept, by the draft's probability */
  guint seen_c[LLM_SPEC_CONFIDENCE_BANDS];    /* observations of it, up to a cap */
} LlmSpecBudget;

/* What a drafter that knows how sure it is of each proposal (a draft
 * model: the probability its softmax gives the token it picks) needs to
 * decide on its own, proposal by proposal, whether drafting one more
 * pays: how often a proposal of each band of probability was kept (when
 * those before it were), how often one not drafted yet is likely to be,
 * and the least expected tokens that pay for one more draft forward and
 * its row of the verification, in plain steps. Taken by value, so
 * drafting ahead on another thread reads no budget that the verifier
 * updates. */
typedef struct {
  double accept[LLM_SPEC_CONFIDENCE_BANDS];
  double expect;
  /* [w]: what a step's w + 1st proposal adds to its time (drafting and
   * verifying), in plain steps; 0: draft on to the width */
  double min_gain[LLM_SPEC_BUDGET_MAX];
} LlmSpecConfidence;

/* Nothing measured yet; @draft_max at most LLM_SPEC_BUDGET_MAX. */
void llm_spec_budget_init (LlmSpecBudget *b, guint draft_max, gboolean fixed);
/* New settings, keeping what was measured. */
void llm_spec_budget_configure (LlmSpecBudget *b, guint draft_max, gboolean fixed);
/* What the drafter knows of its next proposal before making it: the
 * tokens of context that prompt lookup matched (llm_ngram_draft_match),
 * 0 where it tells nothing (the model drafters). Set before each
 * llm_spec_budget_choose; it holds for that step's observations. */
void llm_spec_budget_set_match (LlmSpecBudget *b, guint matched);
/* The number of proposals to ask for now (0..draft_max). */
guint llm_spec_budget_choose (LlmSpecBudget *b);
/* A step checked @drafted proposals, of which the first @accepted were
 * kept, in @took_us, @draft_us of it drafting them (0 where drafting
 * costs nothing worth timing). */
void llm_spec_budget_observe (LlmSpecBudget *b, guint drafted, guint accepted, gint64 took_us,
    gint64 draft_us);
/* A step that checked no proposal made the token the drafter's first
 * proposal there would have been (@right) or not: the first position's
 * acceptance goes on learning, free, while the planner drafts nothing. */
void llm_spec_budget_observe_guess (LlmSpecBudget *b, gboolean right);
/* A drafter's proposals had probabilities @p (by its own softmax) and the
 * first @accepted of @drafted were kept: the bands learn from those that
 * were reached. From then on llm_spec_budget_choose asks such a drafter
 * for up to draft_max and lets the confidence stop it. */
void llm_spec_budget_observe_confidence (LlmSpecBudget *b, const float *p, guint drafted,
    guint accepted);
/* What a confident drafter stops by now (LlmSpecConfidence): the
 * proposals' acceptance by band, and each further proposal's cost from
 * the widths' measured times (until a plain step is timed, nothing stops
 * drafting short of the width). */
void llm_spec_budget_confidence (const LlmSpecBudget *b, LlmSpecConfidence *c);
/* A drafter drafted its @n-th proposal (from 1), of probability @p,
 * *@chance being the chance that all before it are kept (1 before the
 * first; updated to include it): whether drafting one more pays. Nothing
 * is ever taken back, so no forward is spent on a proposal that is then
 * dropped. */
gboolean llm_spec_confidence_draft_on (const LlmSpecConfidence *c, guint n, float p,
    double *chance);

/* The moving average of acceptance of a confident drafter's proposals in
 * band @i (< LLM_SPEC_CONFIDENCE_BANDS) of its probability (for stats;
 * each band's prior, its middle, until it is seen). */
double llm_spec_budget_acceptance_by_confidence (const LlmSpecBudget *b, guint i);
/* The moving average of acceptance at position @i, over both states (for
 * stats). */
double llm_spec_budget_acceptance (const LlmSpecBudget *b, guint i);
/* The moving average of the measured time of a step checking @w
 * proposals, drafting included, in microseconds; for one proposal only
 * ever checked by probes, the last probe's time; 0 if none was timed
 * (for stats). */
double llm_spec_budget_step_us (const LlmSpecBudget *b, guint w);
/* The moving average of one proposal's drafting time, in microseconds; 0
 * if no drafting was timed (for stats). */
double llm_spec_budget_draft_us (const LlmSpecBudget *b);
/* The expected tokens per microsecond of asking for @k now (for tests
 * and stats). */
double llm_spec_budget_rate (const LlmSpecBudget *b, guint k);

G_END_DECLS
