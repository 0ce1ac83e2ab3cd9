/* dtype.h: the tensor element types of GGUF files (ggml types): their block
 * layouts, F16/BF16 conversion, and dequantization of a row to float. */
#ifndef DTYPE_H
#define DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    DT_F32 = 0, DT_F16 = 1, DT_Q4_0 = 2, DT_Q4_1 = 3, DT_Q5_0 = 6, DT_Q5_1 = 7,
    DT_Q8_0 = 8, DT_Q8_1 = 9, DT_Q2_K = 10, DT_Q3_K = 11, DT_Q4_K = 12, DT_Q5_K = 13,
    DT_Q6_K = 14, DT_Q8_K = 15, DT_BF16 = 30,
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
int dtype_block_size(uint32_t t);   /* elements per block */
int dtype_block_bytes(uint32_t t);  /* bytes per block */
/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t dtype_row_bytes(uint32_t t, int64_t n);

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* dst[0..n) = the n elements starting at src, a row of type t. */
void dequant_row(uint32_t t, const void *src, float *dst, int64_t n);

#endif
