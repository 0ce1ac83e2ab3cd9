/* gguf_writer.c: see gguf_writer.h. Metadata and tensor infos are encoded into
 * one byte buffer as they are added, so writing the header is a single copy. */
#include "gguf_writer.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "util.h"

#define GW_ALIGN GGUF_DEFAULT_ALIGNMENT

typedef struct {
    uint64_t nbytes;
    uint64_t offset; /* relative to the data section */
} GwTensor;

struct GgufWriter {
    Buf kv;            /* encoded key/value records */
    uint64_t n_kv;
    char **keys;       /* for the duplicate check */
    Buf infos;         /* encoded tensor-info records */
    GwTensor *tensors;
    uint64_t n_tensors;
    uint64_t data_size;  /* padded size of the data section so far */
    bool header_done;
    uint64_t cur;        /* tensor being written */
    uint64_t cur_done;   /* bytes of it written */
};

GgufWriter *gw_new(void) { return xcalloc(1, sizeof(GgufWriter)); }

void gw_free(GgufWriter *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    buf_free(&w->kv);
    buf_free(&w->infos);
    free(w->tensors);
    free(w);
}

static uint64_t align_up(uint64_t x) { return (x + GW_ALIGN - 1) / GW_ALIGN * GW_ALIGN; }

/* ---- encoding ------------------------------------------------------------ */

static void put_u32(Buf *b, uint32_t v) { buf_append(b, &v, 4); } /* little-endian host */
static void put_u64(Buf *b, uint64_t v) { buf_append(b, &v, 8); }

static void put_str(Buf *b, const char *s) {
    size_t n = strlen(s);
    put_u64(b, n);
    buf_append(b, s, n);
}

/* Starts a record: checks the key is new, writes it and the value type. */
static void begin_kv(GgufWriter *w, const char *key, GgufType type) {
    for (uint64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->keys[i], key) == 0) {
            fprintf(stderr, "gguf_writer: duplicate key %s\n", key);
            exit(70);
        }
    }
    if (w->header_done) {
        fprintf(stderr, "gguf_writer: key %s added after the header was written\n", key);
        exit(70);
    }
    w->keys = xrealloc(w->keys, (w->n_kv + 1) * sizeof *w->keys);
    w->keys[w->n_kv++] = xstrdup(key);
    put_str(&w->kv, key);
    put_u32(&w->kv, (uint32_t)type);
}

static void add_scalar(GgufWriter *w, const char *key, GgufType t, const void *v) {
    begin_kv(w, key, t);
    buf_append(&w->kv, v, (size_t)gguf_type_size(t));
}

void gw_add_u8(GgufWriter *w, const char *key, uint8_t v) { add_scalar(w, key, GGUF_UINT8, &v); }
void gw_add_i8(GgufWriter *w, const char *key, int8_t v) { add_scalar(w, key, GGUF_INT8, &v); }
void gw_add_u16(GgufWriter *w, const char *key, uint16_t v) { add_scalar(w, key, GGUF_UINT16, &v); }
void gw_add_i16(GgufWriter *w, const char *key, int16_t v) { add_scalar(w, key, GGUF_INT16, &v); }
void gw_add_u32(GgufWriter *w, const char *key, uint32_t v) { add_scalar(w, key, GGUF_UINT32, &v); }
void gw_add_i32(GgufWriter *w, const char *key, int32_t v) { add_scalar(w, key, GGUF_INT32, &v); }
void gw_add_f32(GgufWriter *w, const char *key, float v) { add_scalar(w, key, GGUF_FLOAT32, &v); }
void gw_add_u64(GgufWriter *w, const char *key, uint64_t v) { add_scalar(w, key, GGUF_UINT64, &v); }
void gw_add_i64(GgufWriter *w, const char *key, int64_t v) { add_scalar(w, key, GGUF_INT64, &v); }
void gw_add_f64(GgufWriter *w, const char *key, double v) { add_scalar(w, key, GGUF_FLOAT64, &v); }

void gw_add_bool(GgufWriter *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    add_scalar(w, key, GGUF_BOOL, &b);
}

void gw_add_str(GgufWriter *w, const char *key, const char *v) {
    begin_kv(w, key, GGUF_STRING);
    put_str(&w->kv, v);
}

void gw_add_arr(GgufWriter *w, const char *key, GgufType elem, const void *data, uint64_t n) {
    int size = gguf_type_size(elem);
    if (size == 0) {
        fprintf(stderr, "gguf_writer: %s: gw_add_arr takes numeric elements only\n", key);
        exit(70);
    }
    begin_kv(w, key, GGUF_ARRAY);
    put_u32(&w->kv, (uint32_t)elem);
    put_u64(&w->kv, n);
    buf_append(&w->kv, data, (size_t)n * (size_t)size);
}

void gw_add_str_arr(GgufWriter *w, const char *key, const char *const *strs, uint64_t n) {
    begin_kv(w, key, GGUF_ARRAY);
    put_u32(&w->kv, GGUF_STRING);
    put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kv, strs[i]);
}

/* ---- tensor infos ------------------------------------------------------- */

static int check_tensor(const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                        char *err) {
    if (strlen(name) == 0 || strlen(name) >= 64) {
        err_set(err, "tensor name '%s' must have 1 to 63 bytes", name);
        return 1;
    }
    if (!dtype_name(type)) {
        err_set(err, "tensor %s: unknown type %u", name, type);
        return 1;
    }
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
        err_set(err, "tensor %s: %u dimensions (1 to %d allowed)", name, n_dims, GGUF_MAX_DIMS);
        return 1;
    }
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0) {
            err_set(err, "tensor %s: dimension %u is %lld", name, d, (long long)ne[d]);
            return 1;
        }
    }
    int block = dtype_block_size(type);
    if (ne[0] % block != 0) {
        err_set(err, "tensor %s: row length %lld is not a multiple of %s's block size %d",
                name, (long long)ne[0], dtype_name(type), block);
        return 1;
    }
    return 0;
}

int gw_add_tensor(GgufWriter *w, const char *name, uint32_t type, uint32_t n_dims,
                  const int64_t *ne, char *err) {
    if (check_tensor(name, type, n_dims, ne, err)) return 1;
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) rows *= (uint64_t)ne[d];
    GwTensor t = {.nbytes = rows * dtype_row_bytes(type, ne[0]), .offset = w->data_size};
    put_str(&w->infos, name);
    put_u32(&w->infos, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(&w->infos, (uint64_t)ne[d]);
    put_u32(&w->infos, type);
    put_u64(&w->infos, t.offset);
    w->tensors = xrealloc(w->tensors, (w->n_tensors + 1) * sizeof *w->tensors);
    w->tensors[w->n_tensors++] = t;
    w->data_size = align_up(t.offset + t.nbytes);
    return 0;
}

uint64_t gw_tensor_count(const GgufWriter *w) { return w->n_tensors; }

uint64_t gw_file_size(const GgufWriter *w) {
    uint64_t header = 4 + 4 + 8 + 8 + w->kv.len + w->infos.len; /* magic, version, counts, records */
    return w->n_tensors ? align_up(header) + w->data_size : header;
}
uint64_t gw_tensor_bytes(const GgufWriter *w, uint64_t i) { return w->tensors[i].nbytes; }

/* ---- writing ------------------------------------------------------------ */

static int write_bytes(FILE *f, const void *p, size_t n, char *err) {
    if (n && fwrite(p, 1, n, f) != n) {
        err_set(err, "write failed (disk full?)");
        return 1;
    }
    return 0;
}

static int write_zeros(FILE *f, size_t n, char *err) {
    static const uint8_t zeros[GW_ALIGN];
    while (n > 0) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (write_bytes(f, zeros, k, err)) return 1;
        n -= k;
    }
    return 0;
}

int gw_write_header(GgufWriter *w, FILE *f, char *err) {
    Buf head = {0};
    buf_append(&head, "GGUF", 4);
    put_u32(&head, 3);
    put_u64(&head, w->n_tensors);
    put_u64(&head, w->n_kv);
    int rc = write_bytes(f, head.data, head.len, err) ||
             write_bytes(f, w->kv.data, w->kv.len, err) ||
             write_bytes(f, w->infos.data, w->infos.len, err);
    uint64_t end = head.len + w->kv.len + w->infos.len;
    buf_free(&head);
    /* llama.cpp seeks to the aligned data start only when there are tensors */
    if (!rc && w->n_tensors > 0) rc = write_zeros(f, (size_t)(align_up(end) - end), err);
    w->header_done = true;
    return rc;
}

/* After tensor cur is complete: zero padding up to the next tensor's offset. */
static int close_tensor(GgufWriter *w, FILE *f, char *err) {
    const GwTensor *t = &w->tensors[w->cur];
    uint64_t end = t->offset + t->nbytes;
    if (write_zeros(f, (size_t)(align_up(end) - end), err)) return 1;
    w->cur++;
    w->cur_done = 0;
    return 0;
}

int gw_write_data(GgufWriter *w, FILE *f, const void *data, size_t n, char *err) {
    const uint8_t *p = data;
    if (!w->header_done) {
        err_set(err, "tensor data written before the header");
        return 1;
    }
    while (n > 0) {
        if (w->cur >= w->n_tensors) {
            err_set(err, "%zu bytes of tensor data beyond the declared tensors", n);
            return 1;
        }
        uint64_t left = w->tensors[w->cur].nbytes - w->cur_done;
        size_t k = n < left ? n : (size_t)left;
        if (write_bytes(f, p, k, err)) return 1;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == w->tensors[w->cur].nbytes && close_tensor(w, f, err)) return 1;
    }
    return 0;
}

int gw_finish(GgufWriter *w, FILE *f, char *err) {
    if (!w->header_done) {
        err_set(err, "header not written");
        return 1;
    }
    if (w->cur < w->n_tensors) {
        err_set(err, "tensor %llu of %llu incomplete: %llu of %llu bytes written",
                (unsigned long long)w->cur, (unsigned long long)w->n_tensors,
                (unsigned long long)w->cur_done,
                (unsigned long long)w->tensors[w->cur].nbytes);
        return 1;
    }
    if (fflush(f) != 0) {
        err_set(err, "write failed (disk full?)");
        return 1;
    }
    return 0;
}
