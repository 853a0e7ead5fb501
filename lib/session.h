/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One conversation with a model: its context (KV cache, threads), sampler and
 * the ids fed so far. Refcounted: llmprefill creates it and hands it
 * downstream to llmdecode inside a GstLlmSessionMeta. Calls are serialised
 * by the session's own lock, so the two elements' threads may both hold it. */
#pragma once

#include <glib.h>
#include "forward.h"
#include "sampler.h"

G_BEGIN_DECLS

typedef struct {
  LlmKvConfig kv;
  int n_threads;              /* <= 0: one per core */
  LlmSamplerParams sampler;
} LlmSessionConfig;

typedef struct _LlmSession LlmSession;

/* Takes a reference on @model. */
LlmSession *llm_session_new (LlmModel *model, const LlmSessionConfig *config, GError **error);
LlmSession *llm_session_ref (LlmSession *s);
void llm_session_unref (LlmSession *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmSession, llm_session_unref)

LlmModel *llm_session_model (LlmSession *s);

/* Feeds @n prompt ids after what the session holds, then samples the token
 * that follows (@next). */
gboolean llm_session_prefill (LlmSession *s, const gint32 *ids, guint n, gint32 *next,
    GError **error);
/* Feeds @id (normally the token sampled last) and samples the next one. */
gboolean llm_session_step (LlmSession *s, gint32 id, gint32 *next, GError **error);

/* Ids fed so far (prompt and generated), oldest first. Copy out under no
 * lock: call only from the thread that drives the session. */
guint llm_session_n_ids (LlmSession *s);
/* Logits of the last evaluation (n_vocab floats), or NULL before any. */
const float *llm_session_logits (LlmSession *s);

/* Forgets everything fed (KV cache, history, sampler state). */
void llm_session_reset (LlmSession *s);

gsize llm_session_kv_bytes (LlmSession *s);

G_END_DECLS
