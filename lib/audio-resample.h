/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Interleaved PCM of any rate and channel count to the mono floats an
 * audio encoder hears (16 kHz for Whisper), through FFmpeg's
 * libswresample: the channels averaged (each weighs 1 / channels, so a
 * mono signal copied to every channel comes out unchanged), then
 * resampled. Output sample k is the signal at input time k / out_rate
 * from the first sample pushed: libswresample keeps the phase, and what
 * its filter still holds comes out at llm_audio_resampler_drain. Mono
 * input already at the output rate is converted without a filter, so it
 * comes out exact. One caller at a time. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  LLM_AUDIO_FORMAT_S16,   /* native-endian int16, full scale 32768 */
  LLM_AUDIO_FORMAT_F32,   /* native-endian float, full scale 1.0 */
} LlmAudioFormat;

typedef struct _LlmAudioResampler LlmAudioResampler;

/* Fails (LLM_AUDIO_ERROR, audio-mel.h) on a rate or channel count of 0
 * or when libswresample cannot convert. */
LlmAudioResampler *llm_audio_resampler_new (LlmAudioFormat format, guint rate, guint channels,
    guint out_rate, GError **error);
void llm_audio_resampler_free (LlmAudioResampler *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmAudioResampler, llm_audio_resampler_free)

/* Appends the output of @n_frames interleaved frames at @in to @out (a
 * GArray of float). */
gboolean llm_audio_resampler_push (LlmAudioResampler *r, const void *in, gsize n_frames,
    GArray *out, GError **error);

/* Appends what the filter still holds, at the end of a stream; the next
 * push starts a new one. */
gboolean llm_audio_resampler_drain (LlmAudioResampler *r, GArray *out, GError **error);

/* Drops what the filter holds (a flush): the next push starts a new
 * stream. */
void llm_audio_resampler_reset (LlmAudioResampler *r);

G_END_DECLS
