/* events.c: the engine's event hub and its subscribers' rings. See events.h. */
#include "events.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One event in a ring: its header, then len bytes of JSON (wrapping at the end). */
typedef struct {
    uint64_t id;
    uint32_t len;
} EventHead;

struct EventSub {
    EventHub *hub;
    char *ring;           /* [cap] records: EventHead then the JSON, back to back, wrapping */
    size_t cap, head, used; /* head: where the oldest record starts */
    bool gap;             /* an event was dropped: drop the rest until the reader catches up, so order holds */
    uint64_t skip_mark;   /* the hub's skipped count when the gap began */
    uint64_t pending;     /* dropped since the last read (besides those skipped since skip_mark) */
    uint64_t dropped;     /* dropped in all (the same) */
    EventSub *next;
};

struct EventHub {
    atomic_int n_subs;
    atomic_int n_open;    /* subscribers not in a gap: with none, an event is not even formatted */
    atomic_ullong skipped; /* events not formatted because every subscriber was in a gap */
    pthread_mutex_t mu;   /* guards the list and every ring */
    pthread_cond_t more;  /* an event was recorded */
    EventSub *subs;
    uint64_t next_id;     /* events recorded; an event's id also counts those skipped before it */
};

EventHub *events_create(void) {
    EventHub *h = xcalloc(1, sizeof *h);
    atomic_init(&h->n_subs, 0);
    atomic_init(&h->n_open, 0);
    atomic_init(&h->skipped, 0);
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->more, &ca);
    pthread_condattr_destroy(&ca);
    return h;
}

void events_free(EventHub *h) {
    if (!h) return;
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->more);
    free(h);
}

/* Can any subscriber take an event? When every one is in a gap (a stalled
 * reader), the event is counted as skipped instead: its caller does not
 * format it, so a stalled reader costs the engine two atomic operations. */
static bool any_open(EventHub *h) {
    if (atomic_load_explicit(&h->n_open, memory_order_relaxed) > 0) return true;
    if (atomic_load_explicit(&h->n_subs, memory_order_relaxed) > 0)
        atomic_fetch_add_explicit(&h->skipped, 1, memory_order_relaxed);
    return false;
}

bool events_on(const EventHub *h) {
    return h && any_open((EventHub *)h);
}

/* ---- the rings ------------------------------------------------------------------------------ */

/* Copies n bytes into s's ring at offset at (mod cap). */
static void ring_put(EventSub *s, size_t at, const void *data, size_t n) {
    at %= s->cap;
    size_t first = n < s->cap - at ? n : s->cap - at;
    memcpy(s->ring + at, data, first);
    memcpy(s->ring, (const char *)data + first, n - first);
}

static void ring_get(const EventSub *s, size_t at, void *data, size_t n) {
    at %= s->cap;
    size_t first = n < s->cap - at ? n : s->cap - at;
    memcpy(data, s->ring + at, first);
    memcpy((char *)data + first, s->ring, n - first);
}

/* Appends ring bytes [at, at + n) (mod cap) to out. */
static void ring_append(const EventSub *s, size_t at, size_t n, Buf *out) {
    at %= s->cap;
    size_t first = n < s->cap - at ? n : s->cap - at;
    buf_append(out, s->ring + at, first);
    buf_append(out, s->ring, n - first);
}

/* Appends one record, or drops it (and every later one until a read) when it does not fit. */
static void ring_push(EventSub *s, uint64_t id, const char *json, size_t n) {
    size_t need = sizeof(EventHead) + n;
    if (s->gap || need > s->cap - s->used) {
        if (!s->gap) {
            s->gap = true;
            s->skip_mark = atomic_load(&s->hub->skipped);
            atomic_fetch_sub(&s->hub->n_open, 1);
        }
        s->pending++;
        s->dropped++;
        return;
    }
    EventHead eh = {id, (uint32_t)n};
    ring_put(s, s->head + s->used, &eh, sizeof eh);
    ring_put(s, s->head + s->used + sizeof eh, json, n);
    s->used += need;
}

/* Records an event nobody has counted yet. */
static void emit(EventHub *h, const char *json, size_t n) {
    pthread_mutex_lock(&h->mu);
    uint64_t id = h->next_id++ + atomic_load(&h->skipped); /* its place among every event: a gap shows in the ids */
    for (EventSub *s = h->subs; s; s = s->next) ring_push(s, id, json, n);
    pthread_cond_broadcast(&h->more);
    pthread_mutex_unlock(&h->mu);
}

void events_emit(EventHub *h, const char *json, size_t n) {
    if (h && n <= UINT32_MAX && any_open(h)) emit(h, json, n);
}

void events_emitf(EventHub *h, const char *fmt, ...) {
    if (!events_on(h)) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof line) {
        emit(h, line, (size_t)n); /* counted by events_on above */
        return;
    }
    if (n < 0) return; /* nothing formatted */
    char *big = xmalloc((size_t)n + 1); /* a long one: formatted again, whole */
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    emit(h, big, (size_t)n);
    free(big);
}

uint64_t events_count(EventHub *h) {
    pthread_mutex_lock(&h->mu);
    uint64_t n = h->next_id + atomic_load(&h->skipped);
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* ---- subscribers ------------------------------------------------------------------------------ */

EventSub *events_subscribe(EventHub *h, size_t ring_bytes, char *err) {
    pthread_mutex_lock(&h->mu);
    if (atomic_load(&h->n_subs) >= EVENTS_MAX_SUBS) {
        pthread_mutex_unlock(&h->mu);
        err_set(err, "%d event streams are open already (the most at once): close one and try again", EVENTS_MAX_SUBS);
        return NULL;
    }
    EventSub *s = xcalloc(1, sizeof *s);
    s->hub = h;
    s->cap = ring_bytes ? ring_bytes : EVENTS_RING_BYTES;
    s->ring = xmalloc(s->cap);
    s->next = h->subs;
    h->subs = s;
    atomic_fetch_add(&h->n_subs, 1);
    atomic_fetch_add(&h->n_open, 1);
    pthread_mutex_unlock(&h->mu);
    return s;
}

void events_unsubscribe(EventSub *s) {
    if (!s) return;
    EventHub *h = s->hub;
    pthread_mutex_lock(&h->mu);
    for (EventSub **at = &h->subs; *at; at = &(*at)->next)
        if (*at == s) {
            *at = s->next;
            break;
        }
    atomic_fetch_sub(&h->n_subs, 1);
    if (!s->gap) atomic_fetch_sub(&h->n_open, 1);
    pthread_mutex_unlock(&h->mu);
    free(s->ring);
    free(s);
}

static void wait_more(EventHub *h, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&h->more, &h->mu, &until);
}

int events_read(EventSub *s, Buf *out, int timeout_ms) {
    EventHub *h = s->hub;
    pthread_mutex_lock(&h->mu);
    if (s->used == 0 && !s->pending && timeout_ms > 0) wait_more(h, timeout_ms);
    int n = 0;
    while (s->used > 0) {
        EventHead eh;
        ring_get(s, s->head, &eh, sizeof eh);
        buf_printf(out, "id: %llu\ndata: ", (unsigned long long)eh.id);
        ring_append(s, s->head + sizeof eh, eh.len, out);
        buf_puts(out, "\n\n");
        s->head = (s->head + sizeof eh + eh.len) % s->cap;
        s->used -= sizeof eh + eh.len;
        n++;
    }
    if (s->gap) { /* the events skipped while every subscriber was in a gap: this one's too */
        uint64_t skipped = atomic_load(&h->skipped) - s->skip_mark;
        s->pending += skipped;
        s->dropped += skipped;
        s->gap = false;
        atomic_fetch_add(&h->n_open, 1);
    }
    if (s->pending) {
        buf_printf(out, "data: {\"ev\":\"dropped\",\"n\":%llu,\"total\":%llu}\n\n", (unsigned long long)s->pending,
                   (unsigned long long)s->dropped);
        s->pending = 0;
        n++;
    }
    s->head = s->used == 0 ? 0 : s->head;
    pthread_mutex_unlock(&h->mu);
    return n;
}

uint64_t events_dropped(EventSub *s) {
    pthread_mutex_lock(&s->hub->mu);
    uint64_t n = s->dropped + (s->gap ? atomic_load(&s->hub->skipped) - s->skip_mark : 0);
    pthread_mutex_unlock(&s->hub->mu);
    return n;
}
