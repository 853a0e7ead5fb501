/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "audio.h"

#include <math.h>
#include <string.h>

size_t
llm_cpu_conv1d_out_len (size_t n_len, size_t taps, size_t stride, size_t pad)
{
  if (stride == 0 || n_len + 2 * pad < taps)
    return 0;
  return (n_len + 2 * pad - taps) / stride + 1;
}

void
llm_cpu_conv1d_rows (const float *x, size_t n_ch, size_t n_len, size_t t_stride,
    size_t c_stride, size_t taps, size_t stride, size_t pad, size_t n_out, float *rows)
{
  llm_cpu_conv1d_rows_range (x, n_ch, n_len, t_stride, c_stride, taps, stride, pad, 0, n_out,
      rows);
}

void
llm_cpu_conv1d_rows_range (const float *x, size_t n_ch, size_t n_len, size_t t_stride,
    size_t c_stride, size_t taps, size_t stride, size_t pad, size_t o0, size_t o1,
    float *rows)
{
  for (size_t o = o0; o < o1; o++) {
    float *row = rows + o * n_ch * taps;
    for (size_t k = 0; k < taps; k++) {
      /* Frame o * stride + k - pad, kept unsigned: before 0 it wraps past
       * n_len and reads as outside too. */
      const size_t t = o * stride + k - pad;
      if (t < n_len) {
        const float *src = x + t * t_stride;
        for (size_t c = 0; c < n_ch; c++)
          row[c * taps + k] = src[c * c_stride];
      } else {
        for (size_t c = 0; c < n_ch; c++)
          row[c * taps + k] = 0.0f;
      }
    }
  }
}

void
llm_cpu_avg_pool_pairs (const float *x, float *y, size_t n_rows, size_t width)
{
  for (size_t r = 0; r < n_rows / 2; r++) {
    const float *a = x + 2 * r * width, *b = a + width;
    float *dst = y + r * width;
    for (size_t i = 0; i < width; i++)
      dst[i] = (a[i] + b[i]) / 2.0f;
  }
}
