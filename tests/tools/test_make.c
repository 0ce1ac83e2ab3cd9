/* test_make.c: the Makefile itself. Make expands a rule's prerequisites when it
 * reads the rule, so a variable that a tools/ make file uses in a prerequisite
 * must be defined before that file is read: otherwise it is silently empty, and
 * on a fresh clone a target runs without what it needs (the grader once ran
 * the tests without the test models and gave a correct solution 0).
 * `make --warn-undefined-variables` names every such read. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"

/* Reads the Makefile in dir (nothing is built: -n help); returns make's warnings. */
static char *parse_warnings(const char *dir) {
    char *cmd = chapfs_printf("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C '%s' --no-print-directory "
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
