/* book-figures: the book's plots, drawn from measurements.
 *
 *   book-figures --out DIR --build BUILD --model M --chapters "II.1 II.2 ..." [--bench bench.json]
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
 *   decode-tps   decode tokens/s per chapter, weight type and backend: from
 *                the bench JSON when there is one, else measured here on M
 *   kv-paged     basic against paged KV, per-step ms by context: from the
 *                bench JSON's "kv" table only (make bench) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "json.h"

#define MAX_CHAPTERS 16
#define MAX_STEPS 4096

typedef struct {
    const char *out, *build, *model, *bench;
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

/* The snippet for a figure that has no data: what to run to get it. */
static int write_missing(const Options *o, const char *name, const char *why) {
    FILE *f = open_out(o, name, "md");
    if (!f) return -1;
    fprintf(f, "> **Figure not measured in this build.** %s\n", why);
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

/* The common head of every gnuplot script: an SVG of the book's size and look. */
static void gp_head(FILE *g, const char *name, const char *xlabel, const char *ylabel) {
    fprintf(g, "set terminal svg size 720,400 dynamic font 'sans,13' background '#ffffff'\n"
               "set output '%s.svg'\nset xlabel '%s'\nset ylabel '%s'\n"
               "set grid lc rgb '#dddddd'\nset key top left box opaque\nset border 3\nset tics nomirror\n",
            name, xlabel, ylabel);
}

/* ---- forward ms against step: II.1 against II.2 ------------------------------ */

/* Per-step ms of one chapter's decode steps on the model (best of runs), into ms[step]. */
static int step_times(const Options *o, const char *chapter, const char *flags, double *ms, int *n_steps) {
    for (int run = 0; run < 2; run++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s/%s/model-generate --json --ignore-eos --backend simd %s '%s' 'Once upon a time' 240",
                 o->build, chapter, flags, o->model);
        fprintf(stderr, "book-figures: %s\n", cmd);
        JsonValue *res = run_json(cmd);
        if (!res) return -1;
        const JsonValue *steps = json_get(res, "steps");
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

static int fig_forward_ms(const Options *o) {
    static double a[MAX_STEPS], b[MAX_STEPS];
    int na = 0, nb = 0;
    if (step_times(o, "II.1", "", a, &na) != 0 || step_times(o, "II.2", "--kv basic", b, &nb) != 0)
        return write_missing(o, "forward-ms", "The II.1 or II.2 run failed: see `make book`'s output.");
    FILE *d = open_out(o, "forward-ms", "dat"), *g = open_out(o, "forward-ms", "gp");
    if (!d || !g) return -1;
    fprintf(d, "# step  II.1_ms  II.2_ms   (decode steps; step 0 is the prefill)\n");
    int n = na < nb ? na : nb;
    for (int k = 1; k < n; k++) fprintf(d, "%d %.4f %.4f\n", k, a[k], b[k]);
    fclose(d);
    gp_head(g, "forward-ms", "decode step (tokens generated so far)", "ms per forward");
    fprintf(g, "plot 'forward-ms.dat' using 1:2 with lines lw 2 lc rgb '#cf222e' title 'II.1: full recompute', \\\n"
               "     '' using 1:3 with lines lw 2 lc rgb '#0969da' title 'II.2: KV cache'\n");
    fclose(g);
    char caption[1024];
    snprintf(caption, sizeof caption,
             "Milliseconds per forward at each decode step, II.1 (every step recomputes the whole sequence) "
             "against II.2 (one new row a step), simd backend, one thread, the faster of two runs at each step. "
             "Measured by <code>make book</code> on %s, model <code>%s</code>, %s.",
             o->cpu, o->model, o->today);
    return draw(o, "forward-ms", 2 * (n - 1), "per-forward milliseconds against step, II.1 and II.2", caption);
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
    if (n == 0) return write_missing(o, "decode-tps", "No decode run succeeded: see `make book`'s output.");
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
    gp_head(g, "decode-tps", "chapter", "decode tokens/s");
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

static int fig_kv_paged(const Options *o, const JsonValue *bench, const char *when) {
    const JsonValue *kv = bench ? json_get(bench, "kv") : NULL, *rows = kv ? json_get(kv, "contexts") : NULL;
    if (!rows || rows->n_items == 0)
        return write_missing(o, "kv-paged", "It comes from `make bench` (its basic-against-paged KV table), "
                                            "which this build has not run.");
    FILE *d = open_out(o, "kv-paged", "dat"), *g = open_out(o, "kv-paged", "gp");
    if (!d || !g) return -1;
    fprintf(d, "# context basic_ms paged_ms basic_attention_ms paged_attention_ms\n");
    for (size_t i = 0; i < rows->n_items; i++) {
        const JsonValue *r = &rows->items[i];
        fprintf(d, "%g %.3f %.3f %.3f %.3f\n", num(r, "context"), num(r, "basic_ms"), num(r, "paged_ms"),
                num(r, "basic_attention_ms"), num(r, "paged_attention_ms"));
    }
    fclose(d);
    gp_head(g, "kv-paged", "positions already cached", "ms per decode step");
    fprintf(g, "set yrange [0:*]\nplot 'kv-paged.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '#cf222e' title "
               "'basic: step', \\\n"
               "     '' using 1:3 with linespoints lw 2 pt 5 lc rgb '#0969da' title 'paged: step', \\\n"
               "     '' using 1:4 with linespoints dt 2 lc rgb '#cf222e' title 'basic: attention alone', \\\n"
               "     '' using 1:5 with linespoints dt 2 lc rgb '#0969da' title 'paged: attention alone'\n");
    fclose(g);
    char caption[1536];
    snprintf(caption, sizeof caption,
             "A decode step with N positions already cached, basic cache against paged (median of the steps "
             "tools/kv-bench times), and attention's own share; %s weights, %s backend, %d thread(s). From "
             "<code>make bench</code> on %s, %s.",
             str(kv, "type") ? str(kv, "type") : "?", str(kv, "backend") ? str(kv, "backend") : "?",
             (int)num(kv, "threads"), o->bench_cpu, when);
    return draw(o, "kv-paged", 4 * (int)rows->n_items, "milliseconds per decode step by context, basic and paged",
                caption);
}

/* ---- main --------------------------------------------------------------------- */

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: book-figures --out DIR --build BUILD --model M --chapters LIST [--bench bench.json]\n"
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
    json_free(bench);
    return rc ? 1 : 0;
}
