/* run_loadgen.h: runs build/tools/loadgen as a test's child and reads what it
 * printed (tests/loadgen against fake servers, tests/replicas against real
 * replicas behind HAProxy). */
#ifndef RUN_LOADGEN_H
#define RUN_LOADGEN_H

#include "json.h"

typedef struct {
    int status;         /* exit status, or -1 if it did not exit normally */
    char *out, *err;    /* its stdout and stderr */
    JsonValue *json;    /* stdout parsed, when it is JSON */
    double ms;          /* how long it ran */
} Ran;

/* Runs loadgen with the space-separated args (%d in args gets the port). */
Ran loadgen(const char *args_fmt, int port);
void ran_free(Ran *r);
/* --samples: the "per_request" array, or NULL. */
const JsonValue *per_request(const Ran *r);

/* A number at a dotted path ("ttft_ms.p50"), or NAN. */
double json_num_path(const JsonValue *v, const char *path);
/* A string member, or NULL. */
const char *json_str_key(const JsonValue *v, const char *key);

#endif
