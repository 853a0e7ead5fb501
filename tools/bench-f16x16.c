/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-f16x16: F16 (or --bf16) products over weights packed once
 * (cpu/f16x16.h) against the file-layout path (llm_matvec for one token,
 * llm_matmul_shared for more), on the feed-forward matrices of the 246M
 * benchmark model (2816 x 1024 and 1024 x 2816; --shape N,FF another
 * model's), several layers so the set
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "bench.h"
#include "ggml-type.h"
#include "cpu/f16x16.h"
#include "cpu/fp16.h"

/* The largest relative difference of the packed results from the file
 * layout's for the last matrix (another summation order: not 0). */
static double
max_rel_diff (BenchPacked *b, size_t n_tok)
{
  const size_t count = n_tok * b->mats[b->n_mats - 1].rows;
  float *old_y = g_new (float, count);
  bench_packed_last_products (b, n_tok, old_y);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < count; i++)
    scale = MAX (scale, fabs (old_y[i]));
  for (size_t i = 0; i < count; i++)
    worst = MAX (worst, fabs ((double) b->y[i] - old_y[i]) / scale);
  g_free (old_y);
  return worst;
}

static void
fill_matrix (BenchPacked *b, BenchMatrix *m, void *data)
{
  GRand *rand = data;
  m->row_bytes = m->n * sizeof (uint16_t);
  uint16_t *w = bench_alloc_big (m->rows * m->row_bytes);
  for (size_t k = 0; k < m->rows * m->n; k++) {
    const float f = (float) g_rand_double_range (rand, -0.05, 0.05);
    w[k] = b->type == LLM_TYPE_F16 ? llm_fp16_from_f32 (f) : llm_bf16_from_f32 (f);
  }
  m->w = w;
  m->packed = bench_alloc_big (llm_f16x16_bytes (m->rows, m->n));
  llm_f16x16_pack (m->w, m->row_bytes, m->rows, m->n, 0, (m->rows + 15) / 16, m->packed);
}

/* --in-cache: one thread, a 256 x 1024 matrix, cycles per 16 rows x token
 * x column. */
static void
in_cache (BenchPacked *b, const size_t *counts, size_t n_counts, int samples, double min_s)
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
    bench_packed_pass (b, true, n_tok);
    bench_packed_pass (b, false, n_tok);
    for (int s = 0; s < samples; s++) {
      const double h0 = bench_core_hz ();
      new_t[s] = bench_packed_sample (b, true, n_tok, min_s);
      old_t[s] = bench_packed_sample (b, false, n_tok, min_s);
      const double hz = 0.5 * (h0 + bench_core_hz ());
      ghz[s] = hz / 1e9;
      new_c[s] = new_t[s] * hz / units;
      old_c[s] = old_t[s] * hz / units;
    }
    printf ("%5zu %12.0f %8.2f %14.3f %14.3f\n", n_tok, bench_median (new_t, samples) * 1e9,
        bench_median (ghz, samples), bench_median (new_c, samples),
        bench_median (old_c, samples));
    g_free (new_t);
    g_free (old_t);
    g_free (new_c);
    g_free (old_c);
    g_free (ghz);
  }
}

static void
print_row (BenchPacked *b, size_t n_tok, double to, double tn, double x_first, void *data)
{
  (void) data;
  char gbs[32] = "";
  if (n_tok == 1)
    bench_packed_gbs (b, tn, to, gbs, sizeof gbs);
  printf ("%5zu %12.0f %12.0f %7.2fx %12.0f %9.2fx %12s %.2g\n", n_tok, to * 1e9, tn * 1e9,
      to / tn, (double) n_tok / tn, x_first, gbs, max_rel_diff (b, n_tok));
}

int
main (int argc, char **argv)
{
  gboolean bf16 = FALSE;
  const GOptionEntry entries[] = {
    { "bf16", 0, 0, G_OPTION_ARG_NONE, &bf16, "BF16 weights instead of F16", NULL },
    { NULL },
  };
  BenchPackedOptions o;
  bench_packed_options (&o, entries, "- packed F16 products against the file layout's",
      "Feed-forward layers (2 matrices, 5.8 MB each; default 8)",
      "One thread over a matrix in L2: cycles per 16 rows x token x column", &argc, &argv);
  const double min_sample_s = o.sample_ms * 1e-3;

  BenchPacked b = {
    .kern = llm_cpu_kernels_best (), .type = bf16 ? LLM_TYPE_BF16 : LLM_TYPE_F16,
    .split_tokens = BENCH_STREAM_ROWS, .widths = { 1024, 2816 },
  };
  if (o.widths[0] > 0)
    memcpy (b.widths, o.widths, sizeof b.widths);
  const char *isa = bench_packed_pick (&b, llm_f16x16_ref_fn (b.type),
      llm_avx2_f16x16_fn (b.type), llm_avx512_f16x16_fn (b.type));
  GRand *rand = g_rand_new_with_seed (42);
  bench_packed_setup (&b, o.layers, o.in_cache ? 256 : 0, rand, fill_matrix, rand);
  printf ("bench-f16x16: %s weights, kernels %s, packed kernel %s\n", llm_type_name (b.type),
      llm_cpu_kernels_name (b.kern), isa);

  if (o.in_cache) {
    b.pool = llm_threadpool_new (1);
    in_cache (&b, o.token_counts, o.n_counts, o.samples, min_sample_s);
    llm_threadpool_free (b.pool);
  } else {
    printf ("%d layers of %zux%zu + %zux%zu, %.1f MB of weights\n", o.layers, b.widths[1],
        b.widths[0], b.widths[0], b.widths[1], (double) b.weight_bytes / 1e6);
    char header[160];
    g_snprintf (header, sizeof header, "%5s %12s %12s %8s %12s %10s %12s %s", "n_tok", "file ns",
        "packed ns", "speedup", "packed tok/s", "x 1 tok", "GB/s", "max rel diff");
    bench_packed_tables (&b, &o, o.bandwidth_mib, header, print_row, NULL);
    printf ("\nGB/s at n_tok=1: packed/file layout, weight bytes read per second.\n");
  }

  bench_packed_clear (&b);
  g_rand_free (rand);
  return 0;
}
