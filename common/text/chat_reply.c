/* chat_reply.c: see chat_reply.h. A small state machine over the text not
 * given out yet (held): each state looks for the marker that ends it, gives
 * out what can no longer be part of that marker, and keeps the rest. */
#include "chat_reply.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

enum { AT_START, IN_REASONING, IN_CONTENT, IN_TOOL_CALL };

#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define CALL_OPEN "<tool_call>"
#define CALL_CLOSE "</tool_call>"

void chat_reply_init(ChatReply *r, ChatReplyOptions opt) {
    memset(r, 0, sizeof *r);
    r->opt = opt;
    r->state = opt.reasoning ? AT_START : IN_CONTENT;
    buf_append(&r->content, "", 0);
    buf_append(&r->reasoning, "", 0);
}

static void free_calls(ChatReply *r) {
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    r->n_calls = 0;
}

void chat_reply_free(ChatReply *r) {
    free_calls(r);
    free(r->calls);
    buf_free(&r->held);
    buf_free(&r->content);
    buf_free(&r->reasoning);
    memset(r, 0, sizeof *r);
}

void chat_reply_delta_free(ChatReplyDelta *d) {
    buf_free(&d->content);
    buf_free(&d->reasoning);
}

static void delta_clear(const ChatReply *r, ChatReplyDelta *d) {
    d->content.len = d->reasoning.len = 0;
    buf_append(&d->content, "", 0);
    buf_append(&d->reasoning, "", 0);
    d->first_call = r->n_calls;
}

/* Appends to a part and to the delta (both stay NUL-terminated). */
static void give(Buf *all, Buf *delta, const char *s, size_t n) {
    if (n == 0) return;
    buf_append(all, s, n);
    buf_append(delta, s, n);
    all->data[all->len] = delta->data[delta->len] = '\0';
}

/* Drops the first n bytes of held. */
static void consume(ChatReply *r, size_t n) {
    memmove(r->held.data, r->held.data + n, r->held.len - n);
    r->held.len -= n;
}

/* The length of the longest end of s[0..n) that begins marker (a marker that may be arriving). */
static size_t partial_marker(const char *s, size_t n, const char *marker) {
    size_t m = strlen(marker);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, marker, k) == 0) return k;
    return 0;
}

static const char *find(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0) return s + i;
    return NULL;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* n less the white space (newlines only, if newlines_only) at the end of s[0..n). */
static size_t trim_end(const char *s, size_t n, bool newlines_only) {
    while (n > 0 && (newlines_only ? s[n - 1] == '\n' : is_space(s[n - 1]))) n--;
    return n;
}

/* Drops held's leading newlines or white space while r->skip asks for it. */
static void skip_leading(ChatReply *r) {
    size_t k = 0;
    while (k < r->held.len && (r->skip == 1 ? r->held.data[k] == '\n' : is_space(r->held.data[k]))) k++;
    consume(r, k);
    if (r->held.len > 0) r->skip = 0;
}

/* body (between the markers) as {"name": string, "arguments": object or string}; false if it is not one. */
static bool add_call(ChatReply *r, const char *body, size_t n) {
    char err[ERR_MAX];
    JsonValue *v = json_parse(body, n, err);
    const JsonValue *name = v && v->type == JSON_OBJECT ? json_get(v, "name") : NULL;
    const JsonValue *args = name ? json_get(v, "arguments") : NULL;
    bool ok = name && name->type == JSON_STRING && name->string_len > 0 && strlen(name->string) == name->string_len &&
              (!args || args->type == JSON_OBJECT || args->type == JSON_STRING);
    if (ok) {
        Buf a = {0};
        if (!args) buf_puts(&a, "{}");
        else if (args->type == JSON_STRING) buf_append(&a, args->string, args->string_len);
        else json_append_value(&a, args, ",", ":");
        buf_append(&a, "", 0);
        if (r->n_calls == r->cap_calls)
            r->calls = xrealloc(r->calls, sizeof *r->calls * (size_t)(r->cap_calls = r->cap_calls ? 2 * r->cap_calls : 4));
        r->calls[r->n_calls++] = (ChatReplyCall){xstrdup(name->string), a.data};
    }
    json_free(v);
    return ok;
}

/* One step of the machine; false when it needs more text. */
static bool step(ChatReply *r, ChatReplyDelta *d, bool last) {
    const char *h = r->held.data;
    size_t n = r->held.len;
    if (r->state == AT_START) {
        size_t m = strlen(THINK_OPEN);
        if (n >= m && memcmp(h, THINK_OPEN, m) == 0) {
            consume(r, m);
            r->state = IN_REASONING;
            r->skip = 1;
            return true;
        }
        if (n == 0 || (!last && n < m && memcmp(h, THINK_OPEN, n) == 0)) return false;
        r->state = IN_CONTENT;
        return true;
    }
    if (r->state == IN_REASONING) { /* reasoning.strip('\n') */
        if (r->skip) skip_leading(r);
        h = r->held.data, n = r->held.len;
        const char *end = find(h, n, THINK_CLOSE);
        size_t keep = end ? (size_t)(end - h) : n - (last ? 0 : partial_marker(h, n, THINK_CLOSE));
        size_t out = trim_end(h, keep, true);
        give(&r->reasoning, &d->reasoning, h, out);
        if (!end) {
            consume(r, last ? n : out);
            return false;
        }
        consume(r, keep + strlen(THINK_CLOSE));
        r->state = IN_CONTENT;
        r->skip = 1; /* content.lstrip('\n') */
        return true;
    }
    if (r->state == IN_CONTENT) {
        if (r->skip) skip_leading(r);
        h = r->held.data, n = r->held.len;
        const char *open = r->opt.tools ? find(h, n, CALL_OPEN) : NULL;
        if (open) { /* the white space before a call is the template's, not the answer's */
            give(&r->content, &d->content, h, trim_end(h, (size_t)(open - h), false));
            consume(r, (size_t)(open - h) + strlen(CALL_OPEN));
            r->state = IN_TOOL_CALL;
            return true;
        }
        size_t out = n;
        if (r->opt.tools && !last) out = trim_end(h, n - partial_marker(h, n, CALL_OPEN), false);
        give(&r->content, &d->content, h, out);
        consume(r, out);
        return false;
    }
    const char *close = find(h, n, CALL_CLOSE); /* IN_TOOL_CALL */
    if (!close && !last) return false;
    size_t body = close ? (size_t)(close - h) : n;
    if (!add_call(r, h, body)) { /* not a call: the text stays in the answer as written */
        give(&r->content, &d->content, CALL_OPEN, strlen(CALL_OPEN));
        give(&r->content, &d->content, h, close ? body + strlen(CALL_CLOSE) : n);
    }
    consume(r, close ? body + strlen(CALL_CLOSE) : n);
    r->state = IN_CONTENT;
    r->skip = 2;
    return close != NULL;
}

static void run(ChatReply *r, ChatReplyDelta *d, bool last) {
    while (step(r, d, last)) {
    }
}

void chat_reply_push(ChatReply *r, const char *text, size_t n, ChatReplyDelta *d) {
    delta_clear(r, d);
    buf_append(&r->held, text, n);
    run(r, d, false);
}

void chat_reply_finish(ChatReply *r, ChatReplyDelta *d) {
    delta_clear(r, d);
    run(r, d, true);
}

void chat_reply_prime(ChatReply *r, const char *text) {
    ChatReplyDelta d = {0};
    chat_reply_push(r, text, strlen(text), &d);
    chat_reply_delta_free(&d);
    if (r->state == IN_CONTENT) r->held.len = 0; /* held back white space: the client has it */
    r->content.len = r->reasoning.len = 0;
    r->content.data[0] = r->reasoning.data[0] = '\0';
    free_calls(r);
}

void chat_reply_parse(ChatReply *r, ChatReplyOptions opt, const char *text, size_t n) {
    ChatReplyDelta d = {0};
    chat_reply_init(r, opt);
    chat_reply_push(r, text, n, &d);
    chat_reply_finish(r, &d);
    chat_reply_delta_free(&d);
}
