/* servers.c: see servers.h. */
#include "servers.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MAX_CHAPTERS 8

static ServerProc fast[MAX_CHAPTERS], slow[MAX_CHAPTERS];

const char *default_model_path(void) {
    static char path[512];
    if (access("models/default.gguf", R_OK) == 0) return "models/default.gguf";
    snprintf(path, sizeof path, "%s/default.gguf", test_models_dir());
    return path;
}

const char *slow_model_path(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/server-slow.gguf", test_models_dir());
    return path;
}

bool one_at_a_time(const char *chapter) { return strcmp(chapter, "III.4") == 0; }

static void stop_all(void) {
    for (int i = 0; i < MAX_CHAPTERS; i++) {
        if (fast[i].pid > 0) server_proc_stop(&fast[i], SIGTERM);
        if (slow[i].pid > 0) server_proc_stop(&slow[i], SIGTERM);
    }
}

static int chapter_index(const char *chapter) {
    for (int i = 0; server_chapters[i]; i++)
        if (strcmp(server_chapters[i], chapter) == 0) return i;
    return 0;
}

static ServerProc *get(ServerProc *procs, const char *chapter, const char *const *args) {
    static bool registered;
    if (!registered) {
        atexit(stop_all);
        registered = true;
    }
    ServerProc *s = &procs[chapter_index(chapter)];
    if (s->pid > 0 && kill(s->pid, 0) == 0) return s;
    if (s->pid > 0) test_fail(__FILE__, __LINE__, "the %s chat-server died earlier", chapter);
    return server_proc_start(s, chapter, args) ? s : NULL;
}

ServerProc *fast_server(const char *chapter) {
    const char *args[] = {default_model_path(), "--queue", "2", "--max-connections", "8", "--timeout", "2",
                          "--max-body", "65536", NULL};
    return get(fast, chapter, args);
}

ServerProc *slow_server(const char *chapter) {
    if (access(slow_model_path(), R_OK) != 0) {
        test_fail(__FILE__, __LINE__, "%s is missing (make test builds it)", slow_model_path());
        return NULL;
    }
    const char *args[] = {slow_model_path(), "--backend", "scalar", "--threads", "1", "--queue", "1",
                          "--kv-blocks", "8", "--ctx", "512", NULL};
    return get(slow, chapter, args);
}

const char *node_script(const char *name, const char *package, const char **why) {
    static char script[512], whyb[256];
    char module[512], cmd[1200];
    snprintf(module, sizeof module, "%s/node/node_modules/%s/package.json", test_build_dir(), package);
    *why = NULL;
    if (system("node --version > /dev/null 2>&1") != 0) {
        *why = "node is not installed: the npm client tests need it (CI installs it)";
        return NULL;
    }
    if (access(module, R_OK) != 0) {
        snprintf(whyb, sizeof whyb, "the %s npm package is missing: make test installs it with npm into build/node",
                 package);
        *why = whyb;
        return NULL;
    }
    snprintf(script, sizeof script, "%s/node/%s", test_build_dir(), name);
    snprintf(cmd, sizeof cmd, "cp 'tests/server/%s' '%s'", name, script); /* beside its node_modules */
    if (system(cmd) != 0) {
        snprintf(whyb, sizeof whyb, "cannot copy tests/server/%s (run from the top of the repository)", name);
        *why = whyb;
        return NULL;
    }
    return script;
}

const char *openai_client_script(const char **why) { return node_script("openai_client.mjs", "openai", why); }

bool run_node_script(const char *script, const char *args, char **output) {
    char cmd[2048], err[ERR_MAX];
    const char *out = test_tmp_path("node.out");
    snprintf(cmd, sizeof cmd, "node '%s' %s > '%s' 2>&1", script, args, out);
    int rc = system(cmd);
    size_t n;
    *output = file_read_all(out, &n, err);
    if (!*output) *output = xstrdup(err);
    return rc == 0 && strstr(*output, "all ok") != NULL;
}

void node_client_on_fast_servers(const char *script, const char *what) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        char url[64], *out;
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", s->port);
        CHECK_MSG(run_node_script(script, url, &out), "%s: %s failed:\n%s", c, what, out);
        free(out);
    }
}
