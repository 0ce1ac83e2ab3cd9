/* quant.h: quantization of float rows into the GGUF weight types, the inverse
 * of dequant_row (dtype.h). Used to write model files. The schemes are plain
 * round to nearest (scales from each block's extremes, no importance matrix,
 * no search for better scales), so dequant_row of the result is close to the
 * input but not what llama-quantize would write for the same weights. */
#ifndef QUANT_H
#define QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"

/* True for the types quant_row can write: every type dtype_supported says the
 * engine runs. */
bool quant_supported(DType t);

/* dst (dtype_row_bytes(t, n) bytes) = src[0..n) in type t. n must be a multiple
 * of t's block size and t must be quant_supported; anything else is a caller
 * bug and ends the process with a message. */
void quant_row(DType t, const float *src, void *dst, int64_t n);

#endif
