/* cfuncs.h: splits C source into its top-level function definitions and the
 * text around them, so that two versions of a file can be compared function
 * by function.
 *
 * It is a lexer, not a parser: it skips comments, string and character
 * literals and preprocessor lines, tracks braces, and calls a top-level
 * `{ ... }` a function body when the declaration before it ends with `)` and
 * has no `=` (which would make it an initializer). That covers this
 * codebase's style (definitions at column 0, static or not, parameter lists
 * over several lines, one-line functions) without a grammar. */
#ifndef CFUNCS_H
#define CFUNCS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *name;   /* the identifier; "TEST(x)" for a macro-made definition */
    char *key;    /* name, or "name#2" for its second definition in the file (#if branches) */
    size_t start; /* byte range [start, end): the declaration through the closing brace */
    size_t end;
    int line;     /* 1-based line of start */
    int end_line; /* line of the closing brace */
} CFunc;

typedef struct {
    CFunc *funcs;
    int n;
} CFuncList;

void cfuncs_split(const char *src, size_t len, CFuncList *out);
void cfuncs_free(CFuncList *l);
int cfuncs_find(const CFuncList *l, const char *key); /* index, or -1 */
/* Whether the function splitter applies to this path (.c and .h files). */
bool cfuncs_is_c_file(const char *path);

/* The file with every function replaced by a line "[function NAME]": the
 * non-function text (comments, includes, macros, types). If line_of is not
 * NULL it receives a malloc'd array giving, for each line of the result, its
 * 1-based line in src. */
char *cfuncs_skeleton(const char *src, size_t len, const CFuncList *l, int **line_of);

typedef enum { FN_SAME, FN_CHANGED, FN_ADDED, FN_REMOVED } FnStatus;

typedef struct {
    const char *name;
    const char *key;
    FnStatus status;
    const CFunc *old; /* NULL when added */
    const CFunc *new; /* NULL when removed */
} FnDiff;

/* Pairs the functions of two versions by key. Entries follow the new file's
 * order; a removed function comes right after the one it followed in the old
 * file. Returns the count; *out is malloc'd. */
int cfuncs_compare(const char *old_src, const CFuncList *old, const char *new_src, const CFuncList *new,
                   FnDiff **out);
const char *cfuncs_status_name(FnStatus s);

#endif
