/* model-generate (chapter II.2): greedy generation, timed step by step;
 * --kv [basic] switches from full recompute to prefill + decode. */
#include <stdio.h>

#include "generate.h"
#include "kv_cache.h"
#include "util.h"

int main(int argc, char **argv) {
    Session s;
    char err[ERR_MAX];
    int rc = session_open(&s, argc, argv, KV_KINDS, err);
    if (rc == 1) {
        cli_usage(stdout, "model-generate", KV_KINDS);
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
