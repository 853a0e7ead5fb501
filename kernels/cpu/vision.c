/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "vision.h"

#include <string.h>

void
llm_cpu_image_normalize (const uint8_t *rgb, size_t width, size_t height, size_t stride,
    const float mean[3], const float std[3], float *planes)
{
  const size_t plane = width * height;
  for (size_t y = 0; y < height; y++) {
    const uint8_t *row = rgb + y * stride;
    for (size_t x = 0; x < width; x++)
      for (int c = 0; c < 3; c++)
        planes[c * plane + y * width + x] = ((float) row[3 * x + c] / 255.0f - mean[c]) / std[c];
  }
}

void
llm_cpu_image_patches (const float *planes, size_t width, size_t height, size_t patch,
    float *rows)
{
  const size_t pw = width / patch, ph = height / patch, plane = width * height;
  for (size_t py = 0; py < ph; py++)
    for (size_t px = 0; px < pw; px++) {
      float *row = rows + (py * pw + px) * 3 * patch * patch;
      for (size_t c = 0; c < 3; c++)
        for (size_t ky = 0; ky < patch; ky++)
          memcpy (row + (c * patch + ky) * patch,
              planes + c * plane + (py * patch + ky) * width + px * patch,
              patch * sizeof *row);
    }
}

size_t
llm_cpu_pixel_shuffle_tokens (size_t width, size_t height, size_t scale)
{
  return ((width + scale - 1) / scale) * ((height + scale - 1) / scale);
}

long
llm_cpu_pixel_shuffle_source (size_t width, size_t height, size_t scale, size_t token,
    size_t slot)
{
  const size_t bw = (width + scale - 1) / scale;
  const size_t x = token % bw * scale + slot % scale, y = token / bw * scale + slot / scale;
  return x < width && y < height ? (long) (y * width + x) : -1;
}

void
llm_cpu_pixel_shuffle (const float *in, size_t n_embd, size_t width, size_t height,
    size_t scale, float *out)
{
  const size_t tokens = llm_cpu_pixel_shuffle_tokens (width, height, scale);
  for (size_t t = 0; t < tokens; t++)
    for (size_t slot = 0; slot < scale * scale; slot++) {
      float *dst = out + (t * scale * scale + slot) * n_embd;
      const long src = llm_cpu_pixel_shuffle_source (width, height, scale, t, slot);
      if (src >= 0)
        memcpy (dst, in + (size_t) src * n_embd, n_embd * sizeof *dst);
      else
        memset (dst, 0, n_embd * sizeof *dst);
    }
}
