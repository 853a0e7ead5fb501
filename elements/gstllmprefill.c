/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmprefill
 * @title: llmprefill
 * @short_description: runs a model over a prompt, leaving the first token to be sampled
 *
 * llmprefill loads a GGUF model and turns prompts of token ids
 * (`application/x-llm-tokens`) into model state
 * (`application/x-llm-state`): for each prompt it runs the model over all
 * its ids in one batched forward pass, filling the KV cache of a session
 * and leaving the logits of the last position in it. It does not sample:
 * the element downstream that samples (llmdecode) picks the first token
 * of the answer from those logits. It pushes one buffer per prompt whose
 * payload is the ids it fed (the prompt as wrapped by
 * #GstLlmPrefill:system-prompt and #GstLlmPrefill:prompt-template; int32,
 * little endian) and which carries a #GstLlmSessionMeta with the session,
 * marked as having logits to sample. The buffer has the PTS and duration
 * of the prompt.
 *
 * What is a prompt depends on #GstLlmPrefill:prompt-mode. By default
 * (`event`) token buffers accumulate until an `llm-end-of-prompt` event or
 * EOS, because llmtokenize streams a text word by word and so splits one
 * prompt over several buffers. With `buffer` each input buffer is one
 * prompt (ids replayed from a file, an application pushing whole prompts).
 * A prompt whose end never comes is bounded: with the full cache, one
 * longer than the context is an error as soon as it arrives; under the
 * window policies, 65536 ids are answered as they stand, with a warning.
 *
 * It also takes media: `application/x-llm-embeddings` from
 * llmvisionencode or llmaudioencode (rows as wide as the model's
 * embeddings; another width is refused at caps negotiation, naming both).
 * Each media item (a frame, an audio chunk) goes into the text of
 * #GstLlmPrefill:prompt, e.g. "Describe this frame in one sentence.", as
 * llama.cpp's mtmd does it: the text is tokenized around each
 * `<__media__>` marker, the marker becomes the item's rows inside the
 * delimiter tokens its projector's model expects (SmolVLM's
 * `<fake_token_around_image><global-img>`), and an item without a marker
 * goes in front of the text. #GstLlmPrefill:prompt-template and
 * #GstLlmPrefill:system-prompt wrap it as they wrap a text prompt. A
 * prompt with k markers runs once k items have come (k = 1 without a
 * marker), or at `llm-end-of-prompt` or EOS with the items that came;
 * in `buffer` mode every item is a prompt of its own. The state buffer
 * has the PTS of the first item and lasts to the end of the last, so the
 * caption made from it carries the media's time. In the payload of that
 * buffer, a media row is the id -1.
 *
 * Each prompt starts a new conversation unless #GstLlmPrefill:keep-context
 * is set; then it continues the previous one, after the previous response
 * has finished. Chat models want their prompts wrapped in a chat template:
 * #GstLlmPrefill:prompt-template wraps each prompt and
 * #GstLlmPrefill:system-prompt starts each conversation; both are
 * tokenized with the model's tokenizer with special tokens parsed, so
 * `<|im_start|>` and friends become their ids.
 *
 * The sampler properties (`temperature`, `top-k`, `top-p`, `min-p`,
 * `repeat-penalty`, `repeat-last-n`, `seed`) belong to llmdecode, the
 * element that samples. llmprefill keeps them as aliases, so that launch
 * lines that set them here work as before: a value set here becomes the
 * sampler setting of the sessions this element makes, which llmdecode
 * uses unless the same property is set on llmdecode. A property set on
 * llmdecode wins over one set on llmprefill, which wins over the default.
 *
 * The model is loaded when the element goes to READY and shared with every
 * other element of the process that uses the same file on the same
 * device; the KV cache settings and the sampler aliases are read at that
 * moment too. A missing or damaged model, a device that is not available
 * or a KV cache setting the model cannot use fail that state change with
 * an error that says what to change.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf ! \
 *     llmprefill model=stories260K.gguf ! llmdecode max-tokens=64 ! \
 *     llmdetokenize model=stories260K.gguf ! fdsink
 * ]| Prints a continuation of the text in prompt.txt (greedy).
 *
 * |[
 * gst-launch-1.0 fdsrc ! llmtokenize model=qwen2.5-0.5b-instruct-q8_0.gguf ! \
 *     llmprefill model=qwen2.5-0.5b-instruct-q8_0.gguf \
 *       system-prompt="<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" \
 *       prompt-template="<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n" ! \
 *     llmdecode temperature=0.7 ! llmdetokenize model=qwen2.5-0.5b-instruct-q8_0.gguf ! fdsink
 * ]| Answers the question read from stdin with a Qwen chat model (ChatML
 * template). gst-launch does not turn `\n` into a newline; pass real
 * newlines from a shell ($'...' in bash), as pipelines/chat.sh does.
 *
 * Since: 0.1
 */
#include "config.h"

#include <stdatomic.h>
#include <string.h>

#include "gstllmelements.h"
#include "gstllmcontext.h"
#include "gstllmengineprops.h"
#include "gstllmlatency.h"
#include "gstllmsamplerprops.h"
#include "chat-template.h"
#include "media-prompt.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "model.h"
#include "session-pool.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_prefill_debug);
#define GST_CAT_DEFAULT gst_llm_prefill_debug

/**
 * GstLlmPromptMode:
 * @GST_LLM_PROMPT_MODE_BUFFER: each input buffer is a whole prompt
 * @GST_LLM_PROMPT_MODE_EVENT: a prompt is all ids up to an
 *   `llm-end-of-prompt` event or EOS
 *
 * Where llmprefill takes a prompt to end.
 *
 * Since: 0.1
 */
typedef enum {
  GST_LLM_PROMPT_MODE_BUFFER,
  GST_LLM_PROMPT_MODE_EVENT,
} GstLlmPromptMode;

#define GST_TYPE_LLM_PROMPT_MODE (gst_llm_prompt_mode_get_type ())
static GType
gst_llm_prompt_mode_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_PROMPT_MODE_BUFFER, "Each input buffer is a whole prompt", "buffer"},
    {GST_LLM_PROMPT_MODE_EVENT, "A prompt ends at an llm-end-of-prompt event or EOS", "event"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmPromptMode", values));
  return type;
}

#define DEFAULT_SYSTEM_PROMPT NULL
#define DEFAULT_PROMPT_TEMPLATE NULL
#define DEFAULT_PROMPT_MODE GST_LLM_PROMPT_MODE_EVENT
#define DEFAULT_KEEP_CONTEXT FALSE

/* prompt-template value that picks the wrapper from the model's chat template. */
#define PROMPT_TEMPLATE_AUTO "auto"

/* Sessions a prefill keeps at once. More than one lets it prefill the next
 * prompt while llmdecode still generates from the previous session (or
 * holds queued prompts); past this, it waits for one to come back, which
 * bounds memory whatever sits between the elements. */
#define MAX_SESSIONS 4

enum {
  PROP_0,
  PROP_ACTIVE_DEVICE,
  PROP_SYSTEM_PROMPT,
  PROP_PROMPT_TEMPLATE,
  PROP_PROMPT_MODE,
  PROP_KEEP_CONTEXT,
  PROP_PROMPT,
  PROP_ENGINE_FIRST,
  PROP_SAMPLER_FIRST = PROP_ENGINE_FIRST + GST_LLM_ENGINE_N_PROPS,
};

/* What the properties set; object lock. The KV cache and sampler parts
 * are the config of every session, taken at NULL->READY. */
typedef struct {
  GstLlmEngineProps engine;     /* model, device, KV cache, shared engine */
  GstLlmSamplerProps sampler;   /* aliases of llmdecode's */
  char *system_prompt;
  char *prompt_template;
  GstLlmPromptMode prompt_mode;
  gboolean keep_context;
  char *prompt;                 /* the text around media items */
} Settings;

#define GST_TYPE_LLM_PREFILL (gst_llm_prefill_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmPrefill, gst_llm_prefill, GST, LLM_PREFILL, GstElement)

struct _GstLlmPrefill {
  GstElement parent;

  GstPad *sinkpad, *srcpad;

  Settings settings;            /* object lock */

  /* a "gst.llm.engine" context handed to us (object lock) */
  LlmEngine *context_engine;
  gboolean context_persistent;  /* context_engine outlives NULL */

  /* from NULL->READY to READY->NULL; active_device and vocab_hash also
   * under the object lock, as property reads and caps queries come from
   * any thread */
  LlmModel *llm;
  LlmEngine *engine;            /* shared with every element on this model and options */
  char *active_device;
  char vocab_hash[GST_LLM_VOCAB_HASH_LEN + 1];
  LlmSessionPool *pool;

  /* streaming thread */
  gboolean vocab_error_posted;  /* one vocabulary (or width) error per run is enough */
  GArray *prompt;               /* gint32, ids of the prompt so far (event mode) */
  LlmKvConfig kv;               /* every session's, from NULL->READY */
  gboolean long_prompt_warned;  /* once per run */
  GstClockTime prompt_pts;
  GstClockTime prompt_end;
  GArray *ids;                  /* scratch: what is fed */
  /* media input: from the caps */
  gboolean media;
  char *projector;
  /* media items of the prompt so far: their rows and row counts */
  GArray *media_rows;           /* float */
  GArray *media_items;          /* LlmMediaItem */

  GstLlmLatency latency;        /* of a prefill; object lock */
};

G_DEFINE_TYPE (GstLlmPrefill, gst_llm_prefill, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmprefill, "llmprefill", GST_RANK_NONE,
    GST_TYPE_LLM_PREFILL, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_LLM_CAPS_TOKENS "; " GST_LLM_CAPS_EMBEDDINGS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_STATE_MEDIA_TYPE));

/* --- prompts --------------------------------------------------------- */

typedef struct {
  LlmSessionPool *pool;
  LlmSession *session;
} Lease;

/* The state buffer that carried the session is gone: downstream no
 * longer feeds it. Runs in whatever thread dropped the buffer. */
static void
lease_returned (gpointer data, GstMiniObject *buffer)
{
  Lease *lease = data;

  llm_session_pool_release (lease->pool, lease->session);
  llm_session_pool_unref (lease->pool);
  g_free (lease);
}

/* Keeps @session busy until @buffer is freed. Copies of the buffer hold
 * the session too, but nothing between prefill and decode copies a state
 * buffer; llmdecode keeps this very buffer until it stops feeding. */
static void
lease_until_freed (LlmSessionPool *pool, LlmSession *session, GstBuffer *buffer)
{
  Lease *lease = g_new (Lease, 1);

  lease->pool = llm_session_pool_ref (pool);
  lease->session = session;
  gst_mini_object_weak_ref (GST_MINI_OBJECT (buffer), lease_returned, lease);
}

/* Builds what is fed for @prompt into self->ids: the prompt inside the
 * system prompt and template, if any. */
static gboolean
build_input (GstLlmPrefill *self, const gint32 *prompt, guint n, gboolean conversation_start)
{
  const LlmTokenizer *tok = llm_model_tokenizer (self->llm);

  GST_OBJECT_LOCK (self);
  g_autofree char *system_prompt = g_strdup (self->settings.system_prompt);
  g_autofree char *template = g_strdup (self->settings.prompt_template);
  GST_OBJECT_UNLOCK (self);

  if (tok == NULL && ((system_prompt && system_prompt[0]) || (template && template[0]))) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("system-prompt and prompt-template need a tokenizer, but model \"%s\" has none.",
            llm_model_path (self->llm)),
        ("use a GGUF with tokenizer.ggml.* keys, or leave both properties unset"));
    return FALSE;
  }
  if (g_strcmp0 (template, PROMPT_TEMPLATE_AUTO) == 0) {
    GError *error = NULL;
    g_free (template);
    template = llm_chat_template_wrapper (llm_model_gguf (self->llm), &error);
    if (template == NULL) {
      GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
          ("prompt-template=auto cannot be used with model \"%s\".", llm_model_path (self->llm)),
          ("%s", error->message));
      g_error_free (error);
      return FALSE;
    }
  }

  g_array_set_size (self->ids, 0);
  if (self->media) {
    GST_OBJECT_LOCK (self);
    g_autofree char *text = g_strdup (self->settings.prompt);
    GST_OBJECT_UNLOCK (self);
    if (tok == NULL) {
      GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
          ("A prompt around media needs a tokenizer, but model \"%s\" has none.",
              llm_model_path (self->llm)),
          ("use a GGUF with tokenizer.ggml.* keys"));
      return FALSE;
    }
    llm_media_prompt_build (tok, system_prompt, template, text, conversation_start,
        (const LlmMediaItem *) self->media_items->data, self->media_items->len, self->projector,
        self->ids);
    return TRUE;
  }
  llm_chat_template_wrap (tok, system_prompt, template, prompt, n, conversation_start,
      self->ids);
  return TRUE;
}

static GstCaps *own_caps (GstLlmPrefill *self, const char *media_type);

/* Downstream refused our caps, or a buffer as not negotiated: if it wants
 * another vocabulary (llmdetokenize of another model after llmdecode),
 * says so by name, once per run. TRUE when that error was posted. */
static gboolean
report_refusal (GstLlmPrefill *self)
{
  if (!self->vocab_error_posted) {
    GstCaps *ours = own_caps (self, GST_LLM_STATE_MEDIA_TYPE);
    self->vocab_error_posted = GST_LLM_ELEMENT_ERROR_VOCAB (self, self->srcpad, ours,
        llm_model_path (self->llm));
    gst_caps_unref (ours);
  }
  return self->vocab_error_posted;
}

/* Prompts prefilled in this process (the last prompt_serial given): one
 * count for every element, so a decoder's view of which prompts an
 * llm-prompt-waiting supersedes survives an llmprefill restarting. */
static atomic_uint_least64_t prompts_prefilled;

/* Feeds one prompt and pushes the state buffer that leaves its first
 * token to be sampled downstream. */
static GstFlowReturn
run_prompt (GstLlmPrefill *self, const gint32 *prompt, guint n, GstClockTime pts,
    GstClockTime duration)
{
  GError *error = NULL;
  gboolean keep_context;

  if (n == 0 && !self->media)
    return GST_FLOW_OK;

  GST_OBJECT_LOCK (self);
  keep_context = self->settings.keep_context;
  GST_OBJECT_UNLOCK (self);

  /* The conversation's session may be busy with the last response: a
   * decoder that replaces responses with newer prompts lets it go. */
  if (keep_context)
    gst_pad_push_event (self->srcpad,
        gst_llm_event_new_prompt_waiting (atomic_load (&prompts_prefilled)));
  LlmSession *session = llm_session_pool_acquire (self->pool, keep_context, &error);
  if (session == NULL) {
    if (error == NULL)
      return GST_FLOW_FLUSHING;
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Cannot start a session on \"%s\": %s.", llm_model_path (self->llm), error->message),
        ("%s error %d", g_quark_to_string (error->domain), error->code));
    g_error_free (error);
    return GST_FLOW_ERROR;
  }

  if (!keep_context)
    llm_session_reset (session);
  gboolean conversation_start = llm_session_n_ids (session) == 0;
  if (!build_input (self, prompt, n, conversation_start)) {
    llm_session_pool_release (self->pool, session);
    return GST_FLOW_ERROR;
  }

  /* TTFT counts from here: waiting for a session (the previous response
   * of a kept conversation) is the previous response's time, not ours. */
  gint64 prompt_time = g_get_monotonic_time ();
  guint n_ids = self->ids->len;
  GST_DEBUG_OBJECT (self, "prefill of %u ids (%u from the prompt) after %u", n_ids, n,
      llm_session_n_ids (session));
  const float *media = self->media ? (const float *) self->media_rows->data : NULL;
  /* A flush or shutdown ends a wait for KV memory other streams hold. */
  llm_session_set_cancel_flag (session, llm_session_pool_flushing_flag (self->pool));
  gboolean fed = llm_session_feed_embd (session, (const gint32 *) self->ids->data, media,
      n_ids, &error);
  llm_session_set_cancel_flag (session, NULL);
  if (!fed) {
    guint held = llm_session_n_ids (session);
    const gboolean pool_full = g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL)
        || g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_PREEMPTED);
    /* Weighed while the session still holds its blocks: releasing them
     * below would make the others' share look like all there is. */
    g_autofree char *advice = pool_full ? gst_llm_kv_pool_advice (self->engine,
        llm_session_kv_bytes (session), keep_context ? "keep the conversation shorter "
        "(kv-policy=window, a smaller context-length, or keep-context off)"
        : "send shorter prompts") : NULL;
    /* The session may hold part of the prompt now; start over next time. */
    llm_session_reset (session);
    llm_session_pool_release (self->pool, session);
    if (g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CANCELLED)) {
      GST_DEBUG_OBJECT (self, "flushing while waiting for KV memory");
      g_error_free (error);
      return GST_FLOW_FLUSHING;
    }
    if (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL)) {
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("The prompt (%u tokens, after %u in the conversation) does not fit in the "
              "context. Raise context-length (the model was trained with %u), use "
              "kv-policy=window or sink-window%s.", n_ids, held, llm_model_hparams (self->llm)->n_ctx_train,
              keep_context ? ", or turn keep-context off" : ""),
          ("%s", error->message));
    } else if (pool_full) {
      GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
          ("The engine's KV memory is used up: %s. %s", error->message, advice), (NULL));
    } else if (g_error_matches (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_TOKEN)) {
      GST_ELEMENT_ERROR (self, STREAM, FORMAT,
          ("The prompt holds a token id the model does not know: %s. Tokenize with "
              "the same model (llmtokenize model=%s).", error->message, llm_model_path (self->llm)),
          (NULL));
    } else {
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("Running the model over the prompt failed: %s.", error->message),
          ("%s error %d", g_quark_to_string (error->domain), error->code));
    }
    g_error_free (error);
    return GST_FLOW_ERROR;
  }
  gint64 took_us = g_get_monotonic_time () - prompt_time;
  GST_DEBUG_OBJECT (self, "prefill of %u ids took %.3f ms", n_ids, took_us / 1000.0);
  gst_llm_latency_note (GST_ELEMENT (self), &self->latency, took_us * GST_USECOND);

  GstBuffer *out = gst_llm_tokens_buffer_new ((const gint32 *) self->ids->data, n_ids);
  GstLlmSessionMeta *meta = gst_buffer_add_llm_session_meta (out, session);
  meta->prompt_pts = pts;
  meta->prompt_time_us = prompt_time;
  meta->prompt_tokens = n_ids;
  meta->logits_pending = TRUE;
  meta->prompt_serial = atomic_fetch_add (&prompts_prefilled, 1) + 1;
  GST_BUFFER_PTS (out) = pts;
  GST_BUFFER_DURATION (out) = duration;
  lease_until_freed (self->pool, session, out);

  GstFlowReturn ret = gst_pad_push (self->srcpad, out);
  if (ret == GST_FLOW_NOT_NEGOTIATED)
    report_refusal (self);
  return ret;
}

static void
clear_prompt (GstLlmPrefill *self)
{
  g_array_set_size (self->prompt, 0);
  g_array_set_size (self->media_rows, 0);
  g_array_set_size (self->media_items, 0);
  self->prompt_pts = GST_CLOCK_TIME_NONE;
  self->prompt_end = GST_CLOCK_TIME_NONE;
}

/* Event mode: the ids gathered so far are a prompt. */
static GstFlowReturn
finish_prompt (GstLlmPrefill *self)
{
  GstClockTime duration = GST_CLOCK_TIME_NONE;
  GstFlowReturn ret;

  if (self->prompt->len == 0 && self->media_items->len == 0)
    return GST_FLOW_OK;
  if (GST_CLOCK_TIME_IS_VALID (self->prompt_pts) && GST_CLOCK_TIME_IS_VALID (self->prompt_end)
      && self->prompt_end >= self->prompt_pts)
    duration = self->prompt_end - self->prompt_pts;
  /* run_prompt copies the ids into the fed input; clear after */
  ret = run_prompt (self, (const gint32 *) self->prompt->data, self->prompt->len,
      self->prompt_pts, duration);
  clear_prompt (self);
  return ret;
}

/* Event mode holds a prompt until its end comes; a live source that never
 * ends one must not make it hold ids for ever. A window cache slides over
 * a prompt of any length, so past this many ids the prompt is answered
 * as it stands (as llmtokenize cuts text it cannot hold); a full cache
 * can never take more than its context length, so more is refused at
 * once instead of when the prompt ends. */
#define MAX_HELD_PROMPT_IDS (64 * 1024)

static GstFlowReturn
bound_held_prompt (GstLlmPrefill *self)
{
  const guint held = self->prompt->len;
  if (self->kv.policy == LLM_KV_POLICY_FULL && held > self->kv.context_length) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("A prompt of over %u tokens, more than the context holds (%u), has arrived "
            "without its end. End prompts with llm-end-of-prompt events (or EOS), use "
            "prompt-mode=buffer, raise context-length, or use kv-policy=window or "
            "sink-window.", held, self->kv.context_length),
        ("prompt-mode=event"));
    clear_prompt (self);
    return GST_FLOW_ERROR;
  }
  if (held < MAX_HELD_PROMPT_IDS)
    return GST_FLOW_OK;
  if (!self->long_prompt_warned) {
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("A prompt of %u tokens has arrived without its end; answering it as it "
            "stands, and holding no more than %d tokens of a prompt from here on.",
            held, MAX_HELD_PROMPT_IDS),
        ("send llm-end-of-prompt events to end prompts, or use prompt-mode=buffer"));
    self->long_prompt_warned = TRUE;
  }
  return finish_prompt (self);
}

/* Adds @buffer's media item to the prompt, and runs the prompt once it
 * holds as many items as the prompt text has markers (or in buffer mode,
 * at once). */
static GstFlowReturn
chain_media (GstLlmPrefill *self, GstBuffer *buffer)
{
  const guint dim = llm_model_hparams (self->llm)->n_embd;
  const gsize size = gst_buffer_get_size (buffer), row = (gsize) dim * sizeof (float);
  if (size == 0 || size % row != 0) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Received a media buffer that is not a whole number of embedding rows."),
        ("%" G_GSIZE_FORMAT " bytes; rows of %u floats are %" G_GSIZE_FORMAT " bytes",
            size, dim, row));
    gst_buffer_unref (buffer);
    return GST_FLOW_ERROR;
  }
  GST_OBJECT_LOCK (self);
  const GstLlmPromptMode mode = self->settings.prompt_mode;
  const guint wanted = MAX (llm_media_prompt_count_markers (self->settings.prompt), 1);
  GST_OBJECT_UNLOCK (self);

  if (self->media_items->len == 0)
    self->prompt_pts = GST_BUFFER_PTS (buffer);
  self->prompt_end = GST_CLOCK_TIME_NONE;
  if (GST_BUFFER_PTS_IS_VALID (buffer) && GST_BUFFER_DURATION_IS_VALID (buffer))
    self->prompt_end = GST_BUFFER_PTS (buffer) + GST_BUFFER_DURATION (buffer);
  const guint rows = (guint) (size / row), old = self->media_rows->len;
  g_array_set_size (self->media_rows, old + rows * dim);
  gst_buffer_extract (buffer, 0, &g_array_index (self->media_rows, float, old), size);
  LlmMediaItem item = { rows, 0, 0 };
  const GstLlmEmbeddingsMeta *meta = gst_buffer_get_llm_embeddings_meta (buffer);
  if (meta && meta->n_rows == rows) {
    item.tiles_x = meta->tiles_x;
    item.tiles_y = meta->tiles_y;
  }
  g_array_append_val (self->media_items, item);
  gst_buffer_unref (buffer);
  if (mode == GST_LLM_PROMPT_MODE_BUFFER || self->media_items->len >= wanted)
    return finish_prompt (self);
  return GST_FLOW_OK;
}

static GstFlowReturn
gst_llm_prefill_chain (GstPad *pad, GstObject *parent, GstBuffer *buffer)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (parent);
  GstLlmPromptMode mode;
  GstFlowReturn ret = GST_FLOW_OK;

  if (self->media)
    return chain_media (self, buffer);

  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));

  if (!gst_llm_tokens_buffer_read (buffer, ids)) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Received a token buffer that is not a whole number of token ids."),
        ("%" G_GSIZE_FORMAT " bytes; application/x-llm-tokens buffers hold "
            "%d-byte little-endian ids", gst_buffer_get_size (buffer), GST_LLM_TOKEN_SIZE));
    g_array_unref (ids);
    gst_buffer_unref (buffer);
    return GST_FLOW_ERROR;
  }

  GST_OBJECT_LOCK (self);
  mode = self->settings.prompt_mode;
  GST_OBJECT_UNLOCK (self);

  if (mode == GST_LLM_PROMPT_MODE_BUFFER) {
    /* Ids held from event mode were a prompt before this buffer: the
     * switch ended it, and it is answered first. */
    ret = finish_prompt (self);
    if (ret == GST_FLOW_OK)
      ret = run_prompt (self, (const gint32 *) ids->data, ids->len, GST_BUFFER_PTS (buffer),
          GST_BUFFER_DURATION (buffer));
  } else if (ids->len > 0) {
    if (self->prompt->len == 0)
      self->prompt_pts = GST_BUFFER_PTS (buffer);
    self->prompt_end = GST_CLOCK_TIME_NONE;
    if (GST_BUFFER_PTS_IS_VALID (buffer) && GST_BUFFER_DURATION_IS_VALID (buffer))
      self->prompt_end = GST_BUFFER_PTS (buffer) + GST_BUFFER_DURATION (buffer);
    g_array_append_vals (self->prompt, ids->data, ids->len);
    GST_LOG_OBJECT (self, "prompt holds %u ids", self->prompt->len);
    ret = bound_held_prompt (self);
  }

  g_array_unref (ids);
  gst_buffer_unref (buffer);
  return ret;
}

static GstCaps *
own_caps (GstLlmPrefill *self, const char *media_type)
{
  GstCaps *caps = gst_caps_new_empty_simple (media_type);

  GST_OBJECT_LOCK (self);
  if (self->vocab_hash[0])
    gst_caps_set_simple (caps, GST_LLM_CAPS_FIELD_VOCAB, G_TYPE_STRING, self->vocab_hash,
        NULL);
  GST_OBJECT_UNLOCK (self);
  return caps;
}

/* Input without caps (filesrc replaying ids) still gets our caps out
 * before its first buffer. */
static gboolean
set_src_caps (GstLlmPrefill *self)
{
  GstCaps *caps = own_caps (self, GST_LLM_STATE_MEDIA_TYPE);
  gboolean ok = gst_pad_set_caps (self->srcpad, caps);
  gst_caps_unref (caps);
  if (!ok)
    report_refusal (self);
  return ok;
}

static gboolean
ensure_src_caps (GstLlmPrefill *self)
{
  return gst_pad_has_current_caps (self->srcpad) || set_src_caps (self);
}

/* Embedding caps: rows as wide as our model's embeddings. */
static gboolean
set_media_caps (GstLlmPrefill *self, GstCaps *caps)
{
  guint dim = 0;
  const char *modality = NULL, *projector = NULL;
  const guint n_embd = llm_model_hparams (self->llm)->n_embd;
  if (!gst_llm_caps_parse_embeddings (caps, &dim, &modality, &projector)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Cannot read these media caps."),
        ("want application/x-llm-embeddings with dim, format=F32 and modality; got %"
            GST_PTR_FORMAT, caps));
    return FALSE;
  }
  if (dim != n_embd) {
    /* The caps event is sticky and comes again with every buffer. */
    if (self->vocab_error_posted)
      return FALSE;
    self->vocab_error_posted = TRUE;
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("The %s rows are %u wide, but model \"%s\" takes embeddings of %u. Use the "
            "projector (mmproj) file made for this model.", modality, dim,
            llm_model_path (self->llm), n_embd),
        ("refused %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  if (self->media_items->len > 0)
    GST_WARNING_OBJECT (self, "new media caps mid-prompt: the prompt keeps its items");
  self->media = TRUE;
  g_free (self->projector);
  self->projector = g_strdup (projector);
  return set_src_caps (self);
}

static gboolean
set_sink_caps (GstLlmPrefill *self, GstCaps *caps)
{
  if (gst_caps_get_size (caps) > 0 && gst_structure_has_name (gst_caps_get_structure (caps, 0),
          GST_LLM_EMBEDDINGS_MEDIA_TYPE))
    return set_media_caps (self, caps);
  self->media = FALSE;
  const char *vocab = gst_llm_caps_get_vocab (caps);

  GST_OBJECT_LOCK (self);
  gboolean match = vocab == NULL || self->vocab_hash[0] == '\0'
      || strcmp (vocab, self->vocab_hash) == 0;
  GST_OBJECT_UNLOCK (self);
  if (!match) {
    /* As for media caps: once is enough for a caps event that comes again. */
    if (self->vocab_error_posted)
      return FALSE;
    self->vocab_error_posted = TRUE;
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("The token ids are of another vocabulary (vocab=%s) than model \"%s\" "
            "(vocab=%s). Tokenize with the same model, or one with the same tokenizer.",
            vocab, llm_model_path (self->llm), self->vocab_hash),
        ("refused %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  return set_src_caps (self);
}

/* EOS or llm-end-of-prompt ends the prompt. An event handler cannot
 * return the flow of the push this makes, so a fatal one is posted as a
 * source would, and the event goes no further: the pipeline ends with the
 * error rather than an EOS that hides it. */
static gboolean
finish_prompt_at_event (GstLlmPrefill *self)
{
  GstFlowReturn ret = finish_prompt (self);

  if (ret == GST_FLOW_NOT_NEGOTIATED && report_refusal (self))
    return FALSE;
  if (ret == GST_FLOW_NOT_LINKED || ret == GST_FLOW_NOT_NEGOTIATED)
    GST_ELEMENT_FLOW_ERROR (self, ret);
  return ret == GST_FLOW_OK || ret == GST_FLOW_FLUSHING || ret == GST_FLOW_EOS;
}

static gboolean
gst_llm_prefill_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (parent);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:{
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      gboolean ok = set_sink_caps (self, caps);
      gst_event_unref (event);
      return ok;
    }
    case GST_EVENT_SEGMENT:
      if (!ensure_src_caps (self)) {
        gst_event_unref (event);
        return FALSE;
      }
      break;
    case GST_EVENT_FLUSH_START:
      /* wake a wait for a session, so the flush does not wait on decode */
      llm_session_pool_set_flushing (self->pool, TRUE);
      break;
    case GST_EVENT_FLUSH_STOP:
      clear_prompt (self);
      llm_session_pool_set_flushing (self->pool, FALSE);
      break;
    case GST_EVENT_STREAM_START:
      /* A new stream (concat's next file) begins a new prompt: what the
       * last one left is a whole prompt, as at EOS; and so at the end of a
       * segment seek's segment, which comes in place of EOS. */
    case GST_EVENT_SEGMENT_DONE:
    case GST_EVENT_EOS:
      /* EOS ends the last prompt in either mode's sense: nothing follows */
      if (!finish_prompt_at_event (self)) {
        gst_event_unref (event);
        return FALSE;
      }
      break;
    case GST_EVENT_CUSTOM_DOWNSTREAM:
      if (gst_llm_event_is_end_of_prompt (event) && !finish_prompt_at_event (self)) {
        gst_event_unref (event);
        return FALSE;
      }
      break;
    default:
      break;
  }
  return gst_pad_event_default (pad, parent, event);
}

static gboolean
gst_llm_prefill_sink_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_CAPS:{
      GstCaps *caps = own_caps (self, GST_LLM_TOKENS_MEDIA_TYPE);
      GstCaps *media = gst_caps_from_string (GST_LLM_CAPS_EMBEDDINGS);
      /* Before the model is loaded any width; then the model's. */
      if (self->llm != NULL)
        gst_caps_set_simple (media, "dim", G_TYPE_INT,
            (gint) llm_model_hparams (self->llm)->n_embd, NULL);
      gst_caps_append (caps, media);
      return gst_llm_answer_caps_query (query, caps);
    }
    case GST_QUERY_ACCEPT_CAPS:{
      /* Any token caps pass here so that the caps event reaches
       * set_sink_caps, which refuses another vocabulary with an error
       * that says so (a refused accept-caps only gives not-negotiated). */
      GstCaps *caps, *templ = gst_pad_get_pad_template_caps (pad);
      gst_query_parse_accept_caps (query, &caps);
      gst_query_set_accept_caps_result (query, gst_caps_is_subset (caps, templ));
      gst_caps_unref (templ);
      return TRUE;
    }
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

static gboolean
gst_llm_prefill_src_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_CAPS:
      return gst_llm_answer_caps_query (query, own_caps (self, GST_LLM_STATE_MEDIA_TYPE));
    case GST_QUERY_LATENCY:
      /* The first token can be sampled one prefill after its prompt
       * arrived: the slowest recent prefill. */
      return gst_llm_latency_answer (GST_ELEMENT (self), &self->latency, self->sinkpad, query);
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

/* --- state ----------------------------------------------------------- */

static gboolean
load_model (GstLlmPrefill *self)
{
  GError *error = NULL;
  LlmSessionConfig config;

  GST_OBJECT_LOCK (self);
  g_autoptr (LlmEngine) context_engine =
      self->context_engine ? llm_engine_ref (self->context_engine) : NULL;
  config.sampler = self->settings.sampler.params;
  GST_OBJECT_UNLOCK (self);

  if (!gst_llm_engine_props_open (GST_ELEMENT (self), &self->settings.engine, context_engine,
          &self->llm, &self->engine, &config.kv))
    return FALSE;

  /* The first session now, so that a KV cache setting this model cannot
   * use fails the state change rather than the first prompt. */
  self->pool = llm_session_pool_new (self->engine, &config, MAX_SESSIONS);
  LlmSession *first = llm_session_pool_acquire (self->pool, FALSE, &error);
  if (first == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("Cannot set up a session for \"%s\": %s.", llm_model_path (self->llm), error->message),
        ("kv-type=%s kv-policy=%d context-length=%u kv-window=%u kv-sink=%u",
            llm_kv_type_name (config.kv.type), config.kv.policy, config.kv.context_length,
            config.kv.window, config.kv.sink));
    g_error_free (error);
    return FALSE;
  }
  llm_session_pool_release (self->pool, first);
  self->kv = config.kv;
  self->long_prompt_warned = FALSE;

  LlmModel *llm = self->llm;
  const LlmVocab *vocab = llm_model_tokenizer (llm) ? llm_tokenizer_vocab (llm_model_tokenizer (llm)) : NULL;
  GST_OBJECT_LOCK (self);
  g_free (self->active_device);
  self->active_device = g_strdup (llm_model_device (llm));
  if (vocab)
    g_strlcpy (self->vocab_hash, vocab->hash, sizeof self->vocab_hash);
  GST_OBJECT_UNLOCK (self);

  GST_INFO_OBJECT (self, "%s on %s: %s, %u layers, context %u, KV %s, vocab=%s", llm_model_path (llm),
      llm_model_device (llm), llm_arch_name (llm_model_hparams (llm)->arch), llm_model_hparams (llm)->n_layer, config.kv.context_length,
      llm_kv_type_name (config.kv.type), vocab ? vocab->hash : "(none)");
  return TRUE;
}

static void
unload_model (GstLlmPrefill *self)
{
  if (self->pool) {
    llm_session_pool_clear (self->pool);
    g_clear_pointer (&self->pool, llm_session_pool_unref);
  }
  g_clear_pointer (&self->engine, llm_engine_unref);
  g_clear_pointer (&self->llm, llm_model_unref);
  GST_OBJECT_LOCK (self);
  g_clear_pointer (&self->active_device, g_free);
  self->vocab_hash[0] = '\0';
  GST_OBJECT_UNLOCK (self);
  gst_llm_latency_reset (GST_ELEMENT (self), &self->latency);
}

static GstStateChangeReturn
gst_llm_prefill_change_state (GstElement *element, GstStateChange transition)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (element);
  GstStateChangeReturn ret;

  switch (transition) {
    case GST_STATE_CHANGE_NULL_TO_READY:
      /* Loaded now so that caps queries in READY answer with the
       * vocabulary and a bad file or setting fails the first change. */
      if (!load_model (self)) {
        unload_model (self);
        return GST_STATE_CHANGE_FAILURE;
      }
      break;
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      llm_session_pool_set_flushing (self->pool, FALSE);
      clear_prompt (self);
      self->vocab_error_posted = FALSE;
      break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      /* a chain waiting for a session must let the pads deactivate */
      llm_session_pool_set_flushing (self->pool, TRUE);
      break;
    default:
      break;
  }

  ret = GST_ELEMENT_CLASS (gst_llm_prefill_parent_class)->change_state (element, transition);

  switch (transition) {
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      clear_prompt (self);
      break;
    case GST_STATE_CHANGE_READY_TO_NULL:
      unload_model (self);
      /* as the pipeline forgets such a context in NULL */
      GST_OBJECT_LOCK (self);
      if (!self->context_persistent)
        g_clear_pointer (&self->context_engine, llm_engine_unref);
      GST_OBJECT_UNLOCK (self);
      break;
    case GST_STATE_CHANGE_NULL_TO_READY:
      if (ret == GST_STATE_CHANGE_FAILURE)
        unload_model (self);
      break;
    default:
      break;
  }
  return ret;
}

/* An engine shared through a "gst.llm.engine" context: used from the
 * next NULL->READY when it runs this element's model. */
static void
gst_llm_prefill_set_context (GstElement *element, GstContext *context)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (element);
  LlmEngine *engine = gst_llm_engine_context_get (context);
  if (engine != NULL) {
    GST_OBJECT_LOCK (self);
    g_clear_pointer (&self->context_engine, llm_engine_unref);
    self->context_engine = engine;
    self->context_persistent = gst_context_is_persistent (context);
    GST_OBJECT_UNLOCK (self);
  }
  GST_ELEMENT_CLASS (gst_llm_prefill_parent_class)->set_context (element, context);
}

/* --- properties ------------------------------------------------------ */

static void
gst_llm_prefill_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (object);
  Settings *s = &self->settings;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_SYSTEM_PROMPT:
      g_free (s->system_prompt);
      s->system_prompt = g_value_dup_string (value);
      break;
    case PROP_PROMPT_TEMPLATE:
      g_free (s->prompt_template);
      s->prompt_template = g_value_dup_string (value);
      break;
    case PROP_PROMPT_MODE:
      s->prompt_mode = g_value_get_enum (value);
      break;
    case PROP_KEEP_CONTEXT:
      s->keep_context = g_value_get_boolean (value);
      break;
    case PROP_PROMPT:
      g_free (s->prompt);
      s->prompt = g_value_dup_string (value);
      break;
    default:
      /* both groups are read at NULL->READY only */
      if (gst_llm_engine_props_set (&s->engine, PROP_ENGINE_FIRST, prop_id, value)
          || gst_llm_sampler_props_set (&s->sampler, PROP_SAMPLER_FIRST, prop_id, value))
        gst_llm_note_late_setting (GST_ELEMENT (self), pspec, GST_STATE_CHANGE_NULL_TO_READY);
      else
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_prefill_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (object);
  const Settings *s = &self->settings;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_ACTIVE_DEVICE:
      g_value_set_string (value, self->active_device);
      break;
    case PROP_SYSTEM_PROMPT:
      g_value_set_string (value, s->system_prompt);
      break;
    case PROP_PROMPT_TEMPLATE:
      g_value_set_string (value, s->prompt_template);
      break;
    case PROP_PROMPT_MODE:
      g_value_set_enum (value, s->prompt_mode);
      break;
    case PROP_KEEP_CONTEXT:
      g_value_set_boolean (value, s->keep_context);
      break;
    case PROP_PROMPT:
      g_value_set_string (value, s->prompt);
      break;
    default:
      if (!gst_llm_engine_props_get (&s->engine, PROP_ENGINE_FIRST, prop_id, value)
          && !gst_llm_sampler_props_get (&s->sampler, PROP_SAMPLER_FIRST, prop_id, value))
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_prefill_finalize (GObject *object)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (object);

  unload_model (self);
  g_clear_pointer (&self->context_engine, llm_engine_unref);
  gst_llm_engine_props_clear (&self->settings.engine);
  g_free (self->settings.system_prompt);
  g_free (self->settings.prompt_template);
  g_free (self->settings.prompt);
  g_free (self->projector);
  g_array_unref (self->prompt);
  g_array_unref (self->ids);
  g_array_unref (self->media_rows);
  g_array_unref (self->media_items);
  G_OBJECT_CLASS (gst_llm_prefill_parent_class)->finalize (object);
}

static void
gst_llm_prefill_init (GstLlmPrefill *self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_prefill_chain));
  gst_pad_set_event_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_prefill_sink_event));
  gst_pad_set_query_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_prefill_sink_query));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_query_function (self->srcpad, GST_DEBUG_FUNCPTR (gst_llm_prefill_src_query));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
  gst_llm_latency_watch (GST_ELEMENT (self), &self->latency, self->srcpad);

  gst_llm_engine_props_init (&self->settings.engine);
  gst_llm_sampler_props_init (&self->settings.sampler);
  self->settings.system_prompt = g_strdup (DEFAULT_SYSTEM_PROMPT);
  self->settings.prompt_template = g_strdup (DEFAULT_PROMPT_TEMPLATE);
  self->settings.prompt_mode = DEFAULT_PROMPT_MODE;
  self->settings.keep_context = DEFAULT_KEEP_CONTEXT;

  self->prompt = g_array_new (FALSE, FALSE, sizeof (gint32));
  self->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  self->media_rows = g_array_new (FALSE, FALSE, sizeof (float));
  self->media_items = g_array_new (FALSE, FALSE, sizeof (LlmMediaItem));
  clear_prompt (self);
}

static void
gst_llm_prefill_class_init (GstLlmPrefillClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  GST_DEBUG_CATEGORY_INIT (gst_llm_prefill_debug, "llmprefill", 0,
      "LLM prompt processing");

  gobject_class->set_property = gst_llm_prefill_set_property;
  gobject_class->get_property = gst_llm_prefill_get_property;
  gobject_class->finalize = gst_llm_prefill_finalize;

  gst_llm_engine_props_install (gobject_class, PROP_ENGINE_FIRST);

  /**
   * GstLlmPrefill:active-device:
   *
   * The device the model runs on, from READY on; NULL before.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_ACTIVE_DEVICE,
      g_param_spec_string ("active-device", "Active device",
          "Device the model runs on (set from READY on)", NULL,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  /* llmdecode's, kept here as aliases (see the section above) */
  gst_llm_sampler_props_install (gobject_class, PROP_SAMPLER_FIRST, 0);

  /**
   * GstLlmPrefill:system-prompt:
   *
   * Text fed before the first prompt of each conversation (after BOS),
   * tokenized with special tokens parsed. For a chat model write the
   * whole system turn, e.g. for ChatML (Qwen)
   * `<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n`.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_SYSTEM_PROMPT,
      g_param_spec_string ("system-prompt", "System prompt",
          "Text fed at the start of each conversation (special tokens parsed)",
          DEFAULT_SYSTEM_PROMPT, rw | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmPrefill:prompt-template:
   *
   * Wraps every prompt: the text before `{prompt}` is fed before the
   * prompt's ids, the text after it after them, both tokenized with
   * special tokens parsed (a template without `{prompt}` is all prefix).
   * A BOS that starts the prompt stays first. For ChatML models (Qwen2,
   * Qwen2.5, Qwen3):
   * `<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n`.
   * The value `auto` takes the wrapper from the model's own chat template
   * (tokenizer.chat_template) for the families ChatML, Llama 3, Phi-3,
   * Gemma and Llama 2; another family is an error naming them.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_PROMPT_TEMPLATE,
      g_param_spec_string ("prompt-template", "Prompt template",
          "Text around each prompt, {prompt} marking where it goes (special tokens parsed), "
          "e.g. <|im_start|>user\\n{prompt}<|im_end|>\\n<|im_start|>assistant\\n; "
          "auto: from the model's chat template",
          DEFAULT_PROMPT_TEMPLATE, rw | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmPrefill:prompt-mode:
   *
   * Where a prompt ends: at each input buffer, or at an
   * `llm-end-of-prompt` event or EOS (the default, because llmtokenize
   * splits a text into several buffers).
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_PROMPT_MODE,
      g_param_spec_enum ("prompt-mode", "Prompt mode",
          "Where a prompt ends: buffer (each input buffer) or event "
          "(llm-end-of-prompt or EOS)",
          GST_TYPE_LLM_PROMPT_MODE, DEFAULT_PROMPT_MODE, rw | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmPrefill:keep-context:
   *
   * Continue one conversation: each prompt follows the previous prompts
   * and responses in the KV cache (and waits for the previous response to
   * finish; llmdecode feeds the token that ended it, e.g. `<|im_end|>`,
   * so the context holds whole turns). Off, each prompt starts afresh.
   * With on-new-prompt=replace in llmdecode, a kept conversation still
   * waits for the current response to end.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_KEEP_CONTEXT,
      g_param_spec_boolean ("keep-context", "Keep context",
          "Continue the conversation across prompts instead of starting each afresh",
          DEFAULT_KEEP_CONTEXT, rw | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmPrefill:prompt:
   *
   * The text a media prompt holds around its media items (frames or audio
   * chunks from application/x-llm-embeddings), e.g. "Describe this frame
   * in one sentence."; `<__media__>` marks where an item goes (without
   * one, the item goes first). Tokenized with special tokens parsed,
   * inside #GstLlmPrefill:prompt-template. Not used for token input.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_PROMPT,
      g_param_spec_string ("prompt", "Media prompt",
          "Text around media items, <__media__> marking where each goes (else first), "
          "e.g. \"Describe this frame in one sentence.\"", NULL,
          rw | GST_PARAM_MUTABLE_PLAYING));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM prefill",
      "Filter/Converter/Text",
      "Runs a GGUF language model over each prompt of token ids, keeps the KV cache "
      "in a session and leaves the first token of the response to be sampled downstream",
      "gst-llm developers");
  gst_element_class_add_static_metadata (element_class, "example",
      "gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf "
      "! llmprefill model=stories260K.gguf ! llmdecode max-tokens=64 "
      "! llmdetokenize model=stories260K.gguf ! fdsink");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_prefill_change_state);
  element_class->set_context = GST_DEBUG_FUNCPTR (gst_llm_prefill_set_context);

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_PROMPT_MODE, 0);
}
