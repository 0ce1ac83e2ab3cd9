/* test_exercises.c: the exercise stubber and grader (tools/exercises/) on the
 * real chapters: the markers are sound, every marked function stubs into
 * code that compiles, the reference grades full marks (exit 0), a fresh stubbed
 * copy grades zero (exit 1), and one solved exercise grades exactly its points,
 * also in the JSON for autograders. Nothing is
 * hard-coded about the chapters' exercises: they are read from the markers. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "markers.h"

/* Runs a shell command (printf-style); returns its output (malloc'd) and exit code. */
static char *run(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *run(int *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char cmd[4096];
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[4200];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) {
        *code = -1;
        return chapfs_strdup("");
    }
    size_t n = 0, cap = 4096;
    char *out = chapfs_xmalloc(cap);
    for (size_t got; (got = fread(out + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) out = chapfs_xrealloc(out, cap *= 2);
    }
    out[n] = 0;
    int st = pclose(p);
    *code = st == -1 ? -1 : (st >> 8) & 0xff;
    return out;
}

static const char *tool(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/tools/exercises", test_build_dir());
    return path;
}

static StrList chapters(void) {
    StrList l = {0};
    chapfs_list_chapters("chapters", &l);
    return l;
}

static ExerciseList exercises_of(const char *chapter) {
    ExerciseList l = {0};
    StrList problems = {0};
    exercises_of_chapter("chapters", chapter, &l, &problems);
    for (int i = 0; i < problems.n; i++) test_fail(__FILE__, __LINE__, "%s", problems.items[i]);
    strlist_free(&problems);
    return l;
}

static int total_points(const ExerciseList *l) {
    int t = 0;
    for (int i = 0; i < l->n; i++) t += l->items[i].points;
    return t;
}

/* A fresh stubbed copy of chapter in the scratch directory. */
static const char *stub_copy(const char *chapter, const char *name, bool all) {
    const char *dir = test_tmp_path(name);
    int code;
    char *out = run(&code, "rm -rf '%s' && '%s' stub %s %s '%s'", dir, tool(), all ? "--all" : "", chapter, dir);
    CHECK_MSG(code == 0, "stub %s: %s", chapter, out);
    free(out);
    return dir;
}

/* Grades dir as chapter (one exercise if only is set); returns the score, -1 if none printed.
 * The grade's exit code must say whether the score is full: 0 if so, 1 if not. */
static int grade(const char *chapter, const char *dir, const char *only, int *total) {
    int code, got = -1;
    *total = -1;
    char *out = run(&code, "BUILD='%s' GRADE_OUT='%s' tools/exercises/grade.sh %s '%s' %s", test_build_dir(),
                    test_tmp_path("grade"), chapter, dir, only ? only : "");
    const char *s = strstr(out, "Score: ");
    if (!s || sscanf(s, "Score: %d/%d", &got, total) != 2) {
        test_fail(__FILE__, __LINE__, "grade %s %s printed no score (exit %d):\n%s", chapter, dir, code, out);
        got = -1;
    } else {
        CHECK_MSG(code == (got == *total ? 0 : 1), "grade %s %s scored %d/%d and exited %d", chapter, dir, got,
                  *total, code);
    }
    free(out);
    return got;
}

TEST(exercises_markers_are_well_formed_and_agree) {
    int code;
    char *out = run(&code, "'%s' check", tool());
    CHECK_MSG(code == 0, "exercises check:\n%s", out);
    free(out);
    StrList ch = chapters();
    CHECK(ch.n >= 1);
    for (int c = 0; c < ch.n; c++) {
        ExerciseList l = exercises_of(ch.items[c]);
        CHECK_MSG(l.n >= 3, "chapter %s has %d exercises; it should have at least 3", ch.items[c], l.n);
        exercises_free(&l);
    }
    strlist_free(&ch);
}

TEST(exercises_marker_syntax_problems_are_reported) {
    const char *src = "/* EXERCISE ok \"A title\" 2 points; tests: T1 T2 */\nint f(void) { return 1; }\n"
                      "/* EXERCISE bad \"No points\"; tests: T */\nint g(void) { return 2; }\n"
                      "/* EXERCISE lost \"Nothing after it\" 1 point; tests: T */\nint x;\n";
    ExerciseList l = {0};
    StrList problems = {0};
    markers_scan_text("f.c", src, strlen(src), &l, &problems);
    CHECK_EQ_INT(l.n, 1);
    if (l.n == 1) {
        CHECK_STR(l.items[0].id, "ok");
        CHECK_STR(l.items[0].title, "A title");
        CHECK_EQ_INT(l.items[0].points, 2);
        CHECK_EQ_INT(l.items[0].tests.n, 2);
        CHECK_STR(l.items[0].function, "f");
    }
    CHECK_EQ_INT(problems.n, 2);
    if (problems.n == 2) {
        CHECK(strstr(problems.items[0], "f.c:3:") && strstr(problems.items[0], "points"));
        CHECK(strstr(problems.items[1], "f.c:5:") && strstr(problems.items[1], "not right before a function"));
    }
    exercises_free(&l);
    strlist_free(&problems);
}

/* Every marked function of every chapter (--all), stubbed, compiles cleanly. */
TEST(exercises_stubs_compile_for_every_marked_function) {
    StrList ch = chapters();
    for (int c = 0; c < ch.n; c++) {
        char name[64];
        snprintf(name, sizeof name, "stub-all-%s", ch.items[c]);
        const char *dir = stub_copy(ch.items[c], name, true);
        int code;
        char *out = run(&code,
                        "cd '%s' && for f in *.c; do ${CC:-cc} -std=c11 -Wall -Wextra -Wno-unused-parameter "
                        "-Wno-unused-function -Werror -D_GNU_SOURCE -I. -I\"$OLDPWD/common\" $(for d in \"$OLDPWD\"/common/*/; do "
                        "printf ' -I%%s' \"$d\"; done) -c \"$f\" -o \"$f.o\" "
                        "|| exit 1; done; grep -c 'is not implemented yet' *.c",
                        dir);
        CHECK_MSG(code == 0, "%s: a stubbed copy does not compile:\n%s", ch.items[c], out);
        ExerciseList all = {0};
        StrList problems = {0};
        char *src_dir = chapfs_printf("chapters/%s", ch.items[c]);
        markers_scan_dir(src_dir, &all, &problems);
        int stubs = 0;
        for (char *p = out; *p;) { /* "file.c:N" lines from grep -c */
            char *colon = strchr(p, ':');
            if (!colon) break;
            stubs += atoi(colon + 1);
            p = strchr(colon, '\n') ? strchr(colon, '\n') + 1 : colon + strlen(colon);
        }
        CHECK_MSG(stubs == all.n, "%s: %d stubs for %d marked functions", ch.items[c], stubs, all.n);
        free(src_dir);
        exercises_free(&all);
        strlist_free(&problems);
        free(out);
    }
    strlist_free(&ch);
}

TEST(exercises_stub_writes_the_task_sheet_and_keeps_work) {
    ExerciseList l = exercises_of("II.2");
    const char *dir = stub_copy("II.2", "sheet", false);
    char *path = chapfs_printf("%s/EXERCISES.md", dir);
    char *md = chapfs_read(path, NULL);
    CHECK(md != NULL);
    CHECK_MSG(md && strstr(md, "Bitwise equality is required") && strstr(md, "same order"),
              "EXERCISES.md does not say that bitwise equality is required, and why");
    for (int i = 0; md && i < l.n; i++) {
        CHECK_MSG(strstr(md, l.items[i].id) && strstr(md, l.items[i].title), "EXERCISES.md lacks %s", l.items[i].id);
        CHECK_MSG(strstr(md, l.items[i].signature) != NULL, "EXERCISES.md lacks the signature of %s", l.items[i].id);
    }
    int code;
    char *out = run(&code, "'%s' stub II.2 '%s'", tool(), dir); /* a student's work is never overwritten */
    CHECK(code == 1 && strstr(out, "already exists"));
    free(out);
    free(md);
    free(path);
    exercises_free(&l);
}

TEST(exercises_reference_grades_full_marks) {
    StrList ch = chapters();
    for (int c = 0; c < ch.n; c++) {
        char *dir = chapfs_printf("chapters/%s", ch.items[c]);
        ExerciseList l = exercises_of(ch.items[c]);
        int total, got = grade(ch.items[c], dir, NULL, &total);
        CHECK_MSG(got == total && total == total_points(&l) && total > 0, "%s: reference scored %d/%d", ch.items[c],
                  got, total);
        exercises_free(&l);
        free(dir);
    }
    strlist_free(&ch);
}

TEST(exercises_fresh_stub_grades_zero) {
    StrList ch = chapters();
    for (int c = 0; c < ch.n; c++) {
        char name[64];
        snprintf(name, sizeof name, "fresh-%s", ch.items[c]);
        const char *dir = stub_copy(ch.items[c], name, false);
        int total, got = grade(ch.items[c], dir, NULL, &total);
        CHECK_MSG(got == 0 && total > 0, "%s: a fresh stubbed copy scored %d/%d", ch.items[c], got, total);
    }
    strlist_free(&ch);
}

/* The last exercise of the last chapter solved (restored from the reference), the rest stubs. */
TEST(exercises_one_solved_exercise_grades_its_points) {
    StrList ch = chapters();
    const char *chapter = ch.items[ch.n - 1];
    ExerciseList l = exercises_of(chapter);
    if (l.n == 0) {
        strlist_free(&ch);
        return;
    }
    const Exercise *solved = &l.items[l.n - 1];
    const char *dir = stub_copy(chapter, "one-solved", false);
    int code;
    char *out = run(&code, "'%s' restore %s '%s' %s", tool(), chapter, dir, solved->id);
    CHECK_MSG(code == 0, "restore: %s", out);
    free(out);
    int total, got = grade(chapter, dir, NULL, &total);
    CHECK_MSG(got == solved->points && total == total_points(&l), "%s with only %s solved scored %d/%d, want %d/%d",
              chapter, solved->id, got, total, solved->points, total_points(&l));
    got = grade(chapter, dir, solved->id, &total); /* EXERCISE=id grades just that one */
    CHECK_EQ_INT(got, solved->points);
    CHECK_EQ_INT(total, solved->points);
    /* --json: one entry per exercise, with its points, max and verdict, for autograders. */
    const char *json = test_tmp_path("grade.json");
    out = run(&code, "BUILD='%s' GRADE_OUT='%s' tools/exercises/grade.sh --json '%s' %s '%s' >/dev/null; cat '%s'",
              test_build_dir(), test_tmp_path("grade"), json, chapter, dir, json);
    char *want = chapfs_printf("\"points\": %d, \"max\": %d, \"pass\": false, \"exercises\": [", solved->points,
                               total_points(&l));
    CHECK_MSG(strstr(out, want) != NULL, "grade --json lacks %s:\n%s", want, out);
    free(want);
    for (int i = 0; i < l.n; i++) {
        const Exercise *e = &l.items[i];
        bool ok = e == solved;
        want = chapfs_printf("{\"name\": \"%s\", \"title\": \"%s\", \"points\": %d, \"max\": %d, \"pass\": %s,", e->id,
                             e->title, ok ? e->points : 0, e->points, ok ? "true" : "false");
        CHECK_MSG(strstr(out, want) != NULL, "grade --json lacks %s:\n%s", want, out);
        free(want);
    }
    free(out);
    exercises_free(&l);
    strlist_free(&ch);
}

/* The variant that grades exercise X: X as the student left it, every other exercise the reference. */
TEST(exercises_variant_keeps_only_the_graded_exercise) {
    ExerciseList l = exercises_of("II.2");
    if (l.n < 2) {
        exercises_free(&l);
        return;
    }
    const char *dir = stub_copy("II.2", "variant-src", false);
    const char *var = test_tmp_path("variant");
    int code;
    char *out = run(&code, "rm -rf '%s' && '%s' variant II.2 '%s' %s '%s'", var, tool(), dir, l.items[0].id, var);
    CHECK_MSG(code == 0, "variant: %s", out);
    free(out);
    for (int i = 0; i < l.n; i++) {
        char *path = chapfs_printf("%s/%s", var, l.items[i].file);
        char *src = chapfs_read(path, NULL);
        char *note = chapfs_printf("exercise %s is not implemented yet", l.items[i].id);
        bool stubbed = src && strstr(src, note);
        CHECK_MSG(stubbed == (i == 0), "variant for %s: %s is %s", l.items[0].id, l.items[i].id,
                  stubbed ? "a stub" : "not a stub");
        free(note);
        free(src);
        free(path);
    }
    out = run(&code, "'%s' variant II.2 '%s' no-such-exercise '%s-2'", tool(), dir, var);
    CHECK(code == 1 && strstr(out, "no exercise 'no-such-exercise'"));
    free(out);
    exercises_free(&l);
}

/* Markers planted wrong in a scratch copy of the chapters are caught, each
 * with a message naming the file: a marker that drifted on a function carried
 * unchanged into the next chapter, and a tests: substring that names no test. */
TEST(exercises_check_catches_marker_drift) {
    StrList ch = chapters();
    if (ch.n < 2) {
        strlist_free(&ch);
        SKIP("needs two chapters");
    }
    const char *dir = test_tmp_path("drift");
    const char *prev = ch.items[ch.n - 2], *last = ch.items[ch.n - 1];
    StrList problems = {0};
    /* A marked function the last chapter carries unchanged: marked, but not one of its exercises. */
    const Exercise *carried = NULL;
    ExerciseList mine = exercises_of(last), all = {0};
    char *ldir = chapfs_printf("chapters/%s", last);
    markers_scan_dir(ldir, &all, &problems);
    for (int i = 0; i < all.n && !carried; i++)
        if (exercises_find(&mine, all.items[i].id) < 0) carried = &all.items[i];
    int code;
    char *out = run(&code, "rm -rf '%s' && mkdir -p '%s' && cp -r chapters/%s chapters/%s '%s'/", dir, dir, prev, last,
                    dir);
    CHECK_MSG(code == 0, "%s", out);
    free(out);
    if (carried) {
        char *path = chapfs_printf("%s/%s/%s", dir, last, carried->file);
        out = run(&code, "sed -i 's/^\\(\\/\\* EXERCISE %s \\)/\\1 /' '%s'", carried->id, path);
        free(out);
        out = run(&code, "'%s' --chapters-dir '%s' check", tool(), dir);
        CHECK_MSG(code == 1 && strstr(out, "but its EXERCISE marker differs"), "drift of %s not caught:\n%s",
                  carried->id, out);
        free(out);
        out = run(&code, "cp chapters/%s/%s '%s'", last, carried->file, path); /* undo */
        free(out);
        free(path);
    }
    /* An exercise of the chapter before, in a function the last chapter rewrote: unmarked there, its
     * answer would show in the students' edition. */
    ExerciseList before = {0};
    char *pdir = chapfs_printf("chapters/%s", prev);
    markers_scan_dir(pdir, &before, &problems);
    const Exercise *moved = NULL;
    for (int i = 0; i < mine.n && !moved; i++) {
        int j = exercises_find(&before, mine.items[i].id);
        if (j >= 0 && strcmp(before.items[j].file, mine.items[i].file) == 0 &&
            strcmp(before.items[j].function, mine.items[i].function) == 0)
            moved = &mine.items[i];
    }
    CHECK_MSG(moved, "no exercise of %s is rewritten in %s: the unmarked-answer check goes untested", prev, last);
    if (moved) {
        char *path = chapfs_printf("%s/%s/%s", dir, last, moved->file);
        out = run(&code, "sed -i '/^\\/\\* EXERCISE %s /d' '%s'", moved->id, path);
        free(out);
        out = run(&code, "'%s' --chapters-dir '%s' check", tool(), dir);
        CHECK_MSG(code == 1 && strstr(out, "and no function here is"), "unmarked %s not caught:\n%s", moved->id, out);
        free(out);
        out = run(&code, "cp chapters/%s/%s '%s'", last, moved->file, path); /* undo */
        free(out);
        free(path);
    }
    exercises_free(&before);
    free(pdir);
    if (mine.n) {
        char *path = chapfs_printf("%s/%s/%s", dir, last, mine.items[0].file);
        out = run(&code, "sed -i 's/^\\(\\/\\* EXERCISE %s .*tests: \\)/\\1NoSuchTest /' '%s'", mine.items[0].id, path);
        free(out);
        out = run(&code, "'%s' --chapters-dir '%s' check", tool(), dir);
        CHECK_MSG(code == 1 && strstr(out, "no test in") && strstr(out, "NoSuchTest"), "bad tests: not caught:\n%s",
                  out);
        free(out);
        free(path);
    }
    strlist_free(&problems);
    exercises_free(&mine);
    exercises_free(&all);
    free(ldir);
    strlist_free(&ch);
}

/* The grader cleans its own output directory only: a GRADE_OUT holding
 * someone else's files is refused, and the files stay. */
TEST(exercises_grade_never_cleans_a_directory_it_did_not_make) {
    const char *dir = test_tmp_path("not-the-graders");
    int code;
    char *out = run(&code, "rm -rf '%s' && mkdir -p '%s/bin' && echo mine >'%s/bin/keep' && "
                           "BUILD='%s' GRADE_OUT='%s' tools/exercises/grade.sh II.2 chapters/II.2 kv-grow",
                    dir, dir, dir, test_build_dir(), dir);
    CHECK_MSG(code == 2 && strstr(out, "did not write"), "grade into a foreign GRADE_OUT: exit %d:\n%s", code, out);
    free(out);
    char *keep = chapfs_printf("%s/bin/keep", dir);
    CHECK_MSG(chapfs_is_file(keep), "the grader removed %s", keep);
    free(keep);
}

/* One line of tests/exercises/mutants.tsv. */
typedef struct {
    char *chapter, *id, *what, *from, *to;
} Mutant;

static int read_mutants(Mutant **out) {
    char *text = chapfs_read("tests/exercises/mutants.tsv", NULL);
    CHECK_MSG(text != NULL, "cannot read tests/exercises/mutants.tsv");
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *f[5] = {0}, *p = line;
        int k = 0;
        for (; k < 5 && p; k++) {
            f[k] = p;
            p = strchr(p, '\t');
            if (p) *p++ = 0;
        }
        CHECK_MSG(k == 5 && !p, "mutants.tsv: not 5 tab-separated fields: %s", line);
        if (k != 5 || p) continue;
        *out = chapfs_xrealloc(*out, sizeof(Mutant) * (size_t)(n + 1));
        (*out)[n++] = (Mutant){chapfs_strdup(f[0]), chapfs_strdup(f[1]), chapfs_strdup(f[2]), chapfs_strdup(f[3]),
                               chapfs_strdup(f[4])};
    }
    free(text);
    return n;
}

/* The copy of chapter for mutant set k, with the set's mutants applied; returns its path. */
static const char *mutant_copy(const char *chapter, Mutant **set, int n, int k) {
    char name[64];
    snprintf(name, sizeof name, "mutants-%s-%d", chapter, k);
    const char *dir = test_tmp_path(name);
    int code;
    char *out = run(&code, "rm -rf '%s' && cp -R chapters/%s '%s'", dir, chapter, dir);
    free(out);
    for (int i = 0; i < n; i++) {
        out = run(&code, "'%s' mutate %s '%s' %s '%s' '%s'", tool(), chapter, dir, set[i]->id, set[i]->from,
                  set[i]->to);
        CHECK_MSG(code == 0, "mutant '%s' of %s no longer applies: %s", set[i]->what, set[i]->id, out);
        free(out);
    }
    return dir;
}

/* Grades the copies of sets 0..n_sets-1 of chapter, two at a time (the grader's
 * object cache is safe to share), into their grade-mutants-CHAPTER-K.log. A
 * wrong answer that hangs is cut at GRADE_TIMEOUT, 10 s: a FAIL like any other. */
static void grade_mutant_sets(const char *chapter, int n_sets) {
    char *cmd = chapfs_strdup("");
    for (int k = 0; k < n_sets; k++) {
        char copy[64], out[64], log[64];
        snprintf(copy, sizeof copy, "mutants-%s-%d", chapter, k);
        snprintf(out, sizeof out, "grade-mutants-%s-%d", chapter, k);
        snprintf(log, sizeof log, "grade-mutants-%s-%d.log", chapter, k);
        char *next = chapfs_printf("%s (BUILD='%s' GRADE_OUT='%s' GRADE_TIMEOUT=10 tools/exercises/grade.sh %s '%s' "
                                   ">'%s' 2>&1 || true) & %s", cmd, test_build_dir(), test_tmp_path(out), chapter,
                                   test_tmp_path(copy), test_tmp_path(log), k % 2 ? "wait;" : "");
        free(cmd);
        cmd = next;
    }
    int code;
    char *out = run(&code, "%s wait", cmd);
    free(out);
    free(cmd);
}

/* Every mutated exercise of set k lost its points. */
static void check_mutant_set(const char *chapter, Mutant **set, int n, int k) {
    char log[64];
    snprintf(log, sizeof log, "grade-mutants-%s-%d.log", chapter, k);
    char *out = chapfs_read(test_tmp_path(log), NULL);
    for (int i = 0; i < n; i++) {
        char *failed = chapfs_printf("\nFAIL  %s ", set[i]->id);
        CHECK_MSG(out && strstr(out, failed), "%s: the wrong answer '%s' to exercise %s did not lose its points:\n%s",
                  chapter, set[i]->what, set[i]->id, out ? out : "(no grade)");
        free(failed);
    }
    free(out);
}

/* Every exercise has plausible wrong answers kept in tests/exercises/mutants.tsv
 * (an off-by-one, a missing release, a wrong order, a forgotten copy), and the
 * grader takes the points of each. The k-th mutant of every exercise of a
 * chapter go into one copy, graded at once: each exercise is graded with the
 * reference of the others, so the mutants never meet. The copies are graded
 * two at a time. */
TEST(exercises_every_mutant_loses_its_points) {
    if (test_sanitized()) { /* the verdicts are the plain build's; sanitized, the same grading takes many minutes */
        test_skip("the wrong answers are graded by the plain build's make test");
        return;
    }
    Mutant *m = NULL;
    int n = read_mutants(&m);
    StrList ch = chapters();
    for (int c = 0; c < ch.n; c++) {
        ExerciseList l = exercises_of(ch.items[c]);
        for (int i = 0; i < l.n; i++) {
            int count = 0;
            for (int j = 0; j < n; j++) count += strcmp(m[j].chapter, ch.items[c]) == 0 && strcmp(m[j].id, l.items[i].id) == 0;
            CHECK_MSG(count >= 1, "%s: exercise %s has no wrong answer in tests/exercises/mutants.tsv", ch.items[c],
                      l.items[i].id);
        }
        enum { MAX_SETS = 8 };
        Mutant **sets[MAX_SETS];
        int in_set[MAX_SETS], n_sets = 0;
        for (int k = 0; k < MAX_SETS; k++) { /* set k: the k-th mutant of each exercise */
            sets[k] = chapfs_xmalloc(sizeof(Mutant *) * (size_t)(l.n + 1));
            in_set[k] = 0;
            for (int i = 0; i < l.n; i++) {
                int seen = 0;
                for (int j = 0; j < n; j++)
                    if (strcmp(m[j].chapter, ch.items[c]) == 0 && strcmp(m[j].id, l.items[i].id) == 0 && seen++ == k)
                        sets[k][in_set[k]++] = &m[j];
            }
            if (in_set[k]) {
                mutant_copy(ch.items[c], sets[k], in_set[k], k);
                n_sets = k + 1;
            }
        }
        grade_mutant_sets(ch.items[c], n_sets);
        for (int k = 0; k < MAX_SETS; k++) {
            if (k < n_sets) check_mutant_set(ch.items[c], sets[k], in_set[k], k);
            free(sets[k]);
        }
        exercises_free(&l);
    }
    for (int j = 0; j < n; j++) {
        free(m[j].chapter);
        free(m[j].id);
        free(m[j].what);
        free(m[j].from);
        free(m[j].to);
    }
    free(m);
    strlist_free(&ch);
}
