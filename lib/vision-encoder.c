/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tower as a textbook gives it, one backend call per stage over all
 * of the image's rows: patch embedding (one product of the gathered
 * patches), class and position embeddings, pre-norm; per layer norm,
 * Q/K/V, full attention, output, residual, norm, GELU feed-forward,
 * residual; post-norm; the projector. Only the pixels' normalisation and
 * the gathering of patches run on the host, before one upload. */
#include "vision-encoder.h"

#include <math.h>
#include <string.h>

#include "cpu/vision.h"
#include "encoder-weights.h"
#include "ggml-type.h"
#include "token-compress.h"
#include "workers.h"

struct _LlmVisionEncoder {
  const LlmMmprojVision *v;
  LlmVisionEncoderOptions opts;
  LlmWorkers *workers;
  LlmBackend *be;
  const LlmBackendOps *ops;
  char *backend_name;

  /* The weights as the backend holds them; NULL where the file has none. */
  LlmEncoderWeights weights;
  const LlmWeight *patch_w, *patch_b, *class_embd, *pos_embd;
  const LlmWeight *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b;
  const LlmWeight *proj0_w, *proj0_b, *proj2_w, *proj2_b;
  LlmEncoderLayer *layers;

  LlmAttnShape shape;
  gsize n, e, np, pk, hidden;   /* rows, width, patches, patch values, MLP width */

  /* Token merging (llm_vision_encoder_set_merge): rows folded per layer,
   * and the tokens left at the end; host copies of the rows it merges. */
  guint merge_r, n_tokens;
  float *merge_in, *merge_out, *merge_sizes, *merge_sizes_out;

  /* host */
  float *planes, *host_patches;
  /* backend buffers */
  float *patches, *x, *h, *qb, *kb, *vb, *att, *wide, *out;
};

void
llm_vision_encoder_options_init (LlmVisionEncoderOptions *opts)
{
  *opts = (LlmVisionEncoderOptions) {
    .n_threads = 0, .kernels = LLM_CPU_KERNELS_BEST, .class_order = LLM_VISION_CLASS_FIRST,
  };
}

/* --- weights --------------------------------------------------------- */

static gboolean
prepare_all (LlmVisionEncoder *enc, GError **error)
{
  const LlmMmprojVision *v = enc->v;
  llm_encoder_weights_init (&enc->weights, enc->be, 16 * v->n_layer + 12);
  enc->layers = g_new0 (LlmEncoderLayer, v->n_layer);
#define M(w) llm_encoder_weights_add (&enc->weights, &(w), FALSE)
#define V(w) llm_encoder_weights_add (&enc->weights, &(w), TRUE)
  enc->patch_w = M (v->patch_w);
  enc->patch_b = V (v->patch_b);
  enc->class_embd = V (v->class_embd);
  enc->pos_embd = V (v->pos_embd);
  enc->pre_ln_w = V (v->pre_ln_w);
  enc->pre_ln_b = V (v->pre_ln_b);
  enc->post_ln_w = V (v->post_ln_w);
  enc->post_ln_b = V (v->post_ln_b);
  enc->proj0_w = M (v->proj0_w);
  enc->proj0_b = V (v->proj0_b);
  enc->proj2_w = M (v->proj2_w);
  enc->proj2_b = V (v->proj2_b);
  /* Only the layers that run. */
  for (guint32 l = 0; l < v->n_layers_run; l++) {
    llm_encoder_weights_add_layer (&enc->weights, &v->layers[l], &enc->layers[l]);
  }
#undef M
#undef V
  return llm_encoder_weights_check (&enc->weights, error);
}

/* --- buffers --------------------------------------------------------- */

static gboolean
alloc_buffers (LlmVisionEncoder *enc, GError **error)
{
  const LlmMmprojVision *v = enc->v;
  const gsize n = enc->n, e = enc->e, sf2 = (gsize) v->scale_factor * v->scale_factor;
  const gsize wide = MAX (MAX (n * v->n_ff, enc->np * enc->hidden), (gsize) v->n_tokens * e
          * sf2);
  const gsize widest_in = MAX (MAX (enc->pk, e * sf2), MAX ((gsize) v->n_ff, enc->hidden));
  const gsize s = v->image_size;
  enc->planes = g_try_new (float, 3 * s * s);
  enc->host_patches = g_try_new (float, enc->np * enc->pk);
  if (enc->planes == NULL || enc->host_patches == NULL) {
    g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
        "out of memory for a %" G_GSIZE_FORMAT "-pixel image's planes and patches", s);
    return FALSE;
  }
  float **bufs[] = { &enc->x, &enc->h, &enc->qb, &enc->kb, &enc->vb, &enc->att };
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if ((*bufs[i] = enc->ops->alloc (enc->be, n * e * sizeof (float), error)) == NULL)
      return FALSE;
  return (enc->patches = enc->ops->alloc (enc->be, enc->np * enc->pk * sizeof (float), error))
      && (enc->wide = enc->ops->alloc (enc->be, wide * sizeof (float), error))
      && (enc->out = enc->ops->alloc (enc->be, (gsize) v->n_tokens * v->n_out * sizeof (float),
              error))
      && enc->ops->reserve (enc->be, (guint) n, widest_in, 0, NULL, error)
      && enc->ops->reserve_attention_full (enc->be, (guint) n, &enc->shape, error);
}

/* --- making one ------------------------------------------------------ */

LlmVisionEncoder *
llm_vision_encoder_new (const LlmMmproj *p, int n_threads, GError **error)
{
  LlmVisionEncoderOptions opts;
  llm_vision_encoder_options_init (&opts);
  opts.n_threads = n_threads;
  return llm_vision_encoder_new_with (p, &opts, error);
}

LlmVisionEncoder *
llm_vision_encoder_new_with (const LlmMmproj *p, const LlmVisionEncoderOptions *opts,
    GError **error)
{
  g_return_val_if_fail (p != NULL, NULL);
  if (llm_mmproj_vision (p) == NULL) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "the projector file has no vision tower (clip.has_vision_encoder)");
    return NULL;
  }
  LlmVisionEncoder *enc = g_new0 (LlmVisionEncoder, 1);
  if (opts != NULL)
    enc->opts = *opts;
  else
    llm_vision_encoder_options_init (&enc->opts);
  const LlmMmprojVision *v = enc->v = llm_mmproj_vision (p);
  enc->n = v->n_positions;
  enc->e = v->n_embd;
  enc->np = v->n_patches;
  enc->pk = 3 * (gsize) v->patch_size * v->patch_size;
  enc->hidden = v->type == LLM_MMPROJ_MLP ? v->proj0_w.t->ne[1] : 0;
  enc->n_tokens = v->n_tokens;
  enc->shape = (LlmAttnShape) {
    .n_head = v->n_head, .n_head_kv = v->n_head, .head_dim = v->n_embd / v->n_head,
    .scale = 1.0f / sqrtf ((float) (v->n_embd / v->n_head)),
  };

  if (!llm_encoder_backend_open (enc->opts.n_threads, enc->opts.kernels, &enc->workers,
          &enc->be, &enc->backend_name, error)) {
    llm_vision_encoder_free (enc);
    return NULL;
  }
  enc->ops = enc->be->ops;
  if (!prepare_all (enc, error) || !alloc_buffers (enc, error)) {
    llm_vision_encoder_free (enc);
    return NULL;
  }
  return enc;
}

void
llm_vision_encoder_free (LlmVisionEncoder *enc)
{
  if (enc == NULL)
    return;
  if (enc->be != NULL) {
    llm_encoder_weights_clear (&enc->weights);
    float *bufs[] = { enc->patches, enc->x, enc->h, enc->qb, enc->kb, enc->vb, enc->att,
      enc->wide, enc->out };
    for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
      if (bufs[i] != NULL)
        enc->ops->free (enc->be, bufs[i]);
    llm_backend_unref (enc->be);
  }
  llm_workers_unref (enc->workers);
  g_free (enc->layers);
  g_free (enc->planes);
  g_free (enc->host_patches);
  g_free (enc->merge_in);
  g_free (enc->merge_out);
  g_free (enc->merge_sizes);
  g_free (enc->merge_sizes_out);
  g_free (enc->backend_name);
  g_free (enc);
}

guint
llm_vision_encoder_n_tokens (const LlmVisionEncoder *enc)
{
  return enc->n_tokens;
}

guint
llm_vision_encoder_n_out (const LlmVisionEncoder *enc)
{
  return enc->v->n_out;
}

guint
llm_vision_encoder_image_size (const LlmVisionEncoder *enc)
{
  return enc->v->image_size;
}

int
llm_vision_encoder_n_threads (const LlmVisionEncoder *enc)
{
  return llm_workers_n_threads (enc->workers);
}

const char *
llm_vision_encoder_backend_name (const LlmVisionEncoder *enc)
{
  return enc->backend_name;
}

/* --- the forward pass ------------------------------------------------ */

/* y = x W (+ b) for @n rows. */
static void
linear (LlmVisionEncoder *enc, LlmBackendQueue *q, const float *x, guint n, const LlmWeight *w,
    const LlmWeight *b, float *y)
{
  enc->ops->matmul (enc->be, q, x, n, &w, &y, 1);
  if (b != NULL)
    enc->ops->add_bias (enc->be, q, y, b, n);
}

/* The image's rows (after the class row, if any) to the LM's tokens. */
static void
project (LlmVisionEncoder *enc, LlmBackendQueue *q, const float *image)
{
  const LlmMmprojVision *v = enc->v;
  const gsize e = enc->e;
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    /* The pixel shuffle: scale^2 neighbouring patches become one row. */
    const gsize side = v->image_size / v->patch_size, sf2 = (gsize) v->scale_factor
        * v->scale_factor;
    for (gsize t = 0; t < v->n_tokens; t++)
      for (gsize slot = 0; slot < sf2; slot++) {
        const long src = llm_cpu_pixel_shuffle_source (side, side, v->scale_factor, t, slot);
        /* Never -1: the loader checked that the grid divides by the scale. */
        if (src >= 0)
          enc->ops->copy (enc->be, q, enc->wide + (t * sf2 + slot) * e, image + src * e,
            e * sizeof (float));
      }
    linear (enc, q, enc->wide, v->n_tokens, enc->proj0_w, enc->proj0_b, enc->out);
    return;
  }
  const guint np = enc->n_tokens;
  linear (enc, q, image, np, enc->proj0_w, enc->proj0_b, enc->wide);
  enc->ops->gelu (enc->be, q, enc->wide, np, enc->hidden, LLM_GELU_TANH);
  linear (enc, q, enc->wide, np, enc->proj2_w, enc->proj2_b, enc->out);
}

/* Token merging between layers (ToMe): the image rows after the class
 * row are paired by similarity and the most similar fold into
 * size-weighted averages (lib/token-compress.h), merge_r of them after
 * each layer, so every later layer runs on fewer rows. The rows go to the
 * host and back for it: a few hundred KB a layer against the layer's
 * hundreds of MFLOP. The matching uses the rows themselves, not ToMe's
 * attention keys, and attention does not weight merged rows by their
 * size (ToMe's proportional attention). */
static void
merge_rows (LlmVisionEncoder *enc, LlmBackendQueue *q, gsize first)
{
  const gsize e = enc->e, rows = enc->n - first;
  const guint fold = MIN (enc->merge_r, (guint) (rows / 2));
  if (fold == 0)
    return;
  enc->ops->download (enc->be, q, enc->merge_in, enc->x + first * e, rows * e * sizeof (float));
  enc->ops->sync (enc->be, q);
  guint kept = 0;
  /* Never fails: the sizes are positive and the width is not 0. */
  llm_token_merge (enc->merge_in, (guint) rows, (guint) e, enc->merge_sizes,
      (guint) rows - fold, enc->merge_out, enc->merge_sizes_out, NULL, &kept, NULL);
  memcpy (enc->merge_sizes, enc->merge_sizes_out, kept * sizeof (float));
  enc->ops->upload (enc->be, q, enc->x + first * e, enc->merge_out, kept * e * sizeof (float));
  enc->n = first + kept;
}

gboolean
llm_vision_encoder_set_merge (LlmVisionEncoder *enc, double kept, GError **error)
{
  const LlmMmprojVision *v = enc->v;
  if (!(kept > 0 && kept <= 1)) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_INVALID,
        "the kept fraction of tokens must be in (0, 1], not %g", kept);
    return FALSE;
  }
  if (kept < 1 && v->type != LLM_MMPROJ_MLP) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_UNSUPPORTED,
        "token merging needs a tower whose tokens are projected one by one (mlp); a %s "
        "tower's pixel shuffle needs the whole grid", llm_mmproj_type_name (v->type));
    return FALSE;
  }
  const gsize np = enc->np;
  const guint layers = MAX (v->n_layers_run, 1);
  enc->merge_r = kept < 1 ? (guint) ceil ((double) np * (1 - kept) / layers) : 0;
  guint rows = (guint) np;
  for (guint l = 0; l < v->n_layers_run && enc->merge_r > 0; l++)
    rows -= MIN (enc->merge_r, rows / 2);
  enc->n_tokens = enc->merge_r > 0 ? rows : v->n_tokens;
  if (enc->merge_r > 0 && enc->merge_in == NULL) {
    enc->merge_in = g_try_new (float, np * enc->e);
    enc->merge_out = g_try_new (float, np * enc->e);
    enc->merge_sizes = g_try_new (float, np);
    enc->merge_sizes_out = g_try_new (float, np);
    if (!enc->merge_in || !enc->merge_out || !enc->merge_sizes || !enc->merge_sizes_out) {
      enc->merge_r = 0;
      enc->n_tokens = v->n_tokens;
      g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
          "out of memory for merging %" G_GSIZE_FORMAT " rows", np);
      return FALSE;
    }
  }
  return TRUE;
}

gboolean
llm_vision_encoder_encode (LlmVisionEncoder *enc, const guint8 *rgb, gsize stride, float *out,
    GError **error)
{
  g_return_val_if_fail (enc != NULL && rgb != NULL && out != NULL, FALSE);
  const LlmMmprojVision *v = enc->v;
  const LlmBackendOps *ops = enc->ops;
  LlmBackend *be = enc->be;
  const gsize s = v->image_size, e = enc->e, np = enc->np;
  const guint n = (guint) enc->n;
  (void) error;

  /* The worker pool, and with it this encoder's scratch, is ours until
   * the end. */
  LlmThreadPool *pool = llm_workers_lock (enc->workers);
  LlmBackendQueue *q = llm_backend_cpu_queue (pool);

  if (enc->merge_r > 0)
    for (gsize i = 0; i < np; i++)
      enc->merge_sizes[i] = 1.0f;
  llm_cpu_image_normalize (rgb, s, s, stride, v->image_mean, v->image_std, enc->planes);
  llm_cpu_image_patches (enc->planes, s, s, v->patch_size, enc->host_patches);
  ops->upload (be, q, enc->patches, enc->host_patches, np * enc->pk * sizeof (float));

  /* Hugging Face's CLIP: the class row first, then the patches. */
  const gsize first = enc->class_embd != NULL;
  const gboolean cls_last = enc->opts.class_order == LLM_VISION_CLASS_AS_LLAMA_CPP;
  linear (enc, q, enc->patches, (guint) np, enc->patch_w, enc->patch_b,
      enc->x + (first && !cls_last) * e);
  if (first)
    ops->copy (be, q, enc->x + (cls_last ? np : 0) * e, enc->class_embd->data,
        e * sizeof (float));
  ops->add (be, q, enc->x, enc->pos_embd->data, n, e);
  if (enc->pre_ln_w != NULL)
    ops->layernorm (be, q, enc->x, enc->pre_ln_w, enc->pre_ln_b, enc->x, n, e, v->eps);

  for (guint32 l = 0; l < v->n_layers_run; l++) {
    const LlmEncoderRows rows = { enc->x, enc->h, enc->qb, enc->kb, enc->vb, enc->att,
      enc->wide };
    llm_encoder_block (be, q, &enc->layers[l], &rows, &enc->shape, (guint) enc->n, e, v->n_ff,
        v->eps, v->gelu ? LLM_GELU_TANH : LLM_GELU_QUICK);
    if (enc->merge_r > 0)
      merge_rows (enc, q, first);
  }
  if (enc->post_ln_w != NULL && v->n_layers_run == v->n_layer)
    ops->layernorm (be, q, enc->x, enc->post_ln_w, enc->post_ln_b, enc->x, (guint) enc->n, e,
        v->eps);
  enc->n = n;

  /* The class row is not an image token; llama.cpp's graph drops row 0
   * whatever it holds. */
  project (enc, q, enc->x + first * e);
  ops->download (be, q, out, enc->out, (gsize) enc->n_tokens * v->n_out * sizeof (float));
  ops->sync (be, q);

  llm_threadpool_rest (pool);
  llm_workers_unlock (enc->workers);
  return TRUE;
}

/* --- one image, one thread ------------------------------------------- */

static gboolean
encode_once (const LlmMmproj *p, const LlmCpuKernels *kern, LlmVisionClassOrder order,
    const guint8 *rgb, gsize stride, float *out, GError **error)
{
  static const LlmCpuKernelChoice by_isa[LLM_CPU_N_ISA] = {
    [LLM_CPU_ISA_SCALAR] = LLM_CPU_KERNELS_SCALAR,
    [LLM_CPU_ISA_AVX2] = LLM_CPU_KERNELS_AVX2,
    [LLM_CPU_ISA_AVX512] = LLM_CPU_KERNELS_AVX512,
  };
  LlmVisionEncoderOptions opts;
  llm_vision_encoder_options_init (&opts);
  opts.n_threads = 1;
  opts.kernels = by_isa[llm_cpu_kernels_isa (kern)];
  opts.class_order = order;
  g_autoptr (LlmVisionEncoder) enc = llm_vision_encoder_new_with (p, &opts, error);
  return enc != NULL && llm_vision_encoder_encode (enc, rgb, stride, out, error);
}

gboolean
llm_vision_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const guint8 *rgb,
    gsize stride, float *out, GError **error)
{
  return encode_once (p, kern, LLM_VISION_CLASS_FIRST, rgb, stride, out, error);
}

gboolean
llm_vision_encode_as_llama_cpp (const LlmMmproj *p, const LlmCpuKernels *kern,
    const guint8 *rgb, gsize stride, float *out, GError **error)
{
  return encode_once (p, kern, LLM_VISION_CLASS_AS_LLAMA_CPP, rgb, stride, out, error);
}
