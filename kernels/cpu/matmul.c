/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Matmul dispatch and the scalar reference dot products.
 *
 * The reference kernels follow ggml's generic C kernels operation for
 * operation: F32/F16/BF16 products are summed in double (ggml_float);
 * Q8_0/Q4_0 form an exact integer sum per 32-block and scale it in float
 * with each kernel's own association; K-quants are in kquants.c. The AVX2
 * kernels (matmul-avx2.c for one token, gemm-avx2.c for batches) keep
 * every integer sum exact and differ only in the order of float
 * additions. */
#include "matmul.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-type.h"
#include "fp16.h"
#include "kquants.h"
#include "gemm-avx2.h"
#include "gemm-avx512.h"
#include "matmul-avx2.h"
#include "quantize.h"
#include "q4_0x16.h"
#include "f16x16.h"
#include "q5_0x16.h"
#include "q8_0x16.h"
#include "kquants-x8.h"

#include <pthread.h>

#include "kernels-table.h"

/* --- scalar reference dot products --- */

static float
dot_f32 (size_t n, const void *vw, const void *vx)
{
  const float *w = vw, *x = vx;
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += (double) (w[i] * x[i]);
  return (float) sum;
}

static float
dot_f16 (size_t n, const void *vw, const void *vx)
{
  const uint16_t *w = vw, *x = vx;
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += (double) (llm_fp16_to_f32 (w[i]) * llm_fp16_to_f32 (x[i]));
  return (float) sum;
}

static float
dot_bf16 (size_t n, const void *vw, const void *vx)
{
  const uint16_t *w = vw, *x = vx;
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += (double) (llm_bf16_to_f32 (w[i]) * llm_bf16_to_f32 (x[i]));
  return (float) sum;
}

static float
dot_q8_0 (size_t n, const void *vw, const void *vx)
{
  const LlmBlockQ8_0 *w = vw, *x = vx;
  float sum = 0.0f;
  for (size_t b = 0; b < n / LLM_QK8_0; b++) {
    int sumi = 0;
    for (int j = 0; j < LLM_QK8_0; j++)
      sumi += w[b].qs[j] * x[b].qs[j];
    sum += (float) sumi * (llm_fp16_to_f32 (w[b].d) * llm_fp16_to_f32 (x[b].d));
  }
  return sum;
}

static float
dot_q4_0 (size_t n, const void *vw, const void *vx)
{
  const LlmBlockQ4_0 *w = vw;
  const LlmBlockQ8_0 *x = vx;
  float sum = 0.0f;
  for (size_t b = 0; b < n / LLM_QK4_0; b++) {
    int sumi = 0;
    for (int j = 0; j < LLM_QK4_0 / 2; j++) {
      sumi += ((w[b].qs[j] & 0x0f) - 8) * x[b].qs[j];
      sumi += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + LLM_QK4_0 / 2];
    }
    /* ggml associates this one left to right: (sumi * d_w) * d_x. */
    sum += (float) sumi * llm_fp16_to_f32 (w[b].d) * llm_fp16_to_f32 (x[b].d);
  }
  return sum;
}

/* Q5_0, Q4_1 and Q5_1 as ggml's generic kernels: an exact integer sum per
 * block, then Q5_0 adds (d_w * d_x) * sumi, the offset types
 * (d_w * d_x) * sumi + m_w * s_x (s_x = d_x * sum of the block's x codes,
 * from the Q8_1 activations). */
static float
dot_q5_0 (size_t n, const void *vw, const void *vx)
{
  const LlmBlockQ5_0 *w = vw;
  const LlmBlockQ8_0 *x = vx;
  float sum = 0.0f;
  for (size_t b = 0; b < n / LLM_QK5_0; b++) {
    const uint32_t high = llm_q5_high_bits (w[b].qh);
    int sumi = 0;
    for (int j = 0; j < LLM_QK5_0; j++)
      sumi += (llm_q5_code (w[b].qs, high, j) - 16) * x[b].qs[j];
    sum += (llm_fp16_to_f32 (w[b].d) * llm_fp16_to_f32 (x[b].d)) * (float) sumi;
  }
  return sum;
}

/* One offset block's term, as ggml's generic C: (d_w * d_x) * sumi +
 * m_w * s_x, each product rounded before the sum. */
static float
offset_block_term (int sumi, uint16_t d_w, uint16_t m_w, const LlmBlockQ8_1 *x)
{
  const float scaled = (llm_fp16_to_f32 (d_w) * llm_fp16_to_f32 (x->d)) * (float) sumi;
  const float offset = llm_fp16_to_f32 (m_w) * llm_fp16_to_f32 (x->s);
  return scaled + offset;
}

static float
dot_q4_1 (size_t n, const void *vw, const void *vx)
{
  const LlmBlockQ4_1 *w = vw;
  const LlmBlockQ8_1 *x = vx;
  float sum = 0.0f;
  for (size_t b = 0; b < n / LLM_QK4_1; b++) {
    int sumi = 0;
    for (int j = 0; j < LLM_QK4_1 / 2; j++) {
      sumi += (w[b].qs[j] & 0x0f) * x[b].qs[j];
      sumi += (w[b].qs[j] >> 4) * x[b].qs[j + LLM_QK4_1 / 2];
    }
    sum += offset_block_term (sumi, w[b].d, w[b].m, &x[b]);
  }
  return sum;
}

static float
dot_q5_1 (size_t n, const void *vw, const void *vx)
{
  const LlmBlockQ5_1 *w = vw;
  const LlmBlockQ8_1 *x = vx;
  float sum = 0.0f;
  for (size_t b = 0; b < n / LLM_QK5_1; b++) {
    const uint32_t high = llm_q5_high_bits (w[b].qh);
    int sumi = 0;
    for (int j = 0; j < LLM_QK5_1; j++)
      sumi += llm_q5_code (w[b].qs, high, j) * x[b].qs[j];
    sum += offset_block_term (sumi, w[b].d, w[b].m, &x[b]);
  }
  return sum;
}

static float
dot_q4_K (size_t n, const void *w, const void *x)
{
  return llm_vec_dot_q4_K_q8_K (n, w, x);
}

static float
dot_q5_K (size_t n, const void *w, const void *x)
{
  return llm_vec_dot_q5_K_q8_K (n, w, x);
}

static float
dot_q6_K (size_t n, const void *w, const void *x)
{
  return llm_vec_dot_q6_K_q8_K (n, w, x);
}

/* --- activation conversion and row expansion --- */

static void
convert_f32 (const float *x, size_t n, void *out)
{
  memcpy (out, x, n * sizeof (float));
}

static void
convert_f16 (const float *x, size_t n, void *out)
{
  llm_fp16_from_f32_row (x, out, n);
}

static void
convert_bf16 (const float *x, size_t n, void *out)
{
  llm_bf16_from_f32_row (x, out, n);
}

static void
convert_q8_0 (const float *x, size_t n, void *out)
{
  llm_quantize_row_q8_0_act (x, out, n);
}

static void
convert_q8_1 (const float *x, size_t n, void *out)
{
  llm_quantize_row_q8_1_act (x, out, n);
}

static void
convert_q8_K (const float *x, size_t n, void *out)
{
  llm_quantize_row_q8_K (x, out, n);
}

static void
expand_f32 (const void *row, float *out, size_t n)
{
  memcpy (out, row, n * sizeof (float));
}

static void
expand_f16 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_f16 (row, out, n);
}

static void
expand_bf16 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_bf16 (row, out, n);
}

static void
expand_q8_0 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q8_0 (row, out, n);
}

static void
expand_q4_0 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q4_0 (row, out, n);
}

static void
expand_q4_1 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q4_1 (row, out, n);
}

static void
expand_q5_0 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q5_0 (row, out, n);
}

static void
expand_q5_1 (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q5_1 (row, out, n);
}

static void
expand_q4_K (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q4_K (row, out, n);
}

static void
expand_q5_K (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q5_K (row, out, n);
}

static void
expand_q6_K (const void *row, float *out, size_t n)
{
  llm_dequantize_row_q6_K (row, out, n);
}

/* --- per weight type --- */

typedef struct {
  uint32_t wtype;
  uint32_t dot_type;
  /* Geometry of the converted activations. */
  uint32_t act_block_elems;
  uint32_t act_block_bytes;
  void (*convert) (const float *x, size_t n, void *out);
  LlmDotFn dot;
  void (*expand) (const void *row, float *out, size_t n);
} WeightKind;

static const WeightKind kinds[] = {
  { LLM_TYPE_F32, LLM_TYPE_F32, 1, 4, convert_f32, dot_f32, expand_f32 },
  { LLM_TYPE_F16, LLM_TYPE_F16, 1, 2, convert_f16, dot_f16, expand_f16 },
  { LLM_TYPE_BF16, LLM_TYPE_BF16, 1, 2, convert_bf16, dot_bf16, expand_bf16 },
  { LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, LLM_QK8_0, sizeof (LlmBlockQ8_0), convert_q8_0, dot_q8_0,
    expand_q8_0 },
  { LLM_TYPE_Q4_0, LLM_TYPE_Q8_0, LLM_QK8_0, sizeof (LlmBlockQ8_0), convert_q8_0, dot_q4_0,
    expand_q4_0 },
  /* As in ggml: Q5_0 is symmetric like Q4_0; the offset types take Q8_1. */
  { LLM_TYPE_Q5_0, LLM_TYPE_Q8_0, LLM_QK8_0, sizeof (LlmBlockQ8_0), convert_q8_0, dot_q5_0,
    expand_q5_0 },
  { LLM_TYPE_Q4_1, LLM_TYPE_Q8_1, LLM_QK8_1, sizeof (LlmBlockQ8_1), convert_q8_1, dot_q4_1,
    expand_q4_1 },
  { LLM_TYPE_Q5_1, LLM_TYPE_Q8_1, LLM_QK8_1, sizeof (LlmBlockQ8_1), convert_q8_1, dot_q5_1,
    expand_q5_1 },
  { LLM_TYPE_Q4_K, LLM_TYPE_Q8_K, LLM_QK_K, sizeof (LlmBlockQ8_K), convert_q8_K, dot_q4_K,
    expand_q4_K },
  { LLM_TYPE_Q5_K, LLM_TYPE_Q8_K, LLM_QK_K, sizeof (LlmBlockQ8_K), convert_q8_K, dot_q5_K,
    expand_q5_K },
  { LLM_TYPE_Q6_K, LLM_TYPE_Q8_K, LLM_QK_K, sizeof (LlmBlockQ8_K), convert_q8_K, dot_q6_K,
    expand_q6_K },
};

static const WeightKind *
kind_of (uint32_t wtype)
{
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].wtype == wtype)
      return &kinds[i];
  return NULL;
}

/* --- the kernel tables, one per instruction set --- */

static LlmCpuKernels tables[LLM_CPU_N_ISA];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* A one-type layout's functions (llm_NAME_bytes, _pack, _unpack_row) in
 * the shape every prepared layout has, which also names the weight type
 * (f16x16 serves F16 and BF16 alike). */
#define LAYOUT_FNS(name) \
  static size_t \
  name##_bytes (uint32_t wtype, size_t rows, size_t n) \
  { \
    (void) wtype; \
    return llm_##name##_bytes (rows, n); \
  } \
  static void \
  name##_pack (uint32_t wtype, const void *w, size_t row_bytes, size_t rows, size_t n, \
      size_t tile0, size_t tile1, void *out) \
  { \
    (void) wtype; \
    llm_##name##_pack (w, row_bytes, rows, n, tile0, tile1, out); \
  } \
  static void \
  name##_unpack_row (uint32_t wtype, const void *prepared, size_t n, size_t r, void *out) \
  { \
    (void) wtype; \
    llm_##name##_unpack_row (prepared, n, r, out); \
  }

LAYOUT_FNS (q4_0x16)
LAYOUT_FNS (q8_0x16)
LAYOUT_FNS (q5_0x16)
LAYOUT_FNS (f16x16)

/* A packed Q4_0/Q5_0/Q8_0 layout's kernel for @isa (AVX-512's where
 * @isa has it, else AVX2's; NULL below AVX2), from its lookups, and in
 * *@hw its variant that leaves one token's fetching to the hardware
 * where the environment leaves that choice to the engine
 * (LLM_X16_AHEAD_AUTO), else NULL. */
static LlmPreparedFn
x16_kernels (LlmCpuIsa isa, LlmQ4x16Fn (*avx512) (void), LlmQ4x16Fn (*avx512_hw) (void),
    LlmQ4x16Fn (*avx2) (void), LlmQ4x16Fn (*avx2_hw) (void), LlmPreparedFn *hw)
{
  const bool choice = llm_cpu_x16_one_token_ahead () == LLM_X16_AHEAD_AUTO;
  LlmPreparedFn run = NULL;
  *hw = NULL;
  if (isa == LLM_CPU_ISA_AVX512) {
    run = avx512 ();
    *hw = choice && run != NULL ? avx512_hw () : NULL;
  }
  if (run == NULL && isa >= LLM_CPU_ISA_AVX2) {
    run = avx2 ();
    *hw = choice && run != NULL ? avx2_hw () : NULL;
  }
  return run;
}

/* The layout @isa's kernels want @wtype weights in, prepared once at
 * load: one kernel family then serves a decode step and a prefill alike
 * from the same bytes, with no per-call repacking. The scalar table keeps
 * the file's layout: it is the reference the prepared kernels are
 * checked against. */
static LlmCpuLayout
prepared_layout (LlmCpuIsa isa, uint32_t wtype)
{
  LlmCpuLayout none = { 0 };
  LlmPreparedFn run = NULL;
  LlmPreparedFn hw = NULL;
  if (wtype == LLM_TYPE_Q4_0) {
    run = x16_kernels (isa, llm_avx512_q4_0x16_fn, llm_avx512_q4_0x16_hw_fn,
        llm_avx2_q4_0x16_fn, llm_avx2_q4_0x16_hw_fn, &hw);
    if (run != NULL)
      return (LlmCpuLayout) { LLM_Q4_0X16_ROWS, q4_0x16_bytes, q4_0x16_pack,
        q4_0x16_unpack_row, run, hw };
  }
  if (wtype == LLM_TYPE_F16 || wtype == LLM_TYPE_BF16) {
    if (isa == LLM_CPU_ISA_AVX512)
      run = llm_avx512_f16x16_fn (wtype);
    if (run == NULL && isa >= LLM_CPU_ISA_AVX2)
      run = llm_avx2_f16x16_fn (wtype);
    if (run != NULL)
      return (LlmCpuLayout) { LLM_F16X16_ROWS, f16x16_bytes, f16x16_pack, f16x16_unpack_row,
        run };
  }
  if (wtype == LLM_TYPE_Q8_0) {
    run = x16_kernels (isa, llm_avx512_q8_0x16_fn, llm_avx512_q8_0x16_hw_fn,
        llm_avx2_q8_0x16_fn, llm_avx2_q8_0x16_hw_fn, &hw);
    if (run != NULL)
      return (LlmCpuLayout) { LLM_Q8_0X16_ROWS, q8_0x16_bytes, q8_0x16_pack,
        q8_0x16_unpack_row, run, hw };
  }
  if (wtype == LLM_TYPE_Q5_0) {
    run = x16_kernels (isa, llm_avx512_q5_0x16_fn, llm_avx512_q5_0x16_hw_fn,
        llm_avx2_q5_0x16_fn, llm_avx2_q5_0x16_hw_fn, &hw);
    if (run != NULL)
      return (LlmCpuLayout) { LLM_Q5_0X16_ROWS, q5_0x16_bytes, q5_0x16_pack,
        q5_0x16_unpack_row, run, hw };
  }
  if (llm_kx8_block_bytes (wtype) > 0) {
    if (isa == LLM_CPU_ISA_AVX512)
      run = llm_avx512_kx8_fn (wtype);
    if (run == NULL && isa >= LLM_CPU_ISA_AVX2)
      run = llm_avx2_kx8_fn (wtype);
    if (run != NULL)
      return (LlmCpuLayout) { LLM_KX8_ROWS, llm_kx8_bytes, llm_kx8_pack, llm_kx8_unpack_row,
        run };
  }
  return none;
}

/* Each table starts from the reference kernels and takes every faster
 * kernel its instruction set has; they give the same bits or (where
 * matmul.h says so) the same exact integer sums. */
static void
fill_table (LlmCpuKernels *t, LlmCpuIsa isa)
{
  t->isa = isa;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    const WeightKind *k = &kinds[i];
    LlmCpuWeightKernels *w = &t->w[k->wtype];
    w->convert = k->convert;
    w->dot = k->dot;
#ifdef LLM_HAVE_AVX2
    if (isa >= LLM_CPU_ISA_AVX2) {
      if (llm_avx2_convert_fn (k->wtype) != NULL)
        w->convert = llm_avx2_convert_fn (k->wtype);
      if (llm_avx2_dot_fn (k->wtype) != NULL) {
        w->dot = llm_avx2_dot_fn (k->wtype);
        w->dot4 = llm_avx2_dot4_fn (k->wtype);
      }
      w->matvec = llm_avx2_matvec_fn (k->wtype);
      w->gemm = llm_avx2_gemm_fn (k->wtype);
    }
#endif
#ifdef LLM_HAVE_AVX512
    if (isa >= LLM_CPU_ISA_AVX512 && llm_avx512_gemm_fn (k->wtype) != NULL)
      w->gemm = llm_avx512_gemm_fn (k->wtype);
#endif
    w->prepared = prepared_layout (isa, k->wtype);
  }
}

static void
fill_tables (void)
{
  for (int isa = 0; isa < LLM_CPU_N_ISA; isa++)
    if (llm_cpu_isa_supported ((LlmCpuIsa) isa))
      fill_table (&tables[isa], (LlmCpuIsa) isa);
}

const LlmCpuKernels *
llm_cpu_kernels (LlmCpuIsa isa)
{
  if (!llm_cpu_isa_supported (isa))
    return NULL;
  pthread_once (&tables_once, fill_tables);
  return &tables[isa];
}

const LlmCpuKernels *
llm_cpu_kernels_best (void)
{
  return llm_cpu_kernels (llm_cpu_isa_best ());
}

LlmCpuIsa
llm_cpu_kernels_isa (const LlmCpuKernels *kern)
{
  return kern->isa;
}

const char *
llm_cpu_kernels_name (const LlmCpuKernels *kern)
{
  return llm_cpu_isa_name (kern->isa);
}

/* --- public entry points --- */

bool
llm_matmul_supports (uint32_t wtype)
{
  return kind_of (wtype) != NULL;
}

uint32_t
llm_matmul_dot_type (uint32_t wtype)
{
  const WeightKind *k = kind_of (wtype);
  assert (k != NULL);
  return k != NULL ? k->dot_type : wtype;
}

size_t
llm_matmul_act_bytes (uint32_t wtype, size_t n)
{
  const WeightKind *k = kind_of (wtype);
  assert (k != NULL && n % k->act_block_elems == 0);
  return k != NULL ? n / k->act_block_elems * k->act_block_bytes : 0;
}

/* The table's kernels for @wtype, or NULL for a type matmul does not run. */
static const LlmCpuWeightKernels *
weight_kernels (const LlmCpuKernels *kern, uint32_t wtype)
{
  const WeightKind *k = kind_of (wtype);
  assert (k != NULL);
  return k != NULL ? &kern->w[wtype] : NULL;
}

void
llm_matmul_convert (const LlmCpuKernels *kern, uint32_t wtype, const float *x, size_t n,
    void *out)
{
  const LlmCpuWeightKernels *w = weight_kernels (kern, wtype);
  if (w != NULL)
    w->convert (x, n, out);
}

void
llm_matvec (const LlmCpuKernels *kern, uint32_t wtype, const void *w, size_t row_bytes,
    size_t n, size_t r0, size_t r1, const void *xq, float *y)
{
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  if (wk == NULL)
    return;
  const uint8_t *rows = w;
  if (wk->matvec != NULL) {
    wk->matvec (n, rows + r0 * row_bytes, row_bytes, r1 - r0, xq, y);
    return;
  }
  for (size_t r = r0; r < r1; r++)
    y[r - r0] = wk->dot (n, rows + r * row_bytes, xq);
}

/* Tokens per pass over the weight rows: enough converted activations to
 * stay in L2 while each weight row, read once per pass, stays in L1. */
#define MATMUL_ACT_BUDGET (256 * 1024)

void
llm_matmul (const LlmCpuKernels *kern, uint32_t wtype, const void *w, size_t row_bytes,
    size_t n, size_t r0, size_t r1, const void *xq, size_t xq_stride, size_t n_tok,
    float *y, size_t ldy)
{
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  if (wk == NULL)
    return;
  /* Register-tiled batched kernels (gemm-avx2.c, gemm-avx512.c). */
  if (wk->gemm != NULL &&
      wk->gemm (n, w, row_bytes, r0, r1, xq, xq_stride, n_tok, y, ldy, NULL, 0))
    return;
  const LlmDotFn dot = wk->dot;
  const LlmDot4Fn dot4 = wk->dot4;
  const uint8_t *rows = w;
  const uint8_t *acts = xq;

  /* A multiple of 4 tokens, so the four-token kernel does all but the
   * last few. */
  size_t tok_block = xq_stride > 0 ? MATMUL_ACT_BUDGET / xq_stride / 4 * 4 : n_tok;
  if (tok_block < 4)
    tok_block = 4;

  for (size_t t0 = 0; t0 < n_tok; t0 += tok_block) {
    const size_t t1 = t0 + tok_block < n_tok ? t0 + tok_block : n_tok;
    for (size_t r = r0; r < r1; r++) {
      const uint8_t *row = rows + r * row_bytes;
      size_t t = t0;
      if (dot4 != NULL) {
        for (; t + 4 <= t1; t += 4) {
          float out[4];
          dot4 (n, row, acts + t * xq_stride, xq_stride, out);
          for (int i = 0; i < 4; i++)
            y[(t + i) * ldy + r] = out[i];
        }
      }
      for (; t < t1; t++)
        y[t * ldy + r] = dot (n, row, acts + t * xq_stride);
    }
  }
}

/* The batched kernels claim rows themselves (and do their per-product
 * setup once per thread); otherwise each claim goes through llm_matmul. */
void
llm_matmul_shared (const LlmCpuKernels *kern, uint32_t wtype, const void *w, size_t row_bytes,
    size_t n, size_t r0, size_t r1, const void *xq, size_t xq_stride, size_t n_tok, float *y,
    size_t ldy, atomic_size_t *next, size_t step)
{
  assert (step > 0);
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  if (wk == NULL)
    return;
  if (wk->gemm != NULL &&
      wk->gemm (n, w, row_bytes, r0, r1, xq, xq_stride, n_tok, y, ldy, next, step))
    return;
  for (;;) {
    const size_t ra = atomic_fetch_add_explicit (next, step, memory_order_relaxed);
    if (ra >= r1)
      break;
    llm_matmul (kern, wtype, w, row_bytes, n, ra, ra + step < r1 ? ra + step : r1, xq,
        xq_stride, n_tok, y, ldy);
  }
}

void
llm_dequantize_row (uint32_t wtype, const void *w, size_t row_bytes, size_t n,
    size_t r, float *out)
{
  const WeightKind *k = kind_of (wtype);
  assert (k != NULL);
  if (k != NULL)
    k->expand ((const uint8_t *) w + r * row_bytes, out, n);
}

/* --- weights in a prepared layout --- */

size_t
llm_prepared_bytes (const LlmCpuKernels *kern, uint32_t wtype, size_t rows, size_t n)
{
  const LlmCpuWeightKernels *wk = kind_of (wtype) ? &kern->w[wtype] : NULL;
  return wk != NULL && wk->prepared.run != NULL ? wk->prepared.bytes (wtype, rows, n) : 0;
}

size_t
llm_prepared_tile_rows (const LlmCpuKernels *kern, uint32_t wtype)
{
  const LlmCpuWeightKernels *wk = kind_of (wtype) ? &kern->w[wtype] : NULL;
  return wk != NULL && wk->prepared.run != NULL ? wk->prepared.tile_rows : 0;
}

void
llm_prepare_tiles (const LlmCpuKernels *kern, uint32_t wtype, const void *w, size_t row_bytes,
    size_t rows, size_t n, size_t tile0, size_t tile1, void *out)
{
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  assert (wk != NULL && wk->prepared.run != NULL);
  if (wk != NULL && wk->prepared.run != NULL)
    wk->prepared.pack (wtype, w, row_bytes, rows, n, tile0, tile1, out);
}

bool
llm_matmul_prepared (const LlmCpuKernels *kern, uint32_t wtype, const void *prepared,
    size_t rows, size_t n, size_t r0, size_t r1, const void *xq, size_t xs, size_t n_tok,
    float *y, size_t ldy, atomic_size_t *next, size_t step, LlmFetch fetch)
{
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  assert (wk != NULL && wk->prepared.run != NULL);
  if (wk == NULL || wk->prepared.run == NULL)
    return false;
  /* The _hw kernel fetches ahead itself beyond the tokens it leaves to
   * the hardware (X16Kernel.hw_tokens). */
  const LlmPreparedFn run = fetch == LLM_FETCH_HARDWARE && wk->prepared.run_hw != NULL
      ? wk->prepared.run_hw : wk->prepared.run;
  return run (n, prepared, rows, r0, r1, xq, xs, n_tok, y, ldy, next, step);
}

bool
llm_prepared_fetch_choice (const LlmCpuKernels *kern, uint32_t wtype)
{
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  return wk != NULL && wk->prepared.run_hw != NULL;
}

bool
llm_dequantize_prepared_row (const LlmCpuKernels *kern, uint32_t wtype, const void *prepared,
    size_t n, size_t r, float *out)
{
  const LlmCpuWeightKernels *wk = weight_kernels (kern, wtype);
  const WeightKind *k = kind_of (wtype);
  uint64_t row_bytes;
  assert (wk != NULL && wk->prepared.run != NULL);
  if (wk == NULL || wk->prepared.run == NULL || !llm_type_row_bytes (wtype, n, &row_bytes))
    return false;
  /* One row of blocks: on the stack up to widths of 29k Q4_0 values. */
  uint8_t stack[16384];
  uint8_t *blocks = row_bytes <= sizeof stack ? stack : malloc (row_bytes);
  if (blocks == NULL)
    return false;
  wk->prepared.unpack_row (wtype, prepared, n, r, blocks);
  k->expand (blocks, out, n);
  if (blocks != stack)
    free (blocks);
  return true;
}
