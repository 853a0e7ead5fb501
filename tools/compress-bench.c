/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-compress-bench: what compressing an image's tokens buys and
 * costs. An image (decoded and resized by GStreamer) goes once through an
 * mmproj tower; then, for each kept ratio, its rows are compressed
 * (lib/token-compress.h, as llmtokencompress does) and a prompt holding
 * them is prefilled on a language model, as llmprefill does:
 *
 *   gst-llm-compress-bench --mmproj M.gguf -m LM.gguf [--image FILE]
 *       [--ratios 1,0.5,0.25,0.125] [--method merge|prune] [-t N] [-r N]
 *
 * It prints per ratio the rows kept, the prompt's length, the median
 * prefill time (which is the time to the first token: sampling it is
 * microseconds), how many times faster than all rows, and the KL
 * divergence of the first generated token's distribution from the one
 * of the first ratio (1, every row, by default; nats), which says how far
 * compression moved the answer.
 * The ratios take turns within each round. */
#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/video/video.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "media-prompt.h"
#include "mmproj.h"
#include "model.h"
#include "session.h"
#include "token-compress.h"
#include "vision-encoder.h"

static double
now_ms (void)
{
  return g_get_monotonic_time () / 1000.0;
}

/* @path decoded and resized to @side x @side RGB8 by GStreamer. */
static guint8 *
load_image (const char *path, guint side, GError **error)
{
  g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" ! decodebin ! "
      "videoconvert ! videoscale ! video/x-raw,format=RGB,width=%u,height=%u,"
      "pixel-aspect-ratio=1/1 ! appsink name=out sync=false", path, side, side);
  GstElement *p = gst_parse_launch (desc, error);
  if (p == NULL)
    return NULL;
  GstElement *sink = gst_bin_get_by_name (GST_BIN (p), "out");
  gst_element_set_state (p, GST_STATE_PLAYING);
  GstSample *sample = gst_app_sink_try_pull_sample (GST_APP_SINK (sink), 30 * GST_SECOND);
  guint8 *rgb = NULL;
  if (sample != NULL) {
    GstVideoInfo info;
    GstBuffer *b = gst_sample_get_buffer (sample);
    GstMapInfo map;
    if (gst_video_info_from_caps (&info, gst_sample_get_caps (sample))
        && gst_buffer_map (b, &map, GST_MAP_READ)) {
      rgb = g_malloc ((gsize) side * side * 3);
      for (guint y = 0; y < side; y++)
        memcpy (rgb + (gsize) y * side * 3, map.data + y * GST_VIDEO_INFO_PLANE_STRIDE (&info,
                0), (gsize) side * 3);
      gst_buffer_unmap (b, &map);
    }
    gst_sample_unref (sample);
  }
  gst_element_set_state (p, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (p);
  if (rgb == NULL)
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "could not decode %s", path);
  return rgb;
}

/* KL(p || q) of the distributions of two logit rows, in nats. */
static double
kl_divergence (const float *p_logits, const float *q_logits, guint n)
{
  double pmax = -INFINITY, qmax = -INFINITY, ps = 0, qs = 0;
  for (guint i = 0; i < n; i++) {
    pmax = MAX (pmax, p_logits[i]);
    qmax = MAX (qmax, q_logits[i]);
  }
  for (guint i = 0; i < n; i++) {
    ps += exp (p_logits[i] - pmax);
    qs += exp (q_logits[i] - qmax);
  }
  const double lp = pmax + log (ps), lq = qmax + log (qs);
  double kl = 0;
  for (guint i = 0; i < n; i++) {
    const double a = p_logits[i] - lp, b = q_logits[i] - lq;
    kl += exp (a) * (a - b);
  }
  return MAX (kl, 0.0);
}

typedef struct {
  double ratio;
  guint rows;
  float *embd;
  GArray *ids;
  double *ms;                 /* per round */
  float *logits;
} Variant;

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

int
main (int argc, char **argv)
{
  g_autofree char *mmproj_path = NULL, *lm_path = NULL, *image = NULL, *ratios_s = NULL;
  g_autofree char *method = NULL, *prompt = NULL;
  int threads = 0, rounds = 3;
  GOptionEntry entries[] = {
    { "mmproj", 0, 0, G_OPTION_ARG_FILENAME, &mmproj_path, "Projector file", "FILE" },
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &lm_path, "Language model", "FILE" },
    { "image", 0, 0, G_OPTION_ARG_FILENAME, &image,
        "Image (default the bundled tests/data/media/test-1.jpeg)", "FILE" },
    { "ratios", 0, 0, G_OPTION_ARG_STRING, &ratios_s, "Kept ratios (default 1,0.5,0.25,0.125)",
        "R,..." },
    { "method", 0, 0, G_OPTION_ARG_STRING, &method, "merge (default) or prune", "M" },
    { "prompt", 0, 0, G_OPTION_ARG_STRING, &prompt,
        "Text around the image (default \"Describe this image.\")", "TEXT" },
    { "threads", 't', 0, G_OPTION_ARG_INT, &threads, "Threads (default: one per core)", "N" },
    { "rounds", 'r', 0, G_OPTION_ARG_INT, &rounds, "Rounds (default 3)", "N" },
    { NULL },
  };
  GError *error = NULL;
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- token compression: TTFT and KL");
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || mmproj_path == NULL
      || lm_path == NULL || rounds < 1) {
    g_printerr ("gst-llm-compress-bench: %s\n", error ? error->message
        : "give --mmproj FILE and -m FILE (see --help)");
    return 2;
  }
  const gboolean prune = g_strcmp0 (method, "prune") == 0;
  if (method != NULL && !prune && strcmp (method, "merge") != 0) {
    g_printerr ("gst-llm-compress-bench: --method is merge or prune\n");
    return 2;
  }
  g_auto (GStrv) ratio_list = g_strsplit (ratios_s ? ratios_s : "1,0.5,0.25,0.125", ",", -1);
  const guint n_var = g_strv_length (ratio_list);

  g_autoptr (LlmMmproj) p = llm_mmproj_load (mmproj_path, &error);
  g_autoptr (LlmModel) lm = p ? llm_model_load (lm_path, &error) : NULL;
  if (lm == NULL) {
    g_printerr ("gst-llm-compress-bench: %s\n", error->message);
    return 1;
  }
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const LlmHParams *hp = llm_model_hparams (lm);
  if (v == NULL || v->n_out != hp->n_embd || llm_model_tokenizer (lm) == NULL) {
    g_printerr ("gst-llm-compress-bench: the projector's rows (%u) must be the model's "
        "width (%u), and the model needs a tokenizer\n", v ? v->n_out : 0, hp->n_embd);
    return 1;
  }
  g_autofree char *default_image = g_build_filename (LLM_SOURCE_ROOT, "tests", "data",
      "media", "test-1.jpeg", NULL);
  g_autofree guint8 *rgb = load_image (image ? image : default_image, v->image_size, &error);
  if (rgb == NULL) {
    g_printerr ("gst-llm-compress-bench: %s\n", error->message);
    return 1;
  }
  const guint n = v->n_tokens, dim = v->n_out;
  g_autofree float *rows = g_new (float, (gsize) n * dim);
  g_autoptr (LlmVisionEncoder) enc = llm_vision_encoder_new (p, threads, &error);
  double t0 = now_ms ();
  if (enc == NULL || !llm_vision_encoder_encode (enc, rgb, (gsize) v->image_size * 3, rows,
          &error)) {
    g_printerr ("gst-llm-compress-bench: %s\n", error->message);
    return 1;
  }
  const double encode_ms = now_ms () - t0;

  LlmEngineOptions eo;
  llm_engine_options_init (&eo);
  eo.n_threads = threads;
  g_autoptr (LlmEngine) engine = llm_engine_new (lm, &eo, &error);
  if (engine == NULL) {
    g_printerr ("gst-llm-compress-bench: %s\n", error->message);
    return 1;
  }
  g_autoptr (LlmSession) s = NULL;
  Variant *vars = g_new0 (Variant, n_var);
  for (guint i = 0; i < n_var; i++) {
    Variant *va = &vars[i];
    va->ratio = g_ascii_strtod (ratio_list[i], NULL);
    const guint target = llm_token_compress_target (n, va->ratio, 0);
    va->embd = g_new (float, (gsize) n * dim);
    t0 = now_ms ();
    if (prune) {
      g_autofree guint *keep = g_new (guint, n);
      guint kept = 0;
      memcpy (va->embd, rows, (gsize) n * dim * sizeof (float));
      if (!llm_token_prune (va->embd, n, dim, NULL, target, keep, &kept, &error)
          || !llm_token_rows_compact (va->embd, n, dim, keep, kept, &error))
        goto fail;
      va->rows = kept;
    } else {
      g_autofree float *sizes = g_new (float, n);
      if (!llm_token_merge (rows, n, dim, NULL, target, va->embd, sizes, NULL, &va->rows,
              &error))
        goto fail;
    }
    const LlmMediaItem item = { va->rows, 0, 0 };
    va->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
    llm_media_prompt_build (llm_model_tokenizer (lm), NULL, NULL,
        prompt ? prompt : "Describe this image.", TRUE, &item, 1,
        llm_mmproj_type_name (v->type), va->ids);
    va->ms = g_new (double, rounds);
    va->logits = g_new (float, hp->n_vocab);
  }

  LlmSessionConfig cfg = { .kv = { .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL,
      .context_length = vars[0].ids->len + 64 } };
  llm_sampler_params_init (&cfg.sampler);
  cfg.sampler.temperature = 0.0f;
  for (guint i = 0; i < n_var; i++)
    cfg.kv.context_length = MAX (cfg.kv.context_length, vars[i].ids->len + 64);
  s = llm_session_new (engine, &cfg, &error);
  if (s == NULL)
    goto fail;
  /* One untimed prefill: the first touches every weight page. */
  if (!llm_session_feed_embd (s, (const gint32 *) vars[0].ids->data, vars[0].embd,
          vars[0].ids->len, &error))
    goto fail;
  for (int r = 0; r < rounds; r++) {
    for (guint i = 0; i < n_var; i++) {
      Variant *va = &vars[i];
      llm_session_reset (s);
      t0 = now_ms ();
      if (!llm_session_feed_embd (s, (const gint32 *) va->ids->data, va->embd, va->ids->len,
              &error))
        goto fail;
      (void) llm_session_sample (s);
      va->ms[r] = now_ms () - t0;
      memcpy (va->logits, llm_session_logits (s), hp->n_vocab * sizeof (float));
    }
  }

  g_print ("image %s, %s tower %ux%u, %u rows of %u; encode %.0f ms (%d threads)\n",
      image ? image : default_image, llm_mmproj_type_name (v->type), v->image_size,
      v->image_size, n, dim, encode_ms, llm_vision_encoder_n_threads (enc));
  g_print ("model %s, %s, %d threads, %s; %s, median of %d rounds\n\n", lm_path,
      llm_engine_backend_name (engine), llm_engine_n_threads (engine),
      prune ? "prune (by norm)" : "merge (ToMe)", "ratios take turns", rounds);
  g_print ("| kept ratio | image rows | prompt tokens | prefill = TTFT ms | x faster | KL vs all rows (nats) |\n");
  g_print ("|--:|--:|--:|--:|--:|--:|\n");
  qsort (vars[0].ms, rounds, sizeof (double), cmp_double);
  const double base = vars[0].ms[rounds / 2];
  for (guint i = 0; i < n_var; i++) {
    Variant *va = &vars[i];
    if (i > 0)
      qsort (va->ms, rounds, sizeof (double), cmp_double);
    const double med = va->ms[rounds / 2];
    g_print ("| %.3g | %u | %u | %.1f | %.2f | %.4f |\n", va->ratio, va->rows, va->ids->len,
        med, base / med, kl_divergence (vars[0].logits, va->logits, hp->n_vocab));
  }
  return 0;

fail:
  g_printerr ("gst-llm-compress-bench: %s\n", error ? error->message : "failed");
  return 1;
}
