/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Storage and eviction policy of the session KV cache; the arithmetic of
 * attention lives in kernels/cpu/attention.c so other backends can mirror
 * it.
 *
 * Blocks: every layer's keys and values are blocks of block_pos rows,
 * allocated by reserve() as the cache grows (writes never allocate, so
 * threads can write at once without locks). The last block is cut to the
 * capacity (with keys in panels, F16 and Q8_0: rounded up to whole
 * panels of 16 positions, see Layout), so allocated bytes never exceed
 * that many rows.
 * block_pos is KV_BLOCK_LONG where such a block is at least a huge page
 * (LLM_KV_POOL_HUGE_BYTES), else KV_BLOCK_SHORT. Long: attention reads
 * each head's rows of a block as one run (32 KiB in F16 at head size 64)
 * in huge pages, so the run neither walks a page table every 4 KiB nor
 * restarts the hardware prefetchers there: 16 streams of 246M Q4_0 at
 * depth 400-450, where attention is a third of a step, took a step 0.91x
 * the time of 64-position blocks in 4 KiB pages (median of 16 rounds, the
 * two taking turns; 13 of 16 faster). Its price is granularity (a 7B
 * model's f16 block is 2 MiB per layer and tensor, and a short stream
 * holds up to 255 positions it does not use); a fork's first write copies
 * only the rows in use (own_blocks). Short, for small models, whose
 * blocks could not be huge pages anyway: a small granularity.
 *
 * Eviction: when a window policy needs room it drops a chunk of the oldest
 * non-sink positions at once, a quarter of the window (or more if the
 * reservation needs more), moves the survivors down and re-rotates their
 * keys by -chunk. Shifting moves up to 3/4 of the window, so per generated
 * token that is about 3 rows per layer instead of a whole window; the price
 * is that right after an eviction the model sees 3/4 of the window rather
 * than all of it (llama.cpp's context shift discards half).
 *
 * Sharing: blocks come from an LlmKvPool (one per engine, with its byte
 * limit). A block holds its positions for every layer's keys and values
 * and is refcounted: fork() shares all of a cache's blocks, and a write
 * to a shared block copies it first (reserve() does that before threads
 * write, for every block the reservation or a shift will touch).
 *
 * Reservations: reserve() covers positions [n, n + n_new) and replaces any
 * reservation not yet committed, so a failed step never leaks positions.
 *
 * Layout: a block of r rows keeps each KV head's rows together (head h's
 * slice of row i at (h * r + i) * slice bytes), so attention, which reads
 * one head at a time, reads memory in long runs instead of a short piece
 * of every row (a strided read runs at a fraction of the bandwidth).
 * Where a head's slice is not whole quant blocks (Q8_0/Q4_0 with a head
 * size that is not a multiple of 32) a block is plain rows instead.
 *
 * F16 and Q8_0 keys go in panels (LlmAttnRows.panels): 16 positions of
 * a head take the bytes of their 16 rows, value d (Q8_0: code d, the
 * block scales after the codes) of each position side by side, so the
 * scores' products load a dimension of 16 positions at once instead of
 * transposing rows in registers. One decode step's attention (4 queries
 * over F16 keys, one thread, Zen 5) ran 1.36-1.54x faster on plain AVX2
 * and 1.07-1.19x on AVX-512; a key is stored and read back through a row
 * (llm_attn_panel_put, _get), a few microseconds a step. Values stay
 * rows: their products want a row's values side by side. */
#include "kvcache.h"
#include "kvpool.h"

#include <string.h>

#include "cpu/attention.h"
#include "cpu/ops.h"

/* The bytes of a key in panels as a row, on the stack. */
#define PANEL_ROW_MAX (LLM_ATTN_PANEL_VALUES_MAX * 2)
#define KV_BLOCK_SHORT 64u
#define KV_BLOCK_LONG 256u

G_DEFINE_QUARK (llm-kv-error-quark, llm_kv_error)

typedef struct {
  guint8 **k;  /* n_blocks_max pointers; NULL until allocated */
  guint8 **v;
} KvLayer;

struct _LlmKvCache {
  guint n_layers;
  guint n_head_kv;
  guint head_dim;
  gsize row_n;       /* values per row: n_head_kv * head_dim */
  gsize row_bytes;
  guint n_slices;    /* pieces a row is stored in: n_head_kv, or 1 */
  gsize slice_n;     /* values per piece */
  gsize slice_bytes;
  LlmAttnType attn_type;
  gboolean k_panels;  /* keys in panels of 16 positions (see Layout) */

  LlmKvConfig config;
  LlmKvRope rope;
  gboolean rotated;  /* keys carry RoPE, so a shift must re-rotate them */
  guint32 capacity;
  guint32 sink;      /* positions a window policy never evicts */

  guint32 n;         /* committed positions */
  guint32 n_reserved;  /* reserved after n, not yet committed */
  guint64 n_evicted;

  guint32 block_pos;   /* positions a block holds (see Blocks) */
  guint32 n_blocks_max;
  guint32 n_blocks;  /* blocks [0, n_blocks) exist in every layer */
  gsize bytes;
  KvLayer *layers;
  LlmKvPool *pool;
  LlmKvBlock **blocks;  /* n_blocks_max; [0, n_blocks) set */

  float *shift_row;  /* one row in f32, for re-rotating a key */
};

static const char *const type_names[] = {
  [LLM_KV_F16] = "f16",
  [LLM_KV_F32] = "f32",
  [LLM_KV_Q8_0] = "q8_0",
  [LLM_KV_Q4_0] = "q4_0",
};

const char *
llm_kv_type_name (LlmKvType type)
{
  if ((guint) type >= G_N_ELEMENTS (type_names))
    return "unknown";
  return type_names[type];
}

gboolean
llm_kv_type_from_name (const char *name, LlmKvType *type)
{
  g_return_val_if_fail (name != NULL, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (type_names); i++) {
    if (g_ascii_strcasecmp (name, type_names[i]) == 0) {
      if (type)
        *type = (LlmKvType) i;
      return TRUE;
    }
  }
  return FALSE;
}

static LlmAttnType
attn_type (LlmKvType type)
{
  switch (type) {
    case LLM_KV_F32:
      return LLM_ATTN_F32;
    case LLM_KV_Q8_0:
      return LLM_ATTN_Q8_0;
    case LLM_KV_Q4_0:
      return LLM_ATTN_Q4_0;
    case LLM_KV_F16:
    default:
      return LLM_ATTN_F16;
  }
}

static gboolean
check_config (guint n_layers, guint n_head_kv, guint head_dim, const LlmKvConfig *config,
    const LlmKvRope *rope, GError **error)
{
  if (n_layers == 0 || n_head_kv == 0 || head_dim == 0) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "KV cache needs at least one layer, KV head and head dimension "
        "(got %u layers, %u KV heads, head dimension %u)", n_layers, n_head_kv, head_dim);
    return FALSE;
  }
  if ((guint) config->type >= G_N_ELEMENTS (type_names)) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "unknown KV cache type %d", (int) config->type);
    return FALSE;
  }

  const guint64 row_n = (guint64) n_head_kv * head_dim;
  if ((config->type == LLM_KV_Q8_0 || config->type == LLM_KV_Q4_0) && row_n % 32 != 0) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "KV cache type %s quantizes rows in blocks of 32 values, but a row of "
        "all KV heads here has %" G_GUINT64_FORMAT " (%u heads x %u); use f16 or f32",
        llm_kv_type_name (config->type), row_n, n_head_kv, head_dim);
    return FALSE;
  }

  switch (config->policy) {
    case LLM_KV_POLICY_FULL:
      if (config->context_length == 0) {
        g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
            "KV cache policy full needs a context length above 0");
        return FALSE;
      }
      break;
    case LLM_KV_POLICY_WINDOW:
    case LLM_KV_POLICY_SINK_WINDOW:
      if (config->window == 0) {
        g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
            "KV cache window policies need a window above 0");
        return FALSE;
      }
      if (config->policy == LLM_KV_POLICY_SINK_WINDOW
          && (guint64) config->sink + config->window > G_MAXUINT32) {
        g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
            "KV cache sink (%u) plus window (%u) exceeds %u positions",
            config->sink, config->window, G_MAXUINT32);
        return FALSE;
      }
      break;
    default:
      g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
          "unknown KV cache policy %d", (int) config->policy);
      return FALSE;
  }

  if (rope && rope->n_rot > 0 && (rope->n_rot > head_dim || rope->n_rot % 2 != 0)) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "RoPE dimensions (%u) must be even and at most the head dimension (%u)",
        rope->n_rot, head_dim);
    return FALSE;
  }
  return TRUE;
}

LlmKvCache *
llm_kv_cache_new (guint n_layers, guint n_head_kv, guint head_dim,
    const LlmKvConfig *config, const LlmKvRope *rope, GError **error)
{
  g_autoptr (LlmKvPool) pool = llm_kv_pool_new (0);
  return llm_kv_cache_new_in_pool (pool, n_layers, n_head_kv, head_dim, config, rope, error);
}

static guint32 block_rows (const LlmKvCache *kv, guint32 b);
static guint32 blocks_for (const LlmKvCache *kv, guint64 end);

/* @rope NULL or n_rot 0: keys carry no position rotation (a model without
 * RoPE), so shifting only moves them. */
LlmKvCache *
llm_kv_cache_new_in_pool (LlmKvPool *pool, guint n_layers, guint n_head_kv, guint head_dim,
    const LlmKvConfig *config, const LlmKvRope *rope, GError **error)
{
  g_return_val_if_fail (pool != NULL, NULL);
  g_return_val_if_fail (config != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!check_config (n_layers, n_head_kv, head_dim, config, rope, error))
    return NULL;

  LlmKvCache *kv = g_new0 (LlmKvCache, 1);
  kv->pool = llm_kv_pool_ref (pool);
  kv->n_layers = n_layers;
  kv->n_head_kv = n_head_kv;
  kv->head_dim = head_dim;
  kv->row_n = (gsize) n_head_kv * head_dim;
  kv->attn_type = attn_type (config->type);
  kv->row_bytes = llm_attn_row_bytes (kv->attn_type, kv->row_n);
  /* Head-major when a head's slice is a row of its own (whole blocks). */
  const gsize head_bytes = llm_attn_row_bytes (kv->attn_type, head_dim);
  kv->n_slices = head_bytes > 0 ? n_head_kv : 1;
  kv->slice_n = kv->row_n / kv->n_slices;
  kv->slice_bytes = kv->row_bytes / kv->n_slices;
  kv->k_panels = llm_attn_panels_fit (kv->attn_type, head_dim);
  kv->config = *config;
  if (rope)
    kv->rope = *rope;
  kv->rotated = rope != NULL && rope->n_rot > 0;

  switch (config->policy) {
    case LLM_KV_POLICY_FULL:
      kv->capacity = config->context_length;
      break;
    case LLM_KV_POLICY_WINDOW:
      kv->capacity = config->window;
      break;
    case LLM_KV_POLICY_SINK_WINDOW:
      kv->sink = config->sink;
      kv->capacity = config->sink + config->window;
      break;
  }

  gsize long_bytes, first_bytes;
  if (!g_size_checked_mul (&long_bytes, kv->row_bytes, 2 * (gsize) KV_BLOCK_LONG)
      || !g_size_checked_mul (&long_bytes, long_bytes, n_layers)) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "KV cache row of %" G_GSIZE_FORMAT " values is too large", kv->row_n);
    llm_kv_cache_free (kv);
    return NULL;
  }
  kv->block_pos = long_bytes >= LLM_KV_POOL_HUGE_BYTES ? KV_BLOCK_LONG : KV_BLOCK_SHORT;
  if (!g_size_checked_mul (&first_bytes, (gsize) block_rows (kv, 0) * kv->row_bytes,
          2 * (gsize) n_layers)) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "KV cache row of %" G_GSIZE_FORMAT " values is too large", kv->row_n);
    llm_kv_cache_free (kv);
    return NULL;
  }
  /* Refused now, not as a full pool at the first token (which preempting
   * other streams could never cure). */
  const gsize limit = llm_kv_pool_limit (pool);
  if (limit > 0 && first_bytes > limit) {
    g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_CONFIG,
        "kv-pool-bytes (%" G_GSIZE_FORMAT ") is smaller than one KV block of this model "
        "(%" G_GSIZE_FORMAT " bytes: %u positions of %u layers, keys and values in %s), so no "
        "stream could hold a token; raise it to at least %" G_GSIZE_FORMAT " (0: no limit)",
        limit, first_bytes, block_rows (kv, 0), n_layers, llm_kv_type_name (config->type),
        first_bytes);
    llm_kv_cache_free (kv);
    return NULL;
  }

  kv->n_blocks_max = blocks_for (kv, kv->capacity);
  kv->layers = g_try_new0 (KvLayer, n_layers);
  kv->blocks = g_try_new0 (LlmKvBlock *, kv->n_blocks_max);
  if (kv->layers == NULL || kv->blocks == NULL)
    goto no_memory;
  for (guint l = 0; l < n_layers; l++) {
    kv->layers[l].k = g_try_new0 (guint8 *, kv->n_blocks_max);
    kv->layers[l].v = g_try_new0 (guint8 *, kv->n_blocks_max);
    if (kv->layers[l].k == NULL || kv->layers[l].v == NULL)
      goto no_memory;
  }
  if (config->policy != LLM_KV_POLICY_FULL) {
    kv->shift_row = g_try_new (float, kv->row_n);
    if (kv->shift_row == NULL)
      goto no_memory;
  }
  return kv;

no_memory:
  g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_NO_MEMORY,
      "out of memory creating a KV cache of %u layers and %u positions",
      n_layers, kv->capacity);
  llm_kv_cache_free (kv);
  return NULL;
}

void
llm_kv_cache_free (LlmKvCache *kv)
{
  if (kv == NULL)
    return;
  if (kv->blocks)
    for (guint32 b = 0; b < kv->n_blocks; b++)
      llm_kv_block_unref (kv->blocks[b]);
  g_free (kv->blocks);
  if (kv->layers) {
    for (guint l = 0; l < kv->n_layers; l++) {
      g_free (kv->layers[l].k);
      g_free (kv->layers[l].v);
    }
    g_free (kv->layers);
  }
  g_free (kv->shift_row);
  llm_kv_pool_unref (kv->pool);
  g_free (kv);
}

guint32
llm_kv_cache_n (const LlmKvCache *kv)
{
  g_return_val_if_fail (kv != NULL, 0);
  return kv->n;
}

guint32
llm_kv_cache_capacity (const LlmKvCache *kv)
{
  g_return_val_if_fail (kv != NULL, 0);
  return kv->capacity;
}

gsize
llm_kv_cache_bytes (const LlmKvCache *kv)
{
  g_return_val_if_fail (kv != NULL, 0);
  return kv->bytes;
}

guint64
llm_kv_cache_n_evicted (const LlmKvCache *kv)
{
  g_return_val_if_fail (kv != NULL, 0);
  return kv->n_evicted;
}

/* The positions the blocks hold: the capacity, rounded up to whole
 * panels (LLM_ATTN_PANEL positions) where keys are in panels (in 64 bits:
 * a capacity may be G_MAXUINT32). */
static inline guint64
panel_capacity (const LlmKvCache *kv)
{
  if (!kv->k_panels)
    return kv->capacity;
  return ((guint64) kv->capacity + LLM_ATTN_PANEL - 1) / LLM_ATTN_PANEL * LLM_ATTN_PANEL;
}

/* Rows block @b holds: block_pos, the last one cut to panel_capacity. */
static inline guint32
block_rows (const LlmKvCache *kv, guint32 b)
{
  return (guint32) MIN ((guint64) kv->block_pos,
      panel_capacity (kv) - (guint64) b * kv->block_pos);
}

/* Blocks that positions [0, @end) take. */
static inline guint32
blocks_for (const LlmKvCache *kv, guint64 end)
{
  return (guint32) ((end + kv->block_pos - 1) / kv->block_pos);
}

/* Piece @h of row @pos (see Layout above); the last block has fewer rows. */
static inline guint8 *
slice_ptr (const LlmKvCache *kv, guint8 *const *blocks, guint32 pos, guint h)
{
  const guint32 b = pos / kv->block_pos;
  return blocks[b] + ((gsize) h * block_rows (kv, b) + pos % kv->block_pos) * kv->slice_bytes;
}

/* The panel of head @h's key at @pos (see Layout). */
static inline guint8 *
panel_ptr (const LlmKvCache *kv, guint8 *const *blocks, guint32 pos, guint h)
{
  return slice_ptr (kv, blocks, pos - pos % LLM_ATTN_PANEL, h);
}

/* Stores row @pos of @blocks, keys (@keys) or values. */
static void
row_store (const LlmKvCache *kv, const LlmCpuKernels *kern, guint8 *const *blocks,
    guint32 pos, const float *src, gboolean keys)
{
  for (guint h = 0; h < kv->n_slices; h++) {
    if (keys && kv->k_panels) {
      guint8 row[PANEL_ROW_MAX];
      llm_attn_row_store (kern, kv->attn_type, src + h * kv->slice_n, row, kv->slice_n);
      llm_attn_panel_put (kv->attn_type, panel_ptr (kv, blocks, pos, h), pos % LLM_ATTN_PANEL,
          row, kv->slice_n);
      continue;
    }
    llm_attn_row_store (kern, kv->attn_type, src + h * kv->slice_n, slice_ptr (kv, blocks, pos, h),
        kv->slice_n);
  }
}

static void
row_load (const LlmKvCache *kv, guint8 *const *blocks, guint32 pos, float *dst, gboolean keys)
{
  for (guint h = 0; h < kv->n_slices; h++) {
    if (keys && kv->k_panels) {
      guint8 row[PANEL_ROW_MAX];
      llm_attn_panel_get (kv->attn_type, panel_ptr (kv, blocks, pos, h), pos % LLM_ATTN_PANEL,
          row, kv->slice_n);
      llm_attn_row_load (kv->attn_type, row, 0, kv->slice_n, dst + h * kv->slice_n);
      continue;
    }
    llm_attn_row_load (kv->attn_type, slice_ptr (kv, blocks, pos, h), 0, kv->slice_n,
        dst + h * kv->slice_n);
  }
}

static void
row_copy (const LlmKvCache *kv, guint8 *const *blocks, guint32 dst, guint32 src, gboolean keys)
{
  for (guint h = 0; h < kv->n_slices; h++) {
    if (keys && kv->k_panels) {
      guint8 row[PANEL_ROW_MAX];
      llm_attn_panel_get (kv->attn_type, panel_ptr (kv, blocks, src, h), src % LLM_ATTN_PANEL,
          row, kv->slice_n);
      llm_attn_panel_put (kv->attn_type, panel_ptr (kv, blocks, dst, h), dst % LLM_ATTN_PANEL,
          row, kv->slice_n);
      continue;
    }
    memcpy (slice_ptr (kv, blocks, dst, h), slice_ptr (kv, blocks, src, h), kv->slice_bytes);
  }
}

/* Points every layer's K and V slots of block @b into @block: layer l's
 * keys first, then its values. */
static void
set_block (LlmKvCache *kv, guint32 b, LlmKvBlock *block)
{
  const gsize part = block_rows (kv, b) * kv->row_bytes;
  kv->blocks[b] = block;
  for (guint l = 0; l < kv->n_layers; l++) {
    kv->layers[l].k[b] = block ? block->data + (2 * (gsize) l) * part : NULL;
    kv->layers[l].v[b] = block ? block->data + (2 * (gsize) l + 1) * part : NULL;
  }
}

/* Allocates blocks until positions [0, @end) exist in every layer. A
 * failure leaves the blocks made so far in place (counted, reused by the
 * next attempt). */
static gboolean
ensure_blocks (LlmKvCache *kv, guint32 end, GError **error)
{
  const guint32 need = blocks_for (kv, end);

  for (; kv->n_blocks < need; kv->n_blocks++) {
    const guint32 b = kv->n_blocks;
    gsize size;
    if (!g_size_checked_mul (&size, (gsize) block_rows (kv, b) * kv->row_bytes,
            2 * (gsize) kv->n_layers)) {
      g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_NO_MEMORY,
          "a KV block of %u positions x %u layers is larger than memory", block_rows (kv, b),
          kv->n_layers);
      return FALSE;
    }
    LlmKvBlock *block = llm_kv_pool_alloc (kv->pool, size, error);
    if (block == NULL) {
      g_prefix_error (error, "growing the KV cache to %u positions: ", end);
      return FALSE;
    }
    set_block (kv, b, block);
    kv->bytes += size;
  }
  return TRUE;
}

/* Copies block @b's rows below the cache's length, all that can be read
 * before it is written: a fork shares a block that its parent goes on
 * filling, and layer skipping forks for every draft, so copying the whole
 * 256 positions would often copy mostly rows no one wrote. */
static void
copy_rows_in_use (const LlmKvCache *kv, guint32 b, const guint8 *src, guint8 *dst)
{
  const guint32 rows = block_rows (kv, b), start = b * kv->block_pos;
  /* whole panels where keys are in panels (rows is then a multiple of
   * LLM_ATTN_PANEL) */
  const guint32 unit = kv->k_panels ? LLM_ATTN_PANEL : 1;
  const gsize used = kv->n > start ? MIN ((kv->n - start + unit - 1) / unit * unit, rows) : 0;
  const gsize part = (gsize) rows * kv->row_bytes;
  for (guint p = 0; p < 2 * kv->n_layers; p++)
    for (guint h = 0; h < kv->n_slices; h++) {
      const gsize at = p * part + (gsize) h * rows * kv->slice_bytes;
      memcpy (dst + at, src + at, used * kv->slice_bytes);
    }
}

/* Gives the cache blocks of its own for positions [@first, @end) (those
 * that exist), copying any that a fork shares, so writes there touch no
 * other sequence. */
static gboolean
own_blocks (LlmKvCache *kv, guint32 first, guint32 end, GError **error)
{
  const guint32 b_end = MIN (kv->n_blocks, blocks_for (kv, end));
  for (guint32 b = first / kv->block_pos; b < b_end; b++) {
    LlmKvBlock *old = kv->blocks[b];
    if (!llm_kv_block_is_shared (old))
      continue;
    LlmKvBlock *copy = llm_kv_pool_alloc (kv->pool, old->size, error);
    if (copy == NULL) {
      g_prefix_error (error, "copying a shared KV block: ");
      return FALSE;
    }
    copy_rows_in_use (kv, b, old->data, copy->data);
    set_block (kv, b, copy);
    llm_kv_block_unref (old);
  }
  return TRUE;
}

/* Gives back every block at or past block @b_first. */
static void
release_blocks (LlmKvCache *kv, guint32 b_first)
{
  for (; kv->n_blocks > b_first; kv->n_blocks--) {
    const guint32 b = kv->n_blocks - 1;
    kv->bytes -= kv->blocks[b]->size;
    llm_kv_block_unref (kv->blocks[b]);
    set_block (kv, b, NULL);
  }
}

/* Gives back every block from the first shared one at or past @b_first
 * (the blocks after it go too: they are refilled in order). */
static void
release_shared_from (LlmKvCache *kv, guint32 b_first)
{
  for (guint32 b = b_first; b < kv->n_blocks; b++) {
    if (llm_kv_block_is_shared (kv->blocks[b])) {
      release_blocks (kv, b);
      return;
    }
  }
}

/* Drops positions [sink, sink + @count) and moves the rest down by @count;
 * keys were rotated for their old positions, so rotating them by -@count
 * makes them what a fresh rotation at the new position would give. */
static void
evict (LlmKvCache *kv, guint32 count)
{
  const guint32 keep = MIN (kv->sink, kv->n);

  for (guint l = 0; l < kv->n_layers; l++) {
    KvLayer *layer = &kv->layers[l];
    for (guint32 src = keep + count; src < kv->n; src++) {
      const guint32 dst = src - count;
      if (kv->rotated) {
        row_load (kv, layer->k, src, kv->shift_row, TRUE);
        llm_rope (kv->shift_row, kv->n_head_kv, kv->head_dim, kv->rope.n_rot,
            -(int64_t) count, kv->rope.freq_base, kv->rope.freq_scale, kv->rope.neox);
        /* The reference store: every kernel set stores the same bytes,
         * and an eviction has no backend at hand. */
        row_store (kv, llm_cpu_kernels (LLM_CPU_ISA_SCALAR), layer->k, dst, kv->shift_row,
            TRUE);
      } else {
        row_copy (kv, layer->k, dst, src, TRUE);
      }
      row_copy (kv, layer->v, dst, src, FALSE);
    }
  }
  kv->n -= count;
  kv->n_evicted += count;
}

/* Positions a window policy evicts to make room for @needed more. */
static guint32
evict_count (const LlmKvCache *kv, guint32 needed)
{
  const guint32 kept = MIN (kv->sink, kv->n);
  const guint32 chunk = MAX (1u, (kv->capacity - kv->sink) / 4);
  return MIN (MAX (needed, chunk), kv->n - kept);
}

guint32
llm_kv_cache_rows_as_steps (const LlmKvCache *kv, guint32 n_new)
{
  g_return_val_if_fail (kv != NULL, 1);
  const guint32 room = kv->n < kv->capacity ? kv->capacity - kv->n : 0;
  guint32 rows = room;
  if (room == 0 && kv->config.policy != LLM_KV_POLICY_FULL)
    rows = evict_count (kv, 1);
  return MAX (1u, MIN (n_new, rows));
}

guint32
llm_kv_cache_rows_per_reserve (const LlmKvCache *kv, guint32 n_new)
{
  g_return_val_if_fail (kv != NULL, 1);
  if (kv->config.policy == LLM_KV_POLICY_FULL || n_new == 0)
    return n_new;
  return llm_kv_cache_rows_as_steps (kv, n_new);
}

gboolean
llm_kv_cache_reserve (LlmKvCache *kv, guint32 n_new, GError **error)
{
  g_return_val_if_fail (kv != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  kv->n_reserved = 0;
  if (n_new == 0)
    return TRUE;

  guint32 n_evict = 0;
  if ((guint64) kv->n + n_new > kv->capacity) {
    if (kv->config.policy == LLM_KV_POLICY_FULL) {
      g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL,
          "KV cache full: %u positions used, %u more requested, limit %u "
          "(context length)", kv->n, n_new, kv->capacity);
      return FALSE;
    }

    const guint32 kept = MIN (kv->sink, kv->n);
    if ((guint64) kept + n_new > kv->capacity) {
      g_set_error (error, LLM_KV_ERROR, LLM_KV_ERROR_FULL,
          "KV cache window cannot take %u positions at once: it holds %u "
          "(%u sink + %u window)", n_new, kv->capacity, kv->sink, kv->capacity - kv->sink);
      return FALSE;
    }

    n_evict = evict_count (kv, (guint32) ((guint64) kv->n + n_new - kv->capacity));
  }

  /* Allocate (and copy shared blocks) before evicting, so running out of
   * memory loses nothing. A shift rewrites positions from the sink on. */
  const guint32 end = kv->n - n_evict + n_new;
  if (!ensure_blocks (kv, end, error)
      || !own_blocks (kv, n_evict > 0 ? MIN (kv->sink, kv->n) : kv->n - n_evict, end, error))
    return FALSE;
  if (n_evict > 0)
    evict (kv, n_evict);

  kv->n_reserved = n_new;
  return TRUE;
}

void
llm_kv_cache_write (LlmKvCache *kv, const LlmCpuKernels *kern, guint layer, guint32 pos,
    const float *k, const float *v)
{
  g_return_if_fail (kv != NULL && k != NULL && v != NULL);
  g_return_if_fail (layer < kv->n_layers);
  g_return_if_fail (pos >= kv->n && pos - kv->n < kv->n_reserved);

  KvLayer *l = &kv->layers[layer];
  row_store (kv, kern, l->k, pos, k, TRUE);
  row_store (kv, kern, l->v, pos, v, FALSE);
}

void
llm_kv_cache_read (const LlmKvCache *kv, guint layer, guint32 pos, float *k, float *v)
{
  g_return_if_fail (kv != NULL);
  g_return_if_fail (layer < kv->n_layers);
  g_return_if_fail ((guint64) pos < (guint64) kv->n + kv->n_reserved);

  const KvLayer *l = &kv->layers[layer];
  if (k)
    row_load (kv, l->k, pos, k, TRUE);
  if (v)
    row_load (kv, l->v, pos, v, FALSE);
}

void
llm_kv_cache_commit (LlmKvCache *kv, guint32 n)
{
  g_return_if_fail (kv != NULL);
  g_return_if_fail (n <= kv->n_reserved);
  kv->n += n;
  kv->n_reserved -= n;
}

gsize
llm_kv_cache_scratch_floats (const LlmKvCache *kv, guint32 n_kv)
{
  g_return_val_if_fail (kv != NULL, 0);
  return llm_attention_scratch_floats (n_kv, kv->head_dim);
}

gsize
llm_kv_cache_batch_scratch_floats (const LlmKvCache *kv, guint32 n_kv, guint n_q)
{
  g_return_val_if_fail (kv != NULL, 0);
  return llm_attention_batch_scratch_floats (n_kv, kv->head_dim, n_q);
}

/* The rows attention reads for @kv_head, and where its values start in
 * them. */
static gsize
attn_rows (const LlmKvCache *kv, guint layer, guint kv_head, LlmAttnRows *k, LlmAttnRows *v)
{
  const KvLayer *l = &kv->layers[layer];
  const gboolean by_head = kv->n_slices > 1;
  *k = (LlmAttnRows) {
    .blocks = (const void *const *) l->k,
    .block_rows = kv->block_pos,
    .row_bytes = kv->slice_bytes,
    .type = kv->attn_type,
    .segment = by_head ? kv_head : 0,
    .n_rows = (gsize) panel_capacity (kv),
    .panels = kv->k_panels,
  };
  *v = *k;
  v->blocks = (const void *const *) l->v;
  v->panels = FALSE;
  return by_head ? 0 : (gsize) kv_head * kv->head_dim;
}

void
llm_kv_cache_attend_batch (const LlmKvCache *kv, const LlmCpuKernels *kern, guint layer,
    guint kv_head,
    const LlmAttnQuery *queries, guint n_q, float scale, float *scratch)
{
  g_return_if_fail (kv != NULL && (queries != NULL || n_q == 0) && scratch != NULL);
  g_return_if_fail (layer < kv->n_layers);
  g_return_if_fail (kv_head < kv->n_head_kv);
  for (guint i = 0; i < n_q; i++)
    g_return_if_fail ((guint64) queries[i].n_kv <= (guint64) kv->n + kv->n_reserved);

  LlmAttnRows k, v;
  const gsize offset = attn_rows (kv, layer, kv_head, &k, &v);
  llm_attention_batch (kern, &k, &v, offset, kv->head_dim, queries, n_q, scale, scratch);
}

void
llm_kv_cache_attend (const LlmKvCache *kv, const LlmCpuKernels *kern, guint layer,
    guint head, guint n_head,
    const float *q, guint32 n_kv, float scale, float *out, float *scratch)
{
  g_return_if_fail (kv != NULL && q != NULL && out != NULL && scratch != NULL);
  g_return_if_fail (layer < kv->n_layers);
  g_return_if_fail (n_head >= kv->n_head_kv && n_head % kv->n_head_kv == 0);
  g_return_if_fail (head < n_head);
  g_return_if_fail ((guint64) n_kv <= (guint64) kv->n + kv->n_reserved);

  const guint kv_head = head / (n_head / kv->n_head_kv);
  LlmAttnRows k, v;
  const gsize offset = attn_rows (kv, layer, kv_head, &k, &v);
  llm_attention_head (kern, &k, &v, offset, kv->head_dim, q, n_kv, scale, out, scratch);
}

void
llm_kv_cache_truncate (LlmKvCache *kv, guint32 n)
{
  g_return_if_fail (kv != NULL);
  if (n < kv->n) {
    kv->n = n;
    kv->n_reserved = 0;
  } else {
    kv->n_reserved = MIN (kv->n_reserved, n - kv->n);
  }
  /* The blocks are kept for the positions that follow (a speculative
   * verifier cuts and refills every step), except those past the cut that
   * a fork shares: ours would only be copied on the next write. */
  const guint64 end = (guint64) kv->n + kv->n_reserved;
  release_shared_from (kv, blocks_for (kv, end));
}

void
llm_kv_cache_release (LlmKvCache *kv)
{
  g_return_if_fail (kv != NULL);
  kv->n = 0;
  kv->n_reserved = 0;
  release_blocks (kv, 0);
}

LlmKvCache *
llm_kv_cache_fork (const LlmKvCache *kv)
{
  g_return_val_if_fail (kv != NULL, NULL);
  LlmKvCache *f = llm_kv_cache_new_in_pool (kv->pool, kv->n_layers, kv->n_head_kv,
      kv->head_dim, &kv->config, kv->rotated ? &kv->rope : NULL, NULL);
  g_return_val_if_fail (f != NULL, NULL);  /* the parent's config was valid */
  for (guint32 b = 0; b < kv->n_blocks; b++)
    set_block (f, b, llm_kv_block_ref (kv->blocks[b]));
  f->n_blocks = kv->n_blocks;
  f->bytes = kv->bytes;
  f->n = kv->n;
  return f;
}

/* The eviction count is a lifetime statistic of the session, so it
 * survives clearing. */
void
llm_kv_cache_clear (LlmKvCache *kv)
{
  g_return_if_fail (kv != NULL);
  kv->n = 0;
  kv->n_reserved = 0;
  /* Blocks shared with a fork are the fork's to keep: ours would only be
   * copied on the next write. */
  release_shared_from (kv, 0);
}
