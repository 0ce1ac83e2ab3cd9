/* Chapter III.7: the radix-tree prefix cache without a model: lookups, the
 * shape of the tree after inserts and splits, reference counts, eviction
 * order, and a paged cache's reserve taking blocks back from the tree. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "kv_cache.h"
#include "radix.h"

static KvPool *make_pool(int block_size, int n_blocks) {
    Qwen3Config c = {0};
    c.n_layers = 2;
    c.kv_dim = 4;
    char err[ERR_MAX];
    KvPool *p = kv_pool_create(&c, block_size, n_blocks, err);
    CHECK_MSG(p != NULL, "%s", err);
    return p;
}

/* Blocks on the free list (those only the tree holds are not). */
static int free_blocks(const KvPool *p) {
    kv_pool_lock(p);
    int n = p->n_free;
    kv_pool_unlock(p);
    return n;
}

static int used_blocks(const KvPool *p) {
    int used, total;
    kv_pool_stats(p, &used, &total);
    return used;
}

/* A finished "sequence": n_blocks fresh blocks of the pool, as a sequence
 * would hold them (one reference each, its own). */
static void take_blocks(KvPool *p, int *blocks, int n_blocks) {
    for (int i = 0; i < n_blocks; i++) blocks[i] = kv_pool_alloc(p);
}

static void drop_blocks(KvPool *p, const int *blocks, int n_blocks) {
    for (int i = 0; i < n_blocks; i++) kv_pool_release(p, blocks[i]);
}

/* Tokens base, base+1, ... */
static void count_from(int32_t *toks, int n, int base) {
    for (int i = 0; i < n; i++) toks[i] = base + i;
}

/* Inserts a sequence of tokens[0..n) held by fresh blocks, then lets the
 * sequence go: the tree is left the only holder of the blocks it took. */
static void cache_sequence(RadixTree *t, const int32_t *tokens, int n, int *blocks) {
    int nb = (n + t->block_size - 1) / t->block_size;
    take_blocks(t->pool, blocks, nb);
    radix_insert(t, tokens, n, blocks);
    drop_blocks(t->pool, blocks, nb);
}

TEST(III7_radix_match_finds_the_longest_cached_prefix) {
    KvPool *p = make_pool(4, 16);
    if (!p) return;
    RadixTree *t = radix_create(p);
    int32_t a[12], q[12];
    int blocks[3], got[4];
    count_from(a, 12, 100);
    cache_sequence(t, a, 12, blocks);
    CHECK_EQ_INT(free_blocks(p), 13);
    CHECK_EQ_INT(used_blocks(p), 0); /* only the tree holds them: not in use */
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(p->cached[blocks[i]], 1);
    CHECK_EQ_INT(radix_match(t, a, 12, got), 12); /* the whole of it */
    CHECK_EQ_INT(used_blocks(p), 3);                /* held by the caller too: in use */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(got[i], blocks[i]);
        CHECK_EQ_INT(p->ref[blocks[i]], 2); /* the tree's and the caller's */
    }
    drop_blocks(p, got, 3);
    memcpy(q, a, sizeof q);
    q[9] = 7; /* differs inside the third block */
    CHECK_EQ_INT(radix_match(t, q, 12, got), 9);
    drop_blocks(p, got, 3);
    q[4] = 7; /* now inside the second */
    CHECK_EQ_INT(radix_match(t, q, 12, got), 4);
    drop_blocks(p, got, 1);
    CHECK_EQ_INT(radix_match(t, a, 8, got), 8); /* a shorter query stops at its end */
    drop_blocks(p, got, 2);
    CHECK_EQ_INT(radix_match(t, a, 0, got), 0);
    q[0] = 1;
    CHECK_EQ_INT(radix_match(t, q, 12, got), 0); /* nothing in common */
    RadixStats s = radix_stats(t);
    CHECK_EQ_INT(s.lookups, 6);
    CHECK_EQ_INT(s.hits, 4);
    CHECK_EQ_INT(s.cached_tokens, 12 + 9 + 4 + 8);
    CHECK_EQ_INT(s.nodes, 1);
    CHECK_EQ_INT(s.blocks, 3);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(p->ref[blocks[i]], 1); /* every match given back */
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 16);
    kv_pool_free(p);
}

TEST(III7_radix_partial_block_matches_stop_inside_it) {
    KvPool *p = make_pool(4, 16);
    if (!p) return;
    RadixTree *t = radix_create(p);
    int32_t a[8], b[8], q[8];
    int ba[2], bb[2], got[2];
    count_from(a, 8, 0);
    count_from(b, 8, 0);
    b[2] = 50; /* a and b share a first block's first two tokens: two children of the root */
    cache_sequence(t, a, 8, ba);
    cache_sequence(t, b, 8, bb);
    CHECK_EQ_INT(t->root->n_children, 2);
    memcpy(q, b, sizeof q);
    q[3] = 99;
    CHECK_EQ_INT(radix_match(t, q, 8, got), 3); /* b agrees longest: 3 tokens */
    CHECK_EQ_INT(got[0], bb[0]);
    drop_blocks(p, got, 1);
    q[2] = 2;
    CHECK_EQ_INT(radix_match(t, q, 8, got), 3); /* now a does */
    CHECK_EQ_INT(got[0], ba[0]);
    drop_blocks(p, got, 1);
    CHECK_EQ_INT(radix_match(t, a, 6, got), 6); /* a query ending inside a block */
    CHECK_EQ_INT(got[1], ba[1]);
    drop_blocks(p, got, 2);
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 16);
    kv_pool_free(p);
}

TEST(III7_radix_insert_keeps_what_it_has_and_adds_the_rest) {
    KvPool *p = make_pool(4, 16);
    if (!p) return;
    RadixTree *t = radix_create(p);
    int32_t a[14];
    int first[4], again[4], longer[4];
    count_from(a, 14, 10);
    cache_sequence(t, a, 10, first); /* 2 full blocks; the partly filled third is left out */
    CHECK_EQ_INT(radix_stats(t).blocks, 2);
    CHECK_EQ_INT(p->ref[first[0]], 1);
    CHECK_EQ_INT(p->ref[first[2]], 0); /* not cached: back in the pool */
    CHECK_EQ_INT(free_blocks(p), 14);
    take_blocks(p, again, 2); /* the same tokens computed again in other blocks */
    radix_insert(t, a, 8, again);
    CHECK_EQ_INT(p->ref[again[0]], 1); /* the tree keeps its own: these stay the sequence's only */
    CHECK_EQ_INT(radix_stats(t).blocks, 2);
    drop_blocks(p, again, 2);
    take_blocks(p, longer, 3); /* a longer sequence: its third block joins as a child */
    radix_insert(t, a, 14, longer);
    CHECK_EQ_INT(p->ref[longer[2]], 2);
    CHECK_EQ_INT(p->ref[longer[0]], 1);
    drop_blocks(p, longer, 3);
    RadixStats s = radix_stats(t);
    CHECK_EQ_INT(s.blocks, 3);
    CHECK_EQ_INT(s.nodes, 2);
    CHECK_EQ_INT(s.inserted_blocks, 3);
    CHECK_EQ_INT(t->root->n_children, 1);
    CHECK_EQ_INT(t->root->children[0]->n_children, 1);
    CHECK_EQ_INT(t->root->children[0]->children[0]->blocks[0], longer[2]);
    radix_insert(t, a, 3, longer); /* less than a block: nothing to cache */
    CHECK_EQ_INT(radix_stats(t).blocks, 3);
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 16);
    kv_pool_free(p);
}

TEST(III7_radix_split_an_edge_where_a_sequence_leaves_it) {
    KvPool *p = make_pool(2, 16);
    if (!p) return;
    RadixTree *t = radix_create(p);
    int32_t a[8], b[8], c[4];
    int ba[4], bb[4], bc[2], got[4];
    count_from(a, 8, 0);
    memcpy(b, a, sizeof b);
    b[5] = 77;    /* b leaves a's edge inside its third block */
    count_from(c, 4, 40);
    cache_sequence(t, a, 8, ba);
    CHECK_EQ_INT(t->root->n_children, 1);
    CHECK_EQ_INT(t->root->children[0]->n_blocks, 4);
    cache_sequence(t, b, 8, bb);
    /* root -> [0 1 | 2 3] -> { [4 5 | 6 7], [4 77 | 6 7] } */
    RadixNode *head = t->root->children[0];
    CHECK_EQ_INT(t->root->n_children, 1);
    CHECK_EQ_INT(head->n_blocks, 2);
    CHECK_EQ_INT(head->blocks[0], ba[0]);
    CHECK_EQ_INT(head->blocks[1], ba[1]);
    CHECK_EQ_INT(head->n_children, 2);
    if (head->n_children == 2) {
        RadixNode *tail = head->children[0], *leaf = head->children[1];
        CHECK_EQ_INT(tail->n_blocks, 2);
        CHECK_EQ_INT(tail->tokens[0], 4);
        CHECK_EQ_INT(tail->blocks[0], ba[2]);
        CHECK(tail->parent == head);
        CHECK_EQ_INT(leaf->n_blocks, 2);
        CHECK_EQ_INT(leaf->tokens[1], 77);
        CHECK_EQ_INT(leaf->blocks[0], bb[2]);
    }
    CHECK_EQ_INT(p->ref[bb[0]], 0); /* b's copies of the shared blocks were not kept */
    cache_sequence(t, c, 4, bc);  /* nothing in common: a sibling at the root */
    CHECK_EQ_INT(t->root->n_children, 2);
    CHECK_EQ_INT(radix_stats(t).nodes, 4);
    CHECK_EQ_INT(radix_stats(t).blocks, 8);
    CHECK_EQ_INT(radix_match(t, b, 8, got), 8); /* both still found whole */
    CHECK_EQ_INT(got[3], bb[3]);
    drop_blocks(p, got, 4);
    CHECK_EQ_INT(radix_match(t, a, 8, got), 8);
    CHECK_EQ_INT(got[3], ba[3]);
    drop_blocks(p, got, 4);
    Buf j = {0};
    radix_json(t, NULL, &j);
    char err[ERR_MAX];
    JsonValue *v = json_parse(j.data, j.len, err);
    CHECK_MSG(v != NULL, "%s: %s", err, j.data);
    CHECK(strstr(j.data, "\"span\":[4,8]") != NULL);
    CHECK(strstr(j.data, "\"nodes\":4") != NULL);
    json_free(v);
    buf_free(&j);
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 16);
    kv_pool_free(p);
}

TEST(III7_radix_evict_least_recently_used_unreferenced_leaves_first) {
    KvPool *p = make_pool(2, 16);
    if (!p) return;
    RadixTree *t = radix_create(p);
    int32_t a[4], b[4], c[4];
    int ba[2], bb[2], bc[2], got[2];
    count_from(a, 4, 0);
    count_from(b, 4, 10);
    count_from(c, 4, 20);
    cache_sequence(t, a, 4, ba);
    cache_sequence(t, b, 4, bb);
    cache_sequence(t, c, 4, bc);
    CHECK_EQ_INT(radix_match(t, a, 4, got), 4); /* a is used again: b is now the oldest */
    drop_blocks(p, got, 2);
    CHECK_EQ_INT(radix_match(t, c, 4, got), 4); /* c is held by a sequence: not evictable */
    CHECK_EQ_INT(radix_stats(t).evictable, 4);
    Buf j = {0};
    kv_pool_json(p, &j);
    CHECK(strstr(j.data, "\"blocks_used\":2,\"blocks_cached\":4,\"blocks_free\":10") != NULL);
    CHECK(strstr(j.data, "\"map\":\"cccc22..........\"") != NULL);
    buf_free(&j);
    CHECK_EQ_INT(radix_evict(t, 1), 1); /* b's last block first */
    CHECK_EQ_INT(p->ref[bb[1]], 0);
    CHECK_EQ_INT(p->ref[bb[0]], 1);
    CHECK_EQ_INT(radix_evict(t, 2), 2); /* the rest of b, then a's last block */
    CHECK_EQ_INT(p->ref[bb[0]], 0);
    CHECK_EQ_INT(p->ref[ba[1]], 0);
    CHECK_EQ_INT(p->ref[ba[0]], 1);
    CHECK_EQ_INT(radix_stats(t).nodes, 2);
    CHECK_EQ_INT(radix_evict(t, 5), 1); /* only a's first block is left to take */
    CHECK_EQ_INT(radix_stats(t).nodes, 1);
    CHECK_EQ_INT(p->ref[bc[0]], 2);
    drop_blocks(p, got, 2); /* the sequence lets c go */
    CHECK_EQ_INT(radix_evict(t, 5), 2);
    RadixStats s = radix_stats(t);
    CHECK_EQ_INT(s.nodes, 0);
    CHECK_EQ_INT(s.blocks, 0);
    CHECK_EQ_INT(s.evicted_blocks, 6);
    CHECK_EQ_INT(free_blocks(p), 16);
    radix_free(t);
    kv_pool_free(p);
}

TEST(III7_radix_evict_children_before_their_parent) {
    KvPool *p = make_pool(2, 16);
    if (!p) return;
    RadixTree *t = radix_create(p);
    int32_t a[6], b[6];
    int ba[3], bb[3], got[3];
    count_from(a, 6, 0);
    count_from(b, 6, 0);
    b[4] = 9; /* root -> [0 1 | 2 3] -> { [4 5], [9 5] } */
    cache_sequence(t, a, 6, ba);
    cache_sequence(t, b, 6, bb);
    CHECK_EQ_INT(radix_match(t, a, 6, got), 6); /* the shared edge was used last, through a */
    drop_blocks(p, got, 3);
    CHECK_EQ_INT(radix_evict(t, 1), 1); /* the parent is newer, but not a leaf: b goes */
    CHECK_EQ_INT(p->ref[bb[2]], 0);
    CHECK_EQ_INT(radix_evict(t, 1), 1);
    CHECK_EQ_INT(p->ref[ba[2]], 0);
    CHECK_EQ_INT(radix_evict(t, 1), 1); /* the parent, a leaf now, from its end */
    CHECK_EQ_INT(p->ref[ba[1]], 0);
    CHECK_EQ_INT(p->ref[ba[0]], 1);
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 16);
    kv_pool_free(p);
}

/* A paged cache that needs blocks the pool does not have free gets them
 * from the tree, all or nothing. */
TEST(III7_reserve_reclaims_blocks_from_the_prefix_cache) {
    KvPool *p = make_pool(4, 6);
    if (!p) return;
    RadixTree *t = radix_create(p);
    Qwen3Config c = {.n_layers = 2, .kv_dim = 4};
    int32_t a[16], b[8];
    int ba[4], bb[2];
    count_from(a, 16, 0);
    count_from(b, 8, 50);
    cache_sequence(t, a, 16, ba);
    cache_sequence(t, b, 8, bb); /* b is newer: a's blocks go first */
    CHECK_EQ_INT(free_blocks(p), 0);
    char err[ERR_MAX] = "";
    KvCache *kv = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv->reserve(kv, 6, err), 0); /* 2 blocks */
    const KvBlockTable *tab = kv_paged_table(kv); /* a's last two blocks, evicted and reused */
    CHECK(tab->blocks[0] == ba[3] || tab->blocks[0] == ba[2]);
    CHECK(tab->blocks[1] == ba[3] || tab->blocks[1] == ba[2]);
    CHECK_EQ_INT(p->ref[ba[1]], 1);
    CHECK_EQ_INT(p->ref[bb[1]], 1);
    CHECK_EQ_INT(radix_stats(t).evicted_blocks, 2);
    CHECK_EQ_INT(kv->reserve(kv, 6 + 4 * 5, err), -1); /* 5 more blocks: only 4 to be had */
    CHECK(strstr(err, "out of KV blocks") != NULL);
    CHECK_EQ_INT(radix_stats(t).blocks, 4); /* and the cache was left alone */
    CHECK_EQ_INT(kv->reserve(kv, 6 + 4 * 4, err), 0);
    CHECK_EQ_INT(radix_stats(t).blocks, 0);
    kv_cache_free(kv);
    CHECK_EQ_INT(free_blocks(p), 6);
    radix_free(t);
    kv_pool_free(p);
}

/* A cache adopting a prefix of the tree's blocks, ending inside one: it
 * copies that block before its first write, and the tree's stays as it was. */
/* The copy a partly reused block needs is a block the reserve must find:
 * with none free and none the tree could give back, the reserve fails and
 * changes nothing (a reserve that forgot to count it would copy into no block). */
TEST(III7_reserve_counts_the_copy_of_a_partly_reused_block) {
    KvPool *p = make_pool(4, 3);
    if (!p) return;
    RadixTree *t = radix_create(p);
    Qwen3Config c = {.n_layers = 2, .kv_dim = 4};
    int32_t a[8];
    int ba[2], got[2];
    count_from(a, 8, 0);
    cache_sequence(t, a, 8, ba);
    char err[ERR_MAX] = "";
    CHECK_EQ_INT(radix_match(t, a, 6, got), 6);
    KvCache *kv = kv_cache_create("paged", &c, p, err), *other = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv_paged_adopt(kv, got, 6, err), 0);
    drop_blocks(p, got, 2);
    CHECK_EQ_INT(other->reserve(other, 1, err), 0); /* the last free block */
    CHECK_EQ_INT(free_blocks(p), 0);
    CHECK_EQ_INT(kv->reserve(kv, 1, err), -1); /* position 6 falls in the shared block: a copy, and no block */
    CHECK_STR(err, "out of KV blocks: 1 more position needs 1 block, 0 of 3 are free (block size 4)");
    const KvBlockTable *tab = kv_paged_table(kv);
    CHECK_EQ_INT(tab->n, 2);
    CHECK_EQ_INT(tab->blocks[1], ba[1]);
    CHECK_EQ_INT(p->ref[ba[1]], 2);
    kv_cache_free(other);
    CHECK_EQ_INT(kv->reserve(kv, 1, err), 0); /* and with a block free, the copy is made */
    CHECK(kv_paged_table(kv)->blocks[1] != ba[1]);
    kv_cache_free(kv);
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 3);
    kv_pool_free(p);
}

TEST(III7_reserve_copies_a_partly_reused_block) {
    KvPool *p = make_pool(4, 8);
    if (!p) return;
    RadixTree *t = radix_create(p);
    Qwen3Config c = {.n_layers = 2, .kv_dim = 4};
    int32_t a[8];
    int ba[2], got[2];
    count_from(a, 8, 0);
    cache_sequence(t, a, 8, ba);
    for (int i = 0; i < 8; i++) { /* what the "sequence" computed: position i's rows are all i */
        float row[4] = {(float)i, (float)i, (float)i, (float)i};
        int b = ba[i / 4], r = i % 4;
        for (int l = 0; l < 2; l++) {
            memcpy(kv_pool_keys(p, b, l) + r * 4, row, sizeof row);
            memcpy(kv_pool_values(p, b, l) + r * 4, row, sizeof row);
        }
    }
    char err[ERR_MAX] = "";
    int m = radix_match(t, a, 6, got);
    CHECK_EQ_INT(m, 6);
    KvCache *kv = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv_paged_adopt(kv, got, m, err), 0);
    drop_blocks(p, got, 2); /* the cache holds its own references now */
    CHECK_EQ_INT(kv->seq_len(kv), 6);
    CHECK_EQ_INT(p->ref[ba[1]], 2);
    CHECK_EQ_INT(kv->reserve(kv, 1, err), 0);
    const KvBlockTable *tab = kv_paged_table(kv);
    CHECK_EQ_INT(tab->blocks[0], ba[0]); /* the full block stays shared */
    CHECK(tab->blocks[1] != ba[1]);      /* the partly reused one is copied */
    CHECK_EQ_INT(p->ref[ba[1]], 1);
    float row[4] = {-1, -1, -1, -1};
    for (int l = 0; l < 2; l++) kv->append(kv, l, row, row);
    KvSpan s[2];
    CHECK_EQ_INT(kv->view(kv, 1, s, 2), 2);
    CHECK_EQ_INT(s[1].n, 3);
    CHECK(s[1].k[1 * 4] == 5.0f && s[1].k[2 * 4] == -1.0f);
    CHECK(kv_pool_keys(p, ba[1], 1)[2 * 4] == 6.0f); /* the tree's block is untouched */
    kv_cache_free(kv);
    radix_free(t);
    CHECK_EQ_INT(free_blocks(p), 8);
    kv_pool_free(p);
}
