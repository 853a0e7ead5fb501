/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-bench --audio MMPROJ: how fast the audio encoder encodes one
 * 30 s window (the one mtmd encodes every chunk to, and llmaudioencode by
 * default) at each thread count: ms per window and the real-time factor,
 * seconds of window per second of encoding.
 *
 * The samples (--audio-pcm, or a test signal) become the first window's
 * log-mel spectrogram once; that front end is timed apart, since it runs
 * on one thread whatever the encoder's count. One encoder per thread
 * count, all made before anything is timed (weights prepared, scratch
 * reserved); one untimed window each; then rounds in which every thread
 * count encodes the window in turn, so a neighbour's load on a shared
 * machine falls on all of them alike, and the median of the rounds. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "audio-encoder.h"
#include "audio-mel.h"
#include "bench.h"
#include "mmproj.h"

/* @n samples of 16 kHz mono: the file's floats, or a chirp with a little
 * noise (the speed does not depend on the samples). */
static float *
samples (const char *path, gsize *n, GError **error)
{
  if (path == NULL) {
    *n = 11 * 16000;
    float *pcm = g_new (float, *n);
    guint32 rng = 7;
    for (gsize i = 0; i < *n; i++) {
      const double t = i / 16000.0;
      rng = rng * 1664525u + 1013904223u;
      pcm[i] = (float) (0.3 * sin (2 * G_PI * (200 + 100 * t) * t)
          + 0.01 * ((rng >> 8) / 16777216.0 - 0.5));
    }
    return pcm;
  }
  gchar *bytes;
  gsize len;
  if (!g_file_get_contents (path, &bytes, &len, error))
    return NULL;
  if (len < sizeof (float) || len % sizeof (float) != 0) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "%s: %" G_GSIZE_FORMAT " bytes are not 16 kHz mono F32 samples", path, len);
    g_free (bytes);
    return NULL;
  }
  *n = len / sizeof (float);
  return (float *) bytes;
}

gboolean
bench_audio_run (const BenchAudioSetting *s, GError **error)
{
  g_autoptr (LlmMmproj) p = llm_mmproj_load_towers (s->mmproj, LLM_MMPROJ_TOWER_AUDIO, error);
  if (p == NULL)
    return FALSE;
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  gsize n_samples = 0;
  g_autofree float *pcm = samples (s->pcm, &n_samples, error);
  if (pcm == NULL)
    return FALSE;
  const guint frames = a->n_frames_max;
  const double window_s = (double) frames * a->hop / a->sample_rate;
  n_samples = MIN (n_samples, (gsize) frames * a->hop);
  LlmAudioMel *mel = llm_audio_mel_new_for (a, error);
  if (mel == NULL)
    return FALSE;
  g_autofree float *spec = g_new (float, (gsize) a->n_mel * frames);
  g_autofree double *mel_ms = g_new (double, s->rounds);
  gboolean ok = TRUE;
  for (guint r = 0; r < s->rounds && ok; r++) {
    const double t0 = bench_now_ms ();
    ok = llm_audio_mel_compute (mel, pcm, n_samples, frames, spec, error);
    mel_ms[r] = bench_now_ms () - t0;
  }
  llm_audio_mel_free (mel);
  if (!ok)
    return FALSE;
  const double mel_med = bench_median_sort (mel_ms, s->rounds);

  const guint n_rows = llm_mmproj_audio_n_tokens (a, frames);
  g_autofree float *out = g_new (float, (gsize) n_rows * a->n_out);
  g_autofree LlmAudioEncoder **encs = g_new0 (LlmAudioEncoder *, s->n_threads);
  g_autofree double *ms = g_new (double, (gsize) s->n_threads * s->rounds);
  g_autofree double *setup_ms = g_new (double, s->n_threads);
  guint rows = 0;
  for (guint i = 0; i < s->n_threads && ok; i++) {
    const double t0 = bench_now_ms ();
    encs[i] = llm_audio_encoder_new (p, (int) s->threads[i], error);
    ok = encs[i] != NULL && llm_audio_encoder_encode (encs[i], spec, frames, out, &rows, error);
    setup_ms[i] = bench_now_ms () - t0;
  }
  for (guint r = 0; r < s->rounds && ok; r++)
    for (guint i = 0; i < s->n_threads && ok; i++) {
      const double t0 = bench_now_ms ();
      ok = llm_audio_encoder_encode (encs[i], spec, frames, out, &rows, error);
      ms[i * s->rounds + r] = bench_now_ms () - t0;
    }

  if (ok && !s->json)
    g_print ("audio: %s: %s, %u layers of %u, %u heads, ff %u, stack %u, %u rows x %u; "
        "%g s of samples in a %g s window; %s; median of %u interleaved rounds; "
        "log-mel front end %.1f ms (one thread)\n"
        "threads  ms/window   min ms   max ms  x real time  rows/s  setup ms\n", s->mmproj,
        llm_mmproj_type_name (a->type), a->n_layer, a->n_embd, a->n_head, a->n_ff,
        a->stack_factor, n_rows, a->n_out, (double) n_samples / a->sample_rate, window_s,
        llm_audio_encoder_backend_name (encs[0]), s->rounds, mel_med);
  for (guint i = 0; i < s->n_threads && ok; i++) {
    double *m = ms + i * s->rounds;
    g_autofree char *list = NULL;
    if (s->json) {
      GString *l = g_string_new (NULL);
      for (guint r = 0; r < s->rounds; r++)
        g_string_append_printf (l, "%s%.3f", r ? "," : "", m[r]);
      list = g_string_free (l, FALSE);
    }
    const double med = bench_median_sort (m, s->rounds);
    if (s->json)
      g_print ("{\"mmproj\": \"%s\", \"type\": \"%s\", \"layers\": %u, \"n_embd\": %u, "
          "\"rows\": %u, \"window_s\": %g, \"backend\": \"%s\", \"threads\": %d, "
          "\"rounds\": %u, \"mel_ms\": %.3f, \"ms_median\": %.3f, \"realtime_x\": %.3f, "
          "\"ms\": [%s]}\n", s->mmproj, llm_mmproj_type_name (a->type), a->n_layer, a->n_embd,
          n_rows, window_s, llm_audio_encoder_backend_name (encs[i]),
          llm_audio_encoder_n_threads (encs[i]), s->rounds, mel_med, med, window_s * 1e3 / med,
          list);
    else
      g_print ("%7d  %9.1f  %7.1f  %7.1f  %11.1f  %6.0f  %8.0f\n",
          llm_audio_encoder_n_threads (encs[i]), med, m[0], m[s->rounds - 1],
          window_s * 1e3 / med, n_rows * 1e3 / med, setup_ms[i]);
  }
  for (guint i = 0; i < s->n_threads; i++)
    llm_audio_encoder_free (encs[i]);
  return ok;
}
