/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-f16x16: F16 (or --bf16) products over weights packed once
 * (cpu/f16x16.h) against the file-layout path (llm_matvec for one token,
 * llm_matmul_shared for more), on the feed-forward matrices of the 246M
 * benchmark model (2816 x 1024 and 1024 x 2816), several layers so the set
 * is far larger than the last-level cache and every pass reads its weights
 * from memory, as a decode step does. Threads share rows as
 * lib/backend-cpu.c has them share (a contiguous run of tiles each up to 8
 * tokens, claimed items beyond).
 *
 * Per thread count and token count: ns per product (median of samples,
 * old and new interleaved so drift on a shared machine hits both), token
 * rows per second, the packed kernel's time over its own one-token time,
 * and at one token the GB/s of weights read, next to the machine's read
 * bandwidth (the roofline of decoding).
 *
 * --in-cache instead times the packed kernel on one thread over a 256 x
 * 1024 matrix (512 KiB, in L2) and prints cycles per 16 rows x token x
 * column, the core clock measured with a chain of dependent adds. */
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
#include "cpu/f16x16.h"
#include "cpu/fp16.h"
#include "cpu/matmul.h"
#include "cpu/threadpool.h"

typedef struct {
  size_t rows, n, row_bytes;
  uint16_t *w;       /* as a GGUF holds it */
  uint8_t *packed;   /* the same, packed once */
} Matrix;

typedef struct {
  const LlmCpuKernels *kern;
  guint32 type;
  const Matrix *m;
  bool packed;
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

/* lib/backend-cpu.c's STREAM_ROWS. */
#define STREAM_ROWS 8

static void
product_task (void *data, int ith, int nth)
{
  Product *p = data;
  const Matrix *m = p->m;
  if (p->packed) {
    size_t r0 = 0, r1 = m->rows;
    atomic_size_t *next = &p->next;
    if (p->n_tok <= STREAM_ROWS) {
      const size_t tiles = (m->rows + 15) / 16;
      llm_split_range (tiles, ith, nth, &r0, &r1);
      r0 *= 16;
      r1 = MIN (r1 * 16, m->rows);
      next = NULL;
      if (r0 >= r1)
        return;
    }
    if (!llm_matmul_prepared (p->kern, p->type, m->packed, m->rows, m->n, r0, r1, p->xq, p->xs,
            p->n_tok, p->y, m->rows, next, p->step))
      g_error ("out of scratch memory");
  } else if (p->n_tok == 1) {
    size_t r0, r1;
    llm_split_range (m->rows, ith, nth, &r0, &r1);
    if (r0 < r1)
      llm_matvec (p->kern, p->type, m->w, m->row_bytes, m->n, r0, r1, p->xq, p->y + r0);
  } else {
    llm_matmul_shared (p->kern, p->type, m->w, m->row_bytes, m->n, 0, m->rows, p->xq, p->xs,
        p->n_tok, p->y, m->rows, &p->next, p->step);
  }
}

typedef struct {
  const LlmCpuKernels *kern;
  guint32 type;
  Matrix *mats;
  size_t n_mats;
  /* Per width (1024, 2816): the converted activations of max_tok tokens. */
  uint8_t *xq[2];
  size_t xs[2];
  float *y;
  LlmThreadPool *pool;
} Bench;

static int
width_index (size_t n)
{
  return n == 1024 ? 0 : 1;
}

static void
run_product (Bench *b, const Matrix *m, bool packed, size_t n_tok)
{
  const int nth = llm_threadpool_n_threads (b->pool);
  Product p = {
    .kern = b->kern, .type = b->type, .m = m, .packed = packed,
    .xq = b->xq[width_index (m->n)], .xs = b->xs[width_index (m->n)], .n_tok = n_tok,
    .y = b->y,
  };
  /* lib/backend-cpu.c's items: about eight per thread, whole 16-row tiles. */
  const size_t items = 8 * (size_t) nth;
  p.step = MAX ((size_t) 16, (m->rows + items - 1) / items + 15) / 16 * 16;
  atomic_init (&p.next, 0);
  llm_threadpool_run (b->pool, product_task, &p);
}

/* One product of every matrix; returns seconds. */
static double
pass (Bench *b, bool packed, size_t n_tok)
{
  const double t0 = now_s ();
  for (size_t i = 0; i < b->n_mats; i++)
    run_product (b, &b->mats[i], packed, n_tok);
  return now_s () - t0;
}

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

/* The largest relative difference of the packed results from the file
 * layout's for the last matrix (another summation order: not 0). */
static double
max_rel_diff (Bench *b, size_t n_tok)
{
  const Matrix *m = &b->mats[b->n_mats - 1];
  const size_t count = n_tok * m->rows;
  float *old_y = g_new (float, count);
  run_product (b, m, false, n_tok);
  memcpy (old_y, b->y, count * sizeof (float));
  run_product (b, m, true, n_tok);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < count; i++)
    scale = MAX (scale, fabs (old_y[i]));
  for (size_t i = 0; i < count; i++)
    worst = MAX (worst, fabs ((double) b->y[i] - old_y[i]) / scale);
  g_free (old_y);
  return worst;
}

/* Core cycles per second: a chain of dependent adds runs at one a cycle. */
static double
core_hz (void)
{
  const long iters = 20000000;
  double best = 0;
  for (int k = 0; k < 3; k++) {
    long v = 0;
    const double t0 = now_s ();
    for (long i = 0; i < iters; i++)
      __asm__ volatile ("add $1, %0" : "+r" (v));
    const double el = now_s () - t0;
    best = MAX (best, (double) iters / el);
  }
  return best;
}

static void
fill_matrix (GRand *rand, const LlmCpuKernels *kern, guint32 type, Matrix *m)
{
  m->row_bytes = m->n * sizeof (uint16_t);
  m->w = alloc_big (m->rows * m->row_bytes);
  for (size_t k = 0; k < m->rows * m->n; k++) {
    const float f = (float) g_rand_double_range (rand, -0.05, 0.05);
    m->w[k] = type == LLM_TYPE_F16 ? llm_fp16_from_f32 (f) : llm_bf16_from_f32 (f);
  }
  const size_t bytes = llm_prepared_bytes (kern, type, m->rows, m->n);
  if (bytes == 0)
    g_error ("the %s kernels keep the file's layout for %s", llm_cpu_kernels_name (kern),
        llm_type_name (type));
  m->packed = alloc_big (bytes);
  llm_prepare_tiles (kern, type, m->w, m->row_bytes, m->rows, m->n, 0, (m->rows + 15) / 16,
      m->packed);
}

/* --in-cache: one thread, a 256 x 1024 matrix, cycles per 16 rows x token
 * x column. */
static void
in_cache (Bench *b, const size_t *counts, size_t n_counts, int samples, double min_s)
{
  printf ("in cache: one thread, %zu x %zu; cycles from the core clock measured with\n"
      "dependent adds beside each sample (medians)\n", b->mats[0].rows, b->mats[0].n);
  printf ("%5s %12s %8s %14s %14s\n", "n_tok", "packed ns", "GHz", "cycles/16rxtxk", "file-layout");
  for (size_t k = 0; k < n_counts; k++) {
    const size_t n_tok = counts[k];
    double *new_t = g_new (double, samples), *old_t = g_new (double, samples);
    double *new_c = g_new (double, samples), *old_c = g_new (double, samples);
    double *ghz = g_new (double, samples);
    const double units = (double) b->mats[0].rows / 16 * (double) n_tok * (double) b->mats[0].n;
    pass (b, true, n_tok);
    pass (b, false, n_tok);
    for (int s = 0; s < samples; s++) {
      const double h0 = core_hz ();
      new_t[s] = sample (b, true, n_tok, min_s);
      old_t[s] = sample (b, false, n_tok, min_s);
      const double hz = 0.5 * (h0 + core_hz ());
      ghz[s] = hz / 1e9;
      new_c[s] = new_t[s] * hz / units;
      old_c[s] = old_t[s] * hz / units;
    }
    printf ("%5zu %12.0f %8.2f %14.3f %14.3f\n", n_tok, median (new_t, samples) * 1e9,
        median (ghz, samples), median (new_c, samples), median (old_c, samples));
    g_free (new_t);
    g_free (old_t);
    g_free (new_c);
    g_free (old_c);
    g_free (ghz);
  }
}

int
main (int argc, char **argv)
{
  int layers = 8, samples = 7, max_threads = 2, bandwidth_mib = 512, sample_ms = 50;
  gboolean bf16 = FALSE, cache = FALSE;
  char *tokens_arg = NULL;
  const GOptionEntry entries[] = {
    { "layers", 'l', 0, G_OPTION_ARG_INT, &layers,
      "Feed-forward layers (2 matrices, 5.8 MB each; default 8)", "N" },
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
    { "bf16", 0, 0, G_OPTION_ARG_NONE, &bf16, "BF16 weights instead of F16", NULL },
    { "in-cache", 0, 0, G_OPTION_ARG_NONE, &cache,
      "One thread over a matrix in L2: cycles per 16 rows x token x column", NULL },
    { NULL },
  };
  GOptionContext *octx = g_option_context_new ("- packed F16 products against the file layout's");
  g_option_context_add_main_entries (octx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (octx, &argc, &argv, &error))
    g_error ("%s", error->message);
  g_option_context_free (octx);
  if (layers < 1 || samples < 1 || max_threads < 1 || sample_ms < 1)
    g_error ("--layers, --samples, --threads and --sample-ms must be at least 1");
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

  Bench b = { 0 };
  b.kern = llm_cpu_kernels_best ();
  b.type = bf16 ? LLM_TYPE_BF16 : LLM_TYPE_F16;
  GRand *rand = g_rand_new_with_seed (42);
  b.n_mats = cache ? 1 : 2 * (size_t) layers;
  b.mats = g_new0 (Matrix, b.n_mats);
  size_t weight_bytes = 0;
  for (size_t i = 0; i < b.n_mats; i++) {
    Matrix *m = &b.mats[i];
    m->rows = cache ? 256 : i % 2 ? 1024 : 2816;
    m->n = cache ? 1024 : i % 2 ? 2816 : 1024;
    fill_matrix (rand, b.kern, b.type, m);
    weight_bytes += m->rows * m->row_bytes;
  }
  float *x = g_new (float, 2816);
  for (int k = 0; k < 2; k++) {
    const size_t n = k == 0 ? 1024 : 2816;
    b.xs[k] = llm_matmul_act_bytes (b.type, n);
    b.xq[k] = g_malloc (max_tok * b.xs[k]);
    for (size_t t = 0; t < max_tok; t++) {
      for (size_t i = 0; i < n; i++)
        x[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
      llm_matmul_convert (b.kern, b.type, x, n, b.xq[k] + t * b.xs[k]);
    }
  }
  g_free (x);
  b.y = g_new (float, max_tok * 2816);
  printf ("bench-f16x16: %s weights, kernels %s\n", llm_type_name (b.type),
      llm_cpu_kernels_name (b.kern));

  if (cache) {
    b.pool = llm_threadpool_new (1);
    in_cache (&b, token_counts, n_counts, samples, min_sample_s);
    llm_threadpool_free (b.pool);
  } else {
    printf ("%d layers of 2816x1024 + 1024x2816, %.1f MB of weights\n", layers,
        (double) weight_bytes / 1e6);
    for (int nth = 1; nth <= max_threads; nth++) {
      double bw = 0;
      if (bandwidth_mib > 0) {
        bw = bench_read_bandwidth ((size_t) bandwidth_mib << 20, nth, 5, &error);
        if (bw == 0)
          g_error ("%s", error->message);
      }
      b.pool = llm_threadpool_new (nth);
      if (b.pool == NULL)
        g_error ("cannot start %d threads", nth);
      printf ("\n%d thread%s; read bandwidth %.1f GB/s\n", nth, nth > 1 ? "s" : "", bw / 1e9);
      printf ("%5s %12s %12s %8s %12s %10s %12s %s\n", "n_tok", "file ns", "packed ns",
          "speedup", "packed tok/s", "x 1 tok", "GB/s", "max rel diff");
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
        if (n_tok == 1)
          g_snprintf (gbs, sizeof gbs, "%.1f/%.1f", (double) weight_bytes / b.n_mats / tn / 1e9,
              (double) weight_bytes / b.n_mats / to / 1e9);
        printf ("%5zu %12.0f %12.0f %7.2fx %12.0f %9.2fx %12s %.2g\n", n_tok, to * 1e9,
            tn * 1e9, to / tn, (double) n_tok / tn, tn / one_tok, gbs,
            max_rel_diff (&b, n_tok));
        g_free (old_t);
        g_free (new_t);
      }
      llm_threadpool_free (b.pool);
    }
    printf ("\nGB/s at n_tok=1: packed/file layout, weight bytes read per second.\n");
  }

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
