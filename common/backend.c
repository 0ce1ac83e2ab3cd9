/* backend.c: choosing a backend by name. */
#include <string.h>

#include "backend.h"
#include "util.h"

const char *backend_names(void) { return "scalar"; }

Backend *backend_create(const char *name, int n_threads, char *err) {
    if (!name || strcmp(name, "scalar") == 0) return backend_scalar_create();
    err_set(err, "unknown backend '%s' (known: %s)", name, backend_names());
    return NULL;
}

void backend_free(Backend *be) {
    if (be) be->destroy(be);
}
