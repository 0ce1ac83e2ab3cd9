/* leaks.h: whether a page shows an exercise's answer (the students' edition
 * of the book must not). An answer shows when three consecutive non-trivial
 * lines of an exercise's reference body (blank lines, comments, braces and
 * short lines like `return 0;` are trivial) appear in order on the page, each
 * within a few lines of the one before: the page's code, a diff's row or a
 * side-by-side cell, with HTML tags and entities taken out. A line the
 * chapter shows outside its marked bodies (the same setup line in a sibling
 * function) is no answer and does not count. */
#ifndef LEAKS_H
#define LEAKS_H

#include "chapfs.h"

/* Checks each page of one chapter (a page that shows its code, or a diff
 * into it; a .html file is read as text without its tags, any other file as
 * it is) against the body of every marked function of chapters_dir/chapter:
 * its exercises and the marked functions it carries unchanged from earlier
 * chapters. Adds one line to found per exercise shown on a page: "PAGE: line
 * N shows the answer of exercise ID (CHAPTER/FILE, FUNCTION)". Returns the
 * number of such lines. */
int leaks_check(const char *chapters_dir, const char *chapter, const StrList *pages, StrList *found);

#endif
