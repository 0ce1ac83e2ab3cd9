/* fexp.c: see fexp.h. With N = 32 table entries:
 *   z  = x * 32/ln2            (in double: exact enough that r below is)
 *   k  = round(z), r = z - k   (|r| <= 1/2, i.e. 2^(r/32) near 1)
 *   e^x = 2^(k/32) * 2^(r/32) = 2^(k div 32) * T[k mod 32] * p(r)
 * with p a cubic close to 2^(r/32). k comes from adding 1.5 * 2^52: the sum's
 * low mantissa bits are k, and k's bits shifted up into the exponent field
 * scale T[k mod 32] by 2^(k div 32) (the table holds each 2^(i/32) less
 * i << 47, which that shift adds back). */
#include "fexp.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INV_LN2_N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define SHIFT 0x1.8p+52                /* 1.5 * 2^52: rounds to an integer, kept in the low bits */
#define P3 0x1.c6af84b912394p-20       /* p(r) = 1 + P1 r + P2 r^2 + P3 r^3 */
#define P2 0x1.ebfce50fac4f3p-13
#define P1 0x1.62e42ff0c52d6p-6
#define ABSTOP_88 0x42b /* (bits >> 20) & 0x7ff of 88.0f: from here on |x| >= 88, or not finite */

/* bits of 2^(i/32), less i << 47 */
static const uint64_t POW2[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

static uint32_t float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* For |x| >= 88 or not finite: true with *e when x is past an end
 * (overflow, underflow, not finite), false when the steps below apply. */
static bool fexp_edge(float x, float *e) {
    if (float_bits(x) == 0xff800000u) *e = 0.0f;                      /* -inf */
    else if (((float_bits(x) >> 20) & 0x7ff) >= 0x7f8) *e = x + x;    /* +inf, NaN */
    else if (x > 0x1.62e42ep6f) *e = INFINITY;                        /* past FLT_MAX */
    else if (x < -0x1.9fe368p6f) *e = 0.0f;                           /* below half the least subnormal */
    else if (x < -0x1.9d1d9ep6f) *e = 0x1p-149f;                      /* the least subnormal */
    else return false;
    return true;
}

float fexp(float x) {
    float e;
    if (((float_bits(x) >> 20) & 0x7ff) >= ABSTOP_88 && fexp_edge(x, &e)) return e;
    double xd = (double)x;
    double kd = fma(INV_LN2_N, xd, SHIFT);
    uint64_t ki;
    memcpy(&ki, &kd, sizeof ki);
    kd -= SHIFT;
    double r = fma(INV_LN2_N, xd, -kd);
    uint64_t tb = POW2[ki % 32] + (ki << 47);
    double s;
    memcpy(&s, &tb, sizeof s);
    double z = fma(P3, r, P2), r2 = r * r, y = fma(P1, r, 1.0);
    y = fma(z, r2, y);
    return (float)(y * s);
}

static void fexp_scalar(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = fexp(x[i]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define FEXP_AVX512 __attribute__((target("avx512f")))
#define FEXP_AVX2 __attribute__((target("avx2,fma")))

/* POW2[k mod 32] in each lane: two 16-entry permutes, and bit 4 picks. */
static FEXP_AVX512 __m512i pow2_512(__m512i ki) {
    const __m512i t0 = _mm512_loadu_si512(POW2), t1 = _mm512_loadu_si512(POW2 + 8);
    const __m512i t2 = _mm512_loadu_si512(POW2 + 16), t3 = _mm512_loadu_si512(POW2 + 24);
    __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    return _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
}

/* The same by a gather (AVX2 permutes only within 128 bits). */
static FEXP_AVX2 __m256i pow2_256(__m256i ki) {
    return _mm256_i64gather_epi64((const long long *)POW2, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
}

/* fexp of the floats xf, widened to doubles in vectors of W bits: fexp's
 * steps, lane by lane. */
#define FEXP_DOUBLES(W, F, target)                                                            \
    static target F fexp_doubles##W(F xf) {                                                   \
        const __m##W##d inv = _mm##W##_set1_pd(INV_LN2_N), shift = _mm##W##_set1_pd(SHIFT);  \
        __m##W##d xd = _mm##W##_cvtps_pd(xf);                                                 \
        __m##W##d kd = _mm##W##_fmadd_pd(inv, xd, shift);                                     \
        __m##W##i ki = _mm##W##_castpd_si##W(kd);                                             \
        kd = _mm##W##_sub_pd(kd, shift);                                                      \
        __m##W##d r = _mm##W##_fmsub_pd(inv, xd, kd);                                         \
        __m##W##i tb = _mm##W##_add_epi64(pow2_##W(ki), _mm##W##_slli_epi64(ki, 47));         \
        __m##W##d z = _mm##W##_fmadd_pd(_mm##W##_set1_pd(P3), r, _mm##W##_set1_pd(P2));       \
        __m##W##d y = _mm##W##_fmadd_pd(_mm##W##_set1_pd(P1), r, _mm##W##_set1_pd(1.0));      \
        y = _mm##W##_fmadd_pd(z, _mm##W##_mul_pd(r, r), y);                                   \
        return _mm##W##_cvtpd_ps(_mm##W##_mul_pd(y, _mm##W##_castsi##W##_pd(tb)));            \
    }
FEXP_DOUBLES(512, __m256, FEXP_AVX512)
FEXP_DOUBLES(256, __m128, FEXP_AVX2)

/* y[0..16) = fexp(x[0..16)): lanes past an end (|x| >= 88, not finite)
 * are done again one by one. */
static FEXP_AVX512 void fexp16(float *y, const float *x) {
    __m512 v = _mm512_loadu_ps(x);
    __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), _mm512_set1_epi32(0x7ff));
    __mmask16 edge = _mm512_cmpge_epu32_mask(top, _mm512_set1_epi32(ABSTOP_88));
    __m256 a = fexp_doubles512(_mm512_castps512_ps256(v));
    __m256 b = fexp_doubles512(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    _mm256_storeu_ps(y, a);
    _mm256_storeu_ps(y + 8, b);
    if (!edge) return;
    float in[16]; /* x may be y */
    _mm512_storeu_ps(in, v);
    for (int l = 0; edge; l++, edge >>= 1)
        if (edge & 1) y[l] = fexp(in[l]);
}
/* fexp8: fexp16 in AVX2. */
static FEXP_AVX2 void fexp8(float *y, const float *x) {
    __m256 v = _mm256_loadu_ps(x);
    __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 20), _mm256_set1_epi32(0x7ff));
    int edge = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(ABSTOP_88 - 1))));
    _mm_storeu_ps(y, fexp_doubles256(_mm256_castps256_ps128(v)));
    _mm_storeu_ps(y + 4, fexp_doubles256(_mm256_extractf128_ps(v, 1)));
    if (!edge) return;
    float in[8];
    _mm256_storeu_ps(in, v);
    for (int l = 0; edge; l++, edge >>= 1)
        if (edge & 1) y[l] = fexp(in[l]);
}

/* Whole vectors of lanes, then the rest as one more, padded: the scalar
 * fexp (libm's fma without -mfma) only for the lanes past an end. */
#define FEXP_VECTORS(name, lanes, target)                                 \
    static target void name(float *y, const float *x, size_t n) {         \
        size_t i = 0;                                                     \
        for (; i + lanes <= n; i += lanes) fexp##lanes(y + i, x + i);     \
        if (i == n) return;                                               \
        float pad[lanes] = {0};                                           \
        memcpy(pad, x + i, (n - i) * sizeof *pad);                        \
        fexp##lanes(pad, pad);                                            \
        memcpy(y + i, pad, (n - i) * sizeof *pad);                        \
    }
FEXP_VECTORS(fexp_avx512, 16, FEXP_AVX512)
FEXP_VECTORS(fexp_avx2, 8, FEXP_AVX2)

/* The widest vectors this processor has. */
static int fexp_lanes_here(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 1;
    return __builtin_cpu_supports("avx512f") ? 16 : 8;
}
#else
static int fexp_lanes_here(void) { return 1; }
#endif

/* fexp_array's width: the widest, or what SIMD_ISA names (backend_simd.h;
 * the same rules as sampling.c): avx512..., avx2..., anything else none. */
static int fexp_lanes_chosen(void) {
    const char *want = getenv("SIMD_ISA");
    int here = fexp_lanes_here();
    if (!want || !*want) return here;
    if (strncmp(want, "avx512", 6) == 0) return here == 16 ? 16 : 1;
    return strncmp(want, "avx2", 4) == 0 && here >= 8 ? 8 : 1;
}

static void fexp_run(int lanes, float *y, const float *x, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (lanes == 16) fexp_avx512(y, x, n);
    else if (lanes == 8) fexp_avx2(y, x, n);
    else
#endif
        fexp_scalar(y, x, n);
}

int fexp_array_lanes(int lanes, float *y, const float *x, size_t n) {
    if ((lanes != 1 && lanes != 8 && lanes != 16) || lanes > fexp_lanes_here()) return -1;
    fexp_run(lanes, y, x, n);
    return 0;
}

void fexp_array(float *y, const float *x, size_t n) {
    static int lanes; /* 0: not chosen yet; every thread chooses the same */
    int l = __atomic_load_n(&lanes, __ATOMIC_RELAXED);
    if (!l) __atomic_store_n(&lanes, l = fexp_lanes_chosen(), __ATOMIC_RELAXED);
    fexp_run(l, y, x, n);
}
