/* dtype.c: see dtype.h. Dequantizers follow the block layouts of
 * book/appendix-gguf.md (A.3); each is the readable reference the fast kernels
 * are tested against. */
#include "dtype.h"

#include <string.h>

typedef struct {
    const char *name;
    int block;     /* elements per block */
    int bytes;     /* bytes per block */
    bool supported;
} TypeInfo;

static const TypeInfo TYPES[] = {
    [DT_F32] = {"F32", 1, 4, true},
    [DT_F16] = {"F16", 1, 2, true},
    [DT_Q4_0] = {"Q4_0", QK, 18, true},
    [DT_Q4_1] = {"Q4_1", QK, 20, false},
    [DT_Q5_0] = {"Q5_0", QK, 22, false},
    [DT_Q5_1] = {"Q5_1", QK, 24, false},
    [DT_Q8_0] = {"Q8_0", QK, 34, true},
    [DT_Q8_1] = {"Q8_1", QK, 36, false},
    [DT_Q2_K] = {"Q2_K", QK_K, 84, false},
    [DT_Q3_K] = {"Q3_K", QK_K, 110, false},
    [DT_Q4_K] = {"Q4_K", QK_K, 144, true},
    [DT_Q5_K] = {"Q5_K", QK_K, 176, false},
    [DT_Q6_K] = {"Q6_K", QK_K, 210, true},
    [DT_Q8_K] = {"Q8_K", QK_K, 292, false},
    [16] = {"IQ2_XXS", QK_K, 66, false},
    [17] = {"IQ2_XS", QK_K, 74, false},
    [18] = {"IQ3_XXS", QK_K, 98, false},
    [19] = {"IQ1_S", QK_K, 50, false},
    [20] = {"IQ4_NL", QK, 18, false},
    [21] = {"IQ3_S", QK_K, 110, false},
    [22] = {"IQ2_S", QK_K, 82, false},
    [23] = {"IQ4_XS", QK_K, 136, false},
    [24] = {"I8", 1, 1, false},
    [25] = {"I16", 1, 2, false},
    [26] = {"I32", 1, 4, false},
    [27] = {"I64", 1, 8, false},
    [28] = {"F64", 1, 8, false},
    [29] = {"IQ1_M", QK_K, 56, false},
    [DT_BF16] = {"BF16", 1, 2, true},
    [34] = {"TQ1_0", QK_K, 54, false},
    [35] = {"TQ2_0", QK_K, 66, false},
    [39] = {"MXFP4", QK, 17, false},
};

static const TypeInfo *info(uint32_t t) {
    if (t >= sizeof TYPES / sizeof TYPES[0] || !TYPES[t].name) return NULL;
    return &TYPES[t];
}

const char *dtype_name(uint32_t t) { return info(t) ? info(t)->name : NULL; }
bool dtype_supported(uint32_t t) { return info(t) && info(t)->supported; }
int dtype_block_size(uint32_t t) { return info(t) ? info(t)->block : 1; }
int dtype_block_bytes(uint32_t t) { return info(t) ? info(t)->bytes : 0; }

size_t dtype_row_bytes(uint32_t t, int64_t n) {
    return (size_t)(n / dtype_block_size(t)) * (size_t)dtype_block_bytes(t);
}

/* ---- F16 / BF16 ---------------------------------------------------------- */

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) return bits_f32(sign | 0x7F800000 | (man << 13)); /* inf, nan */
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xFF;
    uint32_t man = x & 0x7FFFFF;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1F) return (uint16_t)(sign | 0x7C00); /* overflow: inf */
    if (e <= 0) {                                    /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* round to nearest even */
    return (uint16_t)half;
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((x >> 16) | 64); /* quiet nan */
    return (uint16_t)((x + (0x7FFF + ((x >> 16) & 1))) >> 16);
}

/* ---- dequantizers ------------------------------------------------------- */

static float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}

static void dequant_q8_0(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 34, y += QK) {
        float d = f16_at(b);
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int j = 0; j < QK; j++) y[j] = qs[j] * d;
    }
}

static void dequant_q4_0(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 18, y += QK) {
        float d = f16_at(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < QK / 2; j++) {
            y[j] = ((qs[j] & 0x0F) - 8) * d;        /* low nibbles: elements 0..15 */
            y[j + QK / 2] = ((qs[j] >> 4) - 8) * d; /* high nibbles: elements 16..31 */
        }
    }
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block. */
static void scale_min_k4(int j, const uint8_t *s, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void dequant_q4_k(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 144) {
        float d = f16_at(b), dmin = f16_at(b + 2);
        const uint8_t *scales = b + 4, *q = b + 16;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc1, mn1, sc2, mn2;
            scale_min_k4(2 * c, scales, &sc1, &mn1);
            scale_min_k4(2 * c + 1, scales, &sc2, &mn2);
            float d1 = d * sc1, m1 = dmin * mn1, d2 = d * sc2, m2 = dmin * mn2;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void dequant_q6_k(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 210) {
        float d = f16_at(b + 208);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void dequant_row(uint32_t t, const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    switch (t) {
    case DT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = f16_at(b + 2 * i);
        break;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, b + 2 * i, 2);
            dst[i] = bf16_to_f32(h);
        }
        break;
    case DT_Q8_0: dequant_q8_0(b, dst, n); break;
    case DT_Q4_0: dequant_q4_0(b, dst, n); break;
    case DT_Q4_K: dequant_q4_k(b, dst, n); break;
    case DT_Q6_K: dequant_q6_k(b, dst, n); break;
    default: memset(dst, 0, (size_t)n * 4); break; /* unreachable: loaders reject the type */
    }
}
