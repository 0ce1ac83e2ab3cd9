/* test_util.h: helpers shared by the chapter tests. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "harness.h"
#include "backend.h"
#include "qwen3.h"
#include "util.h"

/* Loads build/models/<name>.gguf (made by `make test`); fails the test if absent. */
static inline bool load_test_model(Qwen3Model *m, const char *name) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/%s.gguf", test_models_dir(), name);
    if (qwen3_load(m, path, err) != 0) {
        test_fail(__FILE__, __LINE__, "cannot load test model (run `make test` to make it): %s", err);
        return false;
    }
    return true;
}

/* n deterministic token ids in [0, vocab) from seed. */
static inline void test_tokens(int32_t *out, int n, int vocab, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        out[i] = (int32_t)((s >> 8) % (uint32_t)(vocab > 256 ? 256 + (vocab - 256) / 2 : vocab));
    }
}

#endif
