/* test_stop.c: the stop-string matcher (common/run/stop.c). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stop.h"
#include "unicode.h"

/* Feeds the pieces in turn; returns what was released (and flushed if no stop). */
static char *run(const char *const *stops, int n_stops, const char *const *pieces, int n, bool *stopped) {
    StopMatcher m;
    stop_init(&m, stops, n_stops);
    Buf out = {0};
    buf_append(&out, "", 0);
    *stopped = false;
    for (int i = 0; i < n && !*stopped; i++) *stopped = stop_push(&m, pieces[i], strlen(pieces[i]), &out);
    if (!*stopped) stop_flush(&m, &out);
    stop_free(&m);
    return out.data;
}

#define RUN_IS(stops, pieces, want, want_stopped)                                                        \
    do {                                                                                                 \
        bool st;                                                                                         \
        char *got = run(stops, (int)(sizeof stops / sizeof stops[0]), pieces,                            \
                        (int)(sizeof pieces / sizeof pieces[0]), &st);                                   \
        CHECK_STR(got, want);                                                                            \
        CHECK_EQ_INT(st, want_stopped);                                                                  \
        free(got);                                                                                       \
    } while (0)

TEST(stop_within_one_piece) {
    const char *stops[] = {"\n\n"};
    const char *pieces[] = {"Hello\n\nWorld"};
    RUN_IS(stops, pieces, "Hello", true);
}

TEST(stop_spanning_pieces) {
    const char *stops[] = {"User:"};
    const char *pieces[] = {"Fine.", " Us", "e", "r", ": more"};
    RUN_IS(stops, pieces, "Fine. ", true);
}

TEST(stop_partial_then_diverges) {
    const char *stops[] = {"abc"};
    const char *pieces[] = {"xab", "d", "ab"};
    RUN_IS(stops, pieces, "xabdab", false); /* the last "ab" is held, then flushed at the end */
}

TEST(stop_earliest_of_several) {
    const char *stops[] = {"World", "lo", ""};
    const char *pieces[] = {"Hel", "lo World"};
    RUN_IS(stops, pieces, "Hel", true);
}

TEST(stop_none_passes_through) {
    const char *stops[] = {""};
    const char *pieces[] = {"a", "b\n", "c"};
    RUN_IS(stops, pieces, "ab\nc", false);
}

TEST(stop_releases_all_it_can_at_once) {
    const char *stops[] = {"<end>"};
    StopMatcher m;
    stop_init(&m, stops, 1);
    Buf out = {0};
    CHECK(!stop_push(&m, "one <e", 6, &out));
    CHECK(out.len == 4 && memcmp(out.data, "one ", 4) == 0); /* "<e" may still become "<end>" */
    CHECK(!stop_push(&m, "x <", 3, &out));
    CHECK(out.len == 8 && memcmp(out.data, "one <ex ", 8) == 0);
    CHECK(stop_push(&m, "end> after", 10, &out));
    CHECK(out.len == 8);
    CHECK(stop_push(&m, "more", 4, &out)); /* after a stop nothing more comes out */
    CHECK(out.len == 8);
    stop_flush(&m, &out);
    CHECK(out.len == 8);
    buf_free(&out);
    stop_free(&m);
}

TEST(stop_utf8_multibyte) {
    const char *stops[] = {"é!"};
    const char *pieces[] = {"caf", "é", "!", " no"};
    RUN_IS(stops, pieces, "caf", true);
    const char *stops2[] = {"😀"};
    const char *pieces2[] = {"a😁b", "😀"};
    RUN_IS(stops2, pieces2, "a😁b", true);
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int r = utf8_check(s + i, n - i);
        if (r <= 0) return false;
        i += (size_t)r;
    }
    return true;
}

/* A stream fed in random splits, with token bytes through Utf8Stream first,
 * releases exactly the text before the first stop string, and at every step
 * holds back only an end that is a prefix of a stop string, never a piece of
 * a character. */
TEST(stop_random_streams_match_reference) {
    static const char *alphabet[] = {"a", "b", " ", "\n", "é", "😀", "ab", "ba"};
    const char *stops[] = {"ab\n", "😀é", "bb"};
    unsigned seed = 12345;
    for (int trial = 0; trial < 400; trial++) {
        Buf text = {0};
        buf_append(&text, "", 0);
        int n = 1 + trial % 30;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            buf_puts(&text, alphabet[(seed >> 16) % 8]);
        }
        size_t want = text.len;
        for (int s = 0; s < 3; s++) {
            char *hit = strstr(text.data, stops[s]);
            if (hit && (size_t)(hit - text.data) < want) want = (size_t)(hit - text.data);
        }
        StopMatcher m;
        stop_init(&m, stops, 3);
        Utf8Stream u;
        utf8_stream_init(&u);
        Buf out = {0};
        buf_append(&out, "", 0);
        bool stopped = false;
        for (size_t p = 0; p < text.len && !stopped;) {
            seed = seed * 1103515245u + 12345u;
            size_t k = 1 + (seed >> 16) % 4;
            if (k > text.len - p) k = text.len - p;
            char chars[64];
            size_t c = utf8_stream_push(&u, text.data + p, k, chars);
            stopped = stop_push(&m, chars, c, &out);
            p += k;
            CHECK(valid_utf8(out.data, out.len));
            if (!stopped) { /* what is held is a proper prefix of a stop string */
                bool prefix = m.held.len == 0;
                for (int s = 0; s < 3; s++)
                    prefix |= m.held.len < strlen(stops[s]) && memcmp(m.held.data, stops[s], m.held.len) == 0;
                CHECK_MSG(prefix, "trial %d: holding '%.*s'", trial, (int)m.held.len, m.held.data);
            }
        }
        if (!stopped) stop_flush(&m, &out);
        CHECK_MSG(out.len == want && memcmp(out.data, text.data, want) == 0, "trial %d: '%s' -> '%s'", trial,
                  text.data, out.data);
        CHECK_EQ_INT(stopped, want < text.len);
        stop_free(&m);
        buf_free(&out);
        buf_free(&text);
    }
}
