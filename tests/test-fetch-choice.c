/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How decode steps fetch their weights (fetch-choice.h): the choice
 * follows which way is faster, as the machine changes, without taking
 * turns on noise; and the way changes no result. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "backend.h"
#include "engine-private.h"
#include "fetch-choice.h"
#include "model-private.h"
#include "ggml-type.h"

/* --- the choice, on simulated steps -------------------------------- */

/* A machine on which a byte takes @kernel or @hw ns, each step's time
 * off by up to @noise either way (uniform, from @r). */
typedef struct {
  GRand *r;
  double kernel, hw, noise;
} Machine;

/* One step of 100 MB fetched as @c asks; the mode after it. */
static LlmFetch
step (LlmFetchChoice *c, const Machine *m)
{
  const double bytes = 100e6;
  const double per = c->next == LLM_FETCH_KERNEL ? m->kernel : m->hw;
  const double jitter = 1.0 + m->noise * (2.0 * g_rand_double (m->r) - 1.0);
  llm_fetch_choice_observe (c, bytes, bytes * per * jitter);
  return c->mode;
}

/* @n steps; the number of times the mode changed, and (in *@last, if
 * not NULL) the step after which it last did (counting from 1), kept
 * where it did not change. */
static guint
steps (LlmFetchChoice *c, const Machine *m, guint n, guint *last)
{
  guint flips = 0;
  for (guint i = 1; i <= n; i++) {
    const LlmFetch before = c->mode;
    if (step (c, m) != before) {
      flips++;
      if (last != NULL)
        *last = i;
    }
  }
  return flips;
}

START_TEST (test_a_faster_hardware_way_is_taken_within_a_dozen_steps_and_kept)
{
  g_autoptr (GRand) r = g_rand_new_with_seed (1);
  const Machine m = { r, 1.0, 0.85, 0.03 };
  LlmFetchChoice c;
  llm_fetch_choice_init (&c);
  ck_assert_int_eq (c.next, LLM_FETCH_KERNEL);
  guint last = 0;
  steps (&c, &m, 12, &last);
  ck_assert_int_eq (c.mode, LLM_FETCH_HARDWARE);
  const guint64 kernel_then = c.steps[LLM_FETCH_KERNEL];
  ck_assert_uint_eq (steps (&c, &m, 400, NULL), 0);
  ck_assert_int_eq (c.mode, LLM_FETCH_HARDWARE);
  /* From then on the kernel's way only in probes: one step in 65, the
   * ways being far apart. */
  ck_assert_uint_le (c.steps[LLM_FETCH_KERNEL] - kernel_then, 400 / 64 + 2);
  ck_assert_uint_ge (c.steps[LLM_FETCH_KERNEL] - kernel_then, 400 / 65 - 1);
  ck_assert (fabs (c.ratio - 0.85) < 0.05);
}
END_TEST

/* 500 steps of a machine where the hardware's way takes @hw times the
 * kernel's: the kernel's way is kept throughout, and the other tried in
 * 3 early probes, then once every @every + 1 steps. */
static void
check_kernel_kept (guint32 seed, double hw, double noise, guint every)
{
  g_autoptr (GRand) r = g_rand_new_with_seed (seed);
  const Machine m = { r, 1.0, hw, noise };
  LlmFetchChoice c;
  llm_fetch_choice_init (&c);
  ck_assert_uint_eq (steps (&c, &m, 500, NULL), 0);
  ck_assert_int_eq (c.mode, LLM_FETCH_KERNEL);
  ck_assert_uint_le (c.steps[LLM_FETCH_HARDWARE], 3 + 500 / every + 1);
  ck_assert_uint_ge (c.steps[LLM_FETCH_HARDWARE], 3 + 500 / (every + 1) - 1);
  ck_assert_uint_eq (c.steps[LLM_FETCH_KERNEL] + c.steps[LLM_FETCH_HARDWARE], 500);
}

/* Far apart (the hardware's way 1.2x): the other way seldom tried. */
START_TEST (test_a_faster_kernel_way_is_kept_and_the_other_seldom_tried)
{
  check_kernel_kept (2, 1.2, 0.03, 64);
}
END_TEST

/* Near each other (1.06x), compared one step in 17: a change of the
 * machine that turns a small lead shows within a few probes. */
START_TEST (test_ways_near_each_other_are_compared_more_often)
{
  check_kernel_kept (5, 1.06, 0.02, 16);
}
END_TEST

/* The machine's memory gets busy (another tenant): the way that was
 * slower becomes the faster, and the choice follows within a few
 * probes (the first of them up to 65 steps apart, the ways having been
 * far apart); then back. */
START_TEST (test_the_choice_follows_a_change_of_the_machine)
{
  g_autoptr (GRand) r = g_rand_new_with_seed (3);
  Machine m = { r, 1.0, 0.85, 0.03 };
  LlmFetchChoice c;
  llm_fetch_choice_init (&c);
  steps (&c, &m, 300, NULL);
  ck_assert_int_eq (c.mode, LLM_FETCH_HARDWARE);
  m.hw = 1.12;
  guint last = 0;
  ck_assert_uint_eq (steps (&c, &m, 300, &last), 1);
  ck_assert_int_eq (c.mode, LLM_FETCH_KERNEL);
  ck_assert_uint_le (last, 140);
  m.hw = 0.85;
  last = 0;
  ck_assert_uint_eq (steps (&c, &m, 300, &last), 1);
  ck_assert_int_eq (c.mode, LLM_FETCH_HARDWARE);
  ck_assert_uint_le (last, 140);
}
END_TEST

START_TEST (test_ways_as_fast_as_each_other_do_not_take_turns)
{
  for (guint32 seed = 10; seed < 20; seed++) {
    g_autoptr (GRand) r = g_rand_new_with_seed (seed);
    const Machine m = { r, 1.0, 1.0, 0.05 };
    LlmFetchChoice c;
    llm_fetch_choice_init (&c);
    ck_assert_uint_le (steps (&c, &m, 2000, NULL), 4);
  }
}
END_TEST

/* A step that lost its core for a while (10 times its time) moves
 * neither the average of its way nor a verdict enough to turn the
 * choice, whether it is a probe or a step of the way in use. */
START_TEST (test_one_slow_step_does_not_turn_the_choice)
{
  g_autoptr (GRand) r = g_rand_new_with_seed (4);
  const Machine m = { r, 1.0, 0.9, 0.0 };
  for (guint at = 0; at < 16; at++) {
    LlmFetchChoice c;
    llm_fetch_choice_init (&c);
    steps (&c, &m, 100, NULL);
    ck_assert_int_eq (c.mode, LLM_FETCH_HARDWARE);
    steps (&c, &m, at, NULL);
    const double per = c.next == LLM_FETCH_KERNEL ? m.kernel : m.hw;
    llm_fetch_choice_observe (&c, 100e6, 100e6 * per * 10);
    ck_assert_uint_eq (steps (&c, &m, 100, NULL), 0);
    ck_assert_int_eq (c.mode, LLM_FETCH_HARDWARE);
  }
}
END_TEST

START_TEST (test_a_step_that_read_nothing_tells_nothing)
{
  LlmFetchChoice c, before;
  llm_fetch_choice_init (&c);
  llm_fetch_choice_observe (&c, 100e6, 1e8);
  before = c;
  ck_assert_int_eq (llm_fetch_choice_observe (&c, 0, 5e6), before.next);
  ck_assert_int_eq (llm_fetch_choice_observe (&c, 100e6, 0), before.next);
  ck_assert_int_eq (llm_fetch_choice_observe (&c, NAN, 5e6), before.next);
  ck_assert (memcmp (&c, &before, sizeof c) == 0);
}
END_TEST

/* --- the engine -------------------------------------------------------- */

#define DECODE_STEPS 40

/* @n greedy decode steps of a new sequence of @e from token 1, the
 * logits of each in @logits, and the way each step fetched in @ways. */
static void
decode (LlmEngine *e, guint n, float *logits, LlmFetch *ways)
{
  const LlmKvConfig kv = { .policy = LLM_KV_POLICY_FULL, .context_length = n + 1 };
  g_autoptr (LlmSeq) s = llm_test_new_seq (e, &kv);
  const guint32 n_vocab = llm_engine_model (e)->hp.n_vocab;
  gint32 token = 1;
  for (guint i = 0; i < n; i++) {
    ways[i] = llm_backend_cpu_fetch (e->backend)->next;
    LlmBatchRow row = { s, token, NULL, i, TRUE };
    GError *error = NULL;
    ck_assert_msg (llm_engine_eval (e, &row, 1, logits + (gsize) i * n_vocab, &error), "%s",
        error ? error->message : "");
    token = (gint32) llm_test_argmax (logits + (gsize) i * n_vocab, n_vocab);
  }
}

/* A random Q8_0 llama of 27 MB (more than a decode step must read for
 * the backend to time it): two decodes of one engine take the two ways
 * at different steps (the first decode starts the choice, the second
 * goes on with it), and give the same logits bit for bit. */
START_TEST (test_decode_gives_the_same_logits_whichever_way_it_fetches)
{
  const LlmTestShape shape = { 1024, 2816, 2, 8, 4 };
  g_autoptr (LlmModel) m = llm_test_random_llama (&shape, LLM_TYPE_Q8_0);
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  if (!llm_prepared_fetch_choice (kern, LLM_TYPE_Q8_0)) {
    g_print ("SKIP: the %s kernels fetch Q8_0 one way only (LLM_X16_ONE_TOKEN_AHEAD "
        "set, or no packed layout)\n", llm_cpu_kernels_name (kern));
    llm_test_note_skip ();
    return;
  }
  const guint32 n_vocab = m->hp.n_vocab;
  g_autofree float *first = g_new (float, (gsize) DECODE_STEPS * n_vocab);
  g_autofree float *second = g_new (float, (gsize) DECODE_STEPS * n_vocab);
  LlmFetch ways1[DECODE_STEPS], ways2[DECODE_STEPS];
  decode (e, DECODE_STEPS, first, ways1);
  decode (e, DECODE_STEPS, second, ways2);

  const LlmFetchChoice *c = llm_backend_cpu_fetch (e->backend);
  ck_assert_uint_gt (c->steps[LLM_FETCH_KERNEL], 0);
  ck_assert_uint_gt (c->steps[LLM_FETCH_HARDWARE], 0);
  guint differ = 0;
  for (guint i = 0; i < DECODE_STEPS; i++)
    differ += ways1[i] != ways2[i];
  ck_assert_uint_gt (differ, 0);
  ck_assert (memcmp (first, second, (gsize) DECODE_STEPS * n_vocab * sizeof (float)) == 0);
}
END_TEST

/* A prompt's forward has one one-token product too, its last row's
 * logits, a few MiB at most: that is no decode step, and once turned the
 * choice off for good before the first step (this model's output matrix
 * is under the 16 MiB a step must read). Decode steps after a prompt are
 * timed and fetched both ways. */
START_TEST (test_a_prompt_does_not_turn_the_choice_off)
{
  const LlmTestShape shape = { 1024, 2816, 2, 8, 4 };
  g_autoptr (LlmModel) m = llm_test_random_llama (&shape, LLM_TYPE_Q8_0);
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  if (!llm_prepared_fetch_choice (kern, LLM_TYPE_Q8_0)) {
    g_print ("SKIP: the %s kernels fetch Q8_0 one way only\n", llm_cpu_kernels_name (kern));
    llm_test_note_skip ();
    return;
  }
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  const guint32 n_vocab = m->hp.n_vocab;
  /* Its output matrix in Q8_0: 34 bytes a block of 32. */
  ck_assert_uint_lt ((gsize) n_vocab * shape.n_embd / 32 * 34, 16u << 20);
  const LlmKvConfig kv = { .policy = LLM_KV_POLICY_FULL, .context_length = 64 };
  g_autoptr (LlmSeq) s = llm_test_new_seq (e, &kv);
  g_autofree float *logits = g_new (float, n_vocab);
  const gint32 prompt[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
  GError *error = NULL;
  ck_assert (llm_seq_eval_tokens (s, prompt, 8, logits, FALSE, &error));
  for (guint i = 0; i < DECODE_STEPS; i++) {
    const gint32 token = (gint32) llm_test_argmax (logits, n_vocab);
    ck_assert (llm_seq_eval_tokens (s, &token, 1, logits, FALSE, &error));
  }
  const LlmFetchChoice *c = llm_backend_cpu_fetch (e->backend);
  ck_assert_uint_gt (c->steps[LLM_FETCH_KERNEL], 0);
  ck_assert_uint_gt (c->steps[LLM_FETCH_HARDWARE], 0);
  ck_assert_uint_eq (c->steps[LLM_FETCH_KERNEL] + c->steps[LLM_FETCH_HARDWARE],
      DECODE_STEPS - 1);
}
END_TEST

static Suite *
fetch_choice_suite (void)
{
  Suite *s = suite_create ("fetch-choice");
  TCase *tc = tcase_create ("choice");
  tcase_add_test (tc, test_a_faster_hardware_way_is_taken_within_a_dozen_steps_and_kept);
  tcase_add_test (tc, test_a_faster_kernel_way_is_kept_and_the_other_seldom_tried);
  tcase_add_test (tc, test_ways_near_each_other_are_compared_more_often);
  tcase_add_test (tc, test_the_choice_follows_a_change_of_the_machine);
  tcase_add_test (tc, test_ways_as_fast_as_each_other_do_not_take_turns);
  tcase_add_test (tc, test_one_slow_step_does_not_turn_the_choice);
  tcase_add_test (tc, test_a_step_that_read_nothing_tells_nothing);
  suite_add_tcase (s, tc);
  TCase *engine = tcase_create ("engine");
  tcase_set_timeout (engine, 120);
  tcase_add_test (engine, test_decode_gives_the_same_logits_whichever_way_it_fetches);
  tcase_add_test (engine, test_a_prompt_does_not_turn_the_choice_off);
  suite_add_tcase (s, engine);
  return s;
}

LLM_TEST_MAIN (fetch_choice_suite)
