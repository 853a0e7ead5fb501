/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-bench --make-model --widen (tools/bench-widen.c): a real model
 * placed in a larger shape computes what the real model computes. Both
 * real test models are widened into the tiny-12h shape (384 wide, 12 heads
 * of 32 in 4 groups of 3, their 8 heads in groups of 2; 6 layers, 512
 * feed-forward units), and the widened file, fed the real model's own
 * greedy continuation, gives the real model's logits at every step within
 * a stated tolerance and its greedy pick wherever the pick is clear. Shapes the model does not fit are
 * refused with a message that names what does not fit. */
#include "llm-check.h"

#include <math.h>
#include <glib/gstdio.h>

#include "../tools/bench.h"
#include "ggml-type.h"
#include "gguf.h"
#include "gguf-writer.h"

typedef struct {
  const char *model;
  const char *type;      /* the widened file's weight type */
  const char *ref_type;  /* the real model's, requantized */
  double tol;            /* largest |logit difference| */
} WidenCase;

/* Against the real model in the same weight type: the norms scale by
 * sqrt(64/384) (stories260K) or sqrt(128/384) (TinyStories-656K) and the
 * query rows by 2 (heads of 8 to 32) or sqrt(2) (16 to 32), so the
 * widened file rounds a little differently. Quantized, the widened file is a quantization of its own: the
 * query rows so scaled are other codes, and activations are quantized in
 * other blocks of 32 (a head's 8 or 16 values with zeros, not 4 heads'
 * values together); so a Q8_0 file is held to the real model within what
 * quantizing it costs. */
static const WidenCase cases[] = {
  { "stories260K.gguf", "f32", "f32", 1e-4 },
  { "TinyStories-656K-Q8_0.gguf", "f32", "f32", 1e-4 },
  { "stories260K.gguf", "q8_0", "f32", 0.6 },
  { "TinyStories-656K-Q8_0.gguf", "q8_0", "q8_0", 0.6 },
};

#define STEPS 48

static char *
widen_to_temp (const char *model, const char *shape, guint n_layer, const char *type,
    GError **error)
{
  g_autofree char *rel = g_build_filename ("models", model, NULL);
  g_autofree char *src = llm_test_data_path (rel);
  char *path = g_build_filename (g_get_tmp_dir (), "test-widen-XXXXXX.gguf", NULL);
  int fd = g_mkstemp (path);
  ck_assert_int_ge (fd, 0);
  close (fd);
  if (!bench_make_widened_model (shape, n_layer, type, src, path, 2, FALSE, error)) {
    g_unlink (path);
    g_free (path);
    return NULL;
  }
  return path;
}

static float
top_margin (const float *x, guint n)
{
  const guint best = llm_test_argmax (x, n);
  float second = -INFINITY;
  for (guint i = 0; i < n; i++)
    if (i != best && x[i] > second)
      second = x[i];
  return x[best] - second;
}

START_TEST (test_widened_model_computes_the_real_one)
{
  const WidenCase *c = &cases[_i];
  g_autoptr (GError) error = NULL;
  g_autofree char *path = widen_to_temp (c->model, "tiny-12h", 0, c->type, &error);
  ck_assert_msg (path != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmModel) wide = llm_model_load (path, &error);
  g_unlink (path);
  ck_assert_msg (wide != NULL, "%s", error ? error->message : "");
  /* The real model in the widened file's type, so both round alike. */
  guint32 type = 0;
  for (guint32 t = 0; t < 64 && type == 0; t++)
    if (g_ascii_strcasecmp (llm_type_name (t), c->ref_type) == 0)
      type = t;
  g_autoptr (LlmModel) real = llm_test_requantized_model (c->model, type);

  const LlmHParams *hw = llm_model_hparams (wide), *hr = llm_model_hparams (real);
  ck_assert_uint_eq (hw->n_embd, 384);
  ck_assert_uint_eq (hw->n_layer, 6);
  ck_assert_uint_eq (hw->n_head, 12);
  ck_assert_uint_eq (hw->n_vocab, hr->n_vocab);

  /* The same prompt ids: the real tokenizer came along. */
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_autoptr (GArray) wide_ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (llm_model_tokenizer (real), "Once upon a time", -1, TRUE, TRUE, TRUE, ids);
  llm_tokenizer_encode (llm_model_tokenizer (wide), "Once upon a time", -1, TRUE, TRUE, TRUE, wide_ids);
  ck_assert_uint_eq (ids->len, wide_ids->len);
  ck_assert_mem_eq (ids->data, wide_ids->data, ids->len * sizeof (gint32));

  LlmKvConfig kv = { .type = LLM_KV_F32, .policy = LLM_KV_POLICY_FULL, .context_length = 256 };
  g_autoptr (LlmSeq) sr = llm_test_standalone_seq (real, &kv, 2, FALSE);
  g_autoptr (LlmSeq) sw = llm_test_standalone_seq (wide, &kv, 2, FALSE);
  const guint nv = hr->n_vocab;
  g_autofree float *lr = g_new (float, nv);
  g_autofree float *lw = g_new (float, nv);
  double worst = 0;
  guint clear = 0;
  gint32 *in = (gint32 *) ids->data;
  guint n_in = ids->len;
  for (guint s = 0; s < STEPS; s++) {
    ck_assert_msg (llm_seq_eval_tokens (sr, in, n_in, lr, FALSE, &error), "%s",
        error ? error->message : "");
    ck_assert_msg (llm_seq_eval_tokens (sw, in, n_in, lw, FALSE, &error), "%s",
        error ? error->message : "");
    double d = 0;
    for (guint i = 0; i < nv; i++)
      d = MAX (d, fabs ((double) lr[i] - lw[i]));
    worst = MAX (worst, d);
    ck_assert_msg (d <= c->tol, "%s as %s: step %u logits differ by %g (tolerance %g)",
        c->model, c->type, s, d, c->tol);
    const guint pick = llm_test_argmax (lr, nv);
    if (top_margin (lr, nv) > 2 * c->tol) {
      ck_assert_uint_eq (llm_test_argmax (lw, nv), pick);
      clear++;
    }
    g_array_set_size (ids, 1);
    g_array_index (ids, gint32, 0) = (gint32) pick;
    in = (gint32 *) ids->data;
    n_in = 1;
  }
  /* A comparison that never compared a pick would pass anything. */
  ck_assert_uint_ge (clear, STEPS / 6);
  g_print ("widen %s to tiny-12h %s: max |dlogit| %.3g over %u steps (tolerance %g), "
      "%u clear picks equal\n", c->model, c->type, worst, STEPS, c->tol, clear);
}
END_TEST

/* Layer skipping measured on a widened model means what it means on the
 * real one only where no layer is an identity: stories260K's 5 layers
 * widened into tiny-12h with --layers 5, each sequence skipping the same
 * layers, give the same logits at every step (F32, within 1e-4), and the
 * skipping changes them (so the comparison can fail). */
START_TEST (test_widened_layers_skip_as_the_real_ones)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *path = widen_to_temp ("stories260K.gguf", "tiny-12h", 5, "f32", &error);
  ck_assert_msg (path != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmModel) wide = llm_model_load (path, &error);
  g_unlink (path);
  ck_assert_msg (wide != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmModel) real = llm_test_requantized_model ("stories260K.gguf", LLM_TYPE_F32);
  ck_assert_uint_eq (llm_model_hparams (wide)->n_layer, 5);
  ck_assert_uint_eq (llm_model_hparams (wide)->n_embd, 384);
  const guint nv = llm_model_hparams (real)->n_vocab;

  static const guint8 skips[][5] = { { 0, 0, 1, 0, 0 }, { 0, 1, 0, 1, 0 } };
  for (gsize k = 0; k < G_N_ELEMENTS (skips); k++) {
    LlmKvConfig kv = { .type = LLM_KV_F32, .policy = LLM_KV_POLICY_FULL, .context_length = 128 };
    g_autoptr (LlmSeq) sr = llm_test_standalone_seq (real, &kv, 2, FALSE);
    g_autoptr (LlmSeq) sw = llm_test_standalone_seq (wide, &kv, 2, FALSE);
    g_autoptr (LlmSeq) full = llm_test_standalone_seq (real, &kv, 2, FALSE);
    ck_assert (llm_seq_set_skip_layers (sr, skips[k]));
    ck_assert (llm_seq_set_skip_layers (sw, skips[k]));
    g_autofree float *lr = g_new (float, nv);
    g_autofree float *lw = g_new (float, nv);
    g_autofree float *lf = g_new (float, nv);
    gint32 tok = 1;           /* BOS */
    double worst = 0, moved = 0;
    for (guint s = 0; s < STEPS; s++) {
      ck_assert (llm_seq_eval_tokens (sr, &tok, 1, lr, FALSE, &error));
      ck_assert (llm_seq_eval_tokens (sw, &tok, 1, lw, FALSE, &error));
      ck_assert (llm_seq_eval_tokens (full, &tok, 1, lf, FALSE, &error));
      for (guint i = 0; i < nv; i++) {
        worst = MAX (worst, fabs ((double) lr[i] - lw[i]));
        moved = MAX (moved, fabs ((double) lr[i] - lf[i]));
      }
      tok = (gint32) llm_test_argmax (lr, nv);
    }
    ck_assert_msg (worst <= 1e-4, "skip set %zu: logits differ by %g", k, worst);
    ck_assert_msg (moved > 0.5, "skip set %zu changed the logits by only %g", k, moved);
    g_print ("widen stories260K to tiny-12h, 5 layers, skip set %zu: max |dlogit| %.3g, "
        "%.3g from the full model's\n", k, worst, moved);
  }
}
END_TEST

static void
check_refused (const char *model, const char *shape, const char *says)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *path = widen_to_temp (model, shape, 0, "f32", &error);
  ck_assert_msg (path == NULL, "%s widened to %s", model, shape);
  ck_assert_msg (error != NULL && strstr (error->message, says) != NULL,
      "widening %s to %s: \"%s\" does not say \"%s\"", model, shape,
      error ? error->message : "(no error)", says);
}

/* stories260K with blk.0.attn_q.weight in IQ4_NL (zero bytes), a type
 * this build cannot read, at @path. */
static void
write_iq4_nl_source (const char *path)
{
  g_autofree char *src = llm_test_data_path ("models/stories260K.gguf");
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmGguf) g = llm_gguf_open (src, &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  for (guint64 i = 0; i < llm_gguf_n_kv (g); i++)
    ck_assert (llm_gguf_writer_copy_kv (w, g, llm_gguf_key (g, i)));
  for (guint64 i = 0; i < llm_gguf_n_tensors (g); i++) {
    const LlmGgufTensor *t = llm_gguf_tensor (g, i);
    if (strcmp (t->name, "blk.0.attn_q.weight") != 0) {
      ck_assert (llm_gguf_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data,
              t->size, &error));
      continue;
    }
    guint64 row;
    ck_assert (llm_type_row_bytes (LLM_TYPE_IQ4_NL, t->ne[0], &row));
    g_autofree guint8 *zeros = g_malloc0 (row * t->ne[1]);
    ck_assert (llm_gguf_writer_add_tensor (w, t->name, LLM_TYPE_IQ4_NL, t->n_dims, t->ne, zeros,
            row * t->ne[1], &error));
  }
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s",
      error ? error->message : "");
}

START_TEST (test_widen_refuses_what_does_not_fit)
{
  /* tiny: 4 heads in 2 groups, fewer than the model's 4 kv heads. */
  check_refused ("TinyStories-656K-Q8_0.gguf", "tiny", "kv heads");
  /* qwen2 rotates other dimension pairs. */
  check_refused ("TinyStories-656K-Q8_0.gguf", "tiny-qwen2", "llama shapes only");
  check_refused ("random-qwen2-f32.gguf", "tiny-12h", "not a llama model");
  /* Fewer layers than the model's. */
  g_autoptr (GError) few = NULL;
  g_autofree char *cut = widen_to_temp ("stories260K.gguf", "tiny-12h", 4, "f32", &few);
  ck_assert (cut == NULL);
  ck_assert_msg (few != NULL && strstr (few->message, "layers") != NULL, "%s",
      few ? few->message : "(no error)");

  /* A weight type it cannot read: an error, not a crash. */
  g_autofree char *odd = g_build_filename (g_get_tmp_dir (), "test-widen-iq4nl-XXXXXX.gguf",
      NULL);
  const int fd = g_mkstemp (odd);
  ck_assert_int_ge (fd, 0);
  close (fd);
  write_iq4_nl_source (odd);
  const BenchWidenShape to = { 384, 6, 512, 12, 4 };
  g_autoptr (GError) error = NULL;
  g_autoptr (BenchWiden) w = bench_widen_open (odd, &to, &error);
  g_unlink (odd);
  ck_assert (w == NULL);
  ck_assert_msg (strstr (error->message, "IQ4_NL") != NULL, "%s", error->message);
}
END_TEST

static Suite *
widen_suite (void)
{
  Suite *s = suite_create ("widen");
  TCase *tc = tcase_create ("widen");
  tcase_set_timeout (tc, 120);
  tcase_add_loop_test (tc, test_widened_model_computes_the_real_one, 0, G_N_ELEMENTS (cases));
  tcase_add_test (tc, test_widened_layers_skip_as_the_real_ones);
  tcase_add_test (tc, test_widen_refuses_what_does_not_fit);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (widen_suite)
