/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "audio-resample.h"

#include <string.h>

#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>

#include "audio-mel.h"

/* Past these no capture device goes; they bound every product. */
#define MAX_RATE 1536000u
#define MAX_CHANNELS 256u

struct _LlmAudioResampler {
  LlmAudioFormat format;
  guint rate, channels, out_rate;
  gboolean filtered;      /* not mono at the output rate: libswresample converts */
  SwrContext *swr;        /* NULL only if reopening it after a reset failed */
};

static gboolean
swr_failed (GError **error, int err, const char *what)
{
  char text[AV_ERROR_MAX_STRING_SIZE];
  av_strerror (err, text, sizeof text);
  g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID, "libswresample cannot %s: %s",
      what, text);
  return FALSE;
}

/* A fresh context; what the filter held is gone. */
static gboolean
open_swr (LlmAudioResampler *r, GError **error)
{
  AVChannelLayout in, mono = AV_CHANNEL_LAYOUT_MONO;
  av_channel_layout_default (&in, (int) r->channels);
  const enum AVSampleFormat fmt = r->format == LLM_AUDIO_FORMAT_S16 ? AV_SAMPLE_FMT_S16
      : AV_SAMPLE_FMT_FLT;
  int err = swr_alloc_set_opts2 (&r->swr, &mono, AV_SAMPLE_FMT_FLT, (int) r->out_rate, &in, fmt,
      (int) r->rate, 0, NULL);
  av_channel_layout_uninit (&in);
  if (err < 0)
    return swr_failed (error, err, "make a converter");
  /* Our own mix, the channels' mean, whatever layout FFmpeg would guess
   * for this channel count (it has none past 8). */
  double *matrix = g_new (double, r->channels);
  for (guint c = 0; c < r->channels; c++)
    matrix[c] = 1.0 / r->channels;
  err = swr_set_matrix (r->swr, matrix, (int) r->channels);
  g_free (matrix);
  if (err >= 0)
    err = swr_init (r->swr);
  if (err < 0) {
    swr_free (&r->swr);
    return swr_failed (error, err, "convert this audio");
  }
  return TRUE;
}

LlmAudioResampler *
llm_audio_resampler_new (LlmAudioFormat format, guint rate, guint channels, guint out_rate,
    GError **error)
{
  if (rate < 1 || rate > MAX_RATE || channels < 1 || channels > MAX_CHANNELS || out_rate < 1
      || out_rate > MAX_RATE) {
    g_set_error (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID,
        "cannot resample %u channels at %u Hz to %u Hz (up to %u channels and %u Hz)", channels,
        rate, out_rate, MAX_CHANNELS, MAX_RATE);
    return NULL;
  }
  LlmAudioResampler *r = g_new0 (LlmAudioResampler, 1);
  r->format = format;
  r->rate = rate;
  r->channels = channels;
  r->out_rate = out_rate;
  r->filtered = channels != 1 || rate != out_rate;
  if (r->filtered && !open_swr (r, error)) {
    g_free (r);
    return NULL;
  }
  return r;
}

void
llm_audio_resampler_free (LlmAudioResampler *r)
{
  if (r == NULL)
    return;
  swr_free (&r->swr);
  g_free (r);
}

/* Runs the converter on @n_frames at @in (NULL: drain). */
static gboolean
convert (LlmAudioResampler *r, const void *in, gsize n_frames, GArray *out, GError **error)
{
  if (n_frames > G_MAXINT / 2)
    return swr_failed (error, AVERROR (EINVAL), "take so many frames at once");
  const int room = swr_get_out_samples (r->swr, (int) n_frames);
  if (room < 0)
    return swr_failed (error, room, "size its output");
  if (room == 0)
    return TRUE;
  const guint old = out->len;
  g_array_set_size (out, old + (guint) room);
  uint8_t *dst = (uint8_t *) &g_array_index (out, float, old);
  const uint8_t *src = in;
  const int got = swr_convert (r->swr, &dst, room, in ? &src : NULL, (int) n_frames);
  if (got < 0) {
    g_array_set_size (out, old);
    return swr_failed (error, got, "convert");
  }
  g_array_set_size (out, old + (guint) got);
  return TRUE;
}

gboolean
llm_audio_resampler_push (LlmAudioResampler *r, const void *in, gsize n_frames, GArray *out,
    GError **error)
{
  g_return_val_if_fail (r != NULL && out != NULL, FALSE);
  if (n_frames == 0)
    return TRUE;
  if (r->filtered && r->swr == NULL && !open_swr (r, error))
    return FALSE;
  if (r->filtered)
    return convert (r, in, n_frames, out, error);
  const guint old = out->len;
  g_array_set_size (out, old + (guint) n_frames);
  float *dst = &g_array_index (out, float, old);
  if (r->format == LLM_AUDIO_FORMAT_F32) {
    memcpy (dst, in, n_frames * sizeof (float));
  } else {
    const gint16 *s = in;
    /* libswresample's scale, so both paths agree. */
    for (gsize i = 0; i < n_frames; i++)
      dst[i] = s[i] * (1.0f / 32768.0f);
  }
  return TRUE;
}

gboolean
llm_audio_resampler_drain (LlmAudioResampler *r, GArray *out, GError **error)
{
  g_return_val_if_fail (r != NULL && out != NULL, FALSE);
  if (!r->filtered || r->swr == NULL)
    return TRUE;
  if (!convert (r, NULL, 0, out, error))
    return FALSE;
  /* A drained context takes no more input: start the next stream on a
   * fresh one. */
  llm_audio_resampler_reset (r);
  return TRUE;
}

void
llm_audio_resampler_reset (LlmAudioResampler *r)
{
  g_return_if_fail (r != NULL);
  if (!r->filtered)
    return;
  swr_free (&r->swr);
  /* The parameters opened before, so this fails only for memory; the next
   * push then tries again and reports it. */
  open_swr (r, NULL);
}
