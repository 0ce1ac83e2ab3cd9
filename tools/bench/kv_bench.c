/* kv-bench: the decode step time of the basic and the paged KV cache at
 * several context lengths, for `make bench` (which runs it through tools/bench
 * and puts its figures in the bench tables).
 *
 *   kv-bench --model F.gguf [--contexts "256 1024 2048"] [--steps 48]
 *            [--backend NAME] [--threads N] [--block-size 16] [--json]
 *
 * It is linked with the engine of the last chapter that has a paged cache. For
 * each context L both caches are filled with L positions of every layer (the
 * values are synthetic: a step's time does not depend on them, and a prefill
 * of 2048 tokens would cost minutes). Then, --steps times, each kind runs one
 * decode step (forward_extend of one token: the model, attention over the
 * cache, the append) and is rolled back to L, the kinds taking turns step by
 * step so that both see the same load from other programs. Each turn also
 * times attention alone: one query per layer over the cache's spans, what a
 * decode step spends reading the cache, to compare the step's growth with.
 * Reported per kind: the median (and the fastest) step, and the median
 * attention. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "json.h"
#include "util.h"

#define MAX_CONTEXTS 16

typedef struct {
    const char *model, *backend;
    int contexts[MAX_CONTEXTS], n_contexts;
    int steps, threads, block_size;
    bool json;
} Options;

static int usage(FILE *f, int code) {
    fprintf(f, "usage: kv-bench --model F.gguf [--contexts \"256 1024 2048\"] [--steps 48]\n"
               "                [--backend NAME] [--threads N] [--block-size 16] [--json]\n"
               "Decode step ms of the basic and the paged KV cache after L cached positions.\n");
    return code;
}

static int parse(Options *o, int argc, char **argv) {
    *o = (Options){.steps = 48, .block_size = 16};
    const char *contexts = "256 1024 2048";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) return 1;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (!v) return -1;
        i++;
        if (strcmp(a, "--model") == 0) o->model = v;
        else if (strcmp(a, "--contexts") == 0) contexts = v;
        else if (strcmp(a, "--backend") == 0) o->backend = v;
        else if (strcmp(a, "--steps") == 0) o->steps = atoi(v);
        else if (strcmp(a, "--threads") == 0) o->threads = atoi(v);
        else if (strcmp(a, "--block-size") == 0) o->block_size = atoi(v);
        else return -1;
    }
    char *copy = xstrdup(contexts), *save = NULL;
    for (char *t = strtok_r(copy, " ,", &save); t && o->n_contexts < MAX_CONTEXTS; t = strtok_r(NULL, " ,", &save))
        o->contexts[o->n_contexts++] = atoi(t);
    free(copy);
    for (int i = 0; i < o->n_contexts; i++)
        if (o->contexts[i] < 1) return -1;
    return o->model && o->steps > 0 && o->block_size > 0 ? 0 : -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Fills every layer of kv with n positions of synthetic rows. */
static int fill(KvCache *kv, int n, char *err) {
    size_t floats = (size_t)n * (size_t)kv->kv_dim;
    float *rows = xmalloc(sizeof(float) * floats); /* [n, kv_dim] */
    for (size_t i = 0; i < floats; i++) rows[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    int rc = kv->reserve(kv, n, err);
    for (int l = 0; rc == 0 && l < kv->n_layers; l++) kv->install(kv, l, rows, rows, n);
    free(rows);
    return rc;
}

/* A kind's times at one context. */
typedef struct {
    const char *kind;
    KvCache *kv;
    double *ms;      /* [steps] decode steps */
    double *attn_ms; /* [steps] attention alone, every layer */
    int n;
} Kind;

/* One query's attention over every layer's cached spans, as a decode step
 * runs it; returns the ms it took. */
static double time_attention(const Qwen3Model *m, Backend *be, KvCache *kv, const float *q, float *out) {
    const Qwen3Config *c = &m->cfg;
    AttnShape shape = {c->n_heads, c->n_kv_heads, c->head_dim};
    double t0 = time_now_ms();
    for (int l = 0; l < c->n_layers; l++) {
        int n = kv->view(kv, l, NULL, 0);
        KvSpan *spans = xmalloc(sizeof(KvSpan) * (size_t)n); /* [n] */
        kv->view(kv, l, spans, n);
        attention(be, out, q, spans, n, shape);
        free(spans);
    }
    return time_now_ms() - t0;
}

/* One turn of kind k at the context: attention alone, then a decode step,
 * then back to the context. */
static int turn(const Qwen3Model *m, Backend *be, Kind *k, int context, const float *q, float *out, float *logits,
                char *err) {
    int32_t token = 1;
    k->attn_ms[k->n] = time_attention(m, be, k->kv, q, out);
    double t0 = time_now_ms();
    if (forward_extend(m, be, k->kv, &token, 1, logits, err) != 0) return -1;
    k->ms[k->n++] = time_now_ms() - t0;
    k->kv->truncate(k->kv, context);
    return 0;
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

int main(int argc, char **argv) {
    Options o;
    int rc = parse(&o, argc, argv);
    if (rc == 1) return usage(stdout, 0);
    if (rc != 0) return usage(stderr, 2);
    char err[ERR_MAX];
    Qwen3Model m;
    Backend *be = backend_create(o.backend, o.threads, err);
    if (!be || qwen3_load(&m, o.model, err) != 0) {
        fprintf(stderr, "kv-bench: %s\n", err);
        return 1;
    }
    float *logits = xmalloc(sizeof(float) * (size_t)m.cfg.vocab_size);
    float *q = xmalloc(sizeof(float) * (size_t)m.cfg.q_dim), *att = xmalloc(sizeof(float) * (size_t)m.cfg.q_dim);
    for (int i = 0; i < m.cfg.q_dim; i++) q[i] = (float)(i % 7) * 0.1f - 0.3f; /* a query: [q_dim] */
    double kv_bytes = 2.0 * m.cfg.n_layers * m.cfg.kv_dim * sizeof(float); /* per position */
    Buf out = {0};
    buf_puts(&out, "{\"model\":");
    json_append_string(&out, o.model, strlen(o.model));
    buf_printf(&out, ",\"backend\":\"%s\",\"threads\":%d,\"block_size\":%d,\"steps\":%d,"
               "\"kv_bytes_per_token\":%.0f,\"contexts\":[", be->name, be->n_threads, o.block_size, o.steps, kv_bytes);
    for (int c = 0; c < o.n_contexts && rc == 0; c++) {
        int L = o.contexts[c];
        KvPool *pool = kv_pool_create(&m.cfg, o.block_size, (L + o.steps + o.block_size - 1) / o.block_size, err);
        Kind kinds[2] = {{.kind = "basic", .kv = kv_cache_create("basic", &m.cfg, NULL, err)}, {.kind = "paged"}};
        if (pool) kinds[1].kv = kv_cache_create("paged", &m.cfg, pool, err);
        for (int k = 0; k < 2; k++) {
            kinds[k].ms = xmalloc(sizeof(double) * (size_t)o.steps);
            kinds[k].attn_ms = xmalloc(sizeof(double) * (size_t)o.steps);
        }
        rc = kinds[1].kv && fill(kinds[0].kv, L, err) == 0 && fill(kinds[1].kv, L, err) == 0 ? 0 : -1;
        for (int s = 0; s < o.steps && rc == 0; s++)
            for (int k = 0; k < 2 && rc == 0; k++) /* basic first, then paged first, ... */
                rc = turn(&m, be, &kinds[(s + k) % 2], L, q, att, logits, err);
        if (rc == 0) {
            buf_printf(&out, "%s{\"context\":%d,\"kv_mb\":%.1f", c ? "," : "", L, L * kv_bytes / 1e6);
            for (int k = 0; k < 2; k++) {
                const char *name = kinds[k].kind;
                double med = median(kinds[k].ms, kinds[k].n), attn = median(kinds[k].attn_ms, kinds[k].n);
                buf_printf(&out, ",\"%s_ms\":%.2f,\"%s_best_ms\":%.2f,\"%s_attention_ms\":%.2f", name, med, name,
                           kinds[k].ms[0], name, attn);
                if (!o.json)
                    printf("context %5d  %s: step median %.1f ms (best %.1f), attention alone %.1f ms\n", L, name, med,
                           kinds[k].ms[0], attn);
            }
            buf_puts(&out, "}");
        }
        for (int k = 0; k < 2; k++) {
            kv_cache_free(kinds[k].kv);
            free(kinds[k].ms);
            free(kinds[k].attn_ms);
        }
        kv_pool_free(pool);
    }
    buf_puts(&out, "]}\n");
    if (rc != 0) fprintf(stderr, "kv-bench: %s\n", err);
    else if (o.json) fputs(out.data, stdout);
    buf_free(&out);
    free(q);
    free(att);
    free(logits);
    qwen3_free(&m);
    backend_free(be);
    return rc == 0 ? 0 : 1;
}
