/* bench-llamacpp: the engine side by side with llama.cpp, the yardstick, on
 * the same model files and machine, in one run (`make bench-llamacpp`).
 *
 *   bench-llamacpp --llamacpp BINDIR --pp-tg PATH --batched PATH --membw PATH
 *                  [--models DIR] [--out DIR] [--types "f32 f16 bf16 q8_0 q4_0 ..."] [--rounds 3]
 *                  [--reps 2] [--threads 2] [--pp 128] [--tg 64] [--batches "1 2 4 8"]
 *                  [--batch-prompt 128] [--batch-steps 64] [--source NOTE]
 *
 * For every type (model DIR/qwen3-0.6b-TYPE.gguf, made by mkmodel) and every
 * round, ours first and then theirs, each pair back to back so that both see
 * the same load from other programs:
 *   prefill and decode  tools/bench/pp_tg.c (chapter III.7's engine on its
 *                       paged cache, in process) against llama-bench -p PP -n TG -r REPS:
 *                       both warm up first, then REPS runs from an empty
 *                       cache; pp-tg also times the cold first prefill;
 *   batched decode      III.7's batched-bench against llama-batched-bench
 *                       -npp PROMPT -ntg STEPS -npl 1,2,4,8: aggregate tokens/s
 *                       of the decode steps of B sequences at once (S_TG).
 * A round's figure is the best of its runs (as llama-bench's best sample); a
 * table's figure is the median of the rounds', on both sides, and the ratio
 * column gives the ratio of the medians and, in brackets, the range of the
 * ratios of single rounds (the spread: the noise of a shared machine).
 * Then the bandwidth check: tools/membw's read bandwidth against what each
 * engine's decode implies (weight bytes read per token x tokens/s): decode can
 * read no faster than the machine, so an engine "above" the limit means the
 * probe is low. Writes OUT/llamacpp.md and OUT/llamacpp.json and prints the
 * tables; the stderr of llama.cpp's programs goes to OUT/llamacpp.log. A run
 * that fails leaves "-" in the tables and makes the exit status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "command.h"
#include "qwen3.h"
#include "util.h"

#define MAX_LIST 16
#define MAX_ROUNDS 16
#define MAX_FIGURES (3 + MAX_LIST)

typedef struct {
    const char *bin, *pp_tg, *batched, *membw, *models, *out, *source;
    char *types[MAX_LIST];
    int batches[MAX_LIST];
    int n_types, n_batches, rounds, reps, threads, pp, tg, batch_prompt, batch_steps;
} Options;

/* One figure of one type, tokens/s in every round (0: that run failed; the
 * cold prefill has no llama.cpp side). */
typedef struct {
    char name[32];
    double ours[MAX_ROUNDS], theirs[MAX_ROUNDS];
} Figure;

enum { FIG_COLD, FIG_PP, FIG_TG, FIG_BATCHED }; /* FIG_BATCHED + i: batch size i */

typedef struct {
    char type[16];
    double weight_bytes; /* read per decoded token */
    Figure f[MAX_FIGURES];
    int n_f;
} TypeResult;

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: bench-llamacpp --llamacpp BINDIR --pp-tg PATH --batched PATH --membw PATH\n"
               "                      [--models DIR] [--out DIR] [--types LIST] [--rounds N] [--reps N]\n"
               "                      [--threads N] [--pp N] [--tg N] [--batches LIST] [--batch-prompt N]\n"
               "                      [--batch-steps N] [--source NOTE]\n"
               "Prefill, decode and batched decode of this engine and of llama.cpp (llama-bench,\n"
               "llama-batched-bench in BINDIR) on the same models, interleaved; writes OUT/llamacpp.md\n"
               "and OUT/llamacpp.json. Run by `make bench-llamacpp`.\n");
    return rc;
}

static int parse(Options *o, int argc, char **argv) {
    *o = (Options){.models = "build/bench/models", .out = "build/bench", .source = "", .rounds = 3, .reps = 2,
                   .threads = 2, .pp = 128, .tg = 64, .batch_prompt = 128, .batch_steps = 64};
    o->n_types = bench_split("f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m q6_k iq4_xs", o->types, MAX_LIST);
    const char *batches = "1 2 4 8";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        i++;
        if (strcmp(a, "--llamacpp") == 0) o->bin = v;
        else if (strcmp(a, "--pp-tg") == 0) o->pp_tg = v;
        else if (strcmp(a, "--batched") == 0) o->batched = v;
        else if (strcmp(a, "--membw") == 0) o->membw = v;
        else if (strcmp(a, "--models") == 0) o->models = v;
        else if (strcmp(a, "--out") == 0) o->out = v;
        else if (strcmp(a, "--source") == 0) o->source = v;
        else if (strcmp(a, "--types") == 0) o->n_types = bench_split(v, o->types, MAX_LIST);
        else if (strcmp(a, "--batches") == 0) batches = v;
        else if (strcmp(a, "--rounds") == 0) o->rounds = atoi(v);
        else if (strcmp(a, "--reps") == 0) o->reps = atoi(v);
        else if (strcmp(a, "--threads") == 0) o->threads = atoi(v);
        else if (strcmp(a, "--pp") == 0) o->pp = atoi(v);
        else if (strcmp(a, "--tg") == 0) o->tg = atoi(v);
        else if (strcmp(a, "--batch-prompt") == 0) o->batch_prompt = atoi(v);
        else if (strcmp(a, "--batch-steps") == 0) o->batch_steps = atoi(v);
        else return -1;
    }
    char *b[MAX_LIST];
    o->n_batches = bench_split(batches, b, MAX_LIST);
    for (int i = 0; i < o->n_batches; i++)
        if ((o->batches[i] = atoi(b[i])) < 1) return -1;
    return o->bin && o->pp_tg && o->batched && o->membw && o->n_types > 0 && o->rounds > 0 &&
                   o->rounds <= MAX_ROUNDS && o->reps > 0 && o->threads > 0 && o->pp > 0 && o->tg > 1 &&
                   o->batch_prompt > 0 && o->batch_steps > 0
               ? 0
               : -1;
}

/* ---- the runs --------------------------------------------------------- */

static int failures; /* runs that failed: the tables say "-", the exit status 1 */

static void ours_pp_tg(const Options *o, const char *model, TypeResult *t, int r) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s --json --pp %d --tg %d --reps %d --backend parallel --threads %d %s", o->pp_tg,
             o->pp, o->tg, o->reps, o->threads, model);
    fprintf(stderr, "bench-llamacpp: %s\n", cmd);
    JsonValue *v = bench_run_json(cmd);
    if (!v) {
        fprintf(stderr, "bench-llamacpp: the run failed\n");
        failures++;
    }
    t->f[FIG_COLD].ours[r] = bench_num(v, "cold_pp_tokens_per_s");
    t->f[FIG_PP].ours[r] = bench_num(v, "pp_tokens_per_s");
    t->f[FIG_TG].ours[r] = bench_num(v, "tg_tokens_per_s");
    json_free(v);
}

/* Tokens/s of llama-bench's fastest run of a test (from its samples; its
 * mean when they are absent). */
static double llama_bench_best(const JsonValue *test) {
    const JsonValue *ns = json_get(test, "samples_ns");
    double n = bench_num(test, "n_prompt") + bench_num(test, "n_gen"), best = 0;
    for (size_t i = 0; ns && i < ns->n_items; i++)
        if (ns->items[i].type == JSON_NUMBER && ns->items[i].number > 0 && n / (ns->items[i].number / 1e9) > best)
            best = n / (ns->items[i].number / 1e9);
    return best > 0 ? best : bench_num(test, "avg_ts");
}

static void theirs_pp_tg(const Options *o, const char *model, TypeResult *t, int r) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/llama-bench -m %s -p %d -n %d -r %d -t %d -o json 2>>%s/llamacpp.log", o->bin, model,
             o->pp, o->tg, o->reps, o->threads, o->out);
    fprintf(stderr, "bench-llamacpp: %s\n", cmd);
    JsonValue *v = bench_run_json(cmd);
    if (!v || v->type != JSON_ARRAY) {
        fprintf(stderr, "bench-llamacpp: the run failed (see %s/llamacpp.log)\n", o->out);
        failures++;
    }
    for (size_t i = 0; v && v->type == JSON_ARRAY && i < v->n_items; i++) {
        const JsonValue *test = &v->items[i];
        int np = (int)bench_num(test, "n_prompt"), ng = (int)bench_num(test, "n_gen");
        if (np == o->pp && ng == 0) t->f[FIG_PP].theirs[r] = llama_bench_best(test);
        if (np == 0 && ng == o->tg) t->f[FIG_TG].theirs[r] = llama_bench_best(test);
    }
    json_free(v);
}

/* "1,2,4,8" from the batch sizes. */
static void batch_list(const Options *o, char *s, size_t size) {
    s[0] = 0;
    for (int i = 0; i < o->n_batches; i++)
        snprintf(s + strlen(s), size - strlen(s), "%s%d", i ? "," : "", o->batches[i]);
}

static int batch_index(const Options *o, int B) {
    for (int i = 0; i < o->n_batches; i++)
        if (o->batches[i] == B) return i;
    return -1;
}

static void ours_batched(const Options *o, const char *model, TypeResult *t, int r) {
    char cmd[4096], list[256];
    batch_list(o, list, sizeof list);
    snprintf(cmd, sizeof cmd, "%s --json --backend parallel --threads %d --batches %s --prompt %d --steps %d --runs 1 %s",
             o->batched, o->threads, list, o->batch_prompt, o->batch_steps, model);
    fprintf(stderr, "bench-llamacpp: %s\n", cmd);
    JsonValue *v = bench_run_json(cmd);
    const JsonValue *res = v ? json_get(v, "results") : NULL;
    if (!res) {
        fprintf(stderr, "bench-llamacpp: the batched run failed\n");
        failures++;
    }
    for (size_t i = 0; res && i < res->n_items; i++) {
        int b = batch_index(o, (int)bench_num(&res->items[i], "batch"));
        if (b >= 0) t->f[FIG_BATCHED + b].ours[r] = bench_num(&res->items[i], "tokens_per_s");
    }
    json_free(v);
}

/* llama-batched-bench writes one JSON object a line, one per batch size. */
static void theirs_batched(const Options *o, const char *model, TypeResult *t, int r) {
    char cmd[4096], list[256];
    batch_list(o, list, sizeof list);
    int max_b = 1;
    for (int i = 0; i < o->n_batches; i++)
        if (o->batches[i] > max_b) max_b = o->batches[i];
    snprintf(cmd, sizeof cmd,
             "%s/llama-batched-bench -m %s -c %d -npp %d -ntg %d -npl %s -t %d -tb %d --output-format jsonl "
             "2>>%s/llamacpp.log",
             o->bin, model, max_b * (o->batch_prompt + o->batch_steps) + 16, o->batch_prompt, o->batch_steps, list,
             o->threads, o->threads, o->out);
    fprintf(stderr, "bench-llamacpp: %s\n", cmd);
    size_t len;
    char *text = bench_run(cmd, &len), err[ERR_MAX];
    if (!text) {
        fprintf(stderr, "bench-llamacpp: the batched run failed (see %s/llamacpp.log)\n", o->out);
        failures++;
    }
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        JsonValue *v = line[0] == '{' ? json_parse(line, strlen(line), err) : NULL;
        int b = v ? batch_index(o, (int)bench_num(v, "pl")) : -1;
        if (b >= 0) t->f[FIG_BATCHED + b].theirs[r] = bench_num(v, "speed_tg");
        json_free(v);
    }
    free(text);
}

/* ---- the tables ------------------------------------------------------- */

static double best(const double *x, int n) {
    double b = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > b) b = x[i];
    return b;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of the rounds that gave a figure (> 0), 0 if none did. */
static double median(const double *x, int n) {
    double v[MAX_ROUNDS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > 0) v[m++] = x[i];
    if (m == 0) return 0;
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

/* "0.46 (0.45-0.47)": the ratio of the medians and the range over rounds; "-"
 * when a side is missing. */
static void ratio_text(const Figure *f, int rounds, char *s, size_t size) {
    double ours = median(f->ours, rounds), theirs = median(f->theirs, rounds), lo = 0, hi = 0;
    if (ours <= 0 || theirs <= 0) {
        snprintf(s, size, "-");
        return;
    }
    for (int r = 0; r < rounds; r++) {
        if (f->ours[r] <= 0 || f->theirs[r] <= 0) continue;
        double x = f->ours[r] / f->theirs[r];
        if (lo == 0 || x < lo) lo = x;
        if (x > hi) hi = x;
    }
    snprintf(s, size, rounds > 1 ? "%.2f (%.2f-%.2f)" : "%.2f", ours / theirs, lo, hi);
}

static void num_text(double x, char *s, size_t size) {
    if (x > 0) snprintf(s, size, "%.1f", x);
    else snprintf(s, size, "-");
}

typedef struct {
    char date[32], cpu[256];
    long cores;
    double load_before, load_after, gbps_1, gbps_n;
} Machine;

static void machine_init(Machine *m) {
    time_t now = time(NULL);
    strftime(m->date, sizeof m->date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    bench_cpu_name(m->cpu, sizeof m->cpu);
    m->cores = sysconf(_SC_NPROCESSORS_ONLN);
    m->load_before = bench_load_average();
}

static void print_tables(FILE *f, const Options *o, const Machine *m, const TypeResult *res, int n) {
    char a[32], b[32], c[32], d[64], e[32], g[32], h[64];
    fprintf(f, "# This engine and llama.cpp side by side\n\n");
    fprintf(f, "%s, %s, %ld cores; load average %.2f before and %.2f after%s\n", m->date, m->cpu, m->cores,
            m->load_before, m->load_after,
            m->load_before > 0.5 || m->load_after > m->cores + 0.5
                ? ".\nThe load average says other programs may have been running (or had just run): if so, figures\n"
                  "are low, and the engine whose threads cope worse with sharing cores loses more."
                : ".");
    fprintf(f, "llama.cpp %s,\nCPU build (native, Release, its defaults otherwise). Qwen3-0.6B-shaped models made by\n"
               "mkmodel, the same files for both; %d threads on both sides; %d round%s, ours first, then\n"
               "llama.cpp, per type.\n\n",
            o->source, o->threads, o->rounds, o->rounds == 1 ? "" : "s");
    fprintf(f, "Prefill = pp%d (%d-token prompt into an empty cache, after a warm-up run); decode = tg%d (%d\n"
               "pseudo-random tokens one at a time from an empty cache, after a warm-up step): ours\n"
               "tools/bench/pp_tg.c (chapter III.7, paged cache, parallel backend), theirs llama-bench -p %d -n %d -r %d; best of %d runs a round,\n"
               "the median of the rounds in the table.\n"
               "Cold = our very first prefill in a fresh process (it also touches its cache and buffers for the first time).\n"
               "Ratio = ours / llama.cpp of the medians; in brackets the range of single rounds' ratios (the spread).\n\n",
            o->pp, o->pp, o->tg, o->tg, o->pp, o->tg, o->reps, o->reps);
    fprintf(f, "| type | prefill cold, ours | prefill ours | prefill llama.cpp | ratio | decode ours | decode llama.cpp "
               "| ratio |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const TypeResult *t = &res[i];
        num_text(median(t->f[FIG_COLD].ours, o->rounds), a, sizeof a);
        num_text(median(t->f[FIG_PP].ours, o->rounds), b, sizeof b);
        num_text(median(t->f[FIG_PP].theirs, o->rounds), c, sizeof c);
        ratio_text(&t->f[FIG_PP], o->rounds, d, sizeof d);
        num_text(median(t->f[FIG_TG].ours, o->rounds), e, sizeof e);
        num_text(median(t->f[FIG_TG].theirs, o->rounds), g, sizeof g);
        ratio_text(&t->f[FIG_TG], o->rounds, h, sizeof h);
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", t->type, a, b, c, d, e, g, h);
    }
    if (o->n_batches) {
        fprintf(f, "\nBatched decode: B sequences, each with a %d-token prompt, then %d decode steps that run all B\n"
                   "at once; aggregate tokens/s of those steps (S_TG): ours chapter III.7's batched-bench, theirs\n"
                   "llama-batched-bench -npp %d -ntg %d -npl LIST; one run a round, the median of the rounds.\n\n",
                o->batch_prompt, o->batch_steps, o->batch_prompt, o->batch_steps);
        fprintf(f, "| type | B | ours tok/s | llama.cpp tok/s | ratio |\n|---|---|---|---|---|\n");
        for (int i = 0; i < n; i++)
            for (int k = 0; k < o->n_batches; k++) {
                const Figure *fig = &res[i].f[FIG_BATCHED + k];
                num_text(median(fig->ours, o->rounds), a, sizeof a);
                num_text(median(fig->theirs, o->rounds), b, sizeof b);
                ratio_text(fig, o->rounds, d, sizeof d);
                fprintf(f, "| %s | %d | %s | %s | %s |\n", res[i].type, o->batches[k], a, b, d);
            }
    }
    fprintf(f, "\nBandwidth check: decode reads every weight once per token, so weight bytes x decode tokens/s is\n"
               "a read bandwidth the machine delivered. tools/membw measured %.1f GB/s with 1 thread and %.1f GB/s\n"
               "with %d (its \"limit\": the better of a probe before and one after the runs); if an engine's\n"
               "decode implies more, the probe is low and every \"share of the limit\" in make bench flatters.\n\n",
            m->gbps_1, m->gbps_n, o->threads);
    fprintf(f, "| type | weight MB | ours implies GB/s | llama.cpp implies GB/s | membw GB/s | check |\n"
               "|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const TypeResult *t = &res[i];
        double ours = best(t->f[FIG_TG].ours, o->rounds) * t->weight_bytes / 1e9;
        double theirs = best(t->f[FIG_TG].theirs, o->rounds) * t->weight_bytes / 1e9;
        double top = ours > theirs ? ours : theirs;
        fprintf(f, "| %s | %.0f | %.1f | %.1f | %.1f | %s |\n", t->type, t->weight_bytes / 1e6, ours, theirs, m->gbps_n,
                top > m->gbps_n ? "an engine beats the probe: membw is low"
                                : top > 0 ? "below the probe" : "-");
    }
}

static void json_rounds(FILE *f, const char *key, const double *x, int n) {
    fprintf(f, "\"%s\":[", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.3f", i ? "," : "", x[i]);
    fprintf(f, "]");
}

static void write_json(const char *path, const Options *o, const Machine *m, const TypeResult *res, int n) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench-llamacpp: cannot write %s\n", path);
        return;
    }
    fprintf(f, "{\"date\":\"%s\",\"cpu\":\"%s\",\"cores\":%ld,\"load_before\":%.2f,\"load_after\":%.2f,"
               "\"llamacpp\":\"%s\",\"threads\":%d,\"rounds\":%d,\"reps\":%d,\"pp\":%d,\"tg\":%d,\"batch_prompt\":%d,"
               "\"batch_steps\":%d,\"membw_gbps_1\":%.2f,\"membw_gbps_n\":%.2f,\"types\":[\n",
            m->date, m->cpu, m->cores, m->load_before, m->load_after, o->source, o->threads, o->rounds, o->reps, o->pp,
            o->tg, o->batch_prompt, o->batch_steps, m->gbps_1, m->gbps_n);
    for (int i = 0; i < n; i++) {
        const TypeResult *t = &res[i];
        fprintf(f, "%s{\"type\":\"%s\",\"weight_bytes\":%.0f,\"figures\":[", i ? "," : "", t->type, t->weight_bytes);
        for (int k = 0; k < t->n_f; k++) {
            const Figure *fig = &t->f[k];
            fprintf(f, "%s{\"figure\":\"%s\",\"ours\":%.3f,\"theirs\":%.3f,", k ? "," : "", fig->name,
                    median(fig->ours, o->rounds), median(fig->theirs, o->rounds));
            json_rounds(f, "ours_rounds", fig->ours, o->rounds);
            fprintf(f, ",");
            json_rounds(f, "theirs_rounds", fig->theirs, o->rounds);
            fprintf(f, "}");
        }
        fprintf(f, "]}\n");
    }
    fprintf(f, "]}\n");
    fclose(f);
}

/* ---- main ------------------------------------------------------------- */

/* tools/membw, before and after the runs: the better of the two, a ceiling
 * (the machine is shared; a probe run while others read memory is low). */
static int measure_bandwidth(const Options *o, Machine *m) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --json --threads %d", o->membw, o->threads);
    JsonValue *bw = bench_run_json(cmd);
    if (!bw) {
        fprintf(stderr, "bench-llamacpp: %s failed\n", cmd);
        return -1;
    }
    double g1 = bench_num(bw, "gbps_1"), gn = bench_num(bw, "gbps_n");
    json_free(bw);
    fprintf(stderr, "bench-llamacpp: read bandwidth %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n", g1, gn,
            o->threads);
    if (g1 > m->gbps_1) m->gbps_1 = g1;
    if (gn > m->gbps_n) m->gbps_n = gn;
    return 0;
}

static void write_files(const Options *o, const Machine *m, const TypeResult *res, int n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/llamacpp.md", o->out);
    FILE *f = fopen(path, "w");
    if (f) {
        print_tables(f, o, m, res, n);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/llamacpp.json", o->out);
    write_json(path, o, m, res, n);
}

static int type_init(const Options *o, const char *type, TypeResult *t, char *model, size_t size) {
    memset(t, 0, sizeof *t);
    snprintf(t->type, sizeof t->type, "%s", type);
    snprintf(model, size, "%s/qwen3-0.6b-%s.gguf", o->models, type);
    Qwen3Model m;
    char err[ERR_MAX];
    if (qwen3_load(&m, model, err) != 0) {
        fprintf(stderr, "bench-llamacpp: %s\n", err);
        return -1;
    }
    t->weight_bytes = (double)m.weight_bytes;
    qwen3_free(&m);
    snprintf(t->f[FIG_COLD].name, sizeof t->f[0].name, "prefill_cold_pp%d", o->pp);
    snprintf(t->f[FIG_PP].name, sizeof t->f[0].name, "prefill_pp%d", o->pp);
    snprintf(t->f[FIG_TG].name, sizeof t->f[0].name, "decode_tg%d", o->tg);
    for (int b = 0; b < o->n_batches; b++)
        snprintf(t->f[FIG_BATCHED + b].name, sizeof t->f[0].name, "batched_decode_b%d", o->batches[b]);
    t->n_f = FIG_BATCHED + o->n_batches;
    return 0;
}

int main(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return usage(stdout, 0);
    if (parse(&o, argc, argv) != 0) return usage(stderr, 2);
    Machine mach = {0};
    machine_init(&mach);
    if (measure_bandwidth(&o, &mach) != 0) return 1;
    TypeResult *res = xcalloc((size_t)o.n_types, sizeof *res);
    for (int i = 0; i < o.n_types; i++) {
        char model[1024];
        if (type_init(&o, o.types[i], &res[i], model, sizeof model) != 0) return 1;
        for (int r = 0; r < o.rounds; r++) {
            ours_pp_tg(&o, model, &res[i], r);
            theirs_pp_tg(&o, model, &res[i], r);
            if (o.n_batches == 0) continue;
            ours_batched(&o, model, &res[i], r);
            theirs_batched(&o, model, &res[i], r);
        }
        mach.load_after = bench_load_average();
        write_files(&o, &mach, res, i + 1); /* after each type: an interrupted run keeps what it measured */
    }
    if (measure_bandwidth(&o, &mach) == 0) write_files(&o, &mach, res, o.n_types);
    print_tables(stdout, &o, &mach, res, o.n_types);
    fprintf(stderr, "bench-llamacpp: wrote %s/llamacpp.md and %s/llamacpp.json\n", o.out, o.out);
    if (failures) fprintf(stderr, "bench-llamacpp: %d run%s failed: their figures are \"-\"\n", failures,
                          failures == 1 ? "" : "s");
    free(res);
    return failures ? 1 : 0;
}
