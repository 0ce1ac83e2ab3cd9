/* test_gen_request.c: a generation request between an engine and a client
 * (common/serve/gen_request.c, server.h): tokens become the client's text with
 * whole UTF-8 characters, stop strings, max_tokens and end-of-generation;
 * cancelling, failing, logprobs, and an engine thread racing the client. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server.h"

enum { T_A, T_B, T_SPACE_C, T_C3, T_A9, T_END, T_NL, N_VOCAB };

/* a, b, " c", the two bytes of "é" as two tokens, <|im_end|>, "\n". */
static Tokenizer *tiny_tokenizer(void) {
    static const char *const toks[] = {"a", "b", ("\xc4\xa0" "c"), "\xc3\x83", "\xc2\xa9", "<|im_end|>", "\xc4\x8a"};
    static const int32_t types[] = {1, 1, 1, 1, 1, 3, 1};
    char err[ERR_MAX];
    Tokenizer *t = tokenizer_build(toks, types, N_VOCAB, NULL, 0, err);
    CHECK_MSG(t, "%s", err);
    return t;
}

static GenRequest *make(Tokenizer *t, int max_tokens, int top_logprobs, const char *const *stop, int n_stop) {
    int32_t prompt[2] = {T_A, T_B};
    GenInput in = {.prompt = prompt, .n_prompt = 2, .max_tokens = max_tokens, .sampling = sampler_params_default(),
                   .top_logprobs = top_logprobs};
    return gen_request_create(&in, t, stop, n_stop);
}

/* Every piece's text joined with '|' between pieces. */
static char *drain(GenRequest *r) {
    Buf b = {0};
    buf_append(&b, "", 0);
    GenPiece p;
    int rc, n = 0;
    while ((rc = gen_next(r, &p, 1000)) == 1) {
        if (n++) buf_puts(&b, "|");
        buf_append(&b, p.text.data ? p.text.data : "", p.text.len);
        gen_piece_free(&p);
    }
    CHECK_EQ_INT(rc, -1);
    return b.data;
}

TEST(gen_request_utf8_across_tokens_and_length) {
    Tokenizer *t = tiny_tokenizer();
    GenRequest *r = make(t, -1, -1, NULL, 0);
    gen_begin(r);
    gen_prefill_done(r, 0);
    CHECK(!gen_push_token(r, T_A, NULL));
    CHECK(!gen_push_token(r, T_C3, NULL)); /* half of "é": held back, no piece */
    CHECK(!gen_push_token(r, T_A9, NULL));
    CHECK(!gen_push_token(r, T_C3, NULL)); /* half again, then the engine runs out of room */
    gen_finish(r);
    char *text = drain(r);
    CHECK_STR(text, "a|\xc3\xa9|\xef\xbf\xbd"); /* the unfinished byte comes out as U+FFFD at the end */
    const GenResult *res = gen_result(r);
    CHECK_STR(res->finish_reason, "length");
    CHECK_EQ_INT(res->n_generated, 4);
    CHECK_EQ_INT(res->n_prompt, 2);
    CHECK(res->status == 0 && !res->cancelled);
    CHECK(res->t_first > 0 && res->t_last >= res->t_first && res->t_prefill >= res->t_begin);
    for (int i = 1; i < res->n_generated; i++) CHECK(res->token_times[i] >= res->token_times[i - 1]);
    free(text);
    gen_request_free(r);
    tokenizer_free(t);
}

TEST(gen_request_end_of_generation_and_max_tokens) {
    Tokenizer *t = tiny_tokenizer();
    GenRequest *r = make(t, 10, -1, NULL, 0);
    CHECK(!gen_push_token(r, T_B, NULL));
    CHECK(gen_push_token(r, T_END, NULL)); /* ends; its text is not part of the reply */
    CHECK(gen_push_token(r, T_A, NULL));   /* and nothing after counts */
    gen_finish(r);
    char *text = drain(r);
    CHECK_STR(text, "b");
    CHECK_STR(gen_result(r)->finish_reason, "stop");
    CHECK_EQ_INT(gen_result(r)->n_generated, 2);
    free(text);
    gen_request_free(r);

    int32_t prompt[1] = {T_A}; /* ignore_eos: the end token is one more (textless) token; max_tokens ends it */
    GenInput in = {.prompt = prompt, .n_prompt = 1, .max_tokens = 3, .sampling = sampler_params_default(),
                   .top_logprobs = -1, .ignore_eos = true};
    r = gen_request_create(&in, t, NULL, 0);
    CHECK(!gen_push_token(r, T_B, NULL));
    CHECK(!gen_push_token(r, T_END, NULL));
    CHECK(gen_push_token(r, T_A, NULL));
    gen_finish(r);
    text = drain(r);
    CHECK_STR(text, "b|a");
    CHECK_STR(gen_result(r)->finish_reason, "length");
    CHECK_EQ_INT(gen_result(r)->n_generated, 3);
    free(text);
    gen_request_free(r);

    r = make(t, 2, -1, NULL, 0);
    CHECK(!gen_push_token(r, T_A, NULL));
    CHECK(gen_push_token(r, T_C3, NULL)); /* max_tokens: the held byte is flushed */
    gen_finish(r);
    text = drain(r);
    CHECK_STR(text, "a|\xef\xbf\xbd");
    CHECK_STR(gen_result(r)->finish_reason, "length");
    free(text);
    gen_request_free(r);
    tokenizer_free(t);
}

TEST(gen_request_stop_strings) {
    Tokenizer *t = tiny_tokenizer();
    const char *stop[] = {"b c", "\n\n"};
    GenRequest *r = make(t, 10, -1, stop, 2);
    CHECK(!gen_push_token(r, T_A, NULL));
    CHECK(!gen_push_token(r, T_B, NULL));     /* "b" may start "b c": held */
    CHECK(gen_push_token(r, T_SPACE_C, NULL)); /* "b c" across two tokens: the end, not shown */
    gen_finish(r);
    char *text = drain(r);
    CHECK_STR(text, "a");
    CHECK_STR(gen_result(r)->finish_reason, "stop");
    free(text);
    gen_request_free(r);

    r = make(t, 3, -1, stop, 2);
    CHECK(!gen_push_token(r, T_A, NULL));
    CHECK(!gen_push_token(r, T_NL, NULL)); /* held: "\n" may start "\n\n" */
    CHECK(gen_push_token(r, T_A, NULL));   /* max_tokens: "\na" goes out */
    gen_finish(r);
    text = drain(r);
    CHECK_STR(text, "a|\na");
    CHECK_STR(gen_result(r)->finish_reason, "length");
    free(text);
    gen_request_free(r);

    r = make(t, -1, -1, stop, 2);
    CHECK(!gen_push_token(r, T_NL, NULL));
    gen_finish(r); /* out of room with "\n" held: it is released */
    text = drain(r);
    CHECK_STR(text, "\n");
    free(text);
    gen_request_free(r);
    tokenizer_free(t);
}

TEST(gen_request_cancel_and_fail) {
    Tokenizer *t = tiny_tokenizer();
    GenRequest *r = make(t, 10, -1, NULL, 0);
    CHECK(!gen_cancelled(r));
    CHECK(!gen_push_token(r, T_A, NULL));
    gen_cancel(r);
    CHECK(gen_cancelled(r));
    CHECK(gen_push_token(r, T_B, NULL)); /* the engine learns at its next step */
    gen_finish(r);
    char *text = drain(r);
    free(text);
    CHECK(gen_result(r)->cancelled);
    gen_request_free(r);

    r = make(t, 10, -1, NULL, 0);
    CHECK(!gen_push_token(r, T_A, NULL));
    gen_fail(r, 503, "out of KV blocks: needs 3, 1 free");
    text = drain(r);
    CHECK_STR(text, "a"); /* what came before the failure still reaches the client */
    CHECK_EQ_INT(gen_result(r)->status, 503);
    CHECK_STR(gen_result(r)->message, "out of KV blocks: needs 3, 1 free");
    free(text);
    gen_request_free(r);
    tokenizer_free(t);
}

TEST(gen_request_next_times_out_while_nothing_comes) {
    Tokenizer *t = tiny_tokenizer();
    GenRequest *r = make(t, 10, -1, NULL, 0);
    GenPiece p;
    double t0 = time_now_ms();
    CHECK_EQ_INT(gen_next(r, &p, 30), 0);
    double waited = time_now_ms() - t0;
    CHECK(waited >= 25 && waited < 1000);
    gen_finish(r);
    CHECK_EQ_INT(gen_next(r, &p, 30), -1);
    gen_request_free(r);
    tokenizer_free(t);
}

TEST(gen_request_logprobs) {
    Tokenizer *t = tiny_tokenizer();
    GenRequest *r = make(t, 10, 2, NULL, 0);
    float logits[N_VOCAB] = {1.0f, 3.0f, 0.5f, 2.0f, -1.0f, 0.0f, 0.0f};
    CHECK(!gen_push_token(r, T_C3, logits)); /* held-back text still gets its piece: the token's logprobs */
    gen_finish(r);
    GenPiece p;
    CHECK_EQ_INT(gen_next(r, &p, 1000), 1);
    CHECK_EQ_INT(p.text.len, 0);
    CHECK_EQ_INT(p.n_lp, 1);
    double z = 0;
    for (int i = 0; i < N_VOCAB; i++) z += exp(logits[i]);
    CHECK_EQ_INT(p.lp[0].token, T_C3);
    CHECK_NEAR(p.lp[0].logprob, 2.0 - log(z), 1e-5);
    CHECK_EQ_INT(p.lp[0].n_top, 2);
    CHECK_EQ_INT(p.lp[0].top[0], T_B);
    CHECK_EQ_INT(p.lp[0].top[1], T_C3);
    CHECK_NEAR(p.lp[0].top_logprob[0], 3.0 - log(z), 1e-5);
    gen_piece_free(&p);
    CHECK_EQ_INT(gen_next(r, &p, 1000), 1); /* the flushed U+FFFD */
    gen_piece_free(&p);
    CHECK_EQ_INT(gen_next(r, &p, 1000), -1);
    gen_request_free(r);
    tokenizer_free(t);
}

static void *engine_thread(void *arg) {
    GenRequest *r = arg;
    for (int i = 0; i < 2000; i++)
        if (gen_push_token(r, i % 2 ? T_A : T_B, NULL)) break;
    gen_finish(r);
    return NULL;
}

TEST(gen_request_engine_and_client_threads) {
    Tokenizer *t = tiny_tokenizer();
    GenRequest *r = make(t, 1500, -1, NULL, 0);
    pthread_t th;
    pthread_create(&th, NULL, engine_thread, r);
    Buf all = {0};
    buf_append(&all, "", 0);
    GenPiece p;
    int rc, pieces = 0;
    while ((rc = gen_next(r, &p, 1000)) != -1) {
        if (rc == 1) {
            buf_append(&all, p.text.data, p.text.len);
            pieces++;
            gen_piece_free(&p);
        }
    }
    pthread_join(th, NULL);
    CHECK_EQ_INT(all.len, 1500);
    CHECK_EQ_INT(pieces, 1500); /* one piece per token, however fast they came */
    for (size_t i = 0; i < all.len; i++) CHECK(all.data[i] == (i % 2 ? 'a' : 'b'));
    CHECK_STR(gen_result(r)->finish_reason, "length");
    buf_free(&all);
    gen_request_free(r);
    tokenizer_free(t);
}
