/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-make-test-models: the small random-weight models that check the
 * engine's qwen2, qwen3, BF16 and Q4_1/Q5_0/Q5_1 paths against llama.cpp
 * (tests/data/models/random-*.gguf; goldens by tools/make-arch-golden.sh).
 *
 *   gst-llm-make-test-models [--margins] [--seed NAME=N] TOKENIZER.gguf OUTDIR
 *
 * Each model takes the tokenizer of TOKENIZER.gguf (every tokenizer.ggml.*
 * key, copied as is), so prompts are real text. Weights come from a
 * counter-based generator keyed by (seed, tensor name) using integer
 * arithmetic and float additions only, so the bytes do not depend on the
 * libm, the tensor order or the machine.
 *
 * Random logits over 512 tokens are often near ties, and a near tie turns a
 * comparison of greedy ids into a coin toss. The final norm (tied models)
 * or the output matrix is therefore scaled so logits spread over tens of
 * units, and each model's seed was picked (with --margins, which runs this
 * engine greedily from the golden prompt) as the first whose top-1 margin
 * exceeds 0.5 at each of the 32 golden steps. llama.cpp's own margins are
 * recorded in the goldens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf-writer.h"
#include "model.h"
#include "model-private.h"

/* The kinds of matrices a model may store in different types. */
typedef enum {
  ROLE_EMBD, ROLE_OUTPUT, ROLE_ATTN_QKO, ROLE_ATTN_V, ROLE_FFN_GATE_UP, ROLE_FFN_DOWN, N_ROLES
} Role;

typedef struct {
  const char *name;           /* file stem */
  const char *arch;
  guint32 wtype;              /* matrices (and token_embd) unless mix; vectors F32 */
  guint32 file_type;          /* llama.cpp's llama_ftype */
  guint32 n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
  float rope_base, rms_eps;
  gboolean biases;            /* attn_{q,k,v}.bias (qwen2) */
  gboolean head_norms;        /* attn_{q,k}_norm (qwen3) */
  gboolean tied;              /* no output.weight */
  gboolean key_length;        /* write attention.{key,value}_length */
  gboolean rope_dims;         /* write rope.dimension_count */
  float emb_std;              /* token_embd entries */
  float out_gain;             /* output_norm weights (mean) */
  float out_std;              /* output.weight entries when not tied */
  guint64 seed;
  const guint32 *mix;         /* type per Role, or NULL: wtype for all */
} ArchModel;

/* The legacy 32-block types, as llama-quantize's Q4_K/Q5_K fallbacks leave
 * them in real files (Qwen2.5-0.5B's 896-wide rows), each in more than one
 * place: embedding lookups (Q4_1), Q8_0 activations (Q5_0), Q8_1
 * activations (Q4_1, Q5_1). */
static const guint32 legacy_mix[N_ROLES] = {
  [ROLE_EMBD] = LLM_TYPE_Q4_1, [ROLE_OUTPUT] = LLM_TYPE_Q5_0,
  [ROLE_ATTN_QKO] = LLM_TYPE_Q5_0, [ROLE_ATTN_V] = LLM_TYPE_Q5_1,
  [ROLE_FFN_GATE_UP] = LLM_TYPE_Q4_1, [ROLE_FFN_DOWN] = LLM_TYPE_Q5_1,
};

/* Why these shapes and scales:
 * - qwen2: tied output, as Qwen2-0.5B. With a tied matrix a token's own
 *   embedding row would dominate the residual stream and the model would
 *   repeat its input, so embeddings are small (std 0.05) and the final norm
 *   carries the logit scale (gain 60: logits of std ~25).
 * - qwen3: head size 32 while n_embd / n_head is 16, so a loader that
 *   derives the head size instead of reading attention.key_length cannot
 *   load it; rope.dimension_count is absent, so n_rot defaults to the key
 *   length on both sides.
 * - llama BF16: untied output matrix scaled up (std 3: logits of std ~24).
 * - llama Q4_1/Q5_0/Q5_1: the BF16 model's shape and scales with the
 *   legacy_mix types (general.file_type 8, "mostly Q5_0").
 * Q/K weights and the qwen3 norm gains are large enough that attention is
 * far from uniform, so RoPE and the cache contents change the logits. */
static ArchModel models[] = {
  { "random-qwen2-f32", "qwen2", LLM_TYPE_F32, 0, 64, 2, 4, 2, 16, 64, 1000000.0f, 1e-6f,
    TRUE, FALSE, TRUE, FALSE, FALSE, 0.05f, 60.0f, 0.0f, 6 },
  { "random-qwen3-f32", "qwen3", LLM_TYPE_F32, 0, 64, 2, 4, 2, 32, 64, 1000000.0f, 1e-6f,
    FALSE, TRUE, TRUE, TRUE, FALSE, 0.05f, 60.0f, 0.0f, 3 },
  { "random-llama-bf16", "llama", LLM_TYPE_BF16, 32, 64, 2, 4, 2, 16, 128, 10000.0f, 1e-5f,
    FALSE, FALSE, FALSE, FALSE, TRUE, 1.0f, 1.0f, 3.0f, 1 },
  { "random-llama-q5mix", "llama", LLM_TYPE_Q5_0, 8, 64, 2, 4, 2, 16, 128, 10000.0f, 1e-5f,
    FALSE, FALSE, FALSE, FALSE, TRUE, 1.0f, 1.0f, 3.0f, 9, legacy_mix },
};

static guint32
matrix_type (const ArchModel *am, Role role)
{
  return am->mix != NULL ? am->mix[role] : am->wtype;
}

/* The golden prompt: BOS + "Once upon a time" in the stories260K vocabulary. */
static const gint32 prompt[] = { 1, 403, 407, 261, 378 };
#define N_GEN 32

/* --- deterministic numbers --- */

static guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* FNV-1a: a stable hash (g_str_hash promises no particular function). */
static guint64
fnv1a (const char *s)
{
  guint64 h = 0xcbf29ce484222325ull;
  for (; *s; s++)
    h = (h ^ (guint8) *s) * 0x100000001b3ull;
  return h;
}

/* Uniform in [-1, 1), exactly representable. */
static float
uniform (guint64 *state)
{
  return (float) (gint32) (splitmix64 (state) >> 40) / 8388608.0f - 1.0f;
}

/* Mean 0, variance 1, bell-shaped: the sum of four uniforms (no libm). */
static float
bell (guint64 *state)
{
  float s = uniform (state) + uniform (state) + uniform (state) + uniform (state);
  return s * 0.8660254f;  /* sqrt(3)/2: each uniform has variance 1/3 */
}

static float *
random_values (const ArchModel *am, const char *name, gsize n, float mean, float std)
{
  guint64 state = am->seed * 0x2545f4914f6cdd1dull ^ fnv1a (name);
  float *v = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    v[i] = mean + std * bell (&state);
  return v;
}

/* --- writing --- */

static gboolean
add (LlmGgufWriter *w, const ArchModel *am, const char *name, guint32 type, guint64 ne0,
    guint64 ne1, float mean, float std, GError **error)
{
  guint64 ne[2] = { ne0, ne1 };
  g_autofree float *v = random_values (am, name, ne0 * ne1, mean, std);
  return llm_gguf_writer_add_tensor_from_f32 (w, name, type, ne1 > 1 ? 2 : 1, ne, v, error);
}

static gboolean
write_model (const ArchModel *am, const LlmGguf *tok, guint32 n_vocab, const char *path,
    GError **error)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  char key[128];
#define KEY(suffix) (g_snprintf (key, sizeof key, "%s." suffix, am->arch), key)

  llm_gguf_writer_add_string (w, "general.architecture", am->arch);
  llm_gguf_writer_add_string (w, "general.name", am->name);
  llm_gguf_writer_add_uint32 (w, "general.file_type", am->file_type);
  llm_gguf_writer_add_uint32 (w, KEY ("context_length"), 2048);
  llm_gguf_writer_add_uint32 (w, KEY ("embedding_length"), am->n_embd);
  llm_gguf_writer_add_uint32 (w, KEY ("block_count"), am->n_layer);
  llm_gguf_writer_add_uint32 (w, KEY ("feed_forward_length"), am->n_ff);
  llm_gguf_writer_add_uint32 (w, KEY ("attention.head_count"), am->n_head);
  llm_gguf_writer_add_uint32 (w, KEY ("attention.head_count_kv"), am->n_head_kv);
  if (am->key_length) {
    llm_gguf_writer_add_uint32 (w, KEY ("attention.key_length"), am->head_dim);
    llm_gguf_writer_add_uint32 (w, KEY ("attention.value_length"), am->head_dim);
  }
  if (am->rope_dims)
    llm_gguf_writer_add_uint32 (w, KEY ("rope.dimension_count"), am->head_dim);
  llm_gguf_writer_add_float32 (w, KEY ("rope.freq_base"), am->rope_base);
  llm_gguf_writer_add_float32 (w, KEY ("attention.layer_norm_rms_epsilon"), am->rms_eps);
#undef KEY
  for (guint64 i = 0; i < llm_gguf_n_kv (tok); i++) {
    const char *k = llm_gguf_key (tok, i);
    if (g_str_has_prefix (k, "tokenizer.ggml.") && !llm_gguf_writer_copy_kv (w, tok, k)) {
      g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID,
          "cannot copy %s from the tokenizer file", k);
      return FALSE;
    }
  }

  guint64 q_dim = (guint64) am->n_head * am->head_dim;
  guint64 kv_dim = (guint64) am->n_head_kv * am->head_dim;
  /* Entries of std 1/sqrt(fan_in) keep every product at unit scale; Q and K
   * get 1.5x so attention scores spread over a few units. */
  float s_embd = 1.0f / sqrtf ((float) am->n_embd);
  float s_q = 1.0f / sqrtf ((float) q_dim), s_ff = 1.0f / sqrtf ((float) am->n_ff);
  if (!add (w, am, "token_embd.weight", matrix_type (am, ROLE_EMBD), am->n_embd, n_vocab, 0,
          am->emb_std, error) ||
      !add (w, am, "output_norm.weight", LLM_TYPE_F32, am->n_embd, 1, am->out_gain,
          am->out_gain * 0.1f, error))
    return FALSE;
  if (!am->tied && !add (w, am, "output.weight", matrix_type (am, ROLE_OUTPUT), am->n_embd,
      n_vocab, 0, am->out_std, error))
    return FALSE;
  for (guint l = 0; l < am->n_layer; l++) {
    char n[64];
#define NAME(suffix) (g_snprintf (n, sizeof n, "blk.%u." suffix, l), n)
    const guint32 t_qko = matrix_type (am, ROLE_ATTN_QKO), t_v = matrix_type (am, ROLE_ATTN_V);
    const guint32 t_gate_up = matrix_type (am, ROLE_FFN_GATE_UP);
    const guint32 t_down = matrix_type (am, ROLE_FFN_DOWN);
    if (!add (w, am, NAME ("attn_norm.weight"), LLM_TYPE_F32, am->n_embd, 1, 1, 0.2f, error) ||
        !add (w, am, NAME ("attn_q.weight"), t_qko, am->n_embd, q_dim, 0, 1.5f * s_embd, error) ||
        !add (w, am, NAME ("attn_k.weight"), t_qko, am->n_embd, kv_dim, 0, 1.5f * s_embd, error) ||
        !add (w, am, NAME ("attn_v.weight"), t_v, am->n_embd, kv_dim, 0, s_embd, error) ||
        !add (w, am, NAME ("attn_output.weight"), t_qko, q_dim, am->n_embd, 0, s_q, error))
      return FALSE;
    /* Biases as large as the products they are added to: a loader that
     * drops them moves every logit. */
    if (am->biases &&
        (!add (w, am, NAME ("attn_q.bias"), LLM_TYPE_F32, q_dim, 1, 0, 1.0f, error) ||
         !add (w, am, NAME ("attn_k.bias"), LLM_TYPE_F32, kv_dim, 1, 0, 1.0f, error) ||
         !add (w, am, NAME ("attn_v.bias"), LLM_TYPE_F32, kv_dim, 1, 0, 1.0f, error)))
      return FALSE;
    /* After the per-head norm each element has unit RMS; gains around 1.5
     * (spread 0.5) make scores of a few units and the heads unequal. */
    if (am->head_norms &&
        (!add (w, am, NAME ("attn_q_norm.weight"), LLM_TYPE_F32, am->head_dim, 1, 1.5f, 0.5f, error) ||
         !add (w, am, NAME ("attn_k_norm.weight"), LLM_TYPE_F32, am->head_dim, 1, 1.5f, 0.5f, error)))
      return FALSE;
    if (!add (w, am, NAME ("ffn_norm.weight"), LLM_TYPE_F32, am->n_embd, 1, 1, 0.2f, error) ||
        !add (w, am, NAME ("ffn_gate.weight"), t_gate_up, am->n_embd, am->n_ff, 0, 2 * s_embd,
            error) ||
        !add (w, am, NAME ("ffn_up.weight"), t_gate_up, am->n_embd, am->n_ff, 0, s_embd, error) ||
        !add (w, am, NAME ("ffn_down.weight"), t_down, am->n_ff, am->n_embd, 0, s_ff, error))
      return FALSE;
#undef NAME
  }
  return llm_gguf_writer_write_file (w, path, error);
}

/* Greedy from the golden prompt on this engine (F32 KV cache); returns the
 * smallest top-1 margin over N_GEN steps and the standard deviation of the
 * first step's logits, and prints the ids. */
static gboolean
greedy_margin (const char *path, double *min_margin, double *spread, GError **error)
{
  g_autoptr (LlmModel) m = llm_model_load (path, error);
  if (m == NULL)
    return FALSE;
  LlmKvConfig kv = { .type = LLM_KV_F32, .policy = LLM_KV_POLICY_FULL, .context_length = 512 };
  g_autoptr (LlmSeq) ctx = llm_seq_new_standalone (m, &kv, 1, error);
  if (ctx == NULL)
    return FALSE;
  g_autofree float *logits = g_new (float, m->hp.n_vocab);
  *min_margin = G_MAXDOUBLE;
  g_print ("  ids:");
  gint32 next = 0;
  for (guint s = 0; s < N_GEN; s++) {
    gboolean ok = s == 0
        ? llm_seq_eval_tokens (ctx, prompt, G_N_ELEMENTS (prompt), logits, FALSE, error)
        : llm_seq_eval_tokens (ctx, &next, 1, logits, FALSE, error);
    if (!ok)
      return FALSE;
    guint best = 0;
    for (guint i = 1; i < m->hp.n_vocab; i++)
      if (logits[i] > logits[best])
        best = i;
    float second = -G_MAXFLOAT;
    for (guint i = 0; i < m->hp.n_vocab; i++)
      if (i != best && logits[i] > second)
        second = logits[i];
    *min_margin = MIN (*min_margin, (double) logits[best] - second);
    if (s == 0) {
      double sum = 0, sum2 = 0;
      for (guint i = 0; i < m->hp.n_vocab; i++) {
        sum += logits[i];
        sum2 += (double) logits[i] * logits[i];
      }
      double mean = sum / m->hp.n_vocab;
      *spread = sqrt (MAX (0.0, sum2 / m->hp.n_vocab - mean * mean));
    }
    next = (gint32) best;
    g_print (" %d", next);
  }
  g_print ("\n");
  return TRUE;
}

int
main (int argc, char **argv)
{
  gboolean margins = FALSE;
  g_auto (GStrv) seeds = NULL;
  GOptionEntry entries[] = {
    { "margins", 0, 0, G_OPTION_ARG_NONE, &margins,
      "Run each model greedily on this engine and print its smallest top-1 margin", NULL },
    { "seed", 0, 0, G_OPTION_ARG_STRING_ARRAY, &seeds, "Seed of one model", "NAME=N" },
    { NULL }
  };
  g_autoptr (GOptionContext) oc = g_option_context_new ("TOKENIZER.gguf OUTDIR");
  g_option_context_add_main_entries (oc, entries, NULL);
  g_autoptr (GError) error = NULL;
  if (!g_option_context_parse (oc, &argc, &argv, &error) || argc != 3) {
    g_printerr ("%s\n", error ? error->message : "usage: gst-llm-make-test-models "
        "[--margins] [--seed NAME=N] TOKENIZER.gguf OUTDIR");
    return 2;
  }
  for (guint i = 0; seeds && seeds[i]; i++) {
    const char *eq = strchr (seeds[i], '=');
    gboolean found = FALSE;
    for (gsize j = 0; eq && j < G_N_ELEMENTS (models); j++) {
      if (strlen (models[j].name) == (gsize) (eq - seeds[i]) &&
          strncmp (models[j].name, seeds[i], eq - seeds[i]) == 0) {
        models[j].seed = g_ascii_strtoull (eq + 1, NULL, 10);
        found = TRUE;
      }
    }
    if (!found) {
      g_printerr ("--seed %s: expected NAME=N with NAME a model this tool writes\n", seeds[i]);
      return 2;
    }
  }

  g_autoptr (LlmGguf) tok = NULL;
  tok = llm_gguf_open (argv[1], &error);
  if (tok == NULL) {
    g_printerr ("%s\n", error->message);
    return 1;
  }
  guint64 n_vocab = 0;
  if (!llm_gguf_get_array (tok, "tokenizer.ggml.tokens", NULL, &n_vocab, &error)) {
    g_printerr ("%s: %s\n", argv[1], error->message);
    return 1;
  }
  for (gsize i = 0; i < G_N_ELEMENTS (models); i++) {
    g_autofree char *file = g_strconcat (models[i].name, ".gguf", NULL);
    g_autofree char *path = g_build_filename (argv[2], file, NULL);
    if (!write_model (&models[i], tok, (guint32) n_vocab, path, &error)) {
      g_printerr ("%s: %s\n", path, error->message);
      return 1;
    }
    g_print ("%s (seed %" G_GUINT64_FORMAT ")\n", path, models[i].seed);
    double margin = 0, spread = 0;
    if (margins) {
      if (!greedy_margin (path, &margin, &spread, &error)) {
        g_printerr ("%s: %s\n", path, error->message);
        return 1;
      }
      g_print ("  smallest top-1 margin over %d steps: %.3f; logit std at step 0: %.1f\n",
          N_GEN, margin, spread);
    }
  }
  return 0;
}
