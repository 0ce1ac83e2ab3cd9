/* sampling-bench: what choosing one token costs (common/run/sampling.c), per
 * sampler setting, at Qwen3's vocabulary of 151,936 logits.
 *
 *   sampling-bench [--vocab N] [--tokens N] [--rounds N]
 *
 * The logits are synthetic but shaped like a model's: most about normal
 * around 0 (spread 2.5), a few hundred tokens several units above, one
 * clear best; they change every token (a new seed), as a model's do. Each
 * round times --tokens choices per setting, the settings interleaved round
 * by round; printed: the median of the rounds' mean ms per token, and their
 * spread (lowest - highest), twice: cold, each token's logits read where
 * they lie, after the other tokens' (60 MB in all at Qwen3's size: beyond
 * this core's own caches, in memory or a large shared cache), and warm,
 * copied by this thread to a buffer just before (not timed), as the LM head
 * has just written them in the server (there on every backend thread, so
 * partly in another core's cache: warm is the best case). Timed in this
 * thread's CPU time, not wall time, per choice (two clock reads each):
 * the choice runs on one thread, and on a shared machine its CPU time is its
 * cost while the wall clock also counts the other programs. Never part of
 * make test. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling.h"
#include "util.h"

typedef struct {
    const char *name;
    SamplerParams p;
    int penalize; /* accepts its tokens: penalties see a history */
} Setting;

/* This thread's CPU time in ms. */
static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Logits of one token (see the top comment). */
static void make_logits(Rng *r, float *l, int vocab) {
    for (int i = 0; i < vocab; i++) {
        double u = rng_uniform(r) + rng_uniform(r) + rng_uniform(r) - 1.5; /* about normal, variance 1/4 */
        double v = 5.0 * u;
        if (rng_uniform(r) < 0.002) v += 6.0 + 4.0 * rng_uniform(r);
        l[i] = (float)v;
    }
    l[(int)(rng_next(r) % (uint64_t)vocab)] = 16.0f;
}

int main(int argc, char **argv) {
    int vocab = 151936, tokens = 100, rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--vocab") == 0) vocab = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--tokens") == 0) tokens = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[++i]);
        else {
            bool help = strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
            fprintf(help ? stdout : stderr, "usage: sampling-bench [--vocab N] [--tokens N] [--rounds N]\n"
                                            "Times sampler_sample per sampler setting (see tools/bench/sampling_bench.c).\n");
            return help ? 0 : 2;
        }
    }
    if (vocab < 2 || tokens < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "sampling-bench: --vocab >= 2, --tokens >= 1, --rounds 1..99\n");
        return 2;
    }
    Setting set[] = {
        {"greedy (temperature 0)", sampler_params_default(), 0},
        {"server default (temperature 1)", sampler_params_default(), 0},
        {"temperature 0.7, top-p 0.8, top-k 20", sampler_params_default(), 0},
        {"temperature 0.6, top-p 0.95", sampler_params_default(), 0},
        {"temperature 1, min-p 0.05, penalties", sampler_params_default(), 1},
    };
    set[1].p.temperature = 1.0f;
    set[2].p.temperature = 0.7f, set[2].p.top_p = 0.8f, set[2].p.top_k = 20;
    set[3].p.temperature = 0.6f, set[3].p.top_p = 0.95f;
    set[4].p.temperature = 1.0f, set[4].p.min_p = 0.05f, set[4].p.presence_penalty = 0.5f;
    set[4].p.frequency_penalty = 0.3f, set[4].p.repetition_penalty = 1.1f;
    enum { N_SET = sizeof set / sizeof set[0] };
    /* the logits of every token, made once: the timing is the sampler's alone */
    float *logits = xmalloc(sizeof(float) * (size_t)vocab * (size_t)tokens);
    Rng gen;
    rng_seed(&gen, 7);
    for (int t = 0; t < tokens; t++) make_logits(&gen, logits + (size_t)t * (size_t)vocab, vocab);
    /* warm: each token's logits copied into fresh first (not timed), as the
     * LM head has just written them in the server */
    float *fresh = xmalloc(sizeof(float) * (size_t)vocab);
    double ms[2][N_SET][99];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < N_SET; k++)
            for (int warm = 0; warm < 2; warm++) {
                Sampler *s = sampler_create(&set[k].p, vocab);
                double spent = 0.0;
                for (int t = 0; t < tokens; t++) {
                    const float *l = logits + (size_t)t * (size_t)vocab;
                    if (warm) l = memcpy(fresh, l, sizeof(float) * (size_t)vocab);
                    double t0 = cpu_ms();
                    int32_t id = sampler_sample(s, l, NULL);
                    spent += cpu_ms() - t0;
                    if (set[k].penalize) sampler_accept(s, id);
                }
                ms[warm][k][r] = spent / tokens;
                sampler_free(s);
            }
    printf("choosing a token (thread CPU time), vocabulary %d, %d tokens a round, %d rounds interleaved;\n"
           "cold: the logits beyond this core's caches; warm: just written by this thread:\n", vocab, tokens, rounds);
    printf("  %-40s %9s %15s %9s %15s\n", "sampler", "cold ms", "spread", "warm ms", "spread");
    for (int k = 0; k < N_SET; k++) {
        printf("  %-40s", set[k].name);
        for (int warm = 0; warm < 2; warm++) {
            double *m = ms[warm][k];
            qsort(m, (size_t)rounds, sizeof(double), cmp_double);
            printf(" %9.3f %7.3f - %.3f", m[rounds / 2], m[0], m[rounds - 1]);
        }
        printf("\n");
    }
    free(fresh);
    free(logits);
    return 0;
}
