/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What bench-q4_0x16 and bench-f16x16 share: their options, the weights
 * and activations of a feed-forward layer's products, the file layout's
 * and the packed kernel's products split among threads as the engine
 * splits them (bench-kquants-x8's too), and interleaved timing of the
 * two. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "cpu/isa.h"
#include "cpu/threadpool.h"

double
bench_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

void *
bench_alloc_big (size_t bytes)
{
  void *p = NULL;
  if (posix_memalign (&p, 2u << 20, bytes) != 0)
    g_error ("cannot allocate %zu MiB", bytes >> 20);
#ifdef MADV_HUGEPAGE
  madvise (p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

double
bench_median (double *v, size_t n)
{
  qsort (v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double
bench_core_hz (void)
{
  double best = 0;
  for (int k = 0; k < 5; k++) {
    const long iters = 20 * 1000 * 1000;
    uint64_t v = 0;
    const double t0 = bench_seconds ();
    for (long i = 0; i < iters; i++)
      __asm__ volatile ("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r" (v));
    best = MAX (best, 4.0 * (double) iters / (bench_seconds () - t0));
  }
  return best;
}

/* --tokens: counts from 1 to BENCH_PACKED_MAX_TOK. */
static void
parse_tokens (BenchPackedOptions *o, const char *arg)
{
  char **parts = g_strsplit (arg, ",", -1);
  o->n_counts = 0;
  for (char **q = parts; *q != NULL && o->n_counts < G_N_ELEMENTS (o->token_counts); q++) {
    const guint64 v = g_ascii_strtoull (*q, NULL, 10);
    if (v < 1 || v > BENCH_PACKED_MAX_TOK)
      g_error ("--tokens: %s is not in 1..%d", *q, BENCH_PACKED_MAX_TOK);
    o->token_counts[o->n_counts++] = (size_t) v;
  }
  g_strfreev (parts);
}

/* --shape N,FF: multiples of 32 (whole blocks, whole row tiles), at
 * most BENCH_PACKED_MAX_WIDTH. */
#define BENCH_PACKED_MAX_WIDTH 65536
static void
parse_shape (BenchPackedOptions *o, const char *arg)
{
  char **parts = g_strsplit (arg, ",", -1);
  if (g_strv_length (parts) != 2)
    g_error ("--shape: %s is not N,FF", arg);
  for (int k = 0; k < 2; k++) {
    char *end = NULL;
    const guint64 v = g_ascii_strtoull (parts[k], &end, 10);
    if (end == parts[k] || *end != '\0' || v < 32 || v > BENCH_PACKED_MAX_WIDTH || v % 32 != 0)
      g_error ("--shape: %s is not a multiple of 32 from 32 to %d", parts[k],
          BENCH_PACKED_MAX_WIDTH);
    o->widths[k] = (size_t) v;
  }
  /* The activations and outputs are sized by the feed-forward width. */
  if (o->widths[1] < o->widths[0])
    g_error ("--shape: the feed-forward width %zu is below the model width %zu", o->widths[1],
        o->widths[0]);
  g_strfreev (parts);
}

void
bench_packed_options (BenchPackedOptions *o, const GOptionEntry *extra, const char *summary,
    const char *layers_help, const char *in_cache_help, int *argc, char ***argv)
{
  *o = (BenchPackedOptions) {
    .layers = 8, .samples = 7, .max_threads = 2, .bandwidth_mib = 512, .sample_ms = 50,
    .token_counts = { 1, 2, 4, 8, 16, 32, 128 }, .n_counts = 7,
  };
  char *tokens_arg = NULL, *shape_arg = NULL;
  const GOptionEntry entries[] = {
    { "layers", 'l', 0, G_OPTION_ARG_INT, &o->layers, layers_help, "N" },
    { "in-cache", 0, 0, G_OPTION_ARG_NONE, &o->in_cache, in_cache_help, NULL },
    { "samples", 's', 0, G_OPTION_ARG_INT, &o->samples, "Timed samples per setting (default 7)",
      "N" },
    { "threads", 't', 0, G_OPTION_ARG_INT, &o->max_threads,
      "Up to this many threads (default 2)", "N" },
    { "bandwidth-mib", 0, 0, G_OPTION_ARG_INT, &o->bandwidth_mib,
      "Bandwidth test buffer, MiB (default 512; 0: none)", "N" },
    { "sample-ms", 0, 0, G_OPTION_ARG_INT, &o->sample_ms,
      "Each sample runs passes for at least this long (default 50)", "MS" },
    { "tokens", 'n', 0, G_OPTION_ARG_STRING, &tokens_arg,
      "Token counts, 1 to 128 (default 1,2,4,8,16,32,128)", "N[,N...]" },
    { "shape", 0, 0, G_OPTION_ARG_STRING, &shape_arg,
      "A layer's model and feed-forward widths, multiples of 32 (default: the benchmark's "
      "model; e.g. 896,4864 for Qwen2-0.5B's)", "N,FF" },
    { NULL },
  };
  GOptionContext *octx = g_option_context_new (summary);
  g_option_context_add_main_entries (octx, extra, NULL);
  g_option_context_add_main_entries (octx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (octx, argc, argv, &error))
    g_error ("%s", error->message);
  g_option_context_free (octx);
  if (o->layers < 1 || o->samples < 1 || o->max_threads < 1 || o->sample_ms < 1)
    g_error ("--layers, --samples, --threads and --sample-ms must be at least 1");
  if (tokens_arg != NULL)
    parse_tokens (o, tokens_arg);
  if (shape_arg != NULL)
    parse_shape (o, shape_arg);
  g_free (tokens_arg);
  g_free (shape_arg);
}

const char *
bench_packed_pick (BenchPacked *b, BenchPackedFn ref, BenchPackedFn avx2, BenchPackedFn avx512)
{
  if (llm_cpu_isa_best () >= LLM_CPU_ISA_AVX512 && avx512 != NULL) {
    b->fn = avx512;
    return "avx512";
  }
  if (llm_cpu_isa_best () >= LLM_CPU_ISA_AVX2 && avx2 != NULL) {
    b->fn = avx2;
    return g_getenv ("LLM_NO_AVX_VNNI") == NULL ? "avx2 (AVX-VNNI if the CPU has it)" : "avx2";
  }
  b->fn = ref;
  return "scalar";
}

void
bench_packed_setup (BenchPacked *b, int layers, size_t in_cache_rows, GRand *rand,
    void (*fill) (BenchPacked *b, BenchMatrix *m, void *data), void *data)
{
  b->n_mats = in_cache_rows > 0 ? 1 : 2 * (size_t) layers;
  b->mats = g_new0 (BenchMatrix, b->n_mats);
  for (size_t i = 0; i < b->n_mats; i++) {
    BenchMatrix *m = &b->mats[i];
    m->rows = in_cache_rows > 0 ? in_cache_rows : b->widths[i % 2 ? 0 : 1];
    m->n = b->widths[i % 2];
    fill (b, m, data);
    b->weight_bytes += m->rows * m->row_bytes;
  }
  float *x = g_new (float, b->widths[1]);
  for (int k = 0; k < 2; k++) {
    const size_t n = b->widths[k];
    b->xs[k] = llm_matmul_act_bytes (b->type, n);
    b->xq[k] = g_malloc (BENCH_PACKED_MAX_TOK * b->xs[k]);
    for (size_t t = 0; t < BENCH_PACKED_MAX_TOK; t++) {
      for (size_t i = 0; i < n; i++)
        x[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
      llm_matmul_convert (b->kern, b->type, x, n, b->xq[k] + t * b->xs[k]);
    }
  }
  g_free (x);
  b->y = g_new (float, BENCH_PACKED_MAX_TOK * b->widths[1]);
}

void
bench_packed_clear (BenchPacked *b)
{
  for (size_t i = 0; i < b->n_mats; i++) {
    free (b->mats[i].w);
    free (b->mats[i].packed);
  }
  g_free (b->mats);
  g_free (b->xq[0]);
  g_free (b->xq[1]);
  g_free (b->y);
}

void
bench_product_task (void *data, int ith, int nth)
{
  BenchProduct *p = data;
  if (p->fn != NULL && p->n_tok <= p->split_tokens) {
    size_t t0, t1;
    llm_split_range ((p->rows + 15) / 16, ith, nth, &t0, &t1);
    if (t0 < t1 && !p->fn (p->n, p->w, p->rows, 16 * t0, MIN (16 * t1, p->rows), p->xq, p->xs,
            p->n_tok, p->y, p->rows, NULL, 0))
      g_error ("out of scratch memory");
  } else if (p->fn != NULL) {
    if (!p->fn (p->n, p->w, p->rows, 0, p->rows, p->xq, p->xs, p->n_tok, p->y, p->rows, &p->next,
            p->step))
      g_error ("out of scratch memory");
  } else if (p->n_tok == 1) {
    size_t r0, r1;
    llm_split_range (p->rows, ith, nth, &r0, &r1);
    if (r0 < r1)
      llm_matvec (p->kern, p->type, p->w, p->row_bytes, p->n, r0, r1, p->xq, p->y + r0);
  } else {
    llm_matmul_shared (p->kern, p->type, p->w, p->row_bytes, p->n, 0, p->rows, p->xq, p->xs,
        p->n_tok, p->y, p->rows, &p->next, p->step);
  }
}

size_t
bench_claim_step (size_t rows, int nth)
{
  const size_t items = 8 * (size_t) nth;
  return MAX ((size_t) 16, (rows + items - 1) / items + 15) / 16 * 16;
}

/* One product of @m over @n_tok tokens into b->y: by b->fn (@packed) or
 * by what it is timed against. */
static void
bench_packed_product (BenchPacked *b, const BenchMatrix *m, bool packed, size_t n_tok)
{
  const int k = m->n == b->widths[0] ? 0 : 1;
  BenchProduct p = {
    .kern = b->kern, .type = b->type, .fn = packed ? b->fn : b->against,
    .w = packed || b->against != NULL ? (const void *) m->packed : m->w,
    .row_bytes = m->row_bytes, .rows = m->rows,
    .n = m->n, .xq = b->xq[k], .xs = b->xs[k], .n_tok = n_tok, .split_tokens = b->split_tokens,
    .step = bench_claim_step (m->rows, llm_threadpool_n_threads (b->pool)), .y = b->y,
  };
  atomic_init (&p.next, 0);
  llm_threadpool_run (b->pool, bench_product_task, &p);
}

double
bench_packed_pass (BenchPacked *b, bool packed, size_t n_tok)
{
  const double t0 = bench_seconds ();
  for (size_t i = 0; i < b->n_mats; i++)
    bench_packed_product (b, &b->mats[i], packed, n_tok);
  return bench_seconds () - t0;
}

double
bench_packed_sample (BenchPacked *b, bool packed, size_t n_tok, double min_s)
{
  double el = 0;
  size_t calls = 0;
  while (el < min_s) {
    el += bench_packed_pass (b, packed, n_tok);
    calls += b->n_mats;
  }
  return el / (double) calls;
}

static void
bench_packed_time (BenchPacked *b, size_t n_tok, int samples, double min_s, double *file_s,
    double *packed_s)
{
  double *old_t = g_new (double, samples), *new_t = g_new (double, samples);
  bench_packed_pass (b, false, n_tok);
  bench_packed_pass (b, true, n_tok);
  for (int s = 0; s < samples; s++) {
    old_t[s] = bench_packed_sample (b, false, n_tok, min_s);
    new_t[s] = bench_packed_sample (b, true, n_tok, min_s);
  }
  *file_s = bench_median (old_t, samples);
  *packed_s = bench_median (new_t, samples);
  g_free (old_t);
  g_free (new_t);
}

void
bench_packed_last_products (BenchPacked *b, size_t n_tok, float *file_y)
{
  const BenchMatrix *m = &b->mats[b->n_mats - 1];
  bench_packed_product (b, m, false, n_tok);
  memcpy (file_y, b->y, n_tok * m->rows * sizeof (float));
  bench_packed_product (b, m, true, n_tok);
}

void
bench_packed_gbs (const BenchPacked *b, double packed_s, double file_s, char *out, size_t size)
{
  const double bytes = (double) b->weight_bytes / (double) b->n_mats;
  g_snprintf (out, size, "%.1f/%.1f", bytes / packed_s / 1e9, bytes / file_s / 1e9);
}

void
bench_packed_tables (BenchPacked *b, const BenchPackedOptions *o, int bandwidth_mib,
    const char *header, BenchPackedRowFn row, void *data)
{
  const double min_s = o->sample_ms * 1e-3;
  for (int nth = 1; nth <= o->max_threads; nth++) {
    double bw = 0;
    if (bandwidth_mib > 0) {
      GError *error = NULL;
      bw = bench_read_bandwidth ((size_t) bandwidth_mib << 20, nth, 5, &error);
      if (bw == 0)
        g_error ("%s", error->message);
    }
    b->pool = llm_threadpool_new (nth);
    if (b->pool == NULL)
      g_error ("cannot start %d threads", nth);
    printf ("\n%d thread%s; read bandwidth %.1f GB/s\n%s\n", nth, nth > 1 ? "s" : "", bw / 1e9,
        header);
    double first = 0;
    for (size_t k = 0; k < o->n_counts; k++) {
      double file_s, packed_s;
      bench_packed_time (b, o->token_counts[k], o->samples, min_s, &file_s, &packed_s);
      if (k == 0)
        first = packed_s;
      row (b, o->token_counts[k], file_s, packed_s, packed_s / first, data);
    }
    llm_threadpool_free (b->pool);
    b->pool = NULL;
  }
}
