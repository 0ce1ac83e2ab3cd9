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

#include "events.h"
#include "openai.h"
#include "page.h"
#include "server_internal.h"
#include "unicode.h"

#define WATCH_MS 100            /* how often a waiting request looks at its client */
#define EVENTS_WAIT_MS 250      /* how long an event stream waits for events before it looks at its client */
#define EVENTS_KEEPALIVE_MS 15000 /* a comment line after this long without events, so proxies keep the stream */

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
    prom_header(out, "chat_server_connections_refused_total", "counter", "Connections refused past --max-connections or --max-connections-per-client.");
    prom_sample(out, "chat_server_connections_refused_total", NULL, (double)s->refused);
    pthread_mutex_unlock(&s->mu);
    if (s->engine->metrics) s->engine->metrics(s->engine, out);
}

/* ---- answering ------------------------------------------------------------------------------- */

/* extra header lines, and with --cors the Access-Control-Allow-Origin line, into h. */
static const char *with_cors(const Exchange *x, const char *extra, Buf *h) {
    if (!x->s->cfg.cors_origin) return extra;
    buf_printf(h, "%sAccess-Control-Allow-Origin: %s\r\n", extra ? extra : "", x->s->cfg.cors_origin);
    if (strcmp(x->s->cfg.cors_origin, "*") != 0) buf_puts(h, "Vary: Origin\r\n");
    return h->data;
}

static void reply(Exchange *x, int status, const char *content_type, const char *body, size_t len, const char *extra) {
    Buf h = {0};
    x->status = status;
    if (http_send(x->fd, status, content_type, body, len, x->keep_alive, with_cors(x, extra, &h)) != 0) x->keep_alive = false;
    buf_free(&h);
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

/* The template's options for a chat request: the tools (unless tool_choice
 * is "none"), and either a new assistant turn or, when the last message is the
 * assistant's, that message left open to be continued. */
static ChatOptions chat_options(const Server *s, const OaiRequest *q) {
    bool tools = oai_tools_shown(q);
    return (ChatOptions){.add_generation_prompt = !q->continue_final, .enable_thinking = q->enable_thinking,
                         .tools = tools ? (const char *const *)q->tools : NULL, .n_tools = tools ? q->n_tools : 0,
                         .continue_final = q->continue_final,
                         .parse_special_in_messages = s->cfg.parse_special_in_messages};
}

/* A chat's prompt text as Qwen3's template makes it (chat_options), then the
 * start that tool_choice demands of the reply. */
static char *render_chat(const Server *s, const OaiRequest *q) {
    ChatOptions opt = chat_options(s, q);
    Buf text = {0};
    char *chat = chat_render_with(q->messages, q->n_messages, &opt);
    buf_puts(&text, chat);
    free(chat);
    oai_reply_prefix(q, &text);
    return text.data;
}

/* The prompt's tokens: a completion's text or ids, or a chat: its messages
 * encoded so that only the template's own markers become control tokens
 * (chat_encode), then the start tool_choice demands (the server's own text,
 * its specials parsed). prefill (may be NULL) gets what of the reply the
 * prompt already holds (a continued message, that start), for the reply's parser. */
static int prompt_tokens(const Server *s, const OaiRequest *q, int32_t **ids, int *n, Buf *prefill, char *err) {
    if (q->kind == OAI_COMPLETION && q->prompt_ids) {
        *n = q->n_prompt_ids;
        *ids = xmalloc(sizeof(int32_t) * (size_t)(*n > 0 ? *n : 1));
        memcpy(*ids, q->prompt_ids, sizeof(int32_t) * (size_t)*n);
        return 0;
    }
    if (q->kind == OAI_COMPLETION) /* the raw interface: specials parsed unless "parse_special": false */
        return tokenizer_encode(s->cfg.tok, q->prompt, q->prompt_len, q->parse_special, ids, n, err);
    ChatOptions opt = chat_options(s, q);
    if (chat_encode(s->cfg.tok, q->messages, q->n_messages, &opt, ids, n, err) != 0) return -1;
    Buf forced = {0};
    oai_reply_prefix(q, &forced);
    if (prefill) {
        if (q->continue_final) { /* the template again, for where the open message starts */
            char *continued = chat_continued(q->messages, q->n_messages, &opt);
            buf_puts(prefill, continued);
            free(continued);
        }
        buf_append(prefill, forced.data, forced.len);
    }
    int32_t *more = NULL;
    int n_more = 0, rc = 0;
    if (forced.len && (rc = tokenizer_encode(s->cfg.tok, forced.data, forced.len, true, &more, &n_more, err)) == 0) {
        *ids = xrealloc(*ids, sizeof(int32_t) * (size_t)(*n + n_more));
        memcpy(*ids + *n, more, sizeof(int32_t) * (size_t)n_more);
        *n += n_more;
    }
    free(more);
    buf_free(&forced);
    if (rc != 0) {
        free(*ids);
        *ids = NULL;
    }
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
    Buf h = {0};
    int rc = http_stream_begin(hs, x->fd, x->req->minor, 200, "text/event-stream", x->keep_alive,
                               with_cors(x, "Cache-Control: no-cache\r\n", &h));
    buf_free(&h);
    if (rc != 0) {
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
        oai_chunk_json(&b, q, a, NULL, NULL, 0, NULL, 0, oai_finish_reason(a, res));
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

/* The chunks for what the reply's parser made known (d): reasoning, content
 * (with the piece's logprobs, also when it has no text yet), tool calls. */
static void write_parsed(Exchange *x, HttpStream *hs, GenRequest *r, const OaiRequest *q, const OaiReply *a,
                         const ChatReplyDelta *d, const GenPiece *p) {
    Buf b = {0}, c = {0};
    if (d->reasoning.len > 0) {
        oai_reasoning_chunk_json(&b, q, a, d->reasoning.data, d->reasoning.len);
        write_event(x, hs, r, b.data, b.len);
    }
    if (d->content.len > 0 || (p && p->n_lp > 0)) {
        b.len = 0;
        oai_chunk_json(&b, q, a, NULL, d->content.data, d->content.len, p ? p->lp : NULL, p ? p->n_lp : 0, NULL);
        write_event(x, hs, r, b.data, b.len);
    }
    for (int i = d->first_call; i < a->parsed->n_calls; i++) {
        b.len = c.len = 0;
        oai_tool_call_chunks_json(&b, &c, q, a, i, &a->parsed->calls[i]);
        write_event(x, hs, r, b.data, b.len);
        write_event(x, hs, r, c.data, c.len);
    }
    buf_free(&b);
    buf_free(&c);
}

/* One piece as stream chunks: as it is, or through the reply's parser (parser not NULL). */
static void write_piece(Exchange *x, HttpStream *hs, GenRequest *r, const OaiRequest *q, const OaiReply *a,
                        ChatReply *parser, const GenPiece *p) {
    if (parser) {
        ChatReplyDelta d = {0};
        chat_reply_push(parser, p->text.data ? p->text.data : "", p->text.len, &d);
        write_parsed(x, hs, r, q, a, &d, p);
        chat_reply_delta_free(&d);
        return;
    }
    Buf b = {0};
    oai_chunk_json(&b, q, a, NULL, p->text.data ? p->text.data : "", p->text.len, p->lp, p->n_lp, NULL);
    write_event(x, hs, r, b.data, b.len);
    buf_free(&b);
}

/* Streams r's pieces as SSE chunks, ending with finish_reason, usage if asked, and [DONE].
 * The head is sent with the first piece, so a request that fails before it gets a plain error. */
static void stream_reply(Exchange *x, GenRequest *r, const OaiRequest *q, const OaiReply *a, ChatReply *parser) {
    HttpStream hs = {0};
    bool started = false;
    double watch = time_now_ms();
    GenPiece p;
    while (next_piece(x, r, &p, &watch) == 1) {
        if (!started && !x->gone) {
            begin_stream(x, &hs, r, q, a);
            started = true;
        }
        write_piece(x, &hs, r, q, a, parser, &p);
        gen_piece_free(&p);
    }
    const GenResult *res = request_ended(x, r);
    if (!res) return;
    if (!started && res->status) {
        routes_reply_error(x, res->status, res->message, NULL);
        return;
    }
    if (!started) begin_stream(x, &hs, r, q, a);
    if (parser && !res->status) { /* what the parser held back to the last */
        ChatReplyDelta d = {0};
        chat_reply_finish(parser, &d);
        write_parsed(x, &hs, r, q, a, &d, NULL);
        chat_reply_delta_free(&d);
    }
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

/* Reads a whole reply's text into its parser. */
static void parse_whole(ChatReply *parser, const Buf *text) {
    ChatReplyDelta d = {0};
    chat_reply_push(parser, text->data, text->len, &d);
    chat_reply_finish(parser, &d);
    chat_reply_delta_free(&d);
}

/* Collects r's whole reply, then answers with one JSON response. */
static void whole_reply(Exchange *x, GenRequest *r, const OaiRequest *q, const OaiReply *a, ChatReply *parser) {
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
        if (parser) parse_whole(parser, &text);
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

static void whole_choices(Exchange *x, GenRequest **rs, int n, const OaiRequest *q, const OaiReply *a,
                          ChatReply *parsers) {
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
        for (int i = 0; i < n; i++) {
            OaiReply ai = *a;
            ai.parsed = parsers ? &parsers[i] : NULL;
            if (parsers) parse_whole(&parsers[i], &text[i]);
            c[i] = (OaiChoice){text[i].data, text[i].len, lps[i], n_lp[i], oai_finish_reason(&ai, gen_result(rs[i])), ai.parsed};
        }
        Buf b = {0};
        oai_response_choices_json(&b, q, a, c, n, res);
        reply_json(x, 200, &b);
        buf_free(&b);
    }
    for (int i = 0; i < n; i++) buf_free(&text[i]), free(lps[i]);
}

/* Choice a->index has ended without failing: what its parser (if any) held
 * back to the last, and unless it is the lead (whose chunk end_stream writes) its
 * finish_reason chunk. */
static void end_choice(Exchange *x, HttpStream *hs, GenRequest *r, const OaiRequest *q, const OaiReply *a,
                       ChatReply *parser, bool finish) {
    if (parser) {
        ChatReplyDelta d = {0};
        chat_reply_finish(parser, &d);
        write_parsed(x, hs, r, q, a, &d, NULL);
        chat_reply_delta_free(&d);
    }
    if (!finish) return;
    Buf b = {0};
    oai_chunk_json(&b, q, a, NULL, NULL, 0, NULL, 0, oai_finish_reason(a, gen_result(r)));
    write_event(x, hs, r, b.data, b.len);
    buf_free(&b);
}

/* Streams the choices' pieces as they come, each chunk with its choice's
 * index; a choice's last chunk (finish_reason) when it ends, the lead's
 * with the usage and [DONE] at the end. */
static void stream_choices(Exchange *x, GenRequest **rs, int n, const OaiRequest *q, const OaiReply *a,
                           ChatReply *parsers) {
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
            ChatReply *parser = parsers ? &parsers[i] : NULL;
            ai.parsed = parser;
            if (rc == 1) {
                write_piece(x, &hs, rs[i], q, &ai, parser, &p);
                gen_piece_free(&p);
            } else {
                ended[i] = true, left--;
                if (!gen_result(rs[i])->status) end_choice(x, &hs, rs[i], q, &ai, parser, i > 0);
            }
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
    Buf prefill = {0};
    buf_append(&prefill, "", 0);
    if (prompt_tokens(s, &q, &ids, &n, &prefill, err) != 0 || check_context(s, n, q.max_tokens, err) != 0) {
        routes_reply_error(x, 400, err, q.kind == OAI_CHAT ? "messages" : "prompt");
        free(ids);
        buf_free(&prefill);
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
        ChatReply parsers[OAI_MAX_CHOICES], *parser = kind == OAI_CHAT ? parsers : NULL; /* [q.n] one per choice */
        for (int i = 0; parser && i < q.n; i++) {
            chat_reply_init(&parsers[i], (ChatReplyOptions){.reasoning = !s->cfg.reasoning_in_content,
                                                            .tools = oai_tools_shown(&q)});
            chat_reply_prime(&parsers[i], prefill.data);
        }
        a.parsed = parser;
        if (q.n > 1 && q.stream) stream_choices(x, rs, q.n, &q, &a, parser);
        else if (q.n > 1) whole_choices(x, rs, q.n, &q, &a, parser);
        else if (q.stream) stream_reply(x, r, &q, &a, parser);
        else whole_reply(x, r, &q, &a, parser);
        for (int i = 0; parser && i < q.n; i++) chat_reply_free(&parsers[i]);
        const GenResult *res = gen_result(r);
        if (!x->note[0])
            snprintf(x->note, sizeof x->note, "%s prompt %d (cached %d), generated %d, %s%s", in.id, res->n_prompt,
                     res->n_cached, res->n_generated, res->finish_reason ? res->finish_reason : "-",
                     x->gone ? ", client gone: cancelled" : "");
    }
    for (int i = 0; i < q.n; i++) gen_request_free(rs[i]);
    buf_free(&prefill);
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

/* The id in a path "/v1/models/{id}", percent-decoded into id[cap]; false if it does not fit or is malformed. */
static bool model_id_of(const char *path, char *id, size_t cap) {
    const char *p = path + strlen("/v1/models/");
    size_t n = 0;
    for (; *p; p++) {
        int c = (unsigned char)*p;
        if (c == '%') {
            unsigned v;
            if (sscanf(p + 1, "%2x", &v) != 1 || !p[1] || !p[2]) return false;
            c = (int)v;
            p += 2;
        }
        if (n + 1 >= cap || c == 0) return false;
        id[n++] = (char)c;
    }
    id[n] = '\0';
    return true;
}

/* GET /v1/models/{id}: the one model this server has, or OpenAI's 404. */
static void route_model(Exchange *x) {
    Server *s = x->s;
    char id[256];
    if (!model_id_of(x->req->path, id, sizeof id) || strcmp(id, s->cfg.model_name) != 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "The model '%.200s' does not exist: this server has '%.100s'",
                 model_id_of(x->req->path, id, sizeof id) ? id : x->req->path, s->cfg.model_name);
        routes_reply_error(x, 404, msg, "model");
        return;
    }
    Buf b = {0};
    buf_puts(&b, "{\"id\":");
    json_append_string(&b, s->cfg.model_name, strlen(s->cfg.model_name));
    buf_printf(&b, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"local\",\"meta\":{\"n_ctx\":%d,\"n_vocab\":%d}}",
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

/* GET /: the live page. It holds no secret: with --api-key it asks for the
 * key and sends it with each of its requests. The policy lets it talk to
 * this server only, and run only its own inline script. */
static void route_page(Exchange *x) {
    reply(x, 200, "text/html; charset=utf-8", (const char *)page_html, page_html_len,
          "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
          "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
          "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n");
}

/* GET /v1/events: the engine's events as Server-Sent Events, until the
 * client goes away or the server stops. The engine writes into this
 * stream's ring and never waits for it (events.h); what the client is too
 * slow to take is dropped and counted in a "dropped" event. */
static void route_events(Exchange *x) {
    EventHub *h = x->s->engine->events;
    char err[ERR_MAX];
    if (!h) {
        snprintf(err, sizeof err, "the %s engine records no events", x->s->engine->name);
        routes_reply_error(x, 404, err, NULL);
        return;
    }
    EventSub *sub = events_subscribe(h, 0, err);
    if (!sub) {
        routes_reply_error(x, 503, err, NULL);
        return;
    }
    x->keep_alive = false; /* the stream ends only when the connection does */
    x->status = 200;
    HttpStream hs = {0};
    Buf b = {0};
    buf_puts(&b, "retry: 1000\ndata: {\"ev\":\"hello\",\"engine\":");
    json_append_string(&b, x->s->engine->name, strlen(x->s->engine->name));
    buf_puts(&b, ",\"views\":[");
    const char *views[] = {"kv", "slots"}; /* which of the debug routes this engine answers */
    for (int i = 0, n = 0; i < 2; i++) {
        Buf probe = {0};
        if (x->s->engine->debug_json(x->s->engine, views[i], &probe) == 0) buf_printf(&b, "%s\"%s\"", n++ ? "," : "", views[i]);
        buf_free(&probe);
    }
    buf_printf(&b, "],\"next_id\":%llu}\n\n", (unsigned long long)events_count(h));
    Buf cors = {0};
    const char *extra = with_cors(x, "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n", &cors);
    if (http_stream_begin(&hs, x->fd, x->req->minor, 200, "text/event-stream", false, extra) == 0 &&
        http_stream_write(&hs, b.data, b.len) == 0) {
        double last = time_now_ms();
        while (!atomic_load(&x->s->stopping) && !client_gone(x->fd)) {
            b.len = 0;
            events_read(sub, &b, EVENTS_WAIT_MS);
            if (!b.len && time_now_ms() - last >= EVENTS_KEEPALIVE_MS) buf_puts(&b, ": still here\n\n");
            if (!b.len) continue;
            if (http_stream_write(&hs, b.data, b.len) != 0) break;
            last = time_now_ms();
        }
        if (!hs.failed) http_stream_end(&hs);
    }
    snprintf(x->note, sizeof x->note, "event stream closed, %llu events dropped", (unsigned long long)events_dropped(sub));
    events_unsubscribe(sub);
    buf_free(&cors);
    buf_free(&b);
}

static void route_kv(Exchange *x) { route_debug(x, "kv"); }
static void route_slots(Exchange *x) { route_debug(x, "slots"); }

/* ---- llama-server's text routes: /tokenize, /detokenize, /apply-template ----------------------- */

/* The body as a JSON object, or a 400 answered (NULL). */
static JsonValue *body_object(Exchange *x) {
    char err[ERR_MAX], msg[ERR_MAX + 64];
    JsonValue *v = json_parse(x->req->body, x->req->body_len, err);
    if (v && v->type == JSON_OBJECT) return v;
    snprintf(msg, sizeof msg, v ? "the body must be a JSON object" : "the body is not valid JSON: %s", err);
    routes_reply_error(x, 400, msg, "");
    json_free(v);
    return NULL;
}

/* An optional boolean member; false with a 400 answered if it is not one. */
static bool body_bool(Exchange *x, const JsonValue *o, const char *key, bool *out) {
    const JsonValue *v = json_get(o, key);
    if (!v || v->type == JSON_NULL) return true;
    if (v->type == JSON_BOOL) {
        *out = v->boolean;
        return true;
    }
    char msg[128];
    snprintf(msg, sizeof msg, "'%s' must be true or false", key);
    routes_reply_error(x, 400, msg, key);
    return false;
}

/* A token's bytes: a string when they are valid UTF-8, else an array of byte values (as llama-server). */
static void append_piece(Buf *b, const char *bytes, int n) {
    bool text = true;
    for (int i = 0, k; i < n && text; i += k)
        if ((k = utf8_check(bytes + i, (size_t)(n - i))) <= 0) text = false;
    if (text) {
        json_append_string(b, bytes, (size_t)n);
        return;
    }
    buf_puts(b, "[");
    for (int i = 0; i < n; i++) buf_printf(b, "%s%u", i ? "," : "", (unsigned char)bytes[i]);
    buf_puts(b, "]");
}

static void append_ids(Buf *b, const int32_t *ids, int n) {
    buf_puts(b, "[");
    for (int i = 0; i < n; i++) buf_printf(b, "%s%d", i ? "," : "", ids[i]);
    buf_puts(b, "]");
}

/* POST /tokenize {"content", "add_special"?, "parse_special"? (default true), "with_pieces"?}
 * -> {"tokens": [ids]} or [{"id", "piece"}]. Qwen3 adds no BOS, so add_special adds nothing. */
static void route_tokenize(Exchange *x) {
    const Tokenizer *tok = x->s->cfg.tok;
    JsonValue *o = body_object(x);
    if (!o) return;
    const JsonValue *content = json_get(o, "content");
    bool add_special = false, parse_special = true, with_pieces = false;
    if (!content || content->type != JSON_STRING) {
        routes_reply_error(x, 400, "'content' must be a string: the text to tokenize", "content");
    } else if (body_bool(x, o, "add_special", &add_special) && body_bool(x, o, "parse_special", &parse_special) &&
               body_bool(x, o, "with_pieces", &with_pieces)) {
        int32_t *ids = NULL;
        int n = 0;
        char err[ERR_MAX], *piece = xmalloc((size_t)tokenizer_max_token_bytes(tok) + 1);
        tokenizer_encode(tok, content->string, content->string_len, parse_special, &ids, &n, err);
        Buf b = {0};
        buf_puts(&b, "{\"tokens\":");
        if (!with_pieces) append_ids(&b, ids, n);
        for (int i = 0; with_pieces && i < n; i++) {
            int len = tokenizer_token_bytes(tok, ids[i], true, piece, tokenizer_max_token_bytes(tok) + 1);
            buf_printf(&b, "%s{\"id\":%d,\"piece\":", i ? "," : "[", ids[i]);
            append_piece(&b, piece, len > 0 ? len : 0);
            buf_puts(&b, "}");
        }
        if (with_pieces) buf_puts(&b, n ? "]" : "[]");
        buf_puts(&b, "}");
        reply_json(x, 200, &b);
        buf_free(&b);
        free(piece);
        free(ids);
    }
    json_free(o);
}

/* POST /detokenize {"tokens": [ids]} -> {"content": text} (control tokens written out). */
static void route_detokenize(Exchange *x) {
    const Tokenizer *tok = x->s->cfg.tok;
    JsonValue *o = body_object(x);
    if (!o) return;
    const JsonValue *t = json_get(o, "tokens");
    int vocab = tokenizer_vocab_size(tok);
    int32_t *ids = xmalloc(sizeof(int32_t) * (t && t->type == JSON_ARRAY && t->n_items ? t->n_items : 1));
    int n = 0;
    char msg[160] = "";
    if (!t || t->type != JSON_ARRAY) snprintf(msg, sizeof msg, "'tokens' must be an array of token ids");
    for (size_t i = 0; !msg[0] && i < t->n_items; i++) {
        const JsonValue *v = &t->items[i];
        /* the range first: converting a number outside int32_t is undefined */
        if (v->type != JSON_NUMBER || !(v->number >= 0 && v->number < vocab) || v->number != (double)(int32_t)v->number)
            snprintf(msg, sizeof msg, "'tokens[%zu]' must be a token id from 0 to %d", i, vocab - 1);
        else ids[n++] = (int32_t)v->number;
    }
    if (msg[0]) {
        routes_reply_error(x, 400, msg, "tokens");
    } else {
        size_t len;
        char *text = tokenizer_decode(tok, ids, n, true, &len);
        Buf b = {0};
        buf_puts(&b, "{\"content\":");
        json_append_string(&b, text, len);
        buf_puts(&b, "}");
        reply_json(x, 200, &b);
        buf_free(&b);
        free(text);
    }
    free(ids);
    json_free(o);
}

/* POST /apply-template: a chat request's body -> {"prompt": the exact text the
 * template makes for it, "tokens": its ids}. */
static void route_apply_template(Exchange *x) {
    Server *s = x->s;
    OaiRequest q;
    char err[ERR_MAX], param[64];
    if (oai_parse_request(&q, OAI_CHAT, x->req->body, x->req->body_len, s->cfg.vocab_size, err, param) != 0) {
        routes_reply_error(x, 400, err, param);
    } else {
        char *text = render_chat(s, &q);
        int32_t *ids = NULL;
        int n = 0;
        prompt_tokens(s, &q, &ids, &n, NULL, err);
        Buf b = {0};
        buf_puts(&b, "{\"prompt\":");
        json_append_string(&b, text, strlen(text));
        buf_puts(&b, ",\"tokens\":");
        append_ids(&b, ids, n);
        buf_puts(&b, "}");
        reply_json(x, 200, &b);
        buf_free(&b);
        free(ids);
        free(text);
    }
    oai_request_free(&q);
}

typedef struct {
    const char *path;
    const char *method;
    void (*fn)(Exchange *x);
    bool open;   /* answered without the API key */
    bool prefix; /* path is a prefix: the route answers every path that goes on after it */
} Route;

static const Route ROUTES[] = {
    {"/", "GET", route_page, true, false},
    {"/health", "GET", route_health, true, false},
    {"/v1/models", "GET", route_models, false, false},
    {"/v1/chat/completions", "POST", route_chat, false, false},
    {"/v1/completions", "POST", route_completions, false, false},
    {"/metrics", "GET", route_metrics, false, false},
    {"/v1/kv", "GET", route_kv, false, false},
    {"/v1/slots", "GET", route_slots, false, false},
    {"/v1/events", "GET", route_events, false, false},
    {"/v1/models/", "GET", route_model, false, true}, /* /v1/models/{id} */
    {"/tokenize", "POST", route_tokenize, false, false},
    {"/detokenize", "POST", route_detokenize, false, false},
    {"/apply-template", "POST", route_apply_template, false, false},
};
#define N_ROUTES ((int)(sizeof ROUTES / sizeof ROUTES[0]))

static bool route_matches(const Route *r, const char *path) {
    size_t n = strlen(r->path);
    if (r->prefix) return strncmp(path, r->path, n) == 0 && path[n];
    return strcmp(path, r->path) == 0;
}

/* The answer to a CORS preflight (OPTIONS with --cors): what a page from the
 * allowed origin may send. */
static void reply_preflight(Exchange *x) {
    const char *asked = http_header(x->req, "Access-Control-Request-Headers");
    char extra[512];
    snprintf(extra, sizeof extra,
             "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\nAccess-Control-Allow-Headers: %s\r\n"
             "Access-Control-Max-Age: 86400\r\n",
             asked && strlen(asked) < 300 && !strpbrk(asked, "\r\n") ? asked : "Authorization, Content-Type");
    reply(x, 200, "text/plain", "", 0, extra);
}

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
        if (route_matches(&ROUTES[i], req->path)) route = &ROUTES[i];
    if (x->s->cfg.cors_origin && strcmp(req->method, "OPTIONS") == 0) { /* a browser's preflight: no key needed */
        reply_preflight(x);
        return route ? route->path : "other";
    }
    if (!(route && route->open) && !authorized(x->s, req)) {
        routes_reply_error(x, 401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'", NULL);
        return route ? route->path : "other";
    }
    if (!route) {
        char msg[320];
        snprintf(msg, sizeof msg, "no route %s %.100s (see /, /v1/models, /v1/chat/completions, /v1/completions, /v1/events, /health, /metrics)",
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

/* ---- the API's flags ---------------------------------------------------------------------------- */

void server_api_flags_usage(FILE *out) {
    fprintf(out, "  --reasoning-format F   deepseek (default): a chat reply's <think> block is message.reasoning_content\n");
    fprintf(out, "                         (delta.reasoning_content when streaming); none: it stays in content\n");
    fprintf(out, "  --cors ORIGIN          let pages from ORIGIN (or *) call the API from a browser:\n");
    fprintf(out, "                         Access-Control-Allow-Origin on answers, OPTIONS preflights answered\n");
}

int server_api_flags_parse(ServerConfig *c, int argc, char **argv, int *i, char *err) {
    const char *a = argv[*i];
    if (strcmp(a, "--reasoning-format") != 0 && strcmp(a, "--cors") != 0) return 0;
    if (*i + 1 >= argc) {
        err_set(err, "option %s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (strcmp(a, "--cors") == 0) {
        for (const char *p = v; *p; p++)
            if ((unsigned char)*p < 0x21 || *p == 0x7f || *p == ',') {
                err_set(err, "--cors wants one origin (https://example.com) or *, got '%s'", v);
                return -1;
            }
        if (!*v) {
            err_set(err, "--cors wants one origin (https://example.com) or *, got ''");
            return -1;
        }
        c->cors_origin = v;
    } else if (strcmp(v, "none") == 0 || strcmp(v, "deepseek") == 0 || strcmp(v, "auto") == 0) {
        c->reasoning_in_content = strcmp(v, "none") == 0;
    } else {
        err_set(err, "--reasoning-format must be none, deepseek or auto, got '%s'", v);
        return -1;
    }
    return 1;
}
