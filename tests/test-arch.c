/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The qwen2, qwen3, BF16 and Q4_1/Q5_0/Q5_1 paths against llama.cpp
 * (goldens made by tools/make-arch-golden.sh on the random models of
 * tools/make-arch-models.c; see tests/data/golden/README.md).
 *
 * Teacher-forced along llama.cpp's greedy ids, our argmax must be its token
 * at every step and our log-probabilities must agree with the ones it
 * returned within a stated tolerance. Then each model's distinctive feature
 * is taken away in a copy (biases zeroed, head norms dropped, NeoX RoPE
 * swapped for llama's, BF16 or Q8_0/Q8_1 activations kept in f32) and the
 * same comparison must fail by far more than its tolerance: a loader or
 * forward pass that ignored the feature could not pass this suite. */
#include "llm-check.h"

#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "engine.h"
#include "gguf-writer.h"
#include "model.h"
#include "cpu/matmul.h"
#include "model-private.h"

/* Probabilities below this are compared only as "tiny": llama.cpp computes
 * them in float, where exp() underflows (to 0 below ~1e-45 and losing
 * digits below ~1e-38), so log(p) there says little. */
#define P_MIN 1e-30

typedef struct {
  const char *name;       /* model stem; golden is golden/<name>__once.* */
  LlmArch arch;
  guint32 wtype;          /* type of the attention Q matrix */
  guint32 down_type;      /* type of the FFN down matrix */
  double tol;             /* max |log p - llama.cpp|, optimised kernels */
  double ref_tol;         /* the same with the scalar reference kernels */
} ArchCase;

/* Tolerances, in log-probability (natural log), with the worst differences
 * measured over the 32 steps (optimised / scalar reference kernels):
 *   qwen2  5.5e-5 / 7.2e-5     qwen3  1.9e-4 / 1.3e-4     bf16  1.5e-5 / 1.3e-5
 *   q5mix (Q4_1, Q5_0, Q5_1)  2.3e-5 / 2.3e-5
 * Both sides compute in f32 (F32 KV cache), so the differences are rounding
 * and summation order, and they grow with the size of the logits: these
 * spread over about +-60, where one f32 ulp is 4e-6, and the largest
 * differences sit in the far tail (p ~ 1e-30; for p > 1e-2 they are 3-4x
 * smaller). qwen3 is the loosest: its per-head norms rescale Q and K after
 * the projections, which sharpens attention and the rounding with it.
 * BF16 is tight because both sides round the activations to BF16 before
 * every product, which absorbs most of the f32 noise; q5mix is tighter
 * still: both sides quantize the activations to the same Q8_0/Q8_1
 * integers, and the optimised Q4_1/Q5_1 kernels then give llama.cpp's x86
 * dot products bit for bit (test-kernels checks that on ggml's own
 * blocks), so what remains is the rest of the forward pass and ggml's
 * generic C summation order, which the scalar kernels have and so do the
 * optimised Q5_0 ones (q5_0x16.h's prepared kernels equal dot_q5_0 bit for
 * bit, so a row's result does not depend on the batch; with llama.cpp's
 * x86 order there instead the optimised worst was 4.1e-6). The golden side is fixed data and our
 * kernels are deterministic per variant, so the only room needed is for
 * changes to our own summation order: about 5x the measured worst. Every
 * tolerance is far below what a missing feature costs (0.67 at least,
 * measured by the tests at the end) and below the smallest greedy margin
 * (0.57). */
static const ArchCase cases[] = {
  { "random-qwen2-f32", LLM_ARCH_QWEN2, LLM_TYPE_F32, LLM_TYPE_F32, 3e-4, 3e-4 },
  { "random-qwen3-f32", LLM_ARCH_QWEN3, LLM_TYPE_F32, LLM_TYPE_F32, 1e-3, 1e-3 },
  { "random-llama-bf16", LLM_ARCH_LLAMA, LLM_TYPE_BF16, LLM_TYPE_BF16, 1e-4, 1e-4 },
  { "random-llama-q5mix", LLM_ARCH_LLAMA, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, 1.2e-4, 1.2e-4 },
};

typedef struct {
  GArray *prompt_ids;     /* gint32 */
  GArray *greedy_ids;     /* gint32 */
  GArray *margins;        /* double: llama.cpp's top-1 margin per step */
  guint n_vocab;
  GBytes *probs;          /* n_gen x n_vocab float32 */
} Golden;

/* --- golden files ---------------------------------------------------- */

/* The golden JSON is flat and machine-written: find "key": and read what
 * follows. */
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
read_numbers (const char *json, const char *key, gboolean as_int)
{
  const char *p = find_value (json, key);
  ck_assert_int_eq (*p, '[');
  GArray *a = g_array_new (FALSE, FALSE, as_int ? sizeof (gint32) : sizeof (double));
  for (p++; *p && *p != ']'; ) {
    char *end;
    double v = g_ascii_strtod (p, &end);
    ck_assert_msg (end != p, "bad number in %s", key);
    if (as_int) {
      gint32 i = (gint32) v;
      g_array_append_val (a, i);
    } else {
      g_array_append_val (a, v);
    }
    for (p = end; *p == ',' || *p == ' '; p++)
      ;
  }
  return a;
}

static void
golden_load (const ArchCase *c, Golden *g)
{
  g_autofree char *rel_json = g_strdup_printf ("golden/%s__once.json", c->name);
  g_autofree char *rel_probs = g_strdup_printf ("golden/%s__once.probs.f32", c->name);
  g_autofree char *json_path = llm_test_data_path (rel_json);
  g_autofree char *probs_path = llm_test_data_path (rel_probs);
  g_autoptr (GBytes) json = llm_test_read_file (json_path);
  g_autofree char *text = g_strndup (g_bytes_get_data (json, NULL), g_bytes_get_size (json));
  /* These goldens exist to compare against an F32 cache (exact on our
   * side); a regenerated file with other settings would need new
   * tolerances. */
  ck_assert_msg (g_str_has_prefix (find_value (text, "type_k"), "\"F32\"") &&
      g_str_has_prefix (find_value (text, "type_v"), "\"F32\""),
      "%s: golden not made with an F32 KV cache", c->name);
  g->prompt_ids = read_numbers (text, "prompt_ids", TRUE);
  g->greedy_ids = read_numbers (text, "greedy_ids", TRUE);
  g->margins = read_numbers (text, "step_top1_margin", FALSE);
  g->n_vocab = (guint) g_ascii_strtoull (find_value (text, "n_vocab"), NULL, 10);
  g->probs = llm_test_read_file (probs_path);
  ck_assert_uint_eq (g->margins->len, g->greedy_ids->len);
  ck_assert_uint_eq (g_bytes_get_size (g->probs),
      (gsize) g->greedy_ids->len * g->n_vocab * sizeof (float));
}

static void
golden_clear (Golden *g)
{
  g_array_free (g->prompt_ids, TRUE);
  g_array_free (g->greedy_ids, TRUE);
  g_array_free (g->margins, TRUE);
  g_bytes_unref (g->probs);
}

/* --- comparison ------------------------------------------------------ */

typedef struct {
  double worst;           /* max over steps and tokens of the log-prob difference */
  guint worst_step;
  guint greedy_mismatches;
  guint first_mismatch;   /* G_MAXUINT if none */
  double min_margin;      /* our smallest top-1 margin (logits) */
} Agreement;

/* How far one step's logits are from llama.cpp's probabilities @ref, as
 * log-probabilities: exact where ref >= P_MIN; below it, only by how much
 * ours exceed log(P_MIN). */
static double
step_distance (const float *logits, const float *ref, guint n)
{
  double mx = logits[llm_test_argmax (logits, n)], sum = 0;
  for (guint i = 0; i < n; i++)
    sum += exp ((double) logits[i] - mx);
  double lse = mx + log (sum), d = 0;
  for (guint i = 0; i < n; i++) {
    double ours = logits[i] - lse;
    if (ref[i] >= P_MIN)
      d = MAX (d, fabs (ours - log ((double) ref[i])));
    else
      d = MAX (d, ours - log (P_MIN));
  }
  return d;
}

static Agreement
compare (LlmModel *m, const Golden *g, gboolean reference)
{
  LlmKvConfig kv = { .type = LLM_KV_F32, .policy = LLM_KV_POLICY_FULL, .context_length = 512 };
  g_autoptr (LlmSeq) ctx = llm_test_standalone_seq (m, &kv, 2, reference);
  g_autoptr (GError) error = NULL;
  ck_assert_uint_eq (m->hp.n_vocab, g->n_vocab);

  g_autofree float *logits = g_new (float, g->n_vocab);
  const float *probs = g_bytes_get_data (g->probs, NULL);
  Agreement a = { 0, 0, 0, G_MAXUINT, G_MAXDOUBLE };
  for (guint s = 0; s < g->greedy_ids->len; s++) {
    gboolean ok = s == 0
        ? llm_seq_eval_tokens (ctx, (gint32 *) g->prompt_ids->data, g->prompt_ids->len, logits,
            FALSE, &error)
        : llm_seq_eval_tokens (ctx, &g_array_index (g->greedy_ids, gint32, s - 1), 1, logits,
            FALSE, &error);
    ck_assert_msg (ok, "step %u: %s", s, error ? error->message : "");

    double d = step_distance (logits, probs + (gsize) s * g->n_vocab, g->n_vocab);
    if (d > a.worst) {
      a.worst = d;
      a.worst_step = s;
    }
    guint best = llm_test_argmax (logits, g->n_vocab);
    float second = -G_MAXFLOAT;
    for (guint i = 0; i < g->n_vocab; i++)
      if (i != best && logits[i] > second)
        second = logits[i];
    a.min_margin = MIN (a.min_margin, (double) logits[best] - second);
    if ((gint32) best != g_array_index (g->greedy_ids, gint32, s)) {
      if (a.greedy_mismatches++ == 0)
        a.first_mismatch = s;
    }
  }
  return a;
}

/* --- model copies with one feature taken away ------------------------ */

typedef struct {
  const char *arch;               /* new general.architecture (keys renamed), or NULL */
  const char *const *drop;        /* tensors whose names end so are left out */
  const char *const *zero;        /* tensors whose names end so become zeros */
  gboolean add_zero_biases;       /* add attn_{q,k,v}.bias of zeros */
  gboolean widen;                 /* store every tensor as F32 (exact for F32/F16/BF16) */
} Rewrite;

static gboolean
name_ends_with_any (const char *name, const char *const *suffixes)
{
  for (; suffixes && *suffixes; suffixes++)
    if (g_str_has_suffix (name, *suffixes))
      return TRUE;
  return FALSE;
}

static void
copy_key (LlmGgufWriter *w, const LlmGguf *src, const char *key, const Rewrite *r,
    const char *old_arch)
{
  gsize prefix = strlen (old_arch);
  if (r->arch != NULL && strcmp (key, "general.architecture") == 0) {
    ck_assert (llm_gguf_writer_add_string (w, key, r->arch));
  } else if (r->arch != NULL && strncmp (key, old_arch, prefix) == 0 && key[prefix] == '.') {
    /* Hyper-parameters move to the new architecture's keys; ours are all
     * integers or floats. */
    g_autofree char *renamed = g_strconcat (r->arch, key + prefix, NULL);
    guint64 u;
    double f;
    if (llm_gguf_get_uint (src, key, &u, NULL))
      ck_assert (llm_gguf_writer_add_uint32 (w, renamed, (guint32) u));
    else if (llm_gguf_get_float (src, key, &f, NULL))
      ck_assert (llm_gguf_writer_add_float32 (w, renamed, (float) f));
    else
      ck_abort_msg ("cannot rename %s", key);
  } else {
    ck_assert_msg (llm_gguf_writer_copy_kv (w, src, key), "copy %s", key);
  }
}

static void
add_floats (LlmGgufWriter *w, const char *name, guint32 type, const LlmGgufTensor *like,
    const float *v)
{
  g_autoptr (GError) error = NULL;
  ck_assert_msg (llm_gguf_writer_add_tensor_from_f32 (w, name, type, like->n_dims, like->ne, v,
      &error), "%s: %s", name, error ? error->message : "");
}

/* Writes @r applied to @src_path into @dir and returns the new path. */
static char *
rewrite_model (const char *src_path, const char *dir, const char *file, const Rewrite *r)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmGguf) src = llm_gguf_open (src_path, &error);
  ck_assert_msg (src != NULL, "%s", error ? error->message : "");
  g_autofree char *old_arch = llm_gguf_dup_string (src, "general.architecture", &error);
  ck_assert (old_arch != NULL);

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  for (guint64 i = 0; i < llm_gguf_n_kv (src); i++)
    copy_key (w, src, llm_gguf_key (src, i), r, old_arch);

  for (guint64 i = 0; i < llm_gguf_n_tensors (src); i++) {
    const LlmGgufTensor *t = llm_gguf_tensor (src, i);
    if (name_ends_with_any (t->name, r->drop))
      continue;
    gboolean zero = name_ends_with_any (t->name, r->zero);
    if (zero || r->widen) {
      g_autofree float *v = g_new0 (float, t->n_elems);
      if (!zero)
        for (guint64 row = 0; row < t->n_elems / t->ne[0]; row++)
          llm_dequantize_row (t->type, t->data, t->size / (t->n_elems / t->ne[0]), t->ne[0],
              row, v + row * t->ne[0]);
      add_floats (w, t->name, r->widen ? LLM_TYPE_F32 : t->type, t, v);
    } else {
      ck_assert_msg (llm_gguf_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data,
          t->size, &error), "%s: %s", t->name, error ? error->message : "");
    }
    /* Zero biases go beside the Q projection, where qwen2 files have them. */
    if (r->add_zero_biases && g_str_has_suffix (t->name, ".attn_q.weight")) {
      g_autofree char *blk = g_strndup (t->name, strlen (t->name) - strlen ("attn_q.weight"));
      static const char *const proj[] = { "q", "k", "v" };
      for (guint p = 0; p < G_N_ELEMENTS (proj); p++) {
        g_autofree char *wname = g_strdup_printf ("%sattn_%s.weight", blk, proj[p]);
        g_autofree char *bname = g_strdup_printf ("%sattn_%s.bias", blk, proj[p]);
        const LlmGgufTensor *wt = llm_gguf_find_tensor (src, wname);
        ck_assert (wt != NULL);
        guint64 ne[1] = { wt->ne[1] };
        g_autofree float *v = g_new0 (float, ne[0]);
        ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, bname, LLM_TYPE_F32, 1, ne, v, &error));
      }
    }
  }
  char *path = g_build_filename (dir, file, NULL);
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s", error ? error->message : "");
  return path;
}

/* --- tests ----------------------------------------------------------- */

static void
run_case (guint i, gboolean reference)
{
  const ArchCase *c = &cases[i];
  Golden g = { 0 };
  golden_load (c, &g);
  g_autofree char *file = g_strdup_printf ("%s.gguf", c->name);
  g_autoptr (LlmModel) m = llm_test_load_model (file);

  /* The model's own tokenizer gives llama.cpp's prompt. */
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (m->tokenizer, "Once upon a time", -1, TRUE, TRUE, TRUE, ids);
  ck_assert_uint_eq (ids->len, g.prompt_ids->len);
  ck_assert_mem_eq (ids->data, g.prompt_ids->data, ids->len * sizeof (gint32));

  /* The file is what the case claims, so the path under test is taken. */
  ck_assert_int_eq (m->hp.arch, c->arch);
  ck_assert_uint_eq (m->layers[0].wq->type, c->wtype);
  ck_assert_uint_eq (m->layers[m->hp.n_layer - 1].w_down->type, c->down_type);

  double tol = reference ? c->ref_tol : c->tol;
  Agreement a = compare (m, &g, reference);
  g_print ("arch %s [%s kernels]: max |dlogp| %.3g at step %u (tolerance %g); greedy "
      "mismatches %u; our smallest margin %.3f\n", c->name,
      llm_cpu_isa_name (reference ? LLM_CPU_ISA_SCALAR : llm_cpu_isa_best ()), a.worst, a.worst_step, tol,
      a.greedy_mismatches, a.min_margin);
  ck_assert_msg (a.greedy_mismatches == 0, "%s: greedy id differs from llama.cpp's at step %u",
      c->name, a.first_mismatch);
  ck_assert_msg (a.worst <= tol, "%s: step %u log-probabilities differ from llama.cpp's by %g "
      "(tolerance %g)", c->name, a.worst_step, a.worst, tol);
  golden_clear (&g);
}

START_TEST (test_arch_greedy_and_probabilities_match_llama_cpp)
{
  run_case (_i, FALSE);
}
END_TEST

START_TEST (test_arch_greedy_and_probabilities_match_llama_cpp_on_reference_kernels)
{
  run_case (_i, TRUE);
}
END_TEST

/* A copy of case @i with @r applied must miss llama.cpp's golden by more
 * than @at_least (in log-probability) somewhere; returns the agreement. */
static Agreement
feature_matters (guint i, const Rewrite *r, const char *what, double at_least)
{
  const ArchCase *c = &cases[i];
  Golden g = { 0 };
  golden_load (c, &g);
  g_autofree char *rel = g_strdup_printf ("models/%s.gguf", c->name);
  g_autofree char *src = llm_test_data_path (rel);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("gst-llm-arch-XXXXXX", &error);
  ck_assert_msg (dir != NULL, "%s", error ? error->message : "");
  g_autofree char *path = rewrite_model (src, dir, "copy.gguf", r);

  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");
  Agreement a = compare (m, &g, FALSE);
  g_print ("arch %s %s: max |dlogp| %.3g at step %u, greedy mismatches %u (first at %d)\n",
      c->name, what, a.worst, a.worst_step, a.greedy_mismatches,
      a.first_mismatch == G_MAXUINT ? -1 : (int) a.first_mismatch);
  ck_assert_msg (a.worst > at_least, "%s %s: still within %g of llama.cpp (%g): the golden "
      "comparison would not notice", c->name, what, at_least, a.worst);
  g_unlink (path);
  g_rmdir (dir);
  golden_clear (&g);
  return a;
}

START_TEST (test_qwen2_biases_change_the_logits)
{
  static const char *const biases[] = { ".attn_q.bias", ".attn_k.bias", ".attn_v.bias", NULL };
  Rewrite r = { .zero = biases };
  Agreement a = feature_matters (0, &r, "with zero Q/K/V biases", 1.0);
  ck_assert_uint_gt (a.greedy_mismatches, 0);
}
END_TEST

START_TEST (test_qwen2_neox_rope_changes_the_logits)
{
  /* The same weights as a llama file differ only in how RoPE pairs
   * dimensions (i with i+1 instead of i with i+d/2); llama files may carry
   * Q/K/V biases. */
  Rewrite r = { .arch = "llama" };
  Agreement a = feature_matters (0, &r, "as llama (non-NeoX RoPE)", 1.0);
  ck_assert_uint_gt (a.greedy_mismatches, 0);
}
END_TEST

START_TEST (test_qwen3_head_norms_change_the_logits)
{
  /* qwen2 with zero biases is qwen3 without the per-head norms: the
   * forward pass a loader that ignored them would run. */
  static const char *const norms[] = { ".attn_q_norm.weight", ".attn_k_norm.weight", NULL };
  Rewrite drop = { .arch = "qwen2", .drop = norms, .add_zero_biases = TRUE };
  Agreement a = feature_matters (1, &drop, "without per-head norms", 1.0);
  ck_assert_uint_gt (a.greedy_mismatches, 0);
  /* And the norms' gains are read, not only the normalisation done. */
  Rewrite zero = { .zero = norms };
  feature_matters (1, &zero, "with zero head-norm gains", 1.0);
}
END_TEST

START_TEST (test_bf16_rounds_activations_like_llama_cpp)
{
  /* The BF16 weights widened exactly to F32 give the same weights, but
   * llama.cpp (and we) round the activations to BF16 before a BF16 dot
   * product; an F32 product misses by much more than the tolerance. */
  Rewrite r = { .widen = TRUE };
  feature_matters (2, &r, "widened to F32", 10 * cases[2].tol);
}
END_TEST

START_TEST (test_q4_1_q5_0_q5_1_quantize_activations_like_llama_cpp)
{
  /* The same weights widened to F32 (Q4_1/Q5_1 dequantized as ggml does,
   * each value rounded once) skip the Q8_0/Q8_1 activation blocks
   * llama.cpp multiplies these types with; that misses by far more than
   * the tolerance. */
  Rewrite r = { .widen = TRUE };
  feature_matters (3, &r, "widened to F32", 10 * cases[3].ref_tol);
}
END_TEST

static Suite *
arch_suite (void)
{
  Suite *s = suite_create ("arch");
  TCase *tc = tcase_create ("llama.cpp");
  tcase_set_timeout (tc, 600);
  tcase_add_loop_test (tc, test_arch_greedy_and_probabilities_match_llama_cpp, 0,
      G_N_ELEMENTS (cases));
  tcase_add_loop_test (tc, test_arch_greedy_and_probabilities_match_llama_cpp_on_reference_kernels,
      0, G_N_ELEMENTS (cases));
  tcase_add_test (tc, test_qwen2_biases_change_the_logits);
  tcase_add_test (tc, test_qwen2_neox_rope_changes_the_logits);
  tcase_add_test (tc, test_qwen3_head_norms_change_the_logits);
  tcase_add_test (tc, test_bf16_rounds_activations_like_llama_cpp);
  tcase_add_test (tc, test_q4_1_q5_0_q5_1_quantize_activations_like_llama_cpp);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (arch_suite)
