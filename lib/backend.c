/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every backend shares: its reference count, and the weights it
 * prepared, kept on the model so that every engine of one model on one
 * kind of backend holds one prepared copy. */
#include "backend.h"
#include "model-private.h"

typedef struct {
  LlmWeights pub;
  gint ref_count;             /* under the model's prepared_lock */
  char *key;
  LlmBackend *be;             /* releases what it prepared */
} Prepared;

LlmBackend *
llm_backend_ref (LlmBackend *be)
{
  g_return_val_if_fail (be != NULL, NULL);
  g_atomic_int_inc (&be->ref_count);
  return be;
}

void
llm_backend_unref (LlmBackend *be)
{
  if (be != NULL && g_atomic_int_dec_and_test (&be->ref_count))
    be->ops->destroy (be);
}

static void
prepared_free (Prepared *p)
{
  for (guint i = 0; i < p->pub.n_all; i++)
    if (p->pub.all[i].host != NULL)
      p->be->ops->release_weight (p->be, &p->pub.all[i]);
  g_free (p->pub.all);
  g_free (p->pub.layers);
  llm_backend_unref (p->be);
  g_free (p->key);
  g_free (p);
}

/* The slot for @t in @all (filled with the file's view), or NULL for an
 * absent tensor. */
static const LlmWeight *
view (Prepared *p, const LlmGgufTensor *t, gboolean is_vector, GError **error)
{
  if (t == NULL)
    return NULL;
  LlmWeight *w = &p->pub.all[p->pub.n_all++];
  *w = (LlmWeight) {
    .type = t->type, .n = (guint32) t->ne[0], .rows = is_vector ? 1 : (guint32) t->ne[1],
    .row_bytes = t->size / MAX (t->ne[1], 1), .host = t->data,
  };
  if (!p->be->ops->prepare_weight (p->be, w, is_vector, error)) {
    g_prefix_error (error, "tensor %s: ", t->name);
    w->host = NULL;           /* nothing to release */
    return NULL;
  }
  return w;
}

static Prepared *
prepare (LlmModel *model, LlmBackend *be, const char *key, GError **error)
{
  const guint n_layer = model->hp.n_layer;
  Prepared *p = g_new0 (Prepared, 1);
  p->ref_count = 1;
  p->key = g_strdup (key);
  p->be = llm_backend_ref (be);
  /* 14 tensors per layer at most, and the 3 outside the layers. */
  p->pub.all = g_new0 (LlmWeight, 14 * (gsize) n_layer + 3);
  p->pub.layers = g_new0 (LlmLayerWeights, n_layer);

  GError *err = NULL;
#define PREP(dst, t, vec) \
  G_STMT_START { \
    if ((t) != NULL && err == NULL && ((dst) = view (p, (t), (vec), &err)) == NULL) \
      goto fail; \
  } G_STMT_END
  PREP (p->pub.tok_embd, model->tok_embd, FALSE);
  PREP (p->pub.output_norm, model->output_norm, TRUE);
  if (model->output == model->tok_embd)
    p->pub.output = p->pub.tok_embd;
  else
    PREP (p->pub.output, model->output, FALSE);
  for (guint l = 0; l < n_layer; l++) {
    const LlmLayer *src = &model->layers[l];
    LlmLayerWeights *dst = &p->pub.layers[l];
    PREP (dst->attn_norm, src->attn_norm, TRUE);
    PREP (dst->wq, src->wq, FALSE);
    PREP (dst->wk, src->wk, FALSE);
    PREP (dst->wv, src->wv, FALSE);
    PREP (dst->wo, src->wo, FALSE);
    PREP (dst->bq, src->bq, TRUE);
    PREP (dst->bk, src->bk, TRUE);
    PREP (dst->bv, src->bv, TRUE);
    PREP (dst->q_norm, src->q_norm, TRUE);
    PREP (dst->k_norm, src->k_norm, TRUE);
    PREP (dst->ffn_norm, src->ffn_norm, TRUE);
    PREP (dst->w_gate, src->w_gate, FALSE);
    PREP (dst->w_up, src->w_up, FALSE);
    PREP (dst->w_down, src->w_down, FALSE);
  }
#undef PREP
  return p;

fail:
  g_propagate_prefixed_error (error, err, "%s: preparing weights for %s: ", model->path, key);
  prepared_free (p);
  return NULL;
}

LlmWeights *
llm_weights_get (LlmModel *model, LlmBackend *be, GError **error)
{
  g_return_val_if_fail (model != NULL && be != NULL, NULL);
  const char *key = be->ops->weights_key (be);

  /* Held while preparing, so racing engines prepare once. */
  g_mutex_lock (&model->prepared_lock);
  for (GSList *l = model->prepared; l != NULL; l = l->next) {
    Prepared *p = l->data;
    if (g_str_equal (p->key, key)) {
      p->ref_count++;
      g_mutex_unlock (&model->prepared_lock);
      return &p->pub;
    }
  }
  Prepared *p = prepare (model, be, key, error);
  if (p != NULL)
    model->prepared = g_slist_prepend (model->prepared, p);
  g_mutex_unlock (&model->prepared_lock);
  return p != NULL ? &p->pub : NULL;
}

void
llm_weights_unref (LlmModel *model, LlmWeights *w)
{
  if (w == NULL)
    return;
  Prepared *p = (Prepared *) w;
  g_mutex_lock (&model->prepared_lock);
  const gboolean last = --p->ref_count == 0;
  if (last)
    model->prepared = g_slist_remove (model->prepared, p);
  g_mutex_unlock (&model->prepared_lock);
  if (last)
    prepared_free (p);
}
