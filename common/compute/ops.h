/* ops.h: the small per-row operations of the Qwen3 forward pass. They are
 * cheap next to matmul and attention, so they live here once, in one
 * readable version that every backend and chapter shares. */
#ifndef OPS_H
#define OPS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* y[n] = x[n] / sqrt(mean(x^2) + eps) * w[n]   (y may be x) */
void rmsnorm(float *y, const float *x, const float *w, int n, float eps);
/* The same over each of n_heads consecutive vectors of head_dim, one shared weight. */
void rmsnorm_heads(float *x, const float *w, int n_heads, int head_dim, float eps);
/* NEOX RoPE on n_heads vectors of head_dim at position pos: pairs (i, i + head_dim/2). */
void rope_neox(float *x, int n_heads, int head_dim, int pos, float theta_base);
/* a[n] = silu(a[n]) * b[n] */
void silu_mul(float *a, const float *b, size_t n);
/* y[n] += x[n] */
void add_inplace(float *y, const float *x, size_t n);
/* out[dim] = row `id` of the embedding table, dequantized. */
void embed_row(float *out, const Tensor *table, int32_t id);
/* Index of the largest logit; *prob gets its softmax probability if prob != NULL. */
int32_t argmax(const float *logits, int n, float *prob);
/* x[n] = softmax(x[n]) */
void softmax(float *x, int n);

#endif
