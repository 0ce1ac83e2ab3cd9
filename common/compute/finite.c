/* finite.c: see finite.h. */
#include "finite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

long finite_first(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (long)i;
    return -1;
}

typedef struct {
    Backend *inner;
    int layer;         /* of the last matmul: attention has no weight to name it */
    char report[256];  /* the first finding, "" until then */
} Checker;

/* What the input and output of a matmul with weight `name` hold, by its suffix. */
static const struct { const char *suffix, *in, *out; } BUFFERS[] = {
    {"attn_q.weight", "the attention input, after attn_norm", "the queries"},
    {"attn_k.weight", "the attention input, after attn_norm", "the keys"},
    {"attn_v.weight", "the attention input, after attn_norm", "the values"},
    {"attn_output.weight", "the attention output", "the attention block's output"},
    {"ffn_gate.weight", "the MLP input, after ffn_norm", "the MLP's gate projection"},
    {"ffn_up.weight", "the MLP input, after ffn_norm", "the MLP's up projection"},
    {"ffn_down.weight", "silu(gate) * up", "the MLP block's output"},
    {"output.weight", "the last position after output_norm", "the logits"},
    {"token_embd.weight", "the last position after output_norm", "the logits (tied embedding)"},
};

static void note(Checker *c, const char *where, const char *name, const char *what, const float *x, size_t n,
                 int cols) {
    long i = c->report[0] ? -1 : finite_first(x, n);
    if (i < 0) return;
    char layer[32] = "";
    if (c->layer >= 0) snprintf(layer, sizeof layer, "layer %d: ", c->layer);
    snprintf(c->report, sizeof c->report, "%sthe %s %s (%s) has %s at [%ld, %ld]", layer, where, name, what,
             isnan(x[i]) ? "NaN" : "Inf", i / cols, i % cols);
}

static void check_matmul(Backend *be, float *y, const float *x, const Tensor *w, int n) {
    Checker *c = be->impl;
    const char *name = w->name ? w->name : "a weight";
    int layer;
    if (sscanf(name, "blk.%d.", &layer) == 1) c->layer = layer;
    else if (strstr(name, "output") || strstr(name, "token_embd")) c->layer = -1;
    const char *in = "its input", *out = "its output";
    for (size_t k = 0; k < sizeof BUFFERS / sizeof BUFFERS[0]; k++) {
        size_t ls = strlen(name), lk = strlen(BUFFERS[k].suffix);
        if (ls >= lk && strcmp(name + ls - lk, BUFFERS[k].suffix) == 0) {
            in = BUFFERS[k].in;
            out = BUFFERS[k].out;
            break;
        }
    }
    note(c, "input of", name, in, x, (size_t)n * (size_t)w->ne[0], (int)w->ne[0]);
    c->inner->matmul(c->inner, y, x, w, n);
    note(c, "output of", name, out, y, (size_t)n * (size_t)w->ne[1], (int)w->ne[1]);
}

static void check_attention(Backend *be, float *out, const float *q, const KvSpan *spans, int n_spans,
                            AttnShape s) {
    Checker *c = be->impl;
    int q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
    note(c, "query of", "attention", "after q_norm and RoPE", q, (size_t)q_dim, q_dim);
    for (int i = 0; i < n_spans; i++) {
        note(c, "cached keys of", "attention", "after k_norm and RoPE", spans[i].k, (size_t)spans[i].n * kv_dim, kv_dim);
        note(c, "cached values of", "attention", "as stored", spans[i].v, (size_t)spans[i].n * kv_dim, kv_dim);
    }
    c->inner->attention(c->inner, out, q, spans, n_spans, s);
    note(c, "output of", "attention", "softmax(q.k) . v", out, (size_t)q_dim, q_dim);
}

static void check_rows(Backend *be, int n, RowFn fn, void *arg) {
    Checker *c = be->impl;
    c->inner->for_rows(c->inner, n, fn, arg);
}

static void check_destroy(Backend *be) {
    Checker *c = be->impl;
    backend_free(c->inner);
    free(c);
    free(be);
}

Backend *finite_backend(Backend *inner) {
    Checker *c = xcalloc(1, sizeof *c);
    c->inner = inner;
    c->layer = -1;
    Backend *be = xcalloc(1, sizeof *be);
    be->name = inner->name;
    be->n_threads = inner->n_threads;
    be->matmul = check_matmul;
    be->attention = check_attention;
    be->for_rows = check_rows;
    be->destroy = check_destroy;
    be->impl = c;
    return be;
}

const char *finite_report(const Backend *be) {
    if (!be || be->matmul != check_matmul) return NULL;
    const Checker *c = be->impl;
    return c->report[0] ? c->report : NULL;
}
