/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the multimodal encoders' towers share on the CPU (the vision
 * towers, Whisper's audio encoder): linear layers through the matmul
 * kernels, layer norms of rows, full attention through the engine's
 * attention kernels, and one pre-norm transformer block of them. Single
 * thread: the first, reference-checked version. */
#pragma once

#include <glib.h>

#include "cpu/attention.h"
#include "cpu/matmul.h"
#include "mmproj.h"

G_BEGIN_DECLS

/* y[r] = W x_r (+ b) for @n rows of the weight's input width (its rows
 * are the last dimension: a convolution kernel [taps, in, out] or a patch
 * kernel [p, p, 3, out] too). @scratch holds @n rows converted for the
 * weight's type: llm_encoder_act_bytes (n, width). */
void llm_encoder_linear (const LlmCpuKernels *kern, const LlmMmprojWeight *w,
    const LlmMmprojWeight *b, const float *x, gsize n, float *y, guint8 *scratch);

/* Bytes of llm_encoder_linear's scratch for @n rows of at most @width
 * inputs, whatever the weight type. */
gsize llm_encoder_act_bytes (gsize n, gsize width);

/* Layer norm (llm_cpu_layernorm) of @n rows of @width; @w, @b optional. */
void llm_encoder_norm_rows (const LlmMmprojWeight *w, const LlmMmprojWeight *b, const float *x,
    float *y, gsize n, gsize width, float eps);

/* Full (not causal) attention of @n rows, @heads heads of @hd values:
 * every query attends to every key. @queries holds @n, @scratch
 * llm_attention_batch_scratch_floats (n, hd, n) floats. */
void llm_encoder_attention (const LlmCpuKernels *kern, const float *q, const float *k,
    const float *v, float *out, gsize n, guint heads, gsize hd, LlmAttnQuery *queries,
    float *scratch);

typedef enum {
  LLM_ENCODER_GELU_TANH,          /* SigLIP, ggml_gelu's formula */
  LLM_ENCODER_GELU_QUICK,         /* CLIP: x sigmoid (1.702 x) */
  LLM_ENCODER_GELU_ERF,           /* Whisper: the exact form */
} LlmEncoderGelu;

/* A block's working memory, for @n rows of width e with feed-forward
 * width n_ff, held by the caller. */
typedef struct {
  float *h, *q, *k, *v;           /* n x e each */
  float *tmp;                     /* n x max (e, n_ff) */
  float *att;                     /* llm_attention_batch_scratch_floats (n, e / heads, n) */
  LlmAttnQuery *queries;          /* n */
  guint8 *act;                    /* llm_encoder_act_bytes (n, max (e, n_ff)) */
} LlmEncoderBuffers;

/* @x (@n rows of @e) through one pre-norm block: x += attn (ln1 (x));
 * x += ffn (ln2 (x)), the feed-forward up, GELU, down. */
void llm_encoder_block (const LlmCpuKernels *kern, const LlmMmprojLayer *ly, float *x, gsize n,
    gsize e, guint heads, gsize n_ff, float eps, LlmEncoderGelu gelu,
    const LlmEncoderBuffers *b);

G_END_DECLS
