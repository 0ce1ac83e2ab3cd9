/* server_internal.h: what server.c (the listener and the connections) and
 * routes.c (what each request gets) share. Not part of the interface:
 * chapters and engines use server.h. */
#ifndef SERVER_INTERNAL_H
#define SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "prometheus.h"
#include "server.h"

#define MAX_COUNTS 64           /* distinct (route, status) pairs counted */

typedef struct {
    const char *route;
    int status;
    uint64_t n;
} RequestCount;

typedef struct Conn Conn;

/* Open connections from one client address (--max-connections-per-client). */
typedef struct {
    char addr[48];                    /* numeric, as inet_ntop writes it */
    int n;
} ClientCount;

struct Server {
    ServerConfig cfg;
    Engine *engine;
    int listen_fd, port;
    char host[64];
    long started;                     /* Unix seconds */
    pthread_t loop_thread;            /* the event loop: accepts, reads, times out (server.c) */
    int epoll_fd;
    int wake_fd;                      /* an eventfd: wakes the loop (a connection handed back, stopping) */
    Conn *owned;                      /* the connections the loop watches (its thread only) */
    double accept_paused_until;       /* out of file descriptors: accept again after this (loop only) */
    atomic_bool stopping;
    atomic_uint next_id;
    pthread_mutex_t mu;               /* guards what follows */
    pthread_cond_t conns_changed;
    bool loop_running;                /* handed_back is still taken by the loop */
    Conn *handed_back;                /* keep-alive connections whose answer is written, for the loop */
    int n_conns;                      /* admitted connections, waiting or answered */
    ClientCount *clients;             /* [n_clients] addresses with open connections */
    int n_clients, cap_clients;
    uint64_t refused;                 /* connections turned away: too many (in all, or from one address) */
    RequestCount counts[MAX_COUNTS];
    int n_counts;
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    PromHistogram ttft, itl;
};

/* One request and its answer, as a worker thread (or, for a bad request,
 * the event loop) handles it. */
typedef struct {
    Server *s;
    int fd;
    HttpRequest *req;
    bool keep_alive;       /* the connection stays open after the answer */
    bool gone;             /* the client went away */
    int status;            /* what was answered (499: the client left first) */
    char note[ERR_MAX + 64]; /* extra for the log line */
} Exchange;

/* Answers x->req (routes.c); returns the route's name for the counters. */
const char *routes_dispatch(Exchange *x);
/* An OpenAI error body with its status (and Retry-After or WWW-Authenticate where they belong). */
void routes_reply_error(Exchange *x, int status, const char *message, const char *param);
/* One more request answered on route with status, for /metrics. */
void routes_count_request(Server *s, const char *route, int status);

#endif
