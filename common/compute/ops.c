/* ops.c: see ops.h. Numerics follow llama.cpp's CPU code where it matters:
 * RMSNorm sums squares in double; RoPE builds each angle by repeated float
 * multiplication. */
#include "ops.h"

#include <math.h>

#include "fexp.h"

void rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void rmsnorm_heads(float *x, const float *w, int n_heads, int head_dim, float eps) {
    for (int h = 0; h < n_heads; h++) rmsnorm(x + h * head_dim, x + h * head_dim, w, head_dim, eps);
}

void rope_neox(float *x, int n_heads, int head_dim, int pos, float theta_base) {
    int half = head_dim / 2;
    float cosv[half], sinv[half];
    float theta_scale = powf(theta_base, -2.0f / (float)head_dim);
    float theta = (float)pos;
    for (int i = 0; i < half; i++) {
        cosv[i] = cosf(theta);
        sinv[i] = sinf(theta);
        theta *= theta_scale;
    }
    for (int h = 0; h < n_heads; h++) {
        float *v = x + h * head_dim;
        for (int i = 0; i < half; i++) {
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * cosv[i] - x1 * sinv[i];
            v[i + half] = x0 * sinv[i] + x1 * cosv[i];
        }
    }
}

/* e^-a in vectors (fexp_array), a piece at a time into a buffer on the stack. */
#define SILU_PIECE 256

void silu_mul(float *a, const float *b, size_t n) {
    float e[SILU_PIECE]; /* [SILU_PIECE] e^-a of the piece */
    for (size_t i0 = 0; i0 < n; i0 += SILU_PIECE) {
        size_t m = n - i0 < SILU_PIECE ? n - i0 : SILU_PIECE;
        for (size_t i = 0; i < m; i++) e[i] = -a[i0 + i];
        fexp_array(e, e, m);
        for (size_t i = 0; i < m; i++) a[i0 + i] = a[i0 + i] / (1.0f + e[i]) * b[i0 + i];
    }
}

void add_inplace(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void embed_row(float *out, const Tensor *table, int32_t id) {
    dequant_row(table->type, tensor_row(table, id), out, table->ne[0]);
}

/* The first i whose logit is the largest: the largest value with 8 lanes of
 * max_ps (which keeps its second operand, the lane's max, when a logit is
 * NaN, as the scalar loop skips NaNs), then the first i holding it. A NaN
 * at 0 keeps 0, as in the scalar loop. */
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static int32_t argmax_avx2(const float *logits, int n) {
    if (logits[0] != logits[0]) return 0;
    __m256 m = _mm256_set1_ps(logits[0]);
    int i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(logits + i), m);
    float lanes[8], max = logits[0];
    _mm256_storeu_ps(lanes, m);
    for (int k = 0; k < 8; k++)
        if (lanes[k] > max) max = lanes[k];
    for (; i < n; i++)
        if (logits[i] > max) max = logits[i];
    int32_t best = 0;
    while (!(logits[best] == max)) best++;
    return best;
}
#endif

int32_t argmax(const float *logits, int n, float *prob) {
    int32_t best = 0;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) best = argmax_avx2(logits, n);
    else
#endif
        for (int i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
    if (prob) {
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += exp((double)logits[i] - logits[best]);
        *prob = (float)(1.0 / sum);
    }
    return best;
}

void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    for (int i = 0; i < n; i++) x[i] -= max;
    fexp_array(x, x, (size_t)n);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += x[i];
    for (int i = 0; i < n; i++) x[i] /= sum;
}
