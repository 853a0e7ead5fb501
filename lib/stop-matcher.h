/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Stop strings over a stream of generated tokens: says which tokens may be
 * output now and when a stop string completes. A token is released once
 * its text ends before any stop string can begin in it; a token that
 * might begin one is held until the following text shows it does not;
 * when a stop string completes, the tokens that overlap it are dropped.
 * Memory stays bounded by the longest stop string, however long the
 * response: the matcher keeps only the text a stop string could still
 * begin in, and holds at most that many tokens. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LlmStopMatcher LlmStopMatcher;

/* A matcher for the NULL-terminated @stops (copied; empty strings are
 * ignored). With none (@stops NULL or empty) no token is ever held. */
LlmStopMatcher *llm_stop_matcher_new (const char *const *stops);
void llm_stop_matcher_free (LlmStopMatcher *matcher);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmStopMatcher, llm_stop_matcher_free)

/* Forgets the response so far and the held tokens: a new response. */
void llm_stop_matcher_reset (LlmStopMatcher *matcher);

/* Takes the next token, whose text is the @len bytes at @piece (none for a
 * token without text). Sets @n_release to how many of the held tokens,
 * oldest first and this one included, may be output now; they are no
 * longer held. Returns TRUE when a stop string completed: the tokens then
 * still held overlap it and are dropped (none is held afterwards). */
gboolean llm_stop_matcher_add (LlmStopMatcher *matcher, const char *piece, gsize len,
    guint *n_release);

/* Tokens held (not released, not dropped) now. */
guint llm_stop_matcher_n_held (const LlmStopMatcher *matcher);
/* Bytes of the response's text kept now. */
gsize llm_stop_matcher_text_len (const LlmStopMatcher *matcher);

G_END_DECLS
