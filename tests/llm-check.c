/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "llm-check.h"

#include <math.h>
#include <stdio.h>
#include <glib/gstdio.h>

#include "gguf-writer.h"
#include "ggml-type.h"
#include "cpu/fp16.h"
#include "cpu/isa.h"
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

gboolean
llm_test_file_is_mapped (const char *path)
{
  GStatBuf st;
  ck_assert (g_stat (path, &st) == 0);
  g_autofree char *maps = NULL;
  ck_assert (g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (maps, "\n", -1);
  for (guint i = 0; lines[i]; i++) {
    /* address perms offset dev inode path */
    g_auto (GStrv) f = g_strsplit_set (lines[i], " ", 6);
    if (g_strv_length (f) >= 5 && g_ascii_strtoull (f[4], NULL, 10) == (guint64) st.st_ino &&
        st.st_ino != 0)
      return TRUE;
  }
  return FALSE;
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

/* A new temporary folder, or fails the test. */
static char *
temporary_dir (void)
{
  GError *error = NULL;
  char *dir = g_dir_make_tmp ("gst-llm-model-XXXXXX", &error);
  ck_assert_msg (dir != NULL, "%s", error ? error->message : "");
  return dir;
}

/* The model at @path (in the temporary folder @dir), loaded unshared;
 * the file and folder are gone on return: the mapping keeps the data. */
static LlmModel *
load_and_remove (const char *path, const char *dir)
{
  GError *error = NULL;
  LlmModel *m = llm_model_load (path, &error);
  ck_assert_msg (m != NULL, "%s", error ? error->message : "");
  g_unlink (path);
  g_rmdir (dir);
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
  g_autofree char *dir = temporary_dir ();
  g_autofree char *path = g_build_filename (dir, name, NULL);
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s", error->message);
  return load_and_remove (path, dir);
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

LlmModel *
llm_test_random_llama (const LlmTestShape *shape, guint32 type)
{
  g_autofree char *dir = temporary_dir ();
  g_autofree char *path = g_build_filename (dir, "random.gguf", NULL);
  llm_test_write_random_llama (path, shape, type);
  return load_and_remove (path, dir);
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

LlmEngine *
llm_test_new_engine (LlmModel *m, int n_threads)
{
  LlmEngineOptions o;
  llm_engine_options_init (&o);
  o.n_threads = n_threads;
  GError *error = NULL;
  LlmEngine *e = llm_engine_new (m, &o, &error);
  ck_assert_msg (e != NULL, "%s", error ? error->message : "");
  return e;
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

/* --- prepared layouts ---------------------------------------------------- */

void *
llm_test_random_blocks (GRand *rand, guint32 type, size_t rows, size_t n, size_t *row_bytes)
{
  uint32_t block_elems, block_bytes;
  ck_assert (llm_type_info (type, &block_elems, &block_bytes));
  *row_bytes = n / block_elems * block_bytes;
  uint8_t *w = g_malloc (rows * *row_bytes);
  for (size_t i = 0; i < rows * (n / block_elems); i++) {
    uint8_t *blk = w + i * block_bytes;
    const double mag = pow (10.0, g_rand_double_range (rand, -4.0, 0.0));
    const uint16_t d = llm_fp16_from_f32 ((float) (g_rand_boolean (rand) ? mag : -mag));
    memcpy (blk, &d, sizeof d);
    for (size_t j = sizeof d; j < block_bytes; j++)
      blk[j] = (uint8_t) g_rand_int_range (rand, 0, 256);
  }
  return w;
}

void
llm_test_assert_x16_scales (const uint8_t *d, guint16 first)
{
  for (size_t r = 0; r < 16; r++) {
    uint16_t v;
    memcpy (&v, d + 2 * r, 2);
    ck_assert_uint_eq (v, first + r);
  }
}

/* @n_tok rows of activations of scales 1e-2 to 1e2 converted for @type
 * weights, @xs bytes apart. */
static uint8_t *
random_acts (GRand *rand, guint32 type, size_t n, size_t n_tok, guint extreme_every,
    size_t *xs)
{
  *xs = llm_matmul_act_bytes (type, n);
  uint8_t *xq = g_malloc (n_tok * *xs);
  float *x = g_new (float, n);
  for (size_t t = 0; t < n_tok; t++) {
    const double scale = pow (10.0, g_rand_double_range (rand, -2.0, 2.0));
    const gboolean extreme = extreme_every > 0 && t % extreme_every == extreme_every - 1;
    for (size_t i = 0; i < n; i++) {
      const double v = g_rand_double_range (rand, -1.0, 1.0);
      x[i] = (float) ((extreme ? (v < 0 ? -1.0 : 1.0) : v) * scale);
    }
    llm_matmul_convert (llm_cpu_kernels_best (), type, x, n, xq + t * *xs);
  }
  g_free (x);
  return xq;
}

uint8_t *
llm_test_pack (const LlmTestLayout *layout, const void *w, size_t row_bytes, size_t rows,
    size_t n)
{
  uint8_t *p = g_malloc (layout->bytes (rows, n));
  layout->pack (w, row_bytes, rows, n, 0, (rows + 15) / 16, p);
  return p;
}

void
llm_test_problem_init (LlmTestProblem *p, const LlmTestLayout *layout, GRand *rand,
    guint32 type, size_t rows, size_t n, size_t n_tok)
{
  *p = (LlmTestProblem) { .layout = layout, .type = type, .rows = rows, .n = n, .n_tok = n_tok };
  p->w = layout->random_weights (rand, type, rows, n, &p->row_bytes);
  p->xq = random_acts (rand, type, n, n_tok, layout->extreme_every, &p->xs);
  p->packed = llm_test_pack (layout, p->w, p->row_bytes, rows, n);
}

void
llm_test_problem_clear (LlmTestProblem *p)
{
  g_free (p->w);
  g_free (p->xq);
  g_free (p->packed);
}

void
llm_test_scalar_products (const LlmTestProblem *p, float *want)
{
  const LlmCpuKernels *ref = llm_cpu_kernels (LLM_CPU_ISA_SCALAR);
  llm_matmul (ref, p->type, p->w, p->row_bytes, p->n, 0, p->rows, p->xq, p->xs, p->n_tok, want,
      p->rows);
  float *want1 = g_new (float, p->rows);
  llm_matvec (ref, p->type, p->w, p->row_bytes, p->n, 0, p->rows, p->xq, want1);
  ck_assert (memcmp (want1, want, p->rows * sizeof (float)) == 0);
  g_free (want1);
}

/* The kernels a suite checks: the scalar one over the layout, the AVX2
 * one as the environment has it (LLM_NO_AVX_VNNI), or with LLM_NO_AVX_VNNI
 * set, or unset (where that is another kernel), and the AVX-512 one with
 * LLM_NO_AMX set, and unset where that is another kernel (the products of
 * many tokens on AMX). */
typedef enum {
  SCALAR,
  AVX2,
  AVX2_PLAIN,
  AVX2_VNNI,
  AVX512,
  AVX512_AMX,
} Kernel;

#define MOST_KERNELS 5

static const char *const kernel_names[] = { "scalar", "avx2", "avx2", "avx2-vnni", "avx512",
  "avx512-amx" };

/* The suite's kernels, in @kernels; returns how many. */
static size_t
suite_kernels (const LlmTestLayout *layout, Kernel kernels[MOST_KERNELS])
{
  size_t n = 0;
  kernels[n++] = SCALAR;
  if (layout->avx2_apart) {
    kernels[n++] = AVX2_PLAIN;
    kernels[n++] = AVX2_VNNI;
  } else {
    kernels[n++] = AVX2;
  }
  kernels[n++] = AVX512;
  kernels[n++] = AVX512_AMX;
  return n;
}

static LlmTestPackedFn
avx2_lookup (const LlmTestLayout *layout, guint32 type)
{
  return layout->avx2 ? layout->avx2 () : layout->avx2_of (type);
}

static LlmTestPackedFn
avx512_lookup (const LlmTestLayout *layout, guint32 type)
{
  return layout->avx512 ? layout->avx512 () : layout->avx512_of (type);
}

/* @lookup's kernel with the variable @var (LLM_NO_AVX_VNNI, LLM_NO_AMX)
 * set (@on FALSE) or unset, the variable then put back as it was. */
static LlmTestPackedFn
kernel_with (LlmTestPackedFn (*lookup) (const LlmTestLayout *, guint32),
    const LlmTestLayout *layout, guint32 type, const char *var, gboolean on)
{
  char *keep = g_strdup (g_getenv (var));
  if (on)
    g_unsetenv (var);
  else
    g_setenv (var, "1", TRUE);
  const LlmTestPackedFn fn = lookup (layout, type);
  if (keep != NULL)
    g_setenv (var, keep, TRUE);
  else
    g_unsetenv (var);
  g_free (keep);
  return fn;
}

/* Kernel @k of @layout for @type, or NULL where this CPU or build (or
 * LLM_NO_AVX512) lacks it; then *@why says what is missing. */
static LlmTestPackedFn
kernel (const LlmTestLayout *layout, Kernel k, guint32 type, const char **why)
{
  if (k == SCALAR)
    return layout->ref ? layout->ref : layout->ref_of (type);
  if (k == AVX512 || k == AVX512_AMX) {
    *why = "no AVX-512 with VNNI on this CPU or in this build (or LLM_NO_AVX512 set)";
    if (llm_cpu_isa_best () < LLM_CPU_ISA_AVX512)
      return NULL;
    const LlmTestPackedFn plain = kernel_with (avx512_lookup, layout, type, "LLM_NO_AMX", FALSE);
    if (k == AVX512 || plain == NULL)
      return plain;
    *why = "no AMX kernel for this layout, or no AMX on this CPU or in this build";
    const LlmTestPackedFn amx = kernel_with (avx512_lookup, layout, type, "LLM_NO_AMX", TRUE);
    return amx != plain ? amx : NULL;
  }
  *why = "no AVX2/FMA/F16C on this CPU or in this build";
  if (llm_cpu_isa_best () < LLM_CPU_ISA_AVX2)
    return NULL;
  if (k == AVX2)
    return avx2_lookup (layout, type);
  const LlmTestPackedFn plain = kernel_with (avx2_lookup, layout, type, "LLM_NO_AVX_VNNI", FALSE);
  if (k == AVX2_PLAIN || plain == NULL)
    return plain;
  *why = "no AVX-VNNI on this CPU";
  const LlmTestPackedFn vnni = kernel_with (avx2_lookup, layout, type, "LLM_NO_AVX_VNNI", TRUE);
  return vnni != plain ? vnni : NULL;
}

/* Outputs no kernel may write. */
static const float UNTOUCHED = -12345.0f;

static float *
output_rows (size_t n_tok, size_t ldy)
{
  float *y = g_new (float, n_tok * ldy);
  for (size_t i = 0; i < n_tok * ldy; i++)
    y[i] = UNTOUCHED;
  return y;
}

/* Asserts y[t * ldy + r] is want[t * wld + r] bit for bit for r in
 * [r0, r1), and UNTOUCHED for the other r < ldy. */
static void
assert_rows_equal (const char *what, const float *y, size_t ldy, const float *want, size_t wld,
    size_t r0, size_t r1, size_t n_tok)
{
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < ldy; r++) {
      const float got = y[t * ldy + r];
      const float exp = r >= r0 && r < r1 ? want[t * wld + r] : UNTOUCHED;
      /* ck_assert per value would record millions of passing checks. */
      if (memcmp (&got, &exp, sizeof got) != 0)
        ck_abort_msg ("%s: token %zu row %zu: got %.9g, want %.9g", what, t, r, (double) got,
            (double) exp);
    }
}

/* Asserts |y - ref| <= bound for rows [0, rows) of @n_tok tokens. */
static void
assert_within_bound (const char *what, const float *y, size_t ldy, const float *ref,
    const double *bound, size_t rows, size_t n_tok)
{
  for (size_t t = 0; t < n_tok; t++)
    for (size_t r = 0; r < rows; r++) {
      const double d = fabs ((double) y[t * ldy + r] - (double) ref[t * rows + r]);
      if (!(d <= bound[t * rows + r]))
        ck_abort_msg ("%s: token %zu row %zu: %.9g is %.3g from the reference %.9g, bound %.3g",
            what, t, r, (double) y[t * ldy + r], d, (double) ref[t * rows + r],
            bound[t * rows + r]);
    }
}

/* What @p's layout wants of every kernel for its n_tok tokens: want and,
 * where it bounds the error, ref and bound (else NULL); g_free each. */
static void
expect (const LlmTestProblem *p, float **want, float **ref, double **bound)
{
  const size_t count = p->n_tok * p->rows;
  *want = g_new (float, count);
  p->layout->want (p, *want);
  *ref = NULL;
  *bound = NULL;
  if (p->layout->bound != NULL) {
    *ref = g_new (float, count);
    *bound = g_new (double, count);
    p->layout->bound (p, *ref, *bound);
  }
}

/* The layout the shared tests check: one suite, one layout, a process. */
static const LlmTestLayout *suite_layout;

static size_t
widest (const LlmTestLayout *layout)
{
  return layout->widths.v[layout->widths.n - 1];
}

static size_t
most_tokens (LlmTestSizes token_counts)
{
  return token_counts.v[token_counts.n - 1];
}

/* Every layout holds the file's bytes of each row (so a model is held
 * once), and zero rows up to a whole tile. */
START_TEST (test_packed_size_is_the_files_with_rows_padded_to_16)
{
  const LlmTestLayout *layout = suite_layout;
  const size_t row_counts[] = { 1, 15, 16, 17, 100 };
  for (size_t ty = 0; ty < layout->n_types; ty++)
    for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
      for (size_t b = 0; b < layout->widths.n; b++) {
        const size_t rows = row_counts[a], n = layout->widths.v[b];
        uint64_t row_bytes;
        ck_assert (llm_type_row_bytes (layout->types[ty], n, &row_bytes));
        ck_assert_uint_eq (layout->bytes (rows, n), (rows + 15) / 16 * 16 * row_bytes);
      }
}
END_TEST

/* Tiles [0, 1), [1, 4), [4, 6), [6, 7) of 100 rows packed in turn give one
 * pack's bytes, and the last tile's 12 padding rows unpack to zeros,
 * whatever bytes stand for a zero in the layout. */
START_TEST (test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros)
{
  const LlmTestLayout *layout = suite_layout;
  GRand *rand = g_rand_new_with_seed (11);
  const size_t rows = 100, tiles = 7, n = widest (layout);
  for (size_t ty = 0; ty < layout->n_types; ty++) {
    const guint32 type = layout->types[ty];
    size_t rb;
    void *w = layout->random_weights (rand, type, rows, n, &rb);
    const size_t bytes = layout->bytes (rows, n);
    uint8_t *whole = llm_test_pack (layout, w, rb, rows, n);
    uint8_t *parts = g_malloc (bytes);
    memset (parts, 0xa5, bytes);
    const size_t cuts[] = { 0, 1, 4, 6, tiles };
    for (size_t k = 0; k + 1 < G_N_ELEMENTS (cuts); k++)
      layout->pack (w, rb, rows, n, cuts[k], cuts[k + 1], parts);
    ck_assert (memcmp (whole, parts, bytes) == 0);

    uint64_t row_bytes;
    ck_assert (llm_type_row_bytes (type, n, &row_bytes));
    uint8_t *row = g_malloc (row_bytes), *zeros = g_malloc0 (row_bytes);
    for (size_t r = rows; r < tiles * 16; r++) {
      layout->unpack_row (whole, n, r, row);
      ck_assert_msg (memcmp (row, zeros, row_bytes) == 0, "%s: padding row %zu",
          llm_type_name (type), r);
    }
    g_free (zeros);
    g_free (row);
    g_free (parts);
    g_free (whole);
    g_free (w);
  }
  g_rand_free (rand);
}
END_TEST

START_TEST (test_unpack_row_gives_back_every_original_row)
{
  const LlmTestLayout *layout = suite_layout;
  GRand *rand = g_rand_new_with_seed (12);
  const size_t row_counts[] = { 1, 15, 17, 100 };
  for (size_t ty = 0; ty < layout->n_types; ty++)
    for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
      for (size_t b = 0; b < layout->widths.n; b++) {
        const guint32 type = layout->types[ty];
        const size_t rows = row_counts[a], n = layout->widths.v[b];
        size_t rb;
        uint64_t row_bytes;
        ck_assert (llm_type_row_bytes (type, n, &row_bytes));
        void *w = layout->random_weights (rand, type, rows, n, &rb);
        uint8_t *p = llm_test_pack (layout, w, rb, rows, n);
        uint8_t *row = g_malloc (row_bytes);
        for (size_t r = 0; r < rows; r++) {
          layout->unpack_row (p, n, r, row);
          ck_assert_msg (memcmp (row, (const uint8_t *) w + r * rb, row_bytes) == 0,
              "%s %zu x %zu: row %zu", llm_type_name (type), rows, n, r);
        }
        g_free (row);
        g_free (p);
        g_free (w);
      }
  g_rand_free (rand);
}
END_TEST

/* The engine's path: a matrix the fastest kernels prepare (through
 * llm_prepare_tiles), its rows back as floats, for embedding lookups of a
 * packed table, as the file's rows dequantize. */
START_TEST (test_prepared_rows_dequantize_to_the_files_values)
{
  const LlmTestLayout *layout = suite_layout;
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  const size_t rows = 37, n = 1024;
  GRand *rand = g_rand_new_with_seed (13);
  for (size_t ty = 0; ty < layout->n_types; ty++) {
    const guint32 type = layout->types[ty];
    if (llm_prepared_tile_rows (kern, type) == 0) {
      g_rand_free (rand);
      LLM_TEST_SKIP ("%s kernels keep %s in the file's layout", llm_cpu_kernels_name (kern),
          llm_type_name (type));
    }
    ck_assert_uint_eq (llm_prepared_tile_rows (kern, type), 16);
    ck_assert_uint_eq (llm_prepared_bytes (kern, type, rows, n), layout->bytes (rows, n));
    size_t rb;
    void *w = layout->random_weights (rand, type, rows, n, &rb);
    uint8_t *p = g_malloc (layout->bytes (rows, n));
    llm_prepare_tiles (kern, type, w, rb, rows, n, 0, (rows + 15) / 16, p);
    float *got = g_new (float, n), *want = g_new (float, n);
    for (size_t r = 0; r < rows; r++) {
      ck_assert (llm_dequantize_prepared_row (kern, type, p, n, r, got));
      llm_dequantize_row (type, w, rb, n, r, want);
      ck_assert_msg (memcmp (got, want, n * sizeof (float)) == 0, "%s: row %zu",
          llm_type_name (type), r);
    }
    g_free (got);
    g_free (want);
    g_free (p);
    g_free (w);
  }
  g_rand_free (rand);
}
END_TEST

/* Kernel _i of the suite (skipped where missing) writes what the layout
 * wants for every shape: rows not a multiple of 16, every width and token
 * count, over all rows and (past 19) rows [16, rows - 3), to outputs wider
 * than the matrix (so stray writes show). */
START_TEST (test_each_packed_kernel_gives_the_reference_bits_for_every_shape)
{
  const LlmTestLayout *layout = suite_layout;
  Kernel kernels[MOST_KERNELS];
  ck_assert ((size_t) _i < suite_kernels (layout, kernels));
  const Kernel k = kernels[_i];
  const size_t row_counts[] = { 1, 15, 17, 100 };
  const size_t max_tok = most_tokens (layout->token_counts);
  GRand *rand = g_rand_new_with_seed (20);
  for (size_t ty = 0; ty < layout->n_types; ty++) {
    const guint32 type = layout->types[ty];
    const char *why;
    const LlmTestPackedFn fn = kernel (layout, k, type, &why);
    if (fn == NULL) {
      g_rand_free (rand);
      LLM_TEST_SKIP ("%s: %s", kernel_names[k], why);
    }
    for (size_t a = 0; a < G_N_ELEMENTS (row_counts); a++)
      for (size_t b = 0; b < layout->widths.n; b++) {
        const size_t rows = row_counts[a], n = layout->widths.v[b], ldy = rows + 5;
        LlmTestProblem p;
        llm_test_problem_init (&p, layout, rand, type, rows, n, max_tok);
        float *want, *ref;
        double *bound;
        expect (&p, &want, &ref, &bound);
        for (size_t c = 0; c < layout->token_counts.n; c++) {
          const size_t nt = layout->token_counts.v[c];
          char *what = g_strdup_printf ("%s %s %zu x %zu, %zu tokens", kernel_names[k],
              llm_type_name (type), rows, n, nt);
          float *y = output_rows (nt, ldy);
          ck_assert (fn (n, p.packed, rows, 0, rows, p.xq, p.xs, nt, y, ldy, NULL, 0));
          assert_rows_equal (what, y, ldy, want, rows, 0, rows, nt);
          if (bound != NULL)
            assert_within_bound (what, y, ldy, ref, bound, rows, nt);
          g_free (y);

          if (rows > 19) {
            y = output_rows (nt, ldy);
            ck_assert (fn (n, p.packed, rows, 16, rows - 3, p.xq, p.xs, nt, y, ldy, NULL, 0));
            assert_rows_equal (what, y, ldy, want, rows, 16, rows - 3, nt);
            g_free (y);
          }
          g_free (what);
        }
        g_free (bound);
        g_free (ref);
        g_free (want);
        llm_test_problem_clear (&p);
      }
  }
  g_rand_free (rand);
}
END_TEST

/* Every kernel there is, over 100 rows claimed 16 and 48 at a time, from
 * row 0 and 16, by all of 3 threads. */
START_TEST (test_rows_claimed_by_threads_give_the_reference_bits)
{
  const LlmTestLayout *layout = suite_layout;
  Kernel kernels[MOST_KERNELS];
  const size_t n_kernels = suite_kernels (layout, kernels);
  const size_t rows = 100, ldy = rows + 4, n = widest (layout);
  const size_t max_tok = most_tokens (layout->shared_token_counts);
  GRand *rand = g_rand_new_with_seed (30);
  LlmThreadPool *pool = llm_threadpool_new (3);
  ck_assert (pool != NULL);
  for (size_t ty = 0; ty < layout->n_types; ty++) {
    const guint32 type = layout->types[ty];
    LlmTestProblem p;
    llm_test_problem_init (&p, layout, rand, type, rows, n, max_tok);
    float *want = g_new (float, max_tok * rows);
    layout->want (&p, want);
    for (size_t k = 0; k < n_kernels; k++) {
      const char *why;
      const LlmTestPackedFn fn = kernel (layout, kernels[k], type, &why);
      if (fn == NULL)
        continue;
      /* 64 rows a step shrink to 32 and 16 near the end (claim.h). */
      static const size_t steps[] = { 16, 48, 64 };
      for (size_t c = 0; c < layout->shared_token_counts.n; c++)
        for (size_t si = 0; si < G_N_ELEMENTS (steps); si++)
          for (size_t r0 = 0; r0 <= 16; r0 += 16) {
            const size_t n_tok = layout->shared_token_counts.v[c], step = steps[si];
            float *y = output_rows (n_tok, ldy);
            ck_assert (llm_test_packed_shared (pool, fn, n, p.packed, rows, r0, rows, p.xq, p.xs,
                    n_tok, y, ldy, step));
            char *what = g_strdup_printf ("%s %s, %zu tokens, step %zu from row %zu",
                kernel_names[kernels[k]], llm_type_name (type), n_tok, step, r0);
            assert_rows_equal (what, y, ldy, want, rows, r0, rows, n_tok);
            g_free (what);
            g_free (y);
          }
    }
    g_free (want);
    llm_test_problem_clear (&p);
  }
  llm_threadpool_free (pool);
  g_rand_free (rand);
}
END_TEST

Suite *
llm_test_layout_suite (const char *name, const LlmTestLayout *layout,
    const TTest *const *layout_tests, const TTest *const *kernel_tests)
{
  g_assert (suite_layout == NULL);
  suite_layout = layout;
  Suite *s = suite_create (name);

  TCase *tc = tcase_create ("layout");
  tcase_add_test (tc, test_packed_size_is_the_files_with_rows_padded_to_16);
  for (const TTest *const *t = layout_tests; t != NULL && *t != NULL; t++)
    tcase_add_test (tc, *t);
  tcase_add_test (tc, test_pack_in_tile_ranges_equals_one_pack_and_pads_rows_with_zeros);
  tcase_add_test (tc, test_unpack_row_gives_back_every_original_row);
  if (layout->prepared_rows)
    tcase_add_test (tc, test_prepared_rows_dequantize_to_the_files_values);
  suite_add_tcase (s, tc);

  tc = tcase_create ("kernels");
  tcase_set_timeout (tc, 600);
  for (const TTest *const *t = kernel_tests; t != NULL && *t != NULL; t++)
    tcase_add_test (tc, *t);
  Kernel kernels[MOST_KERNELS];
  tcase_add_loop_test (tc, test_each_packed_kernel_gives_the_reference_bits_for_every_shape, 0,
      (int) suite_kernels (layout, kernels));
  tcase_add_test (tc, test_rows_claimed_by_threads_give_the_reference_bits);
  suite_add_tcase (s, tc);
  return s;
}
