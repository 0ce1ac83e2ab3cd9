/* exercises: the exercise stubber, and the file work behind the grader.
 *
 *   exercises [--chapters-dir D] [--tests-dir D] list CHAPTER
 *   exercises [--chapters-dir D] [--tests-dir D] check
 *   exercises [--chapters-dir D] [--tests-dir D] stub [--all] CHAPTER OUT
 *   exercises [--chapters-dir D] variant CHAPTER DIR ID OUT
 *   exercises [--chapters-dir D] restore CHAPTER DIR ID
 *   exercises [--chapters-dir D] leaks CHAPTER PAGE...
 *   exercises [--chapters-dir D] mutate CHAPTER DIR ID FROM TO
 *
 * list     one line per exercise of the chapter, tab-separated: id, points,
 *          file, function, test substrings (blank-separated), title
 * check    every chapter's markers (see markers_check); one line per problem
 * stub     OUT (which must not exist): the chapter with its exercises' bodies
 *          replaced by stubs, and OUT/EXERCISES.md; --all stubs every marked
 *          function, not only the chapter's own (to test the stubber)
 * variant  OUT (which must not exist): a copy of DIR (a student's copy) in
 *          which every exercise but ID is the reference one: what exercise ID
 *          is graded with, so that it stands or falls on its own
 * restore  puts the reference version of exercise ID back into DIR
 * mutate   in DIR (a copy of the chapter), replaces the one occurrence of
 *          FROM in the body of exercise ID by TO (\n, \t and \\ escaped):
 *          a plausible wrong answer, which the grader must fail (see
 *          tests/exercises/mutants.tsv)
 * leaks    the pages of CHAPTER (its code, diffs into it) that show the answer
 *          of one of its marked functions (see leaks.h), one line each; exits
 *          1 if any does (the students' edition of the book must not)
 *
 * Exits 0 on success, 1 on a problem (each printed on stderr), 2 on a usage
 * error. Defaults: --chapters-dir chapters, --tests-dir tests/chapters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "leaks.h"
#include "markers.h"
#include "stub.h"

static const char *chapters_dir = "chapters";
static const char *tests_dir = "tests/chapters";

/* The usage on f; returns rc (0 for --help, 2 for a bad command line). */
static int usage(FILE *f, int rc) {
    fprintf(f, "usage: exercises [--chapters-dir D] [--tests-dir D] list CHAPTER | check |\n"
               "       stub [--all] CHAPTER OUT | variant CHAPTER DIR ID OUT | restore CHAPTER DIR ID |\n"
               "       leaks CHAPTER PAGE... | mutate CHAPTER DIR ID FROM TO\n"
               "The exercise stubber behind `make chapter=X exercise` and `grade` (see book/instructors.md).\n");
    return rc;
}

static int report(StrList *problems) {
    for (int i = 0; i < problems->n; i++) fprintf(stderr, "exercises: %s\n", problems->items[i]);
    int rc = problems->n ? 1 : 0;
    strlist_free(problems);
    return rc;
}

static bool write_file(const char *path, const char *text, StrList *problems) {
    FILE *f = chapfs_make_parents(path) ? fopen(path, "wb") : NULL;
    bool ok = f && fwrite(text, 1, strlen(text), f) == strlen(text);
    if (f && fclose(f) != 0) ok = false;
    if (!ok) strlist_pushf(problems, "%s: cannot write", path);
    return ok;
}

static bool must_not_exist(const char *out, StrList *problems) {
    struct stat st;
    if (stat(out, &st) != 0) return true;
    strlist_pushf(problems, "%s already exists; remove it first (it may hold a student's work)", out);
    return false;
}

/* Copies every file of from/ to to/, passing C files through edit() (NULL: as they are). */
typedef char *(*EditFn)(const char *file, const char *src, size_t len, void *ctx, StrList *problems);

static bool copy_dir(const char *from, const char *to, EditFn edit, void *ctx, StrList *problems) {
    StrList files = {0};
    if (chapfs_list_files(from, &files) != 0) {
        strlist_pushf(problems, "%s: cannot read", from);
        strlist_free(&files);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < files.n && ok; i++) {
        char *src_path = chapfs_printf("%s/%s", from, files.items[i]);
        char *dst_path = chapfs_printf("%s/%s", to, files.items[i]);
        size_t len;
        char *src = chapfs_read(src_path, &len);
        if (!src) strlist_pushf(problems, "%s: cannot read", src_path);
        bool binary = src && memchr(src, 0, len); /* a student's build products: not part of the copy */
        char *text = src && edit && cfuncs_is_c_file(files.items[i]) ? edit(files.items[i], src, len, ctx, problems)
                                                                       : src;
        ok = binary || (text && write_file(dst_path, text, problems));
        if (text != src) free(text);
        free(src);
        free(src_path);
        free(dst_path);
    }
    strlist_free(&files);
    return ok;
}

static int cmd_list(const char *chapter) {
    ExerciseList l = {0};
    StrList problems = {0};
    exercises_of_chapter(chapters_dir, chapter, &l, &problems);
    for (int i = 0; i < l.n; i++) {
        const Exercise *e = &l.items[i];
        char *tests = strlist_join(&e->tests, " ");
        printf("%s\t%d\t%s\t%s\t%s\t%s\n", e->id, e->points, e->file, e->function, tests, e->title);
        free(tests);
    }
    exercises_free(&l);
    return report(&problems);
}

/* s with \n, \t and \\ turned into what they stand for (malloc'd). */
static char *unescape(const char *s) {
    char *out = chapfs_xmalloc(strlen(s) + 1), *o = out;
    for (; *s; s++) {
        if (*s != '\\' || !s[1]) {
            *o++ = *s;
            continue;
        }
        s++;
        *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s;
    }
    *o = 0;
    return out;
}

/* mutate: the exercise's body in dir with its one `from` replaced by `to`. */
static int cmd_mutate(const char *chapter, const char *dir, const char *id, const char *from_esc, const char *to_esc) {
    StrList problems = {0};
    ExerciseList l = {0};
    exercises_of_chapter(chapters_dir, chapter, &l, &problems);
    int k = exercises_find(&l, id);
    if (!problems.n && k < 0) strlist_pushf(&problems, "chapter %s has no exercise '%s'", chapter, id);
    char *from = unescape(from_esc), *to = unescape(to_esc);
    char *path = k >= 0 ? chapfs_printf("%s/%s", dir, l.items[k].file) : NULL;
    size_t len, b, e;
    char *src = path && !problems.n ? chapfs_read(path, &len) : NULL;
    if (path && !problems.n && !src) strlist_pushf(&problems, "%s: cannot read", path);
    if (src) {
        CFuncList fl;
        cfuncs_split(src, len, &fl);
        const CFunc *f = NULL;
        for (int i = 0; i < fl.n && !f; i++)
            if (strcmp(fl.funcs[i].key, l.items[k].function) == 0) f = &fl.funcs[i];
        char *body = f && function_body(src, f, &b, &e) ? chapfs_strndup(src + b, e - b) : NULL;
        char *at = body && *from ? strstr(body, from) : NULL;
        if (!at || strstr(at + 1, from))
            strlist_pushf(&problems, "%s: %s (exercise %s) holds '%s' %s, not once", path, l.items[k].function, id,
                          from_esc, at ? "more than once" : "nowhere");
        else {
            char *text = chapfs_printf("%.*s%s%s", (int)(b + (size_t)(at - body)), src, to, src + b + (at - body) + strlen(from));
            write_file(path, text, &problems);
            free(text);
        }
        free(body);
        cfuncs_free(&fl);
    }
    free(src);
    free(path);
    free(from);
    free(to);
    exercises_free(&l);
    return report(&problems);
}

static int cmd_leaks(const char *chapter, char **pages, int n) {
    StrList l = {0}, found = {0};
    for (int i = 0; i < n; i++) strlist_push(&l, pages[i]);
    leaks_check(chapters_dir, chapter, &l, &found);
    strlist_free(&l);
    return report(&found);
}

static int cmd_check(void) {
    StrList problems = {0};
    markers_check(chapters_dir, tests_dir, &problems);
    return report(&problems);
}

/* ---- stub ------------------------------------------------------------- */

static char *edit_stub(const char *file, const char *src, size_t len, void *ctx, StrList *problems) {
    const ExerciseList *l = ctx;
    return stub_file(file, src, len, l->items, l->n, problems);
}

/* The task sheet. */
static char *exercises_md(const char *chapter, const ExerciseList *l) {
    int total = 0;
    for (int i = 0; i < l->n; i++) total += l->items[i].points;
    StrList out = {0}, names = {0}, docs = {0};
    chapter_tests(tests_dir, chapter, &names, &docs);
    strlist_pushf(&out,
                  "# Exercises for chapter %s\n\n"
                  "This directory is a copy of `chapters/%s` in which the functions below are stubs: each\n"
                  "compiles, returns zero (or nothing) and says once on stderr that it is not implemented yet.\n"
                  "Write them here, then grade your work from the top of the repository:\n\n"
                  "```sh\n"
                  "# each exercise: OK or FAIL, its points, and the score\n"
                  "make chapter=%s grade\n"
                  "# one exercise\n"
                  "make chapter=%s grade EXERCISE=%s\n"
                  "# your copy's model-generate on the default model (ARGS, PROMPT, N as for run)\n"
                  "make chapter=%s exercise-run\n"
                  "```\n\n"
                  "Each exercise is graded with your version of its function and the reference version of\n"
                  "every other exercise, so an exercise you have not done yet never costs you the points of\n"
                  "another. The grader runs the chapter's own tests (`tests/chapters/%s/`); a failing\n"
                  "exercise's full test output is in `build/exercises/%s/<id>/test.log`.\n\n"
                  "**Bitwise equality is required.** Many tests compare logits bit for bit (a decode step\n"
                  "against a full recompute, one chapter against another), because the book promises\n"
                  "identical logits: the same operations on the same numbers in the same order give the same\n"
                  "bits. Floating-point addition is not associative, so a formula that is right on paper but\n"
                  "sums in another order (or calls another kernel, or fuses two steps) fails. Use the\n"
                  "operations the reference uses (`matmul`, `attention`, `rmsnorm_rows`, ... from `common/`;\n"
                  "a loop calling `rmsnorm` row by row gives the same bits as `rmsnorm_rows`, only on one\n"
                  "thread), in the order the doc comment describes. A failing check prints the largest |a-b|\n"
                  "next to the size of the values and the first differing index: differences around 1e-6 of\n"
                  "the values mean the right math in another order; large ones (or NaN) mean a real bug.\n\n"
                  "%d exercises, %d points in all.\n",
                  chapter, chapter, chapter, chapter, l->n ? l->items[0].id : "ID", chapter, chapter, chapter,
                  l->n, total);
    for (int i = 0; i < l->n; i++) {
        const Exercise *e = &l->items[i];
        char *subs = strlist_join(&e->tests, "`, `");
        strlist_pushf(&out, "\n## %d. %s: %s (%d point%s)\n\nIn `%s`:\n\n```c\n%s%s%s\n```\n\n", i + 1, e->id,
                      e->title, e->points, e->points == 1 ? "" : "s", e->file, e->doc, *e->doc ? "\n" : "",
                      e->signature);
        strlist_pushf(&out, "Graded by the chapter tests whose names contain `%s`:\n\n", subs);
        for (int k = 0; k < names.n; k++) {
            bool match = false;
            for (int t = 0; t < e->tests.n && !match; t++) match = strstr(names.items[k], e->tests.items[t]);
            if (match) strlist_pushf(&out, "- `%s`%s%s\n", names.items[k], *docs.items[k] ? ": " : "", docs.items[k]);
        }
        free(subs);
    }
    char *text = strlist_join(&out, "");
    strlist_free(&out);
    strlist_free(&names);
    strlist_free(&docs);
    return text;
}

static int cmd_stub(const char *chapter, const char *out, bool all) {
    StrList problems = {0};
    ExerciseList l = {0};
    char *dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    if (all) {
        if (markers_scan_dir(dir, &l, &problems) != 0) strlist_pushf(&problems, "%s: cannot read", dir);
    } else {
        exercises_of_chapter(chapters_dir, chapter, &l, &problems);
    }
    if (!problems.n && must_not_exist(out, &problems) && copy_dir(dir, out, edit_stub, &l, &problems)) {
        char *md = exercises_md(chapter, &l);
        char *path = chapfs_printf("%s/EXERCISES.md", out);
        if (write_file(path, md, &problems)) {
            int total = 0;
            for (int i = 0; i < l.n; i++) total += l.items[i].points;
            printf("%s: %d exercises (%d points) stubbed; the tasks are in %s\n", out, l.n, total, path);
        }
        free(path);
        free(md);
    }
    exercises_free(&l);
    free(dir);
    return report(&problems);
}

/* ---- variant, restore ------------------------------------------------- */

typedef struct {
    const char *ref_dir;
    const ExerciseList *l;
    const char *keep; /* the exercise left as the student wrote it; NULL: none */
} Reference;

/* The file with the reference version of every listed exercise but `keep`. */
static char *edit_reference(const char *file, const char *src, size_t len, void *ctx, StrList *problems) {
    const Reference *r = ctx;
    char *text = chapfs_strndup(src, len);
    for (int i = 0; i < r->l->n && text; i++) {
        const Exercise *e = &r->l->items[i];
        if (strcmp(e->file, file) != 0 || (r->keep && strcmp(e->id, r->keep) == 0)) continue;
        char *ref_path = chapfs_printf("%s/%s", r->ref_dir, file);
        size_t ref_len;
        char *ref = chapfs_read(ref_path, &ref_len);
        char *next = ref ? replace_function(text, strlen(text), ref, ref_len, e->function) : NULL;
        if (!next) strlist_pushf(problems, "%s: function %s (exercise %s) is missing", file, e->function, e->id);
        free(ref);
        free(ref_path);
        free(text);
        text = next;
    }
    return text;
}

static int cmd_variant(const char *chapter, const char *dir, const char *id, const char *out, bool in_place) {
    StrList problems = {0};
    ExerciseList l = {0};
    char *ref_dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    exercises_of_chapter(chapters_dir, chapter, &l, &problems);
    int k = exercises_find(&l, id);
    if (!problems.n && k < 0) {
        char *ids = NULL;
        StrList names = {0};
        for (int i = 0; i < l.n; i++) strlist_push(&names, l.items[i].id);
        ids = strlist_join(&names, ", ");
        strlist_pushf(&problems, "chapter %s has no exercise '%s' (it has: %s)", chapter, id, ids);
        free(ids);
        strlist_free(&names);
    }
    if (!problems.n && in_place) {
        /* Restore: only `id` goes back to the reference, in place. */
        ExerciseList one = {.items = &l.items[k], .n = 1};
        Reference r = {ref_dir, &one, NULL};
        char *path = chapfs_printf("%s/%s", dir, l.items[k].file);
        size_t len;
        char *src = chapfs_read(path, &len);
        char *text = src ? edit_reference(l.items[k].file, src, len, &r, &problems) : NULL;
        if (!src) strlist_pushf(&problems, "%s: cannot read", path);
        if (text && write_file(path, text, &problems)) printf("%s: %s is the reference version again\n", path, id);
        free(text);
        free(src);
        free(path);
    } else if (!problems.n && must_not_exist(out, &problems)) {
        for (int i = 0; i < l.n; i++) { /* a lost file would otherwise only show up as a link error */
            char *path = chapfs_printf("%s/%s", dir, l.items[i].file);
            if (!chapfs_is_file(path) && (i == 0 || strcmp(l.items[i].file, l.items[i - 1].file) != 0))
                strlist_pushf(&problems, "%s is missing (it holds exercise %s)", path, l.items[i].id);
            free(path);
        }
        Reference r = {ref_dir, &l, id};
        if (!problems.n) copy_dir(dir, out, edit_reference, &r, &problems);
    }
    exercises_free(&l);
    free(ref_dir);
    return report(&problems);
}

int main(int argc, char **argv) {
    int i = 1;
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) return usage(stdout, 0);
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--chapters-dir") == 0) chapters_dir = argv[i + 1];
        else if (strcmp(argv[i], "--tests-dir") == 0) tests_dir = argv[i + 1];
        else return usage(stderr, 2);
    }
    if (i >= argc) return usage(stderr, 2);
    const char *cmd = argv[i++];
    int n = argc - i;
    char **a = argv + i;
    if (strcmp(cmd, "list") == 0 && n == 1) return cmd_list(a[0]);
    if (strcmp(cmd, "check") == 0 && n == 0) return cmd_check();
    if (strcmp(cmd, "mutate") == 0 && n == 5) return cmd_mutate(a[0], a[1], a[2], a[3], a[4]);
    if (strcmp(cmd, "leaks") == 0 && n >= 2) return cmd_leaks(a[0], a + 1, n - 1);
    if (strcmp(cmd, "stub") == 0 && n == 3 && strcmp(a[0], "--all") == 0) return cmd_stub(a[1], a[2], true);
    if (strcmp(cmd, "stub") == 0 && n == 2) return cmd_stub(a[0], a[1], false);
    if (strcmp(cmd, "variant") == 0 && n == 4) return cmd_variant(a[0], a[1], a[2], a[3], false);
    if (strcmp(cmd, "restore") == 0 && n == 3) return cmd_variant(a[0], a[1], a[2], NULL, true);
    return usage(stderr, 2);
}
