/* command.c: see command.h. */
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Runs a shell command and returns its whole stdout (NULL if it failed). */
char *bench_run(const char *cmd, size_t *len) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    Buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) buf_append(&b, chunk, n);
    int rc = pclose(p);
    if (rc != 0) {
        buf_free(&b);
        return NULL;
    }
    buf_append(&b, "", 1);
    *len = b.len - 1;
    return b.data;
}

JsonValue *bench_run_json(const char *cmd) {
    size_t len;
    char *text = bench_run(cmd, &len), err[ERR_MAX];
    if (!text) return NULL;
    JsonValue *v = json_parse(text, len, err);
    if (!v) fprintf(stderr, "bench: %s: %s\n", cmd, err);
    free(text);
    return v;
}

double bench_num(const JsonValue *obj, const char *key) {
    const JsonValue *v = obj ? json_get(obj, key) : NULL;
    return v && v->type == JSON_NUMBER ? v->number : 0;
}

int bench_split(const char *s, char **out, int max) {
    int n = 0;
    char *copy = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(copy, " ,", &save); t && n < max; t = strtok_r(NULL, " ,", &save)) out[n++] = t;
    return n;
}

double bench_load_average(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

void bench_cpu_name(char *out, size_t size) {
    out[0] = 0;
    FILE *ci = fopen("/proc/cpuinfo", "r");
    for (char line[512]; ci && !out[0] && fgets(line, sizeof line, ci);)
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':'))
            snprintf(out, size, "%.*s", (int)strcspn(strchr(line, ':') + 2, "\n\""), strchr(line, ':') + 2);
    if (ci) fclose(ci);
}
