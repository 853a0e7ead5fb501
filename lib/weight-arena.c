/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "weight-arena.h"

#include <stdlib.h>
#include <sys/mman.h>

/* A transparent huge page. */
#define HUGE_BYTES ((gsize) 2 << 20)
/* A chunk holds this much unless one matrix needs more. Only the pages
 * written are memory: the tail of the last chunk costs address space and
 * at most one huge page. */
#define CHUNK_BYTES ((gsize) 64 << 20)
/* The kernels' widest loads then never split a cache line. */
#define ALIGN 64

typedef struct {
  guint8 *base;
  gsize size, used;
  guint live;                 /* allocations not released yet */
} Chunk;

struct _LlmWeightArena {
  GMutex lock;
  GPtrArray *chunks;          /* of Chunk; the last is the one being filled */
};

LlmWeightArena *
llm_weight_arena_new (void)
{
  LlmWeightArena *a = g_new0 (LlmWeightArena, 1);
  g_mutex_init (&a->lock);
  a->chunks = g_ptr_array_new ();
  return a;
}

static void
chunk_free (Chunk *c)
{
  free (c->base);
  g_free (c);
}

void
llm_weight_arena_free (LlmWeightArena *a)
{
  if (a == NULL)
    return;
  g_warn_if_fail (a->chunks->len == 0);
  for (guint i = 0; i < a->chunks->len; i++)
    chunk_free (g_ptr_array_index (a->chunks, i));
  g_ptr_array_free (a->chunks, TRUE);
  g_mutex_clear (&a->lock);
  g_free (a);
}

static Chunk *
chunk_new (gsize bytes)
{
  if (bytes > G_MAXSIZE - CHUNK_BYTES)
    return NULL;
  const gsize size = MAX (CHUNK_BYTES, (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES);
  void *base = NULL;
  if (posix_memalign (&base, HUGE_BYTES, size) != 0)
    return NULL;
#ifdef MADV_HUGEPAGE
  /* Advice only: where the system keeps huge pages off, 4 KiB ones. */
  madvise (base, size, MADV_HUGEPAGE);
#endif
  Chunk *c = g_new0 (Chunk, 1);
  c->base = base;
  c->size = size;
  return c;
}

void *
llm_weight_arena_alloc (LlmWeightArena *a, gsize bytes)
{
  g_return_val_if_fail (a != NULL, NULL);
  if (bytes > G_MAXSIZE - ALIGN)
    return NULL;
  bytes = (MAX (bytes, 1) + ALIGN - 1) / ALIGN * ALIGN;
  g_mutex_lock (&a->lock);
  Chunk *c = a->chunks->len > 0 ? g_ptr_array_index (a->chunks, a->chunks->len - 1) : NULL;
  if (c == NULL || c->size - c->used < bytes) {
    c = chunk_new (bytes);
    if (c != NULL)
      g_ptr_array_add (a->chunks, c);
  }
  void *p = NULL;
  if (c != NULL) {
    p = c->base + c->used;
    c->used += bytes;
    c->live++;
  }
  g_mutex_unlock (&a->lock);
  return p;
}

void
llm_weight_arena_release (LlmWeightArena *a, void *p)
{
  g_return_if_fail (a != NULL);
  if (p == NULL)
    return;
  g_mutex_lock (&a->lock);
  for (guint i = 0; i < a->chunks->len; i++) {
    Chunk *c = g_ptr_array_index (a->chunks, i);
    if ((guint8 *) p < c->base || (guint8 *) p >= c->base + c->size)
      continue;
    if (--c->live == 0) {
      g_ptr_array_remove_index (a->chunks, i);
      chunk_free (c);
    }
    g_mutex_unlock (&a->lock);
    return;
  }
  g_mutex_unlock (&a->lock);
  g_warn_if_reached ();       /* not this arena's */
}

guint
llm_weight_arena_n_chunks (LlmWeightArena *a)
{
  g_mutex_lock (&a->lock);
  const guint n = a->chunks->len;
  g_mutex_unlock (&a->lock);
  return n;
}
