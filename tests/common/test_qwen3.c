/* The Qwen3 loader: configuration from metadata, every tensor checked by name
 * and shape, clear errors for files that are not what they claim. The broken
 * files are a mkmodel model with one key, name or value patched in memory. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "qwen3.h"
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
