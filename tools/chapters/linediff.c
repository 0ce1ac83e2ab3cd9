/* linediff.c: see linediff.h. */
#include "linediff.h"

#include <stdlib.h>
#include <string.h>

#include "chapfs.h"

/* Beyond this many table cells (ints), give up on a minimal diff. */
#define LINEDIFF_MAX_CELLS (8u << 20)

void lines_split(const char *s, size_t len, Lines *out) {
    int cap = 16;
    *out = (Lines){chapfs_xmalloc(sizeof(Line) * (size_t)cap), 0};
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '\n') continue;
        if (i == len && start == len) break; /* no empty line after a final '\n' */
        if (out->n == cap) out->lines = chapfs_xrealloc(out->lines, sizeof(Line) * (size_t)(cap *= 2));
        out->lines[out->n++] = (Line){s + start, (int)(i - start)};
        start = i + 1;
    }
}

void lines_free(Lines *l) {
    free(l->lines);
    *l = (Lines){0};
}

static int line_eq(const Line *x, const Line *y) { return x->len == y->len && memcmp(x->s, y->s, (size_t)x->len) == 0; }

typedef struct {
    LdOp *ops;
    int n;
} Script;

static void emit(Script *sc, LdKind k, int a, int b) { sc->ops[sc->n++] = (LdOp){k, a, b}; }

/* Emits a changed run: old lines [a0, a1) removed, new lines [b0, b1) added. */
static void emit_change(Script *sc, int a0, int a1, int b0, int b1) {
    for (int i = a0; i < a1; i++) emit(sc, LD_DEL, i, -1);
    for (int j = b0; j < b1; j++) emit(sc, LD_INS, -1, j);
}

/* LCS over old [a0, a1) and new [b0, b1), then a walk that turns the table
 * into ops, grouping each run of removals and additions. */
static void diff_middle(Script *sc, const Lines *a, const Lines *b, int a0, int a1, int b0, int b1) {
    int n = a1 - a0, m = b1 - b0;
    if ((size_t)(n + 1) * (size_t)(m + 1) > LINEDIFF_MAX_CELLS) {
        emit_change(sc, a0, a1, b0, b1);
        return;
    }
    /* t[i][j] = LCS length of old[a0+i..a1) and new[b0+j..b1) */
    int w = m + 1;
    int *t = calloc((size_t)(n + 1) * (size_t)w, sizeof(int));
    if (!t) {
        emit_change(sc, a0, a1, b0, b1);
        return;
    }
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--)
            t[i * w + j] = line_eq(&a->lines[a0 + i], &b->lines[b0 + j]) ? t[(i + 1) * w + j + 1] + 1
                           : t[(i + 1) * w + j] >= t[i * w + j + 1] ? t[(i + 1) * w + j]
                                                                    : t[i * w + j + 1];
    int i = 0, j = 0, ci = 0, cj = 0; /* ci, cj: where the pending changed run began */
    while (i < n || j < m) {
        if (i < n && j < m && line_eq(&a->lines[a0 + i], &b->lines[b0 + j])) {
            emit_change(sc, a0 + ci, a0 + i, b0 + cj, b0 + j);
            emit(sc, LD_EQ, a0 + i, b0 + j);
            ci = ++i, cj = ++j;
        } else if (j == m || (i < n && t[(i + 1) * w + j] >= t[i * w + j + 1])) {
            i++;
        } else {
            j++;
        }
    }
    emit_change(sc, a0 + ci, a1, b0 + cj, b1);
    free(t);
}

int linediff(const Lines *a, const Lines *b, LdOp **ops) {
    Script sc = {chapfs_xmalloc(sizeof(LdOp) * (size_t)(a->n + b->n + 1)), 0};
    int pre = 0;
    while (pre < a->n && pre < b->n && line_eq(&a->lines[pre], &b->lines[pre])) pre++;
    int suf = 0;
    while (suf < a->n - pre && suf < b->n - pre && line_eq(&a->lines[a->n - 1 - suf], &b->lines[b->n - 1 - suf]))
        suf++;
    for (int i = 0; i < pre; i++) emit(&sc, LD_EQ, i, i);
    diff_middle(&sc, a, b, pre, a->n - suf, pre, b->n - suf);
    for (int k = suf; k > 0; k--) emit(&sc, LD_EQ, a->n - k, b->n - k);
    *ops = sc.ops;
    return sc.n;
}
