/* linediff.h: a line diff by longest common subsequence, small enough to read.
 *
 * Common leading and trailing lines are matched first, so the O(n*m) table
 * covers only the region that changed; past a size limit the region is
 * reported as all removed then all added (still a correct diff, just not a
 * minimal one). */
#ifndef LINEDIFF_H
#define LINEDIFF_H

#include <stddef.h>

typedef struct {
    const char *s; /* not NUL-terminated; without its '\n' */
    int len;
} Line;

typedef struct {
    Line *lines;
    int n;
} Lines;

/* Splits [s, s+len) at '\n'; a final line without '\n' still counts. */
void lines_split(const char *s, size_t len, Lines *out);
void lines_free(Lines *l);

typedef enum { LD_EQ, LD_DEL, LD_INS } LdKind;

typedef struct {
    LdKind kind;
    int a; /* line index in the old text (LD_EQ, LD_DEL), else -1 */
    int b; /* line index in the new text (LD_EQ, LD_INS), else -1 */
} LdOp;

/* The edit script turning a into b; within a changed run, deletions come
 * before insertions. Returns the count; *ops is malloc'd. */
int linediff(const Lines *a, const Lines *b, LdOp **ops);

#endif
