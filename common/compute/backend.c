/* backend.c: choosing a backend by name. With no name, the fastest this
 * machine has: the parallel backend over the best simd kernels its CPU runs. */
#include <string.h>

#include "backend.h"
#include "backend_simd.h"
#include "util.h"

const char *backend_names(void) { return "scalar, simd, parallel"; }

Backend *backend_create(const char *name, int n_threads, char *err) {
    if (!name || strcmp(name, "parallel") == 0) return backend_parallel_create(simd_kernels(), n_threads);
    if (n_threads > 1 && (strcmp(name, "simd") == 0 || strcmp(name, "scalar") == 0)) {
        err_set(err, "the %s backend runs on one thread: --threads %d needs --backend parallel", name, n_threads);
        return NULL;
    }
    if (strcmp(name, "simd") == 0) return backend_simd_create(simd_kernels());
    if (strcmp(name, "scalar") == 0) return backend_scalar_create();
    err_set(err, "unknown backend '%s' (known: %s)", name, backend_names());
    return NULL;
}

void rows_in_order(Backend *be, int n, RowFn fn, void *arg) {
    for (int i = 0; i < n; i++) fn(arg, i);
}

void backend_free(Backend *be) {
    if (be) be->destroy(be);
}
