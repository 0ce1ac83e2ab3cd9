/* chat.h: Qwen3's chat template (ChatML with a thinking switch), in C.
 *
 * A chat model never sees "messages", only one text in which each turn is
 * wrapped as <|im_start|>role\n...<|im_end|>\n. This renders that text the way
 * the Jinja template stored in Qwen3 GGUFs (tokenizer.chat_template) does for
 * conversations without tools. Tokenize the result with parse_special = true so
 * that the markers become their control tokens. */
#ifndef CHAT_H
#define CHAT_H

#include <stdbool.h>

typedef struct {
    const char *role;    /* "system", "user", "assistant" (or "tool") */
    const char *content;
} ChatMessage;

/* Renders msgs[0..n) and returns a malloc'ed string:
 * - a first "system" message becomes the system turn; later ones are ordinary turns;
 * - assistant turns before the last user message lose their reasoning: only the
 *   text after their last </think> is kept (leading newlines stripped), since old
 *   reasoning is not shown to the model again;
 * - assistant turns after the last user message are rendered as
 *   <think>\n{reasoning}\n</think>\n\n{answer};
 * - consecutive "tool" messages are gathered into one user turn of
 *   <tool_response> blocks; other roles are skipped, as the template does;
 * - add_generation_prompt appends "<|im_start|>assistant\n" for the model to
 *   continue, and with enable_thinking false also an empty "<think>\n\n</think>\n\n",
 *   which tells Qwen3 to answer without reasoning. */
char *chat_render(const ChatMessage *msgs, int n, bool add_generation_prompt, bool enable_thinking);

/* The answer part of a generated reply: the text after the last </think>
 * without leading newlines (the whole text if there is no </think>). Returns a
 * pointer into reply. */
const char *chat_strip_thinking(const char *reply);

#endif
