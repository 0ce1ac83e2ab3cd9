/* forward.c: the Qwen3 forward pass over a whole sequence, top to bottom. */
#include "forward.h"

#include <stdlib.h>

#include "ops.h"
#include "rows.h"
#include "util.h"

/* Activations for n positions; every buffer is row-major, one row a position. */
typedef struct {
    float *x;    /* [n, dim] the residual stream */
    float *xb;   /* [n, dim] normalized input of a block, then its output */
    float *q;    /* [n, q_dim] queries, heads side by side */
    float *k;    /* [n, kv_dim] keys of every position: attention reads them all */
    float *v;    /* [n, kv_dim] values */
    float *att;  /* [n, q_dim] attention output */
    float *gate; /* [n, ffn_dim] */
    float *up;   /* [n, ffn_dim] */
} Activations;

static void build_activations(Activations *a, const Qwen3Config *c, int n) {
    size_t rows = (size_t)n;
    a->x = xmalloc(sizeof(float) * rows * c->dim);
    a->xb = xmalloc(sizeof(float) * rows * c->dim);
    a->q = xmalloc(sizeof(float) * rows * c->q_dim);
    a->k = xmalloc(sizeof(float) * rows * c->kv_dim);
    a->v = xmalloc(sizeof(float) * rows * c->kv_dim);
    a->att = xmalloc(sizeof(float) * rows * c->q_dim);
    a->gate = xmalloc(sizeof(float) * rows * c->ffn_dim);
    a->up = xmalloc(sizeof(float) * rows * c->ffn_dim);
}

static void free_activations(Activations *a) {
    free(a->x); free(a->xb); free(a->q); free(a->k); free(a->v);
    free(a->att); free(a->gate); free(a->up);
}

/* Self-attention of one layer for positions 0..n-1: position i attends to 0..i. */
/* EXERCISE attention-block "Causal self-attention over a sequence" 4 points; tests: II1_forward */
static void attention_block(const Qwen3Model *m, Backend *be, const Qwen3Layer *L, Activations *a, int n) {
    const Qwen3Config *c = &m->cfg;
    rmsnorm_rows(be, a->xb, a->x, L->attn_norm, n, c->dim, c->norm_eps);
    matmul(be, a->q, a->xb, &L->wq, n);
    matmul(be, a->k, a->xb, &L->wk, n);
    matmul(be, a->v, a->xb, &L->wv, n);
    qk_norm_rope_rows(be, c, L, a->q, a->k, NULL, 0, n);
    AttnShape shape = {c->n_heads, c->n_kv_heads, c->head_dim};
    for (int i = 0; i < n; i++) {
        KvSpan past = {a->k, a->v, i + 1}; /* causal: keys 0..i */
        attention(be, a->att + (size_t)i * c->q_dim, a->q + (size_t)i * c->q_dim, &past, 1, shape);
    }
    matmul(be, a->xb, a->att, &L->wo, n);
    add_inplace(a->x, a->xb, (size_t)n * c->dim);
}

/* The MLP of one layer: x += down(silu(gate(h)) * up(h)). */
/* EXERCISE mlp-block "The MLP block: SwiGLU feed-forward" 2 points; tests: II1_forward */
static void mlp_block(const Qwen3Model *m, Backend *be, const Qwen3Layer *L, Activations *a, int n) {
    const Qwen3Config *c = &m->cfg;
    rmsnorm_rows(be, a->xb, a->x, L->ffn_norm, n, c->dim, c->norm_eps);
    matmul(be, a->gate, a->xb, &L->w_gate, n);
    matmul(be, a->up, a->xb, &L->w_up, n);
    silu_mul_rows(be, a->gate, a->up, n, c->ffn_dim);
    matmul(be, a->xb, a->gate, &L->w_down, n);
    add_inplace(a->x, a->xb, (size_t)n * c->dim);
}

/* logits[vocab] from one row of the residual stream: final norm, LM head. */
/* EXERCISE output-logits "Final norm and LM head" 1 point; tests: II1_forward */
static void output_logits(const Qwen3Model *m, Backend *be, float *x, float *logits) {
    rmsnorm(x, x, m->output_norm, m->cfg.dim, m->cfg.norm_eps);
    matmul(be, logits, x, &m->output, 1);
}

/* EXERCISE forward-pass "Embed the tokens, run every layer, predict" 2 points; tests: II1_forward */
void forward(const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, float *logits) {
    const Qwen3Config *c = &m->cfg;
    Activations a;
    build_activations(&a, c, n);
    for (int i = 0; i < n; i++) embed_row(a.x + (size_t)i * c->dim, &m->tok_embd, tokens[i]);
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, be, &m->layers[l], &a, n);
        mlp_block(m, be, &m->layers[l], &a, n);
    }
    output_logits(m, be, a.x + (size_t)(n - 1) * c->dim, logits); /* only the last position predicts */
    free_activations(&a);
}
