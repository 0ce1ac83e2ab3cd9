/* flops: the arithmetic peak of this machine, the ceiling of batched decode.
 *
 *   flops [--ms N] [--runs N] [--threads N] [--json]
 *
 * Decoding B sequences at once reads each weight once for B rows, so as B
 * grows a step stops waiting for memory and waits for arithmetic. This
 * measures the two kinds the kernels do (common/compute/simd_kernels.h), with the
 * widest instructions the CPU has: float multiply-adds (F32, F16 and BF16
 * weights: 2 flops each) and 8-bit integer multiply-adds summed into 32-bit
 * lanes (quantized weights: vpdpbusd with AVX-512 VNNI, vpmaddubsw + vpmaddwd
 * with AVX2). Each thread runs independent chains of them for about --ms
 * milliseconds; a run's rate is the operations of all threads over the wall
 * time from the first start to the last end; the best of several runs is
 * reported, for 1 thread and for N threads (default: one per core). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CHAINS 12 /* independent accumulators: enough to cover the latency of each unit */
#define UNROLL _Pragma("GCC unroll 16") /* the chains stay in registers */

typedef enum { KIND_F32, KIND_I8 } Kind;

typedef struct {
    Kind kind;
    long iters;
    double ops;    /* operations done: flops (F32) or multiply-adds (I8) */
    double t0, t1; /* this thread's own start and end */
    float sink;
    pthread_barrier_t *start;
} Job;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Portable fallback: scalar multiply-adds the compiler may vectorize. */
static double f32_plain(long iters, float *sink) {
    float acc[CHAINS] = {0}, a = 0.999f, b = 1e-3f;
    for (long i = 0; i < iters; i++)
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * a + b;
    for (int c = 0; c < CHAINS; c++) *sink += acc[c];
    return 2.0 * CHAINS * (double)iters;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double f32_avx512(long iters, float *sink) {
    __m512 acc[CHAINS], a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    for (int c = 0; c < CHAINS; c++) *sink += _mm512_reduce_add_ps(acc[c]);
    return 2.0 * 16 * CHAINS * (double)iters;
}

__attribute__((target("avx2,fma"))) static double f32_avx2(long iters, float *sink) {
    __m256 acc[CHAINS], a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    float lanes[8];
    for (int c = 0; c < CHAINS; c++) {
        _mm256_storeu_ps(lanes, acc[c]);
        for (int l = 0; l < 8; l++) *sink += lanes[l];
    }
    return 2.0 * 8 * CHAINS * (double)iters;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double i8_vnni(long iters, float *sink) {
    __m512i acc[CHAINS], u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_epi32(c);
    for (long i = 0; i < iters; i++)
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbusd_epi32(acc[c], u, s);
    for (int c = 0; c < CHAINS; c++) *sink += (float)_mm512_reduce_add_epi32(acc[c]);
    return 64.0 * CHAINS * (double)iters;
}

__attribute__((target("avx2"))) static double i8_avx2(long iters, float *sink) {
    __m256i acc[CHAINS], u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_epi32(c);
    for (long i = 0; i < iters; i++)
        UNROLL for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
    int32_t lanes[8];
    for (int c = 0; c < CHAINS; c++) {
        _mm256_storeu_si256((__m256i *)lanes, acc[c]);
        for (int l = 0; l < 8; l++) *sink += (float)lanes[l];
    }
    return 32.0 * CHAINS * (double)iters;
}
#endif

/* The widest build this CPU runs, as the kernels choose theirs. */
static double run_kind(Kind kind, long iters, float *sink) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vnni");
    if (kind == KIND_F32 && avx512) return f32_avx512(iters, sink);
    if (kind == KIND_F32 && avx2) return f32_avx2(iters, sink);
    if (kind == KIND_I8 && avx512) return i8_vnni(iters, sink);
    if (kind == KIND_I8 && avx2) return i8_avx2(iters, sink);
#endif
    if (kind == KIND_F32) return f32_plain(iters, sink);
    double ops = 0; /* 8-bit products as plain integer multiply-adds */
    int32_t acc[CHAINS] = {0};
    for (long i = 0; i < iters; i++)
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] += (int8_t)(i & 7) * (int8_t)c;
    for (int c = 0; c < CHAINS; c++) *sink += (float)acc[c];
    ops = (double)CHAINS * (double)iters;
    return ops;
}

static void *worker(void *arg) {
    Job *j = arg;
    pthread_barrier_wait(j->start);
    j->t0 = now_s();
    j->ops = run_kind(j->kind, j->iters, &j->sink);
    j->t1 = now_s();
    return NULL;
}

/* Operations per second of one run with t threads. */
static double run_once(Kind kind, long iters, int t) {
    pthread_t th[64];
    Job jobs[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)t + 1);
    for (int i = 0; i < t; i++) {
        jobs[i] = (Job){kind, iters, 0, 0, 0, 0, &start};
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    pthread_barrier_wait(&start);
    double ops = 0, t0 = 0, t1 = 0, sink = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        ops += jobs[i].ops;
        sink += jobs[i].sink;
        if (i == 0 || jobs[i].t0 < t0) t0 = jobs[i].t0;
        if (i == 0 || jobs[i].t1 > t1) t1 = jobs[i].t1;
    }
    pthread_barrier_destroy(&start);
    if (sink == 42) fprintf(stderr, " "); /* uses the results */
    return ops / (t1 - t0);
}

/* The best rate of runs, each about ms milliseconds (the iteration count is
 * found by a short calibration run). */
static double best_of(Kind kind, int t, int runs, long ms) {
    long iters = 1 << 16;
    double rate = run_once(kind, iters, 1); /* ops per second on one thread */
    float sink = 0;
    double per_iter = run_kind(kind, 1, &sink);
    iters = (long)(rate * (double)ms / 1000 / per_iter) + 1;
    double best = 0;
    for (int r = 0; r < runs; r++) {
        double g = run_once(kind, iters, t);
        if (g > best) best = g;
    }
    return best;
}

/* The usage on f; returns rc (0 for --help, 2 for a bad command line). */
static int usage(FILE *f, int rc) {
    fprintf(f, "usage: flops [--ms N] [--runs N] [--threads N] [--json]\n"
               "Peak float multiply-add rate (GFLOP/s, 2 per multiply-add) and 8-bit integer\n"
               "multiply-add rate (G/s) with 1 and N threads, best of runs of about N ms.\n");
    return rc;
}

int main(int argc, char **argv) {
    long ms = 200, runs = 5, threads = sysconf(_SC_NPROCESSORS_ONLN);
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--ms") == 0) ms = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0) runs = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) threads = atol(argv[++i]);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return usage(stdout, 0);
        else return usage(stderr, 2);
    }
    if (ms < 10 || ms > 10000 || runs < 1 || runs > 100 || threads < 1 || threads > 64) return usage(stderr, 2);
    double f1 = best_of(KIND_F32, 1, (int)runs, ms) / 1e9, i1 = best_of(KIND_I8, 1, (int)runs, ms) / 1e9;
    double fn = threads > 1 ? best_of(KIND_F32, (int)threads, (int)runs, ms) / 1e9 : f1;
    double in = threads > 1 ? best_of(KIND_I8, (int)threads, (int)runs, ms) / 1e9 : i1;
    if (json)
        printf("{\"runs\":%ld,\"threads\":%ld,\"f32_gflops_1\":%.1f,\"f32_gflops_n\":%.1f,"
               "\"i8_gmacs_1\":%.1f,\"i8_gmacs_n\":%.1f}\n",
               runs, threads, f1, fn, i1, in);
    else
        printf("peak arithmetic, best of %ld runs:\n"
               "  float multiply-add  %8.1f GFLOP/s (1 thread)  %8.1f GFLOP/s (%ld threads)\n"
               "  8-bit multiply-add  %8.1f G/s     (1 thread)  %8.1f G/s     (%ld threads)\n",
               runs, f1, fn, threads, i1, in, threads);
    return 0;
}
