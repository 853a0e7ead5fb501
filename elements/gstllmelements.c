/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "gstllmelements.h"

#include <string.h>

#include "gguf.h"
#include "llm-caps.h"
#include "tokenizer.h"

GST_DEBUG_CATEGORY (gst_llm_debug);
#define GST_CAT_DEFAULT gst_llm_debug

void
gst_llm_element_init (GstPlugin *plugin)
{
  static gsize done = 0;

  if (g_once_init_enter (&done)) {
    GST_DEBUG_CATEGORY_INIT (gst_llm_debug, "llm", 0, "gst-llm shared element code");
    g_once_init_leave (&done, 1);
  }
}

/* Sorts a load failure into who can fix what: a wrong path, a file the
 * process may not read, a damaged file, or a file without a tokenizer. */
typedef enum {
  LOAD_MISSING,
  LOAD_UNREADABLE,
  LOAD_MALFORMED,
  LOAD_NO_TOKENIZER,
  LOAD_UNSUPPORTED,
} LoadFailure;

static LoadFailure
classify (const char *path, const GError *error)
{
  if (error->domain == G_FILE_ERROR && error->code == G_FILE_ERROR_NOENT)
    return LOAD_MISSING;
  if (error->domain == G_FILE_ERROR)
    return LOAD_UNREADABLE;
  if (error->domain == LLM_GGUF_ERROR) {
    switch ((LlmGgufError) error->code) {
      case LLM_GGUF_ERROR_IO:
        /* The reader reports every open failure as IO; the path tells
         * whether the user mistyped it. */
        return g_file_test (path, G_FILE_TEST_EXISTS) ? LOAD_UNREADABLE : LOAD_MISSING;
      case LLM_GGUF_ERROR_FORMAT:
      case LLM_GGUF_ERROR_TRUNCATED:
        return LOAD_MALFORMED;
      case LLM_GGUF_ERROR_NOT_FOUND:
      case LLM_GGUF_ERROR_TYPE:
        return LOAD_NO_TOKENIZER;
    }
  }
  if (error->domain == LLM_TOKENIZER_ERROR && error->code == LLM_TOKENIZER_ERROR_UNSUPPORTED)
    return LOAD_UNSUPPORTED;
  return LOAD_NO_TOKENIZER;
}

/* @error's message without the "@path: " it may start with: the text
 * names the file already; the debug string keeps it all. */
static const char *
without_path (const char *path, const GError *error)
{
  const char *what = error->message;
  gsize path_len = strlen (path);
  if (strncmp (what, path, path_len) == 0 && strncmp (what + path_len, ": ", 2) == 0)
    what += path_len + 2;
  return what;
}

void
gst_llm_element_error_load (GstElement *element, const char *property, const char *path,
    const GError *error, const char *file, const char *function, int line)
{
  GstResourceError code;
  char *text;
  const char *what = without_path (path, error);

  switch (classify (path, error)) {
    case LOAD_MISSING:
      code = GST_RESOURCE_ERROR_NOT_FOUND;
      text = g_strdup_printf ("Model file \"%s\" does not exist. "
          "Check the path in the %s property.", path, property);
      break;
    case LOAD_UNREADABLE:
      code = GST_RESOURCE_ERROR_OPEN_READ;
      text = g_strdup_printf ("Cannot read model file \"%s\": %s. "
          "Check that it is a regular file this process may read.", path, what);
      break;
    case LOAD_MALFORMED:
      code = GST_RESOURCE_ERROR_FAILED;
      text = g_strdup_printf ("Model file \"%s\" is not a valid GGUF file: %s. "
          "It may be truncated or damaged; download or convert it again.", path, what);
      break;
    case LOAD_UNSUPPORTED:
      code = GST_RESOURCE_ERROR_FAILED;
      text = g_strdup_printf ("Model file \"%s\" uses a tokenizer gst-llm does not support: %s. "
          "Supported are SentencePiece (llama) and byte-level BPE (gpt2, llama3, qwen2, deepseek-llm).",
          path, what);
      break;
    case LOAD_NO_TOKENIZER:
    default:
      code = GST_RESOURCE_ERROR_FAILED;
      text = g_strdup_printf ("Model file \"%s\" has no usable tokenizer: %s. "
          "Use a GGUF converted with its tokenizer (tokenizer.ggml.* keys).", path, what);
      break;
  }

  char *debug = g_strdup_printf ("%s error %d: %s", g_quark_to_string (error->domain),
      error->code, error->message);
  GST_WARNING_OBJECT (element, "%s", text);
  gst_element_message_full (element, GST_MESSAGE_ERROR, GST_RESOURCE_ERROR, code,
      text, debug, file, function, line);
}

LlmTokenizer *
gst_llm_load_tokenizer (GstElement *element, const char *model, const char *file,
    const char *function, int line)
{
  if (model == NULL || model[0] == '\0') {
    GST_LLM_ELEMENT_ERROR_NO_MODEL (element);
    return NULL;
  }
  GError *error = NULL;
  LlmTokenizer *tok = llm_tokenizer_new_from_file (model, &error);
  if (tok == NULL) {
    gst_llm_element_error_load (element, "model", model, error, file, function, line);
    g_error_free (error);
  }
  return tok;
}

/* The vocab field of token or state caps. */
static const char *
caps_vocab (const GstCaps *caps)
{
  if (gst_caps_is_any (caps) || gst_caps_get_size (caps) == 0)
    return NULL;
  const char *vocab = gst_structure_get_string (gst_caps_get_structure (caps, 0),
      GST_LLM_CAPS_FIELD_VOCAB);
  return vocab ? vocab : "?";
}

gboolean
gst_llm_element_error_vocab (GstElement *element, GstPad *srcpad, GstCaps *ours,
    const char *model, const char *file, const char *function, int line)
{
  GstCaps *theirs = gst_pad_peer_query_caps (srcpad, NULL);
  gboolean mismatch = theirs && !gst_caps_can_intersect (ours, theirs);

  if (mismatch) {
    char *text = g_strdup_printf ("The token ids of \"%s\" (vocab=%s) are not of the "
        "vocabulary the elements downstream expect (vocab=%s). Give both elements the same "
        "model, or models with the same tokenizer.", model, caps_vocab (ours),
        caps_vocab (theirs));
    char *debug = gst_info_strdup_printf ("we give %" GST_PTR_FORMAT ", downstream accepts %"
        GST_PTR_FORMAT, ours, theirs);
    GST_WARNING_OBJECT (element, "%s", text);
    gst_element_message_full (element, GST_MESSAGE_ERROR, GST_CORE_ERROR,
        GST_CORE_ERROR_NEGOTIATION, text, debug, file, function, line);
  }
  gst_clear_caps (&theirs);
  return mismatch;
}

GstEvent *
gst_llm_segment_for_output (GstEvent *event, guint64 out_bytes)
{
  const GstSegment *in;
  gst_event_parse_segment (event, &in);
  if (in->format != GST_FORMAT_BYTES)
    return event;
  GstSegment out;
  gst_segment_init (&out, GST_FORMAT_BYTES);
  out.start = out.time = out.position = out_bytes;
  GstEvent *ours = gst_event_new_segment (&out);
  gst_event_set_seqnum (ours, gst_event_get_seqnum (event));
  gst_event_unref (event);
  return ours;
}

char *
gst_llm_kv_pool_advice (const LlmEngine *engine, gsize held, const char *shorter)
{
  /* The pool counts each block once: a stream that holds as much as is
   * in use holds all of it. */
  const gsize in_use = llm_engine_kv_bytes (engine);
  if (held > 0 && in_use <= held)
    return g_strdup_printf ("This stream alone holds all %" G_GSIZE_FORMAT " bytes in use "
        "(no other stream holds any): raise kv-pool-bytes or %s.", held, shorter);
  if (llm_engine_options (engine)->kv_full == LLM_KV_FULL_PREEMPT)
    return g_strdup ("Raise kv-pool-bytes or run fewer streams on this model.");
  return g_strdup ("Raise kv-pool-bytes, set kv-full=preempt, or run fewer streams on this "
      "model.");
}

void
gst_llm_note_late_setting (GstElement *element, const GParamSpec *pspec, GstStateChange read_at)
{
  if (GST_STATE (element) >= GST_STATE_TRANSITION_NEXT (read_at))
    GST_CAT_WARNING_OBJECT (gst_llm_debug, element, "%s changes take effect from the next %s",
        pspec->name, gst_state_change_get_name (read_at));
}

gsize
gst_llm_utf8_unfinished_tail (const char *text, gsize len)
{
  const guchar *s = (const guchar *) text;
  gsize cont = 0;

  while (cont < len && cont < 3 && (s[len - 1 - cont] & 0xc0) == 0x80)
    cont++;
  if (cont == len)
    return 0;
  guchar lead = s[len - 1 - cont];
  gsize need;
  if (lead >= 0xc2 && lead <= 0xdf)
    need = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    need = 3;
  else if (lead >= 0xf0 && lead <= 0xf4)
    need = 4;
  else
    return 0;
  return cont + 1 < need ? cont + 1 : 0;
}

gboolean
gst_llm_answer_caps_query (GstQuery *query, GstCaps *caps)
{
  GstCaps *filter;

  gst_query_parse_caps (query, &filter);
  if (filter) {
    GstCaps *tmp = gst_caps_intersect_full (filter, caps, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (caps);
    caps = tmp;
  }
  gst_query_set_caps_result (query, caps);
  gst_caps_unref (caps);
  return TRUE;
}
