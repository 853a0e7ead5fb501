/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstllmcontext.h"
#include "gstllmelements.h"

#define GST_CAT_DEFAULT gst_llm_debug

G_DEFINE_BOXED_TYPE (LlmEngine, gst_llm_engine, llm_engine_ref, llm_engine_unref)

GstContext *
gst_llm_engine_context_new (LlmEngine *engine, gboolean persistent)
{
  GstContext *context = gst_context_new (GST_LLM_ENGINE_CONTEXT_TYPE, persistent);
  GstStructure *s = gst_context_writable_structure (context);
  gst_structure_set (s, "engine", GST_TYPE_LLM_ENGINE, engine, NULL);
  return context;
}

LlmEngine *
gst_llm_engine_context_get (GstContext *context)
{
  if (context == NULL
      || g_strcmp0 (gst_context_get_context_type (context), GST_LLM_ENGINE_CONTEXT_TYPE) != 0)
    return NULL;
  LlmEngine *engine = NULL;
  if (!gst_structure_get (gst_context_get_structure (context), "engine", GST_TYPE_LLM_ENGINE,
          &engine, NULL))
    return NULL;
  return engine;
}

LlmEngine *
gst_llm_engine_acquire (GstElement *element, LlmEngine *from_context, LlmModel *model,
    const LlmEngineOptions *opts, GError **error)
{
  /* A bin hands every element added later the context its first element
   * posted, whatever that one's engine properties: an element whose
   * properties differ gets the engine they ask for. */
  if (from_context != NULL && llm_engine_runs_with (from_context, model, opts)) {
    GST_DEBUG_OBJECT (element, "running on the engine of a " GST_LLM_ENGINE_CONTEXT_TYPE
        " context");
    return llm_engine_ref (from_context);
  }
  LlmEngine *engine = llm_engine_get (model, opts, error);
  /* Not persistent: the pipeline forgets it in NULL, so that the engine's
   * weights and KV memory go with the elements that use them. */
  if (engine != NULL)
    gst_element_post_message (element, gst_message_new_have_context (GST_OBJECT (element),
            gst_llm_engine_context_new (engine, FALSE)));
  return engine;
}
