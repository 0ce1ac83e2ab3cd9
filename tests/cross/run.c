/* run.c: see run.h. */
#include "run.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "json.h"
#include "util.h"

int run_capture(const char *cmd, char **output) {
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    Buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) buf_append(&b, chunk, n);
    int st = pclose(p);
    buf_append(&b, "", 0);
    *output = b.data;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_chapters(char names[][32], int max) {
    DIR *d = opendir("chapters");
    if (!d) return 0;
    char *found[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.') found[n++] = xstrdup(e->d_name);
    closedir(d);
    qsort(found, (size_t)n, sizeof *found, cmp_str);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k < max) snprintf(names[k++], 32, "%.31s", found[i]);
        free(found[i]);
    }
    return k;
}

/* The words after "modes:" in a --help text. */
static int help_modes(const char *help, char modes[][16], int max) {
    const char *p = strstr(help, "modes:");
    if (!p) return 0;
    p += 6;
    int n = 0;
    while (*p && *p != '\n' && n < max) {
        while (*p == ' ') p++;
        int len = 0;
        while (p[len] && p[len] != ' ' && p[len] != '\n') len++;
        if (len && p[0] != '(') snprintf(modes[n++], 16, "%.*s", len, p);
        p += len;
    }
    return n;
}

int run_modes(RunMode *modes, int max) {
    char chapters[16][32];
    int nc = list_chapters(chapters, 16), n = 0;
    for (int c = 0; c < nc; c++) {
        char cmd[512], *help = NULL;
        snprintf(cmd, sizeof cmd, "%.200s/%.31s/model-generate --help", test_build_dir(), chapters[c]);
        if (run_capture(cmd, &help) != 0) {
            test_fail(__FILE__, __LINE__, "%s does not run (build it first)", cmd);
            free(help);
            continue;
        }
        if (n < max) modes[n++] = (RunMode){0};
        snprintf(modes[n - 1].chapter, 32, "%.31s", chapters[c]);
        char kv[8][16];
        int nk = help_modes(help, kv, 8);
        for (int k = 0; k < nk && n < max; k++) {
            modes[n] = (RunMode){0};
            snprintf(modes[n].chapter, 32, "%.31s", chapters[c]);
            snprintf(modes[n].flags, 64, "--kv %s", kv[k]);
            n++;
        }
        free(help);
    }
    return n;
}

static int read_ints(const JsonValue *arr, int32_t *out, int max) {
    if (!arr || arr->type != JSON_ARRAY) return -1;
    int n = 0;
    for (size_t i = 0; i < arr->n_items && n < max; i++) out[n++] = (int32_t)arr->items[i].number;
    return n;
}

static bool parse_output(RunResult *r, const char *cmd) {
    const char *start = strrchr(r->stdout_text, '{') ? strstr(r->stdout_text, "{\"model\"") : NULL;
    char err[ERR_MAX];
    JsonValue *j = start ? json_parse(start, strlen(start), err) : NULL;
    if (!j) {
        test_fail(__FILE__, __LINE__, "no JSON from `%s`:\n%s", cmd, r->stdout_text);
        return false;
    }
    r->n_prompt = read_ints(json_get(j, "prompt_tokens"), r->prompt, 4096);
    r->n_generated = read_ints(json_get(j, "generated"), r->generated, 4096);
    const JsonValue *t = json_get(j, "text");
    r->text = xstrdup(t && t->type == JSON_STRING ? t->string : "");
    json_free(j);
    return r->n_prompt >= 0 && r->n_generated >= 0;
}

static bool read_logits(RunResult *r, const char *path, int vocab) {
    size_t len;
    char err[ERR_MAX];
    char *data = file_read_all(path, &len, err);
    if (!data) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    r->logits = (float *)data;
    r->n_logit_rows = vocab ? (long)(len / sizeof(float) / (size_t)vocab) : 0;
    remove(path);
    return true;
}

bool run_generate(const RunMode *mode, const char *extra, const char *model, const char *prompt_file, int n,
                  int vocab, RunResult *r) {
    memset(r, 0, sizeof *r);
    static int counter;
    char logits_name[64];
    snprintf(logits_name, sizeof logits_name, "logits-%d.f32", counter++);
    const char *logits_path = test_tmp_path(logits_name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/%s/model-generate %s %s --json --logits '%s' --prompt-file '%s' '%s' %d",
             test_build_dir(), mode->chapter, mode->flags, extra ? extra : "", logits_path, prompt_file, model, n);
    r->exit_code = run_capture(cmd, &r->stdout_text);
    if (r->exit_code != 0) {
        test_fail(__FILE__, __LINE__, "`%s` exited %d:\n%s", cmd, r->exit_code, r->stdout_text);
        return false;
    }
    return parse_output(r, cmd) && read_logits(r, logits_path, vocab);
}

void run_free(RunResult *r) {
    free(r->logits);
    free(r->text);
    free(r->stdout_text);
    memset(r, 0, sizeof *r);
}

int read_id_file(const char *path, int32_t *ids, int max) {
    size_t len;
    char err[ERR_MAX];
    char *s = file_read_all(path, &len, err);
    if (!s) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return -1;
    }
    int n = 0;
    for (char *p = s; *p && n < max;) {
        if (*p >= '0' && *p <= '9') ids[n++] = (int32_t)strtol(p, &p, 10);
        else p++;
    }
    free(s);
    return n;
}
