/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The forward pass, one function per stage, in the order a textbook gives
 * it: embed, then per layer (norm, Q/K/V, RoPE, attention, output, residual,
 * norm, SwiGLU feed-forward, residual), then the final norm and the logits.
 *
 * Rows are processed in chunks; within a chunk every matrix product is a
 * matrix-matrix product over all rows (a prompt, or the decode steps of
 * many streams: one read of the weights serves them all) and rows of the
 * weight matrix are split across the worker threads. Attention runs per
 * piece (the rows of one sequence), each over its own cache. A decode
 * step of one stream is the same code with one row. */
#include "forward.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

G_DEFINE_QUARK (llm-forward-error-quark, llm_forward_error)

#define CHUNK LLM_FORWARD_CHUNK

typedef struct _LlmForward LlmContext;

struct _LlmForward {
  LlmModel *model;
  LlmThreadPool *pool;        /* the caller's, for one chunk */
  int n_threads;
  guint chunk;

  /* this chunk's rows and pieces */
  const LlmFwdRow *rows;
  const LlmFwdPiece *pieces;
  guint n_pieces;

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
  float *logits;              /* rows of logits that go to scattered places */
  guint logits_rows;
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
  guint n_tok_blocks;
  guint first_item;
} AttPiece;

typedef struct {
  LlmContext *ctx;
  guint layer, n_head, n_head_kv, head_dim;
  float scale;
  guint group;            /* query heads per KV head */
  guint heads_per_item;   /* of one group */
  guint subs;             /* items per group and token block */
  guint toks_per_item;
  AttPiece *pieces;
  guint n_items;
  atomic_uint next;
} AttTask;

/* The piece item @i belongs to: the last whose first item is <= i. */
static guint
att_piece_of (const AttTask *a, guint i)
{
  guint lo = 0, hi = a->ctx->n_pieces;
  while (hi - lo > 1) {
    const guint mid = (lo + hi) / 2;
    if (a->pieces[mid].first_item <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static void
attention_task (void *data, int ith, int nth)
{
  AttTask *a = data;
  (void) nth;
  const gsize q_dim = (gsize) a->n_head * a->head_dim;
  float *scratch = a->ctx->att_scratch[ith];

  for (;;) {
    const guint item = atomic_fetch_add_explicit (&a->next, 1, memory_order_relaxed);
    if (item >= a->n_items)
      break;
    const guint pi = att_piece_of (a, item);
    const LlmFwdPiece *piece = &a->ctx->pieces[pi];
    const guint n_tok_blocks = a->pieces[pi].n_tok_blocks;
    const guint i = item - a->pieces[pi].first_item;
    const guint kvh = i / (n_tok_blocks * a->subs);
    const guint tb = n_tok_blocks - 1 - i / a->subs % n_tok_blocks;
    const guint sub = i % a->subs;
    const guint t0 = tb * a->toks_per_item;
    const guint t1 = MIN (t0 + a->toks_per_item, piece->n);
    const guint h0 = kvh * a->group + sub * a->heads_per_item;
    const guint h1 = MIN (h0 + a->heads_per_item, (kvh + 1) * a->group);

    LlmAttnQuery queries[ATT_QUERIES];
    guint n_q = 0;
    for (guint t = t0; t < t1; t++) {
      for (guint h = h0; h < h1; h++) {
        const gsize at = (piece->row0 + t) * q_dim + (gsize) h * a->head_dim;
        /* Causal: row t sees its sequence's cache up to and including itself. */
        queries[n_q++] = (LlmAttnQuery) { a->ctx->q + at, a->ctx->att + at,
          piece->slot0 + t + 1 };
      }
    }
    llm_kv_cache_attend_batch (piece->kv, a->layer, kvh, queries, n_q, a->scale, scratch);
  }
}

static void
attention_run (LlmContext *ctx, guint l)
{
  const LlmHParams *hp = &ctx->model->hp;
  AttPiece pieces[CHUNK];
  AttTask a = {
    .ctx = ctx, .layer = l, .n_head = hp->n_head,
    .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
    .scale = 1.0f / sqrtf ((float) hp->head_dim),
    .group = hp->n_head / hp->n_head_kv, .pieces = pieces,
  };
  a.heads_per_item = MIN (a.group, ATT_QUERIES);
  a.subs = (a.group + a.heads_per_item - 1) / a.heads_per_item;
  a.toks_per_item = MAX (1u, ATT_QUERIES / a.group);
  for (guint p = 0; p < ctx->n_pieces; p++) {
    pieces[p].n_tok_blocks = (ctx->pieces[p].n + a.toks_per_item - 1) / a.toks_per_item;
    pieces[p].first_item = a.n_items;
    a.n_items += pieces[p].n_tok_blocks * a.n_head_kv * a.subs;
  }
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
  guint piece;
} RopeArgs;

/* RoPE on each row's query and key heads at the row's position, then its
 * key and value rows into its piece's cache (rows of different slots: no
 * locking needed). */
static void
rope_store_tokens (LlmContext *ctx, const void *args, guint t0, guint t1)
{
  const RopeArgs *a = args;
  const LlmHParams *hp = &ctx->model->hp;
  const gsize q_dim = (gsize) hp->n_head * hp->head_dim;
  const gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;
  guint p = 0;
  for (guint t = t0; t < t1; t++) {
    while (t >= ctx->pieces[p].row0 + ctx->pieces[p].n)
      p++;
    const LlmFwdPiece *piece = &ctx->pieces[p];
    const guint32 pos = ctx->rows[t].pos;
    llm_rope (ctx->q + t * q_dim, hp->n_head, hp->head_dim, hp->n_rot, pos,
        hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox);
    llm_rope (ctx->k + t * kv_dim, hp->n_head_kv, hp->head_dim, hp->n_rot, pos,
        hp->rope_freq_base, hp->rope_freq_scale, hp->rope_neox);
    llm_kv_cache_write (piece->kv, a->layer, piece->slot0 + (t - piece->row0),
        ctx->k + t * kv_dim, ctx->v + t * kv_dim);
  }
}

/* --- the pass -------------------------------------------------------- */

static void
attention_block (LlmContext *ctx, guint l, guint n_tok)
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
  const RopeArgs rope = { l, 0 };
  per_token (ctx, n_tok, rope_store_tokens, &rope);

  attention_run (ctx, l);

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

/* Every thread's attention scratch covers the longest piece's context. */
static gboolean
ensure_att_scratch (LlmContext *ctx, GError **error)
{
  guint32 n_kv = 0;
  const LlmFwdPiece *widest = &ctx->pieces[0];
  for (guint p = 0; p < ctx->n_pieces; p++) {
    if (ctx->pieces[p].slot0 + ctx->pieces[p].n > n_kv) {
      n_kv = ctx->pieces[p].slot0 + ctx->pieces[p].n;
      widest = &ctx->pieces[p];
    }
  }
  gsize need = llm_kv_cache_batch_scratch_floats (widest->kv, n_kv, ATT_QUERIES);
  if (need <= ctx->att_scratch_floats)
    return TRUE;
  for (int i = 0; i < ctx->n_threads; i++) {
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
  return TRUE;
}

/* The final norm and output product for the rows that want logits. When
 * their destinations are one run of consecutive rows (a prompt's last
 * row, teacher forcing) the product writes there; rows bound for several
 * sequences go through ctx->logits. */
static gboolean
output_logits (LlmContext *ctx, guint n_tok, GError **error)
{
  const LlmModel *m = ctx->model;
  const LlmHParams *hp = &m->hp;
  guint n_out = 0;
  gboolean contiguous = TRUE;
  float *first = NULL;

  for (guint t = 0; t < n_tok; t++) {
    float *dst = ctx->rows[t].logits;
    if (dst == NULL)
      continue;
    if (n_out == 0)
      first = dst;
    else if (dst != first + (gsize) n_out * hp->n_vocab)
      contiguous = FALSE;
    /* gather the row's hidden state in front */
    if (n_out != t)
      memcpy (ctx->x + (gsize) n_out * hp->n_embd, ctx->x + (gsize) t * hp->n_embd,
          hp->n_embd * sizeof (float));
    n_out++;
  }
  if (n_out == 0)
    return TRUE;

  float *out = first;
  if (!contiguous) {
    if (ctx->logits_rows < n_out) {
      g_free (ctx->logits);
      ctx->logits = g_try_new (float, (gsize) n_out * hp->n_vocab);
      ctx->logits_rows = ctx->logits ? n_out : 0;
      if (ctx->logits == NULL) {
        g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
            "out of memory for %u rows of logits", n_out);
        return FALSE;
      }
    }
    out = ctx->logits;
  }
  rmsnorm_rows (ctx, m->output_norm, ctx->x, ctx->xb, n_out, hp->n_embd, hp->rms_eps);
  matmul (ctx, m->output, ctx->xb, n_out, out);
  if (!contiguous) {
    guint i = 0;
    for (guint t = 0; t < n_tok; t++)
      if (ctx->rows[t].logits != NULL)
        memcpy (ctx->rows[t].logits, out + (gsize) i++ * hp->n_vocab,
            hp->n_vocab * sizeof (float));
  }
  return TRUE;
}

gboolean
llm_forward_chunk (LlmForward *ctx, LlmThreadPool *pool, const LlmFwdRow *rows, guint n_tok,
    const LlmFwdPiece *pieces, guint n_pieces, GError **error)
{
  const LlmModel *m = ctx->model;
  const LlmHParams *hp = &m->hp;

  g_return_val_if_fail (n_tok > 0 && n_tok <= ctx->chunk && n_pieces > 0, FALSE);
  g_return_val_if_fail (llm_threadpool_n_threads (pool) <= ctx->n_threads, FALSE);
  ctx->pool = pool;
  ctx->rows = rows;
  ctx->pieces = pieces;
  ctx->n_pieces = n_pieces;
  if (!ensure_att_scratch (ctx, error))
    return FALSE;

  for (guint t = 0; t < n_tok; t++) {
    float *x = ctx->x + (gsize) t * hp->n_embd;
    if (rows[t].embd)
      memcpy (x, rows[t].embd, hp->n_embd * sizeof (float));
    else
      read_row (m->tok_embd, rows[t].token, x);
  }

  for (guint l = 0; l < hp->n_layer; l++) {
    attention_block (ctx, l, n_tok);
    ffn_block (ctx, l, n_tok);
  }
  return output_logits (ctx, n_tok, error);
}

LlmForward *
llm_forward_new (LlmModel *model, int n_threads, GError **error)
{
  const LlmHParams *hp = &model->hp;
  LlmContext *ctx = g_new0 (LlmContext, 1);
  ctx->model = llm_model_ref (model);
  ctx->chunk = CHUNK;
  ctx->n_threads = MAX (1, n_threads);

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
  ctx->att_scratch = g_new0 (float *, ctx->n_threads);
  if (!ctx->x || !ctx->xb || !ctx->q || !ctx->k || !ctx->v || !ctx->att || !ctx->gate ||
      !ctx->up || !ctx->row || !ctx->xq) {
    g_set_error (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_RESOURCES,
        "out of memory for the forward pass scratch buffers");
    llm_forward_free (ctx);
    return NULL;
  }
  return ctx;
}

void
llm_forward_free (LlmForward *ctx)
{
  if (ctx == NULL)
    return;
  if (ctx->att_scratch)
    for (int i = 0; i < ctx->n_threads; i++)
      g_free (ctx->att_scratch[i]);
  g_free (ctx->att_scratch);
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
  g_free (ctx->logits);
  g_free (ctx);
}
