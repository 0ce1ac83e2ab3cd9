/* membw: the read bandwidth of this machine, the ceiling of batch-1 decode.
 *
 *   membw [--mb N] [--runs N] [--threads N] [--json]
 *
 * Each thread sums its own slice of one large buffer (far larger than the
 * caches) with wide loads; a run's bandwidth is bytes read / wall time from the
 * moment all threads start to the moment the last one ends. Reported: the best
 * of --runs runs with 1 thread, and with N threads (default: one per core),
 * where "N threads" is the better of N and 2N threads: a thread waiting for
 * memory leaves its core idle, and a second one on the core can fill it.
 * Decoding one token reads every weight once, so tokens/s can never exceed
 * bandwidth / weight bytes: the bench reports decode speed as a share of that.
 * The figure must be a true ceiling, or the share flatters: so the loads are
 * the widest the machine has, unrolled eight deep (one core must issue reads
 * fast enough to be limited by memory, not by the loop), the buffer sits on
 * huge pages where the kernel allows (no TLB misses), and the runs are many
 * and short (on a shared machine, the best run is the one nobody disturbed). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MAX_THREADS 128
#define HUGE_PAGE (2u << 20)

typedef struct {
    const uint64_t *p;
    size_t n;                /* uint64 words of this thread's slice */
    uint64_t sum;            /* kept so the reads cannot be optimized away */
    double t0, t1;           /* this thread's own start and end */
    pthread_barrier_t *start;
} Slice;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Portable sum: four independent accumulators so the adds do not serialize. */
static uint64_t sum_plain(const uint64_t *p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; i++) a += p[i];
    return a + b + c + d;
}

#if defined(__x86_64__)
/* 256-bit loads, 128 bytes per iteration: one core can then issue reads fast
 * enough to be limited by memory, not by the loop. */
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_plain(p + i, n - i);
}

/* 512-bit loads, eight independent ones per iteration (512 bytes): enough
 * reads in flight that the core waits on memory, never on the adds. */
__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint64_t *p, size_t n) {
    __m512i acc[8];
    for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) acc[k] = _mm512_add_epi64(acc[k], _mm512_loadu_si512(p + i + 8 * k));
    for (int k = 1; k < 8; k++) acc[0] = _mm512_add_epi64(acc[0], acc[k]);
    return (uint64_t)_mm512_reduce_add_epi64(acc[0]) + sum_plain(p + i, n - i);
}
#endif

static uint64_t sum_words(const uint64_t *p, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return sum_avx512(p, n);
    if (__builtin_cpu_supports("avx2")) return sum_avx2(p, n);
#endif
    return sum_plain(p, n);
}

static void *reader(void *arg) {
    Slice *s = arg;
    pthread_barrier_wait(s->start);
    s->t0 = now_s();
    s->sum = sum_words(s->p, s->n);
    s->t1 = now_s();
    return NULL;
}

/* GB/s of one run with t threads over buf[0..words). The run lasts from the
 * first thread's start to the last thread's end, as each thread measured it
 * (the main thread may be descheduled, so it does not hold the clock). */
static double run_once(const uint64_t *buf, size_t words, int t) {
    pthread_t th[MAX_THREADS];
    Slice sl[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)t + 1);
    size_t per = words / (size_t)t;
    for (int i = 0; i < t; i++) {
        sl[i] = (Slice){buf + per * (size_t)i, per, 0, 0, 0, &start};
        pthread_create(&th[i], NULL, reader, &sl[i]);
    }
    pthread_barrier_wait(&start);
    uint64_t total = 0;
    double t0 = 0, t1 = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        total += sl[i].sum;
        if (i == 0 || sl[i].t0 < t0) t0 = sl[i].t0;
        if (i == 0 || sl[i].t1 > t1) t1 = sl[i].t1;
    }
    double dt = t1 - t0;
    pthread_barrier_destroy(&start);
    if (total == 42) fprintf(stderr, " "); /* uses the sum */
    return (double)(per * (size_t)t * 8) / dt / 1e9;
}

static double best_of(const uint64_t *buf, size_t words, int t, int runs) {
    double best = 0;
    for (int r = 0; r < runs; r++) {
        double g = run_once(buf, words, t);
        if (g > best) best = g;
    }
    return best;
}

/* The usage on f; returns rc (0 for --help, 2 for a bad command line). */
static int usage(FILE *f, int rc) {
    fprintf(f, "usage: membw [--mb N] [--runs N] [--threads N] [--json]\n"
               "Read bandwidth (GB/s, 1e9 bytes) with 1 thread and with N (the better of N and 2N\n"
               "threads; default N: one per core), best of --runs runs (default 20) over a --mb MB buffer\n"
               "(default 1024).\n");
    return rc;
}

/* The buffer, on huge pages where the kernel gives them (an advice: without
 * them the probe still runs, on small pages). */
static uint64_t *buffer_alloc(size_t bytes) {
    size_t size = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    uint64_t *buf = aligned_alloc(HUGE_PAGE, size);
#if defined(MADV_HUGEPAGE)
    if (buf) madvise(buf, size, MADV_HUGEPAGE);
#endif
    return buf;
}

int main(int argc, char **argv) {
    long mb = 1024, runs = 20, threads = sysconf(_SC_NPROCESSORS_ONLN);
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--mb") == 0) mb = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0) runs = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) threads = atol(argv[++i]);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return usage(stdout, 0);
        else return usage(stderr, 2);
    }
    if (mb < 64 || runs < 1 || threads < 1 || 2 * threads > MAX_THREADS) return usage(stderr, 2);
    size_t words = (size_t)mb * 1024 * 1024 / 8;
    uint64_t *buf = buffer_alloc(words * 8);
    if (!buf) {
        fprintf(stderr, "membw: cannot allocate %ld MB\n", mb);
        return 1;
    }
    for (size_t i = 0; i < words; i++) buf[i] = i; /* touch every page: no zero-page reads */
    double one = best_of(buf, words, 1, (int)runs), many = one;
    long best_threads = 1;
    for (long t = threads; t > 1 && t <= 2 * threads; t += threads) {
        double g = best_of(buf, words, (int)t, (int)runs);
        if (g > many) {
            many = g;
            best_threads = t;
        }
    }
    if (json)
        printf("{\"buffer_mb\":%ld,\"runs\":%ld,\"gbps_1\":%.2f,\"threads\":%ld,\"gbps_n\":%.2f,"
               "\"best_threads\":%ld}\n",
               mb, runs, one, threads, many, best_threads);
    else
        printf("read bandwidth, %ld MB buffer, best of %ld runs:\n  1 thread   %6.2f GB/s\n  %ld threads %6.2f GB/s"
               " (best with %ld threads)\n",
               mb, runs, one, threads, many, best_threads);
    free(buf);
    return 0;
}
