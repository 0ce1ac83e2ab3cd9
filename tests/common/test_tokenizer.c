/* test_tokenizer.c: the BPE tokenizer (common/text/tokenizer.c).
 *
 * The first tests build a small vocabulary in memory: the 256 byte tokens in
 * GPT-2 order, a few merges and some special tokens. The conformance tests at
 * the end use ../shared/reference (llama.cpp's test vectors and the golden
 * prompt tokenizations) and are skipped when it is absent. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "harness.h"
#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

/* ---- A small vocabulary ------------------------------------------------------------ */

#define G "\xC4\xA0" /* Ġ: the space byte in byte-level form */
#define C "\xC4\x8A" /* Ċ: "\n" */

static const char *const small_merges[] = {
    "h e", "l l", "he ll", "hell o", G " hello", /* 0-4: hello, " hello" */
    "a a", "b c", "a b",                         /* 5-7: ties and rank order */
    G " " G, C " " C, "' s",                     /* 8-10 */
    "x y", "xy z",                               /* 11-12: "xy" is not a token */
    "Q@ R",                                      /* 13: a part that never occurs */
};

static const char *const small_words[] = {
    "he", "ll", "hell", "hello", G "hello", "aa", "bc", "ab", G G, C C, "'s", "xyz",
};

static const struct {
    const char *text;
    int32_t type;
} small_specials[] = {
    {"<|endoftext|>", TOKEN_CONTROL}, {"<|im_start|>", TOKEN_CONTROL}, {"<|im_end|>", TOKEN_CONTROL},
    {"<think>", TOKEN_USER_DEFINED},  {"</think>", TOKEN_USER_DEFINED}, {"[PAD9]", TOKEN_UNUSED},
    {"<|ab|>", TOKEN_CONTROL},        {"|ab|>ZZ", TOKEN_CONTROL},
};

#define N_WORDS (int)(sizeof small_words / sizeof *small_words)
#define N_SPECIALS (int)(sizeof small_specials / sizeof *small_specials)
#define N_SMALL (256 + N_WORDS + N_SPECIALS)

static char byte_text[256][4];

/* Builds the vocabulary: ids 0..255 are the bytes in the order of the real Qwen
 * vocabulary (printable bytes first), then the words, then the specials. */
static Tokenizer *small_tokenizer(void) {
    const char *tokens[N_SMALL];
    int32_t types[N_SMALL];
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++) {
            bool printable = unicode_byte_to_cp((uint8_t)b) == (uint32_t)b;
            if (printable != (pass == 0)) continue;
            byte_text[b][utf8_encode(unicode_byte_to_cp((uint8_t)b), byte_text[b])] = '\0';
            types[n] = TOKEN_NORMAL;
            tokens[n++] = byte_text[b];
        }
    for (int i = 0; i < N_WORDS; i++) {
        types[n] = TOKEN_NORMAL;
        tokens[n++] = small_words[i];
    }
    for (int i = 0; i < N_SPECIALS; i++) {
        types[n] = small_specials[i].type;
        tokens[n++] = small_specials[i].text;
    }
    char err[ERR_MAX] = "";
    Tokenizer *t = tokenizer_build(tokens, types, n, small_merges,
                                   (int)(sizeof small_merges / sizeof *small_merges), err);
    CHECK_MSG(t != NULL, "tokenizer_build: %s", err);
    return t;
}

/* The id of a token text; fails the test if missing. */
static int32_t id_of(const Tokenizer *t, const char *text) {
    int id = tokenizer_find(t, text);
    CHECK_MSG(id >= 0, "token '%s' missing", text);
    return id;
}

/* Encodes text and compares with the ids of the given token texts. */
static void check_encode(const Tokenizer *t, const char *text, size_t len, bool parse_special,
                         const char *const *want, int n_want) {
    int32_t *ids;
    int n;
    char err[ERR_MAX] = "";
    CHECK_EQ_INT(tokenizer_encode(t, text, len, parse_special, &ids, &n, err), 0);
    bool same = n == n_want;
    for (int i = 0; same && i < n; i++) same = ids[i] == tokenizer_find(t, want[i]);
    if (!same) {
        char got[512] = "";
        for (int i = 0; i < n && strlen(got) < 400; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s[%s]", i ? " " : "",
                     tokenizer_token_text(t, ids[i]));
        test_fail(__FILE__, __LINE__, "encode(\"%s\") gave %d tokens: %s", text, n, got);
    }
    free(ids);
}

#define CHECK_ENCODE(t, text, special, ...)                                          \
    do {                                                                             \
        const char *const want_[] = {__VA_ARGS__};                                   \
        check_encode(t, text, strlen(text), special, want_, sizeof want_ / sizeof *want_); \
    } while (0)

/* ---- Pre-tokenizer ---------------------------------------------------------------------- */

/* The pieces of text joined by '|'. */
static char *pieces_of(const char *text) {
    size_t *ends;
    int n = tokenizer_pretokenize(text, strlen(text), &ends);
    Buf b = {0};
    buf_append(&b, "", 0);
    for (int i = 0, start = 0; i < n; start = (int)ends[i++]) {
        if (i) buf_puts(&b, "|");
        buf_append(&b, text + start, ends[i] - (size_t)start);
    }
    free(ends);
    return b.data;
}

#define CHECK_PIECES(text, want)        \
    do {                                \
        char *got_ = pieces_of(text);   \
        CHECK_STR(got_, want);          \
        free(got_);                     \
    } while (0)

TEST(tokenizer_pretok_words_and_digits) {
    CHECK_PIECES("", "");
    CHECK_PIECES("Hello world", "Hello| world");
    CHECK_PIECES("  Hello", " | Hello");
    CHECK_PIECES("ied 4 \xC2\xBD months", "ied| |4| |\xC2\xBD| months"); /* ½ is a number */
    CHECK_PIECES("333", "3|3|3");
    CHECK_PIECES("3.14", "3|.|1|4");
    CHECK_PIECES("w048 7tuijk", "w|0|4|8| |7|tuijk");
    CHECK_PIECES("na\xC3\xAFve caf\xC3\xA9", "na\xC3\xAFve| caf\xC3\xA9");
    CHECK_PIECES("\xC2\xBFQu\xC3\xA9?", "\xC2\xBFQu\xC3\xA9|?"); /* ¿ joins the word */
    CHECK_PIECES("(Hello", "(Hello");
    CHECK_PIECES("((Hello", "((|Hello");
    CHECK_PIECES("e\xCC\x81t\xC3\xA9", "e|\xCC\x81t\xC3\xA9"); /* a combining mark is not a letter */
    CHECK_PIECES("\xE4\xB8\x8A\xE6\xB5\xB7" "abc", "\xE4\xB8\x8A\xE6\xB5\xB7" "abc");
}

TEST(tokenizer_pretok_contractions) {
    CHECK_PIECES("I'm sure they'll", "I|'m| sure| they|'ll");
    CHECK_PIECES("YOU'RE don't", "YOU|'RE| don|'t");
    CHECK_PIECES("We'Ve a'lL 'D", "We|'Ve| a|'lL| '|D"); /* " '" is punctuation first */
    CHECK_PIECES("' era", "'| era");
    CHECK_PIECES("'hello", "'hello");
    CHECK_PIECES("it's'", "it|'s|'");
}

TEST(tokenizer_pretok_punctuation_and_space) {
    CHECK_PIECES("\n =", "\n| =");
    CHECK_PIECES("Hello!!!\n\nWorld", "Hello|!!!\n\n|World");
    CHECK_PIECES(" ( x", " (| x");
    CHECK_PIECES("a \t=", "a| |\t|=");
    CHECK_PIECES("x  \n  y", "x|  \n| | y");
    CHECK_PIECES("end  ", "end|  ");
    CHECK_PIECES("a\t\tb", "a|\t|\tb");
    CHECK_PIECES("a  b", "a| | b");
    CHECK_PIECES("\r\n\r\nX", "\r\n\r\n|X");
    CHECK_PIECES("    Hello\n    Hello", "   | Hello|\n|   | Hello");
    CHECK_PIECES("x\xC2\xA0\xC2\xA0y", "x|\xC2\xA0|\xC2\xA0y"); /* NBSP is white space */
    CHECK_PIECES("a\xE3\x80\x80" "b", "a|\xE3\x80\x80" "b");    /* so is U+3000 */
}

TEST(tokenizer_pretok_invalid_utf8) {
    /* each bad byte is one U+FFFD, an "other" character */
    CHECK_PIECES("ab\xFF" "cd", "ab|\xFF" "cd");
    CHECK_PIECES("\x80\x80 x", "\x80\x80| x");
    CHECK_PIECES("a\xE2\x82", "a|\xE2\x82");
}

/* ---- BPE and specials on the small vocabulary --------------------------------------------------- */

TEST(tokenizer_build_basics) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    CHECK_EQ_INT(tokenizer_vocab_size(t), N_SMALL);
    CHECK_EQ_INT(tokenizer_find(t, G), 220); /* the same ids as in Qwen */
    CHECK_EQ_INT(tokenizer_find(t, C), 198);
    CHECK_EQ_INT(tokenizer_find(t, "!"), 0);
    CHECK_EQ_INT(tokenizer_find(t, "xy"), -1); /* a merge result, but not a token */
    CHECK_EQ_INT(tokenizer_find(t, "nope"), -1);
    CHECK_STR(tokenizer_token_text(t, 0), "!");
    CHECK(tokenizer_token_text(t, N_SMALL) == NULL);
    CHECK_EQ_INT(tokenizer_token_type(t, id_of(t, "<think>")), TOKEN_USER_DEFINED);
    CHECK_EQ_INT(tokenizer_eos(t), -1);
    CHECK_EQ_INT(tokenizer_max_token_bytes(t), 13); /* <|endoftext|> */
    tokenizer_free(t);
}

TEST(tokenizer_bpe_merges) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    CHECK_ENCODE(t, "hello", false, "hello");
    CHECK_ENCODE(t, " hello", false, G "hello");
    CHECK_ENCODE(t, "hell", false, "hell");
    CHECK_ENCODE(t, "helo", false, "he", "l", "o");
    CHECK_ENCODE(t, "  hello", false, G, G "hello");
    CHECK_ENCODE(t, "aaa", false, "aa", "a");       /* equal ranks: leftmost first */
    CHECK_ENCODE(t, "aaaaa", false, "aa", "aa", "a");
    CHECK_ENCODE(t, "abc", false, "a", "bc");       /* lower rank first, wherever it is */
    CHECK_ENCODE(t, "abab", false, "ab", "ab");
    CHECK_ENCODE(t, "xyz", false, "xyz");
    CHECK_ENCODE(t, "xy", false, "x", "y");         /* a non-token symbol comes out as bytes */
    CHECK_ENCODE(t, "  ", false, G G);
    CHECK_ENCODE(t, "\n\n", false, C C);
    CHECK_ENCODE(t, "it's", false, "i", "t", "'s");
    CHECK_ENCODE(t, "a\t", false, "a", "\xC4\x89");
    tokenizer_free(t);
}

TEST(tokenizer_special_tokens) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    CHECK_ENCODE(t, "<|im_start|>hello<|im_end|>", true, "<|im_start|>", "hello", "<|im_end|>");
    /* without parse_special, control tokens are text... */
    CHECK_ENCODE(t, "<|im_end|>", false, "<", "|", "i", "m", "_", "e", "n", "d", "|", ">");
    /* ...but user-defined ones are still split out */
    CHECK_ENCODE(t, "<think>hello</think>", false, "<think>", "hello", "</think>");
    CHECK_ENCODE(t, "[PAD9]", true, "[", "P", "A", "D", "9", "]"); /* UNUSED: never special */
    /* longest first: "|ab|>ZZ" is cut before "<|ab|>" is looked for */
    CHECK_ENCODE(t, "<|ab|>ZZ", true, "<", "|ab|>ZZ");
    CHECK_ENCODE(t, "<|ab|>Z", true, "<|ab|>", "Z");
    CHECK_ENCODE(t, "<|im_start|><|im_start|>", true, "<|im_start|>", "<|im_start|>");
    CHECK(tokenizer_is_eog(t, id_of(t, "<|im_end|>")));
    CHECK(tokenizer_is_eog(t, id_of(t, "<|endoftext|>")));
    CHECK(!tokenizer_is_eog(t, id_of(t, "<|im_start|>")));
    CHECK(!tokenizer_is_eog(t, -1));
    tokenizer_free(t);
}

TEST(tokenizer_token_bytes_by_type) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    char buf[64];
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, G "hello"), false, buf, 64), 6);
    CHECK(memcmp(buf, " hello", 6) == 0);
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, C), false, buf, 64), 1);
    CHECK_EQ_INT(buf[0], '\n');
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, "<|im_end|>"), false, buf, 64), 0);
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, "<|im_end|>"), true, buf, 64), 10);
    CHECK(memcmp(buf, "<|im_end|>", 10) == 0);
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, "<think>"), false, buf, 64), 7);
    CHECK(memcmp(buf, "<think>", 7) == 0);
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, "[PAD9]"), true, buf, 64), 0);
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, G "hello"), false, buf, 3), -6);
    CHECK_EQ_INT(tokenizer_token_bytes(t, -1, true, buf, 64), 0);
    CHECK_EQ_INT(tokenizer_token_bytes(t, N_SMALL, true, buf, 64), 0);
    /* byte tokens of a split character: the bytes themselves */
    CHECK_EQ_INT(tokenizer_token_bytes(t, id_of(t, byte_text[0xF0]), false, buf, 64), 1);
    CHECK_EQ_INT((uint8_t)buf[0], 0xF0);
    tokenizer_free(t);
}

/* Encodes then decodes; the text must come back (as U+FFFD per invalid byte). */
static void check_round_trip(const Tokenizer *t, const char *text, size_t len, bool parse_special) {
    int32_t *ids;
    int n;
    tokenizer_encode(t, text, len, parse_special, &ids, &n, NULL);
    size_t got_len;
    char *got = tokenizer_decode(t, ids, n, true, &got_len);
    size_t n_cp;
    uint32_t *cp = utf8_decode_all(text, len, &n_cp);
    char *want = malloc(4 * n_cp + 1);
    size_t w = 0;
    for (size_t i = 0; i < n_cp; i++) w += (size_t)utf8_encode(cp[i], want + w);
    CHECK_MSG(got_len == w && memcmp(got, want, w) == 0, "round trip of \"%.*s\" failed", (int)len, text);
    free(cp);
    free(want);
    free(got);
    free(ids);
}

TEST(tokenizer_round_trip) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    const char *texts[] = {
        "hello world", "  multiple   spaces\tand\ttabs\r\nCRLF\n\n\nend  ",
        "I'm sure they'll say it's 100% done", "\xF0\x9F\xA6\x99 llama \xE2\x80\x94 caf\xC3\xA9",
        "<|im_start|>user\nhi<|im_end|>\n<think>\n\n</think>", "xyzxyxyz aaa abc",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        check_round_trip(t, texts[i], strlen(texts[i]), true);
        check_round_trip(t, texts[i], strlen(texts[i]), false);
    }
    tokenizer_free(t);
}

/* Random byte strings, valid or not: never a crash, and each bad byte comes back as U+FFFD. */
TEST(tokenizer_random_bytes) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    static const char pool[] = "ab he'lo xyz\n\t\r3\xC2\xBD\xE2\x82\xAC\xF0\x9F\xA6\x99\x80\xFF\xC0<|>think/";
    uint32_t seed = 7;
    for (int trial = 0; trial < 500 && !test_failed_now(); trial++) {
        char s[64];
        size_t n = (size_t)(trial % 64);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = pool[(seed >> 16) % (sizeof pool - 1)];
        }
        check_round_trip(t, s, n, trial % 2 == 0);
    }
    tokenizer_free(t);
}

TEST(tokenizer_invalid_utf8) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    /* U+FFFD is "other" and joins the following word; its bytes are byte tokens */
    CHECK_ENCODE(t, "a\xFF" "b", false, "a", byte_text[0xEF], byte_text[0xBF], byte_text[0xBD], "b");
    CHECK_ENCODE(t, "\xE2\x82", false, byte_text[0xEF], byte_text[0xBF], byte_text[0xBD],
                 byte_text[0xEF], byte_text[0xBF], byte_text[0xBD]);
    tokenizer_free(t);
}

/* One huge piece: merged right (the heap-based loop keeps it fast; timings belong in make bench). */
TEST(tokenizer_long_piece) {
    Tokenizer *t = small_tokenizer();
    if (!t) return;
    size_t n = 400000;
    char *s = malloc(n);
    memset(s, 'a', n);
    int32_t *ids;
    int n_ids;
    tokenizer_encode(t, s, n, false, &ids, &n_ids, NULL);
    CHECK_EQ_INT(n_ids, (int)(n / 2));
    CHECK(n_ids > 0 && ids[0] == tokenizer_find(t, "aa"));
    free(ids);
    free(s);
    tokenizer_free(t);
}

TEST(tokenizer_build_errors) {
    const char *tokens[] = {"a", "b"};
    const char *bad[] = {"ab"};
    char err[ERR_MAX] = "";
    CHECK(tokenizer_build(tokens, NULL, 2, bad, 1, err) == NULL);
    CHECK_MSG(strstr(err, "merges[0]") != NULL, "err: %s", err);
    CHECK(tokenizer_build(tokens, NULL, 0, NULL, 0, err) == NULL);
    Tokenizer *t = tokenizer_build(tokens, NULL, 2, NULL, 0, err); /* no merges: bytes only */
    CHECK(t != NULL);
    if (t) {
        CHECK_ENCODE(t, "ab", false, "a", "b");
        CHECK_ENCODE(t, "abc", false, "a", "b"); /* 'c' is in no token: dropped, as llama.cpp does */
        tokenizer_free(t);
    }
}

/* ---- Loading from GGUF ------------------------------------------------------------------------ */

/* A minimal GGUF (no tensors) with string keys only, in buf; returns its size. */
static size_t gguf_with_strings(uint8_t *buf, const char *const (*kv)[2], int n_kv) {
    size_t o = 0;
    uint32_t version = 3, type_str = 8;
    uint64_t zero = 0, n = (uint64_t)n_kv;
    memcpy(buf + o, "GGUF", 4), o += 4;
    memcpy(buf + o, &version, 4), o += 4;
    memcpy(buf + o, &zero, 8), o += 8;
    memcpy(buf + o, &n, 8), o += 8;
    for (int i = 0; i < n_kv; i++) {
        uint64_t len = strlen(kv[i][0]);
        memcpy(buf + o, &len, 8), o += 8;
        memcpy(buf + o, kv[i][0], len), o += len;
        memcpy(buf + o, &type_str, 4), o += 4;
        len = strlen(kv[i][1]);
        memcpy(buf + o, &len, 8), o += 8;
        memcpy(buf + o, kv[i][1], len), o += len;
    }
    while (o % 32) buf[o++] = 0;
    return o;
}

/* Loading fails with an error that names the key at fault. */
static void check_load_error(const char *const (*kv)[2], int n_kv, const char *want) {
    static uint8_t buf[4096];
    size_t n = gguf_with_strings(buf, kv, n_kv);
    GgufFile g;
    char err[ERR_MAX] = "";
    if (gguf_parse(&g, buf, n, err)) {
        test_fail(__FILE__, __LINE__, "gguf_parse: %s", err);
        return;
    }
    Tokenizer *t = tokenizer_load(&g, err);
    CHECK(t == NULL);
    CHECK_MSG(strstr(err, want) != NULL, "error '%s' should name %s", err, want);
    tokenizer_free(t);
    gguf_close(&g);
}

TEST(tokenizer_load_errors) {
    const char *const none[][2] = {{"general.architecture", "qwen3"}};
    check_load_error(none, 1, "tokenizer.ggml.model");
    const char *const spm[][2] = {{"tokenizer.ggml.model", "llama"}};
    check_load_error(spm, 1, "tokenizer.ggml.model");
    const char *const pre[][2] = {{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "llama-bpe"}};
    check_load_error(pre, 2, "tokenizer.ggml.pre");
    const char *const no_tokens[][2] = {{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "qwen2"}};
    check_load_error(no_tokens, 2, "tokenizer.ggml.tokens");
    const char *const not_array[][2] = {{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.tokens", "x"}};
    check_load_error(not_array, 2, "tokenizer.ggml.tokens");
}

/* The vocabulary tools/mkmodel writes into the project's test models. */
TEST(tokenizer_load_test_model) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny-f32.gguf", test_models_dir());
    GgufFile g;
    char err[ERR_MAX] = "";
    if (gguf_open(&g, path, err)) SKIP("no build/models/tiny-f32.gguf (made by `make test`)");
    Tokenizer *t = tokenizer_load(&g, err);
    gguf_close(&g);
    CHECK_MSG(t != NULL, "tokenizer_load(%s): %s", path, err);
    if (!t) return;
    int32_t eos = tokenizer_eos(t);
    CHECK(eos >= 0 && eos < tokenizer_vocab_size(t) && tokenizer_is_eog(t, eos));
    int im_start = tokenizer_find(t, "<|im_start|>");
    CHECK(im_start >= 0);
    const char *text = "<|im_start|>user\nOnce upon a time, there was a little fox.<|im_end|>\n";
    int32_t *ids;
    int n;
    tokenizer_encode(t, text, strlen(text), true, &ids, &n, err);
    CHECK(n > 3 && ids[0] == im_start);
    free(ids);
    check_round_trip(t, text, strlen(text), true);
    check_round_trip(t, text, strlen(text), false);
    tokenizer_free(t);
}

/* ---- Conformance with llama.cpp (../shared) ------------------------------------------------- */

static char shared_path[1024];

/* A file under ../shared/reference, or NULL (test skipped) when ../shared is absent. */
static const char *ref_path(const char *rel) {
    const char *d = test_shared_dir();
    if (!d) return NULL;
    snprintf(shared_path, sizeof shared_path, "%s/reference/%s", d, rel);
    return shared_path;
}

/* Loads the tokenizer of a GGUF file (kept for the rest of the run: loading
 * the full vocabulary once is enough). */
static Tokenizer *load_cached(const char *rel) {
    static struct {
        char rel[128];
        Tokenizer *t;
    } cache[4];
    for (int i = 0; i < 4; i++)
        if (cache[i].t && strcmp(cache[i].rel, rel) == 0) return cache[i].t;
    const char *path = ref_path(rel);
    GgufFile g;
    char err[ERR_MAX] = "";
    if (gguf_open(&g, path, err)) {
        test_fail(__FILE__, __LINE__, "gguf_open(%s): %s", path, err);
        return NULL;
    }
    double t0 = time_now_ms();
    Tokenizer *t = tokenizer_load(&g, err);
    double ms = time_now_ms() - t0;
    gguf_close(&g);
    CHECK_MSG(t != NULL, "tokenizer_load(%s): %s", path, err);
    if (!t) return NULL;
    printf("    %s: %d tokens loaded in %.0f ms\n", rel, tokenizer_vocab_size(t), ms);
    for (int i = 0; i < 4; i++)
        if (!cache[i].t) {
            snprintf(cache[i].rel, sizeof cache[i].rel, "%s", rel);
            cache[i].t = t;
            break;
        }
    return t;
}

/* Splits llama.cpp's .inp file into its cases; returns the count. */
static int read_inputs(const char *path, char ***cases, char **data) {
    size_t len;
    char err[ERR_MAX];
    *data = file_read_all(path, &len, err);
    CHECK_MSG(*data != NULL, "%s", err);
    if (!*data) return 0;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n = 0;
    *cases = NULL;
    for (char *p = *data, *q; (q = strstr(p, sep)); p = q + strlen(sep)) {
        *q = '\0';
        *cases = realloc(*cases, (size_t)(n + 1) * sizeof **cases);
        (*cases)[n++] = p;
    }
    return n;
}

/* Parses integers separated by anything else ("1 2 3" or "[1, 2, 3]"). */
static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s) {
        if (*s >= '0' && *s <= '9') {
            long v = strtol(s, (char **)&s, 10);
            if (n < cap) ids[n] = (int32_t)v;
            n++;
        } else {
            s++;
        }
    }
    return n;
}

/* Encodes text and compares with the expected ids line; also checks that
 * decoding gives the text back. */
static bool check_case(const Tokenizer *t, const char *what, const char *text, size_t len,
                       const char *want_line, bool parse_special) {
    int32_t want[4096];
    int n_want = parse_ids(want_line, want, 4096);
    int32_t *ids;
    int n;
    tokenizer_encode(t, text, len, parse_special, &ids, &n, NULL);
    int diff = -1;
    for (int i = 0; i < n || i < n_want; i++)
        if (i >= n || i >= n_want || ids[i] != want[i]) {
            diff = i;
            break;
        }
    CHECK_MSG(diff < 0, "%s: %d ids, want %d; first difference at %d (%d vs %d)", what, n, n_want,
              diff, diff >= 0 && diff < n ? ids[diff] : -1, diff >= 0 && diff < n_want ? want[diff] : -1);
    size_t got_len;
    char *back = tokenizer_decode(t, ids, n, parse_special, &got_len);
    CHECK_MSG(got_len == len && memcmp(back, text, len) == 0, "%s: decoding does not give the input back",
              what);
    free(back);
    free(ids);
    return diff < 0;
}

/* Runs the 46 inputs against one expected-output file; returns the number that matched. */
static int run_vocab_cases(const Tokenizer *t, const char *out_rel) {
    char **cases = NULL, *inp_data = NULL, *out_data = NULL;
    int n = read_inputs(ref_path("tokenizer/ggml-vocab-qwen2.gguf.inp"), &cases, &inp_data);
    size_t len;
    char err[ERR_MAX];
    out_data = file_read_all(ref_path(out_rel), &len, err);
    CHECK_MSG(out_data != NULL, "%s", err);
    int ok = 0, i = 0;
    for (char *line = out_data; out_data && i < n; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char what[64];
        snprintf(what, sizeof what, "%s case %d", out_rel, i);
        ok += check_case(t, what, cases[i], strlen(cases[i]), line, false);
        if (!nl) {
            i++;
            break;
        }
        line = nl + 1;
    }
    CHECK_MSG(n == 46 && i == n, "%d inputs, %d output lines used", n, i);
    free(cases);
    free(inp_data);
    free(out_data);
    return ok;
}

TEST(tokenizer_llama_cpp_qwen2_vectors) {
    if (!test_shared_dir()) SKIP("../shared absent: no llama.cpp tokenizer vectors");
    Tokenizer *t = load_cached("tokenizer/ggml-vocab-qwen2.gguf");
    if (!t) return;
    CHECK_EQ_INT(tokenizer_vocab_size(t), 151936);
    CHECK_STR(tokenizer_token_text(t, 220), G);
    CHECK_STR(tokenizer_token_text(t, 198), C);
    CHECK_STR(tokenizer_token_text(t, 151644), "<|im_start|>");
    CHECK_EQ_INT(tokenizer_token_type(t, 151644), TOKEN_CONTROL);
    CHECK(tokenizer_is_eog(t, 151643) && tokenizer_is_eog(t, 151645) && !tokenizer_is_eog(t, 151644));
    int ok = run_vocab_cases(t, "tokenizer/ggml-vocab-qwen2.gguf.out");
    printf("    %d/46 llama.cpp qwen2 cases match\n", ok);
}

TEST(tokenizer_tiny_model_vectors) {
    if (!test_shared_dir()) SKIP("../shared absent: no tiny-a/tiny-b vocabularies");
    static const char *const models[][2] = {
        {"models/tiny-a.gguf", "tokenizer/tiny-a.vocab.out"},
        {"models/tiny-b.gguf", "tokenizer/tiny-b.vocab.out"},
    };
    for (int m = 0; m < 2; m++) {
        Tokenizer *t = load_cached(models[m][0]);
        if (!t) continue;
        int ok = run_vocab_cases(t, models[m][1]);
        printf("    %s: %d/46 cases match\n", models[m][0], ok);
    }
}

TEST(tokenizer_golden_prompts) {
    if (!test_shared_dir()) SKIP("../shared absent: no golden prompt tokenizations");
    static const char *const prompts[] = {"p1_plain", "p2_chatml", "p3_unicode_digits",
                                          "p4_code", "p5_chat_think", "p6_repeat"};
    static const char *const models[] = {"tiny-a", "tiny-b"};
    int ok = 0;
    for (int m = 0; m < 2; m++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s.gguf", models[m]);
        Tokenizer *t = load_cached(rel);
        if (!t) continue;
        for (int p = 0; p < 6; p++) {
            char err[ERR_MAX];
            size_t len, want_len;
            snprintf(rel, sizeof rel, "golden/prompts/%s.txt", prompts[p]);
            char *text = file_read_all(ref_path(rel), &len, err);
            snprintf(rel, sizeof rel, "golden/%s/%s.tokenize.txt", models[m], prompts[p]);
            char *want = file_read_all(ref_path(rel), &want_len, err);
            CHECK_MSG(text && want, "%s", err);
            if (text && want) ok += check_case(t, rel, text, len, want, true);
            free(text);
            free(want);
        }
    }
    printf("    %d/12 golden prompt tokenizations match\n", ok);
}

/* Qwen3 vectors derived by hand from the rules of book/appendix-gguf.md A.4
 * (those that do not involve <think>, whose id differs between the Qwen1.5 and
 * Qwen3 vocabularies). */
TEST(tokenizer_qwen3_extra_vectors) {
    if (!test_shared_dir()) SKIP("../shared absent: no full Qwen vocabulary");
    Tokenizer *t = load_cached("tokenizer/ggml-vocab-qwen2.gguf");
    if (!t) return;
    static const char *const cases[][2] = {
        {"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
         "151644 872 198 9707 151645 198 151644 77091 198"},
        {"The quick brown fox jumps over the lazy dog.", "785 3974 13876 38835 34208 916 279 15678 5562 13"},
        {"  multiple   spaces\tand\ttabs\r\nCRLF\n\n\nend  ",
         "220 5248 256 12621 52477 3244 3435 319 34 80658 1406 408 256"},
        {"I'm sure they'll say it's 100% done, won't they? YOU'RE",
         "40 2776 2704 807 3278 1977 432 594 220 16 15 15 4 2814 11 2765 944 807 30 14985 94153"},
        {"na\303\257ve caf\303\251 \342\200\224 \346\227\245\346\234\254\350\252\236\343\201\256\343\203"
         "\206\343\202\255\343\202\271\343\203\210, \355\225\234\352\265\255\354\226\264, \321\200\321"
         "\203\321\201\321\201\320\272\320\270\320\271, \330\271\330\261\330\250\331\211",
         "3376 37572 586 51950 1959 75402 21894 102819 15767 56833 61803 70534 11 130092 31079 11 18108 "
         "43055 126302 11 43982 124011 55057"},
        {"def f(x):\n    return x**2  # comment\n", "750 282 2075 982 262 470 856 334 17 220 671 3980 198"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char what[32];
        snprintf(what, sizeof what, "extra vector %zu", i);
        check_case(t, what, cases[i][0], strlen(cases[i][0]), cases[i][1], true);
    }
}

/* Encoding speed with the full vocabulary (reported, loosely bounded). */
TEST(tokenizer_full_vocab_speed) {
    if (!test_shared_dir()) SKIP("../shared absent: no full Qwen vocabulary");
    Tokenizer *t = load_cached("tokenizer/ggml-vocab-qwen2.gguf");
    if (!t) return;
    Buf b = {0};
    while (b.len < 1000000)
        buf_puts(&b, "The quick brown fox jumps over the lazy dog; 12345 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\n");
    int32_t *ids;
    int n;
    double t0 = time_now_ms();
    tokenizer_encode(t, b.data, b.len, false, &ids, &n, NULL);
    double ms = time_now_ms() - t0;
    printf("    encoded %zu bytes into %d tokens in %.0f ms\n", b.len, n, ms);
    free(ids);
    buf_free(&b);
}
