/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Speculative decoding's engine side: the n-gram drafter's lookups, and
 * verification of drafts, which must give exactly the tokens plain
 * decoding gives (greedy), leave the cache as a fresh sequence fed the
 * accepted tokens, and keep every token's probability when sampling. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "drafter.h"
#include "layer-search.h"
#include "ngram-draft.h"
#include "sampler-private.h"
#include "session.h"
#include "spec-budget.h"
#include "spec-step.h"
#include "model-private.h"
#include "ggml-type.h"
#include "../tools/bench.h"

/* --- n-gram drafter ---------------------------------------------------- */

START_TEST (test_ngram_proposes_what_followed_the_latest_match)
{
  g_autoptr (LlmNgramDraft) d = llm_ngram_draft_new (1, 3, 64);
  const gint32 h[] = { 5, 6, 7, 8, 9, 5, 6, 1, 2, 3, 4, 9, 5, 6 };
  llm_ngram_draft_add (d, h, G_N_ELEMENTS (h));
  gint32 out[8];
  /* "9 5 6" last came at 4..6, followed by 1 2 3 4 9 5 6. */
  ck_assert_uint_eq (llm_ngram_draft_propose (d, 4, out), 4);
  ck_assert_int_eq (out[0], 1);
  ck_assert_int_eq (out[3], 4);
  /* Past the end of the history, the 7-token period again. */
  ck_assert_uint_eq (llm_ngram_draft_propose (d, 8, out), 8);
  ck_assert_int_eq (out[6], 6);
  ck_assert_int_eq (out[7], 1);
  /* It follows the 3 tokens "9 5 6" (n_max). */
  ck_assert_uint_eq (llm_ngram_draft_match (d), 3);
  /* A loop of one token proposes it again and again. */
  g_autoptr (LlmNgramDraft) loop = llm_ngram_draft_new (1, 3, 64);
  const gint32 same[] = { 7, 3, 3, 3 };
  llm_ngram_draft_add (loop, same, G_N_ELEMENTS (same));
  ck_assert_uint_eq (llm_ngram_draft_propose (loop, 5, out), 5);
  for (guint i = 0; i < 5; i++)
    ck_assert_int_eq (out[i], 3);
  /* "3 3" came before, "3 3 3" did not. */
  ck_assert_uint_eq (llm_ngram_draft_match (loop), 2);

  /* No earlier occurrence of any suffix. */
  const gint32 fresh = 42;
  llm_ngram_draft_add (d, &fresh, 1);
  ck_assert_uint_eq (llm_ngram_draft_propose (d, 4, out), 0);
  ck_assert_uint_eq (llm_ngram_draft_match (d), 0);
  llm_ngram_draft_reset (d);
  ck_assert_uint_eq (llm_ngram_draft_propose (d, 4, out), 0);
}
END_TEST

/* The rule, by scanning: for n from n_max down, the latest earlier start
 * of the last n tokens, and what followed it. */
static guint
propose_by_scan (const gint32 *h, guint len, guint n_min, guint n_max, guint max, gint32 *out,
    guint *matched)
{
  *matched = 0;
  for (guint n = n_max; n >= n_min; n--) {
    if (len <= n)
      continue;
    for (guint s = len - n; s-- > 0;) {
      if (memcmp (h + s, h + len - n, n * sizeof *h) == 0) {
        /* Periodic past the end: token i of the draft is the one period
         * len - (s + n) earlier in history-plus-draft. */
        for (guint i = 0; i < max; i++) {
          const guint at = s + n + i;
          out[i] = at < len ? h[at] : out[at - len];
        }
        *matched = n;
        return max;
      }
    }
  }
  return 0;
}

START_TEST (test_ngram_matches_a_scan_of_what_it_holds)
{
  /* Few distinct ids, so matches of every length are common; a window
   * small enough to be rebuilt many times. */
  static const guint windows[] = { 8, 33, 1000 };
  for (guint w = 0; w < G_N_ELEMENTS (windows); w++) {
    g_autoptr (LlmNgramDraft) d = llm_ngram_draft_new (2, 5, windows[w]);
    llm_test_rng_seed (w + 1);
    for (guint step = 0; step < 3000; step++) {
      const gint32 id = (gint32) (llm_test_rng_next () % 4);
      llm_ngram_draft_add (d, &id, 1);
      guint len;
      const gint32 *h = llm_ngram_draft_history (d, &len);
      ck_assert_uint_le (len, 2 * windows[w]);
      gint32 got[6], want[6];
      const guint n_got = llm_ngram_draft_propose (d, 6, got);
      guint matched;
      const guint n_want = propose_by_scan (h, len, 2, 5, 6, want, &matched);
      ck_assert_uint_eq (llm_ngram_draft_match (d), matched);
      ck_assert_msg (n_got == n_want && memcmp (got, want, n_got * sizeof *got) == 0,
          "window %u, step %u: %u tokens against %u", windows[w], step, n_got, n_want);
    }
  }
}
END_TEST

START_TEST (test_ngram_rejects_bad_sizes)
{
  /* g_return_val_if_fail's criticals, not aborts. */
  g_log_set_always_fatal (G_LOG_FATAL_MASK);
  ck_assert_ptr_null (llm_ngram_draft_new (0, 3, 64));
  ck_assert_ptr_null (llm_ngram_draft_new (4, 3, 64));
  ck_assert_ptr_null (llm_ngram_draft_new (1, LLM_NGRAM_MAX_N + 1, 64));
  ck_assert_ptr_null (llm_ngram_draft_new (1, 3, 3));
}
END_TEST

/* The lookup bound of gst-llm-bench --spec (tools/spec-lookup-bound.c),
 * on texts whose best steps are worked out by hand. */
static guint64
lookup_best (const gint32 *prompt, guint n_prompt, const gint32 *gen, guint n_gen, guint n_min,
    guint max, guint64 *lengths)
{
  return bench_spec_lookup_best (prompt, n_prompt, gen, n_gen, n_min, max, lengths);
}

START_TEST (test_lookup_bound_takes_the_best_occurrence_and_length)
{
  guint64 len[9];
  /* "10" occurred at the start: 11 12 13 agree, then 10 against 14. */
  const gint32 p1[] = { 10, 11, 12, 13 }, g1[] = { 10, 11, 12, 13, 14 };
  ck_assert_uint_eq (lookup_best (p1, 4, g1, 5, 1, 8, len), 1);
  ck_assert_uint_eq (len[3], 1);
  /* Not the latest occurrence of "1" (followed by 5) but the earlier one
   * (2 3, then 1 against 9): what prompt lookup could have proposed. */
  const gint32 p2[] = { 1, 2, 3, 1, 5 }, g2[] = { 1, 2, 3, 9 };
  ck_assert_uint_eq (lookup_best (p2, 5, g2, 4, 1, 8, len), 1);
  ck_assert_uint_eq (len[2], 1);
  ck_assert_uint_eq (len[0], 0);
  /* A continuation past the history repeats with its period (all of the
   * response after one step), cut at the response's end, or at @max. */
  const gint32 p3[] = { 7 }, g3[] = { 7, 7, 7, 7, 7, 7 };
  ck_assert_uint_eq (lookup_best (p3, 1, g3, 6, 1, 8, len), 1);
  ck_assert_uint_eq (len[5], 1);
  ck_assert_uint_eq (lookup_best (p3, 1, g3, 6, 1, 2, len), 2);
  ck_assert_uint_eq (len[2], 2);
  /* Nothing occurred before: plain steps. */
  const gint32 p4[] = { 1 }, g4[] = { 2, 3, 4 };
  ck_assert_uint_eq (lookup_best (p4, 1, g4, 3, 1, 8, len), 2);
  ck_assert_uint_eq (len[0], 2);
  /* Two tokens of context must both match. */
  const gint32 p5[] = { 1, 2, 3, 4, 2, 5 }, g5[] = { 2, 3 };
  ck_assert_uint_eq (lookup_best (p5, 6, g5, 2, 1, 8, len), 1);
  ck_assert_uint_eq (len[1], 1);
  ck_assert_uint_eq (lookup_best (p5, 6, g5, 2, 2, 8, len), 1);
  ck_assert_uint_eq (len[0], 1);
  ck_assert_uint_eq (len[1], 0);
  /* A response of one token has no step after it. */
  ck_assert_uint_eq (lookup_best (p5, 6, g5, 1, 1, 8, len), 0);
}
END_TEST

/* --- verification -------------------------------------------------------- */

#define N_GEN 40
#define DRAFT_MAX 5
/* spec_step_generate()'s widths for drafting DRAFT_MAX every step. */
static const guint draft_max[] = { DRAFT_MAX };

typedef enum {
  DRAFT_NGRAM,     /* prompt lookup */
  DRAFT_MODEL,     /* the model's own Q4_0 copy, confident or not */
  DRAFT_MODEL_SURE, /* the same, stopping under p = 0.5 */
  DRAFT_LAYERSKIP, /* the target with layers skipped, on a fork of its cache */
  DRAFT_ORACLE,    /* what plain decoding gives: every draft accepted */
  DRAFT_WRONG,     /* never what plain decoding gives */
  DRAFT_HALF,      /* right for two tokens, then wrong */
} DraftKind;

static LlmSession *
new_session (LlmEngine *e, const LlmKvConfig *kv, float repeat_penalty)
{
  LlmSessionConfig cfg = { .kv = *kv };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  cfg.sampler.repeat_penalty = repeat_penalty;
  GError *error = NULL;
  LlmSession *s = llm_session_new (e, &cfg, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  return s;
}

/* Stream @i's prompt: a phrase said twice, so prompt lookup finds drafts. */
static guint
make_prompt (guint n_vocab, gint32 *ids)
{
  const guint half = 9;
  for (guint k = 0; k < half; k++)
    ids[k] = ids[half + k] = (gint32) ((17 + 31 * k) % n_vocab);
  return 2 * half;
}

static void
plain_generate (LlmSession *s, const gint32 *prompt, guint n, gint32 *ids)
{
  GError *error = NULL;
  ck_assert_msg (llm_session_prefill (s, prompt, n, &ids[0], &error), "%s",
      error ? error->message : "");
  for (guint k = 1; k < N_GEN; k++)
    ck_assert (llm_session_step (s, ids[k - 1], &ids[k], &error));
}

static const LlmKvConfig kv_full = {
  .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL, .context_length = 256,
};

/* The test prompt into @prompt (returned: its length) and plain
 * decoding's N_GEN tokens after it into @plain, on a full cache. */
static guint
plain_run (LlmEngine *e, guint n_vocab, gint32 *prompt, gint32 *plain)
{
  const guint n = make_prompt (n_vocab, prompt);
  g_autoptr (LlmSession) s = new_session (e, &kv_full, 1.0f);
  plain_generate (s, prompt, n, plain);
  return n;
}

/* Returns the verifications it took; *@rejected counts those that did
 * not take their whole draft. */
static guint
spec_generate (LlmSession *s, const gint32 *prompt, guint n, DraftKind kind,
    LlmDrafter *drafter, const gint32 *plain, guint n_vocab, gint32 *ids, guint *rejected,
    guint *drafted, guint *accepted)
{
  GError *error = NULL;
  ck_assert_msg (llm_session_prefill (s, prompt, n, &ids[0], &error), "%s",
      error ? error->message : "");
  if (drafter)
    llm_drafter_begin (drafter, s, ids[0]);
  guint have = 1, verifications = 0;
  *rejected = *drafted = *accepted = 0;
  while (have < N_GEN) {
    gint32 draft[1 + DRAFT_MAX] = { ids[have - 1] };
    guint k = 0;
    switch (kind) {
      case DRAFT_NGRAM:
      case DRAFT_MODEL:
      case DRAFT_MODEL_SURE:
      case DRAFT_LAYERSKIP:
        k = llm_drafter_propose (drafter, DRAFT_MAX, draft + 1);
        break;
      default:
        for (; k < DRAFT_MAX && have + k < N_GEN; k++) {
          const gboolean right = kind == DRAFT_ORACLE || (kind == DRAFT_HALF && k < 2);
          draft[1 + k] = right ? plain[have + k] : (plain[have + k] + 1) % (gint32) n_vocab;
        }
        break;
    }
    gint32 out[1 + DRAFT_MAX];
    guint n_out = 0;
    ck_assert_msg (llm_session_verify (s, draft, 1 + k, out, &n_out, &error), "%s",
        error ? error->message : "");
    ck_assert_uint_ge (n_out, 1);
    ck_assert_uint_le (n_out, 1 + k);
    verifications++;
    *drafted += k;
    *accepted += n_out - 1;
    if (n_out < 1 + k)
      (*rejected)++;
    for (guint j = 0; j < n_out && have < N_GEN; j++)
      ids[have++] = out[j];
    if (drafter)
      llm_drafter_accept (drafter, out, n_out);
  }
  return verifications;
}

/* Every kind of draft gives plain decoding's tokens; afterwards the
 * session's cache equals a fresh sequence fed the same ids: the next
 * step's logits are the same bits. */
static LlmDrafter *
new_drafter (DraftKind kind, LlmEngine *draft_engine)
{
  GError *error = NULL;
  LlmDrafter *d = NULL;
  switch (kind) {
    case DRAFT_NGRAM:
      d = llm_drafter_new_ngram (1, 3, 256, &error);
      break;
    case DRAFT_MODEL:
    case DRAFT_MODEL_SURE:
      d = llm_drafter_new_model (draft_engine, 256, kind == DRAFT_MODEL_SURE ? 0.5f : 0.0f,
          &error);
      break;
    case DRAFT_LAYERSKIP:
      d = llm_drafter_new_layerskip (NULL, 0, TRUE);
      break;
    default:
      return NULL;
  }
  ck_assert_msg (d != NULL, "%s", error ? error->message : "");
  return d;
}

/* @file: the model's file in tests/data/models, whose Q4_0 copy drafts. */
/* N_GEN tokens after @prompt by llmspecverify's step; the counts into
 * @st. Each step asks for @widths[step % @n_widths] proposals, or with no
 * @widths what the dynamic budget chooses (at most 8). */
static void
spec_step_generate (LlmSession *s, const gint32 *prompt, guint n, LlmDrafter *d,
    const guint *widths, guint n_widths, gint32 *ids, LlmSpecStats *st)
{
  GError *error = NULL;
  ck_assert_msg (llm_session_prefill (s, prompt, n, &ids[0], &error), "%s",
      error ? error->message : "");
  llm_drafter_begin (d, s, ids[0]);
  LlmSpecBudget budget;
  llm_spec_budget_init (&budget, widths ? widths[0] : 8, widths != NULL);
  *st = (LlmSpecStats) { 0 };
  guint have = 1;
  for (guint step = 0; have < N_GEN; step++) {
    if (widths)
      llm_spec_budget_configure (&budget, widths[step % n_widths], TRUE);
    gint32 out[1 + LLM_SPEC_BUDGET_MAX];
    guint n_out = 0;
    ck_assert_msg (llm_spec_step (s, d, &budget, ids[have - 1], 0, out, &n_out, st, &error), "%s",
        error ? error->message : "");
    for (guint j = 0; j < n_out && have < N_GEN; j++)
      ids[have++] = out[j];
  }
}

/* The next step from @s (after @last) and from a fresh sequence fed the
 * ids @s's cache holds give the same logits, bit for bit. */
static void
assert_cache_is_fresh (LlmEngine *e, const LlmKvConfig *kv, LlmSession *s, gint32 last,
    const char *name, int what)
{
  GError *error = NULL;
  const guint n_vocab = llm_engine_model (e)->hp.n_vocab;
  const guint held = llm_session_n_ids (s);
  g_autoptr (LlmSeq) fresh = llm_test_new_seq (e, kv);
  g_autofree float *a = g_new (float, n_vocab);
  g_autofree float *b = g_new (float, n_vocab);
  ck_assert (llm_seq_eval_tokens (fresh, llm_session_ids (s), held, b, FALSE, &error));
  ck_assert (llm_seq_eval_tokens (fresh, &last, 1, b, FALSE, &error));
  gint32 next;
  ck_assert (llm_session_step (s, last, &next, &error));
  memcpy (a, llm_session_logits (s), n_vocab * sizeof (float));
  ck_assert_msg (memcmp (a, b, n_vocab * sizeof (float)) == 0,
      "%s, draft kind %d: the cache after verification is not a fresh one's", name, what);
}

static void
check_lossless (LlmModel *m, const char *file, const char *name, const LlmKvConfig *kv,
    float penalty)
{
  /* A window's evictions renumber what a fresh sequence would hold. */
  const gboolean compare_cache = kv->policy == LLM_KV_POLICY_FULL;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  const guint n_vocab = m->hp.n_vocab;
  gint32 prompt[32];
  const guint n = make_prompt (n_vocab, prompt);

  gint32 plain[N_GEN];
  {
    g_autoptr (LlmSession) s = new_session (e, kv, penalty);
    plain_generate (s, prompt, n, plain);
  }
  /* The draft model: the target's weights in Q4_0, the usual low-bit copy
   * (matrices whose rows are not whole blocks stay as they are). */
  g_autoptr (LlmModel) low_bit = llm_test_requantized_model (file, LLM_TYPE_Q4_0);
  g_autoptr (LlmEngine) draft_engine = llm_test_new_engine (low_bit, 2);
  for (DraftKind kind = DRAFT_NGRAM; kind <= DRAFT_HALF; kind++) {
    g_autoptr (LlmSession) s = new_session (e, kv, penalty);
    g_autoptr (LlmDrafter) drafter = new_drafter (kind, draft_engine);
    gint32 ids[N_GEN];
    guint rejected, drafted, accepted;
    const guint verifications = spec_generate (s, prompt, n, kind, drafter, plain, n_vocab, ids,
        &rejected, &drafted, &accepted);
    if (kind <= DRAFT_LAYERSKIP)
      g_print ("%s, draft kind %d: %u of %u proposals accepted, %u verifications\n", name,
          kind, accepted, drafted, verifications);
    /* A drafter with any proposals at all (a model always has some). */
    if (kind == DRAFT_MODEL || kind == DRAFT_LAYERSKIP)
      ck_assert_uint_gt (drafted, 0);
    for (guint k = 0; k < N_GEN; k++)
      ck_assert_msg (ids[k] == plain[k], "%s, draft kind %d, penalty %.2f: token %u is %d, "
          "plain decoding gives %d", name, kind, penalty, k, ids[k], plain[k]);
    /* The drafts did what they were made for; under a window, a
     * verification also stops where a step would evict, which costs a few
     * more (a full window that checked one token a step would need 2 a
     * chunk). */
    if (kind == DRAFT_ORACLE)
      ck_assert_uint_le (verifications, (N_GEN + DRAFT_MAX) / (DRAFT_MAX + 1)
          + (compare_cache ? 1 : 3));
    if (kind == DRAFT_WRONG)
      ck_assert_uint_ge (rejected, N_GEN - 2);

    if (compare_cache)
      assert_cache_is_fresh (e, kv, s, ids[N_GEN - 1], name, kind);
  }

  /* llmspecverify's loop: the dynamic budget with each drafter, and a
   * budget made to take every width from 0 to 8 in turn, so plain steps
   * and verifications of every size follow one another. */
  static const guint widths[] = { 0, 3, 1, 8, 2, 5, 0, 0, 4, 7, 6, 1 };
  for (guint run = 0; run < 3; run++) {
    g_autoptr (LlmSession) s = new_session (e, kv, penalty);
    g_autoptr (LlmDrafter) drafter = new_drafter (run == 1 ? DRAFT_MODEL : DRAFT_NGRAM,
        draft_engine);
    gint32 ids[N_GEN];
    LlmSpecStats st;
    spec_step_generate (s, prompt, n, drafter, run == 2 ? widths : NULL, G_N_ELEMENTS (widths),
        ids, &st);
    for (guint k = 0; k < N_GEN; k++)
      ck_assert_msg (ids[k] == plain[k], "%s, llm_spec_step run %u, penalty %.2f: token %u is "
          "%d, plain decoding gives %d", name, run, penalty, k, ids[k], plain[k]);
    /* The scripted run mixed plain steps in; every run verified drafts. */
    ck_assert_uint_gt (st.verifications, 0);
    if (run == 2)
      ck_assert_uint_gt (st.steps, st.verifications);
    if (compare_cache)
      assert_cache_is_fresh (e, kv, s, ids[N_GEN - 1], name, 100 + run);
  }
}

START_TEST (test_verify_is_lossless_stories260k)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  check_lossless (m, "stories260K.gguf", "stories260K", &kv_full, 1.0f);
  check_lossless (m, "stories260K.gguf", "stories260K", &kv_full, 1.3f);
}
END_TEST

START_TEST (test_verify_is_lossless_tinystories_q8_0)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  check_lossless (m, "TinyStories-656K-Q8_0.gguf", "TinyStories-656K-Q8_0", &kv_full, 1.0f);
}
END_TEST

START_TEST (test_verify_is_lossless_stories260k_q4_0)
{
  g_autoptr (LlmModel) m = llm_test_requantized_model ("stories260K.gguf", LLM_TYPE_Q4_0);
  check_lossless (m, "stories260K.gguf", "stories260K as Q4_0", &kv_full, 1.0f);
}
END_TEST

START_TEST (test_verify_is_lossless_random_qwen2)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("random-qwen2-f32.gguf");
  check_lossless (m, "random-qwen2-f32.gguf", "random-qwen2", &kv_full, 1.0f);
}
END_TEST

START_TEST (test_verify_is_lossless_random_qwen3)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("random-qwen3-f32.gguf");
  check_lossless (m, "random-qwen3-f32.gguf", "random-qwen3", &kv_full, 1.0f);
}
END_TEST

/* A model drafting for itself is always right: every proposal is
 * accepted, through the bookkeeping of what its own sequence guessed. */
START_TEST (test_model_drafter_of_the_target_itself_is_always_right)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autoptr (LlmEngine) twin = llm_test_new_engine (m, 2);
  gint32 prompt[32], plain[N_GEN], ids[N_GEN];
  const guint n = plain_run (e, m->hp.n_vocab, prompt, plain);
  for (DraftKind kind = DRAFT_MODEL; kind <= DRAFT_MODEL_SURE; kind++) {
    g_autoptr (LlmSession) s = new_session (e, &kv_full, 1.0f);
    g_autoptr (LlmDrafter) d = new_drafter (kind, twin);
    guint rejected, drafted, accepted;
    spec_generate (s, prompt, n, kind, d, plain, m->hp.n_vocab, ids, &rejected, &drafted,
        &accepted);
    ck_assert (memcmp (ids, plain, sizeof ids) == 0);
    ck_assert_uint_gt (drafted, 0);
    ck_assert_uint_eq (accepted, drafted);
    /* A second response of the same conversation drafts on from it. */
    llm_drafter_begin (d, s, ids[N_GEN - 1]);
    gint32 more[DRAFT_MAX];
    const guint k = llm_drafter_propose (d, DRAFT_MAX, more);
    ck_assert_uint_gt (k, 0);
    gint32 next;
    GError *error = NULL;
    ck_assert (llm_session_step (s, ids[N_GEN - 1], &next, &error));
    ck_assert_int_eq (more[0], next);
  }
}
END_TEST

/* --- drafting ahead ------------------------------------------------------ */


/* The model drafter drafting ahead, its Q4_0 copy for the target (with and
 * without p_min), gives plain decoding's tokens; every proposal after the
 * first starts a job, which its verdict either lets it use or refutes. */
static void
check_ahead_lossless (const char *file)
{
  g_autoptr (LlmModel) m = llm_test_load_model (file);
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  gint32 prompt[32], plain[N_GEN], ids[N_GEN];
  const guint n = plain_run (e, m->hp.n_vocab, prompt, plain);
  g_autoptr (LlmModel) low_bit = llm_test_requantized_model (file, LLM_TYPE_Q4_0);
  g_autoptr (LlmEngine) draft_engine = llm_test_new_engine (low_bit, 2);
  for (DraftKind kind = DRAFT_MODEL; kind <= DRAFT_MODEL_SURE; kind++) {
    LlmSpecStats st[2];
    for (guint ahead = 0; ahead < 2; ahead++) {
      g_autoptr (LlmSession) s = new_session (e, &kv_full, 1.0f);
      g_autoptr (LlmDrafter) d = new_drafter (kind, draft_engine);
      llm_drafter_set_ahead (d, ahead);
      ck_assert (llm_drafter_get_ahead (d) == (ahead == 1));
      spec_step_generate (s, prompt, n, d, draft_max, 1, ids, &st[ahead]);
      for (guint k = 0; k < N_GEN; k++)
        ck_assert_msg (ids[k] == plain[k], "%s, draft kind %d, ahead %u: token %u is %d, "
            "plain decoding gives %d", file, kind, ahead, k, ids[k], plain[k]);
    }
    g_print ("%s, draft kind %d ahead: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
        " accepted (%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " without), %"
        G_GUINT64_FORMAT " verifications, %" G_GUINT64_FORMAT " used, %" G_GUINT64_FORMAT
        " discarded\n", file, kind, st[1].accepted, st[1].drafted, st[0].accepted,
        st[0].drafted, st[1].verifications, st[1].ahead_used, st[1].ahead_discarded);
    ck_assert_uint_gt (st[1].drafted, 0);
    ck_assert_uint_eq (st[0].ahead_used + st[0].ahead_discarded, 0);
    /* Each proposal but the first comes after a job, used or not: a
     * refuted job, or a confirmed one whose stash the next step takes. */
    ck_assert_uint_le (st[1].ahead_used + st[1].ahead_discarded, st[1].verifications);
    ck_assert_uint_ge (st[1].ahead_used + st[1].ahead_discarded + 1, st[1].verifications);
  }
}

START_TEST (test_drafting_ahead_is_lossless_stories260k)
{
  check_ahead_lossless ("stories260K.gguf");
}
END_TEST

START_TEST (test_drafting_ahead_is_lossless_random_qwen2)
{
  check_ahead_lossless ("random-qwen2-f32.gguf");
}
END_TEST

/* Sampling, the verifier's speculative-sampling rule sees the same
 * proposals whether they were drafted ahead or when asked, so a seed gives
 * the same tokens either way. */
START_TEST (test_drafting_ahead_samples_what_drafting_when_asked_samples)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autoptr (LlmModel) low_bit = llm_test_requantized_model ("stories260K.gguf", LLM_TYPE_Q4_0);
  g_autoptr (LlmEngine) draft_engine = llm_test_new_engine (low_bit, 2);
  gint32 prompt[32], ids[2][N_GEN];
  const guint n = make_prompt (m->hp.n_vocab, prompt);
  LlmSpecStats st[2];
  for (guint ahead = 0; ahead < 2; ahead++) {
    g_autoptr (LlmSession) s = new_session (e, &kv_full, 1.0f);
    LlmSamplerParams p;
    llm_session_get_sampler (s, &p);
    p.temperature = 0.8f;
    p.seed = 42;
    llm_session_set_sampler (s, &p);
    g_autoptr (LlmDrafter) d = new_drafter (DRAFT_MODEL, draft_engine);
    llm_drafter_set_ahead (d, ahead);
    spec_step_generate (s, prompt, n, d, draft_max, 1, ids[ahead], &st[ahead]);
  }
  for (guint k = 0; k < N_GEN; k++)
    ck_assert_msg (ids[1][k] == ids[0][k], "token %u: %d drafting ahead, %d when asked", k,
        ids[1][k], ids[0][k]);
  ck_assert_uint_eq (st[1].drafted, st[0].drafted);
  ck_assert_uint_eq (st[1].accepted, st[0].accepted);
  ck_assert_uint_gt (st[1].ahead_used + st[1].ahead_discarded, 0);
}
END_TEST

/* The target drafting for itself is always right, and so is its guess of
 * the target's next token: every proposal after the first was begun ahead,
 * none thrown away. A drafter always wrong throws every one away. */
START_TEST (test_drafts_ahead_are_used_when_right_and_discarded_when_wrong)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autoptr (LlmEngine) twin = llm_test_new_engine (m, 2);
  gint32 prompt[32], plain[N_GEN], ids[N_GEN];
  const guint n = plain_run (e, m->hp.n_vocab, prompt, plain);
  {
    g_autoptr (LlmSession) s = new_session (e, &kv_full, 1.0f);
    g_autoptr (LlmDrafter) d = new_drafter (DRAFT_MODEL, twin);
    llm_drafter_set_ahead (d, TRUE);
    LlmSpecStats st;
    spec_step_generate (s, prompt, n, d, draft_max, 1, ids, &st);
    ck_assert (memcmp (ids, plain, sizeof ids) == 0);
    ck_assert_uint_eq (st.accepted, st.drafted);
    ck_assert_uint_gt (st.verifications, 1);
    ck_assert_uint_eq (st.ahead_used, st.verifications - 1);
    ck_assert_uint_eq (st.ahead_discarded, 0);
    /* The next response of the conversation throws the last stash away
     * and drafts on from what the target holds. */
    llm_drafter_begin (d, s, ids[N_GEN - 1]);
    guint64 used, discarded;
    llm_drafter_ahead_counts (d, &used, &discarded);
    ck_assert_uint_eq (used, st.ahead_used);
    ck_assert_uint_eq (discarded, 1);
    gint32 more[DRAFT_MAX], next;
    ck_assert_uint_eq (llm_drafter_propose (d, DRAFT_MAX, more), DRAFT_MAX);
    GError *error = NULL;
    ck_assert (llm_session_step (s, ids[N_GEN - 1], &next, &error));
    ck_assert_int_eq (more[0], next);
  }
  {
    /* Another model's greedy picks: none survives a whole proposal. */
    g_autoptr (LlmModel) other = llm_test_load_model ("random-llama-bf16.gguf");
    g_autoptr (LlmEngine) other_engine = llm_test_new_engine (other, 2);
    g_autoptr (LlmSession) s = new_session (e, &kv_full, 1.0f);
    g_autoptr (LlmDrafter) d = new_drafter (DRAFT_MODEL, other_engine);
    llm_drafter_set_ahead (d, TRUE);
    LlmSpecStats st;
    spec_step_generate (s, prompt, n, d, draft_max, 1, ids, &st);
    ck_assert (memcmp (ids, plain, sizeof ids) == 0);
    ck_assert_uint_eq (st.verifications, N_GEN - 1);
    ck_assert_uint_eq (st.ahead_used, 0);
    ck_assert_uint_eq (st.ahead_discarded, st.verifications);
  }
}
END_TEST

/* Skipping every layer, or one the model lacks, is refused. */
/* The search keeps sets that give more tokens per forward: in a made-up
 * model where skipping any inner layer costs little acceptance but
 * skipping layer 5 ruins it, it ends skipping cheap ones and not 5,
 * starting from every other layer of the middle (3, 5, 7). */
START_TEST (test_layer_search_climbs_to_the_cheap_layers)
{
  enum { L = 12 };
  double penalty[L] = { 0 };
  for (guint l = 1; l < L - 1; l++)
    penalty[l] = 0.02;
  penalty[5] = 0.6;
  guint8 start[L] = { 0 };
  for (guint l = L / 4; l < 3 * L / 4; l++)
    start[l] = (l - L / 4) % 2 == 0;
  ck_assert (start[5]);
  g_autoptr (GRand) rand = g_rand_new_with_seed (5);
  LlmLayerSearch *search = llm_layer_search_new (L, start, 16, 1);
  double start_value = 0;
  for (guint step = 0; step < 4000; step++) {
    const guint8 *mask = llm_layer_search_mask (search);
    double p = 1.0;
    for (guint l = 0; l < L; l++)
      if (mask[l])
        p *= 1.0 - penalty[l];
    guint accepted = 0;
    while (accepted < 4 && g_rand_double (rand) < p)
      accepted++;
    llm_layer_search_observe (search, 4, accepted, 0);
    if (step == 15)
      llm_layer_search_best (search, &start_value);
  }
  double value = 0;
  const guint8 *best = llm_layer_search_best (search, &value);
  guint kept = 0, trials = llm_layer_search_trials (search, &kept);
  ck_assert_uint_gt (trials, 50);
  ck_assert_uint_gt (kept, 0);
  ck_assert_msg (!best[5], "still skips layer 5");
  ck_assert (!best[0] && !best[L - 1]);
  guint skipped = 0;
  for (guint l = 0; l < L; l++)
    skipped += best[l];
  ck_assert_uint_ge (skipped, 4);
  ck_assert_msg (value > 1.3 * start_value, "%g tokens per forward, from %g", value,
      start_value);
  llm_layer_search_free (search);
}
END_TEST

START_TEST (test_layerskip_refuses_skipping_every_layer)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const guint n_layer = m->hp.n_layer;
  g_autofree guint *all = g_new (guint, n_layer);
  for (guint l = 0; l < n_layer; l++)
    all[l] = l;
  GError *error = NULL;
  g_autoptr (LlmDrafter) every = llm_drafter_new_layerskip (all, n_layer, FALSE);
  ck_assert (!llm_drafter_check_model (every, m, &error));
  ck_assert_msg (strstr (error->message, "leave at least one") != NULL, "%s", error->message);
  g_clear_error (&error);
  const guint past = n_layer;
  g_autoptr (LlmDrafter) beyond = llm_drafter_new_layerskip (&past, 1, FALSE);
  ck_assert (!llm_drafter_check_model (beyond, m, &error));
  g_clear_error (&error);
  /* The default (none named) and one layer are fine. */
  const guint one = 1;
  g_autoptr (LlmDrafter) def = llm_drafter_new_layerskip (NULL, 0, FALSE);
  g_autoptr (LlmDrafter) single = llm_drafter_new_layerskip (&one, 1, FALSE);
  ck_assert (llm_drafter_check_model (def, m, NULL));
  ck_assert (llm_drafter_check_model (single, m, NULL));
}
END_TEST

START_TEST (test_verify_is_lossless_when_a_window_evicts)
{
  /* A sink window smaller than the prompt and the response: drafts are
   * checked only as far as the cache has room before it evicts, so the
   * evictions happen where plain decoding makes them. */
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const LlmKvConfig kv = {
    .type = LLM_KV_F16, .policy = LLM_KV_POLICY_SINK_WINDOW, .window = 24, .sink = 4,
  };
  check_lossless (m, "stories260K.gguf", "stories260K, sink window", &kv, 1.0f);
}
END_TEST

/* A session of @kv sampling with @temperature (seed 42), penalty 1.3 over
 * the last 64 ids. */
static LlmSession *
new_sampling_session (LlmEngine *e, const LlmKvConfig *kv, float temperature)
{
  LlmSession *s = new_session (e, kv, 1.3f);
  LlmSamplerParams p;
  llm_session_get_sampler (s, &p);
  p.temperature = temperature;
  p.seed = 42;
  p.repeat_last_n = 64;
  llm_session_set_sampler (s, &p);
  return s;
}

/* Sampling with a seed, speculation gives plain decoding's very tokens,
 * whatever is drafted and whatever lengths the budget picks: each row is
 * drawn as a plain step draws it (before, a rejected draft drew twice, so
 * the dynamic budget's timing changed the text from run to run). */
START_TEST (test_a_seed_gives_plain_decodings_tokens_whatever_is_drafted)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autoptr (LlmModel) low_bit = llm_test_requantized_model ("stories260K.gguf", LLM_TYPE_Q4_0);
  g_autoptr (LlmEngine) draft_engine = llm_test_new_engine (low_bit, 2);
  gint32 prompt[32], plain[N_GEN];
  const guint n = make_prompt (m->hp.n_vocab, prompt);
  {
    g_autoptr (LlmSession) s = new_sampling_session (e, &kv_full, 0.8f);
    plain_generate (s, prompt, n, plain);
  }
  static const guint widths[] = { 0, 3, 1, 8, 2, 5, 0, 0, 4, 7, 6, 1 };
  guint64 rejected = 0;
  for (guint run = 0; run < 4; run++) {
    g_autoptr (LlmSession) s = new_sampling_session (e, &kv_full, 0.8f);
    g_autoptr (LlmDrafter) d = new_drafter (run % 2 ? DRAFT_MODEL : DRAFT_NGRAM, draft_engine);
    gint32 ids[N_GEN];
    LlmSpecStats st;
    spec_step_generate (s, prompt, n, d, run >= 2 ? widths : NULL, G_N_ELEMENTS (widths), ids,
        &st);
    for (guint k = 0; k < N_GEN; k++)
      ck_assert_msg (ids[k] == plain[k], "run %u: token %u is %d, plain decoding gives %d", run,
          k, ids[k], plain[k]);
    ck_assert_uint_gt (st.verifications, 0);
    rejected += st.drafted - st.accepted;
  }
  /* Drafts were turned down on the way, and the draws still agreed. */
  ck_assert_uint_gt (rejected, 0);
}
END_TEST

/* A response that ends inside a verification's tokens takes the rest back
 * (llmdecode's llm_session_truncate): the penalty's window and the random
 * sequence go back too, so what follows is what plain steps give. Under a
 * window of 24 that evicts while the penalty looks at 64 ids: refilled
 * from the ids the cache still held, the penalty forgot the evicted ones
 * and the text went another way. */
START_TEST (test_taking_back_a_verifications_tokens_samples_on_as_plain_steps)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  const LlmKvConfig kv = {
    .type = LLM_KV_F16, .policy = LLM_KV_POLICY_SINK_WINDOW, .window = 24, .sink = 4,
  };
  gint32 prompt[32];
  const guint n = make_prompt (m->hp.n_vocab, prompt);
  enum { LONG = 3 * N_GEN };
  for (guint sampled = 0; sampled < 2; sampled++) {
    const float temperature = sampled ? 0.8f : 0.0f;
    gint32 plain[LONG];
    {
      g_autoptr (LlmSession) s = new_sampling_session (e, &kv, temperature);
      GError *error = NULL;
      ck_assert (llm_session_prefill (s, prompt, n, &plain[0], &error));
      for (guint k = 1; k < LONG; k++)
        ck_assert (llm_session_step (s, plain[k - 1], &plain[k], &error));
    }
    /* Plain decoding's next 5 tokens proposed, every one taken (as many
     * as the window has room for without evicting mid-check), the last 2
     * fed taken back, and on from the last kept. */
    g_autoptr (LlmSession) s = new_sampling_session (e, &kv, temperature);
    GError *error = NULL;
    gint32 first;
    ck_assert (llm_session_prefill (s, prompt, n, &first, &error));
    ck_assert_int_eq (first, plain[0]);
    guint taken_back = 0;
    for (guint have = 1; have + 6 <= LONG;) {
      gint32 draft[6] = { plain[have - 1] }, out[6];
      memcpy (draft + 1, plain + have, 5 * sizeof *draft);
      guint n_out;
      ck_assert (llm_session_verify (s, draft, 6, out, &n_out, &error));
      for (guint j = 0; j < n_out; j++)
        ck_assert_msg (out[j] == plain[have + j], "%s: token %u is %d, plain decoding gives %d",
            sampled ? "sampled" : "greedy", have + j, out[j], plain[have + j]);
      const guint back = MIN (2, n_out - 1);
      llm_session_truncate (s, llm_session_n_ids (s) - back);
      taken_back += back;
      have += n_out - back;
    }
    ck_assert_uint_gt (taken_back, LONG / 4);
  }
}
END_TEST

/* --- sampling against a draft ------------------------------------------ */

/* Tokens drawn with a fixed draft come out with their softmax
 * probabilities: the draft's own and every other's. */
static void
check_draws_keep_the_distribution (gint32 draft)
{
  const float logits[] = { 1.0f, 2.5f, 0.5f, 2.0f, -1.0f, 1.5f };
  enum { N = G_N_ELEMENTS (logits), DRAWS = 40000 };
  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  p.temperature = 0.8f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 5 + (guint64) draft;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  guint counts[N] = { 0 };
  guint accepted_n = 0;
  for (guint i = 0; i < DRAWS; i++) {
    gboolean accepted;
    const gint32 id = llm_sampler_sample_draft (s, logits, N, draft, &accepted);
    ck_assert_int_ge (id, 0);
    ck_assert_int_lt (id, N);
    ck_assert (accepted == (id == draft));
    counts[id]++;
    accepted_n += accepted;
  }
  double w[N], sum = 0;
  for (guint i = 0; i < N; i++)
    sum += (w[i] = exp ((logits[i] - 2.5) / 0.8));
  for (guint i = 0; i < N; i++) {
    const double pi = w[i] / sum, mean = DRAWS * pi, se = sqrt (DRAWS * pi * (1 - pi));
    ck_assert_msg (fabs (counts[i] - mean) <= 4 * se, "draft %d: id %u drawn %u times, "
        "expected %.1f +- %.1f", draft, i, counts[i], mean, 4 * se);
  }
}

START_TEST (test_sampling_against_a_draft_keeps_every_probability)
{
  check_draws_keep_the_distribution (1);   /* the likeliest */
  check_draws_keep_the_distribution (4);   /* the least likely */
  check_draws_keep_the_distribution (77);  /* outside the vocabulary: never accepted */
}
END_TEST

START_TEST (test_greedy_against_a_draft_is_the_argmax)
{
  LlmSamplerParams p;
  llm_sampler_params_init (&p);
  p.temperature = 0.0f;
  g_autoptr (LlmSampler) s = llm_sampler_new (&p);
  const float logits[] = { 0.0f, 3.0f, 3.0f, 1.0f };
  gboolean accepted = TRUE;
  ck_assert_int_eq (llm_sampler_sample_draft (s, logits, 4, 2, &accepted), 1);
  ck_assert (!accepted);
  ck_assert_int_eq (llm_sampler_sample_draft (s, logits, 4, 1, &accepted), 1);
  ck_assert (accepted);
}
END_TEST

/* --- the budget planner ------------------------------------------------ */

/* How many of @k proposals a step keeps, each (from the first on, while
 * all before it were kept) with chance @p: llm_test_rng's next draws. */
static guint
kept_of (guint k, double p)
{
  guint kept = 0;
  while (kept < k && (llm_test_rng_next () >> 11) * 0x1.0p-53 < p)
    kept++;
  return kept;
}

/* A step of @w proposals costs 1000 us + @per_row_us each; proposals at
 * every position are accepted with @p (a fixed random sequence). Returns
 * the mean proposals asked for over the last 200 of 600 steps. */
static double
settle_for (LlmSpecBudget *b, double p, double per_row_us, guint steps)
{
  double asked = 0;
  for (guint step = 0; step < steps; step++) {
    const guint k = llm_spec_budget_choose (b);
    const guint accepted = kept_of (k, p);
    llm_spec_budget_observe (b, k, accepted, (gint64) (1000 + per_row_us * k), 0);
    if (step + 200 >= steps)
      asked += k;
  }
  return asked / 200;
}

static double
settle (LlmSpecBudget *b, double p, double per_row_us)
{
  llm_test_rng_seed (99);
  return settle_for (b, p, per_row_us, 600);
}

/* The stats' step time of a width that only probes took is the probe's:
 * a planner idle from early on (prompt lookup on a story whose lookups
 * fail) had checked one proposal only in probes, whose times stay out of
 * the width's average, and llmspecverify reported those steps as never
 * timed (test_spec_verify_reports_its_drafts, now and then). */
START_TEST (test_budget_reports_a_width_only_probes_took)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 4, FALSE);
  for (guint i = 0; i < 4; i++)
    llm_spec_budget_observe (&b, 0, 0, 1000, 0);
  ck_assert_double_eq (llm_spec_budget_step_us (&b, 1), 0.0);
  b.probing = TRUE;
  llm_spec_budget_observe (&b, 1, 0, 1500, 10);
  ck_assert_uint_eq (b.cost_seen[1], 0);
  ck_assert_double_eq (llm_spec_budget_step_us (&b, 1), 1500.0);
  ck_assert_double_eq (llm_spec_budget_step_us (&b, 2), 0.0);
  ck_assert (llm_spec_budget_step_us (&b, 0) > 0.0);
}
END_TEST

START_TEST (test_budget_stops_drafting_what_is_never_accepted)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  /* Mostly 0, with a probe of one proposal ever more rarely. */
  const double asked = settle (&b, 0.0, 50);
  ck_assert_msg (asked <= 1.0 / 64, "asks for %.3f proposals a step", asked);
  /* And plain steps are the best rate it knows. */
  ck_assert_double_gt (llm_spec_budget_rate (&b, 0), llm_spec_budget_rate (&b, 1));
}
END_TEST

START_TEST (test_budget_notices_drafts_that_start_to_succeed)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  llm_test_rng_seed (5);
  settle_for (&b, 0.0, 20, 1000);
  /* A probe comes within 256 steps and brings the drafts back. */
  const double asked = settle_for (&b, 0.95, 20, 600);
  ck_assert_msg (asked >= 6.0, "asks for %.2f proposals a step", asked);
}
END_TEST

START_TEST (test_budget_drafts_long_when_it_pays)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  /* 90% acceptance, a row 2% of a step: the longest draft is best. */
  ck_assert_double_ge (settle (&b, 0.9, 20), 7.0);
  /* 60%, a row 30% of a step: 1 + 0.6 + 0.36 over 1.6 beats 1.6 over 1.3
   * and 1 over 1: two proposals. */
  llm_spec_budget_init (&b, 8, FALSE);
  const double asked = settle (&b, 0.6, 300);
  ck_assert_msg (asked >= 1.0 && asked <= 3.0, "asks for %.2f proposals a step", asked);
}
END_TEST

/* Prompt lookup that follows four tokens is right 95% of the time here,
 * one that follows a single token 15%, the two mixed evenly: the planner
 * told which it has drafts long after the one and hardly at all after the
 * other. A row costs 10% of a step. */
START_TEST (test_budget_drafts_by_how_much_context_the_lookup_matched)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  llm_test_rng_seed (7);
  double asked[2] = { 0, 0 };
  for (guint step = 0; step < 600; step++) {
    const guint match = step % 2 ? 4 : 1;
    const double p = match == 4 ? 0.95 : 0.15;
    llm_spec_budget_set_match (&b, match);
    const guint k = llm_spec_budget_choose (&b);
    const guint accepted = kept_of (k, p);
    llm_spec_budget_observe (&b, k, accepted, (gint64) (1000 + 100 * k), 0);
    if (step >= 400)
      asked[step % 2] += k / 100.0;
  }
  /* Measured: 8.0 and 0.55 proposals a step; told nothing, 7.4 and 2.8
   * (the short matches mostly follow a full accept). */
  ck_assert_msg (asked[1] >= 5.0 && asked[0] <= 1.0,
      "asks for %.2f proposals after a long match, %.2f after a short one", asked[1], asked[0]);
}
END_TEST

/* One proposal timed a little faster than plain steps (noise: a row of
 * a memory-bound step costs next to nothing) says little of what eight
 * cost. Were a row really 30% of a step, checking one would be best at
 * these even odds (1.5 tokens over 1.3 steps): the planner may try two
 * or three, not eight. */
START_TEST (test_budget_does_not_take_unmeasured_proposals_for_free)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  for (guint i = 0; i < 3; i++)
    llm_spec_budget_observe (&b, 0, 0, 1000, 0);
  for (guint i = 0; i < 4; i++)
    llm_spec_budget_observe (&b, 1, i % 2, 990, 0);
  const guint k = llm_spec_budget_choose (&b);
  ck_assert_msg (k >= 1 && k <= 3, "asks for %u proposals", k);
}
END_TEST

/* A forward's cost can rise in a step:
 * Zen 5's F16 at 246M took a plain step's time up to 4 proposals, 1.3
 * steps at 5 and 1.6 at 8. With 6 and 7 never timed, their cost lies on
 * the line from 5 to 8; taken from below alone (5's rows' slope), 7
 * looked cheaper than it is, and a planner sure of every proposal asked
 * for 7 where 8 gives more for what it costs (replayed on real text at
 * these costs: 0.977 of the best fixed length on caption, 0.995 now). */
START_TEST (test_budget_prices_a_width_between_two_measured_ones)
{
  static const double us[9] = { 7400, 7400, 7400, 7400, 7400, 9000, 0, 0, 12100 };
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  for (guint i = 0; i < 40; i++)
    for (guint w = 0; w <= 8; w++)
      if (us[w] > 0)
        llm_spec_budget_observe (&b, w, w, (gint64) us[w], 0);
  /* Every proposal taken: 8 proposals give 9 tokens, 7 give 8, and 7 cost
   * 11067 us on that line (rate 0.96 of 8's). */
  const double r7 = llm_spec_budget_rate (&b, 7), r8 = llm_spec_budget_rate (&b, 8);
  ck_assert_msg (r7 < r8, "7 proposals at %.3f of 8's rate", r7 / r8);
  ck_assert_uint_eq (llm_spec_budget_choose (&b), 8);
}
END_TEST

/* Steps until a planner that learnt drafts never hold (600 steps, its
 * probes failing) drafts again once they hold 90% of the time, each plain
 * step also telling it (@guesses) whether the free first guess was
 * right. A step costs 1000 us + 100 per proposal. */
static guint
steps_to_resume (gboolean guesses)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  llm_test_rng_seed (3);
  for (guint step = 0;; step++) {
    const gboolean holding = step >= 600;
    const guint k = llm_spec_budget_choose (&b);
    if (holding && k > 0)
      return step - 600;
    if (step == 600 + 1000)
      return 1000;
    guint accepted = 0;
    while (holding && accepted < k && (llm_test_rng_next () >> 11) * 0x1.0p-53 < 0.9)
      accepted++;
    llm_spec_budget_observe (&b, k, accepted, 1000 + 100 * k, 0);
    if (k == 0 && guesses)
      llm_spec_budget_observe_guess (&b, holding
          && (llm_test_rng_next () >> 11) * 0x1.0p-53 < 0.9);
  }
}

START_TEST (test_budget_learns_from_free_guesses_while_idle)
{
  const guint with = steps_to_resume (TRUE), without = steps_to_resume (FALSE);
  ck_assert_msg (with <= 8, "drafts again after %u steps", with);
  /* Probes alone wait for the next one: up to 256 steps. */
  ck_assert_msg (without > 32, "without guesses drafts again after %u steps", without);
}
END_TEST

/* A width's first step is slow (one-time work: memory touched for the
 * first time, a thread woken), and now and then any step is (the machine
 * is shared): neither may keep the planner from the length that pays. */
START_TEST (test_budget_is_not_put_off_by_slow_steps)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  llm_test_rng_seed (7);
  gboolean tried[9] = { FALSE };
  double asked = 0;
  for (guint step = 0; step < 600; step++) {
    const guint k = llm_spec_budget_choose (&b);
    const guint accepted = kept_of (k, 0.9);
    double us = 1000 + 20.0 * k;
    if (!tried[k] || step % 37 == 0)
      us *= 10;
    tried[k] = TRUE;
    llm_spec_budget_observe (&b, k, accepted, (gint64) us, 0);
    if (step >= 400)
      asked += k;
  }
  ck_assert_msg (asked / 200 >= 7.0, "asks for %.2f proposals a step", asked / 200);
}
END_TEST

/* Proposals are accepted 90% of the time at every position and a row
 * costs 25% of a step (4 to 8 proposals pay best, 1 pays 0.73 of that),
 * but the first three second proposals are rejected: the planner must
 * not conclude that second proposals never pay. */
START_TEST (test_budget_is_not_put_off_by_an_unlucky_start)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  llm_test_rng_seed (11);
  guint second_seen = 0;
  double asked = 0;
  for (guint step = 0; step < 600; step++) {
    const guint k = llm_spec_budget_choose (&b);
    guint accepted = 0;
    while (accepted < k && (llm_test_rng_next () >> 11) * 0x1.0p-53 < 0.9) {
      if (accepted == 1 && second_seen < 3)
        break;
      accepted++;
    }
    if (k >= 2 && accepted >= 1)
      second_seen++;
    llm_spec_budget_observe (&b, k, accepted, (gint64) (1000 + 250.0 * k), 0);
    if (step >= 400)
      asked += k;
  }
  ck_assert_uint_ge (second_seen, 3);
  ck_assert_msg (asked / 200 >= 3.5, "asks for %.2f proposals a step", asked / 200);
}
END_TEST

/* A draft model (no free guess: the planner learns only from what it
 * asks for) whose first proposals alternate right and wrong, so every
 * miss comes right after a full accept: half right, at a third of a
 * plain step each (1 + 0.5 tokens for 1.35 steps pays 1.1x plain), yet
 * the state after a full accept has seen only misses. The planner must
 * go on drafting on all the verdicts: on that state's alone it went idle
 * with 6 of 11 right, and a model drafter learns nothing while idle (on
 * the machine, such an early run kept gst-llm-bench --spec model idle
 * for 60 steps). */
START_TEST (test_budget_keeps_drafting_when_one_state_has_only_missed)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  const double plain = 7600, row = 150, draft = 2450;
  /* A first draft (its first proposal right, any later one wrong, as
   * all through), then three timed plain steps, as a drafter that costs
   * forwards asks. */
  guint k = llm_spec_budget_choose (&b);
  ck_assert_uint_ge (k, 1);
  llm_spec_budget_observe (&b, k, 1, (gint64) (plain + k * (row + draft)), (gint64) (k * draft));
  for (guint i = 0; i < 3; i++) {
    ck_assert_uint_eq (llm_spec_budget_choose (&b), 0);
    llm_spec_budget_observe (&b, 0, 0, (gint64) plain, 0);
  }
  for (guint i = 0; i < 24; i++) {
    k = llm_spec_budget_choose (&b);
    ck_assert_msg (k >= 1, "idle at step %u, with %u of %u first proposals right", i,
        (i + 1) / 2 + 1, i + 1);
    llm_spec_budget_observe (&b, k, i % 2 == 1, (gint64) (plain + k * (row + draft)),
        (gint64) (k * draft));
  }
}
END_TEST

/* Tokens per plain step's time of a 256-token response with a draft
 * model whose proposals are right with @p at every position, verdicts
 * drawn from @seed, @k_fixed proposals a step (-1: the dynamic budget):
 * a plain step 12500 us, a row of a verification 600, a draft forward
 * 3000 a proposal, and a draft step after idle ones first catching up
 * 300 us a token said meanwhile (up to 64): random-weight 246M in F16
 * with its Q4_0 copy drafting, which agree on half the first
 * proposals (Zen 5, AVX-512, two threads). */
static double
model_right_with (guint64 seed, double p, gint k_fixed)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, k_fixed >= 0 ? (guint) k_fixed : 8, k_fixed >= 0);
  llm_test_rng_seed (seed);
  double us = 0;
  guint backlog = 0;
  for (guint have = 0; have < 256;) {
    const guint k = llm_spec_budget_choose (&b);
    const guint accepted = kept_of (k, p);
    const double draft = k > 0 ? 3000.0 * k + 300.0 * MIN (backlog, 64u) : 0;
    const double t = draft + 12500.0 + 600.0 * k;
    llm_spec_budget_observe (&b, k, accepted, (gint64) t, (gint64) draft);
    backlog = k > 0 ? 0 : backlog + 1;
    us += t;
    have += accepted + 1;
  }
  return 256 * 12500.0 / us;
}

/* Draft models right a fifth, a third, half and two thirds of the time,
 * each proposal costing a quarter of a plain step with its row: the
 * planner must draft where that pays, and not where it does not, whatever
 * its first verdicts (32 verdict sequences each). Measured (dynamic over
 * the best of plain and fixed 1 to 3, on average; worst dynamic over
 * plain): 0.974 (0.966x), 0.981 (0.973x), 0.987 (1.068x), 0.984 (1.218x).
 * Stopping on the averages alone: 0.978 (0.974x), 0.952 (0.977x), 0.932
 * (0.977x), 0.957 (0.981x): a third of the runs went idle after one or
 * two misses and never drafted again. */
START_TEST (test_budget_drafts_with_a_model_that_is_often_right)
{
  static const double ps[] = { 0.2, 0.35, 0.5, 0.65 };
  for (guint i = 0; i < G_N_ELEMENTS (ps); i++) {
    double mean = 0, worst = G_MAXDOUBLE, fixed[4] = { 0 };
    for (guint64 seed = 1; seed <= 32; seed++) {
      const double x = model_right_with (seed, ps[i], -1);
      mean += x / 32;
      worst = MIN (worst, x);
      for (gint k = 0; k < 4; k++)
        fixed[k] += model_right_with (seed, ps[i], k) / 32;
    }
    double best = 0;
    for (guint k = 0; k < 4; k++)
      best = MAX (best, fixed[k]);
    g_print ("a draft model right %.2f of the time: dynamic %.3fx plain (%.3f of the best "
        "fixed length), %.3fx at worst\n", ps[i], mean, mean / best, worst);
    ck_assert_msg (mean >= 0.97 * best && worst >= (ps[i] < 0.4 ? 0.95 : 1.0),
        "right %.2f of the time: dynamic %.3fx plain against %.3fx fixed, %.3fx at worst", ps[i],
        mean, best, worst);
  }
}
END_TEST

/* Tokens of a 256-token response per plain step's time, for a fresh
 * planner whose drafter's proposals cost forwards: a plain step 5500 us,
 * a step of k proposals 4500 us of drafting each and a verification of
 * 5500 (1 + 0.1 k) us (as skipping 2 of 5 layers measured on the widened
 * stories260K in F16, where one proposal pays only above 0.8 acceptance),
 * proposals accepted with @p at every position. */
static double
drafting_costs_forwards (guint64 seed, double p)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  llm_test_rng_seed (seed);
  double us = 0;
  for (guint have = 0; have < 256;) {
    const guint k = llm_spec_budget_choose (&b);
    const guint accepted = kept_of (k, p);
    const double t = 4500.0 * k + 5500.0 * (1 + 0.1 * k);
    llm_spec_budget_observe (&b, k, accepted, (gint64) t, (gint64) (4500.0 * k));
    us += t;
    have += accepted + 1;
  }
  return 256 * 5500.0 / us;
}

/* A draft model that is never right, whose proposal after plain steps
 * first catches up on what they said (a prefill of up to 64 tokens, 900
 * us each, then 4000 us a proposal; a plain step 11000 us): once a probe
 * has shown what it costs, probes come no oftener than keeps them at 2%
 * of the plain steps' time. They came every 256 steps, however dear (2.4%
 * of the time on these costs, with the catch-up 6 steps long). */
/* A draft model that tells how sure it is drafts on while the chance
 * that everything so far is kept, times how often a proposal not drafted
 * yet is, pays for one more (what the widths' times say it adds), and
 * once it has told its confidence the planner's width is only the
 * ceiling: a plain step 10 ms, each proposal 3 ms more, so one more pays
 * at an expected 0.3 tokens. Proposals the draft gave 0.95 were always
 * kept, those it gave 0.1 three times in ten. */
START_TEST (test_budget_lets_a_confident_draft_stop_where_one_more_does_not_pay)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  for (guint w = 0; w <= 8; w++)
    for (guint i = 0; i < 4; i++)
      llm_spec_budget_observe (&b, w, w, 10000 + 3000 * w, 2500 * w);
  for (guint i = 0; i < 60; i++) {
    const float sure = 0.95f, unsure = 0.1f;
    llm_spec_budget_observe_confidence (&b, &sure, 1, 1);
    llm_spec_budget_observe_confidence (&b, &unsure, 1, i % 10 < 3);
  }
  LlmSpecConfidence c;
  llm_spec_budget_confidence (&b, &c);
  ck_assert_msg (c.accept[4] > 0.95 && fabs (c.accept[0] - 0.3) < 0.1, "%g %g", c.accept[4],
      c.accept[0]);
  ck_assert_msg (fabs (c.min_gain[1] - 0.3) < 0.01 && fabs (c.min_gain[7] - 0.3) < 0.01,
      "%g %g", c.min_gain[1], c.min_gain[7]);
  /* Half the proposals seen were sure ones: one not drafted yet is kept
   * about 0.65 of the time. */
  ck_assert_msg (fabs (c.expect - 0.65) < 0.06, "%g", c.expect);
  double chance = 1.0;
  ck_assert (llm_spec_confidence_draft_on (&c, 1, 0.95f, &chance));
  ck_assert (llm_spec_confidence_draft_on (&c, 2, 0.9f, &chance));
  /* An unsure one after them: 0.3 x 0.65 < 0.3. */
  ck_assert (!llm_spec_confidence_draft_on (&c, 3, 0.1f, &chance));
  chance = 1.0;
  ck_assert (!llm_spec_confidence_draft_on (&c, 1, 0.15f, &chance));
  /* The width a drafting step asks for is the ceiling. */
  ck_assert_uint_eq (llm_spec_budget_choose (&b), 8);
  /* Where a further proposal costs a plain step, none pays. */
  LlmSpecBudget dear;
  llm_spec_budget_init (&dear, 4, FALSE);
  for (guint w = 0; w <= 4; w++)
    for (guint i = 0; i < 4; i++)
      llm_spec_budget_observe (&dear, w, w, 10000 + 10000 * w, 9000 * w);
  llm_spec_budget_confidence (&dear, &c);
  chance = 1.0;
  ck_assert (!llm_spec_confidence_draft_on (&c, 1, 0.99f, &chance));
}
END_TEST

START_TEST (test_budget_probes_as_rarely_as_their_cost_asks)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 8, FALSE);
  guint backlog = 0, last_probe = 0, probes = 0;
  double plain_us = 0, probe_extra_us = 0;
  for (guint step = 1; step <= 8192; step++) {
    const guint k = llm_spec_budget_choose (&b);
    double draft = 0;
    if (k > 0) {
      draft = MIN (backlog, 64u) * 900.0 + 4000.0 * k;
      backlog = 0;
    }
    const double t = draft + 11000.0 * (1 + 0.05 * k);
    llm_spec_budget_observe (&b, k, 0, (gint64) t, (gint64) draft);
    backlog++;
    if (k == 0) {
      plain_us += t;
      continue;
    }
    probe_extra_us += t - 11000.0;
    /* From the fourth probe on, its cost is its own average. */
    if (++probes > 4)
      ck_assert_msg ((step - last_probe) * 11000.0 * 0.02 >= 0.9 * (t - 11000.0),
          "probe at step %u, %u steps after the last, costs %.0f us more than a plain step",
          step, step - last_probe, t - 11000.0);
    last_probe = step;
  }
  ck_assert_msg (probe_extra_us <= 0.025 * plain_us, "probes cost %.1f%% of the plain time",
      100.0 * probe_extra_us / plain_us);
}
END_TEST

START_TEST (test_budget_weighs_what_drafting_costs)
{
  /* Measured: 0.984x on average, 0.980 at worst; 0.961 and 0.929 with
   * either the drafting not weighed apart or the first plain steps not
   * timed (on the widened stories260K, 0.87-0.89x plain: a first
   * verification accepted whole sent it on to 5 and 6 proposals). */
  double mean = 0, worst = G_MAXDOUBLE;
  for (guint64 seed = 1; seed <= 8; seed++) {
    const double x = drafting_costs_forwards (seed, 0.55);
    mean += x / 8;
    worst = MIN (worst, x);
  }
  g_print ("drafting at 0.8 of a step a proposal: %.3fx plain on average, %.3fx at worst\n",
      mean, worst);
  ck_assert_msg (mean >= 0.975 && worst >= 0.95, "%.3fx plain on average, %.3fx at worst", mean,
      worst);
}
END_TEST

/* The planner on real text: TinyStories-656K's greedy continuations of
 * the benchmark workloads (tools/spec-workloads; its widenings to 246M's
 * shape compute the same within rounding, so their greedy text leaves
 * this one where two picks are close: the Q8_0 widening's caption text
 * from its 10th token), drafted by prompt lookup as llmdraft's
 * defaults do, each step costing what a step checking that many
 * proposals took on the widened model (Q4_0 and F16: medians on Zen 3,
 * plain AVX2; Q8_0: medians of all steps of each width on Zen 5,
 * AVX-512, the three workloads at fixed lengths 1 to 8; F16 again on Zen
 * 5, AVX-512, the median of three runs' step_us_by_width on caption
 * (gst-llm-bench --spec ngram --json), where 1 to 4 proposals cost a
 * plain step and 5 cost 1.3 of one; two threads),
 * within +-10% drawn from a seeded sequence. Each length's
 * tokens per second are replayed from the text alone, so the comparison
 * is exact where the machine's are noisy (runs of the same benchmark
 * agree to 5-10% there); 8 jitter sequences average out how one sequence
 * happens to favour a length. The planner must come near the length that
 * proved best in hindsight, which differs by workload and weight type (1
 * to 8 here), without knowing it. */
#define REPLAY_GEN 256
#define REPLAY_SEEDS 8
static const double replay_cost_us[4][9] = {
  { 6100, 6800, 8500, 10600, 12100, 15200, 18300, 18700, 20200 },     /* Q4_0 */
  { 16100, 15700, 18900, 20200, 20300, 22200, 28500, 29300, 31500 },  /* F16 */
  { 4622, 5516, 5785, 6033, 6504, 7029, 7282, 7499, 7824 },           /* Q8_0 */
  { 7880, 7970, 7730, 8030, 8410, 10120, 10970, 11650, 12690 },     /* F16, Zen 5 */
};

/* Steps of a machine whose speed drifts (replay): this much
 * slower in every other run of a given number of steps. */
#define REPLAY_SLOW 1.6

/* Tokens per microsecond of decoding @gen after @prompt with budget @b,
 * the step times' jitter drawn from @seed; with @drift, every step of the
 * 2nd, 4th, ... run of @drift steps REPLAY_SLOW times slower. */
static double
replay (LlmSpecBudget *b, const GArray *prompt, const gint32 *gen,
    const double *cost_us, guint64 seed, guint drift)
{
  g_autoptr (LlmNgramDraft) d = llm_ngram_draft_new (1, 4, 4096);
  llm_ngram_draft_add (d, (const gint32 *) prompt->data, prompt->len);
  llm_ngram_draft_add (d, gen, 1);
  llm_test_rng_seed (seed);
  double us = 0;
  for (guint have = 1, step = 0; have < REPLAY_GEN; step++) {
    gint32 draft[LLM_SPEC_BUDGET_MAX];
    llm_spec_budget_set_match (b, llm_ngram_draft_match (d));
    const guint k = llm_spec_budget_choose (b);
    /* As llm_spec_step: a step checking nothing still asks for the free
     * guess (llm_drafter_guess). */
    const guint m = llm_ngram_draft_propose (d, MAX (k, 1), draft);
    if (k == 0 && m > 0)
      llm_spec_budget_observe_guess (b, draft[0] == gen[have]);
    guint a = 0;
    while (k > 0 && a < m && have + a < REPLAY_GEN && draft[a] == gen[have + a])
      a++;
    const double pace = drift > 0 && step / drift % 2 == 1 ? REPLAY_SLOW : 1.0;
    const double t = pace * cost_us[k > 0 ? MIN (m, 8) : 0]
        * (0.9 + 0.2 * ((llm_test_rng_next () >> 11) * 0x1.0p-53));
    us += t;
    llm_spec_budget_observe (b, k > 0 ? m : 0, a, (gint64) t, 0);
    const guint n_out = MIN (a + 1, REPLAY_GEN - have);
    llm_ngram_draft_add (d, gen + have, n_out);
    have += n_out;
  }
  return REPLAY_GEN / us;
}

/* The prompt of workload @name (tools/spec-workloads) into @prompt and
 * TinyStories-656K's greedy response to it into @gen (REPLAY_GEN ids),
 * through @e. */
static void
replay_text (LlmModel *m, LlmEngine *e, const char *name, GArray *prompt, gint32 *gen)
{
  const LlmKvConfig kv = { .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL,
    .context_length = 512 };
  g_autofree char *rel = g_strdup_printf ("../../tools/spec-workloads/%s.txt", name);
  g_autofree char *path = llm_test_data_path (rel);
  g_autofree char *text = NULL;
  gsize len;
  ck_assert (g_file_get_contents (path, &text, &len, NULL));
  llm_tokenizer_encode (llm_model_tokenizer (m), text, (gssize) len, TRUE, FALSE, TRUE, prompt);
  g_autoptr (LlmSession) s = new_session (e, &kv, 1.0f);
  GError *error = NULL;
  ck_assert (llm_session_prefill (s, (const gint32 *) prompt->data, prompt->len, &gen[0],
          &error));
  for (guint i = 1; i < REPLAY_GEN; i++)
    ck_assert (llm_session_step (s, gen[i - 1], &gen[i], &error));
}

/* One replay of a response with budget @b (its text, drafter and step
 * costs in @ctx), the step times' jitter drawn from @seed: tokens per
 * microsecond. */
typedef double (*ReplayFn) (LlmSpecBudget *b, gconstpointer ctx, guint64 seed);

/* The dynamic planner against the fixed length that was best with each
 * of REPLAY_SEEDS jitter sequences, replayed by @fn: its mean rate over
 * the best one's, and (where not NULL) the worst sequence's (@worst), the
 * last best length (@best_k) and the dynamic planner's mean speed over
 * plain decoding's (@of_plain), a plain step taking @plain_us. */
static double
replay_of_best (ReplayFn fn, gconstpointer ctx, double plain_us, double *worst, guint *best_k,
    double *of_plain)
{
  double of_best = 0, worst_of_best = G_MAXDOUBLE, plain = 0;
  guint k_best = 0;
  for (guint64 seed = 1; seed <= REPLAY_SEEDS; seed++) {
    double best = 0;
    for (guint k = 1; k <= 8; k++) {
      LlmSpecBudget b;
      llm_spec_budget_init (&b, k, TRUE);
      const double r = fn (&b, ctx, seed);
      if (r > best) {
        best = r;
        k_best = k;
      }
    }
    LlmSpecBudget b;
    llm_spec_budget_init (&b, 8, FALSE);
    const double dynamic = fn (&b, ctx, seed);
    of_best += dynamic / best / REPLAY_SEEDS;
    worst_of_best = MIN (worst_of_best, dynamic / best);
    plain += dynamic * plain_us / REPLAY_SEEDS;
  }
  if (worst != NULL)
    *worst = worst_of_best;
  if (best_k != NULL)
    *best_k = k_best;
  if (of_plain != NULL)
    *of_plain = plain;
  return of_best;
}

/* A prompt-lookup replay (replay ()'s arguments). */
typedef struct {
  const GArray *prompt;
  const gint32 *gen;
  const double *cost_us;
  guint drift;
} LookupReplay;

static double
lookup_replay (LlmSpecBudget *b, gconstpointer ctx, guint64 seed)
{
  const LookupReplay *r = ctx;
  return replay (b, r->prompt, r->gen, r->cost_us, seed, r->drift);
}

/* A model drafter replayed without its models: what the draft model
 * proposes at each point of its target's greedy response
 * (tests/data/spec, written by gst-llm-bench --spec-draft-table). */
typedef struct {
  GArray *prompt;
  gint32 gen[REPLAY_GEN];
  gint32 next[REPLAY_GEN][8];  /* the draft's greedy tokens after gen[0..p] */
  float next_p[REPLAY_GEN][8]; /* the probability the draft gave each */
} DraftTable;

static DraftTable *
draft_table_load (const char *name)
{
  g_autofree char *rel = g_strdup_printf ("spec/%s.txt", name);
  g_autofree char *path = llm_test_data_path (rel);
  g_autofree char *text = NULL;
  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  ck_assert_uint_ge (g_strv_length (lines), 2 + REPLAY_GEN);
  DraftTable *t = g_new0 (DraftTable, 1);
  t->prompt = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_auto (GStrv) prompt = g_strsplit (lines[0], " ", -1);
  for (guint i = 0; prompt[i] != NULL; i++) {
    const gint32 id = (gint32) g_ascii_strtoll (prompt[i], NULL, 10);
    g_array_append_val (t->prompt, id);
  }
  g_auto (GStrv) gen = g_strsplit (lines[1], " ", -1);
  ck_assert_uint_ge (g_strv_length (gen), REPLAY_GEN);
  for (guint i = 0; i < REPLAY_GEN; i++)
    t->gen[i] = (gint32) g_ascii_strtoll (gen[i], NULL, 10);
  for (guint p = 0; p < REPLAY_GEN; p++) {
    g_auto (GStrv) next = g_strsplit (lines[2 + p], " ", -1);
    ck_assert_uint_eq (g_strv_length (next), 8);
    for (guint k = 0; k < 8; k++) {
      char *colon = NULL;
      t->next[p][k] = (gint32) g_ascii_strtoll (next[k], &colon, 10);
      ck_assert (*colon == ':');
      t->next_p[p][k] = (float) g_ascii_strtod (colon + 1, NULL);
    }
  }
  return t;
}

static void
draft_table_free (DraftTable *t)
{
  g_array_unref (t->prompt);
  g_free (t);
}

/* What a step costs with a model drafter, as measured on Zen 5 (two
 * threads, AVX-512): 246M F16 widened from TinyStories-656K as the
 * target, its Q4_0 copy drafting. A plain step, a row of the
 * verification, a forward of the draft a proposal (the first one's also
 * feeds what the last verdict confirmed), and a token of the catch-up a
 * proposal feeds first after steps that drafted nothing. */
#define MODEL_STEP_US 7600.0
#define MODEL_ROW_US 150.0
#define MODEL_DRAFT_US 2450.0
#define MODEL_CATCH_UP_US 650.0

/* Tokens per microsecond of the response of @t with budget @b (as
 * llm_spec_step runs it with a model drafter, catching up at most 64
 * tokens), jitter from @seed. */
static double
model_replay (LlmSpecBudget *b, gconstpointer ctx, guint64 seed)
{
  const DraftTable *t = ctx;
  llm_test_rng_seed (seed);
  double us = 0;
  guint idle = 0;
  for (guint have = 1; have < REPLAY_GEN;) {
    llm_spec_budget_set_match (b, 0);
    guint k = MIN (llm_spec_budget_choose (b), MIN (8, REPLAY_GEN - have));
    /* As llm_spec_step drafts with a dynamic budget: proposal by
     * proposal while the draft is sure enough. */
    if (!b->fixed && k > 0) {
      LlmSpecConfidence conf;
      llm_spec_budget_confidence (b, &conf);
      double chance = 1.0;
      guint drafted = 1;
      while (drafted < k && llm_spec_confidence_draft_on (&conf, drafted,
              t->next_p[have - 1][drafted - 1], &chance))
        drafted++;
      k = drafted;
    }
    guint a = 0;
    while (a < k && t->next[have - 1][a] == t->gen[have + a])
      a++;
    const double jitter = 0.9 + 0.2 * ((llm_test_rng_next () >> 11) * 0x1.0p-53);
    const double draft = k > 0 ? MODEL_DRAFT_US * k + MODEL_CATCH_UP_US * MIN (idle, 64) : 0;
    const double took = jitter * (MODEL_STEP_US + MODEL_ROW_US * k) + draft;
    us += took;
    llm_spec_budget_observe (b, k, a, (gint64) took, (gint64) draft);
    if (!b->fixed)
      llm_spec_budget_observe_confidence (b, t->next_p[have - 1], k, a);
    idle = k > 0 ? 0 : idle + 1;
    have += MIN (a + 1, REPLAY_GEN - have);
  }
  return REPLAY_GEN / us;
}

/* The planner with a model drafter whose proposals are right 0.8 of the
 * time, position after position, each costing a third of a plain step
 * to draft: fixed lengths of 2 and 3 were best (1.4-1.5x plain), one and
 * five or more a few percent worse. The draft's probabilities say much
 * more than the position does: proposals it gave 0.8 or more were kept
 * every time, under 0.2 half the time. Drafting on while the chance that
 * all so far are kept pays for one more (llm_spec_confidence_draft_on):
 * 1.532x plain, 1.049 of the best fixed length (1.02-1.09 by workload),
 * 0.999 for the worst jitter sequence. By the position's acceptance
 * alone, the width chosen before drafting: 1.417x, 0.970, 0.915 (before
 * widths between two measured ones were priced on the line between
 * them, 1.412x and 0.966; before probes' catch-up was kept out of the
 * costs, 1.397x, 0.956 and 0.686, one sequence of transcript having
 * stopped drafting for good after 25 steps). On the machine (Zen 5,
 * gst-llm-bench --spec model, these models, two runs of each build
 * taking turns): 0.950 of the best fixed length by position, 1.008 by
 * confidence. */
START_TEST (test_budget_with_a_model_drafter_replayed)
{
  static const char *const ws[] = { "caption", "story", "transcript" };
  double of_best = 0, of_plain = 0, worst_of_best = G_MAXDOUBLE;
  for (guint w = 0; w < G_N_ELEMENTS (ws); w++) {
    DraftTable *t = draft_table_load (ws[w]);
    double plain_mean, worst;
    guint best_k;
    const double best_mean = replay_of_best (model_replay, t, MODEL_STEP_US, &worst, &best_k,
        &plain_mean);
    g_print ("model drafter replayed, %s: dynamic %.3fx plain, %.3f of the best fixed length "
        "(%u), %.3f at worst\n", ws[w], plain_mean, best_mean, best_k, worst);
    worst_of_best = MIN (worst_of_best, worst);
    of_best += best_mean / G_N_ELEMENTS (ws);
    of_plain += plain_mean / G_N_ELEMENTS (ws);
    draft_table_free (t);
  }
  g_print ("model drafter replayed: dynamic %.3fx plain, %.3f of the best fixed length\n",
      of_plain, of_best);
  ck_assert_msg (of_plain >= 1.45 && of_best >= 1.02 && worst_of_best >= 0.97,
      "dynamic %.3fx plain, %.3f of the best fixed length, %.3f at worst", of_plain, of_best,
      worst_of_best);
}
END_TEST

static const char *const replay_workloads[] = { "story", "caption", "transcript" };

START_TEST (test_budget_on_real_text_is_near_the_best_fixed_length)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  double all_of_best = 0;
  for (guint w = 0; w < G_N_ELEMENTS (replay_workloads); w++) {
    g_autoptr (GArray) prompt = g_array_new (FALSE, FALSE, sizeof (gint32));
    gint32 gen[REPLAY_GEN];
    replay_text (m, e, replay_workloads[w], prompt, gen);
    /* Over 8 jitter sequences, against the fixed length that was best
     * with each. */
    for (guint c = 0; c < G_N_ELEMENTS (replay_cost_us); c++) {
      double worst_of_best, of_plain;
      guint best_k;
      const LookupReplay r = { prompt, gen, replay_cost_us[c], 0 };
      const double of_best = replay_of_best (lookup_replay, &r, replay_cost_us[c][0],
          &worst_of_best, &best_k, &of_plain);
      /* Measured: means 0.988-1.049 of the best fixed length (all twelve
       * 1.005), the worst sequence 0.972; 1.4-2.1x plain. Before widths
       * between two measured ones were priced on the line between them,
       * 0.976-1.044 (1.002), the worst 0.951; Zen 5's F16 costs, flat to
       * 4 proposals and 1.3 steps from 5, were the hardest: 0.977 on
       * caption and 0.976 on transcript (now 0.995 and 0.992), the
       * planner taking 6 or 7 where 4 paid more. Before long
       * matches' first proposals started from 0.8 and before the pace,
       * 0.976-1.029 (1.004), the worst 0.952. Before the
       * planner weighed how much context each lookup matched,
       * 0.978-1.026 (0.999), the worst 0.952. With the first two cost
       * tables alone: 1.008 now, 1.006 before that; before the planner kept
       * acceptance apart after a full accept and after a miss,
       * 0.966-1.026 (1.000); before it weighed its prior slope against
       * one measured width, 0.965-1.019 (0.989). */
      ck_assert_msg (of_best >= 0.94 && worst_of_best >= 0.90 && of_plain >= 1.25,
          "%s, costs %u: dynamic %.3fx plain, %.3f of the best fixed length (%u) on average, "
          "%.3f at worst", replay_workloads[w], c, of_plain, of_best, best_k, worst_of_best);
      g_print ("replay %s, costs %u: dynamic %.3fx plain, %.3f of the best fixed length "
          "(%u), %.3f at worst\n", replay_workloads[w], c, of_plain, of_best, best_k,
          worst_of_best);
      all_of_best += of_best / (G_N_ELEMENTS (replay_workloads) * G_N_ELEMENTS (replay_cost_us));
    }
  }
  g_print ("replay: %.3f of the best fixed length on average\n", all_of_best);
  ck_assert_msg (all_of_best >= 0.99, "%.3f of the best fixed length on average", all_of_best);
}
END_TEST

/* The same text and step costs on a machine whose speed changes while
 * it decodes (another process, other streams in the engine, memory
 * shared with other tenants): every step REPLAY_SLOW times slower in
 * alternate runs of 10 to 80 steps. The planner must not mistake the
 * machine's pace for what a width costs. */
START_TEST (test_budget_follows_a_machine_whose_speed_drifts)
{
  static const guint drifts[] = { 10, 20, 40, 80 };
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  double all_of_best = 0, worst = G_MAXDOUBLE;
  for (guint w = 0; w < G_N_ELEMENTS (replay_workloads); w++) {
    g_autoptr (GArray) prompt = g_array_new (FALSE, FALSE, sizeof (gint32));
    gint32 gen[REPLAY_GEN];
    replay_text (m, e, replay_workloads[w], prompt, gen);
    for (guint c = 0; c < G_N_ELEMENTS (replay_cost_us); c++) {
      for (guint d = 0; d < G_N_ELEMENTS (drifts); d++) {
        const LookupReplay r = { prompt, gen, replay_cost_us[c], drifts[d] };
        const double of_best = replay_of_best (lookup_replay, &r, replay_cost_us[c][0], NULL,
            NULL, NULL);
        worst = MIN (worst, of_best);
        all_of_best += of_best
            / (G_N_ELEMENTS (replay_workloads) * G_N_ELEMENTS (replay_cost_us)
            * G_N_ELEMENTS (drifts));
      }
    }
  }
  /* Measured: 0.991 on average, 0.952 at worst (0.989 and 0.945
   * before widths between two measured ones were priced on the line
   * between them; the first three cost tables alone then: 0.994 and
   * 0.953). Before the planner
   * kept a pace apart from the widths' costs, 0.971 and 0.897; with the
   * pace but before long matches' first proposals started from 0.8,
   * 0.981 and 0.911. */
  g_print ("replay, speed drifting: %.3f of the best fixed length on average, %.3f at worst\n",
      all_of_best, worst);
  ck_assert_msg (all_of_best >= 0.985 && worst >= 0.93,
      "%.3f of the best fixed length on average, %.3f at worst", all_of_best, worst);
}
END_TEST

START_TEST (test_budget_fixed_always_asks_for_the_maximum)
{
  LlmSpecBudget b;
  llm_spec_budget_init (&b, 5, TRUE);
  ck_assert_double_eq (settle (&b, 0.0, 50), 5.0);
  llm_spec_budget_configure (&b, 0, FALSE);
  ck_assert_uint_eq (llm_spec_budget_choose (&b), 0);
}
END_TEST

static Suite *
spec_suite (void)
{
  Suite *s = suite_create ("spec");
  TCase *ngram = tcase_create ("ngram");
  tcase_add_test (ngram, test_ngram_proposes_what_followed_the_latest_match);
  tcase_add_test (ngram, test_ngram_matches_a_scan_of_what_it_holds);
  tcase_add_test (ngram, test_ngram_rejects_bad_sizes);
  tcase_add_test (ngram, test_lookup_bound_takes_the_best_occurrence_and_length);
  suite_add_tcase (s, ngram);

  TCase *verify = tcase_create ("verify");
  tcase_set_timeout (verify, 0);
  tcase_add_test (verify, test_verify_is_lossless_stories260k);
  tcase_add_test (verify, test_verify_is_lossless_tinystories_q8_0);
  tcase_add_test (verify, test_verify_is_lossless_stories260k_q4_0);
  tcase_add_test (verify, test_verify_is_lossless_random_qwen2);
  tcase_add_test (verify, test_verify_is_lossless_random_qwen3);
  tcase_add_test (verify, test_verify_is_lossless_when_a_window_evicts);
  tcase_add_test (verify, test_a_seed_gives_plain_decodings_tokens_whatever_is_drafted);
  tcase_add_test (verify, test_taking_back_a_verifications_tokens_samples_on_as_plain_steps);
  tcase_add_test (verify, test_model_drafter_of_the_target_itself_is_always_right);
  tcase_add_test (verify, test_layerskip_refuses_skipping_every_layer);
  tcase_add_test (verify, test_layer_search_climbs_to_the_cheap_layers);
  tcase_add_test (verify, test_drafting_ahead_is_lossless_stories260k);
  tcase_add_test (verify, test_drafting_ahead_is_lossless_random_qwen2);
  tcase_add_test (verify, test_drafts_ahead_are_used_when_right_and_discarded_when_wrong);
  tcase_add_test (verify, test_drafting_ahead_samples_what_drafting_when_asked_samples);
  suite_add_tcase (s, verify);

  TCase *budget = tcase_create ("budget");
  tcase_add_test (budget, test_budget_stops_drafting_what_is_never_accepted);
  tcase_add_test (budget, test_budget_reports_a_width_only_probes_took);
  tcase_add_test (budget, test_budget_drafts_long_when_it_pays);
  tcase_add_test (budget, test_budget_drafts_by_how_much_context_the_lookup_matched);
  tcase_add_test (budget, test_budget_does_not_take_unmeasured_proposals_for_free);
  tcase_add_test (budget, test_budget_prices_a_width_between_two_measured_ones);
  tcase_add_test (budget, test_budget_notices_drafts_that_start_to_succeed);
  tcase_add_test (budget, test_budget_fixed_always_asks_for_the_maximum);
  tcase_add_test (budget, test_budget_is_not_put_off_by_slow_steps);
  tcase_add_test (budget, test_budget_is_not_put_off_by_an_unlucky_start);
  tcase_add_test (budget, test_budget_on_real_text_is_near_the_best_fixed_length);
  tcase_add_test (budget, test_budget_follows_a_machine_whose_speed_drifts);
  tcase_add_test (budget, test_budget_with_a_model_drafter_replayed);
  tcase_add_test (budget, test_budget_probes_as_rarely_as_their_cost_asks);
  tcase_add_test (budget, test_budget_weighs_what_drafting_costs);
  tcase_add_test (budget, test_budget_learns_from_free_guesses_while_idle);
  tcase_add_test (budget, test_budget_keeps_drafting_when_one_state_has_only_missed);
  tcase_add_test (budget, test_budget_drafts_with_a_model_that_is_often_right);
  tcase_add_test (budget, test_budget_lets_a_confident_draft_stop_where_one_more_does_not_pay);
  suite_add_tcase (s, budget);

  TCase *draw = tcase_create ("draw");
  tcase_add_test (draw, test_sampling_against_a_draft_keeps_every_probability);
  tcase_add_test (draw, test_greedy_against_a_draft_is_the_argmax);
  suite_add_tcase (s, draw);
  return s;
}

LLM_TEST_MAIN (spec_suite)
