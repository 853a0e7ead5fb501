/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "dft.h"

#include <math.h>

size_t
llm_cpu_dft_table_floats (size_t n)
{
  return 2 * n;
}

void
llm_cpu_dft_table (size_t n, float *table)
{
  for (size_t m = 0; m < n; m++) {
    const double a = 2.0 * M_PI * (double) m / (double) n;
    table[2 * m] = (float) cos (a);
    table[2 * m + 1] = (float) sin (a);
  }
}

size_t
llm_cpu_dft_scratch_floats (size_t n)
{
  /* Each level holds its halves' n complex values and hands the rest on:
   * 2n + n + n / 2 + ... < 4n floats, then the output's 2n. */
  return 6 * n;
}

/* out[k], k < @len (interleaved complex), the DFT of the @len values
 * x[j * stride]: the top transform's table (@n points) serves every
 * length dividing it, the root e^(-2 pi i m / len) at index m * n / len. */
static void
fft (const float *table, size_t n, const float *x, size_t stride, size_t len, float *out,
    float *tmp)
{
  const size_t step = n / len;
  if (len % 2 != 0) {
    for (size_t k = 0; k < len; k++) {
      float re = 0.0f, im = 0.0f;
      size_t m = 0;             /* j k mod len, kept without a division */
      for (size_t j = 0; j < len; j++) {
        const float v = x[j * stride];
        re += v * table[2 * m * step];
        im -= v * table[2 * m * step + 1];
        m += k;
        if (m >= len)
          m -= len;
      }
      out[2 * k] = re;
      out[2 * k + 1] = im;
    }
    return;
  }
  const size_t half = len / 2;
  float *even = tmp, *odd = tmp + 2 * half;
  fft (table, n, x, 2 * stride, half, even, tmp + 2 * len);
  fft (table, n, x + stride, 2 * stride, half, odd, tmp + 2 * len);
  for (size_t k = 0; k < half; k++) {
    const float c = table[2 * k * step], s = table[2 * k * step + 1];
    /* odd[k] e^(-2 pi i k / len) */
    const float ore = odd[2 * k], oim = odd[2 * k + 1];
    const float tre = ore * c + oim * s, tim = oim * c - ore * s;
    out[2 * k] = even[2 * k] + tre;
    out[2 * k + 1] = even[2 * k + 1] + tim;
    out[2 * (k + half)] = even[2 * k] - tre;
    out[2 * (k + half) + 1] = even[2 * k + 1] - tim;
  }
}

void
llm_cpu_dft_power (const float *table, size_t n, const float *x, float *scratch, float *power)
{
  float *out = scratch, *tmp = scratch + 2 * n;
  fft (table, n, x, 1, n, out, tmp);
  for (size_t k = 0; k <= n / 2; k++)
    power[k] = out[2 * k] * out[2 * k] + out[2 * k + 1] * out[2 * k + 1];
}
