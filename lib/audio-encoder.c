/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "audio-encoder.h"

#include <math.h>
#include <string.h>

#include "cpu/audio.h"
#include "encoder-weights.h"
#include "workers.h"

/* Ultravox's RMS norms (transformers' default, which llama.cpp fixes). */
#define ULTRAVOX_EPS 1e-6f
#define TAPS 3

struct _LlmAudioEncoder {
  const LlmMmprojAudio *a;
  LlmAudioEncoderOptions opts;
  LlmWorkers *workers;
  LlmBackend *be;
  const LlmBackendOps *ops;
  char *backend_name;

  /* The weights as the backend holds them; NULL where the file has none.
   * Ultravox's mm.a.mlp.1 is two: its first half (proj1_w) and the gate
   * (gate_w), so SwiGLU reads two row-major buffers. */
  LlmEncoderWeights weights;
  const LlmWeight *conv1_w, *conv1_b, *conv2_w, *conv2_b, *pos_embd;
  const LlmWeight *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b;
  const LlmWeight *norm_pre_w, *proj1_w, *proj1_b, *gate_w, *gate_b, *norm_mid_w;
  const LlmWeight *proj2_w, *proj2_b;
  LlmEncoderLayer *layers;

  LlmAttnShape shape;
  guint max_frames, max_pos, max_rows;  /* a whole window's */

  /* host: zeros for the stacked rows' padding */
  float *zeros;
  gsize n_zeros;
  /* backend buffers */
  float *mel, *x, *h, *qb, *kb, *vb, *att, *wide, *gate, *out;
};

void
llm_audio_encoder_options_init (LlmAudioEncoderOptions *opts)
{
  *opts = (LlmAudioEncoderOptions) { .n_threads = 0, .kernels = LLM_CPU_KERNELS_BEST };
}

/* --- weights --------------------------------------------------------- */

static gboolean
prepare_all (LlmAudioEncoder *enc, GError **error)
{
  const LlmMmprojAudio *a = enc->a;
  LlmEncoderWeights *w = &enc->weights;
  llm_encoder_weights_init (w, enc->be, 16 * a->n_layer + 20);
  enc->layers = g_new0 (LlmEncoderLayer, a->n_layer);
#define M(t) llm_encoder_weights_add (w, &(t), FALSE)
#define V(t) llm_encoder_weights_add (w, &(t), TRUE)
  enc->conv1_w = M (a->conv1_w);
  enc->conv1_b = V (a->conv1_b);
  enc->conv2_w = M (a->conv2_w);
  enc->conv2_b = V (a->conv2_b);
  enc->pos_embd = V (a->pos_embd);
  enc->pre_ln_w = V (a->pre_ln_w);
  enc->pre_ln_b = V (a->pre_ln_b);
  enc->post_ln_w = V (a->post_ln_w);
  enc->post_ln_b = V (a->post_ln_b);
  enc->norm_pre_w = V (a->norm_pre_w);
  enc->norm_mid_w = V (a->norm_mid_w);
  enc->proj2_w = M (a->proj2_w);
  enc->proj2_b = V (a->proj2_b);
  if (a->type == LLM_MMPROJ_ULTRAVOX) {
    /* SwiGLU's gate is the second half (ggml_swiglu_swapped). */
    const gsize hd = a->n_proj_hidden;
    enc->proj1_w = llm_encoder_weights_add_part (w, &a->proj1_w, FALSE, 0, hd);
    enc->gate_w = llm_encoder_weights_add_part (w, &a->proj1_w, FALSE, hd, hd);
    if (a->proj1_b.t != NULL) {
      enc->proj1_b = llm_encoder_weights_add_part (w, &a->proj1_b, TRUE, 0, hd);
      enc->gate_b = llm_encoder_weights_add_part (w, &a->proj1_b, TRUE, hd, hd);
    }
  } else {
    enc->proj1_w = M (a->proj1_w);
    enc->proj1_b = V (a->proj1_b);
  }
  for (guint32 l = 0; l < a->n_layer; l++) {
    llm_encoder_weights_add_layer (w, &a->layers[l], &enc->layers[l]);
  }
#undef M
#undef V
  return llm_encoder_weights_check (w, error);
}

/* --- buffers --------------------------------------------------------- */

/* Everything sized for a whole window, the most one encode takes, so
 * encodes of any length allocate nothing. Sizes from a checked file keep
 * every product far from overflowing. */
static gboolean
alloc_buffers (LlmAudioEncoder *enc, GError **error)
{
  const LlmMmprojAudio *a = enc->a;
  const gsize e = a->n_embd, nf = enc->max_frames, np = enc->max_pos;
  const gsize stacked = e * a->stack_factor;
  const gsize stacked_rows = (np + a->stack_factor - 1) / a->stack_factor;
  const gsize hidden = a->n_proj_hidden;
  /* The convolutions' rows of taps, the feed-forward, the projector's
   * hidden rows. */
  const gsize wide = MAX (MAX (nf * TAPS * a->n_mel, np * TAPS * e),
      MAX (np * a->n_ff, stacked_rows * MAX (hidden, (gsize) a->n_out)));
  /* The widest input any product reads. */
  const gsize widest_in = MAX (MAX (TAPS * (gsize) a->n_mel, TAPS * e),
      MAX (MAX ((gsize) a->n_ff, stacked), hidden));
  enc->n_zeros = stacked;
  enc->zeros = g_try_new0 (float, enc->n_zeros);
  if (enc->zeros == NULL) {
    g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
        "out of memory for the audio encoder's padding row");
    return FALSE;
  }
  const struct {
    float **buf;
    gsize floats;
  } bufs[] = {
    { &enc->mel, (gsize) a->n_mel * nf },
    /* The first convolution's output: a row per mel frame. */
    { &enc->h, nf * e },
    /* Stacking reads the last row padded with zeros. */
    { &enc->x, MAX (np * e, stacked_rows * stacked) },
    { &enc->qb, np * e }, { &enc->kb, np * e }, { &enc->vb, np * e }, { &enc->att, np * e },
    { &enc->wide, wide },
    { &enc->gate, MAX (stacked_rows * hidden, 1) },
    { &enc->out, (gsize) enc->max_rows * a->n_out },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if ((*bufs[i].buf = enc->ops->alloc (enc->be, bufs[i].floats * sizeof (float), error))
        == NULL)
      return FALSE;
  /* Only the first convolution's product has a row per mel frame; the
   * reserve keeps the larger of the two. */
  return enc->ops->reserve (enc->be, nf, TAPS * (gsize) a->n_mel, 0, NULL, error)
      && enc->ops->reserve (enc->be, (guint) MAX (np, stacked_rows), widest_in, 0, NULL, error)
      && enc->ops->reserve_attention_full (enc->be, enc->max_pos, &enc->shape, error);
}

/* --- making one ------------------------------------------------------ */

LlmAudioEncoder *
llm_audio_encoder_new (const LlmMmproj *p, int n_threads, GError **error)
{
  LlmAudioEncoderOptions opts;
  llm_audio_encoder_options_init (&opts);
  opts.n_threads = n_threads;
  return llm_audio_encoder_new_with (p, &opts, error);
}

LlmAudioEncoder *
llm_audio_encoder_new_with (const LlmMmproj *p, const LlmAudioEncoderOptions *opts,
    GError **error)
{
  g_return_val_if_fail (p != NULL, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  if (a == NULL) {
    g_set_error (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ,
        "the projector file has no audio tower");
    return NULL;
  }
  LlmAudioEncoder *enc = g_new0 (LlmAudioEncoder, 1);
  if (opts != NULL)
    enc->opts = *opts;
  else
    llm_audio_encoder_options_init (&enc->opts);
  enc->a = a;
  enc->max_frames = a->n_frames_max;
  enc->max_pos = (guint) llm_cpu_conv1d_out_len (a->n_frames_max, TAPS, 2, 1);
  enc->max_rows = llm_mmproj_audio_n_tokens (a, a->n_frames_max);
  const guint hd = a->n_embd / a->n_head;
  enc->shape = (LlmAttnShape) {
    .n_head = a->n_head, .n_head_kv = a->n_head, .head_dim = hd,
    .scale = 1.0f / sqrtf ((float) hd),
  };

  if (!llm_encoder_backend_open (enc->opts.n_threads, enc->opts.kernels, &enc->workers,
          &enc->be, &enc->backend_name, error)) {
    llm_audio_encoder_free (enc);
    return NULL;
  }
  enc->ops = enc->be->ops;
  if (!prepare_all (enc, error) || !alloc_buffers (enc, error)) {
    llm_audio_encoder_free (enc);
    return NULL;
  }
  return enc;
}

void
llm_audio_encoder_free (LlmAudioEncoder *enc)
{
  if (enc == NULL)
    return;
  if (enc->be != NULL) {
    llm_encoder_weights_clear (&enc->weights);
    float *bufs[] = { enc->mel, enc->x, enc->h, enc->qb, enc->kb, enc->vb, enc->att,
      enc->wide, enc->gate, enc->out };
    for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
      if (bufs[i] != NULL)
        enc->ops->free (enc->be, bufs[i]);
    llm_backend_unref (enc->be);
  }
  llm_workers_unref (enc->workers);
  g_free (enc->layers);
  g_free (enc->zeros);
  g_free (enc->backend_name);
  g_free (enc);
}

const LlmMmprojAudio *
llm_audio_encoder_tower (const LlmAudioEncoder *enc)
{
  return enc->a;
}

guint
llm_audio_encoder_max_rows (const LlmAudioEncoder *enc)
{
  return enc->max_rows;
}

guint
llm_audio_encoder_n_out (const LlmAudioEncoder *enc)
{
  return enc->a->n_out;
}

int
llm_audio_encoder_n_threads (const LlmAudioEncoder *enc)
{
  return llm_workers_n_threads (enc->workers);
}

const char *
llm_audio_encoder_backend_name (const LlmAudioEncoder *enc)
{
  return enc->backend_name;
}

/* --- the forward pass ------------------------------------------------ */

/* y = x W (+ b) for @n rows. */
static void
linear (LlmAudioEncoder *enc, LlmBackendQueue *q, const float *x, guint n, const LlmWeight *w,
    const LlmWeight *b, float *y)
{
  enc->ops->matmul (enc->be, q, x, n, &w, &y, 1);
  if (b != NULL)
    enc->ops->add_bias (enc->be, q, y, b, n);
}

/* @n rows of x after the post-layernorm to the LM's width in out. */
static void
project (LlmAudioEncoder *enc, LlmBackendQueue *q, guint n)
{
  const LlmMmprojAudio *a = enc->a;
  const LlmBackendOps *ops = enc->ops;
  LlmBackend *be = enc->be;
  const gsize e = a->n_embd, width = e * a->stack_factor;
  const guint rows = (n + a->stack_factor - 1) / a->stack_factor;
  const guint hidden = a->n_proj_hidden;
  /* Stacking is a new view of the same time-major floats; the last row
   * is padded with zeros (Ultravox's StackAudioFrames, ggml_pad). */
  const gsize pad = rows * width - (gsize) n * e;
  if (pad > 0)
    ops->upload (be, q, enc->x + (gsize) n * e, enc->zeros, pad * sizeof (float));
  switch (a->type) {
    case LLM_MMPROJ_ULTRAVOX: {
      ops->rmsnorm (be, q, enc->x, enc->norm_pre_w, enc->x, rows, width, ULTRAVOX_EPS);
      const LlmWeight *ws[] = { enc->proj1_w, enc->gate_w };
      float *const ys[] = { enc->wide, enc->gate };
      ops->matmul (be, q, enc->x, rows, ws, ys, 2);
      if (enc->proj1_b != NULL) {
        ops->add_bias (be, q, enc->wide, enc->proj1_b, rows);
        ops->add_bias (be, q, enc->gate, enc->gate_b, rows);
      }
      ops->swiglu (be, q, enc->gate, enc->wide, rows, hidden);
      ops->rmsnorm (be, q, enc->gate, enc->norm_mid_w, enc->gate, rows, hidden, ULTRAVOX_EPS);
      linear (enc, q, enc->gate, rows, enc->proj2_w, enc->proj2_b, enc->out);
      break;
    }
    case LLM_MMPROJ_VOXTRAL:
      linear (enc, q, enc->x, rows, enc->proj1_w, enc->proj1_b, enc->wide);
      ops->gelu (be, q, enc->wide, rows, hidden, LLM_GELU_ERF);
      linear (enc, q, enc->wide, rows, enc->proj2_w, enc->proj2_b, enc->out);
      break;
    case LLM_MMPROJ_QWEN2A:
      linear (enc, q, enc->x, rows, enc->proj1_w, enc->proj1_b, enc->out);
      break;
    default:
      g_assert_not_reached ();
  }
}

gboolean
llm_audio_encoder_encode (LlmAudioEncoder *enc, const float *mel, guint n_frames, float *out,
    guint *n_rows, GError **error)
{
  g_return_val_if_fail (enc != NULL && mel != NULL && out != NULL && n_rows != NULL, FALSE);
  const LlmMmprojAudio *a = enc->a;
  const guint n_tokens = llm_mmproj_audio_n_tokens (a, n_frames);
  if (n_tokens == 0) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "%u mel frames: the %s audio tower takes 1 to %u%s", n_frames,
        llm_mmproj_type_name (a->type), a->n_frames_max,
        a->avg_pool && n_frames > 0 && n_frames <= a->n_frames_max
        ? " and at least 3 for its pooling" : "");
    return FALSE;
  }
  const LlmBackendOps *ops = enc->ops;
  LlmBackend *be = enc->be;
  const gsize e = a->n_embd;
  const guint n_pos = (guint) llm_cpu_conv1d_out_len (n_frames, TAPS, 2, 1);

  /* The worker pool, and with it this encoder's scratch, is ours until
   * the end. */
  LlmThreadPool *pool = llm_workers_lock (enc->workers);
  LlmBackendQueue *q = llm_backend_cpu_queue (pool);

  /* The stem: the mel bins (channel-major) at stride 1, then its output
   * (time-major) at stride 2, each as rows of taps times the kernel. */
  ops->upload (be, q, enc->mel, mel, (gsize) a->n_mel * n_frames * sizeof (float));
  const LlmConv1dShape c1 = {
    .n_ch = a->n_mel, .n_len = n_frames, .t_stride = 1, .c_stride = n_frames,
    .taps = TAPS, .stride = 1, .pad = 1,
  };
  ops->conv1d_rows (be, q, enc->mel, &c1, n_frames, enc->wide);
  linear (enc, q, enc->wide, n_frames, enc->conv1_w, enc->conv1_b, enc->h);
  ops->gelu (be, q, enc->h, n_frames, e, LLM_GELU_ERF);
  const LlmConv1dShape c2 = {
    .n_ch = e, .n_len = n_frames, .t_stride = e, .c_stride = 1,
    .taps = TAPS, .stride = 2, .pad = 1,
  };
  ops->conv1d_rows (be, q, enc->h, &c2, n_pos, enc->wide);
  linear (enc, q, enc->wide, n_pos, enc->conv2_w, enc->conv2_b, enc->x);
  ops->gelu (be, q, enc->x, n_pos, e, LLM_GELU_ERF);
  /* The first n_pos positions (Ultravox slices them for shorter input;
   * a 30 s window uses them all). */
  ops->add (be, q, enc->x, enc->pos_embd->data, n_pos, e);
  if (enc->pre_ln_w != NULL)
    ops->layernorm (be, q, enc->x, enc->pre_ln_w, enc->pre_ln_b, enc->x, n_pos, e, a->eps);

  const LlmEncoderRows rows = { enc->x, enc->h, enc->qb, enc->kb, enc->vb, enc->att, enc->wide };
  for (guint32 l = 0; l < a->n_layer; l++)
    llm_encoder_block (enc->be, q, &enc->layers[l], &rows, &enc->shape, n_pos,
        enc->a->n_embd, enc->a->n_ff, enc->a->eps, LLM_GELU_ERF);

  guint n = n_pos;
  if (a->avg_pool) {
    /* Qwen2-Audio pools before its post-layernorm. */
    ops->avg_pool_pairs (be, q, enc->x, enc->h, n, e);
    n /= 2;
    ops->layernorm (be, q, enc->h, enc->post_ln_w, enc->post_ln_b, enc->x, n, e, a->eps);
  } else {
    ops->layernorm (be, q, enc->x, enc->post_ln_w, enc->post_ln_b, enc->x, n, e, a->eps);
  }
  project (enc, q, n);
  ops->download (be, q, out, enc->out, (gsize) n_tokens * a->n_out * sizeof (float));
  ops->sync (be, q);

  llm_threadpool_rest (pool);
  llm_workers_unlock (enc->workers);
  *n_rows = n_tokens;
  return TRUE;
}

/* --- one encode, one thread ------------------------------------------ */

static LlmAudioEncoder *
encoder_once (const LlmMmproj *p, const LlmCpuKernels *kern, GError **error)
{
  static const LlmCpuKernelChoice by_isa[LLM_CPU_N_ISA] = {
    [LLM_CPU_ISA_SCALAR] = LLM_CPU_KERNELS_SCALAR,
    [LLM_CPU_ISA_AVX2] = LLM_CPU_KERNELS_AVX2,
    [LLM_CPU_ISA_AVX512] = LLM_CPU_KERNELS_AVX512,
  };
  LlmAudioEncoderOptions opts;
  llm_audio_encoder_options_init (&opts);
  opts.n_threads = 1;
  opts.kernels = by_isa[llm_cpu_kernels_isa (kern)];
  return llm_audio_encoder_new_with (p, &opts, error);
}

gboolean
llm_audio_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const float *mel,
    guint n_frames, float *out, guint *n_rows, GError **error)
{
  g_return_val_if_fail (p != NULL && kern != NULL && mel != NULL && out != NULL, FALSE);
  g_autoptr (LlmAudioEncoder) enc = encoder_once (p, kern, error);
  return enc != NULL && llm_audio_encoder_encode (enc, mel, n_frames, out, n_rows, error);
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
llm_audio_encoder_encode_pcm (LlmAudioEncoder *enc, LlmAudioMel *mel, const float *pcm,
    gsize n_samples, gboolean pad_window, float *spec, float *out, guint *n_rows,
    GError **error)
{
  g_return_val_if_fail (enc != NULL && mel != NULL && spec != NULL, FALSE);
  const LlmMmprojAudio *a = enc->a;
  const guint frames = llm_audio_chunk_frames (a, n_samples, pad_window);
  if (frames == 0) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "a chunk of %" G_GSIZE_FORMAT " samples is longer than the encoder's window of %u "
        "frames (%g s)", n_samples, a->n_frames_max,
        (double) a->n_frames_max * a->hop / a->sample_rate);
    return FALSE;
  }
  return llm_audio_mel_compute (mel, pcm, n_samples, frames, spec, error)
      && llm_audio_encoder_encode (enc, spec, frames, out, n_rows, error);
}

gboolean
llm_audio_encode_pcm (const LlmMmproj *p, const LlmCpuKernels *kern, LlmAudioMel *mel,
    const float *pcm, gsize n_samples, gboolean pad_window, float *out, guint *n_rows,
    GError **error)
{
  g_return_val_if_fail (p != NULL && kern != NULL && mel != NULL, FALSE);
  g_autoptr (LlmAudioEncoder) enc = encoder_once (p, kern, error);
  if (enc == NULL)
    return FALSE;
  float *spec = g_try_new (float, (gsize) enc->a->n_mel * enc->a->n_frames_max);
  if (spec == NULL) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_NOMEM,
        "out of memory for a log-mel spectrogram of %u frames", enc->a->n_frames_max);
    return FALSE;
  }
  const gboolean ok = llm_audio_encoder_encode_pcm (enc, mel, pcm, n_samples, pad_window, spec,
      out, n_rows, error);
  g_free (spec);
  return ok;
}
