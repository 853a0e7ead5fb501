/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A real trained llama placed inside a larger shape so that the larger
 * model computes the same function: what speculative decoding needs to be
 * measured on, a model that writes real text (so drafts are accepted as
 * often as on that text) and that reads as many bytes per token as a
 * model of the larger shape (so a step is bound by memory as theirs is).
 * Speed depends on shapes and types only; what the tokens are depends on
 * the real weights.
 *
 * Every new value is zero except where the source's go:
 * - the residual stream's first n_src channels are the source's, the
 *   rest stay zero (token_embd, output, attn_output and ffn_down rows
 *   beyond n_src are zero); an RMS norm over n channels of which only
 *   n_src are non-zero comes out sqrt(n / n_src) larger, so the norm
 *   weights are scaled by sqrt(n_src / n) and epsilon by n_src / n;
 * - source head j (of kv group j / r_src) becomes head g r + j % r_src of
 *   group g = j / r_src (r, r_src the query heads per kv head), its
 *   hd_src dimensions the first of hd; the other heads' rows are zero, so
 *   their attention output (a mean of zero values) is zero;
 * - the attention scale 1 / sqrt(hd) is undone by scaling the query rows
 *   by sqrt(hd / hd_src), and RoPE's frequencies base^(-2i / hd) for the
 *   first hd_src / 2 pairs equal the source's base_src^(-2i / hd_src) with
 *   base = base_src^(hd / hd_src);
 * - feed-forward units beyond n_ff_src have zero gate, up and down, and
 *   layers beyond the source's are all zero: identities on the stream.
 * Quantized blocks of 32 (and K-quant sub-blocks) hold either source
 * values or zeros, so the source's rows quantize as they would alone
 * (query rows scaled by other than a power of two excepted). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ggml-type.h"
#include "gguf.h"
#include "cpu/matmul.h"

struct _BenchWiden {
  LlmGguf *src;
  BenchWidenShape to;
  guint32 n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
  guint32 hd_src, hd;
  double rope_base_src, eps_src;
  const LlmGgufTensor *output;  /* output.weight, or token_embd.weight when tied */
  float norm_scale, q_scale;
};

static gboolean
get_u32 (const LlmGguf *g, const char *key, guint32 *out, GError **error)
{
  guint64 v;
  if (!llm_gguf_get_uint (g, key, &v, error))
    return FALSE;
  if (v == 0 || v > G_MAXUINT32) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--widen: %s = %"
        G_GUINT64_FORMAT " is out of range", key, v);
    return FALSE;
  }
  *out = (guint32) v;
  return TRUE;
}

static gboolean
fail (GError **error, const char *what, guint64 src, guint64 to)
{
  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
      "--widen: the source's %s (%" G_GUINT64_FORMAT ") does not fit the shape's (%"
      G_GUINT64_FORMAT ")", what, src, to);
  return FALSE;
}

/* The source tensor @name, 2-D [@ne0, @ne1] (@ne1 1: a vector), in a type
 * llm_dequantize_row reads. */
static const LlmGgufTensor *
src_tensor (const BenchWiden *w, const char *name, guint64 ne0, guint64 ne1, GError **error)
{
  const LlmGgufTensor *t = llm_gguf_find_tensor (w->src, name);
  if (t == NULL) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--widen: the source has no tensor %s", name);
    return NULL;
  }
  if (!llm_matmul_supports (t->type)) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--widen: the source's %s is %s, which this build cannot read", name,
        llm_type_name (t->type));
    return NULL;
  }
  guint64 row_bytes;
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1
      || !llm_type_row_bytes (t->type, ne0, &row_bytes) || row_bytes * ne1 != t->size) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--widen: the source's %s is not a %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT
        " matrix of whole rows", name, ne1, ne0);
    return NULL;
  }
  return t;
}

/* Every tensor the rows below read, present with the source's shape. */
static gboolean
check_tensors (BenchWiden *w, GError **error)
{
  const guint64 q = (guint64) w->n_head * w->hd_src, kv = (guint64) w->n_head_kv * w->hd_src;
  if (src_tensor (w, "token_embd.weight", w->n_embd, w->n_vocab, error) == NULL
      || src_tensor (w, "output_norm.weight", w->n_embd, 1, error) == NULL)
    return FALSE;
  w->output = llm_gguf_find_tensor (w->src, "output.weight") != NULL
      ? src_tensor (w, "output.weight", w->n_embd, w->n_vocab, error)
      : llm_gguf_find_tensor (w->src, "token_embd.weight");
  if (w->output == NULL)
    return FALSE;
  static const struct { const char *name; int in, out; } per_layer[] = {
    /* 0: n_embd, 1: q, 2: kv, 3: n_ff, 4: a vector */
    { "attn_norm", 0, 4 }, { "attn_q", 0, 1 }, { "attn_k", 0, 2 }, { "attn_v", 0, 2 },
    { "attn_output", 1, 0 }, { "ffn_norm", 0, 4 }, { "ffn_gate", 0, 3 },
    { "ffn_up", 0, 3 }, { "ffn_down", 3, 0 },
  };
  const guint64 dims[] = { w->n_embd, q, kv, w->n_ff, 1 };
  for (guint l = 0; l < w->n_layer; l++)
    for (gsize i = 0; i < G_N_ELEMENTS (per_layer); i++) {
      char name[64];
      g_snprintf (name, sizeof name, "blk.%u.%s.weight", l, per_layer[i].name);
      if (src_tensor (w, name, dims[per_layer[i].in], dims[per_layer[i].out], error) == NULL)
        return FALSE;
      g_snprintf (name, sizeof name, "blk.%u.%s.bias", l, per_layer[i].name);
      if (llm_gguf_find_tensor (w->src, name) != NULL) {
        g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
            "--widen: the source has biases (%s); only plain llama models are widened", name);
        return FALSE;
      }
    }
  return TRUE;
}

BenchWiden *
bench_widen_open (const char *path, const BenchWidenShape *to, GError **error)
{
  g_autoptr (LlmGguf) g = llm_gguf_open (path, error);
  if (g == NULL)
    return NULL;
  const char *arch = NULL;
  gsize arch_len = 0;
  if (!llm_gguf_get_string (g, "general.architecture", &arch, &arch_len, error))
    return NULL;
  if (arch_len != 5 || memcmp (arch, "llama", 5) != 0) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--widen: %s is not a llama model", path);
    return NULL;
  }
  BenchWiden *w = g_new0 (BenchWiden, 1);
  w->to = *to;
  guint32 n_rot;
  if (!get_u32 (g, "llama.embedding_length", &w->n_embd, error)
      || !get_u32 (g, "llama.block_count", &w->n_layer, error)
      || !get_u32 (g, "llama.feed_forward_length", &w->n_ff, error)
      || !get_u32 (g, "llama.attention.head_count", &w->n_head, error)
      || !get_u32 (g, "llama.context_length", &w->n_ctx, error)) {
    g_free (w);
    return NULL;
  }
  w->n_head_kv = w->n_head;
  n_rot = w->n_embd / w->n_head;
  if ((llm_gguf_find_key (g, "llama.attention.head_count_kv") >= 0
          && !get_u32 (g, "llama.attention.head_count_kv", &w->n_head_kv, error))
      || (llm_gguf_find_key (g, "llama.rope.dimension_count") >= 0
          && !get_u32 (g, "llama.rope.dimension_count", &n_rot, error))) {
    g_free (w);
    return NULL;
  }
  w->rope_base_src = 10000.0;
  w->eps_src = 1e-5;
  if ((llm_gguf_find_key (g, "llama.rope.freq_base") >= 0
          && !llm_gguf_get_float (g, "llama.rope.freq_base", &w->rope_base_src, error))
      || !llm_gguf_get_float (g, "llama.attention.layer_norm_rms_epsilon", &w->eps_src,
          error)) {
    g_free (w);
    return NULL;
  }
  const LlmGgufTensor *embd = llm_gguf_find_tensor (g, "token_embd.weight");
  w->n_vocab = embd != NULL && embd->ne[1] <= G_MAXUINT32 ? (guint32) embd->ne[1] : 0;
  w->src = g_steal_pointer (&g);
  w->hd_src = w->n_embd / w->n_head;
  w->hd = to->n_embd / to->n_head;
  gboolean ok = TRUE;
  if (w->n_embd % w->n_head != 0 || w->n_head % w->n_head_kv != 0 || n_rot != w->hd_src) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--widen: the source's heads (%u of %u, %u kv, RoPE over %u) are not whole, "
        "grouped and fully rotated", w->n_head, w->n_embd, w->n_head_kv, n_rot);
    ok = FALSE;
  } else if (w->n_vocab == 0) {
    ok = fail (error, "vocabulary", 0, 1);
  } else if (w->n_embd > to->n_embd) {
    ok = fail (error, "width", w->n_embd, to->n_embd);
  } else if (w->hd_src > w->hd) {
    ok = fail (error, "head size", w->hd_src, w->hd);
  } else if (w->n_head_kv > to->n_head_kv) {
    ok = fail (error, "kv heads", w->n_head_kv, to->n_head_kv);
  } else if (w->n_head / w->n_head_kv > to->n_head / to->n_head_kv) {
    ok = fail (error, "query heads per kv head", w->n_head / w->n_head_kv,
        to->n_head / to->n_head_kv);
  } else if (w->n_ff > to->n_ff) {
    ok = fail (error, "feed-forward width", w->n_ff, to->n_ff);
  } else if (w->n_layer > to->n_layer) {
    ok = fail (error, "layers", w->n_layer, to->n_layer);
  } else {
    ok = check_tensors (w, error);
  }
  if (!ok) {
    bench_widen_free (w);
    return NULL;
  }
  w->norm_scale = (float) sqrt ((double) w->n_embd / to->n_embd);
  w->q_scale = (float) sqrt ((double) w->hd / w->hd_src);
  return w;
}

void
bench_widen_free (BenchWiden *w)
{
  if (w == NULL)
    return;
  llm_gguf_free (w->src);
  g_free (w);
}

void
bench_widen_hparams (const BenchWiden *w, guint32 *n_vocab, guint32 *n_ctx, float *rope_base,
    float *rms_eps)
{
  *n_vocab = w->n_vocab;
  *n_ctx = w->n_ctx;
  *rope_base = (float) pow (w->rope_base_src, (double) w->hd / w->hd_src);
  *rms_eps = (float) (w->eps_src * w->n_embd / w->to.n_embd);
}

gboolean
bench_widen_copy_vocab (const BenchWiden *w, LlmGgufWriter *out)
{
  for (guint64 i = 0; i < llm_gguf_n_kv (w->src); i++) {
    const char *key = llm_gguf_key (w->src, i);
    if (g_str_has_prefix (key, "tokenizer.") && !llm_gguf_writer_copy_kv (out, w->src, key))
      return FALSE;
  }
  return TRUE;
}

char *
bench_widen_source_name (const BenchWiden *w)
{
  char *name = llm_gguf_dup_string (w->src, "general.name", NULL);
  return name != NULL ? name : g_path_get_basename (llm_gguf_path (w->src));
}

/* Where source head @j's rows go: the head of the widened layout. */
static guint32
head_to (const BenchWiden *w, guint32 j)
{
  const guint32 r_src = w->n_head / w->n_head_kv, r = w->to.n_head / w->to.n_head_kv;
  return j / r_src * r + j % r_src;
}

/* Source row @r of @t as floats at the start of @x (its ne[0] values). */
static void
src_row (const LlmGgufTensor *t, guint64 r, float *x)
{
  llm_dequantize_row (t->type, t->data, t->size / t->ne[1], t->ne[0], r, x);
}

static const LlmGgufTensor *
layer_tensor (const BenchWiden *w, guint l, const char *what)
{
  char name[64];
  g_snprintf (name, sizeof name, "blk.%u.%s.weight", l, what);
  return llm_gguf_find_tensor (w->src, name);
}

void
bench_widen_row (const BenchWiden *w, const char *name, guint64 row, float *x, gsize n)
{
  memset (x, 0, n * sizeof *x);
  guint l;
  char what[32];
  if (strcmp (name, "token_embd.weight") == 0 || strcmp (name, "output.weight") == 0) {
    if (row < w->n_vocab)
      src_row (name[0] == 't' ? llm_gguf_find_tensor (w->src, name) : w->output, row, x);
    return;
  }
  if (strcmp (name, "output_norm.weight") == 0) {
    src_row (llm_gguf_find_tensor (w->src, name), 0, x);
    for (guint32 i = 0; i < w->n_embd; i++)
      x[i] *= w->norm_scale;
    return;
  }
  if (sscanf (name, "blk.%u.%31[a-z_].weight", &l, what) != 2 || l >= w->n_layer)
    return;
  const LlmGgufTensor *t = layer_tensor (w, l, what);
  if (t == NULL)
    return;
  if (strcmp (what, "attn_norm") == 0 || strcmp (what, "ffn_norm") == 0) {
    src_row (t, 0, x);
    for (guint32 i = 0; i < w->n_embd; i++)
      x[i] *= w->norm_scale;
  } else if (strcmp (what, "attn_q") == 0 || strcmp (what, "attn_k") == 0
      || strcmp (what, "attn_v") == 0) {
    const gboolean q = what[5] == 'q';
    const guint32 h = (guint32) (row / w->hd), d = (guint32) (row % w->hd);
    if (d >= w->hd_src)
      return;
    /* The source head (or kv head) whose dimension d this row is. */
    guint32 j = G_MAXUINT32;
    if (q) {
      for (guint32 k = 0; k < w->n_head; k++)
        if (head_to (w, k) == h)
          j = k;
    } else if (h < w->n_head_kv) {
      j = h;
    }
    if (j == G_MAXUINT32)
      return;
    src_row (t, (guint64) j * w->hd_src + d, x);
    if (q)
      for (guint32 i = 0; i < w->n_embd; i++)
        x[i] *= w->q_scale;
  } else if (strcmp (what, "attn_output") == 0) {
    if (row >= w->n_embd)
      return;
    src_row (t, row, x);
    /* Input channel j hd_src + d moves to head_to (j) hd + d, never to an
     * earlier place: moved from the last down, nothing is overwritten
     * before it moves. */
    for (guint32 j = w->n_head; j-- > 0;)
      for (guint32 d = w->hd_src; d-- > 0;) {
        const gsize from = (gsize) j * w->hd_src + d, to = (gsize) head_to (w, j) * w->hd + d;
        const float v = x[from];
        x[from] = 0.0f;
        x[to] = v;
      }
  } else if (strcmp (what, "ffn_gate") == 0 || strcmp (what, "ffn_up") == 0) {
    if (row < w->n_ff)
      src_row (t, row, x);
  } else if (strcmp (what, "ffn_down") == 0) {
    if (row < w->n_embd)
      src_row (t, row, x);
  }
}
