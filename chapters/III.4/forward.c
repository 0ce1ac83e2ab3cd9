/* forward.c: the Qwen3 forward pass in one shape: n new tokens at the
 * positions after those the KV cache holds (a whole prompt, one decode step,
 * a chat's next turn), reading the past from the cache in place and adding
 * their own keys and values to it. Without a cache it is II.1's full
 * recompute. */
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

/* The new rows' keys and values join the cache: all at once into an empty
 * one (a prompt), else one position at a time. */
static void store_rows(KvCache *kv, int layer, const float *k, const float *v, int n, int start) {
    if (start == 0) {
        kv->install(kv, layer, k, v, n);
        return;
    }
    for (int i = 0; i < n; i++) kv->append(kv, layer, k + (size_t)i * kv->kv_dim, v + (size_t)i * kv->kv_dim);
}

/* Self-attention of one layer for n new positions start..start+n-1: row i
 * attends to the cached positions 0..start-1 (one span per block, read in
 * place), then to the new rows 0..i. Their keys and values then join the cache. */
/* EXERCISE extend-attention "New rows attend to the cache, then to themselves" 4 points; tests: III4_extend III4_paged_matches */
static void attention_block(const Qwen3Model *m, Backend *be, const Qwen3Layer *L, Activations *a, int n,
                            KvCache *kv, int layer, int start) {
    const Qwen3Config *c = &m->cfg;
    rmsnorm_rows(be, a->xb, a->x, L->attn_norm, n, c->dim, c->norm_eps);
    matmul(be, a->q, a->xb, &L->wq, n);
    matmul(be, a->k, a->xb, &L->wk, n);
    matmul(be, a->v, a->xb, &L->wv, n);
    qk_norm_rope_rows(be, c, L, a->q, a->k, NULL, start, n);
    int n_past = kv ? kv->view(kv, layer, NULL, 0) : 0;
    KvSpan *spans = xmalloc(sizeof(KvSpan) * (size_t)(n_past + 1)); /* [n_past + 1]: the past, then the new rows */
    if (kv) kv->view(kv, layer, spans, n_past);
    AttnShape shape = {c->n_heads, c->n_kv_heads, c->head_dim};
    for (int i = 0; i < n; i++) {
        spans[n_past] = (KvSpan){a->k, a->v, i + 1}; /* causal: new rows 0..i */
        attention(be, a->att + (size_t)i * c->q_dim, a->q + (size_t)i * c->q_dim, spans, n_past + 1, shape);
    }
    free(spans);
    if (kv) store_rows(kv, layer, a->k, a->v, n, start);
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

/* The tokens at the positions after those kv holds (0.. without a cache);
 * their keys and values join kv when it is given. */
/* EXERCISE forward-pass "Embed the tokens, run every layer, predict" 2 points; tests: III4_extend_in_chunks III4_paged_matches */
static void forward_sequence(const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n,
                             float *logits) {
    const Qwen3Config *c = &m->cfg;
    int start = kv ? kv->seq_len(kv) : 0;
    Activations a;
    build_activations(&a, c, n);
    for (int i = 0; i < n; i++) embed_row(a.x + (size_t)i * c->dim, &m->tok_embd, tokens[i]);
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, be, &m->layers[l], &a, n, kv, l, start);
        mlp_block(m, be, &m->layers[l], &a, n);
    }
    output_logits(m, be, a.x + (size_t)(n - 1) * c->dim, logits); /* only the last position predicts */
    free_activations(&a);
}

void forward(const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, float *logits) {
    forward_sequence(m, be, NULL, tokens, n, logits);
}

/* EXERCISE extend "Reserve room, then run the new tokens" 1 point; tests: III4_extend_out_of_blocks III4_extend_in_chunks */
int forward_extend(const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n, float *logits,
                   char *err) {
    if (kv->reserve(kv, n, err) != 0) return -1;
    forward_sequence(m, be, kv, tokens, n, logits);
    return 0;
}
