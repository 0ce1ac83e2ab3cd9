/* finite.h: catching NaN and Inf. A kernel bug or a broken weight shows up
 * as non-finite numbers that spread to every later activation and end as
 * garbage text; these find them.
 *
 * finite_first() is the cheap check model-generate runs on every step's
 * logits. finite_backend() is --check-finite: it wraps a backend so that
 * every matmul and attention call checks its input and output, and
 * remembers the first non-finite buffer (which layer, which weight) without
 * changing any result. It costs a pass over each buffer, so it is off by
 * default. */
#ifndef FINITE_H
#define FINITE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"

/* The index of the first NaN or Inf in x[n], or -1 when every value is finite. */
long finite_first(const float *x, size_t n);

/* A backend that runs `inner` (owned: freed with it) and checks every call. */
Backend *finite_backend(Backend *inner);
/* What finite_backend() found first: "layer 3: the output of
 * blk.3.ffn_up.weight (the MLP's up projection) has NaN at [0, 17]"; NULL
 * when every buffer so far was finite, or when be is not such a backend. */
const char *finite_report(const Backend *be);

#endif
