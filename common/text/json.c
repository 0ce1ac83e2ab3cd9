/* json.c: see json.h. A recursive-descent parser over a bounds-checked
 * cursor, and two writers.
 *
 * Choices worth knowing:
 *  - Nesting deeper than JSON_MAX_DEPTH arrays/objects is an error, so hostile
 *    input ("[[[[...") cannot exhaust the C stack.
 *  - Raw bytes inside strings must be valid UTF-8 (RFC 8259 section 8.1);
 *    invalid bytes are an error naming their offset.
 *  - A lone surrogate escape (\ud800 without a following \udc00-\udfff, or a
 *    stray \udc00) decodes to U+FFFD instead of failing: it is grammatical
 *    JSON (RFC 8259 section 8.2 leaves its meaning open), and a client that
 *    cut an emoji in half should not lose its whole request.
 *  - Numbers follow the JSON grammar exactly; the validated span goes to
 *    strtod (so the process must keep the "C" locale's '.' decimal point).
 *    Magnitudes that overflow a double are an error; underflow gives 0.
 *  - Error offsets are 0-based byte offsets into the text. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct {
    const unsigned char *s;
    size_t len;
    size_t pos;
    int depth;
    char *err;
} Parser;

static bool fail(Parser *p, size_t at, const char *what) {
    err_set(p->err, "json: byte %zu: %s", at, what);
    return false;
}

static bool at_end(const Parser *p) { return p->pos >= p->len; }
static int peek(const Parser *p) { return at_end(p) ? -1 : p->s[p->pos]; }

static void skip_ws(Parser *p) {
    while (!at_end(p)) {
        int c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* ---- values: freeing ----------------------------------------------------- */

static void free_contents(JsonValue *v) {
    if (v->type == JSON_STRING) free(v->string);
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->n_items; i++) {
            free_contents(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

void json_free(JsonValue *v) {
    if (!v) return;
    free_contents(v);
    free(v);
}

/* ---- strings -------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not valid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;      /* no overlongs */
        if (c == 0xED) hi = 0x9F;      /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;      /* no overlongs */
        if (c == 0xF4) hi = 0x8F;      /* nothing above U+10FFFF */
    } else return 0;
    if (n < need) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return need;
}

static void put_utf8(Buf *b, unsigned cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) { out[0] = (char)cp; n = 1; }
    else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    buf_append(b, out, n);
}

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits of a \u escape whose 'u' is at p->pos - 1. */
static bool read_hex4(Parser *p, unsigned *out) {
    if (p->len - p->pos < 4) return fail(p, p->pos, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_digit(p->s[p->pos + i]);
        if (h < 0) return fail(p, p->pos + i, "expected 4 hex digits after \\u");
        v = v * 16 + (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

/* Decodes a \u escape (p->pos just past the 'u'), joining surrogate pairs. */
static bool read_unicode_escape(Parser *p, Buf *b) {
    unsigned cp;
    if (!read_hex4(p, &cp)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF && p->len - p->pos >= 6 && p->s[p->pos] == '\\' &&
        p->s[p->pos + 1] == 'u') {
        size_t save = p->pos;
        unsigned lo;
        p->pos += 2;
        if (!read_hex4(p, &lo)) return false;
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            put_utf8(b, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00));
            return true;
        }
        p->pos = save; /* not a low half: the next escape stands on its own */
    }
    put_utf8(b, cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp); /* lone surrogate */
    return true;
}

static bool read_escape(Parser *p, Buf *b) {
    size_t at = p->pos;
    if (at_end(p)) return fail(p, at, "unterminated string");
    int c = p->s[p->pos++];
    char out;
    switch (c) {
    case '"': out = '"'; break;
    case '\\': out = '\\'; break;
    case '/': out = '/'; break;
    case 'b': out = '\b'; break;
    case 'f': out = '\f'; break;
    case 'n': out = '\n'; break;
    case 'r': out = '\r'; break;
    case 't': out = '\t'; break;
    case 'u': return read_unicode_escape(p, b);
    default: return fail(p, at - 1, "invalid escape in string");
    }
    buf_append(b, &out, 1);
    return true;
}

/* Parses a string whose opening quote is at p->pos; on success the decoded
 * bytes are in *b (NUL-terminated) and the caller owns b->data. */
static bool parse_string_raw(Parser *p, Buf *b) {
    size_t start = p->pos++;
    buf_append(b, "", 0); /* an empty string still gets a buffer */
    for (;;) {
        if (at_end(p)) return fail(p, start, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return true;
        }
        if (c == '\\') {
            p->pos++;
            if (!read_escape(p, b)) return false;
        } else if (c < 0x20) {
            return fail(p, p->pos, "control character in string (must be escaped)");
        } else {
            size_t n = utf8_valid_len(p->s + p->pos, p->len - p->pos);
            if (n == 0) return fail(p, p->pos, "invalid UTF-8 in string");
            buf_append(b, p->s + p->pos, n);
            p->pos += n;
        }
    }
}

static bool parse_string(Parser *p, JsonValue *v) {
    Buf b = {0};
    if (!parse_string_raw(p, &b)) {
        buf_free(&b);
        return false;
    }
    v->type = JSON_STRING;
    v->string = b.data;
    v->string_len = b.len;
    return true;
}

/* ---- numbers and literals ------------------------------------------------- */

static size_t skip_digits(const Parser *p, size_t i) {
    while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    return i;
}

/* Validates the grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and
 * converts the span with strtod. */
static bool parse_number(Parser *p, JsonValue *v) {
    size_t start = p->pos, i = p->pos;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || p->s[i] < '0' || p->s[i] > '9')
        return fail(p, i, "expected a digit in number");
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
            return fail(p, start, "number with a leading zero");
    } else {
        i = skip_digits(p, i);
    }
    if (i < p->len && p->s[i] == '.') {
        size_t d = ++i;
        i = skip_digits(p, i);
        if (i == d) return fail(p, i, "expected a digit after the decimal point");
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        size_t d = i;
        i = skip_digits(p, i);
        if (i == d) return fail(p, i, "expected a digit in the exponent");
    }
    /* strtod needs a NUL-terminated copy: the text may not be terminated. */
    size_t n = i - start;
    char small[64];
    char *copy = n < sizeof small ? small : xmalloc(n + 1);
    memcpy(copy, p->s + start, n);
    copy[n] = '\0';
    double x = strtod(copy, NULL);
    if (copy != small) free(copy);
    if (isinf(x)) return fail(p, start, "number too large for a double");
    v->type = JSON_NUMBER;
    v->number = x;
    p->pos = i;
    return true;
}

static bool parse_literal(Parser *p, JsonValue *v) {
    static const struct { const char *word; JsonType type; bool value; } lits[] = {
        {"true", JSON_BOOL, true}, {"false", JSON_BOOL, false}, {"null", JSON_NULL, false}};
    for (size_t k = 0; k < sizeof lits / sizeof lits[0]; k++) {
        size_t n = strlen(lits[k].word);
        if (p->len - p->pos >= n && memcmp(p->s + p->pos, lits[k].word, n) == 0) {
            v->type = lits[k].type;
            v->boolean = lits[k].value;
            p->pos += n;
            return true;
        }
    }
    return fail(p, p->pos, "unexpected character, expected a value");
}

/* ---- arrays and objects --------------------------------------------------- */

static bool parse_value(Parser *p, JsonValue *v);

/* Room for one more item in an array or object being built; cap doubles. */
static void grow(JsonValue *v, size_t *cap, bool with_keys) {
    if (v->n_items < *cap) return;
    *cap = *cap ? *cap * 2 : 4;
    v->items = xrealloc(v->items, *cap * sizeof *v->items);
    if (with_keys) v->keys = xrealloc(v->keys, *cap * sizeof *v->keys);
}

static bool enter(Parser *p) {
    if (++p->depth > JSON_MAX_DEPTH) {
        err_set(p->err, "json: byte %zu: nesting deeper than %d levels", p->pos, JSON_MAX_DEPTH);
        return false;
    }
    p->pos++; /* the '[' or '{' */
    return true;
}

/* After an item: ',' continues (returns 1), the closer ends (returns 0),
 * anything else is an error (returns -1). */
static int after_item(Parser *p, char closer, const char *what) {
    skip_ws(p);
    int c = peek(p);
    if (c == ',') { p->pos++; return 1; }
    if (c == closer) { p->pos++; return 0; }
    if (c < 0) fail(p, p->pos, "unexpected end of input");
    else {
        char msg[64];
        snprintf(msg, sizeof msg, "expected ',' or '%c' in %s", closer, what);
        fail(p, p->pos, msg);
    }
    return -1;
}

static bool parse_array(Parser *p, JsonValue *v) {
    if (!enter(p)) return false;
    v->type = JSON_ARRAY;
    size_t cap = 0;
    skip_ws(p);
    if (peek(p) == ']') {
        p->pos++;
        p->depth--;
        return true;
    }
    for (;;) {
        grow(v, &cap, false);
        JsonValue *item = &v->items[v->n_items];
        memset(item, 0, sizeof *item);
        v->n_items++; /* counted now so a failure below frees what was parsed */
        if (!parse_value(p, item)) return false;
        int r = after_item(p, ']', "array");
        if (r < 0) return false;
        if (r == 0) break;
    }
    p->depth--;
    return true;
}

static bool parse_member(Parser *p, JsonValue *v, size_t *cap) {
    skip_ws(p);
    if (peek(p) != '"')
        return fail(p, p->pos, at_end(p) ? "unexpected end of input" : "expected a string key in object");
    Buf key = {0};
    if (!parse_string_raw(p, &key)) {
        buf_free(&key);
        return false;
    }
    grow(v, cap, true);
    size_t k = v->n_items++;
    v->keys[k] = key.data;
    memset(&v->items[k], 0, sizeof v->items[k]);
    skip_ws(p);
    if (peek(p) != ':')
        return fail(p, p->pos, at_end(p) ? "unexpected end of input" : "expected ':' after object key");
    p->pos++;
    return parse_value(p, &v->items[k]);
}

static bool parse_object(Parser *p, JsonValue *v) {
    if (!enter(p)) return false;
    v->type = JSON_OBJECT;
    size_t cap = 0;
    skip_ws(p);
    if (peek(p) == '}') {
        p->pos++;
        p->depth--;
        return true;
    }
    for (;;) {
        if (!parse_member(p, v, &cap)) return false;
        int r = after_item(p, '}', "object");
        if (r < 0) return false;
        if (r == 0) break;
    }
    p->depth--;
    return true;
}

static bool parse_value(Parser *p, JsonValue *v) {
    skip_ws(p);
    int c = peek(p);
    if (c < 0) return fail(p, p->pos, "unexpected end of input, expected a value");
    if (c == '{') return parse_object(p, v);
    if (c == '[') return parse_array(p, v);
    if (c == '"') return parse_string(p, v);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    return parse_literal(p, v);
}

JsonValue *json_parse(const char *text, size_t len, char *err) {
    Parser p = {(const unsigned char *)text, text ? len : 0, 0, 0, err};
    JsonValue *v = xcalloc(1, sizeof *v);
    skip_ws(&p);
    if (at_end(&p)) {
        fail(&p, p.pos, "empty document");
        free(v);
        return NULL;
    }
    if (!parse_value(&p, v)) {
        json_free(v);
        return NULL;
    }
    skip_ws(&p);
    if (!at_end(&p)) {
        fail(&p, p.pos, "trailing characters after the document");
        json_free(v);
        return NULL;
    }
    return v;
}

const JsonValue *json_get(const JsonValue *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (size_t i = obj->n_items; i-- > 0;) /* from the end: the last one wins */
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

/* ---- writers -------------------------------------------------------------- */

void json_append_string(Buf *b, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    buf_append(b, "\"", 1);
    size_t i = 0;
    while (i < len) {
        unsigned char c = u[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) {
            buf_puts(b, esc);
            i++;
        } else if (c < 0x20) {
            buf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t n = utf8_valid_len(u + i, len - i);
            if (n == 0) { /* one bad byte -> one replacement, then resynchronize */
                buf_puts(b, "\\ufffd");
                n = 1;
            } else {
                buf_append(b, u + i, n);
            }
            i += n;
        }
    }
    buf_append(b, "\"", 1);
}

void json_append_number(Buf *b, double x) {
    if (!isfinite(x)) {
        buf_puts(b, "null");
        return;
    }
    if (x == floor(x) && fabs(x) < 9007199254740992.0) { /* exact integer below 2^53 */
        buf_printf(b, "%.0f", x);
        return;
    }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) { /* the shortest form that reads back exactly */
        snprintf(tmp, sizeof tmp, "%.*g", prec, x);
        if (strtod(tmp, NULL) == x) break;
    }
    buf_puts(b, tmp);
}

void json_append_value(Buf *b, const JsonValue *v, const char *item_sep, const char *key_sep) {
    switch (v->type) {
    case JSON_NULL: buf_puts(b, "null"); break;
    case JSON_BOOL: buf_puts(b, v->boolean ? "true" : "false"); break;
    case JSON_NUMBER: json_append_number(b, v->number); break;
    case JSON_STRING: json_append_string(b, v->string, v->string_len); break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        buf_puts(b, v->type == JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->n_items; i++) {
            if (i) buf_puts(b, item_sep);
            if (v->type == JSON_OBJECT) {
                json_append_string(b, v->keys[i], strlen(v->keys[i]));
                buf_puts(b, key_sep);
            }
            json_append_value(b, &v->items[i], item_sep, key_sep);
        }
        buf_puts(b, v->type == JSON_ARRAY ? "]" : "}");
        break;
    }
}
