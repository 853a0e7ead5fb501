/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "vision-encoder.h"

#include <math.h>
#include <string.h>

#include "cpu/vision.h"
#include "encoder-blocks.h"

/* @cls_last: llama.cpp's CLIP graph (see llm_vision_encode_as_llama_cpp). */
static gboolean
encode (const LlmMmproj *p, const LlmCpuKernels *kern, const guint8 *rgb, gsize stride,
    gboolean cls_last, float *out, GError **error)
{
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  if (v == NULL) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "the projector file has no vision tower");
    return FALSE;
  }
  const gsize s = v->image_size, e = v->n_embd, n = v->n_positions, np = v->n_patches;
  const gsize pk = 3 * (gsize) v->patch_size * v->patch_size;
  gsize widest = MAX (MAX (e, v->n_ff), MAX ((gsize) v->n_out, e * v->scale_factor *
          v->scale_factor));
  widest = MAX (widest, v->proj0_w.t->ne[1]);
  const gsize hd = e / v->n_head;
  const gsize att = llm_attention_batch_scratch_floats (n, hd, n);
  const gsize floats = 3 * s * s + np * pk + 6 * n * widest + att;
  float *buf = g_try_new (float, floats);
  guint8 *scratch = g_try_malloc (llm_encoder_act_bytes (n, MAX (widest, pk)));
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
  llm_encoder_linear (kern, &v->patch_w, &v->patch_b, patches, np,
      x + (first && !cls_last) * e, scratch);
  if (first)
    memcpy (x + (cls_last ? np : 0) * e, v->class_embd.t->data, e * sizeof *x);
  const float *pos = (const float *) v->pos_embd.t->data;
  for (gsize i = 0; i < n * e; i++)
    x[i] += pos[i];
  if (v->pre_ln_w.t)
    llm_encoder_norm_rows (&v->pre_ln_w, &v->pre_ln_b, x, x, n, e, v->eps);

  const LlmEncoderBuffers bufs = { h, q, k, val, tmp, att_scratch, queries, scratch };
  for (guint32 l = 0; l < v->n_layers_run; l++)
    llm_encoder_block (kern, &v->layers[l], x, n, e, v->n_head, v->n_ff, v->eps,
        v->gelu ? LLM_ENCODER_GELU_TANH : LLM_ENCODER_GELU_QUICK, &bufs);
  if (v->post_ln_w.t && v->n_layers_run == v->n_layer)
    llm_encoder_norm_rows (&v->post_ln_w, &v->post_ln_b, x, x, n, e, v->eps);

  /* The class row is not an image token; llama.cpp's graph drops row 0
   * whatever it holds. */
  const float *image = x + first * e;
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    const gsize side = s / v->patch_size;
    llm_cpu_pixel_shuffle (image, e, side, side, v->scale_factor, tmp);
    llm_encoder_linear (kern, &v->proj0_w, &v->proj0_b, tmp, v->n_tokens, out, scratch);
  } else {
    llm_encoder_linear (kern, &v->proj0_w, &v->proj0_b, image, np, tmp, scratch);
    llm_cpu_gelu_tanh (tmp, np * v->proj0_w.t->ne[1]);
    llm_encoder_linear (kern, &v->proj2_w, &v->proj2_b, tmp, np, out, scratch);
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
