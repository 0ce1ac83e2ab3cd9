/* Chapter III.4: chat-server's engine (serve.c) in process: a request runs
 * to the same tokens as a plain greedy loop, the queue is bounded, clients
 * that go away are dropped at once, every path gives the cache back to the
 * pool, a request larger than the pool is refused, shutdown ends everything. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "harness.h"
#include "ops.h"
#include "sequence.h"
#include "serve.h"
#include "test_util.h"

typedef struct {
    Qwen3Model m;
    Tokenizer *tok;
    Backend *be;
    KvPool *pool;
    Engine *e;
} Fixture;

static void fx_close(Fixture *f);

/* The small model, a pool of n_blocks blocks of 16 (0: the basic cache) and
 * the engine; false (with everything closed) if that fails. */
static bool fx_open_events(Fixture *f, int n_blocks, int queue, EventHub *events) {
    char err[ERR_MAX];
    memset(f, 0, sizeof *f);
    if (!load_test_model(&f->m, "small-f32")) return false;
    f->tok = tokenizer_load(&f->m.file, err);
    f->be = backend_create("scalar", 1, err);
    if (n_blocks) f->pool = kv_pool_create(&f->m.cfg, 16, n_blocks, err);
    if (f->pool) f->pool->events = events;
    ServeConfig c = {.model = &f->m, .be = f->be, .kv_kind = n_blocks ? "paged" : "basic", .pool = f->pool,
                     .ctx = f->m.cfg.ctx_len, .queue = queue, .events = events};
    f->e = f->tok && f->be && (f->pool || !n_blocks) ? serve_engine_create(&c, err) : NULL;
    CHECK_MSG(f->e, "%s", err);
    if (!f->e) fx_close(f);
    return f->e != NULL;
}

static bool fx_open(Fixture *f, int n_blocks, int queue) { return fx_open_events(f, n_blocks, queue, NULL); }

static void fx_close(Fixture *f) {
    if (f->e) f->e->destroy(f->e);
    kv_pool_free(f->pool);
    tokenizer_free(f->tok);
    backend_free(f->be);
    qwen3_free(&f->m);
}

static int pool_used(const Fixture *f) {
    int used, total;
    kv_pool_stats(f->pool, &used, &total);
    return used;
}

/* A request for the prompt's tokens, greedy unless temperature > 0, with
 * logprobs on so that its pieces name their tokens. */
static GenRequest *request(Fixture *f, const char *prompt, int max_tokens, float temperature, uint64_t seed) {
    int32_t *ids;
    int n;
    char err[ERR_MAX];
    tokenizer_encode(f->tok, prompt, strlen(prompt), false, &ids, &n, err);
    GenInput in = {.prompt = ids, .n_prompt = n, .max_tokens = max_tokens, .sampling = sampler_params_default(),
                   .top_logprobs = 0};
    in.sampling.temperature = temperature;
    in.sampling.seed = seed;
    snprintf(in.id, sizeof in.id, "test-%d", n);
    GenRequest *r = gen_request_create(&in, f->tok, NULL, 0);
    free(ids);
    return r;
}

/* Takes r's pieces until it ends (true) or timeout_ms pass (false); the
 * tokens it generated go to toks (if not NULL). */
static bool collect(GenRequest *r, int32_t *toks, int *n, int timeout_ms) {
    double end = time_now_ms() + timeout_ms;
    if (n) *n = 0;
    GenPiece p;
    int rc;
    while ((rc = gen_next(r, &p, 50)) != -1) {
        if (rc == 1) {
            for (int i = 0; i < p.n_lp && toks; i++) toks[(*n)++] = p.lp[i].token;
            gen_piece_free(&p);
        }
        if (time_now_ms() > end) return false;
    }
    return true;
}

/* Waits for the first piece of r: it is running. */
static bool wait_running(GenRequest *r) {
    GenPiece p;
    for (double end = time_now_ms() + 10000; time_now_ms() < end;) {
        int rc = gen_next(r, &p, 50);
        if (rc == 1) {
            gen_piece_free(&p);
            return true;
        }
        if (rc == -1) return false;
    }
    return false;
}

/* A long request a running and a short one b waiting behind it. */
static bool one_running_one_waiting(Fixture *f, GenRequest **a, GenRequest **b) {
    char err[ERR_MAX] = "";
    *a = request(f, "Once upon a time", 1500, 0, 0);
    *b = request(f, "Once", 2, 0, 0);
    bool ok = f->e->submit(f->e, *a, err) == 0 && wait_running(*a) && f->e->submit(f->e, *b, err) == 0;
    CHECK_MSG(ok, "one running, one waiting: %s", err);
    return ok;
}

/* The greedy tokens a plain Sequence loop gives, for comparison. */
static int greedy_reference(Fixture *f, const char *prompt, int max_tokens, int32_t *out) {
    int32_t *ids;
    int n, got = 0;
    char err[ERR_MAX];
    tokenizer_encode(f->tok, prompt, strlen(prompt), false, &ids, &n, err);
    Sequence s;
    KvCache *kv = kv_cache_create("basic", &f->m.cfg, NULL, err);
    if (seq_init(&s, &f->m, f->be, kv, n + max_tokens, err) == 0 && seq_extend(&s, ids, n, err) == 0) {
        for (; got < max_tokens; got++) {
            out[got] = argmax(s.logits, f->m.cfg.vocab_size, NULL);
            if (tokenizer_is_eog(f->tok, out[got])) {
                got++;
                break;
            }
            if (got + 1 < max_tokens && seq_extend(&s, &out[got], 1, err) != 0) break;
        }
        seq_free(&s);
    }
    free(ids);
    return got;
}

TEST(III4_serve_run_greedy_matches_a_plain_loop) {
    Fixture f;
    if (!fx_open(&f, 64, 2)) return;
    int32_t want[32], got[64];
    int n_want = greedy_reference(&f, "Once upon a time", 20, want), n_got = 0;
    GenRequest *r = request(&f, "Once upon a time", 20, 0, 0);
    char err[ERR_MAX];
    CHECK_EQ_INT(f.e->submit(f.e, r, err), 0);
    CHECK(collect(r, got, &n_got, 10000));
    const GenResult *res = gen_result(r);
    CHECK_EQ_INT(n_got, n_want);
    CHECK(memcmp(got, want, sizeof(int32_t) * (size_t)n_want) == 0);
    CHECK_EQ_INT(res->n_generated, n_want);
    CHECK_STR(res->finish_reason, n_want == 20 ? "length" : "stop");
    CHECK(res->status == 0 && !res->cancelled);
    CHECK(res->t_begin > 0 && res->t_prefill >= res->t_begin && res->t_first >= res->t_prefill);
    CHECK_EQ_INT(pool_used(&f), 0); /* the cache went back before the request ended */
    gen_request_free(r);
    fx_close(&f);
}

/* With an event stream: every step of two requests, one after the other, is
 * a tick, numbered in order; each request is admitted, prefilled, decoded
 * and ended; the last tick shows the slot idle and the pool empty; and the
 * tokens are still the plain loop's. */
TEST(III4_serve_events_every_step_in_order) {
    EventHub *hub = events_create();
    char err[ERR_MAX];
    EventSub *sub = events_subscribe(hub, 0, err);
    Fixture f;
    if (!fx_open_events(&f, 64, 2, hub)) {
        events_unsubscribe(sub);
        events_free(hub);
        return;
    }
    int32_t want[32], got[32];
    int n_want = greedy_reference(&f, "Once upon a time", 12, want), n_got = 0;
    for (int k = 0; k < 2; k++) {
        GenRequest *r = request(&f, "Once upon a time", 12, 0, 0);
        CHECK_EQ_INT(f.e->submit(f.e, r, err), 0);
        CHECK(collect(r, got, &n_got, 10000));
        CHECK(n_got == n_want && memcmp(got, want, sizeof(int32_t) * (size_t)n_want) == 0);
        gen_request_free(r);
    }
    fx_close(&f); /* the worker has stopped: every event is in */
    Buf out = {0};
    events_read(sub, &out, 0);
    int ticks = 0, admit = 0, prefill = 0, decode = 0, end = 0, alloc = 0, freed = 0;
    const char *last_tick = NULL;
    bool in_order = true;
    for (const char *p = out.data; p && (p = strstr(p, "data: {\"ev\":\"")); p += 6) {
        const char *ev = p + strlen("data: {\"ev\":\"");
        if (strncmp(ev, "tick\"", 5) == 0) {
            in_order &= atoi(strstr(ev, "\"tick\":") + 7) == ++ticks;
            last_tick = ev;
        }
        admit += strncmp(ev, "admit\"", 6) == 0;
        prefill += strncmp(ev, "prefill\"", 8) == 0;
        decode += strncmp(ev, "decode\"", 7) == 0;
        end += strncmp(ev, "end\"", 4) == 0;
        alloc += strncmp(ev, "alloc\"", 6) == 0;
        freed += strncmp(ev, "free\"", 5) == 0;
    }
    CHECK(in_order);
    CHECK(admit == 2 && prefill == 2 && end == 2 && decode == 2 * (n_want - 1));
    CHECK_EQ_INT(ticks, prefill + decode + end);
    CHECK(alloc > 0 && alloc == freed);
    CHECK_MSG(last_tick && strstr(last_tick, "\"state\":\"idle\"") && strstr(last_tick, "\"blocks_used\":0"), "%s",
              last_tick ? last_tick : "no tick");
    CHECK_EQ_INT((int)events_dropped(sub), 0);
    buf_free(&out);
    events_unsubscribe(sub);
    events_free(hub);
}

TEST(III4_serve_run_one_after_another_same_tokens) {
    Fixture f;
    if (!fx_open(&f, 64, 4)) return;
    GenRequest *r[4];
    char err[ERR_MAX];
    for (int i = 0; i < 4; i++) { /* sampled with one seed: each has its own Sampler, so all agree */
        r[i] = request(&f, "Once upon a time there", 12, 0.9f, 1234);
        CHECK_EQ_INT(f.e->submit(f.e, r[i], err), 0);
    }
    int32_t toks[4][16];
    int n[4];
    for (int i = 0; i < 4; i++) CHECK(collect(r[i], toks[i], &n[i], 10000));
    for (int i = 1; i < 4; i++) CHECK(n[i] == n[0] && memcmp(toks[i], toks[0], sizeof(int32_t) * (size_t)n[0]) == 0);
    for (int i = 0; i < 4; i++) gen_request_free(r[i]);
    CHECK_EQ_INT(pool_used(&f), 0);
    fx_close(&f);
}

TEST(III4_serve_queue_bounded) {
    Fixture f;
    if (!fx_open(&f, 128, 1)) return;
    char err[ERR_MAX] = "";
    GenRequest *a = request(&f, "Once upon a time", 1500, 0, 0), *b = request(&f, "Once", 2, 0, 0),
               *c = request(&f, "Once", 2, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, a, err), 0); /* runs (or is about to) */
    CHECK_EQ_INT(f.e->submit(f.e, b, err), 0); /* waits: --queue 1 */
    CHECK_EQ_INT(f.e->submit(f.e, c, err), 503);
    CHECK_MSG(strstr(err, "busy") && strstr(err, "--queue 1"), "%s", err);
    EngineStats st;
    f.e->stats(f.e, &st);
    CHECK(st.running + st.waiting == 2 && st.waiting >= 1);
    gen_cancel(a);
    CHECK(collect(a, NULL, NULL, 10000) && gen_result(a)->cancelled);
    CHECK(collect(b, NULL, NULL, 10000));
    CHECK(gen_result(b)->status == 0 && gen_result(b)->n_generated == 2);
    CHECK_EQ_INT(pool_used(&f), 0);
    gen_request_free(a);
    gen_request_free(b);
    gen_request_free(c);
    fx_close(&f);
}

TEST(III4_serve_queue_zero_runs_one) {
    Fixture f;
    if (!fx_open(&f, 128, 0)) return;
    char err[ERR_MAX] = "";
    GenRequest *a = request(&f, "Once upon a time", 1500, 0, 0), *b = request(&f, "Once", 2, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, a, err), 0);
    CHECK_EQ_INT(f.e->submit(f.e, b, err), 503);
    gen_cancel(a);
    CHECK(collect(a, NULL, NULL, 10000));
    CHECK_EQ_INT(f.e->submit(f.e, b, err), 0); /* the engine is free again */
    CHECK(collect(b, NULL, NULL, 10000) && gen_result(b)->status == 0);
    gen_request_free(a);
    gen_request_free(b);
    fx_close(&f);
}

TEST(III4_serve_cancel_running_frees_the_cache) {
    Fixture f;
    if (!fx_open(&f, 128, 1)) return;
    char err[ERR_MAX];
    GenRequest *a = request(&f, "Once upon a time", 1500, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, a, err), 0);
    CHECK(wait_running(a));
    CHECK(pool_used(&f) >= 1);
    gen_cancel(a);
    double t0 = time_now_ms();
    CHECK(collect(a, NULL, NULL, 10000));
    CHECK(time_now_ms() - t0 < 2000);
    const GenResult *res = gen_result(a);
    CHECK(res->cancelled && res->n_generated < 1500);
    CHECK_EQ_INT(pool_used(&f), 0);
    gen_request_free(a);
    fx_close(&f);
}

TEST(III4_serve_cancel_waiting_leaves_at_once) {
    Fixture f;
    if (!fx_open(&f, 128, 2)) return;
    GenRequest *a, *b;
    one_running_one_waiting(&f, &a, &b);
    gen_cancel(b);
    CHECK(collect(b, NULL, NULL, 10000));
    CHECK(gen_result(b)->cancelled && gen_result(b)->n_generated == 0);
    EngineStats st;
    f.e->stats(f.e, &st);
    CHECK_MSG(st.running == 1 && st.waiting == 0, "the gone request left while the first still ran: running %d", st.running);
    CHECK(gen_result(a)->t_last == 0 || gen_result(a)->n_generated < 1500);
    gen_cancel(a);
    CHECK(collect(a, NULL, NULL, 10000));
    gen_request_free(a);
    gen_request_free(b);
    fx_close(&f);
}

TEST(III4_serve_request_larger_than_the_pool) {
    Fixture f;
    if (!fx_open(&f, 2, 1)) return; /* 32 positions */
    char err[ERR_MAX] = "";
    Buf long_prompt = {0};
    for (int i = 0; i < 40; i++) buf_puts(&long_prompt, "Once ");
    GenRequest *a = request(&f, long_prompt.data, 4, 0, 0), *b = request(&f, "Once upon", 40, 0, 0),
               *c = request(&f, "Once upon", 8, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, a, err), 400);
    CHECK_MSG(strstr(err, "KV blocks") && strstr(err, "the pool has 2"), "%s", err);
    CHECK_EQ_INT(f.e->submit(f.e, b, err), 400);
    CHECK_MSG(strstr(err, "max_tokens 40"), "%s", err);
    CHECK_EQ_INT(f.e->submit(f.e, c, err), 0); /* and the next one works */
    CHECK(collect(c, NULL, NULL, 10000) && gen_result(c)->status == 0 && gen_result(c)->n_generated >= 1);
    CHECK_EQ_INT(pool_used(&f), 0);
    gen_request_free(a);
    gen_request_free(b);
    gen_request_free(c);
    buf_free(&long_prompt);
    fx_close(&f);
}

TEST(III4_serve_runs_out_of_room_with_length) {
    Fixture f;
    if (!fx_open(&f, 2, 1)) return; /* 32 positions, no max_tokens: until the pool is full */
    char err[ERR_MAX];
    GenRequest *r = request(&f, "Once upon a time", -1, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, r, err), 0);
    CHECK(collect(r, NULL, NULL, 10000));
    const GenResult *res = gen_result(r);
    CHECK_EQ_INT(res->status, 0);
    CHECK_STR(res->finish_reason, "length");
    CHECK_EQ_INT(res->n_prompt + res->n_generated - 1, 32); /* the last token needs no room */
    CHECK_EQ_INT(pool_used(&f), 0);
    gen_request_free(r);
    fx_close(&f);
}

TEST(III4_serve_basic_cache_and_views) {
    Fixture f;
    if (!fx_open(&f, 0, 1)) return;
    char err[ERR_MAX];
    GenRequest *r = request(&f, "Once upon a time", 5, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, r, err), 0);
    CHECK(collect(r, NULL, NULL, 10000) && gen_result(r)->n_generated == 5);
    EngineStats st;
    f.e->stats(f.e, &st);
    CHECK(st.kv_blocks_total == 0 && st.running == 0 && st.waiting == 0);
    Buf b = {0};
    CHECK_EQ_INT(f.e->debug_json(f.e, "kv", &b), 0);
    CHECK(strstr(b.data, "basic"));
    CHECK_EQ_INT(f.e->debug_json(f.e, "slots", &b), -1);
    buf_free(&b);
    gen_request_free(r);
    fx_close(&f);
}

TEST(III4_serve_shutdown_fails_what_runs_and_waits) {
    Fixture f;
    if (!fx_open(&f, 128, 2)) return;
    char err[ERR_MAX];
    GenRequest *a, *b;
    one_running_one_waiting(&f, &a, &b);
    f.e->shutdown(f.e);
    CHECK(collect(a, NULL, NULL, 1000) && collect(b, NULL, NULL, 1000));
    CHECK(gen_result(a)->status == 503 && strstr(gen_result(a)->message, "shutting down"));
    CHECK(gen_result(b)->status == 503);
    GenRequest *c = request(&f, "Once", 2, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, c, err), 503);
    CHECK_EQ_INT(pool_used(&f), 0);
    gen_request_free(a);
    gen_request_free(b);
    gen_request_free(c);
    fx_close(&f);
}

TEST(III4_serve_pool_map_names_the_request) {
    Fixture f;
    if (!fx_open(&f, 128, 1)) return;
    char err[ERR_MAX];
    GenRequest *a = request(&f, "Once upon a time", 1500, 0, 0);
    CHECK_EQ_INT(f.e->submit(f.e, a, err), 0);
    CHECK(wait_running(a));
    Buf b = {0};
    CHECK_EQ_INT(f.e->debug_json(f.e, "kv", &b), 0);
    CHECK_MSG(strstr(b.data, "\"owner\":\"test-4\""), "%s", b.data);
    buf_free(&b);
    EngineStats st;
    f.e->stats(f.e, &st);
    CHECK(st.kv_blocks_used >= 1 && st.kv_blocks_total == 128 && st.running == 1);
    gen_cancel(a);
    CHECK(collect(a, NULL, NULL, 10000));
    gen_request_free(a);
    fx_close(&f);
}
