/* chapfs.c: see chapfs.h. */
#include "chapfs.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void *chapfs_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

void *chapfs_xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

char *chapfs_strndup(const char *s, size_t n) {
    char *d = chapfs_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *chapfs_strdup(const char *s) { return chapfs_strndup(s, strlen(s)); }

static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0) return chapfs_strdup(fmt); /* an encoding error: keep the message readable */
    char *s = chapfs_xmalloc((size_t)n + 1);
    if ((size_t)n < sizeof small) memcpy(s, small, (size_t)n + 1);
    else vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *chapfs_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

static void strlist_take(StrList *l, char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->items = chapfs_xrealloc(l->items, sizeof(char *) * (size_t)l->cap);
    }
    l->items[l->n++] = s;
}

void strlist_push(StrList *l, const char *s) { strlist_take(l, chapfs_strdup(s)); }

void strlist_pushf(StrList *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    strlist_take(l, vformat(fmt, ap));
    va_end(ap);
}

int strlist_find(const StrList *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i], s) == 0) return i;
    return -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void strlist_sort(StrList *l) {
    if (l->n > 1) qsort(l->items, (size_t)l->n, sizeof(char *), cmp_str);
}

void strlist_free(StrList *l) {
    for (int i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    *l = (StrList){0};
}

char *strlist_join(const StrList *l, const char *sep) {
    size_t len = 1;
    for (int i = 0; i < l->n; i++) len += strlen(l->items[i]) + strlen(sep);
    char *s = chapfs_xmalloc(len);
    s[0] = 0;
    for (int i = 0; i < l->n; i++) {
        if (i) strcat(s, sep);
        strcat(s, l->items[i]);
    }
    return s;
}

char *chapfs_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = chapfs_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = chapfs_xrealloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

bool chapfs_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool chapfs_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int chapfs_list_chapters(const char *dir, StrList *out) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *path = chapfs_printf("%s/%s", dir, e->d_name);
        if (chapfs_is_dir(path)) strlist_push(out, e->d_name);
        free(path);
    }
    closedir(d);
    strlist_sort(out);
    return 0;
}

/* Adds the files under root/rel (rel "" for root itself) to out. */
static int list_under(const char *root, const char *rel, StrList *out) {
    char *path = *rel ? chapfs_printf("%s/%s", root, rel) : chapfs_strdup(root);
    DIR *d = opendir(path);
    free(path);
    if (!d) return -1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d)) && rc == 0;) {
        if (e->d_name[0] == '.') continue;
        if (!*rel && strcmp(e->d_name, "MANIFEST") == 0) continue;
        char *sub = *rel ? chapfs_printf("%s/%s", rel, e->d_name) : chapfs_strdup(e->d_name);
        char *full = chapfs_printf("%s/%s", root, sub);
        if (chapfs_is_dir(full)) rc = list_under(root, sub, out);
        else strlist_push(out, sub);
        free(full);
        free(sub);
    }
    closedir(d);
    return rc;
}

int chapfs_list_files(const char *dir, StrList *out) {
    int rc = list_under(dir, "", out);
    strlist_sort(out);
    return rc;
}

const char *chapfs_previous(const StrList *chapters, const char *chapter) {
    int i = strlist_find(chapters, chapter);
    return i > 0 ? chapters->items[i - 1] : NULL;
}

bool chapfs_make_parents(const char *path) {
    char *p = chapfs_strdup(path);
    bool ok = true;
    for (char *s = p + 1; *s && ok; s++) {
        if (*s != '/') continue;
        *s = 0;
        ok = mkdir(p, 0777) == 0 || errno == EEXIST;
        *s = '/';
    }
    free(p);
    return ok;
}
