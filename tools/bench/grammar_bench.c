/* grammar_bench.c: what constrained sampling costs per token (common/run/grammar.c).
 *
 *   grammar-bench VOCAB.gguf [ROUNDS]
 *
 * Reads a vocabulary, times building its byte trie, then walks a JSON
 * document token by token as a reply would: at each step grammar_mask over
 * the whole vocabulary, then grammar_accept of the document's next token.
 * Prints the per-token cost (median of ROUNDS rounds, interleaved with the
 * unconstrained copy of the logits it replaces), split into steps inside a
 * string and steps between values, and for one step the cost without the
 * trie (every token fed alone) as the yardstick. Times are the thread's CPU
 * time, so that other processes on a shared machine do not count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "grammar.h"
#include "token_trie.h"
#include "tokenizer.h"
#include "util.h"

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"home\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"integer\"}},"
    "\"required\":[\"city\",\"zip\"],\"additionalProperties\":false},"
    "\"bio\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
    "\"required\":[\"name\",\"age\",\"home\",\"bio\",\"tags\"],\"additionalProperties\":false}";

static const char DOC[] =
    "{\"name\": \"Ada Lovelace\", \"age\": 36, \"home\": {\"city\": \"London\", \"zip\": 12345}, "
    "\"bio\": \"She wrote the first program for a machine that did not exist yet, and saw that it could "
    "work on more than numbers: music, pictures, any symbols at all. Her notes on the engine are longer "
    "than the paper they describe.\", \"tags\": [\"mathematics\", \"poetry\", \"engines\"]}";

/* This thread's CPU time in ms. */
static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout, "usage: grammar-bench VOCAB.gguf [ROUNDS]\n"
                "  constrained sampling's cost per token on VOCAB's vocabulary (make bench-grammar)\n");
        return argc < 2 ? 2 : 0;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1) rounds = 1;
    char err[ERR_MAX];
    GgufFile f;
    if (gguf_open(&f, argv[1], err)) return fprintf(stderr, "grammar-bench: %s\n", err), 1;
    Tokenizer *tok = tokenizer_load(&f, err);
    gguf_close(&f);
    if (!tok) return fprintf(stderr, "grammar-bench: %s\n", err), 1;
    double t0 = cpu_ms();
    const TokenTrie *trie = tokenizer_trie(tok);
    double build_ms = cpu_ms() - t0;
    int V = trie->n_vocab;

    JsonValue *schema = json_parse(SCHEMA, strlen(SCHEMA), err);
    Grammar *g = grammar_create(NULL, schema, NULL, err);
    int32_t *ids;
    int n;
    tokenizer_encode(tok, DOC, strlen(DOC), false, &ids, &n, err);
    float *logits = xmalloc(sizeof(float) * (size_t)V), *raw = xmalloc(sizeof(float) * (size_t)V);
    for (int i = 0; i < V; i++) raw[i] = (float)(i % 97) * 0.01f;
    double *mask_ms = xmalloc(sizeof(double) * (size_t)n * (size_t)rounds), *copy_ms = xmalloc(sizeof(double) * (size_t)rounds);
    bool *in_string = xcalloc((size_t)n, sizeof *in_string);
    long allowed_sum = 0;
    for (int r = 0; r < rounds; r++) {
        double c0 = cpu_ms();   /* the unconstrained path: the logits as they are */
        for (int k = 0; k < n; k++) memcpy(logits, raw, sizeof(float) * (size_t)V);
        copy_ms[r] = (cpu_ms() - c0) / n;
        GrammarState *s = grammar_start(g);
        for (int k = 0; k < n; k++) {
            memcpy(logits, raw, sizeof(float) * (size_t)V);
            double a = cpu_ms();
            int allowed = grammar_mask(s, trie, logits);
            mask_ms[(size_t)k * rounds + r] = cpu_ms() - a;
            if (r == 0) allowed_sum += allowed;
            if (logits[ids[k]] != raw[ids[k]]) {
                fprintf(stderr, "grammar-bench: the document's token %d (id %d) was masked\n", k, ids[k]);
                return 1;
            }
            if (r == 0) {   /* a string step: the token's first byte is read inside a string */
                char *prefix = tokenizer_decode(tok, ids, k, false, NULL);
                int q = 0;
                for (const char *p = prefix; *p; p++) q ^= *p == '"' && (p == prefix || p[-1] != '\\');
                in_string[k] = q;
                free(prefix);
            }
            grammar_accept(s, trie, ids[k]);
        }
        if (!grammar_complete(s)) return fprintf(stderr, "grammar-bench: the document did not complete\n"), 1;
        grammar_state_free(s);
    }
    double *per = xmalloc(sizeof(double) * (size_t)n), *str = xmalloc(sizeof(double) * (size_t)n), *out = xmalloc(sizeof(double) * (size_t)n);
    int n_str = 0, n_out = 0;
    double sum = 0, worst = 0;
    for (int k = 0; k < n; k++) {
        per[k] = median(&mask_ms[(size_t)k * rounds], rounds);
        sum += per[k];
        if (per[k] > worst) worst = per[k];
        if (in_string[k]) str[n_str++] = per[k];
        else out[n_out++] = per[k];
    }
    /* the yardstick: every token fed alone at one step between values (after "{") */
    GrammarState *s = grammar_start(g);
    grammar_feed(s, "{", 1);
    double a = cpu_ms();
    int naive = 0;
    for (int id = 0; id < V; id++) {
        GrammarState *t = grammar_start(g);
        grammar_feed(t, "{", 1);
        naive += grammar_accept(t, trie, id);
        grammar_state_free(t);
    }
    double naive_ms = cpu_ms() - a;
    grammar_state_free(s);

    printf("constrained sampling on %s: %d tokens, %d in the trie (%d nodes), built in %.1f ms\n", argv[1], V,
           trie->n_order, trie->n_nodes, build_ms);
    printf("a %d-token JSON document, %d rounds, medians per token (thread CPU time):\n", n, rounds);
    printf("  grammar_mask          %8.3f ms mean, %.3f ms worst, %.0f tokens allowed on average\n", sum / n, worst,
           (double)allowed_sum / n);
    printf("    inside strings      %8.3f ms median (%d steps)\n", n_str ? median(str, n_str) : 0, n_str);
    printf("    between values      %8.3f ms median (%d steps)\n", n_out ? median(out, n_out) : 0, n_out);
    printf("  copying the logits    %8.3f ms (what every step costs anyway)\n", median(copy_ms, rounds));
    printf("  without the trie      %8.3f ms for one step (every token fed alone; %d allowed)\n", naive_ms, naive);
    free(ids), free(logits), free(raw), free(mask_ms), free(copy_ms), free(in_string), free(per), free(str), free(out);
    grammar_free(g);
    json_free(schema);
    tokenizer_free(tok);
    return 0;
}
