/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The most prompt lookup could make of a response (gst-llm-bench --spec
 * ngram prints it beside the measured variants). Replaying the greedy
 * response, each step takes, of every earlier occurrence of the last
 * n_min tokens, the one whose continuation goes on agreeing longest, and
 * proposes exactly the tokens that will be accepted: no lookup drafter
 * (whichever occurrence it picks) and no budget (however well it guesses
 * the length) accepts more in a step or checks fewer proposals for it.
 * Between this bound and the dynamic budget lies what choosing the
 * occurrence and the length loses; between the bound and a target, what
 * the text itself allows. */
#include "bench.h"

#include <string.h>

guint64
bench_spec_lookup_best (const gint32 *prompt, guint n_prompt, const gint32 *gen, guint n_gen,
    guint n_min, guint max, guint64 *lengths)
{
  g_return_val_if_fail (n_min >= 1 && (n_gen == 0 || gen != NULL), 0);
  memset (lengths, 0, ((gsize) max + 1) * sizeof *lengths);
  if (n_gen == 0)
    return 0;
  /* The text as it will be: a continuation that runs past the history
   * repeats itself with its period (llm_ngram_draft_propose), which,
   * for as long as it is accepted, is the response's own next tokens. */
  g_autofree gint32 *all = g_new (gint32, (gsize) n_prompt + n_gen);
  if (n_prompt > 0)
    memcpy (all, prompt, n_prompt * sizeof *all);
  memcpy (all + n_prompt, gen, n_gen * sizeof *all);

  guint64 steps = 0;
  for (guint have = 1; have < n_gen; steps++) {
    const guint end = n_prompt + have;
    guint best = 0;
    /* Occurrences [j - n_min, j) before the suffix's own, continued at j. */
    for (guint j = n_min; j < end && best < max; j++) {
      if (memcmp (all + j - n_min, all + end - n_min, n_min * sizeof *all) != 0)
        continue;
      guint a = 0;
      while (a < max && have + a < n_gen && all[j + a] == all[end + a])
        a++;
      best = MAX (best, a);
    }
    lengths[best]++;
    have += MIN (best + 1, n_gen - have);
  }
  return steps;
}
