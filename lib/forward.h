/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The transformer forward pass over one chunk of batch rows (engine
 * internals; callers use llm_engine_eval). The engine has reserved each
 * row's KV slot; the pass embeds the rows, runs every layer (matrix
 * products over all rows at once, attention per sequence piece), writes
 * the rows' keys and values into their caches and the logits of the rows
 * that want them. */
#pragma once

#include <glib.h>
#include "model.h"
#include "kvcache.h"
#include "engine.h"
#include "cpu/threadpool.h"

G_BEGIN_DECLS

/* Rows per forward chunk: bounds scratch memory while keeping weight
 * reuse high. */
#define LLM_FORWARD_CHUNK 128u

typedef struct {
  gint32 token;         /* when @embd is NULL; checked by the caller */
  const float *embd;    /* n_embd floats, or NULL */
  guint32 pos;          /* RoPE position */
  float *logits;        /* n_vocab floats to write, or NULL */
} LlmFwdRow;

/* Rows [row0, row0 + n) of the chunk go to @kv at slots slot0.. (reserved). */
typedef struct {
  LlmKvCache *kv;
  guint32 slot0;
  guint row0, n;
} LlmFwdPiece;

typedef struct _LlmForward LlmForward;

/* Scratch for LLM_FORWARD_CHUNK rows of @model, run on pools of at most
 * @n_threads threads. */
LlmForward *llm_forward_new (LlmModel *model, int n_threads, GError **error);
void llm_forward_free (LlmForward *f);

/* Evaluates @n <= LLM_FORWARD_CHUNK rows laid out in @pieces (in row
 * order, covering every row once) on @pool. Fails only for scratch
 * memory. */
gboolean llm_forward_chunk (LlmForward *f, LlmThreadPool *pool, const LlmFwdRow *rows,
    guint n, const LlmFwdPiece *pieces, guint n_pieces, GError **error);

G_END_DECLS
