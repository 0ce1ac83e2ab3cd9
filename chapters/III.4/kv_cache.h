/* kv_cache.h: the KV cache interface. A cache keeps, for every layer, the key
 * and value rows of the positions seen so far, so a forward computes K and V
 * for its new tokens only and reads the past from the cache.
 *
 * The interface is a struct of function pointers so that the forward pass does
 * not care how rows are stored: BasicKvCache keeps one contiguous array per
 * layer (II.2); PagedKvCache keeps fixed-size blocks of a pool shared by every
 * sequence (this chapter), and hands attention one span per block. */
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include <stdbool.h>
#include <stdio.h>

#include "backend.h"
#include "cli.h"
#include "kv_pool.h"
#include "qwen3.h"
#include "util.h"

typedef struct KvCache KvCache;

struct KvCache {
    const char *kind;  /* "paged", "basic" */
    int n_layers;
    int kv_dim;        /* floats in one key (or value) row */
    /* Stores rows [0, n) of a layer at once, after a prefill. The layer must be empty. */
    void (*install)(KvCache *kv, int layer, const float *k, const float *v, int n);
    /* Appends one position's key and value row to a layer. */
    void (*append)(KvCache *kv, int layer, const float *k, const float *v);
    /* The layer's keys and values, in position order, as spans for attention().
     * Writes at most max spans; returns how many there are. */
    int (*view)(KvCache *kv, int layer, KvSpan *spans, int max);
    /* Positions held by every layer. */
    int (*seq_len)(const KvCache *kv);
    /* Makes room for n_more positions after seq_len before a forward writes
     * them, so that no append can fail halfway. -1 with err if there is no
     * room (the paged cache out of blocks: how many it needs and how many are
     * free), and then nothing has changed. */
    int (*reserve)(KvCache *kv, int n_more, char *err);
    /* Forgets positions n.. (a rolled-back turn); their room is given back. */
    void (*truncate)(KvCache *kv, int n);
    void (*destroy)(KvCache *kv);
};

/* The cache kinds this chapter knows, NULL-terminated; the first is the default. */
extern const char *const KV_KINDS[];

/* A cache of the given kind (NULL: the default) for the model; the paged kind
 * draws its blocks from pool, which must outlive it. NULL with err if the kind
 * is unknown or the pool does not fit the model. */
KvCache *kv_cache_create(const char *kind, const Qwen3Config *c, KvPool *pool, char *err);
void kv_cache_free(KvCache *kv);

KvCache *kv_basic_create(const Qwen3Config *c);
KvCache *kv_paged_create(const Qwen3Config *c, KvPool *pool, char *err);

/* A paged cache holding the first n positions of src by reference: the blocks
 * are shared, and the first write into a shared block copies it. NULL with err
 * if src is not paged or holds fewer than n positions. */
KvCache *kv_paged_fork(const KvCache *src, int n, char *err);
/* Makes an empty paged cache hold n positions already in blocks of its pool
 * (blocks[0 .. ceil(n / block_size)), a prefix kept by someone else), taking
 * a reference on each. -1 with err if kv is not empty or a block is free. */
int kv_paged_adopt(KvCache *kv, const int *blocks, int n, char *err);
/* A paged cache's block table and pool (NULL for other kinds). */
const KvBlockTable *kv_paged_table(const KvCache *kv);
KvPool *kv_paged_pool(const KvCache *kv);
/* Names the holder of a paged cache's blocks in the pool map (a request id). */
void kv_paged_set_owner(KvCache *kv, const char *owner);

/* The command-line flags of the cache, shared by model-generate, chat-repl and
 * chat-server. All zero means the defaults: the paged kind, 16-position
 * blocks, a pool sized for the context up to KV_DEFAULT_MEM_MIB. */
typedef struct {
    const char *kind; /* --kv KIND (NULL: KV_KINDS[0]) */
    int block_size;   /* --kv-block-size N (0: KV_DEFAULT_BLOCK_SIZE) */
    int n_blocks;     /* --kv-blocks N (0: from --kv-mem or the context) */
    int mem_mib;      /* --kv-mem MiB (0: from --kv-blocks or the context) */
    bool trace;       /* --kv-trace: each step's block table and pool occupancy */
    int fork_at;      /* model-generate's --fork-at N (its own flag): with the trace, a fork after step N (0: none) */
} KvFlags;

#define KV_DEFAULT_BLOCK_SIZE 16
#define KV_DEFAULT_MEM_MIB 1024

/* Takes argv[*i] if it is a cache flag (as `--flag VALUE` or `--flag=VALUE`):
 * 1 with *i moved past its value, 0 if it is not a cache flag, -1 with err if
 * its value is wrong. */
int kv_flags_parse(KvFlags *f, int argc, char **argv, int *i, char *err);
/* The help lines of every cache flag, and of the pool flags only (for a
 * program whose --kv is parsed elsewhere). */
void kv_flags_usage(FILE *out);
void kv_flags_usage_pool(FILE *out);
/* model-generate's --kv is common/run/cli.c's; the pool flags join its command
 * line as the chapter's own options, filling f. */
CliExtra kv_flags_cli(KvFlags *f);
/* The pool the flags ask for, given the longest sequence (ctx) it must hold:
 * NULL with err set if it cannot be made, NULL with err "" for a kind that
 * needs no pool (basic). */
KvPool *kv_flags_make_pool(const KvFlags *f, const Qwen3Config *c, int ctx, char *err);

#endif
