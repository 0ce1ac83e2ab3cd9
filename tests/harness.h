/* harness.h: the project's small test harness.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_EQ_INT(a, b); CHECK_NEAR(f, g, 1e-6); }
 *
 * Tests register themselves; a test binary's main (harness.c) runs them all,
 * or those whose names contain one of its arguments, and ends with the line
 * "N passed, N failed, N skipped". SKIP("why") marks a test skipped (for
 * example when ../shared is absent): it is reported, never counted as failed. */
#ifndef HARNESS_H
#define HARNESS_H

#include <stdbool.h>
#include <stdio.h>

typedef void (*TestFn)(void);
void test_register(const char *name, TestFn fn);
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void test_skip(const char *why);
bool test_failed_now(void);

/* Paths the tests use; overridable by environment (TEST_MODELS, SHARED_DIR, BUILD_DIR). */
const char *test_models_dir(void);  /* models made by tools/mkmodel, default $BUILD_DIR/models */
const char *test_shared_dir(void);  /* ../shared, or NULL when it is absent */
const char *test_build_dir(void);   /* build */
/* Built with a sanitizer (make test SANITIZE=...)? Programs run several times
 * slower then; a test may run them on shorter inputs, never skip them. */
bool test_sanitized(void);
/* A path in a per-process scratch directory, $BUILD_DIR/tmp/test-PID (created on
 * first use, removed at the end when every test passed; kept for a look when one failed).
 * Tests write only there, never to system paths. */
const char *test_tmp_path(const char *name);

#define TEST(name)                                                            \
    static void name(void);                                                   \
    __attribute__((constructor)) static void register_##name(void) {          \
        test_register(#name, name);                                           \
    }                                                                         \
    static void name(void)

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);       \
    } while (0)

#define CHECK_MSG(cond, ...)                                                  \
    do {                                                                      \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);              \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                    \
    do {                                                                      \
        long long _a = (long long)(a), _b = (long long)(b);                   \
        if (_a != _b)                                                         \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b); \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                 \
    do {                                                                      \
        double _a = (double)(a), _b = (double)(b), _t = (double)(tol);        \
        if (!(_a - _b <= _t && _b - _a <= _t))                                \
            test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, _a, _b, _t); \
    } while (0)

#define CHECK_STR(a, b)                                                       \
    do {                                                                      \
        const char *_a = (a), *_b = (b);                                      \
        if (!_a || !_b || strcmp(_a, _b) != 0)                                \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, \
                      _a ? _a : "(null)", _b ? _b : "(null)");                \
    } while (0)

/* Compares a[n] and b[n] bit for bit. When they differ, fails the test with
 * the message (printf-style) and the size of the difference: how many values
 * differ, the first one, and the largest |a-b| next to the largest |a|, so
 * that a sum in another order (tiny differences) can be told from a real bug.
 * Returns true when they are the same. */
bool test_same_floats(const char *file, int line, const float *a, const float *b, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
#define CHECK_SAME_FLOATS(a, b, n, ...) test_same_floats(__FILE__, __LINE__, (a), (b), (n), __VA_ARGS__)

#define SKIP(why)                                                             \
    do {                                                                      \
        test_skip(why);                                                       \
        return;                                                               \
    } while (0)

#endif
