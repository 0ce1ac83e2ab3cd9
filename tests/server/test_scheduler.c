/* test_scheduler.c: chat-servers that run many requests at once (III.7's
 * scheduler and prefix cache) over real sockets on 127.0.0.1: 16 concurrent
 * streaming clients of the official openai npm client get their solo
 * answers, with prefix hits and with preemptions; the slot and radix views,
 * the counters in /metrics, the flags. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "servers.h"

/* Starts the chapter's chat-server on the default model with extra args. */
static bool start(ServerProc *s, const char *chapter, const char *const *extra) {
    const char *args[24] = {default_model_path()};
    int n = 1;
    for (; extra[n - 1] && n < 23; n++) args[n] = extra[n - 1];
    args[n] = NULL;
    return server_proc_start(s, chapter, args);
}

static int count_lines_with(const char *text, const char *a, const char *b) {
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *pa = memmem(line, len, a, strlen(a));
        if (pa && memmem(line, len, b, strlen(b))) n++;
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

TEST(server_sched_16_concurrent_openai_clients_get_their_solo_answers) {
    char module[512], script[512], cmd[4096];
    snprintf(module, sizeof module, "%s/node/node_modules/openai/package.json", test_build_dir());
    if (system("node --version > /dev/null 2>&1") != 0) SKIP("node is not installed: the openai client test needs it (CI installs it)");
    if (access(module, R_OK) != 0) SKIP("the openai npm package is missing: make test installs it with npm into build/node");
    snprintf(script, sizeof script, "%s/node/concurrent_clients.mjs", test_build_dir());
    snprintf(cmd, sizeof cmd, "cp tests/server/concurrent_clients.mjs '%s'", script); /* beside its node_modules */
    CHECK(system(cmd) == 0);
    FOR_EACH_SERVER_CHAPTER(c) {
        if (one_at_a_time(c)) continue;
        ServerProc solo = {0}, wide = {0}, tight = {0};
        const char *solo_args[] = {"--max-concurrent", "1", "--no-prefix-cache", "--kv-blocks", "64", "--quiet", NULL};
        const char *wide_args[] = {"--max-concurrent", "4", "--kv-blocks", "64", "--prefill-chunk", "32",
                                   "--trace-scheduler", "--quiet", NULL};
        const char *tight_args[] = {"--max-concurrent", "4", "--kv-blocks", "12", "--prefill-ms", "1", "--trace-scheduler",
                                    "--quiet", NULL}; /* --prefill-ms: prompts in forwards of 32 while others decode */
        if (start(&solo, c, solo_args) && start(&wide, c, wide_args) && start(&tight, c, tight_args)) {
            const char *out = test_tmp_path("concurrent.out");
            snprintf(cmd, sizeof cmd, "node '%s' http://127.0.0.1:%d/v1 http://127.0.0.1:%d/v1 http://127.0.0.1:%d/v1 > '%s' 2>&1",
                     script, solo.port, wide.port, tight.port, out);
            int rc = system(cmd);
            size_t n;
            char err[ERR_MAX];
            char *text = file_read_all(out, &n, err);
            CHECK_MSG(rc == 0 && text && strstr(text, "all ok"), "%s: the concurrent clients failed:\n%s", c,
                      text ? text : err);
            if (text) fputs(text, stdout);
            free(text);
            CHECK(metric_value(wide.port, "chat_server_prefix_cache_hits_total") >= 12);
            CHECK(metric_value(wide.port, "chat_server_prefix_cache_cached_tokens_total") >= 12 * 32);
            CHECK(metric_value(wide.port, "chat_server_prompt_cached_tokens_total") >= 12 * 32);
            CHECK_EQ_INT(metric_value(solo.port, "chat_server_prefix_cache_hits_total"), 0);
            double preempted = metric_value(tight.port, "chat_server_preemptions_total");
            CHECK_MSG(preempted >= 1, "%s: 16 clients on 12 blocks preempted nothing (%g)", c, preempted);
            printf("%s: %g preemptions on a pool of 12 blocks, %g prefix-cache evictions\n", c, preempted,
                   metric_value(tight.port, "chat_server_prefix_cache_evictions_total"));
            char *log = server_proc_log(&wide);
            CHECK_MSG(count_lines_with(log, "slots 4/4", "decoded") > 0, "%s: never 4 requests at once:\n%.2000s", c, log);
            free(log);
            log = server_proc_log(&tight);
            CHECK(count_lines_with(log, "preempted", "to recompute") >= 1);
            free(log);
            CHECK(wait_pool_empty(wide.port, 3000));
            CHECK(wait_pool_empty(tight.port, 3000));
        }
        if (solo.pid > 0) CHECK_EQ_INT(server_proc_stop(&solo, SIGTERM), 0);
        if (wide.pid > 0) CHECK_EQ_INT(server_proc_stop(&wide, SIGTERM), 0);
        if (tight.pid > 0) CHECK_EQ_INT(server_proc_stop(&tight, SIGTERM), 0);
    }
}

/* /v1/slots while requests run, /v1/kv with the radix tree, the counters;
 * --no-prefix-cache turns the tree off. */
TEST(server_sched_views_and_counters) {
    FOR_EACH_SERVER_CHAPTER(c) {
        if (one_at_a_time(c)) continue;
        ServerProc s = {0}, off = {0};
        const char *args[] = {"--max-concurrent", "2", "--kv-blocks", "32", NULL};
        const char *off_args[] = {"--no-prefix-cache", NULL};
        if (!start(&s, c, args) || !start(&off, c, off_args)) continue;
        const char *json = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a storyteller who tells very short "
                           "stories about the animals of the forest.\"},{\"role\":\"user\",\"content\":\"A fox.\"}],"
                           "\"max_tokens\":12,\"temperature\":0}";
        for (int i = 0; i < 2; i++) {
            HttpReply r;
            CHECK(http_post(s.port, "/v1/chat/completions", json, &r) && r.status == 200);
            JsonValue *v = http_reply_json(&r);
            double cached = json_number_at(v, "usage", "prompt_tokens_details", "cached_tokens", NULL);
            double prompt = json_number_at(v, "usage", "prompt_tokens", NULL);
            CHECK_MSG(i == 0 ? cached == 0 : cached == prompt - 1, "request %d: %g of %g cached", i, cached, prompt);
            json_free(v);
            http_reply_free(&r);
            CHECK(http_post(off.port, "/v1/chat/completions", json, &r) && r.status == 200);
            v = http_reply_json(&r);
            CHECK_EQ_INT(json_number_at(v, "usage", "prompt_tokens_details", "cached_tokens", NULL), 0);
            json_free(v);
            http_reply_free(&r);
        }
        /* the server's count of cached prompt tokens (usage) and the prefix cache's agree */
        double usage_cached = metric_value(s.port, "chat_server_prompt_cached_tokens_total");
        CHECK_MSG(usage_cached > 0 && usage_cached == metric_value(s.port, "chat_server_prefix_cache_cached_tokens_total"),
                  "%s: prompt_cached_tokens_total %g, prefix_cache_cached_tokens_total %g", c, usage_cached,
                  metric_value(s.port, "chat_server_prefix_cache_cached_tokens_total"));
        JsonValue *kv = get_json(s.port, "/v1/kv");
        CHECK(json_number_at(kv, "blocks_used", NULL) == 0 && json_number_at(kv, "blocks_cached", NULL) >= 3);
        /* each count is its list's length: the blocks only the cache holds are listed apart */
        CHECK(json_get(kv, "used") && json_get(kv, "used")->n_items == 0);
        CHECK(json_get(kv, "cached") && json_get(kv, "cached")->n_items == (size_t)json_number_at(kv, "blocks_cached", NULL));
        CHECK_EQ_INT(json_number_at(kv, "prefix_cache", "hits", NULL), 1);
        CHECK_EQ_INT(json_number_at(kv, "prefix_cache", "misses", NULL), 1);
        CHECK(json_number_at(kv, "prefix_cache", "root", "children", "0", "span", "1", NULL) >= 16);
        CHECK(json_number_at(kv, "prefix_cache", "root", "children", "0", "blocks", "0", "ref", NULL) == 1);
        json_free(kv);
        kv = get_json(off.port, "/v1/kv");
        CHECK(kv && json_get(kv, "prefix_cache") && json_get(kv, "prefix_cache")->type == JSON_NULL);
        json_free(kv);
        CHECK_EQ_INT(metric_value(s.port, "chat_server_prefix_cache_hits_total"), 1);
        CHECK_EQ_INT(metric_value(s.port, "chat_server_prefix_cache_enabled"), 1);
        CHECK_EQ_INT(metric_value(off.port, "chat_server_prefix_cache_enabled"), 0);
        CHECK_EQ_INT(metric_value(s.port, "chat_server_preemptions_total"), 0);
        /* a long request, seen in its slot while it runs */
        int fd = client_connect(s.port);
        const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"stream\":true}";
        char req[512];
        snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
        CHECK(client_send(fd, req, strlen(req)));
        bool seen = false;
        for (double end = time_now_ms() + 5000; !seen && time_now_ms() < end; usleep(2000)) {
            JsonValue *v = get_json(s.port, "/v1/slots");
            const char *phase = json_string_at(v, "slots", "0", "phase", NULL);
            if (phase) {
                seen = true;
                CHECK(strncmp(json_string_at(v, "slots", "0", "request", NULL), "cmpl-", 5) == 0);
                /* admitted but not yet prefilled, it holds no position (a loaded machine shows it so) */
                CHECK(json_number_at(v, "slots", "0", "position", NULL) >= (strcmp(phase, "prefill") == 0 ? 0 : 1));
                CHECK(json_get(json_get(&json_get(v, "slots")->items[0], "blocks"), "0") == NULL ||
                      json_number_at(v, "slots", "0", "blocks", "0", NULL) >= 0);
                CHECK_EQ_INT(json_number_at(v, "max_concurrent", NULL), 2);
                CHECK_STR(json_string_at(v, "slots", "1", "state", NULL), "idle");
            }
            json_free(v);
        }
        CHECK_MSG(seen, "%s: the running request never showed in /v1/slots", c);
        close(fd);
        CHECK(wait_pool_empty(s.port, 3000));
        CHECK_EQ_INT(server_proc_stop(&s, SIGTERM), 0);
        CHECK_EQ_INT(server_proc_stop(&off, SIGTERM), 0);
    }
}

/* Resident memory of process pid in KiB (VmRSS), -1 if unknown. */
static long vm_rss_kib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* The scheduler's server holds its pool when it loads, so that no request
 * pays for the system's first touch of a page: before the first request, a
 * server with a pool of 192 MiB holds about 176 MiB more than one with 16
 * (left to be touched as used, both hold about 11 MiB). */
TEST(server_sched_kv_pool_is_resident_from_the_start) {
    if (vm_rss_kib(getpid()) < 0) SKIP("no /proc/PID/status here: the resident size cannot be read");
    if (getenv("SERVER_WRAPPER")) SKIP("SERVER_WRAPPER is set: the process measured would be the wrapper");
    FOR_EACH_SERVER_CHAPTER(c) {
        if (one_at_a_time(c)) continue;
        ServerProc big = {0}, small = {0};
        const char *big_args[] = {"--kv-mem", "192", "--quiet", NULL}, *small_args[] = {"--kv-mem", "16", "--quiet", NULL};
        if (start(&big, c, big_args) && start(&small, c, small_args)) {
            long more = vm_rss_kib(big.pid) - vm_rss_kib(small.pid);
            CHECK_MSG(more >= 160 * 1024, "%s: a 192 MiB pool holds %ld KiB more than a 16 MiB one before any request", c,
                      more);
        }
        if (big.pid > 0) CHECK_EQ_INT(server_proc_stop(&big, SIGTERM), 0);
        if (small.pid > 0) CHECK_EQ_INT(server_proc_stop(&small, SIGTERM), 0);
    }
}

TEST(server_sched_bad_flags) {
    static const struct { const char *args, *want; } cases[] = {
        {"--max-concurrent 0", "--max-concurrent must be an integer from 1"},
        {"--max-concurrent x", "--max-concurrent must be an integer from 1"},
        {"--prefill-chunk 0", "--prefill-chunk must be an integer from 1"},
        {"--prefill-chunk", "needs a value"},
        {"--prefill-ms -1", "--prefill-ms must be an integer from 0"},
        {"--prefill-ms", "needs a value"},
    };
    FOR_EACH_SERVER_CHAPTER(c) {
        if (one_at_a_time(c)) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char cmd[1024];
            const char *out = test_tmp_path("flags.out");
            snprintf(cmd, sizeof cmd, "%s/%s/chat-server %s %s > '%s' 2>&1", test_build_dir(), c, default_model_path(),
                     cases[i].args, out);
            int rc = system(cmd);
            size_t n;
            char err[ERR_MAX];
            char *text = file_read_all(out, &n, err);
            CHECK_MSG(rc != 0 && text && strstr(text, cases[i].want) && count_lines_with(text, "", "") == 1,
                      "%s %s: exit %d, '%s'", c, cases[i].args, rc, text ? text : err);
            free(text);
        }
    }
}
