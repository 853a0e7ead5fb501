/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmdetokenize
 * @title: llmdetokenize
 * @short_description: turns token ids back into UTF-8 text, as they stream
 *
 * llmdetokenize reads the vocabulary of a GGUF model and turns
 * `application/x-llm-tokens` (little-endian int32 ids) into
 * `text/x-raw,format=utf8`. It accepts only token caps whose `vocab` field
 * is its own model's vocabulary hash, so a model and a detokenizer that
 * disagree fail at link time instead of printing garbage. Caps without a
 * `vocab` field (a hand-written capsfilter) are accepted unchecked.
 *
 * Text leaves as soon as it forms whole UTF-8 characters: a character
 * whose bytes come from several tokens (byte-fallback tokens, byte-level
 * BPE) is held until complete, and its output buffer carries the PTS of
 * the input buffer that began it and lasts until the end of the input
 * that completed it. Held bytes are flushed at EOS and at the
 * `llm-end-of-response` and `llm-end-of-prompt` events (which are
 * forwarded); bytes that never became valid UTF-8 come out as U+FFFD, so
 * output is always valid UTF-8, and so does NUL (a byte token <0x00>), as
 * the text caps' contract (llm-caps.h) says: text elements downstream take
 * a buffer as a string. An input buffer that completes no
 * character produces no output buffer (and no gap event, which could
 * contradict the earlier PTS of held text).
 *
 * SentencePiece vocabularies with a space prefix put a space in front of
 * the first word of a prompt. When a prompt's ids start with BOS (as
 * llmtokenize emits them) and skip-special hides it, llmdetokenize removes
 * that one space, so text -> llmtokenize -> llmdetokenize gives back the
 * same bytes (text without NUL, in a vocabulary that spells every byte).
 * Generated text (llmdecode's output, which has no BOS) keeps its first
 * space: " time, there was..." continues "Once upon a". A new
 * prompt or response starts after end-of-response, end-of-prompt and flush.
 *
 * With #GstLlmDetokenize:mode `caption` it pushes one buffer per response
 * instead: the whole text of the response on one line (runs of white
 * space, newlines too, become one space; an empty response gives
 * nothing), pushed when the response ends, with the PTS and duration of
 * the media its prompt described (llmdecode's `llm-end-of-response` says
 * them), so that webvttenc, textoverlay, srtenc or tttocea608 show it
 * over the frames or audio it is about. Without such timing it lasts from
 * its first token to the end of its last. Where the tokens carry no
 * timestamps either (a text prompt read from a file or fdsrc), the
 * captions follow one another from the start of the segment, each as long
 * as its tokens took (their durations), and a segment that is not in time
 * (filesrc's bytes) goes downstream as a time segment from 0: caption
 * elements need times.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf ! \
 *     llmdetokenize model=stories260K.gguf ! fdsink
 * ]| Prints prompt.txt again, after a round trip through token ids.
 *
 * Since: 0.1
 */
#include "config.h"

#include <string.h>

#include <gst/base/gstbasetransform.h>

#include "gstllmelements.h"
#include "llm-caps.h"
#include "tokenizer.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_detokenize_debug);
#define GST_CAT_DEFAULT gst_llm_detokenize_debug

#define DEFAULT_MODEL NULL
#define DEFAULT_SKIP_SPECIAL TRUE

/**
 * GstLlmDetokenizeMode:
 * @GST_LLM_DETOKENIZE_MODE_STREAM: text as it forms, token by token
 * @GST_LLM_DETOKENIZE_MODE_CAPTION: one buffer per response, timed as its
 *   prompt's media
 *
 * Since: 0.4
 */
typedef enum {
  GST_LLM_DETOKENIZE_MODE_STREAM,
  GST_LLM_DETOKENIZE_MODE_CAPTION,
} GstLlmDetokenizeMode;

#define DEFAULT_MODE GST_LLM_DETOKENIZE_MODE_STREAM

#define GST_TYPE_LLM_DETOKENIZE_MODE (gst_llm_detokenize_mode_get_type ())
static GType
gst_llm_detokenize_mode_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_DETOKENIZE_MODE_STREAM, "Text as it forms, token by token", "stream"},
    {GST_LLM_DETOKENIZE_MODE_CAPTION, "One buffer per response, timed as its prompt's media",
        "caption"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmDetokenizeMode", values));
  return type;
}

enum {
  PROP_0,
  PROP_MODEL,
  PROP_SKIP_SPECIAL,
  PROP_MODE,
};

#define GST_TYPE_LLM_DETOKENIZE (gst_llm_detokenize_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmDetokenize, gst_llm_detokenize, GST, LLM_DETOKENIZE, GstBaseTransform)

struct _GstLlmDetokenize {
  GstBaseTransform parent;

  /* properties; object lock */
  char *model;
  gboolean skip_special;
  GstLlmDetokenizeMode mode;

  /* from NULL->READY to READY->NULL; vocab_hash also under the object lock
   * because caps queries read it from any thread */
  LlmTokenizer *tok;
  char *loaded_model;           /* the path tok came from, for messages */
  char vocab_hash[GST_LLM_VOCAB_HASH_LEN + 1];
  gboolean strip_space;         /* SPM vocabulary with add_space_prefix */

  /* streaming thread */
  GString *pending;             /* bytes of an unfinished UTF-8 character */
  GstClockTime pending_pts;     /* of the buffer that began them */
  GstClockTime pending_dts;
  guint64 pending_offset;
  GstClockTime last_end;        /* end (pts + duration) of the newest input */
  guint64 last_offset_end;
  gboolean at_start;            /* the next text begins a prompt or response */
  gboolean caption;             /* the mode of the text under way, read when it
                                 * began: a change applies from the next one */
  GstClockTime caption_span;    /* caption mode: the durations of its tokens */
  GstClockTime caption_next;    /* where a caption with no timestamp starts */
  guint64 out_bytes;            /* pushed since start or the last flush */
  gboolean after_bos;           /* ...and it began with a (hidden) BOS */
  GArray *ids;                  /* scratch, gint32 */
};

G_DEFINE_TYPE (GstLlmDetokenize, gst_llm_detokenize, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmdetokenize, "llmdetokenize", GST_RANK_NONE,
    GST_TYPE_LLM_DETOKENIZE, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TOKENS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TEXT));

static void
stamp (GstLlmDetokenize *self, GstBuffer *out)
{
  GST_BUFFER_PTS (out) = self->pending_pts;
  GST_BUFFER_DTS (out) = self->pending_dts;
  if (GST_CLOCK_TIME_IS_VALID (self->pending_pts) && GST_CLOCK_TIME_IS_VALID (self->last_end)
      && self->last_end >= self->pending_pts)
    GST_BUFFER_DURATION (out) = self->last_end - self->pending_pts;
  GST_BUFFER_OFFSET (out) = self->pending_offset;
  GST_BUFFER_OFFSET_END (out) = self->last_offset_end;
}

/* Makes an output buffer of the first @n pending bytes and removes them;
 * invalid UTF-8 becomes U+FFFD. */
static GstBuffer *
take_text (GstLlmDetokenize *self, gsize n)
{
  GstBuffer *out;

  if (g_utf8_validate_len (self->pending->str, n, NULL)) {
    out = gst_buffer_new_memdup (self->pending->str, n);
  } else {
    char *valid = g_utf8_make_valid (self->pending->str, n);
    GST_WARNING_OBJECT (self, "token bytes are not valid UTF-8; replaced with U+FFFD");
    out = gst_buffer_new_wrapped (valid, strlen (valid));
  }
  g_string_erase (self->pending, 0, n);
  stamp (self, out);
  return out;
}

static void
reset_stream (GstLlmDetokenize *self)
{
  if (self->pending->len)
    GST_DEBUG_OBJECT (self, "dropping %" G_GSIZE_FORMAT " held bytes", self->pending->len);
  g_string_truncate (self->pending, 0);
  self->pending_pts = self->pending_dts = GST_CLOCK_TIME_NONE;
  self->pending_offset = GST_BUFFER_OFFSET_NONE;
  self->last_end = GST_CLOCK_TIME_NONE;
  self->last_offset_end = GST_BUFFER_OFFSET_NONE;
  self->at_start = TRUE;
  self->after_bos = FALSE;
  self->caption_span = 0;
}

static gboolean ensure_src_caps (GstLlmDetokenize *self);

/* Caption mode: the response's text on one line, or NULL when it has
 * none. */
static GstBuffer *
take_caption (GstLlmDetokenize *self, GstClockTime pts, GstClockTime duration)
{
  g_autofree char *valid = g_utf8_make_valid (self->pending->str, self->pending->len);
  GString *line = g_string_new (NULL);
  for (const char *p = valid; *p; p++) {
    if (g_ascii_isspace (*p)) {
      if (line->len > 0 && line->str[line->len - 1] != ' ')
        g_string_append_c (line, ' ');
    } else {
      g_string_append_c (line, *p);
    }
  }
  if (line->len > 0 && line->str[line->len - 1] == ' ')
    g_string_truncate (line, line->len - 1);
  if (line->len == 0) {
    g_string_free (line, TRUE);
    g_string_truncate (self->pending, 0);
    return NULL;
  }
  const gsize len = line->len;
  GstBuffer *out = gst_buffer_new_wrapped (g_string_free (line, FALSE), len);
  stamp (self, out);
  if (GST_CLOCK_TIME_IS_VALID (pts)) {
    GST_BUFFER_PTS (out) = pts;
    GST_BUFFER_DURATION (out) = duration;
  } else if (!GST_BUFFER_PTS_IS_VALID (out)) {
    GST_BUFFER_PTS (out) = self->caption_next;
    GST_BUFFER_DURATION (out) = self->caption_span;
  }
  if (GST_BUFFER_DURATION_IS_VALID (out))
    self->caption_next = GST_BUFFER_PTS (out) + GST_BUFFER_DURATION (out);
  g_string_truncate (self->pending, 0);
  return out;
}

/* A prompt or response ended: what is held will never be completed.
 * An event handler cannot return a flow, so a failed push is posted as a
 * source would. @pts and @duration: the media of the response's prompt,
 * which a caption takes (NONE: unknown). */
static void
finish_text (GstLlmDetokenize *self, GstClockTime pts, GstClockTime duration)
{
  const gboolean caption = self->caption;
  if (self->pending->len > 0) {
    GstBuffer *out = caption ? take_caption (self, pts, duration)
        : take_text (self, self->pending->len);
    GstFlowReturn ret = GST_FLOW_NOT_NEGOTIATED;
    if (out == NULL) {
      reset_stream (self);
      return;
    }

    GST_DEBUG_OBJECT (self, "flushing %" G_GSIZE_FORMAT " held bytes", gst_buffer_get_size (out));
    if (ensure_src_caps (self)) {
      self->out_bytes += gst_buffer_get_size (out);
      ret = gst_pad_push (GST_BASE_TRANSFORM_SRC_PAD (self), out);
    } else {
      gst_buffer_unref (out);
    }
    if (ret == GST_FLOW_NOT_LINKED || ret == GST_FLOW_NOT_NEGOTIATED)
      GST_ELEMENT_FLOW_ERROR (self, ret);
  }
  reset_stream (self);
}

/* Appends the text of @ids to pending bytes. */
static void
append_pieces (GstLlmDetokenize *self, const gint32 *ids, guint n, gboolean special)
{
  const LlmVocab *vocab = llm_tokenizer_vocab (self->tok);

  for (guint i = 0; i < n; i++) {
    gint32 id = ids[i];
    if (id < 0 || (guint32) id >= vocab->n_tokens) {
      GST_WARNING_OBJECT (self, "token id %d is outside the vocabulary (%u tokens); skipped",
          id, vocab->n_tokens);
      continue;
    }
    gsize start = self->pending->len;
    gsize added = llm_tokenizer_token_to_piece (self->tok, id, special, self->pending);
    /* A tokenized prompt starts with BOS and its first word carries the
     * space SentencePiece put in front of it; generated text (which never
     * starts with BOS) keeps its first space, which belongs to the text. */
    if (self->at_start && id == vocab->bos && added == 0)
      self->after_bos = TRUE;
    if (self->at_start && added > 0 && vocab->tokens[id].type != LLM_TOKEN_CONTROL) {
      if (self->strip_space && self->after_bos && self->pending->str[start] == ' ')
        g_string_erase (self->pending, start, 1);
      self->at_start = FALSE;
    }
  }
}

static GstFlowReturn
gst_llm_detokenize_generate_output (GstBaseTransform *trans, GstBuffer **outbuf)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (trans);
  GstBuffer *in = trans->queued_buf;
  gboolean special;

  *outbuf = NULL;
  if (in == NULL)
    return GST_FLOW_OK;
  trans->queued_buf = NULL;

  if (!ensure_src_caps (self)) {
    gst_buffer_unref (in);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  g_array_set_size (self->ids, 0);
  if (!gst_llm_tokens_buffer_read (in, self->ids)) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT, ("Received a token buffer that is not "
            "a whole number of token ids."),
        ("%" G_GSIZE_FORMAT " bytes; application/x-llm-tokens buffers hold "
            "%d-byte little-endian ids", gst_buffer_get_size (in), GST_LLM_TOKEN_SIZE));
    gst_buffer_unref (in);
    return GST_FLOW_ERROR;
  }

  GST_OBJECT_LOCK (self);
  special = !self->skip_special;
  if (self->at_start)
    self->caption = self->mode == GST_LLM_DETOKENIZE_MODE_CAPTION;
  GST_OBJECT_UNLOCK (self);
  const gboolean caption = self->caption;

  gsize held = self->pending->len;
  if (held == 0) {
    self->pending_pts = GST_BUFFER_PTS (in);
    self->pending_dts = GST_BUFFER_DTS (in);
    self->pending_offset = GST_BUFFER_OFFSET (in);
  }
  self->last_end = GST_CLOCK_TIME_NONE;
  if (GST_BUFFER_PTS_IS_VALID (in) && GST_BUFFER_DURATION_IS_VALID (in))
    self->last_end = GST_BUFFER_PTS (in) + GST_BUFFER_DURATION (in);
  self->last_offset_end = GST_BUFFER_OFFSET_END (in);
  if (GST_BUFFER_DURATION_IS_VALID (in))
    self->caption_span += GST_BUFFER_DURATION (in);

  append_pieces (self, (const gint32 *) self->ids->data, self->ids->len, special);

  gsize len = self->pending->len;
  gsize tail = gst_llm_utf8_unfinished_tail (self->pending->str, len);
  /* A caption waits for the end of its response. */
  if (!caption && len > tail) {
    *outbuf = take_text (self, len - tail);
    if (*outbuf != NULL)
      self->out_bytes += gst_buffer_get_size (*outbuf);
    /* a tail no longer than this buffer's bytes began in this buffer */
    if (tail <= len - held) {
      self->pending_pts = GST_BUFFER_PTS (in);
      self->pending_dts = GST_BUFFER_DTS (in);
      self->pending_offset = GST_BUFFER_OFFSET (in);
    }
  }
  GST_LOG_OBJECT (self, "%u ids, holding %" G_GSIZE_FORMAT " bytes", self->ids->len,
      self->pending->len);

  gst_buffer_unref (in);
  return GST_FLOW_OK;
}

/* Sources with ANY caps (filesrc replaying ids) send no caps: the bytes
 * are taken as ids of our vocabulary, unchecked, and our caps go
 * downstream anyway, checked first, because a refused sticky caps event
 * only shows as a failed buffer push later. */
static gboolean
ensure_src_caps (GstLlmDetokenize *self)
{
  GstPad *srcpad = GST_BASE_TRANSFORM_SRC_PAD (self);

  if (gst_pad_has_current_caps (srcpad))
    return TRUE;

  GstCaps *caps = gst_llm_caps_new_text ();
  gboolean ok = !gst_pad_is_linked (srcpad) || gst_pad_peer_query_accept_caps (srcpad, caps);
  if (ok) {
    GST_WARNING_OBJECT (self, "no input caps: cannot check that the ids are of the "
        "vocabulary of %s", self->loaded_model);
    gst_pad_set_caps (srcpad, caps);
  }
  gst_caps_unref (caps);
  return ok;
}

static gboolean
gst_llm_detokenize_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:{
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      if (gst_llm_caps_get_vocab (caps) == NULL)
        GST_WARNING_OBJECT (self, "input caps %" GST_PTR_FORMAT " name no vocabulary; "
            "cannot check that the ids are of the vocabulary of %s", caps, self->loaded_model);
      break;
    }
    case GST_EVENT_SEGMENT:{
      /* caps belong before the segment; data flow reports a refusal */
      ensure_src_caps (self);
      GST_OBJECT_LOCK (self);
      const gboolean caption = self->mode == GST_LLM_DETOKENIZE_MODE_CAPTION;
      GST_OBJECT_UNLOCK (self);
      const GstSegment *in;
      gst_event_parse_segment (event, &in);
      self->caption_next = in->format == GST_FORMAT_TIME ? in->start : 0;
      if (caption && in->format != GST_FORMAT_TIME) {
        GstSegment time;
        gst_segment_init (&time, GST_FORMAT_TIME);
        GstEvent *timed = gst_event_new_segment (&time);
        gst_event_set_seqnum (timed, gst_event_get_seqnum (event));
        gst_event_unref (event);
        event = timed;
      } else {
        event = gst_llm_segment_for_output (event, self->out_bytes);
      }
      break;
    }
    case GST_EVENT_EOS:
    case GST_EVENT_STREAM_START:
    case GST_EVENT_SEGMENT_DONE:
      finish_text (self, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
      break;
    case GST_EVENT_FLUSH_STOP:
      reset_stream (self);
      self->out_bytes = 0;
      break;
    case GST_EVENT_CUSTOM_DOWNSTREAM:
      if (gst_llm_event_is_end_of_response (event)) {
        GstClockTime pts, duration;
        gst_llm_event_parse_end_of_response_timing (event, &pts, &duration);
        finish_text (self, pts, duration);
      } else if (gst_llm_event_is_end_of_prompt (event)) {
        finish_text (self, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
      }
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (gst_llm_detokenize_parent_class)->sink_event (trans, event);
}

static GstCaps *
own_tokens_caps (GstLlmDetokenize *self)
{
  GstCaps *caps;

  GST_OBJECT_LOCK (self);
  caps = gst_llm_caps_new_tokens (self->vocab_hash[0] ? self->vocab_hash : NULL);
  GST_OBJECT_UNLOCK (self);
  return caps;
}

static GstCaps *
gst_llm_detokenize_transform_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, GstCaps *filter)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (trans);
  GstCaps *tokens = own_tokens_caps (self);
  GstCaps *result;

  if (direction == GST_PAD_SRC) {
    result = gst_caps_ref (tokens);
  } else if (gst_caps_can_intersect (caps, tokens)) {
    result = gst_llm_caps_new_text ();
  } else {
    /* ids of another vocabulary: refusing them here is what makes
     * negotiation (and accept-caps) fail */
    GST_DEBUG_OBJECT (self, "%" GST_PTR_FORMAT " is not our vocabulary %" GST_PTR_FORMAT,
        caps, tokens);
    result = gst_caps_new_empty ();
  }
  gst_caps_unref (tokens);

  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full (filter, result, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (result);
    result = tmp;
  }
  GST_LOG_OBJECT (self, "%s %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
      direction == GST_PAD_SINK ? "sink" : "src", caps, result);
  return result;
}

static gboolean
load_tokenizer (GstLlmDetokenize *self)
{
  GST_OBJECT_LOCK (self);
  char *model = g_strdup (self->model);
  GST_OBJECT_UNLOCK (self);

  LlmTokenizer *tok = GST_LLM_LOAD_TOKENIZER (self, model);
  if (tok == NULL) {
    g_free (model);
    return FALSE;
  }

  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  self->tok = tok;
  self->strip_space = vocab->kind == LLM_VOCAB_SPM && vocab->add_space_prefix;
  GST_OBJECT_LOCK (self);
  g_strlcpy (self->vocab_hash, vocab->hash, sizeof self->vocab_hash);
  GST_OBJECT_UNLOCK (self);

  GST_INFO_OBJECT (self, "%s: %s vocabulary of %u tokens, vocab=%s%s", model,
      vocab->kind == LLM_VOCAB_SPM ? "SPM" : "BPE", vocab->n_tokens, vocab->hash,
      self->strip_space ? ", strips the space prefix" : "");
  self->loaded_model = model;
  return TRUE;
}

static void
unload_tokenizer (GstLlmDetokenize *self)
{
  g_clear_pointer (&self->tok, llm_tokenizer_free);
  g_clear_pointer (&self->loaded_model, g_free);
  GST_OBJECT_LOCK (self);
  self->vocab_hash[0] = '\0';
  GST_OBJECT_UNLOCK (self);
}

static GstStateChangeReturn
gst_llm_detokenize_change_state (GstElement *element, GstStateChange transition)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (element);
  GstStateChangeReturn ret;

  /* Loaded at NULL->READY so that caps queries in READY already answer
   * with the vocabulary, and a bad file fails the first state change. */
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !load_tokenizer (self))
    return GST_STATE_CHANGE_FAILURE;

  ret = GST_ELEMENT_CLASS (gst_llm_detokenize_parent_class)->change_state (element, transition);

  if (transition == GST_STATE_CHANGE_READY_TO_NULL ||
      (transition == GST_STATE_CHANGE_NULL_TO_READY && ret == GST_STATE_CHANGE_FAILURE))
    unload_tokenizer (self);
  return ret;
}

static gboolean
gst_llm_detokenize_start (GstBaseTransform *trans)
{
  reset_stream (GST_LLM_DETOKENIZE (trans));
  GST_LLM_DETOKENIZE (trans)->caption_next = 0;
  GST_LLM_DETOKENIZE (trans)->out_bytes = 0;
  return TRUE;
}

static gboolean
gst_llm_detokenize_stop (GstBaseTransform *trans)
{
  reset_stream (GST_LLM_DETOKENIZE (trans));
  return TRUE;
}

static void
gst_llm_detokenize_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      gst_llm_note_late_setting (GST_ELEMENT (self), pspec, GST_STATE_CHANGE_NULL_TO_READY);
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    case PROP_SKIP_SPECIAL:
      self->skip_special = g_value_get_boolean (value);
      break;
    case PROP_MODE:
      self->mode = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_detokenize_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model);
      break;
    case PROP_SKIP_SPECIAL:
      g_value_set_boolean (value, self->skip_special);
      break;
    case PROP_MODE:
      g_value_set_enum (value, self->mode);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_detokenize_finalize (GObject *object)
{
  GstLlmDetokenize *self = GST_LLM_DETOKENIZE (object);

  unload_tokenizer (self);
  g_free (self->model);
  g_string_free (self->pending, TRUE);
  g_array_unref (self->ids);
  G_OBJECT_CLASS (gst_llm_detokenize_parent_class)->finalize (object);
}

static void
gst_llm_detokenize_init (GstLlmDetokenize *self)
{
  self->model = g_strdup (DEFAULT_MODEL);
  self->skip_special = DEFAULT_SKIP_SPECIAL;
  self->mode = DEFAULT_MODE;
  self->pending = g_string_new (NULL);
  self->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  reset_stream (self);
  /* BaseTransform takes a subclass without transform functions for a
   * passthrough one; ours makes new buffers of another format. */
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), FALSE);
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), FALSE);
}

static void
gst_llm_detokenize_class_init (GstLlmDetokenizeClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (gst_llm_detokenize_debug, "llmdetokenize", 0,
      "LLM token ids to text");

  gobject_class->set_property = gst_llm_detokenize_set_property;
  gobject_class->get_property = gst_llm_detokenize_get_property;
  gobject_class->finalize = gst_llm_detokenize_finalize;

  /**
   * GstLlmDetokenize:model:
   *
   * Path of a GGUF model file; its vocabulary (`tokenizer.ggml.*` keys) is
   * read when the element goes to READY, and only token caps of that
   * vocabulary are accepted. A file that is missing or not a valid GGUF
   * with a tokenizer fails that state change with an error naming the file.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "GGUF model file whose vocabulary is used (read at the NULL to READY change); "
          "input caps must carry the same vocab hash",
          DEFAULT_MODEL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS));

  /**
   * GstLlmDetokenize:skip-special:
   *
   * Whether control tokens (BOS, EOS, `<|im_end|>`...) give no text. When
   * FALSE their texts appear in the output.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_SKIP_SPECIAL,
      g_param_spec_boolean ("skip-special", "Skip special tokens",
          "Leave control tokens (BOS, EOS, <|im_end|>...) out of the text; "
          "when false, their texts are written",
          DEFAULT_SKIP_SPECIAL,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmDetokenize:mode:
   *
   * `stream`: text as it forms. `caption`: one line per response, pushed
   * at its end with the time of the media its prompt described (for
   * webvttenc, textoverlay and other caption elements). A change while a
   * response is under way applies from the next one, so no response is
   * split between the two.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_MODE,
      g_param_spec_enum ("mode", "Mode",
          "stream: text as it forms; caption: one line per response, timed as the media "
          "its prompt described", GST_TYPE_LLM_DETOKENIZE_MODE, DEFAULT_MODE,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_DETOKENIZE_MODE, 0);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM detokenizer",
      "Filter/Converter/Text",
      "Turns token ids of a GGUF model's vocabulary back into UTF-8 text, "
      "emitting each character as soon as its bytes are complete",
      "gst-llm developers");
  gst_element_class_add_static_metadata (element_class, "example",
      "gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf "
      "! llmdetokenize model=stories260K.gguf ! fdsink");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_detokenize_change_state);

  trans_class->transform_caps = GST_DEBUG_FUNCPTR (gst_llm_detokenize_transform_caps);
  trans_class->generate_output = GST_DEBUG_FUNCPTR (gst_llm_detokenize_generate_output);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_llm_detokenize_sink_event);
  trans_class->start = GST_DEBUG_FUNCPTR (gst_llm_detokenize_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_llm_detokenize_stop);
}
