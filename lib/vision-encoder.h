/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The vision tower and projector of an mmproj file: one image, already
 * image_size x image_size RGB8, to n_tokens embedding rows of n_out
 * floats for the language model.
 *
 * Hugging Face's semantics: a CLIP tower (mlp) puts its class embedding
 * first and runs n_layers_run layers (the penultimate layer's output by
 * default), and the class row is not an image token; a SigLIP tower
 * (idefics3) runs every layer and its post-layernorm, then the pixel
 * shuffle.
 *
 * An LlmVisionEncoder runs the tower through a backend's table
 * (backend.h), as the language model's forward pass does: weights
 * prepared once when it is made (packed where the kernels want another
 * layout), scratch reserved once, products, norms and attention spread
 * over the process's worker pool of its thread count (workers.h), which
 * it shares with the engines of that count: an encode and a forward pass
 * take turns on the cores. GLib only. */
#pragma once

#include <glib.h>

#include "backend.h"
#include "cpu/matmul.h"
#include "mmproj.h"

G_BEGIN_DECLS

/* Which order the class row takes (towers with a class embedding). */
typedef enum {
  /* Hugging Face's: the class row first, with position 0. */
  LLM_VISION_CLASS_FIRST,
  /* llama.cpp's mtmd, for comparing with it: its CLIP graph puts the
   * class embedding after the patches while the position embeddings
   * assume it first (llama.cpp issue #25814, fix PR #25844 unmerged), so
   * each patch takes its neighbour's position, the first patch's output
   * is dropped and the class row is fed as the last image token. Not for
   * captioning. */
  LLM_VISION_CLASS_AS_LLAMA_CPP,
} LlmVisionClassOrder;

typedef struct {
  int n_threads;                  /* <= 0: one per usable core */
  LlmCpuKernelChoice kernels;     /* BEST; tests pick SCALAR for the reference */
  LlmVisionClassOrder class_order;
} LlmVisionEncoderOptions;

void llm_vision_encoder_options_init (LlmVisionEncoderOptions *opts);

typedef struct _LlmVisionEncoder LlmVisionEncoder;

/* An encoder of @p's tower on the CPU with @n_threads workers. @p is
 * borrowed: it must outlive the encoder. Fails for a file without a
 * vision tower (LLM_MMPROJ_ERROR_NOT_MMPROJ), memory, threads, or a
 * weight type or row width the kernels cannot multiply
 * (LLM_MMPROJ_ERROR_INVALID). */
LlmVisionEncoder *llm_vision_encoder_new (const LlmMmproj *p, int n_threads, GError **error);
/* The same with every option (@opts NULL: the defaults). */
LlmVisionEncoder *llm_vision_encoder_new_with (const LlmMmproj *p,
    const LlmVisionEncoderOptions *opts, GError **error);
void llm_vision_encoder_free (LlmVisionEncoder *enc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmVisionEncoder, llm_vision_encoder_free)

/* Encodes one image_size x image_size RGB8 image (rows @stride bytes
 * apart) into @out, n_tokens x n_out floats. Allocates nothing; calls on
 * one encoder are serialised. FALSE with @error only where a backend
 * fails (never on the CPU). */
gboolean llm_vision_encoder_encode (LlmVisionEncoder *enc, const guint8 *rgb, gsize stride,
    float *out, GError **error);

/* Merges tokens between the tower's layers (ToMe) so that about @kept of
 * the image's rows are left at its output, and every layer after the
 * first runs on fewer rows: the encoder's own compute shrinks with them.
 * 1 merges none. Only towers that project their tokens one by one (mlp):
 * a pixel shuffle needs the whole grid (LLM_MMPROJ_ERROR_UNSUPPORTED).
 * llm_vision_encoder_n_tokens gives the rows it leaves. */
gboolean llm_vision_encoder_set_merge (LlmVisionEncoder *enc, double kept, GError **error);
/* Tokens of one image: n_tokens of the file, fewer with merging. */
guint llm_vision_encoder_n_tokens (const LlmVisionEncoder *enc);
guint llm_vision_encoder_n_out (const LlmVisionEncoder *enc);
/* The side of the images it takes, in pixels. */
guint llm_vision_encoder_image_size (const LlmVisionEncoder *enc);
int llm_vision_encoder_n_threads (const LlmVisionEncoder *enc);
/* The backend and its kernels, e.g. "cpu/avx512". */
const char *llm_vision_encoder_backend_name (const LlmVisionEncoder *enc);

/* One image on one thread with the kernels of @kern, through a
 * short-lived encoder (it prepares the weights each call: for tests and
 * one-off use; keep an LlmVisionEncoder for a stream of images). @out
 * holds n_tokens x n_out floats. */
gboolean llm_vision_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const guint8 *rgb,
    gsize stride, float *out, GError **error);

/* The same in llama.cpp's order (LLM_VISION_CLASS_AS_LLAMA_CPP). Towers
 * without a class embedding (SigLIP) are unaffected: there it equals
 * llm_vision_encode. */
gboolean llm_vision_encode_as_llama_cpp (const LlmMmproj *p, const LlmCpuKernels *kern,
    const guint8 *rgb, gsize stride, float *out, GError **error);

G_END_DECLS
