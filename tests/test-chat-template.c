/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* prompt-template=auto: the wrapper comes from the model's chat template. */
#include "llm-check.h"

#include <string.h>

#include "chat-template.h"
#include "model.h"
#include "tokenizer.h"

static LlmGguf *
open_data (const char *relative)
{
  g_autofree char *path = llm_test_data_path (relative);
  g_autoptr (GError) error = NULL;
  LlmGguf *g = llm_gguf_open (path, &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "");
  return g;
}

START_TEST (test_qwen2_chat_template_is_chatml)
{
  g_autoptr (LlmGguf) g = open_data ("vocab/ggml-vocab-qwen2.gguf");
  g_autoptr (GError) error = NULL;
  g_autofree char *w = llm_chat_template_wrapper (g, &error);
  ck_assert_str_eq (w, "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n");

  /* the wrapper's markers are single special tokens of that vocabulary */
  g_autoptr (LlmTokenizer) tok = llm_tokenizer_new_from_gguf (g, &error);
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  llm_tokenizer_encode (tok, "<|im_start|>", -1, FALSE, TRUE, FALSE, ids);
  ck_assert_uint_eq (ids->len, 1);
  ck_assert_int_eq (g_array_index (ids, gint32, 0), 151644);
}
END_TEST

START_TEST (test_phi3_chat_template_is_phi3)
{
  g_autoptr (LlmGguf) g = open_data ("vocab/ggml-vocab-phi-3.gguf");
  g_autofree char *w = llm_chat_template_wrapper (g, NULL);
  ck_assert_str_eq (w, "<|user|>\n{prompt}<|end|>\n<|assistant|>\n");
}
END_TEST

START_TEST (test_model_without_chat_template_is_an_error)
{
  g_autoptr (LlmGguf) g = open_data ("models/stories260K.gguf");
  g_autoptr (GError) error = NULL;
  ck_assert_ptr_null (llm_chat_template_wrapper (g, &error));
  ck_assert (g_error_matches (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY));
  ck_assert (strstr (error->message, "tokenizer.chat_template") != NULL);
}
END_TEST

START_TEST (test_template_families_by_marker)
{
  ck_assert_str_eq (llm_chat_template_family ("{{ '<|start_header_id|>' + role }}"), "llama3");
  ck_assert_str_eq (llm_chat_template_family ("{{'<start_of_turn>user'}}"), "gemma");
  ck_assert_str_eq (llm_chat_template_family ("{{ '[INST] ' + content }}"), "llama2");
  ck_assert_ptr_null (llm_chat_template_family ("{{ messages }}"));
}
END_TEST

static Suite *
chat_template_suite (void)
{
  Suite *s = suite_create ("chat-template");
  TCase *tc = tcase_create ("auto");
  tcase_add_test (tc, test_qwen2_chat_template_is_chatml);
  tcase_add_test (tc, test_phi3_chat_template_is_phi3);
  tcase_add_test (tc, test_model_without_chat_template_is_an_error);
  tcase_add_test (tc, test_template_families_by_marker);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (chat_template_suite)
