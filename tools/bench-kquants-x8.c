/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-kquants-x8: the packed K-quant kernels (kernels/cpu/kquants-x8.h)
 * against today's path for the same weights (llm_matvec for one token,
 * llm_matmul_shared, which packs per call, for more), with the kernels of
 * llm_cpu_kernels_best () (LLM_NO_AVX512=1 for the AVX2 ones), on
 * 246M-model-like matrices, for batches of 1 to 128 tokens and 1 and 2
 * threads, split as lib/backend-cpu.c splits them.
 *
 * "hot": one matrix, called again and again, so it sits in L2/L3;
 * "cold": calls rotate over copies that add up to several times the
 * last-level cache, so every call reads its weights from DRAM as decoding
 * a real model does. The two layouts are timed in turn, sample by sample,
 * and the medians printed, so load from other processes hits both alike.
 * GB/s is weight bytes (each layout's own) per second at one token,
 * next to the machine's streaming-read bandwidth (bench-bandwidth.c). */
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ggml-type.h"
#include "cpu/kquants.h"
#include "cpu/kquants-quantize.h"
#include "cpu/kquants-x8.h"
#include "cpu/matmul.h"
#include "cpu/threadpool.h"

#define MAX_TOK 128
static const size_t batches[] = { 1, 2, 4, 8, 16, 32, 128 };
#define N_BATCH G_N_ELEMENTS (batches)

typedef struct {
  uint32_t wtype;
  size_t rows, n, rb, xs;
  size_t n_copies;
  uint8_t *w_arena, *p_arena;
  uint8_t **w, **packed;        /* n_copies each, in the arenas */
  uint8_t *xq;
  float *y;
  const LlmCpuKernels *kern;
  LlmKx8Fn fn;
} Setup;

/* Calls of one layout, rotating over the copies. */
typedef struct {
  const Setup *s;
  bool packed;
  size_t copy;
  BenchProduct p;
} Call;

static void
call_init (Call *c, const Setup *s, bool packed, size_t n_tok, size_t step)
{
  *c = (Call) {
    .s = s, .packed = packed,
    .p = {
      .kern = s->kern, .type = s->wtype, .fn = packed ? s->fn : NULL, .row_bytes = s->rb,
      .rows = s->rows, .n = s->n, .xq = s->xq, .xs = s->xs, .n_tok = n_tok,
      .split_tokens = BENCH_STREAM_ROWS,
      .step = step, .y = s->y,
    },
  };
}

/* ns per call over @reps calls, rotating copies. */
static double
time_calls (LlmThreadPool *pool, Call *c, size_t reps)
{
  const double t0 = bench_seconds ();
  for (size_t i = 0; i < reps; i++) {
    c->copy = (c->copy + 1) % c->s->n_copies;
    c->p.w = c->packed ? c->s->packed[c->copy] : c->s->w[c->copy];
    atomic_store_explicit (&c->p.next, 0, memory_order_relaxed);
    llm_threadpool_run (pool, bench_product_task, &c->p);
  }
  return (bench_seconds () - t0) * 1e9 / reps;
}

static uint8_t *
random_matrix (uint32_t wtype, size_t rows, size_t n, size_t rb, GRand *rand)
{
  uint8_t *w = g_malloc (rows * rb);
  float *f = g_new (float, n);
  for (size_t r = 0; r < rows; r++) {
    for (size_t i = 0; i < n; i++)
      f[i] = (float) g_rand_double_range (rand, -0.05, 0.05);
    void *row = w + r * rb;
    llm_quantize_row_kquant (wtype, f, row, n);
  }
  g_free (f);
  return w;
}

static void
setup_init (Setup *s, uint32_t wtype, size_t rows, size_t n, size_t cold_bytes, GRand *rand)
{
  uint32_t bb = 0;
  llm_type_info (wtype, NULL, &bb);
  *s = (Setup) { .wtype = wtype, .rows = rows, .n = n, .rb = n / LLM_QK_K * bb };
  s->kern = llm_cpu_kernels_best ();
  s->fn = llm_cpu_kernels_isa (s->kern) == LLM_CPU_ISA_AVX512 ? llm_avx512_kx8_fn (wtype)
      : llm_cpu_kernels_isa (s->kern) == LLM_CPU_ISA_AVX2 ? llm_avx2_kx8_fn (wtype)
      : llm_kx8_ref_fn (wtype);
  const size_t bytes = rows * s->rb;
  s->n_copies = cold_bytes > 0 ? (cold_bytes + bytes - 1) / bytes : 1;
  s->w = g_new (uint8_t *, s->n_copies);
  s->packed = g_new (uint8_t *, s->n_copies);
  /* Copies of one matrix, each starting on a fresh 4 KiB page: the same
   * work at other addresses. */
  const size_t wstride = (bytes + 4095) / 4096 * 4096;
  const size_t pbytes = llm_kx8_bytes (wtype, rows, n), pstride = (pbytes + 4095) / 4096 * 4096;
  s->w_arena = bench_alloc_big (s->n_copies * wstride);
  s->p_arena = bench_alloc_big (s->n_copies * pstride);
  uint8_t *w0 = random_matrix (wtype, rows, n, s->rb, rand);
  for (size_t c = 0; c < s->n_copies; c++) {
    s->w[c] = s->w_arena + c * wstride;
    memcpy (s->w[c], w0, bytes);
    s->packed[c] = s->p_arena + c * pstride;
    llm_kx8_pack (wtype, w0, s->rb, rows, n, 0, (rows + 15) / 16, s->packed[c]);
  }
  g_free (w0);
  s->xs = llm_matmul_act_bytes (wtype, n);
  s->xq = g_malloc (MAX_TOK * s->xs);
  float *x = g_new (float, n);
  for (size_t t = 0; t < MAX_TOK; t++) {
    for (size_t i = 0; i < n; i++)
      x[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
    llm_matmul_convert (s->kern, wtype, x, n, s->xq + t * s->xs);
  }
  g_free (x);
  s->y = g_new (float, MAX_TOK * rows);
}

static void
setup_clear (Setup *s)
{
  free (s->w_arena);
  free (s->p_arena);
  g_free (s->w);
  g_free (s->packed);
  g_free (s->xq);
  g_free (s->y);
}

/* One table: every batch size, both layouts timed in turn @samples times. */
static void
run_table (const Setup *s, LlmThreadPool *pool, int nth, const char *mode, int samples,
    double bandwidth)
{
  double t_old[N_BATCH], t_new[N_BATCH];
  const size_t step = bench_claim_step (s->rows, nth);
  for (size_t bi = 0; bi < N_BATCH; bi++) {
    Call old, pk;
    call_init (&old, s, false, batches[bi], step);
    call_init (&pk, s, true, batches[bi], step);
    /* Calls per sample: about 2 ms worth, at least one pass over the copies. */
    time_calls (pool, &old, 2);
    const double guess = time_calls (pool, &pk, 2);
    size_t reps = (size_t) (2e6 / MAX (guess, 1.0)) + 1;
    if (s->n_copies > 1)
      reps = MAX (reps, s->n_copies);
    double *so = g_new (double, samples), *sn = g_new (double, samples);
    for (int i = 0; i < samples; i++) {
      so[i] = time_calls (pool, &old, reps);
      sn[i] = time_calls (pool, &pk, reps);
    }
    t_old[bi] = bench_median (so, samples);
    t_new[bi] = bench_median (sn, samples);
    g_free (so);
    g_free (sn);
  }
  const double gguf_mb = s->rows * s->rb / 1e6;
  const double packed_mb = llm_kx8_bytes (s->wtype, s->rows, s->n) / 1e6;
  printf ("\n%s %zux%zu (rows x n), %s, %d thread%s, %s: %.2f MB GGUF, %.2f MB packed\n",
      llm_type_name (s->wtype), s->rows, s->n, llm_cpu_kernels_name (s->kern), nth,
      nth > 1 ? "s" : "", mode, gguf_mb, packed_mb);
  printf ("  n_tok   today ns  packed ns  today/packed  today/1tok  packed/1tok\n");
  for (size_t bi = 0; bi < N_BATCH; bi++)
    printf ("  %5zu %10.0f %10.0f %13.2f %11.2f %12.2f\n", batches[bi], t_old[bi], t_new[bi],
        t_old[bi] / t_new[bi], t_old[bi] / t_old[0], t_new[bi] / t_new[0]);
  printf ("  1 token: today %.1f GB/s, packed %.1f GB/s of weights; streaming read %.1f GB/s\n",
      gguf_mb * 1e-3 / (t_old[0] * 1e-9), packed_mb * 1e-3 / (t_new[0] * 1e-9), bandwidth / 1e9);
}

static uint32_t
parse_type (const char *name)
{
  if (g_ascii_strcasecmp (name, "q4_k") == 0)
    return LLM_TYPE_Q4_K;
  if (g_ascii_strcasecmp (name, "q5_k") == 0)
    return LLM_TYPE_Q5_K;
  if (g_ascii_strcasecmp (name, "q6_k") == 0)
    return LLM_TYPE_Q6_K;
  g_printerr ("unknown type %s (q4_k, q5_k, q6_k)\n", name);
  exit (2);
}

int
main (int argc, char **argv)
{
  char *types = NULL, *shapes = NULL, *threads = NULL, *modes = NULL;
  int samples = 9, cold_mib = 256;
  const GOptionEntry entries[] = {
    { "types", 0, 0, G_OPTION_ARG_STRING, &types, "Weight types (default q4_k,q5_k,q6_k)",
      "T,..." },
    { "shapes", 0, 0, G_OPTION_ARG_STRING, &shapes,
      "Matrices as ROWSxN (default 1024x2816,2816x1024)", "RxN,..." },
    { "threads", 't', 0, G_OPTION_ARG_STRING, &threads, "Thread counts (default 1,2)", "N,..." },
    { "modes", 0, 0, G_OPTION_ARG_STRING, &modes, "hot, cold or both (default hot,cold)",
      "M,..." },
    { "samples", 's', 0, G_OPTION_ARG_INT, &samples, "Timed samples per layout (default 9)",
      "N" },
    { "cold-mib", 0, 0, G_OPTION_ARG_INT, &cold_mib,
      "Bytes the cold copies add up to, MiB (default 256)", "N" },
    { NULL },
  };
  GOptionContext *ctx = g_option_context_new ("- packed K-quant kernels against today's");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    g_printerr ("%s\n", error->message);
    return 2;
  }
  g_option_context_free (ctx);
  char **type_v = g_strsplit (types ? types : "q4_k,q5_k,q6_k", ",", -1);
  char **shape_v = g_strsplit (shapes ? shapes : "1024x2816,2816x1024", ",", -1);
  char **thread_v = g_strsplit (threads ? threads : "1,2", ",", -1);
  char **mode_v = g_strsplit (modes ? modes : "hot,cold", ",", -1);

  printf ("kernels: %s (LLM_NO_AVX512=1 for the AVX2 ones)\n",
      llm_cpu_kernels_name (llm_cpu_kernels_best ()));
  double bandwidth[8] = { 0 };
  for (char **t = thread_v; *t; t++) {
    const int nth = atoi (*t);
    if (nth >= 1 && nth < 8) {
      bandwidth[nth] = bench_read_bandwidth ((gsize) 512 << 20, nth, 5, NULL);
      printf ("streaming read, %d thread%s: %.1f GB/s\n", nth, nth > 1 ? "s" : "",
          bandwidth[nth] / 1e9);
    }
  }

  GRand *rand = g_rand_new_with_seed (42);
  for (char **ty = type_v; *ty; ty++) {
    const uint32_t wtype = parse_type (*ty);
    for (char **sh = shape_v; *sh; sh++) {
      size_t rows = 0, n = 0;
      if (sscanf (*sh, "%zux%zu", &rows, &n) != 2 || n % LLM_QK_K != 0 || rows == 0) {
        g_printerr ("bad shape %s (ROWSxN, N a multiple of 256)\n", *sh);
        return 2;
      }
      for (char **m = mode_v; *m; m++) {
        const bool cold = strcmp (*m, "cold") == 0;
        Setup s;
        setup_init (&s, wtype, rows, n, cold ? (size_t) cold_mib << 20 : 0, rand);
        for (char **t = thread_v; *t; t++) {
          const int nth = atoi (*t);
          if (nth < 1 || nth >= 8)
            continue;
          LlmThreadPool *pool = llm_threadpool_new (nth);
          run_table (&s, pool, nth, cold ? "cold (from DRAM)" : "hot (in cache)", samples,
              bandwidth[nth]);
          llm_threadpool_free (pool);
          fflush (stdout);
        }
        setup_clear (&s);
      }
    }
  }
  g_rand_free (rand);
  g_strfreev (type_v);
  g_strfreev (shape_v);
  g_strfreev (thread_v);
  g_strfreev (mode_v);
  g_free (types);
  g_free (shapes);
  g_free (threads);
  g_free (modes);
  return 0;
}
