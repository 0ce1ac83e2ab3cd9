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

/* Every width on inputs spread over all 2^32 bit patterns, in place and
 * not, with lengths that leave tails of every size. */
TEST(fexp_every_width_gives_the_same_bits) {
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    const uint32_t extra[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x42b17218u, 0x42b17217u, 0xc2cff1b4u, 0xc2cff1b5u,
                              0xc2ce8ecfu, 0xc2ce8ed0u, 0x42b00000u, 0xc2b00000u, 0x42afffffu, 0x00000001u};
    int widths[] = {16, 8, 1}, tried = 0;
    for (uint64_t start = 0; start < 4099; start += 1366) {
        for (int i = 0; i < N; i++) x[i] = from_bits((uint32_t)(start + (uint64_t)i * 65537u));
        memcpy(x, extra, sizeof extra);
        for (int i = 0; i < N; i++) want[i] = fexp(x[i]);
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
            for (int len = N - 15; len <= N; len += 5) {
                memset(got, 0, N * sizeof *got);
                if (fexp_array_lanes(widths[w], got, x, (size_t)len) != 0) continue;
                tried++;
                int bad = 0;
                for (int i = 0; i < len; i++)
                    if (!same(got[i], want[i]) && bad++ < 3) CHECK_MSG(0, "%d lanes: fexp(%a) = %a, not %a", widths[w], x[i], got[i], want[i]);
                CHECK_EQ_INT(bad, 0);
                if (len < N) CHECK(to_bits(got[len]) == 0); /* nothing written past n */
            }
            memcpy(got, x, N * sizeof *got);
            if (fexp_array_lanes(widths[w], got, got, N) == 0) /* in place */
                for (int i = 0; i < N; i++)
                    if (!same(got[i], want[i])) {
                        CHECK_MSG(0, "%d lanes in place: fexp(%a) = %a, not %a", widths[w], x[i], got[i], want[i]);
                        break;
                    }
        }
    }
    CHECK(tried >= 3 * 4); /* at least one width, on every start and length */
    free(x), free(want), free(got);
}
