/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A JPEG from tests/data/media as RGB8 pixels at a tower's input size,
 * the same bytes on every machine with the same libjpeg: decoded to I420
 * by GStreamer's jpegdec (libjpeg-turbo's integer IDCT, its SIMD paths
 * bit-exact), then turned to RGB (JFIF's full-range BT.601, chroma by
 * its nearest sample) and resized bilinearly (pixel centres aligned, as
 * align_corners=False) here in integer arithmetic, so no colour
 * converter's or scaler's version can change them. The vision golden
 * tests feed these pixels to gst-llm and (normalised) to llama.cpp. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* @side x @side RGB8 pixels, rows 3 * @side bytes apart (g_free), of
 * tests/data/media/@name; NULL with @error when GStreamer or jpegdec is
 * missing or the file does not decode. Calls gst_init. */
guint8 *llm_test_image_rgb (const char *name, guint side, GError **error);

/* FNV-1a (64 bits) of @n bytes: the pixels' fingerprint in the golden
 * data. */
guint64 llm_test_fnv1a (const guint8 *p, gsize n);

G_END_DECLS
