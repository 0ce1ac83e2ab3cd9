/* fuzz.h: what the fuzz targets share. Each tests/fuzz/fuzz_NAME.c defines
 * libFuzzer's entry point, LLVMFuzzerTestOneInput; `make fuzz` links it with
 * libFuzzer (clang), and `make test` links it with replay.c, which feeds it
 * every file of tests/fuzz/corpus/NAME and tests/fuzz/regress/NAME (the seeds
 * and the inputs that once crashed), with the normal compiler and, under
 * SANITIZE=1, with the sanitizers. See tools/fuzz.mk. */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf.h"
#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the code promises: its failure is a finding, like a crash. */
#define FUZZ_ASSERT(cond)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                             \
        }                                                                        \
    } while (0)

static inline bool fuzz_valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = utf8_check(s + i, n - i);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* The vocabulary the tokenizer and chat targets use: the one of a seed model
 * (a byte-level BPE vocabulary made by tools/mkmodel, with Qwen's special
 * tokens), loaded once; the fuzzers and the replay tests run from the top of
 * the repository. */
#ifndef FUZZ_VOCAB
#define FUZZ_VOCAB "tests/fuzz/corpus/gguf/f32-vocab512.gguf"
#endif

static inline const Tokenizer *fuzz_vocab(void) {
    static Tokenizer *tok;
    if (!tok) {
        static GgufFile g;
        char err[ERR_MAX];
        if (gguf_open(&g, FUZZ_VOCAB, err) || !(tok = tokenizer_load(&g, err))) {
            fprintf(stderr, "fuzz: cannot load the vocabulary: %s\n", err);
            exit(2);
        }
        gguf_close(&g);
    }
    return tok;
}

#endif
