/* forward.h: chapter III.4's forward passes. forward() is II.1's full
 * recompute; forward_extend() runs new tokens after those a KV cache holds,
 * which makes the prompt's prefill, each decode step and a chat's next turn
 * one and the same call. */
#ifndef FORWARD_H
#define FORWARD_H

#include <stdint.h>

#include "backend.h"
#include "kv_cache.h"
#include "qwen3.h"

/* logits[vocab] = the model's prediction for the token after tokens[0..n). */
void forward(const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, float *logits);

/* Runs tokens[0..n) at positions p..p+n-1, where p = kv->seq_len(kv): every
 * layer's keys and values of the new positions join the cache, and logits
 * gets the prediction after the last one, bit for bit what forward() gives
 * for the whole sequence. Returns -1 with err if the cache has no room for n
 * more positions; then nothing has changed. */
int forward_extend(const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n, float *logits,
                   char *err);

#endif
