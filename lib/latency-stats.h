/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The mean and percentiles of a stream of durations (non-negative integers,
 * say microseconds) in fixed memory, however long the stream runs: the
 * mean exactly, from a sum and a count; percentiles from a log-spaced
 * histogram, within 1/64 (1.6 %) of the exact nearest-rank value. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Values below 64 have a bin each; above, each power of two is split into
 * 32 bins, up to 2^40 (larger values count in the last bin). */
#define LLM_LATENCY_STATS_BINS (64 + (40 - 6) * 32)

/* Plain data, to embed; fill with llm_latency_stats_clear(). Fields are
 * private. */
typedef struct {
  guint64 count;
  gint64 sum;
  gint64 min, max;
  guint64 bins[LLM_LATENCY_STATS_BINS];
} LlmLatencyStats;

/* Empties @stats. */
void llm_latency_stats_clear (LlmLatencyStats *stats);
/* Counts @value (a negative one as 0). */
void llm_latency_stats_add (LlmLatencyStats *stats, gint64 value);

guint64 llm_latency_stats_count (const LlmLatencyStats *stats);
/* Exact sum of the values. */
gint64 llm_latency_stats_sum (const LlmLatencyStats *stats);
/* Exact mean (sum / count); 0 when empty. */
double llm_latency_stats_mean (const LlmLatencyStats *stats);
/* The value of nearest rank ceil(@percent / 100 * count) (at least rank 1)
 * among the values in order: exact below 64 and for the smallest and
 * largest value, else within 1/64 of it. 0 when empty. @percent is at
 * most 100. */
double llm_latency_stats_percentile (const LlmLatencyStats *stats, guint percent);

G_END_DECLS
