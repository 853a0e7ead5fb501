/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading mmproj files: the two projector types read today load with
 * their sizes, preprocessing and every tensor; everything else, and every
 * file whose tensors disagree with its sizes, is refused with an error
 * that names the projector type, key or tensor. The files are written
 * here with random weights, in llama.cpp's layout. */
#include <glib/gstdio.h>
#include <string.h>

#include "llm-check.h"
#include "ggml-type.h"
#include "gguf-writer.h"
#include "mmproj-writer.h"
#include "mmproj.h"
#include "vision-encoder.h"
#include "vision-reference.h"
#include "cpu/matmul.h"
#include <math.h>

/* A small tower: 32-pixel images of 8-pixel patches (16 patches), 64
 * wide, 2 layers, 4 heads. */
typedef LlmMmprojShape Shape;

static char *
write_mmproj (const Shape *s, const char *dir)
{
  char *path = g_build_filename (dir, "mmproj.gguf", NULL);
  GError *error = NULL;
  /* The same weights every time: the golden files were made from them. */
  ck_assert_msg (llm_mmproj_write_random (s, 20261201, path, &error), "%s",
      error ? error->message : "");
  return path;
}

static const Shape llava = { "mlp", 32, 8, 64, 128, 2, 4, 96, 0, TRUE, "", "" };
static const Shape smolvlm = { "idefics3", 32, 8, 64, 128, 2, 4, 96, 2, FALSE, "", "" };

/* Loads @s, expecting @code and a message holding @needle (or success
 * with @code -1). */
static LlmMmproj *
load (const Shape *s, gint code, const char *needle)
{
  GError *error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("gst-llm-mmproj-XXXXXX", &error);
  ck_assert (dir != NULL);
  g_autofree char *path = write_mmproj (s, dir);
  LlmMmproj *p = llm_mmproj_load (path, &error);
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

START_TEST (test_llava_mlp_projector_loads_with_its_sizes)
{
  g_autoptr (LlmMmproj) p = load (&llava, -1, NULL);
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  ck_assert_int_eq (v->type, LLM_MMPROJ_MLP);
  ck_assert_uint_eq (v->n_patches, 16);
  ck_assert_uint_eq (v->n_positions, 17);
  ck_assert_uint_eq (v->n_out, 96);
  ck_assert_uint_eq (v->n_tokens, 16);
  /* The penultimate layer: 1 of the 2. */
  ck_assert_uint_eq (v->n_layers_run, 1);
  ck_assert_float_eq (v->image_mean[2], 0.5f);
  ck_assert_ptr_nonnull (v->class_embd.t);
  ck_assert_ptr_nonnull (v->pre_ln_w.t);
  ck_assert_ptr_null (v->post_ln_w.t);
  ck_assert_ptr_nonnull (v->layers[1].down_b.t);
  ck_assert_ptr_nonnull (v->proj2_w.t);
  ck_assert_str_eq (llm_mmproj_type_name (v->type), "mlp");
  ck_assert (!v->gelu);
}
END_TEST

START_TEST (test_idefics3_projector_loads_with_its_pixel_shuffle)
{
  g_autoptr (LlmMmproj) p = load (&smolvlm, -1, NULL);
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  ck_assert_int_eq (v->type, LLM_MMPROJ_IDEFICS3);
  ck_assert_uint_eq (v->scale_factor, 2);
  ck_assert_uint_eq (v->n_positions, 16);
  /* 16 patches, 4 to a row after the shuffle. */
  ck_assert_uint_eq (v->n_tokens, 4);
  ck_assert_uint_eq (v->n_out, 96);
  ck_assert_ptr_null (v->class_embd.t);
  ck_assert_ptr_nonnull (v->post_ln_w.t);
  ck_assert (v->gelu);
}
END_TEST

START_TEST (test_other_projector_types_are_refused_by_name)
{
  Shape s = llava;
  s.type = "qwen2vl_merger";
  load (&s, LLM_MMPROJ_ERROR_UNSUPPORTED, "\"qwen2vl_merger\" is not supported");
  s.type = "mlp\033[2J";
  /* Bytes from the file are escaped in the message. */
  load (&s, LLM_MMPROJ_ERROR_UNSUPPORTED, "mlp\\x1b[2J");
}
END_TEST

START_TEST (test_a_missing_or_misshapen_tensor_is_named)
{
  Shape s = llava;
  s.drop = "v.blk.1.ffn_down.weight";
  load (&s, LLM_MMPROJ_ERROR_INVALID, "tensor v.blk.1.ffn_down.weight is missing");
  s = llava;
  s.widen = "v.blk.0.attn_k.weight";
  load (&s, LLM_MMPROJ_ERROR_INVALID, "v.blk.0.attn_k.weight has shape [64, 65]");
  s = llava;
  s.widen = "v.position_embd.weight";
  load (&s, LLM_MMPROJ_ERROR_INVALID, "v.position_embd.weight has shape [64, 18]");
  /* LLaVA's CLIP tower needs its class embedding. */
  s = llava;
  s.drop = "v.class_embd";
  load (&s, LLM_MMPROJ_ERROR_INVALID, "v.class_embd is missing");
  s = smolvlm;
  s.drop = "mm.model.fc.weight";
  load (&s, LLM_MMPROJ_ERROR_INVALID, "tensor mm.model.fc.weight is missing");
  /* A tower tensor one wider than the embedding. */
  s = smolvlm;
  s.widen = "v.patch_embd.weight";
  load (&s, LLM_MMPROJ_ERROR_INVALID, "v.patch_embd.weight has shape [8, 8, 3, 65]");
}
END_TEST

START_TEST (test_sizes_that_do_not_fit_are_refused)
{
  Shape s = llava;
  s.image = 36;
  load (&s, LLM_MMPROJ_ERROR_INVALID, "image size 36 is not a multiple of the patch size 8");
  s = llava;
  s.n_head = 5;
  load (&s, LLM_MMPROJ_ERROR_INVALID, "not a multiple of the 5 heads");
  s = smolvlm;
  s.scale = 3;
  load (&s, LLM_MMPROJ_ERROR_INVALID, "do not divide by the scale factor 3");
}
END_TEST

/* The file @s writes, with value @index of the float32 array @key set
 * to @value, loads with an error holding @needle. */
static void
load_with_float (const Shape *s, const char *key, guint index, float value, const char *needle)
{
  GError *error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("gst-llm-mmproj-XXXXXX", &error);
  ck_assert (dir != NULL);
  g_autofree char *path = write_mmproj (s, dir);
  g_autofree char *data = NULL;
  gsize len;
  ck_assert (g_file_get_contents (path, &data, &len, NULL));
  /* key, then its value type (array), element type (float32) and count */
  const gsize klen = strlen (key);
  gsize at = 0;
  while (at + klen <= len && memcmp (data + at, key, klen) != 0)
    at++;
  ck_assert_msg (at + klen <= len, "%s not in the file", key);
  const gsize off = at + klen + 4 + 4 + 8 + 4 * index;
  ck_assert (off + 4 <= len);
  memcpy (data + off, &value, 4);
  ck_assert (g_file_set_contents (path, data, (gssize) len, NULL));
  LlmMmproj *p = llm_mmproj_load (path, &error);
  g_unlink (path);
  g_rmdir (dir);
  ck_assert_msg (p == NULL, "loaded %s[%u] = %g", key, index, value);
  ck_assert_msg (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_INVALID)
      && strstr (error->message, needle), "\"%s\" not in: %s", needle, error->message);
  g_error_free (error);
}

/* Image statistics that are not finite numbers are refused by name: a NaN
 * mean made every embedding NaN (found by a hostile pass), an infinite
 * deviation every pixel 0. */
START_TEST (test_image_statistics_that_are_not_finite_are_refused)
{
  load_with_float (&llava, "clip.vision.image_mean", 1, NAN,
      "clip.vision.image_mean[1] is nan, not a finite number");
  load_with_float (&smolvlm, "clip.vision.image_mean", 0, -INFINITY,
      "clip.vision.image_mean[0] is -inf");
  load_with_float (&llava, "clip.vision.image_std", 2, INFINITY,
      "clip.vision.image_std[2] is inf");
  load_with_float (&llava, "clip.vision.image_std", 0, 0.0f, "image_std[0] is 0, not above 0");
}
END_TEST

START_TEST (test_a_language_model_is_not_a_projector)
{
  g_autofree char *path = llm_test_data_path ("models/stories260K.gguf");
  GError *error = NULL;
  ck_assert_ptr_null (llm_mmproj_load (path, &error));
  ck_assert (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_NOT_MMPROJ));
  ck_assert_msg (strstr (error->message, "architecture llama") != NULL, "%s", error->message);
  g_clear_error (&error);
  ck_assert_ptr_null (llm_mmproj_load ("/nonexistent/mmproj.gguf", &error));
  ck_assert (error != NULL);
  g_clear_error (&error);
}
END_TEST

/* The test image: a fixed pattern of every byte value. */
static guint8 *
test_image (gsize side)
{
  guint8 *rgb = g_new (guint8, side * side * 3);
  for (gsize i = 0; i < side * side * 3; i++)
    rgb[i] = (guint8) ((i * 7919) >> 3);
  return rgb;
}

/* Our embeddings against llama.cpp's mtmd for the same file and image
 * (tests/data/golden/mmproj-TYPE.f32, tools/make-mmproj-golden.sh). With
 * LLM_TEST_MMPROJ_OUT set, writes the file and the image llama.cpp reads
 * there instead (that script's first step). */
static void
check_llama_cpp (const Shape *shape)
{
  const char *keep = g_getenv ("LLM_TEST_MMPROJ_OUT");
  GError *error = NULL;
  g_autofree char *dir = keep ? g_strdup (keep) : g_dir_make_tmp ("gst-llm-mmproj-XXXXXX",
      &error);
  ck_assert (dir != NULL);
  g_autofree char *path = write_mmproj (shape, dir);
  g_autoptr (LlmMmproj) p = llm_mmproj_load (path, &error);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const gsize side = v->image_size, n = (gsize) v->n_tokens * v->n_out;
  g_autofree guint8 *rgb = test_image (side);
  if (keep) {
    g_autofree float *hwc = g_new (float, side * side * 3);
    for (gsize i = 0; i < side * side * 3; i++)
      hwc[i] = ((float) rgb[i] / 255.0f - v->image_mean[i % 3]) / v->image_std[i % 3];
    g_autofree char *name = g_strdup_printf ("%s.gguf", shape->type);
    g_autofree char *image = g_build_filename (dir, "image.f32", NULL);
    g_autofree char *kept = g_build_filename (dir, name, NULL);
    ck_assert (g_file_set_contents (image, (const char *) hwc, side * side * 3 * 4, NULL));
    ck_assert (g_rename (path, kept) == 0);
    return;
  }
  g_unlink (path);
  g_rmdir (dir);
  g_autofree char *rel = g_strdup_printf ("golden/mmproj-%s.f32", shape->type);
  g_autofree char *golden_path = llm_test_data_path (rel);
  g_autoptr (GBytes) golden = llm_test_read_file (golden_path);
  ck_assert_uint_eq (g_bytes_get_size (golden), n * sizeof (float));
  const float *theirs = g_bytes_get_data (golden, NULL);
  g_autofree float *ours = g_new (float, n);
  ck_assert (llm_vision_encode_as_llama_cpp (p, llm_cpu_kernels_best (), rgb, side * 3, ours,
          &error));
  double max_ref = 0, worst = 0;
  for (gsize i = 0; i < n; i++) {
    max_ref = MAX (max_ref, fabs (theirs[i]));
    worst = MAX (worst, fabs (ours[i] - theirs[i]));
  }
  g_print ("%s against llama.cpp: %g off (largest value %g)\n", shape->type, worst, max_ref);
  /* llama.cpp computes GELU through an F16 table and rounds activations
   * for its F16 products: measured 1.0e-4 (mlp) and 3.2e-5 (idefics3) of
   * the largest value. */
  ck_assert_msg (worst <= 5e-4 * max_ref, "%s: %g off llama.cpp (largest value %g)",
      shape->type, worst, max_ref);
}

START_TEST (test_encoders_match_llama_cpp)
{
  check_llama_cpp (&smolvlm);
  /* With its CLIP class-row defect applied (see vision-encoder.h). */
  check_llama_cpp (&llava);
}
END_TEST

static void
check_encoder (const Shape *shape)
{
  g_autoptr (LlmMmproj) p = load (shape, -1, NULL);
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const gsize s = v->image_size;
  g_autofree guint8 *rgb = test_image (s);
  g_autofree float *got = g_new (float, v->n_tokens * v->n_out);
  GError *error = NULL;
  const LlmCpuKernels *kernels[] = {
    llm_cpu_kernels (LLM_CPU_ISA_SCALAR), llm_cpu_kernels_best (),
  };
  g_autofree double *want = llm_test_vision_reference (v, rgb, s * 3);
  double max_ref = 0;
  for (gsize i = 0; i < v->n_tokens * v->n_out; i++)
    max_ref = MAX (max_ref, fabs (want[i]));
  ck_assert_double_gt (max_ref, 1e-3);
  for (guint kk = 0; kk < G_N_ELEMENTS (kernels); kk++) {
    ck_assert (llm_vision_encode (p, kernels[kk], rgb, s * 3, got, &error));
    double worst = 0;
    for (gsize i = 0; i < v->n_tokens * v->n_out; i++)
      worst = MAX (worst, fabs (got[i] - want[i]));
    g_print ("%s, %s kernels: %g off (largest value %g)\n", shape->type,
        llm_cpu_kernels_name (kernels[kk]), worst, max_ref);
    /* Float sums, and F16 weights multiplying activations the kernels may
     * round to F16 as ggml does. */
    ck_assert_msg (worst <= 1e-3 * max_ref, "%s, %s kernels: %g off (largest value %g)",
        shape->type, llm_cpu_kernels_name (kernels[kk]), worst, max_ref);
  }
}

START_TEST (test_llava_encoder_matches_a_double_reference)
{
  check_encoder (&llava);
}
END_TEST

START_TEST (test_smolvlm_encoder_matches_a_double_reference)
{
  check_encoder (&smolvlm);
}
END_TEST

/* An encoder kept for a stream of images gives every image the bits a
 * fresh one does, on any number of threads: products split by rows,
 * attention by queries, and nothing carried from one image to the next. */
START_TEST (test_encoder_gives_the_same_bits_on_any_thread_count_and_image)
{
  const Shape *shapes[] = { &llava, &smolvlm };
  for (guint si = 0; si < G_N_ELEMENTS (shapes); si++) {
    g_autoptr (LlmMmproj) p = load (shapes[si], -1, NULL);
    const LlmMmprojVision *v = llm_mmproj_vision (p);
    const gsize side = v->image_size, n = (gsize) v->n_tokens * v->n_out;
    g_autofree guint8 *rgb = test_image (side);
    g_autofree guint8 *other = test_image (side);
    for (gsize i = 0; i < side * side * 3; i++)
      other[i] = (guint8) (255 - other[i]);
    g_autofree float *once = g_new (float, n), *got = g_new (float, n);
    GError *error = NULL;
    ck_assert (llm_vision_encode (p, llm_cpu_kernels_best (), rgb, side * 3, once, &error));
    for (int threads = 1; threads <= 3; threads++) {
      g_autoptr (LlmVisionEncoder) enc = llm_vision_encoder_new (p, threads, &error);
      ck_assert_msg (enc != NULL, "%s", error ? error->message : "");
      ck_assert_int_eq (llm_vision_encoder_n_threads (enc), threads);
      ck_assert_uint_eq (llm_vision_encoder_n_tokens (enc), v->n_tokens);
      ck_assert_uint_eq (llm_vision_encoder_n_out (enc), v->n_out);
      ck_assert_uint_eq (llm_vision_encoder_image_size (enc), side);
      ck_assert (llm_vision_encoder_encode (enc, other, side * 3, got, &error));
      ck_assert (llm_vision_encoder_encode (enc, rgb, side * 3, got, &error));
      ck_assert_msg (memcmp (got, once, n * sizeof *got) == 0, "%s on %d threads",
          shapes[si]->type, threads);
    }
  }
}
END_TEST

/* Rows of a stride wider than the image read the same pixels. */
START_TEST (test_encoder_reads_rows_a_stride_apart)
{
  g_autoptr (LlmMmproj) p = load (&smolvlm, -1, NULL);
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const gsize side = v->image_size, n = (gsize) v->n_tokens * v->n_out, stride = side * 3 + 5;
  g_autofree guint8 *rgb = test_image (side);
  g_autofree guint8 *wide = g_new0 (guint8, side * stride);
  for (gsize y = 0; y < side; y++)
    memcpy (wide + y * stride, rgb + y * side * 3, side * 3);
  g_autofree float *a = g_new (float, n), *b = g_new (float, n);
  GError *error = NULL;
  g_autoptr (LlmVisionEncoder) enc = llm_vision_encoder_new (p, 2, &error);
  ck_assert (enc != NULL);
  ck_assert (llm_vision_encoder_encode (enc, rgb, side * 3, a, &error));
  ck_assert (llm_vision_encoder_encode (enc, wide, stride, b, &error));
  ck_assert (memcmp (a, b, n * sizeof *a) == 0);
}
END_TEST

/* Token merging (ToMe) in the tower: none at ratio 1, the same bits; at
 * 0.5 the tiny CLIP tower's 16 image rows leave 8 after its one layer.
 * Merging comes after the layer, before the per-token projector, so an
 * image row left alone gives exactly the unmerged tower's output for it,
 * and a merged pair gives nearly the mean of the pair's outputs (the
 * projector is nearly linear at these small weights: within 0.3 of the
 * pair's distance, measured 0.003-0.19). A pixel-shuffle
 * tower refuses it. */
START_TEST (test_encoder_merges_tokens_between_layers)
{
  g_autoptr (LlmMmproj) p = load (&llava, -1, NULL);
  const LlmMmprojVision *v = llm_mmproj_vision (p);
  const gsize side = v->image_size, w = v->n_out;
  g_autofree guint8 *rgb = test_image (side);
  GError *error = NULL;
  g_autoptr (LlmVisionEncoder) plain = llm_vision_encoder_new (p, 2, &error);
  g_autoptr (LlmVisionEncoder) merged = llm_vision_encoder_new (p, 2, &error);
  g_autofree float *all = g_new (float, v->n_tokens * w), *got = g_new (float, v->n_tokens * w);
  ck_assert (llm_vision_encoder_encode (plain, rgb, side * 3, all, &error));
  ck_assert (llm_vision_encoder_set_merge (merged, 1.0, &error));
  ck_assert (llm_vision_encoder_encode (merged, rgb, side * 3, got, &error));
  ck_assert (memcmp (all, got, v->n_tokens * w * sizeof (float)) == 0);

  ck_assert (llm_vision_encoder_set_merge (merged, 0.5, &error));
  ck_assert_uint_eq (llm_vision_encoder_n_tokens (merged), 8);
  ck_assert (llm_vision_encoder_encode (merged, rgb, side * 3, got, &error));
  guint alone = 0, pairs = 0;
  for (guint r = 0; r < 8; r++) {
    const float *m = got + r * w;
    gboolean exact = FALSE;
    for (guint i = 0; i < v->n_tokens && !exact; i++)
      exact = memcmp (m, all + i * w, w * sizeof (float)) == 0;
    if (exact) {
      alone++;
      continue;
    }
    /* The closest mean of two unmerged outputs, against their distance. */
    double best = INFINITY, spread = 0;
    for (guint i = 0; i < v->n_tokens; i++)
      for (guint j = i + 1; j < v->n_tokens; j++) {
        double d = 0, s2 = 0;
        for (gsize k = 0; k < w; k++) {
          const double mean = 0.5 * ((double) all[i * w + k] + all[j * w + k]);
          d += (m[k] - mean) * (m[k] - mean);
          s2 += (all[i * w + k] - all[j * w + k]) * (double) (all[i * w + k] - all[j * w + k]);
        }
        if (d < best) {
          best = d;
          spread = s2;
        }
      }
    ck_assert_msg (sqrt (best) < 0.3 * sqrt (spread), "row %u: %g from the nearest pair mean, "
        "whose rows are %g apart", r, sqrt (best), sqrt (spread));
    pairs++;
  }
  ck_assert_uint_eq (alone + pairs, 8);
  ck_assert_uint_ge (pairs, 4);

  g_autoptr (LlmMmproj) s = load (&smolvlm, -1, NULL);
  g_autoptr (LlmVisionEncoder) shuffled = llm_vision_encoder_new (s, 1, &error);
  ck_assert (!llm_vision_encoder_set_merge (shuffled, 0.5, &error));
  ck_assert (g_error_matches (error, LLM_MMPROJ_ERROR, LLM_MMPROJ_ERROR_UNSUPPORTED));
  g_clear_error (&error);
}
END_TEST

static Suite *
mmproj_suite (void)
{
  Suite *s = suite_create ("mmproj");
  TCase *tc = tcase_create ("load");
  tcase_add_test (tc, test_llava_mlp_projector_loads_with_its_sizes);
  tcase_add_test (tc, test_idefics3_projector_loads_with_its_pixel_shuffle);
  tcase_add_test (tc, test_other_projector_types_are_refused_by_name);
  tcase_add_test (tc, test_a_missing_or_misshapen_tensor_is_named);
  tcase_add_test (tc, test_sizes_that_do_not_fit_are_refused);
  tcase_add_test (tc, test_image_statistics_that_are_not_finite_are_refused);
  tcase_add_test (tc, test_a_language_model_is_not_a_projector);
  tcase_add_test (tc, test_llava_encoder_matches_a_double_reference);
  tcase_add_test (tc, test_smolvlm_encoder_matches_a_double_reference);
  tcase_add_test (tc, test_encoders_match_llama_cpp);
  tcase_add_test (tc, test_encoder_gives_the_same_bits_on_any_thread_count_and_image);
  tcase_add_test (tc, test_encoder_reads_rows_a_stride_apart);
  tcase_add_test (tc, test_encoder_merges_tokens_between_layers);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (mmproj_suite)
