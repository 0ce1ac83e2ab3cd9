/* client.h: what the end-to-end server tests need: a chat-server process
 * on a free port of 127.0.0.1, and a small HTTP client over raw sockets that
 * can send anything (well-formed or not) and read any answer. */
#ifndef TESTS_SERVER_CLIENT_H
#define TESTS_SERVER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "json.h"
#include "util.h"

typedef struct {
    pid_t pid;
    int port;
    char log[512];      /* its stdout and stderr */
    char chapter[16];
} ServerProc;

/* Starts build/<chapter>/chat-server with args (NULL-terminated) and
 * --bind 127.0.0.1:0 (under $SERVER_WRAPPER if set, e.g. valgrind), and
 * waits for its "listening on" line. */
bool server_proc_start(ServerProc *s, const char *chapter, const char *const *args);
/* Sends sig and waits (60 s at most, then SIGKILL): the exit status, or -1
 * if it had to be killed or died of a signal. */
int server_proc_stop(ServerProc *s, int sig);
/* Everything it printed so far (malloc'ed). */
char *server_proc_log(const ServerProc *s);

/* The chapters whose chat-server the tests drive (SERVER_CHAPTERS). */
extern const char *server_chapters[]; /* NULL-terminated */

/* Runs the test body for every chapter with a chat-server. */
#define FOR_EACH_SERVER_CHAPTER(c) for (const char **c##_p = server_chapters, *c; (c = *c##_p) != NULL; c##_p++)

typedef struct {
    int status;        /* 0 if no answer came */
    char *head;        /* status line and headers */
    char *body;        /* de-chunked */
    size_t body_len;
    bool closed;       /* the server had closed the connection when it was read */
} HttpReply;

void http_reply_free(HttpReply *r);
/* A header's value in r (case-insensitive), copied into out; false if absent. */
bool http_reply_header(const HttpReply *r, const char *name, char *out, size_t cap);
/* The body parsed as JSON (NULL if it is not). */
JsonValue *http_reply_json(const HttpReply *r);

int client_connect(int port);
bool client_send(int fd, const void *data, size_t n);
/* Reads one whole answer from fd (Content-Length, chunked, or until close). */
bool client_read_reply(int fd, HttpReply *r, int timeout_ms);
/* Did the server close fd (within timeout_ms), with nothing more to read? */
bool client_closed(int fd, int timeout_ms);
/* The same as http_exchange, but the client stops sending (half-closes) after raw. */
bool http_exchange_half_closed(int port, const char *raw, size_t n, HttpReply *r, int timeout_ms);
/* Connects, sends raw bytes, reads one answer, closes. */
bool http_exchange(int port, const char *raw, size_t n, HttpReply *r, int timeout_ms);
bool http_get(int port, const char *path, HttpReply *r);
bool http_post(int port, const char *path, const char *json, HttpReply *r);

/* GET path and parse its JSON; NULL if that fails. */
JsonValue *get_json(int port, const char *path);
/* A number inside a JSON value by a path of keys ("usage", "prompt_tokens", NULL). */
double json_number_at(const JsonValue *v, ...);
const char *json_string_at(const JsonValue *v, ...);
/* The value of one sample line of /metrics (name with its labels, as printed), or -1. */
double metric_value(int port, const char *sample);
/* Polls /v1/kv until blocks_used is 0 (true) or timeout_ms passes (false). */
bool wait_pool_empty(int port, int timeout_ms);

/* Concatenates the content (chat) or text (completions) of the SSE chunks in
 * an event-stream body; checks the framing on the way (every event one JSON
 * chunk, ending with [DONE]); *finish gets the last finish_reason. false with
 * the reason in err if the stream is malformed. */
bool sse_collect(const char *body, Buf *text, char *finish, size_t finish_cap, char *err);

#endif
