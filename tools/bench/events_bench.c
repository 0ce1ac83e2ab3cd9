/* events-bench: does a stalled /v1/events reader slow the engine? (make
 * bench-events). III.7's scheduler runs the same batch of requests in
 * process, tick by tick, three ways in each round: with no event hub, with a
 * hub nobody listens to, and with a subscriber that never reads (its ring
 * fills, then every event is dropped and counted). Rounds interleave the
 * three; the medians of the throughput are compared, and every run must
 * give the same tokens. Throughput is counted per second of the process's
 * CPU time as well as of the wall clock: on a machine others share, the wall
 * clock swings with their load, the CPU time much less.
 *
 *   events-bench [--requests N] [--tokens N] [--rounds N] [--backend NAME] [--threads N] model.gguf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cli.h"
#include "events.h"
#include "kv_cache.h"
#include "qwen3.h"
#include "scheduler.h"
#include "tokenizer.h"

#define STALLED_RING (64 * 1024) /* small enough to fill in a run: the reader's drops are part of what is timed */

enum { MODE_OFF, MODE_IDLE_HUB, MODE_STALLED, N_MODES };
static const char *const MODE_NAMES[N_MODES] = {"no event hub", "hub, nobody listening", "a stalled reader"};

typedef struct {
    Qwen3Model m;
    Tokenizer *tok;
    Backend *be;
    int requests, tokens;
    int32_t *prompt;
    int n_prompt;
} Bench;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One run: every request at once, ticks until all end. Returns tokens per
 * wall-clock second, and *cpu_tps per CPU second;
 * out[requests * tokens] gets the tokens; *dropped what the stalled reader lost. */
static double run(Bench *b, int mode, int32_t *out, unsigned long long *dropped, double *cpu_tps) {
    char err[ERR_MAX];
    EventHub *hub = mode == MODE_OFF ? NULL : events_create();
    EventSub *sub = mode == MODE_STALLED ? events_subscribe(hub, STALLED_RING, err) : NULL;
    int bs = 16, per = (b->n_prompt + b->tokens + bs - 1) / bs;
    KvPool *pool = kv_pool_create(&b->m.cfg, bs, per * b->requests + 1, err);
    if (!pool) {
        fprintf(stderr, "events-bench: %s\n", err);
        exit(1);
    }
    pool->events = hub;
    SchedConfig c = {.model = &b->m, .be = b->be, .kv_kind = "paged", .pool = pool, .ctx = b->m.cfg.ctx_len,
                     .queue = b->requests, .max_concurrent = b->requests, .prefill_chunk = 256, .prefix_cache = true,
                     .manual = true, .events = hub, .tok = b->tok};
    Engine *e = sched_engine_create(&c, err);
    GenRequest **r = xcalloc((size_t)b->requests, sizeof *r);
    for (int i = 0; i < b->requests; i++) {
        GenInput in = {.prompt = b->prompt, .n_prompt = b->n_prompt, .max_tokens = b->tokens,
                       .sampling = sampler_params_default(), .top_logprobs = 0, .ignore_eos = true};
        in.sampling.temperature = 0.8f;
        in.sampling.seed = (uint64_t)i + 1;
        snprintf(in.id, sizeof in.id, "bench-%d", i);
        r[i] = gen_request_create(&in, b->tok, NULL, 0);
        if (e->submit(e, r[i], err) != 0) {
            fprintf(stderr, "events-bench: %s\n", err);
            exit(1);
        }
    }
    double t0 = time_now_ms(), c0 = cpu_ms();
    while (sched_tick(e)) {}
    double ms = time_now_ms() - t0, cpu = cpu_ms() - c0;
    *cpu_tps = cpu > 0 ? b->requests * (double)b->tokens * 1000.0 / cpu : 0;
    for (int i = 0; i < b->requests; i++) {
        GenPiece p;
        int k = 0;
        while (gen_next(r[i], &p, 0) == 1) {
            for (int j = 0; j < p.n_lp && k < b->tokens; j++) out[i * b->tokens + k++] = p.lp[j].token;
            gen_piece_free(&p);
        }
    }
    *dropped = sub ? events_dropped(sub) : 0;
    e->destroy(e);
    for (int i = 0; i < b->requests; i++) gen_request_free(r[i]);
    free(r);
    events_unsubscribe(sub);
    events_free(hub);
    kv_pool_free(pool);
    return ms > 0 ? b->requests * (double)b->tokens * 1000.0 / ms : 0;
}

int main(int argc, char **argv) {
    Bench b = {.requests = 4, .tokens = 128};
    int rounds = 7, threads = 0;
    const char *backend = NULL, *path = NULL;
    char err[ERR_MAX];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool v = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: events-bench [--requests N] [--tokens N] [--rounds N] [--backend NAME] [--threads N] model.gguf\n\n"
                   "III.7's scheduler in process, the same requests at once with no event hub, with one nobody\n"
                   "listens to, and with a subscriber that never reads (a %d KiB ring): interleaved rounds, the\n"
                   "medians of tokens per wall-clock and per CPU second, and the same tokens in every run.\n"
                   "Defaults: 4 requests of 128 tokens, 7 rounds (make bench-events).\n", STALLED_RING / 1024);
            return 0;
        }
        if (!strcmp(a, "--requests") && v) { if (cli_parse_int(argv[++i], a, 1, 64, &b.requests, err)) goto bad; }
        else if (!strcmp(a, "--tokens") && v) { if (cli_parse_int(argv[++i], a, 1, 4096, &b.tokens, err)) goto bad; }
        else if (!strcmp(a, "--rounds") && v) { if (cli_parse_int(argv[++i], a, 1, 100, &rounds, err)) goto bad; }
        else if (!strcmp(a, "--threads") && v) { if (cli_parse_int(argv[++i], a, 1, 1024, &threads, err)) goto bad; }
        else if (!strcmp(a, "--backend") && v) backend = argv[++i];
        else if (a[0] != '-' && !path) path = a;
        else {
            err_set(err, "unknown or incomplete option '%s'", a);
            goto bad;
        }
    }
    if (!path) {
        err_set(err, "missing the model file");
        goto bad;
    }
    /* top_logprobs 0 gives each piece its token, for comparing the runs */
    if (!(b.be = backend_create(backend, threads, err)) || qwen3_load(&b.m, path, err) != 0 ||
        !(b.tok = tokenizer_load(&b.m.file, err)))
        goto bad;
    const char *text = "Once upon a time, in a small house by the river, there lived a little girl named Lily.";
    if (tokenizer_encode(b.tok, text, strlen(text), false, &b.prompt, &b.n_prompt, err) != 0) goto bad;
    if (b.n_prompt + b.tokens > b.m.cfg.ctx_len) b.tokens = b.m.cfg.ctx_len - b.n_prompt;
    size_t n_out = (size_t)b.requests * (size_t)b.tokens;
    int32_t *want = xcalloc(n_out, sizeof *want), *got = xcalloc(n_out, sizeof *got);
    double *tps[N_MODES], *cps[N_MODES], cpu;
    unsigned long long dropped = 0, lost;
    for (int m = 0; m < N_MODES; m++) {
        tps[m] = xcalloc((size_t)rounds, sizeof(double));
        cps[m] = xcalloc((size_t)rounds, sizeof(double));
    }
    run(&b, MODE_OFF, want, &lost, &cpu); /* a warm-up, and the tokens every run must give */
    bool same = true;
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < N_MODES; k++) {
            int m = (r + k) % N_MODES; /* each round starts with another mode */
            tps[m][r] = run(&b, m, got, &lost, &cps[m][r]);
            same &= memcmp(got, want, n_out * sizeof *got) == 0;
            if (m == MODE_STALLED) dropped += lost;
        }
    printf("events-bench: %s, backend %s, %d requests x %d tokens at once, %d interleaved rounds\n", path,
           b.be->name, b.requests, b.tokens, rounds);
    double wall[N_MODES], cpus[N_MODES];
    for (int m = 0; m < N_MODES; m++) {
        qsort(tps[m], (size_t)rounds, sizeof(double), cmp_double);
        qsort(cps[m], (size_t)rounds, sizeof(double), cmp_double);
        wall[m] = tps[m][rounds / 2];
        cpus[m] = cps[m][rounds / 2];
        printf("  %-24s median %8.1f tokens/s wall clock (min %.1f, max %.1f), %8.1f per CPU second\n", MODE_NAMES[m],
               wall[m], tps[m][0], tps[m][rounds - 1], cpus[m]);
    }
    printf("  a stalled reader / no hub: %.3f wall clock, %.3f CPU; a hub nobody listens to / no hub: %.3f, %.3f\n",
           wall[MODE_STALLED] / wall[MODE_OFF], cpus[MODE_STALLED] / cpus[MODE_OFF], wall[MODE_IDLE_HUB] / wall[MODE_OFF],
           cpus[MODE_IDLE_HUB] / cpus[MODE_OFF]);
    printf("  the stalled reader's ring dropped %llu events in %d runs; tokens %s in every run\n", dropped, rounds,
           same ? "the same" : "DIFFERENT");
    for (int m = 0; m < N_MODES; m++) {
        free(tps[m]);
        free(cps[m]);
    }
    free(want);
    free(got);
    free(b.prompt);
    tokenizer_free(b.tok);
    qwen3_free(&b.m);
    backend_free(b.be);
    return same ? 0 : 1;
bad:
    fprintf(stderr, "events-bench: %s\nusage: events-bench [--requests N] [--tokens N] [--rounds N] [--backend NAME] "
                    "[--threads N] model.gguf\n", err);
    return 2;
}
