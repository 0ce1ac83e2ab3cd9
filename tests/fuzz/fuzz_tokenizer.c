/* fuzz_tokenizer.c: the tokenizer on any bytes, with a vocabulary made by
 * tools/mkmodel. The first byte picks what is fuzzed:
 *   0, 1  encode the rest (1: special-token text becomes control tokens); the
 *         ids must be in range and, for valid UTF-8, decode to the same bytes
 *   2     decode the rest as int32 ids (any value, in range or not), whole
 *         and token by token through a UTF-8 stream, which must give valid UTF-8
 *   3     stream the rest through Utf8Stream in chunks whose sizes the bytes
 *         choose: the output must not depend on where the chunks were cut */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"

static void fuzz_encode(const Tokenizer *t, const char *text, size_t n, bool special) {
    int32_t *ids = NULL;
    int n_ids = 0;
    char err[ERR_MAX];
    FUZZ_ASSERT(tokenizer_encode(t, text, n, special, &ids, &n_ids, err) == 0);
    for (int i = 0; i < n_ids; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < tokenizer_vocab_size(t));
    size_t len;
    char *back = tokenizer_decode(t, ids, n_ids, true, &len);
    if (fuzz_valid_utf8(text, n)) FUZZ_ASSERT(len == n && memcmp(back, text, n) == 0);
    free(back);
    free(ids);
}

static void fuzz_decode(const Tokenizer *t, const uint8_t *data, size_t size) {
    int n = (int)(size / 4);
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    memcpy(ids, data, (size_t)n * 4);
    size_t len;
    free(tokenizer_decode(t, ids, n, (size & 1) != 0, &len));
    int cap = tokenizer_max_token_bytes(t);
    char *piece = malloc((size_t)cap + 1), *out = malloc(UTF8_STREAM_OUT_MAX(cap));
    Utf8Stream s;
    utf8_stream_init(&s);
    for (int i = 0; i < n; i++) {
        int k = tokenizer_token_bytes(t, ids[i], true, piece, cap);
        FUZZ_ASSERT(k >= 0 && k <= cap);
        FUZZ_ASSERT(tokenizer_token_bytes(t, ids[i], true, piece, 0) == (k ? -k : 0));
        size_t m = utf8_stream_push(&s, piece, (size_t)k, out);
        FUZZ_ASSERT(m <= UTF8_STREAM_OUT_MAX(k) && fuzz_valid_utf8(out, m));
    }
    size_t m = utf8_stream_flush(&s, out);
    FUZZ_ASSERT(fuzz_valid_utf8(out, m));
    free(piece);
    free(out);
    free(ids);
}

/* The whole input at once, then in chunks: the same characters. */
static void fuzz_stream(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    char *whole = malloc(UTF8_STREAM_OUT_MAX(size) + UTF8_STREAM_OUT_MAX(0));
    char *cut = malloc(UTF8_STREAM_OUT_MAX(size) + UTF8_STREAM_OUT_MAX(0) + 3 * size);
    Utf8Stream s;
    utf8_stream_init(&s);
    size_t nw = utf8_stream_push(&s, text, size, whole);
    nw += utf8_stream_flush(&s, whole + nw);
    size_t nc = 0;
    for (size_t i = 0; i < size;) {
        size_t k = 1 + data[i] % 5; /* chunks of 1..5 bytes */
        if (k > size - i) k = size - i;
        nc += utf8_stream_push(&s, text + i, k, cut + nc);
        i += k;
    }
    nc += utf8_stream_flush(&s, cut + nc);
    FUZZ_ASSERT(nw == nc && memcmp(whole, cut, nw) == 0 && fuzz_valid_utf8(whole, nw));
    free(whole);
    free(cut);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const Tokenizer *t = fuzz_vocab();
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: fuzz_encode(t, (const char *)rest, n, false); break;
    case 1: fuzz_encode(t, (const char *)rest, n, true); break;
    case 2: fuzz_decode(t, rest, n); break;
    default: fuzz_stream(rest, n); break;
    }
    return 0;
}
