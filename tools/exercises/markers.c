/* markers.c: see markers.h. */
#include "markers.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static void exercise_free(Exercise *e) {
    free(e->id);
    free(e->title);
    strlist_free(&e->tests);
    free(e->file);
    free(e->function);
    free(e->marker);
    free(e->doc);
    free(e->signature);
}

void exercises_free(ExerciseList *l) {
    for (int i = 0; i < l->n; i++) exercise_free(&l->items[i]);
    free(l->items);
    *l = (ExerciseList){0};
}

static void exercises_push(ExerciseList *l, Exercise e) {
    l->items = chapfs_xrealloc(l->items, sizeof(Exercise) * (size_t)(l->n + 1));
    l->items[l->n++] = e;
}

int exercises_find(const ExerciseList *l, const char *id) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].id, id) == 0) return i;
    return -1;
}

static int line_at(const char *s, size_t i) {
    int line = 1;
    for (size_t k = 0; k < i; k++) line += s[k] == '\n';
    return line;
}

/* If a comment or a string/char literal starts at s[i], the index after it; else i. */
static size_t skip_lexeme(const char *s, size_t n, size_t i) {
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
        const char *e = strstr(s + i + 2, "*/");
        return e && (size_t)(e - s) + 2 <= n ? (size_t)(e - s) + 2 : n;
    }
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
        while (i < n && s[i] != '\n') i++;
        return i;
    }
    if (s[i] == '"' || s[i] == '\'') {
        size_t j = i + 1;
        while (j < n && s[j] != s[i] && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
        return j < n ? j + 1 : n;
    }
    return i;
}

bool function_body(const char *src, const CFunc *f, size_t *start, size_t *end) {
    int parens = 0;
    for (size_t i = f->start; i < f->end;) {
        size_t j = skip_lexeme(src, f->end, i);
        if (j != i) {
            i = j;
            continue;
        }
        if (src[i] == '(') parens++;
        if (src[i] == ')') parens--;
        if (src[i] == '{' && parens == 0) {
            *start = i;
            *end = f->end;
            return true;
        }
        i++;
    }
    return false;
}

/* The block comment that ends right before `at` (only blanks between), as
 * [*cs, *ce); false if there is none. */
static bool comment_before(const char *s, size_t at, size_t *cs, size_t *ce) {
    size_t i = at;
    while (i > 0 && isspace((unsigned char)s[i - 1])) i--;
    if (i < 2 || s[i - 1] != '/' || s[i - 2] != '*') return false;
    for (size_t k = i - 2; k >= 2; k--) /* comments do not nest: the last opener is ours */
        if (s[k - 2] == '/' && s[k - 1] == '*') {
            *cs = k - 2;
            *ce = i;
            return true;
        }
    return false;
}

/* The text of the comment [cs, ce), blanks collapsed, without its delimiters. */
static char *comment_words(const char *s, size_t cs, size_t ce) {
    char *out = chapfs_xmalloc(ce - cs + 1);
    size_t n = 0;
    bool line_start = false; /* after a newline: the blanks and the '*' that start a comment's next line */
    for (size_t i = cs + 2; i + 2 < ce; i++) {
        if (s[i] == '\n') line_start = true;
        if (line_start && s[i] == '*' && s[i + 1] != '/') {
            line_start = false;
            continue;
        }
        if (isspace((unsigned char)s[i])) {
            if (n && out[n - 1] != ' ') out[n++] = ' ';
        } else {
            line_start = false;
            out[n++] = s[i];
        }
    }
    while (n && out[n - 1] == ' ') n--;
    out[n] = 0;
    return out;
}

/* A section banner such as "---- conv_sync ----": it names a group of tests, not the one below it. */
static bool is_banner(const char *words) {
    size_t n = strlen(words);
    return n >= 6 && strncmp(words, "---", 3) == 0 && strcmp(words + n - 3, "---") == 0;
}

static bool is_marker(const char *words) { return strncmp(words, "EXERCISE ", 9) == 0; }

/* Parses `EXERCISE id "title" N point(s); tests: a b`; NULL on success, else what is wrong. */
static const char *parse_marker(const char *w, Exercise *e) {
    const char *p = w + 9, *q;
    for (q = p; isalnum((unsigned char)*q) || *q == '-' || *q == '_'; q++) {}
    if (q == p || *q != ' ') return "expected an id (letters, digits, '-') after EXERCISE";
    e->id = chapfs_strndup(p, (size_t)(q - p));
    p = q + 1;
    if (*p != '"' || !(q = strchr(p + 1, '"')) || q == p + 1) return "expected a \"title\" after the id";
    e->title = chapfs_strndup(p + 1, (size_t)(q - p - 1));
    p = q + 1;
    char *num_end;
    long pts = strtol(p, &num_end, 10);
    if (num_end == p || pts < 1 || pts > 100) return "expected a number of points (1 to 100) after the title";
    e->points = (int)pts;
    p = num_end;
    if (strncmp(p, " points;", 8) == 0) p += 8;
    else if (strncmp(p, " point;", 7) == 0) p += 7;
    else return "expected \"points;\" after the number of points";
    if (strncmp(p, " tests:", 7) != 0) return "expected \"tests:\" and test-name substrings after \"points;\"";
    p += 7;
    while (*p) {
        while (*p == ' ') p++;
        for (q = p; *q && *q != ' '; q++) {}
        if (q > p) {
            char *t = chapfs_strndup(p, (size_t)(q - p));
            strlist_push(&e->tests, t);
            free(t);
        }
        p = q;
    }
    return e->tests.n ? NULL : "expected at least one test-name substring after \"tests:\"";
}

/* Text [a, b) without trailing blanks. */
static char *trimmed(const char *s, size_t a, size_t b) {
    while (b > a && isspace((unsigned char)s[b - 1])) b--;
    return chapfs_strndup(s + a, b - a);
}

void markers_scan_text(const char *file, const char *src, size_t len, ExerciseList *out, StrList *problems) {
    CFuncList fl;
    cfuncs_split(src, len, &fl);
    for (size_t i = 0; i < len;) {
        size_t j = skip_lexeme(src, len, i);
        if (j == i) {
            i++;
            continue;
        }
        bool block = src[i] == '/' && src[i + 1] == '*' && j >= i + 4;
        char *words = block ? comment_words(src, i, j) : NULL;
        if (words && is_marker(words)) {
            int line = line_at(src, i);
            const CFunc *f = NULL;
            for (int k = 0; k < fl.n && !f; k++) {
                size_t a = j, b = fl.funcs[k].start;
                while (a < b && isspace((unsigned char)src[a])) a++;
                if (a == b && b >= j) f = &fl.funcs[k];
            }
            Exercise e = {0};
            const char *why = parse_marker(words, &e);
            size_t body, end;
            if (!why && !f) why = "the marker is not right before a function definition";
            if (!why && !function_body(src, f, &body, &end)) why = "cannot find the marked function's body";
            if (why) {
                strlist_pushf(problems, "%s:%d: %s", file, line, why);
                exercise_free(&e);
            } else {
                size_t cs, ce;
                e.file = chapfs_strdup(file);
                e.function = chapfs_strdup(f->key);
                e.line = line;
                e.marker = chapfs_strndup(src + i, j - i);
                e.doc = comment_before(src, i, &cs, &ce) ? chapfs_strndup(src + cs, ce - cs) : chapfs_strdup("");
                e.signature = trimmed(src, f->start, body);
                exercises_push(out, e);
            }
        }
        free(words);
        i = j;
    }
    cfuncs_free(&fl);
}

/* A marked function without a doc comment of its own (a public one, say) is
 * described where it is declared: the comment above its prototype in a header. */
static char *doc_from_headers(const char *dir, const StrList *files, const char *name) {
    size_t nl = strlen(name);
    for (int f = 0; f < files->n; f++) {
        const char *path = files->items[f];
        size_t pl = strlen(path);
        if (pl < 2 || strcmp(path + pl - 2, ".h") != 0) continue;
        char *full = chapfs_printf("%s/%s", dir, path);
        size_t len = 0;
        char *src = chapfs_read(full, &len);
        free(full);
        char *doc = NULL;
        for (size_t i = 0; src && i < len && !doc;) {
            size_t j = skip_lexeme(src, len, i); /* a name in a comment is not a declaration */
            if (j != i) {
                i = j;
                continue;
            }
            if (!isalpha((unsigned char)src[i]) && src[i] != '_') {
                i++;
                continue;
            }
            for (j = i; j < len && (isalnum((unsigned char)src[j]) || src[j] == '_'); j++) {}
            if (j - i == nl && strncmp(src + i, name, nl) == 0 && src[j] == '(') {
                size_t at = i, cs, ce;
                while (at > 0 && src[at - 1] != '\n') at--; /* the declaration's first line */
                if (comment_before(src, at, &cs, &ce)) doc = chapfs_strndup(src + cs, ce - cs);
            }
            i = j;
        }
        free(src);
        if (doc) return doc;
    }
    return NULL;
}

int markers_scan_dir(const char *dir, ExerciseList *out, StrList *problems) {
    StrList files = {0};
    if (chapfs_list_files(dir, &files) != 0) {
        strlist_free(&files);
        return -1;
    }
    int first = out->n;
    for (int i = 0; i < files.n; i++) {
        if (!cfuncs_is_c_file(files.items[i])) continue;
        char *full = chapfs_printf("%s/%s", dir, files.items[i]);
        size_t len;
        char *src = chapfs_read(full, &len);
        StrList found = {0};
        if (src) markers_scan_text(files.items[i], src, len, out, &found);
        else strlist_pushf(problems, "%s: cannot read", full);
        for (int k = 0; k < found.n; k++) strlist_pushf(problems, "%s/%s", dir, found.items[k]);
        strlist_free(&found);
        free(src);
        free(full);
    }
    for (int i = first; i < out->n; i++) {
        Exercise *e = &out->items[i];
        if (*e->doc) continue;
        char *name = chapfs_strdup(e->function);
        char *hash = strchr(name, '#');
        if (hash) *hash = 0;
        char *doc = doc_from_headers(dir, &files, name);
        if (doc) {
            free(e->doc);
            e->doc = doc;
        }
        free(name);
    }
    strlist_free(&files);
    return 0;
}

/* ---- MANIFEST --------------------------------------------------------- */

/* What a MANIFEST says about files and functions (the subset exercises need). */
typedef struct {
    bool first;        /* "previous none" */
    char *previous;
    StrList added;     /* files */
    StrList whole;     /* "changed f": files changed with no function list */
    StrList listed;    /* "changed f: ...": the files */
    StrList functions; /* "changed f: g h": "f:g", "f:h" */
} Manifest;

static void manifest_free(Manifest *m) {
    free(m->previous);
    strlist_free(&m->added);
    strlist_free(&m->whole);
    strlist_free(&m->listed);
    strlist_free(&m->functions);
}

/* Splits a line into blank-separated words (at most max). */
static int words_of(char *line, char **w, int max) {
    int n = 0;
    for (char *t = strtok(line, " \t\r"); t && n < max; t = strtok(NULL, " \t\r")) w[n++] = t;
    return n;
}

static bool manifest_read(const char *path, Manifest *m) {
    *m = (Manifest){0};
    char *text = chapfs_read(path, NULL);
    if (!text) return false;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *w[256];
        int n = words_of(line, w, 256);
        if (n == 2 && strcmp(w[0], "previous") == 0) {
            m->first = strcmp(w[1], "none") == 0;
            if (!m->first) m->previous = chapfs_strdup(w[1]);
        } else if (n >= 2 && strcmp(w[0], "added") == 0) {
            for (int i = 1; i < n; i++) strlist_push(&m->added, w[i]);
        } else if (n >= 2 && strcmp(w[0], "changed") == 0) {
            size_t l = strlen(w[1]);
            if (w[1][l - 1] != ':') {
                for (int i = 1; i < n; i++) strlist_push(&m->whole, w[i]);
                continue;
            }
            w[1][l - 1] = 0;
            strlist_push(&m->listed, w[1]);
            for (int i = 2; i < n; i++) strlist_pushf(&m->functions, "%s:%s", w[1], w[i]);
        }
    }
    free(text);
    if (!m->first && !m->previous) m->first = true; /* no "previous" line: nothing to compare with */
    return true;
}

/* The text of function `key` in file, or NULL if either is missing. */
static char *function_text(const char *dir, const char *file, const char *key) {
    char *full = chapfs_printf("%s/%s", dir, file);
    size_t len;
    char *src = chapfs_read(full, &len);
    free(full);
    if (!src) return NULL;
    CFuncList fl;
    cfuncs_split(src, len, &fl);
    int k = cfuncs_find(&fl, key);
    char *text = k < 0 ? NULL : chapfs_strndup(src + fl.funcs[k].start, fl.funcs[k].end - fl.funcs[k].start);
    cfuncs_free(&fl);
    free(src);
    return text;
}

/* Whether the chapter adds or changes exercise e's function, by its MANIFEST. */
static bool is_new_here(const Manifest *m, const char *chapters_dir, const char *chapter, const Exercise *e) {
    if (m->first || strlist_find(&m->added, e->file) >= 0) return true;
    if (strlist_find(&m->listed, e->file) >= 0) {
        char *name = chapfs_strdup(e->function), *hash = strchr(name, '#');
        if (hash) *hash = 0;
        char *entry = chapfs_printf("%s:%s", e->file, name);
        bool listed = strlist_find(&m->functions, entry) >= 0;
        free(entry);
        free(name);
        return listed;
    }
    if (strlist_find(&m->whole, e->file) < 0) return false; /* an unchanged file */
    char *cur_dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    char *prev_dir = chapfs_printf("%s/%s", chapters_dir, m->previous);
    char *now = function_text(cur_dir, e->file, e->function);
    char *before = function_text(prev_dir, e->file, e->function);
    bool changed = !before || !now || strcmp(now, before) != 0;
    free(now);
    free(before);
    free(cur_dir);
    free(prev_dir);
    return changed;
}

int exercises_of_chapter(const char *chapters_dir, const char *chapter, ExerciseList *out, StrList *problems) {
    int before = problems->n;
    char *dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    char *mpath = chapfs_printf("%s/MANIFEST", dir);
    ExerciseList all = {0};
    Manifest m;
    if (markers_scan_dir(dir, &all, problems) != 0) {
        strlist_pushf(problems, "%s: no such chapter directory", dir);
    } else if (!manifest_read(mpath, &m)) {
        strlist_pushf(problems, "%s: cannot read", mpath);
    } else {
        for (int i = 0; i < all.n; i++) {
            Exercise *e = &all.items[i];
            if (!is_new_here(&m, chapters_dir, chapter, e)) continue;
            if (exercises_find(out, e->id) >= 0) {
                strlist_pushf(problems, "%s/%s:%d: exercise id '%s' is used twice", dir, e->file, e->line, e->id);
                continue;
            }
            exercises_push(out, *e);
            *e = (Exercise){0}; /* moved */
        }
        manifest_free(&m);
    }
    exercises_free(&all);
    free(mpath);
    free(dir);
    return problems->n - before;
}

/* ---- checks ----------------------------------------------------------- */

void chapter_tests(const char *tests_dir, const char *chapter, StrList *names, StrList *docs) {
    char *dir = chapfs_printf("%s/%s", tests_dir, chapter);
    StrList files = {0};
    chapfs_list_files(dir, &files);
    for (int i = 0; i < files.n; i++) {
        size_t l = strlen(files.items[i]);
        if (l < 2 || strcmp(files.items[i] + l - 2, ".c") != 0) continue;
        char *full = chapfs_printf("%s/%s", dir, files.items[i]);
        char *src = chapfs_read(full, NULL);
        free(full);
        for (char *p = src; p && (p = strstr(p, "TEST(")); p += 5) {
            if (p != src && p[-1] != '\n') continue;
            char *close = strchr(p + 5, ')');
            if (!close) break;
            char *name = trimmed(p, 5, (size_t)(close - p));
            size_t cs, ce;
            strlist_push(names, name);
            if (comment_before(src, (size_t)(p - src), &cs, &ce)) {
                char *doc = comment_words(src, cs, ce);
                strlist_push(docs, is_banner(doc) ? "" : doc);
                free(doc);
            } else {
                strlist_push(docs, "");
            }
            free(name);
        }
        free(src);
    }
    strlist_free(&files);
    free(dir);
}

/* The exercise of function `key` in file among the scanned list, or NULL. */
static const Exercise *exercise_of(const ExerciseList *l, const char *file, const char *key) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].file, file) == 0 && strcmp(l->items[i].function, key) == 0) return &l->items[i];
    return NULL;
}

/* Same function, same text in both chapters: the markers must agree. */
static void check_against_previous(const char *chapters_dir, const char *chapter, const char *previous,
                                   const ExerciseList *cur, const ExerciseList *prev, StrList *problems) {
    char *cur_dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    char *prev_dir = chapfs_printf("%s/%s", chapters_dir, previous);
    StrList files = {0};
    chapfs_list_files(cur_dir, &files);
    for (int i = 0; i < files.n; i++) {
        const char *f = files.items[i];
        if (!cfuncs_is_c_file(f)) continue;
        char *a_path = chapfs_printf("%s/%s", prev_dir, f), *b_path = chapfs_printf("%s/%s", cur_dir, f);
        size_t a_len = 0, b_len = 0;
        char *a = chapfs_read(a_path, &a_len), *b = chapfs_read(b_path, &b_len);
        if (a && b) {
            CFuncList af, bf;
            cfuncs_split(a, a_len, &af);
            cfuncs_split(b, b_len, &bf);
            for (int k = 0; k < bf.n; k++) {
                int j = cfuncs_find(&af, bf.funcs[k].key);
                if (j < 0) continue;
                const CFunc *x = &af.funcs[j], *y = &bf.funcs[k];
                bool same = x->end - x->start == y->end - y->start &&
                            memcmp(a + x->start, b + y->start, x->end - x->start) == 0;
                const Exercise *ea = exercise_of(prev, f, x->key), *eb = exercise_of(cur, f, y->key);
                if (same && (ea || eb) && (!ea || !eb || strcmp(ea->marker, eb->marker) != 0))
                    strlist_pushf(problems, "%s/%s: %s is unchanged from %s but its EXERCISE marker differs", cur_dir,
                                  f, y->name, previous);
                else if (ea && !eb && exercises_find(cur, ea->id) < 0) /* the answer would show here */
                    strlist_pushf(problems,
                                  "%s/%s: %s is exercise %s in %s, and no function here is: mark where its answer "
                                  "is now",
                                  cur_dir, f, y->name, ea->id, previous);
            }
            cfuncs_free(&af);
            cfuncs_free(&bf);
        }
        free(a);
        free(b);
        free(a_path);
        free(b_path);
    }
    strlist_free(&files);
    free(cur_dir);
    free(prev_dir);
}

/* Every marker of the chapter has a unique id; every exercise's tests exist. */
static void check_ids_and_tests(const char *chapters_dir, const char *tests_dir, const char *ch,
                                const ExerciseList *all, StrList *problems) {
    char *dir = chapfs_printf("%s/%s", chapters_dir, ch);
    for (int i = 0; i < all->n; i++) /* every marker, not only the chapter's exercises */
        for (int j = 0; j < i; j++)
            if (strcmp(all->items[i].id, all->items[j].id) == 0) {
                strlist_pushf(problems, "%s/%s:%d: exercise id '%s' is used twice", dir, all->items[i].file,
                              all->items[i].line, all->items[i].id);
                break;
            }
    ExerciseList mine = {0};
    StrList local = {0}, names = {0}, docs = {0};
    exercises_of_chapter(chapters_dir, ch, &mine, &local);
    for (int i = 0; i < local.n; i++) /* some are the ones found above */
        if (strlist_find(problems, local.items[i]) < 0) strlist_push(problems, local.items[i]);
    chapter_tests(tests_dir, ch, &names, &docs);
    for (int i = 0; i < mine.n; i++)
        for (int t = 0; t < mine.items[i].tests.n; t++) {
            bool found = false;
            for (int k = 0; k < names.n && !found; k++) found = strstr(names.items[k], mine.items[i].tests.items[t]);
            if (!found)
                strlist_pushf(problems, "%s/%s:%d: exercise %s: no test in %s/%s has '%s' in its name", dir,
                              mine.items[i].file, mine.items[i].line, mine.items[i].id, tests_dir, ch,
                              mine.items[i].tests.items[t]);
        }
    strlist_free(&local);
    strlist_free(&names);
    strlist_free(&docs);
    exercises_free(&mine);
    free(dir);
}

int markers_check(const char *chapters_dir, const char *tests_dir, StrList *problems) {
    int before = problems->n;
    StrList chapters = {0};
    if (chapfs_list_chapters(chapters_dir, &chapters) != 0) {
        strlist_pushf(problems, "%s: cannot read", chapters_dir);
        return 1;
    }
    for (int c = 0; c < chapters.n; c++) {
        const char *ch = chapters.items[c];
        char *dir = chapfs_printf("%s/%s", chapters_dir, ch);
        char *mpath = chapfs_printf("%s/MANIFEST", dir);
        StrList ignored = {0}; /* markers_scan_dir's problems: exercises_of_chapter reports them */
        ExerciseList all = {0};
        markers_scan_dir(dir, &all, &ignored);
        check_ids_and_tests(chapters_dir, tests_dir, ch, &all, problems);
        Manifest m;
        if (manifest_read(mpath, &m)) {
            if (m.previous) {
                char *pdir = chapfs_printf("%s/%s", chapters_dir, m.previous);
                ExerciseList prev = {0};
                markers_scan_dir(pdir, &prev, &ignored);
                check_against_previous(chapters_dir, ch, m.previous, &all, &prev, problems);
                exercises_free(&prev);
                free(pdir);
            }
            manifest_free(&m);
        }
        strlist_free(&ignored);
        exercises_free(&all);
        free(mpath);
        free(dir);
    }
    strlist_free(&chapters);
    return problems->n - before;
}
