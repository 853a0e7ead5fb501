/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "fetch-choice.h"

#include <math.h>

/* The first steps of an engine run cold (pages, caches, threads waking)
 * and say nothing of either way. */
#define SKIP_STEPS 2
/* Steps of the way in use between probes; for the first FIRST_VERDICTS
 * verdicts FIRST_EVERY, so a fresh engine settles within a dozen steps,
 * and never on fewer verdicts than that. */
#define PROBE_EVERY 16
#define FIRST_VERDICTS 3
/* ...and, where the average verdict has one way this much slower than
 * the other, PROBE_SLOW: a probe of a way much slower costs more than its
 * own step (plain AVX2 on Zen 5, where the hardware's way took 1.25x:
 * the step after it took 1.1-1.2x too), and a verdict that far off takes
 * more than a few probes to overturn anyway. */
#define FAR_APART 1.12
#define PROBE_SLOW 64
#define FIRST_EVERY 2
/* Weight of a verdict in their moving average, once FIRST_VERDICTS are
 * averaged as equals. */
#define VERDICT_WEIGHT 0.25
/* A verdict counts as at most this ratio either way: a step that lost
 * its core for a while says nothing of the way it fetched. */
#define VERDICT_MAX 1.25
/* The other way must be this much faster to take over, so two ways as
 * fast as each other do not take turns on noise. */
#define MARGIN 0.03
/* Cap of the verdict count (it only tells "few" from "enough"). */
#define VERDICTS_CAP 1024

static LlmFetch
other (LlmFetch f)
{
  return f == LLM_FETCH_KERNEL ? LLM_FETCH_HARDWARE : LLM_FETCH_KERNEL;
}

void
llm_fetch_choice_init (LlmFetchChoice *c)
{
  *c = (LlmFetchChoice) { .mode = LLM_FETCH_KERNEL, .next = LLM_FETCH_KERNEL };
}

/* A verdict @v (the probed way's time over the way in use's) into the
 * average, and the way it favours. */
static void
judge (LlmFetchChoice *c, double v)
{
  v = CLAMP (v, 1.0 / VERDICT_MAX, VERDICT_MAX);
  const double hw_over_kernel = c->mode == LLM_FETCH_KERNEL ? v : 1.0 / v;
  const double w = MAX (VERDICT_WEIGHT, 1.0 / (c->verdicts + 1));
  c->ratio += w * (hw_over_kernel - c->ratio);
  if (c->verdicts < VERDICTS_CAP)
    c->verdicts++;
  if (c->verdicts < FIRST_VERDICTS)
    return;
  const LlmFetch best = c->ratio < 1.0 - MARGIN ? LLM_FETCH_HARDWARE
      : c->ratio > 1.0 + MARGIN ? LLM_FETCH_KERNEL : c->mode;
  if (best != c->mode) {
    c->mode = best;
    /* The probe's step is the latest of the way taken over. */
    c->last = c->probe;
  }
}

LlmFetch
llm_fetch_choice_observe (LlmFetchChoice *c, double bytes, double ns)
{
  if (!(bytes > 0 && ns > 0))
    return c->next;
  const double s = ns / bytes;
  c->steps[c->next]++;
  if (c->steps[0] + c->steps[1] <= SKIP_STEPS)
    return c->next;
  if (c->next != c->mode) {
    /* A probe: judged against the steps before and after it. */
    c->probe = s;
    c->since_probe = 0;
    c->next = c->mode;
    return c->next;
  }
  if (c->probe > 0 && c->last > 0) {
    /* The faster of the two: one of them slowed by the system shall not
     * make the probe look fast (a bias to stay, as the margin). */
    const double last = c->last;
    c->last = s;
    judge (c, c->probe / MIN (last, s));
    c->probe = 0;
  } else {
    c->last = s;
  }
  c->since_probe++;
  const gboolean far = c->ratio > FAR_APART || c->ratio < 1.0 / FAR_APART;
  const guint every = c->verdicts < FIRST_VERDICTS ? FIRST_EVERY
      : far ? PROBE_SLOW : PROBE_EVERY;
  c->next = c->since_probe >= every ? other (c->mode) : c->mode;
  return c->next;
}
