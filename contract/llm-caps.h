/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The contract between gst-llm elements: caps, token payloads and the
 * custom events that mark prompt and response boundaries. Every element
 * builds its caps and events from here, so the strings exist once.
 *
 * Token stream, `application/x-llm-tokens, vocab=(string)<hash>`:
 *   each buffer's payload is a plain array of little-endian int32 token ids
 *   (4 bytes per id, no header), so filesink captures a stream and filesrc
 *   replays it. <hash> is LlmVocab.hash: 16 lowercase hex digits naming the
 *   vocabulary the ids index. Two elements whose vocabularies differ cannot
 *   agree on caps, so a mismatch fails at negotiation, not as garbage text.
 *   A pad template leaves the field out (any vocabulary).
 *
 * Embedding stream, `application/x-llm-embeddings, dim=(int)N,
 *   format=(string)F32, modality=(string){image,audio}`, optional
 *   `projector=(string)<clip.projector_type>` and `vocab`: each buffer is
 *   one media item (a frame, an audio chunk) as rows of N native-endian
 *   floats, one row per token the language model takes, in the order it
 *   takes them; the buffer has the PTS and duration of the media it
 *   encodes. N must be the target model's embedding width, which llmprefill
 *   checks at negotiation. A GstLlmEmbeddingsMeta (llm-meta.h) may say how
 *   the rows lie on the media (a grid) and how salient each is.
 *
 * Text stream, `text/x-raw, format=(string)utf8`: gst-llm elements emit
 *   buffers of whole, valid UTF-8 characters without NUL (so textoverlay and
 *   subtitle encoders can take each one as is); they accept text split
 *   anywhere, even inside a character.
 *
 * Events (custom, serialized, downstream; they travel in stream order, so
 * they keep the stream's timing):
 *   `llm-end-of-prompt`: the prompt so far is complete (run prefill).
 *   `llm-end-of-response`: generation for this prompt finished; field
 *     `reason` (string) says why, one of the GST_LLM_STOP_REASON_* values.
 * And one out of band (custom, downstream, not serialized):
 *   `llm-prompt-waiting`: a new prompt waits for the session a response
 *     holds (llmprefill with keep-context): a decoder that replaces
 *     responses with newer prompts ends that one now, and drops the state
 *     buffers of the prompts field `superseded` (guint64) covers: those
 *     whose GstLlmSessionMeta prompt_serial is not above it, which may
 *     still be on their way.
 */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_LLM_TOKENS_MEDIA_TYPE "application/x-llm-tokens"
#define GST_LLM_CAPS_FIELD_VOCAB  "vocab"
/* Template caps: tokens of any vocabulary. */
#define GST_LLM_CAPS_TOKENS       GST_LLM_TOKENS_MEDIA_TYPE
/* Fixed caps for a vocabulary known at compile time (a string literal). */
#define GST_LLM_CAPS_TOKENS_VOCAB(hash) \
  GST_LLM_TOKENS_MEDIA_TYPE ", " GST_LLM_CAPS_FIELD_VOCAB "=(string)" hash

#define GST_LLM_EMBEDDINGS_MEDIA_TYPE "application/x-llm-embeddings"
#define GST_LLM_CAPS_EMBEDDINGS       GST_LLM_EMBEDDINGS_MEDIA_TYPE ", format=(string)F32"
#define GST_LLM_MODALITY_IMAGE "image"
#define GST_LLM_MODALITY_AUDIO "audio"

#define GST_LLM_TEXT_MEDIA_TYPE   "text/x-raw"
#define GST_LLM_CAPS_TEXT         GST_LLM_TEXT_MEDIA_TYPE ", format=(string)utf8"

/* Bytes per token id in an application/x-llm-tokens payload. */
#define GST_LLM_TOKEN_SIZE 4

/* Length of a vocabulary hash, without the NUL. */
#define GST_LLM_VOCAB_HASH_LEN 16

/* TRUE if @hash is 16 lowercase hex digits. */
gboolean gst_llm_vocab_hash_is_valid (const char *hash);

/* New caps `application/x-llm-tokens, vocab=<hash>`; with @vocab_hash NULL,
 * the media type alone (template caps). Caller owns the caps. */
GstCaps *gst_llm_caps_new_tokens (const char *vocab_hash);

/* The vocab field of @caps' first structure, if @caps are token caps and
 * it is a string; NULL otherwise. Valid as long as @caps are. */
const char *gst_llm_caps_get_vocab (const GstCaps *caps);

/* New caps `text/x-raw, format=utf8`. Caller owns the caps. */
GstCaps *gst_llm_caps_new_text (void);

/* New buffer holding @n ids as the payload format says. */
GstBuffer *gst_llm_tokens_buffer_new (const gint32 *ids, gsize n);

/* Appends the ids in @buffer's payload to @ids (a GArray of gint32).
 * Returns FALSE, leaving @ids untouched, if the buffer cannot be mapped or
 * its size is not a multiple of GST_LLM_TOKEN_SIZE. */
gboolean gst_llm_tokens_buffer_read (GstBuffer *buffer, GArray *ids);

/* New fixed embedding caps; @projector may be NULL. */
GstCaps *gst_llm_caps_new_embeddings (guint dim, const char *modality, const char *projector);

/* Reads embedding caps: FALSE if @caps are not fixed embedding caps of
 * format F32 with a positive dim. Out arguments may be NULL; strings are
 * valid as long as @caps are (@projector NULL when absent). */
gboolean gst_llm_caps_parse_embeddings (const GstCaps *caps, guint *dim, const char **modality,
    const char **projector);

/* New buffer holding @n_rows rows of @dim floats. */
GstBuffer *gst_llm_embeddings_buffer_new (const float *rows, gsize n_rows, guint dim);

#define GST_LLM_EVENT_END_OF_PROMPT   "llm-end-of-prompt"
#define GST_LLM_EVENT_END_OF_RESPONSE "llm-end-of-response"
#define GST_LLM_EVENT_PROMPT_WAITING  "llm-prompt-waiting"

/* Values of llm-end-of-response's `reason` field. */
#define GST_LLM_STOP_REASON_EOS         "eos"          /* the model emitted an end-of-generation token */
#define GST_LLM_STOP_REASON_MAX_TOKENS  "max-tokens"   /* the token budget ran out */
#define GST_LLM_STOP_REASON_STOP_STRING "stop-string"  /* a configured stop string appeared */
#define GST_LLM_STOP_REASON_CANCELLED   "cancelled"    /* a flush or the application ended it */
#define GST_LLM_STOP_REASON_CONTEXT_FULL "context-full" /* kv-policy full and no room left */
#define GST_LLM_STOP_REASON_KV_POOL_FULL "kv-pool-full" /* the engine's kv-pool-bytes ran out */

/* New serialized downstream events; the caller owns them. */
GstEvent *gst_llm_event_new_end_of_prompt (void);
GstEvent *gst_llm_event_new_end_of_response (const char *reason);

/* An end-of-response that also says when its prompt's media lies: its
 * `prompt-pts` and `prompt-duration` (GstClockTime, NONE when unknown), so
 * that a caption made of the whole response can carry them. */
GstEvent *gst_llm_event_new_end_of_response_timed (const char *reason, GstClockTime pts,
    GstClockTime duration);
/* Reads them; NONE for an end-of-response without them. FALSE if @event
 * is not an end-of-response. */
gboolean gst_llm_event_parse_end_of_response_timing (GstEvent *event, GstClockTime *pts,
    GstClockTime *duration);

/* New llm-prompt-waiting (out of band) superseding the prompts numbered
 * up to @superseded; the caller owns it. */
GstEvent *gst_llm_event_new_prompt_waiting (guint64 superseded);

gboolean gst_llm_event_is_end_of_prompt (GstEvent *event);
/* Whether @event is an llm-prompt-waiting, and the prompts it supersedes
 * (@superseded may be NULL). */
gboolean gst_llm_event_parse_prompt_waiting (GstEvent *event, guint64 *superseded);
gboolean gst_llm_event_is_end_of_response (GstEvent *event);

/* Reads llm-end-of-response's reason (valid while @event is). Returns FALSE
 * if @event is not an end-of-response. @reason may be NULL. */
gboolean gst_llm_event_parse_end_of_response (GstEvent *event, const char **reason);

G_END_DECLS
