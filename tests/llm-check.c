/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "llm-check.h"

#include <stdio.h>
#include <glib/gstdio.h>

#include "gguf-writer.h"
#include "ggml-type.h"
#include "cpu/matmul.h"
#include <stdlib.h>

static int skipped;

char *
llm_test_data_path (const char *relative)
{
  return g_build_filename (LLM_TEST_DATA, relative, NULL);
}

char *
llm_test_shared_path (const char *relative)
{
  const char *env = g_getenv ("LLM_SHARED_TESTDATA");
  char *path = g_build_filename (env ? env : LLM_SHARED_TESTDATA, relative, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS)) {
    g_free (path);
    return NULL;
  }
  return path;
}

GBytes *
llm_test_read_file (const char *path)
{
  char *contents = NULL;
  gsize len = 0;
  GError *error = NULL;
  if (!g_file_get_contents (path, &contents, &len, &error))
    ck_abort_msg ("cannot read %s: %s", path, error->message);
  return g_bytes_new_take (contents, len);
}

LlmModel *
llm_test_load_model (const char *name)
{
  g_autofree char *path = g_build_filename (LLM_TEST_DATA, "models", name, NULL);
  GError *error = NULL;
  LlmModel *m = llm_model_load (path, &error);
  if (m == NULL)
    ck_abort_msg ("%s: %s", path, error->message);
  return m;
}

LlmModel *
llm_test_requantized_model (const char *name, guint32 type)
{
  g_autofree char *src_path = g_build_filename (LLM_TEST_DATA, "models", name, NULL);
  GError *error = NULL;
  g_autoptr (LlmGguf) src = llm_gguf_open (src_path, &error);
  ck_assert_msg (src != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  for (guint64 i = 0; i < llm_gguf_n_kv (src); i++)
    ck_assert (llm_gguf_writer_copy_kv (w, src, llm_gguf_key (src, i)));

  uint32_t block_elems, block_bytes;
  ck_assert (llm_type_info (type, &block_elems, &block_bytes));
  for (guint64 i = 0; i < llm_gguf_n_tensors (src); i++) {
    const LlmGgufTensor *t = llm_gguf_tensor (src, i);
    const guint64 rows = t->n_elems / t->ne[0];
    gboolean ok;
    if (t->n_dims == 2 && t->ne[0] % block_elems == 0) {
      g_autofree float *v = g_new (float, t->n_elems);
      for (guint64 r = 0; r < rows; r++)
        llm_dequantize_row (t->type, t->data, t->size / rows, t->ne[0], r, v + r * t->ne[0]);
      ok = llm_gguf_writer_add_tensor_from_f32 (w, t->name, type, t->n_dims, t->ne, v, &error);
    } else {
      ok = llm_gguf_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data, t->size,
          &error);
    }
    ck_assert_msg (ok, "%s: %s", t->name, error ? error->message : "");
  }
  g_autofree char *dir = g_dir_make_tmp ("gst-llm-requant-XXXXXX", &error);
  ck_assert_msg (dir != NULL, "%s", error ? error->message : "");
  g_autofree char *path = g_build_filename (dir, name, NULL);
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s", error->message);
  LlmModel *m = llm_model_load (path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");
  /* The mapping keeps the data; the names go. */
  g_unlink (path);
  g_rmdir (dir);
  return m;
}

LlmSeq *
llm_test_new_seq (LlmEngine *e, const LlmKvConfig *kv)
{
  GError *error = NULL;
  LlmSeq *s = llm_seq_new (e, kv, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  return s;
}

guint
llm_test_argmax (const float *x, guint n)
{
  guint best = 0;
  for (guint i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

void
llm_test_note_skip (void)
{
  skipped++;
}

int
llm_test_run_suite (Suite *suite)
{
  SRunner *runner = srunner_create (suite);
  /* No fork: GstHarness and the skip counter need one address space. */
  srunner_set_fork_status (runner, CK_NOFORK);
  srunner_run_all (runner, CK_NORMAL);
  int run = srunner_ntests_run (runner);
  int failed = srunner_ntests_failed (runner);
  srunner_free (runner);
  printf ("check: %d passed, %d failed\n", run - failed, failed);
  if (failed)
    return EXIT_FAILURE;
  return (run > 0 && skipped == run) ? 77 : EXIT_SUCCESS;
}
