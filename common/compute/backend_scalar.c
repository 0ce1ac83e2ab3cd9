/* backend_scalar.c: the readable reference backend. Every dot product runs
 * front to back in float, one element at a time. */
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "fexp.h"
#include "util.h"

/* y[i, o] for o in [row_begin, row_end): each weight row is dequantized once
 * and dotted with every activation row. */
void scalar_matmul_rows(float *y, const float *x, const Tensor *w, int n, int row_begin, int row_end) {
    int64_t in = w->ne[0], out = w->ne[1];
    float *row = xmalloc(sizeof(float) * (size_t)in);
    for (int o = row_begin; o < row_end; o++) {
        dequant_row(w->type, tensor_row(w, o), row, in);
        for (int i = 0; i < n; i++) {
            const float *xi = x + (size_t)i * in;
            float sum = 0.0f;
            for (int64_t k = 0; k < in; k++) sum += row[k] * xi[k];
            y[(size_t)i * out + o] = sum;
        }
    }
    free(row);
}

static void scalar_matmul(Backend *be, float *y, const float *x, const Tensor *w, int n) {
    scalar_matmul_rows(y, x, w, n, 0, (int)w->ne[1]);
}

static int span_total(const KvSpan *spans, int n_spans) {
    int n = 0;
    for (int i = 0; i < n_spans; i++) n += spans[i].n;
    return n;
}

/* One query head against its kv head: scores, softmax, weighted sum of values,
 * every loop in position order. */
static void attend_head(float *out, const float *q, const KvSpan *spans, int n_spans, AttnShape s,
                        int h, float *scores) {
    int hd = s.head_dim, kv_dim = s.n_kv_heads * hd;
    int g = h / (s.n_heads / s.n_kv_heads); /* GQA: heads share kv heads in groups */
    float scale = 1.0f / sqrtf((float)hd);
    int j = 0;
    float max = -INFINITY;
    for (int sp = 0; sp < n_spans; sp++)
        for (int t = 0; t < spans[sp].n; t++, j++) {
            const float *k = spans[sp].k + (size_t)t * kv_dim + (size_t)g * hd;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) dot += q[d] * k[d];
            scores[j] = dot * scale;
            if (scores[j] > max) max = scores[j];
        }
    float sum = 0.0f;
    for (int i = 0; i < j; i++) {
        scores[i] = fexp(scores[i] - max);
        sum += scores[i];
    }
    for (int d = 0; d < hd; d++) out[d] = 0.0f;
    j = 0;
    for (int sp = 0; sp < n_spans; sp++)
        for (int t = 0; t < spans[sp].n; t++, j++) {
            const float *v = spans[sp].v + (size_t)t * kv_dim + (size_t)g * hd;
            for (int d = 0; d < hd; d++) out[d] += scores[j] * v[d];
        }
    float inv = 1.0f / sum;
    for (int d = 0; d < hd; d++) out[d] *= inv;
}

void scalar_attention_heads(float *out, const float *q, const KvSpan *spans, int n_spans,
                            AttnShape s, int head_begin, int head_end) {
    float *scores = xmalloc(sizeof(float) * (size_t)span_total(spans, n_spans));
    for (int h = head_begin; h < head_end; h++)
        attend_head(out + (size_t)h * s.head_dim, q + (size_t)h * s.head_dim, spans, n_spans, s, h,
                    scores);
    free(scores);
}

static void scalar_attention(Backend *be, float *out, const float *q, const KvSpan *spans,
                             int n_spans, AttnShape s) {
    scalar_attention_heads(out, q, spans, n_spans, s, 0, s.n_heads);
}

static void scalar_destroy(Backend *be) { free(be); }

Backend *backend_scalar_create(void) {
    Backend *be = xcalloc(1, sizeof *be);
    be->name = "scalar";
    be->n_threads = 1;
    be->matmul = scalar_matmul;
    be->attention = scalar_attention;
    be->for_rows = rows_in_order;
    be->destroy = scalar_destroy;
    return be;
}
