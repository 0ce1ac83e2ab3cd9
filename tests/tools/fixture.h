/* fixture.h: scratch copies of the chapters for the tools' tests, so that
 * drift can be planted without touching chapters/. Header-only: each test
 * file includes it and uses what it needs. */
#ifndef TOOLS_FIXTURE_H
#define TOOLS_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cfuncs.h"
#include "chapfs.h"
#include "harness.h"

/* Runs a shell command; the test fails if it does not succeed. */
static inline void fx_sh(const char *cmd) {
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "command failed (%d): %s", rc, cmd);
}

/* Runs a shell command with stdout and stderr captured into *out (malloc'd);
 * returns its exit code (-1 if it could not run). */
static inline int fx_capture(const char *cmd, char **out) {
    char *full = chapfs_printf("(%s) >'%s' 2>&1", cmd, test_tmp_path("capture.out"));
    int rc = system(full);
    free(full);
    *out = chapfs_read(test_tmp_path("capture.out"), NULL);
    if (!*out) *out = chapfs_strdup("");
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A fresh directory `name` in the test scratch area holding copies of the
 * given chapters from chapters/ (NULL-terminated). Returns a malloc'd path. */
static inline char *fx_chapters(const char *name, const char *const *chapters) {
    char *dir = chapfs_strdup(test_tmp_path(name));
    char *cmd = chapfs_printf("rm -rf '%s' && mkdir -p '%s'", dir, dir);
    fx_sh(cmd);
    free(cmd);
    for (int i = 0; chapters[i]; i++) {
        cmd = chapfs_printf("cp -R 'chapters/%s' '%s/'", chapters[i], dir);
        fx_sh(cmd);
        free(cmd);
    }
    return dir;
}

static inline void fx_write(const char *dir, const char *file, const char *text) {
    char *path = chapfs_printf("%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(path);
}

/* Copies chapter `from` of dir as chapter `to`, with the given MANIFEST. */
static inline void fx_copy_chapter(const char *dir, const char *from, const char *to, const char *manifest) {
    char *cmd = chapfs_printf("cp -R '%s/%s' '%s/%s'", dir, from, dir, to);
    fx_sh(cmd);
    free(cmd);
    char *sub = chapfs_printf("%s/%s", dir, to);
    fx_write(sub, "MANIFEST", manifest);
    free(sub);
}

static inline void fx_remove(const char *dir, const char *file) {
    char *path = chapfs_printf("%s/%s", dir, file);
    CHECK_MSG(remove(path) == 0, "cannot remove %s", path);
    free(path);
}

/* Replaces the first `old` in dir/file with `new`; the test fails if it is absent. */
static inline void fx_replace(const char *dir, const char *file, const char *old, const char *new) {
    char *path = chapfs_printf("%s/%s", dir, file);
    char *text = chapfs_read(path, NULL);
    char *at = text ? strstr(text, old) : NULL;
    CHECK_MSG(at != NULL, "'%s' not found in %s", old, path);
    if (at) {
        FILE *f = fopen(path, "w");
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(new, f);
        fputs(at + strlen(old), f);
        fclose(f);
    }
    free(text);
    free(path);
}

/* Inserts `line` (with its '\n') into dir/file at byte offset at. */
static inline void fx_insert_at(const char *dir, const char *file, size_t at, const char *line) {
    char *path = chapfs_printf("%s/%s", dir, file);
    size_t len = 0;
    char *text = chapfs_read(path, &len);
    CHECK_MSG(text && at <= len, "cannot read %s", path);
    FILE *f = text ? fopen(path, "wb") : NULL;
    if (f) {
        fwrite(text, 1, at, f);
        fputs(line, f);
        fwrite(text + at, 1, len - at, f);
        fclose(f);
    }
    free(text);
    free(path);
}

/* Adds a statement as the last line of function fn in dir/file (a drift planted inside it). */
static inline void fx_plant_in_function(const char *dir, const char *file, const char *fn) {
    char *path = chapfs_printf("%s/%s", dir, file);
    size_t len = 0;
    char *text = chapfs_read(path, &len);
    CFuncList l = {0};
    if (text) cfuncs_split(text, len, &l);
    int i = cfuncs_find(&l, fn);
    CHECK_MSG(i >= 0, "no function %s in %s", fn, path);
    if (i >= 0) fx_insert_at(dir, file, l.funcs[i].end - 1, "    (void)0; /* planted */\n");
    cfuncs_free(&l);
    free(text);
    free(path);
}

/* The names of the functions in dir/file, in order. */
static inline StrList fx_functions(const char *dir, const char *file) {
    char *path = chapfs_printf("%s/%s", dir, file);
    size_t len = 0;
    char *text = chapfs_read(path, &len);
    CFuncList l = {0};
    if (text) cfuncs_split(text, len, &l);
    StrList names = {0};
    for (int i = 0; i < l.n; i++) strlist_push(&names, l.funcs[i].key);
    cfuncs_free(&l);
    free(text);
    free(path);
    return names;
}

#endif
