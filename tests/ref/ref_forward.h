/* ref_forward.h: an independent float64 Qwen3 forward pass for tests: every
 * weight dequantized to double, every sum in double, written as plainly as
 * the pseudocode of book/appendix-gguf.md A.5. Slow, and only for small models. */
#ifndef REF_FORWARD_H
#define REF_FORWARD_H

#include <stdint.h>

#include "qwen3.h"

/* logits[vocab] for the token after tokens[0..n). */
void ref_forward(const Qwen3Model *m, const int32_t *tokens, int n, double *logits);

#endif
