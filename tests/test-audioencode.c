/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* llmaudioencode through GstHarness: its caps name the projector and the
 * language model's width; each chunk's buffer has the time of its first
 * sample and lasts until the next one starts, with or without overlap, from audio of any
 * rate and channel count; quiet chunks become GAP events; EOS encodes the
 * last partial chunk, a flush drops the audio held, a DISCONT or a GAP
 * starts the count again; bad files, devices and chunk sizes are errors that say
 * what to fix. And jfk.wav through decodebin in a whole pipeline. The
 * projector files are written here with random weights. */
#include <glib/gstdio.h>
#include <gst/app/gstappsink.h>
#include <gst/check/gstharness.h>
#include <math.h>
#include <string.h>

#include "element-check.h"
#include "llm-check.h"
#include "llm-caps.h"
#include "llm-meta.h"
#include "mmproj-writer.h"

/* The small Ultravox tower (llm_mmproj_shape_audio_tiny): rows of 48,
 * frames stacked by 8; 30 s of positions. */
static LlmMmprojAudioShape ultravox;
static const LlmMmprojShape llava = { "mlp", 32, 8, 64, 128, 2, 4, 48, 0, TRUE, NULL, NULL };

#define N_OUT 48
#define RATE 16000

static char *tmp_dir;

/* A projector file of @vision and @audio in the suite's directory. */
static char *
write_file (const LlmMmprojShape *vision, const LlmMmprojAudioShape *audio, const char *name)
{
  char *path = g_build_filename (tmp_dir, name, NULL);
  GError *error = NULL;
  ck_assert_msg (llm_mmproj_write_random_towers (vision, audio, 20261202, path, &error), "%s",
      error ? error->message : "");
  return path;
}

static void
setup (void)
{
  tmp_dir = g_dir_make_tmp ("gst-llm-audioencode-XXXXXX", NULL);
  ck_assert (tmp_dir != NULL);
}

static void
teardown (void)
{
  GDir *dir = g_dir_open (tmp_dir, 0, NULL);
  const char *name;
  while (dir && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = g_build_filename (tmp_dir, name, NULL);
    g_unlink (path);
  }
  if (dir)
    g_dir_close (dir);
  g_rmdir (tmp_dir);
  g_clear_pointer (&tmp_dir, g_free);
}

/* An encoder of the Ultravox file with properties as name/value pairs
 * (NULL-terminated), fed @caps. */
static GstHarness *
harness_new (const char *caps, const char *first_prop, ...)
{
  GstElement *el = gst_element_factory_make ("llmaudioencode", NULL);
  ck_assert_msg (el != NULL, "no llmaudioencode: is GST_PLUGIN_PATH_1_0 set?");
  g_autofree char *path = write_file (NULL, &ultravox, "ultravox.gguf");
  g_object_set (el, "mmproj", path, NULL);
  if (first_prop) {
    va_list args;
    va_start (args, first_prop);
    g_object_set_valist (G_OBJECT (el), first_prop, args);
    va_end (args);
  }
  GstHarness *h = gst_harness_new_with_element (el, "sink", "src");
  gst_object_unref (el);
  gst_harness_set_src_caps_str (h, caps);
  return h;
}

#define MONO_F32 "audio/x-raw, format=F32LE, rate=16000, channels=1, layout=interleaved"

/* The projector is opened at NULL->READY and the chunking latched at
 * READY->PAUSED: changed while playing, each says which comes next; the
 * silence threshold (read per chunk) and reading a setting say nothing. */
START_TEST (test_settings_changed_after_they_are_read_are_flagged)
{
  GstHarness *h = harness_new (MONO_F32, NULL);
  llm_test_watch_warnings (h->element);
  g_object_set (h->element, "mmproj", "/nonexistent.gguf", NULL);
  g_object_set (h->element, "chunk-duration", 2.0, NULL);
  g_object_set (h->element, "silence-threshold", 0.01, NULL);
  gdouble chunk;
  g_object_get (h->element, "chunk-duration", &chunk, NULL);
  g_autofree char *seen = llm_test_watched_warnings ();
  ck_assert_str_eq (seen, "mmproj changes take effect from the next NULL->READY\n"
      "chunk-duration changes take effect from the next READY->PAUSED\n");
  gst_harness_teardown (h);
}
END_TEST
#define STEREO_S16 "audio/x-raw, format=S16LE, rate=48000, channels=2, layout=interleaved"

/* @seconds of mono F32 at 16 kHz from @pts: a 440 Hz tone of @amplitude
 * (0: silence). */
static GstBuffer *
mono (double seconds, GstClockTime pts, double amplitude)
{
  const gsize n = (gsize) llround (seconds * RATE);
  GstBuffer *buf = gst_buffer_new_allocate (NULL, n * sizeof (float), NULL);
  GstMapInfo map;
  gst_buffer_map (buf, &map, GST_MAP_WRITE);
  float *f = (float *) map.data;
  for (gsize i = 0; i < n; i++)
    f[i] = (float) (amplitude * sin (2 * G_PI * 440 * i / RATE));
  gst_buffer_unmap (buf, &map);
  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = gst_util_uint64_scale (n, GST_SECOND, RATE);
  return buf;
}

/* Pushes @seconds of a tone from @pts in buffers of 0.1 s. */
static void
push_mono (GstHarness *h, double seconds, GstClockTime pts, double amplitude)
{
  for (double t = 0; t < seconds - 1e-9; t += 0.1) {
    const double len = MIN (0.1, seconds - t);
    ck_assert_int_eq (gst_harness_push (h, mono (len, pts + (GstClockTime) llround (t * GST_SECOND),
                amplitude)), GST_FLOW_OK);
  }
}

/* Pulls a buffer and checks its time, duration (to @slack) and rows. */
static void
expect_chunk (GstHarness *h, GstClockTime pts, GstClockTime duration, GstClockTime slack,
    guint rows)
{
  GstBuffer *buf = gst_harness_try_pull (h);
  ck_assert_msg (buf != NULL, "no chunk at %" GST_TIME_FORMAT, GST_TIME_ARGS (pts));
  ck_assert_msg (GST_BUFFER_PTS (buf) == pts, "chunk at %" GST_TIME_FORMAT ", not %"
      GST_TIME_FORMAT, GST_TIME_ARGS (GST_BUFFER_PTS (buf)), GST_TIME_ARGS (pts));
  const GstClockTime d = GST_BUFFER_DURATION (buf);
  ck_assert_msg (d + slack >= duration && d <= duration + slack, "duration %" GST_TIME_FORMAT
      ", not %" GST_TIME_FORMAT, GST_TIME_ARGS (d), GST_TIME_ARGS (duration));
  ck_assert_uint_eq (gst_buffer_get_size (buf), (gsize) rows * N_OUT * sizeof (float));
  /* The plugin registered the meta's API; this program's copy of the
   * contract could not register it again, so it is found by name. */
  GstLlmEmbeddingsMeta *meta = (GstLlmEmbeddingsMeta *) gst_buffer_get_meta (buf,
      g_type_from_name ("GstLlmEmbeddingsMetaAPI"));
  ck_assert (meta != NULL);
  ck_assert_uint_eq (meta->n_rows, rows);
  ck_assert_uint_eq (meta->grid_w, 0);
  gst_buffer_unref (buf);
}

static void
expect_no_chunk (GstHarness *h)
{
  GstBuffer *buf = gst_harness_try_pull (h);
  ck_assert_msg (buf == NULL, "an unexpected chunk at %" GST_TIME_FORMAT,
      GST_TIME_ARGS (GST_BUFFER_PTS (buf)));
}

/* Rows of the small Ultravox tower for a chunk of @seconds encoded from
 * its own frames: frames / 2 positions (rounded up), 8 to a row. */
static guint
rows_for (double seconds)
{
  const guint frames = MAX ((guint) ceil (seconds * 100 - 1e-9), 4);
  return ((frames - 1) / 2 + 1 + 7) / 8;
}

#define S(x) ((GstClockTime) llround ((x) * GST_SECOND))

START_TEST (test_caps_name_the_projector_and_the_width)
{
  GstHarness *h = harness_new (MONO_F32, NULL);
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  ck_assert (caps != NULL);
  guint dim;
  const char *modality, *projector;
  ck_assert (gst_llm_caps_parse_embeddings (caps, &dim, &modality, &projector));
  ck_assert_uint_eq (dim, N_OUT);
  ck_assert_str_eq (modality, "audio");
  ck_assert_str_eq (projector, "ultravox");
  gst_caps_unref (caps);
  g_autofree char *active = NULL;
  g_object_get (h->element, "active-device", &active, NULL);
  ck_assert_str_eq (active, "cpu");
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_chunks_carry_their_first_samples_time)
{
  /* 48 kHz stereo resampled to 16 kHz mono: 2.5 s from 10 s in chunks of
   * 1 s, the last half a second at EOS. */
  GstHarness *h = harness_new (STEREO_S16, "chunk-duration", 1.0, "pad-chunks", FALSE, NULL);
  const gsize n = 4800;
  for (guint b = 0; b < 25; b++) {
    GstBuffer *buf = gst_buffer_new_allocate (NULL, n * 4, NULL);
    GstMapInfo map;
    gst_buffer_map (buf, &map, GST_MAP_WRITE);
    gint16 *s = (gint16 *) map.data;
    for (gsize i = 0; i < n; i++)
      s[2 * i] = s[2 * i + 1] = (gint16) (8000 * sin (2 * G_PI * 440 * (b * n + i) / 48000.0));
    gst_buffer_unmap (buf, &map);
    GST_BUFFER_PTS (buf) = S (10) + b * S (0.1);
    ck_assert_int_eq (gst_harness_push (h, buf), GST_FLOW_OK);
  }
  expect_chunk (h, S (10), S (1), 0, rows_for (1));
  expect_chunk (h, S (11), S (1), 0, rows_for (1));
  expect_no_chunk (h);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  /* The resampler's filter gives its last samples at EOS: within a
   * sample of the half second. */
  expect_chunk (h, S (12), S (0.5), GST_SECOND / RATE, rows_for (0.5));
  expect_no_chunk (h);
  gst_harness_teardown (h);
}
END_TEST

/* Chunks of 1 s sharing 0.5 s start a hop apart, and each lasts until
 * the next starts, so they (and the captions timed by them) do not
 * overlap in time; each still encodes its whole second. (Each lasted its
 * whole second, so two captions stood on screen at once; found by a
 * hostile pass.) */
START_TEST (test_overlapping_chunks_start_a_hop_apart)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 1.0, "overlap", 0.5,
      "pad-chunks", FALSE, NULL);
  push_mono (h, 2.7, S (10), 0.5);
  for (guint i = 0; i < 4; i++)
    expect_chunk (h, S (10) + i * S (0.5), S (0.5), 0, rows_for (1));
  expect_no_chunk (h);
  /* 12.5 s to 12.7 s is in no chunk yet: the last one starts a hop after
   * the one before, at 12 s. */
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  expect_chunk (h, S (12), S (0.7), 0, rows_for (0.7));
  expect_no_chunk (h);
  gst_harness_teardown (h);
}
END_TEST

/* Pulls events up to the next GAP; checks its time. */
static void
expect_gap (GstHarness *h, GstClockTime pts, GstClockTime duration)
{
  GstEvent *ev;
  while ((ev = gst_harness_try_pull_event (h)) != NULL && GST_EVENT_TYPE (ev) != GST_EVENT_GAP)
    gst_event_unref (ev);
  ck_assert_msg (ev != NULL, "no gap at %" GST_TIME_FORMAT, GST_TIME_ARGS (pts));
  GstClockTime t, d;
  gst_event_parse_gap (ev, &t, &d);
  ck_assert_uint_eq (t, pts);
  ck_assert_uint_eq (d, duration);
  gst_event_unref (ev);
}

START_TEST (test_quiet_chunks_become_gaps)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 1.0, "pad-chunks", FALSE,
      "silence-threshold", -40.0, NULL);
  /* Silence, a tone at -9 dBFS, a faint one at -63 dBFS. */
  push_mono (h, 1.0, 0, 0.0);
  push_mono (h, 1.0, S (1), 0.5);
  push_mono (h, 1.0, S (2), 0.001);
  expect_chunk (h, S (1), S (1), 0, rows_for (1));
  expect_no_chunk (h);
  expect_gap (h, 0, S (1));
  expect_gap (h, S (2), S (1));
  gst_harness_teardown (h);

  /* By default nothing is dropped, not even digital silence. */
  h = harness_new (MONO_F32, "chunk-duration", 1.0, "pad-chunks", FALSE, NULL);
  push_mono (h, 1.0, 0, 0.0);
  expect_chunk (h, 0, S (1), 0, rows_for (1));
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_eos_encodes_the_partial_chunk)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 2.0, "pad-chunks", FALSE, NULL);
  push_mono (h, 0.3, S (4), 0.5);
  expect_no_chunk (h);
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  expect_chunk (h, S (4), S (0.3), 0, rows_for (0.3));
  expect_no_chunk (h);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_flush_drops_the_audio_held)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 1.0, "pad-chunks", FALSE, NULL);
  push_mono (h, 0.7, 0, 0.5);
  ck_assert (gst_harness_push_event (h, gst_event_new_flush_start ()));
  ck_assert (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  GstSegment seg;
  gst_segment_init (&seg, GST_FORMAT_TIME);
  ck_assert (gst_harness_push_event (h, gst_event_new_segment (&seg)));
  push_mono (h, 1.0, S (5), 0.5);
  /* One chunk, of the audio after the flush alone. */
  expect_chunk (h, S (5), S (1), 0, rows_for (1));
  ck_assert (gst_harness_push_event (h, gst_event_new_eos ()));
  expect_no_chunk (h);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_a_discontinuity_or_a_gap_starts_the_count_again)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 1.0, "pad-chunks", FALSE, NULL);
  push_mono (h, 0.5, S (1), 0.5);
  GstBuffer *buf = mono (1.0, S (100), 0.5);
  GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
  ck_assert_int_eq (gst_harness_push (h, buf), GST_FLOW_OK);
  expect_chunk (h, S (1), S (0.5), 0, rows_for (0.5));
  expect_chunk (h, S (100), S (1), 0, rows_for (1));
  expect_no_chunk (h);
  /* A gap in the audio does the same. */
  push_mono (h, 0.3, S (101), 0.5);
  ck_assert (gst_harness_push_event (h, gst_event_new_gap (S (101.3), S (2))));
  push_mono (h, 1.0, S (103.3), 0.5);
  expect_chunk (h, S (101), S (0.3), 0, rows_for (0.3));
  expect_chunk (h, S (103.3), S (1), 0, rows_for (1));
  expect_no_chunk (h);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_padded_chunks_give_the_windows_rows)
{
  /* mtmd's way: each chunk padded to 30 s, 1500 positions, 188 rows. */
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 1.0, NULL);
  push_mono (h, 1.0, 0, 0.5);
  expect_chunk (h, 0, S (1), 0, 188);
  gst_harness_teardown (h);
}
END_TEST

/* The first chunk's buffer of a 1 s tone through an encoder of
 * @n_threads workers. */
static GstBuffer *
first_chunk_with_threads (guint n_threads)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 1.0, "pad-chunks", FALSE,
      "n-threads", n_threads, NULL);
  guint got = G_MAXUINT;
  g_object_get (h->element, "n-threads", &got, NULL);
  ck_assert_uint_eq (got, n_threads);
  push_mono (h, 1.0, 0, 0.5);
  GstBuffer *buf = gst_harness_try_pull (h);
  ck_assert (buf != NULL);
  gst_harness_teardown (h);
  return buf;
}

START_TEST (test_n_threads_gives_the_same_rows)
{
  GstElement *el = gst_element_factory_make ("llmaudioencode", NULL);
  guint n_threads = G_MAXUINT;
  g_object_get (el, "n-threads", &n_threads, NULL);
  ck_assert_uint_eq (n_threads, 0);   /* one per core */
  gst_object_unref (el);

  GstBuffer *one = first_chunk_with_threads (1), *two = first_chunk_with_threads (2);
  ck_assert_uint_eq (gst_buffer_get_size (one), (gsize) rows_for (1.0) * N_OUT * sizeof (float));
  ck_assert_uint_eq (gst_buffer_get_size (two), gst_buffer_get_size (one));
  GstMapInfo m1, m2;
  gst_buffer_map (one, &m1, GST_MAP_READ);
  gst_buffer_map (two, &m2, GST_MAP_READ);
  ck_assert_msg (memcmp (m1.data, m2.data, m1.size) == 0, "1 and 2 threads differ");
  gst_buffer_unmap (one, &m1);
  gst_buffer_unmap (two, &m2);
  gst_buffer_unref (one);
  gst_buffer_unref (two);
}
END_TEST

/* Sets @el to @state with a bus; returns the result and the ERROR message
 * posted, if any. */
static GstStateChangeReturn
try_state (GstElement *el, GstState state, GError **error)
{
  GstBus *bus = gst_bus_new ();
  gst_element_set_bus (el, bus);
  GstStateChangeReturn ret = gst_element_set_state (el, state);
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  *error = NULL;
  if (msg) {
    gst_message_parse_error (msg, error, NULL);
    gst_message_unref (msg);
  }
  gst_element_set_state (el, GST_STATE_NULL);
  gst_element_set_bus (el, NULL);
  gst_object_unref (bus);
  return ret;
}

/* An encoder with @prop set to @value (a string) fails to reach @state
 * with @code and a message holding @words. */
static void
expect_error (const char *prop, const char *value, GstState state, GQuark domain, int code,
    const char *words)
{
  GstElement *el = gst_element_factory_make ("llmaudioencode", NULL);
  g_autofree char *good = write_file (NULL, &ultravox, "good.gguf");
  g_object_set (el, "mmproj", good, NULL);
  if (prop)
    gst_util_set_object_arg (G_OBJECT (el), prop, value);
  GError *error;
  ck_assert_int_eq (try_state (el, state, &error), GST_STATE_CHANGE_FAILURE);
  ck_assert_msg (error != NULL, "no error for %s=%s", prop, value);
  ck_assert_msg (g_error_matches (error, domain, code), "%s=%s: got %s %d: %s", prop, value,
      g_quark_to_string (error->domain), error->code, error->message);
  ck_assert_msg (strstr (error->message, words) != NULL, "\"%s\" lacks \"%s\"", error->message,
      words);
  g_error_free (error);
  gst_object_unref (el);
}

START_TEST (test_a_bad_projector_file_is_an_error_at_ready)
{
  expect_error ("mmproj", "/nonexistent/mmproj.gguf", GST_STATE_READY, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_NOT_FOUND, "\"/nonexistent/mmproj.gguf\" does not exist");
  expect_error ("mmproj", "", GST_STATE_READY, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_NOT_FOUND, "No projector file set");
  g_autofree char *vision = write_file (&llava, NULL, "vision.gguf");
  expect_error ("mmproj", vision, GST_STATE_READY, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_FAILED, "not a multimodal projector with an audio encoder");
  LlmMmprojAudioShape other = ultravox;
  other.type = "glma";
  g_autofree char *glma = write_file (NULL, &other, "glma.gguf");
  expect_error ("mmproj", glma, GST_STATE_READY, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "audio projector type \"glma\" is not supported");
  other = ultravox;
  other.drop = "a.blk.1.attn_q.weight";
  g_autofree char *broken = write_file (NULL, &other, "broken.gguf");
  expect_error ("mmproj", broken, GST_STATE_READY, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_FAILED, "tensor a.blk.1.attn_q.weight is missing");
  g_autofree char *model = llm_test_data_path ("models/stories260K.gguf");
  expect_error ("mmproj", model, GST_STATE_READY, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_FAILED,
      "architecture llama");
}
END_TEST

START_TEST (test_a_device_that_is_not_there_is_named)
{
  expect_error ("device", "cuda:0", GST_STATE_READY, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_NOT_FOUND, "Device \"cuda:0\" is not available");
}
END_TEST

START_TEST (test_chunks_must_fit_the_window)
{
  expect_error ("chunk-duration", "40", GST_STATE_PAUSED, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_SETTINGS, "chunk-duration 40 s does not fit the encoder's window of 30 s");
  expect_error ("overlap", "5", GST_STATE_PAUSED, GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_SETTINGS, "overlap 5 s is not shorter than chunk-duration 5 s");
}
END_TEST

START_TEST (test_latency_is_one_chunk)
{
  GstHarness *h = harness_new (MONO_F32, "chunk-duration", 2.0, NULL);
  GstQuery *q = gst_query_new_latency ();
  ck_assert (gst_pad_peer_query (h->sinkpad, q));
  GstClockTime min, max;
  gst_query_parse_latency (q, NULL, &min, &max);
  ck_assert_uint_ge (min, 2 * GST_SECOND);
  gst_query_unref (q);
  gst_harness_teardown (h);
}
END_TEST

START_TEST (test_jfk_wav_through_decodebin)
{
  g_autofree char *wav = llm_test_data_path ("media/jfk.wav");
  g_autofree char *proj = write_file (NULL, &ultravox, "jfk.gguf");
  g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" ! decodebin ! audioconvert "
      "! llmaudioencode mmproj=\"%s\" ! appsink name=out sync=false", wav, proj);
  GError *error = NULL;
  GstElement *pipe = gst_parse_launch (desc, &error);
  ck_assert_msg (pipe != NULL && error == NULL, "%s", error ? error->message : "");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipe), "out");
  ck_assert_int_ne (gst_element_set_state (pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  /* 11 s in chunks of 5 s (the default): 5, 5 and 1 s, each padded to
   * the 30 s window. */
  const GstClockTime want[] = { 0, S (5), S (10) };
  guint n = 0;
  GstSample *sample;
  while ((sample = gst_app_sink_pull_sample (GST_APP_SINK (sink))) != NULL) {
    GstBuffer *buf = gst_sample_get_buffer (sample);
    ck_assert_uint_lt (n, G_N_ELEMENTS (want));
    ck_assert_uint_eq (GST_BUFFER_PTS (buf), want[n]);
    ck_assert_uint_eq (gst_buffer_get_size (buf), 188 * N_OUT * sizeof (float));
    if (n == 0) {
      guint dim;
      ck_assert (gst_llm_caps_parse_embeddings (gst_sample_get_caps (sample), &dim, NULL, NULL));
      ck_assert_uint_eq (dim, N_OUT);
    }
    gst_sample_unref (sample);
    n++;
  }
  ck_assert_uint_eq (n, 3);
  GstBus *bus = gst_element_get_bus (pipe);
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  ck_assert_msg (msg == NULL, "the pipeline posted an error");
  gst_object_unref (bus);
  gst_element_set_state (pipe, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipe);
}
END_TEST

static Suite *
audioencode_suite (void)
{
  gst_init (NULL, NULL);
  llm_mmproj_shape_audio_tiny (&ultravox, "ultravox", N_OUT);
  Suite *s = suite_create ("audioencode");
  TCase *tc = tcase_create ("element");
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 600);
  tcase_add_test (tc, test_caps_name_the_projector_and_the_width);
  tcase_add_test (tc, test_settings_changed_after_they_are_read_are_flagged);
  tcase_add_test (tc, test_chunks_carry_their_first_samples_time);
  tcase_add_test (tc, test_overlapping_chunks_start_a_hop_apart);
  tcase_add_test (tc, test_quiet_chunks_become_gaps);
  tcase_add_test (tc, test_eos_encodes_the_partial_chunk);
  tcase_add_test (tc, test_flush_drops_the_audio_held);
  tcase_add_test (tc, test_a_discontinuity_or_a_gap_starts_the_count_again);
  tcase_add_test (tc, test_padded_chunks_give_the_windows_rows);
  tcase_add_test (tc, test_n_threads_gives_the_same_rows);
  tcase_add_test (tc, test_a_bad_projector_file_is_an_error_at_ready);
  tcase_add_test (tc, test_a_device_that_is_not_there_is_named);
  tcase_add_test (tc, test_chunks_must_fit_the_window);
  tcase_add_test (tc, test_latency_is_one_chunk);
  tcase_add_test (tc, test_jfk_wav_through_decodebin);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (audioencode_suite)
