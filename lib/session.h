/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One conversation with a model: a sequence of an engine, the sampler
 * that picks its tokens, and the ids its cache holds (what a rollback or
 * a recompute after preemption needs; bounded by the cache, so a live
 * stream's memory stays flat). Refcounted: llmprefill creates it, feeds
 * the prompt (evaluation only) and hands it downstream to llmdecode
 * inside a GstLlmSessionMeta; llmdecode samples. The sampler lives here
 * because its state (the random sequence, the repetition penalty's
 * window) is the conversation's, and a rollback must take the window
 * back too; its parameters are the sampling element's, which sets them
 * (llm_session_set_sampler). Calls are serialised by the session's own
 * lock, so the two elements' threads may both hold it. Evaluation goes
 * through the engine's scheduler, so the sessions of many streams on one
 * engine share forwards. */
#pragma once

#include <glib.h>
#include "engine.h"
#include "sampler.h"

G_BEGIN_DECLS

typedef struct {
  LlmKvConfig kv;
  LlmSamplerParams sampler;   /* until llm_session_set_sampler says otherwise */
} LlmSessionConfig;

typedef struct _LlmSession LlmSession;

/* Takes a reference on @engine. */
LlmSession *llm_session_new (LlmEngine *engine, const LlmSessionConfig *config,
    GError **error);
LlmSession *llm_session_ref (LlmSession *s);
void llm_session_unref (LlmSession *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmSession, llm_session_unref)

LlmModel *llm_session_model (LlmSession *s);
LlmEngine *llm_session_engine (LlmSession *s);
LlmSeq *llm_session_seq (LlmSession *s);
/* While *@flag is non-zero, a feed waiting in the engine's scheduler (for
 * KV memory that other streams hold) gives up with
 * LLM_ENGINE_ERROR_CANCELLED (see
 * llm_seq_set_cancel_flag); NULL: none. The caller unsets it before the
 * flag goes away. */
void llm_session_set_cancel_flag (LlmSession *s, const gint *flag);

/* Evaluates @n ids after what the session holds and keeps the logits of
 * the last; samples nothing. If the engine preempted the sequence, its
 * history is fed again first. */
gboolean llm_session_feed (LlmSession *s, const gint32 *ids, guint n, GError **error);
/* llm_session_feed for a prompt holding media: entries of @ids that are
 * LLM_TOKEN_EMBD take the rows of @embd in order (n_embd floats each). The
 * session keeps a copy of them while its cache holds them, to feed them
 * again after a preemption; its history (llm_session_ids) holds
 * LLM_TOKEN_EMBD at their positions. */
gboolean llm_session_feed_embd (LlmSession *s, const gint32 *ids, const float *embd, guint n,
    GError **error);
/* The next token for the last logits, by the session's sampler; -1 when
 * there are none (nothing fed since the last truncate or reset). */
gint32 llm_session_sample (LlmSession *s);

/* The parameters the session samples with. */
void llm_session_get_sampler (LlmSession *s, LlmSamplerParams *params);
/* Makes the session sample with @params from now on. Parameters equal to
 * the current ones change nothing (the random sequence goes on); others
 * replace the sampler: its random sequence starts at @params->seed and
 * its penalty window is refilled from the ids the cache holds. */
void llm_session_set_sampler (LlmSession *s, const LlmSamplerParams *params);

/* llm_session_feed then llm_session_sample (@next). */
gboolean llm_session_prefill (LlmSession *s, const gint32 *ids, guint n, gint32 *next,
    GError **error);
/* Feeds @id (normally the token sampled last) and samples the next one. */
gboolean llm_session_step (LlmSession *s, gint32 id, gint32 *next, GError **error);

/* Speculative verification. @ids[0] is the token sampled last (not fed
 * yet), @ids[1..n) a drafter's proposals for the tokens after it. All @n
 * are evaluated in one forward; then, row by row, the session's sampler
 * picks the token after each (llm_sampler_sample_draft against the
 * proposal), and the proposals are accepted up to the first it does not
 * pick. @out gets the accepted proposals and then the sampler's own pick
 * after them (*@n_out = accepted + 1 tokens); the cache, history and
 * penalty window keep @ids up to the last accepted one, as if each had
 * been fed by llm_session_step, so the next call's @ids[0] is
 * @out[*@n_out - 1]. Greedy, the tokens are exactly llm_session_step's.
 * When the cache has room for fewer than @n positions before a window
 * policy would evict, only that many are checked (at least @ids[0]): an
 * eviction cannot be rolled back, and evicting for the whole draft would
 * leave the accepted rows a shorter window than plain steps see. So a
 * full window checks one token per call (lossless, no speed-up) until
 * attention can mask each row's own window over a cache with slack.
 * @out holds @n tokens. */
gboolean llm_session_verify (LlmSession *s, const gint32 *ids, guint n, gint32 *out,
    guint *n_out, GError **error);

/* Ids the cache holds now (prompt and generated; a window policy's
 * evictions leave them out), oldest first. */
guint llm_session_n_ids (LlmSession *s);
const gint32 *llm_session_ids (LlmSession *s);
/* Logits of the last evaluation (n_vocab floats), or NULL before any or
 * after a truncate. */
const float *llm_session_logits (LlmSession *s);

/* Rolls back to the first @n ids: cache, history and the repetition
 * penalty's window follow. */
void llm_session_truncate (LlmSession *s, guint n);
/* Forgets everything fed (KV cache, history, sampler state). */
void llm_session_reset (LlmSession *s);
/* llm_session_reset, giving the cache's blocks back to the engine's pool
 * too (llm_seq_release): for a session that waits idle. */
void llm_session_release_kv (LlmSession *s);

gsize llm_session_kv_bytes (LlmSession *s);

G_END_DECLS
