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
    [DT_Q4_1] = {"Q4_1", QK, 20, true},
    [DT_Q5_0] = {"Q5_0", QK, 22, true},
    [DT_Q5_1] = {"Q5_1", QK, 24, true},
    [DT_Q8_0] = {"Q8_0", QK, 34, true},
    [DT_Q8_1] = {"Q8_1", QK, 36, false},
    [DT_Q2_K] = {"Q2_K", QK_K, 84, true},
    [DT_Q3_K] = {"Q3_K", QK_K, 110, true},
    [DT_Q4_K] = {"Q4_K", QK_K, 144, true},
    [DT_Q5_K] = {"Q5_K", QK_K, 176, true},
    [DT_Q6_K] = {"Q6_K", QK_K, 210, true},
    [DT_Q8_K] = {"Q8_K", QK_K, 292, false},
    [16] = {"IQ2_XXS", QK_K, 66, false},
    [17] = {"IQ2_XS", QK_K, 74, false},
    [18] = {"IQ3_XXS", QK_K, 98, false},
    [19] = {"IQ1_S", QK_K, 50, false},
    [DT_IQ4_NL] = {"IQ4_NL", QK, 18, true},
    [21] = {"IQ3_S", QK_K, 110, false},
    [22] = {"IQ2_S", QK_K, 82, false},
    [DT_IQ4_XS] = {"IQ4_XS", QK_K, 136, true},
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
    [40] = {"NVFP4", 64, 36, false},
    [41] = {"Q1_0", 128, 18, false},
};

static const TypeInfo *info(uint32_t t) {
    if (t >= sizeof TYPES / sizeof TYPES[0] || !TYPES[t].name) return NULL;
    return &TYPES[t];
}

const char *dtype_name(uint32_t t) { return info(t) ? info(t)->name : NULL; }
bool dtype_supported(uint32_t t) { return info(t) && info(t)->supported; }

const char *dtype_supported_names(void) {
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";
}
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

/* ---- dequantizers ------------------------------------------------------- *
 * Notation in the layouts: bytes a-b are offsets inside one block; F16 values
 * are little-endian halves; "y" are the block's outputs in order. */

static float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}

const int8_t IQ4_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The 4-bit codes of a 32-element block, stored in 16 bytes: byte j holds
 * element j in its low nibble and element j + 16 in its high nibble (so the
 * first half of the block is all low nibbles, not interleaved pairs). */
static void nibbles32(const uint8_t *qs, int q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = qs[j] & 0x0F;
        q[j + 16] = qs[j] >> 4;
    }
}

/* The fifth bits of Q5_0 / Q5_1: a little-endian u32 whose bit j belongs to
 * element j, added on top of the nibble as 16. */
static void add_fifth_bits(const uint8_t *qh, int q[32]) {
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < 32; j++) q[j] |= (int)((h >> j) & 1) << 4;
}

/* Q8_0 (34 bytes): 0-1 d (F16), 2-33 qs[32] signed bytes.  y[j] = qs[j] * d */
static void dequant_q8_0(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 34, y += QK) {
        float d = f16_at(b);
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int j = 0; j < QK; j++) y[j] = qs[j] * d;
    }
}

/* Q4_0 (18 bytes): 0-1 d (F16), 2-17 the 32 codes as nibbles (nibbles32).
 * y = (q - 8) * d, so codes 0..15 stand for -8..7 steps. */
static void dequant_q4_0(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 18, y += QK) {
        float d = f16_at(b);
        int q[32];
        nibbles32(b + 2, q);
        for (int j = 0; j < QK; j++) y[j] = (q[j] - 8) * d;
    }
}

/* Q4_1 (20 bytes): 0-1 d (F16), 2-3 m (F16, the block's minimum), 4-19 the
 * codes as nibbles.  y = q * d + m: unsigned steps up from the minimum, which
 * suits blocks whose values are not centred on zero. */
static void dequant_q4_1(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 20, y += QK) {
        float d = f16_at(b), m = f16_at(b + 2);
        int q[32];
        nibbles32(b + 4, q);
        for (int j = 0; j < QK; j++) y[j] = q[j] * d + m;
    }
}

/* Q5_0 (22 bytes): 0-1 d (F16), 2-5 qh (the fifth bits, add_fifth_bits),
 * 6-21 the low 4 bits as nibbles.  y = (q - 16) * d, q in 0..31. */
static void dequant_q5_0(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 22, y += QK) {
        float d = f16_at(b);
        int q[32];
        nibbles32(b + 6, q);
        add_fifth_bits(b + 2, q);
        for (int j = 0; j < QK; j++) y[j] = (q[j] - 16) * d;
    }
}

/* Q5_1 (24 bytes): 0-1 d, 2-3 m (F16), 4-7 qh, 8-23 nibbles.  y = q * d + m. */
static void dequant_q5_1(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 24, y += QK) {
        float d = f16_at(b), m = f16_at(b + 2);
        int q[32];
        nibbles32(b + 8, q);
        add_fifth_bits(b + 4, q);
        for (int j = 0; j < QK; j++) y[j] = q[j] * d + m;
    }
}

/* IQ4_NL (18 bytes): 0-1 d (F16), 2-17 the codes as nibbles; a code is not a
 * number but an index into IQ4_VALUES.  y = d * IQ4_VALUES[q] ("non-linear":
 * the 16 levels are closer together near zero). */
static void dequant_iq4_nl(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; i++, b += 18, y += QK) {
        float d = f16_at(b);
        int q[32];
        nibbles32(b + 2, q);
        for (int j = 0; j < QK; j++) y[j] = d * IQ4_VALUES[q[j]];
    }
}

/* Q2_K (84 bytes, 256 elements in 16 sub-blocks of 16):
 *   0-15   scales[16]: sub-block s has scale = low nibble, min = high nibble
 *   16-79  qs[64]: 2-bit codes, four per byte
 *   80-81  d (F16), multiplies the scales;  82-83 dmin (F16), the mins
 * Which bits are which element: output k = 128h + 32j + l (half h = 0..1,
 * pass j = 0..3, l = 0..31) is bits 2j, 2j+1 of byte qs[32h + l], in
 * sub-block k / 16.  y = d * scale * q - dmin * min, q in 0..3. */
static void dequant_q2_k(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 84) {
        float d = f16_at(b + 80), dmin = f16_at(b + 82);
        for (int k = 0; k < QK_K; k++) {
            int h = k / 128, j = (k % 128) / 32, l = k % 32;
            int q = (b[16 + 32 * h + l] >> (2 * j)) & 3, s = b[k / 16];
            *y++ = d * (s & 0x0F) * q - dmin * (s >> 4);
        }
    }
}

/* Q3_K (110 bytes, 16 sub-blocks of 16):
 *   0-31    hmask[32]: the third bit of each code
 *   32-95   qs[64]: the low 2 bits, in Q2_K's order
 *   96-107  twelve bytes packing 16 signed 6-bit scales (dtype_scale_q3_k)
 *   108-109 d (F16)
 * Output k = 128h + 32j + l: low bits = (qs[32h + l] >> 2j) & 3, third bit =
 * bit 4h + j of hmask[l]. q = low + 4 * third - 4, in -4..3 (the bit set
 * means "not minus 4").  y = d * scale[k / 16] * q. */
static void dequant_q3_k(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 110) {
        float d = f16_at(b + 108);
        for (int k = 0; k < QK_K; k++) {
            int h = k / 128, j = (k % 128) / 32, l = k % 32;
            int low = (b[32 + 32 * h + l] >> (2 * j)) & 3, third = (b[l] >> (4 * h + j)) & 1;
            *y++ = d * dtype_scale_q3_k(k / 16, b + 96) * (low + 4 * third - 4);
        }
    }
}

/* Q4_K (144 bytes, 8 sub-blocks of 32):
 *   0-1 d, 2-3 dmin (F16);  4-15 eight 6-bit scales and eight 6-bit mins in
 *   12 bytes;  16-143 qs[128] 4-bit codes.
 * The 12 bytes (dtype_scale_min_k4): bytes 0-3 hold scales 0-3 in their low
 * 6 bits, bytes 4-7 mins 0-3; bytes 8-11 hold the low 4 bits of scale 4-7
 * (low nibble) and min 4-7 (high nibble), whose top 2 bits are the top bits
 * of bytes 0-3 (scales) and 4-7 (mins).
 * Chunk c = 0..3 of 64 outputs reads qs[32c .. 32c + 31]: low nibbles are
 * sub-block 2c, high nibbles sub-block 2c + 1.  y = d * sc * q - dmin * mn. */
static void dequant_q4_k(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 144) {
        float d = f16_at(b), dmin = f16_at(b + 2);
        const uint8_t *scales = b + 4, *q = b + 16;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc1, mn1, sc2, mn2;
            dtype_scale_min_k4(2 * c, scales, &sc1, &mn1);
            dtype_scale_min_k4(2 * c + 1, scales, &sc2, &mn2);
            float d1 = d * sc1, m1 = dmin * mn1, d2 = d * sc2, m2 = dmin * mn2;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

/* Q5_K (176 bytes): Q4_K plus a fifth bit.  0-1 d, 2-3 dmin, 4-15 scales and
 * mins as in Q4_K, 16-47 qh[32], 48-175 qs[128] as in Q4_K.  Sub-block s
 * (outputs 32s .. 32s + 31, l = 0..31) takes its fifth bits from bit s of
 * qh[l].  y = d * sc * q - dmin * mn, q in 0..31. */
static void dequant_q5_k(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 176) {
        float d = f16_at(b), dmin = f16_at(b + 2);
        const uint8_t *qh = b + 16, *q = b + 48;
        for (int s = 0; s < 8; s++) {
            int sc, mn;
            dtype_scale_min_k4(s, b + 4, &sc, &mn);
            float ds = d * sc, ms = dmin * mn;
            for (int l = 0; l < 32; l++) {
                int low = s % 2 ? q[32 * (s / 2) + l] >> 4 : q[32 * (s / 2) + l] & 0x0F;
                *y++ = ds * (low | ((qh[l] >> s) & 1) << 4) - ms;
            }
        }
    }
}

/* Q6_K (210 bytes, 16 sub-blocks of 16):
 *   0-127 ql[128] low 4 bits, 128-191 qh[64] high 2 bits, 192-207 sc[16]
 *   signed 8-bit scales, 208-209 d (F16, at the end).
 * Half h (128 outputs) uses ql[64h ..], qh[32h ..]; for l = 0..31 the outputs
 * 128h + l, +32, +64, +96 take the low nibble of ql[l], of ql[l + 32], the
 * high nibble of ql[l], of ql[l + 32], and bits 0-1, 2-3, 4-5, 6-7 of qh[l].
 * y = d * sc[k / 16] * (q - 32), q in 0..63. */
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

/* IQ4_XS (136 bytes, 8 sub-blocks of 32): IQ4_NL's table with K-quant scales.
 *   0-1 d (F16), 2-3 scales_h (u16: 2 high bits per sub-block), 4-7
 *   scales_l (a nibble per sub-block: the 4 low bits), 8-135 qs: 16 bytes per
 *   sub-block, codes as nibbles (nibbles32).
 * Sub-block s has the signed 6-bit scale dtype_scale_iq4_xs(s) (-32..31).
 * y = d * scale * IQ4_VALUES[q]. */
static void dequant_iq4_xs(const uint8_t *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, b += 136) {
        float d = f16_at(b);
        for (int s = 0; s < 8; s++, y += 32) {
            float ds = d * dtype_scale_iq4_xs(s, b);
            int q[32];
            nibbles32(b + 8 + 16 * s, q);
            for (int j = 0; j < 32; j++) y[j] = ds * IQ4_VALUES[q[j]];
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
    case DT_Q4_1: dequant_q4_1(b, dst, n); break;
    case DT_Q5_0: dequant_q5_0(b, dst, n); break;
    case DT_Q5_1: dequant_q5_1(b, dst, n); break;
    case DT_IQ4_NL: dequant_iq4_nl(b, dst, n); break;
    case DT_Q2_K: dequant_q2_k(b, dst, n); break;
    case DT_Q3_K: dequant_q3_k(b, dst, n); break;
    case DT_Q4_K: dequant_q4_k(b, dst, n); break;
    case DT_Q5_K: dequant_q5_k(b, dst, n); break;
    case DT_Q6_K: dequant_q6_k(b, dst, n); break;
    case DT_IQ4_XS: dequant_iq4_xs(b, dst, n); break;
    default: memset(dst, 0, (size_t)n * 4); break; /* unreachable: loaders reject the type */
    }
}
