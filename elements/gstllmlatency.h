/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The latency an element adds in a live pipeline: the slowest time it
 * has taken to turn an input into its output (a prefill, a decode step)
 * over its recent outputs, measured as it runs. It answers LATENCY
 * queries and posts a latency message when that figure moves away from
 * what the pipeline uses, so that the pipeline asks again: at once when it
 * grows, and when it has fallen to half, so that one slow spell (a burst
 * of other streams, a long prompt) does not delay a live stream for the
 * rest of its life. Before the first measurement nothing is added. */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

/* The window: the slowest output in each of the last SPANS spans of
 * SPAN_OUTPUTS outputs (so between 224 and 256 outputs are remembered). */
#define GST_LLM_LATENCY_SPANS 8
#define GST_LLM_LATENCY_SPAN_OUTPUTS 32

/* Plain data, under the element's object lock; zeroed: nothing measured. */
typedef struct {
  GstClockTime span_max[GST_LLM_LATENCY_SPANS]; /* a ring; 0: nothing yet */
  guint span;                 /* the span being filled */
  guint in_span;              /* outputs counted in it */
  GstClockTime answered;      /* what the last live query answered */
  GstClockTime reported;      /* what the pipeline uses: the answer before
                               * its LATENCY event, or what we last posted */
  gboolean live;              /* the last query said so */
} GstLlmLatency;

/* Watches @srcpad (@element's) for the LATENCY event a pipeline sends
 * upstream once it has asked everybody: only then is the last answer the
 * latency in use. An application's own query changes nothing. Call once,
 * at init; @latency lives as long as @element. */
void gst_llm_latency_watch (GstElement *element, GstLlmLatency *latency, GstPad *srcpad);

/* Forgets the measurements (READY->NULL). */
void gst_llm_latency_reset (GstElement *element, GstLlmLatency *latency);

/* Counts one output that took @took; may post a latency message on
 * @element. */
void gst_llm_latency_note (GstElement *element, GstLlmLatency *latency, GstClockTime took);

/* Answers a LATENCY query that arrived on @element's src pad: asks
 * upstream through @sinkpad, then, when upstream is live, adds the
 * slowest recent measurement to the minimum (and to a bounded maximum).
 * FALSE when upstream did not answer. */
gboolean gst_llm_latency_answer (GstElement *element, GstLlmLatency *latency,
    GstPad *sinkpad, GstQuery *query);

G_END_DECLS
