/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "audio-mel.h"

#include "cpu/dft.h"
#include "cpu/mel.h"

/* Past these no Whisper front end goes; they bound every buffer. */
#define MAX_FFT 65536u
#define MAX_MEL 1024u

G_DEFINE_QUARK (llm-audio-error-quark, llm_audio_error)

struct _LlmAudioMel {
  guint n_mel, n_fft, hop, sample_rate;
  /* The FFT's roots of unity and scratch (cpu/dft.h); the windowed
   * frame and the power of its n_fft / 2 + 1 bins. */
  float *table, *scratch, *frame, *power;
  float *window;
  float *weights;
  LlmCpuMelFilter *filters;
};

LlmAudioMel *
llm_audio_mel_new (guint n_mel, guint n_fft, guint hop, guint sample_rate, GError **error)
{
  if (n_mel < 1 || n_mel > MAX_MEL || n_fft < 2 || n_fft > MAX_FFT || n_fft % 2 != 0
      || hop < 1 || hop > n_fft || sample_rate < 1) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "no log-mel front end of %u bins, a %u-point FFT (even, up to %u), hop %u and "
        "%u Hz", n_mel, n_fft, MAX_FFT, hop, sample_rate);
    return NULL;
  }
  LlmAudioMel *m = g_new0 (LlmAudioMel, 1);
  m->n_mel = n_mel;
  m->n_fft = n_fft;
  m->hop = hop;
  m->sample_rate = sample_rate;
  const gsize n_bins = n_fft / 2 + 1;
  m->table = g_try_new (float, llm_cpu_dft_table_floats (n_fft));
  m->scratch = g_try_new (float, llm_cpu_dft_scratch_floats (n_fft));
  m->frame = g_try_new (float, n_fft);
  m->power = g_try_new (float, n_bins);
  if (m->table == NULL || m->scratch == NULL || m->frame == NULL || m->power == NULL) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_NOMEM,
        "out of memory for a %u-point FFT", n_fft);
    llm_audio_mel_free (m);
    return NULL;
  }
  llm_cpu_dft_table (n_fft, m->table);
  m->window = g_new (float, n_fft);
  llm_cpu_hann_periodic (m->window, n_fft);
  m->weights = g_new (float, (gsize) n_mel * n_bins);
  m->filters = g_new (LlmCpuMelFilter, n_mel);
  llm_cpu_mel_filterbank (n_mel, n_fft, sample_rate, m->weights, m->filters);
  return m;
}

LlmAudioMel *
llm_audio_mel_new_for (const LlmMmprojAudio *a, GError **error)
{
  g_return_val_if_fail (a != NULL, NULL);
  return llm_audio_mel_new (a->n_mel, a->n_fft, a->hop, a->sample_rate, error);
}

void
llm_audio_mel_free (LlmAudioMel *m)
{
  if (m == NULL)
    return;
  g_free (m->table);
  g_free (m->scratch);
  g_free (m->frame);
  g_free (m->power);
  g_free (m->window);
  g_free (m->weights);
  g_free (m->filters);
  g_free (m);
}

guint
llm_audio_mel_n_mel (const LlmAudioMel *m)
{
  return m->n_mel;
}

gsize
llm_audio_mel_frames_for (const LlmAudioMel *m, gsize n_samples)
{
  return n_samples / m->hop + (n_samples % m->hop != 0);
}

/* Sample @s of the padded signal (see audio-mel.h). */
static inline float
padded (const float *pcm, gsize n, gint64 s)
{
  const guint64 i = (guint64) (s < 0 ? -s : s);
  return i < n ? pcm[i] : 0.0f;
}

gboolean
llm_audio_mel_compute (LlmAudioMel *m, const float *pcm, gsize n_samples, gsize n_frames,
    float *out, GError **error)
{
  g_return_val_if_fail (m != NULL && out != NULL, FALSE);
  if (n_samples == 0 || n_frames == 0 || pcm == NULL) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "a log-mel spectrogram needs audio (%" G_GSIZE_FORMAT " samples) and frames (%"
        G_GSIZE_FORMAT ")", n_samples, n_frames);
    return FALSE;
  }
  const gsize n_fft = m->n_fft, half = n_fft / 2;
  const float silence = llm_cpu_mel_silence ();
  for (gsize t = 0; t < n_frames; t++) {
    const gint64 first = (gint64) (t * m->hop) - (gint64) half;
    if (first >= (gint64) n_samples) {
      /* Past the end the frame is silence: skip its FFT (most of a 30 s
       * window for a short chunk), the value is the one it would give. */
      for (guint b = 0; b < m->n_mel; b++)
        out[b * n_frames + t] = silence;
      continue;
    }
    for (gsize j = 0; j < n_fft; j++)
      m->frame[j] = m->window[j] * padded (pcm, n_samples, first + (gint64) j);
    llm_cpu_dft_power (m->table, n_fft, m->frame, m->scratch, m->power);
    llm_cpu_mel_frame (m->power, m->filters, m->n_mel, out + t, n_frames);
  }
  llm_cpu_mel_normalize (out, (gsize) m->n_mel * n_frames);
  return TRUE;
}
