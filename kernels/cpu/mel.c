/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "mel.h"

#include <math.h>

void
llm_cpu_hann_periodic (float *w, size_t n)
{
  /* The cosine in float of the angle in double, as mtmd takes it, so the
   * window is mtmd's to the bit. */
  for (size_t i = 0; i < n; i++)
    w[i] = (float) (0.5 * (1.0 - cosf ((float) ((2.0 * M_PI * (double) i) / (double) n))));
}

/* Slaney's mel scale: 3 mels per 200 Hz up to 1 kHz, then 27 mels per
 * factor 6.4 in frequency. The constants are rounded as mtmd rounds them
 * (the slope a double, 1 kHz's mel its product), so the edges of the
 * filters fall on the same doubles. */
#define LIN_SLOPE (3.0 / 200.0)
#define MIN_LOG_HZ 1000.0

static double
hz_to_mel (double hz)
{
  const double step = log (6.4) / 27.0;
  return hz < MIN_LOG_HZ ? hz * LIN_SLOPE : MIN_LOG_HZ * LIN_SLOPE + log (hz / MIN_LOG_HZ) / step;
}

static double
mel_to_hz (double mel)
{
  const double step = log (6.4) / 27.0, min_log_mel = MIN_LOG_HZ * LIN_SLOPE;
  return mel < min_log_mel ? mel / LIN_SLOPE : MIN_LOG_HZ * exp ((mel - min_log_mel) * step);
}

void
llm_cpu_mel_filterbank (size_t n_mel, size_t n_fft, unsigned sample_rate, float *weights,
    LlmCpuMelFilter *filters)
{
  const size_t n_bins = n_fft / 2 + 1;
  const double top = hz_to_mel (0.5 * sample_rate), bin_hz = (double) sample_rate / n_fft;
  for (size_t m = 0; m < n_mel; m++) {
    /* Points m, m + 1, m + 2 of the n_mel + 2 spread over [0, top]. */
    double hz[3];
    for (int j = 0; j < 3; j++)
      hz[j] = mel_to_hz (top * ((double) (m + j) / (double) (n_mel + 1)));
    const double left = fmax (hz[1] - hz[0], 1e-30), right = fmax (hz[2] - hz[1], 1e-30);
    const double area = 2.0 / fmax (hz[2] - hz[0], 1e-30);
    float *row = weights + m * n_bins;
    size_t first = n_bins, last = 0;
    for (size_t k = 0; k < n_bins; k++) {
      const double f = (double) k * bin_hz;
      double w = 0.0;
      if (f >= hz[0] && f <= hz[1])
        w = (f - hz[0]) / left;
      else if (f > hz[1] && f <= hz[2])
        w = (hz[2] - f) / right;
      row[k] = (float) (w * area);
      if (row[k] != 0.0f) {
        first = k < first ? k : first;
        last = k;
      }
    }
    filters[m].weights = row + (first < n_bins ? first : 0);
    filters[m].first = first < n_bins ? first : 0;
    filters[m].count = first < n_bins ? last - first + 1 : 0;
  }
}

void
llm_cpu_mel_frame (const float *power, const LlmCpuMelFilter *filters, size_t n_mel,
    float *out, size_t out_stride)
{
  for (size_t m = 0; m < n_mel; m++) {
    const LlmCpuMelFilter *f = &filters[m];
    const float *p = power + f->first;
    double sum = 0.0;
    for (size_t k = 0; k < f->count; k++)
      sum += (double) (p[k] * f->weights[k]);
    out[m * out_stride] = (float) log10 (fmax (sum, LLM_CPU_MEL_FLOOR));
  }
}

float
llm_cpu_mel_silence (void)
{
  return (float) log10 (LLM_CPU_MEL_FLOOR);
}

void
llm_cpu_mel_normalize (float *x, size_t n)
{
  double max = -1e20;
  for (size_t i = 0; i < n; i++)
    max = fmax (max, x[i]);
  const double low = max - 8.0;
  for (size_t i = 0; i < n; i++)
    x[i] = (float) ((fmax (x[i], low) + 4.0) / 4.0);
}
