/* manifest.c: see manifest.h. */
#include "manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfuncs.h"

/* ---- parsing ------------------------------------------------------------- */

/* Files already mentioned, with the line that mentioned them; the manifest
 * being read, whose last stage (if any) the declarations belong to. */
typedef struct {
    StrList files;
    int *lines;
    Manifest *m;
    int unstaged_line; /* the first declaration under no stage, 0 if none */
} Mentions;

/* The words of one line, comment removed. */
static void split_words(const char *line, StrList *words) {
    char *copy = chapfs_strdup(line);
    char *hash = strchr(copy, '#');
    if (hash) *hash = 0;
    char *save = NULL;
    for (char *w = strtok_r(copy, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) strlist_push(words, w);
    free(copy);
}

static void mention(Mentions *ms, const char *file, int line, const char *chapter, StrList *problems) {
    if (strcmp(file, "MANIFEST") == 0) {
        strlist_pushf(problems, "%s: MANIFEST line %d: the MANIFEST itself is not compared; do not list it", chapter,
                      line);
        return;
    }
    int i = strlist_find(&ms->files, file);
    if (i >= 0) {
        strlist_pushf(problems, "%s: MANIFEST line %d: %s is already mentioned on line %d", chapter, line, file,
                      ms->lines[i]);
        return;
    }
    strlist_push(&ms->files, file);
    ms->lines = chapfs_xrealloc(ms->lines, sizeof(int) * (size_t)ms->files.n);
    ms->lines[ms->files.n - 1] = line;
    if (ms->m->n_stages) strlist_push(&ms->m->stages[ms->m->n_stages - 1].files, file);
    else if (!ms->unstaged_line) ms->unstaged_line = line;
}

/* "stage <id> <title...>": the declarations that follow are that lesson's. */
static void parse_stage(Manifest *m, const StrList *w, int line, const char *chapter,
                        StrList *problems) {
    if (w->n < 3) {
        strlist_pushf(problems, "%s: MANIFEST line %d: expected 'stage <id> <title>'", chapter, line);
        return;
    }
    for (int i = 0; i < m->n_stages; i++)
        if (strcmp(m->stages[i].id, w->items[1]) == 0) {
            strlist_pushf(problems, "%s: MANIFEST line %d: stage %s is already declared on line %d", chapter, line,
                          w->items[1], m->stages[i].line);
            return;
        }
    StrList title = {0};
    for (int i = 2; i < w->n; i++) strlist_push(&title, w->items[i]);
    m->stages = chapfs_xrealloc(m->stages, sizeof(ManifestStage) * (size_t)(m->n_stages + 1));
    m->stages[m->n_stages++] = (ManifestStage){chapfs_strdup(w->items[1]), strlist_join(&title, " "), line, {0}, NULL};
    strlist_free(&title);
}

static void parse_previous(Manifest *m, const StrList *w, int line, const char *chapter, StrList *problems) {
    if (m->has_previous)
        strlist_pushf(problems, "%s: MANIFEST line %d: a second 'previous' line", chapter, line);
    else if (w->n != 2)
        strlist_pushf(problems, "%s: MANIFEST line %d: expected 'previous <chapter>' or 'previous none'", chapter,
                      line);
    else {
        m->has_previous = true;
        m->previous = strcmp(w->items[1], "none") == 0 ? NULL : chapfs_strdup(w->items[1]);
    }
}

static void add_change(Manifest *m, const char *file, bool by_function, int line) {
    m->changed = chapfs_xrealloc(m->changed, sizeof(ManifestChange) * (size_t)(m->n_changed + 1));
    m->changed[m->n_changed++] = (ManifestChange){chapfs_strdup(file), by_function, {0}, line};
}

/* "changed <file>: <fns...>": the text after the keyword holds a colon. */
static void parse_changed_fns(Manifest *m, Mentions *ms, const char *rest, int line, const char *chapter,
                              StrList *problems) {
    const char *colon = strchr(rest, ':');
    char *left = chapfs_strndup(rest, (size_t)(colon - rest));
    StrList files = {0}, fns = {0};
    split_words(left, &files);
    split_words(colon + 1, &fns);
    free(left);
    if (files.n != 1) {
        strlist_pushf(problems, "%s: MANIFEST line %d: expected 'changed <file>: <functions...>'", chapter, line);
    } else if (!cfuncs_is_c_file(files.items[0])) {
        strlist_pushf(problems, "%s: MANIFEST line %d: %s is not a .c or .h file, so it has no function list",
                      chapter, line, files.items[0]);
    } else {
        mention(ms, files.items[0], line, chapter, problems);
        add_change(m, files.items[0], true, line);
        ManifestChange *c = &m->changed[m->n_changed - 1];
        for (int i = 0; i < fns.n; i++) {
            if (strlist_find(&c->fns, fns.items[i]) >= 0)
                strlist_pushf(problems, "%s: MANIFEST line %d: function %s is listed twice", chapter, line,
                              fns.items[i]);
            else strlist_push(&c->fns, fns.items[i]);
        }
    }
    strlist_free(&files);
    strlist_free(&fns);
}

static void parse_files(StrList *list, Mentions *ms, const StrList *w, int line, const char *chapter,
                        StrList *problems) {
    if (w->n < 2) strlist_pushf(problems, "%s: MANIFEST line %d: '%s' needs at least one file", chapter, line,
                                w->items[0]);
    for (int i = 1; i < w->n; i++) {
        mention(ms, w->items[i], line, chapter, problems);
        if (list) strlist_push(list, w->items[i]);
    }
}

static void parse_line(Manifest *m, Mentions *ms, const char *text, int line, const char *chapter,
                       StrList *problems) {
    StrList w = {0};
    split_words(text, &w);
    if (w.n == 0) {
        strlist_free(&w);
        return;
    }
    const char *kw = w.items[0];
    if (strcmp(kw, "previous") == 0) {
        parse_previous(m, &w, line, chapter, problems);
    } else if (strcmp(kw, "stage") == 0) {
        parse_stage(m, &w, line, chapter, problems);
    } else if (strcmp(kw, "added") == 0) {
        parse_files(&m->added, ms, &w, line, chapter, problems);
    } else if (strcmp(kw, "removed") == 0) {
        parse_files(&m->removed, ms, &w, line, chapter, problems);
    } else if (strcmp(kw, "changed") == 0) {
        char *body = chapfs_strdup(text);
        char *hash = strchr(body, '#');
        if (hash) *hash = 0;
        const char *rest = strstr(body, "changed") + strlen("changed");
        if (strchr(rest, ':')) {
            parse_changed_fns(m, ms, rest, line, chapter, problems);
        } else {
            parse_files(NULL, ms, &w, line, chapter, problems);
            for (int i = 1; i < w.n; i++) add_change(m, w.items[i], false, line);
        }
        free(body);
    } else {
        strlist_pushf(problems, "%s: MANIFEST line %d: unknown directive '%s' (expected previous, stage, added, "
                      "removed or changed)", chapter, line, kw);
    }
    strlist_free(&w);
}

int manifest_parse(const char *text, const char *chapter, Manifest *m, StrList *problems) {
    *m = (Manifest){0};
    int before = problems->n;
    Mentions ms = {.m = m};
    int line = 1;
    const char *stage_start = NULL; /* where the current stage's text begins */
    for (const char *p = text; *p; line++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *one = chapfs_strndup(p, len);
        int stages_before = m->n_stages;
        parse_line(m, &ms, one, line, chapter, problems);
        if (m->n_stages != stages_before) { /* a stage line: the one before ends here */
            if (stages_before) m->stages[stages_before - 1].text = chapfs_strndup(stage_start, (size_t)(p - stage_start));
            stage_start = p;
        }
        free(one);
        p += len + (nl != NULL);
    }
    if (m->n_stages) m->stages[m->n_stages - 1].text = chapfs_strdup(stage_start);
    if (!m->has_previous)
        strlist_pushf(problems, "%s: MANIFEST has no 'previous <chapter>|none' line", chapter);
    if (ms.unstaged_line && m->n_stages)
        strlist_pushf(problems, "%s: MANIFEST line %d declares a change under no stage: put a 'stage <id> <title>' "
                      "line above it (each book stage's diff is made of its declarations)", chapter, ms.unstaged_line);
    strlist_free(&ms.files);
    free(ms.lines);
    return problems->n - before;
}

void manifest_free(Manifest *m) {
    free(m->previous);
    strlist_free(&m->added);
    strlist_free(&m->removed);
    for (int i = 0; i < m->n_changed; i++) {
        free(m->changed[i].file);
        strlist_free(&m->changed[i].fns);
    }
    free(m->changed);
    for (int i = 0; i < m->n_stages; i++) {
        free(m->stages[i].id);
        free(m->stages[i].title);
        free(m->stages[i].text);
        strlist_free(&m->stages[i].files);
    }
    free(m->stages);
    *m = (Manifest){0};
}

/* ---- checking ------------------------------------------------------------ */

/* One chapter's check: the two directories, their files, where problems go. */
typedef struct {
    const char *chapter, *prev;
    char *dir, *prev_dir;
    StrList files, prev_files;
    StrList *problems;
    ManifestStats *st;
} Check;

/* Both versions of a file. */
typedef struct {
    char *old, *new;
    size_t old_len, new_len;
} Pair;

static bool read_pair(Check *c, const char *file, Pair *p) {
    char *a = chapfs_printf("%s/%s", c->prev_dir, file), *b = chapfs_printf("%s/%s", c->dir, file);
    p->old = chapfs_read(a, &p->old_len);
    p->new = chapfs_read(b, &p->new_len);
    if (!p->old || !p->new)
        strlist_pushf(c->problems, "%s: cannot read %s", c->chapter, p->old ? b : a);
    free(a);
    free(b);
    return p->old && p->new;
}

static void free_pair(Pair *p) {
    free(p->old);
    free(p->new);
}

static bool pair_same(const Pair *p) {
    return p->old_len == p->new_len && memcmp(p->old, p->new, p->old_len) == 0;
}

/* 1-based line of the new version where the two first differ. */
static int first_diff_line(const Pair *p) {
    int line = 1;
    for (size_t i = 0; i < p->old_len && i < p->new_len && p->old[i] == p->new[i]; i++) line += p->new[i] == '\n';
    return line;
}

/* Where a function is, for messages: its line in the version that has it. */
static int fn_line(const FnDiff *d) { return d->new ? d->new->line : d->old->line; }

/* "function a changed (line 3); function b added (line 9)" for the functions that differ. */
static char *describe_fn_diffs(const FnDiff *d, int n) {
    StrList parts = {0};
    for (int i = 0; i < n; i++)
        if (d[i].status != FN_SAME)
            strlist_pushf(&parts, "function %s %s (line %d)", d[i].name, cfuncs_status_name(d[i].status),
                          fn_line(&d[i]));
    char *s = strlist_join(&parts, "; ");
    strlist_free(&parts);
    return s;
}

/* A file the manifest does not mention: it must be the same in both chapters. */
static void check_unlisted(Check *c, const char *file) {
    Pair p;
    if (!read_pair(c, file, &p)) return;
    if (pair_same(&p)) {
        c->st->unchanged++;
        free_pair(&p);
        return;
    }
    char *what = NULL;
    if (cfuncs_is_c_file(file)) {
        CFuncList a, b;
        FnDiff *d;
        cfuncs_split(p.old, p.old_len, &a);
        cfuncs_split(p.new, p.new_len, &b);
        what = describe_fn_diffs(d, cfuncs_compare(p.old, &a, p.new, &b, &d));
        free(d);
        cfuncs_free(&a);
        cfuncs_free(&b);
    }
    if (what && *what)
        strlist_pushf(c->problems, "%s: %s differs from %s but is not in the manifest: %s", c->chapter, file,
                      c->prev, what);
    else
        strlist_pushf(c->problems, "%s: %s differs from %s but is not in the manifest (first difference at line %d)",
                      c->chapter, file, c->prev, first_diff_line(&p));
    free(what);
    free_pair(&p);
}

/* Whether any entry named `name` differs. */
static bool name_differs(const FnDiff *d, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(d[i].name, name) == 0 && d[i].status != FN_SAME) return true;
    return false;
}

static bool name_exists(const FnDiff *d, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(d[i].name, name) == 0) return true;
    return false;
}

/* "changed <file>: <fns>": exactly the listed functions differ. */
static void check_functions(Check *c, const ManifestChange *mc, const Pair *p) {
    CFuncList a, b;
    FnDiff *d;
    cfuncs_split(p->old, p->old_len, &a);
    cfuncs_split(p->new, p->new_len, &b);
    int n = cfuncs_compare(p->old, &a, p->new, &b, &d);
    for (int i = 0; i < n; i++) {
        if (d[i].status == FN_SAME) continue;
        c->st->fns_changed++;
        if (strlist_find(&mc->fns, d[i].name) < 0)
            strlist_pushf(c->problems, "%s: %s: function %s %s (line %d) but is not declared on MANIFEST line %d",
                          c->chapter, mc->file, d[i].name, cfuncs_status_name(d[i].status), fn_line(&d[i]), mc->line);
    }
    for (int k = 0; k < mc->fns.n; k++) {
        const char *fn = mc->fns.items[k];
        if (!name_exists(d, n, fn))
            strlist_pushf(c->problems, "%s: %s: function %s is declared (MANIFEST line %d) but exists in neither %s "
                          "nor %s", c->chapter, mc->file, fn, mc->line, c->prev, c->chapter);
        else if (!name_differs(d, n, fn))
            strlist_pushf(c->problems, "%s: %s: function %s is declared changed (MANIFEST line %d) but is identical "
                          "in %s and %s", c->chapter, mc->file, fn, mc->line, c->prev, c->chapter);
    }
    free(d);
    cfuncs_free(&a);
    cfuncs_free(&b);
}

static void check_changed(Check *c, const ManifestChange *mc) {
    bool in_old = strlist_find(&c->prev_files, mc->file) >= 0, in_new = strlist_find(&c->files, mc->file) >= 0;
    if (!in_old && !in_new) {
        strlist_pushf(c->problems, "%s: %s is declared changed (MANIFEST line %d) but exists in neither %s nor %s",
                      c->chapter, mc->file, mc->line, c->prev, c->chapter);
        return;
    }
    if (!in_old || !in_new) {
        strlist_pushf(c->problems, "%s: %s is declared changed (MANIFEST line %d) but does not exist in %s (declare "
                      "it %s instead)", c->chapter, mc->file, mc->line, in_old ? c->chapter : c->prev,
                      in_old ? "removed" : "added");
        return;
    }
    Pair p;
    if (!read_pair(c, mc->file, &p)) return;
    c->st->changed++;
    if (pair_same(&p))
        strlist_pushf(c->problems, "%s: %s is declared changed (MANIFEST line %d) but is identical in %s and %s",
                      c->chapter, mc->file, mc->line, c->prev, c->chapter);
    else if (mc->by_function)
        check_functions(c, mc, &p);
    free_pair(&p);
}

static void check_added(Check *c, const char *file) {
    if (strlist_find(&c->prev_files, file) >= 0)
        strlist_pushf(c->problems, "%s: %s is declared added but already exists in %s", c->chapter, file, c->prev);
    else if (strlist_find(&c->files, file) < 0)
        strlist_pushf(c->problems, "%s: %s is declared added but does not exist in %s", c->chapter, file, c->chapter);
    else
        c->st->added++;
}

static void check_removed(Check *c, const char *file) {
    if (strlist_find(&c->prev_files, file) < 0)
        strlist_pushf(c->problems, "%s: %s is declared removed but does not exist in %s", c->chapter, file, c->prev);
    else if (strlist_find(&c->files, file) >= 0)
        strlist_pushf(c->problems, "%s: %s is declared removed but still exists in %s", c->chapter, file, c->chapter);
    else
        c->st->removed++;
}

static bool mentioned(const Manifest *m, const char *file) {
    if (strlist_find(&m->added, file) >= 0 || strlist_find(&m->removed, file) >= 0) return true;
    for (int i = 0; i < m->n_changed; i++)
        if (strcmp(m->changed[i].file, file) == 0) return true;
    return false;
}

/* Every file of either chapter that the manifest does not mention. */
static void check_rest(Check *c, const Manifest *m) {
    for (int i = 0; i < c->prev_files.n; i++) {
        const char *f = c->prev_files.items[i];
        if (mentioned(m, f)) continue;
        if (strlist_find(&c->files, f) < 0)
            strlist_pushf(c->problems, "%s: %s is in %s but missing from %s, and not declared removed", c->chapter,
                          f, c->prev, c->chapter);
        else
            check_unlisted(c, f);
    }
    for (int i = 0; i < c->files.n; i++) {
        const char *f = c->files.items[i];
        if (!mentioned(m, f) && strlist_find(&c->prev_files, f) < 0)
            strlist_pushf(c->problems, "%s: %s is new in %s but not declared added", c->chapter, f, c->chapter);
    }
}

static void check_against_previous(Check *c, const Manifest *m) {
    for (int i = 0; i < m->added.n; i++) check_added(c, m->added.items[i]);
    for (int i = 0; i < m->removed.n; i++) check_removed(c, m->removed.items[i]);
    for (int i = 0; i < m->n_changed; i++) check_changed(c, &m->changed[i]);
    check_rest(c, m);
}

/* The `previous` line against book order; false for the first chapter (nothing to compare). */
static bool check_previous_line(Check *c, const Manifest *m) {
    if (!m->has_previous) return c->prev != NULL;
    const char *said = m->previous ? m->previous : "none";
    if (!c->prev) {
        if (m->previous)
            strlist_pushf(c->problems, "%s: MANIFEST says 'previous %s' but %s is the first chapter (expected "
                          "'previous none')", c->chapter, said, c->chapter);
        if (m->added.n || m->removed.n || m->n_changed)
            strlist_pushf(c->problems, "%s: the first chapter has nothing before it; remove its added/removed/changed "
                          "lines", c->chapter);
        return false;
    }
    if (!m->previous || strcmp(m->previous, c->prev) != 0)
        strlist_pushf(c->problems, "%s: MANIFEST says 'previous %s' but the chapter before %s in book order is %s",
                      c->chapter, said, c->chapter, c->prev);
    return true;
}

/* Lists the chapters, finds the one before c->chapter; false with a problem if it is unknown. */
static bool locate_chapter(Check *c, const char *chapters_dir) {
    StrList chapters = {0};
    if (chapfs_list_chapters(chapters_dir, &chapters) < 0) {
        strlist_pushf(c->problems, "%s: cannot read the chapters directory %s", c->chapter, chapters_dir);
        return false;
    }
    bool known = strlist_find(&chapters, c->chapter) >= 0;
    if (!known) {
        char *all = strlist_join(&chapters, " ");
        strlist_pushf(c->problems, "%s: no such chapter in %s (chapters: %s)", c->chapter, chapters_dir, all);
        free(all);
    }
    const char *prev = chapfs_previous(&chapters, c->chapter);
    c->prev = prev ? chapfs_strdup(prev) : NULL;
    strlist_free(&chapters);
    return known;
}

/* Reads and parses the chapter's MANIFEST; false with a problem if it is missing. */
static bool load_manifest(Check *c, Manifest *m) {
    char *path = chapfs_printf("%s/MANIFEST", c->dir);
    char *text = chapfs_read(path, NULL);
    free(path);
    if (!text) {
        strlist_pushf(c->problems, "%s: no MANIFEST (every chapter declares what it changes)", c->chapter);
        return false;
    }
    manifest_parse(text, c->chapter, m, c->problems);
    free(text);
    return true;
}

int manifest_check_chapter(const char *chapters_dir, const char *chapter, StrList *problems, ManifestStats *stats) {
    ManifestStats local;
    if (!stats) stats = &local;
    *stats = (ManifestStats){0};
    int before = problems->n;
    Check c = {.chapter = chapter, .problems = problems, .st = stats};
    Manifest m = {0};
    if (locate_chapter(&c, chapters_dir)) {
        c.dir = chapfs_printf("%s/%s", chapters_dir, chapter);
        if (load_manifest(&c, &m) && check_previous_line(&c, &m)) {
            c.prev_dir = chapfs_printf("%s/%s", chapters_dir, c.prev);
            chapfs_list_files(c.dir, &c.files);
            chapfs_list_files(c.prev_dir, &c.prev_files);
            check_against_previous(&c, &m);
        }
    }
    if (c.prev) snprintf(stats->previous, sizeof stats->previous, "%s", c.prev);
    manifest_free(&m);
    strlist_free(&c.files);
    strlist_free(&c.prev_files);
    free(c.dir);
    free(c.prev_dir);
    free((char *)c.prev);
    return problems->n - before;
}
