/* openai.h: the JSON of OpenAI's API, as chat-server speaks it: reading a
 * /v1/chat/completions or /v1/completions body into checked parameters, and
 * writing responses, stream chunks and error bodies.
 *
 * Reading is strict about what it uses and deaf to the rest: a field this
 * server knows must have the right type and range (else a 400 naming it, as
 * OpenAI's own API answers), while fields it does not know are ignored, since
 * clients send many (user, tools, ...). */
#ifndef OPENAI_H
#define OPENAI_H

#include <stdbool.h>
#include <stdint.h>

#include "chat.h"
#include "json.h"
#include "sampling.h"
#include "server.h"
#include "util.h"

typedef enum { OAI_CHAT, OAI_COMPLETION } OaiKind;

#define OAI_MAX_STOP 16
#define OAI_MAX_CHOICES 16

typedef struct {
    OaiKind kind;
    const char *model;          /* as sent, or NULL */
    ChatMessage *messages;      /* chat: [n_messages], strings point into the parsed body */
    int n_messages;
    char **contents;            /* the messages' text when it came in parts, [n_messages] (or NULL) */
    const char *prompt;         /* completion: the prompt text, or NULL when given as token ids */
    size_t prompt_len;
    int32_t *prompt_ids;        /* completion: [n_prompt_ids] when given as token ids */
    int n_prompt_ids;
    int max_tokens;             /* max_completion_tokens or max_tokens; -1 when absent */
    bool ignore_eos;            /* "ignore_eos": true: end-of-generation tokens do not end the answer */
    SamplerParams sampling;
    bool seeded;                /* a seed was given (else a fresh one each request) */
    const char *stop[OAI_MAX_STOP];
    int n_stop;
    bool stream, include_usage;
    int top_logprobs;           /* -1: none; chat: top_logprobs when logprobs is true; completion: logprobs */
    bool enable_thinking;       /* chat_template_kwargs.enable_thinking (default true, as Qwen3's template) */
    Grammar *grammar;           /* response_format json_object / json_schema, compiled (grammar.h); NULL: text */
    int32_t *bias_ids;          /* logit_bias: [n_bias] token ids and their biases */
    float *bias;
    int n_bias;
    int n;                      /* choices to generate (1 to OAI_MAX_CHOICES) */
    JsonValue *doc;             /* the parsed body everything points into */
} OaiRequest;

/* Reads body[0..len). vocab_size bounds prompt token ids. Returns 0, or -1 with
 * err (the message for the client) and param (the offending field, "" if none;
 * 64 bytes). */
int oai_parse_request(OaiRequest *r, OaiKind kind, const char *body, size_t len, int vocab_size, char *err,
                      char *param);
void oai_request_free(OaiRequest *r);

/* The error body {"error":{"message","type","param","code"}} for a status. */
void oai_error_json(Buf *out, int status, const char *message, const char *param);

/* What a response says about one finished request. */
typedef struct {
    int index;                  /* the choice a chunk belongs to (n > 1) */
    const char *id;             /* "chatcmpl-..." / "cmpl-..." */
    long created;               /* Unix seconds */
    const char *model;
    const Tokenizer *tok;       /* to write the logprobs' token texts */
} OaiReply;

/* The whole non-streamed response: one choice with text and its logprobs
 * (lp may be NULL), usage and timings. */
void oai_response_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *text, size_t len,
                       const GenLogprob *lp, int n_lp, const GenResult *res);
/* One choice of a response with n > 1. */
typedef struct {
    const char *text;
    size_t len;
    const GenLogprob *lp;       /* [n_lp] (may be NULL) */
    int n_lp;
    const char *finish_reason;
} OaiChoice;
/* The whole non-streamed response with choices[0..n): usage counts the
 * prompt once and every choice's tokens (usage). */
void oai_response_choices_json(Buf *out, const OaiRequest *q, const OaiReply *a, const OaiChoice *choices, int n,
                               const GenResult *usage);
/* One stream chunk. Chat: role (the first chunk, NULL after), text (may be
 * NULL), finish_reason (the last chunk, NULL before). Completions ignore role. */
void oai_chunk_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *role, const char *text, size_t len,
                    const GenLogprob *lp, int n_lp, const char *finish_reason);
/* The last chunk of a stream with stream_options.include_usage: no choices, usage and timings. */
void oai_usage_chunk_json(Buf *out, const OaiRequest *q, const OaiReply *a, const GenResult *res);
/* "usage":{...} and "timings":{...} (llama-server's names) as object members. */
void oai_usage_members(Buf *out, const GenResult *res);

#endif
