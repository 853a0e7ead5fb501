/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "token-compress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-type.h"
#include "cpu/matmul.h"

G_DEFINE_QUARK (llm-token-compress-error-quark, llm_token_compress_error)

/* FALSE with @error unless @n_rows rows of @dim floats can be addressed:
 * every length below is derived from these two. */
static gboolean
check_shape (guint n_rows, guint dim, GError **error)
{
  if (dim == 0) {
    g_set_error (error, LLM_TOKEN_COMPRESS_ERROR, LLM_TOKEN_COMPRESS_ERROR_INVALID,
        "rows of 0 floats (dim must be positive)");
    return FALSE;
  }
  if ((gsize) n_rows > G_MAXSIZE / sizeof (float) / dim) {
    g_set_error (error, LLM_TOKEN_COMPRESS_ERROR, LLM_TOKEN_COMPRESS_ERROR_INVALID,
        "%u rows of %u floats do not fit in memory", n_rows, dim);
    return FALSE;
  }
  return TRUE;
}

static guint
clamp_count (guint want, guint n_rows)
{
  if (n_rows == 0)
    return 0;
  return CLAMP (want, 1, n_rows);
}

guint
llm_token_compress_target (guint n_rows, double ratio, guint max_tokens)
{
  guint target = n_rows;

  if (n_rows == 0)
    return 0;
  if (ratio > 0.0 && ratio < 1.0) {
    /* The epsilon keeps 0.25 * 576 at 144 whatever the rounding of 0.25 * 576
     * in binary: a ratio that is an exact fraction of the count should not
     * keep one row more. */
    double want = ceil (ratio * n_rows - 1e-9);
    target = want < 1.0 ? 1 : (guint) want;
  }
  if (max_tokens > 0 && max_tokens < target)
    target = max_tokens;
  return clamp_count (target, n_rows);
}

float
llm_token_cosine (const float *a, const float *b, guint dim)
{
  /* Double sums: a row of 4096 floats summed in float loses the last
   * digits that tell a 0.95 threshold from 0.951. */
  double dot = 0.0, na = 0.0, nb = 0.0;

  for (guint j = 0; j < dim; j++) {
    dot += (double) a[j] * b[j];
    na += (double) a[j] * a[j];
    nb += (double) b[j] * b[j];
  }
  if (isnan (dot) || isnan (na) || isnan (nb))
    return NAN;
  if (na == 0.0 && nb == 0.0)
    return 1.0f;
  if (na == 0.0 || nb == 0.0)
    return 0.0f;
  double c = dot / (sqrt (na) * sqrt (nb));
  return (float) CLAMP (c, -1.0, 1.0);
}

/* A score to rank by: NaN sorts after every number. */
static float
rank_score (float s)
{
  return isnan (s) ? -INFINITY : s;
}

typedef struct {
  float score;
  guint index;
} Ranked;

/* Higher score first, then lower index: a total order, so qsort's lack of
 * stability does not matter and results are the same on every libc. */
static int
ranked_cmp (const void *pa, const void *pb)
{
  const Ranked *a = pa, *b = pb;
  if (a->score != b->score)
    return a->score > b->score ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* Four partial sums let the compiler keep several multiplies in flight;
 * this loop is where merging spends its time (|A| x |B| x dim). */
static float
dot (const float *a, const float *b, guint dim)
{
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  guint j = 0;
  for (; j + 4 <= dim; j += 4) {
    s0 += a[j] * b[j];
    s1 += a[j + 1] * b[j + 1];
    s2 += a[j + 2] * b[j + 2];
    s3 += a[j + 3] * b[j + 3];
  }
  for (; j < dim; j++)
    s0 += a[j] * b[j];
  return (s0 + s1) + (s2 + s3);
}

/* Scratch of one merge call, for the largest (first) round. */
typedef struct {
  float *inv_norm;     /* n: 1 / L2 norm, 0 for a zero row */
  guint *partner;      /* |A|: index into B of each A row's best match */
  Ranked *rank;        /* |A| */
  gboolean *merged;    /* |A| */
  guint *head, *next;  /* |B| and |A|: the A rows folding into each B row */
  float *dots;         /* |A| x |B| products of a large round, or NULL */
  guint8 *act;         /* A's rows as the product kernels read them */
} MergeScratch;

/* Rounds this large (an image tower's rows) take their |A| x |B| dot
 * products from the matrix kernels the language model uses, treating B's
 * rows (every other row: a stride of two) as a weight matrix: a CLIP-L
 * tower merging after each of its 23 layers spent a second of scalar dots
 * otherwise, more than the merging saved. */
#define KERNEL_WORK (1u << 20)

static gboolean
kernel_dots (const float *rows, guint n_a, guint n_b, guint dim, MergeScratch *s)
{
  if ((gsize) n_a * n_b * dim < KERNEL_WORK || dim % 32 != 0
      || !llm_matmul_supports (LLM_TYPE_F32))
    return FALSE;
  const LlmCpuKernels *kern = llm_cpu_kernels_best ();
  const gsize act = llm_matmul_act_bytes (LLM_TYPE_F32, dim);
  if (s->dots == NULL) {
    s->dots = g_try_new (float, (gsize) n_a * n_b);
    s->act = g_try_malloc ((gsize) n_a * act);
    if (s->dots == NULL || s->act == NULL)
      return FALSE;
  }
  for (guint k = 0; k < n_a; k++)
    llm_matmul_convert (kern, LLM_TYPE_F32, rows + (gsize) (2 * k) * dim, dim, s->act + k * act);
  llm_matmul (kern, LLM_TYPE_F32, rows + dim, (gsize) 2 * dim * sizeof (float), dim, 0, n_b,
      s->act, act, n_a, s->dots, n_b);
  return TRUE;
}

/* The similarity the pairing ranks by; a zero row is similar to no other
 * row (as llm_token_cosine says for a zero and a non-zero row), and to
 * another zero row as much as to anything else. */
static float
pair_similarity (const float *a, float inv_a, const float *b, float inv_b, guint dim)
{
  if (inv_a == 0.f && inv_b == 0.f)
    return 1.f;
  if (inv_a == 0.f || inv_b == 0.f)
    return 0.f;
  return rank_score (dot (a, b, dim) * inv_a * inv_b);
}

/* One round over the @n rows at @rows (sizes @sizes, input places @pos),
 * removing @r of them; compacts all three in place and returns the new
 * count. */
static guint
merge_round (float *rows, float *sizes, guint *pos, guint n, guint dim, guint r,
    MergeScratch *s)
{
  guint n_a = (n + 1) / 2, n_b = n / 2;

  for (guint i = 0; i < n; i++) {
    double sq = 0.0;
    const float *x = rows + (gsize) i * dim;
    for (guint j = 0; j < dim; j++)
      sq += (double) x[j] * x[j];
    s->inv_norm[i] = (sq > 0.0 && isfinite (sq)) ? (float) (1.0 / sqrt (sq)) : 0.f;
  }

  const gboolean kernels = kernel_dots (rows, n_a, n_b, dim, s);
  for (guint k = 0; k < n_a; k++) {
    const float *a = rows + (gsize) (2 * k) * dim;
    float best = -INFINITY;
    guint best_m = 0;
    for (guint m = 0; m < n_b; m++) {
      const float inv_a = s->inv_norm[2 * k], inv_b = s->inv_norm[2 * m + 1];
      float sim;
      if (!kernels || inv_a == 0.f || inv_b == 0.f)
        sim = pair_similarity (a, inv_a, rows + (gsize) (2 * m + 1) * dim, inv_b, dim);
      else
        sim = rank_score (s->dots[(gsize) k * n_b + m] * inv_a * inv_b);
      if (sim > best) {
        best = sim;
        best_m = m;
      }
    }
    s->partner[k] = best_m;
    s->rank[k] = (Ranked) { best, k };
    s->merged[k] = FALSE;
  }
  qsort (s->rank, n_a, sizeof (Ranked), ranked_cmp);

  for (guint m = 0; m < n_b; m++)
    s->head[m] = G_MAXUINT;
  for (guint t = 0; t < r; t++) {
    guint k = s->rank[t].index;
    s->merged[k] = TRUE;
    s->next[k] = s->head[s->partner[k]];
    s->head[s->partner[k]] = k;
  }

  /* A rows are only read here and B rows only written, so the folds of
   * one round do not see each other. */
  for (guint m = 0; m < n_b; m++) {
    if (s->head[m] == G_MAXUINT)
      continue;
    float *b = rows + (gsize) (2 * m + 1) * dim;
    double total = sizes[2 * m + 1];
    for (guint k = s->head[m]; k != G_MAXUINT; k = s->next[k])
      total += sizes[2 * k];
    for (guint j = 0; j < dim; j++) {
      double acc = (double) sizes[2 * m + 1] * b[j];
      for (guint k = s->head[m]; k != G_MAXUINT; k = s->next[k])
        acc += (double) sizes[2 * k] * rows[(gsize) (2 * k) * dim + j];
      b[j] = (float) (acc / total);
    }
    sizes[2 * m + 1] = (float) total;
  }

  guint w = 0;
  for (guint i = 0; i < n; i++) {
    if (i % 2 == 0 && s->merged[i / 2])
      continue;
    if (w != i) {
      memmove (rows + (gsize) w * dim, rows + (gsize) i * dim, (gsize) dim * sizeof (float));
      sizes[w] = sizes[i];
      pos[w] = pos[i];
    }
    w++;
  }
  return w;
}

gboolean
llm_token_merge (const float *rows, guint n_rows, guint dim, const float *sizes,
    guint target, float *out_rows, float *out_sizes, guint *out_pos, guint *n_out,
    GError **error)
{
  g_return_val_if_fail (n_out != NULL, FALSE);
  g_return_val_if_fail (n_rows == 0 || (rows && out_rows && out_sizes), FALSE);

  if (!check_shape (n_rows, dim, error))
    return FALSE;
  for (guint i = 0; sizes && i < n_rows; i++) {
    if (!(sizes[i] > 0.f) || !isfinite (sizes[i])) {
      g_set_error (error, LLM_TOKEN_COMPRESS_ERROR, LLM_TOKEN_COMPRESS_ERROR_INVALID,
          "row %u stands for %g source rows; sizes must be positive", i, sizes[i]);
      return FALSE;
    }
  }
  *n_out = 0;
  if (n_rows == 0)
    return TRUE;

  target = clamp_count (target, n_rows);
  memcpy (out_rows, rows, (gsize) n_rows * dim * sizeof (float));
  guint *pos = out_pos ? out_pos : g_new (guint, n_rows);
  for (guint i = 0; i < n_rows; i++) {
    out_sizes[i] = sizes ? sizes[i] : 1.f;
    pos[i] = i;
  }

  guint n = n_rows;
  if (n > target) {
    guint n_a = (n + 1) / 2;
    MergeScratch s = {
      .inv_norm = g_new (float, n),
      .partner = g_new (guint, n_a),
      .rank = g_new (Ranked, n_a),
      .merged = g_new (gboolean, n_a),
      .head = g_new (guint, n / 2),
      .next = g_new (guint, n_a),
    };
    /* A round removes at most |A| rows, so a target below half the rows
     * takes more rounds; each leaves at least one B row, so n >= 2 holds
     * whenever another round runs. */
    while (n > target) {
      guint r = MIN (n - target, (n + 1) / 2);
      n = merge_round (out_rows, out_sizes, pos, n, dim, r, &s);
    }
    g_free (s.inv_norm);
    g_free (s.partner);
    g_free (s.rank);
    g_free (s.merged);
    g_free (s.head);
    g_free (s.next);
    g_free (s.dots);
    g_free (s.act);
  }
  if (!out_pos)
    g_free (pos);
  *n_out = n;
  return TRUE;
}

gboolean
llm_token_prune (const float *rows, guint n_rows, guint dim, const float *saliency,
    guint k, guint *keep, guint *n_keep, GError **error)
{
  g_return_val_if_fail (n_keep != NULL, FALSE);
  g_return_val_if_fail (n_rows == 0 || ((rows || saliency) && keep), FALSE);

  if (!check_shape (n_rows, dim, error))
    return FALSE;
  *n_keep = 0;
  if (n_rows == 0)
    return TRUE;
  k = clamp_count (k, n_rows);

  Ranked *rank = g_new (Ranked, n_rows);
  for (guint i = 0; i < n_rows; i++) {
    float score;
    if (saliency) {
      score = saliency[i];
    } else {
      double sq = 0.0;
      const float *x = rows + (gsize) i * dim;
      for (guint j = 0; j < dim; j++)
        sq += (double) x[j] * x[j];
      score = (float) sqrt (sq);
    }
    rank[i] = (Ranked) { rank_score (score), i };
  }
  qsort (rank, n_rows, sizeof (Ranked), ranked_cmp);

  /* Back to input order: a flag per row, then one scan. */
  gboolean *chosen = g_new0 (gboolean, n_rows);
  for (guint t = 0; t < k; t++)
    chosen[rank[t].index] = TRUE;
  guint w = 0;
  for (guint i = 0; i < n_rows; i++)
    if (chosen[i])
      keep[w++] = i;
  g_free (chosen);
  g_free (rank);
  *n_keep = w;
  return TRUE;
}

gboolean
llm_token_rows_compact (float *rows, guint n_rows, guint dim, const guint *keep,
    guint n_keep, GError **error)
{
  if (!check_shape (n_rows, dim, error))
    return FALSE;
  for (guint i = 0; i < n_keep; i++) {
    if (keep[i] >= n_rows || (i > 0 && keep[i] <= keep[i - 1])) {
      g_set_error (error, LLM_TOKEN_COMPRESS_ERROR, LLM_TOKEN_COMPRESS_ERROR_INVALID,
          "kept row %u is index %u: indices must ascend and be below %u", i, keep[i],
          n_rows);
      return FALSE;
    }
  }
  /* keep[i] >= i, so every row moves towards the front over rows already
   * moved or dropped. */
  for (guint i = 0; i < n_keep; i++)
    if (keep[i] != i)
      memmove (rows + (gsize) i * dim, rows + (gsize) keep[i] * dim,
          (gsize) dim * sizeof (float));
  return TRUE;
}

struct _LlmTokenTemporal {
  gboolean valid;
  guint n_rows, dim;
  float *ref;          /* n_rows x dim: the row last sent at each place */
};

LlmTokenTemporal *
llm_token_temporal_new (void)
{
  return g_new0 (LlmTokenTemporal, 1);
}

void
llm_token_temporal_free (LlmTokenTemporal *temporal)
{
  if (temporal == NULL)
    return;
  g_free (temporal->ref);
  g_free (temporal);
}

void
llm_token_temporal_reset (LlmTokenTemporal *temporal)
{
  temporal->valid = FALSE;
}

static void
take_reference (LlmTokenTemporal *t, const float *rows, guint n_rows, guint dim)
{
  gsize len = (gsize) n_rows * dim;
  if (!t->valid || t->n_rows * (gsize) t->dim != len)
    t->ref = g_renew (float, t->ref, len);
  if (len > 0)
    memcpy (t->ref, rows, len * sizeof (float));
  t->n_rows = n_rows;
  t->dim = dim;
  t->valid = TRUE;
}

gboolean
llm_token_temporal_select (LlmTokenTemporal *temporal, const float *rows, guint n_rows,
    guint dim, double threshold, double scene_threshold, guint *keep, guint *n_keep,
    gboolean *resent_all, GError **error)
{
  g_return_val_if_fail (temporal != NULL && n_keep != NULL, FALSE);
  g_return_val_if_fail (n_rows == 0 || (rows && keep), FALSE);

  if (!check_shape (n_rows, dim, error))
    return FALSE;

  gboolean all = !temporal->valid || temporal->n_rows != n_rows || temporal->dim != dim;
  guint n_changed = 0, least = 0;
  float least_sim = INFINITY;

  for (guint i = 0; !all && i < n_rows; i++) {
    gsize off = (gsize) i * dim;
    float sim = llm_token_cosine (rows + off, temporal->ref + off, dim);
    /* NaN is not "above the threshold": a row we cannot compare is sent */
    if (!(sim > threshold))
      keep[n_changed++] = i;
    if (rank_score (sim) < least_sim) {
      least_sim = rank_score (sim);
      least = i;
    }
  }
  if (!all && n_rows > 0 && (double) n_changed / n_rows > scene_threshold)
    all = TRUE;

  if (all) {
    for (guint i = 0; i < n_rows; i++)
      keep[i] = i;
    *n_keep = n_rows;
    take_reference (temporal, rows, n_rows, dim);
  } else {
    if (n_changed == 0 && n_rows > 0)
      keep[n_changed++] = least;
    for (guint i = 0; i < n_changed; i++)
      memcpy (temporal->ref + (gsize) keep[i] * dim, rows + (gsize) keep[i] * dim,
          (gsize) dim * sizeof (float));
    *n_keep = n_changed;
  }
  if (resent_all)
    *resent_all = all;
  return TRUE;
}
