/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "vision.h"

#include <math.h>
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

void
llm_cpu_pixel_shuffle (const float *in, size_t n_embd, size_t width, size_t height,
    size_t scale, float *out)
{
  const size_t bw = (width + scale - 1) / scale, bh = (height + scale - 1) / scale;
  const size_t row = n_embd * scale * scale;
  for (size_t by = 0; by < bh; by++)
    for (size_t bx = 0; bx < bw; bx++) {
      float *tok = out + (by * bw + bx) * row;
      for (size_t k = 0; k < scale; k++)
        for (size_t j = 0; j < scale; j++) {
          const size_t x = bx * scale + j, y = by * scale + k;
          float *dst = tok + n_embd * (k * scale + j);
          if (x < width && y < height)
            memcpy (dst, in + (y * width + x) * n_embd, n_embd * sizeof *dst);
          else
            memset (dst, 0, n_embd * sizeof *dst);
        }
    }
}

void
llm_cpu_layernorm (const float *x, const float *w, const float *b, float *y, size_t n,
    float eps)
{
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += x[i];
  const float mean = (float) (sum / (double) n);
  double sum2 = 0.0;
  for (size_t i = 0; i < n; i++) {
    const float d = x[i] - mean;
    sum2 += (double) (d * d);
  }
  const float scale = 1.0f / sqrtf ((float) (sum2 / (double) n) + eps);
  for (size_t i = 0; i < n; i++) {
    float v = (x[i] - mean) * scale;
    if (w != NULL)
      v *= w[i];
    if (b != NULL)
      v += b[i];
    y[i] = v;
  }
}

void
llm_cpu_gelu_tanh (float *x, size_t n)
{
  /* sqrt (2 / pi) */
  const float k = 0.7978845608028654f;
  for (size_t i = 0; i < n; i++) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + tanhf (k * v * (1.0f + 0.044715f * v * v)));
  }
}

void
llm_cpu_gelu_quick (float *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    x[i] = x[i] / (1.0f + expf (-1.702f * x[i]));
}
