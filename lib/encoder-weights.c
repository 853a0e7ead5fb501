/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "encoder-weights.h"

#include "cpu/matmul.h"
#include "ggml-type.h"

void
llm_encoder_weights_init (LlmEncoderWeights *w, LlmBackend *be, guint cap)
{
  *w = (LlmEncoderWeights) { .be = be, .all = g_new0 (LlmWeight, cap), .cap = cap };
}

const LlmWeight *
llm_encoder_weights_add (LlmEncoderWeights *w, const LlmMmprojWeight *src, gboolean vector)
{
  const LlmGgufTensor *t = src->t;
  if (t == NULL)
    return NULL;
  const gsize out = t->ne[MAX (t->n_dims, 1) - 1];
  return llm_encoder_weights_add_part (w, src, vector, 0, vector ? t->n_elems : out);
}

const LlmWeight *
llm_encoder_weights_add_part (LlmEncoderWeights *w, const LlmMmprojWeight *src,
    gboolean vector, gsize first, gsize n)
{
  const LlmGgufTensor *t = src->t;
  if (t == NULL || w->error != NULL)
    return NULL;
  g_return_val_if_fail (w->n_all < w->cap, NULL);
  const gsize out = t->ne[MAX (t->n_dims, 1) - 1], in = t->n_elems / out;
  uint32_t block = 1, block_bytes = 0;
  if (!vector && (!llm_matmul_supports (t->type) || !llm_type_info (t->type, &block,
              &block_bytes) || in % block != 0)) {
    g_set_error (&w->error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_INVALID,
        "tensor %s: the CPU kernels cannot multiply %s rows of %" G_GSIZE_FORMAT " values",
        t->name, llm_type_name (t->type), in);
    return NULL;
  }
  /* A vector part starts at a whole value: its type has one per block
   * (F32, F16), as every norm and bias the loader accepts. */
  const gsize total = vector ? t->n_elems : out;
  const gsize unit = vector ? t->size / t->n_elems : t->size / out;
  if (first + n > total || (vector && first != 0 && t->size % t->n_elems != 0)) {
    g_set_error (&w->error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_INVALID,
        "tensor %s: no part [%" G_GSIZE_FORMAT ", %" G_GSIZE_FORMAT ") of its %"
        G_GSIZE_FORMAT, t->name, first, first + n, total);
    return NULL;
  }
  LlmWeight *lw = &w->all[w->n_all++];
  *lw = (LlmWeight) {
    .type = t->type, .n = (guint32) (vector ? n : in), .rows = vector ? 1 : (guint32) n,
    .row_bytes = vector ? n * unit : unit, .host = (const guint8 *) t->data + first * unit,
  };
  if (!w->be->ops->prepare_weight (w->be, lw, vector, &w->error)) {
    g_prefix_error (&w->error, "tensor %s: ", t->name);
    lw->host = NULL;            /* nothing to release */
    return NULL;
  }
  return lw;
}

gboolean
llm_encoder_weights_check (LlmEncoderWeights *w, GError **error)
{
  if (w->error == NULL)
    return TRUE;
  g_propagate_error (error, w->error);
  w->error = NULL;
  return FALSE;
}

void
llm_encoder_weights_clear (LlmEncoderWeights *w)
{
  if (w->be != NULL)
    for (guint i = 0; i < w->n_all; i++)
      if (w->all[i].host != NULL)
        w->be->ops->release_weight (w->be, &w->all[i]);
  g_clear_error (&w->error);
  g_free (w->all);
  *w = (LlmEncoderWeights) { 0 };
}
