/* backend_simd.c: the simd backend: the kernels of simd_kernels.h on one
 * thread. The kernels are compiled here three times, for AVX-512, for AVX2
 * (with FMA and F16C) and for AVX2 with AVX-512's VNNI and registers, each
 * inside a target pragma, so the file builds with plain
 * -O2 and the CPU is asked at run time which build it can run. On a machine
 * with neither (or not x86: NEON kernels are not written yet) the backend runs
 * the scalar kernels. */
#include "backend_simd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "fexp.h"
#include "tiles.h"
#include "util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#if defined(__x86_64__)
/* Each build's functions compiled for its instructions: GCC's target
 * pragma, or the same as an attribute for clang, which ignores that pragma. */
#define SIMD_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SIMD_TARGET_PUSH(t) SIMD_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define SIMD_TARGET_POP() SIMD_PRAGMA(clang attribute pop)
#else
#define SIMD_TARGET_PUSH(t) SIMD_PRAGMA(GCC push_options) SIMD_PRAGMA(GCC target(t))
#define SIMD_TARGET_POP() SIMD_PRAGMA(GCC pop_options)
#endif

SIMD_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#define SIMD_512 1
#define SIMD_VNNI 1
#define K(name) k512_##name
#include "simd_kernels.h" /* it undefines SIMD_512, SIMD_VNNI and K */
SIMD_TARGET_POP()

SIMD_TARGET_PUSH("avx2,fma,f16c")
#define SIMD_512 0
#define SIMD_VNNI 0
#define K(name) k256_##name
#include "simd_kernels.h"
SIMD_TARGET_POP()

SIMD_TARGET_PUSH("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")
#define SIMD_512 0
#define SIMD_VNNI 1
#define K(name) k256v_##name
#include "simd_kernels.h"
SIMD_TARGET_POP()
#endif

#if defined(__x86_64__)
/* CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports does not know "f16c". */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* CPUID leaf 7 subleaf 1, EAX bit 5: AVX512-BF16 (asked directly, as above). */
static bool cpu_has_avx512bf16(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
#endif

const SimdKernels *simd_kernels_isa(const char *isa) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vnni");
    if (strcmp(isa, "avx512bf16") == 0 && avx512 && cpu_has_avx512bf16()) return &k512_kernels_bf16;
    if (strcmp(isa, "avx512") == 0 && avx512) return &k512_kernels;
    if (strcmp(isa, "avx2vnni") == 0 && avx512) return &k256v_kernels;
    if (strcmp(isa, "avx2") == 0 && avx2) return &k256_kernels;
#else
    (void)isa;
#endif
    return NULL;
}

const SimdKernels *simd_kernels(void) {
    const char *want = getenv("SIMD_ISA");
    if (want && *want) return simd_kernels_isa(want);
    const SimdKernels *k = simd_kernels_isa("avx512bf16");
    if (!k) k = simd_kernels_isa("avx512");
    return k ? k : simd_kernels_isa("avx2");
}

const SimdKernels *simd_kernels_for(const SimdKernels *k, DType t) {
#if defined(__x86_64__)
    bool super_block = t == DT_Q3_K || t == DT_Q4_K || t == DT_Q5_K || t == DT_IQ4_XS;
    if (k && super_block && strncmp(k->isa, "avx512", 6) == 0) return &k256v_kernels; /* what avx512 needs, avx2vnni needs */
#else
    (void)t;
#endif
    return k;
}

bool simd_reads_tiles(void) {
    const SimdKernels *k = simd_kernels();
    return k && k->tiles;
}

bool simd_quantized(DType t) {
    switch (t) {
    case DT_Q8_0: case DT_Q4_0: case DT_Q4_1: case DT_Q5_0: case DT_Q5_1: case DT_IQ4_NL:
    case DT_Q2_K: case DT_Q3_K: case DT_Q4_K: case DT_Q5_K: case DT_Q6_K: case DT_IQ4_XS:
        return true;
    default:
        return false;
    }
}

bool simd_prepared(const SimdKernels *k, DType t) {
    return k && (simd_quantized(t) || (k->bf16_pairs && t == DT_BF16));
}

int simd_tile_cols(const SimdKernels *k, DType t) {
    if (!k) return 1;
    return simd_quantized(t) ? k->qtile_cols : k->ftile_cols;
}

/* ---- prepared activations ------------------------------------------------- */

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* sc's buffer, grown to at least need bytes. */
static void *scratch_reserve(SimdScratch *sc, size_t need) {
    if (sc->cap < need) {
        free(sc->data);
        sc->data = xmalloc(need);
        sc->cap = need;
    }
    return sc->data;
}

void simd_acts_init(SimdActs *a, SimdScratch *sc, const SimdKernels *k, const float *x, int n, int64_t in, DType t) {
    memset(a, 0, sizeof *a);
    a->x = x;
    a->n = n;
    a->in = in;
    a->type = t;
    if (!simd_prepared(k, t)) return;
    if (!simd_quantized(t)) { /* BF16 rows, zero-padded to whole steps of 32 */
        a->q_stride = round_up(round_up((size_t)in, 32) * sizeof(uint16_t), 64);
        a->q = scratch_reserve(sc, a->q_stride * (size_t)n);
        return;
    }
    size_t blocks = round_up((size_t)(in / 32), (size_t)k->qblocks);
    a->q_stride = round_up(blocks * 32, 64);
    a->s_stride = round_up(blocks * 8, 16);
    size_t q_bytes = a->q_stride * (size_t)n, s_bytes = sizeof(float) * a->s_stride * (size_t)n;
    a->s = scratch_reserve(sc, q_bytes + 3 * s_bytes); /* 4-byte lanes first: they need the alignment */
    a->m = a->s + a->s_stride * (size_t)n;
    a->c = (int32_t *)(a->m + a->s_stride * (size_t)n);
    a->q = (int8_t *)(a->c + a->s_stride * (size_t)n);
}

void simd_scratch_free(SimdScratch *sc) {
    free(sc->data);
    sc->data = NULL;
    sc->cap = 0;
}

/* ---- the backend -------------------------------------------------------------- */

typedef struct {
    const SimdKernels *k; /* NULL: scalar kernels */
    SimdScratch scratch;
    char name[32];
} SimdImpl;

static void simd_matmul(Backend *be, float *y, const float *x, const Tensor *w, int n) {
    SimdImpl *im = be->impl;
    if (!im->k) {
        scalar_matmul_rows(y, x, w, n, 0, (int)w->ne[1]);
        return;
    }
    const SimdKernels *k = simd_kernels_for(im->k, w->type);
    SimdActs a;
    simd_acts_init(&a, &im->scratch, k, x, n, w->ne[0], w->type);
    k->prepare_rows(&a, 0, n);
    k->matmul_cols(y, &a, w, 0, (int)w->ne[1]);
}

static void simd_attention(Backend *be, float *out, const float *q, const KvSpan *spans, int n_spans, AttnShape s) {
    SimdImpl *im = be->impl;
    if (im->k) im->k->attention_heads(out, q, spans, n_spans, s, 0, s.n_heads);
    else scalar_attention_heads(out, q, spans, n_spans, s, 0, s.n_heads);
}

static void simd_destroy(Backend *be) {
    SimdImpl *im = be->impl;
    simd_scratch_free(&im->scratch);
    free(im);
    free(be);
}

Backend *backend_simd_create(const SimdKernels *k) {
    Backend *be = xcalloc(1, sizeof *be);
    SimdImpl *im = xcalloc(1, sizeof *im);
    im->k = k;
    snprintf(im->name, sizeof im->name, "simd");
    be->name = im->name;
    be->n_threads = 1;
    be->matmul = simd_matmul;
    be->attention = simd_attention;
    be->for_rows = rows_in_order;
    be->destroy = simd_destroy;
    be->impl = im;
    return be;
}
