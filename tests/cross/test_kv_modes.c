/* What each chapter's model-generate runs by default (its own lesson: II.2 the
 * basic cache, III.4 the paged one), `--kv none` as the way back to full
 * recompute, and the paged cache's flags seen from the command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "run.h"
#include "util.h"

/* Runs build/<chapter>/model-generate with args; the exit code, and the output in *out. */
static int run_chapter(const char *chapter, const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/%s/model-generate %s", test_build_dir(), chapter, args);
    return run_capture(cmd, out);
}

/* The mode --help marks "(default)", or "" when the chapter has no --kv. */
static void default_mode(const char *chapter, char *mode, size_t size) {
    char *help = NULL;
    mode[0] = '\0';
    CHECK_EQ_INT(run_chapter(chapter, "--help", &help), 0);
    const char *p = help ? strstr(help, "modes:") : NULL;
    const char *d = p ? strstr(p, " (default)") : NULL;
    if (d) {
        const char *start = d;
        while (start > p && start[-1] != ' ') start--;
        snprintf(mode, size, "%.*s", (int)(d - start), start);
    }
    free(help);
}

/* The "kv" of a --json run, and the rows its decode steps processed. */
static bool json_run(const char *chapter, const char *flags, char *kv, size_t size, int *rows_last, int *n_prompt) {
    char model[512], args[1024], *out = NULL, err[ERR_MAX];
    snprintf(model, sizeof model, "%s/tiny-f32.gguf", test_models_dir());
    snprintf(args, sizeof args, "%s --json --ignore-eos --backend scalar '%s' 'Once upon a time' 6", flags, model);
    int rc = run_chapter(chapter, args, &out);
    const char *start = out ? strstr(out, "{\"model\"") : NULL;
    JsonValue *j = rc == 0 && start ? json_parse(start, strlen(start), err) : NULL;
    CHECK_MSG(j != NULL, "%s model-generate %s exited %d:\n%s", chapter, args, rc, out ? out : "");
    free(out);
    if (!j) return false;
    const JsonValue *k = json_get(j, "kv"), *steps = json_get(j, "steps"), *prompt = json_get(j, "prompt_tokens");
    snprintf(kv, size, "%s", k && k->type == JSON_STRING ? k->string : "null");
    *n_prompt = prompt ? (int)prompt->n_items : 0;
    const JsonValue *last = steps && steps->n_items ? &steps->items[steps->n_items - 1] : NULL;
    const JsonValue *rows = last ? json_get(last, "rows") : NULL;
    *rows_last = rows ? (int)rows->number : -1;
    json_free(j);
    return true;
}

TEST(kv_modes_each_chapter_runs_its_lesson_by_default) {
    RunMode modes[16];
    int nm = run_modes(modes, 16);
    for (int i = 0; i < nm; i++) {
        if (modes[i].flags[0]) continue; /* one plain run per chapter */
        const char *chapter = modes[i].chapter;
        char want[32], kv[32];
        default_mode(chapter, want, sizeof want);
        if (strcmp(chapter, "II.1") == 0) CHECK_STR(want, "");
        if (strcmp(chapter, "II.2") == 0) CHECK_STR(want, "basic");
        if (strcmp(chapter, "III.4") == 0) CHECK_STR(want, "paged");
        int rows, n_prompt;
        if (!json_run(chapter, "", kv, sizeof kv, &rows, &n_prompt)) continue;
        CHECK_MSG(strcmp(kv, want[0] ? want : "null") == 0, "%s runs --kv %s by default, its --help says %s", chapter,
                  kv, want[0] ? want : "no cache");
        CHECK_EQ_INT(rows, want[0] ? 1 : n_prompt + 5); /* a decode step reads one row; a recompute all of them */
        if (!want[0]) continue;
        /* --kv none: the full recompute of II.1, one flag away. */
        if (!json_run(chapter, "--kv none", kv, sizeof kv, &rows, &n_prompt)) continue;
        CHECK_STR(kv, "null");
        CHECK_EQ_INT(rows, n_prompt + 5);
        if (!json_run(chapter, "--kv=none", kv, sizeof kv, &rows, &n_prompt)) continue;
        CHECK_STR(kv, "null");
    }
}

/* A chapter with a paged cache: its name in --help, or NULL. */
static const char *paged_chapter(char *name, size_t size) {
    RunMode modes[16];
    int nm = run_modes(modes, 16);
    for (int i = 0; i < nm; i++)
        if (strcmp(modes[i].flags, "--kv paged") == 0) {
            snprintf(name, size, "%s", modes[i].chapter);
            return name;
        }
    return NULL;
}

TEST(kv_modes_paged_flags_trace_and_errors) {
    char chapter[32], model[512], args[1200], *out = NULL;
    if (!paged_chapter(chapter, sizeof chapter)) SKIP("no chapter has a paged cache");
    snprintf(model, sizeof model, "%s/tiny-f32.gguf", test_models_dir());
    snprintf(args, sizeof args, "--kv-trace --kv-block-size 4 --backend scalar '%s' 'Once upon a time' 4", model);
    CHECK_EQ_INT(run_chapter(chapter, args, &out), 0);
    CHECK_MSG(out && strstr(out, "kv pool: 512 blocks of 4 positions = 2048 tokens"), "%s", out);
    CHECK_MSG(out && strstr(out, "kv step 0: 6 tokens in 2 blocks [0:4 1:2] | pool 2 of 512 blocks used, 510 free"),
              "%s", out);
    CHECK_MSG(out && strstr(out, "kv step 3: 9 tokens in 3 blocks [0:4 1:4 2:1] | pool 3 of 512 blocks used"), "%s",
              out);
    free(out);
    /* --fork-at: the fork shares both blocks (x2), then copies the partly filled one it writes into. */
    snprintf(args, sizeof args, "--fork-at 1 --kv-block-size 4 --backend scalar '%s' 'Once upon a time' 4", model);
    CHECK_EQ_INT(run_chapter(chapter, args, &out), 0);
    CHECK_MSG(out && strstr(out, "kv fork of its 7 tokens: 7 tokens in 2 blocks [0:4x2 1:3x2] | pool 2 of 512 blocks "
                                 "used, 510 free") &&
                  strstr(out, "kv fork after one step of its own: 8 tokens in 2 blocks [0:4x2 2:4] | pool 3 of 512 "
                              "blocks used, 509 free") &&
                  strstr(out, "kv step 2: 8 tokens in 2 blocks [0:4 1:4] | pool 2 of 512 blocks used"),
              "%s", out);
    free(out);
    struct {
        const char *flags, *want;
    } bad[] = {
        {"--kv-blocks 1 --kv-block-size 4", "out of KV blocks: 6 more positions need 2 blocks, 1 of 1 are free"},
        {"--kv-block-size 0", "--kv-block-size needs an integer from 1 to 4096, got '0'"},
        {"--kv-blocks 2 --kv-mem 8", "give --kv-blocks or --kv-mem, not both"},
        {"--kv-mem", "option --kv-mem needs a value"},
        {"--fork-at 0", "--fork-at needs a step from 1 to 1073741824, got '0'"},
        {"--kv sideways", "unknown KV cache kind 'sideways' for --kv (kinds: paged, basic, none)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s '%s' 'Once upon a time' 4", bad[i].flags, model);
        if (strcmp(bad[i].flags, "--kv-mem") == 0) snprintf(args, sizeof args, "'%s' --kv-mem", model);
        int rc = run_chapter(chapter, args, &out);
        CHECK_MSG(rc == 1 && out && strstr(out, bad[i].want), "%s model-generate %s exited %d:\n%s\nexpected '%s'",
                  chapter, args, rc, out ? out : "", bad[i].want);
        free(out);
    }
}
