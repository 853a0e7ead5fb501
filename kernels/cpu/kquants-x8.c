/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed K-quant layout of kquants-x8.h: sizes, the pack and its
 * inverse, and the scalar reference kernel over it.
 *
 * Packing and unpacking are one routine run in either direction
 * (move_row_block), so the two cannot drift apart: every byte of a row's
 * block has one place in the tile, and the only bytes that are not moved
 * as they are, Q4_K/Q5_K's 12 bytes of 6-bit scales and mins, go through
 * an exact bijection (96 bits each way). */
#include "kquants-x8.h"
#include "claim.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "ggml-type.h"
#include "fp16.h"
#include "kquants.h"

/* Offsets within a tile's super-block (kquants-x8.h). */
enum {
  K4_QS = 0,
  K4_QH = 2048,               /* Q5_K only */
  Q4K_SC = 2048, Q4K_MN = 2176, Q4K_D = 2304, Q4K_BYTES = 2368,
  Q5K_SC = 2560, Q5K_MN = 2688, Q5K_D = 2816, Q5K_BYTES = 2880,
  Q6K_SC = 3072, Q6K_D = 3328, Q6K_BYTES = 3392,
};

size_t
llm_kx8_block_bytes (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_Q4_K:
      return Q4K_BYTES;
    case LLM_TYPE_Q5_K:
      return Q5K_BYTES;
    case LLM_TYPE_Q6_K:
      return Q6K_BYTES;
    default:
      return 0;
  }
}

size_t
llm_kx8_bytes (uint32_t wtype, size_t rows, size_t n)
{
  assert (n % LLM_QK_K == 0);
  const size_t tiles = (rows + LLM_KX8_ROWS - 1) / LLM_KX8_ROWS;
  return tiles * (n / LLM_QK_K) * llm_kx8_block_bytes (wtype);
}

/* --- moving one row's block in or out of a tile ------------------------ */

/* @len bytes between the tile (@p) and the row's block (@b), in the
 * direction of @pack. */
static void
move (uint8_t *p, uint8_t *b, size_t len, bool pack)
{
  if (pack)
    memcpy (p, b, len);
  else
    memcpy (b, p, len);
}

/* The 12 packed bytes of Q4_K/Q5_K as 8 scales and 8 mins of 6 bits, and
 * back (llm_k4_scale_min's inverse: bytes 0-3 and 4-7 hold scales and mins
 * 0-3 with the top 2 bits of 4-7 above them, bytes 8-11 the low nibbles
 * of scale and min 4-7). */
static void
k4_scales_split (const uint8_t *packed, uint8_t sc[8], uint8_t m[8])
{
  for (int j = 0; j < 8; j++)
    llm_k4_scale_min (j, packed, &sc[j], &m[j]);
}

static void
k4_scales_join (const uint8_t sc[8], const uint8_t m[8], uint8_t *packed)
{
  for (int j = 0; j < 4; j++) {
    packed[j] = (uint8_t) ((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = (uint8_t) ((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    packed[j + 8] = (uint8_t) ((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

/* Q4_K/Q5_K: the d, dmin, scales and mins of row @r, at @sc, @mn, @d in
 * the tile block @p. */
static void
move_k4_scales (uint8_t *p, int r, size_t sc_at, size_t mn_at, size_t d_at, uint8_t *d_dmin,
    uint8_t *scales12, bool pack)
{
  move (p + d_at + 2 * r, d_dmin, 2, pack);
  move (p + d_at + 32 + 2 * r, d_dmin + 2, 2, pack);
  uint8_t sc[8], m[8];
  if (pack)
    k4_scales_split (scales12, sc, m);
  for (int s = 0; s < 8; s++) {
    move (p + sc_at + 16 * s + r, &sc[s], 1, pack);
    move (p + mn_at + 32 * (s / 2) + 2 * r + (s & 1), &m[s], 1, pack);
  }
  if (!pack)
    k4_scales_join (sc, m, scales12);
}

/* Row @r (< 16) of tile block @p against one of its blocks @blk. */
static void
move_row_block (uint32_t wtype, uint8_t *p, int r, uint8_t *blk, bool pack)
{
  switch (wtype) {
    case LLM_TYPE_Q4_K: {
      LlmBlockQ4_K *b = (LlmBlockQ4_K *) blk;
      for (int u = 0; u < 32; u++)
        move (p + K4_QS + 64 * u + 4 * r, b->qs + 4 * u, 4, pack);
      move_k4_scales (p, r, Q4K_SC, Q4K_MN, Q4K_D, (uint8_t *) &b->d, b->scales, pack);
      break;
    }
    case LLM_TYPE_Q5_K: {
      LlmBlockQ5_K *b = (LlmBlockQ5_K *) blk;
      for (int u = 0; u < 32; u++)
        move (p + K4_QS + 64 * u + 4 * r, b->qs + 4 * u, 4, pack);
      for (int i = 0; i < 8; i++)
        move (p + K4_QH + 64 * i + 4 * r, b->qh + 4 * i, 4, pack);
      move_k4_scales (p, r, Q5K_SC, Q5K_MN, Q5K_D, (uint8_t *) &b->d, b->scales, pack);
      break;
    }
    case LLM_TYPE_Q6_K: {
      LlmBlockQ6_K *b = (LlmBlockQ6_K *) blk;
      for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 8; i++) {
          uint8_t *unit = p + 192 * (8 * h + i) + 4 * r;
          move (unit, b->ql + 64 * h + 4 * i, 4, pack);
          move (unit + 64, b->ql + 64 * h + 32 + 4 * i, 4, pack);
          move (unit + 128, b->qh + 32 * h + 4 * i, 4, pack);
        }
      }
      for (int s = 0; s < 16; s++)
        move (p + Q6K_SC + 16 * s + r, (uint8_t *) &b->scales[s], 1, pack);
      move (p + Q6K_D + 2 * r, (uint8_t *) &b->d, 2, pack);
      break;
    }
    default:
      assert (!"not a K-quant");
  }
}

void
llm_kx8_pack (uint32_t wtype, const void *w, size_t row_bytes, size_t rows, size_t n,
    size_t tile0, size_t tile1, void *out)
{
  const size_t tb = llm_kx8_block_bytes (wtype);
  uint32_t block_bytes = 0;
  if (tb == 0 || !llm_type_info (wtype, NULL, &block_bytes))
    return;
  const size_t nb = n / LLM_QK_K;
  for (size_t t = tile0; t < tile1; t++) {
    for (size_t b = 0; b < nb; b++) {
      uint8_t *p = (uint8_t *) out + (t * nb + b) * tb;
      /* Padding rows and Q6_K's tail stay zero. */
      memset (p, 0, tb);
      for (int r = 0; r < LLM_KX8_ROWS && t * LLM_KX8_ROWS + r < rows; r++) {
        const uint8_t *row = (const uint8_t *) w + (t * LLM_KX8_ROWS + r) * row_bytes;
        move_row_block (wtype, p, r, (uint8_t *) row + b * block_bytes, true);
      }
    }
  }
}

void
llm_kx8_unpack_row (uint32_t wtype, const void *packed, size_t n, size_t r, void *out)
{
  const size_t tb = llm_kx8_block_bytes (wtype);
  uint32_t block_bytes = 0;
  if (tb == 0 || !llm_type_info (wtype, NULL, &block_bytes))
    return;
  const size_t nb = n / LLM_QK_K;
  const size_t t = r / LLM_KX8_ROWS;
  for (size_t b = 0; b < nb; b++)
    move_row_block (wtype, (uint8_t *) packed + (t * nb + b) * tb, (int) (r % LLM_KX8_ROWS),
        (uint8_t *) out + b * block_bytes, false);
}

/* --- the scalar reference ---------------------------------------------
 * Straight from the layout in kquants-x8.h: each value, scale and min is
 * read from its place in the tile block, the integer sums are formed one
 * run at a time, then scaled in the documented float order. */

/* Value @k (0..255, unsigned: Q6_K's stands for u - 32) of row @r in the
 * tile block @p. */
static int
value_at (uint32_t wtype, const uint8_t *p, int r, int k)
{
  if (wtype == LLM_TYPE_Q6_K) {
    /* k = 128 h + 32 q + 4 i + m */
    const int h = k / 128, q = k / 32 % 4, i = k % 32 / 4, m = k % 4;
    const uint8_t *unit = p + 192 * (8 * h + i) + 4 * r + m;
    const int ql = q % 2 == 0 ? unit[0] : unit[64];
    const int low = q < 2 ? ql & 15 : ql >> 4;
    return low | ((unit[128] >> (2 * q)) & 3) << 4;
  }
  /* k = 64 j + 32 hi + 4 i + m */
  const int j = k / 64, hi = k / 32 % 2, i = k % 32 / 4, m = k % 4;
  const int byte = p[K4_QS + 64 * (8 * j + i) + 4 * r + m];
  int u = hi ? byte >> 4 : byte & 15;
  if (wtype == LLM_TYPE_Q5_K)
    u += ((p[K4_QH + 64 * i + 4 * r + m] >> (2 * j + hi)) & 1) << 4;
  return u;
}

/* The dot product of row @r (of the tile whose blocks start at @tile)
 * with one token's activations @x. */
static float
ref_dot (uint32_t wtype, size_t nb, const uint8_t *tile, int r, const LlmBlockQ8_K *x)
{
  const size_t tb = llm_kx8_block_bytes (wtype);
  const bool q6 = wtype == LLM_TYPE_Q6_K;
  const size_t sc_at = q6 ? Q6K_SC : wtype == LLM_TYPE_Q5_K ? Q5K_SC : Q4K_SC;
  const size_t mn_at = wtype == LLM_TYPE_Q5_K ? Q5K_MN : Q4K_MN;
  const size_t d_at = q6 ? Q6K_D : wtype == LLM_TYPE_Q5_K ? Q5K_D : Q4K_D;
  const int runs = q6 ? 16 : 8, run_len = LLM_QK_K / runs;
  float acc = 0.0f;
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *p = tile + b * tb;
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < runs; s++) {
      int32_t run = 0;
      for (int k = s * run_len; k < (s + 1) * run_len; k++)
        run += (value_at (wtype, p, r, k) - (q6 ? 32 : 0)) * x[b].qs[k];
      const int sc = q6 ? (int8_t) p[sc_at + 16 * s + r] : p[sc_at + 16 * s + r];
      isum += sc * run;
      if (!q6) {
        const int m = p[mn_at + 32 * (s / 2) + 2 * r + (s & 1)];
        msum += m * (x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
      }
    }
    uint16_t d16, dmin16;
    memcpy (&d16, p + d_at + 2 * r, 2);
    acc = fmaf (llm_fp16_to_f32 (d16) * x[b].d, (float) isum, acc);
    if (!q6) {
      memcpy (&dmin16, p + d_at + 32 + 2 * r, 2);
      acc = fmaf (-(llm_fp16_to_f32 (dmin16) * x[b].d), (float) msum, acc);
    }
  }
  return acc;
}

static bool
ref_kernel (uint32_t wtype, size_t n, const void *packed, size_t rows, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step)
{
  assert (r0 % LLM_KX8_ROWS == 0 && r1 <= rows);
  assert (next == NULL || (step > 0 && step % LLM_KX8_ROWS == 0));
  const size_t nb = n / LLM_QK_K, tb = llm_kx8_block_bytes (wtype);
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r++) {
      const uint8_t *tile = (const uint8_t *) packed + r / LLM_KX8_ROWS * nb * tb;
      for (size_t t = 0; t < n_tok; t++)
        y[t * ldy + r] = ref_dot (wtype, nb, tile, (int) (r % LLM_KX8_ROWS),
            (const LlmBlockQ8_K *) ((const uint8_t *) xq + t * xs));
    }
  }
  return true;
}

#define REF(type, TYPE) \
  static bool \
  ref_##type (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, \
      const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, \
      size_t step) \
  { \
    return ref_kernel (LLM_TYPE_##TYPE, n, packed, rows, r0, r1, xq, xs, n_tok, y, ldy, next, \
        step); \
  }

REF (q4_K, Q4_K)
REF (q5_K, Q5_K)
REF (q6_K, Q6_K)

LlmKx8Fn
llm_kx8_ref_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_Q4_K:
      return ref_q4_K;
    case LLM_TYPE_Q5_K:
      return ref_q5_K;
    case LLM_TYPE_Q6_K:
      return ref_q6_K;
    default:
      return NULL;
  }
}

/* Builds without the SIMD files still link against kquants-x8.h. */
#ifndef LLM_HAVE_AVX2
LlmKx8Fn
llm_avx2_kx8_fn (uint32_t wtype)
{
  (void) wtype;
  return NULL;
}
#endif

#ifndef LLM_HAVE_AVX512
LlmKx8Fn
llm_avx512_kx8_fn (uint32_t wtype)
{
  (void) wtype;
  return NULL;
}
#endif
