/* Chapter III.7: the scheduler in process, tick by tick (SchedConfig.manual):
 * every request gets the tokens it gets alone (greedy or seeded, beside
 * others, after a prefix hit, after a preemption and recompute), the oldest
 * waiting request is admitted first, admission waits for blocks, a cancelled
 * request frees everything at once, and the pool is whole again at the end. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "events.h"
#include "json.h"
#include "openai.h"
#include "scheduler.h"
#include "sequence.h"
#include "test_util.h"

#define MAX_GEN 64

typedef struct {
    Qwen3Model m;
    Tokenizer *tok;
    Backend *be;
    KvPool *pool;
    Engine *e;
    GenRequest *reqs[16]; /* freed by fx_close, after the engine: whatever a failed check left running */
    int n_reqs;
    EventHub *events;     /* with Setup.events_ring: the hub, and its one subscriber */
    EventSub *sub;
} Fixture;

typedef struct {
    int slots, queue, chunk, block_size, n_blocks; /* n_blocks 0: the basic cache */
    bool no_prefix_cache;
    int ctx;                                       /* 0: the model's */
    double prefill_ms;                             /* SchedConfig.prefill_ms */
    FILE *trace;                                   /* NULL: $TRACE_SCHED set, stderr, else none */
    FILE *kv_trace;                                /* the block tables after each tick; NULL: none */
    const char *backend;                           /* NULL: scalar; parallel runs 2 threads */
    size_t events_ring;                            /* > 0: an event hub the engine and the pool record into, and
                                                      one subscriber (Fixture.sub) with a ring of this many bytes */
} Setup;

static bool fx_open(Fixture *f, Setup su) {
    char err[ERR_MAX] = "";
    memset(f, 0, sizeof *f);
    if (!load_test_model(&f->m, "tiny-f32")) return false;
    f->tok = tokenizer_load(&f->m.file, err);
    bool parallel = su.backend && strcmp(su.backend, "parallel") == 0;
    f->be = backend_create(su.backend ? su.backend : "scalar", parallel ? 2 : 1, err);
    if (su.n_blocks) f->pool = kv_pool_create(&f->m.cfg, su.block_size, su.n_blocks, err);
    if (su.events_ring) {
        f->events = events_create();
        f->sub = events_subscribe(f->events, su.events_ring, err);
    }
    if (f->pool) f->pool->events = f->events;
    SchedConfig c = {.model = &f->m, .be = f->be, .kv_kind = su.n_blocks ? "paged" : "basic", .pool = f->pool,
                     .ctx = su.ctx ? su.ctx : f->m.cfg.ctx_len, .queue = su.queue ? su.queue : 16, .max_concurrent = su.slots,
                     .prefill_chunk = su.chunk ? su.chunk : 256, .prefill_ms = su.prefill_ms, .prefix_cache = !su.no_prefix_cache,
                     .manual = true,
                     .trace = su.trace ? su.trace : getenv("TRACE_SCHED") ? stderr : NULL, .kv_trace = su.kv_trace,
                     .events = f->events,
                     .tok = f->tok};
    f->e = f->tok && f->be && (f->pool || !su.n_blocks) ? sched_engine_create(&c, err) : NULL;
    CHECK_MSG(f->e, "%s", err);
    return f->e != NULL;
}

static void fx_close(Fixture *f) {
    if (f->e) f->e->destroy(f->e); /* ends every request it holds, and frees its prefix cache */
    if (f->e && f->pool) CHECK_EQ_INT(f->pool->n_free, f->pool->n_blocks); /* every block back */
    for (int i = 0; i < f->n_reqs; i++) gen_request_free(f->reqs[i]);
    kv_pool_free(f->pool);
    events_unsubscribe(f->sub);
    events_free(f->events);
    tokenizer_free(f->tok);
    backend_free(f->be);
    qwen3_free(&f->m);
}

static int pool_used(const Fixture *f) {
    int used, total;
    kv_pool_stats(f->pool, &used, &total);
    return used;
}

/* What a request asks: a prompt of made-up token ids, a length, sampling. */
typedef struct {
    int n_prompt, seed_prompt, max_tokens;
    float temperature;
    uint64_t seed;
    int shared; /* the first `shared` prompt tokens come from seed 0: a common prefix */
} Ask;

static void ask_prompt(const Fixture *f, const Ask *a, int32_t *ids) {
    int V = f->m.cfg.vocab_size;
    test_tokens(ids, a->shared, V, 1000);
    test_tokens(ids + a->shared, a->n_prompt - a->shared, V, (uint32_t)a->seed_prompt);
}

static GenInput ask_input(const Ask *a, const int32_t *ids, int k) {
    GenInput in = {.prompt = ids, .n_prompt = a->n_prompt, .max_tokens = a->max_tokens,
                   .sampling = sampler_params_default(), .top_logprobs = 3};
    in.sampling.temperature = a->temperature;
    in.sampling.seed = a->seed;
    snprintf(in.id, sizeof in.id, "req-%d", k);
    return in;
}

/* A request the fixture frees at the end. */
static GenRequest *keep(Fixture *f, GenRequest *r) {
    if (f->n_reqs < 16) f->reqs[f->n_reqs++] = r;
    return r;
}

static GenRequest *request(Fixture *f, const Ask *a, int k) {
    int32_t ids[512];
    ask_prompt(f, a, ids);
    GenInput in = ask_input(a, ids, k);
    return keep(f, gen_request_create(&in, f->tok, NULL, 0));
}

/* What came out: the tokens and each one's log-probabilities (the chosen
 * one's and the 3 best: equal bits mean equal logits, in practice). */
typedef struct {
    int32_t tok[MAX_GEN];
    float lp[MAX_GEN][4];
    int n;
} Out;

/* Takes every piece r has so far; true once it has ended. */
static bool drain(GenRequest *r, Out *o) {
    GenPiece p;
    int rc;
    while ((rc = gen_next(r, &p, 0)) == 1) {
        for (int i = 0; i < p.n_lp && o->n < MAX_GEN; i++, o->n++) {
            o->tok[o->n] = p.lp[i].token;
            o->lp[o->n][0] = p.lp[i].logprob;
            for (int k = 0; k < 3; k++) o->lp[o->n][1 + k] = k < p.lp[i].n_top ? p.lp[i].top_logprob[k] : 0;
        }
        gen_piece_free(&p);
    }
    return rc == -1;
}

/* Ticks until nothing runs or waits (at most max_ticks). */
static int run_all(Fixture *f, int max_ticks) {
    int ticks = 0;
    while (ticks < max_ticks && sched_tick(f->e)) ticks++;
    CHECK_MSG(ticks < max_ticks, "still busy after %d ticks", max_ticks);
    return ticks;
}

static bool same_out(const Out *a, const Out *b) {
    return a->n == b->n && memcmp(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n) == 0 &&
           memcmp(a->lp, b->lp, sizeof(float) * 4 * (size_t)a->n) == 0;
}

/* The reference: a plain loop over a Sequence with the request's own
 * Sampler, as if no server existed. */
static void solo(Fixture *f, const Ask *a, Out *o) {
    int32_t ids[512];
    char err[ERR_MAX];
    ask_prompt(f, a, ids);
    GenInput in = ask_input(a, ids, 0);
    GenRequest *r = gen_request_create(&in, f->tok, NULL, 0); /* for its logprobs and stopping rules */
    Sampler *s = sampler_create(&in.sampling, f->m.cfg.vocab_size);
    KvCache *kv = kv_cache_create("basic", &f->m.cfg, NULL, err);
    Sequence seq;
    memset(o, 0, sizeof *o);
    if (seq_init(&seq, &f->m, f->be, kv, f->m.cfg.ctx_len, err) == 0 && seq_extend(&seq, ids, a->n_prompt, err) == 0) {
        for (;;) {
            int32_t t = sampler_sample(s, seq.logits, NULL);
            sampler_accept(s, t);
            if (gen_push_token(r, t, seq.logits) || seq_extend(&seq, &t, 1, err) != 0) break;
        }
        seq_free(&seq);
    }
    gen_finish(r);
    drain(r, o);
    gen_request_free(r);
    sampler_free(s);
}

static void submit_ok(Fixture *f, GenRequest *r) {
    char err[ERR_MAX] = "";
    int status = f->e->submit(f->e, r, err);
    CHECK_MSG(status == 0, "submit: %d %s", status, err);
}

/* ---- the invariant ------------------------------------------------------------------------ */

static const Ask MIX[] = {
    {.n_prompt = 23, .seed_prompt = 1, .max_tokens = 17},
    {.n_prompt = 5, .seed_prompt = 2, .max_tokens = 30, .temperature = 0.9f, .seed = 42},
    {.n_prompt = 40, .seed_prompt = 3, .max_tokens = 9, .shared = 20},
    {.n_prompt = 33, .seed_prompt = 4, .max_tokens = 25, .temperature = 0.7f, .seed = 7, .shared = 20},
    {.n_prompt = 20, .seed_prompt = 5, .max_tokens = 12, .shared = 20}, /* the shared prefix alone: a full hit */
};
#define N_MIX 5

/* Every request of MIX, submitted at once to a scheduler of this setup:
 * each gets exactly its solo tokens and log-probabilities. */
static void check_mix(Setup su, const char *what) {
    Fixture f;
    if (!fx_open(&f, su)) {
        fx_close(&f);
        return;
    }
    GenRequest *r[N_MIX];
    Out got[N_MIX], want;
    for (int i = 0; i < N_MIX; i++) {
        memset(&got[i], 0, sizeof got[i]);
        r[i] = request(&f, &MIX[i], i);
        submit_ok(&f, r[i]);
    }
    run_all(&f, 2000);
    for (int i = 0; i < N_MIX; i++) {
        CHECK(drain(r[i], &got[i]));
        solo(&f, &MIX[i], &want);
        CHECK_MSG(want.n >= 2, "request %d made only %d tokens", i, want.n);
        CHECK_MSG(same_out(&got[i], &want), "%s: request %d: %d tokens, solo %d; they differ", what, i, got[i].n, want.n);
        const GenResult *res = gen_result(r[i]);
        CHECK_EQ_INT(res->status, 0);
    }
    if (f.pool) CHECK_EQ_INT(pool_used(&f), 0);
    EngineStats st;
    f.e->stats(f.e, &st);
    CHECK(st.running == 0 && st.waiting == 0);
    fx_close(&f);
}

TEST(III7_sched_alone_or_beside_others_same_tokens) {
    check_mix((Setup){.slots = 1, .block_size = 8, .n_blocks = 64}, "one slot");
    check_mix((Setup){.slots = 4, .block_size = 8, .n_blocks = 64}, "four slots");
    check_mix((Setup){.slots = 5, .block_size = 4, .n_blocks = 128, .chunk = 7}, "five slots, chunks of 7");
    check_mix((Setup){.slots = 3, .block_size = 8, .n_blocks = 64, .no_prefix_cache = true}, "no prefix cache");
    check_mix((Setup){.slots = 3}, "basic cache");
    check_mix((Setup){.slots = 4, .block_size = 16, .n_blocks = 32, .backend = "parallel"}, "parallel, 2 threads");
    check_mix((Setup){.slots = 4, .block_size = 16, .n_blocks = 32, .backend = "simd"}, "simd");
}

/* A prompt of n_prompt tokens arriving while another request decodes: it
 * is read in `ticks` ticks (its first token comes in the last), the other
 * request gets a token every tick meanwhile, and both get the tokens they
 * get alone. */
static void check_read_beside_decoding(Fixture *f, int n_prompt, int ticks) {
    Ask small = {.n_prompt = 4, .seed_prompt = 1, .max_tokens = 40}, big = {.n_prompt = n_prompt, .seed_prompt = 2, .max_tokens = 5};
    GenRequest *a = request(f, &small, 0), *b = request(f, &big, 1);
    Out oa = {0}, ob = {0}, want;
    submit_ok(f, a);
    sched_tick(f->e); /* a's prompt, its first token; then a decode step */
    drain(a, &oa);
    CHECK_EQ_INT(oa.n, 2);
    submit_ok(f, b);
    for (int t = 0; t < ticks; t++) {
        int before = oa.n;
        sched_tick(f->e);
        drain(a, &oa);
        drain(b, &ob);
        CHECK_MSG(oa.n == before + 1, "tick %d: a got %d tokens", t, oa.n - before);
        CHECK_MSG(ob.n == (t == ticks - 1 ? 2 : 0), "tick %d: b has %d tokens", t, ob.n);
    }
    run_all(f, 200);
    drain(a, &oa);
    drain(b, &ob);
    solo(f, &small, &want);
    CHECK(same_out(&oa, &want));
    solo(f, &big, &want);
    CHECK(same_out(&ob, &want));
}

/* A long prompt arriving while another request decodes is read a chunk per
 * tick, and the other one gets a token every tick meanwhile. */
TEST(III7_sched_chunked_prefill_keeps_others_decoding) {
    Fixture f;
    if (fx_open(&f, (Setup){.slots = 2, .block_size = 8, .n_blocks = 64, .chunk = 8}))
        check_read_beside_decoding(&f, 60, 8); /* 60 tokens in chunks of 8 */
    fx_close(&f);
}

/* Under a time budget too small for two forwards, a prompt beside a
 * decoding request is read one forward of 32 tokens a tick; under one large
 * enough, all of it in a tick; alone, nobody waits, and it is read a whole
 * chunk a tick. Same tokens either way. */
TEST(III7_sched_prefill_budget_cuts_only_beside_decoders) {
    Fixture f;
    if (fx_open(&f, (Setup){.slots = 2, .block_size = 8, .n_blocks = 64, .prefill_ms = 1e9}))
        check_read_beside_decoding(&f, 100, 1); /* four forwards in one tick */
    fx_close(&f);
    if (!fx_open(&f, (Setup){.slots = 2, .block_size = 8, .n_blocks = 64, .prefill_ms = 1e-9})) {
        fx_close(&f);
        return;
    }
    check_read_beside_decoding(&f, 100, 4); /* 32, 32, 32, 4 */
    Ask other = {.n_prompt = 100, .seed_prompt = 3, .max_tokens = 5}; /* not in the prefix cache */
    GenRequest *c = request(&f, &other, 2);
    Out oc = {0};
    submit_ok(&f, c);
    sched_tick(f.e); /* alone: the whole prompt in one tick */
    drain(c, &oc);
    CHECK_EQ_INT(oc.n, 2);
    fx_close(&f);
}

/* Each request is charged its prefill chunks whole and 1/B of every fused
 * decode step it took part in: the charges add up to the engine's prefill and
 * decode time, and a request's mean batch is what the steps ran. */
TEST(III7_sched_charges_each_its_share_of_the_step) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 4, .block_size = 8, .n_blocks = 64})) {
        fx_close(&f);
        return;
    }
    GenRequest *r[N_MIX];
    for (int i = 0; i < N_MIX; i++) submit_ok(&f, r[i] = request(&f, &MIX[i], i));
    run_all(&f, 2000);
    double prefill = 0, decode = 0;
    long rows = 0, steps_max = 0;
    bool batched = false;
    for (int i = 0; i < N_MIX; i++) {
        Out o = {0};
        CHECK(drain(r[i], &o));
        const GenResult *res = gen_result(r[i]);
        CHECK_MSG(res->decode_steps == res->n_generated - 1, "request %d: %d decode steps for %d tokens", i,
                  res->decode_steps, res->n_generated);
        CHECK(res->charged_prompt_ms > 0 && res->charged_decode_ms > 0);
        CHECK(res->batch_sum >= res->decode_steps && res->batch_sum <= 4L * res->decode_steps);
        batched |= res->batch_sum > res->decode_steps;
        /* its share can be no more than the wall time it spent decoding */
        CHECK(res->charged_decode_ms <= res->t_last - res->t_prefill + 1e-6);
        prefill += res->charged_prompt_ms;
        decode += res->charged_decode_ms;
        rows += res->decode_steps;
        if (res->decode_steps > steps_max) steps_max = res->decode_steps;
    }
    CHECK_MSG(batched, "no request shared a decode step");
    SchedStats st = sched_stats(f.e);
    CHECK_NEAR(prefill, st.prefill_ms, 1e-6 * (1 + st.prefill_ms));
    CHECK_NEAR(decode, st.decode_ms, 1e-6 * (1 + st.decode_ms));
    CHECK_EQ_INT((int)st.decode_rows, (int)rows);
    CHECK((long)st.decode_steps >= steps_max && (long)st.decode_steps < rows);
    CHECK(st.tick_ms >= st.prefill_ms + st.decode_ms + st.choose_ms - 1e-6);
    /* and the client sees it in the timings */
    Buf b = {0};
    oai_usage_members(&b, gen_result(r[0]));
    CHECK(strstr(b.data, "\"predicted_charged_ms\":") && strstr(b.data, "\"batch_mean\":"));
    buf_free(&b);
    fx_close(&f);
}

/* ---- admission, preemption, cancellation --------------------------------------------------------- */

static int slots_busy(Fixture *f) {
    EngineStats st;
    f->e->stats(f->e, &st);
    return st.running;
}

static int waiting(Fixture *f) {
    EngineStats st;
    f->e->stats(f->e, &st);
    return st.waiting;
}

/* 12 blocks of 4: two prompts of 20 tokens (6 blocks each with what they
 * generate) run, the third waits for blocks although a slot is free, and
 * runs when one of them has ended. */
TEST(III7_sched_admission_waits_for_blocks) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 4, .block_size = 4, .n_blocks = 12, .no_prefix_cache = true})) {
        fx_close(&f);
        return;
    }
    Ask ask[3] = {{.n_prompt = 20, .seed_prompt = 1, .max_tokens = 4},
                  {.n_prompt = 20, .seed_prompt = 2, .max_tokens = 3},
                  {.n_prompt = 20, .seed_prompt = 3, .max_tokens = 4}};
    GenRequest *r[3];
    Out got[3];
    for (int i = 0; i < 3; i++) {
        memset(&got[i], 0, sizeof got[i]);
        r[i] = request(&f, &ask[i], i);
        submit_ok(&f, r[i]);
    }
    sched_tick(f.e);
    CHECK_EQ_INT(slots_busy(&f), 2);
    CHECK_EQ_INT(waiting(&f), 1);
    Buf j = {0};
    CHECK_EQ_INT(f.e->debug_json(f.e, "slots", &j), 0);
    CHECK_MSG(strstr(j.data, "\"waiting\":[{\"request\":\"req-2\",\"tokens\":20"), "%s", j.data);
    CHECK_MSG(strstr(j.data, "\"request\":\"req-0\",\"phase\":\"decode\",\"position\":21,\"prompt_tokens\":20,"
                             "\"cached_tokens\":0,\"generated\":2"), "%s", j.data);
    buf_free(&j);
    for (int t = 0; waiting(&f) == 1 && t < 50; t++) {
        CHECK(!drain(r[0], &got[0]) || !drain(r[1], &got[1]) || waiting(&f) == 0);
        sched_tick(f.e);
    }
    CHECK(drain(r[1], &got[1])); /* the second one (shorter) ended first; then the third started */
    CHECK(!drain(r[2], &got[2]));
    run_all(&f, 200);
    for (int i = 0; i < 3; i++) {
        Out want;
        CHECK(drain(r[i], &got[i]));
        solo(&f, &ask[i], &want);
        CHECK_MSG(same_out(&got[i], &want), "request %d: %d tokens, solo %d; they differ", i, got[i].n, want.n);
    }
    CHECK_EQ_INT(sched_stats(f.e).preemptions, 0);
    CHECK_EQ_INT(pool_used(&f), 0);
    fx_close(&f);
}

/* A big request that must wait for blocks is not passed by small ones that
 * came after it, though they would fit: the oldest goes first. */
TEST(III7_sched_no_starvation_oldest_first) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 4, .block_size = 4, .n_blocks = 12, .no_prefix_cache = true})) {
        fx_close(&f);
        return;
    }
    Ask first = {.n_prompt = 28, .seed_prompt = 1, .max_tokens = 4}, big = {.n_prompt = 28, .seed_prompt = 2, .max_tokens = 4},
        small = {.n_prompt = 3, .seed_prompt = 3, .max_tokens = 2};
    GenRequest *a = request(&f, &first, 0), *b = request(&f, &big, 1), *c = request(&f, &small, 2),
               *d = request(&f, &small, 3);
    submit_ok(&f, a);
    sched_tick(f.e); /* a holds 8 blocks of 12 */
    submit_ok(&f, b);
    submit_ok(&f, c);
    submit_ok(&f, d);
    sched_tick(f.e);
    CHECK_EQ_INT(slots_busy(&f), 1); /* c and d would fit, but b is older */
    CHECK_EQ_INT(waiting(&f), 3);
    run_all(&f, 200);
    Out o;
    for (GenRequest **r = (GenRequest *[]){a, b, c, d, NULL}; *r; r++) {
        memset(&o, 0, sizeof o);
        CHECK(drain(*r, &o));
        CHECK_EQ_INT(gen_result(*r)->status, 0);
    }
    CHECK(gen_result(b)->t_begin < gen_result(c)->t_begin);
    CHECK(gen_result(c)->t_begin <= gen_result(d)->t_begin);
    CHECK(gen_result(b)->t_begin >= gen_result(a)->t_last); /* b started when a's blocks came back */
    CHECK_EQ_INT(pool_used(&f), 0);
    fx_close(&f);
}

/* Two requests that outgrow the pool: the younger is preempted (its
 * blocks freed), waits, is recomputed, and still gets its solo tokens,
 * sampled ones included; with and without the prefix cache. */
static void check_preemption(bool prefix_cache) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 2, .block_size = 4, .n_blocks = 12, .no_prefix_cache = !prefix_cache})) {
        fx_close(&f);
        return;
    }
    Ask ask[2] = {{.n_prompt = 10, .seed_prompt = 1, .max_tokens = 30},
                  {.n_prompt = 10, .seed_prompt = 2, .max_tokens = 30, .temperature = 0.8f, .seed = 99}};
    GenRequest *r[2];
    for (int i = 0; i < 2; i++) {
        r[i] = request(&f, &ask[i], i);
        submit_ok(&f, r[i]);
    }
    /* /v1/slots shows a re-admitted request's cached tokens from its latest
     * admission (its own prompt is cached by then), its usage the first's */
    int ticks = 0, readmitted_cached = -1;
    for (; ticks < 500 && sched_tick(f.e); ticks++) {
        Buf b = {0};
        f.e->debug_json(f.e, "slots", &b);
        const char *id = gen_input(r[1])->id, *at = strstr(b.data, id), *c = at ? strstr(at, "\"cached_tokens\":") : NULL;
        if (sched_stats(f.e).preemptions >= 1 && c) readmitted_cached = atoi(c + strlen("\"cached_tokens\":"));
        buf_free(&b);
    }
    CHECK_MSG(ticks < 500, "still busy after 500 ticks");
    CHECK_MSG(sched_stats(f.e).preemptions >= 1, "no preemption: the test does not test it");
    if (prefix_cache) {
        CHECK_MSG(readmitted_cached > 0, "the re-admitted request shows %d cached tokens", readmitted_cached);
        CHECK_EQ_INT(gen_result(r[1])->n_cached, 0);
    }
    /* the prefix cache's counters count each request once, as usage does */
    SchedStats st = sched_stats(f.e);
    CHECK_EQ_INT((int)st.prefix_lookups, prefix_cache ? 2 : 0);
    CHECK_EQ_INT((int)st.prefix_cached_tokens, gen_result(r[0])->n_cached + gen_result(r[1])->n_cached);
    for (int i = 0; i < 2; i++) {
        Out got = {0}, want;
        CHECK(drain(r[i], &got));
        solo(&f, &ask[i], &want);
        CHECK_MSG(want.n == 30, "request %d: only %d tokens alone", i, want.n);
        CHECK_MSG(same_out(&got, &want), "request %d (prefix cache %d): %d tokens, solo %d; they differ", i,
                  prefix_cache, got.n, want.n);
        CHECK_EQ_INT(gen_result(r[i])->status, 0);
        CHECK_STR(gen_result(r[i])->finish_reason, "length");
    }
    CHECK(gen_result(r[0])->t_last < gen_result(r[1])->t_last); /* the older one was never held back */
    CHECK_EQ_INT(pool_used(&f), 0);
    fx_close(&f);
}

TEST(III7_sched_preempt_the_youngest_and_recompute_same_tokens) {
    check_preemption(true);
    check_preemption(false);
}

/* Cancelling: a running request gives back its slot and blocks at the next
 * tick, a waiting one leaves the queue; the others go on. */
TEST(III7_sched_cancel_frees_everything) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 2, .block_size = 4, .n_blocks = 32})) {
        fx_close(&f);
        return;
    }
    Ask ask = {.n_prompt = 9, .seed_prompt = 1, .max_tokens = 60};
    GenRequest *r[4];
    for (int i = 0; i < 4; i++) {
        ask.seed_prompt = i + 1;
        r[i] = request(&f, &ask, i);
        submit_ok(&f, r[i]);
    }
    for (int t = 0; t < 3; t++) sched_tick(f.e);
    CHECK_EQ_INT(slots_busy(&f), 2);
    CHECK_EQ_INT(waiting(&f), 2);
    int used = pool_used(&f);
    CHECK(used >= 6);
    gen_cancel(r[0]); /* running */
    gen_cancel(r[3]); /* waiting */
    sched_tick(f.e);
    Out o = {0};
    CHECK(drain(r[0], &o) && gen_result(r[0])->cancelled && gen_result(r[0])->n_generated < 60);
    memset(&o, 0, sizeof o);
    CHECK(drain(r[3], &o) && gen_result(r[3])->cancelled && gen_result(r[3])->n_generated == 0);
    CHECK_EQ_INT(slots_busy(&f), 2); /* r[2] took r[0]'s slot */
    CHECK_EQ_INT(waiting(&f), 0);
    gen_cancel(r[1]);
    gen_cancel(r[2]);
    sched_tick(f.e);
    CHECK_EQ_INT(slots_busy(&f), 0);
    CHECK_EQ_INT(pool_used(&f), 0);
    for (int i = 0; i < 4; i++) {
        memset(&o, 0, sizeof o);
        CHECK(drain(r[i], &o));
    }
    fx_close(&f);
    /* every block back in the free list once the cache is gone too */
}

/* Requests that can never run are refused at once, with the reason. */
TEST(III7_sched_refuses_what_can_never_fit) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 1, .queue = 1, .block_size = 4, .n_blocks = 8})) {
        fx_close(&f);
        return;
    }
    char err[ERR_MAX] = "";
    Ask too_long = {.n_prompt = 40, .seed_prompt = 1, .max_tokens = 2}, too_many = {.n_prompt = 4, .max_tokens = 40},
        fine = {.n_prompt = 4, .max_tokens = 3};
    GenRequest *a = request(&f, &too_long, 0), *b = request(&f, &too_many, 1), *c = request(&f, &fine, 2),
               *d = request(&f, &fine, 3), *e = request(&f, &fine, 4);
    CHECK_EQ_INT(f.e->submit(f.e, a, err), 400);
    CHECK_MSG(strstr(err, "needs 11 KV blocks (prompt 40 + max_tokens 2") && strstr(err, "the pool has 8"), "%s", err);
    CHECK_EQ_INT(f.e->submit(f.e, b, err), 400);
    CHECK_MSG(strstr(err, "needs 11 KV blocks") && strstr(err, "the pool has 8"), "%s", err);
    CHECK_EQ_INT(f.e->submit(f.e, c, err), 0);
    CHECK_EQ_INT(f.e->submit(f.e, d, err), 503); /* --queue 1: c waits until the next tick */
    CHECK_MSG(strstr(err, "busy") && strstr(err, "--queue 1"), "%s", err);
    GenInput in = *gen_input(e);
    in.sampling.top_p = -1;
    GenRequest *bad = keep(&f, gen_request_create(&in, f.tok, NULL, 0));
    CHECK_EQ_INT(f.e->submit(f.e, bad, err), 400);
    CHECK_MSG(strstr(err, "top_p"), "%s", err);
    run_all(&f, 100);
    Out o = {0};
    CHECK(drain(c, &o) && o.n == 3);
    fx_close(&f);
}

/* A request alone that outgrows the pool ends with "length", as in III.4;
 * the prefix cache's blocks are given back to make room first. */
TEST(III7_sched_alone_runs_out_of_room_with_length) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 2, .block_size = 4, .n_blocks = 8})) {
        fx_close(&f);
        return;
    }
    Ask warm = {.n_prompt = 12, .seed_prompt = 1, .max_tokens = 8}, grow = {.n_prompt = 5, .seed_prompt = 2, .max_tokens = -1};
    GenRequest *a = request(&f, &warm, 0);
    submit_ok(&f, a);
    run_all(&f, 100);
    CHECK(sched_stats(f.e).prefix_blocks >= 4);
    GenRequest *b = request(&f, &grow, 1);
    submit_ok(&f, b);
    run_all(&f, 200);
    Out o = {0};
    CHECK(drain(b, &o));
    const GenResult *res = gen_result(b);
    CHECK_EQ_INT(res->status, 0);
    CHECK_STR(res->finish_reason, "length");
    CHECK_EQ_INT(res->n_prompt + res->n_generated - 1, 32);
    CHECK(sched_stats(f.e).prefix_evicted_blocks >= 4);
    CHECK_EQ_INT(pool_used(&f), 0);
    fx_close(&f);
}

/* Shared prompts hit the prefix cache: cached_tokens is reported, the
 * counters and the views show it, and the tokens do not change. */
TEST(III7_sched_prefix_hits_reported_and_shown) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 2, .block_size = 8, .n_blocks = 32})) {
        fx_close(&f);
        return;
    }
    Ask ask[3] = {{.n_prompt = 30, .seed_prompt = 1, .max_tokens = 4, .shared = 24},
                  {.n_prompt = 30, .seed_prompt = 2, .max_tokens = 4, .shared = 24},
                  {.n_prompt = 30, .seed_prompt = 1, .max_tokens = 4, .shared = 24}};
    GenRequest *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = request(&f, &ask[i], i);
        submit_ok(&f, r[i]);
        run_all(&f, 100);
    }
    int want_cached[3] = {0, 24, 29}; /* nothing; the shared 3 blocks; all but the last token */
    for (int i = 0; i < 3; i++) {
        Out got = {0}, want;
        CHECK(drain(r[i], &got));
        CHECK_EQ_INT(gen_result(r[i])->n_cached, want_cached[i]);
        solo(&f, &ask[i], &want);
        CHECK(same_out(&got, &want));
    }
    SchedStats st = sched_stats(f.e);
    CHECK_EQ_INT(st.prefix_lookups, 3);
    CHECK_EQ_INT(st.prefix_hits, 2);
    CHECK_EQ_INT(st.prefix_cached_tokens, 24 + 29);
    Buf b = {0};
    f.e->metrics(f.e, &b);
    CHECK(strstr(b.data, "chat_server_prefix_cache_hits_total 2\n"));
    CHECK(strstr(b.data, "chat_server_prefix_cache_misses_total 1\n"));
    CHECK(strstr(b.data, "chat_server_prefix_cache_cached_tokens_total 53\n"));
    CHECK(strstr(b.data, "chat_server_preemptions_total 0\n"));
    b.len = 0;
    CHECK_EQ_INT(f.e->debug_json(f.e, "kv", &b), 0);
    char err[ERR_MAX];
    JsonValue *v = json_parse(b.data, b.len, err);
    CHECK_MSG(v, "%s", err);
    const JsonValue *pc = v ? json_get(v, "prefix_cache") : NULL;
    CHECK(pc && json_get(pc, "root") && json_get(v, "map") && json_get(v, "blocks_cached"));
    CHECK(strstr(b.data, "\"blocks_used\":0"));
    /* each count is its list's length */
    const JsonValue *used = v ? json_get(v, "used") : NULL, *cached = v ? json_get(v, "cached") : NULL;
    CHECK(used && cached && json_get(v, "legend"));
    if (used && cached) {
        CHECK_EQ_INT((int)used->n_items, (int)json_get(v, "blocks_used")->number);
        CHECK_EQ_INT((int)cached->n_items, (int)json_get(v, "blocks_cached")->number);
        CHECK(cached->n_items >= 3);
    }
    json_free(v);
    b.len = 0;
    CHECK_EQ_INT(f.e->debug_json(f.e, "slots", &b), 0);
    v = json_parse(b.data, b.len, err);
    CHECK_MSG(v, "%s", err);
    CHECK(strstr(b.data, "\"max_concurrent\":2") && strstr(b.data, "\"state\":\"idle\""));
    json_free(v);
    CHECK_EQ_INT(f.e->debug_json(f.e, "nothing", &b), -1);
    buf_free(&b);
    fx_close(&f);
}

/* Shutting down fails what runs and what waits with 503. */
TEST(III7_sched_shutdown_fails_what_runs_and_waits) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 1, .block_size = 4, .n_blocks = 32})) {
        fx_close(&f);
        return;
    }
    Ask ask = {.n_prompt = 6, .seed_prompt = 1, .max_tokens = 50};
    GenRequest *a = request(&f, &ask, 0), *b = request(&f, &ask, 1), *c = request(&f, &ask, 2);
    submit_ok(&f, a);
    submit_ok(&f, b);
    sched_tick(f.e);
    f.e->shutdown(f.e);
    char err[ERR_MAX] = "";
    CHECK_EQ_INT(f.e->submit(f.e, c, err), 503);
    Out o = {0};
    CHECK(drain(a, &o) && gen_result(a)->status == 503);
    memset(&o, 0, sizeof o);
    CHECK(drain(b, &o) && gen_result(b)->status == 503);
    CHECK_MSG(strstr(gen_result(b)->message, "shutting down"), "%s", gen_result(b)->message);
    CHECK_EQ_INT(pool_used(&f), 0);
    fx_close(&f);
}

/* The engine thread, not ticks by hand: concurrent requests end, the same. */
TEST(III7_sched_thread_runs_requests) {
    Fixture f;
    memset(&f, 0, sizeof f);
    char err[ERR_MAX] = "";
    if (!load_test_model(&f.m, "tiny-f32")) return;
    f.tok = tokenizer_load(&f.m.file, err);
    f.be = backend_create("scalar", 1, err);
    f.pool = kv_pool_create(&f.m.cfg, 8, 32, err);
    SchedConfig c = {.model = &f.m, .be = f.be, .kv_kind = "paged", .pool = f.pool, .ctx = f.m.cfg.ctx_len,
                     .queue = 8, .max_concurrent = 3, .prefill_chunk = 16, .prefix_cache = true};
    f.e = sched_engine_create(&c, err);
    CHECK_MSG(f.e, "%s", err);
    if (f.e) {
        GenRequest *r[N_MIX];
        for (int i = 0; i < N_MIX; i++) {
            r[i] = request(&f, &MIX[i], i);
            submit_ok(&f, r[i]);
        }
        for (int i = 0; i < N_MIX; i++) {
            Out got = {0}, want;
            double end = time_now_ms() + 20000;
            while (!drain(r[i], &got) && time_now_ms() < end) usleep(1000);
            solo(&f, &MIX[i], &want);
            CHECK_MSG(same_out(&got, &want), "request %d differs from its solo run", i);
        }
        CHECK_EQ_INT(pool_used(&f), 0);
    }
    fx_close(&f);
}

/* The trace, the views of a basic cache and of a pool without the prefix
 * cache, a request done at its first token, and the engine's own refusals. */
TEST(III7_sched_trace_views_and_bad_configs) {
    Fixture f;
    const char *path = test_tmp_path("trace.txt");
    FILE *trace = fopen(path, "w");
    if (!fx_open(&f, (Setup){.slots = 2, .block_size = 4, .n_blocks = 16, .no_prefix_cache = true, .trace = trace,
                             .kv_trace = trace})) {
        fx_close(&f);
        fclose(trace);
        return;
    }
    Ask one = {.n_prompt = 5, .seed_prompt = 1, .max_tokens = 1}, two = {.n_prompt = 6, .seed_prompt = 2, .max_tokens = 3};
    GenRequest *a = request(&f, &one, 0), *b = request(&f, &two, 1);
    submit_ok(&f, a);
    submit_ok(&f, b);
    run_all(&f, 50);
    fclose(trace);
    Out o = {0};
    CHECK(drain(a, &o) && o.n == 1 && gen_result(a)->status == 0);
    size_t n;
    char err[ERR_MAX];
    char *text = file_read_all(path, &n, err);
    CHECK_MSG(text && strstr(text, "tick 1 | admitted req-0 (slot 0, cached 0 of 5), req-1 (slot 1, cached 0 of 6)") &&
                  strstr(text, "| ended req-0 (done) | slots 1/2, waiting 0, blocks used 2, cached 0, of 16"),
              "%s", text ? text : err);
    /* --kv-trace: the running request's table after the tick, its step the tokens it generated */
    CHECK_MSG(text && strstr(text, "of 16\nkv req-1 step 2: 7 tokens in 2 blocks [") && !strstr(text, "kv req-0"),
              "%s", text ? text : err);
    free(text);
    Buf j = {0};
    CHECK_EQ_INT(f.e->debug_json(f.e, "kv", &j), 0);
    CHECK(strstr(j.data, "\"prefix_cache\":null}"));
    buf_free(&j);
    fx_close(&f);
    if (!fx_open(&f, (Setup){.slots = 1, .ctx = 256})) { /* the basic cache: no pool, no tree */
        fx_close(&f);
        return;
    }
    CHECK_EQ_INT(f.e->debug_json(f.e, "kv", &j), 0);
    CHECK(strstr(j.data, "\"kind\":\"basic\""));
    buf_free(&j);
    Ask huge = {.n_prompt = 300, .seed_prompt = 3, .max_tokens = 1};
    GenRequest *h = request(&f, &huge, 2);
    CHECK_EQ_INT(f.e->submit(f.e, h, err), 400);
    CHECK_MSG(strstr(err, "the prompt has 300 tokens; this server holds 256 (--ctx)"), "%s", err);
    SchedConfig bad = {.model = &f.m, .be = f.be, .kv_kind = "basic", .ctx = 64, .queue = 1, .max_concurrent = 0,
                       .prefill_chunk = 1, .manual = true};
    CHECK(sched_engine_create(&bad, err) == NULL);
    CHECK_MSG(strstr(err, "--max-concurrent >= 1"), "%s", err);
    fx_close(&f);
}

/* ---- the event stream (GET /v1/events) ------------------------------------------------------- */

/* Counts of each kind of event, and how the ticks went. */
typedef struct {
    int admit, prefill, decode, preempt, end, tick, lookup, cache, ref, alloc, dropped, with_tree;
    long long last_tick;   /* the last tick event's number */
    bool in_order;         /* tick events numbered 1, 2, 3...; a job's event in the tick being run */
} Seen;

/* Reads what sub holds now; the tick being run is `tick`. */
static void take_events(EventSub *sub, long long tick, Seen *seen) {
    Buf out = {0};
    char err[ERR_MAX];
    events_read(sub, &out, 0);
    for (char *p = out.data; p && (p = strstr(p, "data: ")); ) {
        p += 6;
        char *end = strstr(p, "\n\n");
        JsonValue *v = end ? json_parse(p, (size_t)(end - p), err) : NULL;
        CHECK_MSG(v, "an event is not JSON: %.80s", p);
        if (!v) break;
        const char *ev = json_get(v, "ev")->string;
        const JsonValue *t = json_get(v, "tick");
        if (strcmp(ev, "tick") == 0) {
            seen->tick++;
            seen->in_order &= (long long)t->number == seen->last_tick + 1 && (long long)t->number == tick;
            seen->last_tick = (long long)t->number;
            seen->with_tree += json_get(v, "tree") != NULL;
            CHECK(json_get(v, "slots") && json_get(json_get(v, "kv"), "map"));
        } else if (t) {
            seen->in_order &= (long long)t->number == tick;
        }
        seen->admit += !strcmp(ev, "admit");
        seen->prefill += !strcmp(ev, "prefill");
        seen->decode += !strcmp(ev, "decode");
        seen->preempt += !strcmp(ev, "preempt");
        seen->end += !strcmp(ev, "end");
        seen->lookup += !strcmp(ev, "lookup");
        seen->cache += !strcmp(ev, "cache");
        seen->ref += !strcmp(ev, "ref");
        seen->alloc += !strcmp(ev, "alloc");
        seen->dropped += !strcmp(ev, "dropped");
        json_free(v);
        p = end;
    }
    buf_free(&out);
}

/* MIX at once on 2 slots and a pool tight enough to preempt, read after
 * every tick: every tick appears once, in order, with what ran in it; and
 * every request still gets its solo tokens (recording changes nothing). */
TEST(III7_sched_events_every_tick_in_order) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 3, .block_size = 4, .n_blocks = 20, .chunk = 16, .events_ring = EVENTS_RING_BYTES})) {
        fx_close(&f);
        return;
    }
    GenRequest *r[N_MIX];
    for (int i = 0; i < N_MIX; i++) submit_ok(&f, r[i] = request(&f, &MIX[i], i));
    Seen seen = {.in_order = true};
    long long ticks = 0;
    for (bool busy = true; busy && ticks < 2000;) {
        busy = sched_tick(f.e);
        take_events(f.sub, ++ticks, &seen);
    }
    CHECK_MSG(seen.in_order, "a tick's events came out of order or a tick is missing (last tick event %lld of %lld)",
              seen.last_tick, ticks);
    CHECK_EQ_INT(seen.tick, (int)ticks);
    CHECK_EQ_INT((int)sched_stats(f.e).ticks, (int)ticks);
    CHECK_EQ_INT(seen.dropped, 0);
    CHECK_EQ_INT(seen.end, N_MIX);
    CHECK_EQ_INT(seen.admit, N_MIX + seen.preempt); /* a preempted request is admitted again */
    CHECK_EQ_INT(seen.lookup, seen.admit);
    CHECK_EQ_INT((int)sched_stats(f.e).preemptions, seen.preempt);
    CHECK(seen.decode > 0 && seen.prefill >= N_MIX && seen.cache > 0 && seen.alloc > 0 && seen.with_tree > 0);
    CHECK_MSG(seen.ref > 0, "the shared prefix was never shared by reference");
    for (int i = 0; i < N_MIX; i++) {
        Out got = {0}, want;
        CHECK(drain(r[i], &got));
        solo(&f, &MIX[i], &want);
        CHECK_MSG(same_out(&got, &want), "request %d: recording the events changed its tokens", i);
    }
    fx_close(&f);
}

/* A subscriber that never reads: its ring fills, the rest is dropped and
 * counted, the engine goes on as without it (the same tokens, the pool
 * whole), and the reader learns how many it lost. */
TEST(III7_sched_events_stalled_reader_drops) {
    Fixture f;
    if (!fx_open(&f, (Setup){.slots = 3, .block_size = 4, .n_blocks = 64, .events_ring = 4096})) {
        fx_close(&f);
        return;
    }
    GenRequest *r[N_MIX];
    for (int i = 0; i < N_MIX; i++) submit_ok(&f, r[i] = request(&f, &MIX[i], i));
    run_all(&f, 2000);
    for (int i = 0; i < N_MIX; i++) {
        Out got = {0}, want;
        CHECK(drain(r[i], &got));
        solo(&f, &MIX[i], &want);
        CHECK(same_out(&got, &want));
    }
    uint64_t lost = events_dropped(f.sub);
    CHECK_MSG(lost > 100, "only %llu events dropped", (unsigned long long)lost);
    Buf out = {0};
    events_read(f.sub, &out, 0);
    char want[96];
    snprintf(want, sizeof want, "\"ev\":\"dropped\",\"n\":%llu,", (unsigned long long)lost);
    CHECK_MSG(strstr(out.data, want), "no dropped event counting %llu", (unsigned long long)lost);
    CHECK(out.len < 4096 + 256); /* no more than the ring held, and the count */
    buf_free(&out);
    fx_close(&f);
}
