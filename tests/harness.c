/* harness.c: runs the registered tests; see harness.h. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TESTS 1024

typedef struct { const char *name; TestFn fn; } Test;

static Test tests[MAX_TESTS];
static int n_tests;
static bool cur_failed, cur_skipped;
static int cur_fail_msgs;

void test_register(const char *name, TestFn fn) {
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        exit(2);
    }
    tests[n_tests++] = (Test){name, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    cur_failed = true;
    if (++cur_fail_msgs > 10) return; /* a broken loop should not flood the log */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
}

void test_skip(const char *why) {
    cur_skipped = true;
    fprintf(stdout, "    skipped: %s\n", why);
}

bool test_failed_now(void) { return cur_failed; }

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

const char *test_build_dir(void) { return env_or("BUILD_DIR", "build"); }

const char *test_models_dir(void) {
    static char dflt[4096];
    snprintf(dflt, sizeof dflt, "%s/models", test_build_dir());
    return env_or("TEST_MODELS", dflt);
}

const char *test_shared_dir(void) {
    const char *d = env_or("SHARED_DIR", "../shared");
    struct stat st;
    static char probe[4096];
    snprintf(probe, sizeof probe, "%s/reference", d);
    return stat(probe, &st) == 0 && S_ISDIR(st.st_mode) ? d : NULL;
}

const char *test_tmp_path(const char *name) {
    static char dir[256];
    static char path[8][512];
    static int slot;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/tmp/test-%d", test_build_dir(), (int)getpid());
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "harness: cannot create %s\n", dir);
    }
    slot = (slot + 1) % 8;
    snprintf(path[slot], sizeof path[slot], "%s/%s", dir, name);
    return path[slot];
}

static bool selected(const char *name, int argc, char **argv) {
    if (argc <= 1) return true;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return true;
    return false;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < n_tests; i++) {
        if (!selected(tests[i].name, argc, argv)) continue;
        cur_failed = cur_skipped = false;
        cur_fail_msgs = 0;
        tests[i].fn();
        if (cur_failed) {
            failed++;
            printf("FAIL %s\n", tests[i].name);
        } else if (cur_skipped) {
            skipped++;
            printf("skip %s\n", tests[i].name);
        } else {
            passed++;
            printf("ok   %s\n", tests[i].name);
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
