/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "vision-encoder.h"

#include <math.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/vision.h"

/* y[t][r] = W x_t (+ b) for @n rows of @t's input width. */
static void
linear (const LlmCpuKernels *kern, const LlmMmprojWeight *w, const LlmMmprojWeight *b,
    const float *x, gsize n, float *y, guint8 *scratch)
{
  /* Rows are the last dimension (a patch kernel [p, p, 3, n_embd] too). */
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

static void
norm_rows (const LlmMmprojWeight *w, const LlmMmprojWeight *b, const float *x, float *y,
    gsize n, gsize width, float eps)
{
  for (gsize r = 0; r < n; r++)
    llm_cpu_layernorm (x + r * width, w->t ? (const float *) w->t->data : NULL,
        b->t ? (const float *) b->t->data : NULL, y + r * width, width, eps);
}

/* Full (not causal) attention of @n rows, @heads heads of @hd values,
 * through the engine's attention kernels: the keys and values are one
 * block of @n F32 rows, and every query attends to all of them. */
static void
attention (const LlmCpuKernels *kern, const float *q, const float *k, const float *v,
    float *out, gsize n, guint heads, gsize hd, LlmAttnQuery *queries, float *scratch)
{
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

/* @cls_last: llama.cpp's CLIP graph (see llm_vision_encode_as_llama_cpp). */
static gboolean
encode (const LlmMmproj *p, const LlmCpuKernels *kern, const guint8 *rgb, gsize stride,
    gboolean cls_last, float *out, GError **error)
{
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const gsize s = v->image_size, e = v->n_embd, n = v->n_positions, np = v->n_patches;
  const gsize pk = 3 * (gsize) v->patch_size * v->patch_size;
  gsize widest = MAX (MAX (e, v->n_ff), MAX ((gsize) v->n_out, e * v->scale_factor *
          v->scale_factor));
  widest = MAX (widest, v->proj0_w.t->ne[1]);
  const gsize hd = e / v->n_head;
  const gsize att = llm_attention_batch_scratch_floats (n, hd, n);
  const gsize floats = 3 * s * s + np * pk + 6 * n * widest + att;
  float *buf = g_try_new (float, floats);
  guint8 *scratch = g_try_malloc (n * llm_matmul_act_bytes (LLM_TYPE_F32, MAX (widest, pk)) + 64);
  LlmAttnQuery *queries = g_try_new (LlmAttnQuery, n);
  if (buf == NULL || scratch == NULL || queries == NULL) {
    g_free (buf);
    g_free (scratch);
    g_free (queries);
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOMEM,
        "out of memory for the vision encoder's %" G_GSIZE_FORMAT " floats", floats);
    return FALSE;
  }
  float *planes = buf, *patches = planes + 3 * s * s, *x = patches + np * pk;
  float *h = x + n * widest, *q = h + n * widest, *k = q + n * widest, *val = k + n * widest;
  float *tmp = val + n * widest, *att_scratch = tmp + n * widest;

  llm_cpu_image_normalize (rgb, s, s, stride, v->image_mean, v->image_std, planes);
  llm_cpu_image_patches (planes, s, s, v->patch_size, patches);
  /* The class row first (CLIP), then the patches. */
  const gsize first = v->class_embd.t != NULL;
  linear (kern, &v->patch_w, &v->patch_b, patches, np, x + (first && !cls_last) * e, scratch);
  if (first)
    memcpy (x + (cls_last ? np : 0) * e, v->class_embd.t->data, e * sizeof *x);
  const float *pos = (const float *) v->pos_embd.t->data;
  for (gsize i = 0; i < n * e; i++)
    x[i] += pos[i];
  if (v->pre_ln_w.t)
    norm_rows (&v->pre_ln_w, &v->pre_ln_b, x, x, n, e, v->eps);

  for (guint32 l = 0; l < v->n_layers_run; l++) {
    const LlmMmprojLayer *ly = &v->layers[l];
    norm_rows (&ly->ln1_w, &ly->ln1_b, x, h, n, e, v->eps);
    linear (kern, &ly->q_w, &ly->q_b, h, n, q, scratch);
    linear (kern, &ly->k_w, &ly->k_b, h, n, k, scratch);
    linear (kern, &ly->v_w, &ly->v_b, h, n, val, scratch);
    attention (kern, q, k, val, tmp, n, v->n_head, hd, queries, att_scratch);
    linear (kern, &ly->o_w, &ly->o_b, tmp, n, h, scratch);
    for (gsize i = 0; i < n * e; i++)
      x[i] += h[i];
    norm_rows (&ly->ln2_w, &ly->ln2_b, x, h, n, e, v->eps);
    linear (kern, &ly->up_w, &ly->up_b, h, n, tmp, scratch);
    if (v->gelu)
      llm_cpu_gelu_tanh (tmp, n * v->n_ff);
    else
      llm_cpu_gelu_quick (tmp, n * v->n_ff);
    linear (kern, &ly->down_w, &ly->down_b, tmp, n, h, scratch);
    for (gsize i = 0; i < n * e; i++)
      x[i] += h[i];
  }
  if (v->post_ln_w.t && v->n_layers_run == v->n_layer)
    norm_rows (&v->post_ln_w, &v->post_ln_b, x, x, n, e, v->eps);

  /* The class row is not an image token; llama.cpp's graph drops row 0
   * whatever it holds. */
  const float *image = x + first * e;
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    const gsize side = s / v->patch_size;
    llm_cpu_pixel_shuffle (image, e, side, side, v->scale_factor, tmp);
    linear (kern, &v->proj0_w, &v->proj0_b, tmp, v->n_tokens, out, scratch);
  } else {
    linear (kern, &v->proj0_w, &v->proj0_b, image, np, tmp, scratch);
    llm_cpu_gelu_tanh (tmp, np * v->proj0_w.t->ne[1]);
    linear (kern, &v->proj2_w, &v->proj2_b, tmp, np, out, scratch);
  }
  g_free (buf);
  g_free (scratch);
  g_free (queries);
  return TRUE;
}

gboolean
llm_vision_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const guint8 *rgb,
    gsize stride, float *out, GError **error)
{
  return encode (p, kern, rgb, stride, FALSE, out, error);
}

gboolean
llm_vision_encode_as_llama_cpp (const LlmMmproj *p, const LlmCpuKernels *kern,
    const guint8 *rgb, gsize stride, float *out, GError **error)
{
  return encode (p, kern, rgb, stride, TRUE, out, error);
}
