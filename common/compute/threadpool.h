/* threadpool.h: a persistent pool of worker threads for the parallel backend.
 *
 * A forward pass makes hundreds of matmul calls per token, each a few tens of
 * microseconds of work, so threads are created once and wait for jobs: first
 * by spinning briefly (a new job usually follows within microseconds), then by
 * sleeping on a condition variable (so an idle engine does not burn the CPU).
 *
 * pool_run(p, fn, arg, n) calls fn(arg, i) once for every chunk i in [0, n)
 * and returns when all are done. The calling thread works too, and chunks are
 * handed out one at a time to whichever thread asks first, so a worker that
 * the operating system has put aside (a busy machine) delays the job by at
 * most the chunk it holds. What a chunk computes is up to fn: the backends
 * make a chunk a range of output columns or heads, never part of one sum, so
 * which thread runs which chunk never changes a result.
 *
 * On a machine busy with other programs, a worker the OS puts aside in the
 * middle of a chunk makes the caller wait; after a few such stalls close
 * together the pool runs the next jobs on the caller alone for a while
 * (POOL_SOLO=0 in the environment turns this off, as the tests do to keep
 * every thread busy). */
#ifndef THREADPOOL_H
#define THREADPOOL_H

typedef void (*PoolFn)(void *arg, int chunk);
typedef struct Pool Pool;

/* n_threads >= 1, counting the caller; 1 makes a pool without workers. */
Pool *pool_create(int n_threads);
int pool_threads(const Pool *p);
void pool_run(Pool *p, PoolFn fn, void *arg, int n_chunks);
void pool_free(Pool *p);

/* The number of online cores (at least 1). */
int pool_cores(void);

#endif
