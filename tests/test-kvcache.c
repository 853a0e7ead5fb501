/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The session KV cache: storage per type, attention against a plain
 * double-precision computation, the window policies and their key shift,
 * and memory use. Tolerances are derived next to each assertion. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "kvcache.h"
#include "kvpool.h"
#include "cpu/fp16.h"
#include "cpu/ops.h"
#include "cpu/matmul.h"

/* The kernels under test and the reference they must equal. */
#define FAST llm_cpu_kernels_best ()
#define SCALAR llm_cpu_kernels (LLM_CPU_ISA_SCALAR)

/* --- helpers --- */

static LlmKvCache *
new_cache (LlmKvType type, LlmKvPolicy policy, guint32 size, guint32 sink, guint n_layers,
    guint n_head_kv, guint head_dim, const LlmKvRope *rope)
{
  LlmKvConfig config = {
    .type = type,
    .policy = policy,
    .context_length = policy == LLM_KV_POLICY_FULL ? size : 0,
    .window = policy == LLM_KV_POLICY_FULL ? 0 : size,
    .sink = sink,
  };
  GError *error = NULL;
  LlmKvCache *kv = llm_kv_cache_new (n_layers, n_head_kv, head_dim, &config, rope, &error);
  ck_assert_msg (kv != NULL, "cache not created: %s", error ? error->message : "?");
  return kv;
}

static void
fill_random (GRand *rand, float *x, gsize n, double lo, double hi)
{
  for (gsize i = 0; i < n; i++)
    x[i] = (float) g_rand_double_range (rand, lo, hi);
}

/* Reserves, writes and commits one position in every layer; @k and @v hold
 * a row per layer. Returns the cache position written. */
static guint32
append (LlmKvCache *kv, guint n_layers, gsize row_n, const float *k, const float *v)
{
  GError *error = NULL;
  ck_assert_msg (llm_kv_cache_reserve (kv, 1, &error), "reserve: %s",
      error ? error->message : "?");
  const guint32 pos = llm_kv_cache_n (kv);
  for (guint l = 0; l < n_layers; l++)
    llm_kv_cache_write (kv, FAST, l, pos, k + l * row_n, v + l * row_n);
  llm_kv_cache_commit (kv, 1);
  return pos;
}

/* softmax(scale * q.K) V over rows [0, n_kv) of @keys/@values (row length
 * @row_n, head values at @offset), all in double. @qk_round and @p_round
 * model F16 storage: q rounded to half before the dot, probabilities
 * rounded to half before weighting. @abs_weight gets sum_p p_p |V_p,i|,
 * the scale that rounding errors of the weighted sum are relative to. */
static void
naive_attention (const float *q, const float *keys, const float *values, gsize row_n,
    gsize offset, gsize d, guint32 n_kv, float scale, gboolean half, double *out,
    double *abs_weight)
{
  double *s = g_new (double, n_kv);
  double max = -INFINITY;
  for (guint32 p = 0; p < n_kv; p++) {
    double dot = 0.0;
    for (gsize i = 0; i < d; i++) {
      double qi = half ? llm_fp16_to_f32 (llm_fp16_from_f32 (q[i])) : q[i];
      dot += qi * keys[p * row_n + offset + i];
    }
    s[p] = dot * scale;
    max = MAX (max, s[p]);
  }
  double sum = 0.0;
  for (guint32 p = 0; p < n_kv; p++) {
    s[p] = exp (s[p] - max);
    sum += s[p];
  }
  for (gsize i = 0; i < d; i++)
    out[i] = abs_weight[i] = 0.0;
  for (guint32 p = 0; p < n_kv; p++) {
    double w = s[p] / sum;
    if (half)
      w = llm_fp16_to_f32 (llm_fp16_from_f32 ((float) w));
    for (gsize i = 0; i < d; i++) {
      out[i] += w * values[p * row_n + offset + i];
      abs_weight[i] += w * fabs (values[p * row_n + offset + i]);
    }
  }
  g_free (s);
}

/* Largest |got - want| over the largest |want|. */
static double
rel_error (const float *got, const double *want, gsize n)
{
  double err = 0.0, mag = 0.0;
  for (gsize i = 0; i < n; i++) {
    err = MAX (err, fabs (got[i] - want[i]));
    mag = MAX (mag, fabs (want[i]));
  }
  return mag > 0.0 ? err / mag : err;
}

/* --- storage per type --- */

START_TEST (test_f32_rows_round_trip_exactly)
{
  const guint n_head_kv = 2, head_dim = 24, row_n = n_head_kv * head_dim;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 100, 0, 2,
      n_head_kv, head_dim, NULL);
  GRand *rand = g_rand_new_with_seed (1);
  float k[2 * 48], v[2 * 48], gk[48], gv[48];
  float all_k[70][2 * 48], all_v[70][2 * 48];

  for (int t = 0; t < 70; t++) {
    fill_random (rand, k, 2 * row_n, -1e3, 1e3);
    fill_random (rand, v, 2 * row_n, -1e-3, 1e-3);
    memcpy (all_k[t], k, sizeof k);
    memcpy (all_v[t], v, sizeof v);
    ck_assert_uint_eq (append (kv, 2, row_n, k, v), t);
  }
  for (int t = 0; t < 70; t++) {
    for (guint l = 0; l < 2; l++) {
      llm_kv_cache_read (kv, l, t, gk, gv);
      ck_assert (memcmp (gk, all_k[t] + l * row_n, sizeof gk) == 0);
      ck_assert (memcmp (gv, all_v[t] + l * row_n, sizeof gv) == 0);
    }
  }
  g_rand_free (rand);
}
END_TEST

START_TEST (test_f16_rows_round_trip_within_half_precision)
{
  const guint row_n = 64;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 16, 0, 1, 4, 16, NULL);
  GRand *rand = g_rand_new_with_seed (2);
  float k[64], v[64], gk[64], gv[64];

  for (int t = 0; t < 16; t++) {
    /* Magnitudes from 1e-6 (half subnormals) to 1e4. */
    for (guint i = 0; i < row_n; i++) {
      k[i] = (float) (g_rand_double_range (rand, -1, 1) * pow (10.0, t % 11 - 6));
      v[i] = (float) (g_rand_double_range (rand, -1, 1) * pow (10.0, 4 - t % 11));
    }
    append (kv, 1, row_n, k, v);
    llm_kv_cache_read (kv, 0, t, gk, gv);
    for (guint i = 0; i < row_n; i++) {
      /* Round to nearest: half an ulp, 2^-11 relative for normal halves,
       * 2^-25 absolute for subnormals (their ulp is 2^-24). */
      ck_assert_float_le (fabsf (gk[i] - k[i]), MAX (fabsf (k[i]) * 0x1p-11f, 0x1p-25f));
      ck_assert_float_le (fabsf (gv[i] - v[i]), MAX (fabsf (v[i]) * 0x1p-11f, 0x1p-25f));
      /* and it is exactly the half conversion */
      ck_assert (gk[i] == llm_fp16_to_f32 (llm_fp16_from_f32 (k[i])));
      ck_assert (gv[i] == llm_fp16_to_f32 (llm_fp16_from_f32 (v[i])));
    }
  }
  g_rand_free (rand);
}
END_TEST

/* Largest |x| over each block of 32 of @x. */
static float
block_amax (const float *x, guint i)
{
  const float *b = x + i / 32 * 32;
  float amax = 0.0f;
  for (int j = 0; j < 32; j++)
    amax = MAX (amax, fabsf (b[j]));
  return amax;
}

static void
check_quantized_round_trip (LlmKvType type)
{
  const guint row_n = 128;
  g_autoptr (LlmKvCache) kv = new_cache (type, LLM_KV_POLICY_FULL, 40, 0, 1, 2, 64, NULL);
  GRand *rand = g_rand_new_with_seed (3);
  float k[128], v[128], gk[128], gv[128];

  for (int t = 0; t < 40; t++) {
    const double mag = pow (2.0, t % 9 - 4);
    fill_random (rand, k, row_n, -mag, mag);
    fill_random (rand, v, row_n, 0, mag);
    append (kv, 1, row_n, k, v);
    llm_kv_cache_read (kv, 0, t, gk, gv);
    for (guint i = 0; i < row_n; i++) {
      const float *x[2] = { k, v }, *y[2] = { gk, gv };
      for (int s = 0; s < 2; s++) {
        const float amax = block_amax (x[s], i);
        float bound;
        if (type == LLM_KV_Q8_0) {
          /* d = amax/127 and codes round to nearest: d/2; d is stored as a
           * half (2^-11 relative) and multiplies a code of at most 127. */
          bound = amax / 127.0f * (0.5f + 127.0f * 0x1p-11f);
        } else {
          /* d = amax/8 in magnitude; codes round to nearest (d/2) except
           * the mirror of the extreme value, +8 clamped to +7: a full d.
           * The half d multiplies a code of at most 8 (2^-8 d). */
          bound = amax / 8.0f * (1.0f + 0x1p-8f);
        }
        /* 1e-6 relative slack for the float products in (de)quantizing. */
        bound += amax * 1e-6f;
        ck_assert_msg (fabsf (y[s][i] - x[s][i]) <= bound,
            "%s %s[%u] at %d: %g vs %g (bound %g)", llm_kv_type_name (type),
            s ? "v" : "k", i, t, y[s][i], x[s][i], bound);
      }
    }
  }
  g_rand_free (rand);
}

START_TEST (test_q8_0_rows_round_trip_within_block_error)
{
  check_quantized_round_trip (LLM_KV_Q8_0);
}
END_TEST

START_TEST (test_q4_0_rows_round_trip_within_block_error)
{
  check_quantized_round_trip (LLM_KV_Q4_0);
}
END_TEST

START_TEST (test_q8_0_with_a_row_of_24_values_is_a_config_error)
{
  LlmKvConfig config = { .type = LLM_KV_Q8_0, .policy = LLM_KV_POLICY_FULL,
    .context_length = 64 };
  GError *error = NULL;
  LlmKvCache *kv = llm_kv_cache_new (4, 2, 12, &config, NULL, &error);
  ck_assert_ptr_null (kv);
  ck_assert_msg (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG), "%s",
      error ? error->message : "no error");
  ck_assert_msg (strstr (error->message, "24") && strstr (error->message, "2 heads x 12")
      && strstr (error->message, "32") && strstr (error->message, "f16"), "%s", error->message);
  g_clear_error (&error);

  /* The same model's f16 cache is fine. */
  config.type = LLM_KV_F16;
  g_autoptr (LlmKvCache) ok = llm_kv_cache_new (4, 2, 12, &config, NULL, &error);
  ck_assert_ptr_nonnull (ok);
}
END_TEST

START_TEST (test_type_names_round_trip)
{
  static const LlmKvType types[] = { LLM_KV_F16, LLM_KV_F32, LLM_KV_Q8_0, LLM_KV_Q4_0 };
  static const char *const names[] = { "f16", "f32", "q8_0", "q4_0" };
  for (guint i = 0; i < G_N_ELEMENTS (types); i++) {
    LlmKvType t;
    ck_assert_str_eq (llm_kv_type_name (types[i]), names[i]);
    ck_assert (llm_kv_type_from_name (names[i], &t));
    ck_assert_int_eq (t, types[i]);
  }
  LlmKvType t = LLM_KV_F32;
  ck_assert (!llm_kv_type_from_name ("q4_k", &t));
  ck_assert_int_eq (t, LLM_KV_F32);
}
END_TEST

/* --- attention --- */

/* 8 query heads on 2 KV heads (groups of 4), 100 positions written; for
 * n_kv 1, 7 and 100 (across a 64-position block boundary) every head
 * matches double precision within 1e-6 of its largest output: a float dot
 * of 64 terms and a float weighted sum of 100 rows err by a few 1e-7. */
START_TEST (test_f32_attention_with_gqa_matches_double_precision)
{
  const guint n_head = 8, n_head_kv = 2, d = 64, row_n = n_head_kv * d;
  const guint32 n = 100;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 256, 0, 1,
      n_head_kv, d, NULL);
  GRand *rand = g_rand_new_with_seed (4);
  float *keys = g_new (float, n * row_n), *values = g_new (float, n * row_n);
  fill_random (rand, keys, n * row_n, -1, 1);
  fill_random (rand, values, n * row_n, -1, 1);
  for (guint32 t = 0; t < n; t++)
    append (kv, 1, row_n, keys + t * row_n, values + t * row_n);

  static const guint32 n_kvs[] = { 1, 7, 100 };
  float q[64], out[64];
  double want[64], absw[64];
  float *scratch = g_new (float, llm_kv_cache_scratch_floats (kv, n));
  const float scale = 1.0f / sqrtf ((float) d);
  for (guint i = 0; i < G_N_ELEMENTS (n_kvs); i++) {
    for (guint h = 0; h < n_head; h++) {
      fill_random (rand, q, d, -2, 2);
      llm_kv_cache_attend (kv, FAST, 0, h, n_head, q, n_kvs[i], scale, out, scratch);
      naive_attention (q, keys, values, row_n, h / 4 * d, d, n_kvs[i], scale, FALSE,
          want, absw);
      const double err = rel_error (out, want, d);
      ck_assert_msg (err <= 1e-6, "n_kv %u head %u: relative error %g", n_kvs[i], h, err);
    }
  }

  /* One position: the output is that position's value row exactly. */
  llm_kv_cache_attend (kv, FAST, 0, 7, n_head, q, 1, scale, out, scratch);
  ck_assert (memcmp (out, values + d, d * sizeof (float)) == 0);

  g_free (scratch);
  g_free (keys);
  g_free (values);
  g_rand_free (rand);
}
END_TEST

/* MQA: every query head reads the one KV head. */
START_TEST (test_mqa_heads_all_read_the_single_kv_head)
{
  const guint d = 32;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 8, 0, 1, 1, d, NULL);
  GRand *rand = g_rand_new_with_seed (5);
  float keys[5 * 32], values[5 * 32], q[32], first[32], out[32];
  fill_random (rand, keys, 5 * d, -1, 1);
  fill_random (rand, values, 5 * d, -1, 1);
  fill_random (rand, q, d, -1, 1);
  for (int t = 0; t < 5; t++)
    append (kv, 1, d, keys + t * d, values + t * d);
  float scratch[5 + 2 * 32];
  ck_assert_uint_le (llm_kv_cache_scratch_floats (kv, 5), G_N_ELEMENTS (scratch));
  llm_kv_cache_attend (kv, FAST, 0, 0, 6, q, 5, 0.3f, first, scratch);
  for (guint h = 1; h < 6; h++) {
    llm_kv_cache_attend (kv, FAST, 0, h, 6, q, 5, 0.3f, out, scratch);
    ck_assert (memcmp (out, first, sizeof out) == 0);
  }
  g_rand_free (rand);
}
END_TEST

/* Prefill writes 20 positions before committing any; query i attends to
 * positions [0, i] only, as if the later ones did not exist. */
START_TEST (test_causal_prefill_gives_each_query_its_own_prefix)
{
  const guint n_head = 4, n_head_kv = 2, d = 16, row_n = n_head_kv * d, n = 20;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 64, 0, 2,
      n_head_kv, d, NULL);
  GRand *rand = g_rand_new_with_seed (6);
  float keys[20 * 32], values[20 * 32], q[4 * 16], out[16];
  double want[16], absw[16];
  fill_random (rand, keys, n * row_n, -1, 1);
  fill_random (rand, values, n * row_n, -1, 1);

  ck_assert (llm_kv_cache_reserve (kv, n, NULL));
  for (guint32 t = 0; t < n; t++)
    for (guint l = 0; l < 2; l++)
      llm_kv_cache_write (kv, FAST, l, t, keys + t * row_n, values + t * row_n);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 0);

  float scratch[20 + 2 * 16];
  for (guint32 i = 0; i < n; i++) {
    fill_random (rand, q, n_head * d, -1, 1);
    for (guint h = 0; h < n_head; h++) {
      llm_kv_cache_attend (kv, FAST, 1, h, n_head, q + h * d, i + 1, 0.25f, out, scratch);
      naive_attention (q + h * d, keys, values, row_n, h / 2 * d, d, i + 1, 0.25f, FALSE,
          want, absw);
      ck_assert_msg (rel_error (out, want, d) <= 1e-6, "query %u head %u", i, h);
    }
  }
  llm_kv_cache_commit (kv, n);
  ck_assert_uint_eq (llm_kv_cache_n (kv), n);
  g_rand_free (rand);
}
END_TEST

/* An F16 cache computes what llama.cpp's default path does: q rounded to
 * half against half keys, softmax in float, probabilities rounded to half
 * against half values. The reference does the same roundings in double;
 * the float sums can move a probability across a half rounding boundary,
 * one half ulp (2^-11 relative), so the bound is 2^-11 sum_p p|V| plus
 * 1e-6 of the output for the float arithmetic. */
START_TEST (test_f16_attention_rounds_like_llama_cpp)
{
  const guint n_head = 4, n_head_kv = 2, d = 64, row_n = n_head_kv * d, n = 90;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 128, 0, 1,
      n_head_kv, d, NULL);
  GRand *rand = g_rand_new_with_seed (7);
  float *keys = g_new (float, n * row_n), *values = g_new (float, n * row_n);
  fill_random (rand, keys, n * row_n, -1, 1);
  fill_random (rand, values, n * row_n, -1, 1);
  for (guint32 t = 0; t < n; t++) {
    append (kv, 1, row_n, keys + t * row_n, values + t * row_n);
    /* the reference sees the stored (rounded) rows */
    llm_kv_cache_read (kv, 0, t, keys + t * row_n, values + t * row_n);
  }

  float q[64], out[64];
  double want[64], absw[64];
  float *scratch = g_new (float, llm_kv_cache_scratch_floats (kv, n));
  for (guint32 n_kv = 1; n_kv <= n; n_kv += 11) {
    for (guint h = 0; h < n_head; h++) {
      fill_random (rand, q, d, -3, 3);
      llm_kv_cache_attend (kv, FAST, 0, h, n_head, q, n_kv, 0.125f, out, scratch);
      naive_attention (q, keys, values, row_n, h / 2 * d, d, n_kv, 0.125f, TRUE, want, absw);
      double mag = 0.0;
      for (guint i = 0; i < d; i++)
        mag = MAX (mag, fabs (want[i]));
      for (guint i = 0; i < d; i++)
        ck_assert_msg (fabs (out[i] - want[i]) <= absw[i] * 0x1p-11 + mag * 1e-6,
            "n_kv %u head %u [%u]: %.9g vs %.9g", n_kv, h, i, out[i], want[i]);
    }
  }
  g_free (scratch);
  g_free (keys);
  g_free (values);
  g_rand_free (rand);
}
END_TEST

/* Three equal scores give p = 1/3 each. An F16 cache weights the values
 * with half(1/3) = 0x3555 = 0.333251953125, so three values of 1 sum to
 * exactly 0.999755859375 (every partial sum is exact in float); an F32
 * cache weights with float(1/3) and sums to 1 within one float ulp. */
START_TEST (test_f16_probabilities_are_rounded_to_half_before_weighting)
{
  static const LlmKvType types[] = { LLM_KV_F16, LLM_KV_F32 };
  for (guint i = 0; i < G_N_ELEMENTS (types); i++) {
    g_autoptr (LlmKvCache) kv = new_cache (types[i], LLM_KV_POLICY_FULL, 8, 0, 1, 1, 32, NULL);
    float k[32] = { 0 }, v[32], q[32], out[32], scratch[3 + 64];
    for (guint j = 0; j < 32; j++) {
      v[j] = 1.0f;
      q[j] = 0.5f;
    }
    for (int t = 0; t < 3; t++)
      append (kv, 1, 32, k, v);
    llm_kv_cache_attend (kv, FAST, 0, 0, 1, q, 3, 1.0f, out, scratch);
    for (guint j = 0; j < 32; j++) {
      if (types[i] == LLM_KV_F16)
        ck_assert_float_eq (out[j], 0.999755859375f);
      else
        ck_assert_float_eq_tol (out[j], 1.0f, 0x1p-23f);
    }
  }
}
END_TEST

/* Quantized rows are expanded to float and attended in float: the result
 * equals double-precision attention over the rows read back, within 1e-6.
 * head_dim 80 puts the second head's slice in the middle of a block. */
static void
check_quantized_attention (LlmKvType type)
{
  const guint n_head = 4, n_head_kv = 2, d = 80, row_n = n_head_kv * d, n = 70;
  g_autoptr (LlmKvCache) kv = new_cache (type, LLM_KV_POLICY_FULL, 128, 0, 1,
      n_head_kv, d, NULL);
  GRand *rand = g_rand_new_with_seed (8);
  float *keys = g_new (float, n * row_n), *values = g_new (float, n * row_n);
  fill_random (rand, keys, n * row_n, -1, 1);
  fill_random (rand, values, n * row_n, -1, 1);
  for (guint32 t = 0; t < n; t++) {
    append (kv, 1, row_n, keys + t * row_n, values + t * row_n);
    llm_kv_cache_read (kv, 0, t, keys + t * row_n, values + t * row_n);
  }
  float q[80], out[80];
  double want[80], absw[80];
  float *scratch = g_new (float, llm_kv_cache_scratch_floats (kv, n));
  for (guint h = 0; h < n_head; h++) {
    fill_random (rand, q, d, -1, 1);
    llm_kv_cache_attend (kv, FAST, 0, h, n_head, q, n, 0.11f, out, scratch);
    naive_attention (q, keys, values, row_n, h / 2 * d, d, n, 0.11f, FALSE, want, absw);
    ck_assert_msg (rel_error (out, want, d) <= 1e-6, "%s head %u: %g",
        llm_kv_type_name (type), h, rel_error (out, want, d));
  }
  g_free (scratch);
  g_free (keys);
  g_free (values);
  g_rand_free (rand);
}

START_TEST (test_q8_0_attention_uses_the_dequantized_rows)
{
  check_quantized_attention (LLM_KV_Q8_0);
}
END_TEST

START_TEST (test_q4_0_attention_uses_the_dequantized_rows)
{
  check_quantized_attention (LLM_KV_Q4_0);
}
END_TEST

/* --- policies --- */

START_TEST (test_full_reserve_past_capacity_fails_with_full_error)
{
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 8, 0, 1, 1, 32, NULL);
  GError *error = NULL;
  ck_assert_uint_eq (llm_kv_cache_capacity (kv), 8);
  ck_assert (llm_kv_cache_reserve (kv, 6, &error));
  llm_kv_cache_commit (kv, 6);

  ck_assert (!llm_kv_cache_reserve (kv, 3, &error));
  ck_assert_msg (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL), "%s",
      error ? error->message : "no error");
  ck_assert_msg (strstr (error->message, "6 positions used")
      && strstr (error->message, "limit 8"), "%s", error->message);
  g_clear_error (&error);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 6);
  ck_assert_uint_eq (llm_kv_cache_n_evicted (kv), 0);

  /* exactly up to the limit is fine */
  ck_assert (llm_kv_cache_reserve (kv, 2, &error));
  llm_kv_cache_commit (kv, 2);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 8);
  ck_assert (!llm_kv_cache_reserve (kv, 1, &error));
  ck_assert (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL));
  g_clear_error (&error);
}
END_TEST

/* A window of 32 over 320 tokens, one at a time: at every step at most 32
 * positions are cached, the bytes never exceed 2 layers x (K, V) x 32 rows
 * x 64 f16 values, and the cache holds the newest tokens in order. */
START_TEST (test_window_over_ten_windows_stays_within_its_memory_bound)
{
  const guint n_layers = 2, n_head_kv = 2, d = 32, row_n = n_head_kv * d;
  const guint32 window = 32;
  const LlmKvRope rope = { .n_rot = d, .freq_base = 10000.0f, .freq_scale = 1.0f };
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_WINDOW, window, 0,
      n_layers, n_head_kv, d, &rope);
  const gsize bound = (gsize) n_layers * 2 * window * row_n * sizeof (guint16);
  float k[2 * 64], v[2 * 64], got[64];

  ck_assert_uint_eq (llm_kv_cache_capacity (kv), window);
  for (guint32 t = 0; t < 10 * window; t++) {
    for (guint i = 0; i < n_layers * row_n; i++)
      k[i] = v[i] = (float) t;  /* exact in f16 up to 2048 */
    append (kv, n_layers, row_n, k, v);
    const guint32 n = llm_kv_cache_n (kv);
    ck_assert_uint_le (n, window);
    ck_assert_uint_le (llm_kv_cache_bytes (kv), bound);
    ck_assert_uint_eq (llm_kv_cache_n_evicted (kv) + n, t + 1);
    if (t == window) {
      /* The first eviction drops a quarter of the window at once, so the
       * next window/4 - 1 tokens shift nothing. */
      ck_assert_uint_eq (llm_kv_cache_n_evicted (kv), window / 4);
      ck_assert_uint_eq (n, window - window / 4 + 1);
    }
    /* cache position c holds token n_evicted + c */
    for (guint32 c = 0; c < n; c++) {
      llm_kv_cache_read (kv, n_layers - 1, c, NULL, got);
      ck_assert_float_eq (got[row_n - 1], (float) (llm_kv_cache_n_evicted (kv) + c));
    }
  }
  /* Evicting a quarter window at a time keeps at least 3/4 of it. */
  ck_assert_uint_ge (llm_kv_cache_n (kv), window - window / 4);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), bound);
}
END_TEST

START_TEST (test_sink_window_keeps_the_first_positions_untouched)
{
  const guint n_head_kv = 1, d = 32, row_n = d;
  const guint32 sink = 4, window = 12;
  const LlmKvRope rope = { .n_rot = d, .freq_base = 10000.0f, .freq_scale = 1.0f,
    .neox = TRUE };
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_SINK_WINDOW, window, sink,
      1, n_head_kv, d, &rope);
  GRand *rand = g_rand_new_with_seed (9);
  float keys[100][32], values[100][32], gk[32], gv[32];

  ck_assert_uint_eq (llm_kv_cache_capacity (kv), sink + window);
  for (guint32 t = 0; t < 100; t++) {
    fill_random (rand, keys[t], d, -1, 1);
    fill_random (rand, values[t], d, -1, 1);
    append (kv, 1, row_n, keys[t], values[t]);
    const guint32 n = llm_kv_cache_n (kv);
    ck_assert_uint_le (n, sink + window);
    for (guint32 c = 0; c < MIN (sink, n); c++) {
      llm_kv_cache_read (kv, 0, c, gk, gv);
      ck_assert (memcmp (gk, keys[c], sizeof gk) == 0);
      ck_assert (memcmp (gv, values[c], sizeof gv) == 0);
    }
    /* after the sink: the newest tokens, values moved unchanged */
    for (guint32 c = sink; c < n; c++) {
      llm_kv_cache_read (kv, 0, c, NULL, gv);
      ck_assert (memcmp (gv, values[llm_kv_cache_n_evicted (kv) + c], sizeof gv) == 0);
    }
  }
  ck_assert_uint_eq (llm_kv_cache_n_evicted (kv) + llm_kv_cache_n (kv), 100);
  g_rand_free (rand);
}
END_TEST

/* Keys are written rotated for the cache position they land on; after
 * shifts a key must equal the raw key rotated once at its current position.
 * Each shift composes a rotation by -chunk with float angles (ggml's running
 * product) and float cos/sin, a few 1e-7 per shift on unit-sized keys, so
 * 1e-5 leaves room for the handful of shifts a key lives through (F32).
 * F16 and Q8_0 keys, kept in panels, are read out of theirs, rotated and
 * written back at each shift, rounding again each time: within @tol. */
static void
check_shift (LlmKvType type, float tol, LlmKvPolicy policy, guint32 sink, const LlmKvRope *rope)
{
  const guint n_head_kv = 2, d = 32, row_n = n_head_kv * d;
  const guint32 window = 16, n_tokens = 60;
  g_autoptr (LlmKvCache) kv = new_cache (type, policy, window, sink, 1, n_head_kv, d, rope);
  GRand *rand = g_rand_new_with_seed (10);
  float raw[60][64], k[64], v[64] = { 0 }, got[64];

  for (guint32 t = 0; t < n_tokens; t++) {
    fill_random (rand, raw[t], row_n, -1, 1);
    ck_assert (llm_kv_cache_reserve (kv, 1, NULL));
    const guint32 pos = llm_kv_cache_n (kv);
    memcpy (k, raw[t], sizeof k);
    llm_rope (k, n_head_kv, d, rope->n_rot, pos, rope->freq_base, rope->freq_scale, rope->neox);
    llm_kv_cache_write (kv, FAST, 0, pos, k, v);
    llm_kv_cache_commit (kv, 1);

    const guint32 n = llm_kv_cache_n (kv);
    for (guint32 c = 0; c < n; c++) {
      const guint64 token = c < sink ? c : llm_kv_cache_n_evicted (kv) + c;
      memcpy (k, raw[token], sizeof k);
      llm_rope (k, n_head_kv, d, rope->n_rot, c, rope->freq_base, rope->freq_scale,
          rope->neox);
      llm_kv_cache_read (kv, 0, c, got, NULL);
      for (guint i = 0; i < row_n; i++)
        ck_assert_msg (fabsf (got[i] - k[i]) <= tol,
            "after token %u, position %u (token %" G_GUINT64_FORMAT ") [%u]: %.8g vs %.8g",
            t, c, token, i, got[i], k[i]);
    }
  }
  ck_assert_uint_gt (llm_kv_cache_n_evicted (kv), 0);
  g_rand_free (rand);
}

START_TEST (test_shifted_key_equals_key_rotated_at_its_new_position)
{
  const LlmKvRope normal = { .n_rot = 32, .freq_base = 10000.0f, .freq_scale = 1.0f };
  const LlmKvRope neox = { .n_rot = 32, .freq_base = 1000000.0f, .freq_scale = 1.0f,
    .neox = TRUE };
  const LlmKvRope partial = { .n_rot = 16, .freq_base = 10000.0f, .freq_scale = 0.25f };
  check_shift (LLM_KV_F32, 1e-5f, LLM_KV_POLICY_WINDOW, 0, &normal);
  check_shift (LLM_KV_F32, 1e-5f, LLM_KV_POLICY_WINDOW, 0, &neox);
  check_shift (LLM_KV_F32, 1e-5f, LLM_KV_POLICY_SINK_WINDOW, 3, &partial);
  /* a half's ulp is 2^-11 of a value under 2 (keys here are under 1.5),
   * a handful of roundings; Q8_0's step is the block's largest / 127 */
  check_shift (LLM_KV_F16, 4e-3f, LLM_KV_POLICY_WINDOW, 0, &normal);
  check_shift (LLM_KV_Q8_0, 6e-2f, LLM_KV_POLICY_SINK_WINDOW, 3, &partial);
}
END_TEST

START_TEST (test_window_rejects_a_batch_larger_than_the_window)
{
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_SINK_WINDOW, 8, 2, 1, 1,
      32, NULL);
  GError *error = NULL;
  ck_assert (!llm_kv_cache_reserve (kv, 11, &error));
  ck_assert (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL));
  g_clear_error (&error);
  /* a batch of the whole capacity fits an empty cache */
  ck_assert (llm_kv_cache_reserve (kv, 10, &error));
  llm_kv_cache_commit (kv, 10);
  /* then the sink stays, so at most the window fits at once */
  ck_assert (!llm_kv_cache_reserve (kv, 9, &error));
  g_clear_error (&error);
  ck_assert (llm_kv_cache_reserve (kv, 8, &error));
  ck_assert_uint_eq (llm_kv_cache_n (kv), 2);
  ck_assert_uint_eq (llm_kv_cache_n_evicted (kv), 8);
}
END_TEST

/* --- rollback and memory --- */

START_TEST (test_truncate_drops_positions_from_n_on)
{
  const guint d = 32;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 16, 0, 1, 1, d, NULL);
  float k[32], v[32], got[32];
  for (int t = 0; t < 10; t++) {
    for (guint i = 0; i < d; i++)
      k[i] = v[i] = (float) t;
    append (kv, 1, d, k, v);
  }
  llm_kv_cache_truncate (kv, 12);  /* past n: nothing to drop */
  ck_assert_uint_eq (llm_kv_cache_n (kv), 10);
  llm_kv_cache_truncate (kv, 6);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 6);
  ck_assert_uint_eq (llm_kv_cache_n_evicted (kv), 0);

  /* the next token takes position 6, the older ones are intact */
  for (guint i = 0; i < d; i++)
    k[i] = v[i] = 100.0f;
  ck_assert_uint_eq (append (kv, 1, d, k, v), 6);
  for (int t = 0; t < 6; t++) {
    llm_kv_cache_read (kv, 0, t, got, NULL);
    ck_assert_float_eq (got[0], (float) t);
  }
  /* attention over 7 positions sees the new value, not the dropped ones */
  float q[32] = { 0 }, out[32], scratch[7 + 64];
  llm_kv_cache_attend (kv, FAST, 0, 0, 1, q, 7, 1.0f, out, scratch);
  ck_assert_float_eq_tol (out[0], (0 + 1 + 2 + 3 + 4 + 5 + 100) / 7.0f, 1e-5f);

  /* truncating into an uncommitted reservation shrinks it */
  ck_assert (llm_kv_cache_reserve (kv, 4, NULL));
  llm_kv_cache_truncate (kv, 9);
  llm_kv_cache_commit (kv, 2);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 9);
}
END_TEST

START_TEST (test_bytes_are_allocated_as_the_cache_fills)
{
  /* 32768 positions would be 2 x 2 x 32768 x 256 B = 32 MiB in f16. */
  const guint n_layers = 2, row_n = 4 * 32;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 32768, 0,
      n_layers, 4, 32, NULL);
  const gsize row_bytes = row_n * 2, block = n_layers * 2 * 64 * row_bytes;
  float k[2 * 128] = { 0 }, v[2 * 128] = { 0 };

  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 0);
  append (kv, n_layers, row_n, k, v);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), block);
  for (int t = 1; t < 64; t++)
    append (kv, n_layers, row_n, k, v);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), block);
  append (kv, n_layers, row_n, k, v);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 2 * block);

  /* a prefill reserves its whole batch at once */
  ck_assert (llm_kv_cache_reserve (kv, 1000, NULL));
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), (65 + 1000 + 63) / 64 * block);
  llm_kv_cache_commit (kv, 1000);

  /* clearing keeps the blocks for the next prompt */
  const gsize held = llm_kv_cache_bytes (kv);
  llm_kv_cache_clear (kv);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 0);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), held);
  for (int t = 0; t < 100; t++)
    append (kv, n_layers, row_n, k, v);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), held);
}
END_TEST

/* A cut keeps the cache's blocks for the positions that follow (a
 * verifier cuts and refills every step); releasing gives them all back,
 * and a fork's shared blocks past a cut go back at once. */
START_TEST (test_truncate_keeps_blocks_and_release_gives_them_back)
{
  const guint n_layers = 2, row_n = 4 * 32;
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 1024, 0,
      n_layers, 4, 32, NULL);
  const gsize block = n_layers * 2 * 64 * (gsize) row_n * 2;
  ck_assert (llm_kv_cache_reserve (kv, 200, NULL));
  llm_kv_cache_commit (kv, 200);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 4 * block);
  llm_kv_cache_truncate (kv, 100);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 100);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 4 * block);

  g_autoptr (LlmKvCache) fork = llm_kv_cache_fork (kv);
  ck_assert_uint_eq (llm_kv_cache_bytes (fork), 4 * block);
  llm_kv_cache_truncate (fork, 70);  /* blocks 0, 1 kept; 2, 3 shared past the cut */
  ck_assert_uint_eq (llm_kv_cache_bytes (fork), 2 * block);
  llm_kv_cache_release (kv);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 0);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 0);
  ck_assert_uint_eq (llm_kv_cache_bytes (fork), 2 * block);
}
END_TEST

/* Where 256 positions of every layer's keys and values make a huge page
 * or more, a block holds 256 (long runs of a head's rows, in huge pages);
 * below, 64. A fork's first write into a shared long block copies the
 * rows in use, and both caches then read exactly what each wrote. */
START_TEST (test_blocks_as_large_as_a_huge_page_hold_256_positions)
{
  /* 8 layers x 2 x 256 positions x 4 x 64 values x 2 B = 2 MiB; 7 layers less. */
  const guint n_layers = 8, row_n = 4 * 64;
  const gsize long_block = (gsize) n_layers * 2 * 256 * row_n * 2;
  g_autoptr (LlmKvCache) small = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 1024, 0,
      n_layers - 1, 4, 64, NULL);
  ck_assert (llm_kv_cache_reserve (small, 1, NULL));
  ck_assert_uint_eq (llm_kv_cache_bytes (small), (gsize) (n_layers - 1) * 2 * 64 * row_n * 2);

  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 1024, 0, n_layers, 4,
      64, NULL);
  g_autoptr (GRand) rand = g_rand_new_with_seed (11);
  g_autofree float *k = g_new (float, n_layers * row_n);
  g_autofree float *v = g_new (float, n_layers * row_n);
  g_autofree float *rows = g_new (float, (gsize) 101 * 2 * n_layers * row_n);
  for (guint32 p = 0; p < 100; p++) {
    fill_random (rand, k, n_layers * row_n, -1, 1);
    fill_random (rand, v, n_layers * row_n, -1, 1);
    append (kv, n_layers, row_n, k, v);
  }
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), long_block);
  for (guint32 p = 0; p < 100; p++)
    for (guint l = 0; l < n_layers; l++)
      llm_kv_cache_read (kv, l, p, rows + ((gsize) (p * n_layers + l) * 2) * row_n,
          rows + ((gsize) (p * n_layers + l) * 2 + 1) * row_n);

  g_autoptr (LlmKvCache) fork = llm_kv_cache_fork (kv);
  g_autofree float *fk = g_new (float, n_layers * row_n);
  g_autofree float *fv = g_new (float, n_layers * row_n);
  fill_random (rand, fk, n_layers * row_n, -1, 1);
  fill_random (rand, fv, n_layers * row_n, -1, 1);
  ck_assert_uint_eq (append (fork, n_layers, row_n, fk, fv), 100);
  fill_random (rand, k, n_layers * row_n, -1, 1);
  ck_assert_uint_eq (append (kv, n_layers, row_n, k, v), 100);
  ck_assert_uint_eq (llm_kv_cache_bytes (fork), long_block);

  float *got_k = g_new (float, row_n), *got_v = g_new (float, row_n);
  for (guint32 p = 0; p < 100; p++)
    for (guint l = 0; l < n_layers; l++) {
      const float *want = rows + ((gsize) (p * n_layers + l) * 2) * row_n;
      for (int c = 0; c < 2; c++) {
        LlmKvCache *cache = c == 0 ? kv : fork;
        llm_kv_cache_read (cache, l, p, got_k, got_v);
        ck_assert_mem_eq (got_k, want, row_n * sizeof (float));
        ck_assert_mem_eq (got_v, want + row_n, row_n * sizeof (float));
      }
    }
  /* Position 100: each its own row, stored in half precision. */
  for (guint l = 0; l < n_layers; l++) {
    llm_kv_cache_read (fork, l, 100, got_k, got_v);
    for (guint i = 0; i < row_n; i++)
      ck_assert_float_eq (got_k[i], llm_fp16_to_f32 (llm_fp16_from_f32 (fk[l * row_n + i])));
    llm_kv_cache_read (kv, l, 100, got_k, got_v);
    for (guint i = 0; i < row_n; i++)
      ck_assert_float_eq (got_k[i], llm_fp16_to_f32 (llm_fp16_from_f32 (k[l * row_n + i])));
  }
  g_free (got_k);
  g_free (got_v);

  /* 256 positions to a block: the 257th takes a second. */
  for (guint32 p = 101; p < 257; p++)
    append (kv, n_layers, row_n, k, v);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 2 * long_block);
}
END_TEST

/* A freed block of a huge page or more is kept for the next block of its
 * size (a fork's copy for every layer-skipping draft), outside the pool's
 * count and limit; smaller ones go back to the system. The limit still
 * refuses what passes it. */
START_TEST (test_a_freed_huge_block_serves_the_next_of_its_size)
{
  const gsize huge = LLM_KV_POOL_HUGE_BYTES;
  g_autoptr (LlmKvPool) pool = llm_kv_pool_new (3 * huge);
  GError *error = NULL;
  LlmKvBlock *a = llm_kv_pool_alloc (pool, 2 * huge, &error);
  ck_assert_ptr_nonnull (a);
  memset (a->data, 7, a->size);
  guint8 *const kept = a->data;
  llm_kv_block_unref (a);
  ck_assert_uint_eq (llm_kv_pool_bytes (pool), 0);
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 2 * huge);

  LlmKvBlock *other = llm_kv_pool_alloc (pool, huge, &error);  /* another size */
  ck_assert_ptr_nonnull (other);
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 2 * huge);
  LlmKvBlock *b = llm_kv_pool_alloc (pool, 2 * huge, &error);
  ck_assert_ptr_nonnull (b);
  ck_assert_ptr_eq (b->data, kept);
  ck_assert_uint_eq (b->data[2 * huge - 1], 7);
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 0);
  ck_assert_uint_eq (llm_kv_pool_bytes (pool), 3 * huge);
  ck_assert_ptr_null (llm_kv_pool_alloc (pool, 1, &error));
  ck_assert (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL));
  g_clear_error (&error);
  llm_kv_block_unref (b);
  llm_kv_block_unref (other);
  ck_assert_uint_eq (llm_kv_pool_bytes (pool), 0);
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 3 * huge);

  /* Small blocks are not kept, nor a third huge one. */
  LlmKvBlock *small = llm_kv_pool_alloc (pool, 4096, &error);
  ck_assert_ptr_nonnull (small);
  llm_kv_block_unref (small);
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 3 * huge);
  LlmKvBlock *c[3];
  for (int i = 0; i < 3; i++) {
    c[i] = llm_kv_pool_alloc (pool, huge, &error);
    ck_assert_ptr_nonnull (c[i]);
  }
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 2 * huge);  /* the huge one reused */
  for (int i = 0; i < 3; i++)
    llm_kv_block_unref (c[i]);
  ck_assert_uint_eq (llm_kv_pool_spare_bytes (pool), 3 * huge);  /* two kept at most */
}
END_TEST

/* The last block is cut to the capacity, so bytes never pass
 * capacity x rows even when capacity is not a multiple of the block;
 * where keys are in panels of 16 positions (F16), to the capacity
 * rounded up to whole panels: 70 positions take 80. */
START_TEST (test_bytes_never_exceed_the_capacity)
{
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 70, 0, 1, 1, 32, NULL);
  ck_assert (llm_kv_cache_reserve (kv, 70, NULL));
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 2 * 70 * 32 * sizeof (float));
  g_autoptr (LlmKvCache) half = new_cache (LLM_KV_F16, LLM_KV_POLICY_FULL, 70, 0, 1, 2, 32, NULL);
  ck_assert (llm_kv_cache_reserve (half, 70, NULL));
  ck_assert_uint_eq (llm_kv_cache_bytes (half), 2 * 80 * 2 * 32 * sizeof (guint16));
}
END_TEST

/* A block larger than the address space cannot be allocated: an error,
 * not an abort, and the cache is left as it was. */
START_TEST (test_allocation_failure_is_a_no_memory_error)
{
  /* a row of 2^41 floats: one 64-position block is 2^49 bytes, more than
   * a 47-bit address space holds */
  g_autoptr (LlmKvCache) kv = new_cache (LLM_KV_F32, LLM_KV_POLICY_FULL, 64, 0, 1, 1024,
      1u << 31, NULL);
  GError *error = NULL;
  ck_assert (!llm_kv_cache_reserve (kv, 1, &error));
  ck_assert_msg (g_error_matches (error, LLM_KV_ERROR, LLM_KV_ERROR_NO_MEMORY), "%s",
      error ? error->message : "no error");
  g_clear_error (&error);
  ck_assert_uint_eq (llm_kv_cache_n (kv), 0);
  ck_assert_uint_eq (llm_kv_cache_bytes (kv), 0);
}
END_TEST

/* The AVX2 and AVX-512 kernels keep every sum of the scalar reference in
 * its order, so for every cache type, a head size that splits Q8_0 blocks
 * (80) and one that does not (64), and batches of 32 queries (a call of
 * either kernel: groups of 8 on AVX-512, of 4 on AVX2, sharing each
 * expanded tile of keys), of 17 and 27 (a short last group), 8 and 1 to 4,
 * with different causal lengths across block boundaries (capacity 150: the
 * last block is cut short; the groups of one call end at different
 * positions), each output equals the reference's bit for bit. On a CPU
 * without AVX2 both sides run the reference and the test holds
 * trivially. */
START_TEST (test_fast_attention_equals_the_scalar_reference_bit_for_bit)
{
  enum { NQ = 32 };
  static const LlmKvType types[] = { LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0 };
  static const guint dims[] = { 64, 80 };
  const guint n_head = 8, n_head_kv = 2;
  const guint32 n = 150;
  GRand *rand = g_rand_new_with_seed (11);
  for (guint ti = 0; ti < G_N_ELEMENTS (types); ti++) {
    for (guint di = 0; di < G_N_ELEMENTS (dims); di++) {
      const guint d = dims[di], row_n = n_head_kv * d;
      g_autoptr (LlmKvCache) kv = new_cache (types[ti], LLM_KV_POLICY_FULL, n, 0, 1,
          n_head_kv, d, NULL);
      float *k = g_new (float, row_n), *v = g_new (float, row_n);
      for (guint32 t = 0; t < n; t++) {
        fill_random (rand, k, row_n, -2, 2);
        fill_random (rand, v, row_n, -1, 1);
        append (kv, 1, row_n, k, v);
      }
      float *q = g_new (float, NQ * d), *fast = g_new (float, NQ * d), *ref = g_new (float, d);
      float *scratch = g_new (float, llm_kv_cache_batch_scratch_floats (kv, n, NQ));
      static const guint32 n_kvs[] = { 1, 9, 17, 64, 65, 128, 150 };
      for (guint i = 0; i < G_N_ELEMENTS (n_kvs); i++) {
        fill_random (rand, q, NQ * d, -3, 3);
        LlmAttnQuery queries[NQ];
        for (guint j = 0; j < NQ; j++)
          queries[j] = (LlmAttnQuery) { q + j * d, fast + j * d, n_kvs[i] > 3 * j ? n_kvs[i] - 3 * j : 1 };
        /* Each query count is a kernel of its own (decode's GQA groups
         * take 4 here, 2 and 8 elsewhere). */
        static const guint nqs[] = { NQ, 1, 17, 4, 8, 27, 2 };
        const guint nq = nqs[i % G_N_ELEMENTS (nqs)];
        for (guint kvh = 0; kvh < n_head_kv; kvh++) {
          llm_kv_cache_attend_batch (kv, FAST, 0, kvh, queries, nq, 0.125f, scratch);
          for (guint j = 0; j < nq; j++) {
            llm_kv_cache_attend (kv, SCALAR, 0, kvh * (n_head / n_head_kv), n_head, q + j * d,
                queries[j].n_kv, 0.125f, ref, scratch);
            ck_assert_msg (memcmp (ref, fast + j * d, d * sizeof (float)) == 0,
                "%s, head size %u, KV head %u, query %u of %u over %u positions",
                llm_kv_type_name (types[ti]), d, kvh, j, nq, (guint) queries[j].n_kv);
          }
        }
      }
      g_free (scratch);
      g_free (q);
      g_free (fast);
      g_free (ref);
      g_free (k);
      g_free (v);
    }
  }
  g_rand_free (rand);
}
END_TEST

static Suite *
kvcache_suite (void)
{
  Suite *s = suite_create ("kvcache");

  TCase *storage = tcase_create ("storage");
  tcase_add_test (storage, test_f32_rows_round_trip_exactly);
  tcase_add_test (storage, test_f16_rows_round_trip_within_half_precision);
  tcase_add_test (storage, test_q8_0_rows_round_trip_within_block_error);
  tcase_add_test (storage, test_q4_0_rows_round_trip_within_block_error);
  tcase_add_test (storage, test_q8_0_with_a_row_of_24_values_is_a_config_error);
  tcase_add_test (storage, test_type_names_round_trip);
  suite_add_tcase (s, storage);

  TCase *attention = tcase_create ("attention");
  tcase_add_test (attention, test_f32_attention_with_gqa_matches_double_precision);
  tcase_add_test (attention, test_mqa_heads_all_read_the_single_kv_head);
  tcase_add_test (attention, test_causal_prefill_gives_each_query_its_own_prefix);
  tcase_add_test (attention, test_f16_attention_rounds_like_llama_cpp);
  tcase_add_test (attention, test_f16_probabilities_are_rounded_to_half_before_weighting);
  tcase_add_test (attention, test_q8_0_attention_uses_the_dequantized_rows);
  tcase_add_test (attention, test_q4_0_attention_uses_the_dequantized_rows);
  tcase_add_test (attention, test_fast_attention_equals_the_scalar_reference_bit_for_bit);
  suite_add_tcase (s, attention);

  TCase *policies = tcase_create ("policies");
  tcase_add_test (policies, test_full_reserve_past_capacity_fails_with_full_error);
  tcase_add_test (policies, test_window_over_ten_windows_stays_within_its_memory_bound);
  tcase_add_test (policies, test_sink_window_keeps_the_first_positions_untouched);
  tcase_add_test (policies, test_shifted_key_equals_key_rotated_at_its_new_position);
  tcase_add_test (policies, test_window_rejects_a_batch_larger_than_the_window);
  suite_add_tcase (s, policies);

  TCase *memory = tcase_create ("rollback and memory");
  tcase_add_test (memory, test_truncate_drops_positions_from_n_on);
  tcase_add_test (memory, test_bytes_are_allocated_as_the_cache_fills);
  tcase_add_test (memory, test_bytes_never_exceed_the_capacity);
  tcase_add_test (memory, test_truncate_keeps_blocks_and_release_gives_them_back);
  tcase_add_test (memory, test_blocks_as_large_as_a_huge_page_hold_256_positions);
  tcase_add_test (memory, test_a_freed_huge_block_serves_the_next_of_its_size);
  tcase_add_test (memory, test_allocation_failure_is_a_no_memory_error);
  suite_add_tcase (s, memory);

  return s;
}

LLM_TEST_MAIN (kvcache_suite)
