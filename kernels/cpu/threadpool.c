/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fork-join pool. A run publishes (fn, ctx) and a new generation in one
 * atomic word that also counts the slots (ith values) handed out so far;
 * every thread, the caller included, claims slots from that word until
 * none are left. The caller takes slot 0 and then any slot no worker has
 * claimed yet, so a worker that is asleep or descheduled (a loaded
 * machine) never holds the run up: the caller runs its share instead and
 * waits only for slots that are actually running elsewhere.
 *
 * Waiting: a decode step makes many short runs with a few microseconds of
 * serial work between them, so workers poll for the next run with
 * cpu_relax() for up to SPIN_NS, about a millisecond, and only then sleep
 * on a condition variable, so an idle pool costs no CPU. The caller polls
 * for completion the same way. Every YIELD_NS of polling a poller yields
 * the CPU once: on a machine with more runnable threads than CPUs the
 * thread it waits for (the caller about to publish, a worker preempted in
 * its slot) may be queued on its CPU, and polling without ever yielding
 * made decoding there two to three times slower; yielding on every poll
 * (a storm of system calls) bought nothing over this. What a run costs
 * so (Zen 5, two threads, 246M Q4_0 decode, timed by the TSC): a worker
 * starts its slot 0.4-0.9 us after the caller publishes, and the caller
 * is back 0.15-0.2 us after the last slot ends, about 1 us of a 20-60 us
 * product; giving the run word and the finish count cache lines of their
 * own changed neither.
 *
 * Sleeping without lost wake-ups: a sleeper announces itself
 * (workers_sleeping / caller_sleeping, seq_cst) under the mutex and
 * re-reads the word it waits on before waiting; a waker changes that word
 * (seq_cst) and then reads the sleeping flag. Whichever goes second sees
 * the other, so either the sleeper does not sleep or the waker takes the
 * mutex and broadcasts. */
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

/* How long a waiting thread polls before it sleeps, and how often it
 * yields the CPU meanwhile. */
#define SPIN_NS 1000000
#define YIELD_NS 50000

/* The run word: generation in the high half, slots claimed in the low. */
#define GEN(w) ((uint32_t) ((w) >> 32))
#define SLOTS(w) ((uint32_t) (w))

typedef struct {
  LlmThreadPool *pool;
  int ith;
} Worker;

/* Kernel scratch of one slot, 64-byte aligned. */
typedef struct {
  void *p;
  size_t bytes;
} SlotScratch;

/* The slot the task call running on this thread has, if any. */
static _Thread_local SlotScratch *current_scratch;

struct LlmThreadPool {
  int n_threads;
  pthread_t *threads;
  Worker *workers;
  SlotScratch *scratch;  /* [n_threads] */

  /* Written by the caller before the run word that publishes them. */
  LlmTaskFn fn;
  void *ctx;
  bool stop;
  uint32_t generation;   /* the caller's copy */

  _Atomic uint64_t run;
  _Atomic int n_done;    /* slots finished in this run */
  _Atomic int workers_sleeping;
  _Atomic int resting;   /* llm_threadpool_rest: sleep now, do not poll */
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

/* Waits until @ready holds (true) or about SPIN_NS pass (false). The clock
 * is read every 64 polls, not on the fast path. */
static bool
spin_until (ReadyFn ready, LlmThreadPool *pool, uint32_t arg, bool may_rest)
{
  int64_t t0 = 0, last_yield = 0;
  for (unsigned i = 1;; i++) {
    if (ready (pool, arg))
      return true;
    if (may_rest && atomic_load_explicit (&pool->resting, memory_order_relaxed))
      return false;
    cpu_relax ();
    if ((i & 63) == 0) {
      const int64_t t = now_ns ();
      if (t0 == 0) {
        t0 = last_yield = t;
      } else if (t - t0 > SPIN_NS) {
        return false;
      } else if (t - last_yield >= YIELD_NS) {
        sched_yield ();
        last_yield = t;
      }
    }
  }
}

static bool
new_generation (LlmThreadPool *pool, uint32_t seen)
{
  return GEN (atomic_load_explicit (&pool->run, memory_order_acquire)) != seen;
}

static bool
all_done (LlmThreadPool *pool, uint32_t unused)
{
  (void) unused;
  return atomic_load_explicit (&pool->n_done, memory_order_acquire) == pool->n_threads;
}

static void
wait_for_generation (LlmThreadPool *pool, uint32_t seen)
{
  if (spin_until (new_generation, pool, seen, true))
    return;
  pthread_mutex_lock (&pool->mutex);
  atomic_fetch_add (&pool->workers_sleeping, 1);
  while (GEN (atomic_load (&pool->run)) == seen)
    pthread_cond_wait (&pool->wake_workers, &pool->mutex);
  atomic_fetch_sub (&pool->workers_sleeping, 1);
  pthread_mutex_unlock (&pool->mutex);
}

/* Claims the next slot of generation @gen; -1 when none is left (or a
 * newer run has started). */
static int
claim_slot (LlmThreadPool *pool, uint32_t gen)
{
  uint64_t w = atomic_load_explicit (&pool->run, memory_order_acquire);
  while (GEN (w) == gen && SLOTS (w) < (uint32_t) pool->n_threads) {
    if (atomic_compare_exchange_weak_explicit (&pool->run, &w, w + 1,
            memory_order_acq_rel, memory_order_acquire))
      return (int) SLOTS (w);
  }
  return -1;
}

/* Counts @n finished slots; the one that finishes the run wakes a caller
 * that went to sleep. */
static void
finish_slots (LlmThreadPool *pool, int n)
{
  const int done = atomic_fetch_add (&pool->n_done, n) + n;
  if (done == pool->n_threads && atomic_load (&pool->caller_sleeping)) {
    pthread_mutex_lock (&pool->mutex);
    pthread_cond_broadcast (&pool->wake_caller);
    pthread_mutex_unlock (&pool->mutex);
  }
}

/* Calls @fn for @slot with that slot's scratch current, so kernel
 * scratch belongs to the pool's slots and not to every thread that ever
 * led a run (many stream threads take turns leading an engine's runs). */
static void
run_slot (LlmThreadPool *pool, LlmTaskFn fn, void *ctx, int slot, int nth)
{
  SlotScratch *outer = current_scratch;
  current_scratch = &pool->scratch[slot];
  fn (ctx, slot, nth);
  current_scratch = outer;
}

static void *
worker_main (void *data)
{
  Worker *w = data;
  LlmThreadPool *pool = w->pool;
  uint32_t seen = 0;


  for (;;) {
    wait_for_generation (pool, seen);
    seen = GEN (atomic_load_explicit (&pool->run, memory_order_acquire));
    if (pool->stop)
      break;
    /* fn and ctx are read after the claim: they belong to the claimed
     * run, which cannot end (and be replaced) before this slot finishes. */
    int slot;
    while ((slot = claim_slot (pool, seen)) >= 0) {
      run_slot (pool, pool->fn, pool->ctx, slot, pool->n_threads);
      finish_slots (pool, 1);
    }
  }
  return NULL;
}

/* Starts generation pool->generation + 1 with @slots_taken slots claimed. */
static void
publish (LlmThreadPool *pool, uint32_t slots_taken)
{
  pool->generation++;
  atomic_store_explicit (&pool->resting, 0, memory_order_relaxed);
  atomic_store (&pool->run, ((uint64_t) pool->generation << 32) | slots_taken);
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

int
llm_threadpool_default_threads (void)
{
  return n_usable_cpus ();
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
  atomic_init (&pool->run, 0);
  atomic_init (&pool->n_done, 0);
  atomic_init (&pool->workers_sleeping, 0);
  atomic_init (&pool->resting, 0);
  atomic_init (&pool->caller_sleeping, 0);
  pthread_mutex_init (&pool->mutex, NULL);
  pthread_cond_init (&pool->wake_workers, NULL);
  pthread_cond_init (&pool->wake_caller, NULL);

  pool->threads = calloc ((size_t) n_threads, sizeof *pool->threads);
  pool->workers = calloc ((size_t) n_threads, sizeof *pool->workers);
  pool->scratch = calloc ((size_t) n_threads, sizeof *pool->scratch);
  if (pool->threads == NULL || pool->workers == NULL || pool->scratch == NULL) {
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
    publish (pool, (uint32_t) pool->n_threads);
    for (int i = 1; i < pool->n_threads; i++)
      pthread_join (pool->threads[i], NULL);
  }
  pthread_cond_destroy (&pool->wake_caller);
  pthread_cond_destroy (&pool->wake_workers);
  pthread_mutex_destroy (&pool->mutex);
  if (pool->scratch != NULL)
    for (int i = 0; i < pool->n_threads; i++)
      free (pool->scratch[i].p);
  free (pool->scratch);
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
    run_slot (pool, fn, ctx, 0, 1);
    return;
  }

  pool->fn = fn;
  pool->ctx = ctx;
  atomic_store_explicit (&pool->n_done, 0, memory_order_relaxed);
  publish (pool, 1);

  run_slot (pool, fn, ctx, 0, pool->n_threads);
  int mine = 1, slot;
  while ((slot = claim_slot (pool, pool->generation)) >= 0) {
    run_slot (pool, fn, ctx, slot, pool->n_threads);
    mine++;
  }
  finish_slots (pool, mine);

  if (!spin_until (all_done, pool, 0, false)) {
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

/* Outside a pool run (tests, tools calling kernels directly) the calling
 * thread's own buffer serves. */
static pthread_key_t thread_scratch_key;
static pthread_once_t thread_scratch_once = PTHREAD_ONCE_INIT;

static void
free_thread_scratch (void *data)
{
  SlotScratch *s = data;
  free (s->p);
  free (s);
}

static void
thread_scratch_key_init (void)
{
  pthread_key_create (&thread_scratch_key, free_thread_scratch);
}

static SlotScratch *
thread_scratch (void)
{
  pthread_once (&thread_scratch_once, thread_scratch_key_init);
  SlotScratch *s = pthread_getspecific (thread_scratch_key);
  if (s == NULL) {
    s = calloc (1, sizeof *s);
    if (s != NULL && pthread_setspecific (thread_scratch_key, s) != 0) {
      free (s);
      s = NULL;
    }
  }
  return s;
}

void
llm_threadpool_rest (LlmThreadPool *pool)
{
  atomic_store_explicit (&pool->resting, 1, memory_order_relaxed);
}

void *
llm_threadpool_scratch (size_t bytes)
{
  SlotScratch *s = current_scratch != NULL ? current_scratch : thread_scratch ();
  if (s == NULL)
    return NULL;
  if (s->p == NULL || s->bytes < bytes) {
    free (s->p);
    s->bytes = 0;
    if (posix_memalign (&s->p, 64, bytes > 0 ? bytes : 64) != 0) {
      s->p = NULL;
      return NULL;
    }
    s->bytes = bytes;
  }
  return s->p;
}
