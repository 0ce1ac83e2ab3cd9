/* test_faults.c: chat-server under bad input and bad clients, over real
 * sockets on 127.0.0.1: every malformed request gets its 4xx and the server
 * keeps serving; limits, timeouts and the connection cap; clients that
 * disconnect mid-stream or while waiting; a full queue; requests larger
 * than the KV pool; the API key; SIGINT and SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "servers.h"

static bool alive(int port) {
    HttpReply r;
    bool ok = http_get(port, "/health", &r) && r.status == 200;
    http_reply_free(&r);
    return ok;
}

/* Sends raw bytes and checks the status (and that the error body names want). */
static void expect_status(int port, const char *raw, size_t n, int status, const char *want, const char *chapter) {
    HttpReply r;
    http_exchange(port, raw, n, &r, 10000);
    CHECK_MSG(r.status == status, "%s: %.80s... got %d, want %d: %s", chapter, raw, r.status, status, r.body ? r.body : "");
    if (want && r.status == status) {
        JsonValue *v = http_reply_json(&r);
        const char *msg = json_string_at(v, "error", "message", NULL);
        CHECK_MSG(msg && strstr(msg, want), "%s: error '%s' lacks '%s'", chapter, msg ? msg : r.body, want);
        CHECK(json_get(json_get(v, "error"), "type") && json_get(json_get(v, "error"), "param") &&
              json_get(json_get(v, "error"), "code"));
        json_free(v);
    }
    http_reply_free(&r);
    CHECK_MSG(alive(port), "%s: the server stopped answering after %.60s", chapter, raw);
}

static void expect_post(int port, const char *path, const char *json, int status, const char *want, const char *chapter) {
    Buf b = {0};
    buf_printf(&b, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", path,
               strlen(json), json);
    expect_status(port, b.data, b.len, status, want, chapter);
    buf_free(&b);
}

TEST(server_malformed_requests_get_4xx) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        int p = s->port;
        const char *chat = "/v1/chat/completions";
        expect_post(p, chat, "{\"messages\":[", 400, "not valid JSON", c);
        expect_post(p, chat, "", 400, "not valid JSON", c);
        expect_post(p, chat, "[1,2]", 400, "must be a JSON object", c);
        expect_post(p, chat, "{\"messages\":\"hi\"}", 400, "'messages' must be a non-empty array", c);
        expect_post(p, chat, "{}", 400, "'messages' is missing", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", 400, "'temperature' must be a number", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":7}", 400, "between 0 and 2", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2.5}", 400, "'max_tokens' must be an integer", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e300}", 400, "max_tokens", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e400}", 400, "too large", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":17}", 400, "'n' must be an integer from 1 to 16", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "role", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400, "invalid UTF-8", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", 400, "'stop[0]' must be a string", c);
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400, "needs 'logprobs'", c);
        char deep[400] = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"x\":";
        for (int i = 0; i < 100; i++) strcat(deep, "[");
        expect_post(p, chat, deep, 400, "nesting deeper", c);
        expect_post(p, "/v1/completions", "{\"prompt\":[[1,2],[3]]}", 400, "one per request", c);
        expect_post(p, "/v1/completions", "{\"prompt\":[999999]}", 400, "token id", c);
        expect_post(p, "/v1/completions", "{\"prompt\":\"\",\"max_tokens\":3}", 400, "the prompt is empty", c);
        char *big = xmalloc(4000);
        strcpy(big, "{\"prompt\":\"");
        for (int i = 0; i < 300; i++) strcat(big, "dog ");
        strcat(big, "\"}");
        expect_post(p, "/v1/completions", big, 400, "the context holds 256", c);
        expect_post(p, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":300}", 400, "max_tokens asks for 300", c);
        free(big);
        /* the request with a lone surrogate escape still works (it becomes U+FFFD) */
        expect_post(p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800 hi\"}],\"max_tokens\":2}", 200, NULL, c);
        /* HTTP level */
        static const char *const raws[][3] = {
            {"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "404", "no route GET /nowhere"},
            {"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", "405", "use POST"},
            {"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", "405", "use GET"},
            {"BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", "501", "not implemented"},
            {"GET /health HTTP/3.0\r\nHost: x\r\n\r\n", "505", "version"},
            {"GET /health\r\n\r\n", "400", "malformed request line"},
            {"GET /health HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", "400", "without a colon"},
            {"GET /health HTTP/1.1\r\n\r\n", "400", "missing Host"},
            {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", "400", "Content-Length"},
            {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n", "413", "larger than the limit of 65536"},
            {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "501", "Transfer-Encoding"},
            {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400", "chunk-size"},
            {"\x16\x03\x01\x02\x05\x01\x02\x01\xfc\x03\x03 tls hello\r\n\r\n", "400", NULL},
        };
        for (size_t i = 0; i < sizeof raws / sizeof raws[0]; i++)
            expect_status(p, raws[i][0], strlen(raws[i][0]), atoi(raws[i][1]), raws[i][2], c);
        /* a chunked request body works */
        const char *chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "a\r\n{\"prompt\":\r\n16\r\n\"Once\",\"max_tokens\":2}\r\n0\r\n\r\n";
        expect_status(p, chunked, strlen(chunked), 200, NULL, c);
        /* request line and header limits */
        Buf b = {0};
        buf_puts(&b, "GET /");
        for (int i = 0; i < 9000; i++) buf_puts(&b, "a");
        buf_puts(&b, " HTTP/1.1\r\nHost: x\r\n\r\n");
        expect_status(p, b.data, b.len, 414, "request line longer than 8192", c);
        b.len = 0;
        buf_puts(&b, "GET /health HTTP/1.1\r\nHost: x\r\n");
        for (int i = 0; i < 40; i++) buf_printf(&b, "X-Filler-%d: %01000d\r\n", i, 0);
        buf_puts(&b, "\r\n");
        expect_status(p, b.data, b.len, 431, "header lines larger than", c);
        b.len = 0;
        buf_puts(&b, "GET /health HTTP/1.1\r\nHost: x\r\n");
        for (int i = 0; i < 120; i++) buf_printf(&b, "X-%d: 1\r\n", i);
        buf_puts(&b, "\r\n");
        expect_status(p, b.data, b.len, 431, "more than 100 header lines", c);
        buf_free(&b);
    }
}

TEST(server_random_bytes_never_crash) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        const char *valid = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n"
                            "{\"prompt\":\"Once upon\",\"max_tokens\":2}    ";
        unsigned seed = 7;
        int answered = 0;
        for (int i = 0; i < 60; i++) {
            char buf[700];
            size_t n = strlen(valid);
            memcpy(buf, valid, n);
            for (int k = 0; k < 1 + i % 8; k++) { /* flip, cut or add bytes */
                seed = seed * 1103515245u + 12345u;
                size_t at = (seed >> 8) % n;
                int what = (seed >> 20) % 5;
                if (what <= 1) buf[at] = (char)(seed >> 3);
                else if (what == 2) n = at + 1;
                else if (n < sizeof buf - 1) buf[n++] = (char)(seed >> 11);
            }
            if (i % 10 == 9) for (size_t k = 0; k < n; k++) buf[k] = (char)((seed = seed * 1103515245u + 12345u) >> 16);
            HttpReply r; /* the client stops sending: a truncated request is not waited for */
            http_exchange_half_closed(s->port, buf, n, &r, 4000);
            CHECK_MSG(r.status == 0 || (r.status >= 200 && r.status < 600 && r.status != 500), "%s: case %d got %d", c, i, r.status);
            answered += r.status != 0;
            http_reply_free(&r);
        }
        CHECK_MSG(answered >= 15, "%s: only %d of 60 broken requests got an answer", c, answered);
        CHECK_MSG(alive(s->port), "%s: the server died on random bytes", c);
        CHECK(wait_pool_empty(s->port, 3000));
    }
}

TEST(server_keep_alive_and_pipelining) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        int fd = client_connect(s->port);
        const char *body = "{\"prompt\":\"Once\",\"max_tokens\":3,\"temperature\":0}";
        char post[512], stream[512];
        snprintf(post, sizeof post, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
        const char *sbody = "{\"prompt\":\"Once\",\"max_tokens\":3,\"stream\":true}";
        snprintf(stream, sizeof stream, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(sbody), sbody);
        const char *seq[] = {"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", post, stream, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"};
        for (int i = 0; i < 4; i++) {
            HttpReply r;
            CHECK(client_send(fd, seq[i], strlen(seq[i])) && client_read_reply(fd, &r, 10000));
            CHECK_MSG(r.status == 200 && !client_closed(fd, 50), "%s: request %d on one connection: %d", c, i, r.status);
            http_reply_free(&r);
        }
        /* two at once, answered in order */
        char two[256];
        snprintf(two, sizeof two, "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n");
        CHECK(client_send(fd, two, strlen(two)));
        HttpReply r1, r2;
        CHECK(client_read_reply(fd, &r1, 5000) && r1.status == 200);
        CHECK(client_read_reply(fd, &r2, 5000) && r2.status == 404 && !client_closed(fd, 50));
        http_reply_free(&r1);
        http_reply_free(&r2);
        close(fd);
        /* HTTP/1.0 streaming: no chunks, the stream ends with the connection */
        char req[512];
        snprintf(req, sizeof req, "POST /v1/completions HTTP/1.0\r\nContent-Length: %zu\r\n\r\n%s", strlen(sbody), sbody);
        HttpReply r;
        CHECK(http_exchange(s->port, req, strlen(req), &r, 10000) && r.status == 200 && r.closed);
        CHECK(r.body && strstr(r.head, "Transfer-Encoding") == NULL && strstr(r.body, "data: [DONE]\n\n"));
        http_reply_free(&r);
    }
}

TEST(server_slow_client_times_out) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        int fd = client_connect(s->port);
        const char *part = "GET /health HTTP/1.1\r\nHost: x\r\n"; /* and never the blank line */
        double t0 = time_now_ms();
        HttpReply r;
        CHECK(client_send(fd, part, strlen(part)) && client_read_reply(fd, &r, 8000));
        double waited = time_now_ms() - t0;
        CHECK_MSG(r.status == 408 && client_closed(fd, 2000), "%s: a request that never ends got %d", c, r.status);
        CHECK_MSG(waited > 1500 && waited < 6000, "%s: timed out after %.0f ms with --timeout 2", c, waited);
        http_reply_free(&r);
        close(fd);
        fd = client_connect(s->port); /* idle: closed without an answer */
        char ch;
        t0 = time_now_ms();
        CHECK(recv(fd, &ch, 1, 0) == 0);
        CHECK(time_now_ms() - t0 < 6000);
        close(fd);
        CHECK(alive(s->port));
    }
}

/* Its own server, whose --timeout no test can outlast: the kernel queues the
 * nine connections in order and the server takes them in that order, so the
 * ninth finds eight open however slowly a loaded (or sanitized) machine
 * accepts them. With the fast server's --timeout 2, a machine slow to accept
 * closed the first idle ones before the ninth came. */
TEST(server_max_connections) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc s;
        const char *args[] = {default_model_path(), "--max-connections", "8", "--timeout", "600", "--quiet", NULL};
        if (!server_proc_start(&s, c, args)) continue;
        int fds[8];
        for (int i = 0; i < 8; i++) fds[i] = client_connect(s.port);
        HttpReply r;
        const char *get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
        CHECK(http_exchange(s.port, get, strlen(get), &r, 10000));
        CHECK_MSG(r.status == 503 && r.body && strstr(r.body, "too many connections") && strstr(r.body, "--max-connections"),
                  "%s: the 9th connection got %d %s", c, r.status, r.body ? r.body : "");
        http_reply_free(&r);
        for (int i = 0; i < 8; i++) close(fds[i]);
        bool back = false;
        for (int i = 0; i < 250 && !back; i++) {
            back = alive(s.port);
            if (!back) usleep(20000);
        }
        CHECK(back);
        CHECK(metric_value(s.port, "chat_server_connections_refused_total") >= 1);
        CHECK_EQ_INT(server_proc_stop(&s, SIGTERM), 0);
    }
}

TEST(server_api_key) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc s;
        const char *args[] = {default_model_path(), "--api-key", "sesame", "--quiet", NULL};
        if (!server_proc_start(&s, c, args)) continue;
        CHECK(alive(s.port)); /* /health needs no key */
        const char *noauth = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
        HttpReply r;
        CHECK(http_exchange(s.port, noauth, strlen(noauth), &r, 5000) && r.status == 401);
        char v[64] = "";
        CHECK(http_reply_header(&r, "WWW-Authenticate", v, sizeof v) && strcmp(v, "Bearer") == 0);
        JsonValue *j = http_reply_json(&r);
        CHECK_STR(json_string_at(j, "error", "type", NULL), "authentication_error");
        json_free(j);
        http_reply_free(&r);
        const char *wrong = "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesamf\r\n\r\n";
        CHECK(http_exchange(s.port, wrong, strlen(wrong), &r, 5000) && r.status == 401);
        http_reply_free(&r);
        const char *nowhere = "GET /secret HTTP/1.1\r\nHost: x\r\n\r\n"; /* no key: not even a 404 */
        CHECK(http_exchange(s.port, nowhere, strlen(nowhere), &r, 5000) && r.status == 401);
        http_reply_free(&r);
        const char *right = "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n\r\n";
        CHECK(http_exchange(s.port, right, strlen(right), &r, 5000) && r.status == 200);
        http_reply_free(&r);
        const char *why, *script = openai_client_script(&why);
        char cmd[1024];
        if (script) {
            snprintf(cmd, sizeof cmd, "node '%s' http://127.0.0.1:%d/v1 sesame > /dev/null 2>&1", script, s.port);
            CHECK_MSG(system(cmd) == 0, "%s: the openai client with an API key failed", c);
        }
        CHECK_EQ_INT(server_proc_stop(&s, SIGTERM), 0);
    }
}

/* ---- with requests still running: the slow server ---- */

/* Sends a streaming request and reads until n events arrived; the open socket, or -1. */
static int start_stream(int port, const char *json, int n_events) {
    int fd = client_connect(port);
    Buf b = {0};
    buf_printf(&b, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(json), json);
    bool ok = fd >= 0 && client_send(fd, b.data, b.len);
    buf_free(&b);
    Buf got = {0};
    buf_append(&got, "", 0);
    int seen = 0;
    for (double end = time_now_ms() + 20000; ok && seen < n_events && time_now_ms() < end;) {
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) ok = false;
        else buf_append(&got, tmp, (size_t)n);
        seen = 0;
        for (const char *p = got.data; (p = strstr(p, "data: ")); p += 6) seen++;
    }
    buf_free(&got);
    if (!ok || seen < n_events) {
        if (fd >= 0) close(fd);
        test_fail(__FILE__, __LINE__, "the stream did not start");
        return -1;
    }
    return fd;
}

/* Reads a stream to its end; true if it ended with [DONE]. */
static bool finish_stream(int fd, char *tail, size_t cap) {
    Buf got = {0};
    buf_append(&got, "", 0);
    for (double end = time_now_ms() + 60000; time_now_ms() < end;) {
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) break;
        buf_append(&got, tmp, (size_t)n);
        if (strstr(got.data, "data: [DONE]") && strstr(got.data, "\r\n0\r\n\r\n")) break;
    }
    bool done = strstr(got.data, "data: [DONE]") != NULL;
    if (tail) snprintf(tail, cap, "%s", got.len > cap - 1 ? got.data + got.len - (cap - 1) : got.data);
    buf_free(&got);
    close(fd);
    return done;
}

static bool wait_metric(int port, const char *sample, double want, int timeout_ms) {
    for (double end = time_now_ms() + timeout_ms; time_now_ms() < end; usleep(10000))
        if (metric_value(port, sample) == want) return true;
    return false;
}

typedef struct {
    int port;
    const char *json;
    HttpReply reply;
    double t_done;
} Waiter;

static void *post_in_thread(void *arg) {
    Waiter *w = arg;
    http_post(w->port, "/v1/completions", w->json, &w->reply);
    w->t_done = time_now_ms();
    return NULL;
}

/* A streaming request running (the socket, its first n events read) and a
 * short one sent behind it from a thread into w; on a one-at-a-time engine
 * the second is seen waiting. -1 if the stream did not start. */
static int one_running_one_behind(ServerProc *s, const char *stream_json, int n_events, Waiter *w, pthread_t *t) {
    int a = start_stream(s->port, stream_json, n_events);
    if (a < 0) return -1;
    w->port = s->port;
    pthread_create(t, NULL, post_in_thread, w);
    if (one_at_a_time(s->chapter))
        CHECK_MSG(wait_metric(s->port, "chat_server_requests_waiting", 1, 5000), "%s: the second request did not wait", s->chapter);
    return a;
}

static const char LONG_STREAM[] = "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"stream\":true}";

TEST(server_second_request_waits_then_succeeds) {
    FOR_EACH_SERVER_CHAPTER(c) {
        if (!one_at_a_time(c)) continue;
        ServerProc *s = slow_server(c);
        if (!s) continue;
        Waiter w = {.json = "{\"prompt\":\"Once upon\",\"max_tokens\":4,\"temperature\":0}"};
        pthread_t t;
        int a = one_running_one_behind(s, LONG_STREAM, 2, &w, &t);
        if (a < 0) continue;
        CHECK_EQ_INT(metric_value(s->port, "chat_server_requests_running"), 1);
        CHECK(finish_stream(a, NULL, 0));
        double t_a = time_now_ms();
        pthread_join(t, NULL);
        CHECK_MSG(w.reply.status == 200, "%s: the waiting request got %d %s", c, w.reply.status, w.reply.body ? w.reply.body : "");
        JsonValue *v = http_reply_json(&w.reply);
        CHECK_EQ_INT(json_number_at(v, "usage", "completion_tokens", NULL), 4);
        json_free(v);
        CHECK(w.t_done >= t_a - 50);
        http_reply_free(&w.reply);
        CHECK(wait_pool_empty(s->port, 5000));
    }
}

TEST(server_full_queue_gets_503) {
    FOR_EACH_SERVER_CHAPTER(c) {
        if (!one_at_a_time(c)) continue;
        ServerProc *s = slow_server(c);
        if (!s) continue;
        Waiter w = {.json = "{\"prompt\":\"Once\",\"max_tokens\":2}"};
        pthread_t t;
        int a = one_running_one_behind(s, LONG_STREAM, 1, &w, &t);
        if (a < 0) continue;
        HttpReply r;
        CHECK(http_post(s->port, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":2}", &r));
        char retry[16] = "";
        CHECK_MSG(r.status == 503 && r.body && strstr(r.body, "busy") && strstr(r.body, "--queue 1"), "%s: past the queue: %d %s", c,
                  r.status, r.body ? r.body : "");
        CHECK(http_reply_header(&r, "Retry-After", retry, sizeof retry));
        http_reply_free(&r);
        close(a); /* the running one goes away: the waiting one runs */
        pthread_join(t, NULL);
        CHECK_EQ_INT(w.reply.status, 200);
        http_reply_free(&w.reply);
        CHECK(wait_pool_empty(s->port, 5000));
        CHECK(wait_metric(s->port, "chat_server_requests_running", 0, 5000));
    }
}

TEST(server_disconnect_mid_stream_frees_everything) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = slow_server(c);
        if (!s) continue;
        double before = metric_value(s->port, "chat_server_generated_tokens_total");
        int a = start_stream(s->port, "{\"prompt\":\"Once upon a time\",\"max_tokens\":100,\"stream\":true}", 3);
        if (a < 0) continue;
        JsonValue *kv = get_json(s->port, "/v1/kv");
        CHECK(json_number_at(kv, "blocks_used", NULL) >= 1); /* it holds blocks while it runs */
        CHECK(json_string_at(kv, "sequences", "0", "owner", NULL) &&
              strncmp(json_string_at(kv, "sequences", "0", "owner", NULL), "cmpl-", 5) == 0);
        json_free(kv);
        double t0 = time_now_ms();
        close(a);
        CHECK_MSG(wait_pool_empty(s->port, 3000), "%s: blocks still used after the client left", c);
        CHECK(time_now_ms() - t0 < 3000);
        CHECK(wait_metric(s->port, "chat_server_requests_running", 0, 3000));
        double generated = metric_value(s->port, "chat_server_generated_tokens_total") - before;
        CHECK_MSG(generated < 100, "%s: generation went on after the disconnect (%g tokens)", c, generated);
        char *log = server_proc_log(s);
        CHECK(strstr(log, "client gone: cancelled"));
        free(log);
        HttpReply r; /* and the next request works */
        CHECK(http_post(s->port, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":2}", &r) && r.status == 200);
        http_reply_free(&r);
    }
}

TEST(server_disconnect_while_waiting_leaves_the_queue) {
    FOR_EACH_SERVER_CHAPTER(c) {
        if (!one_at_a_time(c)) continue;
        ServerProc *s = slow_server(c);
        if (!s) continue;
        int a = start_stream(s->port, "{\"prompt\":\"Once upon a time\",\"max_tokens\":80,\"stream\":true}", 1);
        if (a < 0) continue;
        int b = client_connect(s->port);
        const char *body = "{\"prompt\":\"Once\",\"max_tokens\":2}";
        char req[256];
        snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
        CHECK(client_send(b, req, strlen(req)));
        CHECK(wait_metric(s->port, "chat_server_requests_waiting", 1, 5000));
        close(b);
        CHECK_MSG(wait_metric(s->port, "chat_server_requests_waiting", 0, 2000), "%s: a gone client still waits", c);
        CHECK_EQ_INT(metric_value(s->port, "chat_server_requests_running"), 1); /* while the first still runs */
        close(a);
        CHECK(wait_pool_empty(s->port, 3000));
    }
}

TEST(server_request_larger_than_the_pool) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = slow_server(c);
        if (!s) continue;
        Buf json = {0};
        buf_puts(&json, "{\"prompt\":\"");
        for (int i = 0; i < 150; i++) buf_puts(&json, "the ");
        buf_puts(&json, "\",\"max_tokens\":4}");
        HttpReply r;
        CHECK(http_post(s->port, "/v1/completions", json.data, &r));
        CHECK_MSG(r.status == 400 && r.body && strstr(r.body, "KV blocks") && strstr(r.body, "the pool has 8"),
                  "%s: a prompt larger than the pool: %d %s", c, r.status, r.body ? r.body : "");
        http_reply_free(&r);
        CHECK(http_post(s->port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":200}", &r));
        CHECK_MSG(r.status == 400 && r.body && strstr(r.body, "max_tokens 200"), "%s: %d %s", c, r.status, r.body ? r.body : "");
        http_reply_free(&r);
        CHECK(http_post(s->port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":3}", &r) && r.status == 200);
        http_reply_free(&r);
        CHECK(wait_pool_empty(s->port, 3000));
        buf_free(&json);
    }
}

TEST(server_sigint_and_sigterm_stop_cleanly) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc s;
        const char *args[] = {default_model_path(), NULL};
        if (!server_proc_start(&s, c, args)) continue;
        CHECK(alive(s.port));
        int idle = client_connect(s.port); /* a keep-alive connection left open */
        CHECK_EQ_INT(server_proc_stop(&s, SIGINT), 0);
        close(idle);
        char *log = server_proc_log(&s);
        CHECK(strstr(log, "SIGINT: stopping") && strstr(log, "chat-server: stopped"));
        free(log);
        /* SIGTERM with a request running and one waiting: both get a clean end */
        const char *slow_args[] = {slow_model_path(), "--backend", "scalar", "--threads", "1", "--queue", "1", NULL};
        if (!server_proc_start(&s, c, slow_args)) continue;
        Waiter w = {.json = "{\"prompt\":\"Once\",\"max_tokens\":2}"};
        pthread_t t;
        int a = one_running_one_behind(&s, "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"stream\":true}", 2, &w, &t);
        if (a < 0) {
            server_proc_stop(&s, SIGKILL);
            continue;
        }
        double t0 = time_now_ms();
        CHECK_EQ_INT(server_proc_stop(&s, SIGTERM), 0);
        CHECK(time_now_ms() - t0 < 5000);
        char tail[512];
        finish_stream(a, tail, sizeof tail);
        CHECK_MSG(strstr(tail, "shutting down") && strstr(tail, "data: [DONE]"), "%s: the stream ended with '%s'", c, tail);
        pthread_join(t, NULL);
        if (one_at_a_time(c))
            CHECK_MSG(w.reply.status == 503 && strstr(w.reply.body, "shutting down"), "%s: the waiting one got %d", c, w.reply.status);
        http_reply_free(&w.reply);
        log = server_proc_log(&s);
        CHECK(strstr(log, "SIGTERM: stopping") && strstr(log, "chat-server: stopped"));
        free(log);
    }
}
