/* client.c: see client.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP, accept4, pipe2, memmem */
#endif
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"

#ifndef SERVER_CHAPTERS
#define SERVER_CHAPTERS "III.4"
#endif

/* SERVER_CHAPTERS is a space-separated list, made by tools/server.mk. */
static char chapters_text[] = SERVER_CHAPTERS;
const char *server_chapters[8];

__attribute__((constructor)) static void split_chapters(void) {
    int n = 0;
    for (char *t = strtok(chapters_text, " "); t && n < 7; t = strtok(NULL, " ")) server_chapters[n++] = t;
}

/* ---- the server process ---------------------------------------------------------------- */

char *server_proc_log(const ServerProc *s) {
    size_t n;
    char err[ERR_MAX];
    char *t = file_read_all(s->log, &n, err);
    return t ? t : xstrdup("");
}

bool server_proc_start(ServerProc *s, const char *chapter, const char *const *args) {
    static int counter;
    memset(s, 0, sizeof *s);
    snprintf(s->chapter, sizeof s->chapter, "%s", chapter);
    char name[64], exe[256];
    snprintf(name, sizeof name, "server-%s-%d.log", chapter, ++counter);
    snprintf(s->log, sizeof s->log, "%s", test_tmp_path(name));
    snprintf(exe, sizeof exe, "%s/%s/chat-server", test_build_dir(), chapter);
    if (access(exe, X_OK) != 0) {
        test_fail(__FILE__, __LINE__, "%s is missing: run make first", exe);
        return false;
    }
    /* SERVER_WRAPPER (e.g. "valgrind -q --error-exitcode=1") runs the server under a tool. */
    static char wrapper[512];
    const char *argv[80];
    int argc = 0;
    snprintf(wrapper, sizeof wrapper, "%s", getenv("SERVER_WRAPPER") ? getenv("SERVER_WRAPPER") : "");
    for (char *t = strtok(wrapper, " "); t && argc < 16; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc++] = exe;
    for (int i = 0; args[i] && argc < 60; i++) argv[argc++] = args[i];
    argv[argc++] = "--bind";
    argv[argc++] = "127.0.0.1:0";
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    for (int waited = 0; waited < 60000; waited += 20) {
        char *log = server_proc_log(s);
        const char *at = strstr(log, "listening on http://127.0.0.1:");
        if (at) s->port = atoi(at + strlen("listening on http://127.0.0.1:"));
        int st;
        bool exited = waitpid(pid, &st, WNOHANG) == pid;
        if (s->port || exited) {
            if (!s->port) test_fail(__FILE__, __LINE__, "chat-server did not start:\n%s", log);
            free(log);
            if (exited) s->pid = 0;
            return s->port > 0;
        }
        free(log);
        usleep(20000);
    }
    test_fail(__FILE__, __LINE__, "chat-server did not print where it listens within 60 s");
    server_proc_stop(s, SIGKILL);
    return false;
}

int server_proc_stop(ServerProc *s, int sig) {
    if (s->pid <= 0) return -1;
    kill(s->pid, sig);
    int st = 0;
    for (int waited = 0; waited < 60000; waited += 10) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    return -1;
}

/* ---- the client ------------------------------------------------------------------------------ */

void http_reply_free(HttpReply *r) {
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

bool http_reply_header(const HttpReply *r, const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    for (const char *p = r->head ? strstr(r->head, "\r\n") : NULL; p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1, *e = strstr(v, "\r\n");
            while (*v == ' ') v++;
            size_t len = e ? (size_t)(e - v) : strlen(v);
            snprintf(out, cap, "%.*s", (int)len, v);
            return true;
        }
    }
    return false;
}

JsonValue *http_reply_json(const HttpReply *r) {
    char err[ERR_MAX];
    return r->body ? json_parse(r->body, r->body_len, err) : NULL;
}

#define MAX_FDS 4096
static Buf leftover[MAX_FDS]; /* bytes read past the answer last taken from a connection */
/* Client threads reuse each other's closed descriptors: the lock orders their
 * use of one fd's leftover (the kernel orders it too, but no race detector sees that). */
static pthread_mutex_t leftover_mu = PTHREAD_MUTEX_INITIALIZER;

/* Appends fd's leftover bytes to to (when to), then forgets them. */
static void leftover_take(int fd, Buf *to) {
    if (fd < 0 || fd >= MAX_FDS) return;
    pthread_mutex_lock(&leftover_mu);
    if (to) buf_append(to, leftover[fd].data, leftover[fd].len);
    buf_free(&leftover[fd]);
    pthread_mutex_unlock(&leftover_mu);
}

static void leftover_keep(int fd, const char *data, size_t n) {
    if (fd < 0 || fd >= MAX_FDS) return;
    pthread_mutex_lock(&leftover_mu);
    buf_append(&leftover[fd], data, n);
    pthread_mutex_unlock(&leftover_mu);
}

static bool leftover_any(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return false;
    pthread_mutex_lock(&leftover_mu);
    bool any = leftover[fd].len > 0;
    pthread_mutex_unlock(&leftover_mu);
    return any;
}

int client_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    leftover_take(fd, NULL);
    return fd;
}

bool client_send(int fd, const void *data, size_t n) { return http_write_all(fd, data, n) == 0; }

/* The length of the whole answer at raw[0..len) (0 if incomplete), filling r. */
static size_t parse_reply(const char *raw, size_t len, bool at_eof, HttpReply *r) {
    const char *end = memmem(raw, len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = (size_t)(end - raw) + 4;
    char *h = xmalloc(head + 1);
    memcpy(h, raw, head);
    h[head] = '\0';
    HttpReply tmp = {.head = h};
    tmp.status = atoi(h + 9);
    if (tmp.status == 100) { /* an interim answer: the real one follows */
        free(h);
        size_t n = parse_reply(raw + head, len - head, at_eof, r);
        return n ? head + n : 0;
    }
    char v[64];
    Buf body = {0};
    buf_append(&body, "", 0);
    size_t used = 0;
    if (http_reply_header(&tmp, "Transfer-Encoding", v, sizeof v)) {
        int status;
        char err[ERR_MAX];
        long n = http_parse_chunked(raw + head, len - head, 1u << 30, &body, &status, err);
        if (n > 0) used = head + (size_t)n;
    } else if (http_reply_header(&tmp, "Content-Length", v, sizeof v)) {
        size_t n = (size_t)atol(v);
        if (len - head >= n) {
            buf_append(&body, raw + head, n);
            used = head + n;
        }
    } else if (at_eof) {
        buf_append(&body, raw + head, len - head);
        used = len;
    }
    if (!used) {
        free(h);
        buf_free(&body);
        return 0;
    }
    *r = tmp;
    r->body = body.data;
    r->body_len = body.len;
    return used;
}

bool client_read_reply(int fd, HttpReply *r, int timeout_ms) {
    memset(r, 0, sizeof *r);
    Buf raw = {0};
    buf_append(&raw, "", 0);
    leftover_take(fd, &raw);
    double deadline = time_now_ms() + timeout_ms;
    bool eof = false;
    size_t used;
    while (!(used = parse_reply(raw.data, raw.len, eof, r))) {
        if (eof) break;
        double left = deadline - time_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left + 1) <= 0) break;
        char tmp[65536];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) eof = true;
        else buf_append(&raw, tmp, (size_t)n);
    }
    if (used && used < raw.len) leftover_keep(fd, raw.data + used, raw.len - used);
    r->closed = eof;
    buf_free(&raw);
    return r->status != 0;
}

bool client_closed(int fd, int timeout_ms) {
    if (leftover_any(fd)) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, timeout_ms) > 0 && recv(fd, &c, 1, MSG_PEEK) <= 0;
}

bool http_exchange_half_closed(int port, const char *raw, size_t n, HttpReply *r, int timeout_ms) {
    memset(r, 0, sizeof *r);
    int fd = client_connect(port);
    if (fd < 0) return false;
    bool ok = client_send(fd, raw, n);
    shutdown(fd, SHUT_WR);
    ok = ok && client_read_reply(fd, r, timeout_ms);
    close(fd);
    return ok;
}

bool http_exchange(int port, const char *raw, size_t n, HttpReply *r, int timeout_ms) {
    memset(r, 0, sizeof *r);
    int fd = client_connect(port);
    if (fd < 0) return false;
    bool ok = client_send(fd, raw, n) && client_read_reply(fd, r, timeout_ms);
    close(fd);
    return ok;
}

bool http_get(int port, const char *path, HttpReply *r) {
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
    return http_exchange(port, req, (size_t)n, r, 10000);
}

bool http_post(int port, const char *path, const char *json, HttpReply *r) {
    Buf b = {0};
    buf_printf(&b, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n%s", path, strlen(json), json);
    bool ok = http_exchange(port, b.data, b.len, r, 60000);
    buf_free(&b);
    return ok;
}

JsonValue *get_json(int port, const char *path) {
    HttpReply r;
    if (!http_get(port, path, &r)) return NULL;
    JsonValue *v = r.status == 200 ? http_reply_json(&r) : NULL;
    http_reply_free(&r);
    return v;
}

static const JsonValue *walk(const JsonValue *v, va_list ap) {
    for (const char *k; v && (k = va_arg(ap, const char *));) {
        if (v->type == JSON_ARRAY) {
            size_t i = (size_t)atol(k);
            v = i < v->n_items ? &v->items[i] : NULL;
        } else {
            v = json_get(v, k);
        }
    }
    return v;
}

double json_number_at(const JsonValue *v, ...) {
    va_list ap;
    va_start(ap, v);
    const JsonValue *x = walk(v, ap);
    va_end(ap);
    return x && x->type == JSON_NUMBER ? x->number : -1e300;
}

const char *json_string_at(const JsonValue *v, ...) {
    va_list ap;
    va_start(ap, v);
    const JsonValue *x = walk(v, ap);
    va_end(ap);
    return x && x->type == JSON_STRING ? x->string : NULL;
}

double metric_value(int port, const char *sample) {
    HttpReply r;
    if (!http_get(port, "/metrics", &r)) return -1;
    double v = -1;
    size_t n = strlen(sample);
    for (const char *line = r.body; line && *line;) {
        if (strncmp(line, sample, n) == 0 && line[n] == ' ') v = atof(line + n + 1);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    http_reply_free(&r);
    return v;
}

bool wait_pool_empty(int port, int timeout_ms) {
    for (double end = time_now_ms() + timeout_ms; time_now_ms() < end; usleep(20000)) {
        JsonValue *kv = get_json(port, "/v1/kv");
        double used = json_number_at(kv, "blocks_used", NULL);
        json_free(kv);
        if (used == 0) return true;
    }
    return false;
}

bool sse_collect(const char *body, Buf *text, char *finish, size_t finish_cap, char *err) {
    buf_append(text, "", 0);
    if (finish_cap) finish[0] = '\0';
    bool done = false;
    for (const char *p = body; *p;) {
        const char *end = strstr(p, "\n\n");
        if (!end) return err_set(err, "an event does not end with a blank line: '%.60s'", p), false;
        if (done) return err_set(err, "events after [DONE]"), false;
        if (strncmp(p, "data: ", 6) != 0) return err_set(err, "an event without 'data: ': '%.60s'", p), false;
        const char *data = p + 6;
        size_t n = (size_t)(end - data);
        if (memchr(data, '\n', n)) return err_set(err, "a chunk spans several data lines"), false;
        if (n == 6 && memcmp(data, "[DONE]", 6) == 0) {
            done = true;
        } else {
            char jerr[ERR_MAX];
            JsonValue *c = json_parse(data, n, jerr);
            if (!c) return err_set(err, "a chunk is not JSON: %s", jerr), false;
            const char *piece = json_string_at(c, "choices", "0", "delta", "content", NULL);
            if (!piece) piece = json_string_at(c, "choices", "0", "text", NULL);
            if (piece) buf_puts(text, piece);
            const char *fr = json_string_at(c, "choices", "0", "finish_reason", NULL);
            if (fr && finish_cap) snprintf(finish, finish_cap, "%s", fr);
            if (json_get(c, "error")) snprintf(finish, finish_cap, "error");
            json_free(c);
        }
        p = end + 2;
    }
    if (!done) return err_set(err, "the stream does not end with data: [DONE]"), false;
    return true;
}
