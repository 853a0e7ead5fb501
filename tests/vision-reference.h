/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A vision tower and projector in double, straight from the formulas, in
 * Hugging Face's order (a CLIP class row first, not an image token): what
 * the encoders' tests hold gst-llm's encoder against. Shared by the
 * mmproj, vision-golden and audio-encoder suites. */
#pragma once

#include <glib.h>

#include "mmproj.h"

G_BEGIN_DECLS

/* n_tokens x n_out values for the image_size^2 RGB8 image @rgb (rows
 * @stride bytes apart); g_free them. Products are split over the
 * machine's cores (a real-width tower is some 10^10 multiply-adds). */
double *llm_test_vision_reference (const LlmMmprojVision *v, const guint8 *rgb, gsize stride);

/* A weight (any type the file holds) as doubles, rows of the input
 * width; NULL for an absent optional one. g_free it. */
double *llm_test_ref_weights (const LlmMmprojWeight *w);
/* y = x W^T (+ b) for @n rows, in double, over the machine's cores; the
 * audio encoder's reference uses it too. */
void llm_test_ref_linear (const LlmMmprojWeight *w, const LlmMmprojWeight *b, const double *x,
    gsize n, double *y);

G_END_DECLS
