/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs a model over tokens: the transformer forward pass on the CPU, writing
 * the session's KV cache and producing logits. One LlmContext per session;
 * it owns the KV cache, the worker threads and the scratch memory. */
#pragma once

#include <glib.h>
#include "model.h"
#include "kvcache.h"

G_BEGIN_DECLS

#define LLM_FORWARD_ERROR (llm_forward_error_quark ())
GQuark llm_forward_error_quark (void);

typedef enum {
  LLM_FORWARD_ERROR_TOKEN,      /* token id outside the vocabulary */
  LLM_FORWARD_ERROR_RESOURCES,  /* threads or memory */
} LlmForwardError;

typedef struct _LlmContext LlmContext;

/* @n_threads <= 0: one per core. Takes a reference on @model. */
LlmContext *llm_context_new (LlmModel *model, const LlmKvConfig *kv, int n_threads,
    GError **error);
void llm_context_free (LlmContext *ctx);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmContext, llm_context_free)

LlmModel *llm_context_model (const LlmContext *ctx);
LlmKvCache *llm_context_kv (LlmContext *ctx);
int llm_context_n_threads (const LlmContext *ctx);

/* Feeds @n tokens at the next cache positions (prefill when n > 1, a decode
 * step when n == 1). Writes the logits of the last token to @logits
 * (n_vocab floats) when non-NULL; with @all_logits, @logits receives n rows
 * (teacher forcing, speculative verification). */
gboolean llm_context_eval (LlmContext *ctx, const gint32 *tokens, guint n,
    float *logits, gboolean all_logits, GError **error);

G_END_DECLS
