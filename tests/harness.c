/* harness.c: runs the registered tests; see harness.h. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
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

bool test_same_floats(const char *file, int line, const float *a, const float *b, size_t n, const char *fmt, ...) {
    size_t n_diff = 0, first = 0, worst = 0;
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        double m = fabs((double)a[i]) > fabs((double)b[i]) ? fabs((double)a[i]) : fabs((double)b[i]);
        if (m > max_abs) max_abs = m;
        if (memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
        double d = fabs((double)a[i] - (double)b[i]);
        if (d != d) d = INFINITY; /* a NaN on one side */
        if (n_diff++ == 0) first = i;
        if (d > max_diff || n_diff == 1) max_diff = d, worst = i;
    }
    if (n_diff == 0) return true;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    test_fail(file, line,
              "%s: max |a-b| %.3g (index %zu; values up to %.3g), first at index %zu (%.9g vs %.9g), %zu of %zu "
              "differ; bitwise equality is required: the same operations in the same order",
              what, max_diff, worst, max_abs, first, a[first], b[first], n_diff, n);
    return false;
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

#ifndef __has_feature
#define __has_feature(x) 0 /* GCC: the __SANITIZE_*__ macros say it */
#endif
bool test_sanitized(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || __has_feature(address_sanitizer) || \
    __has_feature(thread_sanitizer)
    return true;
#else
    return false;
#endif
}

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

static char tmp_dir[256];

const char *test_tmp_path(const char *name) {
    char *dir = tmp_dir;
    static char path[8][512];
    static int slot;
    if (!dir[0]) {
        snprintf(dir, sizeof tmp_dir, "%s/tmp/test-%d", test_build_dir(), (int)getpid());
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "harness: cannot create %s\n", dir);
    }
    slot = (slot + 1) % 8;
    snprintf(path[slot], sizeof path[slot], "%s/%s", dir, name);
    return path[slot];
}

/* Removes the scratch directory (its name is ours: build/tmp/test-PID). */
static void remove_tmp_dir(void) {
    if (!tmp_dir[0]) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "harness: cannot remove %s\n", tmp_dir);
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
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [SUBSTRING...]\n"
               "Runs the tests whose names contain one of the substrings (all of them without),\n"
               "ending with the line \"N passed, N failed, N skipped\". Run by `make test`.\n",
               argv[0]);
        return 0;
    }
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
    if (failed == 0) remove_tmp_dir();
    else if (tmp_dir[0]) printf("scratch files kept in %s\n", tmp_dir);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
