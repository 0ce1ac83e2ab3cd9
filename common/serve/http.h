/* http.h: the server side of HTTP/1.1 (RFC 9112), as much as an API server
 * needs: reading requests within limits, and writing responses whole, in
 * chunks, or as Server-Sent Events.
 *
 * Everything a client sends is hostile until parsed: every line, header and
 * body has a size limit checked while the bytes arrive (so no client can make
 * the server buffer without end), and every way to get the grammar wrong gets
 * its 4xx status and a one-line reason. The parsers are pure functions over a
 * byte buffer, so the tests can feed them anything; HttpReader puts them
 * together for bytes that arrive in pieces (keep-alive and pipelining
 * included), and the server's event loop feeds it from the socket. */
#ifndef HTTP_H
#define HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef struct {
    size_t max_request_line;  /* bytes of "METHOD /target HTTP/1.1" (414 past it) */
    size_t max_header_bytes;  /* bytes of all header lines together (431 past it) */
    int max_headers;          /* header lines (431 past it) */
    size_t max_body;          /* body bytes, after de-chunking (413 past it) */
    int timeout_ms;           /* a request must arrive whole within this (408); an idle
                               * keep-alive connection is closed after it; writes to a
                               * client that does not read give up after it */
} HttpLimits;

/* 8 KiB request line, 32 KiB of headers, 100 headers, 8 MiB body, 30 s. */
HttpLimits http_limits_default(void);

typedef struct {
    const char *name;   /* as sent; compare with strcasecmp */
    const char *value;  /* without surrounding blanks */
} HttpHeader;

typedef struct {
    char method[16];      /* "GET", "POST", ... */
    const char *target;   /* as sent: "/v1/models?x=1" */
    const char *path;     /* the target without its query: "/v1/models" */
    int minor;            /* HTTP/1.minor: 0 or 1 */
    HttpHeader *headers;  /* [n_headers] */
    int n_headers;
    char *body;           /* [body_len] + NUL (never NULL after a successful read) */
    size_t body_len;
    bool keep_alive;      /* the connection may carry another request after this one */
    char *mem;            /* one allocation holding the head's strings */
} HttpRequest;

/* The value of a header (case-insensitive name; the first if repeated), or NULL. */
const char *http_header(const HttpRequest *r, const char *name);
void http_request_free(HttpRequest *r);

/* ---- parsing (pure: bytes in, request out) ------------------------------------ */

/* Parses the head (request line and header lines, up to the blank line) at
 * buf[0..len). Returns its length when complete, with *req filled in (free it
 * with http_request_free); 0 when more bytes are needed; -1 with *status and
 * err when it can never become valid: 400 malformed, 414 request line too
 * long, 431 headers too large or too many, 501 unknown method or transfer
 * coding, 505 not HTTP/1.x. Limits are checked on a partial head too. Lines
 * may end in CRLF or a bare LF; empty lines before the request line are
 * skipped (RFC 9112 section 2.2). */
long http_parse_head(const char *buf, size_t len, const HttpLimits *lim, HttpRequest *req, int *status,
                     char *err);

/* How the body after a parsed head is framed (RFC 9112 section 6.3). */
typedef struct {
    bool chunked;
    size_t length;  /* Content-Length, when not chunked (0 when absent) */
} HttpBodyFraming;

/* The framing a head declares: 0, or -1 with *status and err (400 for an
 * invalid or conflicting Content-Length or both Content-Length and
 * Transfer-Encoding, 501 for a transfer coding other than chunked, 413 for a
 * Content-Length above max_body). */
int http_body_framing(const HttpRequest *req, size_t max_body, HttpBodyFraming *f, int *status, char *err);

/* Decodes a chunked body (RFC 9112 section 7.1) at buf[0..len). Returns the
 * bytes it takes, through the last chunk and the trailer section, when
 * complete, with the data in *out (replaced); 0 when more bytes are needed;
 * -1 with *status (400 malformed, 413 more than max_body bytes of data) and err. */
long http_parse_chunked(const char *buf, size_t len, size_t max_body, Buf *out, int *status, char *err);

/* ---- reading requests as their bytes arrive ------------------------------------ */

/* The requests of one connection, read from bytes that come in any pieces:
 * put what the socket gave into http_reader_space, then ask http_reader_next
 * for a whole request. No socket and no clock: the server's event loop owns
 * those, so a connection that waits holds a few bytes here and no thread. */
typedef struct {
    HttpLimits lim;
    char *buf;               /* [cap]: buf[0..len) received and not yet used (the rest of a pipeline) */
    size_t len, cap;
    long head;               /* the current request's head length once parsed, else 0 */
    HttpRequest req;         /* that head */
    HttpBodyFraming framing; /* and its body's framing */
    bool continue_due;       /* it sent "Expect: 100-continue" and no body byte yet: owed a 100 */
} HttpReader;

void http_reader_init(HttpReader *r, const HttpLimits *lim);
void http_reader_free(HttpReader *r);
/* Where the next received bytes go: room for *n of them (at least 16 KiB).
 * Then http_reader_added(r, how many came). */
char *http_reader_space(HttpReader *r, size_t *n);
void http_reader_added(HttpReader *r, size_t n);
/* The next request from the bytes held. 1: *req filled in (free it with
 * http_request_free) and its bytes used; 0: more bytes are needed; or an
 * HTTP status >= 400 with err: the request is bad, answer it with that status
 * and close (the stream can no longer be trusted to be in step). Limits are
 * checked on what has arrived so far. */
int http_reader_next(HttpReader *r, HttpRequest *req, char *err);
/* True once for a request that asked for "100 Continue" before sending its
 * body: the caller writes HTTP_CONTINUE now. */
bool http_reader_take_continue(HttpReader *r);
#define HTTP_CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"
/* Has a request begun (some of its bytes are held)? Has its head arrived whole? */
bool http_reader_started(const HttpReader *r);
bool http_reader_has_head(const HttpReader *r);

/* ---- a blocking connection ------------------------------------------------------ */

/* An HttpReader on a socket read with blocking waits (tests and tools; the
 * server reads through its event loop instead). */
typedef struct {
    int fd;
    const atomic_bool *stop;  /* when set, a read waiting for a new request gives up */
    HttpReader rd;
} HttpConn;

/* stop may be NULL. The connection does not own fd. */
void http_conn_init(HttpConn *c, int fd, const HttpLimits *lim, const atomic_bool *stop);
void http_conn_free(HttpConn *c);

/* Reads the next request. Returns 0 with *req filled in; -1 when the
 * connection is over with nothing to answer (the peer closed it, or it stayed
 * idle past the timeout, or stop was set before a request began); or an HTTP
 * status >= 400 with err when the request is bad (as http_reader_next). A
 * request that sent "Expect: 100-continue" gets the interim 100 response
 * before its body is read. */
int http_read_request(HttpConn *c, HttpRequest *req, char *err);

/* ---- writing ------------------------------------------------------------------- */

/* Writes all of data; -1 if the peer is gone or does not read (never SIGPIPE). */
int http_write_all(int fd, const void *data, size_t n);
/* "OK", "Bad Request", ... ("Unknown" for a status it does not know). */
const char *http_status_text(int status);

/* A whole response with Content-Length. extra_headers: complete
 * "Name: value\r\n" lines, or NULL. Returns 0, or -1 if the peer is gone. */
int http_send(int fd, int status, const char *content_type, const char *body, size_t len, bool keep_alive,
              const char *extra_headers);

/* A response whose length is not known in advance: chunked for HTTP/1.1,
 * for HTTP/1.0 the body runs until the connection closes. */
typedef struct {
    int fd;
    bool chunked;
    bool failed;  /* a write failed: the peer is gone */
} HttpStream;

int http_stream_begin(HttpStream *s, int fd, int minor, int status, const char *content_type, bool keep_alive,
                      const char *extra_headers);
int http_stream_write(HttpStream *s, const char *data, size_t n); /* n == 0 writes nothing */
int http_stream_end(HttpStream *s);

/* Appends one Server-Sent Event carrying data[0..n): a "data: " field per
 * line of data (a line break inside data starts a new field, as the SSE
 * format requires), then the blank line that ends the event. */
void sse_append_event(Buf *out, const char *data, size_t n);

#endif
