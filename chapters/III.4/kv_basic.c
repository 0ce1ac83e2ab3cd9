/* kv_basic.c: BasicKvCache, the simplest cache that works: per layer, K and V
 * are contiguous [seq_len, kv_dim] arrays, and every append allocates arrays
 * one row longer and copies the old rows over. Appending is O(seq_len), so a
 * whole generation copies O(n^2) floats: deliberately naive. Chapter III.4
 * keeps it to measure against the paged cache (kv_paged.c). */
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "util.h"

typedef struct {
    float *k;  /* [len, kv_dim] */
    float *v;  /* [len, kv_dim] */
    int len;
} BasicLayer;

typedef struct {
    KvCache base;
    BasicLayer *layers;  /* [n_layers] */
} BasicKvCache;

static BasicKvCache *as_basic(const KvCache *kv) { return (BasicKvCache *)kv; }

static float *copy_rows(const float *src, int rows, int kv_dim) {
    size_t n = sizeof(float) * (size_t)rows * (size_t)kv_dim;
    float *dst = xmalloc(n);
    if (n) memcpy(dst, src, n);
    return dst;
}

static void basic_install(KvCache *kv, int layer, const float *k, const float *v, int n) {
    BasicLayer *L = &as_basic(kv)->layers[layer];
    free(L->k);
    free(L->v);
    L->k = copy_rows(k, n, kv->kv_dim);
    L->v = copy_rows(v, n, kv->kv_dim);
    L->len = n;
}

/* Grows one array by one row: allocate, copy the old rows, add the new one. */
/* EXERCISE kv-grow "Grow an array by one row" 2 points; tests: II2_basic_cache_install II2_decode_matches */
static float *grow_by_one_row(float *old, int len, const float *row, int kv_dim) {
    float *grown = xmalloc(sizeof(float) * (size_t)(len + 1) * (size_t)kv_dim);
    if (len) memcpy(grown, old, sizeof(float) * (size_t)len * (size_t)kv_dim);
    memcpy(grown + (size_t)len * kv_dim, row, sizeof(float) * (size_t)kv_dim);
    free(old);
    return grown;
}

/* EXERCISE kv-append "Append a position to one layer" 1 point; tests: II2_basic_cache II2_decode_matches */
static void basic_append(KvCache *kv, int layer, const float *k, const float *v) {
    BasicLayer *L = &as_basic(kv)->layers[layer];
    L->k = grow_by_one_row(L->k, L->len, k, kv->kv_dim);
    L->v = grow_by_one_row(L->v, L->len, v, kv->kv_dim);
    L->len++;
}

static int basic_view(KvCache *kv, int layer, KvSpan *spans, int max) {
    BasicLayer *L = &as_basic(kv)->layers[layer];
    if (max >= 1) spans[0] = (KvSpan){L->k, L->v, L->len};
    return 1;
}

static int basic_seq_len(const KvCache *kv) {
    return as_basic(kv)->layers[kv->n_layers - 1].len;
}

/* Room is whatever malloc gives: nothing to reserve. */
static int basic_reserve(KvCache *kv, int n_more, char *err) {
    return 0;
}

/* Shorter arrays would only be copies: the rows past n are just not counted. */
static void basic_truncate(KvCache *kv, int n) {
    for (int l = 0; l < kv->n_layers; l++) {
        BasicLayer *L = &as_basic(kv)->layers[l];
        if (L->len > n) L->len = n < 0 ? 0 : n;
    }
}

static void basic_destroy(KvCache *kv) {
    BasicKvCache *b = as_basic(kv);
    for (int l = 0; l < kv->n_layers; l++) {
        free(b->layers[l].k);
        free(b->layers[l].v);
    }
    free(b->layers);
    free(b);
}

KvCache *kv_basic_create(const Qwen3Config *c) {
    BasicKvCache *b = xcalloc(1, sizeof *b);
    b->base = (KvCache){
        .kind = "basic", .n_layers = c->n_layers, .kv_dim = c->kv_dim,
        .install = basic_install, .append = basic_append, .view = basic_view,
        .seq_len = basic_seq_len, .reserve = basic_reserve, .truncate = basic_truncate,
        .destroy = basic_destroy,
    };
    b->layers = xcalloc((size_t)c->n_layers, sizeof *b->layers);
    return &b->base;
}
