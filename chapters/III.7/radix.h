/* radix.h: the prefix cache (the book's stage III.5). Chat requests share
 * their beginnings: the system prompt, the earlier turns. The keys and values
 * of a prefix depend on that prefix alone, so once a sequence has computed
 * them, the next one with the same beginning can read them from the same
 * blocks instead of computing them again.
 *
 * The cache is a radix tree over token ids whose letters are whole KV blocks:
 * each edge is a run of full blocks (block_size token ids each, and the pool
 * blocks holding their keys and values), and the edges leaving a node differ
 * in their first block. A path from the root spells a cached prefix.
 *
 *   root ── [sys sys | sys sys] ──┬── [user A ...]     blocks 0 1 | 2
 *                                 └── [user B ...]            | 5 6
 *
 * A lookup walks the longest path agreeing with a prompt, block by block, and
 * may stop inside a block: a new sequence takes those blocks by reference
 * (kv_paged_adopt) and copies the last, partly agreeing one before writing to
 * it (copy-on-write). A finished sequence hands its full blocks to the tree,
 * which then holds one reference to each. A block only the tree holds is
 * unused: when the pool runs short, the least recently used leaves give such
 * blocks back, last block first.
 *
 * Every function takes the pool's lock: the tree lives with the pool. */
#ifndef RADIX_H
#define RADIX_H

#include <stdint.h>

#include "kv_pool.h"
#include "sequence.h"
#include "tokenizer.h"
#include "util.h"

typedef struct RadixNode {
    int32_t *tokens;             /* [n_blocks * block_size] the edge's token ids */
    int *blocks;                 /* [n_blocks] the pool blocks holding their keys and values */
    int n_blocks;
    struct RadixNode *parent;
    struct RadixNode **children; /* [n_children]: their first blocks differ */
    int n_children, cap_children;
    uint64_t last_use;           /* the tree's clock at the last lookup or insert through it */
    int id;                      /* numbered in creation order, for the debug view */
} RadixNode;

/* Counters since the tree was made, and its size now. */
typedef struct {
    uint64_t lookups, hits;      /* lookups, and those that reused at least one token */
    uint64_t cached_tokens;      /* tokens the lookups reused */
    uint64_t inserted_blocks, evicted_blocks;
    int nodes, blocks;           /* held now (the root aside) */
    int evictable;               /* blocks only the tree holds: the pool may take them back */
} RadixStats;

typedef struct {
    KvPool *pool;
    int block_size;
    RadixNode *root;             /* an empty edge */
    uint64_t clock;              /* one tick per lookup or insert: "recently" means a larger value */
    int next_id;
    RadixStats stats;
} RadixTree;

/* An empty tree over pool's blocks; it becomes the pool's reclaimer, and
 * must be freed before the pool. */
RadixTree *radix_create(KvPool *pool);
/* Gives every block back (those still in sequences stay theirs). */
void radix_free(RadixTree *t);

/* The longest prefix of tokens[0..n) the tree holds, m tokens (0..n, maybe
 * ending inside a block): blocks[0..ceil(m / block_size)) get the blocks
 * holding it, each referenced once more for the caller (blocks has room for
 * ceil(n / block_size)). Counts a lookup; marks the path used. */
int radix_match(RadixTree *t, const int32_t *tokens, int n, int *blocks);
/* The same prefix length without taking anything, and *available: blocks a
 * sequence reusing that prefix could still get from the pool (the free ones,
 * and those the tree could evict other than the reused ones). */
int radix_peek(RadixTree *t, const int32_t *tokens, int n, int *available);
/* Takes back the count of a lookup that reused m tokens, when what it was
 * for did not happen (an admission that did not fit, a request's second
 * admission): the counters count each request's reuse once, as its usage does. */
void radix_uncount(RadixTree *t, int m);
/* Caches the full blocks of a sequence: tokens[0..n) held by
 * blocks[0..n / block_size) (a partly filled last block is left out). Blocks
 * the tree already has for the same tokens stay as they are; the others get
 * one reference for the tree. */
void radix_insert(RadixTree *t, const int32_t *tokens, int n, const int *blocks);
/* Gives back up to n blocks nobody but the tree holds, least recently used
 * leaves first; returns how many. */
int radix_evict(RadixTree *t, int n);

RadixStats radix_stats(RadixTree *t);
/* The tree as JSON (GET /v1/kv): counters, and every node with its token
 * span, token ids, the text they decode to (with tok; NULL: ids only),
 * blocks, their reference counts and its last use. */
void radix_json(RadixTree *t, const Tokenizer *tok, Buf *out);

/* A sequence for tokens[0..n) on a paged cache of the tree's pool that
 * already holds the longest cached prefix, at most n - 1 tokens: the last
 * one always runs, so a full hit still leaves logits. Returns the tokens
 * reused (0..n - 1), -1 with err. */
int radix_seq_open(RadixTree *t, Sequence *s, const Qwen3Model *m, Backend *be, const int32_t *tokens, int n, int cap,
                   char *err);
/* Hands the tree a sequence's full blocks (radix_insert); the sequence keeps them too. */
void radix_seq_keep(RadixTree *t, const Sequence *s);
/* For a sequence about to hold tokens[0..n) whose first keep tokens agree
 * with it (a chat's next turn): its full blocks join the tree first, so what
 * it is about to roll back stays cached; then, if the tree holds more of
 * tokens than keep (at most n - 1), the sequence starts over on the tree's
 * blocks (radix_seq_open). Returns the tokens it now holds of tokens (>=
 * keep), -1 with err (the sequence as it was). */
int radix_seq_sync(RadixTree *t, Sequence *s, const int32_t *tokens, int n, int keep, char *err);

#endif
