/* chat_print.h: a chat reply written out as it is generated (chat-repl). On
 * a terminal the reasoning (<think>...</think>) is shown dimmed (ANSI SGR 2),
 * without its markers, and the answer after it as usual; anywhere else the
 * text is written exactly as it comes. */
#ifndef CHAT_PRINT_H
#define CHAT_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "chat_reply.h"

typedef struct {
    FILE *out;
    bool terminal;   /* dim the reasoning (else write the text as is) */
    ChatReply reply; /* the reply so far, read into its parts (terminal only) */
    bool dimmed;     /* out is dimmed now */
} ChatPrint;

/* Starts a reply on out; terminal: out is a terminal (isatty). */
void chat_print_begin(ChatPrint *p, FILE *out, bool terminal);
/* The next text[0..n) of the reply, written and flushed. */
void chat_print_text(ChatPrint *p, const char *text, size_t n);
/* The reply is over: what was held back, and the terminal back to normal. */
void chat_print_end(ChatPrint *p);

#endif
