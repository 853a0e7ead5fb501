/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Checked reading of an mmproj file's keys and tensors, shared by the
 * vision and audio tower readers (mmproj.c, mmproj-audio.c): every size
 * key is bounded, every tensor is found with exactly the shape the sizes
 * ask for and a type the encoders read, and every failure is an
 * LLM_MMPROJ_ERROR_INVALID naming the key or tensor. Private to lib/. */
#pragma once

#include <glib.h>

#include "mmproj.h"

G_BEGIN_DECLS

/* Sizes past these are no tower a projector file holds; they keep every
 * product of them far from overflowing. */
#define LLM_MMPROJ_MAX_DIM 65536u
#define LLM_MMPROJ_MAX_LAYERS 256u

typedef struct {
  const LlmGguf *gguf;
  const char *path;
  GError **error;
} LlmMmprojReader;

/* Sets LLM_MMPROJ_ERROR_INVALID "PATH: what" and returns FALSE. */
gboolean llm_mmproj_invalid (LlmMmprojReader *r, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* A size key in [1, @max]. */
gboolean llm_mmproj_get_size (LlmMmprojReader *r, const char *key, guint32 max, guint32 *out);

/* A float key in (0, 1), or @fallback when absent (layer-norm epsilons). */
gboolean llm_mmproj_get_eps (LlmMmprojReader *r, const char *key, double fallback, float *out);

/* A float array key of exactly @n values, or @fallback when absent. */
gboolean llm_mmproj_get_floats (LlmMmprojReader *r, const char *key, guint n,
    const float *fallback, float *out);

/* Tensor @name of exactly the shape @ne (@n_dims dims; 0 in @ne matches any
 * size, which is then returned there), or absent when not @required.
 * Vectors (one dim) must be F32; matrices F32, F16, BF16 or Q8_0. */
gboolean llm_mmproj_get_tensor (LlmMmprojReader *r, const char *name, gboolean required,
    guint n_dims, guint64 *ne, LlmMmprojWeight *out);

/* The same for a table the encoders read as plain floats whatever its
 * dims (position embeddings, convolution biases): it must be F32. */
gboolean llm_mmproj_get_f32 (LlmMmprojReader *r, const char *name, gboolean required,
    guint n_dims, guint64 *ne, LlmMmprojWeight *out);

gboolean llm_mmproj_get_vector (LlmMmprojReader *r, const char *name, gboolean required,
    guint64 n, LlmMmprojWeight *out);

/* A matrix from @in inputs to *@out_dim outputs (0: any, read back). */
gboolean llm_mmproj_get_matrix (LlmMmprojReader *r, const char *name, guint64 in,
    guint64 *out_dim, LlmMmprojWeight *out);

/* A linear layer @prefix.weight / @prefix.bias (the bias optional) from
 * @in to @out. */
gboolean llm_mmproj_get_linear (LlmMmprojReader *r, const char *prefix, guint64 in,
    guint64 out, LlmMmprojWeight *w, LlmMmprojWeight *b);

/* A norm @prefix.weight / @prefix.bias of @n; when @required both must be
 * there, else either may be absent. */
gboolean llm_mmproj_get_norm (LlmMmprojReader *r, const char *prefix, gboolean required,
    guint64 n, LlmMmprojWeight *w, LlmMmprojWeight *b);

/* The @n_layer pre-norm transformer blocks @tower.blk.L.* (ln1, attn_q/k/v
 * with optional biases, attn_out, ln2, ffn_up, ffn_down) of width @n_embd
 * and feed-forward width @n_ff; the caller frees the array. */
gboolean llm_mmproj_get_layers (LlmMmprojReader *r, const char *tower, guint32 n_layer,
    guint32 n_embd, guint32 n_ff, LlmMmprojLayer **layers);

/* The projector type of one tower: clip.projector_type, or in files of
 * several modalities clip.@modality.projector_type (as llama.cpp reads
 * them); NULL after setting the error. The caller frees it. */
char *llm_mmproj_get_type_name (LlmMmprojReader *r, const char *modality);

/* Reads and checks the audio tower (mmproj-audio.c). */
gboolean llm_mmproj_read_audio (LlmMmprojReader *r, LlmMmprojAudio *a);

G_END_DECLS
