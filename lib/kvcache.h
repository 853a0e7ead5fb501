/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The KV cache of one sequence: per layer, the keys (already rotated by RoPE)
 * and values of every cached position, stored in blocks of positions that
 * are allocated as the cache fills, in f32, f16, q8_0 or q4_0.
 *
 * Positions are cache positions 0..n-1. When a window policy evicts old
 * positions, the keys that stay are re-rotated so cache positions remain
 * contiguous (llama.cpp's "context shift"): a live stream can generate
 * forever in bounded memory. */
#pragma once

#include <glib.h>

#include "cpu/attention.h"

G_BEGIN_DECLS

#define LLM_KV_ERROR (llm_kv_error_quark ())
GQuark llm_kv_error_quark (void);

typedef enum {
  LLM_KV_ERROR_CONFIG,   /* type/policy/size not usable for this model */
  LLM_KV_ERROR_FULL,     /* policy full and no room left */
  LLM_KV_ERROR_NO_MEMORY,
  LLM_KV_ERROR_POOL_FULL, /* the engine's kv-pool-bytes limit is reached */
} LlmKvError;

typedef enum {
  LLM_KV_F16,    /* default: what llama.cpp uses */
  LLM_KV_F32,    /* exact reference */
  LLM_KV_Q8_0,   /* 32-value blocks along a position's row of all KV heads */
  LLM_KV_Q4_0,
} LlmKvType;

typedef enum {
  LLM_KV_POLICY_FULL,         /* keep everything up to capacity, then error */
  LLM_KV_POLICY_WINDOW,       /* keep the last @window positions */
  LLM_KV_POLICY_SINK_WINDOW,  /* keep the first @sink and the last @window (StreamingLLM) */
} LlmKvPolicy;

typedef struct {
  LlmKvType type;
  LlmKvPolicy policy;
  guint32 context_length;     /* FULL: capacity in positions */
  guint32 window;             /* WINDOW, SINK_WINDOW */
  guint32 sink;               /* SINK_WINDOW */
} LlmKvConfig;

/* How keys were rotated, so a shift can re-rotate them. */
typedef struct {
  guint32 n_rot;
  float freq_base;
  float freq_scale;
  gboolean neox;
} LlmKvRope;

typedef struct _LlmKvCache LlmKvCache;
typedef struct _LlmKvPool LlmKvPool;

/* Fails (LLM_KV_ERROR_CONFIG) for quantized types when the row of all KV
 * heads (n_head_kv * head_dim) is not a multiple of 32, naming the sizes. */
LlmKvCache *llm_kv_cache_new (guint n_layers, guint n_head_kv, guint head_dim,
    const LlmKvConfig *config, const LlmKvRope *rope, GError **error);
/* The same with blocks taken from @pool (shared with other caches, one
 * byte limit for all). llm_kv_cache_new uses a pool of its own. */
LlmKvCache *llm_kv_cache_new_in_pool (LlmKvPool *pool, guint n_layers, guint n_head_kv,
    guint head_dim, const LlmKvConfig *config, const LlmKvRope *rope, GError **error);
void llm_kv_cache_free (LlmKvCache *kv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmKvCache, llm_kv_cache_free)

/* Positions currently cached; the next token gets cache position n. */
guint32 llm_kv_cache_n (const LlmKvCache *kv);
/* The most positions this cache will ever hold. */
guint32 llm_kv_cache_capacity (const LlmKvCache *kv);
/* Bytes allocated for keys and values now. */
gsize llm_kv_cache_bytes (const LlmKvCache *kv);
/* Positions dropped by the window policies so far. */
guint64 llm_kv_cache_n_evicted (const LlmKvCache *kv);

/* The most of @n_new positions (at least 1) that one reservation can take
 * leaving the cache as @n_new reservations of one position each would:
 * all of them when they fit, those before the next eviction when some do,
 * and when the cache is full, as many as the eviction the first of them
 * makes frees (a chunk evicts the same positions whoever asks). */
guint32 llm_kv_cache_rows_as_steps (const LlmKvCache *kv, guint32 n_new);

/* The most of @n_new positions that one reservation takes when a prompt
 * is fed: all of them under the full policy (which refuses what does not
 * fit, before anything is evaluated), and under a window policy
 * llm_kv_cache_rows_as_steps()'s, so a prompt longer than the window, or
 * than what it has room for, slides through it as its tokens fed one at
 * a time would. */
guint32 llm_kv_cache_rows_per_reserve (const LlmKvCache *kv, guint32 n_new);

/* Makes room for @n_new positions after the current ones, evicting and
 * shifting per the policy. On return the new tokens get cache positions
 * llm_kv_cache_n() .. +n_new-1. FULL without room: LLM_KV_ERROR_FULL. */
gboolean llm_kv_cache_reserve (LlmKvCache *kv, guint32 n_new, GError **error);

/* Stores the key and value rows (n_head_kv * head_dim floats each; the key
 * already rotated for @pos) of cache position @pos (reserved, not yet
 * committed) in @layer. Threads may write different (layer, pos) at once. */
void llm_kv_cache_write (LlmKvCache *kv, const LlmCpuKernels *kern, guint layer, guint32 pos,
    const float *k, const float *v);

/* Copies the key and value rows of cache position @pos (< n + reserved) of
 * @layer back out as floats, n_head_kv * head_dim each (NULL skips one):
 * what attention sees, after the type's rounding. */
void llm_kv_cache_read (const LlmKvCache *kv, guint layer, guint32 pos,
    float *k, float *v);

/* Makes @n reserved positions part of the cache (after all layers wrote). */
void llm_kv_cache_commit (LlmKvCache *kv, guint32 n);

/* Attention of one query head over cache positions [0, n_kv) of @layer
 * (causal prefill passes each query its own n_kv, which may include
 * reserved, written, uncommitted positions): out = softmax(q.K * scale) V
 * for the KV head serving query head @head (GQA: head / (n_head / n_head_kv)).
 * @scratch holds at least llm_kv_cache_scratch_floats(n_kv) floats; each
 * thread passes its own. */
void llm_kv_cache_attend (const LlmKvCache *kv, const LlmCpuKernels *kern, guint layer, guint head, guint n_head,
    const float *q, guint32 n_kv, float scale, float *out, float *scratch);
gsize llm_kv_cache_scratch_floats (const LlmKvCache *kv, guint32 n_kv);

/* llm_kv_cache_attend for @n_q queries that all read KV head @kv_head of
 * @layer (the query heads of one GQA group, or one head at several tokens
 * of a prefill), each over its own positions [0, queries[i].n_kv); every
 * output is what llm_kv_cache_attend gives, bit for bit, but the rows are
 * read once per few queries. @scratch holds at least
 * llm_kv_cache_batch_scratch_floats (max n_kv, n_q) floats. */
void llm_kv_cache_attend_batch (const LlmKvCache *kv, const LlmCpuKernels *kern, guint layer, guint kv_head,
    const LlmAttnQuery *queries, guint n_q, float scale, float *scratch);
gsize llm_kv_cache_batch_scratch_floats (const LlmKvCache *kv, guint32 n_kv, guint n_q);

/* Drops positions >= @n (speculative rejection, prompt edits); keeps the
 * blocks for what follows, except those past @n that a fork shares. */
void llm_kv_cache_truncate (LlmKvCache *kv, guint32 n);
/* Empties the cache and gives every block back to its pool. */
void llm_kv_cache_release (LlmKvCache *kv);
/* A new cache holding the same positions, sharing @kv's blocks: whichever
 * of the two writes to a shared block later copies it first, so neither
 * sees the other's new positions. Same config and pool. */
LlmKvCache *llm_kv_cache_fork (const LlmKvCache *kv);
/* Empties the cache; keeps its memory for reuse. */
void llm_kv_cache_clear (LlmKvCache *kv);

/* "f16", "f32", "q8_0", "q4_0" and back; FALSE for unknown names. */
const char *llm_kv_type_name (LlmKvType type);
gboolean llm_kv_type_from_name (const char *name, LlmKvType *type);

G_END_DECLS
