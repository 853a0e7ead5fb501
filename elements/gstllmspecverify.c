/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmspecverify
 * @title: llmspecverify
 * @short_description: llmdecode that checks a drafter's proposals several tokens a forward
 *
 * llmspecverify decodes like llmdecode, from the `application/x-llm-draft`
 * buffers of llmdraft (llmprefill's state with a drafter attached), and
 * is a drop-in for it: the same properties (sampler, `max-tokens`,
 * `stop-strings`, `on-new-prompt`), stopping, timing, flushing, latency
 * and `llm-stats`. Each step it asks the drafter for up to k tokens,
 * evaluates the last sampled token and the k proposals in one forward,
 * and keeps the proposals up to the first that its own sampler does not
 * pick, then the sampler's pick after them. Decoding is bound by reading
 * the weights, so a forward of a few tokens costs little more than one,
 * and every accepted proposal is a step saved.
 *
 * The output does not change: greedy, it is llmdecode's token for token;
 * sampling, each row's token is drawn as llmdecode draws it and a
 * proposal kept where the draw is the proposal (speculative sampling's
 * rule for a certain proposal: kept with its probability), so with the
 * same seed the text is llmdecode's too, whatever was drafted.
 *
 * #GstLlmSpecVerify:budget `dynamic` (the default) chooses k each step,
 * 0 included, to make the most tokens per second: it keeps a moving
 * average of how often the proposal at each position is accepted, given
 * those before it were, and of the measured time of a step of each width
 * on this engine, and takes the k whose expected tokens (1 + the chance
 * of accepting the first, the first two, ...) over its time is largest.
 * So drafts that keep failing are soon not asked for (now and then one
 * token is, to notice when they start to succeed; prompt lookup's first
 * guess, free to make, is compared with every plain step's token). A
 * draft model also tells how sure it was of each proposal (the
 * probability its softmax gave it): the budget learns how often
 * proposals of each band of probability are accepted, and the draft
 * model then drafts on, up to #GstLlmSpecVerify:draft-max, only while
 * the chance that everything it drafted is accepted pays for one more
 * proposal, so it stops early where its confidence drops. What it learnt
 * carries over to the stream's next response. `fixed` always asks for
 * #GstLlmSpecVerify:draft-max.
 *
 * Under a window KV policy a step checks only as many tokens as plain
 * steps would add before their next eviction (an eviction cannot be
 * taken back); a step that starts on a full window evicts as a plain step
 * would and checks as many tokens as that freed, a quarter of the window.
 * So a window costs about one shortened step per eviction.
 *
 * `llm-stats` adds `draft-method`, `draft-tokens` (proposals checked),
 * `accepted-tokens`, `acceptance-rate`, `mean-accepted-length` (tokens
 * per verifying forward, the model's own pick included) and
 * `draft-length-mean` (proposals checked per step, plain steps included),
 * `draft-lengths` (an array: how many steps checked 0, 1, 2, ...
 * proposals), `acceptance-by-position` (an array: the dynamic budget's
 * estimate of the chance that the proposal at each position is accepted
 * when those before it were, as it stood at the end of the response),
 * `acceptance-by-confidence` (an array of 5: for a draft model, its
 * estimate of how often a proposal is accepted when those before it were
 * and the draft gave it a probability in [0, 0.2), [0.2, 0.4), ...
 * [0.8, 1]; the bands' middles until seen),
 * `step-us-by-width` (an array: the budget's moving average of the time
 * of a step checking 0, 1, 2, ... proposals, drafting included, in
 * microseconds; for one proposal checked only by the budget's probes,
 * the last probe's time; 0 where no such step was timed), `drafting-us`
 * (its moving average of one proposal's drafting time), and for drafting
 * ahead (#GstLlmDraft:draft-ahead) `draft-ahead` (whether the response
 * was drafted ahead), `ahead-used` (proposals that a draft
 * made during the previous step's verification began, its guess of the
 * model's next token confirmed) and `ahead-discarded` (drafts ahead that
 * a verdict refuted, or no step asked for).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m filesrc location=captions.txt ! llmtokenize model=m.gguf ! \
 *     llmprefill model=m.gguf ! llmdraft ! llmspecverify max-tokens=64 ! \
 *     llmdetokenize model=m.gguf ! fdsink
 * ]|
 *
 * Since: 0.3
 */
#include "config.h"

#include "drafter.h"
#include "gstllmdecode.h"
#include "gstllmelements.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "spec-step.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_spec_verify_debug);
#define GST_CAT_DEFAULT gst_llm_spec_verify_debug

/**
 * GstLlmSpecBudget:
 * @GST_LLM_SPEC_BUDGET_DYNAMIC: choose each step's draft length from
 *   measured acceptance and step times
 * @GST_LLM_SPEC_BUDGET_FIXED: always ask for draft-max tokens
 *
 * How llmspecverify chooses how many proposals to check.
 *
 * Since: 0.3
 */
typedef enum {
  GST_LLM_SPEC_BUDGET_DYNAMIC,
  GST_LLM_SPEC_BUDGET_FIXED,
} GstLlmSpecBudget;

#define GST_TYPE_LLM_SPEC_BUDGET (gst_llm_spec_budget_get_type ())
static GType
gst_llm_spec_budget_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_LLM_SPEC_BUDGET_DYNAMIC, "Choose each step's draft length from measured acceptance "
          "and step times", "dynamic"},
    {GST_LLM_SPEC_BUDGET_FIXED, "Always ask for draft-max tokens", "fixed"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstLlmSpecBudget", values));
  return type;
}

#define DEFAULT_BUDGET GST_LLM_SPEC_BUDGET_DYNAMIC
#define DEFAULT_DRAFT_MAX 8

enum {
  PROP_0,
  PROP_BUDGET,
  PROP_DRAFT_MAX,
};

#define GST_TYPE_LLM_SPEC_VERIFY (gst_llm_spec_verify_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmSpecVerify, gst_llm_spec_verify, GST, LLM_SPEC_VERIFY, GstLlmDecode)

struct _GstLlmSpecVerify {
  GstLlmDecode parent;

  /* properties; object lock */
  GstLlmSpecBudget budget;
  guint draft_max;

  /* task thread, for one response */
  LlmDrafter *drafter;
  LlmSpecBudget plan;
  LlmSpecStats stats;
};

G_DEFINE_TYPE (GstLlmSpecVerify, gst_llm_spec_verify, GST_TYPE_LLM_DECODE);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmspecverify, "llmspecverify", GST_RANK_NONE,
    GST_TYPE_LLM_SPEC_VERIFY, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_DRAFT_MEDIA_TYPE));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_TOKENS));

/* budget and draft-max as they are set now. */
static void
configure_budget (GstLlmSpecVerify *self)
{
  GST_OBJECT_LOCK (self);
  const gboolean fixed = self->budget == GST_LLM_SPEC_BUDGET_FIXED;
  const guint draft_max = self->draft_max;
  GST_OBJECT_UNLOCK (self);
  llm_spec_budget_configure (&self->plan, draft_max, fixed);
}

static void
gst_llm_spec_verify_begin (GstLlmDecode *base, GstBuffer *state, LlmSession *session,
    gint32 first)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (base);
  GstLlmDraftMeta *meta = gst_buffer_get_llm_draft_meta (state);

  g_clear_pointer (&self->drafter, llm_drafter_unref);
  if (meta == NULL || meta->drafter == NULL)
    GST_WARNING_OBJECT (self, "a prompt came without a drafter (no llmdraft upstream?): "
        "decoding it a token a step");
  else
    self->drafter = llm_drafter_ref (meta->drafter);
  if (self->drafter) {
    /* auto: a thread boundary between llmdraft and here is the pipeline
     * saying the two may run apart; without one, drafting ahead would only
     * take cores from the verifier's forward. */
    const gboolean ahead = meta->pushed_from != NULL
        ? meta->pushed_from != base->prompt_thread : meta->ahead;
    llm_drafter_set_ahead (self->drafter, ahead);
    GST_DEBUG_OBJECT (self, "%s drafter, drafting ahead: %s", llm_drafter_method (self->drafter),
        llm_drafter_get_ahead (self->drafter) ? "yes" : "no");
    llm_drafter_begin (self->drafter, session, first);
  }

  /* What was learnt of acceptance and step times carries over to the
   * next response of the stream; the settings may have changed. */
  configure_budget (self);
  self->stats = (LlmSpecStats) { 0 };
}

static gboolean
gst_llm_spec_verify_step (GstLlmDecode *base, GstBuffer *state, LlmSession *session,
    gint32 token, guint limit, gint32 *out, guint *n_out, GError **error)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (base);
  /* Set while playing, they apply from this step on: an endless live
   * response can stop drafting (draft-max=0) or start. */
  configure_budget (self);
  return llm_spec_step (session, self->drafter, &self->plan, token, limit, out, n_out,
      &self->stats, error);
}

/* @field: an array of @at (@plan, i) for i < @n. */
static void
set_plan_array (GstStructure *s, const char *field, const LlmSpecBudget *plan, guint n,
    double (*at) (const LlmSpecBudget *, guint))
{
  GValue array = G_VALUE_INIT;
  gst_value_array_init (&array, n);
  for (guint i = 0; i < n; i++) {
    GValue v = G_VALUE_INIT;
    g_value_init (&v, G_TYPE_DOUBLE);
    g_value_set_double (&v, at (plan, i));
    gst_value_array_append_and_take_value (&array, &v);
  }
  gst_structure_take_value (s, field, &array);
}

static void
gst_llm_spec_verify_add_stats (GstLlmDecode *base, GstStructure *s)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (base);
  const LlmSpecStats *st = &self->stats;
  gst_structure_set (s,
      "draft-method", G_TYPE_STRING, self->drafter ? llm_drafter_method (self->drafter) : "none",
      "draft-tokens", G_TYPE_UINT64, st->drafted,
      "accepted-tokens", G_TYPE_UINT64, st->accepted,
      "acceptance-rate", G_TYPE_DOUBLE,
      st->drafted > 0 ? (double) st->accepted / st->drafted : 0.0,
      "mean-accepted-length", G_TYPE_DOUBLE, st->verifications > 0
      ? (double) (st->accepted + st->verifications) / st->verifications : 0.0,
      "draft-length-mean", G_TYPE_DOUBLE,
      st->steps > 0 ? (double) st->drafted / st->steps : 0.0,
      "draft-ahead", G_TYPE_BOOLEAN, self->drafter && llm_drafter_get_ahead (self->drafter),
      "ahead-used", G_TYPE_UINT64, st->ahead_used,
      "ahead-discarded", G_TYPE_UINT64, st->ahead_discarded, NULL);

  /* Steps by proposals checked, up to the most any step checked; and
   * the planner's acceptance at each position it may ask for, as it stood
   * when the response ended. */
  const guint n_lengths = llm_spec_stats_n_lengths (st->lengths);
  GValue lengths = G_VALUE_INIT;
  gst_value_array_init (&lengths, n_lengths);
  for (guint k = 0; k < n_lengths; k++) {
    GValue v = G_VALUE_INIT;
    g_value_init (&v, G_TYPE_UINT64);
    g_value_set_uint64 (&v, st->lengths[k]);
    gst_value_array_append_and_take_value (&lengths, &v);
  }
  gst_structure_take_value (s, "draft-lengths", &lengths);
  set_plan_array (s, "acceptance-by-position", &self->plan, self->plan.draft_max,
      llm_spec_budget_acceptance);
  set_plan_array (s, "acceptance-by-confidence", &self->plan, LLM_SPEC_CONFIDENCE_BANDS,
      llm_spec_budget_acceptance_by_confidence);
  /* What the planner weighs those against: each width's step time. */
  set_plan_array (s, "step-us-by-width", &self->plan, self->plan.draft_max + 1,
      llm_spec_budget_step_us);
  gst_structure_set (s, "drafting-us", G_TYPE_DOUBLE, llm_spec_budget_draft_us (&self->plan),
      NULL);
}

static void
gst_llm_spec_verify_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_BUDGET:
      self->budget = g_value_get_enum (value);
      break;
    case PROP_DRAFT_MAX:
      self->draft_max = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_spec_verify_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_BUDGET:
      g_value_set_enum (value, self->budget);
      break;
    case PROP_DRAFT_MAX:
      g_value_set_uint (value, self->draft_max);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

/* The drafter is llmdraft's, lent with each prompt; the last one kept
 * holds the session it drafted for (layerskip) or its draft model's
 * engine, so it goes with the streaming, and with it those models' and
 * caches' memory. What the budget learnt stays. */
static GstStateChangeReturn
gst_llm_spec_verify_change_state (GstElement *element, GstStateChange transition)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (element);
  GstStateChangeReturn ret =
      GST_ELEMENT_CLASS (gst_llm_spec_verify_parent_class)->change_state (element, transition);
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY)
    g_clear_pointer (&self->drafter, llm_drafter_unref);
  return ret;
}

static void
gst_llm_spec_verify_finalize (GObject *object)
{
  GstLlmSpecVerify *self = GST_LLM_SPEC_VERIFY (object);
  g_clear_pointer (&self->drafter, llm_drafter_unref);
  G_OBJECT_CLASS (gst_llm_spec_verify_parent_class)->finalize (object);
}

static void
gst_llm_spec_verify_init (GstLlmSpecVerify *self)
{
  self->budget = DEFAULT_BUDGET;
  self->draft_max = DEFAULT_DRAFT_MAX;
  llm_spec_budget_init (&self->plan, DEFAULT_DRAFT_MAX, FALSE);
}

static void
gst_llm_spec_verify_class_init (GstLlmSpecVerifyClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstLlmDecodeClass *decode_class = GST_LLM_DECODE_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING;

  GST_DEBUG_CATEGORY_INIT (gst_llm_spec_verify_debug, "llmspecverify", 0,
      "LLM speculative verification");

  gobject_class->set_property = gst_llm_spec_verify_set_property;
  gobject_class->get_property = gst_llm_spec_verify_get_property;
  gobject_class->finalize = gst_llm_spec_verify_finalize;
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_llm_spec_verify_change_state);

  /**
   * GstLlmSpecVerify:budget:
   *
   * How many proposals a step checks: chosen from measurements
   * (`dynamic`) or always #GstLlmSpecVerify:draft-max (`fixed`). Read at
   * every step, so a change while playing applies to the response under
   * way.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_BUDGET,
      g_param_spec_enum ("budget", "Budget",
          "How many proposals a step checks: dynamic (measured) or fixed (draft-max)",
          GST_TYPE_LLM_SPEC_BUDGET, DEFAULT_BUDGET, rw));

  /**
   * GstLlmSpecVerify:draft-max:
   *
   * The most proposals one step checks; 0 decodes a token a step (as
   * llmdecode). Read at every step, so a change while playing applies to
   * the response under way.
   *
   * Since: 0.3
   */
  g_object_class_install_property (gobject_class, PROP_DRAFT_MAX,
      g_param_spec_uint ("draft-max", "Draft max",
          "Most proposals one step checks (0: none, a token a step)", 0, LLM_SPEC_BUDGET_MAX,
          DEFAULT_DRAFT_MAX, rw));

  /* Replace llmdecode's templates: the sink takes drafts. */
  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM speculative verify",
      "Filter/Converter/Text",
      "Decodes as llmdecode does, checking llmdraft's proposals several tokens a forward",
      "gst-llm developers");

  decode_class->sink_media_type = GST_LLM_DRAFT_MEDIA_TYPE;
  decode_class->begin = gst_llm_spec_verify_begin;
  decode_class->step = gst_llm_spec_verify_step;
  decode_class->add_stats = gst_llm_spec_verify_add_stats;

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_SPEC_BUDGET, 0);
}
