/* chat_print.c: see chat_print.h. */
#include "chat_print.h"

void chat_print_begin(ChatPrint *p, FILE *out, bool terminal) {
    *p = (ChatPrint){.out = out, .terminal = terminal};
    if (terminal) chat_reply_init(&p->reply, (ChatReplyOptions){.reasoning = true});
}

static void write_delta(ChatPrint *p, const ChatReplyDelta *d) {
    if (d->reasoning.len > 0 && !p->dimmed) fputs("\033[2m", p->out), p->dimmed = true;
    fwrite(d->reasoning.data, 1, d->reasoning.len, p->out);
    if (d->content.len > 0 && p->dimmed) fputs("\033[0m\n\n", p->out), p->dimmed = false;
    fwrite(d->content.data, 1, d->content.len, p->out);
}

void chat_print_text(ChatPrint *p, const char *text, size_t n) {
    if (!p->terminal) {
        fwrite(text, 1, n, p->out);
    } else {
        ChatReplyDelta d = {0};
        chat_reply_push(&p->reply, text, n, &d);
        write_delta(p, &d);
        chat_reply_delta_free(&d);
    }
    fflush(p->out);
}

void chat_print_end(ChatPrint *p) {
    if (!p->terminal) return;
    ChatReplyDelta d = {0};
    chat_reply_finish(&p->reply, &d);
    write_delta(p, &d);
    chat_reply_delta_free(&d);
    chat_reply_free(&p->reply);
    if (p->dimmed) fputs("\033[0m", p->out);
    fflush(p->out);
}
