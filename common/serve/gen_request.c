/* gen_request.c: a generation request between a connection thread and the
 * engine (server.h). The engine's calls turn tokens into the client's text
 * at once (detokenize, complete UTF-8 characters, stop strings, limits) and
 * queue it as pieces; the client's side takes the pieces at its own pace.
 * Only the queue, the times and the ending are shared, under the request's
 * lock; the detokenizing state belongs to the engine's thread alone. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"
#include "stop.h"
#include "unicode.h"

struct GenRequest {
    GenInput in;
    int32_t *prompt;          /* [n_prompt]: in.prompt points here */
    const Tokenizer *tok;
    /* The engine's thread only. */
    Utf8Stream utf8;
    StopMatcher stop;
    char *bytes;              /* [bytes_cap] one token's bytes */
    int bytes_cap;
    bool ended;               /* gen_push_token has returned true */
    GrammarState *grammar;    /* the reply's progress through in.grammar (NULL: none) */
    const TokenTrie *trie;    /* with a grammar: the vocabulary's trie, built (once) by the connection's thread */
    float *constrained;       /* [vocab] gen_constrain's logits */
    int32_t *bias_ids;        /* [in.n_bias] in.bias_ids and in.bias point here */
    float *bias;
    GenRequest **choices;     /* the lead of n > 1: [n_choices], choices[0] is itself; else NULL */
    int n_choices;
    atomic_bool cancel;
    /* Shared, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    GenPiece *pieces;         /* [n_pieces], pieces[next..] not taken yet */
    int n_pieces, cap_pieces, next;
    bool finished;            /* gen_finish or gen_fail was called */
    GenResult res;
    int times_cap;
};

void gen_piece_free(GenPiece *p) {
    buf_free(&p->text);
    free(p->lp);
    memset(p, 0, sizeof *p);
}

GenRequest *gen_request_create(const GenInput *in, const Tokenizer *tok, const char *const *stop, int n_stop) {
    GenRequest *r = xcalloc(1, sizeof *r);
    r->in = *in;
    r->prompt = xmalloc(sizeof(int32_t) * (size_t)(in->n_prompt > 0 ? in->n_prompt : 1));
    if (in->n_prompt > 0) memcpy(r->prompt, in->prompt, sizeof(int32_t) * (size_t)in->n_prompt);
    r->in.prompt = r->prompt;
    if (in->n_bias > 0) {
        r->bias_ids = xmalloc(sizeof(int32_t) * (size_t)in->n_bias);
        r->bias = xmalloc(sizeof(float) * (size_t)in->n_bias);
        memcpy(r->bias_ids, in->bias_ids, sizeof(int32_t) * (size_t)in->n_bias);
        memcpy(r->bias, in->bias, sizeof(float) * (size_t)in->n_bias);
    }
    r->in.bias_ids = r->bias_ids, r->in.bias = r->bias;
    if (in->grammar) {
        r->grammar = grammar_start(in->grammar);
        r->trie = tokenizer_trie(tok);
    }
    if (r->in.top_logprobs > GEN_MAX_TOP_LOGPROBS) r->in.top_logprobs = GEN_MAX_TOP_LOGPROBS;
    r->tok = tok;
    stop_init(&r->stop, stop, n_stop);
    r->bytes_cap = tokenizer_max_token_bytes(tok) + 1;
    r->bytes = xmalloc((size_t)r->bytes_cap);
    atomic_init(&r->cancel, false);
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->res.n_prompt = in->n_prompt;
    r->res.t_submit = time_now_ms();
    return r;
}

void gen_request_free(GenRequest *r) {
    if (!r) return;
    for (int i = r->next; i < r->n_pieces; i++) gen_piece_free(&r->pieces[i]);
    free(r->pieces);
    free(r->res.token_times);
    stop_free(&r->stop);
    free(r->bytes);
    free(r->prompt);
    grammar_state_free(r->grammar);
    free(r->constrained), free(r->bias_ids), free(r->bias), free(r->choices);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

const GenInput *gen_input(const GenRequest *r) { return &r->in; }

void gen_request_group(GenRequest **rs, int n) {
    rs[0]->choices = xmalloc(sizeof *rs * (size_t)n);
    memcpy(rs[0]->choices, rs, sizeof *rs * (size_t)n);
    rs[0]->n_choices = n;
}

int gen_n_choices(const GenRequest *lead) { return lead->choices ? lead->n_choices : 1; }

GenRequest *gen_choice(const GenRequest *lead, int i) { return lead->choices ? lead->choices[i] : (GenRequest *)lead; }

const float *gen_constrain(GenRequest *r, const float *logits, int vocab) {
    if (!r->grammar && r->in.n_bias == 0) return logits;
    if (!r->constrained) r->constrained = xmalloc(sizeof(float) * (size_t)vocab);
    memcpy(r->constrained, logits, sizeof(float) * (size_t)vocab);
    for (int i = 0; i < r->in.n_bias; i++) {
        float *l = &r->constrained[r->in.bias_ids[i]];
        *l = r->in.bias[i] <= -100.0f ? -INFINITY : *l + r->in.bias[i];
    }
    if (r->grammar) {
        grammar_mask(r->grammar, r->trie, r->constrained);
        for (int id = r->trie->n_vocab; id < vocab; id++) r->constrained[id] = -INFINITY; /* the model's extra ids */
    }
    return r->constrained;
}

void gen_begin(GenRequest *r) {
    pthread_mutex_lock(&r->mu);
    r->res.t_begin = time_now_ms();
    pthread_mutex_unlock(&r->mu);
}

void gen_prefill_done(GenRequest *r, int n_cached) {
    pthread_mutex_lock(&r->mu);
    r->res.t_prefill = time_now_ms();
    r->res.n_cached = n_cached;
    pthread_mutex_unlock(&r->mu);
}

void gen_charge(GenRequest *r, double ms, int batch) {
    pthread_mutex_lock(&r->mu);
    if (batch == 0) {
        r->res.charged_prompt_ms += ms;
    } else {
        r->res.charged_decode_ms += ms;
        r->res.decode_steps++;
        r->res.batch_sum += batch;
    }
    pthread_mutex_unlock(&r->mu);
}

bool gen_cancelled(const GenRequest *r) { return atomic_load(&((GenRequest *)r)->cancel); }

void gen_cancel(GenRequest *r) { atomic_store(&r->cancel, true); }

/* The chosen token's log-probability and the k best, from the raw logits. */
static void compute_logprob(const GenRequest *r, int32_t token, const float *logits, GenLogprob *lp) {
    int vocab = tokenizer_vocab_size(r->tok);
    lp->token = token;
    float max = logits[0];
    for (int i = 1; i < vocab; i++)
        if (logits[i] > max) max = logits[i];
    double z = 0.0;
    for (int i = 0; i < vocab; i++) z += sampling_exp((double)logits[i] - max);
    lp->logprob = (float)(((double)logits[token] - max) - log(z));
    lp->n_top = sampler_top_logprobs(logits, vocab, r->in.top_logprobs, lp->top, lp->top_logprob);
}

/* Text from the UTF-8 stream through the stop matcher into out; true if a stop string matched. */
static bool emit(GenRequest *r, const char *bytes, size_t n, bool last, Buf *out) {
    char *chars = xmalloc(UTF8_STREAM_OUT_MAX(n));
    size_t m = utf8_stream_push(&r->utf8, bytes, n, chars);
    if (last) m += utf8_stream_flush(&r->utf8, chars + m);
    bool stopped = stop_push(&r->stop, chars, m, out);
    if (last && !stopped) stop_flush(&r->stop, out);
    free(chars);
    return stopped;
}

/* Queues a piece for the client (under mu). */
static void queue_piece(GenRequest *r, GenPiece *p) {
    if (p->text.len == 0 && p->n_lp == 0) {
        gen_piece_free(p);
        return;
    }
    if (r->n_pieces == r->cap_pieces) {
        r->cap_pieces = r->cap_pieces ? 2 * r->cap_pieces : 16;
        r->pieces = xrealloc(r->pieces, sizeof *r->pieces * (size_t)r->cap_pieces);
    }
    r->pieces[r->n_pieces++] = *p;
    pthread_cond_broadcast(&r->cv);
}

static void record_time(GenRequest *r, double t) {
    GenResult *res = &r->res;
    if (res->n_generated == r->times_cap) {
        r->times_cap = r->times_cap ? 2 * r->times_cap : 64;
        res->token_times = xrealloc(res->token_times, sizeof(double) * (size_t)r->times_cap);
    }
    res->token_times[res->n_generated++] = t;
    if (!res->t_first) res->t_first = t;
    res->t_last = t;
}

bool gen_push_token(GenRequest *r, int32_t token, const float *logits) {
    if (r->ended) return true;
    double t = time_now_ms();
    GenPiece p = {0};
    if (r->in.top_logprobs >= 0 && logits && token >= 0 && token < tokenizer_vocab_size(r->tok)) {
        p.lp = xcalloc(1, sizeof *p.lp);
        p.n_lp = 1;
        compute_logprob(r, token, logits, p.lp);
    }
    const char *reason = NULL;
    bool eog = !r->in.ignore_eos && tokenizer_is_eog(r->tok, token);
    pthread_mutex_lock(&r->mu);
    int n_after = r->res.n_generated + 1;
    pthread_mutex_unlock(&r->mu);
    bool at_limit = r->in.max_tokens > 0 && n_after >= r->in.max_tokens;
    bool off_grammar = r->grammar && !grammar_accept(r->grammar, r->trie, token);
    if (off_grammar) {   /* only when the grammar allowed no token at all: the reply ends here */
        emit(r, "", 0, true, &p.text);
        reason = grammar_complete(r->grammar) ? "stop" : "length";
    } else if (eog) {
        emit(r, "", 0, true, &p.text);
        reason = "stop";
    } else {
        int n = tokenizer_token_bytes(r->tok, token, false, r->bytes, r->bytes_cap);
        if (emit(r, r->bytes, n > 0 ? (size_t)n : 0, at_limit, &p.text)) reason = "stop";
        else if (at_limit) reason = "length";
    }
    pthread_mutex_lock(&r->mu);
    record_time(r, t);
    if (reason) {
        r->res.finish_reason = reason;
        r->ended = true;
    }
    queue_piece(r, &p);
    pthread_mutex_unlock(&r->mu);
    return r->ended || gen_cancelled(r);
}

/* Ends r (under mu) and wakes the client. */
static void end_request(GenRequest *r) {
    if (gen_cancelled(r)) r->res.cancelled = true;
    r->finished = true;
    pthread_cond_broadcast(&r->cv);
}

void gen_finish(GenRequest *r) {
    GenPiece p = {0};
    if (!r->ended) emit(r, "", 0, true, &p.text); /* out of room: release what was held back */
    pthread_mutex_lock(&r->mu);
    if (!r->ended) {
        r->res.finish_reason = "length";
        r->ended = true;
    }
    queue_piece(r, &p);
    end_request(r);
    pthread_mutex_unlock(&r->mu);
}

void gen_fail(GenRequest *r, int status, const char *message) {
    pthread_mutex_lock(&r->mu);
    r->ended = true;
    r->res.status = status;
    err_set(r->res.message, "%s", message);
    end_request(r);
    pthread_mutex_unlock(&r->mu);
}

int gen_next(GenRequest *r, GenPiece *piece, int timeout_ms) {
    double t = time_now_ms() + timeout_ms;
    struct timespec until = {(time_t)(t / 1000), (long)(fmod(t, 1000.0) * 1e6)};
    pthread_mutex_lock(&r->mu);
    while (r->next == r->n_pieces && !r->finished)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) != 0) break;
    int rc;
    if (r->next < r->n_pieces) {
        *piece = r->pieces[r->next++];
        if (r->next == r->n_pieces) r->next = r->n_pieces = 0;
        rc = 1;
    } else {
        rc = r->finished ? -1 : 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

const GenResult *gen_result(const GenRequest *r) { return &r->res; }
