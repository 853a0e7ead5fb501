/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The transformer forward pass over one chunk of batch rows (engine
 * internals; callers use llm_engine_eval). The engine has reserved each
 * row's KV slot; the pass embeds the rows, runs every layer (matrix
 * products over all rows at once, attention per sequence piece), writes
 * the rows' keys and values into their caches and the logits of the rows
 * that want them. Written once against backend.h's table. */
#pragma once

#include <glib.h>
#include "backend.h"
#include "engine.h"

G_BEGIN_DECLS

/* Rows per forward chunk: bounds scratch memory while keeping weight
 * reuse high. */
#define LLM_FORWARD_CHUNK 128u

typedef struct {
  gint32 token;         /* when @embd is NULL; checked by the caller */
  const float *embd;    /* n_embd floats (host memory), or NULL */
  guint32 pos;          /* RoPE position */
  float *logits;        /* n_vocab floats to write (host memory), or NULL */
} LlmFwdRow;

typedef struct _LlmForward LlmForward;

/* Scratch on @be for LLM_FORWARD_CHUNK rows of @model with @weights (as
 * llm_weights_get prepared them for @be; both are kept referenced by the
 * caller for the forward's life). */
LlmForward *llm_forward_new (LlmModel *model, LlmBackend *be, const LlmWeights *weights,
    GError **error);
void llm_forward_free (LlmForward *f);

/* Evaluates @n <= LLM_FORWARD_CHUNK rows laid out in @pieces (in row
 * order, covering every row once) in @queue; the layers flagged in @skip
 * (n_layer flags, or NULL for none) are passed through. Fails only for
 * scratch memory. */
gboolean llm_forward_chunk (LlmForward *f, LlmBackendQueue *queue, const LlmFwdRow *rows,
    guint n, const LlmFwdPiece *pieces, guint n_pieces, const guint8 *skip, GError **error);

G_END_DECLS
