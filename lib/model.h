/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A transformer language model read from a GGUF file: hyper-parameters and
 * weight tensors, used in place from the mapping. Loaded once per (file,
 * device) in a process and shared by reference. */
#pragma once

#include <glib.h>
#include "gguf.h"
#include "tokenizer.h"

G_BEGIN_DECLS

#define LLM_MODEL_ERROR (llm_model_error_quark ())
GQuark llm_model_error_quark (void);

typedef enum {
  LLM_MODEL_ERROR_ARCH,       /* unknown general.architecture */
  LLM_MODEL_ERROR_KEY,        /* missing or invalid hyper-parameter */
  LLM_MODEL_ERROR_TENSOR,     /* missing tensor or wrong shape */
  LLM_MODEL_ERROR_TYPE,       /* weight type the engine cannot compute */
  LLM_MODEL_ERROR_DEVICE,     /* device not available */
} LlmModelError;

typedef enum {
  LLM_ARCH_LLAMA,
  LLM_ARCH_QWEN2,   /* biases on Q, K, V */
  LLM_ARCH_QWEN3,   /* RMSNorm on each head of Q and K */
} LlmArch;

typedef struct {
  LlmArch arch;
  guint32 n_embd;
  guint32 n_layer;
  guint32 n_head;
  guint32 n_head_kv;
  guint32 head_dim;
  guint32 n_ff;
  guint32 n_vocab;
  guint32 n_ctx_train;
  guint32 n_rot;
  float rope_freq_base;
  float rope_freq_scale;
  gboolean rope_neox;         /* NeoX pairing (qwen2, qwen3) vs normal (llama) */
  float rms_eps;
} LlmHParams;

/* Opaque to elements and applications: read it through the accessors
 * below. The engine's view is model-private.h. */
typedef struct _LlmModel LlmModel;

/* Returns the model for (@path, @device), loading it on first use; every
 * caller gets a reference. @device is "cpu" (others: LLM_MODEL_ERROR_DEVICE
 * naming what is available). Errors name the key, tensor or type. Loads of
 * other files go on while one loads; callers racing to load one file all
 * get the same model. */
LlmModel *llm_model_get (const char *path, const char *device, GError **error);
/* Loads without sharing (tests). */
LlmModel *llm_model_load (const char *path, GError **error);
LlmModel *llm_model_ref (LlmModel *model);
void llm_model_unref (LlmModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmModel, llm_model_unref)

/* What elements and applications may read of a model. */
const char *llm_model_path (const LlmModel *model);
const char *llm_model_device (const LlmModel *model);
/* NULL for a model without a tokenizer (it still runs on token ids). */
LlmTokenizer *llm_model_tokenizer (const LlmModel *model);
const LlmHParams *llm_model_hparams (const LlmModel *model);
/* The file's key-value pairs (chat template, metadata). */
const LlmGguf *llm_model_gguf (const LlmModel *model);
/* Writes token @token's embedding row (hp.n_embd floats) to @out,
 * dequantized exactly as the forward pass reads it: an LlmBatchRow whose
 * embd is this row evaluates as the token itself does, bit for bit.
 * Callers that mix text with media embeddings (or edit them) start here.
 * @token must be below hp.n_vocab. */
void llm_model_token_embedding (const LlmModel *model, guint32 token, float *out);

const char *llm_arch_name (LlmArch arch);

/* Devices this build can run on, NULL-terminated; owned by the library. */
const char *const *llm_devices_available (void);

G_END_DECLS
