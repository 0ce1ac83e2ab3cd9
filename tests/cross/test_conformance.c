/* Conformance with llama.cpp on the reference models in ../shared: prompt
 * token ids, 32 greedy tokens and the first step's logits, through every
 * chapter and cache mode. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "run.h"
#include "util.h"

static const char *PROMPTS[] = {"p1_plain", "p2_chatml", "p3_unicode_digits", "p4_code", "p5_chat_think", "p6_repeat"};

typedef struct {
    int32_t generated[64];
    int n_generated;
    float *first_logits;
    long vocab;
} Golden;

static bool load_golden(const char *dir, const char *prompt, Golden *g) {
    char path[1024], err[ERR_MAX];
    size_t len;
    snprintf(path, sizeof path, "%s/%s.json", dir, prompt);
    char *text = file_read_all(path, &len, err);
    JsonValue *j = text ? json_parse(text, len, err) : NULL;
    free(text);
    if (!j) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    const JsonValue *gen = json_get(j, "generated");
    g->n_generated = 0;
    for (size_t i = 0; gen && i < gen->n_items && i < 64; i++) g->generated[g->n_generated++] = (int32_t)gen->items[i].number;
    const JsonValue *nv = json_get(j, "n_vocab");
    g->vocab = nv ? (long)nv->number : 0;
    json_free(j);
    snprintf(path, sizeof path, "%s/%s.first_logits.f32", dir, prompt);
    g->first_logits = (float *)file_read_all(path, &len, err);
    if (!g->first_logits || (long)(len / 4) != g->vocab) {
        test_fail(__FILE__, __LINE__, "bad golden logits %s", path);
        return false;
    }
    return true;
}

static void check_model(const char *name, double logit_tol) {
    const char *shared = test_shared_dir();
    if (!shared) SKIP("../shared absent: conformance with llama.cpp not checked");
    char model[512], gdir[512];
    snprintf(model, sizeof model, "%s/reference/models/%s.gguf", shared, name);
    snprintf(gdir, sizeof gdir, "%s/reference/golden/%s", shared, name);
    RunMode modes[16];
    int nm = run_modes(modes, 16);
    for (int p = 0; p < 6; p++) {
        Golden g;
        if (!load_golden(gdir, PROMPTS[p], &g)) return;
        char path[1024];
        int32_t want_prompt[4096];
        snprintf(path, sizeof path, "%s/%s.tokenize.txt", gdir, PROMPTS[p]);
        int n_want = read_id_file(path, want_prompt, 4096);
        char prompt_file[1024];
        snprintf(prompt_file, sizeof prompt_file, "%s/reference/golden/prompts/%s.txt", shared, PROMPTS[p]);
        for (int m = 0; m < nm; m++) {
            RunResult r;
            if (!run_generate(&modes[m], "--ignore-eos", model, prompt_file, g.n_generated, (int)g.vocab, &r)) continue;
            const char *who = modes[m].flags[0] ? modes[m].flags : "(no cache)";
            CHECK_MSG(r.n_prompt == n_want && memcmp(r.prompt, want_prompt, sizeof(int32_t) * (size_t)n_want) == 0,
                      "%s %s %s %s: prompt token ids differ from llama.cpp", name, PROMPTS[p], modes[m].chapter, who);
            CHECK_MSG(r.n_generated == g.n_generated &&
                          memcmp(r.generated, g.generated, sizeof(int32_t) * (size_t)g.n_generated) == 0,
                      "%s %s %s %s: greedy tokens differ from llama.cpp", name, PROMPTS[p], modes[m].chapter, who);
            double worst = 0;
            for (long i = 0; r.n_logit_rows > 0 && i < g.vocab; i++) {
                double d = fabs((double)r.logits[i] - g.first_logits[i]);
                if (d > worst) worst = d;
            }
            CHECK_MSG(r.n_logit_rows > 0 && worst <= logit_tol,
                      "%s %s %s %s: first-step logits differ from llama.cpp by %g (tolerance %g)", name, PROMPTS[p],
                      modes[m].chapter, who, worst, logit_tol);
            run_free(&r);
        }
        free(g.first_logits);
    }
}

TEST(conformance_tiny_a_f32) { check_model("tiny-a", 1e-3); }
TEST(conformance_tiny_b_f32) { check_model("tiny-b", 1e-3); }
TEST(conformance_tiny_b_q8_0) { check_model("tiny-b-q8_0", 1.0); }
