/* The book: its code includes resolve against the chapters as they are now,
 * and their links (file and lines, for reading it unrendered) are current; the
 * students' edition shows every exercise as a stub; the rendered pages link to
 * each other; the tables about the code are computed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

/* Runs cmd; returns its exit code and its output (stdout and stderr) in *out (malloc'd). */
static int run(const char *cmd, char **out) {
    char full[4096];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    size_t n = 0, cap = 1 << 16;
    *out = malloc(cap);
    if (!p) {
        **out = 0;
        return -1;
    }
    for (size_t got; (got = fread(*out + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) *out = realloc(*out, cap *= 2);
    }
    (*out)[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* A markdown file with text in the scratch directory; returns its path. */
static const char *scratch_md(const char *name, const char *text) {
    const char *path = test_tmp_path(name);
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static const char *bookpp(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/tools/bookpp", test_build_dir());
    return path;
}

TEST(book_include_links_resolve_and_are_current) {
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s --check README.md book/*.md", bookpp());
    int rc = run(cmd, &out);
    CHECK_MSG(rc == 0, "%s:\n%s", cmd, out);
    free(out);
}

/* --check catches a stale link and the old @include form, and --update fixes both. */
TEST(book_links_are_updated_when_the_code_moves) {
    const char *md = scratch_md("moved.md", "# A page\n\n[`forward` in chapters/II.1/forward.c, lines 1-2]"
                                            "(../chapters/II.1/forward.c#L1-L2)\n\n"
                                            "@include chapters/II.1/forward.c mlp_block\n");
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s --check '%s'", bookpp(), md);
    int rc = run(cmd, &out);
    CHECK_MSG(rc == 1 && strstr(out, ":3: a stale include link") && strstr(out, ":5: an @include line") &&
                  strstr(out, "make book-links"),
              "%s: exit %d:\n%s", cmd, rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s --update '%s' && %s --check '%s' && cat '%s'", bookpp(), md, bookpp(), md, md);
    rc = run(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "\n[`mlp_block` in chapters/II.1/forward.c, lines "), "%s: exit %d:\n%s", cmd,
              rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s '%s'", bookpp(), md); /* and it expands to the code */
    rc = run(cmd, &out);
    CHECK_MSG(rc == 0 && count(out, "```c\n") == 2 && strstr(out, "void forward("), "%s: exit %d:\n%s", cmd, rc, out);
    free(out);
}

/* Every exercise function the chapters' pages show readers (with its marker)
 * is a stub with its task in the students' edition, and no stub is shown to readers. */
TEST(book_students_edition_shows_exercises_as_stubs) {
    char cmd[2048], *reader, *students;
    const char *pages = "$(grep -l '^\\[`' book/*.md)"; /* the pages that include code */
    snprintf(cmd, sizeof cmd, "for f in %s; do %s --md ../.. \"$f\" || exit 1; done", pages, bookpp());
    int rc = run(cmd, &reader);
    CHECK_MSG(rc == 0, "%s:\n%s", cmd, reader);
    snprintf(cmd, sizeof cmd, "for f in %s; do %s --student --md ../.. \"$f\" || exit 1; done", pages, bookpp());
    rc = run(cmd, &students);
    CHECK_MSG(rc == 0, "%s:\n%s", cmd, students);
    int shown = count(reader, "\n/* EXERCISE ");
    CHECK_MSG(shown >= 3, "the reader's edition shows only %d exercise functions", shown);
    CHECK_EQ_INT(count(reader, "is not implemented yet"), 0);
    CHECK_EQ_INT(count(students, "is not implemented yet"), shown);
    CHECK_EQ_INT(count(students, "> **Exercise `"), shown);
    free(reader);
    free(students);
}

/* The views of the code a build of the book shows (each stage's diff, page
 * and fragment, each chapter's whole diff, the text of every page that pulls
 * code) in dir, drawn for the students' edition (stubbed chapters, bookpp
 * --student) or the readers'; then tools/book/no-answers.sh on them. Returns
 * its exit code, its report in *out. */
static int answers_shown(const char *dir, bool students, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "set -e; B=%s; export BUILD=$B; T=%s; CH=\"$(ls chapters)\"; rm -rf $T; mkdir -p $T/diff; src=chapters; %s\n"
             "$B/tools/chapter-diff --stages | while IFS='\t' read -r c s rest; do\n"
             "  $B/tools/chapter-diff --chapters-dir $src --no-check --html $T/diff --stage $s >/dev/null\n"
             "  $B/tools/chapter-diff --chapters-dir $src --no-check --html $T/diff --fragment --stage $s >/dev/null\n"
             "  $B/tools/chapter-diff --chapters-dir $src --no-check --html $T/diff $c >/dev/null; done\n"
             "for f in $(grep -l '^\\[`' README.md book/*.md); do n=$(basename $f .md); [ $f = README.md ] && n=project\n"
             "  [ $n = introduction ] && n=index; $B/tools/bookpp %s --md ../.. $f >$T/$n.md; done\n"
             "BUILD=$B OUT=$T CHAPTERS=\"$CH\" tools/book/no-answers.sh md",
             test_build_dir(), dir,
             students ? "src=$T/chapters; BUILD=$B CHAPTERS=\"$CH\" tools/book/student-chapters.sh $src;" : "",
             students ? "--student" : "");
    return run(cmd, out);
}

/* The students' edition shows no answer: no page of a chapter (its code, a
 * diff into it or into one of its stages) holds three lines in a row of one
 * of its marked functions' bodies. The same check on the readers' edition
 * finds the answers of every chapter that has exercises, so it can fail. */
TEST(book_students_edition_shows_no_answer) {
    char *out;
    int rc = answers_shown(test_tmp_path("students"), true, &out);
    CHECK_MSG(rc == 0, "the students' edition shows answers (exit %d):\n%s", rc, out);
    free(out);
    rc = answers_shown(test_tmp_path("readers"), false, &out);
    CHECK_MSG(rc == 1, "the check on the readers' edition exited %d:\n%s", rc, out);
    const char *chapters[] = {"II.1", "II.2", "III.4", "III.7"};
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "(%s/", chapters[i]);
        CHECK_MSG(strstr(out, want) != NULL, "no answer of %s found in the readers' edition:\n%s", chapters[i], out);
    }
    free(out);
}

/* The relative path from dir (the scratch directory, under any build tree:
 * build/tmp/test-PID, build/san-address/tmp/test-PID) up to the top of the
 * repository, the current directory: "../" once per level. */
static void up_to_the_top(const char *dir, char *up, size_t n) {
    char top[4096], here[4096];
    up[0] = '\0';
    CHECK(realpath(".", top) != NULL && realpath(dir, here) != NULL);
    size_t len = strlen(top);
    CHECK_MSG(strncmp(here, top, len) == 0 && here[len] == '/', "%s is not inside %s", here, top);
    for (const char *p = here + len; *p; p++)
        if (*p == '/' && strlen(up) + 3 < n) strcat(up, "../");
}

/* The rendered pages link to each other's .html, and to the repository's files from build/book/. */
TEST(book_rendered_links_point_at_the_pages) {
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s --html ../.. README.md", bookpp());
    int rc = run(cmd, &out);
    CHECK_MSG(rc == 0, "%s:\n%s", cmd, out);
    CHECK_MSG(strstr(out, "](performance.html)") && strstr(out, "](instructors.html)") && !strstr(out, "](book/"),
              "README.md rendered:\n%s", out);
    free(out);
    char text[1024], up[256];
    up_to_the_top(test_tmp_path(""), up, sizeof up);
    snprintf(text, sizeof text, "[a](%sREADME.md#layout) [b](%stools/train/README.md) [c](https://example.org/x.md)\n",
             up, up);
    const char *md = scratch_md("links.md", text);
    snprintf(cmd, sizeof cmd, "%s --html ../.. '%s'", bookpp(), md);
    rc = run(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "[a](project.html#layout) [b](../../tools/train/README.md) "
                                     "[c](https://example.org/x.md)"),
              "%s:\n%s", cmd, out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s --html ../.. book/README.md", bookpp());
    rc = run(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "](II.2-kv-cache.html)") && strstr(out, "](index.html)") && !strstr(out, ".md)"),
              "book/README.md rendered:\n%s", out);
    free(out);
}

/* The instructors' tables are computed: every exercise of every chapter, the line counts. */
TEST(book_tables_about_the_code_are_computed) {
    char cmd[4096], *out, *list;
    snprintf(cmd, sizeof cmd, "for c in $(ls chapters); do %s/tools/exercises list $c | cut -f1; done",
             test_build_dir());
    int rc = run(cmd, &list);
    CHECK_MSG(rc == 0 && *list, "%s:\n%s", cmd, list);
    const char *md = scratch_md("tables.md", "<!-- @exercises -->\n<!-- @code-lines -->\n");
    snprintf(cmd, sizeof cmd, "%s '%s'", bookpp(), md);
    rc = run(cmd, &out);
    CHECK_MSG(rc == 0 && !strstr(out, "@exercises") && strstr(out, "| `chapters/II.1` |") && strstr(out, "| `common`, all |") && strstr(out, "| `common/model` |"),
              "%s:\n%s", cmd, out);
    for (char *id = strtok(list, "\n"); id; id = strtok(NULL, "\n")) {
        char want[128];
        snprintf(want, sizeof want, "| `%s` |", id);
        CHECK_MSG(strstr(out, want) != NULL, "the exercises table lacks %s", id);
    }
    free(out);
    free(list);
}

/* Code cites the book's appendix by section ("book/appendix-gguf.md A.3.5"):
 * every cited section exists, and nothing cites documents outside the project. */
TEST(book_appendix_sections_cited_by_the_code_exist) {
    char *cites, *outside;
    int rc = run("grep -rhoE 'appendix-gguf.md,? \\(?A\\.[0-9]+(\\.[0-9]+)*' common chapters tools tests "
                 "--include=*.c --include=*.h --include=*.py --include=*.md | grep -oE 'A\\.[0-9]+(\\.[0-9]+)*' | "
                 "sort -u",
                 &cites);
    CHECK_MSG(rc == 0 && *cites, "no citation of book/appendix-gguf.md found:\n%s", cites);
    int n = 0;
    for (char *s = strtok(cites, "\n"); s; s = strtok(NULL, "\n"), n++) {
        char cmd[256], *out;
        snprintf(cmd, sizeof cmd, "grep -qE '^#+ %s ' book/appendix-gguf.md", s);
        CHECK_MSG(run(cmd, &out) == 0, "the code cites section %s of book/appendix-gguf.md, which has none", s);
        free(out);
    }
    CHECK(n >= 5);
    free(cites);
    rc = run("grep -rniE 'fact[ ]sheet|facts[ ](section|§)|qwen3-gguf[-]facts' common chapters tools tests book "
             "README.md --include=*.c --include=*.h --include=*.py --include=*.md",
             &outside);
    CHECK_MSG(rc == 1, "cites a document that is not in the project (cite book/appendix-gguf.md):\n%s", outside);
    free(outside);
}

/* The README's layout section names every top-level entry of the repository
 * and every part of tests/. */
TEST(book_readme_layout_is_complete) {
    char *readme, *entries;
    int rc = run("sed -n '/^## Layout/,/^## /p' README.md", &readme);
    CHECK_MSG(rc == 0 && strstr(readme, "## Layout"), "README.md has no Layout section");
    rc = run("ls -A | grep -vx -e .git -e build -e exercises -e .gitignore; ls tests | sed 's|$|/|'", &entries);
    CHECK(rc == 0);
    int n = 0;
    for (char *e = strtok(entries, "\n"); e; e = strtok(NULL, "\n"), n++) {
        char bare[256];
        snprintf(bare, sizeof bare, "%s", e);
        size_t len = strlen(bare);
        if (len > 1 && bare[len - 1] == '/') bare[len - 1] = 0; /* tests/ entries: with or without the slash */
        if (strcmp(bare, "harness.c") == 0 || strcmp(bare, "harness.h") == 0) snprintf(bare, sizeof bare, "harness");
        CHECK_MSG(strstr(readme, bare) != NULL, "README.md's Layout section does not mention '%s'", e);
    }
    CHECK(n >= 10);
    free(readme);
    free(entries);
}

/* Reads the file at path into a malloc'd string ("" when it cannot). */
static char *slurp_file(const char *path) {
    char cmd[1200], *out;
    snprintf(cmd, sizeof cmd, "cat '%s'", path);
    run(cmd, &out);
    return out;
}

/* III.7's figures come from make bench's "batched" and "ab" arrays: every point
 * that ran with its two limits, the A/B with its ratio; with no bench JSON and
 * nothing built to measure with, each says its measurement failed (which make
 * book-check rejects) instead of drawing an empty plot. */
TEST(book_figures_of_iii7_come_from_the_bench_json) {
    const char *json = scratch_md(
        "bench.json",
        "{\"date\":\"2026-11-20\",\"cpu\":\"Test CPU 9000\",\"rows\":[],\"batched\":["
        "{\"type\":\"q8_0\",\"backend\":\"parallel\",\"threads\":2,\"batch\":1,\"ok\":true,"
        "\"decode_tokens_per_s\":16.6,\"bandwidth_limit_tokens_per_s\":22,\"compute_limit_tokens_per_s\":95},"
        "{\"type\":\"q8_0\",\"backend\":\"parallel\",\"threads\":2,\"batch\":2,\"ok\":false,"
        "\"decode_tokens_per_s\":0,\"bandwidth_limit_tokens_per_s\":44,\"compute_limit_tokens_per_s\":95},"
        "{\"type\":\"q8_0\",\"backend\":\"parallel\",\"threads\":2,\"batch\":8,\"ok\":true,"
        "\"decode_tokens_per_s\":61.5,\"bandwidth_limit_tokens_per_s\":176,\"compute_limit_tokens_per_s\":95}],"
        "\"ab\":[{\"type\":\"q8_0\",\"requests\":16,\"concurrency\":8,\"prompt_tokens\":64,\"output_tokens\":32,"
        "\"tps_1\":5.7,\"tps_n\":8.9,\"ratio\":1.56,\"ttft_p50_ms_1\":2100,\"ttft_p50_ms_n\":700,"
        "\"itl_p50_ms_1\":150,\"itl_p50_ms_n\":800}]}\n");
    char dir[600], cmd[8192], path[700], *out;
    snprintf(dir, sizeof dir, "%s", test_tmp_path("figures"));
    snprintf(cmd, sizeof cmd, "%s/tools/book-figures --out '%s' --build '%s/none' --model none.gguf --chapters III.7 "
             "--bench '%s' --ab '%s/none.json'", test_build_dir(), dir, dir, json, dir);
    run(cmd, &out); /* its exit code says whether gnuplot drew them all: not this test's business */
    free(out);
    snprintf(path, sizeof path, "%s/batched-sweep.dat", dir);
    char *sweep = slurp_file(path);
    CHECK_MSG(strstr(sweep, "# q8_0 parallel, 2 threads:") && strstr(sweep, "\n1 16.600 22.00 95.00\n") &&
                  strstr(sweep, "\n8 61.500 176.00 95.00\n") && !strstr(sweep, "\n2 "),
              "%s:\n%s", path, sweep);
    free(sweep);
    snprintf(path, sizeof path, "%s/ab.dat", dir);
    char *ab = slurp_file(path);
    CHECK_MSG(strstr(ab, "\"--max-concurrent 8\"") && strstr(ab, "\nq8_0 5.70 8.90 1.56x\n"), "%s:\n%s", path, ab);
    free(ab);
    snprintf(path, sizeof path, "%s/ab.md", dir);
    char *md = slurp_file(path);
    int gnuplot = run("command -v gnuplot", &out) == 0;
    free(out);
    if (gnuplot)
        CHECK_MSG(strstr(md, "data-points=\"2\"") && strstr(md, "Test CPU 9000, 2026-11-20") &&
                      strstr(md, "time to first token 2100 &rarr; 700 ms"),
                  "%s:\n%s", path, md);
    else
        printf("  (no gnuplot here: the drawings and captions are not checked; make book-setup installs it)\n");
    free(md);
    /* no bench JSON, nothing built: no plot, a failed measurement */
    snprintf(cmd, sizeof cmd, "%s/tools/book-figures --out '%s' --build '%s/none' --model none.gguf --chapters III.7 "
             "--bench '%s/none.json' --ab '%s/none.json'; cat '%s/batched-sweep.md' '%s/ab.md'; ls '%s'",
             test_build_dir(), dir, dir, dir, dir, dir, dir, dir);
    run(cmd, &out);
    CHECK_MSG(strstr(out, "data-figure=\"batched-sweep\" data-failed=\"1\"") &&
                  strstr(out, "data-figure=\"ab\" data-failed=\"1\"") && !strstr(out, "ab.svg") &&
                  !strstr(out, "batched-sweep.svg"),
              "%s:\n%s", cmd, out);
    free(out);
}
