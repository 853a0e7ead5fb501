/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstllmsamplerprops.h"

/* Greedy: the same prompt gives the same text, which captioning and
 * transcription pipelines (and tests) want; chat users raise it. */
#define DEFAULT_TEMPERATURE 0.0f
/* The rest are llama.cpp's defaults, so temperature=0.8 samples as
 * llama-cli does. */
#define DEFAULT_TOP_K 40
#define DEFAULT_TOP_P 0.95f
#define DEFAULT_MIN_P 0.05f
#define DEFAULT_REPEAT_PENALTY 1.0f
#define DEFAULT_REPEAT_LAST_N 64
#define DEFAULT_SEED 0

/* Offsets from the installing class's first id, and bits of ->set. */
enum {
  TEMPERATURE,
  TOP_K,
  TOP_P,
  MIN_P,
  REPEAT_PENALTY,
  REPEAT_LAST_N,
  SEED,
};

G_STATIC_ASSERT (SEED + 1 == GST_LLM_SAMPLER_N_PROPS);

void
gst_llm_sampler_props_init (GstLlmSamplerProps *props)
{
  props->params.temperature = DEFAULT_TEMPERATURE;
  props->params.top_k = DEFAULT_TOP_K;
  props->params.top_p = DEFAULT_TOP_P;
  props->params.min_p = DEFAULT_MIN_P;
  props->params.repeat_penalty = DEFAULT_REPEAT_PENALTY;
  props->params.repeat_last_n = DEFAULT_REPEAT_LAST_N;
  props->params.seed = DEFAULT_SEED;
  props->set = 0;
}

void
gst_llm_sampler_props_install (GObjectClass *klass, guint first_id, GParamFlags flags)
{
  flags |= G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstLlmDecode:temperature:
   *
   * Sampling temperature; 0 is greedy (the most likely token each time),
   * the default, so that a prompt always gives the same text. llama.cpp's
   * CLI uses 0.8. Like every sampler property, also on llmprefill, as an
   * alias that llmdecode follows unless its own is set.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + TEMPERATURE,
      g_param_spec_float ("temperature", "Temperature",
          "Sampling temperature (0 = greedy)", 0.0f, 100.0f, DEFAULT_TEMPERATURE, flags));

  /**
   * GstLlmDecode:top-k:
   *
   * Sample among the k most likely tokens; 0 turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + TOP_K,
      g_param_spec_int ("top-k", "Top-k",
          "Sample among the k most likely tokens (0 = off)", 0, G_MAXINT32, DEFAULT_TOP_K,
          flags));

  /**
   * GstLlmDecode:top-p:
   *
   * Sample among the most likely tokens that together have probability p
   * (nucleus sampling); 1 turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + TOP_P,
      g_param_spec_float ("top-p", "Top-p",
          "Sample among the most likely tokens of total probability p (1 = off)",
          0.0f, 1.0f, DEFAULT_TOP_P, flags));

  /**
   * GstLlmDecode:min-p:
   *
   * Drop tokens less likely than min-p times the most likely one; 0
   * turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + MIN_P,
      g_param_spec_float ("min-p", "Min-p",
          "Drop tokens below min-p times the top probability (0 = off)",
          0.0f, 1.0f, DEFAULT_MIN_P, flags));

  /**
   * GstLlmDecode:repeat-penalty:
   *
   * Penalty on tokens among the last repeat-last-n (llama.cpp's rule);
   * 1 turns it off.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + REPEAT_PENALTY,
      g_param_spec_float ("repeat-penalty", "Repeat penalty",
          "Penalty on recently seen tokens (1 = off)", 0.0f, 10.0f, DEFAULT_REPEAT_PENALTY,
          flags));

  /**
   * GstLlmDecode:repeat-last-n:
   *
   * How many recent tokens the repeat penalty looks at; -1 all, 0 none.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + REPEAT_LAST_N,
      g_param_spec_int ("repeat-last-n", "Repeat last n",
          "Recent tokens the repeat penalty looks at (-1 = all, 0 = none)",
          -1, G_MAXINT32, DEFAULT_REPEAT_LAST_N, flags));

  /**
   * GstLlmDecode:seed:
   *
   * Seed of the sampler's random draws; each prompt of a new conversation
   * restarts the sequence, so a prompt gives the same text every run.
   *
   * Since: 0.1
   */
  g_object_class_install_property (klass, first_id + SEED,
      g_param_spec_uint64 ("seed", "Seed",
          "Seed of the sampler's random draws", 0, G_MAXUINT64, DEFAULT_SEED, flags));
}

gboolean
gst_llm_sampler_props_set (GstLlmSamplerProps *props, guint first_id, guint prop_id,
    const GValue *value)
{
  if (prop_id < first_id || prop_id >= first_id + GST_LLM_SAMPLER_N_PROPS)
    return FALSE;

  LlmSamplerParams *p = &props->params;
  guint which = prop_id - first_id;
  switch (which) {
    case TEMPERATURE:
      p->temperature = g_value_get_float (value);
      break;
    case TOP_K:
      p->top_k = g_value_get_int (value);
      break;
    case TOP_P:
      p->top_p = g_value_get_float (value);
      break;
    case MIN_P:
      p->min_p = g_value_get_float (value);
      break;
    case REPEAT_PENALTY:
      p->repeat_penalty = g_value_get_float (value);
      break;
    case REPEAT_LAST_N:
      p->repeat_last_n = g_value_get_int (value);
      break;
    case SEED:
      p->seed = g_value_get_uint64 (value);
      break;
  }
  props->set |= 1u << which;
  return TRUE;
}

gboolean
gst_llm_sampler_props_get (const GstLlmSamplerProps *props, guint first_id, guint prop_id,
    GValue *value)
{
  if (prop_id < first_id || prop_id >= first_id + GST_LLM_SAMPLER_N_PROPS)
    return FALSE;

  const LlmSamplerParams *p = &props->params;
  switch (prop_id - first_id) {
    case TEMPERATURE:
      g_value_set_float (value, p->temperature);
      break;
    case TOP_K:
      g_value_set_int (value, p->top_k);
      break;
    case TOP_P:
      g_value_set_float (value, p->top_p);
      break;
    case MIN_P:
      g_value_set_float (value, p->min_p);
      break;
    case REPEAT_PENALTY:
      g_value_set_float (value, p->repeat_penalty);
      break;
    case REPEAT_LAST_N:
      g_value_set_int (value, p->repeat_last_n);
      break;
    case SEED:
      g_value_set_uint64 (value, p->seed);
      break;
  }
  return TRUE;
}

void
gst_llm_sampler_props_apply (const GstLlmSamplerProps *props, LlmSamplerParams *params)
{
  const LlmSamplerParams *p = &props->params;
  guint set = props->set;

  if (set & (1u << TEMPERATURE))
    params->temperature = p->temperature;
  if (set & (1u << TOP_K))
    params->top_k = p->top_k;
  if (set & (1u << TOP_P))
    params->top_p = p->top_p;
  if (set & (1u << MIN_P))
    params->min_p = p->min_p;
  if (set & (1u << REPEAT_PENALTY))
    params->repeat_penalty = p->repeat_penalty;
  if (set & (1u << REPEAT_LAST_N))
    params->repeat_last_n = p->repeat_last_n;
  if (set & (1u << SEED))
    params->seed = p->seed;
}
