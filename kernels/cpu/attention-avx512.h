/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: the AVX-512 attention in attention-avx512.c,
 * for F16, Q8_0 and Q4_0 keys and values. That file is compiled with AVX-512F, so nothing
 * in it may run before attention.c has checked the CPU has it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "attention.h"

/* Whether llm_avx512_attention handles these rows: F16, Q8_0 or Q4_0 keys
 * and values of one type,
 * head slices whose start and length are multiples of 16 values, cache
 * blocks of a multiple of 16 rows. */
bool llm_avx512_attention_fits (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim);

/* Queries one llm_avx512_attention call takes, in groups of 8: the keys
 * are expanded once for all the groups (a prefill chunk's rows). */
#define LLM_AVX512_ATTN_GROUPS 4
#define LLM_AVX512_ATTN_MAX (8 * LLM_AVX512_ATTN_GROUPS)

/* llm_attention_batch for at most LLM_AVX512_ATTN_MAX queries, bit for
 * bit; @scratch holds n_q * (max n_kv + head_dim) floats. */
void llm_avx512_attention (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale, float *scratch);
