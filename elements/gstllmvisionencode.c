/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-llmvisionencode
 * @title: llmvisionencode
 * @short_description: turns video frames into image tokens for a language model
 *
 * llmvisionencode runs the vision tower and projector of an mmproj file
 * (#GstLlmVisionEncode:mmproj, llama.cpp's multimodal projector format:
 * the files llama.cpp's mtmd reads) over video frames and pushes, for each
 * frame it encodes, one `application/x-llm-embeddings` buffer: the rows the
 * language model takes for the image, each as wide as the model's
 * embeddings (caps `dim`), `modality=image`, `projector` naming the
 * projector type. llmprefill puts them into its prompt.
 *
 * It takes raw video in RGB, RGBA, BGRx, NV12, I420 and the other formats
 * of its template at any size, and converts and resizes each frame to the
 * tower's square input with FFmpeg's libswscale (Lanczos for SmolVLM's
 * idefics3 towers, bicubic for the others, as llama.cpp resizes; BT.709
 * or BT.601 as the caps' colorimetry says), so no videoconvert or
 * videoscale is needed in front of it.
 *
 * Towers that tile large images (idefics3 files with
 * clip.vision.preproc_image_size, e.g. SmolVLM's 2048) see more detail
 * with #GstLlmVisionEncode:max-tiles above 1: the frame is resized to its
 * long side (made smaller until the grid has at most max-tiles tiles),
 * then to whole tiles, cut into tiles that are encoded row by row, and
 * followed by the whole frame at the tower's size, as llama.cpp's mtmd
 * does it; llmprefill then puts each tile in its `<row_y_col_x>` place.
 * Each tile costs one more encode. The default, 1, encodes the whole frame
 * only, which is what live captioning can afford.
 *
 * #GstLlmVisionEncode:merge-ratio below 1 merges similar tokens between
 * the tower's layers (ToMe: bipartite matching, size-weighted averages),
 * so that about that fraction of the image's rows is left, and every
 * later layer runs on fewer rows: the encode itself gets cheaper, and so
 * does the prefill of the rows it sends. LLaVA-style (mlp) towers only: a
 * pixel shuffle needs the whole grid, and another tower fails the start
 * with an error saying so.
 *
 * Live video comes far faster than a CPU encodes it: with
 * #GstLlmVisionEncode:interval it encodes one frame per interval of stream
 * time and drops the frames in between, and each output buffer lasts
 * until the next frame is due, the interval after the last one was (the
 * time the caption of that frame stands for; shorter for a frame that
 * came after its due time, so captions never overlap). When
 * upstream is live and a frame arrives more than an interval behind the
 * pipeline clock (the encoder fell behind), it is dropped too, so the
 * captions keep up with the video instead of drifting behind it; the
 * `skipped-late` count says how often that happened. Frames of a file are
 * never dropped for being late by this check; QoS events from a
 * synchronised sink downstream drop frames that would be late there too.
 *
 * A missing file, a file that is not an mmproj or one of a projector type
 * this build does not read fails the change to READY with an error that
 * names the file and the problem when the element starts (READY to
 * PAUSED). The tower runs on the CPU
 * (#GstLlmVisionEncode:device `cpu`).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=clip.mp4 ! decodebin ! \
 *     llmvisionencode mmproj=mmproj-SmolVLM-256M.gguf interval=2 ! \
 *     llmprefill model=SmolVLM-256M.gguf prompt="Describe this frame." ! \
 *     llmdecode max-tokens=32 ! llmdetokenize model=SmolVLM-256M.gguf mode=caption ! \
 *     webvttenc ! filesink location=clip.vtt
 * ]| Writes one caption every two seconds of clip.mp4 to clip.vtt.
 *
 * Since: 0.4
 */
#include "config.h"

#include <string.h>

#include <gst/base/gstbasetransform.h>
#include <gst/video/video.h>
#include <libswscale/swscale.h>

#include "gstllmelements.h"
#include "gstllmlatency.h"
#include "gstllmmmproj.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "mmproj.h"
#include "vision-encoder.h"

GST_DEBUG_CATEGORY_STATIC (gst_llm_vision_encode_debug);
#define GST_CAT_DEFAULT gst_llm_vision_encode_debug

#define GST_TYPE_LLM_VISION_ENCODE (gst_llm_vision_encode_get_type ())
G_DECLARE_FINAL_TYPE (GstLlmVisionEncode, gst_llm_vision_encode, GST, LLM_VISION_ENCODE,
    GstBaseTransform)

#define DEFAULT_DEVICE "cpu"
#define DEFAULT_INTERVAL 0.0
#define DEFAULT_MAX_TILES 1

struct _GstLlmVisionEncode {
  GstBaseTransform parent;

  /* properties */
  char *mmproj_path;
  char *device;
  gdouble interval;
  guint max_tiles;
  gint n_threads;
  gdouble merge_ratio;

  LlmMmproj *mmproj;          /* from start to stop */
  const LlmMmprojVision *vision;
  LlmVisionEncoder *encoder;  /* weights prepared for the backend once */

  /* from set_caps */
  GstVideoInfo in_info;
  struct SwsContext *sws;     /* the frame to the whole image, or to the tiles */
  struct SwsContext *sws_overview;  /* tiled: the tiles' image to the whole image */
  guint8 *rgb;                /* image_size^2 RGB8: the whole image */
  guint8 *tiled;              /* tiles_x x tiles_y tiles of RGB8, or NULL */
  guint tiles_x, tiles_y;     /* 0 x 0 when the frame is not tiled */
  guint8 *copy;               /* the frame's visible bytes, rows padded with zeros */
  gsize copy_size;
  gboolean live;
  GstClockTime media_duration;  /* of the stream, when upstream knows it */

  /* streaming thread */
  GstClockTime next_due;      /* stream time of the next frame to encode */
  guint64 encoded, skipped_interval, skipped_late;
  GstLlmLatency latency;      /* of an encode; object lock */
};

G_DEFINE_TYPE (GstLlmVisionEncode, gst_llm_vision_encode, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (llmvisionencode, "llmvisionencode", GST_RANK_NONE,
    GST_TYPE_LLM_VISION_ENCODE, gst_llm_element_init (plugin));

enum {
  PROP_0,
  PROP_MMPROJ,
  PROP_DEVICE,
  PROP_INTERVAL,
  PROP_MAX_TILES,
  PROP_N_THREADS,
  PROP_MERGE_RATIO,
  PROP_ENCODED,
  PROP_SKIPPED_LATE,
};

#define VIDEO_FORMATS "{ RGB, BGR, RGBA, BGRA, RGBx, BGRx, xRGB, xBGR, ARGB, ABGR, NV12, " \
  "NV21, I420, YV12, Y42B, Y444, YUY2, UYVY, GRAY8 }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_VIDEO_CAPS_MAKE (VIDEO_FORMATS)));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (GST_LLM_CAPS_EMBEDDINGS));

static enum AVPixelFormat
av_format (GstVideoFormat f)
{
  switch (f) {
    case GST_VIDEO_FORMAT_RGB: return AV_PIX_FMT_RGB24;
    case GST_VIDEO_FORMAT_BGR: return AV_PIX_FMT_BGR24;
    case GST_VIDEO_FORMAT_RGBA: return AV_PIX_FMT_RGBA;
    case GST_VIDEO_FORMAT_BGRA: return AV_PIX_FMT_BGRA;
    case GST_VIDEO_FORMAT_ARGB: return AV_PIX_FMT_ARGB;
    case GST_VIDEO_FORMAT_ABGR: return AV_PIX_FMT_ABGR;
    case GST_VIDEO_FORMAT_RGBx: return AV_PIX_FMT_RGB0;
    case GST_VIDEO_FORMAT_BGRx: return AV_PIX_FMT_BGR0;
    case GST_VIDEO_FORMAT_xRGB: return AV_PIX_FMT_0RGB;
    case GST_VIDEO_FORMAT_xBGR: return AV_PIX_FMT_0BGR;
    case GST_VIDEO_FORMAT_NV12: return AV_PIX_FMT_NV12;
    case GST_VIDEO_FORMAT_NV21: return AV_PIX_FMT_NV21;
    case GST_VIDEO_FORMAT_I420: return AV_PIX_FMT_YUV420P;
    case GST_VIDEO_FORMAT_YV12: return AV_PIX_FMT_YUV420P;   /* planes swapped below */
    case GST_VIDEO_FORMAT_Y42B: return AV_PIX_FMT_YUV422P;
    case GST_VIDEO_FORMAT_Y444: return AV_PIX_FMT_YUV444P;
    case GST_VIDEO_FORMAT_YUY2: return AV_PIX_FMT_YUYV422;
    case GST_VIDEO_FORMAT_UYVY: return AV_PIX_FMT_UYVY422;
    case GST_VIDEO_FORMAT_GRAY8: return AV_PIX_FMT_GRAY8;
    default: return AV_PIX_FMT_NONE;
  }
}

static gboolean
gst_llm_vision_encode_start (GstBaseTransform *trans)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  if (g_strcmp0 (self->device, "cpu") != 0) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("Device \"%s\" is not available for llmvisionencode.", self->device),
        ("The vision encoder runs on: cpu. Set device=cpu."));
    return FALSE;
  }
  self->mmproj = GST_LLM_LOAD_MMPROJ (self, self->mmproj_path, LLM_MMPROJ_TOWER_VISION);
  if (self->mmproj == NULL)
    return FALSE;
  self->vision = llm_mmproj_vision (self->mmproj);
  GST_OBJECT_LOCK (self);
  const int n_threads = self->n_threads;
  const double merge_ratio = self->merge_ratio;
  GST_OBJECT_UNLOCK (self);
  GError *error = NULL;
  self->encoder = llm_vision_encoder_new (self->mmproj, n_threads, &error);
  if (self->encoder && !llm_vision_encoder_set_merge (self->encoder, merge_ratio, &error))
    g_clear_pointer (&self->encoder, llm_vision_encoder_free);
  if (self->encoder == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Cannot run the vision tower of \"%s\": %s.",
            self->mmproj_path, error->message), (NULL));
    g_error_free (error);
    g_clear_pointer (&self->mmproj, llm_mmproj_free);
    return FALSE;
  }
  const gsize side = self->vision->image_size;
  self->rgb = g_try_malloc (side * side * 3);
  if (self->rgb == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT, ("Out of memory."),
        ("no memory for a %" G_GSIZE_FORMAT "x%" G_GSIZE_FORMAT " image", side, side));
    g_clear_pointer (&self->mmproj, llm_mmproj_free);
    return FALSE;
  }
  self->next_due = GST_CLOCK_TIME_NONE;
  GST_OBJECT_LOCK (self);
  self->encoded = self->skipped_interval = self->skipped_late = 0;
  GST_OBJECT_UNLOCK (self);
  GST_INFO_OBJECT (self, "%s: %s tower, %u tokens of %u per image", self->mmproj_path,
      llm_mmproj_type_name (self->vision->type), llm_vision_encoder_n_tokens (self->encoder),
      self->vision->n_out);
  return TRUE;
}

static gboolean
gst_llm_vision_encode_stop (GstBaseTransform *trans)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  g_clear_pointer (&self->sws, sws_freeContext);
  g_clear_pointer (&self->sws_overview, sws_freeContext);
  g_clear_pointer (&self->rgb, g_free);
  g_clear_pointer (&self->tiled, g_free);
  g_clear_pointer (&self->copy, g_free);
  self->copy_size = 0;
  self->tiles_x = self->tiles_y = 0;
  g_clear_pointer (&self->encoder, llm_vision_encoder_free);
  g_clear_pointer (&self->mmproj, llm_mmproj_free);
  self->vision = NULL;
  gst_llm_latency_reset (GST_ELEMENT (self), &self->latency);
  return TRUE;
}

/* A frame's rows leave one encode after it came: the slowest of the recent ones. */
static gboolean
gst_llm_vision_encode_query (GstBaseTransform *trans, GstPadDirection direction,
    GstQuery *query)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  if (direction == GST_PAD_SRC && GST_QUERY_TYPE (query) == GST_QUERY_LATENCY)
    return gst_llm_latency_answer (GST_ELEMENT (self), &self->latency,
        GST_BASE_TRANSFORM_SINK_PAD (trans), query);
  return GST_BASE_TRANSFORM_CLASS (gst_llm_vision_encode_parent_class)->query (trans,
      direction, query);
}

static GstCaps *
src_caps (GstLlmVisionEncode *self)
{
  if (self->vision == NULL)
    return gst_static_pad_template_get_caps (&src_template);
  return gst_llm_caps_new_embeddings (self->vision->n_out, GST_LLM_MODALITY_IMAGE,
      llm_mmproj_type_name (self->vision->type));
}

static GstCaps *
gst_llm_vision_encode_transform_caps (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, GstCaps *filter)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  GstCaps *out = direction == GST_PAD_SINK ? src_caps (self)
      : gst_static_pad_template_get_caps (&sink_template);
  if (filter) {
    GstCaps *narrowed = gst_caps_intersect_full (filter, out, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref (out);
    out = narrowed;
  }
  return out;
}

/* Whether upstream is live: only then is a frame that arrives late
 * dropped rather than encoded. */
static gboolean
upstream_is_live (GstLlmVisionEncode *self)
{
  GstQuery *q = gst_query_new_latency ();
  gboolean live = FALSE;
  if (gst_pad_peer_query (GST_BASE_TRANSFORM_SINK_PAD (self), q))
    gst_query_parse_latency (q, &live, NULL, NULL);
  gst_query_unref (q);
  return live;
}

/* The tile grid for @w x @h frames, as llama.cpp's mtmd cuts idefics3
 * images: the long side resized to the file's longest edge (an even
 * short side), then both sides up to whole tiles; the edge shrinks by a
 * tile until the grid has at most max-tiles tiles. 0 x 0: no tiles. */
static void
plan_tiles (GstLlmVisionEncode *self, int w, int h)
{
  const LlmMmprojVision *v = self->vision;
  GST_OBJECT_LOCK (self);
  const guint max_tiles = self->max_tiles;
  GST_OBJECT_UNLOCK (self);
  self->tiles_x = self->tiles_y = 0;
  if (v->type != LLM_MMPROJ_IDEFICS3 || v->longest_edge == 0 || max_tiles == 1)
    return;
  const guint tile = v->image_size;
  for (guint edge = v->longest_edge; edge >= tile; edge -= tile) {
    guint rw, rh;
    if (w >= h) {
      rw = edge;
      rh = (guint) ((double) edge * h / w);
      rh += rh % 2;
    } else {
      rh = edge;
      rw = (guint) ((double) edge * w / h);
      rw += rw % 2;
    }
    const guint gx = (MAX (rw, 1) + tile - 1) / tile, gy = (MAX (rh, 1) + tile - 1) / tile;
    if (max_tiles == 0 || gx * gy <= max_tiles) {
      self->tiles_x = gx;
      self->tiles_y = gy;
      return;
    }
  }
}

static guint
n_images (GstLlmVisionEncode *self)
{
  return self->tiles_x * self->tiles_y + 1;
}

static gboolean
gst_llm_vision_encode_set_caps (GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  if (!gst_video_info_from_caps (&self->in_info, incaps))
    return FALSE;
  const enum AVPixelFormat fmt = av_format (GST_VIDEO_INFO_FORMAT (&self->in_info));
  const int side = (int) self->vision->image_size;
  const int w = GST_VIDEO_INFO_WIDTH (&self->in_info), h = GST_VIDEO_INFO_HEIGHT (&self->in_info);
  plan_tiles (self, w, h);
  const int out_w = self->tiles_x ? (int) self->tiles_x * side : side;
  const int out_h = self->tiles_y ? (int) self->tiles_y * side : side;
  /* llama.cpp resizes SmolVLM's images with Lanczos, the others bicubic. */
  const int filter = (self->vision->type == LLM_MMPROJ_IDEFICS3 ? SWS_LANCZOS : SWS_BICUBIC)
      | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT;
  g_clear_pointer (&self->sws, sws_freeContext);
  g_clear_pointer (&self->sws_overview, sws_freeContext);
  g_clear_pointer (&self->tiled, g_free);
  self->sws = sws_getContext (w, h, fmt, out_w, out_h, AV_PIX_FMT_RGB24, filter, NULL, NULL,
      NULL);
  if (self->tiles_x) {
    self->sws_overview = sws_getContext (out_w, out_h, AV_PIX_FMT_RGB24, side, side,
        AV_PIX_FMT_RGB24, filter, NULL, NULL, NULL);
    /* swscale reads its source a vector at a time, past the last pixel. */
    self->tiled = g_try_malloc0 ((gsize) out_w * out_h * 3 + 64);
  }
  if (self->sws == NULL || (self->tiles_x && (self->sws_overview == NULL
              || self->tiled == NULL))) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Cannot convert this video."),
        ("libswscale refused %s %dx%d to RGB %dx%d",
            gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&self->in_info)), w, h,
            out_w, out_h));
    return FALSE;
  }
  /* YUV input: the matrix and range the caps say, or swscale assumes
   * limited-range BT.601 and HD video comes out slightly off colour. */
  if (GST_VIDEO_INFO_IS_YUV (&self->in_info)) {
    const GstVideoColorimetry *c = &GST_VIDEO_INFO_COLORIMETRY (&self->in_info);
    int cs = SWS_CS_ITU601;
    if (c->matrix == GST_VIDEO_COLOR_MATRIX_BT709)
      cs = SWS_CS_ITU709;
    else if (c->matrix == GST_VIDEO_COLOR_MATRIX_BT2020)
      cs = SWS_CS_BT2020;
    const int full = c->range == GST_VIDEO_COLOR_RANGE_0_255;
    sws_setColorspaceDetails (self->sws, sws_getCoefficients (cs), full,
        sws_getCoefficients (SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
  }
  GST_INFO_OBJECT (self, "%dx%d frames: %u x %u tiles and the whole image", w, h,
      self->tiles_x, self->tiles_y);
  self->live = upstream_is_live (self);
  gint64 d = -1;
  self->media_duration = GST_CLOCK_TIME_NONE;
  if (gst_pad_peer_query_duration (GST_BASE_TRANSFORM_SINK_PAD (self), GST_FORMAT_TIME, &d)
      && d > 0)
    self->media_duration = (GstClockTime) d;
  GST_DEBUG_OBJECT (self, "%" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT " (live %d)", incaps,
      outcaps, self->live);
  return TRUE;
}

static gboolean
gst_llm_vision_encode_transform_size (GstBaseTransform *trans, GstPadDirection direction,
    GstCaps *caps, gsize size, GstCaps *othercaps, gsize *othersize)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  if (direction != GST_PAD_SINK || self->vision == NULL)
    return FALSE;
  *othersize = (gsize) n_images (self) * llm_vision_encoder_n_tokens (self->encoder)
      * self->vision->n_out
      * sizeof (float);
  return TRUE;
}

static gboolean
gst_llm_vision_encode_sink_event (GstBaseTransform *trans, GstEvent *event)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP
      || GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT)
    self->next_due = GST_CLOCK_TIME_NONE;
  return GST_BASE_TRANSFORM_CLASS (gst_llm_vision_encode_parent_class)->sink_event (trans,
      event);
}

/* Whether a live frame at @pts comes more than an interval (or a second)
 * after its time on the pipeline clock. */
static gboolean
frame_is_late (GstLlmVisionEncode *self, GstClockTime pts)
{
  if (!self->live)
    return FALSE;
  GstClock *clock = gst_element_get_clock (GST_ELEMENT (self));
  if (clock == NULL)
    return FALSE;
  const GstClockTime now = gst_clock_get_time (clock);
  gst_object_unref (clock);
  const GstClockTime base = gst_element_get_base_time (GST_ELEMENT (self));
  const GstClockTime rt = gst_segment_to_running_time (&GST_BASE_TRANSFORM (self)->segment,
      GST_FORMAT_TIME, pts);
  if (!GST_CLOCK_TIME_IS_VALID (rt) || now < base)
    return FALSE;
  const GstClockTime slack = self->interval > 0 ? (GstClockTime) (self->interval * GST_SECOND)
      : GST_SECOND;
  return now - base > rt + slack;
}

/* swscale reads its source a vector at a time, past the last pixel of a
 * row and of the frame: upstream's padding (never written by a decoder)
 * or past the end of a buffer of the exact size. The visible bytes of
 * each row go to a copy whose rows are padded with zeros, so what it
 * reads is there and defined. One copy of the frames it encodes; the
 * encode costs thousands of times more. */
static gboolean
copy_planes (GstLlmVisionEncode *self, GstVideoFrame *frame, const guint8 **planes,
    int *strides)
{
  const guint n_planes = GST_VIDEO_FRAME_N_PLANES (frame);
  gsize row_bytes[GST_VIDEO_MAX_PLANES] = { 0 }, offsets[GST_VIDEO_MAX_PLANES], total = 0;
  guint heights[GST_VIDEO_MAX_PLANES] = { 0 };
  for (guint c = 0; c < GST_VIDEO_FRAME_N_COMPONENTS (frame); c++) {
    const guint p = GST_VIDEO_FRAME_COMP_PLANE (frame, c);
    row_bytes[p] = MAX (row_bytes[p], (gsize) GST_VIDEO_FRAME_COMP_WIDTH (frame, c)
        * GST_VIDEO_FRAME_COMP_PSTRIDE (frame, c));
    heights[p] = MAX (heights[p], (guint) GST_VIDEO_FRAME_COMP_HEIGHT (frame, c));
  }
  for (guint p = 0; p < n_planes; p++) {
    strides[p] = (int) ((row_bytes[p] + 63) / 64 * 64);
    offsets[p] = total;
    total += (gsize) strides[p] * heights[p];
  }
  total += 64;
  if (total > self->copy_size) {
    g_free (self->copy);
    self->copy = g_try_malloc0 (total);
    self->copy_size = self->copy ? total : 0;
    if (self->copy == NULL)
      return FALSE;
  }
  for (guint p = 0; p < n_planes; p++) {
    const guint8 *src = GST_VIDEO_FRAME_PLANE_DATA (frame, p);
    const gsize src_stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, p);
    guint8 *dst = self->copy + offsets[p];
    for (guint y = 0; y < heights[p]; y++)
      memcpy (dst + (gsize) y * strides[p], src + y * src_stride, row_bytes[p]);
    planes[p] = dst;
  }
  return TRUE;
}

static GstFlowReturn
gst_llm_vision_encode_transform (GstBaseTransform *trans, GstBuffer *inbuf, GstBuffer *outbuf)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (trans);
  const GstClockTime pts = GST_BUFFER_PTS (inbuf);
  const GstClockTime step = self->interval > 0 ? (GstClockTime) (self->interval * GST_SECOND)
      : GST_CLOCK_TIME_NONE;

  if (GST_CLOCK_TIME_IS_VALID (step) && GST_CLOCK_TIME_IS_VALID (pts)
      && GST_CLOCK_TIME_IS_VALID (self->next_due) && pts < self->next_due) {
    self->skipped_interval++;
    return GST_BASE_TRANSFORM_FLOW_DROPPED;
  }
  if (GST_CLOCK_TIME_IS_VALID (pts) && frame_is_late (self, pts)) {
    GST_OBJECT_LOCK (self);
    self->skipped_late++;
    GST_OBJECT_UNLOCK (self);
    GST_LOG_OBJECT (self, "frame at %" GST_TIME_FORMAT " is late: dropped",
        GST_TIME_ARGS (pts));
    return GST_BASE_TRANSFORM_FLOW_DROPPED;
  }

  GstVideoFrame frame;
  if (!gst_video_frame_map (&frame, &self->in_info, inbuf, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("Cannot read a video frame."),
        ("the buffer does not hold a %s frame of the negotiated size",
            gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&self->in_info))));
    return GST_FLOW_ERROR;
  }
  const guint8 *planes[4] = { NULL };
  int strides[4] = { 0 };
  if (!copy_planes (self, &frame, planes, strides)) {
    gst_video_frame_unmap (&frame);
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT, ("Out of memory."),
        ("no memory for a copy of a %dx%d frame", GST_VIDEO_FRAME_WIDTH (&frame),
            GST_VIDEO_FRAME_HEIGHT (&frame)));
    return GST_FLOW_ERROR;
  }
  if (GST_VIDEO_FRAME_FORMAT (&frame) == GST_VIDEO_FORMAT_YV12) {
    const guint8 *p = planes[1];
    planes[1] = planes[2];
    planes[2] = p;
  }
  const int side = (int) self->vision->image_size;
  const gsize tiled_stride = (gsize) self->tiles_x * side * 3;
  guint8 *dst[4] = { self->tiles_x ? self->tiled : self->rgb, NULL, NULL, NULL };
  int dst_stride[4] = { self->tiles_x ? (int) tiled_stride : side * 3, 0, 0, 0 };
  sws_scale (self->sws, planes, strides, 0, GST_VIDEO_FRAME_HEIGHT (&frame), dst, dst_stride);
  gst_video_frame_unmap (&frame);
  if (self->tiles_x) {
    const guint8 *src[4] = { self->tiled, NULL, NULL, NULL };
    const int src_stride[4] = { (int) tiled_stride, 0, 0, 0 };
    guint8 *whole[4] = { self->rgb, NULL, NULL, NULL };
    int whole_stride[4] = { side * 3, 0, 0, 0 };
    sws_scale (self->sws_overview, src, src_stride, 0, (int) self->tiles_y * side, whole,
        whole_stride);
  }

  GstMapInfo map;
  if (!gst_buffer_map (outbuf, &map, GST_MAP_WRITE))
    return GST_FLOW_ERROR;
  GError *error = NULL;
  const gint64 t0 = g_get_monotonic_time ();
  const gsize per_image = (gsize) llm_vision_encoder_n_tokens (self->encoder)
      * self->vision->n_out;
  float *rows = (float *) map.data;
  gboolean ok = TRUE;
  /* The tiles row by row, then the whole image: the order mtmd feeds them. */
  for (guint ty = 0; ok && ty < self->tiles_y; ty++)
    for (guint tx = 0; ok && tx < self->tiles_x; tx++, rows += per_image)
      ok = llm_vision_encoder_encode (self->encoder, self->tiled + ty * side
          * tiled_stride + (gsize) tx * side * 3, tiled_stride, rows, &error);
  if (ok)
    ok = llm_vision_encoder_encode (self->encoder, self->rgb, (gsize) side * 3, rows,
        &error);
  const gint64 took = g_get_monotonic_time () - t0;
  gst_buffer_unmap (outbuf, &map);
  gst_llm_latency_note (GST_ELEMENT (self), &self->latency, took * GST_USECOND);
  if (!ok) {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT, ("Cannot encode the frame."), ("%s",
            error->message));
    g_error_free (error);
    return GST_FLOW_ERROR;
  }

  if (GST_CLOCK_TIME_IS_VALID (step) && GST_CLOCK_TIME_IS_VALID (pts))
    self->next_due = (GST_CLOCK_TIME_IS_VALID (self->next_due) ? self->next_due : pts) + step;
  /* A stream whose frames jumped ahead (a gap, a seek) does not owe the
   * missed intervals. */
  if (GST_CLOCK_TIME_IS_VALID (self->next_due) && self->next_due <= pts)
    self->next_due = pts + step;
  GST_BUFFER_PTS (outbuf) = pts;
  GST_BUFFER_DTS (outbuf) = GST_CLOCK_TIME_NONE;
  /* Until the next frame is due: a frame encoded late on the interval's
   * grid (frames that do not fall on it, dropped ones) lasts less than the
   * interval, so the captions timed by it never overlap. */
  GST_BUFFER_DURATION (outbuf) = !GST_CLOCK_TIME_IS_VALID (step) ? GST_BUFFER_DURATION (inbuf)
      : GST_CLOCK_TIME_IS_VALID (pts) ? self->next_due - pts : step;
  /* The last frame's caption ends with the media. */
  if (GST_CLOCK_TIME_IS_VALID (self->media_duration) && GST_CLOCK_TIME_IS_VALID (pts)
      && GST_BUFFER_DURATION_IS_VALID (outbuf) && pts < self->media_duration)
    GST_BUFFER_DURATION (outbuf) = MIN (GST_BUFFER_DURATION (outbuf),
        self->media_duration - pts);
  const LlmMmprojVision *v = self->vision;
  const guint grid = v->image_size / v->patch_size / MAX (v->scale_factor, 1);
  /* Merged rows lie on no grid any more. */
  const gboolean merged = llm_vision_encoder_n_tokens (self->encoder) != v->n_tokens;
  GstLlmEmbeddingsMeta *meta = gst_buffer_add_llm_embeddings_meta (outbuf,
      n_images (self) * llm_vision_encoder_n_tokens (self->encoder), merged ? 0 : grid,
      merged ? 0 : grid);
  meta->tiles_x = self->tiles_x;
  meta->tiles_y = self->tiles_y;
  GST_OBJECT_LOCK (self);
  self->encoded++;
  GST_OBJECT_UNLOCK (self);
  GST_DEBUG_OBJECT (self, "frame at %" GST_TIME_FORMAT ": %u rows in %" G_GINT64_FORMAT " us",
      GST_TIME_ARGS (pts), n_images (self) * llm_vision_encoder_n_tokens (self->encoder),
      took);
  return GST_FLOW_OK;
}

static void
gst_llm_vision_encode_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (object);
  GST_OBJECT_LOCK (self);
  /* The encoder is made from these at READY->PAUSED (start); max-tiles is
   * read with each caps. */
  if (prop_id != PROP_MAX_TILES && (pspec->flags & GST_PARAM_MUTABLE_READY))
    gst_llm_note_late_setting (GST_ELEMENT (self), pspec, GST_STATE_CHANGE_READY_TO_PAUSED);
  switch (prop_id) {
    case PROP_MMPROJ:
      g_free (self->mmproj_path);
      self->mmproj_path = g_value_dup_string (value);
      break;
    case PROP_DEVICE:
      g_free (self->device);
      self->device = g_value_dup_string (value);
      break;
    case PROP_INTERVAL:
      self->interval = g_value_get_double (value);
      break;
    case PROP_MAX_TILES:
      self->max_tiles = g_value_get_uint (value);
      break;
    case PROP_N_THREADS:
      self->n_threads = g_value_get_int (value);
      break;
    case PROP_MERGE_RATIO:
      self->merge_ratio = g_value_get_double (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_vision_encode_get_property (GObject *object, guint prop_id, GValue *value,
    GParamSpec *pspec)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (object);
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MMPROJ:
      g_value_set_string (value, self->mmproj_path);
      break;
    case PROP_DEVICE:
      g_value_set_string (value, self->device);
      break;
    case PROP_INTERVAL:
      g_value_set_double (value, self->interval);
      break;
    case PROP_MAX_TILES:
      g_value_set_uint (value, self->max_tiles);
      break;
    case PROP_N_THREADS:
      g_value_set_int (value, self->n_threads);
      break;
    case PROP_MERGE_RATIO:
      g_value_set_double (value, self->merge_ratio);
      break;
    case PROP_ENCODED:
      g_value_set_uint64 (value, self->encoded);
      break;
    case PROP_SKIPPED_LATE:
      g_value_set_uint64 (value, self->skipped_late);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_llm_vision_encode_finalize (GObject *object)
{
  GstLlmVisionEncode *self = GST_LLM_VISION_ENCODE (object);
  g_free (self->mmproj_path);
  g_free (self->device);
  G_OBJECT_CLASS (gst_llm_vision_encode_parent_class)->finalize (object);
}

static void
gst_llm_vision_encode_class_init (GstLlmVisionEncodeClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (gst_llm_vision_encode_debug, "llmvisionencode", 0,
      "LLM vision encoder");

  gobject_class->set_property = gst_llm_vision_encode_set_property;
  gobject_class->get_property = gst_llm_vision_encode_get_property;
  gobject_class->finalize = gst_llm_vision_encode_finalize;

  g_object_class_install_property (gobject_class, PROP_MMPROJ,
      g_param_spec_string ("mmproj", "Projector file",
          "Multimodal projector GGUF (llama.cpp's mmproj format) with the vision tower; "
          "read when the element goes to READY", NULL,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device",
          "Where the encoder runs (cpu); another name is an error at READY",
          DEFAULT_DEVICE,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_INTERVAL,
      g_param_spec_double ("interval", "Interval",
          "Seconds of stream time between encoded frames; the frames between are dropped "
          "(0: every frame)", 0.0, 3600.0, DEFAULT_INTERVAL,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_MAX_TILES,
      g_param_spec_uint ("max-tiles", "Maximum tiles",
          "Tiles a frame is cut into besides the whole image, for towers that tile "
          "(idefics3 with preproc_image_size): 1 encodes the whole image only, 0 as many "
          "as the file's long side gives", 0, 64, DEFAULT_MAX_TILES,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_int ("n-threads", "Threads",
          "Worker threads of the encoder (0: one per core); it shares the process's pool "
          "with the language model's engines of that count", 0, 1024, 0,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_MERGE_RATIO,
      g_param_spec_double ("merge-ratio", "Merge ratio",
          "Fraction of the image's tokens left after merging similar ones between the tower's "
          "layers (ToMe), which also cuts the tower's own compute; 1: none merged. Towers "
          "without pixel shuffle (mlp) only", 0.01, 1.0, 1.0,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_ENCODED,
      g_param_spec_uint64 ("encoded", "Encoded frames",
          "Frames encoded since the element started", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  g_object_class_install_property (gobject_class, PROP_SKIPPED_LATE,
      g_param_spec_uint64 ("skipped-late", "Frames skipped late",
          "Live frames dropped because they came more than an interval behind the clock",
          0, G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "LLM vision encoder",
      "Filter/Converter/Video",
      "Turns video frames into image tokens for a language model (mmproj vision tower)",
      "gst-llm");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_stop);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_transform_caps);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_set_caps);
  trans_class->transform_size = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_transform_size);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_sink_event);
  trans_class->transform = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_transform);
  trans_class->query = GST_DEBUG_FUNCPTR (gst_llm_vision_encode_query);
  trans_class->passthrough_on_same_caps = FALSE;
}

static void
gst_llm_vision_encode_init (GstLlmVisionEncode *self)
{
  self->device = g_strdup (DEFAULT_DEVICE);
  self->interval = DEFAULT_INTERVAL;
  self->max_tiles = DEFAULT_MAX_TILES;
  self->merge_ratio = 1.0;
  /* A sink downstream that reports lateness (QoS) makes the base class
   * drop frames that would be late anyway, before they are encoded. */
  gst_base_transform_set_qos_enabled (GST_BASE_TRANSFORM (self), TRUE);
  self->next_due = GST_CLOCK_TIME_NONE;
  self->media_duration = GST_CLOCK_TIME_NONE;
  gst_llm_latency_watch (GST_ELEMENT (self), &self->latency,
      GST_BASE_TRANSFORM_SRC_PAD (self));
}
