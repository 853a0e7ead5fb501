/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kvpool.h"
#include "kvcache.h"

#include <stdatomic.h>

struct _LlmKvPool {
  gint ref_count;
  gsize limit;
  atomic_size_t bytes;   /* blocks are freed from any thread */
};

LlmKvPool *
llm_kv_pool_new (gsize limit_bytes)
{
  LlmKvPool *pool = g_new0 (LlmKvPool, 1);
  pool->ref_count = 1;
  pool->limit = limit_bytes;
  atomic_init (&pool->bytes, 0);
  return pool;
}

LlmKvPool *
llm_kv_pool_ref (LlmKvPool *pool)
{
  g_atomic_int_inc (&pool->ref_count);
  return pool;
}

void
llm_kv_pool_unref (LlmKvPool *pool)
{
  if (pool != NULL && g_atomic_int_dec_and_test (&pool->ref_count))
    g_free (pool);
}

/* Adds @size to the pool's bytes unless that passes the limit. */
static gboolean
take_bytes (LlmKvPool *pool, gsize size)
{
  size_t now = atomic_load (&pool->bytes);
  do {
    if (pool->limit > 0 && (size > pool->limit || now > pool->limit - size))
      return FALSE;
  } while (!atomic_compare_exchange_weak (&pool->bytes, &now, now + size));
  return TRUE;
}

static void
give_bytes (LlmKvPool *pool, gsize size)
{
  atomic_fetch_sub (&pool->bytes, size);
}

LlmKvBlock *
llm_kv_pool_alloc (LlmKvPool *pool, gsize size, GError **error)
{
  g_return_val_if_fail (pool != NULL, NULL);
  if (!take_bytes (pool, size)) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_POOL_FULL,
        "KV pool full: a block of %" G_GSIZE_FORMAT " bytes does not fit in the limit of "
        "%" G_GSIZE_FORMAT " bytes (kv-pool-bytes; %" G_GSIZE_FORMAT " in use)", size,
        pool->limit, llm_kv_pool_bytes (pool));
    return NULL;
  }
  guint8 *data = g_try_malloc (size);
  if (data == NULL && size > 0) {
    give_bytes (pool, size);
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_NO_MEMORY,
        "out of memory for a KV block of %" G_GSIZE_FORMAT " bytes (%" G_GSIZE_FORMAT
        " bytes held)", size, llm_kv_pool_bytes (pool));
    return NULL;
  }
  LlmKvBlock *block = g_new (LlmKvBlock, 1);
  block->ref_count = 1;
  block->pool = llm_kv_pool_ref (pool);
  block->size = size;
  block->data = data;
  return block;
}

LlmKvBlock *
llm_kv_block_ref (LlmKvBlock *block)
{
  g_atomic_int_inc (&block->ref_count);
  return block;
}

void
llm_kv_block_unref (LlmKvBlock *block)
{
  if (block == NULL || !g_atomic_int_dec_and_test (&block->ref_count))
    return;
  give_bytes (block->pool, block->size);
  llm_kv_pool_unref (block->pool);
  g_free (block->data);
  g_free (block);
}

gboolean
llm_kv_block_is_shared (const LlmKvBlock *block)
{
  return g_atomic_int_get (&block->ref_count) > 1;
}

gsize
llm_kv_pool_bytes (LlmKvPool *pool)
{
  return atomic_load (&pool->bytes);
}

gsize
llm_kv_pool_limit (LlmKvPool *pool)
{
  return pool->limit;
}
