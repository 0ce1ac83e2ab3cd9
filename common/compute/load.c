/* load.c: a Qwen3 model ready for this machine's kernels: the file's weights
 * as they are (model/qwen3.c), and the second layout of some matrices that
 * the kernels read instead when they have one (tiles.h). It sits here, not
 * in the model layer, because only the kernels know which layouts they read. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend_simd.h"
#include "tiles.h"
#include "util.h"

/* The kernels of an AVX-512 build decode from tiles (tiles.h): a copy of the
 * Q8_0, Q4_0 and Q4_1 matrices in one region, asked for on huge pages (a
 * decode step reads every matrix, and 2 MB pages take far fewer translations
 * than 4 KB ones). Without memory for it the kernels read the file's rows. */
#define TILES_ALIGN ((size_t)2 << 20)

static size_t padded(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* Once a matrix has tiles the kernels read only those: its rows' pages of the
 * file's mapping are let go (read again from the file if anything asks). */
static void release_pages(const Tensor *w) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin = (uintptr_t)w->data;
    uintptr_t end = begin + tensor_bytes(w);
    begin = (begin + page - 1) / page * page; /* whole pages inside the matrix only */
    end = end / page * page;
    if (end > begin) madvise((void *)begin, end - begin, MADV_DONTNEED);
}

void qwen3_attach_tiles(Qwen3Model *m) {
    if (!simd_reads_tiles()) return;
    int n = 7 * m->cfg.n_layers + 1;
    size_t total = 0, stored = 0;
    for (int i = 0; i < n; i++) {
        const Tensor *w = qwen3_matrix(m, i);
        total += padded(tiles_bytes(w));
        if (tiles_bytes(w)) stored += tensor_bytes(w);
    }
    /* Tiles are the size of what they copy; a file whose matrices overlap
     * (more bytes than the file) would make them any size: no tiles then. */
    if (total == 0 || stored > m->file.size) return;
    size_t region = (total + TILES_ALIGN - 1) / TILES_ALIGN * TILES_ALIGN;
    char *at = aligned_alloc(TILES_ALIGN, region);
    if (!at) return;
#ifdef MADV_HUGEPAGE
    madvise(at, region, MADV_HUGEPAGE); /* before the first write: the pages are not there yet */
#endif
    m->tiles = at;
    m->tiles_bytes = total;
    for (int i = 0; i < n; i++) {
        Tensor *w = qwen3_matrix(m, i);
        size_t bytes = tiles_bytes(w);
        if (!bytes) continue;
        tiles_build(w, at);
        w->tiles = at;
        at += padded(bytes);
        if (m->file.owns_map) release_pages(w);
    }
}

int qwen3_load(Qwen3Model *m, const char *path, char *err) {
    GgufFile file;
    if (gguf_open(&file, path, err) != 0) {
        memset(m, 0, sizeof *m);
        return -1;
    }
    char inner[ERR_MAX];
    if (qwen3_from_gguf(m, &file, inner) != 0) {
        err_set(err, "%s: %s", path, inner);
        return -1;
    }
    qwen3_attach_tiles(m);
    return 0;
}

