/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-make-mmproj: writes a random-weight mmproj file in llama.cpp's
 * layout, projecting to a language model's width, for pipelines and
 * benchmarks that must run where no real projector weights can be had.
 *
 *   gst-llm-make-mmproj SHAPE (--lm MODEL.gguf | --n-out N) -o FILE [--seed N]
 *       [--layers N]
 *
 * SHAPE: smolvlm (SmolVLM-256M's SigLIP-B/16 and pixel shuffle, real
 * size), llava (a CLIP-L/14 tower and MLP, real size), siglip-small and
 * clip-small (224 pixels, 16-pixel patches, 4 layers of 192: the same
 * graphs at a size two cores encode many times a second; siglip-small
 * tiles images at a long side of 896, as SmolVLM does at 2048), and
 * whisper-tiny-ultravox, whisper-base-ultravox and whisper-small-ultravox
 * (Whisper-tiny's, -base's or -small's encoder with Ultravox's projector,
 * an audio tower). --stack N stacks N frames per row instead of
 * Ultravox's 8: llama.cpp at the commit we compare with aborts on a 30 s
 * window of stack 8 (it counts 187 rows where its graph makes 188), so
 * tools/compare-audio-llama-cpp.sh measures files of stack 4.
 * --layers N: a vision tower of N layers at its shape's widths. */
#include <stdlib.h>
#include <string.h>

#include "mmproj-writer.h"
#include "model.h"

static gboolean
vision_shape (const char *name, guint n_out, LlmMmprojShape *s)
{
  if (strcmp (name, "smolvlm") == 0)
    llm_mmproj_shape_smolvlm (s, n_out);
  else if (strcmp (name, "llava") == 0)
    llm_mmproj_shape_llava (s, n_out);
  else if (strcmp (name, "siglip-small") == 0)
    *s = (LlmMmprojShape) { "idefics3", 224, 16, 192, 768, 4, 3, n_out, 2, FALSE, NULL, NULL,
      896 };
  else if (strcmp (name, "clip-small") == 0)
    *s = (LlmMmprojShape) { "mlp", 224, 16, 192, 768, 4, 3, n_out, 0, TRUE, NULL, NULL };
  else
    return FALSE;
  return TRUE;
}

int
main (int argc, char **argv)
{
  const char *shape = NULL, *lm = NULL, *out = NULL;
  guint n_out = 0, layers = 0, stack = 0;
  guint64 seed = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--lm") == 0 && i + 1 < argc)
      lm = argv[++i];
    else if (strcmp (argv[i], "--n-out") == 0 && i + 1 < argc)
      n_out = (guint) strtoul (argv[++i], NULL, 10);
    else if (strcmp (argv[i], "--layers") == 0 && i + 1 < argc)
      layers = (guint) strtoul (argv[++i], NULL, 10);
    else if (strcmp (argv[i], "--stack") == 0 && i + 1 < argc)
      stack = (guint) strtoul (argv[++i], NULL, 10);
    else if (strcmp (argv[i], "-o") == 0 && i + 1 < argc)
      out = argv[++i];
    else if (strcmp (argv[i], "--seed") == 0 && i + 1 < argc)
      seed = g_ascii_strtoull (argv[++i], NULL, 10);
    else if (shape == NULL && argv[i][0] != '-')
      shape = argv[i];
    else {
      g_printerr ("gst-llm-make-mmproj: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (shape == NULL || out == NULL || (lm == NULL && n_out == 0)) {
    g_printerr ("usage: gst-llm-make-mmproj smolvlm|llava|siglip-small|clip-small|"
        "whisper-tiny-ultravox|whisper-base-ultravox|whisper-small-ultravox\n"
        "    (--lm MODEL.gguf | --n-out N) -o FILE [--seed N] [--stack N]\n"
        "    [--layers N]\n");
    return 2;
  }
  GError *error = NULL;
  if (lm != NULL) {
    LlmModel *m = llm_model_load (lm, &error);
    if (m == NULL) {
      g_printerr ("gst-llm-make-mmproj: %s\n", error->message);
      return 1;
    }
    n_out = llm_model_hparams (m)->n_embd;
    llm_model_unref (m);
  }
  LlmMmprojShape vision;
  LlmMmprojAudioShape audio;
  gboolean ok;
  if (g_str_has_prefix (shape, "whisper-") && g_str_has_suffix (shape, "-ultravox")) {
    if (strcmp (shape, "whisper-tiny-ultravox") == 0)
      llm_mmproj_shape_whisper_tiny_ultravox (&audio, n_out);
    else if (strcmp (shape, "whisper-base-ultravox") == 0)
      llm_mmproj_shape_whisper_base_ultravox (&audio, n_out);
    else if (strcmp (shape, "whisper-small-ultravox") == 0)
      llm_mmproj_shape_whisper_small_ultravox (&audio, n_out);
    else {
      g_printerr ("gst-llm-make-mmproj: unknown shape %s\n", shape);
      return 2;
    }
    if (stack > 0)
      audio.stack = stack;
    ok = llm_mmproj_write_random_towers (NULL, &audio, seed, out, &error);
  } else if (vision_shape (shape, n_out, &vision)) {
    /* Fewer layers at the real widths: quick files for tests. */
    if (layers > 0)
      vision.n_layer = layers;
    ok = llm_mmproj_write_random (&vision, seed, out, &error);
  } else {
    g_printerr ("gst-llm-make-mmproj: unknown shape %s\n", shape);
    return 2;
  }
  if (!ok) {
    g_printerr ("gst-llm-make-mmproj: %s\n", error->message);
    return 1;
  }
  return 0;
}
