/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX2/F16C attention. Built with -mavx2 -mfma -mf16c and reached only
 * through llm_attention_batch() after a CPU check in attention.c.
 *
 * Every result is bit-identical to the scalar reference in attention.c,
 * because every float sum keeps the reference's order and a multiply is
 * fused with an add only where the product is exact (see madd_exact):
 * - Scores: the reference sums q[j] * k[j] over j in order, one position
 *   at a time. Here 8 positions are the 8 lanes: a tile of 8 key rows is
 *   expanded to float and transposed in registers, so lane p of the j-th
 *   vector holds k_p[j], and each lane sums over j in the same order.
 * - Values: the reference adds p * v[j] over positions in order, per j.
 *   Here the lanes are 8 consecutive j and the loop runs over positions
 *   in order.
 * - The softmax's exp is exp-simd.h's, lane for lane the reference's
 *   llm_exp_ref; the sum is in double in position order, as there.
 * Up to 4 queries that read the same KV head (a GQA group, or one head at
 * several tokens) share each tile's loads, conversions and transposes.
 *
 * Memory: at a long context attention streams the whole cache once per
 * token, so both passes prefetch the rows ahead of them (see
 * prefetch_slice); without that a head's rows, a few KiB per cache block,
 * come in at well under half the bandwidth of a plain sequential read. */
#include "attention-avx2.h"
#include "attention-simd.h"

#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exp-simd.h"
#include "quantize.h"

#define QB 4
#define INLINE static inline __attribute__ ((always_inline))

bool
llm_avx2_attention_fits (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim)
{
  return head_dim > 0 && head_dim % 8 == 0 && offset % 8 == 0
      && k->block_rows % 8 == 0 && v->block_rows % 8 == 0;
}

/* How far ahead the passes prefetch: a cache block of rows (one head's
 * 64 rows are 8 KiB in F16), far enough to cover DRAM latency. */
#define PREFETCH_ROWS 64

/* The 8 rows of the tile from @pt (8 | block_rows, so they are consecutive
 * in one block), and how many are below @n: a short last tile repeats a
 * row rather than read past n; a tile wholly past n repeats @first. */
INLINE size_t
tile8 (const LlmAttnRows *k, size_t pt, size_t n, const uint8_t *rows[8],
    const uint8_t *const first[8])
{
  if (pt >= n) {
    memcpy (rows, first, 8 * sizeof *rows);
    return 0;
  }
  const size_t cnt = n - pt < 8 ? n - pt : 8;
  const uint8_t *base = llm_attn_row (k, pt);
  for (size_t r = 0; r < 8; r++)
    rows[r] = base + (r < cnt ? r : 0) * k->row_bytes;
  return cnt;
}

/* scale * acc[i][t] to the @cnt[t] scores of tile t from @p0. */
INLINE void
store_tiles (int nq, int tp, __m256 acc[QB][4], const size_t *cnt, size_t p0, float scale,
    float *scores, size_t stride)
{
  const __m256 vscale = _mm256_set1_ps (scale);
  UNROLL for (int t = 0; t < tp; t++) {
    const size_t pt = p0 + 8 * (size_t) t;
    UNROLL for (int i = 0; i < nq; i++) {
      const __m256 sv = _mm256_mul_ps (acc[i][t], vscale);
      if (cnt[t] == 8) {
        _mm256_storeu_ps (scores + i * stride + pt, sv);
      } else if (cnt[t] > 0) {
        float tmp[8];
        _mm256_storeu_ps (tmp, sv);
        memcpy (scores + i * stride + pt, tmp, cnt[t] * sizeof (float));
      }
    }
  }
}

/* scores[i * stride + p] = scale * dot(qp_i, K_p) for p in [0, n) and the
 * @nq queries at @qp (head_dim floats apart). Tiles of 8 rows are expanded
 * and transposed 8 dimensions at a time, in registers (through a buffer,
 * the stores and loads cost more than the transpose: 3-6% at 4096
 * positions), and every query runs down those dimensions of 2 tiles (4
 * when there are only 1 or 2 queries), so 8 or so independent sums hide
 * the adds' latency. */
INLINE void
scores_tiles (LlmAttnType type, int nq, const LlmAttnRows *k, size_t offset,
    size_t head_dim, const float *qp, size_t n, float scale, float *scores, size_t stride)
{
  enum { TP_MAX = 4 };
  const int tp = nq <= 2 ? 4 : 2;
  size_t s0, s1;
  keys_begin (type, k, offset, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  for (size_t p0 = 0; p0 < n; p0 += 8 * (size_t) tp) {
    const uint8_t *rows[TP_MAX][8];
    size_t cnt[TP_MAX];
    UNROLL for (int t = 0; t < tp; t++)
      cnt[t] = tile8 (k, p0 + 8 * (size_t) t, n, rows[t], rows[0]);
    prefetch_rows (k, p0 + PREFETCH_ROWS, n, 8 * (size_t) tp, s0, s1);

    __m256 acc[QB][TP_MAX];
    UNROLL for (int i = 0; i < nq; i++)
      UNROLL for (int t = 0; t < tp; t++)
        acc[i][t] = _mm256_setzero_ps ();

    for (size_t c = 0; c < head_dim; c += 8) {
      UNROLL for (int t = 0; t < tp; t++) {
        __m256 x[8];
        for (int r = 0; r < 8; r++)
          x[r] = load8 (type, rows[t][r], offset + c);
        transpose8 (x);
        UNROLL for (int j = 0; j < 8; j++)
          UNROLL for (int i = 0; i < nq; i++)
            acc[i][t] = madd_exact (type, _mm256_broadcast_ss (qp + i * head_dim + c + j), x[j],
                acc[i][t]);
      }
    }

    store_tiles (nq, tp, acc, cnt, p0, scale, scores, stride);
  }
}

_Static_assert (LLM_AVX2_ATTN_GROUPS <= LLM_ATTN_GROUPS_MAX, "llm_avx2_attn_drive holds the groups");

/* Head sizes scores_groups keeps a tile pair's dimensions for. */
#define KB_DIMS 256

/* scores_tiles for group @g (2 tiles a pass) against the 16 rows from
 * @p0 whose transposed dimensions @kb holds (chunk c's tile t, dimension
 * j at kb[2 (c / 8) + t][j]): the same products in the same order. */
INLINE void
group_scores (LlmAttnType type, int nq, const LlmAttnCall *g, const __m256 (*kb)[8],
    size_t head_dim, size_t p0, float scale)
{
  __m256 acc[QB][2];
  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int t = 0; t < 2; t++)
      acc[i][t] = _mm256_setzero_ps ();
  for (size_t c = 0; c < head_dim; c += 8)
    UNROLL for (int t = 0; t < 2; t++) {
      const __m256 *x = kb[2 * (c / 8) + t];
      UNROLL for (int j = 0; j < 8; j++)
        UNROLL for (int i = 0; i < nq; i++)
          acc[i][t] = madd_exact (type, _mm256_broadcast_ss (g->qp + i * head_dim + c + j), x[j],
              acc[i][t]);
    }
  const __m256 vscale = _mm256_set1_ps (scale);
  UNROLL for (int t = 0; t < 2; t++) {
    const size_t pt = p0 + 8 * (size_t) t;
    if (pt >= g->n_max)
      continue;
    const size_t cnt = g->n_max - pt < 8 ? g->n_max - pt : 8;
    UNROLL for (int i = 0; i < nq; i++) {
      const __m256 sv = _mm256_mul_ps (acc[i][t], vscale);
      if (cnt == 8) {
        _mm256_storeu_ps (g->scores + i * g->n_max + pt, sv);
      } else {
        float tmp[8];
        _mm256_storeu_ps (tmp, sv);
        memcpy (g->scores + i * g->n_max + pt, tmp, cnt * sizeof (float));
      }
    }
  }
}

/* scores_tiles for several groups of queries over the same keys (a
 * prefill chunk's rows, a verification's): each tile of keys is expanded
 * and transposed once, into @kb, for all of them, rather than once a
 * group of 4 (where it cost as many operations as the products). */
INLINE void
scores_groups (LlmAttnType type, const LlmAttnCall *g, int ng, const LlmAttnRows *k,
    size_t offset, size_t head_dim, float scale)
{
  const size_t n = llm_attn_calls_n_max (g, ng);
  size_t s0, s1;
  keys_begin (type, k, offset, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  __m256 kb[2 * KB_DIMS / 8][8];
  for (size_t p0 = 0; p0 < n; p0 += 16) {
    const uint8_t *rows[2][8];
    UNROLL for (int t = 0; t < 2; t++)
      tile8 (k, p0 + 8 * (size_t) t, n, rows[t], rows[0]);
    prefetch_rows (k, p0 + PREFETCH_ROWS, n, 16, s0, s1);
    for (size_t c = 0; c < head_dim; c += 8)
      UNROLL for (int t = 0; t < 2; t++) {
        __m256 *x = kb[2 * (c / 8) + t];
        for (int r = 0; r < 8; r++)
          x[r] = load8 (type, rows[t][r], offset + c);
        transpose8 (x);
      }
    for (int i = 0; i < ng; i++) {
      if (g[i].n_max <= p0)
        continue;
      switch (g[i].nq) {
        case 1: group_scores (type, 1, &g[i], (const __m256 (*)[8]) kb, head_dim, p0, scale); break;
        case 2: group_scores (type, 2, &g[i], (const __m256 (*)[8]) kb, head_dim, p0, scale); break;
        case 3: group_scores (type, 3, &g[i], (const __m256 (*)[8]) kb, head_dim, p0, scale); break;
        default: group_scores (type, 4, &g[i], (const __m256 (*)[8]) kb, head_dim, p0, scale); break;
      }
    }
  }
}

/* Keys in panels (LlmAttnRows.panels): @tp tiles of 8 positions from
 * @p0, each a panel and its half (lane offset @ln 0 or 8; a tile wholly
 * past @n reads the first one's; lanes at or past n are computed and
 * never stored), and how many of each are below n. */
INLINE void
panel_tiles (const LlmAttnRows *k, size_t p0, size_t n, int tp, const uint8_t **pan,
    size_t *ln, size_t *cnt)
{
  for (int t = 0; t < tp; t++) {
    const size_t pt = p0 + 8 * (size_t) t;
    cnt[t] = pt < n ? (n - pt < 8 ? n - pt : 8) : 0;
    pan[t] = pt < n ? llm_attn_panel (k, pt) : pan[0];
    ln[t] = pt < n ? pt % LLM_ATTN_PANEL : ln[0];
  }
}

/* fn (T, n, ...) for n = @nq (1 to 4), so that the query loops unroll. */
#define BY_NQ4(fn, T, nq, ...) \
  switch (nq) { \
    case 1: fn (T, 1, __VA_ARGS__); break; \
    case 2: fn (T, 2, __VA_ARGS__); break; \
    case 3: fn (T, 3, __VA_ARGS__); break; \
    default: fn (T, 4, __VA_ARGS__); break; \
  }

/* acc[i][t] += qp_i[j] * K_p[j] in lane p - p0 - 8 t of tile t, for
 * dimensions j of [j0, j1) in order, with the reference's roundings
 * (madd_exact); @kd is dimension j of the tile's 8 positions. */
#define PANEL_DIMS(T, nq, tp, j0, j1, kd) \
  for (size_t j = (j0); j < (j1); j++) { \
    __m256 kj[4]; \
    UNROLL for (int t = 0; t < (tp); t++) \
      kj[t] = (kd); \
    UNROLL for (int i = 0; i < (nq); i++) { \
      const __m256 b = _mm256_broadcast_ss (qp + i * head_dim + j); \
      UNROLL for (int t = 0; t < (tp); t++) \
        acc[i][t] = madd_exact ((T), b, kj[t], acc[i][t]); \
    } \
  }

/* acc[i][t] = dot (qp_i, K_p) in lane p - p0 - 8 t of tile t, dimensions
 * in order as scores_tiles takes them, each dimension of 8 positions one
 * load and conversion (Q8_0: and the multiply by the block's scales that
 * load8 does, exact in float) instead of a transpose's share. */
INLINE void
panel_products (LlmAttnType type, int nq, int tp, const uint8_t *const *pan, const size_t *ln,
    size_t head_dim, const float *qp, __m256 acc[QB][4])
{
  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int t = 0; t < tp; t++)
      acc[i][t] = _mm256_setzero_ps ();
  if (type == LLM_ATTN_F16) {
    PANEL_DIMS (LLM_ATTN_F16, nq, tp, 0, head_dim, _mm256_cvtph_ps (_mm_loadu_si128 (
                (const __m128i *) ((const uint16_t *) pan[t] + LLM_ATTN_PANEL * j + ln[t]))))
    return;
  }
  for (size_t c = 0; c < head_dim; c += LLM_QK8_0) {
    __m256 d[4];
    UNROLL for (int t = 0; t < tp; t++)
      d[t] = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) (pan[t]
                      + LLM_ATTN_PANEL * head_dim) + LLM_ATTN_PANEL * (c / LLM_QK8_0) + ln[t])));
    PANEL_DIMS (LLM_ATTN_Q8_0, nq, tp, c, c + LLM_QK8_0, _mm256_mul_ps (_mm256_cvtepi32_ps (
                _mm256_cvtepi8_epi32 (_mm_loadl_epi64 ((const __m128i *) (pan[t]
                            + LLM_ATTN_PANEL * j + ln[t])))), d[t]))
  }
}

/* scores_tiles over keys in panels. */
INLINE void
scores_panels_tiles (LlmAttnType type, int nq, const LlmAttnRows *k, size_t head_dim,
    const float *qp, size_t n, float scale, float *scores, size_t stride)
{
  const int tp = nq <= 2 ? 4 : 2;
  size_t s0, s1;
  keys_begin (type, k, 0, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  for (size_t p0 = 0; p0 < n; p0 += 8 * (size_t) tp) {
    const uint8_t *pan[4];
    size_t ln[4], cnt[4];
    panel_tiles (k, p0, n, tp, pan, ln, cnt);
    prefetch_rows (k, p0 + PREFETCH_ROWS, n, 8 * (size_t) tp, s0, s1);
    __m256 acc[QB][4];
    panel_products (type, nq, tp, pan, ln, head_dim, qp, acc);
    store_tiles (nq, tp, acc, cnt, p0, scale, scores, stride);
  }
}

/* scores_groups over keys in panels: each panel is read from memory
 * once, by the first group, and from L1 by the others. */
INLINE void
scores_groups_panels (LlmAttnType type, const LlmAttnCall *g, int ng, const LlmAttnRows *k,
    size_t head_dim, float scale)
{
  const size_t n = llm_attn_calls_n_max (g, ng);
  size_t s0, s1;
  keys_begin (type, k, 0, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  for (size_t p0 = 0; p0 < n; p0 += 16) {
    prefetch_rows (k, p0 + PREFETCH_ROWS, n, 16, s0, s1);
    for (int i = 0; i < ng; i++) {
      if (g[i].n_max <= p0)
        continue;
      const uint8_t *pan[2];
      size_t ln[2], cnt[2];
      panel_tiles (k, p0, g[i].n_max, 2, pan, ln, cnt);
      __m256 acc[QB][4];
      BY_NQ4 (panel_products, type, g[i].nq, 2, pan, ln, head_dim, g[i].qp, acc)
      store_tiles (g[i].nq, 2, acc, cnt, p0, scale, g[i].scores, g[i].n_max);
    }
  }
}

/* One group's scores over keys in panels, by their type. */
static void
scores_panels (const LlmAttnCall *c, const LlmAttnRows *k, size_t head_dim, float scale)
{
  if (k->type == LLM_ATTN_F16) {
    BY_NQ4 (scores_panels_tiles, LLM_ATTN_F16, c->nq, k, head_dim, c->qp, c->n_max, scale,
        c->scores, c->n_max)
  } else {
    BY_NQ4 (scores_panels_tiles, LLM_ATTN_Q8_0, c->nq, k, head_dim, c->qp, c->n_max, scale,
        c->scores, c->n_max)
  }
}

PANELS_BY_TYPE (panels_by_type)

/* out_i[j0, j0 + 8 * nw) += probs_i[p] * V_p[d, d + 8 * nw) for the
 * @cnt rows from @row on (positions p0...), in order; rows at or past
 * @n_all are skipped by the queries that do not see them. */
INLINE void
values_rows (LlmAttnType type, int nq, int nw, const uint8_t *row, size_t row_bytes,
    size_t p0, size_t cnt, size_t n_all, const size_t *n, size_t d, const float *probs,
    size_t stride, float *const *out, size_t j0, const uint8_t *pf, size_t pf_cnt,
    size_t s0, size_t s1)
{
  __m256 acc[QB][2];
  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int w = 0; w < nw; w++)
      acc[i][w] = _mm256_loadu_ps (out[i] + j0 + 8 * w);

  const size_t all = n_all > p0 ? (n_all - p0 < cnt ? n_all - p0 : cnt) : 0;
  size_t r = 0;
  for (; r < all; r++, row += row_bytes) {
    if (r < pf_cnt)
      prefetch_slice (pf + r * row_bytes, s0, s1);
    __m256 x[2];
    UNROLL for (int w = 0; w < nw; w++)
      x[w] = load8 (type, row, d + 8 * w);
    UNROLL for (int i = 0; i < nq; i++) {
      const __m256 b = _mm256_broadcast_ss (probs + i * stride + p0 + r);
      UNROLL for (int w = 0; w < nw; w++)
        acc[i][w] = madd_exact (type, b, x[w], acc[i][w]);
    }
  }
  for (; r < cnt; r++, row += row_bytes) {
    if (r < pf_cnt)
      prefetch_slice (pf + r * row_bytes, s0, s1);
    __m256 x[2];
    UNROLL for (int w = 0; w < nw; w++)
      x[w] = load8 (type, row, d + 8 * w);
    UNROLL for (int i = 0; i < nq; i++) {
      if (p0 + r >= n[i])
        continue;
      const __m256 b = _mm256_broadcast_ss (probs + i * stride + p0 + r);
      UNROLL for (int w = 0; w < nw; w++)
        acc[i][w] = madd_exact (type, b, x[w], acc[i][w]);
    }
  }

  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int w = 0; w < nw; w++)
      _mm256_storeu_ps (out[i] + j0 + 8 * w, acc[i][w]);
}

/* out_i += sum over p < n_i of probs_i[p] * V_p[offset, offset + head_dim),
 * positions in order for every value. One cache block of rows at a time,
 * all value chunks of it while its rows are in L1; the first chunk's pass
 * prefetches the next block's rows. */
INLINE void
values_all (LlmAttnType type, int nq, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const float *probs, size_t stride, const size_t *n, size_t n_min,
    size_t n_max, float *const *out)
{
  const size_t br = v->block_rows, rb = v->row_bytes;
  size_t s0, s1;
  slice_bytes (type, offset, head_dim, &s0, &s1);
  const uint8_t *base = llm_attn_row (v, 0);
  for (size_t p0 = 0; p0 < n_max; p0 += br) {
    const size_t cnt = n_max - p0 < br ? n_max - p0 : br;
    const uint8_t *next = NULL;
    size_t next_cnt = 0;
    if (p0 + br < n_max) {
      next = llm_attn_row (v, p0 + br);
      next_cnt = n_max - p0 - br < br ? n_max - p0 - br : br;
    }
    size_t j = 0;
    for (; j + 16 <= head_dim; j += 16)
      values_rows (type, nq, 2, base, rb, p0, cnt, n_min, n, offset + j, probs, stride, out, j,
          next, j == 0 ? next_cnt : 0, s0, s1);
    if (j < head_dim)
      values_rows (type, nq, 1, base, rb, p0, cnt, n_min, n, offset + j, probs, stride, out, j,
          next, j == 0 ? next_cnt : 0, s0, s1);
    base = next;
  }
}

/* One instance per row type and query count, so that inside each the
 * type switch and the query loops disappear. */
#define INSTANCES(T, name)                                                            \
  static void                                                                         \
  scores_##name (int nq, const LlmAttnRows *k, size_t offset, size_t head_dim,        \
      const float *qp, size_t n, float scale, float *scores, size_t stride)           \
  {                                                                                   \
    switch (nq) {                                                                     \
      case 1: scores_tiles (T, 1, k, offset, head_dim, qp, n, scale, scores, stride); break; \
      case 2: scores_tiles (T, 2, k, offset, head_dim, qp, n, scale, scores, stride); break; \
      case 3: scores_tiles (T, 3, k, offset, head_dim, qp, n, scale, scores, stride); break; \
      default: scores_tiles (T, 4, k, offset, head_dim, qp, n, scale, scores, stride); break; \
    }                                                                                 \
  }                                                                                   \
  static void                                                                         \
  scores_groups_##name (const LlmAttnCall *g, int ng, const LlmAttnRows *k,            \
      size_t offset, size_t head_dim, float scale)                                    \
  {                                                                                   \
    scores_groups (T, g, ng, k, offset, head_dim, scale);                             \
  }                                                                                   \
  static void                                                                         \
  values_##name (int nq, const LlmAttnRows *v, size_t offset, size_t head_dim,        \
      const float *probs, size_t stride, const size_t *n, size_t n_min, size_t n_max, \
      float *const *out)                                                              \
  {                                                                                   \
    switch (nq) {                                                                     \
      case 1: values_all (T, 1, v, offset, head_dim, probs, stride, n, n_min, n_max, out); break; \
      case 2: values_all (T, 2, v, offset, head_dim, probs, stride, n, n_min, n_max, out); break; \
      case 3: values_all (T, 3, v, offset, head_dim, probs, stride, n, n_min, n_max, out); break; \
      default: values_all (T, 4, v, offset, head_dim, probs, stride, n, n_min, n_max, out); break; \
    }                                                                                 \
  }

INSTANCES (LLM_ATTN_F32, f32)
INSTANCES (LLM_ATTN_F16, f16)
INSTANCES (LLM_ATTN_Q8_0, q8_0)
INSTANCES (LLM_ATTN_Q4_0, q4_0)

void
llm_avx2_attn_round_to_half (float *x, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph (_mm256_loadu_ps (x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps (x + i, _mm256_cvtph_ps (h));
  }
  for (; i < n; i++)
    x[i] = _cvtsh_ss (_cvtss_sh (x[i], _MM_FROUND_TO_NEAREST_INT));
}

float
llm_avx2_attn_max (const float *x, size_t n)
{
  __m256 m = _mm256_set1_ps (-INFINITY);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    m = _mm256_max_ps (m, _mm256_loadu_ps (x + i));
  float tmp[8], max = -INFINITY;
  _mm256_storeu_ps (tmp, m);
  for (int j = 0; j < 8; j++)
    max = tmp[j] > max ? tmp[j] : max;
  for (; i < n; i++)
    max = x[i] > max ? x[i] : max;
  return max;
}

/* llm_attn_softmax on the rows of @nq queries (row i at x + i * stride,
 * n[i] long), with the same roundings: exp.h's exp of x - max in float,
 * position p's exponential added in double to partial sum p % 16, the
 * lanes of four double vectors over each 16 positions (the rest in the
 * same partial sums one at a time), folded in llm_attn_fold_sums' order,
 * one float reciprocal, a multiply each. */
static void
softmax_rows (float *x, size_t stride, const size_t *n, int nq)
{
  for (int i = 0; i < nq; i++) {
    float *xi = x + i * stride;
    const size_t ni = n[i];
    const __m256 vmax = _mm256_set1_ps (llm_avx2_attn_max (xi, ni));
    __m256d s[4] = { _mm256_setzero_pd (), _mm256_setzero_pd (), _mm256_setzero_pd (),
      _mm256_setzero_pd () };
    size_t p = 0;
    for (; p + 16 <= ni; p += 16) {
      UNROLL for (int h = 0; h < 2; h++) {
        const __m256 e = llm_exp8 (_mm256_sub_ps (_mm256_loadu_ps (xi + p + 8 * h), vmax));
        _mm256_storeu_ps (xi + p + 8 * h, e);
        s[2 * h] = _mm256_add_pd (s[2 * h], _mm256_cvtps_pd (_mm256_castps256_ps128 (e)));
        s[2 * h + 1] = _mm256_add_pd (s[2 * h + 1], _mm256_cvtps_pd (_mm256_extractf128_ps (e, 1)));
      }
    }
    double part[LLM_ATTN_SUM_PARTS];
    UNROLL for (int h = 0; h < 4; h++)
      _mm256_storeu_pd (part + 4 * h, s[h]);
    for (; p < ni; p++) {
      xi[p] = llm_exp_ref (xi[p] - _mm256_cvtss_f32 (vmax));
      part[p % LLM_ATTN_SUM_PARTS] += xi[p];
    }
    const __m256 inv = _mm256_set1_ps ((float) (1.0 / llm_attn_fold_sums (part)));
    size_t q = 0;
    for (; q + 8 <= ni; q += 8)
      _mm256_storeu_ps (xi + q, _mm256_mul_ps (_mm256_loadu_ps (xi + q), inv));
    for (; q < ni; q++)
      xi[q] *= _mm256_cvtss_f32 (inv);
  }
}

bool
llm_avx2_attn_begin (LlmAttnCall *c, const LlmAttnQuery *queries, size_t n_q, int max,
    LlmAttnType ktype, size_t head_dim, float *scratch)
{
  const float *q[LLM_ATTN_CALL_MAX];
  c->nq = 0;
  c->n_min = SIZE_MAX;
  c->n_max = 0;
  for (size_t i = 0; i < n_q && i < (size_t) max; i++) {
    /* Queries with nothing to attend to only get zeros. */
    memset (queries[i].out, 0, head_dim * sizeof (float));
    if (queries[i].n_kv == 0)
      continue;
    c->out[c->nq] = queries[i].out;
    q[c->nq] = queries[i].q;
    c->n[c->nq] = queries[i].n_kv;
    c->n_min = c->n[c->nq] < c->n_min ? c->n[c->nq] : c->n_min;
    c->n_max = c->n[c->nq] > c->n_max ? c->n[c->nq] : c->n_max;
    c->nq++;
  }
  if (c->nq == 0)
    return false;
  c->scores = scratch;
  c->qp = scratch + (size_t) c->nq * c->n_max;
  for (int i = 0; i < c->nq; i++) {
    memcpy (c->qp + i * head_dim, q[i], head_dim * sizeof (float));
    /* ggml rounds the F32 operand of an F16 product to half. */
    if (ktype == LLM_ATTN_F16)
      llm_avx2_attn_round_to_half (c->qp + i * head_dim, head_dim);
  }
  return true;
}

void
llm_avx2_attn_prefetch_values (const LlmAttnCall *c, const LlmAttnRows *v, size_t offset,
    size_t head_dim)
{
  size_t s0, s1;
  slice_bytes (v->type, offset, head_dim, &s0, &s1);
  const uint8_t *row = llm_attn_row (v, 0);
  const size_t m = c->n_max < v->block_rows ? c->n_max : v->block_rows;
  for (size_t r = 0; r < m; r++)
    prefetch_slice (row + r * v->row_bytes, s0, s1);
}

void
llm_avx2_attn_probs (LlmAttnCall *c, const LlmAttnRows *v, size_t offset, size_t head_dim)
{
  llm_avx2_attn_prefetch_values (c, v, offset, head_dim);
  softmax_rows (c->scores, c->n_max, c->n, c->nq);
  if (v->type == LLM_ATTN_F16)
    for (int i = 0; i < c->nq; i++)
      llm_avx2_attn_round_to_half (c->scores + i * c->n_max, c->n[i]);
}

/* One group's scores with its own expanding of the keys. */
static void
scores_call (const LlmAttnCall *c, const LlmAttnRows *k, size_t offset, size_t head_dim,
    float scale)
{
  if (k->panels) {
    scores_panels (c, k, head_dim, scale);
    return;
  }
  switch (k->type) {
    case LLM_ATTN_F32:
      scores_f32 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
    case LLM_ATTN_F16:
      scores_f16 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
    case LLM_ATTN_Q8_0:
      scores_q8_0 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
    case LLM_ATTN_Q4_0:
      scores_q4_0 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
  }
}

/* One group's probabilities and values. */
static void
probs_values_call (LlmAttnCall *c, const LlmAttnRows *v, size_t offset, size_t head_dim)
{
  llm_avx2_attn_probs (c, v, offset, head_dim);
  switch (v->type) {
    case LLM_ATTN_F32:
      values_f32 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
    case LLM_ATTN_F16:
      values_f16 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
    case LLM_ATTN_Q8_0:
      values_q8_0 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
    case LLM_ATTN_Q4_0:
      values_q4_0 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
  }
}

void
llm_avx2_attn_drive (const LlmAttnDriver *d, const LlmAttnRows *k, const LlmAttnRows *v,
    size_t offset, size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale,
    float *scratch)
{
  LlmAttnCall c[LLM_ATTN_GROUPS_MAX];
  assert (d->max_groups <= LLM_ATTN_GROUPS_MAX && n_q <= (size_t) (d->per_group * d->max_groups));
  const size_t per = (size_t) d->per_group;
  int ng = 0;
  float *at = scratch;
  for (size_t i = 0; i < n_q && ng < d->max_groups; i += per) {
    if (!llm_avx2_attn_begin (&c[ng], queries + i, n_q - i < per ? n_q - i : per, d->per_group,
            k->type, head_dim, at))
      continue;
    at += (size_t) c[ng].nq * (c[ng].n_max + head_dim);
    ng++;
  }
  if (ng > 1 && k->panels) {
    d->panels (c, ng, k, head_dim, scale);
  } else if (ng > 1 && head_dim <= d->groups_dims && d->groups[k->type] != NULL) {
    d->groups[k->type] (c, ng, k, offset, head_dim, scale);
  } else {
    for (int i = 0; i < ng; i++)
      d->scores (&c[i], k, offset, head_dim, scale);
  }
  for (int i = 0; i < ng; i++)
    d->finish (&c[i], v, offset, head_dim);
}

void
llm_avx2_attention (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale, float *scratch)
{
  static const LlmAttnDriver driver = {
    .per_group = QB, .max_groups = LLM_AVX2_ATTN_GROUPS, .scores = scores_call,
    .groups = { [LLM_ATTN_F32] = scores_groups_f32, [LLM_ATTN_F16] = scores_groups_f16,
      [LLM_ATTN_Q8_0] = scores_groups_q8_0, [LLM_ATTN_Q4_0] = scores_groups_q4_0 },
    .groups_dims = KB_DIMS, .panels = panels_by_type, .finish = probs_values_call,
  };
  llm_avx2_attn_drive (&driver, k, v, offset, head_dim, queries, n_q, scale, scratch);
}

/* roundf (half away from zero) of each lane, exactly: the integer part,
 * plus one step away from zero where the dropped fraction is at least a
 * half (x - trunc(x) is exact). */
static inline __m256
round_half_away (__m256 x)
{
  const __m256 t = _mm256_round_ps (x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_set1_ps (-0.0f);
  const __m256 frac = _mm256_andnot_ps (sign, _mm256_sub_ps (x, t));
  const __m256 step = _mm256_or_ps (_mm256_and_ps (x, sign), _mm256_set1_ps (1.0f));
  const __m256 big = _mm256_cmp_ps (frac, _mm256_set1_ps (0.5f), _CMP_GE_OQ);
  return _mm256_add_ps (t, _mm256_and_ps (big, step));
}

bool
llm_avx2_attn_row_store (LlmAttnType type, const float *src, void *dst, size_t n)
{
  if (type == LLM_ATTN_F16) {
    uint16_t *h = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128 ((__m128i *) (h + i),
          _mm256_cvtps_ph (_mm256_loadu_ps (src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
      h[i] = _cvtss_sh (src[i], _MM_FROUND_TO_NEAREST_INT);
    return true;
  }
  if (type != LLM_ATTN_Q8_0)
    return false;

  /* llm_quantize_row_q8_0: d = amax / 127, id = 1 / d, roundf (x * id). */
  LlmBlockQ8_0 *out = dst;
  const __m256 abs_mask = _mm256_castsi256_ps (_mm256_set1_epi32 (0x7fffffff));
  for (size_t b = 0; b < n / LLM_QK8_0; b++) {
    const float *x = src + b * LLM_QK8_0;
    __m256 v[4], m = _mm256_setzero_ps ();
    for (int j = 0; j < 4; j++) {
      v[j] = _mm256_loadu_ps (x + 8 * j);
      m = _mm256_max_ps (m, _mm256_and_ps (v[j], abs_mask));
    }
    __m128 m4 = _mm_max_ps (_mm256_castps256_ps128 (m), _mm256_extractf128_ps (m, 1));
    m4 = _mm_max_ps (m4, _mm_movehl_ps (m4, m4));
    m4 = _mm_max_ss (m4, _mm_movehdup_ps (m4));
    const float amax = _mm_cvtss_f32 (m4);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = _cvtss_sh (d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 vid = _mm256_set1_ps (id);
    __m256i q[4];
    for (int j = 0; j < 4; j++)
      q[j] = _mm256_cvttps_epi32 (round_half_away (_mm256_mul_ps (v[j], vid)));
    /* int32 -> int8 in element order: packs work per 128-bit lane, so put
     * the lanes back in order afterwards. */
    const __m256i w01 = _mm256_packs_epi32 (q[0], q[1]);
    const __m256i w23 = _mm256_packs_epi32 (q[2], q[3]);
    const __m256i bytes = _mm256_packs_epi16 (w01, w23);
    const __m256i order = _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256 ((__m256i *) out[b].qs, _mm256_permutevar8x32_epi32 (bytes, order));
  }
  return true;
}
