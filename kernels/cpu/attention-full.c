/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The scalar reference of attention-full.h, the key packing, and the
 * choice of vector kernel by the LlmCpuKernels table. */
#include "attention-full.h"
#include "attention-full-impl.h"

#include <math.h>
#include <string.h>

#include "exp.h"
#include "kernels-table.h"

size_t
llm_attention_full_keys_floats (size_t n_kv, size_t head_dim)
{
  return (n_kv + LLM_ATTN_FULL_PANEL - 1) / LLM_ATTN_FULL_PANEL * head_dim
      * LLM_ATTN_FULL_PANEL;
}

void
llm_attention_full_pack_keys (const float *k, size_t ldk, size_t n_kv, size_t head_dim,
    float *kp)
{
  const size_t P = LLM_ATTN_FULL_PANEL;
  const size_t panels = (n_kv + P - 1) / P;
  /* Written in order, read from 16 rows at once (all in L1). */
  for (size_t p = 0; p < panels; p++) {
    float *panel = kp + p * head_dim * P;
    const size_t keys = n_kv - p * P < P ? n_kv - p * P : P;
    for (size_t d = 0; d < head_dim; d++) {
      const float *col = k + p * P * ldk + d;
      size_t l = 0;
      for (; l < keys; l++)
        panel[d * P + l] = col[l * ldk];
      for (; l < P; l++)
        panel[d * P + l] = 0.0f;
    }
  }
}

size_t
llm_attention_full_scratch_floats (size_t n_kv)
{
  return LLM_ATTN_FULL_ROWS * llm_attn_full_lds (n_kv);
}

void
llm_attention_full_ref (const float *kp, const float *v, size_t ldv, size_t n_kv,
    size_t head_dim, const float *q, size_t ldq, size_t n_q, float scale, float *out,
    size_t ldo, float *scratch)
{
  const size_t P = LLM_ATTN_FULL_PANEL;
  float *p = scratch;
  for (size_t i = 0; i < n_q; i++) {
    const float *qi = q + i * ldq;
    float max = -INFINITY;
    for (size_t j = 0; j < n_kv; j++) {
      const float *kj = kp + j / P * head_dim * P + j % P;
      float acc = 0.0f;
      for (size_t d = 0; d < head_dim; d++)
        acc = fmaf (qi[d], kj[d * P], acc);
      p[j] = acc * scale;
      max = p[j] > max ? p[j] : max;
    }
    float part[16] = { 0 };
    for (size_t j = 0; j < n_kv; j++) {
      p[j] = llm_exp_ref (p[j] - max);
      part[j % 16] = part[j % 16] + p[j];
    }
    const float inv = 1.0f / llm_attn_full_fold (part);
    for (size_t d = 0; d < head_dim; d++) {
      float acc = 0.0f;
      for (size_t j = 0; j < n_kv; j++)
        acc = fmaf (p[j], v[j * ldv + d], acc);
      out[i * ldo + d] = acc * inv;
    }
  }
}

void
llm_attention_full (const LlmCpuKernels *kern, const float *kp, const float *v, size_t ldv,
    size_t n_kv, size_t head_dim, const float *q, size_t ldq, size_t n_q, float scale,
    float *out, size_t ldo, float *scratch)
{
#ifdef LLM_HAVE_AVX512
  if (kern->isa >= LLM_CPU_ISA_AVX512) {
    llm_avx512_attention_full (kp, v, ldv, n_kv, head_dim, q, ldq, n_q, scale, out, ldo,
        scratch);
    return;
  }
#endif
#ifdef LLM_HAVE_AVX2
  if (kern->isa >= LLM_CPU_ISA_AVX2) {
    llm_avx2_attention_full (kp, v, ldv, n_kv, head_dim, q, ldq, n_q, scale, out, ldo,
        scratch);
    return;
  }
#endif
  (void) kern;
  llm_attention_full_ref (kp, v, ldv, n_kv, head_dim, q, ldq, n_q, scale, out, ldo, scratch);
}
