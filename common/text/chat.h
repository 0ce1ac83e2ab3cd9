/* chat.h: Qwen3's chat template (ChatML with a thinking switch), in C.
 *
 * A chat model never sees "messages", only one text in which each turn is
 * wrapped as <|im_start|>role\n...<|im_end|>\n. This renders that text exactly
 * as the Jinja template stored in Qwen3 GGUFs (tokenizer.chat_template) does,
 * tools and tool calls included.
 *
 * Text stays text: a user who writes "<|im_end|>\n<|im_start|>system\n" in a
 * message must not close their own turn and open a system one. So the model's
 * tokens come from chat_encode, which knows which markers the template wrote:
 * those become control tokens, and everything that came from a message (its
 * content, tool calls and results, a system prompt) is tokenized with
 * special-token parsing off. Tokenizing chat_render's text with
 * parse_special = true gives the same tokens only for messages that do not
 * spell a control token. */
#ifndef CHAT_H
#define CHAT_H

#include <stdbool.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct {
    const char *name;
    const char *arguments;  /* JSON text, written as is */
} ChatToolCall;

/* Initialize with designated fields ({.role = "user", .content = "Hi"}); the
 * ones left out are "absent". */
typedef struct {
    const char *role;               /* "system", "user", "assistant", "tool"; others are skipped */
    const char *content;            /* NULL renders as "" (an assistant turn with only tool calls) */
    const char *reasoning_content;  /* assistant: its reasoning; NULL: taken from
                                     * <think>...</think> in content */
    const ChatToolCall *tool_calls; /* assistant: [n_tool_calls] */
    int n_tool_calls;
} ChatMessage;

typedef struct {
    bool add_generation_prompt;  /* end with "<|im_start|>assistant\n" for the model to continue */
    bool enable_thinking;        /* false: also an empty think block, so Qwen3 answers directly */
    const char *const *tools;    /* [n_tools] each tool's JSON as Python's json.dumps writes it
                                  * (", " and ": " separators): the template's tojson */
    int n_tools;
    bool parse_special_in_messages; /* chat_encode: control-token texts inside messages become
                                     * control tokens too (the old behaviour, which lets a user
                                     * forge turns; chat-server --parse-special-in-messages) */
    bool continue_final;         /* the last message, an assistant's, is left open (no <|im_end|>) for
                                  * the model to continue; use without add_generation_prompt */
} ChatOptions;

/* Renders msgs[0..n) and returns a malloc'ed string:
 * - a first "system" message becomes the system turn (with tools, the tools'
 *   description follows its text in that turn); later ones are ordinary turns;
 * - the last user "query" is the last user message that is not only a
 *   <tool_response>...</tool_response>; assistant turns before it lose their
 *   reasoning: only the text after their last </think> is kept (leading
 *   newlines stripped), since old reasoning is not shown to the model again;
 * - assistant turns after it (a tool-calling loop) keep their reasoning as
 *   <think>\n{reasoning}\n</think>\n\n{answer}, when it is not empty or the turn
 *   is the last message;
 * - tool calls follow the content as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>;
 * - consecutive "tool" messages are gathered into one user turn of
 *   <tool_response> blocks. */
char *chat_render_with(const ChatMessage *msgs, int n, const ChatOptions *opt);

/* The common case: no tools. */
char *chat_render(const ChatMessage *msgs, int n, bool add_generation_prompt, bool enable_thinking);

/* Renders msgs[0..n) as chat_render_with does and encodes the text into
 * *ids ([*n_ids], malloc'ed): the <|im_start|> and <|im_end|> the template
 * wrote become their control tokens (or plain text in a vocabulary without
 * them), and the text between them is encoded with parse_special = false.
 * Since markers cut the text just where tokenizing the whole rendering with
 * parse_special = true would, the ids are the same as that for any messages
 * that spell no control token. Returns 0 (err for interface symmetry). */
int chat_encode(const Tokenizer *tok, const ChatMessage *msgs, int n, const ChatOptions *opt, int32_t **ids,
                int *n_ids, char *err);

/* With opt->continue_final: what of the reply the rendering already holds,
 * the continued (last) assistant message as written after its turn's
 * "<|im_start|>assistant\n" (found by the template's own marker, so a message
 * that spells that text does not move it). "" without continue_final.
 * Returns a malloc'ed string. */
char *chat_continued(const ChatMessage *msgs, int n, const ChatOptions *opt);

/* The answer part of a generated reply: the text after the last </think>
 * without leading newlines (the whole text if there is no </think>). Returns a
 * pointer into reply. */
const char *chat_strip_thinking(const char *reply);

#endif
