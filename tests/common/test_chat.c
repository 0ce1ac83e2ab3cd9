/* test_chat.c: the Qwen3 chat template (common/chat.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "harness.h"
#include "util.h"

#define N_MSGS(a) (int)(sizeof a / sizeof *a)

static void check_render(const ChatMessage *m, int n, bool gen, bool think, const char *want) {
    char *got = chat_render(m, n, gen, think);
    CHECK_STR(got, want);
    free(got);
}

TEST(chat_one_user_turn) {
    const ChatMessage m[] = {{"user", "Hello"}};
    /* the example of book/appendix-gguf.md A.4.6, thinking disabled */
    check_render(m, 1, true, false,
                 "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    /* D0 of §6.3: thinking enabled adds nothing */
    check_render(m, 1, true, true, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    check_render(m, 1, false, true, "<|im_start|>user\nHello<|im_end|>\n");
    check_render(m, 0, false, true, "");
}

TEST(chat_system_and_user) {
    const ChatMessage m[] = {{"system", "You are a helpful assistant."}, {"user", "What is 2+2?"}};
    /* D1 of §6.3 */
    check_render(m, 2, true, false,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                 "What is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(chat_old_reasoning_removed) {
    const ChatMessage m[] = {
        {"user", "Hi"},
        {"assistant", "<think>\nThe user greets me.\n</think>\n\nHello!"},
        {"user", "Bye"},
    };
    check_render(m, 3, true, true,
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                 "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    /* no </think>: the content stays as it is */
    const ChatMessage m2[] = {{"user", "Hi"}, {"assistant", "\nHello!"}, {"user", "Bye"}};
    check_render(m2, 3, false, true,
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n\nHello!<|im_end|>\n"
                 "<|im_start|>user\nBye<|im_end|>\n");
}

TEST(chat_reasoning_after_last_query_kept) {
    const ChatMessage m[] = {{"user", "Hi"}, {"assistant", "<think>\n\nhmm\n\n</think>\n\nHello!"}};
    check_render(m, 2, false, true,
                 "<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello!<|im_end|>\n");
    /* the last message without reasoning still gets an (empty) think block */
    const ChatMessage m2[] = {{"user", "Hi"}, {"assistant", "Hello!"}};
    check_render(m2, 2, false, true,
                 "<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n");
}

TEST(chat_later_system_and_tools) {
    const ChatMessage m[] = {
        {"user", "Q"}, {"system", "Be brief."}, {"tool", "r1"}, {"tool", "r2"}, {"developer", "x"},
    };
    check_render(m, 5, false, true,
                 "<|im_start|>user\nQ<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n"
                 "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
                 "</tool_response><|im_end|>\n");
}

TEST(chat_strip_thinking_reply) {
    CHECK_STR(chat_strip_thinking("<think>\nx\n</think>\n\nAnswer"), "Answer");
    CHECK_STR(chat_strip_thinking("Answer"), "Answer");
    CHECK_STR(chat_strip_thinking("a</think>b</think>\nc"), "c");
}

/* The chat prompts of the golden set are exactly what the template renders. */
TEST(chat_golden_prompts) {
    const char *d = test_shared_dir();
    if (!d) SKIP("../shared absent: no golden prompts");
    const ChatMessage p2[] = {{"system", "You are a helpful assistant."},
                              {"user", "What is the capital of France?"}};
    const ChatMessage p5[] = {{"user", "Count from 1 to 10."}};
    struct {
        const char *file;
        const ChatMessage *m;
        int n;
        bool think;
    } cases[] = {{"p2_chatml", p2, 2, true}, {"p5_chat_think", p5, 1, false}};
    for (int i = 0; i < 2; i++) {
        char path[1024], err[ERR_MAX];
        snprintf(path, sizeof path, "%s/reference/golden/prompts/%s.txt", d, cases[i].file);
        size_t len;
        char *want = file_read_all(path, &len, err);
        CHECK_MSG(want != NULL, "%s", err);
        if (!want) continue;
        char *got = chat_render(cases[i].m, cases[i].n, true, cases[i].think);
        CHECK_STR(got, want);
        free(got);
        free(want);
    }
}
