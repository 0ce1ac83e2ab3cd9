/* test_linediff.c: the LCS line diff (tools/chapters/linediff.c). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "linediff.h"

/* The diff of two texts as a string: ' ', '-' or '+' per op. */
static void check_diff(const char *a, const char *b, const char *want) {
    Lines la, lb;
    lines_split(a, strlen(a), &la);
    lines_split(b, strlen(b), &lb);
    LdOp *ops;
    int n = linediff(&la, &lb, &ops);
    char got[256] = "";
    for (int i = 0; i < n && i < 255; i++) got[i] = " -+"[ops[i].kind];
    got[n < 255 ? n : 255] = 0;
    CHECK_STR(got, want);
    free(ops);
    lines_free(&la);
    lines_free(&lb);
}

TEST(linediff_basics) {
    check_diff("a\nb\nc\n", "a\nb\nc\n", "   ");
    check_diff("a\nb\nc\n", "a\nx\nc\n", " -+ ");
    check_diff("a\nc\n", "a\nb\nc\n", " + ");
    check_diff("a\nb\nc\n", "a\nc\n", " - ");
    check_diff("", "a\n", "+");
    check_diff("a\n", "", "-");
    check_diff("a\nb", "a\nb\n", "  "); /* a missing final newline is not a line of its own */
}

TEST(linediff_lines_split) {
    Lines l;
    lines_split("x\n\ny", 4, &l);
    CHECK_EQ_INT(l.n, 3);
    CHECK_EQ_INT(l.lines[1].len, 0);
    CHECK_EQ_INT(l.lines[2].len, 1);
    lines_free(&l);
}

/* LCS length by the textbook table, to compare against. */
static int lcs(const int *a, int n, const int *b, int m) {
    int t[17][17] = {{0}};
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--)
            t[i][j] = a[i] == b[j] ? t[i + 1][j + 1] + 1 : (t[i + 1][j] > t[i][j + 1] ? t[i + 1][j] : t[i][j + 1]);
    return t[0][0];
}

/* Random texts over a tiny alphabet: the script rebuilds both sides and is minimal. */
TEST(linediff_random_minimal) {
    static const char *const words[] = {"a", "b", "c"};
    unsigned seed = 12345;
    for (int trial = 0; trial < 300; trial++) {
        int av[16], bv[16], n, m;
        seed = seed * 1103515245u + 12345u, n = (int)(seed >> 16) % 17;
        seed = seed * 1103515245u + 12345u, m = (int)(seed >> 16) % 17;
        Line al[16], bl[16];
        for (int i = 0; i < n; i++) seed = seed * 1103515245u + 12345u, av[i] = (int)(seed >> 16) % 3;
        for (int j = 0; j < m; j++) seed = seed * 1103515245u + 12345u, bv[j] = (int)(seed >> 16) % 3;
        for (int i = 0; i < n; i++) al[i] = (Line){words[av[i]], 1};
        for (int j = 0; j < m; j++) bl[j] = (Line){words[bv[j]], 1};
        Lines a = {al, n}, b = {bl, m};
        LdOp *ops;
        int k = linediff(&a, &b, &ops), next_a = 0, next_b = 0, eq = 0;
        bool ordered = true;
        for (int i = 0; i < k; i++) {
            if (ops[i].a >= 0) ordered &= ops[i].a == next_a++;
            if (ops[i].b >= 0) ordered &= ops[i].b == next_b++;
            if (ops[i].kind == LD_EQ) eq++, ordered &= av[ops[i].a] == bv[ops[i].b];
        }
        CHECK_MSG(ordered && next_a == n && next_b == m, "trial %d: the script does not rebuild both sides", trial);
        CHECK_EQ_INT(eq, lcs(av, n, bv, m));
        free(ops);
        if (test_failed_now()) return;
    }
}
