/* loadgen: a load generator for an OpenAI-compatible chat server (chat-server
 * or any other), for the book's III.7 A/B: many streaming requests at once, and
 * what their clients saw.
 *
 *   loadgen [--url http://127.0.0.1:8080] [-n N] [-c C] [--prompt-tokens P]
 *           [--output-tokens O] [--shared-prefix F] [--json]     (--help lists all)
 *   loadgen --conversations K [--turns T] [--system-tokens S] ...  (multi-turn)
 *
 * C worker threads share a counter of N requests. Each worker sends its next
 * request (POST /v1/chat/completions with "stream": true) and reads the
 * server-sent events of the answer to their end, timing every chunk that
 * carries text. With --conversations, the counter is of conversations: a
 * worker runs one conversation's T turns in order, each turn sending the
 * system prompt, the earlier turns with the answers the server gave, and a
 * new user message; what a prefix cache (or a balancer keeping conversations
 * on one replica) is for. Two probe requests first measure how many tokens
 * the server counts for a word, so that P and S are tokens. Per request it
 * measures:
 *   time to first token   request sent -> first chunk with non-empty content
 *   inter-token latency   the gaps between consecutive content chunks
 *   request latency       request sent -> data: [DONE]
 * An answer counts as completed only when it is HTTP 200, names a
 * finish_reason and ends with data: [DONE]; anything else is an error, counted
 * by kind. Aggregate output tokens/s = the output tokens of completed requests
 * / the wall time from the first request sent to the last byte received.
 * Output tokens come from the answer's final usage chunk (requested with
 * stream_options.include_usage) or, when a server sends none, one per content
 * chunk; the report says which. The same chunk's prompt_tokens_details gives
 * the prompt tokens the server read from its prefix cache, and an X-Replica
 * header (tools/replicas/haproxy.cfg sets it) which replica answered.
 *
 * Loopback only: a load generator pointed at someone else's server is an
 * attack, so any host outside 127.0.0.0/8, localhost and ::1 is refused. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

/* ---- options ------------------------------------------------------------ */

typedef struct {
    const char *url;
    char host[256];               /* as written in the URL (for messages) */
    struct sockaddr_storage addr; /* the loopback address to connect to */
    socklen_t addr_len;
    int port;
    int n_requests, concurrency;
    bool n_given;                 /* -n was on the command line */
    int prompt_tokens;            /* asked: a request's prompt tokens (a turn's user message in conversations) */
    int system_tokens;            /* asked: a conversation's system prompt tokens */
    int conversations, turns;     /* conversations > 0: the multi-turn workload */
    bool no_probe;                /* count one token per word, without asking the server */
    /* Set by calibrate(): how the server counts, and the words that make the asked tokens. */
    double tokens_per_word;       /* a prompt word's tokens on average (1 with --no-probe) */
    double template_tokens;       /* what the chat template adds to a one-message prompt (0 with --no-probe) */
    int prompt_words, system_words;
    int output_tokens;            /* max_tokens of every request */
    double shared_prefix;         /* share of the prompt identical across requests, [0, 1] */
    const char *model;            /* NULL: the first model of GET /v1/models */
    double temperature;
    double timeout_s;             /* per request: connect to [DONE] */
    bool ignore_eos;              /* send "ignore_eos": true (a common extension) */
    bool json, samples;
    int seed;
} Options;

static void usage(FILE *f) {
    fprintf(f,
        "usage: loadgen [options]\n"
        "Sends N streaming chat requests, C at a time, to an OpenAI-compatible server on\n"
        "this machine and reports output tokens/s, time to first token, inter-token latency\n"
        "and request latency (mean, p50, p90, p99), the share of prompt tokens the server\n"
        "read from its prefix cache, and errors.\n"
        "  --url URL              the server, http://HOST:PORT (default http://127.0.0.1:8080);\n"
        "                         HOST must be loopback: 127.x.x.x, localhost or [::1]\n"
        "  -n, --requests N       requests in all (default 32)\n"
        "  -c, --concurrency C    requests in flight at once (default 4)\n"
        "  --prompt-tokens P      prompt tokens of each request, chat template included (default 128);\n"
        "                         two probe requests first measure how the server counts words\n"
        "  --no-probe             no probe: count one token per word and none for the template\n"
        "  --output-tokens O      max_tokens of each request (default 64)\n"
        "  --shared-prefix F      share of the prompt identical in every request, 0..1 (default 0)\n"
        "multi-turn (instead of -n): K conversations, C at a time, each T turns in order, every turn\n"
        "sending the whole conversation so far (the earlier answers included):\n"
        "  --conversations K      conversations, each with its own system prompt\n"
        "  --turns T              turns of each (default 4)\n"
        "  --system-tokens S      tokens of each conversation's system prompt (default 256); a turn's\n"
        "                         user message has P tokens (--prompt-tokens)\n"
        "  --model NAME           the model field (default: the first of GET /v1/models)\n"
        "  --temperature T        sampling temperature (default 0)\n"
        "  --ignore-eos           ask the server to generate all O tokens (\"ignore_eos\": true)\n"
        "  --timeout S            seconds a request may take in all (default 120)\n"
        "  --seed N               seed of the prompts' words (default 1)\n"
        "  --json                 one JSON object on stdout instead of the table\n"
        "  --samples              with --json, every request's own figures and gaps\n"
        "  -h, --help             this text\n"
        "Exit status: 0 when every request completed, 1 when any failed, 2 on a bad command line.\n");
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out, char *err) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) {
        err_set(err, "%s needs an integer from %ld to %ld, got '%s'", flag, lo, hi, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out,
                        char *err) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= lo && v <= hi)) {
        err_set(err, "%s needs a number from %g to %g, got '%s'", flag, lo, hi, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* host: an address literal or "localhost"; it must be loopback. */
static int target_set_host(Options *o, const char *host, char *err) {
    snprintf(o->host, sizeof o->host, "%s", host);
    const char *lit = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&o->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&o->addr;
    memset(&o->addr, 0, sizeof o->addr);
    if (inet_pton(AF_INET, lit, &a4->sin_addr) == 1 && (ntohl(a4->sin_addr.s_addr) >> 24) == 127) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
        o->addr_len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, lit, &a6->sin6_addr) == 1 && IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        o->addr_len = sizeof *a6;
        return 0;
    }
    err_set(err, "refusing host '%s': loadgen only talks to this machine's loopback "
            "(127.0.0.0/8, localhost, ::1)", host);
    return -1;
}

/* http://HOST[:PORT][/]: HOST may be [IPv6]. */
static int target_parse_url(Options *o, const char *url, char *err) {
    const char *p = url;
    if (strncmp(p, "http://", 7) != 0) {
        err_set(err, "--url must start with http:// (got '%s')", url);
        return -1;
    }
    p += 7;
    char host[256];
    size_t n;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close) {
            err_set(err, "--url '%s': no ']' after the IPv6 address", url);
            return -1;
        }
        n = (size_t)(close - p - 1);
        if (n >= sizeof host) n = sizeof host - 1;
        memcpy(host, p + 1, n);
        p = close + 1;
    } else {
        n = strcspn(p, ":/");
        if (n >= sizeof host) n = sizeof host - 1;
        memcpy(host, p, n);
        p += strcspn(p, ":/");
    }
    host[n] = '\0';
    o->port = 80;
    if (*p == ':') {
        char port[16];
        size_t k = strcspn(p + 1, "/");
        snprintf(port, sizeof port, "%.*s", (int)(k < 15 ? k : 15), p + 1);
        long v;
        if (parse_long("the port of --url", port, 1, 65535, &v, err)) return -1;
        o->port = (int)v;
        p += 1 + k;
    }
    if (*p && strcmp(p, "/") != 0) {
        err_set(err, "--url takes http://HOST:PORT only, not a path ('%s')", p);
        return -1;
    }
    o->url = url;
    return target_set_host(o, host, err);
}

/* The options that take a number: name, short alias, limits, where it goes. */
typedef struct { const char *name, *alias; double lo, hi; bool integer; size_t offset; } NumOption;

static const NumOption NUM_OPTIONS[] = {
    {"--requests", "-n", 1, 1000000, true, offsetof(Options, n_requests)},
    {"--concurrency", "-c", 1, 1024, true, offsetof(Options, concurrency)},
    {"--prompt-tokens", NULL, 1, 100000, true, offsetof(Options, prompt_tokens)},
    {"--system-tokens", NULL, 1, 100000, true, offsetof(Options, system_tokens)},
    {"--conversations", NULL, 1, 100000, true, offsetof(Options, conversations)},
    {"--turns", NULL, 1, 1000, true, offsetof(Options, turns)},
    {"--output-tokens", NULL, 1, 1000000, true, offsetof(Options, output_tokens)},
    {"--seed", NULL, 0, 2147483647, true, offsetof(Options, seed)},
    {"--shared-prefix", NULL, 0, 1, false, offsetof(Options, shared_prefix)},
    {"--temperature", NULL, 0, 100, false, offsetof(Options, temperature)},
    {"--timeout", NULL, 0.001, 86400, false, offsetof(Options, timeout_s)},
};

static int option_number(Options *o, const NumOption *opt, const char *flag, const char *v, char *err) {
    char *field = (char *)o + opt->offset;
    if (opt->integer) {
        long l;
        if (parse_long(flag, v, (long)opt->lo, (long)opt->hi, &l, err)) return -1;
        *(int *)field = (int)l;
        return 0;
    }
    return parse_double(flag, v, opt->lo, opt->hi, (double *)field, err);
}

/* Returns 0 to run, 1 after --help, -1 with err on a bad command line. */
static int options_parse(Options *o, int argc, char **argv, char *err) {
    *o = (Options){.n_requests = 32, .concurrency = 4, .prompt_tokens = 128, .system_tokens = 256, .turns = 4,
                   .output_tokens = 64, .timeout_s = 120, .seed = 1};
    const char *url = "http://127.0.0.1:8080";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        if (!strcmp(a, "--ignore-eos")) { o->ignore_eos = true; continue; }
        if (!strcmp(a, "--json")) { o->json = true; continue; }
        if (!strcmp(a, "--samples")) { o->samples = true; continue; }
        if (!strcmp(a, "--no-probe")) { o->no_probe = true; continue; }
        const NumOption *num = NULL;
        for (size_t k = 0; k < sizeof NUM_OPTIONS / sizeof NUM_OPTIONS[0]; k++)
            if (!strcmp(a, NUM_OPTIONS[k].name) || (NUM_OPTIONS[k].alias && !strcmp(a, NUM_OPTIONS[k].alias)))
                num = &NUM_OPTIONS[k];
        if (!num && strcmp(a, "--url") && strcmp(a, "--model")) {
            err_set(err, "unknown option '%s' (loadgen --help lists them)", a);
            return -1;
        }
        const char *v = argv[++i];
        if (!v) {
            err_set(err, "%s needs a value", a);
            return -1;
        }
        if (num && option_number(o, num, a, v, err)) return -1;
        if (num && !strcmp(num->name, "--requests")) o->n_given = true;
        if (!strcmp(a, "--url")) url = v;
        if (!strcmp(a, "--model")) o->model = v;
    }
    if (o->conversations) {
        if (o->n_given) {
            err_set(err, "-n and --conversations: give one (conversations send K x T requests)");
            return -1;
        }
        if ((long)o->conversations * o->turns > 1000000) {
            err_set(err, "--conversations x --turns is more than 1000000 requests");
            return -1;
        }
        o->n_requests = o->conversations * o->turns;
    }
    int parallel = o->conversations ? o->conversations : o->n_requests;
    if (o->concurrency > parallel) o->concurrency = parallel;
    return target_parse_url(o, url, err);
}

/* ---- prompts -------------------------------------------------------------- */

/* Common English words: with their leading space, each is one token in Qwen's
 * vocabulary, but two or three in the smaller vocabularies of the models
 * tools/mkmodel makes. Byte-level BPE does not merge across the spaces, so a
 * prompt's tokens are the sum of its words' tokens: calibrate() measures the
 * average on the server itself. */
static const char *const PROMPT_WORDS[64] = {
    "time", "day", "house", "water", "tree", "light", "friend", "story",
    "garden", "river", "city", "road", "music", "book", "world", "family",
    "market", "window", "morning", "evening", "summer", "winter", "mountain", "village",
    "school", "paper", "table", "color", "voice", "dream", "ocean", "forest",
    "bridge", "letter", "island", "kitchen", "station", "picture", "journey", "answer",
    "question", "number", "language", "animal", "flower", "planet", "machine", "doctor",
    "teacher", "student", "country", "history", "science", "energy", "problem", "system",
    "people", "power", "money", "night", "field", "stone", "cloud", "door",
};

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void append_word(Buf *b, const char *w) {
    if (b->len) buf_puts(b, " ");
    buf_puts(b, w);
}

/* n words from the generator at seed; with tag >= 0 the first two spell tag
 * (up to 4096 tags), so that texts of different tags differ from their start. */
static void words_make(Buf *out, uint64_t seed, int n, int tag) {
    for (int k = 0; k < n; k++) {
        int w = tag >= 0 && k == 0 ? tag % 64 : tag >= 0 && k == 1 ? (tag / 64) % 64 : (int)(splitmix64(&seed) % 64);
        append_word(out, PROMPT_WORDS[w]);
    }
}

static uint64_t seed_of(const Options *o, uint64_t stream) {
    return (uint64_t)o->seed * 0x2545F4914F6CDD1Dull + stream;
}

/* Request i's prompt: the shared words (the same for every request), then the
 * request's own words, tagged i: no two requests share more than the shared part. */
static void prompt_make(const Options *o, int i, Buf *out) {
    int shared = (int)lround(o->prompt_words * o->shared_prefix);
    words_make(out, seed_of(o, 0), shared, -1);
    Buf own = {0};
    words_make(&own, seed_of(o, (uint64_t)i + 1), o->prompt_words - shared, i);
    if (own.len) append_word(out, own.data);
    buf_free(&own);
}

/* Conversation c's system prompt (tagged c: conversations differ from their
 * first word) and its turn t's user message. */
static void system_make(const Options *o, int c, Buf *out) {
    words_make(out, seed_of(o, 1u << 30 | (uint64_t)c), o->system_words, c);
}

static void user_make(const Options *o, int c, int t, Buf *out) {
    words_make(out, seed_of(o, (uint64_t)1 << 40 | (uint64_t)c << 20 | (uint64_t)t), o->prompt_words, t);
}

static void append_message(Buf *b, const char *role, const char *text, size_t n) {
    buf_printf(b, "%s{\"role\":\"%s\",\"content\":", b->len && b->data[b->len - 1] != '[' ? "," : "", role);
    json_append_string(b, text, n);
    buf_puts(b, "}");
}

/* A chat request's body up to its messages' "[": the messages come next. */
static void body_open(const Options *o, const char *model, Buf *b) {
    buf_puts(b, "{\"model\":");
    json_append_string(b, model, strlen(model));
    buf_puts(b, ",\"messages\":[");
}

/* Closes the messages and adds the sampling fields. */
static void body_close(const Options *o, int max_tokens, bool stream, Buf *b) {
    buf_printf(b, "],\"stream\":%s,", stream ? "true" : "false");
    if (stream) buf_puts(b, "\"stream_options\":{\"include_usage\":true},");
    buf_printf(b, "\"max_tokens\":%d,\"temperature\":", max_tokens);
    json_append_number(b, o->temperature);
    if (o->ignore_eos) buf_puts(b, ",\"ignore_eos\":true");
    buf_puts(b, "}");
}

static void request_body(const Options *o, const char *model, int i, Buf *b) {
    Buf prompt = {0};
    prompt_make(o, i, &prompt);
    body_open(o, model, b);
    append_message(b, "user", prompt.data, prompt.len);
    body_close(o, o->output_tokens, true, b);
    buf_free(&prompt);
}

/* ---- what went wrong ------------------------------------------------------ */

typedef enum {
    ERR_NONE,
    ERR_CONNECT,     /* could not connect or send the request */
    ERR_TIMEOUT,     /* --timeout passed */
    ERR_HTTP,        /* a status other than 200 */
    ERR_PROTOCOL,    /* not HTTP, bad chunked framing, a chunk that is not JSON */
    ERR_SERVER,      /* an "error" object inside the stream */
    ERR_INCOMPLETE,  /* the stream ended before [DONE], or had no finish_reason */
    ERR_SKIPPED,     /* not sent: an earlier turn of its conversation failed */
    N_ERR_KINDS
} ErrKind;

static const char *const ERR_NAMES[N_ERR_KINDS] = {
    "none", "connect", "timeout", "http_status", "protocol", "server_error", "incomplete", "skipped",
};

typedef struct {
    ErrKind kind;
    char msg[ERR_MAX];
} Failure;

static int fail(Failure *f, ErrKind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Failure *f, ErrKind kind, const char *fmt, ...) {
    if (f->kind != ERR_NONE) return -1; /* the first cause is the one to report */
    f->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- an HTTP/1.1 client connection ----------------------------------------- */

typedef enum { BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_CLOSE } Framing;

typedef struct {
    int fd;
    double deadline;      /* time_now_ms() after which the request has failed */
    char buf[16384];      /* received bytes [0, len); consumed up to pos */
    size_t pos, len;
    int status;
    Framing framing;
    uint64_t left;        /* BODY_LENGTH: bytes of body left; BODY_CHUNKED: of the current chunk */
    bool chunk_crlf;      /* BODY_CHUNKED: a chunk's data ended, its CRLF is still to come */
    char replica[64];     /* the X-Replica header (which replica behind a balancer answered), or "" */
    bool body_done;
} Conn;

/* Waits until fd is ready for events or the deadline passes: 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - time_now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, left > 1e6 ? 1000000 : (int)ceil(left));
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 1; /* let the next call report the error */
    }
}

static int conn_open(Conn *c, const Options *o, double deadline, Failure *f) {
    memset(c, 0, sizeof *c);
    c->deadline = deadline;
    c->fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return fail(f, ERR_CONNECT, "socket: %s", strerror(errno));
    if (connect(c->fd, (const struct sockaddr *)&o->addr, o->addr_len) != 0) {
        if (errno != EINPROGRESS) return fail(f, ERR_CONNECT, "connect to %s:%d: %s", o->host, o->port, strerror(errno));
        if (!wait_fd(c->fd, POLLOUT, deadline)) return fail(f, ERR_TIMEOUT, "connect to %s:%d: timed out", o->host, o->port);
        int e = 0;
        socklen_t len = sizeof e;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len);
        if (e) return fail(f, ERR_CONNECT, "connect to %s:%d: %s", o->host, o->port, strerror(e));
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

static void conn_close(Conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

static int conn_send(Conn *c, const char *data, size_t n, Failure *f) {
    while (n > 0) {
        ssize_t w = send(c->fd, data, n, MSG_NOSIGNAL);
        if (w > 0) {
            data += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(c->fd, POLLOUT, c->deadline)) return fail(f, ERR_TIMEOUT, "sending the request: timed out");
        } else {
            return fail(f, ERR_CONNECT, "sending the request: %s", strerror(errno));
        }
    }
    return 0;
}

/* Reads more bytes into buf: the count, 0 at end of stream, -1 on failure. */
static int conn_fill(Conn *c, Failure *f) {
    if (c->pos > 0) {
        memmove(c->buf, c->buf + c->pos, c->len - c->pos);
        c->len -= c->pos;
        c->pos = 0;
    }
    if (c->len == sizeof c->buf)
        return fail(f, ERR_PROTOCOL, "a header or chunk-size line longer than %zu bytes", sizeof c->buf);
    for (;;) {
        if (!wait_fd(c->fd, POLLIN, c->deadline))
            return fail(f, ERR_TIMEOUT, "no complete answer within --timeout");
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n > 0) {
            c->len += (size_t)n;
            return (int)n;
        }
        if (n == 0) return 0;
        if (errno != EAGAIN && errno != EINTR)
            return fail(f, ERR_INCOMPLETE, "connection lost: %s", strerror(errno));
    }
}

/* The next line (CRLF or LF), NUL-terminated in place without its end; valid
 * until the next read. NULL on failure, including the end of the stream. */
static char *conn_line(Conn *c, Failure *f) {
    for (;;) {
        char *start = c->buf + c->pos;
        char *nl = memchr(start, '\n', c->len - c->pos);
        if (nl) {
            *nl = '\0';
            if (nl > start && nl[-1] == '\r') nl[-1] = '\0';
            c->pos = (size_t)(nl + 1 - c->buf);
            return start;
        }
        int r = conn_fill(c, f);
        if (r == 0) fail(f, ERR_INCOMPLETE, "connection closed in the middle of the response head");
        if (r <= 0) return NULL;
    }
}

/* Status line and headers; sets status and how the body is framed. */
static int http_read_head(Conn *c, Failure *f) {
    char *line = conn_line(c, f);
    if (!line) return -1;
    int major, minor, status;
    if (sscanf(line, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 || status > 999)
        return fail(f, ERR_PROTOCOL, "not an HTTP status line: '%.80s'", line);
    c->status = status;
    c->framing = BODY_UNTIL_CLOSE;
    while ((line = conn_line(c, f)) && *line) {
        char *colon = strchr(line, ':');
        if (!colon) return fail(f, ERR_PROTOCOL, "bad header line '%.80s'", line);
        *colon = '\0';
        const char *v = colon + 1 + strspn(colon + 1, " \t");
        if (!strcasecmp(line, "transfer-encoding") && strcasestr(v, "chunked")) {
            c->framing = BODY_CHUNKED;
        } else if (!strcasecmp(line, "content-length") && c->framing != BODY_CHUNKED) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(v, &end, 10);
            if (errno || end == v || *end || *v == '-')
                return fail(f, ERR_PROTOCOL, "bad Content-Length '%.40s'", v);
            c->framing = BODY_LENGTH;
            c->left = n;
        } else if (!strcasecmp(line, "x-replica")) {
            snprintf(c->replica, sizeof c->replica, "%s", v);
        }
    }
    if (!line) return -1;
    c->body_done = c->framing == BODY_LENGTH && c->left == 0;
    return 0;
}

/* In BODY_CHUNKED, moves to the next chunk's data (or the end of the body). */
static int http_next_chunk(Conn *c, Failure *f) {
    char *line;
    if (c->chunk_crlf) {
        if (!(line = conn_line(c, f))) return -1;
        if (*line) return fail(f, ERR_PROTOCOL, "a chunk's data is not followed by CRLF");
        c->chunk_crlf = false;
    }
    if (!(line = conn_line(c, f))) return -1;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(line, &end, 16);
    if (errno || end == line || (*end && *end != ';' && *end != ' ') || n > (1ull << 40))
        return fail(f, ERR_PROTOCOL, "bad chunk-size line '%.40s'", line);
    if (n == 0) { /* the last chunk: skip trailers up to the blank line */
        while ((line = conn_line(c, f)) && *line) {}
        if (!line) return -1;
        c->body_done = true;
        return 0;
    }
    c->left = n;
    c->chunk_crlf = true;
    return 0;
}

/* Up to cap bytes of the body into out: the count, 0 at its end, -1 on failure. */
static long http_read_body(Conn *c, char *out, size_t cap, Failure *f) {
    if (c->framing == BODY_CHUNKED && c->left == 0 && !c->body_done && http_next_chunk(c, f)) return -1;
    if (c->body_done) return 0;
    if (c->pos == c->len) {
        int r = conn_fill(c, f);
        if (r < 0) return -1;
        if (r == 0) {
            if (c->framing == BODY_UNTIL_CLOSE) {
                c->body_done = true;
                return 0;
            }
            return fail(f, ERR_INCOMPLETE, "connection closed in the middle of the body");
        }
    }
    size_t n = c->len - c->pos;
    if (n > cap) n = cap;
    if (c->framing != BODY_UNTIL_CLOSE && n > c->left) n = (size_t)c->left;
    memcpy(out, c->buf + c->pos, n);
    c->pos += n;
    if (c->framing != BODY_UNTIL_CLOSE) {
        c->left -= n;
        if (c->framing == BODY_LENGTH && c->left == 0) c->body_done = true;
    }
    return (long)n;
}

/* The whole body (at most max bytes kept), for non-streaming answers. */
static int http_read_all(Conn *c, Buf *out, size_t max, Failure *f) {
    char tmp[4096];
    long n;
    while ((n = http_read_body(c, tmp, sizeof tmp, f)) > 0)
        if (out->len < max) buf_append(out, tmp, (size_t)n);
    buf_append(out, "", 0);
    return n < 0 ? -1 : 0;
}

static int http_send_request(Conn *c, const Options *o, const char *method, const char *path,
                             const Buf *body, Failure *f) {
    Buf head = {0};
    buf_printf(&head, "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: loadgen\r\n"
               "Connection: close\r\n", method, path, o->host, o->port);
    if (body)
        buf_printf(&head, "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                   "Content-Length: %zu\r\n", body->len);
    buf_puts(&head, "\r\n");
    int r = conn_send(c, head.data, head.len, f);
    if (!r && body) r = conn_send(c, body->data, body->len, f);
    buf_free(&head);
    return r;
}

/* A non-200 answer's reason: its JSON error.message, else its first line. */
static void http_error_reason(Conn *c, Failure *f) {
    Buf body = {0};
    Failure ignored = {0};
    http_read_all(c, &body, 4096, &ignored);
    JsonValue *v = json_parse(body.data, body.len, NULL);
    const JsonValue *e = v ? json_get(v, "error") : NULL;
    const JsonValue *m = e && e->type == JSON_OBJECT ? json_get(e, "message") : e;
    if (m && m->type == JSON_STRING) {
        fail(f, ERR_HTTP, "HTTP %d: %.300s", c->status, m->string);
    } else {
        int n = (int)strcspn(body.data, "\r\n");
        fail(f, ERR_HTTP, "HTTP %d: %.*s", c->status, n < 300 ? n : 300, body.data);
    }
    json_free(v);
    buf_free(&body);
}

/* ---- one streamed answer --------------------------------------------------- */

typedef struct {
    double t_sent, t_first, t_end;  /* ms (time_now_ms clock); t_first < 0 until text came */
    double t_last_content;
    int chunks;                     /* chunks that carried text */
    int usage_completion;           /* usage.completion_tokens, -1 when none came */
    int usage_prompt;               /* usage.prompt_tokens, -1 when none came */
    int usage_cached;               /* usage.prompt_tokens_details.cached_tokens, -1 when none came */
    int conversation, turn;         /* multi-turn: which (turn from 1); else -1, 0 */
    char replica[64];               /* the X-Replica header, or "" */
    Buf reply;                      /* the answer's content: the next turn sends it back */
    char finish_reason[32];         /* "" until one came */
    bool done;                      /* data: [DONE] came */
    double *itl;                    /* [n_itl] gaps between content chunks, ms */
    int n_itl, cap_itl;
    Failure failure;
} Request;

static bool request_ok(const Request *r) { return r->failure.kind == ERR_NONE; }

/* Output tokens of a completed request, and whether they came from usage. */
static int request_tokens(const Request *r, bool *from_usage) {
    *from_usage = r->usage_completion >= 0;
    return *from_usage ? r->usage_completion : r->chunks;
}

static const char *text_of(const JsonValue *obj, const char *key) {
    const JsonValue *v = obj ? json_get(obj, key) : NULL;
    return v && v->type == JSON_STRING ? v->string : NULL;
}

static int int_of(const JsonValue *obj, const char *key) {
    const JsonValue *v = obj ? json_get(obj, key) : NULL;
    return v && v->type == JSON_NUMBER && v->number >= 0 && v->number < 2e9 ? (int)v->number : -1;
}

static void request_content(Request *r, double now) {
    if (r->chunks == 0) {
        r->t_first = now;
    } else {
        if (r->n_itl == r->cap_itl) {
            r->cap_itl = r->cap_itl ? 2 * r->cap_itl : 64;
            r->itl = xrealloc(r->itl, (size_t)r->cap_itl * sizeof *r->itl);
        }
        r->itl[r->n_itl++] = now - r->t_last_content;
    }
    r->t_last_content = now;
    r->chunks++;
}

/* One event's data: a chat.completion.chunk, or [DONE] (returns 1). */
static int request_event(Request *r, const char *data, size_t len, double now, Failure *f) {
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) return 1;
    char err[ERR_MAX];
    JsonValue *v = json_parse(data, len, err);
    if (!v || v->type != JSON_OBJECT) {
        json_free(v);
        return fail(f, ERR_PROTOCOL, "event %d is not a JSON object: %s", r->chunks + 1, v ? "other JSON" : err);
    }
    const JsonValue *e = json_get(v, "error");
    if (e && e->type != JSON_NULL) {
        const char *m = e->type == JSON_OBJECT ? text_of(e, "message") : e->type == JSON_STRING ? e->string : NULL;
        fail(f, ERR_SERVER, "error in the stream: %.300s", m ? m : "(no message)");
        json_free(v);
        return -1;
    }
    const JsonValue *choices = json_get(v, "choices");
    if (choices && choices->type == JSON_ARRAY && choices->n_items > 0) {
        const JsonValue *c0 = &choices->items[0];
        const JsonValue *delta = c0->type == JSON_OBJECT ? json_get(c0, "delta") : NULL;
        const char *content = text_of(delta, "content");
        const char *reasoning = text_of(delta, "reasoning_content");
        if ((content && *content) || (reasoning && *reasoning)) request_content(r, now);
        if (content) buf_puts(&r->reply, content);
        const char *finish = text_of(c0, "finish_reason");
        if (finish) snprintf(r->finish_reason, sizeof r->finish_reason, "%s", *finish ? finish : "?");
    }
    const JsonValue *usage = json_get(v, "usage");
    if (usage && usage->type == JSON_OBJECT) {
        r->usage_completion = int_of(usage, "completion_tokens");
        r->usage_prompt = int_of(usage, "prompt_tokens");
        const JsonValue *details = json_get(usage, "prompt_tokens_details");
        if (details && details->type == JSON_OBJECT) r->usage_cached = int_of(details, "cached_tokens");
    }
    json_free(v);
    return 0;
}

/* Server-sent events: lines; "data:" lines gather into an event, which a
 * blank line ends; ":" lines are comments; other fields are ignored. */
typedef struct {
    Buf line;   /* the line being read, without its end */
    Buf data;   /* the event's data lines joined by \n */
    bool has_data;
} Sse;

#define SSE_MAX_LINE (8u << 20)

/* One complete line: 1 after [DONE], 0 to go on, -1 on failure. */
static int sse_line(Sse *s, Request *r, double now, Failure *f) {
    char *l = s->line.data ? s->line.data : "";
    size_t n = s->line.len;
    if (n && l[n - 1] == '\r') l[--n] = '\0';
    if (n == 0) {
        if (!s->has_data) return 0;
        int done = request_event(r, s->data.data, s->data.len, now, f);
        s->data.len = 0;
        s->has_data = false;
        return done;
    }
    if (l[0] == ':') return 0;
    size_t field = strcspn(l, ":");
    if (field != 4 || memcmp(l, "data", 4) != 0) return 0;
    const char *value = l + 5 < l + n ? l + 5 : l + n;
    if (*value == ' ') value++;
    if (s->has_data) buf_append(&s->data, "\n", 1);
    buf_append(&s->data, value, (size_t)(l + n - value));
    s->has_data = true;
    return 0;
}

/* Reads the event stream to [DONE]. */
static int request_stream(Conn *c, Request *r, Failure *f) {
    Sse s = {0};
    char tmp[8192];
    int done = 0;
    long n;
    while (!done && (n = http_read_body(c, tmp, sizeof tmp, f)) > 0) {
        double now = time_now_ms();
        for (const char *p = tmp, *end = tmp + n; p < end && !done;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t k = (size_t)((nl ? nl : end) - p);
            buf_append(&s.line, p, k);
            p += k;
            if (s.line.len > SSE_MAX_LINE) {
                fail(f, ERR_PROTOCOL, "an event line longer than %u bytes", SSE_MAX_LINE);
                done = -1;
            } else if (nl) {
                p++;
                done = sse_line(&s, r, now, f);
                s.line.len = 0;
            }
        }
    }
    buf_free(&s.line);
    buf_free(&s.data);
    if (done < 0 || f->kind != ERR_NONE) return -1;
    r->t_end = time_now_ms();
    r->done = done == 1;
    if (!r->done)
        return fail(f, ERR_INCOMPLETE, "the stream ended after %d content chunks without data: [DONE]", r->chunks);
    if (!r->finish_reason[0])
        return fail(f, ERR_INCOMPLETE, "the stream ended with [DONE] but no finish_reason");
    return 0;
}

/* Sends body and reads the streamed answer into r. */
static void request_run(const Options *o, Buf *body, Request *r) {
    Failure *f = &r->failure;
    Conn c;
    r->t_sent = time_now_ms();
    if (!conn_open(&c, o, r->t_sent + o->timeout_s * 1e3, f) &&
        !http_send_request(&c, o, "POST", "/v1/chat/completions", body, f) &&
        !http_read_head(&c, f)) {
        memcpy(r->replica, c.replica, sizeof r->replica);
        if (c.status != 200)
            http_error_reason(&c, f);
        else
            request_stream(&c, r, f);
    }
    if (f->kind != ERR_NONE) r->t_end = time_now_ms();
    conn_close(&c);
}

static Request request_new(int conversation, int turn) {
    return (Request){.t_first = -1, .usage_completion = -1, .usage_prompt = -1, .usage_cached = -1,
                     .conversation = conversation, .turn = turn};
}

/* Conversation c: its turns in order, each sending the system prompt, the
 * earlier turns with their answers, and its own user message. A failed turn
 * ends the conversation: the turns after it are counted as skipped. */
static void conversation_run(const Options *o, const char *model, int c, Request *turns) {
    Buf system = {0}, messages = {0}, user = {0}, body = {0};
    system_make(o, c, &system);
    append_message(&messages, "system", system.data, system.len);
    bool failed = false;
    for (int t = 0; t < o->turns; t++) {
        Request *r = &turns[t];
        *r = request_new(c, t + 1);
        if (failed) {
            r->failure.kind = ERR_SKIPPED;
            snprintf(r->failure.msg, sizeof r->failure.msg, "turn %d of conversation %d failed", t, c);
            continue;
        }
        user.len = 0;
        user_make(o, c, t, &user);
        body.len = 0;
        body_open(o, model, &body);
        buf_append(&body, messages.data, messages.len);
        append_message(&body, "user", user.data, user.len);
        body_close(o, o->output_tokens, true, &body);
        request_run(o, &body, r);
        failed = !request_ok(r);
        /* what the next turn sends back: this turn's message and its answer */
        append_message(&messages, "user", user.data, user.len);
        append_message(&messages, "assistant", r->reply.data ? r->reply.data : "", r->reply.len);
    }
    buf_free(&system);
    buf_free(&messages);
    buf_free(&user);
    buf_free(&body);
}

/* The first model of GET /v1/models. */
static char *model_discover(const Options *o, char *err) {
    Conn c;
    Failure f = {0};
    Buf body = {0};
    char *id = NULL;
    if (!conn_open(&c, o, time_now_ms() + o->timeout_s * 1e3, &f) &&
        !http_send_request(&c, o, "GET", "/v1/models", NULL, &f) && !http_read_head(&c, &f) &&
        !http_read_all(&c, &body, 1 << 20, &f)) {
        JsonValue *v = json_parse(body.data, body.len, NULL);
        const JsonValue *data = v ? json_get(v, "data") : NULL;
        const char *name = data && data->type == JSON_ARRAY && data->n_items ? text_of(&data->items[0], "id") : NULL;
        if (c.status == 200 && name) id = xstrdup(name);
        else err_set(err, "GET /v1/models on %s gave HTTP %d without a model id; pass --model", o->url, c.status);
        json_free(v);
    } else {
        err_set(err, "cannot list the models of %s: %s", o->url, f.msg);
    }
    conn_close(&c);
    buf_free(&body);
    return id;
}

/* ---- how the server counts ---------------------------------------------------- */

/* The prompt tokens the server counts for one user message of the words
 * PROMPT_WORDS[0..63] repeated reps times (the last word first: the probes
 * share little with the requests' prompts, which begin with the first ones),
 * from a non-streaming request for one token. -1 with err. */
static int probe_tokens(const Options *o, const char *model, int reps, char *err) {
    Buf text = {0}, body = {0}, answer = {0};
    for (int k = 0; k < 64 * reps; k++) append_word(&text, PROMPT_WORDS[63 - k % 64]);
    body_open(o, model, &body);
    append_message(&body, "user", text.data, text.len);
    body_close(o, 1, false, &body);
    Conn c;
    Failure f = {0};
    int n = -1;
    if (!conn_open(&c, o, time_now_ms() + o->timeout_s * 1e3, &f) &&
        !http_send_request(&c, o, "POST", "/v1/chat/completions", &body, &f) && !http_read_head(&c, &f) &&
        !http_read_all(&c, &answer, 1 << 20, &f)) {
        JsonValue *v = json_parse(answer.data, answer.len, NULL);
        n = c.status == 200 && v ? int_of(json_get(v, "usage"), "prompt_tokens") : -1;
        if (n < 0)
            err_set(err, "the probe request (to count the server's tokens) got HTTP %d without usage.prompt_tokens: "
                    "pass --no-probe to count one token per word", c.status);
        json_free(v);
    } else {
        err_set(err, "the probe request (to count the server's tokens) failed: %s", f.msg);
    }
    conn_close(&c);
    buf_free(&text);
    buf_free(&body);
    buf_free(&answer);
    return n;
}

static int words_for(double tokens, double tokens_per_word) {
    long w = lround(tokens / tokens_per_word);
    return w < 1 ? 1 : w > 1000000 ? 1000000 : (int)w;
}

/* How many words make the asked tokens. Two probes, of the 64 words once and
 * twice (each word equally often, as in the prompts on average; the second
 * begins with the first, which a server's prefix cache does not compute again), give
 * the tokens a word takes and what the chat template adds around one message. The prompts are
 * then exact on average, within a few tokens each: counting exactly would
 * need the model's own tokenizer, and loadgen talks to servers, not files. */
static int calibrate(Options *o, const char *model, char *err) {
    o->tokens_per_word = 1;
    o->template_tokens = 0;
    if (!o->no_probe) {
        int a = probe_tokens(o, model, 1, err), b = a < 0 ? -1 : probe_tokens(o, model, 2, err);
        if (b < 0) return -1;
        if (b <= a) {
            err_set(err, "the server counted %d prompt tokens for 64 words and %d for 128: "
                    "pass --no-probe to count one token per word", a, b);
            return -1;
        }
        o->tokens_per_word = (b - a) / 64.0;
        o->template_tokens = a - 64 * o->tokens_per_word;
    }
    double own = o->conversations ? 0 : o->template_tokens; /* a turn's message: its own tokens only */
    o->prompt_words = words_for(o->prompt_tokens - own, o->tokens_per_word);
    o->system_words = words_for(o->system_tokens, o->tokens_per_word);
    return 0;
}

/* ---- the run ---------------------------------------------------------------- */

typedef struct {
    const Options *o;
    const char *model;
    Request *requests;   /* [n_requests]; conversations: [conversations][turns] */
    atomic_int next;     /* the next request (or conversation) to send */
} Run;

static void *worker(void *arg) {
    Run *run = arg;
    const Options *o = run->o;
    int i;
    while ((i = atomic_fetch_add(&run->next, 1)) < (o->conversations ? o->conversations : o->n_requests)) {
        if (o->conversations) {
            conversation_run(o, run->model, i, &run->requests[(size_t)i * o->turns]);
            continue;
        }
        Buf body = {0};
        request_body(o, run->model, i, &body);
        run->requests[i] = request_new(-1, 0);
        request_run(o, &body, &run->requests[i]);
        buf_free(&body);
    }
    return NULL;
}

/* ---- figures ----------------------------------------------------------------- */

typedef struct {
    int n;
    double mean, min, p50, p90, p99, max;
} Stats;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least pct% of the samples <= it. */
static double percentile(const double *sorted, int n, int pct) {
    long rank = ((long)pct * n + 99) / 100;
    return sorted[rank > 0 ? rank - 1 : 0];
}

static Stats stats_of(double *x, int n) {
    Stats s = {.n = n};
    if (n == 0) return s;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    s.mean = sum / n;
    s.min = x[0];
    s.max = x[n - 1];
    s.p50 = percentile(x, n, 50);
    s.p90 = percentile(x, n, 90);
    s.p99 = percentile(x, n, 99);
    return s;
}

/* Prompt tokens, and those the server read from its prefix cache. */
typedef struct {
    int n;                              /* requests that said both */
    long long prompt, cached;
    Stats ttft;                         /* by_turn only */
} Cache;

typedef struct {
    int completed, errors;
    int by_kind[N_ERR_KINDS];
    const char *example[N_ERR_KINDS];   /* the first message of each kind */
    long long output_tokens;            /* of completed requests */
    int from_usage;                     /* completed requests counted from usage */
    long long prompt_tokens;            /* usage.prompt_tokens of completed requests */
    int n_prompt;
    Cache cache;                        /* of completed requests that said their cached tokens */
    Cache *by_turn;                     /* conversations: [turns] */
    double wall_s;                      /* first request sent -> last byte received */
    Stats ttft, itl, latency;           /* ms, over completed requests (ttft: those with text) */
} Summary;

static void cache_add(Cache *c, const Request *r) {
    if (r->usage_prompt < 0 || r->usage_cached < 0) return;
    c->n++;
    c->prompt += r->usage_prompt;
    c->cached += r->usage_cached;
}

static double cache_share(const Cache *c) { return c->prompt ? (double)c->cached / c->prompt : 0; }

/* Conversations: each turn's cache share and TTFT (over its completed requests). */
static void summarize_turns(const Options *o, const Request *req, Summary *s) {
    s->by_turn = xcalloc((size_t)o->turns, sizeof *s->by_turn);
    double *ttft = xmalloc((size_t)o->conversations * sizeof *ttft);
    for (int t = 0; t < o->turns; t++) {
        Cache *c = &s->by_turn[t];
        int n = 0;
        for (int k = 0; k < o->conversations; k++) {
            const Request *r = &req[(size_t)k * o->turns + t];
            if (!request_ok(r)) continue;
            cache_add(c, r);
            if (r->chunks) ttft[n++] = r->t_first - r->t_sent;
        }
        c->ttft = stats_of(ttft, n);
    }
    free(ttft);
}

static Summary summarize(const Options *o, const Request *req) {
    Summary s = {0};
    int n = o->n_requests, n_itl = 0, n_ttft = 0;
    double t0 = INFINITY, t1 = -INFINITY;
    for (int i = 0; i < n; i++) n_itl += request_ok(&req[i]) ? req[i].n_itl : 0;
    double *ttft = xmalloc((size_t)n * sizeof *ttft), *lat = xmalloc((size_t)n * sizeof *lat);
    double *itl = xmalloc((size_t)(n_itl ? n_itl : 1) * sizeof *itl);
    n_itl = 0;
    for (int i = 0; i < n; i++) {
        const Request *r = &req[i];
        if (r->failure.kind == ERR_SKIPPED) { /* never sent: no times */
            s.errors++;
            if (!s.by_kind[ERR_SKIPPED]++) s.example[ERR_SKIPPED] = r->failure.msg;
            continue;
        }
        if (r->t_sent < t0) t0 = r->t_sent;
        if (r->t_end > t1) t1 = r->t_end;
        if (!request_ok(r)) {
            s.errors++;
            if (!s.by_kind[r->failure.kind]++) s.example[r->failure.kind] = r->failure.msg;
            continue;
        }
        bool from_usage;
        s.output_tokens += request_tokens(r, &from_usage);
        s.from_usage += from_usage;
        if (r->usage_prompt >= 0) s.prompt_tokens += r->usage_prompt, s.n_prompt++;
        cache_add(&s.cache, r);
        if (r->chunks) ttft[n_ttft++] = r->t_first - r->t_sent;
        lat[s.completed] = r->t_end - r->t_sent;
        s.completed++;
        memcpy(itl + n_itl, r->itl, (size_t)r->n_itl * sizeof *itl);
        n_itl += r->n_itl;
    }
    s.wall_s = t1 > t0 ? (t1 - t0) / 1e3 : 0;
    s.ttft = stats_of(ttft, n_ttft);
    s.latency = stats_of(lat, s.completed);
    s.itl = stats_of(itl, n_itl);
    if (o->conversations) summarize_turns(o, req, &s);
    free(ttft);
    free(lat);
    free(itl);
    return s;
}

static const char *count_source(const Summary *s) {
    if (s->completed == 0) return "none";
    return s->from_usage == s->completed ? "usage" : s->from_usage == 0 ? "chunks" : "mixed";
}

static double per_s(double x, double wall_s) { return wall_s > 0 ? x / wall_s : 0; }

static void report_text(const Options *o, const char *model, const Summary *s) {
    if (o->conversations)
        printf("loadgen: %d conversations of %d turns, %d at a time, system prompt %d words, user messages %d words, "
               "max_tokens %d, model \"%s\" at %s\n", o->conversations, o->turns, o->concurrency, o->system_words,
               o->prompt_words, o->output_tokens, model, o->url);
    else
        printf("loadgen: %d requests, %d at a time, prompt %d words (%.0f%% shared), "
               "max_tokens %d, model \"%s\" at %s\n", o->n_requests, o->concurrency, o->prompt_words,
               o->shared_prefix * 100, o->output_tokens, model, o->url);
    if (o->no_probe) printf("words          one token each (--no-probe)\n");
    else printf("words          %.2f tokens each, and %.1f for the chat template (two probe requests)\n",
                o->tokens_per_word, o->template_tokens);
    printf("completed      %d of %d, %d errors, wall %.3f s (first request sent to last byte)\n",
           s->completed, o->n_requests, s->errors, s->wall_s);
    const char *src = count_source(s);
    printf("output         %lld tokens (counted from %s), %.1f tokens/s aggregate, %.2f requests/s\n",
           s->output_tokens, !strcmp(src, "chunks") ? "content chunks" : !strcmp(src, "usage") ? "usage" :
           !strcmp(src, "none") ? "no completed request" : "usage where sent, else chunks",
           per_s((double)s->output_tokens, s->wall_s), per_s(s->completed, s->wall_s));
    if (s->n_prompt) printf("prompt         %.1f tokens per request (usage)\n", (double)s->prompt_tokens / s->n_prompt);
    if (s->cache.n)
        printf("cached         %lld of %lld prompt tokens (%.1f%%) read from the prefix cache (usage, %d requests)\n",
               s->cache.cached, s->cache.prompt, 100 * cache_share(&s->cache), s->cache.n);
    for (int t = 0; s->by_turn && t < o->turns; t++) {
        const Cache *c = &s->by_turn[t];
        printf("turn %-4d      %d requests, %.1f prompt tokens, %.1f%% cached, ttft p50 %.2f p90 %.2f ms\n", t + 1, c->n,
               c->n ? (double)c->prompt / c->n : 0, 100 * cache_share(c), c->ttft.p50, c->ttft.p90);
    }
    printf("%-14s %9s %9s %9s %9s %9s %9s\n", "ms", "mean", "min", "p50", "p90", "p99", "max");
    const struct { const char *name; const Stats *st; } rows[] = {
        {"ttft", &s->ttft}, {"inter-token", &s->itl}, {"latency", &s->latency}};
    for (int i = 0; i < 3; i++) {
        const Stats *t = rows[i].st;
        if (!t->n) printf("%-14s %9s\n", rows[i].name, "-");
        else printf("%-14s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", rows[i].name, t->mean, t->min,
                    t->p50, t->p90, t->p99, t->max);
    }
    for (int k = 1; k < N_ERR_KINDS; k++)
        if (s->by_kind[k]) printf("error %-12s %d, first: %s\n", ERR_NAMES[k], s->by_kind[k], s->example[k]);
}

static void json_key(Buf *b, const char *key) {
    if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') buf_puts(b, ",");
    json_append_string(b, key, strlen(key));
    buf_puts(b, ":");
}

static void json_num(Buf *b, const char *key, double x) {
    json_key(b, key);
    json_append_number(b, x);
}

static void json_str(Buf *b, const char *key, const char *s) {
    json_key(b, key);
    if (s) json_append_string(b, s, strlen(s));
    else buf_puts(b, "null");
}

static void json_stats(Buf *b, const char *key, const Stats *s) {
    json_key(b, key);
    buf_puts(b, "{");
    json_num(b, "n", s->n);
    const char *names[] = {"mean", "min", "p50", "p90", "p99", "max"};
    const double vals[] = {s->mean, s->min, s->p50, s->p90, s->p99, s->max};
    for (int i = 0; i < 6; i++) {
        if (s->n) json_num(b, names[i], vals[i]);
        else json_str(b, names[i], NULL);
    }
    buf_puts(b, "}");
}

static void json_request(Buf *b, int i, const Request *r) {
    buf_puts(b, "{");
    json_num(b, "index", i);
    json_key(b, "ok");
    buf_puts(b, request_ok(r) ? "true" : "false");
    json_num(b, "sent_ms", r->t_sent);
    if (r->chunks) json_num(b, "ttft_ms", r->t_first - r->t_sent);
    else json_str(b, "ttft_ms", NULL);
    json_num(b, "latency_ms", r->t_end - r->t_sent);
    json_num(b, "content_chunks", r->chunks);
    json_num(b, "usage_completion_tokens", r->usage_completion);
    json_num(b, "usage_prompt_tokens", r->usage_prompt);
    json_num(b, "usage_cached_tokens", r->usage_cached);
    if (r->conversation >= 0) {
        json_num(b, "conversation", r->conversation);
        json_num(b, "turn", r->turn);
    }
    json_str(b, "replica", r->replica[0] ? r->replica : NULL);
    json_str(b, "finish_reason", r->finish_reason[0] ? r->finish_reason : NULL);
    json_str(b, "error_kind", request_ok(r) ? NULL : ERR_NAMES[r->failure.kind]);
    json_str(b, "error", request_ok(r) ? NULL : r->failure.msg);
    json_key(b, "itl_ms");
    buf_puts(b, "[");
    for (int k = 0; k < r->n_itl; k++) {
        if (k) buf_puts(b, ",");
        json_append_number(b, r->itl[k]);
    }
    buf_puts(b, "]}");
}

static void report_json(const Options *o, const char *model, const Summary *s, const Request *req) {
    Buf b = {0};
    buf_puts(&b, "{");
    json_str(&b, "url", o->url);
    json_str(&b, "model", model);
    json_num(&b, "requests", o->n_requests);
    json_num(&b, "concurrency", o->concurrency);
    json_num(&b, "prompt_tokens_asked", o->prompt_tokens);
    json_num(&b, "prompt_words", o->prompt_words);
    json_num(&b, "tokens_per_word", o->tokens_per_word);
    json_num(&b, "template_tokens", o->template_tokens);
    if (o->conversations) {
        json_num(&b, "conversations", o->conversations);
        json_num(&b, "turns", o->turns);
        json_num(&b, "system_words", o->system_words);
    }
    json_num(&b, "shared_prefix", o->shared_prefix);
    json_num(&b, "max_tokens", o->output_tokens);
    json_num(&b, "completed", s->completed);
    json_num(&b, "errors", s->errors);
    json_key(&b, "error_kinds");
    buf_puts(&b, "{");
    for (int k = 1; k < N_ERR_KINDS; k++) json_num(&b, ERR_NAMES[k], s->by_kind[k]);
    buf_puts(&b, "}");
    json_key(&b, "error_examples");
    buf_puts(&b, "{");
    for (int k = 1; k < N_ERR_KINDS; k++)
        if (s->example[k]) json_str(&b, ERR_NAMES[k], s->example[k]);
    buf_puts(&b, "}");
    json_num(&b, "wall_s", s->wall_s);
    json_num(&b, "output_tokens", (double)s->output_tokens);
    json_str(&b, "output_tokens_counted_from", count_source(s));
    json_num(&b, "output_tokens_per_s", per_s((double)s->output_tokens, s->wall_s));
    json_num(&b, "requests_per_s", per_s(s->completed, s->wall_s));
    if (s->n_prompt) json_num(&b, "prompt_tokens_mean", (double)s->prompt_tokens / s->n_prompt);
    else json_str(&b, "prompt_tokens_mean", NULL);
    json_num(&b, "cached_prompt_tokens", (double)s->cache.cached);
    json_num(&b, "cached_share", cache_share(&s->cache));
    json_stats(&b, "ttft_ms", &s->ttft);
    json_stats(&b, "itl_ms", &s->itl);
    json_stats(&b, "latency_ms", &s->latency);
    if (s->by_turn) {
        json_key(&b, "by_turn");
        buf_puts(&b, "[");
        for (int t = 0; t < o->turns; t++) {
            const Cache *c = &s->by_turn[t];
            buf_puts(&b, t ? ",{" : "{");
            json_num(&b, "turn", t + 1);
            json_num(&b, "requests", c->n);
            json_num(&b, "prompt_tokens", (double)c->prompt);
            json_num(&b, "cached_tokens", (double)c->cached);
            json_num(&b, "cached_share", cache_share(c));
            json_stats(&b, "ttft_ms", &c->ttft);
            buf_puts(&b, "}");
        }
        buf_puts(&b, "]");
    }
    if (o->samples) {
        json_key(&b, "per_request");
        buf_puts(&b, "[");
        for (int i = 0; i < o->n_requests; i++) {
            if (i) buf_puts(&b, ",");
            json_request(&b, i, &req[i]);
        }
        buf_puts(&b, "]");
    }
    buf_puts(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    buf_free(&b);
}

int main(int argc, char **argv) {
    Options o;
    char err[ERR_MAX];
    int r = options_parse(&o, argc, argv, err);
    if (r == 1) {
        usage(stdout);
        return 0;
    }
    if (r < 0) {
        fprintf(stderr, "loadgen: %s\n", err);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char *model = o.model ? xstrdup(o.model) : model_discover(&o, err);
    if (!model || calibrate(&o, model, err)) {
        fprintf(stderr, "loadgen: %s\n", err);
        free(model);
        return 1;
    }
    Run run = {.o = &o, .model = model, .requests = xcalloc((size_t)o.n_requests, sizeof(Request))};
    atomic_init(&run.next, 0);
    pthread_t *threads = xcalloc((size_t)o.concurrency, sizeof *threads);
    int started = 0;
    for (; started < o.concurrency; started++)
        if (pthread_create(&threads[started], NULL, worker, &run) != 0) break;
    if (started == 0) {
        fprintf(stderr, "loadgen: cannot start a worker thread\n");
        return 1;
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);

    Summary s = summarize(&o, run.requests);
    if (o.json) report_json(&o, model, &s, run.requests);
    else report_text(&o, model, &s);
    for (int i = 0; i < o.n_requests; i++) {
        free(run.requests[i].itl);
        buf_free(&run.requests[i].reply);
    }
    free(run.requests);
    free(s.by_turn);
    free(threads);
    free(model);
    return s.errors ? 1 : 0;
}
