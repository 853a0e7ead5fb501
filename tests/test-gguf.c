/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The GGUF reader, the GGUF writer and the F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/
 * Q5_1 conversion kernels the writer uses. Corrupt files are built byte by byte here (not
 * with the writer), so the reader is checked against the format itself. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "llm-check.h"
#include "gguf.h"
#include "gguf-writer.h"
#include "cpu/fp16.h"
#include "cpu/quantize.h"

/* --- helpers --- */

static guint32
f32_bits (float f)
{
  guint32 u;
  memcpy (&u, &f, sizeof u);
  return u;
}

static float
bits_f32 (guint32 u)
{
  float f;
  memcpy (&f, &u, sizeof f);
  return f;
}

static LlmGguf *
open_data_file (const char *relative)
{
  g_autofree char *path = llm_test_data_path (relative);
  GError *error = NULL;
  LlmGguf *g = llm_gguf_open (path, &error);
  ck_assert_msg (g != NULL, "%s: %s", path, error ? error->message : "?");
  return g;
}

static LlmGguf *
load_bytes (GBytes *bytes)
{
  GError *error = NULL;
  LlmGguf *g = llm_gguf_new_from_bytes (bytes, &error);
  ck_assert_msg (g != NULL, "reader rejected the file: %s", error ? error->message : "?");
  return g;
}

static GBytes *
writer_bytes (LlmGgufWriter *w)
{
  GError *error = NULL;
  GBytes *b = llm_gguf_writer_to_bytes (w, &error);
  ck_assert_msg (b != NULL, "writer failed: %s", error ? error->message : "?");
  return b;
}

/* Feeds @len bytes to the reader from an allocation of exactly that size,
 * so a read past the end lands in valgrind's/ASan's red zone. Returns the
 * error, which must exist and be in the GGUF domain. */
static GError *
load_fails (const guint8 *data, gsize len)
{
  GError *error = NULL;
  GBytes *b = g_bytes_new (data, len);
  LlmGguf *g = llm_gguf_new_from_bytes (b, &error);
  g_bytes_unref (b);
  ck_assert_msg (g == NULL, "a corrupt file of %zu bytes loaded", len);
  llm_gguf_free (g);
  ck_assert (error != NULL);
  ck_assert_msg (error->domain == LLM_GGUF_ERROR, "error domain is %s",
      g_quark_to_string (error->domain));
  ck_assert (error->message != NULL && error->message[0] != '\0');
  return error;
}

/* Asserts the raw file fails with @code and a message that mentions each
 * of the NULL-terminated needles. */
static void
expect_error (GByteArray *raw, LlmGgufError code, ...)
{
  GError *error = load_fails (raw->data, raw->len);
  ck_assert_msg (error->code == (gint) code, "error code %d, expected %d: %s",
      error->code, code, error->message);
  va_list ap;
  va_start (ap, code);
  for (const char *needle = va_arg (ap, const char *); needle;
      needle = va_arg (ap, const char *))
    ck_assert_msg (strstr (error->message, needle) != NULL,
        "message lacks \"%s\": %s", needle, error->message);
  va_end (ap);
  g_error_free (error);
  g_byte_array_unref (raw);
}

/* --- raw GGUF bytes, built by hand --- */

static void
raw_u32 (GByteArray *b, guint32 v)
{
  v = GUINT32_TO_LE (v);
  g_byte_array_append (b, (const guint8 *) &v, 4);
}

static void
raw_u64 (GByteArray *b, guint64 v)
{
  v = GUINT64_TO_LE (v);
  g_byte_array_append (b, (const guint8 *) &v, 8);
}

static void
raw_str (GByteArray *b, const char *s)
{
  raw_u64 (b, strlen (s));
  g_byte_array_append (b, (const guint8 *) s, strlen (s));
}

static void
raw_zeros (GByteArray *b, gsize n)
{
  g_byte_array_set_size (b, b->len + n);
  memset (b->data + b->len - n, 0, n);
}

static void
raw_pad (GByteArray *b, guint32 alignment)
{
  raw_zeros (b, (alignment - b->len % alignment) % alignment);
}

static GByteArray *
raw_header (guint32 version, guint64 n_tensors, guint64 n_kv)
{
  GByteArray *b = g_byte_array_new ();
  g_byte_array_append (b, (const guint8 *) "GGUF", 4);
  raw_u32 (b, version);
  raw_u64 (b, n_tensors);
  raw_u64 (b, n_kv);
  return b;
}

static void
raw_kv_u32 (GByteArray *b, const char *key, guint32 v)
{
  raw_str (b, key);
  raw_u32 (b, LLM_GGUF_UINT32);
  raw_u32 (b, v);
}

static void
raw_kv_str (GByteArray *b, const char *key, const char *v)
{
  raw_str (b, key);
  raw_u32 (b, LLM_GGUF_STRING);
  raw_str (b, v);
}

/* A tensor info; ne has @n_dims entries. */
static void
raw_tensor (GByteArray *b, const char *name, guint32 n_dims, const guint64 *ne,
    guint32 type, guint64 offset)
{
  raw_str (b, name);
  raw_u32 (b, n_dims);
  for (guint32 i = 0; i < n_dims; i++)
    raw_u64 (b, ne[i]);
  raw_u32 (b, type);
  raw_u64 (b, offset);
}

/* One F32 tensor named @name of @n floats at data offset 0, with its data;
 * the smallest well-formed file with a tensor. */
static GByteArray *
raw_one_tensor_file (const char *name, guint64 n)
{
  GByteArray *b = raw_header (3, 1, 1);
  raw_kv_str (b, "general.architecture", "llama");
  raw_tensor (b, name, 1, &n, LLM_TYPE_F32, 0);
  raw_pad (b, 32);
  raw_zeros (b, n * 4);
  return b;
}

/* =================== real files =================== */

START_TEST (test_stories260k_loads_as_llama_with_f32_token_embeddings)
{
  g_autoptr (LlmGguf) g = open_data_file ("models/stories260K.gguf");
  GError *error = NULL;

  ck_assert_uint_eq (llm_gguf_version (g), 3);
  ck_assert_uint_eq (llm_gguf_n_kv (g), 19);
  ck_assert_uint_eq (llm_gguf_n_tensors (g), 48);
  ck_assert_uint_eq (llm_gguf_alignment (g), 32);
  ck_assert_uint_eq (llm_gguf_data_offset (g), 14176);

  g_autofree char *arch = llm_gguf_dup_string (g, "general.architecture", &error);
  ck_assert_str_eq (arch, "llama");
  guint64 u;
  ck_assert (llm_gguf_get_uint (g, "llama.embedding_length", &u, &error));
  ck_assert_uint_eq (u, 64);
  ck_assert (llm_gguf_get_uint (g, "llama.block_count", &u, &error));
  ck_assert_uint_eq (u, 5);
  ck_assert (llm_gguf_get_uint (g, "tokenizer.ggml.padding_token_id", &u, &error));
  ck_assert_uint_eq (u, 4294967295u);
  double eps;
  ck_assert (llm_gguf_get_float (g, "llama.attention.layer_norm_rms_epsilon", &eps, &error));
  ck_assert (eps == (double) 1e-5f);

  const LlmGgufTensor *t = llm_gguf_find_tensor (g, "token_embd.weight");
  ck_assert_ptr_nonnull (t);
  ck_assert_uint_eq (t->type, LLM_TYPE_F32);
  ck_assert_uint_eq (t->n_dims, 2);
  ck_assert_uint_eq (t->ne[0], 64);
  ck_assert_uint_eq (t->ne[1], 512);
  ck_assert_uint_eq (t->ne[2], 1);
  ck_assert_uint_eq (t->ne[3], 1);
  ck_assert_uint_eq (t->n_elems, 64 * 512);
  ck_assert_uint_eq (t->size, 64 * 512 * 4);
  ck_assert_uint_eq (t->offset, 14176);
  guint32 first;
  memcpy (&first, t->data, 4);
  ck_assert_uint_eq (GUINT32_FROM_LE (first), 0xbe96e950);

  /* The last tensor ends exactly at the end of the file. */
  const LlmGgufTensor *last = llm_gguf_tensor (g, 47);
  ck_assert_str_eq (last->name, "blk.4.ffn_norm.weight");
  gsize size;
  llm_gguf_bytes (g, &size);
  ck_assert_uint_eq (last->offset + last->size, size);
  ck_assert_uint_eq (size, 1185376);
}
END_TEST

START_TEST (test_tinystories_656k_loads_with_q8_0_weights)
{
  g_autoptr (LlmGguf) g = open_data_file ("models/TinyStories-656K-Q8_0.gguf");
  GError *error = NULL;

  ck_assert_uint_eq (llm_gguf_n_tensors (g), 20);
  ck_assert_uint_eq (llm_gguf_n_kv (g), 34);
  ck_assert_uint_eq (llm_gguf_data_offset (g), 50848);
  guint64 u;
  ck_assert (llm_gguf_get_uint (g, "llama.embedding_length", &u, &error));
  ck_assert_uint_eq (u, 128);
  ck_assert (llm_gguf_get_uint (g, "general.file_type", &u, &error));
  ck_assert_uint_eq (u, 7); /* LLAMA_FTYPE_MOSTLY_Q8_0 */
  gboolean add_bos = FALSE;
  ck_assert (llm_gguf_get_bool (g, "tokenizer.ggml.add_bos_token", &add_bos, &error));
  ck_assert (add_bos);
  double eps;
  ck_assert (llm_gguf_get_float (g, "llama.attention.layer_norm_rms_epsilon", &eps, &error));
  ck_assert (eps == (double) 1e-6f);

  const LlmGgufTensor *t = llm_gguf_find_tensor (g, "token_embd.weight");
  ck_assert_ptr_nonnull (t);
  ck_assert_uint_eq (t->type, LLM_TYPE_Q8_0);
  ck_assert_uint_eq (t->ne[0], 128);
  ck_assert_uint_eq (t->ne[1], 2048);
  ck_assert_uint_eq (t->size, 128 / 32 * 34 * 2048);
  ck_assert_uint_eq (t->offset, 50848 + 512);

  /* First block, checked against a dump of the file: d = 0x1fc8. */
  LlmBlockQ8_0 blk;
  memcpy (&blk, t->data, sizeof blk);
  ck_assert_uint_eq (GUINT16_FROM_LE (blk.d), 0x1fc8);
  ck_assert_int_eq (blk.qs[0], -90);
  ck_assert_int_eq (blk.qs[1], -3);
  ck_assert_int_eq (blk.qs[2], 78);
  ck_assert_int_eq (blk.qs[7], -71);
  float row[32];
  llm_dequantize_row_q8_0 (&blk, row, 32);
  ck_assert (row[0] == -90.0f * 0.007598876953125f);

  int n_q8 = 0, n_f32 = 0;
  for (guint64 i = 0; i < llm_gguf_n_tensors (g); i++) {
    const LlmGgufTensor *ti = llm_gguf_tensor (g, i);
    n_q8 += ti->type == LLM_TYPE_Q8_0;
    n_f32 += ti->type == LLM_TYPE_F32;
  }
  /* 2 layers x 7 matrices + token_embd are Q8_0; 2 x 2 norms + output_norm F32. */
  ck_assert_int_eq (n_q8, 15);
  ck_assert_int_eq (n_f32, 5);

  LlmGgufValueType et;
  guint64 n;
  ck_assert (llm_gguf_get_array (g, "tokenizer.ggml.tokens", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_STRING);
  ck_assert_uint_eq (n, 2048);
  gsize len;
  const char *s = llm_gguf_array_string (g, "tokenizer.ggml.tokens", 1, &len);
  ck_assert_uint_eq (len, strlen ("<|start_story|>"));
  ck_assert (memcmp (s, "<|start_story|>", len) == 0);
}
END_TEST

typedef struct {
  const char *file;
  const char *model;          /* tokenizer.ggml.model */
  guint64 n_tokens;
  const char *token_1000;
  guint64 n_kv;
} VocabCase;

static const VocabCase vocab_cases[] = {
  { "vocab/ggml-vocab-deepseek-llm.gguf", "gpt2", 102400, "ty", 23 },
  { "vocab/ggml-vocab-gpt-2.gguf", "gpt2", 50257, "ale", 16 },
  { "vocab/ggml-vocab-llama-bpe.gguf", "gpt2", 128256, "indow", 20 },
  { "vocab/ggml-vocab-llama-spm.gguf", "llama", 32000, "ied", 22 },
  { "vocab/ggml-vocab-phi-3.gguf", "llama", 32064, "ied", 26 },
  { "vocab/ggml-vocab-qwen2.gguf", "gpt2", 151936, "atus", 20 },
};

/* These files stop right after the header, without padding to the
 * alignment: with no tensors there is no data section to pad for. */
START_TEST (test_vocab_only_files_load_with_their_token_lists)
{
  const VocabCase *c = &vocab_cases[_i];
  g_autoptr (LlmGguf) g = open_data_file (c->file);
  GError *error = NULL;

  ck_assert_uint_eq (llm_gguf_n_tensors (g), 0);
  ck_assert_uint_eq (llm_gguf_n_kv (g), c->n_kv);
  g_autofree char *model = llm_gguf_dup_string (g, "tokenizer.ggml.model", &error);
  ck_assert_str_eq (model, c->model);

  LlmGgufValueType et;
  guint64 n;
  ck_assert (llm_gguf_get_array (g, "tokenizer.ggml.tokens", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_STRING);
  ck_assert_uint_eq (n, c->n_tokens);
  gsize len;
  const char *s = llm_gguf_array_string (g, "tokenizer.ggml.tokens", 1000, &len);
  ck_assert_ptr_nonnull (s);
  ck_assert_uint_eq (len, strlen (c->token_1000));
  ck_assert (memcmp (s, c->token_1000, len) == 0);
  ck_assert_ptr_null (llm_gguf_array_string (g, "tokenizer.ggml.tokens", n, &len));

  /* The token types run parallel to the tokens, as int32. */
  ck_assert (llm_gguf_get_array (g, "tokenizer.ggml.token_type", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_INT32);
  ck_assert_uint_eq (n, c->n_tokens);
}
END_TEST

START_TEST (test_opening_a_missing_file_is_an_io_error_naming_the_path)
{
  const char *path = "/nonexistent-dir/model.gguf";
  GError *error = NULL;
  LlmGguf *g = llm_gguf_open (path, &error);
  ck_assert_ptr_null (g);
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO));
  ck_assert_msg (strstr (error->message, path) != NULL, "%s", error->message);
  g_error_free (error);
}
END_TEST

/* A directory is refused as one, not with mmap's words (FIFOs: test-model,
 * where a regression cannot hang the suite). */
START_TEST (test_opening_a_directory_says_it_is_one)
{
  g_autofree char *dir = g_dir_make_tmp ("llm-gguf-XXXXXX", NULL);
  GError *error = NULL;

  ck_assert_ptr_null (llm_gguf_open (dir, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO));
  g_autofree char *expected = g_strdup_printf ("%s: is a directory, not a model file", dir);
  ck_assert_str_eq (error->message, expected);
  g_clear_error (&error);
  g_rmdir (dir);
}
END_TEST

START_TEST (test_missing_and_mistyped_keys_are_reported_by_name)
{
  g_autoptr (LlmGguf) g = open_data_file ("models/stories260K.gguf");
  GError *error = NULL;
  guint64 u;
  ck_assert (!llm_gguf_get_uint (g, "llama.no_such_key", &u, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_NOT_FOUND));
  ck_assert (strstr (error->message, "llama.no_such_key") != NULL);
  g_clear_error (&error);

  ck_assert (!llm_gguf_get_uint (g, "general.architecture", &u, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE));
  ck_assert (strstr (error->message, "general.architecture") != NULL);
  g_clear_error (&error);

  const char *s;
  gsize len;
  ck_assert (!llm_gguf_get_string (g, "llama.block_count", &s, &len, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE));
  g_clear_error (&error);

  ck_assert_int_eq (llm_gguf_find_key (g, "nope"), -1);
  ck_assert_ptr_null (llm_gguf_find_tensor (g, "nope"));
  ck_assert_ptr_null (llm_gguf_tensor (g, 48));
  ck_assert_ptr_null (llm_gguf_array_data (g, "general.architecture"));
  ck_assert_ptr_null (llm_gguf_array_string (g, "tokenizer.ggml.scores", 0, &len));
}
END_TEST

/* =================== writer round trips =================== */

START_TEST (test_empty_writer_output_is_a_bare_padded_header)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  g_autoptr (GBytes) b = writer_bytes (w);
  static const guint8 expect[32] = {
    'G', 'G', 'U', 'F', 3, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,   /* n_tensors */
    0, 0, 0, 0, 0, 0, 0, 0,   /* n_kv */
    0, 0, 0, 0, 0, 0, 0, 0,   /* padding to 32 */
  };
  gsize n;
  const guint8 *p = g_bytes_get_data (b, &n);
  ck_assert_uint_eq (n, sizeof expect);
  ck_assert (memcmp (p, expect, n) == 0);
}
END_TEST

START_TEST (test_writer_lays_out_key_and_tensor_bytes_as_the_format_says)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_uint32 (w, "a", 0x01020304));
  const float v[2] = { 1.0f, -2.0f };
  ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, "t", LLM_TYPE_F32, 1,
          (const guint64[]) { 2 }, v, NULL));
  g_autoptr (GBytes) b = writer_bytes (w);
  static const guint8 expect[] = {
    'G', 'G', 'U', 'F', 3, 0, 0, 0,
    1, 0, 0, 0, 0, 0, 0, 0,                 /* n_tensors */
    1, 0, 0, 0, 0, 0, 0, 0,                 /* n_kv */
    1, 0, 0, 0, 0, 0, 0, 0, 'a',            /* key */
    4, 0, 0, 0, 4, 3, 2, 1,                 /* UINT32 value */
    1, 0, 0, 0, 0, 0, 0, 0, 't',            /* tensor name */
    1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,     /* n_dims, ne[0] */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* type F32, offset 0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,        /* padding from 74 to 96 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0,        /* 1.0f, -2.0f */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* data padded to 32 */
    0, 0, 0, 0, 0, 0, 0, 0,
  };
  gsize n;
  const guint8 *p = g_bytes_get_data (b, &n);
  ck_assert_uint_eq (n, sizeof expect);
  for (gsize i = 0; i < n; i++)
    ck_assert_msg (p[i] == expect[i], "byte %zu is 0x%02x, expected 0x%02x", i, p[i], expect[i]);
}
END_TEST

START_TEST (test_every_scalar_type_round_trips_through_the_reader)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_uint8 (w, "u8", 255));
  ck_assert (llm_gguf_writer_add_int8 (w, "i8", -128));
  ck_assert (llm_gguf_writer_add_uint16 (w, "u16", 65535));
  ck_assert (llm_gguf_writer_add_int16 (w, "i16", -32768));
  ck_assert (llm_gguf_writer_add_uint32 (w, "u32", 4000000000u));
  ck_assert (llm_gguf_writer_add_int32 (w, "i32", G_MININT32));
  ck_assert (llm_gguf_writer_add_float32 (w, "f32", 0.1f));
  ck_assert (llm_gguf_writer_add_bool (w, "yes", TRUE));
  ck_assert (llm_gguf_writer_add_bool (w, "no", FALSE));
  ck_assert (llm_gguf_writer_add_uint64 (w, "u64", G_MAXUINT64));
  ck_assert (llm_gguf_writer_add_int64 (w, "i64", G_MININT64));
  ck_assert (llm_gguf_writer_add_float64 (w, "f64", -1e300));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);
  GError *error = NULL;

  static const struct { const char *key; LlmGgufValueType type; } order[] = {
    { "u8", LLM_GGUF_UINT8 }, { "i8", LLM_GGUF_INT8 }, { "u16", LLM_GGUF_UINT16 },
    { "i16", LLM_GGUF_INT16 }, { "u32", LLM_GGUF_UINT32 }, { "i32", LLM_GGUF_INT32 },
    { "f32", LLM_GGUF_FLOAT32 }, { "yes", LLM_GGUF_BOOL }, { "no", LLM_GGUF_BOOL },
    { "u64", LLM_GGUF_UINT64 }, { "i64", LLM_GGUF_INT64 }, { "f64", LLM_GGUF_FLOAT64 },
  };
  ck_assert_uint_eq (llm_gguf_n_kv (g), G_N_ELEMENTS (order));
  for (guint i = 0; i < G_N_ELEMENTS (order); i++) {
    ck_assert_str_eq (llm_gguf_key (g, i), order[i].key);
    ck_assert_int_eq (llm_gguf_kv_type (g, i), order[i].type);
    ck_assert_int_eq (llm_gguf_find_key (g, order[i].key), i);
  }

  guint64 u;
  gint64 s;
  double f;
  gboolean bo;
  ck_assert (llm_gguf_get_uint (g, "u8", &u, &error) && u == 255);
  ck_assert (llm_gguf_get_int (g, "i8", &s, &error) && s == -128);
  ck_assert (llm_gguf_get_uint (g, "u16", &u, &error) && u == 65535);
  ck_assert (llm_gguf_get_int (g, "i16", &s, &error) && s == -32768);
  ck_assert (llm_gguf_get_uint (g, "u32", &u, &error) && u == 4000000000u);
  ck_assert (llm_gguf_get_int (g, "i32", &s, &error) && s == G_MININT32);
  ck_assert (llm_gguf_get_float (g, "f32", &f, &error) && f == (double) 0.1f);
  ck_assert (llm_gguf_get_bool (g, "yes", &bo, &error) && bo == TRUE);
  ck_assert (llm_gguf_get_bool (g, "no", &bo, &error) && bo == FALSE);
  ck_assert (llm_gguf_get_uint (g, "u64", &u, &error) && u == G_MAXUINT64);
  ck_assert (llm_gguf_get_int (g, "i64", &s, &error) && s == G_MININT64);
  ck_assert (llm_gguf_get_float (g, "f64", &f, &error) && f == -1e300);
  ck_assert_ptr_null (error);

  /* Integers convert when the value fits, and only then. */
  ck_assert (llm_gguf_get_int (g, "u32", &s, &error) && s == 4000000000);
  ck_assert (llm_gguf_get_uint (g, "u8", &u, &error) && u == 255);
  ck_assert (!llm_gguf_get_uint (g, "i8", &u, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE));
  ck_assert (strstr (error->message, "'i8'") != NULL);
  g_clear_error (&error);
  ck_assert (!llm_gguf_get_int (g, "u64", &s, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE));
  g_clear_error (&error);
  ck_assert (!llm_gguf_get_float (g, "u32", &f, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE));
  g_clear_error (&error);
  ck_assert (!llm_gguf_get_bool (g, "u8", &bo, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE));
  g_clear_error (&error);
}
END_TEST

START_TEST (test_strings_round_trip_including_empty_utf8_and_embedded_nul)
{
  const char *utf8 = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\xa6\x99";
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_string (w, "empty", ""));
  ck_assert (llm_gguf_writer_add_string (w, "utf8", utf8));
  ck_assert (llm_gguf_writer_add_string_len (w, "nul", "a\0b", 3));
  ck_assert (llm_gguf_writer_add_string (w, "k\xc3\xa9y", "non-ASCII key"));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);
  GError *error = NULL;
  const char *s;
  gsize len;

  ck_assert (llm_gguf_get_string (g, "empty", &s, &len, &error));
  ck_assert_uint_eq (len, 0);
  g_autofree char *e = llm_gguf_dup_string (g, "empty", &error);
  ck_assert_str_eq (e, "");

  ck_assert (llm_gguf_get_string (g, "utf8", &s, &len, &error));
  ck_assert_uint_eq (len, strlen (utf8));
  ck_assert (memcmp (s, utf8, len) == 0);
  g_autofree char *d = llm_gguf_dup_string (g, "utf8", &error);
  ck_assert_str_eq (d, utf8);

  ck_assert (llm_gguf_get_string (g, "nul", &s, &len, &error));
  ck_assert_uint_eq (len, 3);
  ck_assert (memcmp (s, "a\0b", 3) == 0);

  g_autofree char *k = llm_gguf_dup_string (g, "k\xc3\xa9y", &error);
  ck_assert_str_eq (k, "non-ASCII key");
  ck_assert_ptr_null (error);
}
END_TEST

START_TEST (test_numeric_arrays_of_every_type_round_trip_element_for_element)
{
  const guint8 u8[] = { 0, 1, 255 };
  const gint8 i8[] = { -128, 0, 127 };
  const guint16 u16[] = { 1, 65535 };
  const gint16 i16[] = { -32768, 7 };
  const guint32 u32[] = { 1, 2, 3, 4000000000u };
  const gint32 i32[] = { -1, G_MAXINT32, G_MININT32 };
  const float f32[] = { 0.5f, -0.0f, INFINITY, 1e-40f };
  const guint8 bools[] = { 1, 0, 1 };
  const guint64 u64[] = { G_MAXUINT64, 0 };
  const gint64 i64[] = { G_MININT64, -1, 5 };
  const double f64[] = { 3.141592653589793, -1e-310 };
  static const struct { const char *key; LlmGgufValueType type; gsize n; } cases[] = {
    { "u8", LLM_GGUF_UINT8, 3 }, { "i8", LLM_GGUF_INT8, 3 }, { "u16", LLM_GGUF_UINT16, 2 },
    { "i16", LLM_GGUF_INT16, 2 }, { "u32", LLM_GGUF_UINT32, 4 }, { "i32", LLM_GGUF_INT32, 3 },
    { "f32", LLM_GGUF_FLOAT32, 4 }, { "bool", LLM_GGUF_BOOL, 3 }, { "u64", LLM_GGUF_UINT64, 2 },
    { "i64", LLM_GGUF_INT64, 3 }, { "f64", LLM_GGUF_FLOAT64, 2 },
  };
  const void *data[] = { u8, i8, u16, i16, u32, i32, f32, bools, u64, i64, f64 };

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    ck_assert (llm_gguf_writer_add_array (w, cases[i].key, cases[i].type, data[i], cases[i].n));
  ck_assert (llm_gguf_writer_add_array (w, "empty", LLM_GGUF_FLOAT32, NULL, 0));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);
  GError *error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    LlmGgufValueType et;
    guint64 n;
    ck_assert (llm_gguf_get_array (g, cases[i].key, &et, &n, &error));
    ck_assert_int_eq (et, cases[i].type);
    ck_assert_uint_eq (n, cases[i].n);
    const void *p = llm_gguf_array_data (g, cases[i].key);
    ck_assert_ptr_nonnull (p);
    /* This host is little-endian like the file, so the bytes match. */
    ck_assert_msg (memcmp (p, data[i], n * llm_gguf_value_type_size (et)) == 0,
        "array %s differs", cases[i].key);
  }
  LlmGgufValueType et;
  guint64 n = 99;
  ck_assert (llm_gguf_get_array (g, "empty", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_FLOAT32);
  ck_assert_uint_eq (n, 0);
  ck_assert_ptr_null (error);
}
END_TEST

START_TEST (test_string_arrays_round_trip_and_out_of_range_index_is_null)
{
  const char *strs[] = { "", "<s>", "\xe2\x96\x81the", "a much longer string than the others" };
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_string_array (w, "tokens", strs, G_N_ELEMENTS (strs)));
  ck_assert (llm_gguf_writer_add_string_array (w, "none", NULL, 0));
  ck_assert (llm_gguf_writer_add_uint32 (w, "after", 7));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);
  GError *error = NULL;

  LlmGgufValueType et;
  guint64 n;
  ck_assert (llm_gguf_get_array (g, "tokens", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_STRING);
  ck_assert_uint_eq (n, G_N_ELEMENTS (strs));
  for (guint64 i = 0; i < n; i++) {
    gsize len;
    const char *s = llm_gguf_array_string (g, "tokens", i, &len);
    ck_assert_ptr_nonnull (s);
    ck_assert_uint_eq (len, strlen (strs[i]));
    ck_assert (memcmp (s, strs[i], len) == 0);
  }
  gsize len;
  ck_assert_ptr_null (llm_gguf_array_string (g, "tokens", n, &len));
  ck_assert_ptr_null (llm_gguf_array_data (g, "tokens"));
  ck_assert (llm_gguf_get_array (g, "none", &et, &n, &error));
  ck_assert_uint_eq (n, 0);
  ck_assert_ptr_null (llm_gguf_array_string (g, "none", 0, &len));
  guint64 u;
  ck_assert (llm_gguf_get_uint (g, "after", &u, &error) && u == 7);
}
END_TEST

START_TEST (test_nested_arrays_load_with_their_outer_count_and_keys_after_them_read_right)
{
  const gint32 a0[] = { 1, 2, 3 };
  const gint32 a1[] = { 4 };
  const void *arrays[] = { a0, a1, NULL };
  const guint64 lens[] = { 3, 1, 0 };
  const char *s0[] = { "x", "yy" };
  const char *s1[] = { "" };
  const void *str_arrays[] = { s0, s1 };
  const guint64 str_lens[] = { 2, 1 };

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_nested_array (w, "nested", LLM_GGUF_INT32, arrays, lens, 3));
  ck_assert (llm_gguf_writer_add_nested_array (w, "nested_str", LLM_GGUF_STRING,
          str_arrays, str_lens, 2));
  ck_assert (llm_gguf_writer_add_string (w, "after", "still here"));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);
  GError *error = NULL;

  LlmGgufValueType et;
  guint64 n;
  ck_assert (llm_gguf_get_array (g, "nested", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_ARRAY);
  ck_assert_uint_eq (n, 3);
  ck_assert_ptr_null (llm_gguf_array_data (g, "nested"));
  ck_assert (llm_gguf_get_array (g, "nested_str", &et, &n, &error));
  ck_assert_int_eq (et, LLM_GGUF_ARRAY);
  ck_assert_uint_eq (n, 2);
  g_autofree char *after = llm_gguf_dup_string (g, "after", &error);
  ck_assert_str_eq (after, "still here");
}
END_TEST

/* Deterministic test input: a sine with an odd period plus a few outliers,
 * so blocks have different scales and signs. */
static float *
make_input (gsize n)
{
  float *x = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    x[i] = (float) (sin ((double) i * 0.37) * (1.0 + (double) (i % 7))) ;
  if (n > 40)
    x[40] = -23.0f;
  if (n > 77)
    x[77] = 1e-3f;
  return x;
}

typedef struct {
  const char *name;
  guint32 type;
  guint n_dims;
  guint64 ne[4];
} ShapeCase;

/* Shapes with odd row lengths, one-element dimensions and four dims. */
static const ShapeCase shape_cases[] = {
  { "f32.vec3", LLM_TYPE_F32, 1, { 3 } },
  { "f16.5x3", LLM_TYPE_F16, 2, { 5, 3 } },
  { "bf16.7x1x2", LLM_TYPE_BF16, 3, { 7, 1, 2 } },
  { "q8_0.64x3", LLM_TYPE_Q8_0, 2, { 64, 3 } },
  { "q4_0.32x5x2x1", LLM_TYPE_Q4_0, 4, { 32, 5, 2, 1 } },
  { "f32.1", LLM_TYPE_F32, 1, { 1 } },
  { "q8_0.96", LLM_TYPE_Q8_0, 1, { 96 } },
  { "q4_1.64x3", LLM_TYPE_Q4_1, 2, { 64, 3 } },
  { "q5_0.32x2x3", LLM_TYPE_Q5_0, 3, { 32, 2, 3 } },
  { "q5_1.96x1x1x2", LLM_TYPE_Q5_1, 4, { 96, 1, 1, 2 } },
};

/* What the kernels make of @x for @type: the bytes the file must hold. */
static guint8 *
convert (guint32 type, const float *x, gsize n, gsize *size)
{
  guint64 bytes;
  ck_assert (llm_type_row_bytes (type, n, &bytes));
  guint8 *out = g_malloc (bytes);
  switch (type) {
    case LLM_TYPE_F32: memcpy (out, x, bytes); break;
    case LLM_TYPE_F16: llm_fp16_from_f32_row (x, (uint16_t *) out, n); break;
    case LLM_TYPE_BF16: llm_bf16_from_f32_row (x, (uint16_t *) out, n); break;
    case LLM_TYPE_Q8_0: llm_quantize_row_q8_0 (x, (LlmBlockQ8_0 *) out, n); break;
    case LLM_TYPE_Q4_0: llm_quantize_row_q4_0 (x, (LlmBlockQ4_0 *) out, n); break;
    case LLM_TYPE_Q4_1: llm_quantize_row_q4_1 (x, (LlmBlockQ4_1 *) out, n); break;
    case LLM_TYPE_Q5_0: llm_quantize_row_q5_0 (x, (LlmBlockQ5_0 *) out, n); break;
    case LLM_TYPE_Q5_1: llm_quantize_row_q5_1 (x, (LlmBlockQ5_1 *) out, n); break;
    default: ck_abort ();
  }
  *size = bytes;
  return out;
}

static void
dequantize (guint32 type, const guint8 *data, float *y, gsize n)
{
  switch (type) {
    case LLM_TYPE_F32: memcpy (y, data, n * 4); break;
    case LLM_TYPE_F16: llm_dequantize_row_f16 ((const uint16_t *) data, y, n); break;
    case LLM_TYPE_BF16: llm_dequantize_row_bf16 ((const uint16_t *) data, y, n); break;
    case LLM_TYPE_Q8_0: llm_dequantize_row_q8_0 ((const LlmBlockQ8_0 *) data, y, n); break;
    case LLM_TYPE_Q4_0: llm_dequantize_row_q4_0 ((const LlmBlockQ4_0 *) data, y, n); break;
    case LLM_TYPE_Q4_1: llm_dequantize_row_q4_1 ((const LlmBlockQ4_1 *) data, y, n); break;
    case LLM_TYPE_Q5_0: llm_dequantize_row_q5_0 ((const LlmBlockQ5_0 *) data, y, n); break;
    case LLM_TYPE_Q5_1: llm_dequantize_row_q5_1 ((const LlmBlockQ5_1 *) data, y, n); break;
    default: ck_abort ();
  }
}

/* Largest error the type allows for a value in a block whose largest
 * magnitude is @amax: half a step, plus the rounding of the scale to
 * fp16; Q4_0 and Q5_0 may be a whole step off at the clamped positive
 * end. Q4_1/Q5_1 steps are (max - min) / 15 or 31 <= 2 amax / 15 or 31,
 * and their offset m (|m| <= amax) is rounded to fp16 too. */
static float
error_bound (guint32 type, float x, float amax)
{
  switch (type) {
    case LLM_TYPE_F32: return 0.0f;
    case LLM_TYPE_F16: return fabsf (x) * 0x1p-11f + 0x1p-25f;
    case LLM_TYPE_BF16: return fabsf (x) * 0x1p-8f;
    case LLM_TYPE_Q8_0: return amax * (0.5f / 127.0f + 0x1p-10f);
    case LLM_TYPE_Q4_0: return amax * (1.0f / 8.0f + 0x1p-9f);
    case LLM_TYPE_Q5_0: return amax * (1.0f / 16.0f + 0x1p-9f);
    case LLM_TYPE_Q4_1: return amax * (1.0f / 15.0f + 0x1p-8f);
    case LLM_TYPE_Q5_1: return amax * (1.0f / 31.0f + 0x1p-8f);
    default: ck_abort ();
  }
  return 0.0f;
}

static gsize
shape_elems (const ShapeCase *c)
{
  gsize n = 1;
  for (guint d = 0; d < c->n_dims; d++)
    n *= c->ne[d];
  return n;
}

static GBytes *
write_shape_cases (guint32 alignment)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  if (alignment != LLM_GGUF_DEFAULT_ALIGNMENT)
    ck_assert (llm_gguf_writer_add_uint32 (w, "general.alignment", alignment));
  ck_assert (llm_gguf_writer_add_string (w, "general.architecture", "test"));
  for (guint i = 0; i < G_N_ELEMENTS (shape_cases); i++) {
    const ShapeCase *c = &shape_cases[i];
    g_autofree float *x = make_input (shape_elems (c));
    GError *error = NULL;
    ck_assert_msg (llm_gguf_writer_add_tensor_from_f32 (w, c->name, c->type, c->n_dims, c->ne,
            x, &error), "%s: %s", c->name, error ? error->message : "?");
  }
  return writer_bytes (w);
}

static void
check_shape_cases (LlmGguf *g, guint32 alignment)
{
  ck_assert_uint_eq (llm_gguf_alignment (g), alignment);
  ck_assert_uint_eq (llm_gguf_data_offset (g) % alignment, 0);
  ck_assert_uint_eq (llm_gguf_n_tensors (g), G_N_ELEMENTS (shape_cases));
  for (guint i = 0; i < G_N_ELEMENTS (shape_cases); i++) {
    const ShapeCase *c = &shape_cases[i];
    const LlmGgufTensor *t = llm_gguf_tensor (g, i);
    ck_assert_str_eq (t->name, c->name);
    ck_assert_ptr_eq (llm_gguf_find_tensor (g, c->name), t);
    ck_assert_uint_eq (t->type, c->type);
    ck_assert_uint_eq (t->n_dims, c->n_dims);
    for (guint d = 0; d < 4; d++)
      ck_assert_uint_eq (t->ne[d], d < c->n_dims ? c->ne[d] : 1);
    gsize n = shape_elems (c);
    ck_assert_uint_eq (t->n_elems, n);
    ck_assert_msg ((t->offset - llm_gguf_data_offset (g)) % alignment == 0,
        "%s at unaligned offset %" G_GUINT64_FORMAT, c->name, t->offset);

    g_autofree float *x = make_input (n);
    gsize size;
    g_autofree guint8 *want = convert (c->type, x, n, &size);
    ck_assert_uint_eq (t->size, size);
    ck_assert_msg (memcmp (t->data, want, size) == 0, "%s bytes differ", c->name);

    g_autofree float *y = g_new (float, n);
    dequantize (c->type, t->data, y, n);
    for (gsize j = 0; j < n; j++) {
      gboolean blocked = c->type == LLM_TYPE_Q8_0 || c->type == LLM_TYPE_Q4_0 ||
          c->type == LLM_TYPE_Q4_1 || c->type == LLM_TYPE_Q5_0 || c->type == LLM_TYPE_Q5_1;
      gsize b0 = blocked ? j / 32 * 32 : j;
      gsize b1 = blocked ? b0 + 32 : j + 1;
      float amax = 0.0f;
      for (gsize k = b0; k < b1; k++)
        amax = fmaxf (amax, fabsf (x[k]));
      float bound = error_bound (c->type, x[j], amax);
      ck_assert_msg (fabsf (y[j] - x[j]) <= bound, "%s[%zu]: %g became %g (bound %g)",
          c->name, j, x[j], y[j], bound);
    }
  }
}

START_TEST (test_tensors_of_every_type_and_awkward_shapes_round_trip_byte_for_byte)
{
  g_autoptr (GBytes) b = write_shape_cases (LLM_GGUF_DEFAULT_ALIGNMENT);
  g_autoptr (LlmGguf) g = load_bytes (b);
  check_shape_cases (g, LLM_GGUF_DEFAULT_ALIGNMENT);
}
END_TEST

START_TEST (test_custom_alignment_of_64_places_every_tensor_on_a_64_byte_boundary)
{
  g_autoptr (GBytes) b = write_shape_cases (64);
  g_autoptr (LlmGguf) g = load_bytes (b);
  check_shape_cases (g, 64);
  guint64 u;
  ck_assert (llm_gguf_get_uint (g, "general.alignment", &u, NULL) && u == 64);
  /* The data section is padded to the alignment too. */
  ck_assert_uint_eq (g_bytes_get_size (b) % 64, 0);
}
END_TEST

START_TEST (test_raw_tensor_bytes_round_trip_unchanged)
{
  guint8 raw[3 * 18];
  for (gsize i = 0; i < sizeof raw; i++)
    raw[i] = (guint8) (i * 37 + 11);
  const gint32 ids[5] = { -1, 0, 1, 2, 3 };
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_tensor (w, "q4", LLM_TYPE_Q4_0, 2,
          (const guint64[]) { 32, 3 }, raw, sizeof raw, NULL));
  ck_assert (llm_gguf_writer_add_tensor (w, "ids", LLM_TYPE_I32, 1,
          (const guint64[]) { 5 }, ids, sizeof ids, NULL));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);
  const LlmGgufTensor *t = llm_gguf_find_tensor (g, "q4");
  ck_assert_uint_eq (t->size, sizeof raw);
  ck_assert (memcmp (t->data, raw, sizeof raw) == 0);
  t = llm_gguf_find_tensor (g, "ids");
  ck_assert_uint_eq (t->type, LLM_TYPE_I32);
  ck_assert (memcmp (t->data, ids, sizeof ids) == 0);
}
END_TEST

START_TEST (test_writer_output_is_deterministic)
{
  g_autoptr (GBytes) a = write_shape_cases (64);
  g_autoptr (GBytes) b = write_shape_cases (64);
  ck_assert (g_bytes_equal (a, b));
}
END_TEST

START_TEST (test_written_file_opens_with_its_path_and_leaves_no_temporary_behind)
{
  GError *error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("test-gguf-XXXXXX", &error);
  ck_assert_ptr_nonnull (dir);
  g_autofree char *path = g_build_filename (dir, "model.gguf", NULL);

  g_autoptr (GBytes) expect = write_shape_cases (32);
  {
    g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
    ck_assert (llm_gguf_writer_add_string (w, "general.architecture", "test"));
    for (guint i = 0; i < G_N_ELEMENTS (shape_cases); i++) {
      const ShapeCase *c = &shape_cases[i];
      g_autofree float *x = make_input (shape_elems (c));
      ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, c->name, c->type, c->n_dims, c->ne,
              x, NULL));
    }
    /* Twice: the second write replaces the first. */
    ck_assert (llm_gguf_writer_write_file (w, path, &error));
    ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s",
        error ? error->message : "?");
  }

  g_autoptr (GBytes) got = llm_test_read_file (path);
  ck_assert (g_bytes_equal (got, expect));
  {
    g_autoptr (LlmGguf) g = llm_gguf_open (path, &error);
    ck_assert_msg (g != NULL, "%s", error ? error->message : "?");
    ck_assert_str_eq (llm_gguf_path (g), path);
    check_shape_cases (g, 32);
  }

  GDir *d = g_dir_open (dir, 0, NULL);
  int entries = 0;
  while (g_dir_read_name (d))
    entries++;
  g_dir_close (d);
  ck_assert_int_eq (entries, 1);
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

START_TEST (test_writing_into_a_missing_directory_is_an_io_error)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  GError *error = NULL;
  ck_assert (!llm_gguf_writer_write_file (w, "/nonexistent-dir/out.gguf", &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_IO));
  ck_assert (strstr (error->message, "/nonexistent-dir/out.gguf") != NULL);
  g_error_free (error);
}
END_TEST

START_TEST (test_writer_rejects_a_duplicate_key_and_reports_it_at_output)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_uint32 (w, "dup", 1));
  ck_assert (!llm_gguf_writer_add_string (w, "dup", "again"));
  GError *error = NULL;
  ck_assert_ptr_null (llm_gguf_writer_to_bytes (w, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_DUPLICATE));
  ck_assert (strstr (error->message, "'dup'") != NULL);
  g_error_free (error);
}
END_TEST

START_TEST (test_writer_rejects_an_empty_key_which_no_reader_would_load)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (!llm_gguf_writer_add_uint32 (w, "", 1));
  GError *error = NULL;
  ck_assert_ptr_null (llm_gguf_writer_to_bytes (w, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID));
  g_error_free (error);
}
END_TEST

START_TEST (test_writer_rejects_a_duplicate_tensor_name)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  const float x[1] = { 1 };
  const guint64 ne[1] = { 1 };
  GError *error = NULL;
  ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, "w", LLM_TYPE_F32, 1, ne, x, &error));
  ck_assert (!llm_gguf_writer_add_tensor_from_f32 (w, "w", LLM_TYPE_F16, 1, ne, x, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_DUPLICATE));
  ck_assert (strstr (error->message, "'w'") != NULL);
  g_clear_error (&error);
  ck_assert_ptr_null (llm_gguf_writer_to_bytes (w, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_DUPLICATE));
  g_error_free (error);
}
END_TEST

/* Each bad tensor on a fresh writer; the error must name the tensor. */
START_TEST (test_writer_rejects_tensors_whose_shape_size_or_type_is_wrong)
{
  const float x[64] = { 0 };
  const guint8 bytes[64] = { 0 };
  const guint64 ne33[] = { 33 };
  const guint64 ne2[] = { 2 };
  const guint64 ne0[] = { 0 };
  const guint64 ne4x2[] = { 4, 2 };
  const guint64 huge[] = { 1ull << 32, 1ull << 32 };
  const guint64 ne5[] = { 1, 1, 1, 1, 1 };
  char long_name[65];
  memset (long_name, 'n', 64);
  long_name[64] = '\0';
  GError *error = NULL;

#define EXPECT_REJECT(call) \
  do { \
    g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new (); \
    LlmGgufWriter *writer = w; \
    ck_assert_msg (!(call), "accepted: %s", #call); \
    ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID)); \
    g_clear_error (&error); \
    ck_assert_ptr_null (llm_gguf_writer_to_bytes (writer, &error)); \
    g_clear_error (&error); \
  } while (0)

  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_Q8_0, 1, ne33, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_Q4_0, 1, ne2, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_Q4_K, 1, ne2, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_F32, 1, ne0, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_F32, 0, ne2, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_F32, 5, ne5, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "t", LLM_TYPE_F32, 2, huge, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, long_name, LLM_TYPE_F32, 1, ne2, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor_from_f32 (writer, "", LLM_TYPE_F32, 1, ne2, x, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor (writer, "t", 4, 1, ne2, bytes, 8, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor (writer, "t", LLM_TYPE_F32, 2, ne4x2, bytes, 31, &error));
  EXPECT_REJECT (llm_gguf_writer_add_tensor (writer, "t", LLM_TYPE_F16, 2, ne4x2, bytes, 32, &error));
#undef EXPECT_REJECT

  /* The message says what was wrong, with numbers. */
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (!llm_gguf_writer_add_tensor (w, "blk.0.w", LLM_TYPE_F32, 2, ne4x2, bytes, 31, &error));
  ck_assert_msg (strstr (error->message, "'blk.0.w'") && strstr (error->message, "31")
      && strstr (error->message, "32"), "%s", error->message);
  g_clear_error (&error);
}
END_TEST

START_TEST (test_writer_accepts_only_a_power_of_two_uint32_alignment)
{
  {
    g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
    ck_assert (!llm_gguf_writer_add_uint32 (w, "general.alignment", 0));
  }
  {
    g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
    ck_assert (!llm_gguf_writer_add_uint32 (w, "general.alignment", 48));
    GError *error = NULL;
    ck_assert_ptr_null (llm_gguf_writer_to_bytes (w, &error));
    ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID));
    ck_assert (strstr (error->message, "48") != NULL);
    g_error_free (error);
  }
  {
    g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
    ck_assert (!llm_gguf_writer_add_uint64 (w, "general.alignment", 64));
    ck_assert (!llm_gguf_writer_add_uint8 (w, "general.alignment", 64));
    ck_assert (!llm_gguf_writer_add_string (w, "general.alignment", "64"));
    const guint32 a[1] = { 64 };
    ck_assert (!llm_gguf_writer_add_array (w, "general.alignment", LLM_GGUF_UINT32, a, 1));
  }
  {
    g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
    ck_assert (llm_gguf_writer_add_uint32 (w, "general.alignment", 1));
    g_autoptr (GBytes) b = writer_bytes (w);
    g_autoptr (LlmGguf) g = load_bytes (b);
    ck_assert_uint_eq (llm_gguf_alignment (g), 1);
  }
}
END_TEST

/* =================== compatibility with llama.cpp =================== */

static const char *const llama_cpp_files[] = {
  "models/random/tiny-llama-f32.gguf",
  "models/random/tiny-llama-f16.gguf",
  "models/random/tiny-llama-q8_0.gguf",
  "models/random/tiny-llama-q4_0.gguf",
};

/* llama.cpp's writer and quantizer made these four files from one set of
 * F32 weights. Copying every key and converting every tensor from the F32
 * file with our writer and kernels must give the same file, byte for
 * byte: same layout, same padding, same F16 rounding, same Q8_0/Q4_0
 * quantization. Tensors of other types (Q6_K) are copied raw. */
START_TEST (test_writer_reproduces_llama_cpp_files_byte_for_byte)
{
  g_autofree char *src_path = llm_test_shared_path (llama_cpp_files[0]);
  g_autofree char *want_path = llm_test_shared_path (llama_cpp_files[_i]);
  if (src_path == NULL || want_path == NULL)
    LLM_TEST_SKIP ("shared testdata %s not present", llama_cpp_files[_i]);
  GError *error = NULL;
  g_autoptr (LlmGguf) src = llm_gguf_open (src_path, &error);
  ck_assert_msg (src != NULL, "%s", error ? error->message : "?");
  g_autoptr (LlmGguf) want = llm_gguf_open (want_path, &error);
  ck_assert_msg (want != NULL, "%s", error ? error->message : "?");

  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  for (guint64 i = 0; i < llm_gguf_n_kv (want); i++)
    ck_assert (llm_gguf_writer_copy_kv (w, want, llm_gguf_key (want, i)));
  int converted = 0;
  for (guint64 i = 0; i < llm_gguf_n_tensors (want); i++) {
    const LlmGgufTensor *t = llm_gguf_tensor (want, i);
    const LlmGgufTensor *from = llm_gguf_find_tensor (src, t->name);
    ck_assert_ptr_nonnull (from);
    ck_assert_uint_eq (from->type, LLM_TYPE_F32);
    gboolean ok;
    if (t->type == LLM_TYPE_F32 || t->type == LLM_TYPE_F16 || t->type == LLM_TYPE_Q8_0
        || t->type == LLM_TYPE_Q4_0) {
      ok = llm_gguf_writer_add_tensor_from_f32 (w, t->name, t->type, t->n_dims, t->ne,
          (const float *) from->data, &error);
      converted++;
    } else {
      ok = llm_gguf_writer_add_tensor (w, t->name, t->type, t->n_dims, t->ne, t->data,
          t->size, &error);
    }
    ck_assert_msg (ok, "%s", error ? error->message : "?");
  }
  ck_assert_int_ge (converted, 29);

  g_autoptr (GBytes) got = writer_bytes (w);
  gsize want_size, got_size;
  const guint8 *wp = llm_gguf_bytes (want, &want_size);
  const guint8 *gp = g_bytes_get_data (got, &got_size);
  ck_assert_uint_eq (got_size, want_size);
  for (gsize i = 0; i < want_size; i++) {
    if (gp[i] != wp[i]) {
      const char *where = "header";
      for (guint64 k = 0; k < llm_gguf_n_tensors (want); k++) {
        const LlmGgufTensor *t = llm_gguf_tensor (want, k);
        if (i >= t->offset && i < t->offset + t->size)
          where = t->name;
      }
      ck_abort_msg ("%s: first difference at byte %zu (%s)", llama_cpp_files[_i], i, where);
    }
  }
}
END_TEST

START_TEST (test_copying_a_nested_array_key_is_refused)
{
  const gint32 a[1] = { 1 };
  const void *arrays[1] = { a };
  const guint64 lens[1] = { 1 };
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_add_nested_array (w, "nested", LLM_GGUF_INT32, arrays, lens, 1));
  ck_assert (llm_gguf_writer_add_string_len (w, "s", "x\0y", 3));
  g_autoptr (GBytes) b = writer_bytes (w);
  g_autoptr (LlmGguf) g = load_bytes (b);

  g_autoptr (LlmGgufWriter) copy = llm_gguf_writer_new ();
  ck_assert (!llm_gguf_writer_copy_kv (copy, g, "nested"));
  ck_assert (!llm_gguf_writer_copy_kv (copy, g, "missing"));
  GError *error = NULL;
  ck_assert_ptr_null (llm_gguf_writer_to_bytes (copy, &error));
  ck_assert (g_error_matches (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID));
  ck_assert (strstr (error->message, "'nested'") != NULL);
  g_error_free (error);

  /* A string with a NUL inside copies whole. */
  g_autoptr (LlmGgufWriter) copy2 = llm_gguf_writer_new ();
  ck_assert (llm_gguf_writer_copy_kv (copy2, g, "s"));
  g_autoptr (GBytes) b2 = writer_bytes (copy2);
  g_autoptr (LlmGguf) g2 = load_bytes (b2);
  const char *str;
  gsize len;
  ck_assert (llm_gguf_get_string (g2, "s", &str, &len, NULL));
  ck_assert_uint_eq (len, 3);
  ck_assert (memcmp (str, "x\0y", 3) == 0);
}
END_TEST

/* =================== conversion kernels =================== */

START_TEST (test_fp16_conversion_of_edge_values_matches_ieee)
{
  static const struct { guint32 f; guint16 h; } cases[] = {
    { 0x3f800000, 0x3c00 },   /* 1.0 */
    { 0xbf800000, 0xbc00 },   /* -1.0 */
    { 0x00000000, 0x0000 },
    { 0x80000000, 0x8000 },   /* -0 keeps its sign */
    { 0x477fe000, 0x7bff },   /* 65504, the largest half */
    { 0x477fefff, 0x7bff },   /* just under the halfway point to 2^16 */
    { 0x477ff000, 0x7c00 },   /* 65520: the tie goes to even, which is inf */
    { 0x7f7fffff, 0x7c00 },   /* FLT_MAX overflows to inf */
    { 0x7f800000, 0x7c00 },   /* inf */
    { 0xff800000, 0xfc00 },   /* -inf */
    { 0x7fc00000, 0x7e00 },   /* quiet NaN */
    { 0xffc00000, 0xfe00 },
    { 0x7f800001, 0x7e00 },   /* signalling NaN becomes quiet, not inf */
    { 0x38800000, 0x0400 },   /* 2^-14, the smallest normal */
    { 0x387fc000, 0x03ff },   /* largest subnormal */
    { 0x33800000, 0x0001 },   /* 2^-24, the smallest subnormal */
    { 0x33000000, 0x0000 },   /* 2^-25: tie between 0 and 2^-24 goes to 0 */
    { 0x33000001, 0x0001 },   /* just above the tie */
    { 0x33c00000, 0x0002 },   /* 1.5 * 2^-24: tie between 1 and 2 goes to 2 */
    { 0x34200000, 0x0002 },   /* 2.5 * 2^-24: tie between 2 and 3 goes to 2 */
    { 0x00000001, 0x0000 },   /* float subnormal underflows */
    { 0x3f801000, 0x3c00 },   /* 1 + 2^-11: tie, stays on the even 1.0 */
    { 0x3f803000, 0x3c02 },   /* 1 + 3 * 2^-11: tie, goes up to even */
    { 0x3f801001, 0x3c01 },   /* just above a tie rounds up */
    { 0x3f7ff000, 0x3c00 },   /* mantissa carry into the exponent */
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    ck_assert_msg (llm_fp16_from_f32 (bits_f32 (cases[i].f)) == cases[i].h,
        "0x%08x -> 0x%04x, expected 0x%04x", cases[i].f,
        llm_fp16_from_f32 (bits_f32 (cases[i].f)), cases[i].h);

  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0x0001)), 0x33800000);
  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0x03ff)), 0x387fc000);
  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0x8000)), 0x80000000);
  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0x7c00)), 0x7f800000);
  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0xfbff)), 0xc77fe000);
  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0x7e00)), 0x7fc00000);
  ck_assert_uint_eq (f32_bits (llm_fp16_to_f32 (0x7c01)), 0x7fc02000);
}
END_TEST

/* For every pair of neighbouring finite halves: both convert back exactly,
 * their midpoint goes to the one with the even mantissa, and the floats
 * either side of the midpoint go to the nearer one. */
START_TEST (test_fp16_rounds_every_midpoint_to_even_and_round_trips_every_half)
{
  for (guint32 h = 0; h < 0x7c00; h++) {
    for (guint32 sign = 0; sign <= 0x8000; sign += 0x8000) {
      float a = llm_fp16_to_f32 (h | sign);
      ck_assert_uint_eq (llm_fp16_from_f32 (a), h | sign);
      if (h == 0x7bff)
        continue;
      float b = llm_fp16_to_f32 ((h + 1) | sign);
      float mid = (float) (((double) a + (double) b) / 2.0);
      ck_assert ((double) mid == ((double) a + (double) b) / 2.0);
      guint16 even = (h & 1) ? (h + 1) : h;
      ck_assert_uint_eq (llm_fp16_from_f32 (mid), even | sign);
      float below = nextafterf (mid, 0.0f);
      float above = nextafterf (mid, sign ? -INFINITY : INFINITY);
      ck_assert_uint_eq (llm_fp16_from_f32 (below), h | sign);
      ck_assert_uint_eq (llm_fp16_from_f32 (above), (h + 1) | sign);
    }
  }
}
END_TEST

START_TEST (test_bf16_rounds_to_nearest_even_and_keeps_nan_quiet)
{
  static const struct { guint32 f; guint16 b; } cases[] = {
    { 0x3f800000, 0x3f80 },
    { 0x3f808000, 0x3f80 },   /* tie, stays even */
    { 0x3f818000, 0x3f82 },   /* tie, goes up to even */
    { 0x3f808001, 0x3f81 },
    { 0x3f807fff, 0x3f80 },
    { 0x7f7fffff, 0x7f80 },   /* FLT_MAX rounds to inf */
    { 0x7f800000, 0x7f80 },
    { 0xff800000, 0xff80 },
    { 0x80000000, 0x8000 },
    { 0x00000001, 0x0000 },   /* float subnormals round like any value */
    { 0x00008000, 0x0000 },
    { 0x00018000, 0x0002 },
    { 0x7fc00000, 0x7fc0 },
    { 0x7f800001, 0x7fc0 },   /* payload in the low bits only: must stay NaN */
    { 0xff800001, 0xffc0 },
    { 0x7fffffff, 0x7fff },   /* no rounding carry out of a NaN */
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    ck_assert_msg (llm_bf16_from_f32 (bits_f32 (cases[i].f)) == cases[i].b,
        "0x%08x -> 0x%04x, expected 0x%04x", cases[i].f,
        llm_bf16_from_f32 (bits_f32 (cases[i].f)), cases[i].b);
  for (guint32 b = 0; b < 0x10000; b++) {
    if ((b & 0x7f80) == 0x7f80 && (b & 0x7f))
      continue;               /* NaNs come back quiet */
    ck_assert_uint_eq (f32_bits (llm_bf16_to_f32 (b)), b << 16);
    ck_assert_uint_eq (llm_bf16_from_f32 (llm_bf16_to_f32 (b)), b);
  }
}
END_TEST

/* d = 127/127 = 1 and 63.5/127 = 0.5 are exact, so each q is roundf(x) or
 * roundf(2x) by hand: halves round away from zero. */
START_TEST (test_q8_0_quantizes_known_blocks_to_exact_bytes)
{
  float x[96] = {
    127.0f, -3.5f, 2.5f, 0.5f, -0.5f, 1.49f, -1.5f, 0.0f, 100.4f, -100.6f, 126.5f, -127.0f,
  };
  x[32] = -63.5f; x[33] = 0.25f; x[34] = -0.25f; x[35] = 0.75f; x[36] = 10.2f; x[63] = 63.4f;
  /* x[64..95] all zero: d = 0 and every q = 0. */
  LlmBlockQ8_0 q[3];
  llm_quantize_row_q8_0 (x, q, 96);

  static const int8_t want0[12] = { 127, -4, 3, 1, -1, 1, -2, 0, 100, -101, 127, -127 };
  ck_assert_uint_eq (q[0].d, 0x3c00);
  for (int j = 0; j < 32; j++)
    ck_assert_int_eq (q[0].qs[j], j < 12 ? want0[j] : 0);
  ck_assert_uint_eq (q[1].d, 0x3800);
  static const int8_t want1[5] = { -127, 1, -1, 2, 20 };
  for (int j = 0; j < 31; j++)
    ck_assert_int_eq (q[1].qs[j], j < 5 ? want1[j] : 0);
  ck_assert_int_eq (q[1].qs[31], 127);
  ck_assert_uint_eq (q[2].d, 0);
  for (int j = 0; j < 32; j++)
    ck_assert_int_eq (q[2].qs[j], 0);

  float y[96];
  llm_dequantize_row_q8_0 (q, y, 96);
  ck_assert (y[0] == 127.0f && y[1] == -4.0f && y[9] == -101.0f);
  ck_assert (y[32] == -63.5f && y[33] == 0.5f && y[36] == 10.0f);
  ck_assert (y[64] == 0.0f);
}
END_TEST

/* Block 0: the largest magnitude is -8, so d = -8 / -8 = 1 and the code is
 * trunc(x + 8.5), clamped to 15. Block 1: the first of the equal
 * magnitudes 4 and -4 wins, so d = 4 / -8 = -0.5 and the code is
 * trunc(-2x + 8.5). Element j sits in the low nibble of byte j, element
 * j + 16 in its high nibble. */
START_TEST (test_q4_0_quantizes_known_blocks_to_exact_bytes_and_nibble_order)
{
  float x[64] = {
    -8.0f, 7.0f, 8.0f, 0.0f, 0.4f, 0.5f, -0.5f, -0.6f, -7.5f, -7.6f,
  };
  x[16] = 3.0f; x[17] = -3.0f;
  x[32] = 4.0f; x[33] = -4.0f; x[34] = 1.0f; x[35] = -1.0f; x[48] = 0.2f;
  LlmBlockQ4_0 q[2];
  llm_quantize_row_q4_0 (x, q, 64);

  /* lows: 0 15 15(clamped 16) 8 8 9 8 7 1 0 8...; highs: 11 5 8... */
  static const guint8 want0[16] = {
    0xb0, 0x5f, 0x8f, 0x88, 0x88, 0x89, 0x88, 0x87,
    0x81, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
  };
  ck_assert_uint_eq (q[0].d, 0x3c00);
  for (int j = 0; j < 16; j++)
    ck_assert_msg (q[0].qs[j] == want0[j], "block 0 byte %d: 0x%02x", j, q[0].qs[j]);

  /* lows: 0 15(clamped 16) 6 10 8...; high of byte 0: trunc(-0.4 + 8.5) = 8 */
  static const guint8 want1[16] = {
    0x80, 0x8f, 0x86, 0x8a, 0x88, 0x88, 0x88, 0x88,
    0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
  };
  ck_assert_uint_eq (q[1].d, 0xb800);
  for (int j = 0; j < 16; j++)
    ck_assert_msg (q[1].qs[j] == want1[j], "block 1 byte %d: 0x%02x", j, q[1].qs[j]);

  float y[64];
  llm_dequantize_row_q4_0 (q, y, 64);
  ck_assert (y[0] == -8.0f && y[1] == 7.0f && y[2] == 7.0f && y[16] == 3.0f);
  ck_assert (y[32] == 4.0f && y[33] == -3.5f && y[34] == 1.0f && y[35] == -1.0f);
}
END_TEST

/* ggml computes d = 0 / -8, which is -0: the scale's bits are 0x8000. */
START_TEST (test_all_zero_q4_0_block_has_negative_zero_scale_and_middle_codes)
{
  float x[32] = { 0 };
  LlmBlockQ4_0 q;
  llm_quantize_row_q4_0 (x, &q, 32);
  ck_assert_uint_eq (q.d, 0x8000);
  for (int j = 0; j < 16; j++)
    ck_assert_uint_eq (q.qs[j], 0x88);
}
END_TEST

/* =================== validation =================== */

/* A writer file with a key of every kind and two tensors; the last tensor
 * (32 bytes of F32) ends exactly at the end of the file, so no proper
 * prefix of the file is a complete GGUF. */
static GBytes *
write_every_kind_of_file (void)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  llm_gguf_writer_add_uint8 (w, "u8", 1);
  llm_gguf_writer_add_int8 (w, "i8", -1);
  llm_gguf_writer_add_uint16 (w, "u16", 2);
  llm_gguf_writer_add_int16 (w, "i16", -2);
  llm_gguf_writer_add_uint32 (w, "u32", 3);
  llm_gguf_writer_add_int32 (w, "i32", -3);
  llm_gguf_writer_add_float32 (w, "f32", 0.5f);
  llm_gguf_writer_add_bool (w, "bool", TRUE);
  llm_gguf_writer_add_uint64 (w, "u64", 4);
  llm_gguf_writer_add_int64 (w, "i64", -4);
  llm_gguf_writer_add_float64 (w, "f64", 0.25);
  llm_gguf_writer_add_string (w, "str", "hello");
  const gint32 ints[3] = { 1, 2, 3 };
  llm_gguf_writer_add_array (w, "ints", LLM_GGUF_INT32, ints, 3);
  const char *strs[3] = { "a", "", "ccc" };
  llm_gguf_writer_add_string_array (w, "strs", strs, 3);
  const void *arrays[2] = { ints, ints };
  const guint64 lens[2] = { 3, 1 };
  llm_gguf_writer_add_nested_array (w, "nested", LLM_GGUF_INT32, arrays, lens, 2);
  g_autofree float *x = make_input (64);
  ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, "q", LLM_TYPE_Q8_0, 2,
          (const guint64[]) { 32, 2 }, x, NULL));
  ck_assert (llm_gguf_writer_add_tensor_from_f32 (w, "f", LLM_TYPE_F32, 1,
          (const guint64[]) { 8 }, x, NULL));
  return writer_bytes (w);
}

START_TEST (test_every_truncation_of_a_valid_file_fails_cleanly)
{
  g_autoptr (GBytes) full = write_every_kind_of_file ();
  gsize size;
  const guint8 *p = g_bytes_get_data (full, &size);
  {
    g_autoptr (LlmGguf) g = load_bytes (full);
    const LlmGgufTensor *f = llm_gguf_find_tensor (g, "f");
    ck_assert_uint_eq (f->offset + f->size, size);
  }

  int truncated = 0, format = 0;
  for (gsize len = 0; len < size; len++) {
    GError *error = load_fails (p, len);
    ck_assert_msg (error->code == LLM_GGUF_ERROR_TRUNCATED || error->code == LLM_GGUF_ERROR_FORMAT,
        "length %zu: code %d: %s", len, error->code, error->message);
    /* Every message says where: a byte offset, or the tensor that is cut. */
    ck_assert_msg (strstr (error->message, "byte") != NULL, "length %zu: %s", len,
        error->message);
    truncated += error->code == LLM_GGUF_ERROR_TRUNCATED;
    format += error->code == LLM_GGUF_ERROR_FORMAT;
    g_error_free (error);
  }
  ck_assert_int_eq (truncated + format, size);
}
END_TEST

START_TEST (test_bad_magic_is_a_format_error_at_byte_0)
{
  GByteArray *b = raw_one_tensor_file ("t", 8);
  b->data[3] = 'X';
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "magic", "at byte 0", NULL);
}
END_TEST

START_TEST (test_gguf_version_1_is_rejected_with_advice)
{
  GByteArray *b = raw_one_tensor_file ("t", 8);
  b->data[4] = 1;
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "version 1", "at byte 4", NULL);
}
END_TEST

START_TEST (test_gguf_version_4_is_rejected)
{
  GByteArray *b = raw_one_tensor_file ("t", 8);
  b->data[4] = 4;
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "version 4", "at byte 4", NULL);
}
END_TEST

START_TEST (test_big_endian_file_is_named_as_such)
{
  GByteArray *b = raw_one_tensor_file ("t", 8);
  b->data[4] = 0;
  b->data[7] = 3;
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "big-endian", NULL);
}
END_TEST

START_TEST (test_gguf_version_2_loads)
{
  g_autoptr (GByteArray) b = raw_one_tensor_file ("t", 8);
  b->data[4] = 2;
  g_autoptr (GBytes) bytes = g_bytes_new (b->data, b->len);
  g_autoptr (LlmGguf) g = load_bytes (bytes);
  ck_assert_uint_eq (llm_gguf_version (g), 2);
  ck_assert_uint_eq (llm_gguf_find_tensor (g, "t")->size, 32);
}
END_TEST

START_TEST (test_huge_key_count_is_rejected_before_allocating)
{
  GByteArray *b = raw_header (3, 0, G_MAXUINT64);
  raw_kv_u32 (b, "a", 1);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "metadata count", "18446744073709551615", NULL);
}
END_TEST

START_TEST (test_huge_tensor_count_is_rejected_before_allocating)
{
  GByteArray *b = raw_header (3, G_MAXUINT64 / 2, 0);
  raw_zeros (b, 64);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "tensor count", "at byte 8", NULL);
}
END_TEST

START_TEST (test_key_length_of_2_to_the_64_minus_1_is_truncation_not_overflow)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_u64 (b, G_MAXUINT64);
  raw_zeros (b, 16);
  expect_error (b, LLM_GGUF_ERROR_TRUNCATED, "metadata key", "at byte 24", NULL);
}
END_TEST

START_TEST (test_string_value_running_past_the_end_names_its_key)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "general.name");
  raw_u32 (b, LLM_GGUF_STRING);
  raw_u64 (b, 100);
  g_byte_array_append (b, (const guint8 *) "short", 5);
  expect_error (b, LLM_GGUF_ERROR_TRUNCATED, "general.name", "100", NULL);
}
END_TEST

START_TEST (test_array_whose_byte_size_overflows_64_bits_is_rejected)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "big");
  raw_u32 (b, LLM_GGUF_ARRAY);
  raw_u32 (b, LLM_GGUF_UINT64);
  raw_u64 (b, (G_MAXUINT64 / 8) + 2);   /* count * 8 wraps to 8 */
  raw_u64 (b, 0);
  expect_error (b, LLM_GGUF_ERROR_TRUNCATED, "'big'", NULL);
}
END_TEST

START_TEST (test_string_array_count_beyond_the_file_is_rejected)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "tokens");
  raw_u32 (b, LLM_GGUF_ARRAY);
  raw_u32 (b, LLM_GGUF_STRING);
  raw_u64 (b, 1ull << 60);
  raw_str (b, "one");
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "'tokens'", NULL);
}
END_TEST

START_TEST (test_unknown_value_type_names_the_key_and_offset)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "odd");
  raw_u32 (b, 13);
  raw_u32 (b, 0);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "'odd'", "13", "at byte 35", NULL);
}
END_TEST

START_TEST (test_unknown_array_element_type_names_the_key)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "arr");
  raw_u32 (b, LLM_GGUF_ARRAY);
  raw_u32 (b, 99);
  raw_u64 (b, 1);
  raw_u32 (b, 0);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "'arr'", "99", NULL);
}
END_TEST

START_TEST (test_arrays_nested_too_deep_are_rejected_without_recursing_forever)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "deep");
  raw_u32 (b, LLM_GGUF_ARRAY);
  for (int i = 0; i < 64; i++) {
    raw_u32 (b, LLM_GGUF_ARRAY);
    raw_u64 (b, 1);
  }
  raw_u32 (b, LLM_GGUF_UINT8);
  raw_u64 (b, 0);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "'deep'", "nest", NULL);
}
END_TEST

START_TEST (test_duplicate_key_is_rejected_by_name)
{
  GByteArray *b = raw_header (3, 0, 2);
  raw_kv_u32 (b, "llama.block_count", 1);
  raw_kv_u32 (b, "llama.block_count", 2);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "duplicate", "'llama.block_count'", "at byte 57", NULL);
}
END_TEST

START_TEST (test_empty_key_is_rejected)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_kv_u32 (b, "", 1);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "empty", "at byte 24", NULL);
}
END_TEST

static GByteArray *
raw_alignment_file (guint32 type, guint64 value)
{
  GByteArray *b = raw_header (3, 0, 1);
  raw_str (b, "general.alignment");
  raw_u32 (b, type);
  if (type == LLM_GGUF_UINT64)
    raw_u64 (b, value);
  else
    raw_u32 (b, (guint32) value);
  return b;
}

START_TEST (test_alignment_of_zero_is_rejected)
{
  expect_error (raw_alignment_file (LLM_GGUF_UINT32, 0), LLM_GGUF_ERROR_FORMAT,
      "general.alignment", "power of two", NULL);
}
END_TEST

START_TEST (test_alignment_that_is_not_a_power_of_two_is_rejected)
{
  expect_error (raw_alignment_file (LLM_GGUF_UINT32, 48), LLM_GGUF_ERROR_FORMAT,
      "general.alignment", "48", NULL);
}
END_TEST

START_TEST (test_alignment_of_another_type_than_uint32_is_rejected)
{
  expect_error (raw_alignment_file (LLM_GGUF_UINT64, 32), LLM_GGUF_ERROR_FORMAT,
      "general.alignment", "uint64", NULL);
  expect_error (raw_alignment_file (LLM_GGUF_INT32, 32), LLM_GGUF_ERROR_FORMAT,
      "general.alignment", "int32", NULL);
}
END_TEST

/* A file with one tensor described by the arguments and @data_bytes of
 * data after the padded header. */
static GByteArray *
raw_tensor_file (const char *name, guint32 n_dims, const guint64 *ne, guint32 type,
    guint64 offset, gsize data_bytes)
{
  GByteArray *b = raw_header (3, 1, 0);
  raw_tensor (b, name, n_dims, ne, type, offset);
  raw_pad (b, 32);
  raw_zeros (b, data_bytes);
  return b;
}

START_TEST (test_unknown_tensor_type_names_the_tensor)
{
  /* 4 was Q4_2, removed from ggml long ago; 39 is past the end. */
  expect_error (raw_tensor_file ("blk.0.w", 1, (const guint64[]) { 32 }, 4, 0, 128),
      LLM_GGUF_ERROR_FORMAT, "'blk.0.w'", "type id 4", NULL);
  expect_error (raw_tensor_file ("blk.0.w", 1, (const guint64[]) { 32 }, 39, 0, 128),
      LLM_GGUF_ERROR_FORMAT, "'blk.0.w'", "39", NULL);
}
END_TEST

START_TEST (test_zero_and_five_dimensions_are_rejected)
{
  expect_error (raw_tensor_file ("t", 0, NULL, LLM_TYPE_F32, 0, 32),
      LLM_GGUF_ERROR_FORMAT, "'t'", "0 dimensions", "at byte 33", NULL);
  expect_error (raw_tensor_file ("t", 5, (const guint64[]) { 1, 1, 1, 1, 1 }, LLM_TYPE_F32, 0, 32),
      LLM_GGUF_ERROR_FORMAT, "'t'", "5 dimensions", NULL);
}
END_TEST

/* ggml reads dimensions as int64 and llama.cpp rejects negative ones. */
START_TEST (test_negative_dimension_is_rejected)
{
  expect_error (raw_tensor_file ("t", 2, (const guint64[]) { 8, 1ull << 63 }, LLM_TYPE_F32, 0, 32),
      LLM_GGUF_ERROR_FORMAT, "'t'", "negative", NULL);
}
END_TEST

START_TEST (test_element_count_overflow_is_rejected)
{
  expect_error (raw_tensor_file ("t", 2, (const guint64[]) { 1ull << 32, 1ull << 32 },
          LLM_TYPE_F32, 0, 32), LLM_GGUF_ERROR_FORMAT, "'t'", "overflow", NULL);
  expect_error (raw_tensor_file ("t", 4, (const guint64[]) { 1 << 16, 1 << 16, 1 << 16, 1 << 15 },
          LLM_TYPE_I8, 0, 32), LLM_GGUF_ERROR_FORMAT, "'t'", "overflow", NULL);
}
END_TEST

/* Matches ggml, where a dimension of 0 is an empty tensor (ne >= 0). */
START_TEST (test_zero_length_dimension_is_an_empty_tensor)
{
  g_autoptr (GByteArray) b = raw_tensor_file ("empty", 2, (const guint64[]) { 32, 0 },
      LLM_TYPE_F32, 0, 0);
  g_autoptr (GBytes) bytes = g_bytes_new (b->data, b->len);
  g_autoptr (LlmGguf) g = load_bytes (bytes);
  const LlmGgufTensor *t = llm_gguf_find_tensor (g, "empty");
  ck_assert_uint_eq (t->n_elems, 0);
  ck_assert_uint_eq (t->size, 0);
}
END_TEST

START_TEST (test_row_that_is_not_whole_blocks_is_rejected)
{
  expect_error (raw_tensor_file ("q", 1, (const guint64[]) { 33 }, LLM_TYPE_Q8_0, 0, 64),
      LLM_GGUF_ERROR_FORMAT, "'q'", "33", "block", NULL);
}
END_TEST

START_TEST (test_tensor_name_of_64_bytes_is_rejected)
{
  char name[65];
  memset (name, 'x', 64);
  name[64] = '\0';
  expect_error (raw_tensor_file (name, 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 0, 32),
      LLM_GGUF_ERROR_FORMAT, "64", NULL);
}
END_TEST

START_TEST (test_unaligned_tensor_offset_is_rejected_by_name)
{
  expect_error (raw_tensor_file ("t", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 4, 64),
      LLM_GGUF_ERROR_FORMAT, "'t'", "offset 4", "alignment 32", NULL);
}
END_TEST

START_TEST (test_tensor_data_past_the_end_is_truncation_naming_the_tensor)
{
  expect_error (raw_tensor_file ("t", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 0, 31),
      LLM_GGUF_ERROR_TRUNCATED, "'t'", "32 bytes", NULL);
  /* Aligned offsets so large that offset + size wraps around to 0. */
  expect_error (raw_tensor_file ("t", 1, (const guint64[]) { 8 }, LLM_TYPE_F32,
          G_MAXUINT64 - 31, 32), LLM_GGUF_ERROR_TRUNCATED, "'t'", NULL);
  expect_error (raw_tensor_file ("t", 1, (const guint64[]) { 8 }, LLM_TYPE_F32,
          G_MAXUINT64 - 63, 32), LLM_GGUF_ERROR_TRUNCATED, "'t'", NULL);
}
END_TEST

START_TEST (test_duplicate_tensor_name_is_rejected)
{
  GByteArray *b = raw_header (3, 2, 0);
  raw_tensor (b, "w", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 0);
  raw_tensor (b, "w", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 32);
  raw_pad (b, 32);
  raw_zeros (b, 64);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "duplicate", "'w'", "at byte 57", NULL);
}
END_TEST

START_TEST (test_overlapping_tensors_are_rejected_by_name)
{
  GByteArray *b = raw_header (3, 2, 0);
  raw_tensor (b, "a", 1, (const guint64[]) { 16 }, LLM_TYPE_F32, 0);
  raw_tensor (b, "b", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 32);
  raw_pad (b, 32);
  raw_zeros (b, 64);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "overlap", "'a'", "'b'", NULL);
}
END_TEST

/* Found by the fuzzer: sorted by offset, an empty tensor sits between two
 * that overlap, and comparing only neighbours misses it. */
START_TEST (test_overlap_hidden_behind_an_empty_tensor_is_still_rejected)
{
  GByteArray *b = raw_header (3, 3, 0);
  raw_tensor (b, "a", 1, (const guint64[]) { 24 }, LLM_TYPE_F32, 0);   /* bytes 0..95 */
  raw_tensor (b, "empty", 1, (const guint64[]) { 0 }, LLM_TYPE_F32, 32);
  raw_tensor (b, "c", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 64);   /* bytes 64..95 */
  raw_pad (b, 32);
  raw_zeros (b, 96);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "overlap", "'a'", "'c'", NULL);
}
END_TEST

START_TEST (test_tensors_may_share_no_bytes_but_may_appear_out_of_order)
{
  g_autoptr (GByteArray) b = raw_header (3, 2, 0);
  raw_tensor (b, "second", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 32);
  raw_tensor (b, "first", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 0);
  raw_pad (b, 32);
  gsize data = b->len;
  raw_zeros (b, 64);
  b->data[data + 32] = 0xab;
  g_autoptr (GBytes) bytes = g_bytes_new (b->data, b->len);
  g_autoptr (LlmGguf) g = load_bytes (bytes);
  ck_assert_uint_eq (llm_gguf_find_tensor (g, "second")->data[0], 0xab);
  ck_assert_uint_eq (llm_gguf_find_tensor (g, "first")->data[0], 0);
}
END_TEST

START_TEST (test_header_with_tensors_but_no_data_section_is_rejected)
{
  GByteArray *b = raw_header (3, 1, 0);
  raw_tensor (b, "t", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 0);
  expect_error (b, LLM_GGUF_ERROR_FORMAT, "past the end", NULL);
}
END_TEST

/* =================== strings from the file in messages =================== */

START_TEST (test_escape_keeps_utf8_and_spells_other_bytes_as_hex)
{
  const struct {
    const char *in;
    gssize len;
    const char *out;
  } cases[] = {
    { "blk.0.attn_q.weight", -1, "blk.0.attn_q.weight" },
    { "caf\xc3\xa9 \xe6\x97\xa5", -1, "caf\xc3\xa9 \xe6\x97\xa5" },
    { "a\xff\xfe" "b", -1, "a\\xff\\xfeb" },
    { "cut \xc3", -1, "cut \\xc3" },                /* a character cut short */
    { "\xc0\x80", -1, "\\xc0\\x80" },             /* overlong NUL */
    { "\xed\xa0\x80", -1, "\\xed\\xa0\\x80" },    /* UTF-16 surrogate */
    { "line\nbreak\x7f", -1, "line\\x0abreak\\x7f" },
    { "back\\slash", -1, "back\\\\slash" },
    { "nul\0inside", 10, "nul\\x00inside" },
    { "", -1, "" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *got = llm_gguf_escape (cases[i].in, cases[i].len);
    ck_assert_msg (strcmp (got, cases[i].out) == 0, "case %u: \"%s\", expected \"%s\"", i,
        got, cases[i].out);
    ck_assert (g_utf8_validate (got, -1, NULL));
  }

  /* a hostile length is cut: 128 bytes shown, then "..." */
  g_autofree char *x300 = g_strnfill (300, 'x');
  g_autofree char *cut = llm_gguf_escape (x300, -1);
  ck_assert_uint_eq (strlen (cut), 128 + 3);
  ck_assert (g_str_has_suffix (cut, "x..."));
}
END_TEST

/* Asserts @raw fails with @code and a valid UTF-8 message holding @needle. */
static void
expect_escaped_error (GByteArray *raw, LlmGgufError code, const char *needle)
{
  GError *error = load_fails (raw->data, raw->len);
  ck_assert_msg (error->code == (gint) code, "error code %d, expected %d", error->code, code);
  ck_assert_msg (g_utf8_validate (error->message, -1, NULL), "message is not UTF-8");
  ck_assert_msg (strstr (error->message, needle) != NULL, "message lacks \"%s\": %s", needle,
      error->message);
  g_error_free (error);
  g_byte_array_unref (raw);
}

/* Names and keys are bytes; a message quoting them must still be UTF-8,
 * which GStreamer requires of the text it posts. */
START_TEST (test_non_utf8_tensor_names_and_keys_are_escaped_in_errors)
{
  /* tensor data missing */
  expect_escaped_error (raw_tensor_file ("blk.\xff\xfe.w", 1, (const guint64[]) { 8 },
          LLM_TYPE_F32, 0, 31), LLM_GGUF_ERROR_TRUNCATED, "'blk.\\xff\\xfe.w'");
  /* shape the type cannot hold */
  expect_escaped_error (raw_tensor_file ("q\x80", 1, (const guint64[]) { 33 }, LLM_TYPE_Q8_0,
          0, 64), LLM_GGUF_ERROR_FORMAT, "'q\\x80'");
  /* a tensor twice */
  GByteArray *b = raw_header (3, 2, 0);
  raw_tensor (b, "w\xc3", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 0);
  raw_tensor (b, "w\xc3", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 32);
  raw_pad (b, 32);
  raw_zeros (b, 64);
  expect_escaped_error (b, LLM_GGUF_ERROR_FORMAT, "duplicate tensor name 'w\\xc3'");
  /* overlapping tensors */
  b = raw_header (3, 2, 0);
  raw_tensor (b, "a\xfe", 1, (const guint64[]) { 16 }, LLM_TYPE_F32, 0);
  raw_tensor (b, "b\xfd", 1, (const guint64[]) { 8 }, LLM_TYPE_F32, 32);
  raw_pad (b, 32);
  raw_zeros (b, 64);
  expect_escaped_error (b, LLM_GGUF_ERROR_FORMAT, "'a\\xfe' and 'b\\xfd' overlap");
  /* a key twice, and a key whose value runs past the end */
  b = raw_header (3, 0, 2);
  raw_kv_u32 (b, "k\xff", 1);
  raw_kv_u32 (b, "k\xff", 2);
  expect_escaped_error (b, LLM_GGUF_ERROR_FORMAT, "duplicate metadata key 'k\\xff'");
  b = raw_header (3, 0, 1);
  raw_str (b, "s\xf0\x9f");
  raw_u32 (b, LLM_GGUF_STRING);
  raw_u64 (b, 1000);
  expect_escaped_error (b, LLM_GGUF_ERROR_TRUNCATED, "key 's\\xf0\\x9f'");
}
END_TEST

/* =================== suite =================== */

static Suite *
gguf_suite (void)
{
  Suite *s = suite_create ("gguf");

  TCase *real = tcase_create ("real-files");
  tcase_set_timeout (real, 60);
  tcase_add_test (real, test_stories260k_loads_as_llama_with_f32_token_embeddings);
  tcase_add_test (real, test_tinystories_656k_loads_with_q8_0_weights);
  tcase_add_loop_test (real, test_vocab_only_files_load_with_their_token_lists, 0,
      G_N_ELEMENTS (vocab_cases));
  tcase_add_test (real, test_opening_a_missing_file_is_an_io_error_naming_the_path);
  tcase_add_test (real, test_opening_a_directory_says_it_is_one);
  tcase_add_test (real, test_missing_and_mistyped_keys_are_reported_by_name);
  suite_add_tcase (s, real);

  TCase *writer = tcase_create ("writer");
  tcase_add_test (writer, test_empty_writer_output_is_a_bare_padded_header);
  tcase_add_test (writer, test_writer_lays_out_key_and_tensor_bytes_as_the_format_says);
  tcase_add_test (writer, test_every_scalar_type_round_trips_through_the_reader);
  tcase_add_test (writer, test_strings_round_trip_including_empty_utf8_and_embedded_nul);
  tcase_add_test (writer, test_numeric_arrays_of_every_type_round_trip_element_for_element);
  tcase_add_test (writer, test_string_arrays_round_trip_and_out_of_range_index_is_null);
  tcase_add_test (writer, test_nested_arrays_load_with_their_outer_count_and_keys_after_them_read_right);
  tcase_add_test (writer, test_tensors_of_every_type_and_awkward_shapes_round_trip_byte_for_byte);
  tcase_add_test (writer, test_custom_alignment_of_64_places_every_tensor_on_a_64_byte_boundary);
  tcase_add_test (writer, test_raw_tensor_bytes_round_trip_unchanged);
  tcase_add_test (writer, test_writer_output_is_deterministic);
  tcase_add_test (writer, test_written_file_opens_with_its_path_and_leaves_no_temporary_behind);
  tcase_add_test (writer, test_writing_into_a_missing_directory_is_an_io_error);
  tcase_add_test (writer, test_writer_rejects_a_duplicate_key_and_reports_it_at_output);
  tcase_add_test (writer, test_writer_rejects_an_empty_key_which_no_reader_would_load);
  tcase_add_test (writer, test_writer_rejects_a_duplicate_tensor_name);
  tcase_add_test (writer, test_writer_rejects_tensors_whose_shape_size_or_type_is_wrong);
  tcase_add_test (writer, test_writer_accepts_only_a_power_of_two_uint32_alignment);
  suite_add_tcase (s, writer);

  TCase *compat = tcase_create ("llama.cpp-compatibility");
  /* Converts 4M weights per file; minutes under valgrind. */
  tcase_set_timeout (compat, 600);
  tcase_add_loop_test (compat, test_writer_reproduces_llama_cpp_files_byte_for_byte, 0,
      G_N_ELEMENTS (llama_cpp_files));
  tcase_add_test (compat, test_copying_a_nested_array_key_is_refused);
  suite_add_tcase (s, compat);

  TCase *conv = tcase_create ("conversion");
  tcase_set_timeout (conv, 60);
  tcase_add_test (conv, test_fp16_conversion_of_edge_values_matches_ieee);
  tcase_add_test (conv, test_fp16_rounds_every_midpoint_to_even_and_round_trips_every_half);
  tcase_add_test (conv, test_bf16_rounds_to_nearest_even_and_keeps_nan_quiet);
  tcase_add_test (conv, test_q8_0_quantizes_known_blocks_to_exact_bytes);
  tcase_add_test (conv, test_q4_0_quantizes_known_blocks_to_exact_bytes_and_nibble_order);
  tcase_add_test (conv, test_all_zero_q4_0_block_has_negative_zero_scale_and_middle_codes);
  suite_add_tcase (s, conv);

  TCase *val = tcase_create ("validation");
  /* The truncation sweep runs the reader ~1000 times; slow under valgrind. */
  tcase_set_timeout (val, 300);
  tcase_add_test (val, test_every_truncation_of_a_valid_file_fails_cleanly);
  tcase_add_test (val, test_bad_magic_is_a_format_error_at_byte_0);
  tcase_add_test (val, test_gguf_version_1_is_rejected_with_advice);
  tcase_add_test (val, test_gguf_version_4_is_rejected);
  tcase_add_test (val, test_big_endian_file_is_named_as_such);
  tcase_add_test (val, test_gguf_version_2_loads);
  tcase_add_test (val, test_huge_key_count_is_rejected_before_allocating);
  tcase_add_test (val, test_huge_tensor_count_is_rejected_before_allocating);
  tcase_add_test (val, test_key_length_of_2_to_the_64_minus_1_is_truncation_not_overflow);
  tcase_add_test (val, test_string_value_running_past_the_end_names_its_key);
  tcase_add_test (val, test_array_whose_byte_size_overflows_64_bits_is_rejected);
  tcase_add_test (val, test_string_array_count_beyond_the_file_is_rejected);
  tcase_add_test (val, test_unknown_value_type_names_the_key_and_offset);
  tcase_add_test (val, test_unknown_array_element_type_names_the_key);
  tcase_add_test (val, test_arrays_nested_too_deep_are_rejected_without_recursing_forever);
  tcase_add_test (val, test_duplicate_key_is_rejected_by_name);
  tcase_add_test (val, test_empty_key_is_rejected);
  tcase_add_test (val, test_alignment_of_zero_is_rejected);
  tcase_add_test (val, test_alignment_that_is_not_a_power_of_two_is_rejected);
  tcase_add_test (val, test_alignment_of_another_type_than_uint32_is_rejected);
  tcase_add_test (val, test_unknown_tensor_type_names_the_tensor);
  tcase_add_test (val, test_zero_and_five_dimensions_are_rejected);
  tcase_add_test (val, test_negative_dimension_is_rejected);
  tcase_add_test (val, test_element_count_overflow_is_rejected);
  tcase_add_test (val, test_zero_length_dimension_is_an_empty_tensor);
  tcase_add_test (val, test_row_that_is_not_whole_blocks_is_rejected);
  tcase_add_test (val, test_tensor_name_of_64_bytes_is_rejected);
  tcase_add_test (val, test_unaligned_tensor_offset_is_rejected_by_name);
  tcase_add_test (val, test_tensor_data_past_the_end_is_truncation_naming_the_tensor);
  tcase_add_test (val, test_duplicate_tensor_name_is_rejected);
  tcase_add_test (val, test_overlapping_tensors_are_rejected_by_name);
  tcase_add_test (val, test_overlap_hidden_behind_an_empty_tensor_is_still_rejected);
  tcase_add_test (val, test_tensors_may_share_no_bytes_but_may_appear_out_of_order);
  tcase_add_test (val, test_header_with_tensors_but_no_data_section_is_rejected);
  tcase_add_test (val, test_escape_keeps_utf8_and_spells_other_bytes_as_hex);
  tcase_add_test (val, test_non_utf8_tensor_names_and_keys_are_escaped_in_errors);
  suite_add_tcase (s, val);

  return s;
}

LLM_TEST_MAIN (gguf_suite)
