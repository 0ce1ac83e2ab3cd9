/* test_rows.c: the many-row ops of rows.h on every backend and thread count
 * give the same bits as ops.h row by row, and for_rows visits each row once. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "harness.h"
#include "ops.h"
#include "rows.h"

static void fill(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
}

static void count_row(void *arg, int i) { __atomic_fetch_add(&((int *)arg)[i], 1, __ATOMIC_SEQ_CST); }

/* The backends to try: scalar, simd, and parallel on 1..4 threads. */
static Backend *make_backend(int which, char *err) {
    if (which == 0) return backend_create("scalar", 1, err);
    if (which == 1) return backend_create("simd", 1, err);
    return backend_create("parallel", which - 1, err);
}
#define N_BACKENDS 6

TEST(rows_for_rows_visits_every_row_once) {
    char err[256];
    int sizes[] = {0, 1, 2, 7, 9, 64, 301};
    for (int b = 0; b < N_BACKENDS; b++) {
        Backend *be = make_backend(b, err);
        CHECK(be != NULL);
        if (!be) continue;
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int n = sizes[s], *hits = calloc((size_t)n + 1, sizeof(int));
            for (int r = 0; r < 3; r++) for_rows(be, n, count_row, hits);
            for (int i = 0; i < n; i++) CHECK_EQ_INT(hits[i], 3);
            CHECK_EQ_INT(hits[n], 0); /* nothing past the last row */
            free(hits);
        }
        backend_free(be);
    }
}

TEST(rows_match_the_ops_row_by_row_bitwise) {
    enum { N = 37, HEADS = 4, KV_HEADS = 2, HD = 16, DIM = 48, FFN = 80 };
    Qwen3Config c = {.dim = DIM, .n_heads = HEADS, .n_kv_heads = KV_HEADS, .head_dim = HD, .ffn_dim = FFN,
                     .rope_theta = 1000000.0f, .norm_eps = 1e-6f, .q_dim = HEADS * HD, .kv_dim = KV_HEADS * HD};
    float qn[HD], kn[HD], w[DIM];
    fill(qn, HD, 1); fill(kn, HD, 2); fill(w, DIM, 3);
    Qwen3Layer L = {.q_norm = qn, .k_norm = kn};
    static float x[N * DIM], q0[N * HEADS * HD], k0[N * KV_HEADS * HD], g0[N * FFN], u[N * FFN];
    fill(x, N * DIM, 4); fill(q0, N * HEADS * HD, 5); fill(k0, N * KV_HEADS * HD, 6); fill(g0, N * FFN, 7);
    fill(u, N * FFN, 8);
    int pos[N];
    for (int i = 0; i < N; i++) pos[i] = (i * 7919) % 500;
    /* The reference: ops.h one row at a time, positions from pos[] and from 11 on. */
    static float ny[N * DIM], nq[N * HEADS * HD], nk[N * KV_HEADS * HD], cq[N * HEADS * HD],
        ck[N * KV_HEADS * HD], ng[N * FFN];
    memcpy(nq, q0, sizeof q0); memcpy(nk, k0, sizeof k0); memcpy(cq, q0, sizeof q0); memcpy(ck, k0, sizeof k0);
    memcpy(ng, g0, sizeof g0);
    for (int i = 0; i < N; i++) {
        rmsnorm(ny + i * DIM, x + i * DIM, w, DIM, c.norm_eps);
        float *qs[2] = {nq + i * c.q_dim, cq + i * c.q_dim}, *ks[2] = {nk + i * c.kv_dim, ck + i * c.kv_dim};
        int at[2] = {pos[i], 11 + i};
        for (int v = 0; v < 2; v++) {
            rmsnorm_heads(qs[v], qn, HEADS, HD, c.norm_eps);
            rmsnorm_heads(ks[v], kn, KV_HEADS, HD, c.norm_eps);
            rope_neox(qs[v], HEADS, HD, at[v], c.rope_theta);
            rope_neox(ks[v], KV_HEADS, HD, at[v], c.rope_theta);
        }
        silu_mul(ng + i * FFN, u + i * FFN, FFN);
    }
    char err[256];
    for (int b = 0; b < N_BACKENDS; b++) {
        Backend *be = make_backend(b, err);
        if (!be) continue;
        static float y[N * DIM], q[N * HEADS * HD], k[N * KV_HEADS * HD], g[N * FFN];
        memset(y, 0, sizeof y);
        rmsnorm_rows(be, y, x, w, N, DIM, c.norm_eps);
        CHECK(memcmp(y, ny, sizeof y) == 0);
        memcpy(q, q0, sizeof q); memcpy(k, k0, sizeof k);
        qk_norm_rope_rows(be, &c, &L, q, k, pos, 0, N);
        CHECK(memcmp(q, nq, sizeof q) == 0 && memcmp(k, nk, sizeof k) == 0);
        memcpy(q, q0, sizeof q); memcpy(k, k0, sizeof k);
        qk_norm_rope_rows(be, &c, &L, q, k, NULL, 11, N);
        CHECK(memcmp(q, cq, sizeof q) == 0 && memcmp(k, ck, sizeof k) == 0);
        memcpy(g, g0, sizeof g);
        silu_mul_rows(be, g, u, N, FFN);
        CHECK(memcmp(g, ng, sizeof g) == 0);
        if (test_failed_now()) test_fail(__FILE__, __LINE__, "differs on backend %s, %d thread(s)", be->name, be->n_threads);
        backend_free(be);
    }
}
