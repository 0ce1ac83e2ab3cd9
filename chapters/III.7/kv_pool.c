/* kv_pool.c: the block pool: one allocation for every block, reference
 * counts, and a free list used as a stack. See kv_pool.h. */
#include "kv_pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "json.h"

#define MIB (1024.0 * 1024.0)
#define LARGE_PAGE ((size_t)2 << 20)

size_t kv_pool_block_bytes(const Qwen3Config *c, int block_size) {
    return sizeof(float) * (size_t)c->n_layers * 2 * (size_t)block_size * (size_t)c->kv_dim;
}

/* Zeroed memory for the blocks, asked for once: the system hands out its pages
 * as they are first written. It starts on a large-page boundary and asks for
 * large pages where the system has them: a layer's attention reads rows from
 * blocks all over the pool, and with small pages each one would miss the TLB.
 * *raw gets what to free. */
static float *pool_memory(size_t bytes, void **raw) {
    *raw = calloc(1, bytes + LARGE_PAGE);
    if (!*raw) return NULL;
    char *start = (char *)(((uintptr_t)*raw + LARGE_PAGE - 1) & ~(uintptr_t)(LARGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(start, bytes, MADV_HUGEPAGE); /* a hint: without it the pool still works */
#endif
    return (float *)start;
}

KvPool *kv_pool_create(const Qwen3Config *c, int block_size, int n_blocks, char *err) {
    if (block_size < 1 || n_blocks < 1) {
        err_set(err, "a KV pool needs at least one block of at least one position (got %d of %d)", n_blocks,
                block_size);
        return NULL;
    }
    size_t block_bytes = kv_pool_block_bytes(c, block_size);
    if (block_bytes == 0 || (size_t)n_blocks > (SIZE_MAX / 2 - LARGE_PAGE) / block_bytes) {
        err_set(err, "a KV pool of %d blocks of %d positions is too large for this machine", n_blocks, block_size);
        return NULL;
    }
    KvPool *p = xcalloc(1, sizeof *p);
    *p = (KvPool){.block_size = block_size, .n_blocks = n_blocks, .n_layers = c->n_layers, .kv_dim = c->kv_dim,
                  .block_floats = block_bytes / sizeof(float), .next_table_id = 1};
    p->data = pool_memory((size_t)n_blocks * block_bytes, &p->memory);
    if (!p->data) {
        err_set(err, "cannot allocate a KV pool of %d blocks (%.1f MiB)", n_blocks,
                (double)n_blocks * (double)block_bytes / MIB);
        free(p);
        return NULL;
    }
    p->ref = xcalloc((size_t)n_blocks, sizeof(int));
    p->fill = xcalloc((size_t)n_blocks, sizeof(int));
    p->cached = xcalloc((size_t)n_blocks, 1);
    p->free_list = xmalloc(sizeof(int) * (size_t)n_blocks);
    for (int i = 0; i < n_blocks; i++) p->free_list[i] = n_blocks - 1 - i; /* block 0 on top */
    p->n_free = n_blocks;
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

void kv_pool_free(KvPool *p) {
    if (!p) return;
    pthread_mutex_destroy(&p->lock);
    free(p->memory);
    free(p->ref);
    free(p->fill);
    free(p->cached);
    free(p->free_list);
    free(p);
}

/* Takes the block on top of the free list: O(1). */
/* EXERCISE pool-alloc "Take a block from the free list" 2 points; tests: III4_pool_alloc III4_pool_reuse */
int kv_pool_alloc(KvPool *p) {
    if (p->n_free == 0) return -1;
    int b = p->free_list[--p->n_free];
    p->ref[b] = 1;
    p->fill[b] = 0;
    kv_pool_note(p, "alloc", b, -1);
    return b;
}

void kv_pool_ref(KvPool *p, int b) {
    p->ref[b]++;
    kv_pool_note(p, "ref", b, -1);
}

/* Drops one holder; the last one puts the block back on the free list. */
/* EXERCISE pool-release "Free a block when its last holder lets go" 2 points; tests: III4_pool_refcounts III4_pool_reuse */
void kv_pool_release(KvPool *p, int b) {
    if (--p->ref[b] > 0) {
        kv_pool_note(p, "unref", b, -1);
        return;
    }
    p->fill[b] = 0;
    p->free_list[p->n_free++] = b;
    kv_pool_note(p, "free", b, -1);
}

void kv_pool_note(const KvPool *p, const char *what, int b, int to) {
    if (!events_on(p->events)) return; /* nobody listens: nothing to format */
    if (to >= 0) events_emitf(p->events, "{\"ev\":\"%s\",\"block\":%d,\"to\":%d,\"ref\":%d}", what, b, to, p->ref[b]);
    else events_emitf(p->events, "{\"ev\":\"%s\",\"block\":%d,\"ref\":%d}", what, b, p->ref[b]);
}

void kv_pool_lock(const KvPool *p) {
    pthread_mutex_lock(&((KvPool *)p)->lock); /* the lock is not part of the pool's value */
}

void kv_pool_unlock(const KvPool *p) {
    pthread_mutex_unlock(&((KvPool *)p)->lock);
}

void kv_pool_set_reclaim(KvPool *p, KvReclaimFn fn, void *ctx) {
    kv_pool_lock(p);
    p->reclaim = fn;
    p->reclaim_ctx = ctx;
    kv_pool_unlock(p);
}

float *kv_pool_keys(const KvPool *p, int b, int layer) {
    return p->data + (size_t)b * p->block_floats + (size_t)(2 * layer) * p->block_size * p->kv_dim;
}

float *kv_pool_values(const KvPool *p, int b, int layer) {
    return kv_pool_keys(p, b, layer) + (size_t)p->block_size * p->kv_dim;
}

void kv_pool_attach(KvPool *p, KvBlockTable *t) {
    kv_pool_lock(p);
    t->id = p->next_table_id++;
    snprintf(t->owner, sizeof t->owner, "seq-%d", t->id);
    t->next = p->tables;
    p->tables = t;
    kv_pool_unlock(p);
}

void kv_pool_detach(KvPool *p, KvBlockTable *t) {
    kv_pool_lock(p);
    for (KvBlockTable **at = &p->tables; *at; at = &(*at)->next)
        if (*at == t) {
            *at = t->next;
            break;
        }
    kv_pool_unlock(p);
}

int kv_pool_cached_only(const KvPool *p) {
    int n = 0;
    for (int b = 0; b < p->n_blocks; b++) n += p->cached[b] && p->ref[b] == 1;
    return n;
}

void kv_pool_stats(const KvPool *p, int *used, int *total) {
    kv_pool_lock(p);
    *used = p->n_blocks - p->n_free - kv_pool_cached_only(p);
    *total = p->n_blocks;
    kv_pool_unlock(p);
}

static double pool_mib(const KvPool *p) {
    return (double)p->n_blocks * (double)p->block_floats * sizeof(float) / MIB;
}

void kv_pool_report(const KvPool *p, FILE *out) {
    fprintf(out, "kv pool: %d blocks of %d positions = %ld tokens, %.1f MiB (%.3f MiB a block)\n", p->n_blocks,
            p->block_size, (long)p->n_blocks * p->block_size, pool_mib(p),
            (double)p->block_floats * sizeof(float) / MIB);
}

void kv_pool_trace(const KvPool *p, const KvBlockTable *t, Buf *out) {
    kv_pool_lock(p);
    buf_printf(out, "%d tokens in %d block%s [", t->n_tokens, t->n, t->n == 1 ? "" : "s");
    for (int i = 0; i < t->n; i++) {
        int b = t->blocks[i];
        buf_printf(out, "%s%d:%d", i ? " " : "", b, p->fill[b]);
        if (p->ref[b] > 1) buf_printf(out, "x%d", p->ref[b]);
    }
    int used = p->n_blocks - p->n_free;
    buf_printf(out, "] | pool %d of %d blocks used, %d free\n", used, p->n_blocks, p->n_free);
    kv_pool_unlock(p);
}

/* '.' a free block, 'c' one only the prefix cache holds, '1'..'9' its
 * reference count, '+' ten or more. */
static char map_char(int ref, bool cached) {
    return ref == 0 ? '.' : ref == 1 && cached ? 'c' : ref < 10 ? (char)('0' + ref) : '+';
}

void kv_pool_json(const KvPool *p, Buf *out) {
    kv_pool_lock(p);
    int cached = kv_pool_cached_only(p), used = p->n_blocks - p->n_free - cached;
    buf_printf(out,
               "{\"block_size\":%d,\"blocks_total\":%d,\"blocks_used\":%d,\"blocks_cached\":%d,\"blocks_free\":%d,"
               "\"tokens_total\":%ld,\"mib\":%.3f,\"map\":\"",
               p->block_size, p->n_blocks, used, cached, p->n_free, (long)p->n_blocks * p->block_size, pool_mib(p));
    for (int b = 0; b < p->n_blocks; b++) buf_printf(out, "%c", map_char(p->ref[b], p->cached[b]));
    for (int only_cache = 0; only_cache <= 1; only_cache++) { /* "used": blocks_used of them, "cached": blocks_cached */
        buf_puts(out, only_cache ? "],\"cached\":[" : "\",\"used\":[");
        for (int b = 0, k = 0; b < p->n_blocks; b++)
            if (p->ref[b] > 0 && (p->cached[b] && p->ref[b] == 1) == only_cache)
                buf_printf(out, "%s{\"id\":%d,\"ref\":%d,\"fill\":%d}", k++ ? "," : "", b, p->ref[b], p->fill[b]);
    }
    buf_puts(out, "],\"legend\":{\"blocks_used\":\"held by a sequence (a running request or a slot), listed in used\","
                  "\"blocks_cached\":\"held only by the prefix cache (evictable), listed in cached\","
                  "\"blocks_free\":\"on the free list\",\"map\":\"one character a block: . free, c cache only, "
                  "1-9 its reference count, + ten or more\"}");
    buf_puts(out, ",\"sequences\":[");
    for (const KvBlockTable *t = p->tables; t; t = t->next) {
        buf_printf(out, "%s{\"id\":%d,\"owner\":", t == p->tables ? "" : ",", t->id);
        json_append_string(out, t->owner, strlen(t->owner));
        buf_printf(out, ",\"tokens\":%d,\"blocks\":[", t->n_tokens);
        for (int i = 0; i < t->n; i++) buf_printf(out, "%s%d", i ? "," : "", t->blocks[i]);
        buf_puts(out, "]}");
    }
    buf_puts(out, "]}");
    kv_pool_unlock(p);
}
