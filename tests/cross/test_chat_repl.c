/* test_chat_repl.c: chapter III.4's chat-repl driven through a pipe, as a user
 * would drive it: each turn prefills only its own tokens (read from the
 * program's per-turn line), /think off, /reset, /verify (the cache against a
 * fresh prefill of the template's text, bitwise), Ctrl-C, bad command lines. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "harness.h"
#include "run.h"
#include "tokenizer.h"
#include "util.h"

#define MODEL "models/default.gguf"
#define SYSTEM "You tell stories."

static const char *repl_path(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/III.4/chat-repl", test_build_dir());
    return path;
}

static bool have_repl(void) {
    if (access(repl_path(), X_OK) == 0) return true;
    test_fail(__FILE__, __LINE__, "%s is missing: `make test` builds it", repl_path());
    return false;
}

static int count_tokens(const Tokenizer *t, const char *text) {
    int32_t *ids;
    int n;
    char err[ERR_MAX];
    tokenizer_encode(t, text, strlen(text), true, &ids, &n, err);
    free(ids);
    return n;
}

static Tokenizer *load_tokenizer(void) {
    char err[ERR_MAX];
    GgufFile g;
    if (gguf_open(&g, MODEL, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return NULL;
    }
    Tokenizer *t = tokenizer_load(&g, err);
    gguf_close(&g);
    CHECK_MSG(t != NULL, "%s", err);
    return t;
}

/* Runs chat-repl with the given flags on the default model, input as stdin. */
static int run_repl(const char *flags, const char *input, char **out) {
    const char *in_path = test_tmp_path("repl-input.txt");
    FILE *f = fopen(in_path, "w");
    fputs(input, f);
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s < %s", repl_path(), flags, MODEL, in_path);
    return run_capture(cmd, out);
}

typedef struct {
    int prefilled, cached, generated, refed, rolled_back;
} TurnLine;

/* Whether the count n written before `after` in s says "token" for 1 and "tokens" otherwise. */
static bool plural_right(const char *s, int n, const char *after) {
    const char *end = strstr(s, after), *word = strstr(s, " token");
    if (!end || !word || word > end) return false;
    return (word[6] == 's') == (n != 1);
}

/* The per-turn lines "[turn K | prompt: N tokens prefilled, M cached | reply: G tokens, ... |
 * answer re-fed: A tokens, R rolled back | ...]", in order. */
static int parse_turns(const char *out, TurnLine *t, int max) {
    int n = 0;
    for (const char *p = strstr(out, "[turn "); p && n < max; p = strstr(p + 1, "[turn ")) {
        int k;
        /* "1 token", "2 tokens": the plural matches the count */
        const char *reply = strstr(p, "| reply: "), *answer = strstr(p, "| answer re-fed: ");
        const char *cached = strstr(p, " prefilled, ");
        const char *rolled = answer ? strchr(answer, ',') : NULL;
        if (sscanf(p, "[turn %d | prompt: %d token", &k, &t[n].prefilled) != 2 || !cached ||
            sscanf(cached, " prefilled, %d cached", &t[n].cached) != 1 || !reply ||
            sscanf(reply, "| reply: %d token", &t[n].generated) != 1 || !answer ||
            sscanf(answer, "| answer re-fed: %d token", &t[n].refed) != 1 || !rolled ||
            sscanf(rolled, ", %d rolled back", &t[n].rolled_back) != 1 || k != n + 1 ||
            !plural_right(p, t[n].prefilled, " prefilled") || !plural_right(reply, t[n].generated, ", first") ||
            !plural_right(answer, t[n].refed, ", ")) {
            test_fail(__FILE__, __LINE__, "cannot read the turn line: %.160s", p);
            return n;
        }
        n++;
    }
    return n;
}

/* The sizes the /verify lines report, in order; -1 for a failed one. */
static int parse_verified(const char *out, int *sizes, int max) {
    int n = 0;
    for (const char *p = strstr(out, "[verif"); p && n < max; p = strstr(p + 1, "[verif")) {
        int size;
        sizes[n++] = sscanf(p, "[verified: the cache holds the template's %d tokens", &size) == 1 ? size : -1;
    }
    return n;
}

TEST(chat_repl_pipe_prefills_only_new_turns) {
    if (!have_repl()) return;
    Tokenizer *tok = load_tokenizer();
    if (!tok) return;
    const char *input =
        "Tell me a story about a cat.\n/verify\n"
        "Write a story about Lily.\n/verify\n"
        "/think off\n"
        "A short one, please.\n/verify\n"
        "/stats\n"
        "/reset\n/verify\n"
        "Hello\n/verify\n"
        "/quit\n"
        "this line comes after /quit\n";
    char *out = NULL;
    int rc = run_repl("--system '" SYSTEM "' --max-tokens 24 --seed 7 --backend scalar", input, &out);
    CHECK_EQ_INT(rc, 0);
    TurnLine t[8];
    int n = parse_turns(out, t, 8);
    int sizes[8];
    int nv = parse_verified(out, sizes, 8);
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(nv, 5);
    if (n != 4 || nv != 5) {
        printf("%s\n", out);
        goto done;
    }
    for (int i = 0; i < 5; i++) CHECK_MSG(sizes[i] > 0, "/verify %d failed", i + 1);
    int system = count_tokens(tok, "<|im_start|>system\n" SYSTEM "<|im_end|>\n");
    const char *no_think = "<think>\n\n</think>\n\n";
    /* turn 1, thinking on: the system prompt was prefilled at start, the turn adds its own tokens */
    CHECK_EQ_INT(t[0].cached, system);
    CHECK_EQ_INT(t[0].prefilled,
                 count_tokens(tok, "<|im_start|>user\nTell me a story about a cat.<|im_end|>\n<|im_start|>assistant\n"));
    /* turns 2 and 3: everything before is cached, as /verify measured it; only the new turn is prefilled */
    CHECK_EQ_INT(t[1].cached, sizes[0]);
    CHECK_EQ_INT(t[1].prefilled,
                 count_tokens(tok, "<|im_start|>user\nWrite a story about Lily.<|im_end|>\n<|im_start|>assistant\n"));
    CHECK_EQ_INT(t[2].cached, sizes[1]);
    char want[256];
    snprintf(want, sizeof want, "<|im_start|>user\nA short one, please.<|im_end|>\n<|im_start|>assistant\n%s", no_think);
    CHECK_EQ_INT(t[2].prefilled, count_tokens(tok, want));
    /* with thinking off, the empty think block of the prompt is rolled back with the reply */
    CHECK_MSG(t[2].rolled_back >= 4, "rolled back %d", t[2].rolled_back);
    /* /reset: back to the system prompt, still cached */
    CHECK_EQ_INT(sizes[3], system);
    CHECK_EQ_INT(t[3].cached, system);
    snprintf(want, sizeof want, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n%s", no_think);
    CHECK_EQ_INT(t[3].prefilled, count_tokens(tok, want));
    for (int i = 0; i < 4; i++) CHECK(t[i].generated >= 1 && t[i].generated <= 24);
    CHECK(strstr(out, "[thinking off]") != NULL);
    CHECK(strstr(out, "[conversation reset:") != NULL);
    CHECK(strstr(out, "thinking            off") != NULL);   /* /stats */
    CHECK(strstr(out, "kv                  paged, ") != NULL);
done:
    free(out);
    tokenizer_free(tok);
}

/* The output without the per-turn lines and chat-repl's own messages. */
static char *replies_only(const char *out) {
    Buf b = {0};
    buf_append(&b, "", 0);
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line + 1) : strlen(line);
        if (strncmp(line, "[turn ", 6) != 0 && strncmp(line, "chat-repl: ", 11) != 0) buf_append(&b, line, n);
        line += n;
    }
    return b.data;
}

/* The same seed and messages give the same replies; the paged cache gives the same as the basic one. */
TEST(chat_repl_seeded_replies_reproducible) {
    if (!have_repl()) return;
    const char *input = "Tell me a story about a dog.\nAnd one about a bird.\n";
    char *a = NULL, *b = NULL, *c = NULL;
    CHECK_EQ_INT(run_repl("--max-tokens 20 --seed 42 --kv basic", input, &a), 0);
    CHECK_EQ_INT(run_repl("--max-tokens 20 --seed 42 --kv paged --kv-block-size 8", input, &b), 0);
    CHECK_EQ_INT(run_repl("--max-tokens 20 --seed 43 --kv basic", input, &c), 0);
    /* compare the replies: the lines with timings or the clock's seed go */
    char *ra = replies_only(a), *rb = replies_only(b), *rc = replies_only(c);
    CHECK(strlen(ra) > 20);
    CHECK_STR(ra, rb);
    CHECK_MSG(strcmp(ra, rc) != 0, "seeds 42 and 43 gave the same replies: %s", ra);
    free(a), free(b), free(c), free(ra), free(rb), free(rc);
}

TEST(chat_repl_bad_command_lines) {
    if (!have_repl()) return;
    struct {
        const char *flags, *want;
    } cases[] = {
        {"--bogus", "unknown option '--bogus'"},
        {"--top-p 2", "top_p must be in [0, 1]"},
        {"--temperature abc", "--temperature wants a number"},
        {"--max-tokens 0", "--max-tokens wants an integer >= 1"},
        {"--kv nosuch", "nosuch"},
        {"--seed -1", "--seed wants an integer >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL;
        int rc = run_repl(cases[i].flags, "", &out);
        CHECK_MSG(rc == 1, "%s: exit %d", cases[i].flags, rc);
        CHECK_MSG(strstr(out, cases[i].want) != NULL && strncmp(out, "chat-repl: ", 11) == 0 &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "%s: want one line with '%s', got: %s", cases[i].flags, cases[i].want, out);
        free(out);
    }
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s /nonexistent/model.gguf < /dev/null", repl_path());
    CHECK_EQ_INT(run_capture(cmd, &out), 1);
    CHECK(strstr(out, "/nonexistent/model.gguf") != NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "%s --help", repl_path());
    CHECK_EQ_INT(run_capture(cmd, &out), 0);
    CHECK(strstr(out, "rolls the sequence back") != NULL);
    free(out);
    /* unknown /commands and an over-long message are reported and the chat goes on */
    Buf in = {0};
    buf_puts(&in, "/nope\n");
    for (int i = 0; i < 300; i++) buf_puts(&in, "cat ");
    buf_puts(&in, "\nHi\n");
    CHECK_EQ_INT(run_repl("--max-tokens 4 --no-think", in.data, &out), 0);
    CHECK(strstr(out, "unknown command '/nope'") != NULL);
    CHECK(strstr(out, "this message is too long for the conversation") != NULL);
    CHECK(strstr(out, "[turn 1 |") != NULL && strstr(out, "[turn 2 |") == NULL);   /* the refused one is no turn */
    buf_free(&in);
    free(out);
}

/* One read of what the child printed, waiting a minute at most. */
static bool read_some(int fd, Buf *acc) {
    char chunk[4096];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 60000) != 1) return false;
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    buf_append(acc, chunk, (size_t)n);
    return true;
}

/* Reads until want appears in *acc; false (a failure) if the output ends or stalls first. */
static bool read_until(int fd, Buf *acc, const char *want) {
    while (!acc->data || !strstr(acc->data, want))
        if (!read_some(fd, acc)) {
            test_fail(__FILE__, __LINE__, "no '%s' from chat-repl (it ended or stalled for a minute)", want);
            return false;
        }
    return true;
}

/* Ctrl-C during a reply or at the prompt stops at most the reply, never the program. */
TEST(chat_repl_ctrl_c_keeps_the_program) {
    if (!have_repl()) return;
    int to_child[2], from_child[2];
    CHECK(pipe(to_child) == 0 && pipe(from_child) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        dup2(from_child[1], 2);
        close(to_child[1]), close(from_child[0]);
        execl(repl_path(), "chat-repl", "--no-think", "--seed", "3", "--backend", "scalar", MODEL, (char *)NULL);
        _exit(127);
    }
    close(to_child[0]), close(from_child[1]);
    Buf out = {0};
    /* at the prompt */
    CHECK(read_until(from_child[0], &out, "/help for commands."));
    /* a signal landing before the program waits for input only sets its flag: repeat until one lands */
    const char *hint = "(Ctrl-C stops a reply";
    for (int i = 0; i < 120 && !strstr(out.data, hint); i++) {
        kill(pid, SIGINT);
        struct pollfd pf = {.fd = from_child[0], .events = POLLIN};
        if (poll(&pf, 1, 500) == 1) read_some(from_child[0], &out);
    }
    CHECK(strstr(out.data, hint) != NULL);
    /* during a reply (or just after it, when it is quicker than the signal) */
    const char *msg = "Tell me a long story about a cat.\n";
    CHECK(write(to_child[1], msg, strlen(msg)) == (ssize_t)strlen(msg));
    CHECK(read_some(from_child[0], &out));   /* the first bytes of the reply */
    kill(pid, SIGINT);
    CHECK(read_until(from_child[0], &out, "[turn 1 |"));
    const char *rest = "Hi\n/quit\n";
    CHECK(write(to_child[1], rest, strlen(rest)) == (ssize_t)strlen(rest));
    close(to_child[1]);
    CHECK(read_until(from_child[0], &out, "[turn 2 |"));
    while (read_some(from_child[0], &out)) {}   /* to the end */
    close(from_child[0]);
    int status = 0;
    for (int waited = 0; waitpid(pid, &status, WNOHANG) == 0; waited++) {
        if (waited == 600) kill(pid, SIGKILL);   /* a minute: it hangs */
        usleep(100000);
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "chat-repl did not exit 0: %s", out.data);
    CHECK(strstr(out.data, "[turn 2 |") != NULL);
    buf_free(&out);
}
