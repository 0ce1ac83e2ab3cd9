/* gguf.c: see gguf.h. The parser reads through a bounds-checked cursor; every
 * failure names the record and the field that was wrong. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "util.h"

#ifdef MAP_POPULATE /* Linux */
#define GGUF_MAP_POPULATE MAP_POPULATE
#else
#define GGUF_MAP_POPULATE 0
#endif

/* Limits that no real file comes near; they turn absurd counts into errors
 * before anything is allocated for them. */
#define MAX_KV 1000000ull
#define MAX_TENSORS 1000000ull
#define MAX_STR 1000000000ull

typedef struct {
    const uint8_t *p;
    size_t size;
    size_t pos;
    char *err;
} Cursor;

static bool cur_need(Cursor *c, uint64_t n, const char *what) {
    if (n > c->size - c->pos) {
        err_set(c->err, "file truncated: %s at byte %zu needs %llu bytes, file has %zu",
                what, c->pos, (unsigned long long)n, c->size);
        return false;
    }
    return true;
}

static bool cur_u32(Cursor *c, uint32_t *out, const char *what) {
    if (!cur_need(c, 4, what)) return false;
    memcpy(out, c->p + c->pos, 4); /* files are little-endian, as is every host we build for */
    c->pos += 4;
    return true;
}

static bool cur_u64(Cursor *c, uint64_t *out, const char *what) {
    if (!cur_need(c, 8, what)) return false;
    memcpy(out, c->p + c->pos, 8);
    c->pos += 8;
    return true;
}

static bool cur_str(Cursor *c, GgufStr *out, const char *what) {
    uint64_t len;
    if (!cur_u64(c, &len, what)) return false;
    if (len > MAX_STR) {
        err_set(c->err, "%s has an absurd length %llu", what, (unsigned long long)len);
        return false;
    }
    if (!cur_need(c, len, what)) return false;
    out->ptr = (const char *)c->p + c->pos;
    out->len = len;
    c->pos += len;
    return true;
}

int gguf_type_size(GgufType t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(GgufType t) {
    static const char *names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
                                  "float32", "bool", "string", "array", "uint64", "int64",
                                  "float64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static bool is_int_type(GgufType t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 ||
           t == GGUF_UINT32 || t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64;
}

static bool is_signed(GgufType t) {
    return t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64;
}

/* Reads one scalar of type t at p into kv->v. */
static void load_scalar(GgufKv *kv, GgufType t, const uint8_t *p) {
    switch (t) {
    case GGUF_UINT8: case GGUF_BOOL: kv->v.u = p[0]; break;
    case GGUF_INT8: kv->v.i = (int8_t)p[0]; break;
    case GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); kv->v.u = x; break; }
    case GGUF_INT16: { int16_t x; memcpy(&x, p, 2); kv->v.i = x; break; }
    case GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); kv->v.u = x; break; }
    case GGUF_INT32: { int32_t x; memcpy(&x, p, 4); kv->v.i = x; break; }
    case GGUF_FLOAT32: { float x; memcpy(&x, p, 4); kv->v.f = x; break; }
    case GGUF_UINT64: { uint64_t x; memcpy(&x, p, 8); kv->v.u = x; break; }
    case GGUF_INT64: { int64_t x; memcpy(&x, p, 8); kv->v.i = x; break; }
    case GGUF_FLOAT64: { double x; memcpy(&x, p, 8); kv->v.f = x; break; }
    default: break;
    }
}

static bool parse_array(Cursor *c, GgufKv *kv, const char *key) {
    uint32_t et;
    if (!cur_u32(c, &et, "array element type")) return false;
    kv->arr_type = (GgufType)et;
    if (!cur_u64(c, &kv->arr_len, "array length")) return false;
    kv->arr_data = c->p + c->pos;
    if (et == GGUF_STRING) {
        for (uint64_t i = 0; i < kv->arr_len; i++) {
            GgufStr s;
            if (!cur_str(c, &s, "array string")) {
                char inner[ERR_MAX];
                snprintf(inner, sizeof inner, "%s", c->err);
                err_set(c->err, "key '%s': element %llu: %s", key, (unsigned long long)i, inner);
                return false;
            }
        }
        return true;
    }
    int sz = gguf_type_size((GgufType)et);
    if (sz == 0) {
        err_set(c->err, "key '%s': array of unsupported element type %u (%s)", key, et,
                gguf_type_name((GgufType)et));
        return false;
    }
    if (kv->arr_len > (c->size - c->pos) / (uint64_t)sz) {
        err_set(c->err, "file truncated: key '%s' holds an array of %llu %s values past the end of the file",
                key, (unsigned long long)kv->arr_len, gguf_type_name((GgufType)et));
        return false;
    }
    c->pos += (size_t)kv->arr_len * (size_t)sz;
    return true;
}

static bool parse_kv(Cursor *c, GgufKv *kv, uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "metadata key #%llu", (unsigned long long)index);
    if (!cur_str(c, &kv->key, what)) return false;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 100 ? kv->key.len : 100), kv->key.ptr);
    uint32_t t;
    if (!cur_u32(c, &t, "value type")) return false;
    kv->type = (GgufType)t;
    if (t == GGUF_ARRAY) return parse_array(c, kv, key);
    if (t == GGUF_STRING) {
        if (!cur_str(c, &kv->v.s, "string value")) return false;
        return true;
    }
    int sz = gguf_type_size(kv->type);
    if (sz == 0) {
        err_set(c->err, "key '%s' has unknown value type %u", key, t);
        return false;
    }
    if (!cur_need(c, (uint64_t)sz, "scalar value")) return false;
    load_scalar(kv, kv->type, c->p + c->pos);
    c->pos += (size_t)sz;
    return true;
}

static bool parse_tensor_info(Cursor *c, GgufTensor *t, uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "tensor #%llu name", (unsigned long long)index);
    GgufStr name;
    if (!cur_str(c, &name, what)) return false;
    if (name.len >= sizeof t->name) {
        err_set(c->err, "tensor #%llu: name is %llu bytes long (at most 63 allowed)",
                (unsigned long long)index, (unsigned long long)name.len);
        return false;
    }
    if (memchr(name.ptr, 0, name.len)) {
        err_set(c->err, "tensor #%llu: name contains a NUL byte", (unsigned long long)index);
        return false;
    }
    memcpy(t->name, name.ptr, name.len);
    t->name[name.len] = '\0';
    if (!cur_u32(c, &t->n_dims, "tensor dimension count")) return false;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS) {
        err_set(c->err, "tensor '%s': %u dimensions (1 to %d allowed)", t->name, t->n_dims,
                GGUF_MAX_DIMS);
        return false;
    }
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (!cur_u64(c, &t->ne[d], "tensor dimension")) return false;
    if (!cur_u32(c, &t->type, "tensor type")) return false;
    if (!cur_u64(c, &t->offset, "tensor offset")) return false;
    return true;
}

/* Checks a tensor's type, shape and data range; sets nbytes and data. */
static bool check_tensor(const GgufFile *g, GgufTensor *t, char *err) {
    const char *tn = dtype_name(t->type);
    if (!tn) {
        err_set(err, "tensor '%s': unknown tensor type %u", t->name, t->type);
        return false;
    }
    uint64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || n > (1ull << 40) / t->ne[d]) {
            err_set(err, "tensor '%s': shape [%llu, %llu, %llu, %llu] is empty or absurdly large",
                    t->name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                    (unsigned long long)t->ne[2], (unsigned long long)t->ne[3]);
            return false;
        }
        n *= t->ne[d];
    }
    int bs = dtype_block_size(t->type);
    if (t->ne[0] % (uint64_t)bs != 0) {
        err_set(err, "tensor '%s': row length %llu is not a multiple of the %s block size %d",
                t->name, (unsigned long long)t->ne[0], tn, bs);
        return false;
    }
    t->nbytes = n / (uint64_t)bs * (uint64_t)dtype_block_bytes(t->type);
    if (t->offset % g->alignment != 0) {
        err_set(err, "tensor '%s': offset %llu is not a multiple of the alignment %u", t->name,
                (unsigned long long)t->offset, g->alignment);
        return false;
    }
    uint64_t avail = g->size - g->data_start;
    if (t->offset > avail || t->nbytes > avail - t->offset) {
        err_set(err, "tensor '%s': data [%llu, %llu) runs past the end of the file (data section is %llu bytes)",
                t->name, (unsigned long long)t->offset,
                (unsigned long long)(t->offset + t->nbytes), (unsigned long long)avail);
        return false;
    }
    t->data = g->map + g->data_start + t->offset;
    return true;
}

static bool read_alignment(GgufFile *g, char *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const GgufKv *kv = gguf_find(g, "general.alignment");
    if (!kv) return true;
    if (kv->type != GGUF_UINT32) {
        err_set(err, "key 'general.alignment' must be uint32, found %s", gguf_type_name(kv->type));
        return false;
    }
    if (kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)) != 0) {
        err_set(err, "key 'general.alignment' = %llu is not a power of two",
                (unsigned long long)kv->v.u);
        return false;
    }
    g->alignment = (uint32_t)kv->v.u;
    return true;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_strs(const void *a, const void *b) {
    const GgufStr *x = *(const GgufStr *const *)a, *y = *(const GgufStr *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->ptr, y->ptr, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Keys and tensor names must be unique (as llama.cpp requires): sort, compare neighbours. */
static bool check_duplicates(const GgufFile *g, char *err) {
    bool ok = true;
    const char **names = xmalloc(sizeof *names * (g->n_tensors + 1));
    for (uint64_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    qsort(names, g->n_tensors, sizeof *names, cmp_names);
    for (uint64_t i = 1; ok && i < g->n_tensors; i++)
        if (strcmp(names[i], names[i - 1]) == 0) {
            err_set(err, "tensor '%s' appears twice", names[i]);
            ok = false;
        }
    free(names);
    const GgufStr **keys = xmalloc(sizeof *keys * (g->n_kv + 1));
    for (uint64_t i = 0; i < g->n_kv; i++) keys[i] = &g->kv[i].key;
    qsort(keys, g->n_kv, sizeof *keys, cmp_strs);
    for (uint64_t i = 1; ok && i < g->n_kv; i++)
        if (cmp_strs(&keys[i], &keys[i - 1]) == 0) {
            err_set(err, "metadata key '%.*s' appears twice", (int)(keys[i]->len > 100 ? 100 : keys[i]->len),
                    keys[i]->ptr);
            ok = false;
        }
    free(keys);
    return ok;
}

static bool parse_header(GgufFile *g, Cursor *c) {
    if (c->size < 4 || memcmp(c->p, "GGUF", 4) != 0) {
        err_set(c->err, "not a GGUF file: bad magic (expected 'GGUF' in the first 4 bytes)");
        return false;
    }
    c->pos = 4;
    if (!cur_u32(c, &g->version, "version")) return false;
    if (g->version == 1) {
        err_set(c->err, "GGUF version 1 is obsolete and not supported (2 and 3 are)");
        return false;
    }
    if (g->version != 2 && g->version != 3) {
        err_set(c->err, "unsupported GGUF version %u (2 and 3 are supported%s)", g->version,
                g->version != 0 && (g->version & 0xFFFF) == 0 ? "; the file looks big-endian" : "");
        return false;
    }
    if (!cur_u64(c, &g->n_tensors, "tensor count")) return false;
    if (!cur_u64(c, &g->n_kv, "metadata count")) return false;
    if (g->n_tensors > MAX_TENSORS) {
        err_set(c->err, "absurd tensor count %llu", (unsigned long long)g->n_tensors);
        return false;
    }
    if (g->n_kv > MAX_KV) {
        err_set(c->err, "absurd metadata count %llu", (unsigned long long)g->n_kv);
        return false;
    }
    return true;
}

int gguf_parse(GgufFile *g, const void *data, size_t size, char *err) {
    char scratch[ERR_MAX];
    if (!err) err = scratch;
    memset(g, 0, sizeof *g);
    g->map = data;
    g->size = size;
    Cursor c = {data, size, 0, err};
    if (!parse_header(g, &c)) goto fail;
    /* A metadata record takes at least 12 bytes and a tensor record at least 32,
     * so larger counts than the file can hold are lies: reject them before allocating. */
    if (g->n_kv > size / 12 || g->n_tensors > size / 32) {
        err_set(err, "file truncated or corrupt: %llu metadata records and %llu tensors cannot fit in %zu bytes",
                (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, size);
        goto fail;
    }
    g->kv = xcalloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!parse_kv(&c, &g->kv[i], i)) goto fail;
    if (!read_alignment(g, err)) goto fail;
    g->tensors = xcalloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!parse_tensor_info(&c, &g->tensors[i], i)) goto fail;
    g->data_start = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
    if (g->data_start > size) {
        if (g->n_tensors) {
            err_set(err, "file truncated: the data section would start at byte %zu, past the end (%zu)",
                    g->data_start, size);
            goto fail;
        }
        g->data_start = size;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!check_tensor(g, &g->tensors[i], err)) goto fail;
    if (!check_duplicates(g, err)) goto fail;
    return 0;
fail:
    free(g->kv);
    free(g->tensors);
    memset(g, 0, sizeof *g);
    return -1;
}

int gguf_open(GgufFile *g, const char *path, char *err) {
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        err_set(err, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, "'%s' is not a regular file", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {
        err_set(err, "'%s' is empty, not a GGUF file", path);
        close(fd);
        return -1;
    }
    /* MAP_POPULATE maps every page now, at load time: otherwise the first
     * forward pays a page fault per few pages of weights (a cold prefill). */
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | GGUF_MAP_POPULATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        err_set(err, "cannot map '%s': %s", path, strerror(errno));
        return -1;
    }
    char inner[ERR_MAX];
    if (gguf_parse(g, map, size, inner) != 0) {
        err_set(err, "%s: %s", path, inner);
        munmap(map, size);
        return -1;
    }
    g->owns_map = true;
    return 0;
}

void gguf_close(GgufFile *g) {
    if (g->owns_map && g->map) munmap((void *)g->map, g->size);
    free(g->kv);
    free(g->tensors);
    memset(g, 0, sizeof *g);
}

bool gguf_str_eq(GgufStr s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const GgufKv *gguf_find(const GgufFile *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (gguf_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

static const GgufKv *find_required(const GgufFile *g, const char *key, char *err) {
    const GgufKv *kv = gguf_find(g, key);
    if (!kv) err_set(err, "missing metadata key '%s'", key);
    return kv;
}

int gguf_get_u32(const GgufFile *g, const char *key, uint32_t *out, char *err) {
    const GgufKv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (!is_int_type(kv->type)) {
        err_set(err, "key '%s' must be an integer, found %s", key, gguf_type_name(kv->type));
        return -1;
    }
    if (is_signed(kv->type) && (kv->v.i < 0 || kv->v.i > (int64_t)UINT32_MAX)) {
        err_set(err, "key '%s' = %lld is out of range", key, (long long)kv->v.i);
        return -1;
    }
    if (!is_signed(kv->type) && kv->v.u > UINT32_MAX) {
        err_set(err, "key '%s' = %llu is out of range", key, (unsigned long long)kv->v.u);
        return -1;
    }
    *out = (uint32_t)(is_signed(kv->type) ? (uint64_t)kv->v.i : kv->v.u);
    return 0;
}

int gguf_get_f32(const GgufFile *g, const char *key, float *out, char *err) {
    const GgufKv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->type == GGUF_FLOAT32 || kv->type == GGUF_FLOAT64) *out = (float)kv->v.f;
    else if (is_int_type(kv->type)) *out = is_signed(kv->type) ? (float)kv->v.i : (float)kv->v.u;
    else {
        err_set(err, "key '%s' must be a number, found %s", key, gguf_type_name(kv->type));
        return -1;
    }
    return 0;
}

int gguf_get_bool(const GgufFile *g, const char *key, bool *out, char *err) {
    const GgufKv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_BOOL) {
        err_set(err, "key '%s' must be a bool, found %s", key, gguf_type_name(kv->type));
        return -1;
    }
    *out = kv->v.u != 0;
    return 0;
}

int gguf_get_str(const GgufFile *g, const char *key, GgufStr *out, char *err) {
    const GgufKv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_STRING) {
        err_set(err, "key '%s' must be a string, found %s", key, gguf_type_name(kv->type));
        return -1;
    }
    *out = kv->v.s;
    return 0;
}

int gguf_get_arr(const GgufFile *g, const char *key, GgufType elem, const GgufKv **out, char *err) {
    const GgufKv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_ARRAY) {
        err_set(err, "key '%s' must be an array, found %s", key, gguf_type_name(kv->type));
        return -1;
    }
    bool ok = kv->arr_type == elem || (is_int_type(elem) && is_int_type(kv->arr_type));
    if (!ok) {
        err_set(err, "key '%s' must be an array of %s, found an array of %s", key,
                gguf_type_name(elem), gguf_type_name(kv->arr_type));
        return -1;
    }
    *out = kv;
    return 0;
}

int gguf_get_str_arr(const GgufFile *g, const char *key, GgufStr **out, uint64_t *n, char *err) {
    const GgufKv *kv;
    if (gguf_get_arr(g, key, GGUF_STRING, &kv, err) != 0) return -1;
    GgufStr *s = xmalloc(sizeof *s * (kv->arr_len ? kv->arr_len : 1));
    const uint8_t *p = kv->arr_data; /* already bounds-checked by the parser */
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        uint64_t len;
        memcpy(&len, p, 8);
        s[i].ptr = (const char *)p + 8;
        s[i].len = len;
        p += 8 + len;
    }
    *out = s;
    *n = kv->arr_len;
    return 0;
}

int64_t gguf_arr_int(const GgufKv *kv, uint64_t i) {
    GgufKv tmp;
    int sz = gguf_type_size(kv->arr_type);
    load_scalar(&tmp, kv->arr_type, kv->arr_data + i * (uint64_t)sz);
    return is_signed(kv->arr_type) ? tmp.v.i : (int64_t)tmp.v.u;
}

const GgufTensor *gguf_find_tensor(const GgufFile *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}
