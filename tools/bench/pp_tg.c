/* pp-tg: the book's engine (the last chapter's forward_extend on its paged KV
 * cache) timed the way llama.cpp's llama-bench times itself, for `make
 * bench-llamacpp` (tools/bench/llamacpp.c), so both sides of its table mean
 * the same thing. (Not II.2's basic cache: it copies itself on every token
 * by design, 1-6 % of a decode step.)
 *
 *   pp-tg [--pp 128] [--tg 64] [--reps 2] [--backend NAME] [--threads N] [--json] <model.gguf>
 *
 * In one process, after loading the model:
 *   cold  the very first prefill of --pp tokens: it also touches every page of
 *         the mapped weights for the first time (what a fresh model-generate's
 *         time to first token measures);
 *   pp    --reps prefills of --pp tokens into an empty cache, after that first
 *         one warmed up the weights (llama-bench's pp: a warm-up run first);
 *   tg    one decode step to warm up, then --reps runs of --tg decode steps from
 *         an empty cache, one token each (llama-bench's tg: positions 0 to
 *         tg-1, no prompt).
 * Every token id is pseudo-random, as llama-bench's are: the time of a forward
 * does not depend on them, and like llama-bench no step picks its next token
 * from the logits (a sampler is not what is timed). Reported: tokens/s of the
 * cold prefill and of the fastest and the mean run of pp and tg. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "forward.h"
#include "kv_pool.h"
#include "util.h"

#define MAX_REPS 100

typedef struct {
    const char *model, *backend;
    int pp, tg, reps, threads;
    bool json;
} Options;

/* Tokens/s of the runs of one test. */
typedef struct {
    double best, mean;
} Rate;

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: pp-tg [--pp 128] [--tg 64] [--reps 2] [--backend NAME] [--threads N] [--json] <model.gguf>\n"
               "Prefill (pp) and decode (tg) tokens/s of the last chapter's engine (paged KV cache), timed as llama-bench\n"
               "times llama.cpp: warm-up first, then --reps runs from an empty cache; also the cold\n"
               "first prefill. Backends: %s.\n",
            backend_names());
    return rc;
}

/* 0 to run, 1 after --help, -1 with err. */
static int parse(Options *o, int argc, char **argv, char *err) {
    *o = (Options){.pp = 128, .tg = 64, .reps = 2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (a[0] != '-') {
            if (o->model) {
                err_set(err, "one model only: '%s' and '%s'", o->model, a);
                return -1;
            }
            o->model = a;
            continue;
        }
        bool known = strcmp(a, "--pp") == 0 || strcmp(a, "--tg") == 0 || strcmp(a, "--reps") == 0 ||
                     strcmp(a, "--threads") == 0 || strcmp(a, "--backend") == 0;
        if (!known) {
            err_set(err, "unknown option '%s' (--help lists them)", a);
            return -1;
        }
        if (!v) {
            err_set(err, "%s needs a value", a);
            return -1;
        }
        if (strcmp(a, "--pp") == 0) rc = cli_parse_int(v, a, 1, 4096, &o->pp, err);
        else if (strcmp(a, "--tg") == 0) rc = cli_parse_int(v, a, 1, 4096, &o->tg, err);
        else if (strcmp(a, "--reps") == 0) rc = cli_parse_int(v, a, 1, MAX_REPS, &o->reps, err);
        else if (strcmp(a, "--threads") == 0) rc = cli_parse_int(v, a, 1, 256, &o->threads, err);
        else o->backend = v;
        if (rc != 0) return -1;
        i++;
    }
    if (!o->model) {
        err_set(err, "no model given (--help for usage)");
        return -1;
    }
    return 0;
}

/* n pseudo-random token ids below vocab (a linear congruential generator from seed). */
static int32_t *random_tokens(int n, int vocab, uint32_t seed) {
    int32_t *t = xmalloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)vocab);
    }
    return t;
}

/* ms of one run of tokens[0..n) from a fresh paged cache: in one forward
 * (prefill), or one token a forward (decode). */
static double time_run(const Qwen3Model *m, Backend *be, KvPool *pool, const int32_t *tokens, int n, bool decode,
                       float *logits, char *err) {
    KvCache *kv = kv_cache_create("paged", &m->cfg, pool, err);
    if (!kv) return -1;
    int rc = 0;
    double t0 = time_now_ms();
    if (!decode) rc = forward_extend(m, be, kv, tokens, n, logits, err);
    for (int i = 0; decode && i < n && rc == 0; i++) rc = forward_extend(m, be, kv, &tokens[i], 1, logits, err);
    double ms = time_now_ms() - t0;
    kv_cache_free(kv);
    return rc == 0 ? ms : -1;
}

/* Best and mean tokens/s of runs that took ms[0..n) for `tokens` tokens each. */
static Rate rate_of(const double *ms, int n, int tokens) {
    Rate r = {0, 0};
    for (int i = 0; i < n; i++) {
        double tps = tokens / (ms[i] / 1000);
        if (tps > r.best) r.best = tps;
        r.mean += tps / n;
    }
    return r;
}

static int run(const Options *o, const Qwen3Model *m, Backend *be, char *err) {
    int32_t *prompt = random_tokens(o->pp, m->cfg.vocab_size, 12345); /* [pp] */
    int32_t *gen = random_tokens(o->tg, m->cfg.vocab_size, 54321);    /* [tg] */
    float *logits = xmalloc(sizeof(float) * (size_t)m->cfg.vocab_size); /* [vocab] */
    double pp_ms[MAX_REPS], tg_ms[MAX_REPS];
    int longest = o->pp > o->tg ? o->pp : o->tg;
    KvPool *pool = kv_pool_create(&m->cfg, KV_DEFAULT_BLOCK_SIZE, (longest + KV_DEFAULT_BLOCK_SIZE - 1) / KV_DEFAULT_BLOCK_SIZE, err);
    double cold_ms = pool ? time_run(m, be, pool, prompt, o->pp, false, logits, err) : -1;
    int rc = cold_ms < 0 ? -1 : 0;
    for (int r = 0; r < o->reps && rc == 0; r++)
        if ((pp_ms[r] = time_run(m, be, pool, prompt, o->pp, false, logits, err)) < 0) rc = -1;
    if (rc == 0 && time_run(m, be, pool, gen, 1, true, logits, err) < 0) rc = -1; /* warm-up */
    for (int r = 0; r < o->reps && rc == 0; r++)
        if ((tg_ms[r] = time_run(m, be, pool, gen, o->tg, true, logits, err)) < 0) rc = -1;
    if (rc == 0) {
        Rate pp = rate_of(pp_ms, o->reps, o->pp), tg = rate_of(tg_ms, o->reps, o->tg);
        double cold = o->pp / (cold_ms / 1000);
        if (o->json)
            printf("{\"backend\":\"%s\",\"threads\":%d,\"pp\":%d,\"tg\":%d,\"reps\":%d,\"cold_pp_tokens_per_s\":%.3f,"
                   "\"pp_tokens_per_s\":%.3f,\"pp_mean_tokens_per_s\":%.3f,\"tg_tokens_per_s\":%.3f,"
                   "\"tg_mean_tokens_per_s\":%.3f}\n",
                   be->name, be->n_threads, o->pp, o->tg, o->reps, cold, pp.best, pp.mean, tg.best, tg.mean);
        else
            printf("%s, %d thread%s, best (mean) of %d runs:\n  pp%-4d cold %8.2f tok/s\n  pp%-4d warm %8.2f "
                   "(%.2f) tok/s\n  tg%-4d      %8.2f (%.2f) tok/s\n",
                   be->name, be->n_threads, be->n_threads == 1 ? "" : "s", o->reps, o->pp, cold, o->pp, pp.best,
                   pp.mean, o->tg, tg.best, tg.mean);
    }
    free(logits);
    kv_pool_free(pool);
    free(gen);
    free(prompt);
    return rc;
}

int main(int argc, char **argv) {
    Options o;
    char err[ERR_MAX];
    int rc = parse(&o, argc, argv, err);
    if (rc == 1) return usage(stdout, 0);
    if (rc != 0) {
        fprintf(stderr, "pp-tg: %s\n", err);
        return 2;
    }
    Backend *be = backend_create(o.backend, o.threads, err);
    if (!be) {
        fprintf(stderr, "pp-tg: %s\n", err);
        return 2;
    }
    Qwen3Model m;
    if (qwen3_load(&m, o.model, err) != 0) {
        fprintf(stderr, "pp-tg: %s\n", err);
        backend_free(be);
        return 1;
    }
    rc = run(&o, &m, be, err);
    if (rc != 0) fprintf(stderr, "pp-tg: %s\n", err);
    qwen3_free(&m);
    backend_free(be);
    return rc == 0 ? 0 : 1;
}
