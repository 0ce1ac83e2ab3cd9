/* test_loadgen.c: tools/loadgen against fake servers of known timing.
 *
 * The fake server's delays are lower bounds on what any client can measure
 * (a token cannot arrive before it is sent), so the checks are: exact counts
 * and totals, lower bounds from the delays, the reported percentiles equal to
 * the nearest-rank percentiles of loadgen's own samples (--samples), and
 * orderings that hold however loaded the machine is. No check needs the
 * machine to be fast. */
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fake_server.h"
#include "harness.h"
#include "json.h"
#include "run_loadgen.h"
#include "util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank percentile, computed here independently of loadgen. */
static double nearest_rank(double *x, int n, int pct) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    int rank = 0;
    while (rank < n && (double)(rank + 1) * 100 < (double)pct * n) rank++;
    return x[rank];
}

/* Checks a Stats object against the samples it summarizes. */
static void check_stats(const JsonValue *stats, double *x, int n, const char *name) {
    CHECK_MSG(json_num_path(stats, "n") == n, "%s: n %g, samples %d", name, json_num_path(stats, "n"), n);
    if (n == 0) return;
    const int pcts[] = {50, 90, 99};
    const char *keys[] = {"p50", "p90", "p99"};
    for (int i = 0; i < 3; i++)
        CHECK_MSG(json_num_path(stats, keys[i]) == nearest_rank(x, n, pcts[i]), "%s.%s: %.9g, samples give %.9g",
                  name, keys[i], json_num_path(stats, keys[i]), nearest_rank(x, n, pcts[i]));
    CHECK_MSG(json_num_path(stats, "min") == x[0] && json_num_path(stats, "max") == x[n - 1], "%s: min/max", name);
    CHECK(json_num_path(stats, "min") <= json_num_path(stats, "p50") && json_num_path(stats, "p50") <= json_num_path(stats, "p90") &&
          json_num_path(stats, "p90") <= json_num_path(stats, "p99") && json_num_path(stats, "p99") <= json_num_path(stats, "max"));
}

static void start(FakeServer *fs) {
    CHECK_MSG(fake_server_start(fs) == 0, "the fake server cannot listen on 127.0.0.1");
}

/* 12 requests, 4 at a time, 6 chunks each: 40 ms to the first, 15 ms between. */
TEST(loadgen_totals_and_latencies_against_fixed_delays) {
    FakeServer fs = {.chunks = 6, .first_ms = 40, .token_ms = 15};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d -n 12 -c 4 --prompt-tokens 20 --output-tokens 6 "
                    "--shared-prefix 0.5 --timeout 30 --json --samples", fs.port);
    fake_server_stop(&fs);
    CHECK_MSG(r.status == 0 && r.json, "exit %d, stdout %.200s, stderr %.300s", r.status, r.out, r.err);
    const JsonValue *reqs = per_request(&r);
    CHECK(reqs && reqs->n_items == 12);
    if (!reqs || reqs->n_items != 12) goto out;

    CHECK_EQ_INT(json_num_path(r.json, "completed"), 12);
    CHECK_EQ_INT(json_num_path(r.json, "errors"), 0);
    CHECK_EQ_INT(json_num_path(r.json, "output_tokens"), 72);
    CHECK_STR(json_str_key(r.json, "output_tokens_counted_from"), "usage");
    CHECK_EQ_INT(json_num_path(r.json, "prompt_tokens_mean"), 20);
    CHECK_STR(json_str_key(r.json, "model"), FAKE_MODEL);
    /* Each worker ran 3 requests in turn, each at least 40 + 5 * 15 ms. */
    double wall = json_num_path(r.json, "wall_s");
    CHECK_MSG(wall >= 3 * 0.115, "wall %g s", wall);
    CHECK_NEAR(json_num_path(r.json, "output_tokens_per_s"), 72 / wall, 1e-9 * 72 / wall);
    CHECK_NEAR(json_num_path(r.json, "requests_per_s"), 12 / wall, 1e-9 * 12 / wall);

    double ttft[12], lat[12], itl[60];
    int n_itl = 0;
    for (int i = 0; i < 12; i++) {
        const JsonValue *q = &reqs->items[i];
        const JsonValue *gaps = json_get(q, "itl_ms");
        CHECK(json_get(q, "ok")->boolean);
        CHECK_EQ_INT(json_num_path(q, "content_chunks"), 6);
        CHECK_STR(json_str_key(q, "finish_reason"), "length");
        CHECK(gaps && gaps->type == JSON_ARRAY && gaps->n_items == 5);
        if (!gaps || gaps->n_items != 5) goto out;
        ttft[i] = json_num_path(q, "ttft_ms");
        lat[i] = json_num_path(q, "latency_ms");
        double sum = ttft[i];
        for (int k = 0; k < 5; k++) sum += itl[n_itl++] = gaps->items[k].number;
        CHECK_MSG(ttft[i] >= 40, "request %d: ttft %g ms < the server's 40 ms", i, ttft[i]);
        CHECK_MSG(lat[i] >= 115, "request %d: latency %g ms < 40 + 5 * 15", i, lat[i]);
        /* first token + the gaps = the last token's arrival: after 115 ms, before [DONE] */
        CHECK_MSG(sum >= 115 && sum <= lat[i], "request %d: ttft + gaps %g, latency %g", i, sum, lat[i]);
    }
    check_stats(json_get(r.json, "ttft_ms"), ttft, 12, "ttft");
    check_stats(json_get(r.json, "latency_ms"), lat, 12, "latency");
    check_stats(json_get(r.json, "itl_ms"), itl, 60, "itl");
    /* A gap is shorter than 15 ms only when the client read the one before
     * late: never for most of them. */
    CHECK_MSG(json_num_path(r.json, "itl_ms.p50") >= 7.5, "itl p50 %g ms", json_num_path(r.json, "itl_ms.p50"));

    /* What the server saw: the requests as asked, never more than 4 at once. */
    CHECK_EQ_INT(fs.posts, 12);
    CHECK_MSG(fs.max_active >= 2 && fs.max_active <= 4, "max in flight %d", fs.max_active);
    for (int i = 0; i < 12; i++) {
        CHECK_EQ_INT(fs.max_tokens[i], 6);
        CHECK(fs.include_usage[i]); /* and "stream": true, or the fake would count it a probe */
        CHECK_STR(fs.model[i], FAKE_MODEL);
        /* 20 words: the first 10 the same in every prompt, the rest unlike any other's */
        int words = 1, shared = 0;
        for (const char *p = fs.prompts[i]; *p; p++) words += *p == ' ';
        CHECK_EQ_INT(words, 20);
        for (const char *p = fs.prompts[i], *q = fs.prompts[0]; shared < 10 && *p == *q; p++, q++)
            if (*p == ' ') shared++;
        CHECK_EQ_INT(shared, 10);
        for (int j = 0; j < i; j++) {
            const char *a = fs.prompts[i], *b = fs.prompts[j];
            for (int w = 0; w < 10; w++) a = strchr(a, ' ') + 1, b = strchr(b, ' ') + 1;
            CHECK_MSG(strncmp(a, b, strcspn(a, " ")) != 0 || strcspn(a, " ") != strcspn(b, " "),
                      "prompts %d and %d share more than the shared part", i, j);
        }
    }
out:
    ran_free(&r);
    fake_server_free(&fs);
}

/* Two requests in ten wait 250 ms for their first token, the others 10 ms. */
TEST(loadgen_percentiles_separate_slow_requests) {
    FakeServer fs = {.chunks = 2, .first_ms = 10, .token_ms = 5, .slow_every = 5, .slow_first_ms = 250};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d -n 10 -c 10 --prompt-tokens 4 --output-tokens 2 "
                    "--timeout 30 --json --samples", fs.port);
    fake_server_stop(&fs);
    const JsonValue *reqs = per_request(&r);
    CHECK_MSG(r.status == 0 && reqs && reqs->n_items == 10, "exit %d, stderr %.300s", r.status, r.err);
    if (reqs && reqs->n_items == 10) {
        double ttft[10];
        int slow = 0;
        for (int i = 0; i < 10; i++) slow += (ttft[i] = json_num_path(&reqs->items[i], "ttft_ms")) >= 250;
        CHECK_MSG(slow >= 2, "%d requests saw the 250 ms wait", slow);
        check_stats(json_get(r.json, "ttft_ms"), ttft, 10, "ttft");
        /* nearest rank over 10 samples: p90 is the 9th smallest, one of the slow two */
        CHECK(json_num_path(r.json, "ttft_ms.p90") >= 250);
        CHECK(json_num_path(r.json, "ttft_ms.p99") == json_num_path(r.json, "ttft_ms.max"));
    }
    ran_free(&r);
    fake_server_free(&fs);
}

/* Chunked framing, events split across reads, no usage chunk: one token per content chunk. */
TEST(loadgen_counts_chunks_without_usage) {
    FakeServer fs = {.chunks = 5, .first_ms = 5, .token_ms = 2, .no_usage = true, .chunked = true,
                     .split_events = true};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d -n 4 -c 2 --prompt-tokens 8 --output-tokens 5 "
                    "--timeout 30 --json", fs.port);
    CHECK_MSG(r.status == 0 && r.json, "exit %d, stderr %.300s", r.status, r.err);
    CHECK_EQ_INT(json_num_path(r.json, "completed"), 4);
    CHECK_EQ_INT(json_num_path(r.json, "output_tokens"), 20);
    CHECK_STR(json_str_key(r.json, "output_tokens_counted_from"), "chunks");
    CHECK(r.json && json_get(r.json, "prompt_tokens_mean")->type == JSON_NULL);
    CHECK(r.json && !json_get(r.json, "per_request"));
    ran_free(&r);

    /* The table, for people. */
    r = loadgen("--url http://127.0.0.1:%d -n 2 -c 2 --output-tokens 5 --timeout 30", fs.port);
    CHECK_MSG(r.status == 0, "exit %d, stderr %.300s", r.status, r.err);
    CHECK_MSG(strstr(r.out, "completed      2 of 2, 0 errors") && strstr(r.out, "counted from content chunks") &&
              strstr(r.out, "tokens/s aggregate") && strstr(r.out, "inter-token") && strstr(r.out, "p99"),
              "table:\n%s", r.out);
    ran_free(&r);
    fake_server_stop(&fs);
    fake_server_free(&fs);
}

/* Every third stream is cut after half its chunks: exactly those are errors. */
TEST(loadgen_counts_dropped_streams_as_errors) {
    for (int chunked = 0; chunked <= 1; chunked++) {
        FakeServer fs = {.chunks = 6, .first_ms = 5, .token_ms = 2, .drop_every = 3, .chunked = chunked};
        start(&fs);
        Ran r = loadgen("--url http://127.0.0.1:%d -n 9 -c 3 --output-tokens 6 --timeout 30 --json --samples", fs.port);
        fake_server_stop(&fs);
        CHECK_EQ_INT(fs.dropped, 3);
        CHECK_MSG(r.status == 1 && r.json, "exit %d (want 1), stderr %.300s", r.status, r.err);
        CHECK_EQ_INT(json_num_path(r.json, "completed"), 6);
        CHECK_EQ_INT(json_num_path(r.json, "errors"), 3);
        CHECK_EQ_INT(json_num_path(r.json, "error_kinds.incomplete"), 3);
        CHECK_EQ_INT(json_num_path(r.json, "output_tokens"), 36);
        CHECK_EQ_INT(json_num_path(r.json, "latency_ms.n"), 6);
        const JsonValue *reqs = per_request(&r);
        int failed = 0;
        for (size_t i = 0; reqs && i < reqs->n_items; i++)
            if (!json_get(&reqs->items[i], "ok")->boolean) {
                failed++;
                CHECK_STR(json_str_key(&reqs->items[i], "error_kind"), "incomplete");
                CHECK_EQ_INT(json_num_path(&reqs->items[i], "content_chunks"), 3);
            }
        CHECK_EQ_INT(failed, 3);
        ran_free(&r);
        fake_server_free(&fs);
    }
}

/* [DONE] without a finish_reason, or a finish_reason without [DONE]: incomplete. */
TEST(loadgen_needs_finish_reason_and_done) {
    for (int which = 0; which < 2; which++) {
        FakeServer fs = {.chunks = 3, .first_ms = 2, .token_ms = 1, .no_finish = which == 0, .no_done = which == 1};
        start(&fs);
        Ran r = loadgen("--url http://127.0.0.1:%d -n 3 -c 3 --output-tokens 3 --timeout 30 --json", fs.port);
        fake_server_stop(&fs);
        CHECK_MSG(r.status == 1 && r.json, "exit %d (want 1), stderr %.300s", r.status, r.err);
        CHECK_EQ_INT(json_num_path(r.json, "completed"), 0);
        CHECK_EQ_INT(json_num_path(r.json, "error_kinds.incomplete"), 3);
        CHECK_EQ_INT(json_num_path(r.json, "output_tokens"), 0);
        const JsonValue *ex = r.json ? json_get(r.json, "error_examples") : NULL;
        const char *msg = json_str_key(ex, "incomplete");
        CHECK_MSG(msg && strstr(msg, which == 0 ? "no finish_reason" : "without data: [DONE]"), "%s", msg ? msg : "(none)");
        ran_free(&r);
        fake_server_free(&fs);
    }
}

TEST(loadgen_reports_http_errors) {
    FakeServer fs = {.status = 503};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d -n 4 -c 2 --timeout 30 --json", fs.port);
    fake_server_stop(&fs);
    CHECK_MSG(r.status == 1 && r.json, "exit %d, stderr %.300s", r.status, r.err);
    CHECK_EQ_INT(json_num_path(r.json, "error_kinds.http_status"), 4);
    const JsonValue *ex = r.json ? json_get(r.json, "error_examples") : NULL;
    const char *msg = json_str_key(ex, "http_status");
    CHECK_MSG(msg && strstr(msg, "503") && strstr(msg, "fake overload"), "%s", msg ? msg : "(none)");
    ran_free(&r);
    fake_server_free(&fs);
}

/* A server that never answers: --timeout ends each request, and so the run. */
TEST(loadgen_timeout_bounds_a_stalled_server) {
    FakeServer fs = {.chunks = 1, .stall_ms = 10000};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d -n 4 -c 2 --timeout 0.3 --json", fs.port);
    fake_server_stop(&fs); /* its threads leave as soon as loadgen hangs up */
    CHECK_MSG(r.status == 1 && r.json, "exit %d, stderr %.300s", r.status, r.err);
    CHECK_EQ_INT(json_num_path(r.json, "error_kinds.timeout"), 4);
    CHECK_MSG(r.ms < 5000, "loadgen took %.0f ms for 2 rounds of 0.3 s timeouts", r.ms);
    ran_free(&r);
    fake_server_free(&fs);
}

TEST(loadgen_talks_to_loopback_only) {
    const char *refused[] = {"http://10.1.2.3:8080", "http://example.com:80", "http://[2001:db8::1]:80",
                             "http://0.0.0.0:8080", "http://127.0.0.1.example.com:80"};
    for (int i = 0; i < 5; i++) {
        char args[128];
        snprintf(args, sizeof args, "--url %s -n 1", refused[i]);
        Ran r = loadgen(args, 0);
        CHECK_MSG(r.status == 2 && strstr(r.err, "loopback") && strstr(r.err, "refusing host"),
                  "%s: exit %d, stderr %s", refused[i], r.status, r.err);
        ran_free(&r);
    }
    Ran r = loadgen("--url https://127.0.0.1:8443 -n 1", 0);
    CHECK_MSG(r.status == 2 && strstr(r.err, "http://"), "https: exit %d, stderr %s", r.status, r.err);
    ran_free(&r);

    FakeServer fs = {.chunks = 2, .first_ms = 1, .token_ms = 1};
    start(&fs);
    r = loadgen("--url http://localhost:%d -n 2 -c 1 --model m --timeout 30 --json", fs.port);
    fake_server_stop(&fs);
    CHECK_MSG(r.status == 0 && json_num_path(r.json, "completed") == 2, "localhost: exit %d, stderr %s", r.status, r.err);
    CHECK(fs.posts == 2 && !strcmp(fs.model[0], "m"));
    ran_free(&r);
    fake_server_free(&fs);
}

TEST(loadgen_command_line) {
    Ran r = loadgen("--help", 0);
    CHECK_MSG(r.status == 0 && strstr(r.out, "usage: loadgen") && strstr(r.out, "--shared-prefix"), "exit %d", r.status);
    ran_free(&r);
    const char *bad[][2] = {{"--bogus", "unknown option '--bogus'"}, {"-n 0", "-n needs an integer"},
                            {"--shared-prefix 2", "--shared-prefix needs a number"},
                            {"--concurrency", "--concurrency needs a value"},
                            {"--url http://127.0.0.1:99999", "port"}, {"--url http://127.0.0.1:80/v1", "not a path"}};
    for (int i = 0; i < 6; i++) {
        r = loadgen(bad[i][0], 0);
        CHECK_MSG(r.status == 2 && strstr(r.err, bad[i][1]), "'%s': exit %d, stderr %s", bad[i][0], r.status, r.err);
        ran_free(&r);
    }
    /* Nobody listening: discovering the model fails; with --model, every request fails. */
    FakeServer fs = {0};
    start(&fs);
    fake_server_stop(&fs);
    r = loadgen("--url http://127.0.0.1:%d -n 2 --timeout 5", fs.port);
    CHECK_MSG(r.status == 1 && strstr(r.err, "cannot list the models") && strstr(r.err, "refused"),
              "exit %d, stderr %s", r.status, r.err);
    ran_free(&r);
    r = loadgen("--url http://127.0.0.1:%d -n 2 --model m --timeout 5", fs.port);
    CHECK_MSG(r.status == 1 && strstr(r.err, "the probe request") && strstr(r.err, "refused"),
              "exit %d, stderr %s", r.status, r.err);
    ran_free(&r);
    r = loadgen("--url http://127.0.0.1:%d -n 2 --model m --no-probe --timeout 5 --json", fs.port);
    CHECK_MSG(r.status == 1 && json_num_path(r.json, "error_kinds.connect") == 2, "exit %d, out %s", r.status, r.out);
    ran_free(&r);
    fake_server_free(&fs);
}

/* The server counts 3 tokens a word and 5 a message: --prompt-tokens 65 is
 * 20 words, found by two probes; --no-probe sends 65 words and no probe. */
TEST(loadgen_probes_count_the_servers_tokens) {
    FakeServer fs = {.chunks = 2, .tokens_per_word = 3, .template_tokens = 5};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d -n 3 -c 1 --prompt-tokens 65 --output-tokens 2 --json", fs.port);
    fake_server_stop(&fs);
    CHECK_MSG(r.status == 0, "exit %d, stderr %s", r.status, r.err);
    CHECK_EQ_INT(fs.probes, 2);
    CHECK_EQ_INT(fs.posts, 3);
    for (int i = 0; i < fs.posts; i++) {
        int words = 1;
        for (const char *p = fs.prompts[i]; *p; p++) words += *p == ' ';
        CHECK_EQ_INT(words, 20);
    }
    CHECK_EQ_INT(json_num_path(r.json, "prompt_tokens_mean"), 65);
    CHECK_EQ_INT(json_num_path(r.json, "tokens_per_word"), 3);
    CHECK_EQ_INT(json_num_path(r.json, "template_tokens"), 5);
    ran_free(&r);
    fake_server_free(&fs);

    FakeServer plain = {.chunks = 2, .tokens_per_word = 3, .template_tokens = 5};
    start(&plain);
    r = loadgen("--url http://127.0.0.1:%d -n 1 --prompt-tokens 65 --output-tokens 2 --no-probe --json", plain.port);
    fake_server_stop(&plain);
    CHECK_EQ_INT(plain.probes, 0);
    CHECK_EQ_INT(json_num_path(r.json, "prompt_words"), 65);
    CHECK_EQ_INT(json_num_path(r.json, "prompt_tokens_mean"), 3 * 65 + 5);
    ran_free(&r);
    fake_server_free(&plain);
}

/* Conversations: every turn sends the system prompt, the earlier turns with
 * the answers the server gave, and its own message; turns of one conversation
 * one after the other. */
TEST(loadgen_conversations_send_the_history) {
    FakeServer fs = {.chunks = 3, .first_ms = 5, .token_ms = 1};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d --conversations 3 --turns 3 -c 2 --no-probe --system-tokens 5 "
                    "--prompt-tokens 4 --output-tokens 3 --json --samples", fs.port);
    fake_server_stop(&fs);
    CHECK_MSG(r.status == 0, "exit %d, stderr %s", r.status, r.err);
    CHECK_EQ_INT(fs.posts, 9);
    int by_len[7] = {0};
    for (int i = 0; i < fs.posts && i < FAKE_MAX_POSTS; i++) {
        int n = fs.n_messages[i];
        CHECK_MSG(n == 2 || n == 4 || n == 6, "a request with %d messages", n);
        if (n == 2 || n == 4 || n == 6) by_len[n]++;
        /* the answer of the turn before, word for word ("t0 t1 t2 ") */
        if (n > 2) CHECK_STR(fs.previous[i], "t0 t1 t2 ");
    }
    CHECK(by_len[2] == 3 && by_len[4] == 3 && by_len[6] == 3);
    const JsonValue *req = per_request(&r);
    CHECK(req && req->n_items == 9);
    for (size_t i = 0; req && i < req->n_items; i++) {
        const JsonValue *q = &req->items[i];
        CHECK_EQ_INT(json_num_path(q, "conversation"), (int)i / 3);
        CHECK_EQ_INT(json_num_path(q, "turn"), (int)i % 3 + 1);
        if (i % 3)  /* sent after the turn before it ended */
            CHECK(json_num_path(q, "sent_ms") >= json_num_path(&req->items[i - 1], "sent_ms") +
                                                 json_num_path(&req->items[i - 1], "latency_ms"));
    }
    const JsonValue *turns = r.json ? json_get(r.json, "by_turn") : NULL;
    CHECK(turns && turns->type == JSON_ARRAY && turns->n_items == 3);
    ran_free(&r);
    fake_server_free(&fs);
}

/* A turn that fails ends its conversation: the turns after it are not sent. */
TEST(loadgen_conversations_stop_at_a_failed_turn) {
    FakeServer fs = {.chunks = 4, .drop_every = 2};
    start(&fs);
    Ran r = loadgen("--url http://127.0.0.1:%d --conversations 2 --turns 3 -c 1 --no-probe --system-tokens 3 "
                    "--prompt-tokens 2 --output-tokens 4 --json", fs.port);
    fake_server_stop(&fs);
    CHECK_EQ_INT(r.status, 1);
    CHECK_EQ_INT(fs.posts, 4);
    CHECK_EQ_INT(json_num_path(r.json, "completed"), 2);
    CHECK_EQ_INT(json_num_path(r.json, "error_kinds.incomplete"), 2);
    CHECK_EQ_INT(json_num_path(r.json, "error_kinds.skipped"), 2);
    /* the wall time is of the requests sent: the skipped ones have no times */
    CHECK_MSG(json_num_path(r.json, "wall_s") < r.ms / 1e3 + 0.001, "wall %g s, loadgen ran %g ms",
              json_num_path(r.json, "wall_s"), r.ms);
    ran_free(&r);
    r = loadgen("--url http://127.0.0.1:1 --conversations 2 -n 6", 0);
    CHECK_MSG(r.status == 2 && strstr(r.err, "give one"), "exit %d, stderr %s", r.status, r.err);
    ran_free(&r);
    fake_server_free(&fs);
}
