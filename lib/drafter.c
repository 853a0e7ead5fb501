/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "drafter.h"
#include "layer-search.h"

#include <math.h>
#include <string.h>

#include "model-private.h"
#include "ngram-draft.h"
#include "session.h"
#include "spec-budget.h"

/* Tokens a proposal may add to the draft model's window. */
#define LLM_SPEC_DRAFT_ROOM (LLM_SPEC_BUDGET_MAX + 1)

typedef struct {
  const char *method;
  void (*begin) (LlmDrafter *d, LlmSession *session, gint32 first);
  guint (*propose) (LlmDrafter *d, guint max, gint32 *out);
  void (*accept) (LlmDrafter *d, const gint32 *ids, guint n);
  void (*finalize) (LlmDrafter *d);
  /* It knows how sure it is of each proposal (a draft model's softmax):
   * it can stop by a confidence rule and report the probabilities. */
  gboolean confident;
} DrafterClass;

struct _LlmDrafter {
  const DrafterClass *klass;
  gint ref_count;
  LlmNgramDraft *ngram;
  /* model: the draft model's session holds the conversation up to
   * @pending (sampled by the verifier, not fed); a proposal feeds @fed
   * tokens of its own guessing after it, which the verdict then keeps or
   * takes back. (Counted from the end: the window may evict the oldest.) */
  LlmSession *session;
  gint32 pending;
  guint fed;
  guint window;
  /* Confirmed tokens after the held ones not fed yet: they are fed with
   * the next proposal's first forward, so steps that ask for no proposal
   * cost the draft model nothing, and catching up is one forward. */
  GArray *backlog;
  /* layerskip: the session drafted for, the layers asked to skip. */
  LlmSession *target;
  guint *skip;
  guint n_skip;
  gboolean adaptive;
  LlmLayerSearch *search;     /* adaptive: the skipped layers, from verdicts */
  guint n_layer;
  guint last_proposed;        /* the last proposal's length, for its verdict */
  gint64 proposed_at;         /* when drafting it began */
  float *logits;
  guint8 *mask;               /* the target's n_layer flags; NULL when it cannot draft */
  float p_min;
  /* The proposal being made: where a draft model stops by its confidence
   * (NULL: at the width), and where each proposal's probability goes
   * (NULL: nowhere). The verifier's thread's, for one propose call. */
  const LlmSpecConfidence *conf;
  float *probs;
  GError *error;              /* the first evaluation that failed: drafting stops */
  struct _Ahead *ahead;       /* model: drafting ahead, once asked for (llm_drafter_set_ahead) */
};

/* --- ngram ----------------------------------------------------------- */

static void
ngram_begin (LlmDrafter *d, LlmSession *session, gint32 first)
{
  llm_ngram_draft_reset (d->ngram);
  llm_ngram_draft_add (d->ngram, llm_session_ids (session), llm_session_n_ids (session));
  llm_ngram_draft_add (d->ngram, &first, 1);
}

static guint
ngram_propose (LlmDrafter *d, guint max, gint32 *out)
{
  guint n = llm_ngram_draft_propose (d->ngram, max, out);
  /* A continuation into a media row (LLM_TOKEN_EMBD) has no token to
   * propose. */
  for (guint i = 0; i < n; i++)
    if (out[i] < 0)
      return i;
  return n;
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
  "ngram", ngram_begin, ngram_propose, ngram_accept, ngram_finalize, FALSE,
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

/* --- model ----------------------------------------------------------- */

/* Feeds @ids, remembering the first failure (the drafter then proposes
 * nothing: a draft that cannot be made costs the output nothing). */
static void
model_feed (LlmDrafter *d, const gint32 *ids, guint n)
{
  if (n > 0 && d->error == NULL && !llm_session_feed (d->session, ids, n, &d->error))
    g_debug ("draft model: %s", d->error->message);
}

/* A backlog longer than this when a proposal is asked for (the planner
 * stopped drafting, and now probes) is not fed: the draft model starts
 * over from its last CATCH_UP_MAX tokens. Feeding a long backlog would
 * cost a prefill of everything said since, for one probe. */
#define CATCH_UP_MAX 64

/* Feeds the backlog (after @pending, when @with_pending) in one forward. */
static void
model_catch_up (LlmDrafter *d, gboolean with_pending)
{
  if (with_pending)
    g_array_append_val (d->backlog, d->pending);
  if (with_pending && d->backlog->len > CATCH_UP_MAX) {
    llm_session_reset (d->session);
    g_array_remove_range (d->backlog, 0, d->backlog->len - CATCH_UP_MAX);
  }
  model_feed (d, (const gint32 *) d->backlog->data, d->backlog->len);
  g_array_set_size (d->backlog, 0);
}

static void ahead_discard (LlmDrafter *d);

static void
model_begin (LlmDrafter *d, LlmSession *target, gint32 first)
{
  /* What a job drafted past the last response is matched below, as any
   * guess the draft holds. */
  if (d->ahead != NULL)
    ahead_discard (d);
  const gint32 *history = llm_session_ids (target);
  guint n = llm_session_n_ids (target);
  /* The draft model reads no media: it sees the text after the last media
   * row. */
  for (guint i = n; i > 0; i--) {
    if (history[i - 1] == LLM_TOKEN_EMBD) {
      history += i;
      n -= i;
      break;
    }
  }
  model_catch_up (d, FALSE);
  /* A kept conversation: only what the draft has not seen is fed. */
  const guint held = llm_session_n_ids (d->session);
  const gint32 *ids = llm_session_ids (d->session);
  guint same = 0;
  while (same < held && same < n && ids[same] == history[same])
    same++;
  if (same < held)
    llm_session_truncate (d->session, same);
  /* Starting over: the latest half window is context enough, and leaves
   * the window room to draft in. */
  const guint from = same > 0 || n <= d->window / 2 ? same : n - d->window / 2;
  model_feed (d, history + from, n - from);
  d->pending = first;
  d->fed = 0;
}

/* Under this a proposal's probability need not be exact: it falls in
 * LlmSpecConfidence's lowest band whatever it is. */
#define CONFIDENCE_FLOOR (1.0f / LLM_SPEC_CONFIDENCE_BANDS)

/* A proposal as draft_greedy() makes it: its tokens go to @out and each
 * one's probability to @probs (when not NULL) at its index, @n of them so
 * far and at most @max. Every proposal but the last is fed (*@fed counts
 * them); @last_fed says whether the last is too: it is when drafting
 * stopped unsure of the token after it (p_min). It stops where drafting
 * one more would not pay by @conf (when not NULL; @chance is the chance
 * that all so far are kept, and @on says whether @conf would have drafted
 * on), or once *@stop (when not NULL) is set. */
typedef struct {
  gint32 *out;
  float *probs;
  guint n, max;
  guint *fed;
  gboolean last_fed;
  const LlmSpecConfidence *conf;
  double chance;
  gboolean on;
  gint *stop;
} Proposal;

/* Greedy proposals into @p from p->n on, the first being @next (the pick
 * from the logits the session holds, not fed): up to p->max, fewer at a
 * token the draft is not sure enough of (p_min), where @p's rule or stop
 * says so, or at an error. Returns p->n. */
static guint
draft_greedy (LlmDrafter *d, gint32 next, Proposal *p)
{
  const guint32 n_vocab = llm_session_model (d->session)->hp.n_vocab;
  while (d->error == NULL) {
    float top = NAN;
    if (d->p_min > 0 || p->conf != NULL || p->probs != NULL)
      top = llm_top_probability_above (llm_session_logits (d->session), n_vocab,
          d->p_min > 0 ? MIN (d->p_min, CONFIDENCE_FLOOR) : CONFIDENCE_FLOOR);
    if (d->p_min > 0 && top < d->p_min)
      break;
    if (p->probs != NULL)
      p->probs[p->n] = top;
    p->out[p->n++] = next;
    p->last_fed = FALSE;
    p->on = p->conf == NULL || llm_spec_confidence_draft_on (p->conf, p->n, top, &p->chance);
    if (p->n == p->max || !p->on || (p->stop != NULL && g_atomic_int_get (p->stop))
        || !llm_session_step (d->session, next, &next, &d->error))
      break;
    (*p->fed)++;
    p->last_fed = TRUE;
  }
  return p->n;
}

/* --- model: drafting ahead ------------------------------------------- */

/* PEARL's pipelining. After a proposal d1..dk is handed out, a job on a
 * thread of the drafter's drafts on the draft model's session as if the
 * verifier will accept all of it: it guesses the target's own next token
 * (the draft's pick after dk), feeds it and drafts up to as many
 * proposals after it (the stash) while the verifier's forward runs. A
 * verdict that keeps d1..dk and picks the guess lets the job go on: its
 * stash starts the next proposal. Any other verdict stops it, and what it
 * fed joins the proposal's guesses, which the verdict keeps or takes
 * back. The verifier's thread touches the session only while no job
 * runs, so the session needs no more locking than it has; the draft
 * model's engine and the target's take submits from several threads
 * (scheduler.c), and engines of one thread count share one worker pool,
 * whose lock makes their forwards take turns on a CPU. A job drafts at
 * most as many as the proposal it follows, so the guesses the session
 * holds stay within 2 * LLM_SPEC_DRAFT_ROOM, the least window it has. */
typedef struct _Ahead {
  GThread *thread;            /* started with the first job */
  GMutex lock;
  GCond cond;
  gboolean quit;              /* lock: the drafter goes */
  gboolean asked;             /* lock: a job is asked for or running */
  gboolean guessed;           /* lock: the job's guess is known (-1 if it has none) */
  gint stop;                  /* atomic: the verifier wants the session back */
  gboolean on;                /* the verifier's from here on */
  /* a job's input, set before it is asked for */
  gint32 last;                /* the proposal's last token */
  gboolean last_fed;          /* the proposal fed it (it stopped unsure after it) */
  guint bound;                /* proposals to draft ahead, at most */
  /* its output: the job's until it is done (the guess: until guessed) */
  guint fed;                  /* tokens it fed after the proposal's */
  gint32 guess;
  gboolean guess_fed;
  gint32 stash[LLM_SPEC_BUDGET_MAX];
  float stash_probs[LLM_SPEC_BUDGET_MAX];
  double stash_chance;        /* that the stash is kept whole, by @conf */
  gboolean stash_on;          /* @conf would have drafted on after it */
  guint n_stash;
  gboolean stash_last_fed;
  /* the proposal's stopping rule, copied: the verifier's budget moves on */
  LlmSpecConfidence conf;
  gboolean has_conf;
  gboolean more;              /* stopped or bounded, not unsure: drafting may go on */
  /* the verifier's */
  gboolean unheard;           /* a job follows the last proposal, whose verdict is due */
  gboolean ready;             /* a verdict confirmed its guess: the stash is next */
  guint confirmed;            /* tokens that verdict confirmed, the proposal's fed ones */
  guint64 used, discarded;
} Ahead;

static void
ahead_job (LlmDrafter *d)
{
  Ahead *a = d->ahead;
  gint32 guess = -1;
  if (!g_atomic_int_get (&a->stop)) {
    if (!a->last_fed)
      model_feed (d, &a->last, 1);
    if (d->error == NULL) {
      a->fed += !a->last_fed;
      guess = llm_session_sample (d->session);
    }
  }
  g_mutex_lock (&a->lock);
  a->guess = guess;
  a->guessed = TRUE;
  g_cond_broadcast (&a->cond);
  g_mutex_unlock (&a->lock);
  if (guess < 0 || g_atomic_int_get (&a->stop))
    return;
  model_feed (d, &guess, 1);
  if (d->error != NULL)
    return;
  a->fed++;
  a->guess_fed = TRUE;
  Proposal p = { .out = a->stash, .probs = a->stash_probs, .max = a->bound, .fed = &a->fed,
    .last_fed = a->stash_last_fed, .conf = a->has_conf ? &a->conf : NULL, .chance = 1.0,
    .on = TRUE, .stop = &a->stop };
  a->n_stash = draft_greedy (d, llm_session_sample (d->session), &p);
  a->stash_last_fed = p.last_fed;
  a->stash_chance = p.chance;
  a->stash_on = p.on;
  a->more = d->error == NULL && a->n_stash > 0 && !a->stash_last_fed && a->stash_on;
}

static gpointer
ahead_main (gpointer data)
{
  LlmDrafter *d = data;
  Ahead *a = d->ahead;
  g_mutex_lock (&a->lock);
  for (;;) {
    while (!a->asked && !a->quit)
      g_cond_wait (&a->cond, &a->lock);
    if (a->quit)
      break;
    g_mutex_unlock (&a->lock);
    ahead_job (d);
    g_mutex_lock (&a->lock);
    a->asked = FALSE;
    a->guessed = TRUE;
    g_cond_broadcast (&a->cond);
  }
  g_mutex_unlock (&a->lock);
  return NULL;
}

/* Stops the job, if one runs, within the draft forward it is in. */
static void
ahead_stop (Ahead *a)
{
  g_atomic_int_set (&a->stop, TRUE);
  g_mutex_lock (&a->lock);
  while (a->asked)
    g_cond_wait (&a->cond, &a->lock);
  g_mutex_unlock (&a->lock);
}

/* Asks for a job after the proposal ending in @last. Without a thread to
 * run it, nothing is drafted ahead: the proposals are the same. */
static void
ahead_start (LlmDrafter *d, gint32 last, gboolean last_fed, guint bound)
{
  Ahead *a = d->ahead;
  ahead_stop (a);
  if (a->thread == NULL) {
    GError *error = NULL;
    a->thread = g_thread_try_new ("llm-draft-ahead", ahead_main, d, &error);
    if (a->thread == NULL) {
      g_debug ("draft model: not drafting ahead: %s", error->message);
      g_error_free (error);
      a->on = FALSE;
      return;
    }
  }
  a->last = last;
  a->last_fed = last_fed;
  a->bound = MIN (bound, LLM_SPEC_BUDGET_MAX);
  a->fed = 0;
  a->guess = -1;
  a->guess_fed = FALSE;
  a->n_stash = 0;
  a->stash_last_fed = FALSE;
  a->more = FALSE;
  a->has_conf = d->conf != NULL;
  if (d->conf != NULL)
    a->conf = *d->conf;
  g_atomic_int_set (&a->stop, FALSE);
  g_mutex_lock (&a->lock);
  a->asked = TRUE;
  a->guessed = FALSE;
  g_cond_broadcast (&a->cond);
  g_mutex_unlock (&a->lock);
  a->unheard = TRUE;
}

/* Stops a job the verifier will not use (its stash, or its verdict, is
 * not coming): what it fed joins the guesses after the confirmed tokens,
 * for the next verdict or begin to keep or take back. */
static void
ahead_discard (LlmDrafter *d)
{
  Ahead *a = d->ahead;
  if (!a->unheard && !a->ready)
    return;
  ahead_stop (a);
  d->fed += a->fed;
  if (a->ready)
    d->fed -= a->confirmed;
  a->unheard = a->ready = FALSE;
  a->discarded++;
}

/* The verdict @ids on a proposal a job drafts ahead of: TRUE when it keeps
 * the whole proposal and picks the guess, and the job goes on. The guess
 * may still be in the making: the verdict waits for it (one draft
 * forward at most). */
static gboolean
ahead_verdict (LlmDrafter *d, const gint32 *ids, guint n)
{
  Ahead *a = d->ahead;
  if (!a->unheard)
    return FALSE;
  gint32 guess = -1;
  if (n == d->last_proposed + 1) {
    g_mutex_lock (&a->lock);
    while (!a->guessed)
      g_cond_wait (&a->cond, &a->lock);
    guess = a->guess;
    g_mutex_unlock (&a->lock);
  }
  if (guess < 0 || ids[n - 1] != guess) {
    ahead_discard (d);
    return FALSE;
  }
  a->unheard = FALSE;
  a->ready = TRUE;
  a->confirmed = n;
  return TRUE;
}

/* The next proposal, up to @max, begun by the job a verdict confirmed:
 * its stash, cut to @max or drafted on to it. (Tokens as drafting after
 * the verdict would give them: the same greedy picks.) */
static guint
ahead_take (LlmDrafter *d, guint max, gint32 *out, gboolean *last_fed)
{
  Ahead *a = d->ahead;
  ahead_stop (a);
  a->ready = FALSE;
  a->used++;
  /* The session holds the confirmed tokens, then the guess and the
   * stash's as far as the job fed them. */
  d->fed = d->fed + a->fed - a->confirmed;
  if (!a->guess_fed) {
    /* Stopped before it fed the guess: drafting starts from it, as usual. */
    model_catch_up (d, TRUE);
    if (d->error != NULL)
      return 0;
    d->fed = 1;
    Proposal p = { .out = out, .probs = d->probs, .max = max, .fed = &d->fed,
      .last_fed = *last_fed, .conf = d->conf, .chance = 1.0, .on = TRUE };
    draft_greedy (d, llm_session_sample (d->session), &p);
    *last_fed = p.last_fed;
    return p.n;
  }
  guint n = MIN (a->n_stash, max);
  memcpy (out, a->stash, n * sizeof *out);
  if (d->probs != NULL)
    memcpy (d->probs, a->stash_probs, n * sizeof *d->probs);
  *last_fed = a->stash_last_fed;
  if (n < a->n_stash) {
    /* What it fed past the proposal is taken back, the proposal's last
     * token too, so the next job drafts on from the proposal's end. */
    const guint drop = a->n_stash - 1 + a->stash_last_fed - (n - 1);
    llm_session_truncate (d->session, llm_session_n_ids (d->session) - drop);
    d->fed -= drop;
    *last_fed = FALSE;
  } else if (n < max && a->more && d->error == NULL) {
    /* Stopped before the bound: drafted on, as the job would have. */
    gint32 next;
    if (!llm_session_step (d->session, out[n - 1], &next, &d->error))
      return n;
    d->fed++;
    *last_fed = TRUE;
    /* On from the stash's chance, by this proposal's rule. */
    Proposal p = { .out = out, .probs = d->probs, .n = n, .max = max, .fed = &d->fed,
      .last_fed = *last_fed, .conf = d->conf, .chance = a->stash_chance, .on = TRUE };
    n = draft_greedy (d, next, &p);
    *last_fed = p.last_fed;
  }
  return n;
}

static void
ahead_free (LlmDrafter *d)
{
  Ahead *a = d->ahead;
  if (a == NULL)
    return;
  ahead_stop (a);
  if (a->thread != NULL) {
    g_mutex_lock (&a->lock);
    a->quit = TRUE;
    g_cond_broadcast (&a->cond);
    g_mutex_unlock (&a->lock);
    g_thread_join (a->thread);
  }
  g_mutex_clear (&a->lock);
  g_cond_clear (&a->cond);
  g_free (a);
  d->ahead = NULL;
}

static guint
model_propose (LlmDrafter *d, guint max, gint32 *out)
{
  Ahead *a = d->ahead;
  guint n;
  gboolean last_fed = FALSE;
  if (a != NULL && a->unheard)
    ahead_discard (d);
  if (a != NULL && a->ready) {
    n = ahead_take (d, max, out, &last_fed);
  } else {
    /* The first forward: what is owed, and the pending token. */
    model_catch_up (d, TRUE);
    if (d->error != NULL)
      return 0;
    d->fed = 1;
    Proposal p = { .out = out, .probs = d->probs, .max = max, .fed = &d->fed,
      .last_fed = last_fed, .conf = d->conf, .chance = 1.0, .on = TRUE };
    n = draft_greedy (d, llm_session_sample (d->session), &p);
    last_fed = p.last_fed;
  }
  d->last_proposed = n;
  if (a != NULL && a->on && n > 0 && d->error == NULL)
    ahead_start (d, out[n - 1], last_fed, max);
  return n;
}

static void
model_accept (LlmDrafter *d, const gint32 *ids, guint n)
{
  g_return_if_fail (n >= 1 && n <= LLM_SPEC_DRAFT_ROOM);
  if (d->ahead != NULL) {
    /* A stash no proposal asked for (the step checked none). */
    if (d->ahead->ready)
      ahead_discard (d);
    if (ahead_verdict (d, ids, n)) {
      /* The proposal's fed tokens are confirmed, the guess is pending. */
      d->pending = ids[n - 1];
      d->last_proposed = 0;
      return;
    }
  }
  d->last_proposed = 0;

  /* What follows the held ids now: the pending token and all but the last
   * of @ids (the verifier's new pending one). The proposal fed its own
   * guesses there; keep those that agree, feed the rest. */
  gint32 now[LLM_SPEC_DRAFT_ROOM];
  now[0] = d->pending;
  for (guint i = 0; i + 1 < n; i++)
    now[i + 1] = ids[i];
  const guint held = llm_session_n_ids (d->session);
  const guint fed = MIN (d->fed, held);
  const gint32 *guessed = llm_session_ids (d->session) + held - fed;
  guint keep = 0;
  while (keep < fed && keep < n && guessed[keep] == now[keep])
    keep++;
  if (keep < fed)
    llm_session_truncate (d->session, held - fed + keep);
  g_array_append_vals (d->backlog, now + keep, n - keep);
  d->pending = ids[n - 1];
  d->fed = 0;
  /* A window's worth owed: feed it rather than grow. */
  if (d->backlog->len >= d->window / 2)
    model_catch_up (d, FALSE);
}

static void
model_finalize (LlmDrafter *d)
{
  ahead_free (d);
  g_array_unref (d->backlog);
  llm_session_unref (d->session);
  g_clear_error (&d->error);
}

static const DrafterClass model_class = {
  "model", model_begin, model_propose, model_accept, model_finalize, TRUE,
};

LlmDrafter *
llm_drafter_new_model (LlmEngine *engine, guint window, float p_min, GError **error)
{
  if (window < 2 * LLM_SPEC_DRAFT_ROOM) {
    g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CONFIG,
        "a draft model needs a window of at least %u tokens, not %u", 2 * LLM_SPEC_DRAFT_ROOM,
        window);
    return NULL;
  }
  LlmSessionConfig cfg = {
    .kv = { .type = LLM_KV_F16, .policy = LLM_KV_POLICY_WINDOW, .window = window },
  };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  LlmSession *session = llm_session_new (engine, &cfg, error);
  if (session == NULL)
    return NULL;
  LlmDrafter *d = g_new0 (LlmDrafter, 1);
  d->klass = &model_class;
  d->ref_count = 1;
  d->session = session;
  d->p_min = p_min;
  d->window = window;
  d->backlog = g_array_new (FALSE, FALSE, sizeof (gint32));
  return d;
}

/* --- layerskip ------------------------------------------------------- */

/* @n_layer flags of the layers @d skips in a model of that many; FALSE
 * when it names one past them or would skip them all. */
static gboolean
skip_mask (const LlmDrafter *d, guint n_layer, guint8 *mask)
{
  memset (mask, 0, n_layer);
  if (d->n_skip == 0) {
    for (guint l = n_layer / 4; l < 3 * n_layer / 4; l++)
      mask[l] = (l - n_layer / 4) % 2 == 0;
  }
  for (guint i = 0; i < d->n_skip; i++) {
    if (d->skip[i] >= n_layer)
      return FALSE;
    mask[d->skip[i]] = 1;
  }
  guint kept = 0;
  for (guint l = 0; l < n_layer; l++)
    kept += !mask[l];
  return kept > 0;
}

static void
layerskip_begin (LlmDrafter *d, LlmSession *session, gint32 first)
{
  if (d->target != session) {
    g_clear_pointer (&d->target, llm_session_unref);
    d->target = llm_session_ref (session);
    const LlmModel *model = llm_session_model (session);
    g_free (d->logits);
    d->logits = g_new (float, model->hp.n_vocab);
    /* Another session of the same model keeps what the search found. */
    if (d->mask == NULL || d->n_layer != model->hp.n_layer) {
      g_free (d->mask);
      g_clear_pointer (&d->search, llm_layer_search_free);
      d->n_layer = model->hp.n_layer;
      d->mask = g_new (guint8, d->n_layer);
      if (!skip_mask (d, d->n_layer, d->mask))
        g_clear_pointer (&d->mask, g_free);
      else if (d->adaptive)
        d->search = llm_layer_search_new (d->n_layer, d->mask, 0, 20261201);
    }
  }
  d->pending = first;
  d->last_proposed = 0;
}

static guint
layerskip_propose (LlmDrafter *d, guint max, gint32 *out)
{
  if (d->mask == NULL)
    return 0;
  LlmModel *model = llm_session_model (d->target);
  /* The target's cache up to the pending token, shared; what the draft
   * writes past it goes with the fork. */
  d->proposed_at = g_get_monotonic_time ();
  LlmSeq *fork = llm_seq_fork (llm_session_seq (d->target));
  llm_seq_set_skip_layers (fork, d->search ? llm_layer_search_mask (d->search) : d->mask);
  gint32 tok = d->pending;
  guint n = 0;
  GError *error = NULL;
  while (n < max && llm_seq_eval_tokens (fork, &tok, 1, d->logits, FALSE, &error))
    out[n++] = tok = llm_argmax (d->logits, model->hp.n_vocab);
  if (error != NULL) {
    g_debug ("layerskip draft: %s", error->message);
    g_error_free (error);
  }
  llm_seq_free (fork);
  d->last_proposed = n;
  return n;
}

static void
layerskip_accept (LlmDrafter *d, const gint32 *ids, guint n)
{
  /* The verdict on the last proposal: its first n - 1 were kept. */
  if (d->search && d->last_proposed > 0)
    llm_layer_search_observe (d->search, d->last_proposed, n - 1,
        MAX (g_get_monotonic_time () - d->proposed_at, 1));
  d->last_proposed = 0;
  d->pending = ids[n - 1];
}

static void
layerskip_finalize (LlmDrafter *d)
{
  g_clear_pointer (&d->target, llm_session_unref);
  g_free (d->skip);
  g_free (d->logits);
  g_free (d->mask);
  llm_layer_search_free (d->search);
}

static const DrafterClass layerskip_class = {
  "layerskip", layerskip_begin, layerskip_propose, layerskip_accept, layerskip_finalize,
  FALSE,
};

const guint8 *
llm_drafter_skip_mask (const LlmDrafter *d, guint *n_layer, guint *trials, guint *kept)
{
  if (d->klass != &layerskip_class || d->mask == NULL)
    return NULL;
  if (n_layer)
    *n_layer = d->n_layer;
  guint t = 0, k = 0;
  if (d->search)
    t = llm_layer_search_trials (d->search, &k);
  if (trials)
    *trials = t;
  if (kept)
    *kept = k;
  return d->search ? llm_layer_search_best (d->search, NULL) : d->mask;
}

LlmDrafter *
llm_drafter_new_layerskip (const guint *skip, guint n_skip, gboolean adaptive)
{
  LlmDrafter *d = g_new0 (LlmDrafter, 1);
  d->klass = &layerskip_class;
  d->ref_count = 1;
  d->skip = g_memdup2 (skip, n_skip * sizeof *skip);
  d->n_skip = n_skip;
  d->adaptive = adaptive;
  return d;
}

gboolean
llm_drafter_check_model (LlmDrafter *d, LlmModel *model, GError **error)
{
  if (d->klass != &layerskip_class)
    return TRUE;
  const guint n_layer = model->hp.n_layer;
  g_autofree guint8 *mask = g_new (guint8, n_layer);
  if (skip_mask (d, n_layer, mask))
    return TRUE;
  g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CONFIG,
      "skip-layers must name layers below %u and leave at least one of them", n_layer);
  return FALSE;
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
llm_drafter_begin (LlmDrafter *d, LlmSession *session, gint32 first)
{
  d->klass->begin (d, session, first);
}

guint
llm_drafter_propose (LlmDrafter *d, guint max, gint32 *out)
{
  return llm_drafter_propose_confident (d, max, NULL, out, NULL);
}

guint
llm_drafter_propose_confident (LlmDrafter *d, guint max, const LlmSpecConfidence *conf,
    gint32 *out, float *probs)
{
  if (max == 0)
    return 0;
  max = MIN (max, LLM_SPEC_BUDGET_MAX);
  const gboolean knows = d->klass->confident;
  d->conf = knows ? conf : NULL;
  d->probs = knows ? probs : NULL;
  const guint n = d->klass->propose (d, max, out);
  d->conf = NULL;
  d->probs = NULL;
  if (!knows && probs != NULL)
    for (guint i = 0; i < n; i++)
      probs[i] = NAN;
  return n;
}

void
llm_drafter_accept (LlmDrafter *d, const gint32 *ids, guint n)
{
  d->klass->accept (d, ids, n);
}

guint
llm_drafter_match (LlmDrafter *d)
{
  return d->klass == &ngram_class ? llm_ngram_draft_match (d->ngram) : 0;
}

gboolean
llm_drafter_guess (LlmDrafter *d, gint32 *out)
{
  return d->klass == &ngram_class && ngram_propose (d, 1, out) == 1;
}

void
llm_drafter_set_ahead (LlmDrafter *d, gboolean ahead)
{
  if (d->klass != &model_class || (!ahead && d->ahead == NULL))
    return;
  if (d->ahead == NULL) {
    d->ahead = g_new0 (Ahead, 1);
    g_mutex_init (&d->ahead->lock);
    g_cond_init (&d->ahead->cond);
  }
  /* A job under way still meets its verdict. */
  d->ahead->on = ahead;
}

gboolean
llm_drafter_get_ahead (const LlmDrafter *d)
{
  return d->ahead != NULL && d->ahead->on;
}

void
llm_drafter_ahead_counts (const LlmDrafter *d, guint64 *used, guint64 *discarded)
{
  if (used)
    *used = d->ahead ? d->ahead->used : 0;
  if (discarded)
    *discarded = d->ahead ? d->ahead->discarded : 0;
}
