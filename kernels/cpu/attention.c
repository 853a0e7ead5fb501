/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The roundings here follow what llama.cpp computes by default (F16 cache,
 * no flash attention: KQ = mul_mat(K, q), softmax, KQV = mul_mat(V, KQ)),
 * so our logits stay close to its logits; F32 rows are the plain float
 * reference. Scores and probabilities for a whole head are kept (O(n_kv)
 * floats) rather than an online softmax, because that is what the
 * non-flash path rounds. The AVX2 kernels keep every one of these sums in
 * the same order, so they agree with this code bit for bit. */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "exp.h"
#include "fp16.h"
#include "matmul.h"
#include "quantize.h"
#include "kernels-table.h"
#ifdef LLM_HAVE_AVX2
#include "attention-avx2.h"
#include "attention-avx512.h"
#endif

/* The AVX2 and AVX-512 kernels give the reference's results bit for bit,
 * so the table's instruction set changes speed only. */

size_t
llm_attn_row_bytes (LlmAttnType type, size_t n)
{
  switch (type) {
    case LLM_ATTN_F32:
      return n * sizeof (float);
    case LLM_ATTN_F16:
      return n * sizeof (uint16_t);
    case LLM_ATTN_Q8_0:
      return n % LLM_QK8_0 ? 0 : n / LLM_QK8_0 * sizeof (LlmBlockQ8_0);
    case LLM_ATTN_Q4_0:
      return n % LLM_QK4_0 ? 0 : n / LLM_QK4_0 * sizeof (LlmBlockQ4_0);
  }
  return 0;
}

int
llm_attn_panels_fit (LlmAttnType type, size_t n)
{
  return n <= LLM_ATTN_PANEL_VALUES_MAX
      && (type == LLM_ATTN_F16 || (type == LLM_ATTN_Q8_0 && n % LLM_QK8_0 == 0));
}

void
llm_attn_panel_put (LlmAttnType type, uint8_t *panel, size_t lane, const void *row, size_t n)
{
  if (type == LLM_ATTN_F16) {
    uint16_t *h = (uint16_t *) panel + lane;
    for (size_t d = 0; d < n; d++)
      h[LLM_ATTN_PANEL * d] = ((const uint16_t *) row)[d];
    return;
  }
  const LlmBlockQ8_0 *b = row;
  uint16_t *scales = (uint16_t *) (panel + LLM_ATTN_PANEL * n) + lane;
  for (size_t d = 0; d < n; d++)
    panel[LLM_ATTN_PANEL * d + lane] = (uint8_t) b[d / LLM_QK8_0].qs[d % LLM_QK8_0];
  for (size_t k = 0; k < n / LLM_QK8_0; k++)
    scales[LLM_ATTN_PANEL * k] = b[k].d;
}

void
llm_attn_panel_get (LlmAttnType type, const uint8_t *panel, size_t lane, void *row, size_t n)
{
  if (type == LLM_ATTN_F16) {
    const uint16_t *h = (const uint16_t *) panel + lane;
    for (size_t d = 0; d < n; d++)
      ((uint16_t *) row)[d] = h[LLM_ATTN_PANEL * d];
    return;
  }
  LlmBlockQ8_0 *b = row;
  const uint16_t *scales = (const uint16_t *) (panel + LLM_ATTN_PANEL * n) + lane;
  for (size_t d = 0; d < n; d++)
    b[d / LLM_QK8_0].qs[d % LLM_QK8_0] = (int8_t) panel[LLM_ATTN_PANEL * d + lane];
  for (size_t k = 0; k < n / LLM_QK8_0; k++)
    b[k].d = scales[LLM_ATTN_PANEL * k];
}

void
llm_attn_row_store (const LlmCpuKernels *kern, LlmAttnType type, const float *src, void *dst,
    size_t n)
{
#ifdef LLM_HAVE_AVX2
  if (kern->isa >= LLM_CPU_ISA_AVX2 && llm_avx2_attn_row_store (type, src, dst, n))
    return;
#endif
  switch (type) {
    case LLM_ATTN_F32:
      memcpy (dst, src, n * sizeof (float));
      break;
    case LLM_ATTN_F16:
      llm_fp16_from_f32_row (src, dst, n);
      break;
    case LLM_ATTN_Q8_0:
      llm_quantize_row_q8_0 (src, dst, n);
      break;
    case LLM_ATTN_Q4_0:
      llm_quantize_row_q4_0 (src, dst, n);
      break;
  }
}

void
llm_attn_row_load (LlmAttnType type, const void *row, size_t offset, size_t n,
    float *dst)
{
  if (type == LLM_ATTN_F32) {
    memcpy (dst, (const float *) row + offset, n * sizeof (float));
    return;
  }
  if (type == LLM_ATTN_F16) {
    llm_fp16_to_f32_row ((const uint16_t *) row + offset, dst, n);
    return;
  }

  /* A head's slice of a row may start and end inside a block (head_dim 80,
   * say), so whole blocks are expanded on the stack and the slice copied. */
  size_t done = 0;
  while (done < n) {
    const size_t i = offset + done;
    const size_t b = i / 32, in = i % 32;
    float blk[32];
    if (type == LLM_ATTN_Q8_0)
      llm_dequantize_row_q8_0 ((const LlmBlockQ8_0 *) row + b, blk, 32);
    else
      llm_dequantize_row_q4_0 ((const LlmBlockQ4_0 *) row + b, blk, 32);
    size_t take = 32 - in;
    if (take > n - done)
      take = n - done;
    memcpy (dst + done, blk + in, take * sizeof (float));
    done += take;
  }
}

void
llm_attn_prepare_query (LlmAttnType type, const float *q, float *qp, size_t n)
{
  if (type == LLM_ATTN_F16) {
    for (size_t i = 0; i < n; i++)
      qp[i] = llm_fp16_to_f32 (llm_fp16_from_f32 (q[i]));
  } else {
    memcpy (qp, q, n * sizeof (float));
  }
}

static float
dot_f32 (const float *a, const float *b, size_t n)
{
  float sum = 0.0f;
  for (size_t i = 0; i < n; i++)
    sum += a[i] * b[i];
  return sum;
}

void
llm_attn_scores (const LlmAttnRows *k, size_t p0, size_t count, size_t offset,
    const float *qp, size_t n, float scale, float *scores, float *tmp)
{
  /* a panel's position gathered into a row */
  _Alignas (64) uint8_t gathered[LLM_ATTN_PANEL_VALUES_MAX * sizeof (uint16_t)];
  for (size_t i = 0; i < count; i++) {
    const void *row = llm_attn_row (k, p0 + i);
    if (k->panels) {
      llm_attn_panel_get (k->type, llm_attn_panel (k, p0 + i), (p0 + i) % LLM_ATTN_PANEL,
          gathered, n);
      row = gathered;
    }
    float dot;
    switch (k->type) {
      case LLM_ATTN_F32:
        dot = dot_f32 ((const float *) row + offset, qp, n);
        break;
      case LLM_ATTN_F16: {
        const uint16_t *h = (const uint16_t *) row + offset;
        dot = 0.0f;
        for (size_t j = 0; j < n; j++)
          dot += llm_fp16_to_f32 (h[j]) * qp[j];
        break;
      }
      default:
        llm_attn_row_load (k->type, row, offset, n, tmp);
        dot = dot_f32 (tmp, qp, n);
        break;
    }
    scores[i] = dot * scale;
  }
}

void
llm_attn_softmax (float *x, size_t n)
{
  if (n == 0)
    return;
  float max = -INFINITY;
  for (size_t i = 0; i < n; i++)
    max = x[i] > max ? x[i] : max;
  /* The partial sums differ from ggml's one chain in the last bits of a
   * double only: over 2 million random rows of scores (normal, spreads
   * 0.01 to 30, lengths 1 to 4096, most short) the double sum differed in
   * 21% of the rows and the float 1 / sum in none. */
  double part[LLM_ATTN_SUM_PARTS] = { 0 };
  for (size_t i = 0; i < n; i++) {
    x[i] = llm_exp_ref (x[i] - max);
    part[i % LLM_ATTN_SUM_PARTS] += x[i];
  }
  const float inv = (float) (1.0 / llm_attn_fold_sums (part));
  for (size_t i = 0; i < n; i++)
    x[i] *= inv;
}

void
llm_attn_accumulate (const LlmAttnRows *v, size_t p0, size_t count, size_t offset,
    const float *probs, size_t n, float *out, float *tmp)
{
  for (size_t i = 0; i < count; i++) {
    const void *row = llm_attn_row (v, p0 + i);
    switch (v->type) {
      case LLM_ATTN_F32: {
        const float *x = (const float *) row + offset;
        const float p = probs[i];
        for (size_t j = 0; j < n; j++)
          out[j] += p * x[j];
        break;
      }
      case LLM_ATTN_F16: {
        const uint16_t *h = (const uint16_t *) row + offset;
        const float p = llm_fp16_to_f32 (llm_fp16_from_f32 (probs[i]));
        for (size_t j = 0; j < n; j++)
          out[j] += p * llm_fp16_to_f32 (h[j]);
        break;
      }
      default: {
        const float p = probs[i];
        llm_attn_row_load (v->type, row, offset, n, tmp);
        for (size_t j = 0; j < n; j++)
          out[j] += p * tmp[j];
        break;
      }
    }
  }
}

size_t
llm_attention_scratch_floats (size_t n_kv, size_t head_dim)
{
  /* scores, the prepared query, one expanded row */
  return n_kv + 2 * head_dim;
}

void
llm_attention_head_ref (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const float *q, size_t n_kv, float scale, float *out,
    float *scratch)
{
  float *scores = scratch;
  float *qp = scratch + n_kv;
  float *tmp = qp + head_dim;

  memset (out, 0, head_dim * sizeof (float));
  if (n_kv == 0)
    return;

  llm_attn_prepare_query (k->type, q, qp, head_dim);
  llm_attn_scores (k, 0, n_kv, offset, qp, head_dim, scale, scores, tmp);
  llm_attn_softmax (scores, n_kv);
  llm_attn_accumulate (v, 0, n_kv, offset, scores, head_dim, out, tmp);
}

/* Queries per call of the fast kernels (each expands the keys once for
 * all of its queries). */
#ifdef LLM_AVX512_ATTN_MAX
#define BATCH LLM_AVX512_ATTN_MAX
#define AVX2_BATCH LLM_AVX2_ATTN_MAX
#else
#define BATCH 4
#endif

size_t
llm_attention_batch_scratch_floats (size_t n_kv, size_t head_dim, size_t n_q)
{
  const size_t b = n_q < BATCH ? n_q : BATCH;
  const size_t fast = b * (n_kv + head_dim);
  const size_t ref = llm_attention_scratch_floats (n_kv, head_dim);
  return fast > ref ? fast : ref;
}

void
llm_attention_batch (const LlmCpuKernels *kern, const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale,
    float *scratch)
{
#ifdef LLM_HAVE_AVX512
  if (kern->isa >= LLM_CPU_ISA_AVX512 && llm_avx512_attention_fits (k, v, offset, head_dim)) {
    for (size_t i = 0; i < n_q; i += BATCH)
      llm_avx512_attention (k, v, offset, head_dim, queries + i,
          n_q - i < BATCH ? n_q - i : BATCH, scale, scratch);
    return;
  }
#endif
#ifdef LLM_HAVE_AVX2
  if (kern->isa >= LLM_CPU_ISA_AVX2 && llm_avx2_attention_fits (k, v, offset, head_dim)) {
    for (size_t i = 0; i < n_q; i += AVX2_BATCH)
      llm_avx2_attention (k, v, offset, head_dim, queries + i,
          n_q - i < AVX2_BATCH ? n_q - i : AVX2_BATCH, scale, scratch);
    return;
  }
#endif
  for (size_t i = 0; i < n_q; i++)
    llm_attention_head_ref (k, v, offset, head_dim, queries[i].q, queries[i].n_kv, scale,
        queries[i].out, scratch);
}

void
llm_attention_head (const LlmCpuKernels *kern, const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const float *q, size_t n_kv, float scale, float *out,
    float *scratch)
{
  /* One query: the AVX2 kernel needs n_kv + head_dim floats, within the
   * reference's n_kv + 2 * head_dim. */
  const LlmAttnQuery query = { q, out, n_kv };
  llm_attention_batch (kern, k, v, offset, head_dim, &query, 1, scale, scratch);
}
