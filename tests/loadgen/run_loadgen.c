/* run_loadgen.c: see run_loadgen.h. */
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "run_loadgen.h"
#include "util.h"

extern char **environ;

Ran loadgen(const char *args_fmt, int port) {
    Ran r = {.status = -1};
    char args[1024], path[512];
    snprintf(args, sizeof args, args_fmt, port);
    snprintf(path, sizeof path, "%s/tools/loadgen", test_build_dir());
    char *argv[64] = {path};
    int argc = 1;
    for (char *tok = strtok(args, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
    const char *out_path = xstrdup(test_tmp_path("loadgen.out")), *err_path = xstrdup(test_tmp_path("loadgen.err"));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    double t0 = time_now_ms();
    int rc = posix_spawn(&pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK_MSG(rc == 0, "cannot run %s (make %s)", path, path);
    int ws;
    if (rc == 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws)) r.status = WEXITSTATUS(ws);
    r.ms = time_now_ms() - t0;
    size_t len;
    r.out = file_read_all(out_path, &len, NULL);
    r.err = file_read_all(err_path, &len, NULL);
    if (!r.out) r.out = xstrdup("");
    if (!r.err) r.err = xstrdup("");
    r.json = json_parse(r.out, strlen(r.out), NULL);
    free((void *)out_path);
    free((void *)err_path);
    return r;
}

void ran_free(Ran *r) {
    free(r->out);
    free(r->err);
    json_free(r->json);
}

const JsonValue *per_request(const Ran *r) {
    const JsonValue *a = r->json ? json_get(r->json, "per_request") : NULL;
    return a && a->type == JSON_ARRAY ? a : NULL;
}

double json_num_path(const JsonValue *v, const char *path) {
    char key[64];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        v = v->type == JSON_OBJECT ? json_get(v, key) : NULL;
        path += n + (path[n] == '.');
    }
    return v && v->type == JSON_NUMBER ? v->number : NAN;
}

const char *json_str_key(const JsonValue *v, const char *key) {
    const JsonValue *s = v ? json_get(v, key) : NULL;
    return s && s->type == JSON_STRING ? s->string : NULL;
}
