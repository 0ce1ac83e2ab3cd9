/* htmldiff.h: the side-by-side HTML page of what one chapter changes relative
 * to another. One self-contained file (inline CSS, no scripts): a summary of
 * files added, removed, changed and unchanged; then for each changed C file
 * every changed function whole, old on the left and new on the right, changed
 * lines highlighted (and the changed part within a line); added functions on
 * the right only, removed ones on the left only; changes outside functions as
 * a unified hunk. Added files are shown whole, removed files folded. */
#ifndef HTMLDIFF_H
#define HTMLDIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Writes the page for chapters_dir/from -> chapters_dir/to to out_path.
 * Returns 0, or -1 with a message in err. */
int htmldiff_write(const char *chapters_dir, const char *from, const char *to, const char *out_path, char *err,
                   size_t err_len);

/* The same, or with fragment a part to put in another page (the book's chapter
 * pages): no <html> around it, its style scoped to its own classes, and each
 * file folded in a <details> that names it. verdict: show the manifest check's
 * verdict under the manifest (when from is the chapter before to). */
int htmldiff_write_as(const char *chapters_dir, const char *from, const char *to, const char *out_path, bool fragment,
                      bool verdict, char *err, size_t err_len);

/* Writes s[0..n) with &, <, >, " and ' escaped. */
void htmldiff_escape(FILE *f, const char *s, size_t n);

#endif
