/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The K-quant quantizers: what comes back from quantize -> dequantize on
 * random data, exact bytes for blocks built so every value is
 * representable, bytes pinned to llama.cpp's own quantizers for a seeded
 * input, and the path through the GGUF writer and reader. Random inputs
 * use only + - * / so they are the same on every machine. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "gguf.h"
#include "gguf-writer.h"
#include "cpu/fp16.h"
#include "cpu/kquants.h"
#include "cpu/kquants-quantize.h"

/* --- helpers --- */

static guint64 rng_state;

static void
rng_seed (guint64 seed)
{
  rng_state = seed;
}

/* splitmix64 */
static guint64
rng_next (void)
{
  guint64 z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double
rng_unit (void)
{
  return (double) (rng_next () >> 11) / (double) (1ull << 53);
}

/* Near-normal (Irwin-Hall: twelve uniforms less 6), mean 0, std 1;
 * no libm, so the floats are bit-identical everywhere. */
static float
rng_normal (void)
{
  double s = 0;
  for (int i = 0; i < 12; i++)
    s += rng_unit ();
  return (float) (s - 6.0);
}

typedef enum { DIST_NORMAL, DIST_UNIFORM, DIST_POSITIVE, DIST_SPARSE, N_DIST } Dist;

static void
fill (float *x, gsize n, Dist dist, float scale)
{
  for (gsize i = 0; i < n; i++) {
    switch (dist) {
      case DIST_NORMAL: x[i] = rng_normal () * scale; break;
      case DIST_UNIFORM: x[i] = (float) (rng_unit () * 2 - 1) * scale; break;
      case DIST_POSITIVE: x[i] = (float) rng_unit () * scale; break;
      default: x[i] = rng_next () % 4 == 0 ? rng_normal () * scale : 0.0f; break;
    }
  }
}

typedef enum { K4, K5, K6 } KType;

static const struct {
  const char *name;
  guint32 type;
  gsize block_bytes;
} ktypes[] = {
  [K4] = { "Q4_K", LLM_TYPE_Q4_K, sizeof (LlmBlockQ4_K) },
  [K5] = { "Q5_K", LLM_TYPE_Q5_K, sizeof (LlmBlockQ5_K) },
  [K6] = { "Q6_K", LLM_TYPE_Q6_K, sizeof (LlmBlockQ6_K) },
};

static void
quantize (KType t, const float *x, void *q, gsize n)
{
  switch (t) {
    case K4: llm_quantize_row_q4_K (x, q, n); break;
    case K5: llm_quantize_row_q5_K (x, q, n); break;
    case K6: llm_quantize_row_q6_K (x, q, n); break;
  }
}

static void
dequantize (KType t, const void *q, float *y, gsize n)
{
  switch (t) {
    case K4: llm_dequantize_row_q4_K (q, y, n); break;
    case K5: llm_dequantize_row_q5_K (q, y, n); break;
    case K6: llm_dequantize_row_q6_K (q, y, n); break;
  }
}

/* Per super-block: the largest |x - y| relative to the block's largest
 * |x|, and the RMS error relative to the block's RMS, worst over blocks. */
static void
roundtrip_errors (KType t, const float *x, gsize n, double *max_rel, double *rms_rel)
{
  guint8 *q = g_malloc (n / LLM_QK_K * ktypes[t].block_bytes);
  float *y = g_new (float, n);
  quantize (t, x, q, n);
  dequantize (t, q, y, n);
  *max_rel = *rms_rel = 0;
  for (gsize b = 0; b < n / LLM_QK_K; b++) {
    double amax = 0, err_max = 0, sx2 = 0, se2 = 0;
    for (gsize i = b * LLM_QK_K; i < (b + 1) * LLM_QK_K; i++) {
      const double e = fabs ((double) x[i] - y[i]);
      amax = MAX (amax, fabs (x[i]));
      err_max = MAX (err_max, e);
      sx2 += (double) x[i] * x[i];
      se2 += e * e;
    }
    if (amax > 0) {
      *max_rel = MAX (*max_rel, err_max / amax);
      *rms_rel = MAX (*rms_rel, sqrt (se2 / sx2));
    }
  }
  g_free (q);
  g_free (y);
}

static gchar *
sha256_of (const void *data, gsize n)
{
  return g_compute_checksum_for_data (G_CHECKSUM_SHA256, data, n);
}

/* --- round trip on random data --- */

/* Worst case over 64 super-blocks of each distribution. No value may be
 * off by more than one code step of the widest sub-block a super-block can
 * hold: 2 amax / 15 for Q4_K and 2 amax / 31 for Q5_K (codes span
 * [min, max]), amax / 32 for Q6_K (codes -32..31 around 0). The fits
 * minimise a weighted squared error, so single values may pass half a
 * step; the RMS bounds are what 4, 5 and 6 bits give on such data, with
 * room to spare. */
static const struct {
  double max_rel, rms_rel;
} bounds[] = {
  [K4] = { 2.0 / 15, 0.100 },
  [K5] = { 2.0 / 31, 0.065 },
  [K6] = { 1.0 / 32, 0.030 },
};

static void
check_random_roundtrip (KType t)
{
  const gsize n = 64 * LLM_QK_K;
  float *x = g_new (float, n);
  for (Dist d = 0; d < N_DIST; d++) {
    rng_seed (1000 + d);
    const float scales[] = { 0.02f, 1.0f, 300.0f };
    for (gsize s = 0; s < G_N_ELEMENTS (scales); s++) {
      fill (x, n, d, scales[s]);
      double max_rel, rms_rel;
      roundtrip_errors (t, x, n, &max_rel, &rms_rel);
      ck_assert_msg (max_rel <= bounds[t].max_rel,
          "%s, distribution %d, scale %g: largest error %.4f of the block maximum "
          "(bound %.3f)", ktypes[t].name, d, scales[s], max_rel, bounds[t].max_rel);
      ck_assert_msg (rms_rel <= bounds[t].rms_rel,
          "%s, distribution %d, scale %g: RMS error %.4f of the block RMS (bound %.3f)",
          ktypes[t].name, d, scales[s], rms_rel, bounds[t].rms_rel);
    }
  }
  g_free (x);
}

START_TEST (test_q4_K_roundtrip_error_is_bounded_on_random_data)
{
  check_random_roundtrip (K4);
}
END_TEST

START_TEST (test_q5_K_roundtrip_error_is_bounded_on_random_data)
{
  check_random_roundtrip (K5);
}
END_TEST

START_TEST (test_q6_K_roundtrip_error_is_bounded_on_random_data)
{
  check_random_roundtrip (K6);
}
END_TEST

/* More bits must mean less error on the same data, or a search is broken. */
START_TEST (test_more_bits_give_less_error_on_the_same_data)
{
  const gsize n = 32 * LLM_QK_K;
  float *x = g_new (float, n);
  rng_seed (7);
  fill (x, n, DIST_NORMAL, 0.02f);
  double m4, r4, m5, r5, m6, r6;
  roundtrip_errors (K4, x, n, &m4, &r4);
  roundtrip_errors (K5, x, n, &m5, &r5);
  roundtrip_errors (K6, x, n, &m6, &r6);
  ck_assert_msg (r5 < r4 * 0.6 && r6 < r5 * 0.75, "RMS errors %.4f %.4f %.4f", r4, r5, r6);
  g_free (x);
}
END_TEST

/* --- exact blocks --- */

START_TEST (test_zeros_quantize_to_all_zero_blocks)
{
  float x[LLM_QK_K] = { 0 };
  for (KType t = K4; t <= K6; t++) {
    guint8 q[sizeof (LlmBlockQ5_K) > sizeof (LlmBlockQ6_K) ? sizeof (LlmBlockQ5_K)
        : sizeof (LlmBlockQ6_K)];
    memset (q, 0xAB, sizeof q);
    quantize (t, x, q, LLM_QK_K);
    for (gsize i = 0; i < ktypes[t].block_bytes; i++)
      ck_assert_msg (q[i] == 0, "%s byte %zu is 0x%02x", ktypes[t].name, i, q[i]);
  }
}
END_TEST

/* s = 63 / 1024, so d = s / 63 = 2^-10 is exact in half precision and
 * d * 63 gives s back exactly: every code is then recovered exactly. */
#define EXACT_STEP (63.0f / 1024.0f)

START_TEST (test_q4_K_block_of_codes_0_to_15_is_exact)
{
  float x[LLM_QK_K];
  for (int i = 0; i < LLM_QK_K; i++)
    x[i] = (float) (i % 16) * EXACT_STEP;
  LlmBlockQ4_K b;
  llm_quantize_row_q4_K (x, &b, LLM_QK_K);

  ck_assert_uint_eq (b.d, 0x1400);      /* 2^-10 */
  ck_assert_uint_eq (b.dmin, 0x0000);   /* nothing below 0 */
  /* Scale 63 everywhere, minimum 0: bytes 0..3 hold 63 plus the top bits
   * of sub-blocks 4..7's scales, bytes 8..11 their low nibbles. */
  static const guint8 scales[12] = { 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0,
    0x0F, 0x0F, 0x0F, 0x0F };
  ck_assert_mem_eq (b.scales, scales, 12);
  /* Byte l of group g: element 64 g + l low, 64 g + 32 + l high; both are
   * l % 16 here. */
  for (int i = 0; i < LLM_QK_K / 2; i++)
    ck_assert_uint_eq (b.qs[i], (guint) (i % 16) * 0x11);

  float y[LLM_QK_K];
  llm_dequantize_row_q4_K (&b, y, LLM_QK_K);
  for (int i = 0; i < LLM_QK_K; i++)
    ck_assert_float_eq (y[i], x[i]);
}
END_TEST

START_TEST (test_q4_K_block_with_negative_offset_uses_the_minimum)
{
  /* Codes 0..15 shifted down by 8 steps: min 8 s = 63 * 2^-7, exact. */
  float x[LLM_QK_K];
  for (int i = 0; i < LLM_QK_K; i++)
    x[i] = (float) ((i % 16) - 8) * EXACT_STEP;
  LlmBlockQ4_K b;
  llm_quantize_row_q4_K (x, &b, LLM_QK_K);

  ck_assert_uint_eq (b.d, 0x1400);      /* 2^-10 */
  ck_assert_uint_eq (b.dmin, 0x2000);   /* 2^-7 */
  for (int i = 0; i < 12; i++)
    ck_assert_uint_eq (b.scales[i], 0xFF);  /* every scale and minimum 63 */
  for (int i = 0; i < LLM_QK_K / 2; i++)
    ck_assert_uint_eq (b.qs[i], (guint) (i % 16) * 0x11);

  float y[LLM_QK_K];
  llm_dequantize_row_q4_K (&b, y, LLM_QK_K);
  for (int i = 0; i < LLM_QK_K; i++)
    ck_assert_float_eq (y[i], x[i]);
}
END_TEST

START_TEST (test_q5_K_block_of_codes_0_to_31_is_exact)
{
  float x[LLM_QK_K];
  for (int i = 0; i < LLM_QK_K; i++)
    x[i] = (float) (i % 32) * EXACT_STEP;
  LlmBlockQ5_K b;
  llm_quantize_row_q5_K (x, &b, LLM_QK_K);

  ck_assert_uint_eq (b.d, 0x1400);
  ck_assert_uint_eq (b.dmin, 0x0000);
  static const guint8 scales[12] = { 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0,
    0x0F, 0x0F, 0x0F, 0x0F };
  ck_assert_mem_eq (b.scales, scales, 12);
  /* Elements 64 g + l and 64 g + 32 + l both hold code l (l < 32): low
   * nibbles l & 15 twice, and for l >= 16 the fifth bit of both, in all
   * four groups, so every bit of qh[l]. */
  for (int i = 0; i < LLM_QK_K / 2; i++)
    ck_assert_uint_eq (b.qs[i], (guint) (i % 16) * 0x11);
  for (int l = 0; l < LLM_QK_K / 8; l++)
    ck_assert_uint_eq (b.qh[l], l >= 16 ? 0xFF : 0x00);

  float y[LLM_QK_K];
  llm_dequantize_row_q5_K (&b, y, LLM_QK_K);
  for (int i = 0; i < LLM_QK_K; i++)
    ck_assert_float_eq (y[i], x[i]);
}
END_TEST

START_TEST (test_q6_K_block_of_codes_is_exact_and_signed)
{
  /* Values (4 i - 32) / 8, i = 0..15 in every sub-block: the largest
   * magnitude is -4, which maps to code -32, so the sub-block scale is
   * 1/8, the block's d = -(1/8) / 128 = -2^-10 and every scale -128. */
  float x[LLM_QK_K];
  for (int i = 0; i < LLM_QK_K; i++)
    x[i] = (float) (4 * (i % 16) - 32) * 0.125f;
  LlmBlockQ6_K b;
  llm_quantize_row_q6_K (x, &b, LLM_QK_K);

  ck_assert_uint_eq (b.d, 0x9400);      /* -2^-10 */
  for (int j = 0; j < LLM_QK_K / 16; j++)
    ck_assert_int_eq (b.scales[j], -128);
  /* Stored code of element e is 4 (e % 16): ql byte l of half h holds
   * elements 128 h + l and 128 h + l + 64, byte l + 32 elements + 32 and
   * + 96 (all with the same e % 16 = l % 16), qh the top two bits. */
  for (int h = 0; h < 2; h++) {
    for (int l = 0; l < 32; l++) {
      const guint c = 4 * (l % 16);
      ck_assert_uint_eq (b.ql[64 * h + l], (c & 0xF) * 0x11);
      ck_assert_uint_eq (b.ql[64 * h + l + 32], (c & 0xF) * 0x11);
      ck_assert_uint_eq (b.qh[32 * h + l], (c >> 4) * 0x55);
    }
  }

  float y[LLM_QK_K];
  llm_dequantize_row_q6_K (&b, y, LLM_QK_K);
  for (int i = 0; i < LLM_QK_K; i++)
    ck_assert_float_eq (y[i], x[i]);
}
END_TEST

/* The bytes for this seeded input came from llama.cpp's own
 * quantize_row_q4_K_ref / q5_K / q6_K_ref (libggml-base of node-llama-cpp
 * 3.21.1), run on the same floats: our files equal llama-quantize's. */
START_TEST (test_seeded_blocks_match_llama_cpp_bytes)
{
  static const char *const expected[] = {
    [K4] = "a05bea2dea4b10ef9e62f765b8e3988faefcc4ff4de3df9b7f0e18af0a7abb0c",
    [K5] = "5f6d7dfce91f72de3b527348ef92631edf1e329c09b963d45016efffb6b76616",
    [K6] = "243c98f499f2667db094db9ef7f19eb5a2b27f0e6d2994bb9678701c7e839808",
  };
  const gsize n = 16 * LLM_QK_K;
  float *x = g_new (float, n);
  rng_seed (20240601);
  for (gsize i = 0; i < n; i++) {
    /* A mix of scales and signs, with zero runs, to reach every branch. */
    const gsize blk = i / LLM_QK_K;
    x[i] = (blk % 4 == 3 && (i / 32) % 3 == 0) ? 0.0f
        : rng_normal () * (blk % 2 ? 0.02f : 1.5f) + (blk % 3 == 1 ? 0.01f : 0.0f);
  }
  for (KType t = K4; t <= K6; t++) {
    gsize bytes = n / LLM_QK_K * ktypes[t].block_bytes;
    guint8 *q = g_malloc (bytes);
    quantize (t, x, q, n);
    g_autofree gchar *sum = sha256_of (q, bytes);
    ck_assert_msg (strcmp (sum, expected[t]) == 0, "%s bytes hash to %s", ktypes[t].name, sum);
    g_free (q);
  }
  g_free (x);
}
END_TEST

/* --- through the GGUF writer and reader --- */

START_TEST (test_writer_stores_k_quants_as_the_quantizers_make_them)
{
  const guint64 ne[2] = { 2 * LLM_QK_K, 3 };
  const gsize n = ne[0] * ne[1];
  float *x = g_new (float, n);
  rng_seed (99);
  fill (x, n, DIST_NORMAL, 0.05f);

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  for (KType t = K4; t <= K6; t++) {
    ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, ktypes[t].name, ktypes[t].type, 2, ne,
        x, NULL));
  }
  GError *error = NULL;
  GBytes *file = llm_gguf_writer_to_bytes (w, &error);
  ck_assert_msg (file != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmGguf) g = llm_gguf_new_from_bytes (file, &error);
  g_bytes_unref (file);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "");

  for (KType t = K4; t <= K6; t++) {
    const LlmGgufTensor *tt = llm_gguf_find_tensor (g, ktypes[t].name);
    ck_assert_ptr_nonnull (tt);
    ck_assert_uint_eq (tt->type, ktypes[t].type);
    ck_assert_uint_eq (tt->ne[0], ne[0]);
    ck_assert_uint_eq (tt->ne[1], ne[1]);
    gsize bytes = n / LLM_QK_K * ktypes[t].block_bytes;
    ck_assert_uint_eq (tt->size, bytes);
    guint8 *q = g_malloc (bytes);
    quantize (t, x, q, n);
    ck_assert_mem_eq (tt->data, q, bytes);

    /* And back to floats the way the engine reads them. */
    float *y = g_new (float, n), *yr = g_new (float, n);
    dequantize (t, tt->data, y, n);
    dequantize (t, q, yr, n);
    ck_assert_mem_eq (y, yr, n * sizeof (float));
    g_free (y);
    g_free (yr);
    g_free (q);
  }
  g_free (x);
}
END_TEST

START_TEST (test_writer_rejects_a_k_quant_row_that_is_not_whole_blocks)
{
  const guint64 ne[2] = { 128, 2 };
  float x[256] = { 0 };
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  GError *error = NULL;
  ck_assert (!llm_gguf_writer_add_tensor_from_f32 (w, "t", LLM_TYPE_Q4_K, 2, ne, x, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID));
  ck_assert_msg (strstr (error->message, "Q4_K") != NULL, "%s", error->message);
  g_error_free (error);
}
END_TEST

/* add_tensor_bytes keeps the caller's buffer (a mapped file, in
 * gst-llm-bench) instead of copying it, and writes it unchanged. */
START_TEST (test_writer_add_tensor_bytes_writes_the_buffer_it_was_given)
{
  const guint64 ne[1] = { LLM_QK_K };
  float x[LLM_QK_K];
  rng_seed (5);
  fill (x, LLM_QK_K, DIST_NORMAL, 1.0f);
  LlmBlockQ6_K *blk = g_new (LlmBlockQ6_K, 1);
  llm_quantize_row_q6_K (x, blk, LLM_QK_K);
  GBytes *data = g_bytes_new_take (blk, sizeof *blk);

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  GError *error = NULL;
  ck_assert (llm_gguf_writer_add_tensor_bytes (w, "q6", LLM_TYPE_Q6_K, 1, ne, data, &error));
  /* A size that does not fit the shape is refused. */
  GBytes *short_data = g_bytes_new_from_bytes (data, 0, sizeof *blk - 1);
  ck_assert (!llm_gguf_writer_add_tensor_bytes (w, "bad", LLM_TYPE_Q6_K, 1, ne, short_data,
      NULL));
  g_bytes_unref (short_data);
  g_bytes_unref (data);

  /* The failure above is sticky, by design; a fresh writer shows the good
   * tensor written back unchanged. */
  ck_assert (llm_gguf_writer_to_bytes (w, NULL) == NULL);
  g_autoptr (LlmGgufWriter) w2 = llm_gguf_writer_new ();
  blk = g_new (LlmBlockQ6_K, 1);
  llm_quantize_row_q6_K (x, blk, LLM_QK_K);
  data = g_bytes_new_take (blk, sizeof *blk);
  ck_assert (llm_gguf_writer_add_tensor_bytes (w2, "q6", LLM_TYPE_Q6_K, 1, ne, data, NULL));
  g_autofree char *dir = g_dir_make_tmp ("kq-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "m.gguf", NULL);
  ck_assert (llm_gguf_writer_write_file (w2, path, &error));
  g_autoptr (LlmGguf) g = llm_gguf_open (path, &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "");
  const LlmGgufTensor *t = llm_gguf_find_tensor (g, "q6");
  ck_assert_ptr_nonnull (t);
  ck_assert_uint_eq (t->type, LLM_TYPE_Q6_K);
  ck_assert_mem_eq (t->data, g_bytes_get_data (data, NULL), sizeof *blk);
  g_bytes_unref (data);
  g_remove (path);
  g_rmdir (dir);
}
END_TEST

static Suite *
kquants_quantize_suite (void)
{
  Suite *s = suite_create ("kquants-quantize");

  TCase *rt = tcase_create ("roundtrip");
  tcase_add_test (rt, test_q4_K_roundtrip_error_is_bounded_on_random_data);
  tcase_add_test (rt, test_q5_K_roundtrip_error_is_bounded_on_random_data);
  tcase_add_test (rt, test_q6_K_roundtrip_error_is_bounded_on_random_data);
  tcase_add_test (rt, test_more_bits_give_less_error_on_the_same_data);
  suite_add_tcase (s, rt);

  TCase *exact = tcase_create ("exact");
  tcase_add_test (exact, test_zeros_quantize_to_all_zero_blocks);
  tcase_add_test (exact, test_q4_K_block_of_codes_0_to_15_is_exact);
  tcase_add_test (exact, test_q4_K_block_with_negative_offset_uses_the_minimum);
  tcase_add_test (exact, test_q5_K_block_of_codes_0_to_31_is_exact);
  tcase_add_test (exact, test_q6_K_block_of_codes_is_exact_and_signed);
  tcase_add_test (exact, test_seeded_blocks_match_llama_cpp_bytes);
  suite_add_tcase (s, exact);

  TCase *gguf = tcase_create ("gguf");
  tcase_add_test (gguf, test_writer_stores_k_quants_as_the_quantizers_make_them);
  tcase_add_test (gguf, test_writer_rejects_a_k_quant_row_that_is_not_whole_blocks);
  tcase_add_test (gguf, test_writer_add_tensor_bytes_writes_the_buffer_it_was_given);
  suite_add_tcase (s, gguf);

  return s;
}

LLM_TEST_MAIN (kquants_quantize_suite)
