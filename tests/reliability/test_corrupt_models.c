/* test_corrupt_models.c: hundreds of damaged copies of a small model, each
 * given to a chapter's model-generate. Each must either run (exit 0) or be
 * refused with one line naming the problem (exit 1), within a time limit:
 * never a crash, a hang, a sanitizer report (under SANITIZE=1 the programs are
 * sanitized and any report aborts them) or a leak report.
 *
 * The damage is seeded, so a failure names its case and can be replayed; the
 * failing file is kept in the test's scratch directory. Most of it lands in
 * the header, metadata and tensor table (where lengths, counts, types and
 * offsets live), some anywhere: truncation, flipped bytes, extreme integers
 * written over a field, a byte removed or repeated. CORRUPT_VERBOSE=1 in the
 * environment prints every case and what it got. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "harness.h"
#include "util.h"

extern char **environ;

#define CASES 300
#define SEED 15
#define LIMIT_MS 60000.0 /* per run: far above any sound run, even under a sanitizer */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t rng_below(uint64_t *s, size_t n) { return n ? (size_t)(rng_next(s) % n) : 0; }

/* Writes a damaged copy of clean[0..len) into out (room for len + 1 bytes);
 * head is where the tensor data starts. Returns the new length and describes
 * the damage in what. */
static size_t damage(uint64_t *s, const char *clean, size_t len, size_t head, char *out, char *what, size_t cap) {
    static const uint64_t extremes[] = {0, 1, 2, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                        0x100000000ull, 0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull};
    memcpy(out, clean, len);
    switch (rng_below(s, 6)) {
    case 0: { /* truncated, mostly inside the metadata */
        size_t at = rng_below(s, 2) ? rng_below(s, head) : rng_below(s, len);
        snprintf(what, cap, "truncated to %zu bytes", at);
        return at;
    }
    case 1:   /* bytes flipped in the metadata */
    case 2: { /* ... or anywhere */
        size_t span = rng_below(s, 2) ? head : len, n = 1 + rng_below(s, 8);
        size_t first = rng_below(s, span);
        for (size_t i = 0; i < n; i++) out[rng_below(s, span)] ^= (char)(1 + rng_below(s, 255));
        snprintf(what, cap, "%zu bytes flipped in the first %zu (one at %zu)", n, span, first);
        return len;
    }
    case 3: { /* an extreme integer over a field of the metadata */
        size_t at = rng_below(s, head - 8);
        uint64_t v = extremes[rng_below(s, sizeof extremes / sizeof extremes[0])];
        int width = rng_below(s, 2) ? 8 : 4;
        memcpy(out + at, &v, (size_t)width);
        snprintf(what, cap, "%d-byte value %llu written at %zu", width, (unsigned long long)v, at);
        return len;
    }
    case 4: { /* a metadata byte removed: everything after it shifts */
        size_t at = rng_below(s, head);
        memmove(out + at, clean + at + 1, len - at - 1);
        snprintf(what, cap, "byte %zu removed", at);
        return len - 1;
    }
    default: { /* a metadata byte repeated */
        size_t at = rng_below(s, head);
        memcpy(out + at + 1, clean + at, len - at);
        snprintf(what, cap, "byte %zu repeated", at);
        return len + 1;
    }
    }
}

typedef struct {
    char path[512];
    char kinds[8][16];  /* its --kv modes, from its --help ("modes: basic (default) ..."); none: no --kv */
    int n_kinds;
} Program;

static void read_kv_modes(Program *p) {
    char cmd[600], line[256];
    snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", p->path);
    FILE *f = popen(cmd, "r");
    p->n_kinds = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "modes:");
        if (!m) continue;
        for (char *w = strtok((char *)m + 6, " \t\n"); w && p->n_kinds < 8; w = strtok(NULL, " \t\n"))
            if (w[0] != '(') snprintf(p->kinds[p->n_kinds++], sizeof p->kinds[0], "%s", w);
    }
    if (f) pclose(f);
}

/* Every chapter's model-generate in the build tree. */
static int find_programs(Program *p, int max) {
    int n = 0;
    DIR *d = opendir("chapters");
    for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
        if (e->d_name[0] == '.') continue;
        snprintf(p[n].path, sizeof p[n].path, "%s/%s/model-generate", test_build_dir(), e->d_name);
        if (access(p[n].path, X_OK) != 0) continue;
        read_kv_modes(&p[n]);
        n++;
    }
    if (d) closedir(d);
    return n;
}

typedef struct {
    int status;     /* exit status; -1 killed by a signal; -2 timed out */
    int signal;
    char *err;      /* its stderr */
} Outcome;

/* Runs argv with stdout to /dev/null, stderr to a file, killed after LIMIT_MS. */
static Outcome run_limited(char *const argv[]) {
    Outcome o = {.status = -1};
    const char *err_path = test_tmp_path("corrupt.err");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        o.err = xstrdup("cannot start the program");
        return o;
    }
    double deadline = time_now_ms() + LIMIT_MS;
    int ws = 0;
    while (waitpid(pid, &ws, WNOHANG) == 0) {
        if (time_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &ws, 0);
            o.status = -2;
            break;
        }
        usleep(1000);
    }
    if (o.status != -2) {
        if (WIFEXITED(ws)) o.status = WEXITSTATUS(ws);
        else o.signal = WTERMSIG(ws);
    }
    size_t len;
    o.err = file_read_all(err_path, &len, NULL);
    if (!o.err) o.err = xstrdup("");
    return o;
}

/* Run, or refused with exactly one line of model-generate's (most name the
 * file; a damaged weight that makes the logits NaN is found later, at a step). */
static bool outcome_ok(const Outcome *o) {
    if (o->status == 0) return true;
    if (o->status != 1) return false;
    size_t n = strlen(o->err);
    return n > 0 && o->err[n - 1] == '\n' && strchr(o->err, '\n') == o->err + n - 1 &&
           strncmp(o->err, "model-generate: ", 16) == 0;
}

TEST(corrupt_models_are_refused_or_run) {
    char src[512], err[ERR_MAX];
    snprintf(src, sizeof src, "%s/tiny-q8_0.gguf", test_models_dir());
    size_t len;
    char *clean = file_read_all(src, &len, err);
    GgufFile g;
    if (!clean || gguf_parse(&g, clean, len, err)) {
        test_fail(__FILE__, __LINE__, "cannot read %s: %s", src, err);
        free(clean);
        return;
    }
    size_t head = g.data_start;
    gguf_close(&g);
    Program progs[16];
    int n_progs = find_programs(progs, 16);
    CHECK_MSG(n_progs > 0, "no chapter's model-generate under %s", test_build_dir());

    char *buf = xmalloc(len + 1), path[600], what[160];
    snprintf(path, sizeof path, "%s", test_tmp_path("corrupt.gguf"));
    uint64_t s = SEED;
    int ran = 0, refused = 0, bad = 0;
    double t0 = time_now_ms();
    for (int c = -1; c < CASES && n_progs > 0 && bad < 5; c++) {
        size_t n = len;
        if (c < 0) { /* the control: the undamaged model runs */
            memcpy(buf, clean, len);
            snprintf(what, sizeof what, "undamaged");
        } else {
            n = damage(&s, clean, len, head, buf, what, sizeof what);
        }
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, n, f) != n) test_fail(__FILE__, __LINE__, "cannot write %s", path);
        if (f) fclose(f);
        /* Each case on the next program, with its backends and cache kinds in turn. */
        const Program *p = &progs[(c + 1) % n_progs];
        int round = (c + 1) / n_progs;
        const char *kind = p->n_kinds ? p->kinds[(round / 2) % p->n_kinds] : NULL;
        char kv[32];
        snprintf(kv, sizeof kv, "--kv=%s", kind ? kind : "");
        char *argv[12];
        int a = 0;
        argv[a++] = (char *)p->path;
        argv[a++] = "--quiet";
        argv[a++] = "--backend";
        if (round & 1) {
            argv[a++] = "parallel";
            argv[a++] = "--threads";
            argv[a++] = "2";
        } else {
            argv[a++] = "scalar";
        }
        if (kind) argv[a++] = kv;
        argv[a++] = path;
        argv[a++] = "Once upon a time";
        argv[a++] = "3";
        argv[a] = NULL;
        Outcome o = run_limited(argv);
        if (outcome_ok(&o) && (c >= 0 || o.status == 0)) {
            ran += o.status == 0;
            refused += o.status == 1;
            if (getenv("CORRUPT_VERBOSE")) printf("    case %d (%s): %s", c, what, o.status ? o.err : "ran\n");
        } else {
            bad++;
            char keep[64];
            snprintf(keep, sizeof keep, "corrupt-case-%d.gguf", c);
            rename(path, test_tmp_path(keep));
            test_fail(__FILE__, __LINE__, "case %d (%s), %s %s%s: %s (kept as %s)\n%.2000s", c, what, p->path,
                      argv[3], kind ? kv + 1 : "", o.status == -2 ? "hung" : o.status == -1 ? "killed by a signal" :
                      o.status == 1 ? "refused without one clear line" : "unexpected exit status",
                      test_tmp_path(keep), o.err);
        }
        free(o.err);
    }
    printf("    %d damaged copies of %s on %d programs in %.1f s: %d ran, %d refused\n", CASES, src, n_progs,
           (time_now_ms() - t0) / 1e3, ran, refused);
    /* The damage is meant to reach both outcomes, or the test proves little. */
    if (!bad) CHECK_MSG(ran >= CASES / 10 && refused >= CASES / 4, "ran %d, refused %d", ran, refused);
    free(buf);
    free(clean);
}
