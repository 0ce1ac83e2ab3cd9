/* stop.c: see stop.h. */
#include "stop.h"

#include <stdlib.h>
#include <string.h>

void stop_init(StopMatcher *m, const char *const *stops, int n) {
    memset(m, 0, sizeof *m);
    m->stops = xcalloc((size_t)(n > 0 ? n : 1), sizeof *m->stops);
    m->lens = xcalloc((size_t)(n > 0 ? n : 1), sizeof *m->lens);
    for (int i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0]) continue; /* an empty stop string would stop at once */
        m->stops[m->n_stops] = xstrdup(stops[i]);
        m->lens[m->n_stops++] = strlen(stops[i]);
    }
}

void stop_free(StopMatcher *m) {
    for (int i = 0; i < m->n_stops; i++) free(m->stops[i]);
    free(m->stops);
    free(m->lens);
    buf_free(&m->held);
    memset(m, 0, sizeof *m);
}

/* The first position where any stop string starts in s[0..n), or n. */
static size_t first_match(const StopMatcher *m, const char *s, size_t n) {
    size_t best = n;
    for (int i = 0; i < m->n_stops; i++) {
        size_t len = m->lens[i];
        for (size_t p = 0; p + len <= n && p < best; p++)
            if (memcmp(s + p, m->stops[i], len) == 0) {
                best = p;
                break;
            }
    }
    return best;
}

/* The length of the longest end of s[0..n) that is a proper prefix of some
 * stop string: the text that must wait for the next token. */
static size_t longest_partial(const StopMatcher *m, const char *s, size_t n) {
    size_t best = 0;
    for (int i = 0; i < m->n_stops; i++) {
        size_t k = m->lens[i] - 1 < n ? m->lens[i] - 1 : n;
        for (; k > best; k--)
            if (memcmp(s + n - k, m->stops[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

bool stop_push(StopMatcher *m, const char *text, size_t n, Buf *out) {
    if (m->stopped) return true;
    buf_append(&m->held, text, n);
    size_t at = first_match(m, m->held.data, m->held.len);
    if (at < m->held.len) {
        buf_append(out, m->held.data, at);
        m->held.len = 0;
        m->stopped = true;
        return true;
    }
    size_t keep = longest_partial(m, m->held.data, m->held.len);
    size_t release = m->held.len - keep;
    buf_append(out, m->held.data, release);
    memmove(m->held.data, m->held.data + release, keep);
    m->held.len = keep;
    m->held.data[keep] = '\0';
    return false;
}

void stop_flush(StopMatcher *m, Buf *out) {
    if (!m->stopped) buf_append(out, m->held.data, m->held.len);
    m->held.len = 0;
}
