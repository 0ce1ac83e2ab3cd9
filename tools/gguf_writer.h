/* gguf_writer.h: writes GGUF v3 files (the layout of common/model/gguf.h).
 *
 * Usage: collect metadata and tensor infos in memory, then stream:
 *
 *   GgufWriter *w = gw_new();
 *   gw_add_str(w, "general.architecture", "qwen3");
 *   gw_add_tensor(w, "token_embd.weight", DT_F32, 2, ne);
 *   gw_write_header(w, f, err);             // header, metadata, tensor infos, padding
 *   gw_write_data(w, f, bytes, n, err);     // each tensor's bytes in info order,
 *   ...                                     // in as many pieces as wanted
 *   gw_finish(w, f, err);                   // checks every byte was written
 *   gw_free(w);
 *
 * Tensor data is never held here, so files larger than memory can be written.
 * Every tensor starts at a multiple of GGUF_DEFAULT_ALIGNMENT (32) and the gaps
 * are zeros, as llama.cpp requires. */
#ifndef GGUF_WRITER_H
#define GGUF_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf.h"

typedef struct GgufWriter GgufWriter;

GgufWriter *gw_new(void);
void gw_free(GgufWriter *w);

/* Metadata. Keys must be unique: a duplicate ends the process with a message
 * (it is a bug in the caller, not a runtime condition). */
void gw_add_u8(GgufWriter *w, const char *key, uint8_t v);
void gw_add_i8(GgufWriter *w, const char *key, int8_t v);
void gw_add_u16(GgufWriter *w, const char *key, uint16_t v);
void gw_add_i16(GgufWriter *w, const char *key, int16_t v);
void gw_add_u32(GgufWriter *w, const char *key, uint32_t v);
void gw_add_i32(GgufWriter *w, const char *key, int32_t v);
void gw_add_f32(GgufWriter *w, const char *key, float v);
void gw_add_bool(GgufWriter *w, const char *key, bool v);
void gw_add_str(GgufWriter *w, const char *key, const char *v);
void gw_add_u64(GgufWriter *w, const char *key, uint64_t v);
void gw_add_i64(GgufWriter *w, const char *key, int64_t v);
void gw_add_f64(GgufWriter *w, const char *key, double v);
/* An array of n numeric or bool values of type elem, read from data in the
 * host's (little-endian) layout: e.g. GGUF_INT32 with an int32_t[n]. */
void gw_add_arr(GgufWriter *w, const char *key, GgufType elem, const void *data, uint64_t n);
/* An array of n NUL-terminated strings. */
void gw_add_str_arr(GgufWriter *w, const char *key, const char *const *strs, uint64_t n);

/* Declares the next tensor (data follows in this order). Returns non-zero and
 * writes err if the name, shape or type is invalid (e.g. ne[0] not a multiple
 * of the type's block size). */
int gw_add_tensor(GgufWriter *w, const char *name, uint32_t type, uint32_t n_dims,
                  const int64_t *ne, char *err);

uint64_t gw_tensor_count(const GgufWriter *w);
/* The size in bytes of the whole file, as declared so far (to check disk space first). */
uint64_t gw_file_size(const GgufWriter *w);
/* Bytes of tensor i's data (without padding). */
uint64_t gw_tensor_bytes(const GgufWriter *w, uint64_t i);

int gw_write_header(GgufWriter *w, FILE *f, char *err);
/* Appends n bytes of tensor data; pieces may span tensors. Pads to the next
 * tensor's offset automatically when a tensor is complete. */
int gw_write_data(GgufWriter *w, FILE *f, const void *data, size_t n, char *err);
/* Fails unless every declared tensor byte has been written. */
int gw_finish(GgufWriter *w, FILE *f, char *err);

#endif
