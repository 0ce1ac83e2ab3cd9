/* grammar.c: see grammar.h. Three parts: compiling a schema into a tree of
 * nodes; the automaton that reads a reply byte by byte against them; the mask,
 * which walks the vocabulary's trie with the automaton. */
#include "grammar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- the compiled schema ------------------------------------------------------------ */

enum { T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_NUMBER = 8, T_INTEGER = 16, T_BOOLEAN = 32, T_NULL = 64, T_ANY = 127 };

typedef struct Node Node;
struct Node {
    unsigned types;            /* T_* bits: the value may be any of these */
    /* object */
    bool listed;               /* properties given: only they, in order; else any keys, any values */
    int n_props;
    char **keys;               /* [n_props] each key as JSON text, quotes included */
    const Node **props;        /* [n_props] */
    bool *required;            /* [n_props] */
    /* array */
    const Node *items;         /* the items' schema */
    int min_items, max_items;  /* max -1: no limit */
    /* string: characters */
    int min_len, max_len;
    /* enum / const: the value is one of these JSON texts */
    char **lits;
    int n_lits;
};

struct Grammar {
    char *prefix, *suffix;     /* literal text around the value ("" when none) */
    const Node *root;
    Node **nodes;              /* [n_nodes] everything to free */
    int n_nodes;
};

static char *BOOL_LITS[] = {"false", "true"}, *NULL_LITS[] = {"null"};
static const Node ANY; /* any value: its items are any values too */
static const Node ANY = {.types = T_ANY, .items = &ANY, .max_items = -1, .max_len = GRAMMAR_MAX_STRING};
static const Node ANY_OBJECT = {.types = T_OBJECT, .items = &ANY, .max_items = -1, .max_len = GRAMMAR_MAX_STRING};
static const Node BOOLS = {.lits = BOOL_LITS, .n_lits = 2};
static const Node NULLS = {.lits = NULL_LITS, .n_lits = 1};

/* ---- compiling a schema -------------------------------------------------------------- */

typedef struct {
    Grammar *g;
    char *err;
} Compiler;

static Node *new_node(Compiler *c) {
    Grammar *g = c->g;
    g->nodes = xrealloc(g->nodes, sizeof *g->nodes * (size_t)(g->n_nodes + 1));
    Node *n = g->nodes[g->n_nodes++] = xcalloc(1, sizeof *n);
    n->max_items = -1;
    n->max_len = GRAMMAR_MAX_STRING;
    return n;
}

static int fail(Compiler *c, const char *path, const char *what) {
    err_set(c->err, "response_format schema%s%s: %s", *path ? " at " : "", path, what);
    return -1;
}

static void join(char *out, const char *path, const char *a, const char *b) {
    snprintf(out, 200, "%s%s%s%s%s", path, *path ? "." : "", a, b ? "." : "", b ? b : "");
}

static const char *const SUPPORTED[] = {"type", "properties", "required", "additionalProperties", "items", "minItems",
                                        "maxItems", "minLength", "maxLength", "enum", "const"};
static const char *const IGNORED[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                      "strict", "deprecated", "readOnly", "writeOnly"};

static bool in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0) return true;
    return false;
}

static int check_keywords(Compiler *c, const JsonValue *s, const char *path) {
    for (size_t i = 0; i < s->n_items; i++) {
        const char *k = s->keys[i];
        if (in_list(k, SUPPORTED, sizeof SUPPORTED / sizeof *SUPPORTED) || in_list(k, IGNORED, sizeof IGNORED / sizeof *IGNORED))
            continue;
        char what[ERR_MAX];
        snprintf(what, sizeof what, "the keyword '%.64s' is not supported (supported: type, properties, required, "
                 "additionalProperties, items, minItems, maxItems, minLength, maxLength, enum, const)", k);
        return fail(c, path, what);
    }
    return 0;
}

static int type_bits(Compiler *c, const JsonValue *t, const char *path, unsigned *bits) {
    static const char *const NAMES[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    const JsonValue *list = t->type == JSON_ARRAY ? t->items : t;
    size_t n = t->type == JSON_ARRAY ? t->n_items : 1;
    for (size_t i = 0; i < n; i++) {
        int k = 0;
        while (k < 7 && !(list[i].type == JSON_STRING && strcmp(list[i].string, NAMES[k]) == 0)) k++;
        if (k == 7) return fail(c, path, "'type' must be object, array, string, number, integer, boolean or null (or a list of them)");
        *bits |= 1u << k;
    }
    return n ? 0 : fail(c, path, "'type' is an empty list");
}

/* A non-negative integer keyword. */
static int count_of(Compiler *c, const JsonValue *s, const char *key, const char *path, int *out) {
    const JsonValue *v = json_get(s, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER || v->number != floor(v->number) || v->number < 0 || v->number > 1e6) {
        char what[128];
        snprintf(what, sizeof what, "'%s' must be a non-negative integer", key);
        return fail(c, path, what);
    }
    *out = (int)v->number;
    return 0;
}

/* enum / const: each value as the JSON text the reply must hold. */
static int literals(Compiler *c, Node *n, const JsonValue *vals, size_t count, const char *path) {
    if (count == 0) return fail(c, path, "'enum' is empty: no value could match");
    n->lits = xcalloc(count, sizeof *n->lits);
    for (size_t i = 0; i < count; i++) {
        const JsonValue *v = &vals[i];
        Buf b = {0};
        if (v->type == JSON_STRING) json_append_string(&b, v->string, v->string_len);
        else if (v->type == JSON_NUMBER) json_append_number(&b, v->number);
        else if (v->type == JSON_BOOL) buf_puts(&b, v->boolean ? "true" : "false");
        else if (v->type == JSON_NULL) buf_puts(&b, "null");
        else return fail(c, path, "'enum' and 'const' values must be strings, numbers, booleans or null");
        n->lits[n->n_lits++] = b.data;
    }
    return 0;
}

static const Node *compile(Compiler *c, const JsonValue *s, const char *path);

static int compile_properties(Compiler *c, Node *n, const JsonValue *s, const char *path) {
    const JsonValue *props = json_get(s, "properties"), *req = json_get(s, "required"), *add = json_get(s, "additionalProperties");
    char sub[200];
    if (add && add->type != JSON_BOOL)
        return fail(c, path, "'additionalProperties' must be true or false (a schema there is not supported)");
    if (props) {
        if (props->type != JSON_OBJECT) return fail(c, path, "'properties' must be an object");
        n->listed = true;
        n->n_props = (int)props->n_items;
        n->keys = xcalloc(props->n_items + 1, sizeof *n->keys);
        n->props = xcalloc(props->n_items + 1, sizeof *n->props);
        n->required = xcalloc(props->n_items + 1, sizeof *n->required);
        for (size_t i = 0; i < props->n_items; i++) {
            Buf b = {0};
            json_append_string(&b, props->keys[i], strlen(props->keys[i]));
            n->keys[i] = b.data;
            join(sub, path, "properties", props->keys[i]);
            if (!(n->props[i] = compile(c, &props->items[i], sub))) return -1;
        }
    }
    if (!req) return 0;
    if (req->type != JSON_ARRAY) return fail(c, path, "'required' must be an array of property names");
    for (size_t i = 0; i < req->n_items; i++) {
        int k = 0;
        while (k < n->n_props && !(req->items[i].type == JSON_STRING && strcmp(props->keys[k], req->items[i].string) == 0)) k++;
        if (k == n->n_props) {
            char what[160];
            snprintf(what, sizeof what, "'required' names '%.64s', which is not in 'properties'",
                     req->items[i].type == JSON_STRING ? req->items[i].string : "?");
            return fail(c, path, what);
        }
        n->required[k] = true;
    }
    return 0;
}

static const Node *compile(Compiler *c, const JsonValue *s, const char *path) {
    if (s->type == JSON_BOOL && s->boolean) return &ANY;
    if (s->type != JSON_OBJECT) return fail(c, path, "a schema must be an object"), NULL;
    if (check_keywords(c, s, path)) return NULL;
    Node *n = new_node(c);
    const JsonValue *t = json_get(s, "type"), *e = json_get(s, "enum"), *k = json_get(s, "const"), *items = json_get(s, "items");
    char sub[200];
    if (t && type_bits(c, t, path, &n->types)) return NULL;
    if (e && (e->type != JSON_ARRAY ? fail(c, path, "'enum' must be an array") : literals(c, n, e->items, e->n_items, path)))
        return NULL;
    if (k && literals(c, n, k, 1, path)) return NULL;
    if (compile_properties(c, n, s, path) || count_of(c, s, "minItems", path, &n->min_items) ||
        count_of(c, s, "maxItems", path, &n->max_items) || count_of(c, s, "minLength", path, &n->min_len) ||
        count_of(c, s, "maxLength", path, &n->max_len))
        return NULL;
    if (n->max_len > GRAMMAR_MAX_STRING) n->max_len = GRAMMAR_MAX_STRING;
    if (items) {
        if (items->type != JSON_OBJECT && items->type != JSON_BOOL)
            return fail(c, path, "'items' must be one schema (tuples are not supported)"), NULL;
        join(sub, path, "items", NULL);
        if (!(n->items = compile(c, items, sub))) return NULL;
    } else {
        n->items = &ANY;
    }
    if (!n->types) n->types = n->listed ? T_OBJECT : items ? T_ARRAY : T_ANY;
    if (n->min_len > n->max_len || (n->max_items >= 0 && n->min_items > n->max_items))
        return fail(c, path, "a minimum is above its maximum: no value could match"), NULL;
    return n;
}

Grammar *grammar_create(const char *prefix, const JsonValue *schema, const char *suffix, char *err) {
    Grammar *g = xcalloc(1, sizeof *g);
    g->prefix = xstrdup(prefix ? prefix : "");
    g->suffix = xstrdup(suffix ? suffix : "");
    Compiler c = {g, err};
    g->root = schema ? compile(&c, schema, "") : &ANY_OBJECT;
    if (!g->root) {
        grammar_free(g);
        return NULL;
    }
    return g;
}

void grammar_free(Grammar *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        for (int k = 0; k < n->n_props; k++) free(n->keys[k]);
        for (int k = 0; k < n->n_lits; k++) free(n->lits[k]);
        free(n->keys), free(n->props), free(n->required), free(n->lits);
        free(n);
    }
    free(g->nodes), free(g->prefix), free(g->suffix);
    free(g);
}

/* ---- the automaton ---------------------------------------------------------------------- */

/* A frame is one value being read; the stack holds the values it is inside. */
enum { F_ROOT, F_VALUE, F_OBJECT, F_ARRAY, F_STRING, F_NUMBER, F_LITERAL };
enum { R_PREFIX, R_VALUE, R_SUFFIX, R_DONE };                               /* root */
enum { O_OPEN, O_COMMA, O_KEY, O_COLON, O_VALUE, O_AFTER };                 /* object: after '{', ',', ... */
enum { A_OPEN, A_ITEM, A_AFTER };                                           /* array */
enum { S_CHAR, S_ESC, S_HEX };                                              /* string */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };        /* number */

typedef struct {
    uint8_t kind, sub;
    uint8_t ws, nl;      /* whitespace bytes in a row, and the line breaks among them */
    uint8_t flag;        /* string: an object's key; number: integers only */
    uint8_t more, lo, hi;/* string: UTF-8 continuation bytes still due, and the next one's range */
    int16_t cand;        /* object: the property (candidate) being written; literal: the candidate */
    int16_t pos;         /* object key, literal, root prefix/suffix: bytes matched; \u: hex digits left */
    int32_t count;       /* object: first property the next key may be; array: items; string: characters; number: bytes */
    const Node *node;
} Frame;

typedef struct {
    const Grammar *g;
    int depth;
    Frame f[GRAMMAR_MAX_DEPTH];  /* f[0] is the root, f[depth - 1] the value being read */
} Stack;

struct GrammarState {
    Stack st;
    uint8_t *allowed;            /* [n_vocab] grammar_mask's scratch */
    int n_allowed;
};

enum { FAIL, OK, AGAIN };        /* AGAIN: the frame ended before this byte; its parent reads it */

static bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Whitespace between values: at most GRAMMAR_MAX_WS bytes in a row, of them at
 * most GRAMMAR_MAX_NEWLINES line breaks ('\n' or '\r'). */
static int space(Frame *f, uint8_t c) {
    if (f->ws == GRAMMAR_MAX_WS || ((c == '\n' || c == '\r') && f->nl++ == GRAMMAR_MAX_NEWLINES)) return FAIL;
    f->ws++;
    return OK;
}

static Frame *push(Stack *st, uint8_t kind, const Node *n) {
    if (st->depth == GRAMMAR_MAX_DEPTH) return NULL;
    Frame *f = &st->f[st->depth++];
    *f = (Frame){.kind = kind, .node = n};
    return f;
}

/* The value on top is whole: pop it and move its parent on. */
static void value_done(Stack *st) {
    Frame *p = &st->f[--st->depth - 1];
    p->ws = p->nl = 0;
    if (p->kind == F_OBJECT) p->sub = O_AFTER;
    else if (p->kind == F_ARRAY) p->sub = A_AFTER, p->count++;
    else p->sub = st->g->suffix[0] ? R_SUFFIX : R_DONE, p->pos = 0;
}

/* Matching a text against a list of candidates (literals, an object's keys):
 * list[lo..hi] that share the f->pos bytes read so far with list[f->cand];
 * the first one whose next byte is c, or -1. */
static int next_candidate(char *const *list, int lo, int hi, const Frame *f, uint8_t c) {
    const char *cur = list[f->cand];
    for (int j = lo; j <= hi; j++)
        if ((int)strlen(list[j]) > f->pos && strncmp(list[j], cur, (size_t)f->pos) == 0 && (uint8_t)list[j][f->pos] == c)
            return j;
    return -1;
}

/* Is the text read so far one of the literals, whole? */
static bool literal_whole(const Frame *f) {
    for (int j = 0; j < f->node->n_lits; j++)
        if ((int)strlen(f->node->lits[j]) == f->pos && strncmp(f->node->lits[j], f->node->lits[f->cand], (size_t)f->pos) == 0)
            return true;
    return false;
}

/* Literals (true, false, null, enum values). */
static int literal_step(Stack *st, Frame *f, uint8_t c) {
    int j = next_candidate(f->node->lits, 0, f->node->n_lits - 1, f, c);
    if (j >= 0) return f->cand = (int16_t)j, f->pos++, OK;
    if (literal_whole(f)) return value_done(st), AGAIN;   /* c belongs to the parent */
    return FAIL;
}

/* The first byte of a value decides which kind it is. */
static int value_step(Stack *st, Frame *f, uint8_t c) {
    const Node *n = f->node;
    if (is_ws(c)) return space(f, c);
    f->ws = f->nl = 0;
    if (n->n_lits || ((c == 't' || c == 'f') && (n->types & T_BOOLEAN)) || (c == 'n' && (n->types & T_NULL))) {
        f->kind = F_LITERAL, f->node = n->n_lits ? n : c == 'n' ? &NULLS : &BOOLS, f->cand = 0, f->pos = 0;
        return literal_step(st, f, c) == OK ? OK : FAIL;
    }
    if (c == '{' && (n->types & T_OBJECT)) return f->kind = F_OBJECT, f->sub = O_OPEN, f->count = 0, OK;
    if (c == '[' && (n->types & T_ARRAY)) return f->kind = F_ARRAY, f->sub = A_OPEN, f->count = 0, OK;
    if (c == '"' && (n->types & T_STRING)) return f->kind = F_STRING, f->sub = S_CHAR, f->count = 0, OK;
    if ((c == '-' || is_digit(c)) && (n->types & (T_NUMBER | T_INTEGER))) {
        f->kind = F_NUMBER, f->flag = !(n->types & T_NUMBER), f->count = 1;
        f->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
        return OK;
    }
    return FAIL;
}

/* Is a property from index i on required (so the object cannot close yet)? */
static bool required_from(const Node *n, int i) {
    for (; i < n->n_props; i++)
        if (n->required[i]) return true;
    return false;
}

/* The last property a key may name when the next one may be i: up to the first required one. */
static int last_allowed(const Node *n, int i) {
    while (i < n->n_props - 1 && !n->required[i]) i++;
    return i;
}

/* A listed object's key: the candidates are its properties from f->count to
 * last_allowed, matched byte by byte against their JSON text. */
static int key_step(Frame *f, uint8_t c) {
    const Node *n = f->node;
    int j = next_candidate(n->keys, f->count, last_allowed(n, f->count), f, c);
    if (j < 0) return FAIL;
    f->cand = (int16_t)j, f->pos++;
    if (n->keys[j][f->pos] == '\0') f->sub = O_COLON;
    return OK;
}

static int object_step(Stack *st, Frame *f, uint8_t c) {
    const Node *n = f->node;
    if (f->sub == O_KEY) return key_step(f, c);
    if (is_ws(c)) return space(f, c);
    f->ws = f->nl = 0;
    switch (f->sub) {
    case O_OPEN:
    case O_COMMA:
        if (c == '}' && f->sub == O_OPEN && !required_from(n, 0)) return value_done(st), OK;
        if (c != '"') return FAIL;
        f->sub = O_KEY;
        if (n->listed) return f->count < n->n_props ? (f->cand = (int16_t)f->count, f->pos = 1, OK) : FAIL;
        Frame *k = push(st, F_STRING, &ANY); /* any key: a string; it sets O_COLON when it ends */
        return k ? (k->flag = 1, OK) : FAIL;
    case O_COLON:
        if (c != ':') return FAIL;
        f->sub = O_VALUE;
        return push(st, F_VALUE, n->listed ? n->props[f->cand] : &ANY) ? OK : FAIL;
    case O_AFTER:
        if (c == ',') {
            if (n->listed && f->cand + 1 >= n->n_props) return FAIL;
            f->count = n->listed ? f->cand + 1 : 0;
            f->sub = O_COMMA;
            return OK;
        }
        if (c == '}' && !(n->listed && required_from(n, f->cand + 1))) return value_done(st), OK;
        return FAIL;
    }
    return FAIL;
}

static int array_step(Stack *st, Frame *f, uint8_t c) {
    const Node *n = f->node;
    if (is_ws(c)) return space(f, c);
    f->ws = f->nl = 0;
    bool room = n->max_items < 0 || f->count < n->max_items;
    if (c == ']' && f->count >= n->min_items && (f->sub == A_OPEN || f->sub == A_AFTER)) return value_done(st), OK;
    if (f->sub == A_OPEN && room) return f->sub = A_ITEM, push(st, F_VALUE, n->items) ? AGAIN : FAIL;
    if (f->sub == A_AFTER && c == ',' && room) return f->sub = A_ITEM, push(st, F_VALUE, n->items) ? OK : FAIL;
    return FAIL;
}

/* Inside a string: UTF-8 checked byte by byte, escapes, the length in characters. */
static int string_step(Stack *st, Frame *f, uint8_t c) {
    int max = f->flag ? GRAMMAR_MAX_STRING : f->node->max_len;
    if (f->more) {
        if (c < f->lo || c > f->hi) return FAIL;
        f->more--, f->lo = 0x80, f->hi = 0xbf;
        return OK;
    }
    if (f->sub == S_ESC) {
        if (c == 'u') return f->sub = S_HEX, f->pos = 4, OK;
        if (!c || !strchr("\"\\/bfnrt", c)) return FAIL;
        return f->sub = S_CHAR, OK;
    }
    if (f->sub == S_HEX) {
        if (!is_digit(c) && !((c | 0x20) >= 'a' && (c | 0x20) <= 'f')) return FAIL;
        if (--f->pos == 0) f->sub = S_CHAR;
        return OK;
    }
    if (c == '"') {
        if (f->count < (f->flag ? 0 : f->node->min_len)) return FAIL;
        if (!f->flag) return value_done(st), OK;
        st->depth--;   /* an object's key: the object wants ':' next */
        st->f[st->depth - 1].sub = O_COLON;
        return OK;
    }
    if (c < 0x20 || f->count >= max) return FAIL;
    f->count++;   /* a character starts */
    if (c == '\\') return f->sub = S_ESC, OK;
    if (c < 0x80) return OK;
    f->lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    f->hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    f->more = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    return f->more ? OK : FAIL;
}

static bool number_whole(const Frame *f) {
    return f->sub == N_ZERO || f->sub == N_INT || f->sub == N_FRAC || f->sub == N_EXP;
}

/* JSON's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, integers without the last two. */
static int number_step(Stack *st, Frame *f, uint8_t c) {
    int next = -1;
    bool d = is_digit(c), frac = !f->flag && c == '.', exp = !f->flag && (c == 'e' || c == 'E');
    switch (f->sub) {
    case N_MINUS: next = d ? (c == '0' ? N_ZERO : N_INT) : -1; break;
    case N_ZERO: next = frac ? N_DOT : exp ? N_E : -1; break;
    case N_INT: next = d ? N_INT : frac ? N_DOT : exp ? N_E : -1; break;
    case N_DOT: next = d ? N_FRAC : -1; break;
    case N_FRAC: next = d ? N_FRAC : exp ? N_E : -1; break;
    case N_E: next = d ? N_EXP : (c == '+' || c == '-') ? N_ESIGN : -1; break;
    case N_ESIGN:
    case N_EXP: next = d ? N_EXP : -1; break;
    }
    if (next >= 0) return f->count < GRAMMAR_MAX_NUMBER ? (f->count++, f->sub = (uint8_t)next, OK) : FAIL;
    return number_whole(f) ? (value_done(st), AGAIN) : FAIL;
}

static int root_step(Stack *st, Frame *f, uint8_t c) {
    const char *lit = f->sub == R_PREFIX ? st->g->prefix : f->sub == R_SUFFIX ? st->g->suffix : "";
    if (f->sub == R_DONE || (uint8_t)lit[f->pos] != c || !c) return FAIL;
    if (lit[++f->pos]) return OK;
    if (f->sub == R_SUFFIX) return f->sub = R_DONE, OK;
    f->sub = R_VALUE;
    return push(st, F_VALUE, st->g->root) ? OK : FAIL;
}

/* Reads one byte: false if it leaves the grammar (st is then undefined). */
static bool step(Stack *st, uint8_t c) {
    for (;;) {
        Frame *f = &st->f[st->depth - 1];
        int r;
        switch (f->kind) {
        case F_ROOT: r = root_step(st, f, c); break;
        case F_VALUE: r = value_step(st, f, c); break;
        case F_OBJECT: r = object_step(st, f, c); break;
        case F_ARRAY: r = array_step(st, f, c); break;
        case F_STRING: r = string_step(st, f, c); break;
        case F_NUMBER: r = number_step(st, f, c); break;
        default: r = literal_step(st, f, c); break;
        }
        if (r != AGAIN) return r == OK;
    }
}

static void stack_copy(Stack *dst, const Stack *src) {
    dst->g = src->g;
    dst->depth = src->depth;
    memcpy(dst->f, src->f, sizeof *src->f * (size_t)src->depth);
}

/* Could the document end here? A number or a literal may be whole without
 * knowing it yet ("12" could go on as "123"). */
static bool stack_complete(const Stack *src) {
    Stack st;
    stack_copy(&st, src);
    for (;;) {
        Frame *f = &st.f[st.depth - 1];
        if (f->kind == F_ROOT) return f->sub == R_DONE;
        if (!(f->kind == F_NUMBER && number_whole(f)) && !(f->kind == F_LITERAL && literal_whole(f))) return false;
        value_done(&st);
    }
}

GrammarState *grammar_start(const Grammar *g) {
    GrammarState *s = xcalloc(1, sizeof *s);
    s->st.g = g;
    Frame *root = push(&s->st, F_ROOT, NULL);
    if (!g->prefix[0]) root->sub = R_VALUE, push(&s->st, F_VALUE, g->root);
    return s;
}

void grammar_state_free(GrammarState *s) {
    if (!s) return;
    free(s->allowed);
    free(s);
}

bool grammar_feed(GrammarState *s, const char *text, size_t n) {
    Stack st;
    stack_copy(&st, &s->st);
    for (size_t i = 0; i < n; i++)
        if (!step(&st, (uint8_t)text[i])) return false;
    stack_copy(&s->st, &st);
    return true;
}

bool grammar_complete(const GrammarState *s) { return stack_complete(&s->st); }

/* ---- the mask: the automaton walks the trie ------------------------------------------------ */

typedef struct {
    const TokenTrie *trie;
    uint8_t *allowed;   /* [n_vocab] */
    int n;              /* tokens allowed so far */
} Walk;

static void allow(Walk *w, int lo, int hi) {
    for (int k = lo; k < hi; k++) w->allowed[w->trie->order[k]] = 1;
    w->n += hi - lo;
}

/* Characters the string on top may still take, or -1 when st is not inside a
 * string between characters (where any plain text may follow). */
static int string_room(const Stack *st) {
    const Frame *f = &st->f[st->depth - 1];
    if (f->kind != F_STRING || f->sub != S_CHAR || f->more) return -1;
    return (f->flag ? GRAMMAR_MAX_STRING : f->node->max_len) - f->count;
}

/* st has read the depth bytes leading to node; allows every token below it
 * that keeps the text a prefix of a document. (st is as it came when walk returns.) */
static void walk(Walk *w, int32_t node, int depth, Stack *st) {
    const TrieNode *nd = &w->trie->nodes[node];
    allow(w, nd->lo, nd->end);
    int room = string_room(st);
    for (int32_t c = nd->child; c >= 0; c = w->trie->nodes[c].sibling) {
        const TrieNode *ch = &w->trie->nodes[c];
        /* inside a string, a subtree of plain text (no '"', '\\', control bytes, broken
         * UTF-8) that fits is allowed whole, without a visit */
        if (room >= 0 && ch->classes == 0 && ch->max_len - depth <= room) {
            allow(w, ch->lo, ch->hi);
            continue;
        }
        if (room > 0 && ch->byte >= 0x20 && ch->byte < 0x7f && ch->byte != '"' && ch->byte != '\\') {
            st->f[st->depth - 1].count++;   /* one more plain character: the only change, undone after */
            walk(w, c, depth + 1, st);
            st->f[st->depth - 1].count--;
            continue;
        }
        Stack next;
        stack_copy(&next, st);
        if (step(&next, ch->byte)) walk(w, c, depth + 1, &next);
    }
}

int grammar_mask(GrammarState *s, const TokenTrie *trie, float *logits) {
    int V = trie->n_vocab;
    if (!s->allowed || s->n_allowed != V) {
        free(s->allowed);
        s->allowed = xmalloc((size_t)V);
        s->n_allowed = V;
    }
    memset(s->allowed, 0, (size_t)V);
    Walk w = {.trie = trie, .allowed = s->allowed};
    walk(&w, 0, 0, &s->st);
    bool end = stack_complete(&s->st);
    for (int i = 0; i < trie->n_eog; i++) {   /* decided by id, not by bytes */
        int32_t id = trie->eog[i];
        w.n += (int)end - (int)s->allowed[id];
        s->allowed[id] = end;
    }
    for (int id = 0; id < V; id++)
        if (!s->allowed[id]) logits[id] = -INFINITY;
    return w.n;
}

bool grammar_accept(GrammarState *s, const TokenTrie *trie, int32_t id) {
    if (id < 0 || id >= trie->n_vocab) return false;
    for (int i = 0; i < trie->n_eog; i++)
        if (trie->eog[i] == id) return stack_complete(&s->st);
    int n = token_trie_len(trie, id);
    return n > 0 && grammar_feed(s, token_trie_bytes(trie, id), (size_t)n);
}
