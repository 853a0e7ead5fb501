/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "audio-encoder.h"

#include <string.h>

#include "cpu/audio.h"
#include "encoder-blocks.h"

/* Ultravox's RMS norms (transformers' default, which llama.cpp fixes). */
#define ULTRAVOX_EPS 1e-6f
#define TAPS 3

/* The sizes the buffers are made of, for @n_frames mel frames giving
 * @n_pos encoder frames: rows of the widest thing any step holds. Sizes
 * from a checked file keep every product far from overflowing. */
typedef struct {
  gsize rows, wide, stacked_rows, stacked;
} Sizes;

static Sizes
sizes_of (const LlmMmprojAudio *a, gsize n_frames, gsize n_pos)
{
  const gsize e = a->n_embd;
  Sizes s;
  s.rows = MAX (n_frames, n_pos);
  s.stacked = e * a->stack_factor;
  s.stacked_rows = (n_pos + a->stack_factor - 1) / a->stack_factor;
  s.wide = MAX (MAX (TAPS * (gsize) a->n_mel, TAPS * e), MAX ((gsize) a->n_ff, s.stacked));
  s.wide = MAX (s.wide, MAX (2 * (gsize) a->n_proj_hidden, (gsize) a->n_out));
  return s;
}

/* The rows after the blocks to the language model's width. @x holds
 * @n rows of n_embd and room for the stacked rows' zero padding; @tmp
 * rows x wide. */
static void
project (const LlmMmprojAudio *a, const LlmCpuKernels *kern, float *x, gsize n, float *tmp,
    guint8 *act, float *out)
{
  const gsize e = a->n_embd, width = e * a->stack_factor;
  const gsize rows = (n + a->stack_factor - 1) / a->stack_factor;
  /* Stacking is a new view of the same time-major floats; the last row
   * is padded with zeros (Ultravox's StackAudioFrames, ggml_pad). */
  memset (x + n * e, 0, (rows * width - n * e) * sizeof *x);
  const gsize hidden = a->n_proj_hidden;
  switch (a->type) {
    case LLM_MMPROJ_ULTRAVOX:
      for (gsize r = 0; r < rows; r++)
        llm_cpu_rmsnorm (x + r * width, (const float *) a->norm_pre_w.t->data, x + r * width,
            width, ULTRAVOX_EPS);
      llm_encoder_linear (kern, &a->proj1_w, &a->proj1_b, x, rows, tmp, act);
      /* Row by row in place: row r's result lands at or below where its
       * inputs began, over rows already done. */
      for (gsize r = 0; r < rows; r++) {
        llm_cpu_swiglu_second_half (tmp + r * 2 * hidden, tmp + r * hidden, hidden);
        llm_cpu_rmsnorm (tmp + r * hidden, (const float *) a->norm_mid_w.t->data,
            tmp + r * hidden, hidden, ULTRAVOX_EPS);
      }
      llm_encoder_linear (kern, &a->proj2_w, &a->proj2_b, tmp, rows, out, act);
      break;
    case LLM_MMPROJ_VOXTRAL:
      llm_encoder_linear (kern, &a->proj1_w, &a->proj1_b, x, rows, tmp, act);
      llm_cpu_gelu_erf (tmp, rows * hidden);
      llm_encoder_linear (kern, &a->proj2_w, &a->proj2_b, tmp, rows, out, act);
      break;
    case LLM_MMPROJ_QWEN2A:
      llm_encoder_linear (kern, &a->proj1_w, &a->proj1_b, x, rows, out, act);
      break;
    default:
      g_assert_not_reached ();
  }
}

gboolean
llm_audio_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const float *mel,
    guint n_frames, float *out, guint *n_rows, GError **error)
{
  g_return_val_if_fail (p != NULL && kern != NULL && mel != NULL && out != NULL, FALSE);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  if (a == NULL) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "the projector file has no audio tower");
    return FALSE;
  }
  const guint n_tokens = llm_mmproj_audio_n_tokens (a, n_frames);
  if (n_tokens == 0) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "%u mel frames: the %s audio tower takes 1 to %u%s", n_frames,
        llm_mmproj_type_name (a->type), a->n_frames_max,
        a->avg_pool && n_frames > 0 && n_frames <= a->n_frames_max
        ? " and at least 3 for its pooling" : "");
    return FALSE;
  }
  const gsize e = a->n_embd, n_pos = llm_cpu_conv1d_out_len (n_frames, TAPS, 2, 1);
  const Sizes s = sizes_of (a, n_frames, n_pos);
  const gsize hd = e / a->n_head;
  const gsize att = llm_attention_batch_scratch_floats (n_pos, hd, n_pos);
  /* The convolutions' rows, their outputs (x with room for the stacked
   * rows' padding), h, q, k, v, tmp, the attention's scratch. */
  const gsize floats = s.rows * s.wide + s.rows * e + s.stacked_rows * s.stacked
      + 4 * n_pos * e + s.rows * s.wide + att;
  float *buf = g_try_new (float, floats);
  guint8 *act = g_try_malloc (llm_encoder_act_bytes (s.rows, s.wide));
  LlmAttnQuery *queries = g_try_new (LlmAttnQuery, n_pos);
  if (buf == NULL || act == NULL || queries == NULL) {
    g_free (buf);
    g_free (act);
    g_free (queries);
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_NOMEM,
        "out of memory for the audio encoder's %" G_GSIZE_FORMAT " floats", floats);
    return FALSE;
  }
  float *conv_rows = buf, *conv1 = conv_rows + s.rows * s.wide;
  float *x = conv1 + s.rows * e;
  float *h = x + MAX (s.stacked_rows * s.stacked, n_pos * e), *q = h + n_pos * e;
  float *k = q + n_pos * e, *v = k + n_pos * e, *tmp = v + n_pos * e;
  float *att_scratch = tmp + s.rows * s.wide;

  /* The stem: the mel bins (channel-major) at stride 1, then its output
   * (time-major) at stride 2. */
  llm_cpu_conv1d_rows (mel, a->n_mel, n_frames, 1, n_frames, TAPS, 1, 1, n_frames, conv_rows);
  llm_encoder_linear (kern, &a->conv1_w, &a->conv1_b, conv_rows, n_frames, conv1, act);
  llm_cpu_gelu_erf (conv1, n_frames * e);
  llm_cpu_conv1d_rows (conv1, e, n_frames, e, 1, TAPS, 2, 1, n_pos, conv_rows);
  llm_encoder_linear (kern, &a->conv2_w, &a->conv2_b, conv_rows, n_pos, x, act);
  llm_cpu_gelu_erf (x, n_pos * e);
  /* The first n_pos positions (Ultravox slices them for shorter input;
   * a 30 s window uses them all). */
  const float *pos = (const float *) a->pos_embd.t->data;
  for (gsize i = 0; i < n_pos * e; i++)
    x[i] += pos[i];
  if (a->pre_ln_w.t != NULL)
    llm_encoder_norm_rows (&a->pre_ln_w, &a->pre_ln_b, x, x, n_pos, e, a->eps);

  const LlmEncoderBuffers bufs = { h, q, k, v, tmp, att_scratch, queries, act };
  for (guint32 l = 0; l < a->n_layer; l++)
    llm_encoder_block (kern, &a->layers[l], x, n_pos, e, a->n_head, a->n_ff, a->eps,
        LLM_ENCODER_GELU_ERF, &bufs);

  gsize n = n_pos;
  if (a->avg_pool) {
    /* Qwen2-Audio pools before its post-layernorm. */
    llm_cpu_avg_pool_pairs (x, x, n, e);
    n /= 2;
  }
  llm_encoder_norm_rows (&a->post_ln_w, &a->post_ln_b, x, x, n, e, a->eps);
  project (a, kern, x, n, tmp, act, out);
  *n_rows = n_tokens;
  g_free (buf);
  g_free (act);
  g_free (queries);
  return TRUE;
}

guint
llm_audio_chunk_frames (const LlmMmprojAudio *a, gsize n_samples, gboolean pad_window)
{
  g_return_val_if_fail (a != NULL, 0);
  /* Frames whose centres fall in the chunk, as llm_audio_mel_frames_for. */
  const gsize covered = n_samples / a->hop + (n_samples % a->hop != 0);
  if (covered > a->n_frames_max)
    return 0;
  return pad_window ? a->n_frames_max : (guint) MIN (MAX (covered, 4), a->n_frames_max);
}

gboolean
llm_audio_encode_pcm (const LlmMmproj *p, const LlmCpuKernels *kern, LlmAudioMel *mel,
    const float *pcm, gsize n_samples, gboolean pad_window, float *out, guint *n_rows,
    GError **error)
{
  g_return_val_if_fail (p != NULL && mel != NULL, FALSE);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  if (a == NULL) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "the projector file has no audio tower");
    return FALSE;
  }
  const guint frames = llm_audio_chunk_frames (a, n_samples, pad_window);
  if (frames == 0) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "a chunk of %" G_GSIZE_FORMAT " samples is longer than the encoder's window of %u "
        "frames (%g s)", n_samples, a->n_frames_max,
        (double) a->n_frames_max * a->hop / a->sample_rate);
    return FALSE;
  }
  float *spec = g_try_new (float, (gsize) a->n_mel * frames);
  if (spec == NULL) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_NOMEM,
        "out of memory for a log-mel spectrogram of %u frames", frames);
    return FALSE;
  }
  const gboolean ok = llm_audio_mel_compute (mel, pcm, n_samples, frames, spec, error)
      && llm_audio_encode (p, kern, spec, frames, out, n_rows, error);
  g_free (spec);
  return ok;
}
