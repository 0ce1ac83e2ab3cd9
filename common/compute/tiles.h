/* tiles.h: a second layout of a Q8_0, Q4_0 or Q4_1 weight matrix, built once
 * when the model loads, for the decode kernels (one activation row).
 *
 * The file stores each row's blocks one after another: a kernel computing 16
 * outputs side by side (one per float lane) must read 16 rows at once, or one
 * row at a time and turn the sums around afterwards. In tiles the 16 rows of
 * a tile are interleaved block by block, each block laid out as the kernel
 * loads it, so one front-to-back read of a tile gives all 16 outputs:
 *
 *   tile k = rows 16k .. 16k + 15 (past the last row: the last row again),
 *   then per 32-block b of the row, TILE_ROWS rows side by side:
 *     codes: G groups, each 16 x 4 bytes (row 0's 4 bytes, row 1's, ...):
 *       Q8_0: G = 8, byte i of the block is element i, made unsigned (+128);
 *       Q4_0, Q4_1: G = 4, the file's code bytes as they are (byte i holds
 *       element i in its low nibble, element i + 16 in its high one);
 *     scales: 16 F16 values, row j's at 2j;
 *     Q4_1 only: mins, 16 F16 values.
 *
 * A tile's block has the bytes of 16 of the file's blocks (Q8_0 544, Q4_0 288,
 * Q4_1 320), so the tiles are the size of the matrix rounded up to 16 rows. */
#ifndef TILES_H
#define TILES_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

#define TILE_ROWS 16

/* True for the types that have a tile layout. */
bool tiles_type(DType t);
/* Bytes of one tile's block (16 rows of one 32-block), 0 if no tile layout. */
size_t tiles_block_bytes(DType t);
/* Bytes of w's tiles, 0 if its type has no tile layout. */
size_t tiles_bytes(const Tensor *w);
/* dst (tiles_bytes(w) bytes) = w's rows in tiles. */
void tiles_build(const Tensor *w, void *dst);

#endif
