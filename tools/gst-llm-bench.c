/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-bench: prompt and decode speed of the engine, in the manner of
 * llama-bench, against the memory-bandwidth ceiling of decoding.
 *
 * Per model and setting (threads x KV type x depth x prompt x generation
 * lengths) each repetition cuts the KV cache back to --depth random tokens
 * (evaluated once per setting, untimed), evaluates a random prompt in one
 * call (pp, TTFT) and then generates greedily one token per call (tg,
 * ITL). --streams runs many streams on one engine instead
 * (bench-streams.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include <glib.h>

#include "bench.h"
#include "engine.h"
#include "cpu/isa.h"
#include "ggml-type.h"
#include "gguf.h"
#include "kvcache.h"
#include "model.h"
#include "cpu/matmul.h"
#include "model-private.h"
#include "backend.h"
#include "engine-private.h"
#include "spec-budget.h"
#include "spec-step.h"

typedef struct {
  char **models;
  char **prompt_lens, **gen_lens, **thread_counts, **kv_types, **depths, **streams, **batch;
  double duration;
  int max_batch_wait_us;
  int max_prefill_chunk;
  char *spec;                 /* method, or NULL */
  int spec_draft_max;
  char *draft_model;
  double draft_p_min;
  gboolean draft_ahead;
  char *draft_table;          /* a directory, or NULL */
  char **spec_prompts, **draft_maxes;
  double max_rate_deviation;  /* 0: no check */
  gint64 max_rss_growth_kb;   /* < 0: no check */
  int reps;
  gboolean json;
  gboolean no_warmup;
  gboolean pipeline;
  gint64 seed;
  int bandwidth_mib;          /* < 0: BANDWIDTH_MIB before the runs, the weights' beside them */
  char *make_shape, *make_type, *output, *widen;
  int make_layers;            /* 0: the shape's */
  char *vision, *vision_image;
  char *audio, *audio_pcm;
} Options;

typedef struct {
  guint threads, depth, n_prompt, n_gen;
  LlmKvType kv_type;
} Setting;

/* Mean and sample standard deviation of one figure over repetitions. */
typedef struct {
  double mean, sd;
  guint n;
} Stat;

typedef struct {
  Stat pp_tps, tg_tps, ttft_ms, itl_mean, itl_p95;
  /* How the decode steps fetched their weights (lib/fetch-choice.h): the
   * steps each way, none where the engine had no choice. */
  LlmFetchChoice fetch;
  gsize kv_bytes;
  guint32 kv_positions;
  guint64 peak_rss;
  /* Each repetition's tg and the read bandwidth measured around it (the
   * best pass just before and just after it), @n_reps of each (0: not
   * measured); freed after printing. */
  double *rep_tg, *rep_bandwidth;
  gsize rep_bandwidth_bytes;  /* the buffer the read test beside the runs read */
  guint n_reps;
  /* Through the elements, when --pipeline. */
  Stat pipe_pp, pipe_tg, pipe_ttft, pipe_itl_mean, pipe_itl_p95;
  Stat pipe_overhead;         /* % more ITL than direct calls, paired per repetition */
  gboolean have_pipe;
  char *pipe_error;
} Result;

/* Passes of the read test before and after each repetition's decode. */
#define PAIRED_PASSES 5

/* The read test's buffer before the runs, unless --bandwidth-mib says. */
#define BANDWIDTH_MIB 512

/* The buffer of the read test beside a decode's runs: as large as what a
 * step reads (rounded up to whole 2 MiB pages), unless --bandwidth-mib
 * says (0: none), so the test meets the caches as the decode does. A
 * model a few times the size of the last-level cache finds part of itself
 * there each step, and so does a test over as many bytes: on Zen 5 (32
 * MiB of L3 a CCD) two threads read 128 MiB at 70-90 GB/s and 512 MiB at
 * 52-66 in the same minutes, and 246M Q4_0 (122.5 MiB a token) was 71-84%
 * of the first and 80-86% of the second. */
static gsize
paired_bytes (const Options *o, const LlmModel *m)
{
  if (o->bandwidth_mib >= 0)
    return (gsize) o->bandwidth_mib << 20;
  const gsize page = 2u << 20;
  return (m->weight_bytes + page - 1) / page * page;
}

/* The bytes a decode step of @s reads on average: the weights and the KV
 * cache (@kv_bytes over @kv_positions) at the mid depth of the decode. */
static double
tg_bytes_with_kv (const LlmModel *m, const Setting *s, gsize kv_bytes, guint32 kv_positions)
{
  const double per_pos = kv_positions > 0 ? (double) kv_bytes / kv_positions : 0;
  return m->weight_bytes + per_pos * (s->depth + s->n_prompt + s->n_gen / 2.0);
}

/* --- small helpers (bench.h; bench-streams.c uses them too) --- */

double
bench_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double (const void *a, const void *b);

double
bench_median_sort (double *v, guint n)
{
  qsort (v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static Stat
stat_of (const double *v, guint n)
{
  Stat s = { NAN, NAN, n };
  if (n == 0)
    return s;
  double sum = 0;
  for (guint i = 0; i < n; i++)
    sum += v[i];
  s.mean = sum / n;
  double ss = 0;
  for (guint i = 0; i < n; i++)
    ss += (v[i] - s.mean) * (v[i] - s.mean);
  s.sd = n > 1 ? sqrt (ss / (n - 1)) : 0;
  return s;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

double
bench_percentile (double *v, guint n, double p)
{
  if (n == 0)
    return NAN;
  qsort (v, n, sizeof *v, cmp_double);
  guint rank = (guint) ceil (p / 100.0 * n);
  return v[rank > 0 ? rank - 1 : 0];
}

LlmEngine *
bench_engine_new (LlmModel *model, int n_threads, GError **error)
{
  LlmEngineOptions opts;
  llm_engine_options_init (&opts);
  opts.n_threads = n_threads;
  return llm_engine_new (model, &opts, error);
}

/* Any id of the vocabulary, as llama-bench does: speed does not depend on
 * which tokens, only on how many. */
void
bench_fill_random (GRand *rand, gint32 *ids, guint n, guint n_vocab)
{
  for (guint i = 0; i < n; i++)
    ids[i] = g_rand_int_range (rand, 0, (gint32) n_vocab);
}

/* Field @name ("VmRSS:") of /proc/self/status in KiB, or 0. */
static guint64
proc_status_kb (const char *name)
{
  g_autofree char *status = NULL;
  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    return 0;
  const char *p = strstr (status, name);
  return p != NULL ? g_ascii_strtoull (p + strlen (name), NULL, 10) : 0;
}

guint64
bench_rss_kb (void)
{
  return proc_status_kb ("VmRSS:");
}

/* Peak resident memory since the last reset_peak_rss(): VmHWM, which
 * counts the mapped weights the run touched. */
static guint64
peak_rss_bytes (void)
{
  const guint64 hwm = proc_status_kb ("VmHWM:");
  if (hwm > 0)
    return hwm * 1024;
  struct rusage ru;
  if (getrusage (RUSAGE_SELF, &ru) == 0)
    return (guint64) ru.ru_maxrss * 1024;
  return 0;
}

/* Linux: writing 5 to clear_refs restarts VmHWM from the current RSS, so
 * each setting reports its own peak. Elsewhere the peak is the process's. */
static void
reset_peak_rss (void)
{
  FILE *f = fopen ("/proc/self/clear_refs", "w");
  if (f != NULL) {
    fputs ("5", f);
    fclose (f);
  }
}

static gboolean
parse_uint_list (char **args, const char *def, const char *what, GArray *out, GError **error)
{
  const char *const defs[] = { def, NULL };
  const char *const *list = args ? (const char *const *) args : defs;
  for (; *list != NULL; list++) {
    g_auto (GStrv) parts = g_strsplit (*list, ",", -1);
    for (char **p = parts; *p != NULL; p++) {
      guint64 v;
      if (!g_ascii_string_to_unsigned (g_strstrip (*p), 10, 0, G_MAXINT32, &v, NULL)) {
        g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
            "%s: '%s' is not a non-negative integer", what, *p);
        return FALSE;
      }
      guint u = (guint) v;
      g_array_append_val (out, u);
    }
  }
  return TRUE;
}

/* Whether a list of parse_uint_list holds a 0. */
static gboolean
has_zero (GArray *list)
{
  for (guint i = 0; i < list->len; i++)
    if (g_array_index (list, guint, i) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
parse_kv_list (char **args, GArray *out, GError **error)
{
  const char *const defs[] = { "f16", NULL };
  const char *const *list = args ? (const char *const *) args : defs;
  for (; *list != NULL; list++) {
    g_auto (GStrv) parts = g_strsplit (*list, ",", -1);
    for (char **p = parts; *p != NULL; p++) {
      LlmKvType t;
      if (!llm_kv_type_from_name (g_strstrip (*p), &t)) {
        g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
            "--kv-type: '%s' is not one of f16, q8_0, q4_0, f32", *p);
        return FALSE;
      }
      g_array_append_val (out, t);
    }
  }
  return TRUE;
}

/* --- what the model is --- */

typedef struct {
  char *name;                 /* file name */
  char *type;                 /* "Q4_K_M", "F16", ... */
  guint64 params;
  guint64 size;               /* bytes of all tensors */
} ModelInfo;

static const char *
ftype_name (guint64 ftype)
{
  /* llama.cpp's llama_ftype, as general.file_type stores it. */
  switch (ftype) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return NULL;
  }
}

static ModelInfo
model_info (const LlmModel *m)
{
  ModelInfo info = { g_path_get_basename (m->path), NULL, 0, 0 };
  guint64 by_type[64] = { 0 };
  for (guint64 i = 0; i < llm_gguf_n_tensors (m->gguf); i++) {
    const LlmGgufTensor *t = llm_gguf_tensor (m->gguf, i);
    info.params += t->n_elems;
    info.size += t->size;
    if (t->type < G_N_ELEMENTS (by_type))
      by_type[t->type] += t->size;
  }
  guint64 ft;
  const char *name = NULL;
  if (llm_gguf_get_uint (m->gguf, "general.file_type", &ft, NULL))
    name = ftype_name (ft);
  if (name == NULL) {
    /* No file type: the type holding most bytes. */
    guint best = 0;
    for (guint t = 1; t < G_N_ELEMENTS (by_type); t++)
      if (by_type[t] > by_type[best])
        best = t;
    name = llm_type_name (best);
  }
  info.type = g_strdup (name);
  return info;
}

/* --- the measurement --- */

/* One repetition's figures; a setting without prompt or generation leaves
 * the matching ones unset. */
typedef struct {
  double pp, ttft, tg, itl_mean, itl_p95;
} Rep;

/* One repetition on @ctx, whose cache holds what the repetition starts
 * from: @prompt (@s->n_prompt ids) in one call, then @s->n_gen greedy
 * decode steps. @itl has room for n_gen values. */
static gboolean
run_rep (LlmSeq *ctx, const Setting *s, GRand *rand, const gint32 *prompt, float *logits,
    double *itl, Rep *rep, GError **error)
{
  const guint n_vocab = llm_engine_model (llm_seq_engine (ctx))->hp.n_vocab;
  gint32 next;
  if (s->n_prompt > 0) {
    double t0 = bench_now_ms ();
    if (!llm_seq_eval_tokens (ctx, prompt, s->n_prompt, logits, FALSE, error))
      return FALSE;
    double t1 = bench_now_ms ();
    next = llm_argmax (logits, n_vocab);
    double t2 = bench_now_ms ();
    rep->pp = s->n_prompt / ((t1 - t0) / 1e3);
    rep->ttft = t2 - t0;
  } else {
    bench_fill_random (rand, &next, 1, n_vocab);
  }
  if (s->n_gen > 0) {
    double total = 0;
    for (guint i = 0; i < s->n_gen; i++) {
      double t0 = bench_now_ms ();
      if (!llm_seq_eval_tokens (ctx, &next, 1, logits, FALSE, error))
        return FALSE;
      next = llm_argmax (logits, n_vocab);
      itl[i] = bench_now_ms () - t0;
      total += itl[i];
    }
    rep->tg = s->n_gen / (total / 1e3);
    rep->itl_mean = total / s->n_gen;
    rep->itl_p95 = bench_percentile (itl, s->n_gen, 95);
  }
  return TRUE;
}

/* A context for @s whose cache holds @s->depth random tokens, warmed up. */
static LlmSeq *
prepare_context (LlmModel *model, const Setting *s, const Options *o, GRand *rand,
    float *logits, GError **error)
{
  const guint n_vocab = model->hp.n_vocab;
  LlmKvConfig kvc = {
    .type = s->kv_type,
    .policy = LLM_KV_POLICY_FULL,
    .context_length = MAX (8, s->depth + s->n_prompt + s->n_gen),
  };
  g_autoptr (LlmSeq) ctx = llm_seq_new_standalone (model, &kvc, (int) s->threads, error);
  if (ctx == NULL)
    return NULL;
  LlmKvCache *kv = llm_seq_kv (ctx);

  /* Warm-up: touches every weight page and starts the workers, so the
   * first repetition does not pay for page faults. */
  if (!o->no_warmup) {
    gint32 w[8];
    bench_fill_random (rand, w, G_N_ELEMENTS (w), n_vocab);
    if (!llm_seq_eval_tokens (ctx, w, G_N_ELEMENTS (w), logits, FALSE, error))
      return NULL;
    llm_kv_cache_clear (kv);
  }
  /* The depth is filled once; each repetition cuts the cache back to it,
   * which leaves the same state as refilling at a fraction of the time
   * (filling 4096 positions takes longer than what is measured after). */
  if (s->depth > 0) {
    g_autofree gint32 *ids = g_new (gint32, s->depth);
    bench_fill_random (rand, ids, s->depth, n_vocab);
    if (!llm_seq_eval_tokens (ctx, ids, s->depth, NULL, FALSE, error))
      return NULL;
  }
  return g_steal_pointer (&ctx);
}

static gboolean
run_setting (LlmModel *model, const Setting *s, const Options *o, Result *res, GError **error)
{
  const guint n_vocab = model->hp.n_vocab;
  g_autofree float *logits = g_new (float, n_vocab);
  g_autoptr (GRand) rand = g_rand_new_with_seed ((guint32) o->seed);
  reset_peak_rss ();
  g_autoptr (LlmSeq) ctx = prepare_context (model, s, o, rand, logits, error);
  if (ctx == NULL)
    return FALSE;
  LlmKvCache *kv = llm_seq_kv (ctx);

  g_autofree gint32 *prompt = g_new (gint32, MAX (1, s->n_prompt));
  g_autofree double *itl = g_new (double, MAX (1, s->n_gen));
  g_autofree double *pp = g_new (double, o->reps), *tg = g_new (double, o->reps),
      *ttft = g_new (double, o->reps), *itl_mean = g_new (double, o->reps),
      *itl_p95 = g_new (double, o->reps), *bw = g_new (double, o->reps);
  /* Memory speed here drifts by up to 2x within minutes (another tenant
   * on the bus, the host's own phases), so the read test before all runs
   * can belong to another phase than a repetition: each is compared with
   * the bandwidth of its own seconds. */
  g_autoptr (BenchReader) reader = NULL;
  const gsize paired = paired_bytes (o, model);
  if (paired > 0 && s->n_gen > 0 && model->weight_bytes > 0) {
    GError *bw_error = NULL;
    reader = bench_reader_new (paired, (int) s->threads, &bw_error);
    if (reader == NULL) {
      g_printerr ("gst-llm-bench: bandwidth test beside the runs: %s; 'of ceiling' uses the "
          "one before them\n", bw_error->message);
      g_error_free (bw_error);
    }
  }
  for (int r = 0; r < o->reps; r++) {
    llm_kv_cache_truncate (kv, s->depth);
    bench_fill_random (rand, prompt, s->n_prompt, n_vocab);
    const double before = reader != NULL ? bench_reader_best (reader, PAIRED_PASSES, 0) : 0;
    Rep rep;
    if (!run_rep (ctx, s, rand, prompt, logits, itl, &rep, error))
      return FALSE;
    if (reader != NULL)
      bw[r] = MAX (before, bench_reader_best (reader, PAIRED_PASSES, 0));
    pp[r] = rep.pp;
    ttft[r] = rep.ttft;
    tg[r] = rep.tg;
    itl_mean[r] = rep.itl_mean;
    itl_p95[r] = rep.itl_p95;
  }
  guint n_pp = s->n_prompt > 0 ? o->reps : 0, n_tg = s->n_gen > 0 ? o->reps : 0;
  res->pp_tps = stat_of (pp, n_pp);
  res->ttft_ms = stat_of (ttft, n_pp);
  res->tg_tps = stat_of (tg, n_tg);
  res->itl_mean = stat_of (itl_mean, n_tg);
  res->itl_p95 = stat_of (itl_p95, n_tg);
  if (reader != NULL) {
    res->rep_tg = g_memdup2 (tg, o->reps * sizeof (double));
    res->rep_bandwidth = g_memdup2 (bw, o->reps * sizeof (double));
    res->rep_bandwidth_bytes = paired;
    res->n_reps = (guint) o->reps;
  }
  /* Another backend than the CPU's has no such choice: no steps counted. */
  const LlmFetchChoice *fetch = llm_backend_cpu_fetch (llm_seq_engine (ctx)->backend);
  if (fetch != NULL)
    res->fetch = *fetch;
  res->kv_bytes = llm_kv_cache_bytes (kv);
  res->kv_positions = llm_kv_cache_n (kv);
  res->peak_rss = peak_rss_bytes ();
  return TRUE;
}

/* Each repetition runs the same prompt once through direct calls and once
 * through the elements, back to back, so the overhead is a paired
 * comparison that a busy machine slows on both sides alike. */
static void
run_pipeline (LlmModel *model, const Setting *s, const Options *o, Result *res)
{
  if (s->n_prompt == 0 || s->n_gen == 0) {
    res->pipe_error = g_strdup ("--pipeline needs -p and -n above 0");
    return;
  }
  /* --depth does not apply: the elements start from an empty cache. */
  Setting flat = *s;
  flat.depth = 0;
  const guint n_vocab = model->hp.n_vocab;
  g_autofree float *logits = g_new (float, n_vocab);
  g_autoptr (GRand) rand = g_rand_new_with_seed ((guint32) o->seed);
  GError *error = NULL;
  g_autoptr (LlmSeq) ctx = prepare_context (model, &flat, o, rand, logits, &error);
  if (ctx == NULL) {
    res->pipe_error = g_strdup (error->message);
    g_error_free (error);
    return;
  }
  g_autofree gint32 *prompt = g_new (gint32, s->n_prompt);
  g_autofree double *itl = g_new (double, s->n_gen);
  g_autofree double *pp = g_new (double, o->reps), *tg = g_new (double, o->reps),
      *ttft = g_new (double, o->reps), *im = g_new (double, o->reps),
      *ip = g_new (double, o->reps), *over = g_new (double, o->reps);
  guint n = 0;
  for (int r = 0; r < o->reps; r++) {
    bench_fill_random (rand, prompt, s->n_prompt, n_vocab);
    llm_kv_cache_clear (llm_seq_kv (ctx));
    Rep direct;
    BenchPipelineResult pr;
    if (!run_rep (ctx, &flat, rand, prompt, logits, itl, &direct, &error) ||
        !bench_pipeline_run (model->path, prompt, s->n_prompt, s->n_gen, (int) s->threads,
            s->kv_type, s->n_prompt + s->n_gen + 1, &pr, &error)) {
      res->pipe_error = g_strdup (error->message);
      g_clear_error (&error);
      break;
    }
    pp[n] = pr.pp_tokens_per_s;
    tg[n] = pr.tg_tokens_per_s;
    ttft[n] = pr.ttft_ms;
    im[n] = pr.itl_ms_mean;
    ip[n] = pr.itl_ms_p95;
    over[n] = 100.0 * (pr.itl_ms_mean - direct.itl_mean) / direct.itl_mean;
    n++;
  }
  if (n > 0) {
    res->have_pipe = TRUE;
    res->pipe_pp = stat_of (pp, n);
    res->pipe_tg = stat_of (tg, n);
    res->pipe_ttft = stat_of (ttft, n);
    res->pipe_itl_mean = stat_of (im, n);
    res->pipe_itl_p95 = stat_of (ip, n);
    res->pipe_overhead = stat_of (over, n);
  }
}

/* --- output --- */

static void
json_string (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (const guchar *p = (const guchar *) s; *p; p++) {
    if (*p == '"' || *p == '\\')
      g_string_append_printf (out, "\\%c", *p);
    else if (*p < 0x20)
      g_string_append_printf (out, "\\u%04x", *p);
    else
      g_string_append_c (out, (char) *p);
  }
  g_string_append_c (out, '"');
}

/* @key and the string @v, escaped, as a further member. */
static void
json_text (GString *out, const char *key, const char *v)
{
  g_string_append_printf (out, ", \"%s\": ", key);
  json_string (out, v);
}

static void
json_value (GString *out, double v)
{
  if (isfinite (v)) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append (out, g_ascii_formatd (buf, sizeof buf, "%.6g", v));
  } else {
    g_string_append (out, "null");
  }
}

static void
json_number (GString *out, const char *key, double v)
{
  g_string_append_printf (out, ", \"%s\": ", key);
  json_value (out, v);
}

/* @key and the @n values @v as an array. */
static void
json_numbers (GString *out, const char *key, const double *v, guint n)
{
  g_string_append_printf (out, ", \"%s\": [", key);
  for (guint i = 0; i < n; i++) {
    if (i > 0)
      g_string_append (out, ", ");
    json_value (out, v[i]);
  }
  g_string_append_c (out, ']');
}

static void
json_int (GString *out, const char *key, guint64 v)
{
  g_string_append_printf (out, ", \"%s\": %" G_GUINT64_FORMAT, key, v);
}

typedef struct {
  double bandwidth;           /* bytes/s, 0 when not measured */
  double ceiling;             /* tokens/s from the weights alone */
  double fraction;            /* tg / ceiling */
  double fraction_with_kv;    /* counting the KV bytes read at the mean tg depth */
} Roofline;

static Roofline
roofline (const LlmModel *m, const Setting *s, const Result *r, double bandwidth)
{
  Roofline rf = { bandwidth, NAN, NAN, NAN };
  if (bandwidth <= 0 || m->weight_bytes == 0)
    return rf;
  const double with_kv = r->kv_positions > 0
      ? tg_bytes_with_kv (m, s, r->kv_bytes, r->kv_positions) : NAN;
  if (r->n_reps > 0) {
    /* Each repetition against the bandwidth of its own seconds: medians. */
    g_autofree double *bw = g_memdup2 (r->rep_bandwidth, r->n_reps * sizeof (double));
    g_autofree double *frac = g_new (double, r->n_reps), *frac_kv = g_new (double, r->n_reps);
    for (guint i = 0; i < r->n_reps; i++) {
      frac[i] = r->rep_tg[i] / (bw[i] / m->weight_bytes);
      frac_kv[i] = r->rep_tg[i] / (bw[i] / with_kv);
    }
    rf.bandwidth = bench_median_sort (bw, r->n_reps);
    rf.ceiling = rf.bandwidth / m->weight_bytes;
    rf.fraction = bench_median_sort (frac, r->n_reps);
    rf.fraction_with_kv = bench_median_sort (frac_kv, r->n_reps);
    return rf;
  }
  rf.ceiling = bandwidth / m->weight_bytes;
  rf.fraction = r->tg_tps.mean / rf.ceiling;
  rf.fraction_with_kv = r->tg_tps.mean / (bandwidth / with_kv);
  return rf;
}

/* An object's first fields, what every line says: model, machine, setting. */
static GString *
json_begin (const LlmModel *m, const ModelInfo *info, const Setting *s)
{
  GString *o = g_string_new ("{\"model\": ");
  json_string (o, info->name);
  json_text (o, "model_path", m->path);
  json_text (o, "arch", llm_arch_name (m->hp.arch));
  json_text (o, "type", info->type);
  json_int (o, "params", info->params);
  json_int (o, "size_bytes", info->size);
  json_int (o, "weight_bytes_per_token", m->weight_bytes);
  json_int (o, "threads", s->threads);
  json_text (o, "kernels", llm_cpu_isa_name (llm_cpu_isa_best ()));
  json_text (o, "kv_type", llm_kv_type_name (s->kv_type));
  return o;
}

static void
json_end (GString *o)
{
  g_string_append (o, "}");
  g_print ("%s\n", o->str);
  fflush (stdout);
  g_string_free (o, TRUE);
}

/* Decode steps whose way of fetching was chosen (and timed). */
static guint64
fetch_steps (const Result *r)
{
  return r->fetch.steps[LLM_FETCH_KERNEL] + r->fetch.steps[LLM_FETCH_HARDWARE];
}

static void
print_json (const LlmModel *m, const ModelInfo *info, const Setting *s, const Result *r,
    const Roofline *rf)
{
  GString *o = json_begin (m, info, s);
  json_int (o, "depth", s->depth);
  json_int (o, "n_prompt", s->n_prompt);
  json_int (o, "n_gen", s->n_gen);
  json_int (o, "repetitions", MAX (r->pp_tps.n, r->tg_tps.n));
  json_number (o, "pp_tokens_per_s", r->pp_tps.mean);
  json_number (o, "pp_tokens_per_s_sd", r->pp_tps.sd);
  json_number (o, "tg_tokens_per_s", r->tg_tps.mean);
  json_number (o, "tg_tokens_per_s_sd", r->tg_tps.sd);
  json_number (o, "ttft_ms", r->ttft_ms.mean);
  json_number (o, "ttft_ms_sd", r->ttft_ms.sd);
  json_number (o, "itl_ms_mean", r->itl_mean.mean);
  json_number (o, "itl_ms_mean_sd", r->itl_mean.sd);
  json_number (o, "itl_ms_p95", r->itl_p95.mean);
  json_number (o, "itl_ms_p95_sd", r->itl_p95.sd);
  json_int (o, "peak_rss_bytes", r->peak_rss);
  json_int (o, "kv_bytes", r->kv_bytes);
  json_number (o, "bandwidth_bytes_per_s", rf->bandwidth);
  json_number (o, "tg_ceiling_tokens_per_s", rf->ceiling);
  json_number (o, "bandwidth_fraction", rf->fraction);
  json_number (o, "bandwidth_fraction_with_kv", rf->fraction_with_kv);
  if (r->n_reps > 0) {
    /* What the medians above come from. */
    json_numbers (o, "tg_tokens_per_s_by_repetition", r->rep_tg, r->n_reps);
    json_numbers (o, "bandwidth_bytes_per_s_by_repetition", r->rep_bandwidth, r->n_reps);
    json_int (o, "bandwidth_test_bytes", r->rep_bandwidth_bytes);
  }
  if (fetch_steps (r) > 0) {
    json_int (o, "tg_steps_fetched_by_kernel", r->fetch.steps[LLM_FETCH_KERNEL]);
    json_int (o, "tg_steps_fetched_by_hardware", r->fetch.steps[LLM_FETCH_HARDWARE]);
    json_number (o, "tg_fetch_hardware_over_kernel", r->fetch.ratio);
  }
  if (r->have_pipe) {
    json_number (o, "pipeline_pp_tokens_per_s", r->pipe_pp.mean);
    json_number (o, "pipeline_tg_tokens_per_s", r->pipe_tg.mean);
    json_number (o, "pipeline_tg_tokens_per_s_sd", r->pipe_tg.sd);
    json_number (o, "pipeline_ttft_ms", r->pipe_ttft.mean);
    json_number (o, "pipeline_itl_ms_mean", r->pipe_itl_mean.mean);
    json_number (o, "pipeline_itl_ms_p95", r->pipe_itl_p95.mean);
    json_number (o, "pipeline_overhead_percent", r->pipe_overhead.mean);
    json_number (o, "pipeline_overhead_percent_sd", r->pipe_overhead.sd);
  }
  if (r->pipe_error != NULL) {
    json_text (o, "pipeline_error", r->pipe_error);
  }
  json_end (o);
}

static char *
fmt_stat (Stat s, const char *fmt)
{
  if (s.n == 0 || !isfinite (s.mean))
    return g_strdup ("-");
  g_autofree char *m = g_strdup_printf (fmt, s.mean);
  g_autofree char *d = g_strdup_printf (fmt, s.sd);
  return s.n > 1 ? g_strdup_printf ("%s +/- %s", m, d) : g_strdup (m);
}

static void
print_table_header (void)
{
  g_print ("| model | type | params | weights/token | th | kv | depth | test | t/s "
      "| TTFT ms | ITL ms mean | ITL ms p95 | ceiling t/s | of ceiling | peak RSS MiB "
      "| KV MiB |\n");
  g_print ("|---|---|--:|--:|--:|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
}

static void
print_rows (const LlmModel *m, const ModelInfo *info, const Setting *s, const Result *r,
    const Roofline *rf)
{
  g_autofree char *params = g_strdup_printf ("%.1f M", info->params / 1e6);
  g_autofree char *wpt = g_strdup_printf ("%.1f MiB", m->weight_bytes / 1048576.0);
  if (s->n_prompt > 0) {
    g_autofree char *tps = fmt_stat (r->pp_tps, "%.1f");
    g_autofree char *ttft = fmt_stat (r->ttft_ms, "%.1f");
    g_print ("| %s | %s | %s | %s | %u | %s | %u | pp%u | %s | %s | | | | | %.0f | %.1f |\n",
        info->name, info->type, params, wpt, s->threads, llm_kv_type_name (s->kv_type),
        s->depth, s->n_prompt, tps, ttft, r->peak_rss / 1048576.0, r->kv_bytes / 1048576.0);
  }
  if (s->n_gen > 0) {
    g_autofree char *tps = fmt_stat (r->tg_tps, "%.2f");
    g_autofree char *im = fmt_stat (r->itl_mean, "%.2f");
    g_autofree char *ip = fmt_stat (r->itl_p95, "%.2f");
    g_autofree char *ceil = isfinite (rf->ceiling) ? g_strdup_printf ("%.1f", rf->ceiling)
        : g_strdup ("-");
    g_autofree char *frac = isfinite (rf->fraction)
        ? g_strdup_printf ("%.1f%%", 100 * rf->fraction) : g_strdup ("-");
    /* The share of steps the hardware prefetchers fetched for, where the
     * engine chose. */
    g_autofree char *fetch = fetch_steps (r) > 0 ? g_strdup_printf (" (hw fetch %.0f%%)",
        100.0 * r->fetch.steps[LLM_FETCH_HARDWARE] / fetch_steps (r)) : g_strdup ("");
    g_print ("| %s | %s | %s | %s | %u | %s | %u | tg%u%s | %s | | %s | %s | %s | %s | %.0f "
        "| %.1f |\n", info->name, info->type, params, wpt, s->threads,
        llm_kv_type_name (s->kv_type), s->depth, s->n_gen, fetch, tps, im, ip, ceil, frac,
        r->peak_rss / 1048576.0, r->kv_bytes / 1048576.0);
  }
  if (r->have_pipe) {
    g_autofree char *tps = fmt_stat (r->pipe_tg, "%.2f");
    g_autofree char *ttft = fmt_stat (r->pipe_ttft, "%.1f");
    g_autofree char *im = fmt_stat (r->pipe_itl_mean, "%.2f");
    g_autofree char *ip = fmt_stat (r->pipe_itl_p95, "%.2f");
    g_autofree char *over = r->pipe_overhead.n > 1
        ? g_strdup_printf ("%+.1f%% +/- %.1f", r->pipe_overhead.mean, r->pipe_overhead.sd)
        : g_strdup_printf ("%+.1f%%", r->pipe_overhead.mean);
    /* Depth "-": the elements start from an empty cache. */
    g_print ("| %s | %s | %s | %s | %u | %s | - | pipeline pp%u+tg%u | %s | %s | %s | %s "
        "| | elements %s ITL | | |\n", info->name, info->type, params, wpt, s->threads,
        llm_kv_type_name (s->kv_type), s->n_prompt, s->n_gen, tps, ttft, im, ip, over);
  }
  if (r->pipe_error != NULL)
    g_printerr ("gst-llm-bench: pipeline: %s\n", r->pipe_error);
  fflush (stdout);
}

/* --- output of --streams --- */

/* One (N, mode) run and what it is compared with. */
typedef struct {
  guint n_streams, max_batch_wait_us, max_prefill_chunk;
  BenchStreamsMode mode;
  BenchStreamsResult r;
  double limit;               /* pp-N of the lock-step run of this N */
  guint64 peak_rss;
} StreamsRow;

static const char *
streams_mode_name (BenchStreamsMode mode)
{
  return mode == BENCH_STREAMS_LOCKSTEP ? "lockstep" : "scheduler";
}

static void
print_streams_json (const LlmModel *m, const ModelInfo *info, const Setting *s,
    const StreamsRow *row)
{
  const BenchStreamsResult *r = &row->r;
  GString *o = json_begin (m, info, s);
  json_int (o, "n_prompt", s->n_prompt);
  json_int (o, "n_gen", s->n_gen);
  json_int (o, "n_streams", row->n_streams);
  json_int (o, "max_batch_wait_us", row->max_batch_wait_us);
  json_int (o, "max_prefill_chunk", row->max_prefill_chunk);
  json_text (o, "mode", streams_mode_name (row->mode));
  json_number (o, "tg_tokens_per_s", r->tg_tokens_per_s);
  json_number (o, "tg_tokens_per_s_per_stream", r->tg_tokens_per_s / row->n_streams);
  json_number (o, "itl_ms_p50", r->itl_ms_p50);
  json_number (o, "itl_ms_p95", r->itl_ms_p95);
  json_number (o, "ppN_tokens_per_s", row->limit);
  json_number (o, "ppN_fraction", r->tg_tokens_per_s / row->limit);
  if (row->mode == BENCH_STREAMS_LOCKSTEP) {
    json_number (o, "alone_itl_ms_p50", r->alone_ms_p50);
    json_number (o, "alone_itl_ms_p95", r->alone_ms_p95);
    json_number (o, "x_alone", r->x_alone);
    json_number (o, "p95_vs_alone", r->p95_vs_alone);
  }
  if (row->mode == BENCH_STREAMS_SCHEDULER) {
    json_number (o, "ttft_ms_p50", r->ttft_ms_p50);
    json_number (o, "ttft_ms_p95", r->ttft_ms_p95);
    json_int (o, "ttft_samples", r->n_ttft);
    json_number (o, "stream_rate_min_frac", r->rate_min_frac);
    json_number (o, "stream_rate_max_frac", r->rate_max_frac);
    g_string_append (o, ", \"stream_tokens_per_s\": [");
    for (guint i = 0; i < row->n_streams; i++) {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];
      g_string_append_printf (o, "%s%s", i ? ", " : "",
          g_ascii_formatd (buf, sizeof buf, "%.4g", r->stream_tokens_per_s[i]));
    }
    g_string_append (o, "]");
    json_int (o, "prompts", r->prompts);
    json_number (o, "warm_s", r->warm_s);
    if (isfinite (r->warm_s)) {
      json_int (o, "rss_warm_kb", r->rss_warm_kb);
      json_int (o, "rss_max_kb", r->rss_max_kb);
      g_string_append_printf (o, ", \"rss_growth_kb\": %" G_GINT64_FORMAT,
          (gint64) r->rss_end_kb - (gint64) r->rss_warm_kb);
    } else {
      g_string_append (o, ", \"rss_warm_kb\": null, \"rss_max_kb\": null, "
          "\"rss_growth_kb\": null");
    }
    json_int (o, "rss_end_kb", r->rss_end_kb);
  }
  json_int (o, "decode_tokens", r->decode_tokens);
  json_number (o, "window_s", r->window_s);
  json_int (o, "forwards", r->forwards);
  json_number (o, "rows_per_forward", r->forwards ? (double) r->rows / r->forwards : NAN);
  json_number (o, "rows_per_s", r->rows_per_s);
  json_int (o, "peak_rss_bytes", row->peak_rss);
  json_int (o, "kv_bytes", r->kv_bytes);
  json_end (o);
}

static void
print_streams_header (void)
{
  g_print ("| model | type | th | kv | streams | mode | test | t/s | t/s per stream "
      "| ITL ms p50 | ITL ms p95 | pp-N limit t/s | of limit | x alone | p95 / alone "
      "| TTFT ms p50 | TTFT ms p95 "
      "| rows/forward | rows/s (of limit) | stream t/s min..max of mean | peak RSS MiB "
      "| KV MiB | RSS MiB warm / max / end | RSS growth KiB | t/s of each stream |\n");
  g_print ("|---|---|--:|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:"
      "|--:|--:|--:|--:|---|\n");
}

/* "-" where a figure does not apply or could not be had. */
static char *
fmt_or_dash (const char *fmt, double v)
{
  return isfinite (v) ? g_strdup_printf (fmt, v) : g_strdup ("-");
}

static void
print_streams_row (const ModelInfo *info, const Setting *s, const StreamsRow *row)
{
  const BenchStreamsResult *r = &row->r;
  const gboolean sched = row->mode == BENCH_STREAMS_SCHEDULER;
  g_autofree char *limit = fmt_or_dash ("%.1f", row->limit);
  g_autofree char *frac = fmt_or_dash ("%.0f%%", 100 * r->tg_tokens_per_s / row->limit);
  g_autofree char *x_alone = fmt_or_dash ("%.2fx", r->x_alone);
  g_autofree char *p95_alone = fmt_or_dash ("%.2f", r->p95_vs_alone);
  g_autofree char *t50 = fmt_or_dash ("%.1f", r->ttft_ms_p50);
  g_autofree char *t95 = fmt_or_dash ("%.1f", r->ttft_ms_p95);
  g_autofree char *rpf = fmt_or_dash ("%.2f", r->forwards ? (double) r->rows / r->forwards
      : NAN);
  /* Prompt rows are work too: the scheduler's forwards carry the prompts
   * that arrive, so its decode t/s alone undersells how busy they are. */
  g_autofree char *rps = isfinite (r->rows_per_s) && isfinite (row->limit)
      ? g_strdup_printf ("%.0f (%.0f%%)", r->rows_per_s, 100 * r->rows_per_s / row->limit)
      : fmt_or_dash ("%.0f", r->rows_per_s);
  g_autofree char *spread = sched
      ? g_strdup_printf ("%.2f..%.2f", r->rate_min_frac, r->rate_max_frac) : g_strdup ("-");
  /* Lock-step has no window to sample; a window that ended before every
   * stream was warm has no warm figure to compare with. */
  g_autofree char *rss = NULL, *growth = NULL;
  if (sched && isfinite (r->warm_s)) {
    rss = g_strdup_printf ("%.1f / %.1f / %.1f", r->rss_warm_kb / 1024.0,
        r->rss_max_kb / 1024.0, r->rss_end_kb / 1024.0);
    growth = g_strdup_printf ("%+" G_GINT64_FORMAT,
        (gint64) r->rss_end_kb - (gint64) r->rss_warm_kb);
  } else {
    rss = sched ? g_strdup_printf ("- / - / %.1f", r->rss_end_kb / 1024.0) : g_strdup ("-");
    growth = g_strdup ("-");
  }
  g_autoptr (GString) each = g_string_new (sched ? NULL : "-");
  for (guint i = 0; sched && i < row->n_streams; i++)
    g_string_append_printf (each, "%s%.2f", i ? " " : "", r->stream_tokens_per_s[i]);
  g_print ("| %s | %s | %u | %s | %u | %s | pp%u+tg%u | %.1f | %.2f | %.2f | %.2f | %s | %s "
      "| %s | %s | %s | %s | %s | %s | %s | %.0f | %.1f | %s | %s | %s |\n", info->name,
      info->type, s->threads, llm_kv_type_name (s->kv_type), row->n_streams,
      streams_mode_name (row->mode), s->n_prompt, s->n_gen, r->tg_tokens_per_s,
      r->tg_tokens_per_s / row->n_streams, r->itl_ms_p50, r->itl_ms_p95, limit, frac, x_alone,
      p95_alone, t50, t95, rpf, rps, spread, row->peak_rss / 1048576.0,
      r->kv_bytes / 1048576.0, rss, growth, each->str);
  fflush (stdout);
}

/* Whether a scheduler run meets --max-rate-deviation and
 * --max-rss-growth; says why not on stderr. */
static gboolean
streams_stable (const Options *o, const StreamsRow *row)
{
  const BenchStreamsResult *r = &row->r;
  gboolean ok = TRUE;
  if (o->max_rate_deviation > 0 && (r->rate_min_frac < 1 - o->max_rate_deviation
          || r->rate_max_frac > 1 + o->max_rate_deviation)) {
    g_printerr ("gst-llm-bench: %u streams: stream rates %.3f..%.3f of their mean, beyond "
        "--max-rate-deviation %g\n", row->n_streams, r->rate_min_frac, r->rate_max_frac,
        o->max_rate_deviation);
    ok = FALSE;
  }
  if (o->max_rss_growth_kb >= 0) {
    const gint64 growth = (gint64) r->rss_end_kb - (gint64) r->rss_warm_kb;
    if (!isfinite (r->warm_s)) {
      g_printerr ("gst-llm-bench: %u streams: the window ended before every stream had "
          "answered a whole response, so RSS growth after warm-up is unknown; give a "
          "longer --duration\n", row->n_streams);
      ok = FALSE;
    } else if (growth > o->max_rss_growth_kb) {
      g_printerr ("gst-llm-bench: %u streams: RSS grew by %" G_GINT64_FORMAT " KiB after "
          "warm-up (%.1f s), beyond --max-rss-growth %" G_GINT64_FORMAT "\n", row->n_streams,
          growth, r->warm_s, o->max_rss_growth_kb);
      ok = FALSE;
    }
  }
  return ok;
}

/* Both modes at every N of --streams for one setting; FALSE after the
 * first failure (printed), or when a scheduler run is not stable by the
 * checks asked for (the other N still run). */
static gboolean
run_streams (LlmModel *model, const ModelInfo *info, const Setting *s, const Options *o,
    GArray *streams)
{
  gboolean stable = TRUE;
  for (guint i = 0; i < streams->len; i++) {
    BenchStreamsSetting bs = {
      .n_streams = g_array_index (streams, guint, i),
      .n_prompt = s->n_prompt, .n_gen = s->n_gen,
      .n_threads = (int) s->threads, .kv_type = s->kv_type,
      .duration_s = o->duration, .max_batch_wait_us = (guint) o->max_batch_wait_us,
      .max_prefill_chunk = (guint) o->max_prefill_chunk,
      .seed = (guint32) o->seed, .warmup = !o->no_warmup,
    };
    double limit = NAN;
    for (BenchStreamsMode mode = BENCH_STREAMS_LOCKSTEP; mode <= BENCH_STREAMS_SCHEDULER;
        mode++) {
      StreamsRow row = { .n_streams = bs.n_streams, .mode = mode,
        .max_batch_wait_us = bs.max_batch_wait_us,
        .max_prefill_chunk = bs.max_prefill_chunk != 0 ? bs.max_prefill_chunk : 128 };
      GError *error = NULL;
      reset_peak_rss ();
      if (!bench_streams_run (model, &bs, mode, &row.r, &error)) {
        g_printerr ("gst-llm-bench: %s: %u streams, %s: %s\n", info->name, bs.n_streams,
            streams_mode_name (mode), error->message);
        g_error_free (error);
        bench_streams_result_clear (&row.r);
        return FALSE;
      }
      row.peak_rss = peak_rss_bytes ();
      if (mode == BENCH_STREAMS_LOCKSTEP)
        limit = row.r.ppN_tokens_per_s;
      row.limit = limit;
      if (o->json)
        print_streams_json (model, info, s, &row);
      else
        print_streams_row (info, s, &row);
      if (mode == BENCH_STREAMS_SCHEDULER && !streams_stable (o, &row))
        stable = FALSE;
      bench_streams_result_clear (&row.r);
    }
  }
  return stable;
}

/* --- speculative against plain decoding (--spec) --- */

static void
print_spec_header (void)
{
  g_print ("| model | type | th | workload | prompt | variant | t/s | x plain | proposals/step "
      "| acceptance | tokens/verify |\n");
  g_print ("|---|---|--:|---|--:|---|--:|--:|--:|--:|--:|\n");
}

/* One row of the --spec table (or JSON object). */
typedef struct {
  const char *workload;
  guint n_prompt;
  const char *variant;
  double tokens_per_s, x_plain, per_step, acceptance, per_verify;
} SpecRow;

static void
print_spec_row (const ModelInfo *info, const Setting *s, const SpecRow *r)
{
  g_print ("| %s | %s | %u | %s | %u | %s | %.1f | %.2f | %.2f | %.2f | %.2f |\n", info->name,
      info->type, s->threads, r->workload, r->n_prompt, r->variant, r->tokens_per_s, r->x_plain,
      r->per_step, r->acceptance, r->per_verify);
}

/* The row's JSON object, open for more members (json_end closes it). */
static GString *
spec_json_begin (LlmModel *model, const ModelInfo *info, const Setting *s, const SpecRow *r)
{
  GString *j = json_begin (model, info, s);
  json_text (j, "workload", r->workload);
  json_int (j, "prompt_tokens", r->n_prompt);
  json_int (j, "n_gen", s->n_gen);
  json_text (j, "variant", r->variant);
  json_number (j, "tg_tokens_per_s", r->tokens_per_s);
  json_number (j, "x_plain", r->x_plain);
  json_number (j, "proposals_per_step", r->per_step);
  json_number (j, "acceptance_rate", r->acceptance);
  json_number (j, "tokens_per_verification", r->per_verify);
  return j;
}

/* The lookup bound's row: x plain from the step widths' own costs (and
 * t/s from them); every proposal it makes is accepted. JSON adds the
 * median step time of each width. */
static void
print_spec_bound (LlmModel *model, const ModelInfo *info, const Setting *s, const Options *o,
    const char *workload, guint n_prompt, const BenchSpecBound *b)
{
  g_autofree char *variant = g_strdup_printf ("ngram lookup bound (max %u)", b->draft_max);
  const SpecRow row = { workload, n_prompt, variant, b->tokens_per_s, b->x_plain,
    b->steps ? (double) b->accepted / b->steps : 0, b->accepted ? 1.0 : 0,
    b->verifications ? (double) (b->accepted + b->verifications) / b->verifications : 0 };
  if (!o->json) {
    print_spec_row (info, s, &row);
    return;
  }
  GString *j = spec_json_begin (model, info, s, &row);
  g_string_append (j, ", \"step_us_by_width\": [");
  for (guint w = 0; w <= b->draft_max; w++)
    g_string_append_printf (j, "%s%.1f", w ? ", " : "", b->width_us[w]);
  g_string_append_c (j, ']');
  json_end (j);
}

/* The longest random:N prompt, and the most distinct ids of random:N:A:
 * more than any context or vocabulary a model here has. */
#define RANDOM_PROMPT_MAX (1u << 20)

/* The ids of workload @spec (a file, or random:N) for @model. */
static GArray *
spec_prompt_ids (LlmModel *model, const char *spec, guint32 seed, GError **error)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  guint n_random, n_distinct = 0;
  const int got = sscanf (spec, "random:%u:%u", &n_random, &n_distinct);
  if ((got >= 1 && (n_random == 0 || n_random > RANDOM_PROMPT_MAX))
      || (got == 2 && (n_distinct == 0 || n_distinct > RANDOM_PROMPT_MAX))) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "random:N[:A] takes N and A from 1 to %u ids", RANDOM_PROMPT_MAX);
    g_array_unref (ids);
    return NULL;
  }
  if (got >= 1) {
    /* With a few distinct ids, every short run has occurred before, each
     * time followed by something else: lookup always proposes, and what
     * it proposes is noise. */
    g_autoptr (GRand) rand = g_rand_new_with_seed (seed);
    g_autofree gint32 *pool = g_new (gint32, MAX (n_distinct, 1));
    if (n_distinct > 0)
      bench_fill_random (rand, pool, n_distinct, model->hp.n_vocab);
    g_array_set_size (ids, n_random);
    for (guint i = 0; i < n_random; i++)
      g_array_index (ids, gint32, i) = n_distinct > 0
          ? pool[g_rand_int_range (rand, 0, (gint32) n_distinct)]
          : g_rand_int_range (rand, 0, (gint32) model->hp.n_vocab);
    return ids;
  }
  g_autofree char *text = NULL;
  gsize len;
  LlmTokenizer *tok = llm_model_tokenizer (model);
  if (tok == NULL) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s has no tokenizer for %s",
        llm_model_path (model), spec);
  } else if (g_file_get_contents (spec, &text, &len, error)) {
    llm_tokenizer_encode (tok, text, (gssize) len, TRUE, FALSE, TRUE, ids);
    return ids;
  }
  g_array_unref (ids);
  return NULL;
}

static gboolean
run_spec (LlmModel *model, const ModelInfo *info, const Setting *s, const Options *o,
    GArray *fixed)
{
  g_autoptr (LlmModel) draft = NULL;
  if (o->draft_model != NULL) {
    GError *error = NULL;
    draft = llm_model_load (o->draft_model, &error);
    if (draft == NULL) {
      g_printerr ("gst-llm-bench: --draft-model: %s\n", error->message);
      g_error_free (error);
      return FALSE;
    }
  }
  g_autoptr (GArray) variants = g_array_new (FALSE, FALSE, sizeof (gint));
  const gint plain = BENCH_SPEC_PLAIN, dynamic = BENCH_SPEC_DYNAMIC;
  g_array_append_val (variants, plain);
  g_array_append_val (variants, dynamic);
  for (guint i = 0; i < fixed->len; i++) {
    const gint k = (gint) g_array_index (fixed, guint, i);
    g_array_append_val (variants, k);
  }
  const BenchSpecSetting bs = {
    .variants = (const gint *) variants->data, .n_variants = variants->len,
    .n_gen = s->n_gen, .rounds = (guint) o->reps, .draft_max = (guint) o->spec_draft_max,
    .ngram_min = 1, .ngram_max = 4, .ngram_window = 4096,
    .method = o->spec, .draft_model = draft, .draft_p_min = (float) o->draft_p_min,
    .draft_ahead = o->draft_ahead,
    .n_threads = (int) s->threads, .kv_type = s->kv_type,
  };
  gboolean ok = TRUE;
  for (char **w = o->spec_prompts; *w != NULL; w++) {
    GError *error = NULL;
    g_autoptr (GArray) prompt = spec_prompt_ids (model, *w, (guint32) o->seed, &error);
    g_autofree char *table = NULL;
    if (o->draft_table != NULL) {
      g_autofree char *base = g_path_get_basename (*w);
      char *dot = strrchr (base, '.');
      if (dot != NULL)
        *dot = '\0';
      g_autofree char *name = g_strconcat (base, ".txt", NULL);
      table = g_build_filename (o->draft_table, name, NULL);
    }
    BenchSpecSetting ws = bs;
    ws.draft_table = table;
    g_autofree BenchSpecResult *res = g_new0 (BenchSpecResult, variants->len);
    /* Prompt lookup's bound: what no lookup drafter or budget can pass. */
    BenchSpecBound bound = { 0 };
    const gboolean lookup = strcmp (o->spec, "ngram") == 0;
    if (prompt == NULL || !bench_spec_run (model, &ws, (const gint32 *) prompt->data,
            prompt->len, res, lookup ? &bound : NULL, &error)) {
      g_printerr ("gst-llm-bench: %s: --spec %s: %s\n", info->name, *w, error->message);
      g_error_free (error);
      ok = FALSE;
      continue;
    }
    g_autofree char *workload = g_path_get_basename (*w);
    for (guint v = 0; v < variants->len; v++) {
      const BenchSpecResult *r = &res[v];
      g_autofree char *variant = r->fixed_k == BENCH_SPEC_PLAIN ? g_strdup ("plain")
          : r->fixed_k == BENCH_SPEC_DYNAMIC ? g_strdup_printf ("%s dynamic (max %d)", o->spec,
              o->spec_draft_max) : g_strdup_printf ("%s fixed %d", o->spec, r->fixed_k);
      if (o->draft_ahead && r->fixed_k != BENCH_SPEC_PLAIN) {
        char *ahead = g_strdup_printf ("%s, ahead %" G_GUINT64_FORMAT " used %" G_GUINT64_FORMAT
            " discarded", variant, r->ahead_used, r->ahead_discarded);
        g_free (variant);
        variant = ahead;
      }
      const double x = r->tokens_per_s / res[0].tokens_per_s;
      const double per_step = r->steps ? (double) r->drafted / r->steps : 0;
      const double acc = r->drafted ? (double) r->accepted / r->drafted : 0;
      const double per_verify = r->verifications
          ? (double) (r->accepted + r->verifications) / r->verifications : 0;
      const SpecRow row = { workload, prompt->len, variant, r->tokens_per_s, x, per_step, acc,
        per_verify };
      if (o->json) {
        GString *j = spec_json_begin (model, info, s, &row);
        /* Steps by proposals checked, 0 first, up to the most checked. */
        const guint n_lengths = llm_spec_stats_n_lengths (r->lengths);
        g_string_append (j, ", \"draft_lengths\": [");
        for (guint k = 0; k < n_lengths; k++)
          g_string_append_printf (j, "%s%" G_GUINT64_FORMAT, k ? ", " : "", r->lengths[k]);
        g_string_append_c (j, ']');
        if (o->draft_ahead) {
          json_int (j, "ahead_used", r->ahead_used);
          json_int (j, "ahead_discarded", r->ahead_discarded);
        }
        json_end (j);
      } else {
        print_spec_row (info, s, &row);
      }
    }
    if (lookup)
      print_spec_bound (model, info, s, o, workload, prompt->len, &bound);
  }
  return ok;
}

/* --- k rows against a step (--batch) --- */

static void
print_batch_header (void)
{
  g_print ("| model | type | th | kv | depth | rows | ms / forward | step ms | rows/s | x step |\n");
  g_print ("|---|---|--:|---|--:|--:|--:|--:|--:|--:|\n");
}

static gboolean
run_batch (LlmModel *model, const ModelInfo *info, const Setting *s, const Options *o,
    GArray *sizes)
{
  const BenchBatchSetting bs = {
    .sizes = (const guint *) sizes->data, .n_sizes = sizes->len, .depth = s->depth,
    .rounds = (guint) o->reps, .n_threads = (int) s->threads, .kv_type = s->kv_type,
    .seed = (guint32) o->seed, .warmup = !o->no_warmup,
  };
  g_autofree BenchBatchResult *res = g_new0 (BenchBatchResult, sizes->len);
  GError *error = NULL;
  if (!bench_batch_run (model, &bs, res, &error)) {
    g_printerr ("gst-llm-bench: %s: --batch: %s\n", info->name, error->message);
    g_error_free (error);
    return FALSE;
  }
  for (guint i = 0; i < sizes->len; i++) {
    const BenchBatchResult *r = &res[i];
    if (o->json) {
      GString *j = json_begin (model, info, s);
      json_int (j, "depth", s->depth);
      json_int (j, "n_rows", r->n_rows);
      json_number (j, "forward_ms", r->forward_ms);
      json_number (j, "step_ms", r->step_ms);
      json_number (j, "rows_per_s", r->rows_per_s);
      json_number (j, "cost_vs_step", r->cost_vs_step);
      json_end (j);
    } else {
      g_print ("| %s | %s | %u | %s | %u | %u | %.2f | %.2f | %.1f | %.2f |\n", info->name,
          info->type, s->threads, llm_kv_type_name (s->kv_type), s->depth, r->n_rows,
          r->forward_ms, r->step_ms, r->rows_per_s, r->cost_vs_step);
    }
  }
  return TRUE;
}

/* --- main --- */

static const char *summary =
    "Measures prompt processing (pp) and decoding (tg) speed of gst-llm's CPU engine\n"
    "on GGUF models, in the manner of llama-bench, and compares decoding with the\n"
    "memory-bandwidth ceiling. Lists (-p 128,512) and repeated options run every\n"
    "combination.\n"
    "\n"
    "Per repetition: the KV cache is cut back to --depth random tokens (evaluated\n"
    "once per setting, untimed), then a random prompt of -p tokens is evaluated in\n"
    "one call (pp t/s; TTFT is that call plus picking the first token), then -n\n"
    "tokens one call each, feeding back the greedy choice (tg t/s; ITL is one step,\n"
    "pick included). Figures are mean +/- standard deviation over -r repetitions,\n"
    "after one untimed warm-up evaluation.\n"
    "\n"
    "Roofline: before the runs, the read bandwidth of the machine is measured with\n"
    "each thread count (streaming read over 512 MiB, or --bandwidth-mib; the best\n"
    "pass of at least 5 in half a second). A decode step reads every weight once,\n"
    "so tg can never pass bandwidth / weight bytes per token (the ceiling). Memory\n"
    "speed can drift while the runs go on, so the test runs again around each\n"
    "repetition's tg (the best of 5 passes just before it and 5 just after), over\n"
    "as many bytes as a step reads (the weights; --bandwidth-mib sets another\n"
    "size), so it meets the caches as the decode does: a model a few times the\n"
    "size of the last-level cache finds part of itself there every step, and a\n"
    "larger test buffer would understate what the memory gives it. 'of ceiling'\n"
    "is the median over the repetitions of each one's tg against the ceiling of\n"
    "its own bandwidth ('ceiling t/s' the median ceiling; bandwidth_fraction in\n"
    "JSON, bandwidth_test_bytes the buffer; bandwidth_fraction_with_kv also counts\n"
    "the KV cache read at the mean decode depth).\n"
    "\n"
    "--pipeline runs each setting again through appsrc ! llmprefill ! llmdecode !\n"
    "appsink (greedy, the llm plugin GStreamer finds, else this build tree's),\n"
    "timing tokens as they reach the sink, and prints the elements' overhead on\n"
    "decode time: ITL through the pipeline against ITL of direct calls on the same\n"
    "prompt, run just before it, per repetition. --depth does not apply there.\n"
    "\n"
    "--streams N[,N...] measures N streams decoding at once on one engine instead,\n"
    "each N twice (-p and -n default to 32 here; -r and --depth do not apply):\n"
    "  lockstep   N sequences, each prefilled with its own random prompt of -p\n"
    "             tokens, then -n steps of one llm_engine_eval over N rows (one per\n"
    "             stream, greedy on its own logits). t/s is all streams' tokens over\n"
    "             the steps' time; every stream's ITL is the step time. The pp-N\n"
    "             limit, measured on the same engine, is one forward of N prompt\n"
    "             rows that all want logits (median of 5): what a forward of N rows\n"
    "             can do at best; 'of limit' is how close batched decode comes.\n"
    "             After every 8 steps a lone sequence of the same engine takes 8\n"
    "             decode steps of its own, timed apart, so a drifting machine moves\n"
    "             both alike: 'x alone' is N times its median step over the N-row\n"
    "             median (how many times one stream's t/s the N streams decode),\n"
    "             'p95 / alone' the N-row p95 over its p95, each block's first step\n"
    "             left out (a lone step just after N-row ones pays for the switch).\n"
    "  scheduler  N threads, each prefilling through llm_engine_submit and then\n"
    "             generating -n tokens one submit per token; a stream that is done\n"
    "             starts a new random prompt, so prompts keep arriving while the\n"
    "             others decode (stream i's first response is (i+1)/N of -n, to\n"
    "             spread the arrivals). The window ends after N x n x 3 decode\n"
    "             tokens of all streams and at least a second, or after --duration\n"
    "             seconds; its t/s is decode tokens over the window, which also\n"
    "             holds the prefills of the prompts that arrived (rows/s counts\n"
    "             both, rows_per_s in JSON, with its share of the pp-N limit, which\n"
    "             forwards of more than N rows, prompt chunks in them, can pass).\n"
    "             TTFT counts the prompts after each stream's first; rows/forward\n"
    "             comes from the engine's batch counts (prompt rows included); each\n"
    "             stream's t/s is its decode tokens over the window, and the spread\n"
    "             is the slowest and fastest of them over their mean\n"
    "             (stream_rate_min_frac, stream_rate_max_frac). 'of limit' compares\n"
    "             with lockstep's pp-N. ITL and TTFT percentiles come from\n"
    "             fixed-size histograms (within 1.6%), so a long run's own\n"
    "             bookkeeping does not grow its memory. RSS is sampled every\n"
    "             0.1 s: at the end of warm-up (every stream has answered a whole\n"
    "             -n response, so every KV cache has its full size, and a tenth\n"
    "             of --duration has passed; warm_s), its maximum from then on and\n"
    "             at the window's end; rss_growth_kb is end minus warm, which a\n"
    "             steady server keeps near 0 however long it runs.\n"
    "             --max-rate-deviation 0.25 and --max-rss-growth KIB make the run\n"
    "             fail (exit 1) when a stream's t/s is more than 25% off the mean\n"
    "             or RSS grew by more than KIB after warm-up.\n"
    "             --max-batch-wait sets the engine's option of that name: how\n"
    "             long a lone step waits for the other streams' steps.\n"
    "             --max-prefill-chunk sets the engine's option of that name: the\n"
    "             prompt rows a forward takes besides the decode steps (1-128).\n"
    "Peak RSS and KV bytes are per run; each run has an engine of its own.\n"
    "\n"
    "--batch K[,K...] measures what one forward of K rows costs next to a decode\n"
    "step instead (-p and -n do not apply; -r is the rounds): a sequence holds\n"
    "--depth random tokens, each forward appends K random tokens, every row\n"
    "wanting its logits (a draft verification, a batched step of K streams), and\n"
    "cuts the sequence back. Every round runs 4 forwards of 1 row and of each K in\n"
    "turn; figures are medians of all rounds, and 'x step' is K rows' time over\n"
    "one row's. Weights are read once per forward, so the closer to 1, the more\n"
    "verifying K draft tokens or decoding K streams together gains.\n"
    "\n"
    "--spec ngram (or model, with --draft-model FILE, or layerskip: the target\n"
    "with layers skipped, searched from every other layer of its middle half as\n"
    "verdicts come; layerskip-fixed: that start set throughout) decodes the greedy response to each --spec-prompt FILE (the\n"
    "text, tokenized by the model; or random:N, N random ids, or random:N:A, N ids\n"
    "drawn from A random ones: lookup proposes noise) plainly, with llmspecverify's\n"
    "dynamic budget\n"
    "(--spec-draft-max is its ceiling, default 8) and with each fixed draft\n"
    "length of --draft-max K[,K...], the variants taking turns within each of -r\n"
    "rounds; -n tokens (default 128), medians over the rounds. 'x plain' is a\n"
    "variant's decode t/s over plain decoding's; acceptance, tokens per verifying\n"
    "forward (the model's own pick included) and proposals per step come from the\n"
    "last round (with --json also draft_lengths: its steps by proposals checked,\n"
    "0 first). A variant whose tokens differ from plain decoding's fails the run.\n"
    "With --spec ngram, 'ngram lookup bound' ends each workload: the response\n"
    "replayed taking, each step, the earlier occurrence of the last token whose\n"
    "continuation agrees longest and checking just the proposals it accepts, at the\n"
    "median step times by proposals checked (0 to --spec-draft-max, timed in every\n"
    "round; --json: step_us_by_width). No lookup drafter or budget can pass it.\n"
    "--draft-ahead (with --spec model) drafts the next proposal while the verifier\n"
    "checks this one (llmdraft draft-ahead=on); the variants name how many\n"
    "proposals that began and how many drafts ahead a verdict threw away.\n"
    "--spec-draft-table DIR (with --spec model) also writes DIR/WORKLOAD.txt: the\n"
    "prompt's ids, the response's, and for each response token the draft model's\n"
    "next 8 greedy tokens as id:probability, which tests/test-spec.c replays.\n"
    "tools/spec-workloads/ holds the workloads the notes use.\n"
    "\n"
    "Making benchmark models:\n"
    "  gst-llm-bench --make-model SHAPE --type TYPE -o FILE [--seed N] [-t N]\n"
    "writes a GGUF with seeded random weights (normal, std 0.02; norms 1) and a\n"
    "minimal tokenizer that llama.cpp loads too. Shapes: 246m (llama: 1024 wide,\n"
    "16 layers, ffn 2816, 16/4 heads, vocab 32000), qwen2-0.5b (qwen2: 896 wide,\n"
    "24 layers, ffn 4864, 14/2 heads, vocab 151936, QKV biases, tied output),\n"
    "smollm2-135m (llama: 576 wide, 30 layers, ffn 1536, 9/3 heads, vocab 49152;\n"
    "SmolVLM-256M's language model, its output not tied), tiny, tiny-12h and\n"
    "tiny-qwen2 (seconds to make, for smoke tests).\n"
    "  gst-llm-bench --make-model SHAPE --type TYPE --widen REAL.gguf -o FILE\n"
    "writes a llama SHAPE holding the real llama model REAL instead: REAL's\n"
    "tokenizer, its weights in the first channels, heads and layers and zeros\n"
    "elsewhere (norms, query scale and RoPE base adjusted), so FILE computes what\n"
    "REAL computes while a step reads as many bytes as SHAPE's: real text at the\n"
    "speed of a model that size, for speculative decoding's acceptance.\n"
    "--layers N gives SHAPE N layers instead of its own. Widened, N at least REAL's;\n"
    "with exactly REAL's, no layer is an identity, so layer skipping (--spec\n"
    "layerskip) drafts as it would on REAL, at SHAPE's width.\n"
    "\n"
    "Vision encoders (files from gst-llm-make-mmproj smolvlm|llava --n-out N -o F):\n"
    "  gst-llm-bench --vision MMPROJ [-t 1,2] [-r 5] [--json]\n"
    "encodes one image at a time at each thread count, the counts taking turns\n"
    "within each of -r rounds after an untimed image: median images/s.\n"
    "tools/compare-vision-llama-cpp.sh runs llama.cpp's mtmd on the same file.\n"
    "\n"
    "Audio encoders:\n"
    "  gst-llm-bench --audio MMPROJ [--audio-pcm FILE] [-t 1,2] [-r 5] [--json]\n"
    "encodes the first 30 s window of the samples (16 kHz mono F32; default a test\n"
    "signal) at each thread count, in turn within each of -r rounds after an untimed\n"
    "window: median ms per window and times real time. Make a file with\n"
    "gst-llm-make-mmproj whisper-tiny-ultravox --n-out 576 -o F;\n"
    "tools/compare-audio-llama-cpp.sh runs llama.cpp's mtmd on the same file.";

static int bench_main (const Options *opt);

static int
usage_error (GError *error)
{
  g_printerr ("gst-llm-bench: %s\n", error->message);
  g_error_free (error);
  return 2;
}

int
main (int argc, char **argv)
{
  Options o = { .reps = 5, .seed = 42, .bandwidth_mib = -1, .max_rss_growth_kb = -1,
    .spec_draft_max = 8 };
  const GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME_ARRAY, &o.models,
      "GGUF model to measure (repeat for several)", "FILE" },
    { "n-prompt", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &o.prompt_lens,
      "Prompt lengths (default 512; 0: no pp)", "N[,N...]" },
    { "n-gen", 'n', 0, G_OPTION_ARG_STRING_ARRAY, &o.gen_lens,
      "Tokens to generate (default 128; 0: no tg)", "N[,N...]" },
    { "threads", 't', 0, G_OPTION_ARG_STRING_ARRAY, &o.thread_counts,
      "Worker threads (default: one per CPU)", "N[,N...]" },
    { "repetitions", 'r', 0, G_OPTION_ARG_INT, &o.reps,
      "Repetitions of each setting (default 5)", "N" },
    { "kv-type", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.kv_types,
      "KV cache type: f16 (default), q8_0, q4_0, f32", "TYPE[,TYPE...]" },
    { "depth", 'd', 0, G_OPTION_ARG_STRING_ARRAY, &o.depths,
      "Tokens in the cache before the prompt (default 0)", "N[,N...]" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &o.json,
      "One JSON object per model and setting, no table", NULL },
    { "no-warmup", 0, 0, G_OPTION_ARG_NONE, &o.no_warmup,
      "Skip the untimed warm-up evaluation", NULL },
    { "pipeline", 0, 0, G_OPTION_ARG_NONE, &o.pipeline,
      "Also measure through the GStreamer elements", NULL },
    { "streams", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.streams,
      "Streams decoding at once on one engine, instead of one (see above)", "N[,N...]" },
    { "duration", 0, 0, G_OPTION_ARG_DOUBLE, &o.duration,
      "With --streams: the scheduler's window in seconds (default: by tokens)", "SECONDS" },
    { "max-rate-deviation", 0, 0, G_OPTION_ARG_DOUBLE, &o.max_rate_deviation,
      "With --streams: exit 1 if a stream's t/s is further than FRAC from the mean",
      "FRAC" },
    { "max-rss-growth", 0, 0, G_OPTION_ARG_INT64, &o.max_rss_growth_kb,
      "With --streams: exit 1 if RSS grows by more than KIB after warm-up", "KIB" },
    { "max-batch-wait", 0, 0, G_OPTION_ARG_INT, &o.max_batch_wait_us,
      "With --streams: how long a lone step waits for company, us (default 0)", "US" },
    { "max-prefill-chunk", 0, 0, G_OPTION_ARG_INT, &o.max_prefill_chunk,
      "With --streams: prompt rows per forward besides the decode steps (default 128)", "N" },
    { "spec", 0, 0, G_OPTION_ARG_STRING, &o.spec,
      "Speculative against plain decoding with this drafter (ngram, model, layerskip), instead",
      "METHOD" },
    { "spec-prompt", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &o.spec_prompts,
      "With --spec: a workload's prompt file, or random:N[:A] (repeat for several)", "FILE" },
    { "draft-model", 0, 0, G_OPTION_ARG_FILENAME, &o.draft_model,
      "With --spec model: the draft model's GGUF file", "FILE" },
    { "draft-p-min", 0, 0, G_OPTION_ARG_DOUBLE, &o.draft_p_min,
      "With --spec model: stop drafting under this probability (default 0)", "P" },
    { "draft-ahead", 0, 0, G_OPTION_ARG_NONE, &o.draft_ahead,
      "With --spec model: draft the next proposal while the verifier checks (pipelined)",
      NULL },
    { "spec-draft-table", 0, 0, G_OPTION_ARG_FILENAME, &o.draft_table,
      "With --spec model: write each workload's draft table (what the draft proposes at each "
      "point of the response) into this directory", "DIR" },
    { "spec-draft-max", 0, 0, G_OPTION_ARG_INT, &o.spec_draft_max,
      "With --spec: the dynamic budget's most proposals a step (default 8)", "K" },
    { "draft-max", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.draft_maxes,
      "With --spec: fixed draft lengths to compare (default 2,4,8)", "K[,K...]" },
    { "batch", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.batch,
      "Cost of one forward of K rows against a decode step, instead (see above)",
      "K[,K...]" },
    { "bandwidth-mib", 0, 0, G_OPTION_ARG_INT, &o.bandwidth_mib,
      "Bandwidth test buffer, MiB (default: 512 before the runs, a step's weights "
      "beside them; 0: none)", "N" },
    { "seed", 's', 0, G_OPTION_ARG_INT64, &o.seed,
      "Seed of tokens and weights (default 42)", "N" },
    { "make-model", 0, 0, G_OPTION_ARG_STRING, &o.make_shape,
      "Write a random-weight model and exit",
      "SHAPE" },
    { "type", 0, 0, G_OPTION_ARG_STRING, &o.make_type,
      "Weight type of --make-model (below)",
      "TYPE" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output,
      "File --make-model writes", "FILE" },
    { "layers", 0, 0, G_OPTION_ARG_INT, &o.make_layers,
      "With --make-model: this many layers instead of the shape's", "N" },
    { "widen", 0, 0, G_OPTION_ARG_FILENAME, &o.widen,
      "With --make-model: hold this real llama model instead of random weights (see above)",
      "GGUF" },
    { "vision", 0, 0, G_OPTION_ARG_FILENAME, &o.vision,
      "The vision encoder of this mmproj file, images/s at each -t, instead", "MMPROJ" },
    { "vision-image", 0, 0, G_OPTION_ARG_FILENAME, &o.vision_image,
      "With --vision: also write the image it encodes, normalised, for llama.cpp", "FILE" },
    { "audio", 0, 0, G_OPTION_ARG_FILENAME, &o.audio,
      "The audio encoder of this mmproj file, ms per 30 s window at each -t, instead",
      "MMPROJ" },
    { "audio-pcm", 0, 0, G_OPTION_ARG_FILENAME, &o.audio_pcm,
      "With --audio: the samples (16 kHz mono F32) whose first window it encodes", "FILE" },
    { NULL }
  };

  GOptionContext *octx = g_option_context_new ("- gst-llm inference benchmark");
  g_option_context_set_summary (octx, summary);
  g_option_context_set_description (octx, bench_model_mix_help ());
  g_option_context_add_main_entries (octx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (octx, &argc, &argv, &error)) {
    g_printerr ("gst-llm-bench: %s (see --help)\n", error->message);
    return 2;
  }
  g_option_context_free (octx);
  int status = bench_main (&o);
  g_strfreev (o.models);
  g_strfreev (o.prompt_lens);
  g_strfreev (o.gen_lens);
  g_strfreev (o.thread_counts);
  g_strfreev (o.kv_types);
  g_strfreev (o.depths);
  g_strfreev (o.streams);
  g_strfreev (o.batch);
  g_free (o.spec);
  g_free (o.draft_model);
  g_free (o.draft_table);
  g_strfreev (o.spec_prompts);
  g_strfreev (o.draft_maxes);
  g_free (o.make_shape);
  g_free (o.make_type);
  g_free (o.widen);
  g_free (o.output);
  g_free (o.vision);
  g_free (o.vision_image);
  g_free (o.audio);
  g_free (o.audio_pcm);
  return status;
}

static int
bench_main (const Options *opt)
{
  Options o = *opt;
  GError *error = NULL;
  g_autoptr (GArray) threads = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) prompts = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) gens = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) depths = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) kvs = g_array_new (FALSE, FALSE, sizeof (LlmKvType));
  g_autoptr (GArray) streams = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) batch = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GArray) fixed = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autofree char *ncpu = g_strdup_printf ("%u", g_get_num_processors ());
  if (!parse_uint_list (o.thread_counts, ncpu, "--threads", threads, &error))
    return usage_error (error);

  if (o.make_shape != NULL) {
    if (o.make_type == NULL || o.output == NULL) {
      g_printerr ("gst-llm-bench: --make-model needs --type and -o\n");
      return 2;
    }
    if (o.make_layers < 0) {
      g_printerr ("gst-llm-bench: --layers must be at least 1 (0: the shape's)\n");
      return 2;
    }
    const int nth = (int) g_array_index (threads, guint, 0);
    if (o.widen != NULL ? !bench_make_widened_model (o.make_shape, (guint) o.make_layers,
            o.make_type, o.widen, o.output, nth, TRUE, &error)
        : !bench_make_model (o.make_shape, (guint) o.make_layers, o.make_type, o.output,
            (guint64) o.seed, nth, TRUE, &error)) {
      g_printerr ("gst-llm-bench: %s\n", error->message);
      return 1;
    }
    return 0;
  }
  if (o.audio != NULL) {
    if (o.reps < 1) {
      g_printerr ("gst-llm-bench: -r must be at least 1\n");
      return 2;
    }
    g_autoptr (GArray) at = g_array_new (FALSE, FALSE, sizeof (guint));
    if (!parse_uint_list (o.thread_counts, "1,2", "--threads", at, &error))
      return usage_error (error);
    const BenchAudioSetting as = {
      .mmproj = o.audio, .pcm = o.audio_pcm, .threads = (const guint *) at->data,
      .n_threads = at->len, .rounds = (guint) o.reps, .json = o.json,
    };
    if (!bench_audio_run (&as, &error)) {
      g_printerr ("gst-llm-bench: %s\n", error->message);
      return 1;
    }
    return 0;
  }
  if (o.vision != NULL) {
    if (o.reps < 1) {
      g_printerr ("gst-llm-bench: -r must be at least 1\n");
      return 2;
    }
    /* One and two threads unless -t says (the comparison's default). */
    g_autoptr (GArray) vt = g_array_new (FALSE, FALSE, sizeof (guint));
    if (!parse_uint_list (o.thread_counts, "1,2", "--threads", vt, &error))
      return usage_error (error);
    const BenchVisionSetting vs = {
      .mmproj = o.vision, .threads = (const guint *) vt->data, .n_threads = vt->len,
      .rounds = (guint) o.reps, .json = o.json,
    };
    if ((o.vision_image != NULL && !bench_vision_write_image (o.vision, o.vision_image, &error))
        || !bench_vision_run (&vs, &error)) {
      g_printerr ("gst-llm-bench: %s\n", error->message);
      return 1;
    }
    return 0;
  }
  if (o.models == NULL) {
    g_printerr ("gst-llm-bench: give a model with -m FILE, or --make-model (see --help)\n");
    return 2;
  }
  if (o.reps < 1) {
    g_printerr ("gst-llm-bench: -r must be at least 1\n");
    return 2;
  }

  /* Many streams multiply the work: shorter defaults. */
  const gboolean many = o.streams != NULL;
  if (!parse_uint_list (o.prompt_lens, many ? "32" : "512", "-p", prompts, &error) ||
      !parse_uint_list (o.gen_lens, many ? "32" : "128", "-n", gens, &error) ||
      !parse_uint_list (o.depths, "0", "--depth", depths, &error) ||
      !parse_kv_list (o.kv_types, kvs, &error) ||
      (many && !parse_uint_list (o.streams, NULL, "--streams", streams, &error)) ||
      (o.batch != NULL && !parse_uint_list (o.batch, NULL, "--batch", batch, &error)))
    return usage_error (error);
  if (o.spec != NULL) {
    if (strcmp (o.spec, "ngram") != 0 && strcmp (o.spec, "model") != 0
        && strcmp (o.spec, "layerskip") != 0 && strcmp (o.spec, "layerskip-fixed") != 0) {
      g_printerr ("gst-llm-bench: --spec takes ngram (prompt lookup), model (--draft-model), "
          "layerskip or layerskip-fixed\n");
      return 2;
    }
    if ((strcmp (o.spec, "model") == 0) != (o.draft_model != NULL)) {
      g_printerr ("gst-llm-bench: --draft-model goes with --spec model, and it needs one\n");
      return 2;
    }
    if (o.draft_table != NULL && o.draft_model == NULL) {
      g_printerr ("gst-llm-bench: --spec-draft-table goes with --spec model\n");
      return 2;
    }
    if (o.draft_table != NULL && !g_file_test (o.draft_table, G_FILE_TEST_IS_DIR)) {
      g_printerr ("gst-llm-bench: --spec-draft-table: %s is not a directory\n", o.draft_table);
      return 2;
    }
    if (o.spec_prompts == NULL || many || o.batch != NULL || o.pipeline) {
      g_printerr ("gst-llm-bench: --spec needs --spec-prompt and goes without --streams, "
          "--batch and --pipeline\n");
      return 2;
    }
    if (o.spec_draft_max < 1 || o.spec_draft_max > LLM_SPEC_BUDGET_MAX
        || !parse_uint_list (o.draft_maxes, "2,4,8", "--draft-max", fixed, &error))
      return o.spec_draft_max < 1 || o.spec_draft_max > LLM_SPEC_BUDGET_MAX
          ? (g_printerr ("gst-llm-bench: --spec-draft-max takes 1 to 64\n"), 2)
          : usage_error (error);
    for (guint i = 0; i < fixed->len; i++) {
      if (g_array_index (fixed, guint, i) < 1
          || g_array_index (fixed, guint, i) > LLM_SPEC_BUDGET_MAX) {
        g_printerr ("gst-llm-bench: --draft-max takes 1 to 64\n");
        return 2;
      }
    }
    /* The first token is sampled after the prompt, untimed: with no
     * token after it there is no decode rate to compare. */
    for (guint i = 0; i < gens->len; i++) {
      if (g_array_index (gens, guint, i) < 2) {
        g_printerr ("gst-llm-bench: --spec needs -n of at least 2\n");
        return 2;
      }
    }
  }
  if (o.batch != NULL && (many || o.pipeline || has_zero (batch))) {
    g_printerr ("gst-llm-bench: --batch needs sizes above 0 and goes without --streams and "
        "--pipeline\n");
    return 2;
  }
  if (many) {
    if (has_zero (streams) || has_zero (prompts) || has_zero (gens)) {
      g_printerr ("gst-llm-bench: --streams needs --streams, -p and -n above 0\n");
      return 2;
    }
    if (depths->len != 1 || g_array_index (depths, guint, 0) != 0 || o.pipeline) {
      g_printerr ("gst-llm-bench: --depth and --pipeline do not go with --streams\n");
      return 2;
    }
  }
  if (o.max_prefill_chunk < 0 || o.max_prefill_chunk > 128) {
    g_printerr ("gst-llm-bench: --max-prefill-chunk takes 1 to 128\n");
    return 2;
  }
  if (o.duration < 0 || o.max_batch_wait_us < 0 || o.max_rate_deviation < 0) {
    g_printerr ("gst-llm-bench: --duration, --max-batch-wait and --max-rate-deviation must "
        "not be negative\n");
    return 2;
  }
  if (has_zero (threads)) {
    g_printerr ("gst-llm-bench: --threads must be at least 1\n");
    return 2;
  }

  /* Bandwidth per thread count, measured before any model is mapped. */
  g_autofree double *bw = g_new0 (double, threads->len);
  const int first_mib = o.bandwidth_mib < 0 ? BANDWIDTH_MIB : o.bandwidth_mib;
  if (first_mib > 0) {
    for (guint i = 0; i < threads->len; i++) {
      guint th = g_array_index (threads, guint, i);
      bw[i] = bench_read_bandwidth ((gsize) first_mib << 20, (int) th, 5, &error);
      if (bw[i] <= 0) {
        g_printerr ("gst-llm-bench: bandwidth test: %s\n", error ? error->message : "failed");
        g_clear_error (&error);
      } else if (!o.json) {
        g_print ("read bandwidth, %u thread%s (best pass over %d MiB): %.1f GB/s\n", th,
            th == 1 ? "" : "s", first_mib, bw[i] / 1e9);
      }
    }
  }
  if (!o.json) {
    g_print ("kernels: %s\n\n", llm_cpu_isa_name (llm_cpu_isa_best ()));
    if (many)
      print_streams_header ();
    else if (o.batch != NULL)
      print_batch_header ();
    else if (o.spec != NULL)
      print_spec_header ();
    else
      print_table_header ();
  }

  int status = 0;
  for (char **path = o.models; *path != NULL; path++) {
    g_autoptr (LlmModel) model = llm_model_load (*path, &error);
    if (model == NULL) {
      g_printerr ("gst-llm-bench: %s\n", error->message);
      g_clear_error (&error);
      status = 1;
      continue;
    }
    ModelInfo info = model_info (model);
    for (guint ti = 0; ti < threads->len; ti++)
      for (guint ki = 0; ki < kvs->len; ki++)
        for (guint di = 0; di < depths->len; di++)
          for (guint pi = 0; pi < prompts->len; pi++)
            for (guint gi = 0; gi < gens->len; gi++) {
              Setting s = {
                .threads = g_array_index (threads, guint, ti),
                .depth = g_array_index (depths, guint, di),
                .n_prompt = g_array_index (prompts, guint, pi),
                .n_gen = g_array_index (gens, guint, gi),
                .kv_type = g_array_index (kvs, LlmKvType, ki),
              };
              if (o.spec != NULL) {
                /* Once per thread count, kv type and -n. */
                if (pi == 0 && di == 0 && !run_spec (model, &info, &s, &o, fixed))
                  status = 1;
                continue;
              }
              if (o.batch != NULL) {
                /* Once per thread count, kv type and depth. */
                if (pi == 0 && gi == 0 && !run_batch (model, &info, &s, &o, batch))
                  status = 1;
                continue;
              }
              if (s.n_prompt == 0 && s.n_gen == 0)
                continue;
              if (many) {
                if (!run_streams (model, &info, &s, &o, streams))
                  status = 1;
                continue;
              }
              Result r = { 0 };
              if (!run_setting (model, &s, &o, &r, &error)) {
                g_printerr ("gst-llm-bench: %s: %s\n", info.name, error->message);
                g_clear_error (&error);
                status = 1;
                continue;
              }
              if (o.pipeline)
                run_pipeline (model, &s, &o, &r);
              Roofline rf = roofline (model, &s, &r, bw[ti]);
              if (o.json)
                print_json (model, &info, &s, &r, &rf);
              else
                print_rows (model, &info, &s, &r, &rf);
              g_free (r.pipe_error);
              g_free (r.rep_tg);
              g_free (r.rep_bandwidth);
            }
    g_free (info.name);
    g_free (info.type);
  }
  return status;
}
