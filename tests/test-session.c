/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sessions as the elements use them: the element that samples sets the
 * sampler after the prompt was fed, and gets what a session made with
 * those settings gives; and the pool of sessions an evaluating element
 * hands downstream (keep-context, the bound, flushing, letting go). */
#include <string.h>

#include "llm-check.h"
#include "engine.h"
#include "session.h"
#include "session-pool.h"

#define N_SAMPLED 16

/* "Once upon a time" with BOS, stories260K's ids. */
static const gint32 prompt[] = { 1, 403, 407, 261, 378 };

static LlmModel *model;
static LlmEngine *engine;

static const LlmKvConfig kv_f16 = {
  .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL, .context_length = 128,
};

static void
setup (void)
{
  g_autofree char *path = llm_test_data_path ("models/stories260K.gguf");
  GError *error = NULL;
  model = llm_model_load (path, &error);
  ck_assert_msg (model != NULL, "%s", error ? error->message : "");
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.n_threads = 1;
  engine = llm_engine_new (model, &o, &error);
  ck_assert_msg (engine != NULL, "%s", error ? error->message : "");
}

static void
teardown (void)
{
  g_clear_pointer (&engine, llm_engine_unref);
  g_clear_pointer (&model, llm_model_unref);
}

static LlmSamplerParams
greedy (void)
{
  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  p.temperature = 0.0f;
  return p;
}

static LlmSamplerParams
seeded (guint64 seed)
{
  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  p.temperature = 0.8f;
  p.seed = seed;
  return p;
}

static LlmSamplerParams
penalised (void)
{
  LlmSamplerParams p = greedy ();
  /* strong enough to change the greedy tokens after this prompt */
  p.repeat_penalty = 3.0f;
  p.repeat_last_n = 16;
  return p;
}

static LlmSession *
new_session (const LlmSamplerParams *params)
{
  LlmSessionConfig cfg = { .kv = kv_f16, .sampler = *params };
  GError *error = NULL;
  LlmSession *s = llm_session_new (engine, &cfg, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  return s;
}

static void
feed_prompt (LlmSession *s)
{
  GError *error = NULL;
  ck_assert_msg (llm_session_feed (s, prompt, G_N_ELEMENTS (prompt), &error), "%s",
      error ? error->message : "");
}

/* Samples N_SAMPLED tokens after what @s was fed, feeding each; with
 * @each_time, sets the sampler to it before every sample, as an element
 * does for every response. */
static void
sample_run (LlmSession *s, const LlmSamplerParams *each_time, gint32 *out)
{
  GError *error = NULL;
  for (guint i = 0; i < N_SAMPLED; i++) {
    if (each_time)
      llm_session_set_sampler (s, each_time);
    out[i] = llm_session_sample (s);
    ck_assert_int_ge (out[i], 0);
    ck_assert_msg (llm_session_feed (s, &out[i], 1, &error), "%s", error ? error->message : "");
  }
}

/* What a session made with @params samples after the prompt. */
static void
reference_run (const LlmSamplerParams *params, gint32 *out)
{
  g_autoptr (LlmSession) s = new_session (params);
  feed_prompt (s);
  sample_run (s, NULL, out);
}

/* --- sampler --------------------------------------------------------- */

/* A greedy session without a penalty, fed the prompt and then set to @p,
 * samples what a session made with @p samples; @p must sample otherwise
 * than greedy, or the test could not tell. */
static void
assert_set_after_the_prompt_is_as_if_made_with (const LlmSamplerParams *p)
{
  const LlmSamplerParams g = greedy ();
  gint32 want[N_SAMPLED], got[N_SAMPLED], plain[N_SAMPLED];
  reference_run (p, want);
  reference_run (&g, plain);
  ck_assert_msg (memcmp (want, plain, sizeof want) != 0,
      "these settings sample as greedy does: the test cannot tell them apart");

  g_autoptr (LlmSession) s = new_session (&g);
  feed_prompt (s);
  llm_session_set_sampler (s, p);
  LlmSamplerParams now;
  llm_session_get_sampler (s, &now);
  ck_assert (llm_sampler_params_equal (&now, p));
  sample_run (s, NULL, got);
  ck_assert_mem_eq (got, want, sizeof want);
}

START_TEST (test_session_sampler_set_after_the_prompt_samples_as_if_made_with_it)
{
  const LlmSamplerParams p = seeded (42);
  assert_set_after_the_prompt_is_as_if_made_with (&p);
}
END_TEST

START_TEST (test_session_sampler_set_again_to_the_same_keeps_the_random_sequence)
{
  const LlmSamplerParams p = seeded (42), other = seeded (43);
  gint32 want[N_SAMPLED], got[N_SAMPLED];
  reference_run (&p, want);

  g_autoptr (LlmSession) s = new_session (&p);
  feed_prompt (s);
  sample_run (s, &p, got);
  ck_assert_mem_eq (got, want, sizeof want);

  /* other parameters in between restart the sequence every time: each
   * sample is a first draw, which is not what one sequence gives */
  g_autoptr (LlmSession) r = new_session (&p);
  feed_prompt (r);
  GError *error = NULL;
  for (guint i = 0; i < N_SAMPLED; i++) {
    llm_session_set_sampler (r, &other);
    llm_session_set_sampler (r, &p);
    got[i] = llm_session_sample (r);
    ck_assert (llm_session_feed (r, &got[i], 1, &error));
  }
  ck_assert_msg (memcmp (got, want, sizeof want) != 0,
      "restarting the random sequence before every sample changed nothing");
}
END_TEST

/* The greedy session kept no history while fed: the penalty set
 * afterwards must still see the prompt. */
START_TEST (test_session_sampler_set_after_the_prompt_penalises_the_prompt)
{
  const LlmSamplerParams pen = penalised ();
  assert_set_after_the_prompt_is_as_if_made_with (&pen);
}
END_TEST

START_TEST (test_session_sampler_keeps_repeat_last_n_as_set)
{
  LlmSamplerParams p = penalised (), now;
  p.repeat_last_n = -1;
  g_autoptr (LlmSession) s = new_session (&p);
  llm_session_get_sampler (s, &now);
  ck_assert_int_eq (now.repeat_last_n, -1);
  ck_assert (llm_sampler_params_equal (&now, &p));
}
END_TEST

START_TEST (test_session_sample_without_logits_is_minus_one)
{
  const LlmSamplerParams g = greedy ();
  g_autoptr (LlmSession) s = new_session (&g);
  ck_assert_int_eq (llm_session_sample (s), -1);
  feed_prompt (s);
  ck_assert_int_ge (llm_session_sample (s), 0);
  llm_session_reset (s);
  ck_assert_int_eq (llm_session_sample (s), -1);
}
END_TEST

/* --- pool ------------------------------------------------------------ */

static LlmSessionPool *
new_pool (guint max_sessions)
{
  LlmSessionConfig cfg = { .kv = kv_f16, .sampler = greedy () };
  return llm_session_pool_new (engine, &cfg, max_sessions);
}

static LlmSession *
acquire (LlmSessionPool *pool, gboolean keep_context)
{
  GError *error = NULL;
  LlmSession *s = llm_session_pool_acquire (pool, keep_context, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "no session");
  return s;
}

START_TEST (test_pool_keep_context_gives_the_first_session_back)
{
  g_autoptr (LlmSessionPool) pool = new_pool (4);
  LlmSession *a = acquire (pool, FALSE);
  LlmSession *b = acquire (pool, FALSE);
  ck_assert_ptr_ne (a, b);
  llm_session_pool_release (pool, b);
  llm_session_pool_release (pool, a);
  /* the kept conversation is the first session, whichever is idle */
  ck_assert_ptr_eq (acquire (pool, TRUE), a);
  llm_session_pool_release (pool, a);
  /* without keep-context an idle one is taken before a new one is made */
  LlmSession *c = acquire (pool, FALSE);
  ck_assert (c == a || c == b);
  llm_session_pool_release (pool, c);
}
END_TEST

typedef struct {
  LlmSessionPool *pool;
  gboolean keep_context;
  LlmSession *got;
  GError *error;
  gint done;
} Waiter;

static gpointer
waiter_main (gpointer data)
{
  Waiter *w = data;
  w->got = llm_session_pool_acquire (w->pool, w->keep_context, &w->error);
  g_atomic_int_set (&w->done, TRUE);
  return NULL;
}

START_TEST (test_pool_waits_for_a_release_past_its_maximum)
{
  g_autoptr (LlmSessionPool) pool = new_pool (2);
  LlmSession *a = acquire (pool, FALSE);
  LlmSession *b = acquire (pool, FALSE);

  Waiter w = { .pool = pool };
  GThread *t = g_thread_new ("waiter", waiter_main, &w);
  g_usleep (100 * 1000);
  ck_assert_msg (!g_atomic_int_get (&w.done), "a third session while two are busy");
  llm_session_pool_release (pool, b);
  g_thread_join (t);
  ck_assert_ptr_eq (w.got, b);
  llm_session_pool_release (pool, b);
  llm_session_pool_release (pool, a);
}
END_TEST

START_TEST (test_pool_keep_context_waits_for_its_conversation)
{
  g_autoptr (LlmSessionPool) pool = new_pool (4);
  LlmSession *a = acquire (pool, TRUE);

  /* room for more sessions, but the conversation is a's */
  Waiter w = { .pool = pool, .keep_context = TRUE };
  GThread *t = g_thread_new ("waiter", waiter_main, &w);
  g_usleep (100 * 1000);
  ck_assert (!g_atomic_int_get (&w.done));
  llm_session_pool_release (pool, a);
  g_thread_join (t);
  ck_assert_ptr_eq (w.got, a);
  llm_session_pool_release (pool, a);
}
END_TEST

/* With kv-full=refuse a finished stream must not hold the memory a new
 * stream is refused for: a session given back with no conversation to
 * continue holds no KV blocks, a kept conversation keeps its own. */
START_TEST (test_pool_session_given_back_holds_no_kv_unless_kept)
{
  g_autoptr (LlmSessionPool) pool = new_pool (2);
  LlmSession *a = acquire (pool, FALSE);
  feed_prompt (a);
  const gsize one = llm_engine_kv_bytes (engine);
  ck_assert_uint_gt (one, 0);
  llm_session_pool_release (pool, a);
  ck_assert_uint_eq (llm_engine_kv_bytes (engine), 0);

  LlmSession *k = acquire (pool, TRUE);
  feed_prompt (k);
  llm_session_pool_release (pool, k);
  ck_assert_uint_eq (llm_engine_kv_bytes (engine), one);
  ck_assert_uint_eq (llm_session_n_ids (k), G_N_ELEMENTS (prompt));

  /* A pool that fits one stream serves a second one after the first. */
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.n_threads = 1;
  o.kv_pool_bytes = one;
  o.kv_full = LLM_KV_FULL_REFUSE;
  GError *error = NULL;
  g_autoptr (LlmEngine) tight = llm_engine_new (model, &o, &error);
  ck_assert_msg (tight != NULL, "%s", error ? error->message : "");
  LlmSessionConfig cfg = { .kv = kv_f16, .sampler = greedy () };
  g_autoptr (LlmSessionPool) first = llm_session_pool_new (tight, &cfg, 1);
  g_autoptr (LlmSessionPool) second = llm_session_pool_new (tight, &cfg, 1);
  LlmSession *s1 = acquire (first, FALSE);
  feed_prompt (s1);
  llm_session_pool_release (first, s1);
  LlmSession *s2 = acquire (second, FALSE);
  feed_prompt (s2);
  llm_session_pool_release (second, s2);
}
END_TEST

START_TEST (test_pool_flushing_wakes_a_waiting_acquire)
{
  g_autoptr (LlmSessionPool) pool = new_pool (1);
  LlmSession *a = acquire (pool, FALSE);

  Waiter w = { .pool = pool };
  GThread *t = g_thread_new ("waiter", waiter_main, &w);
  g_usleep (50 * 1000);
  llm_session_pool_set_flushing (pool, TRUE);
  g_thread_join (t);
  ck_assert_ptr_null (w.got);
  ck_assert_ptr_null (w.error);
  /* while flushing nothing is handed out, idle or not */
  llm_session_pool_release (pool, a);
  GError *error = NULL;
  ck_assert_ptr_null (llm_session_pool_acquire (pool, FALSE, &error));
  ck_assert_ptr_null (error);

  llm_session_pool_set_flushing (pool, FALSE);
  ck_assert_ptr_eq (acquire (pool, FALSE), a);
  llm_session_pool_release (pool, a);
}
END_TEST

START_TEST (test_pool_clear_lets_go_of_a_busy_session_when_it_comes_back)
{
  g_autoptr (LlmSessionPool) pool = new_pool (2);
  LlmSession *idle = acquire (pool, FALSE);
  LlmSession *busy = acquire (pool, FALSE);
  feed_prompt (idle);
  feed_prompt (busy);
  const gsize one = llm_session_kv_bytes (busy);
  ck_assert_uint_gt (one, 0);
  ck_assert_uint_eq (llm_engine_kv_bytes (engine), 2 * one);
  /* given back: it keeps no KV while it waits */
  llm_session_pool_release (pool, idle);
  ck_assert_uint_eq (llm_engine_kv_bytes (engine), one);

  llm_session_pool_clear (pool);
  /* the idle session is gone, the busy one still feeds */
  ck_assert_uint_eq (llm_engine_kv_bytes (engine), one);
  GError *error = NULL;
  gint32 next = llm_session_sample (busy);
  ck_assert (llm_session_feed (busy, &next, 1, &error));

  llm_session_pool_release (pool, busy);
  ck_assert_uint_eq (llm_engine_kv_bytes (engine), 0);
  /* and the pool makes new ones */
  LlmSession *fresh = acquire (pool, TRUE);
  ck_assert_uint_eq (llm_session_n_ids (fresh), 0);
  llm_session_pool_release (pool, fresh);
}
END_TEST


/* --- media rows ------------------------------------------------------- */

/* The prompt with its middle ids given as media rows (their own
 * embeddings): the cache, logits and next ids are exactly the text's. */
static guint
media_prompt (gint32 *ids, float *rows)
{
  const guint n_embd = llm_model_hparams (model)->n_embd;
  guint m = 0;
  for (guint i = 0; i < G_N_ELEMENTS (prompt); i++) {
    ids[i] = prompt[i];
    if (i >= 1 && i <= 3) {
      llm_model_token_embedding (model, (guint32) prompt[i], rows + m++ * n_embd);
      ids[i] = LLM_TOKEN_EMBD;
    }
  }
  return m;
}

START_TEST (test_session_media_rows_evaluate_as_the_tokens_they_embed)
{
  const guint n_embd = llm_model_hparams (model)->n_embd, n_vocab =
      llm_model_hparams (model)->n_vocab;
  LlmSessionConfig cfg = { .kv = kv_f16, .sampler = greedy () };
  GError *error = NULL;
  g_autoptr (LlmSession) text = llm_session_new (engine, &cfg, &error);
  g_autoptr (LlmSession) media = llm_session_new (engine, &cfg, &error);
  gint32 ids[G_N_ELEMENTS (prompt)];
  g_autofree float *rows = g_new (float, G_N_ELEMENTS (prompt) * n_embd);
  ck_assert_uint_eq (media_prompt (ids, rows), 3);
  ck_assert (llm_session_feed (text, prompt, G_N_ELEMENTS (prompt), &error));
  ck_assert_msg (llm_session_feed_embd (media, ids, rows, G_N_ELEMENTS (prompt), &error),
      "%s", error ? error->message : "");
  ck_assert_mem_eq (llm_session_logits (media), llm_session_logits (text),
      n_vocab * sizeof (float));
  ck_assert_int_eq (llm_session_ids (media)[2], LLM_TOKEN_EMBD);
  gint32 a = llm_session_sample (text), b = llm_session_sample (media);
  for (int k = 0; k < 8; k++) {
    ck_assert_int_eq (a, b);
    ck_assert (llm_session_step (text, a, &a, &error));
    ck_assert (llm_session_step (media, b, &b, &error));
  }
  /* A rollback into the media rows keeps the rows before the cut. */
  llm_session_truncate (media, 3);
  llm_session_truncate (text, 3);
  ck_assert (llm_session_feed_embd (media, ids + 3, rows + 2 * n_embd, 2, &error));
  ck_assert (llm_session_feed (text, prompt + 3, 2, &error));
  ck_assert_mem_eq (llm_session_logits (media), llm_session_logits (text),
      n_vocab * sizeof (float));
}
END_TEST

/* A session whose cache another stream took feeds its media rows again. */
START_TEST (test_session_preempted_feeds_its_media_rows_again)
{
  const guint n_embd = llm_model_hparams (model)->n_embd, n_vocab =
      llm_model_hparams (model)->n_vocab;
  LlmSessionConfig cfg = { .kv = kv_f16, .sampler = greedy () };
  GError *error = NULL;
  gint32 ids[G_N_ELEMENTS (prompt)];
  g_autofree float *rows = g_new (float, G_N_ELEMENTS (prompt) * n_embd);
  media_prompt (ids, rows);
  g_autoptr (LlmSession) alone = llm_session_new (engine, &cfg, &error);
  ck_assert (llm_session_feed (alone, prompt, G_N_ELEMENTS (prompt), &error));
  gint32 want = llm_session_sample (alone);
  ck_assert (llm_session_step (alone, want, &want, &error));

  g_autoptr (LlmSession) probe = llm_session_new (engine, &cfg, &error);
  ck_assert (llm_session_feed (probe, prompt, 1, &error));
  const gsize one = llm_session_kv_bytes (probe);
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.n_threads = 1;
  o.kv_pool_bytes = one;
  o.kv_full = LLM_KV_FULL_PREEMPT;
  g_autoptr (LlmEngine) tight = llm_engine_new (model, &o, &error);
  ck_assert_msg (tight != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmSession) media = llm_session_new (tight, &cfg, &error);
  g_autoptr (LlmSession) other = llm_session_new (tight, &cfg, &error);
  ck_assert (llm_session_feed_embd (media, ids, rows, G_N_ELEMENTS (prompt), &error));
  gint32 next = llm_session_sample (media);
  ck_assert (llm_session_feed (other, prompt, 2, &error));
  ck_assert (llm_seq_was_preempted (llm_session_seq (media)));
  ck_assert_msg (llm_session_step (media, next, &next, &error), "%s",
      error ? error->message : "");
  ck_assert_mem_eq (llm_session_logits (media), llm_session_logits (alone),
      n_vocab * sizeof (float));
  ck_assert_int_eq (next, want);
}
END_TEST

static Suite *
session_suite (void)
{
  Suite *s = suite_create ("session");

  TCase *sampler = tcase_create ("sampler");
  tcase_add_checked_fixture (sampler, setup, teardown);
  tcase_add_test (sampler, test_session_sampler_set_after_the_prompt_samples_as_if_made_with_it);
  tcase_add_test (sampler, test_session_sampler_set_again_to_the_same_keeps_the_random_sequence);
  tcase_add_test (sampler, test_session_sampler_set_after_the_prompt_penalises_the_prompt);
  tcase_add_test (sampler, test_session_sampler_keeps_repeat_last_n_as_set);
  tcase_add_test (sampler, test_session_sample_without_logits_is_minus_one);
  tcase_add_test (sampler, test_session_media_rows_evaluate_as_the_tokens_they_embed);
  tcase_add_test (sampler, test_session_preempted_feeds_its_media_rows_again);
  suite_add_tcase (s, sampler);

  TCase *pool = tcase_create ("pool");
  tcase_add_checked_fixture (pool, setup, teardown);
  tcase_set_timeout (pool, 60);
  tcase_add_test (pool, test_pool_keep_context_gives_the_first_session_back);
  tcase_add_test (pool, test_pool_waits_for_a_release_past_its_maximum);
  tcase_add_test (pool, test_pool_keep_context_waits_for_its_conversation);
  tcase_add_test (pool, test_pool_flushing_wakes_a_waiting_acquire);
  tcase_add_test (pool, test_pool_session_given_back_holds_no_kv_unless_kept);
  tcase_add_test (pool, test_pool_clear_lets_go_of_a_busy_session_when_it_comes_back);
  suite_add_tcase (s, pool);
  return s;
}

LLM_TEST_MAIN (session_suite)
