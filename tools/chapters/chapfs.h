/* chapfs.h: what the chapter tools need from the file system, with no project
 * dependencies (they must build even when common/ or a chapter does not):
 * growable string lists, whole-file reads, and chapter directory listings. */
#ifndef CHAPFS_H
#define CHAPFS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char **items;
    int n, cap;
} StrList;

void strlist_push(StrList *l, const char *s); /* pushes a copy */
void strlist_pushf(StrList *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int strlist_find(const StrList *l, const char *s); /* index, or -1 */
void strlist_sort(StrList *l);
void strlist_free(StrList *l);
/* "a, b, c" (malloc'd). */
char *strlist_join(const StrList *l, const char *sep);

void *chapfs_xmalloc(size_t n);
void *chapfs_xrealloc(void *p, size_t n);
char *chapfs_strdup(const char *s);
char *chapfs_strndup(const char *s, size_t n);
char *chapfs_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* mkdir -p for the directory part of path (everything before its last '/'). */
bool chapfs_make_parents(const char *path);

/* The whole file, NUL-terminated (len excludes the NUL); NULL if unreadable. */
char *chapfs_read(const char *path, size_t *len);
bool chapfs_is_dir(const char *path);
bool chapfs_is_file(const char *path);

/* The chapters under dir: its subdirectories, sorted by name, which is book
 * order. Returns -1 if dir cannot be read. */
int chapfs_list_chapters(const char *dir, StrList *out);
/* The files of one chapter, as sorted paths relative to dir, recursing into
 * subdirectories. Hidden files (editor droppings) and the MANIFEST at the top
 * are left out: they are not part of the snapshot being compared. */
int chapfs_list_files(const char *dir, StrList *out);

/* The chapter before `chapter` in book order, or NULL for the first one (or an unknown one). */
const char *chapfs_previous(const StrList *chapters, const char *chapter);

#endif
