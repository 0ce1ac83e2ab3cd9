/* bookpp: expands a book chapter's "@include <file> <name>" lines into the
 * code they name, as it is in the repository now, so the book's code can
 * never drift from the chapters. <name> is a function (with the comment just
 * above it) or a struct/typedef. Usage: bookpp [-C root] in.md > out.md
 * Exits non-zero, naming the line, when an include cannot be resolved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfuncs.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(s);
        return NULL;
    }
    fclose(f);
    s[n] = '\0';
    *len = (size_t)n;
    return s;
}

/* Moves start back over a comment that ends on the line just above it. */
static size_t with_leading_comment(const char *src, size_t start) {
    size_t p = start;
    if (p < 2 || src[p - 1] != '\n') return start;
    size_t line_end = p - 1, line_start = line_end;
    while (line_start > 0 && src[line_start - 1] != '\n') line_start--;
    if (line_end < 2 || strncmp(src + line_end - 2, "*/", 2) != 0) return start;
    const char *open = NULL;
    for (size_t i = line_end; i-- > 1;)
        if (src[i - 1] == '/' && src[i] == '*') {
            open = src + i - 1;
            break;
        }
    if (!open) return start;
    size_t q = (size_t)(open - src);
    while (q > 0 && src[q - 1] != '\n') q--;
    return q;
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

static int expand(const char *root, const char *path, const char *name, FILE *out) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", root, path);
    size_t len;
    char *src = read_file(full, &len);
    if (!src) return -1;
    CFuncList l;
    cfuncs_split(src, len, &l);
    int i = cfuncs_find(&l, name);
    size_t b, e;
    int rc = 0;
    if (i >= 0) {
        b = with_leading_comment(src, l.funcs[i].start);
        e = l.funcs[i].end;
    } else {
        rc = find_type(src, name, &b, &e);
    }
    if (rc == 0) {
        fprintf(out, "```c\n");
        fwrite(src + b, 1, e - b, out);
        if (e == b || src[e - 1] != '\n') fputc('\n', out);
        fprintf(out, "```\n<small>%s</small>\n", path);
    }
    cfuncs_free(&l);
    free(src);
    return rc;
}

int main(int argc, char **argv) {
    const char *root = ".";
    int a = 1;
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: bookpp [-C root] chapter.md > out.md\n"
               "Expands the chapter's @include lines into the code they name. Run by `make book`.\n");
        return 0;
    }
    if (a + 1 < argc && strcmp(argv[a], "-C") == 0) {
        root = argv[a + 1];
        a += 2;
    }
    if (a >= argc) {
        fprintf(stderr, "usage: bookpp [-C root] chapter.md > out.md\n");
        return 2;
    }
    FILE *in = fopen(argv[a], "r");
    if (!in) {
        fprintf(stderr, "bookpp: cannot open %s\n", argv[a]);
        return 1;
    }
    char line[4096];
    int lineno = 0, errors = 0;
    while (fgets(line, sizeof line, in)) {
        lineno++;
        char path[1024], name[256];
        if (strncmp(line, "@include ", 9) == 0 && sscanf(line + 9, "%1023s %255s", path, name) == 2) {
            if (expand(root, path, name, stdout) != 0) {
                fprintf(stderr, "%s:%d: cannot include '%s' from %s\n", argv[a], lineno, name, path);
                errors++;
            }
        } else {
            fputs(line, stdout);
        }
    }
    fclose(in);
    return errors ? 1 : 0;
}
