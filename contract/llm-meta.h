/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GstLlmSessionMeta: the refcounted LlmSession riding on an
 * application/x-llm-state buffer from llmprefill to llmdecode. The
 * buffer's payload is the ids the session took in last (int32, as in
 * application/x-llm-tokens). Copying the buffer's metadata takes another
 * reference; nothing is copied. */
#pragma once

#include <gst/gst.h>
#include "drafter.h"
#include "session.h"

G_BEGIN_DECLS

#define GST_LLM_STATE_MEDIA_TYPE "application/x-llm-state"

typedef struct {
  GstMeta meta;
  LlmSession *session;
  /* The prompt buffer's timing, for the tokens generated from it. */
  GstClockTime prompt_pts;
  /* When the prompt's evaluation began (monotonic µs): TTFT runs from
   * here to the first token's sampling. */
  gint64 prompt_time_us;
  guint prompt_tokens;
  /* The session holds the logits after the payload's last id and nobody
   * has sampled them: the element that samples picks the next token from
   * them (llm_session_sample). */
  gboolean logits_pending;
  /* Numbers the prompts of the process in the order they were prefilled
   * (0: unnumbered); an llm-prompt-waiting names those it supersedes. */
  guint64 prompt_serial;
  /* Set by the first element that samples the response (shared by every
   * copy of this meta: see gst_llm_session_meta_take). */
  gint *taken;
} GstLlmSessionMeta;

GType gst_llm_session_meta_api_get_type (void);
#define GST_LLM_SESSION_META_API_TYPE (gst_llm_session_meta_api_get_type ())
const GstMetaInfo *gst_llm_session_meta_get_info (void);

/* Attaches @session (a new reference) to @buffer. */
GstLlmSessionMeta *gst_buffer_add_llm_session_meta (GstBuffer *buffer, LlmSession *session);
/* Whether @meta's response is the caller's to generate: TRUE for the
 * first caller across every copy of the meta (a tee hands one prompt's
 * state to several branches, a copy of the buffer keeps the meta's
 * session), FALSE after: two elements stepping one session would each
 * take the other's tokens for context. */
gboolean gst_llm_session_meta_take (GstLlmSessionMeta *meta);
#define gst_buffer_get_llm_session_meta(b) \
  ((GstLlmSessionMeta *) gst_buffer_get_meta ((b), GST_LLM_SESSION_META_API_TYPE))

/* GstLlmDraftMeta: the drafter llmdraft adds to a state buffer for
 * llmspecverify, which asks it for proposals as it decodes. Such a buffer
 * goes as `application/x-llm-draft` (with the state's vocab field): the
 * session meta and payload of application/x-llm-state, and this meta.
 * Copying the metadata takes another reference on the drafter. */
#define GST_LLM_DRAFT_MEDIA_TYPE "application/x-llm-draft"

typedef struct {
  GstMeta meta;
  LlmDrafter *drafter;
  /* Whether the drafter drafts ahead while the verifier checks
   * (llm_drafter_set_ahead), as llmdraft's draft-ahead says; for auto, the
   * streaming thread llmdraft pushed the buffer from (a reference;
   * otherwise NULL): drafting ahead pays where the verifier takes the
   * buffer on another one (a queue between them), and @ahead does not
   * count then. */
  gboolean ahead;
  GThread *pushed_from;
} GstLlmDraftMeta;

GType gst_llm_draft_meta_api_get_type (void);
#define GST_LLM_DRAFT_META_API_TYPE (gst_llm_draft_meta_api_get_type ())
const GstMetaInfo *gst_llm_draft_meta_get_info (void);

/* Attaches @drafter (a new reference) to @buffer. */
GstLlmDraftMeta *gst_buffer_add_llm_draft_meta (GstBuffer *buffer, LlmDrafter *drafter);
#define gst_buffer_get_llm_draft_meta(b) \
  ((GstLlmDraftMeta *) gst_buffer_get_meta ((b), GST_LLM_DRAFT_META_API_TYPE))

/* GstLlmEmbeddingsMeta: how the rows of an application/x-llm-embeddings
 * buffer lie on their media, for the elements that compress them. An
 * encoder sets the grid its rows come from (an image's token grid, row
 * major; 0 x 0 for rows with no grid, such as audio frames) and, when the
 * tower has a class token, each row's attention from it (saliency; NULL
 * otherwise). Compression keeps the counts up to date: @n_source_rows is
 * what the encoder made, and @sizes (NULL: all 1) how many source rows
 * each row stands for after merging. Copying the metadata copies the
 * arrays. */
#define GST_LLM_EMBEDDINGS_META_API_TYPE (gst_llm_embeddings_meta_api_get_type ())

typedef struct {
  GstMeta meta;
  guint grid_w, grid_h;
  /* A tiled image: tiles_x x tiles_y tiles of grid_w x grid_h rows each,
   * row by row, then the whole image's grid; 0 x 0 when not tiled. */
  guint tiles_x, tiles_y;
  guint n_source_rows;
  float *saliency;      /* n rows, or NULL */
  float *sizes;         /* n rows, or NULL */
  guint n_rows;         /* length of the arrays above */
} GstLlmEmbeddingsMeta;

GType gst_llm_embeddings_meta_api_get_type (void);
const GstMetaInfo *gst_llm_embeddings_meta_get_info (void);

/* Adds a meta for @n_rows rows on a @grid_w x @grid_h grid, no saliency,
 * every size 1. */
GstLlmEmbeddingsMeta *gst_buffer_add_llm_embeddings_meta (GstBuffer *buffer, guint n_rows,
    guint grid_w, guint grid_h);
#define gst_buffer_get_llm_embeddings_meta(b) \
  ((GstLlmEmbeddingsMeta *) gst_buffer_get_meta ((b), GST_LLM_EMBEDDINGS_META_API_TYPE))
/* Sets the saliency (a copy of @n_rows floats); the meta's rows must match. */
void gst_llm_embeddings_meta_set_saliency (GstLlmEmbeddingsMeta *m, const float *saliency);
/* Sets the sizes (a copy of @n_rows floats) for @n_rows rows. */
void gst_llm_embeddings_meta_set_sizes (GstLlmEmbeddingsMeta *m, const float *sizes,
    guint n_rows);

G_END_DECLS
