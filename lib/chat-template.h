/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Chat templates in GGUF files are Jinja programs; what a single-turn prompt
 * needs from them is the text around the user's message. This recognises
 * the common template families and gives that text as a "{prompt}"
 * wrapper, which llmprefill's prompt-template=auto uses, and wraps a
 * prompt's ids in such a wrapper. */
#pragma once

#include <glib.h>
#include "gguf.h"
#include "tokenizer.h"

G_BEGIN_DECLS

#define LLM_CHAT_TEMPLATE_PLACEHOLDER "{prompt}"

/* A wrapper like "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
 * for @gguf's tokenizer.chat_template, or NULL with @error set when the
 * file has none or its family is not known. Free with g_free. */
char *llm_chat_template_wrapper (const LlmGguf *gguf, GError **error);

/* The family name ("chatml", "llama3", "phi3", "gemma", "llama2") of a
 * Jinja template text, or NULL. */
const char *llm_chat_template_family (const char *jinja);

/* Appends to @out (gint32) what is fed for the @n ids of @prompt: its BOS
 * first if it starts with one, then @system_prompt when
 * @conversation_start, then @wrapper's text before {prompt}, the rest of
 * the prompt, and the wrapper's text after {prompt} (a wrapper without
 * one is all before). The texts are tokenized by @tok with special tokens
 * parsed; NULL or empty ones add nothing, and @tok may be NULL when both
 * are. */
void llm_chat_template_wrap (const LlmTokenizer *tok, const char *system_prompt,
    const char *wrapper, const gint32 *prompt, guint n, gboolean conversation_start,
    GArray *out);

G_END_DECLS
