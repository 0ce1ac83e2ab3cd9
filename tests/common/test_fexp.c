/* test_fexp.c: fexp is e^x to within an ulp, with the ends where they
 * belong, and every vector width gives fexp's bits exactly. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fexp.h"
#include "harness.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Same bits, or both NaN. */
static bool same(float a, float b) { return to_bits(a) == to_bits(b) || (isnan(a) && isnan(b)); }

TEST(fexp_is_e_to_the_x_within_an_ulp) {
    CHECK(to_bits(fexp(0.0f)) == to_bits(1.0f));
    CHECK(to_bits(fexp(-0.0f)) == to_bits(1.0f));
    CHECK(to_bits(fexp(1.0f)) == to_bits(0x1.5bf0a8p+1f)); /* e, rounded to float */
    CHECK(to_bits(fexp(-1.0f)) == to_bits(0x1.78b564p-2f));
    int worse = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.0137f) {
        double want = exp((double)x);
        float got = fexp(x);
        double ulp = (double)nextafterf((float)want, INFINITY) - (double)(float)want;
        if (fabs((double)got - want) > ulp && worse++ < 3) CHECK_MSG(0, "fexp(%a) = %a, e^x = %a", x, got, want);
    }
    CHECK_EQ_INT(worse, 0);
}

TEST(fexp_ends) {
    CHECK(fexp(-INFINITY) == 0.0f);
    CHECK(isinf(fexp(INFINITY)) && fexp(INFINITY) > 0);
    CHECK(isnan(fexp(NAN)));
    CHECK(isinf(fexp(88.8f)));         /* past FLT_MAX */
    CHECK(isfinite(fexp(88.7f)));      /* just below it */
    CHECK(fexp(-104.0f) == 0.0f);      /* below half the least subnormal */
    CHECK(fexp(-103.5f) == 0x1p-149f); /* the least subnormal */
    CHECK(fexp(-100.0f) > 0.0f && fexp(-100.0f) < 0x1p-126f); /* subnormal */
}

/* The widths this processor must have: all of them where it has the
 * instructions. */
static bool width_here(int lanes) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (lanes == 16) return avx2 && __builtin_cpu_supports("avx512f");
    if (lanes == 8) return avx2;
#endif
    return lanes == 1;
}

/* Every width on inputs spread over all 2^32 bit patterns, in place and
 * not, with tails of every length. */
TEST(fexp_every_width_gives_the_same_bits) {
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    const uint32_t extra[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x42b17218u, 0x42b17217u, 0xc2cff1b4u,
                              0xc2cff1b5u, 0xc2ce8ecfu, 0xc2ce8ed0u, 0x42b00000u, 0xc2b00000u, 0x42afffffu,
                              0x00000001u};
    int widths[] = {16, 8, 1};
    for (uint64_t start = 0; start < 4099; start += 1366) {
        for (int i = 0; i < N; i++) x[i] = from_bits((uint32_t)(start + (uint64_t)i * 65537u));
        memcpy(x + 5, extra, sizeof extra); /* the ends, in the middle of a vector */
        for (int i = 0; i < N; i++) want[i] = fexp(x[i]);
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
            if (!width_here(widths[w])) {
                CHECK_EQ_INT(fexp_array_lanes(widths[w], got, x, N), -1);
                continue;
            }
            for (int len = N - 16; len <= N; len++) {
                memset(got, 0, N * sizeof *got);
                CHECK_EQ_INT(fexp_array_lanes(widths[w], got, x, (size_t)len), 0);
                int bad = 0;
                for (int i = 0; i < len; i++)
                    if (!same(got[i], want[i]) && bad++ < 3) CHECK_MSG(0, "%d lanes: fexp(%a) = %a, not %a", widths[w], x[i], got[i], want[i]);
                CHECK_EQ_INT(bad, 0);
                if (len < N) CHECK(to_bits(got[len]) == 0); /* nothing written past n */
            }
            memcpy(got, x, N * sizeof *got);
            CHECK_EQ_INT(fexp_array_lanes(widths[w], got, got, N - 3), 0); /* in place */
            for (int i = 0; i < N - 3; i++)
                if (!same(got[i], want[i])) {
                    CHECK_MSG(0, "%d lanes in place: fexp(%a) = %a, not %a", widths[w], x[i], got[i], want[i]);
                    break;
                }
        }
    }
    CHECK_EQ_INT(fexp_array_lanes(4, got, x, 1), -1);
    free(x), free(want), free(got);
}

/* fexp_array's width follows SIMD_ISA, read once: whatever it says later,
 * every call computes. */
TEST(fexp_array_computes_whatever_simd_isa_says) {
    float x[37], y[37];
    for (int i = 0; i < 37; i++) x[i] = (float)i * 0.37f - 6.0f;
    const char *was = getenv("SIMD_ISA");
    char *keep = was ? strdup(was) : NULL;
    const char *isas[] = {"avx2", "none", "avx512", ""};
    for (size_t k = 0; k < sizeof isas / sizeof *isas; k++) {
        setenv("SIMD_ISA", isas[k], 1);
        fexp_array(y, x, 37);
        for (int i = 0; i < 37; i++) CHECK_MSG(same(y[i], fexp(x[i])), "SIMD_ISA=%s: lane %d", isas[k], i);
    }
    if (keep) setenv("SIMD_ISA", keep, 1);
    else unsetenv("SIMD_ISA");
    free(keep);
}

/* Where glibc runs its FMA expf, fexp is it bit for bit (fexp.h). */
TEST(fexp_is_glibc_expf_where_it_has_fma) {
#if defined(__GLIBC__) && defined(__x86_64__)
    if (!width_here(8)) {
        SKIP("this processor has no FMA and AVX2: glibc's expf takes another version");
        return;
    }
    int bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        float x = from_bits((uint32_t)u), a = expf(x), b = fexp(x);
        if (!same(a, b) && bad++ < 3) CHECK_MSG(0, "fexp(%a) = %a, glibc's expf %a", x, b, a);
    }
    CHECK_EQ_INT(bad, 0);
#else
    SKIP("not glibc on x86-64");
#endif
}
