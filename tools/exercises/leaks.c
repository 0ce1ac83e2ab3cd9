/* leaks.c: see leaks.h. */
#include "leaks.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markers.h"

enum { LEAK_RUN = 3, LEAK_WINDOW = 12, LEAK_MIN_CHARS = 12 };

/* One marked function's reference body, as the lines a page would show. */
typedef struct {
    char *where; /* "ID (CHAPTER/FILE, FUNCTION)" */
    StrList lines;
} Answer;

/* s with runs of blanks made one space and the ends trimmed (malloc'd). */
static char *squeeze(const char *s, size_t n) {
    char *out = chapfs_xmalloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (isspace((unsigned char)s[i])) {
            if (k && out[k - 1] != ' ') out[k++] = ' ';
        } else {
            out[k++] = s[i];
        }
    }
    while (k && out[k - 1] == ' ') k--;
    out[k] = 0;
    return out;
}

static bool trivial(const char *line) {
    return strlen(line) < LEAK_MIN_CHARS || strncmp(line, "/*", 2) == 0 || strncmp(line, "*", 1) == 0 ||
           strncmp(line, "//", 2) == 0;
}

/* The non-trivial lines of src[start, end), in order. */
static void body_lines(const char *src, size_t start, size_t end, StrList *out) {
    for (size_t i = start; i < end;) {
        size_t j = i;
        while (j < end && src[j] != '\n') j++;
        char *line = squeeze(src + i, j - i);
        if (!trivial(line)) strlist_push(out, line);
        free(line);
        i = j + 1;
    }
}

/* The non-trivial lines of the chapter's files outside every marked body:
 * what the students' copy shows anyway (a sibling function's setup lines are
 * no answer). */
static void public_lines(const char *dir, const ExerciseList *l, StrList *out) {
    StrList files = {0};
    chapfs_list_files(dir, &files);
    for (int f = 0; f < files.n; f++) {
        if (!cfuncs_is_c_file(files.items[f])) continue;
        char *path = chapfs_printf("%s/%s", dir, files.items[f]);
        size_t len, from = 0, b, end;
        char *src = chapfs_read(path, &len);
        CFuncList fl;
        cfuncs_split(src ? src : "", src ? len : 0, &fl);
        for (int k = 0; k < fl.n; k++)
            for (int i = 0; i < l->n; i++)
                if (strcmp(l->items[i].file, files.items[f]) == 0 && strcmp(l->items[i].function, fl.funcs[k].key) == 0 &&
                    function_body(src, &fl.funcs[k], &b, &end)) {
                    body_lines(src, from, b, out);
                    from = end;
                }
        if (src) body_lines(src, from, len, out);
        cfuncs_free(&fl);
        free(src);
        free(path);
    }
    strlist_free(&files);
}

/* Every marked function of chapters_dir/chapter: the lines of its body that
 * are not public. */
static void collect_answers(const char *chapters_dir, const char *chapter, Answer **out, int *n) {
    StrList problems = {0}, shown = {0};
    char *dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    ExerciseList l = {0};
    markers_scan_dir(dir, &l, &problems);
    public_lines(dir, &l, &shown);
    for (int i = 0; i < l.n; i++) {
        const Exercise *e = &l.items[i];
        char *path = chapfs_printf("%s/%s", dir, e->file);
        size_t len, b, end;
        char *src = chapfs_read(path, &len);
        CFuncList fl;
        cfuncs_split(src ? src : "", src ? len : 0, &fl);
        Answer a = {chapfs_printf("%s (%s/%s, %s)", e->id, chapter, e->file, e->function), {0}};
        for (int k = 0; k < fl.n; k++)
            if (strcmp(fl.funcs[k].key, e->function) == 0 && function_body(src, &fl.funcs[k], &b, &end))
                body_lines(src, b + 1, end, &a.lines);
        StrList secret = {0};
        for (int k = 0; k < a.lines.n; k++)
            if (strlist_find(&shown, a.lines.items[k]) < 0) strlist_push(&secret, a.lines.items[k]);
        strlist_free(&a.lines);
        a.lines = secret;
        *out = chapfs_xrealloc(*out, sizeof(Answer) * (size_t)(*n + 1));
        (*out)[(*n)++] = a;
        cfuncs_free(&fl);
        free(src);
        free(path);
    }
    exercises_free(&l);
    free(dir);
    strlist_free(&problems);
    strlist_free(&shown);
}

/* Appends the decoded entity at s (after '&') to out; returns its length, 0 if none. */
static size_t entity(const char *s, char *out, size_t *k) {
    static const struct { const char *name; char c; } named[] = {
        {"lt;", '<'}, {"gt;", '>'}, {"amp;", '&'}, {"quot;", '"'}, {"apos;", '\''}, {"nbsp;", ' '}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strncmp(s, named[i].name, strlen(named[i].name)) == 0) {
            out[(*k)++] = named[i].c;
            return strlen(named[i].name);
        }
    if (s[0] == '#') {
        char *end;
        long v = s[1] == 'x' || s[1] == 'X' ? strtol(s + 2, &end, 16) : strtol(s + 1, &end, 10);
        if (*end == ';' && v > 0 && v < 128) {
            out[(*k)++] = (char)v;
            return (size_t)(end - s) + 1;
        }
    }
    return 0;
}

/* The page's lines as a reader sees them: an HTML page without its tags and entities. */
static void page_lines(const char *text, bool html_page, StrList *out) {
    size_t n = strlen(text), k = 0;
    char *plain = chapfs_xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        if (html_page && text[i] == '<') {
            while (i < n && text[i] != '>') i++;
        } else if (html_page && text[i] == '&') {
            size_t used = entity(text + i + 1, plain, &k);
            if (used) i += used;
            else plain[k++] = '&';
        } else {
            plain[k++] = text[i];
        }
    }
    plain[k] = 0;
    for (char *p = plain; *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = squeeze(p, len);
        strlist_push(out, line);
        free(line);
        p += len + (nl != NULL);
    }
    free(plain);
}

/* The page line where a run of LEAK_RUN answer lines starts, or -1. */
static int find_run(const StrList *page, const Answer *a) {
    for (int s = 0; s + LEAK_RUN <= a->lines.n; s++)
        for (int j = 0; j < page->n; j++) {
            if (!strstr(page->items[j], a->lines.items[s])) continue;
            int at = j, got = 1;
            for (int r = 1; r < LEAK_RUN; r++) {
                int next = -1;
                for (int t = at + 1; t < page->n && t <= at + LEAK_WINDOW && next < 0; t++)
                    if (strstr(page->items[t], a->lines.items[s + r])) next = t;
                if (next < 0) break;
                at = next, got++;
            }
            if (got == LEAK_RUN) return j;
        }
    return -1;
}

int leaks_check(const char *chapters_dir, const char *chapter, const StrList *pages, StrList *found) {
    Answer *answers = NULL;
    int n = 0, before = found->n;
    collect_answers(chapters_dir, chapter, &answers, &n);
    for (int p = 0; p < pages->n; p++) {
        const char *path = pages->items[p];
        char *text = chapfs_read(path, NULL);
        if (!text) {
            strlist_pushf(found, "%s: cannot read", path);
            continue;
        }
        size_t len = strlen(path);
        StrList lines = {0};
        page_lines(text, len > 5 && strcmp(path + len - 5, ".html") == 0, &lines);
        for (int i = 0; i < n; i++) {
            int at = find_run(&lines, &answers[i]);
            if (at >= 0) strlist_pushf(found, "%s: line %d shows the answer of exercise %s", path, at + 1, answers[i].where);
        }
        strlist_free(&lines);
        free(text);
    }
    for (int i = 0; i < n; i++) {
        free(answers[i].where);
        strlist_free(&answers[i].lines);
    }
    free(answers);
    return found->n - before;
}
