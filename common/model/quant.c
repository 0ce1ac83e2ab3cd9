/* quant.c: see quant.h. Each quantizer works one block at a time and writes
 * the exact byte layout that dequant_row (dtype.c) reads. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Round to nearest (ties to even) by adding 1.5 * 2^23, which leaves the
 * integer in the low mantissa bits: exact for |x| < 2^22, and much cheaper
 * than a libm call in loops over hundreds of millions of weights. */
static int nearest(float x) {
    float v = x + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

static int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

static void put_f16(uint8_t *p, float f) {
    uint16_t h = f32_to_fp16(f);
    memcpy(p, &h, 2);
}

/* ---- 32-element blocks --------------------------------------------------- */

/* The signed value of largest magnitude among x[0..n). */
static float signed_max(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* Codes 0..15 of a 32-block into 16 bytes (low nibble element j, high j + 16). */
static void pack_nibbles32(const int *code, uint8_t *qs) {
    for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)((code[j] & 0xF) | ((code[j + QK / 2] & 0xF) << 4));
}

/* The fifth bits of 32 codes 0..31 as a little-endian u32. */
static void pack_fifth_bits(const int *code, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < QK; j++) h |= (uint32_t)(code[j] >> 4) << j;
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

/* Q8_0: d = amax/127, so the largest magnitude maps to +-127. */
static void quant_q8_0_block(const float *x, uint8_t *b) {
    float amax = 0;
    for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f;
    float id = d != 0 ? 1.0f / d : 0;
    put_f16(b, d);
    int8_t *qs = (int8_t *)(b + 2);
    for (int j = 0; j < QK; j++) qs[j] = (int8_t)clampi(nearest(x[j] * id), -127, 127);
}

/* Q4_0 / Q5_0: y = (q - half) * d with q in 0..2 half - 1 and d = max / -half,
 * max the signed value of largest magnitude, so that value maps exactly to
 * code 0 and the other side gets up to half - 1 steps. */
static void quant_centred_block(const float *x, uint8_t *b, int half, int *code) {
    float d = signed_max(x, QK) / (float)-half;
    float id = d != 0 ? 1.0f / d : 0;
    put_f16(b, d);
    for (int j = 0; j < QK; j++) code[j] = clampi(nearest(x[j] * id) + half, 0, 2 * half - 1);
}

static void quant_q4_0_block(const float *x, uint8_t *b) {
    int code[QK];
    quant_centred_block(x, b, 8, code);
    pack_nibbles32(code, b + 2);
}

static void quant_q5_0_block(const float *x, uint8_t *b) {
    int code[QK];
    quant_centred_block(x, b, 16, code);
    pack_fifth_bits(code, b + 2);
    pack_nibbles32(code, b + 6);
}

/* Q4_1 / Q5_1: y = d * q + m with q in 0..qmax: the block's minimum becomes
 * m and its range is cut into qmax steps. */
static void quant_min_block(const float *x, uint8_t *b, int qmax, int *code) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < QK; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    float d = (hi - lo) / (float)qmax, m = lo;
    put_f16(b, d);
    put_f16(b + 2, m);
    d = fp16_to_f32(f32_to_fp16(d)); /* the codes fit the values as read back */
    m = fp16_to_f32(f32_to_fp16(m));
    float id = d != 0 ? 1.0f / d : 0;
    for (int j = 0; j < QK; j++) code[j] = clampi(nearest((x[j] - m) * id), 0, qmax);
}

static void quant_q4_1_block(const float *x, uint8_t *b) {
    int code[QK];
    quant_min_block(x, b, 15, code);
    pack_nibbles32(code, b + 4);
}

static void quant_q5_1_block(const float *x, uint8_t *b) {
    int code[QK];
    quant_min_block(x, b, 31, code);
    pack_fifth_bits(code, b + 4);
    pack_nibbles32(code, b + 8);
}

/* ---- IQ4_NL, IQ4_XS ------------------------------------------------------ */

/* The index of the IQ4_VALUES entry nearest to v (the table is sorted: a
 * binary search over the midpoints between neighbours). */
static int iq4_index(float v) {
    int lo = 0, hi = 15;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v > 0.5f * (float)(IQ4_VALUES[mid] + IQ4_VALUES[mid + 1])) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* 32 values as IQ4 indices against scale d (d == 0: all map to the value 1 * 0). */
static void iq4_codes(const float *x, float d, int *code) {
    float id = d != 0 ? 1.0f / d : 0;
    for (int j = 0; j < QK; j++) code[j] = iq4_index(x[j] * id);
}

/* IQ4_NL: d = max / -127, so the extreme value lands on the table's -127. */
static void quant_iq4_nl_block(const float *x, uint8_t *b) {
    float d = signed_max(x, QK) / -127.0f;
    put_f16(b, d);
    int code[QK];
    iq4_codes(x, fp16_to_f32(f32_to_fp16(d)), code);
    pack_nibbles32(code, b + 2);
}

/* IQ4_XS: each sub-block's own scale (max / -127) is quantized to a signed
 * 6-bit multiple of d, with d = the largest scale / -32. */
static void quant_iq4_xs_block(const float *x, uint8_t *b) {
    float scale[8];
    for (int s = 0; s < 8; s++) scale[s] = signed_max(x + 32 * s, 32) / -127.0f;
    float d = signed_max(scale, 8) / -32.0f;
    put_f16(b, d);
    d = fp16_to_f32(f32_to_fp16(d));
    uint16_t scales_h = 0;
    memset(b + 4, 0, 4);
    for (int s = 0; s < 8; s++) {
        int ls = (d != 0 ? clampi(nearest(scale[s] / d), -32, 31) : 0) + 32; /* 0..63 */
        scales_h |= (uint16_t)((ls >> 4) << (2 * s));
        b[4 + s / 2] |= (uint8_t)((ls & 0xF) << (4 * (s % 2)));
        int code[QK];
        iq4_codes(x + 32 * s, d * (float)(ls - 32), code);
        pack_nibbles32(code, b + 8 + 16 * s);
    }
    memcpy(b + 2, &scales_h, 2); /* little-endian, like every machine this builds for */
}

/* ---- K-quants --------------------------------------------------------------- */

/* Asymmetric K-quant scales (Q2_K, Q4_K, Q5_K): each of n_sub sub-blocks of
 * len values gets y = scale * q - min with q in 0..qmax and min >= 0 (its range
 * widened to include zero); the scales and mins are then quantized to 0..smax
 * against d = max scale / smax and dmin = max min / smax. Writes d and dmin
 * (F16) at dd and dd + 2, and sets sc, mn and the codes, computed from the
 * scales as they will be read back. */
static void kquant_asym(const float *x, int n_sub, int len, int qmax, int smax, uint8_t *dd, int *sc, int *mn,
                        uint8_t *code) {
    float scale[16], min[16], max_scale = 0, max_min = 0;
    for (int j = 0; j < n_sub; j++) {
        float lo = 0, hi = 0;
        for (int l = 0; l < len; l++) {
            lo = fminf(lo, x[len * j + l]);
            hi = fmaxf(hi, x[len * j + l]);
        }
        scale[j] = (hi - lo) / (float)qmax;
        min[j] = -lo;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, min[j]);
    }
    float d = max_scale / (float)smax, dmin = max_min / (float)smax;
    for (int j = 0; j < n_sub; j++) {
        sc[j] = d > 0 ? clampi(nearest(scale[j] / d), 0, smax) : 0;
        mn[j] = dmin > 0 ? clampi(nearest(min[j] / dmin), 0, smax) : 0;
    }
    /* Use the scales as stored (f16 d, quantized sc) so the codes fit what is read back. */
    put_f16(dd, d);
    put_f16(dd + 2, dmin);
    d = fp16_to_f32(f32_to_fp16(d));
    dmin = fp16_to_f32(f32_to_fp16(dmin));
    for (int j = 0; j < n_sub; j++) {
        float s = d * sc[j], m = dmin * mn[j];
        for (int l = 0; l < len; l++)
            code[len * j + l] = (uint8_t)(s > 0 ? clampi(nearest((x[len * j + l] + m) / s), 0, qmax) : 0);
    }
}

/* Symmetric K-quant scales (Q3_K, Q6_K): 16 sub-blocks of 16 with y = d * sc *
 * q, q in -qhalf..qhalf-1. Like Q4_0, each sub-block's scale maps its
 * largest-magnitude value to -qhalf; the scales are then quantized to
 * -shalf..shalf-1 against d = max scale / -shalf. Writes d (F16) at dp, the
 * scales, and the codes q + qhalf. */
static void kquant_sym(const float *x, int qhalf, int shalf, uint8_t *dp, int *sc, uint8_t *code) {
    float scale[16];
    for (int j = 0; j < 16; j++) scale[j] = signed_max(x + 16 * j, 16) / (float)-qhalf;
    float d = signed_max(scale, 16) / (float)-shalf;
    put_f16(dp, d);
    d = fp16_to_f32(f32_to_fp16(d));
    for (int j = 0; j < 16; j++) {
        sc[j] = d != 0 ? clampi(nearest(scale[j] / d), -shalf, shalf - 1) : 0;
        float s = d * sc[j];
        for (int l = 0; l < 16; l++)
            code[16 * j + l] = (uint8_t)(s != 0 ? clampi(nearest(x[16 * j + l] / s), -qhalf, qhalf - 1) + qhalf : qhalf);
    }
}

/* Packs eight 6-bit scales and mins into the 12 bytes dequant reads back. */
static void pack_scales_k4(const int *sc, const int *mn, uint8_t *s) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
}

/* 2-bit codes in the order of Q2_K and Q3_K: element 128h + 32j + l in bits
 * 2j, 2j + 1 of qs[32h + l]. */
static void pack_crumbs(const uint8_t *code, uint8_t *qs) {
    memset(qs, 0, 64);
    for (int k = 0; k < QK_K; k++) {
        int h = k / 128, j = (k % 128) / 32, l = k % 32;
        qs[32 * h + l] |= (uint8_t)((code[k] & 3) << (2 * j));
    }
}

static void quant_q2_k_block(const float *x, uint8_t *b) {
    int sc[16], mn[16];
    uint8_t code[QK_K];
    kquant_asym(x, 16, 16, 3, 15, b + 80, sc, mn, code);
    for (int j = 0; j < 16; j++) b[j] = (uint8_t)(sc[j] | (mn[j] << 4));
    pack_crumbs(code, b + 16);
}

static void quant_q3_k_block(const float *x, uint8_t *b) {
    int sc[16];
    uint8_t code[QK_K]; /* q + 4, in 0..7: low 2 bits, and the third bit in hmask */
    kquant_sym(x, 4, 32, b + 108, sc, code);
    pack_crumbs(code, b + 32);
    memset(b, 0, 32);
    for (int k = 0; k < QK_K; k++) {
        int h = k / 128, j = (k % 128) / 32, l = k % 32;
        b[l] |= (uint8_t)((code[k] >> 2) << (4 * h + j));
    }
    uint8_t *s = b + 96;
    memset(s, 0, 12);
    for (int i = 0; i < 16; i++) {
        int v = sc[i] + 32; /* 0..63 */
        s[i % 8] |= (uint8_t)((v & 0xF) << (i < 8 ? 0 : 4));
        s[8 + i % 4] |= (uint8_t)((v >> 4) << (2 * (i / 4)));
    }
}

/* Q4_K: 8 sub-blocks of 32, y = scale*q - min, q in 0..15, 6-bit scales. */
static void quant_q4_k_block(const float *x, uint8_t *b) {
    int sc[8], mn[8];
    uint8_t code[QK_K];
    kquant_asym(x, 8, 32, 15, 63, b, sc, mn, code);
    pack_scales_k4(sc, mn, b + 4);
    uint8_t *qs = b + 16; /* chunk c: low nibbles = outputs 64c..+31, high = 64c+32..+63 */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(code[64 * c + l] | (code[64 * c + 32 + l] << 4));
}

/* Q5_K: Q4_K with q in 0..31, the fifth bits of sub-block s in bit s of qh[l]. */
static void quant_q5_k_block(const float *x, uint8_t *b) {
    int sc[8], mn[8];
    uint8_t code[QK_K];
    kquant_asym(x, 8, 32, 31, 63, b, sc, mn, code);
    pack_scales_k4(sc, mn, b + 4);
    uint8_t *qh = b + 16, *qs = b + 48;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)((code[64 * c + l] & 0xF) | ((code[64 * c + 32 + l] & 0xF) << 4));
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) qh[l] |= (uint8_t)((code[32 * s + l] >> 4) << s);
}

/* Q6_K: 16 sub-blocks of 16 with y = d * sc * q, q in -32..31, sc a signed byte. */
static void quant_q6_k_block(const float *x, uint8_t *b) {
    int scale[16];
    uint8_t code[QK_K]; /* q + 32, in 0..63 */
    kquant_sym(x, 32, 128, b + 208, scale, code);
    int8_t *sc = (int8_t *)(b + 192);
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)scale[j];
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const uint8_t *q = code + 128 * h;
        for (int l = 0; l < 32; l++) {
            int q1 = q[l], q2 = q[l + 32], q3 = q[l + 64], q4 = q[l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

/* ---- rows ------------------------------------------------------------------ */

bool quant_supported(DType t) {
    switch (t) {
    case DT_F32: case DT_F16: case DT_BF16: case DT_Q8_0: case DT_Q4_0: case DT_Q4_1:
    case DT_Q5_0: case DT_Q5_1: case DT_IQ4_NL: case DT_Q2_K: case DT_Q3_K: case DT_Q4_K:
    case DT_Q5_K: case DT_Q6_K: case DT_IQ4_XS:
        return true;
    default:
        return false;
    }
}

typedef void (*BlockFn)(const float *x, uint8_t *b);

static void quant_blocks(BlockFn fn, int block, int bytes, const float *src, uint8_t *dst,
                         int64_t n) {
    for (int64_t i = 0; i < n / block; i++) fn(src + i * block, dst + i * bytes);
}

void quant_row(DType t, const float *src, void *dst, int64_t n) {
    uint8_t *out = dst;
    if (!quant_supported(t) || n % dtype_block_size(t) != 0) {
        fprintf(stderr, "quant_row: cannot write %lld elements as %s\n", (long long)n,
                dtype_name(t) ? dtype_name(t) : "an unknown type");
        exit(70);
    }
    switch (t) {
    case DT_F32: memcpy(out, src, (size_t)n * 4); break;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) put_f16(out + 2 * i, src[i]);
        break;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = f32_to_bf16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        break;
    case DT_Q8_0: quant_blocks(quant_q8_0_block, QK, 34, src, out, n); break;
    case DT_Q4_0: quant_blocks(quant_q4_0_block, QK, 18, src, out, n); break;
    case DT_Q4_1: quant_blocks(quant_q4_1_block, QK, 20, src, out, n); break;
    case DT_Q5_0: quant_blocks(quant_q5_0_block, QK, 22, src, out, n); break;
    case DT_Q5_1: quant_blocks(quant_q5_1_block, QK, 24, src, out, n); break;
    case DT_IQ4_NL: quant_blocks(quant_iq4_nl_block, QK, 18, src, out, n); break;
    case DT_Q2_K: quant_blocks(quant_q2_k_block, QK_K, 84, src, out, n); break;
    case DT_Q3_K: quant_blocks(quant_q3_k_block, QK_K, 110, src, out, n); break;
    case DT_Q4_K: quant_blocks(quant_q4_k_block, QK_K, 144, src, out, n); break;
    case DT_Q5_K: quant_blocks(quant_q5_k_block, QK_K, 176, src, out, n); break;
    case DT_Q6_K: quant_blocks(quant_q6_k_block, QK_K, 210, src, out, n); break;
    case DT_IQ4_XS: quant_blocks(quant_iq4_xs_block, QK_K, 136, src, out, n); break;
    default: break;
    }
}
