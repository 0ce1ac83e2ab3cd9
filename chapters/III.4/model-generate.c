/* model-generate (chapter III.4): greedy generation, timed step by step, with
 * the paged KV cache by default (--kv basic: II.2's cache, --kv none: no
 * cache); the pool flags (--kv-block-size, --kv-blocks, --kv-mem, --kv-trace)
 * are the chapter's own options. */
#include "generate.h"
#include "kv_cache.h"

int main(int argc, char **argv) {
    KvFlags kv = {0};
    CliExtra extra = kv_flags_cli(&kv);
    return session_main_extra(argc, argv, KV_KINDS, &extra, generate);
}
