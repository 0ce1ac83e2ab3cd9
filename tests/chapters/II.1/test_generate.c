/* Chapter II.1: the greedy generation loop, in process. */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "generate.h"
#include "harness.h"
#include "ops.h"
#include "test_util.h"

static bool open_session(Session *s, const char *model, const char *prompt, const char *n) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/%s.gguf", test_models_dir(), model);
    char *argv[] = {"model-generate", "--quiet", "--ignore-eos", "--backend", "scalar", path, (char *)prompt, (char *)n};
    if (session_open(s, 8, argv, NULL, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    return true;
}

TEST(II1_generate_greedy_loop) {
    Session s;
    if (!open_session(&s, "small-f32", "Once upon a time", "6")) return;
    int n_prompt = s.n_prompt;
    generate(&s);
    CHECK_EQ_INT(s.metrics.n_steps, 6);
    CHECK_EQ_INT(s.n_tokens, n_prompt + 6);
    CHECK(s.metrics.steps[0].phase == PHASE_PREFILL);
    for (int i = 0; i < s.metrics.n_steps; i++) {
        CHECK_EQ_INT(s.metrics.steps[i].n_rows, n_prompt + i); /* every step reads the whole sequence */
        CHECK_EQ_INT(s.metrics.steps[i].token, s.tokens[n_prompt + i]);
        if (i > 0) CHECK(s.metrics.steps[i].phase == PHASE_DECODE);
    }
    /* Each token is the argmax of a full forward over what came before. */
    float *lg = malloc(sizeof(float) * s.model.cfg.vocab_size);
    for (int i = 0; i < 6; i++) {
        forward(&s.model, s.be, s.tokens, n_prompt + i, lg);
        CHECK_EQ_INT(argmax(lg, s.model.cfg.vocab_size, NULL), s.tokens[n_prompt + i]);
    }
    CHECK_STR(s.stop_reason, "max_new_tokens reached");
    free(lg);
    session_close(&s);
}

TEST(II1_generate_zero_tokens) {
    Session s;
    if (!open_session(&s, "tiny-f32", "Hi", "0")) return;
    generate(&s);
    CHECK_EQ_INT(s.metrics.n_steps, 0);
    session_close(&s);
}
