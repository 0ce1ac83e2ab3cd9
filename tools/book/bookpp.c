/* bookpp: turns the book's markdown sources into what `make book` renders.
 *
 *   bookpp [-C root] [--student] [--html TO_ROOT | --md TO_ROOT] [--data DIR] FILE > out.md
 *   bookpp [-C root] --check FILE...     every include resolves and its link is current
 *   bookpp [-C root] --update FILE...    rewrites the include links with current line numbers
 *
 * An include is a line that is only a link to a function (or struct, or
 * typedef) in the code, with its name and lines:
 *
 *   [`grow_by_one_row` in chapters/II.2/kv_basic.c, lines 45-60](../chapters/II.2/kv_basic.c#L45-L60)
 *
 * On a code host it reads as a link to the code; bookpp replaces it by the
 * code as it is now (the function with the comment just above it), so the
 * book's code never drifts from the chapters. The name and path decide what is
 * included; the line numbers only serve the link, and --check fails (make
 * test) when they are stale: `make book-links` (--update) refreshes them. The
 * older form `@include PATH NAME` is still expanded, and --update turns it
 * into a link.
 *
 * --student shows each function that is an exercise (see book/instructors.md)
 * as its stub and its task instead of its code: the students' edition.
 * --html rewrites relative links for a page in the rendered book: to another
 * book page, NAME.html (the introduction: index.html; the project's README:
 * project.html); to any other file,
 * TO_ROOT/path. --md does the same for markdown written elsewhere (book pages
 * stay NAME.md, beside it).
 *
 * Lines that are only a comment `<!-- @NAME ... -->` are generated text:
 *   @exercises         a table of every chapter's exercises, from their markers
 *   @code-lines        lines of code of common/ and of each chapter, with exercise counts
 *   @coverage          line coverage per chapter from DATA/coverage-<chapter>.txt
 *                      (what `make chapter=X coverage` printed; --data DATA, default build/book)
 *   @output CMD        the output of the shell command CMD, as a text block
 *   @figure NAME       the figure NAME that make book measured and drew (DATA/figures/NAME.md,
 *                      written by tools/book/figures.c); with --html it must exist, elsewhere
 *                      a line says where the figure goes
 * so the numbers the book gives about the code are computed, never typed.
 *
 * Exits non-zero, naming the file and line, when an include or a directive fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfuncs.h"
#include "chapfs.h"
#include "markers.h"
#include "stub.h"

static const char *root = ".";
static bool student;
static const char *to_root;   /* --html or --md: from the output's directory to the repository */
static bool html;             /* --html: links to book pages become NAME.html */
static const char *data_dir = "build/book"; /* --data: what make book measured for @coverage */

/* ---- includes ------------------------------------------------------------ */

typedef struct {
    char name[256];
    char path[1024]; /* relative to the repository root */
    bool legacy;     /* @include PATH NAME */
} Include;

/* Parses an include line (without its newline). */
static bool parse_include(const char *line, Include *inc) {
    memset(inc, 0, sizeof *inc);
    if (strncmp(line, "@include ", 9) == 0) {
        inc->legacy = true;
        return sscanf(line + 9, "%1023s %255s", inc->path, inc->name) == 2;
    }
    if (strncmp(line, "[`", 2) != 0) return false;
    const char *name = line + 2, *name_end = strstr(name, "` in ");
    if (!name_end) return false;
    const char *path = name_end + 5, *path_end = strstr(path, ", line");
    const char *link = strstr(line, "](");
    size_t len = strlen(line);
    if (!path_end || !link || link < path_end || line[len - 1] != ')') return false;
    if ((size_t)(name_end - name) >= sizeof inc->name || (size_t)(path_end - path) >= sizeof inc->path) return false;
    memcpy(inc->name, name, (size_t)(name_end - name));
    memcpy(inc->path, path, (size_t)(path_end - path));
    return strchr(inc->name, ' ') == NULL && strchr(inc->path, ' ') == NULL;
}

/* Moves start back over a comment that ends on the line just above it (a doc
 * comment, or an exercise marker and the doc comment above that). */
static size_t with_leading_comment(const char *src, size_t start) {
    for (;;) {
        size_t p = start;
        if (p < 2 || src[p - 1] != '\n') return start;
        size_t line_end = p - 1;
        if (line_end < 2 || strncmp(src + line_end - 2, "*/", 2) != 0) return start;
        const char *open = NULL;
        for (size_t i = line_end - 2; i-- > 1;)
            if (src[i - 1] == '/' && src[i] == '*') {
                open = src + i - 1;
                break;
            }
        if (!open) return start;
        size_t q = (size_t)(open - src);
        while (q > 0 && src[q - 1] != '\n') q--;
        start = q;
    }
}

/* A struct or typedef named name: from its first line to the line ending it. */
static int find_type(const char *src, const char *name, size_t *b, size_t *e) {
    char pat1[300], pat2[300];
    snprintf(pat1, sizeof pat1, "struct %s {", name);
    snprintf(pat2, sizeof pat2, "} %s;", name);
    for (const char *line = src; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n >= strlen(pat1) && strncmp(line, pat1, strlen(pat1)) == 0) {
            const char *end = strstr(line, "\n};");
            if (!end) return -1;
            *b = (size_t)(line - src);
            *e = (size_t)(end - src) + 4;
            return 0;
        }
        if (strncmp(line, pat2, strlen(pat2)) == 0) { /* typedef struct { ... } name; */
            const char *start = line;
            while (start > src) {
                const char *prev = start - 1;
                while (prev > src && prev[-1] != '\n') prev--;
                start = prev;
                if (strncmp(start, "typedef", 7) == 0) break;
            }
            *b = (size_t)(start - src);
            *e = (size_t)(line - src) + n + 1;
            return 0;
        }
        if (!nl) break;
        line = nl + 1;
    }
    return -1;
}

static int line_of(const char *src, size_t off) {
    int line = 1;
    for (size_t i = 0; i < off; i++) line += src[i] == '\n';
    return line;
}

/* The text of name in src: [*b, *e), with the comment above it. */
static int locate(const char *src, size_t len, const char *name, size_t *b, size_t *e) {
    CFuncList l;
    cfuncs_split(src, len, &l);
    int i = cfuncs_find(&l, name), rc = 0;
    if (i >= 0) {
        *b = with_leading_comment(src, l.funcs[i].start);
        *e = l.funcs[i].end;
    } else {
        rc = find_type(src, name, b, e);
    }
    cfuncs_free(&l);
    return rc;
}

/* The repository-relative directory of a markdown file ("" at the root). */
static char *dir_of(const char *md) {
    const char *slash = strrchr(md, '/');
    return slash ? chapfs_strndup(md, (size_t)(slash - md)) : chapfs_strdup("");
}

/* path (repository-relative) as seen from directory dir. */
static char *relative_to(const char *dir, const char *path) {
    if (!*dir) return chapfs_strdup(path);
    char *up = chapfs_strdup("");
    for (const char *p = dir; p; p = strchr(p + 1, '/')) {
        char *more = chapfs_printf("%s../", up);
        free(up);
        up = more;
    }
    char *rel = chapfs_printf("%s%s", up, path);
    free(up);
    return rel;
}

/* The link line for an include of name in path from markdown file md, or NULL. */
static char *include_link(const char *md, const Include *inc) {
    char *full = chapfs_printf("%s/%s", root, inc->path);
    size_t len;
    char *src = chapfs_read(full, &len);
    free(full);
    size_t b, e;
    if (!src || locate(src, len, inc->name, &b, &e) != 0) {
        free(src);
        return NULL;
    }
    int first = line_of(src, b), last = line_of(src, e > b ? e - 1 : b);
    char *dir = dir_of(md), *rel = relative_to(dir, inc->path);
    char *link = first == last ? chapfs_printf("[`%s` in %s, line %d](%s#L%d)", inc->name, inc->path, first, rel, first)
                               : chapfs_printf("[`%s` in %s, lines %d-%d](%s#L%d-L%d)", inc->name, inc->path, first,
                                               last, rel, first, last);
    free(dir);
    free(rel);
    free(src);
    return link;
}

/* The chapter whose exercise `id` is (the first that asks it), or NULL. */
static char *chapter_asking(const char *id) {
    char *cdir = chapfs_printf("%s/chapters", root), *found = NULL;
    StrList chapters = {0}, problems = {0};
    chapfs_list_chapters(cdir, &chapters);
    for (int c = 0; c < chapters.n && !found; c++) {
        ExerciseList l = {0};
        exercises_of_chapter(cdir, chapters.items[c], &l, &problems);
        if (exercises_find(&l, id) >= 0) found = chapfs_strdup(chapters.items[c]);
        exercises_free(&l);
    }
    strlist_free(&chapters);
    strlist_free(&problems);
    free(cdir);
    return found;
}

/* For --student: src with name's body stubbed if name is a marked exercise
 * (malloc'd), and *ex set to its marker; NULL when it is not an exercise. */
static char *stubbed(const char *path, const char *src, size_t len, const char *name, ExerciseList *exs) {
    StrList problems = {0};
    markers_scan_text(path, src, len, exs, &problems);
    strlist_free(&problems);
    int k = -1;
    for (int i = 0; i < exs->n; i++)
        if (strcmp(exs->items[i].function, name) == 0) k = i;
    if (k < 0) return NULL;
    char *out = stub_file(path, src, len, &exs->items[k], 1, &problems);
    strlist_free(&problems);
    if (k != 0) { /* the caller reads items[0] */
        Exercise t = exs->items[0];
        exs->items[0] = exs->items[k];
        exs->items[k] = t;
    }
    return out;
}

/* Under a stub, the file the student edits: exercises/<chapter that asks it>/<file>. */
static char *students_file(const Exercise *ex, const char *path) {
    char *chapter = chapter_asking(ex->id);
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char *s = chapter ? chapfs_printf("exercises/%s/%s", chapter, file) : chapfs_strdup(path);
    free(chapter);
    return s;
}

static void task_note(FILE *out, const Exercise *ex, const char *path) {
    char *chapter = chapter_asking(ex->id);
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (chapter)
        fprintf(out,
                "> **Exercise `%s`** (%d point%s): %s. Write it in `exercises/%s/%s` (made by `make chapter=%s "
                "exercise`), then check it with `make chapter=%s grade EXERCISE=%s`.\n",
                ex->id, ex->points, ex->points == 1 ? "" : "s", ex->title, chapter, file, chapter, chapter, ex->id);
    else
        fprintf(out, "> **Exercise `%s`** (%d point%s): %s.\n", ex->id, ex->points, ex->points == 1 ? "" : "s",
                ex->title);
    free(chapter);
}

static int expand(const Include *inc, FILE *out) {
    char *full = chapfs_printf("%s/%s", root, inc->path);
    size_t len;
    char *src = chapfs_read(full, &len);
    free(full);
    if (!src) return -1;
    ExerciseList exs = {0};
    char *stub = student ? stubbed(inc->path, src, len, inc->name, &exs) : NULL;
    const char *text = stub ? stub : src;
    size_t b, e;
    int rc = locate(text, strlen(text), inc->name, &b, &e);
    if (rc == 0) {
        if (stub) {
            task_note(out, &exs.items[0], inc->path);
            fputc('\n', out);
        }
        fprintf(out, "```c\n");
        fwrite(text + b, 1, e - b, out);
        if (e == b || text[e - 1] != '\n') fputc('\n', out);
        char *caption = stub ? students_file(&exs.items[0], inc->path) : chapfs_strdup(inc->path);
        fprintf(out, "```\n<small>%s</small>\n", caption);
        free(caption);
    }
    exercises_free(&exs);
    free(stub);
    free(src);
    return rc;
}

/* ---- generated text ------------------------------------------------------- */

static void gen_exercises(FILE *out) {
    char *cdir = chapfs_printf("%s/chapters", root);
    StrList chapters = {0}, problems = {0};
    chapfs_list_chapters(cdir, &chapters);
    fprintf(out, "| chapter | id | function | points | graded by the tests named |\n|---|---|---|---|---|\n");
    StrList totals = {0};
    for (int c = 0; c < chapters.n; c++) {
        ExerciseList l = {0};
        exercises_of_chapter(cdir, chapters.items[c], &l, &problems);
        int points = 0;
        for (int i = 0; i < l.n; i++) {
            const Exercise *x = &l.items[i];
            char *tests = strlist_join(&x->tests, "*`, `");
            fprintf(out, "| %s | `%s` | `%s` (%s) | %d | `%s*` |\n", chapters.items[c], x->id, x->function, x->file,
                    x->points, tests);
            points += x->points;
            free(tests);
        }
        if (l.n) strlist_pushf(&totals, "%s: %d exercises, %d points", chapters.items[c], l.n, points);
        exercises_free(&l);
    }
    char *t = strlist_join(&totals, "; ");
    fprintf(out, "\n%s.\n", t);
    free(t);
    strlist_free(&totals);
    strlist_free(&chapters);
    strlist_free(&problems);
    free(cdir);
}

/* Lines and files of the .c and .h files under dir (in its folders too when
 * recurse). */
static void count_lines(const char *dir, bool recurse, int *files, long *lines) {
    StrList l = {0};
    chapfs_list_files(dir, &l);
    *files = 0;
    *lines = 0;
    for (int i = 0; i < l.n; i++) {
        if (!cfuncs_is_c_file(l.items[i]) || (!recurse && strchr(l.items[i], '/'))) continue;
        char *p = chapfs_printf("%s/%s", dir, l.items[i]);
        size_t len;
        char *s = chapfs_read(p, &len);
        for (size_t k = 0; s && k < len; k++) *lines += s[k] == '\n';
        ++*files;
        free(s);
        free(p);
    }
    strlist_free(&l);
}

static void gen_code_lines(FILE *out) {
    char *cdir = chapfs_printf("%s/chapters", root), *common = chapfs_printf("%s/common", root);
    StrList chapters = {0}, problems = {0};
    chapfs_list_chapters(cdir, &chapters);
    fprintf(out, "| directory | C files | lines | exercises | points |\n|---|---|---|---|---|\n");
    int files;
    long lines;
    for (int c = 0; c < chapters.n; c++) {
        char *d = chapfs_printf("%s/%s", cdir, chapters.items[c]);
        count_lines(d, false, &files, &lines);
        ExerciseList l = {0};
        exercises_of_chapter(cdir, chapters.items[c], &l, &problems);
        int points = 0;
        for (int i = 0; i < l.n; i++) points += l.items[i].points;
        fprintf(out, "| `chapters/%s` | %d | %ld | %d | %d |\n", chapters.items[c], files, lines, l.n, points);
        exercises_free(&l);
        free(d);
    }
    StrList layers = {0};
    chapfs_list_chapters(common, &layers); /* its folders: one per layer */
    for (int i = 0; i < layers.n; i++) {
        char *d = chapfs_printf("%s/%s", common, layers.items[i]);
        count_lines(d, false, &files, &lines);
        fprintf(out, "| `common/%s` | %d | %ld | | |\n", layers.items[i], files, lines);
        free(d);
    }
    strlist_free(&layers);
    count_lines(common, true, &files, &lines);
    fprintf(out, "| `common`, all | %d | %ld | | |\n", files, lines);
    strlist_free(&chapters);
    strlist_free(&problems);
    free(cdir);
    free(common);
}

/* The rest of the line in file text after prefix, or NULL. */
static char *line_after(const char *text, const char *prefix) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            const char *s = p + strlen(prefix);
            return chapfs_strndup(s, strcspn(s, "\n"));
        }
    return NULL;
}

static void gen_coverage(FILE *out) {
    char *cdir = chapfs_printf("%s/chapters", root);
    StrList chapters = {0};
    chapfs_list_chapters(cdir, &chapters);
    fprintf(out, "| chapter | its own code | with `common/` |\n|---|---|---|\n");
    for (int c = 0; c < chapters.n; c++) {
        char *path = chapfs_printf("%s/coverage-%s.txt", data_dir, chapters.items[c]);
        char *text = chapfs_read(path, NULL);
        char *prefix = chapfs_printf("chapter %s alone: lines: ", chapters.items[c]);
        char *alone = text ? line_after(text, prefix) : NULL, *all = text ? line_after(text, "lines: ") : NULL;
        if (alone && all) fprintf(out, "| %s | %s | %s |\n", chapters.items[c], alone, all);
        else fprintf(out, "| %s | not measured in this build (`make chapter=%s coverage`) | |\n", chapters.items[c],
                     chapters.items[c]);
        free(alone);
        free(all);
        free(prefix);
        free(text);
        free(path);
    }
    strlist_free(&chapters);
    free(cdir);
}

static int gen_output(FILE *out, const char *cmd) {
    char *full = chapfs_printf("cd '%s' && (%s)", root, cmd);
    fflush(out);
    FILE *p = popen(full, "r");
    free(full);
    if (!p) return -1;
    fprintf(out, "```text\n");
    char buf[4096];
    size_t n, total = 0;
    bool nl = true;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
        fwrite(buf, 1, n, out);
        total += n;
        nl = buf[n - 1] == '\n';
    }
    if (!nl) fputc('\n', out);
    fprintf(out, "```\n");
    return pclose(p) == 0 && total > 0 ? 0 : -1;
}

static int gen_figure(FILE *out, const char *name) {
    char *path = chapfs_printf("%s/figures/%s.md", data_dir, name);
    char *text = chapfs_read(path, NULL);
    int rc = 0;
    if (text) fputs(text, out);
    else if (html) rc = -1;
    else fprintf(out, "*[The figure `%s`: `make book` measures and draws it.]*\n", name);
    free(text);
    free(path);
    return rc;
}

/* A line "<!-- @NAME ARGS -->": generates its text. 1 if it is not a directive. */
static int directive(const char *line, FILE *out) {
    size_t len = strlen(line);
    if (strncmp(line, "<!-- @", 6) != 0 || len < 10 || strcmp(line + len - 4, " -->") != 0) return 1;
    char *body = chapfs_strndup(line + 6, len - 10);
    char *args = body + strcspn(body, " ");
    if (*args) *args++ = 0;
    int rc = 0;
    if (strcmp(body, "exercises") == 0) gen_exercises(out);
    else if (strcmp(body, "code-lines") == 0) gen_code_lines(out);
    else if (strcmp(body, "coverage") == 0) gen_coverage(out);
    else if (strcmp(body, "output") == 0 && *args) rc = gen_output(out, args);
    else if (strcmp(body, "figure") == 0 && *args) rc = gen_figure(out, args);
    else rc = -1;
    free(body);
    return rc;
}

/* ---- links for the rendered book ------------------------------------------ */

/* The repository path of a link target relative to directory dir, normalized; NULL if it leaves the repository. */
static char *normalize(const char *dir, const char *target) {
    char *joined = *dir ? chapfs_printf("%s/%s", dir, target) : chapfs_strdup(target);
    StrList parts = {0};
    for (char *s = strtok(joined, "/"); s; s = strtok(NULL, "/")) {
        if (strcmp(s, ".") == 0) continue;
        if (strcmp(s, "..") == 0) {
            if (!parts.n) {
                strlist_free(&parts);
                free(joined);
                return NULL;
            }
            free(parts.items[--parts.n]);
        } else {
            strlist_push(&parts, s);
        }
    }
    char *out = strlist_join(&parts, "/");
    strlist_free(&parts);
    free(joined);
    return out;
}

/* One link target as seen from the rendered page (malloc'd). */
static char *html_target(const char *md, const char *target) {
    if (strstr(target, "://") || target[0] == '#' || target[0] == '/' || strncmp(target, "mailto:", 7) == 0)
        return chapfs_strdup(target);
    size_t plen = strcspn(target, "#");
    char *path = chapfs_strndup(target, plen), *dir = dir_of(md), *repo = normalize(dir, path);
    const char *anchor = target + plen;
    char *out;
    size_t rl = repo ? strlen(repo) : 0;
    if (!repo) out = chapfs_strdup(target);
    else if (html && strcmp(repo, "README.md") == 0) out = chapfs_printf("project.html%s", anchor);
    else if (html && strcmp(repo, "book/introduction.md") == 0) out = chapfs_printf("index.html%s", anchor);
    else if (strncmp(repo, "book/", 5) == 0 && !strchr(repo + 5, '/') && rl > 3 && strcmp(repo + rl - 3, ".md") == 0)
        out = chapfs_printf("%.*s.%s%s", (int)(rl - 8), repo + 5, html ? "html" : "md", anchor);
    else out = chapfs_printf("%s/%s%s", to_root, repo, anchor);
    free(path);
    free(dir);
    free(repo);
    return out;
}

/* line with every markdown link "](target)" rewritten for the rendered page. */
static void put_html_line(FILE *out, const char *md, const char *line) {
    const char *p = line;
    for (const char *l; (l = strstr(p, "](")) != NULL;) {
        const char *t = l + 2, *end = strchr(t, ')');
        if (!end) break;
        fwrite(p, 1, (size_t)(t - p), out);
        char *target = chapfs_strndup(t, (size_t)(end - t)), *h = html_target(md, target);
        fputs(h, out);
        free(h);
        free(target);
        p = end;
    }
    fputs(p, out);
}

/* ---- the modes ------------------------------------------------------------ */

/* Writes the expanded file to out; returns the number of problems. */
static int render(const char *md, FILE *out) {
    char *full = chapfs_printf("%s/%s", root, md);
    char *text = chapfs_read(full, NULL);
    free(full);
    if (!text) {
        fprintf(stderr, "bookpp: cannot open %s\n", md);
        return 1;
    }
    int lineno = 0, errors = 0;
    bool fenced = false;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        lineno++;
        Include inc;
        int rc = 1;
        if (!fenced && parse_include(line, &inc)) {
            if (expand(&inc, out) != 0) {
                fprintf(stderr, "%s:%d: cannot include '%s' from %s\n", md, lineno, inc.name, inc.path);
                errors++;
            }
            continue;
        }
        if (!fenced && (rc = directive(line, out)) < 0) {
            fprintf(stderr, "%s:%d: the directive failed: %s\n", md, lineno, line);
            errors++;
        }
        if (rc == 0) continue;
        if (strncmp(line, "```", 3) == 0) fenced = !fenced;
        if (to_root && !fenced) put_html_line(out, md, line);
        else fputs(line, out);
        fputc('\n', out);
    }
    free(text);
    return errors;
}

/* --check (update false) or --update: returns the number of problems left. */
static int links(const char *md, bool update) {
    char *full = chapfs_printf("%s/%s", root, md);
    char *text = chapfs_read(full, NULL);
    if (!text) {
        fprintf(stderr, "bookpp: cannot open %s\n", md);
        free(full);
        return 1;
    }
    StrList out = {0};
    int lineno = 0, problems = 0, changed = 0;
    bool fenced = false; /* an example in a code block is not an include */
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        lineno++;
        if (strncmp(line, "```", 3) == 0) fenced = !fenced;
        Include inc;
        bool is_include = !fenced && parse_include(line, &inc);
        char *want = is_include ? include_link(md, &inc) : NULL;
        if (is_include && !want) {
            fprintf(stderr, "%s:%d: cannot include '%s' from %s\n", md, lineno, inc.name, inc.path);
            problems++;
        } else if (want && strcmp(want, line) != 0) {
            if (!update) {
                fprintf(stderr, "%s:%d: %s; it is now %s (run `make book-links`)\n", md, lineno,
                        inc.legacy ? "an @include line, which reads badly unrendered" : "a stale include link", want);
                problems++;
            }
            changed++;
        }
        strlist_push(&out, want && update ? want : line);
        free(want);
    }
    if (update && changed) {
        char *joined = strlist_join(&out, "\n"), *tmp = chapfs_printf("%s.tmp%d", full, (int)getpid());
        FILE *f = fopen(tmp, "w");
        bool ok = f && fputs(joined, f) >= 0 && fputc('\n', f) != EOF;
        if (f && fclose(f) != 0) ok = false;
        if (ok && rename(tmp, full) == 0) {
            fprintf(stderr, "bookpp: %s: %d include link%s updated\n", md, changed, changed == 1 ? "" : "s");
        } else {
            fprintf(stderr, "bookpp: cannot write %s\n", full);
            remove(tmp);
            problems++;
        }
        free(tmp);
        free(joined);
    }
    strlist_free(&out);
    free(text);
    free(full);
    return problems;
}

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: bookpp [-C root] [--student] [--html TO_ROOT | --md TO_ROOT] [--data DIR] FILE > out.md\n"
               "       bookpp [-C root] --check FILE... | --update FILE...\n"
               "Expands the book's include links into the code they name and its generated tables;\n"
               "--check: every include resolves and its link is current; --update: refresh the links.\n"
               "Run by `make book`, `make book-links` and `make test`.\n");
    return rc;
}

int main(int argc, char **argv) {
    enum { RENDER, CHECK, UPDATE } mode = RENDER;
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) return usage(stdout, 0);
        else if (strcmp(argv[a], "-C") == 0 && a + 1 < argc) root = argv[++a];
        else if (strcmp(argv[a], "--html") == 0 && a + 1 < argc) to_root = argv[++a], html = true;
        else if (strcmp(argv[a], "--md") == 0 && a + 1 < argc) to_root = argv[++a];
        else if (strcmp(argv[a], "--data") == 0 && a + 1 < argc) data_dir = argv[++a];
        else if (strcmp(argv[a], "--student") == 0) student = true;
        else if (strcmp(argv[a], "--check") == 0) mode = CHECK;
        else if (strcmp(argv[a], "--update") == 0) mode = UPDATE;
        else return usage(stderr, 2);
    }
    if (a >= argc || (mode == RENDER && a + 1 != argc)) return usage(stderr, 2);
    if (mode == RENDER) return render(argv[a], stdout) ? 1 : 0;
    int problems = 0;
    for (; a < argc; a++) problems += links(argv[a], mode == UPDATE);
    return problems ? 1 : 0;
}
