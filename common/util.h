/* util.h: errors, allocation, time, small file helpers shared by everything. */
#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Errors travel as a caller-owned buffer of ERR_MAX bytes: a function that can
 * fail returns non-zero (or NULL) and writes one line saying what went wrong. */
#define ERR_MAX 512

void err_set(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation that never returns NULL: out of memory ends the process with a message. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* Monotonic wall clock in milliseconds. */
double time_now_ms(void);

/* Reads a whole file; returns NULL and sets err on failure. *len gets the size.
 * The buffer is NUL-terminated (not counted in *len). */
char *file_read_all(const char *path, size_t *len, char *err);

/* A growable byte buffer (for building text and JSON). */
typedef struct {
    char *data;   /* NUL-terminated while len < cap */
    size_t len;
    size_t cap;
} Buf;

void buf_append(Buf *b, const void *data, size_t n);
void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(Buf *b);

#endif
