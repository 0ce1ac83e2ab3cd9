/* replay.c: a fuzz target as a test of `make test` (see fuzz.h): every seed in
 * tests/fuzz/corpus/NAME and every input that once crashed, kept in
 * tests/fuzz/regress/NAME, goes through LLVMFuzzerTestOneInput. A crash
 * or a failed property aborts the binary after naming the input. */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "harness.h"
#include "util.h"

/* Built with -DFUZZ_TARGET=name (gguf, json, ...). */
#ifndef FUZZ_TARGET
#error "build with -DFUZZ_TARGET=name"
#endif
#define STR_(x) #x
#define STR(x) STR_(x)
#define FUZZ_NAME STR(FUZZ_TARGET)
#define REPLAY_TEST_(t) TEST(fuzz_replay_##t)
#define REPLAY_TEST(t) REPLAY_TEST_(t)

static char current[1024];

static void on_crash(int sig) {
    static const char msg[] = "\nreplay: crashed on ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    w = write(2, current, strlen(current));
    w = write(2, "\n", 1);
    (void)w;
    raise(sig);
}

static void catch_crashes(void) {
    struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_RESETHAND};
    sigaction(SIGABRT, &sa, NULL);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    sigaction(SIGSEGV, &sa, NULL); /* the sanitizers report these themselves */
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
#endif
}

/* Runs every file of dir; returns how many, or -1 if dir cannot be read. */
static int replay_dir(const char *dir) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort), files = 0;
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            snprintf(current, sizeof current, "%s/%s", dir, names[i]->d_name);
            char err[ERR_MAX];
            size_t len;
            char *data = file_read_all(current, &len, err);
            CHECK_MSG(data != NULL, "%s", err);
            if (data) {
                LLVMFuzzerTestOneInput((const uint8_t *)data, len);
                files++;
            }
            free(data);
        }
        free(names[i]);
    }
    free(names);
    return files;
}

/* TEST(fuzz_replay_<target>) */
REPLAY_TEST(FUZZ_TARGET) {
    catch_crashes();
    int seeds = replay_dir("tests/fuzz/corpus/" FUZZ_NAME);
    CHECK_MSG(seeds > 0, "no seeds in tests/fuzz/corpus/%s", FUZZ_NAME);
    int regress = replay_dir("tests/fuzz/regress/" FUZZ_NAME);
    printf("    %s: %d seeds, %d regression inputs\n", FUZZ_NAME, seeds, regress < 0 ? 0 : regress);
}
