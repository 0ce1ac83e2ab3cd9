/* test_cfuncs.c: the top-level function splitter (tools/chapters/cfuncs.c). */
#include <stdlib.h>
#include <string.h>

#include "cfuncs.h"
#include "chapfs.h"
#include "harness.h"

/* The keys of src's functions, space-separated (malloc'd). */
static char *keys_of(const char *src) {
    CFuncList l;
    cfuncs_split(src, strlen(src), &l);
    StrList k = {0};
    for (int i = 0; i < l.n; i++) strlist_push(&k, l.funcs[i].key);
    char *s = strlist_join(&k, " ");
    strlist_free(&k);
    cfuncs_free(&l);
    return s;
}

static void check_keys(const char *src, const char *want) {
    char *got = keys_of(src);
    CHECK_STR(got, want);
    free(got);
}

TEST(cfuncs_codebase_style) {
    const char *src =
        "/* a file comment with a brace { */\n"
        "#include <stdio.h>\n"
        "#define BLOCK(x) do { x; } while (0)\n"
        "#define LONG(x) \\\n    { x }\n"
        "typedef struct {\n    int a;\n} Thing;\n"
        "struct Named {\n    void (*fn)(int);\n};\n"
        "static const char *const NAMES[] = {\"a{\", \"b}\", NULL};\n"
        "int counter = 0;\n"
        "static int one_liner(int x) { return x + '}'; }\n"
        "\n"
        "/* Several lines of parameters. */\n"
        "static void multi_line(const Thing *t, int a,\n"
        "                       int b) {\n"
        "    if (a) {\n        puts(\"}\");\n    }\n"
        "}\n"
        "\n"
        "int public_fn(void)\n{\n    return 0; // }\n}\n"
        "float *pointer_return(int n) {\n    return NULL;\n}\n"
        "void (*handler_for(int sig))(int) {\n    return NULL;\n}\n"
        "__attribute__((unused)) static int with_attr(void) {\n    return 1;\n}\n"
        "TEST(macro_made) {\n    CHECK(1);\n}\n"
        "enum { A, B };\n";
    check_keys(src, "one_liner multi_line public_fn pointer_return handler_for with_attr TEST(macro_made)");
}

TEST(cfuncs_ranges_and_lines) {
    const char *src = "// c\nint f(void) {\n    return 1;\n}\n\nint g(void) { return 2; }\n";
    CFuncList l;
    cfuncs_split(src, strlen(src), &l);
    CHECK_EQ_INT(l.n, 2);
    if (l.n == 2) {
        CHECK(strncmp(src + l.funcs[0].start, "int f(void) {", 13) == 0);
        CHECK_EQ_INT(src[l.funcs[0].end - 1], '}');
        CHECK_EQ_INT(l.funcs[0].line, 2);
        CHECK_EQ_INT(l.funcs[0].end_line, 4);
        CHECK_EQ_INT(l.funcs[1].line, 6);
        CHECK_EQ_INT(l.funcs[1].end_line, 6);
    }
    cfuncs_free(&l);
}

/* The same name twice (say in #if branches) gets a second key. */
TEST(cfuncs_duplicate_names) {
    check_keys("#if A\nint f(void) {\n}\n#else\nint f(void) {\n}\n#endif\n", "f f#2");
}

TEST(cfuncs_unterminated_input_is_safe) {
    check_keys("int f(void) {\n  \"unterminated\n", "f");
    check_keys("/* never closed", "");
    check_keys("", "");
}

TEST(cfuncs_skeleton_marks_functions) {
    const char *src = "/* top */\nint f(void) {\n    return 1;\n}\n/* tail */\n";
    CFuncList l;
    cfuncs_split(src, strlen(src), &l);
    int *line_of = NULL;
    char *sk = cfuncs_skeleton(src, strlen(src), &l, &line_of);
    CHECK_STR(sk, "/* top */\n[function f]\n/* tail */\n");
    CHECK_EQ_INT(line_of[0], 1);
    CHECK_EQ_INT(line_of[1], 2);
    CHECK_EQ_INT(line_of[2], 5);
    free(sk);
    free(line_of);
    cfuncs_free(&l);
}

TEST(cfuncs_compare_statuses) {
    const char *a = "int gone(void) {\n}\nint same(void) {\n}\nint edit(void) {\n    return 1;\n}\n";
    const char *b = "int same(void) {\n}\nint edit(void) {\n    return 2;\n}\nint fresh(void) {\n}\n";
    CFuncList la, lb;
    cfuncs_split(a, strlen(a), &la);
    cfuncs_split(b, strlen(b), &lb);
    FnDiff *d;
    int n = cfuncs_compare(a, &la, b, &lb, &d);
    CHECK_EQ_INT(n, 4);
    if (n == 4) {
        CHECK_STR(d[0].name, "gone");
        CHECK_EQ_INT(d[0].status, FN_REMOVED);
        CHECK_STR(d[1].name, "same");
        CHECK_EQ_INT(d[1].status, FN_SAME);
        CHECK_STR(d[2].name, "edit");
        CHECK_EQ_INT(d[2].status, FN_CHANGED);
        CHECK_STR(d[3].name, "fresh");
        CHECK_EQ_INT(d[3].status, FN_ADDED);
    }
    free(d);
    cfuncs_free(&la);
    cfuncs_free(&lb);
}

/* Every function of the real chapters: the splitter finds as many as there
 * are closing braces at column 0, less the struct ends, plus one-liners. */
TEST(cfuncs_real_chapter_files) {
    char *src = chapfs_read("chapters/II.1/forward.c", NULL);
    CHECK(src != NULL);
    if (!src) return;
    CFuncList l;
    cfuncs_split(src, strlen(src), &l);
    int closing = 0;
    for (const char *p = src; (p = strstr(p, "\n}\n")); p++) closing++;
    int multi = 0;
    for (int i = 0; i < l.n; i++) multi += l.funcs[i].end_line > l.funcs[i].line;
    CHECK_EQ_INT(multi, closing);
    CHECK(cfuncs_find(&l, "forward") >= 0);
    cfuncs_free(&l);
    free(src);
}
