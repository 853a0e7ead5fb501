/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whisper's log-mel spectrogram around its FFT, as llama.cpp's mtmd
 * computes it: the periodic Hann window, the Slaney-scale filterbank with
 * Slaney's area normalisation (librosa's and Whisper's defaults), the
 * filterbank applied to a power spectrum with mtmd's floor before log10,
 * and the normalisation to Whisper's range (clamp to the maximum less 8,
 * then (x + 4) / 4). The FFT itself is the caller's (lib/audio-mel.c).
 * Pure C, no GLib. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mtmd's floor under each filter's power before the log10: 2^-24 (Hugging
 * Face's Whisper extractor uses 1e-10; the clamp below hides the
 * difference except in very quiet audio). */
#define LLM_CPU_MEL_FLOOR 5.960464477539063e-08

/* w[i] = 0.5 (1 - cos (2 pi i / n)) for i in [0, n): the periodic window
 * (torch.hann_window's default), the cosine in float as mtmd takes it. */
void llm_cpu_hann_periodic (float *w, size_t n);

/* The one span of nonzero weights of one filter: bins [first, first +
 * count) of weights[]. */
typedef struct {
  size_t first, count;
  const float *weights;
} LlmCpuMelFilter;

/* Writes @n_mel filters over the n_fft / 2 + 1 bins of an @n_fft-point
 * spectrum at @sample_rate, from 0 Hz to half the rate: triangles between
 * n_mel + 2 points equally spaced on the Slaney mel scale (linear below
 * 1 kHz, logarithmic above), each scaled by 2 / (its width in Hz), the
 * arithmetic in double and each weight rounded to float. @weights holds
 * n_mel * (n_fft / 2 + 1) floats (filter m's row at m * (n_fft / 2 + 1));
 * @filters gets each filter's nonzero span inside its row. */
void llm_cpu_mel_filterbank (size_t n_mel, size_t n_fft, unsigned sample_rate, float *weights,
    LlmCpuMelFilter *filters);

/* One frame: out[m * out_stride] = log10 (max (sum over the filter's bins
 * of power[k] * weight[k], LLM_CPU_MEL_FLOOR)) for each of @n_mel
 * filters, the products in float, their sum and the log in double. */
void llm_cpu_mel_frame (const float *power, const LlmCpuMelFilter *filters, size_t n_mel,
    float *out, size_t out_stride);

/* The value llm_cpu_mel_frame gives a frame of silence (every sum 0). */
float llm_cpu_mel_silence (void);

/* In place over @n log-mel values: clamped from below to their maximum
 * less 8, then (x + 4) / 4, in double (Whisper's normalisation). */
void llm_cpu_mel_normalize (float *x, size_t n);

#ifdef __cplusplus
}
#endif
