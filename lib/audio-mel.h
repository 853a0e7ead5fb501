/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whisper's log-mel front end as llama.cpp's mtmd computes it: 16 kHz
 * mono float PCM to n_mel bins per 10 ms frame (400-sample periodic Hann
 * window, 160-sample hop, power spectrum by a float FFT (cpu/dft.h), the
 * Slaney filterbank, log10, clamped to the maximum less 8, (x + 4) / 4).
 *
 * mtmd's padding: the signal is reflected at its start (sample -i is
 * sample i) and is silence past its end, and frame t is centred on sample
 * t * hop. mtmd always encodes a 30 s window (3000 frames) whatever the
 * audio's length, most of it that silence; ask for those frames to do the
 * same, or for llm_audio_mel_frames_for() frames to cover the audio alone.
 * The normalisation's maximum is taken over the frames asked for.
 *
 * An LlmAudioMel holds the window, the filterbank and the FFT plan: one
 * caller at a time. */
#pragma once

#include <glib.h>

#include "mmproj.h"

G_BEGIN_DECLS

/* Errors of the audio front end and encoder (audio-encoder.h). */
#define LLM_AUDIO_ERROR (llm_audio_error_quark ())
GQuark llm_audio_error_quark (void);

typedef enum {
  LLM_AUDIO_ERROR_INVALID,        /* sizes or lengths out of range */
  LLM_AUDIO_ERROR_NOMEM,
} LlmAudioError;

typedef struct _LlmAudioMel LlmAudioMel;

/* Fails (LLM_AUDIO_ERROR) on sizes the FFT or the filterbank cannot
 * take, or when FFmpeg cannot make the transform. */
LlmAudioMel *llm_audio_mel_new (guint n_mel, guint n_fft, guint hop, guint sample_rate,
    GError **error);
/* The front end @a was trained with. */
LlmAudioMel *llm_audio_mel_new_for (const LlmMmprojAudio *a, GError **error);
void llm_audio_mel_free (LlmAudioMel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmAudioMel, llm_audio_mel_free)

guint llm_audio_mel_n_mel (const LlmAudioMel *m);

/* Frames whose centres fall in @n_samples samples: ceil (n_samples / hop). */
gsize llm_audio_mel_frames_for (const LlmAudioMel *m, gsize n_samples);

/* Writes @n_frames frames of @pcm (@n_samples, at least 1) to @out:
 * n_mel rows of @n_frames floats (bin-major, as Whisper's input features
 * and mtmd's mel lie). FALSE with LLM_AUDIO_ERROR_INVALID when
 * @n_samples or @n_frames is 0. */
gboolean llm_audio_mel_compute (LlmAudioMel *m, const float *pcm, gsize n_samples,
    gsize n_frames, float *out, GError **error);

G_END_DECLS
