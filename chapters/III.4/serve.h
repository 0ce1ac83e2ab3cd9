/* serve.h: chapter III.4's engine behind chat-server: one request at a time.
 *
 * Requests wait in a bounded queue (--queue N); past it the client gets 503
 * at once instead of waiting without end. One worker thread takes the oldest
 * request, gives it a Sequence with a cache from the shared pool and its own
 * Sampler, reads the prompt (prefill) and decodes token by token until the
 * request ends, is cancelled (its client went away) or runs out of room;
 * then the cache goes back to the pool and the next request starts. III.7
 * replaces this engine with one that runs many requests at once. */
#ifndef SERVE_H
#define SERVE_H

#include "backend.h"
#include "kv_cache.h"
#include "qwen3.h"
#include "server.h"

typedef struct {
    const Qwen3Model *model;
    Backend *be;
    const char *kv_kind;  /* "paged" or "basic" (kv_cache_create) */
    KvPool *pool;         /* shared by every request; NULL for basic */
    int ctx;              /* the longest sequence, prompt + generated */
    int queue;            /* requests that may wait while one runs (>= 0) */
    EventHub *events;     /* what each step did, for GET /v1/events and the live page; NULL: not recorded */
    bool trace;           /* --kv-trace: each step's block table and the pool (stderr) */
} ServeConfig;

/* The engine (server.h) with its worker thread started; NULL with err. It
 * keeps pointers to everything in c, which must outlive it. */
Engine *serve_engine_create(const ServeConfig *c, char *err);

#endif
