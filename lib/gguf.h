/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GGUF (v2, v3) reader: validates the whole header on open, then serves
 * metadata and tensors straight from the mapping. */
#pragma once

#include <glib.h>
#include "ggml-type.h"

G_BEGIN_DECLS

#define LLM_GGUF_ERROR (llm_gguf_error_quark ())
GQuark llm_gguf_error_quark (void);

typedef enum {
  LLM_GGUF_ERROR_IO,          /* cannot open, stat or map the file */
  LLM_GGUF_ERROR_FORMAT,      /* bad magic, version, count, length, offset */
  LLM_GGUF_ERROR_TRUNCATED,   /* the file ends before a structure does */
  LLM_GGUF_ERROR_NOT_FOUND,   /* no such key or tensor */
  LLM_GGUF_ERROR_TYPE,        /* key or tensor has another type than asked */
} LlmGgufError;

/* Metadata value types, numbered as on disk. */
typedef enum {
  LLM_GGUF_UINT8 = 0,
  LLM_GGUF_INT8 = 1,
  LLM_GGUF_UINT16 = 2,
  LLM_GGUF_INT16 = 3,
  LLM_GGUF_UINT32 = 4,
  LLM_GGUF_INT32 = 5,
  LLM_GGUF_FLOAT32 = 6,
  LLM_GGUF_BOOL = 7,
  LLM_GGUF_STRING = 8,
  LLM_GGUF_ARRAY = 9,
  LLM_GGUF_UINT64 = 10,
  LLM_GGUF_INT64 = 11,
  LLM_GGUF_FLOAT64 = 12,
} LlmGgufValueType;

#define LLM_GGUF_MAX_DIMS 4
#define LLM_GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
  const char *name;           /* NUL-terminated, owned by the LlmGguf */
  guint32 type;               /* LlmType id */
  guint32 n_dims;
  guint64 ne[LLM_GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
  guint64 n_elems;
  guint64 offset;             /* from the start of the file */
  guint64 size;               /* bytes */
  const guint8 *data;         /* inside the mapping, @size bytes valid */
} LlmGgufTensor;

typedef struct _LlmGguf LlmGguf;

/* Maps @path read-only and validates it. Returns NULL and sets @error on any
 * problem; the message names the problem and its byte offset. A path that
 * is not a regular file (a directory, a FIFO) is LLM_GGUF_ERROR_IO saying
 * so, and a FIFO is not opened (which would block). */
LlmGguf *llm_gguf_open (const char *path, GError **error);

/* Same over bytes in memory (takes a reference on @bytes). */
LlmGguf *llm_gguf_new_from_bytes (GBytes *bytes, GError **error);

void llm_gguf_free (LlmGguf *gguf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmGguf, llm_gguf_free)

/* @s (@len bytes, or up to its NUL when @len is -1), a string read from a
 * file, as text an error message can carry: valid UTF-8 stays as it is,
 * every other byte and every control character becomes \xNN and a
 * backslash \\; past 128 bytes it is cut and ends in "...". GStreamer
 * refuses messages that are not UTF-8. Caller frees. */
char *llm_gguf_escape (const char *s, gssize len);

guint32 llm_gguf_version (const LlmGguf *gguf);
guint32 llm_gguf_alignment (const LlmGguf *gguf);
guint64 llm_gguf_data_offset (const LlmGguf *gguf);
/* The whole file as mapped. */
const guint8 *llm_gguf_bytes (const LlmGguf *gguf, gsize *size);
/* The path given to llm_gguf_open(), or NULL. */
const char *llm_gguf_path (const LlmGguf *gguf);

/* --- metadata --- */
guint64 llm_gguf_n_kv (const LlmGguf *gguf);
/* Index of @key, or -1. */
gint64 llm_gguf_find_key (const LlmGguf *gguf, const char *key);
const char *llm_gguf_key (const LlmGguf *gguf, guint64 idx);
LlmGgufValueType llm_gguf_kv_type (const LlmGguf *gguf, guint64 idx);

/* Typed getters. Integers accept any integer type whose value fits; floats
 * accept FLOAT32 and FLOAT64. A missing key is LLM_GGUF_ERROR_NOT_FOUND. */
gboolean llm_gguf_get_uint (const LlmGguf *gguf, const char *key, guint64 *out, GError **error);
gboolean llm_gguf_get_int (const LlmGguf *gguf, const char *key, gint64 *out, GError **error);
gboolean llm_gguf_get_float (const LlmGguf *gguf, const char *key, double *out, GError **error);
gboolean llm_gguf_get_bool (const LlmGguf *gguf, const char *key, gboolean *out, GError **error);
/* @str points into the mapping and is NOT NUL-terminated. */
gboolean llm_gguf_get_string (const LlmGguf *gguf, const char *key,
    const char **str, gsize *len, GError **error);
/* Newly allocated NUL-terminated copy, or NULL with @error set. */
char *llm_gguf_dup_string (const LlmGguf *gguf, const char *key, GError **error);

/* Arrays: element type and count. Nested arrays are validated on open but
 * only their outer count is exposed. */
gboolean llm_gguf_get_array (const LlmGguf *gguf, const char *key,
    LlmGgufValueType *elem_type, guint64 *n, GError **error);
/* Numeric array elements, little-endian, packed (@n * element size bytes). */
const void *llm_gguf_array_data (const LlmGguf *gguf, const char *key);
/* Element @i of a string array; NOT NUL-terminated. NULL if out of range. */
const char *llm_gguf_array_string (const LlmGguf *gguf, const char *key,
    guint64 i, gsize *len);

/* --- tensors --- */
guint64 llm_gguf_n_tensors (const LlmGguf *gguf);
const LlmGgufTensor *llm_gguf_tensor (const LlmGguf *gguf, guint64 idx);
/* NULL if absent. */
const LlmGgufTensor *llm_gguf_find_tensor (const LlmGguf *gguf, const char *name);

/* Size in bytes of one value of a scalar type; 0 for STRING/ARRAY/unknown. */
gsize llm_gguf_value_type_size (LlmGgufValueType type);

G_END_DECLS
