/* dtype.h: the tensor element types of GGUF files (ggml types): their block
 * layouts, F16/BF16 conversion, and dequantization of a row to float.
 *
 * The types this engine runs, bytes per block of elements (bits per weight):
 *   F32 4/1 (32), F16 2/1 (16), BF16 2/1 (16)
 *   32-element blocks, one F16 scale d (and a min m for the _1 types):
 *     Q8_0 34 (8.5), Q4_0 18 (4.5), Q4_1 20 (5), Q5_0 22 (5.5), Q5_1 24 (6),
 *     IQ4_NL 18 (4.5: 4-bit indices into a fixed table of 16 values)
 *   K-quants, super-blocks of 256 with small per-sub-block scales:
 *     Q2_K 84 (2.625), Q3_K 110 (3.4375), Q4_K 144 (4.5), Q5_K 176 (5.5),
 *     Q6_K 210 (6.5625), IQ4_XS 136 (4.25)
 * dtype.c shows each layout byte by byte above its dequantizer. Every other
 * ggml type (IQ1/IQ2/IQ3, TQ, MXFP4...) is known by name and size only. */
#ifndef DTYPE_H
#define DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    DT_F32 = 0, DT_F16 = 1, DT_Q4_0 = 2, DT_Q4_1 = 3, DT_Q5_0 = 6, DT_Q5_1 = 7,
    DT_Q8_0 = 8, DT_Q8_1 = 9, DT_Q2_K = 10, DT_Q3_K = 11, DT_Q4_K = 12, DT_Q5_K = 13,
    DT_Q6_K = 14, DT_Q8_K = 15, DT_IQ4_NL = 20, DT_IQ4_XS = 23, DT_BF16 = 30,
} DType;

#define QK 32    /* elements per block of the 32-element formats */
#define QK_K 256 /* elements per K-quant super-block */

/* Block structs, byte-exact with the file layout. */
typedef struct { uint16_t d; uint8_t qs[QK / 2]; } BlockQ4_0;            /* 18 B */
typedef struct { uint16_t d; int8_t qs[QK]; } BlockQ8_0;                 /* 34 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; } BlockQ4_K; /* 144 B */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } BlockQ6_K; /* 210 B */

/* Name ("Q8_0"), or NULL if t is not a type this engine knows. */
const char *dtype_name(uint32_t t);
/* True if rows of this type can be dequantized and multiplied. */
bool dtype_supported(uint32_t t);
/* "F32, F16, BF16, Q8_0, ...": the supported types, for error messages. */
const char *dtype_supported_names(void);
int dtype_block_size(uint32_t t);   /* elements per block */
int dtype_block_bytes(uint32_t t);  /* bytes per block */
/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t dtype_row_bytes(uint32_t t, int64_t n);

/* The 16 values a 4-bit IQ4_NL / IQ4_XS index stands for (before the scale):
 * denser near zero, where most weights are. */
extern const int8_t IQ4_VALUES[16];

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K or Q5_K super-block,
 * from its 12 packed bytes s (the layout is drawn in dtype.c). */
static inline void dtype_scale_min_k4(int j, const uint8_t *s, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* The signed scale (-32..31) of sub-block i (0..15) of a Q3_K super-block,
 * from its 12 packed bytes s: 4 low bits in a nibble of s[0..7], 2 high bits
 * in s[8..11]. */
static inline int dtype_scale_q3_k(int i, const uint8_t *s) {
    int lo = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
    int hi = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The signed scale (-32..31) of sub-block ib (0..7) of an IQ4_XS super-block
 * b: 4 low bits in a nibble of b[4..7], 2 high bits in the u16 at b + 2. */
static inline int dtype_scale_iq4_xs(int ib, const uint8_t *b) {
    int lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
    int hi = (((int)b[2] | ((int)b[3] << 8)) >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* dst[0..n) = the n elements starting at src, a row of type t. */
void dequant_row(uint32_t t, const void *src, float *dst, int64_t n);

#endif
