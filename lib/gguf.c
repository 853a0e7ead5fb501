/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file is untrusted: every count, length and offset is checked against
 * what is left of the mapping before it is used, and every size computation
 * is checked for overflow. Nothing is read past the end, and nothing is
 * allocated in proportion to a count before the bytes for it are known to
 * exist. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

G_DEFINE_QUARK (llm-gguf-error-quark, llm_gguf_error)

#define GGUF_MAGIC "GGUF"
/* ggml's GGML_MAX_NAME: longer tensor names do not load in llama.cpp either. */
#define MAX_TENSOR_NAME 64
/* Nested arrays are legal; a hostile file must not recurse us off the stack. */
#define MAX_ARRAY_DEPTH 8

typedef struct {
  char *key;
  LlmGgufValueType type;
  guint64 value_offset;       /* scalar value, string length field, or first array element */
  LlmGgufValueType elem_type; /* arrays only */
  guint64 count;              /* arrays only */
  guint64 *str_offsets;       /* string arrays: offset of each element's length field */
} Kv;

struct _LlmGguf {
  GBytes *bytes;
  const guint8 *data;
  gsize size;
  char *path;

  guint32 version;
  guint32 alignment;
  guint64 data_offset;

  guint64 n_kv;
  Kv *kvs;
  GHashTable *key_index;      /* key -> idx + 1 */

  guint64 n_tensors;
  LlmGgufTensor *tensors;
  GHashTable *tensor_index;   /* name -> idx + 1 */
};

typedef struct {
  const guint8 *data;
  gsize size;
  gsize pos;
  const char *what_file;      /* for messages: path or "buffer" */
} Reader;

static const char *
value_type_name (guint32 t)
{
  static const char *names[] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
    "string", "array", "uint64", "int64", "float64",
  };
  return t < G_N_ELEMENTS (names) ? names[t] : "unknown";
}

gsize
llm_gguf_value_type_size (LlmGgufValueType type)
{
  switch (type) {
    case LLM_GGUF_UINT8: case LLM_GGUF_INT8: case LLM_GGUF_BOOL: return 1;
    case LLM_GGUF_UINT16: case LLM_GGUF_INT16: return 2;
    case LLM_GGUF_UINT32: case LLM_GGUF_INT32: case LLM_GGUF_FLOAT32: return 4;
    case LLM_GGUF_UINT64: case LLM_GGUF_INT64: case LLM_GGUF_FLOAT64: return 8;
    default: return 0;
  }
}

static gboolean
need (Reader *r, guint64 n, const char *what, GError **error)
{
  if (n > r->size - r->pos) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TRUNCATED,
        "%s: truncated at byte %" G_GSIZE_FORMAT ": %s needs %" G_GUINT64_FORMAT
        " bytes but only %" G_GSIZE_FORMAT " remain (file size %" G_GSIZE_FORMAT ")",
        r->what_file, r->pos, what, n, r->size - r->pos, r->size);
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_u32 (Reader *r, guint32 *v, const char *what, GError **error)
{
  if (!need (r, 4, what, error))
    return FALSE;
  memcpy (v, r->data + r->pos, 4);
  *v = GUINT32_FROM_LE (*v);
  r->pos += 4;
  return TRUE;
}

static gboolean
read_u64 (Reader *r, guint64 *v, const char *what, GError **error)
{
  if (!need (r, 8, what, error))
    return FALSE;
  memcpy (v, r->data + r->pos, 8);
  *v = GUINT64_FROM_LE (*v);
  r->pos += 8;
  return TRUE;
}

static guint64
peek_u64 (const guint8 *p)
{
  guint64 v;
  memcpy (&v, p, 8);
  return GUINT64_FROM_LE (v);
}

/* Skips a string; returns its start and length. */
static gboolean
read_string (Reader *r, const char **str, guint64 *len, const char *what, GError **error)
{
  gsize at = r->pos;
  if (!read_u64 (r, len, what, error))
    return FALSE;
  if (*len > r->size - r->pos) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TRUNCATED,
        "%s: %s at byte %" G_GSIZE_FORMAT " claims %" G_GUINT64_FORMAT
        " bytes but only %" G_GSIZE_FORMAT " remain",
        r->what_file, what, at, *len, r->size - r->pos);
    return FALSE;
  }
  *str = (const char *) r->data + r->pos;
  r->pos += *len;
  return TRUE;
}

static gboolean
format_error (GError **error, Reader *r, gsize at, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static gboolean
format_error (GError **error, Reader *r, gsize at, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_FORMAT,
      "%s: %s (at byte %" G_GSIZE_FORMAT ")", r->what_file, msg, at);
  g_free (msg);
  return FALSE;
}

/* Longest part of a file-provided string an error message shows. */
#define MAX_SHOWN 128

char *
llm_gguf_escape (const char *s, gssize len)
{
  gsize n = len < 0 ? strlen (s) : (gsize) len;
  const char *p = s, *end = s + MIN (n, MAX_SHOWN);
  GString *out = g_string_sized_new (end - p + 4);

  while (p < end) {
    guchar c = *p;
    /* (gunichar) -1 and -2 say invalid or cut short */
    gunichar u = c < 0x80 ? c : g_utf8_get_char_validated (p, end - p);
    if (c == '\\') {
      g_string_append (out, "\\\\");
      p++;
    } else if (u < 0x20 || u == 0x7f || u > 0x10ffff) {
      g_string_append_printf (out, "\\x%02x", c);
      p++;
    } else {
      const char *next = g_utf8_next_char (p);
      g_string_append_len (out, p, next - p);
      p = next;
    }
  }
  if (n > MAX_SHOWN)
    g_string_append (out, "...");
  return g_string_free (out, FALSE);
}

/* Skips one array body (element type and count already read); validates
 * nested arrays and string lengths. When @str_offsets is non-NULL the
 * position of each string is recorded there. @key is for messages,
 * escaped. */
static gboolean
skip_array (Reader *r, guint32 elem_type, guint64 count, guint depth,
    guint64 *str_offsets, const char *key, GError **error)
{
  gsize at = r->pos;
  if (elem_type == LLM_GGUF_STRING) {
    /* Each string has at least its 8-byte length. */
    if (count > (r->size - r->pos) / 8)
      return format_error (error, r, at, "array '%s' claims %" G_GUINT64_FORMAT
          " strings, more than the file can hold", key, count);
    for (guint64 i = 0; i < count; i++) {
      const char *s;
      guint64 len;
      if (str_offsets)
        str_offsets[i] = r->pos;
      if (!read_string (r, &s, &len, "array string", error)) {
        g_prefix_error (error, "key '%s' element %" G_GUINT64_FORMAT ": ", key, i);
        return FALSE;
      }
    }
    return TRUE;
  }
  if (elem_type == LLM_GGUF_ARRAY) {
    if (depth >= MAX_ARRAY_DEPTH)
      return format_error (error, r, at, "array '%s' nests deeper than %d levels", key,
          MAX_ARRAY_DEPTH);
    /* Each nested array has at least its type and count. */
    if (count > (r->size - r->pos) / 12)
      return format_error (error, r, at, "array '%s' claims %" G_GUINT64_FORMAT
          " nested arrays, more than the file can hold", key, count);
    for (guint64 i = 0; i < count; i++) {
      guint32 t;
      guint64 n;
      gsize tat = r->pos;
      if (!read_u32 (r, &t, "nested array type", error) ||
          !read_u64 (r, &n, "nested array count", error))
        return FALSE;
      if (t > LLM_GGUF_FLOAT64)
        return format_error (error, r, tat, "array '%s' has a nested array of unknown type %u",
            key, t);
      if (!skip_array (r, t, n, depth + 1, NULL, key, error))
        return FALSE;
    }
    return TRUE;
  }
  gsize esize = llm_gguf_value_type_size (elem_type);
  if (esize == 0)
    return format_error (error, r, at, "array '%s' has unknown element type %u", key, elem_type);
  if (count > (r->size - r->pos) / esize) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TRUNCATED,
        "%s: array '%s' at byte %" G_GSIZE_FORMAT " claims %" G_GUINT64_FORMAT
        " elements of %s (%" G_GUINT64_FORMAT " bytes too many for the file)",
        r->what_file, key, at, count, value_type_name (elem_type),
        count > G_MAXUINT64 / esize ? G_MAXUINT64 : count * esize - (r->size - r->pos));
    return FALSE;
  }
  r->pos += count * esize;
  return TRUE;
}

static gboolean
read_kv (LlmGguf *g, Reader *r, Kv *kv, GError **error)
{
  gsize at = r->pos;
  const char *key;
  guint64 key_len;
  guint32 type;

  if (!read_string (r, &key, &key_len, "metadata key", error))
    return FALSE;
  if (key_len == 0)
    return format_error (error, r, at, "empty metadata key");
  if (memchr (key, 0, key_len) != NULL)
    return format_error (error, r, at, "metadata key contains a NUL byte");
  kv->key = g_strndup (key, key_len);
  g_autofree char *shown = llm_gguf_escape (kv->key, -1);

  if (g_hash_table_contains (g->key_index, kv->key))
    return format_error (error, r, at, "duplicate metadata key '%s'", shown);

  gsize tat = r->pos;
  if (!read_u32 (r, &type, "metadata value type", error))
    return FALSE;
  if (type > LLM_GGUF_FLOAT64)
    return format_error (error, r, tat, "key '%s' has unknown value type %u", shown, type);
  kv->type = type;
  kv->value_offset = r->pos;

  if (type == LLM_GGUF_STRING) {
    const char *s;
    guint64 len;
    if (!read_string (r, &s, &len, "string value", error)) {
      g_prefix_error (error, "key '%s': ", shown);
      return FALSE;
    }
    return TRUE;
  }
  if (type == LLM_GGUF_ARRAY) {
    guint32 elem;
    gsize eat = r->pos;
    if (!read_u32 (r, &elem, "array element type", error) ||
        !read_u64 (r, &kv->count, "array count", error))
      return FALSE;
    if (elem > LLM_GGUF_FLOAT64)
      return format_error (error, r, eat, "array '%s' has unknown element type %u", shown, elem);
    kv->elem_type = elem;
    kv->value_offset = r->pos;
    if (elem == LLM_GGUF_STRING && kv->count <= (r->size - r->pos) / 8)
      kv->str_offsets = g_new (guint64, kv->count ? kv->count : 1);
    return skip_array (r, elem, kv->count, 1, kv->str_offsets, shown, error);
  }
  if (!need (r, llm_gguf_value_type_size (type), shown, error))
    return FALSE;
  r->pos += llm_gguf_value_type_size (type);
  return TRUE;
}

static gboolean
read_tensor_info (LlmGguf *g, Reader *r, guint64 idx, LlmGgufTensor *t, GError **error)
{
  gsize at = r->pos;
  const char *name;
  guint64 name_len;

  if (!read_string (r, &name, &name_len, "tensor name", error))
    return FALSE;
  if (name_len == 0)
    return format_error (error, r, at, "tensor %" G_GUINT64_FORMAT " has an empty name", idx);
  if (name_len >= MAX_TENSOR_NAME)
    return format_error (error, r, at, "tensor %" G_GUINT64_FORMAT " name is %" G_GUINT64_FORMAT
        " bytes; the limit is %d", idx, name_len, MAX_TENSOR_NAME - 1);
  if (memchr (name, 0, name_len) != NULL)
    return format_error (error, r, at, "tensor %" G_GUINT64_FORMAT " name contains a NUL byte", idx);
  t->name = g_strndup (name, name_len);
  g_autofree char *shown = llm_gguf_escape (t->name, -1);
  if (g_hash_table_contains (g->tensor_index, t->name))
    return format_error (error, r, at, "duplicate tensor name '%s'", shown);

  gsize dat = r->pos;
  if (!read_u32 (r, &t->n_dims, "tensor dimension count", error))
    return FALSE;
  if (t->n_dims < 1 || t->n_dims > LLM_GGUF_MAX_DIMS)
    return format_error (error, r, dat, "tensor '%s' has %u dimensions; 1 to %d are allowed",
        shown, t->n_dims, LLM_GGUF_MAX_DIMS);
  t->n_elems = 1;
  for (guint d = 0; d < LLM_GGUF_MAX_DIMS; d++) {
    t->ne[d] = 1;
    if (d >= t->n_dims)
      continue;
    gsize nat = r->pos;
    if (!read_u64 (r, &t->ne[d], "tensor dimension", error))
      return FALSE;
    /* ggml stores dimensions as int64. */
    if (t->ne[d] > (guint64) G_MAXINT64)
      return format_error (error, r, nat, "tensor '%s' dimension %u is negative", shown, d);
    if (t->ne[d] != 0 && t->n_elems > (guint64) G_MAXINT64 / t->ne[d])
      return format_error (error, r, nat, "tensor '%s' element count overflows", shown);
    t->n_elems *= t->ne[d];
  }

  gsize tat = r->pos;
  if (!read_u32 (r, &t->type, "tensor type", error))
    return FALSE;
  guint32 block_elems;
  if (!llm_type_info (t->type, &block_elems, NULL))
    return format_error (error, r, tat, "tensor '%s' has unknown type id %u", shown, t->type);
  if (t->ne[0] % block_elems != 0)
    return format_error (error, r, tat, "tensor '%s' row of %" G_GUINT64_FORMAT
        " elements is not a multiple of the %s block size %u", shown, t->ne[0],
        llm_type_name (t->type), block_elems);
  guint64 row_bytes;
  if (!llm_type_row_bytes (t->type, t->ne[0], &row_bytes))
    return format_error (error, r, tat, "tensor '%s' row size overflows", shown);
  guint64 rows = t->ne[0] ? t->n_elems / t->ne[0] : 0;
  if (rows != 0 && row_bytes > G_MAXUINT64 / rows)
    return format_error (error, r, tat, "tensor '%s' byte size overflows", shown);
  t->size = row_bytes * rows;

  if (!read_u64 (r, &t->offset, "tensor data offset", error))
    return FALSE;
  return TRUE;
}

static int
compare_by_offset (gconstpointer a, gconstpointer b)
{
  const LlmGgufTensor *ta = *(const LlmGgufTensor * const *) a;
  const LlmGgufTensor *tb = *(const LlmGgufTensor * const *) b;
  return ta->offset < tb->offset ? -1 : ta->offset > tb->offset;
}

static gboolean
parse (LlmGguf *g, GError **error)
{
  Reader r = { g->data, g->size, 0, g->path ? g->path : "GGUF buffer" };
  guint32 version;

  if (!need (&r, 4, "magic", error))
    return FALSE;
  if (memcmp (g->data, GGUF_MAGIC, 4) != 0)
    return format_error (error, &r, 0, "not a GGUF file (magic is not \"GGUF\")");
  r.pos = 4;
  if (!read_u32 (&r, &version, "version", error))
    return FALSE;
  if (version == 1)
    return format_error (error, &r, 4, "GGUF version 1 is not supported; "
        "convert the file with a current llama.cpp");
  if (version != 2 && version != 3) {
    if (GUINT32_SWAP_LE_BE (version) == 2 || GUINT32_SWAP_LE_BE (version) == 3)
      return format_error (error, &r, 4, "big-endian GGUF files are not supported");
    return format_error (error, &r, 4, "unsupported GGUF version %u (2 and 3 are known)", version);
  }
  g->version = version;

  gsize cat = r.pos;
  if (!read_u64 (&r, &g->n_tensors, "tensor count", error) ||
      !read_u64 (&r, &g->n_kv, "metadata count", error))
    return FALSE;
  /* A key-value pair takes at least 8 (key length) + 1 + 4 + 1 bytes and a
   * tensor info at least 8 + 1 + 4 + 8 + 4 + 8: bound the counts by the file
   * before allocating anything for them. */
  if (g->n_kv > (r.size - r.pos) / 14)
    return format_error (error, &r, cat + 8, "metadata count %" G_GUINT64_FORMAT
        " is larger than the file can hold", g->n_kv);
  if (g->n_tensors > (r.size - r.pos) / 33)
    return format_error (error, &r, cat, "tensor count %" G_GUINT64_FORMAT
        " is larger than the file can hold", g->n_tensors);

  g->kvs = g_new0 (Kv, g->n_kv ? g->n_kv : 1);
  for (guint64 i = 0; i < g->n_kv; i++) {
    if (!read_kv (g, &r, &g->kvs[i], error))
      return FALSE;
    g_hash_table_insert (g->key_index, g->kvs[i].key, GSIZE_TO_POINTER (i + 1));
  }

  g->alignment = LLM_GGUF_DEFAULT_ALIGNMENT;
  gint64 ai = llm_gguf_find_key (g, "general.alignment");
  if (ai >= 0) {
    const Kv *kv = &g->kvs[ai];
    if (kv->type != LLM_GGUF_UINT32)
      return format_error (error, &r, kv->value_offset,
          "general.alignment has type %s; it must be uint32", value_type_name (kv->type));
    guint32 a;
    memcpy (&a, g->data + kv->value_offset, 4);
    a = GUINT32_FROM_LE (a);
    if (a == 0 || (a & (a - 1)) != 0)
      return format_error (error, &r, kv->value_offset,
          "general.alignment is %u; it must be a power of two", a);
    g->alignment = a;
  }

  g->tensors = g_new0 (LlmGgufTensor, g->n_tensors ? g->n_tensors : 1);
  for (guint64 i = 0; i < g->n_tensors; i++) {
    if (!read_tensor_info (g, &r, i, &g->tensors[i], error))
      return FALSE;
    g_hash_table_insert (g->tensor_index, (char *) g->tensors[i].name, GSIZE_TO_POINTER (i + 1));
  }

  guint64 pad = (g->alignment - r.pos % g->alignment) % g->alignment;
  g->data_offset = r.pos + pad;
  if (g->n_tensors == 0)
    return TRUE;
  if (g->data_offset > g->size)
    return format_error (error, &r, r.pos, "the tensor data section would start at byte %"
        G_GUINT64_FORMAT ", past the end of the file", g->data_offset);

  guint64 data_size = g->size - g->data_offset;
  for (guint64 i = 0; i < g->n_tensors; i++) {
    LlmGgufTensor *t = &g->tensors[i];
    if (t->offset % g->alignment != 0) {
      g_autofree char *shown = llm_gguf_escape (t->name, -1);
      return format_error (error, &r, g->data_offset, "tensor '%s' data offset %"
          G_GUINT64_FORMAT " is not a multiple of the alignment %u", shown, t->offset,
          g->alignment);
    }
    if (t->offset > data_size || t->size > data_size - t->offset) {
      g_autofree char *shown = llm_gguf_escape (t->name, -1);
      g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TRUNCATED,
          "%s: tensor '%s' (%s, %" G_GUINT64_FORMAT " bytes at data offset %" G_GUINT64_FORMAT
          ") ends past the end of the file (%" G_GUINT64_FORMAT " bytes of tensor data)",
          r.what_file, shown, llm_type_name (t->type), t->size, t->offset, data_size);
      return FALSE;
    }
    t->offset += g->data_offset;
    t->data = g->data + t->offset;
  }

  /* Overlapping tensors mean a corrupt index, even when each is in bounds. */
  g_autoptr (GPtrArray) order = g_ptr_array_sized_new (g->n_tensors);
  for (guint64 i = 0; i < g->n_tensors; i++)
    g_ptr_array_add (order, &g->tensors[i]);
  g_ptr_array_sort (order, compare_by_offset);
  /* Compare each tensor with the furthest-reaching one before it, so an
   * empty tensor in between cannot hide an overlap. */
  const LlmGgufTensor *reach = NULL;
  for (guint i = 0; i < order->len; i++) {
    const LlmGgufTensor *b = order->pdata[i];
    if (b->size == 0)
      continue;
    if (reach != NULL && reach->offset + reach->size > b->offset) {
      g_autofree char *shown_a = llm_gguf_escape (reach->name, -1);
      g_autofree char *shown_b = llm_gguf_escape (b->name, -1);
      return format_error (error, &r, b->offset, "tensors '%s' and '%s' overlap", shown_a,
          shown_b);
    }
    if (reach == NULL || b->offset + b->size > reach->offset + reach->size)
      reach = b;
  }
  return TRUE;
}

static LlmGguf *
open_bytes (GBytes *bytes, const char *path, GError **error)
{
  LlmGguf *g = g_new0 (LlmGguf, 1);
  g->bytes = bytes;
  g->data = g_bytes_get_data (bytes, &g->size);
  if (g->data == NULL)
    g->data = (const guint8 *) "";
  g->path = g_strdup (path);
  g->key_index = g_hash_table_new (g_str_hash, g_str_equal);
  g->tensor_index = g_hash_table_new (g_str_hash, g_str_equal);
  if (!parse (g, error)) {
    llm_gguf_free (g);
    return NULL;
  }
  return g;
}

/* Returns -1. */
static int
io_error (GError **error, const char *path, int errsv)
{
  g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO, "%s: cannot open: %s", path,
      g_strerror (errsv));
  return -1;
}

/* Only a regular file is a model. Another kind is refused by name, as
 * mapping it fails in words about mmap and opening a FIFO blocks until a
 * writer comes. */
static gboolean
check_regular (const char *path, const struct stat *st, GError **error)
{
  const char *kind;

  if (S_ISREG (st->st_mode))
    return TRUE;
  if (S_ISDIR (st->st_mode)) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO, "%s: is a directory, not a model file",
        path);
    return FALSE;
  }
  if (S_ISFIFO (st->st_mode))
    kind = "a named pipe (FIFO)";
  else if (S_ISSOCK (st->st_mode))
    kind = "a socket";
  else if (S_ISCHR (st->st_mode) || S_ISBLK (st->st_mode))
    kind = "a device";
  else
    kind = "a special file";
  g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO,
      "%s: is not a regular file but %s; a model must be a file that can be mapped", path, kind);
  return FALSE;
}

/* The type is checked before the open, so that a FIFO is never opened,
 * and again on the open file, which the path may no longer name
 * (O_NONBLOCK keeps a FIFO put there in between from blocking). Returns
 * the descriptor, or -1 with @error set. */
static int
open_regular (const char *path, GError **error)
{
  struct stat st;

  if (stat (path, &st) != 0)
    return io_error (error, path, errno);
  if (!check_regular (path, &st, error))
    return -1;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return io_error (error, path, errno);
  if (fstat (fd, &st) != 0) {
    int errsv = errno;
    close (fd);
    return io_error (error, path, errsv);
  }
  if (!check_regular (path, &st, error)) {
    close (fd);
    return -1;
  }
  return fd;
}

LlmGguf *
llm_gguf_open (const char *path, GError **error)
{
  int fd = open_regular (path, error);
  if (fd < 0)
    return NULL;

  GError *err = NULL;
  GMappedFile *mf = g_mapped_file_new_from_fd (fd, FALSE, &err);
  close (fd);
  if (mf == NULL) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_IO, "%s: cannot map: %s", path,
        err->message);
    g_error_free (err);
    return NULL;
  }
  GBytes *bytes = g_mapped_file_get_bytes (mf);
  g_mapped_file_unref (mf);
  return open_bytes (bytes, path, error);
}

LlmGguf *
llm_gguf_new_from_bytes (GBytes *bytes, GError **error)
{
  g_return_val_if_fail (bytes != NULL, NULL);
  return open_bytes (g_bytes_ref (bytes), NULL, error);
}

void
llm_gguf_free (LlmGguf *g)
{
  if (g == NULL)
    return;
  if (g->kvs)
    for (guint64 i = 0; i < g->n_kv; i++) {
      g_free (g->kvs[i].key);
      g_free (g->kvs[i].str_offsets);
    }
  g_free (g->kvs);
  if (g->tensors)
    for (guint64 i = 0; i < g->n_tensors; i++)
      g_free ((char *) g->tensors[i].name);
  g_free (g->tensors);
  g_hash_table_unref (g->key_index);
  g_hash_table_unref (g->tensor_index);
  g_bytes_unref (g->bytes);
  g_free (g->path);
  g_free (g);
}

guint32 llm_gguf_version (const LlmGguf *g) { return g->version; }
guint32 llm_gguf_alignment (const LlmGguf *g) { return g->alignment; }
guint64 llm_gguf_data_offset (const LlmGguf *g) { return g->data_offset; }
const char *llm_gguf_path (const LlmGguf *g) { return g->path; }
guint64 llm_gguf_n_kv (const LlmGguf *g) { return g->n_kv; }
guint64 llm_gguf_n_tensors (const LlmGguf *g) { return g->n_tensors; }

const guint8 *
llm_gguf_bytes (const LlmGguf *g, gsize *size)
{
  if (size)
    *size = g->size;
  return g->data;
}

gint64
llm_gguf_find_key (const LlmGguf *g, const char *key)
{
  gpointer v = g_hash_table_lookup (g->key_index, key);
  return v ? (gint64) GPOINTER_TO_SIZE (v) - 1 : -1;
}

const char *
llm_gguf_key (const LlmGguf *g, guint64 idx)
{
  return idx < g->n_kv ? g->kvs[idx].key : NULL;
}

LlmGgufValueType
llm_gguf_kv_type (const LlmGguf *g, guint64 idx)
{
  g_return_val_if_fail (idx < g->n_kv, LLM_GGUF_UINT8);
  return g->kvs[idx].type;
}

static const Kv *
get_kv (const LlmGguf *g, const char *key, GError **error)
{
  gint64 i = llm_gguf_find_key (g, key);
  if (i < 0) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_NOT_FOUND,
        "%s: metadata key '%s' is missing", g->path ? g->path : "GGUF", key);
    return NULL;
  }
  return &g->kvs[i];
}

static gboolean
type_error (const LlmGguf *g, const Kv *kv, const char *expected, GError **error)
{
  g_autofree char *shown = llm_gguf_escape (kv->key, -1);
  g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE,
      "%s: metadata key '%s' has type %s, expected %s", g->path ? g->path : "GGUF",
      shown, value_type_name (kv->type), expected);
  return FALSE;
}

/* Reads an integer scalar as signed 128-bit-ish pair: magnitude and sign. */
static gboolean
read_integer (const LlmGguf *g, const Kv *kv, gboolean *negative, guint64 *mag)
{
  const guint8 *p = g->data + kv->value_offset;
  gint64 s = 0;
  guint64 u = 0;
  gboolean is_signed = TRUE;
  switch (kv->type) {
    case LLM_GGUF_UINT8: u = p[0]; is_signed = FALSE; break;
    case LLM_GGUF_INT8: s = (gint8) p[0]; break;
    case LLM_GGUF_UINT16: { guint16 v; memcpy (&v, p, 2); u = GUINT16_FROM_LE (v); is_signed = FALSE; break; }
    case LLM_GGUF_INT16: { guint16 v; memcpy (&v, p, 2); s = (gint16) GUINT16_FROM_LE (v); break; }
    case LLM_GGUF_UINT32: { guint32 v; memcpy (&v, p, 4); u = GUINT32_FROM_LE (v); is_signed = FALSE; break; }
    case LLM_GGUF_INT32: { guint32 v; memcpy (&v, p, 4); s = (gint32) GUINT32_FROM_LE (v); break; }
    case LLM_GGUF_UINT64: { u = peek_u64 (p); is_signed = FALSE; break; }
    case LLM_GGUF_INT64: { s = (gint64) peek_u64 (p); break; }
    default: return FALSE;
  }
  if (is_signed) {
    *negative = s < 0;
    *mag = s < 0 ? (guint64) (-(s + 1)) + 1 : (guint64) s;
  } else {
    *negative = FALSE;
    *mag = u;
  }
  return TRUE;
}

gboolean
llm_gguf_get_uint (const LlmGguf *g, const char *key, guint64 *out, GError **error)
{
  const Kv *kv = get_kv (g, key, error);
  gboolean neg;
  guint64 mag;
  if (kv == NULL)
    return FALSE;
  if (!read_integer (g, kv, &neg, &mag))
    return type_error (g, kv, "an integer", error);
  if (neg) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE,
        "%s: metadata key '%s' is negative; a non-negative value is needed",
        g->path ? g->path : "GGUF", key);
    return FALSE;
  }
  *out = mag;
  return TRUE;
}

gboolean
llm_gguf_get_int (const LlmGguf *g, const char *key, gint64 *out, GError **error)
{
  const Kv *kv = get_kv (g, key, error);
  gboolean neg;
  guint64 mag;
  if (kv == NULL)
    return FALSE;
  if (!read_integer (g, kv, &neg, &mag))
    return type_error (g, kv, "an integer", error);
  if ((!neg && mag > (guint64) G_MAXINT64) || (neg && mag > (guint64) G_MAXINT64 + 1)) {
    g_set_error (error, LLM_GGUF_ERROR, LLM_GGUF_ERROR_TYPE,
        "%s: metadata key '%s' does not fit a signed 64-bit integer",
        g->path ? g->path : "GGUF", key);
    return FALSE;
  }
  *out = neg ? (gint64) (0 - mag) : (gint64) mag;
  return TRUE;
}

gboolean
llm_gguf_get_float (const LlmGguf *g, const char *key, double *out, GError **error)
{
  const Kv *kv = get_kv (g, key, error);
  if (kv == NULL)
    return FALSE;
  const guint8 *p = g->data + kv->value_offset;
  if (kv->type == LLM_GGUF_FLOAT32) {
    guint32 v;
    float f;
    memcpy (&v, p, 4);
    v = GUINT32_FROM_LE (v);
    memcpy (&f, &v, 4);
    *out = f;
    return TRUE;
  }
  if (kv->type == LLM_GGUF_FLOAT64) {
    guint64 v = peek_u64 (p);
    memcpy (out, &v, 8);
    return TRUE;
  }
  return type_error (g, kv, "a float", error);
}

gboolean
llm_gguf_get_bool (const LlmGguf *g, const char *key, gboolean *out, GError **error)
{
  const Kv *kv = get_kv (g, key, error);
  if (kv == NULL)
    return FALSE;
  if (kv->type != LLM_GGUF_BOOL)
    return type_error (g, kv, "bool", error);
  *out = g->data[kv->value_offset] != 0;
  return TRUE;
}

gboolean
llm_gguf_get_string (const LlmGguf *g, const char *key, const char **str, gsize *len,
    GError **error)
{
  const Kv *kv = get_kv (g, key, error);
  if (kv == NULL)
    return FALSE;
  if (kv->type != LLM_GGUF_STRING)
    return type_error (g, kv, "string", error);
  *len = peek_u64 (g->data + kv->value_offset);
  *str = (const char *) g->data + kv->value_offset + 8;
  return TRUE;
}

char *
llm_gguf_dup_string (const LlmGguf *g, const char *key, GError **error)
{
  const char *s;
  gsize len;
  if (!llm_gguf_get_string (g, key, &s, &len, error))
    return NULL;
  return g_strndup (s, len);
}

gboolean
llm_gguf_get_array (const LlmGguf *g, const char *key, LlmGgufValueType *elem_type,
    guint64 *n, GError **error)
{
  const Kv *kv = get_kv (g, key, error);
  if (kv == NULL)
    return FALSE;
  if (kv->type != LLM_GGUF_ARRAY)
    return type_error (g, kv, "array", error);
  if (elem_type)
    *elem_type = kv->elem_type;
  if (n)
    *n = kv->count;
  return TRUE;
}

const void *
llm_gguf_array_data (const LlmGguf *g, const char *key)
{
  gint64 i = llm_gguf_find_key (g, key);
  if (i < 0 || g->kvs[i].type != LLM_GGUF_ARRAY ||
      llm_gguf_value_type_size (g->kvs[i].elem_type) == 0)
    return NULL;
  return g->data + g->kvs[i].value_offset;
}

const char *
llm_gguf_array_string (const LlmGguf *g, const char *key, guint64 idx, gsize *len)
{
  gint64 i = llm_gguf_find_key (g, key);
  if (i < 0 || g->kvs[i].type != LLM_GGUF_ARRAY || g->kvs[i].elem_type != LLM_GGUF_STRING ||
      idx >= g->kvs[i].count)
    return NULL;
  guint64 at = g->kvs[i].str_offsets[idx];
  *len = peek_u64 (g->data + at);
  return (const char *) g->data + at + 8;
}

const LlmGgufTensor *
llm_gguf_tensor (const LlmGguf *g, guint64 idx)
{
  return idx < g->n_tensors ? &g->tensors[idx] : NULL;
}

const LlmGgufTensor *
llm_gguf_find_tensor (const LlmGguf *g, const char *name)
{
  gpointer v = g_hash_table_lookup (g->tensor_index, name);
  return v ? &g->tensors[GPOINTER_TO_SIZE (v) - 1] : NULL;
}
