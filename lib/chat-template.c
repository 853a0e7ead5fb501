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
