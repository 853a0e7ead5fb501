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

static void
linear (LlmBackend *be, LlmBackendQueue *q, const float *x, guint n, const LlmWeight *w,
    const LlmWeight *b, float *y)
{
  be->ops->matmul (be, q, x, n, &w, &y, 1);
  if (b != NULL)
    be->ops->add_bias (be, q, y, b, n);
}

void
llm_encoder_block (LlmBackend *be, LlmBackendQueue *q, const LlmEncoderLayer *ly,
    const LlmEncoderRows *r, const LlmAttnShape *shape, guint n, gsize width, gsize n_ff,
    float eps, LlmGelu gelu)
{
  const LlmBackendOps *ops = be->ops;
  ops->layernorm (be, q, r->x, ly->ln1_w, ly->ln1_b, r->h, n, width, eps);
  const LlmWeight *qkv[] = { ly->q_w, ly->k_w, ly->v_w };
  float *const qkv_out[] = { r->q, r->k, r->v };
  ops->matmul (be, q, r->h, n, qkv, qkv_out, 3);
  const LlmWeight *qkv_b[] = { ly->q_b, ly->k_b, ly->v_b };
  for (guint i = 0; i < 3; i++)
    if (qkv_b[i] != NULL)
      ops->add_bias (be, q, qkv_out[i], qkv_b[i], n);
  ops->attention_full (be, q, shape, r->q, r->k, r->v, n, r->att);
  linear (be, q, r->att, n, ly->o_w, ly->o_b, r->h);
  ops->add (be, q, r->x, r->h, n, width);

  ops->layernorm (be, q, r->x, ly->ln2_w, ly->ln2_b, r->h, n, width, eps);
  linear (be, q, r->h, n, ly->up_w, ly->up_b, r->wide);
  ops->gelu (be, q, r->wide, n, n_ff, gelu);
  linear (be, q, r->wide, n, ly->down_w, ly->down_b, r->h);
  ops->add (be, q, r->x, r->h, n, width);
}

void
llm_encoder_weights_add_layer (LlmEncoderWeights *w, const LlmMmprojLayer *src,
    LlmEncoderLayer *ly)
{
#define M(t) llm_encoder_weights_add (w, &(t), FALSE)
#define V(t) llm_encoder_weights_add (w, &(t), TRUE)
  ly->ln1_w = V (src->ln1_w);
  ly->ln1_b = V (src->ln1_b);
  ly->q_w = M (src->q_w);
  ly->q_b = V (src->q_b);
  ly->k_w = M (src->k_w);
  ly->k_b = V (src->k_b);
  ly->v_w = M (src->v_w);
  ly->v_b = V (src->v_b);
  ly->o_w = M (src->o_w);
  ly->o_b = V (src->o_b);
  ly->ln2_w = V (src->ln2_w);
  ly->ln2_b = V (src->ln2_b);
  ly->up_w = M (src->up_w);
  ly->up_b = V (src->up_b);
  ly->down_w = M (src->down_w);
  ly->down_b = V (src->down_b);
#undef M
#undef V
}

gboolean
llm_encoder_backend_open (int n_threads, LlmCpuKernelChoice kernels, LlmWorkers **workers,
    LlmBackend **be, char **name, GError **error)
{
  *workers = llm_workers_get (n_threads, error);
  if (*workers == NULL)
    return FALSE;
  *be = llm_backend_cpu_new (kernels, llm_workers_n_threads (*workers), error);
  if (*be == NULL)
    return FALSE;
  *name = g_strdup_printf ("%s/%s", (*be)->ops->name, llm_backend_cpu_kernels_name (*be));
  return TRUE;
}
