/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The weights of a multimodal tower (vision-encoder.c, audio-encoder.c)
 * as a backend holds them: each tensor of the mmproj file prepared once
 * (backend.h, section 2) into a fixed set the encoder owns, and released
 * together. GLib only. */
#pragma once

#include <glib.h>

#include "backend.h"
#include "mmproj.h"
#include "workers.h"

G_BEGIN_DECLS

typedef struct {
  LlmBackend *be;               /* borrowed */
  LlmWeight *all;               /* [cap] */
  guint n_all, cap;
  GError *error;                /* the first failure; later adds do nothing */
} LlmEncoderWeights;

/* Room for @cap weights on @be. */
void llm_encoder_weights_init (LlmEncoderWeights *w, LlmBackend *be, guint cap);

/* @src prepared for the backend, or NULL when the file has none (or after
 * a failure, kept in w->error). A matrix's rows are its last dimension
 * (a patch kernel [p, p, 3, n] or a convolution kernel [taps, in, out]
 * too); a vector (@vector) is all of its values as one row, as the
 * norms, biases and position embeddings are read. Fails for a matrix
 * type or row width the CPU kernels cannot multiply
 * (LLM_MMPROJ_ERROR_INVALID) and for memory. */
const LlmWeight *llm_encoder_weights_add (LlmEncoderWeights *w, const LlmMmprojWeight *src,
    gboolean vector);

/* The same for @n rows of a matrix (values of a vector) from @first on:
 * one half of a fused projection (Ultravox's SwiGLU input and gate). */
const LlmWeight *llm_encoder_weights_add_part (LlmEncoderWeights *w,
    const LlmMmprojWeight *src, gboolean vector, gsize first, gsize n);

/* Moves the first failure to @error: TRUE when there was none. */
gboolean llm_encoder_weights_check (LlmEncoderWeights *w, GError **error);

/* Releases every weight added and the set. */
void llm_encoder_weights_clear (LlmEncoderWeights *w);

/* A tower's process-wide workers for @n_threads and a CPU backend of
 * @kernels sized for them, and the backend's name as the encoders report
 * it ("cpu/avx512"). FALSE with @error, leaving whatever was made in the
 * out-parameters for the caller's free. */
gboolean llm_encoder_backend_open (int n_threads, LlmCpuKernelChoice kernels,
    LlmWorkers **workers, LlmBackend **be, char **name, GError **error);

/* One pre-norm transformer block of a tower, as both encoders hold it. */
typedef struct {
  const LlmWeight *ln1_w, *ln1_b, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b;
  const LlmWeight *ln2_w, *ln2_b, *up_w, *up_b, *down_w, *down_b;
} LlmEncoderLayer;

/* The 16 weights of block @src, prepared into @w (NULLs after a
 * failure, kept in w->error, as llm_encoder_weights_add). */
void llm_encoder_weights_add_layer (LlmEncoderWeights *w, const LlmMmprojLayer *src,
    LlmEncoderLayer *ly);

/* The backend buffers a block runs in: x (the rows, updated), and
 * scratch h, q, k, v, att (n x width) and wide (n x n_ff). */
typedef struct {
  float *x, *h, *q, *k, *v, *att, *wide;
} LlmEncoderRows;

/* @n rows of r->x through @ly: x += attn (ln1 (x)); x += down (GELU (up
 * (ln2 (x)))), every stage a call into @be's table; full (not causal)
 * attention of @shape; absent biases are skipped (Whisper's keys). */
void llm_encoder_block (LlmBackend *be, LlmBackendQueue *q, const LlmEncoderLayer *ly,
    const LlmEncoderRows *r, const LlmAttnShape *shape, guint n, gsize width, gsize n_ff,
    float eps, LlmGelu gelu);

G_END_DECLS
