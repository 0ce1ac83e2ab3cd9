/* http.c: see http.h. */
#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK_LINE_MAX 1024      /* a chunk-size line with its extensions */
#define TRAILERS_MAX 8192        /* the trailer section of a chunked body */
#define POLL_SLICE_MS 100        /* how often a waiting read looks at the stop flag */

HttpLimits http_limits_default(void) {
    return (HttpLimits){
        .max_request_line = 8 * 1024,
        .max_header_bytes = 32 * 1024,
        .max_headers = 100,
        .max_body = 8 * 1024 * 1024,
        .timeout_ms = 30 * 1000,
    };
}

const char *http_header(const HttpRequest *r, const char *name) {
    for (int i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0) return r->headers[i].value;
    return NULL;
}

void http_request_free(HttpRequest *r) {
    free(r->mem);
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static int bad(int *status, int code, char *err, const char *what) {
    *status = code;
    err_set(err, "%s", what);
    return -1;
}

/* ---- the head -------------------------------------------------------------------- */

/* RFC 9110 tchar: what method and header names are made of. */
static bool is_tchar(unsigned char c) {
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* The end of the line starting at p (the index of its LF), or -1 if there is none in buf[p..len). */
static long find_lf(const char *buf, size_t len, size_t p) {
    if (p >= len) return -1;
    const char *lf = memchr(buf + p, '\n', len - p);
    return lf ? lf - buf : -1;
}

/* Length of the line [p, lf) without a trailing CR. */
static size_t line_len(const char *buf, size_t p, long lf) {
    size_t n = (size_t)lf - p;
    return n > 0 && buf[p + n - 1] == '\r' ? n - 1 : n;
}

static bool is_known_method(const char *m) {
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0) return true;
    return false;
}

/* "METHOD SP target SP HTTP/1.x" in line[0..n), written NUL-separated in place. */
static int parse_request_line(char *line, size_t n, HttpRequest *req, int *status, char *err) {
    line[n] = '\0';
    char *sp1 = memchr(line, ' ', n);
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp2) return bad(status, 400, err, "malformed request line: expected 'METHOD /path HTTP/1.1'");
    size_t mlen = (size_t)(sp1 - line);
    if (mlen == 0) return bad(status, 400, err, "malformed request line: empty method");
    if (sp2 == sp1 + 1) return bad(status, 400, err, "malformed request line: empty target");
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)line[i])) return bad(status, 400, err, "malformed request line: bad character in the method");
    char *target = sp1 + 1;
    *sp2 = '\0';
    for (char *t = target; *t; t++)
        if ((unsigned char)*t < 0x20 || *t == 0x7f) return bad(status, 400, err, "malformed request line: control character in the target");
    const char *v = sp2 + 1;
    if (strncmp(v, "HTTP/", 5) != 0 || !(v[5] >= '0' && v[5] <= '9') || v[6] != '.' || !(v[7] >= '0' && v[7] <= '9') ||
        v[8] != '\0')
        return bad(status, 400, err, "malformed request line: the version must be HTTP/1.0 or HTTP/1.1");
    if (v[5] != '1') return bad(status, 505, err, "HTTP version not supported: only HTTP/1.0 and HTTP/1.1");
    if (mlen >= sizeof req->method) return bad(status, 501, err, "method not implemented");
    memcpy(req->method, line, mlen);
    req->method[mlen] = '\0';
    if (!is_known_method(req->method)) {
        err_set(err, "method '%s' not implemented", req->method);
        *status = 501;
        return -1;
    }
    if (target[0] != '/') return bad(status, 400, err, "the request target must be a path starting with '/'");
    req->minor = v[7] == '0' ? 0 : 1;
    req->target = target;
    return 0;
}

/* "name: value" in line[0..n), written NUL-separated in place into *h. */
static int parse_header_line(char *line, size_t n, HttpHeader *h, int *status, char *err) {
    line[n] = '\0';
    if (line[0] == ' ' || line[0] == '\t')
        return bad(status, 400, err, "header line folded onto several lines (obsolete, not accepted)");
    char *colon = memchr(line, ':', n);
    if (!colon) return bad(status, 400, err, "header line without a colon");
    if (colon == line) return bad(status, 400, err, "header line with an empty name");
    for (char *c = line; c < colon; c++)
        if (!is_tchar((unsigned char)*c)) return bad(status, 400, err, "bad character in a header name (no blanks before the colon)");
    *colon = '\0';
    char *v = colon + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    *end = '\0';
    for (char *c = v; c < end; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
            return bad(status, 400, err, "control character in a header value");
    h->name = line;
    h->value = v;
    return 0;
}

/* Does the comma-separated header value list contain token (case-insensitive)? */
static bool list_has(const char *list, const char *token) {
    size_t n = strlen(token);
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && (t[-1] == ' ' || t[-1] == '\t')) t--;
        if ((size_t)(t - p) == n && strncasecmp(p, token, n) == 0) return true;
        p = e;
    }
    return false;
}

/* Fills *req from the complete head buf[start..head_end), whose lines end at
 * the LFs found earlier. */
static int build_request(const char *buf, size_t start, size_t head_end, int n_headers, HttpRequest *req, int *status,
                         char *err) {
    size_t n = head_end - start;
    req->mem = xmalloc(2 * n + 2); /* the head, then a copy of the path */
    memcpy(req->mem, buf + start, n);
    req->mem[n] = '\0';
    req->headers = xcalloc((size_t)n_headers + 1, sizeof *req->headers);
    char *p = req->mem;
    char *lf = strchr(p, '\n');
    if (parse_request_line(p, line_len(p, 0, lf - p), req, status, err) != 0) return -1;
    p = lf + 1;
    while ((lf = strchr(p, '\n')) != NULL) {
        size_t ln = line_len(p, 0, lf - p);
        if (ln == 0) break;
        if (memchr(p, '\r', ln)) return bad(status, 400, err, "bare CR inside a header line");
        if (parse_header_line(p, ln, &req->headers[req->n_headers], status, err) != 0) return -1;
        req->n_headers++;
        p = lf + 1;
    }
    char *path = req->mem + n + 1;
    size_t plen = strcspn(req->target, "?#");
    memcpy(path, req->target, plen);
    path[plen] = '\0';
    req->path = path;
    int hosts = 0;
    for (int i = 0; i < req->n_headers; i++) hosts += strcasecmp(req->headers[i].name, "Host") == 0;
    if (hosts > 1) return bad(status, 400, err, "more than one Host header");
    if (req->minor == 1 && hosts == 0) return bad(status, 400, err, "missing Host header (HTTP/1.1 requires one)");
    const char *conn = http_header(req, "Connection");
    req->keep_alive = req->minor == 1 ? !list_has(conn, "close") : list_has(conn, "keep-alive");
    return 0;
}

long http_parse_head(const char *buf, size_t len, const HttpLimits *lim, HttpRequest *req, int *status, char *err) {
    memset(req, 0, sizeof *req);
    size_t start = 0;
    while (start < len && (buf[start] == '\n' || (buf[start] == '\r' && start + 1 < len && buf[start + 1] == '\n')))
        start += buf[start] == '\r' ? 2 : 1;
    if (start > lim->max_request_line) return bad(status, 400, err, "too many empty lines before the request line");
    long lf = find_lf(buf, len, start);
    if (lf < 0) { /* a CR at the end may be the line's own, which the limit does not count */
        size_t pending = len - start;
        if (pending > 0 && buf[len - 1] == '\r') pending--;
        if (pending > lim->max_request_line) goto line_too_long;
        return 0;
    }
    if (line_len(buf, start, lf) > lim->max_request_line) goto line_too_long;
    size_t hstart = (size_t)lf + 1, p = hstart;
    int n_headers = 0;
    for (;;) {
        lf = find_lf(buf, len, p);
        if (lf < 0) {
            if (len - hstart > lim->max_header_bytes) goto headers_too_large;
            return 0;
        }
        if ((size_t)lf + 1 - hstart > lim->max_header_bytes) goto headers_too_large;
        size_t ln = line_len(buf, p, lf);
        p = (size_t)lf + 1;
        if (ln == 0) break;
        if (++n_headers > lim->max_headers) {
            err_set(err, "more than %d header lines", lim->max_headers);
            *status = 431;
            return -1;
        }
    }
    if (memchr(buf + start, '\0', p - start)) return bad(status, 400, err, "NUL byte in the request head");
    if (build_request(buf, start, p, n_headers, req, status, err) != 0) {
        http_request_free(req);
        return -1;
    }
    return (long)p;
line_too_long:
    err_set(err, "request line longer than %zu bytes", lim->max_request_line);
    *status = 414;
    return -1;
headers_too_large:
    err_set(err, "header lines larger than %zu bytes in all", lim->max_header_bytes);
    *status = 431;
    return -1;
}

/* ---- the body -------------------------------------------------------------------- */

static int parse_content_length(const char *v, size_t *out) {
    if (!*v) return -1;
    size_t x = 0;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        if (x > (SIZE_MAX - 9) / 10) return -1;
        x = x * 10 + (size_t)(*c - '0');
    }
    *out = x;
    return 0;
}

int http_body_framing(const HttpRequest *req, size_t max_body, HttpBodyFraming *f, int *status, char *err) {
    memset(f, 0, sizeof *f);
    bool have_len = false, have_te = false;
    for (int i = 0; i < req->n_headers; i++) {
        const HttpHeader *h = &req->headers[i];
        if (strcasecmp(h->name, "Transfer-Encoding") == 0) {
            if (strcasecmp(h->value, "chunked") != 0) {
                err_set(err, "Transfer-Encoding '%s' not supported (only chunked)", h->value);
                *status = 501;
                return -1;
            }
            if (have_te) return bad(status, 400, err, "Transfer-Encoding given twice");
            have_te = f->chunked = true;
        } else if (strcasecmp(h->name, "Content-Length") == 0) {
            size_t n;
            if (parse_content_length(h->value, &n) != 0) {
                err_set(err, "invalid Content-Length '%s'", h->value);
                *status = 400;
                return -1;
            }
            if (have_len && n != f->length) return bad(status, 400, err, "conflicting Content-Length headers");
            have_len = true;
            f->length = n;
        }
    }
    if (have_len && have_te) return bad(status, 400, err, "both Content-Length and Transfer-Encoding (ambiguous framing)");
    if (f->length > max_body) {
        err_set(err, "request body of %zu bytes is larger than the limit of %zu bytes", f->length, max_body);
        *status = 413;
        return -1;
    }
    return 0;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

/* The size on a chunk-size line [p, p+n): hex digits, then optional
 * blanks and ";extensions", which are ignored. -1 if malformed or too big. */
static long chunk_size(const char *s, size_t n, size_t limit) {
    size_t i = 0, x = 0;
    for (; i < n && hex_value(s[i]) >= 0; i++) {
        x = x * 16 + (size_t)hex_value(s[i]);
        if (x > limit) return -2;
    }
    if (i == 0) return -1;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i < n && s[i] != ';') return -1;
    return (long)x;
}

/* The trailer section after the last chunk: lines up to an empty one.
 * Returns the offset past it, 0 if incomplete, -1 if too large. */
static long skip_trailers(const char *buf, size_t len, size_t p) {
    size_t start = p;
    for (;;) {
        long lf = find_lf(buf, len, p);
        if (lf < 0) return len - start > TRAILERS_MAX ? -1 : 0;
        if ((size_t)lf + 1 - start > TRAILERS_MAX) return -1;
        size_t ln = line_len(buf, p, lf);
        p = (size_t)lf + 1;
        if (ln == 0) return (long)p;
    }
}

long http_parse_chunked(const char *buf, size_t len, size_t max_body, Buf *out, int *status, char *err) {
    out->len = 0;
    buf_append(out, "", 0);
    size_t p = 0;
    for (;;) {
        long lf = find_lf(buf, len, p);
        if (lf < 0) {
            if (len - p > CHUNK_LINE_MAX) return bad(status, 400, err, "chunked body: chunk-size line too long");
            return 0;
        }
        if ((size_t)lf - p > CHUNK_LINE_MAX) /* the same limit as for a line still arriving */
            return bad(status, 400, err, "chunked body: chunk-size line too long");
        long size = chunk_size(buf + p, line_len(buf, p, lf), max_body - out->len);
        if (size == -1) return bad(status, 400, err, "chunked body: malformed chunk-size line");
        if (size == -2) {
            err_set(err, "chunked request body larger than the limit of %zu bytes", max_body);
            *status = 413;
            return -1;
        }
        p = (size_t)lf + 1;
        if (size == 0) {
            long end = skip_trailers(buf, len, p);
            if (end < 0) return bad(status, 431, err, "chunked body: trailer section too large");
            return end;
        }
        if (len - p < (size_t)size + 1) return 0;
        const char *after = buf + p + size;
        if (after[0] == '\r' && len - p < (size_t)size + 2) return 0;
        if (!(after[0] == '\n' || (after[0] == '\r' && after[1] == '\n')))
            return bad(status, 400, err, "chunked body: chunk data longer than its size");
        buf_append(out, buf + p, (size_t)size);
        p += (size_t)size + (after[0] == '\r' ? 2 : 1);
    }
}

/* ---- the reader ---------------------------------------------------------------------- */

void http_reader_init(HttpReader *r, const HttpLimits *lim) {
    memset(r, 0, sizeof *r);
    r->lim = *lim;
}

void http_reader_free(HttpReader *r) {
    http_request_free(&r->req);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

char *http_reader_space(HttpReader *r, size_t *n) {
    if (r->cap - r->len < 16384) {
        r->cap = r->cap ? r->cap * 2 : 65536;
        r->buf = xrealloc(r->buf, r->cap);
    }
    *n = r->cap - r->len - 1;
    return r->buf + r->len;
}

void http_reader_added(HttpReader *r, size_t n) {
    r->len += n;
    if (r->head && r->len > (size_t)r->head) r->continue_due = false; /* the body began without waiting */
}

bool http_reader_take_continue(HttpReader *r) {
    bool due = r->continue_due;
    r->continue_due = false;
    return due;
}

bool http_reader_started(const HttpReader *r) { return r->len > 0 || r->head > 0; }
bool http_reader_has_head(const HttpReader *r) { return r->head > 0; }

static void reader_consume(HttpReader *r, size_t n) {
    memmove(r->buf, r->buf + n, r->len - n);
    r->len -= n;
}

/* The body after the parsed head: 1 done (in req), 0 more needed, or a status. */
static int reader_body(HttpReader *r, char *err) {
    size_t head = (size_t)r->head;
    if (!r->framing.chunked) {
        size_t n = r->framing.length;
        if (r->len - head < n) return 0;
        r->req.body = xmalloc(n + 1);
        memcpy(r->req.body, r->buf + head, n);
        r->req.body[n] = '\0';
        r->req.body_len = n;
        reader_consume(r, head + n);
        return 1;
    }
    Buf body = {0};
    int status;
    long n = http_parse_chunked(r->buf + head, r->len - head, r->lim.max_body, &body, &status, err);
    if (n > 0) {
        r->req.body = body.data;
        r->req.body_len = body.len;
        reader_consume(r, head + (size_t)n);
        return 1;
    }
    buf_free(&body);
    if (n < 0) return status;
    if (r->len - head > 2 * r->lim.max_body + 65536) { /* framing that outweighs the data */
        err_set(err, "chunked request body larger than the limit of %zu bytes (with its framing)", r->lim.max_body);
        return 413;
    }
    return 0;
}

int http_reader_next(HttpReader *r, HttpRequest *req, char *err) {
    int status;
    if (!r->head) {
        long head = http_parse_head(r->buf, r->len, &r->lim, &r->req, &status, err);
        if (head <= 0) return head < 0 ? status : 0;
        if (http_body_framing(&r->req, r->lim.max_body, &r->framing, &status, err) != 0) {
            http_request_free(&r->req);
            return status;
        }
        r->head = head;
        const char *expect = http_header(&r->req, "Expect");
        bool has_body = r->framing.chunked || r->framing.length > 0;
        r->continue_due = expect && strcasecmp(expect, "100-continue") == 0 && has_body && r->len == (size_t)head;
    }
    int rc = reader_body(r, err);
    if (rc == 0) return 0;
    if (rc == 1) *req = r->req;
    else http_request_free(&r->req);
    memset(&r->req, 0, sizeof r->req);
    r->head = 0;
    r->continue_due = false;
    return rc;
}

/* ---- the blocking connection ------------------------------------------------------------ */

void http_conn_init(HttpConn *c, int fd, const HttpLimits *lim, const atomic_bool *stop) {
    c->fd = fd;
    c->stop = stop;
    http_reader_init(&c->rd, lim);
}

void http_conn_free(HttpConn *c) { http_reader_free(&c->rd); }

/* Reads more bytes before the deadline. 1: got some; 0: the peer closed;
 * -1: timed out; -2: stop was set. */
static int conn_fill(HttpConn *c, double deadline) {
    for (;;) {
        if (c->stop && atomic_load(c->stop)) return -2;
        double left = deadline - time_now_ms();
        if (left <= 0) return -1;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, left < POLL_SLICE_MS ? (int)left + 1 : POLL_SLICE_MS);
        if (r < 0 && errno != EINTR) return 0;
        if (r <= 0) continue;
        size_t room;
        char *at = http_reader_space(&c->rd, &room);
        ssize_t n = recv(c->fd, at, room, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return 0;
        http_reader_added(&c->rd, (size_t)n);
        return 1;
    }
}

int http_read_request(HttpConn *c, HttpRequest *req, char *err) {
    memset(req, 0, sizeof *req);
    double deadline = time_now_ms() + c->rd.lim.timeout_ms;
    for (;;) {
        int rc = http_reader_next(&c->rd, req, err);
        if (rc != 0) return rc == 1 ? 0 : rc;
        if (http_reader_take_continue(&c->rd) && http_write_all(c->fd, HTTP_CONTINUE, strlen(HTTP_CONTINUE)) != 0)
            return -1;
        bool started = http_reader_started(&c->rd);
        int r = conn_fill(c, deadline);
        if (r == -1 && started) {
            err_set(err, "the request did not arrive within the timeout of %.0f s", c->rd.lim.timeout_ms / 1000.0);
            return 408;
        }
        if (r <= 0) return -1;
    }
}

/* ---- writing ----------------------------------------------------------------------- */

int http_write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

const char *http_status_text(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static void append_head(Buf *b, int status, const char *content_type, bool keep_alive, const char *extra) {
    buf_printf(b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nConnection: %s\r\n%s", status, http_status_text(status),
               content_type, keep_alive ? "keep-alive" : "close", extra ? extra : "");
}

int http_send(int fd, int status, const char *content_type, const char *body, size_t len, bool keep_alive,
              const char *extra_headers) {
    Buf b = {0};
    append_head(&b, status, content_type, keep_alive, extra_headers);
    buf_printf(&b, "Content-Length: %zu\r\n\r\n", len);
    buf_append(&b, body, len); /* one write: no small-packet delay between head and body */
    int rc = http_write_all(fd, b.data, b.len);
    buf_free(&b);
    return rc;
}

int http_stream_begin(HttpStream *s, int fd, int minor, int status, const char *content_type, bool keep_alive,
                      const char *extra_headers) {
    s->fd = fd;
    s->chunked = minor >= 1;
    s->failed = false;
    Buf b = {0};
    append_head(&b, status, content_type, keep_alive && s->chunked, extra_headers);
    buf_puts(&b, s->chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "\r\n");
    if (http_write_all(fd, b.data, b.len) != 0) s->failed = true;
    buf_free(&b);
    return s->failed ? -1 : 0;
}

int http_stream_write(HttpStream *s, const char *data, size_t n) {
    if (s->failed) return -1;
    if (n == 0) return 0; /* an empty chunk would end the body */
    Buf b = {0};
    if (s->chunked) buf_printf(&b, "%zx\r\n", n);
    buf_append(&b, data, n);
    if (s->chunked) buf_puts(&b, "\r\n");
    if (http_write_all(s->fd, b.data, b.len) != 0) s->failed = true;
    buf_free(&b);
    return s->failed ? -1 : 0;
}

int http_stream_end(HttpStream *s) {
    if (s->failed) return -1;
    if (s->chunked && http_write_all(s->fd, "0\r\n\r\n", 5) != 0) s->failed = true;
    return s->failed ? -1 : 0;
}

void sse_append_event(Buf *out, const char *data, size_t n) {
    size_t i = 0;
    for (;;) { /* one field per line; CRLF, LF and CR all end a line */
        size_t j = i;
        while (j < n && data[j] != '\n' && data[j] != '\r') j++;
        buf_puts(out, "data: ");
        buf_append(out, data + i, j - i);
        buf_puts(out, "\n");
        if (j >= n) break;
        if (data[j] == '\r' && j + 1 < n && data[j + 1] == '\n') j++;
        i = j + 1;
    }
    buf_puts(out, "\n");
}
