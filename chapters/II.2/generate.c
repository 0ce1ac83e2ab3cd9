/* generate.c: two generation loops. Without a cache each step recomputes the
 * whole sequence (II.1); with one, the prompt is read once (prefill) and each
 * further step runs the model on the newest token only (decode). Both keep
 * the most likely token, and both produce the same logits bit for bit. */
#include "generate.h"

#include <stdio.h>
#include <stdlib.h>

#include "forward.h"
#include "ops.h"
#include "util.h"

/* EXERCISE generate-loop "The greedy generation loop" 2 points; tests: II2_generate_with_cache_matches */
static void generate_full_recompute(Session *s) {
    const Qwen3Model *m = &s->model;
    float *logits = xmalloc(sizeof(float) * (size_t)m->cfg.vocab_size);
    bool done = s->opt.max_new_tokens == 0;
    if (done) s->stop_reason = "max_new_tokens reached";
    for (int step = 0; !done; step++) {
        double t0 = time_now_ms();
        forward(m, s->be, s->tokens, s->n_tokens, logits);
        double ms = time_now_ms() - t0;
        float prob;
        int32_t next = argmax(logits, m->cfg.vocab_size, &prob);
        Phase phase = step == 0 ? PHASE_PREFILL : PHASE_DECODE;
        done = session_push(s, next, prob, phase, s->n_tokens, ms, logits);
    }
    free(logits);
}

/* EXERCISE generate-kv-loop "Prefill once, then decode token by token" 3 points; tests: II2_generate */
static void generate_with_kv_cache(Session *s) {
    const Qwen3Model *m = &s->model;
    char err[ERR_MAX];
    KvCache *kv = kv_cache_create(s->opt.kv, &m->cfg, err);
    if (!kv) {
        fprintf(stderr, "model-generate: %s\n", err);
        s->stop_reason = "error";
        return;
    }
    float *logits = xmalloc(sizeof(float) * (size_t)m->cfg.vocab_size);
    bool done = s->opt.max_new_tokens == 0;
    if (done) s->stop_reason = "max_new_tokens reached";
    for (int step = 0; !done; step++) {
        double t0 = time_now_ms();
        int rows = step == 0 ? s->n_tokens : 1;
        if (step == 0) {
            forward_prefill_with_kv_cache(m, s->be, kv, s->tokens, s->n_tokens, logits);
        } else {
            int pos = s->n_tokens - 1; /* the newest token: not in the cache yet */
            if (forward_decode_with_kv_cache(m, s->be, kv, s->tokens[pos], pos, logits, err) != 0) {
                fprintf(stderr, "model-generate: %s\n", err);
                s->stop_reason = "error";
                break;
            }
        }
        double ms = time_now_ms() - t0;
        float prob;
        int32_t next = argmax(logits, m->cfg.vocab_size, &prob);
        Phase phase = step == 0 ? PHASE_PREFILL : PHASE_DECODE;
        done = session_push(s, next, prob, phase, rows, ms, logits);
    }
    free(logits);
    kv_cache_free(kv);
}

void generate(Session *s) {
    if (s->opt.kv) generate_with_kv_cache(s);
    else generate_full_recompute(s);
}
