/* bench: the benchmark table of `make bench`.
 *
 *   bench [--build DIR] [--models DIR] [--out DIR] [--chapters "II.1 II.2"]
 *         [--types "f32 f16 bf16 q8_0 q4_0 q5_k_m q6_k"] [--backends "simd parallel"]
 *         [--threads N] [--tokens 64] [--recompute-tokens 4] [--prompt-tokens 128] [--runs 2]
 *         [--kv-contexts "256 1024 2048"] [--kv-tokens 16]
 *         [--ab-load "16 8 16 64"] [--ab-server PATH] [--loadgen PATH]
 *
 * For every chapter, weight type and backend it runs the chapter's
 * model-generate on a Qwen3-0.6B-shaped model (made by mkmodel), with a prompt
 * of exactly --prompt-tokens tokens and --tokens new tokens (with the
 * chapter's own cache, its default; a chapter without one recomputes the whole
 * sequence per token, so it gets only --recompute-tokens), and reports
 * prefill tokens/s (prompt tokens / time to first token), decode tokens/s, and
 * decode as a share of the bandwidth limit: read bandwidth (tools/membw, with
 * the backend's thread count) / weight bytes read per token. The weight bytes
 * are computed from the model's tensor table: every matrix of every layer,
 * the output matrix and one embedding row (the file size would add the
 * embedding table, read one row at a time, and the tokenizer).
 * Each measurement is the best of --runs runs (the first may read the model
 * from disk; other programs come and go).
 *
 * Then, when a chapter has a paged cache, the KV table: tools/kv-bench times the
 * decode step of the basic and the paged cache with each of --kv-contexts
 * positions cached (--kv-tokens steps of each a run, --runs + 1 runs, the kinds
 * taking turns step by step), and attention alone, on the first type and the
 * last backend. Then III.7's batched-decode sweep (batched.h) and the A/B of
 * the server with one slot against C slots (ab.h), for every type.
 * Writes bench.md and bench.json to --out and prints the tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ab.h"
#include "backend.h"
#include "batched.h"
#include "command.h"
#include "json.h"
#include "qwen3.h"
#include "tokenizer.h"
#include "util.h"

#define MAX_LIST 16

typedef struct {
    const char *build, *models, *out;
    char *chapters[MAX_LIST], *types[MAX_LIST], *backends[MAX_LIST], *kv_contexts[MAX_LIST];
    int n_chapters, n_types, n_backends, n_kv_contexts;
    int threads, tokens, recompute_tokens, prompt_tokens, runs, kv_tokens;
    const char *batches;           /* the batched sweep's batch sizes ("" for none) */
    int batch_prompt, batch_steps;
    const char *ab_load;           /* the A/B's "N C PROMPT OUTPUT" ("" for none) */
    const char *ab_server, *loadgen;
} Options;

typedef struct {
    char chapter[32], type[16], backend[16];
    int threads, new_tokens, prompt_tokens;
    double weight_mb, prefill_tps, decode_tps, decode_ms, gbps, limit_tps, share;
    double warm_tps; /* chapters without a KV cache: rows / time of their full forwards */
    double best_ms;  /* the fastest decode step */
    bool ok;
} Row;

/* One context of the KV table: decode step ms of each cache kind, and of
 * attention alone over each. */
typedef struct {
    int context;
    double basic_ms, paged_ms; /* medians */
    double kv_mb;              /* keys and values attention reads per step */
    double basic_attn_ms, paged_attn_ms;
    double basic_best_ms, paged_best_ms; /* the fastest steps: what is left when other programs pause */
} KvRow;

/* What the KV table was measured on. */
typedef struct {
    char type[16], backend[16];
    int threads, n;
    double kv_bytes_per_token, gbps;
    KvRow rows[MAX_LIST];
} KvTable;

static int split(const char *s, char **out) { return bench_split(s, out, MAX_LIST); }

/* A prompt that encodes to exactly n tokens: the first k tokens of a long
 * text, decoded back to bytes, for the k that re-encodes to n. */
static int write_prompt(const char *model, int n, const char *path) {
    static const char *para =
        "Once upon a time, a little fox lived at the edge of a quiet forest. Every morning she walked "
        "down to the river to drink and to watch the boats go by. One day a storm came over the hills, "
        "the river rose fast, and the fox helped a family of ducks find a dry place under the old bridge. ";
    char err[ERR_MAX];
    GgufFile g;
    if (gguf_open(&g, model, err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    Tokenizer *tok = tokenizer_load(&g, err);
    if (!tok) {
        fprintf(stderr, "bench: %s: %s\n", model, err);
        gguf_close(&g);
        return -1;
    }
    Buf text = {0};
    for (int i = 0; i < 40; i++) buf_puts(&text, para);
    int32_t *ids = NULL;
    int n_ids = 0, rc = -1;
    tokenizer_encode(tok, text.data, text.len, false, &ids, &n_ids, err);
    for (int k = n; k <= n + 8 && k <= n_ids && rc != 0; k++) {
        char *s = tokenizer_decode(tok, ids, k, false, NULL);
        int32_t *again = NULL;
        int m = 0;
        if (s && tokenizer_encode(tok, s, strlen(s), false, &again, &m, err) == 0 && m == n) {
            FILE *f = fopen(path, "wb");
            if (f && fwrite(s, 1, strlen(s), f) == strlen(s)) rc = 0;
            if (f) fclose(f);
        }
        free(again);
        free(s);
    }
    if (rc != 0) fprintf(stderr, "bench: could not make a prompt of exactly %d tokens\n", n);
    free(ids);
    buf_free(&text);
    tokenizer_free(tok);
    gguf_close(&g);
    return rc;
}

/* True if the chapter's model-generate knows --kv. */
static bool has_kv(const Options *o, const char *chapter) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/%s/model-generate --help 2>&1", o->build, chapter);
    size_t len;
    char *help = bench_run(cmd, &len);
    bool yes = help && strstr(help, "--kv");
    free(help);
    return yes;
}

/* Mean of the decode forwards, in ms; *rows_per_s gets the rows they
 * computed per second (for a full recompute: a warm prefill rate). */
static double decode_ms(const JsonValue *res, double *rows_per_s, double *best) {
    const JsonValue *steps = json_get(res, "steps");
    double sum = 0, rows = 0;
    *best = 0;
    int n = 0;
    for (size_t i = 0; steps && i < steps->n_items; i++) {
        const JsonValue *ph = json_get(&steps->items[i], "phase");
        if (ph && ph->type == JSON_STRING && strcmp(ph->string, "decode") == 0) {
            double ms = bench_num(&steps->items[i], "ms");
            sum += ms;
            rows += bench_num(&steps->items[i], "rows");
            if (*best == 0 || ms < *best) *best = ms;
            n++;
        }
    }
    *rows_per_s = sum > 0 ? rows / (sum / 1000) : 0;
    return n ? sum / n : 0;
}

/* One run; false if it failed. Keeps the best of each figure in r. */
static bool measure_once(Row *r, const char *cmd, bool kv) {
    JsonValue *res = bench_run_json(cmd);
    if (!res) return false;
    const JsonValue *pt = json_get(res, "prompt_tokens");
    r->prompt_tokens = pt ? (int)pt->n_items : 0;
    double ttft = bench_num(res, "ttft_ms"), rows_per_s, best;
    double prefill = ttft > 0 ? r->prompt_tokens / (ttft / 1000) : 0, dms = decode_ms(res, &rows_per_s, &best);
    if (best > 0 && (r->best_ms == 0 || best < r->best_ms)) r->best_ms = best;
    double dtps = bench_num(res, "decode_tokens_per_s");
    if (prefill > r->prefill_tps) r->prefill_tps = prefill;
    if (dtps > r->decode_tps) {
        r->decode_tps = dtps;
        r->decode_ms = dms;
    }
    if (!kv && rows_per_s > r->warm_tps) r->warm_tps = rows_per_s;
    json_free(res);
    return true;
}

static void measure(const Options *o, Row *r, const char *model, const char *prompt, bool kv) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s/%s/model-generate --json --ignore-eos --prompt-file %s --backend %s --threads %d %s %d", o->build,
             r->chapter, prompt, r->backend, r->threads, model, r->new_tokens);
    fprintf(stderr, "bench: %s (best of %d)\n", cmd, o->runs);
    for (int i = 0; i < o->runs; i++)
        if (!measure_once(r, cmd, kv)) {
            fprintf(stderr, "bench: the run failed\n");
            return;
        }
    r->limit_tps = r->gbps * 1e9 / (r->weight_mb * 1e6);
    r->share = r->limit_tps > 0 ? r->decode_tps / r->limit_tps : 0;
    r->ok = true;
}

static double load_before, load_after;

/* What each chapter buys: its decode tokens/s over the first chapter's, same
 * type and backend, measured in this run. */
static void print_ratios(FILE *f, const Row *rows, int n) {
    fprintf(f, "\nDecode speed-up over %s (same type and backend, this run):\n\n", n ? rows[0].chapter : "-");
    fprintf(f, "| type | backend | chapter | decode tok/s | x %s |\n|---|---|---|---|---|\n", n ? rows[0].chapter : "-");
    for (int i = 0; i < n; i++) {
        const Row *base = NULL;
        for (int j = 0; j < n && !base; j++)
            if (strcmp(rows[j].chapter, rows[0].chapter) == 0 && strcmp(rows[j].type, rows[i].type) == 0 &&
                strcmp(rows[j].backend, rows[i].backend) == 0 && rows[j].ok)
                base = &rows[j];
        if (!rows[i].ok || !base || base == &rows[i] || base->decode_tps <= 0) continue;
        fprintf(f, "| %s | %s | %s | %.2f | %.1f |\n", rows[i].type, rows[i].backend, rows[i].chapter,
                rows[i].decode_tps, rows[i].decode_tps / base->decode_tps);
    }
}

static void print_table(FILE *f, const Row *rows, int n, const Options *o, double gb1, double gbn, int nt) {
    fprintf(f, "# Benchmark: Qwen3-0.6B shapes, %d-token prompt\n\n", o->prompt_tokens);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(f, "Load average %.2f before and %.2f after, on %ld cores%s\n", load_before, load_after, cores,
            load_before > 0.5 || load_after > cores + 0.5 ? ": other programs were running, the figures are low" : ".");
    fprintf(f, "Read bandwidth (tools/membw, best of 5): %.1f GB/s with 1 thread, %.1f GB/s with %d threads.\n", gb1, gbn,
            nt);
    fprintf(f, "Every figure is the best of %d runs.\n", o->runs);
    fprintf(f, "Weight MB = bytes read per token, computed from the tensor table (all layer matrices, the output\n"
               "matrix, one embedding row). Limit = bandwidth / weight bytes; share = decode / limit.\n"
               "Prefill = prompt tokens / time to first token: the first forward of a fresh process, which also\n"
               "first touches every page of the mapped weights. Chapters without a KV cache recompute the whole\n"
               "sequence for every token: they run %d new tokens instead of %d, their decode figures are\n"
               "full-sequence forwards, and \"warm prefill\" is the rows per second of those forwards.\n"
               "Best step = the fastest single decode step, and its share of the limit: on a machine where\n"
               "memory speed varies from step to step, what the kernels reach when memory is not in the way.\n\n",
            o->recompute_tokens, o->tokens);
    fprintf(f, "| chapter | type | backend | threads | new tokens | weight MB | prefill tok/s | warm prefill tok/s | "
               "decode tok/s | decode ms/token | limit tok/s | share of limit | best step ms | best step share |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const Row *r = &rows[i];
        if (!r->ok) {
            fprintf(f, "| %s | %s | %s | %d | %d | %.0f | failed | | | | | | | |\n", r->chapter, r->type, r->backend,
                    r->threads, r->new_tokens, r->weight_mb);
            continue;
        }
        char warm[32] = "-";
        if (r->warm_tps > 0) snprintf(warm, sizeof warm, "%.1f", r->warm_tps);
        double best_share = r->best_ms > 0 && r->limit_tps > 0 ? 1000 / r->best_ms / r->limit_tps : 0;
        fprintf(f, "| %s | %s | %s | %d | %d | %.0f | %.1f | %s | %.2f | %.1f | %.1f | %.0f %% | %.1f | %.0f %% |\n",
                r->chapter, r->type, r->backend, r->threads, r->new_tokens, r->weight_mb, r->prefill_tps, warm,
                r->decode_tps, r->decode_ms, r->limit_tps, 100 * r->share, r->best_ms, 100 * best_share);
    }
    print_ratios(f, rows, n);
}

/* ---- the KV table ---------------------------------------------------- */

/* Decode steps kv-bench times of each kind at each context. */
static int kv_steps(const Options *o) {
    return o->kv_tokens * (o->runs + 1);
}

/* Runs kv-bench (built when a chapter has a paged cache) on the first type and
 * the last backend; false if there is no kv-bench or no context to measure. */
static bool measure_kv(const Options *o, KvTable *t, double gb1, double gbn) {
    memset(t, 0, sizeof *t);
    char tool[1024], cmd[4096], contexts[512] = "";
    snprintf(tool, sizeof tool, "%s/tools/kv-bench", o->build);
    if (o->n_kv_contexts == 0 || access(tool, X_OK) != 0) return false;
    for (int i = 0; i < o->n_kv_contexts; i++)
        snprintf(contexts + strlen(contexts), sizeof contexts - strlen(contexts), "%s%s", i ? " " : "",
                 o->kv_contexts[i]);
    snprintf(t->type, sizeof t->type, "%s", o->types[0]);
    snprintf(t->backend, sizeof t->backend, "%s", o->backends[o->n_backends - 1]);
    t->threads = strcmp(t->backend, "parallel") == 0 ? o->threads : 1;
    t->gbps = t->threads == 1 ? gb1 : gbn;
    snprintf(cmd, sizeof cmd,
             "%s --json --model %s/qwen3-0.6b-%s.gguf --backend %s --threads %d --contexts '%s' --steps %d", tool,
             o->models, t->type, t->backend, t->threads, contexts, kv_steps(o));
    fprintf(stderr, "bench: %s\n", cmd);
    JsonValue *res = bench_run_json(cmd);
    if (!res) {
        fprintf(stderr, "bench: kv-bench failed\n");
        return false;
    }
    t->kv_bytes_per_token = bench_num(res, "kv_bytes_per_token");
    const JsonValue *rows = json_get(res, "contexts");
    for (size_t i = 0; rows && i < rows->n_items && t->n < MAX_LIST; i++) {
        const JsonValue *r = &rows->items[i];
        t->rows[t->n++] = (KvRow){(int)bench_num(r, "context"),         bench_num(r, "basic_ms"),
                                  bench_num(r, "paged_ms"),              bench_num(r, "kv_mb"),
                                  bench_num(r, "basic_attention_ms"),    bench_num(r, "paged_attention_ms"),
                                  bench_num(r, "basic_best_ms"),         bench_num(r, "paged_best_ms")};
    }
    json_free(res);
    return t->n > 0;
}

static void print_kv_table(FILE *f, const KvTable *t, const Options *o) {
    fprintf(f, "\n## KV cache: a decode step by context (%s, %s, %d thread%s)\n\n", t->type, t->backend, t->threads,
            t->threads == 1 ? "" : "s");
    fprintf(f, "Per-forward ms of a decode step (tools/kv-bench, in process, the chapter's forward_extend) with N\n"
               "positions already cached: the median of %d steps of each kind, taking turns. Attention reads\n"
               "every cached key and value at each step (%.0f KB a position: K and V of every layer, float32; read\n"
               "bandwidth %.1f GB/s), so a step grows with N by attention's own cost, timed alone in the same runs\n"
               "(one query per layer over the cache's spans: one span for basic, one a 16-position block for paged).\n"
               "The basic cache also copies its whole history into longer arrays at every step; the paged one\n"
               "writes one row into its last block. Climbs are since the first row. In brackets: the fastest step.\n\n",
            kv_steps(o), t->kv_bytes_per_token / 1e3, t->gbps);
    fprintf(f, "| context N | K/V MB | basic ms | paged ms | paged / basic | attention ms, basic | attention ms, paged "
               "| basic climb ms | paged climb ms | attention climb ms, paged |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
    const KvRow *first = &t->rows[0];
    for (int i = 0; i < t->n; i++) {
        const KvRow *r = &t->rows[i];
        fprintf(f, "| %d | %.0f | %.1f (%.1f) | %.1f (%.1f) | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", r->context,
                r->kv_mb, r->basic_ms, r->basic_best_ms, r->paged_ms, r->paged_best_ms,
                r->basic_ms > 0 ? r->paged_ms / r->basic_ms : 0, r->basic_attn_ms,
                r->paged_attn_ms, r->basic_ms - first->basic_ms, r->paged_ms - first->paged_ms,
                r->paged_attn_ms - first->paged_attn_ms);
    }
}

static void write_kv_json(FILE *f, const KvTable *t) {
    fprintf(f, ",\"kv\":{\"type\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"kv_bytes_per_token\":%.0f,"
               "\"membw_gbps\":%.2f,\"contexts\":[",
            t->type, t->backend, t->threads, t->kv_bytes_per_token, t->gbps);
    for (int i = 0; i < t->n; i++) {
        const KvRow *r = &t->rows[i];
        fprintf(f, "%s{\"context\":%d,\"kv_mb\":%.1f,\"basic_ms\":%.2f,\"paged_ms\":%.2f,\"basic_attention_ms\":%.2f,"
                   "\"paged_attention_ms\":%.2f,\"basic_best_ms\":%.2f,\"paged_best_ms\":%.2f}",
                i ? "," : "", r->context, r->kv_mb, r->basic_ms, r->paged_ms, r->basic_attn_ms, r->paged_attn_ms,
                r->basic_best_ms, r->paged_best_ms);
    }
    fprintf(f, "]}");
}

static void write_json(const char *path, const Row *rows, int n, double gb1, double gbn, int nt, const KvTable *kv,
                       const BatchRow *brows, int nb, const Limits *lim, const AbRow *ab, int n_ab) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    /* when and where: the book's figures drawn from this file say both */
    char date[32] = "", cpu[256] = "";
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", localtime(&now));
    bench_cpu_name(cpu, sizeof cpu);
    fprintf(f, "{\"date\":\"%s\",\"cpu\":\"%s\",\"load_before\":%.2f,\"load_after\":%.2f,\"membw_gbps_1\":%.2f,"
               "\"membw_gbps_n\":%.2f,\"membw_threads\":%d,\"rows\":[\n",
            date, cpu, load_before, load_after, gb1, gbn, nt);
    for (int i = 0; i < n; i++) {
        const Row *r = &rows[i];
        fprintf(f,
                "%s{\"chapter\":\"%s\",\"type\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"new_tokens\":%d,"
                "\"prompt_tokens\":%d,\"ok\":%s,\"weight_mb\":%.1f,\"prefill_tokens_per_s\":%.2f,"
                "\"warm_prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.3f,\"decode_ms\":%.2f,"
                "\"membw_gbps\":%.2f,\"limit_tokens_per_s\":%.2f,\"share_of_limit\":%.4f,\"best_step_ms\":%.2f}\n",
                i ? "," : "", r->chapter, r->type, r->backend, r->threads, r->new_tokens, r->prompt_tokens,
                r->ok ? "true" : "false", r->weight_mb, r->prefill_tps, r->warm_tps, r->decode_tps, r->decode_ms, r->gbps,
                r->limit_tps, r->share, r->best_ms);
    }
    fprintf(f, "]");
    if (kv) write_kv_json(f, kv);
    if (nb) {
        fprintf(f, ",\n");
        batched_json(f, brows, nb, lim);
    }
    if (n_ab) {
        fprintf(f, ",\n");
        ab_json(f, ab, n_ab);
    }
    fprintf(f, "}\n");
    fclose(f);
}

/* The usage on f; returns rc (0 for --help, 2 for a bad command line). */
static int usage(FILE *f, int rc) {
    fprintf(f, "usage: bench [--build DIR] [--models DIR] [--out DIR] [--chapters LIST] [--types LIST]\n"
               "             [--backends LIST] [--threads N] [--tokens N] [--recompute-tokens N]\n"
               "             [--prompt-tokens N] [--runs N] [--kv-contexts LIST] [--kv-tokens N]\n"
               "             [--batches \"1 2 4 8\"] [--batch-prompt N] [--batch-steps N]\n"
               "             [--ab-load \"N C PROMPT OUTPUT\"] [--ab-server PATH] [--loadgen PATH]\n"
               "Prefill and decode speed of each chapter, type and backend, with the machine's read\n"
               "bandwidth (tools/membw); then the batched-decode sweep of the last chapter that has a\n"
               "batched-bench, with the peak arithmetic (tools/flops); --batches \"\" skips it. Then the A/B of\n"
               "--ab-server (default: the last chapter's chat-server) with 1 and C slots under one load of\n"
               "tools/loadgen (tools/bench/ab.sh), for every type; --ab-load \"\" skips it.\n"
               "Writes OUT/bench.md and OUT/bench.json. Run by `make bench`.\n");
    return rc;
}

static int parse(Options *o, int argc, char **argv) {
    *o = (Options){.build = "build", .models = "build/bench/models", .out = "build/bench", .threads = 0,
                   .tokens = 64, .recompute_tokens = 4, .prompt_tokens = 128, .runs = 2, .kv_tokens = 16,
                   .batches = "1 2 4 8", .batch_prompt = 128, .batch_steps = 64, .ab_load = "16 8 16 64"};
    o->n_chapters = split("II.1 II.2", o->chapters);
    o->n_types = split("f32 f16 bf16 q8_0 q4_0 q5_k_m q6_k", o->types);
    o->n_backends = split("simd parallel", o->backends);
    o->n_kv_contexts = split("256 1024 2048", o->kv_contexts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        i++;
        if (strcmp(a, "--build") == 0) o->build = v;
        else if (strcmp(a, "--models") == 0) o->models = v;
        else if (strcmp(a, "--out") == 0) o->out = v;
        else if (strcmp(a, "--chapters") == 0) o->n_chapters = split(v, o->chapters);
        else if (strcmp(a, "--types") == 0) o->n_types = split(v, o->types);
        else if (strcmp(a, "--backends") == 0) o->n_backends = split(v, o->backends);
        else if (strcmp(a, "--threads") == 0) o->threads = atoi(v);
        else if (strcmp(a, "--tokens") == 0) o->tokens = atoi(v);
        else if (strcmp(a, "--recompute-tokens") == 0) o->recompute_tokens = atoi(v);
        else if (strcmp(a, "--prompt-tokens") == 0) o->prompt_tokens = atoi(v);
        else if (strcmp(a, "--runs") == 0) o->runs = atoi(v);
        else if (strcmp(a, "--kv-contexts") == 0) o->n_kv_contexts = split(v, o->kv_contexts);
        else if (strcmp(a, "--kv-tokens") == 0) o->kv_tokens = atoi(v);
        else if (strcmp(a, "--batches") == 0) o->batches = v;
        else if (strcmp(a, "--batch-prompt") == 0) o->batch_prompt = atoi(v);
        else if (strcmp(a, "--batch-steps") == 0) o->batch_steps = atoi(v);
        else if (strcmp(a, "--ab-load") == 0) o->ab_load = v;
        else if (strcmp(a, "--ab-server") == 0) o->ab_server = v;
        else if (strcmp(a, "--loadgen") == 0) o->loadgen = v;
        else return -1;
    }
    if (o->threads <= 0) o->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return o->tokens > 1 && o->recompute_tokens > 1 && o->prompt_tokens > 0 && o->runs > 0 && o->kv_tokens > 1 &&
                   o->batch_prompt > 0 && o->batch_steps > 0
               ? 0
               : -1;
}

/* The batched sweep's program: the last chapter of the list that builds a
 * batched-bench (false if none does, or no sweep was asked for). */
static bool batched_program(const Options *o, char *path, size_t size) {
    for (int c = o->n_chapters - 1; c >= 0 && o->batches[strspn(o->batches, " ")]; c--) {
        snprintf(path, size, "%s/%s/batched-bench", o->build, o->chapters[c]);
        if (access(path, X_OK) == 0) return true;
    }
    return false;
}

int main(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return usage(stdout, 0);
    if (parse(&o, argc, argv) != 0) return usage(stderr, 2);
    char cmd[1024], path[1024], prompt[1024];
    load_before = bench_load_average();
    snprintf(cmd, sizeof cmd, "%s/tools/membw --json --threads %d", o.build, o.threads);
    JsonValue *bw = bench_run_json(cmd);
    if (!bw) {
        fprintf(stderr, "bench: %s failed\n", cmd);
        return 1;
    }
    double gb1 = bench_num(bw, "gbps_1"), gbn = bench_num(bw, "gbps_n");
    json_free(bw);
    fprintf(stderr, "bench: read bandwidth %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n", gb1, gbn, o.threads);

    snprintf(prompt, sizeof prompt, "%s/prompt-%d.txt", o.out, o.prompt_tokens);
    snprintf(path, sizeof path, "%s/qwen3-0.6b-%s.gguf", o.models, o.types[0]);
    if (write_prompt(path, o.prompt_tokens, prompt) != 0) return 1;

    Row *rows = xcalloc((size_t)(o.n_chapters * o.n_types * o.n_backends), sizeof *rows);
    int n = 0;
    for (int t = 0; t < o.n_types; t++) {
        snprintf(path, sizeof path, "%s/qwen3-0.6b-%s.gguf", o.models, o.types[t]);
        Qwen3Model m;
        char err[ERR_MAX];
        if (qwen3_load(&m, path, err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            return 1;
        }
        double mb = m.weight_bytes / 1e6;
        qwen3_free(&m);
        for (int c = 0; c < o.n_chapters; c++) {
            bool kv = has_kv(&o, o.chapters[c]);
            for (int b = 0; b < o.n_backends; b++) {
                Row *r = &rows[n++];
                snprintf(r->chapter, sizeof r->chapter, "%s", o.chapters[c]);
                snprintf(r->type, sizeof r->type, "%s", o.types[t]);
                snprintf(r->backend, sizeof r->backend, "%s", o.backends[b]);
                r->threads = strcmp(r->backend, "parallel") == 0 ? o.threads : 1;
                r->new_tokens = kv ? o.tokens : o.recompute_tokens;
                r->weight_mb = mb;
                r->gbps = r->threads == 1 ? gb1 : gbn;
                measure(&o, r, path, prompt, kv);
            }
        }
    }
    KvTable kv;
    bool have_kv = measure_kv(&o, &kv, gb1, gbn);
    char program[1024];
    BatchPlan plan = {program, o.batches, o.batch_prompt, o.batch_steps, o.runs};
    Limits lim = {.threads = o.threads, .gbps_1 = gb1, .gbps_n = gbn};
    BatchRow *brows = NULL;
    int nb = 0;
    if (batched_program(&o, program, sizeof program))
        nb = batched_run(&plan, o.build, o.models, o.types, o.n_types, o.backends, o.n_backends, &lim, &brows);
    char server[1024], loadgen[1024];
    snprintf(server, sizeof server, "%s/%s/chat-server", o.build, o.chapters[o.n_chapters - 1]);
    snprintf(loadgen, sizeof loadgen, "%s/tools/loadgen", o.build);
    AbPlan ab_plan = {"tools/bench/ab.sh", o.ab_server ? o.ab_server : server, o.loadgen ? o.loadgen : loadgen,
                      o.ab_load, o.out, o.threads};
    AbRow *ab = NULL;
    int n_ab = ab_run(&ab_plan, o.models, o.types, o.n_types, &ab);
    load_after = bench_load_average();
    print_table(stdout, rows, n, &o, gb1, gbn, o.threads);
    if (have_kv) print_kv_table(stdout, &kv, &o);
    if (nb) batched_print(stdout, &plan, brows, nb, &lim);
    if (n_ab) ab_print(stdout, &ab_plan, ab, n_ab);
    snprintf(path, sizeof path, "%s/bench.md", o.out);
    FILE *f = fopen(path, "w");
    if (f) {
        print_table(f, rows, n, &o, gb1, gbn, o.threads);
        if (have_kv) print_kv_table(f, &kv, &o);
        if (nb) batched_print(f, &plan, brows, nb, &lim);
        if (n_ab) ab_print(f, &ab_plan, ab, n_ab);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/bench.json", o.out);
    write_json(path, rows, n, gb1, gbn, o.threads, have_kv ? &kv : NULL, brows, nb, &lim, ab, n_ab);
    fprintf(stderr, "bench: wrote %s/bench.md and %s/bench.json\n", o.out, o.out);
    free(ab);
    free(brows);
    free(rows);
    return 0;
}
