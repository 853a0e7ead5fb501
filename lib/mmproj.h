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
 * A file holds a vision tower (clip.has_vision_encoder, v.* tensors), an
 * audio tower (clip.has_audio_encoder, a.* tensors, mm.a.* projector) or
 * both; each has its own projector type (clip.projector_type, or
 * clip.vision.projector_type and clip.audio.projector_type in files of
 * both).
 *
 * Read today (vision):
 *   mlp       LLaVA-1.5 style: a CLIP ViT (class embedding, pre-layernorm)
 *             and the two-layer MLP mm.0 / mm.2 (GELU between them).
 *   idefics3  SmolVLM / Idefics3: a SigLIP ViT (no class embedding,
 *             post-layernorm), pixel shuffle by clip.vision.projector.
 *             scale_factor, then the linear mm.model.fc.
 * Read today (audio: a Whisper encoder, two 1-D convolutions, the second
 * of stride 2, learned positions, pre-norm blocks and a post-layernorm):
 *   ultravox  Ultravox: stack_factor consecutive frames stacked into one
 *             row, RMS norm, mm.a.mlp.1, SwiGLU, RMS norm, mm.a.mlp.2.
 *   qwen2a    Qwen2-Audio: pairs of frames averaged before the post-
 *             layernorm, then the linear mm.a.fc.
 *   voxtral   Voxtral: frames stacked by 4, mm.a.mlp.1, GELU, mm.a.mlp.2
 *             (Hugging Face's VoxtralForConditionalGeneration; llama.cpp
 *             also averages pairs of frames for it, see audio-encoder.h).
 * Pure GLib: the GStreamer elements and the encoders sit above it. */
#pragma once

#include <glib.h>

#include "gguf.h"

G_BEGIN_DECLS

#define LLM_MMPROJ_ERROR (llm_mmproj_error_quark ())
GQuark llm_mmproj_error_quark (void);

typedef enum {
  LLM_MMPROJ_ERROR_NOT_MMPROJ,    /* not an mmproj file, or without the tower asked for */
  LLM_MMPROJ_ERROR_UNSUPPORTED,   /* a projector type this build does not read */
  LLM_MMPROJ_ERROR_INVALID,       /* a key or tensor missing, of the wrong shape or type */
} LlmMmprojError;

typedef enum {
  LLM_MMPROJ_MLP,
  LLM_MMPROJ_IDEFICS3,
  LLM_MMPROJ_ULTRAVOX,
  LLM_MMPROJ_QWEN2A,
  LLM_MMPROJ_VOXTRAL,
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

/* An audio tower: log-mel frames (n_mel bins of whisper's front end,
 * audio-mel.h) to n_out-wide rows for the language model. */
typedef struct {
  LlmMmprojType type;
  guint32 n_embd, n_head, n_ff, n_layer;
  guint32 n_mel;                  /* clip.audio.num_mel_bins: 80 or 128 */
  /* Whisper's front end, fixed for these projector types as llama.cpp
   * fixes it: 16 kHz, 400-sample Hann window, 160-sample hop. */
  guint32 sample_rate, n_fft, hop;
  guint32 n_positions;            /* rows of a.position_embd: encoder frames, 1500 = 30 s */
  guint32 n_frames_max;           /* mel frames one encode takes at most: 2 n_positions */
  float eps;
  guint32 stack_factor;           /* ultravox, voxtral: frames per row; else 1 */
  gboolean avg_pool;              /* qwen2a: pairs of frames averaged */
  guint32 n_proj_hidden;          /* ultravox: SwiGLU's width (half mm.a.mlp.1's); voxtral:
                                   * mm.a.mlp.1's; qwen2a: 0 */
  guint32 n_out;                  /* embedding width the projector gives the LM */

  /* The stem: a.conv1d.1 [3, n_mel, n_embd], a.conv1d.2 [3, n_embd,
   * n_embd], biases [1, n_embd]; a.position_embd [n_embd, n_positions]. */
  LlmMmprojWeight conv1_w, conv1_b, conv2_w, conv2_b, pos_embd;
  LlmMmprojWeight pre_ln_w, pre_ln_b, post_ln_w, post_ln_b;
  LlmMmprojLayer *layers;         /* n_layer; attn_k has no bias in Whisper */
  /* ultravox: mm.a.norm_pre, mm.a.mlp.1, mm.a.norm_mid, mm.a.mlp.2;
   * voxtral: mm.a.mlp.1, mm.a.mlp.2; qwen2a: mm.a.fc in proj1. */
  LlmMmprojWeight norm_pre_w, proj1_w, proj1_b, norm_mid_w, proj2_w, proj2_b;
} LlmMmprojAudio;

typedef struct _LlmMmproj LlmMmproj;

/* Which towers to read. */
typedef enum {
  LLM_MMPROJ_TOWER_VISION = 1 << 0,
  LLM_MMPROJ_TOWER_AUDIO = 1 << 1,
} LlmMmprojTowers;

/* Opens and checks @path: every tower it has, at least one. */
LlmMmproj *llm_mmproj_load (const char *path, GError **error);
/* Opens @path and checks the towers in @towers only, each of which the
 * file must have (LLM_MMPROJ_ERROR_NOT_MMPROJ otherwise); the others are
 * not read, so a file whose vision tower this build cannot read still
 * gives its audio tower. */
LlmMmproj *llm_mmproj_load_towers (const char *path, LlmMmprojTowers towers, GError **error);
void llm_mmproj_free (LlmMmproj *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmMmproj, llm_mmproj_free)

/* The towers read, or NULL for one the file has not (or was not asked
 * for). */
const LlmMmprojVision *llm_mmproj_vision (const LlmMmproj *p);
const LlmMmprojAudio *llm_mmproj_audio (const LlmMmproj *p);
/* "mlp", "idefics3", "ultravox", "qwen2a", "voxtral" */
const char *llm_mmproj_type_name (LlmMmprojType type);

/* Rows @a gives for @n_frames mel frames (1..n_frames_max): the stride-2
 * convolution halves them (rounding up), qwen2a's pooling halves them
 * again (rounding down), and stacking takes stack_factor at a time
 * (rounding up: the last row is padded with zeros). */
guint llm_mmproj_audio_n_tokens (const LlmMmprojAudio *a, guint n_frames);

G_END_DECLS
