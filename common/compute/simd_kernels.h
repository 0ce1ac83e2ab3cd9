/* simd_kernels.h: the simd kernels, written once and compiled three times by
 * backend_simd.c: for AVX-512 (SIMD_512 = 1: 16 float lanes, two 32-blocks per
 * integer vector), for AVX2 (SIMD_512 = 0: 8 lanes, one block per vector),
 * and for AVX2 on an AVX-512 machine (SIMD_512 = 0, SIMD_VNNI = 1: the packed
 * super-block kernels add a block's byte products with vpdpbusd on 8 lanes,
 * the same integers, and the compiler has 32 vector registers).
 * There is deliberately no include guard. The includer defines SIMD_512,
 * SIMD_VNNI and K(name), which gives every function and type of one build its
 * own prefix; the end of this file undefines them.
 *
 * THE RULE (see backend.h): every output y[i, o] is one dot product with its
 * own vector accumulator, updated by the same operations in the same order
 * whatever the tile it is computed in, then reduced by one fixed tree (hsum).
 * A tile of R rows x C outputs only shares the loads: a weight vector decoded
 * once serves R rows, an activation vector loaded once serves C outputs. So
 * a batch of 16 and a batch of 1 give bitwise equal rows. (The kernels of
 * Q8_0 and Q4_0, and on AVX-512 Q4_1, K(pcols), give each output one lane of
 * a vector instead, updated once per block, in block order, for any batch;
 * AVX2's IQ4_XS, Q4_K and Q5_K likewise once per super-block, in the tiles
 * too.)
 *
 * Two kinds of dot products:
 *  - float weights (F32, F16, BF16): acc += w[k..k+N) * x[k..k+N) for each
 *    step of N = VF_N elements (F16/BF16 widened exactly to float first);
 *  - quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and the
 *    K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), llama.cpp's way: the
 *    activation row is quantized to 8-bit blocks of 32 with one scale each
 *    (prepare_rows), the weights are decoded to bytes (unsigned, w + an
 *    offset the activation side takes back out; IQ4 codes through a 16-entry
 *    table), and each block's integer products are summed exactly into 8
 *    int32 lanes (4 products per lane). Then, per block, in float:
 *    acc += (w_scale * x_scale) * lanes, where w_scale is the scale of the
 *    weights under that lane (one per 16 elements for Q2_K, Q3_K, Q6_K, per
 *    32 for the others). The types with a min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K)
 *    also subtract it: acc -= w_min * (x_scale * lane sums of x).
 *    On AVX2, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS go further, as llama.cpp
 *    does: one activation scale per super-block of 256 (K(quantize_row_256)),
 *    so the integer lanes, already times the blocks' integer scales, run over
 *    the whole super-block, and the float update comes once per 256 weights
 *    (K(q4k_tile), K(s16_tile), K(iq4xs_tile); IQ4_XS and Q4_K with 8 rows
 *    or more: K(iq4xs_pdot), K(q4k_pdot)). */

#if SIMD_512
#define VF __m512
#define VF_N 16
#define VF_ZERO() _mm512_setzero_ps()
#define VF_LOAD(p) _mm512_loadu_ps(p)
#define VF_STORE(p, v) _mm512_storeu_ps(p, v)
#define VF_SET1(f) _mm512_set1_ps(f)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)   /* a * b + c, one rounding */
#define VF_FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c) /* c - a * b */
#define VF_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define VF_LOAD_BF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define VF_FROM_INT(v) _mm512_cvtepi32_ps(v)
#define VI __m512i
#define VI_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define QB 2      /* 32-blocks per integer vector */
#define FT_R 4    /* float tiles: rows x outputs (24 accumulators of 32 registers) */
#define FT_C 6
#define QT_R 4    /* quantized tiles */
#define QT_C 4
#else
#define VF __m256
#define VF_N 8
#define VF_ZERO() _mm256_setzero_ps()
#define VF_LOAD(p) _mm256_loadu_ps(p)
#define VF_STORE(p, v) _mm256_storeu_ps(p, v)
#define VF_SET1(f) _mm256_set1_ps(f)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VF_FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define VF_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define VF_LOAD_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define VF_FROM_INT(v) _mm256_cvtepi32_ps(v)
#define VI __m256i
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define QB 1
#define FT_R 3    /* 16 registers: 12 accumulators, 3 activations, 1 weight */
#define FT_C 4
#define QT_R 4
#define QT_C 2
#endif
#define QCHUNK (32 * QB) /* elements per integer step; also 8 * QB == VF_N float lanes */
/* Batch-1 decode streams every weight from memory once; hardware prefetchers
 * alone leave the core waiting (they stop at each 4 KiB page), so the kernels
 * ask for bytes ahead of the ones they read: the tile TILES_AHEAD tiles on,
 * in address order, a share per step. One stream running ahead through
 * contiguous memory is what memory serves fastest (found by measuring on the
 * bench machine: 1.2-1.7x faster than asking 4 KiB ahead in each row). */
#define TILES_AHEAD 2
/* From this many rows on, a quantized matmul decodes each weight once into a
 * buffer for all row tiles (K(qcols_tile)); found by measuring, like
 * TILES_AHEAD. The backend tests' batches of 1 to 16 rows run both ways.
 * (Not the super-block types of AVX2, K(superblock_acts): their tiles
 * unpack the weights on the way, and IQ4_XS and Q4_K with SB_MIN_ROWS rows
 * or more go to the column-packed kernels instead.) */
#define QPRE_ROWS 16

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")
/* v stays one register at this point of a chain of integer adds. Exact sums
 * may be regrouped, and the compiler turns a long chain into a tree that
 * holds all of its products at once: they no longer fit the registers. */
#define KEEP_CHAIN(v) __asm__("" : "+x"(v))

/* Rows [from, min(from + count, end)) of w, the bytes a kernel asks for
 * ahead: where they start and how many 64-byte lines they cover (none past
 * end: those rows are another call's or another thread's). */
INLINE const char *K(ahead)(const Tensor *w, int from, int count, int end, size_t *lines) {
    int to = from + count < end ? from + count : end;
    *lines = from < to ? (size_t)(to - from) * w->row_bytes / 64 : 0;
    return from < to ? (const char *)tensor_row(w, from) : NULL;
}

/* A kernel's scratch: 64-byte aligned (K(ptile) loads whole vectors of it). */
INLINE void *K(scratch)(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "fatal: out of memory\n");
        exit(1);
    }
    return p;
}

/* Asks for count lines of ahead from *line on (the last line again past its
 * end), then moves *line on by per; lines > 0 (the callers check).
 * count is a constant where this is inlined, per itself when a row is a
 * whole number of steps (otherwise a line a step goes unasked: only speed):
 * no loop whose exit is mispredicted every step (on the machine of
 * book/performance.md that loop cost a Q6_K decode 20-50 %), and a line
 * asked for twice costs next to nothing. */
INLINE void K(ask)(const char *ahead, size_t lines, size_t *line, size_t per, int count) {
    UNROLL for (int l = 0; l < count; l++) {
        size_t at = *line + (size_t)l < lines ? *line + (size_t)l : lines - 1;
        _mm_prefetch(ahead + 64 * at, _MM_HINT_T0);
    }
    *line += per;
}

/* The one reduction of an accumulator: halves added pairwise down to a float. */
INLINE float K(hsum)(VF v) {
#if SIMD_512
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
#else
    __m256 h = v;
#endif
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

INLINE float K(f16)(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* ---- float weights -------------------------------------------------------- */

/* VF_N weights of a row of type t from element k. */
INLINE VF K(load_w)(DType t, const void *row, int64_t k) {
    if (t == DT_F32) return VF_LOAD((const float *)row + k);
    if (t == DT_F16) return VF_LOAD_F16((const uint16_t *)row + k);
    return VF_LOAD_BF16((const uint16_t *)row + k);
}

/* The last count < VF_N elements, zeros after them (the products then add 0). */
static VF K(load_w_tail)(DType t, const void *row, int64_t k, int count) {
    uint32_t buf[VF_N] = {0};
    size_t es = t == DT_F32 ? 4 : 2;
    memcpy(buf, (const char *)row + (size_t)k * es, (size_t)count * es);
    return K(load_w)(t, buf, 0);
}

static VF K(load_x_tail)(const float *x, int count) {
    float buf[VF_N] = {0};
    memcpy(buf, x, sizeof(float) * (size_t)count);
    return VF_LOAD(buf);
}

/* One step of VF_N elements from k: the R activation vectors stay in
 * registers and each weight vector is used as it is loaded, so a 4 x 6 tile
 * needs 24 + 4 + 1 registers and nothing spills to the stack. */
INLINE void K(fstep)(DType t, int R, int C, VF acc[FT_R][FT_C], const float *const xr[FT_R],
                     const void *const wr[FT_C], int64_t k) {
    VF xv[FT_R];
    UNROLL for (int r = 0; r < R; r++) xv[r] = VF_LOAD(xr[r] + k);
    UNROLL for (int c = 0; c < C; c++) {
        VF wv = K(load_w)(t, wr[c], k);
        UNROLL for (int r = 0; r < R; r++) acc[r][c] = VF_FMA(wv, xv[r], acc[r][c]);
    }
}

/* y[i0 + r, o0 + c] for r < R, c < C; R and C are constants where it is inlined.
 * The first row tile also asks for lines [0, lines) from ahead, spread evenly
 * over its steps. */
INLINE void K(ftile)(DType t, int R, int C, float *y, const float *x, const Tensor *w, int64_t in, int64_t out,
                     int i0, int o0, const char *ahead, size_t lines) {
    VF acc[FT_R][FT_C];
    const void *wr[FT_C];
    const float *xr[FT_R];
    UNROLL for (int c = 0; c < C; c++) wr[c] = tensor_row(w, o0 + c);
    UNROLL for (int r = 0; r < R; r++) {
        xr[r] = x + (size_t)(i0 + r) * in;
        UNROLL for (int c = 0; c < C; c++) acc[r][c] = VF_ZERO();
    }
    int64_t k = 0;
    size_t steps = (size_t)(in / VF_N), per = i0 == 0 && steps ? (lines + steps - 1) / steps : 0, line = 0;
    if (per) /* the first row tile: the same steps, asking for the next tiles' lines on the way */
        for (; k + VF_N <= in; k += VF_N) {
            K(ask)(ahead, lines, &line, per, t == DT_F32 ? C : (C + 1) / 2); /* a step is 64 or 32 bytes a row */
            K(fstep)(t, R, C, acc, xr, wr, k);
        }
    for (; k + VF_N <= in; k += VF_N) K(fstep)(t, R, C, acc, xr, wr, k);
    if (k < in) { /* the same step once more, on zero-padded copies */
        int rest = (int)(in - k);
        UNROLL for (int c = 0; c < C; c++) {
            VF wv = K(load_w_tail)(t, wr[c], k, rest);
            UNROLL for (int r = 0; r < R; r++) acc[r][c] = VF_FMA(wv, K(load_x_tail)(xr[r] + k, rest), acc[r][c]);
        }
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) y[(size_t)(i0 + r) * out + o0 + c] = K(hsum)(acc[r][c]);
}

/* Every row tile against outputs [o0, o0 + C), C <= FT_C, asking for
 * the rows TILES_AHEAD tiles on (up to c1: the rest is another thread's),
 * unless told not to ask. */
INLINE void K(fcols_tile)(DType t, int C, float *y, const float *x, const Tensor *w, int n, int o0, int c1,
                          bool ask) {
    int64_t in = w->ne[0], out = w->ne[1];
    size_t lines = 0;
    const char *ahead = ask ? K(ahead)(w, o0 + TILES_AHEAD * C, C, c1, &lines) : NULL;
    int i = 0;
    for (; i + FT_R <= n; i += FT_R) K(ftile)(t, FT_R, C, y, x, w, in, out, i, o0, ahead, lines);
    switch (n - i) { /* the remaining rows, each count its own unrolled copy */
#if FT_R > 3
    case 3: K(ftile)(t, 3, C, y, x, w, in, out, i, o0, ahead, lines); break;
#endif
#if FT_R > 2
    case 2: K(ftile)(t, 2, C, y, x, w, in, out, i, o0, ahead, lines); break;
#endif
    case 1: K(ftile)(t, 1, C, y, x, w, in, out, i, o0, ahead, lines); break;
    default: break;
    }
}

/* With a few activation rows (decode, a small batch) a tile shares little
 * but the activation loads, and memory is the limit: how many weight rows
 * to read side by side is what was fastest, measured, and it depends on the
 * machine. One activation row on an AMD machine with AVX-512 reads F32 and
 * BF16 one weight row at a time and asks for nothing ahead: a single stream
 * is what its prefetchers followed best. F16, and BF16 with AVX2, take
 * pairs, asking ahead: an output's sum is one chain of FMAs 4 cycles apart,
 * and one F16 step of 32 bytes (16 with AVX2) a chain did not keep memory
 * busy (a 2.1 GHz Intel Xeon: F16 12 tokens/s one row at a time, 20 in
 * pairs). On Intel machines with AVX-512 one row reads 4 weight rows (BF16
 * too where it is widened here; K(bcols) keeps its own) (a 2.6 GHz Xeon: F32
 * 12.5 -> 13.5 tokens/s, F16 22.3 -> 25.0, BF16 20.5 -> 24.4). Two or three rows take pairs, F32
 * one row at a time. Each output's sum is the same whatever the tile, so
 * none of this changes a bit. */
#define SMALL_ROWS 3
INLINE void K(fcols)(DType t, float *y, const float *x, const Tensor *w, int n, int c0, int c1) {
    int o = c0;
    int cols = n > SMALL_ROWS                                          ? FT_C
               : SIMD_512 && n == 1 && __builtin_cpu_is("intel")      ? 4
               : t != DT_F32 && (n > 1 || t == DT_F16 || !SIMD_512) ? 2
                                                                       : 1;
    bool ask = cols > 1;
    if (cols == FT_C)
        for (; o + FT_C <= c1; o += FT_C) K(fcols_tile)(t, FT_C, y, x, w, n, o, c1, ask);
    else if (cols == 4)
        for (; o + 4 <= c1; o += 4) K(fcols_tile)(t, 4, y, x, w, n, o, c1, ask);
    else if (cols == 2)
        for (; o + 2 <= c1; o += 2) K(fcols_tile)(t, 2, y, x, w, n, o, c1, ask);
    for (; o < c1; o++) K(fcols_tile)(t, 1, y, x, w, n, o, c1, ask);
}

static void K(fcols_f32)(float *y, const float *x, const Tensor *w, int n, int c0, int c1) {
    K(fcols)(DT_F32, y, x, w, n, c0, c1);
}
static void K(fcols_f16)(float *y, const float *x, const Tensor *w, int n, int c0, int c1) {
    K(fcols)(DT_F16, y, x, w, n, c0, c1);
}
static void K(fcols_bf16)(float *y, const float *x, const Tensor *w, int n, int c0, int c1) {
    K(fcols)(DT_BF16, y, x, w, n, c0, c1);
}

/* ---- quantized activations -------------------------------------------- */

/* The weights of every quantized type are decoded to unsigned bytes u = w + off
 * (Q8_0, IQ4_NL, IQ4_XS: off 128; Q4_0: 8; Q5_0: 16; Q3_K: 4; Q6_K: 32; the
 * types with a min term, whose codes are already unsigned: 0), the operand
 * order the integer dot product instructions want (unsigned x signed).
 * Since sum u x = sum w x + off * sum x, each activation lane starts from
 * -off * (its sum of x), prepared once per row. */
INLINE int K(offset)(DType t) {
    switch (t) {
    case DT_Q8_0: case DT_IQ4_NL: case DT_IQ4_XS: return 128;
    case DT_Q4_0: return 8;
    case DT_Q5_0: return 16;
    case DT_Q3_K: return 4;
    case DT_Q6_K: return 32;
    default: return 0;
    }
}

/* The types whose value is scale * q - min: their lanes also take off the
 * weights' min times the activations' sums (Q4_1 and Q5_1 store +m, kept
 * negated so that one subtraction serves every type). */
INLINE bool K(has_min)(DType t) {
    return t == DT_Q4_1 || t == DT_Q5_1 || t == DT_Q2_K || t == DT_Q4_K || t == DT_Q5_K;
}

/* The types whose kernels pack an output per float lane (K(pcols)) for
 * blocks of 32: their activation rows carry whole-block sums, not per-lane
 * ones. (AVX2's IQ4_XS and Q4_K pack super-blocks; their activations are
 * K(quantize_row_256)'s.) */
INLINE bool K(packed)(DType t) { return t == DT_Q8_0 || t == DT_Q4_0 || (SIMD_512 && t == DT_Q4_1); }

/* AVX2 has no unsigned x signed dot product that cannot overflow for u up to
 * 255, so there the types with 8-bit weights (Q8_0, and the IQ4 table's -127..113)
 * keep them signed: |w| times x with w's sign. */
INLINE bool K(signed_w)(DType t) { return !SIMD_512 && (t == DT_Q8_0 || t == DT_IQ4_NL || t == DT_IQ4_XS); }

/* Row x[in] to 8-bit blocks of 32 (llama.cpp's Q8_0 rule: d = max|x| / 127
 * rounded to F16, q = round(x * 127 / max|x|), ties to even), for weights of type t. Per block: q[] its
 * 32 values; c[] -off * (sum of each lane's 4 values), 8 int32 lanes; s[] d in
 * all 8 lanes; m[] d times each lane's sum (for Q4_K's mins). Blocks past the
 * end of the row up to a whole chunk are zero. */
static void K(quantize_row)(DType t, const float *x, int64_t in, int8_t *q, int32_t *c, float *s, float *m) {
    int nb = (int)(in / 32), nbp = (nb + QB - 1) / QB * QB;
    int off = K(signed_w)(t) ? 0 : K(offset)(t);
    for (int b = 0; b < nb; b++, x += 32, q += 32, c += 8, s += 8, m += 8) {
#if SIMD_512
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
#else
        __m256 sign = _mm256_set1_ps(-0.0f);
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
               v3 = _mm256_loadu_ps(x + 24);
        __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                  _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
#endif
        /* d is kept as F16, as in llama.cpp's Q8_0 blocks: the same numbers as its dot products */
        float d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0)), id = amax != 0.0f ? 127.0f / amax : 0.0f;
#if SIMD_512
        __m512 vid = _mm512_set1_ps(id);
        __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)));
        __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid)));
        __m256i qv = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
        __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), qv);
#else
        __m256 vid = _mm256_set1_ps(id);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
        /* packs work within 128-bit halves; the permute puts the bytes back in order */
        __m256i qv = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        qv = _mm256_permutevar8x32_epi32(qv, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), qv), _mm256_set1_epi16(1));
#endif
        _mm256_storeu_si256((__m256i *)q, qv);
        if (K(packed)(t)) { /* every lane the block's total */
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            sums = _mm256_broadcastd_epi32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1)));
        }
        _mm256_storeu_si256((__m256i *)c, _mm256_mullo_epi32(sums, _mm256_set1_epi32(-off)));
        __m256 vd = _mm256_set1_ps(d);
        _mm256_storeu_ps(s, vd);
        _mm256_storeu_ps(m, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(sums)));
    }
    for (int b = nb; b < nbp; b++, q += 32, c += 8, s += 8, m += 8) {
        memset(q, 0, 32);
        memset(c, 0, 32);
        memset(s, 0, 32);
        memset(m, 0, 32);
    }
}

/* The types whose activations K(quantize_row_256) prepares (one scale per
 * super-block), whatever the batch: their kernels never use pre. */
INLINE bool K(superblock_acts)(DType t) {
    return !SIMD_512 && (t == DT_Q3_K || t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K || t == DT_IQ4_XS);
}

#if !SIMD_512
#define SB_R 4 /* rows of a super-block tile (K(q4k_tile), K(s16_tile), K(iq4xs_tile)) */

/* Row x[in] (in a multiple of 256) to 8-bit values with one scale per
 * super-block: d = max|x| / 127 in s[sb], q = round(x / d), and the sum of
 * each 16 values as int16, sixteen per super-block, at bsum[16 sb]. */
static void K(quantize_row_256)(const float *x, int64_t in, int8_t *q, int16_t *bsum, float *s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int sb = 0; sb < (int)(in / 256); sb++, x += 256, q += 256) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 256; k += 8) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        s[sb] = amax / 127.0f;
        __m256 vid = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        for (int b = 0; b < 8; b++) {
            const float *xb = x + 32 * b;
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb), vid));
            __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8), vid));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 16), vid));
            __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 24), vid));
            __m256i qv = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            qv = _mm256_permutevar8x32_epi32(qv, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(q + 32 * b), qv);
            __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), qv), _mm256_set1_epi16(1));
            sums = _mm256_hadd_epi32(sums, sums);
            sums = _mm256_hadd_epi32(sums, sums); /* each 128-bit half: the sum of its 16 values */
            bsum[16 * sb + 2 * b] = (int16_t)_mm256_extract_epi32(sums, 0); /* |sum| <= 16 * 127 */
            bsum[16 * sb + 2 * b + 1] = (int16_t)_mm256_extract_epi32(sums, 4);
        }
    }
}
#endif

static void K(prepare_rows)(const SimdActs *a, int r0, int r1) {
    if (!simd_quantized(a->type)) return;
    for (int i = r0; i < r1; i++) {
        size_t si = (size_t)i * a->s_stride;
#if !SIMD_512
        if (K(superblock_acts)(a->type)) {
            K(quantize_row_256)(a->x + (size_t)i * a->in, a->in, a->q + (size_t)i * a->q_stride, (int16_t *)(a->c + si),
                                a->s + si);
            continue;
        }
#endif
        K(quantize_row)(a->type, a->x + (size_t)i * a->in, a->in, a->q + (size_t)i * a->q_stride, a->c + si,
                        a->s + si, a->m + si);
    }
}

/* ---- quantized weights: one chunk of QB blocks ---------------------------- */

typedef struct {
    VI u;     /* the weights as unsigned bytes w + off (AVX2 signed types: |w|) */
    VI sign;  /* AVX2 signed types only (K(signed_w)): w, whose signs go onto x */
    VF scale; /* the weight scale under each float lane */
    VF min;   /* types with a min (K(has_min)): the min under each lane, negated for Q4_1 / Q5_1 */
} K(WChunk);

#if SIMD_512
/* Two 256-bit halves (block 2c and block 2c + 1) to one vector, scales likewise. */
INLINE VI K(join)(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
INLINE VF K(join_scale)(float lo, float hi) {
    return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(lo), _mm512_set1_ps(hi));
}
/* Four values, each spread over 4 lanes: the scales of four sub-blocks of 16. */
INLINE VF K(spread4)(float a, float b, float c, float d) {
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 _mm512_castps128_ps512(_mm_setr_ps(a, b, c, d)));
}
/* The same 32 bytes in both halves, shifted right by s0 bits in the lower
 * half and s1 in the upper one (16-bit lanes: mask the bytes afterwards). */
INLINE VI K(shift_halves)(__m256i v, int s0, int s1) {
    __m512i cnt = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi16((short)s0), _mm512_set1_epi16((short)s1));
    return _mm512_srlv_epi16(_mm512_broadcast_i64x4(v), cnt);
}
#else
INLINE VF K(join_scale)(float lo, float hi) { return _mm256_set_m128(_mm_set1_ps(hi), _mm_set1_ps(lo)); }
#endif

/* Signed weights w (Q8_0, IQ4_NL, IQ4_XS) into a chunk: AVX-512 reads w + 128,
 * AVX2 keeps |w| and the signs (see K(signed_w)). */
INLINE void K(set_signed)(K(WChunk) *o, VI w) {
#if SIMD_512
    o->u = _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
#else
    o->sign = w;
    o->u = _mm256_sign_epi8(w, w);
#endif
}

/* The 32 codes of a block whose 16 nibble bytes start at p, in element
 * order: the low nibbles (elements 0..15), then the high ones (16..31). */
INLINE __m256i K(nibbles)(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p), m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

/* 16 in byte j where bit j of the little-endian u32 at p is set: the fifth
 * bits of Q5_0 and Q5_1. */
INLINE __m256i K(fifth_bits)(const uint8_t *p) {
    uint32_t qh;
    memcpy(&qh, p, 4);
#if SIMD_512
    return _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10));
#else
    /* byte j gets byte j / 8 of qh, then tests its bit j % 8 */
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                    _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                     2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
#endif
}

/* IQ4 codes (0..15 in each byte) to their signed values IQ4_VALUES[code]. */
INLINE __m256i K(iq4_lookup)(__m256i codes) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)IQ4_VALUES)), codes);
}

/* The 32-element types: bytes per block, where the codes start, where the
 * fifth bits are (Q5_0, Q5_1). Constants once t is. */
INLINE size_t K(q32_bytes)(DType t) {
    return t == DT_Q8_0 ? 34 : t == DT_Q4_1 ? 20 : t == DT_Q5_0 ? 22 : t == DT_Q5_1 ? 24 : 18;
}
INLINE int K(q32_codes)(DType t) { return t == DT_Q4_1 ? 4 : t == DT_Q5_0 ? 6 : t == DT_Q5_1 ? 8 : 2; }
INLINE int K(q32_fifth)(DType t) { return t == DT_Q5_1 ? 4 : 2; }

/* One 32-element block as bytes: Q8_0 and IQ4_NL signed weights, the other
 * types their unsigned codes (book/appendix-gguf.md A.3.2). */
INLINE __m256i K(q32_block)(DType t, const uint8_t *b) {
    if (t == DT_Q8_0) return _mm256_loadu_si256((const __m256i *)(b + 2));
    __m256i q = K(nibbles)(b + K(q32_codes)(t));
    if (t == DT_Q5_0 || t == DT_Q5_1) q = _mm256_or_si256(q, K(fifth_bits)(b + K(q32_fifth)(t)));
    if (t == DT_IQ4_NL) q = K(iq4_lookup)(q);
    return q;
}

#if SIMD_512
/* The F16 values at b0 and b1 (the scales, or the mins, of two blocks), the
 * first in lanes 0-7 and the second in lanes 8-15. */
INLINE VF K(two_scales)(const uint8_t *b0, const uint8_t *b1) {
    uint16_t h0, h1;
    memcpy(&h0, b0, 2);
    memcpy(&h1, b1, 2);
    __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 | (uint32_t)h1 << 16)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                 _mm512_castps128_ps512(d));
}

/* The codes of two blocks whose nibble bytes start at p0 and p1: both
 * 16-byte halves split into nibbles at once, then put in element order
 * (block 0 low, block 0 high, block 1 low, block 1 high). */
INLINE VI K(nibbles_pair)(const uint8_t *p0, const uint8_t *p1) {
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                        _mm_loadu_si128((const __m128i *)p1), 1);
    __m256i m4 = _mm256_set1_epi8(0x0F);
    __m512i lo = _mm512_castsi256_si512(_mm256_and_si256(v, m4));
    __m512i hi = _mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    return _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi);
}

/* Two consecutive 32-element blocks at b and b + bytes, as K(q32_block). */
INLINE VI K(q32_pair)(DType t, const uint8_t *b, size_t bytes) {
    if (t == DT_Q8_0)
        return K(join)(_mm256_loadu_si256((const __m256i *)(b + 2)), _mm256_loadu_si256((const __m256i *)(b + bytes + 2)));
    VI q = K(nibbles_pair)(b + K(q32_codes)(t), b + bytes + K(q32_codes)(t));
    if (t == DT_Q5_0 || t == DT_Q5_1) {
        uint32_t h0, h1;
        memcpy(&h0, b + K(q32_fifth)(t), 4);
        memcpy(&h1, b + bytes + K(q32_fifth)(t), 4);
        q = _mm512_or_si512(q, _mm512_maskz_mov_epi8((__mmask64)((uint64_t)h0 | (uint64_t)h1 << 32), _mm512_set1_epi8(0x10)));
    }
    if (t == DT_IQ4_NL)
        q = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)IQ4_VALUES)), q);
    return q;
}
#endif

/* Blocks 2c, 2c + 1 (AVX2: block c) of a row of nb 32-element blocks; a
 * missing last block is zero. */
INLINE void K(decode_q32)(DType t, const uint8_t *row, int c, int nb, K(WChunk) *o) {
    const size_t bytes = K(q32_bytes)(t);
    const uint8_t *b = row + (size_t)c * QB * bytes;
    const bool has_min = t == DT_Q4_1 || t == DT_Q5_1;
    VI q;
#if SIMD_512
    if (2 * c + 1 < nb) {
        q = K(q32_pair)(t, b, bytes);
        o->scale = K(two_scales)(b, b + bytes);
        if (has_min) o->min = _mm512_sub_ps(_mm512_setzero_ps(), K(two_scales)(b + 2, b + bytes + 2));
    } else { /* the last block of an odd count: the upper half stays zero */
        q = K(join)(K(q32_block)(t, b), _mm256_setzero_si256());
        o->scale = K(join_scale)(K(f16)(b), 0.0f);
        if (has_min) o->min = K(join_scale)(-K(f16)(b + 2), 0.0f);
    }
#else
    (void)nb;
    q = K(q32_block)(t, b);
    o->scale = VF_SET1(K(f16)(b));
    if (has_min) o->min = VF_SET1(-K(f16)(b + 2));
#endif
    if (t == DT_Q8_0 || t == DT_IQ4_NL) K(set_signed)(o, q);
    else o->u = q;
}

/* Q6_K (book/appendix-gguf.md A.3.4): block b = 4h + r (r = 0..3) of a super-block takes the low
 * (r < 2) or high nibbles of ql[64h + 32(r & 1) ..][32] and bits 2r, 2r + 1 of
 * qh[32h ..][32]; its lanes 0-3 and 4-7 have scales sc[2b] and sc[2b + 1]. */
INLINE void K(decode_q6_k)(const uint8_t *row, int c, K(WChunk) *o) {
    const int per_sb = 8 / QB; /* chunks per super-block */
    const uint8_t *sb = row + (size_t)(c / per_sb) * 210;
    int b = (c % per_sb) * QB, h = b / 4, r = b % 4; /* first block of the chunk */
    float d = K(f16)(sb + 208);
    const int8_t *sc = (const int8_t *)(sb + 192);
#if SIMD_512
    /* blocks r, r + 1 of half h: ql bytes 64h..64h+63, one nibble; qh shifted by 2r and 2r + 2 */
    __m512i lo = _mm512_loadu_si512((const void *)(sb + 64 * h));
    if (r >= 2) lo = _mm512_srli_epi16(lo, 4);
    lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
    __m512i hi = _mm512_and_si512(K(shift_halves)(_mm256_loadu_si256((const __m256i *)(sb + 128 + 32 * h)), 2 * r, 2 * r + 2),
                                  _mm512_set1_epi8(3));
    o->u = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
    /* the 4 signed scales widened and multiplied in one vector: the same
     * products as one at a time, with fewer instructions (decode is short of them) */
    uint32_t s4;
    memcpy(&s4, sc + 2 * b, 4);
    __m128 f = _mm_mul_ps(_mm_set1_ps(d), _mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128((int)s4))));
    o->scale = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), _mm512_castps128_ps512(f));
#else
    __m256i lo = _mm256_loadu_si256((const __m256i *)(sb + 64 * h + 32 * (r & 1)));
    __m256i hi = _mm256_loadu_si256((const __m256i *)(sb + 128 + 32 * h));
    lo = _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(r < 2 ? 0 : 4)), _mm256_set1_epi8(0x0F));
    hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * r)), _mm256_set1_epi8(3));
    o->u = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    o->scale = K(join_scale)(d * (float)sc[2 * b], d * (float)sc[2 * b + 1]);
#endif
}

/* Q2_K: block b = 4h + j of a super-block is bits 2j, 2j + 1 of qs[32h ..][32];
 * its sub-blocks of 16 are 2b and 2b + 1, each with a 4-bit scale (times d)
 * and a 4-bit min (times dmin) in one byte. */
INLINE void K(decode_q2_k)(const uint8_t *row, int c, K(WChunk) *o) {
    const int per_sb = 8 / QB;
    const uint8_t *sb = row + (size_t)(c / per_sb) * 84;
    int b = (c % per_sb) * QB, h = b / 4, j = b % 4;
    float d = K(f16)(sb + 80), dmin = K(f16)(sb + 82);
    const uint8_t *s = sb + 2 * b;
    __m256i q = _mm256_loadu_si256((const __m256i *)(sb + 16 + 32 * h));
#if SIMD_512
    o->u = _mm512_and_si512(K(shift_halves)(q, 2 * j, 2 * j + 2), _mm512_set1_epi8(3));
    o->scale = K(spread4)(d * (float)(s[0] & 15), d * (float)(s[1] & 15), d * (float)(s[2] & 15), d * (float)(s[3] & 15));
    o->min = K(spread4)(dmin * (float)(s[0] >> 4), dmin * (float)(s[1] >> 4), dmin * (float)(s[2] >> 4),
                        dmin * (float)(s[3] >> 4));
#else
    o->u = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), _mm256_set1_epi8(3));
    o->scale = K(join_scale)(d * (float)(s[0] & 15), d * (float)(s[1] & 15));
    o->min = K(join_scale)(dmin * (float)(s[0] >> 4), dmin * (float)(s[1] >> 4));
#endif
}

/* Q3_K: block b = 4h + j takes bits 2j, 2j + 1 of qs[32h ..][32] and bit b of
 * hmask[0..31] as its third bit (u = q + 4 in 0..7); sub-blocks 2b, 2b + 1
 * have signed 6-bit scales. */
INLINE void K(decode_q3_k)(const uint8_t *row, int c, K(WChunk) *o) {
    const int per_sb = 8 / QB;
    const uint8_t *sb = row + (size_t)(c / per_sb) * 110;
    int b = (c % per_sb) * QB, h = b / 4, j = b % 4;
    float d = K(f16)(sb + 108);
    const uint8_t *scales = sb + 96;
    __m256i q = _mm256_loadu_si256((const __m256i *)(sb + 32 + 32 * h)), hm = _mm256_loadu_si256((const __m256i *)sb);
#if SIMD_512
    __m512i low = _mm512_and_si512(K(shift_halves)(q, 2 * j, 2 * j + 2), _mm512_set1_epi8(3));
    __m512i third = _mm512_and_si512(K(shift_halves)(hm, b, b + 1), _mm512_set1_epi8(1));
    o->u = _mm512_or_si512(low, _mm512_slli_epi16(third, 2));
    o->scale = K(spread4)(d * (float)dtype_scale_q3_k(2 * b, scales), d * (float)dtype_scale_q3_k(2 * b + 1, scales),
                          d * (float)dtype_scale_q3_k(2 * b + 2, scales), d * (float)dtype_scale_q3_k(2 * b + 3, scales));
#else
    __m256i low = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), _mm256_set1_epi8(3));
    __m256i third = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(b)), _mm256_set1_epi8(1));
    o->u = _mm256_or_si256(low, _mm256_slli_epi16(third, 2));
    o->scale = K(join_scale)(d * (float)dtype_scale_q3_k(2 * b, scales), d * (float)dtype_scale_q3_k(2 * b + 1, scales));
#endif
}

/* The scales and mins of the chunk's blocks in a Q4_K or Q5_K super-block sb:
 * block j has scale d * sc_j and min dmin * mn_j. */
INLINE void K(k4_scales)(const uint8_t *sb, int b, K(WChunk) *o) {
    float d = K(f16)(sb), dmin = K(f16)(sb + 2);
    int sc0, mn0;
    dtype_scale_min_k4(b, sb + 4, &sc0, &mn0);
#if SIMD_512
    int sc1, mn1;
    dtype_scale_min_k4(b + 1, sb + 4, &sc1, &mn1);
    /* [d sc0, d sc1, dmin mn0, dmin mn1], then each spread over its block's 8 lanes */
    __m128i four = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(sc0 | sc1 << 8 | mn0 << 16 | mn1 << 24)); /* all 6-bit */
    __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(four), _mm_setr_ps(d, d, dmin, dmin));
    o->scale = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                     _mm512_castps128_ps512(f));
    o->min = _mm512_permutexvar_ps(_mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                                   _mm512_castps128_ps512(f));
#else
    o->scale = VF_SET1(d * (float)sc0);
    o->min = VF_SET1(dmin * (float)mn0);
#endif
}

/* The 4-bit codes of block b (AVX-512: blocks b, b + 1) of a Q4_K / Q5_K
 * super-block whose codes start at qs: blocks 2k and 2k + 1 are the low and
 * high nibbles of the same 32 bytes qs[32k ..]. */
INLINE VI K(k4_codes)(const uint8_t *qs, int b) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (b / 2))), m4 = _mm256_set1_epi8(0x0F);
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#if SIMD_512
    return K(join)(lo, hi);
#else
    return (b & 1) ? hi : lo;
#endif
}

INLINE void K(decode_q4_k)(const uint8_t *row, int c, K(WChunk) *o) {
    const int per_sb = 8 / QB;
    const uint8_t *sb = row + (size_t)(c / per_sb) * 144;
    int b = (c % per_sb) * QB;
    o->u = K(k4_codes)(sb + 16, b);
    K(k4_scales)(sb, b, o);
}

/* A Q5_K chunk: Q4_K's nibbles (from qs at byte 48) plus 16 times bit b of
 * qh[0..31] for block b. */
INLINE void K(decode_q5_k)(const uint8_t *row, int c, K(WChunk) *o) {
    const int per_sb = 8 / QB;
    const uint8_t *sb = row + (size_t)(c / per_sb) * 176;
    int b = (c % per_sb) * QB;
    __m256i qh = _mm256_loadu_si256((const __m256i *)(sb + 16));
#if SIMD_512
    __m512i fifth = _mm512_and_si512(K(shift_halves)(qh, b, b + 1), _mm512_set1_epi8(1));
    o->u = _mm512_or_si512(K(k4_codes)(sb + 48, b), _mm512_slli_epi16(fifth, 4));
#else
    __m256i fifth = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(b)), _mm256_set1_epi8(1));
    o->u = _mm256_or_si256(K(k4_codes)(sb + 48, b), _mm256_slli_epi16(fifth, 4));
#endif
    K(k4_scales)(sb, b, o);
}

/* IQ4_XS: block b is the 16 nibble bytes at 8 + 16b, looked up in the IQ4
 * table, with the signed 6-bit scale of sub-block b. */
INLINE void K(decode_iq4_xs)(const uint8_t *row, int c, K(WChunk) *o) {
    const int per_sb = 8 / QB;
    const uint8_t *sb = row + (size_t)(c / per_sb) * 136;
    int b = (c % per_sb) * QB;
    float d = K(f16)(sb);
#if SIMD_512
    VI q = K(nibbles_pair)(sb + 8 + 16 * b, sb + 8 + 16 * (b + 1));
    K(set_signed)(o, _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)IQ4_VALUES)), q));
    o->scale = K(join_scale)(d * (float)dtype_scale_iq4_xs(b, sb), d * (float)dtype_scale_iq4_xs(b + 1, sb));
#else
    K(set_signed)(o, K(iq4_lookup)(K(nibbles)(sb + 8 + 16 * b)));
    o->scale = VF_SET1(d * (float)dtype_scale_iq4_xs(b, sb));
#endif
}

INLINE void K(decode)(DType t, const uint8_t *row, int c, int nb, K(WChunk) *o) {
    switch (t) {
    case DT_Q2_K: K(decode_q2_k)(row, c, o); break;
    case DT_Q3_K: K(decode_q3_k)(row, c, o); break;
    case DT_Q4_K: K(decode_q4_k)(row, c, o); break;
    case DT_Q5_K: K(decode_q5_k)(row, c, o); break;
    case DT_Q6_K: K(decode_q6_k)(row, c, o); break;
    case DT_IQ4_XS: K(decode_iq4_xs)(row, c, o); break;
    default: K(decode_q32)(t, row, c, nb, o); break; /* Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL */
    }
}

/* One chunk of one output element: exact integer lanes, then the float update. */
INLINE VF K(qstep)(DType t, const K(WChunk) *w, VI xq, VI xc, VF xs, const float *xm, VF acc) {
#if SIMD_512
    VI lanes = _mm512_dpbusd_epi32(xc, w->u, xq);
#else
    VI ones = _mm256_set1_epi16(1), lanes;
    if (K(signed_w)(t)) lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(w->u, _mm256_sign_epi8(xq, w->sign)), ones);
    else lanes = _mm256_add_epi32(xc, _mm256_madd_epi16(_mm256_maddubs_epi16(w->u, xq), ones));
#endif
    acc = VF_FMA(VF_MUL(w->scale, xs), VF_FROM_INT(lanes), acc);
    if (K(has_min)(t)) acc = VF_FNMA(w->min, VF_LOAD(xm), acc);
    return acc;
}

/* y[i0 + r, o0 + c] for r < R, c < C. The weights' chunks come from pre
 * (decoded once for all row tiles, see K(qcols_tile)) or are decoded here,
 * and then the first row tile asks for lines [0, lines) from ahead, spread
 * evenly over its chunks. */
INLINE void K(qtile)(DType t, int R, int C, float *y, const SimdActs *a, const Tensor *w, int i0, int o0,
                     const K(WChunk) *pre, const char *ahead, size_t lines) {
    int nb = (int)(a->in / 32), nch = (nb + QB - 1) / QB;
    int64_t out = w->ne[1];
    VF acc[QT_R][QT_C];
    const uint8_t *wr[QT_C];
    UNROLL for (int c = 0; c < C; c++) wr[c] = tensor_row(w, o0 + c);
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < C; c++) acc[r][c] = VF_ZERO();
    size_t per = !pre && i0 == 0 ? (lines + (size_t)nch - 1) / (size_t)nch : 0, line = 0;
    for (int ch = 0; ch < nch; ch++) {
        K(WChunk) wc[QT_C];
        if (per) K(ask)(ahead, lines, &line, per, C); /* a chunk is at most 64 bytes a row */
        UNROLL for (int c = 0; c < C; c++) {
            if (pre) {
                wc[c] = pre[(size_t)c * nch + ch];
            } else {
                K(decode)(t, wr[c], ch, nb, &wc[c]);
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            size_t row = (size_t)(i0 + r), si = row * a->s_stride + (size_t)ch * VF_N;
            VI xq = VI_LOAD(a->q + row * a->q_stride + (size_t)ch * QCHUNK), xc = VI_LOAD(a->c + si);
            VF xs = VF_LOAD(a->s + si);
            UNROLL for (int c = 0; c < C; c++) acc[r][c] = K(qstep)(t, &wc[c], xq, xc, xs, a->m + si, acc[r][c]);
        }
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) y[(size_t)(i0 + r) * out + o0 + c] = K(hsum)(acc[r][c]);
}

#if !SIMD_512
/* Q4_K on AVX2 sums whole super-blocks in integers, as llama.cpp does: per
 * 32-block the 32 products go into 8 int32 lanes times the block's 6-bit
 * scale (all exact), the lanes are added into one integer per output, and
 * only per super-block of 256 does float work happen, two updates of the
 * output's lane:
 *   acc += (d * x_d) * sum,   acc -= (dmin * x_d) * (mins . x_block_sums)
 * That needs one activation scale x_d per super-block (K(quantize_row_256))
 * instead of one per block. Each output's operations and their order are
 * the same in every tile, in the packed kernel (K(q4k_pdot)) and for any
 * batch, so the rule holds. */

/* The 8 scales and 8 mins of a Q4_K super-block, from the 12 bytes at p
 * (dtype_scale_min_k4's layout, four at a time): scales 0-3 and mins 0-3 are
 * the low 6 bits of bytes 0-3 and 4-7; scales 4-7 and mins 4-7 take their
 * low 4 bits from the low and high nibbles of bytes 8-11 and their top 2
 * from the top bits of bytes 0-3 and 4-7. */
INLINE void K(k4_scales_mins)(const uint8_t *p, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t w0, w1, w2, lo6 = 0x3F3F3F3Fu, lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u;
    memcpy(&w0, p, 4);
    memcpy(&w1, p + 4, 4);
    memcpy(&w2, p + 8, 4);
    uint32_t s03 = w0 & lo6, m03 = w1 & lo6;
    uint32_t s47 = (w2 & lo4) | ((w0 >> 6) & lo2) << 4, m47 = ((w2 >> 4) & lo4) | ((w1 >> 6) & lo2) << 4;
    memcpy(sc, &s03, 4);
    memcpy(sc + 4, &s47, 4);
    memcpy(mn, &m03, 4);
    memcpy(mn + 4, &m47, 4);
}

/* sum[r][c] += (u[c] . row r's 32 values of block blk) * scale[c], for
 * r < R, c < C: exact, in int32 lanes. */
INLINE void K(sb_block)(int R, int C, __m256i sum[][QT_C], const SimdActs *a, int i0, int blk, const __m256i *u,
                        const __m256i *scale) {
    UNROLL for (int r = 0; r < R; r++) {
        VI xq = VI_LOAD(a->q + (size_t)(i0 + r) * a->q_stride + (size_t)blk * 32);
        UNROLL for (int c = 0; c < C; c++) {
            sum[r][c] = _mm256_add_epi32(sum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], xq), scale[c]));
            KEEP_CHAIN(sum[r][c]);
        }
    }
}

/* Row i's activation scale of super-block sb (*xd) and its 16 sums of 16 values. */
INLINE __m256i K(sb_sums)(const SimdActs *a, int i, int sb, float *xd) {
    *xd = a->s[(size_t)i * a->s_stride + (size_t)sb];
    return _mm256_loadu_si256((const __m256i *)((const int16_t *)(a->c + (size_t)i * a->s_stride) + 16 * sb));
}

/* y[i0 + r, o0 + c] = acc[r][c] reduced, for r < R, c < C. */
INLINE void K(sb_store)(int R, int C, float *y, VF acc[][QT_C], const Tensor *w, int i0, int o0) {
    int64_t out = w->ne[1];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) y[(size_t)(i0 + r) * out + o0 + c] = K(hsum)(acc[r][c]);
}

/* v[k] for k < 8: 8 int32 lanes each; out lane k: the sum of v[k]'s lanes. */
INLINE __m256i K(block_totals)(const __m256i *v) {
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67); /* per half: v0..v3, v4..v7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* The lanes of acc to y: lane r * C + c is y[i0 + r, o0 + c]. */
_Static_assert(SB_R * QT_C <= 8, "a super-block tile's outputs fit one vector");
INLINE void K(lanes_store)(int R, int C, float *y, __m256 acc, const Tensor *w, int i0, int o0) {
    float o[8];
    _mm256_storeu_ps(o, acc);
    int64_t out = w->ne[1];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) y[(size_t)(i0 + r) * out + o0 + c] = o[r * C + c];
}

/* y[i0 + r, o0 + c] for r < R, c < C, Q4_K or Q5_K weights (Q5_K: the
 * same nibbles, and a fifth bit from qh). Each output's super-block sums
 * are brought to one integer each, and the float updates are one per output
 * and super-block, as in K(q4k_pdot): lane r * C + c of acc. */
INLINE void K(q4k_tile)(DType t, int R, int C, float *y, const SimdActs *a, const Tensor *w, int i0, int o0,
                        const char *ahead, size_t lines) {
    const int nb = (int)(a->in / 32), nsb = nb / 8;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const size_t bytes = t == DT_Q5_K ? 176 : 144, codes = t == DT_Q5_K ? 48 : 16; /* Q5_K: qh[32] first */
    __m256 acc = _mm256_setzero_ps(); /* lane r * C + c: y[i0 + r, o0 + c] */
    const uint8_t *wr[QT_C];
    UNROLL for (int c = 0; c < C; c++) wr[c] = tensor_row(w, o0 + c);
    size_t per = i0 == 0 ? (lines + (size_t)nb - 1) / (size_t)nb : 0, line = 0;
    for (int sb = 0; sb < nsb; sb++) {
        uint8_t sc[QT_C][8], mn[QT_C][8];
        __m256i scales[QT_C]; /* the 8 scales as int16, in both halves */
        UNROLL for (int c = 0; c < C; c++) {
            K(k4_scales_mins)(wr[c] + (size_t)sb * bytes + 4, sc[c], mn[c]);
            scales[c] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc[c])));
        }
        __m256i sum[SB_R][QT_C];
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < C; c++) sum[r][c] = _mm256_setzero_si256();
        UNROLL for (int k = 0; k < 4; k++) { /* the 32 bytes of blocks 2k (low nibbles) and 2k + 1 (high) */
            __m256i v[QT_C];
            UNROLL for (int c = 0; c < C; c++) v[c] = _mm256_loadu_si256((const __m256i *)(wr[c] + (size_t)sb * bytes + codes + 32 * k));
            UNROLL for (int h = 0; h < 2; h++) {
                int j = 2 * k + h;
                if (per) K(ask)(ahead, lines, &line, per, C);
                __m256i u[QT_C], scale[QT_C];
                UNROLL for (int c = 0; c < C; c++) {
                    u[c] = _mm256_and_si256(h ? _mm256_srli_epi16(v[c], 4) : v[c], m4);
                    if (t == DT_Q5_K) { /* 16 times bit j of qh */
                        __m256i qh = _mm256_loadu_si256((const __m256i *)(wr[c] + (size_t)sb * bytes + 16));
                        __m256i fifth = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
                        u[c] = _mm256_or_si256(u[c], _mm256_slli_epi16(fifth, 4));
                    }
                    scale[c] = _mm256_shuffle_epi8(scales[c], _mm256_set1_epi16((short)(0x0100 + 0x0202 * j))); /* scale j */
                }
                K(sb_block)(R, C, sum, a, i0, 8 * sb + j, u, scale);
            }
        }
        __m256i tot[8], mtot[8]; /* [r * C + c]: the sums, and the mins x the activations' sums */
        float fd[8] = {0}, fm[8] = {0};
        UNROLL for (int k = 0; k < 8; k++) tot[k] = mtot[k] = _mm256_setzero_si256();
        UNROLL for (int r = 0; r < R; r++) {
            float xd;
            __m256i bsum = K(sb_sums)(a, i0 + r, sb, &xd);
            UNROLL for (int c = 0; c < C; c++) {
                const uint8_t *p = wr[c] + (size_t)sb * bytes;
                __m128i m8 = _mm_loadl_epi64((const __m128i *)mn[c]);
                __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* min j under both 16s of block j */
                tot[r * C + c] = sum[r][c];
                mtot[r * C + c] = _mm256_madd_epi16(mins, bsum); /* lane j: block j's min x sum */
                fd[r * C + c] = K(f16)(p) * xd;
                fm[r * C + c] = K(f16)(p + 2) * xd;
            }
        }
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(fd), _mm256_cvtepi32_ps(K(block_totals)(tot)), acc);
        acc = _mm256_fnmadd_ps(_mm256_loadu_ps(fm), _mm256_cvtepi32_ps(K(block_totals)(mtot)), acc);
    }
    K(lanes_store)(R, C, y, acc, w, i0, o0);
}

/* The 16 signed scales of a Q3_K super-block as int16, from its 12 bytes at
 * p (dtype_scale_q3_k's layout, four at a time): scales 0-7 take their low 4
 * bits from the low nibbles of bytes 0-7, scales 8-15 from the high ones;
 * bits 2k, 2k + 1 of bytes 8-11 are the top 2 bits of scales 4k .. 4k + 3. */
INLINE __m256i K(q3k_scales)(const uint8_t *p) {
    uint32_t w[3], lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u, v[4];
    memcpy(w, p, 12);
    v[0] = (w[0] & lo4) | (w[2] & lo2) << 4;
    v[1] = (w[1] & lo4) | ((w[2] >> 2) & lo2) << 4;
    v[2] = ((w[0] >> 4) & lo4) | ((w[2] >> 4) & lo2) << 4;
    v[3] = ((w[1] >> 4) & lo4) | ((w[2] >> 6) & lo2) << 4;
    __m128i b = _mm_loadu_si128((const __m128i *)v);
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(b), _mm256_set1_epi16(32));
}

/* y[i0 + r, o0 + c] for r < R, c < C, Q6_K or Q3_K weights: as Q4_K, with a
 * signed scale per 16 values and an offset (value = u - 32, u - 4) taken out
 * once per super-block: offset * (scales . x_sums). */
INLINE void K(s16_tile)(DType t, int R, int C, float *y, const SimdActs *a, const Tensor *w, int i0, int o0,
                        const char *ahead, size_t lines) {
    const int nb = (int)(a->in / 32), nsb = nb / 8;
    const bool q6 = t == DT_Q6_K;
    const size_t bytes = q6 ? 210 : 110;
    const int off_shift = q6 ? 5 : 2; /* the offset 32 or 4 */
    VF acc[SB_R][QT_C];
    const uint8_t *wr[QT_C];
    UNROLL for (int c = 0; c < C; c++) wr[c] = tensor_row(w, o0 + c);
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < C; c++) acc[r][c] = VF_ZERO();
    size_t per = i0 == 0 ? (lines + (size_t)nb - 1) / (size_t)nb : 0, line = 0;
    for (int sb = 0; sb < nsb; sb++) {
        __m256i s16[QT_C], scales[QT_C][2]; /* the 16 scales as int16; 0-7 in both halves, then 8-15 in both */
        UNROLL for (int c = 0; c < C; c++) {
            const uint8_t *p = wr[c] + (size_t)sb * bytes;
            s16[c] = q6 ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192))) : K(q3k_scales)(p + 96);
            scales[c][0] = _mm256_permute2x128_si256(s16[c], s16[c], 0x00);
            scales[c][1] = _mm256_permute2x128_si256(s16[c], s16[c], 0x11);
        }
        __m256i sum[SB_R][QT_C];
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < C; c++) sum[r][c] = _mm256_setzero_si256();
        UNROLL for (int j = 0; j < 8; j++) { /* block j: half h, quarter q of it (K(decode_q6_k), K(decode_q3_k)) */
            int h = j / 4, q = j % 4;
            if (per) K(ask)(ahead, lines, &line, per, C);
            __m256i u[QT_C], scale[QT_C];
            UNROLL for (int c = 0; c < C; c++) {
                const uint8_t *p = wr[c] + (size_t)sb * bytes;
                if (q6) {
                    __m256i lo = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32 * (q & 1)));
                    __m256i hi = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
                    lo = _mm256_and_si256(q < 2 ? lo : _mm256_srli_epi16(lo, 4), _mm256_set1_epi8(0x0F));
                    hi = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * q), _mm256_set1_epi8(3));
                    u[c] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                } else {
                    __m256i lo = _mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h));
                    __m256i hm = _mm256_loadu_si256((const __m256i *)p);
                    lo = _mm256_and_si256(_mm256_srli_epi16(lo, 2 * q), _mm256_set1_epi8(3));
                    hm = _mm256_and_si256(_mm256_srli_epi16(hm, j), _mm256_set1_epi8(1));
                    u[c] = _mm256_or_si256(lo, _mm256_slli_epi16(hm, 2));
                }
                /* scale 2j under the block's first 16 values, 2j + 1 under the others */
                scale[c] = _mm256_shuffle_epi8(scales[c][h], _mm256_set_m128i(_mm_set1_epi16((short)(0x0302 + 0x0404 * q)),
                                                                                _mm_set1_epi16((short)(0x0100 + 0x0404 * q))));
            }
            K(sb_block)(R, C, sum, a, i0, 8 * sb + j, u, scale);
        }
        UNROLL for (int r = 0; r < R; r++) {
            float xd;
            __m256i bsum = K(sb_sums)(a, i0 + r, sb, &xd);
            UNROLL for (int c = 0; c < C; c++) {
                const uint8_t *p = wr[c] + (size_t)sb * bytes;
                __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(s16[c], bsum), off_shift);
                float d = K(f16)(p + bytes - 2);
                acc[r][c] = VF_FMA(VF_SET1(d * xd), VF_FROM_INT(_mm256_sub_epi32(sum[r][c], off)), acc[r][c]);
            }
        }
    }
    K(sb_store)(R, C, y, acc, w, i0, o0);
}

/* The 8 signed scales of an IQ4_XS super-block p as int16 (dtype_scale_iq4_xs's
 * layout): low 4 bits from the nibbles of bytes 4-7 (even scales low, odd
 * high), top 2 from bits 2k, 2k + 1 of the u16 at 2. */
INLINE __m128i K(iq4xs_scales)(const uint8_t *p) {
    uint32_t l, lo4 = 0x0F0F0F0Fu;
    uint16_t h;
    memcpy(&l, p + 4, 4);
    memcpy(&h, p + 2, 2);
    /* bytes: scales 0, 2, 4, 6 then 1, 3, 5, 7, each with its top bits */
    uint32_t even = l & lo4, odd = (l >> 4) & lo4, he = 0, ho = 0;
    for (int k = 0; k < 4; k++) {
        he |= (uint32_t)((h >> (4 * k)) & 3) << (8 * k + 4);
        ho |= (uint32_t)((h >> (4 * k + 2)) & 3) << (8 * k + 4);
    }
    __m128i v = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)(even | he)), _mm_cvtsi32_si128((int)(odd | ho)));
    return _mm_sub_epi16(_mm_cvtepu8_epi16(v), _mm_set1_epi16(32));
}

/* y[i0 + r, o0 + c] for r < R, c < C, IQ4_XS weights: signed values from the
 * IQ4 table, |w| times x with w's sign (K(signed_w)), a signed scale per 32.
 * Each output's super-block sum is brought to one integer, and the float
 * update is one per output and super-block, as in K(iq4xs_pdot): lane
 * r * C + c of acc is y[i0 + r, o0 + c]. */
INLINE void K(iq4xs_tile)(int R, int C, float *y, const SimdActs *a, const Tensor *w, int i0, int o0,
                          const char *ahead, size_t lines) {
    const int nb = (int)(a->in / 32), nsb = nb / 8;
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *wr[QT_C];
    UNROLL for (int c = 0; c < C; c++) wr[c] = tensor_row(w, o0 + c);
    size_t per = i0 == 0 ? (lines + (size_t)nb - 1) / (size_t)nb : 0, line = 0;
    for (int sb = 0; sb < nsb; sb++) {
        __m256i scales[QT_C]; /* the 8 scales as int16, in both halves */
        UNROLL for (int c = 0; c < C; c++) {
            const uint8_t *p = wr[c] + (size_t)sb * 136;
            scales[c] = _mm256_broadcastsi128_si256(K(iq4xs_scales)(p));
        }
        __m256i sum[8]; /* sum[r * C + c] */
        UNROLL for (int k = 0; k < 8; k++) sum[k] = _mm256_setzero_si256();
        UNROLL for (int j = 0; j < 8; j++) {
            if (per) K(ask)(ahead, lines, &line, per, C);
            __m256i wv[QT_C], u[QT_C], scale[QT_C];
            UNROLL for (int c = 0; c < C; c++) {
                wv[c] = K(iq4_lookup)(K(nibbles)(wr[c] + (size_t)sb * 136 + 8 + 16 * j));
                u[c] = _mm256_sign_epi8(wv[c], wv[c]);
                scale[c] = _mm256_shuffle_epi8(scales[c], _mm256_set1_epi16((short)(0x0100 + 0x0202 * j))); /* scale j */
            }
            UNROLL for (int r = 0; r < R; r++) {
                VI xq = VI_LOAD(a->q + (size_t)(i0 + r) * a->q_stride + (size_t)(8 * sb + j) * 32);
                UNROLL for (int c = 0; c < C; c++) { /* |w| x: pairs up to 2 * 127 * 127, no saturation */
                    __m256i p16 = _mm256_maddubs_epi16(u[c], _mm256_sign_epi8(xq, wv[c]));
                    sum[r * C + c] = _mm256_add_epi32(sum[r * C + c], _mm256_madd_epi16(p16, scale[c]));
                    KEEP_CHAIN(sum[r * C + c]);
                }
            }
        }
        float f[8] = {0}; /* w_d * x_d per lane */
        UNROLL for (int r = 0; r < R; r++) {
            float xd = a->s[(size_t)(i0 + r) * a->s_stride + (size_t)sb];
            UNROLL for (int c = 0; c < C; c++) f[r * C + c] = K(f16)(wr[c] + (size_t)sb * 136) * xd;
        }
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(f), _mm256_cvtepi32_ps(K(block_totals)(sum)), acc);
    }
    K(lanes_store)(R, C, y, acc, w, i0, o0);
}

/* A tile of R rows for a type K(superblock_acts) names. */
INLINE void K(sb_tile)(DType t, int R, int C, float *y, const SimdActs *a, const Tensor *w, int i0, int o0,
                       const char *ahead, size_t lines) {
    if (t == DT_Q4_K || t == DT_Q5_K) K(q4k_tile)(t, R, C, y, a, w, i0, o0, ahead, lines);
    else if (t == DT_IQ4_XS) K(iq4xs_tile)(R, C, y, a, w, i0, o0, ahead, lines);
    else K(s16_tile)(t, R, C, y, a, w, i0, o0, ahead, lines); /* Q6_K, Q3_K */
}
#endif

/* Every row tile against outputs [o0, o0 + C), C == QT_C or 1. The
 * super-block types of AVX2 go to K(sb_tile). For the others, with many rows
 * (QPRE_ROWS or more), the C weight rows are decoded once into pre and every
 * row tile reads them from there (prefill: each weight byte decoded once per
 * call); with fewer (a batch of decode steps) each row tile decodes them
 * again, from the cache, which costs less than storing and reloading them.
 * The values and the arithmetic are the same either way. Decoding on the
 * way, it asks for the rows TILES_AHEAD tiles on (up to c1). */
INLINE void K(qcols_tile)(DType t, int C, float *y, const SimdActs *a, const Tensor *w, int o0, int c1, K(WChunk) *pre) {
    int i = 0, n = a->n;
    size_t lines;
    const char *ahead = K(ahead)(w, o0 + TILES_AHEAD * C, C, c1, &lines);
    if (n >= QPRE_ROWS && !K(superblock_acts)(t)) {
        int nb = (int)(a->in / 32), nch = (nb + QB - 1) / QB;
        for (int c = 0; c < C; c++)
            for (int ch = 0; ch < nch; ch++) K(decode)(t, tensor_row(w, o0 + c), ch, nb, &pre[(size_t)c * nch + ch]);
    } else {
        pre = NULL;
    }
#if !SIMD_512
    if (K(superblock_acts)(t)) {
        for (; i + SB_R <= n; i += SB_R) K(sb_tile)(t, SB_R, C, y, a, w, i, o0, ahead, lines);
        switch (n - i) {
        case 3: K(sb_tile)(t, 3, C, y, a, w, i, o0, ahead, lines); break;
        case 2: K(sb_tile)(t, 2, C, y, a, w, i, o0, ahead, lines); break;
        case 1: K(sb_tile)(t, 1, C, y, a, w, i, o0, ahead, lines); break;
        default: break;
        }
        return;
    }
#endif
    for (; i + QT_R <= n; i += QT_R) K(qtile)(t, QT_R, C, y, a, w, i, o0, pre, ahead, lines);
    switch (n - i) {
#if QT_R > 3
    case 3: K(qtile)(t, 3, C, y, a, w, i, o0, pre, ahead, lines); break;
#endif
#if QT_R > 2
    case 2: K(qtile)(t, 2, C, y, a, w, i, o0, pre, ahead, lines); break;
#endif
    case 1: K(qtile)(t, 1, C, y, a, w, i, o0, pre, ahead, lines); break;
    default: break;
    }
}

INLINE void K(qcols)(DType t, float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    K(WChunk) *pre = NULL;
    if (a->n >= QPRE_ROWS && !K(superblock_acts)(t)) {
        size_t nch = (size_t)(a->in / 32 + QB - 1) / QB;
        pre = K(scratch)(sizeof(K(WChunk)) * QT_C * nch);
    }
    int o = c0;
    for (; o + QT_C <= c1; o += QT_C) K(qcols_tile)(t, QT_C, y, a, w, o, c1, pre);
    for (; o < c1; o++) K(qcols_tile)(t, 1, y, a, w, o, c1, pre);
    free(pre);
}

/* ---- column-packed kernels (below, one section per build) share this ---- */
#define PC_R 4 /* activation rows per inner loop */
#define PC_BLOCKS 16 /* blocks packed at a time: the pack stays in L1, rows loop over it */
#if SIMD_512
#define PC_N 16     /* outputs per packed tile: one per float lane */
#define PC_VECS 10  /* per block: 8 vectors of codes, the scales, the mins */
typedef __mmask16 K(PMask); /* the packed tile's outputs to store */
#else
#define PC_N 8       /* outputs per packed tile: one per float lane */
#define PC_VECS 17   /* per block: 8 vectors of codes (Q8_0: |w|), the scales, Q8_0's 8 of w */
typedef __m256i K(PMask);
#endif
#define IQ_VECS (8 * 17 + 1) /* AVX2 IQ4_XS, per super-block: per block |w| (8), scales, w (8); then the d's */
#define K4_VECS (8 * 10 + 2) /* AVX2 Q4_K, per super-block: per block codes (8), scales, mins; the d's, dmins */
#define SB_MIN_ROWS 8        /* AVX2 IQ4_XS, Q4_K: with fewer rows, their tiles (the pack would not pay) */
/* A packed unit: a block of 32, or on AVX2 a super-block of 256 for IQ4_XS
 * and Q4_K; its vectors in the pack, and its bytes in a row. */
INLINE bool K(sb_packed)(DType t) { return !SIMD_512 && (t == DT_IQ4_XS || t == DT_Q4_K); }
INLINE int K(pack_unit)(DType t) { return K(sb_packed)(t) ? 256 : 32; }
INLINE int K(pack_vecs)(DType t) { return !K(sb_packed)(t) ? PC_VECS : t == DT_IQ4_XS ? IQ_VECS : K4_VECS; }
INLINE size_t K(pack_bytes)(DType t) { return !K(sb_packed)(t) ? K(q32_bytes)(t) : t == DT_IQ4_XS ? 136 : 144; }
INLINE void K(ptile)(DType t, int R, float *y, const SimdActs *a, const VI *p, int b0, int b1, int64_t out, int i0,
                     K(PMask) mask, bool first);

/* Every row tile of the n rows over the packed blocks [b0, b1) of the
 * outputs from y on. */
INLINE void K(ptiles)(DType t, float *y, const SimdActs *a, const VI *p, int b0, int b1, int64_t out, int n,
                      K(PMask) mask) {
    int i = 0;
    for (; i + PC_R <= n; i += PC_R) K(ptile)(t, PC_R, y, a, p, b0, b1, out, i, mask, b0 == 0);
    switch (n - i) {
    case 3: K(ptile)(t, 3, y, a, p, b0, b1, out, i, mask, b0 == 0); break;
    case 2: K(ptile)(t, 2, y, a, p, b0, b1, out, i, mask, b0 == 0); break;
    case 1: K(ptile)(t, 1, y, a, p, b0, b1, out, i, mask, b0 == 0); break;
    default: break;
    }
}

/* One block of PC_N outputs packed (per build, below): the first output's
 * block at bb, output j's off[j] bytes from it. */
INLINE void K(pack_block)(DType t, const uint8_t *bb, const size_t *off, VI *dst);

/* Where the PC_N outputs from o0 are read: their packed units (blocks, or
 * K(sb_packed)'s super-blocks), and the next tile's rows to ask for
 * meanwhile. The next tile's rows are one contiguous run of memory: it is
 * asked for in order, a share per unit, while this one is packed. (Reading
 * 16 rows side by side leaves memory streaming at half speed.) */
typedef struct {
    const uint8_t *base; /* unit 0 of output o0 */
    size_t bytes;        /* per unit */
    const char *ahead;
    size_t lines, per;   /* lines of ahead in all, and per unit */
} K(PackSrc);

/* off[j]: output j's row from base (the last one repeated past cols); the
 * next tile's rows up to c1 (the rest is another thread's). */
INLINE void K(pack_src)(DType t, const Tensor *w, int o0, int cols, int c1, K(PackSrc) *src, size_t *off) {
    int nb = (int)(w->ne[0] / K(pack_unit)(t));
    src->base = tensor_row(w, o0);
    for (int j = 0; j < PC_N; j++) off[j] = (size_t)(j < cols ? j : cols - 1) * w->row_bytes;
    src->bytes = K(pack_bytes)(t);
    src->ahead = K(ahead)(w, o0 + PC_N, PC_N, c1, &src->lines);
    src->per = (src->lines + nb - 1) / nb;
}

/* Unit b packed into dst[K(pack_vecs)(t)], and its share of the next tile
 * asked for (a count fixed by the type: K(ask) unrolls it). */
INLINE void K(pack_at)(DType t, const K(PackSrc) *src, const size_t *off, int b, VI *dst) {
    if (src->lines) { /* per is at most the lines of PC_N units */
        size_t line = (size_t)b * src->per;
        K(ask)(src->ahead, src->lines, &line, src->per, (int)((PC_N * K(pack_bytes)(t) + 63) / 64));
    }
    K(pack_block)(t, src->base + (size_t)b * src->bytes, off, dst);
}

#if SIMD_512
/* ---- quantized weights, column-packed (AVX-512: Q8_0, Q4_0, Q4_1) ----
 * The kernels above give each output 16 float lanes and pay four vector
 * operations (dot product, convert, scale, add) per output and per 64
 * weights. Here one vector holds 16 outputs instead: the weights of 16 rows
 * of W are packed (decoded once, transposed by 4-byte groups), an activation
 * row's 4 bytes are broadcast to all lanes, and one dot-product instruction
 * then does 4 products for each of the 16 outputs. A block's 32 products sum
 * exactly into one int32 lane per output, so the float work is one update
 * per output and per block of 32, shared by no one else:
 *   acc = fma(w_scale * x_scale, (float)block_sum, acc)   (then - w_min * x_sum)
 * This is the same for every n (decode, K(srow), does the same float work
 * without packing), so a row's result does not depend on its batch. */

/* z[j] holds the 8 dwords of output j (low half) and of output j + 8 (high
 * half); out[g] gets dword g of outputs 0..15, in output order. An 8x8
 * transpose in each half: pairs, then quads, then 128-bit lanes. */
INLINE void K(transpose8)(const __m512i *z, __m512i *out) {
    __m512i u[8];
    UNROLL for (int h = 0; h < 8; h += 4) { /* outputs h..h+3 */
        __m512i t0 = _mm512_unpacklo_epi32(z[h], z[h + 1]), t1 = _mm512_unpackhi_epi32(z[h], z[h + 1]);
        __m512i t2 = _mm512_unpacklo_epi32(z[h + 2], z[h + 3]), t3 = _mm512_unpackhi_epi32(z[h + 2], z[h + 3]);
        u[h] = _mm512_unpacklo_epi64(t0, t2);
        u[h + 1] = _mm512_unpackhi_epi64(t0, t2);
        u[h + 2] = _mm512_unpacklo_epi64(t1, t3);
        u[h + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
    /* u[k] (k < 4), per 128-bit lane: dword k of outputs 0-3, dword k + 4 of
     * them, dword k of outputs 8-11, dword k + 4 of them; u[k + 4] the same
     * for outputs 4-7 and 12-15. */
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    UNROLL for (int k = 0; k < 4; k++) {
        out[k] = _mm512_permutex2var_epi64(u[k], lo, u[k + 4]);
        out[k + 4] = _mm512_permutex2var_epi64(u[k], hi, u[k + 4]);
    }
}

/* Q8_0: 32 signed bytes after the scale, made unsigned (+128) once packed. */
INLINE void K(pack_q8)(const uint8_t *const *blk, __m512i *dst) {
    __m512i z[8];
    UNROLL for (int j = 0; j < 8; j++)
        z[j] = K(join)(_mm256_loadu_si256((const __m256i *)(blk[j] + 2)), _mm256_loadu_si256((const __m256i *)(blk[j + 8] + 2)));
    K(transpose8)(z, dst);
    UNROLL for (int g = 0; g < 8; g++) dst[g] = _mm512_xor_si512(dst[g], _mm512_set1_epi8((char)0x80));
}

/* Q4_0 / Q4_1: byte i of a block's 16 holds element i (low nibble) and
 * i + 16 (high nibble), so the bytes are transposed by 4 first (a 4x4
 * transpose in each 128-bit lane) and the nibbles of 16 outputs split after. */
INLINE void K(pack_q4)(const uint8_t *const *blk, int codes, __m512i *dst) {
    __m512i a[4];
    UNROLL for (int k = 0; k < 4; k++) { /* outputs k, k + 4, k + 8, k + 12 in lanes 0-3 */
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk[k] + codes)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk[k + 4] + codes)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk[k + 8] + codes)), 2);
        a[k] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk[k + 12] + codes)), 3);
    }
    __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
    __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
    __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                    _mm512_unpackhi_epi64(t1, t3)};
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    UNROLL for (int g = 0; g < 4; g++) {
        dst[g] = _mm512_and_si512(u[g], m4);
        dst[g + 4] = _mm512_and_si512(_mm512_srli_epi16(u[g], 4), m4);
    }
}

/* The 16-bit values at blk[j] + at (a scale or a min of each block). */
INLINE __m256i K(halves16)(const uint8_t *const *blk, int at) {
    uint16_t h[PC_N];
    UNROLL for (int j = 0; j < PC_N; j++) memcpy(&h[j], blk[j] + at, 2);
    return _mm256_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4], (short)h[5], (short)h[6],
                             (short)h[7], (short)h[8], (short)h[9], (short)h[10], (short)h[11], (short)h[12], (short)h[13],
                             (short)h[14], (short)h[15]);
}

/* Blocks [b0, b1) of outputs [o0, o0 + cols), cols <= PC_N, packed: per
 * block PC_VECS vectors (see above). Lanes past cols repeat the last output;
 * K(ptile) does not store them. */
/* One block of 16 outputs, the first's at bb, output j's off[j] from it. */
INLINE void K(pack_block)(DType t, const uint8_t *bb, const size_t *off, __m512i *dst) {
    const uint8_t *blk[PC_N];
    UNROLL for (int j = 0; j < PC_N; j++) blk[j] = bb + off[j];
    if (t == DT_Q8_0) K(pack_q8)(blk, dst);
    else K(pack_q4)(blk, K(q32_codes)(t), dst);
    dst[8] = _mm512_castps_si512(_mm512_cvtph_ps(K(halves16)(blk, 0)));
    if (t == DT_Q4_1) /* +m is stored; the lanes take off -m (see K(has_min)) */
        dst[9] = _mm512_castps_si512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(K(halves16)(blk, 2))));
}

/* The 16 F16 values at p (a tile's scales, or Q4_1's mins) as floats. */
INLINE __m512 K(tile_halves)(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* The same from w's tiles (tiles.h), which hold the codes as the pack does:
 * what is left is Q4's nibble split and the scales' conversion to float. */
INLINE void K(pack_tiles)(DType t, const Tensor *w, int o0, int b0, int b1, __m512i *dst) {
    const int nb = (int)(w->ne[0] / 32), groups = t == DT_Q8_0 ? 8 : 4;
    const size_t bb = tiles_block_bytes(t);
    const uint8_t *p = (const uint8_t *)w->tiles + ((size_t)(o0 / PC_N) * nb + b0) * bb;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int b = b0; b < b1; b++, p += bb, dst += PC_VECS) {
        /* the tiles are read front to back: ask for the next run's block
         * (a prefetch past the end is harmless) while the rows work on this one */
        for (size_t l = 0; l < bb; l += 64) _mm_prefetch((const char *)p + PC_BLOCKS * bb + l, _MM_HINT_T0);
        if (t == DT_Q8_0) {
            UNROLL for (int g = 0; g < 8; g++) dst[g] = _mm512_loadu_si512((const void *)(p + 64 * g));
        } else {
            UNROLL for (int g = 0; g < 4; g++) {
                __m512i u = _mm512_loadu_si512((const void *)(p + 64 * g));
                dst[g] = _mm512_and_si512(u, m4);
                dst[g + 4] = _mm512_and_si512(_mm512_srli_epi16(u, 4), m4);
            }
        }
        const uint8_t *halves = p + 64 * (size_t)groups;
        dst[8] = _mm512_castps_si512(K(tile_halves)(halves));
        if (t == DT_Q4_1) /* -m, as K(pack_block) */
            dst[9] = _mm512_castps_si512(_mm512_sub_ps(_mm512_setzero_ps(), K(tile_halves)(halves + 32)));
    }
}

INLINE void K(pack)(DType t, const Tensor *w, int o0, int cols, int c1, int b0, int b1, __m512i *dst) {
    if (w->tiles && o0 % PC_N == 0) {
        K(pack_tiles)(t, w, o0, b0, b1, dst);
        return;
    }
    K(PackSrc) src;
    size_t off[PC_N];
    K(pack_src)(t, w, o0, cols, c1, &src, off);
    for (int b = b0; b < b1; b++, dst += PC_VECS) K(pack_at)(t, &src, off, b, dst);
}

/* Rows i0 .. i0 + R of the packed blocks [b0, b1): acc[r] is y[i0 + r, o0 ..
 * o0 + 16), kept in y between calls (zero before the first). */
/* Block b of packed p (PC_VECS vectors) into acc[r], rows i0 .. i0 + R. */
INLINE void K(pdot)(DType t, int R, __m512 *acc, const SimdActs *a, const __m512i *p, int b, int i0) {
    /* Few rows: two chains of dot products (even and odd g), so that each
     * waits on half as many; integer sums are exact, so the split cannot
     * change a result. */
    __m512i lanes[PC_R], odd[PC_R];
    const bool split = R <= 2;
    UNROLL for (int r = 0; r < R; r++) {
        lanes[r] = _mm512_set1_epi32(a->c[(size_t)(i0 + r) * a->s_stride + 8 * (size_t)b]);
        odd[r] = _mm512_setzero_si512();
    }
    UNROLL for (int g = 0; g < 8; g++) {
        __m512i wv = p[g];
        UNROLL for (int r = 0; r < R; r++) {
            int32_t xv;
            memcpy(&xv, a->q + (size_t)(i0 + r) * a->q_stride + 32 * (size_t)b + 4 * g, 4);
            if (split && (g & 1)) odd[r] = _mm512_dpbusd_epi32(odd[r], wv, _mm512_set1_epi32(xv));
            else lanes[r] = _mm512_dpbusd_epi32(lanes[r], wv, _mm512_set1_epi32(xv));
        }
    }
    if (split) UNROLL for (int r = 0; r < R; r++) lanes[r] = _mm512_add_epi32(lanes[r], odd[r]);
    __m512 sc = _mm512_castsi512_ps(p[8]);
    UNROLL for (int r = 0; r < R; r++) {
        size_t si = (size_t)(i0 + r) * a->s_stride + 8 * (size_t)b;
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(sc, _mm512_set1_ps(a->s[si])), _mm512_cvtepi32_ps(lanes[r]), acc[r]);
        if (K(has_min)(t)) acc[r] = _mm512_fnmadd_ps(_mm512_castsi512_ps(p[9]), _mm512_set1_ps(a->m[si]), acc[r]);
    }
}

INLINE void K(ptile)(DType t, int R, float *y, const SimdActs *a, const VI *p, int b0, int b1, int64_t out, int i0,
                     K(PMask) mask, bool first) {
    __m512 acc[PC_R];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + (size_t)(i0 + r) * out);
    for (int b = b0; b < b1; b++, p += PC_VECS) K(pdot)(t, R, acc, a, p, b, i0);
    UNROLL for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)(i0 + r) * out, mask, acc[r]);
}

/* ---- a batch of one row, one weight row at a time ----
 * Reading the 16 rows of a tile side by side, as K(pack) does, left memory
 * streaming at well under half the speed of one row read front to back. So
 * with one activation row each weight row of the tile is read front to back
 * alone, in chunks of 16 blocks: its blocks' exact integer sums go to sums,
 * their scales to scf (and Q4_1's mins to mins), 16 to a vector, in an order
 * of the kernel's own (K(srow_at)). Then K(srow_update) turns the 16 rows'
 * vectors of a chunk into 16 vectors of 16 lanes, one per block (two
 * K(transpose8)s per array), and runs the
 * float update per block, exactly as K(pdot) does it: the integer sums are
 * exact and the float operations the same, in the same order, so the bits
 * are the same as in any batch. */
typedef struct {
    int32_t *sums; /* [PC_N][stride]: row j's block sums in srow order */
    float *scf;    /* the same for the scales */
    float *mins;   /* and for Q4_1's mins, negated as in K(pack_block) */
    int stride;    /* blocks rounded up to 16 */
} K(RowSums);

/* Where block r of a chunk sits among its 16 values. */
INLINE int K(srow_at)(DType t, int r) { return t == DT_Q8_0 ? (r % 2 ? 8 + r / 2 : r / 2) : 4 * (r % 4) + r / 4; }

/* Q8_0: blocks 2k and 2k + 1 in the halves of one vector, their 8 partial
 * sums each reduced by one K(transpose8) for the chunk. */
INLINE void K(srow_q8)(const uint8_t *p, int n, const int8_t *x, int32_t *sums, float *scf) {
    __m512i d[8], s[8];
    UNROLL for (int k = 0; k < 8; k++) {
        int b = 2 * k;
        scf[k] = scf[8 + k] = 0.0f;
        if (b >= n) {
            d[k] = _mm512_setzero_si512();
            continue;
        }
        bool two = b + 1 < n;
        __m512i u = two ? K(q32_pair)(DT_Q8_0, p + (size_t)b * 34, 34) /* a missing last block: 0 once flipped */
                        : K(join)(K(q32_block)(DT_Q8_0, p + (size_t)b * 34), _mm256_set1_epi8((char)0x80));
        u = _mm512_xor_si512(u, _mm512_set1_epi8((char)0x80));
        d[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512((const void *)(x + 32 * (size_t)b)));
        scf[k] = K(f16)(p + (size_t)b * 34);
        if (two) scf[8 + k] = K(f16)(p + (size_t)(b + 1) * 34);
    }
    K(transpose8)(d, s);
    __m512i v = s[0];
    UNROLL for (int k = 1; k < 8; k++) v = _mm512_add_epi32(v, s[k]);
    _mm512_storeu_si512((void *)sums, v);
}

/* Q4_0 and Q4_1: 4 blocks (72 or 80 bytes) from two overlapping loads, their
 * 16-byte codes gathered into the four 128-bit lanes by one word permute,
 * the low nibbles then dotted with the first 16 activations of each block
 * and the high ones with the last 16 (x arranged so by K(srow_arrange)).
 * Each 128-bit lane is then one block's 4 partial sums; the chunk's four
 * vectors reduce to one with two rounds of unpacks. */
static const uint16_t K(Q4_WORDS)[2][3][32] = {
    {/* Q4_0: codes of blocks 0-2 from the load at 0, block 3 from the one at 8; scales */
     {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24, 25, 26, 56, 57, 58, 59, 60, 61, 62, 63},
     {0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27}},
    {/* Q4_1: the second load at 16; scales, then mins */
     {2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23, 24, 25, 26, 27, 28, 29, 56, 57, 58, 59, 60, 61, 62, 63},
     {0, 0, 0, 0, 10, 10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30},
     {1, 1, 1, 1, 11, 11, 11, 11, 21, 21, 21, 21, 31, 31, 31, 31}},
};

INLINE void K(srow_q4)(DType t, const uint8_t *p, int n, const int8_t *x, int32_t *sums, float *scf, float *mins) {
    const int q41 = t == DT_Q4_1, bytes = q41 ? 20 : 18, second = q41 ? 16 : 8;
    const __m512i codes = _mm512_loadu_si512((const void *)K(Q4_WORDS)[q41][0]), m4 = _mm512_set1_epi8(0x0F);
    const __m512i at_scale = _mm512_loadu_si512((const void *)K(Q4_WORDS)[q41][1]);
    const __m512i at_min = _mm512_loadu_si512((const void *)K(Q4_WORDS)[1][2]);
    __m512i d[4], sw = _mm512_setzero_si512(), mw = _mm512_setzero_si512();
    UNROLL for (int g = 0; g < 4; g++) {
        int k = n - 4 * g; /* blocks in this group */
        if (k <= 0) {
            d[g] = _mm512_setzero_si512();
            continue;
        }
        const uint8_t *q = p + (size_t)(4 * g * bytes);
        const int8_t *xg = x + 128 * g;
        __m512i l0, l1;
        if (k >= 4) {
            l0 = _mm512_loadu_si512((const void *)q);
            l1 = _mm512_loadu_si512((const void *)(q + second));
        } else { /* the row's last 1-3 blocks: no further than they go (block 3 is the only one from l1) */
            l0 = _mm512_maskz_loadu_epi8((1ull << (bytes * k)) - 1, q);
            l1 = _mm512_setzero_si512();
        }
        __m512i v = _mm512_permutex2var_epi16(l0, codes, l1);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        d[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512((const void *)xg)), hi,
                                   _mm512_loadu_si512((const void *)(xg + 64)));
        sw = _mm512_mask_permutexvar_epi16(sw, (__mmask32)(0x1111u << g), at_scale, l0); /* block 4g + l to 4l + g */
        if (q41)
            mw = _mm512_mask_permutexvar_epi16(mw, (__mmask32)(0x1111u << g), at_min, l0);
    }
    __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[0], d[1]), _mm512_unpackhi_epi32(d[0], d[1]));
    __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[2], d[3]), _mm512_unpackhi_epi32(d[2], d[3]));
    _mm512_storeu_si512((void *)sums, _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23)));
    _mm512_storeu_ps(scf, _mm512_cvtph_ps(_mm512_castsi512_si256(sw)));
    if (q41) _mm512_storeu_ps(mins, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm512_castsi512_si256(mw))));
}

/* The activation row's bytes as K(srow_q4) reads them: per 4 blocks, the
 * first 16 of each block (64 bytes), then the last 16 of each. */
INLINE void K(srow_arrange)(const SimdActs *a, int nb, int8_t *xa) {
    const __m512i first = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), last = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
    for (int b = 0; b < nb; b += 4) {
        int bytes = 32 * (nb - b < 4 ? nb - b : 4);
        __m512i x0 = _mm512_maskz_loadu_epi8(bytes >= 64 ? ~0ull : (1ull << bytes) - 1, a->q + 32 * (size_t)b);
        __m512i x1 = bytes > 64 ? _mm512_maskz_loadu_epi8(bytes == 128 ? ~0ull : (1ull << (bytes - 64)) - 1, a->q + 32 * (size_t)b + 64)
                                : _mm512_setzero_si512();
        _mm512_storeu_si512((void *)(xa + 32 * (size_t)b), _mm512_permutex2var_epi64(x0, first, x1));
        _mm512_storeu_si512((void *)(xa + 32 * (size_t)b + 64), _mm512_permutex2var_epi64(x0, last, x1));
    }
}

/* Values [c, c + 16) of 16 rows (stride apart) turned into one vector per
 * value, lane j from row j: two K(transpose8)s. */
INLINE void K(srow_turn)(const void *rows, int stride, int c, __m512i *out) {
    const int32_t *r = rows;
    UNROLL for (int h = 0; h < 2; h++) {
        __m512i z[8];
        UNROLL for (int k = 0; k < 8; k++)
            z[k] = K(join)(_mm256_loadu_si256((const __m256i *)(r + (size_t)k * stride + c + 8 * h)),
                           _mm256_loadu_si256((const __m256i *)(r + (size_t)(k + 8) * stride + c + 8 * h)));
        K(transpose8)(z, out + 8 * h);
    }
}

/* The float update of K(pdot), per block, over the 16 rows in lanes. */
INLINE void K(srow_update)(DType t, float *y, const SimdActs *a, int nb, int cols, const K(RowSums) *rs) {
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < nb; c += 16) {
        __m512i sums[16], scales[16], mins[16];
        K(srow_turn)(rs->sums, rs->stride, c, sums);
        K(srow_turn)(rs->scf, rs->stride, c, scales);
        if (K(has_min)(t)) K(srow_turn)(rs->mins, rs->stride, c, mins);
        for (int r = 0; r < 16 && c + r < nb; r++) {
            int at = K(srow_at)(t, r);
            size_t si = 8 * (size_t)(c + r);
            __m512i lanes = _mm512_add_epi32(_mm512_set1_epi32(a->c[si]), sums[at]);
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_castsi512_ps(scales[at]), _mm512_set1_ps(a->s[si])),
                                  _mm512_cvtepi32_ps(lanes), acc);
            if (K(has_min)(t)) acc = _mm512_fnmadd_ps(_mm512_castsi512_ps(mins[at]), _mm512_set1_ps(a->m[si]), acc);
        }
    }
    _mm512_mask_storeu_ps(y, (__mmask16)((1u << cols) - 1), acc);
}

/* Outputs [o0, o0 + cols) of a batch of one row; x: the activation codes
 * as the type's chunk kernel reads them. Rows past cols repeat the last. */
INLINE void K(srow)(DType t, float *y, const SimdActs *a, const Tensor *w, int o0, int cols, const int8_t *x,
                    const K(RowSums) *rs) {
    const int nb = (int)(w->ne[0] / 32);
    const size_t bytes = K(q32_bytes)(t);
    const uint8_t *base = tensor_row(w, o0);
    for (int j = 0; j < PC_N; j++) { /* one row, one stream */
        const uint8_t *row = base + (size_t)(j < cols ? j : cols - 1) * w->row_bytes;
        size_t at = (size_t)j * rs->stride;
        for (int c = 0; c < nb; c += 16) {
            int n = nb - c < 16 ? nb - c : 16;
            const uint8_t *p = row + c * bytes;
            const int8_t *xc = x + 32 * (size_t)c;
            int32_t *s = rs->sums + at + c;
            float *f = rs->scf + at + c, *m = rs->mins ? rs->mins + at + c : NULL;
            if (t == DT_Q8_0) K(srow_q8)(p, n, xc, s, f);
            else if (n == 16) K(srow_q4)(t, p, 16, xc, s, f, m); /* a constant count: no masks */
            else K(srow_q4)(t, p, n, xc, s, f, m);
        }
    }
    K(srow_update)(t, y + o0, a, nb, cols, rs);
}

/* ---- a batch of one row, from tiles ----
 * With the matrix also laid out in tiles (tiles.h: 16 rows interleaved block
 * by block, as K(pack) would lay them out), one front-to-back read of a tile
 * feeds the 16 outputs directly: per block, each group of 4 code bytes of the
 * 16 rows is one vector, dotted with the activation's 4 bytes broadcast, and
 * the float update is K(pdot)'s for one row. Nothing to pack, nothing to turn
 * around: the same integer sums and float operations, so the same bits.
 * (K(pack_tiles) then K(pdot) per block computes the same, but ran at 0.7 of
 * this speed in cache: the pack went through memory.) */

/* acc + the dot products of w's 16 lanes of 4 bytes with x's 4 bytes. */
INLINE __m512i K(tdot)(__m512i acc, __m512i w, const int8_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(v));
}

INLINE void K(trow)(DType t, float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    const int nb = (int)(w->ne[0] / 32), groups = t == DT_Q8_0 ? 8 : 4;
    const size_t bb = tiles_block_bytes(t);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int o = c0; o < c1; o += PC_N) {
        const uint8_t *p = (const uint8_t *)w->tiles + (size_t)(o / PC_N) * nb * bb;
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++, p += bb) {
            const int8_t *x = a->q + 32 * (size_t)b;
            __m512i even = _mm512_set1_epi32(a->c[8 * (size_t)b]), odd = _mm512_setzero_si512(); /* two chains */
            if (t == DT_Q8_0) {
                UNROLL for (int g = 0; g < 8; g += 2) {
                    even = K(tdot)(even, _mm512_loadu_si512((const void *)(p + 64 * g)), x + 4 * g);
                    odd = K(tdot)(odd, _mm512_loadu_si512((const void *)(p + 64 * g + 64)), x + 4 * g + 4);
                }
            } else { /* low nibbles: elements 4g.., high ones: 16 + 4g.. */
                UNROLL for (int g = 0; g < 4; g++) {
                    __m512i u = _mm512_loadu_si512((const void *)(p + 64 * g));
                    even = K(tdot)(even, _mm512_and_si512(u, m4), x + 4 * g);
                    odd = K(tdot)(odd, _mm512_and_si512(_mm512_srli_epi16(u, 4), m4), x + 16 + 4 * g);
                }
            }
            const uint8_t *halves = p + 64 * (size_t)groups;
            size_t si = 8 * (size_t)b;
            acc = _mm512_fmadd_ps(_mm512_mul_ps(K(tile_halves)(halves), _mm512_set1_ps(a->s[si])),
                                  _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), acc);
            if (K(has_min)(t)) /* -m, as K(pack_block) */
                acc = _mm512_fnmadd_ps(_mm512_sub_ps(_mm512_setzero_ps(), K(tile_halves)(halves + 32)),
                                       _mm512_set1_ps(a->m[si]), acc);
        }
        int cols = c1 - o < PC_N ? c1 - o : PC_N;
        _mm512_mask_storeu_ps(y + o, (__mmask16)((1u << cols) - 1), acc);
    }
}

/* Outputs [c0, c1) for every row: per tile of 16 outputs, per run of
 * PC_BLOCKS blocks, pack once, then every row tile reads the pack. */
INLINE void K(pcols)(DType t, float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    int nb = (int)(a->in / 32), n = a->n;
    int64_t out = w->ne[1];
    if (t == DT_Q8_0 && n >= AMX_MIN_ROWS && w->tiles && c0 % PC_N == 0 && amx_usable()) { /* amx.h */
        amx_q8_0_cols(y, a, w, c0, c1);
        return;
    }
    if (n == 1 && w->tiles && c0 % PC_N == 0) { /* tiles: see K(trow) */
        K(trow)(t, y, a, w, c0, c1);
        return;
    }
    if (n == 1) { /* K(srow): per row its sums, scales (and mins); Q4's activation arranged */
        K(RowSums) rs = {.stride = (nb + 15) / 16 * 16};
        size_t per = PC_N * (size_t)rs.stride, arrays = K(has_min)(t) ? 3 : 2;
        bool q4 = t != DT_Q8_0;
        rs.sums = K(scratch)(4 * per * arrays + (q4 ? 32 * (size_t)rs.stride : 0));
        rs.scf = (float *)(void *)(rs.sums + per);
        rs.mins = K(has_min)(t) ? rs.scf + per : NULL;
        int8_t *x = a->q;
        if (q4) {
            x = (int8_t *)(void *)(rs.scf + per * (arrays - 1));
            K(srow_arrange)(a, nb, x);
        }
        for (int o = c0; o < c1; o += PC_N) K(srow)(t, y, a, w, o, c1 - o < PC_N ? c1 - o : PC_N, x, &rs);
        free(rs.sums);
        return;
    }
    __m512i *p = K(scratch)(sizeof(__m512i) * PC_VECS * PC_BLOCKS);
    for (int o = c0; o < c1; o += PC_N) {
        int cols = c1 - o < PC_N ? c1 - o : PC_N;
        __mmask16 mask = (__mmask16)((1u << cols) - 1);
        for (int b0 = 0; b0 < nb; b0 += PC_BLOCKS) {
            int b1 = b0 + PC_BLOCKS < nb ? b0 + PC_BLOCKS : nb;
            K(pack)(t, w, o, cols, c1, b0, b1, p);
            K(ptiles)(t, y + o, a, p, b0, b1, out, n, mask);
        }
    }
    free(p);
}
#define PCOLS(name, type) \
    static void K(pcols_##name)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) { K(pcols)(type, y, a, w, c0, c1); }
PCOLS(q8_0, DT_Q8_0)
PCOLS(q4_0, DT_Q4_0)
PCOLS(q4_1, DT_Q4_1)
#undef PCOLS
#else
/* ---- Q4_0 and Q8_0 on AVX2, column-packed ----
 * The chunk kernels give each output 8 float lanes and pay a dot product,
 * a widening add, a conversion, a scale and an FMA per output and per
 * block of 32. As on AVX-512, one vector holds 8 outputs here: the codes of
 * 8 rows of W are packed (transposed by 4-byte groups), an activation row's
 * 4 bytes are broadcast, and vpmaddubsw makes 16-bit pairs of products for
 * each output. Q4_0's codes are at most 15 and |x| <= 128, so the 8 groups
 * of a block add up exactly in 16 bits (at most 8 * 2 * 15 * 128 = 30720)
 * and one vpmaddwd a block brings each output's 32 products to an int32
 * lane; Q8_0 keeps |w| and puts w's signs on x (K(signed_w)), whose pairs
 * reach 2 * 128 * 127 (a file may hold -128) and are widened group by
 * group. Either way the float work is one update per output and per block,
 * as AVX-512's K(pdot):
 *   acc = fma(w_scale * x_scale, (float)block_sum, acc)
 * The same for every n, so a row's result does not depend on its batch. */

/* The 16 bytes at blk[j] + at of 8 outputs as 4 vectors, vector g holding
 * bytes 4g..4g+3 of each output, outputs 0-3 in the lower half, 4-7 in the
 * upper: a 4x4 transpose of dwords in each half. */
INLINE void K(dwords)(const uint8_t *const *blk, int at, __m256i *u) {
    __m256i a[4];
    UNROLL for (int k = 0; k < 4; k++)
        a[k] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(blk[k + 4] + at)), _mm_loadu_si128((const __m128i *)(blk[k] + at)));
    __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    u[0] = _mm256_unpacklo_epi64(t0, t2);
    u[1] = _mm256_unpackhi_epi64(t0, t2);
    u[2] = _mm256_unpacklo_epi64(t1, t3);
    u[3] = _mm256_unpackhi_epi64(t1, t3);
}

INLINE void K(iq4xs_pack)(const uint8_t *const *blk, __m256i *dst);
INLINE void K(q4k_pack)(const uint8_t *const *blk, __m256i *dst);

/* One block of 8 outputs, output j's at blk[j]. Vector g < 8 is dotted with
 * x's bytes 4g..4g+3: Q4_0's byte i holds element i (low nibble) and i + 16
 * (high), so its vectors 0-3 are the low nibbles and 4-7 the high ones.
 * (IQ4_XS and Q4_K: a super-block, below.) */
INLINE void K(pack_block)(DType t, const uint8_t *bb, const size_t *off, __m256i *dst) {
    const uint8_t *blk[PC_N];
    UNROLL for (int j = 0; j < PC_N; j++) blk[j] = bb + off[j];
    if (K(sb_packed)(t)) {
        if (t == DT_IQ4_XS) K(iq4xs_pack)(blk, dst);
        else K(q4k_pack)(blk, dst);
        return;
    }
    if (t == DT_Q8_0) {
        K(dwords)(blk, 2, dst + 9);
        K(dwords)(blk, 18, dst + 13);
        UNROLL for (int g = 0; g < 8; g++) dst[g] = _mm256_sign_epi8(dst[9 + g], dst[9 + g]);
    } else {
        __m256i u[4];
        K(dwords)(blk, 2, u);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        UNROLL for (int g = 0; g < 4; g++) {
            dst[g] = _mm256_and_si256(u[g], m4);
            dst[g + 4] = _mm256_and_si256(_mm256_srli_epi16(u[g], 4), m4);
        }
    }
    uint16_t h[PC_N];
    UNROLL for (int j = 0; j < PC_N; j++) memcpy(&h[j], blk[j], 2);
    dst[8] = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
}

/* Units [b0, b1) of outputs [o0, o0 + cols) packed into dst,
 * K(pack_vecs)(t) vectors a unit (lanes past cols repeat the last output:
 * never stored), asking on the way for the next tile's rows, a share per unit. */
INLINE void K(pack)(DType t, const Tensor *w, int o0, int cols, int c1, int b0, int b1, __m256i *dst) {
    K(PackSrc) src;
    size_t off[PC_N];
    K(pack_src)(t, w, o0, cols, c1, &src, off);
    for (int b = b0; b < b1; b++, dst += K(pack_vecs)(t)) K(pack_at)(t, &src, off, b, dst);
}

/* x's 4 bytes in every lane. */
INLINE __m256i K(x4)(const int8_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
}

INLINE void K(iq4xs_pdot)(int R, __m256 *acc, const SimdActs *a, const __m256i *p, int sb, int i0);
INLINE void K(q4k_pdot)(int R, __m256 *acc, const SimdActs *a, const __m256i *p, int sb, int i0);

/* Block b (IQ4_XS, Q4_K: super-block b) of packed p into acc[r], rows i0 .. i0 + R. */
INLINE void K(pdot)(DType t, int R, __m256 *acc, const SimdActs *a, const __m256i *p, int b, int i0) {
    if (K(sb_packed)(t)) {
        if (t == DT_IQ4_XS) K(iq4xs_pdot)(R, acc, a, p, b, i0);
        else K(q4k_pdot)(R, acc, a, p, b, i0);
        return;
    }
    __m256i sum[PC_R];
    const int8_t *x[PC_R];
    const __m256i ones = _mm256_set1_epi16(1);
    UNROLL for (int r = 0; r < R; r++) {
        x[r] = a->q + (size_t)(i0 + r) * a->q_stride + 32 * (size_t)b;
        sum[r] = _mm256_setzero_si256();
    }
    if (t == DT_Q8_0) { /* int32 lanes */
        UNROLL for (int g = 0; g < 8; g++)
            UNROLL for (int r = 0; r < R; r++) {
                __m256i xs = _mm256_sign_epi8(K(x4)(x[r] + 4 * g), p[9 + g]);
                sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(p[g], xs), ones));
                KEEP_CHAIN(sum[r]);
            }
    } else { /* 16-bit pairs, then one widening */
        UNROLL for (int g = 0; g < 4; g++) {
            UNROLL for (int r = 0; r < R; r++) sum[r] = _mm256_add_epi16(sum[r], _mm256_maddubs_epi16(p[g], K(x4)(x[r] + 4 * g)));
            UNROLL for (int r = 0; r < R; r++) {
                sum[r] = _mm256_add_epi16(sum[r], _mm256_maddubs_epi16(p[g + 4], K(x4)(x[r] + 16 + 4 * g)));
                KEEP_CHAIN(sum[r]);
            }
        }
        UNROLL for (int r = 0; r < R; r++) sum[r] = _mm256_madd_epi16(sum[r], ones);
    }
    __m256 sc = _mm256_castsi256_ps(p[8]);
    UNROLL for (int r = 0; r < R; r++) {
        size_t si = (size_t)(i0 + r) * a->s_stride + 8 * (size_t)b;
        __m256i lanes = _mm256_add_epi32(_mm256_set1_epi32(a->c[si]), sum[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc, _mm256_set1_ps(a->s[si])), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
}

/* Rows i0 .. i0 + R of the packed blocks [b0, b1): acc[r] is y[i0 + r, o0 ..
 * o0 + 8), kept in y between calls (zero before the first). */
INLINE void K(ptile)(DType t, int R, float *y, const SimdActs *a, const VI *p, int b0, int b1, int64_t out, int i0,
                     K(PMask) mask, bool first) {
    __m256 acc[PC_R];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y + (size_t)(i0 + r) * out, mask);
    for (int b = b0; b < b1; b++, p += K(pack_vecs)(t)) K(pdot)(t, R, acc, a, p, b, i0);
    UNROLL for (int r = 0; r < R; r++) _mm256_maskstore_ps(y + (size_t)(i0 + r) * out, mask, acc[r]);
}

/* ---- Q8_0 with one activation row, a few weight rows at a time ----
 * Reading the 8 rows of a tile side by side, as K(pack) does, made Q8_0's
 * decode a fifth slower than the chunk kernels (its blocks are 34 bytes,
 * twice Q4_0's). So here the rows of the tile are read two by two: per
 * block the exact sum of its 32 products, 8 blocks reduced to one vector
 * (K(block_totals)), kept with the blocks' scales. Then the 8 rows'
 * vectors are turned around (K(turn8)), one vector per block with the 8
 * outputs in lanes, and the float update runs per block as K(pdot) does it:
 * the same integers and float operations in the same order, so the bits are
 * those of any batch. */

/* 8 vectors of 8 lanes transposed in place: out[k] lane j = in[j] lane k. */
INLINE void K(turn8)(__m256 *v) {
    __m256 t[8], u[8];
    UNROLL for (int j = 0; j < 8; j += 2) {
        t[j] = _mm256_unpacklo_ps(v[j], v[j + 1]);
        t[j + 1] = _mm256_unpackhi_ps(v[j], v[j + 1]);
    }
    UNROLL for (int j = 0; j < 8; j += 4) {
        u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
        u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
        u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
        u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
    }
    UNROLL for (int k = 0; k < 4; k++) {
        v[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
        v[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
    }
}

#define Q8_ROWS 2 /* rows read side by side: 2 and 4 were as fast, 1 slower (asking ahead) */
/* Q8_ROWS rows of a tile: their block sums and scales, 8 blocks to a
 * vector, asking for the next tile's rows on the way. */
INLINE void K(q8_row_sums)(const uint8_t *const *row, int nb, const int8_t *x, int32_t *const *sums,
                           float *const *scf, const char *ahead, size_t lines, size_t *line, size_t per) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int b0 = 0; b0 < nb; b0 += 8) {
        if (lines) K(ask)(ahead, lines, line, per, (Q8_ROWS * 272 + 63) / 64); /* Q8_ROWS rows' 8 blocks */
        __m256i v[Q8_ROWS][8];
        uint16_t h[Q8_ROWS][8] = {{0}};
        UNROLL for (int k = 0; k < 8; k++) {
            if (b0 + k >= nb) {
                UNROLL for (int j = 0; j < Q8_ROWS; j++) v[j][k] = _mm256_setzero_si256();
                continue;
            }
            __m256i xv = _mm256_loadu_si256((const __m256i *)(x + 32 * (size_t)(b0 + k)));
            UNROLL for (int j = 0; j < Q8_ROWS; j++) {
                const uint8_t *blk = row[j] + (size_t)(b0 + k) * 34;
                __m256i wv = _mm256_loadu_si256((const __m256i *)(blk + 2));
                v[j][k] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv)), ones);
                memcpy(&h[j][k], blk, 2);
            }
        }
        UNROLL for (int j = 0; j < Q8_ROWS; j++) {
            _mm256_storeu_si256((__m256i *)(sums[j] + b0), K(block_totals)(v[j]));
            _mm256_storeu_ps(scf[j] + b0, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h[j])));
        }
    }
}

/* Outputs [c0, c1) of a batch of one row, Q8_0. */
INLINE void K(q8_row)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    const int nb = (int)(w->ne[0] / 32), stride = (nb + 7) / 8 * 8;
    int32_t *sums = K(scratch)(2 * sizeof(float) * PC_N * (size_t)stride);
    float *scf = (float *)(void *)(sums + PC_N * (size_t)stride);
    for (int o = c0; o < c1; o += PC_N) {
        int cols = c1 - o < PC_N ? c1 - o : PC_N;
        size_t lines, line = 0;
        const char *ahead = K(ahead)(w, o + PC_N, PC_N, c1, &lines);
        size_t steps = (size_t)(stride / 8 * PC_N / Q8_ROWS), per = (lines + steps - 1) / steps;
        for (int j = 0; j < PC_N; j += Q8_ROWS) {
            const uint8_t *row[Q8_ROWS];
            int32_t *su[Q8_ROWS];
            float *sf[Q8_ROWS];
            UNROLL for (int i = 0; i < Q8_ROWS; i++) {
                row[i] = tensor_row(w, o + (j + i < cols ? j + i : cols - 1));
                su[i] = sums + (size_t)(j + i) * stride;
                sf[i] = scf + (size_t)(j + i) * stride;
            }
            K(q8_row_sums)(row, nb, a->q, su, sf, ahead, lines, &line, per);
        }
        __m256 acc = _mm256_setzero_ps();
        for (int b0 = 0; b0 < nb; b0 += 8) {
            __m256 s8[8], f8[8];
            UNROLL for (int j = 0; j < 8; j++) {
                s8[j] = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(sums + (size_t)j * stride + b0)));
                f8[j] = _mm256_loadu_ps(scf + (size_t)j * stride + b0);
            }
            K(turn8)(s8);
            K(turn8)(f8);
            for (int k = 0; k < 8 && b0 + k < nb; k++)
                acc = _mm256_fmadd_ps(_mm256_mul_ps(f8[k], _mm256_set1_ps(a->s[8 * (size_t)(b0 + k)])), s8[k], acc);
        }
        _mm256_maskstore_ps(y + o, _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), acc);
    }
    free(sums);
}

/* Outputs [c0, c1) for every row: per tile of 8 outputs, per run of
 * PC_BLOCKS blocks (2 super-blocks), pack once, then every row tile reads
 * the pack. One row takes its own paths, for blocks of 32 only. */
INLINE void K(pcols)(DType t, float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    int nb = (int)(a->in / 32), n = a->n;
    int64_t out = w->ne[1];
    if (n == 1 && t == DT_Q8_0) { /* see K(q8_row) */
        K(q8_row)(y, a, w, c0, c1);
        return;
    }
    if (n == 1 && !K(sb_packed)(t)) { /* Q4_0: each block packed into registers and used at once, the same operations */
        for (int o = c0; o < c1; o += PC_N) {
            int cols = c1 - o < PC_N ? c1 - o : PC_N;
            K(PackSrc) src;
            size_t off[PC_N];
            K(pack_src)(t, w, o, cols, c1, &src, off);
            __m256 acc = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++) {
                __m256i pk[PC_VECS];
                K(pack_at)(t, &src, off, b, pk);
                K(pdot)(t, 1, &acc, a, pk, b, 0);
            }
            _mm256_maskstore_ps(y + o, _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), acc);
        }
        return;
    }
    int units = (int)(a->in / K(pack_unit)(t)), run = PC_BLOCKS * 32 / K(pack_unit)(t);
    __m256i *p = K(scratch)(sizeof(__m256i) * (size_t)(K(pack_vecs)(t) * run));
    for (int o = c0; o < c1; o += PC_N) {
        int cols = c1 - o < PC_N ? c1 - o : PC_N;
        __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int b0 = 0; b0 < units; b0 += run) {
            int b1 = b0 + run < units ? b0 + run : units;
            K(pack)(t, w, o, cols, c1, b0, b1, p);
            K(ptiles)(t, y + o, a, p, b0, b1, out, n, mask);
        }
    }
    free(p);
}
/* ---- IQ4_XS on AVX2, column-packed, for 8 rows or more ----
 * K(iq4xs_tile) pays, per row, output and block, a sign, a product, a
 * scaled widening and an add, and decodes its 2 weight rows again for every
 * 4 activation rows. Here the super-blocks of 8 outputs are decoded once
 * into a pack, as Q8_0's blocks are (|w| and w, by 4-byte groups), with
 * each block's scale in both int16 halves of its output's lane, so that
 * the widening multiplies by it. The super-block's integer sum is exact
 * either way, and so is the float update, one per output and super-block:
 *   acc = fma(w_d * x_d, (float)sum, acc)
 * which K(iq4xs_tile) does lane by lane: the bits do not depend on the path. */

/* The super-block of 8 outputs, output j's at blk[j], into dst[IQ_VECS]. */
INLINE void K(iq4xs_pack)(const uint8_t *const *blk, __m256i *dst) {
    int32_t sc[8][PC_N];
    uint16_t h[PC_N];
    UNROLL for (int k = 0; k < PC_N; k++) {
        memcpy(&h[k], blk[k], 2);
        for (int j = 0; j < 8; j++) sc[j][k] = (int32_t)((uint32_t)(uint16_t)dtype_scale_iq4_xs(j, blk[k]) * 0x10001u);
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    UNROLL for (int j = 0; j < 8; j++, dst += 17) { /* as Q4_0: groups 0-3 low nibbles, 4-7 high */
        __m256i u[4];
        K(dwords)(blk, 8 + 16 * j, u);
        UNROLL for (int g = 0; g < 4; g++) {
            dst[9 + g] = K(iq4_lookup)(_mm256_and_si256(u[g], m4));
            dst[13 + g] = K(iq4_lookup)(_mm256_and_si256(_mm256_srli_epi16(u[g], 4), m4));
        }
        UNROLL for (int g = 0; g < 8; g++) dst[g] = _mm256_sign_epi8(dst[9 + g], dst[9 + g]);
        dst[8] = _mm256_loadu_si256((const __m256i *)sc[j]);
    }
    dst[0] = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
}

/* Super-block sb of packed p into acc[r], rows i0 .. i0 + R. Pairs reach
 * 2 * 127 * 127, so each group is widened (times its block's scale) alone. */
INLINE void K(iq4xs_pdot)(int R, __m256 *acc, const SimdActs *a, const __m256i *p, int sb, int i0) {
    __m256i sum[PC_R];
    const int8_t *x[PC_R];
    UNROLL for (int r = 0; r < R; r++) {
        x[r] = a->q + (size_t)(i0 + r) * a->q_stride + 256 * (size_t)sb;
        sum[r] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; j++, p += 17) {
#if SIMD_VNNI /* a block's 32 products per lane by vpdpbusd, then times its scale once */
        __m256i bs[PC_R];
        UNROLL for (int r = 0; r < R; r++) bs[r] = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g++)
            UNROLL for (int r = 0; r < R; r++)
                bs[r] = _mm256_dpbusd_epi32(bs[r], p[g], _mm256_sign_epi8(K(x4)(x[r] + 32 * j + 4 * g), p[9 + g]));
        const __m256i scale = _mm256_srai_epi32(p[8], 16);
        UNROLL for (int r = 0; r < R; r++) sum[r] = _mm256_add_epi32(sum[r], _mm256_mullo_epi32(bs[r], scale));
#else
        UNROLL for (int g = 0; g < 8; g++)
            UNROLL for (int r = 0; r < R; r++) {
                __m256i xs = _mm256_sign_epi8(K(x4)(x[r] + 32 * j + 4 * g), p[9 + g]);
                sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(p[g], xs), p[8]));
                KEEP_CHAIN(sum[r]);
            }
#endif
    }
    __m256 d = _mm256_castsi256_ps(p[0]);
    UNROLL for (int r = 0; r < R; r++) {
        __m256 xd = _mm256_set1_ps(a->s[(size_t)(i0 + r) * a->s_stride + (size_t)sb]);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(sum[r]), acc[r]);
    }
}

/* ---- Q4_K on AVX2, column-packed, for 8 rows or more ----
 * As IQ4_XS: 8 outputs' super-blocks decoded once into a pack, each
 * block's scale and min in both int16 halves of its output's lane. The
 * codes are at most 15, so a block's 8 groups add up exactly in 16 bits,
 * as Q4_0's, and one vpmaddwd per block multiplies by the scale. The
 * super-block's two integer sums are K(q4k_tile)'s, and so are the float
 * updates, one pair per output and super-block:
 *   acc = fma(d * x_d, (float)sum, acc); acc = fnma(dmin * x_d, (float)msum, acc) */

/* The super-block of 8 outputs, output j's at blk[j], into dst[K4_VECS]. */
INLINE void K(q4k_pack)(const uint8_t *const *blk, __m256i *dst) {
    int32_t sc[8][PC_N], mn[8][PC_N];
    uint16_t h[2][PC_N];
    UNROLL for (int k = 0; k < PC_N; k++) {
        uint8_t s8[8], m8[8];
        K(k4_scales_mins)(blk[k] + 4, s8, m8);
        for (int j = 0; j < 8; j++) {
            sc[j][k] = (int32_t)s8[j] * 0x10001;
            mn[j][k] = (int32_t)m8[j] * 0x10001;
        }
        memcpy(&h[0][k], blk[k], 2);
        memcpy(&h[1][k], blk[k] + 2, 2);
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    UNROLL for (int k = 0; k < 4; k++, dst += 20) { /* blocks 2k (low nibbles) and 2k + 1 (high) */
        __m256i u[8];
        K(dwords)(blk, 16 + 32 * k, u);
        K(dwords)(blk, 32 + 32 * k, u + 4);
        UNROLL for (int g = 0; g < 8; g++) {
            dst[g] = _mm256_and_si256(u[g], m4);
            dst[10 + g] = _mm256_and_si256(_mm256_srli_epi16(u[g], 4), m4);
        }
        dst[8] = _mm256_loadu_si256((const __m256i *)sc[2 * k]);
        dst[9] = _mm256_loadu_si256((const __m256i *)mn[2 * k]);
        dst[18] = _mm256_loadu_si256((const __m256i *)sc[2 * k + 1]);
        dst[19] = _mm256_loadu_si256((const __m256i *)mn[2 * k + 1]);
    }
    dst[0] = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h[0])));
    dst[1] = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h[1])));
}

/* Super-block sb of packed p into acc[r], rows i0 .. i0 + R. */
INLINE void K(q4k_pdot)(int R, __m256 *acc, const SimdActs *a, const __m256i *p, int sb, int i0) {
    __m256i sum[PC_R], msum[PC_R];
    const int8_t *x[PC_R];
    const int16_t *xs[PC_R]; /* the 16 sums of 16 activations */
    UNROLL for (int r = 0; r < R; r++) {
        x[r] = a->q + (size_t)(i0 + r) * a->q_stride + 256 * (size_t)sb;
        xs[r] = (const int16_t *)(a->c + (size_t)(i0 + r) * a->s_stride) + 16 * sb;
        sum[r] = msum[r] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; j++, p += 10) {
#if SIMD_VNNI
        __m256i bs[PC_R];
        UNROLL for (int r = 0; r < R; r++) bs[r] = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g++)
            UNROLL for (int r = 0; r < R; r++) bs[r] = _mm256_dpbusd_epi32(bs[r], p[g], K(x4)(x[r] + 32 * j + 4 * g));
        const __m256i scale = _mm256_srai_epi32(p[8], 16);
        UNROLL for (int r = 0; r < R; r++) {
            sum[r] = _mm256_add_epi32(sum[r], _mm256_mullo_epi32(bs[r], scale));
#else
        __m256i s16[PC_R];
        UNROLL for (int r = 0; r < R; r++) s16[r] = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g++)
            UNROLL for (int r = 0; r < R; r++) {
                s16[r] = _mm256_add_epi16(s16[r], _mm256_maddubs_epi16(p[g], K(x4)(x[r] + 32 * j + 4 * g)));
                KEEP_CHAIN(s16[r]);
            }
        UNROLL for (int r = 0; r < R; r++) {
            sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(s16[r], p[8]));
#endif
            /* the block's two sums of 16 side by side, times its min in both halves */
            msum[r] = _mm256_add_epi32(msum[r], _mm256_madd_epi16(p[9], K(x4)((const int8_t *)(xs[r] + 2 * j))));
        }
    }
    __m256 d = _mm256_castsi256_ps(p[0]), dmin = _mm256_castsi256_ps(p[1]);
    UNROLL for (int r = 0; r < R; r++) {
        __m256 xd = _mm256_set1_ps(a->s[(size_t)(i0 + r) * a->s_stride + (size_t)sb]);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(sum[r]), acc[r]);
        acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(msum[r]), acc[r]);
    }
}

static void K(pcols_q8_0)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) { K(pcols)(DT_Q8_0, y, a, w, c0, c1); }
static void K(pcols_q4_0)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) { K(pcols)(DT_Q4_0, y, a, w, c0, c1); }
#endif

/* One instance of the kernels per weight type, each with its decoding inlined. */
#define QCOLS(name, type) \
    static void K(qcols_##name)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) { K(qcols)(type, y, a, w, c0, c1); }
#if !SIMD_512 /* Q4_1 on AVX2 (Q8_0, Q4_0 and AVX-512's Q4_1: K(pcols)) */
QCOLS(q4_1, DT_Q4_1)
#endif
QCOLS(q4_k, DT_Q4_K)
QCOLS(q5_0, DT_Q5_0)
QCOLS(q5_1, DT_Q5_1)
QCOLS(iq4_nl, DT_IQ4_NL)
QCOLS(q2_k, DT_Q2_K)
QCOLS(q3_k, DT_Q3_K)
QCOLS(q5_k, DT_Q5_K)
QCOLS(q6_k, DT_Q6_K)
QCOLS(iq4_xs, DT_IQ4_XS)
#if !SIMD_512
/* IQ4_XS and Q4_K: the pack with 8 rows or more, else the tiles; the same bits. */
static void K(cols_iq4_xs)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    if (a->n >= SB_MIN_ROWS) K(pcols)(DT_IQ4_XS, y, a, w, c0, c1);
    else K(qcols_iq4_xs)(y, a, w, c0, c1);
}
static void K(cols_q4_k)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    if (a->n >= SB_MIN_ROWS) K(pcols)(DT_Q4_K, y, a, w, c0, c1);
    else K(qcols_q4_k)(y, a, w, c0, c1);
}
#endif
#undef QCOLS

static void K(matmul_cols)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    switch (w->type) {
    case DT_F32: K(fcols_f32)(y, a->x, w, a->n, c0, c1); break;
    case DT_F16: K(fcols_f16)(y, a->x, w, a->n, c0, c1); break;
    case DT_BF16: K(fcols_bf16)(y, a->x, w, a->n, c0, c1); break;
#if SIMD_512
    case DT_Q8_0: K(pcols_q8_0)(y, a, w, c0, c1); break;
    case DT_Q4_0: K(pcols_q4_0)(y, a, w, c0, c1); break;
    case DT_Q4_1: K(pcols_q4_1)(y, a, w, c0, c1); break;
#else
    case DT_Q8_0: K(pcols_q8_0)(y, a, w, c0, c1); break;
    case DT_Q4_0: K(pcols_q4_0)(y, a, w, c0, c1); break;
    case DT_Q4_1: K(qcols_q4_1)(y, a, w, c0, c1); break;
    case DT_IQ4_XS: K(cols_iq4_xs)(y, a, w, c0, c1); break;
    case DT_Q4_K: K(cols_q4_k)(y, a, w, c0, c1); break;
#endif
#if SIMD_512
    case DT_Q4_K: K(qcols_q4_k)(y, a, w, c0, c1); break;
#endif
    case DT_Q5_0: K(qcols_q5_0)(y, a, w, c0, c1); break;
    case DT_Q5_1: K(qcols_q5_1)(y, a, w, c0, c1); break;
    case DT_IQ4_NL: K(qcols_iq4_nl)(y, a, w, c0, c1); break;
    case DT_Q2_K: K(qcols_q2_k)(y, a, w, c0, c1); break;
    case DT_Q3_K: K(qcols_q3_k)(y, a, w, c0, c1); break;
    case DT_Q5_K: K(qcols_q5_k)(y, a, w, c0, c1); break;
    case DT_Q6_K: K(qcols_q6_k)(y, a, w, c0, c1); break;
#if SIMD_512
    case DT_IQ4_XS: K(qcols_iq4_xs)(y, a, w, c0, c1); break;
#endif
    default: scalar_matmul_rows(y, a->x, w, a->n, c0, c1); break; /* loaders reject other types */
    }
}

/* ---- attention -------------------------------------------------------------- */

/* q . k over head_dim = nv * VF_N floats: one accumulator, in order. */
INLINE float K(dot)(const float *q, const float *k, int nv) {
    VF acc = VF_ZERO();
    for (int v = 0; v < nv; v++) acc = VF_FMA(VF_LOAD(q + v * VF_N), VF_LOAD(k + v * VF_N), acc);
    return K(hsum)(acc);
}

/* Heads that share a kv head are attended together (GQA), up to ATT_H of
 * them: each key and value row is read once for all of them. */
#define ATT_H 2
/* Value vectors summed per pass: as many accumulators as the registers hold. */
#define ATT_V (SIMD_512 ? 8 : 4)
/* Keys asked for this many positions ahead (values half as many): a head's
 * rows are kv_dim floats apart (4 KB in Qwen3-0.6B), and the hardware's own
 * prefetch stops at each 4 KB. ATT_LINE: floats in a cache line. */
#define ATT_AHEAD 8
#define ATT_LINE 16

/* Four keys against nh heads' queries (q, q + qs), each (head, key) pair with
 * its own accumulator: the same as 4 * nh K(dot). */
INLINE void K(dot4)(const float *q, size_t qs, int nh, const float *k, size_t stride, int nv, float *out,
                    size_t os) {
    VF a[ATT_H][4];
    UNROLL for (int h = 0; h < ATT_H; h++) UNROLL for (int u = 0; u < 4; u++) a[h][u] = VF_ZERO();
    for (int v = 0; v < nv; v++) {
        VF kv[4];
        UNROLL for (int u = 0; u < 4; u++) kv[u] = VF_LOAD(k + u * stride + v * VF_N);
        UNROLL for (int h = 0; h < ATT_H; h++) if (h < nh) {
            VF qv = VF_LOAD(q + h * qs + v * VF_N);
            UNROLL for (int u = 0; u < 4; u++) a[h][u] = VF_FMA(qv, kv[u], a[h][u]);
        }
    }
    UNROLL for (int h = 0; h < ATT_H; h++) if (h < nh) UNROLL for (int u = 0; u < 4; u++) out[h * os + u] = K(hsum)(a[h][u]);
}

/* out[h][d0 .. d0 + m*VF_N) = sum over positions t in order of p[h][t] * v_t,
 * for nh heads (out + h * hd, p + h * ps), m <= ATT_V vectors at a time: each
 * lane sums its own position sequence. */
INLINE void K(weigh_values)(float *out, size_t hd, const float *p, size_t ps, int nh, const KvSpan *spans,
                            int n_spans, size_t off, int m, const float *inv, size_t kv_dim) {
    VF a[ATT_H][ATT_V];
    UNROLL for (int h = 0; h < ATT_H; h++) UNROLL for (int u = 0; u < ATT_V; u++) a[h][u] = VF_ZERO();
    int j = 0;
    for (int sp = 0; sp < n_spans; sp++)
        for (int t = 0; t < spans[sp].n; t++, j++) {
            const float *v = spans[sp].v + (size_t)t * kv_dim + off;
            if (t + ATT_AHEAD / 2 < spans[sp].n)
                UNROLL for (int u = 0; u < ATT_V; u++) if (u < m) _mm_prefetch((const char *)(v + ATT_AHEAD / 2 * kv_dim + u * VF_N), _MM_HINT_T0);
            UNROLL for (int h = 0; h < ATT_H; h++) if (h < nh) {
                VF pj = VF_SET1(p[h * ps + j]);
                UNROLL for (int u = 0; u < ATT_V; u++)
                    if (u < m) a[h][u] = VF_FMA(pj, VF_LOAD(v + u * VF_N), a[h][u]);
            }
        }
    UNROLL for (int h = 0; h < ATT_H; h++) if (h < nh) {
        VF vinv = VF_SET1(inv[h]);
        UNROLL for (int u = 0; u < ATT_V; u++)
            if (u < m) VF_STORE(out + h * hd + u * VF_N, VF_MUL(a[h][u], vinv));
    }
}

/* scores[0 .. n) scaled and turned into exp(score - max); returns 1 / their
 * sum, summed in position order. */
static float K(softmax_scores)(float *scores, int n, float scale) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        scores[i] *= scale;
        if (scores[i] > max) max = scores[i];
    }
    for (int i = 0; i < n; i++) scores[i] -= max;
    fexp_array(scores, scores, (size_t)n);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += scores[i];
    return 1.0f / sum;
}

/* Heads h .. h + nh - 1, which share one kv head; scores: nh rows of total. */
static void K(attend_heads)(float *out, const float *q, const KvSpan *spans, int n_spans, AttnShape s, int h, int nh,
                            float *scores, size_t total) {
    int hd = s.head_dim, nv = hd / VF_N;
    size_t kv_dim = (size_t)s.n_kv_heads * hd;
    size_t g = (size_t)(h / (s.n_heads / s.n_kv_heads)) * hd; /* GQA: these heads' kv head */
    int j = 0;
    for (int sp = 0; sp < n_spans; sp++) {
        const float *k = spans[sp].k + g;
        int n = spans[sp].n, t = 0;
        for (; t + 4 <= n; t += 4) {
            for (int u = ATT_AHEAD; u < ATT_AHEAD + 4 && t + u < n; u++)
                for (int l = 0; l < hd; l += ATT_LINE) _mm_prefetch((const char *)(k + (size_t)(t + u) * kv_dim + l), _MM_HINT_T0);
            if (nh == ATT_H) K(dot4)(q, (size_t)hd, ATT_H, k + (size_t)t * kv_dim, kv_dim, nv, scores + j + t, total);
            else K(dot4)(q, (size_t)hd, nh, k + (size_t)t * kv_dim, kv_dim, nv, scores + j + t, total);
        }
        for (; t < n; t++)
            for (int e = 0; e < nh; e++) scores[e * total + j + t] = K(dot)(q + (size_t)e * hd, k + (size_t)t * kv_dim, nv);
        j += n;
    }
    float inv[ATT_H];
    for (int e = 0; e < nh; e++) inv[e] = K(softmax_scores)(scores + e * total, j, 1.0f / sqrtf((float)hd));
    for (int v = 0; v < nv; v += ATT_V) {
        float *o = out + v * VF_N;
        size_t off = g + (size_t)v * VF_N;
        if (nv - v >= ATT_V && nh == ATT_H) /* the usual case, its counts constants */
            K(weigh_values)(o, (size_t)hd, scores, total, ATT_H, spans, n_spans, off, ATT_V, inv, kv_dim);
        else K(weigh_values)(o, (size_t)hd, scores, total, nh, spans, n_spans, off, nv - v < ATT_V ? nv - v : ATT_V, inv, kv_dim);
    }
}

static void K(attention_heads)(float *out, const float *q, const KvSpan *spans, int n_spans, AttnShape s, int h0,
                               int h1) {
    if (s.head_dim % VF_N != 0) { /* odd head sizes: the scalar kernel, still one fixed order */
        scalar_attention_heads(out, q, spans, n_spans, s, h0, h1);
        return;
    }
    size_t total = 0;
    for (int i = 0; i < n_spans; i++) total += (size_t)spans[i].n;
    float *scores = xmalloc(sizeof(float) * ATT_H * (total > 0 ? total : 1));
    int group = s.n_heads / s.n_kv_heads;
    for (int h = h0; h < h1;) {
        int nh = 1; /* the next heads of h's group, up to ATT_H */
        while (nh < ATT_H && h + nh < h1 && (h + nh) / group == h / group) nh++;
        K(attend_heads)(out + (size_t)h * s.head_dim, q + (size_t)h * s.head_dim, spans, n_spans, s, h, nh, scores,
                        total);
        h += nh;
    }
    free(scores);
}

static const SimdKernels K(kernels) = {
    .isa = SIMD_512 ? "avx512" : SIMD_VNNI ? "avx2vnni" : "avx2",
    .qblocks = QB,
    .ftile_cols = FT_C,
    .qtile_cols = PC_N, /* thread ranges in whole packed tiles (a multiple of QT_C) */
    .tiles = SIMD_512,
    .prepare_rows = K(prepare_rows),
    .matmul_cols = K(matmul_cols),
    .attention_heads = K(attention_heads),
};

#if SIMD_512
/* ---- BF16 weights on AVX512-BF16 (the "avx512bf16" build) ----------------
 * As llama.cpp does, each activation row is rounded to BF16 once (prepare),
 * so that vdpbf16ps can multiply 32 weights by 32 activations and add the
 * products, pair by pair, into 16 float lanes: twice the products of one FMA
 * instruction, and no widening of the weights. Each output still has its
 * own accumulator, updated in k order, so the rule holds; the rounded
 * activations put these results about as far from the scalar ones as the
 * quantized types' (backend tests: 5e-3). */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,avx512bf16")))

/* x[in] to BF16 (round to nearest even), zeros up to a multiple of 32. */
static BF16_TARGET void K(bf16_row)(const float *x, int64_t in, uint16_t *dst) {
    for (int64_t k = 0; k < in; k += 32) {
        int64_t rest = in - k;
        __mmask16 m0 = rest >= 16 ? 0xFFFF : (__mmask16)((1u << rest) - 1);
        __mmask16 m1 = rest >= 32 ? 0xFFFF : rest > 16 ? (__mmask16)((1u << (rest - 16)) - 1) : 0;
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + k + 16), _mm512_maskz_loadu_ps(m0, x + k));
        _mm512_storeu_si512((void *)(dst + k), (__m512i)v);
    }
}

/* The BF16 row of activation row i (SimdActs.q, q_stride bytes a row). */
INLINE const uint16_t *K(bf16_x)(const SimdActs *a, int i) {
    return (const uint16_t *)(const void *)(a->q + (size_t)i * a->q_stride);
}

/* One step of 32 elements from k, as K(fstep); weights past mask m read as 0. */
INLINE BF16_TARGET void K(bstep)(int R, int C, __m512 acc[FT_R][FT_C], const uint16_t *const xr[FT_R],
                                 const uint16_t *const wr[FT_C], int64_t k, __mmask32 m) {
    __m512bh xv[FT_R];
    UNROLL for (int r = 0; r < R; r++) xv[r] = (__m512bh)_mm512_loadu_si512((const void *)(xr[r] + k));
    UNROLL for (int c = 0; c < C; c++) {
        __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, wr[c] + k);
        UNROLL for (int r = 0; r < R; r++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv, xv[r]);
    }
}

/* y[i0 + r, o0 + c] for r < R, c < C, as K(ftile) but 32 elements a step. */
INLINE BF16_TARGET void K(btile)(int R, int C, float *y, const SimdActs *a, const Tensor *w, int i0, int o0,
                                 const char *ahead, size_t lines) {
    int64_t in = w->ne[0], out = w->ne[1];
    __m512 acc[FT_R][FT_C];
    const uint16_t *wr[FT_C], *xr[FT_R];
    UNROLL for (int c = 0; c < C; c++) wr[c] = tensor_row(w, o0 + c);
    UNROLL for (int r = 0; r < R; r++) {
        xr[r] = K(bf16_x)(a, i0 + r);
        UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    }
    size_t steps = (size_t)((in + 31) / 32), per = i0 == 0 ? (lines + steps - 1) / steps : 0, line = 0;
    int64_t k = 0;
    if (per)
        for (; k + 32 <= in; k += 32) {
            K(ask)(ahead, lines, &line, per, C); /* 64 bytes a row a step */
            K(bstep)(R, C, acc, xr, wr, k, 0xFFFFFFFFu);
        }
    for (; k + 32 <= in; k += 32) K(bstep)(R, C, acc, xr, wr, k, 0xFFFFFFFFu);
    if (k < in) K(bstep)(R, C, acc, xr, wr, k, (__mmask32)((1u << (in - k)) - 1)); /* the tail: zero weights */
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int c = 0; c < C; c++) y[(size_t)(i0 + r) * out + o0 + c] = K(hsum)(acc[r][c]);
}

/* As K(fcols_tile). */
INLINE BF16_TARGET void K(bcols_tile)(int C, float *y, const SimdActs *a, const Tensor *w, int o0, int c1,
                                      bool ask) {
    int n = a->n, i = 0;
    size_t lines = 0;
    const char *ahead = ask ? K(ahead)(w, o0 + TILES_AHEAD * C, C, c1, &lines) : NULL;
    for (; i + FT_R <= n; i += FT_R) K(btile)(FT_R, C, y, a, w, i, o0, ahead, lines);
    switch (n - i) {
    case 3: K(btile)(3, C, y, a, w, i, o0, ahead, lines); break;
    case 2: K(btile)(2, C, y, a, w, i, o0, ahead, lines); break;
    case 1: K(btile)(1, C, y, a, w, i, o0, ahead, lines); break;
    default: break;
    }
}

/* As K(fcols) on AMD, by measuring: up to SMALL_ROWS rows of activations take one weight
 * row at a time, asking nothing ahead (a step is 64 bytes, as F32's; Intel's 4 rows untried). */
static BF16_TARGET void K(bcols)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    int o = c0;
    bool tiles = a->n > SMALL_ROWS; /* whole tiles, asking ahead */
    if (tiles)
        for (; o + FT_C <= c1; o += FT_C) K(bcols_tile)(FT_C, y, a, w, o, c1, tiles);
    for (; o < c1; o++) K(bcols_tile)(1, y, a, w, o, c1, tiles);
}

static BF16_TARGET void K(prepare_rows_bf16)(const SimdActs *a, int r0, int r1) {
    if (a->type != DT_BF16) {
        K(prepare_rows)(a, r0, r1);
        return;
    }
    for (int i = r0; i < r1; i++)
        K(bf16_row)(a->x + (size_t)i * a->in, a->in, (uint16_t *)(void *)(a->q + (size_t)i * a->q_stride));
}

static void K(matmul_cols_bf16)(float *y, const SimdActs *a, const Tensor *w, int c0, int c1) {
    if (w->type == DT_BF16) K(bcols)(y, a, w, c0, c1);
    else K(matmul_cols)(y, a, w, c0, c1);
}

static const SimdKernels K(kernels_bf16) = {
    .isa = "avx512bf16",
    .bf16_pairs = true,
    .qblocks = QB,
    .ftile_cols = FT_C,
    .qtile_cols = PC_N,
    .tiles = true,
    .prepare_rows = K(prepare_rows_bf16),
    .matmul_cols = K(matmul_cols_bf16),
    .attention_heads = K(attention_heads),
};
#undef BF16_TARGET
#endif


#undef ATT_H
#undef ATT_V
#undef ATT_AHEAD
#undef ATT_LINE
#undef VF
#undef VF_N
#undef VF_ZERO
#undef VF_LOAD
#undef VF_STORE
#undef VF_SET1
#undef VF_MUL
#undef VF_FMA
#undef VF_FNMA
#undef VF_LOAD_F16
#undef VF_LOAD_BF16
#undef VF_FROM_INT
#undef VI
#undef VI_LOAD
#undef QB
#undef FT_R
#undef FT_C
#undef QT_R
#undef SB_R
#undef QT_C
#undef QCHUNK
#undef PC_N
#undef PC_R
#undef PC_BLOCKS
#undef PC_VECS
#undef IQ_VECS
#undef K4_VECS
#undef SB_MIN_ROWS
#ifdef Q8_ROWS
#undef Q8_ROWS
#endif
#undef TILES_AHEAD
#undef QPRE_ROWS
#undef SIGNED_Q8_0
#undef INLINE
#undef UNROLL
#undef KEEP_CHAIN
#undef K
#undef SIMD_VNNI
#undef SIMD_512
