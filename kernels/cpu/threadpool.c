/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fork-join pool. A run publishes (fn, ctx) and bumps a generation
 * counter; workers poll the counter for a short while (SPIN_NS), so
 * back-to-back runs of a decode step cost about a microsecond, and only
 * then sleep on a condition variable, so an idle pool costs no CPU.
 * Completion works the same way in the other direction: the caller polls
 * a done counter, then sleeps.
 *
 * Sleeping without lost wake-ups: a sleeper announces itself
 * (workers_sleeping / caller_sleeping, seq_cst) under the mutex and
 * re-reads the counter before waiting; a waker bumps the counter (seq_cst)
 * and then reads the sleeping flag. Whichever goes second sees the other,
 * so either the sleeper does not sleep or the waker takes the mutex and
 * broadcasts. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause ()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__ ("yield" ::: "memory")
#else
#define cpu_relax() ((void) 0)
#endif

/* How long a waiting thread polls before it sleeps, and for how much of
 * that it polls without yielding the CPU. */
#define SPIN_NS 100000
#define TIGHT_SPIN_NS 10000

typedef struct {
  LlmThreadPool *pool;
  int ith;
} Worker;

struct LlmThreadPool {
  int n_threads;
  pthread_t *threads;
  Worker *workers;

  /* Written by the caller before the generation bump that publishes them. */
  LlmTaskFn fn;
  void *ctx;
  bool stop;

  _Atomic uint32_t generation;
  _Atomic int n_done;
  _Atomic int workers_sleeping;
  _Atomic int caller_sleeping;

  pthread_mutex_t mutex;
  pthread_cond_t wake_workers;
  pthread_cond_t wake_caller;
};

static int64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef bool (*ReadyFn) (LlmThreadPool *pool, uint32_t arg);

/* Waits until @ready holds (true) or about SPIN_NS pass (false): first a
 * tight spin, then yielding the CPU between polls, which costs little when
 * the CPU is ours alone and lets the thread we wait for run when CPUs are
 * oversubscribed. The clock is not read on the fast path. */
static bool
spin_until (ReadyFn ready, LlmThreadPool *pool, uint32_t arg)
{
  int64_t t0 = 0;
  bool yielding = false;
  for (unsigned i = 1;; i++) {
    if (ready (pool, arg))
      return true;
    if (yielding)
      sched_yield ();
    else
      cpu_relax ();
    if (yielding || (i & 63) == 0) {
      const int64_t t = now_ns ();
      if (t0 == 0)
        t0 = t;
      else if (t - t0 > SPIN_NS)
        return false;
      else if (t - t0 > TIGHT_SPIN_NS)
        yielding = true;
    }
  }
}

static bool
new_generation (LlmThreadPool *pool, uint32_t seen)
{
  return atomic_load_explicit (&pool->generation, memory_order_acquire) != seen;
}

static bool
all_done (LlmThreadPool *pool, uint32_t unused)
{
  (void) unused;
  return atomic_load (&pool->n_done) == pool->n_threads - 1;
}

static uint32_t
wait_for_generation (LlmThreadPool *pool, uint32_t seen)
{
  if (!spin_until (new_generation, pool, seen)) {
    pthread_mutex_lock (&pool->mutex);
    atomic_fetch_add (&pool->workers_sleeping, 1);
    while (atomic_load (&pool->generation) == seen)
      pthread_cond_wait (&pool->wake_workers, &pool->mutex);
    atomic_fetch_sub (&pool->workers_sleeping, 1);
    pthread_mutex_unlock (&pool->mutex);
  }
  return atomic_load_explicit (&pool->generation, memory_order_acquire);
}

static void *
worker_main (void *data)
{
  Worker *w = data;
  LlmThreadPool *pool = w->pool;
  uint32_t seen = 0;

  for (;;) {
    seen = wait_for_generation (pool, seen);
    if (pool->stop)
      break;
    pool->fn (pool->ctx, w->ith, pool->n_threads);

    /* The last worker to finish wakes a caller that went to sleep. */
    const int done = atomic_fetch_add (&pool->n_done, 1) + 1;
    if (done == pool->n_threads - 1 && atomic_load (&pool->caller_sleeping)) {
      pthread_mutex_lock (&pool->mutex);
      pthread_cond_broadcast (&pool->wake_caller);
      pthread_mutex_unlock (&pool->mutex);
    }
  }
  return NULL;
}

static void
publish (LlmThreadPool *pool)
{
  atomic_fetch_add (&pool->generation, 1);
  if (atomic_load (&pool->workers_sleeping)) {
    pthread_mutex_lock (&pool->mutex);
    pthread_cond_broadcast (&pool->wake_workers);
    pthread_mutex_unlock (&pool->mutex);
  }
}

/* Online CPUs this process may run on: in a container or under taskset
 * the affinity mask is what counts, not the host's CPU count. */
static int
n_usable_cpus (void)
{
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity (0, sizeof set, &set) == 0 && CPU_COUNT (&set) > 0)
    return CPU_COUNT (&set);
#endif
  const long n = sysconf (_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int) n : 1;
}

LlmThreadPool *
llm_threadpool_new (int n_threads)
{
  if (n_threads <= 0)
    n_threads = n_usable_cpus ();

  LlmThreadPool *pool = calloc (1, sizeof *pool);
  if (pool == NULL)
    return NULL;
  pool->n_threads = n_threads;
  atomic_init (&pool->generation, 0);
  atomic_init (&pool->n_done, 0);
  atomic_init (&pool->workers_sleeping, 0);
  atomic_init (&pool->caller_sleeping, 0);
  pthread_mutex_init (&pool->mutex, NULL);
  pthread_cond_init (&pool->wake_workers, NULL);
  pthread_cond_init (&pool->wake_caller, NULL);

  pool->threads = calloc ((size_t) n_threads, sizeof *pool->threads);
  pool->workers = calloc ((size_t) n_threads, sizeof *pool->workers);
  if (pool->threads == NULL || pool->workers == NULL) {
    pool->n_threads = 1;
    llm_threadpool_free (pool);
    return NULL;
  }

  for (int i = 1; i < n_threads; i++) {
    pool->workers[i].pool = pool;
    pool->workers[i].ith = i;
    if (pthread_create (&pool->threads[i], NULL, worker_main, &pool->workers[i]) != 0) {
      /* Stop and join the ones that did start. */
      pool->n_threads = i;
      llm_threadpool_free (pool);
      return NULL;
    }
  }
  return pool;
}

void
llm_threadpool_free (LlmThreadPool *pool)
{
  if (pool == NULL)
    return;
  if (pool->threads != NULL && pool->n_threads > 1) {
    pool->stop = true;
    publish (pool);
    for (int i = 1; i < pool->n_threads; i++)
      pthread_join (pool->threads[i], NULL);
  }
  pthread_cond_destroy (&pool->wake_caller);
  pthread_cond_destroy (&pool->wake_workers);
  pthread_mutex_destroy (&pool->mutex);
  free (pool->workers);
  free (pool->threads);
  free (pool);
}

int
llm_threadpool_n_threads (const LlmThreadPool *pool)
{
  return pool->n_threads;
}

void
llm_threadpool_run (LlmThreadPool *pool, LlmTaskFn fn, void *ctx)
{
  if (pool->n_threads == 1) {
    fn (ctx, 0, 1);
    return;
  }

  pool->fn = fn;
  pool->ctx = ctx;
  atomic_store_explicit (&pool->n_done, 0, memory_order_relaxed);
  publish (pool);

  fn (ctx, 0, pool->n_threads);

  if (!spin_until (all_done, pool, 0)) {
    pthread_mutex_lock (&pool->mutex);
    atomic_store (&pool->caller_sleeping, 1);
    while (!all_done (pool, 0))
      pthread_cond_wait (&pool->wake_caller, &pool->mutex);
    atomic_store (&pool->caller_sleeping, 0);
    pthread_mutex_unlock (&pool->mutex);
  }
}

void
llm_split_range (size_t n, int ith, int nth, size_t *begin, size_t *end)
{
  const size_t k = (size_t) ith, t = (size_t) nth;
  const size_t chunk = n / t, rem = n % t;
  *begin = k * chunk + (k < rem ? k : rem);
  *end = *begin + chunk + (k < rem ? 1 : 0);
}
