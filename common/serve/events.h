/* events.h: a bounded broadcast of what the engine does, for GET /v1/events.
 *
 * The engine's structures change within a tick or two: a block is copied on
 * write, a request is preempted and admitted again, a cached leaf is evicted.
 * A view that polls misses them; an event stream does not. The engine records
 * short JSON events into a hub; every subscriber (an open /v1/events stream)
 * has a ring of fixed size of its own, and the connection thread sends what
 * its ring holds at the client's pace.
 *
 *   engine thread                  EventHub              connection thread
 *   events_on(h)? then       -->   each subscriber's     events_read(sub)
 *   events_emit(h, json)           ring [ring_bytes]     -> "id: N\ndata: {...}\n\n"
 *
 * The engine never waits on a subscriber: a ring that is full drops the new
 * event and counts it, and the reader gets one {"ev":"dropped","n":K} event
 * where the gap is. Memory stays what the rings were given. With nobody
 * subscribed, events_on is one atomic load and nothing is formatted; with
 * every subscriber's ring full, it is two, and the event is only counted. Events
 * only read the engine's state: recording never changes a computed value.
 *
 * Every event carries "ev" (its kind); the hub numbers them in order (the
 * SSE id), so a reader sees the order they happened in. */
#ifndef EVENTS_H
#define EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct EventHub EventHub;
typedef struct EventSub EventSub;

#define EVENTS_RING_BYTES ((size_t)1 << 20) /* a subscriber's ring, unless told otherwise */
#define EVENTS_MAX_SUBS 8                    /* subscribers at once; past it events_subscribe refuses */

EventHub *events_create(void);
/* Only when no subscriber is left (the server has stopped). */
void events_free(EventHub *h);

/* Can anyone take an event? false for h NULL, with no subscriber, and when
 * every subscriber's ring is full (then the event is counted as dropped for
 * each). Check it once before formatting an event, and skip the event if false. */
bool events_on(const EventHub *h);
/* Records one event, json[0..n): a JSON object. Copied into every
 * subscriber's ring that has room; dropped (and counted) by the others. */
void events_emit(EventHub *h, const char *json, size_t n);
/* The same, formatted; does nothing when nobody listens. */
void events_emitf(EventHub *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Events offered since h was made, recorded or skipped (the id the next one gets). */
uint64_t events_count(EventHub *h);

/* A new subscriber whose ring holds ring_bytes (0: EVENTS_RING_BYTES); it
 * sees the events recorded from now on. NULL with err when EVENTS_MAX_SUBS
 * are subscribed already. */
EventSub *events_subscribe(EventHub *h, size_t ring_bytes, char *err);
void events_unsubscribe(EventSub *s);
/* Waits up to timeout_ms for events and appends what the ring holds to out,
 * as Server-Sent Events ("id: N\ndata: {...}\n\n"), a {"ev":"dropped"} event
 * first where events were lost. Returns how many events it appended (0: none
 * came in time). */
int events_read(EventSub *s, Buf *out, int timeout_ms);
/* Events this subscriber lost because its ring was full. */
uint64_t events_dropped(EventSub *s);

#endif
