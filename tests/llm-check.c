/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "llm-check.h"

#include <math.h>
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

static float *
random_matrix (guint64 *state, gsize n, float scale, float offset)
{
  float *v = g_new (float, n);
  for (gsize i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = offset + scale * ((float) (gint32) (*state >> 40) / 8388608.0f - 1.0f);
  }
  return v;
}

/* Adds a random tensor and returns its size in the file. */
static gsize
add_random (LlmGgufWriter *w, guint64 *state, const char *name, guint32 type, guint64 ne0,
    guint64 ne1, float scale, float offset)
{
  const guint64 ne[2] = { ne0, ne1 };
  g_autofree float *v = random_matrix (state, ne0 * ne1, scale, offset);
  GError *error = NULL;
  ck_assert_msg (llm_gguf_writer_add_tensor_from_f32 (w, name, ne1 > 1 ? type : LLM_TYPE_F32,
      ne1 > 1 ? 2 : 1, ne, v, &error), "%s: %s", name, error ? error->message : "");
  uint64_t bytes = 0;
  llm_type_row_bytes (ne1 > 1 ? type : LLM_TYPE_F32, ne0, &bytes);
  return bytes * ne1;
}

gsize
llm_test_write_random_llama (const char *path, const LlmTestShape *sh, guint32 type)
{
  g_autofree char *tok_path = llm_test_data_path ("models/stories260K.gguf");
  GError *error = NULL;
  g_autoptr (LlmGguf) tok = llm_gguf_open (tok_path, &error);
  ck_assert_msg (tok != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  llm_gguf_writer_add_string (w, "general.architecture", "llama");
  for (guint64 i = 0; i < llm_gguf_n_kv (tok); i++)
    if (g_str_has_prefix (llm_gguf_key (tok, i), "tokenizer."))
      llm_gguf_writer_copy_kv (w, tok, llm_gguf_key (tok, i));
  llm_gguf_writer_add_uint32 (w, "llama.context_length", 2048);
  llm_gguf_writer_add_uint32 (w, "llama.embedding_length", sh->n_embd);
  llm_gguf_writer_add_uint32 (w, "llama.block_count", sh->n_layer);
  llm_gguf_writer_add_uint32 (w, "llama.feed_forward_length", sh->n_ff);
  llm_gguf_writer_add_uint32 (w, "llama.attention.head_count", sh->n_head);
  llm_gguf_writer_add_uint32 (w, "llama.attention.head_count_kv", sh->n_head_kv);

  const guint n_vocab = 512;
  const guint kv_dim = sh->n_embd / sh->n_head * sh->n_head_kv;
  const float s_embd = 1.0f / sqrtf ((float) sh->n_embd), s_ff = 1.0f / sqrtf ((float) sh->n_ff);
  guint64 state = 20240611;
  gsize read = 0;
  add_random (w, &state, "token_embd.weight", type, sh->n_embd, n_vocab, 0.05f, 0);
  read += add_random (w, &state, "output_norm.weight", type, sh->n_embd, 1, 0.1f, 1);
  read += add_random (w, &state, "output.weight", type, sh->n_embd, n_vocab, s_embd, 0);
  for (guint l = 0; l < sh->n_layer; l++) {
    char name[64];
#define T(suffix, ne0, ne1, scale, offset) \
    (g_snprintf (name, sizeof name, "blk.%u." suffix, l), \
     add_random (w, &state, name, type, ne0, ne1, scale, offset))
    read += T ("attn_norm.weight", sh->n_embd, 1, 0.1f, 1);
    read += T ("attn_q.weight", sh->n_embd, sh->n_embd, s_embd, 0);
    read += T ("attn_k.weight", sh->n_embd, kv_dim, s_embd, 0);
    read += T ("attn_v.weight", sh->n_embd, kv_dim, s_embd, 0);
    read += T ("attn_output.weight", sh->n_embd, sh->n_embd, s_embd, 0);
    read += T ("ffn_norm.weight", sh->n_embd, 1, 0.1f, 1);
    read += T ("ffn_gate.weight", sh->n_embd, sh->n_ff, s_embd, 0);
    read += T ("ffn_up.weight", sh->n_embd, sh->n_ff, s_embd, 0);
    read += T ("ffn_down.weight", sh->n_ff, sh->n_embd, s_ff, 0);
#undef T
  }
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s",
      error ? error->message : "");
  return read;
}

static guint64 rng_state;

void
llm_test_rng_seed (guint64 seed)
{
  rng_state = seed;
}

guint64
llm_test_rng_next (void)
{
  guint64 z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float
llm_test_rng_float (void)
{
  return (float) ((double) (llm_test_rng_next () >> 11) / (double) (1ull << 53) * 2.0 - 1.0);
}

LlmSeq *
llm_test_standalone_seq (LlmModel *m, const LlmKvConfig *kv, int n_threads, gboolean reference)
{
  LlmEngineOptions eo;
  llm_engine_options_init (&eo);
  eo.n_threads = n_threads;
  eo.kernels = reference ? LLM_CPU_KERNELS_SCALAR : LLM_CPU_KERNELS_BEST;
  GError *error = NULL;
  LlmSeq *s = llm_seq_new_standalone_with (m, kv, &eo, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  return s;
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

typedef struct {
  LlmTestPackedFn fn;
  size_t n, rows, r0, r1, xs, n_tok, ldy, step;
  const void *packed, *xq;
  float *y;
  atomic_size_t next;
  atomic_bool failed;
} PackedShared;

static void
packed_shared_task (void *data, int ith, int nth)
{
  (void) ith, (void) nth;
  PackedShared *s = data;
  if (!s->fn (s->n, s->packed, s->rows, s->r0, s->r1, s->xq, s->xs, s->n_tok, s->y, s->ldy,
          &s->next, s->step))
    atomic_store (&s->failed, true);
}

gboolean
llm_test_packed_shared (LlmThreadPool *pool, LlmTestPackedFn fn, size_t n,
    const void *packed, size_t rows, size_t r0, size_t r1, const void *xq, size_t xs,
    size_t n_tok, float *y, size_t ldy, size_t step)
{
  PackedShared s = {
    .fn = fn, .n = n, .rows = rows, .r0 = r0, .r1 = r1, .xs = xs, .n_tok = n_tok,
    .ldy = ldy, .step = step, .packed = packed, .xq = xq, .y = y,
  };
  atomic_init (&s.next, r0);
  atomic_init (&s.failed, false);
  llm_threadpool_run (pool, packed_shared_task, &s);
  return !atomic_load (&s.failed);
}
