/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes the fuzzer's seed corpus with our own writer: a few small valid
 * GGUF files that between them use every value type, nested and string
 * arrays, a custom alignment and every tensor type the writer converts to.
 * Usage: gguf_seeds DIR */
#include <stdio.h>
#include <stdlib.h>

#include "gguf-writer.h"

static void
save (LlmGgufWriter *w, const char *dir, const char *name)
{
  GError *error = NULL;
  char *path = g_build_filename (dir, name, NULL);
  if (!llm_gguf_writer_write_file (w, path, &error)) {
    fprintf (stderr, "gguf_seeds: %s\n", error->message);
    exit (1);
  }
  g_free (path);
  llm_gguf_writer_free (w);
}

static void
add_tensor (LlmGgufWriter *w, const char *name, guint32 type, guint n_dims,
    const guint64 *ne)
{
  float x[256];
  for (int i = 0; i < 256; i++)
    x[i] = (float) ((i * 37) % 19) - 9.5f;
  GError *error = NULL;
  if (!llm_gguf_writer_add_tensor_from_f32 (w, name, type, n_dims, ne, x, &error)) {
    fprintf (stderr, "gguf_seeds: %s\n", error->message);
    exit (1);
  }
}

int
main (int argc, char **argv)
{
  if (argc != 2) {
    fprintf (stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  g_mkdir_with_parents (dir, 0755);

  LlmGgufWriter *w = llm_gguf_writer_new ();
  save (w, dir, "empty.gguf");

  w = llm_gguf_writer_new ();
  llm_gguf_writer_add_uint8 (w, "u8", 200);
  llm_gguf_writer_add_int8 (w, "i8", -5);
  llm_gguf_writer_add_uint16 (w, "u16", 60000);
  llm_gguf_writer_add_int16 (w, "i16", -300);
  llm_gguf_writer_add_uint32 (w, "u32", 70000);
  llm_gguf_writer_add_int32 (w, "i32", -70000);
  llm_gguf_writer_add_float32 (w, "f32", 1e-5f);
  llm_gguf_writer_add_bool (w, "bool", TRUE);
  llm_gguf_writer_add_uint64 (w, "u64", G_MAXUINT64);
  llm_gguf_writer_add_int64 (w, "i64", G_MININT64);
  llm_gguf_writer_add_float64 (w, "f64", 2.5);
  llm_gguf_writer_add_string (w, "general.architecture", "llama");
  save (w, dir, "scalars.gguf");

  w = llm_gguf_writer_new ();
  const char *tokens[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81the", "" };
  llm_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", tokens, 5);
  const float scores[] = { 0, 0, 0, -1.5f, -2 };
  llm_gguf_writer_add_array (w, "tokenizer.ggml.scores", LLM_GGUF_FLOAT32, scores, 5);
  const gint32 types[] = { 2, 3, 3, 1, 1 };
  llm_gguf_writer_add_array (w, "tokenizer.ggml.token_type", LLM_GGUF_INT32, types, 5);
  const void *inner[] = { types, scores };
  const guint64 lens[] = { 5, 0 };
  llm_gguf_writer_add_nested_array (w, "nested", LLM_GGUF_INT32, inner, lens, 2);
  const void *inner_str[] = { tokens };
  const guint64 lens_str[] = { 3 };
  llm_gguf_writer_add_nested_array (w, "nested_str", LLM_GGUF_STRING, inner_str, lens_str, 1);
  save (w, dir, "arrays.gguf");

  w = llm_gguf_writer_new ();
  llm_gguf_writer_add_string (w, "general.architecture", "llama");
  add_tensor (w, "f32", LLM_TYPE_F32, 1, (const guint64[]) { 3 });
  add_tensor (w, "f16", LLM_TYPE_F16, 2, (const guint64[]) { 5, 2 });
  add_tensor (w, "bf16", LLM_TYPE_BF16, 3, (const guint64[]) { 2, 2, 2 });
  add_tensor (w, "q8_0", LLM_TYPE_Q8_0, 2, (const guint64[]) { 32, 2 });
  add_tensor (w, "q4_0", LLM_TYPE_Q4_0, 4, (const guint64[]) { 32, 1, 2, 1 });
  save (w, dir, "tensors.gguf");

  w = llm_gguf_writer_new ();
  llm_gguf_writer_add_uint32 (w, "general.alignment", 64);
  add_tensor (w, "a", LLM_TYPE_F32, 1, (const guint64[]) { 7 });
  add_tensor (w, "b", LLM_TYPE_Q8_0, 1, (const guint64[]) { 64 });
  save (w, dir, "aligned64.gguf");
  return 0;
}
