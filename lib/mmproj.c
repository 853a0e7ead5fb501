/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "mmproj.h"

#include <string.h>

#include "ggml-type.h"

G_DEFINE_QUARK (llm-mmproj-error-quark, llm_mmproj_error)

/* Sizes past these are not a vision tower; they keep every product of
 * them far from overflowing. */
#define MAX_DIM 65536u
#define MAX_LAYERS 256u
#define MAX_IMAGE 8192u

struct _LlmMmproj {
  LlmGguf *gguf;
  LlmMmprojVision v;
};

const char *
llm_mmproj_type_name (LlmMmprojType type)
{
  return type == LLM_MMPROJ_MLP ? "mlp" : "idefics3";
}

typedef struct {
  const LlmGguf *gguf;
  const char *path;
  GError **error;
} Reader;

static gboolean
invalid (Reader *r, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid (Reader *r, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (r->error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_INVALID, "%s: %s", r->path, what);
  return FALSE;
}

/* A size key in [1, @max]. */
static gboolean
get_size (Reader *r, const char *key, guint32 max, guint32 *out)
{
  guint64 v;
  GError *err = NULL;
  if (!llm_gguf_get_uint (r->gguf, key, &v, &err)) {
    gboolean ok = invalid (r, "%s: %s", key, err->message);
    g_error_free (err);
    return ok;
  }
  if (v < 1 || v > max)
    return invalid (r, "%s is %" G_GUINT64_FORMAT ", not in 1..%u", key, v, max);
  *out = (guint32) v;
  return TRUE;
}

/* A float array key of exactly @n values, or @fallback when absent. */
static gboolean
get_floats (Reader *r, const char *key, guint n, const float *fallback, float *out)
{
  LlmGgufValueType type;
  guint64 count;
  if (llm_gguf_find_key (r->gguf, key) < 0) {
    memcpy (out, fallback, n * sizeof *out);
    return TRUE;
  }
  if (!llm_gguf_get_array (r->gguf, key, &type, &count, NULL) || type != LLM_GGUF_FLOAT32
      || count != n)
    return invalid (r, "%s must be an array of %u float32", key, n);
  memcpy (out, llm_gguf_array_data (r->gguf, key), n * sizeof *out);
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

/* Tensor @name of exactly the shape @ne (@n_dims dims; 0 in @ne matches any
 * size, which is then returned there), or absent when not @required. */
static gboolean
get_tensor (Reader *r, const char *name, gboolean required, guint n_dims, guint64 *ne,
    LlmMmprojWeight *out)
{
  out->t = llm_gguf_find_tensor (r->gguf, name);
  if (out->t == NULL)
    return required ? invalid (r, "tensor %s is missing", name) : TRUE;
  const LlmGgufTensor *t = out->t;
  gboolean shape_ok = t->n_dims <= n_dims;
  for (guint d = 0; d < LLM_GGUF_MAX_DIMS && shape_ok; d++) {
    const guint64 want = d < n_dims ? ne[d] : 1;
    shape_ok = want == 0 ? t->ne[d] >= 1 && t->ne[d] <= MAX_DIM : t->ne[d] == want;
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
    return invalid (r, "tensor %s has shape [%s], the sizes ask for [%s]", name, got->str,
        want->str);
  }
  const gboolean vector = n_dims == 1;
  if (vector ? t->type != LLM_TYPE_F32 : !matrix_type_ok (t->type))
    return invalid (r, "tensor %s has type %s, which a projector %s cannot be", name,
        llm_type_name (t->type), vector ? "vector (F32)" : "matrix (F32, F16, BF16, Q8_0)");
  for (guint d = 0; d < n_dims; d++)
    if (ne[d] == 0)
      ne[d] = t->ne[d];
  return TRUE;
}

static gboolean
get_vector (Reader *r, const char *name, gboolean required, guint64 n, LlmMmprojWeight *out)
{
  guint64 ne[1] = { n };
  return get_tensor (r, name, required, 1, ne, out);
}

/* A matrix from @in inputs to @out outputs (0: any, read back). */
static gboolean
get_matrix (Reader *r, const char *name, guint64 in, guint64 *out_dim, LlmMmprojWeight *out)
{
  guint64 ne[2] = { in, *out_dim };
  if (!get_tensor (r, name, TRUE, 2, ne, out))
    return FALSE;
  *out_dim = ne[1];
  return TRUE;
}

/* A linear layer @prefix.weight / @prefix.bias from @in to @out. */
static gboolean
get_linear (Reader *r, const char *prefix, guint64 in, guint64 out, LlmMmprojWeight *w,
    LlmMmprojWeight *b)
{
  g_autofree char *wn = g_strdup_printf ("%s.weight", prefix);
  g_autofree char *bn = g_strdup_printf ("%s.bias", prefix);
  guint64 o = out;
  return get_matrix (r, wn, in, &o, w) && get_vector (r, bn, FALSE, out, b);
}

static gboolean
get_norm (Reader *r, const char *prefix, gboolean required, guint64 n, LlmMmprojWeight *w,
    LlmMmprojWeight *b)
{
  g_autofree char *wn = g_strdup_printf ("%s.weight", prefix);
  g_autofree char *bn = g_strdup_printf ("%s.bias", prefix);
  return get_vector (r, wn, required, n, w) && get_vector (r, bn, w->t != NULL && required,
      n, b);
}

static gboolean
read_layers (Reader *r, LlmMmprojVision *v)
{
  v->layers = g_new0 (LlmMmprojLayer, v->n_layer);
  for (guint32 l = 0; l < v->n_layer; l++) {
    LlmMmprojLayer *ly = &v->layers[l];
    char p[64];
#define AT(part) (g_snprintf (p, sizeof p, "v.blk.%u." part, l), p)
    if (!get_norm (r, AT ("ln1"), TRUE, v->n_embd, &ly->ln1_w, &ly->ln1_b)
        || !get_linear (r, AT ("attn_q"), v->n_embd, v->n_embd, &ly->q_w, &ly->q_b)
        || !get_linear (r, AT ("attn_k"), v->n_embd, v->n_embd, &ly->k_w, &ly->k_b)
        || !get_linear (r, AT ("attn_v"), v->n_embd, v->n_embd, &ly->v_w, &ly->v_b)
        || !get_linear (r, AT ("attn_out"), v->n_embd, v->n_embd, &ly->o_w, &ly->o_b)
        || !get_norm (r, AT ("ln2"), TRUE, v->n_embd, &ly->ln2_w, &ly->ln2_b)
        || !get_linear (r, AT ("ffn_up"), v->n_embd, v->n_ff, &ly->up_w, &ly->up_b)
        || !get_linear (r, AT ("ffn_down"), v->n_ff, v->n_embd, &ly->down_w, &ly->down_b))
      return FALSE;
#undef AT
  }
  return TRUE;
}

/* The projector type, from clip.projector_type or, in files of several
 * modalities, clip.vision.projector_type. */
static gboolean
read_type (Reader *r, LlmMmprojType *type)
{
  const char *key = llm_gguf_find_key (r->gguf, "clip.projector_type") >= 0
      ? "clip.projector_type" : "clip.vision.projector_type";
  g_autofree char *name = llm_gguf_dup_string (r->gguf, key, NULL);
  if (name == NULL)
    return invalid (r, "no clip.projector_type");
  if (strcmp (name, "mlp") == 0) {
    *type = LLM_MMPROJ_MLP;
    return TRUE;
  }
  if (strcmp (name, "idefics3") == 0) {
    *type = LLM_MMPROJ_IDEFICS3;
    return TRUE;
  }
  g_autofree char *shown = llm_gguf_escape (name, -1);
  g_set_error (r->error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_UNSUPPORTED,
      "%s: projector type \"%s\" is not supported; gst-llm reads mlp (LLaVA-1.5 style) and "
      "idefics3 (SmolVLM, Idefics3)", r->path, shown);
  return FALSE;
}

static gboolean
read_sizes (Reader *r, LlmMmprojVision *v)
{
  double eps = 1e-6;
  if (!get_size (r, "clip.vision.embedding_length", MAX_DIM, &v->n_embd)
      || !get_size (r, "clip.vision.attention.head_count", MAX_DIM, &v->n_head)
      || !get_size (r, "clip.vision.feed_forward_length", MAX_DIM, &v->n_ff)
      || !get_size (r, "clip.vision.block_count", MAX_LAYERS, &v->n_layer)
      || !get_size (r, "clip.vision.image_size", MAX_IMAGE, &v->image_size)
      || !get_size (r, "clip.vision.patch_size", MAX_IMAGE, &v->patch_size))
    return FALSE;
  if (llm_gguf_find_key (r->gguf, "clip.vision.attention.layer_norm_epsilon") >= 0
      && !llm_gguf_get_float (r->gguf, "clip.vision.attention.layer_norm_epsilon", &eps, NULL))
    return invalid (r, "clip.vision.attention.layer_norm_epsilon is not a float");
  if (!(eps > 0 && eps < 1))
    return invalid (r, "clip.vision.attention.layer_norm_epsilon is %g, not in (0, 1)", eps);
  v->eps = (float) eps;
  if (v->n_embd % v->n_head != 0)
    return invalid (r, "embedding length %u is not a multiple of the %u heads", v->n_embd,
        v->n_head);
  if (v->image_size % v->patch_size != 0)
    return invalid (r, "image size %u is not a multiple of the patch size %u", v->image_size,
        v->patch_size);
  const guint32 side = v->image_size / v->patch_size;
  v->n_patches = side * side;

  /* CLIP's statistics when a file names none (llama.cpp's defaults). */
  static const float mean0[3] = { 0.48145466f, 0.4578275f, 0.40821073f };
  static const float std0[3] = { 0.26862954f, 0.26130258f, 0.27577711f };
  if (!get_floats (r, "clip.vision.image_mean", 3, mean0, v->image_mean)
      || !get_floats (r, "clip.vision.image_std", 3, std0, v->image_std))
    return FALSE;
  for (int c = 0; c < 3; c++)
    if (!(v->image_std[c] > 0))
      return invalid (r, "clip.vision.image_std[%d] is %g, not above 0", c, v->image_std[c]);
  /* Absent, it is CLIP's quick GELU, as llama.cpp reads these files. */
  v->gelu = FALSE;
  if (llm_gguf_find_key (r->gguf, "clip.use_gelu") >= 0
      && !llm_gguf_get_bool (r->gguf, "clip.use_gelu", &v->gelu, NULL))
    return invalid (r, "clip.use_gelu is not a bool");

  v->n_layers_run = v->type == LLM_MMPROJ_MLP ? MAX (v->n_layer - 1, 1) : v->n_layer;
  LlmGgufValueType type;
  guint64 n;
  if (v->type == LLM_MMPROJ_MLP
      && llm_gguf_get_array (r->gguf, "clip.vision.feature_layer", &type, &n, NULL)) {
    if (type != LLM_GGUF_INT32)
      return invalid (r, "clip.vision.feature_layer must be an array of int32");
    const gint32 *layers = llm_gguf_array_data (r->gguf, "clip.vision.feature_layer");
    gint64 deepest = -1;
    for (guint64 i = 0; i < n; i++)
      if (layers[i] >= 1 && layers[i] <= (gint64) v->n_layer)
        deepest = MAX (deepest, layers[i]);
    if (deepest > 0)
      v->n_layers_run = (guint32) deepest;
  }

  v->scale_factor = 1;
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    if (!get_size (r, "clip.vision.projector.scale_factor", side, &v->scale_factor))
      return FALSE;
    if (side % v->scale_factor != 0)
      return invalid (r, "the %u patches a side do not divide by the scale factor %u", side,
          v->scale_factor);
    if (llm_gguf_find_key (r->gguf, "clip.vision.preproc_image_size") >= 0) {
      if (!get_size (r, "clip.vision.preproc_image_size", 16384, &v->longest_edge))
        return FALSE;
      if (v->longest_edge < v->image_size)
        return invalid (r, "clip.vision.preproc_image_size %u is under the image size %u",
            v->longest_edge, v->image_size);
    }
  }
  return TRUE;
}

static gboolean
read_tower (Reader *r, LlmMmprojVision *v)
{
  guint64 patch_ne[4] = { v->patch_size, v->patch_size, 3, v->n_embd };
  if (!get_tensor (r, "v.patch_embd.weight", TRUE, 4, patch_ne, &v->patch_w)
      || !get_vector (r, "v.patch_embd.bias", FALSE, v->n_embd, &v->patch_b)
      || !get_vector (r, "v.class_embd", v->type == LLM_MMPROJ_MLP, v->n_embd, &v->class_embd))
    return FALSE;
  v->n_positions = v->n_patches + (v->class_embd.t != NULL);
  guint64 pos_ne[2] = { v->n_embd, v->n_positions };
  return get_tensor (r, "v.position_embd.weight", TRUE, 2, pos_ne, &v->pos_embd)
      && get_norm (r, "v.pre_ln", FALSE, v->n_embd, &v->pre_ln_w, &v->pre_ln_b)
      && get_norm (r, "v.post_ln", FALSE, v->n_embd, &v->post_ln_w, &v->post_ln_b)
      && read_layers (r, v);
}

static gboolean
read_projector (Reader *r, LlmMmprojVision *v)
{
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    /* Pixel shuffle: scale^2 neighbouring patches become one row. */
    guint64 out = 0;
    if (!get_matrix (r, "mm.model.fc.weight",
            (guint64) v->n_embd * v->scale_factor * v->scale_factor, &out, &v->proj0_w))
      return FALSE;
    v->n_out = (guint32) out;
    v->n_tokens = v->n_patches / (v->scale_factor * v->scale_factor);
    return TRUE;
  }
  guint64 hidden = 0, out = 0;
  if (!get_matrix (r, "mm.0.weight", v->n_embd, &hidden, &v->proj0_w)
      || !get_vector (r, "mm.0.bias", TRUE, hidden, &v->proj0_b)
      || !get_matrix (r, "mm.2.weight", hidden, &out, &v->proj2_w)
      || !get_vector (r, "mm.2.bias", TRUE, out, &v->proj2_b))
    return FALSE;
  v->n_out = (guint32) out;
  /* The class token is not one of the image's tokens (Hugging Face's
   * LLaVA drops it before the projector). */
  v->n_tokens = v->n_patches;
  return TRUE;
}

LlmMmproj *
llm_mmproj_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  LlmGguf *gguf = llm_gguf_open (path, error);
  if (gguf == NULL)
    return NULL;
  LlmMmproj *p = g_new0 (LlmMmproj, 1);
  p->gguf = gguf;
  Reader r = { gguf, path, error };

  g_autofree char *arch = llm_gguf_dup_string (gguf, "general.architecture", NULL);
  gboolean vision = FALSE;
  llm_gguf_get_bool (gguf, "clip.has_vision_encoder", &vision, NULL);
  if (g_strcmp0 (arch, "clip") != 0 || !vision) {
    g_autofree char *shown = arch ? llm_gguf_escape (arch, -1) : g_strdup ("none");
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "%s is not a multimodal projector with a vision encoder (architecture %s%s); "
        "give the mmproj file that comes with the model", path, shown,
        vision ? "" : ", no clip.has_vision_encoder");
    llm_mmproj_free (p);
    return NULL;
  }
  if (!read_type (&r, &p->v.type) || !read_sizes (&r, &p->v) || !read_tower (&r, &p->v)
      || !read_projector (&r, &p->v)) {
    llm_mmproj_free (p);
    return NULL;
  }
  return p;
}

void
llm_mmproj_free (LlmMmproj *p)
{
  if (p == NULL)
    return;
  g_free (p->v.layers);
  llm_gguf_free (p->gguf);
  g_free (p);
}

const LlmMmprojVision *
llm_mmproj_vision (const LlmMmproj *p)
{
  g_return_val_if_fail (p != NULL, NULL);
  return &p->v;
}
