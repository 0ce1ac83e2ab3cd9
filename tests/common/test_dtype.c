/* test_dtype.c: element types (common/dtype.c). Every quantized block here is
 * built byte by byte and every expected value comes from the format's formula
 * (book/appendix-gguf.md A.3) written out again in the test. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"
#include "harness.h"

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xFF); /* little-endian, as in the file */
    p[1] = (uint8_t)(v >> 8);
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- names, sizes --------------------------------------------------------- */

TEST(dtype_names) {
    CHECK_STR(dtype_name(DT_F32), "F32");
    CHECK_STR(dtype_name(DT_F16), "F16");
    CHECK_STR(dtype_name(DT_BF16), "BF16");
    CHECK_STR(dtype_name(DT_Q4_0), "Q4_0");
    CHECK_STR(dtype_name(DT_Q8_0), "Q8_0");
    CHECK_STR(dtype_name(DT_Q4_K), "Q4_K");
    CHECK_STR(dtype_name(DT_Q6_K), "Q6_K");
    CHECK_STR(dtype_name(16), "IQ2_XXS");
    CHECK(dtype_name(4) == NULL);  /* removed Q4_2 */
    CHECK(dtype_name(5) == NULL);  /* removed Q4_3 */
    CHECK(dtype_name(31) == NULL);
    CHECK(dtype_name(99) == NULL);
    CHECK(dtype_name(UINT32_MAX) == NULL);
}

TEST(dtype_supported_types) {
    uint32_t yes[] = {DT_F32, DT_F16, DT_BF16, DT_Q4_0, DT_Q8_0, DT_Q4_K, DT_Q6_K};
    uint32_t no[] = {DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q8_1, DT_Q2_K, DT_Q3_K, DT_Q5_K, DT_Q8_K,
                     16, 24, 39, 4, 5, 31, 99, UINT32_MAX};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        CHECK_MSG(dtype_supported(yes[i]), "type %u should be supported", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECK_MSG(!dtype_supported(no[i]), "type %u should not be supported", no[i]);
}

TEST(dtype_block_sizes) {
    CHECK_EQ_INT(dtype_block_size(DT_F32), 1);
    CHECK_EQ_INT(dtype_block_bytes(DT_F32), 4);
    CHECK_EQ_INT(dtype_block_size(DT_Q4_0), 32);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q4_0), 18);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q8_0), 34);
    CHECK_EQ_INT(dtype_block_size(DT_Q4_K), 256);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q4_K), 144);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q6_K), 210);
    CHECK_EQ_INT(dtype_block_bytes(DT_BF16), 2);
    CHECK_EQ_INT(sizeof(BlockQ4_0), 18);
    CHECK_EQ_INT(sizeof(BlockQ8_0), 34);
    CHECK_EQ_INT(sizeof(BlockQ4_K), 144);
    CHECK_EQ_INT(sizeof(BlockQ6_K), 210);
}

TEST(dtype_row_bytes_known) {
    CHECK_EQ_INT(dtype_row_bytes(DT_F32, 10), 40);
    CHECK_EQ_INT(dtype_row_bytes(DT_F16, 10), 20);
    CHECK_EQ_INT(dtype_row_bytes(DT_BF16, 3), 6);
    CHECK_EQ_INT(dtype_row_bytes(DT_Q4_0, 64), 36);       /* 2 blocks x 18 */
    CHECK_EQ_INT(dtype_row_bytes(DT_Q8_0, 1024), 1088);   /* 32 blocks x 34 */
    CHECK_EQ_INT(dtype_row_bytes(DT_Q4_K, 256), 144);
    CHECK_EQ_INT(dtype_row_bytes(DT_Q6_K, 1024), 840);    /* 4 x 210 */
    CHECK_EQ_INT(dtype_row_bytes(DT_Q8_0, 151936LL * 32), 151936LL * 34);
    CHECK_EQ_INT(dtype_row_bytes(99, 64), 0);             /* unknown: no bytes */
}

/* ---- F16 / BF16 conversions ----------------------------------------------- */

TEST(dtype_fp16_to_f32_values) {
    CHECK(fp16_to_f32(0x0000) == 0.0f && !signbit(fp16_to_f32(0x0000)));
    CHECK(fp16_to_f32(0x8000) == 0.0f && signbit(fp16_to_f32(0x8000)));
    CHECK(fp16_to_f32(0x3C00) == 1.0f);
    CHECK(fp16_to_f32(0xC000) == -2.0f);
    CHECK(fp16_to_f32(0x3800) == 0.5f);
    CHECK(fp16_to_f32(0x3555) == 1365.0f / 4096.0f); /* 0x155 = 341: (1 + 341/1024) * 2^-2 */
    CHECK(fp16_to_f32(0x7BFF) == 65504.0f);          /* largest finite */
    CHECK(fp16_to_f32(0x0400) == ldexpf(1.0f, -14)); /* smallest normal */
    CHECK(fp16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    CHECK(fp16_to_f32(0x03FF) == 1023.0f * ldexpf(1.0f, -24));
    CHECK(fp16_to_f32(0x8001) == -ldexpf(1.0f, -24));
    CHECK(isinf(fp16_to_f32(0x7C00)) && fp16_to_f32(0x7C00) > 0);
    CHECK(isinf(fp16_to_f32(0xFC00)) && fp16_to_f32(0xFC00) < 0);
    CHECK(isnan(fp16_to_f32(0x7E00)));
    CHECK(isnan(fp16_to_f32(0x7C01))); /* signalling nan stays a nan */
    CHECK(isnan(fp16_to_f32(0xFFFF)));
}

TEST(dtype_f32_to_fp16_rounding) {
    CHECK_EQ_INT(f32_to_fp16(1.0f), 0x3C00);
    CHECK_EQ_INT(f32_to_fp16(-2.0f), 0xC000);
    CHECK_EQ_INT(f32_to_fp16(-0.0f), 0x8000);
    /* halfway between 1 and 1 + 2^-10: ties go to the even mantissa */
    CHECK_EQ_INT(f32_to_fp16(1.0f + ldexpf(1, -11)), 0x3C00);
    CHECK_EQ_INT(f32_to_fp16(1.0f + 3 * ldexpf(1, -11)), 0x3C02);
    CHECK_EQ_INT(f32_to_fp16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3C01);
    CHECK_EQ_INT(f32_to_fp16(1.0f + ldexpf(1, -11) - ldexpf(1, -20)), 0x3C00);
    /* top of the range: 65520 is the midpoint to "65536", so it rounds to inf */
    CHECK_EQ_INT(f32_to_fp16(65504.0f), 0x7BFF);
    CHECK_EQ_INT(f32_to_fp16(65519.0f), 0x7BFF);
    CHECK_EQ_INT(f32_to_fp16(65520.0f), 0x7C00);
    CHECK_EQ_INT(f32_to_fp16(1e6f), 0x7C00);
    CHECK_EQ_INT(f32_to_fp16(-1e6f), 0xFC00);
    CHECK_EQ_INT(f32_to_fp16(INFINITY), 0x7C00);
    CHECK_EQ_INT(f32_to_fp16(-INFINITY), 0xFC00);
    uint16_t n = f32_to_fp16(NAN);
    CHECK((n & 0x7C00) == 0x7C00 && (n & 0x03FF) != 0);
    n = f32_to_fp16(from_bits(0x7F800001)); /* a nan whose payload is lost in 10 bits */
    CHECK((n & 0x7C00) == 0x7C00 && (n & 0x03FF) != 0);
    /* subnormals: units of 2^-24 */
    CHECK_EQ_INT(f32_to_fp16(ldexpf(1, -14)), 0x0400);
    CHECK_EQ_INT(f32_to_fp16(ldexpf(1, -15)), 0x0200);
    CHECK_EQ_INT(f32_to_fp16(ldexpf(1, -24)), 0x0001);
    CHECK_EQ_INT(f32_to_fp16(ldexpf(1, -25)), 0x0000);         /* tie with 0 -> even */
    CHECK_EQ_INT(f32_to_fp16(1.5f * ldexpf(1, -25)), 0x0001);
    CHECK_EQ_INT(f32_to_fp16(3 * ldexpf(1, -25)), 0x0002);     /* 1.5 units -> 2 */
    CHECK_EQ_INT(f32_to_fp16(5 * ldexpf(1, -25)), 0x0002);     /* 2.5 units -> 2 */
    CHECK_EQ_INT(f32_to_fp16(1023.5f * ldexpf(1, -24)), 0x0400); /* rounds up into the normals */
    CHECK_EQ_INT(f32_to_fp16(ldexpf(1, -26)), 0x0000);
    CHECK_EQ_INT(f32_to_fp16(-ldexpf(1, -24)), 0x8001);
    CHECK_EQ_INT(f32_to_fp16(from_bits(1)), 0x0000);           /* f32 subnormal */
}

TEST(dtype_fp16_round_trip_all) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (f32_to_fp16(f) != h && bad++ < 5) CHECK_MSG(0, "fp16 0x%04x -> %g -> 0x%04x", h, f, f32_to_fp16(f));
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(dtype_bf16_values) {
    CHECK(bf16_to_f32(0x3F80) == 1.0f);
    CHECK(bf16_to_f32(0xC040) == -3.0f);
    CHECK(bf16_to_f32(0x4049) == 3.140625f);
    CHECK(bf16_to_f32(0x0001) == ldexpf(1, -133)); /* subnormal */
    CHECK(isinf(bf16_to_f32(0x7F80)));
    CHECK(isnan(bf16_to_f32(0x7FC0)));
    CHECK_EQ_INT(f32_to_bf16(1.0f), 0x3F80);
    CHECK_EQ_INT(f32_to_bf16(-3.0f), 0xC040);
    CHECK_EQ_INT(f32_to_bf16(3.14159265f), 0x4049);
    CHECK_EQ_INT(f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);     /* tie -> even */
    CHECK_EQ_INT(f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3F82); /* tie -> even */
    CHECK_EQ_INT(f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3F81);
    CHECK_EQ_INT(f32_to_bf16(ldexpf(1, -133)), 0x0001);
    CHECK_EQ_INT(f32_to_bf16(from_bits(0x7F7FFFFF)), 0x7F80);    /* FLT_MAX rounds to inf */
    CHECK_EQ_INT(f32_to_bf16(INFINITY), 0x7F80);
    CHECK_EQ_INT(f32_to_bf16(-INFINITY), 0xFF80);
    CHECK_EQ_INT(f32_to_bf16(-0.0f), 0x8000);
    /* a nan whose payload sits only in the low 16 bits must not become inf */
    CHECK(isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7F800001)))));
    CHECK(isnan(bf16_to_f32(f32_to_bf16(from_bits(0xFFFFFFFF)))));
    CHECK(isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(dtype_bf16_round_trip_all) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (to_bits(f) != h << 16) bad++;
        if (f32_to_bf16(f) != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

/* ---- dequantization ------------------------------------------------------- */

TEST(dtype_dequant_f32) {
    uint8_t b[12] = {0x00, 0x00, 0xC0, 0x3F,  /* 0x3FC00000 = 1.5 */
                     0x00, 0x00, 0x00, 0xC0,  /* 0xC0000000 = -2 */
                     0x00, 0x00, 0x80, 0x7F}; /* 0x7F800000 = inf */
    float y[3];
    dequant_row(DT_F32, b, y, 3);
    CHECK(y[0] == 1.5f);
    CHECK(y[1] == -2.0f);
    CHECK(isinf(y[2]));
}

TEST(dtype_dequant_f16_bf16) {
    uint8_t h[10] = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x00, 0x7C, 0xFF, 0x7B};
    float y[5];
    dequant_row(DT_F16, h, y, 5);
    CHECK(y[0] == 1.0f);
    CHECK(y[1] == -2.0f);
    CHECK(y[2] == ldexpf(1, -24));
    CHECK(isinf(y[3]));
    CHECK(y[4] == 65504.0f);
    uint8_t bf[8] = {0x80, 0x3F, 0x40, 0xC0, 0x49, 0x40, 0x01, 0x00};
    dequant_row(DT_BF16, bf, y, 4);
    CHECK(y[0] == 1.0f);
    CHECK(y[1] == -3.0f);
    CHECK(y[2] == 3.140625f);
    CHECK(y[3] == ldexpf(1, -133));
}

TEST(dtype_dequant_q8_0) {
    /* two blocks: d = 0.5 (f16 0x3800) then d = -0.25 (f16 0xB400) */
    uint8_t b[68];
    put_u16(b, 0x3800);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(j - 16);
    b[2] = 0x80;   /* -128 */
    b[33] = 0x7F;  /* 127 */
    put_u16(b + 34, 0xB400);
    for (int j = 0; j < 32; j++) b[36 + j] = (uint8_t)(int8_t)(3 * j - 50);
    float y[64];
    dequant_row(DT_Q8_0, b, y, 64);
    CHECK(y[0] == -128 * 0.5f);
    CHECK(y[31] == 127 * 0.5f);
    for (int j = 1; j < 31; j++) CHECK_NEAR(y[j], (j - 16) * 0.5f, 0); /* y = q * d */
    for (int j = 0; j < 32; j++) CHECK_NEAR(y[32 + j], (3 * j - 50) * -0.25f, 0);
}

TEST(dtype_dequant_q4_0) {
    /* d = 0.5; byte j holds element j in its low nibble and j + 16 in its high one */
    uint8_t b[36];
    put_u16(b, 0x3800);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)((j & 0xF) | ((15 - j) << 4));
    put_u16(b + 18, 0x4000); /* second block: d = 2 */
    for (int j = 0; j < 16; j++) b[20 + j] = (uint8_t)(0x0F | (0 << 4)); /* q = 15 and 0 */
    float y[64];
    dequant_row(DT_Q4_0, b, y, 64);
    CHECK(y[0] == -4.0f);   /* (0 - 8) * 0.5 */
    CHECK(y[15] == 3.5f);   /* (15 - 8) * 0.5 */
    CHECK(y[16] == 3.5f);   /* high nibble of byte 0 is 15 */
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(y[j], (j - 8) * 0.5f, 0);
        CHECK_NEAR(y[j + 16], ((15 - j) - 8) * 0.5f, 0);
        CHECK_NEAR(y[32 + j], (15 - 8) * 2.0f, 0);
        CHECK_NEAR(y[48 + j], (0 - 8) * 2.0f, 0);
    }
}

/* Q4_K scales and mins of the 8 sub-blocks, and the 12 bytes that pack them,
 * worked out by hand:
 *   bytes 0-3:  sc[j] | (sc[j+4] >> 4) << 6
 *   bytes 4-7:  mn[j] | (mn[j+4] >> 4) << 6
 *   bytes 8-11: (sc[j+4] & 15) | (mn[j+4] & 15) << 4
 * sc[4..7] = 33 (10 0001), 17 (01 0001), 48 (11 0000), 5 (00 0101)
 * mn[4..7] = 20 (01 0100),  1 (00 0001), 62 (11 1110), 40 (10 1000) */
static const int Q4K_SC[8] = {1, 2, 63, 10, 33, 17, 48, 5};
static const int Q4K_MN[8] = {0, 3, 7, 63, 20, 1, 62, 40};
static const uint8_t Q4K_PACKED[12] = {
    0x81, 0x42, 0xFF, 0x0A, /* 1|2<<6, 2|1<<6, 63|3<<6, 10|0<<6 */
    0x40, 0x03, 0xC7, 0xBF, /* 0|1<<6, 3|0<<6, 7|3<<6, 63|2<<6 */
    0x41, 0x11, 0xE0, 0x85, /* 1|4<<4, 1|1<<4, 0|14<<4, 5|8<<4 */
};

TEST(dtype_dequant_q4_k) {
    uint8_t b[2 * 144];
    put_u16(b, 0x3800);      /* d = 0.5 */
    put_u16(b + 2, 0x3400);  /* dmin = 0.25 */
    memcpy(b + 4, Q4K_PACKED, 12);
    for (int i = 0; i < 128; i++) b[16 + i] = (uint8_t)(i * 7 + 3);
    /* second super-block: same bytes, d = 1, dmin = 0 (tests the 144-byte stride) */
    memcpy(b + 144, b, 144);
    put_u16(b + 144, 0x3C00);
    put_u16(b + 146, 0x0000);
    float y[512];
    dequant_row(DT_Q4_K, b, y, 512);
    /* chunk c (64 outputs) uses qs[32c .. 32c+32): low nibbles with sub-block
     * 2c, then high nibbles with sub-block 2c+1: y = d*sc*q - dmin*mn */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int q = (32 * c + l) * 7 + 3;
            int lo = q & 0xF, hi = (q >> 4) & 0xF;
            CHECK_NEAR(y[64 * c + l], 0.5f * Q4K_SC[2 * c] * lo - 0.25f * Q4K_MN[2 * c], 0);
            CHECK_NEAR(y[64 * c + 32 + l], 0.5f * Q4K_SC[2 * c + 1] * hi - 0.25f * Q4K_MN[2 * c + 1], 0);
            CHECK_NEAR(y[256 + 64 * c + l], 1.0f * Q4K_SC[2 * c] * lo, 0);
            CHECK_NEAR(y[256 + 64 * c + 32 + l], 1.0f * Q4K_SC[2 * c + 1] * hi, 0);
        }
    /* spot checks by hand: qs[0] = 3 -> y[0] = 0.5*1*3 - 0.25*0 = 1.5;
     * y[32] = 0.5*2*0 - 0.25*3 = -0.75; qs[96] = 675 & 255 = 163 = 0xA3:
     * y[192] = 0.5*48*3 - 0.25*62 = 56.5, y[224] = 0.5*5*10 - 0.25*40 = 15 */
    CHECK(y[0] == 1.5f);
    CHECK(y[32] == -0.75f);
    CHECK(y[192] == 56.5f);
    CHECK(y[224] == 15.0f);
}

TEST(dtype_dequant_q6_k) {
    static const int8_t sc[16] = {1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 10, -10, 0, 64, -64, 2};
    uint8_t b[2 * 210];
    for (int i = 0; i < 128; i++) b[i] = (uint8_t)(i * 13 + 5);        /* ql */
    for (int i = 0; i < 64; i++) b[128 + i] = (uint8_t)(i * 29 + 7);   /* qh */
    memcpy(b + 192, sc, 16);
    put_u16(b + 208, 0x3800); /* d = 0.5, at the end of the block */
    memcpy(b + 210, b, 210);
    put_u16(b + 210 + 208, 0xC000); /* second block: d = -2 */
    float y[512];
    dequant_row(DT_Q6_K, b, y, 512);
    /* output k: half h = k / 128; within it quarter t = (k % 128) / 32 and
     * l = k % 32. The low 4 bits come from ql[64h + l + 32*(t & 1)], low
     * nibble for t < 2 and high nibble for t >= 2; the high 2 bits are bits
     * 2t, 2t+1 of qh[32h + l]; the scale is sc[8h + l/16 + 2t]; q is
     * 6-bit minus 32. */
    for (int blk = 0; blk < 2; blk++) {
        float d = blk ? -2.0f : 0.5f;
        for (int k = 0; k < 256; k++) {
            int h = k / 128, t = (k % 128) / 32, l = k % 32;
            int lbyte = (64 * h + l + 32 * (t & 1)) * 13 + 5;
            int low = t < 2 ? (lbyte & 0xF) : ((lbyte >> 4) & 0xF);
            int hbyte = ((32 * h + l) * 29 + 7) & 0xFF;
            int high = (hbyte >> (2 * t)) & 3;
            int q = (low | high << 4) - 32;
            float want = d * sc[8 * h + l / 16 + 2 * t] * q;
            CHECK_MSG(y[256 * blk + k] == want, "block %d element %d: %g != %g", blk, k,
                      y[256 * blk + k], want);
        }
    }
    /* by hand: ql[0] = 5, qh[0] = 7 = 0b00000111: element 0 has low 5, high
     * bits 11 -> q = 53 - 32 = 21, y = 0.5 * 1 * 21 = 10.5; element 64 uses the
     * high nibble of ql[0] (0) and bits 4-5 of qh[0] (0): q = -32, scale sc[4] = 5,
     * y = 0.5 * 5 * -32 = -80 */
    CHECK(y[0] == 10.5f);
    CHECK(y[64] == -80.0f);
}
