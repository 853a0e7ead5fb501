/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstllmlatency.h"
#include "gstllmelements.h"

#define GST_CAT_DEFAULT gst_llm_debug

void
gst_llm_latency_reset (GstElement *element, GstLlmLatency *latency)
{
  GST_OBJECT_LOCK (element);
  latency->max = 0;
  latency->reported = 0;
  latency->live = FALSE;
  GST_OBJECT_UNLOCK (element);
}

void
gst_llm_latency_note (GstElement *element, GstLlmLatency *latency, GstClockTime took)
{
  gboolean post = FALSE;

  GST_OBJECT_LOCK (element);
  if (took > latency->max) {
    latency->max = took;
    /* Only a real change in a live pipeline is worth a pipeline-wide
     * latency recalculation; until it asks again, take it as told. */
    post = latency->live && took > latency->reported + latency->reported / 10 + GST_MSECOND;
    if (post)
      latency->reported = took;
  }
  GST_OBJECT_UNLOCK (element);
  if (post)
    gst_element_post_message (element, gst_message_new_latency (GST_OBJECT (element)));
}

gboolean
gst_llm_latency_answer (GstElement *element, GstLlmLatency *latency, GstPad *sinkpad,
    GstQuery *query)
{
  GstClockTime min, max;
  gboolean live;

  GST_OBJECT_LOCK (element);
  GstClockTime ours = latency->max;
  GST_OBJECT_UNLOCK (element);

  if (!gst_pad_peer_query (sinkpad, query))
    return FALSE;
  gst_query_parse_latency (query, &live, &min, &max);
  if (live) {
    min += ours;
    if (GST_CLOCK_TIME_IS_VALID (max))
      max += ours;
    gst_query_set_latency (query, live, min, max);
  }

  GST_OBJECT_LOCK (element);
  latency->live = live;
  if (live)
    latency->reported = ours;
  GST_OBJECT_UNLOCK (element);
  GST_DEBUG_OBJECT (element, "live %d, adding %" GST_TIME_FORMAT " of latency", live,
      GST_TIME_ARGS (live ? ours : 0));
  return TRUE;
}
