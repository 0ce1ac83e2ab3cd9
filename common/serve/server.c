/* server.c: the listener, one thread per connection, and stopping on a
 * signal (server.h). A connection thread reads requests one after another
 * (keep-alive) and has routes.c answer each; past --max-connections a new
 * connection gets 503 at once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, pipe2 */
#endif
#include "server.h"

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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "openai.h"
#include "server_internal.h"

#define ACCEPT_POLL_MS 100      /* how often the accept loop looks at the stop flag */
#define LINGER_MS 500           /* how long a closing connection drains what the client still sends */

/* ---- configuration and flags ------------------------------------------------------------ */

void server_config_default(ServerConfig *c) {
    memset(c, 0, sizeof *c);
    c->bind = "127.0.0.1:8080";
    c->max_connections = 64;
    c->http = http_limits_default();
    c->model_name = "model";
}

void server_flags_usage(FILE *out) {
    fprintf(out, "  --bind HOST:PORT       where to listen (default 127.0.0.1:8080; port 0: any free port)\n");
    fprintf(out, "  --api-key KEY          require 'Authorization: Bearer KEY' on every route but /health\n");
    fprintf(out, "  --max-connections N    open connections at once; more get 503 and are closed (default 64)\n");
    fprintf(out, "  --timeout SECONDS      a request must arrive whole within it, idle connections close\n");
    fprintf(out, "                         after it, and a client that stops reading is dropped (default 30)\n");
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
    static const char *const with_value[] = {"--bind", "--api-key", "--max-connections", "--timeout", "--max-body", "--model-name"};
    if (strcmp(a, "--quiet") == 0) {
        c->quiet = true;
        return 1;
    }
    if (strcmp(a, "--parse-special-in-messages") == 0) {
        c->parse_special_in_messages = true;
        return 1;
    }
    int k = -1;
    for (int j = 0; j < 6; j++)
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
    }
    return 1;
}
/* ---- connections ----------------------------------------------------------------------------------- */

/* Closes after letting the client read the answer: stop writing, drain what
 * it still sends for a moment (closing with unread bytes would reset the
 * connection and could destroy the answer in flight), then close. */
static void linger_close(int fd) {
    shutdown(fd, SHUT_WR);
    double end = time_now_ms() + LINGER_MS;
    char sink[4096];
    for (size_t total = 0; total < (1u << 20);) {
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

typedef struct {
    Server *s;
    int fd;
} Conn;

static void *conn_main(void *arg) {
    Conn *c = arg;
    Server *s = c->s;
    int fd = c->fd, one = 1;
    free(c);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {s->cfg.http.timeout_ms / 1000, (s->cfg.http.timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    HttpConn hc;
    http_conn_init(&hc, fd, &s->cfg.http, &s->stopping);
    for (;;) {
        HttpRequest req;
        char err[ERR_MAX];
        int rc = http_read_request(&hc, &req, err);
        if (rc < 0) break;
        double t0 = time_now_ms();
        Exchange x = {.s = s, .fd = fd, .req = &req};
        if (rc > 0) { /* a bad request: answer and close, the stream is out of step */
            routes_reply_error(&x, rc, err, NULL);
            routes_count_request(s, "other", rc);
            log_exchange(s, &x, t0);
            break;
        }
        x.keep_alive = req.keep_alive && !atomic_load(&s->stopping);
        const char *route = routes_dispatch(&x);
        routes_count_request(s, route, x.status);
        log_exchange(s, &x, t0);
        http_request_free(&req);
        if (!x.keep_alive || atomic_load(&s->stopping)) break;
    }
    http_conn_free(&hc);
    linger_close(fd);
    pthread_mutex_lock(&s->mu);
    s->n_conns--;
    pthread_cond_broadcast(&s->conns_changed);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Past --max-connections: a 503 and close, without a thread. */
static void refuse(Server *s, int fd, const char *why) {
    Buf b = {0};
    oai_error_json(&b, 503, why, NULL);
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    http_send(fd, 503, "application/json", b.data, b.len, false, "Retry-After: 1\r\n");
    buf_free(&b);
    linger_close(fd);
    pthread_mutex_lock(&s->mu);
    s->refused++;
    pthread_mutex_unlock(&s->mu);
}

static void *accept_main(void *arg) {
    Server *s = arg;
    while (!atomic_load(&s->stopping)) {
        struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
        if (poll(&p, 1, ACCEPT_POLL_MS) <= 0) continue;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) usleep(10000); /* out of descriptors: let some close */
            continue;
        }
        pthread_mutex_lock(&s->mu);
        bool full = s->n_conns >= s->cfg.max_connections;
        if (!full) s->n_conns++;
        pthread_mutex_unlock(&s->mu);
        if (full) {
            char why[128];
            snprintf(why, sizeof why, "too many connections: the server takes %d at once (--max-connections)",
                     s->cfg.max_connections);
            refuse(s, fd, why);
            continue;
        }
        Conn *c = xmalloc(sizeof *c);
        *c = (Conn){s, fd};
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, conn_main, c);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            free(c);
            pthread_mutex_lock(&s->mu);
            s->n_conns--;
            pthread_mutex_unlock(&s->mu);
            refuse(s, fd, "the server cannot start a thread for this connection");
        }
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

Server *server_start(const ServerConfig *c, Engine *e, char *err) {
    Server *s = xcalloc(1, sizeof *s);
    s->cfg = *c;
    s->engine = e;
    s->started = (long)time(NULL);
    atomic_init(&s->stopping, false);
    atomic_init(&s->next_id, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->conns_changed, NULL);
    prom_histogram_init(&s->ttft, TTFT_BOUNDS, (int)(sizeof TTFT_BOUNDS / sizeof TTFT_BOUNDS[0]));
    prom_histogram_init(&s->itl, ITL_BOUNDS, (int)(sizeof ITL_BOUNDS / sizeof ITL_BOUNDS[0]));
    signal(SIGPIPE, SIG_IGN); /* writes to a gone client fail with EPIPE instead */
    if (listen_on(s, err) != 0 || pthread_create(&s->accept_thread, NULL, accept_main, s) != 0) {
        if (s->listen_fd > 0) close(s->listen_fd);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->conns_changed);
        free(s);
        return NULL;
    }
    return s;
}

int server_port(const Server *s) { return s->port; }

void server_stop(Server *s) {
    atomic_store(&s->stopping, true);
    pthread_join(s->accept_thread, NULL);
    close(s->listen_fd);
    s->engine->shutdown(s->engine);
    pthread_mutex_lock(&s->mu);
    while (s->n_conns > 0) pthread_cond_wait(&s->conns_changed, &s->mu);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->conns_changed);
    free(s);
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
