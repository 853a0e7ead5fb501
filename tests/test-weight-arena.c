/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lib/weight-arena.h: prepared weights are handed out one after another
 * from chunks aligned to a huge page and advised into huge pages, each
 * aligned to 64 bytes and apart from the others; a chunk goes back when
 * the last of its allocations does. And a model's prepared matrices lie
 * in such chunks, in the order a forward pass reads them. */
#include <stdio.h>
#include <string.h>

#include "llm-check.h"
#include "backend.h"
#include "ggml-type.h"
#include "weight-arena.h"

#define HUGE_BYTES ((gsize) 2 << 20)

START_TEST (test_weight_arena_hands_out_aligned_disjoint_memory_in_order)
{
  LlmWeightArena *a = llm_weight_arena_new ();
  const gsize sizes[] = { 1, 64, 100, 4096, 300000, 1 << 20, 77 };
  guint8 *p[G_N_ELEMENTS (sizes)];
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++) {
    p[i] = llm_weight_arena_alloc (a, sizes[i]);
    ck_assert_ptr_nonnull (p[i]);
    ck_assert_uint_eq ((guintptr) p[i] % 64, 0);
    memset (p[i], (int) i + 1, sizes[i]);
    if (i == 0)
      ck_assert_uint_eq ((guintptr) p[0] % HUGE_BYTES, 0);
    else                      /* the next one, right after the last */
      ck_assert_ptr_eq (p[i], p[i - 1] + (sizes[i - 1] + 63) / 64 * 64);
  }
  /* Nothing written later overwrote an earlier allocation. */
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    for (gsize j = 0; j < sizes[i]; j++)
      ck_assert_uint_eq (p[i][j], i + 1);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 1);
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    llm_weight_arena_release (a, p[i]);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 0);
  llm_weight_arena_free (a);
}
END_TEST

START_TEST (test_weight_arena_returns_a_chunk_when_all_of_it_is_released)
{
  LlmWeightArena *a = llm_weight_arena_new ();
  /* More than a chunk: a chunk of its own, rounded to huge pages. */
  const gsize big = (gsize) 100 << 20;
  guint8 *small = llm_weight_arena_alloc (a, 1000);
  guint8 *large = llm_weight_arena_alloc (a, big);
  ck_assert_ptr_nonnull (small);
  ck_assert_ptr_nonnull (large);
  ck_assert_uint_eq ((guintptr) large % HUGE_BYTES, 0);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 2);
  large[0] = 1;
  large[big - 1] = 2;
  /* The large chunk is full: the next one starts a third. */
  guint8 *after = llm_weight_arena_alloc (a, 64);
  ck_assert_ptr_nonnull (after);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 3);
  llm_weight_arena_release (a, large);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 2);
  llm_weight_arena_release (a, after);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 1);
  llm_weight_arena_release (a, small);
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 0);
  /* An arena emptied hands out memory again. */
  guint8 *again = llm_weight_arena_alloc (a, 10);
  ck_assert_ptr_nonnull (again);
  llm_weight_arena_release (a, again);
  llm_weight_arena_free (a);
}
END_TEST

START_TEST (test_weight_arena_refuses_sizes_no_memory_can_hold)
{
  LlmWeightArena *a = llm_weight_arena_new ();
  ck_assert_ptr_null (llm_weight_arena_alloc (a, G_MAXSIZE));
  ck_assert_ptr_null (llm_weight_arena_alloc (a, G_MAXSIZE - 100));
  ck_assert_uint_eq (llm_weight_arena_n_chunks (a), 0);
  llm_weight_arena_free (a);
}
END_TEST

/* Whether the mapping of this process that holds @p was advised into
 * huge pages (VmFlags "hg" in /proc/self/smaps); FALSE if not found. */
static gboolean
advised_huge (const void *p)
{
  FILE *f = fopen ("/proc/self/smaps", "r");
  ck_assert_ptr_nonnull (f);
  char line[512];
  gboolean inside = FALSE, huge = FALSE;
  while (fgets (line, sizeof line, f) != NULL) {
    unsigned long start, end;
    if (sscanf (line, "%lx-%lx ", &start, &end) == 2 && strchr (line, '-') < strchr (line, ' '))
      inside = (guintptr) p >= start && (guintptr) p < end;
    else if (inside && g_str_has_prefix (line, "VmFlags:")) {
      huge = strstr (line, " hg") != NULL;
      break;
    }
  }
  fclose (f);
  return huge;
}

/* Matrices far under a huge page each (256 x 768 in Q4_0: 108 KiB) lie
 * one after another in the order a forward reads them, in memory advised
 * into huge pages. */
START_TEST (test_prepared_matrices_share_huge_page_chunks_in_reading_order)
{
  const LlmTestShape shape = { 256, 768, 3, 8, 4 };
  LlmModel *m = llm_test_random_llama (&shape, LLM_TYPE_Q4_0);
  GError *error = NULL;
  LlmBackend *be = llm_backend_cpu_new (LLM_CPU_KERNELS_BEST, 1, &error);
  ck_assert_msg (be != NULL, "%s", error ? error->message : "");
  LlmWeights *w = llm_weights_get (m, be, &error);
  ck_assert_msg (w != NULL, "%s", error ? error->message : "");

  if (w->layers[0].wq->data == w->layers[0].wq->host) {
    /* No prepared layout for Q4_0 on these kernels: nothing to check. */
    g_print ("SKIP: the %s kernels use Q4_0 in the file's layout\n",
        llm_backend_cpu_kernels_name (be));
  } else {
    const guint8 *last = NULL;
    const gboolean thp = g_file_test ("/sys/kernel/mm/transparent_hugepage/enabled",
        G_FILE_TEST_EXISTS);
    for (guint l = 0; l < shape.n_layer; l++) {
      const LlmLayerWeights *lw = &w->layers[l];
      const LlmWeight *order[] = { lw->wq, lw->wk, lw->wv, lw->wo, lw->w_gate, lw->w_up,
        lw->w_down };
      for (guint i = 0; i < G_N_ELEMENTS (order); i++) {
        const guint8 *d = order[i]->data;
        ck_assert_uint_eq ((guintptr) d % 64, 0);
        ck_assert_msg (last == NULL || d > last, "layer %u matrix %u before the one read ahead of it", l, i);
        /* Right behind one another, not each in an allocation of its own. */
        ck_assert_uint_lt ((guintptr) d - (guintptr) w->layers[0].wq->data, 4 * HUGE_BYTES);
        if (thp)
          ck_assert_msg (advised_huge (d), "layer %u matrix %u not advised into huge pages", l, i);
        last = d;
      }
    }
  }
  llm_weights_unref (m, w);
  llm_backend_unref (be);
  llm_model_unref (m);
}
END_TEST

static Suite *
weight_arena_suite (void)
{
  Suite *s = suite_create ("weight-arena");
  TCase *tc = tcase_create ("weight-arena");
  tcase_add_test (tc, test_weight_arena_hands_out_aligned_disjoint_memory_in_order);
  tcase_add_test (tc, test_weight_arena_returns_a_chunk_when_all_of_it_is_released);
  tcase_add_test (tc, test_weight_arena_refuses_sizes_no_memory_can_hold);
  tcase_add_test (tc, test_prepared_matrices_share_huge_page_chunks_in_reading_order);
  suite_add_tcase (s, tc);
  return s;
}

LLM_TEST_MAIN (weight_arena_suite)
