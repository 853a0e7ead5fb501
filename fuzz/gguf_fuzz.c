/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer harness for the GGUF reader. Any input must either be rejected
 * with a GError or load into something every accessor can walk without
 * reading outside the input; on success the reader's promises (tensor
 * sizes, bounds, no overlap) are re-checked here and a broken one traps,
 * so the fuzzer reports logic errors as well as memory errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

/* Keeps the compiler from dropping the reads that let ASan see them. */
static volatile guint8 sink;

static void
touch (const void *p, gsize n)
{
  const guint8 *b = p;
  guint8 acc = 0;
  for (gsize i = 0; i < n; i++)
    acc ^= b[i];
  sink ^= acc;
}

#define CHECK(cond) do { if (!(cond)) __builtin_trap (); } while (0)

static void
walk_kv (const LlmGguf *g, guint64 idx)
{
  const char *key = llm_gguf_key (g, idx);
  CHECK (key != NULL);
  CHECK (llm_gguf_find_key (g, key) == (gint64) idx);
  LlmGgufValueType type = llm_gguf_kv_type (g, idx);

  /* Every getter on every key: the wrong ones must fail cleanly. */
  GError *error = NULL;
  guint64 u;
  gint64 s;
  double f;
  gboolean b;
  const char *str;
  gsize len;
  if (!llm_gguf_get_uint (g, key, &u, &error))
    g_clear_error (&error);
  if (!llm_gguf_get_int (g, key, &s, &error))
    g_clear_error (&error);
  if (!llm_gguf_get_float (g, key, &f, &error))
    g_clear_error (&error);
  if (!llm_gguf_get_bool (g, key, &b, &error))
    g_clear_error (&error);
  if (llm_gguf_get_string (g, key, &str, &len, &error)) {
    CHECK (type == LLM_GGUF_STRING);
    touch (str, len);
    /* The copy stops at an embedded NUL (g_strndup); up to there it must
     * match. */
    char *dup = llm_gguf_dup_string (g, key, NULL);
    CHECK (dup != NULL && strlen (dup) <= len && memcmp (dup, str, strlen (dup)) == 0);
    g_free (dup);
  } else {
    g_clear_error (&error);
  }

  LlmGgufValueType et;
  guint64 n;
  if (!llm_gguf_get_array (g, key, &et, &n, &error)) {
    g_clear_error (&error);
    CHECK (type != LLM_GGUF_ARRAY);
    return;
  }
  CHECK (type == LLM_GGUF_ARRAY);
  gsize esize = llm_gguf_value_type_size (et);
  const void *data = llm_gguf_array_data (g, key);
  if (esize != 0) {
    CHECK (data != NULL);
    touch (data, n * esize);
  }
  if (et == LLM_GGUF_STRING) {
    for (guint64 i = 0; i < n; i++) {
      const char *e = llm_gguf_array_string (g, key, i, &len);
      CHECK (e != NULL);
      touch (e, len);
    }
    CHECK (llm_gguf_array_string (g, key, n, &len) == NULL);
  }
}

static void
walk_tensors (const LlmGguf *g)
{
  gsize file_size;
  const guint8 *file = llm_gguf_bytes (g, &file_size);
  guint64 n = llm_gguf_n_tensors (g);
  for (guint64 i = 0; i < n; i++) {
    const LlmGgufTensor *t = llm_gguf_tensor (g, i);
    CHECK (t != NULL && t->name != NULL);
    CHECK (llm_gguf_find_tensor (g, t->name) == t);
    CHECK (t->n_dims >= 1 && t->n_dims <= LLM_GGUF_MAX_DIMS);
    guint64 elems = 1;
    for (guint d = 0; d < LLM_GGUF_MAX_DIMS; d++) {
      if (d >= t->n_dims)
        CHECK (t->ne[d] == 1);
      elems *= t->ne[d];
    }
    CHECK (elems == t->n_elems);
    guint32 block_elems, block_bytes;
    CHECK (llm_type_info (t->type, &block_elems, &block_bytes));
    CHECK (t->n_elems % block_elems == 0);
    CHECK (t->size == t->n_elems / block_elems * block_bytes);
    CHECK (t->offset >= llm_gguf_data_offset (g));
    CHECK (t->offset % llm_gguf_alignment (g) == llm_gguf_data_offset (g) % llm_gguf_alignment (g));
    CHECK (t->offset <= file_size && t->size <= file_size - t->offset);
    CHECK (t->data == file + t->offset);
    touch (t->data, t->size);
  }
  /* No two tensors with data share a byte. Quadratic, so only for the
   * small files the fuzzer makes. */
  if (n > 256)
    return;
  for (guint64 i = 0; i < n; i++) {
    const LlmGgufTensor *a = llm_gguf_tensor (g, i);
    for (guint64 j = i + 1; j < n; j++) {
      const LlmGgufTensor *b = llm_gguf_tensor (g, j);
      if (a->size == 0 || b->size == 0)
        continue;
      CHECK (a->offset + a->size <= b->offset || b->offset + b->size <= a->offset);
    }
  }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* libFuzzer hands us an allocation of exactly @size bytes, so reading
   * past it is caught without copying. */
  GBytes *bytes = g_bytes_new_static (data, size);
  GError *error = NULL;
  LlmGguf *g = llm_gguf_new_from_bytes (bytes, &error);
  g_bytes_unref (bytes);
  if (g == NULL) {
    CHECK (error != NULL && error->domain == LLM_GGUF_ERROR && error->message != NULL);
    g_error_free (error);
    return 0;
  }
  CHECK (error == NULL);
  CHECK (llm_gguf_version (g) == 2 || llm_gguf_version (g) == 3);
  guint32 a = llm_gguf_alignment (g);
  CHECK (a != 0 && (a & (a - 1)) == 0);
  for (guint64 i = 0; i < llm_gguf_n_kv (g); i++)
    walk_kv (g, i);
  walk_tensors (g);
  llm_gguf_free (g);
  return 0;
}
