/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-tokenize-bench: encode and decode throughput of a GGUF's tokenizer.
 *
 *   gst-llm-tokenize-bench -m model.gguf [-f text.txt] [-b BYTES] [-r REPS]
 *
 * The text (default: tests/data/multilingual.txt if found) is repeated up to
 * BYTES (default 1 MiB) and encoded as one prompt, the way llmtokenize sees a
 * large buffer. Reports MB/s and tokens/s, best and mean of REPS runs. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>

static char *model_path;
static char *text_path;
static gint64 n_bytes = 1 << 20;
static gint reps = 5;

static GOptionEntry entries[] = {
  { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "GGUF file with a tokenizer", "FILE" },
  { "file", 'f', 0, G_OPTION_ARG_FILENAME, &text_path, "Text to repeat (UTF-8)", "FILE" },
  { "bytes", 'b', 0, G_OPTION_ARG_INT64, &n_bytes, "Text size in bytes (default 1 MiB)", "N" },
  { "reps", 'r', 0, G_OPTION_ARG_INT, &reps, "Repetitions (default 5)", "N" },
  { NULL }
};

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- tokenizer throughput");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || model_path == NULL ||
      n_bytes <= 0 || reps <= 0) {
    g_printerr ("%s\n", error ? error->message : "usage: gst-llm-tokenize-bench -m FILE [-f TEXT]");
    return 2;
  }

  g_autofree char *seed = NULL;
  gsize seed_len = 0;
  const char *path = text_path ? text_path : LLM_DEFAULT_TEXT;
  if (!g_file_get_contents (path, &seed, &seed_len, &error) || seed_len == 0) {
    g_printerr ("cannot read text %s: %s\n", path, error ? error->message : "empty");
    return 1;
  }

  GString *text = g_string_sized_new (n_bytes + seed_len);
  while ((gint64) text->len < n_bytes)
    g_string_append_len (text, seed, seed_len);
  /* Cut at a character boundary so the text stays valid UTF-8. */
  gsize cut = n_bytes;
  while (cut > 0 && ((guint8) text->str[cut] & 0xc0) == 0x80)
    cut--;
  g_string_truncate (text, cut);

  g_autoptr (LlmTokenizer) tok = llm_tokenizer_new_from_file (model_path, &error);
  if (tok == NULL) {
    g_printerr ("%s\n", error->message);
    return 1;
  }

  double best_enc = 1e30, sum_enc = 0, best_dec = 1e30, sum_dec = 0;
  guint n_ids = 0;
  for (int r = 0; r < reps; r++) {
    GArray *ids = g_array_sized_new (FALSE, FALSE, sizeof (gint32), text->len / 3);
    gint64 t0 = g_get_monotonic_time ();
    llm_tokenizer_encode (tok, text->str, text->len, TRUE, TRUE, TRUE, ids);
    gint64 t1 = g_get_monotonic_time ();
    GString *out = g_string_sized_new (text->len + 16);
    llm_tokenizer_decode (tok, (const gint32 *) ids->data, ids->len, TRUE, FALSE, TRUE, out);
    gint64 t2 = g_get_monotonic_time ();
    double enc = (t1 - t0) / 1e6, dec = (t2 - t1) / 1e6;
    best_enc = MIN (best_enc, enc);
    best_dec = MIN (best_dec, dec);
    sum_enc += enc;
    sum_dec += dec;
    n_ids = ids->len;
    g_string_free (out, TRUE);
    g_array_free (ids, TRUE);
  }

  double mb = text->len / 1e6;
  printf ("model: %s\ntext: %s, %zu bytes -> %u tokens (%.2f bytes/token)\n",
      model_path, path, text->len, n_ids, (double) text->len / MAX (n_ids, 1));
  printf ("encode: %.2f MB/s best, %.2f MB/s mean (%.0f tokens/s best)\n",
      mb / best_enc, mb * reps / sum_enc, n_ids / best_enc);
  printf ("decode: %.2f MB/s best, %.2f MB/s mean\n", mb / best_dec, mb * reps / sum_dec);
  g_string_free (text, TRUE);
  return 0;
}
