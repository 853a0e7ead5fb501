/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Host memory for a backend's prepared weights: large chunks aligned to
 * 2 MiB and asked to be held in transparent huge pages, handed out one
 * matrix after another in the order the model prepares them (the order a
 * forward pass reads them). A decode step streams every weight once; in
 * 4 KiB pages every page costs a TLB walk and stops the hardware
 * prefetchers at its end, and a matrix of its own under 2 MiB (every
 * Q4_0 and Q4_K matrix of a 246M model) could never be in a huge page.
 * Measured: on Zen 5, huge pages for the (large) F16 matrices made the
 * 246M F16 model decode 5-8% faster on one thread and about 5% on two;
 * on Zen 3, the packed Q4_0 kernel over 104 MB of 246M's layer shapes ran
 * 1.04-1.19x faster from one such arena than from 4 KiB pages (one to 16
 * tokens, two threads, taking turns in one process). GLib only; safe to
 * call from several threads. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LlmWeightArena LlmWeightArena;

LlmWeightArena *llm_weight_arena_new (void);
/* Every allocation must have been released. */
void llm_weight_arena_free (LlmWeightArena *arena);

/* @bytes of memory aligned to 64 bytes (contents undefined), or NULL when
 * the system has none to give. */
void *llm_weight_arena_alloc (LlmWeightArena *arena, gsize bytes);
/* Gives back what llm_weight_arena_alloc() returned; a chunk whose
 * allocations are all given back returns to the system. */
void llm_weight_arena_release (LlmWeightArena *arena, void *p);

/* The chunks held now (for tests). */
guint llm_weight_arena_n_chunks (LlmWeightArena *arena);

G_END_DECLS
