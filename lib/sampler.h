/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Picks the next token from logits: greedy, or repetition penalty -> top-k
 * -> top-p -> min-p -> temperature -> a seeded random draw, the order
 * llama.cpp's default sampler chain uses. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  float temperature;      /* <= 0: greedy (argmax, ties to the lowest id) */
  gint top_k;             /* <= 0: off */
  float top_p;            /* >= 1: off */
  float min_p;            /* <= 0: off */
  float repeat_penalty;   /* 1: off; llama.cpp's rule (divide positive logits, multiply negative) */
  gint repeat_last_n;     /* how many recent tokens the penalty looks at; 0: off, -1: all */
  guint64 seed;
} LlmSamplerParams;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * penalty 1.0 over the last 64 tokens, seed 0. */
void llm_sampler_params_init (LlmSamplerParams *params);
/* Whether @a and @b pick tokens alike (every field equal). */
gboolean llm_sampler_params_equal (const LlmSamplerParams *a, const LlmSamplerParams *b);

typedef struct _LlmSampler LlmSampler;

LlmSampler *llm_sampler_new (const LlmSamplerParams *params);
void llm_sampler_free (LlmSampler *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmSampler, llm_sampler_free)

/* Forget the token history and restart the random sequence from the seed. */
void llm_sampler_reset (LlmSampler *s);
/* Forget the token history only; the random sequence goes on (a rollback
 * further back than llm_sampler_rollback() goes refills the history from
 * what is kept). */
void llm_sampler_forget_history (LlmSampler *s);
/* Add @id to the history the repetition penalty looks at (prompt tokens and
 * generated ones). */
void llm_sampler_accept (LlmSampler *s, gint32 id);

/* Accepts llm_sampler_rollback() can take back. */
#define LLM_SAMPLER_ROLLBACK 128

/* Takes back the last @n accepts and every draw made since the first of
 * them: the penalty's window and the random sequence are as they were
 * before it, so a session cut back to a shorter history samples on as if
 * the rest had never been. FALSE (nothing changed) where @n is more than
 * LLM_SAMPLER_ROLLBACK or than the accepts since the last reset. */
gboolean llm_sampler_rollback (LlmSampler *s, guint n);
/* The lowest index among the largest of @n values, a NaN never counting;
 * 0 when none is above -inf (as greedy sampling picks). */
gint32 llm_argmax (const float *x, gsize n);
/* The probability softmax gives the largest of @n logits (@n > 0). */
float llm_top_probability (const float *logits, gsize n);
/* The same where it is at least @floor (within 7e-5 of it, logits more
 * than 20 below the largest left out), else some value below @floor:
 * tens of microseconds over 32000 logits where libm's expf on every one
 * took a millisecond, a draft forward's tenth. */
float llm_top_probability_above (const float *logits, gsize n, float floor);
/* The next token for @logits (@n_vocab values; not modified). */
gint32 llm_sampler_sample (LlmSampler *s, const float *logits, guint32 n_vocab);

/* The next token for @logits when a drafter proposed @draft for it with
 * certainty: *@accepted says whether the pick is the draft. The pick is
 * llm_sampler_sample's, with the same draw: the draft is accepted with
 * exactly its probability (speculative sampling's rule for a certain
 * proposal), and a seed gives the same tokens as without speculation. */
gint32 llm_sampler_sample_draft (LlmSampler *s, const float *logits, guint32 n_vocab,
    gint32 draft, gboolean *accepted);

G_END_DECLS
