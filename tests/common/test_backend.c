/* test_backend.c: the backends' promises.
 *  - invariance: for one backend, row i of a batched matmul is bitwise the
 *    row of a one-row call, for batch sizes 1..16 and 1..4 threads, for every
 *    weight type; attention is bitwise the same however the keys are cut into
 *    spans and however many threads split the heads;
 *  - accuracy: simd and parallel stay within a per-type tolerance of scalar,
 *    and every backend within it of the exact float64 product.
 * Every simd build this CPU runs is tested (AVX-512 and AVX2 on a recent x86),
 * and the scalar fallback of the simd/parallel backends too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "backend.h"
#include "backend_simd.h"
#include "harness.h"
#include "quant.h"
#include "threadpool.h"
#include "tiles.h"

#define MAX_N 16

static float frand(uint32_t *s) {
    float v = 0;
    for (int k = 0; k < 4; k++) {
        *s = *s * 1664525u + 1013904223u;
        v += (float)(*s >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

static void fill(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) x[i] = frand(&s) * (0.3f + (float)((i / 32) % 4)); /* blocks differ in range */
}

typedef struct {
    Tensor t;
    void *data;
    float *deq; /* the weights as the scalar backend sees them: [out, in] */
    void *tiles;
} Weight;

static Weight make_weight(DType type, int in, int out, uint32_t seed) {
    Weight w = {0};
    size_t rb = dtype_row_bytes(type, in);
    w.data = malloc(rb * (size_t)out);
    w.deq = malloc(sizeof(float) * (size_t)in * out);
    float *row = malloc(sizeof(float) * (size_t)in);
    for (int o = 0; o < out; o++) {
        fill(row, (size_t)in, seed * 7919u + (uint32_t)o);
        quant_row(type, row, (char *)w.data + rb * (size_t)o, in);
        dequant_row(type, (char *)w.data + rb * (size_t)o, w.deq + (size_t)o * in, in);
    }
    free(row);
    w.t = (Tensor){"w", type, {in, out, 1, 1}, rb, w.data, NULL};
    return w;
}

/* Gives w its tiles (tiles.h), as the model loader does: one-row calls of an
 * AVX-512 build then read them instead of the rows. */
static void add_tiles(Weight *w) {
    w->tiles = malloc(tiles_bytes(&w->t));
    tiles_build(&w->t, w->tiles);
    w->t.tiles = w->tiles;
}

static void free_weight(Weight *w) {
    free(w->data);
    free(w->deq);
    free(w->tiles);
}

/* The kernel builds to test: each simd build the CPU runs, then none (scalar). */
static int kernel_builds(const SimdKernels **ks) {
    int n = 0;
    const char *isas[] = {"avx512bf16", "avx512", "avx2vnni", "avx2"};
    for (int i = 0; i < 4; i++)
        if (simd_kernels_isa(isas[i])) ks[n++] = simd_kernels_isa(isas[i]);
    ks[n++] = NULL;
    return n;
}

static const char *build_name(const SimdKernels *k) { return k ? k->isa : "scalar-fallback"; }

/* A case's tolerance for build k: BF16 activations (a bf16_pairs build) are
 * rounded to 8 bits of mantissa, as close as the quantized types' 8-bit ones. */
static double case_tol(const SimdKernels *k, DType type, double tol) {
    return k && k->bf16_pairs && type == DT_BF16 ? 5e-3 : tol;
}

/* Pools keep all their threads at work even on a busy machine (see threadpool.h). */
__attribute__((constructor)) static void pools_never_solo(void) { setenv("POOL_SOLO", "0", 1); }

/* The weight types and a row length for each that exercises the tails: odd
 * numbers of 32-blocks (a half-filled AVX-512 chunk), float rows that are not
 * a multiple of 16 lanes; for Q4_0 and Q4_1 also 1, 2 and 3 blocks in the
 * last group of 4 of the one-row kernel (9, 10, 11 blocks) and a part of 16
 * that ends on a whole group (12). */
typedef struct {
    DType type;
    int in;
    double tol; /* |simd - scalar| <= tol * sum |w x|: rounding for float weights; for
                 * quantized ones the 8-bit activations (about 0.2 % measured) */
} TypeCase;

static const TypeCase TYPES[] = {
    {DT_F32, 200, 1e-5},  {DT_F32, 256, 1e-5},  {DT_F16, 200, 1e-5},  {DT_BF16, 136, 1e-5},
    {DT_Q8_0, 352, 5e-3}, {DT_Q8_0, 256, 5e-3}, {DT_Q4_0, 352, 5e-3}, {DT_Q4_K, 512, 5e-3},
    {DT_Q6_K, 512, 5e-3}, {DT_Q4_1, 352, 5e-3}, {DT_Q5_0, 352, 5e-3}, {DT_Q5_1, 352, 5e-3},
    {DT_IQ4_NL, 352, 5e-3}, {DT_Q2_K, 512, 5e-3}, {DT_Q3_K, 512, 5e-3}, {DT_Q5_K, 512, 5e-3},
    {DT_IQ4_XS, 512, 5e-3}, {DT_Q4_0, 320, 5e-3}, {DT_Q4_0, 384, 5e-3}, {DT_Q4_1, 288, 5e-3},
    {DT_Q4_1, 320, 5e-3}, {DT_Q8_0, 160, 5e-3},
};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])
#define OUT 37 /* not a multiple of any tile width */

static bool rows_equal(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* The largest |y - ref| of n rows of out outputs, each relative to its sum |w x|. */
static double worst_error(const Weight *w, const float *x, const float *y, const float *ref, int n, int out) {
    int in = (int)w->t.ne[0];
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double mag = 0;
            for (int j = 0; j < in; j++) mag += fabs((double)w->deq[(size_t)o * in + j] * x[(size_t)i * in + j]);
            double e = fabs((double)y[i * out + o] - ref[i * out + o]) / mag;
            if (e > worst) worst = e;
        }
    return worst;
}

/* Row i of every batch 1..16 and of one-row calls equals row i of the batch
 * of 16, which is kept in full (and must equal want, if given). */
static void check_batch_invariance(Backend *be, const Weight *w, const float *x, float *full, const float *want,
                                   const char *what) {
    int in = (int)w->t.ne[0];
    float *y = malloc(sizeof(float) * MAX_N * OUT);
    matmul(be, full, x, &w->t, MAX_N);
    CHECK_MSG(!want || rows_equal(full, want, MAX_N * OUT), "%s: differs from the same build without tiles", what);
    for (int n = 1; n <= MAX_N && !test_failed_now(); n++) {
        matmul(be, y, x, &w->t, n);
        for (int i = 0; i < n; i++)
            CHECK_MSG(rows_equal(y + i * OUT, full + i * OUT, OUT), "%s: row %d of a batch of %d differs from the batch of 16",
                      what, i, n);
        matmul(be, y, x + (size_t)(n - 1) * in, &w->t, 1);
        CHECK_MSG(rows_equal(y, full + (n - 1) * OUT, OUT), "%s: one-row call for row %d differs", what, n - 1);
    }
    free(y);
}

TEST(backend_matmul_batch_invariant) {
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    for (int c = 0; c < N_TYPES; c++) {
        const TypeCase *tc = &TYPES[c];
        Weight w = make_weight(tc->type, tc->in, OUT, (uint32_t)c + 1);
        float *x = malloc(sizeof(float) * MAX_N * tc->in), *rows[5], *full = malloc(sizeof(float) * MAX_N * OUT);
        fill(x, (size_t)MAX_N * tc->in, 100 + (uint32_t)c);
        for (int tiled = 0; tiled <= (int)tiles_type(tc->type); tiled++) { /* tiles: the same bits as rows */
            if (tiled) add_tiles(&w);
            for (int k = 0; k < nk; k++) {
                char what[96];
                Backend *be = backend_simd_create(ks[k]);
                snprintf(what, sizeof what, "simd/%s %s in=%d%s", build_name(ks[k]), dtype_name(tc->type), tc->in,
                         tiled ? " (tiles)" : "");
                if (!tiled) rows[k] = malloc(sizeof(float) * MAX_N * OUT);
                check_batch_invariance(be, &w, x, tiled ? full : rows[k], tiled ? rows[k] : NULL, what);
                backend_free(be);
            }
        }
        for (int k = 0; k < nk; k++) free(rows[k]);
        free(full);
        free(x);
        free_weight(&w);
    }
}

/* The AMX kernel on its own (amx.h), called as the parallel backend calls
 * it (ranges of outputs from multiples of 16): every row of every batch, full
 * tiles of 16 rows, a tail, and fewer than 16, equals its one-row call
 * (K(trow), vpdpbusd), bit for bit; 1, 2, 3, 8 and 33 blocks (the pipeline's
 * ends). */
TEST(backend_amx_q8_0_equals_one_row_calls) {
    if (!amx_usable()) SKIP("no AMX-INT8 here (or SIMD_AMX=0): the AVX-512 kernels run Q8_0 batches");
    const SimdKernels *k = simd_kernels_isa("avx512");
    const int ins[] = {1056, 256, 32, 64, 96}, sizes[] = {4, 7, 8, 15, 16, 17, 33, 40}, big = 40, out = 53;
    Backend *simd = backend_simd_create(k);
    for (int c = 0; c < (int)(sizeof ins / sizeof ins[0]) && !test_failed_now(); c++) {
        int in = ins[c];
        Weight w = make_weight(DT_Q8_0, in, out, 900 + (uint32_t)c);
        add_tiles(&w);
        float *x = malloc(sizeof(float) * big * in), *one = malloc(sizeof(float) * big * out),
              *y = malloc(sizeof(float) * big * out);
        fill(x, (size_t)big * in, 910 + (uint32_t)c);
        for (int i = 0; i < big; i++) matmul(simd, one + (size_t)i * out, x + (size_t)i * in, &w.t, 1);
        for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]) && !test_failed_now(); s++) {
            SimdScratch sc = {0};
            SimdActs a;
            simd_acts_init(&a, &sc, k, x, sizes[s], in, DT_Q8_0);
            k->prepare_rows(&a, 0, sizes[s]);
            memset(y, 0, sizeof(float) * big * out);
            amx_q8_0_cols(y, &a, &w.t, 16, out); /* a second thread's share... */
            amx_q8_0_cols(y, &a, &w.t, 0, 16);   /* ...and the first's */
            CHECK_MSG(rows_equal(y, one, sizes[s] * out), "in=%d: a batch of %d on AMX differs from one-row calls", in,
                      sizes[s]);
            simd_scratch_free(&sc);
        }
        free(x), free(one), free(y);
        free_weight(&w);
    }
    backend_free(simd);
}

/* The AVX2 build with VNNI (what AVX-512 machines run for IQ4_XS and the
 * K-quants with super-block sums, simd_kernels_for) gives the AVX2 build's
 * bits for every type and batch: vpdpbusd's sums are the same integers. */
TEST(backend_avx2vnni_is_avx2_bitwise) {
    const SimdKernels *plain = simd_kernels_isa("avx2"), *vnni = simd_kernels_isa("avx2vnni");
    if (!plain || !vnni) SKIP("no AVX-512 VNNI here: the avx2vnni build cannot run");
    Backend *a = backend_simd_create(plain), *b = backend_simd_create(vnni);
    for (int c = 0; c < N_TYPES && !test_failed_now(); c++) {
        const TypeCase *tc = &TYPES[c];
        Weight w = make_weight(tc->type, tc->in, OUT, (uint32_t)c + 300);
        float *x = malloc(sizeof(float) * MAX_N * tc->in), *ya = malloc(sizeof(float) * MAX_N * OUT),
              *yb = malloc(sizeof(float) * MAX_N * OUT);
        fill(x, (size_t)MAX_N * tc->in, 300 + (uint32_t)c);
        for (int n = 1; n <= MAX_N; n++) {
            matmul(a, ya, x, &w.t, n);
            matmul(b, yb, x, &w.t, n);
            CHECK_MSG(rows_equal(ya, yb, n * OUT), "%s in=%d, batch %d: avx2vnni differs from avx2",
                      dtype_name(tc->type), tc->in, n);
        }
        free(x), free(ya), free(yb);
        free_weight(&w);
    }
    backend_free(a);
    backend_free(b);
}

/* The parallel backend, for every batch size 1..16 and 1..4 threads, gives
 * each row the bits of a one-row call on the simd backend (the same kernels,
 * columns split among threads); the matrix is large enough to be split. The
 * types with tiles have them, as a loaded model's do. */
TEST(backend_matmul_threads_invariant) {
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    int out = 301;
    for (int k = 0; k < nk; k++) {
        Backend *simd = backend_simd_create(ks[k]), *par[5];
        for (int t = 1; t <= 4; t++) par[t] = backend_parallel_create(ks[k], t);
        for (int c = 0; c < N_TYPES && !test_failed_now(); c++) {
            const TypeCase *tc = &TYPES[c];
            Weight w = make_weight(tc->type, tc->in, out, (uint32_t)c + 50);
            if (tiles_type(tc->type)) add_tiles(&w);
            float *x = malloc(sizeof(float) * MAX_N * tc->in);
            float *ref = malloc(sizeof(float) * MAX_N * out), *y = malloc(sizeof(float) * MAX_N * out);
            fill(x, (size_t)MAX_N * tc->in, 200 + (uint32_t)c);
            for (int i = 0; i < MAX_N; i++) matmul(simd, ref + (size_t)i * out, x + (size_t)i * tc->in, &w.t, 1);
            for (int n = 1; n <= MAX_N; n++)
                for (int t = 1; t <= 4; t++) {
                    matmul(par[t], y, x, &w.t, n);
                    CHECK_MSG(rows_equal(y, ref, n * out), "parallel/%s %s, %d threads, batch %d differs from one-row calls",
                              build_name(ks[k]), dtype_name(tc->type), t, n);
                }
            free(x);
            free(ref);
            free(y);
            free_weight(&w);
        }
        for (int t = 1; t <= 4; t++) backend_free(par[t]);
        backend_free(simd);
    }
}

/* Prefill-sized calls: rows longer than one packed run of blocks (the
 * kernels keep partial sums in y between runs), batches past every row-tile
 * and pre-decoding threshold, and a partial last tile of outputs. Row i of a
 * batch of up to 40 equals its one-row call, on 2 threads, and stays close to
 * scalar; with and without tiles for the types that have them. */
TEST(backend_matmul_long_rows_and_big_batches) {
    static const TypeCase LONG[] = {
        {DT_F32, 1040, 1e-5}, {DT_F16, 1040, 1e-5},  {DT_BF16, 1040, 1e-5}, {DT_Q8_0, 1056, 5e-3},
        {DT_Q4_0, 1056, 5e-3}, {DT_Q4_1, 1056, 5e-3}, {DT_Q4_K, 1280, 5e-3}, {DT_Q6_K, 1280, 5e-3},
        {DT_IQ4_XS, 1280, 5e-3},
    };
    const int sizes[] = {1, 2, 3, 5, 8, 17, 40}, big = 40, out = 53;
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    Backend *scalar = backend_scalar_create();
    for (int c = 0; c < (int)(sizeof LONG / sizeof LONG[0]); c++) {
        const TypeCase *tc = &LONG[c];
        int in = tc->in;
        Weight w = make_weight(tc->type, in, out, (uint32_t)c + 77);
        float *x = malloc(sizeof(float) * big * in), *one = malloc(sizeof(float) * big * out),
              *y = malloc(sizeof(float) * big * out), *ref = malloc(sizeof(float) * big * out);
        fill(x, (size_t)big * in, 400 + (uint32_t)c);
        matmul(scalar, ref, x, &w.t, big);
        for (int tiled = 0; tiled <= (int)tiles_type(tc->type); tiled++) {
            if (tiled) add_tiles(&w);
            for (int k = 0; k < nk && !test_failed_now(); k++) {
                Backend *simd = backend_simd_create(ks[k]), *par = backend_parallel_create(ks[k], 2);
                for (int i = 0; i < big; i++) matmul(simd, one + (size_t)i * out, x + (size_t)i * in, &w.t, 1);
                for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {
                    matmul(par, y, x, &w.t, sizes[s]);
                    CHECK_MSG(rows_equal(y, one, sizes[s] * out), "%s %s in=%d%s: a batch of %d differs from one-row calls",
                              build_name(ks[k]), dtype_name(tc->type), in, tiled ? " (tiles)" : "", sizes[s]);
                }
                double worst = worst_error(&w, x, y, ref, big, out);
                double tol = case_tol(ks[k], tc->type, tc->tol);
                CHECK_MSG(worst <= tol, "%s %s in=%d: relative error %.3g > %.3g", build_name(ks[k]),
                          dtype_name(tc->type), in, worst, tol);
                backend_free(simd);
                backend_free(par);
            }
        }
        free(x);
        free(one);
        free(y);
        free(ref);
        free_weight(&w);
    }
    backend_free(scalar);
}

/* Row o's blocks of type t at the extremes the test below names (the
 * first 2 bytes, the scale d, stay as made). */
static void extreme_row(DType t, uint8_t *row, int in, int o) {
    const size_t bytes = t == DT_Q4_0 ? 18 : t == DT_Q8_0 ? 34 : t == DT_Q4_K ? 144 : 136;
    const int per = t == DT_Q4_0 || t == DT_Q8_0 ? 32 : 256;
    for (int b = 0; b < in / per; b++) {
        uint8_t *p = row + (size_t)b * bytes;
        for (size_t k = 2; k < bytes; k++)
            if (t == DT_Q4_0) p[k] = 0xFF;
            else if (t == DT_Q8_0 && (k % 3 == 0 || o % 2 == 0)) p[k] = 0x80;
            else if (t == DT_Q4_K && k >= 4) p[k] = 0xFF; /* scales and mins 63, codes 15 */
            else if (t == DT_IQ4_XS) p[k] = 0;           /* scales -32, codes 0: -127 */
    }
}

/* The integer sums at their largest, against activations all near +127:
 * Q4_0 and Q4_K codes of 15 (AVX2 adds a block's 8 groups of pairs in 16
 * bits: at most 30480), Q4_K's scales and mins of 63, IQ4_XS's -127 under a
 * scale of -32 (pairs of 2 x 127 x 127), and Q8_0 weights of -128, which the
 * quantizer never writes but a file may hold (|w| is then 128 in an
 * unsigned byte). Close to scalar and the same bits in every batch, for
 * every build. */
TEST(backend_matmul_extreme_codes) {
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    Backend *scalar = backend_scalar_create();
    const DType types[] = {DT_Q4_0, DT_Q8_0, DT_Q4_K, DT_IQ4_XS};
    for (int c = 0; c < 4; c++) {
        DType t = types[c];
        const int in = t == DT_Q4_0 || t == DT_Q8_0 ? 352 : 512;
        Weight w = make_weight(t, in, OUT, (uint32_t)c + 500);
        for (int o = 0; o < OUT; o++) {
            uint8_t *row = (uint8_t *)w.data + w.t.row_bytes * (size_t)o;
            extreme_row(t, row, in, o);
            dequant_row(t, row, w.deq + (size_t)o * in, in);
        }
        float *x = malloc(sizeof(float) * MAX_N * in), *ref = malloc(sizeof(float) * MAX_N * OUT),
              *y = malloc(sizeof(float) * MAX_N * OUT);
        for (int j = 0; j < MAX_N * in; j++) x[j] = 1.0f + 0.001f * (float)(j % 7);
        matmul(scalar, ref, x, &w.t, MAX_N);
        for (int k = 0; k < nk && !test_failed_now(); k++) {
            char what[96];
            Backend *be = backend_simd_create(ks[k]);
            snprintf(what, sizeof what, "simd/%s %s extreme codes", build_name(ks[k]), dtype_name(t));
            check_batch_invariance(be, &w, x, y, NULL, what);
            double worst = worst_error(&w, x, y, ref, MAX_N, OUT);
            CHECK_MSG(worst <= 5e-3, "%s: relative error %.3g > 5e-3", what, worst);
            backend_free(be);
        }
        free(x);
        free(ref);
        free(y);
        free_weight(&w);
    }
    backend_free(scalar);
}

/* simd against the scalar reference: per element, relative to sum |w x|
 * (float types: rounding only; quantized types: the 8-bit activations). */
TEST(backend_matmul_close_to_scalar) {
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    Backend *scalar = backend_scalar_create();
    int n = 5;
    for (int c = 0; c < N_TYPES; c++) {
        const TypeCase *tc = &TYPES[c];
        int in = tc->in;
        Weight w = make_weight(tc->type, in, OUT, (uint32_t)c + 9);
        float *x = malloc(sizeof(float) * n * in), *ref = malloc(sizeof(float) * n * OUT),
              *y = malloc(sizeof(float) * n * OUT);
        fill(x, (size_t)n * in, 300 + (uint32_t)c);
        matmul(scalar, ref, x, &w.t, n);
        for (int k = 0; k < nk; k++) {
            Backend *be = backend_parallel_create(ks[k], 2);
            matmul(be, y, x, &w.t, n);
            double worst = worst_error(&w, x, y, ref, n, OUT);
            double tol = case_tol(ks[k], tc->type, tc->tol);
            CHECK_MSG(worst <= tol, "%s %s in=%d: relative error %.3g > %.3g", build_name(ks[k]),
                      dtype_name(tc->type), in, worst, tol);
            backend_free(be);
        }
        free(x);
        free(ref);
        free(y);
        free_weight(&w);
    }
    backend_free(scalar);
}

/* Every backend against the exact answer: the dequantized weights times x,
 * summed in float64. The scalar backend is off by float rounding only; simd
 * and parallel by the 8-bit activations too (BACKEND_VERBOSE=1 prints the
 * worst error of each). */
TEST(backend_matmul_close_to_float64) {
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    int n = 3;
    for (int c = 0; c < N_TYPES; c++) {
        const TypeCase *tc = &TYPES[c];
        int in = tc->in;
        Weight w = make_weight(tc->type, in, OUT, (uint32_t)c + 77);
        float *x = malloc(sizeof(float) * n * in), *y = malloc(sizeof(float) * n * OUT);
        fill(x, (size_t)n * in, 400 + (uint32_t)c);
        for (int k = -1; k < nk; k++) { /* -1: the scalar backend */
            Backend *be = k < 0 ? backend_scalar_create() : backend_simd_create(ks[k]);
            double tol = k < 0 ? 1e-5 : case_tol(ks[k], tc->type, tc->tol);
            matmul(be, y, x, &w.t, n);
            double worst = 0;
            for (int i = 0; i < n; i++)
                for (int o = 0; o < OUT; o++) {
                    double exact = 0, mag = 0;
                    for (int j = 0; j < in; j++) {
                        double p = (double)w.deq[(size_t)o * in + j] * x[(size_t)i * in + j];
                        exact += p;
                        mag += fabs(p);
                    }
                    worst = fmax(worst, fabs(y[i * OUT + o] - exact) / mag);
                }
            if (getenv("BACKEND_VERBOSE"))
                printf("    %-6s %-15s relative error %.3g\n", dtype_name(tc->type), k < 0 ? "scalar" : build_name(ks[k]), worst);
            CHECK_MSG(worst <= tol, "%s %s in=%d: relative error %.3g > %.3g", k < 0 ? "scalar" : build_name(ks[k]),
                      dtype_name(tc->type), in, worst, tol);
            backend_free(be);
        }
        free(x);
        free(y);
        free_weight(&w);
    }
}

/* ---- attention ------------------------------------------------------------- */

typedef struct {
    AttnShape s;
    int n_keys;
} AttnCase;

static const AttnCase ATTN[] = {
    {{16, 8, 128}, 70}, /* Qwen3-0.6B's heads */
    {{8, 2, 32}, 37},
    {{4, 2, 16}, 5},
    {{4, 4, 32}, 9},    /* a kv head to each head: no pairs */
    {{4, 2, 48}, 13},   /* value vectors not a whole number of passes */
    {{4, 4, 20}, 23},   /* head_dim not a multiple of the lanes: the scalar path inside simd */
};

/* Cuts n keys into spans of the given sizes (the last takes the rest), each
 * span in its own buffer, as a paged cache would hold them. */
static int cut_spans(const float *k, const float *v, int n, int kv_dim, const int *sizes, int n_sizes, KvSpan *spans,
                     float **bufs) {
    int done = 0, ns = 0;
    for (int i = 0; done < n; i++) {
        int len = i < n_sizes ? sizes[i] : n - done;
        if (len > n - done) len = n - done;
        float *b = malloc(sizeof(float) * 2 * (size_t)len * kv_dim + 1);
        memcpy(b, k + (size_t)done * kv_dim, sizeof(float) * (size_t)len * kv_dim);
        memcpy(b + (size_t)len * kv_dim, v + (size_t)done * kv_dim, sizeof(float) * (size_t)len * kv_dim);
        spans[ns] = (KvSpan){b, b + (size_t)len * kv_dim, len};
        bufs[ns++] = b;
        done += len;
    }
    return ns;
}

TEST(backend_attention_spans_and_threads_invariant) {
    const SimdKernels *ks[5];
    int nk = kernel_builds(ks);
    Backend *scalar = backend_scalar_create();
    static const int cuts[][4] = {{16, 16, 16, 16}, {1, 2, 3, 4}, {5, 0, 0, 0}, {3, 29, 1, 7}};
    for (size_t c = 0; c < sizeof ATTN / sizeof ATTN[0]; c++) {
        AttnShape s = ATTN[c].s;
        int n = ATTN[c].n_keys, kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim;
        float *k = malloc(sizeof(float) * n * kv_dim), *v = malloc(sizeof(float) * n * kv_dim);
        float *q = malloc(sizeof(float) * q_dim), *ref = malloc(sizeof(float) * q_dim),
              *sref = malloc(sizeof(float) * q_dim), *out = malloc(sizeof(float) * q_dim);
        fill(k, (size_t)n * kv_dim, 11 + (uint32_t)c);
        fill(v, (size_t)n * kv_dim, 22 + (uint32_t)c);
        fill(q, (size_t)q_dim, 33 + (uint32_t)c);
        KvSpan whole = {k, v, n};
        attention(scalar, sref, q, &whole, 1, s);
        for (int b = 0; b < nk; b++) {
            Backend *simd = backend_simd_create(ks[b]);
            attention(simd, ref, q, &whole, 1, s);
            for (int i = 0; i < q_dim; i++)
                CHECK_MSG(fabsf(ref[i] - sref[i]) <= 1e-5f * (1 + fabsf(sref[i])), "%s attention %zu: out[%d] %g vs scalar %g",
                          build_name(ks[b]), c, i, ref[i], sref[i]);
            for (size_t cu = 0; cu < sizeof cuts / sizeof cuts[0]; cu++) {
                KvSpan spans[128];
                float *bufs[128];
                int ns = cut_spans(k, v, n, kv_dim, cuts[cu], 4, spans, bufs);
                for (int t = 0; t <= 4; t++) { /* t = 0: the simd backend itself */
                    Backend *be = t ? backend_parallel_create(ks[b], t) : simd;
                    attention(be, out, q, spans, ns, s);
                    CHECK_MSG(rows_equal(out, ref, q_dim), "%s attention case %zu cut %zu threads %d: not bitwise equal",
                              build_name(ks[b]), c, cu, t);
                    if (t) backend_free(be);
                }
                for (int i = 0; i < ns; i++) free(bufs[i]);
            }
            backend_free(simd);
        }
        free(k), free(v), free(q), free(ref), free(sref), free(out);
    }
    backend_free(scalar);
}

/* ---- the factory and the pool ---------------------------------------------------- */

TEST(backend_create_by_name) {
    char err[256] = "";
    Backend *be = backend_create(NULL, 2, err);
    CHECK(be != NULL);
    if (be) {
        CHECK_STR(be->name, "parallel"); /* the fastest available is the default */
        CHECK_EQ_INT(be->n_threads, 2);
        backend_free(be);
    }
    const char *names[] = {"scalar", "simd", "parallel"};
    for (int i = 0; i < 3; i++) {
        be = backend_create(names[i], 0, err);
        CHECK(be != NULL);
        if (be) CHECK_STR(be->name, names[i]);
        backend_free(be);
    }
    CHECK(backend_create("gpu", 0, err) == NULL);
    CHECK(strstr(err, "gpu") != NULL && strstr(err, "parallel") != NULL);
    /* Threads only the parallel backend can use are refused, not silently dropped. */
    CHECK(backend_create("scalar", 4, err) == NULL);
    CHECK(strstr(err, "scalar backend runs on one thread: --threads 4 needs --backend parallel") != NULL);
    CHECK(backend_create("simd", 2, err) == NULL);
    be = backend_create("scalar", 1, err);
    CHECK(be != NULL && be->n_threads == 1);
    backend_free(be);
}

static void count_job(void *arg, int chunk) {
    int *hits = arg;
    __atomic_fetch_add(&hits[chunk], 1, __ATOMIC_SEQ_CST);
}

TEST(backend_pool_runs_every_chunk_once) {
    for (int nt = 1; nt <= 4; nt++) {
        Pool *p = pool_create(nt);
        int hits[64] = {0};
        for (int r = 0; r < 300; r++) pool_run(p, count_job, hits, 1 + r % 64);
        for (int c = 0; c < 64; c++) { /* chunk c ran in every round with more than c chunks */
            int want = 0;
            for (int r = 0; r < 300; r++) want += c < 1 + r % 64;
            CHECK_EQ_INT(hits[c], want);
        }
        pool_free(p);
    }
}
