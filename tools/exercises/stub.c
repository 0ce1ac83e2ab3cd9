/* stub.c: see stub.h. */
#include "stub.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Whether the words of type text t are all plain scalar names. */
static bool is_scalar(const char *t) {
    static const char *const words[] = {"char", "short", "int", "long", "signed", "unsigned", "float", "double",
                                         "bool", "_Bool", "const", "volatile", NULL};
    for (const char *p = t; *p;) {
        while (*p == ' ') p++;
        const char *q = p;
        while (is_ident(*q)) q++;
        if (q == p) return *p == 0;
        size_t n = (size_t)(q - p);
        bool known = n > 2 && strncmp(q - 2, "_t", 2) == 0; /* size_t, int32_t, ... */
        for (int i = 0; words[i] && !known; i++) known = strlen(words[i]) == n && strncmp(p, words[i], n) == 0;
        if (!known) return false;
        p = q;
    }
    return true;
}

char *zero_return(const char *sig, const char *name) {
    /* The return type is what precedes the name, less storage classes and attributes. */
    size_t nl = strlen(name);
    const char *at = NULL;
    for (const char *p = sig; (p = strstr(p, name)); p += nl)
        if ((p == sig || !is_ident(p[-1])) && !is_ident(p[nl])) {
            at = p;
            break;
        }
    if (!at) at = sig;
    char *type = chapfs_xmalloc((size_t)(at - sig) + 1);
    size_t n = 0;
    for (const char *p = sig; p < at;) {
        const char *q = p;
        while (q < at && is_ident(*q)) q++;
        if (q == p) {
            if (!isspace((unsigned char)*p)) type[n++] = *p;
            else if (n && type[n - 1] != ' ') type[n++] = ' ';
            p++;
            continue;
        }
        size_t w = (size_t)(q - p);
        bool drop = (w == 6 && !strncmp(p, "static", 6)) || (w == 6 && !strncmp(p, "inline", 6)) ||
                    (w == 6 && !strncmp(p, "extern", 6)) || (w == 9 && !strncmp(p, "_Noreturn", 9));
        if (w == 13 && !strncmp(p, "__attribute__", 13)) { /* skip its (( ... )) */
            int depth = 0;
            for (; q < at; q++) {
                if (*q == '(') depth++;
                if (*q == ')' && --depth == 0) {
                    q++;
                    break;
                }
            }
            drop = true;
        }
        if (!drop) {
            memcpy(type + n, p, w);
            n += w;
        }
        p = q;
    }
    while (n && type[n - 1] == ' ') n--;
    type[n] = 0;
    char *start = type;
    while (*start == ' ') start++;
    char *ret;
    if (strchr(start, '*')) ret = chapfs_strdup("return NULL;");
    else if (strcmp(start, "void") == 0 || !*start) ret = chapfs_strdup("");
    else if (is_scalar(start)) ret = chapfs_strdup("return 0;");
    else ret = chapfs_printf("return (%s){0};", start);
    free(type);
    return ret;
}

/* The stub that replaces an exercise's body. */
static char *stub_body(const Exercise *e, const char *name) {
    char *ret = zero_return(e->signature, name);
    char *body = chapfs_printf("{\n"
                               "    /* TODO exercise %s: write this function (see EXERCISES.md). */\n"
                               "    static int told;\n"
                               "    if (!told++) fprintf(stderr, \"exercise %s is not implemented yet\\n\");\n"
                               "%s%s%s"
                               "}",
                               e->id, e->id, *ret ? "    " : "", ret, *ret ? "\n" : "");
    free(ret);
    return body;
}

/* One replacement of src[start, end). */
typedef struct {
    size_t start, end;
    char *text;
} Edit;

static int cmp_edit(const void *a, const void *b) {
    size_t x = ((const Edit *)a)->start, y = ((const Edit *)b)->start;
    return x < y ? -1 : x > y;
}

/* src with the edits applied (they must not overlap). */
static char *apply_edits(const char *src, size_t len, Edit *ed, int n) {
    qsort(ed, (size_t)n, sizeof *ed, cmp_edit);
    size_t total = len + 1;
    for (int i = 0; i < n; i++) total += strlen(ed[i].text);
    char *out = chapfs_xmalloc(total);
    size_t o = 0, at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out + o, src + at, ed[i].start - at);
        o += ed[i].start - at;
        memcpy(out + o, ed[i].text, strlen(ed[i].text));
        o += strlen(ed[i].text);
        at = ed[i].end;
    }
    memcpy(out + o, src + at, len - at);
    out[o + len - at] = 0;
    return out;
}

/* Where to add #include <stdio.h>: after the last system #include before the
 * first function, else after the last #include there, else at the top. */
static size_t include_point(const char *src, size_t limit) {
    size_t any = 0, sys = 0;
    for (size_t i = 0; i < limit; i++) {
        if ((i == 0 || src[i - 1] == '\n') && strncmp(src + i, "#include", 8) == 0) {
            const char *nl = strchr(src + i, '\n');
            size_t after = nl ? (size_t)(nl - src) + 1 : limit;
            any = after;
            if (strncmp(src + i, "#include <", 10) == 0) sys = after;
        }
    }
    return sys ? sys : any;
}

char *stub_file(const char *file, const char *src, size_t len, const Exercise *exs, int n, StrList *problems) {
    CFuncList fl;
    cfuncs_split(src, len, &fl);
    Edit *ed = chapfs_xmalloc(sizeof(Edit) * (size_t)(n + 1));
    int ne = 0;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (strcmp(exs[i].file, file) != 0) continue;
        int k = cfuncs_find(&fl, exs[i].function);
        size_t body, end;
        if (k < 0 || !function_body(src, &fl.funcs[k], &body, &end)) {
            strlist_pushf(problems, "%s: no function %s to stub", file, exs[i].function);
            ok = false;
            continue;
        }
        ed[ne++] = (Edit){body, end, stub_body(&exs[i], fl.funcs[k].name)};
    }
    if (ne && !strstr(src, "#include <stdio.h>")) {
        size_t at = include_point(src, fl.n ? fl.funcs[0].start : len);
        ed[ne++] = (Edit){at, at, chapfs_strdup("#include <stdio.h> /* for the exercise stubs */\n")};
    }
    char *out = ok ? apply_edits(src, len, ed, ne) : NULL;
    for (int i = 0; i < ne; i++) free(ed[i].text);
    free(ed);
    cfuncs_free(&fl);
    return out;
}

char *replace_function(const char *dst, size_t dst_len, const char *ref, size_t ref_len, const char *key) {
    CFuncList df, rf;
    cfuncs_split(dst, dst_len, &df);
    cfuncs_split(ref, ref_len, &rf);
    int d = cfuncs_find(&df, key), r = cfuncs_find(&rf, key);
    char *out = NULL;
    if (d >= 0 && r >= 0) {
        const CFunc *x = &df.funcs[d], *y = &rf.funcs[r];
        Edit e = {x->start, x->end, chapfs_strndup(ref + y->start, y->end - y->start)};
        out = apply_edits(dst, dst_len, &e, 1);
        free(e.text);
    }
    cfuncs_free(&df);
    cfuncs_free(&rf);
    return out;
}
