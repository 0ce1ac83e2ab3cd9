/* kv_cache.c: choosing a cache kind by name, and its pool, from the command line. */
#include "kv_cache.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const char *const KV_KINDS[] = {"paged", "basic", NULL};

KvCache *kv_cache_create(const char *kind, const Qwen3Config *c, KvPool *pool, char *err) {
    if (!kind) kind = KV_KINDS[0];
    if (strcmp(kind, "basic") == 0) return kv_basic_create(c);
    if (strcmp(kind, "paged") == 0) return kv_paged_create(c, pool, err);
    err_set(err, "unknown KV cache kind '%s' (supported: paged, basic)", kind);
    return NULL;
}

void kv_cache_free(KvCache *kv) {
    if (kv) kv->destroy(kv);
}

void kv_flags_usage_pool(FILE *out) {
    fprintf(out, "  --kv-block-size N  positions per block of the paged cache (default %d)\n", KV_DEFAULT_BLOCK_SIZE);
    fprintf(out, "  --kv-blocks N      blocks in the pool (default: enough for the context, up to %d MiB)\n",
            KV_DEFAULT_MEM_MIB);
    fprintf(out, "  --kv-mem MiB       the pool's size in MiB instead of --kv-blocks\n");
    fprintf(out, "  --kv-trace         print each step's block table and the pool's occupancy (stderr)\n");
}

void kv_flags_usage(FILE *out) {
    fprintf(out, "  --kv KIND          the KV cache: paged (default) or basic\n");
    kv_flags_usage_pool(out);
}

static int flag_int(const char *flag, const char *v, int lo, int hi, int *out, char *err) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        err_set(err, "%s needs an integer from %d to %d, got '%s'", flag, lo, hi, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int flag_kind(const char *v, const char **out, char *err) {
    for (int i = 0; KV_KINDS[i]; i++)
        if (strcmp(v, KV_KINDS[i]) == 0) {
            *out = KV_KINDS[i];
            return 0;
        }
    err_set(err, "unknown KV cache kind '%s' for --kv (kinds: paged, basic)", v);
    return -1;
}

int kv_flags_parse(KvFlags *f, int argc, char **argv, int *i, char *err) {
    static const char *const with_value[] = {"--kv", "--kv-block-size", "--kv-blocks", "--kv-mem", NULL};
    const char *a = argv[*i], *eq = strchr(a, '=');
    size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
    if (name_len == 10 && strncmp(a, "--kv-trace", 10) == 0) {
        if (eq) {
            err_set(err, "--kv-trace takes no value");
            return -1;
        }
        f->trace = true;
        return 1;
    }
    int which = -1;
    for (int k = 0; with_value[k] && which < 0; k++)
        if (strlen(with_value[k]) == name_len && strncmp(a, with_value[k], name_len) == 0) which = k;
    if (which < 0) return 0;
    const char *v = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
    if (!v) {
        err_set(err, "option %s needs a value", with_value[which]);
        return -1;
    }
    int rc;
    switch (which) {
    case 0: rc = flag_kind(v, &f->kind, err); break;
    case 1: rc = flag_int("--kv-block-size", v, 1, 4096, &f->block_size, err); break;
    case 2: rc = flag_int("--kv-blocks", v, 1, 1 << 24, &f->n_blocks, err); break;
    default: rc = flag_int("--kv-mem", v, 1, 1 << 22, &f->mem_mib, err); break;
    }
    return rc == 0 ? 1 : -1;
}

static int parse_cli_flag(void *flags, int argc, char **argv, int *i, char *err) {
    return kv_flags_parse(flags, argc, argv, i, err);
}

CliExtra kv_flags_cli(KvFlags *f) {
    return (CliExtra){parse_cli_flag, kv_flags_usage_pool, f};
}

/* Blocks for ctx positions, or as many as KV_DEFAULT_MEM_MIB holds (at least one). */
static int default_blocks(const Qwen3Config *c, int block_size, int ctx) {
    long long want = ((long long)ctx + block_size - 1) / block_size;
    long long budget = (long long)KV_DEFAULT_MEM_MIB * 1024 * 1024 / (long long)kv_pool_block_bytes(c, block_size);
    if (want > budget) want = budget;
    return want < 1 ? 1 : (int)want;
}

KvPool *kv_flags_make_pool(const KvFlags *f, const Qwen3Config *c, int ctx, char *err) {
    err[0] = '\0';
    if (f->kind && strcmp(f->kind, "paged") != 0) return NULL;
    if (f->n_blocks && f->mem_mib) {
        err_set(err, "give --kv-blocks or --kv-mem, not both");
        return NULL;
    }
    int bs = f->block_size ? f->block_size : KV_DEFAULT_BLOCK_SIZE, n = f->n_blocks;
    if (f->mem_mib) {
        size_t block_bytes = kv_pool_block_bytes(c, bs);
        long long fit = (long long)f->mem_mib * 1024 * 1024 / (long long)block_bytes;
        if (fit < 1) {
            err_set(err, "--kv-mem %d MiB holds no block: one block of %d positions takes %.2f MiB", f->mem_mib, bs,
                    (double)block_bytes / (1024.0 * 1024.0));
            return NULL;
        }
        n = fit > INT_MAX ? INT_MAX : (int)fit;
    }
    if (!n) n = default_blocks(c, bs, ctx);
    return kv_pool_create(c, bs, n, err);
}
