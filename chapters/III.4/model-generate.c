/* model-generate (chapter III.4): greedy generation, timed step by step, with
 * the paged KV cache by default (--kv basic: II.2's cache, --kv none: no
 * cache); the pool flags (--kv-block-size, --kv-blocks, --kv-mem, --kv-trace)
 * are the chapter's own options, and --fork-at, which shows a shared block
 * and a copy-on-write in the trace. */
#include "generate.h"
#include "kv_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void usage_flags(FILE *out) {
    kv_flags_usage_pool(out);
    fprintf(out, "  --fork-at N        after step N (1: the first decode step), a fork of the sequence shares\n"
                 "                     its blocks, and one step on it copies the shared block it writes into\n"
                 "                     (copy-on-write); both shown as --kv-trace lines (implies --kv-trace)\n");
}

/* The pool flags, and --fork-at N, this program's own. */
static int parse_flag(void *flags, int argc, char **argv, int *i, char *err) {
    KvFlags *f = flags;
    const char *a = argv[*i];
    bool joined = strncmp(a, "--fork-at=", 10) == 0;
    if (!joined && strcmp(a, "--fork-at") != 0) return kv_flags_parse(f, argc, argv, i, err);
    const char *v = joined ? a + 10 : *i + 1 < argc ? argv[++*i] : NULL;
    char *end;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || n < 1 || n > 1 << 30) {
        err_set(err, "--fork-at needs a step from 1 to %d, got '%s'", 1 << 30, v ? v : "");
        return -1;
    }
    f->fork_at = (int)n;
    f->trace = true;
    return 1;
}

int main(int argc, char **argv) {
    KvFlags kv = {0};
    CliExtra extra = {parse_flag, usage_flags, &kv};
    return session_main_extra(argc, argv, KV_KINDS, &extra, generate);
}
