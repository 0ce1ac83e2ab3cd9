/* backend_simd.h: the simd kernels as building blocks, shared by the simd
 * backend (one thread) and the parallel backend (the same kernels over a
 * thread pool, each thread a range of output columns or heads).
 *
 * A matmul runs in two steps:
 *   1. prepare: for quantized weights (every type but F32, F16, BF16), each activation
 *      row is quantized to 8-bit blocks of 32, as llama.cpp does, so that the
 *      dot products run on integers; for BF16 weights on a CPU with
 *      AVX512-BF16, each row is rounded to BF16. A row's preparation depends on
 *      that row only, so it is the same whatever the batch or the thread.
 *   2. columns: y[i, o] for every row i and a range of outputs o, each y[i, o]
 *      one dot product with its own accumulator, in one fixed order. */
#ifndef BACKEND_SIMD_H
#define BACKEND_SIMD_H

#include <stdbool.h>

#include "backend.h"

/* Activations prepared for one matmul. */
typedef struct {
    const float *x;   /* [n, in] as given */
    int n;
    int64_t in;
    DType type;       /* the weight type they were prepared for */
    /* For BF16 weights on a bf16_pairs build: row i as BF16 at q + i*q_stride.
     * For quantized weight types, row i in blocks of 32 (padded to whole chunks):
     * q + i*q_stride: 8-bit values; c, s, m + i*s_stride: 8 lanes per block of
     * an integer correction, the block scale, sums times scale (simd_kernels.h).
     * On AVX2 the super-block types (Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) instead
     * keep one scale per 256 values at s[sb] and the int16 sum of every 16
     * values in c's bytes (K(quantize_row_256)). */
    int8_t *q;
    int32_t *c;
    float *s, *m;
    size_t q_stride, s_stride;
} SimdActs;

/* One instruction-set build of the kernels. */
typedef struct {
    const char *isa;  /* "avx512bf16", "avx512", "avx2vnni", "avx2" */
    bool bf16_pairs;  /* BF16 weights: activations rounded to BF16, pairs by vdpbf16ps */
    int qblocks;      /* 32-blocks per integer vector: quantized rows are padded to it */
    int ftile_cols;   /* outputs per tile, float and quantized weights: thread */
    int qtile_cols;   /* ranges are cut at multiples of it */
    bool tiles;       /* one-row Q8_0, Q4_0, Q4_1 matmuls read Tensor.tiles when set */
    /* Quantizes rows [row_begin, row_end) of a (no-op for float weight types). */
    void (*prepare_rows)(const SimdActs *a, int row_begin, int row_end);
    /* y[i, o] for all rows and o in [col_begin, col_end). */
    void (*matmul_cols)(float *y, const SimdActs *a, const Tensor *w, int col_begin, int col_end);
    /* The heads [head_begin, head_end) of attention (see backend.h). */
    void (*attention_heads)(float *out, const float *q, const KvSpan *spans, int n_spans, AttnShape s,
                            int head_begin, int head_end);
} SimdKernels;

/* The best build this CPU runs (AVX-512 with BF16 over AVX-512 over AVX2),
 * or NULL when none does: then the simd and parallel backends use the scalar
 * kernels. SIMD_ISA=avx512, avx2vnni or avx2 in the environment picks an older
 * build on a newer machine (to test the fallbacks). */
const SimdKernels *simd_kernels(void);
/* The build named isa ("avx512bf16", "avx512", "avx2vnni", "avx2") if this
 * CPU runs it, else NULL. avx2vnni needs what avx512 needs. */
const SimdKernels *simd_kernels_isa(const char *isa);
/* True when the build simd_kernels() picks reads weight tiles (tiles.h):
 * the model loader builds them only then. */
bool simd_reads_tiles(void);
/* The build that runs matrices of type t for build k: k itself, except the
 * super-block types Q3_K, Q4_K, Q5_K and IQ4_XS on AVX-512, which run on
 * the AVX2 kernels (the avx2vnni build, the avx2 build's bits). They sum
 * whole super-blocks of 256 on integers, where AVX-512's take blocks of 32
 * (book/performance.md, "Sum a whole super-block"); on a 2.1 GHz AVX-512
 * Xeon that made Q4_K_M decode 1.36 times faster and prefill 1.45. The same
 * build for every row count, so a row's result never depends on the batch
 * it is in. */
const SimdKernels *simd_kernels_for(const SimdKernels *k, DType t);
/* True for the weight types whose activations are quantized first. */
bool simd_quantized(DType t);
/* True when k prepares activations for weights of type t (quantized, or
 * rounded to BF16 by a bf16_pairs build). */
bool simd_prepared(const SimdKernels *k, DType t);
/* Output columns per tile of k for weights of type t (1 without kernels). */
int simd_tile_cols(const SimdKernels *k, DType t);

/* A growable scratch buffer for prepared activations. */
typedef struct {
    void *data;
    size_t cap;
} SimdScratch;

/* Sets up a for x[n, in] against weights of type t, with its buffers in sc
 * (grown if needed). Rows still have to be prepared. */
void simd_acts_init(SimdActs *a, SimdScratch *sc, const SimdKernels *k, const float *x, int n, int64_t in, DType t);
void simd_scratch_free(SimdScratch *sc);

/* k NULL: the scalar kernels (a machine without AVX2). */
Backend *backend_simd_create(const SimdKernels *k);
Backend *backend_parallel_create(const SimdKernels *k, int n_threads);

#endif
