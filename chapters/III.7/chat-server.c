/* chat-server (chapter III.7): an OpenAI-compatible HTTP server. The HTTP
 * side is common/serve/server.c; this chapter's engine (scheduler.c) runs many
 * requests at once in slots, sharing cached prefixes (radix.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "cli.h"
#include "kv_cache.h"
#include "qwen3.h"
#include "scheduler.h"
#include "server.h"
#include "tokenizer.h"

typedef struct {
    const char *model_path;
    const char *backend;
    int threads, ctx, queue, max_concurrent, prefill_chunk, prefill_ms;
    bool no_prefix_cache, trace;
    KvFlags kv;
    ServerConfig server;
} Options;

static void usage(FILE *f) {
    fprintf(f, "usage: chat-server [options] <model.gguf>\n\n");
    fprintf(f, "An OpenAI-compatible chat server: POST /v1/chat/completions (streamed or not),\n");
    fprintf(f, "POST /v1/completions, GET /v1/models, /health, /metrics (Prometheus), /v1/kv (the KV pool and the\n");
    fprintf(f, "prefix cache), /v1/slots (the scheduler's slots and queue), /v1/events (what each tick does,\n");
    fprintf(f, "as Server-Sent Events), and at / a page that draws it all live beside a chat.\n");
    fprintf(f, "This chapter runs many requests at once in slots, reusing cached prompt prefixes.\n\n");
    fprintf(f, "options:\n");
    server_flags_usage(f);
    server_api_flags_usage(f);
    fprintf(f, "  --max-concurrent N     requests running at once, one slot each (default %d)\n", SCHED_DEFAULT_SLOTS);
    fprintf(f, "  --queue N              requests that may wait for a slot (default %d); past it 503\n", SCHED_DEFAULT_QUEUE);
    fprintf(f, "  --prefill-chunk N      prompt tokens prefilled per scheduler tick (default %d)\n",
            SCHED_DEFAULT_PREFILL_CHUNK);
    fprintf(f, "  --prefill-ms MS        while others decode, read prompts in forwards of 32 tokens and stop a\n");
    fprintf(f, "                         tick's prefill before one that would end past MS ms (default 0: the chunk)\n");
    fprintf(f, "  --no-prefix-cache      compute every prompt whole: no sharing of cached prefixes\n");
    fprintf(f, "  --trace-scheduler      a line per scheduler tick on stderr: admitted, prefilled, decoded, preempted\n");
    fprintf(f, "  --ctx N                cap on prompt + generated tokens (default: the model's context)\n");
    kv_flags_usage(f);
    fprintf(f, "  --backend NAME         %s (default: the fastest available)\n", backend_names());
    fprintf(f, "  --threads N            threads of the parallel backend (default: one per core)\n");
    fprintf(f, "  --help                 this text\n");
    fprintf(f, "\nexample:\n  chat-server --bind 127.0.0.1:8080 model.gguf &\n");
    fprintf(f, "  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\\n");
    fprintf(f, "       -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":32}'\n");
}

/* 0, 1 after --help, -1 with err. */
static int parse_args(Options *o, int argc, char **argv, char *err) {
    memset(o, 0, sizeof *o);
    o->queue = SCHED_DEFAULT_QUEUE;
    o->max_concurrent = SCHED_DEFAULT_SLOTS;
    o->prefill_chunk = SCHED_DEFAULT_PREFILL_CHUNK;
    server_config_default(&o->server);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        if ((rc = server_flags_parse(&o->server, argc, argv, &i, err)) != 0 ||
            (rc = server_api_flags_parse(&o->server, argc, argv, &i, err)) != 0 ||
            (rc = kv_flags_parse(&o->kv, argc, argv, &i, err)) != 0) {
            if (rc < 0) return -1;
            continue;
        }
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--no-prefix-cache") == 0) {
            o->no_prefix_cache = true;
        } else if (strcmp(a, "--trace-scheduler") == 0) {
            o->trace = true;
        } else if (strcmp(a, "--queue") == 0 && has_value) {
            if (cli_parse_int(argv[++i], a, 0, 1000000, &o->queue, err)) return -1;
        } else if (strcmp(a, "--max-concurrent") == 0 && has_value) {
            if (cli_parse_int(argv[++i], a, 1, 4096, &o->max_concurrent, err)) return -1;
        } else if (strcmp(a, "--prefill-chunk") == 0 && has_value) {
            if (cli_parse_int(argv[++i], a, 1, 1 << 20, &o->prefill_chunk, err)) return -1;
        } else if (strcmp(a, "--prefill-ms") == 0 && has_value) {
            if (cli_parse_int(argv[++i], a, 0, 3600000, &o->prefill_ms, err)) return -1;
        } else if (strcmp(a, "--ctx") == 0 && has_value) {
            if (cli_parse_int(argv[++i], a, 2, 1 << 30, &o->ctx, err)) return -1;
        } else if (strcmp(a, "--threads") == 0 && has_value) {
            if (cli_parse_int(argv[++i], a, 1, 1024, &o->threads, err)) return -1;
        } else if (strcmp(a, "--backend") == 0 && has_value) {
            o->backend = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            bool known = !strcmp(a, "--queue") || !strcmp(a, "--ctx") || !strcmp(a, "--threads") || !strcmp(a, "--backend") ||
                         !strcmp(a, "--max-concurrent") || !strcmp(a, "--prefill-chunk") || !strcmp(a, "--prefill-ms");
            if (known) err_set(err, "option %s needs a value", a);
            else err_set(err, "unknown option '%s' (see --help)", a);
            return -1;
        } else if (!o->model_path) {
            o->model_path = a;
        } else {
            err_set(err, "one model file only: '%s' is extra (see --help)", a);
            return -1;
        }
    }
    if (!o->model_path) {
        err_set(err, "missing the model file (see --help)");
        return -1;
    }
    return 0;
}

/* The model's name for /v1/models: the file name without directory and ".gguf". */
static char *model_name(const char *path) {
    const char *base = strrchr(path, '/');
    char *name = xstrdup(base ? base + 1 : path);
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".gguf") == 0) name[n - 5] = '\0';
    return name;
}

typedef struct {
    Qwen3Model model;
    Tokenizer *tok;
    Backend *be;
    KvPool *pool;
    Engine *engine;
    EventHub *events;  /* what the engine does, for GET /v1/events and the page at GET / */
    char *name;
} Loaded;

/* The pool's memory held now: the system hands out a page, zeroed, at its
 * first write, which would otherwise fall inside the first requests' forward
 * passes. Linux (5.14 on) is asked for every page at once and says when
 * they do not fit; elsewhere the pool is written once. */
static int pool_resident(KvPool *p, char *err) {
    size_t bytes = (size_t)p->n_blocks * p->block_floats * sizeof(float);
#ifdef MADV_POPULATE_WRITE
    if (madvise(p->data, bytes, MADV_POPULATE_WRITE) == 0) return 0;
    if (errno == ENOMEM)
        return err_set(err, "a KV pool of %.1f MiB does not fit in this machine's memory: ask for less "
                            "(--kv-mem, --kv-blocks, --ctx)", (double)bytes / (1024.0 * 1024.0)), -1;
#endif
    memset(p->data, 0, bytes);
    return 0;
}

static int load(Loaded *l, Options *o, char *err) {
    memset(l, 0, sizeof *l);
    char inner[ERR_MAX];
    if (!(l->be = backend_create(o->backend, o->threads, err)) || qwen3_load(&l->model, o->model_path, err) != 0) return -1;
    if (!(l->tok = tokenizer_load(&l->model.file, inner))) {
        err_set(err, "%s: %s", o->model_path, inner);
        return -1;
    }
    int ctx = l->model.cfg.ctx_len;
    if (o->ctx > 0 && o->ctx < ctx) ctx = o->ctx;
    l->pool = kv_flags_make_pool(&o->kv, &l->model.cfg, ctx, err);
    if (!l->pool && err[0]) return -1;
    if (l->pool && pool_resident(l->pool, err) != 0) return -1;
    if (l->pool) kv_pool_report(l->pool, stderr);
    l->events = events_create();
    if (l->pool) l->pool->events = l->events;
    SchedConfig sc = {.model = &l->model, .be = l->be, .kv_kind = o->kv.kind ? o->kv.kind : KV_KINDS[0],
                      .pool = l->pool, .ctx = ctx, .queue = o->queue, .max_concurrent = o->max_concurrent,
                      .prefill_chunk = o->prefill_chunk, .prefill_ms = (double)o->prefill_ms, .prefix_cache = !o->no_prefix_cache,
                      .trace = o->trace ? stderr : NULL, .kv_trace = o->kv.trace ? stderr : NULL, .events = l->events, .tok = l->tok};
    if (!(l->engine = sched_engine_create(&sc, err))) return -1;
    if (strcmp(o->server.model_name, "model") == 0) o->server.model_name = l->name = model_name(o->model_path);
    o->server.tok = l->tok;
    o->server.vocab_size = tokenizer_vocab_size(l->tok);
    o->server.ctx = ctx;
    return 0;
}

static void unload(Loaded *l) {
    if (l->engine) {
        l->engine->shutdown(l->engine);
        sched_report(l->engine, stderr);
        l->engine->destroy(l->engine);
    }
    kv_pool_free(l->pool);
    events_free(l->events);
    tokenizer_free(l->tok);
    qwen3_free(&l->model);
    backend_free(l->be);
    free(l->name);
}

int main(int argc, char **argv) {
    Options o;
    Loaded l = {0};
    char err[ERR_MAX] = "";
    int rc = parse_args(&o, argc, argv, err);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc == 0) rc = load(&l, &o, err);
    if (rc == 0) rc = server_run(&o.server, l.engine, err);
    unload(&l);
    if (rc == 0) return 0;
    fprintf(stderr, "chat-server: %s\n", err);
    return 1;
}
