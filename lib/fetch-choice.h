/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which way a decode step's weight products fetch their weights: by the
 * kernels' own prefetches ahead of each stream (LLM_FETCH_KERNEL), or by
 * the hardware prefetchers alone (LLM_FETCH_HARDWARE). Neither is faster
 * everywhere, nor on one machine all the time. On a Zen 5 guest (AVX-512,
 * two threads), the packed Q8_0 and Q4_0 products of one token read
 * 1.10-1.25x faster by the hardware alone while memory answered quickly
 * (a streaming read at 60-75 GB/s), and up to 1.14x slower that way while
 * another tenant held the memory bus (35-50 GB/s), minutes apart; on its
 * AVX2 paths, more instructions a byte, the kernels' way was up to 1.25x
 * faster. So the engine keeps choosing, from the time its own steps take.
 *
 * One observation per decode step: the time its one-token products took
 * over the bytes they read. Every PROBE_EVERY steps of the way in use,
 * one step fetches the other way, and its time per byte over that of the
 * faster of the steps just before and after it is one verdict; a moving
 * average of the verdicts (each held within VERDICT_MAX either way, so one
 * preempted step moves it little) decides, with a margin, which way the
 * steps take. A fresh engine skips its cold first steps and decides on no
 * fewer than three verdicts (within a dozen steps). A probe costs its
 * step at the slower way's price (and, measured, a little of the next):
 * where the ways are far apart they come four times less often. A change
 * of the machine's state turns the choice within a few probes. Pure
 * arithmetic: no clock, no threads. */
#pragma once

#include <glib.h>

#include "cpu/matmul.h"

G_BEGIN_DECLS

typedef struct {
  LlmFetch mode;              /* the way the steps take, probes aside */
  LlmFetch next;              /* the way the next step takes */
  double last;                /* @mode's latest step, ns a byte; 0: none */
  double probe;               /* the probe awaiting its verdict; 0: none */
  double ratio;               /* average verdict, as hardware / kernel time */
  guint verdicts;             /* made, up to a cap */
  guint since_probe;          /* @mode's steps since the last probe */
  guint64 steps[2];           /* steps observed each way (for stats) */
} LlmFetchChoice;

void llm_fetch_choice_init (LlmFetchChoice *c);
/* A step's one-token products read @bytes in @ns, fetched as c->next
 * said; returns (and leaves in c->next) the way of the next step. Steps
 * that read nothing tell nothing. */
LlmFetch llm_fetch_choice_observe (LlmFetchChoice *c, double bytes, double ns);

G_END_DECLS
