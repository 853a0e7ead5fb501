/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The packed F16/BF16 layout of f16x16.h: its size, the pack and its
 * inverse, and the scalar reference kernels over it. Pure C, any CPU; the
 * SIMD kernels are in f16x16-avx2.c and f16x16-avx512.c. */
#include "f16x16.h"
#include "claim.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "fp16.h"
#include "ggml-type.h"

enum {
  ROWS = LLM_F16X16_ROWS,
  CB = LLM_F16X16_COL_BYTES,
};

size_t
llm_f16x16_bytes (size_t rows, size_t n)
{
  return (rows + ROWS - 1) / ROWS * n * CB;
}

void
llm_f16x16_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
    size_t tile1, void *out)
{
  for (size_t tile = tile0; tile < tile1; tile++) {
    uint16_t *o = (uint16_t *) ((uint8_t *) out + tile * n * CB);
    for (size_t r = 0; r < ROWS; r++) {
      const size_t row = tile * ROWS + r;
      if (row >= rows) {
        /* Zero rows: padding adds exact zeros and is never read from @w. */
        for (size_t k = 0; k < n; k++)
          o[k * ROWS + r] = 0;
        continue;
      }
      const uint8_t *src = (const uint8_t *) w + row * row_bytes;
      for (size_t k = 0; k < n; k++)
        memcpy (&o[k * ROWS + r], src + 2 * k, 2);
    }
  }
}

void
llm_f16x16_unpack_row (const void *packed, size_t n, size_t r, void *out)
{
  const uint16_t *p = (const uint16_t *) ((const uint8_t *) packed + r / ROWS * n * CB);
  uint8_t *o = out;
  for (size_t k = 0; k < n; k++)
    memcpy (o + 2 * k, &p[k * ROWS + r % ROWS], 2);
}

/* The order of f16x16.h: one fused multiply-add per column, in column
 * order, from zero. fmaf rounds once, as the SIMD kernels' FMAs do. */
#define REF_KERNEL(name, TO_F32) \
  static bool \
  name (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, \
      size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, size_t step) \
  { \
    (void) rows; \
    size_t ra = r0, rb = r1; \
    bool first = true; \
    while (claim (next, step, r1, &ra, &rb, &first)) { \
      for (size_t r = ra; r < rb; r++) { \
        const uint16_t *p = (const uint16_t *) ((const uint8_t *) packed + r / ROWS * n * CB) \
            + r % ROWS; \
        for (size_t t = 0; t < n_tok; t++) { \
          const uint16_t *x = (const uint16_t *) ((const uint8_t *) xq + t * xs); \
          float acc = 0.0f; \
          for (size_t k = 0; k < n; k++) \
            acc = fmaf (TO_F32 (p[k * ROWS]), TO_F32 (x[k]), acc); \
          y[t * ldy + r] = acc; \
        } \
      } \
    } \
    return true; \
  }

REF_KERNEL (ref_f16, llm_fp16_to_f32)
REF_KERNEL (ref_bf16, llm_bf16_to_f32)

LlmF16x16Fn
llm_f16x16_ref_fn (uint32_t wtype)
{
  switch (wtype) {
    case LLM_TYPE_F16:
      return ref_f16;
    case LLM_TYPE_BF16:
      return ref_bf16;
    default:
      return NULL;
  }
}

/* Builds without the SIMD files still link every caller of the lookups. */
#ifndef LLM_HAVE_AVX2
LlmF16x16Fn
llm_avx2_f16x16_fn (uint32_t wtype)
{
  (void) wtype;
  return NULL;
}
#endif

#ifndef LLM_HAVE_AVX512
LlmF16x16Fn
llm_avx512_f16x16_fn (uint32_t wtype)
{
  (void) wtype;
  return NULL;
}
#endif
