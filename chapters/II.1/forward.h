/* forward.h: chapter II.1's forward pass. There is no cache: every call
 * recomputes the whole sequence, so step t costs as much as a prompt of t
 * tokens. That growing cost is what the harness measures. */
#ifndef FORWARD_H
#define FORWARD_H

#include <stdint.h>

#include "backend.h"
#include "qwen3.h"

/* logits[vocab] = the model's prediction for the token after tokens[0..n). */
void forward(const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, float *logits);

#endif
