/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "media-prompt.h"

#include <string.h>

#include "chat-template.h"
#include "engine.h"
#include "vocab.h"

guint
llm_media_prompt_count_markers (const char *text)
{
  guint n = 0;
  for (const char *p = text; p && (p = strstr (p, LLM_MEDIA_MARKER)); p += strlen (LLM_MEDIA_MARKER))
    n++;
  return n;
}

/* Whether every special token of @names is one token of @tok. */
static gboolean
has_tokens (const LlmTokenizer *tok, const char *const *names)
{
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  for (; *names; names++)
    if (llm_vocab_lookup (vocab, *names, strlen (*names)) < 0)
      return FALSE;
  return TRUE;
}

static void
encode (const LlmTokenizer *tok, const char *text, gsize len, gboolean starts, GArray *out)
{
  if (len > 0)
    llm_tokenizer_encode (tok, text, len, FALSE, TRUE, starts, out);
}

static void
append_rows (GArray *out, guint n)
{
  const gint32 media = LLM_TOKEN_EMBD;
  for (guint r = 0; r < n; r++)
    g_array_append_val (out, media);
}

/* A tiled idefics3 image: the tiles at their places, then the whole. */
static void
append_tiled (const LlmTokenizer *tok, const LlmMediaItem *item, GArray *out)
{
  const guint per = item->n_rows / (item->tiles_x * item->tiles_y + 1);
  for (guint y = 0; y < item->tiles_y; y++) {
    for (guint x = 0; x < item->tiles_x; x++) {
      char place[64];
      g_snprintf (place, sizeof place, "<fake_token_around_image><row_%u_col_%u>", y + 1, x + 1);
      encode (tok, place, strlen (place), FALSE, out);
      append_rows (out, per);
    }
    if (y + 1 < item->tiles_y)
      encode (tok, "\n", 1, FALSE, out);
  }
}

void
llm_media_prompt_build (const LlmTokenizer *tok, const char *system_prompt,
    const char *wrapper, const char *prompt, gboolean conversation_start,
    const LlmMediaItem *items, guint n_media, const char *projector, GArray *out)
{
  const LlmVocab *vocab = llm_tokenizer_vocab (tok);
  static const char *const idefics3[] = { "<fake_token_around_image>", "<global-img>", NULL };
  const char *before = "", *after = "";
  const gboolean delimited = g_strcmp0 (projector, "idefics3") == 0 && has_tokens (tok, idefics3);
  if (delimited) {
    before = "\n\n<fake_token_around_image><global-img>";
    after = "<fake_token_around_image>";
  }

  /* The user's text with a marker for every item. */
  GString *user = g_string_new (NULL);
  const guint marked = llm_media_prompt_count_markers (prompt);
  for (guint i = marked; i < n_media; i++)
    g_string_append (user, LLM_MEDIA_MARKER);
  g_string_append (user, prompt ? prompt : "");

  GString *text = g_string_new (NULL);
  if (conversation_start && system_prompt)
    g_string_append (text, system_prompt);
  const char *hole = wrapper ? strstr (wrapper, LLM_CHAT_TEMPLATE_PLACEHOLDER) : NULL;
  if (wrapper)
    g_string_append_len (text, wrapper, hole ? hole - wrapper : (gssize) strlen (wrapper));
  g_string_append (text, user->str);
  if (hole)
    g_string_append (text, hole + strlen (LLM_CHAT_TEMPLATE_PLACEHOLDER));
  g_string_free (user, TRUE);

  if (conversation_start && vocab->add_bos && vocab->bos >= 0)
    g_array_append_val (out, vocab->bos);
  const char *p = text->str;
  gboolean starts = TRUE;
  for (guint item = 0;; item++) {
    const char *m = strstr (p, LLM_MEDIA_MARKER);
    encode (tok, p, m ? (gsize) (m - p) : strlen (p), starts, out);
    starts = FALSE;
    if (m == NULL)
      break;
    if (item < n_media) {
      const LlmMediaItem *it = &items[item];
      const guint images = it->tiles_x * it->tiles_y + 1;
      guint whole = it->n_rows;
      if (delimited && images > 1 && it->n_rows % images == 0) {
        append_tiled (tok, it, out);
        whole = it->n_rows / images;
      }
      encode (tok, before, strlen (before), FALSE, out);
      append_rows (out, whole);
      encode (tok, after, strlen (after), FALSE, out);
    }
    p = m + strlen (LLM_MEDIA_MARKER);
  }
  g_string_free (text, TRUE);
}
