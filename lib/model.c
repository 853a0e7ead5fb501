/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hyper-parameters come from <arch>.* keys with llama.cpp's defaults; every
 * tensor the forward pass touches is looked up and its shape and type
 * checked here, so the forward pass itself never meets a surprise. */
#include "model.h"
#include "model-private.h"
#include "cpu/matmul.h"

#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK (llm-model-error-quark, llm_model_error)

static GMutex models_lock;
static GHashTable *models;    /* key -> LlmModel* (not referenced) */

static const char *const devices[] = { "cpu", NULL };

const char *const *
llm_devices_available (void)
{
  return devices;
}

const char *
llm_arch_name (LlmArch arch)
{
  switch (arch) {
    case LLM_ARCH_LLAMA: return "llama";
    case LLM_ARCH_QWEN2: return "qwen2";
    case LLM_ARCH_QWEN3: return "qwen3";
  }
  return "unknown";
}

typedef struct {
  LlmModel *m;
  const char *arch;
  GError **error;
} Loader;

static gboolean
get_u32 (Loader *l, const char *suffix, gboolean required, guint32 def, guint32 *out)
{
  g_autofree char *key = g_strdup_printf ("%s.%s", l->arch, suffix);
  guint64 v;
  GError *err = NULL;
  if (!llm_gguf_get_uint (l->m->gguf, key, &v, &err)) {
    gboolean missing = g_error_matches (err, LLM_GGUF_ERROR, LLM_GGUF_ERROR_NOT_FOUND);
    if (missing && !required) {
      g_error_free (err);
      *out = def;
      return TRUE;
    }
    /* The reader's message already names the file. */
    g_set_error_literal (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY, err->message);
    g_error_free (err);
    return FALSE;
  }
  if (v > G_MAXINT32) {
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
        "%s: %s = %" G_GUINT64_FORMAT " is out of range", l->m->path, key, v);
    return FALSE;
  }
  *out = (guint32) v;
  return TRUE;
}

static gboolean
get_f32 (Loader *l, const char *suffix, float def, float *out)
{
  g_autofree char *key = g_strdup_printf ("%s.%s", l->arch, suffix);
  double v;
  GError *err = NULL;
  if (!llm_gguf_get_float (l->m->gguf, key, &v, &err)) {
    gboolean missing = g_error_matches (err, LLM_GGUF_ERROR, LLM_GGUF_ERROR_NOT_FOUND);
    if (missing) {
      g_error_free (err);
      *out = def;
      return TRUE;
    }
    g_set_error_literal (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY, err->message);
    g_error_free (err);
    return FALSE;
  }
  *out = (float) v;
  return TRUE;
}

/* Finds @name and checks it has exactly the dims given (0-terminated list;
 * trailing dims of the tensor must be 1). Optional tensors may be absent. */
static gboolean
tensor (Loader *l, const char *name, gboolean optional, const LlmGgufTensor **out,
    guint64 d0, guint64 d1)
{
  const LlmGgufTensor *t = llm_gguf_find_tensor (l->m->gguf, name);
  *out = t;
  if (t == NULL) {
    if (optional)
      return TRUE;
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR,
        "%s: tensor '%s' is missing (architecture %s)", l->m->path, name, l->arch);
    return FALSE;
  }
  guint64 want[LLM_GGUF_MAX_DIMS] = { d0, d1 ? d1 : 1, 1, 1 };
  for (guint i = 0; i < LLM_GGUF_MAX_DIMS; i++) {
    if (t->ne[i] != want[i]) {
      g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR,
          "%s: tensor '%s' has shape [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT ", %"
          G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "], expected [%" G_GUINT64_FORMAT ", %"
          G_GUINT64_FORMAT "]", l->m->path, name, t->ne[0], t->ne[1], t->ne[2], t->ne[3],
          want[0], want[1]);
      return FALSE;
    }
  }
  /* Norms, biases and embeddings are read row-wise; matrices through the
   * matmul kernels: both need a type the kernels know. */
  if (!llm_matmul_supports (t->type)) {
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TYPE,
        "%s: tensor '%s' has type %s, which this build cannot compute "
        "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
        l->m->path, name, llm_type_name (t->type));
    return FALSE;
  }
  return TRUE;
}

static gboolean
layer_tensors (Loader *l, guint i, LlmLayer *ly)
{
  const LlmHParams *hp = &l->m->hp;
  guint64 q_dim = (guint64) hp->n_head * hp->head_dim;
  guint64 kv_dim = (guint64) hp->n_head_kv * hp->head_dim;
  char name[96];
#define T(field, suffix, opt, d0, d1) \
  (g_snprintf (name, sizeof name, "blk.%u." suffix, i), tensor (l, name, opt, &ly->field, d0, d1))

  if (!T (attn_norm, "attn_norm.weight", FALSE, hp->n_embd, 0) ||
      !T (wq, "attn_q.weight", FALSE, hp->n_embd, q_dim) ||
      !T (wk, "attn_k.weight", FALSE, hp->n_embd, kv_dim) ||
      !T (wv, "attn_v.weight", FALSE, hp->n_embd, kv_dim) ||
      !T (wo, "attn_output.weight", FALSE, q_dim, hp->n_embd) ||
      !T (ffn_norm, "ffn_norm.weight", FALSE, hp->n_embd, 0) ||
      !T (w_gate, "ffn_gate.weight", FALSE, hp->n_embd, hp->n_ff) ||
      !T (w_up, "ffn_up.weight", FALSE, hp->n_embd, hp->n_ff) ||
      !T (w_down, "ffn_down.weight", FALSE, hp->n_ff, hp->n_embd))
    return FALSE;
  gboolean qwen2 = hp->arch == LLM_ARCH_QWEN2, qwen3 = hp->arch == LLM_ARCH_QWEN3;
  /* llama files may carry biases too (some fine-tunes); qwen2 must. */
  if (!T (bq, "attn_q.bias", !qwen2, q_dim, 0) ||
      !T (bk, "attn_k.bias", !qwen2, kv_dim, 0) ||
      !T (bv, "attn_v.bias", !qwen2, kv_dim, 0) ||
      !T (q_norm, "attn_q_norm.weight", !qwen3, hp->head_dim, 0) ||
      !T (k_norm, "attn_k_norm.weight", !qwen3, hp->head_dim, 0))
    return FALSE;
#undef T
  return TRUE;
}

static gsize
tensor_bytes (const LlmGgufTensor *t)
{
  return t ? t->size : 0;
}

static gboolean
load_hparams (Loader *l)
{
  LlmModel *m = l->m;
  LlmHParams *hp = &m->hp;

  g_autofree char *arch = llm_gguf_dup_string (m->gguf, "general.architecture", NULL);
  if (arch == NULL) {
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_ARCH,
        "%s: general.architecture is missing; is this a model file?", m->path);
    return FALSE;
  }
  if (strcmp (arch, "llama") == 0)
    hp->arch = LLM_ARCH_LLAMA;
  else if (strcmp (arch, "qwen2") == 0)
    hp->arch = LLM_ARCH_QWEN2;
  else if (strcmp (arch, "qwen3") == 0)
    hp->arch = LLM_ARCH_QWEN3;
  else {
    g_autofree char *shown = llm_gguf_escape (arch, -1);
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_ARCH,
        "%s: architecture '%s' is not supported (supported: llama, qwen2, qwen3)",
        m->path, shown);
    return FALSE;
  }
  l->arch = llm_arch_name (hp->arch);

  guint32 key_len, value_len;
  if (!get_u32 (l, "embedding_length", TRUE, 0, &hp->n_embd) ||
      !get_u32 (l, "block_count", TRUE, 0, &hp->n_layer) ||
      !get_u32 (l, "attention.head_count", TRUE, 0, &hp->n_head) ||
      !get_u32 (l, "feed_forward_length", TRUE, 0, &hp->n_ff) ||
      !get_u32 (l, "context_length", FALSE, 2048, &hp->n_ctx_train) ||
      !get_u32 (l, "attention.head_count_kv", FALSE, hp->n_head, &hp->n_head_kv) ||
      !get_f32 (l, "rope.freq_base", 10000.0f, &hp->rope_freq_base) ||
      !get_f32 (l, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps))
    return FALSE;
  if (hp->n_embd == 0 || hp->n_layer == 0 || hp->n_head == 0 || hp->n_head_kv == 0 ||
      hp->n_ff == 0 || hp->n_head % hp->n_head_kv != 0 || hp->n_layer > 4096) {
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
        "%s: inconsistent hyper-parameters (embedding %u, layers %u, heads %u, kv heads %u, "
        "ffn %u): heads must be a multiple of kv heads and none may be 0",
        m->path, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff);
    return FALSE;
  }
  guint32 def_head = hp->n_embd / hp->n_head;
  if (!get_u32 (l, "attention.key_length", FALSE, def_head, &key_len) ||
      !get_u32 (l, "attention.value_length", FALSE, key_len, &value_len))
    return FALSE;
  if (key_len != value_len || key_len == 0 || key_len % 2 != 0) {
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
        "%s: head size %u (key) / %u (value) is not supported", m->path, key_len, value_len);
    return FALSE;
  }
  hp->head_dim = key_len;
  if (!get_u32 (l, "rope.dimension_count", FALSE, hp->head_dim, &hp->n_rot))
    return FALSE;
  if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
        "%s: %s.rope.dimension_count %u must be even and at most the head size %u",
        m->path, l->arch, hp->n_rot, hp->head_dim);
    return FALSE;
  }
  hp->rope_freq_scale = 1.0f;
  float factor;
  if (!get_f32 (l, "rope.scaling.factor", 0.0f, &factor))
    return FALSE;
  g_autofree char *scaling_key = g_strdup_printf ("%s.rope.scaling.type", l->arch);
  g_autofree char *scaling = llm_gguf_dup_string (m->gguf, scaling_key, NULL);
  if (scaling != NULL && strcmp (scaling, "none") != 0 && strcmp (scaling, "linear") != 0) {
    g_autofree char *shown = llm_gguf_escape (scaling, -1);
    g_set_error (l->error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
        "%s: RoPE scaling '%s' is not supported (none, linear)", m->path, shown);
    return FALSE;
  }
  if (factor > 0.0f && (scaling == NULL || strcmp (scaling, "linear") == 0))
    hp->rope_freq_scale = 1.0f / factor;
  hp->rope_neox = hp->arch != LLM_ARCH_LLAMA;
  return TRUE;
}

static gboolean
load (LlmModel *m, GError **error)
{
  Loader l = { m, NULL, error };
  if (!load_hparams (&l))
    return FALSE;
  LlmHParams *hp = &m->hp;

  const LlmGgufTensor *emb = llm_gguf_find_tensor (m->gguf, "token_embd.weight");
  if (emb == NULL) {
    g_set_error (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR,
        "%s: tensor 'token_embd.weight' is missing", m->path);
    return FALSE;
  }
  if (emb->ne[1] == 0 || emb->ne[1] > G_MAXINT32) {
    g_set_error (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR,
        "%s: tensor 'token_embd.weight' has %" G_GUINT64_FORMAT " rows", m->path, emb->ne[1]);
    return FALSE;
  }
  hp->n_vocab = (guint32) emb->ne[1];
  if (!tensor (&l, "token_embd.weight", FALSE, &m->tok_embd, hp->n_embd, hp->n_vocab) ||
      !tensor (&l, "output_norm.weight", FALSE, &m->output_norm, hp->n_embd, 0) ||
      !tensor (&l, "output.weight", TRUE, &m->output, hp->n_embd, hp->n_vocab))
    return FALSE;
  if (m->output == NULL)
    m->output = m->tok_embd;

  if (m->tokenizer != NULL) {
    guint32 nt = llm_tokenizer_vocab (m->tokenizer)->n_tokens;
    if (nt > hp->n_vocab) {
      g_set_error (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR,
          "%s: the tokenizer has %u tokens but the model only %u rows of embeddings",
          m->path, nt, hp->n_vocab);
      return FALSE;
    }
  }

  m->layers = g_new0 (LlmLayer, hp->n_layer);
  /* A decode step reads one embedding row and every other weight once. */
  guint64 emb_row = 0;
  llm_type_row_bytes (m->tok_embd->type, hp->n_embd, &emb_row);
  m->weight_bytes = tensor_bytes (m->output) + tensor_bytes (m->output_norm) + emb_row;
  for (guint i = 0; i < hp->n_layer; i++) {
    LlmLayer *ly = &m->layers[i];
    if (!layer_tensors (&l, i, ly))
      return FALSE;
    const LlmGgufTensor *all[] = { ly->attn_norm, ly->wq, ly->wk, ly->wv, ly->wo, ly->bq,
      ly->bk, ly->bv, ly->q_norm, ly->k_norm, ly->ffn_norm, ly->w_gate, ly->w_up, ly->w_down };
    for (gsize j = 0; j < G_N_ELEMENTS (all); j++)
      m->weight_bytes += tensor_bytes (all[j]);
  }
  return TRUE;
}

static LlmModel *
load_path (const char *path, GError **error)
{
  LlmModel *m = g_new0 (LlmModel, 1);
  m->ref_count = 1;
  g_mutex_init (&m->prepared_lock);
  m->path = g_strdup (path);
  m->device = g_strdup ("cpu");
  m->gguf = llm_gguf_open (path, error);
  if (m->gguf == NULL) {
    llm_model_unref (m);
    return NULL;
  }
  /* A model without a tokenizer still runs on token ids. */
  GError *tok_err = NULL;
  if (llm_gguf_find_key (m->gguf, "tokenizer.ggml.model") >= 0) {
    m->tokenizer = llm_tokenizer_new_from_gguf (m->gguf, &tok_err);
    if (m->tokenizer == NULL) {
      g_propagate_prefixed_error (error, tok_err, "%s: ", path);
      llm_model_unref (m);
      return NULL;
    }
  }
  if (!load (m, error)) {
    llm_model_unref (m);
    return NULL;
  }
  return m;
}

LlmModel *
llm_model_load (const char *path, GError **error)
{
  return load_path (path, error);
}

LlmModel *
llm_model_get (const char *path, const char *device, GError **error)
{
  if (device == NULL)
    device = "cpu";
  if (!g_strv_contains (devices, device)) {
    g_autofree char *avail = g_strjoinv (", ", (char **) devices);
    g_set_error (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_DEVICE,
        "device '%s' is not available in this build; available: %s", device, avail);
    return NULL;
  }
  /* Sharing is by file identity, so two spellings of one path (and links
   * to it) share; a path that does not resolve fails to load below. */
  g_autofree char *real = realpath (path, NULL);
  if (real == NULL)
    real = g_canonicalize_filename (path, NULL);
  g_autofree char *key = g_strdup_printf ("%s\n%s", device, real);

  g_mutex_lock (&models_lock);
  LlmModel *m = models ? g_hash_table_lookup (models, key) : NULL;
  if (m != NULL)
    llm_model_ref (m);
  g_mutex_unlock (&models_lock);
  if (m != NULL)
    return m;

  /* Loaded outside the lock, which guards only the table: a file slow to
   * read (a network mount) holds up no other model's load. Two first
   * loads of one file that race both read it; the later one to finish
   * takes the earlier one's model and drops its own. */
  LlmModel *loaded = load_path (path, error);
  if (loaded == NULL)
    return NULL;
  g_mutex_lock (&models_lock);
  if (models == NULL)
    models = g_hash_table_new (g_str_hash, g_str_equal);
  m = g_hash_table_lookup (models, key);
  if (m != NULL) {
    llm_model_ref (m);
  } else {
    loaded->key = g_strdup (key);
    g_hash_table_insert (models, loaded->key, loaded);
    m = g_steal_pointer (&loaded);
  }
  g_mutex_unlock (&models_lock);
  /* not in the table: freed without taking the lock */
  llm_model_unref (loaded);
  return m;
}

void
llm_model_token_embedding (const LlmModel *m, guint32 token, float *out)
{
  g_return_if_fail (m != NULL && out != NULL && token < m->hp.n_vocab);
  const LlmGgufTensor *t = m->tok_embd;
  llm_dequantize_row (t->type, t->data, t->size / t->ne[1], t->ne[0], token, out);
}

LlmModel *
llm_model_ref (LlmModel *m)
{
  g_atomic_int_inc (&m->ref_count);
  return m;
}

void
llm_model_unref (LlmModel *m)
{
  if (m == NULL)
    return;
  if (m->key != NULL) {
    /* Shared: drop from the table under the lock so a concurrent
     * llm_model_get never revives a model being freed. */
    g_mutex_lock (&models_lock);
    if (!g_atomic_int_dec_and_test (&m->ref_count)) {
      g_mutex_unlock (&models_lock);
      return;
    }
    g_hash_table_remove (models, m->key);
    g_mutex_unlock (&models_lock);
  } else if (!g_atomic_int_dec_and_test (&m->ref_count)) {
    return;
  }
  /* Every engine holds the model, and drops its prepared weights first. */
  g_warn_if_fail (m->prepared == NULL);
  g_mutex_clear (&m->prepared_lock);
  g_free (m->layers);
  llm_tokenizer_free (m->tokenizer);
  llm_gguf_free (m->gguf);
  g_free (m->path);
  g_free (m->key);
  g_free (m->device);
  g_free (m);
}

const char *
llm_model_path (const LlmModel *model)
{
  return model->path;
}

const char *
llm_model_device (const LlmModel *model)
{
  return model->device;
}

LlmTokenizer *
llm_model_tokenizer (const LlmModel *model)
{
  return model->tokenizer;
}

const LlmHParams *
llm_model_hparams (const LlmModel *model)
{
  return &model->hp;
}

const LlmGguf *
llm_model_gguf (const LlmModel *model)
{
  return model->gguf;
}
