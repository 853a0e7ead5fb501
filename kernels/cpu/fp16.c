/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scalar reference conversions. Integer bit manipulation rather than float
 * arithmetic, so the result never depends on the FPU's rounding mode or on
 * the compiler contracting expressions. */
#include "fp16.h"

#include <string.h>

static inline uint32_t
f32_bits (float f)
{
  uint32_t u;
  memcpy (&u, &f, sizeof u);
  return u;
}

static inline float
bits_f32 (uint32_t u)
{
  float f;
  memcpy (&f, &u, sizeof f);
  return f;
}

/* Drops the low @shift bits of @v, rounding to nearest, ties to even. */
static inline uint32_t
shift_round_even (uint32_t v, unsigned shift)
{
  uint32_t kept = v >> shift;
  uint32_t rem = v & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1)))
    kept++;
  return kept;
}

uint16_t
llm_fp16_from_f32 (float f)
{
  uint32_t x = f32_bits (f);
  uint16_t sign = (uint16_t) ((x >> 16) & 0x8000);
  uint32_t abs = x & 0x7fffffffu;

  if (abs > 0x7f800000u)
    /* Quiet bit forced on so a signalling NaN whose payload lives only in
     * the low bits does not turn into infinity. */
    return sign | 0x7e00 | (uint16_t) ((abs >> 13) & 0x3ff);
  /* 65520 is halfway between 65504 (largest half, odd mantissa) and
   * 2^16, so it and everything above rounds to infinity. */
  if (abs >= 0x477ff000u)
    return sign | 0x7c00;
  if (abs < 0x38800000u) {
    /* Below 2^-14: a half subnormal m * 2^-24. 2^-25 exactly is a tie
     * between 0 and the smallest subnormal and goes to the even 0. */
    if (abs <= 0x33000000u)
      return sign;
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    /* May round up to 0x400, which is correctly the smallest normal. */
    return sign | (uint16_t) shift_round_even (m, 126 - e);
  }
  /* Rebias the exponent (127 -> 15); a mantissa carry moves into the
   * exponent field, which is the right answer. */
  return sign | (uint16_t) shift_round_even (abs - 0x38000000u, 13);
}

float
llm_fp16_to_f32 (uint16_t h)
{
  uint32_t sign = (uint32_t) (h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;

  if (exp == 0) {
    /* mant * 2^-24 is exact in float. */
    float v = (float) mant * 0x1p-24f;
    return bits_f32 (f32_bits (v) | sign);
  }
  if (exp == 31)
    /* IEEE conversion quiets a signalling NaN (as F16C does). */
    return bits_f32 (sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
  return bits_f32 (sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t
llm_bf16_from_f32 (float f)
{
  uint32_t u = f32_bits (f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    /* Truncating could clear every payload bit and leave infinity. */
    return (uint16_t) ((u >> 16) | 0x40);
  return (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

float
llm_bf16_to_f32 (uint16_t b)
{
  return bits_f32 ((uint32_t) b << 16);
}

void
llm_fp16_from_f32_row (const float *src, uint16_t *dst, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dst[i] = llm_fp16_from_f32 (src[i]);
}

void
llm_fp16_to_f32_row (const uint16_t *src, float *dst, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dst[i] = llm_fp16_to_f32 (src[i]);
}

void
llm_bf16_from_f32_row (const float *src, uint16_t *dst, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dst[i] = llm_bf16_from_f32 (src[i]);
}

void
llm_bf16_to_f32_row (const uint16_t *src, float *dst, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dst[i] = llm_bf16_to_f32 (src[i]);
}
