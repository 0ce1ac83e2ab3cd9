/* scheduler.h: chapter III.7's engine behind chat-server (the book's stage
 * III.6): many requests at once, each in a slot of its own.
 *
 * Requests wait in a bounded queue (--queue N; past it 503). One engine
 * thread runs ticks; each tick
 *   1. drops the requests whose clients went away,
 *   2. admits waiting requests, oldest first, while a slot is free and the
 *      pool has the blocks for the prompt (the oldest is never passed over,
 *      so nobody starves), reusing what the prefix cache holds (radix.h),
 *   3. prefills the admitted ones, at most --prefill-chunk prompt tokens per
 *      tick over every slot, so a long prompt delays the others' next token
 *      by one chunk, not by its whole length; with --prefill-ms, a chunk
 *      beside decoding slots is cut to about that many milliseconds,
 *   4. runs one decode step for every slot past its prompt, and gives each
 *      request the token its own Sampler (parameters, seed) chooses.
 * A request that ends (its end token, a stop string, max_tokens, no room
 * left, its client gone) gives back its slot and blocks at once; its full
 * blocks stay in the prefix cache for the next request. When the pool runs
 * out mid-generation, the youngest request is preempted: its blocks go back
 * and it waits again, to be recomputed (prompt and tokens so far) when it
 * is admitted again, and it continues exactly where it was. */
#ifndef SCHEDULER_H
#define SCHEDULER_H

#include <stdbool.h>
#include <stdio.h>

#include "backend.h"
#include "kv_cache.h"
#include "qwen3.h"
#include "server.h"
#include "tokenizer.h"

typedef struct {
    const Qwen3Model *model;
    Backend *be;
    const char *kv_kind;  /* "paged" or "basic" (kv_cache_create) */
    KvPool *pool;         /* shared by every request; NULL for basic */
    int ctx;              /* the longest sequence, prompt + generated */
    int queue;            /* requests that may wait (>= 0) */
    int max_concurrent;   /* slots (>= 1) */
    int prefill_chunk;    /* prompt tokens prefilled per tick, over all slots (>= 1) */
    double prefill_ms;    /* > 0: while slots decode, a tick's prefill is cut to about this long */
    bool prefix_cache;    /* share cached prefixes (a paged pool only) */
    FILE *trace;          /* --trace-scheduler: a line per tick that did something; NULL: none */
    FILE *kv_trace;       /* --kv-trace: each running slot's block table after a tick; NULL: none */
    bool manual;          /* tests: no engine thread; sched_tick runs the ticks */
    EventHub *events;     /* what each tick did, for GET /v1/events and the live page; NULL: not recorded */
    const Tokenizer *tok; /* shows the prefix cache's token ids as text in the views; NULL: ids only */
} SchedConfig;

#define SCHED_DEFAULT_SLOTS 4
#define SCHED_DEFAULT_QUEUE 64
#define SCHED_DEFAULT_PREFILL_CHUNK 256

/* The engine (server.h) with its thread started; NULL with err. It keeps
 * pointers to everything in c, which must outlive it. */
Engine *sched_engine_create(const SchedConfig *c, char *err);
/* One tick (with SchedConfig.manual); true while requests run or wait. */
bool sched_tick(Engine *e);

/* Counters since the engine was made. Where the engine's time went (ms):
 * whole ticks, the prefill chunks, the fused decode steps (forward passes
 * only), and choosing and handing out the tokens; the rest of a tick is the
 * scheduler's own bookkeeping. */
typedef struct {
    uint64_t ticks, admitted, preemptions;
    double tick_ms, prefill_ms, decode_ms, choose_ms;
    uint64_t prefill_tokens, decode_steps, decode_rows; /* decode_rows / decode_steps: the mean batch */
    uint64_t prefix_lookups, prefix_hits, prefix_cached_tokens, prefix_evicted_blocks;
    int prefix_blocks;    /* blocks the prefix cache holds now */
} SchedStats;
SchedStats sched_stats(Engine *e);
/* One line on f: where the engine's time went (the server prints it when it stops). */
void sched_report(Engine *e, FILE *f);

#endif
