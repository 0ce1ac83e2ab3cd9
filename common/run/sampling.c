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
 * max, the exp of each, their sum. The AVX2 and AVX-512 versions below do the
 * same IEEE operations per element as the scalar ones, four or eight doubles
 * (eight floats) at a time, so every value is bitwise the scalar one. Only
 * what is independent runs side by side, and the sum in order, which is not,
 * is made so (the next section). */

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

/* ---- the sum in order, without a chain of additions ------------------------------
 * A draw adds the weights up in id order, and that sum's bits are the ones
 * the seeded tests pin: 151,936 additions, each waiting for the one before.
 * But while a running sum s stays in one binade [b, 2b) (b a power of two),
 * every value it takes is a multiple of u = ulp(b), and s + w rounds to
 * s + t, t being w rounded to a multiple of u: the same t for every s of the
 * binade, except at a tie (w exactly halfway between two multiples, which s's
 * last bit breaks). So for a block of weights, t_i = (b + w_i) - b, side by
 * side; when no t_i was a tie and s plus all of them stays below 2b, every
 * running sum of the block is s + t_0 + ... + t_i, each addition exact, in
 * any order: the block's sum is one vector sum and one addition onto s. A
 * block that fails (a binade crossed, a tie, a NaN) is added one by one.
 * Weights are >= 0 (or NaN). */
#define SUM_BLOCK SAMPLING_SUM_BLOCK

/* The vectors the many-at-once code runs on: the widest this machine has,
 * or those SIMD_ISA names (any avx512 name: AVX-512F is all it needs; any avx2 name;
 * anything else: none), the variable the kernels read too (backend_simd.c). */
typedef enum { ISA_NONE, ISA_AVX2, ISA_AVX512 } Isa;

typedef struct {
    double sum; /* the running sum so far */
    double b;   /* its binade: sum in [b, 2b); 0 where the blocks cannot be used */
    Isa isa;    /* the vectors of the block sums */
} InOrder;

/* The sum's binade 2^e, sum in [2^e, 2^(e+1)); 0 outside [2^-1000, 2^1000). */
static double binade(double sum) {
    if (!(sum >= 0x1p-1000 && sum < 0x1p1000)) return 0.0;
    uint64_t bits;
    memcpy(&bits, &sum, sizeof bits);
    bits &= 0x7FF0000000000000ull;
    memcpy(&sum, &bits, sizeof sum);
    return sum;
}

#if defined(__x86_64__)
#define SAMPLING_AVX2 __attribute__((target("avx2")))
#define SAMPLING_AVX512 __attribute__((target("avx512f")))
/* reads of what the C runtime found at start */
static bool cpu_avx2(void) { return __builtin_cpu_supports("avx2"); }
static bool cpu_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#endif

static Isa isa_now(void) {
#if defined(__x86_64__)
    const char *want = getenv("SIMD_ISA");
    bool avx2 = cpu_avx2(), avx512 = avx2 && cpu_avx512();
    if (!want || !*want) return avx512 ? ISA_AVX512 : avx2 ? ISA_AVX2 : ISA_NONE;
    if (strncmp(want, "avx512", 6) == 0 && avx512) return ISA_AVX512; /* avx512, avx512bf16 */
    return strncmp(want, "avx2", 4) == 0 && avx2 ? ISA_AVX2 : ISA_NONE; /* avx2, avx2vnni */
#else
    return ISA_NONE;
#endif
}

#if defined(__x86_64__)

/* a->sum + w[0] + ... + w[SUM_BLOCK - 1] by the block (above) into a->sum;
 * false, a->sum unchanged, when the block must be added one by one. */
static SAMPLING_AVX2 bool block_sum_avx2(InOrder *a, const double *w) {
    const __m256d b = _mm256_set1_pd(a->b), half = _mm256_set1_pd(a->b * 0x1p-53);
    const __m256d abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
    __m256d tot[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, tie = _mm256_setzero_pd();
    for (int i = 0; i < SUM_BLOCK; i += 8)
        for (int k = 0; k < 2; k++) {
            __m256d wv = _mm256_loadu_pd(w + i + 4 * k), t = _mm256_sub_pd(_mm256_add_pd(b, wv), b);
            tie = _mm256_or_pd(tie, _mm256_cmp_pd(_mm256_and_pd(_mm256_sub_pd(wv, t), abs), half, _CMP_EQ_OQ));
            tot[k] = _mm256_add_pd(tot[k], t);
        }
    __m256d v = _mm256_add_pd(tot[0], tot[1]);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    double sum = a->sum + (_mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h)));
    if (_mm256_movemask_pd(tie) || !(sum < 2.0 * a->b)) return false;
    a->sum = sum;
    return true;
}

/* block_sum_avx2, 8 lanes a vector. */
static SAMPLING_AVX512 bool block_sum_avx512(InOrder *a, const double *w) {
    const __m512d b = _mm512_set1_pd(a->b), half = _mm512_set1_pd(a->b * 0x1p-53);
    __m512d tot[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
    __mmask8 tie = 0;
    for (int i = 0; i < SUM_BLOCK; i += 16)
        for (int k = 0; k < 2; k++) {
            __m512d wv = _mm512_loadu_pd(w + i + 8 * k), t = _mm512_sub_pd(_mm512_add_pd(b, wv), b);
            tie |= _mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(wv, t)), half, _CMP_EQ_OQ);
            tot[k] = _mm512_add_pd(tot[k], t);
        }
    double sum = a->sum + _mm512_reduce_add_pd(_mm512_add_pd(tot[0], tot[1]));
    if (tie || !(sum < 2.0 * a->b)) return false;
    a->sum = sum;
    return true;
}
#endif

/* w[0..n) onto the running sum, in order: by the block when n is one and
 * it can, else one by one. */
static void in_order_add(InOrder *a, const double *w, int n) {
#if defined(__x86_64__)
    if (n == SUM_BLOCK && a->b > 0.0 &&
        (a->isa == ISA_AVX512 ? block_sum_avx512(a, w) : a->isa == ISA_AVX2 && block_sum_avx2(a, w)))
        return;
#endif
    for (int i = 0; i < n; i++) a->sum += w[i];
    a->b = binade(a->sum);
}

static double sum_in_order(Isa isa, const double *w, int n, double *ends) {
    InOrder a = {0.0, 0.0, isa};
    int i = 0;
    for (; i + SUM_BLOCK <= n; i += SUM_BLOCK) {
        in_order_add(&a, w + i, SUM_BLOCK);
        if (ends) ends[i / SUM_BLOCK] = a.sum;
    }
    in_order_add(&a, w + i, n - i);
    return a.sum;
}

double sampling_sum_in_order(const double *w, int n, double *ends) { return sum_in_order(isa_now(), w, n, ends); }

static float max_scalar(const float *logits, int n) {
    float m = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > m) m = logits[i];
    return m;
}

#if defined(__x86_64__)
/* How many vectors the exps work on side by side: one exp is a chain of 30
 * dependent operations, so only several at once keep the arithmetic units
 * busy. */
#define EXP_GROUPS 8
/* The bits of 1.5 * 2^52 less the exponent bias: (k + 1.5 * 2^52)'s bits
 * minus this are k + 1023, 2^k's exponent field. */
#define EXP_BIAS_BITS (0x4338000000000000ll - 1023)

/* weights_scalar and cut_min_p for logits[0..SUM_BLOCK), max being the max
 * of the logits the caller has (the x <= 0 below needs it), W lanes a vector,
 * EXP_GROUPS vectors side by side, written once for AVX2 (W = 4) and
 * AVX-512 (W = 8): V is the vector of W doubles, I of W int64s, and an
 * operation on a vector (GCC's vector types) is that operation on every
 * lane; LOAD reads W floats as doubles. x = (logit - max) / t is at most 0
 * for every logit that is a number (max is their max), so only its low end
 * is checked (NaN fails that too): then sampling_exp has no special case,
 * and 2^k is a normal double (k >= -1021). Same operations in the same order
 * as sampling_exp; x[g] holds 2^k while the polynomials run, one step for
 * every group before the next step. */
#define DEFINE_WEIGHTS(NAME, TARGET, W, V, I, LOAD)                                                          \
    static __attribute__((target(TARGET))) void NAME(const float *logits, float max, float t, float min_p,   \
                                                     double *w) {                                            \
        const bool div = t != 1.0f; /* x / 1 is x: the same bits without the division */                     \
        for (int j = 0; j < SUM_BLOCK; j += W * EXP_GROUPS) {                                                \
            V x[EXP_GROUPS], r[EXP_GROUPS], p[EXP_GROUPS];                                                   \
            I out = {0};                                                                                     \
            _Pragma("GCC unroll 8") for (int g = 0; g < EXP_GROUPS; g++) {                                   \
                x[g] = LOAD(logits + j + W * g) - (double)max;                                               \
                if (div) x[g] = x[g] / (double)t;                                                            \
                out |= ~(x[g] >= -708.0);                                                                    \
            }                                                                                                \
            long long any = 0;                                                                               \
            for (int l = 0; l < W; l++) any |= out[l];                                                       \
            if (any) { /* far below the max, -inf, NaN */                                                    \
                weights_scalar(logits + j, W * EXP_GROUPS, max, t, w + j);                                   \
                cut_min_p(w + j, W * EXP_GROUPS, min_p);                                                     \
                continue;                                                                                    \
            }                                                                                                \
            _Pragma("GCC unroll 8") for (int g = 0; g < EXP_GROUPS; g++) {                                   \
                V kr = x[g] * 1.44269504088896338700e+00 + 0x1.8p52, k = kr - 0x1.8p52;                      \
                r[g] = (x[g] - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;             \
                x[g] = (V)(((I)kr - EXP_BIAS_BITS) << 52); /* 2^k from its bits */                           \
                p[g] = (V){0} + EXP_INV_FACT[13];                                                            \
            }                                                                                                \
            for (int n = 12; n >= 0; n--)                                                                    \
                _Pragma("GCC unroll 8") for (int g = 0; g < EXP_GROUPS; g++) p[g] = p[g] * r[g] + EXP_INV_FACT[n]; \
            _Pragma("GCC unroll 8") for (int g = 0; g < EXP_GROUPS; g++) {                                   \
                V e = p[g] * x[g];                                                                           \
                if (min_p > 0.0f) e = (V)((I)e & ~(e < (double)min_p));                                      \
                memcpy(w + j + W * g, &e, sizeof e);                                                         \
            }                                                                                                \
        }                                                                                                    \
    }

static inline SAMPLING_AVX2 __m256d load4(const float *p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
static inline SAMPLING_AVX512 __m512d load8(const float *p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
DEFINE_WEIGHTS(weights_avx2, "avx2", 4, __m256d, __m256i, load4)
DEFINE_WEIGHTS(weights_avx512, "avx512f", 8, __m512d, __m512i, load8)
_Static_assert(SUM_BLOCK % (8 * EXP_GROUPS) == 0, "a block is whole steps of the exps");

/* max_scalar's result: a lane keeps its value unless a logit is greater
 * (max_ps returns its second operand when either is NaN). Four vectors side
 * by side, so that no max waits for the one before. */
static SAMPLING_AVX2 float max_avx2(const float *logits, int n) {
    enum { V = 4 };
    __m256 m[V];
    for (int v = 0; v < V; v++) m[v] = _mm256_set1_ps(logits[0]);
    int i = 0;
    for (; i + 8 * V <= n; i += 8 * V)
        for (int v = 0; v < V; v++) m[v] = _mm256_max_ps(_mm256_loadu_ps(logits + i + 8 * v), m[v]);
    float lanes[8 * V], best = logits[0];
    for (int v = 0; v < V; v++) _mm256_storeu_ps(lanes + 8 * v, m[v]);
    for (int k = 0; k < 8 * V; k++)
        if (lanes[k] > best) best = lanes[k];
    for (; i < n; i++)
        if (logits[i] > best) best = logits[i];
    return best;
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

#endif

/* The weights of block i / SUM_BLOCK of logits[0..n) (the last one may be
 * short) after temperature t and min-p into w[0..); returns how many. The
 * same code for a block wherever it is asked for, so the same bits. */
static int weigh_block(Isa isa, const float *logits, int n, int i, float max, float t, float min_p, double *w) {
    int len = n - i < SUM_BLOCK ? n - i : SUM_BLOCK;
#if defined(__x86_64__)
    if (len == SUM_BLOCK && isa == ISA_AVX512) return weights_avx512(logits + i, max, t, min_p, w), len;
    if (len == SUM_BLOCK && isa == ISA_AVX2) return weights_avx2(logits + i, max, t, min_p, w), len;
#endif
    weights_scalar(logits + i, len, max, t, w);
    cut_min_p(w, len, min_p);
    return len;
}

/* The sum of the weights of logits[0..n) after temperature t and min-p, the
 * running sum after each whole block into ends (NULL: none): sampling_sum_in_order's,
 * a block at a time in w[SUM_BLOCK], which stays in the first-level cache. The
 * draw makes its one block's weights again (weigh_block), so the whole
 * vocabulary's never go to memory. */
static double weigh(Isa isa, const float *logits, int n, float max, float t, float min_p, double *w,
                    double *ends) {
    InOrder sum = {0.0, 0.0, isa};
    int i = 0;
    for (; i + SUM_BLOCK <= n; i += SUM_BLOCK) {
        weigh_block(isa, logits, n, i, max, t, min_p, w);
        in_order_add(&sum, w, SUM_BLOCK);
        if (ends) ends[i / SUM_BLOCK] = sum.sum;
    }
    in_order_add(&sum, w, weigh_block(isa, logits, n, i, max, t, min_p, w));
    return sum.sum;
}

static float max_logit(Isa isa, const float *logits, int n) {
#if defined(__x86_64__)
    if (isa != ISA_NONE) return max_avx2(logits, n);
#endif
    return max_scalar(logits, n);
}

static bool has_nan(Isa isa, const float *logits, int n) {
#if defined(__x86_64__)
    if (isa != ISA_NONE) return has_nan_avx2(logits, n);
#endif
    for (int i = 0; i < n; i++)
        if (logits[i] != logits[i]) return true;
    return false;
}

static int at_least(Isa isa, const float *logits, int n, float floor, int32_t *ids) {
#if defined(__x86_64__)
    if (isa != ISA_NONE) return at_least_avx2(logits, n, floor, ids);
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
    Isa isa;           /* the vector code, chosen once (isa_now) */
    Rng rng;
    int32_t *counts;   /* [vocab] times each token was accepted */
    int32_t *seen;     /* [vocab] the distinct accepted tokens, n_seen of them */
    int n_seen;
    float *penalized;  /* [vocab] the logits after the penalties */
    Cand *heap;        /* [vocab] */
    Cand *sel;         /* [vocab] the kept candidates, best first */
    double *weight;    /* [vocab] unnormalized probabilities of the kept candidates (or one block of the vocabulary's, weigh) */
    double *ends;      /* [vocab / SUM_BLOCK + 1] their running sums after each whole block */
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
    s->isa = isa_now();
    rng_seed(&s->rng, p->seed);
    s->counts = xcalloc((size_t)vocab_size, sizeof *s->counts);
    s->seen = xmalloc((size_t)vocab_size * sizeof *s->seen);
    s->penalized = xmalloc((size_t)vocab_size * sizeof *s->penalized);
    s->heap = xmalloc((size_t)vocab_size * sizeof *s->heap);
    s->sel = xmalloc((size_t)vocab_size * sizeof *s->sel);
    s->weight = xmalloc((size_t)vocab_size * sizeof *s->weight);
    s->ends = xmalloc((size_t)(vocab_size / SUM_BLOCK + 1) * sizeof *s->ends);
    s->ids = xmalloc((size_t)vocab_size * sizeof *s->ids);
    return s;
}

void sampler_free(Sampler *s) {
    if (!s) return;
    free(s->counts), free(s->seen), free(s->penalized);
    free(s->heap), free(s->sel), free(s->weight), free(s->ends), free(s->ids);
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
        double z = weigh(s->isa, logits, V, max, p->temperature, 0.0f, s->weight, NULL); /* pop_best writes them anew */
        stop = (double)p->top_p * z;
    }
    int limit = k_on ? p->top_k : V;
    if (!has_nan(s->isa, logits, V)) /* a NaN sits somewhere in a heap of all: keep that heap's order */
        for (double below = 16.0 * p->temperature; m < 0 && below < 1e30; below *= 4.0) {
            int n = at_least(s->isa, logits, V, (float)((double)max - below), s->ids);
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

/* Block k's weights (the last block may be short; *len says) of the draw's
 * n: the kept candidates', in s->weight already (l NULL), or the whole
 * vocabulary's, made again from the logits l into s->weight, the bits weigh
 * summed. */
static const double *block_weights(Sampler *s, const float *l, float max, int n, int k, int *len) {
    int i = k * SUM_BLOCK;
    if (!l) return *len = n - i < SUM_BLOCK ? n - i : SUM_BLOCK, s->weight + i;
    *len = weigh_block(s->isa, l, n, i, max, s->p.temperature, s->p.min_p, s->weight);
    return s->weight;
}

/* Draws index i of n with probability w[i] / sum: the first i whose running
 * sum w[0] + ... + w[i] (in order) exceeds a uniform draw times the sum. The
 * sums never decrease (the weights are >= 0): the block holding that i is
 * the first whose end (s->ends[k], sampling_sum_in_order's) exceeds the draw,
 * found by binary search; in it the running sums are made again one by one,
 * the same additions from the same value. *weight gets w[i]. */
static int pick(Sampler *s, const float *l, float max, int n, double sum, double *weight) {
    double target = rng_uniform(&s->rng) * sum;
    int lo = 0, hi = n / SUM_BLOCK, len; /* the first block k in [lo, hi) with target < ends[k], or hi */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (target < s->ends[mid]) hi = mid;
        else lo = mid + 1;
    }
    double cum = lo > 0 ? s->ends[lo - 1] : 0.0;
    const double *w = block_weights(s, l, max, n, lo, &len);
    for (int j = 0; j < len; j++)
        if (target < (cum += w[j])) return *weight = w[j], lo * SUM_BLOCK + j;
    for (int k = (n - 1) / SUM_BLOCK; k >= 0; k--) { /* none: rounding left the draw at the very end */
        w = block_weights(s, l, max, n, k, &len);
        for (int j = len - 1; j >= 0; j--)
            if (w[j] > 0.0 || k + j == 0) return *weight = w[j], k * SUM_BLOCK + j; /* the last with a weight, or 0 */
    }
    return 0;
}

int32_t sampler_sample(Sampler *s, const float *logits, float *prob) {
    const SamplerParams *p = &s->p;
    const float *l = apply_penalties(s, logits);
    if (p->temperature <= 0.0f) return argmax(l, s->vocab, prob);

    float max = max_logit(s->isa, l, s->vocab);
    bool filtered = (p->top_k > 0 && p->top_k < s->vocab) || p->top_p < 1.0f;
    int n;
    double sum = 0.0, w = 0.0;
    if (filtered) {
        n = select_top(s, l, max);
        cut_min_p(s->weight, n, p->min_p);
        sum = sum_in_order(s->isa, s->weight, n, s->ends);
    } else {   /* the whole vocabulary, in id order */
        n = s->vocab;
        sum = weigh(s->isa, l, n, max, p->temperature, p->min_p, s->weight, s->ends);
    }
    int i = pick(s, filtered ? NULL : l, max, n, sum, &w);
    if (prob) *prob = (float)(w / sum);
    return filtered ? s->sel[i].id : i;
}

int sampler_top_logprobs(const float *logits, int vocab, int k, int32_t *ids, float *logprobs) {
    if (k <= 0 || vocab <= 0) return 0;
    if (k > vocab) k = vocab;
    float max = max_logit(isa_now(), logits, vocab);
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
