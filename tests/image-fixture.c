/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "image-fixture.h"

#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/video/video.h>

#include "llm-check.h"

guint64
llm_test_fnv1a (const guint8 *p, gsize n)
{
  guint64 h = 0xcbf29ce484222325ull;
  for (gsize i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static guint8
clamp8 (gint64 v)
{
  return (guint8) CLAMP (v, 0, 255);
}

/* @v / 65536 rounded to nearest (ties up), for the @v of yuv_to_rgb (at
 * least -2^29): shifted up first, since C leaves >> of a negative value
 * to the compiler. */
static gint64
round16 (gint64 v)
{
  return ((v + 32768 + ((gint64) 1 << 30)) >> 16) - ((gint64) 1 << 14);
}

/* JFIF: R = Y + 1.402 Cr, G = Y - 0.344136 Cb - 0.714136 Cr, B = Y +
 * 1.772 Cb, with Cb, Cr less 128; coefficients in 16.16, rounded. */
static void
yuv_to_rgb (guint8 y, guint8 u, guint8 v, guint8 *rgb)
{
  const gint64 cb = (gint64) u - 128, cr = (gint64) v - 128, yy = (gint64) y << 16;
  rgb[0] = clamp8 (round16 (yy + 91881 * cr));
  rgb[1] = clamp8 (round16 (yy - 22554 * cb - 46802 * cr));
  rgb[2] = clamp8 (round16 (yy + 116130 * cb));
}

/* The source coordinate of output pixel @o of @out along a side of @in
 * pixels, in 16.16: (o + 0.5) * in / out - 0.5, clamped to the image. */
static gint64
source_of (guint o, guint out, guint in)
{
  const gint64 s = ((2 * (gint64) o + 1) * in << 16) / (2 * (gint64) out) - 32768;
  return CLAMP (s, 0, (gint64) (in - 1) << 16);
}

static void
resize (const guint8 *src, guint w, guint h, guint side, guint8 *dst)
{
  for (guint oy = 0; oy < side; oy++) {
    const gint64 sy = source_of (oy, side, h);
    const guint y0 = (guint) (sy >> 16), y1 = MIN (y0 + 1, h - 1);
    const guint64 fy = (guint64) (sy & 0xffff);
    for (guint ox = 0; ox < side; ox++) {
      const gint64 sx = source_of (ox, side, w);
      const guint x0 = (guint) (sx >> 16), x1 = MIN (x0 + 1, w - 1);
      const guint64 fx = (guint64) (sx & 0xffff);
      for (guint c = 0; c < 3; c++) {
        const guint64 p00 = src[(y0 * w + x0) * 3 + c], p01 = src[(y0 * w + x1) * 3 + c];
        const guint64 p10 = src[(y1 * w + x0) * 3 + c], p11 = src[(y1 * w + x1) * 3 + c];
        const guint64 top = p00 * (65536 - fx) + p01 * fx;
        const guint64 bottom = p10 * (65536 - fx) + p11 * fx;
        dst[(oy * side + ox) * 3 + c] =
            (guint8) ((top * (65536 - fy) + bottom * fy + (1ull << 31)) >> 32);
      }
    }
  }
}

guint8 *
llm_test_image_rgb (const char *name, guint side, GError **error)
{
  gst_init (NULL, NULL);
  g_autofree char *rel = g_build_filename ("media", name, NULL);
  g_autofree char *path = llm_test_data_path (rel);
  g_autofree char *uri_path = g_strescape (path, NULL);
  g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" ! jpegdec ! "
      "video/x-raw,format=I420 ! appsink name=sink", uri_path);
  GstElement *pipe = gst_parse_launch (desc, error);
  if (pipe == NULL)
    return NULL;
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipe), "sink");
  guint8 *out = NULL;
  gst_element_set_state (pipe, GST_STATE_PAUSED);
  GstSample *sample = gst_app_sink_try_pull_preroll (GST_APP_SINK (sink), 10 * GST_SECOND);
  GstVideoInfo info;
  GstVideoFrame frame;
  if (sample == NULL || !gst_video_info_from_caps (&info, gst_sample_get_caps (sample))
      || !gst_video_frame_map (&frame, &info, gst_sample_get_buffer (sample), GST_MAP_READ)) {
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_DECODE,
        "%s did not decode to an I420 frame", path);
  } else {
    const guint w = GST_VIDEO_INFO_WIDTH (&info), h = GST_VIDEO_INFO_HEIGHT (&info);
    g_autofree guint8 *rgb = g_new (guint8, (gsize) w * h * 3);
    for (guint y = 0; y < h; y++)
      for (guint x = 0; x < w; x++) {
        const guint8 *Y = GST_VIDEO_FRAME_COMP_DATA (&frame, 0);
        const guint8 *U = GST_VIDEO_FRAME_COMP_DATA (&frame, 1);
        const guint8 *V = GST_VIDEO_FRAME_COMP_DATA (&frame, 2);
        const gsize ys = GST_VIDEO_FRAME_COMP_STRIDE (&frame, 0);
        const gsize us = GST_VIDEO_FRAME_COMP_STRIDE (&frame, 1);
        const gsize vs = GST_VIDEO_FRAME_COMP_STRIDE (&frame, 2);
        yuv_to_rgb (Y[y * ys + x], U[y / 2 * us + x / 2], V[y / 2 * vs + x / 2],
            rgb + ((gsize) y * w + x) * 3);
      }
    gst_video_frame_unmap (&frame);
    out = g_new (guint8, (gsize) side * side * 3);
    resize (rgb, w, h, side, out);
  }
  if (sample != NULL)
    gst_sample_unref (sample);
  gst_element_set_state (pipe, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipe);
  return out;
}
