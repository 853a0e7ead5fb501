/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The forward pass, one function per stage, in the order a textbook gives
 * it: embed, then per layer (norm, Q/K/V, RoPE, attention, output, residual,
 * norm, SwiGLU feed-forward, residual), then the final norm and the logits.
 *
 * Every stage is one call into the backend's table (backend.h), over all
 * rows of the chunk: a prompt, or the decode steps of many streams (one
 * read of the weights serves them all). Attention runs per piece (the rows
 * of one sequence), each over its own cache. A decode step of one stream
 * is the same code with one row. */
#include "forward.h"
#include "model-private.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (llm-forward-error-quark, llm_forward_error)

#define CHUNK LLM_FORWARD_CHUNK

struct _LlmForward {
  LlmModel *model;
  LlmBackend *be;
  const LlmBackendOps *ops;
  const LlmWeights *w;
  LlmBackendQueue *q;         /* the caller's, for one chunk */
  LlmAttnShape shape;
  LlmRopeParams rope;
  gsize widest;               /* floats of the widest activation row */

  /* this chunk's rows and pieces */
  const LlmFwdRow *rows;
  const LlmFwdPiece *pieces;
  guint n_pieces;
  guint32 pos[CHUNK];
  gint32 ids[CHUNK];

  /* backend buffers, [chunk x width] */
  float *x, *xb, *qry, *k, *v, *att, *gate, *up;
  float *logits;              /* rows of logits, grown as rows want them */
  guint logits_rows;
  float *zeros;               /* host, [chunk x KV row]: a skipped layer's cache rows */
  guint32 reserved_kv;        /* attention scratch covers this many positions */
};

/* --- the layers ------------------------------------------------------ */

static void
attention_block (LlmForward *f, guint l, guint n)
{
  const LlmHParams *hp = &f->model->hp;
  const LlmLayerWeights *ly = &f->w->layers[l];
  const LlmBackendOps *ops = f->ops;

  ops->rmsnorm (f->be, f->q, f->x, ly->attn_norm, f->xb, n, hp->n_embd, hp->rms_eps);
  const LlmWeight *qkv[] = { ly->wq, ly->wk, ly->wv };
  float *const out[] = { f->qry, f->k, f->v };
  ops->matmul (f->be, f->q, f->xb, n, qkv, out, 3);
  if (ly->bq != NULL) {
    ops->add_bias (f->be, f->q, f->qry, ly->bq, n);
    ops->add_bias (f->be, f->q, f->k, ly->bk, n);
    ops->add_bias (f->be, f->q, f->v, ly->bv, n);
  }
  /* qwen3: each head of Q and K is RMS-normalised on its own. */
  if (ly->q_norm != NULL) {
    ops->rmsnorm (f->be, f->q, f->qry, ly->q_norm, f->qry, n * hp->n_head, hp->head_dim,
        hp->rms_eps);
    ops->rmsnorm (f->be, f->q, f->k, ly->k_norm, f->k, n * hp->n_head_kv, hp->head_dim,
        hp->rms_eps);
  }
  ops->rope (f->be, f->q, f->qry, n, hp->n_head, hp->head_dim, f->pos, &f->rope);
  ops->rope (f->be, f->q, f->k, n, hp->n_head_kv, hp->head_dim, f->pos, &f->rope);
  ops->kv_store (f->be, f->q, l, f->pieces, f->n_pieces, f->k, f->v,
      (gsize) hp->n_head_kv * hp->head_dim);
  ops->attention (f->be, f->q, l, f->pieces, f->n_pieces, &f->shape, f->qry, f->att);

  /* x += Wo att */
  ops->matmul (f->be, f->q, f->att, n, &ly->wo, &f->xb, 1);
  ops->add (f->be, f->q, f->x, f->xb, n, hp->n_embd);
}

static void
ffn_block (LlmForward *f, guint l, guint n)
{
  const LlmHParams *hp = &f->model->hp;
  const LlmLayerWeights *ly = &f->w->layers[l];
  const LlmBackendOps *ops = f->ops;

  ops->rmsnorm (f->be, f->q, f->x, ly->ffn_norm, f->xb, n, hp->n_embd, hp->rms_eps);
  const LlmWeight *gate_up[] = { ly->w_gate, ly->w_up };
  float *const out[] = { f->gate, f->up };
  ops->matmul (f->be, f->q, f->xb, n, gate_up, out, 2);
  ops->swiglu (f->be, f->q, f->gate, f->up, n, hp->n_ff);
  ops->matmul (f->be, f->q, f->gate, n, &ly->w_down, &f->xb, 1);
  ops->add (f->be, f->q, f->x, f->xb, n, hp->n_embd);
}

/* A layer that layer skipping's draft leaves out still gives the
 * chunk's positions their cache rows, zeros: a window's shift re-rotates
 * every row it keeps, and rows no forward had written were read
 * uninitialised (valgrind, test_verify_is_lossless_when_a_window_evicts,
 * once forks copied only the rows in use). Nothing attends to them: a
 * draft's fork skips the same layers to its end. */
static void
skipped_block (LlmForward *f, guint l, guint n)
{
  const LlmHParams *hp = &f->model->hp;
  const gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;
  if (f->zeros == NULL)
    f->zeros = g_new0 (float, CHUNK * kv_dim);
  /* One zero buffer serves as keys and values: kv_store only reads them. */
  f->ops->upload (f->be, f->q, f->k, f->zeros, n * kv_dim * sizeof (float));
  f->ops->kv_store (f->be, f->q, l, f->pieces, f->n_pieces, f->k, f->k, kv_dim);
}

/* --- in and out ------------------------------------------------------ */

/* Token rows are embedded a run at a time; embedding rows are copied in. */
static void
embed_rows (LlmForward *f, guint n)
{
  const gsize n_embd = f->model->hp.n_embd;
  guint t = 0;
  while (t < n) {
    if (f->rows[t].embd != NULL) {
      f->ops->upload (f->be, f->q, f->x + t * n_embd, f->rows[t].embd, n_embd * sizeof (float));
      t++;
      continue;
    }
    guint run = 0;
    while (t + run < n && f->rows[t + run].embd == NULL) {
      f->ids[run] = f->rows[t + run].token;
      run++;
    }
    f->ops->embed (f->be, f->q, f->w->tok_embd, f->ids, run, f->x + t * n_embd);
    t += run;
  }
}

/* Grows by doubling (up to a chunk), so a rising number of streams
 * reallocates a few times, not at every new count. */
static gboolean
ensure_logits (LlmForward *f, guint n_out, GError **error)
{
  if (n_out <= f->logits_rows)
    return TRUE;
  n_out = MAX (n_out, MIN (CHUNK, 2 * f->logits_rows));
  f->ops->free (f->be, f->logits);
  f->logits_rows = 0;
  f->logits = f->ops->alloc (f->be, (gsize) n_out * f->model->hp.n_vocab * sizeof (float),
      error);
  if (f->logits == NULL)
    return FALSE;
  f->logits_rows = n_out;
  return TRUE;
}

/* The final norm and output product for the rows that want logits only,
 * gathered in front of x first. */
static gboolean
output_logits (LlmForward *f, guint n, GError **error)
{
  const LlmHParams *hp = &f->model->hp;
  const gsize row = hp->n_embd * sizeof (float);
  const gsize vocab_bytes = (gsize) hp->n_vocab * sizeof (float);
  guint n_out = 0;

  for (guint t = 0; t < n; t++) {
    if (f->rows[t].logits == NULL)
      continue;
    if (n_out != t)
      f->ops->copy (f->be, f->q, f->x + (gsize) n_out * hp->n_embd,
          f->x + (gsize) t * hp->n_embd, row);
    n_out++;
  }
  if (n_out == 0)
    return TRUE;
  if (!ensure_logits (f, n_out, error))
    return FALSE;

  f->ops->rmsnorm (f->be, f->q, f->x, f->w->output_norm, f->xb, n_out, hp->n_embd,
      hp->rms_eps);
  f->ops->matmul (f->be, f->q, f->xb, n_out, &f->w->output, &f->logits, 1);
  guint i = 0;
  for (guint t = 0; t < n; t++)
    if (f->rows[t].logits != NULL)
      f->ops->download (f->be, f->q, f->rows[t].logits,
          f->logits + (gsize) i++ * hp->n_vocab, vocab_bytes);
  f->ops->sync (f->be, f->q);
  return TRUE;
}

/* Attention scratch covers the longest piece's context; it grows in
 * steps so a growing conversation does not reallocate every row. */
static gboolean
reserve_attention (LlmForward *f, GError **error)
{
  guint32 n_kv = 0;
  const LlmFwdPiece *widest = &f->pieces[0];
  for (guint p = 0; p < f->n_pieces; p++) {
    if (f->pieces[p].slot0 + f->pieces[p].n > n_kv) {
      n_kv = f->pieces[p].slot0 + f->pieces[p].n;
      widest = &f->pieces[p];
    }
  }
  if (n_kv <= f->reserved_kv)
    return TRUE;
  if (!f->ops->reserve (f->be, CHUNK, f->widest, n_kv, widest->kv, error))
    return FALSE;
  f->reserved_kv = n_kv;
  return TRUE;
}

gboolean
llm_forward_chunk (LlmForward *f, LlmBackendQueue *queue, const LlmFwdRow *rows, guint n,
    const LlmFwdPiece *pieces, guint n_pieces, const guint8 *skip, GError **error)
{
  g_return_val_if_fail (n > 0 && n <= CHUNK && n_pieces > 0, FALSE);
  f->q = queue;
  f->rows = rows;
  f->pieces = pieces;
  f->n_pieces = n_pieces;
  if (!reserve_attention (f, error))
    return FALSE;
  for (guint t = 0; t < n; t++)
    f->pos[t] = rows[t].pos;

  embed_rows (f, n);
  for (guint l = 0; l < f->model->hp.n_layer; l++) {
    if (skip != NULL && skip[l]) {
      skipped_block (f, l, n);
      continue;
    }
    attention_block (f, l, n);
    ffn_block (f, l, n);
  }
  return output_logits (f, n, error);
}

LlmForward *
llm_forward_new (LlmModel *model, LlmBackend *be, const LlmWeights *weights, GError **error)
{
  const LlmHParams *hp = &model->hp;
  LlmForward *f = g_new0 (LlmForward, 1);
  f->model = model;
  f->be = be;
  f->ops = be->ops;
  f->w = weights;
  f->shape = (LlmAttnShape) {
    hp->n_head, hp->n_head_kv, hp->head_dim, 1.0f / sqrtf ((float) hp->head_dim),
  };
  f->rope = (LlmRopeParams) {
    hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox,
  };

  const gsize c = CHUNK * sizeof (float);
  const gsize q_dim = (gsize) hp->n_head * hp->head_dim;
  const gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;
  f->widest = MAX (MAX (hp->n_embd, hp->n_ff), q_dim);
  struct {
    float **buf;
    gsize width;
  } bufs[] = {
    { &f->x, hp->n_embd }, { &f->xb, hp->n_embd }, { &f->qry, q_dim }, { &f->k, kv_dim },
    { &f->v, kv_dim }, { &f->att, q_dim }, { &f->gate, hp->n_ff }, { &f->up, hp->n_ff },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bufs); i++) {
    *bufs[i].buf = f->ops->alloc (be, c * bufs[i].width, error);
    if (*bufs[i].buf == NULL) {
      llm_forward_free (f);
      return NULL;
    }
  }
  if (!f->ops->reserve (be, CHUNK, f->widest, 0, NULL, error)) {
    llm_forward_free (f);
    return NULL;
  }
  return f;
}

void
llm_forward_free (LlmForward *f)
{
  if (f == NULL)
    return;
  float *bufs[] = { f->x, f->xb, f->qry, f->k, f->v, f->att, f->gate, f->up, f->logits };
  for (gsize i = 0; i < G_N_ELEMENTS (bufs); i++)
    if (bufs[i] != NULL)
      f->ops->free (f->be, bufs[i]);
  g_free (f->zeros);
  g_free (f);
}
