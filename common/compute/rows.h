/* rows.h: the small per-row operations of ops.h over the n rows of a prompt
 * or a batch at once. One thread doing them all for a 128-token prompt
 * leaves the others waiting for ~14 % of the time, so they go through the
 * backend's for_rows: each row is still computed by the ops.h code, on
 * whichever thread, so the results are the same bits. */
#ifndef ROWS_H
#define ROWS_H

#include "backend.h"
#include "qwen3.h"

/* y[i] = rmsnorm(x[i]) * w for rows i < n of dim floats (y may be x). */
void rmsnorm_rows(Backend *be, float *y, const float *x, const float *w, int n, int dim, float eps);
/* Layer L's per-head norms, then RoPE, on rows i < n of q[n, q_dim] and
 * k[n, kv_dim]; row i is at position pos[i], or pos0 + i when pos is NULL. */
void qk_norm_rope_rows(Backend *be, const Qwen3Config *c, const Qwen3Layer *L, float *q, float *k,
                       const int *pos, int pos0, int n);
/* a[i] = silu(a[i]) * b[i] for rows i < n of dim floats. */
void silu_mul_rows(Backend *be, float *a, const float *b, int n, int dim);

#endif
