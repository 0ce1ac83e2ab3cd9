/* chat-repl (chapter III.7): a multi-turn chat on the terminal.
 *
 * Each line read is a user message; the reply streams back. The KV cache lives
 * as long as the conversation, so a turn prefills only its own tokens, never
 * the turns before it (conversation.c has the turn logic). What a turn rolls
 * back stays in the prefix cache (radix.c): after /reset, the same messages
 * again are read from it instead of being prefilled. Works the same with a
 * pipe as stdin. */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "chat_print.h"
#include "conversation.h"
#include "kv_cache.h"
#include "qwen3.h"
#include "sampling.h"
#include "tokenizer.h"

typedef struct {
    const char *model_path;
    const char *system;
    const char *backend;
    int threads;
    int ctx;          /* 0: the model's */
    int max_tokens;   /* per reply; 0: until the context is full */
    bool think;
    bool no_prefix_cache;
    SamplerParams thinking, plain;   /* the sampling of each mode */
    KvFlags kv;
} ReplOptions;

static void usage(FILE *f) {
    fprintf(f,
            "usage: chat-repl [options] <model.gguf>\n"
            "\n"
            "A multi-turn chat on the terminal with Qwen3's chat template. Type a message and\n"
            "press Enter; the reply streams back. stdin may be a pipe (one message per line).\n"
            "\n"
            "The KV cache is kept across turns: each turn prefills only its own tokens (the\n"
            "new user turn and the assistant header), never the conversation before it.\n"
            "Qwen3's template drops the <think> reasoning of earlier replies from the\n"
            "history, while the cache still holds it as it was generated. So after every\n"
            "reply chat-repl rolls the sequence back to where the reply began and feeds the\n"
            "answer alone: the cache is then exactly what a fresh prefill of the template's\n"
            "text would give, for the cost of the answer's tokens, and each turn prints how\n"
            "many it re-fed.\n"
            "\n"
            "options:\n"
            "  --system TEXT          a system message first\n"
            "  --no-think             start with thinking off (/think on|off switches later)\n"
            "  --max-tokens N         at most N tokens per reply (default: until the context is full)\n"
            "  --ctx N                cap on the conversation's tokens (default: the model's context)\n"
            "  --backend NAME         %s (default: the fastest)\n"
            "  --threads N            threads of the parallel backend (default: one per core)\n"
            "sampling (defaults: Qwen3's recommendations; thinking: temperature 0.6, top-p 0.95,\n"
            "top-k 20, min-p 0; no thinking: temperature 0.7, top-p 0.8, top-k 20, min-p 0;\n"
            "a flag sets both modes):\n"
            "  --temperature T        0 is greedy\n"
            "  --greedy               the same as --temperature 0\n"
            "  --top-k K  --top-p P  --min-p P\n"
            "  --presence-penalty X  --frequency-penalty X  (OpenAI's, -2..2)\n"
            "  --repetition-penalty X (1 is off)\n"
            "  --seed N               the same seed and messages give the same replies, on any machine\n"
            "                         (turn k draws with N + k; default: from the clock, shown at start)\n"
            "KV cache:\n",
            backend_names());
    kv_flags_usage(f);
    fprintf(f, "  --no-prefix-cache  no prefix cache: what /reset or a rollback drops is gone (paged only)\n");
    fprintf(f,
            "\n"
            "commands: /reset (forget the conversation), /think on|off, /stats, /verify (compare the\n"
            "cache with a fresh prefill of the template's text), /help, /quit\n"
            "Ctrl-C stops the reply being written; Ctrl-D or /quit leaves.\n");
}

/* ---- the command line ----------------------------------------------------- */

/* Qwen3's recommended sampling (the model card): thinking and not. */
static SamplerParams qwen3_sampling(bool thinking) {
    SamplerParams p = sampler_params_default();
    p.temperature = thinking ? 0.6f : 0.7f;
    p.top_p = thinking ? 0.95f : 0.8f;
    p.top_k = 20;
    p.min_p = 0.0f;
    return p;
}

static int parse_int(const char *flag, const char *v, int lo, int *out, char *err) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > 1 << 30)
        return err_set(err, "%s wants an integer >= %d, got '%s'", flag, lo, v), -1;
    *out = (int)x;
    return 0;
}

static int parse_float(const char *flag, const char *v, float *out, char *err) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end) return err_set(err, "%s wants a number, got '%s'", flag, v), -1;
    *out = x;
    return 0;
}

static int parse_seed(const char *flag, const char *v, uint64_t *out, char *err) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-') return err_set(err, "%s wants an integer >= 0, got '%s'", flag, v), -1;
    *out = x;
    return 0;
}

/* The sampling flags that take a number: each sets the field in both modes. */
static const struct {
    const char *name;
    size_t offset;
} FLOAT_FLAGS[] = {
    {"--temperature", offsetof(SamplerParams, temperature)},
    {"--top-p", offsetof(SamplerParams, top_p)},
    {"--min-p", offsetof(SamplerParams, min_p)},
    {"--presence-penalty", offsetof(SamplerParams, presence_penalty)},
    {"--frequency-penalty", offsetof(SamplerParams, frequency_penalty)},
    {"--repetition-penalty", offsetof(SamplerParams, repetition_penalty)},
};

/* A flag followed by a value v (NULL when the command line ends): 1 taken,
 * 0 not such a flag, -1 with err when v is missing or wrong. */
static int parse_value_flag(ReplOptions *o, const char *flag, const char *v, char *err) {
    static const char *const known[] = {"--system", "--backend", "--max-tokens", "--ctx",
                                        "--threads", "--top-k", "--seed"};
    bool found = false;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) found |= strcmp(flag, known[i]) == 0;
    for (size_t i = 0; i < sizeof FLOAT_FLAGS / sizeof *FLOAT_FLAGS; i++) found |= strcmp(flag, FLOAT_FLAGS[i].name) == 0;
    if (!found) return 0;
    if (!v) return err_set(err, "%s needs a value", flag), -1;
    int rc = 0;
    for (size_t i = 0; i < sizeof FLOAT_FLAGS / sizeof *FLOAT_FLAGS; i++) {
        if (strcmp(flag, FLOAT_FLAGS[i].name) != 0) continue;
        float x = 0.0f;
        rc = parse_float(flag, v, &x, err);
        *(float *)((char *)&o->thinking + FLOAT_FLAGS[i].offset) = x;
        *(float *)((char *)&o->plain + FLOAT_FLAGS[i].offset) = x;
    }
    if (strcmp(flag, "--top-k") == 0) rc = parse_int(flag, v, 0, &o->thinking.top_k, err), o->plain.top_k = o->thinking.top_k;
    if (strcmp(flag, "--seed") == 0) rc = parse_seed(flag, v, &o->thinking.seed, err), o->plain.seed = o->thinking.seed;
    if (strcmp(flag, "--system") == 0) o->system = v;
    if (strcmp(flag, "--backend") == 0) o->backend = v;
    if (strcmp(flag, "--max-tokens") == 0) rc = parse_int(flag, v, 1, &o->max_tokens, err);
    if (strcmp(flag, "--ctx") == 0) rc = parse_int(flag, v, 1, &o->ctx, err);
    if (strcmp(flag, "--threads") == 0) rc = parse_int(flag, v, 1, &o->threads, err);
    return rc == 0 ? 1 : -1;
}

/* 0 to go on, 1 after --help, -1 with err. */
static int parse_args(ReplOptions *o, int argc, char **argv, char *err) {
    memset(o, 0, sizeof *o);
    o->think = true;
    o->thinking = qwen3_sampling(true), o->plain = qwen3_sampling(false);
    o->thinking.seed = o->plain.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = kv_flags_parse(&o->kv, argc, argv, &i, err);
        if (k < 0) return -1;
        if (k > 0) continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        if (strcmp(a, "--no-think") == 0) {
            o->think = false;
        } else if (strcmp(a, "--no-prefix-cache") == 0) {
            o->no_prefix_cache = true;
        } else if (strcmp(a, "--greedy") == 0) {
            o->thinking.temperature = o->plain.temperature = 0.0f;
        } else if (a[0] == '-' && a[1]) {
            int taken = parse_value_flag(o, a, i + 1 < argc ? argv[i + 1] : NULL, err);
            if (taken == 0) return err_set(err, "unknown option '%s' (see --help)", a), -1;
            if (taken < 0) return -1;
            i++;
        } else if (o->model_path) {
            return err_set(err, "unexpected argument '%s': one model file only", a), -1;
        } else {
            o->model_path = a;
        }
    }
    if (!o->model_path) return err_set(err, "no model file given (see --help)"), -1;
    return sampler_params_check(&o->thinking, err);
}

/* ---- Ctrl-C ------------------------------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) { interrupted = 1; }

/* Ctrl-C sets the flag the reply loop checks; without SA_RESTART it also
 * interrupts a read waiting for the next line. */
static void catch_ctrl_c(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* ---- the REPL ---------------------------------------------------------------- */

typedef struct {
    ReplOptions opt;
    Qwen3Model model;
    Tokenizer *tok;
    Backend *be;
    KvPool *pool;
    RadixTree *prefix;         /* the prefix cache: NULL without a pool or with --no-prefix-cache */
    Conversation conv;
    int ctx;
    int turns;                 /* since the start, for the per-turn seed */
    long prompt_fed, answer_fed, generated, rolled_back;
} Repl;

static void write_text(void *ctx, const char *text, size_t n) { chat_print_text(ctx, text, n); }

static const SamplerParams *current_sampling(const Repl *r) {
    return r->conv.enable_thinking ? &r->opt.thinking : &r->opt.plain;
}

/* "" or "s": "1 token", "2 tokens". */
static const char *plural(long n) { return n == 1 ? "" : "s"; }

static void print_turn(const TurnStats *st, int turn) {
    printf("\n[turn %d | prompt: %d token%s prefilled, %d cached | reply: %d token%s, first after %.1f ms, %.1f tok/s"
           " | answer re-fed: %d token%s, %d rolled back | %s]\n",
           turn, st->prompt.fed, plural(st->prompt.fed), st->prompt.kept, st->generated, plural(st->generated),
           st->ttft_ms, st->decode_tps, st->answer.fed, plural(st->answer.fed), st->answer.rolled_back, st->stop);
}

static void run_turn(Repl *r, const char *line) {
    SamplerParams p = *current_sampling(r);
    p.seed += (uint64_t)r->turns;   /* turn k of a run draws with seed + k */
    Sampler *s = sampler_create(&p, r->model.cfg.vocab_size);
    int max_tokens = r->opt.max_tokens > 0 ? r->opt.max_tokens : r->ctx;
    TurnStats st;
    char err[ERR_MAX];
    interrupted = 0;
    ChatPrint out; /* the reasoning dimmed on a terminal */
    chat_print_begin(&out, stdout, isatty(STDOUT_FILENO));
    int rc = conv_turn(&r->conv, line, s, max_tokens, write_text, &out, &interrupted, &st, err);
    chat_print_end(&out);
    sampler_free(s);
    if (rc == -1) {
        fprintf(stderr, "chat-repl: this message is too long for the conversation: %s (/reset starts over)\n", err);
        return;
    }
    r->turns++;
    print_turn(&st, r->turns);
    if (rc != 0) fprintf(stderr, "chat-repl: the conversation is full: %s (/reset starts over)\n", err);
    r->prompt_fed += st.prompt.fed, r->answer_fed += st.answer.fed;
    r->rolled_back += st.answer.rolled_back, r->generated += st.generated;
    fflush(stdout);
}

static void print_stats(const Repl *r) {
    const SamplerParams *p = current_sampling(r);
    printf("turns               %d\n", r->turns);
    printf("messages            %d\n", r->conv.n_msgs);
    printf("cache               %d tokens of %d\n", r->conv.seq.n_tokens, r->ctx);
    printf("prefilled           %ld prompt tokens, %ld answer tokens re-fed (%ld rolled back)\n", r->prompt_fed,
           r->answer_fed, r->rolled_back);
    printf("generated           %ld token%s\n", r->generated, plural(r->generated));
    if (r->pool) {
        int used, total;
        kv_pool_stats(r->pool, &used, &total);
        printf("kv                  %s, %d of %d blocks used\n", r->conv.seq.kv->kind, used, total);
    } else {
        printf("kv                  %s\n", r->conv.seq.kv->kind);
    }
    if (r->prefix) {
        RadixStats p = radix_stats(r->prefix);
        printf("prefix cache        %d blocks in %d nodes (%d only its own); %llu of %llu lookups hit, %llu tokens reused,"
               " %llu blocks evicted\n", p.blocks, p.nodes, p.evictable, (unsigned long long)p.hits,
               (unsigned long long)p.lookups, (unsigned long long)p.cached_tokens, (unsigned long long)p.evicted_blocks);
    }
    printf("thinking            %s\n", r->conv.enable_thinking ? "on" : "off");
    printf("sampling            temperature %g, top-k %d, top-p %g, min-p %g, presence %g, frequency %g, "
           "repetition %g, seed %llu\n",
           p->temperature, p->top_k, p->top_p, p->min_p, p->presence_penalty, p->frequency_penalty,
           p->repetition_penalty, (unsigned long long)p->seed);
    fflush(stdout);
}

/* Runs a /command. Returns false for /quit. */
static bool run_command(Repl *r, const char *line) {
    if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0) return false;
    char err[ERR_MAX];
    if (strcmp(line, "/reset") == 0) {
        SyncStats st;
        if (conv_reset(&r->conv, &st, err) != 0) fprintf(stderr, "chat-repl: %s\n", err);
        printf("[conversation reset: %d token%s rolled back, %d kept]\n", st.rolled_back, plural(st.rolled_back),
               st.kept);
    } else if (strcmp(line, "/verify") == 0) {
        /* a basic cache: no blocks taken from the pool, and the check also crosses cache kinds */
        KvCache *kv = kv_cache_create("basic", &r->model.cfg, NULL, err);
        int ok = kv ? conv_verify(&r->conv, kv, err) : -1;
        if (ok == 1)
            printf("[verified: the cache holds the template's %d tokens, and its logits equal a fresh prefill's "
                   "(basic cache), bit for bit]\n", r->conv.seq.n_tokens);
        else
            printf("[verify failed: %s]\n", err);
    } else if (strcmp(line, "/think on") == 0 || strcmp(line, "/think off") == 0) {
        r->conv.enable_thinking = strcmp(line, "/think on") == 0;
        printf("[thinking %s]\n", r->conv.enable_thinking ? "on" : "off");
    } else if (strcmp(line, "/think") == 0) {
        printf("[thinking is %s: /think on|off]\n", r->conv.enable_thinking ? "on" : "off");
    } else if (strcmp(line, "/stats") == 0) {
        print_stats(r);
    } else if (strcmp(line, "/help") == 0) {
        printf("/reset         forget the conversation (the system prompt stays cached, the rest in the prefix cache)\n"
               "/think on|off  the thinking switch\n"
               "/stats         the conversation's numbers\n"
               "/verify        prefill the template's text from scratch and compare with the cache\n"
               "/quit          leave (or Ctrl-D)\n");
    } else {
        fprintf(stderr, "chat-repl: unknown command '%s' (try /help)\n", line);
    }
    fflush(stdout);
    return true;
}

static void repl_loop(Repl *r) {
    bool tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            if (errno == EINTR && interrupted) {   /* Ctrl-C at the prompt */
                clearerr(stdin);
                interrupted = 0;
                printf("\n(Ctrl-C stops a reply; /quit or Ctrl-D leaves)\n");
                fflush(stdout);
                continue;
            }
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        if (line[0] == '/') {
            if (!run_command(r, line)) break;
        } else {
            run_turn(r, line);
        }
    }
    if (tty) printf("\n");
    free(line);
}

static int repl_open(Repl *r, char *err) {
    if (!(r->be = backend_create(r->opt.backend, r->opt.threads, err))) return -1;
    if (qwen3_load(&r->model, r->opt.model_path, err) != 0) return -1;
    char inner[ERR_MAX];
    if (!(r->tok = tokenizer_load(&r->model.file, inner)))
        return err_set(err, "%s: %s", r->opt.model_path, inner), -1;
    if (tokenizer_vocab_size(r->tok) > r->model.cfg.vocab_size)
        return err_set(err, "%s: the tokenizer has %d tokens but token_embd.weight only %d rows", r->opt.model_path,
                       tokenizer_vocab_size(r->tok), r->model.cfg.vocab_size), -1;
    if (tokenizer_find(r->tok, "<|im_start|>") < 0 || tokenizer_find(r->tok, "<|im_end|>") < 0)
        return err_set(err, "%s: the vocabulary has no <|im_start|>/<|im_end|>: not a chat model", r->opt.model_path), -1;
    r->ctx = r->model.cfg.ctx_len;
    if (r->opt.ctx > 0 && r->opt.ctx < r->ctx) r->ctx = r->opt.ctx;
    if (!(r->pool = kv_flags_make_pool(&r->opt.kv, &r->model.cfg, r->ctx, err)) && err[0]) return -1;
    KvCache *kv = kv_cache_create(r->opt.kv.kind, &r->model.cfg, r->pool, err);
    if (!kv) return -1;
    if (conv_init(&r->conv, &r->model, r->be, kv, r->tok, r->ctx, r->opt.system, err) != 0) return -1;
    r->conv.enable_thinking = r->opt.think;
    if (r->pool && !r->opt.no_prefix_cache) r->conv.prefix = r->prefix = radix_create(r->pool);
    SyncStats st;   /* the system prompt, prefilled once */
    if (conv_sync_history(&r->conv, &st, err) != 0) return -1;
    r->prompt_fed += st.fed;
    if (st.fed) fprintf(stderr, "chat-repl: system prompt: %d token%s prefilled\n", st.fed, plural(st.fed));
    return 0;
}

static void repl_close(Repl *r) {
    if (r->conv.seq.kv) conv_free(&r->conv);
    radix_free(r->prefix);
    kv_pool_free(r->pool);
    tokenizer_free(r->tok);
    qwen3_free(&r->model);
    backend_free(r->be);
}

int main(int argc, char **argv) {
    Repl r;
    memset(&r, 0, sizeof r);
    char err[ERR_MAX] = "";
    int rc = parse_args(&r.opt, argc, argv, err);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc != 0 || repl_open(&r, err) != 0) {
        fprintf(stderr, "chat-repl: %s\n", err);
        repl_close(&r);
        return 1;
    }
    catch_ctrl_c();
    fprintf(stderr, "chat-repl: %s (%d layers, dim %d), context %d, kv %s, %s backend, thinking %s, seed %llu."
                    " /help for commands.\n",
            r.opt.model_path, r.model.cfg.n_layers, r.model.cfg.dim, r.ctx, r.conv.seq.kv->kind, r.be->name,
            r.opt.think ? "on" : "off", (unsigned long long)r.opt.thinking.seed);
    repl_loop(&r);
    repl_close(&r);
    return 0;
}
