/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Full (bidirectional) attention of a vision tower: every query of one
 * head attends to all n_kv keys of that head, which are activations of
 * the same image (no cache, no mask). The scalar reference, and entry
 * points that run the AVX2 or AVX-512 kernels of the LlmCpuKernels table
 * they are given, bit for bit the reference's.
 *
 * The decode-side kernels (attention.h) take one key row at a time, a
 * dot product per row: right for a cache read once per token, a third of
 * an encode's time at a tower's 1024 x 1024 scores. Here the keys are
 * packed once per layer into panels of 16 (a panel's 16 keys' value at
 * one dimension side by side), so a tile of queries times a few panels
 * is one vector FMA per query, panel and dimension, and the probabilities
 * times the values is one per query, value vector and key: products of
 * matrices, at the FMA units' speed.
 *
 * What every kernel computes for a query q (head_dim values) over keys
 * k_j and values v_j, j < n_kv, rounding in this order:
 *
 *   s_j = (fma chain over d from 0 of q[d] * k_j[d]) * scale
 *   m   = max_j s_j;   p_j = exp (s_j - m)   (exp.h's llm_exp_ref)
 *   sum = 16 partial sums, part[j % 16] += p_j in increasing j, then
 *         folded: part[l] += part[l + w] for l < w, w = 8, 4, 2, 1
 *   out[d] = (fma chain over j from 0 of p_j * v_j[d]) * (1 / sum)
 *
 * Each s_j and out[d] is one lane's chain in the vector kernels, and the
 * 16 partial sums are the lanes of one AVX-512 vector (two AVX2 ones),
 * so the vector kernels and the reference agree bit for bit. Against
 * ggml's CLIP graph without flash attention (one F32 product for the
 * scores, soft_max, one for the values) only summation orders differ.
 * Pure C, no GLib. */
#pragma once

#include <stddef.h>

#include "matmul.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys to a panel. */
#define LLM_ATTN_FULL_PANEL 16

/* Floats of one head's packed keys: ceil (n_kv / 16) panels of
 * head_dim x 16. */
size_t llm_attention_full_keys_floats (size_t n_kv, size_t head_dim);

/* Packs one head's keys (@n_kv rows of @head_dim floats at @k, @ldk floats
 * apart) into panels at @kp: key j's value d at
 * kp[(j / 16) * head_dim * 16 + d * 16 + j % 16], zeros past n_kv. */
void llm_attention_full_pack_keys (const float *k, size_t ldk, size_t n_kv, size_t head_dim,
    float *kp);

/* Floats of scratch one call of llm_attention_full needs (any query
 * count). */
size_t llm_attention_full_scratch_floats (size_t n_kv);

/* For the @n_q queries at @q (@head_dim floats each, @ldq apart):
 * out[i * ldo + d] as above, over the packed keys @kp and the values @v
 * (@n_kv rows of @head_dim floats, @ldv apart). @scratch holds
 * llm_attention_full_scratch_floats (n_kv) floats; nothing is allocated.
 * n_kv >= 1. */
void llm_attention_full (const LlmCpuKernels *kern, const float *kp, const float *v,
    size_t ldv, size_t n_kv, size_t head_dim, const float *q, size_t ldq, size_t n_q,
    float scale, float *out, size_t ldo, float *scratch);

/* The same, always with the scalar reference. */
void llm_attention_full_ref (const float *kp, const float *v, size_t ldv, size_t n_kv,
    size_t head_dim, const float *q, size_t ldq, size_t n_q, float scale, float *out,
    size_t ldo, float *scratch);

#ifdef __cplusplus
}
#endif
