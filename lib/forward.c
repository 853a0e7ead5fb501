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
#include <stdatomic.h>
#include <string.h>

G_DEFINE_QUARK (llm-forward-error-quark, llm_forward_error)

/* Tokens per chunk: bounds scratch memory while keeping weight reuse high. */
#define CHUNK 128

struct _LlmContext {
  LlmModel *model;
  LlmKvCache *kv;
  LlmThreadPool *pool;
  guint chunk;

  /* scratch, [chunk x width] */
  float *x, *xb, *q, *k, *v, *att, *gate, *up, *row;
  guint8 *xq;                 /* activations converted for the weights */
  gsize xq_row;               /* bytes per converted row */
  const float *xq_src;        /* what xq holds: these rows, converted to */
  guint32 xq_dot_type;        /* this type, this wide, this many */
  gsize xq_n;
  guint xq_n_tok;
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
  /* Batches: rows are handed out @rows_per_item at a time from @next. */
  gsize rows_per_item;
  atomic_size_t next;
} MatTask;

static void
matmul_task (void *data, int ith, int nth)
{
  MatTask *t = data;
  if (t->n_tok == 1) {
    gsize r0, r1;
    llm_split_range (t->rows, ith, nth, &r0, &r1);
    if (r0 < r1)
      llm_matvec (t->wtype, t->w, t->row_bytes, t->n, r0, r1, t->xq, t->y + r0);
    return;
  }
  /* A batch is compute-bound: a thread that finishes early, or was
   * descheduled on a busy machine, leaves its remaining rows to the
   * others instead of holding the whole product up. */
  llm_matmul_shared (t->wtype, t->w, t->row_bytes, t->n, 0, t->rows, t->xq, t->xq_stride,
      t->n_tok, t->y, t->ldy, &t->next, t->rows_per_item);
}

typedef struct {
  guint32 wtype;
  const float *x;
  gsize n, n_tok, xq_bytes;
  guint8 *xq;
} ConvertTask;

static void
convert_task (void *data, int ith, int nth)
{
  const ConvertTask *c = data;
  gsize t0, t1;
  llm_split_range (c->n_tok, ith, nth, &t0, &t1);
  for (gsize t = t0; t < t1; t++)
    llm_matmul_convert (c->wtype, c->x + t * c->n, c->n, c->xq + t * c->xq_bytes);
}

/* Converts @n_tok rows of @x (@n wide) for @wtype weights into ctx->xq,
 * on every thread for a batch, and remembers what is there. */
static void
convert_rows (LlmContext *ctx, guint32 wtype, const float *x, gsize n, guint n_tok)
{
  ConvertTask c = { wtype, x, n, n_tok, llm_matmul_act_bytes (wtype, n), ctx->xq };
  if (n_tok < 4)
    convert_task (&c, 0, 1);
  else
    llm_threadpool_run (ctx->pool, convert_task, &c);
  ctx->xq_src = x;
  ctx->xq_dot_type = llm_matmul_dot_type (wtype);
  ctx->xq_n = n;
  ctx->xq_n_tok = n_tok;
}

/* Multiplies ctx->xq (converted for @w) into @y. */
static void
matmul_converted (LlmContext *ctx, const LlmGgufTensor *w, guint n_tok, float *y)
{
  gsize n = w->ne[0];
  MatTask task = {
    .wtype = w->type, .w = w->data, .row_bytes = w->size / w->ne[1], .n = n,
    .rows = w->ne[1], .xq = ctx->xq, .xq_stride = llm_matmul_act_bytes (w->type, n),
    .n_tok = n_tok, .y = y, .ldy = w->ne[1],
  };
  /* About eight items per thread, whole multiples of 16 rows (the largest
   * row tile, Q4_0's). */
  const gsize items = 8 * (gsize) llm_threadpool_n_threads (ctx->pool);
  task.rows_per_item = MAX ((gsize) 16, (task.rows + items - 1) / items + 15) / 16 * 16;
  atomic_init (&task.next, 0);
  llm_threadpool_run (ctx->pool, matmul_task, &task);
}

/* y[t, :] = W x[t, :] for @n_tok rows of @x (width W->ne[0]); y rows are
 * W->ne[1] wide. */
static void
matmul (LlmContext *ctx, const LlmGgufTensor *w, const float *x, guint n_tok, float *y)
{
  convert_rows (ctx, w->type, x, w->ne[0], n_tok);
  matmul_converted (ctx, w, n_tok, y);
}

/* As matmul() with the input of the previous matmul() call, unchanged
 * since: its conversion is reused when @w takes the same one. */
static void
matmul_same_input (LlmContext *ctx, const LlmGgufTensor *w, guint n_tok, float *y)
{
  if (llm_matmul_dot_type (w->type) != ctx->xq_dot_type || w->ne[0] != ctx->xq_n ||
      n_tok != ctx->xq_n_tok)
    convert_rows (ctx, w->type, ctx->xq_src, w->ne[0], n_tok);
  matmul_converted (ctx, w, n_tok, y);
}

/* Attention work items: up to ATT_QUERIES queries that read the same KV
 * head, so the kernel converts each cache row once for all of them: the
 * query heads of a GQA group at one token, or (few heads per group) those
 * heads at several consecutive tokens. Items are handed out from a shared
 * counter, so a thread that finishes early, or was descheduled, evens the
 * load out: one KV head after another (the threads then share its rows in
 * cache), and within a head the longest causal rows first. */
#define ATT_QUERIES 8

typedef struct {
  LlmContext *ctx;
  guint layer, n_tok, n_head, n_head_kv, head_dim;
  guint32 pos0;
  float scale;
  guint group;            /* query heads per KV head */
  guint heads_per_item;   /* of one group */
  guint subs;             /* items per group and token block */
  guint toks_per_item;
  guint n_tok_blocks;
  guint n_items;
  atomic_uint next;
} AttTask;

static void
attention_task (void *data, int ith, int nth)
{
  AttTask *a = data;
  (void) nth;
  const gsize q_dim = (gsize) a->n_head * a->head_dim;
  float *scratch = a->ctx->att_scratch[ith];

  for (;;) {
    const guint i = atomic_fetch_add_explicit (&a->next, 1, memory_order_relaxed);
    if (i >= a->n_items)
      break;
    const guint kvh = i / (a->n_tok_blocks * a->subs);
    const guint tb = a->n_tok_blocks - 1 - i / a->subs % a->n_tok_blocks;
    const guint sub = i % a->subs;
    const guint t0 = tb * a->toks_per_item;
    const guint t1 = MIN (t0 + a->toks_per_item, a->n_tok);
    const guint h0 = kvh * a->group + sub * a->heads_per_item;
    const guint h1 = MIN (h0 + a->heads_per_item, (kvh + 1) * a->group);

    LlmAttnQuery queries[ATT_QUERIES];
    guint n_q = 0;
    for (guint t = t0; t < t1; t++) {
      for (guint h = h0; h < h1; h++) {
        const gsize at = t * q_dim + (gsize) h * a->head_dim;
        /* Causal: token t sees the cache up to and including itself. */
        queries[n_q++] = (LlmAttnQuery) { a->ctx->q + at, a->ctx->att + at, a->pos0 + t + 1 };
      }
    }
    llm_kv_cache_attend_batch (a->ctx->kv, a->layer, kvh, queries, n_q, a->scale, scratch);
  }
}

static void
attention_run (LlmContext *ctx, guint l, guint n_tok, guint32 pos0)
{
  const LlmHParams *hp = &ctx->model->hp;
  AttTask a = {
    .ctx = ctx, .layer = l, .n_tok = n_tok, .n_head = hp->n_head,
    .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim, .pos0 = pos0,
    .scale = 1.0f / sqrtf ((float) hp->head_dim),
    .group = hp->n_head / hp->n_head_kv,
  };
  a.heads_per_item = MIN (a.group, ATT_QUERIES);
  a.subs = (a.group + a.heads_per_item - 1) / a.heads_per_item;
  a.toks_per_item = MAX (1u, ATT_QUERIES / a.group);
  a.n_tok_blocks = (n_tok + a.toks_per_item - 1) / a.toks_per_item;
  a.n_items = a.n_tok_blocks * a.n_head_kv * a.subs;
  atomic_init (&a.next, 0);
  llm_threadpool_run (ctx->pool, attention_task, &a);
}

/* --- small stages ---------------------------------------------------- */

/* Norm weights, biases and embedding rows may be stored in any row type. */
static void
read_row (const LlmGgufTensor *t, gsize r, float *out)
{
  llm_dequantize_row (t->type, t->data, t->size / t->ne[1], t->ne[0], r, out);
}

/* The per-token stages below (norms, RoPE and the cache write, SwiGLU,
 * residual adds) are independent across tokens, so a batch splits its
 * tokens over the threads; below PER_TOKEN_MIN tokens (a decode step) they
 * run inline, where a pool run would cost more than the work. */
#define PER_TOKEN_MIN 4

typedef void (*TokenFn) (LlmContext *ctx, const void *args, guint t0, guint t1);

typedef struct {
  LlmContext *ctx;
  TokenFn fn;
  const void *args;
  guint n_tok;
} TokenTask;

static void
token_task (void *data, int ith, int nth)
{
  const TokenTask *t = data;
  gsize t0, t1;
  llm_split_range (t->n_tok, ith, nth, &t0, &t1);
  if (t0 < t1)
    t->fn (t->ctx, t->args, t0, t1);
}

static void
per_token (LlmContext *ctx, guint n_tok, TokenFn fn, const void *args)
{
  if (n_tok < PER_TOKEN_MIN) {
    fn (ctx, args, 0, n_tok);
    return;
  }
  TokenTask task = { ctx, fn, args, n_tok };
  llm_threadpool_run (ctx->pool, token_task, &task);
}

typedef struct {
  const float *x, *w;
  float *out;
  gsize width;
  float eps;
} NormArgs;

static void
rmsnorm_tokens (LlmContext *ctx, const void *args, guint t0, guint t1)
{
  const NormArgs *a = args;
  (void) ctx;
  for (guint t = t0; t < t1; t++)
    llm_rmsnorm (a->out + t * a->width, a->x + t * a->width, a->w, a->width, a->eps);
}

static void
rmsnorm_rows (LlmContext *ctx, const LlmGgufTensor *w, const float *x, float *out,
    guint n_tok, gsize width, float eps)
{
  read_row (w, 0, ctx->row);
  const NormArgs a = { x, ctx->row, out, width, eps };
  per_token (ctx, n_tok, rmsnorm_tokens, &a);
}

/* x += xb, the residual connection. */
static void
residual_tokens (LlmContext *ctx, const void *args, guint t0, guint t1)
{
  const gsize n = ctx->model->hp.n_embd;
  (void) args;
  for (guint t = t0; t < t1; t++)
    llm_add (ctx->x + t * n, ctx->x + t * n, ctx->xb + t * n, n);
}

/* gate = silu(gate) * up */
static void
swiglu_tokens (LlmContext *ctx, const void *args, guint t0, guint t1)
{
  const gsize n = ctx->model->hp.n_ff;
  (void) args;
  for (guint t = t0; t < t1; t++)
    llm_swiglu (ctx->gate + t * n, ctx->gate + t * n, ctx->up + t * n, n);
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

typedef struct {
  guint layer;
  guint32 pos0;
} RopeArgs;

/* RoPE on each token's query and key heads, then its key and value rows
 * into the cache (rows of different positions: no locking needed). */
static void
rope_store_tokens (LlmContext *ctx, const void *args, guint t0, guint t1)
{
  const RopeArgs *a = args;
  const LlmHParams *hp = &ctx->model->hp;
  const gsize q_dim = (gsize) hp->n_head * hp->head_dim;
  const gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;
  for (guint t = t0; t < t1; t++) {
    llm_rope (ctx->q + t * q_dim, hp->n_head, hp->head_dim, hp->n_rot, a->pos0 + t,
        hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox);
    llm_rope (ctx->k + t * kv_dim, hp->n_head_kv, hp->head_dim, hp->n_rot, a->pos0 + t,
        hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox);
    llm_kv_cache_write (ctx->kv, a->layer, a->pos0 + t, ctx->k + t * kv_dim,
        ctx->v + t * kv_dim);
  }
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
  matmul_same_input (ctx, ly->wk, n_tok, ctx->k);
  matmul_same_input (ctx, ly->wv, n_tok, ctx->v);
  add_bias (ctx, ly->bq, ctx->q, n_tok, q_dim);
  add_bias (ctx, ly->bk, ctx->k, n_tok, kv_dim);
  add_bias (ctx, ly->bv, ctx->v, n_tok, kv_dim);
  head_norm (ctx, ly->q_norm, ctx->q, n_tok, hp->n_head);
  head_norm (ctx, ly->k_norm, ctx->k, n_tok, hp->n_head_kv);
  const RopeArgs rope = { l, pos0 };
  per_token (ctx, n_tok, rope_store_tokens, &rope);

  attention_run (ctx, l, n_tok, pos0);

  /* x += Wo att */
  matmul (ctx, ly->wo, ctx->att, n_tok, ctx->xb);
  per_token (ctx, n_tok, residual_tokens, NULL);
}

static void
ffn_block (LlmContext *ctx, guint l, guint n_tok)
{
  const LlmHParams *hp = &ctx->model->hp;
  const LlmLayer *ly = &ctx->model->layers[l];

  rmsnorm_rows (ctx, ly->ffn_norm, ctx->x, ctx->xb, n_tok, hp->n_embd, hp->rms_eps);
  matmul (ctx, ly->w_gate, ctx->xb, n_tok, ctx->gate);
  matmul_same_input (ctx, ly->w_up, n_tok, ctx->up);
  per_token (ctx, n_tok, swiglu_tokens, NULL);
  matmul (ctx, ly->w_down, ctx->gate, n_tok, ctx->xb);
  per_token (ctx, n_tok, residual_tokens, NULL);
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

  gsize need = llm_kv_cache_batch_scratch_floats (ctx->kv, pos0 + n_tok, ATT_QUERIES);
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
