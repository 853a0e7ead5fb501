/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "llm-caps.h"

#include <string.h>

gboolean
gst_llm_vocab_hash_is_valid (const char *hash)
{
  if (hash == NULL)
    return FALSE;
  for (int i = 0; i < GST_LLM_VOCAB_HASH_LEN; i++) {
    char c = hash[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return FALSE;
  }
  return hash[GST_LLM_VOCAB_HASH_LEN] == '\0';
}

GstCaps *
gst_llm_caps_new_tokens (const char *vocab_hash)
{
  if (vocab_hash == NULL)
    return gst_caps_new_empty_simple (GST_LLM_TOKENS_MEDIA_TYPE);
  return gst_caps_new_simple (GST_LLM_TOKENS_MEDIA_TYPE,
      GST_LLM_CAPS_FIELD_VOCAB, G_TYPE_STRING, vocab_hash, NULL);
}

const char *
gst_llm_caps_get_vocab (const GstCaps *caps)
{
  if (caps == NULL || gst_caps_is_any (caps) || gst_caps_get_size (caps) == 0)
    return NULL;
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  if (!gst_structure_has_name (s, GST_LLM_TOKENS_MEDIA_TYPE))
    return NULL;
  return gst_structure_get_string (s, GST_LLM_CAPS_FIELD_VOCAB);
}

GstCaps *
gst_llm_caps_new_text (void)
{
  return gst_caps_new_simple (GST_LLM_TEXT_MEDIA_TYPE,
      "format", G_TYPE_STRING, "utf8", NULL);
}

GstCaps *
gst_llm_caps_new_embeddings (guint dim, const char *modality, const char *projector)
{
  GstCaps *caps = gst_caps_new_simple (GST_LLM_EMBEDDINGS_MEDIA_TYPE,
      "dim", G_TYPE_INT, (gint) dim, "format", G_TYPE_STRING, "F32",
      "modality", G_TYPE_STRING, modality, NULL);
  if (projector != NULL)
    gst_caps_set_simple (caps, "projector", G_TYPE_STRING, projector, NULL);
  return caps;
}

gboolean
gst_llm_caps_parse_embeddings (const GstCaps *caps, guint *dim, const char **modality,
    const char **projector)
{
  if (caps == NULL || !gst_caps_is_fixed (caps))
    return FALSE;
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  gint d = 0;
  const char *format = gst_structure_get_string (s, "format");
  const char *mod = gst_structure_get_string (s, "modality");
  if (!gst_structure_has_name (s, GST_LLM_EMBEDDINGS_MEDIA_TYPE)
      || !gst_structure_get_int (s, "dim", &d) || d <= 0
      || format == NULL || strcmp (format, "F32") != 0 || mod == NULL)
    return FALSE;
  if (dim)
    *dim = (guint) d;
  if (modality)
    *modality = mod;
  if (projector)
    *projector = gst_structure_get_string (s, "projector");
  return TRUE;
}

GstBuffer *
gst_llm_embeddings_buffer_new (const float *rows, gsize n_rows, guint dim)
{
  gsize size = n_rows * dim * sizeof (float);
  GstBuffer *buf = gst_buffer_new_allocate (NULL, size, NULL);
  if (size > 0)
    gst_buffer_fill (buf, 0, rows, size);
  return buf;
}

GstBuffer *
gst_llm_tokens_buffer_new (const gint32 *ids, gsize n)
{
  GstBuffer *buf = gst_buffer_new_allocate (NULL, n * GST_LLM_TOKEN_SIZE, NULL);
  GstMapInfo map;

  if (n == 0)
    return buf;
  gst_buffer_map (buf, &map, GST_MAP_WRITE);
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  memcpy (map.data, ids, n * GST_LLM_TOKEN_SIZE);
#else
  for (gsize i = 0; i < n; i++)
    GST_WRITE_UINT32_LE (map.data + i * GST_LLM_TOKEN_SIZE, (guint32) ids[i]);
#endif
  gst_buffer_unmap (buf, &map);
  return buf;
}

gboolean
gst_llm_tokens_buffer_read (GstBuffer *buffer, GArray *ids)
{
  GstMapInfo map;

  if (!gst_buffer_map (buffer, &map, GST_MAP_READ))
    return FALSE;
  if (map.size % GST_LLM_TOKEN_SIZE != 0) {
    gst_buffer_unmap (buffer, &map);
    return FALSE;
  }
  gsize n = map.size / GST_LLM_TOKEN_SIZE;
  guint old_len = ids->len;
  g_array_set_size (ids, old_len + n);
  gint32 *out = &g_array_index (ids, gint32, old_len);
  /* The payload need not be aligned: read byte-wise. */
  for (gsize i = 0; i < n; i++)
    out[i] = (gint32) GST_READ_UINT32_LE (map.data + i * GST_LLM_TOKEN_SIZE);
  gst_buffer_unmap (buffer, &map);
  return TRUE;
}

GstEvent *
gst_llm_event_new_end_of_prompt (void)
{
  return gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM,
      gst_structure_new_empty (GST_LLM_EVENT_END_OF_PROMPT));
}

GstEvent *
gst_llm_event_new_prompt_waiting (guint64 superseded)
{
  return gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM_OOB,
      gst_structure_new (GST_LLM_EVENT_PROMPT_WAITING, "superseded", G_TYPE_UINT64,
          superseded, NULL));
}

GstEvent *
gst_llm_event_new_end_of_response (const char *reason)
{
  g_return_val_if_fail (reason != NULL, NULL);
  return gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM,
      gst_structure_new (GST_LLM_EVENT_END_OF_RESPONSE,
          "reason", G_TYPE_STRING, reason, NULL));
}

GstEvent *
gst_llm_event_new_end_of_response_timed (const char *reason, GstClockTime pts,
    GstClockTime duration)
{
  g_return_val_if_fail (reason != NULL, NULL);
  return gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM,
      gst_structure_new (GST_LLM_EVENT_END_OF_RESPONSE,
          "reason", G_TYPE_STRING, reason,
          "prompt-pts", G_TYPE_UINT64, (guint64) pts,
          "prompt-duration", G_TYPE_UINT64, (guint64) duration, NULL));
}

gboolean
gst_llm_event_parse_end_of_response_timing (GstEvent *event, GstClockTime *pts,
    GstClockTime *duration)
{
  if (!gst_llm_event_is_end_of_response (event))
    return FALSE;
  const GstStructure *s = gst_event_get_structure (event);
  guint64 v;
  if (pts)
    *pts = gst_structure_get_uint64 (s, "prompt-pts", &v) ? v : GST_CLOCK_TIME_NONE;
  if (duration)
    *duration = gst_structure_get_uint64 (s, "prompt-duration", &v) ? v : GST_CLOCK_TIME_NONE;
  return TRUE;
}

static gboolean
event_has_name (GstEvent *event, const char *name)
{
  if (event == NULL || GST_EVENT_TYPE (event) != GST_EVENT_CUSTOM_DOWNSTREAM)
    return FALSE;
  return gst_event_has_name (event, name);
}

gboolean
gst_llm_event_is_end_of_prompt (GstEvent *event)
{
  return event_has_name (event, GST_LLM_EVENT_END_OF_PROMPT);
}

gboolean
gst_llm_event_parse_prompt_waiting (GstEvent *event, guint64 *superseded)
{
  if (event == NULL || GST_EVENT_TYPE (event) != GST_EVENT_CUSTOM_DOWNSTREAM_OOB
      || !gst_event_has_name (event, GST_LLM_EVENT_PROMPT_WAITING))
    return FALSE;
  guint64 s = 0;
  gst_structure_get_uint64 (gst_event_get_structure (event), "superseded", &s);
  if (superseded)
    *superseded = s;
  return TRUE;
}

gboolean
gst_llm_event_is_end_of_response (GstEvent *event)
{
  return event_has_name (event, GST_LLM_EVENT_END_OF_RESPONSE);
}

gboolean
gst_llm_event_parse_end_of_response (GstEvent *event, const char **reason)
{
  if (!gst_llm_event_is_end_of_response (event))
    return FALSE;
  if (reason)
    *reason = gst_structure_get_string (gst_event_get_structure (event), "reason");
  return TRUE;
}
