/* batched.c: see batched.h.
 *
 * The two limits of a batched decode step of B rows, in aggregate tokens/s:
 *  - bandwidth: the step reads every weight once whatever B, so
 *    B * read bandwidth / weight bytes per step (the KV cache reads of short
 *    sequences are left out: a few MB against hundreds);
 *  - compute: every weight is multiplied by each of the B rows, so
 *    1 / (the time one row's multiply-adds take at the machine's peak): float
 *    weights at the float multiply-add rate (2 flops each), quantized ones at
 *    the 8-bit multiply-add rate their kernels run on (tools/flops). Norms,
 *    attention and the activations' quantization are left out: the limit is
 *    the weights' arithmetic alone.
 * A step can be no faster than either: at B = 1 decode is bound by bandwidth;
 * as B grows the bandwidth limit grows with it and the compute limit does not. */
#include "batched.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "qwen3.h"
#include "util.h"

bool batched_limits(const char *build, int threads, Limits *lim) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/tools/flops --json --runs 3 --threads %d", build, threads);
    JsonValue *v = bench_run_json(cmd);
    if (!v) {
        fprintf(stderr, "bench: %s failed\n", cmd);
        return false;
    }
    lim->f32_1 = bench_num(v, "f32_gflops_1");
    lim->f32_n = bench_num(v, "f32_gflops_n");
    lim->i8_1 = bench_num(v, "i8_gmacs_1");
    lim->i8_n = bench_num(v, "i8_gmacs_n");
    json_free(v);
    fprintf(stderr, "bench: peak float %.1f / %.1f GFLOP/s, 8-bit %.1f / %.1f G multiply-adds/s (1 / %d threads)\n",
            lim->f32_1, lim->f32_n, lim->i8_1, lim->i8_n, threads);
    return true;
}

/* Multiply-adds of one row through a weight matrix, split by the kernel they run on. */
static void add_macs(const Tensor *t, double *float_macs, double *int8_macs) {
    double n = (double)t->ne[0] * (double)t->ne[1];
    if (t->type == DT_F32 || t->type == DT_F16 || t->type == DT_BF16) *float_macs += n;
    else *int8_macs += n;
}

/* Seconds of peak arithmetic one token's row takes through every weight matrix. */
static double compute_s_per_token(const Qwen3Model *m, double gflops, double gmacs) {
    double f = 0, q = 0;
    add_macs(&m->output, &f, &q);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const Qwen3Layer *L = &m->layers[l];
        const Tensor *ts[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++) add_macs(ts[i], &f, &q);
    }
    return (f > 0 ? 2 * f / (gflops * 1e9) : 0) + (q > 0 ? q / (gmacs * 1e9) : 0);
}

int batched_sweep(const BatchPlan *p, const char *model, const char *type, const char *backend, int threads,
                  const Limits *lim, BatchRow *rows, int max) {
    char err[ERR_MAX], cmd[4096], list[256] = "";
    Qwen3Model m;
    if (qwen3_load(&m, model, err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 0;
    }
    bool many = threads > 1;
    double bytes = (double)m.weight_bytes, gbps = many ? lim->gbps_n : lim->gbps_1;
    double s_tok = compute_s_per_token(&m, many ? lim->f32_n : lim->f32_1, many ? lim->i8_n : lim->i8_1);
    qwen3_free(&m);
    snprintf(list, sizeof list, "%s", p->batches); /* "1 2 4 8" -> "1,2,4,8" */
    for (char *c = list; *c; c++)
        if (*c == ' ') *c = ',';
    snprintf(cmd, sizeof cmd, "%s --json --backend %s --threads %d --batches %s --prompt %d --steps %d --runs %d %s",
             p->program, backend, threads, list, p->prompt, p->steps, p->runs, model);
    fprintf(stderr, "bench: %s\n", cmd);
    JsonValue *v = bench_run_json(cmd);
    const JsonValue *res = v ? json_get(v, "results") : NULL;
    int n = 0;
    for (size_t i = 0; res && i < res->n_items && n < max; i++) {
        const JsonValue *r = &res->items[i];
        BatchRow *b = &rows[n++];
        memset(b, 0, sizeof *b);
        snprintf(b->type, sizeof b->type, "%s", type);
        snprintf(b->backend, sizeof b->backend, "%s", backend);
        b->threads = threads;
        b->prompt = p->prompt;
        b->steps = p->steps;
        b->batch = (int)bench_num(r, "batch");
        b->step_ms = bench_num(r, "step_ms");
        b->best_step_ms = bench_num(r, "best_step_ms");
        b->tps = bench_num(r, "tokens_per_s");
        b->base_tps = rows[0].tps;
        b->bw_limit = bytes > 0 ? b->batch * gbps * 1e9 / bytes : 0;
        b->compute_limit = s_tok > 0 ? 1 / s_tok : 0;
        b->ok = b->tps > 0;
    }
    if (!v) fprintf(stderr, "bench: the batched run failed\n");
    json_free(v);
    return n;
}

int batched_run(const BatchPlan *p, const char *build, const char *models, char *const *types, int n_types,
                char *const *backends, int n_backends, Limits *lim, BatchRow **rows) {
    *rows = NULL;
    int n_sizes = 1;
    for (const char *s = p->batches; *s; s++) n_sizes += *s == ' ';
    if (!batched_limits(build, lim->threads, lim)) return 0;
    int max = n_types * n_backends * n_sizes, n = 0;
    *rows = xcalloc((size_t)max, sizeof **rows);
    for (int t = 0; t < n_types; t++)
        for (int b = 0; b < n_backends; b++) {
            char model[1024];
            snprintf(model, sizeof model, "%s/qwen3-0.6b-%s.gguf", models, types[t]);
            int threads = strcmp(backends[b], "parallel") == 0 ? lim->threads : 1;
            n += batched_sweep(p, model, types[t], backends[b], threads, lim, *rows + n, max - n);
        }
    return n;
}

static double share(double x, double limit) { return limit > 0 ? 100 * x / limit : 0; }

void batched_print(FILE *f, const BatchPlan *p, const BatchRow *rows, int n, const Limits *lim) {
    fprintf(f, "\n## Batched decode: seq_decode_batch alone (chapter III.7)\n\n");
    fprintf(f, "B sequences, each prefilled with a %d-token prompt, then %d decode steps that run all B at once;\n"
               "decode tok/s = B * steps / the time of those steps (llama-batched-bench's S_TG), best of %d runs.\n",
            p->prompt, p->steps, p->runs);
    fprintf(f, "Peak arithmetic (tools/flops): float multiply-adds %.1f GFLOP/s with 1 thread, %.1f with %d;\n"
               "8-bit multiply-adds %.1f G/s with 1 thread, %.1f with %d.\n",
            lim->f32_1, lim->f32_n, lim->threads, lim->i8_1, lim->i8_n, lim->threads);
    fprintf(f, "Bandwidth limit = B * read bandwidth / weight bytes (a step reads every weight once for all B).\n"
               "Compute limit = 1 / the time of one row's multiply-adds at that peak (float weights at the float\n"
               "rate, quantized ones at the 8-bit rate). The lower of the two is the one that binds.\n\n");
    fprintf(f, "| type | backend | threads | B | step ms | best step ms | decode tok/s | x B=1 | "
               "bandwidth limit | share | compute limit | share |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const BatchRow *r = &rows[i];
        if (!r->ok) {
            fprintf(f, "| %s | %s | %d | %d | failed | | | | | | | |\n", r->type, r->backend, r->threads, r->batch);
            continue;
        }
        fprintf(f, "| %s | %s | %d | %d | %.1f | %.1f | %.2f | %.2f | %.1f | %.0f %% | %.1f | %.0f %% |\n", r->type,
                r->backend, r->threads, r->batch, r->step_ms, r->best_step_ms, r->tps,
                r->base_tps > 0 ? r->tps / r->base_tps : 0, r->bw_limit, share(r->tps, r->bw_limit), r->compute_limit,
                share(r->tps, r->compute_limit));
    }
}

void batched_json(FILE *f, const BatchRow *rows, int n, const Limits *lim) {
    fprintf(f, "\"flops\":{\"threads\":%d,\"f32_gflops_1\":%.1f,\"f32_gflops_n\":%.1f,\"i8_gmacs_1\":%.1f,"
               "\"i8_gmacs_n\":%.1f},\"batched\":[\n",
            lim->threads, lim->f32_1, lim->f32_n, lim->i8_1, lim->i8_n);
    for (int i = 0; i < n; i++) {
        const BatchRow *r = &rows[i];
        fprintf(f,
                "%s{\"type\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"batch\":%d,\"prompt_tokens\":%d,\"steps\":%d,"
                "\"ok\":%s,\"step_ms\":%.2f,\"best_step_ms\":%.2f,\"decode_tokens_per_s\":%.3f,"
                "\"bandwidth_limit_tokens_per_s\":%.2f,\"compute_limit_tokens_per_s\":%.2f}\n",
                i ? "," : "", r->type, r->backend, r->threads, r->batch, r->prompt, r->steps, r->ok ? "true" : "false",
                r->step_ms, r->best_step_ms, r->tps, r->bw_limit, r->compute_limit);
    }
    fprintf(f, "]");
}
