/* test_grammar.c: constrained sampling (common/run/grammar.c, common/text/token_trie.c):
 * which texts are prefixes of a document, every supported keyword, the refused
 * ones, and the token mask on a small vocabulary and on the default model's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "gguf.h"
#include "harness.h"
#include "sampling.h"
#include "token_trie.h"
#include "tokenizer.h"

static Grammar *compile(const char *schema_text, char *err) {
    JsonValue *s = schema_text ? json_parse(schema_text, strlen(schema_text), err) : NULL;
    if (schema_text && !s) return NULL;
    Grammar *g = grammar_create(NULL, s, NULL, err);
    json_free(s);
    return g;
}

/* Is text a prefix of a document (feeding it whole), and is it a whole one? */
static int judge(const Grammar *g, const char *text) {
    GrammarState *s = grammar_start(g);
    int r = grammar_feed(s, text, strlen(text)) ? 1 + grammar_complete(s) : 0;
    grammar_state_free(s);
    return r; /* 0: rejected, 1: a prefix, 2: a whole document */
}

enum { NO, PREFIX, WHOLE };

#define EXPECT(g, text, want) CHECK_MSG(judge(g, text) == (want), "'%s': got %d, want %d", text, judge(g, text), want)

TEST(grammar_json_object) {
    char err[ERR_MAX];
    Grammar *g = compile(NULL, err);
    EXPECT(g, "", PREFIX);
    EXPECT(g, "{", PREFIX);
    EXPECT(g, "{}", WHOLE);
    EXPECT(g, "{\"a\": [1, -2.5e+3, true, null, \"x\\n\\u00e9\"], \"b\": {\"c\": {}}}", WHOLE);
    EXPECT(g, "  {\"a\":1}", WHOLE);
    EXPECT(g, "[1]", NO);           /* json_object: the document is an object */
    EXPECT(g, "\"s\"", NO);
    EXPECT(g, "{}x", NO);           /* nothing after the document, not even a space */
    EXPECT(g, "{} ", NO);
    EXPECT(g, "{\"a\":01}", NO);    /* JSON's numbers */
    EXPECT(g, "{\"a\":1.}", NO);
    EXPECT(g, "{\"a\":-}", NO);
    EXPECT(g, "{\"a\":tru", PREFIX);
    EXPECT(g, "{\"a\":trux", NO);
    EXPECT(g, "{\"a\":\"\x01\"}", NO);   /* a control byte in a string */
    EXPECT(g, "{\"a\":\"\\q\"}", NO);    /* a bad escape */
    EXPECT(g, "{\"a\":\"\\u12G\"}", NO);
    EXPECT(g, "{\"a\":\"\xc3\"", NO);    /* a quote inside a UTF-8 character */
    EXPECT(g, "{\"a\":\"\xc3\xa9\"}", WHOLE);
    EXPECT(g, "{\"a\":\"\xed\xa0\x80\"}", NO); /* a surrogate written in UTF-8 */
    EXPECT(g, "{,}", NO);
    EXPECT(g, "{\"a\":1,}", NO);
    EXPECT(g, "{\"a\" 1}", NO);
    grammar_free(g);
}

TEST(grammar_bounds) {
    char err[ERR_MAX];
    Grammar *g = compile(NULL, err);
    char text[GRAMMAR_MAX_STRING + 64];
    /* whitespace in a row: at most GRAMMAR_MAX_WS */
    strcpy(text, "{");
    memset(text + 1, ' ', GRAMMAR_MAX_WS);
    text[1 + GRAMMAR_MAX_WS] = '\0';
    EXPECT(g, text, PREFIX);
    strcat(text, " ");
    EXPECT(g, text, NO);
    EXPECT(g, "{\n \"a\": 1}", WHOLE);   /* one line break in a row, not two */
    EXPECT(g, "{\n\n", NO);
    EXPECT(g, "{\r\n", NO);
    /* a string of GRAMMAR_MAX_STRING characters, not one more */
    strcpy(text, "{\"a\":\"");
    size_t n = strlen(text);
    memset(text + n, 'x', GRAMMAR_MAX_STRING);
    strcpy(text + n + GRAMMAR_MAX_STRING, "\"");
    EXPECT(g, text, PREFIX);
    strcpy(text + n + GRAMMAR_MAX_STRING, "x");
    EXPECT(g, text, NO);
    /* numbers and nesting */
    strcpy(text, "{\"a\":");
    memset(text + 5, '1', GRAMMAR_MAX_NUMBER + 1);
    text[5 + GRAMMAR_MAX_NUMBER + 1] = '\0';
    EXPECT(g, text, NO);
    strcpy(text, "{\"a\":");
    for (int i = 0; i < GRAMMAR_MAX_DEPTH; i++) strcat(text, "[");
    EXPECT(g, text, NO);
    grammar_free(g);
}

static const char PERSON[] =
    "{\"type\":\"object\",\"title\":\"person\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8},"
    "\"age\":{\"type\":\"integer\"},"
    "\"height\":{\"type\":\"number\"},"
    "\"pet\":{\"type\":[\"string\",\"null\"]},"
    "\"color\":{\"enum\":[\"red\",\"green\",7,null]},"
    "\"kind\":{\"const\":\"human\"},"
    "\"ok\":{\"type\":\"boolean\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"maxItems\":2},"
    "\"home\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"integer\"}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}},"
    "\"required\":[\"name\",\"age\",\"home\"],\"additionalProperties\":false}";

TEST(grammar_schema_keywords) {
    char err[ERR_MAX];
    Grammar *g = compile(PERSON, err);
    CHECK_MSG(g != NULL, "%s", err);
    if (!g) return;
    EXPECT(g, "{\"name\":\"Ann\",\"age\":3,\"home\":{\"city\":\"Oslo\"}}", WHOLE);
    EXPECT(g, "{\"name\":\"Ann\",\"age\":3,\"height\":1.5e0,\"pet\":null,\"color\":7,\"kind\":\"human\",\"ok\":false,"
              "\"tags\":[\"a\",\"b\"],\"home\":{\"city\":\"Oslo\",\"zip\":123}}", WHOLE);
    EXPECT(g, "{ \"name\" : \"Ann\" , \"age\" : 3 , \"home\" : { \"city\" : \"\" } }", WHOLE);
    EXPECT(g, "{\"age\":3", NO);                                        /* properties in the schema's order */
    EXPECT(g, "{\"name\":\"Ann\",\"home\"", NO);                        /* age is required before home */
    EXPECT(g, "{\"name\":\"Ann\",\"age\":3}", NO);                      /* home is required */
    EXPECT(g, "{\"name\":\"Ann\",\"age\":3,\"extra\"", NO);             /* additionalProperties: false */
    EXPECT(g, "{\"name\":\"\"", NO);                                    /* minLength 1 */
    EXPECT(g, "{\"name\":\"123456789", NO);                             /* maxLength 8 */
    EXPECT(g, "{\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"", PREFIX); /* characters, not bytes */
    EXPECT(g, "{\"name\":5", NO);                                       /* type string */
    EXPECT(g, "{\"name\":\"A\",\"age\":3.5", NO);                       /* integer */
    EXPECT(g, "{\"name\":\"A\",\"age\":3e2", NO);
    EXPECT(g, "{\"name\":\"A\",\"age\":-30,\"height\":-0.25E-2", PREFIX);
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"pet\":\"cat\"", PREFIX);     /* a list of types */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"pet\":true", NO);
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"color\":\"blue\"", NO);      /* enum */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"color\":\"gree", PREFIX);
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"color\":70", NO);
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"kind\":\"robot\"", NO);      /* const */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"ok\":1", NO);                /* boolean */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"tags\":[]", NO);             /* minItems 1 */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"tags\":[\"a\",\"b\",", NO);  /* maxItems 2 */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"tags\":[1", NO);             /* items */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"home\":{}", NO);             /* nested required */
    EXPECT(g, "{\"name\":\"A\",\"age\":3,\"home\":{\"zip\":1", NO);
    grammar_free(g);
    /* a top-level number is whole only once nothing can follow; it may also go on */
    g = compile("{\"type\":\"integer\"}", err);
    EXPECT(g, "12", WHOLE);
    EXPECT(g, "-", PREFIX);
    grammar_free(g);
}

TEST(grammar_refuses_unsupported) {
    static const char *const cases[][2] = {
        {"{\"$ref\":\"#/defs/a\"}", "'$ref'"},
        {"{\"oneOf\":[{\"type\":\"string\"}]}", "'oneOf'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x+\"}}}", "at properties.a: the keyword 'pattern'"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":0}}", "at items: the keyword 'minimum'"},
        {"{\"type\":\"date\"}", "'type' must be"},
        {"{\"type\":\"object\",\"required\":[\"x\"]}", "'required' names 'x'"},
        {"{\"additionalProperties\":{\"type\":\"string\"}}", "'additionalProperties' must be true or false"},
        {"{\"enum\":[]}", "'enum' is empty"},
        {"{\"items\":[{}]}", "tuples"},
        {"{\"maxLength\":-1}", "'maxLength' must be"},
        {"[]", "a schema must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[ERR_MAX] = "";
        Grammar *g = compile(cases[i][0], err);
        CHECK_MSG(g == NULL && strstr(err, cases[i][1]), "%s: got '%s', want '%s'", cases[i][0], err, cases[i][1]);
        grammar_free(g);
    }
}

TEST(grammar_prefix_and_suffix) {
    char err[ERR_MAX];
    JsonValue *s;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"enum\":[\"add\",\"mul\"]},"
                         "\"arguments\":{\"type\":\"object\"}},\"required\":[\"name\",\"arguments\"]}";
    s = json_parse(schema, strlen(schema), err);
    Grammar *g = grammar_create("<tool_call>\n", s, "\n</tool_call>", err);
    json_free(s);
    CHECK_MSG(g != NULL, "%s", err);
    EXPECT(g, "<tool", PREFIX);
    EXPECT(g, "{", NO);
    EXPECT(g, "<tool_call>\n{\"name\": \"mul\", \"arguments\": {\"a\": 2}}", PREFIX);
    EXPECT(g, "<tool_call>\n{\"name\": \"mul\", \"arguments\": {\"a\": 2}}\n</tool_call>", WHOLE);
    EXPECT(g, "<tool_call>\n{\"name\": \"div\"", NO);
    grammar_free(g);
}

/* ---- the mask ---------------------------------------------------------------------- */

/* A small vocabulary: tokens in byte-level form (" " is "Ġ"), and an end token. */
static Tokenizer *small_vocab(void) {
    static const char *const tokens[] = {"{", "}", "\"", "a", "b", "ab", "\":", "\":\"", "1", "12", "x",
                                         "Ġ", "ĠĠ", "{\"", "\"}", ",", "<|im_end|>", "ĠĠĠĠ", "Ã©", "Ã"};
    int32_t types[20];
    for (int i = 0; i < 20; i++) types[i] = TOKEN_NORMAL;
    types[16] = TOKEN_CONTROL;
    char err[ERR_MAX];
    Tokenizer *t = tokenizer_build(tokens, types, 20, NULL, 0, err);
    CHECK_MSG(t != NULL, "%s", err);
    return t;
}

/* The allowed tokens after text, as a string of 0/1 by id. */
static void allowed_after(const Grammar *g, const TokenTrie *trie, const char *text, char *out) {
    GrammarState *s = grammar_start(g);
    CHECK(grammar_feed(s, text, strlen(text)));
    float logits[64];
    for (int i = 0; i < trie->n_vocab; i++) logits[i] = 0.0f;
    int n = grammar_mask(s, trie, logits), count = 0;
    for (int i = 0; i < trie->n_vocab; i++) out[i] = logits[i] == 0.0f ? '1' : '0', count += out[i] == '1';
    out[trie->n_vocab] = '\0';
    CHECK_EQ_INT(n, count);
    /* each allowed token is accepted, each other one refused */
    for (int i = 0; i < trie->n_vocab; i++) {
        GrammarState *t = grammar_start(g);
        grammar_feed(t, text, strlen(text));
        CHECK_MSG(grammar_accept(t, trie, i) == (out[i] == '1'), "after '%s', token %d", text, i);
        grammar_state_free(t);
    }
    grammar_state_free(s);
}

TEST(grammar_mask_small_vocabulary) {
    Tokenizer *tok = small_vocab();
    if (!tok) return;
    const TokenTrie *trie = tokenizer_trie(tok);
    CHECK(trie == tokenizer_trie(tok)); /* built once */
    char err[ERR_MAX], got[64];
    Grammar *g = compile("{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"string\"}},\"required\":[\"ab\"]}", err);
    /*                           ids: { } " a b ab ": ":" 1 12 x Ġ ĠĠ {" "} , end ĠĠĠĠ é Ã */
    allowed_after(g, trie, "", got);
    CHECK_STR(got, "10000000000111000000");  /* '{', one or two spaces, '{"'; not four */
    allowed_after(g, trie, "{\"", got);
    CHECK_STR(got, "00010100000000000000");  /* 'a', 'ab': the key "ab" */
    allowed_after(g, trie, "{\"ab", got);
    CHECK_STR(got, "00100011000000000000");  /* '"', '":', '":"' */
    allowed_after(g, trie, "{\"ab\":\"", got);
    CHECK_STR(got, "11111100111111110111");  /* any text, '"', '"}'; not '":'; 'Ã' alone starts a character */
    allowed_after(g, trie, "{\"ab\":\"\xc3", got);
    CHECK_STR(got, "00000000000000000000");  /* no token here is a lone continuation byte */
    allowed_after(g, trie, "{\"ab\":\"x\"", got);
    CHECK_STR(got, "01000000000110000000");  /* '}' or up to two spaces */
    allowed_after(g, trie, "{\"ab\":\"x\"}", got);
    CHECK_STR(got, "00000000000000001000");  /* only the end */
    grammar_free(g);
    tokenizer_free(tok);
}

/* Masking renormalizes: the chosen token's probability is its old one over
 * the allowed tokens' share, and a draw the mask does not touch is the same. */
TEST(grammar_mask_keeps_the_distribution) {
    Tokenizer *tok = small_vocab();
    if (!tok) return;
    const TokenTrie *trie = tokenizer_trie(tok);
    char err[ERR_MAX];
    Grammar *g = compile(NULL, err);
    GrammarState *s = grammar_start(g);
    CHECK(grammar_feed(s, "{\"a\":", 5));
    float raw[20], masked[20];
    for (int i = 0; i < 20; i++) raw[i] = masked[i] = (float)(0.5 * sin(1.3 * i) + 0.1 * i);
    grammar_mask(s, trie, masked);
    double z = 0, z_allowed = 0;
    for (int i = 0; i < 20; i++) {
        z += exp(raw[i]);
        if (masked[i] == raw[i]) z_allowed += exp(raw[i]);
        else CHECK(isinf(masked[i]) && masked[i] < 0);
    }
    SamplerParams p = sampler_params_default();
    p.temperature = 1.0f;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        p.seed = seed;
        Sampler *a = sampler_create(&p, 20), *b = sampler_create(&p, 20);
        float pa, pb;
        int32_t ta = sampler_sample(a, raw, &pa), tb = sampler_sample(b, masked, &pb);
        CHECK(masked[tb] == raw[tb]);                      /* never a masked token */
        CHECK_NEAR(pb, exp(raw[tb]) / z_allowed, 1e-5);    /* renormalized over the allowed ones */
        CHECK_NEAR(pa, exp(raw[ta]) / z, 1e-5);
        sampler_free(a), sampler_free(b);
    }
    /* greedy, and a top-k that keeps only allowed tokens: the same draw, seed for seed */
    for (int k = 0; k < 20; k++) raw[k] = masked[k] == raw[k] ? raw[k] + 10.0f : raw[k];
    memcpy(masked, raw, sizeof raw);
    grammar_mask(s, trie, masked);
    p.top_k = 3;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        p.seed = seed;
        Sampler *a = sampler_create(&p, 20), *b = sampler_create(&p, 20);
        for (int step = 0; step < 4; step++) CHECK_EQ_INT(sampler_sample(a, raw, NULL), sampler_sample(b, masked, NULL));
        sampler_free(a), sampler_free(b);
    }
    grammar_state_free(s);
    grammar_free(g);
    tokenizer_free(tok);
}

/* After each prefix, the mask agrees with feeding every token alone. */
static void check_mask_agrees(const Tokenizer *tok) {
    const TokenTrie *trie = tokenizer_trie(tok);
    int V = trie->n_vocab;
    char err[ERR_MAX];
    Grammar *g = compile(PERSON, err);
    float *logits = malloc(sizeof(float) * (size_t)V);
    static const char *const prefixes[] = {"", "{\"name\":\"An", "{\"name\":\"A\",\"age\":1", "{\"name\":\"A\",\"age\":3,\"color\":\"re",
                                           "{\"name\":\"A\",\"age\":3,\"home\":{\"city\":\"Oslo\"}}"};
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
        GrammarState *s = grammar_start(g);
        CHECK(grammar_feed(s, prefixes[k], strlen(prefixes[k])));
        for (int i = 0; i < V; i++) logits[i] = 1.0f;
        int n = grammar_mask(s, trie, logits), wrong = 0, count = 0;
        for (int i = 0; i < V; i++) {
            GrammarState *t = grammar_start(g);
            grammar_feed(t, prefixes[k], strlen(prefixes[k]));
            bool ok = grammar_accept(t, trie, i);
            wrong += ok != (logits[i] == 1.0f);
            count += ok;
            grammar_state_free(t);
        }
        CHECK_MSG(wrong == 0 && n == count, "after '%s': %d tokens disagree (%d allowed, mask says %d)", prefixes[k], wrong, count, n);
        CHECK_MSG(n > 0 && n < V, "after '%s': %d allowed", prefixes[k], n);
        grammar_state_free(s);
    }
    free(logits);
    grammar_free(g);
}

static Tokenizer *load_vocab(const char *path) {
    GgufFile f;
    char err[ERR_MAX];
    if (gguf_open(&f, path, err)) return NULL;
    Tokenizer *tok = tokenizer_load(&f, err);
    gguf_close(&f);
    CHECK_MSG(tok != NULL, "%s: %s", path, err);
    return tok;
}

TEST(grammar_mask_default_vocabulary) {
    Tokenizer *tok = load_vocab("models/default.gguf");
    if (!tok) SKIP("no models/default.gguf");
    check_mask_agrees(tok);
    tokenizer_free(tok);
}

/* Qwen's real vocabulary, 151,936 tokens (../shared, when present). */
TEST(grammar_mask_qwen_vocabulary) {
    char path[1024];
    if (!test_shared_dir()) SKIP("no ../shared: the real Qwen vocabulary is not here");
    snprintf(path, sizeof path, "%s/reference/tokenizer/ggml-vocab-qwen2.gguf", test_shared_dir());
    Tokenizer *tok = load_vocab(path);
    if (!tok) SKIP("no ggml-vocab-qwen2.gguf in ../shared/reference/tokenizer");
    CHECK_EQ_INT(tokenizer_vocab_size(tok), 151936);
    check_mask_agrees(tok);
    tokenizer_free(tok);
}
