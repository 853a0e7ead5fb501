/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AVX-512 attention over F16 (the default), Q8_0 and Q4_0 keys and
 * values. Built with AVX-512F and reached only through
 * llm_attention_batch() after attention.c's CPU check.
 *
 * The same computation as attention-avx2.c, bit for bit (and so the scalar
 * reference's): every score sums q[j] * k_p[j] over j in order, every
 * output value adds prob_p * v_p[j] over p in order, and a multiply is
 * fused with its add only where the product is exact (F16: see
 * madd_exact). What changes is the width: 16
 * key rows (scores) or 16 value dimensions per vector, and up to 8 queries
 * share each tile's conversion and transpose, which cost as much as the
 * products at 4 queries. The softmax is attention-avx2.c's, 16 lanes wide
 * (softmax16). */
#include "attention-avx512.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "attention-avx2.h"
#include "attention-simd.h"
#include "exp-simd.h"

#define ZQ LLM_ATTN_CALL_MAX  /* queries per call */
#define PREFETCH_ROWS 64

bool
llm_avx512_attention_fits (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim)
{
  return k->type == v->type && k->type != LLM_ATTN_F32 && head_dim > 0
      && head_dim % 16 == 0 && offset % 16 == 0 && k->block_rows % 16 == 0
      && v->block_rows % 16 == 0;
}

/* Values [d, d + 16) of a row as floats, exactly as llm_attn_row_load
 * gives them; @d is a multiple of 16, so they never straddle a block. */
INLINE __m512
load16 (LlmAttnType type, const uint8_t *row, size_t d)
{
  switch (type) {
    case LLM_ATTN_F16:
      return _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) ((const uint16_t *) row + d)));
    case LLM_ATTN_Q8_0: {
      const LlmBlockQ8_0 *b = (const LlmBlockQ8_0 *) row + d / LLM_QK8_0;
      const __m128i q = _mm_loadu_si128 ((const __m128i *) (b->qs + d % LLM_QK8_0));
      return _mm512_mul_ps (_mm512_cvtepi32_ps (_mm512_cvtepi8_epi32 (q)),
          _mm512_set1_ps (_cvtsh_ss (b->d)));
    }
    case LLM_ATTN_Q4_0:
    default: {
      /* Values 0-15 of a block are the low nibbles, 16-31 the high. */
      const LlmBlockQ4_0 *b = (const LlmBlockQ4_0 *) row + d / LLM_QK4_0;
      __m128i q = _mm_loadu_si128 ((const __m128i *) b->qs);
      if (d % LLM_QK4_0 >= 16)
        q = _mm_srli_epi16 (q, 4);
      q = _mm_and_si128 (q, _mm_set1_epi8 (0x0f));
      const __m512i w = _mm512_sub_epi32 (_mm512_cvtepu8_epi32 (q), _mm512_set1_epi32 (8));
      return _mm512_mul_ps (_mm512_cvtepi32_ps (w), _mm512_set1_ps (_cvtsh_ss (b->d)));
    }
  }
}

/* madd_exact (attention-simd.h), 16 wide. */
INLINE __m512
madd_exact16 (LlmAttnType type, __m512 b, __m512 x, __m512 acc)
{
  if (type == LLM_ATTN_F16)
    return _mm512_fmadd_ps (b, x, acc);
  return _mm512_add_ps (acc, _mm512_mul_ps (b, x));
}

/* One instance per row type and query count, so that inside each the
 * type switch and the query loops disappear. */
#define BY_NQ(fn, T, nq, ...) \
  switch (nq) { \
    case 1: fn (T, 1, __VA_ARGS__); break; \
    case 2: fn (T, 2, __VA_ARGS__); break; \
    case 3: fn (T, 3, __VA_ARGS__); break; \
    case 4: fn (T, 4, __VA_ARGS__); break; \
    case 5: fn (T, 5, __VA_ARGS__); break; \
    case 6: fn (T, 6, __VA_ARGS__); break; \
    case 7: fn (T, 7, __VA_ARGS__); break; \
    default: fn (T, 8, __VA_ARGS__); break; \
  }

enum { TP = 2, TR = 16 };  /* a tile pair: two tiles of 16 key rows */

/* The rows of the tile pair from @p0 (16 | block_rows, so each tile's rows
 * are consecutive in one block), the rows PREFETCH_ROWS further on asked
 * for meanwhile. A short last tile repeats a row rather than read past n;
 * tiles wholly past n repeat the first tile. */
INLINE void
tile_pair (const LlmAttnRows *k, size_t p0, size_t n, size_t s0, size_t s1,
    const uint8_t *rows[TP][TR])
{
  UNROLL for (int t = 0; t < TP; t++) {
    const size_t pt = p0 + TR * (size_t) t;
    if (pt >= n) {
      memcpy (rows[t], rows[0], sizeof rows[0]);
      continue;
    }
    const size_t cnt = n - pt < TR ? n - pt : TR;
    const uint8_t *base = llm_attn_row (k, pt);
    for (size_t r = 0; r < TR; r++)
      rows[t][r] = base + (r < cnt ? r : 0) * k->row_bytes;
  }
  prefetch_rows (k, p0 + PREFETCH_ROWS, n, TR * TP, s0, s1);
}

/* Dimensions @at .. @at + 7 of the tile pair's rows, expanded and
 * transposed (8 rows x 8 dimensions at a time): lane p of kt[t][j] is
 * row p's dimension at + j. */
INLINE void
tile_chunk (LlmAttnType type, const uint8_t *const rows[TP][TR], size_t at, __m512 kt[TP][8])
{
  UNROLL for (int t = 0; t < TP; t++) {
    __m256 lo[8], hi[8];
    UNROLL for (int r = 0; r < 8; r++) {
      lo[r] = load8 (type, rows[t][r], at);
      hi[r] = load8 (type, rows[t][8 + r], at);
    }
    transpose8 (lo);
    transpose8 (hi);
    UNROLL for (int j = 0; j < 8; j++)
      kt[t][j] = _mm512_insertf32x8 (_mm512_castps256_ps512 (lo[j]), hi[j], 1);
  }
}

/* Dimensions @at .. @at + 7 of a tile's 16 F16 rows, transposed as
 * halves: lane p of t[j] is row p's dimension at + j, ready for one
 * conversion. Rows r and 8 + r share a register (one in each 128-bit
 * lane), so the three unpack steps of an 8 x 8 transpose, which work
 * within lanes, leave rows 0-7 and 8-15 of each dimension side by side:
 * 32 shuffles for 128 values, where tile_chunk's transpose in floats
 * takes 56 and twice the conversions. */
INLINE void
tile8_f16 (const uint8_t *const rows[TR], size_t at, __m256i t[8])
{
  __m256i r[8], a[8], b[8];
  UNROLL for (int i = 0; i < 8; i++)
    r[i] = _mm256_loadu2_m128i ((const __m128i *) ((const uint16_t *) rows[8 + i] + at),
        (const __m128i *) ((const uint16_t *) rows[i] + at));
  UNROLL for (int i = 0; i < 4; i++) {
    a[2 * i] = _mm256_unpacklo_epi16 (r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm256_unpackhi_epi16 (r[2 * i], r[2 * i + 1]);
  }
  /* b[4 g + k]: rows 4 g .. 4 g + 3 (and 8 on), dimensions 2 k and 2 k + 1 */
  UNROLL for (int g = 0; g < 2; g++) {
    b[4 * g + 0] = _mm256_unpacklo_epi32 (a[4 * g + 0], a[4 * g + 2]);
    b[4 * g + 1] = _mm256_unpackhi_epi32 (a[4 * g + 0], a[4 * g + 2]);
    b[4 * g + 2] = _mm256_unpacklo_epi32 (a[4 * g + 1], a[4 * g + 3]);
    b[4 * g + 3] = _mm256_unpackhi_epi32 (a[4 * g + 1], a[4 * g + 3]);
  }
  UNROLL for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm256_unpacklo_epi64 (b[k], b[4 + k]);
    t[2 * k + 1] = _mm256_unpackhi_epi64 (b[k], b[4 + k]);
  }
}

/* scale * acc[i][t] to the scores of the tile pair's rows below @n. */
INLINE void
store_scores (int nq, __m512 acc[ZQ][TP], size_t p0, size_t n, float scale, float *scores,
    size_t stride)
{
  const __m512 vscale = _mm512_set1_ps (scale);
  UNROLL for (int t = 0; t < TP; t++) {
    const size_t pt = p0 + TR * (size_t) t;
    if (pt >= n)
      continue;
    const size_t cnt = n - pt < TR ? n - pt : TR;
    const __mmask16 m = (__mmask16) ((1u << cnt) - 1);
    UNROLL for (int i = 0; i < nq; i++)
      _mm512_mask_storeu_ps (scores + i * stride + pt, m, _mm512_mul_ps (acc[i][t], vscale));
  }
}

/* scores[i * stride + p] = scale * dot(qp_i, K_p) for p in [0, n) and the
 * nq queries at @qp (head_dim floats apart). Tiles of 16 rows are expanded
 * and transposed (tile_chunk) so that lane p of kt[t][j] is k_p[j]; each
 * query then runs down those dimensions of two tiles at once. */
INLINE void
scores_tiles (LlmAttnType type, int nq, const LlmAttnRows *k, size_t offset, size_t head_dim, const float *qp,
    size_t n, float scale, float *scores, size_t stride)
{
  size_t s0, s1;
  keys_begin (type, k, offset, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  for (size_t p0 = 0; p0 < n; p0 += TR * TP) {
    const uint8_t *rows[TP][TR];
    tile_pair (k, p0, n, s0, s1, rows);

    __m512 acc[ZQ][TP];
    UNROLL for (int i = 0; i < nq; i++)
      UNROLL for (int t = 0; t < TP; t++)
        acc[i][t] = _mm512_setzero_ps ();

    if (type == LLM_ATTN_F16 && nq <= 4) {
      /* F16 for a decode step's group: the tiles transposed as halves
       * (tile8_f16), each dimension converted as the queries use it, the
       * same products in the same order. With more queries the 16
       * registers of halves would spill; a prefill chunk's groups
       * (scores_groups) gained nothing from it, their products being
       * most of their time. */
      for (size_t c = 0; c < head_dim; c += 8) {
        __m256i h[TP][8];
        UNROLL for (int t = 0; t < TP; t++)
          tile8_f16 (rows[t], offset + c, h[t]);
        const float *qc = qp + c;
        UNROLL for (int j = 0; j < 8; j++) {
          __m512 kj[TP];
          UNROLL for (int t = 0; t < TP; t++)
            kj[t] = _mm512_cvtph_ps (h[t][j]);
          UNROLL for (int i = 0; i < nq; i++) {
            const __m512 b = _mm512_set1_ps (qc[i * head_dim + j]);
            UNROLL for (int t = 0; t < TP; t++)
              acc[i][t] = madd_exact16 (type, b, kj[t], acc[i][t]);
          }
        }
      }
      store_scores (nq, acc, p0, n, scale, scores, stride);
      continue;
    }
    /* Eight dimensions at a time, transposed into registers and used
     * there: through memory, each 64-byte load of a tile's dimension
     * would have waited on the two 32-byte stores of its halves (a store
     * cannot forward to a wider load), and at long context that wait was
     * most of the scores' time. The order over dimensions is unchanged. */
    for (size_t c = 0; c < head_dim; c += 8) {
      __m512 kt[TP][8];
      tile_chunk (type, (const uint8_t *const (*)[TR]) rows, offset + c, kt);
      const float *qc = qp + c;
      UNROLL for (int j = 0; j < 8; j++)
        UNROLL for (int i = 0; i < nq; i++) {
          const __m512 b = _mm512_set1_ps (qc[i * head_dim + j]);
          UNROLL for (int t = 0; t < TP; t++)
            acc[i][t] = madd_exact16 (type, b, kt[t][j], acc[i][t]);
        }
    }
    store_scores (nq, acc, p0, n, scale, scores, stride);
  }
}

_Static_assert (LLM_AVX512_ATTN_GROUPS <= LLM_ATTN_GROUPS_MAX, "llm_avx2_attn_drive holds the groups");

/* Head sizes scores_groups keeps a tile pair's dimensions for. */
#define KB_DIMS 256

/* scores_tiles for group @g against the tile pair at @p0 whose
 * transposed dimensions @kb holds (chunk c's kt[t][j] at kb[2 c + t][j]):
 * the same products in the same order. */
INLINE void
group_scores (LlmAttnType type, int nq, const LlmAttnCall *g, const __m512 (*kb)[8],
    size_t head_dim, size_t p0, float scale)
{
  __m512 acc[ZQ][TP];
  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int t = 0; t < TP; t++)
      acc[i][t] = _mm512_setzero_ps ();
  for (size_t c = 0; c < head_dim; c += 8) {
    const __m512 (*kt)[8] = kb + 2 * (c / 8);
    const float *qc = g->qp + c;
    UNROLL for (int j = 0; j < 8; j++)
      UNROLL for (int i = 0; i < nq; i++) {
        const __m512 b = _mm512_set1_ps (qc[i * head_dim + j]);
        UNROLL for (int t = 0; t < TP; t++)
          acc[i][t] = madd_exact16 (type, b, kt[t][j], acc[i][t]);
      }
  }
  store_scores (nq, acc, p0, g->n_max, scale, g->scores, g->n_max);
}

/* scores_tiles for several groups of queries over the same keys (a
 * prefill chunk's rows): each tile pair is expanded and transposed once,
 * into @kb, for all of them, rather than once a group (at 8 queries the
 * expanding and transposing took about as long as the products). */
INLINE void
scores_groups (LlmAttnType type, const LlmAttnCall *g, int ng, const LlmAttnRows *k,
    size_t offset, size_t head_dim, float scale)
{
  const size_t n = llm_attn_calls_n_max (g, ng);
  size_t s0, s1;
  keys_begin (type, k, offset, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  __m512 kb[2 * KB_DIMS / 8][8];
  for (size_t p0 = 0; p0 < n; p0 += TR * TP) {
    const uint8_t *rows[TP][TR];
    tile_pair (k, p0, n, s0, s1, rows);
    for (size_t c = 0; c < head_dim; c += 8)
      tile_chunk (type, (const uint8_t *const (*)[TR]) rows, offset + c, kb + 2 * (c / 8));
    for (int i = 0; i < ng; i++) {
      if (g[i].n_max <= p0)
        continue;
      BY_NQ (group_scores, type, g[i].nq, &g[i], (const __m512 (*)[8]) kb, head_dim, p0, scale)
    }
  }
}

/* Keys in panels (LlmAttnRows.panels). The panels of the tile pair from
 * @p0 (a tile wholly past @n reads the first one's; the lanes of
 * positions at or past n are computed and never stored). */
INLINE void
panel_pair (const LlmAttnRows *k, size_t p0, size_t n, const uint8_t *pan[TP])
{
  UNROLL for (int t = 0; t < TP; t++) {
    const size_t pt = p0 + TR * (size_t) t;
    pan[t] = llm_attn_panel (k, pt < n ? pt : p0);
  }
}

/* acc[i][t] += qp_i[j] * K_p[j] in lane p - p0 of tile t, for dimensions
 * j of [j0, j1) in order, with the reference's roundings (madd_exact16);
 * @kd[t] is dimension j of the tile's 16 positions. */
#define PANEL_DIMS(T, nq, j0, j1, kd) \
  for (size_t j = (j0); j < (j1); j++) { \
    __m512 kj[TP]; \
    UNROLL for (int t = 0; t < TP; t++) \
      kj[t] = (kd); \
    UNROLL for (int i = 0; i < (nq); i++) { \
      const __m512 b = _mm512_set1_ps (qp[i * head_dim + j]); \
      UNROLL for (int t = 0; t < TP; t++) \
        acc[i][t] = madd_exact16 ((T), b, kj[t], acc[i][t]); \
    } \
  }

/* acc[i][t] = dot (qp_i, K_p) in lane p - p0 of tile t, dimensions in
 * order as scores_tiles takes them, each dimension of 16 positions one
 * load and conversion (Q8_0: and the multiply by the block's 16 scales
 * that load16 does, exact in float). */
INLINE void
panel_products (LlmAttnType type, int nq, const uint8_t *const pan[TP], size_t head_dim,
    const float *qp, __m512 acc[ZQ][TP])
{
  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int t = 0; t < TP; t++)
      acc[i][t] = _mm512_setzero_ps ();
  if (type == LLM_ATTN_F16) {
    PANEL_DIMS (LLM_ATTN_F16, nq, 0, head_dim, _mm512_cvtph_ps (_mm256_loadu_si256 (
                (const __m256i *) ((const uint16_t *) pan[t] + TR * j))))
    return;
  }
  for (size_t c = 0; c < head_dim; c += LLM_QK8_0) {
    __m512 d[TP];
    UNROLL for (int t = 0; t < TP; t++)
      d[t] = _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (pan[t] + TR * head_dim
                  + 2 * TR * (c / LLM_QK8_0))));
    PANEL_DIMS (LLM_ATTN_Q8_0, nq, c, c + LLM_QK8_0, _mm512_mul_ps (_mm512_cvtepi32_ps (
                _mm512_cvtepi8_epi32 (_mm_loadu_si128 ((const __m128i *) (pan[t] + TR * j)))),
            d[t]))
  }
}

/* scores_groups over keys in panels (for one group too): each tile
 * pair's panels are read from memory once, by the first group, and from
 * L1 by the others. */
INLINE void
scores_groups_panels (LlmAttnType type, const LlmAttnCall *g, int ng, const LlmAttnRows *k,
    size_t head_dim, float scale)
{
  const size_t n = llm_attn_calls_n_max (g, ng);
  size_t s0, s1;
  keys_begin (type, k, 0, head_dim, n, PREFETCH_ROWS, &s0, &s1);
  for (size_t p0 = 0; p0 < n; p0 += TR * TP) {
    const uint8_t *pan[TP];
    panel_pair (k, p0, n, pan);
    prefetch_rows (k, p0 + PREFETCH_ROWS, n, TR * TP, s0, s1);
    for (int i = 0; i < ng; i++) {
      if (g[i].n_max <= p0)
        continue;
      __m512 acc[ZQ][TP];
      BY_NQ (panel_products, type, g[i].nq, pan, head_dim, g[i].qp, acc)
      store_scores (g[i].nq, acc, p0, g[i].n_max, scale, g[i].scores, g[i].n_max);
    }
  }
}

/* out_i[j0, j0 + 16 * nw) += probs_i[p] * V_p[d, d + 16 * nw) for the @cnt
 * rows from @row on (positions p0...), in order; rows at or past @n_all
 * are skipped by the queries that do not see them. */
INLINE void
values_rows (LlmAttnType type, int nq, int nw, const uint8_t *row, size_t row_bytes, size_t p0, size_t cnt,
    size_t n_all, const size_t *n, size_t d, const float *probs, size_t stride,
    float *const *out, size_t j0, const uint8_t *pf, size_t pf_cnt, size_t s0, size_t s1)
{
  __m512 acc[ZQ][4];
  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int w = 0; w < nw; w++)
      acc[i][w] = _mm512_loadu_ps (out[i] + j0 + 16 * w);

  const size_t all = n_all > p0 ? (n_all - p0 < cnt ? n_all - p0 : cnt) : 0;
  for (size_t r = 0; r < cnt; r++, row += row_bytes) {
    if (r < pf_cnt)
      prefetch_slice (pf + r * row_bytes, s0, s1);
    __m512 x[4];
    UNROLL for (int w = 0; w < nw; w++)
      x[w] = load16 (type, row, d + 16 * w);
    UNROLL for (int i = 0; i < nq; i++) {
      if (r >= all && p0 + r >= n[i])
        continue;
      const __m512 b = _mm512_set1_ps (probs[i * stride + p0 + r]);
      UNROLL for (int w = 0; w < nw; w++)
        acc[i][w] = madd_exact16 (type, b, x[w], acc[i][w]);
    }
  }

  UNROLL for (int i = 0; i < nq; i++)
    UNROLL for (int w = 0; w < nw; w++)
      _mm512_storeu_ps (out[i] + j0 + 16 * w, acc[i][w]);
}

/* out_i += sum over p < n_i of probs_i[p] * V_p[offset, offset + head_dim),
 * positions in order for every value; one cache block of rows at a time,
 * the first pass over it prefetching the next block's rows. */
INLINE void
values_all (LlmAttnType type, int nq, const LlmAttnRows *v, size_t offset, size_t head_dim, const float *probs,
    size_t stride, const size_t *n, size_t n_min, size_t n_max, float *const *out)
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
    /* Up to 4 queries (a decode step's GQA group) keep 64 dimensions in
     * registers (16 sums), so each row's probabilities are broadcast once
     * and its loop runs once, not once per 32 dimensions: 246M Q4_0 decode
     * at depth 3000, 1.03x (8 of 8 pairs faster, Zen 5). More queries
     * would spill; taken as two passes of up to 4 queries that way, 8
     * queries ran as fast as in 32 dimensions at a time (a 9-row forward
     * of 246M Q8_0 at depth 600, three pairs). */
    if (nq <= 4)
      for (; j + 64 <= head_dim; j += 64)
        values_rows (type, nq, 4, base, rb, p0, cnt, n_min, n, offset + j, probs, stride, out, j,
            next, j == 0 ? next_cnt : 0, s0, s1);
    for (; j + 32 <= head_dim; j += 32)
      values_rows (type, nq, 2, base, rb, p0, cnt, n_min, n, offset + j, probs, stride, out, j, next,
          j == 0 ? next_cnt : 0, s0, s1);
    if (j < head_dim)
      values_rows (type, nq, 1, base, rb, p0, cnt, n_min, n, offset + j, probs, stride, out, j, next,
          j == 0 ? next_cnt : 0, s0, s1);
    base = next;
  }
}

/* --- probabilities -------------------------------------------------- */

/* The lanes of a 16-float step from @i that are below @n. */
INLINE __mmask16
lanes_below (size_t i, size_t n)
{
  return n - i >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << (n - i)) - 1);
}

/* llm_attn_softmax on the rows of @c's queries (row i at scores + i *
 * n_max, n[i] long) with the reference's roundings: exp.h's exp of x -
 * max in float (16 lanes here, each the scalar's bits), position p's
 * exponential added in double to partial sum p % 16, which is lane p % 16
 * of the two double vectors (positions a query does not have add +0,
 * which leaves a sum as it is), folded in llm_attn_fold_sums' order, one
 * float reciprocal, a multiply each. With @to_half (F16 values) each
 * probability is rounded to half precision in the same pass, as
 * llm_avx2_attn_round_to_half would in one of its own. */
static void
softmax16 (LlmAttnCall *c, bool to_half)
{
  float *x = c->scores;
  const size_t stride = c->n_max;
  for (int i = 0; i < c->nq; i++) {
    float *xi = x + i * stride;
    const size_t n = c->n[i];
    const __m512 max = _mm512_set1_ps (llm_avx2_attn_max (xi, n));
    __m512d lo = _mm512_setzero_pd (), hi = _mm512_setzero_pd ();
    size_t q = 0;
    for (; q + 16 <= n; q += 16) {
      const __m512 e = llm_exp16 (_mm512_sub_ps (_mm512_loadu_ps (xi + q), max));
      _mm512_storeu_ps (xi + q, e);
      lo = _mm512_add_pd (lo, _mm512_cvtps_pd (_mm512_castps512_ps256 (e)));
      hi = _mm512_add_pd (hi, _mm512_cvtps_pd (_mm512_extractf32x8_ps (e, 1)));
    }
    if (q < n) {
      const __mmask16 m = lanes_below (q, n);
      const __m512 e = _mm512_maskz_mov_ps (m,
          llm_exp16 (_mm512_sub_ps (_mm512_maskz_loadu_ps (m, xi + q), max)));
      _mm512_mask_storeu_ps (xi + q, m, e);
      lo = _mm512_add_pd (lo, _mm512_cvtps_pd (_mm512_castps512_ps256 (e)));
      hi = _mm512_add_pd (hi, _mm512_cvtps_pd (_mm512_extractf32x8_ps (e, 1)));
    }
    /* part[l] + part[l + 8], then + 4, + 2, + 1 */
    const __m512d s8 = _mm512_add_pd (lo, hi);
    const __m256d s4 = _mm256_add_pd (_mm512_castpd512_pd256 (s8),
        _mm512_extractf64x4_pd (s8, 1));
    const __m128d s2 = _mm_add_pd (_mm256_castpd256_pd128 (s4), _mm256_extractf128_pd (s4, 1));
    const double sum = _mm_cvtsd_f64 (_mm_add_sd (s2, _mm_unpackhi_pd (s2, s2)));
    const __m512 inv = _mm512_set1_ps ((float) (1.0 / sum));
    for (q = 0; q + 16 <= n; q += 16) {
      __m512 p = _mm512_mul_ps (_mm512_loadu_ps (xi + q), inv);
      if (to_half)
        p = _mm512_cvtph_ps (_mm512_cvtps_ph (p, _MM_FROUND_TO_NEAREST_INT));
      _mm512_storeu_ps (xi + q, p);
    }
    if (q < n) {
      const __mmask16 m = lanes_below (q, n);
      __m512 p = _mm512_mul_ps (_mm512_maskz_loadu_ps (m, xi + q), inv);
      if (to_half)
        p = _mm512_cvtph_ps (_mm512_cvtps_ph (p, _MM_FROUND_TO_NEAREST_INT));
      _mm512_mask_storeu_ps (xi + q, m, p);
    }
  }
}

/* llm_avx2_attn_probs with softmax16 for all the call's queries. */
static void
probs16 (LlmAttnCall *c, const LlmAttnRows *v, size_t offset, size_t head_dim)
{
  llm_avx2_attn_prefetch_values (c, v, offset, head_dim);
  softmax16 (c, v->type == LLM_ATTN_F16);
}

#define INSTANCES(T, name) \
  static void \
  scores_##name (int nq, const LlmAttnRows *k, size_t offset, size_t head_dim, \
      const float *qp, size_t n, float scale, float *scores, size_t stride) \
  { \
    BY_NQ (scores_tiles, T, nq, k, offset, head_dim, qp, n, scale, scores, stride) \
  } \
  static void \
  scores_groups_##name (const LlmAttnCall *g, int ng, const LlmAttnRows *k, size_t offset, \
      size_t head_dim, float scale) \
  { \
    scores_groups (T, g, ng, k, offset, head_dim, scale); \
  } \
  static void \
  values_##name (int nq, const LlmAttnRows *v, size_t offset, size_t head_dim, \
      const float *probs, size_t stride, const size_t *n, size_t n_min, size_t n_max, \
      float *const *out) \
  { \
    BY_NQ (values_all, T, nq, v, offset, head_dim, probs, stride, n, n_min, n_max, out) \
  }

INSTANCES (LLM_ATTN_F16, f16)

PANELS_BY_TYPE (panels_by_type)

INSTANCES (LLM_ATTN_Q8_0, q8_0)
INSTANCES (LLM_ATTN_Q4_0, q4_0)

/* One group's scores with its own expanding of the keys. */
static void
scores_call (const LlmAttnCall *c, const LlmAttnRows *k, size_t offset, size_t head_dim,
    float scale)
{
  if (k->panels) {
    panels_by_type (c, 1, k, head_dim, scale);
    return;
  }
  switch (k->type) {
    case LLM_ATTN_F16:
      scores_f16 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
    case LLM_ATTN_Q8_0:
      scores_q8_0 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
    default:
      scores_q4_0 (c->nq, k, offset, head_dim, c->qp, c->n_max, scale, c->scores, c->n_max);
      break;
  }
}

/* One group's probabilities and values. */
static void
probs_values_call (LlmAttnCall *c, const LlmAttnRows *v, size_t offset, size_t head_dim)
{
  probs16 (c, v, offset, head_dim);
  switch (v->type) {
    case LLM_ATTN_F16:
      values_f16 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
    case LLM_ATTN_Q8_0:
      values_q8_0 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
    default:
      values_q4_0 (c->nq, v, offset, head_dim, c->scores, c->n_max, c->n, c->n_min, c->n_max,
          c->out);
      break;
  }
}

void
llm_avx512_attention (const LlmAttnRows *k, const LlmAttnRows *v, size_t offset,
    size_t head_dim, const LlmAttnQuery *queries, size_t n_q, float scale, float *scratch)
{
  static const LlmAttnDriver driver = {
    .per_group = ZQ, .max_groups = LLM_AVX512_ATTN_GROUPS, .scores = scores_call,
    .groups = { [LLM_ATTN_F16] = scores_groups_f16, [LLM_ATTN_Q8_0] = scores_groups_q8_0,
      [LLM_ATTN_Q4_0] = scores_groups_q4_0 },
    .groups_dims = KB_DIMS, .panels = panels_by_type, .finish = probs_values_call,
  };
  llm_avx2_attn_drive (&driver, k, v, offset, head_dim, queries, n_q, scale, scratch);
}
