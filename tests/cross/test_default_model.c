/* The embedded default model: it loads in every chapter, and its greedy
 * continuations of a few prompts are the recorded golden ones, through every
 * chapter and cache mode, on the scalar and the default backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "run.h"
#include "util.h"

#define MODEL "models/default.gguf"
#define N_TOKENS 48
#define VOCAB 1285

/* Under a sanitizer the first 16 of the golden tokens: the modes without a
 * cache recompute every step, which a sanitized build makes the suite's
 * slowest part. */
static void check_golden(const char *backend_flags) {
    RunMode modes[16];
    int nm = run_modes(modes, 16), n = test_sanitized() ? 16 : N_TOKENS;
    for (int p = 1; p <= 3; p++) {
        char prompt[256], ids_path[256];
        snprintf(prompt, sizeof prompt, "tests/golden/default/p%d.txt", p);
        snprintf(ids_path, sizeof ids_path, "tests/golden/default/p%d.ids", p);
        int32_t want[N_TOKENS];
        int n_want = read_id_file(ids_path, want, N_TOKENS);
        if (n_want != N_TOKENS) return;
        for (int m = 0; m < nm; m++) {
            RunResult r;
            if (!run_generate(&modes[m], backend_flags, MODEL, prompt, n, VOCAB, &r)) continue;
            CHECK_MSG(r.n_generated == n && memcmp(r.generated, want, sizeof want[0] * (size_t)n) == 0,
                      "%s %s %s: prompt %d: the continuation differs from the golden one: \"%s\"", modes[m].chapter,
                      modes[m].flags, backend_flags, p, r.text);
            run_free(&r);
        }
    }
}

TEST(default_model_golden_scalar) { check_golden("--backend scalar"); }
TEST(default_model_golden_default_backend) { check_golden(""); }
