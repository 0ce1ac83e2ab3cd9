/* server.c: the listener, the event loop that holds every connection while
 * it waits, the worker threads that answer whole requests, and stopping on a
 * signal (server.h).
 *
 * A thread per connection is the simplest server, and the easiest to lock
 * out: a client that sends one byte a second holds its thread for the whole
 * --timeout, and a few dozen such clients hold them all. Here one thread, the
 * event loop, watches every connection with epoll and reads whatever arrived
 * (non-blocking) into the connection's HttpReader; a waiting connection costs
 * a socket and its bytes. Only a whole request gets a thread: a worker runs
 * its route (which may stream for minutes) and hands the connection back to
 * the loop for the next request. Deadlines are the loop's too: a head must
 * arrive within --header-timeout, a whole request within --timeout. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, pipe2 */
#endif
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "openai.h"
#include "server_internal.h"

#define SWEEP_MS 100             /* how often the loop looks at deadlines and the stop flag */
#define ACCEPT_BATCH 64          /* connections accepted per turn of the loop, so reads get theirs */
#define LINGER_MS 500            /* how long a closing connection drains what the client still sends */
#define LINGER_MAX_BYTES (1u << 20)

/* ---- configuration and flags ------------------------------------------------------------ */

void server_config_default(ServerConfig *c) {
    memset(c, 0, sizeof *c);
    c->bind = "127.0.0.1:8080";
    c->max_connections = 1024;
    c->max_per_client = 256;
    c->header_timeout_ms = 10 * 1000;
    c->http = http_limits_default();
    c->model_name = "model";
}

void server_flags_usage(FILE *out) {
    fprintf(out, "  --bind HOST:PORT       where to listen (default 127.0.0.1:8080; port 0: any free port)\n");
    fprintf(out, "  --api-key KEY          require 'Authorization: Bearer KEY' on every route but /health\n");
    fprintf(out, "  --max-connections N    open connections at once; more get 503 and are closed (default 1024)\n");
    fprintf(out, "  --max-connections-per-client N  open connections from one client address; more get 503\n");
    fprintf(out, "                         and are closed (default 256; 0: no limit, e.g. behind a load balancer)\n");
    fprintf(out, "  --header-timeout SECONDS  a request's head (request line and headers) must arrive within it;\n");
    fprintf(out, "                         an idle connection closes after it (default 10; at most --timeout)\n");
    fprintf(out, "  --timeout SECONDS      a request must arrive whole (body included) within it, and a client\n");
    fprintf(out, "                         that stops reading is dropped after it (default 30)\n");
    fprintf(out, "  --max-body BYTES       largest request body (default 8388608); larger gets 413\n");
    fprintf(out, "  --model-name NAME      the model id /v1/models lists (default: the file's name)\n");
    fprintf(out, "  --quiet                no log line per request\n");
    fprintf(out, "  --parse-special-in-messages  control-token texts written inside chat messages (\"<|im_end|>\")\n");
    fprintf(out, "                         become control tokens, as before: a user can then forge turns.\n");
    fprintf(out, "                         Default: message text stays text; only the template's markers are\n");
    fprintf(out, "                         control tokens (/v1/completions parses them unless \"parse_special\": false)\n");
}

/* "HOST:PORT" or "[IPv6]:PORT" into host and port. */
static int split_bind(const char *bind, char *host, size_t cap, char *port, char *err) {
    const char *colon = strrchr(bind, ':');
    const char *h = bind, *he = colon;
    if (bind[0] == '[') {
        const char *close = strchr(bind, ']');
        if (!close || close[1] != ':') colon = NULL;
        h = bind + 1;
        he = close;
    }
    if (!colon || he == h || (size_t)(he - h) >= cap || !colon[1] || strlen(colon + 1) > 5 ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1) || atoi(colon + 1) > 65535) {
        err_set(err, "--bind wants HOST:PORT (e.g. 127.0.0.1:8080), got '%s'", bind);
        return -1;
    }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    strcpy(port, colon + 1);
    return 0;
}

int server_flags_parse(ServerConfig *c, int argc, char **argv, int *i, char *err) {
    const char *a = argv[*i];
    static const char *const with_value[] = {"--bind",       "--api-key",       "--max-connections",
                                             "--timeout",    "--max-body",      "--model-name",
                                             "--header-timeout", "--max-connections-per-client"};
    if (strcmp(a, "--quiet") == 0) {
        c->quiet = true;
        return 1;
    }
    if (strcmp(a, "--parse-special-in-messages") == 0) {
        c->parse_special_in_messages = true;
        return 1;
    }
    int k = -1;
    for (int j = 0; j < 8; j++)
        if (strcmp(a, with_value[j]) == 0) k = j;
    if (k < 0) return 0;
    if (*i + 1 >= argc) {
        err_set(err, "option %s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    int x = 0;
    switch (k) {
    case 0: {
        char host[64], port[8];
        if (split_bind(v, host, sizeof host, port, err) != 0) return -1;
        c->bind = v;
        break;
    }
    case 1:
        if (!*v) {
            err_set(err, "--api-key must not be empty");
            return -1;
        }
        c->api_key = v;
        break;
    case 2: if (cli_parse_int(v, a, 1, 100000, &x, err)) return -1; c->max_connections = x; break;
    case 3: if (cli_parse_int(v, a, 1, 86400, &x, err)) return -1; c->http.timeout_ms = x * 1000; break;
    case 4: if (cli_parse_int(v, a, 1, 1 << 30, &x, err)) return -1; c->http.max_body = (size_t)x; break;
    case 5: c->model_name = v; break;
    case 6: if (cli_parse_int(v, a, 1, 86400, &x, err)) return -1; c->header_timeout_ms = x * 1000; break;
    case 7: if (cli_parse_int(v, a, 0, 100000, &x, err)) return -1; c->max_per_client = x; break;
    }
    return 1;
}
/* ---- connections -------------------------------------------------------------------------------- */

/* One client connection. The event loop owns it while it waits for a request
 * (READING) and while it lingers after a refusal (CLOSING): then it costs a
 * socket and the bytes read so far, no thread. Once a whole request is in, a
 * worker thread takes it (BUSY), answers, and hands it back for the next one. */
typedef enum { CONN_READING, CONN_BUSY, CONN_CLOSING } ConnState;

struct Conn {
    Server *s;
    int fd;
    ConnState state;
    bool admitted;          /* counted in n_conns and its address's count */
    char addr[48];          /* the client's address, numeric */
    HttpReader rd;          /* the bytes of its next request(s) */
    HttpRequest req;        /* BUSY: the request being answered */
    double since;           /* READING: when the wait began (the connection, or the previous answer) */
    double close_at;        /* CLOSING: when to stop lingering */
    size_t drained;         /* CLOSING: bytes read and dropped */
    Conn *prev, *next;      /* s->owned while the loop owns it; s->handed_back's list after a worker */
};

/* Closes after letting the client read the answer: stop writing, drain what
 * it still sends for a moment (closing with unread bytes would reset the
 * connection and could destroy the answer in flight), then close. A worker
 * thread's way; the loop lingers without blocking (CLOSING). */
static void linger_close(int fd) {
    shutdown(fd, SHUT_WR);
    double end = time_now_ms() + LINGER_MS;
    char sink[4096];
    for (size_t total = 0; total < LINGER_MAX_BYTES;) {
        double left = end - time_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left + 1) <= 0) break;
        ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n <= 0) break;
        total += (size_t)n;
    }
    close(fd);
}

/* Client-supplied text in a log line, control characters shown as '?'. */
static void log_clean(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

static void log_exchange(const Server *s, Exchange *x, double t0) {
    if (s->cfg.quiet) return;
    const HttpRequest *r = x->req;
    log_clean(x->note);
    fprintf(stderr, "%s %.200s %d %.0f ms%s%s\n", r && r->method[0] ? r->method : "-", r && r->target ? r->target : "-",
            x->status, time_now_ms() - t0, x->note[0] ? " " : "", x->note);
}

static void set_blocking(int fd, bool blocking) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
}

/* Counts a new connection from addr in (true), or writes into why which limit it is past. */
static bool admit(Server *s, const char *addr, char *why, size_t cap) {
    pthread_mutex_lock(&s->mu);
    int i = 0;
    while (i < s->n_clients && strcmp(s->clients[i].addr, addr) != 0) i++;
    bool known = i < s->n_clients, ok = false;
    if (s->n_conns >= s->cfg.max_connections) {
        snprintf(why, cap, "too many connections: the server takes %d at once (--max-connections)", s->cfg.max_connections);
    } else if (s->cfg.max_per_client > 0 && known && s->clients[i].n >= s->cfg.max_per_client) {
        snprintf(why, cap, "too many connections from your address: the server takes %d at once from one "
                           "(--max-connections-per-client)", s->cfg.max_per_client);
    } else {
        if (!known) {
            if (s->n_clients == s->cap_clients) {
                s->cap_clients = s->cap_clients ? 2 * s->cap_clients : 16;
                s->clients = xrealloc(s->clients, sizeof *s->clients * (size_t)s->cap_clients);
            }
            s->clients[s->n_clients] = (ClientCount){.n = 0};
            snprintf(s->clients[s->n_clients++].addr, sizeof s->clients[0].addr, "%s", addr);
        }
        s->clients[i].n++;
        s->n_conns++;
        ok = true;
    }
    if (!ok) s->refused++;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Closes c (the socket, now) and forgets it. Any thread, once c is out of the loop's list. */
static void conn_free(Conn *c) {
    Server *s = c->s;
    if (c->fd >= 0) close(c->fd);
    http_reader_free(&c->rd);
    http_request_free(&c->req);
    if (c->admitted) {
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < s->n_clients; i++)
            if (strcmp(s->clients[i].addr, c->addr) == 0 && --s->clients[i].n == 0) s->clients[i] = s->clients[--s->n_clients];
        s->n_conns--;
        pthread_cond_broadcast(&s->conns_changed);
        pthread_mutex_unlock(&s->mu);
    }
    free(c);
}

/* The loop's list of the connections it owns, each watched for bytes. */
static void loop_own(Conn *c) {
    Server *s = c->s;
    c->prev = NULL;
    c->next = s->owned;
    if (s->owned) s->owned->prev = c;
    s->owned = c;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
}

static void loop_disown(Conn *c) {
    Server *s = c->s;
    epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->prev) c->prev->next = c->next;
    else s->owned = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void loop_close(Conn *c) {
    loop_disown(c);
    conn_free(c);
}

/* From the loop, without blocking: answers c with an error (it fits in the
 * socket's empty send buffer), then lingers (CLOSING) until the client has
 * read it and closed, or LINGER_MS passed. status 503 is a refused
 * connection, not a request. */
static void loop_reject(Conn *c, int status, const char *why) {
    Server *s = c->s;
    HttpRequest none = {0};
    Exchange x = {.s = s, .fd = c->fd, .req = &none};
    double t0 = time_now_ms();
    routes_reply_error(&x, status, why, NULL);
    if (c->admitted) {
        routes_count_request(s, "other", status);
        log_exchange(s, &x, t0);
    }
    shutdown(c->fd, SHUT_WR);
    c->state = CONN_CLOSING;
    c->close_at = time_now_ms() + LINGER_MS;
}

/* ---- a worker: one whole request ---- */

static void loop_wake(Server *s) {
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
}

/* Answers c's request on a thread of its own (the handler may stream for
 * minutes), then gives c back to the loop, or closes it. */
static void *conn_serve(void *arg) {
    Conn *c = arg;
    Server *s = c->s;
    double t0 = time_now_ms();
    Exchange x = {.s = s, .fd = c->fd, .req = &c->req};
    x.keep_alive = c->req.keep_alive && !atomic_load(&s->stopping);
    const char *route = routes_dispatch(&x);
    routes_count_request(s, route, x.status);
    log_exchange(s, &x, t0);
    http_request_free(&c->req);
    bool back = false;
    if (x.keep_alive && !atomic_load(&s->stopping)) {
        set_blocking(c->fd, false);
        pthread_mutex_lock(&s->mu); /* the loop takes it, or has stopped taking any */
        back = s->loop_running;
        if (back) {
            c->next = s->handed_back;
            s->handed_back = c;
            loop_wake(s); /* under the lock: once it is released, c (and s) may be gone */
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (!back) {
        linger_close(c->fd);
        c->fd = -1;
        conn_free(c);
    }
    return NULL;
}

/* A whole request is in: a worker thread answers it. */
static void loop_hand_off(Conn *c, HttpRequest *req) {
    loop_disown(c);
    c->state = CONN_BUSY;
    c->req = *req;
    set_blocking(c->fd, true); /* the handler writes at the client's pace, up to --timeout (SO_SNDTIMEO) */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, conn_serve, c);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        set_blocking(c->fd, false);
        loop_own(c);
        loop_reject(c, 503, "the server cannot start a thread for this request");
    }
}

/* What c's bytes so far make: nothing yet, a request for a worker, or a bad one. */
static void loop_step(Conn *c) {
    HttpRequest req;
    char err[ERR_MAX];
    int rc = http_reader_next(&c->rd, &req, err);
    if (rc == 1) loop_hand_off(c, &req);
    else if (rc > 0) loop_reject(c, rc, err); /* the stream is out of step: answer and close */
    else if (http_reader_take_continue(&c->rd)) send(c->fd, HTTP_CONTINUE, strlen(HTTP_CONTINUE), MSG_NOSIGNAL);
}

/* c is readable: one read (level-triggered, so every connection gets its turn). */
static void loop_read(Conn *c) {
    if (c->state == CONN_CLOSING) {
        char sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0 || (c->drained += (size_t)n) > LINGER_MAX_BYTES) loop_close(c);
        return;
    }
    size_t room;
    char *at = http_reader_space(&c->rd, &room);
    ssize_t n = recv(c->fd, at, room, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) { /* the client closed (or reset): a request cut short gets no answer */
        loop_close(c);
        return;
    }
    http_reader_added(&c->rd, (size_t)n);
    loop_step(c);
}

static void loop_accept(Server *s) {
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) { /* out of descriptors: let some close first */
                epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL);
                s->accept_paused_until = time_now_ms() + SWEEP_MS;
            }
            return;
        }
        Conn *c = xcalloc(1, sizeof *c);
        *c = (Conn){.s = s, .fd = fd, .since = time_now_ms()};
        const void *ip = sa.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr
                                                  : (const void *)&((struct sockaddr_in *)&sa)->sin_addr;
        if (!inet_ntop(sa.ss_family, ip, c->addr, sizeof c->addr)) strcpy(c->addr, "?");
        http_reader_init(&c->rd, &s->cfg.http);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct timeval tv = {s->cfg.http.timeout_ms / 1000, (s->cfg.http.timeout_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        char why[200];
        c->admitted = admit(s, c->addr, why, sizeof why);
        loop_own(c);
        if (!c->admitted) loop_reject(c, 503, why);
    }
}

/* Takes back the connections workers have answered, and reads on (a
 * pipelined request may be held already). */
static void loop_take_back(Server *s) {
    uint64_t n;
    ssize_t r = read(s->wake_fd, &n, sizeof n);
    (void)r;
    pthread_mutex_lock(&s->mu);
    Conn *list = s->handed_back;
    s->handed_back = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        Conn *c = list;
        list = c->next;
        c->state = CONN_READING;
        c->since = time_now_ms();
        loop_own(c);
        loop_step(c);
    }
}

/* The deadlines, looked at every SWEEP_MS: a request's head must be in within
 * --header-timeout of the wait's start, the whole request within --timeout; an
 * idle connection closes at the header deadline without an answer. */
static void loop_sweep(Server *s) {
    double now = time_now_ms();
    int head_ms = s->cfg.header_timeout_ms < s->cfg.http.timeout_ms ? s->cfg.header_timeout_ms : s->cfg.http.timeout_ms;
    for (Conn *c = s->owned, *next; c; c = next) {
        next = c->next;
        char why[200];
        if (c->state == CONN_CLOSING) {
            if (now >= c->close_at) loop_close(c);
        } else if (!http_reader_has_head(&c->rd) && now - c->since >= head_ms) {
            if (!http_reader_started(&c->rd)) {
                loop_close(c);
                continue;
            }
            snprintf(why, sizeof why, "the request's head did not arrive within %.0f s (--header-timeout)", head_ms / 1000.0);
            loop_reject(c, 408, why);
        } else if (now - c->since >= s->cfg.http.timeout_ms) {
            snprintf(why, sizeof why, "the request did not arrive within the timeout of %.0f s",
                     s->cfg.http.timeout_ms / 1000.0);
            loop_reject(c, 408, why);
        }
    }
    if (s->accept_paused_until && now >= s->accept_paused_until) {
        s->accept_paused_until = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_fd};
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev);
    }
}

/* The event loop: one thread for every waiting connection, however many. */
static void *loop_main(void *arg) {
    Server *s = arg;
    struct epoll_event evs[64];
    double last_sweep = time_now_ms();
    while (!atomic_load(&s->stopping)) {
        int n = epoll_wait(s->epoll_fd, evs, 64, SWEEP_MS);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->listen_fd) loop_accept(s);
            else if (p == &s->wake_fd) loop_take_back(s);
            else loop_read(p);
        }
        if (time_now_ms() - last_sweep >= SWEEP_MS) {
            loop_sweep(s);
            last_sweep = time_now_ms();
        }
    }
    pthread_mutex_lock(&s->mu); /* stopping: workers close their connections from now on */
    s->loop_running = false;
    Conn *list = s->handed_back;
    s->handed_back = NULL;
    pthread_mutex_unlock(&s->mu);
    while (s->owned) loop_close(s->owned);
    while (list) {
        Conn *c = list;
        list = c->next;
        conn_free(c);
    }
    return NULL;
}

/* ---- listening, starting, stopping ------------------------------------------------------------------- */

static int listen_on(Server *s, char *err) {
    char port[8];
    if (split_bind(s->cfg.bind, s->host, sizeof s->host, port, err) != 0) return -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    int rc = getaddrinfo(s->host, port, &hints, &ai);
    if (rc != 0) {
        err_set(err, "cannot resolve '%s': %s", s->host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol), one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        err_set(err, "cannot listen on %s: %s", s->cfg.bind, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    s->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port : ((struct sockaddr_in *)&sa)->sin_port);
    s->listen_fd = fd;
    return 0;
}

static const double TTFT_BOUNDS[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double ITL_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

/* Every connection is a file descriptor: lift the soft limit to the hard one
 * (often 1024 soft, far more hard), and say so if --max-connections cannot fit. */
static void raise_fd_limit(const ServerConfig *c) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)c->max_connections + 64 > rl.rlim_cur)
        fprintf(stderr, "chat-server: note: %lu file descriptors (ulimit -n): fewer connections than --max-connections %d "
                        "can be open at once; the rest wait to be accepted\n", (unsigned long)rl.rlim_cur, c->max_connections);
}

static int loop_start(Server *s, char *err) {
    s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->epoll_fd < 0 || s->wake_fd < 0) {
        err_set(err, "cannot make the event loop: %s", strerror(errno));
        return -1;
    }
    int fl = fcntl(s->listen_fd, F_GETFL);
    fcntl(s->listen_fd, F_SETFL, fl | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_fd};
    epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev);
    ev.data.ptr = &s->wake_fd;
    epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->wake_fd, &ev);
    s->loop_running = true;
    if (pthread_create(&s->loop_thread, NULL, loop_main, s) != 0) {
        err_set(err, "cannot start the event loop's thread");
        return -1;
    }
    return 0;
}

static void server_free(Server *s) {
    if (s->listen_fd > 0) close(s->listen_fd);
    if (s->epoll_fd > 0) close(s->epoll_fd);
    if (s->wake_fd > 0) close(s->wake_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->conns_changed);
    free(s->clients);
    free(s);
}

Server *server_start(const ServerConfig *c, Engine *e, char *err) {
    Server *s = xcalloc(1, sizeof *s);
    s->cfg = *c;
    s->engine = e;
    s->started = (long)time(NULL);
    s->listen_fd = s->epoll_fd = s->wake_fd = -1;
    atomic_init(&s->stopping, false);
    atomic_init(&s->next_id, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->conns_changed, NULL);
    prom_histogram_init(&s->ttft, TTFT_BOUNDS, (int)(sizeof TTFT_BOUNDS / sizeof TTFT_BOUNDS[0]));
    prom_histogram_init(&s->itl, ITL_BOUNDS, (int)(sizeof ITL_BOUNDS / sizeof ITL_BOUNDS[0]));
    signal(SIGPIPE, SIG_IGN); /* writes to a gone client fail with EPIPE instead */
    raise_fd_limit(c);
    if (listen_on(s, err) != 0 || loop_start(s, err) != 0) {
        server_free(s);
        return NULL;
    }
    return s;
}

int server_port(const Server *s) { return s->port; }

void server_stop(Server *s) {
    atomic_store(&s->stopping, true);
    loop_wake(s);
    pthread_join(s->loop_thread, NULL); /* the loop closes the waiting connections */
    s->engine->shutdown(s->engine);     /* running requests end with 503 */
    pthread_mutex_lock(&s->mu);
    while (s->n_conns > 0) pthread_cond_wait(&s->conns_changed, &s->mu);
    pthread_mutex_unlock(&s->mu);
    server_free(s);
}

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    char c = (char)sig;
    ssize_t w = write(signal_pipe[1], &c, 1);
    (void)w;
}

int server_run(const ServerConfig *c, Engine *e, char *err) {
    Server *s = server_start(c, e, err);
    if (!s) return -1;
    if (pipe2(signal_pipe, O_CLOEXEC) != 0) {
        err_set(err, "cannot make a pipe: %s", strerror(errno));
        server_stop(s);
        return -1;
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    bool v6 = strchr(s->host, ':') != NULL;
    fprintf(stderr, "chat-server: listening on http://%s%s%s:%d (model %s, engine %s); Ctrl-C stops\n", v6 ? "[" : "",
            s->host, v6 ? "]" : "", s->port, c->model_name, e->name);
    char sig = 0;
    while (read(signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {}
    EngineStats st = {0};
    e->stats(e, &st);
    fprintf(stderr, "chat-server: %s: stopping (no new connections; %d running and %d waiting requests cancelled)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", st.running, st.waiting);
    server_stop(s);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
    fprintf(stderr, "chat-server: stopped\n");
    return 0;
}
