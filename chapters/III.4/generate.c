/* generate.c: two generation loops. Without a cache (--kv none) each step
 * recomputes the whole sequence (II.1); with one, a Sequence is extended by
 * the prompt (the prefill) and then by each new token (a decode step), its
 * keys and values kept in blocks of a pool (paged, the default) or in one
 * array per layer (basic). Both keep the most likely token, and both produce
 * the same logits bit for bit. */
#include "generate.h"

#include <stdio.h>
#include <stdlib.h>

#include "forward.h"
#include "ops.h"
#include "sequence.h"
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

/* The cache flags of the command line (model-generate.c passes a KvFlags),
 * with the kind --kv chose. */
static KvFlags session_kv_flags(const Session *s) {
    KvFlags f = {0};
    if (s->opt.extra) f = *(const KvFlags *)s->opt.extra->flags;
    f.kind = s->opt.kv;
    return f;
}

/* The pool (paged only) and a sequence on a new cache; false with the reason printed. */
static bool open_sequence(Session *s, const KvFlags *f, KvPool **pool, Sequence *seq) {
    char err[ERR_MAX];
    *pool = kv_flags_make_pool(f, &s->model.cfg, s->ctx, err);
    KvCache *kv = err[0] ? NULL : kv_cache_create(f->kind, &s->model.cfg, *pool, err);
    if (!kv || seq_init(seq, &s->model, s->be, kv, s->ctx, err) != 0) {
        fprintf(stderr, "model-generate: %s\n", err);
        kv_pool_free(*pool);
        return false;
    }
    if (*pool && !s->opt.quiet) {
        kv_pool_report(*pool, stderr);
        long tokens = (long)(*pool)->n_blocks * (*pool)->block_size;
        if (tokens < s->ctx)
            fprintf(stderr, "kv pool: %ld tokens, less than the context of %d (--kv-mem or --kv-blocks for more)\n",
                    tokens, s->ctx);
    }
    return true;
}

/* --fork-at: a fork of the sequence holds its blocks by reference (each
 * shared one traced xN); one step on the fork writes into the last block,
 * which it shares, so the fork gets a copy of it first (copy-on-write). The
 * fork then gives its blocks back; the sequence goes on as if it never was. */
static void trace_fork(const Sequence *seq, const KvPool *pool, Buf *b) {
    char err[ERR_MAX];
    Sequence fork;
    if (seq_fork(&fork, seq, seq->n_tokens, err) != 0) {
        buf_printf(b, "kv fork: %s\n", err);
        return;
    }
    buf_printf(b, "kv fork of its %d tokens: ", seq->n_tokens);
    kv_pool_trace(pool, kv_paged_table(fork.kv), b);
    float prob;
    int32_t next = argmax(fork.logits, seq->model->cfg.vocab_size, &prob);
    if (seq_extend(&fork, &next, 1, err) == 0) {
        buf_printf(b, "kv fork after one step of its own: ");
        kv_pool_trace(pool, kv_paged_table(fork.kv), b);
    } else {
        buf_printf(b, "kv fork: %s\n", err);
    }
    seq_free(&fork);
}

/* --kv-trace: the sequence's block table and the pool's occupancy after a
 * step, on a line of its own between the streamed tokens. */
static void trace_step(const Session *s, const Sequence *seq, const KvPool *pool, int step) {
    Buf b = {0};
    buf_printf(&b, "%skv step %d: ", s->opt.quiet ? "" : "\n", step);
    const KvBlockTable *t = kv_paged_table(seq->kv);
    if (t) kv_pool_trace(pool, t, &b);
    else buf_printf(&b, "%d tokens in one array per layer (basic)\n", seq->kv->seq_len(seq->kv));
    if (step == session_kv_flags(s).fork_at) trace_fork(seq, pool, &b);
    fflush(stdout); /* the text so far comes first */
    fputs(b.data, stderr);
    buf_free(&b);
}

/* EXERCISE generate-kv-loop "Extend by the prompt once, then token by token" 3 points; tests: III4_generate */
static void generate_with_kv_cache(Session *s) {
    KvFlags f = session_kv_flags(s);
    KvPool *pool;
    Sequence seq;
    if (!open_sequence(s, &f, &pool, &seq)) {
        s->stop_reason = "error";
        return;
    }
    char err[ERR_MAX];
    bool done = s->opt.max_new_tokens == 0;
    if (done) s->stop_reason = "max_new_tokens reached";
    for (int step = 0; !done; step++) {
        double t0 = time_now_ms();
        int rows = step == 0 ? s->n_tokens : 1; /* the prompt, then the newest token */
        if (seq_extend(&seq, s->tokens + s->n_tokens - rows, rows, err) != 0) {
            fprintf(stderr, "model-generate: %s\n", err);
            s->stop_reason = "error";
            break;
        }
        double ms = time_now_ms() - t0;
        if (f.trace) trace_step(s, &seq, pool, step);
        float prob;
        int32_t next = argmax(seq.logits, s->model.cfg.vocab_size, &prob);
        Phase phase = step == 0 ? PHASE_PREFILL : PHASE_DECODE;
        done = session_push(s, next, prob, phase, rows, ms, seq.logits);
    }
    seq_free(&seq);
    kv_pool_free(pool);
}

void generate(Session *s) {
    if (s->opt.kv) generate_with_kv_cache(s);
    else generate_full_recompute(s);
    if (!s->opt.kv && session_kv_flags(s).trace)
        fprintf(stderr, "model-generate: --kv-trace: no cache to show with --kv none\n");
}
