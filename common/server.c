/* server.c: the listener, one thread per connection, the routes, /metrics,
 * and stopping on a signal (server.h). A connection thread reads requests
 * one after another (keep-alive) and answers each; a generation request goes
 * to the engine, and the thread relays what the engine produces to the
 * client, watching for the client to go away meanwhile. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP, accept4, pipe2, memmem */
#endif
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "openai.h"
#include "prometheus.h"

#define WATCH_MS 100            /* how often a waiting request looks at its client */
#define LINGER_MS 500           /* how long a closing connection drains what the client still sends */
#define MAX_COUNTS 64           /* distinct (route, status) pairs counted */

typedef struct {
    const char *route;
    int status;
    uint64_t n;
} RequestCount;

struct Server {
    ServerConfig cfg;
    Engine *engine;
    int listen_fd, port;
    char host[64];
    long started;                     /* Unix seconds */
    pthread_t accept_thread;
    atomic_bool stopping;
    atomic_uint next_id;
    pthread_mutex_t mu;               /* guards what follows */
    pthread_cond_t conns_changed;
    int n_conns;
    uint64_t refused;                 /* connections turned away: too many */
    RequestCount counts[MAX_COUNTS];
    int n_counts;
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    PromHistogram ttft, itl;
};

/* One request and its answer, as a connection thread handles it. */
typedef struct {
    Server *s;
    int fd;
    HttpRequest *req;
    bool keep_alive;       /* the connection stays open after the answer */
    bool gone;             /* the client went away */
    int status;            /* what was answered (499: the client left first) */
    char note[ERR_MAX + 64]; /* extra for the log line */
} Exchange;

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

/* ---- metrics ------------------------------------------------------------------------------ */

static void count_request(Server *s, const char *route, int status) {
    pthread_mutex_lock(&s->mu);
    int i = 0;
    while (i < s->n_counts && !(s->counts[i].status == status && strcmp(s->counts[i].route, route) == 0)) i++;
    if (i == s->n_counts && i < MAX_COUNTS) s->counts[s->n_counts++] = (RequestCount){route, status, 0};
    if (i < s->n_counts) s->counts[i].n++;
    pthread_mutex_unlock(&s->mu);
}

static void count_generation(Server *s, const GenResult *res) {
    pthread_mutex_lock(&s->mu);
    s->prompt_tokens += (uint64_t)res->n_prompt;
    s->cached_tokens += (uint64_t)res->n_cached;
    s->generated_tokens += (uint64_t)res->n_generated;
    if (res->t_first) prom_histogram_observe(&s->ttft, (res->t_first - res->t_submit) / 1000);
    for (int i = 1; i < res->n_generated; i++)
        prom_histogram_observe(&s->itl, (res->token_times[i] - res->token_times[i - 1]) / 1000);
    pthread_mutex_unlock(&s->mu);
}

static void metrics_text(Server *s, Buf *out) {
    EngineStats st = {0};
    s->engine->stats(s->engine, &st);
    pthread_mutex_lock(&s->mu);
    prom_header(out, "chat_server_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (int i = 0; i < s->n_counts; i++) {
        char labels[128];
        snprintf(labels, sizeof labels, "route=\"%s\",status=\"%d\"", s->counts[i].route, s->counts[i].status);
        prom_sample(out, "chat_server_requests_total", labels, (double)s->counts[i].n);
    }
    prom_header(out, "chat_server_requests_running", "gauge", "Generation requests the engine is running.");
    prom_sample(out, "chat_server_requests_running", NULL, st.running);
    prom_header(out, "chat_server_requests_waiting", "gauge", "Generation requests waiting in the engine's queue.");
    prom_sample(out, "chat_server_requests_waiting", NULL, st.waiting);
    prom_header(out, "chat_server_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    prom_sample(out, "chat_server_prompt_tokens_total", NULL, (double)s->prompt_tokens);
    prom_header(out, "chat_server_prompt_cached_tokens_total", "counter", "Prompt tokens taken from a prefix cache.");
    prom_sample(out, "chat_server_prompt_cached_tokens_total", NULL, (double)s->cached_tokens);
    prom_header(out, "chat_server_generated_tokens_total", "counter", "Tokens generated for finished requests.");
    prom_sample(out, "chat_server_generated_tokens_total", NULL, (double)s->generated_tokens);
    prom_histogram(out, "chat_server_time_to_first_token_seconds", "From a request's arrival to its first token.", &s->ttft);
    prom_histogram(out, "chat_server_inter_token_latency_seconds", "Between consecutive tokens of a request.", &s->itl);
    prom_header(out, "chat_server_kv_blocks_used", "gauge", "KV cache blocks in use.");
    prom_sample(out, "chat_server_kv_blocks_used", NULL, st.kv_blocks_used);
    prom_header(out, "chat_server_kv_blocks_total", "gauge", "KV cache blocks in the pool.");
    prom_sample(out, "chat_server_kv_blocks_total", NULL, st.kv_blocks_total);
    prom_header(out, "chat_server_connections_open", "gauge", "Client connections open now.");
    prom_sample(out, "chat_server_connections_open", NULL, s->n_conns);
    prom_header(out, "chat_server_connections_refused_total", "counter", "Connections refused past --max-connections.");
    prom_sample(out, "chat_server_connections_refused_total", NULL, (double)s->refused);
    pthread_mutex_unlock(&s->mu);
}

/* ---- answering ------------------------------------------------------------------------------- */

static void reply(Exchange *x, int status, const char *content_type, const char *body, size_t len, const char *extra) {
    x->status = status;
    if (http_send(x->fd, status, content_type, body, len, x->keep_alive, extra) != 0) x->keep_alive = false;
}

static void reply_json(Exchange *x, int status, const Buf *body) {
    reply(x, status, "application/json", body->data ? body->data : "", body->len, NULL);
}

static void reply_error_with(Exchange *x, int status, const char *message, const char *param, const char *extra) {
    Buf b = {0};
    oai_error_json(&b, status, message, param);
    if (status >= 500 || status == 408 || status == 413 || status == 414 || status == 431) x->keep_alive = false;
    reply(x, status, "application/json", b.data, b.len, extra);
    snprintf(x->note, sizeof x->note, "%.500s", message);
    buf_free(&b);
}

static void reply_error(Exchange *x, int status, const char *message, const char *param) {
    const char *extra = status == 503 || status == 429 ? "Retry-After: 1\r\n" : status == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL;
    reply_error_with(x, status, message, param, extra);
}

/* Has the client closed its side (or reset)? Pipelined bytes do not count. */
static bool client_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* The next piece of r, watching the client meanwhile: cancels r once if the
 * client goes away. 1: a piece; -1: r has ended. */
static int next_piece(Exchange *x, GenRequest *r, GenPiece *p, double *last_watch) {
    for (;;) {
        int rc = gen_next(r, p, WATCH_MS / 2);
        double now = time_now_ms();
        if (!x->gone && now - *last_watch >= WATCH_MS) {
            *last_watch = now;
            if (client_gone(x->fd)) {
                x->gone = true;
                gen_cancel(r);
            }
        }
        if (rc != 0) return rc;
    }
}

static void mark_gone(Exchange *x, GenRequest *r) {
    if (!x->gone) gen_cancel(r);
    x->gone = true;
}

/* ---- generation routes ------------------------------------------------------------------------- */

/* The prompt's tokens: a chat rendered with Qwen3's template, or a completion's text or ids. */
static int prompt_tokens(const Server *s, const OaiRequest *q, int32_t **ids, int *n, char *err) {
    if (q->kind == OAI_COMPLETION && q->prompt_ids) {
        *n = q->n_prompt_ids;
        *ids = xmalloc(sizeof(int32_t) * (size_t)(*n > 0 ? *n : 1));
        memcpy(*ids, q->prompt_ids, sizeof(int32_t) * (size_t)*n);
        return 0;
    }
    char *chat = q->kind == OAI_CHAT ? chat_render(q->messages, q->n_messages, true, q->enable_thinking) : NULL;
    const char *text = chat ? chat : q->prompt;
    size_t len = chat ? strlen(chat) : q->prompt_len;
    int rc = tokenizer_encode(s->cfg.tok, text, len, true, ids, n, err);
    free(chat);
    return rc;
}

/* 0 if the prompt and the tokens asked for fit the context, else -1 with err naming the limit. */
static int check_context(const Server *s, int n_prompt, int max_tokens, char *err) {
    int ctx = s->cfg.ctx;
    if (n_prompt == 0) err_set(err, "the prompt is empty (0 tokens): there is nothing to continue");
    else if (n_prompt >= ctx)
        err_set(err, "the prompt has %d tokens but the context holds %d: no room to generate", n_prompt, ctx);
    else if (max_tokens > 0 && (long)n_prompt + max_tokens > ctx)
        err_set(err, "the prompt has %d tokens and max_tokens asks for %d more, but the context holds %d tokens in all",
                n_prompt, max_tokens, ctx);
    else return 0;
    return -1;
}

/* r has ended: counts it (before the client can see the end) and notes a
 * client that left. NULL when there is no one left to answer. */
static const GenResult *request_ended(Exchange *x, GenRequest *r) {
    const GenResult *res = gen_result(r);
    count_generation(x->s, res);
    if (!x->gone && !res->cancelled) return res;
    x->status = 499;
    x->keep_alive = false;
    return NULL;
}

static void write_event(Exchange *x, HttpStream *hs, GenRequest *r, const char *json, size_t len) {
    Buf ev = {0};
    sse_append_event(&ev, json, len);
    if (!x->gone && http_stream_write(hs, ev.data, ev.len) != 0) mark_gone(x, r);
    buf_free(&ev);
}

static void begin_stream(Exchange *x, HttpStream *hs, GenRequest *r, const OaiRequest *q, const OaiReply *a) {
    if (x->req->minor == 0) x->keep_alive = false;
    x->status = 200;
    if (http_stream_begin(hs, x->fd, x->req->minor, 200, "text/event-stream", x->keep_alive,
                          "Cache-Control: no-cache\r\n") != 0) {
        mark_gone(x, r);
        return;
    }
    if (q->kind != OAI_CHAT) return;
    Buf b = {0};
    oai_chunk_json(&b, q, a, "assistant", "", 0, NULL, 0, NULL);
    write_event(x, hs, r, b.data, b.len);
    buf_free(&b);
}

/* The end of a stream: the chunk with finish_reason (or an error event),
 * the usage chunk if asked, and [DONE]. */
static void end_stream(Exchange *x, HttpStream *hs, GenRequest *r, const OaiRequest *q, const OaiReply *a,
                       const GenResult *res) {
    Buf b = {0};
    if (res->status) {
        oai_error_json(&b, res->status, res->message, NULL);
        snprintf(x->note, sizeof x->note, "failed mid-stream: %.400s", res->message);
    } else {
        oai_chunk_json(&b, q, a, NULL, NULL, 0, NULL, 0, res->finish_reason);
    }
    write_event(x, hs, r, b.data, b.len);
    if (!res->status && q->include_usage) {
        b.len = 0;
        oai_usage_chunk_json(&b, q, a, res);
        write_event(x, hs, r, b.data, b.len);
    }
    if (!x->gone && (http_stream_write(hs, "data: [DONE]\n\n", 14) != 0 || http_stream_end(hs) != 0)) x->gone = true;
    if (x->gone || !hs->chunked) x->keep_alive = false;
    buf_free(&b);
}

/* Streams r's pieces as SSE chunks, ending with finish_reason, usage if asked, and [DONE].
 * The head is sent with the first piece, so a request that fails before it gets a plain error. */
static void stream_reply(Exchange *x, GenRequest *r, const OaiRequest *q, const OaiReply *a) {
    HttpStream hs = {0};
    bool started = false;
    double watch = time_now_ms();
    GenPiece p;
    Buf b = {0};
    while (next_piece(x, r, &p, &watch) == 1) {
        if (!started && !x->gone) {
            begin_stream(x, &hs, r, q, a);
            started = true;
        }
        b.len = 0;
        oai_chunk_json(&b, q, a, NULL, p.text.data ? p.text.data : "", p.text.len, p.lp, p.n_lp, NULL);
        write_event(x, &hs, r, b.data, b.len);
        gen_piece_free(&p);
    }
    buf_free(&b);
    const GenResult *res = request_ended(x, r);
    if (!res) return;
    if (!started && res->status) {
        reply_error(x, res->status, res->message, NULL);
        return;
    }
    if (!started) begin_stream(x, &hs, r, q, a);
    end_stream(x, &hs, r, q, a, res);
}

/* Collects r's whole reply, then answers with one JSON response. */
static void whole_reply(Exchange *x, GenRequest *r, const OaiRequest *q, const OaiReply *a) {
    Buf text = {0};
    buf_append(&text, "", 0);
    GenLogprob *lps = NULL;
    int n_lp = 0, cap = 0;
    double watch = time_now_ms();
    GenPiece p;
    while (next_piece(x, r, &p, &watch) == 1) {
        buf_append(&text, p.text.data ? p.text.data : "", p.text.len);
        for (int i = 0; i < p.n_lp; i++) {
            if (n_lp == cap) lps = xrealloc(lps, sizeof *lps * (size_t)(cap = cap ? 2 * cap : 64));
            lps[n_lp++] = p.lp[i];
        }
        gen_piece_free(&p);
    }
    const GenResult *res = request_ended(x, r);
    if (res && res->status) {
        reply_error(x, res->status, res->message, NULL);
    } else if (res) {
        Buf b = {0};
        oai_response_json(&b, q, a, text.data, text.len, lps, n_lp, res);
        reply_json(x, 200, &b);
        buf_free(&b);
    }
    buf_free(&text);
    free(lps);
}

static uint64_t fresh_seed(Server *s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)atomic_fetch_add(&s->next_id, 0) << 32);
}

static void route_generate(Exchange *x, OaiKind kind) {
    Server *s = x->s;
    OaiRequest q;
    char err[ERR_MAX], param[64];
    if (oai_parse_request(&q, kind, x->req->body, x->req->body_len, s->cfg.vocab_size, err, param) != 0) {
        reply_error(x, 400, err, param);
        oai_request_free(&q);
        return;
    }
    int32_t *ids = NULL;
    int n = 0;
    if (prompt_tokens(s, &q, &ids, &n, err) != 0 || check_context(s, n, q.max_tokens, err) != 0) {
        reply_error(x, 400, err, q.kind == OAI_CHAT ? "messages" : "prompt");
        free(ids);
        oai_request_free(&q);
        return;
    }
    GenInput in = {.prompt = ids, .n_prompt = n, .max_tokens = q.max_tokens, .sampling = q.sampling,
                   .top_logprobs = q.top_logprobs};
    if (!q.seeded) in.sampling.seed = fresh_seed(s);
    snprintf(in.id, sizeof in.id, "%s-%08lx%08x", kind == OAI_CHAT ? "chatcmpl" : "cmpl", (unsigned long)s->started,
             atomic_fetch_add(&s->next_id, 1));
    GenRequest *r = gen_request_create(&in, s->cfg.tok, q.stop, q.n_stop);
    free(ids);
    int rc = s->engine->submit(s->engine, r, err);
    if (rc != 0) {
        reply_error(x, rc, err, NULL);
    } else {
        OaiReply a = {.id = in.id, .created = (long)time(NULL), .model = s->cfg.model_name, .tok = s->cfg.tok};
        if (q.stream) stream_reply(x, r, &q, &a);
        else whole_reply(x, r, &q, &a);
        const GenResult *res = gen_result(r);
        if (!x->note[0])
            snprintf(x->note, sizeof x->note, "%s prompt %d (cached %d), generated %d, %s%s", in.id, res->n_prompt,
                     res->n_cached, res->n_generated, res->finish_reason ? res->finish_reason : "-",
                     x->gone ? ", client gone: cancelled" : "");
    }
    gen_request_free(r);
    oai_request_free(&q);
}

static void route_chat(Exchange *x) { route_generate(x, OAI_CHAT); }
static void route_completions(Exchange *x) { route_generate(x, OAI_COMPLETION); }

/* ---- other routes ------------------------------------------------------------------------------- */

static void route_health(Exchange *x) {
    bool stopping = atomic_load(&x->s->stopping);
    const char *body = stopping ? "{\"status\":\"shutting down\"}" : "{\"status\":\"ok\"}";
    reply(x, stopping ? 503 : 200, "application/json", body, strlen(body), NULL);
}

static void route_models(Exchange *x) {
    Server *s = x->s;
    Buf b = {0};
    buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    json_append_string(&b, s->cfg.model_name, strlen(s->cfg.model_name));
    buf_printf(&b, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"local\",\"meta\":{\"n_ctx\":%d,\"n_vocab\":%d}}]}",
               s->started, s->cfg.ctx, s->cfg.vocab_size);
    reply_json(x, 200, &b);
    buf_free(&b);
}

static void route_metrics(Exchange *x) {
    Buf b = {0};
    metrics_text(x->s, &b);
    reply(x, 200, "text/plain; version=0.0.4", b.data, b.len, NULL);
    buf_free(&b);
}

static void route_debug(Exchange *x, const char *view) {
    Buf b = {0};
    if (x->s->engine->debug_json(x->s->engine, view, &b) == 0) {
        reply_json(x, 200, &b);
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "the %s engine has no '%s' view", x->s->engine->name, view);
        reply_error(x, 404, msg, NULL);
    }
    buf_free(&b);
}

static void route_kv(Exchange *x) { route_debug(x, "kv"); }
static void route_slots(Exchange *x) { route_debug(x, "slots"); }

typedef struct {
    const char *path;
    const char *method;
    void (*fn)(Exchange *x);
    bool open;  /* answered without the API key */
} Route;

static const Route ROUTES[] = {
    {"/health", "GET", route_health, true},
    {"/v1/models", "GET", route_models, false},
    {"/v1/chat/completions", "POST", route_chat, false},
    {"/v1/completions", "POST", route_completions, false},
    {"/metrics", "GET", route_metrics, false},
    {"/v1/kv", "GET", route_kv, false},
    {"/v1/slots", "GET", route_slots, false},
};
#define N_ROUTES ((int)(sizeof ROUTES / sizeof ROUTES[0]))

/* Compares the whole key in time independent of where it differs. */
static bool authorized(const Server *s, const HttpRequest *req) {
    const char *key = s->cfg.api_key;
    if (!key) return true;
    const char *h = http_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    const char *v = h + 7;
    while (*v == ' ') v++;
    size_t n = strlen(key), m = strlen(v);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? v[i] : 0);
    return diff == 0;
}

/* Answers one request; returns the route's name for the counters. */
static const char *dispatch(Exchange *x) {
    const HttpRequest *req = x->req;
    const Route *route = NULL;
    for (int i = 0; i < N_ROUTES; i++)
        if (strcmp(req->path, ROUTES[i].path) == 0) route = &ROUTES[i];
    if (!(route && route->open) && !authorized(x->s, req)) {
        reply_error(x, 401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'", NULL);
        return route ? route->path : "other";
    }
    if (!route) {
        char msg[320];
        snprintf(msg, sizeof msg, "no route %s %.100s (see /v1/models, /v1/chat/completions, /v1/completions, /health, /metrics)",
                 req->method, req->path);
        reply_error(x, 404, msg, NULL);
        return "other";
    }
    if (strcmp(req->method, route->method) != 0) {
        char msg[160], allow[64];
        snprintf(msg, sizeof msg, "%s is not allowed on %s: use %s", req->method, route->path, route->method);
        snprintf(allow, sizeof allow, "Allow: %s\r\n", route->method);
        reply_error_with(x, 405, msg, NULL, allow);
        return route->path;
    }
    route->fn(x);
    return route->path;
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
            reply_error(&x, rc, err, NULL);
            count_request(s, "other", rc);
            log_exchange(s, &x, t0);
            break;
        }
        x.keep_alive = req.keep_alive && !atomic_load(&s->stopping);
        const char *route = dispatch(&x);
        count_request(s, route, x.status);
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
        if (poll(&p, 1, WATCH_MS) <= 0) continue;
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
