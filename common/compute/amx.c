/* amx.c: see amx.h. Per tile of 16 outputs and 16 activation rows, per
 * 32-block b:
 *   C = A x B + A x N   A: the rows' 32 signed bytes of block b (16 x 32),
 *                       B: the tile's 32 x 16 weight bytes, stored + 128,
 *                       N: 32 x 16 bytes of -128, which take the + 128 back out
 *   acc[r] += (w_scale * x_scale[r]) * float(C[r])
 * C[r] is the integer K(pdot) converts (its c[r] + sums), and the float
 * update is K(pdot)'s, operation for operation. */
#include "amx.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tiles.h"
#include "util.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux: ask for an extended state component */
#define XFEATURE_XTILEDATA 18      /* the tile registers' data */

static bool amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* CPUID leaf 7, EDX bits 24 (AMX-TILE) and 25 (AMX-INT8); then Linux's
 * permission, without which the first tile instruction is SIGILL. */
static void amx_probe(void) {
    const char *env = getenv("SIMD_AMX");
    unsigned a, b, c, d;
    if (env && strcmp(env, "0") == 0) return;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return;
    amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

bool amx_usable(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_ok;
}

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,f16c,amx-tile,amx-int8"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,f16c,amx-tile,amx-int8")
#endif

/* The tile configuration (palette 1): per tile its rows and bytes per row. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) TileConfig;
_Static_assert(sizeof(TileConfig) == 64 && offsetof(TileConfig, colsb) == 16 && offsetof(TileConfig, rows) == 48,
               "the tile configuration's layout");

/* The tiles: sums, activations and weights of two blocks, alternately, and
 * the constant N.
 * Numbers, not an enum: the tile instructions paste them into their names. */
#define TMM_C0 0
#define TMM_C1 1
#define TMM_A0 2
#define TMM_A1 3
#define TMM_B0 4
#define TMM_B1 5
#define TMM_N 6

/* A tile load is an asm statement that does not say it reads memory: bytes
 * written just before it (and read by nothing else) must be made to stay. */
#define WRITTEN() __asm__ volatile("" ::: "memory")

/* Blocks ahead whose weights are asked for, into L2: without it the tile
 * loads wait on memory, and the sums and the memory take turns instead of
 * overlapping (into L1, the asks themselves wait on its few line buffers). */
#define AMX_AHEAD 16

/* Tiles for m activation rows (m <= 16: a tile unit instruction costs in
 * proportion to its rows, so a batch of 8 pays for 8). */
static void amx_configure(int m) {
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = TMM_C0; t <= TMM_C1; t++) cfg.rows[t] = (uint8_t)m, cfg.colsb[t] = 64; /* m x 16 int32 */
    for (int t = TMM_A0; t <= TMM_A1; t++) cfg.rows[t] = (uint8_t)m, cfg.colsb[t] = 32; /* m rows x 32 bytes */
    for (int t = TMM_B0; t <= TMM_N; t++) cfg.rows[t] = 8, cfg.colsb[t] = 64;   /* 32 x 16 bytes, 4 to a lane */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg)); /* GCC 12's _tile_loadconfig names 8 of the 64 bytes it reads */
    uint8_t minus128[8 * 64] __attribute__((aligned(64)));
    memset(minus128, 0x80, sizeof minus128);
    WRITTEN();
    _tile_loadd(TMM_N, minus128, 64);
}

/* The sums of block b into tile TMM_C0 or TMM_C1 (the tile unit's work, no
 * wait); the second product subtracts 128 x the sum of the row's activation
 * bytes, which costs the tile unit less than an add per row costs the vectors. */
#define AMX_SUM(C, A, B, x, stride, p) \
    do {                              \
        _tile_loadd(A, x, stride);    \
        _tile_loadd(B, p, 64);        \
        _tile_zero(C);                \
        _tile_dpbsud(C, A, B);        \
        _tile_dpbssd(C, A, TMM_N);    \
    } while (0)

/* K(pdot)'s float update of R rows for block b, from its sums. */
static inline __attribute__((always_inline)) void amx_update(__m512 *acc, int R, const int32_t *sums,
                                                             const uint8_t *p, const SimdActs *a, int i0, int b) {
    __m512 wscale = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 8 * 64)));
    const float *s = a->s + (size_t)i0 * a->s_stride + 8 * (size_t)b;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        __m512i lanes = _mm512_load_si512((const void *)(sums + 16 * r));
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(wscale, _mm512_set1_ps(s[r * a->s_stride])), _mm512_cvtepi32_ps(lanes),
                                 acc[r]);
    }
}

/* Rows [i0, i0 + R) of the outputs whose tiles start at t; x: the rows'
 * bytes, stride apart (the configured rows readable from x). The sums of blocks b + 2
 * and b + 3 are made and stored while block b's and b + 1's are turned into
 * floats: four buffers, read two blocks after they are written. */
static inline __attribute__((always_inline)) void amx_tile(float *y, const SimdActs *a, const uint8_t *t, int nb,
                                                           int64_t out, int i0, int R, const int8_t *x, size_t stride,
                                                           __mmask16 mask) {
    const size_t bb = tiles_block_bytes(DT_Q8_0);
    int32_t sums[4][16 * 16] __attribute__((aligned(64)));
    __m512 acc[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
    AMX_SUM(TMM_C0, TMM_A0, TMM_B0, x, stride, t);
    _tile_stored(TMM_C0, sums[0], 64);
    if (nb > 1) {
        AMX_SUM(TMM_C1, TMM_A1, TMM_B1, x + 32, stride, t + bb);
        _tile_stored(TMM_C1, sums[1], 64);
    }
    for (int b = 0; b < nb; b += 2) { /* blocks b and b + 1 are in sums, b + 2 and b + 3 to come */
        const uint8_t *p = t + (size_t)b * bb;
        for (size_t l = 0; l < 2 * bb; l += 64) _mm_prefetch((const char *)p + AMX_AHEAD * bb + l, _MM_HINT_T1);
        if (b + 2 < nb) {
            AMX_SUM(TMM_C0, TMM_A0, TMM_B0, x + 32 * (size_t)(b + 2), stride, p + 2 * bb);
            _tile_stored(TMM_C0, sums[(b + 2) & 3], 64);
        }
        amx_update(acc, R, sums[b & 3], p, a, i0, b);
        if (b + 1 >= nb) break;
        if (b + 3 < nb) {
            AMX_SUM(TMM_C1, TMM_A1, TMM_B1, x + 32 * (size_t)(b + 3), stride, p + 3 * bb);
            _tile_stored(TMM_C1, sums[(b + 3) & 3], 64);
        }
        amx_update(acc, R, sums[(b + 1) & 3], p + bb, a, i0, b + 1);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)(i0 + r) * out, mask, acc[r]);
}

void amx_q8_0_cols(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    const int nb = (int)(a->in / 32), n = a->n, full = n <= 16 ? n : n / 16 * 16;
    const int64_t out = w->ne[1];
    const size_t bb = tiles_block_bytes(DT_Q8_0);
    int8_t *tail = NULL;
    if (full < n) { /* past 16 rows, the last ones padded with zeros to 16 */
        tail = xcalloc(16 * (size_t)nb, 32);
        for (int r = full; r < n; r++) memcpy(tail + (size_t)(r - full) * nb * 32, a->q + (size_t)r * a->q_stride, (size_t)nb * 32);
        WRITTEN();
    }
    amx_configure(n <= 16 ? n : 16);
    for (int o = c0; o < c1; o += 16) {
        const uint8_t *t = (const uint8_t *)w->tiles + (size_t)(o / 16) * nb * bb;
        int cols = c1 - o < 16 ? c1 - o : 16;
        __mmask16 mask = (__mmask16)((1u << cols) - 1);
        if (n < 16) amx_tile(y + o, a, t, nb, out, 0, n, a->q, a->q_stride, mask);
        for (int i0 = 0; i0 + 16 <= full; i0 += 16)
            amx_tile(y + o, a, t, nb, out, i0, 16, a->q + (size_t)i0 * a->q_stride, a->q_stride, mask);
        if (tail) amx_tile(y + o, a, t, nb, out, full, n - full, tail, (size_t)nb * 32, mask);
    }
    _tile_release();
    free(tail);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else /* no AMX outside Linux on x86-64 */
bool amx_usable(void) { return false; }
void amx_q8_0_cols(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    (void)y, (void)a, (void)w, (void)c0, (void)c1;
    abort();
}
#endif
