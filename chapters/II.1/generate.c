/* generate.c: the simplest generation loop. Each step runs the forward pass
 * over every token so far, prompt included, and keeps the most likely next
 * token. */
#include "generate.h"

#include <stdlib.h>

#include "forward.h"
#include "ops.h"
#include "util.h"

/* EXERCISE generate-loop "The greedy generation loop" 2 points; tests: II1_generate */
void generate(Session *s) {
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
