/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal to q4_0x16.c, q5_0x16.c and q8_0x16.c: the one arrangement
 * the packed layouts have (q8_0x16.h is q4_0x16.h's with 8 vectors of
 * whole bytes where Q4_0 has 4 of nibble pairs; q5_0x16.h is q4_0x16.h's
 * with a plane of fifth bits), so its size, pack, unpack and scalar
 * reference are written once, over a description of the file's block.
 * Pure C, any CPU. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "claim.h"
#include "fp16.h"
#include "q4_0x16.h"
#include "quantize.h"

#define X16_ROWS 16

/* What differs between the layouts: a file block is d (fp16), then
 * @high_bytes of fifth bits (4, bit j for value j, or none), then
 * @qs_bytes of codes; the pack stores each code byte XORed with @flip and
 * the fifth bits as x16_high_bit() places them; and the scalar
 * reference's per-block integer sum and float expression. */
typedef struct {
  size_t qs_bytes;
  uint8_t flip;
  size_t high_bytes;
  /* Row @r's codes in the packed block @pb against one token's codes @q:
   * the file layout's scalar dot product's integer sum of the block. */
  int (*block_sumi) (const uint8_t *pb, size_t r, const int8_t *q);
  /* That block's term from its sum and the two scales, in the same order
   * of operations, so the same rounding. */
  float (*block_term) (int sumi, float dw, float dx);
} X16Format;

_Static_assert (offsetof (LlmBlockQ4_0, qs) == 2 && offsetof (LlmBlockQ8_0, qs) == 2
    && offsetof (LlmBlockQ5_0, qh) == 2 && offsetof (LlmBlockQ5_0, qs) == 6,
    "a file block is d, its fifth bits if any, then its codes");

static inline size_t
x16_file_block_bytes (const X16Format *f)
{
  return 2 + f->high_bytes + f->qs_bytes;
}

/* A tile's block: 16 rows x (the codes, the fifth bits, 2 bytes of d), in
 * that order, the 16 d last. */
static inline size_t
x16_block_bytes (const X16Format *f)
{
  return X16_ROWS * x16_file_block_bytes (f);
}

/* Row r's fifth bits lie at x16_high_offset (f) + 4 r. */
static inline size_t
x16_high_offset (const X16Format *f)
{
  return X16_ROWS * f->qs_bytes;
}

static inline size_t
x16_d_offset (const X16Format *f)
{
  return X16_ROWS * (f->qs_bytes + f->high_bytes);
}

/* Where code byte qs[j] of row @r (of its tile) lies in a block of the
 * tile: group g = j / 4 goes to vector 2 (g / 2) + ((r & 1) ^ (g & 1)). */
static inline size_t
x16_qs_offset (size_t r, size_t j)
{
  const size_t g = j / 4;
  return 64 * (2 * (g / 2) + ((r & 1) ^ (g & 1))) + 4 * r + j % 4;
}

/* Where the fifth bit of value j (< 32) of row @r lies in the row's
 * 32-bit word of fifth bits: value j is in nibble byte jj = j % 16 (low
 * nibble for j < 16), which x16_qs_offset() puts in byte i = jj % 4 of
 * row r's lane of vector k; its bit is bit 2 k (low nibble) or 2 k + 1
 * (high) of byte i. So for every vector the bits of all 8 values a lane's
 * 4 nibble bytes hold sit at the same two positions of each byte, in
 * every row: one shift by a constant and a mask with 0x10 turn them into
 * the value's 16s. */
static inline unsigned
x16_high_bit (size_t r, size_t j)
{
  const size_t jj = j % 16, g = jj / 4;
  const size_t k = 2 * (g / 2) + ((r & 1) ^ (g & 1));
  return (unsigned) (8 * (jj % 4) + 2 * k + j / 16);
}

static inline uint32_t
x16_load32 (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static inline void
x16_store32 (uint8_t *p, uint32_t v)
{
  for (size_t i = 0; i < 4; i++)
    p[i] = (uint8_t) (v >> 8 * i);
}

/* Bits 0..3 of @n to bit 0 of bytes 0..3: the shifted copies do not
 * overlap, so the product has no carries. */
static inline uint32_t
x16_spread4 (uint32_t n)
{
  return (n * 0x00204081u) & 0x01010101u;
}

/* Row @r's fifth bits at @src (the file's 4 bytes, bit j for value j) to
 * @dst as x16_high_bit() stores them. Per group g of 4 nibble bytes,
 * values 4 g .. 4 g + 3 (low nibbles) and 16 + 4 g .. (high) go to bytes
 * 0..3 of the word at bits 2 k and 2 k + 1 of g's vector k: a spread of
 * two 4-bit runs, so packing a model costs about a memcpy, not a loop per
 * bit. */
static inline void
x16_pack_high (size_t r, const uint8_t *src, uint8_t *dst)
{
  const uint32_t in = x16_load32 (src);
  uint32_t out = 0;
  for (unsigned g = 0; g < 4; g++) {
    const unsigned k = 2 * (g / 2) + (unsigned) ((r & 1) ^ (g & 1));
    out |= x16_spread4 ((in >> 4 * g) & 15u) << 2 * k;
    out |= x16_spread4 ((in >> (16 + 4 * g)) & 15u) << (2 * k + 1);
  }
  x16_store32 (dst, out);
}

/* x16_pack_high()'s inverse, bit by bit (rows are unpacked one at a time,
 * not a whole model). */
static inline void
x16_unpack_high (size_t r, const uint8_t *src, uint8_t *dst)
{
  const uint32_t in = x16_load32 (src);
  uint32_t out = 0;
  for (size_t j = 0; j < 32; j++)
    out |= ((in >> x16_high_bit (r, j)) & 1u) << j;
  x16_store32 (dst, out);
}

/* 4 bytes from @src to @dst, each XORed with @flip: its own inverse. */
static inline void
x16_copy4 (void *dst, const void *src, uint8_t flip)
{
  uint32_t v;
  memcpy (&v, src, 4);
  v ^= flip * 0x01010101u;
  memcpy (dst, &v, 4);
}

static inline size_t
x16_bytes (const X16Format *f, size_t rows, size_t n)
{
  return (rows + X16_ROWS - 1) / X16_ROWS * (n / 32) * x16_block_bytes (f);
}

static inline void
x16_pack (const X16Format *f, const void *w, size_t row_bytes, size_t rows, size_t n,
    size_t tile0, size_t tile1, void *out)
{
  const size_t nb = n / 32, pb = x16_block_bytes (f), d_off = x16_d_offset (f);
  const size_t h_off = x16_high_offset (f), fb = x16_file_block_bytes (f);
  for (size_t tile = tile0; tile < tile1; tile++) {
    uint8_t *o = (uint8_t *) out + tile * nb * pb;
    for (size_t b = 0; b < nb; b++, o += pb) {
      for (size_t r = 0; r < X16_ROWS; r++) {
        const size_t row = tile * X16_ROWS + r;
        if (row >= rows) {
          /* Zero rows (codes 0, stored as @flip; d = 0): padding adds
           * exact zeros and is never read from @w. */
          for (size_t j = 0; j < f->qs_bytes; j += 4)
            memset (o + x16_qs_offset (r, j), f->flip, 4);
          memset (o + h_off + 4 * r, 0, f->high_bytes);
          memset (o + d_off + 2 * r, 0, 2);
          continue;
        }
        const uint8_t *blk = (const uint8_t *) w + row * row_bytes + b * fb;
        const uint8_t *qs = blk + 2 + f->high_bytes;
        for (size_t j = 0; j < f->qs_bytes; j += 4)
          x16_copy4 (o + x16_qs_offset (r, j), qs + j, f->flip);
        if (f->high_bytes > 0)
          x16_pack_high (r, blk + 2, o + h_off + 4 * r);
        memcpy (o + d_off + 2 * r, blk, 2);
      }
    }
  }
}

static inline void
x16_unpack_row (const X16Format *f, const void *packed, size_t n, size_t r, void *out)
{
  const size_t nb = n / 32, pb = x16_block_bytes (f);
  const uint8_t *p = (const uint8_t *) packed + r / X16_ROWS * nb * pb;
  uint8_t *o = out;
  for (size_t b = 0; b < nb; b++, p += pb, o += x16_file_block_bytes (f)) {
    for (size_t j = 0; j < f->qs_bytes; j += 4)
      x16_copy4 (o + 2 + f->high_bytes + j, p + x16_qs_offset (r % X16_ROWS, j), f->flip);
    if (f->high_bytes > 0)
      x16_unpack_high (r % X16_ROWS, p + x16_high_offset (f) + 4 * (r % X16_ROWS), o + 2);
    memcpy (o, p + x16_d_offset (f) + 2 * (r % X16_ROWS), 2);
  }
}

/* The file layout's scalar dot product of row @r of a tile (blocks at
 * @tile) with @x, reading the packed bytes: the same integer sum per
 * block and the same float expression, so the same result. */
static inline float
x16_dot (const X16Format *f, size_t nb, const uint8_t *tile, size_t r, const LlmBlockQ8_0 *x)
{
  float sum = 0.0f;
  for (size_t b = 0; b < nb; b++) {
    const uint8_t *pb = tile + b * x16_block_bytes (f);
    uint16_t d;
    memcpy (&d, pb + x16_d_offset (f) + 2 * r, 2);
    sum += f->block_term (f->block_sumi (pb, r, x[b].qs), llm_fp16_to_f32 (d),
        llm_fp16_to_f32 (x[b].d));
  }
  return sum;
}

static inline bool
x16_ref (const X16Format *f, size_t n, const void *packed, size_t r0, size_t r1,
    const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next,
    size_t step)
{
  const size_t nb = n / 32;
  size_t ra = r0, rb = r1;
  bool first = true;
  while (claim (next, step, r1, &ra, &rb, &first)) {
    for (size_t r = ra; r < rb; r++) {
      const uint8_t *tile = (const uint8_t *) packed + r / X16_ROWS * nb * x16_block_bytes (f);
      for (size_t t = 0; t < n_tok; t++)
        y[t * ldy + r] = x16_dot (f, nb, tile, r % X16_ROWS,
            (const LlmBlockQ8_0 *) ((const uint8_t *) xq + t * xs));
    }
  }
  return true;
}

/* Builds without the SIMD files still link every caller of the lookups. */
#ifdef LLM_HAVE_AVX2
#define X16_NO_AVX2_FN(layout)
#else
#define X16_NO_AVX2_FN(layout) \
  LlmQ4x16Fn llm_avx2_##layout##_fn (void) { return NULL; } \
  LlmQ4x16Fn llm_avx2_##layout##_hw_fn (void) { return NULL; }
#endif
#ifdef LLM_HAVE_AVX512
#define X16_NO_AVX512_FN(layout)
#else
#define X16_NO_AVX512_FN(layout) \
  LlmQ4x16Fn llm_avx512_##layout##_fn (void) { return NULL; } \
  LlmQ4x16Fn llm_avx512_##layout##_hw_fn (void) { return NULL; }
#endif

/* The public functions of @layout's header (llm_LAYOUT_bytes, _pack,
 * _unpack_row and _ref, and the lookups a build without SIMD files lacks)
 * over the X16Format @format. */
#define X16_LAYOUT_FNS(layout, format) \
  size_t \
  llm_##layout##_bytes (size_t rows, size_t n) \
  { \
    return x16_bytes (format, rows, n); \
  } \
  void \
  llm_##layout##_pack (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0, \
      size_t tile1, void *out) \
  { \
    x16_pack (format, w, row_bytes, rows, n, tile0, tile1, out); \
  } \
  void \
  llm_##layout##_unpack_row (const void *packed, size_t n, size_t r, void *out) \
  { \
    x16_unpack_row (format, packed, n, r, out); \
  } \
  bool \
  llm_##layout##_ref (size_t n, const void *packed, size_t rows, size_t r0, size_t r1, \
      const void *xq, size_t xs, size_t n_tok, float *y, size_t ldy, atomic_size_t *next, \
      size_t step) \
  { \
    (void) rows; \
    return x16_ref (format, n, packed, r0, r1, xq, xs, n_tok, y, ldy, next, step); \
  } \
  X16_NO_AVX2_FN (layout) \
  X16_NO_AVX512_FN (layout)
