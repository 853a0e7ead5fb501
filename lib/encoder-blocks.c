/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "encoder-blocks.h"

#include <math.h>

#include "cpu/audio.h"
#include "cpu/ops.h"
#include "cpu/vision.h"
#include "ggml-type.h"

void
llm_encoder_linear (const LlmCpuKernels *kern, const LlmMmprojWeight *w,
    const LlmMmprojWeight *b, const float *x, gsize n, float *y, guint8 *scratch)
{
  const LlmGgufTensor *t = w->t;
  const gsize out = t->ne[MAX (t->n_dims, 1) - 1], in = t->n_elems / out;
  const gsize row_bytes = t->size / out;
  const gsize act = llm_matmul_act_bytes (t->type, in);
  for (gsize r = 0; r < n; r++)
    llm_matmul_convert (kern, t->type, x + r * in, in, scratch + r * act);
  llm_matmul (kern, t->type, t->data, row_bytes, in, 0, out, scratch, act, n, y, out);
  if (b->t != NULL) {
    const float *bias = (const float *) b->t->data;
    for (gsize r = 0; r < n; r++)
      for (gsize i = 0; i < out; i++)
        y[r * out + i] += bias[i];
  }
}

gsize
llm_encoder_act_bytes (gsize n, gsize width)
{
  /* F32's are the widest converted activations; 64 bytes of slack for a
   * dot type's block rounding. */
  return n * llm_matmul_act_bytes (LLM_TYPE_F32, width) + 64;
}

void
llm_encoder_norm_rows (const LlmMmprojWeight *w, const LlmMmprojWeight *b, const float *x,
    float *y, gsize n, gsize width, float eps)
{
  for (gsize r = 0; r < n; r++)
    llm_layernorm (y + r * width, x + r * width, w->t ? (const float *) w->t->data : NULL,
        b->t ? (const float *) b->t->data : NULL, width, eps);
}

void
llm_encoder_attention (const LlmCpuKernels *kern, const float *q, const float *k,
    const float *v, float *out, gsize n, guint heads, gsize hd, LlmAttnQuery *queries,
    float *scratch)
{
  /* The keys and values are one block of @n F32 rows. */
  const gsize e = heads * hd;
  const void *kb[1] = { k }, *vb[1] = { v };
  const LlmAttnRows krows = { kb, n, e * sizeof (float), LLM_ATTN_F32, 0, 0 };
  const LlmAttnRows vrows = { vb, n, e * sizeof (float), LLM_ATTN_F32, 0, 0 };
  for (guint h = 0; h < heads; h++) {
    for (gsize i = 0; i < n; i++)
      queries[i] = (LlmAttnQuery) { q + i * e + h * hd, out + i * e + h * hd, n };
    llm_attention_batch (kern, &krows, &vrows, h * hd, hd, queries, n,
        1.0f / sqrtf ((float) hd), scratch);
  }
}

void
llm_encoder_block (const LlmCpuKernels *kern, const LlmMmprojLayer *ly, float *x, gsize n,
    gsize e, guint heads, gsize n_ff, float eps, LlmEncoderGelu gelu,
    const LlmEncoderBuffers *b)
{
  llm_encoder_norm_rows (&ly->ln1_w, &ly->ln1_b, x, b->h, n, e, eps);
  llm_encoder_linear (kern, &ly->q_w, &ly->q_b, b->h, n, b->q, b->act);
  llm_encoder_linear (kern, &ly->k_w, &ly->k_b, b->h, n, b->k, b->act);
  llm_encoder_linear (kern, &ly->v_w, &ly->v_b, b->h, n, b->v, b->act);
  llm_encoder_attention (kern, b->q, b->k, b->v, b->tmp, n, heads, e / heads, b->queries,
      b->att);
  llm_encoder_linear (kern, &ly->o_w, &ly->o_b, b->tmp, n, b->h, b->act);
  for (gsize i = 0; i < n * e; i++)
    x[i] += b->h[i];
  llm_encoder_norm_rows (&ly->ln2_w, &ly->ln2_b, x, b->h, n, e, eps);
  llm_encoder_linear (kern, &ly->up_w, &ly->up_b, b->h, n, b->tmp, b->act);
  switch (gelu) {
    case LLM_ENCODER_GELU_TANH:
      llm_cpu_gelu (kern, b->tmp, b->tmp, n * n_ff);
      break;
    case LLM_ENCODER_GELU_QUICK:
      llm_cpu_gelu_quick (kern, b->tmp, b->tmp, n * n_ff);
      break;
    case LLM_ENCODER_GELU_ERF:
      llm_cpu_gelu_erf (b->tmp, n * n_ff);
      break;
  }
  llm_encoder_linear (kern, &ly->down_w, &ly->down_b, b->tmp, n, b->h, b->act);
  for (gsize i = 0; i < n * e; i++)
    x[i] += b->h[i];
}
