/* threadpool.c: see threadpool.h.
 *
 * A job is fn, arg and a counter of chunks handed out (next). The caller
 * publishes it and sets `open`; threads take chunks with an atomic increment
 * until none are left. A worker announces itself in `busy` before it looks
 * at the job and leaves when it finds no chunk; the caller, once every chunk
 * is taken, closes the job and waits until `busy` is zero. Because `busy` is
 * raised before `open` is read (and `open` cleared before `busy` is read, all
 * sequentially consistent), a worker either is counted or sees the job
 * closed: a late worker never touches a finished job.
 *
 * On a busy machine the OS may put a worker aside in the middle of a chunk,
 * and the caller then waits milliseconds for work of microseconds. When
 * waits out of all proportion to the job come again and again, the pool
 * runs the next jobs on the calling thread alone (POOL_SOLO_JOBS of them),
 * then tries again: the results are the same either way, only the speed
 * changes.
 *
 * Workers learn of a new job from `generation`: they spin on it for a while,
 * then sleep on the condition variable. Sleeping is race-free the same way: a
 * worker counts itself in `sleepers` before re-checking the generation under
 * the mutex, and the caller checks `sleepers` after bumping the generation. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Spins before sleeping: tens of microseconds on current x86 cores, more than
 * the gap between two matmuls of a forward pass, far less than a human. */
#define POOL_SPINS 20000
/* A wait longer than this plus twice the caller's own share of the job... */
#define POOL_STALL_MS 0.2
/* ...and this many such stalls among the last POOL_STALL_WINDOW jobs (one
 * alone is the hypervisor or a daemon taking a core for a moment, and going
 * solo for it cost a quiet virtual machine 8-18 % of its decode speed)... */
#define POOL_STALLS 3
#define POOL_STALL_WINDOW 256
/* ...make the pool run this many jobs on the caller alone (a few tokens). */
#define POOL_SOLO_JOBS 1000

struct Pool {
    int n_threads;
    pthread_t *threads;
    PoolFn fn;
    void *arg;
    int n_chunks;
    atomic_int next;     /* the next chunk to hand out */
    atomic_bool open;    /* chunks may still be taken */
    atomic_int busy;     /* workers inside the current job */
    atomic_uint generation;
    atomic_int sleepers;
    atomic_bool quit;
    int solo;            /* jobs left to run on the caller alone */
    int stalls, window;  /* stalls among the jobs of the current window, and those jobs */
    bool adaptive;       /* falls back to solo after stalls (POOL_SOLO=0 in the environment: never) */
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int pool_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

/* Takes and runs chunks until none are left. */
static void run_chunks(Pool *p) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_chunks) return;
        p->fn(p->arg, i);
    }
}

/* Waits until the generation differs from seen; returns the new one. */
static unsigned wait_job(Pool *p, unsigned seen) {
    for (int i = 0; i < POOL_SPINS; i++) {
        unsigned g = atomic_load(&p->generation);
        if (g != seen || atomic_load(&p->quit)) return g;
        cpu_relax();
    }
    atomic_fetch_add(&p->sleepers, 1);
    pthread_mutex_lock(&p->mu);
    unsigned g;
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->wake, &p->mu);
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    return g;
}

static void *worker_main(void *arg) {
    Pool *p = arg;
    unsigned seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load(&p->quit)) break;
        atomic_fetch_add(&p->busy, 1);
        if (atomic_load(&p->open)) run_chunks(p);
        atomic_fetch_sub(&p->busy, 1);
    }
    return NULL;
}

Pool *pool_create(int n_threads) {
    Pool *p = xcalloc(1, sizeof *p);
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    const char *env = getenv("POOL_SOLO");
    p->adaptive = !(env && strcmp(env, "0") == 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->open, false);
    atomic_init(&p->busy, 0);
    atomic_init(&p->generation, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = xcalloc((size_t)p->n_threads, sizeof *p->threads);
    for (int t = 1; t < p->n_threads; t++)
        if (pthread_create(&p->threads[t], NULL, worker_main, p) != 0) {
            fprintf(stderr, "fatal: cannot start a thread for the pool\n");
            exit(1);
        }
    return p;
}

int pool_threads(const Pool *p) { return p->n_threads; }

void pool_run(Pool *p, PoolFn fn, void *arg, int n_chunks) {
    if (p->n_threads == 1 || n_chunks <= 1 || p->solo > 0) {
        if (p->solo > 0) p->solo--;
        for (int i = 0; i < n_chunks; i++) fn(arg, i);
        return;
    }
    if (++p->window >= POOL_STALL_WINDOW) p->window = p->stalls = 0;
    p->fn = fn;
    p->arg = arg;
    p->n_chunks = n_chunks;
    atomic_store(&p->next, 0);
    atomic_store(&p->open, true);         /* publishes fn, arg, n_chunks */
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    double t0 = time_now_ms();
    run_chunks(p);
    atomic_store(&p->open, false);
    if (atomic_load(&p->busy) == 0) return;
    /* Wait for workers still running a chunk; yield now and then in case one lost its core. */
    double t1 = time_now_ms();
    for (long i = 0; atomic_load(&p->busy) > 0; i++) {
        if (i % 256 == 255) sched_yield();
        else cpu_relax();
    }
    if (p->adaptive && time_now_ms() - t1 > POOL_STALL_MS + 2 * (t1 - t0) && ++p->stalls >= POOL_STALLS) {
        p->solo = POOL_SOLO_JOBS;
        p->stalls = 0;
    }
}

void pool_free(Pool *p) {
    if (!p) return;
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->generation, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}
