/* Chapter III.7: one decode step for many sequences (seq_decode_batch). The
 * invariant: a sequence's logits and tokens are bitwise those it gets alone,
 * whatever runs beside it (up to 8 others of other lengths and positions,
 * joining and leaving, sharing prefix blocks), on every backend and thread
 * count; a step that cannot run changes no sequence. */
#include <stdlib.h>
#include <string.h>

#include "backend_simd.h"
#include "batch.h"
#include "forward.h"
#include "harness.h"
#include "ops.h"
#include "test_util.h"

#define MAX_SLOTS 9
#define MAX_STEPS 16

/* Every test pool keeps all its threads busy, as on an idle machine. */
__attribute__((constructor)) static void pools_never_solo(void) { setenv("POOL_SOLO", "0", 1); }

/* One sequence of a scenario: its prompt (seeded), the step of the batch at
 * which it is prefilled and joins, and how many decode steps it runs. */
typedef struct {
    int prompt, join, steps;
    const char *kind; /* its cache: "paged" (the shared pool) or "basic" */
} SlotSpec;

/* Nine sequences of different lengths that come and go: the batch holds 1 to 9 of them. */
static const SlotSpec SLOTS[MAX_SLOTS] = {
    {1, 0, 12, "paged"}, {2, 0, 6, "paged"}, {5, 1, 10, "paged"}, {8, 2, 9, "basic"}, {13, 3, 7, "paged"},
    {3, 3, 8, "paged"},  {21, 5, 5, "paged"}, {4, 6, 6, "paged"}, {9, 7, 4, "paged"},
};

/* What a sequence gives alone: its logits after the prompt and after each
 * decode step ([steps + 1, vocab]), and its tokens. */
typedef struct {
    float *logits;
    int32_t tokens[64];
    int n_tokens;
} Solo;

static bool same_logits(const float *a, const float *b, int vocab) {
    return memcmp(a, b, sizeof(float) * (size_t)vocab) == 0;
}

static void prompt_of(int slot, int32_t *toks, int n, int vocab) { test_tokens(toks, n, vocab, 100 + (uint32_t)slot); }

/* A sequence on a new cache of the given kind (paged: drawing on pool). */
static bool open_seq(Sequence *s, const Qwen3Model *m, Backend *be, const char *kind, KvPool *pool, int cap) {
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create(kind, &m->cfg, strcmp(kind, "paged") == 0 ? pool : NULL, err);
    if (!kv || seq_init(s, m, be, kv, cap, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    return true;
}

static bool extend(Sequence *s, const int32_t *toks, int n) {
    char err[ERR_MAX];
    if (seq_extend(s, toks, n, err) == 0) return true;
    test_fail(__FILE__, __LINE__, "seq_extend of %d tokens: %s", n, err);
    return false;
}

/* Sequence j of SLOTS run alone, one seq_extend per token, on a pool of its own. */
static bool run_solo(Solo *r, const Qwen3Model *m, Backend *be, int j, int block_size) {
    int V = m->cfg.vocab_size;
    const SlotSpec *sp = &SLOTS[j];
    char err[ERR_MAX];
    KvPool *pool = kv_pool_create(&m->cfg, block_size, 64, err);
    Sequence s;
    r->logits = malloc(sizeof(float) * (size_t)V * (size_t)(sp->steps + 1));
    prompt_of(j, r->tokens, sp->prompt, V);
    bool ok = pool && open_seq(&s, m, be, sp->kind, pool, 64);
    if (ok) {
        ok = extend(&s, r->tokens, sp->prompt);
        for (int t = 0; ok && t <= sp->steps; t++) {
            memcpy(r->logits + (size_t)t * V, s.logits, sizeof(float) * (size_t)V);
            if (t == sp->steps) break;
            int32_t next = argmax(s.logits, V, NULL);
            ok = extend(&s, &next, 1);
        }
        memcpy(r->tokens, s.tokens, sizeof(int32_t) * (size_t)s.n_tokens);
        r->n_tokens = s.n_tokens;
        seq_free(&s);
    }
    kv_pool_free(pool);
    return ok;
}

/* The scenario with every sequence on one pool, stepped together with
 * seq_decode_batch: after its prefill and every step, each sequence's logits
 * must be solo[j]'s bit for bit, and at the end its tokens too. */
static void check_batched(const Qwen3Model *m, Backend *be, const Solo *solo, int block_size, const char *what) {
    int V = m->cfg.vocab_size;
    char err[ERR_MAX];
    KvPool *pool = kv_pool_create(&m->cfg, block_size, 256, err);
    Sequence seqs[MAX_SLOTS];
    int done[MAX_SLOTS] = {0};
    bool open[MAX_SLOTS] = {0}, ok = pool != NULL;
    for (int step = 0; ok && step < MAX_STEPS; step++) {
        Sequence *batch[MAX_SLOTS];
        int32_t toks[MAX_SLOTS];
        int slot_of[MAX_SLOTS], B = 0;
        for (int j = 0; ok && j < MAX_SLOTS; j++) {
            if (SLOTS[j].join == step) { /* a prefill between two batched steps */
                int32_t prompt[32];
                prompt_of(j, prompt, SLOTS[j].prompt, V);
                ok = open_seq(&seqs[j], m, be, SLOTS[j].kind, pool, 64) && extend(&seqs[j], prompt, SLOTS[j].prompt);
                open[j] = ok;
                if (ok && !same_logits(seqs[j].logits, solo[j].logits, V))
                    test_fail(__FILE__, __LINE__, "%s: sequence %d: prefill logits differ from alone", what, j);
            }
            if (open[j] && done[j] < SLOTS[j].steps) {
                batch[B] = &seqs[j];
                toks[B] = argmax(seqs[j].logits, V, NULL);
                slot_of[B++] = j;
            }
        }
        if (!ok || B == 0) continue;
        if (seq_decode_batch(batch, toks, B, err) != 0) {
            test_fail(__FILE__, __LINE__, "%s: step %d, batch of %d: %s", what, step, B, err);
            break;
        }
        for (int i = 0; i < B; i++) {
            int j = slot_of[i];
            done[j]++;
            if (!same_logits(seqs[j].logits, solo[j].logits + (size_t)done[j] * V, V)) {
                test_fail(__FILE__, __LINE__, "%s: step %d: sequence %d (row %d of %d, position %d) differs from alone",
                          what, step, j, i, B, seqs[j].n_tokens - 1);
                ok = false;
            }
        }
    }
    for (int j = 0; j < MAX_SLOTS; j++) {
        if (!open[j]) continue;
        CHECK_EQ_INT(done[j], SLOTS[j].steps);
        CHECK_EQ_INT(seqs[j].n_tokens, solo[j].n_tokens);
        CHECK_EQ_INT(seqs[j].kv->seq_len(seqs[j].kv), solo[j].n_tokens);
        CHECK_MSG(memcmp(seqs[j].tokens, solo[j].tokens, sizeof(int32_t) * (size_t)solo[j].n_tokens) == 0,
                  "%s: sequence %d: tokens differ from alone", what, j);
        seq_free(&seqs[j]);
    }
    if (pool) {
        int used, total;
        kv_pool_stats(pool, &used, &total);
        CHECK_EQ_INT(used, 0); /* every block went back */
    }
    kv_pool_free(pool);
}

/* The solo runs of one backend, then the batched scenario on each of bes[]. */
static void check_backend(const char *model, Backend *ref, Backend **bes, int n_bes, int block_size) {
    Qwen3Model m;
    if (!load_test_model(&m, model)) return;
    Solo solo[MAX_SLOTS] = {0};
    bool ok = true;
    for (int j = 0; ok && j < MAX_SLOTS; j++) ok = run_solo(&solo[j], &m, ref, j, block_size);
    /* alone is itself the full recompute of each sequence (III.4's invariant): checked once here */
    float *full = malloc(sizeof(float) * (size_t)m.cfg.vocab_size);
    if (ok) {
        forward(&m, ref, solo[6].tokens, solo[6].n_tokens, full);
        CHECK(same_logits(full, solo[6].logits + (size_t)SLOTS[6].steps * m.cfg.vocab_size, m.cfg.vocab_size));
    }
    for (int b = 0; ok && b < n_bes; b++) {
        char what[128];
        snprintf(what, sizeof what, "%s, %s with %d thread%s, blocks of %d", model, bes[b]->name, bes[b]->n_threads,
                 bes[b]->n_threads == 1 ? "" : "s", block_size);
        check_batched(&m, bes[b], solo, block_size, what);
    }
    free(full);
    for (int j = 0; j < MAX_SLOTS; j++) free(solo[j].logits);
    qwen3_free(&m);
}

static void check_model(const char *model) {
    Backend *scalar = backend_scalar_create(), *simd = backend_simd_create(simd_kernels());
    Backend *par[4];
    for (int t = 0; t < 4; t++) par[t] = backend_parallel_create(simd_kernels(), t + 1);
    check_backend(model, scalar, &scalar, 1, 4);
    check_backend(model, simd, &simd, 1, 16);
    check_backend(model, par[0], par, 4, 4); /* thread counts 1..4 against one thread alone */
    for (int t = 0; t < 4; t++) backend_free(par[t]);
    backend_free(simd);
    backend_free(scalar);
}

TEST(III7_batch_matches_alone_every_backend_and_thread_count) {
    check_model("tiny-f32");
    check_model("small-q8_0");
    check_model("small-untied");
}

/* Sequences forked from one prompt share its blocks by reference, the last
 * one partly filled: the batch copies a shared block before any of them
 * writes into it (two of them write into the same one in the same step), and
 * each still continues exactly as if it had been alone all along. */
TEST(III7_batch_matches_alone_with_shared_prefix_blocks) {
    Qwen3Model m;
    if (!load_test_model(&m, "small-f32")) return;
    Backend *be = backend_parallel_create(simd_kernels(), 2);
    int V = m.cfg.vocab_size, steps = 6;
    char err[ERR_MAX];
    KvPool *pool = kv_pool_create(&m.cfg, 4, 64, err), *own = kv_pool_create(&m.cfg, 4, 64, err);
    int32_t prompt[16];
    test_tokens(prompt, 16, V, 31);
    /* 10: all of the parent, mid-block (two clones of it); 8: a block boundary; 7: mid-block */
    const int fork_at[4] = {10, 10, 8, 7};
    Sequence parent, forks[4], alone[4];
    if (open_seq(&parent, &m, be, "paged", pool, 64) && extend(&parent, prompt, 10)) {
        Sequence *batch[5] = {&parent};
        int32_t first[5] = {0};
        for (int i = 0; i < 4; i++) {
            CHECK_MSG(seq_fork(&forks[i], &parent, fork_at[i], err) == 0, "%s", err);
            batch[i + 1] = &forks[i];
        }
        /* the shorter forks continue with a token of their own, to diverge */
        for (int i = 2; i < 4; i++) CHECK(extend(&forks[i], prompt + 11 + i, 1));
        const KvBlockTable *tp = kv_paged_table(parent.kv);
        CHECK_EQ_INT(pool->ref[tp->blocks[0]], 5); /* a full block: the parent and four forks */
        CHECK_EQ_INT(pool->ref[tp->blocks[1]], 4); /* the fork at 7 wrote into it: its own copy */
        CHECK_EQ_INT(pool->ref[tp->blocks[2]], 3); /* the parent and its two clones write here next */
        int used_before, total;
        kv_pool_stats(pool, &used_before, &total);
        for (int step = 0; step < steps && !test_failed_now(); step++) {
            int32_t toks[5];
            for (int i = 0; i < 5; i++) toks[i] = argmax(batch[i]->logits, V, NULL);
            if (step == 0) memcpy(first, toks, sizeof first);
            CHECK_MSG(seq_decode_batch(batch, toks, 5, err) == 0, "step %d: %s", step, err);
        }
        CHECK_EQ_INT(pool->ref[tp->blocks[0]], 5);  /* full blocks stay shared */
        int used_after;
        kv_pool_stats(pool, &used_after, &total);
        CHECK(used_after > used_before);
        /* each fork again, alone from the start on a pool of its own */
        for (int i = 0; i < 4; i++) {
            int32_t toks[32];
            memcpy(toks, forks[i].tokens, sizeof(int32_t) * (size_t)forks[i].n_tokens);
            bool ok = open_seq(&alone[i], &m, be, "paged", own, 64) && extend(&alone[i], toks, forks[i].n_tokens);
            if (ok) {
                CHECK_MSG(same_logits(alone[i].logits, forks[i].logits, V), "fork %d differs from its run alone", i);
                seq_free(&alone[i]);
            }
        }
        int32_t toks[32];
        memcpy(toks, parent.tokens, sizeof(int32_t) * (size_t)parent.n_tokens);
        Sequence p2;
        if (open_seq(&p2, &m, be, "paged", own, 64) && extend(&p2, toks, parent.n_tokens)) {
            CHECK(same_logits(p2.logits, parent.logits, V));
            seq_free(&p2);
        }
        CHECK_EQ_INT(forks[0].tokens[10], first[0]); /* the clones went on as the parent */
        CHECK_EQ_INT(forks[1].tokens[10], first[0]);
        CHECK(tp->blocks[2] != kv_paged_table(forks[0].kv)->blocks[2]);
        for (int i = 0; i < 4; i++) seq_free(&forks[i]);
        seq_free(&parent);
        int used;
        kv_pool_stats(pool, &used, &total);
        CHECK_EQ_INT(used, 0);
    }
    kv_pool_free(own);
    kv_pool_free(pool);
    backend_free(be);
    qwen3_free(&m);
}

/* A snapshot of a sequence, to see that a refused step changed nothing. */
typedef struct {
    int n_tokens, seq_len, n_blocks;
    int32_t tokens[64];
    float *logits;
} Snapshot;

static void snap(Snapshot *sn, const Sequence *s) {
    int V = s->model->cfg.vocab_size;
    sn->n_tokens = s->n_tokens;
    sn->seq_len = s->kv->seq_len(s->kv);
    sn->n_blocks = kv_paged_table(s->kv) ? kv_paged_table(s->kv)->n : 0;
    memcpy(sn->tokens, s->tokens, sizeof(int32_t) * (size_t)s->n_tokens);
    sn->logits = malloc(sizeof(float) * (size_t)V);
    memcpy(sn->logits, s->logits, sizeof(float) * (size_t)V);
}

static bool unchanged(Snapshot *sn, const Sequence *s) {
    bool same = sn->n_tokens == s->n_tokens && sn->seq_len == s->kv->seq_len(s->kv) &&
                sn->n_blocks == (kv_paged_table(s->kv) ? kv_paged_table(s->kv)->n : 0) &&
                memcmp(sn->tokens, s->tokens, sizeof(int32_t) * (size_t)s->n_tokens) == 0 &&
                same_logits(sn->logits, s->logits, s->model->cfg.vocab_size);
    free(sn->logits);
    return same;
}

/* Three sequences on a pool with one block free: the first takes it, the
 * second finds none. The step is refused naming the second, the first gives
 * its block back, and no sequence changed; with room made, the same step runs
 * and gives what each sequence gives alone. */
TEST(III7_batch_out_of_blocks_leaves_every_sequence_unchanged) {
    Qwen3Model m;
    if (!load_test_model(&m, "tiny-f32")) return;
    Backend *be = backend_scalar_create();
    int V = m.cfg.vocab_size;
    char err[ERR_MAX] = "";
    KvPool *pool = kv_pool_create(&m.cfg, 4, 5, err);
    Sequence a, b, c, alone;
    int32_t pa[8], pb[4], pc[3];
    test_tokens(pa, 8, V, 1);
    test_tokens(pb, 4, V, 2);
    test_tokens(pc, 3, V, 3);
    if (open_seq(&a, &m, be, "paged", pool, 64) && open_seq(&b, &m, be, "paged", pool, 64) &&
        open_seq(&c, &m, be, "paged", pool, 64)) {
        /* a: 8 positions = 2 full blocks, b: 4 = 1 full, c: 3 in 1 block; 1 block of 5 left */
        if (extend(&a, pa, 8) && extend(&b, pb, 4) && extend(&c, pc, 3)) {
            Sequence *batch[3] = {&c, &a, &b};
            int32_t toks[3] = {5, 6, 7};
            Snapshot sa, sb, sc;
            snap(&sa, &a);
            snap(&sb, &b);
            snap(&sc, &c);
            CHECK_EQ_INT(seq_decode_batch(batch, toks, 3, err), -1);
            CHECK_STR(err, "sequence 2 of 3: out of KV blocks: 1 more position needs 1 block, 0 of 5 are free "
                           "(block size 4)");
            CHECK_MSG(unchanged(&sa, &a), "a changed");
            CHECK_MSG(unchanged(&sb, &b), "b changed");
            CHECK_MSG(unchanged(&sc, &c), "c changed");
            int used, total;
            kv_pool_stats(pool, &used, &total);
            CHECK_EQ_INT(used, 4); /* a's reserved block went back */
            seq_truncate(&c, 0);   /* c's block is free now: the step runs without it */
            Sequence *two[2] = {&a, &b};
            CHECK_MSG(seq_decode_batch(two, toks + 1, 2, err) == 0, "%s", err);
            int32_t all[9];
            memcpy(all, pa, sizeof pa);
            all[8] = 6;
            float *full = malloc(sizeof(float) * (size_t)V);
            forward(&m, be, all, 9, full);
            CHECK(same_logits(full, a.logits, V));
            memcpy(all, pb, sizeof pb);
            all[4] = 7;
            forward(&m, be, all, 5, full);
            CHECK(same_logits(full, b.logits, V));
            free(full);
            /* a and b now hold every block: a new sequence cannot join them */
            if (open_seq(&alone, &m, be, "paged", pool, 64)) {
                Sequence *three[3] = {&a, &b, &alone};
                CHECK_EQ_INT(seq_decode_batch(three, toks, 3, err), -1);
                CHECK(strstr(err, "sequence 2 of 3: out of KV blocks") == err);
                CHECK_EQ_INT(alone.n_tokens, 0);
                CHECK_EQ_INT(a.n_tokens, 9);
                kv_pool_stats(pool, &used, &total);
                CHECK_EQ_INT(used, 5);
                seq_free(&alone);
            }
        }
        seq_free(&c);
        seq_free(&b);
        seq_free(&a);
    }
    kv_pool_free(pool);
    backend_free(be);
    qwen3_free(&m);
}

/* Bad batches are refused with one line naming the sequence, before anything runs. */
TEST(III7_batch_checks_its_input) {
    Qwen3Model m, other;
    if (!load_test_model(&m, "tiny-f32")) return;
    if (!load_test_model(&other, "tiny-f16")) {
        qwen3_free(&m);
        return;
    }
    Backend *be = backend_scalar_create();
    char err[ERR_MAX] = "";
    KvPool *pool = kv_pool_create(&m.cfg, 4, 16, err);
    Sequence a = {0}, b = {0}, full = {0}, alien = {0};
    int32_t toks[4] = {1, 2, 3, 4};
    if (open_seq(&a, &m, be, "paged", pool, 64) && open_seq(&b, &m, be, "paged", pool, 64) &&
        open_seq(&full, &m, be, "paged", pool, 2) && open_seq(&alien, &other, be, "basic", NULL, 8)) {
        CHECK(extend(&a, toks, 2) && extend(&b, toks, 3) && extend(&full, toks, 2));
        Sequence *batch[3] = {&a, &b, &a};
        CHECK_EQ_INT(seq_decode_batch(batch, toks, 0, err), -1);
        CHECK_STR(err, "a batch of 0 sequences: it needs at least 1");
        CHECK_EQ_INT(seq_decode_batch(batch, toks, 3, err), -1);
        CHECK_STR(err, "sequence 2 of 3 is sequence 0 again: a step runs each sequence once");
        batch[2] = &full;
        CHECK_EQ_INT(seq_decode_batch(batch, toks, 3, err), -1);
        CHECK_STR(err, "sequence 2 of 3 is full: it holds 2 of at most 2 tokens");
        batch[2] = &alien;
        CHECK_EQ_INT(seq_decode_batch(batch, toks, 3, err), -1);
        CHECK_STR(err, "sequence 2 of 3 runs on another model or backend than sequence 0");
        int32_t bad[2] = {1, m.cfg.vocab_size};
        CHECK_EQ_INT(seq_decode_batch(batch, bad, 2, err), -1);
        CHECK_STR(err, "sequence 1 of 2: token id 1000 is outside the vocabulary (0..999)");
        Sequence *one[1] = {&full};
        CHECK_EQ_INT(seq_decode_batch(one, toks, 1, err), -1);
        CHECK_STR(err, "sequence 0 of 1 is full: it holds 2 of at most 2 tokens");
        batch[1] = NULL;
        CHECK_EQ_INT(seq_decode_batch(batch, toks, 2, err), -1);
        CHECK_STR(err, "sequence 1 of 2 is not open");
        CHECK_EQ_INT(a.n_tokens, 2);
        CHECK_EQ_INT(b.n_tokens, 3);
        int used, total;
        kv_pool_stats(pool, &used, &total);
        CHECK_EQ_INT(used, 3); /* nothing was reserved */
        /* one sequence takes the single-sequence path: the same as seq_extend */
        Sequence *solo[1] = {&b};
        CHECK_MSG(seq_decode_batch(solo, toks + 3, 1, err) == 0, "%s", err);
        float *want = malloc(sizeof(float) * (size_t)m.cfg.vocab_size);
        forward(&m, be, b.tokens, 4, want);
        CHECK(same_logits(want, b.logits, m.cfg.vocab_size));
        free(want);
    }
    if (alien.kv) seq_free(&alien);
    if (full.kv) seq_free(&full);
    if (b.kv) seq_free(&b);
    if (a.kv) seq_free(&a);
    kv_pool_free(pool);
    backend_free(be);
    qwen3_free(&other);
    qwen3_free(&m);
}
