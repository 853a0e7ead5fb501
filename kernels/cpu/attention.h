/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scaled dot-product attention of query heads over cached key and value
 * rows stored in F32, F16, Q8_0 or Q4_0: the scalar reference, and entry
 * points that run the AVX2/F16C or AVX-512 kernels of the LlmCpuKernels
 * table they are given (bit-identical to the reference). Rows are reached
 * through a block table (paged), so the cache never has to be contiguous. Pure C, no GLib. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "matmul.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  LLM_ATTN_F32,
  LLM_ATTN_F16,
  LLM_ATTN_Q8_0,  /* ggml blocks of 32 values along the row */
  LLM_ATTN_Q4_0,
} LlmAttnType;

/* Bytes of one row of @n values; 0 when @n is not a whole number of blocks. */
size_t llm_attn_row_bytes (LlmAttnType type, size_t n);

/* Stores @n floats as a row of @type at @dst (llm_attn_row_bytes (type, n)
 * bytes); for the block types @n is a multiple of 32. */
void llm_attn_row_store (const LlmCpuKernels *kern, LlmAttnType type, const float *src,
    void *dst, size_t n);

/* Reads values [@offset, @offset + @n) of a row of @type as floats. For the
 * block types the range need not be block-aligned. */
void llm_attn_row_load (LlmAttnType type, const void *row, size_t offset, size_t n,
    float *dst);

/* Rows of a paged cache: row p of block b = p / block_rows starts at
 * blocks[b] + (segment * r_b + p % block_rows) * row_bytes, where r_b is
 * the rows block b holds: block_rows, except that the last block before
 * @n_rows holds only the rest. Segments let a block keep the rows of
 * several heads one after another (head-major); with segment 0 (and
 * n_rows unused) a block is simply block_rows rows.
 *
 * With @panels (F16 or Q8_0 keys of one head, values from offset 0):
 * positions [16 g, 16 g + 16) take the bytes rows 16 g .. 16 g + 15
 * would, as a panel (llm_attn_panel): F16, value d of position p at
 * halves[16 d + p % 16]; Q8_0, code d at codes[16 d + p % 16] (n bytes a
 * position), then the scale of block b at halves[16 b + p % 16] after the
 * codes (block_rows and every r_b are multiples of 16). The scores'
 * products then read a dimension of 16 positions with one load, where
 * rows need a transpose in registers first (as much work as the products
 * at 4 queries). llm_attn_panel_put and _get move one position's row in
 * and out. */
typedef struct {
  const void *const *blocks;
  size_t block_rows;
  size_t row_bytes;
  LlmAttnType type;
  size_t segment;
  size_t n_rows;
  int panels;
} LlmAttnRows;

#define LLM_ATTN_PANEL 16

static inline const void *
llm_attn_row (const LlmAttnRows *rows, size_t p)
{
  const size_t b = p / rows->block_rows;
  size_t first = p % rows->block_rows;
  if (rows->segment > 0) {
    size_t r_b = rows->n_rows - b * rows->block_rows;
    r_b = r_b < rows->block_rows ? r_b : rows->block_rows;
    first += rows->segment * r_b;
  }
  return (const uint8_t *) rows->blocks[b] + first * rows->row_bytes;
}

/* The panel holding position @p (LlmAttnRows.panels). */
static inline const uint8_t *
llm_attn_panel (const LlmAttnRows *rows, size_t p)
{
  return (const uint8_t *) llm_attn_row (rows, p - p % LLM_ATTN_PANEL);
}

/* Values a row in panels holds at most (a position's row is gathered on
 * the stack). */
#define LLM_ATTN_PANEL_VALUES_MAX 1024

/* Whether rows of @type and @n values can be panels: F16, or Q8_0 of
 * whole blocks, up to LLM_ATTN_PANEL_VALUES_MAX values. */
int llm_attn_panels_fit (LlmAttnType type, size_t n);

/* Lane @lane of the panel at @panel from @row (a row of @type and @n
 * values as llm_attn_row_store writes it), and back. */
void llm_attn_panel_put (LlmAttnType type, uint8_t *panel, size_t lane, const void *row,
    size_t n);
void llm_attn_panel_get (LlmAttnType type, const uint8_t *panel, size_t lane, void *row,
    size_t n);

/* The query as the dot product with keys of @type sees it: for F16 keys it is
 * rounded to half precision, as ggml converts the F32 operand of an F16 x F32
 * matrix product; for the other types a copy. @qp has @n floats. */
void llm_attn_prepare_query (LlmAttnType type, const float *q, float *qp, size_t n);

/* scores[i] = scale * dot(qp, K_p[offset, offset + n)) for p in [p0, p0 + count),
 * with @qp from llm_attn_prepare_query; products accumulate in float.
 * @tmp holds @n floats (used by the block types). */
void llm_attn_scores (const LlmAttnRows *k, size_t p0, size_t count, size_t offset,
    const float *qp, size_t n, float scale, float *scores, float *tmp);

/* In place: x = exp(x - max) / sum, exponentials in float, their sum in
 * double as ggml's soft_max does, but not in one chain: position p goes
 * into partial sum p % 16 (LLM_ATTN_SUM_PARTS), and the partial sums are
 * folded as llm_attn_fold_sums does. The vector kernels keep the 16 sums
 * in the lanes of their double vectors; ggml's one chain made them carry
 * one dependent add a position and transpose four queries' exponentials
 * to get there (a quarter of a decode step's attention). In double the
 * order hardly shows: see llm_attn_softmax. */
void llm_attn_softmax (float *x, size_t n);

#define LLM_ATTN_SUM_PARTS 16

/* part[l] += part[l + w] for l < w, w = 8, 4, 2, 1: the softmax's sum. */
static inline double
llm_attn_fold_sums (double part[LLM_ATTN_SUM_PARTS])
{
  for (size_t w = LLM_ATTN_SUM_PARTS / 2; w >= 1; w /= 2)
    for (size_t l = 0; l < w; l++)
      part[l] = part[l] + part[l + w];
  return part[0];
}

/* out = sum over p in [p0, p0 + count) of probs[i] * V_p[offset, offset + n),
 * accumulated in float onto what @out holds. For F16 values each probability
 * is rounded to half precision first (ggml converts the F32 operand of the
 * F16 x F32 product). @tmp holds @n floats. */
void llm_attn_accumulate (const LlmAttnRows *v, size_t p0, size_t count, size_t offset,
    const float *probs, size_t n, float *out, float *tmp);

/* Floats of scratch llm_attention_head needs. */
size_t llm_attention_scratch_floats (size_t n_kv, size_t head_dim);

/* Attention of one head: out[head_dim] = softmax(scale * q.K) V over cache
 * positions [0, n_kv), each row's head values starting at @offset. @scratch
 * holds llm_attention_scratch_floats (n_kv, head_dim) floats; nothing is
 * allocated. n_kv == 0 gives zeros. Uses the fast kernels when it can;
 * the result is the reference's bit for bit either way. */
void llm_attention_head (const LlmCpuKernels *kern, const LlmAttnRows *k,
    const LlmAttnRows *v, size_t offset, size_t head_dim, const float *q, size_t n_kv,
    float scale, float *out, float *scratch);

/* The same, always with the scalar reference (llm_attn_scores, _softmax,
 * _accumulate). */
void llm_attention_head_ref (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const float *q, size_t n_kv, float scale, float *out,
    float *scratch);

/* One query of a batch: @q and @out hold head_dim floats; it attends to
 * cache positions [0, n_kv). */
typedef struct {
  const float *q;
  float *out;
  size_t n_kv;
} LlmAttnQuery;

/* Floats of scratch llm_attention_batch needs for @n_q queries of at most
 * @n_kv positions. */
size_t llm_attention_batch_scratch_floats (size_t n_kv, size_t head_dim, size_t n_q);

/* llm_attention_head for @n_q queries that read the same rows (the query
 * heads of one KV head, or one head at several tokens of a causal prefill):
 * each query's output equals llm_attention_head's bit for bit, but the
 * rows are loaded and converted once for up to 4 queries at a time. */
void llm_attention_batch (const LlmCpuKernels *kern, const LlmAttnRows *k,
    const LlmAttnRows *v, size_t offset, size_t head_dim, const LlmAttnQuery *queries,
    size_t n_q, float scale, float *scratch);

#ifdef __cplusplus
}
#endif
