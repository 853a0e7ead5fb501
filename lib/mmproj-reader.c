/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "mmproj-reader.h"

#include <math.h>
#include <string.h>

#include "ggml-type.h"

gboolean
llm_mmproj_invalid (LlmMmprojReader *r, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (r->error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_INVALID, "%s: %s", r->path, what);
  return FALSE;
}

gboolean
llm_mmproj_get_size (LlmMmprojReader *r, const char *key, guint32 max, guint32 *out)
{
  guint64 v;
  GError *err = NULL;
  if (!llm_gguf_get_uint (r->gguf, key, &v, &err)) {
    gboolean ok = llm_mmproj_invalid (r, "%s: %s", key, err->message);
    g_error_free (err);
    return ok;
  }
  if (v < 1 || v > max)
    return llm_mmproj_invalid (r, "%s is %" G_GUINT64_FORMAT ", not in 1..%u", key, v, max);
  *out = (guint32) v;
  return TRUE;
}

gboolean
llm_mmproj_get_eps (LlmMmprojReader *r, const char *key, double fallback, float *out)
{
  double eps = fallback;
  if (llm_gguf_find_key (r->gguf, key) >= 0 && !llm_gguf_get_float (r->gguf, key, &eps, NULL))
    return llm_mmproj_invalid (r, "%s is not a float", key);
  if (!(eps > 0 && eps < 1))
    return llm_mmproj_invalid (r, "%s is %g, not in (0, 1)", key, eps);
  *out = (float) eps;
  return TRUE;
}

gboolean
llm_mmproj_get_floats (LlmMmprojReader *r, const char *key, guint n, const float *fallback,
    float *out)
{
  LlmGgufValueType type;
  guint64 count;
  if (llm_gguf_find_key (r->gguf, key) < 0) {
    memcpy (out, fallback, n * sizeof *out);
    return TRUE;
  }
  if (!llm_gguf_get_array (r->gguf, key, &type, &count, NULL) || type != LLM_GGUF_FLOAT32
      || count != n)
    return llm_mmproj_invalid (r, "%s must be an array of %u float32", key, n);
  memcpy (out, llm_gguf_array_data (r->gguf, key), n * sizeof *out);
  /* A NaN or infinity would reach the language model as every embedding. */
  for (guint i = 0; i < n; i++)
    if (!isfinite (out[i]))
      return llm_mmproj_invalid (r, "%s[%u] is %g, not a finite number", key, i, out[i]);
  return TRUE;
}

/* Types a weight matrix may have; vectors (norms, biases, embeddings of
 * one row) are F32 as llama.cpp's converter writes them. */
static gboolean
matrix_type_ok (guint32 type)
{
  return type == LLM_TYPE_F32 || type == LLM_TYPE_F16 || type == LLM_TYPE_BF16
      || type == LLM_TYPE_Q8_0;
}

/* @f32: the tensor is read as plain floats, so F32 whatever its dims. */
static gboolean
get_tensor (LlmMmprojReader *r, const char *name, gboolean required, guint n_dims,
    guint64 *ne, gboolean f32, LlmMmprojWeight *out)
{
  out->t = llm_gguf_find_tensor (r->gguf, name);
  if (out->t == NULL)
    return required ? llm_mmproj_invalid (r, "tensor %s is missing", name) : TRUE;
  const LlmGgufTensor *t = out->t;
  gboolean shape_ok = t->n_dims <= n_dims;
  for (guint d = 0; d < LLM_GGUF_MAX_DIMS && shape_ok; d++) {
    const guint64 want = d < n_dims ? ne[d] : 1;
    shape_ok = want == 0 ? t->ne[d] >= 1 && t->ne[d] <= LLM_MMPROJ_MAX_DIM : t->ne[d] == want;
  }
  if (!shape_ok) {
    g_autoptr (GString) want = g_string_new (NULL), got = g_string_new (NULL);
    for (guint d = 0; d < n_dims; d++) {
      if (ne[d] == 0)
        g_string_append_printf (want, "%s*", d ? ", " : "");
      else
        g_string_append_printf (want, "%s%" G_GUINT64_FORMAT, d ? ", " : "", ne[d]);
    }
    for (guint d = 0; d < MAX (t->n_dims, 1); d++)
      g_string_append_printf (got, "%s%" G_GUINT64_FORMAT, d ? ", " : "", t->ne[d]);
    return llm_mmproj_invalid (r, "tensor %s has shape [%s], the sizes ask for [%s]", name,
        got->str, want->str);
  }
  const gboolean plain = f32 || n_dims == 1;
  if (plain ? t->type != LLM_TYPE_F32 : !matrix_type_ok (t->type))
    return llm_mmproj_invalid (r, "tensor %s has type %s, which a projector %s cannot be", name,
        llm_type_name (t->type), n_dims == 1 ? "vector (F32)"
        : plain ? "table read as floats (F32)" : "matrix (F32, F16, BF16, Q8_0)");
  for (guint d = 0; d < n_dims; d++)
    if (ne[d] == 0)
      ne[d] = t->ne[d];
  return TRUE;
}

gboolean
llm_mmproj_get_tensor (LlmMmprojReader *r, const char *name, gboolean required, guint n_dims,
    guint64 *ne, LlmMmprojWeight *out)
{
  return get_tensor (r, name, required, n_dims, ne, FALSE, out);
}

gboolean
llm_mmproj_get_f32 (LlmMmprojReader *r, const char *name, gboolean required, guint n_dims,
    guint64 *ne, LlmMmprojWeight *out)
{
  return get_tensor (r, name, required, n_dims, ne, TRUE, out);
}

gboolean
llm_mmproj_get_vector (LlmMmprojReader *r, const char *name, gboolean required, guint64 n,
    LlmMmprojWeight *out)
{
  guint64 ne[1] = { n };
  return get_tensor (r, name, required, 1, ne, TRUE, out);
}

gboolean
llm_mmproj_get_matrix (LlmMmprojReader *r, const char *name, guint64 in, guint64 *out_dim,
    LlmMmprojWeight *out)
{
  guint64 ne[2] = { in, *out_dim };
  if (!get_tensor (r, name, TRUE, 2, ne, FALSE, out))
    return FALSE;
  *out_dim = ne[1];
  return TRUE;
}

gboolean
llm_mmproj_get_linear (LlmMmprojReader *r, const char *prefix, guint64 in, guint64 out,
    LlmMmprojWeight *w, LlmMmprojWeight *b)
{
  g_autofree char *wn = g_strdup_printf ("%s.weight", prefix);
  g_autofree char *bn = g_strdup_printf ("%s.bias", prefix);
  guint64 o = out;
  return llm_mmproj_get_matrix (r, wn, in, &o, w) && llm_mmproj_get_vector (r, bn, FALSE, out, b);
}

gboolean
llm_mmproj_get_norm (LlmMmprojReader *r, const char *prefix, gboolean required, guint64 n,
    LlmMmprojWeight *w, LlmMmprojWeight *b)
{
  g_autofree char *wn = g_strdup_printf ("%s.weight", prefix);
  g_autofree char *bn = g_strdup_printf ("%s.bias", prefix);
  return llm_mmproj_get_vector (r, wn, required, n, w)
      && llm_mmproj_get_vector (r, bn, w->t != NULL && required, n, b);
}

gboolean
llm_mmproj_get_layers (LlmMmprojReader *r, const char *tower, guint32 n_layer, guint32 n_embd,
    guint32 n_ff, LlmMmprojLayer **layers)
{
  *layers = g_new0 (LlmMmprojLayer, n_layer);
  for (guint32 l = 0; l < n_layer; l++) {
    LlmMmprojLayer *ly = &(*layers)[l];
    char p[64];
#define AT(part) (g_snprintf (p, sizeof p, "%s.blk.%u." part, tower, l), p)
    if (!llm_mmproj_get_norm (r, AT ("ln1"), TRUE, n_embd, &ly->ln1_w, &ly->ln1_b)
        || !llm_mmproj_get_linear (r, AT ("attn_q"), n_embd, n_embd, &ly->q_w, &ly->q_b)
        || !llm_mmproj_get_linear (r, AT ("attn_k"), n_embd, n_embd, &ly->k_w, &ly->k_b)
        || !llm_mmproj_get_linear (r, AT ("attn_v"), n_embd, n_embd, &ly->v_w, &ly->v_b)
        || !llm_mmproj_get_linear (r, AT ("attn_out"), n_embd, n_embd, &ly->o_w, &ly->o_b)
        || !llm_mmproj_get_norm (r, AT ("ln2"), TRUE, n_embd, &ly->ln2_w, &ly->ln2_b)
        || !llm_mmproj_get_linear (r, AT ("ffn_up"), n_embd, n_ff, &ly->up_w, &ly->up_b)
        || !llm_mmproj_get_linear (r, AT ("ffn_down"), n_ff, n_embd, &ly->down_w, &ly->down_b))
      return FALSE;
#undef AT
  }
  return TRUE;
}

char *
llm_mmproj_get_type_name (LlmMmprojReader *r, const char *modality)
{
  g_autofree char *own = g_strdup_printf ("clip.%s.projector_type", modality);
  const char *key = llm_gguf_find_key (r->gguf, "clip.projector_type") >= 0
      ? "clip.projector_type" : own;
  char *name = llm_gguf_dup_string (r->gguf, key, NULL);
  if (name == NULL)
    llm_mmproj_invalid (r, "no clip.projector_type (nor %s)", own);
  return name;
}
