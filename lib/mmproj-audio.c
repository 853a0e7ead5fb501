/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audio tower of an mmproj file: Whisper's encoder under the names
 * llama.cpp's converter gives it (a.conv1d.N, a.position_embd, a.blk.N.*,
 * a.post_ln) and one of the projectors read today (mm.a.*). */
#include <string.h>

#include "mmproj-reader.h"

/* Whisper's front end: llama.cpp fixes it for these projector types
 * instead of reading it from the file, and so does this. */
#define SAMPLE_RATE 16000u
#define N_FFT 400u
#define HOP 160u
/* llama.cpp's limit on clip.audio.num_mel_bins. */
#define MAX_MEL 256u
/* Whisper's stem: both convolutions have 3 taps (one frame either side). */
#define CONV_TAPS 3u
#define MAX_STACK 64u

guint
llm_mmproj_audio_n_tokens (const LlmMmprojAudio *a, guint n_frames)
{
  g_return_val_if_fail (a != NULL, 0);
  if (n_frames == 0 || n_frames > a->n_frames_max)
    return 0;
  /* Stride 2, one frame of padding either side, 3 taps. */
  guint n = (n_frames - 1) / 2 + 1;
  if (a->avg_pool)
    n /= 2;
  return (n + a->stack_factor - 1) / a->stack_factor;
}

static gboolean
read_type (LlmMmprojReader *r, LlmMmprojType *type)
{
  g_autofree char *name = llm_mmproj_get_type_name (r, "audio");
  if (name == NULL)
    return FALSE;
  static const struct {
    const char *name;
    LlmMmprojType type;
  } known[] = {
    { "ultravox", LLM_MMPROJ_ULTRAVOX },
    { "qwen2a", LLM_MMPROJ_QWEN2A },
    { "voxtral", LLM_MMPROJ_VOXTRAL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (known); i++)
    if (strcmp (name, known[i].name) == 0) {
      *type = known[i].type;
      return TRUE;
    }
  g_autofree char *shown = llm_gguf_escape (name, -1);
  g_set_error (r->error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_UNSUPPORTED,
      "%s: audio projector type \"%s\" is not supported; gst-llm reads ultravox (Ultravox), "
      "qwen2a (Qwen2-Audio) and voxtral (Voxtral)", r->path, shown);
  return FALSE;
}

static gboolean
read_sizes (LlmMmprojReader *r, LlmMmprojAudio *a)
{
  if (!llm_mmproj_get_size (r, "clip.audio.embedding_length", LLM_MMPROJ_MAX_DIM, &a->n_embd)
      || !llm_mmproj_get_size (r, "clip.audio.attention.head_count", LLM_MMPROJ_MAX_DIM,
          &a->n_head)
      || !llm_mmproj_get_size (r, "clip.audio.feed_forward_length", LLM_MMPROJ_MAX_DIM,
          &a->n_ff)
      || !llm_mmproj_get_size (r, "clip.audio.block_count", LLM_MMPROJ_MAX_LAYERS, &a->n_layer)
      || !llm_mmproj_get_size (r, "clip.audio.num_mel_bins", MAX_MEL, &a->n_mel)
      /* Whisper's LayerNorm default, which the converter writes when the
       * model's config names none. */
      || !llm_mmproj_get_eps (r, "clip.audio.attention.layer_norm_epsilon", 1e-5, &a->eps))
    return FALSE;
  if (a->n_embd % a->n_head != 0)
    return llm_mmproj_invalid (r, "audio embedding length %u is not a multiple of the %u heads",
        a->n_embd, a->n_head);
  a->sample_rate = SAMPLE_RATE;
  a->n_fft = N_FFT;
  a->hop = HOP;
  a->stack_factor = 1;
  a->avg_pool = a->type == LLM_MMPROJ_QWEN2A;
  /* Ultravox and Voxtral cannot run without it (llama.cpp requires it
   * too); Qwen2-Audio does not stack. */
  if (a->type != LLM_MMPROJ_QWEN2A
      && !llm_mmproj_get_size (r, "clip.audio.projector.stack_factor", MAX_STACK,
          &a->stack_factor))
    return FALSE;
  return TRUE;
}

static gboolean
read_tower (LlmMmprojReader *r, LlmMmprojAudio *a)
{
  const guint64 e = a->n_embd;
  guint64 conv1_ne[3] = { CONV_TAPS, a->n_mel, e }, conv2_ne[3] = { CONV_TAPS, e, e };
  /* The converter writes the biases as [1, n_embd] (one value per output
   * channel, broadcast along time). */
  guint64 bias1_ne[2] = { 1, e }, bias2_ne[2] = { 1, e }, pos_ne[2] = { e, 0 };
  if (!llm_mmproj_get_tensor (r, "a.conv1d.1.weight", TRUE, 3, conv1_ne, &a->conv1_w)
      || !llm_mmproj_get_f32 (r, "a.conv1d.1.bias", TRUE, 2, bias1_ne, &a->conv1_b)
      || !llm_mmproj_get_tensor (r, "a.conv1d.2.weight", TRUE, 3, conv2_ne, &a->conv2_w)
      || !llm_mmproj_get_f32 (r, "a.conv1d.2.bias", TRUE, 2, bias2_ne, &a->conv2_b)
      /* Added as floats; the converter keeps it F32. */
      || !llm_mmproj_get_f32 (r, "a.position_embd.weight", TRUE, 2, pos_ne, &a->pos_embd)
      || !llm_mmproj_get_norm (r, "a.pre_ln", FALSE, e, &a->pre_ln_w, &a->pre_ln_b)
      || !llm_mmproj_get_norm (r, "a.post_ln", TRUE, e, &a->post_ln_w, &a->post_ln_b))
    return FALSE;
  a->n_positions = (guint32) pos_ne[1];
  a->n_frames_max = 2 * a->n_positions;
  return llm_mmproj_get_layers (r, "a", a->n_layer, a->n_embd, a->n_ff, &a->layers);
}

static gboolean
read_projector (LlmMmprojReader *r, LlmMmprojAudio *a)
{
  const guint64 stacked = (guint64) a->n_embd * a->stack_factor;
  guint64 hidden = 0, out = 0;
  switch (a->type) {
    case LLM_MMPROJ_ULTRAVOX:
      /* RMS norm, mm.a.mlp.1 to twice the hidden width, SwiGLU halves it,
       * RMS norm, mm.a.mlp.2. */
      if (!llm_mmproj_get_vector (r, "mm.a.norm_pre.weight", TRUE, stacked, &a->norm_pre_w)
          || !llm_mmproj_get_matrix (r, "mm.a.mlp.1.weight", stacked, &hidden, &a->proj1_w))
        return FALSE;
      if (hidden % 2 != 0)
        return llm_mmproj_invalid (r, "mm.a.mlp.1.weight has %" G_GUINT64_FORMAT " outputs, "
            "which SwiGLU cannot halve", hidden);
      hidden /= 2;
      if (!llm_mmproj_get_vector (r, "mm.a.norm_mid.weight", TRUE, hidden, &a->norm_mid_w)
          || !llm_mmproj_get_matrix (r, "mm.a.mlp.2.weight", hidden, &out, &a->proj2_w))
        return FALSE;
      break;
    case LLM_MMPROJ_VOXTRAL:
      if (!llm_mmproj_get_matrix (r, "mm.a.mlp.1.weight", stacked, &hidden, &a->proj1_w)
          || !llm_mmproj_get_matrix (r, "mm.a.mlp.2.weight", hidden, &out, &a->proj2_w))
        return FALSE;
      break;
    case LLM_MMPROJ_QWEN2A:
      if (!llm_mmproj_get_matrix (r, "mm.a.fc.weight", a->n_embd, &out, &a->proj1_w))
        return FALSE;
      if (!llm_mmproj_get_vector (r, "mm.a.fc.bias", TRUE, out, &a->proj1_b))
        return FALSE;
      break;
    default:
      g_assert_not_reached ();
  }
  a->n_proj_hidden = (guint32) hidden;
  a->n_out = (guint32) out;
  return TRUE;
}

gboolean
llm_mmproj_read_audio (LlmMmprojReader *r, LlmMmprojAudio *a)
{
  return read_type (r, &a->type) && read_sizes (r, a) && read_tower (r, a)
      && read_projector (r, a);
}
