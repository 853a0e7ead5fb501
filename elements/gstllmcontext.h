/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sharing one LlmEngine between elements the way GStreamer's GL and CUDA
 * elements share their display and device context: a GstContext of type
 * "gst.llm.engine" holding the engine. An element that makes an engine
 * posts it (HAVE_CONTEXT), so the pipeline hands it to every other
 * element; an application may also set one on a pipeline to share an
 * engine across pipelines (the process registry shares it anyway while
 * it is alive). */
#pragma once

#include <gst/gst.h>
#include "engine.h"

G_BEGIN_DECLS

#define GST_LLM_ENGINE_CONTEXT_TYPE "gst.llm.engine"

/* LlmEngine as a boxed type (ref/unref). */
GType gst_llm_engine_get_type (void);
#define GST_TYPE_LLM_ENGINE (gst_llm_engine_get_type ())

/* A context holding a reference to @engine. The ones elements post are
 * not @persistent: a pipeline in NULL drops them, and with them the
 * engine, unless something else holds it. An application that wants an
 * engine kept across NULL makes a persistent one (or keeps a reference). */
GstContext *gst_llm_engine_context_new (LlmEngine *engine, gboolean persistent);
/* The engine in @context (a new reference), or NULL if it is not one. */
LlmEngine *gst_llm_engine_context_get (GstContext *context);

/* The engine @element runs @model with: the one it was handed through a
 * "gst.llm.engine" context (kept in @from_context) when that runs the
 * same model with the same engine options @opts, else one from the
 * process registry for @opts, which is then posted as a context. NULL
 * with @error set if none can start. */
LlmEngine *gst_llm_engine_acquire (GstElement *element, LlmEngine *from_context,
    LlmModel *model, const LlmEngineOptions *opts, GError **error);

G_END_DECLS
