/* book-figures: the book's plots, drawn from measurements.
 *
 *   book-figures --out DIR --build BUILD --model M --chapters "II.1 II.2 ..." [--bench bench.json]
 *                [--ab ab.json]
 *
 * For each figure it writes DIR/NAME.dat (the numbers), DIR/NAME.gp (the
 * gnuplot script), DIR/NAME.svg (gnuplot's drawing) and DIR/NAME.md, the
 * snippet the book's `<!-- @figure NAME -->` line stands for: the image and a
 * caption that says what was measured, on which machine (CPU), which model and
 * when. A figure whose data is missing gets a snippet saying how to measure it
 * instead, never an empty plot.
 *
 *   forward-ms   per-forward ms against step, II.1 (full recompute) and II.2
 *                (KV cache): always measured here on M, since make bench keeps
 *                no per-step times; best of two runs at each step
 *   forward-climb  II.1's line of the same runs alone, against the length of
 *                the sequence the forward reads: II.1's lesson
 *   decode-tps   decode tokens/s per chapter, weight type and backend: from
 *                the bench JSON when there is one, else measured here on M
 *   kv-paged     basic against paged KV, per-step ms by context: from the
 *                bench JSON's "kv" table only (make bench)
 *   kv-paged-now the same measured here on M with tools/kv-bench (seconds)
 *   batched-sweep  III.7's aggregate decode tokens/s of seq_decode_batch against
 *                B, per weight type and backend, with the bandwidth and compute
 *                limits: from the bench JSON's "batched" array, else measured
 *                here on M with batched-bench (no limits then)
 *   ab           III.7's A/B: output tokens/s of one streaming load against
 *                chat-server --max-concurrent 1 and C, per weight type: from the
 *                bench JSON's "ab" array, else --ab FILE (make bench-ab), else
 *                measured here on M with tools/bench/ab.sh and tools/loadgen
 * Run from the repository's root (as make does): ab.sh is found there. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "json.h"
#include "qwen3.h"

#define MAX_CHAPTERS 16
#define MAX_STEPS 4096

typedef struct {
    const char *out, *build, *model, *bench, *ab;
    char chapters[MAX_CHAPTERS][32];
    int n_chapters;
    char cpu[256], today[32];
    char bench_cpu[256]; /* the machine make bench ran on: its JSON's "cpu", else this one */
} Options;

/* ---- helpers ---------------------------------------------------------------- */

static char *slurp(FILE *f, size_t *len) {
    size_t n = 0, cap = 1 << 16;
    char *s = malloc(cap);
    for (size_t got; s && (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) s = realloc(s, cap *= 2);
    }
    if (s) s[n] = 0;
    *len = n;
    return s;
}

/* The JSON in f (a file, or a command's output when cmd), or NULL with a line on stderr naming what. */
static JsonValue *parse_from(FILE *f, bool cmd, const char *what) {
    size_t len;
    char *text = slurp(f, &len);
    int st = cmd ? pclose(f) : fclose(f);
    char err[256] = "";
    JsonValue *v = text && st == 0 ? json_parse(text, len, err) : NULL;
    if (!v) fprintf(stderr, "book-figures: %s: %s\n", what, st ? "failed" : err);
    free(text);
    return v;
}

static JsonValue *run_json(const char *cmd) {
    FILE *p = popen(cmd, "r");
    return p ? parse_from(p, true, cmd) : NULL;
}

static JsonValue *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    return f ? parse_from(f, false, path) : NULL;
}

static double num(const JsonValue *o, const char *key) {
    const JsonValue *v = json_get(o, key);
    return v && v->type == JSON_NUMBER ? v->number : 0;
}

static const char *str(const JsonValue *o, const char *key) {
    const JsonValue *v = json_get(o, key);
    return v && v->type == JSON_STRING ? v->string : NULL;
}

/* The CPU's model name, as /proc/cpuinfo gives it. */
static void cpu_name(char *out, size_t n) {
    snprintf(out, n, "an unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(out, n, "%s", colon + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    }
    if (f) fclose(f);
}

/* mkdir -p */
static void make_dirs(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0777);
            *s = '/';
        }
    mkdir(p, 0777);
}

static void date_of(time_t t, char *out, size_t n) { strftime(out, n, "%Y-%m-%d", localtime(&t)); }

static FILE *open_out(const Options *o, const char *name, const char *ext) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", o->out, name, ext);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "book-figures: cannot write %s\n", path);
    return f;
}

/* The snippet for a figure that has no data: why (HTML), and what to run to get
 * it. failed: a measurement that should have worked did not, and make
 * book-check fails on the page (a figure make bench alone measures is only a note). */
static int write_missing(const Options *o, const char *name, bool failed, const char *why) {
    FILE *f = open_out(o, name, "md");
    if (!f) return -1;
    fprintf(f, "<blockquote class=\"figure-missing\" data-figure=\"%s\"%s>\n<p><strong>Figure not measured in "
               "this build.</strong> %s</p>\n</blockquote>\n",
            name, failed ? " data-failed=\"1\"" : "", why);
    fclose(f);
    char svg[1024];
    snprintf(svg, sizeof svg, "%s/%s.svg", o->out, name);
    remove(svg); /* an older drawing would not match its caption */
    return 0;
}

/* Runs gnuplot on DIR/NAME.gp, then writes the snippet: the SVG and its caption. */
static int draw(const Options *o, const char *name, int points, const char *alt, const char *caption) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot %s.gp", o->out, name);
    if (system(cmd) != 0) {
        fprintf(stderr, "book-figures: gnuplot failed on %s/%s.gp\n", o->out, name);
        return -1;
    }
    FILE *f = open_out(o, name, "md");
    if (!f) return -1;
    fprintf(f, "<figure class=\"plot\" data-points=\"%d\">\n<img src=\"figures/%s.svg\" alt=\"%s\">\n"
               "<figcaption>%s</figcaption>\n</figure>\n",
            points, name, alt, caption);
    fclose(f);
    return 0;
}

/* The common head of every gnuplot script: an SVG of the book's size and look;
 * noenhanced, or "q8_0" would print with a subscript 0. */
static void gp_head(FILE *g, const char *name, int height, const char *xlabel, const char *ylabel) {
    fprintf(g, "set terminal svg size 720,%d dynamic noenhanced font 'sans,13' background '#ffffff'\n"
               "set output '%s.svg'\nset xlabel '%s'\nset ylabel '%s'\n"
               "set grid lc rgb '#dddddd'\nset key top left box opaque\nset border 3\nset tics nomirror\n",
            height, name, xlabel, ylabel);
}

/* ---- forward ms against step: II.1 against II.2 ------------------------------ */

/* Per-step ms of one chapter's decode steps on the model (best of runs), into ms[step]. */
static int step_times(const Options *o, const char *chapter, const char *flags, double *ms, int *n_steps,
                      int *prompt) {
    for (int run = 0; run < 2; run++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s/%s/model-generate --json --ignore-eos --backend simd %s '%s' 'Once upon a time' 240",
                 o->build, chapter, flags, o->model);
        fprintf(stderr, "book-figures: %s\n", cmd);
        JsonValue *res = run_json(cmd);
        if (!res) return -1;
        const JsonValue *steps = json_get(res, "steps");
        const JsonValue *pt = json_get(res, "prompt_tokens"); /* the prompt's token ids */
        *prompt = pt && pt->type == JSON_ARRAY ? (int)pt->n_items : 0;
        for (size_t i = 0; steps && i < steps->n_items && i < MAX_STEPS; i++) {
            const JsonValue *s = &steps->items[i];
            int k = (int)num(s, "step");
            double t = num(s, "ms");
            if (k < 0 || k >= MAX_STEPS) continue;
            if (run == 0 || t < ms[k]) ms[k] = t;
            if (k + 1 > *n_steps) *n_steps = k + 1;
        }
        json_free(res);
    }
    return *n_steps > 1 ? 0 : -1;
}

/* II.1 alone: each step's forward reads the whole sequence, so its time
 * climbs with the sequence's length. */
static int fig_forward_climb(const Options *o, const double *ms, int n, int prompt) {
    FILE *d = open_out(o, "forward-climb", "dat"), *g = open_out(o, "forward-climb", "gp");
    if (!d || !g) return -1;
    fprintf(d, "# tokens_read  II.1_ms   (decode steps: the prompt and the tokens generated so far)\n");
    for (int k = 1; k < n; k++) fprintf(d, "%d %.4f\n", prompt + k, ms[k]);
    fclose(d);
    gp_head(g, "forward-climb", 360, "tokens in the sequence the forward reads", "ms per forward");
    fprintf(g, "set yrange [0:*]\nplot 'forward-climb.dat' using 1:2 with lines lw 2 lc rgb '#cf222e' "
               "title 'II.1: one forward over the whole sequence, every step'\n");
    fclose(g);
    char caption[1024];
    snprintf(caption, sizeof caption,
             "Milliseconds of each decode step's forward in II.1, against the number of tokens it reads (the "
             "%d-token prompt and every token generated so far): each step recomputes the whole sequence, so "
             "the time climbs with it. Simd backend, one thread, the faster of two runs at each step. Measured "
             "by <code>make book</code> on %s, model <code>%s</code>, %s.",
             prompt, o->cpu, o->model, o->today);
    return draw(o, "forward-climb", n - 1, "II.1's per-forward milliseconds against the sequence's length", caption);
}

static int fig_forward_ms(const Options *o) {
    static double a[MAX_STEPS], b[MAX_STEPS];
    int na = 0, nb = 0, prompt = 0;
    if (step_times(o, "II.1", "", a, &na, &prompt) != 0 || step_times(o, "II.2", "--kv basic", b, &nb, &prompt) != 0) {
        write_missing(o, "forward-climb", true, "The II.1 run failed: see <code>make book</code>'s output.");
        return write_missing(o, "forward-ms", true, "The II.1 or II.2 run failed: see <code>make book</code>'s output.");
    }
    int rc = fig_forward_climb(o, a, na, prompt);
    FILE *d = open_out(o, "forward-ms", "dat"), *g = open_out(o, "forward-ms", "gp");
    if (!d || !g) return -1;
    fprintf(d, "# step  II.1_ms  II.2_ms   (decode steps; step 0 is the prefill)\n");
    int n = na < nb ? na : nb;
    for (int k = 1; k < n; k++) fprintf(d, "%d %.4f %.4f\n", k, a[k], b[k]);
    fclose(d);
    gp_head(g, "forward-ms", 400, "decode step (tokens generated so far)", "ms per forward");
    fprintf(g, "plot 'forward-ms.dat' using 1:2 with lines lw 2 lc rgb '#cf222e' title 'II.1: full recompute', \\\n"
               "     '' using 1:3 with lines lw 2 lc rgb '#0969da' title 'II.2: KV cache'\n");
    fclose(g);
    char caption[1024];
    snprintf(caption, sizeof caption,
             "Milliseconds per forward at each decode step, II.1 (every step recomputes the whole sequence) "
             "against II.2 (one new row a step), simd backend, one thread, the faster of two runs at each step. "
             "Measured by <code>make book</code> on %s, model <code>%s</code>, %s.",
             o->cpu, o->model, o->today);
    return draw(o, "forward-ms", 2 * (n - 1), "per-forward milliseconds against step, II.1 and II.2", caption) | rc;
}

/* ---- decode tokens/s per chapter and backend ---------------------------------- */

typedef struct {
    char chapter[32], series[64];
    double tps;
} Bar;

static int bars_from_bench(const JsonValue *bench, Bar *bars, int cap) {
    const JsonValue *rows = json_get(bench, "rows");
    int n = 0;
    for (size_t i = 0; rows && i < rows->n_items && n < cap; i++) {
        const JsonValue *r = &rows->items[i];
        const JsonValue *ok = json_get(r, "ok");
        if (!ok || !ok->boolean || !str(r, "chapter") || num(r, "decode_tokens_per_s") <= 0) continue;
        snprintf(bars[n].chapter, sizeof bars[n].chapter, "%s", str(r, "chapter"));
        snprintf(bars[n].series, sizeof bars[n].series, "%s %s", str(r, "type") ? str(r, "type") : "?",
                 str(r, "backend") ? str(r, "backend") : "?");
        bars[n++].tps = num(r, "decode_tokens_per_s");
    }
    return n;
}

static int bars_measured(const Options *o, Bar *bars, int cap) {
    const char *backends[] = {"simd", "parallel"};
    int n = 0;
    for (int c = 0; c < o->n_chapters; c++)
        for (int b = 0; b < 2 && n < cap; b++) {
            char cmd[2048];
            snprintf(cmd, sizeof cmd, "%s/%s/model-generate --json --ignore-eos --backend %s '%s' 'Once upon a time' 48",
                     o->build, o->chapters[c], backends[b], o->model);
            fprintf(stderr, "book-figures: %s\n", cmd);
            JsonValue *res = run_json(cmd);
            if (!res) continue;
            snprintf(bars[n].chapter, sizeof bars[n].chapter, "%s", o->chapters[c]);
            snprintf(bars[n].series, sizeof bars[n].series, "%s", backends[b]);
            bars[n].tps = num(res, "decode_tokens_per_s");
            n += bars[n].tps > 0;
            json_free(res);
        }
    return n;
}

static int fig_decode_tps(const Options *o, const JsonValue *bench, const char *when) {
    Bar bars[256];
    int n = bench ? bars_from_bench(bench, bars, 256) : bars_measured(o, bars, 256);
    if (n == 0) return write_missing(o, "decode-tps", true, "No decode run succeeded: see <code>make book</code>'s output.");
    /* a table: one row per chapter, one column per series */
    char series[16][64], chapters[MAX_CHAPTERS][32];
    int ns = 0, nc = 0;
    for (int i = 0; i < n; i++) {
        int s = 0, c = 0;
        while (s < ns && strcmp(series[s], bars[i].series) != 0) s++;
        if (s == ns && ns < 16) snprintf(series[ns++], sizeof series[0], "%.63s", bars[i].series);
        while (c < nc && strcmp(chapters[c], bars[i].chapter) != 0) c++;
        if (c == nc && nc < MAX_CHAPTERS) snprintf(chapters[nc++], sizeof chapters[0], "%.31s", bars[i].chapter);
    }
    FILE *d = open_out(o, "decode-tps", "dat"), *g = open_out(o, "decode-tps", "gp");
    if (!d || !g) return -1;
    fprintf(d, "chapter");
    for (int s = 0; s < ns; s++) fprintf(d, " \"%s\"", series[s]);
    fputc('\n', d);
    for (int c = 0; c < nc; c++) {
        fprintf(d, "%s", chapters[c]);
        for (int s = 0; s < ns; s++) {
            double v = 0;
            for (int i = 0; i < n; i++)
                if (strcmp(bars[i].chapter, chapters[c]) == 0 && strcmp(bars[i].series, series[s]) == 0) v = bars[i].tps;
            fprintf(d, " %.2f", v);
        }
        fputc('\n', d);
    }
    fclose(d);
    gp_head(g, "decode-tps", 400, "chapter", "decode tokens/s");
    fprintf(g, "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
               "set logscale y\nset key top left autotitle columnheader\n"
               "plot for [i=2:%d] 'decode-tps.dat' using i:xtic(1)\n",
            ns + 1);
    fclose(g);
    char caption[1536];
    if (bench)
        snprintf(caption, sizeof caption,
                 "Decode tokens/s of each chapter by weight type and backend (log scale), from <code>make bench</code> "
                 "(Qwen3-0.6B-shaped models, build/bench/bench.json) on %s, %s. II.1 recomputes the whole sequence "
                 "at every step.",
                 o->bench_cpu, when);
    else
        snprintf(caption, sizeof caption,
                 "Decode tokens/s of each chapter by backend (log scale), 48 new tokens, measured by "
                 "<code>make book</code> on %s, model <code>%s</code>, %s (no <code>make bench</code> results "
                 "in this build: run it for the Qwen3-0.6B-sized figures).",
                 o->cpu, o->model, o->today);
    return draw(o, "decode-tps", n, "decode tokens per second by chapter and backend", caption);
}

/* ---- basic against paged KV by context ---------------------------------------- */

/* The figure `name` from kv-bench's table kv (its "contexts"), with a caption that ends with `source`. */
static int draw_kv_paged(const Options *o, const char *name, const JsonValue *kv, const char *source) {
    const JsonValue *rows = json_get(kv, "contexts");
    FILE *d = open_out(o, name, "dat"), *g = open_out(o, name, "gp");
    if (!d || !g) return -1;
    fprintf(d, "# context basic_ms paged_ms basic_attention_ms paged_attention_ms\n");
    for (size_t i = 0; i < rows->n_items; i++) {
        const JsonValue *r = &rows->items[i];
        fprintf(d, "%g %.3f %.3f %.3f %.3f\n", num(r, "context"), num(r, "basic_ms"), num(r, "paged_ms"),
                num(r, "basic_attention_ms"), num(r, "paged_attention_ms"));
    }
    fclose(d);
    gp_head(g, name, 400, "positions already cached", "ms per decode step");
    fprintf(g, "set yrange [0:*]\nplot '%s.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '#cf222e' title "
               "'basic: step', \\\n"
               "     '' using 1:3 with linespoints lw 2 pt 5 lc rgb '#0969da' title 'paged: step', \\\n"
               "     '' using 1:4 with linespoints dt 2 lc rgb '#cf222e' title 'basic: attention alone', \\\n"
               "     '' using 1:5 with linespoints dt 2 lc rgb '#0969da' title 'paged: attention alone'\n", name);
    fclose(g);
    char caption[1536];
    snprintf(caption, sizeof caption,
             "A decode step with N positions already cached, basic cache against paged (median of the steps "
             "tools/kv-bench times), and attention's own share; %s, %s backend, %d thread(s). %s",
             str(kv, "type") ? str(kv, "type") : "the default model", str(kv, "backend") ? str(kv, "backend") : "?",
             (int)num(kv, "threads"), source);
    return draw(o, name, 4 * (int)rows->n_items, "milliseconds per decode step by context, basic and paged", caption);
}

/* make bench's table, on its Qwen3-0.6B-shaped model. */
static int fig_kv_paged(const Options *o, const JsonValue *bench, const char *when) {
    const JsonValue *kv = bench ? json_get(bench, "kv") : NULL, *rows = kv ? json_get(kv, "contexts") : NULL;
    if (!rows || rows->n_items == 0)
        return write_missing(o, "kv-paged", false,
                             "The same on a Qwen3-0.6B-sized model comes from <code>make bench</code> (its "
                             "basic-against-paged KV table), which this build has not run.");
    char source[512];
    snprintf(source, sizeof source, "From <code>make bench</code> on %s, %s.", o->bench_cpu, when);
    return draw_kv_paged(o, "kv-paged", kv, source);
}

/* Measured now on the default model: tools/kv-bench takes seconds there. */
static int fig_kv_paged_now(const Options *o) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/tools/kv-bench --model '%s' --contexts '128 256 512 1024 2048' --steps 32 "
                              "--backend simd --threads 1 --json", o->build, o->model);
    fprintf(stderr, "book-figures: %s\n", cmd);
    JsonValue *kv = run_json(cmd);
    const JsonValue *rows = kv ? json_get(kv, "contexts") : NULL;
    int rc;
    if (!rows || rows->n_items == 0) {
        rc = write_missing(o, "kv-paged-now", true, "The kv-bench run failed: see <code>make book</code>'s output.");
    } else {
        char source[512];
        snprintf(source, sizeof source, "Measured by <code>make book</code> on %s, model <code>%s</code>, %s.",
                 o->cpu, o->model, o->today);
        rc = draw_kv_paged(o, "kv-paged-now", kv, source);
    }
    json_free(kv);
    return rc;
}

/* ---- III.7: batched decode against B ------------------------------------------ */

/* Line colours of the series, in order. */
static const char *const COLORS[] = {"#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#57606a", "#bf3989"};
#define N_COLORS (int)(sizeof COLORS / sizeof COLORS[0])
#define MAX_SERIES 16
#define MAX_POINTS 256

typedef struct {
    char series[96]; /* "q8_0 parallel, 2 threads" */
    char type[32], backend[32];
    int batch;
    double tps, bw_limit, compute_limit; /* aggregate tokens/s; a limit of 0: not known */
} SweepPoint;

/* The program in the build of the last chapter that has it, into path; false when none does. */
static bool chapter_program(const Options *o, const char *program, char *path, size_t n) {
    for (int c = o->n_chapters - 1; c >= 0; c--) {
        snprintf(path, n, "%s/%s/%s", o->build, o->chapters[c], program);
        if (access(path, X_OK) == 0) return true;
    }
    fprintf(stderr, "book-figures: no chapter has %s built in %s\n", program, o->build);
    return false;
}

/* The weight type of model (that of its first layer's wq, as make bench names types: "q8_0"). */
static void model_type(const char *model, char *out, size_t n) {
    Qwen3Model m;
    char err[ERR_MAX];
    snprintf(out, n, "?");
    if (qwen3_load(&m, model, err) != 0) return;
    const char *name = dtype_name(m.layers[0].wq.type);
    if (name) snprintf(out, n, "%s", name);
    for (char *c = out; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    qwen3_free(&m);
}

static void sweep_name(SweepPoint *p, const char *type, const char *backend, int threads) {
    snprintf(p->type, sizeof p->type, "%s", type ? type : "?");
    snprintf(p->backend, sizeof p->backend, "%s", backend ? backend : "?");
    snprintf(p->series, sizeof p->series, "%s %s, %d thread%s", p->type, p->backend, threads, threads == 1 ? "" : "s");
}

/* The index of name in list[*n], added when new (the last index when the list is full). */
static int index_of(char list[][32], int *n, int cap, const char *name) {
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i], name) == 0) return i;
    if (*n == cap) return cap - 1;
    snprintf(list[*n], 32, "%s", name);
    return (*n)++;
}

static int sweep_from_bench(const JsonValue *bench, SweepPoint *pts, int cap) {
    const JsonValue *rows = json_get(bench, "batched");
    int n = 0;
    for (size_t i = 0; rows && rows->type == JSON_ARRAY && i < rows->n_items && n < cap; i++) {
        const JsonValue *r = &rows->items[i], *ok = json_get(r, "ok");
        if ((ok && !ok->boolean) || num(r, "batch") < 1 || num(r, "decode_tokens_per_s") <= 0) continue;
        sweep_name(&pts[n], str(r, "type"), str(r, "backend"), (int)num(r, "threads"));
        pts[n].batch = (int)num(r, "batch");
        pts[n].tps = num(r, "decode_tokens_per_s");
        pts[n].bw_limit = num(r, "bandwidth_limit_tokens_per_s");
        pts[n++].compute_limit = num(r, "compute_limit_tokens_per_s");
    }
    return n;
}

/* batched-bench on the model: short prompts, the best of three runs, per backend. */
static int sweep_measured(const Options *o, SweepPoint *pts, int cap) {
    char prog[1024], type[32];
    if (!chapter_program(o, "batched-bench", prog, sizeof prog)) return 0;
    model_type(o->model, type, sizeof type);
    const char *backends[] = {"simd", "parallel"};
    int n = 0;
    for (int b = 0; b < 2; b++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s --json --backend %s --batches 1,2,4,8 --prompt 32 --steps 64 --runs 3 '%s'", prog,
                 backends[b], o->model);
        fprintf(stderr, "book-figures: %s\n", cmd);
        JsonValue *res = run_json(cmd);
        const JsonValue *rows = res ? json_get(res, "results") : NULL;
        for (size_t i = 0; rows && rows->type == JSON_ARRAY && i < rows->n_items && n < cap; i++) {
            const JsonValue *r = &rows->items[i];
            if (num(r, "batch") < 1 || num(r, "tokens_per_s") <= 0) continue;
            sweep_name(&pts[n], type, backends[b], (int)num(res, "threads"));
            pts[n].batch = (int)num(r, "batch");
            pts[n].tps = num(r, "tokens_per_s");
            pts[n].bw_limit = pts[n].compute_limit = 0;
            n++;
        }
        json_free(res);
    }
    return n;
}

/* The series of the points in order of first appearance, each as its first
 * point; returns how many. */
static int sweep_series(const SweepPoint *pts, int n, const SweepPoint **series) {
    int ns = 0;
    for (int i = 0; i < n; i++) {
        int s = 0;
        while (s < ns && strcmp(series[s]->series, pts[i].series) != 0) s++;
        if (s == ns && ns < MAX_SERIES) series[ns++] = &pts[i];
    }
    return ns;
}

static int fig_batched_sweep(const Options *o, const JsonValue *bench, const char *when) {
    static SweepPoint pts[MAX_POINTS];
    int n = bench ? sweep_from_bench(bench, pts, MAX_POINTS) : 0;
    bool from_bench = n > 0;
    if (!from_bench) n = sweep_measured(o, pts, MAX_POINTS);
    if (n == 0)
        return write_missing(o, "batched-sweep", true, "The batched-bench runs failed: see <code>make book</code>'s output.");
    const SweepPoint *series[MAX_SERIES];
    int ns = sweep_series(pts, n, series), max_b = 1;
    bool limits = false, present[257] = {false};
    double lo = 1e30, hi = 0; /* the y range, with room so that no point sits on the border */
    FILE *d = open_out(o, "batched-sweep", "dat"), *g = open_out(o, "batched-sweep", "gp");
    if (!d || !g) return -1;
    /* one block per series (gnuplot's index), sorted by B */
    for (int s = 0; s < ns; s++) {
        fprintf(d, "# %s: B tokens_per_s bandwidth_limit compute_limit (0: not known)\n", series[s]->series);
        for (int b = 1; b <= 256; b++)
            for (int i = 0; i < n; i++)
                if (pts[i].batch == b && strcmp(pts[i].series, series[s]->series) == 0) {
                    fprintf(d, "%d %.3f %.2f %.2f\n", b, pts[i].tps, pts[i].bw_limit, pts[i].compute_limit);
                    limits |= pts[i].bw_limit > 0 || pts[i].compute_limit > 0;
                    double ys[3] = {pts[i].tps, pts[i].bw_limit, pts[i].compute_limit};
                    for (int k = 0; k < 3; k++)
                        if (ys[k] > 0) {
                            lo = ys[k] < lo ? ys[k] : lo;
                            hi = ys[k] > hi ? ys[k] : hi;
                        }
                    present[b] = true;
                    if (b > max_b) max_b = b;
                }
        fprintf(d, "\n\n");
    }
    fclose(d);
    /* the key in two columns in the bottom margin, below the x label: placed in
     * pixels, since a browser's fonts are larger than gnuplot's estimate of them */
    int rows = (ns + (limits ? 2 : 0) + 1) / 2, height = 400 + 22 * rows;
    gp_head(g, "batched-sweep", height, "B (sequences decoded in one step)", "aggregate decode tokens/s");
    fprintf(g, "set logscale xy 2\nset xrange [0.8:%g]\nset yrange [%g:%g]\nset xtics (", max_b * 1.25, lo / 1.4, hi * 1.4);
    for (int b = 1, first = 1; b <= 256; b++)
        if (present[b]) {
            fprintf(g, "%s%d", first ? "" : ", ", b);
            first = 0;
        }
    fprintf(g, ")\nset format y '%%g'\nset bmargin at screen %.3f\n"
               "set key at screen 0.5, screen 0.015 center bottom box opaque maxrows %d width 2\n",
            (75.0 + 22 * rows) / height, rows);
    fprintf(g, "lim(x) = x > 0 ? x : NaN\nplot ");
    /* a colour per weight type, a point shape per backend (hollow on the limits) */
    char types[N_COLORS][32], backends[4][32];
    int nt = 0, nb = 0;
    const int shapes[4] = {7, 5, 9, 13};
    for (int s = 0; s < ns; s++) {
        const char *c = COLORS[index_of(types, &nt, N_COLORS, series[s]->type)];
        int pt = shapes[index_of(backends, &nb, 4, series[s]->backend)];
        fprintf(g, "%s'batched-sweep.dat' index %d using 1:2 with linespoints lw 2 pt %d ps 1.2 lc rgb '%s' title '%s'",
                s ? ", \\\n     " : "", s, pt, c, series[s]->series);
        if (limits)
            fprintf(g, ", \\\n     '' index %d using 1:(lim($3)) with linespoints dt 2 lw 1.5 pt %d ps 0.8 lc rgb '%s' notitle"
                       ", \\\n     '' index %d using 1:(lim($4)) with linespoints dt 3 lw 1.5 pt %d ps 0.8 lc rgb '%s' notitle",
                    s, pt - 1, c, s, pt - 1, c);
    }
    if (limits)
        fprintf(g, ", \\\n     NaN with lines dt 2 lw 1.5 lc rgb '#57606a' title 'bandwidth limit'"
                   ", \\\n     NaN with lines dt 3 lw 1.5 lc rgb '#57606a' title 'compute limit'");
    fprintf(g, "\n");
    fclose(g);
    char caption[1536];
    if (from_bench)
        snprintf(caption, sizeof caption,
                 "Aggregate decode tokens/s of <code>seq_decode_batch</code> with B sequences decoding in one step "
                 "(batched-bench), by weight type and backend (log scales); dashed, the bandwidth limit "
                 "(B &times; read bandwidth / weight bytes), dotted, the compute limit (peak multiply-adds over "
                 "one row's). From <code>make bench</code> (Qwen3-0.6B-shaped models, build/bench/bench.json) on "
                 "%s, %s.",
                 o->bench_cpu, when);
    else
        snprintf(caption, sizeof caption,
                 "Aggregate decode tokens/s of <code>seq_decode_batch</code> with B sequences decoding in one step "
                 "(batched-bench, 32-token prompts, 64 steps, the best of three runs), by backend (log scales). "
                 "Measured by <code>make book</code> on %s, model <code>%s</code>, %s; weights this small stay in "
                 "the CPU's caches, so B buys little (no <code>make bench</code> results in this build: its "
                 "Qwen3-0.6B-sized sweep adds the bandwidth and compute limits).",
                 o->cpu, o->model, o->today);
    return draw(o, "batched-sweep", n, "aggregate decode tokens per second against the batch size B", caption);
}

/* ---- III.7: the server's A/B ---------------------------------------------------- */

typedef struct {
    char type[32];
    int requests, concurrency, prompt, output;
    double tps_1, tps_n, ratio;
    double ttft_1, ttft_n, itl_1, itl_n; /* medians in ms; 0: not known */
} AbRow;

/* A number that make bench-ab may write as a string ("1.56"). */
static double num_or_string(const JsonValue *o, const char *key) {
    const char *s = str(o, key);
    return s ? atof(s) : num(o, key);
}

/* One A/B from its JSON object; false when it has no throughput to show. */
static bool ab_row(const JsonValue *v, const char *type, AbRow *r) {
    memset(r, 0, sizeof *r);
    if (!v || v->type != JSON_OBJECT) return false;
    snprintf(r->type, sizeof r->type, "%s", str(v, "type") ? str(v, "type") : type);
    r->requests = (int)num(v, "requests");
    r->concurrency = (int)num(v, "concurrency");
    r->prompt = (int)num(v, "prompt_tokens");
    r->output = (int)num(v, "output_tokens");
    r->tps_1 = num(v, "tps_1");
    r->tps_n = num(v, "tps_n");
    r->ratio = num_or_string(v, "ratio");
    if (r->ratio <= 0 && r->tps_1 > 0) r->ratio = r->tps_n / r->tps_1;
    r->ttft_1 = num(v, "ttft_p50_ms_1");
    r->ttft_n = num(v, "ttft_p50_ms_n");
    r->itl_1 = num(v, "itl_p50_ms_1");
    r->itl_n = num(v, "itl_p50_ms_n");
    return r->tps_1 > 0 && r->tps_n > 0;
}

static int ab_from_bench(const JsonValue *bench, AbRow *rows, int cap) {
    const JsonValue *ab = json_get(bench, "ab");
    int n = 0;
    for (size_t i = 0; ab && ab->type == JSON_ARRAY && i < ab->n_items && n < cap; i++)
        n += ab_row(&ab->items[i], "?", &rows[n]);
    return n;
}

/* The median of a loadgen report's stats object (its "ttft_ms" or "itl_ms"), or 0. */
static double loadgen_p50(const char *path, const char *key) {
    JsonValue *v = read_json(path);
    double x = v ? num(json_get(v, key), "p50") : 0;
    json_free(v);
    return x;
}

/* The medians from each run's own report beside ab.json in dir (ab.sh's
 * ab-1.json and ab-C.json), when ab.json does not carry them. */
static void ab_medians(const char *dir, AbRow *row) {
    const char *keys[] = {"ttft_ms", "itl_ms"};
    double *vals[2][2] = {{&row->ttft_1, &row->ttft_n}, {&row->itl_1, &row->itl_n}};
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 2; s++)
            if (*vals[k][s] <= 0) {
                char path[1200];
                snprintf(path, sizeof path, "%s/ab-%d.json", dir, s ? row->concurrency : 1);
                *vals[k][s] = loadgen_p50(path, keys[k]);
            }
}

/* tools/bench/ab.sh on the model: a small load, both servers one after the other. */
static int ab_measured(const Options *o, AbRow *row) {
    char server[1024], dir[1024], cmd[4096], path[1200], type[32];
    if (!chapter_program(o, "chat-server", server, sizeof server)) return 0;
    snprintf(dir, sizeof dir, "%s/ab-run", o->out);
    snprintf(cmd, sizeof cmd, "tools/bench/ab.sh '%s' '%s/tools/loadgen' '%s' '%s' 16 8 16 16 >&2", server, o->build,
             o->model, dir);
    fprintf(stderr, "book-figures: %s\n", cmd);
    if (system(cmd) != 0) return 0;
    snprintf(path, sizeof path, "%s/ab.json", dir);
    JsonValue *v = read_json(path);
    model_type(o->model, type, sizeof type);
    bool ok = ab_row(v, type, row);
    json_free(v);
    snprintf(row->type, sizeof row->type, "%s", type); /* ab.sh names it from the file's name: "default" */
    if (ok) ab_medians(dir, row);
    return ok;
}

/* A time in ms with the digits that matter: "0.0024", "1.3", "65". */
static void fmt_ms(char *out, size_t n, double ms) {
    snprintf(out, n, ms < 1 ? "%.2g" : ms < 10 ? "%.1f" : "%.0f", ms);
}

/* "; median time to first token 65 → 59 ms" for the caption, or nothing when
 * not known. The gap between tokens only from a model of real size: on the
 * default model a token takes well under a millisecond and the client reads
 * several at once, so that its median gap says nothing. */
static void ab_latencies(char *out, size_t n, const AbRow *r) {
    char a[32], b[32], c[32], d[32];
    fmt_ms(a, sizeof a, r->ttft_1), fmt_ms(b, sizeof b, r->ttft_n), fmt_ms(c, sizeof c, r->itl_1), fmt_ms(d, sizeof d, r->itl_n);
    int k = 0;
    out[0] = 0;
    if (r->ttft_1 > 0 && r->ttft_n > 0) k = snprintf(out, n, "; median time to first token %s &rarr; %s ms", a, b);
    if (r->itl_1 > 0 && r->itl_n > 0 && k >= 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, "; median gap between tokens %s &rarr; %s ms", c, d);
}

static int fig_ab(const Options *o, const JsonValue *bench, const char *when) {
    AbRow rows[MAX_SERIES];
    int n = bench ? ab_from_bench(bench, rows, MAX_SERIES) : 0;
    char machine[256], date[32], source[1100]; /* source: what measured it, on which model */
    snprintf(machine, sizeof machine, "%s", o->bench_cpu);
    snprintf(date, sizeof date, "%s", when);
    snprintf(source, sizeof source, "From <code>make bench</code> (Qwen3-0.6B-shaped models)");
    struct stat st;
    JsonValue *file = NULL;
    if (n == 0 && o->ab && stat(o->ab, &st) == 0 && (file = read_json(o->ab)) != NULL) {
        /* make bench-ab's one A/B, on the machine it ran on: this one */
        n = ab_row(file, "?", &rows[0]);
        if (str(file, "model") && !str(file, "type")) model_type(str(file, "model"), rows[0].type, sizeof rows[0].type);
        char dir[1024];
        snprintf(dir, sizeof dir, "%.*s", strrchr(o->ab, '/') ? (int)(strrchr(o->ab, '/') - o->ab) : 1,
                 strrchr(o->ab, '/') ? o->ab : ".");
        if (n) ab_medians(dir, &rows[0]);
        snprintf(machine, sizeof machine, "%s", o->cpu);
        date_of(st.st_mtime, date, sizeof date);
        snprintf(source, sizeof source, "From <code>make bench-ab</code> (model <code>%s</code>)",
                 str(file, "model") ? str(file, "model") : o->ab);
        json_free(file);
    }
    bool measured = n == 0;
    if (measured) {
        n = ab_measured(o, &rows[0]);
        snprintf(machine, sizeof machine, "%s", o->cpu);
        snprintf(date, sizeof date, "%s", o->today);
        snprintf(source, sizeof source, "Measured by <code>make book</code> (model <code>%s</code>)", o->model);
    }
    if (n == 0)
        return write_missing(o, "ab", true, "The A/B run (tools/bench/ab.sh) failed: see <code>make book</code>'s output.");
    FILE *d = open_out(o, "ab", "dat"), *g = open_out(o, "ab", "gp");
    if (!d || !g) return -1;
    fprintf(d, "type \"--max-concurrent 1\" \"--max-concurrent %d\" ratio\n", rows[0].concurrency);
    for (int i = 0; i < n; i++)
        fprintf(d, "%s %.2f %.2f %.2fx\n", rows[i].type, rows[i].tps_1, rows[i].tps_n, rows[i].ratio);
    fclose(d);
    gp_head(g, "ab", 400, "weight type, and the ratio of the two", "output tokens/s, all requests");
    fprintf(g, "set bmargin 6\nset xlabel offset 0,-1.2\n" /* room for the two-line labels */
               "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
               "set yrange [0:*]\nset key above autotitle columnheader\n"
               "plot 'ab.dat' using 2:xtic(stringcolumn(1).\"\\n\".stringcolumn(4)) lc rgb '#cf222e', "
               "'' using 3 lc rgb '#0969da'\n");
    fclose(g);
    char caption[4096], lat[256];
    int k = snprintf(caption, sizeof caption,
                     "Output tokens/s of the same streaming load (%d requests, %d at a time, %d prompt and %d output "
                     "tokens each, from tools/loadgen) against III.7's <code>chat-server &#45;&#45;max-concurrent 1</code> "
                     "and <code>&#45;&#45;max-concurrent %d</code>, one after the other",
                     rows[0].requests, rows[0].concurrency, rows[0].prompt, rows[0].output, rows[0].concurrency);
    for (int i = 0; i < n && k >= 0 && (size_t)k < sizeof caption; i++) {
        if (measured) rows[i].itl_1 = rows[i].itl_n = 0; /* see ab_latencies */
        ab_latencies(lat, sizeof lat, &rows[i]);
        k += snprintf(caption + k, sizeof caption - (size_t)k, "%s %s: %.1f &rarr; %.1f tokens/s, %.2fx%s",
                      i ? "." : ";", rows[i].type, rows[i].tps_1, rows[i].tps_n, rows[i].ratio, lat);
    }
    if (k >= 0 && (size_t)k < sizeof caption)
        snprintf(caption + k, sizeof caption - (size_t)k, ". %s on %s, %s%s.", source, machine, date,
                 measured ? "; on weights this small a step waits for arithmetic and bookkeeping, not for memory, "
                            "so eight slots need not beat one (no <code>make bench</code> results in this build: "
                            "<code>make bench-ab</code> measures it on a Qwen3-0.6B-sized model)"
                          : "");
    return draw(o, "ab", 2 * n, "output tokens per second with one slot and with several", caption);
}

/* ---- main --------------------------------------------------------------------- */

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: book-figures --out DIR --build BUILD --model M --chapters LIST [--bench bench.json]\n"
               "                    [--ab ab.json]\n"
               "Measures (or reads from make bench's JSON) and draws the book's figures with gnuplot:\n"
               "DIR/NAME.svg and DIR/NAME.md, the snippet each <!-- @figure NAME --> line of the book stands for.\n"
               "Run by `make book`.\n");
    return rc;
}

int main(int argc, char **argv) {
    Options o = {0};
    const char *chapters = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout, 0);
        if (!v) return usage(stderr, 2);
        i++;
        if (strcmp(a, "--out") == 0) o.out = v;
        else if (strcmp(a, "--build") == 0) o.build = v;
        else if (strcmp(a, "--model") == 0) o.model = v;
        else if (strcmp(a, "--bench") == 0) o.bench = v;
        else if (strcmp(a, "--ab") == 0) o.ab = v;
        else if (strcmp(a, "--chapters") == 0) chapters = v;
        else return usage(stderr, 2);
    }
    if (!o.out || !o.build || !o.model || !chapters) return usage(stderr, 2);
    for (const char *p = chapters; *p && o.n_chapters < MAX_CHAPTERS;) {
        size_t n = strcspn(p, " ");
        if (n > 0 && n < 32) snprintf(o.chapters[o.n_chapters++], 32, "%.*s", (int)n, p);
        p += n + (p[n] == ' ');
    }
    cpu_name(o.cpu, sizeof o.cpu);
    date_of(time(NULL), o.today, sizeof o.today);
    make_dirs(o.out);

    /* make bench's results: when, from the file's own "date" or else its time */
    JsonValue *bench = NULL;
    char when[64] = "";
    struct stat st;
    if (o.bench && stat(o.bench, &st) == 0 && (bench = read_json(o.bench)) != NULL) {
        if (str(bench, "date")) snprintf(when, sizeof when, "%s", str(bench, "date"));
        else date_of(st.st_mtime, when, sizeof when);
        snprintf(o.bench_cpu, sizeof o.bench_cpu, "%s", str(bench, "cpu") ? str(bench, "cpu") : o.cpu);
    }
    int rc = fig_forward_ms(&o);
    rc |= fig_decode_tps(&o, bench, when);
    rc |= fig_kv_paged(&o, bench, when);
    rc |= fig_kv_paged_now(&o);
    rc |= fig_batched_sweep(&o, bench, when);
    rc |= fig_ab(&o, bench, when);
    json_free(bench);
    return rc ? 1 : 0;
}
