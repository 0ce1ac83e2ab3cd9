/* sequence.h: a sequence being generated, with its own KV cache. Everything
 * that runs the model goes through seq_extend: a prompt (a prefill), one
 * token (a decode step), a chat's next turn after the previous ones; the
 * engine never recomputes what its cache holds. */
#ifndef SEQUENCE_H
#define SEQUENCE_H

#include <stdint.h>

#include "backend.h"
#include "kv_cache.h"
#include "qwen3.h"

typedef struct {
    const Qwen3Model *model;
    Backend *be;
    KvCache *kv;       /* owned; holds positions 0..n_tokens-1 after seq_extend */
    int32_t *tokens;   /* [cap] */
    int n_tokens, cap;
    float *logits;     /* [vocab]: the prediction after tokens[n_tokens-1] */
} Sequence;

/* An empty sequence of at most cap tokens (1..the model's context) on kv,
 * which it owns from now on (it is freed here if this fails). -1 with err. */
int seq_init(Sequence *s, const Qwen3Model *m, Backend *be, KvCache *kv, int cap, char *err);
/* Runs toks[0..n) at positions n_tokens.. (a prefill when n > 1, a decode step when n == 1),
 * storing their K/V and leaving the last one's logits. Checks room first (cap, KV blocks):
 * -1 with err and nothing changed. Logits are bitwise those of a full recompute. */
int seq_extend(Sequence *s, const int32_t *toks, int n, char *err);
/* Rolls back to the first n tokens; logits are stale until the next seq_extend. */
void seq_truncate(Sequence *s, int n);
/* A new sequence holding src's first n tokens, their cache blocks shared by
 * reference (paged caches only). Its logits are src's when n == src->n_tokens,
 * else unknown until its next seq_extend. -1 with err. */
int seq_fork(Sequence *dst, const Sequence *src, int n, char *err);
/* Frees the cache (a paged one gives its blocks back to the pool). */
void seq_free(Sequence *s);

#endif
