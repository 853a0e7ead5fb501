/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Memory read bandwidth, the ceiling of decoding: a decode step reads
 * every weight once, so tokens/s can never pass bandwidth / weight bytes.
 * Measured the way a matrix-vector product reads weights: each thread
 * streams its own contiguous part of a buffer far larger than the caches,
 * with wide loads and several independent sums so the loads, not the
 * adds, set the pace. The best of a few runs is the figure: slower runs
 * are interference, not the machine. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "cpu/threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

typedef struct {
  const guint64 *words;
  gsize n_words;
  guint64 sums[256];          /* per thread; keeps the reads observable */
} ReadTask;

static guint64
read_words_generic (const guint64 *p, gsize n)
{
  guint64 a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  gsize i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 += p[i];
    a1 += p[i + 1];
    a2 += p[i + 2];
    a3 += p[i + 3];
    a4 += p[i + 4];
    a5 += p[i + 5];
    a6 += p[i + 6];
    a7 += p[i + 7];
  }
  for (; i < n; i++)
    a0 += p[i];
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

#ifdef HAVE_X86
/* Built for AVX2 whatever the build flags, used only after a CPU check. */
__attribute__ ((target ("avx2"))) static guint64
read_words_avx2 (const guint64 *p, gsize n)
{
  __m256i a0 = _mm256_setzero_si256 (), a1 = a0, a2 = a0, a3 = a0;
  gsize i = 0;
  /* Two cache lines per iteration. */
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64 (a0, _mm256_loadu_si256 ((const __m256i *) (p + i)));
    a1 = _mm256_add_epi64 (a1, _mm256_loadu_si256 ((const __m256i *) (p + i + 4)));
    a2 = _mm256_add_epi64 (a2, _mm256_loadu_si256 ((const __m256i *) (p + i + 8)));
    a3 = _mm256_add_epi64 (a3, _mm256_loadu_si256 ((const __m256i *) (p + i + 12)));
  }
  __m256i a = _mm256_add_epi64 (_mm256_add_epi64 (a0, a1), _mm256_add_epi64 (a2, a3));
  guint64 lanes[4];
  _mm256_storeu_si256 ((__m256i *) lanes, a);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + read_words_generic (p + i, n - i);
}
#endif

static guint64 (*read_words) (const guint64 *, gsize) = read_words_generic;

static void
read_task (void *data, int ith, int nth)
{
  ReadTask *t = data;
  gsize w0, w1;
  llm_split_range (t->n_words, ith, nth, &w0, &w1);
  t->sums[ith % G_N_ELEMENTS (t->sums)] += read_words (t->words + w0, w1 - w0);
}

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct _BenchReader {
  void *buf;
  gsize bytes;
  LlmThreadPool *pool;
  ReadTask task;
};

BenchReader *
bench_reader_new (gsize buffer_bytes, int n_threads, GError **error)
{
#ifdef HAVE_X86
  __builtin_cpu_init ();
  if (__builtin_cpu_supports ("avx2"))
    read_words = read_words_avx2;
#endif
  void *buf = NULL;
  /* 2 MiB aligned so the kernel can back it with huge pages: TLB misses
   * would otherwise cost a few percent of a streaming read. */
  if (posix_memalign (&buf, 2u << 20, buffer_bytes) != 0) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOMEM,
        "cannot allocate %" G_GSIZE_FORMAT " MiB for the bandwidth test", buffer_bytes >> 20);
    return NULL;
  }
#ifdef MADV_HUGEPAGE
  madvise (buf, buffer_bytes, MADV_HUGEPAGE);
#endif
  /* Non-zero, so every page is really allocated (not the shared zero page). */
  memset (buf, 1, buffer_bytes);

  LlmThreadPool *pool = llm_threadpool_new (n_threads);
  if (pool == NULL) {
    free (buf);
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot start %d threads",
        n_threads);
    return NULL;
  }
  BenchReader *r = g_new0 (BenchReader, 1);
  *r = (BenchReader) { buf, buffer_bytes, pool, { buf, buffer_bytes / sizeof (guint64), { 0 } } };
  return r;
}

double
bench_reader_best (BenchReader *r, int runs, double min_seconds)
{
  /* One untimed pass wakes the workers and settles the clocks. */
  llm_threadpool_run (r->pool, read_task, &r->task);
  double best = 0, start = now_s ();
  for (int i = 0; i < runs || now_s () - start < min_seconds; i++) {
    double t0 = now_s ();
    llm_threadpool_run (r->pool, read_task, &r->task);
    double dt = now_s () - t0;
    if (dt > 0)
      best = MAX (best, r->bytes / dt);
  }
  /* Its workers sleep now rather than poll beside whoever runs next. */
  llm_threadpool_rest (r->pool);
  return best;
}

void
bench_reader_free (BenchReader *r)
{
  if (r == NULL)
    return;
  /* Use the sums so no compiler drops the reads. */
  guint64 sink = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (r->task.sums); i++)
    sink += r->task.sums[i];
  if (sink == 42)
    g_printerr (" ");
  llm_threadpool_free (r->pool);
  free (r->buf);
  g_free (r);
}

double
bench_read_bandwidth (gsize buffer_bytes, int n_threads, int runs, GError **error)
{
  BenchReader *r = bench_reader_new (buffer_bytes, n_threads, error);
  if (r == NULL)
    return 0;
  /* At least @runs passes and at least half a second: on a shared machine
   * a neighbour can hold the memory bus for a few passes in a row, and the
   * best pass is the one that saw the machine as it is. */
  const double best = bench_reader_best (r, runs, 0.5);
  bench_reader_free (r);
  return best;
}
