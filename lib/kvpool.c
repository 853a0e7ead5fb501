/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kvpool.h"
#include "kvcache.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Freed huge blocks kept for the next allocation of their size. */
#define SPARE_MAX 2

struct _LlmKvPool {
  gint ref_count;
  gsize limit;
  atomic_size_t bytes;   /* blocks are freed from any thread */
  GMutex spare_lock;
  guint8 *spare[SPARE_MAX];
  gsize spare_size[SPARE_MAX];
};

LlmKvPool *
llm_kv_pool_new (gsize limit_bytes)
{
  LlmKvPool *pool = g_new0 (LlmKvPool, 1);
  pool->ref_count = 1;
  pool->limit = limit_bytes;
  atomic_init (&pool->bytes, 0);
  g_mutex_init (&pool->spare_lock);
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
  if (pool == NULL || !g_atomic_int_dec_and_test (&pool->ref_count))
    return;
  for (guint i = 0; i < SPARE_MAX; i++)
    free (pool->spare[i]);
  g_mutex_clear (&pool->spare_lock);
  g_free (pool);
}

/* A block's memory: from LLM_KV_POOL_HUGE_BYTES on, aligned to that and
 * asked to be held in huge pages as far as whole ones go, so attention's
 * long reads of one head's rows neither walk a page table every 4 KiB nor
 * stop the hardware prefetchers there (see kvcache.c). Freed with free (). */
static guint8 *
block_memory_new (gsize size)
{
  if (size >= LLM_KV_POOL_HUGE_BYTES) {
    void *p = NULL;
    if (posix_memalign (&p, LLM_KV_POOL_HUGE_BYTES, size) == 0) {
#ifdef MADV_HUGEPAGE
      /* Advice only: where the system keeps huge pages off, 4 KiB ones. */
      madvise (p, size / LLM_KV_POOL_HUGE_BYTES * LLM_KV_POOL_HUGE_BYTES, MADV_HUGEPAGE);
#endif
      return p;
    }
    return NULL;
  }
  return malloc (MAX (size, 1));
}

/* A spare of exactly @size bytes, or NULL. A fork's first write copies a
 * block and the fork's end frees it, for every draft of layer skipping:
 * mapping, zeroing (a huge page at a time) and unmapping a fresh block
 * each time made that drafting 0.8x as fast with 256-position blocks. */
static guint8 *
take_spare (LlmKvPool *pool, gsize size)
{
  guint8 *data = NULL;
  g_mutex_lock (&pool->spare_lock);
  for (guint i = 0; i < SPARE_MAX && data == NULL; i++)
    if (pool->spare[i] != NULL && pool->spare_size[i] == size) {
      data = pool->spare[i];
      pool->spare[i] = NULL;
    }
  g_mutex_unlock (&pool->spare_lock);
  return data;
}

/* Keeps @data (a huge block of @size bytes) as a spare if there is room,
 * else frees it. Spares are memory outside the pool's count and limit:
 * at most SPARE_MAX blocks. */
static void
give_spare (LlmKvPool *pool, guint8 *data, gsize size)
{
  if (size >= LLM_KV_POOL_HUGE_BYTES) {
    g_mutex_lock (&pool->spare_lock);
    for (guint i = 0; i < SPARE_MAX && data != NULL; i++)
      if (pool->spare[i] == NULL) {
        pool->spare[i] = data;
        pool->spare_size[i] = size;
        data = NULL;
      }
    g_mutex_unlock (&pool->spare_lock);
  }
  free (data);
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
  guint8 *data = take_spare (pool, size);
  if (data == NULL)
    data = block_memory_new (size);
  if (data == NULL) {
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
  give_spare (block->pool, block->data, block->size);
  llm_kv_pool_unref (block->pool);
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

gsize
llm_kv_pool_spare_bytes (LlmKvPool *pool)
{
  g_return_val_if_fail (pool != NULL, 0);
  gsize bytes = 0;
  g_mutex_lock (&pool->spare_lock);
  for (guint i = 0; i < SPARE_MAX; i++)
    bytes += pool->spare[i] != NULL ? pool->spare_size[i] : 0;
  g_mutex_unlock (&pool->spare_lock);
  return bytes;
}
