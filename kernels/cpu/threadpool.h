/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A fixed pool of worker threads that run one function on every thread at
 * once (fork-join), cheaply enough for the many small steps of a decode
 * pass. Pure C (pthreads), no GLib. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct LlmThreadPool LlmThreadPool;

/* @ith in [0, nth); the calling thread runs ith 0. */
typedef void (*LlmTaskFn) (void *ctx, int ith, int nth);

/* Threads "one per CPU" means: the CPUs this process may run on. */
int llm_threadpool_default_threads (void);

/* @n_threads <= 0 means one per online CPU. NULL if threads cannot start. */
LlmThreadPool *llm_threadpool_new (int n_threads);
void llm_threadpool_free (LlmThreadPool *pool);
int llm_threadpool_n_threads (const LlmThreadPool *pool);

/* Calls @fn once for every ith in [0, nth) and returns when all calls have
 * finished. A thread may make several of the calls (the caller takes over
 * the ith of a worker that has not woken up yet), so per-call state must
 * be indexed by ith, not tied to a thread. Not reentrant: one run at a
 * time per pool. */
void llm_threadpool_run (LlmThreadPool *pool, LlmTaskFn fn, void *ctx);

/* A burst of runs is over (a forward pass ended): the workers sleep now
 * instead of polling for the next run, so the cores go to the threads
 * that use the results (on two cores a polling worker would keep the
 * next stream's thread from running). The next run wakes them. */
void llm_threadpool_rest (LlmThreadPool *pool);

/* At least @bytes of scratch, 64-byte aligned, for the task call running
 * now: each pool slot (ith) keeps one buffer, grown as needed, for the
 * pool's life, so kernel scratch is bounded by the pool and not by how
 * many threads have led runs. Outside a run, the calling thread's own
 * buffer. NULL if memory ran out. The next call on this thread in the
 * same slot may return the same memory. */
void *llm_threadpool_scratch (size_t bytes);

/* Splits [0, n) into nth near-equal ranges; range of thread @ith. */
void llm_split_range (size_t n, int ith, int nth, size_t *begin, size_t *end);

#ifdef __cplusplus
}
#endif
