/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-bench --vision MMPROJ: images per second of the vision encoder
 * at each thread count, on the random-weight files gst-llm-make-mmproj
 * writes (which tools/compare-vision-llama-cpp.sh also measures).
 *
 * One encoder per thread count, all made before anything is timed
 * (weights prepared, scratch reserved); one untimed image each; then
 * rounds in which every thread count encodes one image in turn, so a
 * neighbour's load on a shared machine falls on all of them alike, and
 * the median of the rounds. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "mmproj.h"
#include "vision-encoder.h"

/* The benchmark's image: a fixed pattern (the speed does not depend on
 * the pixels). */
static guint8 *
pattern (guint side)
{
  guint8 *rgb = g_new (guint8, (gsize) side * side * 3);
  for (gsize i = 0; i < (gsize) side * side * 3; i++)
    rgb[i] = (guint8) ((i * 7919) >> 3);
  return rgb;
}

gboolean
bench_vision_write_image (const char *mmproj, const char *path, GError **error)
{
  g_autoptr (LlmMmproj) p = llm_mmproj_load (mmproj, error);
  if (p == NULL)
    return FALSE;
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const gsize n = (gsize) v->image_size * v->image_size * 3;
  g_autofree guint8 *rgb = pattern (v->image_size);
  g_autofree float *hwc = g_new (float, n);
  /* As llm_cpu_image_normalize rounds it, interleaved as mtmd keeps it. */
  for (gsize i = 0; i < n; i++)
    hwc[i] = ((float) rgb[i] / 255.0f - v->image_mean[i % 3]) / v->image_std[i % 3];
  return g_file_set_contents (path, (const char *) hwc, n * sizeof *hwc, error);
}

gboolean
bench_vision_run (const BenchVisionSetting *s, GError **error)
{
  g_autoptr (LlmMmproj) p = llm_mmproj_load (s->mmproj, error);
  if (p == NULL)
    return FALSE;
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  g_autofree guint8 *rgb = pattern (v->image_size);
  g_autofree float *out = g_new (float, (gsize) v->n_tokens * v->n_out);
  g_autofree LlmVisionEncoder **encs = g_new0 (LlmVisionEncoder *, s->n_threads);
  g_autofree double *ms = g_new (double, (gsize) s->n_threads * s->rounds);
  g_autofree double *load_ms = g_new (double, s->n_threads);
  gboolean ok = TRUE;

  for (guint i = 0; i < s->n_threads && ok; i++) {
    const double t0 = bench_now_ms ();
    encs[i] = llm_vision_encoder_new (p, (int) s->threads[i], error);
    ok = encs[i] != NULL && llm_vision_encoder_encode (encs[i], rgb, 3 * v->image_size, out,
        error);
    load_ms[i] = bench_now_ms () - t0;
  }
  for (guint r = 0; r < s->rounds && ok; r++)
    for (guint i = 0; i < s->n_threads && ok; i++) {
      const double t0 = bench_now_ms ();
      ok = llm_vision_encoder_encode (encs[i], rgb, 3 * v->image_size, out, error);
      ms[i * s->rounds + r] = bench_now_ms () - t0;
    }

  if (ok && !s->json)
    g_print ("vision: %s: %s, %u px, %u layers (%u run), %u wide, %u tokens x %u; %s; "
        "median of %u interleaved rounds\n"
        "threads  images/s   ms/image   min ms   max ms  tokens/s  setup ms\n", s->mmproj,
        llm_mmproj_type_name (v->type), v->image_size, v->n_layer, v->n_layers_run, v->n_embd,
        v->n_tokens, v->n_out, encs[0] ? llm_vision_encoder_backend_name (encs[0]) : "?",
        s->rounds);
  for (guint i = 0; i < s->n_threads && ok; i++) {
    double *m = ms + i * s->rounds;
    g_autofree char *list = NULL;
    if (s->json) {
      GString *l = g_string_new (NULL);
      for (guint r = 0; r < s->rounds; r++)
        g_string_append_printf (l, "%s%.3f", r ? "," : "", m[r]);
      list = g_string_free (l, FALSE);
    }
    const double med = bench_median_sort (m, s->rounds);
    if (s->json)
      g_print ("{\"mmproj\": \"%s\", \"type\": \"%s\", \"image_size\": %u, \"layers_run\": %u, "
          "\"tokens\": %u, \"backend\": \"%s\", \"threads\": %d, \"rounds\": %u, "
          "\"ms_median\": %.3f, \"images_per_s\": %.4f, \"ms\": [%s]}\n", s->mmproj,
          llm_mmproj_type_name (v->type), v->image_size, v->n_layers_run, v->n_tokens,
          llm_vision_encoder_backend_name (encs[i]), llm_vision_encoder_n_threads (encs[i]),
          s->rounds, med, 1e3 / med, list);
    else
      g_print ("%7d  %8.3f  %9.1f  %7.1f  %7.1f  %8.0f  %8.0f\n",
          llm_vision_encoder_n_threads (encs[i]), 1e3 / med, med, m[0], m[s->rounds - 1],
          v->n_tokens * 1e3 / med, load_ms[i]);
  }
  for (guint i = 0; i < s->n_threads; i++)
    llm_vision_encoder_free (encs[i]);
  return ok;
}
