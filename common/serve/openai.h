/* openai.h: the JSON of OpenAI's API, as chat-server speaks it: reading a
 * /v1/chat/completions or /v1/completions body into checked parameters, and
 * writing responses, stream chunks and error bodies.
 *
 * Reading is strict about what it uses and deaf to the rest: a field this
 * server knows must have the right type and range (else a 400 naming it, as
 * OpenAI's own API answers), while fields it does not know are ignored, since
 * clients send many (user, metadata, ...). */
#ifndef OPENAI_H
#define OPENAI_H

#include <stdbool.h>
#include <stdint.h>

#include "chat.h"
#include "chat_reply.h"
#include "json.h"
#include "sampling.h"
#include "server.h"
#include "util.h"

typedef enum { OAI_CHAT, OAI_COMPLETION } OaiKind;

/* tool_choice: whether the reply may, must or must not call a tool. */
typedef enum {
    OAI_TOOLS_AUTO,      /* "auto" (the default with tools): the model decides */
    OAI_TOOLS_NONE,      /* "none": no tools are shown to the model */
    OAI_TOOLS_REQUIRED,  /* "required": the reply must be one or more calls of the tools */
    OAI_TOOLS_FUNCTION,  /* {"type": "function", "function": {"name": ...}}: a call of that tool */
} OaiToolChoice;

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
    bool parse_special;         /* completion: "parse_special" (default true): control-token texts in the prompt
                                 * become control tokens; false: the prompt is plain text */
    SamplerParams sampling;
    bool seeded;                /* a seed was given (else a fresh one each request) */
    const char *stop[OAI_MAX_STOP];
    int n_stop;
    bool stream, include_usage;
    int top_logprobs;           /* -1: none; chat: top_logprobs when logprobs is true; completion: logprobs */
    bool enable_thinking;       /* chat_template_kwargs.enable_thinking (default true, as Qwen3's template) */
    /* Tools (chat). What a reply must be is set here, and enforced by grammar:
     * with OAI_TOOLS_REQUIRED, "<tool_call>\n{\"name\": \"NAME\", \"arguments\": ARGS}\n</tool_call>"
     * with NAME one of functions[i].name and ARGS matching its "parameters"
     * schema (any object when there are several tools); with
     * OAI_TOOLS_FUNCTION the same for functions[tool_choice_index] only.
     * oai_reply_prefix gives the start of it that is prefilled. */
    const JsonValue **functions; /* [n_tools] each tool's "function" object as sent (name, description, parameters) */
    char **tools;               /* [n_tools] each tool as the template's tojson writes it (ChatOptions.tools) */
    int n_tools;
    OaiToolChoice tool_choice;
    int tool_choice_index;      /* OAI_TOOLS_FUNCTION: the tool it names */
    bool continue_final;        /* the last message is the assistant's: the reply continues it (no new turn) */
    char **owned;               /* [n_owned] strings the messages point to (tool call arguments sent as objects) */
    int n_owned;
    Grammar *grammar;           /* what the reply must be, compiled (grammar.h): response_format json_object /
                                 * json_schema, or tool_choice required / a function (oai_tool_constraint); NULL: text */
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

/* Do tools reach the model (some were sent and tool_choice is not "none")? */
bool oai_tools_shown(const OaiRequest *r);
/* The text put after the generation prompt so that the reply starts as
 * tool_choice demands (the grammar enforces the rest): "" (auto, none),
 * "<tool_call>\n" (required), or the call up to its arguments (a named
 * function). */
void oai_reply_prefix(const OaiRequest *r, Buf *out);
/* What the constrained sampler enforces after that prefix for tool_choice
 * required or a named function (false for auto and none): a JSON value
 * matching *schema (JSON Schema text: the named tool's "parameters"; for
 * required, {"name", "arguments"} in that order, the name an enum of the
 * tools' names, the arguments that tool's "parameters" when there is one tool
 * and any object when there are several), then the literal *suffix, then the
 * end of the reply. oai_parse_request compiles it into r->grammar (a 400 with
 * response_format, which constrains the reply too). */
bool oai_tool_constraint(const OaiRequest *r, Buf *schema, const char **suffix);

/* The error body {"error":{"message","type","param","code"}} for a status. */
void oai_error_json(Buf *out, int status, const char *message, const char *param);

/* What a response says about one finished request. */
typedef struct {
    int index;                  /* the choice a chunk belongs to (n > 1) */
    const char *id;             /* "chatcmpl-..." / "cmpl-..." */
    long created;               /* Unix seconds */
    const char *model;
    const Tokenizer *tok;       /* to write the logprobs' token texts */
    const ChatReply *parsed;    /* chat: the reply read into reasoning, content and tool calls;
                                 * NULL: the text is all content */
} OaiReply;

/* "stop" becomes "tool_calls" when the reply called tools. */
const char *oai_finish_reason(const OaiReply *a, const GenResult *res);
/* Stream chunks of a parsed reply (chat): reasoning text, and a tool call as
 * OpenAI clients assemble it: a chunk with its index, id, type and name
 * (arguments ""), then one with the arguments. */
void oai_reasoning_chunk_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *text, size_t len);
void oai_tool_call_chunks_json(Buf *first, Buf *second, const OaiRequest *q, const OaiReply *a, int index,
                               const ChatReplyCall *call);

/* The whole non-streamed response: one choice with text and its logprobs
 * (lp may be NULL), usage and timings. A chat reply with a->parsed has
 * message.content from it (null when empty and there are tool calls),
 * message.reasoning_content when there was reasoning, message.tool_calls. */
void oai_response_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *text, size_t len,
                       const GenLogprob *lp, int n_lp, const GenResult *res);
/* One choice of a response with n > 1. */
typedef struct {
    const char *text;
    size_t len;
    const GenLogprob *lp;       /* [n_lp] (may be NULL) */
    int n_lp;
    const char *finish_reason;  /* oai_finish_reason of the choice's reply */
    const ChatReply *parsed;    /* chat: the choice's reply read into reasoning, content and tool calls; NULL: all content */
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
