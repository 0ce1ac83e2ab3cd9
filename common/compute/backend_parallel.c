/* backend_parallel.c: the simd kernels on a persistent thread pool.
 *
 * A matmul is cut into chunks of output columns (whole tiles), attention into
 * chunks of heads; never the sum inside one output. Each output is thus
 * computed by exactly the code that would compute it on one thread, and the
 * result is bitwise the same for any thread count. There is one chunk per
 * thread, taken by whichever thread asks first (see threadpool.h). Calls too
 * small to repay waking the pool run on the calling thread alone. */
#include <stdio.h>
#include <stdlib.h>

#include "backend_simd.h"
#include "threadpool.h"
#include "util.h"

/* Below this many multiply-adds a matmul or attention call stays on one thread. */
#define PAR_MIN_WORK 32768.0
/* Chunks per thread. One: each thread streams one contiguous run of weight
 * rows, so its prefetches stay ahead from start to end; more chunks cost a
 * restart each (1-4 % of a float decode, 10-17 % of a quantized one, for a
 * tail that was no shorter). A thread the OS puts aside then holds half the
 * job: the pool's stall rule (threadpool.h) covers that. */
#define PAR_CHUNKS_PER_THREAD 1
/* for_rows' chunks per thread: rows need no prefetch run, and one row can
 * cost far more than another (a token chosen under a grammar beside a greedy
 * one), so they go out in small pieces that whoever is free takes. */
#define PAR_ROW_CHUNKS_PER_THREAD 8

typedef struct {
    const SimdKernels *k; /* NULL: scalar kernels */
    Pool *pool;
    SimdScratch scratch;
    char name[32];
} ParImpl;

typedef struct {
    const SimdKernels *k;
    float *y;
    SimdActs a;
    const Tensor *w;
    int tile;     /* columns per tile */
    int n_chunks; /* of rows (prepare) or of tiles (columns) */
} MatmulJob;

/* [begin, end) of chunk i when count items are cut into n chunks. */
static void chunk_range(int count, int i, int n, int *begin, int *end) {
    *begin = (int)((long long)count * i / n);
    *end = (int)((long long)count * (i + 1) / n);
}

static int min_int(int a, int b) { return a < b ? a : b; }

static void job_prepare(void *arg, int chunk) {
    MatmulJob *j = arg;
    int r0, r1;
    chunk_range(j->a.n, chunk, j->n_chunks, &r0, &r1);
    if (r0 < r1) j->k->prepare_rows(&j->a, r0, r1);
}

static void job_columns(void *arg, int chunk) {
    MatmulJob *j = arg;
    int out = (int)j->w->ne[1], tiles = (out + j->tile - 1) / j->tile, t0, t1;
    chunk_range(tiles, chunk, j->n_chunks, &t0, &t1);
    int c0 = t0 * j->tile, c1 = min_int(t1 * j->tile, out);
    if (c0 >= c1) return;
    if (j->k) j->k->matmul_cols(j->y, &j->a, j->w, c0, c1);
    else scalar_matmul_rows(j->y, j->a.x, j->w, j->a.n, c0, c1);
}

static void parallel_matmul(Backend *be, float *y, const float *x, const Tensor *w, int n) {
    ParImpl *im = be->impl;
    const SimdKernels *k = simd_kernels_for(im->k, w->type);
    MatmulJob j = {k, y, {0}, w, simd_tile_cols(k, w->type), 1};
    simd_acts_init(&j.a, &im->scratch, k, x, n, w->ne[0], w->type);
    int threads = pool_threads(im->pool);
    bool wide = threads > 1 && (double)n * (double)w->ne[0] * (double)w->ne[1] >= PAR_MIN_WORK;
    if (k) { /* quantize the activation rows (a no-op for float weights) */
        j.n_chunks = wide ? min_int(n, threads * PAR_CHUNKS_PER_THREAD) : 1;
        pool_run(im->pool, job_prepare, &j, j.n_chunks);
    }
    int tiles = ((int)w->ne[1] + j.tile - 1) / j.tile;
    j.n_chunks = wide ? min_int(tiles, threads * PAR_CHUNKS_PER_THREAD) : 1;
    pool_run(im->pool, job_columns, &j, j.n_chunks);
}

typedef struct {
    const SimdKernels *k;
    float *out;
    const float *q;
    const KvSpan *spans;
    int n_spans;
    AttnShape s;
    int n_chunks;
} AttnJob;

static void job_heads(void *arg, int chunk) {
    AttnJob *j = arg;
    int h0, h1;
    chunk_range(j->s.n_heads, chunk, j->n_chunks, &h0, &h1);
    if (h0 >= h1) return;
    if (j->k) j->k->attention_heads(j->out, j->q, j->spans, j->n_spans, j->s, h0, h1);
    else scalar_attention_heads(j->out, j->q, j->spans, j->n_spans, j->s, h0, h1);
}

static void parallel_attention(Backend *be, float *out, const float *q, const KvSpan *spans, int n_spans,
                               AttnShape s) {
    ParImpl *im = be->impl;
    AttnJob j = {im->k, out, q, spans, n_spans, s, 1};
    double keys = 0;
    for (int i = 0; i < n_spans; i++) keys += spans[i].n;
    if (keys * s.n_heads * s.head_dim * 2 >= PAR_MIN_WORK)
        j.n_chunks = min_int(s.n_heads, pool_threads(im->pool) * PAR_CHUNKS_PER_THREAD);
    pool_run(im->pool, job_heads, &j, j.n_chunks);
}

typedef struct {
    RowFn fn;
    void *arg;
    int n, n_chunks;
} RowsJob;

static void job_rows(void *arg, int chunk) {
    RowsJob *j = arg;
    int r0, r1;
    chunk_range(j->n, chunk, j->n_chunks, &r0, &r1);
    for (int i = r0; i < r1; i++) j->fn(j->arg, i);
}

/* Whole rows to threads; one row stays on the calling thread. */
static void parallel_rows(Backend *be, int n, RowFn fn, void *arg) {
    ParImpl *im = be->impl;
    RowsJob j = {fn, arg, n, min_int(n, pool_threads(im->pool) * PAR_ROW_CHUNKS_PER_THREAD)};
    if (j.n_chunks <= 1) rows_in_order(be, n, fn, arg);
    else pool_run(im->pool, job_rows, &j, j.n_chunks);
}

static void parallel_destroy(Backend *be) {
    ParImpl *im = be->impl;
    pool_free(im->pool);
    simd_scratch_free(&im->scratch);
    free(im);
    free(be);
}

Backend *backend_parallel_create(const SimdKernels *k, int n_threads) {
    if (n_threads <= 0) n_threads = pool_cores();
    Backend *be = xcalloc(1, sizeof *be);
    ParImpl *im = xcalloc(1, sizeof *im);
    im->k = k;
    im->pool = pool_create(n_threads);
    snprintf(im->name, sizeof im->name, "parallel");
    be->name = im->name;
    be->n_threads = n_threads;
    be->matmul = parallel_matmul;
    be->attention = parallel_attention;
    be->for_rows = parallel_rows;
    be->destroy = parallel_destroy;
    be->impl = im;
    return be;
}
