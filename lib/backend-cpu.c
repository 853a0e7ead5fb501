/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend: backend.h's table over the kernels in kernels/cpu.
 *
 * Buffers are host memory. The queue is the engine's worker pool: every
 * op runs on it and has finished when it returns, so sync has nothing to
 * wait for. The kernel set (scalar, AVX2, AVX-512) is chosen when the
 * backend is made and kept in one const table, so no op asks the CPU
 * anything. Matrix products split the weight rows over the workers;
 * per-row stages (norms, biases, RoPE, SwiGLU, GELU, residuals, cache
 * stores, an audio tower's convolution rows and pooled pairs) split the
 * rows of a batch and run inline for a decode step,
 * where waking the pool would cost more than the work; a tower's full
 * attention is split by heads and blocks of queries. */
#include "backend.h"
#include "fetch-choice.h"
#include "forward.h"
#include "weight-arena.h"
#include "cpu/attention.h"
#include "cpu/attention-full.h"
#include "cpu/audio.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <unistd.h>

G_DEFINE_QUARK (llm-backend-error-quark, llm_backend_error)

typedef struct {
  LlmBackend parent;
  const LlmCpuKernels *kern;
  int max_threads;
  char *weights_key;
  LlmWeightArena *weights;    /* the prepared layouts */

  /* scratch, reserved for the chunk shape */
  guint8 *xq;                 /* activations converted for the weights */
  gsize xq_bytes;
  float **att_scratch;        /* per thread */
  gsize att_scratch_floats;
  float *keys;                /* attention_full's packed keys, every head */
  gsize keys_floats;
  /* RoPE's angles for the positions of the last rows it turned (see
   * cpu_rope): @rope_n rows of @rope_per floats, for @rope_pos and
   * @rope_key's n_rot and frequencies. */
  float *rope_cs;
  guint32 *rope_pos;
  guint rope_n, rope_cap;
  gsize rope_per, rope_cs_cap;
  LlmRopeParams rope_key;

  /* How decode steps' products fetch their weights (fetch-choice.h):
   * the one-token products that have the choice are timed, @step_bytes
   * read in @step_ns since the last step began; @fetch_off once a step
   * read too little to learn from (weights held in cache). Only a
   * forward of one token (@step_one) is a step: a prompt's forward also
   * has a one-token product, its last row's logits, and that alone
   * (2 MiB, a vocabulary of 2048) once turned the choice off for good
   * with the first prompt, leaving every later step to the kernels'
   * prefetches (246M Q8_0 widened from TinyStories-656K, Zen 5: decode
   * 1.12-1.42x slower than with the hardware's fetching). */
  LlmFetchChoice fetch;
  double step_bytes, step_ns;
  gboolean fetch_off, step_one;
} CpuBackend;

#define CPU(be) ((CpuBackend *) (be))

/* LlmWeight.layout of a matrix in its kernels' prepared layout. */
#define LAYOUT_PREPARED 1

/* Up to this many rows each thread of a product streams its own run of
 * the weights (stream_task) rather than claiming pieces with the others:
 * 2 to 8 streams decoded 3-9% faster so. Measured later with both taking
 * turns in one process (246M Q4_0, two threads, Zen 5; either order):
 * 9, 12 and 16 rows ran 1.04-1.12x faster in runs on AVX-512, where a
 * 16-row forward is about 2.5 decode steps, and within 2% either way
 * with AVX-VNNI (4.5 steps). */
#define STREAM_ROWS 16
#define POOL(q) ((LlmThreadPool *) (q))

/* --- memory ---------------------------------------------------------- */

static void *
cpu_alloc (LlmBackend *be, gsize bytes, GError **error)
{
  (void) be;
  void *p = g_try_malloc (MAX (bytes, 1));
  if (p == NULL)
    g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
        "out of memory for %" G_GSIZE_FORMAT " bytes of forward-pass scratch", bytes);
  return p;
}

static void
cpu_free (LlmBackend *be, void *buf)
{
  (void) be;
  g_free (buf);
}

static void
cpu_copy (LlmBackend *be, LlmBackendQueue *q, void *dst, const void *src, gsize bytes)
{
  (void) be, (void) q;
  memcpy (dst, src, bytes);
}

static void
cpu_sync (LlmBackend *be, LlmBackendQueue *q)
{
  (void) be, (void) q;
}

/* --- weights --------------------------------------------------------- */

/* The mapped pages of [p, p + n) that nothing reads any more leave this
 * process's memory (they are the file's: read again if ever touched), so
 * a prepared model is held once. */
static void
drop_pages (const void *p, gsize n)
{
  const guintptr page = (guintptr) sysconf (_SC_PAGESIZE);
  const guintptr start = ((guintptr) p + page - 1) / page * page;
  const guintptr end = ((guintptr) p + n) / page * page;
  if (end > start)
    madvise ((void *) start, end - start, MADV_DONTNEED);
}

/* Norms and biases become floats once, so no op dequantises them per
 * call. Matrices whose kernels want another layout are packed into it
 * once; the others are used in place from the mapping. */
static gboolean
cpu_prepare_weight (LlmBackend *be, LlmWeight *w, gboolean is_vector, GError **error)
{
  const LlmCpuKernels *kern = CPU (be)->kern;
  if (is_vector) {
    float *f = g_try_new (float, w->n);
    if (f == NULL) {
      g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
          "out of memory for a %u-value norm or bias row", w->n);
      return FALSE;
    }
    llm_dequantize_row (w->type, w->host, w->row_bytes, w->n, 0, f);
    w->data = f;
    w->layout = LLM_TYPE_F32;
    return TRUE;
  }
  w->data = NULL;
  w->layout = 0;
  const gsize bytes = llm_prepared_bytes (kern, w->type, w->rows, w->n);
  if (bytes == 0)
    return TRUE;
  void *packed = llm_weight_arena_alloc (CPU (be)->weights, bytes);
  if (packed == NULL) {
    g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
        "out of memory for the %" G_GSIZE_FORMAT " bytes of a %u x %u matrix's "
        "prepared layout", bytes, w->rows, w->n);
    return FALSE;
  }
  const gsize tile = llm_prepared_tile_rows (kern, w->type);
  llm_prepare_tiles (kern, w->type, w->host, w->row_bytes, w->rows, w->n, 0,
      (w->rows + tile - 1) / tile, packed);
  w->data = packed;
  w->layout = LAYOUT_PREPARED;
  drop_pages (w->host, (gsize) w->rows * w->row_bytes);
  return TRUE;
}

static void
cpu_release_weight (LlmBackend *be, LlmWeight *w)
{
  if (w->layout == LAYOUT_PREPARED)
    llm_weight_arena_release (CPU (be)->weights, w->data);
  else
    g_free (w->data);
  w->data = NULL;
}

static const char *
cpu_weights_key (LlmBackend *be)
{
  return CPU (be)->weights_key;
}

/* --- scratch --------------------------------------------------------- */

static gboolean
ensure_xq (CpuBackend *c, gsize bytes)
{
  if (bytes <= c->xq_bytes)
    return TRUE;
  g_free (c->xq);
  c->xq = g_try_malloc (bytes);
  c->xq_bytes = c->xq ? bytes : 0;
  return c->xq != NULL;
}

/* Queries per attention work item: see attention_task. 32 since the
 * AVX2 and AVX-512 kernels expand a tile of keys once for that many
 * queries (a prefill chunk's rows, a verification's). */
#define ATT_QUERIES 32

static gboolean ensure_att_scratch (CpuBackend *c, gsize need, GError **error);

static gboolean
cpu_reserve (LlmBackend *be, guint n_rows, gsize width, guint32 n_kv,
    const LlmKvCache *kv_like, GError **error)
{
  CpuBackend *c = CPU (be);
  /* F32 is the widest conversion per value; the 64 bytes cover a block
   * type's rounding. */
  const gsize xq = (gsize) n_rows * (width * sizeof (float) + 64);
  if (!ensure_xq (c, xq)) {
    g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
        "out of memory for %" G_GSIZE_FORMAT " bytes of converted activations", xq);
    return FALSE;
  }
  if (kv_like == NULL)
    return TRUE;
  return ensure_att_scratch (c, llm_kv_cache_batch_scratch_floats (kv_like, n_kv,
          ATT_QUERIES), error);
}

/* Per-thread attention scratch of at least @need floats. */
static gboolean
ensure_att_scratch (CpuBackend *c, gsize need, GError **error)
{
  if (need <= c->att_scratch_floats)
    return TRUE;
  for (int i = 0; i < c->max_threads; i++) {
    g_free (c->att_scratch[i]);
    c->att_scratch[i] = g_try_new (float, need);
    if (c->att_scratch[i] == NULL) {
      c->att_scratch_floats = 0;
      g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
          "out of memory for attention scratch (%" G_GSIZE_FORMAT " floats)", need);
      return FALSE;
    }
  }
  c->att_scratch_floats = need;
  return TRUE;
}

/* --- matrix products ------------------------------------------------- */

/* Products of one converted input by up to MAT_MAX weights (Q, K, V;
 * gate and up), in one pool run: a thread done with one weight goes on
 * to the next instead of waiting for the others at a barrier. */
#define MAT_MAX 4
/* Threads whose runs the others can take pieces of. */
#define STEAL_MAX 16
/* Pieces a thread's run is claimed in. */
#define RUN_PIECES 8

/* A thread's claim counters, one cache line to each thread: with two
 * threads' counters in one line, every claim moved the line between the
 * cores, and the counter's load and locked exchange took 43% of the
 * prepared products' time outside their tiles (perf, 9-row forward of
 * 246M Q8_0; the load alone 27%, and 4% once apart). */
typedef struct {
  _Alignas (64) atomic_size_t next[MAT_MAX];
} RunCounters;

typedef struct {
  const LlmCpuKernels *kern;
  const LlmWeight *w[MAT_MAX];
  float *y[MAT_MAX];
  guint n_w;
  const void *xq;
  gsize xq_stride, n_tok;
  /* Batches: rows are handed out @rows_per_item[i] at a time from @next[i]. */
  gsize rows_per_item[MAT_MAX];
  atomic_size_t next[MAT_MAX];
  /* Memory-bound products (see stream_task), for @n_runs threads (0: more
   * than STEAL_MAX): thread j's run holds rows [@run_start, @run_end)[j][i] of
   * weight i, claimed @run_step[j][i] at a time from @run_next[j][i]. */
  RunCounters run_next[STEAL_MAX];
  gsize run_start[STEAL_MAX][MAT_MAX];
  gsize run_end[STEAL_MAX][MAT_MAX];
  gsize run_step[STEAL_MAX][MAT_MAX];
  guint n_runs;
  LlmFetch fetch;             /* one token's, or a few (llm_matmul_prepared) */
} MatTask;

/* Rows [r0, r1) of weight @i by the file's or the prepared layout; the
 * prepared kernel falls back to the file's rows only if its scratch ran
 * out (it then claimed nothing). */
static void
rows_static (const MatTask *t, guint i, gsize r0, gsize r1)
{
  const LlmWeight *w = t->w[i];
  if (w->layout == LAYOUT_PREPARED) {
    if (!llm_matmul_prepared (t->kern, w->type, w->data, w->rows, w->n, r0, r1, t->xq,
            t->xq_stride, t->n_tok, t->y[i], w->rows, NULL, 0, t->fetch))
      llm_matmul (t->kern, w->type, w->host, w->row_bytes, w->n, r0, r1, t->xq,
          t->xq_stride, t->n_tok, t->y[i], w->rows);
  } else if (t->n_tok == 1) {
    llm_matvec (t->kern, w->type, w->host, w->row_bytes, w->n, r0, r1, t->xq, t->y[i] + r0);
  } else {
    llm_matmul (t->kern, w->type, w->host, w->row_bytes, w->n, r0, r1, t->xq, t->xq_stride,
        t->n_tok, t->y[i], w->rows);
  }
}

/* Up to STREAM_ROWS tokens each thread streams one contiguous run of
 * whole tiles (rows, for the file's layout) of the weights taken end to
 * end, which the hardware prefetchers follow best, and a thread done
 * early takes pieces of another's run. Weights without a prepared layout split by
 * rows like this only for one token, as llm_matvec does. */
static gboolean
streams (const MatTask *t)
{
  for (guint i = 0; i < t->n_w; i++)
    if (t->w[i]->layout != LAYOUT_PREPARED && t->n_tok != 1)
      return FALSE;
  return t->n_tok <= STREAM_ROWS;
}

static gsize
unit_rows (const MatTask *t, guint i)
{
  const LlmWeight *w = t->w[i];
  return w->layout == LAYOUT_PREPARED ? llm_prepared_tile_rows (t->kern, w->type) : 1;
}

/* Units [u0, u1) of the products taken end to end. */
static void
stream_units (const MatTask *t, gsize u0, gsize u1)
{
  gsize base = 0;
  for (guint i = 0; i < t->n_w && u0 < u1; i++) {
    const gsize unit = unit_rows (t, i);
    const gsize units = (t->w[i]->rows + unit - 1) / unit;
    if (u0 < base + units) {
      const gsize a = u0 - base, b = MIN (u1 - base, units);
      rows_static (t, i, a * unit, MIN (b * unit, t->w[i]->rows));
      u0 = base + b;
    }
    base += units;
  }
}

static gsize
total_units (const MatTask *t)
{
  gsize total = 0;
  for (guint i = 0; i < t->n_w; i++)
    total += (t->w[i]->rows + unit_rows (t, i) - 1) / unit_rows (t, i);
  return total;
}

/* Rows of weight @i from thread @j's run, claimed with the others that
 * reach it: a prepared kernel claims inside one call, so what it prepares
 * per call (the activations' side) is done once per run and thread. */
static void
run_rows (MatTask *t, guint j, guint i)
{
  const LlmWeight *w = t->w[i];
  atomic_size_t *next = &t->run_next[j].next[i];
  const gsize end = t->run_end[j][i], step = t->run_step[j][i];
  /* Done already (another thread's run, mostly): nothing to prepare. */
  if (atomic_load_explicit (next, memory_order_relaxed) >= end)
    return;
  if (w->layout == LAYOUT_PREPARED
      && llm_matmul_prepared (t->kern, w->type, w->data, w->rows, w->n, t->run_start[j][i],
          end, t->xq, t->xq_stride, t->n_tok, t->y[i], w->rows, next, step, t->fetch))
    return;
  for (;;) {
    const gsize a = atomic_fetch_add_explicit (next, step, memory_order_relaxed);
    if (a >= end)
      break;
    rows_static (t, i, a, MIN (a + step, end));
  }
}

/* Each thread streams its own contiguous run of the units, which the
 * prefetchers follow best, claiming it a piece at a time; a thread done
 * with its run then takes the pieces another has not reached. A thread
 * that started late or was slowed (by the other core's memory traffic,
 * by the system) no longer holds the step up at the barrier: on one
 * decode token the waiting was a tenth of the step. Where a step's
 * memory stands idle (the serial ops and attention between products), a
 * worker done with its share asking for the start of its run of the next
 * product (learnt from the step before) cost more than it saved: 246M
 * Q4_0 decode on Zen 5, 64 KiB ahead 0.91-0.96x, 256 KiB 0.85-0.90x,
 * 1 MiB 0.6x (it was still asking when the next product began). The
 * restarts of the streams at each product cost the small products: plain
 * reads of 246M's 65 products in turn, a pool run each, were as fast as
 * each thread reading its half of the whole at once, but in decoding
 * (TSC around each run) the 0.74 MB Q, K, V and O products read at 66
 * GB/s against 77-78 for gate and up (3.2 MB) and the head, and a tile's
 * reading cut by a barrier every 0.2 MB lost 27-30% (every 1.6 MB, 10%). */
static void
stream_task (MatTask *t, int ith, int nth)
{
  /* Runs as cpu_matmul laid them out, for as many threads. */
  if ((guint) nth != t->n_runs) {
    gsize u0, u1;
    llm_split_range (total_units (t), ith, nth, &u0, &u1);
    stream_units (t, u0, u1);
    return;
  }
  for (int k = 0; k < nth; k++) {
    const guint j = (guint) ((ith + k) % nth);
    for (guint i = 0; i < t->n_w; i++)
      run_rows (t, j, i);
  }
}

/* Lays out stream_task's runs: thread j's share of the units taken end to
 * end, cut at the weights, each in RUN_PIECES pieces of whole 16 rows
 * (the prepared kernels' claims). */
static void
plan_runs (MatTask *t, int nth)
{
  t->n_runs = nth <= STEAL_MAX ? (guint) nth : 0;
  const gsize total = total_units (t);
  for (guint j = 0; j < t->n_runs; j++) {
    gsize u0, u1;
    llm_split_range (total, (int) j, nth, &u0, &u1);
    gsize base = 0;
    for (guint i = 0; i < t->n_w; i++) {
      const gsize unit = unit_rows (t, i), rows = t->w[i]->rows;
      const gsize units = (rows + unit - 1) / unit;
      const gsize a = CLAMP (u0, base, base + units) - base;
      const gsize b = CLAMP (u1, base, base + units) - base;
      const gsize r0 = a * unit, r1 = MIN (b * unit, rows);
      atomic_init (&t->run_next[j].next[i], r0);
      t->run_start[j][i] = r0;
      t->run_end[j][i] = r1 > r0 ? r1 : r0;
      const gsize piece = (r1 > r0 ? r1 - r0 : 0) / RUN_PIECES + 1;
      t->run_step[j][i] = (piece + 15) / 16 * 16;
      base += units;
    }
  }
}

static void
matmul_task (void *data, int ith, int nth)
{
  MatTask *t = data;
  if (streams (t)) {
    stream_task (t, ith, nth);
    return;
  }
  /* A batch is compute-bound: a thread that finishes early, or was
   * descheduled on a busy machine, leaves its remaining rows to the
   * others instead of holding the whole product up. */
  for (guint i = 0; i < t->n_w; i++) {
    const LlmWeight *w = t->w[i];
    if (w->layout == LAYOUT_PREPARED &&
        llm_matmul_prepared (t->kern, w->type, w->data, w->rows, w->n, 0, w->rows, t->xq,
            t->xq_stride, t->n_tok, t->y[i], w->rows, &t->next[i], t->rows_per_item[i],
            t->fetch))
      continue;
    llm_matmul_shared (t->kern, w->type, w->host, w->row_bytes, w->n, 0, w->rows, t->xq,
        t->xq_stride, t->n_tok, t->y[i], w->rows, &t->next[i], t->rows_per_item[i]);
  }
}

typedef struct {
  const LlmCpuKernels *kern;
  guint32 wtype;
  const float *x;
  gsize n, n_tok, xq_bytes;
  guint8 *xq;
} ConvertTask;

static void
convert_task (void *data, int ith, int nth)
{
  const ConvertTask *c = data;
  gsize t0, t1;
  llm_split_range (c->n_tok, ith, nth, &t0, &t1);
  for (gsize t = t0; t < t1; t++)
    llm_matmul_convert (c->kern, c->wtype, c->x + t * c->n, c->n, c->xq + t * c->xq_bytes);
}

/* The weight bytes @t reads if every one of its weights can fetch either
 * way (llm_prepared_fetch_choice), else 0: what a step learns from. */
static gsize
fetch_choice_bytes (const CpuBackend *c, const MatTask *t)
{
  gsize bytes = 0;
  for (guint i = 0; i < t->n_w; i++) {
    const LlmWeight *w = t->w[i];
    if (w->layout != LAYOUT_PREPARED || !llm_prepared_fetch_choice (c->kern, w->type))
      return 0;
    bytes += llm_prepared_bytes (c->kern, w->type, w->rows, w->n);
  }
  return bytes;
}

/* A step that read less than this from the products with the choice
 * (fetch_choice_bytes) has its weights in cache, where the way of
 * fetching hardly matters: it stops the timing for good. */
#define FETCH_MIN_BYTES (16u << 20)

/* A new forward of @n_tok token rows begins: the one-token products timed
 * since the last one are a step's observation. */
static void
fetch_step_begins (CpuBackend *c, guint n_tok)
{
  c->step_one = n_tok == 1;
  if (c->step_bytes > 0) {
    if (c->step_bytes < FETCH_MIN_BYTES) {
      c->fetch_off = TRUE;
      llm_fetch_choice_init (&c->fetch);
    } else {
      llm_fetch_choice_observe (&c->fetch, c->step_bytes, c->step_ns);
    }
  }
  c->step_bytes = c->step_ns = 0;
}

/* The products that read one input share its conversion when their
 * weights take the same one (Q, K, V of one type; gate and up), and then
 * one pool run. */
static void
cpu_matmul (LlmBackend *be, LlmBackendQueue *q, const float *x, guint n_tok,
    const LlmWeight *const *ws, float *const *ys, guint n_w)
{
  CpuBackend *c = CPU (be);
  LlmThreadPool *pool = POOL (q);
  /* About two items per thread, whole multiples of 16 rows (the largest
   * row tile, Q4_0's); in a batch whole groups of four tiles, the packed
   * kernels' unit: with two threads a 768-row product was claimed 48 rows
   * at a time, a lone tile left in each claim (measured, 1024 tokens of
   * F16, 768 x 768: 5.2 ms in 48-row claims, 4.9 in 64). Claims shrink
   * near the end (claim.h), so few and large ones still end together, and
   * each claim starts on rows nothing fetched ahead: a 16-token layer of
   * 246M's shapes in Q4_0 (AVX-512, two threads, old and new alternating
   * in one process, 30 rounds) ran 4-8% faster with 4 items a thread than
   * with 8, and 6-13% faster with 2. */
  const gsize items = 2 * (gsize) llm_threadpool_n_threads (pool);
  const gsize unit = n_tok > STREAM_ROWS ? 64 : 16;

  for (guint i = 0; i < n_w;) {
    const LlmWeight *w = ws[i];
    const gsize xq_stride = llm_matmul_act_bytes (w->type, w->n);
    const guint32 dot = llm_matmul_dot_type (w->type);
    g_return_if_fail (xq_stride * n_tok <= c->xq_bytes);  /* see cpu_reserve */
    ConvertTask ct = { c->kern, w->type, x, w->n, n_tok, xq_stride, c->xq };
    if (n_tok < 4)
      convert_task (&ct, 0, 1);
    else
      llm_threadpool_run (pool, convert_task, &ct);

    MatTask task = {
      .kern = c->kern, .xq = c->xq, .xq_stride = xq_stride, .n_tok = n_tok,
      /* A probe is a step's alone: a forward of more rows takes the way
       * the steps take. */
      .fetch = n_tok == 1 ? c->fetch.next : c->fetch.mode,
    };
    for (; i < n_w && task.n_w < MAT_MAX && ws[i]->n == w->n &&
        llm_matmul_dot_type (ws[i]->type) == dot; i++) {
      const guint j = task.n_w++;
      task.w[j] = ws[i];
      task.y[j] = ys[i];
      task.rows_per_item[j] = ((ws[i]->rows + items - 1) / items + unit - 1) / unit * unit;
      atomic_init (&task.next[j], 0);
    }
    if (streams (&task))
      plan_runs (&task, llm_threadpool_n_threads (pool));
    const gsize timed = n_tok == 1 && c->step_one && !c->fetch_off ?
        fetch_choice_bytes (c, &task) : 0;
    const gint64 t0 = timed > 0 ? g_get_monotonic_time () : 0;
    llm_threadpool_run (pool, matmul_task, &task);
    if (timed > 0) {
      c->step_ns += 1e3 * (double) (g_get_monotonic_time () - t0);
      c->step_bytes += (double) timed;
    }
  }
}

/* --- per-row stages -------------------------------------------------- */

/* Below this many rows (a decode step) a stage runs inline. */
#define PER_ROW_MIN 4

typedef void (*RowFn) (const void *args, guint t0, guint t1);

typedef struct {
  RowFn fn;
  const void *args;
  guint n;
} RowTask;

static void
row_task (void *data, int ith, int nth)
{
  const RowTask *t = data;
  gsize t0, t1;
  llm_split_range (t->n, ith, nth, &t0, &t1);
  if (t0 < t1)
    t->fn (t->args, t0, t1);
}

static void
per_row (LlmBackendQueue *q, guint n, RowFn fn, const void *args)
{
  if (n < PER_ROW_MIN) {
    fn (args, 0, n);
    return;
  }
  RowTask task = { fn, args, n };
  llm_threadpool_run (POOL (q), row_task, &task);
}

typedef struct {
  const float *x, *w;
  float *out;
  gsize width;
  float eps;
} NormArgs;

static void
rmsnorm_rows (const void *args, guint t0, guint t1)
{
  const NormArgs *a = args;
  llm_rmsnorm_rows (a->out + t0 * a->width, a->x + t0 * a->width, a->w, a->width, t1 - t0,
      a->eps);
}

static void
cpu_rmsnorm (LlmBackend *be, LlmBackendQueue *q, const float *x, const LlmWeight *w,
    float *out, guint n, gsize width, float eps)
{
  (void) be;
  const NormArgs a = { x, w ? w->data : NULL, out, width, eps };
  per_row (q, n, rmsnorm_rows, &a);
}

typedef struct {
  const LlmCpuKernels *kern;
  float *y;
  const float *b;
  gsize width;
} BiasArgs;

static void
bias_rows (const void *args, guint t0, guint t1)
{
  const BiasArgs *a = args;
  for (guint t = t0; t < t1; t++)
    llm_cpu_add (a->kern, a->y + t * a->width, a->y + t * a->width, a->b, a->width);
}

static void
cpu_add_bias (LlmBackend *be, LlmBackendQueue *q, float *y, const LlmWeight *b, guint n)
{
  const BiasArgs a = { CPU (be)->kern, y, b->data, b->n };
  per_row (q, n, bias_rows, &a);
}

typedef struct {
  const LlmCpuKernels *kern;
  float *x;
  const float *y;
  gsize width;
} AddArgs;

static void
add_rows (const void *args, guint t0, guint t1)
{
  const AddArgs *a = args;
  for (guint t = t0; t < t1; t++)
    llm_cpu_add (a->kern, a->x + t * a->width, a->x + t * a->width, a->y + t * a->width,
        a->width);
}

static void
cpu_add (LlmBackend *be, LlmBackendQueue *q, float *x, const float *y, guint n, gsize width)
{
  const AddArgs a = { CPU (be)->kern, x, y, width };
  per_row (q, n, add_rows, &a);
}

typedef struct {
  const LlmCpuKernels *kern;
  float *gate;
  const float *up;
  gsize width;
} SwigluArgs;

static void
swiglu_rows (const void *args, guint t0, guint t1)
{
  const SwigluArgs *a = args;
  for (guint t = t0; t < t1; t++)
    llm_cpu_swiglu (a->kern, a->gate + t * a->width, a->gate + t * a->width,
        a->up + t * a->width, a->width);
}

static void
cpu_swiglu (LlmBackend *be, LlmBackendQueue *q, float *gate, const float *up, guint n,
    gsize width)
{
  const SwigluArgs a = { CPU (be)->kern, gate, up, width };
  per_row (q, n, swiglu_rows, &a);
}

typedef struct {
  float *x;
  guint n_heads, head_dim;
  const guint32 *pos;
  const LlmRopeParams *rope;
  /* Row t's angles at cs + t * per; with @fill, computed here first. */
  float *cs;
  gsize per;
  gboolean fill;
} RopeArgs;

static void
rope_rows (const void *args, guint t0, guint t1)
{
  const RopeArgs *a = args;
  const LlmRopeParams *r = a->rope;
  const gsize width = (gsize) a->n_heads * a->head_dim;
  for (guint t = t0; t < t1; t++) {
    float *x = a->x + t * width;
    if (a->cs == NULL) {
      llm_rope (x, a->n_heads, a->head_dim, r->n_rot, a->pos[t], r->freq_base, r->freq_scale,
          r->neox);
      continue;
    }
    float *cs = a->cs + t * a->per;
    if (a->fill)
      llm_rope_angles (a->head_dim, r->n_rot, a->pos[t], r->freq_base, r->freq_scale, cs);
    llm_rope_turn (x, a->n_heads, a->head_dim, r->n_rot, cs, r->neox);
  }
}

/* Every layer turns the Q and K rows of one chunk by the same angles, so
 * they are computed for the first and looked up by the rest: in a decode
 * step, cos and sin were 1% of the time; in a 16-row step, 2%. With
 * @a->fill the rows compute them as they go; with no memory for them,
 * a->cs stays NULL and every call computes its own, as llm_rope does. */
static void
rope_table (CpuBackend *c, guint n, RopeArgs *a)
{
  const LlmRopeParams *r = a->rope;
  a->per = llm_rope_angles_floats (a->head_dim, r->n_rot);
  if (c->rope_n == n && c->rope_per == a->per && c->rope_key.n_rot == r->n_rot
      && c->rope_key.freq_base == r->freq_base && c->rope_key.freq_scale == r->freq_scale
      && memcmp (c->rope_pos, a->pos, n * sizeof *a->pos) == 0) {
    a->cs = c->rope_cs;
    return;
  }
  c->rope_n = 0;
  if (n > c->rope_cap) {
    g_free (c->rope_pos);
    c->rope_pos = g_try_new (guint32, n);
    c->rope_cap = c->rope_pos != NULL ? n : 0;
  }
  if (n * a->per > c->rope_cs_cap) {
    g_free (c->rope_cs);
    c->rope_cs = g_try_new (float, n * a->per);
    c->rope_cs_cap = c->rope_cs != NULL ? n * a->per : 0;
  }
  if (c->rope_cap < n || c->rope_cs_cap < n * a->per)
    return;
  memcpy (c->rope_pos, a->pos, n * sizeof *a->pos);
  c->rope_n = n;
  c->rope_per = a->per;
  c->rope_key = *r;
  a->cs = c->rope_cs;
  a->fill = TRUE;
}

static void
cpu_rope (LlmBackend *be, LlmBackendQueue *q, float *x, guint n, guint n_heads,
    guint head_dim, const guint32 *pos, const LlmRopeParams *rope)
{
  RopeArgs a = { x, n_heads, head_dim, pos, rope, NULL, 0, FALSE };
  rope_table (CPU (be), n, &a);
  per_row (q, n, rope_rows, &a);
}

typedef struct {
  const LlmCpuKernels *kern;
  guint layer;
  const LlmFwdPiece *pieces;
  const float *k, *v;
  gsize kv_dim;
} StoreArgs;

/* Rows of different slots: no locking needed. */
static void
store_rows (const void *args, guint t0, guint t1)
{
  const StoreArgs *a = args;
  guint p = 0;
  for (guint t = t0; t < t1; t++) {
    while (t >= a->pieces[p].row0 + a->pieces[p].n)
      p++;
    const LlmFwdPiece *piece = &a->pieces[p];
    llm_kv_cache_write (piece->kv, a->kern, a->layer, piece->slot0 + (t - piece->row0),
        a->k + t * a->kv_dim, a->v + t * a->kv_dim);
  }
}

static void
cpu_kv_store (LlmBackend *be, LlmBackendQueue *q, guint layer, const LlmFwdPiece *pieces,
    guint n_pieces, const float *k, const float *v, gsize kv_dim)
{
  const LlmFwdPiece *last = &pieces[n_pieces - 1];
  const StoreArgs a = { CPU (be)->kern, layer, pieces, k, v, kv_dim };
  per_row (q, last->row0 + last->n, store_rows, &a);
}

/* --- attention ------------------------------------------------------- */

/* Work items: up to ATT_QUERIES queries that read the same KV head, so
 * the kernel converts each cache row once for all of them: the query
 * heads of a GQA group at one row, or (few heads per group) those heads at
 * several consecutive rows. Items are handed out from a shared counter,
 * so a thread that finishes early, or was descheduled, evens the load
 * out: one KV head after another (the threads then share its rows in
 * cache), and within a head the longest causal rows first. */
typedef struct {
  guint n_tok_blocks;
  guint first_item;
} AttPiece;

typedef struct {
  CpuBackend *c;
  guint layer;
  const LlmAttnShape *shape;
  const LlmFwdPiece *pieces;
  guint n_pieces;
  const float *query;
  float *out;
  guint group;            /* query heads per KV head */
  guint heads_per_item;   /* of one group */
  guint subs;             /* items per group and row block */
  guint toks_per_item;
  AttPiece *items;
  guint n_items;
  atomic_uint next;
} AttTask;

/* The piece item @i belongs to: the last whose first item is <= i. */
static guint
att_piece_of (const AttTask *a, guint i)
{
  guint lo = 0, hi = a->n_pieces;
  while (hi - lo > 1) {
    const guint mid = (lo + hi) / 2;
    if (a->items[mid].first_item <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static void
attention_task (void *data, int ith, int nth)
{
  AttTask *a = data;
  (void) nth;
  const guint head_dim = a->shape->head_dim;
  const gsize q_dim = (gsize) a->shape->n_head * head_dim;
  float *scratch = a->c->att_scratch[ith];

  for (;;) {
    const guint item = atomic_fetch_add_explicit (&a->next, 1, memory_order_relaxed);
    if (item >= a->n_items)
      break;
    const guint pi = att_piece_of (a, item);
    const LlmFwdPiece *piece = &a->pieces[pi];
    const guint n_tok_blocks = a->items[pi].n_tok_blocks;
    const guint i = item - a->items[pi].first_item;
    const guint kvh = i / (n_tok_blocks * a->subs);
    const guint tb = n_tok_blocks - 1 - i / a->subs % n_tok_blocks;
    const guint sub = i % a->subs;
    const guint t0 = tb * a->toks_per_item;
    const guint t1 = MIN (t0 + a->toks_per_item, piece->n);
    const guint h0 = kvh * a->group + sub * a->heads_per_item;
    const guint h1 = MIN (h0 + a->heads_per_item, (kvh + 1) * a->group);

    LlmAttnQuery queries[ATT_QUERIES];
    guint n_q = 0;
    for (guint t = t0; t < t1; t++) {
      for (guint h = h0; h < h1; h++) {
        const gsize at = (piece->row0 + t) * q_dim + (gsize) h * head_dim;
        /* Causal: row t sees its sequence's cache up to and including itself. */
        queries[n_q++] = (LlmAttnQuery) { a->query + at, a->out + at, piece->slot0 + t + 1 };
      }
    }
    llm_kv_cache_attend_batch (piece->kv, a->c->kern, a->layer, kvh, queries, n_q,
        a->shape->scale, scratch);
  }
}

static void
cpu_attention (LlmBackend *be, LlmBackendQueue *q, guint layer, const LlmFwdPiece *pieces,
    guint n_pieces, const LlmAttnShape *shape, const float *query, float *out)
{
  AttPiece items[LLM_FORWARD_CHUNK];
  AttTask a = {
    .c = CPU (be), .layer = layer, .shape = shape, .pieces = pieces,
    .n_pieces = n_pieces, .query = query, .out = out,
    .group = shape->n_head / shape->n_head_kv, .items = items,
  };
  g_return_if_fail (n_pieces <= LLM_FORWARD_CHUNK);
  a.heads_per_item = MIN (a.group, ATT_QUERIES);
  a.subs = (a.group + a.heads_per_item - 1) / a.heads_per_item;
  a.toks_per_item = MAX (1u, ATT_QUERIES / a.group);
  for (guint p = 0; p < n_pieces; p++) {
    items[p].n_tok_blocks = (pieces[p].n + a.toks_per_item - 1) / a.toks_per_item;
    items[p].first_item = a.n_items;
    a.n_items += items[p].n_tok_blocks * shape->n_head_kv * a.subs;
  }
  atomic_init (&a.next, 0);
  llm_threadpool_run (POOL (q), attention_task, &a);
}

/* --- a vision tower's ops ------------------------------------------- */

typedef struct {
  const float *x, *w, *b;
  float *out;
  gsize width;
  float eps;
} LayerNormArgs;

static void
layernorm_rows (const void *args, guint t0, guint t1)
{
  const LayerNormArgs *a = args;
  for (guint t = t0; t < t1; t++)
    llm_layernorm (a->out + t * a->width, a->x + t * a->width, a->w, a->b, a->width, a->eps);
}

static void
cpu_layernorm (LlmBackend *be, LlmBackendQueue *q, const float *x, const LlmWeight *w,
    const LlmWeight *b, float *out, guint n, gsize width, float eps)
{
  (void) be;
  const LayerNormArgs a = { x, w ? w->data : NULL, b ? b->data : NULL, out, width, eps };
  per_row (q, n, layernorm_rows, &a);
}

typedef struct {
  const LlmCpuKernels *kern;
  float *x;
  gsize width;
  LlmGelu kind;
} GeluArgs;

/* Rows t0..t1 are one run of values. */
static void
gelu_rows (const void *args, guint t0, guint t1)
{
  const GeluArgs *a = args;
  float *x = a->x + t0 * a->width;
  const gsize n = (t1 - t0) * a->width;
  switch (a->kind) {
    case LLM_GELU_QUICK:
      llm_cpu_gelu_quick (a->kern, x, x, n);
      break;
    case LLM_GELU_ERF:
      llm_cpu_gelu_erf (a->kern, x, x, n);
      break;
    default:
      llm_cpu_gelu (a->kern, x, x, n);
      break;
  }
}

static void
cpu_gelu (LlmBackend *be, LlmBackendQueue *q, float *x, guint n, gsize width, LlmGelu kind)
{
  const GeluArgs a = { CPU (be)->kern, x, width, kind };
  per_row (q, n, gelu_rows, &a);
}

typedef struct {
  const float *x;
  const LlmConv1dShape *shape;
  float *rows;
} ConvRowsArgs;

static void
conv1d_rows_rows (const void *args, guint t0, guint t1)
{
  const ConvRowsArgs *a = args;
  const LlmConv1dShape *s = a->shape;
  llm_cpu_conv1d_rows_range (a->x, s->n_ch, s->n_len, s->t_stride, s->c_stride, s->taps,
      s->stride, s->pad, t0, t1, a->rows);
}

static void
cpu_conv1d_rows (LlmBackend *be, LlmBackendQueue *q, const float *x,
    const LlmConv1dShape *shape, guint n_out, float *rows)
{
  (void) be;
  const ConvRowsArgs a = { x, shape, rows };
  per_row (q, n_out, conv1d_rows_rows, &a);
}

typedef struct {
  const float *x;
  float *y;
  gsize width;
} PoolArgs;

/* Output rows t0..t1: rows 2 t0 .. 2 t1 of the input. */
static void
pool_rows (const void *args, guint t0, guint t1)
{
  const PoolArgs *a = args;
  llm_cpu_avg_pool_pairs (a->x + 2 * (gsize) t0 * a->width, a->y + (gsize) t0 * a->width,
      2 * (gsize) (t1 - t0), a->width);
}

static void
cpu_avg_pool_pairs (LlmBackend *be, LlmBackendQueue *q, const float *x, float *y,
    guint n_rows, gsize width)
{
  (void) be;
  const PoolArgs a = { x, y, width };
  per_row (q, n_rows / 2, pool_rows, &a);
}

static gboolean
cpu_reserve_attention_full (LlmBackend *be, guint n_rows, const LlmAttnShape *shape,
    GError **error)
{
  CpuBackend *c = CPU (be);
  const gsize keys = shape->n_head * llm_attention_full_keys_floats (n_rows, shape->head_dim);
  if (keys > c->keys_floats) {
    g_free (c->keys);
    c->keys_floats = 0;
    c->keys = g_try_new (float, keys);
    if (c->keys == NULL) {
      g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_MEMORY,
          "out of memory for %" G_GSIZE_FORMAT " floats of packed attention keys", keys);
      return FALSE;
    }
    c->keys_floats = keys;
  }
  return ensure_att_scratch (c, llm_attention_full_scratch_floats (n_rows), error);
}

/* Queries per work item of attention_full: a multiple of the kernel's six,
 * and enough items (heads x blocks: 12 x 22 for SigLIP's 1024 patches)
 * that a descheduled thread's share is taken over by the others. */
#define FULL_QUERIES 48

typedef struct {
  CpuBackend *c;
  const LlmAttnShape *shape;
  const float *query, *key, *value;
  float *out;
  guint n, blocks;
  atomic_uint next;
} FullTask;

static void
pack_keys_task (void *data, int ith, int nth)
{
  FullTask *a = data;
  const gsize hd = a->shape->head_dim, e = (gsize) a->shape->n_head * hd;
  const gsize per_head = llm_attention_full_keys_floats (a->n, hd);
  gsize h0, h1;
  llm_split_range (a->shape->n_head, ith, nth, &h0, &h1);
  for (gsize h = h0; h < h1; h++)
    llm_attention_full_pack_keys (a->key + h * hd, e, a->n, hd, a->c->keys + h * per_head);
}

/* Items go head after head, so the threads read one head's keys and
 * values at a time. */
static void
attention_full_task (void *data, int ith, int nth)
{
  FullTask *a = data;
  (void) nth;
  const gsize hd = a->shape->head_dim, e = (gsize) a->shape->n_head * hd;
  const gsize per_head = llm_attention_full_keys_floats (a->n, hd);
  for (;;) {
    const guint item = atomic_fetch_add_explicit (&a->next, 1, memory_order_relaxed);
    if (item >= a->shape->n_head * a->blocks)
      break;
    const gsize h = item / a->blocks, q0 = (gsize) (item % a->blocks) * FULL_QUERIES;
    const gsize n_q = MIN ((gsize) FULL_QUERIES, a->n - q0);
    llm_attention_full (a->c->kern, a->c->keys + h * per_head, a->value + h * hd, e, a->n, hd,
        a->query + q0 * e + h * hd, e, n_q, a->shape->scale, a->out + q0 * e + h * hd, e,
        a->c->att_scratch[ith]);
  }
}

static void
cpu_attention_full (LlmBackend *be, LlmBackendQueue *q, const LlmAttnShape *shape,
    const float *query, const float *key, const float *value, guint n, float *out)
{
  CpuBackend *c = CPU (be);
  g_return_if_fail (shape->n_head_kv == shape->n_head);
  /* See reserve_attention_full. */
  g_return_if_fail (shape->n_head * llm_attention_full_keys_floats (n, shape->head_dim)
      <= c->keys_floats && llm_attention_full_scratch_floats (n) <= c->att_scratch_floats);
  FullTask a = {
    .c = c, .shape = shape, .query = query, .key = key, .value = value, .out = out, .n = n,
    .blocks = (n + FULL_QUERIES - 1) / FULL_QUERIES,
  };
  atomic_init (&a.next, 0);
  llm_threadpool_run (POOL (q), pack_keys_task, &a);
  llm_threadpool_run (POOL (q), attention_full_task, &a);
}

/* --- the rest -------------------------------------------------------- */

static void
cpu_embed (LlmBackend *be, LlmBackendQueue *q, const LlmWeight *table, const gint32 *ids,
    guint n, float *x)
{
  (void) q;
  fetch_step_begins (CPU (be), n);
  for (guint t = 0; t < n; t++) {
    float *row = x + (gsize) t * table->n;
    if (table->layout == LAYOUT_PREPARED &&
        llm_dequantize_prepared_row (CPU (be)->kern, table->type, table->data, table->n, ids[t],
            row))
      continue;
    llm_dequantize_row (table->type, table->host, table->row_bytes, table->n, ids[t], row);
  }
}

static void
cpu_destroy (LlmBackend *be)
{
  CpuBackend *c = CPU (be);
  for (int i = 0; i < c->max_threads; i++)
    g_free (c->att_scratch[i]);
  g_free (c->att_scratch);
  g_free (c->keys);
  g_free (c->xq);
  g_free (c->rope_cs);
  g_free (c->rope_pos);
  g_free (c->weights_key);
  llm_weight_arena_free (c->weights);
  g_free (c);
}

static const LlmBackendOps cpu_ops = {
  .name = "cpu",
  .alloc = cpu_alloc,
  .free = cpu_free,
  .upload = cpu_copy,
  .download = cpu_copy,
  .copy = cpu_copy,
  .sync = cpu_sync,
  .prepare_weight = cpu_prepare_weight,
  .release_weight = cpu_release_weight,
  .weights_key = cpu_weights_key,
  .reserve = cpu_reserve,
  .embed = cpu_embed,
  .matmul = cpu_matmul,
  .rmsnorm = cpu_rmsnorm,
  .add_bias = cpu_add_bias,
  .add = cpu_add,
  .swiglu = cpu_swiglu,
  .rope = cpu_rope,
  .kv_store = cpu_kv_store,
  .attention = cpu_attention,
  .layernorm = cpu_layernorm,
  .gelu = cpu_gelu,
  .reserve_attention_full = cpu_reserve_attention_full,
  .attention_full = cpu_attention_full,
  .conv1d_rows = cpu_conv1d_rows,
  .avg_pool_pairs = cpu_avg_pool_pairs,
  .destroy = cpu_destroy,
};

static const LlmCpuKernels *
choose_kernels (LlmCpuKernelChoice choice, GError **error)
{
  static const struct {
    LlmCpuKernelChoice choice;
    LlmCpuIsa isa;
  } map[] = {
    { LLM_CPU_KERNELS_SCALAR, LLM_CPU_ISA_SCALAR },
    { LLM_CPU_KERNELS_AVX2, LLM_CPU_ISA_AVX2 },
    { LLM_CPU_KERNELS_AVX512, LLM_CPU_ISA_AVX512 },
  };
  if (choice == LLM_CPU_KERNELS_BEST)
    return llm_cpu_kernels_best ();
  for (gsize i = 0; i < G_N_ELEMENTS (map); i++) {
    if (map[i].choice != choice)
      continue;
    const LlmCpuKernels *k = llm_cpu_kernels (map[i].isa);
    if (k == NULL)
      g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_UNSUPPORTED,
          "this CPU or build has no %s kernels (it runs: %s)", llm_cpu_isa_name (map[i].isa),
          llm_cpu_isa_name (llm_cpu_isa_best ()));
    return k;
  }
  g_set_error (error, LLM_BACKEND_ERROR, LLM_BACKEND_ERROR_UNSUPPORTED,
      "unknown CPU kernel choice %d", (int) choice);
  return NULL;
}

LlmBackend *
llm_backend_cpu_new (LlmCpuKernelChoice kernels, int max_threads, GError **error)
{
  const LlmCpuKernels *kern = choose_kernels (kernels, error);
  if (kern == NULL)
    return NULL;
  CpuBackend *c = g_new0 (CpuBackend, 1);
  c->parent.ops = &cpu_ops;
  c->parent.ref_count = 1;
  c->kern = kern;
  c->max_threads = MAX (1, max_threads);
  c->att_scratch = g_new0 (float *, c->max_threads);
  c->weights_key = g_strdup_printf ("cpu/%s", llm_cpu_kernels_name (kern));
  c->weights = llm_weight_arena_new ();
  llm_fetch_choice_init (&c->fetch);
  return &c->parent;
}

const char *
llm_backend_cpu_kernels_name (LlmBackend *be)
{
  g_return_val_if_fail (be != NULL && be->ops == &cpu_ops, "scalar");
  return llm_cpu_kernels_name (CPU (be)->kern);
}

const LlmFetchChoice *
llm_backend_cpu_fetch (LlmBackend *be)
{
  g_return_val_if_fail (be != NULL, NULL);
  return be->ops == &cpu_ops ? &CPU (be)->fetch : NULL;
}

LlmBackendQueue *
llm_backend_cpu_queue (gpointer thread_pool)
{
  return thread_pool;
}
