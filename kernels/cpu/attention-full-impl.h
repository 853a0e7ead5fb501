/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to the CPU kernels: what attention-full.c and its AVX2 and
 * AVX-512 files share: the scratch's shape, the partial sums' fold, and
 * the vector entry points (reached after the caller's CPU check). */
#pragma once

#include <stddef.h>

/* Queries a vector kernel takes at once: 6 x 4 accumulators of 16 lanes
 * (AVX-512: 24 of 32 registers, the rest for the key panels). */
#define LLM_ATTN_FULL_ROWS 6

/* Floats between score rows in the scratch: whole panels, and one more
 * so the rows the value products read side by side do not share L1 sets
 * when n_kv is a multiple of 1024. */
static inline size_t
llm_attn_full_lds (size_t n_kv)
{
  return (n_kv + 15) / 16 * 16 + 16;
}

/* The 16 partial sums folded in attention-full.h's order. */
static inline float
llm_attn_full_fold (float part[16])
{
  for (size_t w = 8; w >= 1; w /= 2)
    for (size_t l = 0; l < w; l++)
      part[l] = part[l] + part[l + w];
  return part[0];
}

void llm_avx2_attention_full (const float *kp, const float *v, size_t ldv, size_t n_kv,
    size_t head_dim, const float *q, size_t ldq, size_t n_q, float scale, float *out,
    size_t ldo, float *scratch);
void llm_avx512_attention_full (const float *kp, const float *v, size_t ldv, size_t n_kv,
    size_t head_dim, const float *q, size_t ldq, size_t n_q, float scale, float *out,
    size_t ldo, float *scratch);
