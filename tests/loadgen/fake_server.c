/* fake_server.c: see fake_server.h. */
#include "fake_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

typedef struct {
    FakeServer *fs;
    int fd;
} Conn;

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads the head and the Content-Length body into req; false if the client left. */
static bool read_request(int fd, Buf *req, size_t *body_at) {
    char tmp[4096];
    size_t need = 0;
    char *end = NULL;
    while (!end || req->len < need) {
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0 || req->len > (1u << 20)) return false;
        buf_append(req, tmp, (size_t)n);
        if (!end && (end = strstr(req->data, "\r\n\r\n"))) {
            *body_at = (size_t)(end + 4 - req->data);
            const char *cl = strcasestr(req->data, "\r\ncontent-length:");
            need = *body_at + (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
        }
    }
    return true;
}

/* One SSE event, in the body's framing. */
static bool send_event(const Conn *c, const char *json) {
    Buf ev = {0};
    if (c->fs->chunked) buf_printf(&ev, "%zx\r\n", strlen(json) + 8);
    buf_printf(&ev, "data: %s\n\n", json);
    if (c->fs->chunked) buf_puts(&ev, "\r\n");
    bool ok;
    if (c->fs->split_events) {
        size_t half = ev.len / 2;
        ok = send_all(c->fd, ev.data, half);
        sleep_ms(1);
        ok = ok && send_all(c->fd, ev.data + half, ev.len - half);
    } else {
        ok = send_all(c->fd, ev.data, ev.len);
    }
    buf_free(&ev);
    return ok;
}

static void answer_json(int fd, int status, const char *json) {
    Buf r = {0};
    buf_printf(&r, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
               "Connection: close\r\n\r\n%s", status, status == 200 ? "OK" : "Error", strlen(json), json);
    send_all(fd, r.data, r.len);
    buf_free(&r);
}

static int count_words(const char *text) {
    int n = *text ? 1 : 0;
    for (const char *p = text; *p; p++) n += *p == ' ';
    return n;
}

/* The prompt tokens of a request: tokens_per_word for each word of every
 * message, and template_tokens for each message. */
static int prompt_tokens(const FakeServer *fs, const JsonValue *msgs) {
    int n = 0;
    for (size_t i = 0; msgs && msgs->type == JSON_ARRAY && i < msgs->n_items; i++) {
        const JsonValue *c = json_get(&msgs->items[i], "content");
        n += fs->template_tokens + (fs->tokens_per_word ? fs->tokens_per_word : 1) *
             count_words(c && c->type == JSON_STRING ? c->string : "");
    }
    return n;
}

/* Records the request; returns its 1-based arrival number, its prompt tokens
 * and whether it asked for a stream (a non-streamed one is a probe: counted apart). */
static int record_post(FakeServer *fs, const char *body, size_t len, int *tokens, bool *stream) {
    JsonValue *v = json_parse(body, len, NULL);
    const JsonValue *msgs = v ? json_get(v, "messages") : NULL;
    int n_msgs = msgs && msgs->type == JSON_ARRAY ? (int)msgs->n_items : 0;
    const JsonValue *content = n_msgs ? json_get(&msgs->items[n_msgs - 1], "content") : NULL;
    const JsonValue *mt = v ? json_get(v, "max_tokens") : NULL, *st = v ? json_get(v, "stream") : NULL;
    const JsonValue *so = v ? json_get(v, "stream_options") : NULL, *model = v ? json_get(v, "model") : NULL;
    const JsonValue *iu = so ? json_get(so, "include_usage") : NULL;
    const char *prompt = content && content->type == JSON_STRING ? content->string : "";
    *tokens = prompt_tokens(fs, msgs);
    *stream = st && st->type == JSON_BOOL && st->boolean;
    pthread_mutex_lock(&fs->mu);
    if (!*stream) {
        fs->probes++;
        pthread_mutex_unlock(&fs->mu);
        json_free(v);
        return 0;
    }
    int k = ++fs->posts;
    if (k <= FAKE_MAX_POSTS) {
        fs->prompts[k - 1] = xstrdup(prompt);
        fs->n_messages[k - 1] = n_msgs;
        const JsonValue *prev = n_msgs > 1 ? json_get(&msgs->items[n_msgs - 2], "content") : NULL;
        fs->previous[k - 1] = xstrdup(prev && prev->type == JSON_STRING ? prev->string : "");
        fs->max_tokens[k - 1] = mt && mt->type == JSON_NUMBER ? (int)mt->number : -1;
        fs->include_usage[k - 1] = iu && iu->type == JSON_BOOL && iu->boolean;
        fs->model[k - 1] = xstrdup(model && model->type == JSON_STRING ? model->string : "");
    }
    pthread_mutex_unlock(&fs->mu);
    json_free(v);
    return k;
}

static void set_active(FakeServer *fs, int delta, bool dropped) {
    pthread_mutex_lock(&fs->mu);
    fs->active += delta;
    if (fs->active > fs->max_active) fs->max_active = fs->active;
    fs->dropped += dropped;
    pthread_mutex_unlock(&fs->mu);
}

/* The streamed answer: a role chunk, the content chunks, the finish chunk,
 * the usage chunk, [DONE]. */
static void stream_answer(const Conn *c, int k, int prompt_tokens) {
    FakeServer *fs = c->fs;
    char ev[512];
    const char *head = "{\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"created\":0,"
                       "\"model\":\"" FAKE_MODEL "\",\"choices\":[{\"index\":0,";
    Buf r = {0};
    buf_printf(&r, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
               "%sConnection: close\r\n\r\n", fs->chunked ? "Transfer-Encoding: chunked\r\n" : "");
    bool ok = send_all(c->fd, r.data, r.len);
    buf_free(&r);
    set_active(fs, +1, false);
    snprintf(ev, sizeof ev, "%s\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}", head);
    ok = ok && send_event(c, ev);
    bool drop = fs->drop_every && k % fs->drop_every == 0;
    for (int t = 0; ok && t < fs->chunks; t++) {
        bool slow = fs->slow_every && k % fs->slow_every == 0;
        sleep_ms(t > 0 ? fs->token_ms : slow ? fs->slow_first_ms : fs->first_ms);
        if (drop && t == fs->chunks / 2) {
            set_active(fs, -1, true);
            return;
        }
        snprintf(ev, sizeof ev, "%s\"delta\":{\"content\":\"t%d \"},\"finish_reason\":null}]}", head, t);
        ok = send_event(c, ev);
    }
    snprintf(ev, sizeof ev, "%s\"delta\":{},\"finish_reason\":%s}]}", head, fs->no_finish ? "null" : "\"length\"");
    ok = ok && send_event(c, ev);
    snprintf(ev, sizeof ev, "{\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"created\":0,"
             "\"model\":\"" FAKE_MODEL "\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,"
             "\"completion_tokens\":%d,\"total_tokens\":%d}}", prompt_tokens, fs->chunks, prompt_tokens + fs->chunks);
    if (!fs->no_usage) ok = ok && send_event(c, ev);
    /* no longer in flight before the client can see the end and send its next request */
    set_active(fs, -1, false);
    if (!fs->no_done) ok = ok && send_event(c, "[DONE]");
    if (fs->chunked && ok) send_all(c->fd, "0\r\n\r\n", 5);
}

static void *serve_conn(void *arg) {
    Conn *c = arg;
    FakeServer *fs = c->fs;
    Buf req = {0};
    size_t body_at = 0;
    if (read_request(c->fd, &req, &body_at)) {
        if (!strncmp(req.data, "GET /v1/models ", 15)) {
            answer_json(c->fd, 200, "{\"object\":\"list\",\"data\":[{\"id\":\"" FAKE_MODEL "\",\"object\":\"model\"}]}");
        } else if (!strncmp(req.data, "POST /v1/chat/completions ", 26)) {
            int tokens;
            bool stream;
            int k = record_post(fs, req.data + body_at, req.len - body_at, &tokens, &stream);
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            char probe[256];
            snprintf(probe, sizeof probe, "{\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":"
                     "{\"role\":\"assistant\",\"content\":\"t0\"},\"finish_reason\":\"length\"}],\"usage\":"
                     "{\"prompt_tokens\":%d,\"completion_tokens\":1,\"total_tokens\":%d}}", tokens, tokens + 1);
            if (!stream) /* a probe: answered whatever the switches say */
                answer_json(c->fd, 200, probe);
            else if (fs->status)
                answer_json(c->fd, fs->status, "{\"error\":{\"message\":\"fake overload\",\"type\":\"server_error\"}}");
            else if (!fs->stall_ms || poll(&p, 1, fs->stall_ms) == 0)
                stream_answer(c, k, tokens);
        } else {
            answer_json(c->fd, 404, "{\"error\":{\"message\":\"no such path\"}}");
        }
    }
    buf_free(&req);
    close(c->fd);
    free(c);
    return NULL;
}

static void *accept_loop(void *arg) {
    FakeServer *fs = arg;
    while (!atomic_load(&fs->stop)) {
        struct pollfd p = {.fd = fs->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0) continue;
        int fd = accept(fs->listen_fd, NULL, NULL);
        if (fd < 0) continue;
        Conn *c = xmalloc(sizeof *c);
        *c = (Conn){fs, fd};
        if (fs->n_conns == FAKE_MAX_CONNS || pthread_create(&fs->conns[fs->n_conns], NULL, serve_conn, c) != 0) {
            close(fd);
            free(c);
            continue;
        }
        fs->n_conns++;
    }
    return NULL;
}

int fake_server_start(FakeServer *fs) {
    pthread_mutex_init(&fs->mu, NULL);
    atomic_init(&fs->stop, false);
    fs->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fs->listen_fd < 0 || bind(fs->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(fs->listen_fd, 128) != 0 || getsockname(fs->listen_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    fs->port = ntohs(a.sin_port);
    return pthread_create(&fs->acceptor, NULL, accept_loop, fs) == 0 ? 0 : -1;
}

void fake_server_stop(FakeServer *fs) {
    atomic_store(&fs->stop, true);
    pthread_join(fs->acceptor, NULL);
    for (int i = 0; i < fs->n_conns; i++) pthread_join(fs->conns[i], NULL);
    close(fs->listen_fd);
}

void fake_server_free(FakeServer *fs) {
    for (int i = 0; i < fs->posts && i < FAKE_MAX_POSTS; i++) {
        free(fs->prompts[i]);
        free(fs->previous[i]);
        free(fs->model[i]);
    }
    pthread_mutex_destroy(&fs->mu);
}
