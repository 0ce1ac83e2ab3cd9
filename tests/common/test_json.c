/* test_json.c: the JSON reader and writers (common/text/json.c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"

/* Parses a NUL-terminated text; the test fails if it does not parse. */
static JsonValue *parse_ok(const char *text) {
    char err[ERR_MAX] = "";
    JsonValue *v = json_parse(text, strlen(text), err);
    CHECK_MSG(v != NULL, "json_parse(%s) failed: %s", text, err);
    return v;
}

/* Parses text of length len expecting failure; returns whether err contains want. */
static bool fails_with_n(const char *text, size_t len, const char *want) {
    char err[ERR_MAX] = "";
    JsonValue *v = json_parse(text, len, err);
    if (v) {
        json_free(v);
        return false;
    }
    return strncmp(err, "json: byte ", 11) == 0 && strstr(err, want) != NULL;
}

static bool fails_with(const char *text, const char *want) {
    return fails_with_n(text, strlen(text), want);
}

#define CHECK_FAILS(text, want) CHECK_MSG(fails_with(text, want), "json_parse(%s) should fail with '%s'", text, want)

static bool number_is(const char *text, double want) {
    char err[ERR_MAX];
    JsonValue *v = json_parse(text, strlen(text), err);
    bool ok = v && v->type == JSON_NUMBER && v->number == want && signbit(v->number) == signbit(want);
    json_free(v);
    return ok;
}

static bool string_is(const char *text, const char *want, size_t want_len) {
    char err[ERR_MAX];
    JsonValue *v = json_parse(text, strlen(text), err);
    bool ok = v && v->type == JSON_STRING && v->string_len == want_len &&
              memcmp(v->string, want, want_len) == 0 && v->string[want_len] == '\0';
    json_free(v);
    return ok;
}

#define CHECK_STRING(text, want) CHECK_MSG(string_is(text, want, sizeof(want) - 1), "json_parse(%s) != %s", text, #want)

TEST(json_literals) {
    JsonValue *v = parse_ok(" \t\r\nnull \n");
    CHECK(v && v->type == JSON_NULL);
    json_free(v);
    v = parse_ok("true");
    CHECK(v && v->type == JSON_BOOL && v->boolean);
    json_free(v);
    v = parse_ok("false");
    CHECK(v && v->type == JSON_BOOL && !v->boolean);
    json_free(v);
    CHECK_FAILS("nul", "expected a value");
    CHECK_FAILS("True", "expected a value");
    CHECK_FAILS("nullx", "trailing");
}

TEST(json_numbers) {
    CHECK(number_is("0", 0.0));
    CHECK(number_is("-0", -0.0));
    CHECK(number_is("7", 7.0));
    CHECK(number_is("-12", -12.0));
    CHECK(number_is("3.25", 3.25));
    CHECK(number_is("-0.5", -0.5));
    CHECK(number_is("1e3", 1000.0));
    CHECK(number_is("1E-2", 0.01));
    CHECK(number_is("2.5e+2", 250.0));
    CHECK(number_is("0e0", 0.0));
    CHECK(number_is("1e-400", 0.0)); /* underflow gives 0, not an error */
    CHECK(number_is("12345678901234567890", 12345678901234567890.0));
    CHECK(number_is("9007199254740993", 9007199254740992.0)); /* rounds like strtod */
}

TEST(json_numbers_malformed) {
    CHECK_FAILS("01", "leading zero");
    CHECK_FAILS("-01", "leading zero");
    CHECK_FAILS("00", "leading zero");
    CHECK_FAILS("-", "expected a digit");
    CHECK_FAILS("- 1", "expected a digit");
    CHECK_FAILS("+1", "expected a value");
    CHECK_FAILS("1.", "after the decimal point");
    CHECK_FAILS("1.e5", "after the decimal point");
    CHECK_FAILS(".5", "expected a value");
    CHECK_FAILS("1e", "exponent");
    CHECK_FAILS("1e+", "exponent");
    CHECK_FAILS("NaN", "expected a value");
    CHECK_FAILS("Infinity", "expected a value");
    CHECK_FAILS("-Infinity", "expected a digit");
    CHECK_FAILS("0x10", "trailing");
    CHECK_FAILS("1e400", "too large");
    CHECK_FAILS("-1e400", "too large");
    CHECK_FAILS("--1", "expected a digit");
}

TEST(json_number_long_span) {
    /* longer than the parser's stack copy: exercises the heap path */
    char text[400];
    memset(text, '0', sizeof text);
    text[0] = '1';
    text[1] = '.';
    text[sizeof text - 1] = '\0';
    CHECK(number_is(text, 1.0));
}

TEST(json_strings_escapes) {
    CHECK_STRING("\"\"", "");
    CHECK_STRING("\"abc\"", "abc");
    CHECK_STRING("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\" \\ / \b \f \n \r \t");
    CHECK_STRING("\"\\u0041\\u00e9\\u20AC\"", "A\xC3\xA9\xE2\x82\xAC");
    CHECK_STRING("\"a\\u0000b\"", "a\0b"); /* embedded NUL is kept, string_len counts it */
    CHECK_STRING("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F\"", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F");
}

TEST(json_strings_surrogates) {
    CHECK_STRING("\"\\ud83d\\ude00\"", "\xF0\x9F\x98\x80");       /* U+1F600 */
    CHECK_STRING("\"\\uDBFF\\uDFFF\"", "\xF4\x8F\xBF\xBF");       /* U+10FFFF */
    CHECK_STRING("\"\\ud800\"", "\xEF\xBF\xBD");                   /* lone high -> U+FFFD */
    CHECK_STRING("\"\\udc00x\"", "\xEF\xBF\xBDx");                 /* lone low -> U+FFFD */
    CHECK_STRING("\"\\ud800\\u0041\"", "\xEF\xBF\xBD" "A");        /* high + non-low */
    CHECK_STRING("\"\\ud800\\ud83d\\ude00\"", "\xEF\xBF\xBD\xF0\x9F\x98\x80");
    CHECK_STRING("\"\\ud800\\n\"", "\xEF\xBF\xBD\n");
}

TEST(json_strings_bad_escape) {
    CHECK_FAILS("\"\\x\"", "invalid escape");
    CHECK_FAILS("\"\\U0041\"", "invalid escape");
    CHECK_FAILS("\"\\u12G4\"", "hex digits");
    CHECK_FAILS("\"\\u12", "truncated \\u escape");
    CHECK_FAILS("\"\\ud800\\u12", "truncated \\u escape");
    CHECK_FAILS("\"\\", "unterminated string");
    CHECK_FAILS("\"abc", "unterminated string");
    CHECK(fails_with("\"a\\qb\"", "byte 2: invalid escape"));
}

TEST(json_strings_control_chars) {
    CHECK_FAILS("\"a\nb\"", "control character");
    CHECK_FAILS("\"\t\"", "control character");
    CHECK(fails_with("\"ab\x01\"", "byte 3: control character"));
    CHECK(fails_with_n("\"a\0b\"", 5, "byte 2: control character"));
}

TEST(json_strings_invalid_utf8) {
    CHECK(fails_with("\"ab\x80\"", "byte 3: invalid UTF-8"));     /* stray continuation */
    CHECK_FAILS("\"\xC0\xAF\"", "invalid UTF-8");                 /* overlong '/' */
    CHECK_FAILS("\"\xE0\x80\xAF\"", "invalid UTF-8");             /* overlong */
    CHECK_FAILS("\"\xED\xA0\x80\"", "invalid UTF-8");             /* encoded surrogate */
    CHECK_FAILS("\"\xF4\x90\x80\x80\"", "invalid UTF-8");         /* above U+10FFFF */
    CHECK_FAILS("\"\xE2\x82\"", "invalid UTF-8");                 /* cut short */
    CHECK_FAILS("\"\xFF\"", "invalid UTF-8");
    CHECK(fails_with_n("\"\xF0\x9F\x98", 4, "invalid UTF-8"));   /* cut by end of input */
}

TEST(json_arrays_and_objects) {
    JsonValue *v = parse_ok("{\"a\": [1, {\"b\": null}, \"s\", true], \"c\" : {}, \"d\":[ ], \"a\": 2}");
    if (!v) return;
    CHECK_EQ_INT(v->type, JSON_OBJECT);
    CHECK_EQ_INT(v->n_items, 4);
    CHECK_STR(v->keys[0], "a");
    const JsonValue *a = &v->items[0];
    CHECK_EQ_INT(a->type, JSON_ARRAY);
    CHECK_EQ_INT(a->n_items, 4);
    CHECK(a->items[0].type == JSON_NUMBER && a->items[0].number == 1.0);
    CHECK(a->items[1].type == JSON_OBJECT && a->items[1].n_items == 1);
    const JsonValue *b = json_get(&a->items[1], "b");
    CHECK(b && b->type == JSON_NULL);
    CHECK(a->items[2].type == JSON_STRING && strcmp(a->items[2].string, "s") == 0);
    CHECK(a->items[3].type == JSON_BOOL && a->items[3].boolean);
    const JsonValue *c = json_get(v, "c");
    CHECK(c && c->type == JSON_OBJECT && c->n_items == 0);
    const JsonValue *d = json_get(v, "d");
    CHECK(d && d->type == JSON_ARRAY && d->n_items == 0);
    const JsonValue *last = json_get(v, "a"); /* repeated key: the last one wins */
    CHECK(last && last->type == JSON_NUMBER && last->number == 2.0);
    CHECK(json_get(v, "zz") == NULL);
    CHECK(json_get(a, "a") == NULL); /* not an object */
    CHECK(json_get(NULL, "a") == NULL);
    json_free(v);
    json_free(NULL);
}

TEST(json_many_items) {
    /* enough items to make the arrays grow several times */
    char *text = malloc(20000);
    size_t n = 0;
    text[n++] = '[';
    for (int i = 0; i < 2000; i++) n += (size_t)sprintf(text + n, i ? ",%d" : "%d", i);
    text[n++] = ']';
    text[n] = '\0';
    JsonValue *v = parse_ok(text);
    if (v) {
        CHECK_EQ_INT(v->n_items, 2000);
        CHECK(v->items[1999].number == 1999.0);
    }
    json_free(v);
    free(text);
}

TEST(json_structure_errors) {
    CHECK(fails_with("{\"a\":1 \"b\":2}", "byte 7: expected ',' or '}' in object"));
    CHECK(fails_with("[1 2]", "byte 3: expected ',' or ']' in array"));
    CHECK_FAILS("{\"a\" 1}", "expected ':'");
    CHECK_FAILS("{1:2}", "expected a string key");
    CHECK_FAILS("{,}", "expected a string key");
    CHECK_FAILS("[1,]", "expected a value");
    CHECK_FAILS("[,1]", "expected a value");
    CHECK_FAILS("{\"a\":1,}", "expected a string key");
    CHECK_FAILS("{\"a\":}", "expected a value");
    CHECK_FAILS("]", "expected a value");
    CHECK_FAILS("{\"a\\q\":1}", "invalid escape");
    CHECK_FAILS("{\"\xFF\":1}", "invalid UTF-8");
}

TEST(json_trailing_garbage) {
    CHECK(fails_with("[1] x", "byte 4: trailing characters"));
    CHECK_FAILS("1 2", "trailing");
    CHECK_FAILS("{}}", "trailing");
    CHECK_FAILS("\"a\"\"b\"", "trailing");
    CHECK(fails_with_n("[1]\0", 4, "byte 3: trailing")); /* a NUL counts as garbage */
    /* only len bytes are read: what follows them does not matter */
    char err[ERR_MAX];
    JsonValue *v = json_parse("[1]xyz", 3, err);
    CHECK(v && v->type == JSON_ARRAY && v->n_items == 1);
    json_free(v);
    v = json_parse("123", 2, err);
    CHECK(v && v->type == JSON_NUMBER && v->number == 12.0);
    json_free(v);
}

TEST(json_empty_input) {
    CHECK(fails_with("", "byte 0: empty document"));
    CHECK(fails_with("  \n\t ", "empty document"));
    char err[ERR_MAX];
    CHECK(json_parse(NULL, 0, err) == NULL);
}

TEST(json_truncated_everywhere) {
    /* every proper prefix of a document ending in '}' must fail cleanly */
    const char *doc = "{\"k\": [1, -2.5e3, \"s\\u00e9\\ud83d\\ude00\xC3\xA9\", true, false, null, {}], \"o\": {\"x\": 0}}";
    size_t len = strlen(doc);
    JsonValue *v = parse_ok(doc);
    json_free(v);
    for (size_t k = 0; k < len; k++) {
        char err[ERR_MAX] = "";
        JsonValue *t = json_parse(doc, k, err);
        CHECK_MSG(t == NULL, "prefix of %zu bytes parsed", k);
        CHECK_MSG(strncmp(err, "json: byte ", 11) == 0, "prefix %zu: error '%s'", k, err);
        json_free(t);
    }
}

static char *nested(int depth) {
    char *s = malloc((size_t)depth * 2 + 1);
    for (int i = 0; i < depth; i++) {
        s[i] = '[';
        s[depth + i] = ']';
    }
    s[depth * 2] = '\0';
    return s;
}

TEST(json_depth_limit) {
    char *ok = nested(64);
    JsonValue *v = parse_ok(ok);
    json_free(v);
    free(ok);
    char *deep = nested(65);
    CHECK_FAILS(deep, "nesting deeper than 64");
    free(deep);
    CHECK_FAILS("{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
                "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
                "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
                "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
                "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":1",
                "nesting deeper than 64");
}

TEST(json_huge_open_brackets) {
    size_t n = 1000000;
    char *s = malloc(n);
    memset(s, '[', n);
    CHECK(fails_with_n(s, n, "nesting deeper than 64"));
    memset(s, '{', n);
    CHECK(fails_with_n(s, n, "expected a string key"));
    for (size_t i = 0; i + 5 <= n; i += 5) memcpy(s + i, "{\"a\":", 5);
    CHECK(fails_with_n(s, n, "nesting deeper than 64"));
    free(s);
}

static char *written_string(const char *s, size_t len) {
    Buf b = {0};
    json_append_string(&b, s, len);
    return b.data;
}

TEST(json_write_string) {
    char *w = written_string("a\"b\\c/\n\t\r\b\f\x01\x1f\x7f", 14);
    CHECK_STR(w, "\"a\\\"b\\\\c/\\n\\t\\r\\b\\f\\u0001\\u001f\x7f\"");
    free(w);
    w = written_string("", 0);
    CHECK_STR(w, "\"\"");
    free(w);
    w = written_string("x\0y", 3);
    CHECK_STR(w, "\"x\\u0000y\"");
    free(w);
    w = written_string("\xC3\xA9\xF0\x9F\x98\x80", 6); /* valid UTF-8 passes through */
    CHECK_STR(w, "\"\xC3\xA9\xF0\x9F\x98\x80\"");
    free(w);
    /* each invalid byte becomes \ufffd; a cut-short sequence at the end too */
    w = written_string("a\x80" "b\xC0\xAF\xED\xA0\x80" "c\xE2\x82", 11);
    CHECK_STR(w, "\"a\\ufffdb\\ufffd\\ufffd\\ufffd\\ufffd\\ufffdc\\ufffd\\ufffd\"");
    free(w);
}

TEST(json_string_round_trip) {
    /* all of ASCII incl. NUL and controls, then valid multi-byte text */
    char all[128];
    for (int i = 0; i < 128; i++) all[i] = (char)i;
    char *w = written_string(all, 128);
    char err[ERR_MAX];
    JsonValue *v = json_parse(w, strlen(w), err);
    CHECK_MSG(v && v->type == JSON_STRING, "%s", err);
    if (v) CHECK(v->string_len == 128 && memcmp(v->string, all, 128) == 0);
    json_free(v);
    free(w);
    const char *utf = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF";
    w = written_string(utf, strlen(utf));
    v = json_parse(w, strlen(w), err);
    CHECK(v && v->string_len == strlen(utf) && strcmp(v->string, utf) == 0);
    json_free(v);
    free(w);
    w = written_string("\xFF", 1); /* invalid byte -> U+FFFD after the round trip */
    v = json_parse(w, strlen(w), err);
    CHECK(v && strcmp(v->string, "\xEF\xBF\xBD") == 0);
    json_free(v);
    free(w);
}

static char *written_number(double x) {
    Buf b = {0};
    json_append_number(&b, x);
    return b.data;
}

#define CHECK_NUMBER_TEXT(x, want)                                             \
    do {                                                                      \
        char *_w = written_number(x);                                         \
        CHECK_STR(_w, want);                                                  \
        free(_w);                                                             \
    } while (0)

TEST(json_write_number) {
    CHECK_NUMBER_TEXT(0.0, "0");
    CHECK_NUMBER_TEXT(-0.0, "-0");
    CHECK_NUMBER_TEXT(42.0, "42");
    CHECK_NUMBER_TEXT(-7.0, "-7");
    CHECK_NUMBER_TEXT(1e15, "1000000000000000");
    CHECK_NUMBER_TEXT(9007199254740991.0, "9007199254740991"); /* 2^53 - 1 */
    CHECK_NUMBER_TEXT(9007199254740992.0, "9007199254740992"); /* 2^53: %g path */
    CHECK_NUMBER_TEXT(1e20, "1e+20");
    CHECK_NUMBER_TEXT(0.1, "0.1");
    CHECK_NUMBER_TEXT(1.5, "1.5");
    CHECK_NUMBER_TEXT(-2.25, "-2.25");
    CHECK_NUMBER_TEXT(1e-7, "1e-07");
    CHECK_NUMBER_TEXT(1.0 / 3.0, "0.3333333333333333");
    CHECK_NUMBER_TEXT(5e-324, "5e-324");
    CHECK_NUMBER_TEXT(NAN, "null");
    CHECK_NUMBER_TEXT(INFINITY, "null");
    CHECK_NUMBER_TEXT(-INFINITY, "null");
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64: deterministic test doubles */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

TEST(json_number_round_trip) {
    uint64_t seed = 1;
    int checked = 0;
    for (int i = 0; i < 3000; i++) {
        uint64_t bits = rng_next(&seed);
        double x;
        if (i % 3 == 0) x = (double)(int64_t)(bits >> 11) - 4503599627370496.0; /* integers */
        else if (i % 3 == 1) x = (double)(bits >> 11) / 9007199254740992.0 * 1000.0 - 500.0;
        else memcpy(&x, &bits, sizeof x); /* any bit pattern */
        if (!isfinite(x)) continue;
        char *w = written_number(x);
        char err[ERR_MAX];
        JsonValue *v = json_parse(w, strlen(w), err);
        bool same = v && v->type == JSON_NUMBER && memcmp(&v->number, &x, sizeof x) == 0;
        CHECK_MSG(same, "%.17g written as %s: %s", x, w, v ? "reads back different" : err);
        json_free(v);
        free(w);
        checked++;
    }
    CHECK(checked > 2900);
}

TEST(json_document_round_trip) {
    Buf b = {0};
    buf_puts(&b, "{");
    json_append_string(&b, "name", 4);
    buf_puts(&b, ":");
    const char *text = "line1\nline2 \"q\" \xE2\x82\xAC";
    json_append_string(&b, text, strlen(text));
    buf_puts(&b, ",");
    json_append_string(&b, "vals", 4);
    buf_puts(&b, ":[");
    double vals[] = {0.1, -3.0, 1e300, 6.02214076e23, NAN};
    for (int i = 0; i < 5; i++) {
        if (i) buf_puts(&b, ",");
        json_append_number(&b, vals[i]);
    }
    buf_puts(&b, "]}");
    char err[ERR_MAX];
    JsonValue *v = json_parse(b.data, b.len, err);
    CHECK_MSG(v != NULL, "%s: %s", b.data, err);
    if (v) {
        const JsonValue *name = json_get(v, "name");
        CHECK(name && strcmp(name->string, text) == 0);
        const JsonValue *arr = json_get(v, "vals");
        CHECK(arr && arr->n_items == 5);
        if (arr && arr->n_items == 5) {
            for (int i = 0; i < 4; i++) CHECK(arr->items[i].number == vals[i]);
            CHECK(arr->items[4].type == JSON_NULL);
        }
    }
    json_free(v);
    buf_free(&b);
}

TEST(json_random_mutations) {
    /* corrupt a valid document one to three bytes at a time: parse must
     * either succeed or fail with a message, never crash or leak */
    const char *doc = "{\"a\": [1, -2.5e3, \"s\\u00e9\\ud83d\\ude00\xC3\xA9\", true, null], \"b\": {\"c\": false}}";
    size_t len = strlen(doc);
    const char bytes[] = "{}[]\",:\\u0e-+.9 \x80\xC3\x01tfn";
    char *s = malloc(len);
    uint64_t seed = 7;
    for (int iter = 0; iter < 5000; iter++) {
        memcpy(s, doc, len);
        int edits = 1 + (int)(rng_next(&seed) % 3);
        for (int e = 0; e < edits; e++)
            s[rng_next(&seed) % len] = bytes[rng_next(&seed) % (sizeof bytes - 1)];
        char err[ERR_MAX] = "";
        JsonValue *v = json_parse(s, len, err);
        CHECK_MSG(v || strncmp(err, "json: byte ", 11) == 0, "no error message: '%s'", err);
        json_free(v);
    }
    free(s);
}
