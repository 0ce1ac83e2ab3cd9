/* Chapter III.4: the block pool (allocator, reference counts, free list, map)
 * and the paged cache's block table, without a model. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "kv_cache.h"

/* 3 layers of 4 floats: small enough to check every row by hand. */
static Qwen3Config pool_config(void) {
    Qwen3Config c = {0};
    c.n_layers = 3;
    c.kv_dim = 4;
    return c;
}

static KvPool *make_pool(int block_size, int n_blocks) {
    Qwen3Config c = pool_config();
    char err[ERR_MAX];
    KvPool *p = kv_pool_create(&c, block_size, n_blocks, err);
    CHECK_MSG(p != NULL, "%s", err);
    return p;
}

static int free_blocks(const KvPool *p) {
    int used, total;
    kv_pool_stats(p, &used, &total);
    return total - used;
}

TEST(III4_pool_alloc_takes_free_blocks_until_none_is_left) {
    KvPool *p = make_pool(4, 3);
    if (!p) return;
    CHECK_EQ_INT(p->block_floats, 3 * 2 * 4 * 4);
    CHECK_EQ_INT(kv_pool_block_bytes(&(Qwen3Config){.n_layers = 3, .kv_dim = 4}, 4), 3 * 2 * 4 * 4 * 4);
    for (int want = 0; want < 3; want++) {
        int b = kv_pool_alloc(p);
        CHECK_EQ_INT(b, want); /* a fresh pool hands out blocks in order */
        CHECK_EQ_INT(p->ref[want], 1);
        CHECK_EQ_INT(p->fill[want], 0);
        CHECK_EQ_INT(free_blocks(p), 2 - want);
    }
    CHECK_EQ_INT(kv_pool_alloc(p), -1); /* exhausted: an answer, not a crash */
    CHECK_EQ_INT(free_blocks(p), 0);
    kv_pool_free(p);
}

TEST(III4_pool_refcounts_free_a_block_with_its_last_holder) {
    KvPool *p = make_pool(4, 2);
    if (!p) return;
    int b = kv_pool_alloc(p);
    kv_pool_ref(p, b);
    kv_pool_ref(p, b);
    CHECK_EQ_INT(p->ref[b], 3);
    kv_pool_release(p, b);
    kv_pool_release(p, b);
    CHECK_EQ_INT(p->ref[b], 1);
    CHECK_EQ_INT(free_blocks(p), 1); /* still held */
    kv_pool_release(p, b);
    CHECK_EQ_INT(p->ref[b], 0);
    CHECK_EQ_INT(free_blocks(p), 2);
    kv_pool_free(p);
}

TEST(III4_pool_reuse_order_is_last_freed_first) {
    KvPool *p = make_pool(2, 4);
    if (!p) return;
    int a = kv_pool_alloc(p), b = kv_pool_alloc(p), c = kv_pool_alloc(p);
    p->fill[b] = 2;
    kv_pool_release(p, b);
    kv_pool_release(p, a);
    CHECK_EQ_INT(kv_pool_alloc(p), a); /* the free list is a stack: warm blocks first */
    int again = kv_pool_alloc(p);
    CHECK_EQ_INT(again, b);
    CHECK_EQ_INT(p->fill[again], 0); /* a reused block starts empty */
    CHECK_EQ_INT(kv_pool_alloc(p), 3);
    CHECK_EQ_INT(kv_pool_alloc(p), -1);
    (void)c;
    kv_pool_free(p);
}

TEST(III4_pool_blocks_keep_every_layer_together) {
    KvPool *p = make_pool(4, 2);
    if (!p) return;
    /* Block 1 follows block 0's 3 layers of K and V rows: [2 blocks][3 layers][K, V][4 rows][4 floats]. */
    CHECK(kv_pool_keys(p, 0, 0) == p->data);
    CHECK(kv_pool_values(p, 0, 0) == p->data + 16);
    CHECK(kv_pool_keys(p, 0, 2) == p->data + 64);
    CHECK(kv_pool_keys(p, 1, 0) == p->data + 96);
    CHECK(kv_pool_values(p, 1, 2) == p->data + 96 + 80);
    kv_pool_free(p);
}

TEST(III4_pool_bad_sizes_are_errors) {
    Qwen3Config c = pool_config();
    char err[ERR_MAX] = "";
    CHECK(kv_pool_create(&c, 0, 4, err) == NULL);
    CHECK(strstr(err, "at least one") != NULL);
    CHECK(kv_pool_create(&c, 16, 0, err) == NULL);
    Qwen3Config huge = {.n_layers = 1 << 20, .kv_dim = 1 << 20};
    CHECK(kv_pool_create(&huge, 4096, 1 << 24, err) == NULL); /* 2^67 bytes */
    CHECK(strstr(err, "too large") != NULL || strstr(err, "cannot allocate") != NULL);
}

/* A paged cache on p, n positions reserved and written: position t of layer
 * l gets keys t*100 + l*10 + j and values the negatives. */
static KvCache *filled_cache(KvPool *p, int n) {
    Qwen3Config c = pool_config();
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create("paged", &c, p, err);
    CHECK_MSG(kv != NULL, "%s", err);
    if (!kv) return NULL;
    CHECK_MSG(kv->reserve(kv, n, err) == 0, "%s", err);
    for (int t = 0; t < n; t++)
        for (int l = 0; l < c.n_layers; l++) {
            float k[4], v[4];
            for (int j = 0; j < 4; j++) k[j] = -(v[j] = (float)(t * 100 + l * 10 + j));
            kv->append(kv, l, k, v);
        }
    return kv;
}

/* Every layer's view has one span per block, and reads back positions 0..n-1 in order. */
static void check_view(KvCache *kv, int n, int block_size) {
    for (int l = 0; l < kv->n_layers; l++) {
        int want = (n + block_size - 1) / block_size;
        CHECK_EQ_INT(kv->view(kv, l, NULL, 0), want);
        KvSpan *spans = calloc((size_t)want + 1, sizeof *spans);
        CHECK_EQ_INT(kv->view(kv, l, spans, want), want);
        int t = 0;
        for (int s = 0; s < want; s++) {
            CHECK_EQ_INT(spans[s].n, s < want - 1 ? block_size : n - (want - 1) * block_size);
            for (int r = 0; r < spans[s].n; r++, t++)
                for (int j = 0; j < 4; j++)
                    if (spans[s].v[r * 4 + j] != (float)(t * 100 + l * 10 + j) ||
                        spans[s].k[r * 4 + j] != -spans[s].v[r * 4 + j]) {
                        test_fail(__FILE__, __LINE__, "layer %d position %d reads back wrong", l, t);
                        free(spans);
                        return;
                    }
        }
        CHECK_EQ_INT(t, n);
        free(spans);
    }
}

TEST(III4_paged_append_across_block_boundaries) {
    int sizes[] = {1, 16, 7};
    for (int k = 0; k < 3; k++) {
        int bs = sizes[k], n = 40; /* 7 does not divide 40: the last block is partly filled */
        KvPool *p = make_pool(bs, 64);
        if (!p) return;
        KvCache *kv = filled_cache(p, n);
        if (!kv) return;
        CHECK_EQ_INT(kv->seq_len(kv), n);
        const KvBlockTable *t = kv_paged_table(kv);
        CHECK_EQ_INT(t->n, (n + bs - 1) / bs);
        CHECK_EQ_INT(t->n_tokens, n);
        CHECK_EQ_INT(p->fill[t->blocks[t->n - 1]], n - (t->n - 1) * bs);
        check_view(kv, n, bs);
        kv_cache_free(kv);
        CHECK_EQ_INT(free_blocks(p), 64); /* every block back */
        kv_pool_free(p);
    }
}

TEST(III4_paged_view_spans_point_into_the_blocks) {
    KvPool *p = make_pool(4, 8);
    if (!p) return;
    KvCache *kv = filled_cache(p, 10);
    if (!kv) return;
    KvSpan spans[2];
    CHECK_EQ_INT(kv->view(kv, 1, spans, 2), 3); /* there are 3; only 2 written */
    const KvBlockTable *t = kv_paged_table(kv);
    CHECK(spans[0].k == kv_pool_keys(p, t->blocks[0], 1)); /* read in place: no copy */
    CHECK(spans[1].v == kv_pool_values(p, t->blocks[1], 1));
    CHECK_EQ_INT(spans[1].n, 4);
    check_view(kv, 10, 4);
    kv_cache_free(kv);
    kv_pool_free(p);
}

TEST(III4_paged_reserve_takes_whole_blocks_once) {
    KvPool *p = make_pool(4, 8);
    if (!p) return;
    Qwen3Config c = pool_config();
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv->reserve(kv, 5, err), 0);
    CHECK_EQ_INT(free_blocks(p), 6); /* 5 positions: 2 blocks */
    CHECK_EQ_INT(kv->reserve(kv, 8, err), 0);
    CHECK_EQ_INT(free_blocks(p), 6); /* still room for 8 */
    CHECK_EQ_INT(kv->reserve(kv, 9, err), 0);
    CHECK_EQ_INT(free_blocks(p), 5);
    CHECK_EQ_INT(kv->reserve(kv, 0, err), 0);
    CHECK_EQ_INT(kv->seq_len(kv), 0); /* reserving writes nothing */
    kv->truncate(kv, 0);               /* and unused room goes back */
    CHECK_EQ_INT(free_blocks(p), 8);
    kv_cache_free(kv);
    kv_pool_free(p);
}

TEST(III4_paged_reserve_out_of_blocks_changes_nothing) {
    KvPool *p = make_pool(4, 3);
    if (!p) return;
    KvCache *kv = filled_cache(p, 6); /* 2 blocks, 1 free */
    if (!kv) return;
    KvCache *other = filled_cache(p, 1); /* the last one */
    if (!other) return;
    char err[ERR_MAX] = "";
    CHECK_EQ_INT(kv->reserve(kv, 3, err), -1); /* positions 6..8: a third block */
    CHECK_STR(err, "out of KV blocks: 3 more positions need 1 block, 0 of 3 are free (block size 4)");
    CHECK_EQ_INT(kv_paged_table(kv)->n, 2);
    CHECK_EQ_INT(kv->seq_len(kv), 6);
    check_view(kv, 6, 4);
    CHECK_EQ_INT(kv->reserve(kv, 2, err), 0); /* what fits still works */
    kv_cache_free(other);
    CHECK_EQ_INT(kv->reserve(kv, 3, err), 0); /* and the freed block is usable */
    kv_cache_free(kv);
    CHECK_EQ_INT(free_blocks(p), 3); /* nothing leaked */
    kv_pool_free(p);
}

TEST(III4_paged_truncate_returns_blocks) {
    KvPool *p = make_pool(4, 8);
    if (!p) return;
    KvCache *kv = filled_cache(p, 14); /* 4 blocks */
    if (!kv) return;
    kv->truncate(kv, 5);
    CHECK_EQ_INT(kv->seq_len(kv), 5);
    CHECK_EQ_INT(kv_paged_table(kv)->n, 2);
    CHECK_EQ_INT(kv_paged_table(kv)->n_tokens, 5);
    CHECK_EQ_INT(p->fill[kv_paged_table(kv)->blocks[1]], 1);
    CHECK_EQ_INT(free_blocks(p), 6);
    check_view(kv, 5, 4);
    kv->truncate(kv, 9); /* longer than it holds: nothing to forget */
    CHECK_EQ_INT(kv->seq_len(kv), 5);
    kv->truncate(kv, 0);
    CHECK_EQ_INT(free_blocks(p), 8);
    CHECK_EQ_INT(kv->view(kv, 0, NULL, 0), 0);
    kv_cache_free(kv);
    kv_pool_free(p);
}

/* One position's rows for layer l, all equal to x. */
static void append_all_layers(KvCache *kv, float x) {
    float row[4] = {x, x, x, x};
    for (int l = 0; l < kv->n_layers; l++) kv->append(kv, l, row, row);
}

TEST(III4_paged_copy_on_write_keeps_the_shared_block) {
    KvPool *p = make_pool(4, 8);
    if (!p) return;
    KvCache *a = filled_cache(p, 6); /* blocks: [full, 2 of 4] */
    char err[ERR_MAX];
    KvCache *b = a ? kv_paged_fork(a, 6, err) : NULL;
    CHECK_MSG(b != NULL, "%s", err);
    if (!b) return;
    const KvBlockTable *ta = kv_paged_table(a), *tb = kv_paged_table(b);
    CHECK_EQ_INT(tb->n, 2);
    CHECK_EQ_INT(tb->blocks[1], ta->blocks[1]);
    CHECK_EQ_INT(p->ref[ta->blocks[0]], 2);
    CHECK_EQ_INT(p->ref[ta->blocks[1]], 2);
    CHECK_EQ_INT(free_blocks(p), 6); /* shared, not copied */
    int shared = ta->blocks[1];
    CHECK_EQ_INT(b->reserve(b, 1, err), 0); /* b writes into the shared block: it gets a copy */
    CHECK(tb->blocks[1] != shared);
    CHECK_EQ_INT(tb->blocks[0], ta->blocks[0]); /* the full block stays shared */
    CHECK_EQ_INT(p->ref[shared], 1);
    CHECK_EQ_INT(p->ref[tb->blocks[1]], 1);
    CHECK_EQ_INT(p->fill[tb->blocks[1]], 2);
    CHECK_EQ_INT(free_blocks(p), 5);
    append_all_layers(b, 999.0f);
    check_view(a, 6, 4); /* a never sees b's write */
    KvSpan s[2];
    b->view(b, 2, s, 2);
    CHECK_EQ_INT(s[1].n, 3);
    CHECK(s[1].v[1 * 4] == 520.0f); /* position 5, layer 2, j 0: copied */
    CHECK(s[1].v[2 * 4] == 999.0f);
    CHECK_EQ_INT(a->reserve(a, 1, err), 0); /* a's block is its own again: written in place */
    CHECK_EQ_INT(ta->blocks[1], shared);
    append_all_layers(a, 7.0f);
    CHECK(s[1].v[2 * 4] == 999.0f);
    kv_cache_free(a);
    CHECK_EQ_INT(p->ref[tb->blocks[0]], 1);
    kv_cache_free(b);
    CHECK_EQ_INT(free_blocks(p), 8);
    kv_pool_free(p);
}

TEST(III4_paged_copy_on_write_needs_a_free_block) {
    KvPool *p = make_pool(4, 2);
    if (!p) return;
    KvCache *a = filled_cache(p, 3);
    char err[ERR_MAX] = "";
    KvCache *b = a ? kv_paged_fork(a, 2, err) : NULL; /* a prefix of a block */
    KvCache *c = b ? filled_cache(p, 1) : NULL;       /* the pool is now full */
    if (!c) return;
    CHECK_EQ_INT(b->reserve(b, 1, err), -1); /* the copy needs a block */
    CHECK_STR(err, "out of KV blocks: 1 more position needs 1 block, 0 of 2 are free (block size 4)");
    CHECK_EQ_INT(b->seq_len(b), 2);
    kv_cache_free(c);
    CHECK_EQ_INT(b->reserve(b, 1, err), 0);
    append_all_layers(b, 5.0f);
    check_view(a, 3, 4); /* position 2 of a is still a's */
    kv_cache_free(a);
    kv_cache_free(b);
    CHECK_EQ_INT(free_blocks(p), 2);
    kv_pool_free(p);
}

TEST(III4_paged_fork_errors) {
    KvPool *p = make_pool(4, 4);
    if (!p) return;
    KvCache *a = filled_cache(p, 3);
    char err[ERR_MAX] = "";
    CHECK(kv_paged_fork(a, 4, err) == NULL);
    CHECK(strstr(err, "4 positions of a cache that holds 3") != NULL);
    Qwen3Config c = pool_config();
    KvCache *basic = kv_cache_create("basic", &c, NULL, err);
    CHECK(kv_paged_fork(basic, 0, err) == NULL);
    CHECK(strstr(err, "basic") != NULL);
    CHECK(kv_paged_table(basic) == NULL);
    kv_cache_free(basic);
    kv_cache_free(a);
    kv_pool_free(p);
}

TEST(III4_paged_copy_on_write_after_adopting_kept_blocks) {
    KvPool *p = make_pool(4, 8);
    if (!p) return;
    KvCache *a = filled_cache(p, 7);
    if (!a) return;
    /* Someone (III.7's prefix cache) keeps a's blocks by reference; a ends. */
    const KvBlockTable *ta = kv_paged_table(a);
    int kept[2] = {ta->blocks[0], ta->blocks[1]};
    kv_pool_lock(p);
    for (int i = 0; i < 2; i++) kv_pool_ref(p, kept[i]);
    kv_pool_unlock(p);
    kv_cache_free(a);
    CHECK_EQ_INT(free_blocks(p), 6);
    Qwen3Config c = pool_config();
    char err[ERR_MAX] = "";
    KvCache *b = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv_paged_adopt(b, kept, 6, err), 0);
    CHECK_EQ_INT(b->seq_len(b), 6);
    CHECK_EQ_INT(p->ref[kept[1]], 2);
    check_view(b, 6, 4);
    CHECK_EQ_INT(kv_paged_adopt(b, kept, 6, err), -1); /* only into an empty cache */
    CHECK(strstr(err, "empty") != NULL);
    CHECK_EQ_INT(b->reserve(b, 1, err), 0);
    CHECK(kv_paged_table(b)->blocks[1] != kept[1]); /* the kept block is not written */
    append_all_layers(b, 3.0f);
    KvCache *d = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv_paged_adopt(d, kept, 7, err), 0); /* the kept block still holds a's position 6 */
    check_view(d, 7, 4);
    int bad[1] = {5};
    KvCache *e = kv_cache_create("paged", &c, p, err);
    CHECK_EQ_INT(kv_paged_adopt(e, bad, 3, err), -1);
    CHECK_STR(err, "cannot adopt block 5: it is not a block in use of this pool");
    CHECK_EQ_INT(kv_paged_table(e)->n, 0);
    kv_cache_free(e);
    kv_cache_free(d);
    kv_cache_free(b);
    kv_pool_lock(p);
    for (int i = 0; i < 2; i++) kv_pool_release(p, kept[i]);
    kv_pool_unlock(p);
    CHECK_EQ_INT(free_blocks(p), 8);
    kv_pool_free(p);
}

TEST(III4_paged_create_errors) {
    Qwen3Config c = pool_config();
    char err[ERR_MAX] = "";
    CHECK(kv_cache_create("paged", &c, NULL, err) == NULL);
    CHECK(strstr(err, "needs a block pool") != NULL);
    KvPool *p = make_pool(4, 4);
    Qwen3Config other = {.n_layers = 2, .kv_dim = 4};
    CHECK(kv_cache_create("paged", &other, p, err) == NULL);
    CHECK(strstr(err, "3 layers of 4 floats, the model has 2 of 4") != NULL);
    CHECK(kv_cache_create("fancy", &c, p, err) == NULL);
    CHECK(strstr(err, "'fancy'") != NULL);
    KvCache *kv = kv_cache_create(NULL, &c, p, err); /* the default kind */
    CHECK(kv && strcmp(kv->kind, "paged") == 0);
    kv_cache_free(kv);
    kv_pool_free(p);
}

TEST(III4_pool_map_json_and_trace) {
    KvPool *p = make_pool(4, 6);
    if (!p) return;
    KvCache *a = filled_cache(p, 6);
    char err[ERR_MAX];
    KvCache *b = a ? kv_paged_fork(a, 5, err) : NULL;
    if (!b) return;
    kv_paged_set_owner(b, "req-7");
    Buf j = {0};
    kv_pool_json(p, &j);
    JsonValue *v = json_parse(j.data, j.len, err);
    CHECK_MSG(v != NULL, "%s: %s", err, j.data);
    if (v) {
        CHECK_EQ_INT(json_get(v, "blocks_total")->number, 6);
        CHECK_EQ_INT(json_get(v, "blocks_used")->number, 2);
        CHECK_EQ_INT(json_get(v, "blocks_free")->number, 4);
        CHECK_EQ_INT(json_get(v, "block_size")->number, 4);
        CHECK_STR(json_get(v, "map")->string, "22....");
        const JsonValue *used = json_get(v, "used"), *seqs = json_get(v, "sequences");
        CHECK(used && used->n_items == 2 && json_get(&used->items[1], "fill")->number == 2);
        CHECK(seqs && seqs->n_items == 2);
        if (seqs && seqs->n_items == 2) {
            CHECK_STR(json_get(&seqs->items[0], "owner")->string, "req-7");
            CHECK_EQ_INT(json_get(&seqs->items[0], "tokens")->number, 5);
            CHECK_EQ_INT(json_get(&seqs->items[1], "blocks")->n_items, 2);
        }
        json_free(v);
    }
    buf_free(&j);
    Buf t = {0};
    kv_pool_trace(p, kv_paged_table(a), &t);
    CHECK_STR(t.data, "6 tokens in 2 blocks [0:4x2 1:2x2] | pool 2 of 6 blocks used, 4 free\n");
    buf_free(&t);
    kv_cache_free(a);
    kv_cache_free(b);
    Buf e = {0};
    kv_pool_json(p, &e);
    CHECK(strstr(e.data, "\"map\":\"......\",\"used\":[],\"sequences\":[]") != NULL);
    buf_free(&e);
    kv_pool_free(p);
}
