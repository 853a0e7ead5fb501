/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The forward pass, one function per stage, in the order a textbook gives
 * it: embed, then per layer (norm, Q/K/V, RoPE, attention, output, residual,
 * norm, SwiGLU feed-forward, residual), then the final norm and the logits.
 *
 * Tokens are processed in chunks; within a chunk every matrix product is a
 * matrix-matrix product (prefill) and rows of the weight matrix are split
 * across the worker threads. A decode step is the same code with one token. */
#include "forward.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (llm-forward-error-quark, llm_forward_error)

/* Tokens per chunk: bounds scratch memory while keeping weight reuse high. */
#define CHUNK 64

struct _LlmContext {
  LlmModel *model;
  LlmKvCache *kv;
  LlmThreadPool *pool;
  guint chunk;

  /* scratch, [chunk x width] */
  float *x, *xb, *q, *k, *v, *att, *gate, *up, *row;
  guint8 *xq;                 /* activations converted for the weights */
  gsize xq_row;               /* bytes per converted row */
  float **att_scratch;        /* per thread */
  gsize att_scratch_floats;
};

/* --- parallel pieces ------------------------------------------------- */

typedef struct {
  guint32 wtype;
  const void *w;
  gsize row_bytes, n, rows;
  const void *xq;
  gsize xq_stride, n_tok;
  float *y;
  gsize ldy;
} MatTask;

static void
matmul_task (void *data, int ith, int nth)
{
  const MatTask *t = data;
  gsize r0, r1;
  llm_split_range (t->rows, ith, nth, &r0, &r1);
  if (r0 >= r1)
    return;
  if (t->n_tok == 1)
    llm_matvec (t->wtype, t->w, t->row_bytes, t->n, r0, r1, t->xq, t->y + r0);
  else
    llm_matmul (t->wtype, t->w, t->row_bytes, t->n, r0, r1, t->xq, t->xq_stride, t->n_tok,
        t->y, t->ldy);
}

/* y[t, :] = W x[t, :] for @n_tok rows of @x (width W->ne[0]); y rows are
 * W->ne[1] wide. */
static void
matmul (LlmContext *ctx, const LlmGgufTensor *w, const float *x, guint n_tok, float *y)
{
  gsize n = w->ne[0];
  gsize xq_bytes = llm_matmul_act_bytes (w->type, n);
  for (guint t = 0; t < n_tok; t++)
    llm_matmul_convert (w->type, x + (gsize) t * n, n, ctx->xq + t * xq_bytes);
  MatTask task = {
    .wtype = w->type, .w = w->data, .row_bytes = w->size / w->ne[1], .n = n,
    .rows = w->ne[1], .xq = ctx->xq, .xq_stride = xq_bytes, .n_tok = n_tok,
    .y = y, .ldy = w->ne[1],
  };
  llm_threadpool_run (ctx->pool, matmul_task, &task);
}

typedef struct {
  LlmContext *ctx;
  guint layer, n_tok, n_head, head_dim;
  guint32 pos0;
  float scale;
} AttTask;

static void
attention_task (void *data, int ith, int nth)
{
  const AttTask *a = data;
  gsize i0, i1;
  llm_split_range ((gsize) a->n_tok * a->n_head, ith, nth, &i0, &i1);
  gsize q_dim = (gsize) a->n_head * a->head_dim;
  for (gsize i = i0; i < i1; i++) {
    guint t = i / a->n_head, h = i % a->n_head;
    /* Causal: token t sees the cache up to and including itself. */
    llm_kv_cache_attend (a->ctx->kv, a->layer, h, a->n_head,
        a->ctx->q + t * q_dim + (gsize) h * a->head_dim, a->pos0 + t + 1, a->scale,
        a->ctx->att + t * q_dim + (gsize) h * a->head_dim, a->ctx->att_scratch[ith]);
  }
}

/* --- small stages ---------------------------------------------------- */

/* Norm weights, biases and embedding rows may be stored in any row type. */
static void
read_row (const LlmGgufTensor *t, gsize r, float *out)
{
  llm_dequantize_row (t->type, t->data, t->size / t->ne[1], t->ne[0], r, out);
}

static void
rmsnorm_rows (LlmContext *ctx, const LlmGgufTensor *w, const float *x, float *out,
    guint n_tok, gsize width, float eps)
{
  read_row (w, 0, ctx->row);
  for (guint t = 0; t < n_tok; t++)
    llm_rmsnorm (out + t * width, x + t * width, ctx->row, width, eps);
}

static void
add_bias (LlmContext *ctx, const LlmGgufTensor *b, float *y, guint n_tok, gsize width)
{
  if (b == NULL)
    return;
  read_row (b, 0, ctx->row);
  for (guint t = 0; t < n_tok; t++)
    llm_add (y + t * width, y + t * width, ctx->row, width);
}

/* qwen3: each head of Q and K is RMS-normalised on its own. */
static void
head_norm (LlmContext *ctx, const LlmGgufTensor *w, float *y, guint n_tok, guint n_heads)
{
  if (w == NULL)
    return;
  const LlmHParams *hp = &ctx->model->hp;
  read_row (w, 0, ctx->row);
  for (gsize i = 0; i < (gsize) n_tok * n_heads; i++)
    llm_rmsnorm (y + i * hp->head_dim, y + i * hp->head_dim, ctx->row, hp->head_dim,
        hp->rms_eps);
}

static void
rope_rows (LlmContext *ctx, float *y, guint n_tok, guint n_heads, guint32 pos0)
{
  const LlmHParams *hp = &ctx->model->hp;
  for (guint t = 0; t < n_tok; t++)
    llm_rope (y + (gsize) t * n_heads * hp->head_dim, n_heads, hp->head_dim, hp->n_rot,
        pos0 + t, hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox);
}

/* --- the pass -------------------------------------------------------- */

static void
attention_block (LlmContext *ctx, guint l, guint n_tok, guint32 pos0)
{
  const LlmHParams *hp = &ctx->model->hp;
  const LlmLayer *ly = &ctx->model->layers[l];
  gsize q_dim = (gsize) hp->n_head * hp->head_dim;
  gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;

  rmsnorm_rows (ctx, ly->attn_norm, ctx->x, ctx->xb, n_tok, hp->n_embd, hp->rms_eps);
  matmul (ctx, ly->wq, ctx->xb, n_tok, ctx->q);
  matmul (ctx, ly->wk, ctx->xb, n_tok, ctx->k);
  matmul (ctx, ly->wv, ctx->xb, n_tok, ctx->v);
  add_bias (ctx, ly->bq, ctx->q, n_tok, q_dim);
  add_bias (ctx, ly->bk, ctx->k, n_tok, kv_dim);
  add_bias (ctx, ly->bv, ctx->v, n_tok, kv_dim);
  head_norm (ctx, ly->q_norm, ctx->q, n_tok, hp->n_head);
  head_norm (ctx, ly->k_norm, ctx->k, n_tok, hp->n_head_kv);
  rope_rows (ctx, ctx->q, n_tok, hp->n_head, pos0);
  rope_rows (ctx, ctx->k, n_tok, hp->n_head_kv, pos0);

  for (guint t = 0; t < n_tok; t++)
    llm_kv_cache_write (ctx->kv, l, pos0 + t, ctx->k + t * kv_dim, ctx->v + t * kv_dim);

  AttTask a = { ctx, l, n_tok, hp->n_head, hp->head_dim, pos0,
    1.0f / sqrtf ((float) hp->head_dim) };
  llm_threadpool_run (ctx->pool, attention_task, &a);

  /* x += Wo att */
  matmul (ctx, ly->wo, ctx->att, n_tok, ctx->xb);
  for (guint t = 0; t < n_tok; t++)
    llm_add (ctx->x + t * hp->n_embd, ctx->x + t * hp->n_embd, ctx->xb + t * hp->n_embd,
        hp->n_embd);
}

static void
ffn_block (LlmContext *ctx, guint l, guint n_tok)
{
  const LlmHParams *hp = &ctx->model->hp;
  const LlmLayer *ly = &ctx->model->layers[l];

  rmsnorm_rows (ctx, ly->ffn_norm, ctx->x, ctx->xb, n_tok, hp->n_embd, hp->rms_eps);
  matmul (ctx, ly->w_gate, ctx->xb, n_tok, ctx->gate);
  matmul (ctx, ly->w_up, ctx->xb, n_tok, ctx->up);
  for (guint t = 0; t < n_tok; t++)
    llm_swiglu (ctx->gate + (gsize) t * hp->n_ff, ctx->gate + (gsize) t * hp->n_ff,
        ctx->up + (gsize) t * hp->n_ff, hp->n_ff);
  matmul (ctx, ly->w_down, ctx->gate, n_tok, ctx->xb);
  for (guint t = 0; t < n_tok; t++)
    llm_add (ctx->x + t * hp->n_embd, ctx->x + t * hp->n_embd, ctx->xb + t * hp->n_embd,
        hp->n_embd);
}

static gboolean
eval_chunk (LlmContext *ctx, const gint32 *tokens, guint n_tok, float *logits,
    gboolean all_logits, GError **error)
{
  const LlmModel *m = ctx->model;
  const LlmHParams *hp = &m->hp;

  for (guint t = 0; t < n_tok; t++) {
    if (tokens[t] < 0 || (guint32) tokens[t] >= hp->n_vocab) {
      g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_TOKEN,
          "token id %d is outside the model's vocabulary of %u", tokens[t], hp->n_vocab);
      return FALSE;
    }
  }
  if (!llm_kv_cache_reserve (ctx->kv, n_tok, error))
    return FALSE;
  guint32 pos0 = llm_kv_cache_n (ctx->kv);

  gsize need = llm_kv_cache_scratch_floats (ctx->kv, pos0 + n_tok);
  if (need > ctx->att_scratch_floats) {
    for (int i = 0; i < llm_threadpool_n_threads (ctx->pool); i++) {
      g_free (ctx->att_scratch[i]);
      ctx->att_scratch[i] = g_try_new (float, need);
      if (ctx->att_scratch[i] == NULL) {
        ctx->att_scratch_floats = 0;
        g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
            "out of memory for attention scratch (%" G_GSIZE_FORMAT " floats)", need);
        return FALSE;
      }
    }
    ctx->att_scratch_floats = need;
  }

  for (guint t = 0; t < n_tok; t++)
    read_row (m->tok_embd, tokens[t], ctx->x + (gsize) t * hp->n_embd);

  for (guint l = 0; l < hp->n_layer; l++) {
    attention_block (ctx, l, n_tok, pos0);
    ffn_block (ctx, l, n_tok);
  }
  llm_kv_cache_commit (ctx->kv, n_tok);

  if (logits == NULL)
    return TRUE;
  guint first = all_logits ? 0 : n_tok - 1;
  guint n_out = n_tok - first;
  rmsnorm_rows (ctx, m->output_norm, ctx->x + (gsize) first * hp->n_embd, ctx->xb, n_out,
      hp->n_embd, hp->rms_eps);
  matmul (ctx, m->output, ctx->xb, n_out, logits);
  return TRUE;
}

gboolean
llm_context_eval (LlmContext *ctx, const gint32 *tokens, guint n, float *logits,
    gboolean all_logits, GError **error)
{
  guint n_vocab = ctx->model->hp.n_vocab;
  for (guint done = 0; done < n; ) {
    guint c = MIN (ctx->chunk, n - done);
    gboolean last = done + c == n;
    float *out = NULL;
    if (all_logits && logits)
      out = logits + (gsize) done * n_vocab;
    else if (last)
      out = logits;
    if (!eval_chunk (ctx, tokens + done, c, out, all_logits, error))
      return FALSE;
    done += c;
  }
  return TRUE;
}

LlmContext *
llm_context_new (LlmModel *model, const LlmKvConfig *kvc, int n_threads, GError **error)
{
  const LlmHParams *hp = &model->hp;
  LlmKvRope rope = { hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox };
  LlmKvCache *kv = llm_kv_cache_new (hp->n_layer, hp->n_head_kv, hp->head_dim, kvc, &rope,
      error);
  if (kv == NULL)
    return NULL;
  LlmThreadPool *pool = llm_threadpool_new (n_threads);
  if (pool == NULL) {
    llm_kv_cache_free (kv);
    g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
        "cannot start %d worker threads", n_threads);
    return NULL;
  }

  LlmContext *ctx = g_new0 (LlmContext, 1);
  ctx->model = llm_model_ref (model);
  ctx->kv = kv;
  ctx->pool = pool;
  ctx->chunk = MIN (CHUNK, llm_kv_cache_capacity (kv));

  gsize c = ctx->chunk;
  gsize q_dim = (gsize) hp->n_head * hp->head_dim;
  gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;
  gsize widest = MAX (MAX (hp->n_embd, hp->n_ff), q_dim);
  gsize max_row = MAX (widest, hp->head_dim);
  ctx->x = g_try_new (float, c * hp->n_embd);
  ctx->xb = g_try_new (float, c * hp->n_embd);
  ctx->q = g_try_new (float, c * q_dim);
  ctx->k = g_try_new (float, c * kv_dim);
  ctx->v = g_try_new (float, c * kv_dim);
  ctx->att = g_try_new (float, c * q_dim);
  ctx->gate = g_try_new (float, c * hp->n_ff);
  ctx->up = g_try_new (float, c * hp->n_ff);
  ctx->row = g_try_new (float, max_row);
  /* The widest converted row over every weight type in use; F32 is the
   * largest per element, so size for that. */
  ctx->xq_row = widest * sizeof (float) + 64;
  ctx->xq = g_try_malloc (c * ctx->xq_row);
  ctx->att_scratch = g_new0 (float *, llm_threadpool_n_threads (pool));
  if (!ctx->x || !ctx->xb || !ctx->q || !ctx->k || !ctx->v || !ctx->att || !ctx->gate ||
      !ctx->up || !ctx->row || !ctx->xq) {
    g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
        "out of memory for the forward pass scratch buffers");
    llm_context_free (ctx);
    return NULL;
  }
  return ctx;
}

void
llm_context_free (LlmContext *ctx)
{
  if (ctx == NULL)
    return;
  if (ctx->att_scratch)
    for (int i = 0; i < llm_threadpool_n_threads (ctx->pool); i++)
      g_free (ctx->att_scratch[i]);
  g_free (ctx->att_scratch);
  llm_threadpool_free (ctx->pool);
  llm_kv_cache_free (ctx->kv);
  llm_model_unref (ctx->model);
  g_free (ctx->x);
  g_free (ctx->xb);
  g_free (ctx->q);
  g_free (ctx->k);
  g_free (ctx->v);
  g_free (ctx->att);
  g_free (ctx->gate);
  g_free (ctx->up);
  g_free (ctx->row);
  g_free (ctx->xq);
  g_free (ctx);
}

LlmModel *
llm_context_model (const LlmContext *ctx)
{
  return ctx->model;
}

LlmKvCache *
llm_context_kv (LlmContext *ctx)
{
  return ctx->kv;
}

int
llm_context_n_threads (const LlmContext *ctx)
{
  return llm_threadpool_n_threads (ctx->pool);
}
