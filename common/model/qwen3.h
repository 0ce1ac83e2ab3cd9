/* qwen3.h: a Qwen3 model read from a GGUF file: its configuration and its
 * weights, in the file's mapping in their stored types. Loading a file for
 * the kernels (qwen3_load) is one layer up, in compute/backend.h: it copies
 * the matrices onto huge pages, some in a second layout only the kernels
 * know (tiles.h). */
#ifndef QWEN3_H
#define QWEN3_H

#include "gguf.h"
#include "tensor.h"

typedef struct {
    int n_layers;    /* qwen3.block_count */
    int dim;         /* qwen3.embedding_length: the residual stream width */
    int n_heads;     /* qwen3.attention.head_count */
    int n_kv_heads;  /* qwen3.attention.head_count_kv (GQA) */
    int head_dim;    /* qwen3.attention.key_length: never dim / n_heads */
    int ffn_dim;     /* qwen3.feed_forward_length */
    int vocab_size;  /* rows of token_embd.weight */
    int ctx_len;     /* qwen3.context_length: the longest sequence trained */
    float rope_theta;
    float norm_eps;
    int q_dim;       /* n_heads * head_dim */
    int kv_dim;      /* n_kv_heads * head_dim */
} Qwen3Config;

typedef struct {
    float *attn_norm;    /* [dim] */
    Tensor wq;           /* [q_dim rows, dim] */
    Tensor wk;           /* [kv_dim rows, dim] */
    Tensor wv;           /* [kv_dim rows, dim] */
    float *q_norm;       /* [head_dim], shared by every query head */
    float *k_norm;       /* [head_dim] */
    Tensor wo;           /* [dim rows, q_dim] */
    float *ffn_norm;     /* [dim] */
    Tensor w_gate;       /* [ffn_dim rows, dim] */
    Tensor w_up;         /* [ffn_dim rows, dim] */
    Tensor w_down;       /* [dim rows, ffn_dim] */
} Qwen3Layer;

typedef struct {
    Qwen3Config cfg;
    GgufFile file;
    Tensor tok_embd;     /* [vocab rows, dim] */
    Qwen3Layer *layers;  /* [n_layers] */
    float *output_norm;  /* [dim] */
    Tensor output;       /* [vocab rows, dim]: output.weight, or tok_embd when tied */
    bool tied;           /* no output.weight in the file */
    size_t weight_bytes; /* bytes of all weights read per token */
    void *region;        /* the matrices copied onto huge pages (compute/load.c), some as tiles
                          * (compute/tiles.h), or NULL; made by qwen3_load, freed by qwen3_free */
    size_t region_bytes; /* of that copy */
} Qwen3Model;

/* Reads and checks every key and tensor of a GGUF already opened; takes
 * ownership of *file on success. On failure returns non-zero with err saying
 * what is wrong, and *m holds nothing to free. */
int qwen3_from_gguf(Qwen3Model *m, GgufFile *file, char *err);
void qwen3_free(Qwen3Model *m);
/* Matrix i of the 7 per layer (wq wk wv wo w_gate w_up w_down) and the
 * output: 7 * n_layers + 1 in all. */
Tensor *qwen3_matrix(Qwen3Model *m, int i);

#endif
