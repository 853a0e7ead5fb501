/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* LlmBatchRow beyond plain tokens: rows that carry an embedding instead
 * of a token id (a media token, or text embedded by the caller) and rows
 * whose position is not their cache slot. An embedding row holding a
 * token's own embedding evaluates as that token does, bit for bit, in any
 * mix with token rows and other sequences; a row's position is what
 * rotates its key; rows that do not make a batch fail with the sequence
 * they belong to and leave the others evaluated. */
#include <math.h>
#include <string.h>

#include "llm-check.h"
#include "engine.h"
#include "cpu/ops.h"
#include "model-private.h"

/* F32, Q8_0 and a qwen2 (QKV biases, NeoX RoPE): the embedding lookup and
 * RoPE pairing differ between them. */
static const char *const model_names[] = {
  "stories260K.gguf", "TinyStories-656K-Q8_0.gguf", "random-qwen2-f32.gguf",
};

#define PROMPT 12
#define STEPS 4
/* Where the shifted sequences start: well past any prompt here, and not
 * a multiple of the 64-position KV block. */
#define FAR 100

static const LlmKvConfig kv_f16 = {
  .type = LLM_KV_F16, .policy = LLM_KV_POLICY_FULL, .context_length = 256,
};
/* Keys read back exactly as they were written. */
static const LlmKvConfig kv_f32 = {
  .type = LLM_KV_F32, .policy = LLM_KV_POLICY_FULL, .context_length = 256,
};

static void
eval_ok (LlmEngine *e, const LlmBatchRow *rows, guint n, float *logits)
{
  GError *error = NULL;
  ck_assert_msg (llm_engine_eval (e, rows, n, logits, &error), "%s",
      error ? error->message : "");
}

/* Sequence @i's prompt, @n ids, different for every @i. */
static void
prompt_ids (guint i, guint n, guint n_vocab, gint32 *ids)
{
  for (guint k = 0; k < n; k++)
    ids[k] = (gint32) ((5 + 29 * k + 83 * i + k * k * i) % n_vocab);
}

/* Every id's embedding row, n_vocab x n_embd. */
static float *
embedding_table (const LlmModel *m)
{
  float *t = g_new (float, (gsize) m->hp.n_vocab * m->hp.n_embd);
  for (guint v = 0; v < m->hp.n_vocab; v++)
    llm_model_token_embedding (m, v, t + (gsize) v * m->hp.n_embd);
  return t;
}

/* A row of @seq at @pos: token @id, or with @table its embedding row and
 * a token field the engine must not look at. */
static LlmBatchRow
row (LlmSeq *seq, gint32 id, const float *table, guint n_embd, guint32 pos, gboolean logits)
{
  if (table == NULL)
    return (LlmBatchRow) { seq, id, NULL, pos, logits };
  return (LlmBatchRow) { seq, -1, table + (gsize) id * n_embd, pos, logits };
}

static void
assert_logits_equal (const float *got, const float *want, guint n_vocab, const char *what)
{
  for (guint v = 0; v < n_vocab; v++)
    ck_assert_msg (got[v] == want[v], "%s: logit %u is %.9g, want %.9g", what, v, got[v],
        want[v]);
}

/* --- embedding rows ------------------------------------------------- */

/* A prompt fed as embedding rows, then greedy steps fed the same way:
 * every row's logits equal those of the token rows. */
START_TEST (test_embedding_rows_give_the_logits_of_their_tokens)
{
  g_autoptr (LlmModel) m = llm_test_load_model (model_names[_i]);
  const guint n_vocab = m->hp.n_vocab, n_embd = m->hp.n_embd;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autofree float *table = embedding_table (m);
  g_autofree float *want = g_new (float, (gsize) (PROMPT + STEPS) * n_vocab);
  g_autofree float *got = g_new (float, (gsize) (PROMPT + STEPS) * n_vocab);
  gint32 ids[PROMPT + STEPS];
  prompt_ids (0, PROMPT, n_vocab, ids);

  for (int pass = 0; pass < 2; pass++) {
    const float *emb = pass == 0 ? NULL : table;
    float *out = pass == 0 ? want : got;
    g_autoptr (LlmSeq) seq = llm_test_new_seq (e, &kv_f16);
    LlmBatchRow rows[PROMPT];
    for (guint k = 0; k < PROMPT; k++)
      rows[k] = row (seq, ids[k], emb, n_embd, k, TRUE);
    eval_ok (e, rows, PROMPT, out);
    for (guint s = 0; s < STEPS; s++) {
      const guint k = PROMPT + s;
      /* the embedding pass follows the token pass's ids, so a
       * difference shows as a logit, not as a different path */
      if (pass == 0)
        ids[k] = (gint32) llm_test_argmax (out + (gsize) (k - 1) * n_vocab, n_vocab);
      LlmBatchRow r = row (seq, ids[k], emb, n_embd, llm_seq_pos_next (seq), TRUE);
      eval_ok (e, &r, 1, out + (gsize) k * n_vocab);
    }
  }
  for (guint k = 0; k < PROMPT + STEPS; k++) {
    g_autofree char *what = g_strdup_printf ("%s row %u", model_names[_i], k);
    assert_logits_equal (got + (gsize) k * n_vocab, want + (gsize) k * n_vocab, n_vocab, what);
  }

  /* The rows' values are what counts: another token's row in the last
   * place moves that row's logits. */
  g_autoptr (LlmSeq) seq = llm_test_new_seq (e, &kv_f16);
  LlmBatchRow rows[PROMPT];
  for (guint k = 0; k < PROMPT; k++)
    rows[k] = row (seq, k + 1 < PROMPT ? ids[k] : (ids[k] + 1) % (gint32) n_vocab, table,
        n_embd, k, k + 1 == PROMPT);
  eval_ok (e, rows, PROMPT, got);
  ck_assert_msg (memcmp (got, want + (gsize) (PROMPT - 1) * n_vocab, n_vocab * sizeof (float)),
      "%s: another embedding row gave the same logits", model_names[_i]);
}
END_TEST

#define N_SEQS 4

/* How sequence i's rows are fed in the mixed batch: 0 tokens, 1
 * embeddings, 2 alternating, 3 embeddings for the first half. */
static gboolean
fed_as_embedding (guint i, guint k, guint n)
{
  switch (i) {
    case 0: return FALSE;
    case 1: return TRUE;
    case 2: return k % 2 == 1;
    default: return k < n / 2;
  }
}

/* Four sequences of different lengths in one batch, each fed its own mix
 * of token and embedding rows, then one decode step of all four with the
 * mix turned around: every row's logits equal the sequence's alone on
 * token rows. */
START_TEST (test_mixed_token_and_embedding_rows_of_several_sequences_equal_each_alone)
{
  g_autoptr (LlmModel) m = llm_test_load_model (model_names[_i]);
  const guint n_vocab = m->hp.n_vocab, n_embd = m->hp.n_embd;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autofree float *table = embedding_table (m);
  guint len[N_SEQS], total = 0;
  gint32 ids[N_SEQS][PROMPT + 1];
  float *alone[N_SEQS];
  for (guint i = 0; i < N_SEQS; i++) {
    len[i] = PROMPT - 3 * i;
    total += len[i];
    prompt_ids (i + 1, len[i], n_vocab, ids[i]);
    alone[i] = g_new (float, (gsize) (len[i] + 1) * n_vocab);
    g_autoptr (LlmSeq) s = llm_test_new_seq (e, &kv_f16);
    GError *error = NULL;
    ck_assert (llm_seq_eval_tokens (s, ids[i], len[i], alone[i], TRUE, &error));
    const float *last = alone[i] + (gsize) (len[i] - 1) * n_vocab;
    ids[i][len[i]] = (gint32) llm_test_argmax (last, n_vocab);
    ck_assert (llm_seq_eval_tokens (s, &ids[i][len[i]], 1, alone[i] + (gsize) len[i] * n_vocab,
        FALSE, &error));
  }

  LlmSeq *seqs[N_SEQS];
  g_autofree LlmBatchRow *rows = g_new (LlmBatchRow, total);
  g_autofree float *got = g_new (float, (gsize) total * n_vocab);
  guint n = 0;
  for (guint i = 0; i < N_SEQS; i++) {
    seqs[i] = llm_test_new_seq (e, &kv_f16);
    for (guint k = 0; k < len[i]; k++)
      rows[n++] = row (seqs[i], ids[i][k], fed_as_embedding (i, k, len[i]) ? table : NULL,
          n_embd, k, TRUE);
  }
  eval_ok (e, rows, n, got);
  n = 0;
  for (guint i = 0; i < N_SEQS; i++) {
    for (guint k = 0; k < len[i]; k++, n++) {
      g_autofree char *what = g_strdup_printf ("%s seq %u row %u", model_names[_i], i, k);
      assert_logits_equal (got + (gsize) n * n_vocab, alone[i] + (gsize) k * n_vocab, n_vocab,
          what);
    }
  }

  for (guint i = 0; i < N_SEQS; i++)
    rows[i] = row (seqs[i], ids[i][len[i]], fed_as_embedding (i, 0, 2) ? NULL : table, n_embd,
        llm_seq_pos_next (seqs[i]), TRUE);
  eval_ok (e, rows, N_SEQS, got);
  for (guint i = 0; i < N_SEQS; i++) {
    g_autofree char *what = g_strdup_printf ("%s seq %u step", model_names[_i], i);
    assert_logits_equal (got + (gsize) i * n_vocab, alone[i] + (gsize) len[i] * n_vocab,
        n_vocab, what);
    llm_seq_free (seqs[i]);
    g_free (alone[i]);
  }
}
END_TEST

/* Media embeddings between two runs of text (what an image encoder's
 * projector hands over): they take positions like tokens, and the text
 * after them continues at the position after the last of them. Fed in
 * one call or in three (text, image, text) the logits are the same. */
START_TEST (test_an_image_of_embedding_rows_takes_positions_between_text)
{
  enum { TEXT = 5, IMAGE = 7, AFTER = 4, ALL = TEXT + IMAGE + AFTER };
  g_autoptr (LlmModel) m = llm_test_load_model (model_names[_i]);
  const guint n_vocab = m->hp.n_vocab, n_embd = m->hp.n_embd;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  /* Image rows are no token's: values of the embeddings' own scale. */
  g_autofree float *table = embedding_table (m);
  g_autofree float *image = g_new (float, (gsize) IMAGE * n_embd);
  for (gsize j = 0; j < (gsize) IMAGE * n_embd; j++)
    image[j] = table[(j * 7919) % ((gsize) n_vocab * n_embd)] * 0.5f
        + table[(j * 104729 + 13) % ((gsize) n_vocab * n_embd)] * 0.5f;
  gint32 text[TEXT + AFTER];
  prompt_ids (7, TEXT + AFTER, n_vocab, text);

  g_autofree float *one_call = g_new (float, (gsize) ALL * n_vocab);
  g_autofree float *three_calls = g_new (float, (gsize) ALL * n_vocab);
  LlmBatchRow rows[ALL];
  g_autoptr (LlmSeq) a = llm_test_new_seq (e, &kv_f16);
  for (guint k = 0; k < ALL; k++) {
    if (k < TEXT)
      rows[k] = (LlmBatchRow) { a, text[k], NULL, k, TRUE };
    else if (k < TEXT + IMAGE)
      rows[k] = (LlmBatchRow) { a, -1, image + (gsize) (k - TEXT) * n_embd, k, TRUE };
    else
      rows[k] = (LlmBatchRow) { a, text[k - IMAGE], NULL, k, TRUE };
  }
  eval_ok (e, rows, ALL, one_call);
  ck_assert_uint_eq (llm_seq_pos_next (a), ALL);

  g_autoptr (LlmSeq) b = llm_test_new_seq (e, &kv_f16);
  const guint cuts[] = { 0, TEXT, TEXT + IMAGE, ALL };
  for (guint c = 0; c + 1 < G_N_ELEMENTS (cuts); c++) {
    for (guint k = cuts[c]; k < cuts[c + 1]; k++)
      rows[k].seq = b;
    ck_assert_uint_eq (llm_seq_pos_next (b), cuts[c]);
    eval_ok (e, rows + cuts[c], cuts[c + 1] - cuts[c], three_calls + (gsize) cuts[c] * n_vocab);
  }
  for (guint k = 0; k < ALL; k++) {
    g_autofree char *what = g_strdup_printf ("%s row %u", model_names[_i], k);
    assert_logits_equal (three_calls + (gsize) k * n_vocab, one_call + (gsize) k * n_vocab,
        n_vocab, what);
  }
  /* The image is seen: the text after it reads otherwise than after the
   * text alone. */
  g_autoptr (LlmSeq) c = llm_test_new_seq (e, &kv_f16);
  g_autofree float *no_image = g_new (float, n_vocab);
  GError *error = NULL;
  ck_assert (llm_seq_eval_tokens (c, text, TEXT + AFTER, no_image, FALSE, &error));
  ck_assert (memcmp (no_image, one_call + (gsize) (ALL - 1) * n_vocab, n_vocab * sizeof (float)));
}
END_TEST

/* --- positions ------------------------------------------------------ */

/* Rows that name the positions llm_seq_eval_tokens would give them are
 * the same rows: prompt and steps, bit for bit. */
START_TEST (test_explicit_default_positions_equal_implicit_ones)
{
  g_autoptr (LlmModel) m = llm_test_load_model (model_names[_i]);
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  gint32 ids[PROMPT + STEPS];
  prompt_ids (2, PROMPT, n_vocab, ids);
  g_autofree float *want = g_new (float, (gsize) (PROMPT + STEPS) * n_vocab);
  g_autofree float *got = g_new (float, (gsize) (PROMPT + STEPS) * n_vocab);
  GError *error = NULL;

  g_autoptr (LlmSeq) implicit = llm_test_new_seq (e, &kv_f16);
  ck_assert (llm_seq_eval_tokens (implicit, ids, PROMPT, want, TRUE, &error));
  for (guint k = PROMPT; k < PROMPT + STEPS; k++) {
    ids[k] = (gint32) llm_test_argmax (want + (gsize) (k - 1) * n_vocab, n_vocab);
    ck_assert (llm_seq_eval_tokens (implicit, &ids[k], 1, want + (gsize) k * n_vocab, FALSE,
        &error));
  }

  g_autoptr (LlmSeq) explicit = llm_test_new_seq (e, &kv_f16);
  LlmBatchRow rows[PROMPT];
  for (guint k = 0; k < PROMPT; k++)
    rows[k] = (LlmBatchRow) { explicit, ids[k], NULL, k, TRUE };
  eval_ok (e, rows, PROMPT, got);
  for (guint k = PROMPT; k < PROMPT + STEPS; k++) {
    LlmBatchRow r = { explicit, ids[k], NULL, k, TRUE };
    eval_ok (e, &r, 1, got + (gsize) k * n_vocab);
  }
  ck_assert_mem_eq (got, want, (gsize) (PROMPT + STEPS) * n_vocab * sizeof (float));
  ck_assert_uint_eq (llm_seq_pos_next (explicit), PROMPT + STEPS);
}
END_TEST

/* A sequence whose first row is at FAR: slot k holds position FAR + k,
 * and the next row must be at FAR + n, not at its slot n. */
START_TEST (test_a_sequence_starting_far_continues_from_its_position_not_its_slot)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autoptr (LlmSeq) seq = llm_test_new_seq (e, &kv_f16);
  gint32 ids[PROMPT];
  prompt_ids (3, PROMPT, n_vocab, ids);
  LlmBatchRow rows[PROMPT];
  for (guint k = 0; k < PROMPT; k++)
    rows[k] = (LlmBatchRow) { seq, ids[k], NULL, FAR + k, FALSE };
  eval_ok (e, rows, PROMPT, NULL);
  ck_assert_uint_eq (llm_seq_n (seq), PROMPT);
  ck_assert_uint_eq (llm_seq_pos_next (seq), FAR + PROMPT);

  GError *error = NULL;
  LlmBatchRow at_slot = { seq, ids[0], NULL, PROMPT, FALSE };
  ck_assert (!llm_engine_eval (e, &at_slot, 1, NULL, &error));
  ck_assert (g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH));
  g_clear_error (&error);
  ck_assert_uint_eq (llm_seq_n (seq), PROMPT);

  LlmBatchRow next = { seq, ids[0], NULL, FAR + PROMPT, FALSE };
  eval_ok (e, &next, 1, NULL);
  ck_assert_uint_eq (llm_seq_pos_next (seq), FAR + PROMPT + 1);

  /* Emptied, it may start anywhere again; truncated, it goes on from
   * the position of the cut. */
  llm_seq_truncate (seq, 3);
  ck_assert_uint_eq (llm_seq_pos_next (seq), FAR + 3);
  llm_seq_clear (seq);
  LlmBatchRow again = { seq, ids[0], NULL, 7, FALSE };
  eval_ok (e, &again, 1, NULL);
  ck_assert_uint_eq (llm_seq_pos_next (seq), 8);
}
END_TEST

/* The exact test of positions: in layer 0 a row's key before RoPE
 * depends on its input alone, so the key a sequence started at FAR holds
 * in slot k is the key token k gets alone at position 0 (where RoPE turns
 * nothing) turned by FAR + k, bit for bit; values are not turned at all.
 * Turned by its slot k instead, it would differ. */
START_TEST (test_a_rows_position_is_what_turns_its_key)
{
  g_autoptr (LlmModel) m = llm_test_load_model (model_names[_i]);
  const LlmHParams *hp = &m->hp;
  const gsize kv_dim = (gsize) hp->n_head_kv * hp->head_dim;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  gint32 ids[PROMPT];
  prompt_ids (4, PROMPT, hp->n_vocab, ids);

  g_autoptr (LlmSeq) far = llm_test_new_seq (e, &kv_f32);
  LlmBatchRow rows[PROMPT];
  for (guint k = 0; k < PROMPT; k++)
    rows[k] = (LlmBatchRow) { far, ids[k], NULL, FAR + k, FALSE };
  eval_ok (e, rows, PROMPT, NULL);

  g_autofree float *k0 = g_new (float, kv_dim), *v0 = g_new (float, kv_dim);
  g_autofree float *want = g_new (float, kv_dim), *by_slot = g_new (float, kv_dim);
  g_autofree float *k = g_new (float, kv_dim), *v = g_new (float, kv_dim);
  g_autoptr (LlmSeq) lone = llm_test_new_seq (e, &kv_f32);
  for (guint j = 0; j < PROMPT; j++) {
    llm_seq_clear (lone);
    LlmBatchRow r = { lone, ids[j], NULL, 0, FALSE };
    eval_ok (e, &r, 1, NULL);
    llm_kv_cache_read (llm_seq_kv (lone), 0, 0, k0, v0);
    memcpy (want, k0, kv_dim * sizeof (float));
    llm_rope (want, hp->n_head_kv, hp->head_dim, hp->n_rot, FAR + j, hp->rope_freq_base,
        hp->rope_freq_scale, hp->rope_neox);
    memcpy (by_slot, k0, kv_dim * sizeof (float));
    llm_rope (by_slot, hp->n_head_kv, hp->head_dim, hp->n_rot, j, hp->rope_freq_base,
        hp->rope_freq_scale, hp->rope_neox);

    llm_kv_cache_read (llm_seq_kv (far), 0, j, k, v);
    ck_assert_msg (memcmp (k, want, kv_dim * sizeof (float)) == 0,
        "%s slot %u: the key is not turned by position %u", model_names[_i], j, FAR + j);
    ck_assert_msg (memcmp (k, by_slot, kv_dim * sizeof (float)) != 0,
        "%s slot %u: turning by the slot gives the same key; the check cannot tell",
        model_names[_i], j);
    ck_assert_mem_eq (v, v0, kv_dim * sizeof (float));
  }
}
END_TEST

/* Sequences fed the same rows at the same explicit positions, together
 * in one batch or alone, are bit-identical. The same rows at positions
 * 0.. agree only as far as float rounding goes: RoPE scores depend on the
 * distance between positions alone, but exactly so only in exact
 * arithmetic. (f32 cache: its rounding is the smallest.) */
START_TEST (test_the_same_rows_at_the_same_positions_are_bit_identical)
{
  g_autoptr (LlmModel) m = llm_test_load_model (model_names[_i]);
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  gint32 ids[PROMPT];
  prompt_ids (5, PROMPT, n_vocab, ids);
  g_autofree float *pair = g_new (float, (gsize) 2 * PROMPT * n_vocab);
  g_autofree float *alone = g_new (float, (gsize) PROMPT * n_vocab);
  g_autofree float *at0 = g_new (float, (gsize) PROMPT * n_vocab);

  g_autoptr (LlmSeq) a = llm_test_new_seq (e, &kv_f32);
  g_autoptr (LlmSeq) b = llm_test_new_seq (e, &kv_f32);
  LlmBatchRow rows[2 * PROMPT];
  for (guint k = 0; k < PROMPT; k++) {
    rows[k] = (LlmBatchRow) { a, ids[k], NULL, FAR + k, TRUE };
    rows[PROMPT + k] = (LlmBatchRow) { b, ids[k], NULL, FAR + k, TRUE };
  }
  eval_ok (e, rows, 2 * PROMPT, pair);
  g_autoptr (LlmSeq) c = llm_test_new_seq (e, &kv_f32);
  for (guint k = 0; k < PROMPT; k++)
    rows[k].seq = c;
  eval_ok (e, rows, PROMPT, alone);
  const gsize bytes = (gsize) PROMPT * n_vocab * sizeof (float);
  ck_assert_mem_eq (pair, pair + (gsize) PROMPT * n_vocab, bytes);
  ck_assert_mem_eq (pair, alone, bytes);

  g_autoptr (LlmSeq) d = llm_test_new_seq (e, &kv_f32);
  for (guint k = 0; k < PROMPT; k++)
    rows[k] = (LlmBatchRow) { d, ids[k], NULL, k, TRUE };
  eval_ok (e, rows, PROMPT, at0);
  /* The first row attends to itself alone, so its position cannot show. */
  assert_logits_equal (alone, at0, n_vocab, "the first row at FAR and at 0");
  /* Later rows: within 1e-5 of the logits' range. Measured with this f32
   * cache: 3e-7 (stories260K, qwen2), 0 (Q8_0, whose activation rounding
   * absorbs it); merely storing the turned keys in f16 moves them by 5e-4
   * to 1e-2, so a key or query turned by a wrong position cannot pass. */
  float lo = at0[0], hi = at0[0];
  for (gsize j = 0; j < (gsize) PROMPT * n_vocab; j++) {
    lo = MIN (lo, at0[j]);
    hi = MAX (hi, at0[j]);
  }
  const float tol = 1e-5f * (hi - lo);
  for (gsize j = n_vocab; j < (gsize) PROMPT * n_vocab; j++)
    ck_assert_msg (fabsf (alone[j] - at0[j]) <= tol, "%s row %" G_GSIZE_FORMAT " logit %"
        G_GSIZE_FORMAT ": %.9g at FAR, %.9g at 0 (tolerance %.3g)", model_names[_i],
        j / n_vocab, j % n_vocab, alone[j], at0[j], tol);
}
END_TEST

/* --- rows that do not make a batch ---------------------------------- */

static guint criticals;

static void
count_critical (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  (void) domain;
  (void) level;
  (void) data;
  if (strstr (message, "seq != NULL"))
    criticals++;
}

/* A row without a sequence is a caller's bug, not a runtime error: a
 * critical, FALSE, no GError, and nothing of the batch evaluated. */
START_TEST (test_a_row_without_a_sequence_fails_the_whole_batch_as_a_programming_error)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autofree float *table = embedding_table (m);
  g_autoptr (LlmSeq) a = llm_test_new_seq (e, &kv_f16);
  LlmBatchRow rows[2] = { { a, 1, NULL, 0, FALSE }, { NULL, -1, table, 0, FALSE } };
  criticals = 0;
  const guint handler = g_log_set_handler (NULL, G_LOG_LEVEL_CRITICAL, count_critical, NULL);
  GError *error = NULL;
  const gboolean ok = llm_engine_eval (e, rows, 2, NULL, &error);
  g_log_remove_handler (NULL, handler);
  ck_assert (!ok);
  ck_assert_ptr_null (error);
  ck_assert_uint_eq (criticals, 1);
  ck_assert_uint_eq (llm_seq_n (a), 0);
}
END_TEST

/* Positions that go back, repeat or skip fail their own sequence
 * (LLM_ENGINE_ERROR_BATCH, nothing of it cached); an embedding-row
 * sequence in the same batch is evaluated as it is alone. */
START_TEST (test_positions_that_go_back_or_skip_fail_their_sequence_only)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("stories260K.gguf");
  const guint n_vocab = m->hp.n_vocab, n_embd = m->hp.n_embd;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autofree float *table = embedding_table (m);
  gint32 ids[PROMPT];
  prompt_ids (6, PROMPT, n_vocab, ids);
  g_autofree float *want = g_new (float, n_vocab), *got = g_new (float, n_vocab);
  g_autoptr (LlmSeq) ref = llm_test_new_seq (e, &kv_f16);
  GError *error = NULL;
  ck_assert (llm_seq_eval_tokens (ref, ids, PROMPT, want, FALSE, &error));

  g_autoptr (LlmSeq) bad = llm_test_new_seq (e, &kv_f16);
  LlmBatchRow five[5];
  for (guint k = 0; k < 5; k++)
    five[k] = (LlmBatchRow) { bad, ids[k], NULL, k, FALSE };
  eval_ok (e, five, 5, NULL);

  /* Each bad pattern, for a sequence at 5: one row back, the same
   * position again, a skipped one, and one bad row after good ones. */
  const guint32 patterns[][2] = { { 4, 5 }, { 5, 5 }, { 5, 7 }, { 6, 7 } };
  for (guint p = 0; p < G_N_ELEMENTS (patterns); p++) {
    g_autoptr (LlmSeq) good = llm_test_new_seq (e, &kv_f16);
    LlmBatchRow rows[2 + PROMPT];
    rows[0] = (LlmBatchRow) { bad, ids[5], NULL, patterns[p][0], FALSE };
    rows[1] = (LlmBatchRow) { bad, ids[6], NULL, patterns[p][1], FALSE };
    for (guint k = 0; k < PROMPT; k++)
      rows[2 + k] = row (good, ids[k], table, n_embd, k, k + 1 == PROMPT);
    ck_assert (!llm_engine_eval (e, rows, 2 + PROMPT, got, &error));
    ck_assert_msg (g_error_matches (error, LLM_ENGINE_ERROR, LLM_ENGINE_ERROR_BATCH),
        "pattern %u: %s", p, error->message);
    ck_assert_msg (strstr (error->message, "consecutive"), "%s", error->message);
    g_clear_error (&error);
    ck_assert_uint_eq (llm_seq_n (bad), 5);
    ck_assert_uint_eq (llm_seq_n (good), PROMPT);
    assert_logits_equal (got, want, n_vocab, "the good sequence beside a bad one");
  }
}
END_TEST

/* An embedding row's token field is not looked at, so any value there
 * is fine; the same value in a token row is refused. */
START_TEST (test_an_embedding_rows_token_field_is_ignored)
{
  g_autoptr (LlmModel) m = llm_test_load_model ("TinyStories-656K-Q8_0.gguf");
  const guint n_vocab = m->hp.n_vocab;
  g_autoptr (LlmEngine) e = llm_test_new_engine (m, 2);
  g_autofree float *emb = g_new (float, m->hp.n_embd);
  llm_model_token_embedding (m, 42, emb);
  g_autofree float *want = g_new (float, n_vocab), *got = g_new (float, n_vocab);
  g_autoptr (LlmSeq) ref = llm_test_new_seq (e, &kv_f16);
  const gint32 id = 42;
  GError *error = NULL;
  ck_assert (llm_seq_eval_tokens (ref, &id, 1, want, FALSE, &error));
  const gint32 junk[] = { -1, (gint32) n_vocab, G_MAXINT32 };
  for (guint j = 0; j < G_N_ELEMENTS (junk); j++) {
    g_autoptr (LlmSeq) s = llm_test_new_seq (e, &kv_f16);
    LlmBatchRow r = { s, junk[j], emb, 0, TRUE };
    eval_ok (e, &r, 1, got);
    assert_logits_equal (got, want, n_vocab, "embedding row with a junk token field");
    LlmBatchRow t = { s, junk[j], NULL, 1, TRUE };
    ck_assert (!llm_engine_eval (e, &t, 1, got, &error));
    ck_assert (g_error_matches (error, LLM_FORWARD_ERROR, LLM_FORWARD_ERROR_TOKEN));
    g_clear_error (&error);
    ck_assert_uint_eq (llm_seq_n (s), 1);
  }
}
END_TEST

static Suite *
batch_rows_suite (void)
{
  Suite *s = suite_create ("batch-rows");
  const int n_models = G_N_ELEMENTS (model_names);
  TCase *emb = tcase_create ("embedding-rows");
  tcase_set_timeout (emb, 120);
  tcase_add_loop_test (emb, test_embedding_rows_give_the_logits_of_their_tokens, 0, n_models);
  tcase_add_loop_test (emb,
      test_mixed_token_and_embedding_rows_of_several_sequences_equal_each_alone, 0, n_models);
  tcase_add_loop_test (emb, test_an_image_of_embedding_rows_takes_positions_between_text, 0,
      n_models);
  tcase_add_test (emb, test_an_embedding_rows_token_field_is_ignored);
  suite_add_tcase (s, emb);

  TCase *pos = tcase_create ("positions");
  tcase_set_timeout (pos, 120);
  tcase_add_loop_test (pos, test_explicit_default_positions_equal_implicit_ones, 0, n_models);
  tcase_add_test (pos, test_a_sequence_starting_far_continues_from_its_position_not_its_slot);
  tcase_add_loop_test (pos, test_a_rows_position_is_what_turns_its_key, 0, n_models);
  tcase_add_loop_test (pos, test_the_same_rows_at_the_same_positions_are_bit_identical, 0,
      n_models);
  suite_add_tcase (s, pos);

  TCase *bad = tcase_create ("invalid-rows");
  tcase_add_test (bad, test_a_row_without_a_sequence_fails_the_whole_batch_as_a_programming_error);
  tcase_add_test (bad, test_positions_that_go_back_or_skip_fail_their_sequence_only);
  suite_add_tcase (s, bad);
  return s;
}

LLM_TEST_MAIN (batch_rows_suite)
