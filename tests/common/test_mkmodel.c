/* test_mkmodel.c: the files tools/mkmodel writes (build/models, made by
 * `make test` before the tests run): metadata as real Qwen3 GGUFs have it,
 * the vocabulary layout, tensor names, shapes and types, determinism, and
 * errors for bad flags. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtype.h"
#include "gguf.h"
#include "harness.h"
#include "tokenizer.h"
#include "util.h"

/* Opens build/models/<name>; skips the test (returns false) if it is absent. */
static bool open_model(GgufFile *g, const char *name) {
    char path[1024], err[ERR_MAX] = "";
    snprintf(path, sizeof path, "%s/%s", test_models_dir(), name);
    if (gguf_open(g, path, err) != 0) {
        test_skip("model not built (made by `make test`)");
        return false;
    }
    return true;
}

static uint32_t get_u32(const GgufFile *g, const char *key) {
    uint32_t v = 0;
    char err[ERR_MAX] = "";
    CHECK_MSG(gguf_get_u32(g, key, &v, err) == 0, "%s", err);
    return v;
}

static bool str_is(GgufStr s, const char *c) { return gguf_str_eq(s, c); }

TEST(mkmodel_tiny_metadata) {
    GgufFile g;
    if (!open_model(&g, "tiny-f32.gguf")) return;
    char err[ERR_MAX] = "";
    GgufStr s;
    CHECK(g.version == 3 && g.alignment == 32 && g.data_start % 32 == 0);
    CHECK(gguf_get_str(&g, "general.architecture", &s, err) == 0 && str_is(s, "qwen3"));
    CHECK_EQ_INT(get_u32(&g, "qwen3.block_count"), 2);
    CHECK_EQ_INT(get_u32(&g, "qwen3.embedding_length"), 64);
    CHECK_EQ_INT(get_u32(&g, "qwen3.feed_forward_length"), 192);
    CHECK_EQ_INT(get_u32(&g, "qwen3.attention.head_count"), 4);
    CHECK_EQ_INT(get_u32(&g, "qwen3.attention.head_count_kv"), 2);
    CHECK_EQ_INT(get_u32(&g, "qwen3.attention.key_length"), 16);
    CHECK_EQ_INT(get_u32(&g, "qwen3.attention.value_length"), 16);
    CHECK_EQ_INT(get_u32(&g, "general.file_type"), 0);
    CHECK(get_u32(&g, "qwen3.context_length") > 0);
    /* the types real files use: u32 counts, f32 rope base and epsilon, bool add_bos */
    const GgufKv *kv = gguf_find(&g, "qwen3.block_count");
    CHECK(kv && kv->type == GGUF_UINT32);
    kv = gguf_find(&g, "qwen3.rope.freq_base");
    CHECK(kv && kv->type == GGUF_FLOAT32 && kv->v.f == 1e6);
    kv = gguf_find(&g, "qwen3.attention.layer_norm_rms_epsilon");
    CHECK(kv && kv->type == GGUF_FLOAT32 && kv->v.f == (double)1e-6f);
    kv = gguf_find(&g, "tokenizer.ggml.add_bos_token");
    CHECK(kv && kv->type == GGUF_BOOL && kv->v.u == 0);
    CHECK(gguf_get_str(&g, "tokenizer.ggml.model", &s, err) == 0 && str_is(s, "gpt2"));
    CHECK(gguf_get_str(&g, "tokenizer.ggml.pre", &s, err) == 0 && str_is(s, "qwen2"));
    CHECK(gguf_get_str(&g, "tokenizer.chat_template", &s, err) == 0 && s.len > 0);
    CHECK(gguf_find(&g, "general.quantization_version") == NULL);
    gguf_close(&g);
}

/* Ids 0..255 are the byte tokens in GPT-2 order, each merge's token is its
 * parts joined (id 256 + rank), then the specials, then [PADn] fillers. */
TEST(mkmodel_vocabulary_layout) {
    GgufFile g;
    if (!open_model(&g, "tiny-f32.gguf")) return;
    char err[ERR_MAX] = "";
    GgufStr *tok = NULL, *merges = NULL;
    uint64_t n_tok = 0, n_merges = 0;
    const GgufKv *types = NULL;
    CHECK(gguf_get_str_arr(&g, "tokenizer.ggml.tokens", &tok, &n_tok, err) == 0);
    CHECK(gguf_get_str_arr(&g, "tokenizer.ggml.merges", &merges, &n_merges, err) == 0);
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.token_type", GGUF_INT32, &types, err) == 0);
    const GgufTensor *embd = gguf_find_tensor(&g, "token_embd.weight");
    if (!tok || !merges || !types || !embd) {
        CHECK(false);
        goto done;
    }
    CHECK_EQ_INT(n_tok, embd->ne[1]);
    CHECK_EQ_INT(types->arr_len, n_tok);
    CHECK(str_is(tok[0], "!") && str_is(tok[93], "~"));
    CHECK(str_is(tok[220], "\xC4\xA0") && str_is(tok[198], "\xC4\x8A") && str_is(tok[197], "\xC4\x89"));
    CHECK(n_merges > 500);
    for (uint64_t r = 0; r < n_merges; r++) {
        const char *sp = memchr(merges[r].ptr + 1, ' ', merges[r].len - 1);
        GgufStr t = tok[256 + r];
        size_t left = sp ? (size_t)(sp - merges[r].ptr) : 0;
        bool ok = sp && t.len == merges[r].len - 1 && memcmp(t.ptr, merges[r].ptr, left) == 0 &&
                  memcmp(t.ptr + left, sp + 1, t.len - left) == 0;
        CHECK_MSG(ok, "merge %llu '%.*s' does not make token %llu '%.*s'", (unsigned long long)r,
                  (int)merges[r].len, merges[r].ptr, (unsigned long long)(256 + r), (int)t.len, t.ptr);
        if (!ok) break;
    }
    uint64_t sp0 = 256 + n_merges;
    CHECK(str_is(tok[sp0], "<|endoftext|>") && str_is(tok[sp0 + 1], "<|im_start|>"));
    CHECK(str_is(tok[sp0 + 2], "<|im_end|>") && str_is(tok[sp0 + 3], "<think>"));
    CHECK(str_is(tok[sp0 + 4], "</think>"));
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(gguf_arr_int(types, sp0 + (uint64_t)i), 3);
    CHECK_EQ_INT(gguf_arr_int(types, sp0 + 3), 4);
    CHECK_EQ_INT(gguf_arr_int(types, sp0 + 4), 4);
    for (uint64_t i = 0; i < sp0; i++)
        if (gguf_arr_int(types, i) != 1) {
            CHECK_MSG(false, "token %llu has type %lld", (unsigned long long)i, (long long)gguf_arr_int(types, i));
            break;
        }
    for (uint64_t i = sp0 + 5; i < n_tok; i++) {
        char want[32];
        snprintf(want, sizeof want, "[PAD%llu]", (unsigned long long)i);
        CHECK(str_is(tok[i], want) && gguf_arr_int(types, i) == 5);
    }
    CHECK_EQ_INT(get_u32(&g, "tokenizer.ggml.bos_token_id"), sp0);
    CHECK_EQ_INT(get_u32(&g, "tokenizer.ggml.padding_token_id"), sp0);
    CHECK_EQ_INT(get_u32(&g, "tokenizer.ggml.eos_token_id"), sp0 + 2);
done:
    free(tok);
    free(merges);
    gguf_close(&g);
}

/* The merges are learned on the qwen2 pre-token pieces of mkmodel's corpus
 * until none is left, so (in a vocabulary with room for all of them) each
 * piece of a corpus sentence is one token: the tool's pre-tokenizer agrees
 * with the engine's. */
TEST(mkmodel_corpus_pieces_are_tokens) {
    GgufFile g;
    if (!open_model(&g, "medium.gguf")) return;
    char err[ERR_MAX] = "";
    Tokenizer *t = tokenizer_load(&g, err);
    gguf_close(&g);
    CHECK_MSG(t != NULL, "%s", err);
    if (!t) return;
    static const struct { const char *text; int pieces; } CASES[] = {
        {"I think it's a good idea, but I'm not sure we'll have the time.", 19},
        {"The quick brown fox jumps over the lazy dog.", 10},
        {"int main(void) {\n    return 0;\n}", 11},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        int32_t *ids = NULL;
        int n = 0;
        tokenizer_encode(t, CASES[i].text, strlen(CASES[i].text), false, &ids, &n, err);
        CHECK_MSG(n == CASES[i].pieces, "'%s': %d tokens, want %d", CASES[i].text, n, CASES[i].pieces);
        free(ids);
    }
    tokenizer_free(t);
}

/* Tensor names, shapes and types of a tied model in type `type`. */
static void check_tensors(const char *file, uint32_t type, int layers, int64_t dim, int64_t q_dim,
                          int64_t kv_dim, int64_t ffn, int64_t hd, bool untied) {
    GgufFile g;
    if (!open_model(&g, file)) return;
    CHECK_EQ_INT(g.n_tensors, 2 + 11 * (uint64_t)layers + (untied ? 1 : 0));
    struct { const char *name; int64_t ne0, ne1; } want[] = {
        {"attn_norm", dim, 1},   {"attn_q", dim, q_dim},      {"attn_k", dim, kv_dim},
        {"attn_v", dim, kv_dim}, {"attn_output", q_dim, dim}, {"attn_q_norm", hd, 1},
        {"attn_k_norm", hd, 1},  {"ffn_norm", dim, 1},        {"ffn_gate", dim, ffn},
        {"ffn_up", dim, ffn},    {"ffn_down", ffn, dim},
    };
    for (int l = 0; l < layers; l++) {
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, want[k].name);
            const GgufTensor *t = gguf_find_tensor(&g, name);
            CHECK_MSG(t != NULL, "%s missing", name);
            if (!t) continue;
            CHECK_MSG((int64_t)t->ne[0] == want[k].ne0 && (int64_t)t->ne[1] == want[k].ne1, "%s shape", name);
            CHECK_MSG(t->n_dims == (want[k].ne1 == 1 ? 1u : 2u), "%s n_dims %u", name, t->n_dims);
            CHECK_MSG(t->type == (t->n_dims == 1 ? (uint32_t)DT_F32 : type), "%s type %u", name, t->type);
        }
    }
    const GgufTensor *out = gguf_find_tensor(&g, "output.weight");
    CHECK(untied ? out != NULL : out == NULL);
    const GgufTensor *norm = gguf_find_tensor(&g, "output_norm.weight");
    CHECK(norm && norm->type == DT_F32 && (int64_t)norm->ne[0] == dim);
    for (uint64_t i = 0; i < g.n_tensors; i++) CHECK(g.tensors[i].offset % 32 == 0);
    gguf_close(&g);
}

TEST(mkmodel_tiny_tensors) { check_tensors("tiny-f32.gguf", DT_F32, 2, 64, 64, 32, 192, 16, false); }
TEST(mkmodel_tiny_f16_tensors) { check_tensors("tiny-f16.gguf", DT_F16, 2, 64, 64, 32, 192, 16, false); }
TEST(mkmodel_tiny_bf16_tensors) { check_tensors("tiny-bf16.gguf", DT_BF16, 2, 64, 64, 32, 192, 16, false); }
TEST(mkmodel_small_q8_0_tensors) { check_tensors("small-q8_0.gguf", DT_Q8_0, 4, 128, 256, 64, 352, 32, false); }
TEST(mkmodel_small_untied_tensors) { check_tensors("small-untied.gguf", DT_F32, 4, 128, 256, 64, 352, 32, true); }

TEST(mkmodel_q8_0_metadata) {
    GgufFile g;
    if (!open_model(&g, "tiny-q8_0.gguf")) return;
    CHECK_EQ_INT(get_u32(&g, "general.file_type"), 7);
    CHECK_EQ_INT(get_u32(&g, "general.quantization_version"), 2);
    const GgufTensor *t = gguf_find_tensor(&g, "token_embd.weight");
    CHECK(t && t->type == DT_Q8_0);
    gguf_close(&g);
}

/* The q8_0 file holds the f32 file's weights, quantized: same values within
 * Q8_0's rounding (half a step of amax/127 per block). */
TEST(mkmodel_q8_0_matches_f32) {
    GgufFile a, b;
    if (!open_model(&a, "tiny-f32.gguf")) return;
    if (!open_model(&b, "tiny-q8_0.gguf")) {
        gguf_close(&a);
        return;
    }
    CHECK_EQ_INT(a.n_tensors, b.n_tensors);
    for (uint64_t i = 0; i < a.n_tensors && i < b.n_tensors; i++) {
        const GgufTensor *ta = &a.tensors[i], *tb = gguf_find_tensor(&b, ta->name);
        if (!tb || ta->ne[0] != tb->ne[0]) {
            CHECK_MSG(false, "%s differs", ta->name);
            continue;
        }
        int64_t n = (int64_t)ta->ne[0];
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        size_t ra = dtype_row_bytes(ta->type, n), rb = dtype_row_bytes(tb->type, n);
        double worst = 0;
        for (uint64_t r = 0; r < ta->ne[1]; r++) {
            dequant_row(ta->type, (const char *)ta->data + r * ra, x, n);
            dequant_row(tb->type, (const char *)tb->data + r * rb, y, n);
            for (int64_t j = 0; j < n; j += 32) {
                double amax = 0, err = 0;
                for (int64_t k = j; k < j + 32 && k < n; k++) {
                    amax = amax > fabsf(x[k]) ? amax : fabsf(x[k]);
                    err = err > fabsf(x[k] - y[k]) ? err : fabsf(x[k] - y[k]);
                }
                if (amax > 0 && err / amax > worst) worst = err / amax;
            }
        }
        CHECK_MSG(worst <= 0.5 / 127 + 1e-3, "%s: error %.4g of block amax", ta->name, worst);
        free(x);
        free(y);
    }
    gguf_close(&a);
    gguf_close(&b);
}

/* ---- the tool itself ------------------------------------------------------------------------- */

static bool mkmodel_path(char *out, size_t n) {
    snprintf(out, n, "%s/tools/mkmodel", test_build_dir());
    FILE *f = fopen(out, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Runs mkmodel with args (output discarded); returns its exit status. */
static int run_mkmodel(const char *args) {
    char tool[1024], cmd[4096];
    if (!mkmodel_path(tool, sizeof tool)) return -1;
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", tool, args);
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static bool same_bytes(const char *p, const char *q) {
    char err[ERR_MAX];
    size_t na, nb;
    char *a = file_read_all(p, &na, err), *b = file_read_all(q, &nb, err);
    bool same = a && b && na == nb && memcmp(a, b, na) == 0;
    free(a);
    free(b);
    return same;
}

/* The same flags write the same bytes (as the test model made earlier). */
TEST(mkmodel_deterministic) {
    char tool[1024], ref[1024], args[2048];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    snprintf(ref, sizeof ref, "%s/tiny-q8_0.gguf", test_models_dir());
    FILE *f = fopen(ref, "rb");
    if (!f) SKIP("model not built (made by `make test`)");
    fclose(f);
    const char *out = test_tmp_path("tiny-q8_0.gguf");
    snprintf(args, sizeof args, "--preset tiny --type q8_0 -o '%s'", out);
    CHECK_EQ_INT(run_mkmodel(args), 0);
    CHECK_MSG(same_bytes(ref, out), "%s and %s differ", ref, out);
    const char *other = test_tmp_path("tiny-q8_0-seed2.gguf");
    snprintf(args, sizeof args, "--preset tiny --type q8_0 --seed 2 -o '%s'", other);
    CHECK_EQ_INT(run_mkmodel(args), 0);
    CHECK(!same_bytes(out, other));
    remove(out);
    remove(other);
}

/* A write that fails half-way (a file size limit here) exits 1 and leaves the
 * target as it was, with no temporary file; a device given as the target is
 * written in place and never removed; a good write replaces an old file. */
TEST(mkmodel_never_removes_a_path_it_did_not_create) {
    char tool[1024], cmd[4096];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    const char *target = test_tmp_path("precious.gguf");
    FILE *f = fopen(target, "wb");
    CHECK(f && fputs("precious", f) >= 0);
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 64; '%s' --preset tiny -o '%s' >/dev/null 2>&1", tool, target);
    int rc = system(cmd);
    CHECK_MSG(rc != -1 && WEXITSTATUS(rc) == 1, "a failed write: exit %d, want 1", rc == -1 ? -1 : WEXITSTATUS(rc));
    size_t len;
    char err[ERR_MAX];
    char *text = file_read_all(target, &len, err);
    CHECK_MSG(text && strcmp(text, "precious") == 0, "a failed write changed or removed %s", target);
    free(text);
    snprintf(cmd, sizeof cmd, "ls '%s'.tmp* >/dev/null 2>&1", target);
    CHECK_MSG(system(cmd) != 0, "a failed write left a temporary file beside %s", target);
    char args[1200];
    snprintf(args, sizeof args, "--preset tiny -o '%s'", target);
    CHECK_EQ_INT(run_mkmodel(args), 0);
    GgufFile g;
    CHECK_MSG(gguf_open(&g, target, err) == 0, "%s", err);
    gguf_close(&g);
    remove(target);
    if (geteuid() != 0) return; /* making a device node needs root */
    const char *dev = test_tmp_path("full"); /* like /dev/full: every write fails */
    snprintf(cmd, sizeof cmd, "rm -f '%s' && mknod '%s' c 1 7", dev, dev);
    if (system(cmd) != 0) return; /* not allowed here (a container without mknod) */
    snprintf(args, sizeof args, "--preset tiny -o '%s'", dev);
    CHECK_EQ_INT(run_mkmodel(args), 1);
    struct stat st;
    CHECK_MSG(stat(dev, &st) == 0 && S_ISCHR(st.st_mode), "mkmodel removed or replaced the device %s", dev);
    remove(dev);
}

/* --print-size says the size of the file the same flags write, and writes nothing. */
TEST(mkmodel_print_size_is_the_file_size) {
    char tool[1024], cmd[2048];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    const char *out = test_tmp_path("sized.gguf");
    snprintf(cmd, sizeof cmd, "'%s' --preset small --type q8_0 --untied --print-size", tool);
    FILE *p = popen(cmd, "r");
    unsigned long long said = 0;
    CHECK(p && fscanf(p, "%llu", &said) == 1);
    if (p) pclose(p);
    char args[1200];
    snprintf(args, sizeof args, "--preset small --type q8_0 --untied -o '%s'", out);
    CHECK_EQ_INT(run_mkmodel(args), 0);
    struct stat st;
    CHECK(stat(out, &st) == 0);
    CHECK_EQ_INT((long long)said, (long long)st.st_size);
    remove(out);
}

/* Bad flags and impossible shapes end with exit status 2 and no file. */
TEST(mkmodel_rejects_bad_flags) {
    char tool[1024];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    const char *bad[] = {
        "--preset huge",
        "--preset tiny --type q4_k",          /* rows of 64 are not 256-blocks */
        "--preset tiny --type q4_k_m --pure", /* --pure: no fallback types either */
        "--preset tiny --type q9_9",
        "--preset tiny --heads 6 --kv-heads 4",
        "--preset tiny --head-dim 15",
        "--preset tiny --layers 0",
        "--preset tiny --vocab 100",
        "--preset tiny --hidden 64x",
        "--preset tiny --bogus 1",
        "--preset tiny --layers",
    };
    const char *out = test_tmp_path("bad.gguf");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, "%s -o '%s'", bad[i], out);
        CHECK_MSG(run_mkmodel(args) == 2, "mkmodel %s: expected exit status 2", bad[i]);
        FILE *f = fopen(out, "rb");
        CHECK_MSG(f == NULL, "mkmodel %s left a file", bad[i]);
        if (f) fclose(f);
        remove(out);
    }
    CHECK_EQ_INT(run_mkmodel("--preset tiny"), 2); /* no -o */
}

/* Flags override the preset; K-quant types work when rows are 256-multiples. */
TEST(mkmodel_flags_and_k_quants) {
    char tool[1024], args[1024];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    const char *out = test_tmp_path("q4km.gguf");
    snprintf(args, sizeof args, "--preset tiny --hidden 256 --head-dim 64 --ffn 512 --layers 8 "
                                "--vocab 700 --type q4_k_m -o '%s'", out);
    CHECK_EQ_INT(run_mkmodel(args), 0);
    GgufFile g;
    char err[ERR_MAX] = "";
    if (gguf_open(&g, out, err) != 0) {
        CHECK_MSG(false, "%s", err);
        return;
    }
    CHECK_EQ_INT(get_u32(&g, "qwen3.embedding_length"), 256);
    CHECK_EQ_INT(get_u32(&g, "qwen3.block_count"), 8);
    CHECK_EQ_INT(get_u32(&g, "general.file_type"), 15);
    CHECK_EQ_INT(gguf_find_tensor(&g, "token_embd.weight")->ne[1], 700);
    CHECK_EQ_INT(gguf_find_tensor(&g, "token_embd.weight")->type, DT_Q6_K); /* tied: the output type */
    CHECK_EQ_INT(gguf_find_tensor(&g, "blk.0.attn_q.weight")->type, DT_Q4_K);
    /* use_more_bits(i, 8): layers 0, 3, 6, 7 */
    const int more[8] = {1, 0, 0, 1, 0, 0, 1, 1};
    for (int l = 0; l < 8; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        CHECK_EQ_INT(gguf_find_tensor(&g, name)->type, more[l] ? DT_Q6_K : DT_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        CHECK_EQ_INT(gguf_find_tensor(&g, name)->type, more[l] ? DT_Q6_K : DT_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", l);
        CHECK_EQ_INT(gguf_find_tensor(&g, name)->type, DT_Q4_K);
    }
    gguf_close(&g);
    remove(out);
}

/* ---- llama-quantize's mixes ------------------------------------------------------------------ */

/* A type for the layers whose bit is set in `layers` (the first matching rule wins). */
typedef struct {
    uint32_t type;
    unsigned layers;
} Rule;

/* The types llama-quantize gives an 8-layer Qwen3 with 4 query and 2 kv heads
 * (no attn_v bump: that needs 4 query heads per kv head), tied embeddings
 * (so token_embd takes the output's type) and an importance matrix. */
typedef struct {
    const char *file;
    uint32_t base, embd;
    Rule v[2], o, down;
} Mix;

#define MORE 0xC9u /* use_more_bits(l, 8): layers 0, 3, 6, 7 */
static const Mix MIXES[] = {
    {"kquant-f32.gguf", DT_F32, DT_F32, {{0}}, {0}, {0}},
    {"kquant-q4_0.gguf", DT_Q4_0, DT_Q6_K, {{0}}, {0}, {DT_Q4_1, 0x01}}, /* first eighth of ffn_down */
    {"kquant-q5_0.gguf", DT_Q5_0, DT_Q6_K, {{0}}, {0}, {DT_Q5_1, 0x01}},
    {"kquant-q2_k.gguf", DT_Q2_K, DT_Q6_K, {{DT_Q3_K, 0xFF}}, {DT_Q3_K, 0xFF}, {DT_Q3_K, 0xFF}},
    {"kquant-q3_k_m.gguf", DT_Q3_K, DT_Q6_K, {{DT_Q5_K, 0x03}, {DT_Q4_K, 0xFF}}, {DT_Q4_K, 0xFF}, {DT_Q4_K, 0xFF}},
    {"kquant-q4_k_s.gguf", DT_Q4_K, DT_Q6_K, {{DT_Q5_K, 0x0F}}, {0}, {DT_Q5_K, 0x01}},
    {"kquant-q4_k_m.gguf", DT_Q4_K, DT_Q6_K, {{DT_Q6_K, MORE}}, {0}, {DT_Q6_K, MORE}},
    {"kquant-q5_k_m.gguf", DT_Q5_K, DT_Q6_K, {{DT_Q6_K, MORE}}, {0}, {DT_Q6_K, MORE}},
    {"kquant-q6_k.gguf", DT_Q6_K, DT_Q6_K, {{0}}, {0}, {0}},
    {"kquant-iq4_nl.gguf", DT_IQ4_NL, DT_Q6_K, {{0}}, {0}, {0}},
    {"kquant-iq4_xs.gguf", DT_IQ4_XS, DT_Q6_K, {{0}}, {0}, {0}},
};

static uint32_t rule_type(const Rule *r, int n, int layer, uint32_t base) {
    for (int i = 0; i < n; i++)
        if (r[i].layers & (1u << layer)) return r[i].type;
    return base;
}

TEST(mkmodel_llama_quantize_mixes) {
    for (size_t m = 0; m < sizeof MIXES / sizeof MIXES[0]; m++) {
        const Mix *x = &MIXES[m];
        GgufFile g;
        if (!open_model(&g, x->file)) return;
        CHECK_EQ_INT(gguf_find_tensor(&g, "token_embd.weight")->type, x->embd);
        static const char *const other[] = {"attn_q", "attn_k", "ffn_gate", "ffn_up"};
        for (int l = 0; l < 8; l++) {
            char name[64];
            struct { const char *suffix; uint32_t want; } cases[] = {
                {"attn_v", rule_type(x->v, 2, l, x->base)},
                {"attn_output", rule_type(&x->o, 1, l, x->base)},
                {"ffn_down", rule_type(&x->down, 1, l, x->base)},
                {"attn_norm", DT_F32},
            };
            for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, cases[k].suffix);
                const GgufTensor *t = gguf_find_tensor(&g, name);
                CHECK_MSG(t && t->type == cases[k].want, "%s: %s is %s, llama-quantize writes %s", x->file, name,
                          t ? dtype_name(t->type) : "missing", dtype_name(cases[k].want));
            }
            for (int k = 0; k < 4; k++) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, other[k]);
                const GgufTensor *t = gguf_find_tensor(&g, name);
                CHECK_MSG(t && t->type == x->base, "%s: %s is %s", x->file, name, t ? dtype_name(t->type) : "missing");
            }
        }
        gguf_close(&g);
    }
}

/* Counts of each type in a model made with args (a temporary file). */
static bool type_counts(const char *args, int counts[64]) {
    char full[1024], err[ERR_MAX] = "";
    const char *out = test_tmp_path("mix.gguf");
    snprintf(full, sizeof full, "%s -o '%s'", args, out);
    if (run_mkmodel(full) != 0) {
        CHECK_MSG(false, "mkmodel %s failed", args);
        return false;
    }
    GgufFile g;
    if (gguf_open(&g, out, err) != 0) {
        CHECK_MSG(false, "%s", err);
        return false;
    }
    memset(counts, 0, 64 * sizeof *counts);
    for (uint64_t i = 0; i < g.n_tensors; i++) counts[g.tensors[i].type < 64 ? g.tensors[i].type : 63]++;
    gguf_close(&g);
    remove(out);
    return true;
}

/* With Qwen3-0.6B's 28 layers the mixes give the counts of the real files:
 * unsloth's Qwen3-0.6B-Q4_0.gguf loads as "f32: 113, q4_0: 193, q4_1: 3,
 * q6_K: 1"; a Q4_K_M file with output.weight has 113 F32, 29 Q6_K, 169 Q4_K
 * (book/appendix-gguf.md A.3.8). Small rows keep it fast: the counts depend on the layers. */
TEST(mkmodel_mixes_match_real_file_counts) {
    char tool[1024];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    int c[64];
    if (type_counts("--preset kquant --layers 28 --type q4_0", c)) {
        CHECK_EQ_INT(c[DT_F32], 113);
        CHECK_EQ_INT(c[DT_Q4_0], 193);
        CHECK_EQ_INT(c[DT_Q4_1], 3);
        CHECK_EQ_INT(c[DT_Q6_K], 1);
    }
    if (type_counts("--preset kquant --layers 28 --untied --type q4_k_m", c)) {
        CHECK_EQ_INT(c[DT_F32], 113);
        CHECK_EQ_INT(c[DT_Q6_K], 29);
        CHECK_EQ_INT(c[DT_Q4_K], 169);
    }
}

/* Rows that K-quant blocks do not divide (tiny: rows of 64 and 192) get
 * llama-quantize's fallbacks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * Q2_K / Q3_K / IQ4_XS -> IQ4_NL; --pure writes the type itself. */
TEST(mkmodel_fallback_types) {
    char tool[1024];
    if (!mkmodel_path(tool, sizeof tool)) SKIP("build/tools/mkmodel not built");
    int c[64];
    struct { const char *type; uint32_t base, second; } cases[] = {
        {"q4_k_m", DT_Q5_0, DT_Q8_0}, /* Q4_K and its Q6_K layers */
        {"q5_k_m", DT_Q5_1, DT_Q8_0},
        {"q2_k", DT_IQ4_NL, DT_Q8_0}, /* Q2_K and Q3_K both */
        {"iq4_xs", DT_IQ4_NL, DT_Q8_0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "--preset tiny --type %s", cases[i].type);
        if (!type_counts(args, c)) continue;
        CHECK_MSG(c[cases[i].base] > 0 && c[cases[i].second] > 0 && c[cases[i].base] + c[cases[i].second] + c[DT_F32] == 24,
                  "%s: %d %s, %d %s", cases[i].type, c[cases[i].base], dtype_name(cases[i].base), c[cases[i].second],
                  dtype_name(cases[i].second));
    }
    if (type_counts("--preset kquant --layers 2 --type q4_k_m --pure", c)) CHECK_EQ_INT(c[DT_Q4_K], 15);
}
