/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reads tokenizer.ggml.* the way llama.cpp does, so that ids, special tokens
 * and flags agree with it for the same file: same defaults per tokenizer
 * model, same pre-tokenizer names, same end-of-generation detection. */
#include "vocab.h"
#include "tokenizer.h"

#include <string.h>

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"

/* Texts llama.cpp treats as end of generation whatever the file says. */
static const char *const eog_texts[] = {
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
  "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
};

/* Texts it takes as the end-of-turn token when no key names one. */
static const char *const eot_texts[] = {
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
  "<|end_of_text|>", "<EOT>", "_<EOT>", "<end_of_utterance>",
};

typedef struct {
  const char *name;
  LlmPreType type;
} PreName;

static const PreName pre_names[] = {
  { "default", LLM_PRE_DEFAULT },
  { "llama3", LLM_PRE_LLAMA3 },
  { "llama-v3", LLM_PRE_LLAMA3 },
  { "llama-bpe", LLM_PRE_LLAMA3 },
  { "qwen2", LLM_PRE_QWEN2 },
  { "deepseek-r1-qwen", LLM_PRE_QWEN2 },
  { "gpt-2", LLM_PRE_GPT2 },
  { "phi-2", LLM_PRE_GPT2 },
  { "deepseek-llm", LLM_PRE_DEEPSEEK_LLM },
};

static gboolean
invalid (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid (GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error_literal (error, LLM_TOKENIZER_ERROR, LLM_TOKENIZER_ERROR_INVALID, msg);
  g_free (msg);
  return FALSE;
}

gint32
llm_vocab_lookup (const LlmVocab *v, const char *text, gsize len)
{
  /* Tokens never contain NUL; the table's keys are C strings, so a text
   * with one would match the token spelled by the bytes before it. */
  if (memchr (text, 0, len) != NULL)
    return -1;
  char stack[256];
  char *key = len < sizeof stack ? stack : g_malloc (len + 1);
  memcpy (key, text, len);
  key[len] = '\0';
  gpointer p = g_hash_table_lookup (v->token_to_id, key);
  if (key != stack)
    g_free (key);
  return p ? (gint32) GPOINTER_TO_INT (p) - 1 : -1;
}

gint32
llm_vocab_merge_rank (const LlmVocab *v, const char *left, gsize left_len,
    const char *right, gsize right_len)
{
  if (v->merges == NULL || memchr (left, 0, left_len) || memchr (right, 0, right_len))
    return -1;
  gsize len = left_len + 1 + right_len;
  char stack[256];
  char *key = len < sizeof stack ? stack : g_malloc (len + 1);
  memcpy (key, left, left_len);
  key[left_len] = ' ';
  memcpy (key + left_len + 1, right, right_len);
  key[len] = '\0';
  gpointer p = g_hash_table_lookup (v->merges, key);
  if (key != stack)
    g_free (key);
  return p ? (gint32) GPOINTER_TO_INT (p) - 1 : -1;
}

gboolean
llm_vocab_is_eog (const LlmVocab *v, gint32 id)
{
  if (id < 0 || (guint32) id >= v->n_tokens)
    return FALSE;
  return id == v->eos || id == v->eot || id == v->eom || v->tokens[id].eog;
}

/* Reads an optional token id key; out-of-range ids keep the default, as in
 * llama.cpp (files write 0xFFFFFFFF for "none"). */
static void
read_id (const LlmGguf *g, const LlmVocab *v, const char *key, gint32 *id)
{
  guint64 val;
  if (*id >= 0 && (guint32) *id >= v->n_tokens)
    *id = -1;
  if (llm_gguf_get_uint (g, key, &val, NULL) && val < v->n_tokens)
    *id = (gint32) val;
}

static void
read_flag (const LlmGguf *g, const char *key, gboolean *flag)
{
  gboolean b;
  if (llm_gguf_get_bool (g, key, &b, NULL))
    *flag = b;
}

static gboolean
read_pre (const LlmGguf *g, LlmVocab *v, GError **error)
{
  const char *pre;
  gsize len;
  if (!llm_gguf_get_string (g, KEY_PRE, &pre, &len, NULL)) {
    v->pre = LLM_PRE_DEFAULT;
    return TRUE;
  }
  for (gsize i = 0; i < G_N_ELEMENTS (pre_names); i++) {
    if (strlen (pre_names[i].name) == len && memcmp (pre_names[i].name, pre, len) == 0) {
      v->pre = pre_names[i].type;
      if (v->pre == LLM_PRE_LLAMA3) {
        v->ignore_merges = TRUE;
        v->add_bos = TRUE;
      }
      return TRUE;
    }
  }
  g_autofree char *shown = llm_gguf_escape (pre, len);
  g_set_error (error, LLM_TOKENIZER_ERROR, LLM_TOKENIZER_ERROR_UNSUPPORTED,
      "pre-tokenizer '%s' (%s) is not supported; supported: default, llama3/llama-bpe, "
      "qwen2, gpt-2, deepseek-llm", shown, KEY_PRE);
  return FALSE;
}

static gboolean
read_tokens (const LlmGguf *g, LlmVocab *v, GError **error)
{
  LlmGgufValueType et;
  guint64 n;
  GError *err = NULL;

  if (!llm_gguf_get_array (g, KEY_TOKENS, &et, &n, &err)) {
    invalid (error, "no tokenizer vocabulary (%s is missing or not an array)", KEY_TOKENS);
    g_error_free (err);
    return FALSE;
  }
  if (et != LLM_GGUF_STRING)
    return invalid (error, "%s must be an array of strings", KEY_TOKENS);
  if (n == 0 || n > G_MAXINT32)
    return invalid (error, "%s has %" G_GUINT64_FORMAT " tokens", KEY_TOKENS, n);
  v->n_tokens = (guint32) n;

  const float *scores = NULL;
  const gint32 *iscores = NULL;
  if (llm_gguf_get_array (g, KEY_SCORES, &et, &n, NULL)) {
    if ((et != LLM_GGUF_FLOAT32 && et != LLM_GGUF_INT32) || n < v->n_tokens)
      return invalid (error, "%s must be float32 or int32 with one value per token "
          "(%" G_GUINT64_FORMAT " values for %u tokens)", KEY_SCORES, n, v->n_tokens);
    if (et == LLM_GGUF_FLOAT32)
      scores = llm_gguf_array_data (g, KEY_SCORES);
    else
      iscores = llm_gguf_array_data (g, KEY_SCORES);
  }
  const gint32 *types = NULL;
  if (llm_gguf_get_array (g, KEY_TYPES, &et, &n, NULL)) {
    if (et != LLM_GGUF_INT32 || n < v->n_tokens)
      return invalid (error, "%s must be int32 with one value per token "
          "(%" G_GUINT64_FORMAT " values for %u tokens)", KEY_TYPES, n, v->n_tokens);
    types = llm_gguf_array_data (g, KEY_TYPES);
  }

  v->tokens = g_new0 (LlmToken, v->n_tokens);
  for (guint32 i = 0; i < v->n_tokens; i++) {
    gsize len;
    const char *s = llm_gguf_array_string (g, KEY_TOKENS, i, &len);
    LlmToken *t = &v->tokens[i];
    if (memchr (s, 0, len) != NULL)
      return invalid (error, "token %u in %s contains a NUL byte", i, KEY_TOKENS);
    if (len == 0) {
      /* llama.cpp's placeholder, so that ids and texts stay one-to-one. */
      char *ph = g_strdup_printf ("[EMPTY_%u]", i);
      t->text = g_string_chunk_insert (v->strings, ph);
      t->len = strlen (ph);
      g_free (ph);
    } else {
      if (len > G_MAXUINT32)
        return invalid (error, "token %u in %s is too long", i, KEY_TOKENS);
      t->text = g_string_chunk_insert_len (v->strings, s, len);
      t->len = (guint32) len;
    }
    float score = 0.0f;
    if (scores)
      memcpy (&score, &scores[i], sizeof score);
    else if (iscores) {
      gint32 iv;
      memcpy (&iv, &iscores[i], sizeof iv);
      score = (float) iv;
    }
    t->score = score;
    t->type = LLM_TOKEN_NORMAL;
    if (types) {
      gint32 ty;
      memcpy (&ty, &types[i], sizeof ty);
      t->type = (ty >= LLM_TOKEN_NORMAL && ty <= LLM_TOKEN_BYTE) ? (LlmTokenType) ty
          : LLM_TOKEN_UNDEFINED;
    }
    /* A repeated text maps to its last id, as in the llama.cpp the golden
     * data came from (newer llama.cpp refuses such files). */
    g_hash_table_insert (v->token_to_id, (char *) t->text, GINT_TO_POINTER (i + 1));
  }
  return TRUE;
}

static gboolean
read_merges (const LlmGguf *g, LlmVocab *v, GError **error)
{
  LlmGgufValueType et;
  guint64 n;
  if (!llm_gguf_get_array (g, KEY_MERGES, &et, &n, NULL))
    return invalid (error, "byte-level BPE vocabulary without %s", KEY_MERGES);
  if (et != LLM_GGUF_STRING || n > G_MAXINT32)
    return invalid (error, "%s must be an array of strings", KEY_MERGES);
  v->merges = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint64 i = 0; i < n; i++) {
    gsize len;
    const char *s = llm_gguf_array_string (g, KEY_MERGES, i, &len);
    /* "left right": split at the first space after the first byte. */
    const char *sp = len > 1 ? memchr (s + 1, ' ', len - 1) : NULL;
    if (sp == NULL || memchr (s, 0, len) != NULL)
      continue;
    char *key = g_string_chunk_insert_len (v->strings, s, len);
    if (!g_hash_table_contains (v->merges, key))
      g_hash_table_insert (v->merges, key, GINT_TO_POINTER ((gint) i + 1));
  }
  return TRUE;
}

static void
find_specials (LlmVocab *v)
{
  for (gsize i = 0; i < G_N_ELEMENTS (eot_texts) && v->eot < 0; i++) {
    gint32 id = llm_vocab_lookup (v, eot_texts[i], strlen (eot_texts[i]));
    if (id >= 0)
      v->eot = id;
  }
  if (v->eom < 0)
    v->eom = llm_vocab_lookup (v, "<|eom_id|>", strlen ("<|eom_id|>"));
  for (gsize i = 0; i < G_N_ELEMENTS (eog_texts); i++) {
    gint32 id = llm_vocab_lookup (v, eog_texts[i], strlen (eog_texts[i]));
    if (id >= 0)
      v->tokens[id].eog = TRUE;
  }
  /* Tokens that end generation render as control tokens, as in llama.cpp. */
  gint32 forced[] = { v->eot, v->eom };
  for (gsize i = 0; i < G_N_ELEMENTS (forced); i++)
    if (forced[i] >= 0)
      v->tokens[forced[i]].type = LLM_TOKEN_CONTROL;
  for (guint32 i = 0; i < v->n_tokens; i++)
    if (v->tokens[i].eog)
      v->tokens[i].type = LLM_TOKEN_CONTROL;
}

static int
by_length_desc (gconstpointer a, gconstpointer b, gpointer user)
{
  const LlmVocab *v = user;
  guint32 la = v->tokens[*(const gint32 *) a].len, lb = v->tokens[*(const gint32 *) b].len;
  if (la != lb)
    return la > lb ? -1 : 1;
  return *(const gint32 *) a - *(const gint32 *) b;
}

static void
build_special_cache (LlmVocab *v)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  for (guint32 i = 0; i < v->n_tokens; i++) {
    LlmTokenType t = v->tokens[i].type;
    if (t == LLM_TOKEN_CONTROL || t == LLM_TOKEN_USER_DEFINED || t == LLM_TOKEN_UNKNOWN)
      g_array_append_val (ids, i);
  }
  g_array_sort_with_data (ids, by_length_desc, v);
  v->n_special = ids->len;
  v->special = (gint32 *) g_array_free (ids, FALSE);
}

/* llama.cpp's per-model attribute: phi-3's special tokens swallow the
 * whitespace after them when parsed from text. */
static void
apply_model_quirks (const LlmGguf *g, LlmVocab *v)
{
  g_autofree char *name = llm_gguf_dup_string (g, "general.name", NULL);
  if (name == NULL)
    return;
  g_autofree char *lower = g_ascii_strdown (name, -1);
  if (strstr (lower, "phi-3") == NULL && strstr (lower, "phi3") == NULL)
    return;
  for (guint32 i = 0; i < v->n_special; i++)
    v->tokens[v->special[i]].rstrip = TRUE;
  static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
  gint32 eos_text = llm_vocab_lookup (v, "</s>", 4);
  if (eos_text >= 0)
    v->tokens[eos_text].rstrip = TRUE;
  for (gsize i = 0; i < G_N_ELEMENTS (keep); i++) {
    gint32 id = llm_vocab_lookup (v, keep[i], strlen (keep[i]));
    if (id >= 0)
      v->tokens[id].rstrip = FALSE;
  }
}

static void
build_byte_tokens (LlmVocab *v)
{
  for (int b = 0; b < 256; b++) {
    char buf[8];
    g_snprintf (buf, sizeof buf, "<0x%02X>", b);
    v->byte_token[b] = llm_vocab_lookup (v, buf, 6);
    if (v->byte_token[b] < 0) {
      char c = (char) b;
      v->byte_token[b] = b ? llm_vocab_lookup (v, &c, 1) : -1;
    }
  }
}

static void
compute_hash (LlmVocab *v)
{
  GChecksum *ck = g_checksum_new (G_CHECKSUM_SHA256);
  guint32 n = GUINT32_TO_LE (v->n_tokens);
  g_checksum_update (ck, (const guchar *) &n, sizeof n);
  for (guint32 i = 0; i < v->n_tokens; i++) {
    guint32 len = GUINT32_TO_LE (v->tokens[i].len);
    guint8 type = (guint8) v->tokens[i].type;
    g_checksum_update (ck, (const guchar *) &len, sizeof len);
    g_checksum_update (ck, (const guchar *) v->tokens[i].text, v->tokens[i].len);
    g_checksum_update (ck, &type, 1);
  }
  memcpy (v->hash, g_checksum_get_string (ck), 16);
  v->hash[16] = '\0';
  g_checksum_free (ck);
}

LlmVocab *
llm_vocab_new_from_gguf (const LlmGguf *g, GError **error)
{
  const char *model;
  gsize model_len;
  GError *err = NULL;

  if (!llm_gguf_get_string (g, KEY_MODEL, &model, &model_len, &err)) {
    gboolean missing = g_error_matches (err, LLM_GGUF_ERROR, LLM_GGUF_ERROR_NOT_FOUND);
    g_set_error (error, LLM_TOKENIZER_ERROR, LLM_TOKENIZER_ERROR_INVALID,
        missing ? "the file has no tokenizer (no %s key); use a GGUF made with its tokenizer"
        : "%s is not a string", KEY_MODEL);
    g_error_free (err);
    return NULL;
  }

  LlmVocab *v = g_new0 (LlmVocab, 1);
  v->strings = g_string_chunk_new (1 << 16);
  v->token_to_id = g_hash_table_new (g_str_hash, g_str_equal);
  v->eot = v->eom = v->pad = v->nl = -1;

  if (model_len == 5 && memcmp (model, "llama", 5) == 0) {
    v->kind = LLM_VOCAB_SPM;
    v->bos = 1; v->eos = 2; v->unk = 0;
    v->add_space_prefix = TRUE;
    v->add_bos = TRUE;
  } else if (model_len == 4 && memcmp (model, "gpt2", 4) == 0) {
    v->kind = LLM_VOCAB_BPE;
    /* llama.cpp's defaults for gpt2 vocabularies, kept for agreement. */
    v->bos = 11; v->eos = 11; v->unk = -1;
  } else {
    g_autofree char *shown = llm_gguf_escape (model, model_len);
    g_set_error (error, LLM_TOKENIZER_ERROR, LLM_TOKENIZER_ERROR_UNSUPPORTED,
        "tokenizer model '%s' (%s) is not supported; supported: llama (SentencePiece), "
        "gpt2 (byte-level BPE)", shown, KEY_MODEL);
    llm_vocab_free (v);
    return NULL;
  }

  if (!read_tokens (g, v, error) ||
      (v->kind == LLM_VOCAB_BPE && (!read_pre (g, v, error) || !read_merges (g, v, error)))) {
    llm_vocab_free (v);
    return NULL;
  }
  v->pre = v->kind == LLM_VOCAB_SPM ? LLM_PRE_DEFAULT : v->pre;

  read_flag (g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
  read_id (g, v, "tokenizer.ggml.bos_token_id", &v->bos);
  read_id (g, v, "tokenizer.ggml.eos_token_id", &v->eos);
  read_id (g, v, "tokenizer.ggml.eot_token_id", &v->eot);
  read_id (g, v, "tokenizer.ggml.eom_token_id", &v->eom);
  read_id (g, v, "tokenizer.ggml.unknown_token_id", &v->unk);
  read_id (g, v, "tokenizer.ggml.padding_token_id", &v->pad);
  read_flag (g, "tokenizer.ggml.add_bos_token", &v->add_bos);
  read_flag (g, "tokenizer.ggml.add_eos_token", &v->add_eos);
  if (v->add_bos && v->bos < 0)
    v->add_bos = FALSE;
  if (v->add_eos && v->eos < 0)
    v->add_eos = FALSE;

  find_specials (v);
  build_special_cache (v);
  apply_model_quirks (g, v);
  build_byte_tokens (v);
  v->nl = v->kind == LLM_VOCAB_SPM ? v->byte_token['\n'] : llm_vocab_lookup (v, "\xc4\x8a", 2);
  compute_hash (v);
  return v;
}

void
llm_vocab_free (LlmVocab *v)
{
  if (v == NULL)
    return;
  g_free (v->tokens);
  g_free (v->special);
  g_hash_table_unref (v->token_to_id);
  if (v->merges)
    g_hash_table_unref (v->merges);
  g_string_chunk_free (v->strings);
  g_free (v);
}
