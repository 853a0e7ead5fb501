/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Byte-level BPE pre-tokenization: splits text into the words that BPE then
 * merges within, exactly as llama.cpp's pre-tokenizer regexes do. */
#pragma once

#include <glib.h>
#include "vocab.h"

G_BEGIN_DECLS

/* Splits @cpts (@n_cpts codepoints) into words by @pre and appends each
 * word's length in codepoints (a gsize) to @word_lens, in text order. The
 * lengths are all non-zero and add up to @n_cpts. */
void llm_pretokenize (LlmPreType pre, const guint32 *cpts, gsize n_cpts, GArray *word_lens);

/* The same words as UTF-8 strings (invalid input bytes become U+FFFD, as
 * BPE sees them). Returns a NULL-terminated array to free with g_strfreev(). */
char **llm_pretokenize_text (LlmPreType pre, const char *text, gsize len);

G_END_DECLS
