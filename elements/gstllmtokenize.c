/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmtokenize
 * @title: llmtokenize
 * @short_description: turns UTF-8 text into the token ids of a model
 *
 * llmtokenize reads the tokenizer of a GGUF model (the `tokenizer.ggml.*`
 * keys) and turns `text/x-raw,format=utf8` into `application/x-llm-tokens`:
 * buffers of little-endian int32 token ids, with caps that name the
 * vocabulary (`vocab=<hash>`) so only elements of the same vocabulary link.
 *
 * Text may arrive in any pieces, split even inside a UTF-8 character: the
 * ids are exactly those of tokenizing the whole prompt at once. To get
 * there, llmtokenize tokenizes each buffer's text up to its last space that
 * follows a word, and holds back the rest (the word that the next buffer
 * may continue) until more text, an `llm-end-of-prompt` event or EOS
 * arrives. Vocabularies with tokens that span a space (a few SPM and BPE
 * files have them) hold back the whole prompt instead.
 *
 * A prompt starts at stream start, after `llm-end-of-prompt` and after a
 * flush: it gets BOS (see #GstLlmTokenize:add-bos) and, for SentencePiece
 * vocabularies that ask for it, the leading space prefix. Each output
 * buffer carries the PTS and offset of the input buffer its first
 * character came from, and lasts until the end of the input buffer that
 * completed it. An input buffer that completes no text produces no output.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf ! \
 *     filesink location=ids.bin
 * ]| Writes the ids of prompt.txt (BOS first) to ids.bin; `od -An -t d4 ids.bin`
 * prints them.
 *
 * Since: 0.1
 */
#include "config.h"

#include <string.h>

#include <gst/base/gstbasetransform.h>

#include "gstllmelements.h"
#include "llm-caps.h"
#include "tokenizer.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_tokenize_debug);
#define GST_CAT_DEFAULT gst_llm_tokenize_debug

/**
 * GstLlmAddBos:
 * @GST_LLM_ADD_BOS_AUTO: as the model file says (`tokenizer.ggml.add_bos_token`)
 * @GST_LLM_ADD_BOS_TRUE: always, if the vocabulary has a BOS token
 * @GST_LLM_ADD_BOS_FALSE: never
 *
 * Whether llmtokenize puts the BOS token in front of each prompt.
 *
 * Since: 0.1
 */
typedef enum {
  GST_LLM_ADD_BOS_AUTO,
  GST_LLM_ADD_BOS_TRUE,
  GST_LLM_ADD_BOS_FALSE,
} GstLlmAddBos;

#define GST_TYPE_LLM_ADD_BOS (gst_llm_add_bos_get_type ())
static GType
gst_llm_add_bos_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_ADD_BOS_AUTO, "As the model file says (tokenizer.ggml.add_bos_token)", "auto"},
    {GST_LLM_ADD_BOS_TRUE, "Always, if the vocabulary has a BOS token", "true"},
    {GST_LLM_ADD_BOS_FALSE, "Never", "false"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmAddBos", values));
  return type;
}

#define DEFAULT_MODEL NULL
#define DEFAULT_ADD_BOS GST_LLM_ADD_BOS_AUTO
#define DEFAULT_PARSE_SPECIAL TRUE

enum {
  PROP_0,
  PROP_MODEL,
  PROP_ADD_BOS,
  PROP_PARSE_SPECIAL,
};

#define GST_TYPE_LLM_TOKENIZE (gst_llm_tokenize_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmTokenize, gst_llm_tokenize, GST, LLM_TOKENIZE, GstBaseTransform)

struct _GstLlmTokenize {
  GstBaseTransform parent;

  /* properties; object lock */
  char *model;
  GstLlmAddBos add_bos;
  gboolean parse_special;

  /* from NULL->READY to READY->NULL; vocab_hash also under the object lock
   * because caps queries read it from any thread */
  LlmTokenizer *tok;
  char *loaded_model;           /* the path tok came from, for messages */
  char vocab_hash[GST_LLM_VOCAB_HASH_LEN + 1];
  /* the vocabulary tokenizes text on either side of " " independently */
  gboolean split_at_spaces;

  /* streaming thread */
  GString *pending;             /* text not tokenized yet */
  GstClockTime pending_pts;     /* of the buffer pending's first byte came from */
  GstClockTime pending_dts;
  guint64 pending_offset;
  GstClockTime last_end;        /* end (pts + duration) of the newest input */
  guint64 last_offset_end;
  gboolean prompt_start;        /* the next ids begin a prompt */
  guint64 out_bytes;            /* pushed since start or the last flush */
  gboolean mismatch_reported;   /* one vocabulary error per run is enough */
  gboolean forced_cut_reported; /* and one warning about cutting long text */
  GArray *ids;                  /* scratch, gint32 */
};

G_DEFINE_TYPE (GstLlmTokenize, gst_llm_tokenize, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmtokenize, "llmtokenize", GST_RANK_NONE,
    GST_TYPE_LLM_TOKENIZE, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TEXT));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TOKENS));

/* The whitespace of the tokenizers' pre-tokenizer patterns (\s): Unicode
 * White_Space. */
static gboolean
is_space (gunichar c)
{
  return g_unichar_isspace (c) || c == 0x0b || c == 0x85;
}

/* Whether the character that ends at @end (exclusive) in @text is
 * whitespace. */
static gboolean
char_before_is_space (const char *text, gsize end)
{
  guchar last = (guchar) text[end - 1];
  if (last < 0x80)
    return g_ascii_isspace (last) || last == 0x0b;
  const char *start = text + end - 1;
  for (int i = 0; i < 3 && start > text && ((guchar) *start & 0xc0) == 0x80; i++)
    start--;
  gunichar c = g_utf8_get_char_validated (start, text + end - start);
  return c < 0x110000 && is_space (c);
}

/* Splitting text before a space that follows a word changes no id if no
 * token can straddle that point. Byte-level BPE with the gpt2, llama3 and
 * qwen2 pre-tokenizers never lets one (their patterns end every word
 * before a space); otherwise it is a property of the vocabulary: does any
 * token hold the space marker right after a non-space character ("e▁" in
 * some SentencePiece files, "©Ġ" in deepseek's)? Special tokens are
 * matched literally, so one with such a space inside forbids it too. */
static gboolean
vocab_splits_at_spaces (const LlmVocab *vocab)
{
  for (guint32 i = 0; i < vocab->n_special; i++) {
    const LlmToken *t = &vocab->tokens[vocab->special[i]];
    for (guint32 j = 1; j < t->len; j++)
      if (t->text[j] == ' ' && !char_before_is_space (t->text, j))
        return FALSE;
  }

  if (vocab->kind == LLM_VOCAB_BPE &&
      (vocab->pre == LLM_PRE_GPT2 || vocab->pre == LLM_PRE_LLAMA3 || vocab->pre == LLM_PRE_QWEN2))
    return TRUE;

  const char *marker = vocab->kind == LLM_VOCAB_SPM ? "\xe2\x96\x81" : "\xc4\xa0";
  gsize marker_len = strlen (marker);
  for (guint32 i = 0; i < vocab->n_tokens; i++) {
    const LlmToken *t = &vocab->tokens[i];
    if (t->type == LLM_TOKEN_BYTE || t->len <= marker_len)
      continue;
    for (const char *m = t->text + 1; (m = strstr (m, marker)) != NULL; m += marker_len) {
      gsize at = m - t->text;
      if (at >= marker_len && memcmp (m - marker_len, marker, marker_len) == 0)
        continue;
      if (!char_before_is_space (t->text, at))
        return FALSE;
    }
  }
  return TRUE;
}

/* Whether @text[0..@end) ends with the text of a special token: the
 * tokenizer treats what follows one differently (llama.cpp prefixes a
 * space after it in SPM, strips spaces after some), so never cut there. */
static gboolean
ends_with_special (const LlmVocab *vocab, const char *text, gsize end)
{
  for (guint32 i = 0; i < vocab->n_special; i++) {
    const LlmToken *t = &vocab->tokens[vocab->special[i]];
    if (t->len > 0 && t->len <= end && memcmp (text + end - t->len, t->text, t->len) == 0)
      return TRUE;
  }
  return FALSE;
}

/* Whether a byte among the 3 before @p leads a character that, read as
 * the tokenizers read UTF-8 (the length from the lead byte alone, as
 * llama.cpp does, valid or not), runs past @p: text whole would take the
 * space at @p into an invalid byte's character ("\xff a" is one piece
 * and "a"), so no cut there. */
static gboolean
char_runs_past (const char *text, gsize p)
{
  for (gsize q = p >= 3 ? p - 3 : 0; q < p; q++) {
    const guchar b = (guchar) text[q];
    const gsize len = b < 0xc0 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    if (q + len > p)
      return TRUE;
  }
  return FALSE;
}

/* Length of the prefix of pending text that can be tokenized now: its ids
 * are the same whatever text comes next. The cut goes before the last
 * space that follows a non-space character. Only positions from @from on
 * are new; earlier ones were rejected already. */
static gsize
stable_prefix (GstLlmTokenize *self, gsize from)
{
  const char *text = self->pending->str;
  const LlmVocab *vocab = llm_tokenizer_vocab (self->tok);

  if (!self->split_at_spaces)
    return 0;
  for (gsize p = self->pending->len; p-- > MAX (from, 1);) {
    if (text[p] != ' ' || char_before_is_space (text, p) || char_runs_past (text, p))
      continue;
    if (ends_with_special (vocab, text, p))
      continue;
    return p;
  }
  return 0;
}

/* Text held back grows until a prompt ends; a live source that never
 * sends llm-end-of-prompt (or text without spaces, or a vocabulary that
 * cannot cut at spaces) must not make it grow for ever. Past this size
 * the text is cut anyway, where it does least harm: before the last
 * space, else after the last whole character. Ids near that cut may then
 * differ from tokenizing the prompt at once. */
#define MAX_HELD_BYTES (64 * 1024)

static gsize
forced_cut (GstLlmTokenize *self)
{
  const char *text = self->pending->str;
  gsize len = self->pending->len;

  if (!self->forced_cut_reported) {
    GST_ELEMENT_WARNING (self, STREAM, FAILED, ("Prompt text of over %d bytes without a "
            "place to cut it exactly; cutting it anyway, token ids near the cut may differ "
            "from tokenizing the whole prompt.", MAX_HELD_BYTES),
        ("send llm-end-of-prompt events to end prompts"));
    self->forced_cut_reported = TRUE;
  }
  for (gsize p = len; p-- > 1;)
    if (text[p] == ' ')
      return p;
  return len - gst_llm_utf8_unfinished_tail (text, len);
}

/* Tokenizes the first @n bytes of pending text and removes them. Returns
 * NULL when they give no ids. */
static GstBuffer *
take_tokens (GstLlmTokenize *self, gsize n)
{
  const LlmVocab *vocab = llm_tokenizer_vocab (self->tok);
  GstLlmAddBos add_bos;
  gboolean parse_special;

  GST_OBJECT_LOCK (self);
  add_bos = self->add_bos;
  parse_special = self->parse_special;
  GST_OBJECT_UNLOCK (self);

  g_array_set_size (self->ids, 0);
  if (self->prompt_start && vocab->bos >= 0 &&
      (add_bos == GST_LLM_ADD_BOS_TRUE || (add_bos == GST_LLM_ADD_BOS_AUTO && vocab->add_bos)))
    g_array_append_val (self->ids, vocab->bos);

  llm_tokenizer_encode (self->tok, self->pending->str, n, FALSE, parse_special,
      self->prompt_start, self->ids);
  self->prompt_start = FALSE;
  GST_LOG_OBJECT (self, "%" G_GSIZE_FORMAT " bytes -> %u ids", n, self->ids->len);
  g_string_erase (self->pending, 0, n);

  if (self->ids->len == 0)
    return NULL;
  return gst_llm_tokens_buffer_new ((const gint32 *) self->ids->data, self->ids->len);
}

/* Stamps @out with the timing of pending text that started at
 * pending_pts and reaches to the end of the newest input. */
static void
stamp (GstLlmTokenize *self, GstBuffer *out)
{
  GST_BUFFER_PTS (out) = self->pending_pts;
  GST_BUFFER_DTS (out) = self->pending_dts;
  if (GST_CLOCK_TIME_IS_VALID (self->pending_pts) && GST_CLOCK_TIME_IS_VALID (self->last_end)
      && self->last_end >= self->pending_pts)
    GST_BUFFER_DURATION (out) = self->last_end - self->pending_pts;
  GST_BUFFER_OFFSET (out) = self->pending_offset;
  GST_BUFFER_OFFSET_END (out) = self->last_offset_end;
}

static void
reset_stream (GstLlmTokenize *self)
{
  if (self->pending->len)
    GST_DEBUG_OBJECT (self, "dropping %" G_GSIZE_FORMAT " bytes of text", self->pending->len);
  g_string_truncate (self->pending, 0);
  self->pending_pts = self->pending_dts = GST_CLOCK_TIME_NONE;
  self->pending_offset = GST_BUFFER_OFFSET_NONE;
  self->last_end = GST_CLOCK_TIME_NONE;
  self->last_offset_end = GST_BUFFER_OFFSET_NONE;
  self->prompt_start = TRUE;
}

static GstCaps *
own_tokens_caps (GstLlmTokenize *self)
{
  GstCaps *caps;

  GST_OBJECT_LOCK (self);
  caps = gst_llm_caps_new_tokens (self->vocab_hash[0] ? self->vocab_hash : NULL);
  GST_OBJECT_UNLOCK (self);
  return caps;
}

/* Negotiation failed: if downstream wants another vocabulary, say so in
 * words, once. */
static void
report_vocab_mismatch (GstLlmTokenize *self)
{
  if (self->mismatch_reported)
    return;

  GstCaps *ours = own_tokens_caps (self);
  self->mismatch_reported = GST_LLM_ELEMENT_ERROR_VOCAB (self, GST_BASE_TRANSFORM_SRC_PAD (self),
      ours, self->loaded_model);
  gst_caps_unref (ours);
}

/* Sources with ANY caps (filesrc) send no caps: their bytes are taken as
 * UTF-8 text, and our caps go downstream anyway, checked first, because a
 * refused sticky caps event only shows as a failed buffer push later. */
static gboolean
ensure_src_caps (GstLlmTokenize *self)
{
  GstPad *srcpad = GST_BASE_TRANSFORM_SRC_PAD (self);

  if (gst_pad_has_current_caps (srcpad))
    return TRUE;

  GstCaps *caps = own_tokens_caps (self);
  gboolean ok = !gst_pad_is_linked (srcpad) || gst_pad_peer_query_accept_caps (srcpad, caps);
  if (ok) {
    GST_DEBUG_OBJECT (self, "no input caps; taking the input as UTF-8 text");
    gst_pad_set_caps (srcpad, caps);
  } else {
    report_vocab_mismatch (self);
  }
  gst_caps_unref (caps);
  return ok;
}

/* The prompt ends: tokenize all held text, even an unfinished UTF-8
 * character (the tokenizer has a byte-level answer for it), push it, and
 * start a new prompt. */
static GstFlowReturn
finish_prompt (GstLlmTokenize *self)
{
  GstFlowReturn ret = GST_FLOW_OK;

  if (self->tok && self->pending->len > 0) {
    GstBuffer *out = take_tokens (self, self->pending->len);

    if (out) {
      stamp (self, out);
      GST_DEBUG_OBJECT (self, "end of prompt: pushing %" G_GSIZE_FORMAT " held ids",
          gst_buffer_get_size (out) / GST_LLM_TOKEN_SIZE);
      if (ensure_src_caps (self)) {
        self->out_bytes += gst_buffer_get_size (out);
        ret = gst_pad_push (GST_BASE_TRANSFORM_SRC_PAD (self), out);
      } else {
        gst_buffer_unref (out);
        ret = GST_FLOW_NOT_NEGOTIATED;
      }
    }
  }
  reset_stream (self);
  return ret;
}

static GstFlowReturn
gst_llm_tokenize_generate_output (GstBaseTransform *trans, GstBuffer **outbuf)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (trans);
  GstBuffer *in = trans->queued_buf;
  GstMapInfo map;

  *outbuf = NULL;
  if (in == NULL)
    return GST_FLOW_OK;
  trans->queued_buf = NULL;

  if (!ensure_src_caps (self)) {
    gst_buffer_unref (in);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (!gst_buffer_map (in, &map, GST_MAP_READ)) {
    gst_buffer_unref (in);
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot read an input buffer."), (NULL));
    return GST_FLOW_ERROR;
  }

  gsize held = self->pending->len;
  if (held == 0) {
    self->pending_pts = GST_BUFFER_PTS (in);
    self->pending_dts = GST_BUFFER_DTS (in);
    self->pending_offset = GST_BUFFER_OFFSET (in);
  }
  g_string_append_len (self->pending, (const char *) map.data, map.size);
  gst_buffer_unmap (in, &map);

  self->last_end = GST_CLOCK_TIME_NONE;
  if (GST_BUFFER_PTS_IS_VALID (in) && GST_BUFFER_DURATION_IS_VALID (in))
    self->last_end = GST_BUFFER_PTS (in) + GST_BUFFER_DURATION (in);
  self->last_offset_end = GST_BUFFER_OFFSET_END (in);

  gsize cut = stable_prefix (self, held);
  if (cut == 0 && self->pending->len > MAX_HELD_BYTES)
    cut = forced_cut (self);
  if (cut > 0) {
    GstBuffer *out = take_tokens (self, cut);

    if (out) {
      stamp (self, out);
      self->out_bytes += gst_buffer_get_size (out);
      *outbuf = out;
    }
    /* what stays pending starts inside this buffer (a forced cut may
     * leave older text too; its timing is then approximate) */
    self->pending_pts = GST_BUFFER_PTS (in);
    self->pending_dts = GST_BUFFER_DTS (in);
    self->pending_offset = GST_BUFFER_OFFSET (in);
  }
  GST_LOG_OBJECT (self, "holding %" G_GSIZE_FORMAT " bytes", self->pending->len);

  gst_buffer_unref (in);
  return GST_FLOW_OK;
}

/* An event handler cannot return a flow: post what a source would. */
static void
post_flow_error (GstLlmTokenize *self, GstFlowReturn ret)
{
  if (ret == GST_FLOW_NOT_LINKED || ret == GST_FLOW_NOT_NEGOTIATED) {
    if (ret == GST_FLOW_NOT_NEGOTIATED)
      report_vocab_mismatch (self);
    if (!self->mismatch_reported)
      GST_ELEMENT_FLOW_ERROR (self, ret);
  }
}

static gboolean
gst_llm_tokenize_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (trans);
  gboolean ret;

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:
      ret = GST_BASE_TRANSFORM_CLASS (gst_llm_tokenize_parent_class)->sink_event (trans, event);
      if (!ret)
        report_vocab_mismatch (self);
      return ret;
    case GST_EVENT_SEGMENT:
      /* caps belong before the segment; data flow reports a refusal */
      ensure_src_caps (self);
      event = gst_llm_segment_for_output (event, self->out_bytes);
      break;
    case GST_EVENT_EOS:
    case GST_EVENT_STREAM_START:
    case GST_EVENT_SEGMENT_DONE:      /* a segment seek's end, in place of EOS */
      post_flow_error (self, finish_prompt (self));
      break;
    case GST_EVENT_FLUSH_STOP:
      reset_stream (self);
      self->out_bytes = 0;
      break;
    case GST_EVENT_CUSTOM_DOWNSTREAM:
      if (gst_llm_event_is_end_of_prompt (event))
        post_flow_error (self, finish_prompt (self));
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (gst_llm_tokenize_parent_class)->sink_event (trans, event);
}

static GstCaps *
gst_llm_tokenize_transform_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, GstCaps *filter)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (trans);
  GstCaps *tokens = own_tokens_caps (self);
  GstCaps *result;

  /* Text caps are offered upstream even when downstream wants another
   * vocabulary: the mismatch then fails in our set-caps, which can say
   * what is wrong, instead of upstream as "no caps". */
  if (direction == GST_PAD_SINK)
    result = gst_caps_ref (tokens);
  else
    result = gst_llm_caps_new_text ();
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
load_tokenizer (GstLlmTokenize *self)
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
  self->split_at_spaces = vocab_splits_at_spaces (vocab);
  GST_OBJECT_LOCK (self);
  g_strlcpy (self->vocab_hash, vocab->hash, sizeof self->vocab_hash);
  if (self->add_bos == GST_LLM_ADD_BOS_TRUE && vocab->bos < 0)
    GST_WARNING_OBJECT (self, "add-bos=true, but %s has no BOS token", model);
  GST_OBJECT_UNLOCK (self);

  GST_INFO_OBJECT (self, "%s: %s vocabulary of %u tokens, vocab=%s, BOS %d (add: %d), "
      "%s", model, vocab->kind == LLM_VOCAB_SPM ? "SPM" : "BPE", vocab->n_tokens,
      vocab->hash, vocab->bos, vocab->add_bos,
      self->split_at_spaces ? "streams word by word" : "holds each prompt until it ends");
  self->loaded_model = model;
  return TRUE;
}

static void
unload_tokenizer (GstLlmTokenize *self)
{
  g_clear_pointer (&self->tok, llm_tokenizer_free);
  g_clear_pointer (&self->loaded_model, g_free);
  GST_OBJECT_LOCK (self);
  self->vocab_hash[0] = '\0';
  GST_OBJECT_UNLOCK (self);
}

static GstStateChangeReturn
gst_llm_tokenize_change_state (GstElement *element, GstStateChange transition)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (element);
  GstStateChangeReturn ret;

  /* Loaded at NULL->READY so that caps queries in READY already answer
   * with the vocabulary, and a bad file fails the first state change. */
  if (transition == GST_STATE_CHANGE_NULL_TO_READY && !load_tokenizer (self))
    return GST_STATE_CHANGE_FAILURE;

  ret = GST_ELEMENT_CLASS (gst_llm_tokenize_parent_class)->change_state (element, transition);

  if (transition == GST_STATE_CHANGE_READY_TO_NULL ||
      (transition == GST_STATE_CHANGE_NULL_TO_READY && ret == GST_STATE_CHANGE_FAILURE))
    unload_tokenizer (self);
  return ret;
}

static gboolean
gst_llm_tokenize_start (GstBaseTransform *trans)
{
  GST_LLM_TOKENIZE (trans)->mismatch_reported = FALSE;
  GST_LLM_TOKENIZE (trans)->forced_cut_reported = FALSE;
  GST_LLM_TOKENIZE (trans)->out_bytes = 0;
  reset_stream (GST_LLM_TOKENIZE (trans));
  return TRUE;
}

static gboolean
gst_llm_tokenize_stop (GstBaseTransform *trans)
{
  reset_stream (GST_LLM_TOKENIZE (trans));
  return TRUE;
}

static void
gst_llm_tokenize_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      gst_llm_note_late_setting (GST_ELEMENT (self), pspec, GST_STATE_CHANGE_NULL_TO_READY);
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    case PROP_ADD_BOS:
      self->add_bos = g_value_get_enum (value);
      break;
    case PROP_PARSE_SPECIAL:
      self->parse_special = g_value_get_boolean (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_tokenize_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model);
      break;
    case PROP_ADD_BOS:
      g_value_set_enum (value, self->add_bos);
      break;
    case PROP_PARSE_SPECIAL:
      g_value_set_boolean (value, self->parse_special);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_tokenize_finalize (GObject *object)
{
  GstLlmTokenize *self = GST_LLM_TOKENIZE (object);

  unload_tokenizer (self);
  g_free (self->model);
  g_string_free (self->pending, TRUE);
  g_array_unref (self->ids);
  G_OBJECT_CLASS (gst_llm_tokenize_parent_class)->finalize (object);
}

static void
gst_llm_tokenize_init (GstLlmTokenize *self)
{
  self->model = g_strdup (DEFAULT_MODEL);
  self->add_bos = DEFAULT_ADD_BOS;
  self->parse_special = DEFAULT_PARSE_SPECIAL;
  self->pending = g_string_new (NULL);
  self->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  reset_stream (self);
  /* BaseTransform takes a subclass without transform functions for a
   * passthrough one; ours makes new buffers of another format. */
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), FALSE);
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), FALSE);
}

static void
gst_llm_tokenize_class_init (GstLlmTokenizeClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (gst_llm_tokenize_debug, "llmtokenize", 0,
      "LLM text to token ids");

  gobject_class->set_property = gst_llm_tokenize_set_property;
  gobject_class->get_property = gst_llm_tokenize_get_property;
  gobject_class->finalize = gst_llm_tokenize_finalize;

  /**
   * GstLlmTokenize:model:
   *
   * Path of a GGUF model file; its tokenizer (`tokenizer.ggml.*` keys) is
   * read when the element goes to READY. A file that is missing or not a
   * valid GGUF with a tokenizer fails that state change with an error
   * naming the file.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "GGUF model file whose tokenizer is used (read at the NULL to READY change)",
          DEFAULT_MODEL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS));

  /**
   * GstLlmTokenize:add-bos:
   *
   * Whether each prompt starts with the BOS token. A prompt starts at
   * stream start, after an `llm-end-of-prompt` event and after a flush.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_ADD_BOS,
      g_param_spec_enum ("add-bos", "Add BOS",
          "Put the BOS token in front of each prompt: auto (as the model file says), "
          "true (always) or false (never)",
          GST_TYPE_LLM_ADD_BOS, DEFAULT_ADD_BOS,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  /**
   * GstLlmTokenize:parse-special:
   *
   * Whether the texts of special tokens (`<s>`, `<|im_start|>`...) in the
   * input become those tokens. Without it they are tokenized as ordinary
   * text.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_PARSE_SPECIAL,
      g_param_spec_boolean ("parse-special", "Parse special tokens",
          "Turn the texts of special tokens (e.g. <|im_start|>) in the input into "
          "those tokens instead of tokenizing them as plain text",
          DEFAULT_PARSE_SPECIAL,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM tokenizer",
      "Filter/Converter/Text",
      "Turns UTF-8 text into the token ids of a GGUF model's vocabulary "
      "(application/x-llm-tokens: little-endian int32 ids)",
      "gst-llm developers");
  gst_element_class_add_static_metadata (element_class, "example",
      "gst-launch-1.0 filesrc location=prompt.txt ! llmtokenize model=stories260K.gguf "
      "! filesink location=ids.bin");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_tokenize_change_state);

  trans_class->transform_caps = GST_DEBUG_FUNCPTR (gst_llm_tokenize_transform_caps);
  trans_class->generate_output = GST_DEBUG_FUNCPTR (gst_llm_tokenize_generate_output);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_llm_tokenize_sink_event);
  trans_class->start = GST_DEBUG_FUNCPTR (gst_llm_tokenize_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_llm_tokenize_stop);

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_ADD_BOS, 0);
}
