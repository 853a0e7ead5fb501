/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audio tower and projector of an mmproj file on the CPU: log-mel
 * frames (audio-mel.h) to rows of n_out floats for the language model.
 * Whisper's encoder: a 3-tap convolution of the mel bins, GELU, a 3-tap
 * stride-2 convolution, GELU, the learned position embeddings of the
 * frames it gives, the pre-norm blocks (full attention, GELU in its erf
 * form) and the post-layernorm; then the projector of the file's type
 * (mmproj.h). Hugging Face's semantics, which llama.cpp's mtmd shares for
 * ultravox and qwen2a; Voxtral is Hugging Face's (frames stacked by 4, no
 * pooling), where llama.cpp also averages pairs of frames first.
 *
 * An LlmAudioEncoder runs it as LlmVisionEncoder runs a vision tower:
 * through a backend's table (backend.h: the convolutions as rows of taps
 * times the kernel, the blocks, the projector), weights prepared once,
 * scratch reserved once for the whole window, the work spread over the
 * process's worker pool of its thread count (workers.h), shared with the
 * engines and encoders of that count. GLib only. */
#pragma once

#include <glib.h>

#include "audio-mel.h"
#include "backend.h"
#include "cpu/matmul.h"
#include "mmproj.h"

G_BEGIN_DECLS

typedef struct {
  int n_threads;                  /* <= 0: one per usable core */
  LlmCpuKernelChoice kernels;     /* BEST; tests pick SCALAR for the reference */
} LlmAudioEncoderOptions;

void llm_audio_encoder_options_init (LlmAudioEncoderOptions *opts);

typedef struct _LlmAudioEncoder LlmAudioEncoder;

/* An encoder of @p's audio tower on the CPU with @n_threads workers. @p
 * is borrowed: it must outlive the encoder. Fails for a file without an
 * audio tower (LLM_MMPROJ_ERROR_NOT_MMPROJ), memory, threads, or a weight
 * type or row width the kernels cannot multiply (LLM_MMPROJ_ERROR_INVALID). */
LlmAudioEncoder *llm_audio_encoder_new (const LlmMmproj *p, int n_threads, GError **error);
/* The same with every option (@opts NULL: the defaults). */
LlmAudioEncoder *llm_audio_encoder_new_with (const LlmMmproj *p,
    const LlmAudioEncoderOptions *opts, GError **error);
void llm_audio_encoder_free (LlmAudioEncoder *enc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmAudioEncoder, llm_audio_encoder_free)

/* Encodes @n_frames frames of @mel (n_mel rows of @n_frames floats, as
 * llm_audio_mel_compute writes them; 1 <= n_frames <= n_frames_max) into
 * @out, llm_mmproj_audio_n_tokens (a, n_frames) rows of n_out floats,
 * that count stored in *@n_rows. Allocates nothing; calls on one encoder
 * are serialised. FALSE with @error when @n_frames is out of range or too
 * few for one row (LLM_AUDIO_ERROR_INVALID). */
gboolean llm_audio_encoder_encode (LlmAudioEncoder *enc, const float *mel, guint n_frames,
    float *out, guint *n_rows, GError **error);

/* One chunk of 16 kHz mono @pcm through @mel (made for the tower,
 * llm_audio_mel_new_for) and the encoder over llm_audio_chunk_frames()
 * frames, into @out as llm_audio_encoder_encode. @spec holds n_mel x
 * n_frames_max floats of the caller's (the spectrogram). FALSE with
 * @error as those, or when the chunk is longer than the window
 * (LLM_AUDIO_ERROR_INVALID). */
gboolean llm_audio_encoder_encode_pcm (LlmAudioEncoder *enc, LlmAudioMel *mel, const float *pcm,
    gsize n_samples, gboolean pad_window, float *spec, float *out, guint *n_rows,
    GError **error);

const LlmMmprojAudio *llm_audio_encoder_tower (const LlmAudioEncoder *enc);
/* Rows of n_out floats a whole window gives: the most one encode writes. */
guint llm_audio_encoder_max_rows (const LlmAudioEncoder *enc);
guint llm_audio_encoder_n_out (const LlmAudioEncoder *enc);
int llm_audio_encoder_n_threads (const LlmAudioEncoder *enc);
/* The backend and its kernels, e.g. "cpu/avx512". */
const char *llm_audio_encoder_backend_name (const LlmAudioEncoder *enc);

/* One encode on one thread with the kernels of @kern, through a
 * short-lived encoder (it prepares the weights each call: for tests and
 * one-off use; keep an LlmAudioEncoder for a stream).
 * @mel: n_mel rows of @n_frames floats (as llm_audio_mel_compute writes
 * them), 1 <= n_frames <= n_frames_max (mtmd encodes n_frames_max, a
 * 30 s window). @out holds llm_mmproj_audio_n_tokens (a, n_frames) rows
 * of n_out floats, that count stored in *@n_rows. FALSE with @error when
 * @p has no audio tower (LLM_MMPROJ_ERROR_NOT_MMPROJ), when @n_frames is
 * out of range or too few for one row (LLM_AUDIO_ERROR_INVALID), or for
 * memory. */
gboolean llm_audio_encode (const LlmMmproj *p, const LlmCpuKernels *kern, const float *mel,
    guint n_frames, float *out, guint *n_rows, GError **error);

/* Mel frames a chunk of @n_samples is encoded from: with @pad_window the
 * tower's whole window (n_frames_max, 30 s: mtmd's way, and how Whisper
 * and Qwen2-Audio were trained), else the frames the samples cover (at
 * least 4, so Qwen2-Audio's pooling leaves a row). 0 when the chunk is
 * longer than the window. */
guint llm_audio_chunk_frames (const LlmMmprojAudio *a, gsize n_samples, gboolean pad_window);

/* One chunk of 16 kHz mono @pcm through @mel (made for the tower,
 * llm_audio_mel_new_for) and llm_audio_encode, over
 * llm_audio_chunk_frames() frames; @out holds llm_mmproj_audio_n_tokens
 * of those frames rows of n_out floats. FALSE with @error as those, or
 * when the chunk is longer than the window (LLM_AUDIO_ERROR_INVALID). */
gboolean llm_audio_encode_pcm (const LlmMmproj *p, const LlmCpuKernels *kern, LlmAudioMel *mel,
    const float *pcm, gsize n_samples, gboolean pad_window, float *out, guint *n_rows,
    GError **error);

G_END_DECLS
