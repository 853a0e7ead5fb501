/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-family encoders behind llm_tokenizer_encode(). Each encodes one run of
 * raw text (special tokens already split out) and appends ids to @ids. */
#pragma once

#include <glib.h>
#include "vocab.h"

G_BEGIN_DECLS

/* SentencePiece: @text is raw UTF-8; the encoder prepends ' ' when
 * @add_prefix, maps ' ' to U+2581, merges by score, falls back to bytes. */
void llm_spm_encode (const LlmVocab *vocab, const char *text, gsize len,
    gboolean add_prefix, GArray *ids);

/* Byte-level BPE: pre-tokenizes @text by vocab->pre, maps bytes to the GPT-2
 * unicode alphabet, merges each word by rank. */
void llm_bpe_encode (const LlmVocab *vocab, const char *text, gsize len, GArray *ids);

/* Byte-level BPE decoding of a token's text back to raw bytes (the inverse
 * of the GPT-2 byte-to-unicode map). Appends to @out. */
void llm_bpe_token_bytes (const char *text, gsize len, GString *out);

G_END_DECLS
