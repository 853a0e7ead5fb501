/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmdecode
 * @title: llmdecode
 * @short_description: samples a response token by token from llmprefill's state
 *
 * llmdecode takes the `application/x-llm-state` buffers of llmprefill (a
 * session whose KV cache holds the prompt, with the logits after it not
 * sampled yet) and generates the response: it samples the first token
 * from those logits as the buffer arrives, then, on its own streaming
 * thread, feeds each sampled token back into the model and samples the
 * next, and pushes every token as `application/x-llm-tokens` (one int32
 * id per buffer) as soon as it is sampled. The output holds exactly the
 * generated ids, so `llmdecode ! filesink` captures the continuation.
 *
 * llmdecode owns the sampler: #GstLlmDecode:temperature, `top-k`,
 * `top-p`, `min-p`, `repeat-penalty`, `repeat-last-n` and `seed`. For
 * launch lines that set them on llmprefill, which keeps them as aliases,
 * the session carries llmprefill's values: a property set on llmdecode
 * wins over the same one set on llmprefill, which wins over the default
 * (greedy). They are read for every token, so a change while playing
 * applies from the response's next step on (and restarts the random
 * sequence from the seed); with the same values a kept conversation
 * (llmprefill keep-context) goes on with one random sequence, and a new
 * conversation restarts it from the seed, so a prompt gives the same
 * text every run.
 *
 * A response ends when the model samples an end-of-generation token (EOS,
 * EOT, `<|im_end|>`; it is not output), after #GstLlmDecode:max-tokens
 * tokens, when a #GstLlmDecode:stop-strings string appears, or when the KV
 * cache of a session with kv-policy=full is full. llmdecode then pushes an
 * `llm-end-of-response` event whose `reason` is `eos`, `max-tokens`,
 * `stop-string`, `context-full` or `cancelled`, and posts an `llm-stats`
 * element message (`gst-launch-1.0 -m` prints it) with `ttft-ms`,
 * `itl-ms-mean`, `itl-ms-p95`, `prompt-tokens`, `generated-tokens`,
 * `prompt-tokens-per-s`, `tokens-per-s` (decode steps per second),
 * `kv-bytes`, `context-tokens`, `device` and `stop-reason`, and in a live
 * pipeline `caption-latency-ms`: from the prompt's media time on the
 * pipeline clock (a frame's capture) to the end of its answer (`itl-ms-p95`
 * comes from a fixed-size histogram, within 1.6 % of the exact value, so
 * that unbounded generation runs in bounded memory). After the
 * event it feeds the token that ended the response (the last one output,
 * or the end-of-generation token) to the session, one more decode step, so
 * that a conversation llmprefill continues (keep-context) holds the whole
 * exchange.
 *
 * Stop strings are matched on the text of the response so far. A token is
 * output only if its text ends before the stop string begins: tokens that
 * might begin a stop string are held back until the following text shows
 * they do not (then they leave, late but in order), and when the stop
 * string completes, every token that overlaps it is dropped. Text that
 * shares a token with the start of the stop string (often the space before
 * a stop word) is dropped with it. However long the response, this takes
 * memory for the longest stop string only: at most that many tokens are
 * held (past that, which only tokens without text such as control tokens
 * can cause, the oldest leave).
 *
 * `ttft-ms` runs from the start of the prompt's prefill to the first token's
 * sampling here, as the state buffer arrives; waiting for a session in
 * llmprefill or for the previous response here does not count.
 *
 * Timing: the first token has the PTS of the prompt and lasts its time to
 * first token (prefill and first sampling); every later token lasts the
 * measured time of the decode step that produced it, and its PTS is where
 * the previous one ended. The tokens of a response therefore tile the time
 * after their prompt in the order they were made. If a response would
 * start before the previous one ended (generation slower than prompts
 * arrive), it starts where the previous one ended, so PTS never go back.
 *
 * Prompts arriving while a response is generated wait for it
 * (#GstLlmDecode:on-new-prompt=queue, and upstream blocks while one is
 * waiting) or cancel it (`replace`), also when llmprefill keeps the
 * conversation (keep-context), whose next prompt waits for the session the
 * response holds: llmprefill tells llmdecode so (`llm-prompt-waiting`, out
 * of band, through queues). A flush cancels generation within one
 * decode step; EOS waits for queued prompts to be answered before it goes
 * downstream. In a live pipeline the latency query adds the slowest of the
 * last 224 to 256 decode steps (llmprefill adds the slowest recent
 * prefill); before the first response nothing is added, and a latency
 * message is posted when that figure grows, or falls to half after a slow
 * spell, so the pipeline asks again.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf ! \
 *     llmprefill model=stories260K.gguf ! llmdecode max-tokens=64 ! \
 *     llmdetokenize model=stories260K.gguf ! fdsink
 * ]| Prints a continuation of prompt.txt and the llm-stats message.
 *
 * Since: 0.1
 */
#include "config.h"

#include <string.h>

#include "gstllmdecode.h"
#include "gstllmelements.h"
#include "gstllmlatency.h"
#include "gstllmsamplerprops.h"
#include "latency-stats.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "session.h"
#include "stop-matcher.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_decode_debug);
#define GST_CAT_DEFAULT gst_llm_decode_debug

/**
 * GstLlmOnNewPrompt:
 * @GST_LLM_ON_NEW_PROMPT_QUEUE: answer it after the current response
 * @GST_LLM_ON_NEW_PROMPT_REPLACE: cancel the current response (it ends
 *   with reason `cancelled`) and answer the new prompt
 *
 * What llmdecode does with a prompt that arrives while it generates.
 *
 * Since: 0.1
 */

#define GST_TYPE_LLM_ON_NEW_PROMPT (gst_llm_on_new_prompt_get_type ())
static GType
gst_llm_on_new_prompt_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_ON_NEW_PROMPT_QUEUE, "Answer it after the current response", "queue"},
    {GST_LLM_ON_NEW_PROMPT_REPLACE, "Cancel the current response and answer it", "replace"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmOnNewPrompt", values));
  return type;
}

#define DEFAULT_MAX_TOKENS 256
#define DEFAULT_ON_NEW_PROMPT GST_LLM_ON_NEW_PROMPT_QUEUE

enum {
  PROP_0,
  PROP_MAX_TOKENS,
  PROP_STOP_STRINGS,
  PROP_ON_NEW_PROMPT,
  PROP_SAMPLER_FIRST,
};

/* What waits for the task, in order: a serialized event, or a prompt's
 * state buffer with its first token, sampled as it arrived (so that TTFT
 * does not count the wait). */
typedef struct {
  GstEvent *event;
  GstBuffer *state;
  gint32 first;
  gint64 first_token_us;        /* monotonic, when it was sampled */
  GThread *arrived_on;          /* the streaming thread it came on (a reference) */
} Queued;

/* A generated token not pushed yet (it may begin a stop string). */
typedef struct {
  gint32 id;
  GstClockTime pts, duration;
  guint index;          /* position in the response */
} HeldToken;

G_DEFINE_TYPE (GstLlmDecode, gst_llm_decode, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmdecode, "llmdecode", GST_RANK_NONE,
    GST_TYPE_LLM_DECODE, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_STATE_MEDIA_TYPE));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TOKENS));

/* --- queue ----------------------------------------------------------- */

static Queued *
queued_event (GstEvent *event)
{
  Queued *q = g_new0 (Queued, 1);
  q->event = event;
  return q;
}

/* Call right after sampling @first: the time taken is TTFT's end. */
static Queued *
queued_prompt (GstBuffer *state, gint32 first)
{
  Queued *q = g_new0 (Queued, 1);
  q->state = state;
  q->first = first;
  q->first_token_us = g_get_monotonic_time ();
  q->arrived_on = g_thread_ref (g_thread_self ());
  return q;
}

static void
queued_free (Queued *q)
{
  if (q->event)
    gst_event_unref (q->event);
  if (q->state)
    gst_buffer_unref (q->state);
  if (q->arrived_on)
    g_thread_unref (q->arrived_on);
  g_free (q);
}

/* Empties the queue (lock held) into @dropped, for the caller to free
 * after unlocking: freeing a state buffer hands its session back to
 * llmprefill, which takes its own lock. Sticky events other than segment
 * and EOS survive a flush: they describe the stream (caps), not the
 * flushed data. */
static void
clear_queue (GstLlmDecode *self, gboolean keep_sticky, GQueue *dropped)
{
  GQueue keep = G_QUEUE_INIT;
  Queued *q;

  while ((q = g_queue_pop_head (&self->queue))) {
    GstEvent *e = q->event;
    if (e && keep_sticky && GST_EVENT_IS_STICKY (e) && GST_EVENT_TYPE (e) != GST_EVENT_SEGMENT
        && GST_EVENT_TYPE (e) != GST_EVENT_EOS)
      g_queue_push_tail (&keep, q);
    else
      g_queue_push_tail (dropped, q);
  }
  self->queue = keep;
  self->n_queued_states = 0;
}

static void
set_flushing (GstLlmDecode *self)
{
  g_mutex_lock (&self->lock);
  self->srcresult = GST_FLOW_FLUSHING;
  g_atomic_int_set (&self->cancel, TRUE);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
}

/* This element's sampler settings over @session's (llmprefill's
 * aliases). The session keeps its sampler, random sequence included,
 * while they stay the same. */
static void
apply_sampler_settings (GstLlmDecode *self, LlmSession *session)
{
  LlmSamplerParams params;
  llm_session_get_sampler (session, &params);
  GST_OBJECT_LOCK (self);
  gst_llm_sampler_props_apply (&self->sampler, &params);
  GST_OBJECT_UNLOCK (self);
  llm_session_set_sampler (session, &params);
}

/* The first token of the response to @state, from the logits prefill
 * left in its session, by this element's sampler settings over the
 * session's (llmprefill's aliases). -1, with an error posted, for a
 * buffer that brings nothing to sample. */
static gint32
sample_first (GstLlmDecode *self, GstBuffer *state)
{
  GstLlmSessionMeta *meta = gst_buffer_get_llm_session_meta (state);
  if (meta == NULL || meta->session == NULL || !meta->logits_pending) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Received a state buffer without a session to sample from."),
        ("llmdecode takes the output of llmprefill: a GstLlmSessionMeta whose session "
            "holds logits not sampled yet"));
    return -1;
  }
  if (!gst_llm_session_meta_take (meta)) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Another decoder is generating the response to this prompt: a prompt's session "
            "takes one llmdecode or llmspecverify. To decode one prompt several ways, put "
            "the tee before llmprefill, so that each branch prefills its own session."),
        ("a state buffer (or a copy) reached a second sampling element, e.g. through a "
            "tee after llmprefill or llmdraft"));
    return -1;
  }

  apply_sampler_settings (self, meta->session);

  gint32 first = llm_session_sample (meta->session);
  if (first < 0)
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("The session of a state buffer has no logits to sample from."),
        ("its meta says they are pending; was the session truncated or reset upstream?"));
  return first;
}

static guint64
serial_of (const Queued *q)
{
  return gst_buffer_get_llm_session_meta (q->state)->prompt_serial;
}

/* on-new-prompt=replace, as a newer prompt comes (lock held): the
 * prompts numbered up to @serial (G_MAXUINT64: all) that have not started
 * go into @dropped (to free after unlocking: freeing a state buffer gives
 * its session back to llmprefill), and the response being generated, if
 * it is one of them, ends. Only the newest prompt counts. Those numbered
 * up to @serial that come later (from before a queue, say) are dropped as
 * they come (self->superseded). */
static void
supersede_upto (GstLlmDecode *self, guint64 serial, GQueue *dropped)
{
  if (serial != G_MAXUINT64)
    self->superseded = MAX (self->superseded, serial);
  for (GList *l = self->queue.head; l;) {
    GList *next = l->next;
    if (((Queued *) l->data)->state && serial_of (l->data) <= serial) {
      g_queue_push_tail (dropped, l->data);
      g_queue_delete_link (&self->queue, l);
      self->n_queued_states--;
    }
    l = next;
  }
  if (self->generating && self->generating_serial <= serial) {
    GST_DEBUG_OBJECT (self, "new prompt: cancelling the current response");
    g_atomic_int_set (&self->cancel, TRUE);
  }
}

static GstFlowReturn
gst_llm_decode_chain (GstPad *pad, GstObject *parent, GstBuffer *buffer)
{
  GstLlmDecode *self = GST_LLM_DECODE (parent);
  GstLlmOnNewPrompt mode;
  GQueue dropped = G_QUEUE_INIT;
  GstFlowReturn ret;

  /* Sampled now, not when the task gets to it: the first token is there
   * as soon as the prompt is, whatever response runs before it. */
  gint32 first = sample_first (self, buffer);
  if (first < 0) {
    gst_buffer_unref (buffer);
    return GST_FLOW_ERROR;
  }
  Queued *prompt = queued_prompt (buffer, first);

  GST_OBJECT_LOCK (self);
  mode = self->on_new_prompt;
  GST_OBJECT_UNLOCK (self);

  g_mutex_lock (&self->lock);
  const guint64 serial = serial_of (prompt);
  if (mode == GST_LLM_ON_NEW_PROMPT_REPLACE && serial != 0 && serial <= self->superseded) {
    GST_DEBUG_OBJECT (self, "prompt %" G_GUINT64_FORMAT " was superseded already", serial);
    g_queue_push_tail (&dropped, g_steal_pointer (&prompt));
  } else if (mode == GST_LLM_ON_NEW_PROMPT_REPLACE) {
    supersede_upto (self, G_MAXUINT64, &dropped);
  } else {
    /* One prompt waits here; further ones wait upstream. */
    while (self->srcresult == GST_FLOW_OK && self->n_queued_states > 0)
      g_cond_wait (&self->cond, &self->lock);
  }
  ret = self->srcresult;
  if (prompt == NULL) {
    /* dropped: not this prompt's to answer */
  } else if (ret == GST_FLOW_OK) {
    g_queue_push_tail (&self->queue, prompt);
    self->n_queued_states++;
    g_cond_broadcast (&self->cond);
  } else {
    g_queue_push_tail (&dropped, prompt);
  }
  g_mutex_unlock (&self->lock);

  g_queue_clear_full (&dropped, (GDestroyNotify) queued_free);
  if (ret != GST_FLOW_OK)
    GST_DEBUG_OBJECT (self, "refusing a prompt: %s", gst_flow_get_name (ret));
  return ret;
}

/* --- generation ------------------------------------------------------ */

static GstFlowReturn
push_token (GstLlmDecode *self, const HeldToken *t)
{
  GstBuffer *out = gst_llm_tokens_buffer_new (&t->id, 1);

  GST_BUFFER_PTS (out) = t->pts;
  GST_BUFFER_DURATION (out) = t->duration;
  GST_BUFFER_OFFSET (out) = t->index;
  GST_BUFFER_OFFSET_END (out) = t->index + 1;
  self->out_bytes += gst_buffer_get_size (out);
  return gst_pad_push (self->srcpad, out);
}

/* Pushes the first @n held tokens. */
static GstFlowReturn
push_held (GstLlmDecode *self, guint n)
{
  GstFlowReturn ret = GST_FLOW_OK;
  guint i = 0;

  while (i < n && ret == GST_FLOW_OK)
    ret = push_token (self, &g_array_index (self->held, HeldToken, i++));
  g_array_remove_range (self->held, 0, i);
  return ret;
}

/* Outputs token @id, or holds it while it may be part of a stop string.
 * Sets *@stopped when a stop string completed (the overlapping tokens are
 * dropped then). */
static GstFlowReturn
emit_token (GstLlmDecode *self, LlmTokenizer *tok, LlmStopMatcher *stops, gint32 id,
    GstClockTime pts, GstClockTime duration, guint index, gboolean *stopped)
{
  HeldToken t = { id, pts, duration, index };
  guint n_release;

  g_string_truncate (self->piece, 0);
  if (tok)
    llm_tokenizer_token_to_piece (tok, id, FALSE, self->piece);
  g_array_append_val (self->held, t);
  *stopped = llm_stop_matcher_add (stops, self->piece->str, self->piece->len, &n_release);
  GstFlowReturn ret = push_held (self, n_release);
  if (*stopped) {
    GST_DEBUG_OBJECT (self, "stop string; dropping %u tokens", self->held->len);
    g_array_set_size (self->held, 0);
  }
  return ret;
}

/* The response's settings (object lock held): its bound and a matcher
 * for its stop strings. */
static LlmStopMatcher *
read_settings (GstLlmDecode *self, guint *max_tokens, gboolean *has_stops)
{
  *max_tokens = self->max_tokens;
  *has_stops = self->stop_strings && self->stop_strings[0];
  return llm_stop_matcher_new ((const char *const *) self->stop_strings);
}

/* Settings set while playing, read again for the response under way. A
 * matcher for the stop strings as they are now takes the tokens the old
 * one holds (not out yet) as if they came now, and replaces it; text
 * already out is not searched again (the same strings hold the same
 * tokens). Returns TRUE when a string completed in them (the tokens it
 * overlaps are dropped then, as in emit_token); *@ret says how pushing
 * the others went. */
static gboolean
renew_settings (GstLlmDecode *self, LlmSession *session, LlmTokenizer *tok,
    guint *max_tokens, LlmStopMatcher **stops, gboolean *has_stops, GstFlowReturn *ret)
{
  apply_sampler_settings (self, session);
  GST_OBJECT_LOCK (self);
  LlmStopMatcher *renewed = read_settings (self, max_tokens, has_stops);
  GST_OBJECT_UNLOCK (self);
  llm_stop_matcher_free (*stops);
  *stops = renewed;

  guint release = 0;
  gboolean stopped = FALSE;
  for (guint i = 0; i < self->held->len && !stopped; i++) {
    g_string_truncate (self->piece, 0);
    if (tok && *has_stops)
      llm_tokenizer_token_to_piece (tok, g_array_index (self->held, HeldToken, i).id, FALSE,
          self->piece);
    guint n;
    stopped = llm_stop_matcher_add (renewed, self->piece->str, self->piece->len, &n);
    release += n;
  }
  *ret = push_held (self, release);
  if (stopped) {
    GST_DEBUG_OBJECT (self, "new stop string; dropping %u tokens", self->held->len);
    g_array_set_size (self->held, 0);
  }
  return stopped;
}

static void
post_stats (GstLlmDecode *self, GstLlmSessionMeta *meta, gint64 ttft_us, guint generated,
    gsize kv_bytes, guint context_tokens, const char *device, const char *reason)
{
  guint64 n = llm_latency_stats_count (&self->steps);
  double total_us = llm_latency_stats_sum (&self->steps);
  double mean_ms = llm_latency_stats_mean (&self->steps) / 1000.0;
  /* nearest rank, within 1/64 */
  double p95_ms = llm_latency_stats_percentile (&self->steps, 95) / 1000.0;

  GstStructure *s = gst_structure_new ("llm-stats",
      "ttft-ms", G_TYPE_DOUBLE, ttft_us / 1000.0,
      "itl-ms-mean", G_TYPE_DOUBLE, mean_ms,
      "itl-ms-p95", G_TYPE_DOUBLE, p95_ms,
      "prompt-tokens", G_TYPE_UINT, meta->prompt_tokens,
      "generated-tokens", G_TYPE_UINT, generated,
      "prompt-tokens-per-s", G_TYPE_DOUBLE,
      ttft_us > 0 ? meta->prompt_tokens * 1e6 / ttft_us : 0.0,
      "tokens-per-s", G_TYPE_DOUBLE, total_us > 0 ? n * 1e6 / total_us : 0.0,
      "kv-bytes", G_TYPE_UINT64, (guint64) kv_bytes,
      "context-tokens", G_TYPE_UINT, context_tokens,
      "device", G_TYPE_STRING, device,
      "stop-reason", G_TYPE_STRING, reason, NULL);
  /* Live media: how long after its time on the pipeline clock the
   * prompt's media got its whole answer (glass to caption). */
  GstClockTime rt = GST_CLOCK_TIME_NONE, now = GST_CLOCK_TIME_NONE;
  GstEvent *seg_event = gst_pad_get_sticky_event (self->sinkpad, GST_EVENT_SEGMENT, 0);
  GstClock *clock = gst_element_get_clock (GST_ELEMENT (self));
  GST_OBJECT_LOCK (self);
  const gboolean live = self->latency.live;
  GST_OBJECT_UNLOCK (self);
  if (live && seg_event && clock && GST_CLOCK_TIME_IS_VALID (meta->prompt_pts)) {
    const GstSegment *seg;
    gst_event_parse_segment (seg_event, &seg);
    rt = gst_segment_to_running_time (seg, GST_FORMAT_TIME, meta->prompt_pts);
    now = gst_clock_get_time (clock) - gst_element_get_base_time (GST_ELEMENT (self));
    if (GST_CLOCK_TIME_IS_VALID (rt) && now >= rt)
      gst_structure_set (s, "caption-latency-ms", G_TYPE_DOUBLE,
          (double) (now - rt) / GST_MSECOND, NULL);
  }
  if (seg_event)
    gst_event_unref (seg_event);
  if (clock)
    gst_object_unref (clock);
  GstLlmDecodeClass *klass = GST_LLM_DECODE_GET_CLASS (self);
  if (klass->add_stats)
    klass->add_stats (self, s);
  GST_INFO_OBJECT (self, "%" GST_PTR_FORMAT, s);
  gst_element_post_message (GST_ELEMENT (self), gst_message_new_element (GST_OBJECT (self), s));
}

static gboolean
one_step (GstLlmDecode *self, GstBuffer *state, LlmSession *session, gint32 token, guint limit,
    gint32 *out, guint *n_out, GError **error)
{
  *n_out = 1;
  return llm_session_step (session, token, out, error);
}

/* Generates the response to one prompt (consumed). */
static GstFlowReturn
generate (GstLlmDecode *self, Queued *prompt)
{
  GstBuffer *state = prompt->state;
  GstLlmSessionMeta *meta = gst_buffer_get_llm_session_meta (state);
  GstFlowReturn ret = GST_FLOW_OK;
  GError *error = NULL;

  guint max_tokens;
  gboolean has_stops;
  GST_OBJECT_LOCK (self);
  gint settings_seen = g_atomic_int_get (&self->settings_serial);
  LlmStopMatcher *stops = read_settings (self, &max_tokens, &has_stops);
  GST_OBJECT_UNLOCK (self);

  LlmSession *session = meta->session;
  /* The first token was sampled as the prompt came; what was set while
   * it waited for this response applies from the next. */
  apply_sampler_settings (self, session);
  LlmModel *model = llm_session_model (session);
  LlmTokenizer *tok = llm_model_tokenizer (model);
  const LlmVocab *vocab = tok ? llm_tokenizer_vocab (tok) : NULL;
  if (has_stops && tok == NULL)
    GST_WARNING_OBJECT (self, "model %s has no tokenizer: stop-strings cannot match",
        llm_model_path (model));

  GstClockTime pts = GST_CLOCK_TIME_IS_VALID (meta->prompt_pts) ? meta->prompt_pts
      : GST_BUFFER_PTS (state);
  if (GST_CLOCK_TIME_IS_VALID (pts) && GST_CLOCK_TIME_IS_VALID (self->last_end)
      && pts < self->last_end)
    pts = self->last_end;
  gint64 ttft_us = MAX (prompt->first_token_us - meta->prompt_time_us, 0);
  GstClockTime duration = ttft_us * GST_USECOND;

  g_array_set_size (self->held, 0);
  llm_latency_stats_clear (&self->steps);

  gint32 token = prompt->first;
  guint generated = 0;
  const char *reason = NULL;
  gboolean cancelled = FALSE;
  /* The session had no room for the response's next token (its context
   * or the engine's KV pool), so it cannot take the last one either. */
  gboolean no_room = FALSE;
  GST_DEBUG_OBJECT (self, "response to a prompt of %u tokens, first token %d",
      meta->prompt_tokens, token);
  GstLlmDecodeClass *klass = GST_LLM_DECODE_GET_CLASS (self);
  self->prompt_thread = prompt->arrived_on;
  /* A flush, a shutdown or a newer prompt that replaces this response
   * also ends a wait for KV memory other streams hold. */
  llm_session_set_cancel_flag (session, &self->cancel);
  if (klass->begin)
    klass->begin (self, state, session, token);
  /* Tokens the last step made that are not out yet; all but the last are
   * fed to the session already. */
  gint32 made[GST_LLM_DECODE_MAX_STEP];
  guint n_made = 0, n_taken = 0;

  for (;;) {
    if (g_atomic_int_get (&self->cancel)) {
      reason = GST_LLM_STOP_REASON_CANCELLED;
      cancelled = TRUE;
      break;
    }
    if (vocab && llm_vocab_is_eog (vocab, token)) {
      reason = GST_LLM_STOP_REASON_EOS;
      break;
    }
    gboolean stopped = FALSE;
    ret = emit_token (self, has_stops ? tok : NULL, stops, token, pts, duration, generated,
        &stopped);
    generated++;
    if (GST_CLOCK_TIME_IS_VALID (pts))
      pts += duration;
    /* Settings set while playing apply from here on: max-tokens also
     * bounds the response under way (the one way to end an endless one,
     * max-tokens=0 in a sliding window, short of a new prompt or FLUSH),
     * the sampler takes the next token, and a new stop string may end
     * the response in what is held back. */
    const gint serial = g_atomic_int_get (&self->settings_serial);
    if (ret == GST_FLOW_OK && !stopped && serial != settings_seen) {
      settings_seen = serial;
      stopped = renew_settings (self, session, tok, &max_tokens, &stops, &has_stops, &ret);
    }
    if (ret != GST_FLOW_OK) {
      reason = GST_LLM_STOP_REASON_CANCELLED;
      cancelled = TRUE;
      break;
    }
    if (stopped) {
      reason = GST_LLM_STOP_REASON_STOP_STRING;
      break;
    }
    if (max_tokens > 0 && generated >= max_tokens) {
      reason = GST_LLM_STOP_REASON_MAX_TOKENS;
      break;
    }

    if (n_taken < n_made) {
      token = made[n_taken++];
      continue;
    }
    gint64 t0 = g_get_monotonic_time ();
    if (!klass->step (self, state, session, token, max_tokens > 0 ? max_tokens - generated : 0,
            made, &n_made, &error)) {
      n_made = n_taken = 0;
      if (g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CANCELLED)) {
        GST_DEBUG_OBJECT (self, "cancelled while waiting for KV memory");
        reason = GST_LLM_STOP_REASON_CANCELLED;
        cancelled = TRUE;
      } else if (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL)) {
        GST_DEBUG_OBJECT (self, "context full: %s", error->message);
        reason = GST_LLM_STOP_REASON_CONTEXT_FULL;
        no_room = TRUE;
      } else if (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL)
          || g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_PREEMPTED)) {
        /* Other streams took the memory this response needed to grow:
         * it ends here, as at a full context, and the stream lives on for
         * its next prompt; one stream's newcomer never fails another. */
        g_autofree char *advice = gst_llm_kv_pool_advice (llm_session_engine (session),
            llm_session_kv_bytes (session), "lower max-tokens");
        GST_ELEMENT_WARNING (self, RESOURCE, NO_SPACE_LEFT,
            ("The engine's KV memory ran out while this response grew, so it ends after "
                "%u tokens. %s", generated, advice), ("%s", error->message));
        reason = GST_LLM_STOP_REASON_KV_POOL_FULL;
        no_room = TRUE;
      } else {
        GST_ELEMENT_ERROR (self, STREAM, FAILED,
            ("Generating the next token failed: %s.", error->message),
            ("%s error %d", g_quark_to_string (error->domain), error->code));
        ret = GST_FLOW_ERROR;
        reason = GST_LLM_STOP_REASON_CANCELLED;
        cancelled = TRUE;
      }
      g_clear_error (&error);
      break;
    }
    gint64 took = g_get_monotonic_time () - t0;
    g_assert (n_made >= 1 && n_made <= GST_LLM_DECODE_MAX_STEP);
    /* A step that made several tokens: each lasts its share. The latency
     * is the whole step's: a token may wait for all of it. */
    for (guint i = 0; i < n_made; i++)
      llm_latency_stats_add (&self->steps, took / n_made);
    gst_llm_latency_note (GST_ELEMENT (self), &self->latency, took * GST_USECOND);
    duration = took / n_made * GST_USECOND;
    token = made[0];
    n_taken = 1;
  }
  /* A response that ended inside a step's tokens: the session was fed
   * those after the one that ended it; take them back, so it holds what
   * plain steps would have fed. */
  if (n_taken < n_made)
    llm_session_truncate (session, llm_session_n_ids (session) - (n_made - n_taken));

  /* Held tokens that began no stop string are output after all. */
  if (ret == GST_FLOW_OK && !cancelled)
    ret = push_held (self, self->held->len);
  g_array_set_size (self->held, 0);
  self->last_end = pts;

  GST_DEBUG_OBJECT (self, "response done: %u tokens, %s", generated, reason);
  if (ret == GST_FLOW_OK) {
    /* The media the prompt described: a caption of the whole response
     * carries its time. */
    GstEvent *eor = gst_llm_event_new_end_of_response_timed (reason,
        GST_CLOCK_TIME_IS_VALID (meta->prompt_pts) ? meta->prompt_pts : GST_BUFFER_PTS (state),
        GST_BUFFER_DURATION (state));
    if (!gst_pad_push_event (self->srcpad, eor))
      GST_DEBUG_OBJECT (self, "end-of-response was not handled downstream");
  }

  /* The token that ended the response (the last one output, or the
   * end-of-generation token) was sampled but not fed. Feeding it, after
   * the response is out, leaves the session holding the whole exchange,
   * so that llmprefill's keep-context continues a complete conversation
   * (a chat turn closed by its <|im_end|>). Nothing samples after it:
   * the next prompt follows it. */
  if (ret == GST_FLOW_OK && !cancelled && !no_room) {
    if (!llm_session_feed (session, &token, 1, &error)) {
      GST_DEBUG_OBJECT (self, "feeding the last token: %s", error->message);
      g_clear_error (&error);
    }
  }

  llm_session_set_cancel_flag (session, NULL);
  gsize kv_bytes = llm_session_kv_bytes (session);
  guint context_tokens = llm_session_n_ids (session);
  post_stats (self, meta, ttft_us, generated, kv_bytes, context_tokens, llm_model_device (model), reason);

  /* Last: dropping the buffer gives the session back to llmprefill. */
  llm_stop_matcher_free (stops);
  self->prompt_thread = NULL;
  queued_free (prompt);
  return ret;
}

static void
gst_llm_decode_loop (GstPad *pad)
{
  GstLlmDecode *self = GST_LLM_DECODE (gst_pad_get_parent_element (pad));
  Queued *q;
  GstFlowReturn ret = GST_FLOW_OK;

  if (self == NULL)
    return;

  g_mutex_lock (&self->lock);
  while (self->srcresult == GST_FLOW_OK && g_queue_is_empty (&self->queue))
    g_cond_wait (&self->cond, &self->lock);
  if (self->srcresult != GST_FLOW_OK) {
    ret = self->srcresult;
    g_mutex_unlock (&self->lock);
    goto pause;
  }
  q = g_queue_pop_head (&self->queue);
  if (q->state) {
    self->n_queued_states--;
    self->generating = TRUE;
    self->generating_serial = serial_of (q);
    g_atomic_int_set (&self->cancel, FALSE);
  }
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);

  if (q->event) {
    GstEvent *event = g_steal_pointer (&q->event);
    queued_free (q);
    gboolean is_eos = GST_EVENT_TYPE (event) == GST_EVENT_EOS;
    if (GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT) {
      self->last_end = GST_CLOCK_TIME_NONE;
      event = gst_llm_segment_for_output (event, self->out_bytes);
    }
    GST_LOG_OBJECT (self, "pushing %" GST_PTR_FORMAT, event);
    gst_pad_push_event (self->srcpad, event);
    if (is_eos) {
      ret = GST_FLOW_EOS;
      goto pause;
    }
    gst_object_unref (self);
    return;
  }

  ret = generate (self, q);
  g_mutex_lock (&self->lock);
  self->generating = FALSE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (ret == GST_FLOW_OK) {
    gst_object_unref (self);
    return;
  }

pause:
  GST_DEBUG_OBJECT (self, "pausing task: %s", gst_flow_get_name (ret));
  g_mutex_lock (&self->lock);
  /* Upstream learns why we stopped (flushing, EOS, an error) from chain. */
  if (self->srcresult == GST_FLOW_OK)
    self->srcresult = ret;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  gst_pad_pause_task (pad);
  if (ret == GST_FLOW_NOT_LINKED || ret < GST_FLOW_EOS) {
    GST_ELEMENT_FLOW_ERROR (self, ret);
    gst_pad_push_event (self->srcpad, gst_event_new_eos ());
  }
  gst_object_unref (self);
}

/* --- events, queries, activation ------------------------------------ */

/* @caps with each structure renamed to @media_type, keeping only the
 * vocab field: state and token caps name the same vocabulary. */
static GstCaps *
map_caps (GstCaps *caps, const char *media_type)
{
  if (caps == NULL || gst_caps_is_any (caps))
    return gst_caps_new_empty_simple (media_type);

  GstCaps *out = gst_caps_new_empty ();
  for (guint i = 0; i < gst_caps_get_size (caps); i++) {
    const GstStructure *s = gst_caps_get_structure (caps, i);
    GstStructure *m = gst_structure_new_empty (media_type);
    const GValue *vocab = gst_structure_get_value (s, GST_LLM_CAPS_FIELD_VOCAB);
    if (vocab)
      gst_structure_set_value (m, GST_LLM_CAPS_FIELD_VOCAB, vocab);
    out = gst_caps_merge_structure (out, m);
  }
  return out;
}

static gboolean
answer_caps_query (GstLlmDecode *self, GstPad *pad, GstQuery *query)
{
  GstPad *other = pad == self->sinkpad ? self->srcpad : self->sinkpad;
  const char *media_type = pad == self->sinkpad ? GST_LLM_DECODE_GET_CLASS (self)->sink_media_type
      : GST_LLM_TOKENS_MEDIA_TYPE;
  GstCaps *peer = gst_pad_peer_query_caps (other, NULL);
  GstCaps *caps = map_caps (peer, media_type);

  gst_clear_caps (&peer);
  return gst_llm_answer_caps_query (query, caps);
}

static gboolean
gst_llm_decode_sink_event (GstPad *pad, GstObject *parent, GstEvent *event)
{
  GstLlmDecode *self = GST_LLM_DECODE (parent);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START:
      set_flushing (self);
      gst_pad_push_event (self->srcpad, event);
      /* Returns once the task left its loop: within one decode step. */
      gst_pad_pause_task (self->srcpad);
      GST_DEBUG_OBJECT (self, "flushed: task paused");
      return TRUE;
    case GST_EVENT_FLUSH_STOP:{
      GQueue dropped = G_QUEUE_INIT;
      g_mutex_lock (&self->lock);
      clear_queue (self, TRUE, &dropped);
      self->srcresult = GST_FLOW_OK;
      g_atomic_int_set (&self->cancel, FALSE);
      g_mutex_unlock (&self->lock);
      g_queue_clear_full (&dropped, (GDestroyNotify) queued_free);
      self->last_end = GST_CLOCK_TIME_NONE;
      self->out_bytes = 0;
      gst_pad_push_event (self->srcpad, event);
      return gst_pad_start_task (self->srcpad, (GstTaskFunction) gst_llm_decode_loop,
          self->srcpad, NULL);
    }
    case GST_EVENT_CAPS:{
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      GstCaps *tokens = map_caps (caps, GST_LLM_TOKENS_MEDIA_TYPE);
      gst_event_unref (event);
      event = gst_event_new_caps (tokens);
      gst_caps_unref (tokens);
      break;
    }
    case GST_EVENT_CUSTOM_DOWNSTREAM_OOB:{
      /* The next prompt is waiting for the session this response, a
       * queued one or one still on its way holds (keep-context): with
       * replace, they give it up now, or the prompt would wait for their
       * end, which with max-tokens=0 may never come. */
      guint64 superseded;
      if (gst_llm_event_parse_prompt_waiting (event, &superseded)) {
        GST_OBJECT_LOCK (self);
        const gboolean replace = self->on_new_prompt == GST_LLM_ON_NEW_PROMPT_REPLACE;
        GST_OBJECT_UNLOCK (self);
        if (replace) {
          GQueue dropped = G_QUEUE_INIT;
          g_mutex_lock (&self->lock);
          supersede_upto (self, superseded, &dropped);
          g_mutex_unlock (&self->lock);
          g_queue_clear_full (&dropped, (GDestroyNotify) queued_free);
        }
        gst_event_unref (event);
        return TRUE;
      }
      break;
    }
    default:
      break;
  }

  if (!GST_EVENT_IS_SERIALIZED (event))
    return gst_pad_push_event (self->srcpad, event);

  /* Serialized events leave from the task, in order with the tokens. */
  g_mutex_lock (&self->lock);
  GstFlowReturn ret = self->srcresult;
  if (ret == GST_FLOW_OK)
    g_queue_push_tail (&self->queue, queued_event (event));
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (ret != GST_FLOW_OK) {
    GST_DEBUG_OBJECT (self, "dropping %" GST_PTR_FORMAT ": %s", event, gst_flow_get_name (ret));
    gst_event_unref (event);
    /* Shutting down (the source pad goes first): refusing would make the
     * core call a refused CAPS not-negotiated, and llmprefill would post
     * that as a fatal error of a pipeline that is only stopping. */
    return ret == GST_FLOW_FLUSHING;
  }
  return TRUE;
}

static gboolean
gst_llm_decode_sink_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstLlmDecode *self = GST_LLM_DECODE (parent);

  if (GST_QUERY_TYPE (query) == GST_QUERY_CAPS)
    return answer_caps_query (self, pad, query);
  return gst_pad_query_default (pad, parent, query);
}

static gboolean
gst_llm_decode_src_query (GstPad *pad, GstObject *parent, GstQuery *query)
{
  GstLlmDecode *self = GST_LLM_DECODE (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_CAPS:
      return answer_caps_query (self, pad, query);
    case GST_QUERY_LATENCY:
      /* A token leaves one decode step after the previous one ended. */
      return gst_llm_latency_answer (GST_ELEMENT (self), &self->latency, self->sinkpad, query);
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

static gboolean
gst_llm_decode_src_activate_mode (GstPad *pad, GstObject *parent, GstPadMode mode,
    gboolean active)
{
  GstLlmDecode *self = GST_LLM_DECODE (parent);

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;
  if (active) {
    g_mutex_lock (&self->lock);
    self->srcresult = GST_FLOW_OK;
    g_atomic_int_set (&self->cancel, FALSE);
    g_mutex_unlock (&self->lock);
    self->last_end = GST_CLOCK_TIME_NONE;
    self->out_bytes = 0;
    return gst_pad_start_task (pad, (GstTaskFunction) gst_llm_decode_loop, pad, NULL);
  }

  GQueue dropped = G_QUEUE_INIT;
  set_flushing (self);
  gboolean ok = gst_pad_stop_task (pad);
  g_mutex_lock (&self->lock);
  clear_queue (self, FALSE, &dropped);
  g_mutex_unlock (&self->lock);
  g_queue_clear_full (&dropped, (GDestroyNotify) queued_free);
  return ok;
}

static gboolean
gst_llm_decode_sink_activate_mode (GstPad *pad, GstObject *parent, GstPadMode mode,
    gboolean active)
{
  /* A chain waiting for room must return before the pad can go. */
  if (!active)
    set_flushing (GST_LLM_DECODE (parent));
  return mode == GST_PAD_MODE_PUSH;
}

static GstStateChangeReturn
gst_llm_decode_change_state (GstElement *element, GstStateChange transition)
{
  GstLlmDecode *self = GST_LLM_DECODE (element);
  GstStateChangeReturn ret;

  ret = GST_ELEMENT_CLASS (gst_llm_decode_parent_class)->change_state (element, transition);

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    /* what pads deactivation left: scratch of the last response */
    g_array_set_size (self->held, 0);
    llm_latency_stats_clear (&self->steps);
  } else if (transition == GST_STATE_CHANGE_READY_TO_NULL) {
    gst_llm_latency_reset (element, &self->latency);
  }
  return ret;
}

/* --- properties ------------------------------------------------------ */

static void
gst_llm_decode_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmDecode *self = GST_LLM_DECODE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MAX_TOKENS:
      self->max_tokens = g_value_get_uint (value);
      break;
    case PROP_STOP_STRINGS:{
      guint n = gst_value_array_get_size (value);
      char **strv = g_new0 (char *, n + 1);
      guint k = 0;
      for (guint i = 0; i < n; i++) {
        const char *s = g_value_get_string (gst_value_array_get_value (value, i));
        if (s && s[0])
          strv[k++] = g_strdup (s);
      }
      g_strfreev (self->stop_strings);
      self->stop_strings = strv;
      break;
    }
    case PROP_ON_NEW_PROMPT:
      self->on_new_prompt = g_value_get_enum (value);
      break;
    default:
      if (!gst_llm_sampler_props_set (&self->sampler, PROP_SAMPLER_FIRST, prop_id, value))
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  g_atomic_int_inc (&self->settings_serial);
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_decode_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmDecode *self = GST_LLM_DECODE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MAX_TOKENS:
      g_value_set_uint (value, self->max_tokens);
      break;
    case PROP_STOP_STRINGS:
      for (guint i = 0; self->stop_strings && self->stop_strings[i]; i++) {
        GValue s = G_VALUE_INIT;
        g_value_init (&s, G_TYPE_STRING);
        g_value_set_string (&s, self->stop_strings[i]);
        gst_value_array_append_and_take_value (value, &s);
      }
      break;
    case PROP_ON_NEW_PROMPT:
      g_value_set_enum (value, self->on_new_prompt);
      break;
    default:
      if (!gst_llm_sampler_props_get (&self->sampler, PROP_SAMPLER_FIRST, prop_id, value))
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_decode_finalize (GObject *object)
{
  GstLlmDecode *self = GST_LLM_DECODE (object);

  GQueue dropped = G_QUEUE_INIT;
  clear_queue (self, FALSE, &dropped);
  g_queue_clear_full (&dropped, (GDestroyNotify) queued_free);
  g_strfreev (self->stop_strings);
  g_string_free (self->piece, TRUE);
  g_array_unref (self->held);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (gst_llm_decode_parent_class)->finalize (object);
}

static void
gst_llm_decode_init (GstLlmDecode *self)
{
  GstElementClass *klass = GST_ELEMENT_GET_CLASS (self);
  self->sinkpad = gst_pad_new_from_template (gst_element_class_get_pad_template (klass, "sink"),
      "sink");
  gst_pad_set_chain_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_decode_chain));
  gst_pad_set_event_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_decode_sink_event));
  gst_pad_set_query_function (self->sinkpad, GST_DEBUG_FUNCPTR (gst_llm_decode_sink_query));
  gst_pad_set_activatemode_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_llm_decode_sink_activate_mode));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_template (gst_element_class_get_pad_template (klass, "src"),
      "src");
  gst_pad_set_query_function (self->srcpad, GST_DEBUG_FUNCPTR (gst_llm_decode_src_query));
  gst_pad_set_activatemode_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_llm_decode_src_activate_mode));
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
  gst_llm_latency_watch (GST_ELEMENT (self), &self->latency, self->srcpad);

  self->max_tokens = DEFAULT_MAX_TOKENS;
  self->stop_strings = NULL;
  self->on_new_prompt = DEFAULT_ON_NEW_PROMPT;
  gst_llm_sampler_props_init (&self->sampler);

  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->queue);
  self->srcresult = GST_FLOW_FLUSHING;
  self->last_end = GST_CLOCK_TIME_NONE;
  self->piece = g_string_new (NULL);
  self->held = g_array_new (FALSE, FALSE, sizeof (HeldToken));
  llm_latency_stats_clear (&self->steps);
}

static void
gst_llm_decode_class_init (GstLlmDecodeClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING;

  GST_DEBUG_CATEGORY_INIT (gst_llm_decode_debug, "llmdecode", 0, "LLM token generation");

  klass->sink_media_type = GST_LLM_STATE_MEDIA_TYPE;
  klass->step = one_step;

  gobject_class->set_property = gst_llm_decode_set_property;
  gobject_class->get_property = gst_llm_decode_get_property;
  gobject_class->finalize = gst_llm_decode_finalize;

  /**
   * GstLlmDecode:max-tokens:
   *
   * Most tokens of one response (the end-of-generation token not
   * counted); 0 means no limit other than the context.
   *
   * Set while playing, it applies to the response under way too: one
   * that has made that many tokens already ends after its next token,
   * which is how an application ends an endless live response
   * (max-tokens=0 under a window policy) and keeps the stream.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_MAX_TOKENS,
      g_param_spec_uint ("max-tokens", "Max tokens",
          "Most tokens generated per response (0 = until end of generation or a full context)",
          0, G_MAXUINT, DEFAULT_MAX_TOKENS, rw));

  /**
   * GstLlmDecode:stop-strings:
   *
   * Texts that end a response when they appear in it; the tokens that
   * overlap the stop string are not output. In a launch line:
   * `stop-strings="<\"The end\",\"\\012\">"` (`\012`: a newline).
   * Set while playing, they apply to the response under way from the
   * tokens not output yet on: those held back for the old strings are
   * matched against the new ones, and text already out is not searched
   * again.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_STOP_STRINGS,
      gst_param_spec_array ("stop-strings", "Stop strings",
          "Texts that end a response; tokens overlapping them are not output",
          g_param_spec_string ("stop-string", "Stop string", "Text that ends a response",
              NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS), rw));

  /**
   * GstLlmDecode:on-new-prompt:
   *
   * What a prompt that arrives during a response does: wait for it to end
   * (upstream blocks while one prompt waits), or cancel it.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_ON_NEW_PROMPT,
      g_param_spec_enum ("on-new-prompt", "On new prompt",
          "What a prompt arriving during a response does: queue (wait) or replace "
          "(cancel the response)", GST_TYPE_LLM_ON_NEW_PROMPT, DEFAULT_ON_NEW_PROMPT, rw));

  /* read for every token; a set one wins over llmprefill's alias */
  gst_llm_sampler_props_install (gobject_class, PROP_SAMPLER_FIRST, GST_PARAM_MUTABLE_PLAYING);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM decode",
      "Filter/Converter/Text",
      "Samples a response token by token from the session llmprefill made, "
      "pushing each token id as it is sampled",
      "gst-llm developers");
  gst_element_class_add_static_metadata (element_class, "example",
      "gst-launch-1.0 -m filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf "
      "! llmprefill model=stories260K.gguf ! llmdecode max-tokens=64 "
      "! llmdetokenize model=stories260K.gguf ! fdsink");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_decode_change_state);

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_ON_NEW_PROMPT, 0);
}
