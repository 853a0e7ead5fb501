/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "chat-template.h"
#include "model.h"

#include <string.h>

typedef struct {
  const char *family;
  const char *marker;   /* text only this family's templates contain */
  const char *wrapper;
} Family;

/* Most specific markers first: Llama 3 templates also mention other
 * markers in comments, ChatML ones never contain Llama 3's. */
static const Family families[] = {
  { "llama3", "<|start_header_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\n{prompt}<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n" },
  { "chatml", "<|im_start|>",
    "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n" },
  { "phi3", "<|user|>", "<|user|>\n{prompt}<|end|>\n<|assistant|>\n" },
  { "gemma", "<start_of_turn>", "<start_of_turn>user\n{prompt}<end_of_turn>\n<start_of_turn>model\n" },
  { "llama2", "[INST]", "[INST] {prompt} [/INST]" },
};

const char *
llm_chat_template_family (const char *jinja)
{
  for (gsize i = 0; i < G_N_ELEMENTS (families); i++)
    if (strstr (jinja, families[i].marker) != NULL)
      return families[i].family;
  return NULL;
}

char *
llm_chat_template_wrapper (const LlmGguf *gguf, GError **error)
{
  g_autofree char *jinja = llm_gguf_dup_string (gguf, "tokenizer.chat_template", NULL);
  if (jinja == NULL) {
    g_set_error (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
        "the model has no chat template (tokenizer.chat_template); set prompt-template to "
        "the text around the prompt, with {prompt} where it goes");
    return NULL;
  }
  const char *family = llm_chat_template_family (jinja);
  for (gsize i = 0; family && i < G_N_ELEMENTS (families); i++)
    if (strcmp (families[i].family, family) == 0)
      return g_strdup (families[i].wrapper);
  g_set_error (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY,
      "the model's chat template is of a family this build does not know (known: llama3, "
      "chatml, phi3, gemma, llama2); set prompt-template to the text around the prompt, "
      "with {prompt} where it goes");
  return NULL;
}

/* Appends the ids of @len bytes of @text, special tokens parsed, no BOS. */
static void
encode_text (const LlmTokenizer *tok, const char *text, gsize len, gboolean starts_prompt,
    GArray *out)
{
  if (len > 0)
    llm_tokenizer_encode (tok, text, len, FALSE, TRUE, starts_prompt, out);
}

void
llm_chat_template_wrap (const LlmTokenizer *tok, const char *system_prompt,
    const char *wrapper, const gint32 *prompt, guint n, gboolean conversation_start,
    GArray *out)
{
  const LlmVocab *vocab = tok ? llm_tokenizer_vocab (tok) : NULL;

  /* BOS belongs in front of everything we add, not after the system
   * prompt or template opening. */
  if (vocab && n > 0 && vocab->bos >= 0 && prompt[0] == vocab->bos) {
    g_array_append_val (out, prompt[0]);
    prompt++;
    n--;
  }
  gboolean at_start = TRUE;
  if (conversation_start && system_prompt && system_prompt[0]) {
    encode_text (tok, system_prompt, strlen (system_prompt), TRUE, out);
    at_start = FALSE;
  }
  const char *hole = wrapper ? strstr (wrapper, LLM_CHAT_TEMPLATE_PLACEHOLDER) : NULL;
  if (wrapper && wrapper[0]) {
    gsize before = hole ? (gsize) (hole - wrapper) : strlen (wrapper);
    encode_text (tok, wrapper, before, at_start, out);
  }
  g_array_append_vals (out, prompt, n);
  if (hole) {
    const char *after = hole + strlen (LLM_CHAT_TEMPLATE_PLACEHOLDER);
    encode_text (tok, after, strlen (after), FALSE, out);
  }
}
