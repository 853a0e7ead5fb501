/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The histogram is HDR-style: a value v >= 64 with highest bit e falls in
 * one of 32 bins of width 2^(e-5) between 2^e and 2^(e+1), so a bin is at
 * most 1/32 of its lower bound wide and its midpoint is within 1/64 of
 * every value in it. 1152 bins of counts (9 KiB) cover 0 to 2^40: with
 * microseconds, steps of up to 12 days. A P² estimator would take five
 * numbers, but without a bound on its error. */
#include "latency-stats.h"

#include <string.h>

#define EXACT 64          /* values below have a bin each */
#define PER_OCTAVE 32
#define MAX_BITS 40

/* Highest set bit of @v >= EXACT. */
static guint
top_bit (guint64 v)
{
  guint e = 6;
  while ((v >> (e + 1)) != 0)
    e++;
  return e;
}

static guint
bin_of (guint64 v)
{
  if (v < EXACT)
    return (guint) v;
  if (v >= G_GUINT64_CONSTANT (1) << MAX_BITS)
    return LLM_LATENCY_STATS_BINS - 1;
  guint e = top_bit (v);
  return EXACT + (e - 6) * PER_OCTAVE + (guint) ((v >> (e - 5)) - PER_OCTAVE);
}

/* The values of bin @b: @lo to @hi - 1. */
static void
bin_range (guint b, guint64 *lo, guint64 *hi)
{
  if (b < EXACT) {
    *lo = b;
    *hi = b + 1;
    return;
  }
  guint e = 6 + (b - EXACT) / PER_OCTAVE;
  guint64 m = PER_OCTAVE + (b - EXACT) % PER_OCTAVE;
  *lo = m << (e - 5);
  *hi = (m + 1) << (e - 5);
}

void
llm_latency_stats_clear (LlmLatencyStats *stats)
{
  memset (stats, 0, sizeof *stats);
}

void
llm_latency_stats_add (LlmLatencyStats *stats, gint64 value)
{
  value = MAX (value, 0);
  if (stats->count == 0 || value < stats->min)
    stats->min = value;
  if (stats->count == 0 || value > stats->max)
    stats->max = value;
  stats->count++;
  stats->sum += value;
  stats->bins[bin_of ((guint64) value)]++;
}

guint64
llm_latency_stats_count (const LlmLatencyStats *stats)
{
  return stats->count;
}

gint64
llm_latency_stats_sum (const LlmLatencyStats *stats)
{
  return stats->sum;
}

double
llm_latency_stats_mean (const LlmLatencyStats *stats)
{
  return stats->count > 0 ? (double) stats->sum / stats->count : 0.0;
}

double
llm_latency_stats_percentile (const LlmLatencyStats *stats, guint percent)
{
  if (stats->count == 0)
    return 0.0;
  guint64 rank = (MIN (percent, 100) * stats->count + 99) / 100;
  if (rank <= 1)
    return stats->min;
  if (rank >= stats->count)
    return stats->max;

  guint64 seen = 0;
  for (guint b = 0; b < LLM_LATENCY_STATS_BINS; b++) {
    seen += stats->bins[b];
    if (seen < rank)
      continue;
    guint64 lo, hi;
    bin_range (b, &lo, &hi);
    double mid = (lo + hi - 1) / 2.0;
    return CLAMP (mid, (double) stats->min, (double) stats->max);
  }
  return stats->max;
}
