/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmtokencompress
 * @title: llmtokencompress
 * @short_description: fewer multimodal tokens: merges, prunes and de-duplicates embedding rows
 *
 * An image encoder turns every frame into hundreds of embedding rows, and
 * the language model's prefill pays for each. llmtokencompress sits
 * between an encoder and llmprefill and passes each
 * `application/x-llm-embeddings` buffer (one media item) on with fewer
 * rows, in the same caps (`dim`, `modality`, `projector` unchanged; F32
 * only: other caps are refused with a negotiation error that says why).
 *
 * #GstLlmTokenCompress:method is a set of flags, applied in this order:
 *
 * - `temporal` (video): a row whose cosine similarity with the row last
 *   sent at the same grid position is above #GstLlmTokenCompress:threshold
 *   is dropped. When more than #GstLlmTokenCompress:scene-threshold of the
 *   rows changed (a scene change), on the first frame, and when the row
 *   count changes, the whole frame is sent. At least one row of every
 *   frame is sent. A flush, a new stream, a segment other than the last
 *   and new caps with another `dim` start over with a whole frame. A
 *   DISCONT buffer does not: llmvisionencode's interval drops frames on
 *   purpose and its buffers come marked so.
 * - `prune`: keeps the most salient rows, by the class-token attention of
 *   the buffer's #GstLlmEmbeddingsMeta when the encoder gives one, else
 *   by each row's L2 norm.
 * - `merge` (the default): ToMe-style bipartite matching folds the most
 *   similar rows into each other as size-weighted averages.
 *
 * Temporal first, because an unchanged row is free to drop and leaves the
 * budget to the others; prune before merge, because averaging rows first
 * would blur the saliency pruning ranks by. The budget is
 * #GstLlmTokenCompress:ratio of the buffer's rows, capped at
 * #GstLlmTokenCompress:max-tokens; rows the temporal stage leaves within
 * the budget go on as they are. With both `prune` and `merge`, pruning
 * removes half of the rows over the budget and merging the rest. Rows keep
 * their order (a merged row sits where one of its rows was).
 *
 * Every output buffer has its input's PTS, duration and flags and a
 * #GstLlmEmbeddingsMeta: `sizes` (how many encoder rows each row stands
 * for after merging) and `n_rows` updated, `n_source_rows` and the grid
 * as the encoder set them. Each buffer posts an element message
 * `llm-token-compress` with `rows-in`, `rows-out` (uint), `time-us`
 * (uint64, the compression's time), `resent-all` (boolean: the temporal
 * stage sent the whole frame) and `pts`; #GstLlmTokenCompress:rows-in and
 * #GstLlmTokenCompress:rows-out count the rows since the element last
 * started.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 -m filesrc location=rows.f32 blocksize=2359296 ! \
 *     application/x-llm-embeddings,dim=1024,format=F32,modality=image ! \
 *     llmtokencompress method=prune+merge ratio=0.25 ! filesink location=fewer.f32
 * ]| Reads raw frames of 576 rows of 1024 floats (LLaVA-1.5's tower), writes
 * 144 rows a frame and prints each frame's counts.
 * |[
 * gst-launch-1.0 v4l2src ! videoconvert ! llmvisionencode mmproj=mmproj.gguf ! \
 *     llmtokencompress method=temporal+merge ratio=0.25 ! llmprefill model=m.gguf ! ...
 * ]| The intended place, once the encoder element and embeddings into
 * llmprefill are there: a quarter of the tokens of each changed frame.
 *
 * Since: 0.4
 */
#include "config.h"

#include <string.h>

#include <gst/base/gstbasetransform.h>

#include "gstllmelements.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "token-compress.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_token_compress_debug);
#define GST_CAT_DEFAULT gst_llm_token_compress_debug

#define GST_LLM_TOKEN_COMPRESS_MESSAGE "llm-token-compress"

typedef enum {
  GST_LLM_TOKEN_COMPRESS_MERGE = 1 << 0,
  GST_LLM_TOKEN_COMPRESS_PRUNE = 1 << 1,
  GST_LLM_TOKEN_COMPRESS_TEMPORAL = 1 << 2,
} GstLlmTokenCompressMethod;

/* Half the rows: ToMe and FastV report little loss on LLaVA's benchmarks
 * at 50 %, while a quarter already costs points on fine-detail tasks
 * (text in images); users who want more set it lower. */
#define DEFAULT_METHOD GST_LLM_TOKEN_COMPRESS_MERGE
#define DEFAULT_RATIO 0.5
#define DEFAULT_MAX_TOKENS 0
#define DEFAULT_THRESHOLD 0.95
#define DEFAULT_SCENE_THRESHOLD 0.5
/* A ratio of 0 would keep nothing; the property cannot exclude it from a
 * closed range, so the range starts just above. */
#define MIN_RATIO 0.001

enum {
  PROP_0,
  PROP_METHOD,
  PROP_RATIO,
  PROP_MAX_TOKENS,
  PROP_THRESHOLD,
  PROP_SCENE_THRESHOLD,
  PROP_ROWS_IN,
  PROP_ROWS_OUT,
};

#define GST_TYPE_LLM_TOKEN_COMPRESS_METHOD (gst_llm_token_compress_method_get_type ())
static GType
gst_llm_token_compress_method_get_type (void)
{
  static GType type = 0;
  /* "none" has a nick of its own, so that method=none on a gst-launch
   * line means what the property's blurb says; 0 alone was the only way. */
  static const GFlagsValue values[] = {
    {0, "Pass rows unchanged", "none"},
    {GST_LLM_TOKEN_COMPRESS_MERGE, "Fold the most similar rows into size-weighted averages "
          "(ToMe bipartite matching)", "merge"},
    {GST_LLM_TOKEN_COMPRESS_PRUNE, "Keep the most salient rows (class-token attention, "
          "else L2 norm)", "prune"},
    {GST_LLM_TOKEN_COMPRESS_TEMPORAL, "Drop rows unchanged since the last sent at the same "
          "place (video)", "temporal"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_flags_register_static ("GstLlmTokenCompressMethod", values));
  return type;
}

#define GST_TYPE_LLM_TOKEN_COMPRESS (gst_llm_token_compress_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmTokenCompress, gst_llm_token_compress, GST, LLM_TOKEN_COMPRESS,
    GstBaseTransform)

struct _GstLlmTokenCompress {
  GstBaseTransform parent;

  /* properties and counters; object lock */
  GstLlmTokenCompressMethod method;
  double ratio;
  guint max_tokens;
  double threshold;
  double scene_threshold;
  guint64 rows_in, rows_out;

  /* streaming thread */
  guint dim;                   /* of the current caps; 0 before caps */
  GstSegment segment;          /* the last one received, if have_segment */
  gboolean have_segment;
  LlmTokenTemporal *temporal;
  /* scratch, grown to the largest buffer seen, so memory stays flat */
  guint cap_rows;
  gsize cap_floats;
  float *sizes, *saliency, *merged_sizes;
  guint *keep;
  float *work, *merged;        /* cap_floats each */
};

G_DEFINE_TYPE (GstLlmTokenCompress, gst_llm_token_compress, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmtokencompress, "llmtokencompress", GST_RANK_NONE,
    GST_TYPE_LLM_TOKEN_COMPRESS, gst_llm_element_init (plugin));

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_EMBEDDINGS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_EMBEDDINGS));

static void
ensure_scratch (GstLlmTokenCompress *self, guint n_rows, guint dim)
{
  if (n_rows > self->cap_rows) {
    self->sizes = g_renew (float, self->sizes, n_rows);
    self->saliency = g_renew (float, self->saliency, n_rows);
    self->merged_sizes = g_renew (float, self->merged_sizes, n_rows);
    self->keep = g_renew (guint, self->keep, n_rows);
    self->cap_rows = n_rows;
  }
  /* the caller has checked that n_rows * dim floats are a buffer's bytes */
  gsize floats = (gsize) n_rows * dim;
  if (floats > self->cap_floats) {
    self->work = g_renew (float, self->work, floats);
    self->merged = g_renew (float, self->merged, floats);
    self->cap_floats = floats;
  }
}

static void
free_scratch (GstLlmTokenCompress *self)
{
  g_clear_pointer (&self->sizes, g_free);
  g_clear_pointer (&self->saliency, g_free);
  g_clear_pointer (&self->merged_sizes, g_free);
  g_clear_pointer (&self->keep, g_free);
  g_clear_pointer (&self->work, g_free);
  g_clear_pointer (&self->merged, g_free);
  self->cap_rows = 0;
  self->cap_floats = 0;
}

static void
reset_temporal (GstLlmTokenCompress *self, const char *why)
{
  GST_DEBUG_OBJECT (self, "%s: the next frame is sent whole", why);
  llm_token_temporal_reset (self->temporal);
}

/* Why @caps are not caps we compress, or NULL if they are. */
static const char *
caps_problem (GstCaps *caps)
{
  if (!gst_caps_is_fixed (caps))
    return "the caps are not fixed";
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  const char *format = gst_structure_get_string (s, "format");
  gint dim = 0;
  if (!gst_structure_has_name (s, GST_LLM_EMBEDDINGS_MEDIA_TYPE))
    return "they are not " GST_LLM_EMBEDDINGS_MEDIA_TYPE;
  if (format == NULL || strcmp (format, "F32") != 0)
    return "only format=F32 rows are compressed; convert F16 rows to F32 upstream";
  if (!gst_structure_get_int (s, "dim", &dim) || dim <= 0)
    return "they carry no positive dim (floats per row)";
  if (gst_structure_get_string (s, "modality") == NULL)
    return "they carry no modality";
  return NULL;
}

/* Our sink template takes F32 only, but an accept-caps refusal would
 * reach the user as a bare "not-negotiated" from upstream. Accepting any
 * embedding caps here lets the CAPS event reach sink_event, which refuses
 * them with an error saying what is wrong. */
static gboolean
gst_llm_token_compress_accept_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps)
{
  if (direction == GST_PAD_SINK && gst_caps_get_size (caps) > 0 && !gst_caps_is_any (caps)
      && gst_structure_has_name (gst_caps_get_structure (caps, 0),
          GST_LLM_EMBEDDINGS_MEDIA_TYPE))
    return TRUE;
  return GST_BASE_TRANSFORM_CLASS (gst_llm_token_compress_parent_class)->accept_caps (trans,
      direction, caps);
}

/* Rows change in number, not in kind: the caps on both sides are the
 * same (the pad templates narrow them to F32). */
static GstCaps *
gst_llm_token_compress_transform_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, GstCaps *filter)
{
  if (filter)
    return gst_caps_intersect_full (filter, caps, GST_CAPS_INTERSECT_FIRST);
  return gst_caps_ref (caps);
}

static gboolean
gst_llm_token_compress_set_caps (GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (trans);
  guint dim = 0;

  /* sink_event refused anything else before it got here */
  if (!gst_llm_caps_parse_embeddings (incaps, &dim, NULL, NULL))
    return FALSE;
  if (dim != self->dim) {
    if (self->dim != 0)
      reset_temporal (self, "dim changed");
    self->dim = dim;
  }
  GST_DEBUG_OBJECT (self, "rows of %u floats", dim);
  return TRUE;
}

static gboolean
gst_llm_token_compress_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:{
      GstCaps *caps;
      gst_event_parse_caps (event, &caps);
      const char *problem = caps_problem (caps);
      if (problem != NULL) {
        GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
            ("Cannot compress these embeddings: %s.", problem),
            ("got %" GST_PTR_FORMAT "; llmtokencompress takes " GST_LLM_CAPS_EMBEDDINGS
                ", dim=(int)N, modality=(string)M", caps));
        gst_event_unref (event);
        return FALSE;
      }
      break;
    }
    case GST_EVENT_FLUSH_STOP:
      reset_temporal (self, "flush");
      break;
    case GST_EVENT_STREAM_START:
      reset_temporal (self, "new stream");
      break;
    case GST_EVENT_SEGMENT:{
      /* Upstream may send the segment it sent before again (after a
       * flush, with new caps); only another timeline makes the old frame
       * not the one before this. */
      const GstSegment *segment;
      gst_event_parse_segment (event, &segment);
      if (!self->have_segment || !gst_segment_is_equal (segment, &self->segment))
        reset_temporal (self, "new segment");
      gst_segment_copy_into (segment, &self->segment);
      self->have_segment = TRUE;
      break;
    }
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (gst_llm_token_compress_parent_class)->sink_event (trans,
      event);
}

typedef struct {
  GstLlmTokenCompressMethod method;
  double ratio, threshold, scene_threshold;
  guint max_tokens;
} Settings;

static Settings
read_settings (GstLlmTokenCompress *self)
{
  Settings s;
  GST_OBJECT_LOCK (self);
  s.method = self->method;
  s.ratio = self->ratio;
  s.max_tokens = self->max_tokens;
  s.threshold = self->threshold;
  s.scene_threshold = self->scene_threshold;
  GST_OBJECT_UNLOCK (self);
  return s;
}

/* Moves the kept rows of @rows, and the matching entries of the per-row
 * arrays, to the front. */
static gboolean
compact (GstLlmTokenCompress *self, float *rows, guint n, guint n_keep, gboolean saliency,
    GError **error)
{
  return llm_token_rows_compact (rows, n, self->dim, self->keep, n_keep, error)
      && llm_token_rows_compact (self->sizes, n, 1, self->keep, n_keep, error)
      && (!saliency || llm_token_rows_compact (self->saliency, n, 1, self->keep, n_keep, error));
}

/* Runs the stages on the @n_in rows at @rows, in place; returns the rows
 * left in *@n_out, and whether self->saliency still holds theirs. */
static gboolean
compress_rows (GstLlmTokenCompress *self, const Settings *set, float *rows, guint n_in,
    gboolean *saliency, gboolean *resent_all, guint *n_out, GError **error)
{
  guint n = n_in, n_keep = 0;
  guint target = llm_token_compress_target (n_in, set->ratio, set->max_tokens);

  if (set->method & GST_LLM_TOKEN_COMPRESS_TEMPORAL) {
    if (!llm_token_temporal_select (self->temporal, rows, n, self->dim, set->threshold,
            set->scene_threshold, self->keep, &n_keep, resent_all, error)
        || !compact (self, rows, n, n_keep, *saliency, error))
      return FALSE;
    n = n_keep;
  }
  if ((set->method & GST_LLM_TOKEN_COMPRESS_PRUNE) && n > target) {
    guint k = (set->method & GST_LLM_TOKEN_COMPRESS_MERGE) ? target + (n - target) / 2 : target;
    if (!llm_token_prune (rows, n, self->dim, *saliency ? self->saliency : NULL, k, self->keep,
            &n_keep, error)
        || !compact (self, rows, n, n_keep, *saliency, error))
      return FALSE;
    n = n_keep;
  }
  if ((set->method & GST_LLM_TOKEN_COMPRESS_MERGE) && n > target) {
    guint n_merged = 0;
    if (!llm_token_merge (rows, n, self->dim, self->sizes, target, self->merged,
            self->merged_sizes, NULL, &n_merged, error))
      return FALSE;
    memcpy (rows, self->merged, (gsize) n_merged * self->dim * sizeof (float));
    memcpy (self->sizes, self->merged_sizes, n_merged * sizeof (float));
    /* a merged row has no one class-token attention */
    if (n_merged < n)
      *saliency = FALSE;
    n = n_merged;
  }
  *n_out = n;
  return TRUE;
}

/* The embeddings meta of @in if it describes @n_rows rows; a meta for
 * another count (an element between the encoder and us changed the rows
 * without saying) is ignored, arrays and all. */
static const GstLlmEmbeddingsMeta *
input_meta (GstLlmTokenCompress *self, GstBuffer *in, guint n_rows)
{
  const GstLlmEmbeddingsMeta *m = gst_buffer_get_llm_embeddings_meta (in);
  if (m != NULL && m->n_rows != n_rows) {
    GST_WARNING_OBJECT (self, "the embeddings meta describes %u rows, the buffer holds %u; "
        "its sizes and saliency are ignored", m->n_rows, n_rows);
    return NULL;
  }
  return m;
}

static void
update_meta (GstLlmTokenCompress *self, GstBuffer *out, gboolean stale, guint n_in,
    guint n_out, gboolean saliency)
{
  GstLlmEmbeddingsMeta *m = gst_buffer_get_llm_embeddings_meta (out);

  if (m == NULL)
    m = gst_buffer_add_llm_embeddings_meta (out, n_in, 0, 0);
  else if (stale)
    gst_llm_embeddings_meta_set_sizes (m, NULL, n_in);
  gst_llm_embeddings_meta_set_sizes (m, self->sizes, n_out);
  if (saliency)
    gst_llm_embeddings_meta_set_saliency (m, self->saliency);
}

static void
post_stats (GstLlmTokenCompress *self, GstBuffer *in, guint n_in, guint n_out, gint64 us,
    gboolean resent_all)
{
  GST_OBJECT_LOCK (self);
  self->rows_in += n_in;
  self->rows_out += n_out;
  GST_OBJECT_UNLOCK (self);

  GstStructure *s = gst_structure_new (GST_LLM_TOKEN_COMPRESS_MESSAGE,
      "rows-in", G_TYPE_UINT, n_in, "rows-out", G_TYPE_UINT, n_out,
      "time-us", G_TYPE_UINT64, (guint64) MAX (us, 0),
      "resent-all", G_TYPE_BOOLEAN, resent_all,
      "pts", G_TYPE_UINT64, (guint64) GST_BUFFER_PTS (in), NULL);
  gst_element_post_message (GST_ELEMENT (self), gst_message_new_element (GST_OBJECT (self), s));
}

static GstFlowReturn
gst_llm_token_compress_generate_output (GstBaseTransform *trans, GstBuffer **outbuf)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (trans);
  GstBuffer *in = trans->queued_buf;
  GstMapInfo in_map;
  GError *error = NULL;

  *outbuf = NULL;
  if (in == NULL)
    return GST_FLOW_OK;
  trans->queued_buf = NULL;

  if (self->dim == 0) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Received embeddings before their caps."),
        ("the rows' dim comes from the caps; the upstream element sent none"));
    gst_buffer_unref (in);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  const gsize row_bytes = (gsize) self->dim * sizeof (float);
  const gsize size = gst_buffer_get_size (in);
  if (size % row_bytes != 0 || size / row_bytes > G_MAXUINT) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT, ("Received an embedding buffer that is not a "
            "whole number of rows."),
        ("%" G_GSIZE_FORMAT " bytes; rows of dim=%u are %" G_GSIZE_FORMAT " bytes "
            "(F32) each", size, self->dim, row_bytes));
    gst_buffer_unref (in);
    return GST_FLOW_ERROR;
  }
  const guint n_in = (guint) (size / row_bytes);
  const Settings set = read_settings (self);
  const gint64 start = g_get_monotonic_time ();

  if (n_in == 0) {
    post_stats (self, in, 0, 0, g_get_monotonic_time () - start, FALSE);
    *outbuf = in;
    return GST_FLOW_OK;
  }

  const GstLlmEmbeddingsMeta *meta = input_meta (self, in, n_in);
  gboolean stale = meta == NULL && gst_buffer_get_llm_embeddings_meta (in) != NULL;
  gboolean saliency = meta != NULL && meta->saliency != NULL;
  ensure_scratch (self, n_in, self->dim);
  for (guint i = 0; i < n_in; i++)
    self->sizes[i] = meta && meta->sizes ? meta->sizes[i] : 1.f;
  if (saliency)
    memcpy (self->saliency, meta->saliency, n_in * sizeof (float));

  /* The stages work in place on a copy: a mapped input need not be
   * aligned for floats, and an output made at its final size keeps a
   * queue downstream from holding the rows that were dropped. */
  if (!gst_buffer_map (in, &in_map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot read an embedding buffer."), (NULL));
    gst_buffer_unref (in);
    return GST_FLOW_ERROR;
  }
  memcpy (self->work, in_map.data, size);
  gst_buffer_unmap (in, &in_map);

  guint n_out = 0;
  gboolean resent_all = FALSE;
  if (!compress_rows (self, &set, self->work, n_in, &saliency, &resent_all, &n_out, &error)) {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT, ("Cannot compress an embedding buffer of %u rows.",
            n_in), ("%s", error->message));
    g_error_free (error);
    gst_buffer_unref (in);
    return GST_FLOW_ERROR;
  }
  GstBuffer *out = gst_llm_embeddings_buffer_new (self->work, n_out, self->dim);
  gst_buffer_copy_into (out, in, GST_BUFFER_COPY_FLAGS | GST_BUFFER_COPY_TIMESTAMPS
      | GST_BUFFER_COPY_META, 0, -1);
  update_meta (self, out, stale, n_in, n_out, saliency);

  GST_LOG_OBJECT (self, "%u rows -> %u%s", n_in, n_out, resent_all ? " (whole frame)" : "");
  post_stats (self, in, n_in, n_out, g_get_monotonic_time () - start, resent_all);
  gst_buffer_unref (in);
  *outbuf = out;
  return GST_FLOW_OK;
}

static gboolean
gst_llm_token_compress_start (GstBaseTransform *trans)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (trans);

  reset_temporal (self, "start");
  GST_OBJECT_LOCK (self);
  self->rows_in = self->rows_out = 0;
  GST_OBJECT_UNLOCK (self);
  return TRUE;
}

static gboolean
gst_llm_token_compress_stop (GstBaseTransform *trans)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (trans);

  /* the counters stay readable after the stream ends; the scratch goes */
  reset_temporal (self, "stop");
  free_scratch (self);
  self->dim = 0;
  self->have_segment = FALSE;
  return TRUE;
}

static void
gst_llm_token_compress_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_METHOD:
      self->method = g_value_get_flags (value);
      break;
    case PROP_RATIO:
      self->ratio = g_value_get_double (value);
      break;
    case PROP_MAX_TOKENS:
      self->max_tokens = g_value_get_uint (value);
      break;
    case PROP_THRESHOLD:
      self->threshold = g_value_get_double (value);
      break;
    case PROP_SCENE_THRESHOLD:
      self->scene_threshold = g_value_get_double (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_token_compress_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_METHOD:
      g_value_set_flags (value, self->method);
      break;
    case PROP_RATIO:
      g_value_set_double (value, self->ratio);
      break;
    case PROP_MAX_TOKENS:
      g_value_set_uint (value, self->max_tokens);
      break;
    case PROP_THRESHOLD:
      g_value_set_double (value, self->threshold);
      break;
    case PROP_SCENE_THRESHOLD:
      g_value_set_double (value, self->scene_threshold);
      break;
    case PROP_ROWS_IN:
      g_value_set_uint64 (value, self->rows_in);
      break;
    case PROP_ROWS_OUT:
      g_value_set_uint64 (value, self->rows_out);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_token_compress_finalize (GObject *object)
{
  GstLlmTokenCompress *self = GST_LLM_TOKEN_COMPRESS (object);

  llm_token_temporal_free (self->temporal);
  free_scratch (self);
  G_OBJECT_CLASS (gst_llm_token_compress_parent_class)->finalize (object);
}

static void
gst_llm_token_compress_init (GstLlmTokenCompress *self)
{
  self->method = DEFAULT_METHOD;
  self->ratio = DEFAULT_RATIO;
  self->max_tokens = DEFAULT_MAX_TOKENS;
  self->threshold = DEFAULT_THRESHOLD;
  self->scene_threshold = DEFAULT_SCENE_THRESHOLD;
  self->temporal = llm_token_temporal_new ();
  /* BaseTransform takes a subclass without transform functions for a
   * passthrough one; ours makes buffers of fewer rows. */
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), FALSE);
  gst_base_transform_set_in_place (GST_BASE_TRANSFORM (self), FALSE);
}

static void
gst_llm_token_compress_class_init (GstLlmTokenCompressClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING;

  GST_DEBUG_CATEGORY_INIT (gst_llm_token_compress_debug, "llmtokencompress", 0,
      "LLM multimodal token compression");

  gobject_class->set_property = gst_llm_token_compress_set_property;
  gobject_class->get_property = gst_llm_token_compress_get_property;
  gobject_class->finalize = gst_llm_token_compress_finalize;

  /**
   * GstLlmTokenCompress:method:
   *
   * Which stages run, in the fixed order temporal, prune, merge, e.g.
   * `method=temporal+merge`. With no flag set rows pass unchanged (the
   * meta and the statistics are still written).
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_METHOD,
      g_param_spec_flags ("method", "Method",
          "Compression stages, applied in the order temporal, prune, merge "
          "(e.g. temporal+merge); none passes rows unchanged",
          GST_TYPE_LLM_TOKEN_COMPRESS_METHOD, DEFAULT_METHOD, rw));

  /**
   * GstLlmTokenCompress:ratio:
   *
   * The fraction of each buffer's rows that prune and merge keep (rounded
   * up, at least one row). With #GstLlmTokenCompress:max-tokens set too,
   * the smaller count wins.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_RATIO,
      g_param_spec_double ("ratio", "Ratio",
          "Fraction of each buffer's rows to keep (prune, merge); with max-tokens, "
          "the smaller count wins",
          MIN_RATIO, 1.0, DEFAULT_RATIO, rw));

  /**
   * GstLlmTokenCompress:max-tokens:
   *
   * The most rows prune and merge leave in a buffer; 0: no limit but
   * #GstLlmTokenCompress:ratio.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_MAX_TOKENS,
      g_param_spec_uint ("max-tokens", "Maximum tokens",
          "The most rows per buffer after prune and merge (0: only ratio limits)",
          0, G_MAXUINT, DEFAULT_MAX_TOKENS, rw));

  /**
   * GstLlmTokenCompress:threshold:
   *
   * The temporal stage drops a row whose cosine similarity with the row
   * last sent at its place is above this.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_THRESHOLD,
      g_param_spec_double ("threshold", "Temporal threshold",
          "Temporal: drop a row whose cosine similarity with the row last sent at its "
          "place is above this",
          -1.0, 1.0, DEFAULT_THRESHOLD, rw));

  /**
   * GstLlmTokenCompress:scene-threshold:
   *
   * The temporal stage sends the whole frame, as a new reference, when
   * more than this fraction of its rows changed. 1 never does.
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_SCENE_THRESHOLD,
      g_param_spec_double ("scene-threshold", "Scene-change threshold",
          "Temporal: send the whole frame when more than this fraction of its rows "
          "changed (1: never)",
          0.0, 1.0, DEFAULT_SCENE_THRESHOLD, rw));

  /**
   * GstLlmTokenCompress:rows-in:
   *
   * Rows received since the element last started (READY to PAUSED).
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_ROWS_IN,
      g_param_spec_uint64 ("rows-in", "Rows in",
          "Rows received since the element started", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  /**
   * GstLlmTokenCompress:rows-out:
   *
   * Rows sent since the element last started (READY to PAUSED).
   *
   * Since: 0.4
   */
  g_object_class_install_property (gobject_class, PROP_ROWS_OUT,
      g_param_spec_uint64 ("rows-out", "Rows out",
          "Rows sent since the element started", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM token compression",
      "Filter/Converter",
      "Passes multimodal embedding rows on with fewer rows: drops rows unchanged since "
      "the last frame, keeps the most salient, merges the most similar",
      "gst-llm developers");
  gst_element_class_add_static_metadata (element_class, "example",
      "gst-launch-1.0 -m filesrc location=rows.f32 blocksize=2359296 "
      "! application/x-llm-embeddings,dim=1024,format=F32,modality=image "
      "! llmtokencompress method=prune+merge ratio=0.25 ! filesink location=fewer.f32");

  trans_class->accept_caps = GST_DEBUG_FUNCPTR (gst_llm_token_compress_accept_caps);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR (gst_llm_token_compress_transform_caps);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_llm_token_compress_set_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_llm_token_compress_sink_event);
  trans_class->generate_output = GST_DEBUG_FUNCPTR (gst_llm_token_compress_generate_output);
  trans_class->start = GST_DEBUG_FUNCPTR (gst_llm_token_compress_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_llm_token_compress_stop);

  gst_type_mark_as_plugin_api (GST_TYPE_LLM_TOKEN_COMPRESS_METHOD, 0);
}
