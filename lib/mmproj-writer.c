/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "mmproj-writer.h"

#include <string.h>

#include "ggml-type.h"
#include "gguf-writer.h"

void
llm_mmproj_shape_smolvlm (LlmMmprojShape *s, guint n_out)
{
  *s = (LlmMmprojShape) { "idefics3", 512, 16, 768, 3072, 12, 12, n_out, 4, FALSE, NULL, NULL,
    2048 };
}

void
llm_mmproj_shape_llava (LlmMmprojShape *s, guint n_out)
{
  *s = (LlmMmprojShape) { "mlp", 336, 14, 1024, 4096, 24, 16, n_out, 0, TRUE, NULL, NULL, 0 };
}

void
llm_mmproj_shape_whisper_tiny_ultravox (LlmMmprojAudioShape *s, guint n_out)
{
  *s = (LlmMmprojAudioShape) { "ultravox", 80, 384, 1536, 4, 6, 1500, n_out, 8, n_out, NULL,
    NULL };
}

void
llm_mmproj_shape_whisper_base_ultravox (LlmMmprojAudioShape *s, guint n_out)
{
  *s = (LlmMmprojAudioShape) { "ultravox", 80, 512, 2048, 6, 8, 1500, n_out, 8, n_out, NULL,
    NULL };
}

void
llm_mmproj_shape_whisper_small_ultravox (LlmMmprojAudioShape *s, guint n_out)
{
  *s = (LlmMmprojAudioShape) { "ultravox", 80, 768, 3072, 12, 12, 1500, n_out, 8, n_out, NULL,
    NULL };
}

void
llm_mmproj_shape_audio_tiny (LlmMmprojAudioShape *s, const char *type, guint n_out)
{
  const gboolean qwen2a = g_strcmp0 (type, "qwen2a") == 0;
  const guint stack = qwen2a ? 0 : g_strcmp0 (type, "voxtral") == 0 ? 4 : 8;
  *s = (LlmMmprojAudioShape) { type, 80, 64, 128, 2, 4, 1500, n_out, stack, qwen2a ? 0 : 40,
    NULL, NULL };
}

typedef struct {
  LlmGgufWriter *w;
  const char *drop, *widen;
  guint64 rng;
  GError **error;
  gboolean ok;
} Writer;

/* splitmix64, uniform in [-1, 1): the draws of the tests' generator, so
 * the golden files made from its weights stay valid. */
static float
draw (Writer *wr)
{
  guint64 z = (wr->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float) ((double) (z >> 11) / (double) (1ull << 53) * 2.0 - 1.0);
}

static gboolean
is (const char *name, const char *which)
{
  return which != NULL && strcmp (name, which) == 0;
}

static void
add (Writer *wr, const char *name, guint n_dims, guint64 ne0, guint64 ne1, guint64 ne2,
    guint64 ne3, guint32 type)
{
  if (!wr->ok || is (name, wr->drop))
    return;
  guint64 ne[4] = { ne0, ne1, ne2, ne3 };
  if (is (name, wr->widen))
    ne[n_dims - 1]++;
  guint64 n = 1;
  for (guint d = 0; d < n_dims; d++)
    n *= ne[d];
  float *v = g_try_new (float, n);
  if (v == NULL) {
    g_set_error (wr->error, G_FILE_ERROR, G_FILE_ERROR_NOMEM, "no memory for %s", name);
    wr->ok = FALSE;
    return;
  }
  for (guint64 i = 0; i < n; i++)
    v[i] = draw (wr) * 0.05f;
  wr->ok = llm_gguf_writer_add_tensor_from_f32 (wr->w, name, type, n_dims, ne, v, wr->error);
  g_free (v);
}

/* The pre-norm blocks @tower.blk.L.*; @k_bias: whether attn_k has one. */
static void
add_blocks (Writer *wr, const char *tower, guint n_layer, guint e, guint n_ff, gboolean k_bias)
{
  for (guint l = 0; l < n_layer; l++) {
    static const char *const square[] = { "attn_q", "attn_k", "attn_v", "attn_out" };
    char name[64];
#define T(fmt, ...) (g_snprintf (name, sizeof name, fmt, __VA_ARGS__), name)
    for (guint i = 0; i < G_N_ELEMENTS (square); i++) {
      add (wr, T ("%s.blk.%u.%s.weight", tower, l, square[i]), 2, e, e, 1, 1, LLM_TYPE_F16);
      if (k_bias || i != 1)
        add (wr, T ("%s.blk.%u.%s.bias", tower, l, square[i]), 1, e, 1, 1, 1, LLM_TYPE_F32);
    }
    for (guint n = 1; n <= 2; n++) {
      add (wr, T ("%s.blk.%u.ln%u.weight", tower, l, n), 1, e, 1, 1, 1, LLM_TYPE_F32);
      add (wr, T ("%s.blk.%u.ln%u.bias", tower, l, n), 1, e, 1, 1, 1, LLM_TYPE_F32);
    }
    add (wr, T ("%s.blk.%u.ffn_up.weight", tower, l), 2, e, n_ff, 1, 1, LLM_TYPE_F16);
    add (wr, T ("%s.blk.%u.ffn_up.bias", tower, l), 1, n_ff, 1, 1, 1, LLM_TYPE_F32);
    add (wr, T ("%s.blk.%u.ffn_down.weight", tower, l), 2, n_ff, e, 1, 1, LLM_TYPE_F16);
    add (wr, T ("%s.blk.%u.ffn_down.bias", tower, l), 1, e, 1, 1, 1, LLM_TYPE_F32);
#undef T
  }
}

static void
write_vision (Writer *wr, const LlmMmprojShape *s, const char *type_key)
{
  LlmGgufWriter *w = wr->w;
  wr->drop = s->drop;
  wr->widen = s->widen;
  llm_gguf_writer_add_bool (w, "clip.has_vision_encoder", TRUE);
  llm_gguf_writer_add_string (w, type_key, s->type);
  llm_gguf_writer_add_uint32 (w, "clip.vision.image_size", s->image);
  llm_gguf_writer_add_uint32 (w, "clip.vision.patch_size", s->patch);
  llm_gguf_writer_add_uint32 (w, "clip.vision.embedding_length", s->n_embd);
  llm_gguf_writer_add_uint32 (w, "clip.vision.feed_forward_length", s->n_ff);
  llm_gguf_writer_add_uint32 (w, "clip.vision.block_count", s->n_layer);
  llm_gguf_writer_add_uint32 (w, "clip.vision.attention.head_count", s->n_head);
  llm_gguf_writer_add_float32 (w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
  llm_gguf_writer_add_uint32 (w, "clip.vision.projection_dim", s->n_out);
  const float mean[3] = { 0.5f, 0.5f, 0.5f }, std[3] = { 0.5f, 0.5f, 0.5f };
  llm_gguf_writer_add_array (w, "clip.vision.image_mean", LLM_GGUF_FLOAT32, mean, 3);
  llm_gguf_writer_add_array (w, "clip.vision.image_std", LLM_GGUF_FLOAT32, std, 3);
  if (s->scale > 0) {
    llm_gguf_writer_add_uint32 (w, "clip.vision.projector.scale_factor", s->scale);
    if (s->longest_edge > 0)
      llm_gguf_writer_add_uint32 (w, "clip.vision.preproc_image_size", s->longest_edge);
    /* SigLIP's GELU; CLIP's quick GELU is what an absent key means. */
    llm_gguf_writer_add_bool (w, "clip.use_gelu", TRUE);
  }

  const guint e = s->n_embd, side = s->image / MAX (s->patch, 1);
  const guint n_pos = side * side + (s->class_embd ? 1 : 0);
  add (wr, "v.patch_embd.weight", 4, s->patch, s->patch, 3, e, LLM_TYPE_F16);
  add (wr, "v.patch_embd.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  if (s->class_embd) {
    add (wr, "v.class_embd", 1, e, 1, 1, 1, LLM_TYPE_F32);
    add (wr, "v.pre_ln.weight", 1, e, 1, 1, 1, LLM_TYPE_F32);
    add (wr, "v.pre_ln.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  } else {
    add (wr, "v.post_ln.weight", 1, e, 1, 1, 1, LLM_TYPE_F32);
    add (wr, "v.post_ln.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  }
  add (wr, "v.position_embd.weight", 2, e, n_pos, 1, 1, LLM_TYPE_F32);
  add_blocks (wr, "v", s->n_layer, e, s->n_ff, TRUE);
  if (s->scale > 0) {
    add (wr, "mm.model.fc.weight", 2, (guint64) e * s->scale * s->scale, s->n_out, 1, 1,
        LLM_TYPE_F16);
  } else {
    add (wr, "mm.0.weight", 2, e, s->n_out, 1, 1, LLM_TYPE_F16);
    add (wr, "mm.0.bias", 1, s->n_out, 1, 1, 1, LLM_TYPE_F32);
    add (wr, "mm.2.weight", 2, s->n_out, s->n_out, 1, 1, LLM_TYPE_F16);
    add (wr, "mm.2.bias", 1, s->n_out, 1, 1, 1, LLM_TYPE_F32);
  }
}

static void
write_audio (Writer *wr, const LlmMmprojAudioShape *s, const char *type_key)
{
  LlmGgufWriter *w = wr->w;
  wr->drop = s->drop;
  wr->widen = s->widen;
  llm_gguf_writer_add_bool (w, "clip.has_audio_encoder", TRUE);
  llm_gguf_writer_add_string (w, type_key, s->type);
  llm_gguf_writer_add_uint32 (w, "clip.audio.num_mel_bins", s->n_mel);
  llm_gguf_writer_add_uint32 (w, "clip.audio.embedding_length", s->n_embd);
  llm_gguf_writer_add_uint32 (w, "clip.audio.feed_forward_length", s->n_ff);
  llm_gguf_writer_add_uint32 (w, "clip.audio.block_count", s->n_layer);
  llm_gguf_writer_add_uint32 (w, "clip.audio.attention.head_count", s->n_head);
  llm_gguf_writer_add_float32 (w, "clip.audio.attention.layer_norm_epsilon", 1e-5f);
  llm_gguf_writer_add_uint32 (w, "clip.audio.projection_dim", s->n_out);
  if (s->stack > 0)
    llm_gguf_writer_add_uint32 (w, "clip.audio.projector.stack_factor", s->stack);

  const guint e = s->n_embd;
  /* Kernels [taps, in, out]; biases [1, out], as the converter writes them. */
  add (wr, "a.conv1d.1.weight", 3, 3, s->n_mel, e, 1, LLM_TYPE_F16);
  add (wr, "a.conv1d.1.bias", 2, 1, e, 1, 1, LLM_TYPE_F32);
  add (wr, "a.conv1d.2.weight", 3, 3, e, e, 1, LLM_TYPE_F16);
  add (wr, "a.conv1d.2.bias", 2, 1, e, 1, 1, LLM_TYPE_F32);
  add (wr, "a.position_embd.weight", 2, e, s->n_positions, 1, 1, LLM_TYPE_F32);
  /* Whisper's key projection has no bias. */
  add_blocks (wr, "a", s->n_layer, e, s->n_ff, FALSE);
  add (wr, "a.post_ln.weight", 1, e, 1, 1, 1, LLM_TYPE_F32);
  add (wr, "a.post_ln.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  const guint64 stacked = (guint64) e * MAX (s->stack, 1);
  if (strcmp (s->type, "qwen2a") == 0) {
    add (wr, "mm.a.fc.weight", 2, e, s->n_out, 1, 1, LLM_TYPE_F16);
    add (wr, "mm.a.fc.bias", 1, s->n_out, 1, 1, 1, LLM_TYPE_F32);
  } else if (strcmp (s->type, "voxtral") == 0) {
    add (wr, "mm.a.mlp.1.weight", 2, stacked, s->n_proj_hidden, 1, 1, LLM_TYPE_F16);
    add (wr, "mm.a.mlp.2.weight", 2, s->n_proj_hidden, s->n_out, 1, 1, LLM_TYPE_F16);
  } else {
    /* ultravox, and any other name (tests of refused types). */
    add (wr, "mm.a.norm_pre.weight", 1, stacked, 1, 1, 1, LLM_TYPE_F32);
    add (wr, "mm.a.mlp.1.weight", 2, stacked, 2 * (guint64) s->n_proj_hidden, 1, 1,
        LLM_TYPE_F16);
    add (wr, "mm.a.norm_mid.weight", 1, s->n_proj_hidden, 1, 1, 1, LLM_TYPE_F32);
    add (wr, "mm.a.mlp.2.weight", 2, s->n_proj_hidden, s->n_out, 1, 1, LLM_TYPE_F16);
  }
}

gboolean
llm_mmproj_write_random_towers (const LlmMmprojShape *vision, const LlmMmprojAudioShape *audio,
    guint64 seed, const char *path, GError **error)
{
  g_return_val_if_fail (vision != NULL || audio != NULL, FALSE);
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  Writer wr = { w, NULL, NULL, seed, error, TRUE };
  const gboolean both = vision != NULL && audio != NULL;

  llm_gguf_writer_add_string (w, "general.architecture", "clip");
  if (vision != NULL)
    write_vision (&wr, vision, both ? "clip.vision.projector_type" : "clip.projector_type");
  if (audio != NULL)
    write_audio (&wr, audio, both ? "clip.audio.projector_type" : "clip.projector_type");
  return wr.ok && llm_gguf_writer_write_file (w, path, error);
}

gboolean
llm_mmproj_write_random (const LlmMmprojShape *s, guint64 seed, const char *path,
    GError **error)
{
  return llm_mmproj_write_random_towers (s, NULL, seed, path, error);
}
