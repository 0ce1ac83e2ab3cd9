/* tiles.c: the tile layout of tiles.h, in plain C. */
#include "tiles.h"

#include <string.h>

bool tiles_type(DType t) { return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q4_1; }

/* Code groups of 4 bytes per row and block, and where a block's codes start. */
static int code_groups(DType t) { return t == DT_Q8_0 ? 8 : 4; }
static int code_offset(DType t) { return t == DT_Q4_1 ? 4 : 2; } /* after d (and Q4_1's m) */

size_t tiles_block_bytes(DType t) {
    if (!tiles_type(t)) return 0;
    size_t halves = t == DT_Q4_1 ? 2 : 1; /* scales, and Q4_1's mins */
    return (size_t)TILE_ROWS * (4 * (size_t)code_groups(t) + 2 * halves);
}

size_t tiles_bytes(const Tensor *w) {
    size_t tiles = (size_t)(w->ne[1] + TILE_ROWS - 1) / TILE_ROWS;
    return tiles * (size_t)(w->ne[0] / 32) * tiles_block_bytes(w->type);
}

/* Row j's block (its bytes in the file) into its places in a tile's block. */
static void place_block(DType t, const unsigned char *blk, int j, unsigned char *dst) {
    int groups = code_groups(t);
    const unsigned char *codes = blk + code_offset(t);
    for (int g = 0; g < groups; g++) {
        unsigned char *to = dst + (size_t)TILE_ROWS * 4 * g + 4 * j;
        memcpy(to, codes + 4 * g, 4);
        if (t == DT_Q8_0)
            for (int i = 0; i < 4; i++) to[i] ^= 0x80; /* signed to unsigned: + 128 */
    }
    unsigned char *halves = dst + (size_t)TILE_ROWS * 4 * groups;
    memcpy(halves + 2 * j, blk, 2);                                  /* d */
    if (t == DT_Q4_1) memcpy(halves + 2 * TILE_ROWS + 2 * j, blk + 2, 2); /* m */
}

void tiles_build(const Tensor *w, void *dst) {
    int64_t rows = w->ne[1], nb = w->ne[0] / 32;
    size_t bb = tiles_block_bytes(w->type), fb = (size_t)dtype_block_bytes(w->type);
    unsigned char *out = dst;
    for (int64_t r0 = 0; r0 < rows; r0 += TILE_ROWS, out += (size_t)nb * bb)
        for (int j = 0; j < TILE_ROWS; j++) {
            const unsigned char *row = tensor_row(w, r0 + j < rows ? r0 + j : rows - 1);
            for (int64_t b = 0; b < nb; b++) place_block(w->type, row + (size_t)b * fb, j, out + (size_t)b * bb);
        }
}
