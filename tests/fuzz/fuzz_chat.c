/* fuzz_chat.c: the chat template on messages of any content. The first byte
 * holds the two switches (add_generation_prompt, enable_thinking); the rest
 * is split at NUL bytes into messages, the first byte of each choosing its
 * role (system, user, assistant, tool, or one the template skips). The
 * rendered text must hold every user message verbatim, and tokenize (with
 * special tokens) into ids that decode back to it. */
#include <string.h>

#include "chat.h"
#include "fuzz.h"

#define MAX_MESSAGES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    bool add_prompt = data[0] & 1, thinking = data[0] & 2;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    ChatMessage msgs[MAX_MESSAGES] = {{0}};
    int n = 0;
    for (char *p = text; p < text + size - 1 && n < MAX_MESSAGES; p += strlen(p) + 1) {
        if (!*p) continue;
        msgs[n].role = roles[(unsigned char)*p % 5];
        msgs[n].content = p + 1;
        n++;
    }
    char *out = chat_render(msgs, n, add_prompt, thinking);
    FUZZ_ASSERT(out != NULL);
    for (int i = 0; i < n; i++)
        if (!strcmp(msgs[i].role, "user")) FUZZ_ASSERT(strstr(out, msgs[i].content) != NULL);
    const char *answer = chat_strip_thinking(out);
    FUZZ_ASSERT(answer >= out && answer <= out + strlen(out));

    const Tokenizer *t = fuzz_vocab();
    int32_t *ids = NULL;
    int n_ids = 0;
    char err[ERR_MAX];
    FUZZ_ASSERT(tokenizer_encode(t, out, strlen(out), true, &ids, &n_ids, err) == 0);
    size_t len;
    char *back = tokenizer_decode(t, ids, n_ids, true, &len);
    if (fuzz_valid_utf8(out, strlen(out))) FUZZ_ASSERT(len == strlen(out) && memcmp(back, out, len) == 0);
    free(back);
    free(ids);
    free(out);
    free(text);
    return 0;
}
