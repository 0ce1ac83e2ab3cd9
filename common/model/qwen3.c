/* qwen3.c: see qwen3.h. */
#include "qwen3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int get_int(const GgufFile *g, const char *key, int *out, char *err) {
    uint32_t v;
    if (gguf_get_u32(g, key, &v, err) != 0) return -1;
    if (v == 0 || v > (1u << 30)) {
        err_set(err, "key '%s' = %u is out of range", key, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A number-valued key that may only hold a neutral value (absent is fine). */
static int check_neutral(const GgufFile *g, const char *key, float a, float b, char *err) {
    const GgufKv *kv = gguf_find(g, key);
    float v;
    if (!kv) return 0;
    if (gguf_get_f32(g, key, &v, err) != 0) return -1;
    if (v != a && v != b) {
        err_set(err, "key '%s' = %g: RoPE scaling is not implemented by this engine (it runs plain RoPE)", key, v);
        return -1;
    }
    return 0;
}

/* This engine runs plain RoPE over the whole head. Keys asking for anything
 * else (YaRN or linear scaling, a partial rotation, unknown variants) would
 * change every logit, so they are errors naming the key, never ignored. Keys
 * that only describe the model (original_context_length, finetuned) and
 * neutral values (scaling.type "none", factor 1) pass. */
static int check_rope(const GgufFile *g, const Qwen3Config *c, char *err) {
    GgufStr type;
    if (gguf_find(g, "qwen3.rope.scaling.type")) {
        if (gguf_get_str(g, "qwen3.rope.scaling.type", &type, err) != 0) return -1;
        if (!gguf_str_eq(type, "none") && !gguf_str_eq(type, "linear")) {
            err_set(err, "key 'qwen3.rope.scaling.type' = '%.*s': RoPE scaling is not implemented by this engine "
                         "(it runs plain RoPE)", (int)(type.len > 40 ? 40 : type.len), type.ptr);
            return -1;
        }
    }
    /* a factor of 0 means "not set" to llama.cpp, and linear scaling by 1 is no scaling */
    if (check_neutral(g, "qwen3.rope.scaling.factor", 0.0f, 1.0f, err) ||
        check_neutral(g, "qwen3.rope.scale_linear", 0.0f, 1.0f, err) ||
        check_neutral(g, "qwen3.rope.scaling.attn_factor", 1.0f, 1.0f, err))
        return -1;
    if (gguf_find(g, "qwen3.rope.dimension_count")) {
        int rot;
        if (get_int(g, "qwen3.rope.dimension_count", &rot, err)) return -1;
        if (rot != c->head_dim) {
            err_set(err, "key 'qwen3.rope.dimension_count' = %d: this engine rotates the whole head (%d dimensions)",
                    rot, c->head_dim);
            return -1;
        }
    }
    static const char *const KNOWN[] = {
        "qwen3.rope.freq_base", "qwen3.rope.dimension_count", "qwen3.rope.scaling.type",
        "qwen3.rope.scaling.factor", "qwen3.rope.scale_linear", "qwen3.rope.scaling.attn_factor",
        "qwen3.rope.scaling.original_context_length", "qwen3.rope.scaling.finetuned",
    };
    for (uint64_t i = 0; i < g->n_kv; i++) {
        GgufStr k = g->kv[i].key;
        if (k.len < 11 || memcmp(k.ptr, "qwen3.rope.", 11) != 0) continue;
        bool known = false;
        for (size_t j = 0; j < sizeof KNOWN / sizeof KNOWN[0]; j++) known |= gguf_str_eq(k, KNOWN[j]);
        if (!known) {
            err_set(err, "key '%.*s': this RoPE variant is not implemented by this engine (it runs plain RoPE)",
                    (int)(k.len > 80 ? 80 : k.len), k.ptr);
            return -1;
        }
    }
    return 0;
}

static int load_config(const GgufFile *g, Qwen3Config *c, char *err) {
    GgufStr arch;
    if (gguf_get_str(g, "general.architecture", &arch, err) != 0) return -1;
    if (!gguf_str_eq(arch, "qwen3")) {
        err_set(err, "architecture is '%.*s', this engine runs 'qwen3'", (int)(arch.len > 40 ? 40 : arch.len),
                arch.ptr);
        return -1;
    }
    if (get_int(g, "qwen3.block_count", &c->n_layers, err) ||
        get_int(g, "qwen3.embedding_length", &c->dim, err) ||
        get_int(g, "qwen3.feed_forward_length", &c->ffn_dim, err) ||
        get_int(g, "qwen3.attention.head_count", &c->n_heads, err) ||
        get_int(g, "qwen3.attention.key_length", &c->head_dim, err) ||
        get_int(g, "qwen3.context_length", &c->ctx_len, err))
        return -1;
    c->n_kv_heads = c->n_heads; /* the default when the key is absent */
    if (gguf_find(g, "qwen3.attention.head_count_kv") &&
        get_int(g, "qwen3.attention.head_count_kv", &c->n_kv_heads, err))
        return -1;
    /* llama.cpp would take 10000 for a missing base; Qwen3 was trained with
     * 1000000. A file without the key is broken, and guessing would hide it. */
    if (!gguf_find(g, "qwen3.rope.freq_base")) {
        err_set(err, "missing metadata key 'qwen3.rope.freq_base' (RoPE's base frequency: Qwen3 uses 1000000; "
                     "this engine does not guess it)");
        return -1;
    }
    if (gguf_get_f32(g, "qwen3.rope.freq_base", &c->rope_theta, err)) return -1;
    if (gguf_get_f32(g, "qwen3.attention.layer_norm_rms_epsilon", &c->norm_eps, err)) return -1;
    if (c->n_heads % c->n_kv_heads != 0) {
        err_set(err, "head_count %d is not a multiple of head_count_kv %d", c->n_heads, c->n_kv_heads);
        return -1;
    }
    if (c->head_dim % 2 != 0 || c->head_dim > 1024) {
        err_set(err, "key_length (head_dim) %d must be even and at most 1024", c->head_dim);
        return -1;
    }
    if (gguf_find(g, "qwen3.attention.value_length")) {
        int vl;
        if (get_int(g, "qwen3.attention.value_length", &vl, err)) return -1;
        if (vl != c->head_dim) {
            err_set(err, "value_length %d differs from key_length %d", vl, c->head_dim);
            return -1;
        }
    }
    if (check_rope(g, c, err) != 0) return -1;
    if (!(c->rope_theta > 0.0f) || !(c->norm_eps > 0.0f)) {
        err_set(err, "rope.freq_base and layer_norm_rms_epsilon must be positive");
        return -1;
    }
    /* Limits far beyond any real model, checked in 64 bits so that no product
     * below can wrap around and slip past the tensor shape checks. */
    int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    if (c->dim > (1 << 20) || c->ffn_dim > (1 << 22) || q_dim > (1 << 20) || kv_dim > (1 << 20) ||
        c->n_layers > 4096) {
        err_set(err, "implausible shape: %d layers, dim %d, ffn %d, %d x %d query and %d key/value head dims",
                c->n_layers, c->dim, c->ffn_dim, c->n_heads, c->head_dim, c->n_kv_heads);
        return -1;
    }
    if (c->ctx_len > (1 << 24)) c->ctx_len = 1 << 24; /* 16M positions: more than any cache would hold */
    c->q_dim = (int)q_dim;
    c->kv_dim = (int)kv_dim;
    return 0;
}

/* Finds a 2-D (or 1-D when rows == 0) tensor and checks its shape. */
static int get_tensor(const GgufFile *g, const char *name, int64_t cols, int64_t rows, Tensor *t,
                      char *err) {
    const GgufTensor *gt = gguf_find_tensor(g, name);
    if (!gt) {
        err_set(err, "missing tensor '%s'", name);
        return -1;
    }
    uint64_t want_rows = rows ? (uint64_t)rows : 1;
    if (gt->ne[0] != (uint64_t)cols || gt->ne[1] != want_rows || gt->ne[2] != 1 || gt->ne[3] != 1) {
        err_set(err, "tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%lld, %lld]", name,
                (unsigned long long)gt->ne[0], (unsigned long long)gt->ne[1],
                (unsigned long long)gt->ne[2], (unsigned long long)gt->ne[3], (long long)cols,
                (long long)want_rows);
        return -1;
    }
    if (!dtype_supported(gt->type)) {
        err_set(err, "tensor '%s': type %s is not supported (supported types: %s)", name, dtype_name(gt->type),
                dtype_supported_names());
        return -1;
    }
    t->name = gt->name;
    t->type = (DType)gt->type;
    t->ne[0] = (int64_t)gt->ne[0];
    t->ne[1] = (int64_t)want_rows;
    t->ne[2] = t->ne[3] = 1;
    t->row_bytes = dtype_row_bytes(gt->type, t->ne[0]);
    t->data = gt->data;
    return 0;
}

/* A 1-D norm weight, dequantized to float (it is tiny, and usually F32). */
static float *get_vector(const GgufFile *g, const char *name, int n, char *err) {
    Tensor t;
    if (get_tensor(g, name, n, 0, &t, err) != 0) return NULL;
    float *v = xmalloc(sizeof(float) * (size_t)n);
    dequant_row(t.type, t.data, v, n);
    return v;
}

static int load_layer(const GgufFile *g, const Qwen3Config *c, int l, Qwen3Layer *L, char *err) {
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
    if (!(L->attn_norm = get_vector(g, NAME("attn_norm.weight"), c->dim, err))) return -1;
    if (!(L->q_norm = get_vector(g, NAME("attn_q_norm.weight"), c->head_dim, err))) return -1;
    if (!(L->k_norm = get_vector(g, NAME("attn_k_norm.weight"), c->head_dim, err))) return -1;
    if (!(L->ffn_norm = get_vector(g, NAME("ffn_norm.weight"), c->dim, err))) return -1;
    if (get_tensor(g, NAME("attn_q.weight"), c->dim, c->q_dim, &L->wq, err) ||
        get_tensor(g, NAME("attn_k.weight"), c->dim, c->kv_dim, &L->wk, err) ||
        get_tensor(g, NAME("attn_v.weight"), c->dim, c->kv_dim, &L->wv, err) ||
        get_tensor(g, NAME("attn_output.weight"), c->q_dim, c->dim, &L->wo, err) ||
        get_tensor(g, NAME("ffn_gate.weight"), c->dim, c->ffn_dim, &L->w_gate, err) ||
        get_tensor(g, NAME("ffn_up.weight"), c->dim, c->ffn_dim, &L->w_up, err) ||
        get_tensor(g, NAME("ffn_down.weight"), c->ffn_dim, c->dim, &L->w_down, err))
        return -1;
#undef NAME
    return 0;
}

Tensor *qwen3_matrix(Qwen3Model *m, int i) {
    if (i == 7 * m->cfg.n_layers) return &m->output;
    Qwen3Layer *L = &m->layers[i / 7];
    Tensor *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return ws[i % 7];
}

static size_t count_weight_bytes(Qwen3Model *m) {
    size_t n = (size_t)m->cfg.dim * 4; /* one embedding row is read too */
    for (int i = 0; i < 7 * m->cfg.n_layers + 1; i++) n += tensor_bytes(qwen3_matrix(m, i));
    return n;
}

int qwen3_from_gguf(Qwen3Model *m, GgufFile *file, char *err) {
    memset(m, 0, sizeof *m);
    m->file = *file;
    Qwen3Config *c = &m->cfg;
    const GgufFile *g = &m->file;
    if (load_config(g, c, err) != 0) goto fail;
    const GgufTensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb) {
        err_set(err, "missing tensor 'token_embd.weight'");
        goto fail;
    }
    if (emb->ne[1] == 0 || emb->ne[1] > (1u << 24)) {
        err_set(err, "tensor 'token_embd.weight' has %llu rows: not a vocabulary size",
                (unsigned long long)emb->ne[1]);
        goto fail;
    }
    c->vocab_size = (int)emb->ne[1];
    if (get_tensor(g, "token_embd.weight", c->dim, c->vocab_size, &m->tok_embd, err)) goto fail;
    if (!(m->output_norm = get_vector(g, "output_norm.weight", c->dim, err))) goto fail;
    m->tied = gguf_find_tensor(g, "output.weight") == NULL;
    if (m->tied) m->output = m->tok_embd;
    else if (get_tensor(g, "output.weight", c->dim, c->vocab_size, &m->output, err)) goto fail;
    if ((uint64_t)c->n_layers * 11 > g->n_tensors) { /* each layer has 11 tensors */
        err_set(err, "block_count %d needs %d tensors, the file has %llu", c->n_layers, c->n_layers * 11,
                (unsigned long long)g->n_tensors);
        goto fail;
    }
    m->layers = xcalloc((size_t)c->n_layers, sizeof *m->layers);
    for (int l = 0; l < c->n_layers; l++)
        if (load_layer(g, c, l, &m->layers[l], err) != 0) goto fail;
    m->weight_bytes = count_weight_bytes(m);
    return 0;
fail:
    memset(file, 0, sizeof *file); /* ownership moved to m; freed below */
    qwen3_free(m);
    return -1;
}

void qwen3_free(Qwen3Model *m) {
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            Qwen3Layer *L = &m->layers[l];
            free(L->attn_norm);
            free(L->q_norm);
            free(L->k_norm);
            free(L->ffn_norm);
        }
        free(m->layers);
    }
    free(m->output_norm);
    free(m->region);
    gguf_close(&m->file);
    memset(m, 0, sizeof *m);
}
