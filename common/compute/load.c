/* load.c: a Qwen3 model ready for this machine's kernels: the file's weights
 * as they are (model/qwen3.c), with the matrices copied onto huge pages, some
 * in the second layout the kernels read instead (tiles.h). It sits here, not
 * in the model layer, because only the kernels know which layouts they read. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend_simd.h"
#include "tiles.h"
#include "util.h"

/* Every matrix a forward pass reads is copied at load into one region asked
 * for on huge pages: a decode step reads every matrix once, and 2 MB pages
 * take 512 times fewer address translations than the file mapping's 4 KB
 * ones. The kernels of an AVX-512 build read the Q8_0, Q4_0 and Q4_1
 * matrices as tiles (tiles.h), so those are copied as tiles; every other
 * matrix as the file's rows. When the machine has not that much memory to
 * spare, the kernels read the file's mapping instead: only the speed
 * differs, and a model larger than the memory still runs from the file. */
#define REGION_ALIGN ((size_t)2 << 20)

/* Whether the region fits in what Linux says is available (free memory and
 * page cache it can drop); elsewhere, yes. */
static bool memory_spares(size_t bytes) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return true;
    char line[128];
    unsigned long long kb = 0;
    bool known = false;
    while (!known && fgets(line, sizeof line, f)) known = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    fclose(f);
    return !known || bytes / 1024 < kb;
}

static size_t padded(size_t bytes) { return (bytes + 63) / 64 * 64; }

static bool as_tiles(const Tensor *w) { return simd_reads_tiles() && tiles_type(w->type); }

/* The bytes matrix w takes in the region. */
static size_t region_share(const Tensor *w) { return padded(as_tiles(w) ? tiles_bytes(w) : tensor_bytes(w)); }

/* Once a matrix is in the region the kernels read only that: its rows' pages
 * of the file's mapping are let go (read again from the file if anything
 * asks, as the embedding rows of a tied output matrix do). */
static void release_pages(const Tensor *w) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin = (uintptr_t)w->data;
    uintptr_t end = begin + tensor_bytes(w);
    begin = (begin + page - 1) / page * page; /* whole pages inside the matrix only */
    end = end / page * page;
    if (end > begin) madvise((void *)begin, end - begin, MADV_DONTNEED);
}

void qwen3_place_matrices(Qwen3Model *m) {
    int n = 7 * m->cfg.n_layers + 1;
    size_t total = 0, stored = 0;
    for (int i = 0; i < n; i++) {
        const Tensor *w = qwen3_matrix(m, i);
        total += region_share(w);
        stored += tensor_bytes(w);
    }
    /* A copy is the size of what it copies; a file whose matrices overlap
     * (more bytes than the file) would make it any size: no region then. */
    if (total == 0 || stored > m->file.size || !memory_spares(total)) return;
    size_t region = (total + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
    char *at = aligned_alloc(REGION_ALIGN, region);
    if (!at) return;
#ifdef MADV_HUGEPAGE
    madvise(at, region, MADV_HUGEPAGE); /* before the first write: the pages are not there yet */
#endif
    m->region = at;
    m->region_bytes = total;
    for (int i = 0; i < n; i++) {
        Tensor *w = qwen3_matrix(m, i);
        size_t share = region_share(w);
        bool tiled = as_tiles(w);
        if (tiled) tiles_build(w, at);
        else memcpy(at, w->data, tensor_bytes(w));
        if (m->file.owns_map) release_pages(w);
        if (tiled) w->tiles = at;
        else w->data = at;
        at += share;
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
    qwen3_place_matrices(m);
    return 0;
}

