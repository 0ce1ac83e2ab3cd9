/* batched-bench (chapter III.7): the speed of seq_decode_batch alone, as
 * llama.cpp's llama-batched-bench reports it (S_TG). For each batch size B,
 * B sequences on one paged pool are prefilled with a prompt of --prompt
 * tokens each, then --steps decode steps run all B at once (greedy tokens);
 * aggregate decode tokens/s = B * steps / the wall time of those steps.
 * Each figure is the best of --runs runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "ops.h"
#include "util.h"

#define MAX_BATCHES 16

typedef struct {
    const char *model, *backend;
    int threads, prompt, steps, runs, block_size;
    int batches[MAX_BATCHES], n_batches;
    bool json;
} Options;

typedef struct {
    int B;
    double tg_ms;   /* wall time of the decode steps, best run */
    double best_ms; /* the fastest single step */
    double tps;     /* B * steps / tg_ms */
} Result;

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: batched-bench [options] <model.gguf>\n\n"
               "Aggregate decode tokens/s of seq_decode_batch: for each batch size B, B sequences\n"
               "prefilled with a prompt each, then decode steps that run all B at once.\n\n"
               "options:\n"
               "  --batches LIST     batch sizes, comma-separated (default: 1,2,4,8; each 1 to 256)\n"
               "  --prompt N         prompt tokens of each sequence (default: 128)\n"
               "  --steps N          decode steps timed (default: 64)\n"
               "  --runs N           runs per batch size, the best kept (default: 1)\n"
               "  --backend NAME     %s (default: the fastest available)\n"
               "  --threads N        threads of the parallel backend (default: one per core)\n"
               "  --kv-block-size N  positions per KV block (default: %d)\n"
               "  --json             one JSON object on stdout instead of the table\n"
               "  --help             this text\n",
               backend_names(), KV_DEFAULT_BLOCK_SIZE);
    return rc;
}

static int parse_int(const char *flag, const char *s, int min, int max, int *out, char *err) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < min || v > max) {
        err_set(err, "%s must be an integer from %d to %d, got '%s'", flag, min, max, s ? s : "nothing");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_batches(Options *o, const char *s, char *err) {
    char *copy = xstrdup(s ? s : ""), *save = NULL;
    o->n_batches = 0;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        if (o->n_batches == MAX_BATCHES) {
            err_set(err, "--batches: at most %d sizes", MAX_BATCHES);
            rc = -1;
        } else {
            rc = parse_int("--batches", t, 1, 256, &o->batches[o->n_batches++], err);
        }
    }
    if (rc == 0 && o->n_batches == 0) rc = parse_int("--batches", NULL, 1, 256, &o->batches[0], err);
    free(copy);
    return rc;
}

/* 0 to run, 1 after --help, -1 with err. */
static int parse(Options *o, int argc, char **argv, char *err) {
    *o = (Options){.prompt = 128, .steps = 64, .runs = 1, .block_size = KV_DEFAULT_BLOCK_SIZE,
                   .batches = {1, 2, 4, 8}, .n_batches = 4};
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
        if (strcmp(a, "--batches") == 0) rc = parse_batches(o, v, err);
        else if (strcmp(a, "--prompt") == 0) rc = parse_int(a, v, 1, 4096, &o->prompt, err);
        else if (strcmp(a, "--steps") == 0) rc = parse_int(a, v, 1, 4096, &o->steps, err);
        else if (strcmp(a, "--runs") == 0) rc = parse_int(a, v, 1, 100, &o->runs, err);
        else if (strcmp(a, "--threads") == 0) rc = parse_int(a, v, 1, 256, &o->threads, err);
        else if (strcmp(a, "--kv-block-size") == 0) rc = parse_int(a, v, 1, 4096, &o->block_size, err);
        else if (strcmp(a, "--backend") == 0) {
            if (!v) {
                err_set(err, "--backend needs a name: %s", backend_names());
                return -1;
            }
            o->backend = v;
        } else {
            err_set(err, "unknown option '%s' (--help lists them)", a);
            return -1;
        }
        if (rc != 0) return -1;
        i++;
    }
    if (!o->model) {
        err_set(err, "no model given (--help for usage)");
        return -1;
    }
    return 0;
}

/* One run of batch size B: prefill B sequences, time the decode steps. */
static int run_batch(const Options *o, const Qwen3Model *m, Backend *be, int B, Result *r, char *err) {
    int len = o->prompt + o->steps, per_seq = (len + o->block_size - 1) / o->block_size;
    if (len > m->cfg.ctx_len) {
        err_set(err, "--prompt + --steps = %d is more than the model's context of %d", len, m->cfg.ctx_len);
        return -1;
    }
    KvPool *pool = kv_pool_create(&m->cfg, o->block_size, B * per_seq, err);
    if (!pool) return -1;
    Sequence *seqs = xcalloc((size_t)B, sizeof *seqs);   /* [B] */
    Sequence **batch = xmalloc(sizeof(Sequence *) * (size_t)B);
    int32_t *toks = xmalloc(sizeof(int32_t) * (size_t)(B > o->prompt ? B : o->prompt)); /* a prompt, then [B] */
    int rc = 0, opened = 0;
    for (int i = 0; i < B && rc == 0; i++) { /* each its own prompt, spread over the vocabulary */
        for (int t = 0; t < o->prompt; t++)
            toks[t] = (int32_t)((uint32_t)(i * 7919 + t * 104729 + 17) % (uint32_t)m->cfg.vocab_size);
        KvCache *kv = kv_cache_create("paged", &m->cfg, pool, err);
        if (!kv || seq_init(&seqs[i], m, be, kv, len, err) != 0) {
            rc = -1;
            break;
        }
        opened++;
        batch[i] = &seqs[i];
        rc = seq_extend(&seqs[i], toks, o->prompt, err);
    }
    double total = 0, best = 0;
    for (int step = 0; step < o->steps && rc == 0; step++) {
        for (int i = 0; i < B; i++) toks[i] = argmax(seqs[i].logits, m->cfg.vocab_size, NULL);
        double t0 = time_now_ms();
        rc = seq_decode_batch(batch, toks, B, err);
        double ms = time_now_ms() - t0;
        total += ms;
        if (best == 0 || ms < best) best = ms;
    }
    if (rc == 0 && (r->tps == 0 || B * o->steps / (total / 1000) > r->tps))
        *r = (Result){B, total, best, B * o->steps / (total / 1000)};
    for (int i = 0; i < opened; i++) seq_free(&seqs[i]);
    free(toks);
    free(batch);
    free(seqs);
    kv_pool_free(pool);
    return rc;
}

static void print_results(const Options *o, const Backend *be, const Result *res, int n) {
    if (o->json) {
        printf("{\"model\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"prompt\":%d,\"steps\":%d,\"results\":[", o->model,
               be->name, be->n_threads, o->prompt, o->steps);
        for (int i = 0; i < n; i++)
            printf("%s{\"batch\":%d,\"tg_ms\":%.2f,\"step_ms\":%.3f,\"best_step_ms\":%.3f,\"tokens_per_s\":%.3f}",
                   i ? "," : "", res[i].B, res[i].tg_ms, res[i].tg_ms / o->steps, res[i].best_ms, res[i].tps);
        printf("]}\n");
        return;
    }
    printf("%s: %s backend, %d thread%s; prompt %d tokens per sequence, %d decode steps\n\n", o->model, be->name,
           be->n_threads, be->n_threads == 1 ? "" : "s", o->prompt, o->steps);
    printf("|   B | step ms | best step ms | decode tok/s (all B) | x B=%d |\n", res[0].B);
    printf("|----:|--------:|-------------:|---------------------:|-------:|\n");
    for (int i = 0; i < n; i++)
        printf("| %3d | %7.1f | %12.1f | %20.2f | %6.2f |\n", res[i].B, res[i].tg_ms / o->steps, res[i].best_ms,
               res[i].tps, res[i].tps / res[0].tps);
}

int main(int argc, char **argv) {
    Options o;
    char err[ERR_MAX];
    int rc = parse(&o, argc, argv, err);
    if (rc == 1) return usage(stdout, 0);
    if (rc != 0) {
        fprintf(stderr, "batched-bench: %s\n", err);
        return 2;
    }
    Qwen3Model m;
    if (qwen3_load(&m, o.model, err) != 0) {
        fprintf(stderr, "batched-bench: %s\n", err);
        return 1;
    }
    Backend *be = backend_create(o.backend, o.threads, err);
    if (!be) {
        fprintf(stderr, "batched-bench: %s\n", err);
        qwen3_free(&m);
        return 1;
    }
    Result res[MAX_BATCHES] = {0};
    rc = 0;
    for (int b = 0; b < o.n_batches && rc == 0; b++)
        for (int run = 0; run < o.runs && rc == 0; run++) rc = run_batch(&o, &m, be, o.batches[b], &res[b], err);
    if (rc == 0) print_results(&o, be, res, o.n_batches);
    else fprintf(stderr, "batched-bench: %s\n", err);
    backend_free(be);
    qwen3_free(&m);
    return rc == 0 ? 0 : 1;
}
