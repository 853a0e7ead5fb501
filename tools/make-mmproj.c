/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-make-mmproj: writes an mmproj file with random weights in
 * llama.cpp's layout, of a public model's shape, for the pipelines and
 * benchmarks that must run without real projector weights.
 *
 *   gst-llm-make-mmproj [--shape NAME] [--n-out N] [--seed S] OUT.gguf
 *
 * Shapes: whisper-tiny-ultravox (the default: Whisper-tiny's encoder with
 * Ultravox's projector), smolvlm, llava. --n-out is the language model's
 * width (default 576, SmolLM2-135M's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "mmproj-writer.h"

int
main (int argc, char **argv)
{
  g_autofree char *shape = NULL;
  gint n_out = 576;
  gint64 seed = 1;
  GOptionEntry entries[] = {
    { "shape", 0, 0, G_OPTION_ARG_STRING, &shape,
      "whisper-tiny-ultravox (default), smolvlm or llava", "NAME" },
    { "n-out", 0, 0, G_OPTION_ARG_INT, &n_out, "embedding width of the language model", "N" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "seed of the random weights", "S" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("OUT.gguf");
  g_option_context_set_summary (ctx, "Writes an mmproj file with random weights.");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2 || n_out < 1) {
    fprintf (stderr, "%s\n", error ? error->message : "give one output file and --n-out >= 1");
    return 2;
  }
  LlmMmprojShape vision;
  LlmMmprojAudioShape audio;
  gboolean ok;
  if (shape == NULL || strcmp (shape, "whisper-tiny-ultravox") == 0) {
    llm_mmproj_shape_whisper_tiny_ultravox (&audio, (guint) n_out);
    ok = llm_mmproj_write_random_towers (NULL, &audio, (guint64) seed, argv[1], &error);
  } else if (strcmp (shape, "smolvlm") == 0 || strcmp (shape, "llava") == 0) {
    if (strcmp (shape, "smolvlm") == 0)
      llm_mmproj_shape_smolvlm (&vision, (guint) n_out);
    else
      llm_mmproj_shape_llava (&vision, (guint) n_out);
    ok = llm_mmproj_write_random (&vision, (guint64) seed, argv[1], &error);
  } else {
    fprintf (stderr, "no shape \"%s\": whisper-tiny-ultravox, smolvlm or llava\n", shape);
    return 2;
  }
  if (!ok) {
    fprintf (stderr, "%s: %s\n", argv[1], error->message);
    return 1;
  }
  return 0;
}
