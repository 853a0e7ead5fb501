/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What engine.c, seq.c and scheduler.c share. */
#pragma once

#include "engine.h"
#include "forward.h"
#include "kvpool.h"
#include "workers.h"

G_BEGIN_DECLS

struct _LlmEngine {
  gint ref_count;
  char *key;                  /* registry key; NULL when private */
  LlmModel *model;
  LlmEngineOptions opts;
  /* The options it was asked for, resolved (llm_engine_runs_with). */
  LlmEngineOptions asked;
  LlmWorkers *workers;
  LlmBackend *backend;
  LlmWeights *weights;        /* prepared for the backend, shared per model */
  LlmForward *fwd;
  LlmKvPool *kv_pool;

  /* Serialises evaluations (the scratch) and every change to a sequence's
   * cache, so preemption may empty another stream's cache safely. */
  GMutex eval_lock;
  GList *seqs;                /* LlmSeq*, under eval_lock */

  /* scheduler */
  GMutex sched_lock;
  GCond sched_cond;
  GQueue pending;             /* SchedRequest*, under sched_lock */
  gboolean leader;            /* a thread is running a shared forward */
  guint64 sched_gen;          /* forwards the scheduler has led */
  guint returning[2];         /* requests that finished in forward sched_gen
                               * ([0]) and the one before ([1]) whose
                               * streams have not submitted again */
  gint64 last_step_us;        /* how long the last forward of decode steps
                               * only (one row a stream) took */
  guint64 n_waits, waited_us; /* wait_for_returning's, under sched_lock */

  guint64 n_forwards, n_rows; /* atomic */
  guint64 n_admitted;         /* sequences ranked so far, under eval_lock */
  gint64 idle_after_us;       /* the leader's: unused this long is idle */
};

struct _LlmSeq {
  LlmEngine *engine;
  LlmKvCache *kv;
  guint32 pos0;               /* position of cache slot 0 */
  guint64 evicted0;           /* evictions before the current call */
  gint64 last_used_us;
  gboolean in_eval;           /* may not be preempted */
  gint pending;               /* atomic: has a request in the scheduler, so not idle */
  gboolean preempted;
  guint64 admitted;           /* its rank for preemption (eval_lock): the
                               * engine's count when it first got KV after
                               * being emptied by its owner; 0: none yet */
  const gint *cancel;         /* llm_seq_set_cancel_flag's; atomic reads */
  guint64 finished_gen;       /* under sched_lock: the forward its last request finished in */
  gint64 held_since_us;       /* (eval_lock) when it last got KV memory while it held none */
  gint steps_done;            /* atomic: requests finished on it that it did not begin
                               * empty (steps, verifications: no recompute) */
  gint steps_at_hold;         /* (eval_lock) steps_done when held_since_us was set */
  guint8 *skip;               /* n_layer flags: layers its rows pass through unchanged; NULL */
};

/* One row as the engine evaluates it: where its logits go, not a flag. */
typedef struct {
  LlmSeq *seq;
  gint32 token;
  const float *embd;
  guint32 pos;
  float *logits;
} LlmEvalRow;

/* Rows [first, first + n) of one sequence, how many were evaluated and
 * what went wrong for it. */
typedef struct {
  LlmSeq *seq;
  guint first, n;
  GError *error;
  guint done;
  guint embd_first;           /* the scheduler's: its first media row's index */
  gboolean may_wait;          /* its error is a full pool that others hold */
} LlmEvalSegment;

/* Rows [@from, @from + @count) of @n tokens fed to @seq from position
 * @pos0, into @out: @logits gets the last row's logits, or with
 * @all_logits every row's (n x n_vocab). */
/* Rows [@from, @from + @count) of a request of @n; entries of @tokens
 * that are LLM_TOKEN_EMBD take @embd's rows from *@embd_next on (which
 * moves past them); @embd may be NULL for token ids only. */
void llm_engine_token_rows (LlmSeq *seq, const gint32 *tokens, const float *embd,
    guint *embd_next, guint n, guint32 pos0, float *logits, gboolean all_logits, guint from,
    guint count, LlmEvalRow *out);

/* Splits @rows into segments (adjacent rows of one sequence) into
 * @segments (at most @n entries); fails if a sequence has two runs. */
gboolean llm_engine_segments (const LlmEvalRow *rows, guint n, GArray *segments,
    GError **error);
/* Evaluates @rows; a segment whose rows are bad or do not fit gets its
 * own error and the others go on. FALSE only if the forward itself
 * failed (every segment then has an error). With @patient (the
 * scheduler's requests, which can wait) preemption ranks sequences as
 * engine.h says; without, it takes from the longest-idle one. Takes
 * eval_lock. */
gboolean llm_engine_eval_segments (LlmEngine *e, const LlmEvalRow *rows,
    LlmEvalSegment *segs, guint n_segs, gboolean patient);

/* kv_time_slice_us: @waiter's request has waited a slice for memory that
 * busy sequences hold; the other sequence that has held its memory
 * longest, for a slice at least and for a step past any recompute, gives
 * it up and ranks as the youngest. Takes eval_lock. */
void llm_engine_take_turn (LlmEngine *e, const LlmSeq *waiter, gint64 now);

/* @seq's rank for preemption: older sequences lower; one not ranked yet
 * (emptied by its owner, and perhaps still holding the blocks it keeps for
 * reuse) the youngest of all. */
guint64 llm_seq_rank (const LlmSeq *seq);

/* @seq is being freed: the scheduler stops expecting its next request
 * (scheduler.c). */
void llm_engine_sched_forget (LlmEngine *e, LlmSeq *seq);

G_END_DECLS
