/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "gstllmlatency.h"
#include "gstllmelements.h"

#define GST_CAT_DEFAULT gst_llm_debug

void
gst_llm_latency_reset (GstElement *element, GstLlmLatency *latency)
{
  GST_OBJECT_LOCK (element);
  memset (latency, 0, sizeof *latency);
  GST_OBJECT_UNLOCK (element);
}

/* Under the object lock. */
static GstClockTime
recent_max (const GstLlmLatency *latency)
{
  GstClockTime max = 0;
  for (guint i = 0; i < GST_LLM_LATENCY_SPANS; i++)
    max = MAX (max, latency->span_max[i]);
  return max;
}

static GstPadProbeReturn
latency_event (GstPad *pad, GstPadProbeInfo *info, gpointer data)
{
  GstLlmLatency *latency = data;
  if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) == GST_EVENT_LATENCY) {
    GstObject *element = GST_OBJECT_PARENT (pad);
    GST_OBJECT_LOCK (element);
    latency->reported = latency->answered;
    GST_OBJECT_UNLOCK (element);
  }
  return GST_PAD_PROBE_OK;
}

void
gst_llm_latency_watch (GstElement *element, GstLlmLatency *latency, GstPad *srcpad)
{
  g_return_if_fail (GST_OBJECT_PARENT (srcpad) == GST_OBJECT (element));
  gst_pad_add_probe (srcpad, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM, latency_event, latency, NULL);
}

void
gst_llm_latency_note (GstElement *element, GstLlmLatency *latency, GstClockTime took)
{
  gboolean post = FALSE;

  GST_OBJECT_LOCK (element);
  GstClockTime *span = &latency->span_max[latency->span];
  *span = MAX (*span, took);
  if (++latency->in_span == GST_LLM_LATENCY_SPAN_OUTPUTS) {
    latency->span = (latency->span + 1) % GST_LLM_LATENCY_SPANS;
    latency->span_max[latency->span] = 0;
    latency->in_span = 0;
  }
  GstClockTime now = recent_max (latency);
  GstClockTime told = latency->reported;
  /* Only a real change in a live pipeline is worth a pipeline-wide
   * latency recalculation; until it asks again, take it as told. A fall
   * must be to half, so that an ordinary spread of step times does not
   * make the pipeline recalculate over and over. */
  if (latency->live && (now > told + told / 10 + GST_MSECOND || (now < told / 2
              && told - now > GST_MSECOND))) {
    post = TRUE;
    latency->reported = now;
  }
  GST_OBJECT_UNLOCK (element);
  if (post) {
    GST_DEBUG_OBJECT (element, "latency now %" GST_TIME_FORMAT ", was %" GST_TIME_FORMAT,
        GST_TIME_ARGS (now), GST_TIME_ARGS (told));
    gst_element_post_message (element, gst_message_new_latency (GST_OBJECT (element)));
  }
}

gboolean
gst_llm_latency_answer (GstElement *element, GstLlmLatency *latency, GstPad *sinkpad,
    GstQuery *query)
{
  GstClockTime min, max;
  gboolean live;

  GST_OBJECT_LOCK (element);
  GstClockTime ours = recent_max (latency);
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
    latency->answered = ours;
  GST_OBJECT_UNLOCK (element);
  GST_DEBUG_OBJECT (element, "live %d, adding %" GST_TIME_FORMAT " of latency", live,
      GST_TIME_ARGS (live ? ours : 0));
  return TRUE;
}
