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

/* Queries one llm_avx2_attention call takes, in groups of 4: the keys are
 * expanded once for all the groups (a prefill chunk's rows). */
#define LLM_AVX2_ATTN_GROUPS 8
#define LLM_AVX2_ATTN_MAX (4 * LLM_AVX2_ATTN_GROUPS)

/* llm_attention_batch for at most LLM_AVX2_ATTN_MAX queries, bit for bit;
 * @scratch holds n_q * (max n_kv + head_dim) floats. */
void llm_avx2_attention (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale, float *scratch);

/* llm_attn_row_store for F16 and Q8_0 rows, byte for byte what the scalar
 * converters write; false for the other types (nothing written). */
bool llm_avx2_attn_row_store (LlmAttnType type, const float *src, void *dst, size_t n);

/* Shared with attention-avx512.c: one kernel call's queries (those with
 * positions to attend to) and its scratch: scores (nq x n_max) and the
 * queries as the dot products see them (qp, nq x head_dim). */
#define LLM_ATTN_CALL_MAX 8
typedef struct {
  int nq;
  float *out[LLM_ATTN_CALL_MAX];
  size_t n[LLM_ATTN_CALL_MAX];
  size_t n_min, n_max;
  float *scores, *qp;
} LlmAttnCall;

/* Zeroes every output of the first @max (<= LLM_ATTN_CALL_MAX) queries,
 * keeps those with n_kv > 0 and lays out @scratch for them, the queries
 * rounded to half for F16 keys (llm_attn_prepare_query); false when none
 * is left. */
bool llm_avx2_attn_begin (LlmAttnCall *c, const LlmAttnQuery *queries, size_t n_q, int max,
    LlmAttnType ktype, size_t head_dim, float *scratch);

/* A kernel's parts for llm_avx2_attn_drive: one group's scores, with its
 * own expanding of the keys; by key type (NULL where it has none), the
 * scores of several groups over one expanding of the keys, for head sizes
 * up to @groups_dims, and of several groups over F16 keys in panels
 * (LlmAttnRows.panels, any head size); one group's probabilities and
 * values. */
typedef struct {
  int per_group;
  int max_groups;
  void (*scores) (const LlmAttnCall *c, const LlmAttnRows *k, size_t offset, size_t head_dim,
      float scale);
  void (*groups[LLM_ATTN_Q4_0 + 1]) (const LlmAttnCall *c, int ng, const LlmAttnRows *k,
      size_t offset, size_t head_dim, float scale);
  size_t groups_dims;
  void (*panels) (const LlmAttnCall *c, int ng, const LlmAttnRows *k, size_t head_dim,
      float scale);
  void (*finish) (LlmAttnCall *c, const LlmAttnRows *v, size_t offset, size_t head_dim);
} LlmAttnDriver;

#define LLM_ATTN_GROUPS_MAX 8

/* The longest of @ng calls' query rows: how far keys are read for all. */
static inline size_t
llm_attn_calls_n_max (const LlmAttnCall *c, int ng)
{
  size_t n = 0;
  for (int i = 0; i < ng; i++)
    n = c[i].n_max > n ? c[i].n_max : n;
  return n;
}

/* One kernel call (llm_avx2_attention, llm_avx512_attention): the queries
 * in groups of @d->per_group, at most @d->max_groups (<=
 * LLM_ATTN_GROUPS_MAX) of them, each laid out by llm_avx2_attn_begin in
 * its own part of @scratch, scored together where the kernel can and
 * finished one by one. */
void llm_avx2_attn_drive (const LlmAttnDriver *d, const LlmAttnRows *k, const LlmAttnRows *v,
    size_t offset, size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale,
    float *scratch);

/* The scores made probabilities as the reference's softmax does (rounded
 * to half for F16 values), the first value rows prefetched meanwhile. */
void llm_avx2_attn_probs (LlmAttnCall *c, const LlmAttnRows *v, size_t offset, size_t head_dim);

/* Its pieces, for attention-avx512.c's softmax: the prefetch of the
 * first value rows (while the softmax runs; the value pass fetches the
 * rest as it goes), the largest of x[0, n) as the softmax subtracts it
 * (the reference's for any scores that are not NaN), and x = half (x) as
 * a float, rounding to nearest even as llm_fp16_from_f32. */
void llm_avx2_attn_prefetch_values (const LlmAttnCall *c, const LlmAttnRows *v, size_t offset,
    size_t head_dim);
float llm_avx2_attn_max (const float *x, size_t n);
void llm_avx2_attn_round_to_half (float *x, size_t n);
