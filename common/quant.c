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

/* Q4_0: d = max/-8 with the signed value of largest magnitude, so that value
 * maps exactly to the code -8 and the other side gets up to +7. */
static void quant_q4_0_block(const float *x, uint8_t *b) {
    float amax = 0, max = 0;
    for (int j = 0; j < QK; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    float d = max / -8.0f;
    float id = d != 0 ? 1.0f / d : 0;
    put_f16(b, d);
    uint8_t *qs = b + 2;
    for (int j = 0; j < QK / 2; j++) {
        int lo = clampi(nearest(x[j] * id) + 8, 0, 15);          /* elements 0..15 */
        int hi = clampi(nearest(x[j + QK / 2] * id) + 8, 0, 15); /* elements 16..31 */
        qs[j] = (uint8_t)(lo | (hi << 4));
    }
}

/* ---- Q4_K ----------------------------------------------------------------- */

/* Packs eight 6-bit scales and mins into the 12 bytes dequant reads back. */
static void pack_scales_k4(const int *sc, const int *mn, uint8_t *s) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
}

/* Q4_K: each 32-element sub-block gets y = scale*q - min with q in 0..15 and
 * min >= 0 (the range is widened to include zero); the eight scales and mins
 * are then quantized to 6 bits against the super-block's d and dmin. */
static void quant_q4_k_block(const float *x, uint8_t *b) {
    float scale[8], min[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = 0;
        for (int l = 0; l < 32; l++) {
            lo = fminf(lo, x[32 * j + l]);
            hi = fmaxf(hi, x[32 * j + l]);
        }
        scale[j] = (hi - lo) / 15.0f;
        min[j] = -lo;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, min[j]);
    }
    float d = max_scale / 63.0f, dmin = max_min / 63.0f;
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0 ? clampi(nearest(scale[j] / d), 0, 63) : 0;
        mn[j] = dmin > 0 ? clampi(nearest(min[j] / dmin), 0, 63) : 0;
    }
    /* Use the scales as stored (f16 d, 6-bit sc) so the codes fit what is read back. */
    put_f16(b, d);
    put_f16(b + 2, dmin);
    d = fp16_to_f32(f32_to_fp16(d));
    dmin = fp16_to_f32(f32_to_fp16(dmin));
    pack_scales_k4(sc, mn, b + 4);
    uint8_t code[QK_K];
    for (int j = 0; j < 8; j++) {
        float s = d * sc[j], m = dmin * mn[j];
        for (int l = 0; l < 32; l++)
            code[32 * j + l] = (uint8_t)(s > 0 ? clampi(nearest((x[32 * j + l] + m) / s), 0, 15) : 0);
    }
    uint8_t *qs = b + 16; /* chunk c: low nibbles = outputs 64c..+31, high = 64c+32..+63 */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(code[64 * c + l] | (code[64 * c + 32 + l] << 4));
}

/* ---- Q6_K ----------------------------------------------------------------- */

/* Q6_K: 16 sub-blocks of 16 with y = d * sc * q, q in -32..31, sc a signed
 * byte. Like Q4_0, each sub-block's scale maps its largest-magnitude value to
 * -32; the scales are then quantized to int8 against d = max scale / -128. */
static void quant_q6_k_block(const float *x, uint8_t *b) {
    float scale[16], max_scale = 0;
    for (int j = 0; j < 16; j++) {
        float amax = 0, max = 0;
        for (int l = 0; l < 16; l++) {
            if (fabsf(x[16 * j + l]) > amax) {
                amax = fabsf(x[16 * j + l]);
                max = x[16 * j + l];
            }
        }
        scale[j] = max / -32.0f;
        if (fabsf(scale[j]) > fabsf(max_scale)) max_scale = scale[j];
    }
    float d = max_scale / -128.0f;
    put_f16(b + 208, d);
    d = fp16_to_f32(f32_to_fp16(d));
    int8_t *sc = (int8_t *)(b + 192);
    int8_t code[QK_K]; /* q + 32, in 0..63 */
    for (int j = 0; j < 16; j++) {
        sc[j] = (int8_t)(d != 0 ? clampi(nearest(scale[j] / d), -128, 127) : 0);
        float s = d * sc[j];
        for (int l = 0; l < 16; l++)
            code[16 * j + l] = (int8_t)(s != 0 ? clampi(nearest(x[16 * j + l] / s), -32, 31) + 32 : 32);
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *q = code + 128 * h;
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
    case DT_F32: case DT_F16: case DT_BF16: case DT_Q8_0: case DT_Q4_0: case DT_Q4_K:
    case DT_Q6_K:
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
    case DT_Q4_K: quant_blocks(quant_q4_k_block, QK_K, 144, src, out, n); break;
    case DT_Q6_K: quant_blocks(quant_q6_k_block, QK_K, 210, src, out, n); break;
    default: break;
    }
}
