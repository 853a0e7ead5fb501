/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sessions an evaluating element (llmprefill) hands downstream: at
 * most a fixed number, so that memory stays bounded whatever sits between
 * it and the element that samples, each busy until downstream gives it
 * back. Refcounted, because sessions come back from other threads (when
 * the buffer that carried one is freed), possibly after the element that
 * made the pool is gone. */
#pragma once

#include <glib.h>
#include "session.h"

G_BEGIN_DECLS

typedef struct _LlmSessionPool LlmSessionPool;

/* A pool of at most @max_sessions sessions of @engine, each made with
 * @config (copied). Takes a reference on @engine. */
LlmSessionPool *llm_session_pool_new (LlmEngine *engine, const LlmSessionConfig *config,
    guint max_sessions);
LlmSessionPool *llm_session_pool_ref (LlmSessionPool *pool);
void llm_session_pool_unref (LlmSessionPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmSessionPool, llm_session_pool_unref)

/* A session for the next prompt, marked busy: with @keep_context the
 * conversation's own (the first one made), else any idle one, making a
 * new one while there are fewer than the maximum. Waits until one is
 * released if need be. NULL when the pool is flushing (@error unset) or
 * a new session cannot be made (@error set). The pool keeps its
 * reference; the caller gives the session back with
 * llm_session_pool_release. */
LlmSession *llm_session_pool_acquire (LlmSessionPool *pool, gboolean keep_context,
    GError **error);
/* Gives back a session llm_session_pool_acquire returned; any thread.
 * The caller holds a reference on @pool until then. */
void llm_session_pool_release (LlmSessionPool *pool, LlmSession *session);
/* While flushing, acquire does not wait: waiting callers return NULL. */
void llm_session_pool_set_flushing (LlmSessionPool *pool, gboolean flushing);
/* Non-zero while flushing: a cancel flag for llm_session_set_cancel_flag,
 * valid as long as @pool. */
const gint *llm_session_pool_flushing_flag (LlmSessionPool *pool);
/* Lets go of every session: idle ones now, busy ones when released. */
void llm_session_pool_clear (LlmSessionPool *pool);

G_END_DECLS
