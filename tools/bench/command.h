/* command.h: what the bench tools read from the programs they run: a shell
 * command's whole stdout, as text or parsed as JSON. */
#ifndef BENCH_COMMAND_H
#define BENCH_COMMAND_H

#include <stddef.h>

#include "json.h"

/* The command's whole stdout, NUL-terminated, its length in *len; NULL if it
 * could not start or exited non-zero. */
char *bench_run(const char *cmd, size_t *len);
/* Its stdout parsed as one JSON value (NULL if it failed, the reason on stderr). */
JsonValue *bench_run_json(const char *cmd);
/* A number member of an object (0 if absent or not a number). */
double bench_num(const JsonValue *obj, const char *key);

#endif
