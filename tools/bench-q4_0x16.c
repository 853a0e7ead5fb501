/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-q4_0x16: Q4_0, (--type q5_0) Q5_0 or (--type q8_0) Q8_0 products
 * over weights packed once (cpu/q4_0x16.h, cpu/q5_0x16.h, cpu/q8_0x16.h)
 * against the file layout's kernels
 * (llm_matvec for one token, llm_matmul_shared for more: what a model
 * without the prepared layout runs), on the matrices of a 246M model's
 * feed-forward layers (5632 x 2048 and 2048 x 5632; --shape N,FF another
 * model's), several layers so the
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
 * --fetch times the packed kernel that leaves one token's fetching, or a
 * few tokens' (X16Kernel.hw_tokens), to the hardware prefetchers (the
 * engine's other way, lib/fetch-choice.h) against the one fetching ahead
 * itself, both over the packed bytes.
 *
 * --in-cache instead times one small matrix (128 x 2048) that stays in L2
 * with its activations, and prints cycles per token and 16-row block (at
 * the core clock a chain of dependent adds measures): what the kernels
 * cost when memory is not what bounds them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "bench.h"
#include "ggml-type.h"
#include "cpu/fp16.h"
#include "cpu/q4_0x16.h"
#include "cpu/q5_0x16.h"
#include "cpu/q8_0x16.h"
#include "cpu/quantize.h"

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
  LlmQ4x16Fn (*avx2_hw) (void);
  LlmQ4x16Fn (*avx512_hw) (void);
} Kind;

static const Kind kinds[] = {
  { "q4_0", LLM_TYPE_Q4_0, sizeof (LlmBlockQ4_0), llm_q4_0x16_bytes, llm_q4_0x16_pack,
    llm_q4_0x16_ref, llm_avx2_q4_0x16_fn, llm_avx512_q4_0x16_fn, llm_avx2_q4_0x16_hw_fn,
    llm_avx512_q4_0x16_hw_fn },
  { "q8_0", LLM_TYPE_Q8_0, sizeof (LlmBlockQ8_0), llm_q8_0x16_bytes, llm_q8_0x16_pack,
    llm_q8_0x16_ref, llm_avx2_q8_0x16_fn, llm_avx512_q8_0x16_fn, llm_avx2_q8_0x16_hw_fn,
    llm_avx512_q8_0x16_hw_fn },
  { "q5_0", LLM_TYPE_Q5_0, sizeof (LlmBlockQ5_0), llm_q5_0x16_bytes, llm_q5_0x16_pack,
    llm_q5_0x16_ref, llm_avx2_q5_0x16_fn, llm_avx512_q5_0x16_fn, llm_avx2_q5_0x16_hw_fn,
    llm_avx512_q5_0x16_hw_fn },
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
  } else if (kind->type == LLM_TYPE_Q5_0) {
    LlmBlockQ5_0 *b = (LlmBlockQ5_0 *) blk;
    b->d = d;
    for (size_t j = 0; j < sizeof b->qh; j++)
      b->qh[j] = (uint8_t) g_rand_int_range (rand, 0, 256);
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
  const Kind *kind;
  GRand *rand;
  double pack_s;             /* packing all the matrices, one thread */
} Fill;

static void
fill_matrix (BenchPacked *b, BenchMatrix *m, void *data)
{
  (void) b;
  Fill *f = data;
  const Kind *kind = f->kind;
  m->row_bytes = m->n / 32 * kind->block_bytes;
  m->w = bench_alloc_big (m->rows * m->row_bytes);
  for (size_t k = 0; k < m->rows * (m->n / 32); k++)
    random_block (kind, f->rand, (uint8_t *) m->w + k * kind->block_bytes);
  const size_t packed_bytes = kind->bytes (m->rows, m->n);
  m->packed = bench_alloc_big (packed_bytes);
  memset (m->packed, 0, packed_bytes);
  const double t0 = bench_seconds ();
  kind->pack (m->w, m->row_bytes, m->rows, m->n, 0, (m->rows + 15) / 16, m->packed);
  f->pack_s += bench_seconds () - t0;
}

/* Do the packed kernel's results equal today's for the last matrix?
 * (Today's batched Q4_0 kernels equal the scalar reference; its one-token
 * matvec adds in ggml's order, so at one token it may differ in the last
 * bits. Today's Q8_0 kernels all sum 8 lanes per row, the packed ones in
 * the reference's order, so they may differ at every count.) */
static bool
same_as_today (BenchPacked *b, size_t n_tok)
{
  const size_t count = n_tok * b->mats[b->n_mats - 1].rows;
  float *old_y = g_new (float, count);
  bench_packed_last_products (b, n_tok, old_y);
  const bool same = memcmp (old_y, b->y, count * sizeof (float)) == 0;
  g_free (old_y);
  return same;
}

/* What a row prints beside the times: at one token the GB/s of weights
 * read, in cache cycles per token and 16-row block at @hz (per thread:
 * each computes its share of the token-blocks). */
typedef struct {
  bool in_cache;
  double hz;
} Row;

static void
print_row (BenchPacked *b, size_t n_tok, double to, double tn, double x_first, void *data)
{
  const Row *row = data;
  char gbs[32] = "";
  if (row->in_cache) {
    const BenchMatrix *m = &b->mats[0];
    const double tb = (double) n_tok * (double) ((m->rows + 15) / 16) * (double) (m->n / 32)
        / llm_threadpool_n_threads (b->pool);
    g_snprintf (gbs, sizeof gbs, "%.1f/%.1f", tn * row->hz / tb, to * row->hz / tb);
  } else if (n_tok == 1) {
    bench_packed_gbs (b, tn, to, gbs, sizeof gbs);
  }
  printf ("%5zu %12.0f %12.0f %7.2fx %12.0f %9.2fx %10s %s\n", n_tok, to * 1e9, tn * 1e9,
      to / tn, (double) n_tok / tn, x_first, gbs,
      same_as_today (b, n_tok) ? "yes"
      : n_tok == 1 && b->against == NULL ? "no (matvec: ggml order)" : "NO");
}

int
main (int argc, char **argv)
{
  char *type_arg = NULL;
  gboolean fetch = FALSE;
  const GOptionEntry entries[] = {
    { "type", 0, 0, G_OPTION_ARG_STRING, &type_arg, "Weight type: q4_0 (default), q5_0 or q8_0",
      "TYPE" },
    { "fetch", 0, 0, G_OPTION_ARG_NONE, &fetch,
      "Time the packed kernel leaving the fetching of one token (or a few) to the hardware "
      "against the one fetching ahead itself", NULL },
    { NULL },
  };
  BenchPackedOptions o;
  bench_packed_options (&o, entries, "- packed Q4_0 / Q5_0 / Q8_0 products against today's",
      "Feed-forward layers (2 matrices, 13 MB each in Q4_0; default 8)",
      "One 128 x 2048 matrix that stays in L2: cycles per token-block", &argc, &argv);
  const Kind *kind = &kinds[0];
  if (type_arg != NULL) {
    kind = NULL;
    for (size_t k = 0; k < G_N_ELEMENTS (kinds); k++)
      if (g_ascii_strcasecmp (type_arg, kinds[k].name) == 0)
        kind = &kinds[k];
    if (kind == NULL)
      g_error ("--type: %s is not q4_0, q5_0 or q8_0", type_arg);
    g_free (type_arg);
  }

  /* Up to BENCH_STREAM_ROWS tokens a contiguous share of whole tiles per
   * thread, as the engine splits them; more: rows claimed as it shares a
   * batch. */
  BenchPacked b = {
    .kern = llm_cpu_kernels_best (), .type = kind->type, .split_tokens = BENCH_STREAM_ROWS,
    .widths = { 2048, 5632 },
  };
  if (o.widths[0] > 0)
    memcpy (b.widths, o.widths, sizeof b.widths);
  const char *isa = bench_packed_pick (&b, kind->ref, kind->avx2 (), kind->avx512 ());
  if (fetch) {
    b.against = b.fn;
    bench_packed_pick (&b, kind->ref, kind->avx2_hw (), kind->avx512_hw ());
    if (b.fn == kind->ref)
      g_error ("--fetch: no packed kernel of this CPU fetches ahead itself");
  }
  GRand *rand = g_rand_new_with_seed (42);
  Fill fill = { kind, rand, 0 };
  bench_packed_setup (&b, o.layers, o.in_cache ? 128 : 0, rand, fill_matrix, &fill);
  if (o.in_cache)
    printf ("bench-q4_0x16: one 128x%zu %s matrix, %.1f kB of weights, in cache\n",
        b.widths[0], kind->name, (double) b.weight_bytes / 1e3);
  else
    printf ("bench-q4_0x16: %d layers of %zux%zu + %zux%zu %s, %.1f MB of weights\n", o.layers,
        b.widths[1], b.widths[0], b.widths[0], b.widths[1], kind->name,
        (double) b.weight_bytes / 1e6);
  if (fetch)
    printf ("packed kernel: %s, fetching ahead itself (kernel) and leaving it to the hardware "
        "(hw)\n", isa);
  else
    printf ("today's kernels: %s; packed kernel: %s\n", llm_cpu_kernels_name (b.kern), isa);
  printf ("pack (one thread, once at load): %.1f ms for all, %.2f GB/s\n", fill.pack_s * 1e3,
      (double) b.weight_bytes / fill.pack_s / 1e9);
  const double hz = o.in_cache ? bench_core_hz () : 0;
  if (o.in_cache)
    printf ("core clock (dependent adds): %.2f GHz\n", hz / 1e9);

  char ratio_head[32], header[160];
  g_snprintf (ratio_head, sizeof ratio_head, "x n_tok=%zu", o.token_counts[0]);
  g_snprintf (header, sizeof header, "%5s %12s %12s %8s %12s %10s %10s %s", "n_tok",
      fetch ? "kernel ns" : "today ns", fetch ? "hw ns" : "packed ns", "speedup",
      fetch ? "hw tok/s" : "packed tok/s", ratio_head, o.in_cache ? "cyc/tb" : "GB/s",
      fetch ? "same bits as kernel" : "same bits as today");
  Row row = { o.in_cache, hz };
  bench_packed_tables (&b, &o, o.in_cache ? 0 : o.bandwidth_mib, header, print_row, &row);
  if (o.in_cache)
    printf ("\ncyc/tb: packed/today, core cycles per token and 16-row block, per thread.\n");
  else
    printf ("\nGB/s at n_tok=1: packed/today, weight bytes read per second.\n");

  bench_packed_clear (&b);
  g_rand_free (rand);
  return 0;
}
