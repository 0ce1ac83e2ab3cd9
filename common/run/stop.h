/* stop.h: stop strings. A request may ask generation to end at any of a few
 * strings ("\n\n", "User:"): the reply is everything before the first of them,
 * and the stop text itself is never returned.
 *
 * Text arrives a token at a time and a stop string may span several tokens,
 * so a streamed reply cannot release text that might still be the beginning
 * of a stop string: the matcher holds back exactly the longest end of the
 * text so far that is a proper prefix of some stop string, and releases the
 * rest at once. Fed complete UTF-8 characters (Utf8Stream's output) and
 * valid UTF-8 stop strings, it releases complete characters only, since a
 * prefix of a valid string never starts inside a character. */
#ifndef STOP_H
#define STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef struct {
    char **stops;   /* [n_stops], empty strings left out */
    size_t *lens;   /* [n_stops] */
    int n_stops;
    Buf held;       /* text not released yet: it may still become a stop string */
    bool stopped;   /* a stop string was found; everything after it is dropped */
} StopMatcher;

/* Copies the stop strings (n may be 0: then text passes straight through). */
void stop_init(StopMatcher *m, const char *const *stops, int n);
void stop_free(StopMatcher *m);

/* Feeds text[0..n) and appends to out what can be released now. Returns true
 * when a stop string has been found (now or earlier): out then ends just
 * before it, and later calls release nothing. */
bool stop_push(StopMatcher *m, const char *text, size_t n, Buf *out);

/* Generation ended without a stop string: releases the held text. */
void stop_flush(StopMatcher *m, Buf *out);

#endif
