/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "mmproj.h"

#include <string.h>

#include "ggml-type.h"
#include "mmproj-reader.h"

G_DEFINE_QUARK (llm-mmproj-error-quark, llm_mmproj_error)

#define MAX_IMAGE 8192u

struct _LlmMmproj {
  LlmGguf *gguf;
  LlmMmprojVision v;
  LlmMmprojAudio a;
  gboolean has_vision, has_audio;
};

const char *
llm_mmproj_type_name (LlmMmprojType type)
{
  switch (type) {
    case LLM_MMPROJ_MLP:
      return "mlp";
    case LLM_MMPROJ_IDEFICS3:
      return "idefics3";
    case LLM_MMPROJ_ULTRAVOX:
      return "ultravox";
    case LLM_MMPROJ_QWEN2A:
      return "qwen2a";
    case LLM_MMPROJ_VOXTRAL:
      return "voxtral";
  }
  return "?";
}

typedef LlmMmprojReader Reader;

/* The projector type, from clip.projector_type or, in files of several
 * modalities, clip.vision.projector_type. */
static gboolean
read_type (Reader *r, LlmMmprojType *type)
{
  g_autofree char *name = llm_mmproj_get_type_name (r, "vision");
  if (name == NULL)
    return FALSE;
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
      "%s: vision projector type \"%s\" is not supported; gst-llm reads mlp (LLaVA-1.5 style) "
      "and idefics3 (SmolVLM, Idefics3)", r->path, shown);
  return FALSE;
}

static gboolean
read_sizes (Reader *r, LlmMmprojVision *v)
{
  if (!llm_mmproj_get_size (r, "clip.vision.embedding_length", LLM_MMPROJ_MAX_DIM, &v->n_embd)
      || !llm_mmproj_get_size (r, "clip.vision.attention.head_count", LLM_MMPROJ_MAX_DIM,
          &v->n_head)
      || !llm_mmproj_get_size (r, "clip.vision.feed_forward_length", LLM_MMPROJ_MAX_DIM,
          &v->n_ff)
      || !llm_mmproj_get_size (r, "clip.vision.block_count", LLM_MMPROJ_MAX_LAYERS, &v->n_layer)
      || !llm_mmproj_get_size (r, "clip.vision.image_size", MAX_IMAGE, &v->image_size)
      || !llm_mmproj_get_size (r, "clip.vision.patch_size", MAX_IMAGE, &v->patch_size)
      || !llm_mmproj_get_eps (r, "clip.vision.attention.layer_norm_epsilon", 1e-6, &v->eps))
    return FALSE;
  if (v->n_embd % v->n_head != 0)
    return llm_mmproj_invalid (r, "embedding length %u is not a multiple of the %u heads",
        v->n_embd, v->n_head);
  if (v->image_size % v->patch_size != 0)
    return llm_mmproj_invalid (r, "image size %u is not a multiple of the patch size %u",
        v->image_size, v->patch_size);
  const guint32 side = v->image_size / v->patch_size;
  v->n_patches = side * side;

  /* CLIP's statistics when a file names none (llama.cpp's defaults). */
  static const float mean0[3] = { 0.48145466f, 0.4578275f, 0.40821073f };
  static const float std0[3] = { 0.26862954f, 0.26130258f, 0.27577711f };
  if (!llm_mmproj_get_floats (r, "clip.vision.image_mean", 3, mean0, v->image_mean)
      || !llm_mmproj_get_floats (r, "clip.vision.image_std", 3, std0, v->image_std))
    return FALSE;
  for (int c = 0; c < 3; c++)
    if (!(v->image_std[c] > 0))
      return llm_mmproj_invalid (r, "clip.vision.image_std[%d] is %g, not above 0", c,
          v->image_std[c]);
  /* Absent, it is CLIP's quick GELU, as llama.cpp reads these files. */
  v->gelu = FALSE;
  if (llm_gguf_find_key (r->gguf, "clip.use_gelu") >= 0
      && !llm_gguf_get_bool (r->gguf, "clip.use_gelu", &v->gelu, NULL))
    return llm_mmproj_invalid (r, "clip.use_gelu is not a bool");

  v->n_layers_run = v->type == LLM_MMPROJ_MLP ? MAX (v->n_layer - 1, 1) : v->n_layer;
  LlmGgufValueType type;
  guint64 n;
  if (v->type == LLM_MMPROJ_MLP
      && llm_gguf_get_array (r->gguf, "clip.vision.feature_layer", &type, &n, NULL)) {
    if (type != LLM_GGUF_INT32)
      return llm_mmproj_invalid (r, "clip.vision.feature_layer must be an array of int32");
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
    if (!llm_mmproj_get_size (r, "clip.vision.projector.scale_factor", side, &v->scale_factor))
      return FALSE;
    if (side % v->scale_factor != 0)
      return llm_mmproj_invalid (r, "the %u patches a side do not divide by the scale factor %u",
          side, v->scale_factor);
    if (llm_gguf_find_key (r->gguf, "clip.vision.preproc_image_size") >= 0) {
      if (!llm_mmproj_get_size (r, "clip.vision.preproc_image_size", 16384, &v->longest_edge))
        return FALSE;
      if (v->longest_edge < v->image_size)
        return llm_mmproj_invalid (r, "clip.vision.preproc_image_size %u is under the image "
            "size %u", v->longest_edge, v->image_size);
    }
  }
  return TRUE;
}

static gboolean
read_tower (Reader *r, LlmMmprojVision *v)
{
  guint64 patch_ne[4] = { v->patch_size, v->patch_size, 3, v->n_embd };
  if (!llm_mmproj_get_tensor (r, "v.patch_embd.weight", TRUE, 4, patch_ne, &v->patch_w)
      || !llm_mmproj_get_vector (r, "v.patch_embd.bias", FALSE, v->n_embd, &v->patch_b)
      || !llm_mmproj_get_vector (r, "v.class_embd", v->type == LLM_MMPROJ_MLP, v->n_embd,
          &v->class_embd))
    return FALSE;
  v->n_positions = v->n_patches + (v->class_embd.t != NULL);
  /* The encoder adds it as floats (llama.cpp's converter keeps it F32). */
  guint64 pos_ne[2] = { v->n_embd, v->n_positions };
  return llm_mmproj_get_f32 (r, "v.position_embd.weight", TRUE, 2, pos_ne, &v->pos_embd)
      && llm_mmproj_get_norm (r, "v.pre_ln", FALSE, v->n_embd, &v->pre_ln_w, &v->pre_ln_b)
      && llm_mmproj_get_norm (r, "v.post_ln", FALSE, v->n_embd, &v->post_ln_w, &v->post_ln_b)
      && llm_mmproj_get_layers (r, "v", v->n_layer, v->n_embd, v->n_ff, &v->layers);
}

static gboolean
read_projector (Reader *r, LlmMmprojVision *v)
{
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    /* Pixel shuffle: scale^2 neighbouring patches become one row. */
    guint64 out = 0;
    if (!llm_mmproj_get_matrix (r, "mm.model.fc.weight",
            (guint64) v->n_embd * v->scale_factor * v->scale_factor, &out, &v->proj0_w))
      return FALSE;
    v->n_out = (guint32) out;
    v->n_tokens = v->n_patches / (v->scale_factor * v->scale_factor);
    return TRUE;
  }
  guint64 hidden = 0, out = 0;
  if (!llm_mmproj_get_matrix (r, "mm.0.weight", v->n_embd, &hidden, &v->proj0_w)
      || !llm_mmproj_get_vector (r, "mm.0.bias", TRUE, hidden, &v->proj0_b)
      || !llm_mmproj_get_matrix (r, "mm.2.weight", hidden, &out, &v->proj2_w)
      || !llm_mmproj_get_vector (r, "mm.2.bias", TRUE, out, &v->proj2_b))
    return FALSE;
  v->n_out = (guint32) out;
  /* The class token is not one of the image's tokens (Hugging Face's
   * LLaVA drops it before the projector). */
  v->n_tokens = v->n_patches;
  return TRUE;
}

static gboolean
read_vision (Reader *r, LlmMmprojVision *v)
{
  return read_type (r, &v->type) && read_sizes (r, v) && read_tower (r, v)
      && read_projector (r, v);
}

static gboolean
has_bool (const LlmGguf *gguf, const char *key)
{
  gboolean v = FALSE;
  return llm_gguf_get_bool (gguf, key, &v, NULL) && v;
}

/* @towers 0: every tower the file has. */
static LlmMmproj *
load (const char *path, LlmMmprojTowers towers, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  LlmGguf *gguf = llm_gguf_open (path, error);
  if (gguf == NULL)
    return NULL;
  LlmMmproj *p = g_new0 (LlmMmproj, 1);
  p->gguf = gguf;
  Reader r = { gguf, path, error };

  g_autofree char *arch = llm_gguf_dup_string (gguf, "general.architecture", NULL);
  const gboolean clip = g_strcmp0 (arch, "clip") == 0;
  const gboolean vision = clip && has_bool (gguf, "clip.has_vision_encoder");
  const gboolean audio = clip && has_bool (gguf, "clip.has_audio_encoder");
  const gboolean want_vision = towers ? (towers & LLM_MMPROJ_TOWER_VISION) != 0 : vision;
  const gboolean want_audio = towers ? (towers & LLM_MMPROJ_TOWER_AUDIO) != 0 : audio;
  if (!clip || (want_vision && !vision) || (want_audio && !audio) || !(vision || audio)) {
    g_autofree char *shown = arch ? llm_gguf_escape (arch, -1) : g_strdup ("none");
    const char *what = !clip || !(want_vision || want_audio) ? "a multimodal projector"
        : want_vision && !vision ? "a multimodal projector with a vision encoder"
        : "a multimodal projector with an audio encoder";
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "%s is not %s (architecture %s%s%s); give the mmproj file that comes with the model",
        path, what, shown, vision ? "" : ", no clip.has_vision_encoder",
        audio ? "" : ", no clip.has_audio_encoder");
    llm_mmproj_free (p);
    return NULL;
  }
  if ((want_vision && !read_vision (&r, &p->v))
      || (want_audio && !llm_mmproj_read_audio (&r, &p->a))) {
    llm_mmproj_free (p);
    return NULL;
  }
  p->has_vision = want_vision;
  p->has_audio = want_audio;
  return p;
}

LlmMmproj *
llm_mmproj_load (const char *path, GError **error)
{
  return load (path, 0, error);
}

LlmMmproj *
llm_mmproj_load_towers (const char *path, LlmMmprojTowers towers, GError **error)
{
  g_return_val_if_fail (towers != 0, NULL);
  return load (path, towers, error);
}

void
llm_mmproj_free (LlmMmproj *p)
{
  if (p == NULL)
    return;
  g_free (p->v.layers);
  g_free (p->a.layers);
  llm_gguf_free (p->gguf);
  g_free (p);
}

const LlmMmprojVision *
llm_mmproj_vision (const LlmMmproj *p)
{
  g_return_val_if_fail (p != NULL, NULL);
  return p->has_vision ? &p->v : NULL;
}

const LlmMmprojAudio *
llm_mmproj_audio (const LlmMmproj *p)
{
  g_return_val_if_fail (p != NULL, NULL);
  return p->has_audio ? &p->a : NULL;
}
