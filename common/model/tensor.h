/* tensor.h: a weight tensor: a typed view of its rows, in the model file or in
 * the copy the loader makes (compute/load.c), and maybe of its tiles
 * (compute/tiles.h). Activations are plain float arrays whose shapes are written
 * next to them. */
#ifndef TENSOR_H
#define TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

typedef struct {
    const char *name;
    DType type;
    int64_t ne[4];     /* ne[0] = row length (contiguous), ne[1] = rows */
    size_t row_bytes;  /* bytes of one row of ne[0] elements */
    const void *data;  /* row r starts at (const char *)data + r * row_bytes */
    const void *tiles; /* the same weights in 16-row tiles (compute/tiles.h), or NULL */
} Tensor;

static inline const void *tensor_row(const Tensor *t, int64_t r) {
    return (const char *)t->data + (size_t)r * t->row_bytes;
}

/* Bytes of the whole matrix (ne[1] rows). */
static inline size_t tensor_bytes(const Tensor *t) { return t->row_bytes * (size_t)t->ne[1]; }

#endif
