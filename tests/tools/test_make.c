/* test_make.c: the Makefile itself. Make expands a rule's prerequisites when it
 * reads the rule, so a variable that a tools/ make file uses in a prerequisite
 * must be defined before that file is read: otherwise it is silently empty, and
 * on a fresh clone a target runs without what it needs (the grader once ran
 * the tests without the test models and gave a correct solution 0).
 * `make --warn-undefined-variables` names every such read. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "harness.h"

/* Reads the Makefile in dir (nothing is built: -n help); returns make's warnings. */
static char *parse_warnings(const char *dir) {
    char *cmd = chapfs_printf("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD_DIR -u TEST_MODELS make -C '%s' --no-print-directory "
                              "--warn-undefined-variables -n help 2>&1 >/dev/null",
                              dir);
    char *out;
    int rc = fx_capture(cmd, &out);
    CHECK_MSG(rc == 0, "%s: exit %d:\n%s", cmd, rc, out);
    free(cmd);
    return out;
}

TEST(make_reads_no_variable_before_it_is_defined) {
    char *out = parse_warnings(".");
    CHECK_MSG(strstr(out, "undefined variable") == NULL,
              "the Makefile reads variables before they are defined (define them before the rule, or in "
              "tools/models.mk, which is read first):\n%s",
              out);
    free(out);
}

/* The check above can fail: a copy of the make files with a tools/aa.mk rule
 * that depends on a variable tools/zz.mk defines, read after it. */
TEST(make_undefined_variable_check_catches_include_order) {
    const char *dir = test_tmp_path("make-order");
    char *cmd = chapfs_printf("rm -rf '%s' && mkdir -p '%s/tools' && cp Makefile '%s/' && cp tools/*.mk '%s/tools/'",
                              dir, dir, dir, dir);
    fx_sh(cmd);
    free(cmd);
    char *tools = chapfs_printf("%s/tools", dir);
    fx_write(tools, "aa.mk", "planted: $(PLANTED_MODELS)\n");
    fx_write(tools, "zz.mk", "PLANTED_MODELS := build/models/planted.gguf\n");
    char *out = parse_warnings(dir);
    CHECK_MSG(strstr(out, "aa.mk") && strstr(out, "PLANTED_MODELS"), "not caught:\n%s", out);
    free(out);
    free(tools);
}

/* A one-chapter project in the scratch area built by the real Makefile and
 * test runner: common/one.c, chapters/X.1 (an engine file and a program), one
 * test of common/, and a tools/models.mk that makes no models. */
static const char *mini_project(void) {
    const char *dir = test_tmp_path("mini-project");
    char *cmd = chapfs_printf("rm -rf '%s' && mkdir -p '%s/tools' '%s/common' '%s/chapters/X.1' '%s/tests/common' && "
                              "cp Makefile '%s/' && cp tools/run-tests.sh '%s/tools/' && "
                              "cp tests/harness.c tests/harness.h '%s/tests/'",
                              dir, dir, dir, dir, dir, dir, dir, dir);
    fx_sh(cmd);
    free(cmd);
    char *sub = chapfs_printf("%s/tools", dir);
    fx_write(sub, "models.mk", "MKMODEL :=\nTEST_MODELS :=\n");
    free(sub);
    sub = chapfs_printf("%s/common", dir);
    fx_write(sub, "one.h", "int one(void);\n");
    fx_write(sub, "one.c", "#include \"one.h\"\nint one(void) { return 1; }\n");
    free(sub);
    sub = chapfs_printf("%s/chapters/X.1", dir);
    fx_write(sub, "engine.c", "#include \"one.h\"\nint engine(void) { return one() - 1; }\n");
    fx_write(sub, "hello-run.c", "int engine(void);\nint main(void) { return engine(); }\n");
    free(sub);
    sub = chapfs_printf("%s/tests/common", dir);
    fx_write(sub, "test_one.c",
             "#include <stdio.h>\n#include \"harness.h\"\n#include \"one.h\"\n"
             "TEST(one_is_one) { FILE *f = fopen(test_tmp_path(\"scratch\"), \"w\"); CHECK(f && one() == 1); "
             "if (f) fclose(f); }\n");
    free(sub);
    return dir;
}

/* `make test` ends with the runner's summary line (make deletes no
 * intermediate file after it), a passing test leaves no scratch directory,
 * and a second make rebuilds nothing. */
TEST(make_test_ends_with_the_summary_and_keeps_objects) {
    const char *dir = mini_project();
    char *out, *cmd = chapfs_printf("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD_DIR -u TEST_MODELS make -C '%s' --no-print-directory test", dir);
    int rc = fx_capture(cmd, &out);
    CHECK_MSG(rc == 0, "%s: exit %d:\n%s", cmd, rc, out);
    size_t len = strlen(out);
    while (len && out[len - 1] == '\n') out[--len] = 0;
    const char *last = strrchr(out, '\n') ? strrchr(out, '\n') + 1 : out;
    CHECK_MSG(strcmp(last, "1 passed, 0 failed, 0 skipped") == 0, "make test's last line is '%s'", last);
    free(out);
    free(cmd);
    cmd = chapfs_printf("ls -A '%s/build/tmp'", dir);
    rc = fx_capture(cmd, &out);
    CHECK_MSG(rc == 0 && !*out, "a passing test left its scratch files: %s", out);
    free(out);
    free(cmd);
    cmd = chapfs_printf("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD_DIR -u TEST_MODELS make -C '%s' --no-print-directory -n test", dir);
    rc = fx_capture(cmd, &out);
    CHECK_MSG(rc == 0 && !strstr(out, "cc ") && !strstr(out, "ar ") && !strstr(out, "rm "),
              "a second make rebuilds or removes something:\n%s", out);
    free(out);
    free(cmd);
}

/* True when word occurs in text as a whole make target name. */
static bool has_word(const char *text, const char *word) {
    size_t n = strlen(word);
    for (const char *p = text; (p = strstr(p, word)); p++) {
        bool start = p == text || !(p[-1] == '-' || p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
        char e = p[n];
        if (start && !(e == '-' || e == '_' || (e >= 'a' && e <= 'z'))) return true;
    }
    return false;
}

/* `make help` names every target a user may call: every .PHONY target of the
 * Makefile and the tools/ make files but check-chapter (the others' first prerequisite). */
TEST(make_help_lists_every_target) {
    char *help, *db;
    int rc = fx_capture("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD_DIR -u TEST_MODELS make --no-print-directory -s help", &help);
    CHECK_MSG(rc == 0, "make help: exit %d", rc);
    rc = fx_capture("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD_DIR -u TEST_MODELS make --no-print-directory -p -n help", &db);
    const char *phony = strstr(db, "\n.PHONY: ");
    CHECK_MSG(phony != NULL, "no .PHONY line in make's database");
    int n = 0;
    for (const char *p = phony ? phony + 9 : ""; *p && *p != '\n';) {
        size_t len = strcspn(p, " \n");
        char *t = chapfs_strndup(p, len);
        if (strcmp(t, "check-chapter") != 0) {
            CHECK_MSG(has_word(help, t), "make help does not list the target '%s' (add a \"#> make %s\" line)", t, t);
            n++;
        }
        free(t);
        p += len;
        while (*p == ' ') p++;
    }
    CHECK_MSG(n >= 10, "only %d targets found", n);
    CHECK(has_word(help, "BENCH_TYPES") && has_word(help, "BENCH_BACKENDS"));
    free(help);
    free(db);
}

/* Targets that install Debian packages do it through tools/apt-install.sh,
 * which, not as root, names the packages and the command instead of letting
 * apt-get fail on its lock file. */
TEST(make_package_installs_check_root_first) {
    char *out;
    int rc = fx_capture("grep -n 'apt-get' Makefile tools/*.mk", &out);
    CHECK_MSG(rc == 1, "a make file calls apt-get itself (use tools/apt-install.sh):\n%s", out);
    free(out);
    rc = fx_capture("command -v dpkg-query", &out);
    free(out);
    if (rc != 0) SKIP("no dpkg-query: not a Debian system");
    rc = fx_capture("tools/apt-install.sh test coreutils", &out);
    CHECK_MSG(rc == 0 && !*out, "an installed package: exit %d, '%s'", rc, out);
    free(out);
    /* Not root: as root, run it as nobody (setpriv), from a copy nobody can
     * read wherever the checkout lives (a clone in a 0700 directory, say). */
    rc = fx_capture(geteuid() == 0 ? "d=$(mktemp -d /tmp/apt-install-XXXXXX) && chmod 755 $d && "
                                     "cp tools/apt-install.sh $d/ && chmod 755 $d/apt-install.sh && "
                                     "setpriv --reuid=65534 --regid=65534 --clear-groups "
                                     "$d/apt-install.sh book no-such-package-xyz; rc=$?; rm -rf $d; exit $rc"
                                   : "tools/apt-install.sh book no-such-package-xyz",
                    &out);
    CHECK_MSG(rc == 1 && strstr(out, "make book: needs the Debian package(s) no-such-package-xyz; as root run: "
                                     "apt-get install -y no-such-package-xyz"),
              "not root: exit %d, '%s'", rc, out);
    free(out);
}

/* Every program make builds (the chapters', the tools', the test binaries)
 * answers --help with its usage on stdout and exit status 0. */
TEST(make_every_program_answers_help) {
    char *list;
    /* node/ holds npm's packages (the server tests' client, the book check's browser driver), in
     * build/ and in the sanitizers' build/san-*, llamacpp/ make bench-llamacpp's llama.cpp: other
     * people's programs */
    char *cmd = chapfs_printf("find '%s' -path '*/tmp' -prune -o -path '*/exercises' -prune -o "
                              "-path '*/coverage' -prune -o -path '*/obj' -prune -o -path '*/node' -prune -o "
                              "-path '*/llamacpp' -prune -o -type f -perm -u+x -print | sort",
                              test_build_dir());
    int rc = fx_capture(cmd, &list);
    free(cmd);
    CHECK(rc == 0);
    int n = 0;
    for (char *p = list, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) break;
        *nl = 0;
        char *out, *run = chapfs_printf("'%s' --help 2>/dev/null", p);
        rc = fx_capture(run, &out);
        CHECK_MSG(rc == 0 && strstr(out, "usage"), "%s --help: exit %d, printed '%.200s'", p, rc, out);
        free(out);
        free(run);
        n++;
    }
    CHECK_MSG(n >= 10, "only %d programs under %s (make test builds them all)", n, test_build_dir());
    free(list);
}

/* make bench first checks its models fit on the disk (tools/bench/space.sh);
 * here with a stand-in for mkmodel that says each model takes an exabyte. */
TEST(make_bench_checks_disk_space_first) {
    const char *dir = test_tmp_path("bench-space");
    char *cmd = chapfs_printf("rm -rf '%s' && mkdir -p '%s' && printf '#!/bin/sh\\necho 1000000000000000000\\n' "
                              ">'%s/mkmodel' && chmod +x '%s/mkmodel'",
                              dir, dir, dir, dir);
    fx_sh(cmd);
    free(cmd);
    char *out;
    cmd = chapfs_printf("tools/bench/space.sh '%s/mkmodel' '%s/models' q8_0 q4_0", dir, dir);
    int rc = fx_capture(cmd, &out);
    CHECK_MSG(rc == 1 && strstr(out, "q8_0 1000000000.0 GB") && strstr(out, "2000000000.0 GB to make") &&
                  strstr(out, "not enough disk space"),
              "exit %d:\n%s", rc, out);
    free(out);
    free(cmd);
}
