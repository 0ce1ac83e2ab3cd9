/* routes.c: what each request gets (server.h): the OpenAI routes, which
 * hand generation to the engine and relay its pieces to the client (whole,
 * or streamed as Server-Sent Events) while watching for the client to go
 * away; the other routes; API-key checks; the counters behind /metrics. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP */
#endif
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "openai.h"
#include "server_internal.h"

#define WATCH_MS 100            /* how often a waiting request looks at its client */

/* ---- metrics ------------------------------------------------------------------------------ */

void routes_count_request(Server *s, const char *route, int status) {
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
    if (s->engine->metrics) s->engine->metrics(s->engine, out);
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

void routes_reply_error(Exchange *x, int status, const char *message, const char *param) {
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
        routes_reply_error(x, res->status, res->message, NULL);
        return;
    }
    if (!started) begin_stream(x, &hs, r, q, a);
    end_stream(x, &hs, r, q, a, res);
}

/* Adds a piece to a reply being collected: its text, and its logprobs to lps[0..*n_lp). */
static void collect_piece(const GenPiece *p, Buf *text, GenLogprob **lps, int *n_lp, int *cap) {
    buf_append(text, p->text.data ? p->text.data : "", p->text.len);
    for (int i = 0; i < p->n_lp; i++) {
        if (*n_lp == *cap) *lps = xrealloc(*lps, sizeof **lps * (size_t)(*cap = *cap ? 2 * *cap : 64));
        (*lps)[(*n_lp)++] = p->lp[i];
    }
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
        collect_piece(&p, &text, &lps, &n_lp, &cap);
        gen_piece_free(&p);
    }
    const GenResult *res = request_ended(x, r);
    if (res && res->status) {
        routes_reply_error(x, res->status, res->message, NULL);
    } else if (res) {
        Buf b = {0};
        oai_response_json(&b, q, a, text.data, text.len, lps, n_lp, res);
        reply_json(x, 200, &b);
        buf_free(&b);
    }
    buf_free(&text);
    free(lps);
}

/* ---- n > 1: the choices of one request (gen_request_group) ---------------------------------- */

/* The client went away: every choice stops. */
static void cancel_choices(const Exchange *x, GenRequest **rs, int n) {
    for (int i = 0; x->gone && i < n; i++) gen_cancel(rs[i]);
}

/* Every choice has ended: counts them (the prompt once) into *usage, the
 * lead's result with every choice's tokens. NULL when no one is left to answer. */
static const GenResult *choices_ended(Exchange *x, GenRequest **rs, int n, GenResult *usage) {
    *usage = *gen_result(rs[0]);
    for (int i = 1; i < n; i++) {
        GenResult one = *gen_result(rs[i]);
        one.n_prompt = one.n_cached = 0;
        count_generation(x->s, &one);
        usage->n_generated += one.n_generated;
        if (one.t_last > usage->t_last) usage->t_last = one.t_last;
        if (one.status && !usage->status) usage->status = one.status, memcpy(usage->message, one.message, ERR_MAX);
    }
    return request_ended(x, rs[0]) ? usage : NULL;
}

static void whole_choices(Exchange *x, GenRequest **rs, int n, const OaiRequest *q, const OaiReply *a) {
    Buf text[OAI_MAX_CHOICES] = {{0}};
    GenLogprob *lps[OAI_MAX_CHOICES] = {0};
    int n_lp[OAI_MAX_CHOICES] = {0}, cap[OAI_MAX_CHOICES] = {0};
    double watch = time_now_ms();
    for (int i = 0; i < n; i++) {
        GenPiece p;
        buf_append(&text[i], "", 0);
        while (next_piece(x, rs[i], &p, &watch) == 1) {
            collect_piece(&p, &text[i], &lps[i], &n_lp[i], &cap[i]);
            gen_piece_free(&p);
            cancel_choices(x, rs, n);
        }
        cancel_choices(x, rs, n);
    }
    GenResult usage;
    const GenResult *res = choices_ended(x, rs, n, &usage);
    if (res && res->status) {
        routes_reply_error(x, res->status, res->message, NULL);
    } else if (res) {
        OaiChoice c[OAI_MAX_CHOICES];
        for (int i = 0; i < n; i++) c[i] = (OaiChoice){text[i].data, text[i].len, lps[i], n_lp[i], gen_result(rs[i])->finish_reason};
        Buf b = {0};
        oai_response_choices_json(&b, q, a, c, n, res);
        reply_json(x, 200, &b);
        buf_free(&b);
    }
    for (int i = 0; i < n; i++) buf_free(&text[i]), free(lps[i]);
}

/* Streams the choices' pieces as they come, each chunk with its choice's
 * index; a choice's last chunk (finish_reason) when it ends, the lead's
 * with the usage and [DONE] at the end. */
static void stream_choices(Exchange *x, GenRequest **rs, int n, const OaiRequest *q, const OaiReply *a) {
    HttpStream hs = {0};
    bool started = false, ended[OAI_MAX_CHOICES] = {0};
    int left = n;
    double watch = time_now_ms();
    Buf b = {0};
    OaiReply ai = *a;
    while (left > 0) {
        int waited = 0;
        for (int i = 0; i < n; i++) {
            if (ended[i]) continue;
            GenPiece p;
            int rc = gen_next(rs[i], &p, waited++ ? 0 : WATCH_MS / 10); /* wait on the first live one only */
            if (rc == 0) continue;
            if (!started && !x->gone) {
                begin_stream(x, &hs, rs[0], q, a);
                for (int k = 1; k < n && q->kind == OAI_CHAT; k++) {
                    ai.index = k, b.len = 0;
                    oai_chunk_json(&b, q, &ai, "assistant", "", 0, NULL, 0, NULL);
                    write_event(x, &hs, rs[k], b.data, b.len);
                }
                started = true;
            }
            ai.index = i, b.len = 0;
            if (rc == 1) {
                oai_chunk_json(&b, q, &ai, NULL, p.text.data ? p.text.data : "", p.text.len, p.lp, p.n_lp, NULL);
                gen_piece_free(&p);
            } else {
                ended[i] = true, left--;
                if (i > 0 && !gen_result(rs[i])->status)
                    oai_chunk_json(&b, q, &ai, NULL, NULL, 0, NULL, 0, gen_result(rs[i])->finish_reason);
            }
            if (b.len) write_event(x, &hs, rs[i], b.data, b.len);
        }
        double now = time_now_ms();
        if (!x->gone && now - watch >= WATCH_MS) {
            watch = now;
            x->gone = client_gone(x->fd);
        }
        cancel_choices(x, rs, n);
    }
    buf_free(&b);
    GenResult usage;
    const GenResult *res = choices_ended(x, rs, n, &usage);
    if (!res) return;
    if (!started && res->status) {
        routes_reply_error(x, res->status, res->message, NULL);
        return;
    }
    if (!started) begin_stream(x, &hs, rs[0], q, a);
    end_stream(x, &hs, rs[0], q, a, res);
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
        routes_reply_error(x, 400, err, param);
        oai_request_free(&q);
        return;
    }
    int32_t *ids = NULL;
    int n = 0;
    if (prompt_tokens(s, &q, &ids, &n, err) != 0 || check_context(s, n, q.max_tokens, err) != 0) {
        routes_reply_error(x, 400, err, q.kind == OAI_CHAT ? "messages" : "prompt");
        free(ids);
        oai_request_free(&q);
        return;
    }
    GenInput in = {.prompt = ids, .n_prompt = n, .max_tokens = q.max_tokens, .sampling = q.sampling,
                   .top_logprobs = q.top_logprobs, .ignore_eos = q.ignore_eos, .grammar = q.grammar,
                   .bias_ids = q.bias_ids, .bias = q.bias, .n_bias = q.n_bias};
    if (!q.seeded) in.sampling.seed = fresh_seed(s);
    snprintf(in.id, sizeof in.id, "%s-%08lx%08x", kind == OAI_CHAT ? "chatcmpl" : "cmpl", (unsigned long)s->started,
             atomic_fetch_add(&s->next_id, 1));
    GenRequest *rs[OAI_MAX_CHOICES];
    for (int i = 0; i < q.n; i++) {   /* choice i draws with seed + i: as a request alone with that seed would */
        GenInput choice = in;
        choice.sampling.seed = in.sampling.seed + (uint64_t)i;
        rs[i] = gen_request_create(&choice, s->cfg.tok, q.stop, q.n_stop);
    }
    if (q.n > 1) gen_request_group(rs, q.n);
    GenRequest *r = rs[0];
    free(ids);
    int rc = s->engine->submit(s->engine, r, err);
    if (rc != 0) {
        routes_reply_error(x, rc, err, NULL);
    } else {
        OaiReply a = {.id = in.id, .created = (long)time(NULL), .model = s->cfg.model_name, .tok = s->cfg.tok};
        if (q.n > 1 && q.stream) stream_choices(x, rs, q.n, &q, &a);
        else if (q.n > 1) whole_choices(x, rs, q.n, &q, &a);
        else if (q.stream) stream_reply(x, r, &q, &a);
        else whole_reply(x, r, &q, &a);
        const GenResult *res = gen_result(r);
        if (!x->note[0])
            snprintf(x->note, sizeof x->note, "%s prompt %d (cached %d), generated %d, %s%s", in.id, res->n_prompt,
                     res->n_cached, res->n_generated, res->finish_reason ? res->finish_reason : "-",
                     x->gone ? ", client gone: cancelled" : "");
    }
    for (int i = 0; i < q.n; i++) gen_request_free(rs[i]);
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
        routes_reply_error(x, 404, msg, NULL);
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
const char *routes_dispatch(Exchange *x) {
    const HttpRequest *req = x->req;
    const Route *route = NULL;
    for (int i = 0; i < N_ROUTES; i++)
        if (strcmp(req->path, ROUTES[i].path) == 0) route = &ROUTES[i];
    if (!(route && route->open) && !authorized(x->s, req)) {
        routes_reply_error(x, 401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'", NULL);
        return route ? route->path : "other";
    }
    if (!route) {
        char msg[320];
        snprintf(msg, sizeof msg, "no route %s %.100s (see /v1/models, /v1/chat/completions, /v1/completions, /health, /metrics)",
                 req->method, req->path);
        routes_reply_error(x, 404, msg, NULL);
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
