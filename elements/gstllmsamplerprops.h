/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sampler properties (temperature, top-k, top-p, min-p,
 * repeat-penalty, repeat-last-n, seed), for every element that has them:
 * the elements that sample (llmdecode) and llmprefill, which keeps them
 * as aliases. One place installs them, so names, ranges, defaults and
 * texts are the same everywhere, and records which ones the user set: a
 * value set on the sampling element wins over one set upstream, which
 * wins over the default. */
#pragma once

#include <gst/gst.h>
#include "sampler.h"

G_BEGIN_DECLS

/* An element installs them as the property ids first .. first + N - 1. */
#define GST_LLM_SAMPLER_N_PROPS 7

/* Plain data, under the element's object lock. */
typedef struct {
  LlmSamplerParams params;    /* the defaults where the user set nothing */
  guint set;                  /* a bit per property the user set */
} GstLlmSamplerProps;

/* The defaults (greedy), none set. */
void gst_llm_sampler_props_init (GstLlmSamplerProps *props);

/* Installs the properties on @klass with ids @first_id onwards, with
 * @flags (G_PARAM_READWRITE and the static strings are implied). */
void gst_llm_sampler_props_install (GObjectClass *klass, guint first_id, GParamFlags flags);

/* For set_property/get_property: FALSE when @prop_id is not one of them. */
gboolean gst_llm_sampler_props_set (GstLlmSamplerProps *props, guint first_id, guint prop_id,
    const GValue *value);
gboolean gst_llm_sampler_props_get (const GstLlmSamplerProps *props, guint first_id,
    guint prop_id, GValue *value);

/* Writes the values the user set on @props over @params; the others of
 * @params stay as they are. */
void gst_llm_sampler_props_apply (const GstLlmSamplerProps *props, LlmSamplerParams *params);

G_END_DECLS
