/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The latency an element adds in a live pipeline: the slowest time it
 * has taken so far to turn an input into its output (a prefill, a decode
 * step), measured as it runs. It answers LATENCY queries and posts a
 * latency message when the measurement grows past what it last answered,
 * so that the pipeline asks again. Before the first measurement nothing
 * is added. */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

/* Plain data, under the element's object lock; zeroed: nothing measured. */
typedef struct {
  GstClockTime max;           /* the slowest so far */
  GstClockTime reported;      /* what the last live query answered */
  gboolean live;              /* the last query said so */
} GstLlmLatency;

/* Forgets the measurements (READY->NULL). */
void gst_llm_latency_reset (GstElement *element, GstLlmLatency *latency);

/* Counts one output that took @took; may post a latency message on
 * @element. */
void gst_llm_latency_note (GstElement *element, GstLlmLatency *latency, GstClockTime took);

/* Answers a LATENCY query that arrived on @element's src pad: asks
 * upstream through @sinkpad, then, when upstream is live, adds the
 * slowest measurement to the minimum (and to a bounded maximum). FALSE
 * when upstream did not answer. */
gboolean gst_llm_latency_answer (GstElement *element, GstLlmLatency *latency,
    GstPad *sinkpad, GstQuery *query);

G_END_DECLS
