/* servers.h: the chat-server processes the end-to-end tests share, one of
 * each kind per chapter, started on first use and stopped at exit. */
#ifndef TESTS_SERVER_SERVERS_H
#define TESTS_SERVER_SERVERS_H

#include <stdbool.h>

#include "client.h"

/* The embedded default model (fast: microseconds per token), --queue 2,
 * --max-connections 8, --timeout 2, --max-body 65536; 16 KV blocks of 16
 * (its whole context of 256). */
ServerProc *fast_server(const char *chapter);
/* A wider mkmodel model on one scalar thread (tens of ms per token), so that
 * a request is still running when the test acts: --queue 1, a pool of 8
 * blocks of 16 (128 tokens) under a context of 512. */
ServerProc *slow_server(const char *chapter);

/* The default model's path, and the slow one's (built by tools/server.mk). */
const char *default_model_path(void);
const char *slow_model_path(void);

/* The openai client script (tests/server/openai_client.mjs) copied beside
 * the installed npm package, or NULL with why it cannot run. */
const char *openai_client_script(const char **why);
/* The same for any script of tests/server that needs the npm package
 * `package` (in build/node); the path is valid until the next call. */
const char *node_script(const char *name, const char *package, const char **why);
/* Runs node script args; true if it exited 0 having printed "all ok".
 * *output (malloc'ed) gets what it printed. */
bool run_node_script(const char *script, const char *args, char **output);

/* Runs `node SCRIPT http://127.0.0.1:PORT/v1` against every chapter's
 * fast_server; a failed check, naming what ran and with its output, unless it
 * printed "all ok". */
void node_client_on_fast_servers(const char *script, const char *what);
/* Does the chapter's engine run one request at a time (III.4), so that a
 * second one waits? */
bool one_at_a_time(const char *chapter);

#endif
