/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GGUF v3 writer: collects metadata and tensors in memory, then lays out a
 * file that lib/gguf.h (and llama.cpp) reads. Output is deterministic: the
 * same calls in the same order give the same bytes. */
#pragma once

#include <glib.h>
#include "gguf.h"

G_BEGIN_DECLS

#define LLM_GGUF_WRITER_ERROR (llm_gguf_writer_error_quark ())
GQuark llm_gguf_writer_error_quark (void);

typedef enum {
  LLM_GGUF_WRITER_ERROR_DUPLICATE, /* a key or tensor name was added twice */
  LLM_GGUF_WRITER_ERROR_INVALID,   /* bad type, shape, size, name or alignment */
  LLM_GGUF_WRITER_ERROR_IO,        /* the file could not be written */
} LlmGgufWriterError;

typedef struct _LlmGgufWriter LlmGgufWriter;

/* A writer with no metadata, no tensors and 32-byte alignment. */
LlmGgufWriter *llm_gguf_writer_new (void);
void llm_gguf_writer_free (LlmGgufWriter *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmGgufWriter, llm_gguf_writer_free)

/* --- metadata ---
 *
 * Keys are non-empty and written in the order they are added. Every add_*
 * returns FALSE when it fails (duplicate key, bad argument) and leaves
 * nothing behind;
 * the first failure is also remembered, and llm_gguf_writer_to_bytes() and
 * llm_gguf_writer_write_file() then fail with it, so a caller may check
 * only there. Strings and data are copied. */
gboolean llm_gguf_writer_add_uint8 (LlmGgufWriter *w, const char *key, guint8 v);
gboolean llm_gguf_writer_add_int8 (LlmGgufWriter *w, const char *key, gint8 v);
gboolean llm_gguf_writer_add_uint16 (LlmGgufWriter *w, const char *key, guint16 v);
gboolean llm_gguf_writer_add_int16 (LlmGgufWriter *w, const char *key, gint16 v);
/* "general.alignment" added here (and only here: another type is an error)
 * must be a power of two; it sets the alignment of the tensor data. */
gboolean llm_gguf_writer_add_uint32 (LlmGgufWriter *w, const char *key, guint32 v);
gboolean llm_gguf_writer_add_int32 (LlmGgufWriter *w, const char *key, gint32 v);
gboolean llm_gguf_writer_add_float32 (LlmGgufWriter *w, const char *key, float v);
gboolean llm_gguf_writer_add_bool (LlmGgufWriter *w, const char *key, gboolean v);
gboolean llm_gguf_writer_add_uint64 (LlmGgufWriter *w, const char *key, guint64 v);
gboolean llm_gguf_writer_add_int64 (LlmGgufWriter *w, const char *key, gint64 v);
gboolean llm_gguf_writer_add_float64 (LlmGgufWriter *w, const char *key, double v);
/* @v is NUL-terminated UTF-8 (not checked; GGUF strings are byte strings). */
gboolean llm_gguf_writer_add_string (LlmGgufWriter *w, const char *key, const char *v);
/* A string of @len bytes that may contain NULs. */
gboolean llm_gguf_writer_add_string_len (LlmGgufWriter *w, const char *key,
    const char *v, gsize len);

/* An array of @n numbers of scalar type @elem_type (not STRING or ARRAY),
 * packed in host order at @data (@n * llm_gguf_value_type_size() bytes;
 * BOOL elements are one byte each). @data may be NULL when @n is 0. */
gboolean llm_gguf_writer_add_array (LlmGgufWriter *w, const char *key,
    LlmGgufValueType elem_type, const void *data, guint64 n);
/* An array of @n NUL-terminated strings. */
gboolean llm_gguf_writer_add_string_array (LlmGgufWriter *w, const char *key,
    const char *const *strs, guint64 n);
/* An array of @n_arrays arrays, all of @elem_type: numbers as in
 * llm_gguf_writer_add_array() (@arrays[i] points at @lens[i] elements), or
 * STRING (@arrays[i] is a `const char *const *` of @lens[i] strings). Real
 * models do not use nested arrays; this exists to test readers. */
gboolean llm_gguf_writer_add_nested_array (LlmGgufWriter *w, const char *key,
    LlmGgufValueType elem_type, const void *const *arrays, const guint64 *lens,
    guint64 n_arrays);

/* Copies metadata @key of @src (a loaded file) with its type unchanged, so
 * a converted model keeps every key of the original. Nested arrays cannot
 * be copied (the reader does not expose their elements): FALSE. */
gboolean llm_gguf_writer_copy_kv (LlmGgufWriter *w, const LlmGguf *src,
    const char *key);

/* --- tensors ---
 *
 * Tensors are written in the order they are added, each at an offset that
 * is a multiple of the alignment. @ne[0] is the contiguous dimension; @n_dims
 * is 1..4, every @ne[i] at least 1, @ne[0] a multiple of the type's block
 * size, and the name 1 to 63 bytes long (ggml's limit). */

/* Adds @size bytes at @data already in @type's on-disk layout (copied).
 * Fails if @size is not exactly what @type and @ne need. */
gboolean llm_gguf_writer_add_tensor (LlmGgufWriter *w, const char *name,
    guint32 type, guint n_dims, const guint64 *ne, const void *data, gsize size,
    GError **error);
/* As llm_gguf_writer_add_tensor(), but keeps a reference on @data instead
 * of copying it: a caller writing a model larger than memory passes slices
 * of a mapped file (g_mapped_file_get_bytes()), which stay in the page
 * cache rather than on the heap. */
gboolean llm_gguf_writer_add_tensor_bytes (LlmGgufWriter *w, const char *name,
    guint32 type, guint n_dims, const guint64 *ne, GBytes *data, GError **error);
/* Adds a tensor of @type F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
 * Q5_K or Q6_K, converting the ne[0]*ne[1]*... floats at @src with the
 * reference kernels (so quantized bytes equal ggml's reference quantizers',
 * as llama-quantize writes them without an importance matrix). */
gboolean llm_gguf_writer_add_tensor_from_f32 (LlmGgufWriter *w,
    const char *name, guint32 type, guint n_dims, const guint64 *ne,
    const float *src, GError **error);

/* --- output --- */

/* The whole file in memory; caller unrefs. NULL with @error set if an
 * earlier add failed. */
GBytes *llm_gguf_writer_to_bytes (LlmGgufWriter *w, GError **error);
/* Writes the file to a temporary file beside @path, then renames it over
 * @path, so readers never see half a file. */
gboolean llm_gguf_writer_write_file (LlmGgufWriter *w, const char *path,
    GError **error);

G_END_DECLS
