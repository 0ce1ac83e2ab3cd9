/* model-generate (chapter II.1): greedy generation with full recompute,
 * timed step by step. */
#include <stdio.h>

#include "generate.h"
#include "util.h"

int main(int argc, char **argv) {
    Session s;
    char err[ERR_MAX];
    int rc = session_open(&s, argc, argv, NULL, err);
    if (rc == 1) {
        cli_usage(stdout, "model-generate", NULL);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "model-generate: %s\n", err);
        return 1;
    }
    generate(&s);
    session_finish(&s);
    session_close(&s);
    return 0;
}
