/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every element of the `llm` plugin shares: the registration
 * declarations plugins/gstllmplugin.c uses, the one-time plugin setup each
 * element's registration runs, and the mapping of library errors to
 * element errors. */
#pragma once

#include <gst/gst.h>

#include "engine.h"
#include "tokenizer.h"

G_BEGIN_DECLS

GST_ELEMENT_REGISTER_DECLARE (llmtokenize);
GST_ELEMENT_REGISTER_DECLARE (llmdetokenize);
GST_ELEMENT_REGISTER_DECLARE (llmprefill);
GST_ELEMENT_REGISTER_DECLARE (llmdecode);
GST_ELEMENT_REGISTER_DECLARE (llmdraft);
GST_ELEMENT_REGISTER_DECLARE (llmspecverify);
GST_ELEMENT_REGISTER_DECLARE (llmvisionencode);
GST_ELEMENT_REGISTER_DECLARE (llmtokencompress);
GST_ELEMENT_REGISTER_DECLARE (llmaudioencode);

/* Debug category "llm" for what the elements share (library errors). */
GST_DEBUG_CATEGORY_EXTERN (gst_llm_debug);

/* Runs once per process whichever element registers first. */
void gst_llm_element_init (GstPlugin *plugin);

/* Posts an ERROR message on @element for @error, which the library raised
 * while loading @path, the value of its property @property: a text that
 * says which file, what is wrong with it and what to do, in the GStreamer
 * error domain and code that fit (RESOURCE NOT_FOUND, OPEN_READ or
 * FAILED). Does not free @error. */
#define GST_LLM_ELEMENT_ERROR_LOAD(element, property, path, error) \
  gst_llm_element_error_load (GST_ELEMENT (element), (property), (path), (error), \
      __FILE__, GST_FUNCTION, __LINE__)

void gst_llm_element_error_load (GstElement *element, const char *property, const char *path,
    const GError *error, const char *file, const char *function, int line);

/* What a person can do when @engine's KV pool is used up while a stream
 * that holds @held bytes of it asked for more: the sentence that ends the
 * message, without advice the engine already follows. When the stream
 * holds all the memory in use, only a larger pool or a shorter stream
 * helps, which @shorter says ("…or @shorter."). Free with g_free(). */
char *gst_llm_kv_pool_advice (const LlmEngine *engine, gsize held, const char *shorter);

/* For set_property, under the object lock: @pspec's setting is read when
 * @element makes @read_at (NULL->READY: a file it loads; READY->PAUSED:
 * what it starts a stream with), so a change after that applies only from
 * the next time: logs a warning that says so rather than take it without
 * a word. */
void gst_llm_note_late_setting (GstElement *element, const GParamSpec *pspec,
    GstStateChange read_at);

/* Number of bytes at the end of @text that begin a UTF-8 character not
 * complete yet, so that more bytes may finish it. 0 when @text ends on a
 * character boundary, and also when its tail can never become valid (no
 * reason to wait for more). */
gsize gst_llm_utf8_unfinished_tail (const char *text, gsize len);

/* After negotiation through @srcpad failed: if the elements downstream
 * want token ids of another vocabulary than @ours (our caps, whose vocab
 * field names ours) posts a CORE NEGOTIATION ERROR on @element naming
 * both vocabularies and @model, and returns TRUE. FALSE, posting nothing,
 * when the refusal has another cause: the generic not-negotiated error
 * says nothing about models, and sticky caps are retried with every
 * event, so callers post this once. */
#define GST_LLM_ELEMENT_ERROR_VOCAB(element, srcpad, ours, model) \
  gst_llm_element_error_vocab (GST_ELEMENT (element), (srcpad), (ours), (model), \
      __FILE__, GST_FUNCTION, __LINE__)

gboolean gst_llm_element_error_vocab (GstElement *element, GstPad *srcpad, GstCaps *ours,
    const char *model, const char *file, const char *function, int line);

/* The segment event to push for upstream's @event (taken) from an element
 * whose output bytes are not its input's (ids for text, text for ids): a
 * bytes segment places the input's bytes, and a filesink downstream seeks
 * to its start, so one that starts past 0 (concat's second file, a seek)
 * would have the output written at the input's offset, over earlier
 * output or after a gap of zeros. It becomes a bytes segment starting at
 * @out_bytes, what the element has pushed since it started or flushed.
 * Other formats pass as they are. */
GstEvent *gst_llm_segment_for_output (GstEvent *event, guint64 out_bytes);

/* Answers a CAPS query with @caps (taken), narrowed to the query's
 * filter. Returns TRUE. */
gboolean gst_llm_answer_caps_query (GstQuery *query, GstCaps *caps);

/* Posts an ERROR for an element started without its `model` property. */
/* The tokenizer of the GGUF file @model (the element's model property),
 * or NULL after posting the element error that says what to set or fix. */
#define GST_LLM_LOAD_TOKENIZER(element, model) \
  gst_llm_load_tokenizer (GST_ELEMENT (element), (model), __FILE__, GST_FUNCTION, __LINE__)

LlmTokenizer *gst_llm_load_tokenizer (GstElement *element, const char *model,
    const char *file, const char *function, int line);

#define GST_LLM_ELEMENT_ERROR_NO_MODEL(element) \
  GST_ELEMENT_ERROR (element, RESOURCE, NOT_FOUND, \
      ("No model file set."), \
      ("Set the element's model property to a GGUF file, e.g. model=stories260K.gguf"))

G_END_DECLS
