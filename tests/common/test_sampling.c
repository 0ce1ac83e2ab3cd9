/* test_sampling.c: the samplers, the generator and the exp of common/run/sampling.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops.h"
#include "sampling.h"
#include "util.h"

/* Fills logits[n] with a fixed, irregular pattern (no ties). */
static void fill_logits(float *logits, int n) {
    for (int i = 0; i < n; i++) logits[i] = (float)(3.0 * sin(0.7 * i + 0.3) + 0.01 * i);
}

static Sampler *make(float temperature, int top_k, float top_p, float min_p, uint64_t seed, int vocab) {
    SamplerParams p = sampler_params_default();
    p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
    Sampler *s = sampler_create(&p, vocab);
    CHECK(s != NULL);
    return s;
}

/* Draws n tokens from the same logits. */
static void draw_n(Sampler *s, const float *logits, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = sampler_sample(s, logits, NULL);
}

/* Frequencies of n draws, freq[vocab]. */
static void frequencies(Sampler *s, const float *logits, int vocab, int n, double *freq) {
    for (int i = 0; i < vocab; i++) freq[i] = 0.0;
    for (int i = 0; i < n; i++) {
        int32_t t = sampler_sample(s, logits, NULL);
        if (t >= 0 && t < vocab) freq[t] += 1.0 / n;
    }
}

/* ---- the generator and exp ------------------------------------------------- */

TEST(sampling_rng_splitmix64) {
    /* SplitMix64's published first outputs for seed 0 */
    Rng r;
    rng_seed(&r, 0);
    CHECK(rng_next(&r) == 0xe220a8397b1dcdafull);
    CHECK(rng_next(&r) == 0x6e789e6aa1b965f4ull);
    CHECK(rng_next(&r) == 0x06c45d188009454full);
    rng_seed(&r, 12345);
    double lo = 1.0, hi = 0.0, sum = 0.0;
    for (int i = 0; i < 100000; i++) {
        double u = rng_uniform(&r);
        CHECK(u >= 0.0 && u < 1.0);
        CHECK(u * 0x1.0p53 == floor(u * 0x1.0p53));
        lo = u < lo ? u : lo, hi = u > hi ? u : hi, sum += u;
    }
    CHECK(lo < 1e-4 && hi > 1 - 1e-4);
    CHECK_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(sampling_exp_matches_libm) {
    double worst = 0.0;
    for (double x = -708.0; x <= 700.0; x += 0.0137) {   /* below -708 e^x is subnormal */
        double want = exp(x), got = sampling_exp(x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    for (double x = -1.0; x <= 1.0; x += 1e-4) {
        double rel = fabs(sampling_exp(x) - exp(x)) / exp(x);
        if (rel > worst) worst = rel;
    }
    CHECK_MSG(worst < 1e-15, "worst relative error %g", worst);
    for (double x = -745.0; x < -708.0; x += 0.01) CHECK(fabs(sampling_exp(x) - exp(x)) <= 0x1.0p-1074 * 4);
    CHECK(sampling_exp(0.0) == 1.0);
    CHECK(sampling_exp(-INFINITY) == 0.0);
    CHECK(sampling_exp(-800.0) == 0.0);
    CHECK(isinf(sampling_exp(800.0)));
    CHECK(isnan(sampling_exp(NAN)));
}

/* ---- the sum in order --------------------------------------------------------- */

/* The vector code each test runs under (SIMD_ISA, see sampling.h): what this
 * machine has, then each one by name; a name it lacks runs the plain code. */
static const char *const ISAS[] = {"", "avx512", "avx2", "none"};
enum { N_ISAS = 4 };

static void use_isa(int k) {
    if (*ISAS[k]) setenv("SIMD_ISA", ISAS[k], 1);
    else unsetenv("SIMD_ISA");
}

/* Says so when a test's vector code by name is not on this machine. */
static void note_missing_isas(void) {
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512f")) fprintf(stderr, "    no AVX-512 here: SIMD_ISA=avx512 runs narrower code\n");
    if (!__builtin_cpu_supports("avx2")) fprintf(stderr, "    no AVX2 here: SIMD_ISA=avx2 runs the plain code\n");
#endif
}

/* n weights that try the blocks' rules, block by block in turn: weights far
 * below the sum (a block the vectors add), the same with one tie (a weight
 * exactly halfway between two multiples of the running sum's last place),
 * with one weight that takes the sum to the next binade, and a mix of ties,
 * crossings, zeros and weights near 1. The sum starts subnormal. */
static void hard_weights(Rng *r, double *w, int n) {
    double s = 0.0;
    int odd = 0; /* the one weight of a block that is not small */
    for (int i = 0; i < n; i++) {
        int mode = i / SAMPLING_SUM_BLOCK % 4, e;
        if (i % SAMPLING_SUM_BLOCK == 0) odd = (int)(rng_next(r) % SAMPLING_SUM_BLOCK);
        frexp(s, &e); /* s in [2^(e-1), 2^e): its last place is 2^(e-53) */
        double k = rng_uniform(r), tie = (double)(2 * (rng_next(r) % 4096) + 1) * ldexp(1.0, e - 54);
        double small = s * ldexp(1.0 + rng_uniform(r), -8 - (int)(rng_next(r) % 50));
        if (mode == 0) w[i] = small;
        else if (mode == 1) w[i] = i % SAMPLING_SUM_BLOCK == odd && s > 0x1p-900 ? tie : small;
        else if (mode == 2) w[i] = i % SAMPLING_SUM_BLOCK == odd ? s * (1.0 + rng_uniform(r)) : small;
        else if (s > 0x1p-900 && k < 0.05) w[i] = tie;
        else if (k < 0.10) w[i] = 0.0;
        else if (k < 0.11) w[i] = s * (0.5 + rng_uniform(r));
        else if (k < 0.70) w[i] = small;
        else w[i] = rng_uniform(r);
        if (i < 5) w[i] = ldexp(rng_uniform(r), -1070); /* subnormal: the sum starts there */
        s += w[i];
    }
}

/* sampling_sum_in_order against the plain loop, bit for bit, sums and ends. */
static bool sums_differ(const double *w, int n) {
    double *ends = xmalloc((size_t)(n / SAMPLING_SUM_BLOCK + 1) * sizeof *ends);
    double got = sampling_sum_in_order(w, n, ends), want = 0.0;
    bool differ = false;
    for (int i = 0; i < n; i++) {
        want += w[i];
        if ((i + 1) % SAMPLING_SUM_BLOCK == 0) differ |= memcmp(&ends[i / SAMPLING_SUM_BLOCK], &want, sizeof want) != 0;
    }
    double bare = sampling_sum_in_order(w, n, NULL);
    differ |= memcmp(&got, &want, sizeof want) != 0 || memcmp(&bare, &want, sizeof want) != 0;
    free(ends);
    return differ;
}

TEST(sampling_sum_in_order_is_the_plain_loop) {
    enum { N = 151936 };
    double *w = xmalloc(N * sizeof *w);
    Rng gen;
    rng_seed(&gen, 3);
    note_missing_isas();
    for (int k = 0; k < N_ISAS; k++) {
        use_isa(k);
        int bad = 0, cases = 0;
        for (int c = 0; c < 12; c++, cases++) {
            int n = c < 8 ? N : 1 + (int)(rng_next(&gen) % 5000);
            if (c % 3 == 0)
                for (int i = 0; i < n; i++) w[i] = sampling_exp(-40.0 * rng_uniform(&gen)); /* as a draw's */
            else
                hard_weights(&gen, w, n);
            /* special values in hard weights and in a draw's (0, 3, 6: blocks the vectors add) */
            if (c == 3 || c == 4) w[n / 2] = NAN;
            if (c == 5 || c == 6) w[n / 3] = INFINITY;
            if (c == 0 || c == 7) w[n - 100] = w[n - 99] = 0x1.fffffffffffffp1023; /* the sum overflows */
            bad += sums_differ(w, n);
        }
        CHECK_MSG(bad == 0, "SIMD_ISA '%s': %d of %d sums differ from the plain loop's", ISAS[k], bad, cases);
    }
    unsetenv("SIMD_ISA");
    free(w);
}

/* ---- greedy ----------------------------------------------------------------- */

TEST(sampling_greedy_is_argmax_bitwise) {
    enum { V = 1000 };
    float logits[V];
    fill_logits(logits, V);
    logits[417] = 19.5f;
    logits[600] = 19.5f;   /* a tie: the lower id, as argmax() does */
    float want_p, got_p;
    int32_t want = argmax(logits, V, &want_p);
    CHECK_EQ_INT(want, 417);
    /* temperature 0 is greedy whatever the filters say */
    float temps[] = {0.0f, -1.0f};
    for (int t = 0; t < 2; t++) {
        Sampler *s = make(temps[t], 5, 0.5f, 0.1f, 7, V);
        for (int i = 0; i < 3; i++) {
            int32_t got = sampler_sample(s, logits, &got_p);
            CHECK_EQ_INT(got, want);
            CHECK(memcmp(&got_p, &want_p, sizeof got_p) == 0);
            sampler_accept(s, got);   /* no penalties: nothing changes */
        }
        sampler_free(s);
    }
    SamplerParams d = sampler_params_default();
    CHECK(d.temperature <= 0 && d.top_k <= 0 && d.top_p >= 1 && d.min_p <= 0);
    CHECK(d.presence_penalty == 0 && d.frequency_penalty == 0 && d.repetition_penalty == 1);
}

TEST(sampling_top_k_one_and_tiny_p_are_greedy) {
    enum { V = 300 };
    float logits[V];
    fill_logits(logits, V);
    int32_t best = argmax(logits, V, NULL);
    Sampler *k1 = make(1.0f, 1, 1.0f, 0.0f, 3, V);
    Sampler *p0 = make(1.0f, 0, 0.0f, 0.0f, 3, V);
    Sampler *p_small = make(1.5f, 50, 1e-6f, 0.0f, 3, V);
    Sampler *m1 = make(1.0f, 0, 1.0f, 1.0f, 3, V);
    for (int i = 0; i < 20; i++) {
        float prob = 0.0f;
        CHECK_EQ_INT(sampler_sample(k1, logits, &prob), best);
        CHECK(prob == 1.0f);
        CHECK_EQ_INT(sampler_sample(p0, logits, NULL), best);
        CHECK_EQ_INT(sampler_sample(p_small, logits, NULL), best);
        CHECK_EQ_INT(sampler_sample(m1, logits, &prob), best);
        CHECK(prob == 1.0f);
    }
    sampler_free(k1), sampler_free(p0), sampler_free(p_small), sampler_free(m1);
}

/* ---- seeded reproducibility ---------------------------------------------------- */

TEST(sampling_seed_reproducible_and_pinned) {
    enum { V = 50, N = 12 };
    float logits[V];
    fill_logits(logits, V);
    int32_t a[N], b[N], c[N];
    Sampler *s1 = make(1.0f, 0, 1.0f, 0.0f, 42, V), *s2 = make(1.0f, 0, 1.0f, 0.0f, 42, V);
    Sampler *s3 = make(1.0f, 0, 1.0f, 0.0f, 43, V);
    draw_n(s1, logits, N, a), draw_n(s2, logits, N, b), draw_n(s3, logits, N, c);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    /* Pinned: a change of generator, exp or draw order shows up here. */
    const int32_t want_plain[N] = {38, 10, 18, 20, 1, 46, 11, 45, 20, 36, 11, 28};
    for (int i = 0; i < N; i++) CHECK_MSG(a[i] == want_plain[i], "plain draw %d: %d != %d", i, a[i], want_plain[i]);
    Sampler *f = make(0.7f, 10, 0.9f, 0.05f, 42, V);
    int32_t d[N];
    draw_n(f, logits, N, d);
    const int32_t want_filtered[N] = {11, 38, 38, 29, 47, 2, 38, 37, 29, 46, 38, 20};
    for (int i = 0; i < N; i++)
        CHECK_MSG(d[i] == want_filtered[i], "filtered draw %d: %d != %d", i, d[i], want_filtered[i]);
    sampler_free(s1), sampler_free(s2), sampler_free(s3), sampler_free(f);
}

TEST(sampling_logits_left_unchanged) {
    enum { V = 64 };
    float logits[V], copy[V];
    fill_logits(logits, V);
    memcpy(copy, logits, sizeof logits);
    SamplerParams p = sampler_params_default();
    p.temperature = 0.8f, p.top_k = 8, p.top_p = 0.9f, p.presence_penalty = 1.0f;
    p.frequency_penalty = 0.5f, p.repetition_penalty = 1.3f;
    Sampler *s = sampler_create(&p, V);
    for (int i = 0; i < 10; i++) sampler_accept(s, sampler_sample(s, logits, NULL));
    CHECK(memcmp(logits, copy, sizeof logits) == 0);
    sampler_free(s);
}

/* ---- filters that are off ------------------------------------------------------- */

TEST(sampling_top_k_beyond_vocab_and_p_one_are_off) {
    enum { V = 40, N = 200 };
    float logits[V];
    fill_logits(logits, V);
    int32_t off[N], big_k[N], k_eq_v[N], p_one[N];
    Sampler *s_off = make(0.9f, 0, 1.0f, 0.0f, 9, V), *s_k = make(0.9f, 1000, 1.0f, 0.0f, 9, V);
    Sampler *s_kv = make(0.9f, V, 1.0f, 0.0f, 9, V), *s_p = make(0.9f, 0, 1.0f, 0.0f, 9, V);
    draw_n(s_off, logits, N, off), draw_n(s_k, logits, N, big_k);
    draw_n(s_kv, logits, N, k_eq_v), draw_n(s_p, logits, N, p_one);
    CHECK(memcmp(off, big_k, sizeof off) == 0);
    CHECK(memcmp(off, k_eq_v, sizeof off) == 0);
    CHECK(memcmp(off, p_one, sizeof off) == 0);
    sampler_free(s_off), sampler_free(s_k), sampler_free(s_kv), sampler_free(s_p);
}

/* ---- the distribution ------------------------------------------------------------ */

/* The target distribution computed the plain way: softmax(logits / T) in double
 * with libm, sorted, top-k, top-p (smallest prefix with mass >= p), min-p. */
static void target_distribution(const float *logits, int V, float T, int k, float top_p, float min_p,
                                double *want) {
    int order[64];
    double prob[64], z = 0.0, max = logits[0];
    for (int i = 0; i < V; i++) max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < V; i++) z += prob[i] = exp((logits[i] - max) / T), order[i] = i;
    for (int i = 0; i < V; i++) prob[i] /= z;
    for (int i = 0; i < V; i++)   /* selection sort, best first */
        for (int j = i + 1; j < V; j++)
            if (prob[order[j]] > prob[order[i]]) {
                int t = order[i];
                order[i] = order[j], order[j] = t;
            }
    int keep = k > 0 && k < V ? k : V;
    double kz = 0.0, cum = 0.0;
    for (int i = 0; i < keep; i++) kz += prob[order[i]];
    for (int i = 0; i < keep; i++) {
        cum += prob[order[i]] / kz;
        if (top_p < 1.0f && cum >= top_p) {
            keep = i + 1;
            break;
        }
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) want[i] = 0.0;
    for (int i = 0; i < keep; i++)
        if (prob[order[i]] >= min_p * prob[order[0]]) sum += want[order[i]] = prob[order[i]];
    for (int i = 0; i < V; i++) want[i] /= sum;
}

static void check_distribution(float T, int k, float top_p, float min_p) {
    enum { V = 12, N = 60000 };
    float logits[V];
    fill_logits(logits, V);
    double want[V], got[V];
    target_distribution(logits, V, T, k, top_p, min_p, want);
    Sampler *s = make(T, k, top_p, min_p, 2024, V);
    frequencies(s, logits, V, N, got);
    for (int i = 0; i < V; i++) {
        if (want[i] == 0.0) CHECK_MSG(got[i] == 0.0, "T=%g k=%d p=%g min_p=%g: token %d drawn", T, k, top_p, min_p, i);
        CHECK_MSG(fabs(got[i] - want[i]) < 0.01, "T=%g k=%d p=%g min_p=%g: token %d freq %.4f want %.4f",
                  T, k, top_p, min_p, i, got[i], want[i]);
    }
    sampler_free(s);
}

TEST(sampling_distribution_matches_target) {
    check_distribution(1.0f, 0, 1.0f, 0.0f);    /* plain softmax */
    check_distribution(0.6f, 0, 1.0f, 0.0f);    /* sharper */
    check_distribution(2.0f, 0, 1.0f, 0.0f);    /* flatter */
    check_distribution(1.0f, 4, 1.0f, 0.0f);    /* top-k */
    check_distribution(1.0f, 0, 0.8f, 0.0f);    /* top-p */
    check_distribution(0.7f, 6, 0.8f, 0.0f);    /* top-p on the renormalized top-k */
    check_distribution(1.0f, 0, 1.0f, 0.2f);    /* min-p */
    check_distribution(0.6f, 20, 0.95f, 0.05f); /* Qwen3's thinking defaults, with min-p */
}

TEST(sampling_min_p_cuts_relative_to_best) {
    /* probabilities 0.5, 0.3, 0.15, 0.05 at T = 1; min_p 0.35 keeps p >= 0.175 */
    float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    Sampler *s = make(1.0f, 0, 1.0f, 0.35f, 11, 4);
    double got[4];
    frequencies(s, logits, 4, 40000, got);
    CHECK(got[2] == 0.0 && got[3] == 0.0);
    CHECK_NEAR(got[0], 0.625, 0.01);
    CHECK_NEAR(got[1], 0.375, 0.01);
    float prob;
    int32_t t = sampler_sample(s, logits, &prob);
    CHECK_NEAR(prob, t == 0 ? 0.625 : 0.375, 1e-6);
    sampler_free(s);
}

TEST(sampling_large_vocab_stays_in_top_k) {
    enum { V = 151936 };
    float *logits = xmalloc(V * sizeof *logits);
    fill_logits(logits, V);
    int32_t ids[20];
    float lp[20];
    CHECK_EQ_INT(sampler_top_logprobs(logits, V, 20, ids, lp), 20);
    Sampler *s = make(0.6f, 20, 0.95f, 0.0f, 5, V);
    for (int i = 0; i < 50; i++) {
        int32_t t = sampler_sample(s, logits, NULL);
        bool in_top = false;
        for (int j = 0; j < 20; j++) in_top |= ids[j] == t;
        CHECK_MSG(in_top, "token %d is not among the top 20", t);
    }
    sampler_free(s);
    free(logits);
}

/* ---- the fast paths against the plain algorithm -------------------------------- */

/* The sampler as sampling.h describes it, done the plain way: every candidate
 * sorted (larger logit first, then the lower id), every weight one
 * sampling_exp, sums and the draw in one loop each. */
typedef struct {
    float logit;
    int32_t id;
} RefCand;

static int ref_cand_cmp(const void *a, const void *b) {
    const RefCand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int32_t ref_sample(const SamplerParams *p, Rng *rng, const float *l, int V, float *prob) {
    float max = l[0];
    for (int i = 1; i < V; i++)
        if (l[i] > max) max = l[i];
    bool k_on = p->top_k > 0 && p->top_k < V, p_on = p->top_p < 1.0f;
    RefCand *c = xmalloc((size_t)V * sizeof *c);
    double *w = xmalloc((size_t)V * sizeof *w);
    for (int i = 0; i < V; i++) c[i] = (RefCand){l[i], i};
    int n = V;
    if (k_on || p_on) {
        qsort(c, (size_t)V, sizeof *c, ref_cand_cmp);
        double stop = INFINITY, mass = 0.0;
        if (p_on && !k_on) {
            double z = 0.0;
            for (int i = 0; i < V; i++) z += sampling_exp(((double)l[i] - (double)max) / (double)p->temperature);
            stop = (double)p->top_p * z;
        }
        int limit = k_on ? p->top_k : V;
        n = 0;
        while (n < limit && (n == 0 || mass < stop)) {
            w[n] = sampling_exp(((double)c[n].logit - (double)max) / (double)p->temperature);
            mass += w[n++];
        }
        if (k_on && p_on) {
            double z = 0.0, cum = 0.0;
            for (int i = 0; i < n; i++) z += w[i];
            for (int i = 0; i < n; i++) {
                cum += w[i];
                if (cum >= (double)p->top_p * z) {
                    n = i + 1;
                    break;
                }
            }
        }
    } else {
        for (int i = 0; i < V; i++) w[i] = sampling_exp(((double)l[i] - (double)max) / (double)p->temperature);
    }
    if (p->min_p > 0.0f)
        for (int i = 0; i < n; i++)
            if (w[i] < (double)p->min_p) w[i] = 0.0;
    double sum = 0.0, cum = 0.0;
    int last = 0, pick = -1;
    for (int i = 0; i < n; i++) {
        sum += w[i];
        if (w[i] > 0.0) last = i;
    }
    double target = rng_uniform(rng) * sum;
    for (int i = 0; i < n && pick < 0; i++) {
        cum += w[i];
        if (target < cum) pick = i;
    }
    if (pick < 0) pick = last;
    *prob = (float)(w[pick] / sum);
    int32_t id = c[pick].id;
    free(c);
    free(w);
    return id;
}

/* Random logits of one shape: spread, coarse values (ties), masked (-inf) tokens. */
static void random_logits(Rng *r, float *l, int V, int shape) {
    double spread = 1.0 + 4.0 * (double)(shape % 4);
    for (int i = 0; i < V; i++) {
        double u = rng_uniform(r) + rng_uniform(r) + rng_uniform(r) - 1.5; /* about normal */
        double v = spread * u + (rng_uniform(r) < 0.001 ? 12.0 : 0.0);
        if (shape & 4) v = floor(v * 4.0) / 4.0;
        l[i] = (float)v;
        if ((shape & 8) && rng_uniform(r) < 0.7) l[i] = -INFINITY;
    }
}

/* n draws from the sampler and from ref_sample, both seeded with p->seed:
 * adds the ones that differ in token or probability bits to *bad (the first
 * few printed); returns n. */
static int draws_differ(const SamplerParams *p, const float *l, int V, int n, int *bad) {
    Sampler *s = sampler_create(p, V);
    Rng ref;
    rng_seed(&ref, p->seed);
    for (int k = 0; k < n; k++) {
        float got_p, want_p;
        int32_t got = sampler_sample(s, l, &got_p), want = ref_sample(p, &ref, l, V, &want_p);
        if ((got != want || memcmp(&got_p, &want_p, sizeof got_p) != 0) && (*bad)++ < 5)
            fprintf(stderr, "    V %d T %g k %d p %g min_p %g seed %llu: token %d p %.9g, want %d p %.9g\n", V,
                    p->temperature, p->top_k, p->top_p, p->min_p, (unsigned long long)p->seed, got, got_p, want,
                    want_p);
    }
    sampler_free(s);
    return n;
}

TEST(sampling_fast_paths_draw_as_the_plain_algorithm) {
    static const float temps[] = {0.05f, 0.3f, 0.7f, 1.0f, 1.6f};
    static const int top_ks[] = {0, 1, 20, 40, 2000};
    static const float top_ps[] = {1.0f, 0.8f, 0.95f, 0.9999f};
    static const float min_ps[] = {0.0f, 0.05f};
    static const int vocabs[] = {7, 1001, 20011, 151936};
    Rng gen;
    rng_seed(&gen, 99);
    int cases = 0, bad = 0;
    for (int v = 0; v < 4; v++) {
        int V = vocabs[v], seeds = V > 100000 ? 6 : 40;
        use_isa(v); /* each vocabulary under other vector code */
        float *l = xmalloc((size_t)V * sizeof *l);
        for (int seed = 0; seed < seeds; seed++) {
            random_logits(&gen, l, V, seed);
            SamplerParams p = sampler_params_default();
            p.temperature = temps[seed % 5];
            p.top_k = top_ks[(seed / 5 + v) % 5];
            p.top_p = top_ps[(seed / 2 + v) % 4];
            p.min_p = min_ps[seed % 2];
            p.seed = 1000 + (uint64_t)seed;
            cases += draws_differ(&p, l, V, 3, &bad);
        }
        free(l);
    }
    unsetenv("SIMD_ISA");
    CHECK_MSG(bad == 0, "%d of %d draws differ from the plain algorithm", bad, cases);
}

/* The whole-vocabulary path (no top-k, no top-p) at Qwen3's size and at sizes
 * that leave a tail after the vector blocks, with masked tokens, ties,
 * temperature 1 (no division) and min-p. */
TEST(sampling_whole_vocabulary_draws_as_the_plain_algorithm) {
    static const int vocabs[] = {151936, 151939, 45, 3};
    static const float temps[] = {1.0f, 0.7f, 1.3f};
    Rng gen;
    rng_seed(&gen, 5);
    int cases = 0, bad = 0;
    for (int v = 0; v < 4; v++) {
        int V = vocabs[v];
        float *l = xmalloc((size_t)V * sizeof *l);
        for (int seed = 0; seed < 12; seed++) {
            use_isa((seed + v) % N_ISAS); /* every vocabulary under every vector code */
            random_logits(&gen, l, V, seed);
            SamplerParams p = sampler_params_default();
            p.temperature = temps[seed % 3];
            p.min_p = seed % 2 ? 0.05f : 0.0f;
            p.seed = 77 + (uint64_t)seed;
            cases += draws_differ(&p, l, V, 4, &bad);
        }
        free(l);
    }
    unsetenv("SIMD_ISA");
    CHECK_MSG(bad == 0, "%d of %d draws differ from the plain algorithm", bad, cases);
}

/* ---- penalties ----------------------------------------------------------------- */

static Sampler *make_penalized(float presence, float frequency, float repetition, int vocab) {
    SamplerParams p = sampler_params_default();
    p.presence_penalty = presence, p.frequency_penalty = frequency, p.repetition_penalty = repetition;
    Sampler *s = sampler_create(&p, vocab);
    CHECK(s != NULL);
    return s;
}

TEST(sampling_presence_and_frequency_penalties) {
    float logits[3] = {2.0f, 1.5f, 0.0f};
    /* presence: a flat 1.0 off every token seen, however often */
    Sampler *s = make_penalized(1.0f, 0.0f, 1.0f, 3);
    CHECK_EQ_INT(sampler_sample(s, logits, NULL), 0);
    sampler_accept(s, 0);
    float prob;
    CHECK_EQ_INT(sampler_sample(s, logits, &prob), 1);   /* 2.0 - 1.0 < 1.5 */
    /* the final distribution is softmax(1.0, 1.5, 0.0) */
    double z = exp(1.0) + exp(1.5) + exp(0.0);
    CHECK_NEAR(prob, exp(1.5) / z, 1e-6);
    sampler_reset_history(s);
    CHECK_EQ_INT(sampler_sample(s, logits, NULL), 0);
    sampler_free(s);

    /* frequency: count * 0.3 off: once leaves 1.7 > 1.5, twice 1.4 < 1.5 */
    s = make_penalized(0.0f, 0.3f, 1.0f, 3);
    sampler_accept(s, 0);
    CHECK_EQ_INT(sampler_sample(s, logits, NULL), 0);
    sampler_accept(s, 0);
    CHECK_EQ_INT(sampler_sample(s, logits, NULL), 1);
    sampler_free(s);

    /* both, OpenAI's formula: logit - count * frequency - presence; negative values reward */
    s = make_penalized(-0.3f, -0.3f, 1.0f, 3);
    sampler_accept(s, 1);
    CHECK_EQ_INT(sampler_sample(s, logits, NULL), 1);   /* 1.5 + 0.3 + 0.3 = 2.1 > 2.0 */
    sampler_free(s);
}

TEST(sampling_repetition_penalty) {
    /* positive logits are divided, negative ones multiplied */
    float pos[2] = {2.0f, 1.5f}, neg[2] = {-1.0f, -1.2f};
    Sampler *s = make_penalized(0.0f, 0.0f, 1.5f, 2);
    sampler_accept(s, 0);
    sampler_accept(s, 0);   /* counted once: the penalty does not grow */
    float prob;
    CHECK_EQ_INT(sampler_sample(s, pos, &prob), 1);   /* 2.0 / 1.5 = 1.33 < 1.5 */
    CHECK_NEAR(prob, 1.0 / (1.0 + exp(2.0 / 1.5 - 1.5)), 1e-6);
    CHECK_EQ_INT(sampler_sample(s, neg, NULL), 1);    /* -1.0 * 1.5 = -1.5 < -1.2 */
    sampler_free(s);
    /* out-of-range tokens are ignored */
    s = make_penalized(1.0f, 0.0f, 1.0f, 2);
    sampler_accept(s, -1);
    sampler_accept(s, 2);
    CHECK_EQ_INT(sampler_sample(s, pos, NULL), 0);
    sampler_free(s);
}

TEST(sampling_penalties_shift_the_distribution) {
    /* with sampling on, a penalized token is drawn as often as its lowered logit says */
    float logits[3] = {1.0f, 1.0f, 1.0f};
    SamplerParams p = sampler_params_default();
    p.temperature = 1.0f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.25f, p.seed = 77;
    Sampler *s = sampler_create(&p, 3);
    sampler_accept(s, 2);
    sampler_accept(s, 2);   /* token 2: 1.0 - 2 * 0.25 - 0.5 = 0.0 */
    double got[3];
    frequencies(s, logits, 3, 40000, got);
    double z = 2 * exp(1.0) + 1.0;
    CHECK_NEAR(got[0], exp(1.0) / z, 0.01);
    CHECK_NEAR(got[2], 1.0 / z, 0.01);
    sampler_free(s);
}

/* ---- logprobs ------------------------------------------------------------------ */

TEST(sampling_top_logprobs) {
    float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -INFINITY};
    int32_t ids[8];
    float lp[8];
    CHECK_EQ_INT(sampler_top_logprobs(logits, 6, 3, ids, lp), 3);
    CHECK_EQ_INT(ids[0], 1);   /* ties: the lower id first */
    CHECK_EQ_INT(ids[1], 3);
    CHECK_EQ_INT(ids[2], 4);
    double z = exp(0.5) + 2 * exp(3.0) + exp(-1.0) + exp(2.0);
    CHECK_NEAR(lp[0], 3.0 - log(z), 1e-6);
    CHECK(lp[0] == lp[1]);
    CHECK_NEAR(lp[2], 2.0 - log(z), 1e-6);
    CHECK_EQ_INT(sampler_top_logprobs(logits, 6, 8, ids, lp), 6);   /* k beyond the vocabulary */
    CHECK_EQ_INT(ids[5], 5);
    CHECK(isinf(lp[5]) && lp[5] < 0);
    CHECK_EQ_INT(sampler_top_logprobs(logits, 6, 0, ids, lp), 0);
}

/* ---- bad parameters --------------------------------------------------------------- */

static void check_bad(SamplerParams p, const char *field) {
    char err[ERR_MAX] = "";
    CHECK_EQ_INT(sampler_params_check(&p, err), -1);
    CHECK_MSG(strstr(err, field) != NULL, "error '%s' should name %s", err, field);
    CHECK(sampler_create(&p, 10) == NULL);
}

TEST(sampling_bad_params) {
    SamplerParams d = sampler_params_default(), p;
    char err[ERR_MAX];
    CHECK_EQ_INT(sampler_params_check(&d, err), 0);
    CHECK(sampler_create(&d, 0) == NULL);
    p = d, p.temperature = NAN, check_bad(p, "temperature");
    p = d, p.top_p = 1.5f, check_bad(p, "top_p");
    p = d, p.top_p = -0.1f, check_bad(p, "top_p");
    p = d, p.min_p = 2.0f, check_bad(p, "min_p");
    p = d, p.presence_penalty = 3.0f, check_bad(p, "presence_penalty");
    p = d, p.frequency_penalty = NAN, check_bad(p, "frequency_penalty");
    p = d, p.repetition_penalty = 0.0f, check_bad(p, "repetition_penalty");
    p = d, p.repetition_penalty = INFINITY, check_bad(p, "repetition_penalty");
}
