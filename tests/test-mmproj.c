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
#include "mmproj.h"

/* A small tower: 32-pixel images of 8-pixel patches (16 patches), 64
 * wide, 2 layers, 4 heads. */
typedef struct {
  const char *type;           /* clip.projector_type */
  guint image, patch, n_embd, n_ff, n_layer, n_head, n_out, scale;
  gboolean class_embd;
  /* What to spoil, by tensor name ("" none): left out, or one bigger. */
  const char *drop, *widen;
} Shape;

static void
add_tensor (LlmGgufWriter *w, const Shape *s, const char *name, guint n_dims, guint64 ne0,
    guint64 ne1, guint64 ne2, guint64 ne3, guint32 type)
{
  if (strcmp (name, s->drop) == 0)
    return;
  guint64 ne[4] = { ne0, ne1, ne2, ne3 };
  if (strcmp (name, s->widen) == 0)
    ne[n_dims - 1]++;
  guint64 n = 1;
  for (guint d = 0; d < n_dims; d++)
    n *= ne[d];
  g_autofree float *v = g_new (float, n);
  for (guint64 i = 0; i < n; i++)
    v[i] = llm_test_rng_float () * 0.05f;
  GError *error = NULL;
  ck_assert_msg (llm_gguf_writer_add_tensor_from_f32 (w, name, type, n_dims, ne, v, &error),
      "%s: %s", name, error ? error->message : "");
}

static char *
write_mmproj (const Shape *s, const char *dir)
{
  g_autoptr (LlmGgufWriter) w = llm_gguf_writer_new ();
  llm_gguf_writer_add_string (w, "general.architecture", "clip");
  llm_gguf_writer_add_bool (w, "clip.has_vision_encoder", TRUE);
  llm_gguf_writer_add_string (w, "clip.projector_type", s->type);
  llm_gguf_writer_add_uint32 (w, "clip.vision.image_size", s->image);
  llm_gguf_writer_add_uint32 (w, "clip.vision.patch_size", s->patch);
  llm_gguf_writer_add_uint32 (w, "clip.vision.embedding_length", s->n_embd);
  llm_gguf_writer_add_uint32 (w, "clip.vision.feed_forward_length", s->n_ff);
  llm_gguf_writer_add_uint32 (w, "clip.vision.block_count", s->n_layer);
  llm_gguf_writer_add_uint32 (w, "clip.vision.attention.head_count", s->n_head);
  llm_gguf_writer_add_float32 (w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
  llm_gguf_writer_add_uint32 (w, "clip.vision.projection_dim", s->n_out);
  const float mean[3] = { 0.5f, 0.5f, 0.5f }, std[3] = { 0.5f, 0.5f, 0.5f };
  llm_gguf_writer_add_array (w, "clip.vision.image_mean", LLM_GGUF_FLOAT32, mean, 3);
  llm_gguf_writer_add_array (w, "clip.vision.image_std", LLM_GGUF_FLOAT32, std, 3);
  if (s->scale > 0)
    llm_gguf_writer_add_uint32 (w, "clip.vision.projector.scale_factor", s->scale);

  const guint e = s->n_embd, side = s->image / s->patch, n_pos = side * side + s->class_embd;
  add_tensor (w, s, "v.patch_embd.weight", 4, s->patch, s->patch, 3, e, LLM_TYPE_F16);
  add_tensor (w, s, "v.patch_embd.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  if (s->class_embd) {
    add_tensor (w, s, "v.class_embd", 1, e, 1, 1, 1, LLM_TYPE_F32);
    add_tensor (w, s, "v.pre_ln.weight", 1, e, 1, 1, 1, LLM_TYPE_F32);
    add_tensor (w, s, "v.pre_ln.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  } else {
    add_tensor (w, s, "v.post_ln.weight", 1, e, 1, 1, 1, LLM_TYPE_F32);
    add_tensor (w, s, "v.post_ln.bias", 1, e, 1, 1, 1, LLM_TYPE_F32);
  }
  add_tensor (w, s, "v.position_embd.weight", 2, e, n_pos, 1, 1, LLM_TYPE_F32);
  for (guint l = 0; l < s->n_layer; l++) {
    static const char *const square[] = { "attn_q", "attn_k", "attn_v", "attn_out" };
    char name[64];
#define T(fmt, ...) (g_snprintf (name, sizeof name, fmt, __VA_ARGS__), name)
    for (guint i = 0; i < G_N_ELEMENTS (square); i++) {
      add_tensor (w, s, T ("v.blk.%u.%s.weight", l, square[i]), 2, e, e, 1, 1, LLM_TYPE_F16);
      add_tensor (w, s, T ("v.blk.%u.%s.bias", l, square[i]), 1, e, 1, 1, 1, LLM_TYPE_F32);
    }
    for (guint n = 1; n <= 2; n++) {
      add_tensor (w, s, T ("v.blk.%u.ln%u.weight", l, n), 1, e, 1, 1, 1, LLM_TYPE_F32);
      add_tensor (w, s, T ("v.blk.%u.ln%u.bias", l, n), 1, e, 1, 1, 1, LLM_TYPE_F32);
    }
    add_tensor (w, s, T ("v.blk.%u.ffn_up.weight", l), 2, e, s->n_ff, 1, 1, LLM_TYPE_F16);
    add_tensor (w, s, T ("v.blk.%u.ffn_up.bias", l), 1, s->n_ff, 1, 1, 1, LLM_TYPE_F32);
    add_tensor (w, s, T ("v.blk.%u.ffn_down.weight", l), 2, s->n_ff, e, 1, 1, LLM_TYPE_F16);
    add_tensor (w, s, T ("v.blk.%u.ffn_down.bias", l), 1, e, 1, 1, 1, LLM_TYPE_F32);
#undef T
  }
  if (s->scale > 0) {
    add_tensor (w, s, "mm.model.fc.weight", 2, e * s->scale * s->scale, s->n_out, 1, 1,
        LLM_TYPE_F16);
  } else {
    add_tensor (w, s, "mm.0.weight", 2, e, s->n_out, 1, 1, LLM_TYPE_F16);
    add_tensor (w, s, "mm.0.bias", 1, s->n_out, 1, 1, 1, LLM_TYPE_F32);
    add_tensor (w, s, "mm.2.weight", 2, s->n_out, s->n_out, 1, 1, LLM_TYPE_F16);
    add_tensor (w, s, "mm.2.bias", 1, s->n_out, 1, 1, 1, LLM_TYPE_F32);
  }
  char *path = g_build_filename (dir, "mmproj.gguf", NULL);
  GError *error = NULL;
  ck_assert_msg (llm_gguf_writer_write_file (w, path, &error), "%s", error ? error->message : "");
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
  ck_assert_uint_eq (v->feature_layer, 1);
  ck_assert_float_eq (v->image_mean[2], 0.5f);
  ck_assert_ptr_nonnull (v->class_embd.t);
  ck_assert_ptr_nonnull (v->pre_ln_w.t);
  ck_assert_ptr_null (v->post_ln_w.t);
  ck_assert_ptr_nonnull (v->layers[1].down_b.t);
  ck_assert_ptr_nonnull (v->proj2_w.t);
  ck_assert_str_eq (llm_mmproj_type_name (v->type), "mlp");
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
  tcase_add_test (tc, test_a_language_model_is_not_a_projector);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (mmproj_suite)
