/* test_manifest.c: the manifest check (tools/chapters/manifest.c) on the real
 * chapters, which is how `make test` catches drift, and on scratch copies of
 * them with drift planted, each caught with a message naming chapter, file
 * and function. The plants are chosen from what the chapters contain (not
 * hard-coded lines), so the tests survive edits to the chapters. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "manifest.h"
#include "stages.h"

static const char *const BOTH[] = {"II.1", "II.2", NULL};

/* II.1, II.2 and II.3, a copy of II.2 that declares no change at all. */
static char *three_chapters(const char *name) {
    char *dir = fx_chapters(name, BOTH);
    fx_copy_chapter(dir, "II.2", "II.3", "previous II.2\n");
    return dir;
}

/* Checks one chapter; the caller frees the problems. */
static StrList check(const char *dir, const char *chapter) {
    StrList p = {0};
    manifest_check_chapter(dir, chapter, &p, NULL);
    return p;
}

/* Expects exactly one problem, matching the glob `want` ('*' stands for line numbers). */
static void expect_one(StrList *p, const char *want) {
    bool ok = p->n == 1 && fnmatch(want, p->items[0], 0) == 0;
    CHECK_MSG(ok, "expected exactly the problem\n      %s\n    got %d:", want, p->n);
    if (!ok)
        for (int i = 0; i < p->n; i++) printf("      %s\n", p->items[i]);
    strlist_free(p);
}

static void expect_none(StrList *p) {
    CHECK_MSG(p->n == 0, "expected no problems, got %d:", p->n);
    for (int i = 0; i < p->n; i++) printf("      %s\n", p->items[i]);
    strlist_free(p);
}

/* A C file of II.2 with at least one function: where drift gets planted in II.3. */
static char *file_with_functions(const char *dir, const char *chapter) {
    char *sub = chapfs_printf("%s/%s", dir, chapter);
    StrList files = {0};
    chapfs_list_files(sub, &files);
    char *found = NULL;
    for (int i = 0; i < files.n && !found; i++) {
        StrList fns = fx_functions(sub, files.items[i]);
        if (fns.n) found = chapfs_strdup(files.items[i]);
        strlist_free(&fns);
    }
    strlist_free(&files);
    free(sub);
    return found;
}

/* From the real II.2 MANIFEST: a "changed <file>: ..." line and a function
 * of that file it does not declare (the kind of function that must stay
 * identical). False if there is none. */
static bool undeclared_function(char **file, char **fn) {
    char *text = chapfs_read("chapters/II.2/MANIFEST", NULL);
    Manifest m;
    StrList problems = {0};
    bool found = false;
    if (text && manifest_parse(text, "II.2", &m, &problems) == 0) {
        for (int c = 0; c < m.n_changed && !found; c++) {
            if (!m.changed[c].by_function) continue;
            StrList fns = fx_functions("chapters/II.2", m.changed[c].file);
            for (int i = 0; i < fns.n && !found; i++) {
                if (strlist_find(&m.changed[c].fns, fns.items[i]) >= 0) continue;
                *file = chapfs_strdup(m.changed[c].file), *fn = chapfs_strdup(fns.items[i]);
                found = true;
            }
            strlist_free(&fns);
        }
        manifest_free(&m);
    }
    strlist_free(&problems);
    free(text);
    return found;
}

/* This is the check `make test` relies on: every real chapter is exactly as declared. */
TEST(manifest_real_chapters_pass) {
    StrList chapters = {0};
    CHECK_MSG(chapfs_list_chapters("chapters", &chapters) == 0, "no chapters/ directory (run from the repo root)");
    CHECK(chapters.n >= 2);
    for (int i = 0; i < chapters.n; i++) {
        StrList p = check("chapters", chapters.items[i]);
        CHECK_MSG(p.n == 0, "chapter %s: %d manifest problem(s):", chapters.items[i], p.n);
        for (int k = 0; k < p.n; k++) printf("      %s\n", p.items[k]);
        strlist_free(&p);
    }
    strlist_free(&chapters);
}

TEST(manifest_real_stats) {
    StrList p = {0};
    ManifestStats st;
    manifest_check_chapter("chapters", "II.2", &p, &st);
    CHECK_STR(st.previous, "II.1");
    CHECK(st.added >= 1);
    CHECK(st.fns_changed >= 1);
    strlist_free(&p);
    manifest_check_chapter("chapters", "II.1", &p, &st);
    CHECK_STR(st.previous, "");
    strlist_free(&p);
}

TEST(manifest_identical_copy_passes) {
    char *dir = three_chapters("identical");
    StrList p = {0}, files = {0};
    ManifestStats st;
    manifest_check_chapter(dir, "II.3", &p, &st);
    expect_none(&p);
    chapfs_list_files("chapters/II.2", &files);
    CHECK_EQ_INT(st.unchanged, files.n);
    CHECK_EQ_INT(st.changed + st.added + st.removed, 0);
    strlist_free(&files);
    free(dir);
}

/* A fix applied to one chapter and forgotten in the next: one line in a
 * function of a file the manifest says is unchanged. */
TEST(manifest_catches_change_in_unchanged_file) {
    char *dir = three_chapters("unchanged-file");
    char *file = file_with_functions(dir, "II.3");
    CHECK(file != NULL);
    if (!file) return;
    char *sub = chapfs_printf("%s/II.3", dir);
    StrList fns = fx_functions(sub, file);
    fx_plant_in_function(sub, file, fns.items[0]);
    StrList p = check(dir, "II.3");
    char *want = chapfs_printf("II.3: %s differs from II.2 but is not in the manifest: function %s changed (line *)",
                               file, fns.items[0]);
    expect_one(&p, want);
    free(want);
    strlist_free(&fns);
    free(sub);
    free(file);
    free(dir);
}

TEST(manifest_catches_comment_change_in_unchanged_file) {
    char *dir = three_chapters("unchanged-comment");
    fx_insert_at(dir, "II.3/forward.h", 0, "/* planted */\n");
    StrList p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.h differs from II.2 but is not in the manifest (first difference at line 1)");
    free(dir);
}

/* A changed file declared function by function: a function it does not list changes. */
TEST(manifest_catches_undeclared_function_change) {
    char *file, *fn;
    if (!undeclared_function(&file, &fn)) SKIP("II.2 declares every function of its changed files");
    char *dir = fx_chapters("undeclared-fn", BOTH);
    char *sub = chapfs_printf("%s/II.2", dir);
    fx_plant_in_function(sub, file, fn);
    StrList p = check(dir, "II.2");
    char *want = chapfs_printf("II.2: %s: function %s changed (line *) but is not declared on MANIFEST line *", file,
                               fn);
    expect_one(&p, want);
    free(want);
    free(sub);
    free(dir);
    free(file);
    free(fn);
}

TEST(manifest_catches_undeclared_added_function) {
    char *file, *fn;
    if (!undeclared_function(&file, &fn)) SKIP("II.2 declares every function of its changed files");
    char *dir = fx_chapters("undeclared-added-fn", BOTH);
    char *path = chapfs_printf("%s/II.2/%s", dir, file);
    size_t len = 0;
    free(chapfs_read(path, &len));
    fx_insert_at(dir, strstr(path, "II.2/"), len, "\nstatic int unused_helper(void) {\n    return 0;\n}\n");
    StrList p = check(dir, "II.2");
    char *want = chapfs_printf("II.2: %s: function unused_helper added (line *) but is not declared on MANIFEST line *",
                               file);
    expect_one(&p, want);
    free(want);
    free(path);
    free(dir);
    free(file);
    free(fn);
}

/* The manifest declares a function changed that is byte-identical: stale. */
TEST(manifest_catches_stale_function) {
    char *file, *fn;
    if (!undeclared_function(&file, &fn)) SKIP("II.2 declares every function of its changed files");
    char *dir = fx_chapters("stale-fn", BOTH);
    char *old = chapfs_printf("%s:", file), *new = chapfs_printf("%s: %s", file, fn);
    fx_replace(dir, "II.2/MANIFEST", old, new);
    StrList p = check(dir, "II.2");
    char *want = chapfs_printf("II.2: %s: function %s is declared changed (MANIFEST line *) but is identical in II.1 "
                               "and II.2", file, fn);
    expect_one(&p, want);
    free(want);
    free(old);
    free(new);
    free(dir);
    free(file);
    free(fn);
}

TEST(manifest_catches_unknown_function) {
    char *file, *fn;
    if (!undeclared_function(&file, &fn)) SKIP("II.2 declares every function of its changed files");
    char *dir = fx_chapters("unknown-fn", BOTH);
    char *old = chapfs_printf("%s:", file), *new = chapfs_printf("%s: no_such_function", file);
    fx_replace(dir, "II.2/MANIFEST", old, new);
    StrList p = check(dir, "II.2");
    char *want = chapfs_printf("II.2: %s: function no_such_function is declared (MANIFEST line *) but exists in neither "
                               "II.1 nor II.2", file);
    expect_one(&p, want);
    free(want);
    free(old);
    free(new);
    free(dir);
    free(file);
    free(fn);
}

/* Comments, includes, macros and types of a by-function file may change freely. */
TEST(manifest_text_outside_functions_may_differ) {
    char *file, *fn;
    if (!undeclared_function(&file, &fn)) SKIP("II.2 declares every function of its changed files");
    char *dir = fx_chapters("outside-text", BOTH);
    char *rel = chapfs_printf("II.2/%s", file);
    fx_insert_at(dir, rel, 0, "/* planted */\n#define PLANTED 1\n");
    StrList p = check(dir, "II.2");
    expect_none(&p);
    free(rel);
    free(dir);
    free(file);
    free(fn);
}

TEST(manifest_catches_undeclared_new_file) {
    char *dir = fx_chapters("new-file", BOTH);
    fx_write(dir, "II.2/extra.c", "int extra(void) { return 1; }\n");
    StrList p = check(dir, "II.2");
    expect_one(&p, "II.2: extra.c is new in II.2 but not declared added");
    free(dir);
}

TEST(manifest_catches_missing_file) {
    char *dir = three_chapters("missing-file");
    fx_remove(dir, "II.3/forward.h");
    StrList p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.h is in II.2 but missing from II.3, and not declared removed");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nremoved forward.h\n");
    p = check(dir, "II.3");
    expect_none(&p);
    free(dir);
}

TEST(manifest_catches_bad_added_and_removed) {
    char *dir = three_chapters("bad-added");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nadded forward.h\n");
    StrList p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.h is declared added but already exists in II.2");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nadded nosuch.c\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: nosuch.c is declared added but does not exist in II.3");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nremoved forward.h\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.h is declared removed but still exists in II.3");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nremoved nosuch.c\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: nosuch.c is declared removed but does not exist in II.2");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nchanged nosuch.c\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: nosuch.c is declared changed (MANIFEST line 2) but exists in neither II.2 nor II.3");
    fx_remove(dir, "II.3/forward.h");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nchanged forward.h\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.h is declared changed (MANIFEST line 2) but does not exist in II.3 (declare it "
                   "removed instead)");
    free(dir);
}

TEST(manifest_catches_identical_changed_file) {
    char *dir = three_chapters("stale-file");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nchanged forward.h\n");
    StrList p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.h is declared changed (MANIFEST line 2) but is identical in II.2 and II.3");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nchanged forward.c:\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: forward.c is declared changed (MANIFEST line 2) but is identical in II.2 and II.3");
    free(dir);
}

TEST(manifest_catches_wrong_previous) {
    char *dir = three_chapters("wrong-previous");
    fx_write(dir, "II.3/MANIFEST", "previous II.1\n");
    StrList p = check(dir, "II.3");
    expect_one(&p, "II.3: MANIFEST says 'previous II.1' but the chapter before II.3 in book order is II.2");
    fx_write(dir, "II.3/MANIFEST", "previous none\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: MANIFEST says 'previous none' but the chapter before II.3 in book order is II.2");
    fx_write(dir, "II.1/MANIFEST", "previous II.0\n");
    p = check(dir, "II.1");
    expect_one(&p, "II.1: MANIFEST says 'previous II.0' but II.1 is the first chapter (expected 'previous none')");
    free(dir);
}

TEST(manifest_parse_errors) {
    char *dir = three_chapters("parse-errors");
    fx_write(dir, "II.3/MANIFEST", "# no previous line\nmodified forward.c\n");
    StrList p = check(dir, "II.3");
    CHECK_EQ_INT(p.n, 2);
    if (p.n == 2) {
        CHECK_STR(p.items[0], "II.3: MANIFEST line 2: unknown directive 'modified' (expected previous, stage, "
                              "added, removed or changed)");
        CHECK_STR(p.items[1], "II.3: MANIFEST has no 'previous <chapter>|none' line");
    }
    strlist_free(&p);
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nchanged forward.h\nadded forward.h\n");
    p = check(dir, "II.3");
    CHECK_MSG(p.n >= 1 && strcmp(p.items[0], "II.3: MANIFEST line 3: forward.h is already mentioned on line 2") == 0,
              "duplicate mention not reported");
    strlist_free(&p);
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nchanged MANIFEST.md: f\n");
    p = check(dir, "II.3");
    CHECK_MSG(p.n >= 1 && strstr(p.items[0], "MANIFEST.md is not a .c or .h file"), "function list on a non-C file");
    strlist_free(&p);
    fx_remove(dir, "II.3/MANIFEST");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: no MANIFEST (every chapter declares what it changes)");
    free(dir);
}

TEST(manifest_unknown_chapter) {
    StrList p = check("chapters", "II.9");
    expect_one(&p, "II.9: no such chapter in chapters (chapters: II.1 II.2*)");
}

/* A MANIFEST with stages declares every change under one; a stage id is declared once. */
TEST(manifest_stages_cover_every_change) {
    char *dir = three_chapters("stages");
    fx_write(dir, "II.3/extra.h", "/* new */\n");
    char *text = chapfs_printf("previous II.2\nstage II.3 a lesson\nadded extra.h\n");
    fx_write(dir, "II.3/MANIFEST", text);
    StrList p = check(dir, "II.3");
    expect_none(&p);
    free(text);
    text = chapfs_printf("previous II.2\nadded extra.h\nstage II.3 a lesson\n");
    fx_write(dir, "II.3/MANIFEST", text);
    p = check(dir, "II.3");
    expect_one(&p, "II.3: MANIFEST line 2 declares a change under no stage: put a 'stage <id> <title>' line above it*");
    free(text);
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nstage II.3 one\nadded extra.h\nstage II.3 two\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: MANIFEST line 4: stage II.3 is already declared on line 2");
    fx_write(dir, "II.3/MANIFEST", "previous II.2\nstage II.3\nadded extra.h\n");
    p = check(dir, "II.3");
    expect_one(&p, "II.3: MANIFEST line 2: expected 'stage <id> <title>'");
    free(dir);
}

/* Every stage of the real chapters, as the views before and after it, passes
 * the manifest check: a stage's diff is exactly its declarations. */
TEST(manifest_real_stages_are_their_declarations) {
    StageList l = {0};
    StrList problems = {0};
    CHECK_EQ_INT(stages_list("chapters", &l, &problems), 0);
    CHECK_MSG(stages_find(&l, "III.5") && stages_find(&l, "III.1") && strcmp(stages_find(&l, "III.5")->before, "III.4") == 0,
              "the stages of III.4 and III.7 are not listed as expected");
    for (int i = 0; i < l.n; i++) {
        char *out = chapfs_printf("%s-%s", test_tmp_path("stage-views"), l.items[i].id), err[512];
        CHECK_MSG(stages_write_views("chapters", &l.items[i], out, err, sizeof err) == 0, "%s", err);
        StrList p = check(out, l.items[i].id);
        expect_none(&p);
        stages_remove_dir(out);
        free(out);
    }
    stages_free(&l);
    strlist_free(&problems);
}
