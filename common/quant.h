/* quant.h: quantization of float rows into the GGUF weight types, the inverse
 * of dequant_row (dtype.h). Used to write model files; the schemes are ggml's
 * round-to-nearest references (no importance matrix), so dequant_row of the
 * result is close to the input but not bit-identical to llama-quantize. */
#ifndef QUANT_H
#define QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"

/* True for the types quant_row can write: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K. */
bool quant_supported(DType t);

/* dst (dtype_row_bytes(t, n) bytes) = src[0..n) in type t. n must be a multiple
 * of t's block size and t must be quant_supported; anything else is a caller
 * bug and ends the process with a message. */
void quant_row(DType t, const float *src, void *dst, int64_t n);

#endif
