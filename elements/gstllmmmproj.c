/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "gstllmmmproj.h"

#include <string.h>

#include "gguf.h"

GST_DEBUG_CATEGORY_EXTERN (gst_llm_debug);
#define GST_CAT_DEFAULT gst_llm_debug

/* What kind of encoder reads @towers, for messages. */
static const char *
tower_name (LlmMmprojTowers towers)
{
  return towers == LLM_MMPROJ_TOWER_AUDIO ? "audio" : towers == LLM_MMPROJ_TOWER_VISION
      ? "vision" : "multimodal";
}

LlmMmproj *
gst_llm_load_mmproj (GstElement *element, const char *path, LlmMmprojTowers towers,
    const char *file, const char *function, int line)
{
  if (path == NULL || path[0] == '\0') {
    gst_element_message_full (element, GST_MESSAGE_ERROR, GST_RESOURCE_ERROR,
        GST_RESOURCE_ERROR_NOT_FOUND, g_strdup ("No projector file set."),
        g_strdup_printf ("Set the element's mmproj property to the mmproj GGUF file of an %s "
            "model, e.g. mmproj=mmproj-model-f16.gguf", tower_name (towers)),
        file, function, line);
    return NULL;
  }
  GError *error = NULL;
  LlmMmproj *p = llm_mmproj_load_towers (path, towers, &error);
  if (p != NULL)
    return p;

  /* The text names the file already; the debug string keeps it all. */
  const char *what = error->message;
  const gsize path_len = strlen (path);
  if (strncmp (what, path, path_len) == 0 && strncmp (what + path_len, ": ", 2) == 0)
    what += path_len + 2;
  GstResourceError code = GST_RESOURCE_ERROR_FAILED;
  char *text;
  if ((error->domain == G_FILE_ERROR && error->code == G_FILE_ERROR_NOENT)
      || (error->domain == LLM_GGUF_ERROR && error->code == LLM_GGUF_ERROR_IO
          && !g_file_test (path, G_FILE_TEST_EXISTS))) {
    code = GST_RESOURCE_ERROR_NOT_FOUND;
    text = g_strdup_printf ("Projector file \"%s\" does not exist. Check the path in the "
        "mmproj property.", path);
  } else if (error->domain == G_FILE_ERROR || (error->domain == LLM_GGUF_ERROR
          && error->code == LLM_GGUF_ERROR_IO)) {
    code = GST_RESOURCE_ERROR_OPEN_READ;
    text = g_strdup_printf ("Cannot read projector file \"%s\": %s. Check that it is a regular "
        "file this process may read.", path, what);
  } else if (error->domain == LLM_GGUF_ERROR) {
    text = g_strdup_printf ("Projector file \"%s\" is not a valid GGUF file: %s. It may be "
        "truncated or damaged; download or convert it again.", path, what);
  } else if (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ)) {
    /* It names the file and says what it lacks and what to give. */
    text = g_strdup (error->message);
  } else if (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_UNSUPPORTED)) {
    text = g_strdup_printf ("Projector file \"%s\" is of a kind gst-llm does not read: %s.",
        path, what);
  } else {
    text = g_strdup_printf ("Projector file \"%s\" is damaged or not in llama.cpp's mmproj "
        "layout: %s. Convert it again with llama.cpp's convert_hf_to_gguf.py --mmproj.", path,
        what);
  }
  char *debug = g_strdup_printf ("%s error %d: %s", g_quark_to_string (error->domain),
      error->code, error->message);
  GST_WARNING_OBJECT (element, "%s", text);
  gst_element_message_full (element, GST_MESSAGE_ERROR, GST_RESOURCE_ERROR, code, text, debug,
      file, function, line);
  g_error_free (error);
  return NULL;
}
