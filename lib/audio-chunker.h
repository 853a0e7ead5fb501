/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Cuts a stream of mono samples into the chunks an audio encoder takes:
 * @chunk samples each, the next starting @chunk - @overlap samples after
 * the one before, so consecutive chunks share @overlap samples. At the
 * end of the stream the samples no chunk has covered yet make one last,
 * shorter chunk (starting where the next chunk would have started). A
 * chunk's start is its first sample's index in the stream, for timing. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LlmAudioChunker LlmAudioChunker;

/* @chunk >= 1, @overlap < @chunk. */
LlmAudioChunker *llm_audio_chunker_new (gsize chunk, gsize overlap);
void llm_audio_chunker_free (LlmAudioChunker *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmAudioChunker, llm_audio_chunker_free)

/* Appends @n samples to the stream; the chunker keeps a copy. */
void llm_audio_chunker_push (LlmAudioChunker *c, const float *pcm, gsize n);

/* The next whole chunk, if the samples for it are there: TRUE with its
 * samples (@chunk of them, valid until the next call), their count and
 * the stream index of the first. */
gboolean llm_audio_chunker_next (LlmAudioChunker *c, const float **pcm, gsize *n,
    guint64 *start);

/* At the end of the stream, after llm_audio_chunker_next gave all it
 * could: the last, shorter chunk if any sample is in no chunk yet. */
gboolean llm_audio_chunker_last (LlmAudioChunker *c, const float **pcm, gsize *n,
    guint64 *start);

/* Forgets every sample; the next one pushed is the stream's first. */
void llm_audio_chunker_reset (LlmAudioChunker *c);

/* Samples held, covered by a chunk or not. */
gsize llm_audio_chunker_held (const LlmAudioChunker *c);

/* The RMS level of @n samples in dBFS (full scale 1.0): 20 log10 (rms),
 * floored at -200 so digital silence has a level. */
double llm_audio_level_dbfs (const float *pcm, gsize n);

G_END_DECLS
