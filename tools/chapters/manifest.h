/* manifest.h: a chapter's MANIFEST, and the check that the chapter differs
 * from the one before it exactly as declared.
 *
 * Format (one directive a line, `#` starts a comment):
 *   previous <id>|none          the chapter before this one in book order
 *   added   <files...>          new files
 *   removed <files...>          files gone from the previous chapter
 *   changed <files...>          files that differ in any way
 *   changed <file>: <fns...>    the file differs; exactly these top-level
 *                               functions are added, removed or changed;
 *                               every other function is byte-identical (text
 *                               outside functions may differ). An empty list
 *                               means only text outside functions changed.
 *   stage <id> <title...>       the declarations below it, up to the next
 *                               stage line, are one lesson of the book (its
 *                               page shows their diff alone; see stages.h)
 * A file not mentioned must exist in both chapters and be byte-identical.
 * A MANIFEST with stage lines declares every change under one; one without
 * is a single lesson, the chapter itself. */
#ifndef MANIFEST_H
#define MANIFEST_H

#include <stdbool.h>

#include "chapfs.h"

typedef struct {
    char *file;
    bool by_function; /* "changed <file>: ..." */
    StrList fns;
    int line;
} ManifestChange;

/* One lesson of a chapter: its stage line, the files it declares, and its
 * part of the MANIFEST (from its stage line to the next one). */
typedef struct {
    char *id, *title;
    int line;
    StrList files;
    char *text;
} ManifestStage;

typedef struct {
    bool has_previous;
    char *previous; /* NULL for "previous none" */
    StrList added, removed;
    ManifestChange *changed;
    int n_changed;
    ManifestStage *stages;
    int n_stages;
} Manifest;

/* Parses MANIFEST text; each problem goes to `problems` as "<chapter>: MANIFEST
 * line N: ...". Returns the number of problems found. */
int manifest_parse(const char *text, const char *chapter, Manifest *m, StrList *problems);
void manifest_free(Manifest *m);

/* What a chapter's check found, for the one-line report. */
typedef struct {
    char previous[128]; /* the chapter compared with; "" for the first chapter */
    int added, removed, changed, unchanged; /* files */
    int fns_changed;                        /* functions added, removed or changed, in "changed f: ..." files */
} ManifestStats;

/* Checks chapters_dir/chapter against the chapter before it in book order.
 * Appends one line per problem, each naming the chapter, file and function.
 * Returns the number of problems; stats may be NULL. */
int manifest_check_chapter(const char *chapters_dir, const char *chapter, StrList *problems, ManifestStats *stats);

#endif
