/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The same prompt and generation as the direct measurement, through
 * `appsrc ! llmprefill ! llmdecode ! appsink`, timed where an application
 * sees it: from pushing the prompt to each token arriving at the sink. The
 * difference from the direct figures is what the elements cost (buffers,
 * metas, events, thread hand-offs, stats). */
#include "bench.h"

#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>

#include "llm-caps.h"

typedef struct {
  GMutex lock;
  GArray *arrivals;           /* double ms, one per token id */
} Arrivals;

static GstFlowReturn
on_sample (GstAppSink *sink, gpointer user_data)
{
  Arrivals *a = user_data;
  double t = bench_now_ms ();
  GstSample *sample = gst_app_sink_pull_sample (sink);
  if (sample == NULL)
    return GST_FLOW_EOS;
  GstBuffer *buf = gst_sample_get_buffer (sample);
  gsize n = buf ? gst_buffer_get_size (buf) / GST_LLM_TOKEN_SIZE : 0;
  g_mutex_lock (&a->lock);
  for (gsize i = 0; i < n; i++)
    g_array_append_val (a->arrivals, t);
  g_mutex_unlock (&a->lock);
  gst_sample_unref (sample);
  return GST_FLOW_OK;
}

/* The plugin as built next to this program, when it is not installed or
 * on GST_PLUGIN_PATH: the benchmark measures the tree it was built from. */
static gboolean
ensure_elements (GError **error)
{
  static const char *const needed[] = { "appsrc", "appsink", "llmprefill", "llmdecode" };
  GstElementFactory *f = gst_element_factory_find ("llmprefill");
  if (f != NULL)
    gst_object_unref (f);
#ifdef BENCH_BUILD_PLUGIN_DIR
  else
    gst_registry_scan_path (gst_registry_get (), BENCH_BUILD_PLUGIN_DIR);
#endif
  for (gsize i = 0; i < G_N_ELEMENTS (needed); i++) {
    f = gst_element_factory_find (needed[i]);
    if (f == NULL) {
      g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_MISSING_PLUGIN,
          "element '%s' not found; put the llm plugin on GST_PLUGIN_PATH", needed[i]);
      return FALSE;
    }
    gst_object_unref (f);
  }
  return TRUE;
}

gboolean
bench_pipeline_run (const char *model_path, const gint32 *prompt, guint n_prompt, guint n_gen,
    int n_threads, LlmKvType kv_type, guint context_length, BenchPipelineResult *result,
    GError **error)
{
  if (!gst_is_initialized ())
    gst_init (NULL, NULL);
  if (!ensure_elements (error))
    return FALSE;

  GstElement *pipeline = gst_parse_launch ("appsrc name=src format=time "
      "caps=" GST_LLM_CAPS_TOKENS " ! llmprefill name=prefill prompt-mode=buffer "
      "temperature=0 ! llmdecode name=decode ! appsink name=sink sync=false", error);
  if (pipeline == NULL)
    return FALSE;
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *prefill = gst_bin_get_by_name (GST_BIN (pipeline), "prefill");
  GstElement *decode = gst_bin_get_by_name (GST_BIN (pipeline), "decode");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  g_object_set (prefill, "model", model_path, "n-threads", MAX (n_threads, 0),
      "context-length", context_length, NULL);
  gst_util_set_object_arg (G_OBJECT (prefill), "kv-type", llm_kv_type_name (kv_type));
  /* One more than -n: the first token is sampled from prefill's logits, then -n decode
   * steps, as in the direct measurement. */
  g_object_set (decode, "max-tokens", n_gen + 1, NULL);

  Arrivals a = { .arrivals = g_array_new (FALSE, FALSE, sizeof (double)) };
  g_mutex_init (&a.lock);
  GstAppSinkCallbacks cb = { .new_sample = on_sample };
  gst_app_sink_set_callbacks (GST_APP_SINK (sink), &cb, &a, NULL);

  gboolean ok = TRUE;
  /* NULL -> READY loads the model in this thread, before the clock starts. */
  if (gst_element_set_state (pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
    ok = FALSE;
  double t_push = bench_now_ms ();
  if (ok) {
    gst_app_src_push_buffer (GST_APP_SRC (src), gst_llm_tokens_buffer_new (prompt, n_prompt));
    gst_app_src_end_of_stream (GST_APP_SRC (src));
  }

  GstBus *bus = gst_element_get_bus (pipeline);
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 30 * 60 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  if (msg == NULL) {
    ok = FALSE;
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "the pipeline did not finish within 30 minutes");
  } else if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *e = NULL;
    gst_message_parse_error (msg, &e, NULL);
    g_propagate_error (error, e);
    ok = FALSE;
  } else if (!ok) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_STATE_CHANGE,
        "the pipeline would not start");
  }
  if (msg != NULL)
    gst_message_unref (msg);
  gst_object_unref (bus);
  gst_element_set_state (pipeline, GST_STATE_NULL);

  if (ok && a.arrivals->len == 0) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "no token reached the sink");
    ok = FALSE;
  }
  if (ok) {
    const double *t = (const double *) a.arrivals->data;
    guint n = a.arrivals->len;
    result->n_generated = n;
    result->ttft_ms = t[0] - t_push;
    result->pp_tokens_per_s = n_prompt / (result->ttft_ms / 1e3);
    if (n > 1) {
      g_autofree double *itl = g_new (double, n - 1);
      for (guint i = 1; i < n; i++)
        itl[i - 1] = t[i] - t[i - 1];
      result->itl_ms_mean = (t[n - 1] - t[0]) / (n - 1);
      result->tg_tokens_per_s = 1e3 / result->itl_ms_mean;
      result->itl_ms_p95 = bench_percentile (itl, n - 1, 95);
    } else {
      result->itl_ms_mean = result->itl_ms_p95 = result->tg_tokens_per_s = 0;
    }
  }

  g_mutex_clear (&a.lock);
  g_array_unref (a.arrivals);
  gst_object_unref (src);
  gst_object_unref (prefill);
  gst_object_unref (decode);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return ok;
}
