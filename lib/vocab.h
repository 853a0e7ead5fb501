/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A tokenizer vocabulary as described by a GGUF's tokenizer.ggml.* keys. */
#pragma once

#include <glib.h>
#include "gguf.h"

G_BEGIN_DECLS

typedef enum {
  LLM_VOCAB_SPM,    /* tokenizer.ggml.model = "llama": SentencePiece, scores, byte fallback */
  LLM_VOCAB_BPE,    /* tokenizer.ggml.model = "gpt2": byte-level BPE with merges */
} LlmVocabKind;

/* Pre-tokenizers (tokenizer.ggml.pre), BPE only. */
typedef enum {
  LLM_PRE_DEFAULT,      /* "default" or absent */
  LLM_PRE_LLAMA3,       /* "llama3", "llama-v3", "llama-bpe" */
  LLM_PRE_QWEN2,        /* "qwen2" */
  LLM_PRE_GPT2,         /* "gpt-2" */
  LLM_PRE_DEEPSEEK_LLM, /* "deepseek-llm" */
} LlmPreType;

/* tokenizer.ggml.token_type values. */
typedef enum {
  LLM_TOKEN_UNDEFINED = 0,
  LLM_TOKEN_NORMAL = 1,
  LLM_TOKEN_UNKNOWN = 2,
  LLM_TOKEN_CONTROL = 3,
  LLM_TOKEN_USER_DEFINED = 4,
  LLM_TOKEN_UNUSED = 5,
  LLM_TOKEN_BYTE = 6,
} LlmTokenType;

typedef struct {
  const char *text;     /* NUL-terminated (tokens never contain NUL) */
  guint32 len;
  float score;
  LlmTokenType type;
  gboolean eog;         /* ends generation (EOS, EOT, <|im_end|>, ...) */
  gboolean rstrip;      /* special parsing eats whitespace after it (phi-3) */
} LlmToken;

typedef struct {
  LlmVocabKind kind;
  LlmPreType pre;
  guint32 n_tokens;
  LlmToken *tokens;         /* [n_tokens] */

  gint32 bos, eos, eot, eom, unk, pad, nl;   /* -1 when the file has none */
  gboolean add_bos, add_eos, add_space_prefix;
  gboolean ignore_merges;   /* llama3: a whole pre-token that is in the vocab is one token */

  /* text -> id + 1 (0 is "absent"), keys point into @tokens */
  GHashTable *token_to_id;
  /* BPE: "left right" -> rank + 1 */
  GHashTable *merges;
  /* SPM byte fallback: token id for each byte value, -1 if missing */
  gint32 byte_token[256];

  /* Tokens matched literally before tokenizing when special parsing is on
   * (CONTROL, USER_DEFINED, UNKNOWN), longest text first. */
  gint32 *special;
  guint32 n_special;

  /* 16 hex digits identifying the vocabulary (token texts and types). */
  char hash[17];

  /* private */
  GStringChunk *strings;
} LlmVocab;

/* Reads the vocabulary from @gguf. Errors name the key at fault. */
LlmVocab *llm_vocab_new_from_gguf (const LlmGguf *gguf, GError **error);
void llm_vocab_free (LlmVocab *vocab);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmVocab, llm_vocab_free)

/* -1 if @text (of @len bytes) is not a token. */
gint32 llm_vocab_lookup (const LlmVocab *vocab, const char *text, gsize len);
/* Rank of merging @left and @right, or -1. */
gint32 llm_vocab_merge_rank (const LlmVocab *vocab, const char *left, gsize left_len,
    const char *right, gsize right_len);
/* TRUE for end-of-generation tokens (EOS, EOT, EOM). */
gboolean llm_vocab_is_eog (const LlmVocab *vocab, gint32 id);

G_END_DECLS
