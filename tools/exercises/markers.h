/* markers.h: the exercises a chapter marks in its code, found by reading it.
 *
 * A marker is one C comment on the line(s) right before a function definition
 * (after its doc comment, if any), whose text is
 *
 *   EXERCISE kv-append "Append a position to the basic cache" 1 point; tests: II2_basic_cache
 *
 * that is: an id (letters, digits, '-'), a title in double quotes, a number
 * of points, and after "tests:" the test-name substrings that grade it (the
 * chapter test binary runs the tests whose names contain one of them).
 *
 * A chapter's exercises are its marked functions that its MANIFEST declares
 * added or changed relative to the chapter before, so a later chapter does not
 * ask again what an earlier one asked; for the first chapter, all of them. */
#ifndef MARKERS_H
#define MARKERS_H

#include <stdbool.h>
#include <stddef.h>

#include "cfuncs.h"
#include "chapfs.h"

typedef struct {
    char *id;
    char *title;
    int points;
    StrList tests;    /* test-name substrings */
    char *file;       /* path relative to the chapter directory */
    char *function;   /* the marked function's key (see cfuncs.h) */
    int line;         /* 1-based line of the marker */
    char *marker;     /* the marker comment, as written */
    char *doc;        /* the comment describing the function, "" if none */
    char *signature;  /* the definition up to its body */
} Exercise;

typedef struct {
    Exercise *items;
    int n;
} ExerciseList;

void exercises_free(ExerciseList *l);
int exercises_find(const ExerciseList *l, const char *id); /* index, or -1 */

/* The marked functions of one file (text src); `file` names it in problems.
 * Appends to out; each malformed marker adds a line to problems. */
void markers_scan_text(const char *file, const char *src, size_t len, ExerciseList *out, StrList *problems);

/* Every marked function of a chapter directory (its .c and .h files).
 * Returns -1 if the directory cannot be read. */
int markers_scan_dir(const char *dir, ExerciseList *out, StrList *problems);

/* The exercises of chapters_dir/chapter (see above), in file order. Returns
 * the number of problems added (unreadable chapter or MANIFEST, bad markers,
 * two exercises with one id). */
int exercises_of_chapter(const char *chapters_dir, const char *chapter, ExerciseList *out, StrList *problems);

/* Checks the markers of every chapter under chapters_dir: each parses, ids
 * are unique within a chapter, each `tests:` substring names a test in
 * tests_dir/<chapter>/, and a function that is identical in a chapter and the
 * one before it carries the identical marker (or none) in both. Returns the
 * number of problems added. */
int markers_check(const char *chapters_dir, const char *tests_dir, StrList *problems);

/* The test names (TEST(name)) defined in the .c files of tests_dir/<chapter>, each with
 * the text of the comment right above it ("" if none) in docs (same order). */
void chapter_tests(const char *tests_dir, const char *chapter, StrList *names, StrList *docs);

/* [start, end) of the function body (its braces) in src, or false. */
bool function_body(const char *src, const CFunc *f, size_t *start, size_t *end);

#endif
