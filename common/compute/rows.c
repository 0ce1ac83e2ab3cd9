/* rows.c: see rows.h. Each function packs its arguments for one row and
 * hands the rows to the backend. */
#include "rows.h"

#include "ops.h"

typedef struct {
    float *y;
    const float *x, *w;
    int dim;
    float eps;
} NormRows;

static void norm_row(void *arg, int i) {
    NormRows *r = arg;
    rmsnorm(r->y + (size_t)i * r->dim, r->x + (size_t)i * r->dim, r->w, r->dim, r->eps);
}

void rmsnorm_rows(Backend *be, float *y, const float *x, const float *w, int n, int dim, float eps) {
    NormRows r = {y, x, w, dim, eps};
    for_rows(be, n, norm_row, &r);
}

typedef struct {
    const Qwen3Config *c;
    const Qwen3Layer *L;
    float *q, *k;
    const int *pos;
    int pos0;
} QkRows;

static void qk_row(void *arg, int i) {
    QkRows *r = arg;
    const Qwen3Config *c = r->c;
    float *q = r->q + (size_t)i * c->q_dim, *k = r->k + (size_t)i * c->kv_dim;
    int pos = r->pos ? r->pos[i] : r->pos0 + i;
    rmsnorm_heads(q, r->L->q_norm, c->n_heads, c->head_dim, c->norm_eps);
    rmsnorm_heads(k, r->L->k_norm, c->n_kv_heads, c->head_dim, c->norm_eps);
    rope_neox(q, c->n_heads, c->head_dim, pos, c->rope_theta);
    rope_neox(k, c->n_kv_heads, c->head_dim, pos, c->rope_theta);
}

void qk_norm_rope_rows(Backend *be, const Qwen3Config *c, const Qwen3Layer *L, float *q, float *k,
                       const int *pos, int pos0, int n) {
    QkRows r = {c, L, q, k, pos, pos0};
    for_rows(be, n, qk_row, &r);
}

typedef struct {
    float *a;
    const float *b;
    int dim;
} SiluRows;

static void silu_row(void *arg, int i) {
    SiluRows *r = arg;
    silu_mul(r->a + (size_t)i * r->dim, r->b + (size_t)i * r->dim, (size_t)r->dim);
}

void silu_mul_rows(Backend *be, float *a, const float *b, int n, int dim) {
    SiluRows r = {a, b, dim};
    for_rows(be, n, silu_row, &r);
}
