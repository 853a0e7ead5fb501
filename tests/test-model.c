/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Loading a model: every way a file can be wrong is a GError in
 * LLM_MODEL_ERROR (or LLM_GGUF_ERROR for a damaged file) whose message
 * names the key, tensor or type at fault; and llm_model_get() shares one
 * LlmModel per (file, device) until the last reference goes. The files are
 * tiny llama models written with the GGUF writer, each broken in one way. */
#include "llm-check.h"

#include <stdarg.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "engine.h"
#include "gguf-writer.h"
#include "model.h"
#include "model-private.h"

#define N_EMBD 32
#define N_LAYER 2
#define N_FF 256        /* ffn_down rows hold one 256-element K-quant block */
#define N_VOCAB 64

/* One way to break the otherwise valid tiny model. */
typedef struct {
  const char *arch;             /* general.architecture; NULL: llama */
  const char *omit_key;         /* hyper-parameter suffix left out */
  guint32 n_head, n_head_kv;    /* 0: 4 and 2 */
  gboolean zero_heads;          /* head_count 0 (n_head 0 means "default") */
  const char *omit_tensor;
  const char *wide_tensor;      /* written with one extra row */
  const char *retype_tensor;    /* written as @retype (zero bytes) */
  guint32 retype;
  gboolean tokenizer;           /* stories260K's 512-token vocabulary */
} Tiny;

static char *tmp_dir;

static void
setup (void)
{
  g_autoptr (GError) error = NULL;
  tmp_dir = g_dir_make_tmp ("gst-llm-model-XXXXXX", &error);
  ck_assert_msg (tmp_dir != NULL, "%s", error ? error->message : "");
}

static void
teardown (void)
{
  GDir *d = g_dir_open (tmp_dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name (d)) != NULL) {
    g_autofree char *p = g_build_filename (tmp_dir, name, NULL);
    g_unlink (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (tmp_dir);
  g_clear_pointer (&tmp_dir, g_free);
}

static void
add_tensor (LlmGgufWriter *w, const Tiny *t, const char *name, guint64 ne0, guint64 ne1)
{
  g_autoptr (GError) error = NULL;
  if (t->omit_tensor && strcmp (name, t->omit_tensor) == 0)
    return;
  if (t->wide_tensor && strcmp (name, t->wide_tensor) == 0)
    ne1 = ne1 > 1 ? ne1 + 1 : 2;
  guint64 ne[2] = { ne0, ne1 };
  guint n_dims = ne1 > 1 ? 2 : 1;
  if (t->retype_tensor && strcmp (name, t->retype_tensor) == 0) {
    guint64 row = 0;
    ck_assert (llm_type_row_bytes (t->retype, ne0, &row));
    g_autofree guint8 *zeros = g_malloc0 (row * ne1);
    ck_assert_msg (llm_gguf_writer_add_tensor (w, name, t->retype, n_dims, ne, zeros, row * ne1,
        &error), "%s", error ? error->message : "");
    return;
  }
  /* Small distinct values: the model must run, what it says does not matter. */
  g_autofree float *v = g_new (float, ne0 * ne1);
  for (guint64 i = 0; i < ne0 * ne1; i++)
    v[i] = (float) ((i * 7919) % 97) / 97.0f - 0.5f;
  ck_assert_msg (llm_gguf_writer_add_tensor_from_f32 (w, name, LLM_TYPE_F32, n_dims, ne, v,
      &error), "%s", error ? error->message : "");
}

static void
add_u32 (LlmGgufWriter *w, const Tiny *t, const char *arch, const char *suffix, guint32 v)
{
  if (t->omit_key && strcmp (suffix, t->omit_key) == 0)
    return;
  g_autofree char *key = g_strdup_printf ("%s.%s", arch, suffix);
  ck_assert (llm_gguf_writer_add_uint32 (w, key, v));
}

static GBytes *
tiny_bytes (const Tiny *t)
{
  const char *arch = t->arch ? t->arch : "llama";
  guint32 n_head = t->zero_heads ? 0 : t->n_head ? t->n_head : 4;
  guint32 n_head_kv = t->n_head_kv ? t->n_head_kv : 2;
  guint32 head_dim = 8;
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  llm_gguf_writer_add_string (w, "general.architecture", arch);
  add_u32 (w, t, arch, "context_length", 256);
  add_u32 (w, t, arch, "embedding_length", N_EMBD);
  add_u32 (w, t, arch, "block_count", N_LAYER);
  add_u32 (w, t, arch, "feed_forward_length", N_FF);
  add_u32 (w, t, arch, "attention.head_count", n_head);
  add_u32 (w, t, arch, "attention.head_count_kv", n_head_kv);
  if (t->tokenizer) {
    g_autofree char *path = llm_test_data_path ("models/stories260K.gguf");
    g_autoptr (GError) error = NULL;
    g_autoptr (LlmGguf) tok = llm_gguf_open (path, &error);
    ck_assert_msg (tok != NULL, "%s", error ? error->message : "");
    for (guint64 i = 0; i < llm_gguf_n_kv (tok); i++)
      if (g_str_has_prefix (llm_gguf_key (tok, i), "tokenizer.ggml."))
        ck_assert (llm_gguf_writer_copy_kv (w, tok, llm_gguf_key (tok, i)));
  }

  /* Shapes as if the head count were right, so a bad count is what fails. */
  guint64 q_dim = 4 * head_dim, kv_dim = 2 * head_dim;
  add_tensor (w, t, "token_embd.weight", N_EMBD, N_VOCAB);
  add_tensor (w, t, "output_norm.weight", N_EMBD, 1);
  for (guint l = 0; l < N_LAYER; l++) {
    char n[64];
#define NAME(suffix) (g_snprintf (n, sizeof n, "blk.%u." suffix, l), n)
    add_tensor (w, t, NAME ("attn_norm.weight"), N_EMBD, 1);
    add_tensor (w, t, NAME ("attn_q.weight"), N_EMBD, q_dim);
    add_tensor (w, t, NAME ("attn_k.weight"), N_EMBD, kv_dim);
    add_tensor (w, t, NAME ("attn_v.weight"), N_EMBD, kv_dim);
    add_tensor (w, t, NAME ("attn_output.weight"), q_dim, N_EMBD);
    add_tensor (w, t, NAME ("ffn_norm.weight"), N_EMBD, 1);
    add_tensor (w, t, NAME ("ffn_gate.weight"), N_EMBD, N_FF);
    add_tensor (w, t, NAME ("ffn_up.weight"), N_EMBD, N_FF);
    add_tensor (w, t, NAME ("ffn_down.weight"), N_FF, N_EMBD);
#undef NAME
  }
  g_autoptr (GError) error = NULL;
  GBytes *b = llm_gguf_writer_to_bytes (w, &error);
  ck_assert_msg (b != NULL, "%s", error ? error->message : "");
  return b;
}

/* Writes @t as @file in the temp dir (whole, or its first @keep bytes when
 * @keep > 0) and returns the path. */
static char *
write_tiny_part (const Tiny *t, const char *file, gsize keep)
{
  g_autoptr (GBytes) b = tiny_bytes (t);
  gsize size = g_bytes_get_size (b);
  char *path = g_build_filename (tmp_dir, file, NULL);
  g_autoptr (GError) error = NULL;
  ck_assert_msg (g_file_set_contents (path, g_bytes_get_data (b, NULL),
      keep ? MIN (keep, size) : size, &error), "%s", error ? error->message : "");
  return path;
}

static char *
write_tiny (const Tiny *t, const char *file)
{
  return write_tiny_part (t, file, 0);
}

/* Loading @t fails with @domain/@code and a message containing each of the
 * NULL-terminated strings that follow. */
static void
assert_load_fails (const Tiny *t, GQuark domain, int code, ...)
{
  g_autofree char *path = write_tiny (t, "broken.gguf");
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert_msg (m == NULL, "a broken model loaded");
  ck_assert (error != NULL);
  g_print ("model error: %s\n", error->message);
  ck_assert_msg (g_error_matches (error, domain, code), "wrong error (%s %d): %s",
      g_quark_to_string (error->domain), error->code, error->message);
  ck_assert_msg (g_utf8_validate (error->message, -1, NULL), "the message is not UTF-8");
  va_list ap;
  va_start (ap, code);
  for (const char *s = va_arg (ap, const char *); s; s = va_arg (ap, const char *))
    ck_assert_msg (strstr (error->message, s) != NULL, "'%s' does not name '%s'",
        error->message, s);
  va_end (ap);
}

/* --- errors ---------------------------------------------------------- */

START_TEST (test_model_valid_tiny_model_loads)
{
  Tiny t = { .tokenizer = FALSE };
  g_autofree char *path = write_tiny (&t, "ok.gguf");
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq (m->hp.n_head, 4);
  ck_assert_uint_eq (m->hp.n_head_kv, 2);
  ck_assert_uint_eq (m->hp.head_dim, 8);
  ck_assert_uint_eq (m->hp.n_vocab, N_VOCAB);
  ck_assert_ptr_eq (m->output, m->tok_embd);
}
END_TEST

START_TEST (test_model_unknown_architecture_is_named)
{
  Tiny t = { .arch = "gpt-j" };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_ARCH, "'gpt-j'", "llama", "qwen2",
      "qwen3", NULL);
}
END_TEST

/* Bytes of the file that are not UTF-8 are spelled \xNN in the message. */
START_TEST (test_model_non_utf8_architecture_is_escaped)
{
  Tiny t = { .arch = "ll\xff\xfe" "ama" };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_ARCH, "'ll\\xff\\xfeama'", NULL);
}
END_TEST

START_TEST (test_model_missing_block_count_is_named)
{
  Tiny t = { .omit_key = "block_count" };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY, "llama.block_count", NULL);
}
END_TEST

START_TEST (test_model_missing_tensor_is_named)
{
  Tiny t = { .omit_tensor = "blk.1.ffn_up.weight" };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR, "'blk.1.ffn_up.weight'",
      "missing", NULL);
}
END_TEST

START_TEST (test_model_wrong_shape_is_named)
{
  Tiny t = { .wide_tensor = "blk.0.attn_k.weight" };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR, "'blk.0.attn_k.weight'",
      "[32, 17, 1, 1]", "expected [32, 16]", NULL);
}
END_TEST

START_TEST (test_model_wrong_norm_shape_is_named)
{
  Tiny t = { .wide_tensor = "output_norm.weight" };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR, "'output_norm.weight'", NULL);
}
END_TEST

START_TEST (test_model_unsupported_q2_k_is_named)
{
  Tiny t = { .retype_tensor = "blk.1.ffn_down.weight", .retype = LLM_TYPE_Q2_K };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TYPE, "'blk.1.ffn_down.weight'",
      "Q2_K", NULL);
}
END_TEST

START_TEST (test_model_unsupported_iq4_nl_is_named)
{
  Tiny t = { .retype_tensor = "blk.0.attn_q.weight", .retype = LLM_TYPE_IQ4_NL };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TYPE, "'blk.0.attn_q.weight'",
      "IQ4_NL", NULL);
}
END_TEST

START_TEST (test_model_heads_not_multiple_of_kv_heads_fails)
{
  Tiny t = { .n_head = 4, .n_head_kv = 3 };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY, "heads 4", "kv heads 3",
      "multiple", NULL);
}
END_TEST

START_TEST (test_model_zero_heads_fails)
{
  Tiny t = { .zero_heads = TRUE };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_KEY, "heads 0", NULL);
}
END_TEST

START_TEST (test_model_tokenizer_larger_than_embedding_fails)
{
  Tiny t = { .tokenizer = TRUE };
  assert_load_fails (&t, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR, "512 tokens", "64 rows", NULL);
}
END_TEST

/* Loads the first @keep bytes of the tiny model; returns the error. */
static GError *
load_cut (gsize keep, char **path_out)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny_part (&t, "cut.gguf", keep);
  GError *error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert_msg (m == NULL, "%" G_GSIZE_FORMAT " bytes of a model loaded", keep);
  g_print ("model error: %s\n", error->message);
  ck_assert (strstr (error->message, path) != NULL);
  *path_out = g_steal_pointer (&path);
  return error;
}

START_TEST (test_model_truncated_header_fails)
{
  Tiny t = { 0 };
  g_autoptr (GBytes) whole = tiny_bytes (&t);
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmGguf) g = llm_gguf_new_from_bytes (whole, &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "");
  guint64 header = llm_gguf_data_offset (g);

  /* Cut early, the reader sees counts the file cannot hold (a format
   * error, found before reading on); cut among the tensor descriptions, it
   * runs out of bytes. Either way the error is the reader's and names the
   * file. */
  g_autofree char *path = NULL;
  g_autoptr (GError) early = load_cut (200, &path);
  ck_assert (early->domain == LLM_GGUF_ERROR);
  ck_assert (early->code == LLM_GGUF_ERROR_FORMAT || early->code == LLM_GGUF_ERROR_TRUNCATED);
  g_autofree char *path2 = NULL;
  g_autoptr (GError) late = load_cut (header - 40, &path2);
  ck_assert (g_error_matches (late, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TRUNCATED));
}
END_TEST

START_TEST (test_model_truncated_tensor_data_names_the_tensor)
{
  Tiny t = { 0 };
  g_autoptr (GBytes) whole = tiny_bytes (&t);
  /* The last tensor written is blk.1.ffn_down.weight. */
  g_autofree char *path = write_tiny_part (&t, "cut.gguf", g_bytes_get_size (whole) - 100);
  g_autoptr (GError) error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert (m == NULL);
  g_print ("model error: %s\n", error->message);
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TRUNCATED));
  ck_assert (strstr (error->message, "'blk.1.ffn_down.weight'") != NULL);
}
END_TEST

START_TEST (test_model_get_reports_load_errors)
{
  Tiny t = { .omit_tensor = "blk.1.ffn_up.weight" };
  g_autofree char *path = write_tiny (&t, "broken.gguf");
  g_autoptr (GError) error = NULL;
  ck_assert (llm_model_get (path, "cpu", &error) == NULL);
  ck_assert (g_error_matches (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_TENSOR));
  /* A failed load is not remembered: once the file is fixed, it loads. */
  Tiny ok = { 0 };
  g_autofree char *fixed = write_tiny (&ok, "broken.gguf");
  g_clear_error (&error);
  g_autoptr (LlmModel) m = llm_model_get (fixed, "cpu", &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");
}
END_TEST

/* --- sharing --------------------------------------------------------- */

START_TEST (test_model_get_twice_shares_one_model)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny (&t, "shared.gguf");
  g_autoptr (GError) error = NULL;
  LlmModel *a = llm_model_get (path, "cpu", &error);
  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  LlmModel *b = llm_model_get (path, NULL, &error);  /* NULL: cpu */
  ck_assert_ptr_eq (a, b);
  ck_assert_str_eq (a->device, "cpu");
  /* A private load is its own model. */
  g_autoptr (LlmModel) own = llm_model_load (path, &error);
  ck_assert_ptr_ne (own, a);
  llm_model_unref (a);
  llm_model_unref (b);
}
END_TEST

START_TEST (test_model_get_shares_across_path_spellings)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny (&t, "shared.gguf");
  g_autofree char *dotted = g_build_filename (tmp_dir, ".", "shared.gguf", NULL);
  g_autofree char *doubled = g_strdup_printf ("%s//shared.gguf", tmp_dir);
  g_autofree char *cwd = g_get_current_dir ();
  ck_assert (g_chdir (tmp_dir) == 0);

  g_autoptr (GError) error = NULL;
  LlmModel *a = llm_model_get (path, "cpu", &error);
  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  const char *spellings[] = { "./shared.gguf", "shared.gguf", dotted, doubled };
  for (guint i = 0; i < G_N_ELEMENTS (spellings); i++) {
    LlmModel *b = llm_model_get (spellings[i], "cpu", &error);
    ck_assert_msg (b != NULL, "%s", error ? error->message : "");
    ck_assert_msg (b == a, "'%s' loaded a second copy of %s", spellings[i], path);
    llm_model_unref (b);
  }
  ck_assert (g_chdir (cwd) == 0);
  llm_model_unref (a);
}
END_TEST

START_TEST (test_model_get_shares_through_a_symlink)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny (&t, "shared.gguf");
  g_autofree char *link = g_build_filename (tmp_dir, "link.gguf", NULL);
  ck_assert (symlink ("shared.gguf", link) == 0);

  g_autoptr (GError) error = NULL;
  LlmModel *a = llm_model_get (path, "cpu", &error);
  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  LlmModel *b = llm_model_get (link, "cpu", &error);
  ck_assert_msg (b != NULL, "%s", error ? error->message : "");
  gboolean same = a == b;
  llm_model_unref (b);
  llm_model_unref (a);
  ck_assert_msg (same, "a symlink to %s loaded a second copy of the model", path);
}
END_TEST

START_TEST (test_model_get_unknown_device_lists_cpu)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny (&t, "shared.gguf");
  g_autoptr (GError) error = NULL;
  ck_assert (llm_model_get (path, "cuda:0", &error) == NULL);
  ck_assert (g_error_matches (error, LLM_MODEL_ERROR, LLM_MODEL_ERROR_DEVICE));
  ck_assert (strstr (error->message, "'cuda:0'") != NULL);
  ck_assert (strstr (error->message, "cpu") != NULL);
  ck_assert (g_strv_contains (llm_devices_available (), "cpu"));
  /* The failed request did not load or pin anything. */
  ck_assert (!llm_test_file_is_mapped (path));
}
END_TEST

START_TEST (test_model_freed_with_last_reference)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny (&t, "shared.gguf");
  g_autoptr (GError) error = NULL;
  ck_assert (!llm_test_file_is_mapped (path));
  LlmModel *a = llm_model_get (path, "cpu", &error);
  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  ck_assert (llm_test_file_is_mapped (path));

  /* A context holds its own reference. */
  LlmKvConfig kv = { .type = LLM_KV_F32, .policy = LLM_KV_POLICY_FULL, .context_length = 16 };
  LlmSeq *ctx = llm_seq_new_standalone (a, &kv, 1, &error);
  ck_assert_msg (ctx != NULL, "%s", error ? error->message : "");
  LlmModel *b = llm_model_get (path, "cpu", &error);
  ck_assert_ptr_eq (a, b);
  llm_model_unref (a);
  llm_model_unref (b);
  ck_assert (llm_test_file_is_mapped (path));
  gint32 tok = 3;
  float logits[N_VOCAB];
  ck_assert (llm_seq_eval_tokens (ctx, &tok, 1, logits, FALSE, &error));
  llm_seq_free (ctx);
  ck_assert (!llm_test_file_is_mapped (path));

  /* Gone from the table too: the next get loads afresh. */
  LlmModel *c = llm_model_get (path, "cpu", &error);
  ck_assert_msg (c != NULL, "%s", error ? error->message : "");
  ck_assert (llm_test_file_is_mapped (path));
  llm_model_unref (c);
  ck_assert (!llm_test_file_is_mapped (path));
}
END_TEST

typedef struct {
  const char *path;
  LlmModel *got[8];
  GMutex lock;
  GCond cond;
  gboolean go;
} Race;

static gpointer
get_in_thread (gpointer data)
{
  Race *r = ((gpointer *) data)[0];
  guint i = GPOINTER_TO_UINT (((gpointer *) data)[1]);
  g_mutex_lock (&r->lock);
  while (!r->go)
    g_cond_wait (&r->cond, &r->lock);
  g_mutex_unlock (&r->lock);
  r->got[i] = llm_model_get (r->path, "cpu", NULL);
  return NULL;
}

/* Loads run outside the table's lock, so first loads of one file race;
 * every caller still ends with the one model, and the copies the losers
 * loaded are gone. */
START_TEST (test_model_concurrent_gets_share_one_load)
{
  Tiny t = { 0 };
  g_autofree char *path = write_tiny (&t, "shared.gguf");
  Race r = { path, { NULL } };
  GThread *threads[G_N_ELEMENTS (r.got)];
  gpointer args[G_N_ELEMENTS (r.got)][2];
  g_mutex_init (&r.lock);
  g_cond_init (&r.cond);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++) {
    args[i][0] = &r;
    args[i][1] = GUINT_TO_POINTER (i);
    threads[i] = g_thread_new ("get", get_in_thread, args[i]);
  }
  g_mutex_lock (&r.lock);
  r.go = TRUE;
  g_cond_broadcast (&r.cond);
  g_mutex_unlock (&r.lock);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  for (guint i = 0; i < G_N_ELEMENTS (r.got); i++) {
    ck_assert (r.got[i] != NULL);
    ck_assert_ptr_eq (r.got[i], r.got[0]);
  }
  ck_assert_int_eq (g_atomic_int_get (&r.got[0]->ref_count), G_N_ELEMENTS (r.got));
  for (guint i = 0; i < G_N_ELEMENTS (r.got); i++)
    llm_model_unref (r.got[i]);
  ck_assert (!llm_test_file_is_mapped (path));
  g_mutex_clear (&r.lock);
  g_cond_clear (&r.cond);
}
END_TEST

/* One llm_model_get in a thread of its own, for tests that must not hang
 * if it blocks. */
typedef struct {
  char *path;
  LlmModel *model;
  GError *error;
  gboolean done;
  GMutex lock;
  GCond cond;
  GThread *thread;
} Load;

static gpointer
load_thread (gpointer data)
{
  Load *l = data;
  GError *error = NULL;
  LlmModel *m = llm_model_get (l->path, "cpu", &error);
  g_mutex_lock (&l->lock);
  l->model = m;
  l->error = error;
  l->done = TRUE;
  g_cond_signal (&l->cond);
  g_mutex_unlock (&l->lock);
  return NULL;
}

static Load *
load_start (const char *path)
{
  Load *l = g_new0 (Load, 1);
  l->path = g_strdup (path);
  g_mutex_init (&l->lock);
  g_cond_init (&l->cond);
  l->thread = g_thread_new ("load", load_thread, l);
  return l;
}

/* Whether the load finished within @seconds. */
static gboolean
load_wait (Load *l, int seconds)
{
  gint64 until = g_get_monotonic_time () + seconds * G_TIME_SPAN_SECOND;
  g_mutex_lock (&l->lock);
  while (!l->done && g_cond_wait_until (&l->cond, &l->lock, until))
    ;
  gboolean done = l->done;
  g_mutex_unlock (&l->lock);
  return done;
}

static void
load_free (Load *l)
{
  g_thread_join (l->thread);
  g_clear_pointer (&l->model, llm_model_unref);
  g_clear_error (&l->error);
  g_mutex_clear (&l->lock);
  g_cond_clear (&l->cond);
  g_free (l->path);
  g_free (l);
}

/* Opening a FIFO blocks until a writer comes; it used to happen under the
 * model table's lock, so every other load in the process waited too. The
 * FIFO is refused at once now, and a load beside it goes through. Were a
 * load to block, the test opens the FIFO for writing to free it and then
 * fails, instead of hanging. */
START_TEST (test_model_get_of_a_fifo_fails_at_once_and_holds_up_no_other_load)
{
  Tiny t = { 0 };
  g_autofree char *ok = write_tiny (&t, "ok.gguf");
  g_autofree char *fifo = g_build_filename (tmp_dir, "pipe.gguf", NULL);
  ck_assert (mkfifo (fifo, 0600) == 0);

  Load *a = load_start (fifo);
  g_usleep (50 * 1000);   /* let it get into the load first */
  Load *b = load_start (ok);
  gboolean a_done = load_wait (a, 5), b_done = load_wait (b, 5);
  if (!a_done) {
    int fd = open (fifo, O_WRONLY | O_NONBLOCK);
    if (fd >= 0)
      close (fd);
  }
  ck_assert_msg (a_done, "llm_model_get blocked on a FIFO");
  ck_assert_msg (b_done, "a FIFO being loaded held up the load of another model");

  ck_assert_ptr_null (a->model);
  ck_assert_msg (g_error_matches (a->error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO), "%s",
      a->error->message);
  g_autofree char *expected = g_strdup_printf ("%s: is not a regular file but a named pipe "
      "(FIFO)", fifo);
  ck_assert_msg (strstr (a->error->message, expected) != NULL, "%s", a->error->message);
  ck_assert_msg (b->model != NULL, "%s", b->error ? b->error->message : "");
  load_free (a);
  load_free (b);

  g_autoptr (GError) error = NULL;
  ck_assert_ptr_null (llm_model_get (tmp_dir, "cpu", &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO));
  ck_assert_msg (strstr (error->message, "is a directory") != NULL, "%s", error->message);
}
END_TEST

/* A prompt in one call (several 128-token chunks, batched kernels) and the
 * same prompt in uneven pieces, single tokens included (matrix-vector
 * kernels), leave the same last logits bit for bit: chunks join with the
 * right positions and cache rows, and the batched F32 and Q8_0 products
 * and batched attention equal the one-token ones. */
static void
check_prompt_split (const char *name)
{
  g_autofree char *path = g_build_filename (LLM_TEST_DATA, "models", name, NULL);
  GError *error = NULL;
  g_autoptr (LlmModel) m = llm_model_load (path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");
  const guint n = 300, n_vocab = m->hp.n_vocab;
  static const guint pieces[] = { 1, 7, 130, 1, 161 };
  gint32 *ids = g_new (gint32, n);
  guint32 state = 12345;
  for (guint i = 0; i < n; i++) {
    state = state * 1664525u + 1013904223u;
    ids[i] = (gint32) (state >> 8) % (gint32) n_vocab;
  }
  float *whole = g_new (float, n_vocab), *split = g_new (float, n_vocab);
  LlmKvConfig kv = { .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL, .context_length = 512 };
  LlmSeq *a = llm_seq_new_standalone (m, &kv, 2, &error);
  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  ck_assert (llm_seq_eval_tokens (a, ids, n, whole, FALSE, &error));
  LlmSeq *b = llm_seq_new_standalone (m, &kv, 2, &error);
  guint done = 0;
  for (guint i = 0; i < G_N_ELEMENTS (pieces); i++) {
    ck_assert (llm_seq_eval_tokens (b, ids + done, pieces[i], split, FALSE, &error));
    done += pieces[i];
  }
  ck_assert_uint_eq (done, n);
  for (guint v = 0; v < n_vocab; v++)
    ck_assert_msg (whole[v] == split[v], "%s logit %u: %.9g in one call, %.9g in pieces", name,
        v, whole[v], split[v]);
  llm_seq_free (a);
  llm_seq_free (b);
  g_free (ids);
  g_free (whole);
  g_free (split);
}

START_TEST (test_prompt_in_one_call_equals_prompt_in_pieces)
{
  check_prompt_split ("stories260K.gguf");
  check_prompt_split ("TinyStories-656K-Q8_0.gguf");
}
END_TEST

static Suite *
model_suite (void)
{
  Suite *s = suite_create ("model");
  TCase *errors = tcase_create ("errors");
  tcase_add_checked_fixture (errors, setup, teardown);
  tcase_add_test (errors, test_model_valid_tiny_model_loads);
  tcase_add_test (errors, test_model_unknown_architecture_is_named);
  tcase_add_test (errors, test_model_non_utf8_architecture_is_escaped);
  tcase_add_test (errors, test_model_missing_block_count_is_named);
  tcase_add_test (errors, test_model_missing_tensor_is_named);
  tcase_add_test (errors, test_model_wrong_shape_is_named);
  tcase_add_test (errors, test_model_wrong_norm_shape_is_named);
  tcase_add_test (errors, test_model_unsupported_q2_k_is_named);
  tcase_add_test (errors, test_model_unsupported_iq4_nl_is_named);
  tcase_add_test (errors, test_model_heads_not_multiple_of_kv_heads_fails);
  tcase_add_test (errors, test_model_zero_heads_fails);
  tcase_add_test (errors, test_model_tokenizer_larger_than_embedding_fails);
  tcase_add_test (errors, test_model_truncated_header_fails);
  tcase_add_test (errors, test_model_truncated_tensor_data_names_the_tensor);
  tcase_add_test (errors, test_model_get_reports_load_errors);
  suite_add_tcase (s, errors);

  TCase *sharing = tcase_create ("sharing");
  tcase_add_checked_fixture (sharing, setup, teardown);
  tcase_set_timeout (sharing, 120);
  tcase_add_test (sharing, test_model_get_twice_shares_one_model);
  tcase_add_test (sharing, test_model_get_shares_across_path_spellings);
  tcase_add_test (sharing, test_model_get_shares_through_a_symlink);
  tcase_add_test (sharing, test_model_get_unknown_device_lists_cpu);
  tcase_add_test (sharing, test_model_freed_with_last_reference);
  tcase_add_test (sharing, test_model_concurrent_gets_share_one_load);
  tcase_add_test (sharing, test_model_get_of_a_fifo_fails_at_once_and_holds_up_no_other_load);
  suite_add_tcase (s, sharing);

  TCase *eval = tcase_create ("eval");
  tcase_set_timeout (eval, 120);
  tcase_add_test (eval, test_prompt_in_one_call_equals_prompt_in_pieces);
  suite_add_tcase (s, eval);
  return s;
}

LLM_TEST_MAIN (model_suite)
