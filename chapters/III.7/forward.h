/* forward.h: chapter III.7's forward passes. forward() is II.1's full
 * recompute; forward_extend() runs new tokens after those a KV cache holds,
 * which makes the prompt's prefill, each decode step and a chat's next turn
 * one and the same call; forward_decode_batch() runs one decode step for
 * many sequences at once. */
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

/* One decode step for B sequences, each on its own cache: tokens[i] runs at
 * position p_i = kvs[i]->seq_len(kvs[i]), its keys and values join kvs[i],
 * and logits[i * vocab ..] gets its prediction, bit for bit what
 * forward_extend() gives for that token alone. The B rows share every weight
 * matmul, so each weight is read from memory once for all of them; attention
 * stays per cache. Returns -1 with err naming the first cache without room
 * for one more position; then every cache holds what it held, the room
 * reserved in the others given back. */
int forward_decode_batch(const Qwen3Model *m, Backend *be, KvCache *const *kvs, const int32_t *tokens, int B,
                         float *logits, char *err);

#endif
