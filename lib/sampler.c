/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sampler chain of llama.cpp's defaults (penalties, top-k, top-p, min-p,
 * temperature, dist), rebuilt for one caller that owns its logits:
 *
 * - Per call it costs a few passes over the vocabulary and nothing like a
 *   sort of it: top-k is a bounded heap, top-p without top-k first tries the
 *   256 best and otherwise finds its cut by quickselect. Top-k (in the
 *   defaults) reads the logits once and never copies them (load_top).
 *   Nothing allocates once the scratch has grown to the vocabulary.
 * - Candidates are ordered by (logit descending, id ascending), a total
 *   order, so which tokens survive a tie never depends on the sort.
 * - The random stream is our own xoshiro256** so that a seed gives the same
 *   tokens on every platform and libc (std::mt19937 plus
 *   uniform_real_distribution does not promise that).
 */
#include "sampler.h"
#include "sampler-private.h"

#include <float.h>
#include <math.h>
#include <string.h>
#ifdef __SSE__
#include <xmmintrin.h>
#endif

/* top-p first tries to reach p within this many best candidates: a model's
 * distribution is usually peaked, and selecting 256 of 150k costs about one
 * comparison per candidate. */
#define TOP_P_FIRST_TRY 256u

struct _LlmSampler {
  LlmSamplerParams params;
  gboolean greedy;
  gboolean penalise;

  guint64 rng[4];
  /* The random state at each of the last LLM_SAMPLER_ROLLBACK accepts,
   * [n_accepted % LLM_SAMPLER_ROLLBACK] the next. */
  guint64 rng_at[LLM_SAMPLER_ROLLBACK][4];
  guint64 n_accepted;

  /* Accepted ids, oldest first; the penalty's window is the last
   * hist_limit of them. At least LLM_SAMPLER_ROLLBACK more are kept, so a
   * rollback gives the window back as it was; grown on demand, so a huge
   * repeat_last_n costs only what was accepted. */
  gint32 *hist;
  guint hist_len;
  guint hist_alloc;
  guint hist_limit;

  /* One entry per vocabulary id; kept between calls so sampling allocates
   * only when the vocabulary grows. */
  LlmSamplerCandidate *cand;
  guint32 cand_alloc;
  /* The penalised ids' logits, by id, for load_top. */
  LlmSamplerCandidate *pen;
  guint32 pen_alloc;
};

void
llm_sampler_params_init (LlmSamplerParams *params)
{
  g_return_if_fail (params != NULL);

  params->temperature = 0.8f;
  params->top_k = 40;
  params->top_p = 0.95f;
  params->min_p = 0.05f;
  params->repeat_penalty = 1.0f;
  params->repeat_last_n = 64;
  params->seed = 0;
}

gboolean
llm_sampler_params_equal (const LlmSamplerParams *a, const LlmSamplerParams *b)
{
  return a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p
      && a->min_p == b->min_p && a->repeat_penalty == b->repeat_penalty
      && a->repeat_last_n == b->repeat_last_n && a->seed == b->seed;
}

/* --- random numbers --- */

static guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline guint64
rotl64 (guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

guint64
llm_sampler_rng_next (guint64 s[4])
{
  const guint64 result = rotl64 (s[1] * 5, 7) * 9;
  const guint64 t = s[1] << 17;

  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64 (s[3], 45);
  return result;
}

/* Uniform in [0, 1): the top 53 bits, exactly representable in a double. */
static double
uniform01 (LlmSampler *s)
{
  return (double) (llm_sampler_rng_next (s->rng) >> 11) * 0x1.0p-53;
}

void
llm_sampler_rng_seed (guint64 state[4], guint64 seed)
{
  /* splitmix64 spreads any seed, 0 included, over the whole state; an
   * all-zero xoshiro state would be stuck at zero. */
  guint64 sm = seed;
  for (int i = 0; i < 4; i++)
    state[i] = splitmix64 (&sm);
}

static void
seed_rng (LlmSampler *s)
{
  llm_sampler_rng_seed (s->rng, s->params.seed);
}

/* --- life cycle --- */

LlmSampler *
llm_sampler_new (const LlmSamplerParams *params)
{
  g_return_val_if_fail (params != NULL, NULL);

  LlmSampler *s = g_new0 (LlmSampler, 1);
  s->params = *params;

  /* Written as negations so that NaN lands on the harmless side: greedy,
   * filter off, penalty off. */
  s->greedy = !(params->temperature > 0.0f);
  if (isinf (params->temperature))
    s->params.temperature = FLT_MAX;  /* (-inf) / inf would be NaN */
  if (!(params->top_p < 1.0f))
    s->params.top_p = 1.0f;
  if (!(params->min_p > 0.0f))
    s->params.min_p = 0.0f;

  /* A penalty <= 0 would flip or zero logits rather than penalise them; it
   * has no meaning in llama.cpp's rule either, so it turns the stage off. */
  s->penalise = params->repeat_last_n != 0 && isfinite (params->repeat_penalty)
      && params->repeat_penalty > 0.0f && params->repeat_penalty != 1.0f;
  s->hist_limit = params->repeat_last_n < 0 ? G_MAXUINT : (guint) params->repeat_last_n;

  seed_rng (s);
  return s;
}

void
llm_sampler_free (LlmSampler *s)
{
  if (s == NULL)
    return;
  g_free (s->hist);
  g_free (s->cand);
  g_free (s->pen);
  g_free (s);
}

void
llm_sampler_reset (LlmSampler *s)
{
  g_return_if_fail (s != NULL);

  s->hist_len = 0;
  s->n_accepted = 0;
  seed_rng (s);
}

void
llm_sampler_forget_history (LlmSampler *s)
{
  g_return_if_fail (s != NULL);
  s->hist_len = 0;
}

void
llm_sampler_accept (LlmSampler *s, gint32 id)
{
  g_return_if_fail (s != NULL);

  memcpy (s->rng_at[s->n_accepted++ % LLM_SAMPLER_ROLLBACK], s->rng, sizeof s->rng);
  if (!s->penalise)
    return;

  if (s->hist_len == s->hist_alloc) {
    /* What is kept: the window and the ids a rollback may give back. */
    const guint keep = s->hist_limit > G_MAXUINT / 2 ? G_MAXUINT
        : s->hist_limit + LLM_SAMPLER_ROLLBACK;
    if (s->hist_len >= 2 * (guint64) keep) {
      memmove (s->hist, s->hist + s->hist_len - keep, keep * sizeof *s->hist);
      s->hist_len = keep;
    } else {
      const guint grow = s->hist_alloc < 32 ? 64 : s->hist_alloc;
      s->hist_alloc += (guint) MIN ((guint64) grow, 2 * (guint64) keep - s->hist_alloc);
      s->hist = g_renew (gint32, s->hist, s->hist_alloc);
    }
  }
  s->hist[s->hist_len++] = id;
}

gboolean
llm_sampler_rollback (LlmSampler *s, guint n)
{
  g_return_val_if_fail (s != NULL, FALSE);
  if (n == 0)
    return TRUE;
  if (n > LLM_SAMPLER_ROLLBACK || n > s->n_accepted)
    return FALSE;
  s->n_accepted -= n;
  memcpy (s->rng, s->rng_at[s->n_accepted % LLM_SAMPLER_ROLLBACK], sizeof s->rng);
  if (s->penalise)
    s->hist_len -= MIN (n, s->hist_len);
  return TRUE;
}

/* --- the scratch and the penalty --- */

/* Grows @buf to hold @n candidates (its contents are not kept). */
static void
scratch_hold (LlmSamplerCandidate **buf, guint32 *alloc, guint32 n)
{
  if (n > *alloc) {
    g_free (*buf);
    *buf = g_new (LlmSamplerCandidate, n);
    *alloc = n;
  }
}

/* The first accepted id in the penalty's window. */
static guint
window_start (const LlmSampler *s)
{
  return s->hist_len - MIN (s->hist_len, s->hist_limit);
}

/* llama.cpp's repetition penalty of one logit (NaN already read as -inf). */
static inline float
penalised (float logit, float penalty)
{
  return logit <= 0.0f ? logit * penalty : logit / penalty;
}

/* --- candidate ordering --- */

/* The total order every stage sorts and selects by. */
static inline gboolean
better (const LlmSamplerCandidate *a, const LlmSamplerCandidate *b)
{
  return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void
swap (LlmSamplerCandidate *a, LlmSamplerCandidate *b)
{
  LlmSamplerCandidate t = *a;
  *a = *b;
  *b = t;
}

/* Heap of @n with the worst candidate at the root. */
static void
sift_down (LlmSamplerCandidate *h, guint32 n, guint32 i)
{
  for (;;) {
    guint32 worst = i;
    guint32 l = 2 * i + 1;
    guint32 r = l + 1;
    if (l < n && better (&h[worst], &h[l]))
      worst = l;
    if (r < n && better (&h[worst], &h[r]))
      worst = r;
    if (worst == i)
      return;
    swap (&h[i], &h[worst]);
    i = worst;
  }
}

/* Moves the @m best of @c[0..@n) to the front, best first; the rest stay
 * behind them in some order (swapped, not overwritten, so a later call may
 * select again over all @n). A bounded heap rather than quickselect: no
 * pivot luck, and most candidates cost one comparison with the root.
 * O(n log m) at worst; with m = n it is a heapsort. */
static void
select_top (LlmSamplerCandidate *c, guint32 n, guint32 m)
{
  g_assert (m >= 1 && m <= n);

  for (guint32 i = m / 2; i-- > 0;)
    sift_down (c, m, i);
  for (guint32 j = m; j < n; j++) {
    if (better (&c[j], &c[0])) {
      swap (&c[0], &c[j]);
      sift_down (c, m, 0);
    }
  }
  for (guint32 end = m - 1; end > 0; end--) {
    swap (&c[0], &c[end]);
    sift_down (c, end, 0);
  }
}

typedef float SamplerF4 __attribute__ ((vector_size (16)));
typedef gint32 SamplerI4 __attribute__ ((vector_size (16)));

/* a where it is the larger, else b (a NaN loses): maxps exactly. */
static inline SamplerF4
larger (SamplerF4 a, SamplerF4 b)
{
#ifdef __SSE__
  return (SamplerF4) _mm_max_ps ((__m128) a, (__m128) b);
#else
  const SamplerI4 gt = a > b;
  return (SamplerF4) ((gt & (SamplerI4) a) | (~gt & (SamplerI4) b));
#endif
}

/* The largest of @n logits, -inf if none is larger (NaN never is): sixteen
 * lanes in four independent vectors at a time, on every target GCC builds
 * for (a scalar loop's lanes stayed on the stack, each a store and a load
 * an element). */
static inline float
largest (const float *x, gsize n)
{
  const SamplerF4 none = { -INFINITY, -INFINITY, -INFINITY, -INFINITY };
  SamplerF4 m0 = none, m1 = none, m2 = none, m3 = none, v0, v1, v2, v3;
  gsize j = 0;
  for (; j + 16 <= n; j += 16) {
    memcpy (&v0, x + j, sizeof v0);
    memcpy (&v1, x + j + 4, sizeof v1);
    memcpy (&v2, x + j + 8, sizeof v2);
    memcpy (&v3, x + j + 12, sizeof v3);
    m0 = larger (v0, m0);
    m1 = larger (v1, m1);
    m2 = larger (v2, m2);
    m3 = larger (v3, m3);
  }
  for (; j + 4 <= n; j += 4) {
    memcpy (&v0, x + j, sizeof v0);
    m0 = larger (v0, m0);
  }
  const SamplerF4 a = larger (larger (m0, m1), larger (m2, m3));
  float r = MAX (MAX (a[0], a[1]), MAX (a[2], a[3]));
  for (; j < n; j++)
    r = x[j] > r ? x[j] : r;
  return r;
}

/* load() then filter()'s top-k in one read of @logits, with the @n_pen
 * penalised logits of @pen (by id) in place of theirs: the @m best finite
 * logits go to the front of the scratch, best first, the order select_top
 * leaves (the order is total, so the result is the same). Logits are read
 * in id order, so a later one beats a kept one exactly when its logit is
 * larger, and most cost one comparison with the heap's worst; the scratch
 * is never filled with the whole vocabulary. The default chain over 32000
 * random logits took 75 us a call and takes 16 (23 with a penalty over
 * the last 64 ids), over 151936 logits 338 us and 44 (52): Zen 5, the
 * same draws seed for seed. Returns @m, or 0 where filter() must decide
 * from every candidate (a +inf logit keeps only the +inf ones; with @m or
 * fewer possible tokens top-k keeps their order): the caller then takes
 * the general way. */
static guint32
load_top (LlmSampler *s, const float *logits, guint32 n_vocab, guint32 m,
    const LlmSamplerCandidate *pen, guint32 n_pen)
{
  scratch_hold (&s->cand, &s->cand_alloc, m);
  LlmSamplerCandidate *c = s->cand;
  /* @pen is by id, and ids are read in order: the next penalised one. */
  guint32 i = 0, held = 0, pi = 0;
#define LOGIT_AT(j) (pi < n_pen && pen[pi].id == (gint32) (j) ? pen[pi++].logit : logits[j])
  for (; i < n_vocab && held < m; i++) {
    const float l = LOGIT_AT (i);
    if (!(l > -INFINITY))       /* -inf, and NaN read as -inf */
      continue;
    if (l == INFINITY)
      return 0;
    c[held++] = (LlmSamplerCandidate) { .id = (gint32) i, .logit = l };
  }
  if (held < m)
    return 0;
  for (guint32 j = m / 2; j-- > 0;)
    sift_down (c, m, j);
  gboolean more = FALSE;
  while (i < n_vocab) {
    /* A block's largest first, in four independent maxima (a NaN is never
     * larger); its logits one by one only where it could beat the worst,
     * or where a penalty changes one of them. */
    const guint32 end = MIN (i + 16, n_vocab);
    const gboolean penalised = pi < n_pen && pen[pi].id < (gint32) end;
    if (!penalised) {
      const float block_max = largest (logits + i, end - i);
      more |= block_max > -INFINITY;
      if (!(block_max > c[0].logit)) {
        i = end;
        continue;
      }
    }
    for (; i < end; i++) {
      const float l = LOGIT_AT (i);
      more |= l > -INFINITY;
      if (l > c[0].logit) {
        if (l == INFINITY)
          return 0;
        c[0] = (LlmSamplerCandidate) { .id = (gint32) i, .logit = l };
        sift_down (c, m, 0);
      }
    }
  }
#undef LOGIT_AT
  if (!more)
    return 0;
  for (guint32 end = m - 1; end > 0; end--) {
    swap (&c[0], &c[end]);
    sift_down (c, end, 0);
  }
  return m;
}

/* --- stages --- */

/* Fills the scratch with one candidate per id (NaN read as -inf) and applies
 * the repetition penalty. */
static void
load (LlmSampler *s, const float *logits, guint32 n_vocab)
{
  scratch_hold (&s->cand, &s->cand_alloc, n_vocab);
  LlmSamplerCandidate *c = s->cand;
  for (guint32 i = 0; i < n_vocab; i++) {
    float l = logits[i];
    c[i].id = (gint32) i;
    c[i].logit = isnan (l) ? -INFINITY : l;
    c[i].p = 0.0f;
  }

  if (!s->penalise)
    return;

  /* llama.cpp penalises each distinct id once, however often it repeats;
   * p (unused until a softmax stage) marks the ids already done, which
   * saves a per-call set. */
  const float penalty = s->params.repeat_penalty;
  for (guint i = window_start (s); i < s->hist_len; i++) {
    gint32 id = s->hist[i];
    if (id < 0 || (guint32) id >= n_vocab || c[id].p != 0.0f)
      continue;
    c[id].p = 1.0f;
    c[id].logit = penalised (c[id].logit, penalty);
  }
}

/* Lowest id among the largest logits; id 0 when all are -inf. */
static gint32
argmax (const LlmSamplerCandidate *c, guint32 n)
{
  /* The best logit kept in a local, not reread through c[best]: that
   * reload made every step wait on the previous one. */
  guint32 best = 0;
  float best_logit = c[0].logit;
  for (guint32 i = 1; i < n; i++) {
    if (c[i].logit > best_logit) {
      best = i;
      best_logit = c[i].logit;
    }
  }
  return c[best].id;
}

gint32
llm_argmax (const float *x, gsize n)
{
  g_return_val_if_fail (x != NULL || n == 0, 0);

  /* Two passes, the largest value and then its first place, sixteen
   * logits at a time: 32000 logits took 17 us with the lanes of the first
   * pass on the stack and the second one by one, and take 4; 151936, 65
   * and 18 (Zen 5). One pass keeping the index was slower still. */
  const float best = largest (x, n);
  if (best == -INFINITY)
    return 0;
  const SamplerF4 b = { best, best, best, best };
  gsize i = 0;
  for (; i + 16 <= n; i += 16) {
    SamplerF4 v0, v1, v2, v3;
    memcpy (&v0, x + i, sizeof v0);
    memcpy (&v1, x + i + 4, sizeof v1);
    memcpy (&v2, x + i + 8, sizeof v2);
    memcpy (&v3, x + i + 12, sizeof v3);
    const SamplerI4 eq = (v0 == b) | (v1 == b) | (v2 == b) | (v3 == b);
    if (eq[0] | eq[1] | eq[2] | eq[3])
      break;
  }
  while (x[i] != best)
    i++;
  return (gint32) i;
}

float
llm_top_probability (const float *logits, gsize n)
{
  g_return_val_if_fail (logits != NULL && n > 0, 0.0f);
  float max = logits[0];
  for (gsize i = 1; i < n; i++)
    max = MAX (max, logits[i]);
  double sum = 0.0;
  for (gsize i = 0; i < n; i++)
    sum += expf (logits[i] - max);
  return (float) (1.0 / sum);
}

float
llm_top_probability_above (const float *logits, gsize n, float floor)
{
  g_return_val_if_fail (logits != NULL && n > 0, 0.0f);
  /* Four running maxima, so no compare waits on the one before. */
  float m[4] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY };
  gsize i = 0;
  for (; i + 4 <= n; i += 4)
    for (guint k = 0; k < 4; k++)
      m[k] = MAX (m[k], logits[i + k]);
  for (; i < n; i++)
    m[0] = MAX (m[0], logits[i]);
  const float max = MAX (MAX (m[0], m[1]), MAX (m[2], m[3]));
  if (!isfinite (max))
    return llm_top_probability (logits, n);
  /* Each logit more than 20 below the largest adds under e^-20 to a sum
   * of at least 1: over a vocabulary of 32000, under 7e-5 in all. */
  const float cut = max - 20.0f;
  const double enough = floor > 0.0f ? 1.0 / floor : INFINITY;
  double sum = 0.0;
  for (i = 0; i < n; i++) {
    if (logits[i] >= cut) {
      sum += expf (logits[i] - max);
      if (sum > enough)
        break;
    }
  }
  return (float) (1.0 / sum);
}

/* Drops the -inf candidates: probability zero in any later stage, and
 * without them no softmax subtracts -inf from -inf. If some logit is +inf,
 * only those remain, as equals, rather than making every probability NaN. */
static guint32
drop_impossible (LlmSamplerCandidate *c, guint32 n_vocab)
{
  guint32 n = 0;
  guint32 n_posinf = 0;
  for (guint32 i = 0; i < n_vocab; i++) {
    if (c[i].logit == -INFINITY)
      continue;
    if (c[i].logit == INFINITY)
      n_posinf++;
    c[n++] = c[i];
  }
  if (n_posinf == 0)
    return n;

  guint32 m = 0;
  for (guint32 i = 0; i < n; i++) {
    if (c[i].logit == INFINITY) {
      c[m] = c[i];
      c[m].logit = 0.0f;
      m++;
    }
  }
  return m;
}

static float
max_logit (const LlmSamplerCandidate *c, guint32 n)
{
  float max = c[0].logit;
  for (guint32 i = 1; i < n; i++)
    max = MAX (max, c[i].logit);
  return max;
}

/* Sets p to the softmax of the logits (all finite here). */
static void
softmax (LlmSamplerCandidate *c, guint32 n)
{
  const float max = max_logit (c, n);
  double sum = 0.0;
  for (guint32 i = 0; i < n; i++) {
    c[i].p = expf (c[i].logit - max);
    sum += c[i].p;
  }
  for (guint32 i = 0; i < n; i++)
    c[i].p = (float) (c[i].p / sum);
}

/* Moves the median of c[lo], c[mid], c[hi - 1] to c[hi - 1]. */
static void
median_of_three_to_end (LlmSamplerCandidate *c, guint32 lo, guint32 hi)
{
  guint32 a = lo, b = lo + (hi - lo) / 2, z = hi - 1;
  if (better (&c[b], &c[a]))
    swap (&c[a], &c[b]);
  if (better (&c[z], &c[b]))
    swap (&c[b], &c[z]);
  if (better (&c[b], &c[a]))
    swap (&c[a], &c[b]);
  swap (&c[b], &c[z]);
}

/* Given c[0..lo) holding the best @lo candidates with mass @mass_lo < @p,
 * returns k such that c[0..k) is the shortest best-first prefix reaching
 * @p, moved to the front. It needs the cut, not the order: a quickselect
 * that recurses into the side holding the cut, O(n) expected, where a sort
 * of a flat 150k-token distribution took milliseconds. After
 * SELECT_ROUNDS bad pivots it sorts what is left, so O(n log n) at worst. */
#define SELECT_ROUNDS 64
#define SELECT_SMALL 32u

static guint32
select_mass (LlmSamplerCandidate *c, guint32 lo, guint32 n, double mass_lo, double p)
{
  /* The cut k lies in (lo, hi]. */
  guint32 hi = n;
  for (int round = 0; hi - lo > SELECT_SMALL && round < SELECT_ROUNDS; round++) {
    median_of_three_to_end (c, lo, hi);
    const LlmSamplerCandidate pivot = c[hi - 1];
    guint32 j = lo;
    double mass = 0.0;
    for (guint32 i = lo; i < hi - 1; i++) {
      if (better (&c[i], &pivot)) {
        mass += c[i].p;
        swap (&c[i], &c[j++]);
      }
    }
    swap (&c[j], &c[hi - 1]);
    /* c[lo..j) beat the pivot, now at c[j]; c[j + 1..hi) lose to it. */
    if (mass_lo + mass >= p) {
      hi = j;
    } else if (mass_lo + mass + pivot.p >= p) {
      return j + 1;
    } else {
      mass_lo += mass + pivot.p;
      lo = j + 1;
    }
  }

  if (hi > lo)
    select_top (c + lo, hi - lo, hi - lo);
  double cum = mass_lo;
  for (guint32 i = lo; i < hi; i++) {
    cum += c[i].p;
    if (cum >= p)
      return i + 1;
  }
  /* Rounding kept the total just under p: everything stays. */
  return hi;
}

/* Keeps the shortest best-first prefix whose probability, renormalised over
 * the candidates still in, reaches @p; at least one. */
static guint32
keep_top_p (LlmSamplerCandidate *c, guint32 n, float p, gboolean sorted)
{
  if (n <= 1)
    return n;

  softmax (c, n);

  guint32 m = sorted ? n : MIN (n, TOP_P_FIRST_TRY);
  if (!sorted)
    select_top (c, n, m);
  double cum = 0.0;
  for (guint32 i = 0; i < m; i++) {
    cum += c[i].p;
    if (cum >= p)
      return i + 1;
  }
  if (m == n)
    return n;
  return select_mass (c, m, n, cum, p);
}

/* Keeps candidates with p >= @min_p * p_max, tested on logits as llama.cpp
 * does (logit >= max + log min_p) so no softmax is needed. Keeps the order. */
static guint32
keep_min_p (LlmSamplerCandidate *c, guint32 n, float min_p)
{
  const float max = max_logit (c, n);
  /* min_p > 1 would keep nothing; keep the maximum instead. */
  const float threshold = MIN (max + logf (min_p), max);
  guint32 kept = 0;
  for (guint32 i = 0; i < n; i++)
    if (c[i].logit >= threshold)
      c[kept++] = c[i];
  return kept;
}

/* Top-p and min-p over the @n candidates top-k left at the front of
 * s->cand (@sorted: best first). */
static guint32
filter_after_top_k (LlmSampler *s, guint32 n, gboolean sorted)
{
  if (s->params.top_p < 1.0f)
    n = keep_top_p (s->cand, n, s->params.top_p, sorted);
  if (s->params.min_p > 0.0f)
    n = keep_min_p (s->cand, n, s->params.min_p);
  return n;
}

/* Everything between the penalty and the temperature. Returns the count of
 * survivors at the front of s->cand; 0 if every logit was -inf or NaN. */
static guint32
filter (LlmSampler *s, guint32 n_vocab)
{
  LlmSamplerCandidate *c = s->cand;
  guint32 n = drop_impossible (c, n_vocab);
  if (n == 0)
    return 0;

  gboolean sorted = FALSE;
  if (s->params.top_k > 0 && (guint32) s->params.top_k < n) {
    select_top (c, n, (guint32) s->params.top_k);
    n = (guint32) s->params.top_k;
    sorted = TRUE;
  }
  return filter_after_top_k (s, n, sorted);
}

/* Longer penalty windows are left to load(): sorting them each call
 * would cost more than it saves. */
#define PENALISED_MAX 256u

static int
cmp_id (const void *a, const void *b)
{
  const gint32 x = ((const LlmSamplerCandidate *) a)->id;
  const gint32 y = ((const LlmSamplerCandidate *) b)->id;
  return (x > y) - (x < y);
}

/* The distinct ids of the penalty's window that are in the vocabulary, by
 * id, each with its logit penalised as load() does it, into s->pen; FALSE
 * where the window is longer than PENALISED_MAX. */
static gboolean
penalised_logits (LlmSampler *s, const float *logits, guint32 n_vocab, guint32 *n_pen)
{
  *n_pen = 0;
  if (!s->penalise)
    return TRUE;
  const guint from = window_start (s), w = s->hist_len - from;
  if (w > PENALISED_MAX)
    return FALSE;
  scratch_hold (&s->pen, &s->pen_alloc, w);
  guint32 n = 0;
  for (guint i = from; i < s->hist_len; i++)
    if (s->hist[i] >= 0 && (guint32) s->hist[i] < n_vocab)
      s->pen[n++] = (LlmSamplerCandidate) { .id = s->hist[i] };
  if (n > 1)                    /* (s->pen is NULL while no window was held) */
    qsort (s->pen, n, sizeof *s->pen, cmp_id);
  const float penalty = s->params.repeat_penalty;
  guint32 u = 0;
  for (guint32 k = 0; k < n; k++) {
    if (u > 0 && s->pen[u - 1].id == s->pen[k].id)
      continue;
    const float l = logits[s->pen[k].id];
    const float v = isnan (l) ? -INFINITY : l;
    s->pen[u++] = (LlmSamplerCandidate) { .id = s->pen[k].id, .logit = penalised (v, penalty) };
  }
  *n_pen = u;
  return TRUE;
}

/* The @m best candidates by load_top, penalty included, best first at the
 * front of the scratch; 0 where the general way must decide. */
static guint32
top_from_logits (LlmSampler *s, const float *logits, guint32 n_vocab, guint32 m)
{
  guint32 n_pen;
  if (m == 0 || m >= n_vocab || !penalised_logits (s, logits, n_vocab, &n_pen))
    return 0;
  return load_top (s, logits, n_vocab, m, s->pen, n_pen);
}

/* load() and filter(), by load_top where it can. */
static guint32
load_and_filter (LlmSampler *s, const float *logits, guint32 n_vocab)
{
  const guint32 n = s->params.top_k > 0
      ? top_from_logits (s, logits, n_vocab, (guint32) s->params.top_k) : 0;
  if (n > 0)
    return filter_after_top_k (s, n, TRUE);
  load (s, logits, n_vocab);
  return filter (s, n_vocab);
}

/* Divides by the temperature and draws from the softmax. Subtracting the
 * maximum before dividing keeps a tiny temperature from overflowing to
 * inf - inf; it is the same distribution. */
static gint32
draw (LlmSampler *s, LlmSamplerCandidate *c, guint32 n)
{
  if (n == 1)
    return c[0].id;

  const float max = max_logit (c, n);
  const float temperature = s->params.temperature;
  double sum = 0.0;
  for (guint32 i = 0; i < n; i++) {
    c[i].p = expf ((c[i].logit - max) / temperature);
    sum += c[i].p;
  }

  /* The maximum contributes exp (0) = 1, so sum >= 1. Strictly greater
   * than the target: a candidate whose probability rounded to zero is
   * never picked, even when the draw is exactly 0. */
  const double target = uniform01 (s) * sum;
  double cum = 0.0;
  guint32 last = 0;
  for (guint32 i = 0; i < n; i++) {
    if (c[i].p <= 0.0f)
      continue;
    cum += c[i].p;
    last = i;
    if (cum > target)
      return c[i].id;
  }
  return c[last].id;
}

/* --- entry points --- */

guint32
llm_sampler_candidates (LlmSampler *s, const float *logits, guint32 n_vocab,
    const LlmSamplerCandidate **out)
{
  g_return_val_if_fail (s != NULL, 0);
  g_return_val_if_fail (logits != NULL, 0);
  g_return_val_if_fail (n_vocab > 0 && n_vocab <= (guint32) G_MAXINT32, 0);
  g_return_val_if_fail (out != NULL, 0);

  const guint32 n = load_and_filter (s, logits, n_vocab);
  *out = s->cand;
  return n;
}

gint32
llm_sampler_sample (LlmSampler *s, const float *logits, guint32 n_vocab)
{
  g_return_val_if_fail (s != NULL, -1);
  g_return_val_if_fail (logits != NULL, -1);
  g_return_val_if_fail (n_vocab > 0 && n_vocab <= (guint32) G_MAXINT32, -1);

  /* Every filter keeps the argmax, so greedy needs none of them; without
   * a penalty it needs no candidates either (a NaN logit is never taken,
   * as load() makes it -inf). */
  if (s->greedy && !s->penalise)
    return llm_argmax (logits, n_vocab);

  if (s->greedy) {
    /* With a penalty: the best by the total order is the argmax. */
    if (top_from_logits (s, logits, n_vocab, 1) == 1)
      return s->cand[0].id;
    load (s, logits, n_vocab);
    return argmax (s->cand, n_vocab);
  }

  guint32 n = load_and_filter (s, logits, n_vocab);
  if (n == 0)
    return 0;
  return draw (s, s->cand, n);
}

gint32
llm_sampler_sample_draft (LlmSampler *s, const float *logits, guint32 n_vocab, gint32 draft,
    gboolean *accepted)
{
  g_return_val_if_fail (s != NULL, -1);
  g_return_val_if_fail (logits != NULL, -1);
  g_return_val_if_fail (n_vocab > 0 && n_vocab <= (guint32) G_MAXINT32, -1);
  g_return_val_if_fail (accepted != NULL, -1);

  /* Speculative sampling's rule for a proposal made with certainty (an
   * n-gram continuation, a greedy draft) accepts it with its probability
   * p(draft) and otherwise draws from the rest, renormalised: every
   * token comes out with its probability under p. Drawing from p and
   * comparing does the same with one draw, the draw plain sampling
   * makes, so a seed gives the same text with speculation as without,
   * whatever was drafted. */
  const gint32 pick = llm_sampler_sample (s, logits, n_vocab);
  *accepted = pick == draft;
  return pick;
}
