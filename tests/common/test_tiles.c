/* test_tiles.c: the tile layout as tiles.h documents it: every weight read
 * back from the tiles, by that description alone, is the file's weight. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "harness.h"
#include "quant.h"
#include "tiles.h"

/* Weight (r, i) of w read from its tiles, following tiles.h. */
static float tile_weight(const Tensor *w, const uint8_t *tiles, int64_t r, int64_t i) {
    size_t bb = tiles_block_bytes(w->type);
    int groups = w->type == DT_Q8_0 ? 8 : 4, j = (int)(r % TILE_ROWS);
    const uint8_t *blk = tiles + ((size_t)(r / TILE_ROWS) * (size_t)(w->ne[0] / 32) + (size_t)(i / 32)) * bb;
    int e = (int)(i % 32), byte = w->type == DT_Q8_0 ? e : e % 16; /* Q4: element e + 16 in the high nibble */
    uint8_t code = blk[64 * (byte / 4) + 4 * j + byte % 4];
    uint16_t d, m = 0;
    memcpy(&d, blk + 64 * groups + 2 * j, 2);
    if (w->type == DT_Q4_1) memcpy(&m, blk + 64 * groups + 32 + 2 * j, 2);
    switch (w->type) {
    case DT_Q8_0: return (float)((int)code - 128) * fp16_to_f32(d);
    case DT_Q4_0: return (float)(((e < 16 ? code : code >> 4) & 15) - 8) * fp16_to_f32(d);
    default: return (float)((e < 16 ? code : code >> 4) & 15) * fp16_to_f32(d) + fp16_to_f32(m); /* Q4_1 */
    }
}

TEST(tiles_hold_every_weight) {
    const DType types[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1};
    const int in = 96, rows = 37; /* 3 blocks a row; the last tile 5 rows, the rest repeats row 36 */
    for (int k = 0; k < 3; k++) {
        DType t = types[k];
        size_t rb = dtype_row_bytes(t, in);
        uint8_t *data = malloc(rb * rows);
        float x[96], y[96];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < in; i++) x[i] = (float)((r * 31 + i * 17) % 23) - 11.0f + 0.25f * (float)(i % 3);
            quant_row(t, x, data + rb * (size_t)r, in);
        }
        Tensor w = {"w", t, {in, rows, 1, 1}, rb, data, NULL};
        size_t bytes = tiles_bytes(&w);
        CHECK_MSG(bytes == 3 * 3 * tiles_block_bytes(t) && tiles_block_bytes(t) == 16 * (size_t)dtype_block_bytes(t),
                  "%s: %zu bytes of tiles", dtype_name(t), bytes);
        uint8_t *tiles = malloc(bytes);
        tiles_build(&w, tiles);
        int bad = 0;
        for (int r = 0; r < 48; r++) { /* every row of the 3 tiles */
            dequant_row(t, data + rb * (size_t)(r < rows ? r : rows - 1), y, in);
            for (int i = 0; i < in; i++) bad += tile_weight(&w, tiles, r, i) != y[i];
        }
        CHECK_MSG(bad == 0, "%s: %d weights read from the tiles differ from the rows", dtype_name(t), bad);
        free(tiles);
        free(data);
    }
    CHECK(!tiles_type(DT_Q6_K) && !tiles_type(DT_F16) && tiles_block_bytes(DT_Q4_K) == 0);
}
