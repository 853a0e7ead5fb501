/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Element-wise and normalisation operations of the transformer forward pass,
 * scalar reference versions. Pure C, no GLib. @out may equal an input. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out = x / sqrt(mean(x^2) + eps) * w   (w NULL: no scale). The mean is
 * accumulated in double, as ggml does (in sixteen running sums, where
 * ggml's is one). */
void llm_rmsnorm (float *out, const float *x, const float *w, size_t n, float eps);
/* llm_rmsnorm of @n_rows rows of @n, @n apart, each giving the same bits
 * as alone. */
void llm_rmsnorm_rows (float *out, const float *x, const float *w, size_t n, size_t n_rows,
    float eps);

/* In place: x = exp(x - max) / sum, exp as exp.h's llm_exp_ref. */
void llm_softmax (float *x, size_t n);

/* out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), exp as exp.h's
 * llm_exp_ref. */
void llm_swiglu (float *out, const float *gate, const float *up, size_t n);
/* llm_swiglu with the vector kernels of @kern: the same bits. */
typedef struct _LlmCpuKernels LlmCpuKernels;
void llm_cpu_swiglu (const LlmCpuKernels *kern, float *out, const float *gate,
    const float *up, size_t n);

/* out = a + b */
void llm_add (float *out, const float *a, const float *b, size_t n);
/* llm_add with the vector kernels of @kern (a residual of 1024 rows of
 * 768 was scalar: 2.5% of a vision tower). */
void llm_cpu_add (const LlmCpuKernels *kern, float *out, const float *a, const float *b,
    size_t n);

/* Layer norm of @n floats, as ggml_norm then the weight and bias: mean
 * and variance summed in double, out = ((x - mean) * (1 / sqrt (var +
 * eps))) * w + b in float. @w and @b may be NULL (1 and 0). */
void llm_layernorm (float *out, const float *x, const float *w, const float *b, size_t n,
    float eps);

/* GELU with the tanh approximation (SigLIP's gelu_pytorch_tanh, ggml_gelu),
 * 0.5 x (1 + tanh (u)) with u = sqrt (2 / pi) (x + 0.044715 x^3), computed
 * as the same x * sigmoid (2 u) = x / (1 + exp (-2 u)): an exp.h
 * exponential instead of libm's tanhf (which cost a tenth of an encode),
 * and no cancellation near 0 or at large -x, where the tanh form loses
 * every digit. In float: x2 = x * x, a = x * fmaf (0.044715, x2, 1),
 * out = x / (1 + exp (a * -2 sqrt (2 / pi))). */
void llm_gelu (float *out, const float *x, size_t n);
/* CLIP's quick GELU, x * sigmoid (1.702 x) = x / (1 + exp (x * -1.702)). */
void llm_gelu_quick (float *out, const float *x, size_t n);
/* Both with the vector kernels of @kern: the same bits. @out may be @x. */
void llm_cpu_gelu (const LlmCpuKernels *kern, float *out, const float *x, size_t n);
void llm_cpu_gelu_quick (const LlmCpuKernels *kern, float *out, const float *x, size_t n);
/* x / 2 * (1 + erf (x / sqrt 2)) in float (ggml_gelu_erf; Whisper's GELU),
 * erf as exp.h's llm_erf_ref (ggml calls libm's erff; the two GELUs are
 * within 3e-7 of each other relative to 1 + |GELU|); the kernels' version
 * gives the same bits. @out may be @x. */
void llm_gelu_erf (float *out, const float *x, size_t n);
void llm_cpu_gelu_erf (const LlmCpuKernels *kern, float *out, const float *x, size_t n);

/* Rotary position embedding of @n_heads heads of @head_dim values at
 * position @pos, rotating the first @n_rot dimensions of each head.
 * Normal (llama) layout rotates pairs (2i, 2i+1); NeoX layout (qwen2, qwen3)
 * rotates pairs (i, i + n_rot/2). Angles follow ggml: theta starts at
 * pos and is multiplied by freq_base^(-2/n_rot) per pair, in float, and
 * pair i turns by freq_scale * theta_i, so results agree with llama.cpp to
 * the last bits. */
void llm_rope (float *x, size_t n_heads, size_t head_dim, size_t n_rot, int64_t pos,
    float freq_base, float freq_scale, int neox);

/* llm_rope in two halves, for rows whose angles serve many calls (every
 * layer's Q and K of a position turn by the same ones): llm_rope_angles
 * writes the llm_rope_angles_floats (@head_dim, @n_rot) floats of the
 * angles at @pos to @cs (each pair's cos, then sin), and llm_rope_turn
 * turns @x by them, with the same bits as llm_rope. */
size_t llm_rope_angles_floats (size_t head_dim, size_t n_rot);
void llm_rope_angles (size_t head_dim, size_t n_rot, int64_t pos, float freq_base,
    float freq_scale, float *cs);
void llm_rope_turn (float *x, size_t n_heads, size_t head_dim, size_t n_rot, const float *cs,
    int neox);

#ifdef __cplusplus
}
#endif
