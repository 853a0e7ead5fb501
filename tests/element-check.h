/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the element suites share beyond llm-check.h: the text an element
 * pushed, and the debug warnings it logs (for settings and events that
 * must be remarked on without failing anything). */
#pragma once

#include <gst/check/gstharness.h>
#include <gst/gst.h>

/* All text @h's element has pushed so far, each buffer checked to be
 * non-empty whole UTF-8 characters. */
GString *llm_test_pull_text (GstHarness *h);

/* Starts collecting the WARNING-level debug messages about @element from
 * the plugin's shared "llm" category (raised to WARNING meanwhile). */
void llm_test_watch_warnings (GstElement *element);

/* Stops, and returns the messages seen since, one a line (g_free). */
char *llm_test_watched_warnings (void);
