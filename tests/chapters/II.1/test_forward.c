/* Chapter II.1: the full-recompute forward pass against the float64 reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "harness.h"
#include "ref_forward.h"
#include "test_util.h"

static double max_abs_diff(const float *a, const double *b, int n, double *scale) {
    double d = 0, s = 0;
    for (int i = 0; i < n; i++) {
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    *scale = s;
    return d;
}

static void check_against_reference(const char *model, int n_tokens, uint32_t seed) {
    Qwen3Model m;
    if (!load_test_model(&m, model)) return;
    Backend *be = backend_scalar_create();
    int32_t *toks = malloc(sizeof(int32_t) * n_tokens);
    test_tokens(toks, n_tokens, m.cfg.vocab_size, seed);
    float *lg = malloc(sizeof(float) * m.cfg.vocab_size);
    double *ref = malloc(sizeof(double) * m.cfg.vocab_size);
    forward(&m, be, toks, n_tokens, lg);
    ref_forward(&m, toks, n_tokens, ref);
    double scale, d = max_abs_diff(lg, ref, m.cfg.vocab_size, &scale);
    CHECK_MSG(d <= 1e-4 * (1 + scale), "%s: max |logit - reference| = %g (largest logit %g)", model, d, scale);
    free(toks); free(lg); free(ref);
    backend_free(be);
    qwen3_free(&m);
}

TEST(II1_forward_matches_reference_tiny) { check_against_reference("tiny-f32", 9, 1); }
TEST(II1_forward_matches_reference_small_gqa) { check_against_reference("small-f32", 17, 2); }
TEST(II1_forward_matches_reference_untied) { check_against_reference("small-untied", 5, 3); }
TEST(II1_forward_matches_reference_q8_0) { check_against_reference("small-q8_0", 7, 4); }
TEST(II1_forward_matches_reference_f16) { check_against_reference("tiny-f16", 6, 5); }
TEST(II1_forward_matches_reference_bf16) { check_against_reference("tiny-bf16", 6, 6); }
TEST(II1_forward_single_token) { check_against_reference("tiny-f32", 1, 7); }

/* The last position's logits do not depend on how many positions came in one call. */
TEST(II1_forward_is_deterministic) {
    Qwen3Model m;
    if (!load_test_model(&m, "small-f32")) return;
    Backend *be = backend_scalar_create();
    int32_t toks[12];
    test_tokens(toks, 12, m.cfg.vocab_size, 11);
    size_t bytes = sizeof(float) * m.cfg.vocab_size;
    float *a = malloc(bytes), *b = malloc(bytes);
    forward(&m, be, toks, 12, a);
    forward(&m, be, toks, 12, b);
    CHECK_SAME_FLOATS(a, b, (size_t)m.cfg.vocab_size, "two forwards of the same tokens");
    free(a); free(b);
    backend_free(be);
    qwen3_free(&m);
}
