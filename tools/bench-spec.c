/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Speculative decoding against plain decoding (gst-llm-bench --spec): the
 * same greedy response to each workload's prompt, decoded plainly, with
 * the dynamic budget and with each fixed draft length, the variants
 * taking turns within every round (so a machine that slows down slows all
 * alike); figures are medians over the rounds. Every variant's tokens
 * must equal plain decoding's, or the run fails: the check that the
 * speed-up changed nothing. Decode time runs from the first token
 * (sampled after the prompt, untimed) to the last, llmspecverify's loop
 * without the elements. */
#include "bench.h"

#include <string.h>

#include "model-private.h"
#include "spec-step.h"

/* One variant's decode of @s->n_gen tokens after @prompt on a new
 * session of @e; @ids gets the tokens. */
static gboolean
decode_once (LlmEngine *e, LlmEngine *draft, const BenchSpecSetting *s, const gint32 *prompt,
    guint n_prompt, gint fixed_k, gint32 *ids, double *ms, LlmSpecStats *stats, GError **error)
{
  LlmSessionConfig cfg = { .kv = { .type = s->kv_type, .policy = LLM_KV_POLICY_FULL,
      .context_length = n_prompt + s->n_gen + LLM_SPEC_BUDGET_MAX + 2 } };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  g_autoptr (LlmSession) session = llm_session_new (e, &cfg, error);
  if (session == NULL)
    return FALSE;
  if (!llm_session_prefill (session, prompt, n_prompt, &ids[0], error))
    return FALSE;

  g_autoptr (LlmDrafter) drafter = NULL;
  LlmSpecBudget budget;
  if (fixed_k != BENCH_SPEC_PLAIN) {
    if (g_str_has_prefix (s->method, "layerskip"))
      drafter = llm_drafter_new_layerskip (NULL, 0, strcmp (s->method, "layerskip") == 0);
    else if (draft != NULL)
      drafter = llm_drafter_new_model (draft, 4096, s->draft_p_min, error);
    else
      drafter = llm_drafter_new_ngram (s->ngram_min, s->ngram_max, s->ngram_window, error);
    if (drafter == NULL)
      return FALSE;
    llm_drafter_set_ahead (drafter, s->draft_ahead);
    llm_drafter_begin (drafter, session, ids[0]);
  }
  llm_spec_budget_init (&budget, fixed_k >= 0 ? (guint) fixed_k : s->draft_max, fixed_k >= 0);
  *stats = (LlmSpecStats) { 0 };

  const double t0 = bench_now_ms ();
  guint have = 1;
  while (have < s->n_gen) {
    gint32 out[LLM_SPEC_BUDGET_MAX + 1];
    guint n_out;
    if (!llm_spec_step (session, drafter, &budget, ids[have - 1], s->n_gen - have, out, &n_out,
            stats, error))
      return FALSE;
    for (guint j = 0; j < n_out && have < s->n_gen; j++)
      ids[have++] = out[j];
  }
  *ms = bench_now_ms () - t0;
  return TRUE;
}

/* Timed steps of each width per round (BenchSpecBound.width_us). */
#define WIDTH_REPS 4

/* One round of timing a step that checks w = 0 .. @max proposals (the
 * response's own next tokens, so the rows are what a verification
 * sees), after @prompt on @session, which every step is cut back to;
 * the widths take turns. Step r of width w goes to
 * @us[w * @per_width + @at + r]. */
static gboolean
time_widths (LlmSession *session, guint n_prompt, const gint32 *gen, guint n_gen, guint max,
    double *us, guint per_width, guint at, GError **error)
{
  for (guint r = 0; r < WIDTH_REPS; r++)
    for (guint w = 0; w <= max; w++) {
      gint32 ids[LLM_SPEC_BUDGET_MAX + 1], out[LLM_SPEC_BUDGET_MAX + 1];
      for (guint i = 0; i <= w; i++)
        ids[i] = gen[MIN (i, n_gen - 1)];
      guint n_out;
      const gint64 t0 = g_get_monotonic_time ();
      const gboolean ok = w == 0 ? llm_session_step (session, ids[0], out, error)
          : llm_session_verify (session, ids, w + 1, out, &n_out, error);
      if (!ok)
        return FALSE;
      us[(gsize) w * per_width + at + r] = (double) (g_get_monotonic_time () - t0);
      llm_session_truncate (session, n_prompt);
    }
  return TRUE;
}

/* @b from the width timings @us (@per_width each) and the response. */
static void
finish_bound (BenchSpecBound *b, const BenchSpecSetting *s, const gint32 *prompt, guint n_prompt,
    const gint32 *gen, double *us, guint per_width)
{
  guint64 lengths[LLM_SPEC_BUDGET_MAX + 1];
  b->draft_max = s->draft_max;
  b->steps = bench_spec_lookup_best (prompt, n_prompt, gen, s->n_gen, s->ngram_min,
      s->draft_max, lengths);
  double bound_us = 0;
  b->verifications = b->accepted = 0;
  for (guint w = 0; w <= s->draft_max; w++) {
    b->width_us[w] = bench_median_sort (us + (gsize) w * per_width, per_width);
    bound_us += lengths[w] * b->width_us[w];
    if (w > 0) {
      b->verifications += lengths[w];
      b->accepted += w * lengths[w];
    }
  }
  /* The tokens after the first, as decode_once times them. */
  const double tokens = s->n_gen - 1;
  b->tokens_per_s = bound_us > 0 ? tokens / (bound_us / 1e6) : 0;
  b->x_plain = bound_us > 0 ? tokens * b->width_us[0] / bound_us : 0;
}

gboolean
bench_spec_run (LlmModel *model, const BenchSpecSetting *s, const gint32 *prompt,
    guint n_prompt, BenchSpecResult *results, BenchSpecBound *bound, GError **error)
{
  g_autoptr (LlmEngine) e = bench_engine_new (model, s->n_threads, error);
  if (e == NULL)
    return FALSE;
  g_autoptr (LlmEngine) draft = s->draft_model
      ? bench_engine_new (s->draft_model, s->n_threads, error) : NULL;
  if (s->draft_model && draft == NULL)
    return FALSE;
  const guint n_var = s->n_variants;
  g_autofree gint32 *plain = g_new (gint32, s->n_gen);
  g_autofree gint32 *ids = g_new (gint32, s->n_gen);
  g_autofree double *ms = g_new (double, (gsize) n_var * s->rounds);
  LlmSpecStats stats;

  /* Untimed: touches the weights and starts the workers; with a draft
   * model, a speculative decode touches its weights too, or the first
   * variant timed (the dynamic one) would pay for that alone. */
  double unused;
  if (!decode_once (e, draft, s, prompt, n_prompt, BENCH_SPEC_PLAIN, plain, &unused, &stats, error))
    return FALSE;
  if (draft != NULL && !decode_once (e, draft, s, prompt, n_prompt, 1, ids, &unused, &stats, error))
    return FALSE;

  if (s->draft_table != NULL && !bench_spec_draft_table (draft, s->kv_type, prompt, n_prompt,
          plain, s->n_gen, s->draft_table, error))
    return FALSE;

  /* The bound's step costs: a session holding the prompt, timed in every
   * round beside the variants. */
  g_autoptr (LlmSession) widths = NULL;
  const guint per_width = s->rounds * WIDTH_REPS;
  g_autofree double *width_us = NULL;
  if (bound != NULL) {
    g_return_val_if_fail (s->draft_max <= LLM_SPEC_BUDGET_MAX && s->n_gen > 0, FALSE);
    LlmSessionConfig cfg = { .kv = { .type = s->kv_type, .policy = LLM_KV_POLICY_FULL,
        .context_length = n_prompt + s->draft_max + 2 } };
    llm_sampler_params_init (&cfg.sampler);
    cfg.sampler.temperature = 0.0f;
    widths = llm_session_new (e, &cfg, error);
    if (widths == NULL || !llm_session_feed (widths, prompt, n_prompt, error))
      return FALSE;
    width_us = g_new (double, (gsize) (s->draft_max + 1) * per_width);
  }

  for (guint round = 0; round < s->rounds; round++) {
    for (guint v = 0; v < n_var; v++) {
      const gint k = s->variants[v];
      if (!decode_once (e, draft, s, prompt, n_prompt, k, ids, &ms[v * s->rounds + round], &stats,
              error))
        return FALSE;
      for (guint i = 0; i < s->n_gen; i++) {
        if (ids[i] != plain[i]) {
          g_set_error (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_CONFIG,
              "speculation changed the output: token %u is %d, plain decoding gives %d "
              "(draft length %d)", i, ids[i], plain[i], k);
          return FALSE;
        }
      }
      BenchSpecResult *r = &results[v];
      r->fixed_k = k;
      r->steps = stats.steps;
      r->drafted = stats.drafted;
      r->accepted = stats.accepted;
      r->verifications = stats.verifications;
      r->ahead_used = stats.ahead_used;
      r->ahead_discarded = stats.ahead_discarded;
      memcpy (r->lengths, stats.lengths, sizeof r->lengths);
    }
    if (bound != NULL && !time_widths (widths, n_prompt, plain, s->n_gen, s->draft_max, width_us,
            per_width, round * WIDTH_REPS, error))
      return FALSE;
  }
  if (bound != NULL)
    finish_bound (bound, s, prompt, n_prompt, plain, width_us, per_width);
  for (guint v = 0; v < n_var; v++) {
    results[v].ms = bench_median_sort (&ms[v * s->rounds], s->rounds);
    results[v].tokens_per_s = (s->n_gen - 1) / (results[v].ms / 1e3);
  }
  return TRUE;
}

gboolean
bench_spec_draft_table (LlmEngine *draft, LlmKvType kv_type, const gint32 *prompt,
    guint n_prompt, const gint32 *gen, guint n_gen, const char *path, GError **error)
{
  LlmSessionConfig cfg = { .kv = { .type = kv_type, .policy = LLM_KV_POLICY_FULL,
      .context_length = n_prompt + n_gen + BENCH_SPEC_TABLE_K } };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  g_autoptr (LlmSession) d = llm_session_new (draft, &cfg, error);
  if (d == NULL || !llm_session_feed (d, prompt, n_prompt, error))
    return FALSE;
  const guint32 n_vocab = llm_session_model (d)->hp.n_vocab;
  g_autoptr (GString) out = g_string_new (NULL);
  for (guint i = 0; i < n_prompt; i++)
    g_string_append_printf (out, "%s%d", i ? " " : "", prompt[i]);
  g_string_append_c (out, '\n');
  for (guint i = 0; i < n_gen; i++)
    g_string_append_printf (out, "%s%d", i ? " " : "", gen[i]);
  g_string_append_c (out, '\n');
  for (guint p = 0; p < n_gen; p++) {
    /* The response so far held; the draft's guesses after it taken back. */
    gint32 next;
    if (!llm_session_step (d, gen[p], &next, error))
      return FALSE;
    const guint held = llm_session_n_ids (d);
    for (guint k = 0; k < BENCH_SPEC_TABLE_K; k++) {
      g_string_append_printf (out, "%s%d:%.4f", k ? " " : "", next,
          llm_top_probability (llm_session_logits (d), n_vocab));
      if (k + 1 < BENCH_SPEC_TABLE_K && !llm_session_step (d, next, &next, error))
        return FALSE;
    }
    g_string_append_c (out, '\n');
    llm_session_truncate (d, held);
  }
  return g_file_set_contents (path, out->str, (gssize) out->len, error);
}
