/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "audio-chunker.h"

#include <math.h>

#define LEVEL_FLOOR_DB -200.0

struct _LlmAudioChunker {
  gsize chunk, hop;
  GArray *held;         /* float samples from stream index base on */
  guint64 base;
  guint64 covered;      /* stream index past the last chunk given */
  gboolean advance;     /* the chunk at base was given: step past it first */
};

LlmAudioChunker *
llm_audio_chunker_new (gsize chunk, gsize overlap)
{
  g_return_val_if_fail (chunk >= 1 && overlap < chunk, NULL);
  LlmAudioChunker *c = g_new0 (LlmAudioChunker, 1);
  c->chunk = chunk;
  c->hop = chunk - overlap;
  c->held = g_array_sized_new (FALSE, FALSE, sizeof (float), (guint) chunk);
  return c;
}

void
llm_audio_chunker_free (LlmAudioChunker *c)
{
  if (c == NULL)
    return;
  g_array_unref (c->held);
  g_free (c);
}

void
llm_audio_chunker_push (LlmAudioChunker *c, const float *pcm, gsize n)
{
  g_array_append_vals (c->held, pcm, (guint) n);
}

/* Drops the samples before the next chunk's start. */
static void
step (LlmAudioChunker *c)
{
  if (!c->advance)
    return;
  c->advance = FALSE;
  const gsize drop = MIN (c->hop, (gsize) c->held->len);
  g_array_remove_range (c->held, 0, (guint) drop);
  c->base += c->hop;
}

gboolean
llm_audio_chunker_next (LlmAudioChunker *c, const float **pcm, gsize *n, guint64 *start)
{
  step (c);
  if (c->held->len < c->chunk)
    return FALSE;
  *pcm = (const float *) c->held->data;
  *n = c->chunk;
  *start = c->base;
  c->covered = c->base + c->chunk;
  c->advance = TRUE;
  return TRUE;
}

gboolean
llm_audio_chunker_last (LlmAudioChunker *c, const float **pcm, gsize *n, guint64 *start)
{
  step (c);
  if (c->held->len == 0 || c->base + c->held->len <= c->covered)
    return FALSE;
  *pcm = (const float *) c->held->data;
  *n = c->held->len;
  *start = c->base;
  c->covered = c->base + c->held->len;
  return TRUE;
}

void
llm_audio_chunker_reset (LlmAudioChunker *c)
{
  g_array_set_size (c->held, 0);
  c->base = c->covered = 0;
  c->advance = FALSE;
}

gsize
llm_audio_chunker_held (const LlmAudioChunker *c)
{
  return c->held->len;
}

double
llm_audio_level_dbfs (const float *pcm, gsize n)
{
  double sum = 0.0;
  for (gsize i = 0; i < n; i++)
    sum += (double) pcm[i] * pcm[i];
  const double rms = n > 0 ? sqrt (sum / (double) n) : 0.0;
  return rms > 0.0 ? MAX (20.0 * log10 (rms), LEVEL_FLOOR_DB) : LEVEL_FLOOR_DB;
}
