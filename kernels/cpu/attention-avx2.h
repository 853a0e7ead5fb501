/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: the AVX2/F16C attention in attention-avx2.c.
 * That file is compiled with those instruction sets, so nothing in it may
 * run before attention.c has checked the CPU has them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "attention.h"

/* Whether llm_avx2_attention handles rows laid out like this: head slices
 * whose start and length are multiples of 8 values, and cache blocks of a
 * multiple of 8 rows. */
bool llm_avx2_attention_fits (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim);

/* llm_attention_batch for at most 4 queries, bit for bit; @scratch holds
 * n_q * (max n_kv + head_dim) floats. */
void llm_avx2_attention (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale, float *scratch);

/* llm_attn_row_store for F16 and Q8_0 rows, byte for byte what the scalar
 * converters write; false for the other types (nothing written). */
bool llm_avx2_attn_row_store (LlmAttnType type, const float *src, void *dst, size_t n);

/* Shared with attention-avx512.c, same results as the reference's steps:
 * x = half(x) as a float (round to nearest even), for @n floats; and
 * llm_attn_softmax on the rows of @nq <= 4 queries (row i at x + i *
 * stride, n[i] long; n_min the least n[i]). */
void llm_avx2_round_to_half (float *x, size_t n);
void llm_avx2_softmax_rows (float *x, size_t stride, const size_t *n, int nq, size_t n_min);
