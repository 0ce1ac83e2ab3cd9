/* test_quant.c: quant_row round trips through dequant_row, per type. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "harness.h"
#include "quant.h"

#define N 1024 /* a multiple of every block size */

/* Deterministic values with a spread like weights: a sum of uniforms, times
 * a per-32-block scale so blocks differ in range. */
static void fill_row(float *x, int n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        float v = 0;
        for (int k = 0; k < 4; k++) {
            s = s * 1664525u + 1013904223u;
            v += (float)(s >> 8) / 16777216.0f - 0.5f;
        }
        x[i] = v * (0.2f + (float)((i / 32) % 5));
    }
}

typedef struct { double max_rel; double rms_rel; } Err;

/* Quantizes and dequantizes x; returns the max error relative to the max
 * magnitude of its block (32 elements, or the 256 of a K-quant super-block,
 * whose scales are shared) and the rms error relative to rms(x). */
static Err round_trip(DType t, const float *x, float *y, int n) {
    int bs = dtype_block_size(t) == QK_K ? QK_K : 32;
    uint8_t *q = malloc(dtype_row_bytes(t, n));
    quant_row(t, x, q, n);
    dequant_row(t, q, y, n);
    free(q);
    Err e = {0, 0};
    double se = 0, sx = 0;
    for (int b = 0; b < n / bs; b++) {
        const float *xb = x + b * bs, *yb = y + b * bs;
        double amax = 0;
        for (int j = 0; j < bs; j++) amax = fmax(amax, fabs(xb[j]));
        for (int j = 0; j < bs; j++) {
            double d = fabs((double)yb[j] - xb[j]);
            if (amax > 0) e.max_rel = fmax(e.max_rel, d / amax);
            se += d * d;
            sx += (double)xb[j] * xb[j];
        }
    }
    e.rms_rel = sqrt(se / sx);
    return e;
}

static void check_type(DType t, double max_rel, double rms_rel) {
    float x[N], y[N];
    for (uint32_t seed = 1; seed <= 8; seed++) {
        fill_row(x, N, seed);
        Err e = round_trip(t, x, y, N);
        if (getenv("QUANT_VERBOSE"))
            printf("    %s seed %u: max %.4g rms %.4g\n", dtype_name(t), seed, e.max_rel, e.rms_rel);
        CHECK_MSG(e.max_rel <= max_rel, "%s seed %u: max error %.4g of block amax > %.4g",
                  dtype_name(t), seed, e.max_rel, max_rel);
        CHECK_MSG(e.rms_rel <= rms_rel, "%s seed %u: rms error %.4g of rms > %.4g",
                  dtype_name(t), seed, e.rms_rel, rms_rel);
    }
}

TEST(quant_f32_exact) { check_type(DT_F32, 0, 0); }
TEST(quant_f16_round_trip) { check_type(DT_F16, 1.0 / 1024, 1.0 / 2048); }
TEST(quant_bf16_round_trip) { check_type(DT_BF16, 1.0 / 128, 1.0 / 256); }
/* Q8_0: half a step of amax/127, plus the f16 rounding of d. */
TEST(quant_q8_0_round_trip) { check_type(DT_Q8_0, 0.5 / 127 + 1e-3, 0.01); }
/* Q4_0: the side opposite the extreme saturates at +7, so up to one step amax/8. */
TEST(quant_q4_0_round_trip) { check_type(DT_Q4_0, 1.0 / 8 + 1e-3, 0.12); }
/* K-quants: errors measured against the super-block's amax (shared d, dmin);
 * observed about 0.065 / 0.075 for Q4_K and 0.022 / 0.018 for Q6_K. */
TEST(quant_q4_k_round_trip) { check_type(DT_Q4_K, 0.1, 0.1); }
TEST(quant_q6_k_round_trip) { check_type(DT_Q6_K, 0.035, 0.025); }
/* The _1 types: half a step of the block's range / 15 (31), range <= 2 amax. */
TEST(quant_q4_1_round_trip) { check_type(DT_Q4_1, 1.0 / 15 + 2e-3, 0.08); }
TEST(quant_q5_1_round_trip) { check_type(DT_Q5_1, 1.0 / 31 + 2e-3, 0.04); }
/* Q5_0: like Q4_0 with twice the levels. */
TEST(quant_q5_0_round_trip) { check_type(DT_Q5_0, 1.0 / 16 + 1e-3, 0.06); }
/* IQ4_NL: the extreme value maps to -127; the other side saturates at 113. */
TEST(quant_iq4_nl_round_trip) { check_type(DT_IQ4_NL, 14.0 / 127 + 2e-3, 0.1); }
/* The other K-quants, observed max / rms: Q2_K 0.33 / 0.35, Q3_K 0.23 / 0.16,
 * Q5_K 0.031 / 0.038, IQ4_XS 0.105 / 0.086. */
TEST(quant_q2_k_round_trip) { check_type(DT_Q2_K, 0.4, 0.4); }
TEST(quant_q3_k_round_trip) { check_type(DT_Q3_K, 0.27, 0.2); }
TEST(quant_q5_k_round_trip) { check_type(DT_Q5_K, 0.04, 0.045); }
TEST(quant_iq4_xs_round_trip) { check_type(DT_IQ4_XS, 0.125, 0.1); }

TEST(quant_zero_row_stays_zero) {
    DType types[] = {DT_F16,  DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_IQ4_NL,
                     DT_Q2_K, DT_Q3_K, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_XS};
    float x[N] = {0}, y[N];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint8_t q[4 * N];
        quant_row(types[i], x, q, N);
        dequant_row(types[i], q, y, N);
        for (int j = 0; j < N; j++) CHECK_MSG(y[j] == 0, "%s: y[%d] = %g", dtype_name(types[i]), j, y[j]);
    }
}

/* Values already on the Q8_0 grid (integers times a power of two) come back exactly. */
TEST(quant_q8_0_exact_on_grid) {
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = (float)((i * 37) % 255 - 127) * 0.125f;
    x[0] = -127 * 0.125f; x[32] = 127 * 0.125f; /* each block reaches amax */
    uint8_t q[2 * 34];
    quant_row(DT_Q8_0, x, q, 64);
    dequant_row(DT_Q8_0, q, y, 64);
    for (int i = 0; i < 64; i++) CHECK_NEAR(y[i], x[i], 0);
}

/* The block layouts: element order survives (a ramp stays a ramp: a value
 * in the wrong place would be off by up to 1). */
TEST(quant_preserves_element_order) {
    struct { DType t; double tol; } cases[] = {
        {DT_Q8_0, 0.05}, {DT_Q4_0, 0.05}, {DT_Q4_1, 0.05}, {DT_Q5_0, 0.05}, {DT_Q5_1, 0.05},
        {DT_IQ4_NL, 0.1}, {DT_Q2_K, 0.2}, {DT_Q3_K, 0.1},  {DT_Q4_K, 0.05}, {DT_Q5_K, 0.05},
        {DT_Q6_K, 0.05},  {DT_IQ4_XS, 0.1},
    };
    float x[512], y[512];
    for (int i = 0; i < 512; i++) x[i] = (float)(i % 256) / 256.0f - 0.4f;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t q[4 * 512];
        quant_row(cases[k].t, x, q, 512);
        dequant_row(cases[k].t, q, y, 512);
        double worst = 0;
        for (int i = 0; i < 512; i++) worst = fmax(worst, fabs(y[i] - x[i]));
        CHECK_MSG(worst < cases[k].tol, "%s: ramp error %g", dtype_name(cases[k].t), worst);
    }
}

/* quant_row writes exactly the types the engine runs. */
TEST(quant_supported_types) {
    for (uint32_t t = 0; t < 64; t++)
        CHECK_MSG(quant_supported((DType)t) == dtype_supported(t), "type %u (%s)", t,
                  dtype_name(t) ? dtype_name(t) : "unknown");
}
