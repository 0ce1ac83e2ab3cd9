/* test_harness.c: the harness's own promises, checked on a small test
 * program compiled with it in the scratch area. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"

/* A failed CHECK_SAME_FLOATS says how big the difference is and where it
 * starts, so that a sum in another order can be told from a real bug. */
TEST(harness_same_floats_reports_the_difference) {
    const char *dir = test_tmp_path("harness-floats");
    char *cmd = chapfs_printf("rm -rf '%s' && mkdir -p '%s'", dir, dir);
    fx_sh(cmd);
    free(cmd);
    fx_write(dir, "t.c",
             "#include \"harness.h\"\n"
             "TEST(same) { float a[3] = {1, 2, 3}; CHECK(CHECK_SAME_FLOATS(a, a, 3, \"same\")); }\n"
             "TEST(differ) { float a[4] = {1, 2, 3, 4}, b[4] = {1, 2.5f, 3, 4.25f};\n"
             "  CHECK_SAME_FLOATS(a, b, 4, \"step %d\", 7); }\n");
    char *out;
    cmd = chapfs_printf("${CC:-cc} -std=c11 -D_GNU_SOURCE -Itests -o '%s/t' '%s/t.c' tests/harness.c -lm && '%s/t'", dir,
                        dir, dir);
    int rc = fx_capture(cmd, &out);
    CHECK_MSG(rc == 1 && strstr(out, "ok   same") && strstr(out, "FAIL differ") &&
                  strstr(out, "step 7: max |a-b| 0.5 (index 1; values up to 4.25), first at index 1 (2 vs 2.5), "
                              "2 of 4 differ; bitwise equality is required"),
              "exit %d:\n%s", rc, out);
    free(out);
    free(cmd);
}
