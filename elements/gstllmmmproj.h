/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Loading an mmproj file for an element: the towers it needs, or an
 * element error that says which file, what is wrong with it and what to
 * do (shared by the encoders' elements). */
#pragma once

#include <gst/gst.h>

#include "mmproj.h"

G_BEGIN_DECLS

/* The @towers of @path (the element's mmproj property), or NULL after
 * posting a RESOURCE error: NOT_FOUND for an unset or missing file,
 * OPEN_READ for one the process cannot read, FAILED for one that is not
 * GGUF, not a projector, without the tower, of a projector type gst-llm
 * does not read, or damaged. */
#define GST_LLM_LOAD_MMPROJ(element, path, towers) \
  gst_llm_load_mmproj (GST_ELEMENT (element), (path), (towers), __FILE__, GST_FUNCTION, \
      __LINE__)

LlmMmproj *gst_llm_load_mmproj (GstElement *element, const char *path, LlmMmprojTowers towers,
    const char *file, const char *function, int line);

G_END_DECLS
