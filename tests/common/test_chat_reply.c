/* test_chat_reply.c: reading Qwen3 replies back into reasoning, content and
 * tool calls (common/text/chat_reply.c), whole and as a stream cut anywhere;
 * chat-repl's printer of them (common/run/chat_print.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_print.h"
#include "chat_reply.h"
#include "harness.h"

static const ChatReplyOptions ALL = {.reasoning = true, .tools = true};

/* Feeds text in pieces of `step` bytes and checks that the deltas add up to
 * the whole parse. */
static void check_stream_equals_whole(const char *text, ChatReplyOptions opt, size_t piece) {
    ChatReply whole, r;
    chat_reply_parse(&whole, opt, text, strlen(text));
    chat_reply_init(&r, opt);
    ChatReplyDelta d = {0};
    Buf content = {0}, reasoning = {0};
    buf_append(&content, "", 0);
    buf_append(&reasoning, "", 0);
    int calls = 0;
    for (size_t i = 0, n = strlen(text); i < n + piece; i += piece) {
        if (i < n) chat_reply_push(&r, text + i, n - i < piece ? n - i : piece, &d);
        else chat_reply_finish(&r, &d);
        buf_append(&content, d.content.data, d.content.len);
        buf_append(&reasoning, d.reasoning.data, d.reasoning.len);
        calls += r.n_calls - d.first_call;
    }
    chat_reply_finish(&r, &d); /* a second finish adds nothing */
    CHECK_EQ_INT((int)d.content.len + (int)d.reasoning.len, 0);
    buf_append(&content, "", 0);
    buf_append(&reasoning, "", 0);
    CHECK_MSG(strcmp(content.data, whole.content.data) == 0, "piece %zu: content '%s' != '%s'", piece, content.data, whole.content.data);
    CHECK_MSG(strcmp(reasoning.data, whole.reasoning.data) == 0, "piece %zu: reasoning '%s' != '%s'", piece, reasoning.data, whole.reasoning.data);
    CHECK_EQ_INT(calls, whole.n_calls);
    CHECK_EQ_INT(r.n_calls, whole.n_calls);
    for (int i = 0; i < r.n_calls && i < whole.n_calls; i++) {
        CHECK_STR(r.calls[i].name, whole.calls[i].name);
        CHECK_STR(r.calls[i].arguments, whole.calls[i].arguments);
    }
    chat_reply_delta_free(&d);
    chat_reply_free(&r);
    chat_reply_free(&whole);
    buf_free(&content);
    buf_free(&reasoning);
}

static void check_every_cut(const char *text, ChatReplyOptions opt) {
    for (size_t piece = 1; piece <= 13; piece++) check_stream_equals_whole(text, opt, piece);
}

TEST(chat_reply_reasoning_and_content) {
    const char *text = "<think>\nThe user greets me.\n\n</think>\n\nHello! How can I help?";
    ChatReply r;
    chat_reply_parse(&r, ALL, text, strlen(text));
    CHECK_STR(r.reasoning.data, "The user greets me.");
    CHECK_STR(r.content.data, "Hello! How can I help?");
    CHECK_EQ_INT(r.n_calls, 0);
    chat_reply_free(&r);
    /* --reasoning-format none: all of it is content */
    chat_reply_parse(&r, (ChatReplyOptions){0}, text, strlen(text));
    CHECK_STR(r.content.data, text);
    CHECK_STR(r.reasoning.data, "");
    chat_reply_free(&r);
    /* thinking disabled: the template wrote the empty think block, the reply has none */
    chat_reply_parse(&r, ALL, "Hi <think> is text here", 23);
    CHECK_STR(r.content.data, "Hi <think> is text here");
    chat_reply_free(&r);
    /* cut short while thinking (max_tokens): what there is is reasoning */
    chat_reply_parse(&r, ALL, "<think>\nHmm, let me", 19);
    CHECK_STR(r.reasoning.data, "Hmm, let me");
    CHECK_STR(r.content.data, "");
    chat_reply_free(&r);
    check_every_cut(text, ALL);
    check_every_cut("<think>\n\n</think>\n\nA\n\nB\n", ALL);
    check_every_cut("<thin", ALL);
}

TEST(chat_reply_tool_calls) {
    const char *text = "<think>\nI need the weather twice.\n</think>\n\nLet me check.\n<tool_call>\n"
                       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>\n"
                       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    ChatReply r;
    chat_reply_parse(&r, ALL, text, strlen(text));
    CHECK_STR(r.reasoning.data, "I need the weather twice.");
    CHECK_STR(r.content.data, "Let me check.");
    CHECK_EQ_INT(r.n_calls, 2);
    if (r.n_calls == 2) {
        CHECK_STR(r.calls[0].name, "get_weather");
        CHECK_STR(r.calls[0].arguments, "{\"city\":\"Paris\",\"days\":[1,2]}");
        CHECK_STR(r.calls[1].name, "get_time");
        CHECK_STR(r.calls[1].arguments, "{}");
    }
    chat_reply_free(&r);
    check_every_cut(text, ALL);
    /* without tools offered, the block is just text */
    chat_reply_parse(&r, (ChatReplyOptions){.reasoning = true}, text, strlen(text));
    CHECK_EQ_INT(r.n_calls, 0);
    CHECK(strstr(r.content.data, "<tool_call>\n{\"name\": \"get_weather\"") != NULL);
    chat_reply_free(&r);
    /* arguments given as a string are passed on as they are */
    const char *s = "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>";
    chat_reply_parse(&r, ALL, s, strlen(s));
    CHECK_EQ_INT(r.n_calls, 1);
    if (r.n_calls == 1) CHECK_STR(r.calls[0].arguments, "{\"x\": 1}");
    CHECK_STR(r.content.data, "");
    chat_reply_free(&r);
}

/* Whatever the model writes, the parser answers: a block that is not a call stays content. */
TEST(chat_reply_malformed_calls_stay_content) {
    static const char *const bad[] = {
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>",
        "<tool_call>\nnot json at all\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
        "<tool_call>\n[\"f\"]\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}", /* cut short */
        "<tool_call>",
        "<tool_",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ChatReply r;
        chat_reply_parse(&r, ALL, bad[i], strlen(bad[i]));
        CHECK_EQ_INT(r.n_calls, 0);
        CHECK_MSG(strcmp(r.content.data, bad[i]) == 0, "'%s' became '%s'", bad[i], r.content.data);
        chat_reply_free(&r);
        check_every_cut(bad[i], ALL);
    }
    /* a good call after a bad one is still found */
    const char *mixed = "<tool_call>\nnope\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
    ChatReply r;
    chat_reply_parse(&r, ALL, mixed, strlen(mixed));
    CHECK_EQ_INT(r.n_calls, 1);
    CHECK_STR(r.content.data, "<tool_call>\nnope\n</tool_call>");
    chat_reply_free(&r);
}

/* A prefilled start (a continued message, a forced "<tool_call>\n") sets the
 * state but is not given out again. */
TEST(chat_reply_primed_start) {
    ChatReply r;
    ChatReplyDelta d = {0};
    chat_reply_init(&r, ALL);
    chat_reply_prime(&r, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
    const char *rest = "{\"city\": \"Oslo\"}}\n</tool_call>";
    chat_reply_push(&r, rest, strlen(rest), &d);
    CHECK_EQ_INT(r.n_calls, 1);
    CHECK_EQ_INT(d.first_call, 0);
    if (r.n_calls == 1) CHECK_STR(r.calls[0].arguments, "{\"city\":\"Oslo\"}");
    chat_reply_free(&r);
    chat_reply_init(&r, ALL);
    chat_reply_prime(&r, "<think>\n\n</think>\n\nOnce upon a time ");
    chat_reply_push(&r, "there was", 9, &d);
    chat_reply_finish(&r, &d);
    CHECK_STR(r.content.data, "there was");
    CHECK_STR(r.reasoning.data, "");
    chat_reply_free(&r);
    chat_reply_init(&r, ALL);
    chat_reply_prime(&r, "<think>\nFirst");
    chat_reply_push(&r, ", second</think>Done", 20, &d);
    CHECK_STR(r.reasoning.data, ", second");
    CHECK_STR(r.content.data, "Done");
    chat_reply_free(&r);
    chat_reply_delta_free(&d);
}

/* chat-repl's printer: on a terminal the reasoning dimmed without its markers; elsewhere the text as is. */
TEST(chat_print_dims_the_reasoning_on_a_terminal) {
    static const char *const pieces[] = {"<thi", "nk>\nLet me ", "think.\n</th", "ink>\n\nOnce", " upon a time."};
    for (int terminal = 0; terminal <= 1; terminal++) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ChatPrint p;
        chat_print_begin(&p, f, terminal);
        for (int i = 0; i < 5; i++) chat_print_text(&p, pieces[i], strlen(pieces[i]));
        chat_print_end(&p);
        fclose(f);
        CHECK_STR(text, terminal ? "\033[2mLet me think.\033[0m\n\nOnce upon a time."
                                 : "<think>\nLet me think.\n</think>\n\nOnce upon a time.");
        free(text);
    }
}
