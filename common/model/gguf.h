/* gguf.h: a reader for GGUF v2/v3 files, mapped into memory.
 *
 * Every length, count, offset and type is checked against the file before it
 * is used, so a truncated or hostile file gets an error naming what is wrong
 * instead of an out-of-bounds read. Strings and arrays are views into the map. */
#ifndef GGUF_H
#define GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
    GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
    GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12,
} GgufType;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
    const char *ptr; /* not NUL-terminated */
    uint64_t len;
} GgufStr;

typedef struct {
    GgufStr key;
    GgufType type;
    union {              /* scalar value (type != ARRAY) */
        uint64_t u;      /* unsigned integer types and BOOL */
        int64_t i;       /* signed integer types */
        double f;        /* FLOAT32, FLOAT64 */
        GgufStr s;       /* STRING */
    } v;
    GgufType arr_type;   /* for ARRAY: element type (never ARRAY) */
    uint64_t arr_len;    /* for ARRAY: number of elements */
    const uint8_t *arr_data; /* for ARRAY: first element in the map */
} GgufKv;

typedef struct {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous dimension; unused dims are 1 */
    uint32_t type;              /* a DType id (dtype.h), checked to be known (not to be
                                 * one the engine runs: the model loader checks that) */
    uint64_t offset;            /* relative to the data section */
    uint64_t nbytes;
    const void *data;           /* into the map */
} GgufTensor;

typedef struct {
    const uint8_t *map;  /* the whole file */
    size_t size;
    bool owns_map;       /* mmap'd by gguf_open (vs a caller's buffer) */
    uint32_t version;
    uint64_t n_kv;
    GgufKv *kv;          /* [n_kv] */
    uint64_t n_tensors;
    GgufTensor *tensors; /* [n_tensors] */
    uint32_t alignment;
    size_t data_start;
} GgufFile;

/* Opens and validates a file. On failure returns non-zero, writes err (ERR_MAX)
 * and leaves *g empty (nothing to free). */
int gguf_open(GgufFile *g, const char *path, char *err);
/* The same on a caller-owned buffer that must outlive *g. */
int gguf_parse(GgufFile *g, const void *data, size_t size, char *err);
void gguf_close(GgufFile *g);

const char *gguf_type_name(GgufType t);
/* Bytes of one scalar value of type t; 0 for STRING, ARRAY and unknown types. */
int gguf_type_size(GgufType t);

const GgufKv *gguf_find(const GgufFile *g, const char *key);
bool gguf_str_eq(GgufStr s, const char *c);

/* Typed lookups. Each returns 0 on success; on failure writes err naming the key
 * and what was wrong (missing, wrong type, out of range). Integer getters accept
 * any integer type that fits. */
int gguf_get_u32(const GgufFile *g, const char *key, uint32_t *out, char *err);
int gguf_get_f32(const GgufFile *g, const char *key, float *out, char *err);
int gguf_get_bool(const GgufFile *g, const char *key, bool *out, char *err);
int gguf_get_str(const GgufFile *g, const char *key, GgufStr *out, char *err);
/* An array whose elements have type elem (e.g. GGUF_STRING or GGUF_INT32). */
int gguf_get_arr(const GgufFile *g, const char *key, GgufType elem, const GgufKv **out, char *err);
/* Views of every string of a string array; *out is malloc'ed, free it. */
int gguf_get_str_arr(const GgufFile *g, const char *key, GgufStr **out, uint64_t *n, char *err);
/* Element i of an integer array, converted to int64. */
int64_t gguf_arr_int(const GgufKv *kv, uint64_t i);

const GgufTensor *gguf_find_tensor(const GgufFile *g, const char *name);

#endif
