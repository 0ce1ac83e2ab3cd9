/* forward.c: the Qwen3 forward pass, now in two shapes: over a whole sequence
 * (the prompt, filling the KV cache on the way), and for one new token that
 * reads the past from the cache. */
#include "forward.h"

#include <stdlib.h>

#include "ops.h"
#include "rows.h"
#include "util.h"

/* A basic cache is one span per layer; later caches use one per block. */
#define MAX_SPANS 1

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

/* Self-attention of one layer for positions 0..n-1: position i attends to 0..i.
 * With a cache, the layer's keys and values are kept for the decode steps. */
/* EXERCISE prefill-attention "Prompt attention that fills the cache" 3 points; tests: II2_decode_matches II2_long */
static void attention_block(const Qwen3Model *m, Backend *be, const Qwen3Layer *L, Activations *a, int n,
                            KvCache *kv, int layer) {
    const Qwen3Config *c = &m->cfg;
    rmsnorm_rows(be, a->xb, a->x, L->attn_norm, n, c->dim, c->norm_eps);
    matmul(be, a->q, a->xb, &L->wq, n);
    matmul(be, a->k, a->xb, &L->wk, n);
    matmul(be, a->v, a->xb, &L->wv, n);
    qk_norm_rope_rows(be, c, L, a->q, a->k, NULL, 0, n);
    if (kv) kv->install(kv, layer, a->k, a->v, n);
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

/* The whole sequence at positions 0..n-1; fills kv when it is given. */
/* EXERCISE forward-pass "Embed the tokens, run every layer, predict" 2 points; tests: II2_decode_matches */
static void forward_sequence(const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n,
                             float *logits) {
    const Qwen3Config *c = &m->cfg;
    Activations a;
    build_activations(&a, c, n);
    for (int i = 0; i < n; i++) embed_row(a.x + (size_t)i * c->dim, &m->tok_embd, tokens[i]);
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, be, &m->layers[l], &a, n, kv, l);
        mlp_block(m, be, &m->layers[l], &a, n);
    }
    output_logits(m, be, a.x + (size_t)(n - 1) * c->dim, logits); /* only the last position predicts */
    free_activations(&a);
}

void forward(const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, float *logits) {
    forward_sequence(m, be, NULL, tokens, n, logits);
}

void forward_prefill_with_kv_cache(const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n,
                                   float *logits) {
    forward_sequence(m, be, kv, tokens, n, logits);
}

/* Self-attention of one layer for the single token at position pos: its key
 * and value join the cache, and its query reads all pos + 1 of them. */
/* EXERCISE decode-attention "One token's attention over the cache" 4 points; tests: II2_decode_matches II2_long */
static void decode_attention_block(const Qwen3Model *m, Backend *be, const Qwen3Layer *L, Activations *a,
                                   KvCache *kv, int layer, int pos) {
    const Qwen3Config *c = &m->cfg;
    rmsnorm(a->xb, a->x, L->attn_norm, c->dim, c->norm_eps);
    matmul(be, a->q, a->xb, &L->wq, 1);
    matmul(be, a->k, a->xb, &L->wk, 1);
    matmul(be, a->v, a->xb, &L->wv, 1);
    qk_norm_rope_rows(be, c, L, a->q, a->k, NULL, pos, 1); /* one row, at position pos */
    kv->append(kv, layer, a->k, a->v);
    KvSpan spans[MAX_SPANS];
    int n_spans = kv->view(kv, layer, spans, MAX_SPANS);
    AttnShape shape = {c->n_heads, c->n_kv_heads, c->head_dim};
    attention(be, a->att, a->q, spans, n_spans, shape);
    matmul(be, a->xb, a->att, &L->wo, 1);
    add_inplace(a->x, a->xb, c->dim);
}

/* EXERCISE decode-step "A decode step, at the right position" 2 points; tests: II2_decode */
int forward_decode_with_kv_cache(const Qwen3Model *m, Backend *be, KvCache *kv, int32_t token, int pos,
                                 float *logits, char *err) {
    if (kv->seq_len(kv) != pos) {
        err_set(err, "decode at position %d but the cache holds %d positions", pos, kv->seq_len(kv));
        return -1;
    }
    const Qwen3Config *c = &m->cfg;
    Activations a;
    build_activations(&a, c, 1);
    embed_row(a.x, &m->tok_embd, token);
    for (int l = 0; l < c->n_layers; l++) {
        decode_attention_block(m, be, &m->layers[l], &a, kv, l, pos);
        mlp_block(m, be, &m->layers[l], &a, 1);
    }
    output_logits(m, be, a.x, logits);
    free_activations(&a);
    return 0;
}
