/* kv_pool.h: one pool of fixed-size KV blocks shared by every sequence of a
 * model, as an operating system pages memory. A block holds block_size
 * consecutive positions of every layer's keys and values; a sequence's cache
 * is a block table, the list of its blocks in position order, so it grows a
 * block at a time without moving what it holds, and a finished sequence gives
 * its blocks back for the next one to reuse.
 *
 * Blocks are counted by reference: one block may sit in several tables (a
 * forked sequence, III.7's prefix cache). A shared block is never written; the
 * writer takes a private copy first (copy-on-write, kv_paged.c), and the block
 * goes back to the free list when its last holder lets go. */
#ifndef KV_POOL_H
#define KV_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "events.h"
#include "qwen3.h"
#include "util.h"

/* A sequence's block table: position p lives in block blocks[p / block_size],
 * row p % block_size. The pool keeps a list of the tables drawing on it, to
 * show who holds which block. */
typedef struct KvBlockTable {
    int *blocks;               /* [cap] block ids, in position order */
    int n, cap;                /* blocks in the table (the last ones may be reserved, not written yet) */
    int n_tokens;              /* positions written by every layer */
    int id;                    /* numbered by the pool, for the map */
    char owner[32];            /* who holds it ("seq-3", a request id), for the map */
    struct KvBlockTable *next; /* the pool's list */
} KvBlockTable;

typedef struct KvPool {
    int block_size;            /* positions per block */
    int n_blocks;
    int n_layers, kv_dim;
    size_t block_floats;       /* n_layers * 2 * block_size * kv_dim */
    float *data;               /* [n_blocks, n_layers, 2, block_size, kv_dim]: per layer, K rows then V rows */
    void *memory;              /* the allocation data lies in */
    int *ref;                  /* [n_blocks] holders of each block; 0 = free */
    int *fill;                 /* [n_blocks] positions written in each block */
    int *free_list;            /* [n_blocks] a stack of free block ids: the last freed is reused first */
    int n_free;
    KvBlockTable *tables;      /* the block tables drawing on the pool */
    int next_table_id;
    pthread_mutex_t lock;      /* the server reads the map while a request runs */
    EventHub *events;          /* where blocks' events go (GET /v1/events); NULL: nowhere */
} KvPool;

/* Bytes of one block of block_size positions for the model. */
size_t kv_pool_block_bytes(const Qwen3Config *c, int block_size);
/* A pool of n_blocks blocks, all free; NULL with err if it cannot be had. */
KvPool *kv_pool_create(const Qwen3Config *c, int block_size, int n_blocks, char *err);
void kv_pool_free(KvPool *p);

/* The allocator. Not locked by themselves: the paged cache calls them with
 * the pool locked (kv_pool_lock), as must any other caller that shares the
 * pool across threads. */
int kv_pool_alloc(KvPool *p);           /* a free block with ref 1 and fill 0, or -1 when none is left */
void kv_pool_ref(KvPool *p, int b);     /* one more holder: the block is shared by reference */
void kv_pool_release(KvPool *p, int b); /* one holder fewer; at zero the block is free again */
void kv_pool_lock(const KvPool *p);
void kv_pool_unlock(const KvPool *p);

/* Records what just happened to block b ("alloc", "ref", "unref", "free",
 * "copy" to block to, "evict"...) as an event, when someone listens: chat-server's
 * live page shows what happens between two looks at the map. to -1: none. */
void kv_pool_note(const KvPool *p, const char *what, int b, int to);

/* Where a block keeps one layer's keys and values: [block_size, kv_dim] each. */
float *kv_pool_keys(const KvPool *p, int b, int layer);
float *kv_pool_values(const KvPool *p, int b, int layer);

/* The list of tables shown in the map. */
void kv_pool_attach(KvPool *p, KvBlockTable *t);
void kv_pool_detach(KvPool *p, KvBlockTable *t);

/* Blocks in use and in all. */
void kv_pool_stats(const KvPool *p, int *used, int *total);
/* One line: blocks, positions and MiB (printed at start-up). */
void kv_pool_report(const KvPool *p, FILE *out);
/* One line: a table's blocks (id:fill, xN when shared) and the pool's occupancy. */
void kv_pool_trace(const KvPool *p, const KvBlockTable *t, Buf *out);
/* The pool map as JSON: sizes, a one-character-per-block map, every used
 * block's reference count and fill, and every table's blocks (GET /v1/kv). */
void kv_pool_json(const KvPool *p, Buf *out);

#endif
