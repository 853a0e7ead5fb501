/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sampler's intermediate state, for tests: which candidates survive the
 * penalty and the filters. Not for use outside lib/ and tests/. */
#pragma once

#include "sampler.h"

G_BEGIN_DECLS

typedef struct {
  gint32 id;
  float logit;  /* after the repetition penalty, before temperature */
  float p;      /* scratch: meaningful only right after a softmax stage */
} LlmSamplerCandidate;

/* Runs the repetition penalty, top-k, top-p and min-p on @logits (not the
 * temperature, not the draw, and regardless of the greedy setting) and sets
 * *@out to the survivors, in no promised order. Returns their count; 0 when
 * every logit is -inf or NaN. *@out points into @s's scratch: valid until the
 * next call on @s, not to be freed. */
guint32 llm_sampler_candidates (LlmSampler *s, const float *logits, guint32 n_vocab,
    const LlmSamplerCandidate **out);

/* The random generator: xoshiro256** whose state is the first four outputs
 * of splitmix64 from @seed. Exposed for known-answer tests against the
 * published reference outputs of both. */
void llm_sampler_rng_seed (guint64 state[4], guint64 seed);
guint64 llm_sampler_rng_next (guint64 state[4]);

G_END_DECLS
