/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine: one model on one device with its worker threads, scratch
 * memory and KV block pool, serving any number of sequences (streams).
 *
 *   LlmEngine    one per (model, device, options), shared in the process
 *                through llm_engine_get (a registry; elements also find it
 *                through the GstContext "gst.llm.engine").
 *   LlmSeq       one stream's KV cache (blocks from the engine's pool) and
 *                positions; truncate and fork (copy-on-write prefix).
 *   LlmBatchRow  {seq, token | embedding row, position, want logits}: one
 *                llm_engine_eval evaluates all rows of every sequence in
 *                one forward (weights read once for all of them).
 *
 * Evaluation never samples: whoever samples owns an LlmSampler.
 * llm_engine_submit is the continuous-batching entry: calls from many
 * threads are gathered into shared forwards. GLib only, no GStreamer. */
#pragma once

#include <glib.h>
#include "model.h"
#include "kvcache.h"
#include "backend.h"

G_BEGIN_DECLS

#define LLM_FORWARD_ERROR (llm_forward_error_quark ())
GQuark llm_forward_error_quark (void);

typedef enum {
  LLM_FORWARD_ERROR_TOKEN,      /* token id outside the vocabulary */
  LLM_FORWARD_ERROR_RESOURCES,  /* threads or memory */
} LlmForwardError;

#define LLM_ENGINE_ERROR (llm_engine_error_quark ())
GQuark llm_engine_error_quark (void);

typedef enum {
  LLM_ENGINE_ERROR_BATCH,   /* rows that do not make a batch (see llm_engine_eval) */
  LLM_ENGINE_ERROR_PREEMPTED, /* the sequence lost its KV to another stream; feed it again */
  LLM_ENGINE_ERROR_CONFIG,  /* settings it cannot run with (the message names them) */
  LLM_ENGINE_ERROR_CANCELLED, /* its cancel flag was set while it waited in the scheduler */
} LlmEngineError;

/* When the KV pool cannot take another block. */
typedef enum {
  LLM_KV_FULL_REFUSE,   /* the evaluation that needs the block fails (LLM_KV_ERROR_POOL_FULL) */
  LLM_KV_FULL_PREEMPT,  /* another sequence gives its blocks up (below) */
} LlmKvFullPolicy;

/* Preemption, as the scheduler runs it (llm_engine_submit): sequences
 * rank by when they were first given KV memory, and keep their rank
 * through preemption. A request short of memory takes it from a sequence
 * that is idle (no request, unused for a while: a stream whose response
 * ended, or whose downstream blocks), else from the youngest sequence
 * younger than itself. With neither, it waits in the scheduler until
 * memory comes free, however long that is (its cancel flag ends the
 * wait), unless no other sequence holds any, when it fails with
 * LLM_KV_ERROR_POOL_FULL. So the oldest streams run and the youngest wait
 * their turn: streams never take memory from each other in a circle. A
 * preempted request that began on an empty sequence starts over inside
 * the scheduler; others fail with LLM_ENGINE_ERROR_PREEMPTED, and the
 * owner feeds the history again. Direct evaluation (llm_engine_eval, whose
 * caller cannot wait) takes from the longest-idle other sequence or fails
 * at once.
 *
 * That order lets the oldest streams keep their memory for as long as
 * they run: responses without end (live decoding) would keep a younger
 * stream waiting for ever. With kv_time_slice_us, a request that has
 * waited that long takes the memory of the sequence that has held its
 * own longest, if that one has held it for a slice too and has made a
 * step since its recompute (so every turn yields a token); it then ranks
 * as the youngest, recomputes its cache when its turn comes, and the
 * streams take turns a slice at a time. */

typedef struct {
  int n_threads;              /* <= 0: one per usable core */
  gsize kv_pool_bytes;        /* 0: no limit */
  LlmKvFullPolicy kv_full;
  guint max_prefill_chunk;    /* prompt rows of all prompts per forward; 0: 128 */
  guint max_batch_wait_us;    /* how long a lone step waits for company; 0 */
  guint64 kv_time_slice_us;   /* kv_full preempt: turns of this long (above); 0: none */
  LlmCpuKernelChoice kernels; /* BEST; tests pick SCALAR for the reference */
} LlmEngineOptions;

void llm_engine_options_init (LlmEngineOptions *opts);

typedef struct _LlmEngine LlmEngine;
typedef struct _LlmSeq LlmSeq;

/* The engine for (@model, @opts) in this process, made on first use;
 * every caller gets a reference. */
LlmEngine *llm_engine_get (LlmModel *model, const LlmEngineOptions *opts, GError **error);
/* A private engine, not shared (tests, tools). */
LlmEngine *llm_engine_new (LlmModel *model, const LlmEngineOptions *opts, GError **error);
/* Whether @e is the engine llm_engine_get (@model, @opts) would give: the
 * same model and every option the same once defaults are resolved. */
gboolean llm_engine_runs_with (const LlmEngine *e, LlmModel *model, const LlmEngineOptions *opts);
LlmEngine *llm_engine_ref (LlmEngine *e);
void llm_engine_unref (LlmEngine *e);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmEngine, llm_engine_unref)

LlmModel *llm_engine_model (const LlmEngine *e);
const LlmEngineOptions *llm_engine_options (const LlmEngine *e);
int llm_engine_n_threads (const LlmEngine *e);
/* The backend and its kernels, e.g. "cpu/avx512". */
const char *llm_engine_backend_name (const LlmEngine *e);
/* KV bytes held by all of the engine's sequences now. */
gsize llm_engine_kv_bytes (const LlmEngine *e);

/* --- sequences ------------------------------------------------------- */

/* A new empty sequence with its cache type and window policy. Holds a
 * reference on @e. Errors: LLM_KV_ERROR_CONFIG. */
LlmSeq *llm_seq_new (LlmEngine *e, const LlmKvConfig *kv, GError **error);
/* A sequence on a private engine of its own with @n_threads workers
 * (tests and tools that run one stream); freeing it frees the engine. */
LlmSeq *llm_seq_new_standalone (LlmModel *model, const LlmKvConfig *kv, int n_threads,
    GError **error);
/* The same with every engine option (@opts NULL: the defaults). */
LlmSeq *llm_seq_new_standalone_with (LlmModel *model, const LlmKvConfig *kv,
    const LlmEngineOptions *opts, GError **error);
void llm_seq_free (LlmSeq *seq);
LlmEngine *llm_seq_engine (const LlmSeq *seq);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmSeq, llm_seq_free)

/* A sequence holding the same positions, sharing @seq's KV blocks until
 * either writes into a shared block (which then copies it). */
LlmSeq *llm_seq_fork (LlmSeq *seq);

/* Cached positions (the next row's KV goes at index n). */
guint32 llm_seq_n (const LlmSeq *seq);
/* Self-speculative drafting: the rows of @seq skip the layers whose flag
 * in @skip (n_layer of them) is set, passing through them unchanged and
 * writing no keys and values there; NULL evaluates every layer again.
 * Such a sequence's rows never share a forward with another's. Meant for
 * a fork that drafts and is dropped: its cache holds zeros in the
 * skipped layers at the positions it evaluated. FALSE (and nothing set)
 * when every layer would be skipped. */
gboolean llm_seq_set_skip_layers (LlmSeq *seq, const guint8 *skip);
/* Position the next row takes: the first row's position plus n. A window
 * policy's eviction moves the kept positions down with the slots (the
 * keys are turned back), so this stays n past the first position and does
 * not count what was shifted out. Positions of a sequence are consecutive. */
guint32 llm_seq_pos_next (const LlmSeq *seq);
/* Keeps the first @n cached positions; costs nothing per kept block, and
 * keeps the cut blocks for the positions that follow. */
void llm_seq_truncate (LlmSeq *seq, guint32 n);
/* Empties it, keeping its blocks for reuse. */
void llm_seq_clear (LlmSeq *seq);
/* llm_seq_clear, and every block goes back to the engine's pool: an idle
 * sequence then holds no KV memory another stream might need. */
void llm_seq_release (LlmSeq *seq);
LlmKvCache *llm_seq_kv (LlmSeq *seq);
gsize llm_seq_kv_bytes (const LlmSeq *seq);
/* While *@flag (an int read atomically; NULL: none) is non-zero, a request
 * of @seq in the scheduler that is not being evaluated (waiting for KV
 * memory, or for its turn) gives up with LLM_ENGINE_ERROR_CANCELLED,
 * within about 10 ms: how a stream that is flushed or shut down stops
 * waiting. The flag must stay valid until it is unset here. */
void llm_seq_set_cancel_flag (LlmSeq *seq, const gint *flag);
/* Whether the engine took its KV for another sequence (kv-full preempt):
 * its cache is empty now and the owner must feed its history again. */
gboolean llm_seq_was_preempted (const LlmSeq *seq);

/* --- batches --------------------------------------------------------- */

typedef struct {
  LlmSeq *seq;
  gint32 token;               /* used when @embd is NULL */
  const float *embd;          /* n_embd floats (a media token), or NULL */
  guint32 pos;                /* RoPE position, in the sequence's frame at the call */
  gboolean logits;            /* write this row's logits */
} LlmBatchRow;

/* Evaluates @n rows in one forward: each row's key and value go after
 * what its sequence holds, in row order. The rows of one sequence must
 * be adjacent and their positions consecutive from llm_seq_pos_next
 * (LLM_ENGINE_ERROR_BATCH otherwise); a window policy that evicts during
 * the call moves the sequence's positions, new rows' included, down by
 * what it dropped. @logits receives n_vocab floats for every row with
 * @logits set, in row order (may be NULL when none is). On an error for
 * one sequence (a token outside the vocabulary, its cache full) the
 * others are still evaluated and the first error is returned. Calls on
 * one engine are serialised. */
gboolean llm_engine_eval (LlmEngine *e, const LlmBatchRow *rows, guint n, float *logits,
    GError **error);

/* @n tokens fed to @seq at its next positions, on its engine; @logits
 * gets the last row's logits, or with @all_logits every row's
 * (n x n_vocab). */
gboolean llm_seq_eval_tokens (LlmSeq *seq, const gint32 *tokens, guint n, float *logits,
    gboolean all_logits, GError **error);

/* As llm_engine_eval_tokens for one sequence, but through the engine's
 * scheduler: calls from different threads (streams) at the same time
 * share forwards, decode steps batched together and long prompts
 * admitted max-prefill-chunk rows per forward between them. Blocks until
 * @seq's rows are done; other streams' errors never reach this call. */
gboolean llm_engine_submit (LlmEngine *e, LlmSeq *seq, const gint32 *tokens, guint n,
    float *logits, gboolean all_logits, GError **error);

/* A row of a mixed prompt that takes the next embedding row (a media
 * token) instead of a token id. */
#define LLM_TOKEN_EMBD (-1)

/* llm_engine_submit for a prompt that mixes token ids and media rows:
 * each of the @n entries of @tokens that is LLM_TOKEN_EMBD takes the next
 * row of @embd (n_embd floats each, in order). */
gboolean llm_engine_submit_embd (LlmEngine *e, LlmSeq *seq, const gint32 *tokens,
    const float *embd, guint n, float *logits, gboolean all_logits, GError **error);

/* Forwards run and rows they held, since the engine started (a measure of
 * how well the scheduler batches). */
void llm_engine_batch_stats (LlmEngine *e, guint64 *forwards, guint64 *rows);
/* Forwards whose leader waited for streams the forwards before served
 * (so they step together), and the microseconds it waited in all. */
void llm_engine_wait_stats (LlmEngine *e, guint64 *waits, guint64 *waited_us);

G_END_DECLS
