/* command.h: what the bench tools share: a shell command's whole stdout, as
 * text or parsed as JSON; a list option split into words; and where and how
 * busy the machine is (the CPU's name, the load average). */
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
/* Splits a list of words separated by spaces or commas into out (at most max;
 * the strings are leaked: a tool). Returns how many. */
int bench_split(const char *s, char **out, int max);
/* The 1-minute load average (-1 if unknown): other programs running skew every figure. */
double bench_load_average(void);
/* The CPU's model name from /proc/cpuinfo ("" if unknown). */
void bench_cpu_name(char *out, size_t size);

#endif
