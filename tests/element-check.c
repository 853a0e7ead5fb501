/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "element-check.h"

#include <check.h>

GString *
llm_test_pull_text (GstHarness *h)
{
  GString *text = g_string_new (NULL);
  GstBuffer *buf;
  while ((buf = gst_harness_try_pull (h)) != NULL) {
    GstMapInfo map;
    ck_assert (gst_buffer_map (buf, &map, GST_MAP_READ));
    ck_assert_msg (map.size > 0, "empty text buffer pushed");
    ck_assert_msg (g_utf8_validate_len ((const char *) map.data, map.size, NULL),
        "text buffer is not whole UTF-8 characters");
    g_string_append_len (text, (const char *) map.data, map.size);
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
  }
  return text;
}

static GMutex lock;
static GString *seen;
static GstElement *watched;

static void
record_warning (GstDebugCategory *category, GstDebugLevel level, const gchar *file,
    const gchar *function, gint line, GObject *object, GstDebugMessage *message,
    gpointer user_data)
{
  if (level != GST_LEVEL_WARNING || object == NULL || object != (GObject *) watched)
    return;
  g_mutex_lock (&lock);
  g_string_append (seen, gst_debug_message_get (message));
  g_string_append_c (seen, '\n');
  g_mutex_unlock (&lock);
}

void
llm_test_watch_warnings (GstElement *element)
{
  g_assert (seen == NULL);
  seen = g_string_new (NULL);
  watched = element;
  gst_debug_set_threshold_for_name ("llm", GST_LEVEL_WARNING);
  gst_debug_add_log_function (record_warning, NULL, NULL);
}

char *
llm_test_watched_warnings (void)
{
  gst_debug_remove_log_function (record_warning);
  gst_debug_unset_threshold_for_name ("llm");
  watched = NULL;
  char *text = g_string_free (seen, FALSE);
  seen = NULL;
  return text;
}
