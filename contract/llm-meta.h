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
} GstLlmSessionMeta;

GType gst_llm_session_meta_api_get_type (void);
#define GST_LLM_SESSION_META_API_TYPE (gst_llm_session_meta_api_get_type ())
const GstMetaInfo *gst_llm_session_meta_get_info (void);

/* Attaches @session (a new reference) to @buffer. */
GstLlmSessionMeta *gst_buffer_add_llm_session_meta (GstBuffer *buffer, LlmSession *session);
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
} GstLlmDraftMeta;

GType gst_llm_draft_meta_api_get_type (void);
#define GST_LLM_DRAFT_META_API_TYPE (gst_llm_draft_meta_api_get_type ())
const GstMetaInfo *gst_llm_draft_meta_get_info (void);

/* Attaches @drafter (a new reference) to @buffer. */
GstLlmDraftMeta *gst_buffer_add_llm_draft_meta (GstBuffer *buffer, LlmDrafter *drafter);
#define gst_buffer_get_llm_draft_meta(b) \
  ((GstLlmDraftMeta *) gst_buffer_get_meta ((b), GST_LLM_DRAFT_META_API_TYPE))

G_END_DECLS
