/* forward.h: chapter II.2's forward passes. forward() is II.1's full
 * recompute; with a KV cache, the prompt is read once by the prefill and
 * every further token costs one decode step over a single position. */
#ifndef FORWARD_H
#define FORWARD_H

#include <stdint.h>

#include "backend.h"
#include "kv_cache.h"
#include "qwen3.h"

/* logits[vocab] = the model's prediction for the token after tokens[0..n). */
void forward(const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, float *logits);

/* The same, storing every layer's keys and values of positions 0..n-1 in kv
 * (which must be empty). */
void forward_prefill_with_kv_cache(const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n,
                                   float *logits);

/* logits[vocab] for the token at position pos, given that kv holds exactly
 * positions 0..pos-1; appends this token's keys and values. Returns -1 with
 * err if the cache does not hold pos positions. */
int forward_decode_with_kv_cache(const Qwen3Model *m, Backend *be, KvCache *kv, int32_t token, int pos,
                                 float *logits, char *err);

#endif
