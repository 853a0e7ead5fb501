/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The KV block pool of an engine: every sequence's cache blocks are taken
 * from it, so one byte limit (`kv-pool-bytes`) bounds the KV memory of all
 * the streams an engine serves, and blocks are refcounted so a forked
 * sequence shares its parent's prefix until it writes there (copy on
 * write). GLib only. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LlmKvPool LlmKvPool;

/* One block of positions of every layer's keys and values. @data is
 * @size bytes; the cache decides the layout inside. */
typedef struct {
  gint ref_count;       /* private */
  LlmKvPool *pool;      /* private */
  gsize size;
  guint8 *data;
} LlmKvBlock;

/* @limit_bytes 0: no limit beyond what memory allows. */
LlmKvPool *llm_kv_pool_new (gsize limit_bytes);
LlmKvPool *llm_kv_pool_ref (LlmKvPool *pool);
void llm_kv_pool_unref (LlmKvPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmKvPool, llm_kv_pool_unref)

/* Blocks of at least this many bytes are aligned to it and asked to be
 * held in transparent huge pages (as far as whole ones go). */
#define LLM_KV_POOL_HUGE_BYTES ((gsize) 2 << 20)

/* A new block of @size bytes (contents undefined), counted against the
 * limit: LLM_KV_ERROR_POOL_FULL naming the limit when it would pass it,
 * LLM_KV_ERROR_NO_MEMORY when the allocation fails. Thread-safe. */
LlmKvBlock *llm_kv_pool_alloc (LlmKvPool *pool, gsize size, GError **error);
LlmKvBlock *llm_kv_block_ref (LlmKvBlock *block);
/* The last reference gives the bytes back to the pool. */
void llm_kv_block_unref (LlmKvBlock *block);
/* Whether someone else holds @block too (a write must copy it first). */
gboolean llm_kv_block_is_shared (const LlmKvBlock *block);

/* Bytes in blocks now, and the limit (0: none). */
gsize llm_kv_pool_bytes (LlmKvPool *pool);
gsize llm_kv_pool_limit (LlmKvPool *pool);
/* Bytes of freed blocks of LLM_KV_POOL_HUGE_BYTES or more kept for the
 * next block of their size (at most two blocks; outside the count and the
 * limit above). */
gsize llm_kv_pool_spare_bytes (LlmKvPool *pool);

G_END_DECLS
