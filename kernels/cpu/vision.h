/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The data movement of vision encoders around their matrix products:
 * turning an RGB frame into the normalised planes a patch embedding
 * reads, and the pixel shuffle of Idefics3/SmolVLM projectors, which
 * folds each scale x scale block of patch embeddings into one wider row
 * (fewer, wider tokens for the language model). Both in llama.cpp's mtmd
 * order, so the same file gives the same embeddings. (The encoders' layer
 * norm and GELUs are ops.h's.) Pure C, no GLib. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* @rgb: @height rows of @width RGB8 pixels, @stride bytes apart. Writes
 * three planes of @width x @height floats to @planes (red, green, blue;
 * row-major), each value (u / 255 - mean[c]) / std[c] in float, the
 * operations rounded in that order as mtmd does. */
void llm_cpu_image_normalize (const uint8_t *rgb, size_t width, size_t height, size_t stride,
    const float mean[3], const float std[3], float *planes);

/* The patches of normalised @planes (three @width x @height planes) as
 * rows of 3 * @patch * @patch floats, patch (px, py) at row
 * py * (width / patch) + px, its values in the order of a patch
 * embedding's weight rows (ggml's conv kernel [patch, patch, 3, n_embd]:
 * x fastest, then y, then the channel), so one matrix product by those
 * rows is the stride-@patch convolution. @width and @height are
 * multiples of @patch. */
void llm_cpu_image_patches (const float *planes, size_t width, size_t height, size_t patch,
    float *rows);

/* Tokens llm_cpu_pixel_shuffle makes of a @width x @height patch grid:
 * the grid padded up to multiples of @scale, one token per block. */
size_t llm_cpu_pixel_shuffle_tokens (size_t width, size_t height, size_t scale);

/* @in: @width x @height patch embeddings of @n_embd floats, patch (x, y)
 * at row y * width + x. Writes llm_cpu_pixel_shuffle_tokens() rows of
 * n_embd * scale * scale floats to @out: the block at (bx, by) of the
 * grid padded with zero patches to multiples of @scale is token
 * by * ceil(width / scale) + bx, and holds its patches row by row, patch
 * (bx * scale + j, by * scale + k) at offset n_embd * (k * scale + j). */
void llm_cpu_pixel_shuffle (const float *in, size_t n_embd, size_t width, size_t height,
    size_t scale, float *out);

/* The patch (y * width + x) that llm_cpu_pixel_shuffle puts at offset
 * n_embd * @slot of token @token (slot < scale * scale), or -1 where it
 * puts zeros: the one mapping, for encoders that move the rows
 * themselves (a backend's copies). */
long llm_cpu_pixel_shuffle_source (size_t width, size_t height, size_t scale, size_t token,
    size_t slot);

#ifdef __cplusplus
}
#endif
