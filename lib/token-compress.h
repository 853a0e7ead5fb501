/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fewer multimodal tokens for the language model: an image encoder makes
 * hundreds of embedding rows per frame, and prefill cost grows with each.
 * Three ways to drop or fold rows, on row-major float rows (n rows of dim
 * floats), none of them needing the model:
 *   merge     ToMe-style bipartite soft matching: the most similar rows
 *             are folded into each other (size-weighted averages).
 *   prune     keeps the most salient rows (class-token attention when the
 *             encoder gives it, else the L2 norm), as FastV/VisionZip do.
 *   temporal  for video: drops rows that have not changed since the last
 *             row sent at the same grid position.
 * Surviving rows keep their order in all three, so position-dependent
 * models still see the image's layout from left to right, top to bottom.
 * GLib only; the element llmtokencompress is the GStreamer face. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define LLM_TOKEN_COMPRESS_ERROR (llm_token_compress_error_quark ())
GQuark llm_token_compress_error_quark (void);

typedef enum {
  LLM_TOKEN_COMPRESS_ERROR_INVALID,   /* a count, length or size that cannot be */
} LlmTokenCompressError;

/* How many of @n_rows rows to keep: ceil(@ratio * @n_rows), and no more
 * than @max_tokens when it is not 0; at least 1 (0 when @n_rows is 0) and
 * at most @n_rows. A @ratio outside (0, 1] or NaN counts as 1. */
guint llm_token_compress_target (guint n_rows, double ratio, guint max_tokens);

/* Cosine similarity of two @dim-float rows, clamped to [-1, 1]: 1 for two
 * zero rows, 0 for a zero row and another; NaN when an entry is NaN. */
float llm_token_cosine (const float *a, const float *b, guint dim);

/* Merges @n_rows rows of @dim floats at @rows down to @target rows (0 is
 * taken as 1, more than n_rows as n_rows). @sizes (NULL: all 1) says how many
 * source rows each row already stands for; they must be positive and
 * finite.
 *
 * Each round splits the rows alternately into A (even places) and B (odd
 * places), pairs every A row with its most cosine-similar B row (the
 * first on a tie), and folds the most similar A rows (the first on a tie)
 * into their partners, as many as are still to go: at most |A| a round,
 * so halving twice takes two rounds. A B row that takes A rows becomes
 * their size-weighted mean, at the B row's place, and its size the sum of
 * theirs. Rows that stay keep their order.
 *
 * Writes *@n_out rows to @out_rows (room for n_rows x dim floats) and
 * their sizes to @out_sizes (room for n_rows); @out_pos (may be NULL) gets
 * each output row's input index. Outputs must not overlap the inputs.
 * FALSE with @error for a zero @dim, a size that is not positive, or
 * counts whose product does not fit in memory. */
gboolean llm_token_merge (const float *rows, guint n_rows, guint dim, const float *sizes,
    guint target, float *out_rows, float *out_sizes, guint *out_pos, guint *n_out,
    GError **error);

/* Picks the @k most salient of @n_rows rows (0 is taken as 1, more than
 * n_rows as n_rows): by @saliency (n_rows floats, e.g. class-token attention)
 * when not NULL, else by each row's L2 norm; the first row wins a tie and
 * NaN scores lose. Writes the kept rows' indices in ascending order to
 * @keep (room for n_rows) and their count to *@n_keep. FALSE with @error
 * for a zero @dim. */
gboolean llm_token_prune (const float *rows, guint n_rows, guint dim, const float *saliency,
    guint k, guint *keep, guint *n_keep, GError **error);

/* Moves rows @keep[0..@n_keep) (ascending, each below @n_rows) of @rows
 * to the front, in place, so a chain of stages needs no second buffer.
 * FALSE with @error if @keep is not ascending or leaves the rows. */
gboolean llm_token_rows_compact (float *rows, guint n_rows, guint dim, const guint *keep,
    guint n_keep, GError **error);

/* The temporal stage's memory: for each grid position, the row last sent
 * there. */
typedef struct _LlmTokenTemporal LlmTokenTemporal;

LlmTokenTemporal *llm_token_temporal_new (void);
void llm_token_temporal_free (LlmTokenTemporal *temporal);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmTokenTemporal, llm_token_temporal_free)

/* Forgets every sent row: the next frame is sent whole. */
void llm_token_temporal_reset (LlmTokenTemporal *temporal);

/* Chooses which of a frame's @n_rows rows of @dim floats to send, against
 * the rows last sent at the same places. A row whose cosine similarity
 * with its reference is above @threshold is unchanged and dropped. The
 * whole frame is sent, and becomes the reference, when there is no
 * reference yet, the row count or @dim differs from the reference's, or
 * more than @scene_threshold (a fraction, 0 to 1) of the rows changed: a
 * scene change, after which the old rows mean nothing. Otherwise the
 * changed rows are sent, and at least one (the least similar, the first
 * on a tie) so that every frame still reaches the model; each sent row
 * replaces its reference, so a slow drift is sent once it adds up past
 * @threshold rather than never.
 *
 * Writes the sent rows' indices ascending to @keep (room for n_rows),
 * their count to *@n_keep and to *@resent_all (may be NULL) whether the
 * whole frame was sent as a new reference. FALSE with @error, the
 * reference as it was, for a zero @dim or counts that do not fit in
 * memory. */
gboolean llm_token_temporal_select (LlmTokenTemporal *temporal, const float *rows, guint n_rows,
    guint dim, double threshold, double scene_threshold, guint *keep, guint *n_keep,
    gboolean *resent_all, GError **error);

G_END_DECLS
