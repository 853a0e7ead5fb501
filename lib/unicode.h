/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 decoding and codepoint categories, with llama.cpp's conventions for
 * invalid input, so that tokenizers built on them split text as it does. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Category flags of a codepoint. Each assigned codepoint has exactly one of
 * the first eight; WHITESPACE is Unicode's White_Space property (\s). */
typedef enum {
  LLM_CPT_UNDEFINED   = 1 << 0,   /* unassigned (Cn) */
  LLM_CPT_NUMBER      = 1 << 1,   /* \p{N} */
  LLM_CPT_LETTER      = 1 << 2,   /* \p{L} */
  LLM_CPT_SEPARATOR   = 1 << 3,   /* \p{Z} */
  LLM_CPT_MARK        = 1 << 4,   /* \p{M} */
  LLM_CPT_PUNCTUATION = 1 << 5,   /* \p{P} */
  LLM_CPT_SYMBOL      = 1 << 6,   /* \p{S} */
  LLM_CPT_CONTROL     = 1 << 7,   /* \p{C} other than Cn */
  LLM_CPT_WHITESPACE  = 1 << 8,   /* \s */
} LlmCptFlags;

#define LLM_CPT_CATEGORIES 0xff
#define LLM_CPT_REPLACEMENT 0xfffdu
#define LLM_CPT_MAX 0x10ffffu

typedef struct {
  guint32 start;
  guint16 flags;
} LlmUnicodeRange;

/* Generated tables (unicode-data.c): ranges sorted by start, the last one
 * starting at LLM_CPT_MAX + 1 with no flags. */
extern const LlmUnicodeRange llm_unicode_ranges[];
extern const guint llm_unicode_n_ranges;

/* Flags of @cpt; 0 above LLM_CPT_MAX. */
guint16 llm_unicode_flags (guint32 cpt);

/* Decodes the codepoint at *@pos of @text (@len bytes) and advances *@pos
 * past it. Never reads at or past @len. An invalid or truncated sequence
 * yields U+FFFD and advances by one byte, as llama.cpp does; overlong forms
 * and surrogates decode to their value, as llama.cpp's decoder lets them.
 * Requires *@pos < @len. */
guint32 llm_utf8_decode (const char *text, gsize len, gsize *pos);

/* Decodes all of @text; returns a new array (g_free) of *@n_cpts codepoints. */
guint32 *llm_utf8_to_cpts (const char *text, gsize len, gsize *n_cpts);

/* Writes the UTF-8 form of @cpt (<= LLM_CPT_MAX; larger values write
 * U+FFFD) to @out and returns its length, 1 to 4. */
guint llm_utf8_encode (guint32 cpt, char out[4]);

G_END_DECLS
