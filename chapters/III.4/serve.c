/* serve.c: one request at a time from a bounded queue (serve.h).
 *
 * Connection threads call serve_submit, which only queues; the worker
 * thread runs the requests in arrival order. Everything the worker reports
 * goes into the request (server.h), never to a socket, so a slow client
 * cannot hold up the model. The lock guards the queue and the running
 * request; the model runs without it. */
#include "serve.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sampling.h"
#include "sequence.h"

typedef struct {
    Engine engine;              /* first: an Engine* is a Serve* */
    ServeConfig cfg;
    pthread_mutex_t mu;
    pthread_cond_t wake;        /* a request arrived, or stopping */
    GenRequest **queue;         /* [cfg.queue + 1] a ring: queue[head], ... in arrival order */
    int head, n_waiting;
    GenRequest *running;
    int position, generated;    /* the running request's, after its last step (for the events) */
    uint64_t ticks;             /* the worker's steps (a forward pass, or a request's end), for the events */
    bool stopping;
    bool joined;
    pthread_t worker;
} Serve;

static const char SHUTTING_DOWN[] = "the server is shutting down";

/* ---- the queue ------------------------------------------------------------------------ */

/* Adds r at the back, unless cfg.queue requests wait already; with none
 * running, one more is taken: the worker picks it up at once. */
/* EXERCISE serve-queue "A bounded queue: take a request or refuse it" 2 points; tests: III4_serve_queue */
static bool queue_push(Serve *s, GenRequest *r) {
    int room = s->cfg.queue + (s->running ? 0 : 1);
    if (s->n_waiting >= room) return false;
    int cap = s->cfg.queue + 1;
    s->queue[(s->head + s->n_waiting) % cap] = r;
    s->n_waiting++;
    return true;
}

/* The oldest waiting request, taken out of the queue (NULL if none). */
static GenRequest *queue_pop(Serve *s) {
    if (s->n_waiting == 0) return NULL;
    GenRequest *r = s->queue[s->head];
    s->head = (s->head + 1) % (s->cfg.queue + 1);
    s->n_waiting--;
    return r;
}

/* Takes out the waiting requests whose clients went away, so they free
 * their places at once; they are finished after the lock is let go. */
/* EXERCISE serve-drop-cancelled "Drop the waiting requests nobody waits for" 2 points; tests: III4_serve_cancel_waiting */
static int queue_take_cancelled(Serve *s, GenRequest **out) {
    int cap = s->cfg.queue + 1, n_out = 0, kept = 0;
    for (int i = 0; i < s->n_waiting; i++) {
        GenRequest *r = s->queue[(s->head + i) % cap];
        if (gen_cancelled(r)) out[n_out++] = r;
        else s->queue[(s->head + kept++) % cap] = r;
    }
    s->n_waiting = kept;
    return n_out;
}

static void finish_cancelled_waiting(Serve *s) {
    GenRequest **gone = xmalloc(sizeof *gone * (size_t)(s->cfg.queue + 1));
    pthread_mutex_lock(&s->mu);
    int n = queue_take_cancelled(s, gone);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) gen_finish(gone[i]);
    free(gone);
}

/* ---- events (GET /v1/events) ---------------------------------------------------------------- */

/* The running request and the queue, shaped as III.7's slots view (one slot). Under mu. */
static void slots_json(const Serve *s, Buf *out) {
    buf_printf(out, "{\"max_concurrent\":1,\"running\":%d,\"slots\":[{\"slot\":0", s->running != NULL);
    if (s->running) {
        const GenInput *in = gen_input(s->running);
        buf_puts(out, ",\"state\":\"busy\",\"request\":");
        json_append_string(out, in->id, strlen(in->id));
        int prefilled = s->position < in->n_prompt ? s->position : in->n_prompt;
        buf_printf(out, ",\"phase\":\"%s\",\"position\":%d,\"prompt_tokens\":%d,\"cached_tokens\":0,"
                   "\"prefilled_tokens\":%d,\"generated\":%d}",
                   s->position < in->n_prompt ? "prefill" : "decode", s->position, in->n_prompt, prefilled, s->generated);
    } else {
        buf_puts(out, ",\"state\":\"idle\"}");
    }
    buf_printf(out, "],\"queue\":%d,\"waiting\":[", s->cfg.queue);
    for (int i = 0; i < s->n_waiting; i++) {
        const GenInput *in = gen_input(s->queue[(s->head + i) % (s->cfg.queue + 1)]);
        buf_puts(out, i ? ",{\"request\":" : "{\"request\":");
        json_append_string(out, in->id, strlen(in->id));
        buf_printf(out, ",\"tokens\":%d}", in->n_prompt);
    }
    buf_puts(out, "]}");
}

/* The tick event: B, the prompt tokens read, and the state the step left:
 * the slot and queue, the pool's map and tables. */
static void note_tick(Serve *s, int batch, int prefilled) {
    Buf e = {0};
    buf_printf(&e, "{\"ev\":\"tick\",\"tick\":%llu,\"B\":%d,\"prefilled\":%d,\"slots\":", (unsigned long long)s->ticks,
               batch, prefilled);
    pthread_mutex_lock(&s->mu);
    slots_json(s, &e);
    pthread_mutex_unlock(&s->mu);
    buf_puts(&e, ",\"kv\":");
    if (s->cfg.pool) kv_pool_json(s->cfg.pool, &e);
    else buf_puts(&e, "null");
    buf_puts(&e, "}");
    events_emit(s->cfg.events, e.data, e.len);
    buf_free(&e);
}

/* Records an event about r ("admit"; "end", a tick of its own) when someone listens. */
static void note_request(Serve *s, const char *ev, GenRequest *r) {
    bool end = strcmp(ev, "end") == 0;
    if (end) s->ticks++;
    if (!events_on(s->cfg.events)) return;
    const GenInput *in = gen_input(r);
    Buf e = {0};
    buf_printf(&e, "{\"ev\":\"%s\",\"tick\":%llu,\"req\":", ev, (unsigned long long)s->ticks + !end);
    json_append_string(&e, in->id, strlen(in->id));
    buf_printf(&e, ",\"slot\":0,\"cached\":0,\"tokens\":%d}", in->n_prompt);
    events_emit(s->cfg.events, e.data, e.len);
    buf_free(&e);
    if (end) note_tick(s, 0, 0);
}

/* A forward pass of r's sequence ran: prompt tokens (prefill), or 0 for a
 * decode step. Records where r is, and when someone listens, the step's
 * events: what ran, then the tick with the state it left (as III.7's). */
static void note_step(Serve *s, GenRequest *r, const Sequence *seq, int prompt) {
    pthread_mutex_lock(&s->mu);
    s->position = seq->n_tokens;
    s->generated = seq->n_tokens - gen_input(r)->n_prompt;
    s->ticks++;
    pthread_mutex_unlock(&s->mu);
    if (!events_on(s->cfg.events)) return;
    const GenInput *in = gen_input(r);
    Buf e = {0};
    unsigned long long tick = (unsigned long long)s->ticks;
    if (prompt) {
        buf_printf(&e, "{\"ev\":\"prefill\",\"tick\":%llu,\"req\":", tick);
        json_append_string(&e, in->id, strlen(in->id));
        buf_printf(&e, ",\"slot\":0,\"rows\":%d,\"done\":%d,\"of\":%d}", prompt, seq->n_tokens, in->n_prompt);
    } else {
        buf_printf(&e, "{\"ev\":\"decode\",\"tick\":%llu,\"B\":1,\"reqs\":[", tick);
        json_append_string(&e, in->id, strlen(in->id));
        buf_puts(&e, "]}");
    }
    events_emit(s->cfg.events, e.data, e.len);
    buf_free(&e);
    note_tick(s, prompt ? 0 : 1, prompt);
}

/* ---- running one request ------------------------------------------------------------------ */

/* Positions in the pool (or the context, without one). */
static int room_tokens(const Serve *s) {
    if (!s->cfg.pool) return s->cfg.ctx;
    long pool = (long)s->cfg.pool->n_blocks * s->cfg.pool->block_size;
    return pool < s->cfg.ctx ? (int)pool : s->cfg.ctx;
}

static bool stopping(Serve *s) {
    pthread_mutex_lock(&s->mu);
    bool stop = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* A sequence for r on a new cache from the pool, named after r in the pool map. */
static int open_sequence(Serve *s, const GenInput *in, Sequence *seq, char *err) {
    KvCache *kv = kv_cache_create(s->cfg.kv_kind, &s->cfg.model->cfg, s->cfg.pool, err);
    if (!kv) return -1;
    if (kv_paged_table(kv)) kv_paged_set_owner(kv, in->id);
    int cap = room_tokens(s);
    if (in->max_tokens > 0 && in->n_prompt + in->max_tokens < cap) cap = in->n_prompt + in->max_tokens;
    return seq_init(seq, s->cfg.model, s->cfg.be, kv, cap, err);
}

/* --kv-trace: a sequence's block table and the pool after a step, one line on
 * stderr ("3:5x3": block 3 holds 5 positions and 3 tables share it). */
static void trace_step(const Serve *s, const Sequence *seq, int step) {
    const KvBlockTable *t = s->cfg.trace ? kv_paged_table(seq->kv) : NULL;
    if (!t) return;
    Buf b = {0};
    buf_printf(&b, "kv %s step %d: ", t->owner, step);
    kv_pool_trace(s->cfg.pool, t, &b);
    fputs(b.data, stderr);
    buf_free(&b);
}

/* Prefill, then one decode step per token, each sampled by r's own Sampler,
 * until r ends itself, is cancelled or the server stops, or the sequence is
 * full. The cache goes back to the pool on every path. Returns 0 (the
 * caller finishes r: "length" if it did not end itself) or the HTTP status
 * of a failure, with err. */
/* EXERCISE serve-run "Run one request: prefill, decode, give the cache back" 4 points; tests: III4_serve_run III4_serve_cancel_running */
static int run_request(Serve *s, GenRequest *r, char *err) {
    const GenInput *in = gen_input(r);
    Sequence seq;
    if (gen_cancelled(r)) return 0;
    if (open_sequence(s, in, &seq, err) != 0) return 500;
    Sampler *sampler = sampler_create(&in->sampling, s->cfg.model->cfg.vocab_size);
    int status = 0;
    if (!sampler) {
        sampler_params_check(&in->sampling, err);
        status = 400;
    } else if (seq_extend(&seq, in->prompt, in->n_prompt, err) != 0) {
        status = 503;
    } else {
        note_step(s, r, &seq, in->n_prompt);
        gen_prefill_done(r, 0);
        trace_step(s, &seq, 0);
        for (;;) {
            int32_t token = sampler_sample(sampler, gen_constrain(r, seq.logits, s->cfg.model->cfg.vocab_size), NULL);
            sampler_accept(sampler, token);
            if (gen_push_token(r, token, seq.logits) || seq.n_tokens == seq.cap) break;
            if (stopping(s)) {
                err_set(err, "%s", SHUTTING_DOWN);
                status = 503;
                break;
            }
            finish_cancelled_waiting(s);
            if (seq_extend(&seq, &token, 1, err) != 0) {
                status = 503;
                break;
            }
            note_step(s, r, &seq, 0);
            trace_step(s, &seq, seq.n_tokens - in->n_prompt);
        }
    }
    seq_free(&seq);
    sampler_free(sampler);
    return status;
}

/* Choice i's sequence: a fork of choice 0's after the prompt (paged), or
 * its own prefill (choice 0, or a basic cache). -1 with err. */
static int open_choice(Serve *s, GenRequest *lead, Sequence *seq, int i, char *err) {
    const GenInput *in = gen_input(gen_choice(lead, i));
    if (i == 0 || !kv_paged_table(seq[0].kv))
        return open_sequence(s, in, &seq[i], err) || seq_extend(&seq[i], in->prompt, in->n_prompt, err) ? -1 : 0;
    if (seq_fork(&seq[i], &seq[0], in->n_prompt, err) != 0) return -1;
    char owner[64];
    snprintf(owner, sizeof owner, "%.40s#%d", in->id, i);   /* the pool map names each choice */
    kv_paged_set_owner(seq[i].kv, owner);
    return 0;
}

/* n > 1: the choices of one request (gen_request_group) read the prompt
 * once. The other choices fork the lead's sequence: they hold every block
 * of the prompt by reference, the last, partly filled one too, and each
 * choice's first token copies that block before writing into it
 * (copy-on-write, kv_paged.c). Then they decode in turn, one token each per
 * round, each with its own Sampler (seeded seed + i by the server); a
 * choice that ends gives its blocks back at once. Every choice is ended
 * here (gen_finish or gen_fail). With a basic cache, which cannot share,
 * each choice reads the prompt itself. */
static void run_choices(Serve *s, GenRequest *lead) {
    int n = gen_n_choices(lead), vocab = s->cfg.model->cfg.vocab_size, opened = 0;
    Sequence *seq = xcalloc((size_t)n, sizeof *seq);
    Sampler **sampler = xcalloc((size_t)n, sizeof *sampler);
    int *status = xcalloc((size_t)n, sizeof *status);   /* 0: finish it, else the HTTP status it fails with */
    char err[ERR_MAX] = "";
    for (int i = 0; i < n; i++) gen_begin(gen_choice(lead, i));
    note_request(s, "admit", lead);
    bool bad = sampler_params_check(&gen_input(lead)->sampling, err) != 0;
    for (; !bad && opened < n && !gen_cancelled(lead); opened++) {
        if (open_choice(s, lead, seq, opened, err) != 0) break;
        sampler[opened] = sampler_create(&gen_input(gen_choice(lead, opened))->sampling, vocab);
        if (opened == 0) note_step(s, lead, &seq[0], gen_input(lead)->n_prompt);   /* the forks read nothing */
        gen_prefill_done(gen_choice(lead, opened), 0);
        trace_step(s, &seq[opened], 0);
    }
    for (int i = opened; i < n; i++) status[i] = bad ? 400 : gen_cancelled(lead) ? 0 : 503;   /* never started */
    for (int live = opened; live > 0;) {
        for (int i = 0; i < opened; i++) {
            GenRequest *r = gen_choice(lead, i);
            if (!seq[i].kv) continue;   /* ended */
            int32_t token = sampler_sample(sampler[i], gen_constrain(r, seq[i].logits, vocab), NULL);
            sampler_accept(sampler[i], token);
            bool done = gen_push_token(r, token, seq[i].logits) || seq[i].n_tokens == seq[i].cap;
            if (!done && stopping(s)) status[i] = 503, done = true, err_set(err, "%s", SHUTTING_DOWN);
            if (!done && seq_extend(&seq[i], &token, 1, err) != 0) status[i] = 503, done = true;
            if (!done) {
                note_step(s, r, &seq[i], 0);
                trace_step(s, &seq[i], seq[i].n_tokens - gen_input(r)->n_prompt);
            }
            if (done) seq_free(&seq[i]), live--;   /* its blocks go back at once */
        }
        finish_cancelled_waiting(s);
    }
    pthread_mutex_lock(&s->mu);
    s->running = NULL;
    pthread_mutex_unlock(&s->mu);
    note_request(s, "end", lead);
    for (int i = 0; i < n; i++) {
        seq_free(&seq[i]);
        sampler_free(sampler[i]);
        if (status[i]) gen_fail(gen_choice(lead, i), status[i], err);
        else gen_finish(gen_choice(lead, i));
    }
    free(seq), free(sampler), free(status);
}

static void *worker_main(void *arg) {
    Serve *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && s->n_waiting == 0) pthread_cond_wait(&s->wake, &s->mu);
        GenRequest *r = s->stopping ? NULL : queue_pop(s);
        s->running = r;
        s->position = s->generated = 0;
        pthread_mutex_unlock(&s->mu);
        if (!r) return NULL;
        if (gen_n_choices(r) > 1) {
            run_choices(s, r);
            continue;
        }
        char err[ERR_MAX];
        gen_begin(r);
        note_request(s, "admit", r);
        int status = run_request(s, r, err);
        pthread_mutex_lock(&s->mu);
        s->running = NULL; /* before r ends: its client may send the next request at once */
        pthread_mutex_unlock(&s->mu);
        note_request(s, "end", r);
        if (status) gen_fail(r, status, err);
        else gen_finish(r);
    }
}

/* ---- the Engine interface -------------------------------------------------------------------- */

/* Blocks a sequence of n tokens takes. */
static long blocks_for(const KvPool *p, long n) { return (n + p->block_size - 1) / p->block_size; }

/* A request that could never run: more blocks than the whole pool (n > 1:
 * the prompt's full blocks once, the rest once per choice). */
static int check_fits_pool(const Serve *s, const GenInput *in, int choices, char *err) {
    const KvPool *p = s->cfg.pool;
    if (!p) return 0;
    long n = in->n_prompt + (in->max_tokens > 0 ? in->max_tokens : 1), shared = in->n_prompt / p->block_size;
    long need = shared + choices * (blocks_for(p, n) - shared);
    if (need <= p->n_blocks) return 0;
    if (choices > 1) {
        err_set(err, "the request needs %ld KV blocks (%d choices of prompt %d + max_tokens %d tokens, %d per block, "
                "the prompt's full blocks shared) but the pool has %d (--kv-blocks / --kv-mem)", need, choices,
                in->n_prompt, in->max_tokens, p->block_size, p->n_blocks);
        return -1;
    }
    if (in->max_tokens > 0)
        err_set(err, "the request needs %ld KV blocks (prompt %d + max_tokens %d tokens, %d per block) but the pool has %d "
                "(--kv-blocks / --kv-mem)", blocks_for(p, n), in->n_prompt, in->max_tokens, p->block_size, p->n_blocks);
    else
        err_set(err, "the prompt needs %ld KV blocks (%d tokens, %d per block) but the pool has %d (--kv-blocks / --kv-mem)",
                blocks_for(p, n), in->n_prompt, p->block_size, p->n_blocks);
    return -1;
}

static int serve_submit(Engine *e, GenRequest *r, char *err) {
    Serve *s = (Serve *)e;
    if (check_fits_pool(s, gen_input(r), gen_n_choices(r), err) != 0) return 400;
    pthread_mutex_lock(&s->mu);
    int status = 0;
    if (s->stopping) {
        err_set(err, "%s", SHUTTING_DOWN);
        status = 503;
    } else if (!queue_push(s, r)) {
        err_set(err, "the server is busy: %d request%s waiting already (--queue %d); try again later", s->n_waiting,
                s->n_waiting == 1 ? " is" : "s are", s->cfg.queue);
        status = 503;
    } else {
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    return status;
}

static void serve_stats(Engine *e, EngineStats *st) {
    Serve *s = (Serve *)e;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    st->running = s->running != NULL;
    st->waiting = s->n_waiting;
    pthread_mutex_unlock(&s->mu);
    if (s->cfg.pool) kv_pool_stats(s->cfg.pool, &st->kv_blocks_used, &st->kv_blocks_total);
}

static int serve_debug_json(Engine *e, const char *view, Buf *out) {
    Serve *s = (Serve *)e;
    if (strcmp(view, "kv") != 0) return -1;
    if (s->cfg.pool) kv_pool_json(s->cfg.pool, out);
    else buf_puts(out, "{\"kind\":\"basic\",\"note\":\"one array per layer per request: no pool to show (--kv paged has one)\"}");
    return 0;
}

static void serve_shutdown(Engine *e) {
    Serve *s = (Serve *)e;
    GenRequest **waiting = xmalloc(sizeof *waiting * (size_t)(s->cfg.queue + 1));
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    int n = 0;
    for (GenRequest *r; (r = queue_pop(s));) waiting[n++] = r;
    pthread_cond_broadcast(&s->wake);
    bool join = !s->joined;
    s->joined = true;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) gen_fail(waiting[i], 503, SHUTTING_DOWN);
    free(waiting);
    if (join) pthread_join(s->worker, NULL); /* the running request fails at its next step */
}

static void serve_destroy(Engine *e) {
    if (!e) return;
    Serve *s = (Serve *)e;
    serve_shutdown(e);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->wake);
    free(s->queue);
    free(s);
}

Engine *serve_engine_create(const ServeConfig *c, char *err) {
    if (c->queue < 0 || c->ctx < 1) {
        err_set(err, "the engine needs --queue >= 0 and a context of at least one token");
        return NULL;
    }
    Serve *s = xcalloc(1, sizeof *s);
    s->cfg = *c;
    s->queue = xcalloc((size_t)c->queue + 1, sizeof *s->queue);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->engine = (Engine){.name = "III.4 (one request at a time)", .submit = serve_submit, .stats = serve_stats,
                         .debug_json = serve_debug_json, .shutdown = serve_shutdown, .destroy = serve_destroy,
                         .impl = s, .events = c->events};
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        err_set(err, "cannot start the engine's thread");
        s->joined = true;
        serve_destroy(&s->engine);
        return NULL;
    }
    return &s->engine;
}
