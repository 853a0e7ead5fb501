/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Multimodal projector files in llama.cpp's mmproj convention (GGUF with
 * general.architecture "clip", clip.* keys, v.* vision-tower tensors and
 * mm.* projector tensors), so the files people use with llama.cpp's mtmd
 * load here unchanged. This reads and checks one: the projector type, the
 * vision tower's sizes and preprocessing, and every tensor the encoder
 * will read, with its shape, so that nothing later reads a tensor that is
 * not there or is smaller than the sizes say. Other projector types are
 * refused with an error naming the type and what is read.
 *
 * Read today (vision):
 *   mlp       LLaVA-1.5 style: a CLIP ViT (class embedding, pre-layernorm)
 *             and the two-layer MLP mm.0 / mm.2 (GELU between them).
 *   idefics3  SmolVLM / Idefics3: a SigLIP ViT (no class embedding,
 *             post-layernorm), pixel shuffle by clip.vision.projector.
 *             scale_factor, then the linear mm.model.fc.
 * Pure GLib: the GStreamer elements and the encoders sit above it. */
#pragma once

#include <glib.h>

#include "gguf.h"

G_BEGIN_DECLS

#define LLM_MMPROJ_ERROR (llm_mmproj_error_quark ())
GQuark llm_mmproj_error_quark (void);

typedef enum {
  LLM_MMPROJ_ERROR_NOT_MMPROJ,    /* not an mmproj file (architecture, no vision tower) */
  LLM_MMPROJ_ERROR_UNSUPPORTED,   /* a projector type this build does not read */
  LLM_MMPROJ_ERROR_INVALID,       /* a key or tensor missing, of the wrong shape or type */
} LlmMmprojError;

typedef enum {
  LLM_MMPROJ_MLP,
  LLM_MMPROJ_IDEFICS3,
} LlmMmprojType;

/* One weight of the tower or projector: a view into the mapped file. */
typedef struct {
  const LlmGgufTensor *t;         /* NULL when an optional one is absent */
} LlmMmprojWeight;

typedef struct {
  LlmMmprojWeight ln1_w, ln1_b, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b;
  LlmMmprojWeight ln2_w, ln2_b, up_w, up_b, down_w, down_b;
} LlmMmprojLayer;

typedef struct {
  LlmMmprojType type;
  guint32 n_embd, n_head, n_ff, n_layer;
  guint32 image_size, patch_size;
  guint32 n_patches;              /* (image_size / patch_size)^2 */
  guint32 n_positions;            /* n_patches, + 1 with a class embedding */
  float eps;
  float image_mean[3], image_std[3];
  gboolean gelu;                  /* clip.use_gelu (else quick GELU) */
  /* Layers the tower runs: Hugging Face's hidden_states[k] is the output
   * of the first k. mlp: the deepest clip.vision.feature_layer k in
   * 1..n_layer, or without one n_layer - 1 (LLaVA-1.5's penultimate layer,
   * as llama.cpp reads these files); idefics3: every layer. */
  guint32 n_layers_run;
  guint32 scale_factor;           /* idefics3: pixel shuffle factor; else 1 */
  /* idefics3: clip.vision.preproc_image_size, the long side an image is
   * resized to before it is cut into image_size tiles (SmolVLM: 2048);
   * 0 when the file has none (the image is not tiled). */
  guint32 longest_edge;
  guint32 n_out;                  /* embedding width the projector gives the LM */
  guint32 n_tokens;               /* LM tokens per image (per tile) */

  LlmMmprojWeight patch_w, patch_b, class_embd, pos_embd;
  LlmMmprojWeight pre_ln_w, pre_ln_b, post_ln_w, post_ln_b;
  LlmMmprojLayer *layers;         /* n_layer */
  /* mlp: mm.0 and mm.2; idefics3: mm.model.fc in proj0_w */
  LlmMmprojWeight proj0_w, proj0_b, proj2_w, proj2_b;
} LlmMmprojVision;

typedef struct _LlmMmproj LlmMmproj;

/* Opens and checks @path. */
LlmMmproj *llm_mmproj_load (const char *path, GError **error);
void llm_mmproj_free (LlmMmproj *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmMmproj, llm_mmproj_free)

const LlmMmprojVision *llm_mmproj_vision (const LlmMmproj *p);
/* "mlp", "idefics3" */
const char *llm_mmproj_type_name (LlmMmprojType type);

G_END_DECLS
