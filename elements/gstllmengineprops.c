/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "gstllmengineprops.h"

#include <string.h>

#include "gstllmcontext.h"
#include "gstllmelements.h"
#include "model.h"

#define GST_CAT_DEFAULT gst_llm_debug

/**
 * GstLlmKvType:
 * @GST_LLM_KV_TYPE_F16: 16-bit floats (llama.cpp's default)
 * @GST_LLM_KV_TYPE_F32: 32-bit floats, exact
 * @GST_LLM_KV_TYPE_Q8_0: 8-bit blocks of 32 values with a scale
 * @GST_LLM_KV_TYPE_Q4_0: 4-bit blocks of 32 values with a scale
 *
 * How the KV cache stores keys and values. The quantized types need rows
 * (KV heads x head size) that are a multiple of 32 values.
 *
 * Since: 0.1
 */
typedef enum {
  GST_LLM_KV_TYPE_F16 = LLM_KV_F16,
  GST_LLM_KV_TYPE_F32 = LLM_KV_F32,
  GST_LLM_KV_TYPE_Q8_0 = LLM_KV_Q8_0,
  GST_LLM_KV_TYPE_Q4_0 = LLM_KV_Q4_0,
} GstLlmKvType;

GType
gst_llm_kv_type_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_KV_TYPE_F16, "16-bit floats", "f16"},
    {GST_LLM_KV_TYPE_F32, "32-bit floats (exact)", "f32"},
    {GST_LLM_KV_TYPE_Q8_0, "8-bit quantized blocks of 32", "q8_0"},
    {GST_LLM_KV_TYPE_Q4_0, "4-bit quantized blocks of 32", "q4_0"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmKvType", values));
  return type;
}

/**
 * GstLlmKvPolicy:
 * @GST_LLM_KV_POLICY_FULL: keep every position up to the context length;
 *   a prompt that does not fit is an error, a response that fills it ends
 * @GST_LLM_KV_POLICY_WINDOW: keep the newest kv-window positions
 * @GST_LLM_KV_POLICY_SINK_WINDOW: keep the first kv-sink positions and the
 *   newest kv-window (StreamingLLM)
 *
 * What the KV cache keeps once the context is full. The window policies
 * let a session run forever in bounded memory.
 *
 * Since: 0.1
 */
typedef enum {
  GST_LLM_KV_POLICY_FULL = LLM_KV_POLICY_FULL,
  GST_LLM_KV_POLICY_WINDOW = LLM_KV_POLICY_WINDOW,
  GST_LLM_KV_POLICY_SINK_WINDOW = LLM_KV_POLICY_SINK_WINDOW,
} GstLlmKvPolicy;

GType
gst_llm_kv_policy_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_KV_POLICY_FULL, "Keep everything up to the context length", "full"},
    {GST_LLM_KV_POLICY_WINDOW, "Keep the newest kv-window positions", "window"},
    {GST_LLM_KV_POLICY_SINK_WINDOW,
        "Keep the first kv-sink positions and the newest kv-window (StreamingLLM)",
        "sink-window"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmKvPolicy", values));
  return type;
}

/**
 * GstLlmKvFull:
 * @GST_LLM_KV_FULL_REFUSE: the prompt that needs more KV memory fails with
 *   an element error naming kv-pool-bytes; a response that outgrows the
 *   pool ends early (llm-stats reason "kv-pool-full") with a warning naming
 *   it, and the stream takes its next prompt
 * @GST_LLM_KV_FULL_PREEMPT: streams take turns: one that needs more takes
 *   the KV of an idle stream or of one that started after it, which
 *   recomputes it when its turn comes, and otherwise waits for memory to
 *   come free (until a flush or a state change); only a response that
 *   alone outgrows the pool ends early, as with refuse
 *
 * What the engine does when its KV pool (kv-pool-bytes) is full.
 *
 * Since: 0.2
 */
typedef enum {
  GST_LLM_KV_FULL_REFUSE = LLM_KV_FULL_REFUSE,
  GST_LLM_KV_FULL_PREEMPT = LLM_KV_FULL_PREEMPT,
} GstLlmKvFull;

GType
gst_llm_kv_full_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_KV_FULL_REFUSE, "Refuse the stream that needs more, naming the limit", "refuse"},
    {GST_LLM_KV_FULL_PREEMPT, "Take turns: take an idle or younger stream's KV (it "
          "recomputes later), or wait for some", "preempt"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmKvFull", values));
  return type;
}

#define DEFAULT_MODEL NULL
#define DEFAULT_DEVICE "cpu"
#define DEFAULT_CONTEXT_LENGTH 0
#define DEFAULT_KV_TYPE GST_LLM_KV_TYPE_F16
#define DEFAULT_KV_POLICY GST_LLM_KV_POLICY_FULL
#define DEFAULT_KV_WINDOW 0
#define DEFAULT_KV_SINK 4
#define DEFAULT_N_THREADS 0
#define DEFAULT_KV_POOL_BYTES 0
#define DEFAULT_KV_FULL GST_LLM_KV_FULL_REFUSE
#define DEFAULT_MAX_PREFILL_CHUNK 128
#define DEFAULT_MAX_BATCH_WAIT 0
#define DEFAULT_KV_TIME_SLICE 0
/* An hour: longer is no turn at all, and the engine counts microseconds. */
#define MAX_KV_TIME_SLICE (3600 * GST_SECOND)

/* Offsets from the installing class's first id. */
enum {
  MODEL,
  DEVICE,
  CONTEXT_LENGTH,
  KV_TYPE,
  KV_POLICY,
  KV_WINDOW,
  KV_SINK,
  N_THREADS,
  KV_POOL_BYTES,
  KV_FULL,
  MAX_PREFILL_CHUNK,
  MAX_BATCH_WAIT,
  KV_TIME_SLICE,
};

G_STATIC_ASSERT (KV_TIME_SLICE + 1 == GST_LLM_ENGINE_N_PROPS);

void
gst_llm_engine_props_init (GstLlmEngineProps *props)
{
  props->model = g_strdup (DEFAULT_MODEL);
  props->device = g_strdup (DEFAULT_DEVICE);
  props->kv = (LlmKvConfig) {
    .type = (LlmKvType) DEFAULT_KV_TYPE,
    .policy = (LlmKvPolicy) DEFAULT_KV_POLICY,
    .context_length = DEFAULT_CONTEXT_LENGTH,
    .window = DEFAULT_KV_WINDOW,
    .sink = DEFAULT_KV_SINK,
  };
  llm_engine_options_init (&props->engine);
  props->engine.n_threads = DEFAULT_N_THREADS;
  props->engine.kv_pool_bytes = DEFAULT_KV_POOL_BYTES;
  props->engine.kv_full = (LlmKvFullPolicy) DEFAULT_KV_FULL;
  props->engine.max_prefill_chunk = DEFAULT_MAX_PREFILL_CHUNK;
  props->engine.max_batch_wait_us = DEFAULT_MAX_BATCH_WAIT;
  props->engine.kv_time_slice_us = DEFAULT_KV_TIME_SLICE / GST_USECOND;
}

void
gst_llm_engine_props_clear (GstLlmEngineProps *props)
{
  g_clear_pointer (&props->model, g_free);
  g_clear_pointer (&props->device, g_free);
}

void
gst_llm_engine_props_install (GObjectClass *klass, guint first_id)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstLlmPrefill:model:
   *
   * Path of the GGUF model file, loaded when the element goes to READY
   * (and shared with other elements using the same file and device).
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + MODEL,
      g_param_spec_string ("model", "Model",
          "GGUF model file to run (loaded at the NULL to READY change)",
          DEFAULT_MODEL, rw));

  /**
   * GstLlmPrefill:device:
   *
   * Where the model runs: `cpu`, `auto` (the first accelerator, else the
   * CPU) or a backend's device name such as `cuda:0`. A device this build
   * or machine does not have fails the change to READY, naming the
   * devices that are there; there is no silent fallback.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + DEVICE,
      g_param_spec_string ("device", "Device",
          "Device to run on: cpu, auto, or a backend device such as cuda:0",
          DEFAULT_DEVICE, rw));

  /**
   * GstLlmPrefill:context-length:
   *
   * Positions the KV cache holds with kv-policy=full; 0 takes the
   * context length the model was trained with. With the window policies
   * it is the most the cache may hold: kv-window (plus kv-sink for
   * sink-window) larger than a context-length set here fails the change
   * to READY with an error naming both; left at 0, kv-window alone sets
   * the size.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + CONTEXT_LENGTH,
      g_param_spec_uint ("context-length", "Context length",
          "Positions the KV cache holds (0 = the model's training context); with the window "
          "policies, kv-window (+ kv-sink) must fit in it when set",
          0, G_MAXINT32, DEFAULT_CONTEXT_LENGTH, rw));

  /**
   * GstLlmPrefill:kv-type:
   *
   * How the KV cache stores keys and values. q8_0 and q4_0 save memory and
   * need (KV heads x head size) to be a multiple of 32.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + KV_TYPE,
      g_param_spec_enum ("kv-type", "KV cache type",
          "Storage type of the KV cache", GST_TYPE_LLM_KV_TYPE, DEFAULT_KV_TYPE, rw));

  /**
   * GstLlmPrefill:kv-policy:
   *
   * What the KV cache keeps when it is full: everything (a response that
   * fills it ends with reason `context-full`), a sliding window, or
   * attention sinks plus a window.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + KV_POLICY,
      g_param_spec_enum ("kv-policy", "KV cache policy",
          "What the KV cache keeps once full", GST_TYPE_LLM_KV_POLICY, DEFAULT_KV_POLICY, rw));

  /**
   * GstLlmPrefill:kv-window:
   *
   * Newest positions the window policies keep; 0 fills the context
   * length (less kv-sink for sink-window). When context-length is set
   * too, kv-window (plus kv-sink) must fit in it, or the change to READY
   * fails; with context-length 0 any window goes.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + KV_WINDOW,
      g_param_spec_uint ("kv-window", "KV window",
          "Newest positions kept by kv-policy window and sink-window (0 = context-length); "
          "must fit in context-length (less kv-sink) when that is set",
          0, G_MAXINT32, DEFAULT_KV_WINDOW, rw));

  /**
   * GstLlmPrefill:kv-sink:
   *
   * First positions kv-policy=sink-window always keeps (attention sinks).
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + KV_SINK,
      g_param_spec_uint ("kv-sink", "KV sink",
          "First positions kept by kv-policy sink-window", 0, G_MAXINT32, DEFAULT_KV_SINK, rw));

  /**
   * GstLlmPrefill:n-threads:
   *
   * Worker threads per session; 0 uses one per core.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "Worker threads of the forward pass (0 = one per core)",
          0, 1024, DEFAULT_N_THREADS, rw));

  /**
   * GstLlmPrefill:kv-pool-bytes:
   *
   * Limit on the KV memory of every stream that shares this element's
   * engine (same model, device and engine properties; see the
   * "gst.llm.engine" context); 0 for none. What happens at the limit is
   * kv-full.
   *
   * Since: 0.2
   */
  g_object_class_install_property (klass, first_id + KV_POOL_BYTES,
      g_param_spec_uint64 ("kv-pool-bytes", "KV pool bytes",
          "KV memory limit of all streams on the shared engine (0 = none)", 0, G_MAXUINT64,
          DEFAULT_KV_POOL_BYTES, rw));

  /**
   * GstLlmPrefill:kv-full:
   *
   * What the engine does when kv-pool-bytes is reached: refuse the stream
   * that needs more (an element error naming the limit), or let streams
   * take turns: one that needs more takes the KV of an idle stream or of
   * one that started after it (which recomputes its cache when its turn
   * comes), and otherwise waits until memory comes free; a flush or a
   * state change ends the wait.
   *
   * Since: 0.2
   */
  g_object_class_install_property (klass, first_id + KV_FULL,
      g_param_spec_enum ("kv-full", "KV pool full",
          "What to do when kv-pool-bytes is reached", GST_TYPE_LLM_KV_FULL, DEFAULT_KV_FULL,
          rw));

  /**
   * GstLlmPrefill:max-prefill-chunk:
   *
   * Prompt tokens the shared engine admits per forward between the decode
   * steps of other streams, so a long prompt never freezes their output
   * for longer than one chunk.
   *
   * Since: 0.2
   */
  g_object_class_install_property (klass, first_id + MAX_PREFILL_CHUNK,
      g_param_spec_uint ("max-prefill-chunk", "Max prefill chunk",
          "Prompt tokens per shared forward between other streams' steps", 1, 128,
          DEFAULT_MAX_PREFILL_CHUNK, rw));

  /**
   * GstLlmPrefill:max-batch-wait:
   *
   * How long (ns) a lone decode step waits for other streams' steps to
   * share its forward; 0 runs it at once (single-stream speed). The
   * engine counts whole microseconds, so the value reads back rounded
   * down to one.
   *
   * Since: 0.2
   */
  g_object_class_install_property (klass, first_id + MAX_BATCH_WAIT,
      g_param_spec_uint64 ("max-batch-wait", "Max batch wait",
          "Nanoseconds a lone step waits for company in the shared engine (0 = none)", 0,
          GST_SECOND, DEFAULT_MAX_BATCH_WAIT, rw));

  /**
   * GstLlmPrefill:kv-time-slice:
   *
   * With kv-full=preempt: how long (ns) a stream keeps its KV memory
   * while another waits for memory. A stream that has waited this long
   * takes the memory of the stream that has held its own longest (if for
   * this long too), which recomputes its cache when its own turn comes
   * round: the streams take turns a slice at a time, each recompute
   * costing a prefill of that stream's context. 0 keeps the order of
   * kv-full=preempt alone: the older streams keep their memory until
   * their responses end, so responses without end (max-tokens=0) keep a
   * younger stream waiting for as long as they run. The engine counts
   * whole microseconds.
   *
   * Since: 0.4
   */
  g_object_class_install_property (klass, first_id + KV_TIME_SLICE,
      g_param_spec_uint64 ("kv-time-slice", "KV time slice",
          "With kv-full=preempt, nanoseconds a stream keeps its KV while another waits "
          "(0 = until its response ends)", 0, MAX_KV_TIME_SLICE, DEFAULT_KV_TIME_SLICE, rw));

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_KV_TYPE, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_KV_POLICY, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_KV_FULL, 0);
}

gboolean
gst_llm_engine_props_set (GstLlmEngineProps *props, guint first_id, guint prop_id,
    const GValue *value)
{
  if (prop_id < first_id || prop_id >= first_id + GST_LLM_ENGINE_N_PROPS)
    return FALSE;

  switch (prop_id - first_id) {
    case MODEL:
      g_free (props->model);
      props->model = g_value_dup_string (value);
      break;
    case DEVICE:
      g_free (props->device);
      props->device = g_value_dup_string (value);
      if (props->device == NULL)
        props->device = g_strdup (DEFAULT_DEVICE);
      break;
    case CONTEXT_LENGTH:
      props->kv.context_length = g_value_get_uint (value);
      break;
    case KV_TYPE:
      props->kv.type = (LlmKvType) g_value_get_enum (value);
      break;
    case KV_POLICY:
      props->kv.policy = (LlmKvPolicy) g_value_get_enum (value);
      break;
    case KV_WINDOW:
      props->kv.window = g_value_get_uint (value);
      break;
    case KV_SINK:
      props->kv.sink = g_value_get_uint (value);
      break;
    case N_THREADS:
      props->engine.n_threads = (int) g_value_get_uint (value);
      break;
    case KV_POOL_BYTES:
      props->engine.kv_pool_bytes = (gsize) MIN (g_value_get_uint64 (value), G_MAXSIZE);
      break;
    case KV_FULL:
      props->engine.kv_full = (LlmKvFullPolicy) g_value_get_enum (value);
      break;
    case MAX_PREFILL_CHUNK:
      props->engine.max_prefill_chunk = g_value_get_uint (value);
      break;
    case MAX_BATCH_WAIT:
      /* the engine counts whole microseconds */
      props->engine.max_batch_wait_us = (guint) (g_value_get_uint64 (value) / GST_USECOND);
      break;
    case KV_TIME_SLICE:
      props->engine.kv_time_slice_us = g_value_get_uint64 (value) / GST_USECOND;
      break;
  }
  return TRUE;
}

gboolean
gst_llm_engine_props_get (const GstLlmEngineProps *props, guint first_id, guint prop_id,
    GValue *value)
{
  if (prop_id < first_id || prop_id >= first_id + GST_LLM_ENGINE_N_PROPS)
    return FALSE;

  switch (prop_id - first_id) {
    case MODEL:
      g_value_set_string (value, props->model);
      break;
    case DEVICE:
      g_value_set_string (value, props->device);
      break;
    case CONTEXT_LENGTH:
      g_value_set_uint (value, props->kv.context_length);
      break;
    case KV_TYPE:
      g_value_set_enum (value, props->kv.type);
      break;
    case KV_POLICY:
      g_value_set_enum (value, props->kv.policy);
      break;
    case KV_WINDOW:
      g_value_set_uint (value, props->kv.window);
      break;
    case KV_SINK:
      g_value_set_uint (value, props->kv.sink);
      break;
    case N_THREADS:
      g_value_set_uint (value, (guint) props->engine.n_threads);
      break;
    case KV_POOL_BYTES:
      g_value_set_uint64 (value, props->engine.kv_pool_bytes);
      break;
    case KV_FULL:
      g_value_set_enum (value, props->engine.kv_full);
      break;
    case MAX_PREFILL_CHUNK:
      g_value_set_uint (value, props->engine.max_prefill_chunk);
      break;
    case MAX_BATCH_WAIT:
      g_value_set_uint64 (value, props->engine.max_batch_wait_us * GST_USECOND);
      break;
    case KV_TIME_SLICE:
      g_value_set_uint64 (value, props->engine.kv_time_slice_us * GST_USECOND);
      break;
  }
  return TRUE;
}

static const char *
resolve_device (const char *device)
{
  const char *const *devices = llm_devices_available ();

  if (g_strcmp0 (device, "auto") != 0)
    return device;
  for (guint i = 0; devices[i]; i++)
    if (strcmp (devices[i], "cpu") != 0)
      return devices[i];
  return "cpu";
}

static void
report_load_error (GstElement *element, const char *path, const GError *error)
{
  if (error->domain == LLM_MODEL_ERROR) {
    GST_ELEMENT_ERROR (element, RESOURCE, FAILED,
        ("Model file \"%s\" cannot be run: %s. gst-llm runs llama, qwen2 and qwen3 models "
            "with F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights.",
            path, error->message),
        ("%s error %d", g_quark_to_string (error->domain), error->code));
  } else {
    GST_LLM_ELEMENT_ERROR_LOAD (element, "model", path, error);
  }
}

/* The window policies size the cache by kv-window (plus kv-sink), so a
 * context-length set below that contradicts them: refused, not silently
 * overridden. Left at 0, context-length lets the window set the size. */
static gboolean
check_window_fits (GstElement *element, const LlmKvConfig *kv)
{
  guint ctx = kv->context_length;
  guint sink = kv->policy == LLM_KV_POLICY_SINK_WINDOW ? kv->sink : 0;

  if (kv->policy == LLM_KV_POLICY_FULL || ctx == 0
      || (sink < ctx && (guint64) kv->window + sink <= ctx))
    return TRUE;
  if (sink >= ctx) {
    GST_ELEMENT_ERROR (element, RESOURCE, SETTINGS,
        ("kv-sink=%u leaves no room for a window in context-length=%u. Lower kv-sink or "
            "raise context-length.", sink, ctx), ("kv-policy=sink-window"));
    return FALSE;
  }
  g_autofree char *what = sink > 0
      ? g_strdup_printf ("kv-window=%u plus kv-sink=%u", kv->window, sink)
      : g_strdup_printf ("kv-window=%u", kv->window);
  GST_ELEMENT_ERROR (element, RESOURCE, SETTINGS,
      ("%s is larger than context-length=%u. Set kv-window to at most %u, raise "
          "context-length, or leave context-length at 0 to let kv-window set the cache size.",
          what, ctx, ctx - sink),
      ("kv-policy=%s", kv->policy == LLM_KV_POLICY_SINK_WINDOW ? "sink-window" : "window"));
  return FALSE;
}

/* The sizes left to the model: context-length 0 is the context it was
 * trained with, and an unset window fills the context. */
static void
fill_kv_sizes (GstElement *element, LlmKvConfig *kv, const LlmModel *model)
{
  if (kv->context_length == 0)
    kv->context_length = llm_model_hparams (model)->n_ctx_train;
  else if (kv->context_length > llm_model_hparams (model)->n_ctx_train)
    GST_WARNING_OBJECT (element, "context-length %u is beyond the %u positions %s was "
        "trained with; quality may drop past them", kv->context_length,
        llm_model_hparams (model)->n_ctx_train, llm_model_path (model));
  if (kv->window == 0) {
    guint sink = kv->policy == LLM_KV_POLICY_SINK_WINDOW ? kv->sink : 0;
    kv->window = kv->context_length > sink ? kv->context_length - sink : 1;
  }
}

gboolean
gst_llm_engine_props_open (GstElement *element, const GstLlmEngineProps *props,
    LlmEngine *from_context, LlmModel **model_out, LlmEngine **engine_out, LlmKvConfig *kv_out)
{
  GError *error = NULL;

  GST_OBJECT_LOCK (element);
  g_autofree char *path = g_strdup (props->model);
  g_autofree char *device = g_strdup (props->device);
  LlmKvConfig kv = props->kv;
  LlmEngineOptions options = props->engine;
  GST_OBJECT_UNLOCK (element);

  if (path == NULL || path[0] == '\0') {
    GST_LLM_ELEMENT_ERROR_NO_MODEL (element);
    return FALSE;
  }
  if (!check_window_fits (element, &kv))
    return FALSE;

  const char *run_on = resolve_device (device);
  const char *const *devices = llm_devices_available ();
  if (!g_strv_contains (devices, run_on)) {
    g_autofree char *avail = g_strjoinv (", ", (char **) devices);
    GST_ELEMENT_ERROR (element, RESOURCE, NOT_FOUND,
        ("Device \"%s\" is not available. Available: %s (or auto).", device, avail),
        ("set the device property to one of them"));
    return FALSE;
  }

  g_autoptr (LlmModel) model = llm_model_get (path, run_on, &error);
  if (model == NULL) {
    report_load_error (element, path, error);
    g_error_free (error);
    return FALSE;
  }
  LlmEngine *engine = gst_llm_engine_acquire (element, from_context, model, &options, &error);
  if (engine == NULL) {
    GST_ELEMENT_ERROR (element, RESOURCE, FAILED,
        ("Cannot start the engine for \"%s\": %s.", path, error->message), (NULL));
    g_error_free (error);
    return FALSE;
  }
  fill_kv_sizes (element, &kv, model);

  *model_out = g_steal_pointer (&model);
  *engine_out = engine;
  *kv_out = kv;
  return TRUE;
}
