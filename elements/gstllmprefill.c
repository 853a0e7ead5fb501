/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmprefill
 * @title: llmprefill
 * @short_description: runs a model over a prompt and samples its first token
 *
 * llmprefill loads a GGUF model and turns prompts of token ids
 * (`application/x-llm-tokens`) into model state
 * (`application/x-llm-state`): for each prompt it runs the model over all
 * its ids in one batched forward pass, filling the KV cache of a session,
 * and samples the first token of the answer. It pushes one buffer per
 * prompt whose payload is that token id (int32, little endian) and which
 * carries a #GstLlmSessionMeta with the session, for llmdecode to continue.
 * The buffer has the PTS and duration of the prompt.
 *
 * What is a prompt depends on #GstLlmPrefill:prompt-mode. By default
 * (`event`) token buffers accumulate until an `llm-end-of-prompt` event or
 * EOS, because llmtokenize streams a text word by word and so splits one
 * prompt over several buffers. With `buffer` each input buffer is one
 * prompt (ids replayed from a file, an application pushing whole prompts).
 *
 * Each prompt starts a new conversation unless #GstLlmPrefill:keep-context
 * is set; then it continues the previous one, after the previous response
 * has finished. Chat models want their prompts wrapped in a chat template:
 * #GstLlmPrefill:prompt-template wraps each prompt and
 * #GstLlmPrefill:system-prompt starts each conversation; both are
 * tokenized with the model's tokenizer with special tokens parsed, so
 * `<|im_start|>` and friends become their ids.
 *
 * The model is loaded when the element goes to READY and shared with every
 * other element of the process that uses the same file on the same
 * device; the sampler and KV cache settings are read at that moment too.
 * A missing or damaged model, a device that is not available or a KV cache
 * setting the model cannot use fail that state change with an error that
 * says what to change.
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
 *     llmprefill model=qwen2.5-0.5b-instruct-q8_0.gguf temperature=0.7 \
 *       system-prompt="<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" \
 *       prompt-template="<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n" ! \
 *     llmdecode ! llmdetokenize model=qwen2.5-0.5b-instruct-q8_0.gguf ! fdsink
 * ]| Answers the question read from stdin with a Qwen chat model (ChatML
 * template). gst-launch does not turn `\n` into a newline; pass real
 * newlines from a shell ($'...' in bash), as pipelines/chat.sh does.
 *
 * Since: 0.1
 */
#include "config.h"

#include <string.h>

#include "gstllmelements.h"
#include "gstllmcontext.h"
#include "chat-template.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "model.h"
#include "session.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_prefill_debug);
#define GST_CAT_DEFAULT gst_llm_prefill_debug

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

#define GST_TYPE_LLM_KV_TYPE (gst_llm_kv_type_get_type ())
static GType
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

#define GST_TYPE_LLM_KV_POLICY (gst_llm_kv_policy_get_type ())
static GType
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
 *   an element error naming kv-pool-bytes
 * @GST_LLM_KV_FULL_PREEMPT: the longest-idle other stream on the engine
 *   gives its KV up and recomputes it when it next runs
 *
 * What the engine does when its KV pool (kv-pool-bytes) is full.
 *
 * Since: 0.2
 */
typedef enum {
  GST_LLM_KV_FULL_REFUSE = LLM_KV_FULL_REFUSE,
  GST_LLM_KV_FULL_PREEMPT = LLM_KV_FULL_PREEMPT,
} GstLlmKvFull;

#define GST_TYPE_LLM_KV_FULL (gst_llm_kv_full_get_type ())
static GType
gst_llm_kv_full_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_KV_FULL_REFUSE, "Refuse the stream that needs more, naming the limit", "refuse"},
    {GST_LLM_KV_FULL_PREEMPT, "Take the longest-idle stream's KV; it recomputes later",
        "preempt"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmKvFull", values));
  return type;
}

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

#define DEFAULT_MODEL NULL
#define DEFAULT_DEVICE "cpu"
#define DEFAULT_CONTEXT_LENGTH 0
#define DEFAULT_KV_TYPE GST_LLM_KV_TYPE_F16
#define DEFAULT_KV_POLICY GST_LLM_KV_POLICY_FULL
#define DEFAULT_KV_WINDOW 0
#define DEFAULT_KV_SINK 4
#define DEFAULT_N_THREADS 0
/* Greedy: the same prompt gives the same text, which captioning and
 * transcription pipelines (and tests) want; chat users raise it. */
#define DEFAULT_TEMPERATURE 0.0f
/* The rest are llama.cpp's defaults, so temperature=0.8 samples as
 * llama-cli does. */
#define DEFAULT_TOP_K 40
#define DEFAULT_TOP_P 0.95f
#define DEFAULT_MIN_P 0.05f
#define DEFAULT_REPEAT_PENALTY 1.0f
#define DEFAULT_REPEAT_LAST_N 64
#define DEFAULT_SEED 0
#define DEFAULT_SYSTEM_PROMPT NULL
#define DEFAULT_PROMPT_TEMPLATE NULL
#define DEFAULT_PROMPT_MODE GST_LLM_PROMPT_MODE_EVENT
#define DEFAULT_KEEP_CONTEXT FALSE
#define DEFAULT_KV_POOL_BYTES 0
#define DEFAULT_KV_FULL GST_LLM_KV_FULL_REFUSE
#define DEFAULT_MAX_PREFILL_CHUNK 128
#define DEFAULT_MAX_BATCH_WAIT 0

/* The placeholder prompt-template replaces with the prompt's ids. */
#define PROMPT_PLACEHOLDER LLM_CHAT_TEMPLATE_PLACEHOLDER
/* prompt-template value that picks the wrapper from the model's chat template. */
#define PROMPT_TEMPLATE_AUTO "auto"

/* Sessions a prefill keeps at once. More than one lets it prefill the next
 * prompt while llmdecode still generates from the previous session (or
 * holds queued prompts); past this, it waits for one to come back, which
 * bounds memory whatever sits between the elements. */
#define MAX_SESSIONS 4

enum {
  PROP_0,
  PROP_MODEL,
  PROP_DEVICE,
  PROP_ACTIVE_DEVICE,
  PROP_CONTEXT_LENGTH,
  PROP_KV_TYPE,
  PROP_KV_POLICY,
  PROP_KV_WINDOW,
  PROP_KV_SINK,
  PROP_N_THREADS,
  PROP_TEMPERATURE,
  PROP_TOP_K,
  PROP_TOP_P,
  PROP_MIN_P,
  PROP_REPEAT_PENALTY,
  PROP_REPEAT_LAST_N,
  PROP_SEED,
  PROP_SYSTEM_PROMPT,
  PROP_PROMPT_TEMPLATE,
  PROP_PROMPT_MODE,
  PROP_KEEP_CONTEXT,
  PROP_KV_POOL_BYTES,
  PROP_KV_FULL,
  PROP_MAX_PREFILL_CHUNK,
  PROP_MAX_BATCH_WAIT,
};

/* A session and whether a state buffer downstream still uses it. */
typedef struct {
  LlmSession *session;
  gboolean busy;
  gboolean orphaned;    /* the element let go of it while busy */
} Slot;

/* The sessions of one element. Refcounted, because the weak references
 * on pushed state buffers that give sessions back may fire after the
 * element is gone. */
typedef struct {
  gint ref_count;
  GMutex lock;
  GCond cond;
  GPtrArray *slots;     /* Slot*; [0] is the kept conversation */
  gboolean flushing;    /* wake waiters, refuse to wait */
} SessionPool;

typedef struct {
  SessionPool *pool;
  Slot *slot;
} Lease;

#define GST_TYPE_LLM_PREFILL (gst_llm_prefill_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmPrefill, gst_llm_prefill, GST, LLM_PREFILL, GstElement)

struct _GstLlmPrefill {
  GstElement parent;

  GstPad *sinkpad, *srcpad;

  /* properties; object lock */
  char *model;
  char *device;
  guint context_length;
  GstLlmKvType kv_type;
  GstLlmKvPolicy kv_policy;
  guint kv_window;
  guint kv_sink;
  guint n_threads;
  float temperature;
  gint top_k;
  float top_p;
  float min_p;
  float repeat_penalty;
  gint repeat_last_n;
  guint64 seed;
  char *system_prompt;
  char *prompt_template;
  GstLlmPromptMode prompt_mode;
  gboolean keep_context;
  guint64 kv_pool_bytes;
  GstLlmKvFull kv_full;
  guint max_prefill_chunk;
  guint64 max_batch_wait;

  /* a "gst.llm.engine" context handed to us (object lock) */
  LlmEngine *context_engine;

  /* from NULL->READY to READY->NULL; active_device and vocab_hash also
   * under the object lock, as property reads and caps queries come from
   * any thread */
  LlmModel *llm;
  LlmEngine *engine;            /* shared with every element on this model and options */
  char *active_device;
  char vocab_hash[GST_LLM_VOCAB_HASH_LEN + 1];
  LlmSessionConfig config;      /* snapshot taken at NULL->READY */
  SessionPool *pool;

  /* streaming thread */
  gboolean vocab_error_posted;  /* one vocabulary error per run is enough */
  GArray *prompt;               /* gint32, ids of the prompt so far (event mode) */
  GstClockTime prompt_pts;
  GstClockTime prompt_end;
  GArray *ids;                  /* scratch: what is fed */

  /* latency, object lock: the slowest prefill so far and what the last
   * latency query answered with */
  GstClockTime max_prefill;
  GstClockTime reported_latency;
  gboolean live;                /* the last latency query said so */
};

G_DEFINE_TYPE (GstLlmPrefill, gst_llm_prefill, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmprefill, "llmprefill", GST_RANK_NONE,
    GST_TYPE_LLM_PREFILL, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TOKENS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_STATE_MEDIA_TYPE));

/* --- session pool ---------------------------------------------------- */

static SessionPool *
pool_new (void)
{
  SessionPool *pool = g_new0 (SessionPool, 1);
  pool->ref_count = 1;
  g_mutex_init (&pool->lock);
  g_cond_init (&pool->cond);
  pool->slots = g_ptr_array_new ();
  return pool;
}

static void
slot_free (Slot *slot)
{
  g_clear_pointer (&slot->session, llm_session_unref);
  g_free (slot);
}

static void
pool_unref (SessionPool *pool)
{
  if (!g_atomic_int_dec_and_test (&pool->ref_count))
    return;
  /* busy slots were orphaned by pool_clear; their leases free them */
  g_ptr_array_free (pool->slots, TRUE);
  g_mutex_clear (&pool->lock);
  g_cond_clear (&pool->cond);
  g_free (pool);
}

/* Lets go of every session: idle ones now, busy ones when downstream
 * drops their state buffer. */
static void
pool_clear (SessionPool *pool)
{
  g_mutex_lock (&pool->lock);
  for (guint i = 0; i < pool->slots->len; i++) {
    Slot *slot = g_ptr_array_index (pool->slots, i);
    if (slot->busy)
      slot->orphaned = TRUE;
    else
      slot_free (slot);
  }
  g_ptr_array_set_size (pool->slots, 0);
  g_mutex_unlock (&pool->lock);
}

static void
pool_set_flushing (SessionPool *pool, gboolean flushing)
{
  g_mutex_lock (&pool->lock);
  pool->flushing = flushing;
  g_cond_broadcast (&pool->cond);
  g_mutex_unlock (&pool->lock);
}

/* The state buffer that used the slot is gone: downstream no longer feeds
 * the session. Runs in whatever thread dropped the buffer. */
static void
lease_returned (gpointer data, GstMiniObject *buffer)
{
  Lease *lease = data;
  SessionPool *pool = lease->pool;

  g_mutex_lock (&pool->lock);
  if (lease->slot->orphaned) {
    slot_free (lease->slot);
  } else {
    lease->slot->busy = FALSE;
    g_cond_broadcast (&pool->cond);
  }
  g_mutex_unlock (&pool->lock);
  pool_unref (pool);
  g_free (lease);
}

/* Marks @slot busy until @buffer is freed. Copies of the buffer hold the
 * session too, but nothing between prefill and decode copies a state
 * buffer; llmdecode keeps this very buffer until it stops feeding. */
static void
pool_lease (SessionPool *pool, Slot *slot, GstBuffer *buffer)
{
  Lease *lease = g_new (Lease, 1);

  g_atomic_int_inc (&pool->ref_count);
  lease->pool = pool;
  lease->slot = slot;
  gst_mini_object_weak_ref (GST_MINI_OBJECT (buffer), lease_returned, lease);
}

/* Picks the session for the next prompt, waiting until downstream gives
 * one back if needed: with @keep_context the conversation's own session,
 * else any idle one, creating one while fewer than MAX_SESSIONS exist.
 * The slot is marked busy. NULL when flushing (@error unset) or when a
 * new session cannot be made (@error set). */
static Slot *
pool_acquire (GstLlmPrefill *self, gboolean keep_context, GError **error)
{
  SessionPool *pool = self->pool;
  Slot *found = NULL;

  g_mutex_lock (&pool->lock);
  while (!pool->flushing) {
    if (keep_context && pool->slots->len > 0) {
      Slot *slot = g_ptr_array_index (pool->slots, 0);
      if (!slot->busy)
        found = slot;
    } else {
      for (guint i = 0; i < pool->slots->len && !found; i++) {
        Slot *slot = g_ptr_array_index (pool->slots, i);
        if (!slot->busy)
          found = slot;
      }
      if (!found && pool->slots->len < MAX_SESSIONS) {
        /* Building a context allocates scratch and starts threads; done
         * unlocked so that returning leases are not held up. */
        g_mutex_unlock (&pool->lock);
        LlmSession *session = llm_session_new (self->engine, &self->config, error);
        g_mutex_lock (&pool->lock);
        if (session == NULL)
          break;
        found = g_new0 (Slot, 1);
        found->session = session;
        g_ptr_array_add (pool->slots, found);
        GST_DEBUG_OBJECT (self, "session %u created", pool->slots->len);
      }
    }
    if (found)
      break;
    GST_DEBUG_OBJECT (self, "waiting for downstream to finish with a session");
    g_cond_wait (&pool->cond, &pool->lock);
  }
  if (found)
    found->busy = TRUE;
  g_mutex_unlock (&pool->lock);
  return found;
}

static void
pool_release (SessionPool *pool, Slot *slot)
{
  g_mutex_lock (&pool->lock);
  slot->busy = FALSE;
  g_cond_broadcast (&pool->cond);
  g_mutex_unlock (&pool->lock);
}

/* --- prompts --------------------------------------------------------- */

static const LlmVocab *
model_vocab (GstLlmPrefill *self)
{
  return self->llm->tokenizer ? llm_tokenizer_vocab (self->llm->tokenizer) : NULL;
}

/* Appends the ids of @text, special tokens parsed, no BOS. */
static void
encode_text (GstLlmPrefill *self, const char *text, gsize len, gboolean starts_prompt,
    GArray *out)
{
  if (len > 0)
    llm_tokenizer_encode (self->llm->tokenizer, text, len, FALSE, TRUE, starts_prompt, out);
}

/* Builds what is fed for @prompt into self->ids: BOS (if the prompt had
 * it), the system prompt when the conversation starts, then the prompt,
 * inside the template if there is one. */
static gboolean
build_input (GstLlmPrefill *self, const gint32 *prompt, guint n, gboolean conversation_start)
{
  const LlmVocab *vocab = model_vocab (self);
  char *system_prompt, *template;

  GST_OBJECT_LOCK (self);
  system_prompt = g_strdup (self->system_prompt);
  template = g_strdup (self->prompt_template);
  GST_OBJECT_UNLOCK (self);

  g_array_set_size (self->ids, 0);
  if ((system_prompt && system_prompt[0]) || (template && template[0])) {
    if (vocab == NULL) {
      GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
          ("system-prompt and prompt-template need a tokenizer, but model \"%s\" has none.",
              self->llm->path),
          ("use a GGUF with tokenizer.ggml.* keys, or leave both properties unset"));
      g_free (system_prompt);
      g_free (template);
      return FALSE;
    }
  }

  if (g_strcmp0 (template, PROMPT_TEMPLATE_AUTO) == 0) {
    GError *error = NULL;
    g_free (template);
    template = llm_chat_template_wrapper (self->llm->gguf, &error);
    if (template == NULL) {
      GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
          ("prompt-template=auto cannot be used with model \"%s\".", self->llm->path),
          ("%s", error->message));
      g_error_free (error);
      g_free (system_prompt);
      return FALSE;
    }
  }

  /* BOS belongs in front of everything we add, not after the system
   * prompt or template opening. */
  if (vocab && n > 0 && vocab->bos >= 0 && prompt[0] == vocab->bos) {
    g_array_append_val (self->ids, prompt[0]);
    prompt++;
    n--;
  }
  gboolean at_start = TRUE;
  if (conversation_start && system_prompt && system_prompt[0]) {
    encode_text (self, system_prompt, strlen (system_prompt), TRUE, self->ids);
    at_start = FALSE;
  }
  const char *hole = template ? strstr (template, PROMPT_PLACEHOLDER) : NULL;
  if (template && template[0]) {
    gsize before = hole ? (gsize) (hole - template) : strlen (template);
    encode_text (self, template, before, at_start, self->ids);
  }
  g_array_append_vals (self->ids, prompt, n);
  if (hole) {
    const char *after = hole + strlen (PROMPT_PLACEHOLDER);
    encode_text (self, after, strlen (after), FALSE, self->ids);
  }

  g_free (system_prompt);
  g_free (template);
  return TRUE;
}

static void
post_latency_if_grown (GstLlmPrefill *self, GstClockTime took)
{
  gboolean post = FALSE;

  GST_OBJECT_LOCK (self);
  if (took > self->max_prefill) {
    self->max_prefill = took;
    /* Only a real change in a live pipeline is worth a pipeline-wide
     * latency recalculation; until it asks again, take it as told. */
    post = self->live && took > self->reported_latency + self->reported_latency / 10
        + GST_MSECOND;
    if (post)
      self->reported_latency = took;
  }
  GST_OBJECT_UNLOCK (self);
  if (post)
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_latency (GST_OBJECT (self)));
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
        self->llm->path);
    gst_caps_unref (ours);
  }
  return self->vocab_error_posted;
}

/* Feeds one prompt and pushes the state buffer with its first token. */
static GstFlowReturn
run_prompt (GstLlmPrefill *self, const gint32 *prompt, guint n, GstClockTime pts,
    GstClockTime duration)
{
  GError *error = NULL;
  gboolean keep_context;

  if (n == 0)
    return GST_FLOW_OK;

  GST_OBJECT_LOCK (self);
  keep_context = self->keep_context;
  GST_OBJECT_UNLOCK (self);

  Slot *slot = pool_acquire (self, keep_context, &error);
  if (slot == NULL) {
    if (error == NULL)
      return GST_FLOW_FLUSHING;
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Cannot start a session on \"%s\": %s.", self->llm->path, error->message),
        ("%s error %d", g_quark_to_string (error->domain), error->code));
    g_error_free (error);
    return GST_FLOW_ERROR;
  }

  if (!keep_context)
    llm_session_reset (slot->session);
  gboolean conversation_start = llm_session_n_ids (slot->session) == 0;
  if (!build_input (self, prompt, n, conversation_start)) {
    pool_release (self->pool, slot);
    return GST_FLOW_ERROR;
  }

  /* TTFT counts from here: waiting for a session (the previous response
   * of a kept conversation) is the previous response's time, not ours. */
  gint64 prompt_time = g_get_monotonic_time ();
  guint n_ids = self->ids->len;
  gint32 next = -1;
  GST_DEBUG_OBJECT (self, "prefill of %u ids (%u from the prompt) after %u", n_ids, n,
      llm_session_n_ids (slot->session));
  if (!llm_session_prefill (slot->session, (const gint32 *) self->ids->data, n_ids, &next,
          &error)) {
    guint held = llm_session_n_ids (slot->session);
    /* The session may hold part of the prompt now; start over next time. */
    llm_session_reset (slot->session);
    pool_release (self->pool, slot);
    if (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL)) {
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("The prompt (%u tokens, after %u in the conversation) does not fit in the "
              "context. Raise context-length (the model was trained with %u), use "
              "kv-policy=window or sink-window%s.", n_ids, held, self->llm->hp.n_ctx_train,
              keep_context ? ", or turn keep-context off" : ""),
          ("%s", error->message));
    } else if (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL)) {
      GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
          ("The engine's KV memory is used up by its streams: %s. Raise kv-pool-bytes, set "
              "kv-full=preempt, or run fewer streams on this model.", error->message),
          (NULL));
    } else if (g_error_matches (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_TOKEN)) {
      GST_ELEMENT_ERROR (self, STREAM, FORMAT,
          ("The prompt holds a token id the model does not know: %s. Tokenize with "
              "the same model (llmtokenize model=%s).", error->message, self->llm->path),
          (NULL));
    } else {
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("Running the model over the prompt failed: %s.", error->message),
          ("%s error %d", g_quark_to_string (error->domain), error->code));
    }
    g_error_free (error);
    return GST_FLOW_ERROR;
  }
  gint64 first_token_time = g_get_monotonic_time ();
  GST_DEBUG_OBJECT (self, "prefill of %u ids took %.3f ms, first token %d", n_ids,
      (first_token_time - prompt_time) / 1000.0, next);
  post_latency_if_grown (self, (first_token_time - prompt_time) * GST_USECOND);

  GstBuffer *out = gst_llm_tokens_buffer_new (&next, 1);
  GstLlmSessionMeta *meta = gst_buffer_add_llm_session_meta (out, slot->session);
  meta->prompt_pts = pts;
  meta->prompt_time_us = prompt_time;
  meta->first_token_time_us = first_token_time;
  meta->prompt_tokens = n_ids;
  GST_BUFFER_PTS (out) = pts;
  GST_BUFFER_DURATION (out) = duration;
  pool_lease (self->pool, slot, out);

  GstFlowReturn ret = gst_pad_push (self->srcpad, out);
  if (ret == GST_FLOW_NOT_NEGOTIATED)
    report_refusal (self);
  return ret;
}

static void
clear_prompt (GstLlmPrefill *self)
{
  g_array_set_size (self->prompt, 0);
  self->prompt_pts = GST_CLOCK_TIME_NONE;
  self->prompt_end = GST_CLOCK_TIME_NONE;
}

/* Event mode: the ids gathered so far are a prompt. */
static GstFlowReturn
finish_prompt (GstLlmPrefill *self)
{
  GstClockTime duration = GST_CLOCK_TIME_NONE;
  GstFlowReturn ret;

  if (self->prompt->len == 0)
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

static GstFlowReturn
gst_llm_prefill_chain (GstPad *pad, GstObject *parent, GstBuffer *buffer)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (parent);
  GstLlmPromptMode mode;
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  GstFlowReturn ret = GST_FLOW_OK;

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
  mode = self->prompt_mode;
  GST_OBJECT_UNLOCK (self);

  if (mode == GST_LLM_PROMPT_MODE_BUFFER) {
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
ensure_src_caps (GstLlmPrefill *self)
{
  if (gst_pad_has_current_caps (self->srcpad))
    return TRUE;
  GstCaps *caps = own_caps (self, GST_LLM_STATE_MEDIA_TYPE);
  gboolean ok = gst_pad_set_caps (self->srcpad, caps);
  gst_caps_unref (caps);
  if (!ok)
    report_refusal (self);
  return ok;
}

static gboolean
set_sink_caps (GstLlmPrefill *self, GstCaps *caps)
{
  const char *vocab = gst_llm_caps_get_vocab (caps);

  GST_OBJECT_LOCK (self);
  gboolean match = vocab == NULL || self->vocab_hash[0] == '\0'
      || strcmp (vocab, self->vocab_hash) == 0;
  GST_OBJECT_UNLOCK (self);
  if (!match) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("The token ids are of another vocabulary (vocab=%s) than model \"%s\" "
            "(vocab=%s). Tokenize with the same model, or one with the same tokenizer.",
            vocab, self->llm->path, self->vocab_hash),
        ("refused %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  GstCaps *src = own_caps (self, GST_LLM_STATE_MEDIA_TYPE);
  gboolean ok = gst_pad_set_caps (self->srcpad, src);
  gst_caps_unref (src);
  if (!ok)
    report_refusal (self);
  return ok;
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
      pool_set_flushing (self->pool, TRUE);
      break;
    case GST_EVENT_FLUSH_STOP:
      clear_prompt (self);
      pool_set_flushing (self->pool, FALSE);
      break;
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
answer_caps_query (GstLlmPrefill *self, GstPad *pad, GstQuery *query, const char *media_type)
{
  GstCaps *filter, *caps;

  gst_query_parse_caps (query, &filter);
  caps = own_caps (self, media_type);
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full (filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (caps);
    caps = tmp;
  }
  gst_query_set_caps_result (query, caps);
  gst_caps_unref (caps);
  return TRUE;
}

static gboolean
gst_llm_prefill_sink_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_CAPS:
      return answer_caps_query (self, pad, query, GST_LLM_TOKENS_MEDIA_TYPE);
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
      return answer_caps_query (self, pad, query, GST_LLM_STATE_MEDIA_TYPE);
    case GST_QUERY_LATENCY:{
      gboolean live;
      /* The first token leaves one prefill after its prompt arrived:
       * the slowest prefill measured so far. */
      GST_OBJECT_LOCK (self);
      GstClockTime ours = self->max_prefill;
      GST_OBJECT_UNLOCK (self);
      if (!gst_llm_latency_query (self->sinkpad, query, ours, &live))
        return FALSE;
      GST_OBJECT_LOCK (self);
      self->live = live;
      if (live)
        self->reported_latency = ours;
      GST_OBJECT_UNLOCK (self);
      GST_DEBUG_OBJECT (self, "live %d, adding %" GST_TIME_FORMAT " of latency", live,
          GST_TIME_ARGS (live ? ours : 0));
      return TRUE;
    }
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

/* --- state ----------------------------------------------------------- */

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
report_load_error (GstLlmPrefill *self, const char *path, const GError *error)
{
  if (error->domain == LLM_MODEL_ERROR) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Model file \"%s\" cannot be run: %s. gst-llm runs llama, qwen2 and qwen3 models "
            "with F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights.",
            path, error->message),
        ("%s error %d", g_quark_to_string (error->domain), error->code));
  } else {
    GST_LLM_ELEMENT_ERROR_LOAD (self, path, error);
  }
}

/* The window policies size the cache by kv-window (plus kv-sink), so a
 * context-length set below that contradicts them: refused, not silently
 * overridden. Left at 0, context-length lets the window set the size. */
static gboolean
check_window_fits (GstLlmPrefill *self, const LlmKvConfig *kv)
{
  guint ctx = kv->context_length;
  guint sink = kv->policy == LLM_KV_POLICY_SINK_WINDOW ? kv->sink : 0;

  if (kv->policy == LLM_KV_POLICY_FULL || ctx == 0
      || (sink < ctx && (guint64) kv->window + sink <= ctx))
    return TRUE;
  if (sink >= ctx) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("kv-sink=%u leaves no room for a window in context-length=%u. Lower kv-sink or "
            "raise context-length.", sink, ctx), ("kv-policy=sink-window"));
    return FALSE;
  }
  g_autofree char *what = sink > 0
      ? g_strdup_printf ("kv-window=%u plus kv-sink=%u", kv->window, sink)
      : g_strdup_printf ("kv-window=%u", kv->window);
  GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
      ("%s is larger than context-length=%u. Set kv-window to at most %u, raise "
          "context-length, or leave context-length at 0 to let kv-window set the cache size.",
          what, ctx, ctx - sink),
      ("kv-policy=%s", kv->policy == LLM_KV_POLICY_SINK_WINDOW ? "sink-window" : "window"));
  return FALSE;
}

static gboolean
load_model (GstLlmPrefill *self)
{
  GError *error = NULL;
  char *model, *device;
  LlmSessionConfig *c = &self->config;

  GST_OBJECT_LOCK (self);
  model = g_strdup (self->model);
  device = g_strdup (self->device);
  c->kv.type = (LlmKvType) self->kv_type;
  c->kv.policy = (LlmKvPolicy) self->kv_policy;
  c->kv.context_length = self->context_length;
  c->kv.window = self->kv_window;
  c->kv.sink = self->kv_sink;
  LlmEngineOptions eo;
  llm_engine_options_init (&eo);
  eo.n_threads = self->n_threads;
  eo.kv_pool_bytes = (gsize) MIN (self->kv_pool_bytes, G_MAXSIZE);
  eo.kv_full = (LlmKvFullPolicy) self->kv_full;
  eo.max_prefill_chunk = self->max_prefill_chunk;
  eo.max_batch_wait_us = (guint) MIN (self->max_batch_wait / GST_USECOND, G_MAXUINT);
  g_autoptr (LlmEngine) context_engine =
      self->context_engine ? llm_engine_ref (self->context_engine) : NULL;
  llm_sampler_params_init (&c->sampler);
  c->sampler.temperature = self->temperature;
  c->sampler.top_k = self->top_k;
  c->sampler.top_p = self->top_p;
  c->sampler.min_p = self->min_p;
  c->sampler.repeat_penalty = self->repeat_penalty;
  c->sampler.repeat_last_n = self->repeat_last_n;
  c->sampler.seed = self->seed;
  GST_OBJECT_UNLOCK (self);

  if (model == NULL || model[0] == '\0') {
    g_clear_pointer (&context_engine, llm_engine_unref);
    g_free (model);
    g_free (device);
    GST_LLM_ELEMENT_ERROR_NO_MODEL (self);
    return FALSE;
  }
  if (!check_window_fits (self, &c->kv)) {
    g_clear_pointer (&context_engine, llm_engine_unref);
    g_free (model);
    g_free (device);
    return FALSE;
  }

  const char *run_on = resolve_device (device);
  const char *const *devices = llm_devices_available ();
  if (!g_strv_contains (devices, run_on)) {
    char *avail = g_strjoinv (", ", (char **) devices);
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("Device \"%s\" is not available. Available: %s (or auto).", device, avail),
        ("set the device property to one of them"));
    g_free (avail);
    g_free (model);
    g_free (device);
    return FALSE;
  }

  LlmModel *llm = llm_model_get (model, run_on, &error);
  if (llm == NULL) {
    report_load_error (self, model, error);
    g_error_free (error);
    g_free (model);
    g_free (device);
    return FALSE;
  }
  self->llm = llm;
  self->engine = gst_llm_engine_acquire (GST_ELEMENT (self), context_engine, llm, &eo, &error);
  g_clear_pointer (&context_engine, llm_engine_unref);
  if (self->engine == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Cannot start the engine for \"%s\": %s.", model, error->message), (NULL));
    g_error_free (error);
    g_free (model);
    g_free (device);
    return FALSE;
  }

  if (c->kv.context_length == 0)
    c->kv.context_length = llm->hp.n_ctx_train;
  else if (c->kv.context_length > llm->hp.n_ctx_train)
    GST_WARNING_OBJECT (self, "context-length %u is beyond the %u positions %s was trained "
        "with; quality may drop past them", c->kv.context_length, llm->hp.n_ctx_train, model);
  if (c->kv.window == 0) {
    /* an unset window fills the context */
    guint sink = c->kv.policy == LLM_KV_POLICY_SINK_WINDOW ? c->kv.sink : 0;
    c->kv.window = c->kv.context_length > sink ? c->kv.context_length - sink : 1;
  }

  /* The first session now, so that a KV cache setting this model cannot
   * use fails the state change rather than the first prompt. */
  self->pool = pool_new ();
  Slot *slot = pool_acquire (self, FALSE, &error);
  if (slot == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("Cannot set up a session for \"%s\": %s.", model, error->message),
        ("kv-type=%s kv-policy=%d context-length=%u kv-window=%u kv-sink=%u",
            llm_kv_type_name (c->kv.type), c->kv.policy, c->kv.context_length,
            c->kv.window, c->kv.sink));
    g_error_free (error);
    g_free (model);
    g_free (device);
    return FALSE;
  }
  pool_release (self->pool, slot);

  const LlmVocab *vocab = model_vocab (self);
  GST_OBJECT_LOCK (self);
  g_free (self->active_device);
  self->active_device = g_strdup (llm->device);
  if (vocab)
    g_strlcpy (self->vocab_hash, vocab->hash, sizeof self->vocab_hash);
  GST_OBJECT_UNLOCK (self);

  GST_INFO_OBJECT (self, "%s on %s: %s, %u layers, context %u, KV %s, vocab=%s", model,
      llm->device, llm_arch_name (llm->hp.arch), llm->hp.n_layer, c->kv.context_length,
      llm_kv_type_name (c->kv.type), vocab ? vocab->hash : "(none)");
  g_free (model);
  g_free (device);
  return TRUE;
}

static void
unload_model (GstLlmPrefill *self)
{
  if (self->pool) {
    pool_clear (self->pool);
    g_clear_pointer (&self->pool, pool_unref);
  }
  g_clear_pointer (&self->engine, llm_engine_unref);
  g_clear_pointer (&self->llm, llm_model_unref);
  GST_OBJECT_LOCK (self);
  g_clear_pointer (&self->active_device, g_free);
  self->vocab_hash[0] = '\0';
  self->max_prefill = 0;
  self->reported_latency = 0;
  self->live = FALSE;
  GST_OBJECT_UNLOCK (self);
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
      pool_set_flushing (self->pool, FALSE);
      clear_prompt (self);
      self->vocab_error_posted = FALSE;
      break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      /* a chain waiting for a session must let the pads deactivate */
      pool_set_flushing (self->pool, TRUE);
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
    GST_OBJECT_UNLOCK (self);
  }
  GST_ELEMENT_CLASS (gst_llm_prefill_parent_class)->set_context (element, context);
}

/* --- properties ------------------------------------------------------ */

static void
warn_if_loaded (GstLlmPrefill *self, GParamSpec *pspec)
{
  if (GST_STATE (self) != GST_STATE_NULL)
    GST_WARNING_OBJECT (self, "%s changes take effect from the next NULL->READY",
        pspec->name);
}

static void
gst_llm_prefill_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmPrefill *self = GST_LLM_PREFILL (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      warn_if_loaded (self, pspec);
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    case PROP_DEVICE:
      warn_if_loaded (self, pspec);
      g_free (self->device);
      self->device = g_value_dup_string (value);
      if (self->device == NULL)
        self->device = g_strdup (DEFAULT_DEVICE);
      break;
    case PROP_CONTEXT_LENGTH:
      warn_if_loaded (self, pspec);
      self->context_length = g_value_get_uint (value);
      break;
    case PROP_KV_TYPE:
      warn_if_loaded (self, pspec);
      self->kv_type = g_value_get_enum (value);
      break;
    case PROP_KV_POLICY:
      warn_if_loaded (self, pspec);
      self->kv_policy = g_value_get_enum (value);
      break;
    case PROP_KV_WINDOW:
      warn_if_loaded (self, pspec);
      self->kv_window = g_value_get_uint (value);
      break;
    case PROP_KV_SINK:
      warn_if_loaded (self, pspec);
      self->kv_sink = g_value_get_uint (value);
      break;
    case PROP_N_THREADS:
      warn_if_loaded (self, pspec);
      self->n_threads = g_value_get_uint (value);
      break;
    case PROP_TEMPERATURE:
      warn_if_loaded (self, pspec);
      self->temperature = g_value_get_float (value);
      break;
    case PROP_TOP_K:
      warn_if_loaded (self, pspec);
      self->top_k = g_value_get_int (value);
      break;
    case PROP_TOP_P:
      warn_if_loaded (self, pspec);
      self->top_p = g_value_get_float (value);
      break;
    case PROP_MIN_P:
      warn_if_loaded (self, pspec);
      self->min_p = g_value_get_float (value);
      break;
    case PROP_REPEAT_PENALTY:
      warn_if_loaded (self, pspec);
      self->repeat_penalty = g_value_get_float (value);
      break;
    case PROP_REPEAT_LAST_N:
      warn_if_loaded (self, pspec);
      self->repeat_last_n = g_value_get_int (value);
      break;
    case PROP_SEED:
      warn_if_loaded (self, pspec);
      self->seed = g_value_get_uint64 (value);
      break;
    case PROP_SYSTEM_PROMPT:
      g_free (self->system_prompt);
      self->system_prompt = g_value_dup_string (value);
      break;
    case PROP_PROMPT_TEMPLATE:
      g_free (self->prompt_template);
      self->prompt_template = g_value_dup_string (value);
      break;
    case PROP_PROMPT_MODE:
      self->prompt_mode = g_value_get_enum (value);
      break;
    case PROP_KEEP_CONTEXT:
      self->keep_context = g_value_get_boolean (value);
      break;
    case PROP_KV_POOL_BYTES:
      warn_if_loaded (self, pspec);
      self->kv_pool_bytes = g_value_get_uint64 (value);
      break;
    case PROP_KV_FULL:
      warn_if_loaded (self, pspec);
      self->kv_full = g_value_get_enum (value);
      break;
    case PROP_MAX_PREFILL_CHUNK:
      warn_if_loaded (self, pspec);
      self->max_prefill_chunk = g_value_get_uint (value);
      break;
    case PROP_MAX_BATCH_WAIT:
      warn_if_loaded (self, pspec);
      self->max_batch_wait = g_value_get_uint64 (value);
      break;
    default:
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

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model);
      break;
    case PROP_DEVICE:
      g_value_set_string (value, self->device);
      break;
    case PROP_ACTIVE_DEVICE:
      g_value_set_string (value, self->active_device);
      break;
    case PROP_CONTEXT_LENGTH:
      g_value_set_uint (value, self->context_length);
      break;
    case PROP_KV_TYPE:
      g_value_set_enum (value, self->kv_type);
      break;
    case PROP_KV_POLICY:
      g_value_set_enum (value, self->kv_policy);
      break;
    case PROP_KV_WINDOW:
      g_value_set_uint (value, self->kv_window);
      break;
    case PROP_KV_SINK:
      g_value_set_uint (value, self->kv_sink);
      break;
    case PROP_N_THREADS:
      g_value_set_uint (value, self->n_threads);
      break;
    case PROP_TEMPERATURE:
      g_value_set_float (value, self->temperature);
      break;
    case PROP_TOP_K:
      g_value_set_int (value, self->top_k);
      break;
    case PROP_TOP_P:
      g_value_set_float (value, self->top_p);
      break;
    case PROP_MIN_P:
      g_value_set_float (value, self->min_p);
      break;
    case PROP_REPEAT_PENALTY:
      g_value_set_float (value, self->repeat_penalty);
      break;
    case PROP_REPEAT_LAST_N:
      g_value_set_int (value, self->repeat_last_n);
      break;
    case PROP_SEED:
      g_value_set_uint64 (value, self->seed);
      break;
    case PROP_SYSTEM_PROMPT:
      g_value_set_string (value, self->system_prompt);
      break;
    case PROP_PROMPT_TEMPLATE:
      g_value_set_string (value, self->prompt_template);
      break;
    case PROP_PROMPT_MODE:
      g_value_set_enum (value, self->prompt_mode);
      break;
    case PROP_KEEP_CONTEXT:
      g_value_set_boolean (value, self->keep_context);
      break;
    case PROP_KV_POOL_BYTES:
      g_value_set_uint64 (value, self->kv_pool_bytes);
      break;
    case PROP_KV_FULL:
      g_value_set_enum (value, self->kv_full);
      break;
    case PROP_MAX_PREFILL_CHUNK:
      g_value_set_uint (value, self->max_prefill_chunk);
      break;
    case PROP_MAX_BATCH_WAIT:
      g_value_set_uint64 (value, self->max_batch_wait);
      break;
    default:
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
  g_free (self->model);
  g_free (self->device);
  g_free (self->system_prompt);
  g_free (self->prompt_template);
  g_array_unref (self->prompt);
  g_array_unref (self->ids);
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

  self->model = g_strdup (DEFAULT_MODEL);
  self->device = g_strdup (DEFAULT_DEVICE);
  self->context_length = DEFAULT_CONTEXT_LENGTH;
  self->kv_type = DEFAULT_KV_TYPE;
  self->kv_policy = DEFAULT_KV_POLICY;
  self->kv_window = DEFAULT_KV_WINDOW;
  self->kv_sink = DEFAULT_KV_SINK;
  self->n_threads = DEFAULT_N_THREADS;
  self->temperature = DEFAULT_TEMPERATURE;
  self->top_k = DEFAULT_TOP_K;
  self->top_p = DEFAULT_TOP_P;
  self->min_p = DEFAULT_MIN_P;
  self->repeat_penalty = DEFAULT_REPEAT_PENALTY;
  self->repeat_last_n = DEFAULT_REPEAT_LAST_N;
  self->seed = DEFAULT_SEED;
  self->system_prompt = g_strdup (DEFAULT_SYSTEM_PROMPT);
  self->prompt_template = g_strdup (DEFAULT_PROMPT_TEMPLATE);
  self->prompt_mode = DEFAULT_PROMPT_MODE;
  self->keep_context = DEFAULT_KEEP_CONTEXT;
  self->kv_pool_bytes = DEFAULT_KV_POOL_BYTES;
  self->kv_full = DEFAULT_KV_FULL;
  self->max_prefill_chunk = DEFAULT_MAX_PREFILL_CHUNK;
  self->max_batch_wait = DEFAULT_MAX_BATCH_WAIT;

  self->prompt = g_array_new (FALSE, FALSE, sizeof (gint32));
  self->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
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

  /**
   * GstLlmPrefill:model:
   *
   * Path of the GGUF model file, loaded when the element goes to READY
   * (and shared with other elements using the same file and device).
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
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
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device",
          "Device to run on: cpu, auto, or a backend device such as cuda:0",
          DEFAULT_DEVICE, rw));

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
  g_object_class_install_property (gobject_class, PROP_CONTEXT_LENGTH,
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
  g_object_class_install_property (gobject_class, PROP_KV_TYPE,
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
  g_object_class_install_property (gobject_class, PROP_KV_POLICY,
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
  g_object_class_install_property (gobject_class, PROP_KV_WINDOW,
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
  g_object_class_install_property (gobject_class, PROP_KV_SINK,
      g_param_spec_uint ("kv-sink", "KV sink",
          "First positions kept by kv-policy sink-window", 0, G_MAXINT32, DEFAULT_KV_SINK, rw));

  /**
   * GstLlmPrefill:n-threads:
   *
   * Worker threads per session; 0 uses one per core.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "Worker threads of the forward pass (0 = one per core)",
          0, 1024, DEFAULT_N_THREADS, rw));

  /**
   * GstLlmPrefill:temperature:
   *
   * Sampling temperature; 0 is greedy (the most likely token each time),
   * the default, so that a prompt always gives the same text. llama.cpp's
   * CLI uses 0.8.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_TEMPERATURE,
      g_param_spec_float ("temperature", "Temperature",
          "Sampling temperature (0 = greedy)", 0.0f, 100.0f, DEFAULT_TEMPERATURE, rw));

  /**
   * GstLlmPrefill:top-k:
   *
   * Sample among the k most likely tokens; 0 turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_TOP_K,
      g_param_spec_int ("top-k", "Top-k",
          "Sample among the k most likely tokens (0 = off)", 0, G_MAXINT32, DEFAULT_TOP_K, rw));

  /**
   * GstLlmPrefill:top-p:
   *
   * Sample among the most likely tokens that together have probability p
   * (nucleus sampling); 1 turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_TOP_P,
      g_param_spec_float ("top-p", "Top-p",
          "Sample among the most likely tokens of total probability p (1 = off)",
          0.0f, 1.0f, DEFAULT_TOP_P, rw));

  /**
   * GstLlmPrefill:min-p:
   *
   * Drop tokens less likely than min-p times the most likely one; 0
   * turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_MIN_P,
      g_param_spec_float ("min-p", "Min-p",
          "Drop tokens below min-p times the top probability (0 = off)",
          0.0f, 1.0f, DEFAULT_MIN_P, rw));

  /**
   * GstLlmPrefill:repeat-penalty:
   *
   * Penalty on tokens among the last repeat-last-n (llama.cpp's rule);
   * 1 turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_REPEAT_PENALTY,
      g_param_spec_float ("repeat-penalty", "Repeat penalty",
          "Penalty on recently seen tokens (1 = off)", 0.0f, 10.0f, DEFAULT_REPEAT_PENALTY, rw));

  /**
   * GstLlmPrefill:repeat-last-n:
   *
   * How many recent tokens the repeat penalty looks at; -1 all, 0 none.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_REPEAT_LAST_N,
      g_param_spec_int ("repeat-last-n", "Repeat last n",
          "Recent tokens the repeat penalty looks at (-1 = all, 0 = none)",
          -1, G_MAXINT32, DEFAULT_REPEAT_LAST_N, rw));

  /**
   * GstLlmPrefill:seed:
   *
   * Seed of the sampler's random draws; each prompt of a new conversation
   * restarts the sequence, so a prompt gives the same text every run.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_SEED,
      g_param_spec_uint64 ("seed", "Seed",
          "Seed of the sampler's random draws", 0, G_MAXUINT64, DEFAULT_SEED, rw));

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

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM prefill",
      "Filter/Converter/Text",
      "Runs a GGUF language model over each prompt of token ids, keeps the KV cache "
      "in a session and samples the first token of the response",
      "gst-llm developers");
  gst_element_class_add_static_metadata (element_class, "example",
      "gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf "
      "! llmprefill model=stories260K.gguf ! llmdecode max-tokens=64 "
      "! llmdetokenize model=stories260K.gguf ! fdsink");

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
  g_object_class_install_property (gobject_class, PROP_KV_POOL_BYTES,
      g_param_spec_uint64 ("kv-pool-bytes", "KV pool bytes",
          "KV memory limit of all streams on the shared engine (0 = none)", 0, G_MAXUINT64,
          DEFAULT_KV_POOL_BYTES, rw));

  /**
   * GstLlmPrefill:kv-full:
   *
   * What the engine does when kv-pool-bytes is reached: refuse the stream
   * that needs more (an element error naming the limit), or preempt the
   * longest-idle other stream, which recomputes its cache when it next
   * runs.
   *
   * Since: 0.2
   */
  g_object_class_install_property (gobject_class, PROP_KV_FULL,
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
  g_object_class_install_property (gobject_class, PROP_MAX_PREFILL_CHUNK,
      g_param_spec_uint ("max-prefill-chunk", "Max prefill chunk",
          "Prompt tokens per shared forward between other streams' steps", 1, 128,
          DEFAULT_MAX_PREFILL_CHUNK, rw));

  /**
   * GstLlmPrefill:max-batch-wait:
   *
   * How long (ns) a lone decode step waits for other streams' steps to
   * share its forward; 0 runs it at once (single-stream speed).
   *
   * Since: 0.2
   */
  g_object_class_install_property (gobject_class, PROP_MAX_BATCH_WAIT,
      g_param_spec_uint64 ("max-batch-wait", "Max batch wait",
          "Nanoseconds a lone step waits for company in the shared engine (0 = none)", 0,
          GST_SECOND, DEFAULT_MAX_BATCH_WAIT, rw));

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_prefill_change_state);
  element_class->set_context = GST_DEBUG_FUNCPTR (gst_llm_prefill_set_context);

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_KV_TYPE, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_KV_POLICY, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_KV_FULL, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_PROMPT_MODE, 0);
}
