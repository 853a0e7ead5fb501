/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the element suites share beyond llm-check.h: the debug warnings an
 * element logs, for settings and events that must be remarked on without
 * failing anything. */
#pragma once

#include <gst/gst.h>

/* Starts collecting the WARNING-level debug messages about @element from
 * the plugin's shared "llm" category (raised to WARNING meanwhile). */
void llm_test_watch_warnings (GstElement *element);

/* Stops, and returns the messages seen since, one a line (g_free). */
char *llm_test_watched_warnings (void);
