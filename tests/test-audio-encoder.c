/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Audio towers of mmproj files: the three projector types read today load
 * with their sizes and every tensor, other types and misshapen files are
 * refused with an error naming the type, key or tensor; Whisper's log-mel
 * front end and the encoder each match a double-precision reference of
 * their definition, and llama.cpp's mtmd for the first seconds of
 * jfk.wav (tests/data/golden/audio-*.f32, tools/make-audio-golden.sh).
 * The files are written here with random weights, in llama.cpp's layout. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "vision-reference.h"
#include "audio-chunker.h"
#include "audio-encoder.h"
#include "audio-mel.h"
#include "audio-resample.h"
#include "cpu/audio.h"
#include "cpu/dft.h"
#include "cpu/matmul.h"
#include "cpu/mel.h"
#include "cpu/ops.h"
#include "mmproj-writer.h"
#include "mmproj.h"
#include "vision-encoder.h"

typedef LlmMmprojAudioShape Shape;

/* Small towers (64 wide, 2 layers of 4 heads, 30 s of positions, 80 mel
 * bins as the real front end gives) projecting to 48. Ultravox's usual
 * stack of 8 does not divide the 1500 frames of a 30 s window, which
 * llama.cpp's mtmd cannot encode (it expects 187 rows and makes 188, and
 * aborts), so the file compared with it stacks by 4. */
static Shape ultravox, ultravox4, qwen2a, voxtral;

/* llm_mmproj_shape_audio_tiny's, to 48; made before the tests fork. */
static void
make_shapes (void)
{
  llm_mmproj_shape_audio_tiny (&ultravox, "ultravox", 48);
  ultravox4 = ultravox;
  ultravox4.stack = 4;
  llm_mmproj_shape_audio_tiny (&qwen2a, "qwen2a", 48);
  llm_mmproj_shape_audio_tiny (&voxtral, "voxtral", 48);
}
/* A vision tower to share a file with (test-mmproj's LLaVA shape). */
static const LlmMmprojShape llava = { "mlp", 32, 8, 64, 128, 2, 4, 48, 0, TRUE, "", "" };

/* The same weights every time: the golden files were made from them. */
#define SEED 20261202

static char *
write_towers (const LlmMmprojShape *vision, const Shape *audio, const char *dir,
    const char *name)
{
  char *path = g_build_filename (dir, name, NULL);
  GError *error = NULL;
  ck_assert_msg (llm_mmproj_write_random_towers (vision, audio, SEED, path, &error), "%s",
      error ? error->message : "");
  return path;
}

/* Loads @vision and @audio from one file with llm_mmproj_load_towers
 * (@towers) or, with @towers 0, llm_mmproj_load; expects @code and a
 * message holding @needle, or success with @code -1. */
static LlmMmproj *
load_full (const LlmMmprojShape *vision, const Shape *audio, LlmMmprojTowers towers, gint code,
    const char *needle)
{
  GError *error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("gst-llm-audio-XXXXXX", &error);
  ck_assert (dir != NULL);
  g_autofree char *path = write_towers (vision, audio, dir, "mmproj.gguf");
  LlmMmproj *p = towers ? llm_mmproj_load_towers (path, towers, &error)
      : llm_mmproj_load (path, &error);
  g_unlink (path);
  g_rmdir (dir);
  if (code < 0) {
    ck_assert_msg (p != NULL, "%s", error ? error->message : "");
    return p;
  }
  ck_assert_msg (p == NULL, "loaded what should be refused (%s)", needle);
  ck_assert_msg (g_error_matches (error, LLM_MMPROJ_ERROR, code), "%s", error->message);
  ck_assert_msg (strstr (error->message, needle) != NULL, "\"%s\" not in: %s", needle,
      error->message);
  g_error_free (error);
  return NULL;
}

static LlmMmproj *
load (const Shape *s, gint code, const char *needle)
{
  return load_full (NULL, s, 0, code, needle);
}

/* --- loading ------------------------------------------------------------ */

START_TEST (test_ultravox_tower_loads_with_its_stacking)
{
  g_autoptr (LlmMmproj) p = load (&ultravox, -1, NULL);
  ck_assert_ptr_null (llm_mmproj_vision (p));
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  ck_assert_ptr_nonnull (a);
  ck_assert_int_eq (a->type, LLM_MMPROJ_ULTRAVOX);
  ck_assert_str_eq (llm_mmproj_type_name (a->type), "ultravox");
  ck_assert_uint_eq (a->n_mel, 80);
  ck_assert_uint_eq (a->n_embd, 64);
  ck_assert_uint_eq (a->sample_rate, 16000);
  ck_assert_uint_eq (a->n_fft, 400);
  ck_assert_uint_eq (a->hop, 160);
  ck_assert_uint_eq (a->n_positions, 1500);
  ck_assert_uint_eq (a->n_frames_max, 3000);
  ck_assert_uint_eq (a->stack_factor, 8);
  ck_assert (!a->avg_pool);
  ck_assert_uint_eq (a->n_proj_hidden, 40);
  ck_assert_uint_eq (a->n_out, 48);
  ck_assert_float_eq (a->eps, 1e-5f);
  /* Whisper's key projection has no bias. */
  ck_assert_ptr_null (a->layers[1].k_b.t);
  ck_assert_ptr_nonnull (a->layers[1].q_b.t);
  ck_assert_ptr_nonnull (a->norm_mid_w.t);
  ck_assert_ptr_null (a->pre_ln_w.t);
  /* 3000 frames, 1500 after the stride-2 convolution, 188 rows of 8 (the
   * last padded). */
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 3000), 188);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 1), 1);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 0), 0);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 3001), 0);
}
END_TEST

START_TEST (test_qwen2a_tower_loads_with_its_pooling)
{
  g_autoptr (LlmMmproj) p = load (&qwen2a, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  ck_assert_int_eq (a->type, LLM_MMPROJ_QWEN2A);
  ck_assert_uint_eq (a->stack_factor, 1);
  ck_assert (a->avg_pool);
  ck_assert_uint_eq (a->n_proj_hidden, 0);
  ck_assert_ptr_nonnull (a->proj1_b.t);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 3000), 750);
  /* 3 frames make 2 after the convolution, 1 pooled; 2 frames make 1,
   * which pools to none. */
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 3), 1);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 2), 0);
}
END_TEST

START_TEST (test_voxtral_tower_loads_with_its_stacking)
{
  g_autoptr (LlmMmproj) p = load (&voxtral, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  ck_assert_int_eq (a->type, LLM_MMPROJ_VOXTRAL);
  ck_assert_uint_eq (a->stack_factor, 4);
  ck_assert (!a->avg_pool);
  ck_assert_uint_eq (a->n_proj_hidden, 40);
  /* Hugging Face's 375 rows a 30 s window. */
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 3000), 375);
}
END_TEST

START_TEST (test_whisper_tiny_ultravox_shape_loads_and_encodes)
{
  Shape s;
  llm_mmproj_shape_whisper_tiny_ultravox (&s, 96);
  g_autoptr (LlmMmproj) p = load (&s, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  ck_assert_uint_eq (a->n_embd, 384);
  ck_assert_uint_eq (a->n_layer, 4);
  ck_assert_uint_eq (a->n_head, 6);
  ck_assert_uint_eq (a->n_ff, 1536);
  ck_assert_uint_eq (a->n_mel, 80);
  ck_assert_uint_eq (a->n_out, 96);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, 3000), 188);
  /* Half a second of frames through it: 25 positions, 4 rows. */
  g_autofree float *mel = g_new (float, 80 * 50);
  for (guint i = 0; i < 80 * 50; i++)
    mel[i] = (float) ((i * 7919) % 200) / 100.0f - 1.0f;
  g_autofree float *out = g_new (float, 4 * 96);
  guint rows = 0;
  GError *error = NULL;
  ck_assert_msg (llm_audio_encode (p, llm_cpu_kernels_best (), mel, 50, out, &rows, &error),
      "%s", error ? error->message : "");
  ck_assert_uint_eq (rows, 4);
  for (guint i = 0; i < 4 * 96; i++)
    ck_assert (isfinite (out[i]));
}
END_TEST

START_TEST (test_other_audio_projector_types_are_refused_by_name)
{
  Shape s = ultravox;
  s.type = "glma";
  load (&s, LLM_MMPROJ_ERROR_UNSUPPORTED, "audio projector type \"glma\" is not supported");
  s.type = "meralion";
  load (&s, LLM_MMPROJ_ERROR_UNSUPPORTED, "\"meralion\"");
  /* Qwen2.5-Omni's encoder attends in windows of its own; it is not
   * Qwen2-Audio's. */
  s.type = "qwen2.5o";
  load (&s, LLM_MMPROJ_ERROR_UNSUPPORTED, "\"qwen2.5o\"");
  s.type = "ultravox\033[2J";
  load (&s, LLM_MMPROJ_ERROR_UNSUPPORTED, "ultravox\\x1b[2J");
}
END_TEST

START_TEST (test_a_missing_or_misshapen_audio_tensor_is_named)
{
  static const struct {
    const Shape *shape;
    const char *drop, *widen, *needle;
  } cases[] = {
    { &ultravox, "a.conv1d.2.bias", NULL, "tensor a.conv1d.2.bias is missing" },
    { &ultravox, "a.position_embd.weight", NULL, "tensor a.position_embd.weight is missing" },
    { &ultravox, "a.blk.1.ffn_down.weight", NULL, "tensor a.blk.1.ffn_down.weight is missing" },
    { &ultravox, "a.post_ln.bias", NULL, "tensor a.post_ln.bias is missing" },
    { &ultravox, "mm.a.norm_mid.weight", NULL, "tensor mm.a.norm_mid.weight is missing" },
    { &qwen2a, "mm.a.fc.bias", NULL, "tensor mm.a.fc.bias is missing" },
    { &voxtral, "mm.a.mlp.2.weight", NULL, "tensor mm.a.mlp.2.weight is missing" },
    { &ultravox, NULL, "a.conv1d.1.weight", "a.conv1d.1.weight has shape [3, 80, 65]" },
    { &ultravox, NULL, "a.conv1d.1.bias", "a.conv1d.1.bias has shape [1, 65]" },
    { &ultravox, NULL, "a.blk.0.attn_v.weight", "a.blk.0.attn_v.weight has shape [64, 65]" },
    { &ultravox, NULL, "mm.a.norm_pre.weight", "mm.a.norm_pre.weight has shape [513]" },
    /* 81 outputs: SwiGLU cannot halve them. */
    { &ultravox, NULL, "mm.a.mlp.1.weight", "81 outputs, which SwiGLU cannot halve" },
    { &voxtral, NULL, "mm.a.mlp.1.weight", "mm.a.mlp.2.weight has shape [40, 48], the sizes "
      "ask for [41, *]" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    Shape s = *cases[i].shape;
    s.drop = cases[i].drop;
    s.widen = cases[i].widen;
    load (&s, LLM_MMPROJ_ERROR_INVALID, cases[i].needle);
  }
}
END_TEST

START_TEST (test_audio_sizes_that_do_not_fit_are_refused)
{
  Shape s = ultravox;
  s.n_head = 5;
  load (&s, LLM_MMPROJ_ERROR_INVALID, "audio embedding length 64 is not a multiple of the 5 heads");
  /* Ultravox cannot stack without its factor (nor can llama.cpp). */
  s = ultravox;
  s.stack = 0;
  load (&s, LLM_MMPROJ_ERROR_INVALID, "clip.audio.projector.stack_factor");
  s = qwen2a;
  s.n_mel = 300;
  load (&s, LLM_MMPROJ_ERROR_INVALID, "clip.audio.num_mel_bins is 300, not in 1..256");
}
END_TEST

START_TEST (test_a_file_of_both_towers_gives_each)
{
  g_autoptr (LlmMmproj) p = load_full (&llava, &qwen2a, 0, -1, NULL);
  ck_assert_int_eq (llm_mmproj_vision (p)->type, LLM_MMPROJ_MLP);
  ck_assert_int_eq (llm_mmproj_audio (p)->type, LLM_MMPROJ_QWEN2A);

  /* A vision tower this build cannot read does not keep the audio tower
   * from an element that asks for that alone. */
  LlmMmprojShape other = llava;
  other.type = "qwen2vl_merger";
  load_full (&other, &qwen2a, 0, LLM_MMPROJ_ERROR_UNSUPPORTED,
      "vision projector type \"qwen2vl_merger\"");
  g_autoptr (LlmMmproj) audio = load_full (&other, &qwen2a, LLM_MMPROJ_TOWER_AUDIO, -1, NULL);
  ck_assert_ptr_null (llm_mmproj_vision (audio));
  ck_assert_int_eq (llm_mmproj_audio (audio)->type, LLM_MMPROJ_QWEN2A);
}
END_TEST

START_TEST (test_an_audio_file_has_no_vision_tower)
{
  load_full (NULL, &qwen2a, LLM_MMPROJ_TOWER_VISION, LLM_MMPROJ_ERROR_NOT_MMPROJ,
      "with a vision encoder");
  load_full (&llava, NULL, LLM_MMPROJ_TOWER_AUDIO, LLM_MMPROJ_ERROR_NOT_MMPROJ,
      "with an audio encoder (architecture clip, no clip.has_audio_encoder)");
  g_autoptr (LlmMmproj) p = load (&qwen2a, -1, NULL);
  guint8 rgb[3] = { 0 };
  float out[1];
  GError *error = NULL;
  ck_assert (!llm_vision_encode (p, llm_cpu_kernels_best (), rgb, 3, out, &error));
  ck_assert (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ));
  g_clear_error (&error);

  g_autoptr (LlmMmproj) v = load_full (&llava, NULL, 0, -1, NULL);
  ck_assert_ptr_null (llm_mmproj_audio (v));
  guint rows;
  ck_assert (!llm_audio_encode (v, llm_cpu_kernels_best (), out, 1, out, &rows, &error));
  ck_assert (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ));
  g_clear_error (&error);
  ck_assert_ptr_null (llm_audio_encoder_new (v, 1, &error));
  ck_assert (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ));
  g_clear_error (&error);
}
END_TEST

START_TEST (test_a_language_model_is_not_an_audio_projector)
{
  g_autofree char *path = llm_test_data_path ("models/stories260K.gguf");
  GError *error = NULL;
  ck_assert_ptr_null (llm_mmproj_load_towers (path, LLM_MMPROJ_TOWER_AUDIO, &error));
  ck_assert (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ));
  ck_assert_msg (strstr (error->message, "architecture llama") != NULL, "%s", error->message);
  g_clear_error (&error);
}
END_TEST

/* --- the audio kernels ----------------------------------------------------- */

START_TEST (test_conv1d_rows_read_channel_and_time_major_input)
{
  /* 3 channels of 5 frames, value 10 c + t, channel-major and time-major. */
  enum { CH = 3, LEN = 5 };
  float cm[CH * LEN], tm[LEN * CH];
  for (guint c = 0; c < CH; c++)
    for (guint t = 0; t < LEN; t++)
      cm[c * LEN + t] = tm[t * CH + c] = (float) (10 * c + t + 1);
  ck_assert_uint_eq (llm_cpu_conv1d_out_len (LEN, 3, 1, 1), 5);
  ck_assert_uint_eq (llm_cpu_conv1d_out_len (LEN, 3, 2, 1), 3);
  ck_assert_uint_eq (llm_cpu_conv1d_out_len (3000, 3, 2, 1), 1500);
  ck_assert_uint_eq (llm_cpu_conv1d_out_len (1, 5, 1, 1), 0);
  for (guint stride = 1; stride <= 2; stride++) {
    const gsize n_out = llm_cpu_conv1d_out_len (LEN, 3, stride, 1);
    float a[5 * CH * 3], b[5 * CH * 3];
    llm_cpu_conv1d_rows (cm, CH, LEN, 1, LEN, 3, stride, 1, n_out, a);
    llm_cpu_conv1d_rows (tm, CH, LEN, CH, 1, 3, stride, 1, n_out, b);
    for (gsize o = 0; o < n_out; o++)
      for (guint c = 0; c < CH; c++)
        for (guint k = 0; k < 3; k++) {
          const gint t = (gint) (o * stride + k) - 1;
          const float want = t < 0 || t >= LEN ? 0.0f : (float) (10 * c + t + 1);
          ck_assert_float_eq (a[o * CH * 3 + c * 3 + k], want);
          ck_assert_float_eq (b[o * CH * 3 + c * 3 + k], want);
        }
  }
}
END_TEST

START_TEST (test_audio_activations_match_their_formulas)
{
  enum { N = 64 };
  float x[2 * N], y[2 * N];
  for (guint i = 0; i < 2 * N; i++)
    x[i] = ((float) i - N) / 9.0f;
  memcpy (y, x, sizeof x);
  llm_cpu_gelu_erf (llm_cpu_kernels_best (), y, y, 2 * N);
  for (guint i = 0; i < 2 * N; i++) {
    const double v = x[i], want = 0.5 * v * (1 + erf (v / sqrt (2.0)));
    ck_assert_msg (fabs (y[i] - want) <= 1e-6 * (1 + fabs (want)), "gelu (%g)", v);
  }
  /* Ultravox's SwiGLU: the second half of mm.a.mlp.1's rows is the gate,
   * the encoder's two weights of one tensor, through the LM's op. */
  llm_cpu_swiglu (llm_cpu_kernels_best (), y, x + N, x, N);
  for (guint i = 0; i < N; i++) {
    const double g = x[N + i], want = x[i] * g / (1 + exp (-g));
    ck_assert_msg (fabs (y[i] - want) <= 1e-6 * (1 + fabs (want)), "swiglu %u", i);
  }
  float w[N];
  for (guint i = 0; i < N; i++)
    w[i] = 0.5f + (float) i / N;
  llm_rmsnorm (y, x, w, N, 1e-6f);
  double ss = 0;
  for (guint i = 0; i < N; i++)
    ss += (double) x[i] * x[i];
  for (guint i = 0; i < N; i++) {
    const double want = x[i] / sqrt (ss / N + 1e-6) * w[i];
    ck_assert_msg (fabs (y[i] - want) <= 1e-6 * (1 + fabs (want)), "rmsnorm %u", i);
  }
  /* 5 rows of 3 pool to 2; the odd one is dropped. */
  float rows[15], pooled[6];
  for (guint i = 0; i < 15; i++)
    rows[i] = (float) i;
  llm_cpu_avg_pool_pairs (rows, pooled, 5, 3);
  for (guint r = 0; r < 2; r++)
    for (guint i = 0; i < 3; i++)
      ck_assert_float_eq (pooled[r * 3 + i], (rows[2 * r * 3 + i] + rows[(2 * r + 1) * 3 + i]) / 2);
}
END_TEST

/* --- from a stream of samples to chunks ----------------------------------- */

static void
expect_chunk (LlmAudioChunker *c, gboolean last, gsize n, guint64 start)
{
  const float *pcm;
  gsize got_n;
  guint64 got_start;
  const gboolean got = last ? llm_audio_chunker_last (c, &pcm, &got_n, &got_start)
      : llm_audio_chunker_next (c, &pcm, &got_n, &got_start);
  ck_assert_msg (got, "no chunk at %" G_GUINT64_FORMAT, start);
  ck_assert_uint_eq (got_n, n);
  ck_assert_uint_eq (got_start, start);
  /* The samples are the stream's from @start: sample i holds i. */
  for (gsize i = 0; i < n; i++)
    ck_assert_float_eq (pcm[i], (float) (start + i));
}

START_TEST (test_chunks_overlap_and_the_last_is_what_is_left)
{
  g_autoptr (LlmAudioChunker) c = llm_audio_chunker_new (4, 1);
  float pcm[12];
  for (guint i = 0; i < 12; i++)
    pcm[i] = (float) i;
  llm_audio_chunker_push (c, pcm, 10);
  /* Chunks of 4 starting 3 apart. */
  expect_chunk (c, FALSE, 4, 0);
  expect_chunk (c, FALSE, 4, 3);
  expect_chunk (c, FALSE, 4, 6);
  const float *p;
  gsize n;
  guint64 start;
  ck_assert (!llm_audio_chunker_next (c, &p, &n, &start));
  /* Sample 9 is in the third chunk already: nothing is left. */
  ck_assert (!llm_audio_chunker_last (c, &p, &n, &start));
  llm_audio_chunker_push (c, pcm + 10, 2);
  ck_assert (!llm_audio_chunker_next (c, &p, &n, &start));
  /* 10 and 11 are in none: the last chunk starts where the next would. */
  expect_chunk (c, TRUE, 3, 9);
  ck_assert (!llm_audio_chunker_last (c, &p, &n, &start));
  llm_audio_chunker_reset (c);
  ck_assert_uint_eq (llm_audio_chunker_held (c), 0);
  llm_audio_chunker_push (c, pcm, 2);
  expect_chunk (c, TRUE, 2, 0);
}
END_TEST

START_TEST (test_levels_are_rms_in_dbfs)
{
  float pcm[1600];
  for (guint i = 0; i < G_N_ELEMENTS (pcm); i++)
    pcm[i] = (float) (0.5 * sin (2 * G_PI * 440 * i / 16000.0));
  ck_assert_double_eq_tol (llm_audio_level_dbfs (pcm, 1600), 20 * log10 (0.5 / sqrt (2)), 0.01);
  memset (pcm, 0, sizeof pcm);
  ck_assert_double_eq (llm_audio_level_dbfs (pcm, 1600), -200.0);
  ck_assert_double_eq (llm_audio_level_dbfs (pcm, 0), -200.0);
}
END_TEST

START_TEST (test_resampling_mixes_to_mono_at_16_khz)
{
  GError *error = NULL;
  /* 1 s of 48 kHz stereo S16, a 1 kHz tone at half scale in the left
   * channel and its negative in the right half the time. */
  enum { N = 48000 };
  g_autofree gint16 *in = g_new (gint16, 2 * N);
  for (guint i = 0; i < N; i++) {
    const gint16 v = (gint16) (16384 * sin (2 * G_PI * 1000 * i / 48000.0));
    in[2 * i] = v;
    in[2 * i + 1] = i < N / 2 ? v : -v;
  }
  g_autoptr (LlmAudioResampler) r = llm_audio_resampler_new (LLM_AUDIO_FORMAT_S16, 48000, 2,
      16000, &error);
  ck_assert_msg (r != NULL, "%s", error ? error->message : "");
  g_autoptr (GArray) out = g_array_new (FALSE, FALSE, sizeof (float));
  for (guint b = 0; b < 10; b++)
    ck_assert (llm_audio_resampler_push (r, in + 2 * b * (N / 10), N / 10, out, &error));
  ck_assert (llm_audio_resampler_drain (r, out, &error));
  /* Every input sample's time is there: 16000, give or take the filter's
   * rounding. */
  ck_assert_msg (out->len >= 15998 && out->len <= 16002, "%u samples", out->len);
  const float *f = (const float *) out->data;
  /* The first half is the tone (0.5 scale), the second the channels
   * cancelling. */
  ck_assert_double_eq_tol (llm_audio_level_dbfs (f + 1000, 6000), 20 * log10 (0.5 / sqrt (2)),
      0.05);
  ck_assert_double_lt (llm_audio_level_dbfs (f + 9000, 6000), -60);

  /* Mono at 16 kHz is not filtered: exactly s / 32768, or the floats. */
  g_autoptr (LlmAudioResampler) same = llm_audio_resampler_new (LLM_AUDIO_FORMAT_S16, 16000, 1,
      16000, &error);
  g_array_set_size (out, 0);
  ck_assert (llm_audio_resampler_push (same, in, 100, out, &error));
  ck_assert (llm_audio_resampler_drain (same, out, &error));
  ck_assert_uint_eq (out->len, 100);
  for (guint i = 0; i < 100; i++)
    ck_assert_float_eq (g_array_index (out, float, i), in[i] / 32768.0f);
  ck_assert_ptr_null (llm_audio_resampler_new (LLM_AUDIO_FORMAT_F32, 0, 1, 16000, &error));
  ck_assert (g_error_matches (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID));
  g_clear_error (&error);
}
END_TEST

/* --- the log-mel front end against a double reference --------------------- */

static double
ref_hz_to_mel (double f)
{
  return f < 1000 ? 3 * f / 200 : 15 + 27 * log (f / 1000) / log (6.4);
}

static double
ref_mel_to_hz (double m)
{
  return m < 15 ? 200 * m / 3 : 1000 * pow (6.4, (m - 15) / 27);
}

/* librosa's mel filter (htk=False, norm="slaney") of bin @k, in double. */
static double
ref_filter (guint m, guint k, guint n_mel, guint n_fft, double rate)
{
  const double top = ref_hz_to_mel (rate / 2);
  const double l = ref_mel_to_hz (top * m / (n_mel + 1));
  const double c = ref_mel_to_hz (top * (m + 1) / (n_mel + 1));
  const double r = ref_mel_to_hz (top * (m + 2) / (n_mel + 1));
  const double f = k * rate / n_fft;
  const double tri = MAX (0.0, MIN ((f - l) / (c - l), (r - f) / (r - c)));
  return tri * 2 / (r - l);
}

/* The whole front end in double, from its definition: mtmd's padding
 * (reflected at the start, silence after the end), a naive DFT. */
static double *
ref_mel (const float *pcm, gsize n, gsize n_frames, guint n_mel)
{
  const guint n_fft = 400, hop = 160, n_bins = n_fft / 2 + 1;
  double *mel = g_new (double, n_mel * n_frames);
  g_autofree double *power = g_new (double, n_bins);
  double frame[400], cs[400], sn[400];
  for (guint j = 0; j < n_fft; j++) {
    cs[j] = cos (2 * G_PI * j / n_fft);
    sn[j] = sin (2 * G_PI * j / n_fft);
  }
  for (gsize t = 0; t < n_frames; t++) {
    for (guint j = 0; j < n_fft; j++) {
      const gint64 s = (gint64) (t * hop + j) - n_fft / 2;
      const guint64 i = (guint64) (s < 0 ? -s : s);
      frame[j] = (i < n ? pcm[i] : 0.0) * 0.5 * (1 - cos (2 * G_PI * j / n_fft));
    }
    for (guint k = 0; k < n_bins; k++) {
      double re = 0, im = 0;
      for (guint j = 0; j < n_fft; j++) {
        re += frame[j] * cs[(k * j) % n_fft];
        im -= frame[j] * sn[(k * j) % n_fft];
      }
      power[k] = re * re + im * im;
    }
    for (guint m = 0; m < n_mel; m++) {
      double sum = 0;
      for (guint k = 0; k < n_bins; k++)
        sum += power[k] * ref_filter (m, k, n_mel, n_fft, 16000);
      mel[m * n_frames + t] = log10 (MAX (sum, pow (2, -24)));
    }
  }
  double max = -INFINITY;
  for (gsize i = 0; i < n_mel * n_frames; i++)
    max = MAX (max, mel[i]);
  for (gsize i = 0; i < n_mel * n_frames; i++)
    mel[i] = (MAX (mel[i], max - 8) + 4) / 4;
  return mel;
}

/* A second of a chirp over noise, quiet in its second half. */
static float *
test_signal (gsize n)
{
  float *pcm = g_new (float, n);
  llm_test_rng_seed (7);
  for (gsize i = 0; i < n; i++) {
    const double t = i / 16000.0;
    const double gain = i < n / 2 ? 0.5 : 0.005;
    pcm[i] = (float) (gain * sin (2 * G_PI * (200 + 1800 * t) * t) + 0.01 * llm_test_rng_float ());
  }
  return pcm;
}

START_TEST (test_dft_power_matches_a_double_dft)
{
  /* Whisper's 400 points (four radix-2 splits, then 25 directly), a power
   * of two and an odd length. */
  const gsize lengths[] = { 400, 64, 15 };
  for (guint li = 0; li < G_N_ELEMENTS (lengths); li++) {
    const gsize n = lengths[li];
    g_autofree float *table = g_new (float, llm_cpu_dft_table_floats (n));
    g_autofree float *scratch = g_new (float, llm_cpu_dft_scratch_floats (n));
    g_autofree float *x = g_new (float, n);
    g_autofree float *power = g_new (float, n / 2 + 1);
    llm_cpu_dft_table (n, table);
    llm_test_rng_seed (3);
    for (gsize j = 0; j < n; j++)
      x[j] = llm_test_rng_float ();
    llm_cpu_dft_power (table, n, x, scratch, power);
    double worst = 0, largest = 0;
    for (gsize k = 0; k <= n / 2; k++) {
      double re = 0, im = 0;
      for (gsize j = 0; j < n; j++) {
        re += x[j] * cos (2 * G_PI * (double) (j * k) / n);
        im -= x[j] * sin (2 * G_PI * (double) (j * k) / n);
      }
      const double want = re * re + im * im;
      worst = MAX (worst, fabs (power[k] - want));
      largest = MAX (largest, want);
    }
    g_print ("DFT of %" G_GSIZE_FORMAT " points: %g off (largest bin %g)\n", n, worst,
        largest);
    /* Float sums of n products: measured 1.7e-7 of the largest bin at each
     * length. */
    ck_assert_msg (worst <= 1e-5 * largest, "%" G_GSIZE_FORMAT " points: %g off (largest %g)",
        n, worst, largest);
  }
}
END_TEST

START_TEST (test_mel_filterbank_is_slaneys)
{
  enum { N_MEL = 128, N_FFT = 400, N_BINS = N_FFT / 2 + 1 };
  g_autofree float *weights = g_new (float, N_MEL * N_BINS);
  LlmCpuMelFilter filters[N_MEL];
  llm_cpu_mel_filterbank (N_MEL, N_FFT, 16000, weights, filters);
  for (guint m = 0; m < N_MEL; m++) {
    for (guint k = 0; k < N_BINS; k++) {
      const double want = ref_filter (m, k, N_MEL, N_FFT, 16000);
      const float got = weights[m * N_BINS + k];
      ck_assert_msg (fabs (got - want) <= 1e-6 * want + 1e-9, "filter %u bin %u: %g, not %g", m,
          k, got, want);
      /* The span holds every nonzero weight. */
      const gboolean inside = k >= filters[m].first && k < filters[m].first + filters[m].count;
      ck_assert (got == 0.0f || inside);
    }
    ck_assert_ptr_eq (filters[m].weights, weights + m * N_BINS + filters[m].first);
  }
}
END_TEST

START_TEST (test_mel_matches_a_double_reference)
{
  const gsize n = 16000;
  g_autofree float *pcm = test_signal (n);
  GError *error = NULL;
  for (guint n_mel = 80; n_mel <= 128; n_mel += 48) {
    g_autoptr (LlmAudioMel) m = llm_audio_mel_new (n_mel, 400, 160, 16000, &error);
    ck_assert_msg (m != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq (llm_audio_mel_frames_for (m, n), 100);
    ck_assert_uint_eq (llm_audio_mel_frames_for (m, n + 1), 101);
    /* The second itself and 20 frames of the silence after it. */
    const gsize frames = 120;
    g_autofree float *got = g_new (float, n_mel * frames);
    ck_assert (llm_audio_mel_compute (m, pcm, n, frames, got, &error));
    g_autofree double *want = ref_mel (pcm, n, frames, n_mel);
    double worst = 0;
    for (gsize i = 0; i < n_mel * frames; i++)
      worst = MAX (worst, fabs (got[i] - want[i]));
    g_print ("mel (%u bins) against double: %g off\n", n_mel, worst);
    /* Float FFT and products against double; the values span about 2. */
    ck_assert_msg (worst <= 1e-4, "%u bins: %g off the double reference", n_mel, worst);
    /* Frames past the end are silence, clamped to the maximum less 8. */
    ck_assert_float_eq (got[frames - 1], got[n_mel * frames - 1]);
  }
}
END_TEST

START_TEST (test_mel_takes_short_audio_and_refuses_none)
{
  GError *error = NULL;
  g_autoptr (LlmAudioMel) m = llm_audio_mel_new (80, 400, 160, 16000, &error);
  ck_assert (m != NULL);
  /* Fewer samples than half a window: the reflection reads silence. */
  const float pcm[50] = { 0.5f, -0.25f, 0.125f };
  float got[80 * 3];
  ck_assert (llm_audio_mel_compute (m, pcm, 50, 3, got, &error));
  g_autofree double *want = ref_mel (pcm, 50, 3, 80);
  for (guint i = 0; i < 80 * 3; i++)
    ck_assert_msg (fabs (got[i] - want[i]) <= 1e-4, "%u: %g, not %g", i, got[i], want[i]);
  ck_assert (!llm_audio_mel_compute (m, pcm, 0, 3, got, &error));
  ck_assert (g_error_matches (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID));
  g_clear_error (&error);
  ck_assert (!llm_audio_mel_compute (m, pcm, 50, 0, got, &error));
  g_clear_error (&error);
  ck_assert_ptr_null (llm_audio_mel_new (80, 401, 160, 16000, &error));
  ck_assert (g_error_matches (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID));
  g_clear_error (&error);
}
END_TEST

/* --- the encoder against a double reference ------------------------------- */

static void
ref_norm (const LlmMmprojWeight *w, const LlmMmprojWeight *b, double *x, gsize n, gsize e,
    double eps, gboolean rms)
{
  g_autofree double *W = llm_test_ref_weights (w);
  g_autofree double *B = llm_test_ref_weights (b);
  for (gsize r = 0; r < n; r++) {
    double *row = x + r * e, mean = 0, var = 0;
    if (!rms) {
      for (gsize i = 0; i < e; i++)
        mean += row[i];
      mean /= e;
    }
    for (gsize i = 0; i < e; i++)
      var += (row[i] - mean) * (row[i] - mean);
    var /= e;
    for (gsize i = 0; i < e; i++)
      row[i] = (row[i] - mean) / sqrt (var + eps) * (W ? W[i] : 1) + (B ? B[i] : 0);
  }
}

static double
gelu (double x)
{
  return 0.5 * x * (1 + erf (x / sqrt (2.0)));
}

/* A 3-tap convolution, one frame of zeros either side, straight from
 * its definition: y[o][oc] = b[oc] + sum over c, k of W[oc][c][k] x(c, o
 * stride + k - 1), x (c, t) at x[t * ts + c * cs]. */
static void
ref_conv (const LlmMmprojWeight *w, const LlmMmprojWeight *b, const double *x, gsize ch,
    gsize len, gsize ts, gsize cs, gsize stride, gsize n_out, double *y)
{
  g_autofree double *W = llm_test_ref_weights (w);
  g_autofree double *B = llm_test_ref_weights (b);
  const gsize oc_n = w->t->ne[2];
  for (gsize o = 0; o < n_out; o++)
    for (gsize oc = 0; oc < oc_n; oc++) {
      double acc = B[oc];
      for (gsize c = 0; c < ch; c++)
        for (gsize k = 0; k < 3; k++) {
          const gint64 t = (gint64) (o * stride + k) - 1;
          if (t >= 0 && t < (gint64) len)
            acc += W[(oc * ch + c) * 3 + k] * x[t * ts + c * cs];
        }
      y[o * oc_n + oc] = gelu (acc);
    }
}

/* Whisper's encoder and the projector in double, Hugging Face's way. */
static double *
ref_encode (const LlmMmprojAudio *a, const float *mel, gsize n_frames, gsize *n_rows)
{
  const gsize e = a->n_embd, hd = e / a->n_head, ff = a->n_ff;
  const gsize P = (n_frames - 1) / 2 + 1;
  g_autofree double *in = g_new (double, a->n_mel * n_frames);
  for (gsize i = 0; i < a->n_mel * n_frames; i++)
    in[i] = mel[i];
  g_autofree double *c1 = g_new (double, n_frames * e);
  ref_conv (&a->conv1_w, &a->conv1_b, in, a->n_mel, n_frames, 1, n_frames, 1, n_frames, c1);
  const gsize wide = MAX (MAX (ff, e * a->stack_factor), 2 * a->n_proj_hidden + a->n_out);
  g_autofree double *x = g_new0 (double, (P + a->stack_factor) * wide);
  ref_conv (&a->conv2_w, &a->conv2_b, c1, e, n_frames, e, 1, 2, P, x);
  g_autofree double *pos = llm_test_ref_weights (&a->pos_embd);
  for (gsize i = 0; i < P * e; i++)
    x[i] += pos[i];
  g_autofree double *h = g_new (double, P * wide), *q = g_new (double, P * e);
  g_autofree double *k = g_new (double, P * e), *v = g_new (double, P * e);
  g_autofree double *o = g_new (double, P * wide), *sc = g_new (double, P);
  for (guint l = 0; l < a->n_layer; l++) {
    const LlmMmprojLayer *ly = &a->layers[l];
    memcpy (h, x, P * e * sizeof *h);
    ref_norm (&ly->ln1_w, &ly->ln1_b, h, P, e, a->eps, FALSE);
    llm_test_ref_linear (&ly->q_w, &ly->q_b, h, P, q);
    llm_test_ref_linear (&ly->k_w, &ly->k_b, h, P, k);
    llm_test_ref_linear (&ly->v_w, &ly->v_b, h, P, v);
    for (guint hh = 0; hh < a->n_head; hh++)
      for (gsize i = 0; i < P; i++) {
        double max = -INFINITY, sum = 0;
        for (gsize j = 0; j < P; j++) {
          double d = 0;
          for (gsize t = 0; t < hd; t++)
            d += q[i * e + hh * hd + t] * k[j * e + hh * hd + t];
          sc[j] = d / sqrt ((double) hd);
          max = MAX (max, sc[j]);
        }
        for (gsize j = 0; j < P; j++)
          sum += (sc[j] = exp (sc[j] - max));
        for (gsize t = 0; t < hd; t++) {
          double acc = 0;
          for (gsize j = 0; j < P; j++)
            acc += sc[j] / sum * v[j * e + hh * hd + t];
          o[i * e + hh * hd + t] = acc;
        }
      }
    llm_test_ref_linear (&ly->o_w, &ly->o_b, o, P, h);
    for (gsize i = 0; i < P * e; i++)
      x[i] += h[i];
    memcpy (h, x, P * e * sizeof *h);
    ref_norm (&ly->ln2_w, &ly->ln2_b, h, P, e, a->eps, FALSE);
    llm_test_ref_linear (&ly->up_w, &ly->up_b, h, P, o);
    for (gsize i = 0; i < P * ff; i++)
      o[i] = gelu (o[i]);
    llm_test_ref_linear (&ly->down_w, &ly->down_b, o, P, h);
    for (gsize i = 0; i < P * e; i++)
      x[i] += h[i];
  }
  gsize n = P;
  if (a->avg_pool) {
    n = P / 2;
    for (gsize r = 0; r < n; r++)
      for (gsize i = 0; i < e; i++)
        x[r * e + i] = (x[2 * r * e + i] + x[(2 * r + 1) * e + i]) / 2;
  }
  ref_norm (&a->post_ln_w, &a->post_ln_b, x, n, e, a->eps, FALSE);
  /* Stacking: the zeros past row n are already there. */
  const gsize s = a->stack_factor, rows = (n + s - 1) / s;
  for (gsize i = n * e; i < rows * s * e; i++)
    x[i] = 0;
  double *out = g_new (double, rows * a->n_out);
  const gsize H = a->n_proj_hidden;
  if (a->type == LLM_MMPROJ_ULTRAVOX) {
    ref_norm (&a->norm_pre_w, &(LlmMmprojWeight) { NULL }, x, rows, s * e, 1e-6, TRUE);
    llm_test_ref_linear (&a->proj1_w, &a->proj1_b, x, rows, o);
    for (gsize r = 0; r < rows; r++)
      for (gsize i = 0; i < H; i++) {
        const double g = o[r * 2 * H + H + i];
        h[r * H + i] = o[r * 2 * H + i] * g / (1 + exp (-g));
      }
    ref_norm (&a->norm_mid_w, &(LlmMmprojWeight) { NULL }, h, rows, H, 1e-6, TRUE);
    llm_test_ref_linear (&a->proj2_w, &a->proj2_b, h, rows, out);
  } else if (a->type == LLM_MMPROJ_VOXTRAL) {
    llm_test_ref_linear (&a->proj1_w, &a->proj1_b, x, rows, o);
    for (gsize i = 0; i < rows * H; i++)
      o[i] = gelu (o[i]);
    llm_test_ref_linear (&a->proj2_w, &a->proj2_b, o, rows, out);
  } else {
    llm_test_ref_linear (&a->proj1_w, &a->proj1_b, x, rows, out);
  }
  *n_rows = rows;
  return out;
}

/* Log-mel-like values in Whisper's range, not a pattern the convolution
 * could cancel. */
static float *
test_mel (guint n_mel, gsize n_frames)
{
  float *mel = g_new (float, n_mel * n_frames);
  llm_test_rng_seed (11);
  for (gsize i = 0; i < n_mel * n_frames; i++)
    mel[i] = 0.4f + 0.6f * llm_test_rng_float ();
  return mel;
}

static void
check_encoder (const Shape *shape, gsize n_frames, gsize want_rows)
{
  g_autoptr (LlmMmproj) p = load (shape, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  g_autofree float *mel = test_mel (a->n_mel, n_frames);
  gsize rows_ref;
  g_autofree double *want = ref_encode (a, mel, n_frames, &rows_ref);
  ck_assert_uint_eq (rows_ref, want_rows);
  ck_assert_uint_eq (llm_mmproj_audio_n_tokens (a, n_frames), want_rows);
  const gsize n = want_rows * a->n_out;
  double max_ref = 0;
  for (gsize i = 0; i < n; i++)
    max_ref = MAX (max_ref, fabs (want[i]));
  ck_assert_double_gt (max_ref, 1e-4);
  const LlmCpuKernels *kernels[] = {
    llm_cpu_kernels (LLM_CPU_ISA_SCALAR), llm_cpu_kernels_best (),
  };
  g_autofree float *got = g_new (float, n);
  for (guint kk = 0; kk < G_N_ELEMENTS (kernels); kk++) {
    guint rows = 0;
    GError *error = NULL;
    ck_assert_msg (llm_audio_encode (p, kernels[kk], mel, n_frames, got, &rows, &error), "%s",
        error ? error->message : "");
    ck_assert_uint_eq (rows, want_rows);
    double worst = 0;
    for (gsize i = 0; i < n; i++)
      worst = MAX (worst, fabs (got[i] - want[i]));
    g_print ("%s, %" G_GSIZE_FORMAT " frames, %s kernels: %g off (largest value %g)\n",
        shape->type, n_frames, llm_cpu_kernels_name (kernels[kk]), worst, max_ref);
    /* Float sums, and F16 weights multiplying activations rounded to F16
     * as ggml rounds them: measured 4.0e-4 (ultravox), 1.2e-4 (qwen2a) and
     * 3.5e-4 (voxtral) of the largest value, either kernel set. */
    ck_assert_msg (worst <= 2e-3 * max_ref, "%s, %s kernels: %g off (largest value %g)",
        shape->type, llm_cpu_kernels_name (kernels[kk]), worst, max_ref);
  }
}

START_TEST (test_ultravox_encoder_matches_a_double_reference)
{
  /* 201 frames: 101 after the convolution, 13 rows of 8, the last padded
   * with 3 frames of zeros. */
  check_encoder (&ultravox, 201, 13);
}
END_TEST

START_TEST (test_qwen2a_encoder_matches_a_double_reference)
{
  /* 101 positions pool to 50; the odd one is dropped. */
  check_encoder (&qwen2a, 201, 50);
}
END_TEST

START_TEST (test_voxtral_encoder_matches_a_double_reference)
{
  check_encoder (&voxtral, 200, 25);
}
END_TEST

/* @shape's encoding of @n_frames frames on 1 and 2 threads, and the
 * 2-thread encoder again after a shorter chunk: the products split the
 * weights' rows and the norms and attention the rows of the chunk, so
 * every value is summed in one order whatever the thread count, and the
 * scratch reserved for the window carries nothing from one encode to the
 * next. */
static void
check_threads_agree (const Shape *shape, guint n_frames)
{
  g_autoptr (LlmMmproj) p = load (shape, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  g_autofree float *mel = test_mel (a->n_mel, n_frames);
  GError *error = NULL;
  g_autoptr (LlmAudioEncoder) one = llm_audio_encoder_new (p, 1, &error);
  ck_assert_msg (one != NULL, "%s", error ? error->message : "");
  g_autoptr (LlmAudioEncoder) two = llm_audio_encoder_new (p, 2, &error);
  ck_assert_msg (two != NULL, "%s", error ? error->message : "");
  ck_assert_int_eq (llm_audio_encoder_n_threads (one), 1);
  ck_assert_int_eq (llm_audio_encoder_n_threads (two), 2);
  ck_assert_uint_eq (llm_audio_encoder_n_out (one), a->n_out);
  ck_assert_uint_eq (llm_audio_encoder_max_rows (one), llm_mmproj_audio_n_tokens (a,
          a->n_frames_max));
  ck_assert (g_str_has_prefix (llm_audio_encoder_backend_name (one), "cpu/"));

  const guint want_rows = llm_mmproj_audio_n_tokens (a, n_frames);
  const gsize n = (gsize) want_rows * a->n_out;
  g_autofree float *a1 = g_new (float, n);
  g_autofree float *a2 = g_new (float, n);
  g_autofree float *again = g_new (float, n);
  g_autofree float *once = g_new (float, n);
  guint rows = 0;
  ck_assert (llm_audio_encoder_encode (one, mel, n_frames, a1, &rows, &error));
  ck_assert_uint_eq (rows, want_rows);
  ck_assert (llm_audio_encoder_encode (two, mel, n_frames, a2, &rows, &error));
  ck_assert_uint_eq (rows, want_rows);
  ck_assert_msg (memcmp (a1, a2, n * sizeof *a1) == 0, "%s: 1 and 2 threads differ",
      shape->type);
  /* The short chunk is the first 60 frames of the same spectrogram's
   * rows, read with its own stride. */
  g_autofree float *short_mel = g_new (float, (gsize) a->n_mel * 60);
  for (guint m = 0; m < a->n_mel; m++)
    memcpy (short_mel + m * 60, mel + (gsize) m * n_frames, 60 * sizeof (float));
  g_autofree float *short_out = g_new (float, (gsize) llm_mmproj_audio_n_tokens (a, 60)
      * a->n_out);
  ck_assert (llm_audio_encoder_encode (two, short_mel, 60, short_out, &rows, &error));
  ck_assert_uint_eq (rows, llm_mmproj_audio_n_tokens (a, 60));
  ck_assert (llm_audio_encoder_encode (two, mel, n_frames, again, &rows, &error));
  ck_assert_msg (memcmp (a1, again, n * sizeof *a1) == 0, "%s: a second encode differs",
      shape->type);
  /* The one-call form is a one-thread encoder of the best kernels. */
  ck_assert (llm_audio_encode (p, llm_cpu_kernels_best (), mel, n_frames, once, &rows,
          &error));
  ck_assert_msg (memcmp (a1, once, n * sizeof *a1) == 0, "%s: llm_audio_encode differs",
      shape->type);
}

START_TEST (test_one_and_two_threads_give_the_same_bits)
{
  check_threads_agree (&ultravox, 201);
  check_threads_agree (&qwen2a, 201);
  check_threads_agree (&voxtral, 200);
}
END_TEST

START_TEST (test_the_encoder_refuses_frame_counts_it_cannot_take)
{
  g_autoptr (LlmMmproj) p = load (&qwen2a, -1, NULL);
  g_autofree float *mel = test_mel (80, 3001);
  g_autofree float *out = g_new (float, 750 * 48);
  guint rows;
  GError *error = NULL;
  ck_assert (!llm_audio_encode (p, llm_cpu_kernels_best (), mel, 3001, out, &rows, &error));
  ck_assert (g_error_matches (error, LLM_AUDIO_ERROR, LLM_AUDIO_ERROR_INVALID));
  ck_assert_msg (strstr (error->message, "takes 1 to 3000") != NULL, "%s", error->message);
  g_clear_error (&error);
  ck_assert (!llm_audio_encode (p, llm_cpu_kernels_best (), mel, 2, out, &rows, &error));
  ck_assert_msg (strstr (error->message, "at least 3 for its pooling") != NULL, "%s",
      error->message);
  g_clear_error (&error);
  ck_assert (!llm_audio_encode (p, llm_cpu_kernels_best (), mel, 0, out, &rows, &error));
  g_clear_error (&error);
}
END_TEST

START_TEST (test_a_chunk_is_encoded_padded_or_from_its_own_frames)
{
  g_autoptr (LlmMmproj) p = load (&ultravox, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  ck_assert_uint_eq (llm_audio_chunk_frames (a, 16000, TRUE), 3000);
  ck_assert_uint_eq (llm_audio_chunk_frames (a, 16000, FALSE), 100);
  ck_assert_uint_eq (llm_audio_chunk_frames (a, 16001, FALSE), 101);
  ck_assert_uint_eq (llm_audio_chunk_frames (a, 10, FALSE), 4);
  ck_assert_uint_eq (llm_audio_chunk_frames (a, 480000, FALSE), 3000);
  ck_assert_uint_eq (llm_audio_chunk_frames (a, 480001, TRUE), 0);
  GError *error = NULL;
  g_autoptr (LlmAudioMel) mel = llm_audio_mel_new_for (a, &error);
  g_autofree float *pcm = test_signal (16000);
  g_autofree float *out = g_new (float, 188 * 48);
  guint rows;
  ck_assert (llm_audio_encode_pcm (p, llm_cpu_kernels_best (), mel, pcm, 16000, FALSE, out,
          &rows, &error));
  ck_assert_uint_eq (rows, 7);
  /* The same as the mel and the encoder one after the other. */
  g_autofree float *spec = g_new (float, 80 * 100);
  g_autofree float *want = g_new (float, 7 * 48);
  ck_assert (llm_audio_mel_compute (mel, pcm, 16000, 100, spec, &error));
  ck_assert (llm_audio_encode (p, llm_cpu_kernels_best (), spec, 100, want, &rows, &error));
  ck_assert (memcmp (out, want, 7 * 48 * sizeof (float)) == 0);
  ck_assert (llm_audio_encode_pcm (p, llm_cpu_kernels_best (), mel, pcm, 16000, TRUE, out,
          &rows, &error));
  ck_assert_uint_eq (rows, 188);
  ck_assert (!llm_audio_encode_pcm (p, llm_cpu_kernels_best (), mel, pcm, 480001, TRUE, out,
          &rows, &error));
  ck_assert_msg (strstr (error->message, "longer than the encoder's window of 3000 frames (30 s)"),
      "%s", error->message);
  g_clear_error (&error);
}
END_TEST

/* --- against llama.cpp --------------------------------------------------- */

/* The first 3 s of tests/data/media/jfk.wav (16 kHz mono PCM16) as floats
 * s / 32768, what mtmd's decoder gives and what the golden files were
 * made from. */
#define JFK_SAMPLES 48000

/* Little-endian fields of a WAV file, at any offset (a cast to a wider
 * pointer there is undefined where it is not aligned). */
static guint16
wav_u16 (const guint8 *p)
{
  return (guint16) (p[0] | p[1] << 8);
}

static guint32
wav_u32 (const guint8 *p)
{
  return (guint32) wav_u16 (p) | (guint32) wav_u16 (p + 2) << 16;
}

static float *
jfk_pcm (void)
{
  g_autofree char *path = llm_test_data_path ("media/jfk.wav");
  g_autoptr (GBytes) wav = llm_test_read_file (path);
  gsize size;
  const guint8 *b = g_bytes_get_data (wav, &size);
  ck_assert (size > 12 && memcmp (b, "RIFF", 4) == 0 && memcmp (b + 8, "WAVE", 4) == 0);
  gsize off = 12;
  const guint8 *data = NULL;
  gsize data_len = 0;
  while (off + 8 <= size) {
    const guint32 len = wav_u32 (b + off + 4);
    if (memcmp (b + off, "fmt ", 4) == 0) {
      /* PCM, 1 channel, 16000 Hz, 16 bits. */
      ck_assert (len >= 16 && off + 8 + len <= size);
      ck_assert_uint_eq (wav_u16 (b + off + 8), 1);
      ck_assert_uint_eq (wav_u16 (b + off + 10), 1);
      ck_assert_uint_eq (wav_u32 (b + off + 12), 16000);
      ck_assert_uint_eq (wav_u16 (b + off + 22), 16);
    } else if (memcmp (b + off, "data", 4) == 0) {
      data = b + off + 8;
      data_len = MIN (len, size - off - 8);
      break;
    }
    off += 8 + len + (len & 1);
  }
  ck_assert (data != NULL && data_len >= 2 * JFK_SAMPLES);
  float *pcm = g_new (float, JFK_SAMPLES);
  for (gsize i = 0; i < JFK_SAMPLES; i++)
    pcm[i] = (gint16) wav_u16 (data + 2 * i) / 32768.0f;
  return pcm;
}

static const float *
golden (const char *name, GBytes **keep, gsize *n)
{
  g_autofree char *rel = g_strdup_printf ("golden/%s", name);
  g_autofree char *path = llm_test_data_path (rel);
  *keep = llm_test_read_file (path);
  gsize size;
  const float *v = g_bytes_get_data (*keep, &size);
  ck_assert (size % sizeof (float) == 0);
  *n = size / sizeof (float);
  return v;
}

/* mtmd's 30 s window of the samples, as it encodes them. */
static float *
window_mel (const float *pcm, gsize n)
{
  GError *error = NULL;
  g_autoptr (LlmAudioMel) m = llm_audio_mel_new (80, 400, 160, 16000, &error);
  ck_assert (m != NULL);
  float *mel = g_new (float, 80 * 3000);
  ck_assert (llm_audio_mel_compute (m, pcm, n, 3000, mel, &error));
  return mel;
}

START_TEST (test_mel_matches_llama_cpp_for_jfk)
{
  /* Making the golden files (check_llama_cpp): nothing to compare yet. */
  if (g_getenv ("LLM_TEST_AUDIO_OUT"))
    return;
  g_autofree float *pcm = jfk_pcm ();
  g_autofree float *mel = window_mel (pcm, JFK_SAMPLES);
  g_autoptr (GBytes) keep = NULL;
  gsize n;
  /* The first frames of each of the 80 bins (mtmd-audio-embed). */
  const float *theirs = golden ("audio-mel-jfk.f32", &keep, &n);
  ck_assert (n % 80 == 0);
  const gsize frames = n / 80;
  ck_assert_uint_ge (frames, 300);
  double worst = 0;
  for (gsize b = 0; b < 80; b++)
    for (gsize t = 0; t < frames; t++)
      worst = MAX (worst, fabs (mel[b * 3000 + t] - theirs[b * frames + t]));
  g_print ("mel against llama.cpp: %g off over %" G_GSIZE_FORMAT " frames\n", worst, frames);
  /* Two float FFTs (ours, mtmd's own) and the log10 of their power:
   * measured 1.8e-5, on values that span about 2. */
  ck_assert_msg (worst <= 1e-4, "mel: %g off llama.cpp", worst);
}
END_TEST

/* Our embeddings of jfk's window against llama.cpp's for the same file
 * (tests/data/golden/audio-TYPE.f32: the first rows). With
 * LLM_TEST_AUDIO_OUT set, writes the file and the samples llama.cpp reads
 * there instead (tools/make-audio-golden.sh's first step). */
static void
check_llama_cpp (const Shape *shape, const char *name)
{
  const char *keep_dir = g_getenv ("LLM_TEST_AUDIO_OUT");
  GError *error = NULL;
  g_autofree float *pcm = jfk_pcm ();
  if (keep_dir) {
    g_autofree char *file = g_strdup_printf ("%s.gguf", name);
    g_autofree char *path = write_towers (NULL, shape, keep_dir, file);
    g_autofree char *samples = g_build_filename (keep_dir, "pcm.f32", NULL);
    ck_assert (g_file_set_contents (samples, (const char *) pcm, JFK_SAMPLES * sizeof (float),
            NULL));
    return;
  }
  g_autoptr (LlmMmproj) p = load (shape, -1, NULL);
  const LlmMmprojAudio *a = llm_mmproj_audio (p);
  g_autofree float *mel = window_mel (pcm, JFK_SAMPLES);
  const guint n_rows = llm_mmproj_audio_n_tokens (a, 3000);
  g_autofree float *ours = g_new (float, (gsize) n_rows * a->n_out);
  guint rows;
  ck_assert (llm_audio_encode (p, llm_cpu_kernels_best (), mel, 3000, ours, &rows, &error));
  g_autofree char *golden_name = g_strdup_printf ("audio-%s.f32", name);
  g_autoptr (GBytes) keep = NULL;
  gsize n;
  const float *theirs = golden (golden_name, &keep, &n);
  ck_assert (n % a->n_out == 0 && n / a->n_out <= rows && n >= 32 * a->n_out);
  double max_ref = 0, worst = 0;
  for (gsize i = 0; i < n; i++) {
    max_ref = MAX (max_ref, fabs (theirs[i]));
    worst = MAX (worst, fabs (ours[i] - theirs[i]));
  }
  g_print ("%s against llama.cpp: %g off over %" G_GSIZE_FORMAT " rows (largest value %g)\n",
      name, worst, n / a->n_out, max_ref);
  /* llama.cpp rounds the convolutions' inputs and every F16 product's
   * activations to F16 as we do, but its mel differs from ours by up to
   * 2.4e-5 (two FFTs) and its sums run in another order: measured 2.7e-4
   * (ultravox, whose RMS norms keep its values small) and 6.7e-5 (qwen2a)
   * of the largest value. */
  ck_assert_msg (worst <= 1e-3 * max_ref, "%s: %g off llama.cpp (largest value %g)", name,
      worst, max_ref);
}

START_TEST (test_encoders_match_llama_cpp_for_jfk)
{
  check_llama_cpp (&ultravox4, "ultravox");
  check_llama_cpp (&qwen2a, "qwen2a");
}
END_TEST

static Suite *
audio_suite (void)
{
  make_shapes ();
  Suite *s = suite_create ("audio-encoder");
  TCase *tc = tcase_create ("load");
  tcase_add_test (tc, test_ultravox_tower_loads_with_its_stacking);
  tcase_add_test (tc, test_qwen2a_tower_loads_with_its_pooling);
  tcase_add_test (tc, test_voxtral_tower_loads_with_its_stacking);
  tcase_add_test (tc, test_whisper_tiny_ultravox_shape_loads_and_encodes);
  tcase_add_test (tc, test_other_audio_projector_types_are_refused_by_name);
  tcase_add_test (tc, test_a_missing_or_misshapen_audio_tensor_is_named);
  tcase_add_test (tc, test_audio_sizes_that_do_not_fit_are_refused);
  tcase_add_test (tc, test_a_file_of_both_towers_gives_each);
  tcase_add_test (tc, test_an_audio_file_has_no_vision_tower);
  tcase_add_test (tc, test_a_language_model_is_not_an_audio_projector);
  suite_add_tcase (s, tc);
  tc = tcase_create ("kernels");
  tcase_add_test (tc, test_conv1d_rows_read_channel_and_time_major_input);
  tcase_add_test (tc, test_audio_activations_match_their_formulas);
  suite_add_tcase (s, tc);
  tc = tcase_create ("stream");
  tcase_add_test (tc, test_chunks_overlap_and_the_last_is_what_is_left);
  tcase_add_test (tc, test_levels_are_rms_in_dbfs);
  tcase_add_test (tc, test_resampling_mixes_to_mono_at_16_khz);
  suite_add_tcase (s, tc);
  tc = tcase_create ("mel");
  tcase_add_test (tc, test_dft_power_matches_a_double_dft);
  tcase_add_test (tc, test_mel_filterbank_is_slaneys);
  tcase_add_test (tc, test_mel_matches_a_double_reference);
  tcase_add_test (tc, test_mel_takes_short_audio_and_refuses_none);
  tcase_add_test (tc, test_mel_matches_llama_cpp_for_jfk);
  suite_add_tcase (s, tc);
  tc = tcase_create ("encode");
  tcase_set_timeout (tc, 600);
  tcase_add_test (tc, test_ultravox_encoder_matches_a_double_reference);
  tcase_add_test (tc, test_qwen2a_encoder_matches_a_double_reference);
  tcase_add_test (tc, test_voxtral_encoder_matches_a_double_reference);
  tcase_add_test (tc, test_the_encoder_refuses_frame_counts_it_cannot_take);
  tcase_add_test (tc, test_one_and_two_threads_give_the_same_bits);
  tcase_add_test (tc, test_a_chunk_is_encoded_padded_or_from_its_own_frames);
  tcase_add_test (tc, test_encoders_match_llama_cpp_for_jfk);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (audio_suite)
