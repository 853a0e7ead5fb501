/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-llm-bench's command line as a user types it: arguments it cannot
 * honour are refused with an exit status of 1 or 2 and a message that
 * names the range, before anything is allocated for them; the same
 * options with values in range run. */
#include "llm-check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <glib/gstdio.h>

typedef struct {
  int status;                 /* exit status, -1 if it did not exit */
  char *out, *err;
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

/* gst-llm-bench with @args (NULL-terminated) and no bandwidth test. */
static Run
bench (const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (argv, g_build_filename (LLM_BUILD_ROOT, "tools", "gst-llm-bench", NULL));
  g_ptr_array_add (argv, g_strdup ("--bandwidth-mib=0"));
  for (const char *const *a = args; *a != NULL; a++)
    g_ptr_array_add (argv, g_strdup (*a));
  g_ptr_array_add (argv, NULL);
  Run r = { -1, NULL, NULL };
  int wait_status = 0;
  GError *error = NULL;
  ck_assert_msg (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
          &r.out, &r.err, &wait_status, &error), "%s", error ? error->message : "");
  if (WIFEXITED (wait_status))
    r.status = WEXITSTATUS (wait_status);
  return r;
}

static void
assert_refused (const char *const *args, const char *message)
{
  Run r = bench (args);
  g_autofree char *line = g_strjoinv (" ", (char **) args);
  ck_assert_msg (r.status == 1 || r.status == 2, "%s: exit status %d\n%s", line, r.status,
      r.err);
  ck_assert_msg (strstr (r.err, message) != NULL, "%s: \"%s\" not in:\n%s", line, message,
      r.err);
  run_clear (&r);
}

/* random:0 was read as a file name, and a random:N too large for memory
 * went to one allocation that GLib aborts on; random:N:A with A past
 * 2^31 allocated A ids and drew from a negative range (a GLib critical). */
START_TEST (test_bench_refuses_random_prompts_out_of_range)
{
  g_autofree char *model = llm_test_data_path ("models/stories260K.gguf");
  const char *specs[] = { "random:0", "random:2000000", "random:8:0", "random:8:3000000000" };
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++) {
    const char *args[] = { "-m", model, "--spec", "ngram", "--spec-prompt", specs[i], "-n",
      "8", "--draft-max", "2", "-r", "1", NULL };
    assert_refused (args, "random:N[:A] takes N and A from 1 to 1048576 ids");
  }
  /* No token is timed after the first: no rate to compare (printed as
   * -nan before). */
  const char *one[] = { "-m", model, "--spec", "ngram", "--spec-prompt", "random:8", "-n", "1",
    NULL };
  assert_refused (one, "--spec needs -n of at least 2");
  /* In range: the run's table has its row. */
  const char *args[] = { "-m", model, "--spec", "ngram", "--spec-prompt", "random:8", "-n", "8",
    "--draft-max", "2", "-r", "1", NULL };
  Run r = bench (args);
  ck_assert_msg (r.status == 0, "exit status %d\n%s", r.status, r.err);
  ck_assert_msg (strstr (r.out, "| random:8 | 8 | ngram fixed 2 |") != NULL, "%s", r.out);
  /* And prompt lookup's bound beside the variants. */
  ck_assert_msg (strstr (r.out, "| random:8 | 8 | ngram lookup bound (max ") != NULL, "%s", r.out);
  run_clear (&r);
}
END_TEST

/* --spec-draft-table writes what the draft proposes at each point of the
 * response (tests/data/spec's format). A model drafting for itself
 * proposes exactly the response: each line's first token is the next
 * one. */
START_TEST (test_bench_writes_a_draft_table)
{
  g_autofree char *model = llm_test_data_path ("models/stories260K.gguf");
  g_autofree char *dir = g_dir_make_tmp ("bench-cli-XXXXXX", NULL);
  const char *ngram[] = { "-m", model, "--spec", "ngram", "--spec-prompt", "random:8", "-n",
    "8", "--spec-draft-table", dir, NULL };
  assert_refused (ngram, "--spec-draft-table goes with --spec model");
  g_autofree char *file = g_build_filename (dir, "plain", NULL);
  ck_assert (g_file_set_contents (file, "", 0, NULL));
  const char *not_dir[] = { "-m", model, "--spec", "model", "--draft-model", model,
    "--spec-prompt", "random:8", "-n", "8", "--spec-draft-table", file, NULL };
  assert_refused (not_dir, "is not a directory");
  g_remove (file);

  const char *args[] = { "-m", model, "--spec", "model", "--draft-model", model,
    "--spec-prompt", "random:8", "-n", "8", "--draft-max", "2", "-r", "1",
    "--spec-draft-table", dir, NULL };
  Run r = bench (args);
  ck_assert_msg (r.status == 0, "exit status %d\n%s", r.status, r.err);
  run_clear (&r);
  g_autofree char *table = g_build_filename (dir, "random:8.txt", NULL);
  g_autofree char *text = NULL;
  ck_assert (g_file_get_contents (table, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  ck_assert_uint_eq (g_strv_length (lines), 2 + 8 + 1);  /* the last one empty */
  g_auto (GStrv) prompt = g_strsplit (lines[0], " ", -1);
  ck_assert_uint_eq (g_strv_length (prompt), 8);
  g_auto (GStrv) gen = g_strsplit (lines[1], " ", -1);
  ck_assert_uint_eq (g_strv_length (gen), 8);
  for (guint p = 0; p < 8; p++) {
    g_auto (GStrv) next = g_strsplit (lines[2 + p], " ", -1);
    ck_assert_uint_eq (g_strv_length (next), 8);
    for (guint k = 0; k < 8; k++) {
      const char *colon = strchr (next[k], ':');
      ck_assert_msg (colon != NULL, "%s", next[k]);
      const double prob = g_ascii_strtod (colon + 1, NULL);
      ck_assert (prob > 0.0 && prob <= 1.0);
    }
    if (p + 1 < 8)
      ck_assert_int_eq (atoi (next[0]), atoi (gen[p + 1]));
  }
  g_remove (table);
  g_rmdir (dir);
}
END_TEST

/* The number after "@key": in a JSON line of gst-llm-bench's. */
static double
json_number_of (const char *json, const char *key)
{
  g_autofree char *at = g_strdup_printf ("\"%s\": ", key);
  const char *p = strstr (json, at);
  ck_assert_msg (p != NULL, "%s not in %s", key, json);
  return g_ascii_strtod (p + strlen (at), NULL);
}

/* The @n numbers of the array after "@key". */
static void
json_numbers_of (const char *json, const char *key, double *v, guint n)
{
  g_autofree char *at = g_strdup_printf ("\"%s\": [", key);
  const char *p = strstr (json, at);
  ck_assert_msg (p != NULL, "%s not in %s", key, json);
  p += strlen (at);
  for (guint i = 0; i < n; i++) {
    char *end = NULL;
    v[i] = g_ascii_strtod (p, &end);
    ck_assert_msg (end != p, "%s: %u numbers expected", key, n);
    p = end;
    while (*p == ',' || *p == ' ')
      p++;
  }
  ck_assert_msg (*p == ']', "%s: more than %u numbers", key, n);
}

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Memory speed on a shared host drifts by up to 2x within minutes, so
 * 'of ceiling' compares each repetition's decode with the read bandwidth
 * measured around it (not with one test before all the runs), and
 * reports the median of the repetitions' own fractions. */
/* A decode of @n tokens, @reps times, of stories260K on one thread, its
 * read test as @bandwidth (a --bandwidth-mib= argument) says, in JSON. */
static Run
bench_decode_json (const char *n, const char *reps, const char *bandwidth)
{
  g_autofree char *model = llm_test_data_path ("models/stories260K.gguf");
  const char *args[] = { "-m", model, "-p", "0", "-n", n, "-r", reps, "-t", "1", bandwidth,
    "--json", NULL };
  Run r = bench (args);
  ck_assert_msg (r.status == 0, "exit status %d\n%s", r.status, r.err);
  return r;
}

START_TEST (test_bench_pairs_each_repetition_with_its_bandwidth)
{
  Run r = bench_decode_json ("8", "3", "--bandwidth-mib=16");
  double tg[3], bw[3], frac[3];
  json_numbers_of (r.out, "tg_tokens_per_s_by_repetition", tg, 3);
  json_numbers_of (r.out, "bandwidth_bytes_per_s_by_repetition", bw, 3);
  const double weight_bytes = json_number_of (r.out, "weight_bytes_per_token");
  for (guint i = 0; i < 3; i++) {
    ck_assert (tg[i] > 0 && bw[i] > 0);
    frac[i] = tg[i] / (bw[i] / weight_bytes);
  }
  qsort (frac, 3, sizeof (double), cmp_double);
  qsort (bw, 3, sizeof (double), cmp_double);
  /* The JSON's numbers have 6 significant digits. */
  const double f = json_number_of (r.out, "bandwidth_fraction");
  ck_assert_msg (fabs (f - frac[1]) <= 1e-4 * frac[1], "fraction %g, median of %g %g %g", f,
      frac[0], frac[1], frac[2]);
  const double b = json_number_of (r.out, "bandwidth_bytes_per_s");
  ck_assert_msg (fabs (b - bw[1]) <= 1e-4 * bw[1], "bandwidth %g, median %g", b, bw[1]);
  ck_assert_double_eq (json_number_of (r.out, "bandwidth_test_bytes"), 16 << 20);
  run_clear (&r);
}
END_TEST

/* By default the read test beside the runs reads as many bytes as a step
 * does (whole 2 MiB pages of them), so it meets the caches as the decode
 * does: a larger buffer understated what memory gives a model a few
 * times the size of the last-level cache. */
START_TEST (test_bench_reads_as_many_bytes_as_a_step_beside_the_runs)
{
  Run r = bench_decode_json ("4", "1", "--bandwidth-mib=-1");
  const double weight_bytes = json_number_of (r.out, "weight_bytes_per_token");
  const double page = 2 << 20;
  ck_assert (weight_bytes > 0);
  ck_assert_double_eq (json_number_of (r.out, "bandwidth_test_bytes"),
      ceil (weight_bytes / page) * page);
  ck_assert (json_number_of (r.out, "bandwidth_bytes_per_s") > 0);
  run_clear (&r);
}
END_TEST

START_TEST (test_bench_refuses_models_it_cannot_make)
{
  g_autofree char *dir = g_dir_make_tmp ("bench-cli-XXXXXX", NULL);
  g_autofree char *out = g_build_filename (dir, "m.gguf", NULL);
  const char *layers[] = { "--make-model", "tiny", "--type", "f32", "--layers", "2000", "-o",
    out, NULL };
  assert_refused (layers, "--layers 2000: at most 1024");
  const char *shape[] = { "--make-model", "nosuch", "--type", "f32", "-o", out, NULL };
  assert_refused (shape, "unknown shape 'nosuch'");
  ck_assert (!g_file_test (out, G_FILE_TEST_EXISTS));
  /* In range: a file is written. */
  const char *ok[] = { "--make-model", "tiny", "--type", "f32", "--layers", "3", "-o", out,
    NULL };
  Run r = bench (ok);
  ck_assert_msg (r.status == 0, "exit status %d\n%s", r.status, r.err);
  run_clear (&r);
  ck_assert (g_file_test (out, G_FILE_TEST_IS_REGULAR));
  g_remove (out);
  g_rmdir (dir);
}
END_TEST

static Suite *
bench_cli_suite (void)
{
  Suite *s = suite_create ("bench-cli");
  TCase *tc = tcase_create ("cli");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_bench_refuses_random_prompts_out_of_range);
  tcase_add_test (tc, test_bench_refuses_models_it_cannot_make);
  tcase_add_test (tc, test_bench_writes_a_draft_table);
  tcase_add_test (tc, test_bench_pairs_each_repetition_with_its_bandwidth);
  tcase_add_test (tc, test_bench_reads_as_many_bytes_as_a_step_beside_the_runs);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (bench_cli_suite)
