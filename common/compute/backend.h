/* backend.h: where the heavy math runs. A chapter's forward pass calls
 * matmul() and attention() through a Backend, and hands it its per-row
 * steps (for_rows, through rows.h); which one (scalar, simd, parallel) is
 * chosen at start-up, so faster kernels and threads never touch a chapter.
 *
 * The rule every backend keeps: an output element is computed by one fixed
 * sequence of operations whatever the batch size or thread count, so logits
 * are bitwise identical across chapters, cache kinds, batches and threads. */
#ifndef BACKEND_H
#define BACKEND_H

#include "qwen3.h"
#include "tensor.h"

/* A run of n consecutive cached positions: row j of k and v holds the key and
 * value of one position, kv_dim = n_kv_heads * head_dim floats each. */
typedef struct {
    const float *k; /* [n, kv_dim] */
    const float *v; /* [n, kv_dim] */
    int n;
} KvSpan;

/* The shape of an attention call. */
typedef struct {
    int n_heads, n_kv_heads, head_dim;
} AttnShape;

typedef struct Backend Backend;
typedef void (*RowFn)(void *arg, int i);
struct Backend {
    const char *name;
    int n_threads;
    /* y[n, out] = x[n, in] . W[out, in]^T, W read in its stored type. */
    void (*matmul)(Backend *be, float *y, const float *x, const Tensor *w, int n);
    /* out[n_heads*head_dim] = causal attention of one query q[n_heads*head_dim]
     * over the keys/values of the spans, in position order. */
    void (*attention)(Backend *be, float *out, const float *q, const KvSpan *spans, int n_spans,
                      AttnShape s);
    /* fn(arg, i) for every row i in [0, n), in any order and on any thread:
     * the small per-row work of a many-row forward (see rows.h). fn must not
     * call the backend itself: its threads are the ones running fn. */
    void (*for_rows)(Backend *be, int n, RowFn fn, void *arg);
    void (*destroy)(Backend *be);
    void *impl;
};

/* name: "scalar", "simd", "parallel", or NULL for the fastest available.
 * n_threads <= 0 means one per core. Returns NULL with err on an unknown name,
 * or when more than one thread is asked of a one-thread backend (scalar, simd). */
Backend *backend_create(const char *name, int n_threads, char *err);
void backend_free(Backend *be);
/* The names this build knows, for --help and error messages. */
const char *backend_names(void);

static inline void matmul(Backend *be, float *y, const float *x, const Tensor *w, int n) {
    be->matmul(be, y, x, w, n);
}

static inline void attention(Backend *be, float *out, const float *q, const KvSpan *spans,
                             int n_spans, AttnShape s) {
    be->attention(be, out, q, spans, n_spans, s);
}

static inline void for_rows(Backend *be, int n, RowFn fn, void *arg) { be->for_rows(be, n, fn, arg); }

/* The one-thread for_rows: rows in order on the calling thread. */
void rows_in_order(Backend *be, int n, RowFn fn, void *arg);

/* The scalar kernels, shared by backends as their reference and fallback. */
void scalar_matmul_rows(float *y, const float *x, const Tensor *w, int n, int row_begin, int row_end);
void scalar_attention_heads(float *out, const float *q, const KvSpan *spans, int n_spans,
                            AttnShape s, int head_begin, int head_end);
Backend *backend_scalar_create(void);

/* Loading a model for these kernels (load.c): opens the GGUF and reads the
 * model (qwen3_from_gguf), then qwen3_place_matrices. On failure returns
 * non-zero with err naming the file and what is wrong, and *m holds nothing
 * to free. */
int qwen3_load(Qwen3Model *m, const char *path, char *err);
/* Copies every matrix into one region on huge pages and points its Tensor
 * there: at its tiles (tiles.h) where this machine's kernels read Q8_0, Q4_0
 * and Q4_1 from tiles, at its rows otherwise. When the machine has not
 * that much memory available, does nothing. The weights are the same bytes
 * either way. qwen3_free frees it. */
void qwen3_place_matrices(Qwen3Model *m);

#endif
