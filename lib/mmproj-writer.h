/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes mmproj files with random weights in llama.cpp's layout, for the
 * tests, the benchmark and the pipelines that must run without real
 * vision or audio weights (none can be had on a fresh machine). The same files load
 * in llama.cpp's mtmd, which is how the golden embeddings are made. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *type;           /* clip.projector_type: "mlp" or "idefics3" */
  guint image, patch, n_embd, n_ff, n_layer, n_head, n_out;
  guint scale;                /* idefics3's pixel shuffle factor; 0 for mlp */
  gboolean class_embd;        /* a CLIP tower (mlp) has one */
  /* For tests of refused files: a tensor to leave out and one to make one
   * bigger in its last dimension (NULL or "" for none). */
  const char *drop, *widen;
  guint longest_edge;         /* idefics3: clip.vision.preproc_image_size; 0 none */
} LlmMmprojShape;

/* Shapes of public models at their real sizes, projecting to @n_out (the
 * language model's width): SmolVLM-256M's SigLIP-B/16 tower (512 pixels,
 * 12 layers of 768) and pixel shuffle by 4; a LLaVA-style CLIP-L/14 tower
 * (336 pixels, 24 layers of 1024) with its MLP. */
void llm_mmproj_shape_smolvlm (LlmMmprojShape *s, guint n_out);
void llm_mmproj_shape_llava (LlmMmprojShape *s, guint n_out);

/* A Whisper-style audio tower and its projector. */
typedef struct {
  const char *type;           /* clip.projector_type: "ultravox", "qwen2a" or "voxtral" */
  guint n_mel, n_embd, n_ff, n_layer, n_head;
  guint n_positions;          /* a.position_embd rows: 1500 (30 s) in Whisper */
  guint n_out;
  guint stack;                /* ultravox, voxtral: frames per row; 0 for qwen2a */
  guint n_proj_hidden;        /* ultravox: SwiGLU's width; voxtral: mm.a.mlp.1's; 0 for qwen2a */
  /* As in LlmMmprojShape. */
  const char *drop, *widen;
} LlmMmprojAudioShape;

/* Whisper-tiny's encoder (80 mel bins, 4 layers of 384, 6 heads, 1536
 * wide feed-forward, 30 s of positions) with Ultravox's projector
 * (frames stacked by 8, SwiGLU as wide as @n_out) to @n_out. */
void llm_mmproj_shape_whisper_tiny_ultravox (LlmMmprojAudioShape *s, guint n_out);
/* The same projector on Whisper-base's encoder (6 layers of 512, 8
 * heads, feed-forward 2048) and Whisper-small's (12 layers of 768, 12
 * heads, 3072): the benchmarks' larger towers. */
void llm_mmproj_shape_whisper_base_ultravox (LlmMmprojAudioShape *s, guint n_out);
void llm_mmproj_shape_whisper_small_ultravox (LlmMmprojAudioShape *s, guint n_out);

/* The tests' small tower of @type ("ultravox", "qwen2a", "voxtral"): 80
 * mel bins (the real front end's), 64 wide, 2 layers of 4 heads,
 * feed-forward 128, 30 s of positions (so mtmd can encode it), to @n_out;
 * Ultravox stacks by 8 and Voxtral by 4, both to a hidden width of 40. */
void llm_mmproj_shape_audio_tiny (LlmMmprojAudioShape *s, const char *type, guint n_out);

/* Writes @s with weights drawn from @seed (the same seed gives the same
 * file) to @path. Matrices are F16, biases and norms F32. */
gboolean llm_mmproj_write_random (const LlmMmprojShape *s, guint64 seed, const char *path,
    GError **error);

/* Writes the towers that are not NULL, at least one, to one file: with
 * both, each tower's projector type goes under its own key
 * (clip.vision.projector_type, clip.audio.projector_type) as llama.cpp's
 * converter writes files of two modalities. Convolution kernels are F16
 * as the converter forces them; position embeddings F32. */
gboolean llm_mmproj_write_random_towers (const LlmMmprojShape *vision,
    const LlmMmprojAudioShape *audio, guint64 seed, const char *path, GError **error);

G_END_DECLS
