/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The properties that say what an element runs and where: the model
 * file, the device, the KV cache of each session and the options of the
 * engine shared by every element on that model. Installed from one place
 * (with the enum types they use) and kept in one struct of the library's
 * own config types, which the element opens at READY into a model, an
 * engine and the KV config its sessions are made with. */
#pragma once

#include <gst/gst.h>
#include "engine.h"

G_BEGIN_DECLS

/* An element installs them as the property ids first .. first + N - 1. */
#define GST_LLM_ENGINE_N_PROPS 13

GType gst_llm_kv_type_get_type (void);
#define GST_TYPE_LLM_KV_TYPE (gst_llm_kv_type_get_type ())
GType gst_llm_kv_policy_get_type (void);
#define GST_TYPE_LLM_KV_POLICY (gst_llm_kv_policy_get_type ())
GType gst_llm_kv_full_get_type (void);
#define GST_TYPE_LLM_KV_FULL (gst_llm_kv_full_get_type ())

/* Plain data, under the element's object lock. */
typedef struct {
  char *model;
  char *device;
  LlmKvConfig kv;             /* as set: 0 leaves a size to the model */
  LlmEngineOptions engine;
} GstLlmEngineProps;

/* The defaults. */
void gst_llm_engine_props_init (GstLlmEngineProps *props);
/* Frees the strings. */
void gst_llm_engine_props_clear (GstLlmEngineProps *props);

/* Installs the properties on @klass with ids @first_id onwards. */
void gst_llm_engine_props_install (GObjectClass *klass, guint first_id);

/* For set_property/get_property: FALSE when @prop_id is not one of them.
 * They are read at NULL->READY only. */
gboolean gst_llm_engine_props_set (GstLlmEngineProps *props, guint first_id, guint prop_id,
    const GValue *value);
gboolean gst_llm_engine_props_get (const GstLlmEngineProps *props, guint first_id,
    guint prop_id, GValue *value);

/* Opens what @props (read under @element's object lock) name: the model
 * on its device and the engine, which is @from_context when that runs
 * the same model, else the process's one for these options (announced
 * as a "gst.llm.engine" context). Sets @kv to the KV config with the
 * sizes left to the model filled in. FALSE, with an ERROR posted on
 * @element that says what to change, when a setting is wrong or the
 * model cannot run; then nothing is returned. */
gboolean gst_llm_engine_props_open (GstElement *element, const GstLlmEngineProps *props,
    LlmEngine *from_context, LlmModel **model, LlmEngine **engine, LlmKvConfig *kv);

G_END_DECLS
