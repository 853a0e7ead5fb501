/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "spec-budget.h"

#include <math.h>
#include <string.h>

/* Before anything is known: even odds for a proposal, and each extra row
 * of a step 10% of a one-row step (a decode step bound by reading the
 * weights; measured on CPUs: 2 rows 1.0-1.1x, 8 rows 1.2-2x). */
#define PRIOR_ACCEPT 0.5
#define PRIOR_SLOPE 0.1
/* Moving-average weights of a new observation. The first few are
 * averaged with the prior as equals (weight 1 / (seen + 2)), so a drafter
 * that fails from the start is dropped within a few steps, not the ~10 a
 * fixed weight would take. */
#define ACCEPT_WEIGHT 0.05
#define COST_WEIGHT 0.2
/* Steps of every width slow down and speed up together when the machine
 * does (another process, other streams in the engine, memory shared with
 * other tenants): each timed step moves a pace that scales all the
 * widths' costs by this weight, and its own width's cost only by what is
 * left. With costs kept apart, a width timed while the machine ran slow
 * looked dear next to one last timed while it ran fast, and the planner
 * chose by that: replayed on real text with every step 1.6x slower in
 * alternate runs of 10 to 80 steps (tests/test-spec.c), 0.971 of the
 * best fixed length on average and 0.897 at worst; 0.981 and 0.911 with
 * the pace. On this machine the gap showed in gst-llm-bench --spec ngram
 * as dynamic at 0.92 of the best fixed length in a run where memory
 * slowed. */
#define PACE_WEIGHT 0.3
/* A width's cost is its own after this many observations, starting from
 * the fastest of them; before, estimates from the widths that are known
 * stand unless an observation was faster. A first verification once took
 * 9 times a step (a stream the scheduler waited for), and the planner,
 * trusting it, never asked for two proposals again where two paid 1.2x. */
#define COST_TRUST 3
/* A known width's observation counts as at most this many times its cost:
 * a spike moves the average, but not by more than one step's weight. */
#define COST_SPIKE 2.0
/* A width not measured yet is estimated from the nearest measured one
 * below it, a row more costing what that one's rows did, with the prior
 * slope counted as this many rows of it: a width-1 step timed no dearer
 * than a plain one (noise) made every further proposal look free, and
 * the planner went from 1 to 8 proposals and spent 20-30 steps coming
 * back (replayed on real text at F16's step costs over 32 jitter
 * sequences: 0.962-0.978 of the best fixed length, 0.969-1.000 with
 * this). */
#define PRIOR_ROWS 2.0
/* A planner that chose 0 this many steps in a row checks one proposal;
 * each probe that fails doubles the wait, up to PROBE_MAX. */
#define PROBE_EVERY 16
#define PROBE_MAX 256
/* ...and, where a probe costs more than a plain step (a draft model
 * catching up on what was said since its last proposal: a prefill of up
 * to 64 tokens), waits long enough that probing costs at most this share
 * of the plain steps' time. */
#define PROBE_SHARE 0.02
/* Observations a later position's acceptance needs before its own
 * outweighs the position before it (llm_spec_budget_rate). */
#define SHRINK 8.0
/* Observations a position's acceptance in one state (after a miss, after
 * a full accept) needs before it outweighs the pooled one. Replayed on
 * real text of three workloads at two types' step costs over 32 jitter
 * sequences: 0.997 of the best fixed length on average without states,
 * 1.006 with them (the worst workload 0.969, now 0.991; 2 to 32 here all
 * gave 1.003-1.006 over 8 sequences). */
#define STATE_SHRINK 4.0
/* Observations a position's acceptance after a match of one token, or
 * of more, needs before it outweighs its state's (STATE_SHRINK). */
#define MATCH_SHRINK 8.0
/* Matches of at least this many tokens are the long ones. */
#define MATCH_LONG 2
/* What a long match's first proposal starts from: at least this, not
 * its state's average alone, which early in a response holds mostly the
 * short matches' misses (a reply's first lookups follow one token into
 * the prompt, and fail), so the planner came late to drafting long when
 * long matches began. TinyStories-656K's responses to the three
 * workloads: a first proposal after a match of 2 or more tokens was
 * right 0.81 of the time, after one token 0.47. Replayed (the tests
 * above), 1.000 of the best fixed length with steady speed and 0.981
 * with drifting speed; with this, 1.009 and 0.994. */
#define MATCH_LONG_FIRST 0.8
/* A planner drafting k now checks k + 1 every this many steps, so a
 * longer draft it judged too early is judged again. */
#define EXPLORE_EVERY 32
/* A drafter with no free guess stops drafting only where one proposal
 * would not pay even at this many standard errors above the first
 * position's average acceptance (hoping ()). */
#define STOP_HOPE 1.0

void
llm_spec_budget_init (LlmSpecBudget *b, guint draft_max, gboolean fixed)
{
  *b = (LlmSpecBudget) { 0 };
  for (guint i = 0; i < LLM_SPEC_BUDGET_MAX; i++)
    b->accept[i] = PRIOR_ACCEPT;
  /* A draft whose probabilities were calibrated would be kept as often as
   * they say: each band starts at its middle. */
  for (guint i = 0; i < LLM_SPEC_CONFIDENCE_BANDS; i++)
    b->accept_c[i] = (i + 0.5) / LLM_SPEC_CONFIDENCE_BANDS;
  b->probe_every = PROBE_EVERY;
  b->pace = 1.0;
  llm_spec_budget_configure (b, draft_max, fixed);
}

void
llm_spec_budget_configure (LlmSpecBudget *b, guint draft_max, gboolean fixed)
{
  b->draft_max = MIN (draft_max, LLM_SPEC_BUDGET_MAX);
  b->fixed = fixed;
}

/* Whether width @w's cost is its own measurements' (COST_TRUST). */
static gboolean
known (const LlmSpecBudget *b, guint w)
{
  return b->cost_seen[w] >= COST_TRUST;
}

/* The time of a step checking @w proposals: measured, or scaled from the
 * nearest measured width below it (one row more costing what its rows
 * did, weighed with PRIOR_SLOPE as PRIOR_ROWS says; PRIOR_SLOPE alone
 * while none is), or on the line between that one and the nearest
 * measured width above where there is one. Relative units while nothing
 * is measured; only ratios matter. */
static double
cost (const LlmSpecBudget *b, guint w)
{
  if (known (b, w))
    return b->cost_us[w];
  const double base = known (b, 0) ? b->cost_us[0] : 1.0;
  /* A proposal more: its row of the verification and its drafting (timed
   * now, so at today's pace). */
  double per = base * PRIOR_SLOPE + (known (b, 0) ? b->draft_us / b->pace : 0.0);
  guint from = 0;
  for (guint j = w; j-- > 1;) {
    if (known (b, j)) {
      from = j;
      if (known (b, 0))
        per = (MAX (0.0, b->cost_us[j] - base) + PRIOR_ROWS * per) / (j + PRIOR_ROWS);
      break;
    }
  }
  const double at = from > 0 ? b->cost_us[from] : base;
  double estimate = at + per * (w - from);
  /* Below a measured width, on the line up to it: a forward's cost can
   * rise in a step (Zen 5's F16: flat to 5 rows, then 1.3 steps), so from
   * below alone the widths just under a measured dear one looked cheap,
   * and the planner took 6 or 7 where 4 paid more (replayed on real text
   * at those costs, 0.977 and 0.976 of the best fixed length on caption
   * and transcript; 0.995 and 0.992 so; all twelve replays 1.002 ->
   * 1.005). */
  for (guint j = w + 1; known (b, 0) && j <= b->draft_max; j++) {
    if (known (b, j)) {
      estimate = at + (b->cost_us[j] - at) * (w - from) / (j - from);
      break;
    }
  }
  /* Observed but not known yet: only a faster observation counts (in
   * microseconds, once width 0 is known and the estimate is too). */
  return b->cost_seen[w] > 0 && known (b, 0) ? MIN (estimate, b->cost_us[w]) : estimate;
}

/* @own, an average of @n observations, pulled towards @towards as if
 * that had been seen @k more times. */
static double
pulled (double own, double n, double towards, double k)
{
  return (n * own + k * towards) / (n + k);
}

/* Position @i's acceptance as the planner weighs it, from @before, the
 * weighed acceptance of position i - 1: its own average pulled towards
 * @before as if that had been seen SHRINK more times. A position is only
 * reached when every one before it was accepted, so it is seen least,
 * and a few unlucky first verdicts would otherwise keep the planner from
 * ever asking for it again (on real text at 0.9 acceptance, three
 * rejections of a second proposal held it at one for a whole run, 1.31x
 * plain against 1.58x at a fixed two). */
static double
weighed_pooled (const LlmSpecBudget *b, guint i, double before)
{
  return i == 0 ? b->accept[0] : pulled (b->accept[i], b->seen[i], before, SHRINK);
}

/* The same in the planner's state (after a miss, after a full accept):
 * that state's own average pulled towards the pooled one as if that had
 * been seen STATE_SHRINK more times. Text that repeats itself does so in
 * runs, so a draft taken whole is followed by another more often than
 * the average says, and a miss by a miss. Where the drafter told how
 * much context its proposal follows, the average of that kind of match
 * in this state, pulled towards the state's likewise (MATCH_SHRINK):
 * prompt lookup that follows one token is right less often than one that
 * follows four (TinyStories-656K on the three workloads, 8 proposals: 2.3
 * to 2.9 accepted against 3.2 to 6.0). */
static double
weighed (const LlmSpecBudget *b, guint i, double before)
{
  const guint s = b->state;
  const double state = pulled (b->accept_in[s][i], b->seen_in[s][i],
      weighed_pooled (b, i, before), STATE_SHRINK);
  if (b->match_kind == 0)
    return state;
  const guint m = b->match_kind - 1;
  const double towards = m == 1 && i == 0 ? MAX (state, MATCH_LONG_FIRST) : state;
  return pulled (b->accept_m[s][m][i], b->seen_m[s][m][i], towards, MATCH_SHRINK);
}

double
llm_spec_budget_acceptance (const LlmSpecBudget *b, guint i)
{
  double p = 0.0;
  for (guint j = 0; j <= i && j < LLM_SPEC_BUDGET_MAX; j++)
    p = weighed_pooled (b, j, p);
  return p;
}

/* @rate[k] for k = 0 .. @k_max: the expected tokens of asking for k
 * proposals now, over the time of such a step. A step checking more
 * proposals is taken to cost at least what one checking fewer does (a
 * forward of more rows never costs less): measured apart, two widths'
 * times can come out the other way by noise alone, and the planner then
 * chose the wider for nothing (replayed on real text at F16's step costs,
 * where 1 to 4 proposals cost within 30% of a plain step: 0.956 of the
 * best fixed length on transcript, 0.965 with this). */
static void
rates (const LlmSpecBudget *b, guint k_max, gboolean pooled, double *rate)
{
  double expected = 1.0, reach = 1.0, p = 0.0, c = 0.0;
  for (guint k = 0; k <= k_max && k <= LLM_SPEC_BUDGET_MAX; k++) {
    c = MAX (c, cost (b, k));
    rate[k] = expected / c;
    if (k == LLM_SPEC_BUDGET_MAX)
      break;
    p = pooled ? weighed_pooled (b, k, p) : weighed (b, k, p);
    reach *= p;
    expected += reach;
  }
}

double
llm_spec_budget_step_us (const LlmSpecBudget *b, guint w)
{
  if (w <= LLM_SPEC_BUDGET_MAX && b->cost_seen[w] > 0)
    return b->pace * b->cost_us[w];
  /* A width only ever probed (one proposal, after plain steps) was timed
   * too, though its time, a catch-up included, is not the width's. */
  return w == 1 ? b->probe_us : 0.0;
}

double
llm_spec_budget_draft_us (const LlmSpecBudget *b)
{
  return b->draft_us;
}

double
llm_spec_budget_rate (const LlmSpecBudget *b, guint k)
{
  double rate[LLM_SPEC_BUDGET_MAX + 1];
  k = MIN (k, LLM_SPEC_BUDGET_MAX);
  rates (b, k, FALSE, rate);
  return rate[k];
}

void
llm_spec_budget_set_match (LlmSpecBudget *b, guint matched)
{
  b->match_kind = matched == 0 ? 0 : matched < MATCH_LONG ? 1 : 2;
}

/* The width of 1 .. draft_max with the best rate (rates(): @pooled,
 * @rate). */
static guint
best_width (const LlmSpecBudget *b, gboolean pooled, double *rate)
{
  rates (b, b->draft_max, pooled, rate);
  guint best = 1;
  for (guint k = 2; k <= b->draft_max; k++)
    if (rate[k] > rate[best])
      best = k;
  return best;
}

/* Whether one proposal would pay, rate @plain being a plain step's, at a
 * first-position acceptance STOP_HOPE standard errors above its average
 * (over the verdicts that average rests on: its count, up to the moving
 * average's own span). Idle, a drafter with no free guess (a model,
 * skipped layers) learns only from probes dozens of steps apart, so
 * stopping on an unlucky start costs it the run: with a draft model
 * right half the time at a quarter of a step a proposal (one proposal
 * pays 1.16x plain), a first miss read as 0.25 acceptance sent the
 * planner idle, a miss at the first probe or two kept it there, and 11
 * of 32 runs ended at 0.98x plain (tests/test-spec.c: 1.085x on average,
 * 1.150x with this; a drafter right a fifth of the time, where plain
 * steps are best, 0.978x and 0.974x). A drafter that is never right
 * still stops within a few steps, its average and its error falling
 * together. */
static gboolean
hoping (const LlmSpecBudget *b, double plain)
{
  const double p = b->accept[0];
  const double n = MAX (1.0, MIN ((double) b->seen[0], 1.0 / ACCEPT_WEIGHT));
  const double hope = MIN (1.0, p + STOP_HOPE * sqrt (p * (1.0 - p) / n));
  return (1.0 + hope) / MAX (cost (b, 1), cost (b, 0)) > plain;
}

guint
llm_spec_budget_choose (LlmSpecBudget *b)
{
  if (b->fixed || b->draft_max == 0)
    return b->draft_max;
  /* Costs are relative to a plain step's until three are timed, and
   * drafting that is a real part of a step cannot be weighed without
   * them: a fresh planner whose first verification of 2 proposals was
   * accepted whole went on to ask for 5 and 6 where each proposal
   * (skipped layers) cost 0.8 of a step. Prompt lookup, next to free,
   * drafts on from the start. */
  if (!known (b, 0) && b->draft_seen > 0 && b->draft_share > PRIOR_SLOPE)
    return 0;
  double rate[LLM_SPEC_BUDGET_MAX + 1];
  guint best = best_width (b, FALSE, rate);
  /* Stopping is decided on all the verdicts, not on one state's: idle,
   * a drafter with no free guess (a model) learns only from probes, so a
   * state's few early misses kept it from drafting for a long while. On
   * the machine (gst-llm-bench --spec model, caption), three misses
   * right after full accepts in the first 15 steps sent the planner idle
   * with 6 of 11 first proposals right, and it drafted again 60 steps
   * later. Prompt lookup tells its match, and its states are kept; the
   * rule (and hoping ()) keys on the step telling no match, so it also
   * takes prompt lookup's steps that found none, where nothing can be
   * drafted anyway: keyed on a drafter that has told a free guess
   * instead, the lookup replays went 1.010 -> 1.009 of the best fixed
   * length, their worst drifting sequence 0.962 -> 0.955. */
  if (rate[best] <= rate[0] && b->match_kind == 0)
    best = best_width (b, TRUE, rate);
  b->probing = FALSE;
  gboolean drafts = rate[best] > rate[0];
  if (!drafts && b->match_kind == 0 && hoping (b, rate[0])) {
    best = 1;
    drafts = TRUE;
  }
  if (drafts) {
    b->idle = 0;
    b->probe_every = PROBE_EVERY;
    /* A drafter that knows how sure it is stops by that
     * (llm_spec_confidence_draft_on): the width is only its ceiling. */
    if (b->confident)
      return b->draft_max;
    if (++b->drafting % EXPLORE_EVERY == 0 && best < b->draft_max)
      return best + 1;
    return best;
  }
  guint wait = b->probe_every;
  if (known (b, 0) && b->probe_us > 0) {
    /* What the last probe cost: a catch-up grows with the wait before it,
     * which the averages of width 1 do not follow. */
    const double plain = b->pace * b->cost_us[0];
    const double extra = (b->probe_us - plain) / (PROBE_SHARE * plain);
    wait = MAX (wait, (guint) MIN (extra, 16.0 * PROBE_MAX));
  }
  if (++b->idle < wait)
    return 0;
  b->idle = 0;
  b->probing = TRUE;
  return 1;
}

/* One more observation (@hit) in an acceptance average seen @seen times:
 * a plain mean at first, then an EMA of weight ACCEPT_WEIGHT. */
static void
average_in (double *accept, guint *seen, gboolean hit)
{
  const double w = MAX (ACCEPT_WEIGHT, 1.0 / (*seen + 2));
  *accept += w * ((hit ? 1.0 : 0.0) - *accept);
  if (*seen < G_MAXUINT)
    (*seen)++;
}

/* average_in for an average kept apart within a wider one, @parent,
 * where it starts. */
static void
average_in_from (double parent, double *accept, guint *seen, gboolean hit)
{
  if (*seen == 0)
    *accept = parent;
  average_in (accept, seen, hit);
}

/* Position @i's proposal was accepted (@hit) or not. */
static void
learn (LlmSpecBudget *b, guint i, gboolean hit)
{
  average_in (&b->accept[i], &b->seen[i], hit);
  const guint s = b->state;
  average_in_from (b->accept[i], &b->accept_in[s][i], &b->seen_in[s][i], hit);
  if (b->match_kind == 0)
    return;
  const guint m = b->match_kind - 1;
  average_in_from (b->accept_in[s][i], &b->accept_m[s][m][i], &b->seen_m[s][m][i], hit);
}

void
llm_spec_budget_observe_guess (LlmSpecBudget *b, gboolean right)
{
  learn (b, 0, right);
  b->state = right;
}

/* Drafting @drafted proposals took @draft_us of a step's @took_us. */
static void
learn_draft (LlmSpecBudget *b, guint drafted, double draft_us, double took_us)
{
  const double per = draft_us / drafted, share = MIN (draft_us / took_us, 1.0);
  if (b->draft_seen == 0) {
    b->draft_us = per;
    b->draft_share = share;
  } else {
    b->draft_us += COST_WEIGHT * (per - b->draft_us);
    b->draft_share += COST_WEIGHT * (share - b->draft_share);
  }
  if (b->draft_seen < G_MAXUINT)
    b->draft_seen++;
}

void
llm_spec_budget_observe (LlmSpecBudget *b, guint drafted, guint accepted, gint64 took_us,
    gint64 draft_us)
{
  drafted = MIN (drafted, LLM_SPEC_BUDGET_MAX);
  accepted = MIN (accepted, drafted);
  const gboolean probe = b->probing && drafted > 0;
  if (probe) {
    b->probe_every = accepted > 0 ? PROBE_EVERY : MIN (2 * b->probe_every, PROBE_MAX);
    b->probe_us = (double) MAX (took_us, 0);
  }
  b->probing = FALSE;
  /* Positions up to the first rejection were reached; later ones not. */
  for (guint i = 0; i < drafted && i <= accepted; i++)
    learn (b, i, i < accepted);
  if (drafted > 0)
    b->state = accepted == drafted;
  if (took_us <= 0)
    return;
  const double t = (double) took_us;
  /* A probe's time holds the drafter's catch-up on everything said while
   * it idled (a draft model feeds that in one forward before it
   * proposes): what the next probe costs, not what drafting or a width
   * does. Taken as theirs, it made drafting look dear and the planner
   * idle longer, so each probe after a longer wait cost more: replaying
   * the model drafter's tables (tests/test-spec.c), one jitter sequence
   * of transcript stopped drafting after 25 steps for good, with 0.8 of
   * the proposals right; 0.916 of the best fixed length on transcript,
   * 0.947 without. Catching up never makes a step faster, so a probe
   * faster than its width was taken to be still counts. */
  if (probe && !(known (b, drafted) && t < b->pace * b->cost_us[drafted]))
    return;
  if (drafted > 0 && !probe)
    learn_draft (b, drafted, (double) CLAMP (draft_us, 0, took_us), t);
  if (!known (b, drafted)) {
    /* The fastest of the first observations, at pace 1. */
    const double at = t / b->pace;
    b->cost_us[drafted] = b->cost_seen[drafted] == 0 ? at : MIN (b->cost_us[drafted], at);
    b->cost_seen[drafted]++;
  } else {
    /* Its share of the surprise moves every width; what is left, this one. */
    const double expect = b->pace * b->cost_us[drafted];
    const double seen = MIN (t, COST_SPIKE * expect);
    b->pace *= 1.0 + PACE_WEIGHT * (seen / expect - 1.0);
    b->cost_us[drafted] += COST_WEIGHT * (seen / b->pace - b->cost_us[drafted]);
  }
  /* Only pace times cost is ever observed, so the two can wander apart
   * over a long stream; folding the pace into the costs keeps both in
   * range and changes no product. */
  if (b->pace > 2.0 || b->pace < 0.5) {
    for (guint w = 0; w <= LLM_SPEC_BUDGET_MAX; w++)
      b->cost_us[w] *= b->pace;
    b->pace = 1.0;
  }
}

/* --- a drafter's confidence ------------------------------------------ */

static guint
band (float p)
{
  if (!(p > 0.0f))
    return 0;
  return MIN ((guint) (p * LLM_SPEC_CONFIDENCE_BANDS), LLM_SPEC_CONFIDENCE_BANDS - 1);
}

void
llm_spec_budget_observe_confidence (LlmSpecBudget *b, const float *p, guint drafted,
    guint accepted)
{
  drafted = MIN (drafted, LLM_SPEC_BUDGET_MAX);
  accepted = MIN (accepted, drafted);
  if (drafted == 0)
    return;
  b->confident = TRUE;
  for (guint i = 0; i < drafted && i <= accepted; i++) {
    const guint k = band (p[i]);
    average_in (&b->accept_c[k], &b->seen_c[k], i < accepted);
  }
}

void
llm_spec_budget_confidence (const LlmSpecBudget *b, LlmSpecConfidence *c)
{
  memcpy (c->accept, b->accept_c, sizeof c->accept);
  double seen = 0.0, kept = 0.0;
  for (guint i = 0; i < LLM_SPEC_CONFIDENCE_BANDS; i++) {
    seen += b->seen_c[i];
    kept += b->seen_c[i] * b->accept_c[i];
  }
  c->expect = seen > 0 ? kept / seen : PRIOR_ACCEPT;
  /* A token kept saves a plain step; a proposal more costs what the
   * widths' times say it adds (never less than nothing, as rates()
   * takes them): drafting, and its row of the verification, which on
   * Zen 5's F16 is next to free up to 4 proposals and then a third of a
   * step at once. */
  memset (c->min_gain, 0, sizeof c->min_gain);
  if (!known (b, 0))
    return;
  const double plain = cost (b, 0);
  double at = cost (b, 1);
  for (guint w = 1; w < b->draft_max; w++) {
    const double next = MAX (at, cost (b, w + 1));
    c->min_gain[w] = (next - at) / plain;
    at = next;
  }
}

double
llm_spec_budget_acceptance_by_confidence (const LlmSpecBudget *b, guint i)
{
  return i < LLM_SPEC_CONFIDENCE_BANDS ? b->accept_c[i] : 0.0;
}

gboolean
llm_spec_confidence_draft_on (const LlmSpecConfidence *c, guint n, float p, double *chance)
{
  *chance *= c->accept[band (p)];
  return n >= LLM_SPEC_BUDGET_MAX || *chance * c->expect >= c->min_gain[n];
}
