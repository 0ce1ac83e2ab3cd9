/* stub.h: rewriting a chapter file's functions: replacing an exercise's body
 * by a stub, or a whole function by another version of it. */
#ifndef STUB_H
#define STUB_H

#include <stddef.h>

#include "markers.h"

/* src with the body of each exercise in exs[0..n) that lives in `file`
 * replaced by a stub that compiles, returns zero (or nothing) and says once
 * on stderr "exercise <id> is not implemented yet". Adds #include <stdio.h>
 * if the file lacks it. NULL (with a line in problems) if a function is
 * missing. The result is malloc'd. */
char *stub_file(const char *file, const char *src, size_t len, const Exercise *exs, int n, StrList *problems);

/* dst_src with function `key` replaced by the same function from ref_src.
 * NULL if either file lacks it. */
char *replace_function(const char *dst_src, size_t dst_len, const char *ref_src, size_t ref_len, const char *key);

/* The statement that returns a zero of the function's return type, from its
 * signature: "" for void, "return NULL;", "return 0;" or "return (T){0};". */
char *zero_return(const char *signature, const char *name);

#endif
