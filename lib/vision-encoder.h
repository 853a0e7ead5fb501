/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The vision tower and projector of an mmproj file on the CPU: one image,
 * already image_size x image_size RGB8, to n_tokens embedding rows of
 * n_out floats for the language model. Hugging Face's semantics: a CLIP
 * tower (mlp) puts its class embedding first and runs n_layers_run layers
 * (the penultimate layer's output by default), and the class row is not
 * an image token; a SigLIP tower
 * (idefics3) runs every layer and its post-layernorm, then the pixel
 * shuffle. Matrix products use the kernels of @kern (single thread: the
 * first, reference-checked version). */
#pragma once

#include <glib.h>

#include "cpu/matmul.h"
#include "mmproj.h"

G_BEGIN_DECLS

/* @out holds n_tokens x n_out floats. FALSE with @error only for memory,
 * or when @p has no vision tower (LLM_MMPROJ_ERROR_NOT_MMPROJ). */
gboolean llm_vision_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const guint8 *rgb,
    gsize stride, float *out, GError **error);

/* The same as llama.cpp's mtmd computes it, for comparing with its
 * output: its CLIP graph puts the class embedding after the patches while
 * the position embeddings assume it first (llama.cpp issue #25814, fix
 * PR #25844 unmerged), so each patch takes its neighbour's position, the
 * first patch's output is dropped and the class row is fed as the last
 * image token. Towers without a class embedding (SigLIP) are unaffected:
 * there it equals llm_vision_encode. Not for captioning. */
gboolean llm_vision_encode_as_llama_cpp (const LlmMmproj *p, const LlmCpuKernels *kern,
    const guint8 *rgb, gsize stride, float *out, GError **error);

G_END_DECLS
