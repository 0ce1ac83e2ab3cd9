/* fuzz_gguf.c: any bytes as a GGUF file. The reader must refuse what is wrong
 * with an error and accept the rest; every key of an accepted file is read
 * through every typed getter; then its vocabulary is loaded and used (text
 * encoded and every token decoded), a Qwen3 model is loaded from it, and every row of every weight is dequantized, so a size or offset
 * the checks let through would be read out of bounds here. */
#include <string.h>

#include "backend.h"
#include "dtype.h"
#include "fuzz.h"
#include "qwen3.h"
#include "tokenizer.h"

static void read_every_key(const GgufFile *g) {
    char err[ERR_MAX], key[256];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const GgufKv *kv = &g->kv[i];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 255 ? kv->key.len : 255), kv->key.ptr);
        uint32_t u;
        float f;
        bool b;
        GgufStr s;
        const GgufKv *arr;
        GgufStr *strs = NULL;
        uint64_t n;
        FUZZ_ASSERT(gguf_find(g, key) != NULL || strlen(key) != kv->key.len);
        (void)gguf_get_u32(g, key, &u, err);
        (void)gguf_get_f32(g, key, &f, err);
        (void)gguf_get_bool(g, key, &b, err);
        if (!gguf_get_str(g, key, &s, err)) FUZZ_ASSERT(s.ptr >= (const char *)g->map && s.ptr + s.len <= (const char *)g->map + g->size);
        (void)gguf_get_arr(g, key, GGUF_INT32, &arr, err);
        if (!gguf_get_str_arr(g, key, &strs, &n, err)) {
            for (uint64_t k = 0; k < n; k++)
                FUZZ_ASSERT(strs[k].ptr >= (const char *)g->map && strs[k].ptr + strs[k].len <= (const char *)g->map + g->size);
            free(strs);
        }
    }
}

/* A vocabulary from a hostile file must still encode and decode safely. */
static void use_vocabulary(const Tokenizer *t) {
    static const char text[] = "Once upon a time <|im_start|>user\n\xe4\xb8\x96\xe7\x95\x8c 123 <think>\n\n\xff!";
    char err[ERR_MAX];
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        int n = 0;
        FUZZ_ASSERT(tokenizer_encode(t, text, sizeof text - 1, special, &ids, &n, err) == 0);
        for (int i = 0; i < n; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < tokenizer_vocab_size(t));
        size_t len;
        free(tokenizer_decode(t, ids, n, true, &len));
        free(ids);
    }
    int cap = tokenizer_max_token_bytes(t);
    char *piece = malloc((size_t)cap + 1);
    for (int32_t id = -1; id <= tokenizer_vocab_size(t); id++) {
        FUZZ_ASSERT(tokenizer_token_bytes(t, id, true, piece, cap) <= cap);
        (void)tokenizer_is_eog(t, id);
    }
    free(piece);
}

static void dequant_tensor(const Tensor *t, float *row) {
    if (!t->data) return;
    for (int64_t r = 0; r < t->ne[1]; r++) dequant_row(t->type, tensor_row(t, r), row, t->ne[0]);
}

static void read_every_weight(const Qwen3Model *m) {
    const Qwen3Config *c = &m->cfg;
    int64_t widest = c->dim;
    if (c->ffn_dim > widest) widest = c->ffn_dim;
    if (c->q_dim > widest) widest = c->q_dim;
    float *row = malloc((size_t)widest * sizeof *row);
    dequant_tensor(&m->tok_embd, row);
    dequant_tensor(&m->output, row);
    for (int l = 0; l < c->n_layers; l++) {
        const Qwen3Layer *L = &m->layers[l];
        const Tensor *ts[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
            FUZZ_ASSERT(ts[k]->ne[0] <= widest);
            dequant_tensor(ts[k], row);
        }
        volatile float sink = L->attn_norm[c->dim - 1] + L->ffn_norm[c->dim - 1] +
                              L->q_norm[c->head_dim - 1] + L->k_norm[c->head_dim - 1];
        (void)sink;
    }
    volatile float sink = m->output_norm[c->dim - 1];
    (void)sink;
    free(row);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GgufFile g;
    char err[ERR_MAX];
    if (gguf_parse(&g, data, size, err)) {
        FUZZ_ASSERT(err[0] != '\0');
        return 0;
    }
    read_every_key(&g);
    Tokenizer *tok = tokenizer_load(&g, err);
    if (tok) use_vocabulary(tok);
    tokenizer_free(tok);
    Qwen3Model m;
    if (qwen3_from_gguf(&m, &g, err) == 0) {
        qwen3_place_matrices(&m);
        read_every_weight(&m);
        qwen3_free(&m);
    } else {
        FUZZ_ASSERT(err[0] != '\0');
        gguf_close(&g);
    }
    return 0;
}
