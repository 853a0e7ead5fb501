/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text <-> token ids, matching llama.cpp's llama_tokenize / token_to_piece. */
#pragma once

#include <glib.h>
#include "vocab.h"

G_BEGIN_DECLS

#define LLM_TOKENIZER_ERROR (llm_tokenizer_error_quark ())
GQuark llm_tokenizer_error_quark (void);

typedef enum {
  LLM_TOKENIZER_ERROR_UNSUPPORTED,  /* tokenizer model or pre-tokenizer unknown */
  LLM_TOKENIZER_ERROR_INVALID,      /* vocabulary keys inconsistent */
} LlmTokenizerError;

typedef struct _LlmTokenizer LlmTokenizer;

/* Builds a tokenizer from @gguf's tokenizer.ggml.* keys. */
LlmTokenizer *llm_tokenizer_new_from_gguf (const LlmGguf *gguf, GError **error);
/* Opens @path and reads its tokenizer; the file is unmapped afterwards. */
LlmTokenizer *llm_tokenizer_new_from_file (const char *path, GError **error);
void llm_tokenizer_free (LlmTokenizer *tok);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmTokenizer, llm_tokenizer_free)

const LlmVocab *llm_tokenizer_vocab (const LlmTokenizer *tok);

/* Appends the ids of @text (@len bytes of UTF-8; -1 for NUL-terminated) to
 * @ids (a GArray of gint32). @add_special adds BOS/EOS as the file asks;
 * @parse_special turns literal special-token texts into their ids.
 * @space_prefix: for SPM vocabularies with add_space_prefix, whether this
 * text starts a prompt (llama.cpp always passes TRUE). */
void llm_tokenizer_encode (const LlmTokenizer *tok, const char *text, gssize len,
    gboolean add_special, gboolean parse_special, gboolean space_prefix, GArray *ids);

/* Appends the bytes of token @id to @out. Control tokens (BOS, EOS, ...)
 * give nothing unless @special. Returns the number of bytes appended (0 for
 * an id out of range). */
gsize llm_tokenizer_token_to_piece (const LlmTokenizer *tok, gint32 id,
    gboolean special, GString *out);

/* Appends the text of @ids to @out as llama_detokenize does: with
 * @remove_special, a leading BOS and trailing EOS are dropped; the space
 * an SPM add_space_prefix vocabulary put in front of the first word is
 * removed when @strip_leading_space. */
void llm_tokenizer_decode (const LlmTokenizer *tok, const gint32 *ids, gsize n,
    gboolean remove_special, gboolean unparse_special, gboolean strip_leading_space,
    GString *out);

G_END_DECLS
