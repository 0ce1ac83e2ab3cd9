/* chapter-diff: what one chapter changes relative to another.
 *
 *   chapter-diff [--chapters-dir DIR] [--html OUT_DIR [--fragment]] [--color WHEN] [--no-check]
 *                [--stage ID] [FROM] TO
 *   chapter-diff [--chapters-dir DIR] --stages
 *
 * FROM defaults to the chapter before TO in book order. Without --html it runs
 * `diff -ruNp` on the two directories (MANIFEST and hidden files left out;
 * absent files count as empty, so an added file shows whole), coloured unless
 * WHEN is "never" or NO_COLOR is set. With --html it writes
 * OUT_DIR/FROM..TO.html, the side-by-side page (see htmldiff.h); with
 * --fragment too, OUT_DIR/FROM..TO.part.html, the part of it that `make book`
 * puts in a chapter's page. --stage ID: only the lesson ID of TO (a `stage`
 * group of its MANIFEST; see stages.h), as the diff of the views before and
 * after it, named by stage (the HTML page OUT_DIR/BEFORE..ID.html); FROM and
 * TO may then be left out. --stages lists every stage: chapter, id, the view
 * before it, title (tab-separated). --no-check leaves the manifest check's
 * verdict off the HTML page (for copies of the chapters, such as the
 * students' edition's stubbed ones, where it means nothing). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chapfs.h"
#include "htmldiff.h"
#include "stages.h"

typedef struct {
    const char *dir, *html_dir, *color, *from, *to, *stage;
    bool fragment; /* --fragment: the part the book's chapter pages show (see htmldiff.h) */
    bool list_stages, no_check;
} Options;

static void usage(FILE *f) {
    fprintf(f, "usage: chapter-diff [--chapters-dir DIR] [--html OUT_DIR [--fragment]] [--color always|never|auto]\n"
               "                    [--no-check] [--stage ID] [FROM] TO\n"
               "       chapter-diff [--chapters-dir DIR] --stages\n"
               "FROM defaults to the chapter before TO. --fragment: OUT_DIR/FROM..TO.part.html, the diff\n"
               "folded by file, to put in a page (the book's chapter pages). --stage ID: only that lesson\n"
               "of the chapter (a stage of its MANIFEST), from the view before it. --stages: list them.\n"
               "--no-check: no manifest verdict on the HTML page.\n");
}

/* Returns 0, 1 after printing help, or 2 on a usage error. */
static int parse_args(int argc, char **argv, Options *o) {
    StrList pos = {0};
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--chapters-dir") == 0 && has_value) o->dir = argv[++i];
        else if (strcmp(a, "--html") == 0 && has_value) o->html_dir = argv[++i];
        else if (strcmp(a, "--color") == 0 && has_value) o->color = argv[++i];
        else if (strcmp(a, "--stage") == 0 && has_value) o->stage = argv[++i];
        else if (strcmp(a, "--fragment") == 0) o->fragment = true;
        else if (strcmp(a, "--stages") == 0) o->list_stages = true;
        else if (strcmp(a, "--no-check") == 0) o->no_check = true;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) rc = 1;
        else if (a[0] == '-') {
            fprintf(stderr, "chapter-diff: unknown option or missing value: %s\n", a);
            rc = 2;
        } else if (pos.n == 2) {
            fprintf(stderr, "chapter-diff: too many chapters (at most FROM and TO)\n");
            rc = 2;
        } else {
            strlist_push(&pos, a);
        }
    }
    if (rc == 0 && pos.n == 0 && !o->stage && !o->list_stages) {
        fprintf(stderr, "chapter-diff: which chapter? give TO (and optionally FROM)\n");
        rc = 2;
    }
    if (rc == 0) {
        o->from = pos.n == 2 ? strdup(pos.items[0]) : NULL;
        o->to = pos.n ? strdup(pos.items[pos.n - 1]) : NULL;
    }
    strlist_free(&pos);
    return rc;
}

/* Checks the chapters exist and fills in FROM; 0, or 2 with a message. */
static int resolve_chapters(Options *o) {
    StrList chapters = {0};
    if (chapfs_list_chapters(o->dir, &chapters) < 0) {
        fprintf(stderr, "chapter-diff: cannot read the chapters directory %s\n", o->dir);
        return 2;
    }
    char *all = strlist_join(&chapters, " ");
    int rc = 0;
    const char *check[2] = {o->from, o->to};
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (check[i] && strlist_find(&chapters, check[i]) < 0) {
            fprintf(stderr, "chapter-diff: unknown chapter '%s'; chapters: %s\n", check[i], all);
            rc = 2;
        }
    }
    if (rc == 0 && !o->from) {
        const char *prev = chapfs_previous(&chapters, o->to);
        if (!prev) {
            fprintf(stderr, "chapter-diff: %s is the first chapter; nothing comes before it (chapters: %s)\n", o->to,
                    all);
            rc = 2;
        } else {
            o->from = strdup(prev);
        }
    }
    free(all);
    strlist_free(&chapters);
    return rc;
}

/* Runs diff(1) on the two chapter directories; diff's "differences found" (1) is success here.
 * A stage's views are diffed from inside their scratch directory, so that the
 * paths read BEFORE/file and ID/file. */
static int run_diff(const Options *o, bool in_dir) {
    char *a = in_dir ? chapfs_strdup(o->from) : chapfs_printf("%s/%s", o->dir, o->from);
    char *b = in_dir ? chapfs_strdup(o->to) : chapfs_printf("%s/%s", o->dir, o->to);
    const char *when = o->color ? o->color : getenv("NO_COLOR") ? "never" : "always";
    char *color = chapfs_printf("--color=%s", when);
    char *argv[] = {"diff", "-ruNp", color, "--exclude=MANIFEST", "--exclude=.*", a, b, NULL};
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (in_dir && chdir(o->dir) != 0) _exit(127);
        execvp("diff", argv);
        fprintf(stderr, "chapter-diff: cannot run diff: %s\n", strerror(errno));
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) status = 2 << 8;
    free(a);
    free(b);
    free(color);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) return 0; /* `| head`: the reader had enough */
    return WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? 0 : 2;
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char *p = chapfs_strdup(path);
    int rc = 0;
    for (char *s = p + 1; rc == 0; s++) {
        bool end = *s == 0;
        if (*s != '/' && !end) continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) rc = -1;
        if (end) break;
        *s = '/';
    }
    free(p);
    return rc;
}

static int write_html(const Options *o) {
    if (make_dirs(o->html_dir) != 0) {
        fprintf(stderr, "chapter-diff: cannot create %s: %s\n", o->html_dir, strerror(errno));
        return 2;
    }
    char *out = chapfs_printf("%s/%s..%s.%s", o->html_dir, o->from, o->to, o->fragment ? "part.html" : "html");
    char err[512];
    int rc = htmldiff_write_as(o->dir, o->from, o->to, out, o->fragment, !o->no_check, err, sizeof err);
    if (rc == 0) printf("wrote %s\n", out);
    else fprintf(stderr, "chapter-diff: %s\n", err);
    free(out);
    return rc == 0 ? 0 : 2;
}

/* --stages: one line per stage. */
static int list_stages(const Options *o) {
    StageList l = {0};
    StrList problems = {0};
    stages_list(o->dir, &l, &problems);
    for (int i = 0; i < l.n; i++)
        printf("%s\t%s\t%s\t%s\n", l.items[i].chapter, l.items[i].id, l.items[i].before, l.items[i].title);
    for (int i = 0; i < problems.n; i++) fprintf(stderr, "chapter-diff: %s\n", problems.items[i]);
    int rc = problems.n ? 2 : 0;
    stages_free(&l);
    strlist_free(&problems);
    return rc;
}

/* The stage's chapter must be TO (and FROM the chapter before it) when they are given. */
static int check_stage_chapters(const Options *o, const Stage *s, const StageList *l) {
    if (!s) {
        StrList ids = {0};
        for (int i = 0; i < l->n; i++) strlist_push(&ids, l->items[i].id);
        char *all = strlist_join(&ids, " ");
        fprintf(stderr, "chapter-diff: unknown stage '%s'; stages: %s\n", o->stage, all);
        free(all);
        strlist_free(&ids);
        return 2;
    }
    if (o->to && strcmp(o->to, s->chapter) != 0) {
        fprintf(stderr, "chapter-diff: stage %s is a lesson of chapter %s, not of %s (to=%s)\n", s->id, s->chapter,
                o->to, s->chapter);
        return 2;
    }
    StrList chapters = {0};
    chapfs_list_chapters(o->dir, &chapters);
    const char *prev = chapfs_previous(&chapters, s->chapter);
    int rc = 0;
    if (o->from && prev && strcmp(o->from, prev) != 0) {
        fprintf(stderr, "chapter-diff: stage %s shows its change from chapter %s (from=%s), not from %s\n", s->id,
                prev, prev, o->from);
        rc = 2;
    }
    strlist_free(&chapters);
    return rc;
}

/* --stage: the diff of the views before and after the stage, made in a scratch directory. */
static int stage_diff(Options *o) {
    StageList l = {0};
    StrList problems = {0};
    stages_list(o->dir, &l, &problems);
    const Stage *s = stages_find(&l, o->stage);
    int rc = problems.n ? (fprintf(stderr, "chapter-diff: %s\n", problems.items[0]), 2) : check_stage_chapters(o, s, &l);
    const char *tmp = getenv("TMPDIR");
    char *scratch = chapfs_printf("%s/chapter-diff-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char err[512];
    if (rc == 0 && !mkdtemp(scratch)) {
        fprintf(stderr, "chapter-diff: cannot make a scratch directory %s: %s\n", scratch, strerror(errno));
        rc = 2;
    } else if (rc == 0) {
        if (stages_write_views(o->dir, s, scratch, err, sizeof err) != 0) {
            fprintf(stderr, "chapter-diff: %s\n", err);
            rc = 2;
        } else {
            Options v = *o;
            v.dir = scratch, v.from = s->before, v.to = s->id;
            rc = o->html_dir ? write_html(&v) : run_diff(&v, true);
        }
        stages_remove_dir(scratch);
    }
    free(scratch);
    stages_free(&l);
    strlist_free(&problems);
    return rc;
}

int main(int argc, char **argv) {
    Options o = {.dir = "chapters"};
    int rc = parse_args(argc, argv, &o);
    if (rc == 1) usage(stdout);
    if (rc == 2) usage(stderr);
    if (rc) return rc == 1 ? 0 : 2;
    if (o.list_stages) return list_stages(&o);
    if (o.to) rc = resolve_chapters(&o);
    if (rc == 0 && o.fragment && !o.html_dir) {
        fprintf(stderr, "chapter-diff: --fragment goes with --html OUT_DIR\n");
        rc = 2;
    }
    if (rc == 0) rc = o.stage ? stage_diff(&o) : o.html_dir ? write_html(&o) : run_diff(&o, false);
    free((char *)o.from);
    free((char *)o.to);
    return rc;
}
