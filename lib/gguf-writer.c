/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Metadata is serialised as it is added (so a key's bytes never depend on
 * later calls); tensor offsets are only assigned when the file is laid
 * out, because general.alignment may be added after the tensors. */
#include "gguf-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "cpu/fp16.h"
#include "cpu/quantize.h"
#include "cpu/kquants-quantize.h"

/* ggml keeps tensor names in char[64] with the NUL; llama.cpp rejects
 * longer names, so a file we write with one would not load there. */
#define MAX_TENSOR_NAME 64
/* Metadata is kept in a GByteArray, which stops at 4 GiB; real files hold
 * a few MiB (the largest vocabularies). */
#define MAX_VALUE_BYTES (G_MAXUINT32 / 4)

typedef struct {
  char *name;
  guint32 type;
  guint n_dims;
  guint64 ne[LLM_GGUF_MAX_DIMS];
  GBytes *data;
  guint64 offset;             /* within the data section; set by layout() */
} WriterTensor;

struct _LlmGgufWriter {
  GByteArray *kv;             /* the serialised key/value pairs */
  guint64 n_kv;
  GHashTable *keys;           /* set of key strings */
  GPtrArray *tensors;         /* WriterTensor* */
  GHashTable *tensor_names;   /* set; the strings belong to the tensors */
  guint32 alignment;
  GError *error;              /* first failure; sticky */
};

G_DEFINE_QUARK (llm-gguf-writer-error-quark, llm_gguf_writer_error)

static void
writer_tensor_free (gpointer p)
{
  WriterTensor *t = p;
  g_free (t->name);
  g_bytes_unref (t->data);
  g_free (t);
}

LlmGgufWriter *
llm_gguf_writer_new (void)
{
  LlmGgufWriter *w = g_new0 (LlmGgufWriter, 1);
  w->kv = g_byte_array_new ();
  w->keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  w->tensors = g_ptr_array_new_with_free_func (writer_tensor_free);
  w->tensor_names = g_hash_table_new (g_str_hash, g_str_equal);
  w->alignment = LLM_GGUF_DEFAULT_ALIGNMENT;
  return w;
}

void
llm_gguf_writer_free (LlmGgufWriter *w)
{
  if (w == NULL)
    return;
  g_byte_array_unref (w->kv);
  g_hash_table_unref (w->keys);
  g_hash_table_unref (w->tensor_names);
  g_ptr_array_unref (w->tensors);
  g_clear_error (&w->error);
  g_free (w);
}

/* Sets @error (if wanted) and remembers the first failure for to_bytes(). */
G_GNUC_PRINTF (4, 5) static gboolean
fail (LlmGgufWriter *w, GError **error, LlmGgufWriterError code,
    const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  GError *e = g_error_new_valist (LLM_GGUF_WRITER_ERROR, code, fmt, ap);
  va_end (ap);
  if (w->error == NULL)
    w->error = g_error_copy (e);
  g_propagate_error (error, e);
  return FALSE;
}

/* --- serialisation: GGUF is little-endian whatever the host is --- */

static void
put_u32 (GByteArray *b, guint32 v)
{
  v = GUINT32_TO_LE (v);
  g_byte_array_append (b, (const guint8 *) &v, sizeof v);
}

static void
put_u64 (GByteArray *b, guint64 v)
{
  v = GUINT64_TO_LE (v);
  g_byte_array_append (b, (const guint8 *) &v, sizeof v);
}

static void
put_str (GByteArray *b, const char *s, gsize len)
{
  put_u64 (b, len);
  if (len > 0)
    g_byte_array_append (b, (const guint8 *) s, len);
}

/* Appends @n packed host-order elements of @elem_size bytes as LE. */
static void
put_elems (GByteArray *b, const void *data, guint64 n, gsize elem_size)
{
  if (n == 0)
    return;
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  g_byte_array_append (b, data, n * elem_size);
#else
  const guint8 *p = data;
  for (guint64 i = 0; i < n; i++, p += elem_size)
    for (gsize j = 0; j < elem_size; j++)
      g_byte_array_append (b, p + elem_size - 1 - j, 1);
#endif
}

static gboolean
is_scalar_type (LlmGgufValueType t)
{
  return llm_gguf_value_type_size (t) != 0;
}

static gboolean
is_alignment_key (const char *key)
{
  return key != NULL && strcmp (key, "general.alignment") == 0;
}

/* Checks @key and starts its record (key, value type) in a scratch array
 * the caller appends its value to and then commits with commit_kv(). */
static GByteArray *
begin_kv (LlmGgufWriter *w, const char *key, LlmGgufValueType type)
{
  if (key == NULL) {
    fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID, "metadata key is NULL");
    return NULL;
  }
  /* The reader rejects empty keys: nothing could look them up. */
  if (key[0] == '\0') {
    fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID, "metadata key is empty");
    return NULL;
  }
  if (g_hash_table_contains (w->keys, key)) {
    fail (w, NULL, LLM_GGUF_WRITER_ERROR_DUPLICATE,
        "metadata key '%s' added twice", key);
    return NULL;
  }
  /* The reader (and llama.cpp) only accept the alignment as a UINT32. */
  if (is_alignment_key (key) && type != LLM_GGUF_UINT32) {
    fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "general.alignment must be a UINT32, not value type %u", (guint) type);
    return NULL;
  }
  GByteArray *rec = g_byte_array_new ();
  put_str (rec, key, strlen (key));
  put_u32 (rec, type);
  return rec;
}

static gboolean
commit_kv (LlmGgufWriter *w, const char *key, GByteArray *rec)
{
  g_byte_array_append (w->kv, rec->data, rec->len);
  g_byte_array_unref (rec);
  g_hash_table_add (w->keys, g_strdup (key));
  w->n_kv++;
  return TRUE;
}

static gboolean
add_scalar (LlmGgufWriter *w, const char *key, LlmGgufValueType type,
    const void *v)
{
  GByteArray *rec = begin_kv (w, key, type);
  if (rec == NULL)
    return FALSE;
  put_elems (rec, v, 1, llm_gguf_value_type_size (type));
  return commit_kv (w, key, rec);
}

gboolean
llm_gguf_writer_add_uint8 (LlmGgufWriter *w, const char *key, guint8 v)
{
  return add_scalar (w, key, LLM_GGUF_UINT8, &v);
}

gboolean
llm_gguf_writer_add_int8 (LlmGgufWriter *w, const char *key, gint8 v)
{
  return add_scalar (w, key, LLM_GGUF_INT8, &v);
}

gboolean
llm_gguf_writer_add_uint16 (LlmGgufWriter *w, const char *key, guint16 v)
{
  return add_scalar (w, key, LLM_GGUF_UINT16, &v);
}

gboolean
llm_gguf_writer_add_int16 (LlmGgufWriter *w, const char *key, gint16 v)
{
  return add_scalar (w, key, LLM_GGUF_INT16, &v);
}

gboolean
llm_gguf_writer_add_uint32 (LlmGgufWriter *w, const char *key, guint32 v)
{
  gboolean alignment = is_alignment_key (key);
  if (alignment && (v == 0 || (v & (v - 1)) != 0))
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "general.alignment %u is not a power of two", v);
  if (!add_scalar (w, key, LLM_GGUF_UINT32, &v))
    return FALSE;
  if (alignment)
    w->alignment = v;
  return TRUE;
}

gboolean
llm_gguf_writer_add_int32 (LlmGgufWriter *w, const char *key, gint32 v)
{
  return add_scalar (w, key, LLM_GGUF_INT32, &v);
}

gboolean
llm_gguf_writer_add_float32 (LlmGgufWriter *w, const char *key, float v)
{
  return add_scalar (w, key, LLM_GGUF_FLOAT32, &v);
}

gboolean
llm_gguf_writer_add_bool (LlmGgufWriter *w, const char *key, gboolean v)
{
  guint8 b = v ? 1 : 0;
  return add_scalar (w, key, LLM_GGUF_BOOL, &b);
}

gboolean
llm_gguf_writer_add_uint64 (LlmGgufWriter *w, const char *key, guint64 v)
{
  return add_scalar (w, key, LLM_GGUF_UINT64, &v);
}

gboolean
llm_gguf_writer_add_int64 (LlmGgufWriter *w, const char *key, gint64 v)
{
  return add_scalar (w, key, LLM_GGUF_INT64, &v);
}

gboolean
llm_gguf_writer_add_float64 (LlmGgufWriter *w, const char *key, double v)
{
  return add_scalar (w, key, LLM_GGUF_FLOAT64, &v);
}

gboolean
llm_gguf_writer_add_string_len (LlmGgufWriter *w, const char *key,
    const char *v, gsize len)
{
  if (v == NULL && len > 0)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': string is NULL", key ? key : "(null)");
  if (len > MAX_VALUE_BYTES)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': string of %zu bytes is too long", key ? key : "(null)", len);
  GByteArray *rec = begin_kv (w, key, LLM_GGUF_STRING);
  if (rec == NULL)
    return FALSE;
  put_str (rec, v, len);
  return commit_kv (w, key, rec);
}

gboolean
llm_gguf_writer_add_string (LlmGgufWriter *w, const char *key, const char *v)
{
  if (v == NULL)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': string is NULL", key ? key : "(null)");
  return llm_gguf_writer_add_string_len (w, key, v, strlen (v));
}

/* Appends one array value (element type, count, elements) to @rec; FALSE
 * (with the writer's error set) for bad arguments. */
static gboolean
put_array (LlmGgufWriter *w, const char *key, GByteArray *rec,
    LlmGgufValueType elem_type, const void *data, guint64 n)
{
  if (elem_type == LLM_GGUF_STRING) {
    const char *const *strs = data;
    if (n > 0 && strs == NULL)
      return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
          "metadata key '%s': string array is NULL", key);
    for (guint64 i = 0; i < n; i++)
      if (strs[i] == NULL)
        return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
            "metadata key '%s': string %" G_GUINT64_FORMAT " is NULL", key, i);
    put_u32 (rec, LLM_GGUF_STRING);
    put_u64 (rec, n);
    for (guint64 i = 0; i < n; i++)
      put_str (rec, strs[i], strlen (strs[i]));
    return TRUE;
  }

  if (!is_scalar_type (elem_type))
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': arrays of value type %u are not supported here",
        key, (guint) elem_type);
  gsize elem_size = llm_gguf_value_type_size (elem_type);
  if (n > MAX_VALUE_BYTES / elem_size)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': %" G_GUINT64_FORMAT " elements are more than %u bytes",
        key, n, MAX_VALUE_BYTES);
  if (n > 0 && data == NULL)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': array data is NULL", key);
  put_u32 (rec, elem_type);
  put_u64 (rec, n);
  put_elems (rec, data, n, elem_size);
  return TRUE;
}

gboolean
llm_gguf_writer_add_array (LlmGgufWriter *w, const char *key,
    LlmGgufValueType elem_type, const void *data, guint64 n)
{
  if (elem_type == LLM_GGUF_STRING || elem_type == LLM_GGUF_ARRAY)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': use add_string_array or add_nested_array",
        key ? key : "(null)");
  GByteArray *rec = begin_kv (w, key, LLM_GGUF_ARRAY);
  if (rec == NULL)
    return FALSE;
  if (!put_array (w, key, rec, elem_type, data, n)) {
    g_byte_array_unref (rec);
    return FALSE;
  }
  return commit_kv (w, key, rec);
}

gboolean
llm_gguf_writer_add_string_array (LlmGgufWriter *w, const char *key,
    const char *const *strs, guint64 n)
{
  GByteArray *rec = begin_kv (w, key, LLM_GGUF_ARRAY);
  if (rec == NULL)
    return FALSE;
  if (!put_array (w, key, rec, LLM_GGUF_STRING, strs, n)) {
    g_byte_array_unref (rec);
    return FALSE;
  }
  return commit_kv (w, key, rec);
}

gboolean
llm_gguf_writer_add_nested_array (LlmGgufWriter *w, const char *key,
    LlmGgufValueType elem_type, const void *const *arrays, const guint64 *lens,
    guint64 n_arrays)
{
  if (n_arrays > 0 && (arrays == NULL || lens == NULL))
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s': nested array is NULL", key ? key : "(null)");
  GByteArray *rec = begin_kv (w, key, LLM_GGUF_ARRAY);
  if (rec == NULL)
    return FALSE;
  put_u32 (rec, LLM_GGUF_ARRAY);
  put_u64 (rec, n_arrays);
  for (guint64 i = 0; i < n_arrays; i++) {
    if (!put_array (w, key, rec, elem_type, arrays[i], lens[i])) {
      g_byte_array_unref (rec);
      return FALSE;
    }
  }
  return commit_kv (w, key, rec);
}

gboolean
llm_gguf_writer_copy_kv (LlmGgufWriter *w, const LlmGguf *src, const char *key)
{
  gint64 idx = key ? llm_gguf_find_key (src, key) : -1;
  if (idx < 0)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "cannot copy metadata key '%s': the source has no such key",
        key ? key : "(null)");
  LlmGgufValueType type = llm_gguf_kv_type (src, idx);
  guint64 u = 0;
  gint64 i = 0;
  double f = 0;
  gboolean b = FALSE;
  const char *str;
  gsize len;

  /* Each getter succeeds for the key's own type, so the results are not
   * checked again here. */
  switch (type) {
    case LLM_GGUF_UINT8:
      llm_gguf_get_uint (src, key, &u, NULL);
      return llm_gguf_writer_add_uint8 (w, key, (guint8) u);
    case LLM_GGUF_INT8:
      llm_gguf_get_int (src, key, &i, NULL);
      return llm_gguf_writer_add_int8 (w, key, (gint8) i);
    case LLM_GGUF_UINT16:
      llm_gguf_get_uint (src, key, &u, NULL);
      return llm_gguf_writer_add_uint16 (w, key, (guint16) u);
    case LLM_GGUF_INT16:
      llm_gguf_get_int (src, key, &i, NULL);
      return llm_gguf_writer_add_int16 (w, key, (gint16) i);
    case LLM_GGUF_UINT32:
      llm_gguf_get_uint (src, key, &u, NULL);
      return llm_gguf_writer_add_uint32 (w, key, (guint32) u);
    case LLM_GGUF_INT32:
      llm_gguf_get_int (src, key, &i, NULL);
      return llm_gguf_writer_add_int32 (w, key, (gint32) i);
    case LLM_GGUF_UINT64:
      llm_gguf_get_uint (src, key, &u, NULL);
      return llm_gguf_writer_add_uint64 (w, key, u);
    case LLM_GGUF_INT64:
      llm_gguf_get_int (src, key, &i, NULL);
      return llm_gguf_writer_add_int64 (w, key, i);
    case LLM_GGUF_FLOAT32:
      /* float -> double -> float is exact. */
      llm_gguf_get_float (src, key, &f, NULL);
      return llm_gguf_writer_add_float32 (w, key, (float) f);
    case LLM_GGUF_FLOAT64:
      llm_gguf_get_float (src, key, &f, NULL);
      return llm_gguf_writer_add_float64 (w, key, f);
    case LLM_GGUF_BOOL:
      llm_gguf_get_bool (src, key, &b, NULL);
      return llm_gguf_writer_add_bool (w, key, b);
    case LLM_GGUF_STRING:
      llm_gguf_get_string (src, key, &str, &len, NULL);
      return llm_gguf_writer_add_string_len (w, key, str, len);
    case LLM_GGUF_ARRAY:
      break;
    default:
      return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
          "cannot copy metadata key '%s' of value type %u", key, (guint) type);
  }

  LlmGgufValueType et;
  guint64 n;
  llm_gguf_get_array (src, key, &et, &n, NULL);
  if (et == LLM_GGUF_ARRAY)
    return fail (w, NULL, LLM_GGUF_WRITER_ERROR_INVALID,
        "cannot copy metadata key '%s': nested arrays are not exposed by the reader",
        key);
  GByteArray *rec = begin_kv (w, key, LLM_GGUF_ARRAY);
  if (rec == NULL)
    return FALSE;
  put_u32 (rec, et);
  put_u64 (rec, n);
  if (et == LLM_GGUF_STRING) {
    /* Element by element with lengths: tokens may hold NUL bytes. */
    for (guint64 k = 0; k < n; k++) {
      str = llm_gguf_array_string (src, key, k, &len);
      put_str (rec, str, len);
    }
  } else {
    /* Already little-endian in the source file: copy as is. */
    const void *data = llm_gguf_array_data (src, key);
    if (n > 0)
      g_byte_array_append (rec, data, n * llm_gguf_value_type_size (et));
  }
  return commit_kv (w, key, rec);
}

/* --- tensors --- */

/* Validates name, shape and type; returns the byte size @type and @ne
 * need in @size and the element count in @n_elems. */
static gboolean
check_tensor (LlmGgufWriter *w, const char *name, guint32 type, guint n_dims,
    const guint64 *ne, guint64 *n_elems, guint64 *size, GError **error)
{
  if (name == NULL || name[0] == '\0')
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID, "tensor name is %s",
        name ? "empty" : "NULL");
  if (strlen (name) >= MAX_TENSOR_NAME)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor name '%s' is %zu bytes; at most %d fit", name, strlen (name),
        MAX_TENSOR_NAME - 1);
  if (g_hash_table_contains (w->tensor_names, name))
    return fail (w, error, LLM_GGUF_WRITER_ERROR_DUPLICATE,
        "tensor '%s' added twice", name);
  guint32 block_elems;
  if (!llm_type_info (type, &block_elems, NULL))
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': unknown tensor type %u", name, type);
  if (n_dims < 1 || n_dims > LLM_GGUF_MAX_DIMS || ne == NULL)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': %u dimensions; give 1 to %d", name, n_dims,
        LLM_GGUF_MAX_DIMS);

  guint64 elems = 1;
  for (guint i = 0; i < n_dims; i++) {
    if (ne[i] == 0)
      return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
          "tensor '%s': dimension %u is 0", name, i);
    /* ggml counts elements in int64_t. */
    if (elems > (guint64) G_MAXINT64 / ne[i])
      return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
          "tensor '%s': element count overflows", name);
    elems *= ne[i];
  }
  guint64 row_bytes;
  if (!llm_type_row_bytes (type, ne[0], &row_bytes))
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': row of %" G_GUINT64_FORMAT " elements is not a whole "
        "number of %s blocks (%u elements each)", name, ne[0],
        llm_type_name (type), block_elems);
  guint64 bytes = row_bytes;
  for (guint i = 1; i < n_dims; i++) {
    if (bytes > G_MAXSIZE / ne[i])
      return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
          "tensor '%s': byte size overflows", name);
    bytes *= ne[i];
  }
  *n_elems = elems;
  *size = bytes;
  return TRUE;
}

static void
append_tensor (LlmGgufWriter *w, const char *name, guint32 type, guint n_dims,
    const guint64 *ne, GBytes *data)
{
  WriterTensor *t = g_new0 (WriterTensor, 1);
  t->name = g_strdup (name);
  t->type = type;
  t->n_dims = n_dims;
  for (guint i = 0; i < LLM_GGUF_MAX_DIMS; i++)
    t->ne[i] = i < n_dims ? ne[i] : 1;
  t->data = data;
  g_ptr_array_add (w->tensors, t);
  g_hash_table_add (w->tensor_names, t->name);
}

gboolean
llm_gguf_writer_add_tensor (LlmGgufWriter *w, const char *name, guint32 type,
    guint n_dims, const guint64 *ne, const void *data, gsize size,
    GError **error)
{
  guint64 n_elems, want;
  if (!check_tensor (w, name, type, n_dims, ne, &n_elems, &want, error))
    return FALSE;
  if (size != want)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': %zu bytes given, but %s of %" G_GUINT64_FORMAT
        " elements takes %" G_GUINT64_FORMAT, name, size,
        llm_type_name (type), n_elems, want);
  if (data == NULL)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': data is NULL", name);
  append_tensor (w, name, type, n_dims, ne, g_bytes_new (data, size));
  return TRUE;
}

gboolean
llm_gguf_writer_add_tensor_bytes (LlmGgufWriter *w, const char *name, guint32 type,
    guint n_dims, const guint64 *ne, GBytes *data, GError **error)
{
  guint64 n_elems = 0, want = 0;
  if (!check_tensor (w, name, type, n_dims, ne, &n_elems, &want, error))
    return FALSE;
  if (data == NULL)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': data is NULL", name);
  gsize size = g_bytes_get_size (data);
  if (size != want)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': %zu bytes given, but %s of %" G_GUINT64_FORMAT
        " elements takes %" G_GUINT64_FORMAT, name, size,
        llm_type_name (type), n_elems, want);
  append_tensor (w, name, type, n_dims, ne, g_bytes_ref (data));
  return TRUE;
}

gboolean
llm_gguf_writer_add_tensor_from_f32 (LlmGgufWriter *w, const char *name,
    guint32 type, guint n_dims, const guint64 *ne, const float *src,
    GError **error)
{
  guint64 n, size;
  if (!check_tensor (w, name, type, n_dims, ne, &n, &size, error))
    return FALSE;
  if (src == NULL)
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': data is NULL", name);
  if (n > G_MAXSIZE / sizeof (float))
    return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': too large for memory", name);

  /* ne[0] is a whole number of blocks (checked), so no block spans two
   * rows and the tensor can be converted as one flat row. */
  void *dst = g_malloc (size);
  switch (type) {
    case LLM_TYPE_F32:
      memcpy (dst, src, size);
      break;
    case LLM_TYPE_F16:
      llm_fp16_from_f32_row (src, dst, n);
      break;
    case LLM_TYPE_BF16:
      llm_bf16_from_f32_row (src, dst, n);
      break;
    case LLM_TYPE_Q8_0:
      llm_quantize_row_q8_0 (src, dst, n);
      break;
    case LLM_TYPE_Q4_0:
      llm_quantize_row_q4_0 (src, dst, n);
      break;
    case LLM_TYPE_Q4_1:
      llm_quantize_row_q4_1 (src, dst, n);
      break;
    case LLM_TYPE_Q5_0:
      llm_quantize_row_q5_0 (src, dst, n);
      break;
    case LLM_TYPE_Q5_1:
      llm_quantize_row_q5_1 (src, dst, n);
      break;
    case LLM_TYPE_Q4_K:
      llm_quantize_row_q4_K (src, dst, n);
      break;
    case LLM_TYPE_Q5_K:
      llm_quantize_row_q5_K (src, dst, n);
      break;
    case LLM_TYPE_Q6_K:
      llm_quantize_row_q6_K (src, dst, n);
      break;
    default:
      g_free (dst);
      return fail (w, error, LLM_GGUF_WRITER_ERROR_INVALID,
          "tensor '%s': cannot convert F32 to %s", name, llm_type_name (type));
  }
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
  /* The kernels produce host-order words; the file wants LE. */
  if (type == LLM_TYPE_F32 || type == LLM_TYPE_F16 || type == LLM_TYPE_BF16) {
    gsize word = type == LLM_TYPE_F32 ? 4 : 2;
    guint8 *p = dst;
    for (gsize i = 0; i < size; i += word)
      for (gsize j = 0; j < word / 2; j++) {
        guint8 tmp = p[i + j];
        p[i + j] = p[i + word - 1 - j];
        p[i + word - 1 - j] = tmp;
      }
  } else {
    /* The half-precision scales of each block: d first, then Q4_1/Q5_1's
     * m or Q4_K/Q5_K's dmin; Q6_K keeps d at its end. (Q5_0/Q5_1's qh is
     * written as little-endian bytes already.) */
    gsize block, halves[2] = { 0, 0 }, n_halves = 1;
    switch (type) {
      case LLM_TYPE_Q8_0: block = sizeof (LlmBlockQ8_0); break;
      case LLM_TYPE_Q4_0: block = sizeof (LlmBlockQ4_0); break;
      case LLM_TYPE_Q5_0: block = sizeof (LlmBlockQ5_0); break;
      case LLM_TYPE_Q4_1: block = sizeof (LlmBlockQ4_1); halves[1] = 2; n_halves = 2; break;
      case LLM_TYPE_Q5_1: block = sizeof (LlmBlockQ5_1); halves[1] = 2; n_halves = 2; break;
      case LLM_TYPE_Q4_K: block = sizeof (LlmBlockQ4_K); halves[1] = 2; n_halves = 2; break;
      case LLM_TYPE_Q5_K: block = sizeof (LlmBlockQ5_K); halves[1] = 2; n_halves = 2; break;
      default: block = sizeof (LlmBlockQ6_K); halves[0] = block - 2; break;
    }
    guint8 *p = dst;
    for (gsize i = 0; i < size; i += block)
      for (gsize h = 0; h < n_halves; h++) {
        guint8 tmp = p[i + halves[h]];
        p[i + halves[h]] = p[i + halves[h] + 1];
        p[i + halves[h] + 1] = tmp;
      }
  }
#endif
  append_tensor (w, name, type, n_dims, ne, g_bytes_new_take (dst, size));
  return TRUE;
}

/* --- layout --- */

static guint64
align_up (guint64 v, guint32 alignment)
{
  return (v + alignment - 1) / alignment * alignment;
}

/* Builds everything before the data section (padded to the alignment)
 * and assigns each tensor its offset; @data_size gets the padded size of
 * the data section. */
static GByteArray *
layout (LlmGgufWriter *w, guint64 *data_size)
{
  GByteArray *h = g_byte_array_sized_new (64 + w->kv->len + w->tensors->len * 96);
  g_byte_array_append (h, (const guint8 *) "GGUF", 4);
  put_u32 (h, 3);
  put_u64 (h, w->tensors->len);
  put_u64 (h, w->n_kv);
  g_byte_array_append (h, w->kv->data, w->kv->len);

  guint64 end = 0;
  for (guint i = 0; i < w->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (w->tensors, i);
    t->offset = align_up (end, w->alignment);
    end = t->offset + g_bytes_get_size (t->data);
    put_str (h, t->name, strlen (t->name));
    put_u32 (h, t->n_dims);
    for (guint d = 0; d < t->n_dims; d++)
      put_u64 (h, t->ne[d]);
    put_u32 (h, t->type);
    put_u64 (h, t->offset);
  }
  guint pad = align_up (h->len, w->alignment) - h->len;
  g_byte_array_set_size (h, h->len + pad);
  memset (h->data + h->len - pad, 0, pad);
  *data_size = align_up (end, w->alignment);
  return h;
}

static gboolean
check_no_error (LlmGgufWriter *w, GError **error)
{
  if (w->error == NULL)
    return TRUE;
  g_propagate_error (error, g_error_copy (w->error));
  return FALSE;
}

GBytes *
llm_gguf_writer_to_bytes (LlmGgufWriter *w, GError **error)
{
  if (!check_no_error (w, error))
    return NULL;
  guint64 data_size;
  GByteArray *h = layout (w, &data_size);
  gsize header = h->len;
  /* A GByteArray stops at 4 GiB; a whole model may not. */
  if (data_size > G_MAXSIZE - header) {
    g_byte_array_unref (h);
    g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_INVALID,
        "the file would be larger than memory can address; write it to a file");
    return NULL;
  }
  guint8 *buf = g_malloc0 (header + data_size);
  memcpy (buf, h->data, header);
  g_byte_array_unref (h);
  for (guint i = 0; i < w->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (w->tensors, i);
    gsize n;
    const void *p = g_bytes_get_data (t->data, &n);
    memcpy (buf + header + t->offset, p, n);
  }
  return g_bytes_new_take (buf, header + data_size);
}

static gboolean
write_all (int fd, const void *buf, gsize n, const char *path, GError **error)
{
  const guint8 *p = buf;
  while (n > 0) {
    gssize r = write (fd, p, MIN (n, (gsize) G_MAXSSIZE));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_IO,
          "cannot write %s: %s", path, g_strerror (e));
      return FALSE;
    }
    p += r;
    n -= r;
  }
  return TRUE;
}

static gboolean
write_zeros (int fd, guint64 n, const char *path, GError **error)
{
  static const guint8 zeros[4096];
  while (n > 0) {
    gsize chunk = MIN (n, sizeof zeros);
    if (!write_all (fd, zeros, chunk, path, error))
      return FALSE;
    n -= chunk;
  }
  return TRUE;
}

/* Streams the tensors rather than building the file in memory, so writing
 * a model does not need twice its size in RAM. */
static gboolean
write_fd (LlmGgufWriter *w, int fd, const char *path, GError **error)
{
  guint64 data_size;
  GByteArray *h = layout (w, &data_size);
  gboolean ok = write_all (fd, h->data, h->len, path, error);
  g_byte_array_unref (h);

  guint64 pos = 0;
  for (guint i = 0; ok && i < w->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (w->tensors, i);
    gsize n;
    const void *p = g_bytes_get_data (t->data, &n);
    ok = write_zeros (fd, t->offset - pos, path, error)
        && write_all (fd, p, n, path, error);
    pos = t->offset + n;
  }
  return ok && write_zeros (fd, data_size - pos, path, error);
}

gboolean
llm_gguf_writer_write_file (LlmGgufWriter *w, const char *path, GError **error)
{
  if (!check_no_error (w, error))
    return FALSE;
  g_return_val_if_fail (path != NULL, FALSE);

  char *tmp = g_strdup_printf ("%s.XXXXXX", path);
  /* 0666 so the umask decides, as for any file the user creates. */
  int fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_IO,
        "cannot create a temporary file beside %s: %s", path, g_strerror (e));
    g_free (tmp);
    return FALSE;
  }

  gboolean ok = write_fd (w, fd, path, error);
  if (ok && fsync (fd) != 0) {
    int e = errno;
    g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_IO,
        "cannot flush %s: %s", path, g_strerror (e));
    ok = FALSE;
  }
  if (close (fd) != 0 && ok) {
    int e = errno;
    g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_IO,
        "cannot close %s: %s", path, g_strerror (e));
    ok = FALSE;
  }
  if (ok && g_rename (tmp, path) != 0) {
    int e = errno;
    g_set_error (error, LLM_GGUF_WRITER_ERROR, LLM_GGUF_WRITER_ERROR_IO,
        "cannot rename %s to %s: %s", tmp, path, g_strerror (e));
    ok = FALSE;
  }
  if (!ok)
    g_unlink (tmp);
  g_free (tmp);
  return ok;
}
