/* Chapter II.2: both generation loops, in process. */
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "harness.h"
#include "test_util.h"

static bool open_session(Session *s, const char *model, const char *kv, const char *n) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/%s.gguf", test_models_dir(), model);
    char *argv[10] = {"model-generate", "--quiet", "--ignore-eos", "--backend", "scalar"};
    int argc = 5;
    if (kv) {
        argv[argc++] = "--kv";
        argv[argc++] = (char *)kv;
    }
    argv[argc++] = path;
    argv[argc++] = "Once upon a time";
    argv[argc++] = (char *)n;
    static const char *const kinds[] = {"basic", NULL};
    if (session_open(s, argc, argv, kinds, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    return true;
}

TEST(II2_generate_with_cache_matches_without) {
    Session a, b;
    if (!open_session(&a, "small-q8_0", "none", "10") || !open_session(&b, "small-q8_0", NULL, "10")) return;
    CHECK(a.opt.kv == NULL);
    CHECK_STR(b.opt.kv, "basic"); /* the chapter's lesson is its default */
    generate(&a);
    generate(&b);
    CHECK_EQ_INT(a.metrics.n_steps, 10);
    CHECK_EQ_INT(b.metrics.n_steps, 10);
    CHECK_EQ_INT(a.n_tokens, b.n_tokens);
    CHECK(memcmp(a.tokens, b.tokens, sizeof(int32_t) * (size_t)a.n_tokens) == 0);
    CHECK_EQ_INT(b.metrics.steps[0].n_rows, b.n_prompt); /* prefill reads the prompt */
    for (int i = 1; i < b.metrics.n_steps; i++) {
        CHECK_EQ_INT(b.metrics.steps[i].n_rows, 1); /* decode reads one token */
        CHECK(b.metrics.steps[i].phase == PHASE_DECODE);
    }
    session_close(&a);
    session_close(&b);
}

TEST(II2_generate_unknown_cache_kind_stops_with_error) {
    Session s;
    if (!open_session(&s, "tiny-f32", NULL, "3")) return;
    s.opt.kv = "paged"; /* the command line refuses it; the loop must too */
    generate(&s);
    CHECK_STR(s.stop_reason, "error");
    CHECK_EQ_INT(s.metrics.n_steps, 0);
    session_close(&s);
}

TEST(II2_generate_zero_tokens) {
    Session s;
    if (!open_session(&s, "tiny-f32", "basic", "0")) return;
    generate(&s);
    CHECK_EQ_INT(s.metrics.n_steps, 0);
    session_close(&s);
}
