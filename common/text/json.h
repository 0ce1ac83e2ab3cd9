/* json.h: a small JSON reader and writer (RFC 8259), for the tests' golden
 * files, --json output and the chat server's requests and responses.
 * Hostile input (deep nesting, huge numbers, bad escapes, invalid UTF-8)
 * gets an error naming the byte offset and the problem, never a crash. */
#ifndef JSON_H
#define JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue {
    JsonType type;
    bool boolean;
    double number;
    char *string;             /* JSON_STRING: decoded UTF-8, NUL-terminated */
    size_t string_len;        /* may contain NUL bytes (\u0000) */
    struct JsonValue *items;  /* JSON_ARRAY elements / JSON_OBJECT values, [n_items] */
    char **keys;              /* JSON_OBJECT keys, [n_items] */
    size_t n_items;
} JsonValue;

/* Parses a whole document (trailing whitespace allowed, nothing else). Returns
 * NULL and sets err on failure. */
JsonValue *json_parse(const char *text, size_t len, char *err);
void json_free(JsonValue *v);

/* Member of an object by key (the last one if repeated), or NULL. */
const JsonValue *json_get(const JsonValue *obj, const char *key);

/* Writers: append JSON text to a Buf. */
void json_append_string(Buf *b, const char *s, size_t len); /* quoted and escaped; invalid UTF-8 -> \ufffd */
void json_append_number(Buf *b, double x);                  /* shortest round-trip form; non-finite -> null */
/* A whole value, members in their order, with item_sep between items and
 * key_sep after keys: "," and ":" for compact JSON, ", " and ": " for the
 * form Python's json.dumps writes (what chat templates' tojson gives). */
void json_append_value(Buf *b, const JsonValue *v, const char *item_sep, const char *key_sep);

#endif
