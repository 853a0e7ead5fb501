/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The AMX products of the 16-row layouts (x16-amx.h). Built with AVX-512
 * and AMX-TILE/AMX-INT8, reached only after llm_cpu_has_amx().
 *
 * Tiles: C0-C3 (tmm0-tmm3) 16 tokens x 16 int32 row sums; A0, A1 (tmm4,
 * tmm5) 16 tokens x 32 codes; B0, B1 (tmm6, tmm7) 8 rows x (16 weight rows
 * x 4 codes). The tile unit works two blocks ahead of the vector units,
 * which scale block b while blocks b + 1 and b + 2 are multiplied. */
#include "x16-amx.h"

#include <immintrin.h>
#include <string.h>

#include "claim.h"
#include "gemm-common.h"
#include "quantize.h"

#define GROUP 16      /* tokens an A tile holds */
#define ROWS 16       /* weight rows a B tile holds */
#define BLOCK_B 512   /* bytes of a block's B tile, and of a group's A tile */

/* How far ahead of the weights being unpacked the stream is fetched, as
 * x16-simd.h's X16_PREFETCH_BYTES. */
#define AHEAD_BYTES (8 * 1024)

/* The tile configuration (palette 1) as the instruction reads it. */
typedef struct {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

/* The tiles' shapes, in memory for good: GCC 12 drops the stores of a
 * configuration built on the stack before ldtilecfg, whose read of it
 * the builtin does not declare. */
static const TileConfig tile_config = {
  .palette = 1,
  .colsb = { ROWS * sizeof (int32_t), ROWS * sizeof (int32_t), ROWS * sizeof (int32_t),
    ROWS * sizeof (int32_t), LLM_QK8_0, LLM_QK8_0, ROWS * 4, ROWS * 4 },
  .rows = { GROUP, GROUP, GROUP, GROUP, GROUP, GROUP, LLM_QK8_0 / 4, LLM_QK8_0 / 4 },
};

/* The activations as A tiles: group g's block b is 16 tokens' 32 codes
 * at @a + (g * nb + b) * 512, their d_x at @dx + (g * nb + b) * 16;
 * tokens past @n_tok are zeros. */
static void
lay_out_activations (const uint8_t *xq, size_t xs, size_t n_tok, size_t nb, int8_t *a, float *dx)
{
  const size_t groups = (n_tok + GROUP - 1) / GROUP;
  for (size_t g = 0; g < groups; g++)
    for (size_t t = 0; t < GROUP; t++) {
      const size_t tok = g * GROUP + t;
      const LlmBlockQ8_0 *x = (const LlmBlockQ8_0 *) (xq + tok * xs);
      for (size_t b = 0; b < nb; b++) {
        const size_t i = (g * nb + b) * GROUP + t;
        if (tok < n_tok) {
          memcpy (a + LLM_QK8_0 * i, x[b].qs, LLM_QK8_0);
          dx[i] = _cvtsh_ss (x[b].d);
        } else {
          memset (a + LLM_QK8_0 * i, 0, LLM_QK8_0);
          dx[i] = 0.0f;
        }
      }
    }
}

/* Adds block terms from the sums at @c (C stored: token t's 16 rows at
 * c + 16 t) to @acc, in the reference's order of operations. */
static inline __attribute__ ((always_inline)) void
scale_block (const int32_t *c, const float *dw, const float *dx, bool dw_dx_first,
    __m512 acc[GROUP])
{
  const __m512 w = _mm512_loadu_ps (dw);
#pragma GCC unroll 16
  for (int t = 0; t < GROUP; t++) {
    const __m512 s = _mm512_cvtepi32_ps (_mm512_load_si512 (c + ROWS * t));
    const __m512 x = _mm512_set1_ps (dx[t]);
    const __m512 term = dw_dx_first ? _mm512_mul_ps (s, _mm512_mul_ps (w, x))
        : _mm512_mul_ps (_mm512_mul_ps (s, w), x);
    acc[t] = _mm512_add_ps (acc[t], term);
  }
}

/* One block's integer sums into C tile CT from A tile AT and B tile BT. */
#define ISSUE(CT, AT, BT, b) \
  do { \
    _tile_zero (CT); \
    _tile_loadd (AT, a + (b) * BLOCK_B, LLM_QK8_0); \
    _tile_loadd (BT, codes + (b) * BLOCK_B, ROWS * 4); \
    _tile_dpbssd (CT, AT, BT); \
  } while (0)

/* Block b = 4 i + J: issues block b + 2 (into C tile CN, (J + 2) % 4, with
 * the A and B tiles AT, BT that block b used), then scales block b from C
 * tile J. Reading a C tile back waits for its whole product, so a block is
 * scaled two blocks after it was issued. (Tile numbers are digits: the
 * intrinsics paste them into the instruction.) */
#define STEP(J, CN, AT, BT, b) \
  do { \
    for (size_t l = 0; l < lines && *ahead < end; l++, *ahead += 64) \
      _mm_prefetch (*ahead, _MM_HINT_T1); \
    if ((b) + 2 < nb) \
      ISSUE (CN, AT, BT, (b) + 2); \
    _tile_stored (J, c + (J) * GROUP * ROWS, ROWS * sizeof (int32_t)); \
    scale_block (c + (J) * GROUP * ROWS, dw + ROWS * (b), dx + GROUP * (b), dw_dx_first, acc); \
  } while (0)

/* One group's 16 tokens against the unpacked row tile (@codes, @dw), into
 * @acc; @ahead fetches @lines lines of the next row tile a block. */
static inline __attribute__ ((always_inline)) void
group_sums (size_t nb, const int8_t *a, const float *dx, const int8_t *codes, const float *dw,
    int32_t *c, bool dw_dx_first, __m512 acc[GROUP], const char **ahead, const char *end,
    size_t lines)
{
  ISSUE (0, 4, 6, 0);
  if (nb > 1)
    ISSUE (1, 5, 7, 1);
  for (size_t b = 0; b < nb; b += 4) {
    STEP (0, 2, 4, 6, b);
    if (b + 1 < nb)
      STEP (1, 3, 5, 7, b + 1);
    if (b + 2 < nb)
      STEP (2, 0, 4, 6, b + 2);
    if (b + 3 < nb)
      STEP (3, 1, 5, 7, b + 3);
  }
}

static inline __attribute__ ((always_inline)) bool
run (const X16AmxFormat *f, bool dw_dx_first, size_t n, const void *packed, size_t r0,
    size_t r1, const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy,
    atomic_size_t *next, size_t step)
{
  const size_t nb = n / LLM_QK8_0;
  const size_t groups = (n_tok + GROUP - 1) / GROUP;
  const size_t a_bytes = groups * nb * BLOCK_B, dx_bytes = groups * nb * GROUP * sizeof (float);
  const size_t codes_bytes = nb * BLOCK_B, dw_bytes = nb * ROWS * sizeof (float);
  const size_t c_bytes = 4 * GROUP * ROWS * sizeof (int32_t);
  uint8_t *s = llm_gemm_scratch (a_bytes + dx_bytes + codes_bytes + dw_bytes + c_bytes);
  if (s == NULL)
    return false;
  int8_t *a = (int8_t *) s;
  float *dx = (float *) (s + a_bytes);
  int8_t *codes = (int8_t *) (s + a_bytes + dx_bytes);
  float *dw = (float *) (s + a_bytes + dx_bytes + codes_bytes);
  int32_t *c = (int32_t *) (s + a_bytes + dx_bytes + codes_bytes + dw_bytes);
  lay_out_activations (xq, xs, n_tok, nb, a, dx);

  _tile_loadconfig (&tile_config);
  const size_t tile_bytes = nb * f->block_bytes;
  /* The next row tile is fetched into L2 over all the groups' blocks, so
   * memory works while the tile unit and the scaling do. */
  const size_t lines = (tile_bytes / 64 + groups * nb - 1) / (groups * nb);
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r += ROWS) {
      const int rm = rb - r < ROWS ? (int) (rb - r) : ROWS;
      const uint8_t *tile = (const uint8_t *) packed + r / ROWS * tile_bytes;
      const char *ahead = (const char *) tile + tile_bytes;
      const char *end = (const char *) tile + (r + ROWS < r1 ? 2 : 1) * tile_bytes;
      f->unpack (nb, tile, codes, dw, AHEAD_BYTES);
      const __mmask16 m = (__mmask16) ((1u << rm) - 1);
      for (size_t g = 0; g < groups; g++) {
        /* Every index into acc a constant (loops unrolled whole), so
         * the sums stay in registers. */
        __m512 acc[GROUP];
#pragma GCC unroll 16
        for (int t = 0; t < GROUP; t++)
          acc[t] = _mm512_setzero_ps ();
        group_sums (nb, a + g * nb * BLOCK_B, dx + g * nb * GROUP, codes, dw, c, dw_dx_first,
            acc, &ahead, end, lines);
#pragma GCC unroll 16
        for (int t = 0; t < GROUP; t++)
          if (g * GROUP + t < n_tok)
            _mm512_mask_storeu_ps (y + (g * GROUP + t) * ldy + r, m, acc[t]);
      }
    }
  }
  _tile_release ();
  return true;
}

bool
llm_x16_amx_run (const X16AmxFormat *f, size_t n, const void *packed, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step)
{
  /* Each order its own copy, so the scaling loop has no branch in it. */
  if (f->dw_dx_first)
    return run (f, true, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step);
  return run (f, false, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}
