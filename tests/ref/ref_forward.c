/* ref_forward.c: see ref_forward.h. */
#include "ref_forward.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"

/* y[rows] = W[rows, cols] . x[cols] in double. */
static void ref_matvec(const Tensor *w, const double *x, double *y) {
    int64_t cols = w->ne[0], rows = w->ne[1];
    float *row = xmalloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        dequant_row(w->type, tensor_row(w, r), row, cols);
        double s = 0;
        for (int64_t k = 0; k < cols; k++) s += (double)row[k] * x[k];
        y[r] = s;
    }
    free(row);
}

static void ref_rmsnorm(double *y, const double *x, const float *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double scale = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void ref_rope(double *v, int hd, int pos, double theta) {
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        double ang = pos * pow(theta, -2.0 * i / hd);
        double x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cos(ang) - x1 * sin(ang);
        v[i + half] = x0 * sin(ang) + x1 * cos(ang);
    }
}

void ref_forward(const Qwen3Model *m, const int32_t *tokens, int n, double *logits) {
    const Qwen3Config *c = &m->cfg;
    int D = c->dim, Q = c->q_dim, KV = c->kv_dim, F = c->ffn_dim, hd = c->head_dim;
    double *x = xcalloc((size_t)n * D, sizeof(double));
    double *K = xcalloc((size_t)n * KV, sizeof(double)), *V = xcalloc((size_t)n * KV, sizeof(double));
    double *h = xmalloc(sizeof(double) * D), *q = xmalloc(sizeof(double) * Q), *o = xmalloc(sizeof(double) * Q);
    double *t = xmalloc(sizeof(double) * (D > F ? D : F)), *g = xmalloc(sizeof(double) * F);
    double *u = xmalloc(sizeof(double) * F), *qs = xmalloc(sizeof(double) * (size_t)n * Q);
    double *sc = xmalloc(sizeof(double) * n);
    float *row = xmalloc(sizeof(float) * D);
    for (int i = 0; i < n; i++) {
        dequant_row(m->tok_embd.type, tensor_row(&m->tok_embd, tokens[i]), row, D);
        for (int d = 0; d < D; d++) x[(size_t)i * D + d] = row[d];
    }
    for (int l = 0; l < c->n_layers; l++) {
        const Qwen3Layer *L = &m->layers[l];
        for (int i = 0; i < n; i++) {
            ref_rmsnorm(h, x + (size_t)i * D, L->attn_norm, D, c->norm_eps);
            ref_matvec(&L->wq, h, qs + (size_t)i * Q);
            ref_matvec(&L->wk, h, K + (size_t)i * KV);
            ref_matvec(&L->wv, h, V + (size_t)i * KV);
            for (int hh = 0; hh < c->n_heads; hh++) {
                double *qh = qs + (size_t)i * Q + hh * hd;
                ref_rmsnorm(qh, qh, L->q_norm, hd, c->norm_eps);
                ref_rope(qh, hd, i, c->rope_theta);
            }
            for (int hh = 0; hh < c->n_kv_heads; hh++) {
                double *kh = K + (size_t)i * KV + hh * hd;
                ref_rmsnorm(kh, kh, L->k_norm, hd, c->norm_eps);
                ref_rope(kh, hd, i, c->rope_theta);
            }
        }
        for (int i = 0; i < n; i++) {
            for (int hh = 0; hh < c->n_heads; hh++) {
                int kvh = hh / (c->n_heads / c->n_kv_heads);
                const double *qh = qs + (size_t)i * Q + hh * hd;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += qh[d] * K[(size_t)j * KV + kvh * hd + d];
                    sc[j] = s / sqrt((double)hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= i; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int d = 0; d < hd; d++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++) acc += sc[j] / sum * V[(size_t)j * KV + kvh * hd + d];
                    o[hh * hd + d] = acc;
                }
            }
            ref_matvec(&L->wo, o, t);
            for (int d = 0; d < D; d++) x[(size_t)i * D + d] += t[d];
            ref_rmsnorm(h, x + (size_t)i * D, L->ffn_norm, D, c->norm_eps);
            ref_matvec(&L->w_gate, h, g);
            ref_matvec(&L->w_up, h, u);
            for (int f = 0; f < F; f++) g[f] = g[f] / (1.0 + exp(-g[f])) * u[f];
            ref_matvec(&L->w_down, g, t);
            for (int d = 0; d < D; d++) x[(size_t)i * D + d] += t[d];
        }
    }
    ref_rmsnorm(h, x + (size_t)(n - 1) * D, m->output_norm, D, c->norm_eps);
    ref_matvec(&m->output, h, logits);
    free(x); free(K); free(V); free(h); free(q); free(o); free(t); free(g); free(u); free(qs); free(sc); free(row);
}
