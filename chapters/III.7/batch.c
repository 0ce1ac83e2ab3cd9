/* batch.c: see batch.h. The sequences are checked, the forward pass runs the
 * batch (forward_decode_batch), and its logits are split back. */
#include "batch.h"

#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "util.h"

/* What seq_extend checks for one token, for each sequence, and what a batch
 * needs besides: one model and backend, each sequence once. */
static int check_batch(Sequence *const *seqs, const int32_t *toks, int B, char *err) {
    if (B < 1) {
        err_set(err, "a batch of %d sequences: it needs at least 1", B);
        return -1;
    }
    for (int i = 0; i < B; i++) {
        const Sequence *s = seqs[i];
        if (!s || !s->kv) {
            err_set(err, "sequence %d of %d is not open", i, B);
            return -1;
        }
        if (s->model != seqs[0]->model || s->be != seqs[0]->be) {
            err_set(err, "sequence %d of %d runs on another model or backend than sequence 0", i, B);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (seqs[j] == s || seqs[j]->kv == s->kv) {
                err_set(err, "sequence %d of %d is sequence %d again: a step runs each sequence once", i, B, j);
                return -1;
            }
        if (s->n_tokens >= s->cap) {
            err_set(err, "sequence %d of %d is full: it holds %d of at most %d tokens", i, B, s->n_tokens, s->cap);
            return -1;
        }
        int vocab = s->model->cfg.vocab_size;
        if (toks[i] < 0 || toks[i] >= vocab) {
            err_set(err, "sequence %d of %d: token id %d is outside the vocabulary (0..%d)", i, B, toks[i], vocab - 1);
            return -1;
        }
    }
    return 0;
}

/* Splits the step back to the sequences: row i of logits [B, vocab] becomes
 * sequence i's prediction, and its token joins its tokens. */
/* EXERCISE split-logits "Split the batch's logits back to the sequences" 2 points; tests: III7_batch_matches */
static void split_logits(Sequence *const *seqs, const int32_t *toks, int B, const float *logits) {
    size_t vocab = (size_t)seqs[0]->model->cfg.vocab_size;
    for (int i = 0; i < B; i++) {
        Sequence *s = seqs[i];
        memcpy(s->logits, logits + (size_t)i * vocab, sizeof(float) * vocab);
        s->tokens[s->n_tokens++] = toks[i];
    }
}

int seq_decode_batch(Sequence *const *seqs, const int32_t *toks, int B, char *err) {
    if (check_batch(seqs, toks, B, err) != 0) return -1;
    if (B == 1) { /* one sequence: its own path */
        char why[ERR_MAX];
        if (seq_extend(seqs[0], toks, 1, why) == 0) return 0;
        err_set(err, "sequence 0 of 1: %s", why);
        return -1;
    }
    const Qwen3Model *m = seqs[0]->model;
    KvCache **kvs = xmalloc(sizeof(KvCache *) * (size_t)B);                        /* [B] */
    float *logits = xmalloc(sizeof(float) * (size_t)B * (size_t)m->cfg.vocab_size); /* [B, vocab] */
    for (int i = 0; i < B; i++) kvs[i] = seqs[i]->kv;
    int rc = forward_decode_batch(m, seqs[0]->be, kvs, toks, B, logits, err);
    if (rc == 0) split_logits(seqs, toks, B, logits);
    free(logits);
    free(kvs);
    return rc;
}
