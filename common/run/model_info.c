/* model_info.c: see model_info.h. Everything shown is read from the file
 * itself (keys, tensor table), so the summary works on files the engine
 * refuses; the last line says whether it runs them, with the loader's own
 * error when it does not. */
#include "model_info.h"
#include "backend.h"

#include <string.h>

#include "dtype.h"
#include "gguf.h"
#include "qwen3.h"
#include "tokenizer.h"
#include "util.h"

#define LABEL "%-18s"

/* ---- reading keys for display ------------------------------------------------ */

static bool key_u32(const GgufFile *g, const char *key, uint32_t *v) {
    char err[ERR_MAX];
    return gguf_find(g, key) && gguf_get_u32(g, key, v, err) == 0;
}

static bool key_str(const GgufFile *g, const char *key, GgufStr *v) {
    char err[ERR_MAX];
    return gguf_find(g, key) && gguf_get_str(g, key, v, err) == 0;
}

/* A key's value as short text: numbers, bools, strings cut at 60 bytes,
 * arrays as their element count. */
static void value_text(const GgufKv *kv, Buf *b) {
    switch (kv->type) {
    case GGUF_FLOAT32: case GGUF_FLOAT64: buf_printf(b, "%.9g", kv->v.f); break;
    case GGUF_BOOL: buf_puts(b, kv->v.u ? "true" : "false"); break;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64: buf_printf(b, "%lld", (long long)kv->v.i); break;
    case GGUF_STRING:
        buf_printf(b, "'%.*s%s'", (int)(kv->v.s.len > 60 ? 60 : kv->v.s.len), kv->v.s.ptr, kv->v.s.len > 60 ? "..." : "");
        break;
    case GGUF_ARRAY: buf_printf(b, "[%llu %s values]", (unsigned long long)kv->arr_len, gguf_type_name(kv->arr_type)); break;
    default: buf_printf(b, "%llu", (unsigned long long)kv->v.u); break;
    }
}

static void print_u32(FILE *out, const GgufFile *g, const char *key) {
    uint32_t v;
    if (key_u32(g, key, &v)) fprintf(out, "%u", v);
    else fprintf(out, "?");
}

/* ---- the sections ---------------------------------------------------------------- */

static void print_file(FILE *out, const GgufFile *g, const char *path) {
    fprintf(out, LABEL "%s (%.1f MB, GGUF v%u, %llu tensors, %llu metadata keys)\n", "file", path, g->size / 1e6,
            g->version, (unsigned long long)g->n_tensors, (unsigned long long)g->n_kv);
    GgufStr s;
    if (key_str(g, "general.name", &s)) fprintf(out, LABEL "%.*s\n", "name", (int)(s.len > 100 ? 100 : s.len), s.ptr);
}

static void print_shape(FILE *out, const GgufFile *g) {
    GgufStr arch;
    if (!key_str(g, "general.architecture", &arch)) {
        fprintf(out, LABEL "missing (general.architecture)\n", "architecture");
        return;
    }
    fprintf(out, LABEL "%.*s\n", "architecture", (int)(arch.len > 40 ? 40 : arch.len), arch.ptr);
    static const struct { const char *key, *after; } SHAPE[] = {
        {"qwen3.block_count", " layers, hidden "},         {"qwen3.embedding_length", ", ffn "},
        {"qwen3.feed_forward_length", ", "},               {"qwen3.attention.head_count", " query heads and "},
        {"qwen3.attention.head_count_kv", " key/value heads of "}, {"qwen3.attention.key_length", ", context "},
        {"qwen3.context_length", ""},
    };
    fprintf(out, LABEL, "shape");
    for (size_t i = 0; i < sizeof SHAPE / sizeof SHAPE[0]; i++) {
        print_u32(out, g, SHAPE[i].key);
        fputs(SHAPE[i].after, out);
    }
    const GgufTensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (emb) fprintf(out, ", vocab %llu rows", (unsigned long long)emb->ne[1]);
    fprintf(out, "\n");
    const GgufKv *base = gguf_find(g, "qwen3.rope.freq_base"), *eps = gguf_find(g, "qwen3.attention.layer_norm_rms_epsilon");
    Buf b = {0};
    if (base) value_text(base, &b);
    else buf_puts(&b, "missing");
    buf_puts(&b, ", norm epsilon ");
    if (eps) value_text(eps, &b);
    else buf_puts(&b, "missing");
    fprintf(out, LABEL "base %s\n", "rope", b.data);
    buf_free(&b);
    fprintf(out, LABEL "%s\n", "output", gguf_find_tensor(g, "output.weight") ? "output.weight (its own matrix)"
                                                                              : "tied to token_embd.weight (no output.weight)");
}

/* "id 'text'" for a token, its text cut at 40 bytes. */
static void token_text(const Tokenizer *t, int32_t id, Buf *b) {
    const char *s = tokenizer_token_text(t, id);
    buf_printf(b, "%d '%.40s'", id, s ? s : "");
}

/* Items joined by ", ", wrapped under the label. */
static void print_list(FILE *out, const char *label, const Buf *items, int n) {
    fprintf(out, LABEL, label);
    if (n == 0) fprintf(out, "none");
    size_t col = 0;
    for (const char *p = items->data, *end = p ? p + items->len : NULL; p && p < end;) {
        const char *next = memchr(p, '\n', (size_t)(end - p));
        size_t len = next ? (size_t)(next - p) : (size_t)(end - p);
        if (col && col + len > 80) {
            fprintf(out, ",\n" LABEL, "");
            col = 0;
        } else if (col) {
            fprintf(out, ", ");
        }
        fwrite(p, 1, len, out);
        col += len + 2;
        p += len + 1;
    }
    fprintf(out, "\n");
}

static void print_tokenizer(FILE *out, const GgufFile *g) {
    GgufStr model = {"?", 1}, pre = {"(absent)", 8};
    key_str(g, "tokenizer.ggml.model", &model);
    key_str(g, "tokenizer.ggml.pre", &pre);
    const GgufKv *tokens = gguf_find(g, "tokenizer.ggml.tokens"), *merges = gguf_find(g, "tokenizer.ggml.merges");
    fprintf(out, LABEL "%.*s, pre-tokenizer %.*s, %llu tokens, %llu merges\n", "tokenizer", (int)(model.len > 40 ? 40 : model.len),
            model.ptr, (int)(pre.len > 40 ? 40 : pre.len), pre.ptr, tokens ? (unsigned long long)tokens->arr_len : 0ull,
            merges ? (unsigned long long)merges->arr_len : 0ull);
    char err[ERR_MAX];
    Tokenizer *t = tokenizer_load(g, err);
    if (!t) {
        fprintf(out, LABEL "cannot be loaded: %s\n", "", err);
        return;
    }
    Buf b = {0};
    int n = 0;
    buf_puts(&b, "bos ");
    if (tokenizer_bos(t) >= 0) token_text(t, tokenizer_bos(t), &b);
    else buf_puts(&b, "none");
    buf_puts(&b, ", eos ");
    if (tokenizer_eos(t) >= 0) token_text(t, tokenizer_eos(t), &b);
    else buf_puts(&b, "none");
    const GgufKv *add_bos = gguf_find(g, "tokenizer.ggml.add_bos_token");
    buf_printf(&b, ", add_bos_token %s", add_bos ? (add_bos->v.u ? "true" : "false") : "absent");
    fprintf(out, LABEL "%s\n", "bos / eos", b.data);
    buf_free(&b);
    for (int32_t id = 0; id < tokenizer_vocab_size(t); id++) {
        int type = tokenizer_token_type(t, id);
        if (type != TOKEN_CONTROL && type != TOKEN_USER_DEFINED && type != TOKEN_UNKNOWN) continue;
        token_text(t, id, &b);
        buf_puts(&b, "\n");
        n++;
    }
    print_list(out, "special tokens", &b, n);
    buf_free(&b);
    n = 0;
    for (int32_t id = 0; id < tokenizer_vocab_size(t); id++) {
        if (!tokenizer_is_eog(t, id)) continue;
        token_text(t, id, &b);
        buf_puts(&b, "\n");
        n++;
    }
    print_list(out, "end of generation", &b, n);
    buf_free(&b);
    tokenizer_free(t);
    GgufStr tmpl;
    if (key_str(g, "tokenizer.chat_template", &tmpl))
        fprintf(out, LABEL "present (%llu bytes)\n", "chat template",
                (unsigned long long)tmpl.len);
}

/* llama.cpp's general.file_type names (LlamaFileType). */
static const char *file_type_name(uint32_t ft) {
    static const char *const NAMES[] = {
        [0] = "ALL_F32", [1] = "MOSTLY_F16", [2] = "MOSTLY_Q4_0", [3] = "MOSTLY_Q4_1", [7] = "MOSTLY_Q8_0",
        [8] = "MOSTLY_Q5_0", [9] = "MOSTLY_Q5_1", [10] = "MOSTLY_Q2_K", [11] = "MOSTLY_Q3_K_S", [12] = "MOSTLY_Q3_K_M",
        [13] = "MOSTLY_Q3_K_L", [14] = "MOSTLY_Q4_K_S", [15] = "MOSTLY_Q4_K_M", [16] = "MOSTLY_Q5_K_S",
        [17] = "MOSTLY_Q5_K_M", [18] = "MOSTLY_Q6_K", [19] = "MOSTLY_IQ2_XXS", [20] = "MOSTLY_IQ2_XS",
        [21] = "MOSTLY_Q2_K_S", [22] = "MOSTLY_IQ3_XS", [23] = "MOSTLY_IQ3_XXS", [24] = "MOSTLY_IQ1_S",
        [25] = "MOSTLY_IQ4_NL", [26] = "MOSTLY_IQ3_S", [27] = "MOSTLY_IQ3_M", [28] = "MOSTLY_IQ2_S",
        [29] = "MOSTLY_IQ2_M", [30] = "MOSTLY_IQ4_XS", [31] = "MOSTLY_IQ1_M", [32] = "MOSTLY_BF16",
        [36] = "MOSTLY_TQ1_0", [37] = "MOSTLY_TQ2_0", [38] = "MOSTLY_MXFP4_MOE",
    };
    if (ft == 1024) return "GUESSED";
    return ft < sizeof NAMES / sizeof NAMES[0] && NAMES[ft] ? NAMES[ft] : "unknown";
}

static void print_types(FILE *out, const GgufFile *g) {
    uint32_t ft;
    if (key_u32(g, "general.file_type", &ft))
        fprintf(out, LABEL "%u (%s): what the file says; the tensor types below are what runs\n", "file type", ft,
                file_type_name(ft));
    else
        fprintf(out, LABEL "not given\n", "file type");
    uint64_t count[64] = {0}, bytes[64] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        uint32_t t = g->tensors[i].type < 64 ? g->tensors[i].type : 63;
        count[t]++;
        bytes[t] += g->tensors[i].nbytes;
    }
    bool first = true;
    for (uint32_t t = 0; t < 64; t++) {
        if (!count[t]) continue;
        fprintf(out, LABEL "%-7s %4llu tensor%s %10.3f MB%s\n", first ? "tensor types" : "", dtype_name(t),
                (unsigned long long)count[t], count[t] == 1 ? " " : "s", bytes[t] / 1e6,
                dtype_supported(t) ? "" : "  (not supported here)");
        first = false;
    }
}

/* ---- keys the engine does not read ------------------------------------------------ */

/* Keys the engine reads (qwen3.c, tokenizer.c), or checks to be neutral (every
 * qwen3.rope.* key, see qwen3.c). */
static bool key_is_read(GgufStr k) {
    static const char *const READ[] = {
        "general.architecture", "general.alignment", "qwen3.block_count", "qwen3.context_length",
        "qwen3.embedding_length", "qwen3.feed_forward_length", "qwen3.attention.head_count",
        "qwen3.attention.head_count_kv", "qwen3.attention.key_length", "qwen3.attention.value_length",
        "qwen3.attention.layer_norm_rms_epsilon", "tokenizer.ggml.model", "tokenizer.ggml.pre",
        "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id",
    };
    for (size_t i = 0; i < sizeof READ / sizeof READ[0]; i++)
        if (gguf_str_eq(k, READ[i])) return true;
    return k.len >= 11 && memcmp(k.ptr, "qwen3.rope.", 11) == 0;
}

/* Keys that describe the file without changing what it computes: names,
 * licences, the chat template (the chat programs render ChatML themselves),
 * token ids a decoder-only model never uses, and add_*_token when false. */
static bool key_is_descriptive(const GgufKv *kv) {
    GgufStr k = kv->key;
    static const char *const DESCRIPTIVE[] = {
        "tokenizer.chat_template", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.separator_token_id", "tokenizer.ggml.cls_token_id",
        "tokenizer.ggml.mask_token_id", "qwen3.vocab_size",
    };
    for (size_t i = 0; i < sizeof DESCRIPTIVE / sizeof DESCRIPTIVE[0]; i++)
        if (gguf_str_eq(k, DESCRIPTIVE[i])) return true;
    bool is_add = k.len > 19 && memcmp(k.ptr, "tokenizer.ggml.add_", 19) == 0;
    if (is_add) return kv->type == GGUF_BOOL && kv->v.u == 0;
    /* only the architecture's own keys and the tokenizer's steer the computation */
    bool steers = (k.len > 6 && memcmp(k.ptr, "qwen3.", 6) == 0) || (k.len > 10 && memcmp(k.ptr, "tokenizer.", 10) == 0);
    return !steers;
}

static void print_ignored(FILE *out, const GgufFile *g) {
    Buf b = {0};
    int n = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const GgufKv *kv = &g->kv[i];
        if (key_is_read(kv->key) || key_is_descriptive(kv)) continue;
        buf_printf(&b, "%.*s = ", (int)(kv->key.len > 80 ? 80 : kv->key.len), kv->key.ptr);
        value_text(kv, &b);
        buf_puts(&b, "\n");
        n++;
    }
    if (n == 0) {
        fprintf(out, LABEL "none that could change the result\n", "ignored keys");
    } else {
        fprintf(out, LABEL "%d not read by this engine, and they could change the result:\n", "ignored keys", n);
        for (const char *p = b.data; p && *p;) {
            const char *nl = strchr(p, '\n');
            fprintf(out, LABEL "%.*s\n", "", (int)(nl - p), p);
            p = nl + 1;
        }
    }
    buf_free(&b);
}

int model_info_print(const char *path, FILE *out, char *err) {
    GgufFile g;
    if (gguf_open(&g, path, err) != 0) return -1;
    print_file(out, &g, path);
    print_shape(out, &g);
    print_tokenizer(out, &g);
    print_types(out, &g);
    print_ignored(out, &g);
    gguf_close(&g);
    Qwen3Model m;
    char why[ERR_MAX];
    if (qwen3_load(&m, path, why) != 0) {
        fprintf(out, LABEL "no: %s\n", "runs here", why);
        err_set(err, "%s", why);
        return 1;
    }
    fprintf(out, LABEL "yes (%.1f MB of weights read per token)\n", "runs here", m.weight_bytes / 1e6);
    if (m.region) {
        int tiled = 0;
        for (int i = 0; i < 7 * m.cfg.n_layers + 1; i++) tiled += qwen3_matrix(&m, i)->tiles != NULL;
        fprintf(out, LABEL "%.1f MB: the matrices, copied at load, asked for on 2 MB pages\n", "in memory", m.region_bytes / 1e6);
        if (tiled)
            fprintf(out, LABEL "%d of them (Q8_0, Q4_0, Q4_1) as 16-row tiles for this machine's decode kernel (tiles.h)\n",
                    "", tiled);
    }
    qwen3_free(&m);
    return 0;
}
