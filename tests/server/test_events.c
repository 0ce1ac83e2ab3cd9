/* chat-server's live views over real sockets, in every chapter: GET / is the
 * page (HTML compiled in, a policy that lets it talk to this server only);
 * GET /v1/events streams what the engine does as Server-Sent Events, from a
 * hello to each request's admit, prefill, decode and end and the tick after,
 * while other connections are served; the views' token ids come with text. */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "servers.h"

/* Reads from fd into got until it holds want after position from (returns
 * where), or timeout_ms pass (-1). */
static long read_until(int fd, Buf *got, size_t from, const char *want, int timeout_ms) {
    double end = time_now_ms() + timeout_ms;
    for (;;) {
        if (got->data && got->len > from) {
            const char *at = strstr(got->data + from, want);
            if (at) return at - got->data;
        }
        int left = (int)(end - time_now_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0) return -1;
        char chunk[4096];
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return -1;
        buf_append(got, chunk, (size_t)n);
    }
}

TEST(server_page_served_with_a_strict_policy) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        HttpReply r = {0};
        char type[128] = "", csp[512] = "";
        CHECK(http_get(s->port, "/", &r) && r.status == 200);
        CHECK(http_reply_header(&r, "Content-Type", type, sizeof type) && strstr(type, "text/html"));
        CHECK(http_reply_header(&r, "Content-Security-Policy", csp, sizeof csp));
        CHECK_MSG(strstr(csp, "default-src 'none'") && strstr(csp, "connect-src 'self'"), "%s: %s", c, csp);
        CHECK(r.body && strstr(r.body, "<title>chat-server") && strstr(r.body, "id=\"pool\"") &&
              strstr(r.body, "/v1/events"));
        CHECK_MSG(!strstr(r.body, "src=\"http") && !strstr(r.body, "href=\"http"), "%s: the page loads something from outside", c);
        http_reply_free(&r);
    }
}

TEST(server_events_stream_what_a_request_does) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        int fd = client_connect(s->port);
        const char *get = "GET /v1/events HTTP/1.1\r\nHost: test\r\n\r\n";
        CHECK(fd >= 0 && client_send(fd, get, strlen(get)));
        Buf got = {0};
        long at = read_until(fd, &got, 0, "\"ev\":\"hello\"", 5000);
        CHECK_MSG(at > 0, "%s: no hello on /v1/events: %s", c, got.data ? got.data : "(nothing)");
        CHECK(got.data && strstr(got.data, "text/event-stream"));
        HttpReply r = {0};
        CHECK(http_post(s->port, "/v1/chat/completions",
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":6}", &r) &&
              r.status == 200);
        http_reply_free(&r);
        long admit = at > 0 ? read_until(fd, &got, (size_t)at, "\"ev\":\"admit\"", 5000) : -1;
        long prefill = admit > 0 ? read_until(fd, &got, (size_t)admit, "\"ev\":\"prefill\"", 5000) : -1;
        long decode = prefill > 0 ? read_until(fd, &got, (size_t)prefill, "\"ev\":\"decode\"", 5000) : -1;
        long end = decode > 0 ? read_until(fd, &got, (size_t)decode, "\"ev\":\"end\"", 5000) : -1;
        long tick = end > 0 ? read_until(fd, &got, (size_t)end, "\"ev\":\"tick\"", 5000) : -1;
        CHECK_MSG(tick > 0, "%s: admit %ld, prefill %ld, decode %ld, end %ld, tick after it %ld", c, admit, prefill,
                  decode, end, tick);
        CHECK(read_until(fd, &got, 0, "\"ev\":\"alloc\"", 100) > 0); /* the pool's own events */
        close(fd);
        CHECK(wait_pool_empty(s->port, 5000));
        buf_free(&got);
    }
}

/* The prefix cache's nodes say what text their tokens are. */
TEST(server_kv_view_has_text) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s || one_at_a_time(c)) continue; /* III.4 has no prefix cache */
        HttpReply r = {0};
        const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"The small red fox lives in the forest by the "
                           "river and likes to tell stories.\"},{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":4}";
        CHECK(http_post(s->port, "/v1/chat/completions", body, &r) && r.status == 200);
        http_reply_free(&r);
        CHECK(http_get(s->port, "/v1/kv", &r) && r.status == 200);
        CHECK_MSG(r.body && strstr(r.body, "\"text\":\"<|im_start|>system\\nThe small red fox"), "%s: %.300s", c,
                  r.body ? r.body : "");
        http_reply_free(&r);
    }
}
