/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Prompts that hold media, as llama.cpp's mtmd builds them: the text is
 * tokenized in pieces around each media marker, and each marker becomes
 * the media's rows (LLM_TOKEN_EMBD entries) inside the delimiter tokens
 * the projector's model was trained with, so the files people use with
 * llama.cpp get the same prompt here. */
#pragma once

#include <glib.h>

#include "tokenizer.h"

G_BEGIN_DECLS

/* Where a media item goes in a prompt text (mtmd's default marker). */
#define LLM_MEDIA_MARKER "<__media__>"

/* One media item: its rows, and for a tiled image (SmolVLM) the tile grid
 * its rows hold, tiles row by row and then the whole image, each a
 * n_rows / (tiles_x * tiles_y + 1) rows; 0 x 0 for one image. */
typedef struct {
  guint n_rows;
  guint tiles_x, tiles_y;
} LlmMediaItem;

/* The number of markers in @text. */
guint llm_media_prompt_count_markers (const char *text);

/* Appends to @out (gint32) the ids of a prompt holding the @n_media media
 * @items: @system_prompt when @conversation_start, then
 * @wrapper (a "{prompt}" template, or NULL) around @prompt. The i-th
 * marker of @prompt is the i-th item; items without a marker go in front
 * of the text (where mtmd puts one), markers without an item are dropped.
 * @projector (clip.projector_type, or NULL) picks the delimiters: idefics3
 * (SmolVLM) wraps an image in "\n\n<fake_token_around_image><global-img>"
 * and "<fake_token_around_image>" when the vocabulary has those tokens,
 * after its tiles, each behind "<fake_token_around_image><row_Y_col_X>"
 * and a newline between rows of tiles; the others (LLaVA's mlp, audio)
 * add none. BOS goes first when
 * @conversation_start and the vocabulary asks for it. */
void llm_media_prompt_build (const LlmTokenizer *tok, const char *system_prompt,
    const char *wrapper, const char *prompt, gboolean conversation_start,
    const LlmMediaItem *items, guint n_media, const char *projector, GArray *out);

G_END_DECLS
