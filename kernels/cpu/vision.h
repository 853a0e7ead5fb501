/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The data movement of vision encoders around their matrix products:
 * turning an RGB frame into the normalised planes a patch embedding
 * reads, and the pixel shuffle of Idefics3/SmolVLM projectors, which
 * folds each scale x scale block of patch embeddings into one wider row
 * (fewer, wider tokens for the language model). Both in llama.cpp's mtmd
 * order, so the same file gives the same embeddings. Pure C, no GLib. */
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

/* Layer norm of @n floats, as ggml_norm then the weight and bias: mean
 * and variance summed in double, y = ((x - mean) * (1 / sqrt (var +
 * eps))) * w + b in float. @w and @b may be NULL (1 and 0). @y may be @x. */
void llm_cpu_layernorm (const float *x, const float *w, const float *b, float *y, size_t n,
    float eps);

/* In place over @n floats: GELU with the tanh approximation (SigLIP's
 * gelu_pytorch_tanh, ggml_gelu's formula), or CLIP's quick GELU,
 * x * sigmoid (1.702 x). */
void llm_cpu_gelu_tanh (float *x, size_t n);
void llm_cpu_gelu_quick (float *x, size_t n);

#ifdef __cplusplus
}
#endif
