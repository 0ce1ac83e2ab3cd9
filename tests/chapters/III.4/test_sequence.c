/* Chapter III.4: Sequence and forward_extend on real (mkmodel) models: any
 * split of the tokens into extends, any cache kind and block size, gives the
 * logits of a full recompute bit for bit; running out of room changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "harness.h"
#include "ops.h"
#include "sequence.h"
#include "test_util.h"

/* A sequence on a cache of its own kind; paged ones on a pool of their own. */
typedef struct {
    KvPool *pool;
    Sequence seq;
} Run;

static bool run_open(Run *r, const Qwen3Model *m, Backend *be, const char *kind, int block_size, int n_blocks,
                     int cap) {
    char err[ERR_MAX];
    memset(r, 0, sizeof *r);
    if (strcmp(kind, "paged") == 0) r->pool = kv_pool_create(&m->cfg, block_size, n_blocks, err);
    KvCache *kv = kv_cache_create(kind, &m->cfg, r->pool, err);
    if (!kv || seq_init(&r->seq, m, be, kv, cap, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        kv_pool_free(r->pool);
        return false;
    }
    return true;
}

static void run_close(Run *r) {
    seq_free(&r->seq);
    kv_pool_free(r->pool);
}

static bool extend(Run *r, const int32_t *toks, int n) {
    char err[ERR_MAX];
    if (seq_extend(&r->seq, toks, n, err) == 0) return true;
    test_fail(__FILE__, __LINE__, "seq_extend of %d tokens: %s", n, err);
    return false;
}

static bool same_logits(const float *a, const float *b, int vocab) {
    return memcmp(a, b, sizeof(float) * (size_t)vocab) == 0;
}

/* The prompt of 13 tokens in one extend, and in chunks of 5, 1 and 7, then
 * 12 greedy steps: at every step both equal a full recompute bit for bit. */
static void check_chunks(const char *model, const char *kind, int block_size) {
    Qwen3Model m;
    if (!load_test_model(&m, model)) return;
    Backend *be = backend_scalar_create();
    int V = m.cfg.vocab_size, n_prompt = 13, steps = 12;
    int32_t toks[32];
    test_tokens(toks, n_prompt, V, 7);
    Run one, chunked;
    if (run_open(&one, &m, be, kind, block_size, 64, 64) && run_open(&chunked, &m, be, kind, block_size, 64, 64)) {
        float *full = malloc(sizeof(float) * (size_t)V);
        bool ok = extend(&one, toks, n_prompt) && extend(&chunked, toks, 5) && extend(&chunked, toks + 5, 1) &&
                  extend(&chunked, toks + 6, 7);
        for (int step = 0; ok && step <= steps; step++) {
            int n = n_prompt + step;
            forward(&m, be, toks, n, full);
            CHECK_MSG(same_logits(one.seq.logits, full, V), "%s %s/%d: step %d: one extend differs from full recompute",
                      model, kind, block_size, step);
            CHECK_MSG(same_logits(chunked.seq.logits, full, V), "%s %s/%d: step %d: chunked extends differ",
                      model, kind, block_size, step);
            if (test_failed_now() || step == steps) break;
            toks[n] = argmax(full, V, NULL);
            ok = extend(&one, toks + n, 1) && extend(&chunked, toks + n, 1);
        }
        CHECK_EQ_INT(chunked.seq.n_tokens, n_prompt + steps);
        CHECK_EQ_INT(chunked.seq.kv->seq_len(chunked.seq.kv), n_prompt + steps);
        CHECK(memcmp(chunked.seq.tokens, toks, sizeof(int32_t) * (size_t)(n_prompt + steps)) == 0);
        free(full);
        run_close(&chunked);
        run_close(&one);
    }
    backend_free(be);
    qwen3_free(&m);
}

TEST(III4_extend_in_chunks_matches_full_recompute_every_step) {
    const char *models[] = {"tiny-f32", "small-q8_0", "small-untied"};
    for (int i = 0; i < 3; i++) {
        check_chunks(models[i], "paged", 16);
        check_chunks(models[i], "paged", 1);
        check_chunks(models[i], "paged", 7); /* does not divide anything here */
        check_chunks(models[i], "basic", 0);
    }
}

/* Long greedy runs: paged at two block sizes and basic agree at every step,
 * and with full recomputes at a few. */
TEST(III4_paged_matches_basic_over_300_steps) {
    Qwen3Model m;
    if (!load_test_model(&m, "tiny-f32")) return;
    Backend *be = backend_scalar_create();
    int V = m.cfg.vocab_size, steps = 300;
    int32_t *toks = malloc(sizeof(int32_t) * 400);
    test_tokens(toks, 3, V, 11);
    Run basic, p16, p5;
    float *full = malloc(sizeof(float) * (size_t)V);
    if (run_open(&basic, &m, be, "basic", 0, 0, 400) && run_open(&p16, &m, be, "paged", 16, 32, 400) &&
        run_open(&p5, &m, be, "paged", 5, 80, 400)) {
        bool ok = extend(&basic, toks, 3) && extend(&p16, toks, 3) && extend(&p5, toks, 3);
        for (int step = 0; ok && step < steps; step++) {
            int n = 3 + step;
            if (!same_logits(p16.seq.logits, basic.seq.logits, V) || !same_logits(p5.seq.logits, basic.seq.logits, V)) {
                test_fail(__FILE__, __LINE__, "step %d: paged logits differ from basic", step);
                break;
            }
            if (step == 0 || step == 150 || step == steps - 1) {
                forward(&m, be, toks, n, full);
                CHECK_MSG(same_logits(full, basic.seq.logits, V), "step %d: differs from full recompute", step);
            }
            toks[n] = argmax(basic.seq.logits, V, NULL);
            ok = extend(&basic, toks + n, 1) && extend(&p16, toks + n, 1) && extend(&p5, toks + n, 1);
        }
        CHECK_EQ_INT(kv_paged_table(p5.seq.kv)->n, (3 + steps + 4) / 5);
        run_close(&p5);
        run_close(&p16);
        run_close(&basic);
    }
    free(full);
    free(toks);
    backend_free(be);
    qwen3_free(&m);
}

TEST(III4_extend_out_of_blocks_leaves_the_sequence_intact) {
    Qwen3Model m;
    if (!load_test_model(&m, "tiny-f32")) return;
    Backend *be = backend_scalar_create();
    int V = m.cfg.vocab_size;
    int32_t toks[16];
    test_tokens(toks, 16, V, 3);
    Run r;
    if (run_open(&r, &m, be, "paged", 4, 2, 64)) { /* 8 positions in all */
        float *before = malloc(sizeof(float) * (size_t)V), *full = malloc(sizeof(float) * (size_t)V);
        if (extend(&r, toks, 6)) {
            memcpy(before, r.seq.logits, sizeof(float) * (size_t)V);
            char err[ERR_MAX] = "";
            CHECK_EQ_INT(seq_extend(&r.seq, toks + 6, 3, err), -1);
            CHECK_STR(err, "out of KV blocks: 3 more positions need 1 block, 0 of 2 are free (block size 4)");
            CHECK_EQ_INT(r.seq.n_tokens, 6);
            CHECK_EQ_INT(r.seq.kv->seq_len(r.seq.kv), 6);
            CHECK(same_logits(before, r.seq.logits, V));
            int used, total;
            kv_pool_stats(r.pool, &used, &total);
            CHECK_EQ_INT(used, 2);
            CHECK_EQ_INT(seq_extend(&r.seq, toks + 6, 9, err), -1); /* more than the whole pool */
            CHECK(extend(&r, toks + 6, 2)); /* what fits still runs, and right */
            forward(&m, be, toks, 8, full);
            CHECK(same_logits(full, r.seq.logits, V));
        }
        free(before);
        free(full);
        run_close(&r);
    }
    backend_free(be);
    qwen3_free(&m);
}

TEST(III4_extend_checks_room_and_token_ids) {
    Qwen3Model m;
    if (!load_test_model(&m, "tiny-f32")) return;
    Backend *be = backend_scalar_create();
    char err[ERR_MAX] = "";
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    Run r;
    if (run_open(&r, &m, be, "paged", 16, 4, 5)) {
        CHECK_EQ_INT(seq_extend(&r.seq, toks, 6, err), -1);
        CHECK_STR(err, "6 more tokens do not fit: the sequence holds 0 of at most 5");
        CHECK_EQ_INT(seq_extend(&r.seq, toks, 0, err), -1);
        CHECK(strstr(err, "nothing to run") != NULL);
        int32_t bad[2] = {3, m.cfg.vocab_size};
        CHECK_EQ_INT(seq_extend(&r.seq, bad, 2, err), -1);
        CHECK(strstr(err, "token id 1000 is outside the vocabulary (0..999)") != NULL);
        CHECK_EQ_INT(r.seq.n_tokens, 0);
        int used, total;
        kv_pool_stats(r.pool, &used, &total);
        CHECK_EQ_INT(used, 0); /* refused before anything was reserved */
        CHECK(extend(&r, toks, 5));
        CHECK_EQ_INT(seq_extend(&r.seq, toks, 1, err), -1);
        run_close(&r);
    }
    Sequence s;
    CHECK_EQ_INT(seq_init(&s, &m, be, kv_basic_create(&m.cfg), 0, err), -1);
    CHECK_EQ_INT(seq_init(&s, &m, be, kv_basic_create(&m.cfg), m.cfg.ctx_len + 1, err), -1);
    CHECK(strstr(err, "context of 2048") != NULL);
    CHECK_EQ_INT(seq_init(&s, &m, be, NULL, 8, err), -1);
    backend_free(be);
    qwen3_free(&m);
}

/* A rolled-back turn: truncating and extending with other tokens is the same
 * as having run those tokens in the first place. */
static void check_truncate(const char *kind) {
    Qwen3Model m;
    if (!load_test_model(&m, "small-q8_0")) return;
    Backend *be = backend_scalar_create();
    int V = m.cfg.vocab_size;
    int32_t toks[24], other[24];
    test_tokens(toks, 24, V, 5);
    test_tokens(other, 24, V, 6);
    memcpy(other, toks, sizeof(int32_t) * 7);
    Run r, fresh;
    if (run_open(&r, &m, be, kind, 4, 16, 64) && run_open(&fresh, &m, be, kind, 4, 16, 64)) {
        if (extend(&r, toks, 10) && extend(&r, toks + 10, 1) && extend(&r, toks + 11, 5)) {
            seq_truncate(&r.seq, 7);
            CHECK_EQ_INT(r.seq.n_tokens, 7);
            CHECK_EQ_INT(r.seq.kv->seq_len(r.seq.kv), 7);
            if (extend(&r, other + 7, 4) && extend(&fresh, other, 11))
                CHECK_MSG(same_logits(r.seq.logits, fresh.seq.logits, V), "%s: extend after truncate differs", kind);
            seq_truncate(&r.seq, 99); /* nothing to forget */
            CHECK_EQ_INT(r.seq.n_tokens, 11);
            if (r.pool) {
                int used, total, fused;
                kv_pool_stats(r.pool, &used, &total);
                kv_pool_stats(fresh.pool, &fused, &total);
                CHECK_EQ_INT(used, fused); /* the forgotten blocks went back */
            }
            seq_truncate(&r.seq, -3);
            CHECK_EQ_INT(r.seq.n_tokens, 0);
            if (extend(&r, other, 11)) CHECK(same_logits(r.seq.logits, fresh.seq.logits, V));
        }
        run_close(&fresh);
        run_close(&r);
    }
    backend_free(be);
    qwen3_free(&m);
}

TEST(III4_extend_after_truncate_matches_a_fresh_sequence) {
    check_truncate("paged");
    check_truncate("basic");
}

/* Two sequences sharing a prompt's blocks: each continues as if alone, and the
 * shared blocks are copied only where one of them writes. */
TEST(III4_paged_copy_on_write_under_the_model) {
    Qwen3Model m;
    if (!load_test_model(&m, "small-f32")) return;
    Backend *be = backend_scalar_create();
    int V = m.cfg.vocab_size;
    int32_t a_toks[32], b_toks[32];
    test_tokens(a_toks, 32, V, 21);
    test_tokens(b_toks, 32, V, 22);
    memcpy(b_toks, a_toks, sizeof(int32_t) * 13); /* a common prefix of 13: one block and 5 rows of the next */
    Run a, fresh_a, fresh_b;
    Sequence b = {0};
    char err[ERR_MAX];
    if (run_open(&a, &m, be, "paged", 8, 16, 64) && run_open(&fresh_a, &m, be, "paged", 8, 16, 64) &&
        run_open(&fresh_b, &m, be, "paged", 8, 16, 64)) {
        if (extend(&a, a_toks, 20)) {
            CHECK_MSG(seq_fork(&b, &a.seq, 13, err) == 0, "%s", err);
            const KvBlockTable *ta = kv_paged_table(a.seq.kv), *tb = b.kv ? kv_paged_table(b.kv) : NULL;
            if (tb) {
                CHECK_EQ_INT(tb->n, 2);
                CHECK_EQ_INT(a.pool->ref[ta->blocks[1]], 2);
                CHECK(memcmp(b.tokens, a_toks, sizeof(int32_t) * 13) == 0);
                CHECK_EQ_INT(seq_extend(&b, b_toks + 13, 3, err), 0);
                CHECK(tb->blocks[0] == ta->blocks[0]);  /* the full block is still shared */
                CHECK(tb->blocks[1] != ta->blocks[1]);  /* the written one was copied */
                CHECK_EQ_INT(a.pool->ref[ta->blocks[1]], 1);
                if (extend(&fresh_b, b_toks, 16))
                    CHECK_MSG(same_logits(b.logits, fresh_b.seq.logits, V), "the fork's logits differ");
                if (extend(&a, a_toks + 20, 2) && extend(&fresh_a, a_toks, 22))
                    CHECK_MSG(same_logits(a.seq.logits, fresh_a.seq.logits, V), "the original's logits differ");
            }
            Sequence whole;
            CHECK_EQ_INT(seq_fork(&whole, &a.seq, a.seq.n_tokens, err), 0); /* all of it: its logits too */
            CHECK(same_logits(whole.logits, a.seq.logits, V));
            seq_free(&whole);
            CHECK_EQ_INT(seq_fork(&whole, &a.seq, 99, err), -1);
        }
        if (b.kv) seq_free(&b);
        int used, total;
        kv_pool_stats(a.pool, &used, &total);
        CHECK_EQ_INT(used, 3); /* a's 22 tokens: b's blocks all went back */
        run_close(&fresh_b);
        run_close(&fresh_a);
        run_close(&a);
    }
    backend_free(be);
    qwen3_free(&m);
}
