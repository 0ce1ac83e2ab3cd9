/* Chapter II.2: the basic KV cache, and prefill + decode against full recompute. */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "harness.h"
#include "kv_cache.h"
#include "ops.h"
#include "test_util.h"

static Qwen3Config small_config(void) {
    Qwen3Config c = {0};
    c.n_layers = 2;
    c.kv_dim = 4;
    return c;
}

static void fill_row(float *r, int n, float base) {
    for (int i = 0; i < n; i++) r[i] = base + (float)i;
}

TEST(II2_basic_cache_install_append_view) {
    Qwen3Config c = small_config();
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create("basic", &c, err);
    CHECK(kv != NULL);
    if (!kv) return;
    CHECK_STR(kv->kind, "basic");
    CHECK_EQ_INT(kv->seq_len(kv), 0);
    float k[8], v[8];
    fill_row(k, 8, 0);
    fill_row(v, 8, 100);
    for (int l = 0; l < 2; l++) kv->install(kv, l, k, v, 2);
    CHECK_EQ_INT(kv->seq_len(kv), 2);
    float k2[4], v2[4];
    fill_row(k2, 4, 50);
    fill_row(v2, 4, 150);
    kv->append(kv, 0, k2, v2);
    CHECK_EQ_INT(kv->seq_len(kv), 2); /* only layer 0 has the third row so far */
    kv->append(kv, 1, k2, v2);
    CHECK_EQ_INT(kv->seq_len(kv), 3);
    KvSpan s[1];
    CHECK_EQ_INT(kv->view(kv, 1, s, 1), 1);
    CHECK_EQ_INT(s[0].n, 3);
    CHECK(memcmp(s[0].k, k, sizeof k) == 0);
    CHECK(memcmp(s[0].k + 8, k2, sizeof k2) == 0);
    CHECK(memcmp(s[0].v + 8, v2, sizeof v2) == 0);
    kv_cache_free(kv);
}

TEST(II2_basic_cache_snapshot_restore) {
    Qwen3Config c = small_config();
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create("basic", &c, err);
    float k[4], v[4];
    fill_row(k, 4, 1);
    fill_row(v, 4, 2);
    for (int l = 0; l < 2; l++) kv->append(kv, l, k, v);
    KvSnapshot *snap = kv->snapshot(kv);
    fill_row(k, 4, 9);
    for (int l = 0; l < 2; l++) kv->append(kv, l, k, v);
    CHECK_EQ_INT(kv->seq_len(kv), 2);
    kv->restore(kv, snap);
    CHECK_EQ_INT(kv->seq_len(kv), 1);
    KvSpan s[1];
    kv->view(kv, 0, s, 1);
    CHECK(s[0].k[0] == 1.0f);
    kv->snapshot_free(snap);
    kv_cache_free(kv);
}

TEST(II2_unknown_cache_kind_is_an_error) {
    Qwen3Config c = small_config();
    char err[ERR_MAX] = "";
    CHECK(kv_cache_create("paged", &c, err) == NULL);
    CHECK(strstr(err, "paged") != NULL && strstr(err, "basic") != NULL);
}

/* Runs prefill then decode for `steps` greedy tokens and compares the logits
 * of each step, bit for bit, with a full recompute at the steps in check[]. */
static void check_decode_matches_full(const char *model, int n_prompt, int steps, const int *check, int n_check) {
    Qwen3Model m;
    if (!load_test_model(&m, model)) return;
    Backend *be = backend_scalar_create();
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create("basic", &m.cfg, err);
    int V = m.cfg.vocab_size;
    int32_t *toks = malloc(sizeof(int32_t) * (n_prompt + steps + 1));
    test_tokens(toks, n_prompt, V, 42);
    float *lg = malloc(sizeof(float) * V), *full = malloc(sizeof(float) * V);
    forward_prefill_with_kv_cache(&m, be, kv, toks, n_prompt, lg);
    int n = n_prompt, c = 0;
    for (int step = 0; step <= steps; step++) {
        if (c < n_check && check[c] == step) {
            forward(&m, be, toks, n, full);
            if (!CHECK_SAME_FLOATS(lg, full, (size_t)V, "%s: step %d: decode logits differ from full recompute",
                                   model, step))
                break; /* the first differing step is the one to look at */
            c++;
        }
        if (step == steps) break;
        toks[n] = argmax(lg, V, NULL);
        n++;
        CHECK(forward_decode_with_kv_cache(&m, be, kv, toks[n - 1], n - 1, lg, err) == 0);
    }
    CHECK_EQ_INT(kv->seq_len(kv), n);
    free(toks); free(lg); free(full);
    kv_cache_free(kv);
    backend_free(be);
    qwen3_free(&m);
}

TEST(II2_decode_matches_full_recompute_every_step) {
    int check[16];
    for (int i = 0; i < 16; i++) check[i] = i;
    check_decode_matches_full("tiny-f32", 7, 15, check, 16);
    check_decode_matches_full("small-q8_0", 4, 15, check, 16);
    check_decode_matches_full("small-untied", 1, 15, check, 16);
}

TEST(II2_long_generation_keeps_positions) {
    int check[] = {0, 257, 1100};
    check_decode_matches_full("tiny-f32", 3, 1100, check, 3);
}

TEST(II2_decode_at_wrong_position_is_an_error) {
    Qwen3Model m;
    if (!load_test_model(&m, "tiny-f32")) return;
    Backend *be = backend_scalar_create();
    char err[ERR_MAX] = "";
    KvCache *kv = kv_cache_create("basic", &m.cfg, err);
    float *lg = malloc(sizeof(float) * m.cfg.vocab_size);
    int32_t t[2] = {5, 6};
    forward_prefill_with_kv_cache(&m, be, kv, t, 2, lg);
    CHECK(forward_decode_with_kv_cache(&m, be, kv, 7, 5, lg, err) != 0);
    CHECK(strstr(err, "position 5") != NULL);
    free(lg);
    kv_cache_free(kv);
    backend_free(be);
    qwen3_free(&m);
}
