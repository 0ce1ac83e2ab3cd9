/* fuzz_json.c: any bytes as a JSON document. The parser must refuse what is
 * not JSON with an error; what it accepts, written back out (json_append_value),
 * must parse again and write out to exactly the same text. */
#include <string.h>

#include "fuzz.h"
#include "json.h"

/* Every key of every object is found by json_get. */
static void check_keys(const JsonValue *v) {
    for (size_t i = 0; (v->type == JSON_ARRAY || v->type == JSON_OBJECT) && i < v->n_items; i++) {
        if (v->type == JSON_OBJECT) FUZZ_ASSERT(json_get(v, v->keys[i]) != NULL);
        check_keys(&v->items[i]);
    }
}

static void write_value(Buf *b, const JsonValue *v) { json_append_value(b, v, ",", ":"); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[ERR_MAX];
    JsonValue *v = json_parse((const char *)data, size, err);
    if (!v) {
        FUZZ_ASSERT(strncmp(err, "json: ", 6) == 0);
        return 0;
    }
    Buf once = {0}, twice = {0};
    check_keys(v);
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
