/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The power spectrum of a real frame by a mixed-radix FFT, for Whisper's
 * 400-point one (400 = 2^4 x 25): radix-2 splits down to the odd length,
 * then a direct DFT of it, every twiddle from one table of the n-th roots
 * of unity made once, in float, as whisper.cpp and llama.cpp's mtmd
 * compute it. FFmpeg 5's av_tx has no codelet for a factor of 25 and
 * falls back to a DFT that calls sincos for every product: measured 0.47
 * ms a frame on Zen 5, 0.5 s for 11 s of audio, twice the Whisper-tiny
 * encoder's whole window. Pure C, no GLib. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Floats of the table of an @n-point transform: cos and sin of 2 pi m / n
 * for m < n. */
size_t llm_cpu_dft_table_floats (size_t n);
/* Fills @table for @n points, the angles in double, rounded to float. */
void llm_cpu_dft_table (size_t n, float *table);

/* Floats of llm_cpu_dft_power's scratch for @n points. */
size_t llm_cpu_dft_scratch_floats (size_t n);

/* power[k] = |X[k]|^2 for k <= n / 2, X the DFT of the @n real values of
 * @x (X[k] = sum_j x[j] e^(-2 pi i j k / n)), with @table from
 * llm_cpu_dft_table (n) and @scratch of llm_cpu_dft_scratch_floats (n). */
void llm_cpu_dft_power (const float *table, size_t n, const float *x, float *scratch,
    float *power);

#ifdef __cplusplus
}
#endif
