/* sampling.c: see sampling.h. */
#include "sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* a*b+c must stay two roundings for the results to be the same everywhere:
 * GCC in ISO C mode (-std=c11) never fuses them; clang needs to be told. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- the generator -------------------------------------------------------- */

void rng_seed(Rng *r, uint64_t seed) { r->state = seed; }

uint64_t rng_next(Rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- e^x with basic operations only ---------------------------------------- */

/* 1/n! for n <= 13 (folded by the compiler, exactly rounded). */
static const double EXP_INV_FACT[14] = {1.0,           1.0,            1.0 / 2,         1.0 / 6,
                                        1.0 / 24,      1.0 / 120,      1.0 / 720,       1.0 / 5040,
                                        1.0 / 40320,   1.0 / 362880,   1.0 / 3628800,   1.0 / 39916800,
                                        1.0 / 479001600, 1.0 / 6227020800.0};

/* 2^k as a double, built from its bits: exact for -1022 <= k <= 1023. */
static double pow2i(int k) {
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

double sampling_exp(double x) {
    if (x != x) return x;
    if (x < -745.2) return 0.0;
    if (x > 709.7) return HUGE_VAL;
    /* x = k ln2 + r with |r| <= ln2/2; ln2 = LN2_HI + LN2_LO where k * LN2_HI is
     * exact (LN2_HI has its low 32 bits zero), so r carries no rounding of k ln2.
     * Adding and subtracting 1.5 * 2^52 rounds to the nearest integer. */
    const double LOG2E = 1.44269504088896338700e+00, ROUND = 0x1.8p52;
    const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
    double k = (x * LOG2E + ROUND) - ROUND;
    double r = (x - k * LN2_HI) - k * LN2_LO;
    /* e^r by its Taylor series to r^13 / 13! (the next term is below 5e-18),
     * by Horner's rule with the constants 1/n! (folded by the compiler, exactly rounded). */
    double p = EXP_INV_FACT[13];
    for (int n = 12; n >= 0; n--) p = p * r + EXP_INV_FACT[n];
    /* times 2^k, exactly: in two steps when 2^k alone would be subnormal */
    return k >= -1022 ? p * pow2i((int)k) : p * pow2i((int)k + 60) * 0x1.0p-60;
}

/* ---- many at once ----------------------------------------------------------------
 * A sampled token reads the whole vocabulary (151,936 logits for Qwen3): its
 * max, the exp of each, their sum. The AVX2 versions below do the same IEEE
 * operations per element as the scalar ones, four doubles (or eight floats)
 * at a time, so every value is bitwise the scalar one: only what is
 * independent runs side by side (a sum in order stays one chain). */

/* exp((logits[i] - max) / t) for i < n into w: sampling_exp's steps. */
static void weights_scalar(const float *logits, int n, float max, float t, double *w) {
    for (int i = 0; i < n; i++) w[i] = sampling_exp(((double)logits[i] - (double)max) / (double)t);
}

/* min-p: drops the weights below min_p times the best one's (which is 1). */
static void cut_min_p(double *weight, int n, float min_p) {
    if (min_p <= 0.0f) return;
    for (int i = 0; i < n; i++)
        if (weight[i] < (double)min_p) weight[i] = 0.0;
}

/* Weights made but not yet summed: w[i..end) go on the running sum next. */
typedef struct {
    const double *w;
    double *cum;   /* the running sums (NULL: none kept) */
    int i, end;
    double sum;
    int last;      /* the last index with a weight > 0 */
} Pending;

/* Adds the next k pending weights (fewer if fewer are pending) to the sum. */
static inline void sum_some(Pending *s, int k) {
    int end = s->end - s->i < k ? s->end : s->i + k;
    for (; s->i < end; s->i++) {
        s->sum += s->w[s->i];
        if (s->cum) s->cum[s->i] = s->sum;
        if (s->w[s->i] > 0.0) s->last = s->i;
    }
}

/* The running sums of weight[] over [i0, i1) into cum[] (NULL: the sum
 * only), going on from sum; *last becomes the last i with a weight > 0.
 * Returns the sum at i1. */
static double chain(const double *weight, double *cum, int i0, int i1, double sum, int *last) {
    Pending p = {weight, cum, i0, i1, sum, *last};
    sum_some(&p, i1 - i0);
    *last = p.last;
    return p.sum;
}

/* The weights of logits[0..n) after temperature t and min-p into w, and
 * their sum in order (with the running sums, as chain). */
static double weigh_scalar(const float *logits, int n, float max, float t, float min_p, double *w, double *cum,
                           double sum, int *last) {
    weights_scalar(logits, n, max, t, w);
    cut_min_p(w, n, min_p);
    return chain(w, cum, 0, n, sum, last);
}

static float max_scalar(const float *logits, int n) {
    float m = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > m) m = logits[i];
    return m;
}

#if defined(__x86_64__)
#define SAMPLING_AVX2 __attribute__((target("avx2")))

/* How many groups of 4 lanes the exps work on side by side: one exp is a
 * chain of 30 dependent operations, so only several at once keep the
 * arithmetic units busy. */
#define EXP_GROUPS 8

/* sampling_exp of 4 x EXP_GROUPS lanes known to lie in [-708, 709]: no special
 * case, and 2^k a normal double (k >= -1021). Same operations, same order;
 * x[g] holds 2^k while the polynomials run, so that they have the registers.
 * The sum waits 3 cycles per add and the polynomials on their multiplies:
 * each step of the polynomials also adds 3 of the pending weights, so that
 * the core finds both in one stream of instructions and runs them side by side. */
static inline SAMPLING_AVX2 void exp4s(__m256d *x, Pending *pending) {
    const __m256d round = _mm256_set1_pd(0x1.8p52);
    __m256d r[EXP_GROUPS], p[EXP_GROUPS];
#pragma GCC unroll 8
    for (int g = 0; g < EXP_GROUPS; g++) {
        __m256d k = _mm256_sub_pd(_mm256_add_pd(_mm256_mul_pd(x[g], _mm256_set1_pd(1.44269504088896338700e+00)), round), round);
        r[g] = _mm256_sub_pd(_mm256_sub_pd(x[g], _mm256_mul_pd(k, _mm256_set1_pd(6.93147180369123816490e-01))),
                             _mm256_mul_pd(k, _mm256_set1_pd(1.90821492927058770002e-10)));
        /* 2^k from its bits: k + 1.5 * 2^52 holds k in its low bits */
        __m256i ki = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(k, round)), _mm256_castpd_si256(round));
        x[g] = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52));
        p[g] = _mm256_set1_pd(EXP_INV_FACT[13]);
    }
    for (int n = 12; n >= 0; n--) { /* a step of every group, then the next step */
        const __m256d c = _mm256_set1_pd(EXP_INV_FACT[n]);
#pragma GCC unroll 8
        for (int g = 0; g < EXP_GROUPS; g++) p[g] = _mm256_add_pd(_mm256_mul_pd(p[g], r[g]), c);
        sum_some(pending, 3);
    }
#pragma GCC unroll 8
    for (int g = 0; g < EXP_GROUPS; g++) x[g] = _mm256_mul_pd(p[g], x[g]);
}

/* weigh_scalar 4 x EXP_GROUPS at a time: the weights side by side, their
 * sums one chain in order, a block behind (see exp4s). */
static SAMPLING_AVX2 double weigh_avx2(const float *logits, int n, float max, float t, float min_p, double *w,
                                       double *cum, double sum, int *last) {
    enum { STEP = 4 * EXP_GROUPS };
    const __m256d vmax = _mm256_set1_pd((double)max), vt = _mm256_set1_pd((double)t);
    const __m256d lo = _mm256_set1_pd(-708.0), hi = _mm256_set1_pd(709.0), vmin_p = _mm256_set1_pd((double)min_p);
    const bool div = t != 1.0f;   /* x / 1 is x: the same bits without the division */
    Pending pending = {w, cum, 0, 0, sum, *last};
    int i = 0;
    for (; i + STEP <= n; i += STEP) {
        __m256d x[EXP_GROUPS], in = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
#pragma GCC unroll 8
        for (int g = 0; g < EXP_GROUPS; g++) {
            x[g] = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(logits + i + 4 * g)), vmax);
            if (div) x[g] = _mm256_div_pd(x[g], vt);
            in = _mm256_and_pd(in, _mm256_and_pd(_mm256_cmp_pd(x[g], lo, _CMP_GE_OQ), _mm256_cmp_pd(x[g], hi, _CMP_LE_OQ)));
        }
        if (_mm256_movemask_pd(in) == 15) {
            exp4s(x, &pending);
#pragma GCC unroll 8
            for (int g = 0; g < EXP_GROUPS; g++) {
                if (min_p > 0.0f) x[g] = _mm256_andnot_pd(_mm256_cmp_pd(x[g], vmin_p, _CMP_LT_OQ), x[g]);
                _mm256_storeu_pd(w + i + 4 * g, x[g]);
            }
        } else {
            weights_scalar(logits + i, STEP, max, t, w + i); /* far below the max, -inf, NaN */
            cut_min_p(w + i, STEP, min_p);
        }
        sum_some(&pending, STEP); /* what the polynomials left, then this block is pending */
        pending.end = i + STEP;
    }
    sum_some(&pending, STEP);
    weights_scalar(logits + i, n - i, max, t, w + i);
    cut_min_p(w + i, n - i, min_p);
    *last = pending.last;
    return chain(w, cum, i, n, pending.sum, last);
}

/* max_scalar's result: a lane keeps its value unless a logit is greater
 * (max_ps returns its second operand when either is NaN). */
static SAMPLING_AVX2 float max_avx2(const float *logits, int n) {
    if (n < 16) return max_scalar(logits, n);
    __m256 m0 = _mm256_set1_ps(logits[0]), m1 = m0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(logits + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(logits + i + 8), m1);
    }
    float lanes[16], m = logits[0];
    _mm256_storeu_ps(lanes, m0);
    _mm256_storeu_ps(lanes + 8, m1);
    for (int k = 0; k < 16; k++)
        if (lanes[k] > m) m = lanes[k];
    for (; i < n; i++)
        if (logits[i] > m) m = logits[i];
    return m;
}

/* True when logits[] has a NaN. */
static SAMPLING_AVX2 bool has_nan_avx2(const float *logits, int n) {
    __m256 any = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(logits + i);
        any = _mm256_or_ps(any, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    bool nan = _mm256_movemask_ps(any) != 0;
    for (; i < n; i++) nan |= logits[i] != logits[i];
    return nan;
}

/* The ids i < n with logits[i] >= floor, in id order, to ids; returns how many. */
static SAMPLING_AVX2 int at_least_avx2(const float *logits, int n, float floor, int32_t *ids) {
    const __m256 f = _mm256_set1_ps(floor);
    int m = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(logits + i), f, _CMP_GE_OQ));
        for (; bits; bits &= bits - 1) ids[m++] = i + __builtin_ctz(bits);
    }
    for (; i < n; i++)
        if (logits[i] >= floor) ids[m++] = i;
    return m;
}

static bool cpu_avx2(void) { return __builtin_cpu_supports("avx2"); } /* a read of what the C runtime found at start */
#endif

/* The weights of logits[0..n) into w, their running sums into cum (NULL:
 * none), *last the last index with a weight > 0; returns their sum. */
static double weigh(const float *logits, int n, float max, float t, float min_p, double *w, double *cum, int *last) {
#if defined(__x86_64__)
    if (cpu_avx2()) return weigh_avx2(logits, n, max, t, min_p, w, cum, 0.0, last);
#endif
    return weigh_scalar(logits, n, max, t, min_p, w, cum, 0.0, last);
}

static float max_logit(const float *logits, int n) {
#if defined(__x86_64__)
    if (cpu_avx2()) return max_avx2(logits, n);
#endif
    return max_scalar(logits, n);
}

static bool has_nan(const float *logits, int n) {
#if defined(__x86_64__)
    if (cpu_avx2()) return has_nan_avx2(logits, n);
#endif
    for (int i = 0; i < n; i++)
        if (logits[i] != logits[i]) return true;
    return false;
}

static int at_least(const float *logits, int n, float floor, int32_t *ids) {
#if defined(__x86_64__)
    if (cpu_avx2()) return at_least_avx2(logits, n, floor, ids);
#endif
    int m = 0;
    for (int i = 0; i < n; i++)
        if (logits[i] >= floor) ids[m++] = i;
    return m;
}

/* ---- candidates, best first ----------------------------------------------- */

typedef struct {
    float logit;
    int32_t id;
} Cand;

/* The order every selection uses: larger logit first, then the lower id. It is
 * total, so "the top k" is one set whatever algorithm finds it. */
static bool cand_before(Cand a, Cand b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

/* h[0..n) is a heap with the best candidate at h[0]; restores it below i. */
static void heap_sift_down(Cand *h, int n, int i) {
    for (;;) {
        int best = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cand_before(h[l], h[best])) best = l;
        if (r < n && cand_before(h[r], h[best])) best = r;
        if (best == i) return;
        Cand t = h[i];
        h[i] = h[best], h[best] = t;
        i = best;
    }
}

/* A heap of logits[ids[i]] for i < n (ids NULL: of all n logits). */
static void heap_build(Cand *h, const float *logits, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) h[i] = ids ? (Cand){logits[ids[i]], ids[i]} : (Cand){logits[i], i};
    for (int i = n / 2 - 1; i >= 0; i--) heap_sift_down(h, n, i);
}

/* Removes and returns the best of h[0..*n). */
static Cand heap_pop(Cand *h, int *n) {
    Cand top = h[0];
    h[0] = h[--*n];
    heap_sift_down(h, *n, 0);
    return top;
}

/* ---- the sampler ------------------------------------------------------------ */

struct Sampler {
    SamplerParams p;
    int vocab;
    Rng rng;
    int32_t *counts;   /* [vocab] times each token was accepted */
    int32_t *seen;     /* [vocab] the distinct accepted tokens, n_seen of them */
    int n_seen;
    float *penalized;  /* [vocab] the logits after the penalties */
    Cand *heap;        /* [vocab] */
    Cand *sel;         /* [vocab] the kept candidates, best first */
    double *weight;    /* [vocab] unnormalized probabilities of the kept candidates */
    double *cum;       /* [vocab] their running sums, in order */
    int32_t *ids;      /* [vocab] candidates for the heap (select_top) */
};

SamplerParams sampler_params_default(void) {
    return (SamplerParams){.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                           .presence_penalty = 0.0f, .frequency_penalty = 0.0f,
                           .repetition_penalty = 1.0f, .seed = 0};
}

int sampler_params_check(const SamplerParams *p, char *err) {
    if (isnan(p->temperature)) return err_set(err, "temperature is not a number"), -1;
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return err_set(err, "top_p must be in [0, 1], got %g", p->top_p), -1;
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return err_set(err, "min_p must be in [0, 1], got %g", p->min_p), -1;
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return err_set(err, "presence_penalty must be in [-2, 2], got %g", p->presence_penalty), -1;
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return err_set(err, "frequency_penalty must be in [-2, 2], got %g", p->frequency_penalty), -1;
    if (!(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty)))
        return err_set(err, "repetition_penalty must be > 0, got %g", p->repetition_penalty), -1;
    return 0;
}

Sampler *sampler_create(const SamplerParams *p, int vocab_size) {
    char err[ERR_MAX];
    if (vocab_size < 1 || sampler_params_check(p, err) != 0) return NULL;
    Sampler *s = xcalloc(1, sizeof *s);
    s->p = *p;
    s->vocab = vocab_size;
    rng_seed(&s->rng, p->seed);
    s->counts = xcalloc((size_t)vocab_size, sizeof *s->counts);
    s->seen = xmalloc((size_t)vocab_size * sizeof *s->seen);
    s->penalized = xmalloc((size_t)vocab_size * sizeof *s->penalized);
    s->heap = xmalloc((size_t)vocab_size * sizeof *s->heap);
    s->sel = xmalloc((size_t)vocab_size * sizeof *s->sel);
    s->weight = xmalloc((size_t)vocab_size * sizeof *s->weight);
    s->cum = xmalloc((size_t)vocab_size * sizeof *s->cum);
    s->ids = xmalloc((size_t)vocab_size * sizeof *s->ids);
    return s;
}

void sampler_free(Sampler *s) {
    if (!s) return;
    free(s->counts), free(s->seen), free(s->penalized);
    free(s->heap), free(s->sel), free(s->weight), free(s->cum), free(s->ids);
    free(s);
}

void sampler_accept(Sampler *s, int32_t token) {
    if (token < 0 || token >= s->vocab) return;
    if (s->counts[token]++ == 0) s->seen[s->n_seen++] = token;
}

void sampler_reset_history(Sampler *s) {
    for (int i = 0; i < s->n_seen; i++) s->counts[s->seen[i]] = 0;
    s->n_seen = 0;
}

static bool has_penalties(const SamplerParams *p) {
    return p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f || p->repetition_penalty != 1.0f;
}

/* The logits with the penalties applied to every token generated so far:
 *   repetition (HF/llama.cpp): a positive logit is divided by it, a negative one multiplied;
 *   OpenAI: logit -= count * frequency_penalty + presence_penalty. */
static const float *apply_penalties(Sampler *s, const float *logits) {
    if (!has_penalties(&s->p) || s->n_seen == 0) return logits;
    memcpy(s->penalized, logits, (size_t)s->vocab * sizeof *logits);
    for (int i = 0; i < s->n_seen; i++) {
        int32_t t = s->seen[i];
        float v = s->penalized[t];
        if (s->p.repetition_penalty != 1.0f)
            v = v > 0.0f ? v / s->p.repetition_penalty : v * s->p.repetition_penalty;
        v -= (float)s->counts[t] * s->p.frequency_penalty + s->p.presence_penalty;
        s->penalized[t] = v;
    }
    return s->penalized;
}

/* exp((logit - max) / T): the unnormalized probability after temperature T. */
static double temp_weight(float logit, float max, float temperature) {
    return sampling_exp(((double)logit - (double)max) / (double)temperature);
}

/* The pops of select_top from the heap of n candidates: at most limit, until
 * their mass reaches stop. Returns how many, or -1 when the heap ran out
 * first though it held fewer than all V logits (more candidates needed). */
static int pop_best(Sampler *s, int n, int limit, double stop, float max) {
    int h = n, m = 0;
    double mass = 0.0;
    while (m < limit && (m == 0 || mass < stop)) {   /* at least one */
        if (h == 0) return n < s->vocab ? -1 : m;
        s->sel[m] = heap_pop(s->heap, &h);
        s->weight[m] = temp_weight(s->sel[m].logit, max, s->p.temperature);
        mass += s->weight[m++];
    }
    return m;
}

/* Top-k and top-p: pops candidates best first into s->sel until k are taken or
 * their share of the probability reaches p. With top-k on, top-p applies to the
 * k survivors renormalized (as HF does). Returns how many are kept.
 * Only logits >= a floor go into the heap: the best ones, in the same total
 * order, so the pops are the ones a heap of the whole vocabulary gives as
 * long as it does not run out; if it does, the floor goes down (at last: no
 * floor, every logit). */
static int select_top(Sampler *s, const float *logits, float max) {
    const SamplerParams *p = &s->p;
    int V = s->vocab, m = -1;
    bool k_on = p->top_k > 0 && p->top_k < V, p_on = p->top_p < 1.0f;
    double stop = INFINITY;   /* pop until the kept mass reaches this */
    if (p_on && !k_on) {
        int last = 0;
        double z = weigh(logits, V, max, p->temperature, 0.0f, s->cum, NULL, &last); /* s->cum: scratch */
        stop = (double)p->top_p * z;
    }
    int limit = k_on ? p->top_k : V;
    if (!has_nan(logits, V)) /* a NaN sits somewhere in a heap of all: keep that heap's order */
        for (double below = 16.0 * p->temperature; m < 0 && below < 1e30; below *= 4.0) {
            int n = at_least(logits, V, (float)((double)max - below), s->ids);
            if (n == V) break;
            if (k_on && n < limit) continue; /* top-k: fewer than k cannot do */
            heap_build(s->heap, logits, s->ids, n);
            m = pop_best(s, n, limit, stop, max);
        }
    if (m < 0) {
        heap_build(s->heap, logits, NULL, V);
        m = pop_best(s, V, limit, stop, max);
    }
    if (k_on && p_on) {   /* the smallest prefix of the k holding a share p of them */
        double z = 0.0, cum = 0.0;
        for (int i = 0; i < m; i++) z += s->weight[i];
        for (int i = 0; i < m; i++) {
            cum += s->weight[i];
            if (cum >= (double)p->top_p * z) return i + 1;
        }
    }
    return m;
}

/* Draws index i of n with probability weight[i] / sum: the first i whose
 * running sum cum[i] exceeds a uniform draw times the sum. The sums never
 * decrease (the weights are >= 0), so that i is found by binary search. */
static int pick(Rng *rng, const double *cum, int n, double sum, int last) {
    double target = rng_uniform(rng) * sum;
    int lo = 0, hi = n; /* the first i in [lo, hi) with target < cum[i], or n */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (target < cum[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo < n ? lo : last;   /* none: rounding left target at the very end */
}

int32_t sampler_sample(Sampler *s, const float *logits, float *prob) {
    const SamplerParams *p = &s->p;
    const float *l = apply_penalties(s, logits);
    if (p->temperature <= 0.0f) return argmax(l, s->vocab, prob);

    float max = max_logit(l, s->vocab);
    bool filtered = (p->top_k > 0 && p->top_k < s->vocab) || p->top_p < 1.0f;
    int n, last = 0;
    double sum = 0.0;
    if (filtered) {
        n = select_top(s, l, max);
        cut_min_p(s->weight, n, p->min_p);
        sum = chain(s->weight, s->cum, 0, n, 0.0, &last);
    } else {   /* the whole vocabulary, in id order */
        n = s->vocab;
        sum = weigh(l, n, max, p->temperature, p->min_p, s->weight, s->cum, &last);
    }
    int i = pick(&s->rng, s->cum, n, sum, last);
    if (prob) *prob = (float)(s->weight[i] / sum);
    return filtered ? s->sel[i].id : i;
}

int sampler_top_logprobs(const float *logits, int vocab, int k, int32_t *ids, float *logprobs) {
    if (k <= 0 || vocab <= 0) return 0;
    if (k > vocab) k = vocab;
    float max = max_logit(logits, vocab);
    double z = 0.0;
    for (int i = 0; i < vocab; i++) z += sampling_exp((double)logits[i] - max);
    double log_z = log(z);
    Cand *heap = xmalloc((size_t)vocab * sizeof *heap);
    heap_build(heap, logits, NULL, vocab);
    int h = vocab;
    for (int i = 0; i < k; i++) {
        Cand c = heap_pop(heap, &h);
        ids[i] = c.id;
        logprobs[i] = (float)(((double)c.logit - max) - log_z);
    }
    free(heap);
    return k;
}
