/* cfuncs.c: see cfuncs.h. */
#include "cfuncs.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "chapfs.h"

static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* If a comment, string or character literal starts at i, the index after it;
 * else i. An unterminated one ends at the end of its line (strings) or of the
 * text (block comments), so one typo cannot swallow the whole file. */
static size_t skip_lexeme(const char *s, size_t n, size_t i) {
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
        const char *e = strstr(s + i + 2, "*/");
        return e && (size_t)(e - s) < n ? (size_t)(e - s) + 2 : n;
    }
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
        while (i < n && s[i] != '\n') i++;
        return i;
    }
    if (s[i] == '"' || s[i] == '\'') {
        char q = s[i];
        size_t j = i + 1;
        while (j < n && s[j] != q && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
        return j < n && s[j] == q ? j + 1 : (j < n ? j : n);
    }
    return i;
}

/* Whether only blanks precede i on its line: where a `#` starts a directive. */
static bool at_line_start(const char *s, size_t i) {
    while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) i--;
    return i == 0 || s[i - 1] == '\n';
}

/* From a directive's `#` to its end of line, following backslash continuations.
 * Quotes are only skipped as strings: `#error don't` has no char literal. */
static size_t skip_directive(const char *s, size_t n, size_t i) {
    while (i < n && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
            i += s[i + 1] == '\r' && i + 2 < n && s[i + 2] == '\n' ? 3 : 2;
            continue;
        }
        size_t j = s[i] == '\'' ? i : skip_lexeme(s, n, i);
        i = j > i ? j : i + 1;
    }
    return i;
}

/* s[i] is `{`: the index after its matching `}` (or n if there is none). */
static size_t skip_block(const char *s, size_t n, size_t i) {
    int depth = 0;
    while (i < n) {
        size_t j = skip_lexeme(s, n, i);
        if (j != i) {
            i = j;
            continue;
        }
        if (s[i] == '#' && at_line_start(s, i)) {
            i = skip_directive(s, n, i);
            continue;
        }
        if (s[i] == '{') depth++;
        if (s[i] == '}' && --depth == 0) return i + 1;
        i++;
    }
    return n;
}

/* Skips blanks and comments from i; returns the next significant index (<= b). */
static size_t skip_space(const char *s, size_t b, size_t i) {
    while (i < b) {
        if (isspace((unsigned char)s[i])) {
            i++;
            continue;
        }
        if (s[i] == '/' && i + 1 < b && (s[i + 1] == '*' || s[i + 1] == '/')) {
            i = skip_lexeme(s, b, i);
            continue;
        }
        break;
    }
    return i;
}

/* s[i] is `(`: the index after its matching `)`, within [i, b). */
static size_t skip_parens(const char *s, size_t b, size_t i) {
    int depth = 0;
    while (i < b) {
        size_t j = skip_lexeme(s, b, i);
        if (j != i) {
            i = j;
            continue;
        }
        if (s[i] == '(') depth++;
        if (s[i] == ')' && --depth == 0) return i + 1;
        i++;
    }
    return b;
}

static bool is_attribute_word(const char *s, size_t len) {
    static const char *const words[] = {"__attribute__", "__attribute", "__declspec", "_Alignas", "alignas",
                                        "__asm__", "asm", NULL};
    for (int i = 0; words[i]; i++)
        if (strlen(words[i]) == len && strncmp(s, words[i], len) == 0) return true;
    return false;
}

/* Text of [a, b) with runs of blanks collapsed to one space: "TEST(x)". */
static char *collapse_blanks(const char *s, size_t a, size_t b) {
    char *out = chapfs_xmalloc(b - a + 1);
    size_t n = 0;
    for (size_t i = a; i < b; i++) {
        if (isspace((unsigned char)s[i])) {
            if (n && out[n - 1] != ' ') out[n++] = ' ';
        } else {
            out[n++] = s[i];
        }
    }
    out[n] = 0;
    return out;
}

/* Inside a declarator group "(*name)(...)": the name after the stars. */
static char *group_name(const char *s, size_t b, size_t i) {
    for (;;) {
        i = skip_space(s, b, i);
        if (i < b && s[i] == '*') {
            i++;
            continue;
        }
        size_t p = i;
        while (i < b && is_ident_char(s[i])) i++;
        if (i == p) return NULL;
        static const char *const quals[] = {"const", "volatile", "restrict", NULL};
        bool qual = false;
        for (int q = 0; quals[q]; q++)
            qual |= strlen(quals[q]) == i - p && strncmp(s + p, quals[q], i - p) == 0;
        if (!qual) return chapfs_strndup(s + p, i - p);
    }
}

/* The name a definition header [a, b) declares: the identifier before the
 * first parameter list, skipping attributes. NULL if there is none. */
static char *header_name(const char *s, size_t a, size_t b) {
    size_t last = 0, last_len = 0;
    int idents = 0;
    size_t i = a;
    while ((i = skip_space(s, b, i)) < b) {
        if (is_ident_start(s[i])) {
            size_t p = i;
            while (i < b && is_ident_char(s[i])) i++;
            if (is_attribute_word(s + p, i - p)) {
                size_t k = skip_space(s, b, i);
                if (k < b && s[k] == '(') i = skip_parens(s, b, k);
                continue;
            }
            last = p, last_len = i - p, idents++;
            continue;
        }
        if (s[i] == '(') {
            size_t k = skip_space(s, b, i + 1);
            if (k < b && s[k] == '*') return group_name(s, b, k);
            if (!last_len) return NULL;
            if (idents == 1) return collapse_blanks(s, last, skip_parens(s, b, i)); /* a macro: TEST(x) { */
            return chapfs_strndup(s + last, last_len);
        }
        last_len = 0; /* `*` and the like: the name must be right before `(` */
        size_t j = skip_lexeme(s, b, i);
        i = j > i ? j : i + 1;
    }
    return NULL;
}

static int line_at(const char *s, size_t i) {
    int line = 1;
    for (size_t k = 0; k < i; k++) line += s[k] == '\n';
    return line;
}

static void add_func(CFuncList *l, const char *s, size_t start, size_t end, char *name) {
    l->funcs = chapfs_xrealloc(l->funcs, sizeof(CFunc) * (size_t)(l->n + 1));
    int same = 1;
    for (int i = 0; i < l->n; i++) same += strcmp(l->funcs[i].name, name) == 0;
    l->funcs[l->n++] = (CFunc){
        .name = name,
        .key = same == 1 ? chapfs_strdup(name) : chapfs_printf("%s#%d", name, same),
        .start = start,
        .end = end,
        .line = line_at(s, start),
        .end_line = line_at(s, end > start ? end - 1 : start),
    };
}

/* State of the top-level scan: the declaration being read so far. */
typedef struct {
    long start;  /* where it begins, -1 between declarations */
    int parens;  /* ( and [ depth */
    bool has_eq; /* an initializer, so a `{` is not a body */
    char last;   /* its last significant character */
} Decl;

/* A `{` at s[i] with the declaration d before it: records a function if it
 * is one; returns the index after the block. */
static size_t take_block(const char *s, size_t n, size_t i, Decl *d, CFuncList *out) {
    size_t end = skip_block(s, n, i);
    char *name = !d->has_eq && d->last == ')' ? header_name(s, (size_t)d->start, i) : NULL;
    if (name) {
        add_func(out, s, (size_t)d->start, end, name);
        d->start = -1;
    } else {
        d->last = '}'; /* a struct, union, enum or initializer: the declaration goes on to its `;` */
    }
    return end;
}

void cfuncs_split(const char *s, size_t n, CFuncList *out) {
    *out = (CFuncList){0};
    Decl d = {.start = -1};
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        size_t j = skip_lexeme(s, n, i);
        if (j != i) {
            if ((c == '"' || c == '\'') && d.start < 0) d = (Decl){.start = (long)i};
            if (c == '"' || c == '\'') d.last = c;
            i = j;
            continue;
        }
        if (c == '#' && at_line_start(s, i)) {
            i = skip_directive(s, n, i);
            continue;
        }
        if (isspace((unsigned char)c)) {
            i++;
            continue;
        }
        if (d.start < 0) d = (Decl){.start = (long)i};
        if (c == '{' && d.parens == 0) {
            i = take_block(s, n, i, &d, out);
            continue;
        }
        if (c == '(' || c == '[') d.parens++;
        if ((c == ')' || c == ']') && d.parens > 0) d.parens--;
        if (c == '=' && d.parens == 0) d.has_eq = true;
        d.last = c;
        if ((c == ';' && d.parens == 0) || c == '}') d.start = -1;
        i++;
    }
}

void cfuncs_free(CFuncList *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->funcs[i].name);
        free(l->funcs[i].key);
    }
    free(l->funcs);
    *l = (CFuncList){0};
}

int cfuncs_find(const CFuncList *l, const char *key) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->funcs[i].key, key) == 0) return i;
    return -1;
}

bool cfuncs_is_c_file(const char *path) {
    size_t n = strlen(path);
    return n > 2 && path[n - 2] == '.' && (path[n - 1] == 'c' || path[n - 1] == 'h');
}

/* Appends [a, b) of s to the buffer, recording each new line's source line. */
typedef struct {
    char *text;
    size_t len, cap;
    int *line_of;
    int lines, lines_cap;
} Skel;

static void skel_line_start(Skel *k, int src_line) {
    if (k->lines == k->lines_cap) {
        k->lines_cap = k->lines_cap ? 2 * k->lines_cap : 64;
        k->line_of = chapfs_xrealloc(k->line_of, sizeof(int) * (size_t)k->lines_cap);
    }
    k->line_of[k->lines++] = src_line;
}

static void skel_append(Skel *k, const char *s, size_t a, size_t b, int src_line) {
    if (k->len + (b - a) + 1 > k->cap) {
        k->cap = (k->len + (b - a) + 1) * 2;
        k->text = chapfs_xrealloc(k->text, k->cap);
    }
    for (size_t i = a; i < b; i++) {
        if (k->len == 0 || k->text[k->len - 1] == '\n') skel_line_start(k, src_line);
        k->text[k->len++] = s[i];
        src_line += s[i] == '\n';
    }
    k->text[k->len] = 0;
}

char *cfuncs_skeleton(const char *s, size_t n, const CFuncList *l, int **line_of) {
    Skel k = {0};
    size_t at = 0;
    int line = 1;
    for (int f = 0; f < l->n; f++) {
        const CFunc *fn = &l->funcs[f];
        skel_append(&k, s, at, fn->start, line);
        char *mark = chapfs_printf("[function %s]", fn->name);
        skel_append(&k, mark, 0, strlen(mark), fn->line);
        free(mark);
        at = fn->end;
        line = fn->end_line;
    }
    skel_append(&k, s, at, n, line);
    if (!k.text) k.text = chapfs_strdup("");
    if (line_of) *line_of = k.line_of;
    else free(k.line_of);
    return k.text;
}

static bool same_text(const char *a_src, const CFunc *a, const char *b_src, const CFunc *b) {
    return a->end - a->start == b->end - b->start && memcmp(a_src + a->start, b_src + b->start, a->end - a->start) == 0;
}

/* Appends the removed old functions from index i on, up to the next one that the new file still has. */
static int push_removed(const CFuncList *old, const CFuncList *new, int i, FnDiff *out, int n) {
    for (; i < old->n && cfuncs_find(new, old->funcs[i].key) < 0; i++)
        out[n++] = (FnDiff){old->funcs[i].name, old->funcs[i].key, FN_REMOVED, &old->funcs[i], NULL};
    return n;
}

int cfuncs_compare(const char *old_src, const CFuncList *old, const char *new_src, const CFuncList *new,
                   FnDiff **out) {
    FnDiff *d = chapfs_xmalloc(sizeof(FnDiff) * (size_t)(old->n + new->n));
    int n = push_removed(old, new, 0, d, 0);
    for (int j = 0; j < new->n; j++) {
        const CFunc *nf = &new->funcs[j];
        int i = cfuncs_find(old, nf->key);
        if (i < 0) {
            d[n++] = (FnDiff){nf->name, nf->key, FN_ADDED, NULL, nf};
            continue;
        }
        const CFunc *of = &old->funcs[i];
        d[n++] = (FnDiff){nf->name, nf->key, same_text(old_src, of, new_src, nf) ? FN_SAME : FN_CHANGED, of, nf};
        n = push_removed(old, new, i + 1, d, n);
    }
    *out = d;
    return n;
}

const char *cfuncs_status_name(FnStatus s) {
    switch (s) {
    case FN_SAME: return "unchanged";
    case FN_CHANGED: return "changed";
    case FN_ADDED: return "added";
    case FN_REMOVED: return "removed";
    }
    return "?";
}
