/* test_dtype.c: element types (common/model/dtype.c). Every quantized block here is
 * built byte by byte and every expected value comes from the format's formula
 * (book/appendix-gguf.md A.3) written out again in the test. */
#include <math.h>
#include <stdio.h>
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
    CHECK_STR(dtype_name(DT_Q4_1), "Q4_1");
    CHECK_STR(dtype_name(DT_Q5_0), "Q5_0");
    CHECK_STR(dtype_name(DT_Q5_1), "Q5_1");
    CHECK_STR(dtype_name(DT_Q2_K), "Q2_K");
    CHECK_STR(dtype_name(DT_Q3_K), "Q3_K");
    CHECK_STR(dtype_name(DT_Q5_K), "Q5_K");
    CHECK_STR(dtype_name(DT_IQ4_NL), "IQ4_NL");
    CHECK_STR(dtype_name(DT_IQ4_XS), "IQ4_XS");
    CHECK_STR(dtype_name(16), "IQ2_XXS");
    CHECK_STR(dtype_name(39), "MXFP4");
    CHECK(dtype_name(4) == NULL);  /* removed Q4_2 */
    CHECK(dtype_name(5) == NULL);  /* removed Q4_3 */
    CHECK(dtype_name(31) == NULL);
    CHECK(dtype_name(99) == NULL);
    CHECK(dtype_name(UINT32_MAX) == NULL);
}

TEST(dtype_supported_types) {
    uint32_t yes[] = {DT_F32,  DT_F16,  DT_BF16, DT_Q4_0, DT_Q8_0, DT_Q4_K,   DT_Q6_K,  DT_Q4_1,
                      DT_Q5_0, DT_Q5_1, DT_Q2_K, DT_Q3_K, DT_Q5_K, DT_IQ4_NL, DT_IQ4_XS};
    uint32_t no[] = {DT_Q8_1, DT_Q8_K, 16, 17, 18, 19, 21, 22, 24, 29, 34, 35, 39, 40, 41, 4, 5, 31, 99, UINT32_MAX};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        CHECK_MSG(dtype_supported(yes[i]), "type %u should be supported", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECK_MSG(!dtype_supported(no[i]), "type %u should not be supported", no[i]);
    /* the list named in error messages is exactly the supported types */
    char list[256];
    snprintf(list, sizeof list, "%s", dtype_supported_names());
    int listed = 0;
    for (char *name = strtok(list, ", "); name; name = strtok(NULL, ", "), listed++) {
        bool found = false;
        for (uint32_t t = 0; t < 64; t++) found |= dtype_name(t) && strcmp(dtype_name(t), name) == 0 && dtype_supported(t);
        CHECK_MSG(found, "'%s' is listed but not a supported type", name);
    }
    CHECK_EQ_INT(listed, (int)(sizeof yes / sizeof yes[0]));
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
    /* bytes per block: the layouts of dtype.c add up to ggml's sizes */
    CHECK_EQ_INT(dtype_block_bytes(DT_Q4_1), 2 + 2 + 16);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q5_0), 2 + 4 + 16);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q5_1), 2 + 2 + 4 + 16);
    CHECK_EQ_INT(dtype_block_bytes(DT_IQ4_NL), 2 + 16);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q2_K), 16 + 64 + 2 + 2);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q3_K), 32 + 64 + 12 + 2);
    CHECK_EQ_INT(dtype_block_bytes(DT_Q5_K), 2 + 2 + 12 + 32 + 128);
    CHECK_EQ_INT(dtype_block_bytes(DT_IQ4_XS), 2 + 2 + 4 + 128);
    CHECK_EQ_INT(dtype_block_size(DT_IQ4_NL), 32);
    CHECK_EQ_INT(dtype_block_size(DT_IQ4_XS), 256);
    CHECK_EQ_INT(dtype_block_size(DT_Q2_K), 256);
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

/* ---- the types added for llama.cpp's mixes -------------------------------- */

TEST(dtype_dequant_q4_1) {
    /* d = 0.5, m = -1.5 (f16 0xBE00); byte j: element j = j, element j + 16 = 15 - j */
    uint8_t b[20];
    put_u16(b, 0x3800);
    put_u16(b + 2, 0xBE00);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    dequant_row(DT_Q4_1, b, y, 32);
    for (int j = 0; j < 16; j++) { /* y = q * d + m */
        CHECK_NEAR(y[j], j * 0.5f - 1.5f, 0);
        CHECK_NEAR(y[j + 16], (15 - j) * 0.5f - 1.5f, 0);
    }
    CHECK(y[0] == -1.5f);  /* code 0 is the minimum itself */
    CHECK(y[16] == 6.0f);  /* 15 * 0.5 - 1.5 */
}

/* The bits of a little-endian u32 at p, the way Q5_0 / Q5_1 keep their fifth bits. */
static uint32_t u32_at(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

TEST(dtype_dequant_q5_0) {
    uint8_t b[44];
    put_u16(b, 0x3400); /* d = 0.25 */
    b[2] = 0xC3, b[3] = 0xA5, b[4] = 0xF0, b[5] = 0xF0; /* qh = 0xF0F0A5C3 */
    for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)(j * 7 + 3);
    memcpy(b + 22, b, 22);
    put_u16(b + 22, 0xC000); /* second block: d = -2 */
    float y[64];
    dequant_row(DT_Q5_0, b, y, 64);
    for (int blk = 0; blk < 2; blk++) {
        const uint8_t *p = b + 22 * blk;
        float d = blk ? -2.0f : 0.25f;
        uint32_t qh = u32_at(p + 2);
        for (int j = 0; j < 16; j++) { /* q = nibble | bit << 4, y = (q - 16) * d */
            int q0 = (p[6 + j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int q1 = (p[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            CHECK_NEAR(y[32 * blk + j], (q0 - 16) * d, 0);
            CHECK_NEAR(y[32 * blk + j + 16], (q1 - 16) * d, 0);
        }
    }
    /* by hand: qs[0] = 3 and bit 0 of 0xC3 is set: q = 19, y = 3 * 0.25; element
     * 16: high nibble of 3 is 0, bit 16 (bit 0 of 0xF0) clear: q = 0, y = -4 */
    CHECK(y[0] == 0.75f);
    CHECK(y[16] == -4.0f);
}

TEST(dtype_dequant_q5_1) {
    uint8_t b[24];
    put_u16(b, 0x3800);     /* d = 0.5 */
    put_u16(b + 2, 0x3C00); /* m = 1 */
    b[4] = 0x78, b[5] = 0x56, b[6] = 0x34, b[7] = 0x12; /* qh = 0x12345678 */
    for (int j = 0; j < 16; j++) b[8 + j] = (uint8_t)(j * 11 + 2);
    float y[32];
    dequant_row(DT_Q5_1, b, y, 32);
    for (int j = 0; j < 16; j++) {
        int q0 = (b[8 + j] & 0xF) | (int)((0x12345678u >> j) & 1) << 4;
        int q1 = (b[8 + j] >> 4) | (int)((0x12345678u >> (j + 16)) & 1) << 4;
        CHECK_NEAR(y[j], q0 * 0.5f + 1.0f, 0);
        CHECK_NEAR(y[j + 16], q1 * 0.5f + 1.0f, 0);
    }
    /* by hand: qs[0] = 2, bit 0 of 0x78 clear: q = 2, y = 2; element 19:
     * qs[3] = 35 = 0x23, low nibble 3, bit 3 of 0x78 set: q = 19, y = 10.5 */
    CHECK(y[0] == 2.0f);
    CHECK(y[3] == 10.5f);
}

static const float IQ4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(dtype_dequant_iq4_nl) {
    uint8_t b[18];
    put_u16(b, 0x4000); /* d = 2 */
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    dequant_row(DT_IQ4_NL, b, y, 32);
    for (int j = 0; j < 16; j++) { /* the nibble is an index into the table */
        CHECK_NEAR(y[j], 2 * IQ4[j], 0);
        CHECK_NEAR(y[j + 16], 2 * IQ4[15 - j], 0);
    }
    CHECK(y[0] == -254.0f);
    CHECK(y[15] == 226.0f);
    CHECK(y[16] == 226.0f);
    for (int i = 0; i < 16; i++) CHECK_EQ_INT(IQ4_VALUES[i], (int)IQ4[i]);
}

/* Q2_K, as book/appendix-gguf.md A.3.5 words it: for half h and pass j (shift 2j), 16
 * outputs from q[0..15] with scales[8h + 2j], then 16 from q[16..31] with
 * scales[8h + 2j + 1]; y = d * (s & 15) * q - dmin * (s >> 4). */
TEST(dtype_dequant_q2_k) {
    uint8_t b[2 * 84];
    for (int j = 0; j < 16; j++) b[j] = (uint8_t)((j & 15) | (((j * 5 + 1) & 15) << 4));
    for (int i = 0; i < 64; i++) b[16 + i] = (uint8_t)(i * 37 + 11);
    put_u16(b + 80, 0x3800); /* d = 0.5 */
    put_u16(b + 82, 0x3400); /* dmin = 0.25 */
    memcpy(b + 84, b, 84);
    put_u16(b + 84 + 80, 0x4000); /* second block: d = 2, dmin = 0 */
    put_u16(b + 84 + 82, 0x0000);
    float y[512];
    dequant_row(DT_Q2_K, b, y, 512);
    for (int blk = 0; blk < 2; blk++) {
        const uint8_t *p = b + 84 * blk;
        float d = blk ? 2.0f : 0.5f, dmin = blk ? 0.0f : 0.25f;
        const float *o = y + 256 * blk;
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++) {
                    int s = p[8 * h + 2 * j + l / 16], q = (p[16 + 32 * h + l] >> (2 * j)) & 3;
                    CHECK_NEAR(*o++, d * (s & 15) * q - dmin * (s >> 4), 0);
                }
    }
    /* by hand: qs[0] = 11 = 0b1011; y[0]: bits 0-1 = 3, scales[0] = 0x10
     * (scale 0, min 1): -0.25; y[32]: bits 2-3 = 2, scales[2] = 0xB2 (scale 2,
     * min 11): 0.5*2*2 - 0.25*11 = -0.75 */
    CHECK(y[0] == -0.25f);
    CHECK(y[32] == -0.75f);
}

/* Q3_K scales: 16 signed 6-bit values, packed by hand (v = scale + 32):
 * v = 0 31 32 63 37 25 44 12 | 33 34 35 36 27 26 62 1
 * bytes 0-7: low nibble of v[i] | low nibble of v[i + 8] << 4
 * bytes 8-11: byte 8 + m holds the top 2 bits of v[m], v[m+4], v[m+8], v[m+12]
 * at bits 0, 2, 4, 6 */
static const int Q3K_SC[16] = {-32, -1, 0, 31, 5, -7, 12, -20, 1, 2, 3, 4, -5, -6, 30, -31};
static const uint8_t Q3K_PACKED[12] = {0x10, 0x2F, 0x30, 0x4F, 0xB5, 0xA9, 0xEC, 0x1C, 0x68, 0x65, 0xEA, 0x23};

TEST(dtype_dequant_q3_k) {
    for (int i = 0; i < 16; i++) CHECK_EQ_INT(dtype_scale_q3_k(i, Q3K_PACKED), Q3K_SC[i]);
    uint8_t b[110];
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(i * 53 + 7);      /* hmask */
    for (int i = 0; i < 64; i++) b[32 + i] = (uint8_t)(i * 29 + 1); /* qs */
    memcpy(b + 96, Q3K_PACKED, 12);
    put_u16(b + 108, 0x3800); /* d = 0.5 */
    float y[256];
    dequant_row(DT_Q3_K, b, y, 256);
    /* for half h, pass j: 16 outputs with scale[8h + 2j] from qs[32h + l] and
     * hmask[l] (l < 16), 16 with scale[8h + 2j + 1] (l = 16..31); the code is
     * the 2 bits at 2j minus 4 unless bit 4h + j of hmask[l] is set */
    const float *o = y;
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int low = (b[32 + 32 * h + l] >> (2 * j)) & 3;
                int q = low - ((b[l] >> (4 * h + j)) & 1 ? 0 : 4);
                CHECK_NEAR(*o++, 0.5f * Q3K_SC[8 * h + 2 * j + l / 16] * q, 0);
            }
    /* by hand: qs[0] = 1, hmask[0] = 7 (bit 0 set): q = 1, scale -32: -16;
     * y[32]: (1 >> 2) & 3 = 0, bit 1 of 7 set: q = 0 -> 0 */
    CHECK(y[0] == -16.0f);
    CHECK(y[32] == 0.0f);
}

TEST(dtype_dequant_q5_k) {
    uint8_t b[176];
    put_u16(b, 0x3C00);     /* d = 1 */
    put_u16(b + 2, 0x3800); /* dmin = 0.5 */
    memcpy(b + 4, Q4K_PACKED, 12);
    for (int i = 0; i < 32; i++) b[16 + i] = (uint8_t)(i * 11 + 5);  /* qh */
    for (int i = 0; i < 128; i++) b[48 + i] = (uint8_t)(i * 7 + 3); /* qs */
    float y[256];
    dequant_row(DT_Q5_K, b, y, 256);
    /* chunk c: outputs 64c + l from the low nibbles of qs[32c + l] plus 16 *
     * bit 2c of qh[l], then 64c + 32 + l from the high nibbles and bit 2c + 1 */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int qs = b[48 + 32 * c + l], qh = b[16 + l];
            int q1 = (qs & 0xF) + 16 * ((qh >> (2 * c)) & 1), q2 = (qs >> 4) + 16 * ((qh >> (2 * c + 1)) & 1);
            CHECK_NEAR(y[64 * c + l], 1.0f * Q4K_SC[2 * c] * q1 - 0.5f * Q4K_MN[2 * c], 0);
            CHECK_NEAR(y[64 * c + 32 + l], 1.0f * Q4K_SC[2 * c + 1] * q2 - 0.5f * Q4K_MN[2 * c + 1], 0);
        }
    /* by hand: qs[0] = 3, qh[0] = 5 (bit 0 set): q = 19, scale 1, min 0: 19 */
    CHECK(y[0] == 19.0f);
}

/* IQ4_XS scales, packed by hand (v = scale + 32 = 0 63 32 33 17 48 5 60):
 * scales_l: nibble of sub-block 2k low, 2k + 1 high: F0 10 01 C5;
 * scales_h: 2 bits per sub-block from bit 0: 0 3 2 2 1 3 0 3 = 0xCDAC */
static const int IQ4XS_SC[8] = {-32, 31, 0, 1, -15, 16, -27, 28};

TEST(dtype_dequant_iq4_xs) {
    uint8_t b[136];
    put_u16(b, 0x3800); /* d = 0.5 */
    put_u16(b + 2, 0xCDAC);
    b[4] = 0xF0, b[5] = 0x10, b[6] = 0x01, b[7] = 0xC5;
    for (int i = 0; i < 128; i++) b[8 + i] = (uint8_t)(i * 13 + 7);
    for (int s = 0; s < 8; s++) CHECK_EQ_INT(dtype_scale_iq4_xs(s, b), IQ4XS_SC[s]);
    float y[256];
    dequant_row(DT_IQ4_XS, b, y, 256);
    for (int s = 0; s < 8; s++)
        for (int j = 0; j < 16; j++) {
            int q = b[8 + 16 * s + j];
            CHECK_NEAR(y[32 * s + j], 0.5f * IQ4XS_SC[s] * IQ4[q & 15], 0);
            CHECK_NEAR(y[32 * s + j + 16], 0.5f * IQ4XS_SC[s] * IQ4[q >> 4], 0);
        }
    /* by hand: qs[0] = 7: element 0 is IQ4[7] = -10, element 16 IQ4[0] = -127,
     * scale 0.5 * -32 = -16 */
    CHECK(y[0] == 160.0f);
    CHECK(y[16] == 2032.0f);
}
