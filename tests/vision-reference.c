/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "vision-reference.h"

#include <math.h>
#include <string.h>

#include "cpu/matmul.h"

/* --- rows over the cores ---------------------------------------------- */

typedef void (*RowsFn) (gpointer ctx, gsize r0, gsize r1);

typedef struct {
  RowsFn fn;
  gpointer ctx;
  gsize r0, r1;
} Range;

static gpointer
range_thread (gpointer data)
{
  Range *r = data;
  r->fn (r->ctx, r->r0, r->r1);
  return NULL;
}

/* fn over [0, n) in one range a core; rows are independent. */
static void
parallel_rows (gsize n, RowsFn fn, gpointer ctx)
{
  const guint nt = MAX (1u, MIN (g_get_num_processors (), 16u));
  Range ranges[16];
  GThread *threads[16];
  for (guint i = 0; i < nt; i++)
    ranges[i] = (Range) { fn, ctx, n * i / nt, n * (i + 1) / nt };
  for (guint i = 1; i < nt; i++)
    threads[i] = g_thread_new ("vision-ref", range_thread, &ranges[i]);
  range_thread (&ranges[0]);
  for (guint i = 1; i < nt; i++)
    g_thread_join (threads[i]);
}

/* --- the operations --------------------------------------------------- */

double *
llm_test_ref_weights (const LlmMmprojWeight *w)
{
  const LlmGgufTensor *t = w->t;
  if (t == NULL)
    return NULL;
  const gsize out = t->ne[MAX (t->n_dims, 1) - 1], in = t->n_elems / out;
  g_autofree float *f = g_new (float, t->n_elems);
  for (gsize r = 0; r < out; r++)
    llm_dequantize_row (t->type, t->data, t->size / out, in, r, f + r * in);
  double *d = g_new (double, t->n_elems);
  for (gsize i = 0; i < t->n_elems; i++)
    d[i] = f[i];
  return d;
}

typedef struct {
  const double *W, *B, *x;
  gsize in, out, n;
  double *y;
} Linear;

/* Rows are outputs: each thread takes a range of weight rows, eight at a
 * time (64 KB at CLIP-L's width: they stay in L2 while every input row
 * passes), so the weights are read from memory once, not once an input
 * row. Four partial sums per dot product: in double their order is
 * immaterial, and they keep four products in flight. */
static void
linear_rows (gpointer ctx, gsize o_begin, gsize o_end)
{
  const Linear *l = ctx;
  const gsize in = l->in;
  for (gsize o0 = o_begin; o0 < o_end; o0 += 8) {
    const gsize o1 = MIN (o0 + 8, o_end);
    for (gsize r = 0; r < l->n; r++) {
      const double *x = l->x + r * in;
      for (gsize o = o0; o < o1; o++) {
        const double *w = l->W + o * in;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        gsize i = 0;
        for (; i + 4 <= in; i += 4) {
          a0 += w[i] * x[i];
          a1 += w[i + 1] * x[i + 1];
          a2 += w[i + 2] * x[i + 2];
          a3 += w[i + 3] * x[i + 3];
        }
        for (; i < in; i++)
          a0 += w[i] * x[i];
        l->y[r * l->out + o] = (l->B ? l->B[o] : 0.0) + ((a0 + a1) + (a2 + a3));
      }
    }
  }
}

void
llm_test_ref_linear (const LlmMmprojWeight *w, const LlmMmprojWeight *b, const double *x,
    gsize n, double *y)
{
  const LlmGgufTensor *t = w->t;
  const gsize out = t->ne[MAX (t->n_dims, 1) - 1], in = t->n_elems / out;
  g_autofree double *W = llm_test_ref_weights (w);
  g_autofree double *B = llm_test_ref_weights (b);
  Linear l = { W, B, x, in, out, n, y };
  parallel_rows (out, linear_rows, &l);
}

static void
ref_norm (const LlmMmprojWeight *w, const LlmMmprojWeight *b, double *x, gsize n, gsize e,
    double eps)
{
  g_autofree double *W = llm_test_ref_weights (w);
  g_autofree double *B = llm_test_ref_weights (b);
  for (gsize r = 0; r < n; r++) {
    double *row = x + r * e, mean = 0, var = 0;
    for (gsize i = 0; i < e; i++)
      mean += row[i];
    mean /= e;
    for (gsize i = 0; i < e; i++)
      var += (row[i] - mean) * (row[i] - mean);
    var /= e;
    for (gsize i = 0; i < e; i++)
      row[i] = (row[i] - mean) / sqrt (var + eps) * (W ? W[i] : 1) + (B ? B[i] : 0);
  }
}

static double
gelu_tanh (double x)
{
  return 0.5 * x * (1 + tanh (sqrt (2 / G_PI) * (x + 0.044715 * x * x * x)));
}

typedef struct {
  const double *q, *k, *v;
  double *out;
  gsize n, e, hd, heads;
} Attention;

/* Rows are (head, query) pairs. */
static void
attention_rows (gpointer ctx, gsize r0, gsize r1)
{
  const Attention *a = ctx;
  g_autofree double *sc = g_new (double, a->n);
  for (gsize r = r0; r < r1; r++) {
    const gsize h = r / a->n, i = r % a->n;
    double max = -INFINITY, sum = 0;
    for (gsize j = 0; j < a->n; j++) {
      double d = 0;
      for (gsize t = 0; t < a->hd; t++)
        d += a->q[i * a->e + h * a->hd + t] * a->k[j * a->e + h * a->hd + t];
      sc[j] = d / sqrt ((double) a->hd);
      max = MAX (max, sc[j]);
    }
    for (gsize j = 0; j < a->n; j++)
      sum += (sc[j] = exp (sc[j] - max));
    for (gsize t = 0; t < a->hd; t++) {
      double o = 0;
      for (gsize j = 0; j < a->n; j++)
        o += sc[j] * a->v[j * a->e + h * a->hd + t];
      a->out[i * a->e + h * a->hd + t] = o / sum;
    }
  }
}

/* --- the tower -------------------------------------------------------- */

double *
llm_test_vision_reference (const LlmMmprojVision *v, const guint8 *rgb, gsize stride)
{
  const gsize s = v->image_size, P = v->patch_size, side = s / P, e = v->n_embd;
  const gsize np = v->n_patches, n = v->n_positions, first = v->class_embd.t != NULL;
  const gsize hd = e / v->n_head, sf = v->scale_factor;
  const gsize hidden = v->type == LLM_MMPROJ_MLP ? v->proj0_w.t->ne[1] : 0;
  g_autofree double *patches = g_new (double, np * 3 * P * P);
  for (gsize py = 0; py < side; py++)
    for (gsize px = 0; px < side; px++)
      for (gsize c = 0; c < 3; c++)
        for (gsize ky = 0; ky < P; ky++)
          for (gsize kx = 0; kx < P; kx++) {
            const double u = rgb[(py * P + ky) * stride + (px * P + kx) * 3 + c] / 255.0;
            patches[(py * side + px) * 3 * P * P + (c * P + ky) * P + kx] =
                (u - v->image_mean[c]) / v->image_std[c];
          }
  const gsize wide = MAX (e, v->n_ff);
  g_autofree double *x = g_new0 (double, n * e), *h = g_new0 (double, n * e);
  g_autofree double *q = g_new0 (double, n * e), *k = g_new0 (double, n * e);
  g_autofree double *val = g_new0 (double, n * e), *tmp = g_new0 (double, n * wide);
  llm_test_ref_linear (&v->patch_w, &v->patch_b, patches, np, x + first * e);
  if (first) {
    g_autofree double *cls = llm_test_ref_weights (&v->class_embd);
    memcpy (x, cls, e * sizeof *x);
  }
  g_autofree double *pos = llm_test_ref_weights (&v->pos_embd);
  for (gsize i = 0; i < n * e; i++)
    x[i] += pos[i];
  if (v->pre_ln_w.t)
    ref_norm (&v->pre_ln_w, &v->pre_ln_b, x, n, e, v->eps);
  for (guint l = 0; l < v->n_layers_run; l++) {
    const LlmMmprojLayer *ly = &v->layers[l];
    memcpy (h, x, n * e * sizeof *h);
    ref_norm (&ly->ln1_w, &ly->ln1_b, h, n, e, v->eps);
    llm_test_ref_linear (&ly->q_w, &ly->q_b, h, n, q);
    llm_test_ref_linear (&ly->k_w, &ly->k_b, h, n, k);
    llm_test_ref_linear (&ly->v_w, &ly->v_b, h, n, val);
    Attention a = { q, k, val, tmp, n, e, hd, v->n_head };
    parallel_rows (v->n_head * n, attention_rows, &a);
    llm_test_ref_linear (&ly->o_w, &ly->o_b, tmp, n, h);
    for (gsize i = 0; i < n * e; i++)
      x[i] += h[i];
    memcpy (h, x, n * e * sizeof *h);
    ref_norm (&ly->ln2_w, &ly->ln2_b, h, n, e, v->eps);
    llm_test_ref_linear (&ly->up_w, &ly->up_b, h, n, tmp);
    for (gsize i = 0; i < n * v->n_ff; i++)
      tmp[i] = v->gelu ? gelu_tanh (tmp[i]) : tmp[i] / (1 + exp (-1.702 * tmp[i]));
    llm_test_ref_linear (&ly->down_w, &ly->down_b, tmp, n, h);
    for (gsize i = 0; i < n * e; i++)
      x[i] += h[i];
  }
  if (v->post_ln_w.t && v->n_layers_run == v->n_layer)
    ref_norm (&v->post_ln_w, &v->post_ln_b, x, n, e, v->eps);
  const double *image = x + first * e;
  double *out = g_new0 (double, (gsize) v->n_tokens * v->n_out);
  if (v->type == LLM_MMPROJ_IDEFICS3) {
    const gsize bw = side / sf;
    g_autofree double *shuf = g_new (double, (gsize) v->n_tokens * e * sf * sf);
    for (gsize by = 0; by < bw; by++)
      for (gsize bx = 0; bx < bw; bx++)
        for (gsize kk = 0; kk < sf; kk++)
          for (gsize j = 0; j < sf; j++)
            memcpy (shuf + (by * bw + bx) * e * sf * sf + e * (kk * sf + j),
                image + ((by * sf + kk) * side + bx * sf + j) * e, e * sizeof *shuf);
    llm_test_ref_linear (&v->proj0_w, &v->proj0_b, shuf, v->n_tokens, out);
  } else {
    g_autofree double *mid = g_new (double, np * hidden);
    llm_test_ref_linear (&v->proj0_w, &v->proj0_b, image, np, mid);
    for (gsize i = 0; i < np * hidden; i++)
      mid[i] = gelu_tanh (mid[i]);
    llm_test_ref_linear (&v->proj2_w, &v->proj2_b, mid, np, out);
  }
  return out;
}
