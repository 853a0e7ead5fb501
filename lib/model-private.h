/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the engine, its tests and tools see of a model: its tensors. Not
 * for elements or applications (model.h's accessors are theirs). */
#pragma once

#include "model.h"

G_BEGIN_DECLS

typedef struct {
  const LlmGgufTensor *attn_norm;
  const LlmGgufTensor *wq, *wk, *wv, *wo;
  const LlmGgufTensor *bq, *bk, *bv;         /* qwen2, else NULL */
  const LlmGgufTensor *q_norm, *k_norm;      /* qwen3, else NULL */
  const LlmGgufTensor *ffn_norm;
  const LlmGgufTensor *w_gate, *w_up, *w_down;
} LlmLayer;

struct _LlmModel {
  gint ref_count;
  char *path;
  char *key;                  /* private: sharing key */
  char *device;
  LlmGguf *gguf;
  LlmTokenizer *tokenizer;
  LlmHParams hp;
  const LlmGgufTensor *tok_embd, *output_norm, *output;  /* output = tok_embd when tied */
  LlmLayer *layers;           /* [hp.n_layer] */
  gsize weight_bytes;         /* bytes read per token by a decode step */
  GMutex prepared_lock;       /* private: the weights prepared per backend */
  GSList *prepared;           /* private, under prepared_lock */
};

G_END_DECLS
