/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU worker threads of the process: one pool per thread count,
 * shared by every engine that asks for that many, so two streams (or two
 * models) on one machine take turns on the cores instead of fighting over
 * them with a pool each. GLib only. */
#pragma once

#include <glib.h>
#include "cpu/threadpool.h"

G_BEGIN_DECLS

typedef struct _LlmWorkers LlmWorkers;

/* The process's pool of @n_threads workers (<= 0: one per usable core),
 * started on first use; NULL with @error set if threads cannot start. */
LlmWorkers *llm_workers_get (int n_threads, GError **error);
void llm_workers_unref (LlmWorkers *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LlmWorkers, llm_workers_unref)

/* The threads, for one caller at a time: a forward pass holds them from
 * lock to unlock (the pool runs one task at a time). */
LlmThreadPool *llm_workers_lock (LlmWorkers *w);
void llm_workers_unlock (LlmWorkers *w);
int llm_workers_n_threads (const LlmWorkers *w);

G_END_DECLS
