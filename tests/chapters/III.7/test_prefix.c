/* Chapter III.7: sequences through the prefix cache on real (mkmodel)
 * models: a sequence that reuses cached blocks, fully or partly, gives the
 * logits and tokens of one that computed everything itself, bit for bit, and
 * leaves the blocks it shares as they were. */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "harness.h"
#include "ops.h"
#include "radix.h"
#include "test_util.h"

#define STEPS 10

/* A greedy run: every step's logits and token. */
typedef struct {
    float *logits; /* [STEPS + 1, vocab] after the prompt, then after each token */
    int32_t tokens[STEPS + 1];
    int reused;
} Trace;

static void trace_init(Trace *tr, int vocab) {
    memset(tr, 0, sizeof *tr);
    tr->logits = malloc(sizeof(float) * (size_t)vocab * (STEPS + 1));
}

/* Extends s by toks[s->n_tokens..n) (the rest of its prompt, if any), then decodes STEPS
 * greedy tokens, recording each step. */
static bool run_trace(Sequence *s, const int32_t *toks, int n, Trace *tr) {
    char err[ERR_MAX];
    int V = s->model->cfg.vocab_size;
    if (n > s->n_tokens && seq_extend(s, toks + s->n_tokens, n - s->n_tokens, err) != 0) {
        test_fail(__FILE__, __LINE__, "prefill: %s", err);
        return false;
    }
    for (int step = 0; step <= STEPS; step++) {
        memcpy(tr->logits + (size_t)step * V, s->logits, sizeof(float) * (size_t)V);
        tr->tokens[step] = argmax(s->logits, V, NULL);
        if (step < STEPS && seq_extend(s, &tr->tokens[step], 1, err) != 0) {
            test_fail(__FILE__, __LINE__, "decode: %s", err);
            return false;
        }
    }
    return true;
}

/* The reference: the same prompt on a pool of its own, nothing cached. */
static bool run_fresh(const Qwen3Model *m, Backend *be, const int32_t *toks, int n, Trace *tr) {
    char err[ERR_MAX];
    KvPool *pool = kv_pool_create(&m->cfg, 8, 64, err);
    KvCache *kv = pool ? kv_cache_create("paged", &m->cfg, pool, err) : NULL;
    Sequence s;
    bool ok = kv && seq_init(&s, m, be, kv, 256, err) == 0;
    if (!ok) test_fail(__FILE__, __LINE__, "%s", err);
    ok = ok && run_trace(&s, toks, n, tr);
    if (kv) seq_free(&s);
    kv_pool_free(pool);
    return ok;
}

static void check_same(const Trace *a, const Trace *b, int vocab, const char *what) {
    for (int step = 0; step <= STEPS; step++) {
        if (memcmp(a->logits + (size_t)step * vocab, b->logits + (size_t)step * vocab, sizeof(float) * (size_t)vocab)) {
            test_fail(__FILE__, __LINE__, "%s: logits differ from a fresh run at step %d", what, step);
            return;
        }
        CHECK_EQ_INT(a->tokens[step], b->tokens[step]);
    }
}

/* Opens a sequence on toks through the tree and runs it; n_reused expected. */
static bool run_cached(RadixTree *t, const Qwen3Model *m, Backend *be, const int32_t *toks, int n, int n_reused,
                       Trace *tr, bool keep) {
    char err[ERR_MAX];
    Sequence s;
    int reused = radix_seq_open(t, &s, m, be, toks, n, 256, err);
    if (reused < 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    CHECK_EQ_INT(reused, n_reused);
    CHECK_EQ_INT(s.n_tokens, reused);
    tr->reused = reused;
    bool ok = run_trace(&s, toks, n, tr);
    if (keep) radix_seq_keep(t, &s);
    seq_free(&s);
    return ok;
}

/* A model, a pool of blocks of 8 and a prefix cache over it. */
typedef struct {
    Qwen3Model m;
    Backend *be;
    KvPool *pool;
    RadixTree *t;
} Fixture;

static bool fx_open(Fixture *f, const char *model, int n_blocks) {
    char err[ERR_MAX];
    memset(f, 0, sizeof *f);
    if (!load_test_model(&f->m, model)) return false;
    f->be = backend_scalar_create();
    f->pool = kv_pool_create(&f->m.cfg, 8, n_blocks, err);
    CHECK_MSG(f->pool, "%s", err);
    if (f->pool) f->t = radix_create(f->pool);
    return f->pool != NULL;
}

/* Frees everything; with the cache gone, no block may still be in use. */
static void fx_close(Fixture *f) {
    radix_free(f->t);
    if (f->pool) {
        int used, total;
        kv_pool_stats(f->pool, &used, &total);
        CHECK_EQ_INT(used, 0);
        CHECK_EQ_INT(f->pool->n_free, total);
    }
    kv_pool_free(f->pool);
    backend_free(f->be);
    qwen3_free(&f->m);
}

static void check_prefix_hits(const char *model) {
    Fixture f;
    if (!fx_open(&f, model, 64)) {
        fx_close(&f);
        return;
    }
    const Qwen3Model *m = &f.m;
    Backend *be = f.be;
    RadixTree *t = f.t;
    int V = m->cfg.vocab_size;
    int32_t p[64], q[64];
    test_tokens(p, 29, V, 5);
    Trace first, fresh, hit;
    trace_init(&first, V);
    trace_init(&fresh, V);
    trace_init(&hit, V);
    /* The first run misses and caches its 29 + 10 tokens: 4 full blocks (32). */
    if (run_cached(t, m, be, p, 29, 0, &first, true) && run_fresh(m, be, p, 29, &fresh)) {
        check_same(&first, &fresh, V, "a miss");
        CHECK_EQ_INT(radix_stats(t).blocks, 4);
        /* A prompt sharing 21 tokens: 2 full blocks and 5 rows of the third. */
        memcpy(q, p, sizeof(int32_t) * 21);
        test_tokens(q + 21, 9, V, 6);
        if (run_cached(t, m, be, q, 30, 21, &hit, false) && run_fresh(m, be, q, 30, &fresh))
            check_same(&hit, &fresh, V, "a partial hit");
        /* The same prompt again: all but its last token reused. */
        if (run_cached(t, m, be, p, 29, 28, &hit, false)) check_same(&hit, &first, V, "a hit of the whole prompt");
        /* A prompt that is exactly the cached 32 tokens, whole blocks: the last one still runs. */
        memcpy(q, p, sizeof(int32_t) * 29);
        memcpy(q + 29, first.tokens, sizeof(int32_t) * 3);
        if (run_cached(t, m, be, q, 32, 31, &hit, false) && run_fresh(m, be, q, 32, &fresh))
            check_same(&hit, &fresh, V, "a hit of every cached block");
        RadixStats st = radix_stats(t);
        CHECK_EQ_INT(st.lookups, 4);
        CHECK_EQ_INT(st.hits, 3);
        CHECK_EQ_INT(st.cached_tokens, 21 + 28 + 31);
        CHECK_EQ_INT(st.evictable, st.blocks); /* nothing runs: every cached block is only the tree's */
    }
    free(first.logits);
    free(fresh.logits);
    free(hit.logits);
    fx_close(&f);
}

TEST(III7_prefix_hit_gives_the_logits_and_tokens_of_a_fresh_run) {
    check_prefix_hits("tiny-f32");
    check_prefix_hits("small-q8_0");
}

/* Two live sequences share a prefix that ends inside a block: the second
 * copies that block before writing, the first keeps writing its own, and
 * both run exactly as if alone. */
TEST(III7_prefix_hit_two_sequences_share_then_diverge_inside_a_block) {
    Fixture f;
    if (!fx_open(&f, "tiny-f32", 32)) {
        fx_close(&f);
        return;
    }
    const Qwen3Model *m = &f.m;
    Backend *be = f.be;
    KvPool *pool = f.pool;
    RadixTree *t = f.t;
    int V = m->cfg.vocab_size;
    char err[ERR_MAX];
    int32_t a[24], b[24];
    test_tokens(a, 24, V, 9);
    memcpy(b, a, sizeof(int32_t) * 19);
    test_tokens(b + 19, 5, V, 10);
    Sequence sa, sb;
    Trace ta, tb, fresh;
    trace_init(&ta, V);
    trace_init(&tb, V);
    trace_init(&fresh, V);
    CHECK_EQ_INT(radix_seq_open(t, &sa, m, be, a, 24, 256, err), 0);
    CHECK_EQ_INT(seq_extend(&sa, a, 24, err), 0);
    radix_seq_keep(t, &sa); /* a's 3 full blocks are shared from now on */
    const KvBlockTable *table_a = kv_paged_table(sa.kv);
    int a_third = table_a->blocks[2];
    CHECK_EQ_INT(pool->ref[a_third], 2);
    CHECK_EQ_INT(radix_seq_open(t, &sb, m, be, b, 24, 256, err), 19);
    CHECK_EQ_INT(pool->ref[a_third], 3); /* a, the tree and b */
    if (run_trace(&sb, b, 24, &tb) && run_fresh(m, be, b, 24, &fresh)) check_same(&tb, &fresh, V, "b");
    CHECK(kv_paged_table(sb.kv)->blocks[2] != a_third); /* b wrote into a copy */
    CHECK_EQ_INT(kv_paged_table(sb.kv)->blocks[1], table_a->blocks[1]);
    CHECK_EQ_INT(pool->ref[a_third], 2);
    if (run_trace(&sa, a, 24, &ta) && run_fresh(m, be, a, 24, &fresh)) check_same(&ta, &fresh, V, "a");
    CHECK_EQ_INT(kv_paged_table(sa.kv)->blocks[2], a_third);
    seq_free(&sa);
    seq_free(&sb);
    RadixStats st = radix_stats(t);
    CHECK_EQ_INT(st.blocks, 3);
    CHECK_EQ_INT(st.evictable, 3);
    free(ta.logits);
    free(tb.logits);
    free(fresh.logits);
    fx_close(&f);
}
