/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Full attention of vision towers (kernels/cpu/attention-full.h): the
 * scalar reference against attention in double, and every vector kernel
 * against the reference bit for bit, at the shapes a tail can hide in
 * (keys not a whole panel, heads not a whole vector, queries not a whole
 * group of six) and at a tower's. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "cpu/attention-full.h"

typedef struct {
  gsize n_kv, hd, n_q;
} Shape;

typedef struct {
  float *k, *v, *q, *kp, *scratch;
  gsize ld;                   /* floats between rows of k, v and q: wider than a head */
} Inputs;

static void
inputs_make (Inputs *in, const Shape *s, guint64 seed)
{
  in->ld = s->hd + 3;
  const gsize rows = MAX (s->n_kv, s->n_q);
  in->k = g_new (float, rows * in->ld);
  in->v = g_new (float, rows * in->ld);
  in->q = g_new (float, rows * in->ld);
  llm_test_rng_seed (seed);
  for (gsize i = 0; i < rows * in->ld; i++) {
    in->k[i] = 2.0f * llm_test_rng_float ();
    in->v[i] = llm_test_rng_float ();
    in->q[i] = 2.0f * llm_test_rng_float ();
  }
  in->kp = g_new (float, llm_attention_full_keys_floats (s->n_kv, s->hd));
  llm_attention_full_pack_keys (in->k, in->ld, s->n_kv, s->hd, in->kp);
  in->scratch = g_new (float, llm_attention_full_scratch_floats (s->n_kv));
}

static void
inputs_clear (Inputs *in)
{
  g_free (in->k);
  g_free (in->v);
  g_free (in->q);
  g_free (in->kp);
  g_free (in->scratch);
}

START_TEST (test_packed_keys_hold_every_key_once)
{
  enum { N = 37, HD = 5, LD = 7 };
  float k[N * LD];
  for (guint i = 0; i < N * LD; i++)
    k[i] = (float) i;
  const gsize floats = llm_attention_full_keys_floats (N, HD);
  ck_assert_uint_eq (floats, 3 * HD * 16);
  g_autofree float *kp = g_new (float, floats);
  llm_attention_full_pack_keys (k, LD, N, HD, kp);
  for (guint j = 0; j < 48; j++)
    for (guint d = 0; d < HD; d++)
      ck_assert_float_eq (kp[j / 16 * HD * 16 + d * 16 + j % 16], j < N ? k[j * LD + d] : 0.0f);
}
END_TEST

START_TEST (test_reference_is_attention)
{
  const Shape s = { 41, 24, 9 };
  Inputs in;
  inputs_make (&in, &s, 5);
  const float scale = 1.0f / sqrtf ((float) s.hd);
  g_autofree float *out = g_new (float, s.n_q * s.hd);
  llm_attention_full_ref (in.kp, in.v, in.ld, s.n_kv, s.hd, in.q, in.ld, s.n_q, scale, out,
      s.hd, in.scratch);
  for (gsize i = 0; i < s.n_q; i++) {
    double sc[64], max = -INFINITY, sum = 0;
    for (gsize j = 0; j < s.n_kv; j++) {
      double d = 0;
      for (gsize t = 0; t < s.hd; t++)
        d += (double) in.q[i * in.ld + t] * in.k[j * in.ld + t];
      sc[j] = d * scale;
      max = MAX (max, sc[j]);
    }
    for (gsize j = 0; j < s.n_kv; j++)
      sum += (sc[j] = exp (sc[j] - max));
    for (gsize t = 0; t < s.hd; t++) {
      double o = 0;
      for (gsize j = 0; j < s.n_kv; j++)
        o += sc[j] / sum * in.v[j * in.ld + t];
      ck_assert_msg (fabs (out[i * s.hd + t] - o) < 2e-6, "query %zu, dim %zu: %g, want %g",
          i, t, out[i * s.hd + t], o);
    }
  }
  inputs_clear (&in);
}
END_TEST

START_TEST (test_vector_kernels_equal_the_reference)
{
  const Shape shapes[] = {
    { 1, 16, 1 }, { 15, 8, 5 }, { 16, 16, 6 }, { 17, 64, 7 }, { 33, 72, 13 },
    { 50, 80, 3 }, { 64, 64, 12 }, { 97, 12, 6 }, { 577, 64, 20 }, { 1024, 64, 9 },
  };
  const LlmCpuIsa isas[] = { LLM_CPU_ISA_AVX2, LLM_CPU_ISA_AVX512 };
  guint ran = 0;
  for (guint si = 0; si < G_N_ELEMENTS (shapes); si++) {
    const Shape *s = &shapes[si];
    Inputs in;
    inputs_make (&in, s, 100 + si);
    const float scale = 1.0f / sqrtf ((float) s->hd);
    /* Output rows wider than a head, with a guard value past each head. */
    const gsize ldo = s->hd + 5;
    g_autofree float *want = g_new (float, s->n_q * ldo);
    g_autofree float *got = g_new (float, s->n_q * ldo);
    for (gsize i = 0; i < s->n_q * ldo; i++)
      want[i] = 7.0f;
    llm_attention_full_ref (in.kp, in.v, in.ld, s->n_kv, s->hd, in.q, in.ld, s->n_q, scale,
        want, ldo, in.scratch);
    for (guint k = 0; k < G_N_ELEMENTS (isas); k++) {
      const LlmCpuKernels *kern = llm_cpu_kernels (isas[k]);
      if (kern == NULL)
        continue;
      for (gsize i = 0; i < s->n_q * ldo; i++)
        got[i] = 7.0f;
      llm_attention_full (kern, in.kp, in.v, in.ld, s->n_kv, s->hd, in.q, in.ld, s->n_q,
          scale, got, ldo, in.scratch);
      for (gsize i = 0; i < s->n_q * ldo; i++)
        ck_assert_msg (memcmp (&got[i], &want[i], sizeof (float)) == 0,
            "%s, %zu keys, head %zu, %zu queries: row %zu value %zu is %a, the reference %a",
            llm_cpu_isa_name (isas[k]), s->n_kv, s->hd, s->n_q, i / ldo, i % ldo, got[i],
            want[i]);
      ran++;
    }
    inputs_clear (&in);
  }
  g_print ("%u kernel and shape pairs equal the reference\n", ran);
}
END_TEST

static Suite *
attention_full_suite (void)
{
  Suite *s = suite_create ("attention-full");
  TCase *tc = tcase_create ("kernels");
  tcase_add_test (tc, test_packed_keys_hold_every_key_once);
  tcase_add_test (tc, test_reference_is_attention);
  tcase_add_test (tc, test_vector_kernels_equal_the_reference);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (attention_full_suite)
