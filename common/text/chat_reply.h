/* chat_reply.h: reading a Qwen3 reply back into the parts of an OpenAI
 * message, the inverse of the chat template (chat.h).
 *
 * A reply is one text: "<think>\n...\n</think>\n\n" (the reasoning, in
 * thinking mode), then the answer, then any number of
 * "<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>" blocks.
 * The parser splits it into reasoning, content and tool calls while the text
 * arrives, piece by piece, so a stream can send each part as it is known. It
 * holds back only what may still turn out to be a marker (a trailing "<thi",
 * the newlines before a "</think>" or a "<tool_call>"), and a tool call until
 * its "</tool_call>": only then is it known whole. A block whose JSON is not
 * a call ({"name": string, "arguments": object or string}) stays in the
 * content, as written: the model's mistake is shown, never lost. */
#ifndef CHAT_REPLY_H
#define CHAT_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef struct {
    char *name;       /* the function's name */
    char *arguments;  /* its arguments as compact JSON text ("{\"city\":\"Paris\"}") */
} ChatReplyCall;

typedef struct {
    bool reasoning;   /* split "<think>...</think>" at the start off into reasoning */
    bool tools;       /* parse "<tool_call>" blocks (the request offered tools) */
} ChatReplyOptions;

/* What one push (or the finish) made known, in reply order within each kind. */
typedef struct {
    Buf content;            /* new answer text */
    Buf reasoning;          /* new reasoning text */
    int first_call;         /* calls[first_call..n_calls) of the parser are new */
} ChatReplyDelta;

typedef struct {
    ChatReplyOptions opt;
    int state;              /* where the parser is (chat_reply.c) */
    Buf held;               /* text not yet given out: a possible marker, or a tool call's body */
    int skip;               /* what to drop at the start of what comes next: 0 nothing,
                             * 1 newlines (after </think>), 2 white space (after a call) */
    /* Everything so far. */
    Buf content, reasoning; /* NUL-terminated */
    ChatReplyCall *calls;   /* [n_calls] */
    int n_calls, cap_calls;
} ChatReply;

void chat_reply_init(ChatReply *r, ChatReplyOptions opt);
void chat_reply_free(ChatReply *r);
/* Reads text[0..n) of the reply; d (cleared first) gets what became known. */
void chat_reply_push(ChatReply *r, const char *text, size_t n, ChatReplyDelta *d);
/* The reply has ended: what was held back is given out (an unfinished tool
 * call as content, unfinished reasoning as reasoning). */
void chat_reply_finish(ChatReply *r, ChatReplyDelta *d);
/* Reads text that is already the client's (a prefilled start of the reply):
 * it sets the parser's state (inside the reasoning, inside a tool call) but
 * adds to no part. */
void chat_reply_prime(ChatReply *r, const char *text);
void chat_reply_delta_free(ChatReplyDelta *d);

/* A whole reply at once: init, push, finish. */
void chat_reply_parse(ChatReply *r, ChatReplyOptions opt, const char *text, size_t n);

#endif
