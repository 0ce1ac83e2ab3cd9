/* The Qwen3 loader: configuration from metadata, every tensor checked by name
 * and shape, clear errors for files that are not what they claim. The broken
 * files are a mkmodel model with one key, name or value patched in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "gguf.h"
#include "backend.h"
#include "backend_simd.h"
#include "qwen3.h"
#include "tiles.h"
#include "util.h"

static char *load_bytes(const char *name, size_t *len) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/%s.gguf", test_models_dir(), name);
    char *data = file_read_all(path, len, err);
    if (!data) test_fail(__FILE__, __LINE__, "%s (run make test to make the test models)", err);
    return data;
}

/* Loads data as a model; returns 0 or -1 with err. */
static int load_from(char *data, size_t len, Qwen3Model *m, char *err) {
    GgufFile g;
    if (gguf_parse(&g, data, len, err) != 0) return -1;
    if (qwen3_from_gguf(m, &g, err) != 0) return -1;
    return 0;
}

/* Replaces the first occurrence of a string (same length) in the file. */
static bool patch(char *data, size_t len, const char *from, const char *to) {
    char *p = memmem(data, len, from, strlen(from));
    if (!p) return false;
    memcpy(p, to, strlen(to));
    return true;
}

/* Sets the u32 value of a metadata key (the key is followed by type u32 then the value). */
static bool set_u32(char *data, size_t len, const char *key, uint32_t v) {
    char *p = memmem(data, len, key, strlen(key));
    if (!p) return false;
    memcpy(p + strlen(key) + 4, &v, 4);
    return true;
}

static void expect_load_error(const char *model, const char *from, const char *to, const char *want) {
    size_t len;
    char *data = load_bytes(model, &len);
    if (!data) return;
    CHECK_MSG(patch(data, len, from, to), "'%s' not found in %s", from, model);
    Qwen3Model m;
    char err[ERR_MAX] = "";
    CHECK_MSG(load_from(data, len, &m, err) != 0, "patching '%s' -> '%s' was not rejected", from, to);
    CHECK_MSG(strstr(err, want) != NULL, "error '%s' does not mention '%s'", err, want);
    free(data);
}

TEST(qwen3_loads_config) {
    size_t len;
    char *data = load_bytes("small-f32", &len);
    if (!data) return;
    Qwen3Model m;
    char err[ERR_MAX];
    CHECK_EQ_INT(load_from(data, len, &m, err), 0);
    CHECK_EQ_INT(m.cfg.n_layers, 4);
    CHECK_EQ_INT(m.cfg.dim, 128);
    CHECK_EQ_INT(m.cfg.n_heads, 8);
    CHECK_EQ_INT(m.cfg.n_kv_heads, 2);
    CHECK_EQ_INT(m.cfg.head_dim, 32);
    CHECK_EQ_INT(m.cfg.q_dim, 256); /* head_dim from key_length, not dim / n_heads */
    CHECK(m.tied);
    CHECK(m.output.data == m.tok_embd.data);
    CHECK_NEAR(m.cfg.rope_theta, 1e6, 1);
    qwen3_free(&m);
    free(data);
}

TEST(qwen3_untied_output) {
    size_t len;
    char *data = load_bytes("small-untied", &len);
    if (!data) return;
    Qwen3Model m;
    char err[ERR_MAX];
    CHECK_EQ_INT(load_from(data, len, &m, err), 0);
    CHECK(!m.tied);
    CHECK(m.output.data != m.tok_embd.data);
    qwen3_free(&m);
    free(data);
}

/* The reader leaves every matrix in the file's mapping; qwen3_place_matrices
 * (what qwen3_load does next) copies each into one region: as tiles where an
 * AVX-512 build reads Q8_0, Q4_0 and Q4_1 from tiles, as the file's rows
 * otherwise (the tied output's too), byte for byte. */
static void check_placed(const char *name) {
    size_t len;
    char *data = load_bytes(name, &len);
    if (!data) return;
    Qwen3Model m;
    char err[ERR_MAX];
    CHECK_EQ_INT(load_from(data, len, &m, err), 0);
    CHECK(m.region == NULL && m.layers[0].wq.tiles == NULL);
    int n = 7 * m.cfg.n_layers + 1;
    const void **file_rows = malloc((size_t)n * sizeof *file_rows);
    for (int i = 0; i < n; i++) file_rows[i] = qwen3_matrix(&m, i)->data;
    qwen3_place_matrices(&m);
    CHECK_MSG(m.region != NULL, "%s: no region", name);
    const char *begin = m.region, *end = begin + m.region_bytes;
    size_t shares = 0;
    CHECK(m.tok_embd.data == file_rows[n - 1] || !m.tied); /* embedding rows are read from the file */
    for (int i = 0; m.region && i < n; i++) {
        const Tensor *w = qwen3_matrix(&m, i);
        bool want = simd_reads_tiles() && tiles_type(w->type);
        CHECK_MSG(want == (w->tiles != NULL), "%s %s: tiles %p", name, w->name, w->tiles);
        const char *at = w->tiles ? w->tiles : w->data;
        size_t bytes = w->tiles ? tiles_bytes(w) : tensor_bytes(w);
        CHECK_MSG(at == begin + shares && at + bytes <= end, "%s %s: not in its place in the region", name, w->name);
        shares += (bytes + 63) / 64 * 64;
        if (w->tiles) {
            CHECK(w->data == file_rows[i]);
            void *again = malloc(tiles_bytes(w));
            tiles_build(w, again);
            CHECK_MSG(memcmp(again, w->tiles, tiles_bytes(w)) == 0, "%s %s: tiles differ", name, w->name);
            free(again);
        } else {
            CHECK_MSG(memcmp(w->data, file_rows[i], tensor_bytes(w)) == 0, "%s %s: rows differ", name, w->name);
        }
    }
    CHECK_MSG(shares == m.region_bytes, "%s: %zu bytes placed, region of %zu", name, shares, m.region_bytes);
    free(file_rows);
    qwen3_free(&m);
    free(data);
}

TEST(qwen3_matrices_placed_for_the_kernels) {
    check_placed("small-q8_0");
    check_placed("tiny-f32");
    check_placed("small-untied");
    check_placed("kquant-q4_k_m");
}

/* Loaded from disk, the file's pages of the placed matrices are let go; what
 * is still read from the file (the tied output's embedding rows) comes back
 * as the file's bytes, and so do the matrices. */
TEST(qwen3_load_lets_go_of_the_file_pages_safely) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/small-q8_0.gguf", test_models_dir());
    size_t len;
    char *data = load_bytes("small-q8_0", &len);
    if (!data) return;
    Qwen3Model m;
    CHECK_MSG(qwen3_load(&m, path, err) == 0, "%s", err);
    CHECK(m.tied && m.region != NULL);
    CHECK(m.file.owns_map && m.file.size == len);
    const char *file = (const char *)m.file.map;
    size_t at = (size_t)((const char *)m.tok_embd.data - file);
    CHECK_MSG(memcmp(m.tok_embd.data, data + at, tensor_bytes(&m.tok_embd)) == 0, "embedding rows differ from the file");
    const Tensor *ws[] = {&m.layers[0].w_up, &m.layers[m.cfg.n_layers - 1].wo};
    for (int i = 0; i < 2; i++) {
        const GgufTensor *t = gguf_find_tensor(&m.file, ws[i]->name);
        CHECK_MSG(t != NULL, "%s not in the file", ws[i]->name);
        if (!t) continue;
        size_t off = (size_t)((const char *)t->data - file);
        CHECK_MSG(memcmp(t->data, data + off, t->nbytes) == 0, "%s: the file's pages read back differ", ws[i]->name);
        if (!ws[i]->tiles)
            CHECK_MSG(memcmp(ws[i]->data, data + off, t->nbytes) == 0, "%s: the copy differs from the file", ws[i]->name);
    }
    qwen3_free(&m);
    free(data);
}

TEST(qwen3_missing_key) { expect_load_error("tiny-f32", "qwen3.block_count", "qwen3.block_cXunt", "qwen3.block_count"); }
TEST(qwen3_missing_tensor) { expect_load_error("tiny-f32", "blk.1.ffn_up.weight", "blk.1.ffn_uq.weight", "blk.1.ffn_up.weight"); }
TEST(qwen3_wrong_architecture) { expect_load_error("tiny-f32", "qwen3", "llama", "architecture"); }

TEST(qwen3_wrong_shape_and_bad_values) {
    size_t len;
    char *data = load_bytes("tiny-f32", &len);
    if (!data) return;
    Qwen3Model m;
    char err[ERR_MAX] = "";
    char *copy = malloc(len);
    struct { const char *key; uint32_t v; const char *want; } cases[] = {
        {"qwen3.feed_forward_length", 200, "ffn_gate.weight"},   /* shapes no longer match */
        {"qwen3.attention.head_count_kv", 3, "multiple"},        /* 4 heads in 3 groups */
        {"qwen3.attention.key_length", 15, "even"},
        {"qwen3.embedding_length", 0, "out of range"},
        {"qwen3.attention.head_count", 268435460, "implausible"}, /* 4 + 2^32/16: q_dim would wrap to 64 */
        {"qwen3.block_count", 100, "needs 1100 tensors"},
        {"qwen3.block_count", 1u << 30, "implausible"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(copy, data, len);
        CHECK(set_u32(copy, len, cases[i].key, cases[i].v));
        CHECK_MSG(load_from(copy, len, &m, err) != 0, "%s = %u was accepted", cases[i].key, cases[i].v);
        CHECK_MSG(strstr(err, cases[i].want) != NULL, "%s = %u: error '%s' lacks '%s'", cases[i].key, cases[i].v, err,
                  cases[i].want);
    }
    free(copy);
    free(data);
}

/* ---- strictness: keys that would change the result ------------------------ */

/* Appends a key/value record to b: key, value type, then the value bytes. */
static void rec_key(Buf *b, const char *key, uint32_t type) {
    uint64_t n = strlen(key);
    buf_append(b, &n, 8);
    buf_append(b, key, n);
    buf_append(b, &type, 4);
}
static void rec_str(Buf *b, const char *key, const char *v) {
    rec_key(b, key, 8); /* GGUF_STRING */
    uint64_t n = strlen(v);
    buf_append(b, &n, 8);
    buf_append(b, v, n);
}
static void rec_f32(Buf *b, const char *key, float v) {
    rec_key(b, key, 6); /* GGUF_FLOAT32 */
    buf_append(b, &v, 4);
}
static void rec_u32(Buf *b, const char *key, uint32_t v) {
    rec_key(b, key, 4); /* GGUF_UINT32 */
    buf_append(b, &v, 4);
}

/* The model with the records of recs inserted before its first key, plus a
 * filler string key that makes the insertion a multiple of 32 bytes: the data
 * section then moves by whole alignment units and every offset stays valid. */
static char *with_keys(const char *model, const Buf *recs, int n_recs, size_t *len) {
    size_t old_len;
    char *old = load_bytes(model, &old_len);
    if (!old) return NULL;
    Buf ins = {0};
    buf_append(&ins, recs->data, recs->len);
    size_t filler = (32 - (ins.len + 8 + 11 + 4 + 8) % 32) % 32;
    char pad[40];
    memset(pad, 'x', filler);
    pad[filler] = '\0';
    rec_str(&ins, "general.pad", pad);
    char *data = malloc(old_len + ins.len);
    memcpy(data, old, 24);
    memcpy(data + 24, ins.data, ins.len);
    memcpy(data + 24 + ins.len, old + 24, old_len - 24);
    uint64_t n_kv;
    memcpy(&n_kv, data + 16, 8);
    n_kv += (uint64_t)n_recs + 1;
    memcpy(data + 16, &n_kv, 8);
    *len = old_len + ins.len;
    buf_free(&ins);
    free(old);
    return data;
}

/* Loads tiny-f32 with the extra records; want NULL: it must load. */
static void expect_keys(const Buf *recs, int n_recs, const char *want) {
    size_t len;
    char *data = with_keys("tiny-f32", recs, n_recs, &len);
    if (!data) return;
    Qwen3Model m;
    char err[ERR_MAX] = "";
    int rc = load_from(data, len, &m, err);
    if (!want) {
        CHECK_MSG(rc == 0, "rejected: %s", err);
        if (rc == 0) qwen3_free(&m);
    } else {
        CHECK_MSG(rc != 0, "accepted, expected an error about '%s'", want);
        CHECK_MSG(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
    }
    free(data);
}

TEST(qwen3_rope_base_is_required) {
    /* without the key llama.cpp would use 10000: this engine refuses to guess */
    expect_load_error("tiny-f32", "qwen3.rope.freq_base", "qwen3.xope.freq_base", "qwen3.rope.freq_base");
}

TEST(qwen3_rope_scaling_is_refused_by_name) {
    Buf b = {0};
    rec_str(&b, "qwen3.rope.scaling.type", "yarn");
    rec_f32(&b, "qwen3.rope.scaling.factor", 4.0f);
    rec_u32(&b, "qwen3.rope.scaling.original_context_length", 32768);
    expect_keys(&b, 3, "'qwen3.rope.scaling.type' = 'yarn'");
    buf_free(&b);
    rec_f32(&b, "qwen3.rope.scaling.factor", 2.0f); /* linear scaling by 2 (the type's default) */
    expect_keys(&b, 1, "'qwen3.rope.scaling.factor' = 2");
    buf_free(&b);
    rec_f32(&b, "qwen3.rope.scale_linear", 0.5f);
    expect_keys(&b, 1, "qwen3.rope.scale_linear");
    buf_free(&b);
    rec_f32(&b, "qwen3.rope.scaling.attn_factor", 0.9f);
    expect_keys(&b, 1, "qwen3.rope.scaling.attn_factor");
    buf_free(&b);
    rec_u32(&b, "qwen3.rope.dimension_count", 8); /* half of the 16-wide heads */
    expect_keys(&b, 1, "rotates the whole head");
    buf_free(&b);
    rec_f32(&b, "qwen3.rope.scaling.yarn_beta_fast", 32.0f); /* a variant this engine does not know */
    expect_keys(&b, 1, "'qwen3.rope.scaling.yarn_beta_fast'");
    buf_free(&b);
}

TEST(qwen3_neutral_rope_keys_load) {
    Buf b = {0};
    rec_str(&b, "qwen3.rope.scaling.type", "none");
    rec_f32(&b, "qwen3.rope.scaling.factor", 1.0f);
    rec_u32(&b, "qwen3.rope.dimension_count", 16);
    rec_u32(&b, "qwen3.rope.scaling.original_context_length", 2048);
    expect_keys(&b, 4, NULL);
    buf_free(&b);
}

/* A tensor of a type the engine does not run: the error names the tensor, its
 * type and the types that are supported. */
TEST(qwen3_unsupported_tensor_type) {
    size_t len;
    char *data = load_bytes("kquant-q6_k", &len);
    if (!data) return;
    char *name = memmem(data, len, "blk.1.attn_q.weight", 19);
    CHECK(name != NULL);
    if (!name) {
        free(data);
        return;
    }
    uint32_t dims;
    memcpy(&dims, name + 19, 4);
    char *type = name + 19 + 4 + 8 * dims;
    uint32_t others[] = {16, 19, 29, 35, 39}; /* IQ2_XXS, IQ1_S, IQ1_M, TQ2_0, MXFP4 */
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        memcpy(type, &others[i], 4);
        Qwen3Model m;
        char err[ERR_MAX] = "", want[96];
        CHECK(load_from(data, len, &m, err) != 0);
        snprintf(want, sizeof want, "tensor 'blk.1.attn_q.weight': type %s is not supported", dtype_name(others[i]));
        CHECK_MSG(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
        CHECK_MSG(strstr(err, dtype_supported_names()) != NULL, "error '%s' does not list the supported types", err);
    }
    free(data);
}
