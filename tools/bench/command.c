/* command.c: see command.h. */
#include "command.h"

#include <stdio.h>
#include <stdlib.h>

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
