/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sampler against llama.cpp's rules, on hand-made logits whose answers
 * can be worked out on paper. Draws are deterministic for a seed, so the
 * statistical tests give the same counts on every run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm-check.h"
#include "sampler.h"
#include "sampler-private.h"

/* --- helpers --- */

/* Temperature 1, every filter and the penalty off. */
static LlmSamplerParams
plain_params (void)
{
  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.repeat_last_n = 64;
  p.seed = 1;
  return p;
}

static int
cmp_gint32 (const void *a, const void *b)
{
  gint32 x = *(const gint32 *) a, y = *(const gint32 *) b;
  return (x > y) - (x < y);
}

/* The surviving ids, ascending, in @ids (room for @n); returns their count. */
static guint32
kept_ids (LlmSampler *s, const float *logits, guint32 n, gint32 *ids)
{
  const LlmSamplerCandidate *c = NULL;
  guint32 kept = llm_sampler_candidates (s, logits, n, &c);
  ck_assert_uint_le (kept, n);
  for (guint32 i = 0; i < kept; i++)
    ids[i] = c[i].id;
  qsort (ids, kept, sizeof *ids, cmp_gint32);
  return kept;
}

static void
assert_kept (const LlmSamplerParams *p, const float *logits, guint32 n,
    const gint32 *expected, guint32 n_expected)
{
  g_autoptr (LlmSampler) s = llm_sampler_new (p);
  gint32 ids[64];
  g_assert (n <= G_N_ELEMENTS (ids));
  guint32 kept = kept_ids (s, logits, n, ids);
  GString *got = g_string_new (NULL);
  for (guint32 i = 0; i < kept; i++)
    g_string_append_printf (got, " %d", ids[i]);
  ck_assert_msg (kept == n_expected, "kept %u candidates:%s; expected %u",
      kept, got->str, n_expected);
  for (guint32 i = 0; i < kept; i++)
    ck_assert_msg (ids[i] == expected[i], "kept%s", got->str);
  g_string_free (got, TRUE);
}

/* The logit of @id after the penalty (no filters are on in @s). */
static float
penalised_logit (LlmSampler *s, const float *logits, guint32 n, gint32 id)
{
  const LlmSamplerCandidate *c = NULL;
  guint32 kept = llm_sampler_candidates (s, logits, n, &c);
  for (guint32 i = 0; i < kept; i++)
    if (c[i].id == id)
      return c[i].logit;
  ck_abort_msg ("id %d was filtered out", id);
  return NAN;
}

/* Draws @n_draws tokens and asserts each count lies within 4 standard errors
 * of @n_draws * @expected; ids with expected 0 must never appear. */
static void
assert_frequencies (LlmSampler *s, const float *logits, guint32 n,
    const double *expected, guint n_draws)
{
  guint counts[16] = { 0 };
  g_assert (n <= G_N_ELEMENTS (counts));
  for (guint i = 0; i < n_draws; i++) {
    gint32 id = llm_sampler_sample (s, logits, n);
    ck_assert_int_ge (id, 0);
    ck_assert_int_lt (id, (gint32) n);
    counts[id]++;
  }
  for (guint32 id = 0; id < n; id++) {
    double mean = n_draws * expected[id];
    if (expected[id] == 0.0) {
      ck_assert_msg (counts[id] == 0, "id %u, probability 0, drawn %u times", id, counts[id]);
      continue;
    }
    double se = sqrt (n_draws * expected[id] * (1.0 - expected[id]));
    ck_assert_msg (fabs (counts[id] - mean) <= 4.0 * se,
        "id %u drawn %u times, expected %.1f +- %.1f", id, counts[id], mean, 4.0 * se);
  }
}

static void
softmax_d (const float *logits, guint32 n, double temperature, double *p)
{
  double max = -INFINITY, sum = 0.0;
  for (guint32 i = 0; i < n; i++)
    max = MAX (max, logits[i]);
  for (guint32 i = 0; i < n; i++)
    sum += (p[i] = exp ((logits[i] - max) / temperature));
  for (guint32 i = 0; i < n; i++)
    p[i] /= sum;
}

/* --- defaults --- */

START_TEST (test_params_init_gives_llama_cpp_defaults)
{
  LlmSamplerParams p;
  memset (&p, 0xff, sizeof p);
  llm_sampler_params_init (&p);
  ck_assert_float_eq (p.temperature, 0.8f);
  ck_assert_int_eq (p.top_k, 40);
  ck_assert_float_eq (p.top_p, 0.95f);
  ck_assert_float_eq (p.min_p, 0.05f);
  ck_assert_float_eq (p.repeat_penalty, 1.0f);
  ck_assert_int_eq (p.repeat_last_n, 64);
  ck_assert_uint_eq (p.seed, 0);
}
END_TEST

/* --- greedy --- */

START_TEST (test_greedy_picks_the_argmax)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 0.5f, -2.0f, 3.25f, 3.0f, -7.0f };
  ck_assert_int_eq (llm_sampler_sample (s, logits, 5), 2);

  /* Negative temperatures are greedy too, whatever the seed. */
  p.temperature = -1.0f;
  p.seed = 99;
  g_autoptr (LlmSampler) s2 = llm_sampler_new (&p);
  for (int i = 0; i < 10; i++)
    ck_assert_int_eq (llm_sampler_sample (s2, logits, 5), 2);
}
END_TEST

START_TEST (test_greedy_breaks_ties_to_the_lowest_id)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 1.0f, 4.0f, 2.0f, 4.0f, 4.0f };
  ck_assert_int_eq (llm_sampler_sample (s, logits, 5), 1);
  const float all_equal[] = { -3.0f, -3.0f, -3.0f };
  ck_assert_int_eq (llm_sampler_sample (s, all_equal, 3), 0);
}
END_TEST

/* The rule llm_argmax keeps, one compare at a time. */
static gint32
argmax_ref (const float *x, gsize n)
{
  gsize best = 0;
  float best_x = n > 0 && !isnan (x[0]) ? x[0] : -INFINITY;
  for (gsize i = 1; i < n; i++)
    if (x[i] > best_x) {
      best = i;
      best_x = x[i];
    }
  return (gint32) best;
}

START_TEST (test_argmax_matches_one_compare_at_a_time)
{
  /* Lengths around the 16 lanes and the tail; the largest value planted
   * in the tail, the last lane, repeated (the first place wins), beside
   * NaNs, infinities and both zeros. */
  static const gsize sizes[] = { 1, 2, 15, 16, 17, 31, 33, 100, 32000, 151936 };
  GRand *rand = g_rand_new_with_seed (7);
  float *x = g_new (float, 151936);
  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++) {
    const gsize n = sizes[k];
    for (guint trial = 0; trial < 40; trial++) {
      for (gsize i = 0; i < n; i++)
        x[i] = (float) g_rand_double_range (rand, -20.0, 20.0);
      switch (trial % 8) {
        case 1: x[n - 1] = 99.0f; break;
        case 2: x[g_rand_int_range (rand, 0, (gint32) n)] = 99.0f;
                x[g_rand_int_range (rand, 0, (gint32) n)] = 99.0f; break;
        case 3: for (gsize i = 0; i < n; i += 3) x[i] = NAN; break;
        case 4: for (gsize i = 0; i < n; i++) x[i] = i % 2 ? -INFINITY : NAN; break;
        case 5: for (gsize i = 0; i < n; i++) x[i] = i % 5 ? -0.0f : 0.0f; break;
        case 6: x[g_rand_int_range (rand, 0, (gint32) n)] = INFINITY; break;
        case 7: for (gsize i = 0; i < n; i++) x[i] = -INFINITY; break;
        default: break;
      }
      ck_assert_msg (llm_argmax (x, n) == argmax_ref (x, n), "n %zu, trial %u: %d against %d",
          n, trial, llm_argmax (x, n), argmax_ref (x, n));
    }
  }
  g_free (x);
  g_rand_free (rand);
}
END_TEST

/* A draft model's confidence in its pick, for every proposal: exact
 * (within 1e-4) where it reaches the floor asked about, and otherwise
 * below it, never below the exact value (the sum stopped early). Sharp
 * and flat distributions, small and large vocabularies. */
START_TEST (test_top_probability_above_is_exact_above_its_floor)
{
  static const gsize sizes[] = { 1, 3, 17, 512, 32000 };
  static const double spreads[] = { 0.1, 1.0, 4.0, 12.0, 40.0 };
  GRand *rand = g_rand_new_with_seed (11);
  float *x = g_new (float, 32000);
  guint above = 0, below = 0;
  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++) {
    for (guint s = 0; s < G_N_ELEMENTS (spreads); s++) {
      for (guint trial = 0; trial < 8; trial++) {
        const gsize n = sizes[k];
        for (gsize i = 0; i < n; i++)
          x[i] = (float) (spreads[s] * g_rand_double_range (rand, -1.0, 1.0));
        if (trial % 2)
          x[g_rand_int_range (rand, 0, (gint32) n)] += (float) spreads[s];
        const double exact = llm_top_probability (x, n);
        for (guint f = 0; f < 3; f++) {
          const float floor = f == 0 ? 0.2f : f == 1 ? 0.5f : 0.05f;
          const double got = llm_top_probability_above (x, n, floor);
          if (exact >= floor) {
            ck_assert_msg (fabs (got - exact) <= 1e-4 * exact, "n %zu: %g against %g", n, got,
                exact);
            above++;
          } else {
            ck_assert_msg (got < floor && got >= exact * (1 - 1e-4), "n %zu, floor %g: %g "
                "against %g", n, floor, got, exact);
            below++;
          }
        }
      }
    }
  }
  /* Both sides were met. */
  ck_assert_uint_gt (above, 50);
  ck_assert_uint_gt (below, 50);
  g_free (x);
  g_rand_free (rand);
}
END_TEST

START_TEST (test_greedy_with_and_without_a_penalty_agree_when_it_changes_nothing)
{
  /* Greedy without a penalty skips the candidate list; with a penalty on
   * a token that is not the best it goes through it. Same pick. */
  float logits[1000];
  GRand *rand = g_rand_new_with_seed (11);
  for (guint i = 0; i < G_N_ELEMENTS (logits); i++)
    logits[i] = (float) g_rand_double_range (rand, -5.0, 5.0);
  g_rand_free (rand);
  logits[500] = 6.0f;
  logits[700] = 6.0f;
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) fast = llm_sampler_new (&p);
  p.repeat_penalty = 1.5f;
  g_autoptr (LlmSampler) listed = llm_sampler_new (&p);
  llm_sampler_accept (listed, 3);
  ck_assert_int_eq (llm_sampler_sample (fast, logits, 1000), 500);
  ck_assert_int_eq (llm_sampler_sample (listed, logits, 1000), 500);
}
END_TEST

/* --- repetition penalty --- */

START_TEST (test_penalty_divides_positive_and_multiplies_negative_logits)
{
  LlmSamplerParams p = plain_params ();
  p.repeat_penalty = 2.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 3.0f, 2.0f, -1.0f, -1.5f };
  llm_sampler_accept (s, 0);
  llm_sampler_accept (s, 2);
  ck_assert_float_eq (penalised_logit (s, logits, 4, 0), 1.5f);
  ck_assert_float_eq (penalised_logit (s, logits, 4, 1), 2.0f);
  ck_assert_float_eq (penalised_logit (s, logits, 4, 2), -2.0f);
  ck_assert_float_eq (penalised_logit (s, logits, 4, 3), -1.5f);
}
END_TEST

START_TEST (test_penalty_on_a_positive_logit_changes_the_greedy_pick)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 3.0f, 2.0f, -1.0f };
  ck_assert_int_eq (llm_sampler_sample (s, logits, 3), 0);
  llm_sampler_accept (s, 0);
  /* 3 / 2 = 1.5 < 2 */
  ck_assert_int_eq (llm_sampler_sample (s, logits, 3), 1);
}
END_TEST

START_TEST (test_penalty_on_a_negative_logit_multiplies_it_down)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { -1.0f, -1.5f, -3.0f };
  llm_sampler_accept (s, 0);
  /* -1 * 2 = -2 < -1.5; dividing instead would give -0.5 and keep id 0. */
  ck_assert_int_eq (llm_sampler_sample (s, logits, 3), 1);
}
END_TEST

START_TEST (test_penalty_counts_a_repeated_token_once)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 3.0f, 1.0f };
  for (int i = 0; i < 3; i++)
    llm_sampler_accept (s, 0);
  /* Once: 1.5 > 1. Three times would be 0.375 and pick id 1. */
  ck_assert_float_eq (penalised_logit (s, logits, 2, 0), 1.5f);
  ck_assert_int_eq (llm_sampler_sample (s, logits, 2), 0);
}
END_TEST

/* Taking back accepts: a sampler that accepted 1000 ids (drawing after
 * each) and took the last 100 back samples on as one that stopped at
 * 900, in its penalty's window and its random draws, for every take-back
 * up to LLM_SAMPLER_ROLLBACK; more is refused and changes nothing. */
START_TEST (test_rollback_samples_on_as_if_the_accepts_had_never_been)
{
  enum { V = 24, N = 1000 };
  LlmSamplerParams p = plain_params ();
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 16;
  float logits[V];
  for (guint i = 0; i < V; i++)
    logits[i] = (float) (i % 5) * 0.3f;
  static const guint backs[] = { 1, 7, 100, LLM_SAMPLER_ROLLBACK };
  for (guint b = 0; b < G_N_ELEMENTS (backs); b++) {
    g_autoptr (LlmSampler) full = llm_sampler_new (&p);
    g_autoptr (LlmSampler) short_ = llm_sampler_new (&p);
    for (guint i = 0; i < N; i++) {
      const gint32 id = (gint32) ((i * 7 + i / 3) % V);
      llm_sampler_accept (full, id);
      llm_sampler_sample (full, logits, V);
      if (i < N - backs[b]) {
        llm_sampler_accept (short_, id);
        llm_sampler_sample (short_, logits, V);
      }
    }
    ck_assert (!llm_sampler_rollback (full, LLM_SAMPLER_ROLLBACK + 1));
    ck_assert (llm_sampler_rollback (full, backs[b]));
    for (guint i = 0; i < 50; i++) {
      const gint32 a = llm_sampler_sample (full, logits, V), c = llm_sampler_sample (short_,
          logits, V);
      ck_assert_msg (a == c, "%u back, draw %u: %d, without them %d", backs[b], i, a, c);
      llm_sampler_accept (full, a);
      llm_sampler_accept (short_, c);
    }
  }
}
END_TEST

START_TEST (test_penalty_looks_only_at_the_last_n_accepted_tokens)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 3.0f, 2.0f, 0.0f, 0.0f, 0.0f };

  llm_sampler_accept (s, 0);
  llm_sampler_accept (s, 3);
  llm_sampler_accept (s, 4);  /* window {3, 4}: 0 has left it */
  ck_assert_int_eq (llm_sampler_sample (s, logits, 5), 0);
  llm_sampler_accept (s, 0);  /* {4, 0} */
  ck_assert_int_eq (llm_sampler_sample (s, logits, 5), 1);
  llm_sampler_accept (s, 3);  /* {0, 3} */
  ck_assert_int_eq (llm_sampler_sample (s, logits, 5), 1);
  llm_sampler_accept (s, 4);  /* {3, 4} */
  ck_assert_int_eq (llm_sampler_sample (s, logits, 5), 0);
}
END_TEST

START_TEST (test_penalty_with_last_n_minus_one_looks_at_every_token)
{
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = -1;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 3.0f, 2.0f, 0.0f };
  llm_sampler_accept (s, 0);
  for (int i = 0; i < 1000; i++)
    llm_sampler_accept (s, 2);
  ck_assert_int_eq (llm_sampler_sample (s, logits, 3), 1);
}
END_TEST

START_TEST (test_penalty_is_off_at_one_or_with_last_n_zero)
{
  const float logits[] = { 3.0f, -1.0f };
  LlmSamplerParams p = plain_params ();
  p.repeat_penalty = 1.0f;
  g_autoptr (LlmSampler) one = llm_sampler_new (&p);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 0;
  g_autoptr (LlmSampler) zero = llm_sampler_new (&p);
  LlmSampler *both[] = { one, zero };
  for (guint i = 0; i < G_N_ELEMENTS (both); i++) {
    llm_sampler_accept (both[i], 0);
    llm_sampler_accept (both[i], 1);
    ck_assert_float_eq (penalised_logit (both[i], logits, 2, 0), 3.0f);
    ck_assert_float_eq (penalised_logit (both[i], logits, 2, 1), -1.0f);
  }
}
END_TEST

START_TEST (test_penalty_ignores_ids_outside_the_vocabulary)
{
  LlmSamplerParams p = plain_params ();
  p.repeat_penalty = 2.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 3.0f, 1.0f };
  llm_sampler_accept (s, -5);
  llm_sampler_accept (s, 2);
  llm_sampler_accept (s, G_MAXINT32);
  ck_assert_float_eq (penalised_logit (s, logits, 2, 0), 3.0f);
  ck_assert_float_eq (penalised_logit (s, logits, 2, 1), 1.0f);
}
END_TEST

/* --- top-k --- */

START_TEST (test_top_k_keeps_the_k_largest_and_breaks_boundary_ties_by_lower_id)
{
  LlmSamplerParams p = plain_params ();
  p.top_k = 3;
  const float logits[] = { 0.0f, 5.0f, 2.0f, 7.0f, 2.0f, 2.0f, -1.0f };
  assert_kept (&p, logits, 7, (const gint32[]) { 1, 2, 3 }, 3);

  p.top_k = 1;
  const float tied[] = { 1.0f, 4.0f, 4.0f };
  assert_kept (&p, tied, 3, (const gint32[]) { 1 }, 1);

  /* k at or above the vocabulary, or <= 0: off. */
  p.top_k = 7;
  assert_kept (&p, logits, 7, (const gint32[]) { 0, 1, 2, 3, 4, 5, 6 }, 7);
  p.top_k = 100;
  assert_kept (&p, logits, 7, (const gint32[]) { 0, 1, 2, 3, 4, 5, 6 }, 7);
  p.top_k = -1;
  assert_kept (&p, logits, 7, (const gint32[]) { 0, 1, 2, 3, 4, 5, 6 }, 7);
}
END_TEST

typedef struct {
  gint32 id;
  float logit;
} IdLogit;

static int
cmp_best_first (const void *a, const void *b)
{
  const IdLogit *x = a, *y = b;
  if (x->logit != y->logit)
    return x->logit > y->logit ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

START_TEST (test_top_k_selects_the_k_largest_of_a_large_vocabulary)
{
  const guint32 n = 151936;
  const gint32 k = 40;
  float *logits = g_new (float, n);
  IdLogit *ref = g_new (IdLogit, n);
  GRand *rand = g_rand_new_with_seed (7);
  for (guint32 i = 0; i < n; i++) {
    /* Quantised so that ties are frequent, boundary included. */
    logits[i] = (float) g_rand_int_range (rand, -2000, 2000) / 100.0f;
    ref[i] = (IdLogit) { (gint32) i, logits[i] };
  }
  g_rand_free (rand);
  qsort (ref, n, sizeof *ref, cmp_best_first);

  LlmSamplerParams p = plain_params ();
  p.top_k = k;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const LlmSamplerCandidate *c = NULL;
  ck_assert_uint_eq (llm_sampler_candidates (s, logits, n, &c), (guint32) k);
  for (gint32 i = 0; i < k; i++) {
    ck_assert_int_eq (c[i].id, ref[i].id);
    ck_assert_float_eq (c[i].logit, ref[i].logit);
  }
  g_free (ref);
  g_free (logits);
}
END_TEST

/* Candidates and draws of two samplers, equal to the bit. */
static void
assert_same_sampling (LlmSampler *a, LlmSampler *b, const float *logits, guint32 n,
    const char *what)
{
  const LlmSamplerCandidate *ca = NULL, *cb = NULL;
  const guint32 na = llm_sampler_candidates (a, logits, n, &ca);
  const guint32 nb = llm_sampler_candidates (b, logits, n, &cb);
  ck_assert_msg (na == nb, "%s: %u candidates against %u", what, na, nb);
  for (guint32 i = 0; i < na; i++)
    ck_assert_msg (ca[i].id == cb[i].id && ca[i].logit == cb[i].logit,
        "%s: candidate %u is %d (%g) against %d (%g)", what, i, ca[i].id, ca[i].logit,
        cb[i].id, cb[i].logit);
  for (guint d = 0; d < 20; d++)
    ck_assert_msg (llm_sampler_sample (a, logits, n) == llm_sampler_sample (b, logits, n),
        "%s: draw %u", what, d);
}

/* Top-k reads its winners straight from the logits (with a penalty's few
 * logits put in their place), unless the penalty's window is longer than
 * the sampler sorts per call: then it loads every candidate, penalises and
 * selects, the general way. Both must give the same candidates in the same
 * order, and the same draws, whatever the logits hold: ties across the
 * k-th place, NaN, -inf, +inf, fewer possible tokens than k, penalised
 * ids among them. A window made long by ids past the vocabulary (which
 * the penalty ignores) takes the general way and penalises the same.
 * Greedy sampling with a penalty takes the best of the same scan. */
START_TEST (test_top_k_from_the_logits_matches_top_k_over_every_candidate)
{
  static const guint32 sizes[] = { 1, 2, 7, 16, 17, 40, 41, 100, 1000, 32000 };
  static const gint32 ks[] = { 1, 5, 39, 40, 41, 99, 100 };
  GRand *rand = g_rand_new_with_seed (11);
  float *logits = g_new (float, 32000);
  for (guint si = 0; si < G_N_ELEMENTS (sizes); si++)
    for (guint ki = 0; ki < G_N_ELEMENTS (ks); ki++)
      for (guint kind = 0; kind < 14; kind++) {
        const guint32 n = sizes[si];
        for (guint32 i = 0; i < n; i++) {
          /* Few distinct values, so ties are everywhere. */
          logits[i] = (float) g_rand_int_range (rand, -20, 20) / 4.0f;
          const double u = g_rand_double (rand);
          const guint how = kind % 7;
          if (how == 1 && u < 0.2)
            logits[i] = NAN;
          else if (how == 2 && u < 0.9)
            logits[i] = -INFINITY;     /* often fewer possible than k */
          else if (how == 3 && u < 0.01)
            logits[i] = INFINITY;
          else if (how == 4)
            logits[i] = (float) i;     /* ascending: every one enters */
          else if (how == 5)
            logits[i] = -(float) i;    /* descending: none after the first k */
          else if (how == 6)
            logits[i] = -INFINITY;
        }
        /* Exactly k possible tokens, as late as they come. */
        for (guint32 i = n; kind % 7 == 6 && i-- > 0 && n - i <= (guint32) ks[ki];)
          logits[i] = (float) g_rand_int_range (rand, -20, 20) / 4.0f;
        LlmSamplerParams p = plain_params ();
        p.top_k = ks[ki];
        /* The second half without top-p and min-p, which would reorder
         * what top-k hands on. */
        p.top_p = kind < 7 ? 0.9f : 1.0f;
        p.min_p = kind < 7 ? 0.01f : 0.0f;
        p.seed = 5 + si;
        LlmSamplerParams pen = p;
        pen.repeat_penalty = 1.5f;
        pen.repeat_last_n = -1;
        g_autoptr (LlmSampler) plain = llm_sampler_new (&p);
        g_autoptr (LlmSampler) plain_general = llm_sampler_new (&pen);
        g_autoptr (LlmSampler) penalised = llm_sampler_new (&pen);
        g_autoptr (LlmSampler) penalised_general = llm_sampler_new (&pen);
        LlmSamplerParams greedy_pen = pen;
        greedy_pen.temperature = 0.0f;
        g_autoptr (LlmSampler) greedy = llm_sampler_new (&greedy_pen);
        g_autoptr (LlmSampler) greedy_general = llm_sampler_new (&greedy_pen);
        for (guint i = 0; i < 300; i++) {
          llm_sampler_accept (plain_general, G_MAXINT32);
          llm_sampler_accept (penalised_general, G_MAXINT32);
          llm_sampler_accept (greedy_general, G_MAXINT32);
        }
        /* Repeats and ids of every kind of logit among the penalised. */
        for (guint i = 0; i < 24; i++) {
          const gint32 id = g_rand_int_range (rand, 0, (gint32) n);
          llm_sampler_accept (penalised, id);
          llm_sampler_accept (penalised_general, id);
          llm_sampler_accept (greedy, id);
          llm_sampler_accept (greedy_general, id);
        }
        g_autofree char *what = g_strdup_printf ("n %u, k %d, kind %u", n, ks[ki], kind);
        assert_same_sampling (plain, plain_general, logits, n, what);
        assert_same_sampling (penalised, penalised_general, logits, n, what);
        ck_assert_msg (llm_sampler_sample (greedy, logits, n)
            == llm_sampler_sample (greedy_general, logits, n), "%s: greedy", what);
      }
  g_free (logits);
  g_rand_free (rand);
}
END_TEST

START_TEST (test_top_k_1_equals_greedy_at_any_temperature)
{
  const guint32 n = 5000;
  float *logits = g_new (float, n);
  GRand *rand = g_rand_new_with_seed (3);
  for (guint32 i = 0; i < n; i++)
    logits[i] = (float) g_rand_double_range (rand, -8.0, 8.0);
  g_rand_free (rand);
  logits[4000] = 9.0f;
  logits[1234] = 9.0f;  /* tied maximum: the lower id wins */
  logits[77] = 8.5f;

  const float temperatures[] = { 0.01f, 0.5f, 1.0f, 4.0f, 1000.0f, INFINITY };
  for (guint t = 0; t < G_N_ELEMENTS (temperatures); t++) {
    LlmSamplerParams p = plain_params ();
    p.repeat_penalty = 1.5f;
    p.temperature = 0.0f;
    g_autoptr (LlmSampler) greedy = llm_sampler_new (&p);
    p.temperature = temperatures[t];
    p.top_k = 1;
    p.seed = t;
    g_autoptr (LlmSampler) k1 = llm_sampler_new (&p);

    /* Each pick is penalised, so every step has another maximum. */
    const gint32 picks[] = { 1234, 4000, 77 };
    for (guint step = 0; step < 5; step++) {
      gint32 want = llm_sampler_sample (greedy, logits, n);
      if (step < G_N_ELEMENTS (picks))
        ck_assert_int_eq (want, picks[step]);
      ck_assert_int_eq (llm_sampler_sample (k1, logits, n), want);
      llm_sampler_accept (greedy, want);
      llm_sampler_accept (k1, want);
    }
  }
  g_free (logits);
}
END_TEST

/* --- top-p --- */

/* Probabilities 0.10, 0.50, 0.15, 0.25 by id (logits are their logs). */
static void
four_token_logits (float *logits)
{
  logits[0] = logf (0.10f);
  logits[1] = logf (0.50f);
  logits[2] = logf (0.15f);
  logits[3] = logf (0.25f);
}

START_TEST (test_top_p_keeps_the_smallest_prefix_reaching_p)
{
  float logits[4];
  four_token_logits (logits);
  LlmSamplerParams p = plain_params ();

  p.top_p = 0.3f;   /* 0.5 */
  assert_kept (&p, logits, 4, (const gint32[]) { 1 }, 1);
  p.top_p = 0.7f;   /* 0.5 + 0.25 */
  assert_kept (&p, logits, 4, (const gint32[]) { 1, 3 }, 2);
  p.top_p = 0.8f;   /* 0.5 + 0.25 + 0.15 */
  assert_kept (&p, logits, 4, (const gint32[]) { 1, 2, 3 }, 3);
  p.top_p = 0.95f;  /* everything */
  assert_kept (&p, logits, 4, (const gint32[]) { 0, 1, 2, 3 }, 4);
}
END_TEST

START_TEST (test_top_p_keeps_at_least_one_candidate)
{
  float logits[4];
  four_token_logits (logits);
  LlmSamplerParams p = plain_params ();
  p.top_p = 0.0f;
  assert_kept (&p, logits, 4, (const gint32[]) { 1 }, 1);
  p.top_p = -3.0f;
  assert_kept (&p, logits, 4, (const gint32[]) { 1 }, 1);
}
END_TEST

START_TEST (test_top_p_renormalises_over_what_top_k_kept)
{
  /* 0.4, 0.3, 0.2, 0.1: top-k 2 leaves 4/7 and 3/7, and 4/7 >= 0.5. */
  const float logits[] = { logf (0.4f), logf (0.3f), logf (0.2f), logf (0.1f) };
  LlmSamplerParams p = plain_params ();
  p.top_p = 0.5f;
  assert_kept (&p, logits, 4, (const gint32[]) { 0, 1 }, 2);
  p.top_k = 2;
  assert_kept (&p, logits, 4, (const gint32[]) { 0 }, 1);
}
END_TEST

START_TEST (test_top_p_without_top_k_goes_past_the_first_256_candidates)
{
  /* 1000 equal candidates: p = 0.5005 needs 501 of them, the lowest ids. */
  const guint32 n = 1000;
  float logits[1000];
  for (guint32 i = 0; i < n; i++)
    logits[i] = 0.25f;
  LlmSamplerParams p = plain_params ();
  p.top_p = 0.5005f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  gint32 ids[1000];
  ck_assert_uint_eq (kept_ids (s, logits, n, ids), 501);
  for (gint32 i = 0; i < 501; i++)
    ck_assert_int_eq (ids[i], i);

  /* Within the first try: a peaked distribution over the same vocabulary. */
  logits[600] = 20.0f;
  ck_assert_uint_eq (kept_ids (s, logits, n, ids), 1);
  ck_assert_int_eq (ids[0], 600);
}
END_TEST

START_TEST (test_top_p_without_top_k_matches_a_full_sort_on_a_flat_distribution)
{
  /* Flat enough that the cut lies hundreds to thousands of candidates deep. */
  const guint32 n = 5000;
  float *logits = g_new (float, n);
  IdLogit *ref = g_new (IdLogit, n);
  gint32 *ids = g_new (gint32, n);
  GRand *rand = g_rand_new_with_seed (11);
  for (guint32 i = 0; i < n; i++) {
    logits[i] = (float) g_rand_int_range (rand, -300, 300) / 100.0f;
    ref[i] = (IdLogit) { (gint32) i, logits[i] };
  }
  g_rand_free (rand);
  qsort (ref, n, sizeof *ref, cmp_best_first);

  double max = ref[0].logit, sum = 0.0;
  for (guint32 i = 0; i < n; i++)
    sum += exp (ref[i].logit - max);

  /* Many values of p, so that some cuts land on a quickselect pivot. */
  for (guint t = 0; t < 100; t++) {
    const float top_p = 0.3f + 0.007f * t;
    guint32 cut = 0;
    double cum = 0.0;
    while (cut < n && cum < top_p)
      cum += exp (ref[cut++].logit - max) / sum;

    LlmSamplerParams p = plain_params ();
    p.top_p = top_p;
    g_autoptr (LlmSampler) s = llm_sampler_new (&p);
    ck_assert_uint_eq (kept_ids (s, logits, n, ids), cut);
    gint32 *want = g_new (gint32, cut);
    for (guint32 i = 0; i < cut; i++)
      want[i] = ref[i].id;
    qsort (want, cut, sizeof *want, cmp_gint32);
    ck_assert_mem_eq (ids, want, cut * sizeof *ids);
    g_free (want);
  }
  g_free (ids);
  g_free (ref);
  g_free (logits);
}
END_TEST

/* --- min-p --- */

START_TEST (test_min_p_keeps_candidates_at_least_min_p_times_the_best)
{
  float logits[4];
  four_token_logits (logits);
  LlmSamplerParams p = plain_params ();

  p.min_p = 0.6f;   /* >= 0.30 */
  assert_kept (&p, logits, 4, (const gint32[]) { 1 }, 1);
  p.min_p = 0.4f;   /* >= 0.20 */
  assert_kept (&p, logits, 4, (const gint32[]) { 1, 3 }, 2);
  p.min_p = 0.25f;  /* >= 0.125 */
  assert_kept (&p, logits, 4, (const gint32[]) { 1, 2, 3 }, 3);
  p.min_p = 0.1f;   /* >= 0.05 */
  assert_kept (&p, logits, 4, (const gint32[]) { 0, 1, 2, 3 }, 4);
  p.min_p = 5.0f;   /* nothing reaches it: the best stays */
  assert_kept (&p, logits, 4, (const gint32[]) { 1 }, 1);
}
END_TEST

START_TEST (test_filters_chain_top_k_then_top_p_then_min_p)
{
  /* 0.35, 0.30, 0.20, 0.10, 0.05 */
  const float logits[] = { logf (0.35f), logf (0.30f), logf (0.20f), logf (0.10f), logf (0.05f) };
  LlmSamplerParams p = plain_params ();
  p.top_k = 4;       /* drops id 4 */
  p.top_p = 0.9f;    /* over 0.35/0.95 ...: 0.368, 0.684, 0.895, 1: keeps all four */
  p.min_p = 0.5f;    /* >= 0.175: drops id 3 */
  assert_kept (&p, logits, 5, (const gint32[]) { 0, 1, 2 }, 3);
  p.top_p = 0.8f;    /* 0.895 reaches it at id 2 */
  p.min_p = 0.9f;    /* >= 0.315: drops 1 and 2 */
  assert_kept (&p, logits, 5, (const gint32[]) { 0 }, 1);
}
END_TEST

/* --- the random draw --- */

static void
draw_sequence (guint64 seed, gint32 *out, guint n_out)
{
  LlmSamplerParams p = plain_params ();
  p.seed = seed;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[16] = { 0 };
  for (guint i = 0; i < n_out; i++)
    out[i] = llm_sampler_sample (s, logits, 16);
}

START_TEST (test_same_seed_gives_the_same_sequence)
{
  gint32 a[200], b[200];
  draw_sequence (42, a, 200);
  draw_sequence (42, b, 200);
  ck_assert_mem_eq (a, b, sizeof a);
}
END_TEST

START_TEST (test_different_seeds_give_different_sequences)
{
  gint32 a[200], b[200], c[200];
  draw_sequence (42, a, 200);
  draw_sequence (43, b, 200);
  draw_sequence (0, c, 200);
  ck_assert (memcmp (a, b, sizeof a) != 0);
  ck_assert (memcmp (a, c, sizeof a) != 0);
  ck_assert (memcmp (b, c, sizeof a) != 0);
}
END_TEST

START_TEST (test_generator_matches_the_published_reference_outputs)
{
  /* splitmix64 from 1234567: its first four outputs become the state. */
  guint64 state[4];
  llm_sampler_rng_seed (state, 1234567);
  ck_assert_uint_eq (state[0], G_GUINT64_CONSTANT (6457827717110365317));
  ck_assert_uint_eq (state[1], G_GUINT64_CONSTANT (3203168211198807973));
  ck_assert_uint_eq (state[2], G_GUINT64_CONSTANT (9817491932198370423));
  ck_assert_uint_eq (state[3], G_GUINT64_CONSTANT (4593380528125082431));

  /* xoshiro256** from the state {1, 2, 3, 4}. */
  guint64 s[4] = { 1, 2, 3, 4 };
  static const guint64 expected[] = {
    G_GUINT64_CONSTANT (11520), G_GUINT64_CONSTANT (0), G_GUINT64_CONSTANT (1509978240),
    G_GUINT64_CONSTANT (1215971899390074240), G_GUINT64_CONSTANT (1216172134540287360),
    G_GUINT64_CONSTANT (607988272756665600),
  };
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    ck_assert_uint_eq (llm_sampler_rng_next (s), expected[i]);
}
END_TEST

START_TEST (test_seed_pins_the_sequence_on_every_platform)
{
  /* Equal logits make every probability exactly 1/16, so no libm rounding
   * enters: only the generator and the walk over the candidates decide. */
  static const gint32 expected[16] = {
    0, 12, 1, 2, 12, 3, 6, 4, 8, 0, 11, 14, 14, 5, 12, 3,
  };
  gint32 got[16];
  draw_sequence (2024, got, 16);
  ck_assert_mem_eq (got, expected, sizeof got);
}
END_TEST

START_TEST (test_reset_restarts_the_sequence_and_forgets_the_history)
{
  LlmSamplerParams p = plain_params ();
  p.repeat_penalty = 4.0f;
  p.seed = 5;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[8] = { 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f };
  gint32 first[50], again[50];
  for (int i = 0; i < 50; i++)
    first[i] = llm_sampler_sample (s, logits, 8);

  llm_sampler_accept (s, 3);
  ck_assert_float_eq (penalised_logit (s, logits, 8, 3), 0.25f);
  llm_sampler_reset (s);
  ck_assert_float_eq (penalised_logit (s, logits, 8, 3), 1.0f);

  for (int i = 0; i < 50; i++)
    again[i] = llm_sampler_sample (s, logits, 8);
  ck_assert_mem_eq (first, again, sizeof first);
}
END_TEST

START_TEST (test_draws_match_the_softmax_within_4_standard_errors)
{
  const float logits[] = { 1.0f, 0.0f, -1.0f, 2.0f };
  double expected[4];
  softmax_d (logits, 4, 1.0, expected);
  LlmSamplerParams p = plain_params ();
  p.seed = 12345;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  assert_frequencies (s, logits, 4, expected, 200000);
}
END_TEST

START_TEST (test_temperature_divides_the_logits_before_the_draw)
{
  const float logits[] = { 1.0f, 0.0f, -1.0f, 2.0f };
  double expected[4];
  softmax_d (logits, 4, 2.5, expected);
  LlmSamplerParams p = plain_params ();
  p.temperature = 2.5f;
  p.seed = 777;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  assert_frequencies (s, logits, 4, expected, 200000);
}
END_TEST

START_TEST (test_top_k_2_never_draws_the_other_tokens)
{
  const float logits[] = { 1.0f, 0.0f, -1.0f, 2.0f };
  /* Renormalised over ids 3 and 0. */
  const double e = exp (-1.0);
  const double expected[4] = { e / (1.0 + e), 0.0, 0.0, 1.0 / (1.0 + e) };
  LlmSamplerParams p = plain_params ();
  p.top_k = 2;
  p.seed = 31337;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  assert_frequencies (s, logits, 4, expected, 200000);
}
END_TEST

/* --- non-finite logits --- */

START_TEST (test_nan_is_read_as_minus_infinity)
{
  const float logits[] = { NAN, -50.0f, NAN, -60.0f, -NAN };
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) greedy = llm_sampler_new (&p);
  ck_assert_int_eq (llm_sampler_sample (greedy, logits, 5), 1);

  p.temperature = 100.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  for (int i = 0; i < 2000; i++) {
    gint32 id = llm_sampler_sample (s, logits, 5);
    ck_assert_msg (id == 1 || id == 3, "picked %d", id);
  }
}
END_TEST

START_TEST (test_all_minus_infinity_or_nan_picks_id_0)
{
  const float logits[] = { -INFINITY, NAN, -INFINITY };
  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  ck_assert_int_eq (llm_sampler_sample (s, logits, 3), 0);
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) greedy = llm_sampler_new (&p);
  ck_assert_int_eq (llm_sampler_sample (greedy, logits, 3), 0);

  const LlmSamplerCandidate *c = NULL;
  ck_assert_uint_eq (llm_sampler_candidates (s, logits, 3, &c), 0);
}
END_TEST

START_TEST (test_plus_infinity_logits_share_the_draw_equally)
{
  const float logits[] = { 5.0f, INFINITY, 7.0f, INFINITY };
  LlmSamplerParams p = plain_params ();
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) greedy = llm_sampler_new (&p);
  ck_assert_int_eq (llm_sampler_sample (greedy, logits, 4), 1);

  p.temperature = 1.0f;
  p.seed = 9;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const double expected[4] = { 0.0, 0.5, 0.0, 0.5 };
  assert_frequencies (s, logits, 4, expected, 20000);
}
END_TEST

START_TEST (test_tiny_temperature_still_draws_the_maximum)
{
  const float logits[] = { 3.0e38f, -3.0e38f, 2.9e38f };
  LlmSamplerParams p = plain_params ();
  p.temperature = 1e-30f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  for (int i = 0; i < 100; i++)
    ck_assert_int_eq (llm_sampler_sample (s, logits, 3), 0);
}
END_TEST

/* --- ownership --- */

START_TEST (test_sampling_leaves_the_logits_untouched)
{
  const guint32 n = 300;
  float logits[300], copy[300];
  for (guint32 i = 0; i < n; i++)
    logits[i] = (float) ((i * 37) % 101) / 10.0f;
  logits[5] = NAN;
  logits[6] = INFINITY;
  logits[7] = -INFINITY;
  memcpy (copy, logits, sizeof logits);

  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  p.repeat_penalty = 1.3f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  llm_sampler_accept (s, 0);
  llm_sampler_accept (s, 6);
  for (int i = 0; i < 10; i++)
    llm_sampler_sample (s, logits, n);
  ck_assert_mem_eq (logits, copy, sizeof logits);
}
END_TEST

START_TEST (test_scratch_is_reused_between_calls)
{
  float logits[64];
  for (int i = 0; i < 64; i++)
    logits[i] = (float) i;
  LlmSamplerParams p = plain_params ();
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const LlmSamplerCandidate *first = NULL, *c = NULL;
  llm_sampler_candidates (s, logits, 64, &first);
  for (int i = 0; i < 10; i++) {
    llm_sampler_sample (s, logits, 64);
    llm_sampler_candidates (s, logits, 64 - i, &c);
    ck_assert_ptr_eq (c, first);
  }
}
END_TEST

static Suite *
sampler_suite (void)
{
  Suite *s = suite_create ("sampler");

  TCase *rules = tcase_create ("rules");
  tcase_add_test (rules, test_params_init_gives_llama_cpp_defaults);
  tcase_add_test (rules, test_greedy_picks_the_argmax);
  tcase_add_test (rules, test_greedy_breaks_ties_to_the_lowest_id);
  tcase_add_test (rules, test_argmax_matches_one_compare_at_a_time);
  tcase_add_test (rules, test_top_probability_above_is_exact_above_its_floor);
  tcase_add_test (rules, test_greedy_with_and_without_a_penalty_agree_when_it_changes_nothing);
  tcase_add_test (rules, test_penalty_divides_positive_and_multiplies_negative_logits);
  tcase_add_test (rules, test_penalty_on_a_positive_logit_changes_the_greedy_pick);
  tcase_add_test (rules, test_penalty_on_a_negative_logit_multiplies_it_down);
  tcase_add_test (rules, test_penalty_counts_a_repeated_token_once);
  tcase_add_test (rules, test_penalty_looks_only_at_the_last_n_accepted_tokens);
  tcase_add_test (rules, test_rollback_samples_on_as_if_the_accepts_had_never_been);
  tcase_add_test (rules, test_penalty_with_last_n_minus_one_looks_at_every_token);
  tcase_add_test (rules, test_penalty_is_off_at_one_or_with_last_n_zero);
  tcase_add_test (rules, test_penalty_ignores_ids_outside_the_vocabulary);
  tcase_add_test (rules, test_top_k_keeps_the_k_largest_and_breaks_boundary_ties_by_lower_id);
  tcase_add_test (rules, test_top_k_selects_the_k_largest_of_a_large_vocabulary);
  tcase_add_test (rules, test_top_k_from_the_logits_matches_top_k_over_every_candidate);
  tcase_add_test (rules, test_top_k_1_equals_greedy_at_any_temperature);
  tcase_add_test (rules, test_top_p_keeps_the_smallest_prefix_reaching_p);
  tcase_add_test (rules, test_top_p_keeps_at_least_one_candidate);
  tcase_add_test (rules, test_top_p_renormalises_over_what_top_k_kept);
  tcase_add_test (rules, test_top_p_without_top_k_goes_past_the_first_256_candidates);
  tcase_add_test (rules, test_top_p_without_top_k_matches_a_full_sort_on_a_flat_distribution);
  tcase_add_test (rules, test_min_p_keeps_candidates_at_least_min_p_times_the_best);
  tcase_add_test (rules, test_filters_chain_top_k_then_top_p_then_min_p);
  suite_add_tcase (s, rules);

  TCase *draw = tcase_create ("draw");
  tcase_set_timeout (draw, 0);
  tcase_add_test (draw, test_same_seed_gives_the_same_sequence);
  tcase_add_test (draw, test_different_seeds_give_different_sequences);
  tcase_add_test (draw, test_generator_matches_the_published_reference_outputs);
  tcase_add_test (draw, test_seed_pins_the_sequence_on_every_platform);
  tcase_add_test (draw, test_reset_restarts_the_sequence_and_forgets_the_history);
  tcase_add_test (draw, test_draws_match_the_softmax_within_4_standard_errors);
  tcase_add_test (draw, test_temperature_divides_the_logits_before_the_draw);
  tcase_add_test (draw, test_top_k_2_never_draws_the_other_tokens);
  suite_add_tcase (s, draw);

  TCase *edge = tcase_create ("edge");
  tcase_add_test (edge, test_nan_is_read_as_minus_infinity);
  tcase_add_test (edge, test_all_minus_infinity_or_nan_picks_id_0);
  tcase_add_test (edge, test_plus_infinity_logits_share_the_draw_equally);
  tcase_add_test (edge, test_tiny_temperature_still_draws_the_maximum);
  tcase_add_test (edge, test_sampling_leaves_the_logits_untouched);
  tcase_add_test (edge, test_scratch_is_reused_between_calls);
  suite_add_tcase (s, edge);

  return s;
}

LLM_TEST_MAIN (sampler_suite)
