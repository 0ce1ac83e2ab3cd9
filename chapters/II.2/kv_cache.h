/* kv_cache.h: the KV cache interface. A cache keeps, for every layer, the key
 * and value rows of the positions seen so far, so a decode step computes K and
 * V for one new token only and reads the past from the cache.
 *
 * The interface is a struct of function pointers so that the forward pass does
 * not care how rows are stored: II.2 keeps one contiguous array per layer
 * (BasicKvCache); later chapters store fixed-size blocks. */
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include "backend.h"
#include "qwen3.h"

typedef struct KvCache KvCache;
typedef struct KvSnapshot KvSnapshot;

struct KvCache {
    const char *kind;  /* "basic", ... */
    int n_layers;
    int kv_dim;        /* floats in one key (or value) row */
    /* Stores rows [0, n) of a layer at once, after a prefill. The layer must be empty. */
    void (*install)(KvCache *kv, int layer, const float *k, const float *v, int n);
    /* Appends one position's key and value row to a layer. */
    void (*append)(KvCache *kv, int layer, const float *k, const float *v);
    /* The layer's keys and values, in position order, as spans for attention().
     * Writes at most max spans; returns how many there are. */
    int (*view)(KvCache *kv, int layer, KvSpan *spans, int max);
    /* Positions held by every layer. */
    int (*seq_len)(const KvCache *kv);
    /* A copy of the whole state, and putting one back. */
    KvSnapshot *(*snapshot)(const KvCache *kv);
    void (*restore)(KvCache *kv, const KvSnapshot *snap);
    void (*snapshot_free)(KvSnapshot *snap);
    void (*destroy)(KvCache *kv);
};

/* The cache kinds this chapter knows, NULL-terminated; the first is the default. */
extern const char *const KV_KINDS[];

/* A cache of the given kind sized for the model; NULL with err if the kind is unknown. */
KvCache *kv_cache_create(const char *kind, const Qwen3Config *c, char *err);
void kv_cache_free(KvCache *kv);

KvCache *kv_basic_create(const Qwen3Config *c);

#endif
