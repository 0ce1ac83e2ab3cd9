/* conversation.h: chat-repl's turn logic.
 *
 * A chat model sees one text: the chat template's rendering of every message
 * so far. Re-running that whole text every turn would make turn 20 cost twenty
 * times turn 1, so a Conversation keeps one Sequence whose KV cache always holds
 * exactly the tokens of that rendering, and a new turn only feeds what the
 * rendering added.
 *
 * One wrinkle: Qwen3's template drops the <think> block of earlier replies,
 * while the cache holds the reply as it was generated, reasoning included.
 * After each reply the conversation rolls the sequence back to where the reply
 * began and feeds the answer alone, so the cache is again token for token what
 * a fresh prefill of the rendering would give (it costs the answer's tokens,
 * not the whole history). */
#ifndef CONVERSATION_H
#define CONVERSATION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "radix.h"
#include "sampling.h"
#include "sequence.h"
#include "tokenizer.h"
#include "util.h"

/* What one synchronization of the cache with the rendering did. */
typedef struct {
    int kept;         /* tokens the cache already held (or the prefix cache gave): not prefilled again */
    int rolled_back;  /* cached tokens the rendering no longer has, dropped */
    int fed;          /* tokens prefilled */
    double ms;
} SyncStats;

/* One turn: the user's message in, the reply out. */
typedef struct {
    SyncStats prompt;   /* feeding the user's turn and the generation prompt */
    SyncStats answer;   /* after the reply: rolling back and feeding the answer */
    int generated;      /* reply tokens (the end-of-turn token not counted) */
    double ttft_ms;     /* from the start of the turn to the first token */
    double decode_tps;  /* tokens chosen after the first / time after the first */
    char stop[160];     /* "end of turn", "max tokens", "interrupted", or why there was no room */
} TurnStats;

/* Receives the reply's text as it comes, in whole UTF-8 characters. */
typedef void (*TextSink)(void *ctx, const char *text, size_t n);

typedef struct {
    Sequence seq;          /* its cache holds the rendering of msgs (plus the generation prompt
                            * and the reply while one is being generated) */
    const Tokenizer *tok;
    ChatMessage *msgs;     /* [cap_msgs]; the strings are owned */
    int n_msgs, cap_msgs;
    bool enable_thinking;  /* the template's switch, for the next turns */
    RadixTree *prefix;     /* NULL, or a prefix cache of the sequence's pool: what a sync rolls
                            * back stays there, and a sync takes what it holds (III.7) */
} Conversation;

/* Takes ownership of kv (through the Sequence). system may be NULL or "". */
int  conv_init(Conversation *c, const Qwen3Model *m, Backend *be, KvCache *kv, const Tokenizer *tok, int ctx,
               const char *system, char *err);
void conv_free(Conversation *c);
/* Forgets every turn; the system prompt stays, and so does its part of the cache. */
int  conv_reset(Conversation *c, SyncStats *st, char *err);

/* Appends a message (copies the strings). */
void conv_add(Conversation *c, const char *role, const char *content);

/* The tokens of the template's rendering of the messages, with the generation
 * prompt or not: what a fresh prefill would read. malloc'ed; *n set. */
int32_t *conv_render_tokens(const Conversation *c, bool generation_prompt, int *n);

/* The history as the next turn will render it: what the cache holds between
 * turns. Not conv_render_tokens(c, false): Qwen3's template shows the last
 * reply's <think> block (even an empty one) while no user message follows it,
 * and drops it once the next one comes. malloc'ed; *n set. */
int32_t *conv_history_tokens(const Conversation *c, int *n);

/* Makes the cache hold exactly target[0..n) and the logits be the prediction
 * after it: keeps the longest prefix the cache already agrees on, or the
 * longer one the prefix cache holds, rolls back the rest, feeds the
 * difference. -1 with err when there is no room (the agreeing prefix stays
 * cached). */
int conv_sync(Conversation *c, const int32_t *target, int n, SyncStats *st, char *err);

/* Generates the reply from the current logits: samples, streams the text to
 * sink, feeds each token back, until an end-of-generation token, max_tokens,
 * *stop becoming non-zero (Ctrl-C), or no room. The reply's text (whole
 * characters) is appended to reply. Sets st->generated, ttft_ms (from t_start),
 * decode_tps and stop. */
void conv_generate(Conversation *c, Sampler *s, int max_tokens, TextSink sink, void *sink_ctx,
                   volatile sig_atomic_t *stop, double t_start, Buf *reply, TurnStats *st);

/* conv_sync to conv_history_tokens: at the start it prefills the system
 * prompt; after a reply or a reset it rolls back what the next turn will not show. */
int conv_sync_history(Conversation *c, SyncStats *st, char *err);

/* After a reply: records it as the assistant's message and syncs the cache to
 * conv_history_tokens, where its reasoning is gone: the sequence rolls back to
 * where the reply began and feeds the answer. */
int conv_finish_reply(Conversation *c, const char *reply, SyncStats *st, char *err);

/* A whole turn: the user's message, the reply streamed to sink, the cache
 * synced. Returns 0; -1 with err if the user's turn does not fit (the message
 * is dropped, nothing else happens); -2 with err if the reply was made but its
 * answer could not be fed back (the conversation is full). A reply cut short by
 * the room left is still a reply (st->stop says why). */
int conv_turn(Conversation *c, const char *user_text, Sampler *s, int max_tokens, TextSink sink, void *sink_ctx,
              volatile sig_atomic_t *stop, TurnStats *st, char *err);

/* Checks the claim of this file: the cache holds exactly conv_history_tokens,
 * and prefilling those tokens from scratch into kv (which it takes and frees)
 * gives bitwise the logits the conversation has. Call it between turns.
 * 1 yes; 0 no, saying how in err; -1 with err if the fresh prefill failed. */
int conv_verify(const Conversation *c, KvCache *kv, char *err);

#endif
