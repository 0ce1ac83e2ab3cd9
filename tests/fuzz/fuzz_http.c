/* fuzz_http.c: any bytes as what a client sends on one connection. The first
 * byte picks the limits (bit 0 set: tiny ones, so that every limit is
 * reached; clear: the server's defaults); the rest is the byte stream.
 *
 * Two readings of the same bytes must agree:
 *   whole     http_parse_head over all of them, then http_body_framing and
 *             the body (Content-Length, or http_parse_chunked)
 *   streamed  an HttpReader fed the bytes in pieces whose sizes the bytes
 *             choose, asked for a request after each piece, as chat-server's
 *             event loop does with what each read gives; it reads request
 *             after request (pipelining) until the bytes end or one is refused
 * Every prefix of a complete head or chunked body must be "need more", never
 * refused (else a request cut across two reads would be refused whole).
 * A request accepted is well formed (known method, target from '/', valid
 * header names and values, Host for HTTP/1.1, body within the limit) and,
 * written back out canonically, parses again to the same request. Refusals
 * carry a 4xx/5xx status of the documented set and a reason. */
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "http.h"

#define FUZZ_HTTP_MAX (48 * 1024)

static HttpLimits fuzz_limits(uint8_t mode) {
    HttpLimits lim = http_limits_default();
    if (mode & 1) lim = (HttpLimits){.max_request_line = 40, .max_header_bytes = 120, .max_headers = 4, .max_body = 64};
    lim.timeout_ms = 60 * 1000; /* the stream always ends (EOF) before this */
    return lim;
}

static bool refusal_ok(int status, const char *err) {
    static const int statuses[] = {400, 413, 414, 431, 501, 505};
    bool known = false;
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) known |= status == statuses[i];
    return known && err[0] != '\0';
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* The prefixes of an accepted head or body that are tried: every one of the
 * first 512 bytes (where the tiny limits are), then fewer, and the last. */
static size_t next_cut(size_t cut, size_t n) {
    size_t next = cut + (cut < 512 ? 1 : 1 + cut / 8);
    return next >= n && cut + 1 < n ? n - 1 : next;
}

/* What an accepted request promises. */
static void check_request(const HttpRequest *r, const HttpLimits *lim) {
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"};
    bool known = false;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) known |= strcmp(r->method, methods[i]) == 0;
    FUZZ_ASSERT(known);
    FUZZ_ASSERT(r->target[0] == '/' && r->path[0] == '/');
    size_t plen = strlen(r->path);
    FUZZ_ASSERT(strncmp(r->target, r->path, plen) == 0 && strchr("?#", r->target[plen]) != NULL);
    FUZZ_ASSERT(r->minor == 0 || r->minor == 1);
    FUZZ_ASSERT(r->n_headers >= 0 && r->n_headers <= lim->max_headers);
    int hosts = 0;
    for (int i = 0; i < r->n_headers; i++) {
        const char *n = r->headers[i].name, *v = r->headers[i].value;
        FUZZ_ASSERT(n[0] != '\0' && strpbrk(n, " \t:\r\n") == NULL);
        FUZZ_ASSERT(strpbrk(v, "\r\n") == NULL);
        size_t vlen = strlen(v);
        FUZZ_ASSERT(vlen == 0 || (!is_blank(v[0]) && !is_blank(v[vlen - 1])));
        hosts += strcasecmp(n, "Host") == 0;
    }
    FUZZ_ASSERT(hosts <= 1 && (r->minor == 0 || hosts == 1));
    FUZZ_ASSERT(r->body != NULL && r->body[r->body_len] == '\0' && r->body_len <= lim->max_body);
}

/* The request written back with canonical framing (CRLF, one blank after the
 * colon, the body by Content-Length) must parse to the same request. */
static void check_round_trip(const HttpRequest *r, const HttpLimits *lim) {
    Buf b = {0};
    buf_printf(&b, "%s %s HTTP/1.%d\r\n", r->method, r->target, r->minor);
    for (int i = 0; i < r->n_headers; i++) {
        const char *n = r->headers[i].name;
        if (strcasecmp(n, "Transfer-Encoding") && strcasecmp(n, "Content-Length"))
            buf_printf(&b, "%s: %s\r\n", n, r->headers[i].value);
    }
    buf_printf(&b, "Content-Length: %zu\r\n\r\n", r->body_len);
    size_t head_len = b.len;
    buf_append(&b, r->body, r->body_len);
    HttpLimits roomy = *lim; /* canonical framing may be longer than what was sent */
    roomy.max_request_line += 16;
    roomy.max_header_bytes = b.len + 64;
    roomy.max_headers = r->n_headers + 1;
    HttpRequest again;
    int status;
    char err[ERR_MAX];
    long n = http_parse_head(b.data, b.len, &roomy, &again, &status, err);
    if (n <= 0) fprintf(stderr, "written back:\n%s\nrefused: %s\n", b.data, n < 0 ? err : "incomplete");
    FUZZ_ASSERT(n == (long)head_len);
    FUZZ_ASSERT(strcmp(again.method, r->method) == 0 && strcmp(again.target, r->target) == 0);
    FUZZ_ASSERT(strcmp(again.path, r->path) == 0 && again.minor == r->minor && again.keep_alive == r->keep_alive);
    int k = 0;
    for (int i = 0; i < r->n_headers; i++) {
        const char *name = r->headers[i].name;
        if (!strcasecmp(name, "Transfer-Encoding") || !strcasecmp(name, "Content-Length")) continue;
        FUZZ_ASSERT(strcmp(again.headers[k].name, name) == 0 && strcmp(again.headers[k].value, r->headers[i].value) == 0);
        k++;
    }
    HttpBodyFraming f;
    FUZZ_ASSERT(http_body_framing(&again, lim->max_body, &f, &status, err) == 0);
    FUZZ_ASSERT(!f.chunked && f.length == r->body_len && memcmp(b.data + head_len, r->body, r->body_len) == 0);
    http_request_free(&again);
    buf_free(&b);
}

/* The whole reading of the first request in buf[0..len): 0 accepted (*req
 * filled in, *used its length), 1 incomplete, -1 refused (*status, err). */
static int parse_whole(const char *buf, size_t len, const HttpLimits *lim, HttpRequest *req, size_t *used,
                       int *status, char *err) {
    long head = http_parse_head(buf, len, lim, req, status, err);
    FUZZ_ASSERT(head >= -1 && head <= (long)len);
    if (head <= 0) return head == 0 ? 1 : -1;
    for (size_t cut = 0; cut < (size_t)head; cut = next_cut(cut, (size_t)head)) { /* prefixes: never refused */
        HttpRequest part;
        int st;
        char e[ERR_MAX];
        long r = http_parse_head(buf, cut, lim, &part, &st, e);
        if (r != 0) fprintf(stderr, "a prefix of %zu of a %ld-byte head: %s\n", cut, head, r < 0 ? e : "accepted");
        FUZZ_ASSERT(r == 0);
    }
    HttpBodyFraming f;
    if (http_body_framing(req, lim->max_body, &f, status, err) != 0) goto refused;
    const char *rest = buf + head;
    size_t left = len - (size_t)head;
    if (!f.chunked) {
        if (left < f.length) goto incomplete;
        req->body = xmalloc(f.length + 1);
        memcpy(req->body, rest, f.length);
        req->body[f.length] = '\0';
        req->body_len = f.length;
        *used = (size_t)head + f.length;
        return 0;
    }
    Buf body = {0};
    long n = http_parse_chunked(rest, left, lim->max_body, &body, status, err);
    FUZZ_ASSERT(n >= -1 && n <= (long)left);
    if (n > 0)
        for (size_t cut = 0; cut < (size_t)n; cut = next_cut(cut, (size_t)n)) {
            Buf part = {0};
            int st;
            char e[ERR_MAX];
            long r = http_parse_chunked(rest, cut, lim->max_body, &part, &st, e);
            if (r != 0) fprintf(stderr, "a prefix of %zu of a %ld-byte chunked body: %s\n", cut, n, r < 0 ? e : "accepted");
            FUZZ_ASSERT(r == 0);
            buf_free(&part);
        }
    if (n <= 0) {
        buf_free(&body);
        if (n == 0) goto incomplete;
        goto refused;
    }
    FUZZ_ASSERT(body.len <= lim->max_body);
    req->body = body.data;
    req->body_len = body.len;
    *used = (size_t)head + (size_t)n;
    return 0;
incomplete:
    http_request_free(req);
    return 1;
refused:
    http_request_free(req);
    return -1;
}

/* The bytes as a connection delivers them to the server's reader. */
typedef struct {
    HttpReader rd;
    const uint8_t *data;
    size_t size, pos;
} Feed;

/* The next request from f: after each piece (its size from the data itself,
 * so requests are cut at many places) the reader is asked for one. 0 with
 * *req, -1 when the bytes end first, or a refusal's status. */
static int feed_next(Feed *f, HttpRequest *req, char *err) {
    for (;;) {
        int rc = http_reader_next(&f->rd, req, err);
        if (rc != 0) return rc == 1 ? 0 : rc;
        (void)http_reader_take_continue(&f->rd); /* the loop would write the 100 here */
        if (f->pos == f->size) return -1;
        size_t room, n = 1 + (f->data[f->pos] * 7u + f->pos) % 97;
        char *at = http_reader_space(&f->rd, &room);
        if (n > f->size - f->pos) n = f->size - f->pos;
        if (n > room) n = room;
        memcpy(at, f->data + f->pos, n);
        http_reader_added(&f->rd, n);
        f->pos += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_HTTP_MAX) return 0;
    HttpLimits lim = fuzz_limits(data[0]);
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;

    Feed f = {.data = data + 1, .size = len};
    http_reader_init(&f.rd, &lim);
    size_t at = 0; /* where the whole reading of the next request starts */
    for (;;) {
        HttpRequest whole, streamed;
        size_t used = 0;
        int wstatus = 0;
        char werr[ERR_MAX] = "", serr[ERR_MAX] = "";
        int w = parse_whole(buf + at, len - at, &lim, &whole, &used, &wstatus, werr);
        memset(&streamed, 0, sizeof streamed);
        int s = feed_next(&f, &streamed, serr);
        if (w == -1) FUZZ_ASSERT(refusal_ok(wstatus, werr));
        if (s > 0) FUZZ_ASSERT(refusal_ok(s, serr));
        if (s != (w == 0 ? 0 : w == 1 ? -1 : wstatus) || (s > 0 && strcmp(werr, serr) != 0))
            fprintf(stderr, "whole: %d %d %s\nstreamed: %d %s\n", w, wstatus, werr, s, serr);
        FUZZ_ASSERT(s == (w == 0 ? 0 : w == 1 ? -1 : wstatus) && (s <= 0 || strcmp(werr, serr) == 0));
        if (w != 0) break;
        check_request(&whole, &lim);
        check_round_trip(&whole, &lim);
        FUZZ_ASSERT(strcmp(whole.target, streamed.target) == 0 && whole.n_headers == streamed.n_headers);
        FUZZ_ASSERT(whole.body_len == streamed.body_len && memcmp(whole.body, streamed.body, whole.body_len) == 0);
        http_request_free(&whole);
        http_request_free(&streamed);
        at += used;
    }
    http_reader_free(&f.rd);
    return 0;
}
