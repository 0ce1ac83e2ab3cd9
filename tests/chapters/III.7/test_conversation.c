/* Chapter III.7: chat-repl's turn logic with the prefix cache. What a sync
 * rolls back stays in the tree, a later sync takes the longest prefix from
 * it, and the cache is still bitwise a fresh prefill of the rendering: after
 * /reset, the same message again prefills one token and gets the same reply. */
#include <stdlib.h>
#include <string.h>

#include "conversation.h"
#include "harness.h"
#include "test_util.h"

typedef struct {
    Qwen3Model model;
    Tokenizer *tok;
    Backend *be;
    KvPool *pool;
    RadixTree *tree;
    Conversation c;
} Fixture;

/* A conversation on a pool of 64 blocks of 4, with a prefix cache or not. */
static bool fx_open(Fixture *f, const char *model, bool prefix_cache, const char *system) {
    memset(f, 0, sizeof *f);
    char err[ERR_MAX] = "";
    if (!load_test_model(&f->model, model)) return false;
    f->tok = tokenizer_load(&f->model.file, err);
    f->be = backend_create("scalar", 1, err);
    f->pool = kv_pool_create(&f->model.cfg, 4, 64, err);
    KvCache *kv = f->pool ? kv_cache_create("paged", &f->model.cfg, f->pool, err) : NULL;
    bool ok = f->tok && f->be && kv && conv_init(&f->c, &f->model, f->be, kv, f->tok, 256, system, err) == 0;
    CHECK_MSG(ok, "%s", err);
    if (ok && prefix_cache) f->c.prefix = f->tree = radix_create(f->pool);
    return ok;
}

static void fx_close(Fixture *f) {
    if (f->c.seq.kv) conv_free(&f->c);
    radix_free(f->tree);
    if (f->pool) {
        int used, total;
        kv_pool_stats(f->pool, &used, &total);
        CHECK_EQ_INT(used, 0);
    }
    kv_pool_free(f->pool);
    tokenizer_free(f->tok);
    backend_free(f->be);
    qwen3_free(&f->model);
}

/* The conversation's logits equal a fresh prefill of its tokens, bit for bit. */
static bool logits_are_fresh(Fixture *f) {
    char err[ERR_MAX];
    Sequence s;
    const Sequence *c = &f->c.seq;
    KvCache *kv = kv_cache_create("basic", &f->model.cfg, NULL, err);
    if (seq_init(&s, &f->model, f->be, kv, 256, err) != 0 || seq_extend(&s, c->tokens, c->n_tokens, err) != 0) {
        test_fail(__FILE__, __LINE__, "fresh prefill: %s", err);
        return false;
    }
    bool same = memcmp(s.logits, c->logits, sizeof(float) * (size_t)f->model.cfg.vocab_size) == 0;
    seq_free(&s);
    return same;
}

/* conv_sync's arithmetic with or without the tree, and where the tree
 * holds more than the sequence: a rolled-back prefix comes back from it. */
TEST(III7_conv_sync_feeds_only_what_neither_cache_holds) {
    for (int with_tree = 0; with_tree < 2; with_tree++) {
        Fixture f;
        if (!fx_open(&f, "tiny-f32", with_tree, NULL)) {
            fx_close(&f);
            return;
        }
        int V = f.model.cfg.vocab_size;
        int32_t a[20], d[16];
        test_tokens(a, 20, V, 1);
        test_tokens(d, 16, V, 2);
        memcpy(d, a, 7 * sizeof *d);
        if (d[7] == a[7]) d[7] = (d[7] + 1) % V;
        SyncStats st;
        char err[ERR_MAX];
        CHECK(conv_sync(&f.c, a, 18, &st, err) == 0);
        CHECK(st.kept == 0 && st.rolled_back == 0 && st.fed == 18);
        CHECK(conv_sync(&f.c, d, 16, &st, err) == 0); /* agrees on 7: roll back 11, feed 9 */
        CHECK(st.kept == 7 && st.rolled_back == 11 && st.fed == 9);
        CHECK(logits_are_fresh(&f));
        CHECK(conv_sync(&f.c, d, 5, &st, err) == 0); /* a prefix: its last token again */
        CHECK(st.kept == 4 && st.rolled_back == 12 && st.fed == 1);
        CHECK(logits_are_fresh(&f));
        /* back to a: the sequence agrees on 5 tokens; the tree holds a's 4 full blocks */
        CHECK(conv_sync(&f.c, a, 20, &st, err) == 0);
        CHECK_EQ_INT(st.kept, with_tree ? 16 : 5);
        CHECK_EQ_INT(st.fed, with_tree ? 4 : 15);
        CHECK_EQ_INT(st.rolled_back, 0);
        CHECK_EQ_INT(f.c.seq.n_tokens, 20);
        CHECK(memcmp(f.c.seq.tokens, a, sizeof a) == 0);
        CHECK(logits_are_fresh(&f));
        if (with_tree) {
            RadixStats rs = radix_stats(f.tree);
            CHECK_EQ_INT(rs.hits, 1);
            CHECK_EQ_INT(rs.cached_tokens, 16);
        }
        fx_close(&f);
    }
}

/* A turn, /reset, the same turn: the prompt comes from the prefix cache
 * (one token prefilled), the reply is the same, the cache is the rendering. */
TEST(III7_conv_sync_after_reset_reads_the_prefix_cache) {
    for (int think = 0; think < 2; think++) {
        Fixture f;
        if (!fx_open(&f, "small-q8_0", true, "You are a storyteller.")) {
            fx_close(&f);
            return;
        }
        f.c.enable_thinking = think;
        char err[ERR_MAX];
        SyncStats sys;
        CHECK(conv_sync_history(&f.c, &sys, err) == 0);
        SamplerParams p = sampler_params_default();
        p.temperature = 0.8f, p.top_k = 40, p.seed = 7;
        TurnStats st[2];
        char *reply[2] = {NULL, NULL};
        for (int t = 0; t < 2; t++) {
            Sampler *s = sampler_create(&p, f.model.cfg.vocab_size);
            CHECK_MSG(conv_turn(&f.c, "Tell me a story about a fox.", s, 12, NULL, NULL, NULL, &st[t], err) == 0, "%s",
                      err);
            sampler_free(s);
            reply[t] = xstrdup(f.c.msgs[f.c.n_msgs - 1].content);
            int n;
            int32_t *want = conv_history_tokens(&f.c, &n);
            CHECK(f.c.seq.n_tokens == n && memcmp(f.c.seq.tokens, want, sizeof(int32_t) * (size_t)n) == 0);
            free(want);
            CHECK(logits_are_fresh(&f));
            CHECK_MSG(conv_verify(&f.c, kv_cache_create("basic", &f.model.cfg, NULL, err), err) == 1, "%s", err);
            SyncStats rs;
            CHECK(conv_reset(&f.c, &rs, err) == 0);
            CHECK_EQ_INT(f.c.seq.n_tokens, sys.fed);
        }
        CHECK(st[0].prompt.fed > 4);
        CHECK_EQ_INT(st[1].prompt.fed, 1); /* all but the last token from the prefix cache */
        CHECK_EQ_INT(st[1].prompt.kept, st[0].prompt.kept + st[0].prompt.fed - 1);
        CHECK_STR(reply[1], reply[0]);
        CHECK_EQ_INT(st[1].generated, st[0].generated);
        CHECK(st[1].answer.fed <= st[0].answer.fed);
        free(reply[0]);
        free(reply[1]);
        fx_close(&f);
    }
}
