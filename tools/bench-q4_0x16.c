/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-q4_0x16: Q4_0 or (--type q8_0) Q8_0 products over weights packed
 * once (cpu/q4_0x16.h, cpu/q8_0x16.h) against the file layout's kernels
 * (llm_matvec for one token, llm_matmul_shared for more: what a model
 * without the prepared layout runs), on the matrices of a 246M model's
 * feed-forward layers (5632 x 2048 and 2048 x 5632), several layers so the
 * set is far larger than the last-level cache and every pass reads its
 * weights from memory, as a decode step does. Threads share rows as
 * lib/backend-cpu.c has them share.
 *
 * Per thread count and token count: ns per product (median of samples,
 * old and new interleaved so drift on a shared machine hits both), token
 * rows per second, the packed kernel's time over its own one-token time,
 * and at one token the GB/s of weights read, next to the machine's read
 * bandwidth (the roofline of decoding).
 *
 * --in-cache instead times one small matrix (128 x 2048) that stays in L2
 * with its activations, and prints cycles per token and 16-row block (at
 * the core clock a chain of dependent adds measures): what the kernels
 * cost when memory is not what bounds them. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include <glib.h>

#include "bench.h"
#include "ggml-type.h"
#include "cpu/fp16.h"
#include "cpu/matmul.h"
#include "cpu/q4_0x16.h"
#include "cpu/q8_0x16.h"
#include "cpu/quantize.h"
#include "cpu/threadpool.h"

/* A weight type with a packed layout. */
typedef struct {
  const char *name;
  uint32_t type;
  size_t block_bytes;        /* of the file's 32-value block */
  size_t (*bytes) (size_t rows, size_t n);
  void (*pack) (const void *w, size_t row_bytes, size_t rows, size_t n, size_t tile0,
      size_t tile1, void *out);
  LlmQ4x16Fn ref;
  LlmQ4x16Fn (*avx2) (void);
  LlmQ4x16Fn (*avx512) (void);
} Kind;

static const Kind kinds[] = {
  { "q4_0", LLM_TYPE_Q4_0, sizeof (LlmBlockQ4_0), llm_q4_0x16_bytes, llm_q4_0x16_pack,
    llm_q4_0x16_ref, llm_avx2_q4_0x16_fn, llm_avx512_q4_0x16_fn },
  { "q8_0", LLM_TYPE_Q8_0, sizeof (LlmBlockQ8_0), llm_q8_0x16_bytes, llm_q8_0x16_pack,
    llm_q8_0x16_ref, llm_avx2_q8_0x16_fn, llm_avx512_q8_0x16_fn },
};

/* A random block of @kind at @blk: scales of +-0.05 at most, every code. */
static void
random_block (const Kind *kind, GRand *rand, uint8_t *blk)
{
  const uint16_t d = llm_fp16_from_f32 ((float) g_rand_double_range (rand, -0.05, 0.05));
  if (kind->type == LLM_TYPE_Q4_0) {
    LlmBlockQ4_0 *b = (LlmBlockQ4_0 *) blk;
    b->d = d;
    for (size_t j = 0; j < sizeof b->qs; j++)
      b->qs[j] = (uint8_t) g_rand_int_range (rand, 0, 256);
  } else {
    LlmBlockQ8_0 *b = (LlmBlockQ8_0 *) blk;
    b->d = d;
    for (size_t j = 0; j < sizeof b->qs; j++)
      b->qs[j] = (int8_t) g_rand_int_range (rand, -127, 128);
  }
}

typedef struct {
  size_t rows, n, row_bytes;
  uint8_t *w;        /* as a GGUF holds it */
  uint8_t *packed;   /* the same, packed once */
} Matrix;

typedef struct {
  const Kind *kind;
  const Matrix *m;
  bool packed;
  LlmQ4x16Fn fn;
  const uint8_t *xq;
  size_t xs, n_tok, step;
  float *y;
  atomic_size_t next;
} Product;

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* 2 MiB aligned and huge-page backed where the kernel allows, like the
 * bandwidth test's buffer, so neither path pays TLB misses the other does
 * not. */
static void *
alloc_big (size_t bytes)
{
  void *p = NULL;
  if (posix_memalign (&p, 2u << 20, bytes) != 0)
    g_error ("cannot allocate %zu MiB", bytes >> 20);
#ifdef MADV_HUGEPAGE
  madvise (p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

static void
product_task (void *data, int ith, int nth)
{
  Product *p = data;
  const Matrix *m = p->m;
  if (p->packed) {
    /* One token: a contiguous share of whole tiles per thread, as
     * lib/forward.c splits a matvec; more: rows claimed as it shares a
     * batch. */
    size_t r0 = 0, r1 = m->rows;
    atomic_size_t *next = &p->next;
    if (p->n_tok == 1) {
      const size_t tiles = (m->rows + 15) / 16;
      llm_split_range (tiles, ith, nth, &r0, &r1);
      r0 *= 16;
      r1 = MIN (r1 * 16, m->rows);
      next = NULL;
      if (r0 >= r1)
        return;
    }
    if (!p->fn (m->n, m->packed, m->rows, r0, r1, p->xq, p->xs, p->n_tok, p->y, m->rows, next,
            p->step))
      g_error ("out of scratch memory");
  } else if (p->n_tok == 1) {
    size_t r0, r1;
    llm_split_range (m->rows, ith, nth, &r0, &r1);
    if (r0 < r1)
      llm_matvec (llm_cpu_kernels_best (), p->kind->type, m->w, m->row_bytes, m->n, r0, r1,
          p->xq, p->y + r0);
  } else {
    llm_matmul_shared (llm_cpu_kernels_best (), p->kind->type, m->w, m->row_bytes, m->n, 0,
        m->rows, p->xq, p->xs, p->n_tok, p->y, m->rows, &p->next, p->step);
  }
}

typedef struct {
  const Kind *kind;
  Matrix *mats;
  size_t n_mats;
  /* Per width (2048, 5632): the converted activations of 128 tokens. */
  uint8_t *xq[2];
  size_t xs[2];
  float *y;
  LlmQ4x16Fn fn;
  LlmThreadPool *pool;
} Bench;

static int
width_index (size_t n)
{
  return n == 2048 ? 0 : 1;
}

/* One product of every matrix; returns seconds. */
static double
pass (Bench *b, bool packed, size_t n_tok)
{
  const int nth = llm_threadpool_n_threads (b->pool);
  const double t0 = now_s ();
  for (size_t i = 0; i < b->n_mats; i++) {
    const Matrix *m = &b->mats[i];
    Product p = {
      .kind = b->kind, .m = m, .packed = packed, .fn = b->fn, .xq = b->xq[width_index (m->n)],
      .xs = b->xs[width_index (m->n)], .n_tok = n_tok, .y = b->y,
    };
    /* lib/forward.c's items: about eight per thread, whole 16-row tiles. */
    const size_t items = 8 * (size_t) nth;
    p.step = MAX ((size_t) 16, (m->rows + items - 1) / items + 15) / 16 * 16;
    atomic_init (&p.next, 0);
    llm_threadpool_run (b->pool, product_task, &p);
  }
  return now_s () - t0;
}

/* Seconds per product, over passes filling at least @min_s. */
static double
sample (Bench *b, bool packed, size_t n_tok, double min_s)
{
  double el = 0;
  size_t calls = 0;
  while (el < min_s) {
    el += pass (b, packed, n_tok);
    calls += b->n_mats;
  }
  return el / (double) calls;
}

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
  qsort (v, (size_t) n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Do the packed kernel's results equal today's for the last matrix?
 * (Today's batched Q4_0 kernels equal the scalar reference; its one-token
 * matvec adds in ggml's order, so at one token it may differ in the last
 * bits. Today's Q8_0 kernels all sum 8 lanes per row, the packed ones in
 * the reference's order, so they may differ at every count.) */
static bool
same_as_today (Bench *b, size_t n_tok)
{
  const Matrix *m = &b->mats[b->n_mats - 1];
  const size_t count = n_tok * m->rows;
  float *old_y = g_new (float, count);
  Product p = {
    .kind = b->kind, .m = m, .fn = b->fn, .xq = b->xq[width_index (m->n)], .xs = b->xs[width_index (m->n)],
    .n_tok = n_tok, .y = b->y, .step = 64,
  };
  atomic_init (&p.next, 0);
  llm_threadpool_run (b->pool, product_task, &p);
  memcpy (old_y, b->y, count * sizeof (float));
  p.packed = true;
  atomic_init (&p.next, 0);
  llm_threadpool_run (b->pool, product_task, &p);
  const bool same = memcmp (old_y, b->y, count * sizeof (float)) == 0;
  g_free (old_y);
  return same;
}

/* Core cycles per second: a chain of dependent adds runs one a cycle. */
static double
core_hz (void)
{
  double best = 0;
  for (int k = 0; k < 5; k++) {
    const long iters = 20 * 1000 * 1000;
    uint64_t v = 0;
    const double t0 = now_s ();
    for (long i = 0; i < iters; i++)
      __asm__ volatile ("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r" (v));
    best = MAX (best, 4.0 * (double) iters / (now_s () - t0));
  }
  return best;
}

int
main (int argc, char **argv)
{
  int layers = 8, samples = 7, max_threads = 2, bandwidth_mib = 512;
  char *tokens_arg = NULL, *type_arg = NULL;
  int sample_ms = 50;
  gboolean in_cache = FALSE;
  const GOptionEntry entries[] = {
    { "type", 0, 0, G_OPTION_ARG_STRING, &type_arg, "Weight type: q4_0 (default) or q8_0",
      "TYPE" },
    { "layers", 'l', 0, G_OPTION_ARG_INT, &layers,
      "Feed-forward layers (2 matrices, 13 MB each in Q4_0; default 8)", "N" },
    { "in-cache", 0, 0, G_OPTION_ARG_NONE, &in_cache,
      "One 128 x 2048 matrix that stays in L2: cycles per token-block", NULL },
    { "samples", 's', 0, G_OPTION_ARG_INT, &samples, "Timed samples per setting (default 7)",
      "N" },
    { "threads", 't', 0, G_OPTION_ARG_INT, &max_threads, "Up to this many threads (default 2)",
      "N" },
    { "bandwidth-mib", 0, 0, G_OPTION_ARG_INT, &bandwidth_mib,
      "Bandwidth test buffer, MiB (default 512; 0: none)", "N" },
    { "sample-ms", 0, 0, G_OPTION_ARG_INT, &sample_ms,
      "Each sample runs passes for at least this long (default 50)", "MS" },
    { "tokens", 'n', 0, G_OPTION_ARG_STRING, &tokens_arg,
      "Token counts, 1 to 128 (default 1,2,4,8,16,32,128)", "N[,N...]" },
    { NULL },
  };
  GOptionContext *octx = g_option_context_new ("- packed Q4_0 / Q8_0 products against today's");
  g_option_context_add_main_entries (octx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (octx, &argc, &argv, &error))
    g_error ("%s", error->message);
  g_option_context_free (octx);
  if (layers < 1 || samples < 1 || max_threads < 1 || sample_ms < 1)
    g_error ("--layers, --samples, --threads and --sample-ms must be at least 1");
  const Kind *kind = &kinds[0];
  if (type_arg != NULL) {
    kind = NULL;
    for (size_t k = 0; k < G_N_ELEMENTS (kinds); k++)
      if (g_ascii_strcasecmp (type_arg, kinds[k].name) == 0)
        kind = &kinds[k];
    if (kind == NULL)
      g_error ("--type: %s is not q4_0 or q8_0", type_arg);
    g_free (type_arg);
  }
  const double min_sample_s = sample_ms * 1e-3;
  const size_t max_tok = 128;
  size_t token_counts[32] = { 1, 2, 4, 8, 16, 32, 128 };
  size_t n_counts = 7;
  if (tokens_arg != NULL) {
    char **parts = g_strsplit (tokens_arg, ",", -1);
    n_counts = 0;
    for (char **q = parts; *q != NULL && n_counts < G_N_ELEMENTS (token_counts); q++) {
      const guint64 v = g_ascii_strtoull (*q, NULL, 10);
      if (v < 1 || v > max_tok)
        g_error ("--tokens: %s is not in 1..%zu", *q, max_tok);
      token_counts[n_counts++] = (size_t) v;
    }
    g_strfreev (parts);
    g_free (tokens_arg);
  }

  Bench b = { .kind = kind };
  const char *isa = "scalar";
  b.fn = kind->ref;
  if ((llm_cpu_isa_best () >= LLM_CPU_ISA_AVX512) && kind->avx512 () != NULL) {
    b.fn = kind->avx512 ();
    isa = "avx512";
  } else if ((llm_cpu_isa_best () >= LLM_CPU_ISA_AVX2) && kind->avx2 () != NULL) {
    b.fn = kind->avx2 ();
    isa = g_getenv ("LLM_NO_AVX_VNNI") == NULL ? "avx2 (AVX-VNNI if the CPU has it)" : "avx2";
  }

  GRand *rand = g_rand_new_with_seed (42);
  b.n_mats = in_cache ? 1 : 2 * (size_t) layers;
  b.mats = g_new0 (Matrix, b.n_mats);
  size_t weight_bytes = 0;
  double pack_s = 0;
  for (size_t i = 0; i < b.n_mats; i++) {
    Matrix *m = &b.mats[i];
    m->rows = in_cache ? 128 : i % 2 ? 2048 : 5632;
    m->n = i % 2 ? 5632 : 2048;
    m->row_bytes = m->n / 32 * kind->block_bytes;
    m->w = alloc_big (m->rows * m->row_bytes);
    for (size_t k = 0; k < m->rows * (m->n / 32); k++)
      random_block (kind, rand, m->w + k * kind->block_bytes);
    const size_t packed_bytes = kind->bytes (m->rows, m->n);
    m->packed = alloc_big (packed_bytes);
    memset (m->packed, 0, packed_bytes);
    const double t0 = now_s ();
    kind->pack (m->w, m->row_bytes, m->rows, m->n, 0, (m->rows + 15) / 16, m->packed);
    pack_s += now_s () - t0;
    weight_bytes += m->rows * m->row_bytes;
  }
  float *x = g_new (float, 5632);
  for (int k = 0; k < 2; k++) {
    const size_t n = k == 0 ? 2048 : 5632;
    b.xs[k] = llm_matmul_act_bytes (kind->type, n);
    b.xq[k] = g_malloc (max_tok * b.xs[k]);
    for (size_t t = 0; t < max_tok; t++) {
      for (size_t i = 0; i < n; i++)
        x[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
      llm_matmul_convert (llm_cpu_kernels_best (), kind->type, x, n, b.xq[k] + t * b.xs[k]);
    }
  }
  g_free (x);
  b.y = g_new (float, max_tok * 5632);

  if (in_cache)
    printf ("bench-q4_0x16: one 128x2048 %s matrix, %.1f kB of weights, in cache\n",
        kind->name, (double) weight_bytes / 1e3);
  else
    printf ("bench-q4_0x16: %d layers of 5632x2048 + 2048x5632 %s, %.1f MB of weights\n",
        layers, kind->name, (double) weight_bytes / 1e6);
  printf ("today's kernels: %s; packed kernel: %s\n", llm_cpu_kernels_name (llm_cpu_kernels_best ()), isa);
  printf ("pack (one thread, once at load): %.1f ms for all, %.2f GB/s\n", pack_s * 1e3,
      (double) weight_bytes / pack_s / 1e9);
  const double hz = in_cache ? core_hz () : 0;
  if (in_cache)
    printf ("core clock (dependent adds): %.2f GHz\n", hz / 1e9);

  for (int nth = 1; nth <= max_threads; nth++) {
    double bw = 0;
    if (bandwidth_mib > 0 && !in_cache) {
      bw = bench_read_bandwidth ((size_t) bandwidth_mib << 20, nth, 5, &error);
      if (bw == 0)
        g_error ("%s", error->message);
    }
    b.pool = llm_threadpool_new (nth);
    if (b.pool == NULL)
      g_error ("cannot start %d threads", nth);
    printf ("\n%d thread%s; read bandwidth %.1f GB/s\n", nth, nth > 1 ? "s" : "", bw / 1e9);
    char ratio_head[32];
    g_snprintf (ratio_head, sizeof ratio_head, "x n_tok=%zu", token_counts[0]);
    printf ("%5s %12s %12s %8s %12s %10s %10s %s\n", "n_tok", "today ns", "packed ns", "speedup",
        "packed tok/s", ratio_head, in_cache ? "cyc/tb" : "GB/s", "same bits as today");
    double one_tok = 0;
    for (size_t k = 0; k < n_counts; k++) {
      const size_t n_tok = token_counts[k];
      double *old_t = g_new (double, samples), *new_t = g_new (double, samples);
      pass (&b, false, n_tok);
      pass (&b, true, n_tok);
      for (int s = 0; s < samples; s++) {
        old_t[s] = sample (&b, false, n_tok, min_sample_s);
        new_t[s] = sample (&b, true, n_tok, min_sample_s);
      }
      const double to = median (old_t, samples), tn = median (new_t, samples);
      if (k == 0)
        one_tok = tn;
      char gbs[32] = "";
      if (in_cache) {
        /* Per thread: each computes its share of the token-blocks. */
        const Matrix *m = &b.mats[0];
        const double tb = (double) n_tok * (double) ((m->rows + 15) / 16) * (double) (m->n / 32);
        g_snprintf (gbs, sizeof gbs, "%.1f/%.1f", tn * hz * nth / tb, to * hz * nth / tb);
      } else if (n_tok == 1) {
        g_snprintf (gbs, sizeof gbs, "%.1f/%.1f", (double) weight_bytes / b.n_mats / tn / 1e9,
            (double) weight_bytes / b.n_mats / to / 1e9);
      }
      printf ("%5zu %12.0f %12.0f %7.2fx %12.0f %9.2fx %10s %s\n", n_tok, to * 1e9, tn * 1e9,
          to / tn, (double) n_tok / tn, tn / one_tok, gbs,
          same_as_today (&b, n_tok) ? "yes" : n_tok == 1 ? "no (matvec: ggml order)" : "NO");
      g_free (old_t);
      g_free (new_t);
    }
    llm_threadpool_free (b.pool);
  }
  if (in_cache)
    printf ("\ncyc/tb: packed/today, core cycles per token and 16-row block, per thread.\n");
  else
    printf ("\nGB/s at n_tok=1: packed/today, weight bytes read per second.\n");

  for (size_t i = 0; i < b.n_mats; i++) {
    free (b.mats[i].w);
    free (b.mats[i].packed);
  }
  g_free (b.mats);
  g_free (b.xq[0]);
  g_free (b.xq[1]);
  g_free (b.y);
  g_rand_free (rand);
  return 0;
}
