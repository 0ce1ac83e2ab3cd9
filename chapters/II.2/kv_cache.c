/* kv_cache.c: choosing a cache kind by name. */
#include "kv_cache.h"

#include <string.h>

#include "util.h"

const char *const KV_KINDS[] = {"basic", NULL};

KvCache *kv_cache_create(const char *kind, const Qwen3Config *c, char *err) {
    if (strcmp(kind, "basic") == 0) return kv_basic_create(c);
    err_set(err, "unknown KV cache kind '%s' (supported: basic)", kind);
    return NULL;
}

void kv_cache_free(KvCache *kv) {
    if (kv) kv->destroy(kv);
}
