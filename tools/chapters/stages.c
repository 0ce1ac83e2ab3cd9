/* stages.c: see stages.h. */
#define _XOPEN_SOURCE 700
#include "stages.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "manifest.h"

static void push_stage(StageList *l, const char *chapter, const char *id, const char *before, const char *title) {
    l->items = chapfs_xrealloc(l->items, sizeof(Stage) * (size_t)(l->n + 1));
    l->items[l->n++] = (Stage){chapfs_strdup(chapter), chapfs_strdup(id), chapfs_strdup(before), chapfs_strdup(title)};
}

/* Parses chapters_dir/chapter/MANIFEST into m; false (with a problem) if it cannot. */
static bool read_manifest(const char *chapters_dir, const char *chapter, Manifest *m, StrList *problems) {
    char *path = chapfs_printf("%s/%s/MANIFEST", chapters_dir, chapter);
    char *text = chapfs_read(path, NULL);
    free(path);
    if (!text) {
        strlist_pushf(problems, "%s: no MANIFEST", chapter);
        *m = (Manifest){0};
        return false;
    }
    bool ok = manifest_parse(text, chapter, m, problems) == 0;
    free(text);
    return ok;
}

int stages_list(const char *chapters_dir, StageList *out, StrList *problems) {
    int before = problems->n;
    StrList chapters = {0};
    if (chapfs_list_chapters(chapters_dir, &chapters) < 0)
        strlist_pushf(problems, "cannot read the chapters directory %s", chapters_dir);
    for (int c = 0; c < chapters.n; c++) {
        const char *ch = chapters.items[c], *prev = chapfs_previous(&chapters, ch);
        if (!prev) continue; /* the first chapter: nothing before it to differ from */
        Manifest m;
        if (read_manifest(chapters_dir, ch, &m, problems)) {
            if (m.n_stages == 0) push_stage(out, ch, ch, prev, "");
            for (int s = 0; s < m.n_stages; s++)
                push_stage(out, ch, m.stages[s].id, s ? m.stages[s - 1].id : prev, m.stages[s].title);
        }
        manifest_free(&m);
    }
    strlist_free(&chapters);
    return problems->n - before;
}

void stages_free(StageList *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->items[i].chapter);
        free(l->items[i].id);
        free(l->items[i].before);
        free(l->items[i].title);
    }
    free(l->items);
    *l = (StageList){0};
}

const Stage *stages_find(const StageList *l, const char *id) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].id, id) == 0) return &l->items[i];
    return NULL;
}

static bool write_text(const char *path, const char *text, size_t len) {
    FILE *f = chapfs_make_parents(path) ? fopen(path, "wb") : NULL;
    bool ok = f && fwrite(text, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = false;
    return ok;
}

/* Copies src_dir/file to dst_dir/file. */
static bool copy_file(const char *src_dir, const char *dst_dir, const char *file) {
    char *from = chapfs_printf("%s/%s", src_dir, file), *to = chapfs_printf("%s/%s", dst_dir, file);
    size_t len;
    char *text = chapfs_read(from, &len);
    bool ok = text && write_text(to, text, len);
    free(text);
    free(from);
    free(to);
    return ok;
}

/* dst_dir: a copy of every file of src_dir. */
static bool copy_tree(const char *src_dir, const char *dst_dir) {
    StrList files = {0};
    bool ok = chapfs_list_files(src_dir, &files) == 0;
    for (int i = 0; i < files.n && ok; i++) ok = copy_file(src_dir, dst_dir, files.items[i]);
    strlist_free(&files);
    return ok;
}

/* Applies one stage to the view in dir: its files as the chapter has them, or gone. */
static bool apply_stage(const char *chapter_dir, const ManifestStage *st, const char *dir) {
    bool ok = true;
    for (int i = 0; i < st->files.n && ok; i++) {
        char *in_chapter = chapfs_printf("%s/%s", chapter_dir, st->files.items[i]);
        if (chapfs_is_file(in_chapter)) {
            ok = copy_file(chapter_dir, dir, st->files.items[i]);
        } else {
            char *gone = chapfs_printf("%s/%s", dir, st->files.items[i]);
            remove(gone);
            free(gone);
        }
        free(in_chapter);
    }
    return ok;
}

/* The view after the first `upto` stages of m, in dir. */
static bool write_view(const char *chapters_dir, const char *prev, const char *chapter, const Manifest *m, int upto,
                       const char *dir) {
    char *prev_dir = chapfs_printf("%s/%s", chapters_dir, prev), *ch_dir = chapfs_printf("%s/%s", chapters_dir, chapter);
    bool ok = mkdir(dir, 0777) == 0 && copy_tree(prev_dir, dir);
    for (int s = 0; s < upto && ok; s++) ok = apply_stage(ch_dir, &m->stages[s], dir);
    free(prev_dir);
    free(ch_dir);
    return ok;
}

int stages_write_views(const char *chapters_dir, const Stage *s, const char *out_dir, char *err, size_t err_len) {
    StrList problems = {0}, chapters = {0};
    Manifest m = {0};
    chapfs_list_chapters(chapters_dir, &chapters);
    const char *prev = chapfs_previous(&chapters, s->chapter);
    int rc = 0;
    if (!prev || !read_manifest(chapters_dir, s->chapter, &m, &problems)) {
        snprintf(err, err_len, "%s: %s", s->chapter, problems.n ? problems.items[0] : "no chapter before it");
        rc = -1;
    } else if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, err_len, "cannot create %s: %s", out_dir, strerror(errno));
        rc = -1;
    } else {
        int k = 0;
        while (k < m.n_stages && strcmp(m.stages[k].id, s->id) != 0) k++;
        char *before = chapfs_printf("%s/%s", out_dir, s->before), *after = chapfs_printf("%s/%s", out_dir, s->id);
        char *manifest = chapfs_printf("%s/MANIFEST", after);
        bool ok;
        if (m.n_stages == 0) { /* the whole chapter is the stage: the two chapters themselves */
            char *ch = chapfs_printf("%s/%s", chapters_dir, s->chapter), *pv = chapfs_printf("%s/%s", chapters_dir, prev);
            ok = mkdir(before, 0777) == 0 && copy_tree(pv, before) && mkdir(after, 0777) == 0 && copy_tree(ch, after) &&
                 copy_file(ch, after, "MANIFEST");
            free(ch);
            free(pv);
        } else {
            char *text = chapfs_printf("previous %s\n%s", s->before, m.stages[k].text);
            ok = write_view(chapters_dir, prev, s->chapter, &m, k, before) &&
                 write_view(chapters_dir, prev, s->chapter, &m, k + 1, after) &&
                 write_text(manifest, text, strlen(text));
            free(text);
        }
        if (!ok) {
            snprintf(err, err_len, "cannot write the views of stage %s in %s", s->id, out_dir);
            rc = -1;
        }
        free(before);
        free(after);
        free(manifest);
    }
    manifest_free(&m);
    strlist_free(&problems);
    strlist_free(&chapters);
    return rc;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

void stages_remove_dir(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
