/* server.h: chat-server's OpenAI-compatible HTTP server, and the interface
 * between it and the engine that runs the requests.
 *
 * The HTTP side is the same in every chapter: it reads requests (http.h),
 * checks them, turns chat messages or a prompt into tokens, and writes
 * responses, streamed as Server-Sent Events or whole. How requests are run
 * is the chapter's lesson: III.4 runs one at a time from a bounded queue,
 * III.7 many at once in slots with a scheduler. Both are an Engine.
 *
 *   worker thread (one whole request)          engine thread(s)
 *   ---------------------------------          ----------------
 *   r = gen_request_create(...)
 *   engine->submit(engine, r)  ------------->  gen_begin(r)
 *                                              prefill; gen_prefill_done(r, cached)
 *   gen_next(r) <- a piece of text  <-------   gen_push_token(r, token, logits)  (each step)
 *   ...writes it to the client...              ...until it returns true, or
 *   client gone? gen_cancel(r)  ---------->    gen_cancelled(r) (checked every step)
 *   gen_next(r) == -1: ended   <-----------    gen_finish(r) or gen_fail(r, status, msg)
 *   gen_request_free(r)
 *
 * The engine never touches a socket and never waits on a client: everything
 * it reports lands in the request under the request's own lock, and the
 * worker thread writes it out at the client's pace. So one engine thread
 * can drive any number of requests at once. */
#ifndef SERVER_H
#define SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "events.h"
#include "grammar.h"
#include "http.h"
#include "sampling.h"
#include "tokenizer.h"
#include "util.h"

/* ---- a generation request ------------------------------------------------------- */

typedef struct GenRequest GenRequest;

/* What a request asks for. The engine reads it (gen_input) and never changes it. */
typedef struct {
    const int32_t *prompt;   /* [n_prompt] token ids */
    int n_prompt;
    int max_tokens;          /* tokens to generate at most (>= 1); -1: until the room runs out */
    SamplerParams sampling;
    int top_logprobs;        /* -1: no logprobs; k >= 0: the chosen token's and the k best (k <= GEN_MAX_TOP_LOGPROBS) */
    bool ignore_eos;         /* end-of-generation tokens are text like any other: only max_tokens, a stop string
                                or the room left ends the answer (benchmarks: every answer the same length) */
    char id[48];             /* "chatcmpl-...": names the request in logs and debug views */
    const Grammar *grammar;  /* response_format: the reply must match it (grammar.h); NULL: free text.
                                Not copied: it outlives the request */
    const int32_t *bias_ids; /* logit_bias: [n_bias] token ids and what to add to their logits */
    const float *bias;       /*   (copied); -100 or less bans the token */
    int n_bias;
} GenInput;

#define GEN_MAX_TOP_LOGPROBS 20

/* Log-probabilities of one generated token, when the request asked for them. */
typedef struct {
    int32_t token;
    float logprob;                        /* log-softmax of the raw logits */
    int n_top;
    int32_t top[GEN_MAX_TOP_LOGPROBS];    /* the most likely tokens, best first */
    float top_logprob[GEN_MAX_TOP_LOGPROBS];
} GenLogprob;

/* One step's output as the client sees it. */
typedef struct {
    Buf text;          /* new reply text: complete UTF-8 characters, stop strings removed (may be empty) */
    GenLogprob *lp;    /* [n_lp] the tokens this piece covers (0 or 1 of them) */
    int n_lp;
} GenPiece;

void gen_piece_free(GenPiece *p);

/* How a request ended. */
typedef struct {
    const char *finish_reason;  /* "stop" (end-of-generation token or stop string), "length" */
    int status;                 /* 0, or the HTTP status of a failure (then message says why) */
    char message[ERR_MAX];
    bool cancelled;             /* the client went away */
    int n_prompt, n_cached;     /* prompt tokens; how many came from a prefix cache */
    int n_generated;            /* tokens the engine chose (the end-of-generation one included) */
    double t_submit, t_begin, t_prefill, t_first, t_last; /* time_now_ms(); 0 if it never happened */
    double *token_times;        /* [n_generated] when each token was pushed */
    /* The engine time charged to this request (gen_charge; III.7): its prefill
     * chunks whole, and of each fused decode step of B requests, step time / B. */
    double charged_prompt_ms, charged_decode_ms;
    int decode_steps;           /* decode steps it took part in */
    long batch_sum;             /* the sum of their B (mean batch = batch_sum / decode_steps) */
} GenResult;

/* A request for in (the prompt is copied). tok detokenizes the chosen tokens
 * and knows the end-of-generation ones; stop[0..n_stop) are the stop strings. */
GenRequest *gen_request_create(const GenInput *in, const Tokenizer *tok, const char *const *stop, int n_stop);
/* Only when the request never went to an engine, or after gen_next returned -1. */
void gen_request_free(GenRequest *r);

/* n > 1 ("n": 3): the choices rs[0..n) of one request, made alike but for
 * their seeds, become one group that rs[0] leads. The engine is given the
 * lead only (submit); it runs every choice, from one reading of the prompt,
 * and ends each one (gen_finish or gen_fail) as if it were alone. */
void gen_request_group(GenRequest **rs, int n);
int gen_n_choices(const GenRequest *lead);                 /* 1 for a request alone */
GenRequest *gen_choice(const GenRequest *lead, int i);     /* i = 0 is the lead itself */

/* ---- the engine's side: called from the engine's thread(s) ----
 * One request's calls come from one thread at a time (the detokenizing
 * state is not locked); different requests may be driven by different
 * threads, or all by one. */

const GenInput *gen_input(const GenRequest *r);
/* The engine starts working on r (it leaves the queue). */
void gen_begin(GenRequest *r);
/* The prompt has been read; n_cached of its tokens were not computed again (III.7's prefix cache; 0 in III.4). */
void gen_prefill_done(GenRequest *r, int n_cached);
/* Charges r ms of engine time: a prefill chunk of its own (batch 0), or its
 * share of a decode step that ran batch requests at once (ms = step / batch). */
void gen_charge(GenRequest *r, double ms, int batch);
/* The logits the sampler should draw from: logits[vocab] themselves, or,
 * when r has a logit_bias or a grammar, a copy with the biases added and
 * -inf on every token the grammar forbids next (grammar.h). Valid until the
 * next call; logits is left as it is. */
const float *gen_constrain(GenRequest *r, const float *logits, int vocab);
/* A chosen token, with the logits it was chosen from ([vocab_size], for
 * logprobs). The request detokenizes it, streaming UTF-8, applies the stop
 * strings, max_tokens and end-of-generation. Returns true when r wants no
 * more tokens (it ended itself, or was cancelled). */
bool gen_push_token(GenRequest *r, int32_t token, const float *logits);
/* The client went away or the server is stopping: stop working on r, give
 * back what it holds, and finish it. Check it every step. */
bool gen_cancelled(const GenRequest *r);
/* The engine is done with r and never touches it again. If r had not ended
 * itself (gen_push_token never returned true) the engine ran out of room for
 * it (context or KV blocks): finish_reason "length". */
void gen_finish(GenRequest *r);
/* The same, but r failed: the client gets status (400, 503, ...) and message. */
void gen_fail(GenRequest *r, int status, const char *message);

/* ---- the client's side: the worker thread, or a test ---- */

/* Waits up to timeout_ms for the next piece. 1: *piece filled (free it with
 * gen_piece_free); 0: nothing yet; -1: the request has ended and every piece
 * was taken (then see gen_result). */
int gen_next(GenRequest *r, GenPiece *piece, int timeout_ms);
/* Asks the engine to stop (the client disconnected). gen_next still ends with -1. */
void gen_cancel(GenRequest *r);
/* Valid once gen_next has returned -1. */
const GenResult *gen_result(const GenRequest *r);

/* ---- the engine --------------------------------------------------------------------- */

typedef struct {
    int running;            /* requests being generated */
    int waiting;            /* requests queued */
    int kv_blocks_used;     /* KV cache blocks in use, and in the pool (0, 0 without a pool) */
    int kv_blocks_total;
} EngineStats;

/* Every function may be called from many worker threads at once. */
typedef struct Engine Engine;
struct Engine {
    const char *name;
    /* Takes r to run; never blocks on generation. 0: accepted, and the
     * engine will call gen_finish or gen_fail on it exactly once. Otherwise
     * the HTTP status to answer with (503 queue full or shutting down, 400 a
     * request that can never fit) and err: r was not taken. */
    int (*submit)(Engine *e, GenRequest *r, char *err);
    void (*stats)(Engine *e, EngineStats *s);
    /* Appends the JSON of a debug view ("kv": the KV pool map, "slots": III.7's
     * slots); -1 if the engine has no such view. */
    int (*debug_json)(Engine *e, const char *view, Buf *out);
    /* Appends the engine's own families to /metrics in Prometheus' text
     * format (III.7: the prefix cache's hits and evictions, preemptions);
     * NULL if it has none. */
    void (*metrics)(Engine *e, Buf *out);
    /* Stops taking requests, fails every queued and running one with 503
     * "the server is shutting down" and returns when the engine is idle. */
    void (*shutdown)(Engine *e);
    void (*destroy)(Engine *e);
    void *impl;
    /* Where the engine records what each step did (events.h), sent by GET
     * /v1/events and drawn by the page at GET /; NULL: it records nothing. */
    EventHub *events;
};

/* ---- the server ------------------------------------------------------------------------ */

typedef struct {
    const char *bind;          /* "HOST:PORT"; port 0 picks a free one (printed at start) */
    const char *api_key;       /* NULL: no key; else every route but /health needs "Authorization: Bearer KEY" */
    const char *model_name;    /* the model id /v1/models lists and responses carry */
    int max_connections;       /* open connections at once; past it a new one gets 503 and is closed */
    int max_per_client;        /* open connections from one client address (0: no limit); past it 503 */
    int header_timeout_ms;     /* a request's head must arrive within it (and within http.timeout_ms) */
    HttpLimits http;           /* sizes and --timeout (the whole request, and writes) */
    bool quiet;                /* no log line per request */
    bool parse_special_in_messages; /* control-token texts inside chat messages become control
                                     * tokens (the old behaviour; a user can forge turns) */
    const Tokenizer *tok;      /* the model's: prompts in, text out */
    int vocab_size;
    int ctx;                   /* the longest sequence, prompt + generated, in tokens */
    bool reasoning_in_content; /* --reasoning-format none: a chat reply's <think> block stays in content
                                * (else it is message.reasoning_content) */
    const char *cors_origin;   /* --cors ORIGIN: Access-Control-Allow-Origin on every answer, and
                                * OPTIONS preflights answered; NULL: no CORS headers */
} ServerConfig;

/* The defaults: 127.0.0.1:8080, no key, 1024 connections (256 from one
 * address), heads within 10 s, http_limits_default(). */
void server_config_default(ServerConfig *c);
/* Takes argv[*i] if it is a server flag (--bind, --api-key, --max-connections,
 * --timeout, --header-timeout, --max-connections-per-client, --max-body,
 * --model-name, --quiet, --parse-special-in-messages): 1 with *i past its value, 0 if
 * it is not one, -1 with err if its value is wrong. */
int server_flags_parse(ServerConfig *c, int argc, char **argv, int *i, char *err);
void server_flags_usage(FILE *out);
/* The same for the API's own flags (routes.c): --reasoning-format, --cors. */
int server_api_flags_parse(ServerConfig *c, int argc, char **argv, int *i, char *err);
void server_api_flags_usage(FILE *out);

typedef struct Server Server;

/* Binds and starts answering in background threads; NULL with err if it
 * cannot listen. */
Server *server_start(const ServerConfig *c, Engine *e, char *err);
int server_port(const Server *s);
/* Stops: no new connections, the engine shut down (what runs is failed
 * with 503), every connection closed; then frees s. */
void server_stop(Server *s);

/* The whole of chat-server's serving: start, print where it listens, run
 * until SIGINT or SIGTERM, stop. Returns 0 after a clean stop, -1 with err if
 * it could not listen. */
int server_run(const ServerConfig *c, Engine *e, char *err);

#endif
