/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmdraft
 * @title: llmdraft
 * @short_description: gives llmspecverify a drafter that proposes the next tokens
 *
 * llmdraft sits between llmprefill and llmspecverify. It passes every
 * `application/x-llm-state` buffer on as `application/x-llm-draft` (the
 * same session, the same vocabulary) with its drafter attached; as
 * llmspecverify decodes, it asks that drafter what the next tokens will
 * probably be, checks them all in one forward and keeps those the model
 * itself picks, so the output is the one llmdecode gives.
 *
 * #GstLlmDraft:method `ngram` (prompt lookup, no model): the tokens that
 * followed the latest earlier occurrence of the last n tokens, n from
 * #GstLlmDraft:ngram-max down to #GstLlmDraft:ngram-min, looked up in the
 * conversation so far (the prompt, earlier turns the session kept, and
 * the response). Captions, transcripts and summaries repeat themselves
 * and their prompts, so their continuations are often there. The index
 * is kept as tokens arrive and covers the last #GstLlmDraft:ngram-window
 * tokens, so a live stream's memory stays bounded.
 *
 * #GstLlmDraft:method `model`: a small GGUF model with the same
 * vocabulary (#GstLlmDraft:draft-model; the usual one is a low-bit copy
 * of the target, e.g. the target quantised to Q4_0) decodes greedily on a
 * sequence of its own, one proposal after each token, stopping at the
 * first it gives a probability under #GstLlmDraft:draft-p-min (a fixed
 * threshold; with llmspecverify's dynamic budget it also stops where,
 * by how sure it was of what it drafted, one more proposal would not
 * pay, learnt from the verdicts). A draft
 * model of another vocabulary than the stream's is refused at caps
 * negotiation, naming both.
 *
 * #GstLlmDraft:method `layerskip`: self-speculative, training-free (as
 * SWIFT): the target model itself with the layers of
 * #GstLlmDraft:skip-layers skipped (none named: every other layer of the
 * middle half) drafts on a fork of the session's own KV cache, whose
 * blocks it shares and copies only where it writes; the fork goes after
 * each proposal. With #GstLlmDraft:adaptive-skip (the default) that set
 * is only where it starts: it tries sets one layer away as it drafts and
 * keeps those that give more tokens per forward. No second model, no
 * second cache. Naming a layer the
 * model lacks, or all of them, is an error when the first prompt comes.
 *
 * #GstLlmDraft:draft-ahead: pipelined drafting (PEARL), for method
 * `model`. While llmspecverify checks a proposal, a thread of the
 * drafter's goes on drafting as if all of it will be accepted: it guesses
 * the model's own next token (the draft model's pick) and drafts the next
 * proposal after it. A verdict that keeps the whole proposal and picks
 * the guess finds the next proposal ready; any other throws that drafting
 * away and drafts from the verdict, as without. The output is the same;
 * the draft model's forwards overlap the verifier's, which pays where the
 * two do not compete for the same cores (a draft model on another device,
 * or cores to spare). `auto` (the default) drafts ahead when a thread
 * boundary, such as a `queue`, sits between llmdraft and llmspecverify:
 * that is how a pipeline says the two may run apart. llm-stats counts
 * `ahead-used` and `ahead-discarded`. Methods `ngram` (nothing to wait for)
 * and `layerskip` (the target's own engine, whose forwards a draft would
 * only queue behind) do not draft ahead.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m filesrc location=captions.txt ! llmtokenize model=m.gguf ! \
 *     llmprefill model=m.gguf ! llmdraft method=ngram ! llmspecverify max-tokens=64 ! \
 *     llmdetokenize model=m.gguf ! fdsink
 * ]| Continues captions.txt as llmdecode would, faster where it repeats
 * itself; the llm-stats message says how many drafts were accepted.
 * |[
 * gst-launch-1.0 -m filesrc location=prompt.txt ! llmtokenize model=m.gguf ! \
 *     llmprefill model=m.gguf ! llmdraft method=model draft-model=m-q4_0.gguf ! queue ! \
 *     llmspecverify max-tokens=64 ! llmdetokenize model=m.gguf ! fdsink
 * ]| Drafts with the model's Q4_0 copy, ahead of the verifier (the queue).
 *
 * Since: 0.3
 */
#include "config.h"

#include <string.h>

#include <gst/base/gstbasetransform.h>

#include "drafter.h"
#include "ngram-draft.h"
#include "gstllmelements.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "model.h"
#include "tokenizer.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_draft_debug);
#define GST_CAT_DEFAULT gst_llm_draft_debug

/**
 * GstLlmDraftMethod:
 * @GST_LLM_DRAFT_METHOD_NGRAM: prompt lookup: what followed the latest
 *   earlier occurrence of the last tokens
 * @GST_LLM_DRAFT_METHOD_MODEL: a small model of the same vocabulary
 *   (draft-model) decoding greedily
 * @GST_LLM_DRAFT_METHOD_LAYERSKIP: the target with layers skipped
 *   (skip-layers), on a fork of its own cache
 *
 * How llmdraft proposes tokens.
 *
 * Since: 0.3
 */
typedef enum {
  GST_LLM_DRAFT_METHOD_NGRAM,
  GST_LLM_DRAFT_METHOD_MODEL,
  GST_LLM_DRAFT_METHOD_LAYERSKIP,
} GstLlmDraftMethod;

#define GST_TYPE_LLM_DRAFT_METHOD (gst_llm_draft_method_get_type ())
static GType
gst_llm_draft_method_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_DRAFT_METHOD_NGRAM, "Prompt lookup: what followed the last tokens before",
        "ngram"},
    {GST_LLM_DRAFT_METHOD_MODEL, "A small model of the same vocabulary (draft-model)",
        "model"},
    {GST_LLM_DRAFT_METHOD_LAYERSKIP, "The target with layers skipped (skip-layers)",
        "layerskip"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmDraftMethod", values));
  return type;
}

/**
 * GstLlmDraftAhead:
 * @GST_LLM_DRAFT_AHEAD_AUTO: when a thread boundary (a queue) sits between
 *   llmdraft and llmspecverify
 * @GST_LLM_DRAFT_AHEAD_ON: always
 * @GST_LLM_DRAFT_AHEAD_OFF: never: the drafter drafts when asked
 *
 * When a model drafter drafts ahead of the verifier's verdict.
 *
 * Since: 0.4
 */
typedef enum {
  GST_LLM_DRAFT_AHEAD_AUTO,
  GST_LLM_DRAFT_AHEAD_ON,
  GST_LLM_DRAFT_AHEAD_OFF,
} GstLlmDraftAhead;

#define GST_TYPE_LLM_DRAFT_AHEAD (gst_llm_draft_ahead_get_type ())
static GType
gst_llm_draft_ahead_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_DRAFT_AHEAD_AUTO, "When a queue (a thread boundary) sits before the verifier",
        "auto"},
    {GST_LLM_DRAFT_AHEAD_ON, "Always", "on"},
    {GST_LLM_DRAFT_AHEAD_OFF, "Never: draft when the verifier asks", "off"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmDraftAhead", values));
  return type;
}

#define DEFAULT_METHOD GST_LLM_DRAFT_METHOD_NGRAM
#define DEFAULT_NGRAM_MIN 1
#define DEFAULT_NGRAM_MAX 4
#define DEFAULT_NGRAM_WINDOW 4096
#define DEFAULT_DRAFT_MODEL NULL
#define DEFAULT_ADAPTIVE_SKIP TRUE
#define DEFAULT_DRAFT_P_MIN 0.0f
#define DEFAULT_DRAFT_WINDOW 4096
#define DEFAULT_DRAFT_AHEAD GST_LLM_DRAFT_AHEAD_AUTO

enum {
  PROP_0,
  PROP_METHOD,
  PROP_NGRAM_MIN,
  PROP_NGRAM_MAX,
  PROP_NGRAM_WINDOW,
  PROP_DRAFT_MODEL,
  PROP_DRAFT_P_MIN,
  PROP_SKIP_LAYERS,
  PROP_ADAPTIVE_SKIP,
  PROP_DRAFT_AHEAD,
};

#define GST_TYPE_LLM_DRAFT (gst_llm_draft_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmDraft, gst_llm_draft, GST, LLM_DRAFT, GstBaseTransform)

struct _GstLlmDraft {
  GstBaseTransform parent;

  /* properties; object lock */
  GstLlmDraftMethod method;
  guint ngram_min, ngram_max, ngram_window;
  char *draft_model;
  float draft_p_min;
  GArray *skip_layers;        /* guint */
  gboolean adaptive_skip;
  GstLlmDraftAhead draft_ahead;

  /* from start to stop */
  LlmDrafter *drafter;
  LlmModel *checked;          /* the last model the drafter was checked for (not a ref) */
  char vocab_hash[GST_LLM_VOCAB_HASH_LEN + 1];  /* the draft model's; "" for ngram */
};

G_DEFINE_TYPE (GstLlmDraft, gst_llm_draft, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmdraft, "llmdraft", GST_RANK_NONE,
    GST_TYPE_LLM_DRAFT, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_STATE_MEDIA_TYPE));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_DRAFT_MEDIA_TYPE));

/* The drafter of method model: the draft model, on an engine of its own
 * (shared with any other user of the same file), with its vocabulary
 * noted for negotiation. */
static LlmDrafter *
new_model_drafter (GstLlmDraft *self, const char *path, float p_min)
{
  GError *error = NULL;
  if (path == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND, ("method=model needs a draft model."),
        ("set draft-model to a GGUF file of the target's vocabulary, e.g. the target "
            "quantised to Q4_0"));
    return NULL;
  }
  g_autoptr (LlmModel) model = llm_model_get (path, "cpu", &error);
  if (model == NULL) {
    GST_LLM_ELEMENT_ERROR_LOAD (self, "draft-model", path, error);
    g_error_free (error);
    return NULL;
  }
  LlmTokenizer *tok = llm_model_tokenizer (model);
  if (tok == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Draft model \"%s\" has no vocabulary.", path),
        ("its proposals could not be matched to the stream's token ids"));
    return NULL;
  }
  g_strlcpy (self->vocab_hash, llm_tokenizer_vocab (tok)->hash, sizeof self->vocab_hash);
  LlmEngineOptions opts;
  llm_engine_options_init (&opts);
  g_autoptr (LlmEngine) engine = llm_engine_get (model, &opts, &error);
  LlmDrafter *d = engine ? llm_drafter_new_model (engine, DEFAULT_DRAFT_WINDOW, p_min, &error)
      : NULL;
  if (d == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Cannot draft with \"%s\": %s.", path,
            error->message), (NULL));
    g_error_free (error);
  }
  return d;
}

static gboolean
gst_llm_draft_start (GstBaseTransform *trans)
{
  GstLlmDraft *self = GST_LLM_DRAFT (trans);
  GError *error = NULL;

  GST_OBJECT_LOCK (self);
  const GstLlmDraftMethod method = self->method;
  const guint n_min = self->ngram_min, n_max = self->ngram_max, window = self->ngram_window;
  g_autofree char *path = g_strdup (self->draft_model);
  const float p_min = self->draft_p_min;
  const gboolean ahead_on = self->draft_ahead == GST_LLM_DRAFT_AHEAD_ON;
  GST_OBJECT_UNLOCK (self);
  self->vocab_hash[0] = '\0';
  if (ahead_on && method != GST_LLM_DRAFT_METHOD_MODEL)
    GST_WARNING_OBJECT (self, "draft-ahead=on: only method=model drafts ahead");
  if (method == GST_LLM_DRAFT_METHOD_MODEL) {
    self->drafter = new_model_drafter (self, path, p_min);
    return self->drafter != NULL;
  }
  if (method == GST_LLM_DRAFT_METHOD_LAYERSKIP) {
    GST_OBJECT_LOCK (self);
    self->drafter = llm_drafter_new_layerskip ((const guint *) self->skip_layers->data,
        self->skip_layers->len, self->adaptive_skip);
    GST_OBJECT_UNLOCK (self);
    self->checked = NULL;
    return TRUE;
  }
  self->drafter = llm_drafter_new_ngram (n_min, n_max, window, &error);
  if (self->drafter == NULL) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Cannot draft with these settings: %s.",
            error->message), ("ngram-min %u, ngram-max %u, ngram-window %u", n_min, n_max,
            window));
    g_error_free (error);
    return FALSE;
  }
  return TRUE;
}

static gboolean
gst_llm_draft_stop (GstBaseTransform *trans)
{
  GstLlmDraft *self = GST_LLM_DRAFT (trans);
  g_clear_pointer (&self->drafter, llm_drafter_unref);
  return TRUE;
}

/* State and draft caps name the same vocabulary. */
static GstCaps *
gst_llm_draft_transform_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, GstCaps *filter)
{
  const char *to = direction == GST_PAD_SINK ? GST_LLM_DRAFT_MEDIA_TYPE
      : GST_LLM_STATE_MEDIA_TYPE;
  GstCaps *out = gst_caps_new_empty ();
  for (guint i = 0; i < gst_caps_get_size (caps); i++) {
    GstStructure *s = gst_structure_copy (gst_caps_get_structure (caps, i));
    gst_structure_set_name (s, to);
    out = gst_caps_merge_structure (out, s);
  }
  if (filter) {
    GstCaps *narrowed = gst_caps_intersect_full (filter, out, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (out);
    out = narrowed;
  }
  return out;
}

/* A draft model must index the stream's vocabulary. */
static gboolean
gst_llm_draft_set_caps (GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps)
{
  GstLlmDraft *self = GST_LLM_DRAFT (trans);
  const GstStructure *s = gst_caps_get_structure (incaps, 0);
  const char *vocab = gst_structure_get_string (s, GST_LLM_CAPS_FIELD_VOCAB);
  if (vocab == NULL || self->vocab_hash[0] == '\0' || strcmp (vocab, self->vocab_hash) == 0)
    return TRUE;
  GST_OBJECT_LOCK (self);
  g_autofree char *path = g_strdup (self->draft_model);
  GST_OBJECT_UNLOCK (self);
  GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
      ("Draft model \"%s\" has another vocabulary (vocab=%s) than the stream (vocab=%s). "
          "Draft with a model of the target's tokenizer.", path, self->vocab_hash, vocab),
      (NULL));
  return FALSE;
}

static GstFlowReturn
gst_llm_draft_transform_ip (GstBaseTransform *trans, GstBuffer *buffer)
{
  GstLlmDraft *self = GST_LLM_DRAFT (trans);
  if (gst_buffer_get_llm_session_meta (buffer) == NULL) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Received a state buffer without a session to draft for."),
        ("llmdraft takes the output of llmprefill: a buffer with a GstLlmSessionMeta"));
    return GST_FLOW_ERROR;
  }
  LlmModel *model = llm_session_model (gst_buffer_get_llm_session_meta (buffer)->session);
  GError *error = NULL;
  if (model != self->checked && !llm_drafter_check_model (self->drafter, model, &error)) {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS, ("Cannot draft for \"%s\": %s.",
            llm_model_path (model), error->message), (NULL));
    g_error_free (error);
    return GST_FLOW_ERROR;
  }
  self->checked = model;
  if (gst_buffer_get_llm_draft_meta (buffer) == NULL) {
    GstLlmDraftMeta *meta = gst_buffer_add_llm_draft_meta (buffer, self->drafter);
    GST_OBJECT_LOCK (self);
    const GstLlmDraftAhead ahead = self->draft_ahead;
    GST_OBJECT_UNLOCK (self);
    meta->ahead = ahead == GST_LLM_DRAFT_AHEAD_ON;
    /* This thread pushes the buffer on: llmspecverify compares it with
     * the one it takes the buffer on. */
    if (ahead == GST_LLM_DRAFT_AHEAD_AUTO)
      meta->pushed_from = g_thread_ref (g_thread_self ());
  }
  return GST_FLOW_OK;
}

static void
gst_llm_draft_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmDraft *self = GST_LLM_DRAFT (object);

  GST_OBJECT_LOCK (self);
  /* The drafter is made from these at READY->PAUSED (start). */
  if (pspec->flags & GST_PARAM_MUTABLE_READY)
    gst_llm_note_late_setting (GST_ELEMENT (self), pspec, GST_STATE_CHANGE_READY_TO_PAUSED);
  switch (prop_id) {
    case PROP_METHOD:
      self->method = g_value_get_enum (value);
      break;
    case PROP_NGRAM_MIN:
      self->ngram_min = g_value_get_uint (value);
      break;
    case PROP_NGRAM_MAX:
      self->ngram_max = g_value_get_uint (value);
      break;
    case PROP_NGRAM_WINDOW:
      self->ngram_window = g_value_get_uint (value);
      break;
    case PROP_DRAFT_MODEL:
      g_free (self->draft_model);
      self->draft_model = g_value_dup_string (value);
      break;
    case PROP_DRAFT_P_MIN:
      self->draft_p_min = g_value_get_float (value);
      break;
    case PROP_SKIP_LAYERS:
      g_array_set_size (self->skip_layers, 0);
      for (guint i = 0; i < gst_value_array_get_size (value); i++) {
        const guint l = g_value_get_uint (gst_value_array_get_value (value, i));
        g_array_append_val (self->skip_layers, l);
      }
      break;
    case PROP_ADAPTIVE_SKIP:
      self->adaptive_skip = g_value_get_boolean (value);
      break;
    case PROP_DRAFT_AHEAD:
      self->draft_ahead = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_draft_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstLlmDraft *self = GST_LLM_DRAFT (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_METHOD:
      g_value_set_enum (value, self->method);
      break;
    case PROP_NGRAM_MIN:
      g_value_set_uint (value, self->ngram_min);
      break;
    case PROP_NGRAM_MAX:
      g_value_set_uint (value, self->ngram_max);
      break;
    case PROP_NGRAM_WINDOW:
      g_value_set_uint (value, self->ngram_window);
      break;
    case PROP_DRAFT_MODEL:
      g_value_set_string (value, self->draft_model);
      break;
    case PROP_DRAFT_P_MIN:
      g_value_set_float (value, self->draft_p_min);
      break;
    case PROP_SKIP_LAYERS:
      for (guint i = 0; i < self->skip_layers->len; i++) {
        GValue v = G_VALUE_INIT;
        g_value_init (&v, G_TYPE_UINT);
        g_value_set_uint (&v, g_array_index (self->skip_layers, guint, i));
        gst_value_array_append_and_take_value (value, &v);
      }
      break;
    case PROP_ADAPTIVE_SKIP:
      g_value_set_boolean (value, self->adaptive_skip);
      break;
    case PROP_DRAFT_AHEAD:
      g_value_set_enum (value, self->draft_ahead);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_draft_finalize (GObject *object)
{
  GstLlmDraft *self = GST_LLM_DRAFT (object);
  g_free (self->draft_model);
  g_array_unref (self->skip_layers);
  G_OBJECT_CLASS (gst_llm_draft_parent_class)->finalize (object);
}

static void
gst_llm_draft_init (GstLlmDraft *self)
{
  self->draft_model = DEFAULT_DRAFT_MODEL;
  self->draft_p_min = DEFAULT_DRAFT_P_MIN;
  self->skip_layers = g_array_new (FALSE, FALSE, sizeof (guint));
  self->adaptive_skip = DEFAULT_ADAPTIVE_SKIP;
  self->draft_ahead = DEFAULT_DRAFT_AHEAD;
  self->method = DEFAULT_METHOD;
  self->ngram_min = DEFAULT_NGRAM_MIN;
  self->ngram_max = DEFAULT_NGRAM_MAX;
  self->ngram_window = DEFAULT_NGRAM_WINDOW;
  /* The buffer goes on as it came, with a meta more. */
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), TRUE);
}

static void
gst_llm_draft_class_init (GstLlmDraftClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

  GST_DEBUG_CATEGORY_INIT (gst_llm_draft_debug, "llmdraft", 0, "LLM drafting");

  gobject_class->set_property = gst_llm_draft_set_property;
  gobject_class->get_property = gst_llm_draft_get_property;
  gobject_class->finalize = gst_llm_draft_finalize;

  /**
   * GstLlmDraft:method:
   *
   * How tokens are proposed.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_METHOD,
      g_param_spec_enum ("method", "Method",
          "How tokens are proposed: ngram (prompt lookup), model (draft-model) or layerskip "
          "(the target with skip-layers skipped)",
          GST_TYPE_LLM_DRAFT_METHOD, DEFAULT_METHOD, rw));

  /**
   * GstLlmDraft:ngram-min:
   *
   * The shortest run of last tokens whose earlier occurrence counts.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_NGRAM_MIN,
      g_param_spec_uint ("ngram-min", "N-gram min",
          "Shortest run of last tokens looked up (method ngram)", 1, LLM_NGRAM_MAX_N,
          DEFAULT_NGRAM_MIN, rw));

  /**
   * GstLlmDraft:ngram-max:
   *
   * The longest run of last tokens looked up; longer matches are tried
   * first.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_NGRAM_MAX,
      g_param_spec_uint ("ngram-max", "N-gram max",
          "Longest run of last tokens looked up, tried first (method ngram)", 1,
          LLM_NGRAM_MAX_N, DEFAULT_NGRAM_MAX, rw));

  /**
   * GstLlmDraft:ngram-window:
   *
   * How many of the last tokens of the conversation are looked in.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_NGRAM_WINDOW,
      g_param_spec_uint ("ngram-window", "N-gram window",
          "Last tokens of the conversation looked in (method ngram)", 2, 1 << 24,
          DEFAULT_NGRAM_WINDOW, rw));

  /**
   * GstLlmDraft:draft-model:
   *
   * The GGUF file of the draft model (method model): the target's
   * vocabulary, far fewer bytes to read per token.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_DRAFT_MODEL,
      g_param_spec_string ("draft-model", "Draft model",
          "GGUF file of the draft model, of the target's vocabulary (method model)",
          DEFAULT_DRAFT_MODEL, rw));

  /**
   * GstLlmDraft:draft-p-min:
   *
   * The draft model stops proposing at the first token it gives a
   * probability under this (0: it proposes as many as asked).
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_DRAFT_P_MIN,
      g_param_spec_float ("draft-p-min", "Draft p-min",
          "The draft model stops at the first token it is less sure of (method model)", 0.0f,
          1.0f, DEFAULT_DRAFT_P_MIN, rw));

  /**
   * GstLlmDraft:skip-layers:
   *
   * The layers the target skips to draft (method layerskip), e.g.
   * `skip-layers="<4,6,8>"`; empty: every other layer of the middle half.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_SKIP_LAYERS,
      gst_param_spec_array ("skip-layers", "Skip layers",
          "Layers the target skips to draft (method layerskip); empty: every other layer of "
          "the middle half",
          g_param_spec_uint ("layer", "Layer", "A layer index", 0, G_MAXUINT, 0,
              G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS), rw));

  /**
   * GstLlmDraft:adaptive-skip:
   *
   * Method layerskip: search the skipped layers from the verifier's
   * verdicts while decoding, starting from #GstLlmDraft:skip-layers (or
   * the default set): every window of proposals a set one layer away
   * drafts, and is kept when it gives more tokens per forward (fewer
   * layers run for as many accepted). The output does not change. Off,
   * the start set drafts throughout.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_ADAPTIVE_SKIP,
      g_param_spec_boolean ("adaptive-skip", "Adaptive skip",
          "Search the skipped layers from measured acceptance, starting from skip-layers "
          "(method layerskip)", DEFAULT_ADAPTIVE_SKIP, rw));

  /**
   * GstLlmDraft:draft-ahead:
   *
   * Method model: when the drafter drafts on while llmspecverify checks
   * its proposal (pipelined drafting), so that a confirmed guess finds the
   * next proposal ready: `auto` when a queue (any thread boundary) sits
   * between llmdraft and llmspecverify, `on`, or `off`. The output does not
   * change. Read for every prompt.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_DRAFT_AHEAD,
      g_param_spec_enum ("draft-ahead", "Draft ahead",
          "Draft the next proposal while the verifier checks this one (method model): auto "
          "(behind a queue), on or off", GST_TYPE_LLM_DRAFT_AHEAD, DEFAULT_DRAFT_AHEAD,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM draft",
      "Filter/Converter/Text",
      "Attaches a drafter to llmprefill's sessions, whose proposals llmspecverify checks",
      "gst-llm developers");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_llm_draft_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_llm_draft_stop);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR (gst_llm_draft_transform_caps);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_llm_draft_transform_ip);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_llm_draft_set_caps);
  trans_class->passthrough_on_same_caps = FALSE;

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_DRAFT_METHOD, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_LLM_DRAFT_AHEAD, 0);
}
