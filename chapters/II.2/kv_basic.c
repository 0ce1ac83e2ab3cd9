/* kv_basic.c: BasicKvCache, the simplest cache that works: per layer, K and V
 * are contiguous [seq_len, kv_dim] arrays, and every append allocates arrays
 * one row longer and copies the old rows over. Appending is O(seq_len), so a
 * whole generation copies O(n^2) floats: deliberately naive, measured and
 * removed in chapter III.4. */
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

struct KvSnapshot {
    int n_layers, kv_dim;
    BasicLayer *layers;
};

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

static KvSnapshot *basic_snapshot(const KvCache *kv) {
    KvSnapshot *s = xmalloc(sizeof *s);
    s->n_layers = kv->n_layers;
    s->kv_dim = kv->kv_dim;
    s->layers = xcalloc((size_t)kv->n_layers, sizeof *s->layers);
    for (int l = 0; l < kv->n_layers; l++) {
        const BasicLayer *L = &as_basic(kv)->layers[l];
        s->layers[l] = (BasicLayer){copy_rows(L->k, L->len, kv->kv_dim), copy_rows(L->v, L->len, kv->kv_dim),
                                    L->len};
    }
    return s;
}

static void basic_restore(KvCache *kv, const KvSnapshot *s) {
    for (int l = 0; l < kv->n_layers; l++)
        basic_install(kv, l, s->layers[l].k, s->layers[l].v, s->layers[l].len);
}

static void basic_snapshot_free(KvSnapshot *s) {
    if (!s) return;
    for (int l = 0; l < s->n_layers; l++) {
        free(s->layers[l].k);
        free(s->layers[l].v);
    }
    free(s->layers);
    free(s);
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
        .seq_len = basic_seq_len, .snapshot = basic_snapshot, .restore = basic_restore,
        .snapshot_free = basic_snapshot_free, .destroy = basic_destroy,
    };
    b->layers = xcalloc((size_t)c->n_layers, sizeof *b->layers);
    return &b->base;
}
