/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Continuous batching. Every stream's thread submits its rows and waits;
 * whichever waiting thread finds no forward running becomes the leader:
 * it takes the ready work of every pending request (the one decode row
 * of each stream, and up to max-prefill-chunk rows of the prompts, oldest
 * first), runs
 * it as one forward, hands out the results and steps down, and the next
 * waiter with work left leads the next forward. No scheduler thread, no
 * waiting for a batch to fill (unless max-batch-wait asks for it): a lone
 * stream runs its step at once, at single-stream speed, and a long
 * prompt is fed a chunk per forward so the other streams' steps are
 * never held up for more than one chunk. */
#include "engine-private.h"

typedef struct {
  LlmSeq *seq;
  const gint32 *tokens;
  const float *embd;          /* rows for the LLM_TOKEN_EMBD entries, or NULL */
  guint embd_next;            /* the next of them to evaluate */
  guint n;
  guint done;                 /* rows evaluated */
  float *logits;
  gboolean all_logits;
  GError *error;
  gboolean finished;
  gboolean restartable;       /* began on an empty sequence at position 0 */
  gint64 waiting_since;       /* since when, without a row done; 0: not waiting */
  GCond wake;                 /* its thread waits here, so a step wakes only
                               * the threads it concerns */
} SchedRequest;

/* How often a leader with nothing it can run (every request waits for KV
 * memory) looks again: memory comes free outside the scheduler, when a
 * stream is reset or freed or falls idle. */
#define WAIT_POLL_US 10000

/* A sequence without a request, unused for this long (and for four
 * one-row forwards), is idle, and may lose its KV to any other
 * (engine.h): long enough that a stream between two of its tokens, on
 * cores shared with many streams, is not taken for one whose response
 * ended. */
#define IDLE_US 20000

static gboolean
cancelled (const SchedRequest *r)
{
  const gint *flag = g_atomic_pointer_get (&r->seq->cancel);
  return flag != NULL && g_atomic_int_get (flag);
}

static void
finish_cancelled (SchedRequest *r)
{
  g_set_error_literal (&r->error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CANCELLED,
      "cancelled while waiting for KV memory that other streams hold");
  r->finished = TRUE;
}

/* Older sequences first (engine.h); one not ranked yet (a new stream)
 * after all that are. Ranks are read without eval_lock: a rank changing
 * meanwhile (an owner emptying its sequence) only changes an order. */
static gint
by_age (gconstpointer a, gconstpointer b, gpointer data)
{
  (void) data;
  const guint64 ax = llm_seq_rank ((*(SchedRequest *const *) a)->seq);
  const guint64 ay = llm_seq_rank ((*(SchedRequest *const *) b)->seq);
  return ax < ay ? -1 : ax > ay;
}

/* Rows of @r for this forward, at most @room. A decode step's one row is
 * always taken; prompt rows come out of @budget, which all the prompts of
 * a forward share, so a forward costs at most its decode steps plus
 * max-prefill-chunk prompt rows, however many prompts arrive at once: the
 * bound on every stream's token latency that the option promises. */
static guint
take_rows (const SchedRequest *r, guint room, guint *budget)
{
  const guint left = r->n - r->done;
  if (left == 1)
    return MIN (1, room);
  const guint take = MIN (MIN (left, *budget), room);
  *budget -= take;
  return take;
}

/* Adds what @r runs in this forward, at most what is left of the chunk. */
static void
add_request (LlmEngine *e, SchedRequest *r, LlmEvalRow *rows, guint *n_rows,
    LlmEvalSegment *segs, SchedRequest **reqs, guint *n_segs, guint *budget)
{
  const guint take = take_rows (r, LLM_FORWARD_CHUNK - *n_rows, budget);
  if (take == 0)
    return;
  segs[*n_segs] = (LlmEvalSegment) { r->seq, *n_rows, take, NULL, 0, r->embd_next };
  reqs[(*n_segs)++] = r;
  /* Row done goes where the sequence is now: a window that evicted in
   * an earlier forward of this request moved its positions down. */
  const guint32 pos0 = llm_seq_pos_next (r->seq) - (guint32) r->done;
  llm_engine_token_rows (r->seq, r->tokens, r->embd, &r->embd_next, r->n, pos0,
      r->logits, r->all_logits, r->done, take, rows + *n_rows);
  *n_rows += take;
}

/* kv-time-slice: the request that has waited longest for KV memory, once
 * for a slice, has the longest holder give its memory up before this
 * forward, where the waiter, older than that one now, takes it first. A
 * waiter still short of memory takes the next holder's in the next
 * forward, without waiting another slice. */
static void
take_turns (LlmEngine *e)
{
  if (e->opts.kv_time_slice_us == 0)
    return;
  const SchedRequest *waiter = NULL;
  for (GList *l = e->pending.head; l; l = l->next) {
    const SchedRequest *r = l->data;
    if (!r->finished && r->waiting_since > 0
        && (waiter == NULL || r->waiting_since < waiter->waiting_since))
      waiter = r;
  }
  const gint64 now = g_get_monotonic_time ();
  if (waiter != NULL && (guint64) (now - waiter->waiting_since) >= e->opts.kv_time_slice_us)
    llm_engine_take_turn (e, waiter->seq, now);
}

/* Runs one forward over the ready work of the pending requests and
 * marks what finished. Called by the leader with sched_lock held; drops
 * it while the forward runs. Returns whether anything moved: rows
 * evaluated or requests finished. */
static gboolean
lead_one_forward (LlmEngine *e)
{
  LlmEvalRow rows[LLM_FORWARD_CHUNK];
  LlmEvalSegment segs[LLM_FORWARD_CHUNK];
  SchedRequest *reqs[LLM_FORWARD_CHUNK];
  guint n_rows = 0, n_segs = 0;
  guint budget = e->opts.max_prefill_chunk;

  /* Decode steps first (one row each), which streams wait on between
   * tokens; the rest (prompts, verifications, recomputes) out of the
   * budget. Each in order of age: an older stream's work comes before a
   * younger one's, as it may take memory from it and never the reverse,
   * so a younger stream waiting for memory cannot crowd out the older
   * ones that hold it. A request whose stream stopped is done. */
  SchedRequest **order = g_newa (SchedRequest *, e->pending.length + 1);
  guint n_order = 0;
  for (GList *l = e->pending.head; l; l = l->next) {
    SchedRequest *r = l->data;
    if (r->finished)
      continue;
    if (cancelled (r))
      finish_cancelled (r);
    else
      order[n_order++] = r;
  }
  g_qsort_with_data (order, n_order, sizeof *order, by_age, NULL);
  take_turns (e);
  for (int pass = 0; pass < 2; pass++) {
    for (guint i = 0; i < n_order && n_rows < LLM_FORWARD_CHUNK; i++) {
      SchedRequest *r = order[i];
      if ((r->n - r->done == 1) == (pass == 0))
        add_request (e, r, rows, &n_rows, segs, reqs, &n_segs, &budget);
    }
  }
  e->idle_after_us = MAX (IDLE_US, 4 * e->last_step_us);
  g_mutex_unlock (&e->sched_lock);
  const gint64 t0 = g_get_monotonic_time ();
  if (n_segs > 0)
    llm_engine_eval_segments (e, rows, segs, n_segs, TRUE);
  const gint64 took = g_get_monotonic_time () - t0;
  g_mutex_lock (&e->sched_lock);
  e->sched_gen++;
  e->returning[1] = e->returning[0];
  e->returning[0] = 0;
  /* The streams waited for come back from a step; a forward with prompt
   * rows (hundreds of milliseconds, for a long prompt) says nothing
   * about how long that takes. */
  gboolean steps_only = TRUE;
  for (guint s = 0; s < n_segs; s++)
    steps_only &= segs[s].n == 1;
  if (n_segs > 0 && steps_only)
    e->last_step_us = took;

  gboolean moved = FALSE;
  /* (requests cancelled before the forward) */
  for (GList *l = e->pending.head; l; l = l->next)
    moved |= ((SchedRequest *) l->data)->finished;
  for (guint s = 0; s < n_segs; s++) {
    SchedRequest *r = reqs[s];
    /* Media rows are taken again from the first one not evaluated when
     * part of the segment did not run (no KV memory). */
    if (r->embd != NULL) {
      r->embd_next = segs[s].embd_first;
      for (guint k = r->done; k < r->done + segs[s].done; k++)
        r->embd_next += r->tokens[k] == LLM_TOKEN_EMBD;
    }
    r->done += segs[s].done;
    moved |= segs[s].done > 0;
    if (segs[s].done > 0)
      r->waiting_since = 0;
    /* Preempted by an older stream: a request that holds the whole
     * sequence starts over from the first row when its turn comes. */
    if (r->restartable && g_error_matches (segs[s].error, LLM_ENGINE_ERROR,
            LLM_ENGINE_ERROR_PREEMPTED)) {
      g_clear_error (&segs[s].error);
      llm_seq_clear (r->seq);
      r->done = 0;
      r->embd_next = 0;
      segs[s].may_wait = TRUE;
    }
    /* Others hold the memory: it waits for its turn, ahead of younger
     * streams' new work. */
    if (segs[s].may_wait) {
      g_clear_error (&segs[s].error);
      if (r->waiting_since == 0)
        r->waiting_since = t0;
      if (cancelled (r)) {
        finish_cancelled (r);
        moved = TRUE;
      }
      continue;
    }
    r->waiting_since = 0;
    if (segs[s].error) {
      r->error = segs[s].error;
      r->finished = TRUE;
      moved = TRUE;
    } else if (r->done == r->n) {
      r->finished = TRUE;
      if (!r->restartable)
        g_atomic_int_inc (&r->seq->steps_done);
      r->seq->finished_gen = e->sched_gen;
      e->returning[0]++;
    }
  }
  return moved;
}

/* @seq, if a stream the leader would wait for (its last request finished
 * in one of the last two forwards), is not any more: it is back with its
 * next request, or gone. Under sched_lock. */
static void
no_longer_returning (LlmEngine *e, LlmSeq *seq)
{
  for (guint back = 0; back < 2; back++) {
    if (e->sched_gen >= back + 1 && seq->finished_gen == e->sched_gen - back
        && e->returning[back] > 0) {
      e->returning[back]--;
      seq->finished_gen = 0;
    }
  }
}

void
llm_engine_sched_forget (LlmEngine *e, LlmSeq *seq)
{
  g_mutex_lock (&e->sched_lock);
  no_longer_returning (e, seq);
  g_mutex_unlock (&e->sched_lock);
}

/* The streams whose steps the last forwards ran are a sample away from
 * their next step. A forward started without them would leave them to run
 * alone in the next one, and streams would take turns instead of stepping
 * together: two streams would decode no faster than one. So the leader
 * waits for them, at most a quarter of the time of the last forward that
 * ran one-row steps only (a stream that finished its response, or whose
 * downstream blocks, costs that once; a freed one nothing). Not a quarter
 * of the last forward's, whatever it ran: after a 113-token prompt a
 * verification waited 35 ms, nine times its own time, for a stream that
 * had been freed. Streams of the forward before count too, so two
 * streams that fell out of step (each alone in every other forward) fall
 * back in. A lone stream has nobody to wait for and runs at once. Waking
 * a thread on two busy cores can take most of a millisecond, so tiny
 * models wait up to MIN_WAIT_US. */
#define MIN_WAIT_US 1000


static void
wait_for_returning (LlmEngine *e)
{
  if (e->returning[0] + e->returning[1] == 0)
    return;
  const gint64 t0 = g_get_monotonic_time ();
  const gint64 until = t0 + MAX (e->last_step_us / 4, MIN_WAIT_US);
  while (e->returning[0] + e->returning[1] > 0
      && g_cond_wait_until (&e->sched_cond, &e->sched_lock, until))
    ;
  e->n_waits++;
  e->waited_us += (guint64) (g_get_monotonic_time () - t0);
}

void
llm_engine_wait_stats (LlmEngine *e, guint64 *waits, guint64 *waited_us)
{
  g_mutex_lock (&e->sched_lock);
  if (waits)
    *waits = e->n_waits;
  if (waited_us)
    *waited_us = e->waited_us;
  g_mutex_unlock (&e->sched_lock);
}

gboolean
llm_engine_submit (LlmEngine *e, LlmSeq *seq, const gint32 *tokens, guint n, float *logits,
    gboolean all_logits, GError **error)
{
  return llm_engine_submit_embd (e, seq, tokens, NULL, n, logits, all_logits, error);
}

gboolean
llm_engine_submit_embd (LlmEngine *e, LlmSeq *seq, const gint32 *tokens, const float *embd,
    guint n, float *logits, gboolean all_logits, GError **error)
{
  g_return_val_if_fail (e != NULL && seq != NULL && seq->engine == e, FALSE);
  g_return_val_if_fail (tokens != NULL || n == 0, FALSE);
  if (n == 0)
    return TRUE;

  SchedRequest req = {
    .seq = seq, .tokens = tokens, .embd = embd, .n = n,
    .logits = logits, .all_logits = all_logits,
  };
  /* Not a sequence emptied by a preemption: its history is gone, and the
   * owner must feed it again (eval_lock: a preemption may be under way). */
  g_mutex_lock (&e->eval_lock);
  req.restartable = llm_seq_n (seq) == 0 && seq->pos0 == 0 && !seq->preempted;
  g_mutex_unlock (&e->eval_lock);
  g_mutex_lock (&e->sched_lock);
  g_atomic_int_set (&seq->pending, TRUE);
  no_longer_returning (e, seq);
  g_cond_init (&req.wake);
  g_queue_push_tail (&e->pending, &req);
  /* Only a leader waiting for company waits on sched_cond. */
  g_cond_signal (&e->sched_cond);
  while (!req.finished) {
    if (e->leader) {
      g_cond_wait (&req.wake, &e->sched_lock);
      continue;
    }
    e->leader = TRUE;
    if (e->opts.max_batch_wait_us > 0 && e->pending.length == 1) {
      const gint64 until = g_get_monotonic_time () + e->opts.max_batch_wait_us;
      while (e->pending.length == 1 && g_cond_wait_until (&e->sched_cond, &e->sched_lock,
              until))
        ;
    }
    wait_for_returning (e);
    /* Nothing could run: every request waits for memory. */
    if (!lead_one_forward (e))
      g_cond_wait_until (&e->sched_cond, &e->sched_lock,
          g_get_monotonic_time () + WAIT_POLL_US);
    /* Finished requests leave the queue and their threads wake; the first
     * unfinished one of another thread leads next. */
    for (GList *l = e->pending.head; l; ) {
      GList *next = l->next;
      SchedRequest *r = l->data;
      if (r->finished) {
        g_queue_delete_link (&e->pending, l);
        g_cond_signal (&r->wake);
      }
      l = next;
    }
    e->leader = FALSE;
    if (req.finished && e->pending.head != NULL)
      g_cond_signal (&((SchedRequest *) e->pending.head->data)->wake);
  }
  g_atomic_int_set (&seq->pending, FALSE);
  g_mutex_unlock (&e->sched_lock);
  g_cond_clear (&req.wake);

  if (req.error) {
    g_propagate_error (error, req.error);
    return FALSE;
  }
  return TRUE;
}
