/* conversation.c: see conversation.h. */
#include "conversation.h"

#include <stdlib.h>
#include <string.h>

#include "unicode.h"

int conv_init(Conversation *c, const Qwen3Model *m, Backend *be, KvCache *kv, const Tokenizer *tok, int ctx,
              const char *system, char *err) {
    memset(c, 0, sizeof *c);
    if (seq_init(&c->seq, m, be, kv, ctx, err) != 0) return -1;
    c->tok = tok;
    c->enable_thinking = true;
    if (system && *system) conv_add(c, "system", system);
    return 0;
}

static void free_message(ChatMessage *m) {
    free((char *)m->role);
    free((char *)m->content);
}

void conv_free(Conversation *c) {
    for (int i = 0; i < c->n_msgs; i++) free_message(&c->msgs[i]);
    free(c->msgs);
    seq_free(&c->seq);
    memset(c, 0, sizeof *c);
}

int conv_reset(Conversation *c, SyncStats *st, char *err) {
    int keep = c->n_msgs > 0 && strcmp(c->msgs[0].role, "system") == 0 ? 1 : 0;
    for (int i = keep; i < c->n_msgs; i++) free_message(&c->msgs[i]);
    c->n_msgs = keep;
    return conv_sync_history(c, st, err);
}

void conv_add(Conversation *c, const char *role, const char *content) {
    if (c->n_msgs == c->cap_msgs) {
        c->cap_msgs = c->cap_msgs ? 2 * c->cap_msgs : 8;
        c->msgs = xrealloc(c->msgs, sizeof *c->msgs * (size_t)c->cap_msgs);
    }
    c->msgs[c->n_msgs++] = (ChatMessage){.role = xstrdup(role), .content = xstrdup(content)};
}

/* Removes the last message. */
static void conv_pop(Conversation *c) {
    if (c->n_msgs > 0) free_message(&c->msgs[--c->n_msgs]);
}

/* The tokens of msgs[0..n) as the model sees them: the template's markers are
 * control tokens, and what the user typed stays text even if it spells one
 * ("<|im_end|>" in a message cannot end the turn; chat.h). */
static int32_t *encode_chat(const Conversation *c, const ChatMessage *msgs, int n, bool generation_prompt, int *n_ids) {
    ChatOptions opt = {.add_generation_prompt = generation_prompt, .enable_thinking = c->enable_thinking};
    int32_t *ids = NULL;
    char err[ERR_MAX];
    chat_encode(c->tok, msgs, n, &opt, &ids, n_ids, err);   /* cannot fail */
    return ids;
}

int32_t *conv_render_tokens(const Conversation *c, bool generation_prompt, int *n) {
    return encode_chat(c, c->msgs, c->n_msgs, generation_prompt, n);
}

int32_t *conv_history_tokens(const Conversation *c, int *n) {
    ChatMessage *m = xmalloc(sizeof *m * (size_t)(c->n_msgs + 1));
    if (c->n_msgs) memcpy(m, c->msgs, sizeof *m * (size_t)c->n_msgs); /* no turns yet: msgs may be NULL */
    m[c->n_msgs] = (ChatMessage){.role = "user", .content = ""};
    int32_t *ids = encode_chat(c, m, c->n_msgs + 1, false, n);
    int n_empty;   /* the empty turn, "<|im_start|>user\n<|im_end|>\n", comes off the end */
    free(encode_chat(c, m + c->n_msgs, 1, false, &n_empty));
    *n -= n_empty;
    free(m);
    return ids;
}

/* EXERCISE conv-sync "Feed only what the cache lacks, or the prefix cache holds" 3 points; tests: III7_conv_sync */
int conv_sync(Conversation *c, const int32_t *target, int n, SyncStats *st, char *err) {
    Sequence *s = &c->seq;
    double t0 = time_now_ms();
    int keep = 0;   /* the longest prefix the cache already agrees on */
    while (keep < s->n_tokens && keep < n && s->tokens[keep] == target[keep]) keep++;
    /* The logits after target[n-1] exist only if it is the cache's last token:
     * when the cache holds more, the last target token is fed again. */
    if (keep == n && s->n_tokens > n && n > 0) keep--;
    *st = (SyncStats){.kept = keep, .rolled_back = s->n_tokens - keep, .fed = n - keep};
    if (c->prefix && kv_paged_table(s->kv)) {   /* III.7: perhaps the prefix cache has more */
        int have = radix_seq_sync(c->prefix, s, target, n, keep, err);
        if (have < 0) return -1;
        if (have > keep) *st = (SyncStats){.kept = have, .rolled_back = st->rolled_back, .fed = n - have};
        keep = have;
    }
    if (keep < s->n_tokens) seq_truncate(s, keep);
    int rc = n > keep ? seq_extend(s, target + keep, n - keep, err) : 0;
    st->ms = time_now_ms() - t0;
    return rc;
}

/* Streams one token's bytes out in whole characters, appending them to reply. */
static void emit_token(Conversation *c, Utf8Stream *u, int32_t token, TextSink sink, void *ctx, Buf *reply) {
    char piece[256], out[UTF8_STREAM_OUT_MAX(256)];
    int n = tokenizer_token_bytes(c->tok, token, false, piece, sizeof piece);
    if (n < 0) {   /* a piece longer than 256 bytes: fetch it whole */
        char *big = xmalloc((size_t)-n);
        n = tokenizer_token_bytes(c->tok, token, false, big, -n);
        char *big_out = xmalloc(UTF8_STREAM_OUT_MAX((size_t)n));
        size_t m = utf8_stream_push(u, big, (size_t)n, big_out);
        buf_append(reply, big_out, m);
        if (sink && m) sink(ctx, big_out, m);
        free(big), free(big_out);
        return;
    }
    size_t m = utf8_stream_push(u, piece, (size_t)n, out);
    buf_append(reply, out, m);
    if (sink && m) sink(ctx, out, m);
}

/* EXERCISE conv-reply "Stream a reply token by token" 2 points; tests: III4_conv_reply III4_conversation */
void conv_generate(Conversation *c, Sampler *s, int max_tokens, TextSink sink, void *sink_ctx,
                   volatile sig_atomic_t *stop, double t_start, Buf *reply, TurnStats *st) {
    Utf8Stream u;
    utf8_stream_init(&u);
    buf_append(reply, "", 0);
    double t_first = 0.0, t_last = 0.0;
    int chosen = 0;
    st->generated = 0;
    snprintf(st->stop, sizeof st->stop, "max tokens");
    char err[ERR_MAX];
    while (st->generated < max_tokens) {
        if (stop && *stop) {
            snprintf(st->stop, sizeof st->stop, "interrupted");
            break;
        }
        int32_t token = sampler_sample(s, c->seq.logits, NULL);
        t_last = time_now_ms();
        if (chosen++ == 0) t_first = t_last;
        if (tokenizer_is_eog(c->tok, token)) {
            snprintf(st->stop, sizeof st->stop, "end of turn");
            break;
        }
        sampler_accept(s, token);
        emit_token(c, &u, token, sink, sink_ctx, reply);
        if (++st->generated == max_tokens) break;   /* its forward would be wasted */
        if (seq_extend(&c->seq, &token, 1, err) != 0) {
            snprintf(st->stop, sizeof st->stop, "no room: %.140s", err);
            break;
        }
    }
    char out[UTF8_STREAM_OUT_MAX(0)];
    size_t m = utf8_stream_flush(&u, out);
    buf_append(reply, out, m);
    if (sink && m) sink(sink_ctx, out, m);
    st->ttft_ms = chosen > 0 ? t_first - t_start : 0.0;
    st->decode_tps = chosen > 1 && t_last > t_first ? (chosen - 1) / ((t_last - t_first) / 1000.0) : 0.0;
}

int conv_sync_history(Conversation *c, SyncStats *st, char *err) {
    int n;
    int32_t *target = conv_history_tokens(c, &n);
    int rc = conv_sync(c, target, n, st, err);
    free(target);
    return rc;
}

/* EXERCISE drop-reasoning "Roll back the reply, feed its answer" 1 point; tests: III4_conv_drop_reasoning */
int conv_finish_reply(Conversation *c, const char *reply, SyncStats *st, char *err) {
    conv_add(c, "assistant", reply);
    return conv_sync_history(c, st, err);
}

int conv_turn(Conversation *c, const char *user_text, Sampler *s, int max_tokens, TextSink sink, void *sink_ctx,
              volatile sig_atomic_t *stop, TurnStats *st, char *err) {
    memset(st, 0, sizeof *st);
    double t_start = time_now_ms();
    conv_add(c, "user", user_text);
    int n;
    int32_t *target = conv_render_tokens(c, true, &n);
    int rc = conv_sync(c, target, n, &st->prompt, err);
    free(target);
    if (rc != 0) {
        conv_pop(c);
        return -1;
    }
    Buf reply = {0};
    conv_generate(c, s, max_tokens, sink, sink_ctx, stop, t_start, &reply, st);
    rc = conv_finish_reply(c, reply.data, &st->answer, err);
    buf_free(&reply);
    return rc == 0 ? 0 : -2;
}

int conv_verify(const Conversation *c, KvCache *kv, char *err) {
    const Sequence *s = &c->seq;
    int n;
    int32_t *want = conv_history_tokens(c, &n);
    int same = 0;
    while (same < n && same < s->n_tokens && s->tokens[same] == want[same]) same++;
    int rc = 0;
    if (same < n || s->n_tokens != n) {
        err_set(err, "the cache holds %d tokens, the rendering has %d: they differ from token %d on", s->n_tokens, n,
                same);
        kv_cache_free(kv);
    } else if (n == 0) {
        rc = 1;
        kv_cache_free(kv);
    } else {
        Sequence fresh;
        rc = -1;
        if (seq_init(&fresh, s->model, s->be, kv, n, err) == 0) {
            if (seq_extend(&fresh, want, n, err) == 0) {
                rc = memcmp(fresh.logits, s->logits, sizeof(float) * (size_t)s->model->cfg.vocab_size) == 0;
                if (!rc) err_set(err, "the logits after %d tokens differ from a fresh prefill's", n);
            }
            seq_free(&fresh);
        }
    }
    free(want);
    return rc;
}
