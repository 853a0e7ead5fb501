/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The operations of Whisper-style audio encoders around their matrix
 * products that the LM's kernels (ops.h) do not already have: the rows a
 * 1-D convolution multiplies by its kernel and pairs of frames averaged,
 * each computed in float as ggml computes it, so the same file gives
 * llama.cpp's embeddings (Ultravox's RMS norms and SwiGLU are the LM's
 * llm_rmsnorm and llm_cpu_swiglu, Whisper's GELU is ops.h's
 * llm_cpu_gelu_erf). Pure C, no GLib. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The inputs of a 1-D convolution as rows, so one matrix product by the
 * kernel's rows (ggml's layout [taps, n_ch, out]: the taps fastest, then
 * the input channel) is the convolution. @x holds @n_ch channels of @n_len
 * frames, value (channel c, frame t) at x[t * t_stride + c * c_stride], so
 * a channel-major mel spectrogram and time-major activations both read in
 * place. Output frame o (of n_out) reads frames o * stride + k - pad for k
 * in [0, taps); frames outside [0, n_len) are zeros. Row o (n_ch * taps
 * floats) holds, for each channel c, its taps at [c * taps, c * taps + taps). */
void llm_cpu_conv1d_rows (const float *x, size_t n_ch, size_t n_len, size_t t_stride,
    size_t c_stride, size_t taps, size_t stride, size_t pad, size_t n_out, float *rows);

/* Frames a convolution of @taps taps with @stride and @pad on each side
 * gives of @n_len: (n_len + 2 pad - taps) / stride + 1, 0 if none fits. */
/* Rows [@o0, @o1) of llm_cpu_conv1d_rows' output, row o at rows + o *
 * n_ch * taps: a worker's share. */
void llm_cpu_conv1d_rows_range (const float *x, size_t n_ch, size_t n_len, size_t t_stride,
    size_t c_stride, size_t taps, size_t stride, size_t pad, size_t o0, size_t o1,
    float *rows);

size_t llm_cpu_conv1d_out_len (size_t n_len, size_t taps, size_t stride, size_t pad);

/* Averages of consecutive pairs of @n_rows rows of @width floats:
 * n_rows / 2 rows (an odd last row is dropped, as nn.AvgPool1d (2, 2) and
 * ggml_pool_1d drop it), y[r] = (x[2r] + x[2r + 1]) / 2 in float. @y may
 * be @x. */
void llm_cpu_avg_pool_pairs (const float *x, float *y, size_t n_rows, size_t width);

#ifdef __cplusplus
}
#endif
