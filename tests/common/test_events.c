/* The event hub behind GET /v1/events (common/serve/events.c): nothing is
 * formatted or kept with nobody listening; a subscriber gets every event in
 * order, as Server-Sent Events; a reader that does not keep up loses events
 * past its ring, counted and reported where the gap is, never more memory;
 * the number of subscribers is bounded. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "harness.h"

/* The ids of the "id: N" lines in out, in order; returns how many (at most max). */
static int event_ids(const Buf *out, long long *ids, int max) {
    int n = 0;
    for (const char *p = out->data; p && (p = strstr(p, "id: ")) && n < max; p += 4) ids[n++] = atoll(p + 4);
    return n;
}

static int count_of(const Buf *out, const char *what) {
    int n = 0;
    for (const char *p = out->data; p && (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

TEST(events_nobody_listening) {
    EventHub *h = events_create();
    CHECK(!events_on(NULL));
    CHECK(!events_on(h));
    events_emitf(h, "{\"ev\":\"x\",\"n\":%d}", 1); /* goes nowhere */
    CHECK_EQ_INT((int)events_count(h), 0);
    events_free(h);
}

TEST(events_in_order_as_sse) {
    EventHub *h = events_create();
    char err[ERR_MAX];
    EventSub *s = events_subscribe(h, 0, err);
    CHECK(s && events_on(h));
    for (int i = 0; i < 100; i++) events_emitf(h, "{\"ev\":\"tick\",\"tick\":%d}", i);
    Buf out = {0};
    CHECK_EQ_INT(events_read(s, &out, 0), 100);
    long long ids[128];
    CHECK_EQ_INT(event_ids(&out, ids, 128), 100);
    for (int i = 0; i < 100; i++) CHECK_EQ_INT((int)ids[i], i);
    CHECK(strstr(out.data, "id: 0\ndata: {\"ev\":\"tick\",\"tick\":0}\n\n") == out.data);
    CHECK_EQ_INT(count_of(&out, "\"ev\":\"dropped\""), 0);
    out.len = 0;
    CHECK_EQ_INT(events_read(s, &out, 10), 0); /* nothing more: waits 10 ms, returns none */
    CHECK_EQ_INT((int)out.len, 0);
    buf_free(&out);
    events_unsubscribe(s);
    CHECK(!events_on(h));
    events_free(h);
}

/* A ring of 1 KiB and 1000 events unread: the first that fit arrive, then
 * one "dropped" event counting the rest; afterwards events flow again. */
TEST(events_slow_reader_drops_and_counts) {
    EventHub *h = events_create();
    char err[ERR_MAX];
    EventSub *s = events_subscribe(h, 1024, err);
    for (int i = 0; i < 1000; i++) events_emitf(h, "{\"ev\":\"tick\",\"tick\":%d}", i);
    Buf out = {0};
    int n = events_read(s, &out, 0);
    long long ids[1000];
    int got = event_ids(&out, ids, 1000);
    CHECK(got > 10 && got < 100);
    CHECK_EQ_INT(n, got + 1); /* and the dropped event */
    for (int i = 0; i < got; i++) CHECK_EQ_INT((int)ids[i], i); /* the oldest ones, in order */
    char want[128];
    snprintf(want, sizeof want, "data: {\"ev\":\"dropped\",\"n\":%d,\"total\":%d}\n\n", 1000 - got, 1000 - got);
    CHECK_MSG(strstr(out.data, want) && strstr(out.data, want)[strlen(want)] == '\0', "%s", out.data);
    CHECK_EQ_INT((int)events_dropped(s), 1000 - got);
    out.len = 0;
    events_emitf(h, "{\"ev\":\"tick\",\"tick\":%d}", 1000);
    CHECK_EQ_INT(events_read(s, &out, 0), 1);
    CHECK(strstr(out.data, "id: 1000\n") != NULL);
    buf_free(&out);
    events_unsubscribe(s);
    events_free(h);
}

/* Two subscribers: a stalled one does not take anything from the other. */
TEST(events_stalled_reader_does_not_hold_back_another) {
    EventHub *h = events_create();
    char err[ERR_MAX];
    EventSub *stalled = events_subscribe(h, 512, err), *live = events_subscribe(h, 0, err);
    Buf out = {0};
    int seen = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 50; i++) events_emitf(h, "{\"ev\":\"decode\",\"i\":%d}", round * 50 + i);
        out.len = 0;
        seen += events_read(live, &out, 0);
        CHECK_EQ_INT(count_of(&out, "\"ev\":\"dropped\""), 0);
    }
    CHECK_EQ_INT(seen, 1000);
    CHECK_EQ_INT((int)events_dropped(live), 0);
    CHECK((int)events_dropped(stalled) > 900);
    buf_free(&out);
    events_unsubscribe(stalled);
    events_unsubscribe(live);
    events_free(h);
}

TEST(events_subscribers_are_bounded) {
    EventHub *h = events_create();
    char err[ERR_MAX] = "";
    EventSub *subs[EVENTS_MAX_SUBS];
    for (int i = 0; i < EVENTS_MAX_SUBS; i++) CHECK((subs[i] = events_subscribe(h, 256, err)) != NULL);
    CHECK(events_subscribe(h, 256, err) == NULL);
    CHECK(strstr(err, "event streams are open already") != NULL);
    events_unsubscribe(subs[0]);
    CHECK((subs[0] = events_subscribe(h, 256, err)) != NULL); /* a place freed */
    for (int i = 0; i < EVENTS_MAX_SUBS; i++) events_unsubscribe(subs[i]);
    events_free(h);
}

/* An event longer than the line events_emitf formats into is whole, not cut. */
TEST(events_long_event_whole) {
    EventHub *h = events_create();
    char err[ERR_MAX];
    EventSub *s = events_subscribe(h, 0, err);
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    events_emitf(h, "{\"ev\":\"x\",\"s\":\"%s\"}", big);
    Buf out = {0};
    CHECK_EQ_INT(events_read(s, &out, 0), 1);
    CHECK(strstr(out.data, big) != NULL && strstr(out.data, "\"}\n\n") != NULL);
    buf_free(&out);
    events_unsubscribe(s);
    events_free(h);
}

/* A reader thread waits on the hub while a producer emits: it is woken and
 * gets every event once, in order, across the ring's wrap-around. */
typedef struct {
    EventSub *s;
    atomic_int n;
    long long last;
    bool in_order;
} Reader;

static void *reader_main(void *arg) {
    Reader *r = arg;
    Buf out = {0};
    long long *ids = xmalloc(sizeof *ids * 4096);
    while (atomic_load(&r->n) < 5000) {
        out.len = 0;
        if (events_read(r->s, &out, 1000) == 0) break;
        int k = event_ids(&out, ids, 4096);
        for (int i = 0; i < k; i++) {
            r->in_order &= ids[i] == r->last + 1;
            r->last = ids[i];
        }
        atomic_fetch_add(&r->n, k);
    }
    free(ids);
    buf_free(&out);
    return NULL;
}

TEST(events_reader_thread_gets_all_across_wraps) {
    EventHub *h = events_create();
    char err[ERR_MAX];
    Reader r = {.s = events_subscribe(h, 64 * 1024, err), .last = -1, .in_order = true};
    pthread_t t;
    pthread_create(&t, NULL, reader_main, &r);
    for (int i = 0; i < 5000; i++) {
        events_emitf(h, "{\"ev\":\"tick\",\"tick\":%d,\"pad\":\"%0*d\"}", i, i % 97, 0);
        if (i % 100 == 99) { /* let the reader keep up: this test is about wrapping, not dropping */
            while (events_dropped(r.s) == 0 && atomic_load(&r.n) < i - 200) sched_yield();
        }
    }
    pthread_join(t, NULL);
    CHECK_EQ_INT((int)events_dropped(r.s), 0);
    CHECK_EQ_INT(atomic_load(&r.n), 5000);
    CHECK(r.in_order);
    events_unsubscribe(r.s);
    events_free(h);
}
