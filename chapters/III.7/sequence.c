/* sequence.c: see sequence.h. */
#include "sequence.h"

#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "util.h"

int seq_init(Sequence *s, const Qwen3Model *m, Backend *be, KvCache *kv, int cap, char *err) {
    memset(s, 0, sizeof *s);
    if (!kv) {
        err_set(err, "a sequence needs a KV cache");
        return -1;
    }
    if (cap < 1 || cap > m->cfg.ctx_len) {
        err_set(err, "a sequence of %d tokens does not fit the model's context of %d", cap, m->cfg.ctx_len);
        kv_cache_free(kv);
        return -1;
    }
    *s = (Sequence){.model = m, .be = be, .kv = kv, .cap = cap};
    s->tokens = xmalloc(sizeof(int32_t) * (size_t)cap);
    s->logits = xcalloc((size_t)m->cfg.vocab_size, sizeof(float));
    return 0;
}

int seq_init_cached(Sequence *s, const Qwen3Model *m, Backend *be, KvCache *kv, const int32_t *tokens, int n, int cap,
                    char *err) {
    if (seq_init(s, m, be, kv, cap, err) != 0) return -1;
    if (n < 0 || n > cap || n != kv->seq_len(kv)) {
        err_set(err, "a cache holding %d positions cannot start a sequence of %d tokens (at most %d)", kv->seq_len(kv), n,
                cap);
        seq_free(s);
        return -1;
    }
    memcpy(s->tokens, tokens, sizeof(int32_t) * (size_t)n);
    s->n_tokens = n;
    return 0;
}

int seq_extend(Sequence *s, const int32_t *toks, int n, char *err) {
    if (n < 1) {
        err_set(err, "nothing to run: %d tokens", n);
        return -1;
    }
    if (n > s->cap - s->n_tokens) {
        err_set(err, "%d more tokens do not fit: the sequence holds %d of at most %d", n, s->n_tokens, s->cap);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= s->model->cfg.vocab_size) {
            err_set(err, "token id %d is outside the vocabulary (0..%d)", toks[i], s->model->cfg.vocab_size - 1);
            return -1;
        }
    if (forward_extend(s->model, s->be, s->kv, toks, n, s->logits, err) != 0) return -1;
    memcpy(s->tokens + s->n_tokens, toks, sizeof(int32_t) * (size_t)n);
    s->n_tokens += n;
    return 0;
}

void seq_truncate(Sequence *s, int n) {
    if (n < 0) n = 0;
    if (n >= s->n_tokens) return;
    s->kv->truncate(s->kv, n);
    s->n_tokens = n;
}

int seq_fork(Sequence *dst, const Sequence *src, int n, char *err) {
    if (n < 0 || n > src->n_tokens) {
        err_set(err, "cannot fork %d tokens of a sequence of %d", n, src->n_tokens);
        return -1;
    }
    KvCache *kv = kv_paged_fork(src->kv, n, err);
    if (!kv || seq_init(dst, src->model, src->be, kv, src->cap, err) != 0) return -1;
    memcpy(dst->tokens, src->tokens, sizeof(int32_t) * (size_t)n);
    dst->n_tokens = n;
    if (n == src->n_tokens) memcpy(dst->logits, src->logits, sizeof(float) * (size_t)src->model->cfg.vocab_size);
    return 0;
}

void seq_free(Sequence *s) {
    kv_cache_free(s->kv);
    free(s->tokens);
    free(s->logits);
    memset(s, 0, sizeof *s);
}
