/* fuzz_json.c: any bytes as a JSON document. The parser must refuse what is
 * not JSON with an error; what it accepts, written back out (strings with
 * json_append_string, numbers with json_append_number), must parse again and
 * write out to exactly the same text. */
#include <string.h>

#include "fuzz.h"
#include "json.h"

static void write_value(Buf *b, const JsonValue *v) {
    switch (v->type) {
    case JSON_NULL: buf_puts(b, "null"); break;
    case JSON_BOOL: buf_puts(b, v->boolean ? "true" : "false"); break;
    case JSON_NUMBER: json_append_number(b, v->number); break;
    case JSON_STRING: json_append_string(b, v->string, v->string_len); break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        buf_puts(b, v->type == JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->n_items; i++) {
            if (i) buf_puts(b, ",");
            if (v->type == JSON_OBJECT) {
                json_append_string(b, v->keys[i], strlen(v->keys[i]));
                buf_puts(b, ":");
                FUZZ_ASSERT(json_get(v, v->keys[i]) != NULL);
            }
            write_value(b, &v->items[i]);
        }
        buf_puts(b, v->type == JSON_ARRAY ? "]" : "}");
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[ERR_MAX];
    JsonValue *v = json_parse((const char *)data, size, err);
    if (!v) {
        FUZZ_ASSERT(strncmp(err, "json: ", 6) == 0);
        return 0;
    }
    Buf once = {0}, twice = {0};
    write_value(&once, v);
    JsonValue *again = json_parse(once.data, once.len, err);
    if (!again) fprintf(stderr, "written back: %s\nrefused: %s\n", once.data, err);
    FUZZ_ASSERT(again != NULL);
    write_value(&twice, again);
    FUZZ_ASSERT(once.len == twice.len && memcmp(once.data, twice.data, once.len) == 0);
    buf_free(&once);
    buf_free(&twice);
    json_free(again);
    json_free(v);
    return 0;
}
