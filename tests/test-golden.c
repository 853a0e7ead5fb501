/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine against llama.cpp's own outputs (tests/data/golden and
 * ../shared/testdata/golden; see their README). Teacher-forced along
 * llama.cpp's greedy ids, every step's full logit vector must agree within a
 * per-case tolerance, and where llama.cpp's top-1 margin is wider than twice
 * that tolerance our argmax must be its token. */
#include "llm-check.h"

#include <math.h>
#include <string.h>

#include "engine.h"
#include "model.h"
#include "session.h"
#include "cpu/matmul.h"
#include "model-private.h"

typedef struct {
  const char *name;       /* golden file stem */
  const char *model;      /* model path under testdata */
  gboolean bundled;       /* in tests/data, else only in ../shared/testdata */
  LlmKvType kv;
  double tol;             /* max |logit - llama.cpp|, optimised kernels */
  double ref_tol;         /* the same with the scalar reference kernels */
} GoldenCase;

/* Why each tolerance (measured worst differences in the suite's output):
 * - F32 weights, F32 KV cache: both sides compute in f32 and differ only by
 *   summation order: 1e-4 (measured 1e-5; llama.cpp itself is within 9e-6
 *   of a float64 recomputation here).
 * - F16 KV cache: we round where llama.cpp rounds (K, V stored as f16; the
 *   query rounded to f16 for Q.K; probabilities rounded to f16 for the V
 *   product); on TinyStories-656K every logit then agrees bit for bit, on
 *   stories260K (head size 8) the prompt's agree to 2.5e-4. llama.cpp's
 *   softmax uses its own vectorised exp, an ulp
 *   away from libm's; an ulp now and then flips an f16 rounding (1e-4 at a
 *   step), and the flips compound through the f16 cache over 64 steps: to
 *   4e-3 on stories260K with the AVX2 kernels (which sum matrix products in
 *   ggml's x86 order) and 1.2e-2 with the scalar reference; llama.cpp's own
 *   error against float64 there is 2.4e-2.
 * - F16 KV with flash attention: llama.cpp's CPU flash path accumulates V in
 *   f16 (its error vs float64: 2e-2); we accumulate in f32: 5e-2.
 * - Q8_0 weights: activations are quantized exactly as llama.cpp's x86 build
 *   does (127/amax, ties to even), so integer dot products agree.
 * - Q4_0 and Q8_0 weights: the AVX2 and AVX-512 kernels read the layouts
 *   prepared at load (kernels/cpu/q4_0x16.h, q8_0x16.h) and give the scalar
 *   reference's bits for any number of rows (so a batch equals its rows
 *   alone), no longer ggml's x86 order: they share the reference's
 *   tolerance. (Q8_0 in ggml's order had matched TinyStories-656K bit for
 *   bit; in the reference's it is 1.9e-6 away with an F32 cache and, through
 *   the f16 roundings that order flips, 0.17 and 0.107 with an F16 one,
 *   exactly where the scalar reference kernels are.)
 * - The scalar reference kernels sum in double, i.e. closer to float64 than
 *   llama.cpp is; on TinyStories-656K, which amplifies last-bit differences
 *   (llama.cpp vs float64: 0.37), they may be that far from llama.cpp. */
static const GoldenCase cases[] = {
  { "stories260K__once_upon_a_time__kv_f32", "models/stories260K.gguf", TRUE, LLM_KV_F32, 1e-4, 1e-4 },
  { "stories260K__once_upon_a_time", "models/stories260K.gguf", TRUE, LLM_KV_F16, 2e-2, 2e-2 },
  { "stories260K__once_upon_a_time__kv_f16_fa", "models/stories260K.gguf", TRUE, LLM_KV_F16, 5e-2, 5e-2 },
  { "stories260K__the_cat", "models/stories260K.gguf", TRUE, LLM_KV_F16, 2e-2, 2e-2 },
  { "TinyStories-656K-Q8_0__once_upon_a_time__kv_f32", "models/TinyStories-656K-Q8_0.gguf", TRUE, LLM_KV_F32, 1e-4, 0.4 },
  { "TinyStories-656K-Q8_0__once_upon_a_time", "models/TinyStories-656K-Q8_0.gguf", TRUE, LLM_KV_F16, 0.4, 0.4 },
  { "TinyStories-656K-Q8_0__the_cat", "models/TinyStories-656K-Q8_0.gguf", TRUE, LLM_KV_F16, 0.4, 0.4 },
  { "tiny-llama-f32__hello_world__kv_f32", "models/random/tiny-llama-f32.gguf", FALSE, LLM_KV_F32, 1e-4, 1e-4 },
  { "tiny-llama-f32__hello_world", "models/random/tiny-llama-f32.gguf", FALSE, LLM_KV_F16, 1e-3, 1e-3 },
  { "tiny-llama-f32__hello_world__kv_q8_0_fa", "models/random/tiny-llama-f32.gguf", FALSE, LLM_KV_Q8_0, 2e-2, 2e-2 },
  { "tiny-llama-f16__hello_world", "models/random/tiny-llama-f16.gguf", FALSE, LLM_KV_F16, 1e-3, 1e-3 },
  { "tiny-llama-q8_0__hello_world", "models/random/tiny-llama-q8_0.gguf", FALSE, LLM_KV_F16, 2e-2, 2e-2 },
  { "tiny-llama-q4_0__hello_world", "models/random/tiny-llama-q4_0.gguf", FALSE, LLM_KV_F16, 2e-2, 2e-2 },
};

typedef struct {
  char *prompt;
  GArray *prompt_ids;     /* gint32 */
  GArray *greedy_ids;     /* gint32 */
  GArray *margins;        /* double */
  guint n_vocab;
  char *greedy_text;
  GBytes *steps;          /* n_gen x n_vocab float32 */
} Golden;

/* The golden JSON is flat and machine-written: find "key": and read the
 * value that follows. */
static const char *
find_value (const char *json, const char *key)
{
  g_autofree char *pat = g_strdup_printf ("\"%s\":", key);
  const char *p = strstr (json, pat);
  ck_assert_msg (p != NULL, "golden JSON has no %s", key);
  p += strlen (pat);
  while (*p == ' ')
    p++;
  return p;
}

static GArray *
read_number_array (const char *json, const char *key, gboolean as_int)
{
  const char *p = find_value (json, key);
  ck_assert_int_eq (*p, '[');
  p++;
  GArray *a = g_array_new (FALSE, FALSE, as_int ? sizeof (gint32) : sizeof (double));
  while (*p && *p != ']') {
    char *end;
    double v = g_ascii_strtod (p, &end);
    ck_assert_msg (end != p, "bad number in %s", key);
    if (as_int) {
      gint32 i = (gint32) v;
      g_array_append_val (a, i);
    } else {
      g_array_append_val (a, v);
    }
    p = end;
    while (*p == ',' || *p == ' ')
      p++;
  }
  return a;
}

/* A JSON string value with the escapes the golden files use. */
static char *
read_string (const char *json, const char *key)
{
  const char *p = find_value (json, key);
  ck_assert_int_eq (*p, '"');
  GString *s = g_string_new (NULL);
  for (p++; *p && *p != '"'; p++) {
    if (*p != '\\') {
      g_string_append_c (s, *p);
      continue;
    }
    p++;
    switch (*p) {
      case 'n': g_string_append_c (s, '\n'); break;
      case 't': g_string_append_c (s, '\t'); break;
      case 'u': {
        char hex[5] = { p[1], p[2], p[3], p[4], 0 };
        g_string_append_unichar (s, (gunichar) strtoul (hex, NULL, 16));
        p += 4;
        break;
      }
      default: g_string_append_c (s, *p); break;
    }
  }
  return g_string_free (s, FALSE);
}

static char *
case_path (const GoldenCase *c, const char *relative)
{
  if (c->bundled)
    return llm_test_data_path (relative);
  return llm_test_shared_path (relative);
}

static gboolean
golden_load (const GoldenCase *c, Golden *g)
{
  g_autofree char *rel_json = g_strdup_printf ("golden/%s.json", c->name);
  g_autofree char *rel_steps = g_strdup_printf ("golden/%s.steps.f32", c->name);
  g_autofree char *json_path = case_path (c, rel_json);
  g_autofree char *steps_path = case_path (c, rel_steps);
  if (json_path == NULL || steps_path == NULL)
    return FALSE;
  g_autoptr (GBytes) json = llm_test_read_file (json_path);
  g_autofree char *text = g_strndup (g_bytes_get_data (json, NULL), g_bytes_get_size (json));
  g->prompt = read_string (text, "prompt");
  g->prompt_ids = read_number_array (text, "prompt_ids", TRUE);
  g->greedy_ids = read_number_array (text, "greedy_ids", TRUE);
  g->margins = read_number_array (text, "step_top1_margin", FALSE);
  g->greedy_text = read_string (text, "greedy_text");
  g->n_vocab = (guint) g_ascii_strtoull (find_value (text, "n_vocab"), NULL, 10);
  g->steps = llm_test_read_file (steps_path);
  ck_assert_uint_eq (g_bytes_get_size (g->steps),
      (gsize) g->greedy_ids->len * g->n_vocab * sizeof (float));
  return TRUE;
}

static void
golden_clear (Golden *g)
{
  g_free (g->prompt);
  g_array_free (g->prompt_ids, TRUE);
  g_array_free (g->greedy_ids, TRUE);
  g_array_free (g->margins, TRUE);
  g_free (g->greedy_text);
  g_bytes_unref (g->steps);
}

static LlmSeq *
new_context (LlmModel *m, LlmKvType kv_type, gboolean reference)
{
  LlmKvConfig kv = { .type = kv_type, .policy = LLM_KV_POLICY_FULL, .context_length = 512 };
  return llm_test_standalone_seq (m, &kv, 1, reference);
}

/* Teacher-forced comparison of every step; returns the largest difference. */
static double
compare_case (const GoldenCase *c, const Golden *g, LlmModel *m, gboolean reference, double tol)
{
  g_autoptr (LlmSeq) ctx = new_context (m, c->kv, reference);
  g_autoptr (GError) error = NULL;
  g_autofree float *logits = g_new (float, g->n_vocab);
  const float *steps = g_bytes_get_data (g->steps, NULL);
  double worst = 0;
  guint worst_step = 0;

  ck_assert_uint_eq (m->hp.n_vocab, g->n_vocab);
  for (guint s = 0; s < g->greedy_ids->len; s++) {
    gboolean ok;
    if (s == 0)
      ok = llm_seq_eval_tokens (ctx, (gint32 *) g->prompt_ids->data, g->prompt_ids->len, logits,
          FALSE, &error);
    else
      ok = llm_seq_eval_tokens (ctx, &g_array_index (g->greedy_ids, gint32, s - 1), 1, logits,
          FALSE, &error);
    ck_assert_msg (ok, "%s step %u: %s", c->name, s, error ? error->message : "");

    const float *ref = steps + (gsize) s * g->n_vocab;
    double d = 0;
    for (guint i = 0; i < g->n_vocab; i++)
      d = MAX (d, fabs ((double) logits[i] - ref[i]));
    if (d > worst) {
      worst = d;
      worst_step = s;
    }
    ck_assert_msg (d <= tol, "%s: step %u logits differ from llama.cpp by %g (tolerance %g)",
        c->name, s, d, tol);
    double margin = g_array_index (g->margins, double, s);
    if (margin > 2 * tol)
      ck_assert_msg ((gint32) llm_test_argmax (logits, g->n_vocab) == g_array_index (g->greedy_ids, gint32, s),
          "%s: step %u greedy id %u, llama.cpp %d (margin %g)", c->name, s,
          llm_test_argmax (logits, g->n_vocab), g_array_index (g->greedy_ids, gint32, s), margin);
  }
  g_print ("golden %s [%s kernels]: max |dlogit| %.3g at step %u (tolerance %g)\n", c->name,
      llm_engine_backend_name (llm_seq_engine (ctx)), worst, worst_step, tol);
  return worst;
}

static void
run_case (guint i, gboolean reference)
{
  const GoldenCase *c = &cases[i];
  Golden g = { 0 };
  if (!golden_load (c, &g))
    LLM_TEST_SKIP ("%s: ../shared/testdata/golden is not beside this checkout", c->name);
  g_autofree char *model_path = case_path (c, c->model);
  ck_assert_msg (model_path != NULL, "missing %s", c->model);

  g_autoptr (GError) error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (model_path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");

  /* (1) the prompt tokenizes to llama.cpp's ids */
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (m->tokenizer, g.prompt, -1, TRUE, TRUE, TRUE, ids);
  ck_assert_uint_eq (ids->len, g.prompt_ids->len);
  ck_assert_mem_eq (ids->data, g.prompt_ids->data, ids->len * sizeof (gint32));

  /* (2), (3) logits and greedy ids, teacher-forced */
  compare_case (c, &g, m, reference, reference ? c->ref_tol : c->tol);
  golden_clear (&g);
}

START_TEST (test_golden_logits_match_llama_cpp)
{
  run_case (_i, FALSE);
}
END_TEST

START_TEST (test_golden_logits_match_llama_cpp_on_reference_kernels)
{
  run_case (_i, TRUE);
}
END_TEST

START_TEST (test_greedy_story_reproduces_llama_cpp_text)
{
  g_autofree char *path = llm_test_data_path ("models/stories260K.gguf");
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");

  LlmSessionConfig cfg = { 0 };
  cfg.kv.type = LLM_KV_F16;
  cfg.kv.policy = LLM_KV_POLICY_FULL;
  cfg.kv.context_length = 512;
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  cfg.sampler.repeat_penalty = 1.0f;
  LlmEngineOptions eo;
  llm_engine_options_init (&eo);
  eo.n_threads = 2;
  g_autoptr (LlmEngine) engine = llm_engine_new (m, &eo, &error);
  ck_assert_msg (engine != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmSession) s = llm_session_new (engine, &cfg, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");

  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (m->tokenizer, "Once upon a time", -1, TRUE, TRUE, TRUE, ids);
  static const gint32 prompt[] = { 1, 403, 407, 261, 378 };
  ck_assert_uint_eq (ids->len, G_N_ELEMENTS (prompt));
  ck_assert_mem_eq (ids->data, prompt, sizeof prompt);

  gint32 next;
  ck_assert (llm_session_prefill (s, (gint32 *) ids->data, ids->len, &next, &error));
  g_autoptr (GArray) gen = g_array_new (FALSE, FALSE, sizeof (gint32));
  for (int i = 0; i < 64; i++) {
    g_array_append_val (gen, next);
    if (i < 63)
      ck_assert (llm_session_step (s, next, &next, &error));
  }
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < gen->len; i++)
    llm_tokenizer_token_to_piece (m->tokenizer, g_array_index (gen, gint32, i), FALSE, text);
  ck_assert_str_eq (text->str,
      ", there was a little girl named Lily. She loved to play outside in the park. One day, "
      "she saw a big, red ball. She wanted to play with it, but it was too high.\n"
      "Lily's mom said");
}
END_TEST

static Suite *
golden_suite (void)
{
  Suite *s = suite_create ("golden");
  TCase *tc = tcase_create ("llama.cpp");
  tcase_set_timeout (tc, 600);
  tcase_add_loop_test (tc, test_golden_logits_match_llama_cpp, 0, G_N_ELEMENTS (cases));
  tcase_add_loop_test (tc, test_golden_logits_match_llama_cpp_on_reference_kernels, 0,
      G_N_ELEMENTS (cases));
  tcase_add_test (tc, test_greedy_story_reproduces_llama_cpp_text);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (golden_suite)
