/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sequences: a KV cache from the engine's pool and the position of its
 * first slot. Every change to a cache takes the engine's eval lock, as
 * the engine may empty any idle sequence's cache (kv-full preempt). */
#include "engine-private.h"
#include "model-private.h"

LlmSeq *
llm_seq_new (LlmEngine *e, const LlmKvConfig *kvc, GError **error)
{
  g_return_val_if_fail (e != NULL && kvc != NULL, NULL);
  const LlmHParams *hp = &e->model->hp;
  const LlmKvRope rope = { hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale,
    hp->rope_neox };
  LlmKvCache *kv = llm_kv_cache_new_in_pool (e->kv_pool, hp->n_layer, hp->n_head_kv,
      hp->head_dim, kvc, &rope, error);
  if (kv == NULL)
    return NULL;
  LlmSeq *seq = g_new0 (LlmSeq, 1);
  seq->engine = llm_engine_ref (e);
  seq->kv = kv;
  seq->last_used_us = g_get_monotonic_time ();
  g_mutex_lock (&e->eval_lock);
  e->seqs = g_list_prepend (e->seqs, seq);
  g_mutex_unlock (&e->eval_lock);
  return seq;
}

LlmSeq *
llm_seq_new_standalone_with (LlmModel *model, const LlmKvConfig *kv,
    const LlmEngineOptions *opts, GError **error)
{
  g_autoptr (LlmEngine) e = llm_engine_new (model, opts, error);
  return e ? llm_seq_new (e, kv, error) : NULL;
}

LlmSeq *
llm_seq_new_standalone (LlmModel *model, const LlmKvConfig *kv, int n_threads, GError **error)
{
  LlmEngineOptions opts;
  llm_engine_options_init (&opts);
  opts.n_threads = n_threads;
  return llm_seq_new_standalone_with (model, kv, &opts, error);
}

void
llm_seq_free (LlmSeq *seq)
{
  if (seq == NULL)
    return;
  LlmEngine *e = seq->engine;
  /* The scheduler's leader must not wait for this one's next step. */
  llm_engine_sched_forget (e, seq);
  g_mutex_lock (&e->eval_lock);
  e->seqs = g_list_remove (e->seqs, seq);
  g_mutex_unlock (&e->eval_lock);
  llm_kv_cache_free (seq->kv);
  g_free (seq->skip);
  g_free (seq);
  llm_engine_unref (e);
}

LlmEngine *
llm_seq_engine (const LlmSeq *seq)
{
  return seq->engine;
}

LlmSeq *
llm_seq_fork (LlmSeq *seq)
{
  g_return_val_if_fail (seq != NULL, NULL);
  LlmEngine *e = seq->engine;
  LlmSeq *f = g_new0 (LlmSeq, 1);
  f->engine = llm_engine_ref (e);
  g_mutex_lock (&e->eval_lock);
  f->kv = llm_kv_cache_fork (seq->kv);
  f->pos0 = seq->pos0;
  f->preempted = seq->preempted;
  f->admitted = seq->admitted;
  f->last_used_us = g_get_monotonic_time ();
  /* It holds (shares) memory from now: a turn is a slice from here. */
  f->held_since_us = f->last_used_us;
  e->seqs = g_list_prepend (e->seqs, f);
  g_mutex_unlock (&e->eval_lock);
  return f;
}

gboolean
llm_seq_set_skip_layers (LlmSeq *seq, const guint8 *skip)
{
  g_return_val_if_fail (seq != NULL, FALSE);
  const guint n_layer = seq->engine->model->hp.n_layer;
  guint kept = 0;
  for (guint l = 0; skip != NULL && l < n_layer; l++)
    kept += skip[l] == 0;
  if (skip != NULL && kept == 0)
    return FALSE;
  g_mutex_lock (&seq->engine->eval_lock);
  g_free (seq->skip);
  seq->skip = skip != NULL ? g_memdup2 (skip, n_layer) : NULL;
  g_mutex_unlock (&seq->engine->eval_lock);
  return TRUE;
}

guint32
llm_seq_n (const LlmSeq *seq)
{
  return llm_kv_cache_n (seq->kv);
}

guint32
llm_seq_pos_next (const LlmSeq *seq)
{
  return seq->pos0 + llm_kv_cache_n (seq->kv);
}

void
llm_seq_truncate (LlmSeq *seq, guint32 n)
{
  g_mutex_lock (&seq->engine->eval_lock);
  llm_kv_cache_truncate (seq->kv, n);
  g_mutex_unlock (&seq->engine->eval_lock);
}

/* Under eval_lock. A sequence emptied by its owner ranks anew when it next
 * gets memory; one emptied after a preemption, to be fed its history
 * again, keeps its rank. */
static void
forget_rank (LlmSeq *seq)
{
  if (!seq->preempted)
    seq->admitted = 0;
}

void
llm_seq_clear (LlmSeq *seq)
{
  g_mutex_lock (&seq->engine->eval_lock);
  llm_kv_cache_clear (seq->kv);
  seq->pos0 = 0;
  forget_rank (seq);
  seq->preempted = FALSE;
  g_mutex_unlock (&seq->engine->eval_lock);
}

void
llm_seq_release (LlmSeq *seq)
{
  g_mutex_lock (&seq->engine->eval_lock);
  llm_kv_cache_release (seq->kv);
  seq->pos0 = 0;
  forget_rank (seq);
  seq->preempted = FALSE;
  g_mutex_unlock (&seq->engine->eval_lock);
}

LlmKvCache *
llm_seq_kv (LlmSeq *seq)
{
  return seq->kv;
}

gsize
llm_seq_kv_bytes (const LlmSeq *seq)
{
  return llm_kv_cache_bytes (seq->kv);
}

void
llm_seq_set_cancel_flag (LlmSeq *seq, const gint *flag)
{
  g_atomic_pointer_set (&seq->cancel, flag);
}

gboolean
llm_seq_was_preempted (const LlmSeq *seq)
{
  return seq->preempted;
}
