/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* llmdecode's type, for the elements that decode the way it does with
 * another way of making the next tokens (llmspecverify: drafts checked in
 * one forward). A subclass keeps everything llmdecode does (sampler
 * properties, stopping, timing, FLUSH/EOS, latency, llm-stats) and
 * overrides how a step goes. Internal to the plugin. */
#pragma once

#include <gst/gst.h>

#include "gstllmlatency.h"
#include "gstllmsamplerprops.h"
#include "latency-stats.h"
#include "session.h"

G_BEGIN_DECLS

typedef enum {
  GST_LLM_ON_NEW_PROMPT_QUEUE,
  GST_LLM_ON_NEW_PROMPT_REPLACE,
} GstLlmOnNewPrompt;

#define GST_TYPE_LLM_DECODE (gst_llm_decode_get_type ())
#define GST_LLM_DECODE(obj) (G_TYPE_CHECK_INSTANCE_CAST ((obj), GST_TYPE_LLM_DECODE, GstLlmDecode))
#define GST_LLM_DECODE_CLASS(k) (G_TYPE_CHECK_CLASS_CAST ((k), GST_TYPE_LLM_DECODE, GstLlmDecodeClass))
#define GST_LLM_DECODE_GET_CLASS(obj) \
  (G_TYPE_INSTANCE_GET_CLASS ((obj), GST_TYPE_LLM_DECODE, GstLlmDecodeClass))

typedef struct _GstLlmDecode GstLlmDecode;
typedef struct _GstLlmDecodeClass GstLlmDecodeClass;

/* Most tokens one step may make. */
#define GST_LLM_DECODE_MAX_STEP 65

struct _GstLlmDecode {
  GstElement parent;

  GstPad *sinkpad, *srcpad;

  /* properties; object lock */
  guint max_tokens;
  char **stop_strings;
  gint settings_serial;         /* atomic too: moves at every set, so that a
                                 * response under way reads them again */
  GstLlmOnNewPrompt on_new_prompt;
  GstLlmSamplerProps sampler;

  /* between the sink pad and the task; lock */
  GMutex lock;
  GCond cond;
  GQueue queue;                 /* queued events and prompts */
  guint n_queued_states;
  GstFlowReturn srcresult;      /* not OK: refuse input (flushing, downstream error) */
  gboolean generating;
  guint64 generating_serial;    /* the prompt_serial of the response generated */
  guint64 superseded;           /* replace: prompts up to this serial are dropped */
  gint cancel;                  /* atomic too: read between decode steps */

  /* task thread */
  GThread *prompt_thread;       /* the streaming thread the response's prompt came on,
                                 * while it is answered (for begin) */
  GstClockTime last_end;        /* where the previous response's tokens ended */
  guint64 out_bytes;            /* pushed since start or the last flush (streaming task) */
  GString *piece;               /* scratch: the text of one token */
  GArray *held;                 /* tokens the stop matcher holds */
  LlmLatencyStats steps;        /* wall time per token of the decode steps, us:
                                 * fixed memory however long generation runs */

  GstLlmLatency latency;        /* of a decode step; object lock */
};

struct _GstLlmDecodeClass {
  GstElementClass parent_class;

  /* The media type of the sink pad's caps (its template's). */
  const char *sink_media_type;

  /* A response to @state begins with @first (sampled, not fed). Optional. */
  void (*begin) (GstLlmDecode *self, GstBuffer *state, LlmSession *session, gint32 first);
  /* The tokens after @token (sampled last, not fed) into @out: 1 to
   * GST_LLM_DECODE_MAX_STEP of them in *@n_out, at most @limit where it
   * is not 0 (what max-tokens leaves), every one but the last fed to
   * @session, as llm_session_verify leaves it. llmdecode's is one
   * llm_session_step. */
  gboolean (*step) (GstLlmDecode *self, GstBuffer *state, LlmSession *session, gint32 token,
      guint limit, gint32 *out, guint *n_out, GError **error);
  /* Adds the subclass's fields to a response's llm-stats. Optional. */
  void (*add_stats) (GstLlmDecode *self, GstStructure *stats);
};

GType gst_llm_decode_get_type (void);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (GstLlmDecode, gst_object_unref)

G_END_DECLS
